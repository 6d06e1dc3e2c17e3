//! `cargo xtask import-vendor <path>`: copies perf's vendor JSON (`tools/perf/pmu-events/arch`)
//! byte for byte into `pmu-events/arch/` and records where it came from in `pmu-events/UPSTREAM.md`,
//! or, for a kernel of another version than the base tree's, stores it as a vintage:
//! `pmu-events/vintage/X.Y/` with only what differs from the base (new files whole, changed files
//! as line deltas, removed files listed), rebuilt byte for byte by
//! `tmetric_pmu_events::vintage::materialize`.
//!
//! The source is a Linux source tree, a kernel source tarball (`linux-source-6.12.tar.xz`, unpacked
//! with the `tar` command) or a Debian `linux-source-*` package (unpacked with `dpkg-deb`).
//! Upstream's `arch/common/` (perf 7.x) is vendor data like the rest; tmetric's own generic metrics
//! live in `pmu-events/generic/`, which the import never touches.
//!
//! perf 7.x's build also generates JSON with Python before jevents.py runs (`extra-metrics.json`
//! and `extra-metricgroups.json` per model, holding the `lpm_*` metrics, and the legacy cache
//! events): `perf_build` runs those scripts as perf's `Build` does and the import stores their
//! output with the vendor's files, so the stored tree is the one perf compiles and neither
//! `regen` nor a fresh clone needs Python.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

mod perf_build;
pub use perf_build::{Generated, python_from_env};

/// Where the vendor tree sits in a kernel source tree.
const ARCH_IN_KERNEL: &str = "tools/perf/pmu-events/arch";

/// How many entries each list of the change summary shows.
const LIST_LIMIT: usize = 20;

/// Entry point: `args` are the words after `import-vendor`.
pub fn run(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask import-vendor <linux source tree | linux-source-X.Y.tar.xz | linux-source-X.Y_*.deb> [--changes FILE] [--vintage X.Y]";
    let mut source = None;
    let mut changes_file = None;
    let mut vintage = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--changes" => changes_file = Some(PathBuf::from(words.next().context(USAGE)?)),
            "--vintage" => vintage = Some(words.next().context(USAGE)?.clone()),
            _ if source.is_none() && !word.starts_with("--") => source = Some(word.clone()),
            _ => bail!("unexpected `{word}`; {USAGE}"),
        }
    }
    let Some(source) = source else { bail!(USAGE) };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask lives in the workspace")?
        .to_path_buf();
    let pmu_events = repo.join("pmu-events");
    let after = Scratch::new()?;
    let summary = import(&repo, Path::new(&source), vintage.as_deref(), &python_from_env())?;
    // The tree before the import, for the change summary; none yet is an empty tree.
    let stored = summary.vintage.as_deref();
    let old_tree = summary.old_base.take_tree();
    if let Some(line) = summary.generated.describe() {
        println!("{line}");
    }
    println!(
        "imported {} files from {} as {}: {} added, {} changed, {} removed, {} unchanged",
        summary.files,
        summary.origin,
        stored.map_or("the base tree `pmu-events/arch`".to_string(), |v| format!(
            "vintage {v} (`pmu-events/vintage/{v}`, {} delta files, {} whole files, {} bytes)",
            summary.deltas, summary.wholes, summary.stored_bytes
        )),
        summary.added,
        summary.changed,
        summary.removed,
        summary.unchanged
    );
    // Loading only fails without a tree; everything else is a diagnostic, shown here and
    // written by regen to crates/catalog/src/generated/diagnostics.txt.
    let tree = tmetric_pmu_events::load_vintage(&pmu_events, stored, after.0.path())
        .map_err(|err| anyhow::anyhow!("loading the imported tree: {err}"))?;
    let tables: usize = tree.arches.iter().map(|a| a.tables.len()).sum();
    let events: usize = tree.arches.iter().flat_map(|a| &a.tables).map(|t| t.events.len()).sum();
    let metrics: usize = tree.arches.iter().flat_map(|a| &a.tables).map(|t| t.metrics.len()).sum();
    println!(
        "loads: {} architectures, {tables} tables, {events} events, {metrics} metrics",
        tree.arches.len()
    );
    crate::diagnostics::print_summary(&tree, 10);
    let empty = tmetric_pmu_events::Tree {
        root: pmu_events.join("arch"),
        arches: Vec::new(),
        common: tmetric_pmu_events::Table::default(),
        diagnostics: Vec::new(),
    };
    let changes = crate::changes::compare(old_tree.as_ref().unwrap_or(&empty), &tree);
    let text = crate::changes::render(&changes, LIST_LIMIT);
    println!("\n{text}");
    if let Some(file) = changes_file {
        let full = crate::changes::render(&changes, usize::MAX);
        fs::write(&file, full).with_context(|| format!("writing {}", file.display()))?;
        println!("the full change lists are in {}", file.display());
    }
    println!(
        "next: run `cargo xtask regen` and review the diff of pmu-events/ and the generated tables"
    );
    Ok(())
}

/// The tree as it was before the import (for the change summary): the base tree, or the vintage
/// replaced, or for a new vintage the base tree it is stored against.
#[derive(Debug, Default)]
pub struct OldBase(Option<tmetric_pmu_events::Tree>);

impl OldBase {
    fn take_tree(&self) -> Option<tmetric_pmu_events::Tree> {
        self.0.clone()
    }
}

/// What an import did.
#[derive(Debug, Default)]
pub struct Summary {
    /// The vintage stored (`7.2`), or `None` when the base tree was replaced.
    pub vintage: Option<String>,
    /// The vintage was stored before and is replaced.
    pub replaced: bool,
    /// The tree before the import.
    pub old_base: OldBase,
    /// Delta files and whole files a vintage stores, and their bytes.
    pub deltas: usize,
    /// Whole files a vintage stores.
    pub wholes: usize,
    /// Bytes a vintage stores.
    pub stored_bytes: u64,
    /// How the source is named in UPSTREAM.md.
    pub origin: String,
    /// Files now in the vendor tree (without `common/`).
    pub files: usize,
    /// New files.
    pub added: usize,
    /// Files whose bytes changed.
    pub changed: usize,
    /// Files deleted because they are gone upstream.
    pub removed: usize,
    /// Files already identical.
    pub unchanged: usize,
    /// What perf's build-time generators added to the vendor tree.
    pub generated: Generated,
}

/// What is known about the source.
#[derive(Debug, Default)]
struct Provenance {
    /// e.g. "Debian package `linux-source-6.12` version `6.12.117-1~deb12u1`".
    source: String,
    /// File or directory name the user gave (never an absolute path, to keep UPSTREAM.md stable).
    given: String,
    /// Kernel version from the top-level Makefile, e.g. "6.12.117".
    kernel: Option<String>,
}

use tmetric_pmu_events::vintage::major_minor;

/// The base tree's kernel version (`6.12`), from `pmu-events/UPSTREAM.md`.
fn base_version(repo: &Path) -> Option<String> {
    tmetric_pmu_events::vintage::base_version(&repo.join("pmu-events")).map(|(v, _)| v)
}

/// Imports from `source` into `repo/pmu-events`: the base tree when the kernel's version is the
/// base's (or `vintage` says so), else vintage `X.Y` (or `vintage`). The tree stored is the one
/// perf's build compiles: the vendor JSON plus what perf's generators write, run with `python`.
pub fn import(
    repo: &Path,
    source: &Path,
    vintage: Option<&str>,
    python: &std::ffi::OsString,
) -> Result<Summary> {
    let scratch = Scratch::new()?;
    let given = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| source.display().to_string());
    if !source.exists() {
        bail!("`{}` does not exist", source.display());
    }
    let (kernel_root, mut provenance) = if source.is_dir() {
        (
            source.to_path_buf(),
            Provenance { source: "Linux source tree".into(), given, kernel: None },
        )
    } else if given.ends_with(".deb") {
        unpack_deb(source, scratch.0.path(), given)?
    } else if is_tarball(&given) {
        let root = unpack_tarball(source, &scratch.0.path().join("tar"))?;
        let package = tarball_stem(&given);
        (
            root,
            Provenance {
                source: format!("kernel source tarball `{package}`"),
                given,
                kernel: None,
            },
        )
    } else {
        bail!("`{}` is neither a directory, a .tar.* tarball nor a .deb package", source.display());
    };
    provenance.kernel = kernel_version(&kernel_root.join("Makefile"));
    let vendor_tree = find_arch_dir(&kernel_root)?;
    let (upstream_arch, generated) =
        perf_build::build_tree(python, &vendor_tree, scratch.0.path())?;
    let version = match (vintage, provenance.kernel.as_deref().and_then(major_minor)) {
        (Some(given), _) => given.to_string(),
        (None, Some(found)) => found,
        (None, None) => bail!(
            "`{}` has no top-level Makefile to tell the kernel version from; say which vintage it is with `--vintage X.Y`",
            source.display()
        ),
    };
    if tmetric_pmu_events::vintage::version_key(&version).contains(&u32::MAX) {
        bail!("`{version}` is not a kernel version like 7.2");
    }
    let vendor_arch = repo.join("pmu-events/arch");
    let base = base_version(repo);
    if base.as_deref().is_some_and(|base| base != version) && vendor_arch.is_dir() {
        // Loaded before store_vintage replaces it: what the change summary compares with.
        let before = Scratch::new()?;
        let stored_dir = repo.join(tmetric_pmu_events::vintage::VINTAGE_DIR_PATH).join(&version);
        let old = tmetric_pmu_events::load_vintage(
            &repo.join("pmu-events"),
            stored_dir.is_dir().then_some(version.as_str()),
            before.0.path(),
        )
        .ok();
        let mut summary = store_vintage(repo, &upstream_arch, &version)?;
        summary.old_base = OldBase(old);
        summary.generated = generated;
        summary.origin = format!("{} ({})", provenance.source, provenance.given);
        let dir = repo.join(tmetric_pmu_events::vintage::VINTAGE_DIR_PATH).join(&version);
        let upstream_md =
            render_upstream(&provenance, &count_files(&upstream_arch)?, Some((&version, &summary)));
        let upstream_md = upstream_md + &generated_note(&summary.generated);
        fs::write(dir.join(tmetric_pmu_events::vintage::UPSTREAM_FILE), upstream_md)
            .with_context(|| format!("writing {}", dir.display()))?;
        return Ok(summary);
    }
    let old_base = tmetric_pmu_events::load_tree(&vendor_arch).ok();
    let mut summary = sync_tree(&upstream_arch, &vendor_arch)?;
    summary.generated = generated;
    summary.old_base = OldBase(old_base);
    summary.origin = format!("{} ({})", provenance.source, provenance.given);
    let upstream_md = render_upstream(&provenance, &count_files(&upstream_arch)?, None)
        + &generated_note(&summary.generated);
    let upstream_path = repo.join("pmu-events/UPSTREAM.md");
    if fs::read_to_string(&upstream_path).ok().as_deref() != Some(upstream_md.as_str()) {
        fs::write(&upstream_path, upstream_md)
            .with_context(|| format!("writing {}", upstream_path.display()))?;
    }
    Ok(summary)
}

/// A private temporary directory (fresh name, 0700) removed when dropped, also on errors.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Result<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix("tmetric-import-vendor-")
            .tempdir()
            .context("creating a temporary directory")?;
        Ok(Scratch(dir))
    }
}

fn is_tarball(name: &str) -> bool {
    [".tar", ".tar.xz", ".txz", ".tar.gz", ".tgz", ".tar.bz2", ".tar.zst"]
        .iter()
        .any(|ext| name.ends_with(ext))
}

/// `linux-source-6.12.tar.xz` -> `linux-source-6.12`.
fn tarball_stem(name: &str) -> &str {
    let stem = name.find(".tar").map_or(name, |cut| &name[..cut]);
    stem.strip_suffix(".txz").or_else(|| stem.strip_suffix(".tgz")).unwrap_or(stem)
}

/// Runs a command, failing with its stderr.
fn run_command(command: &mut Command, what: &str) -> Result<String> {
    let output = command.output().with_context(|| format!("running {what} (is it installed?)"))?;
    if !output.status.success() {
        bail!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Unpacks only perf's `pmu-events` directory (the vendor tree and, in perf 7.x, the generators
/// its build runs) and the top-level Makefile of a kernel tarball into `dest`, and returns the
/// kernel tree root inside it.
fn unpack_tarball(tarball: &Path, dest: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    // With --no-wildcards-match-slash, `*` stays within one path component, so `*/Makefile` is
    // only the top-level Makefile; a matched directory is extracted with everything under it.
    run_command(
        Command::new("tar")
            .arg("-xf")
            .arg(tarball)
            .arg("-C")
            .arg(dest)
            .args(["--wildcards", "--no-wildcards-match-slash"])
            .arg("*/tools/perf/pmu-events")
            .arg("*/Makefile"),
        &format!("tar on {}", tarball.display()),
    )
    .with_context(|| {
        format!(
            "`{}` should be a kernel source tarball holding {ARCH_IN_KERNEL}",
            tarball.display()
        )
    })?;
    let tops: Vec<PathBuf> = fs::read_dir(dest)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    match tops.as_slice() {
        [top] => Ok(top.clone()),
        _ => bail!(
            "`{}` should hold one top-level directory, found {}",
            tarball.display(),
            tops.len()
        ),
    }
}

/// Unpacks a Debian `linux-source-*` package, then the kernel tarball inside it.
fn unpack_deb(deb: &Path, scratch: &Path, given: String) -> Result<(PathBuf, Provenance)> {
    let fields = run_command(
        Command::new("dpkg-deb").arg("--field").arg(deb).args(["Package", "Version"]),
        &format!("dpkg-deb --field on {}", deb.display()),
    )?;
    let field = |name: &str| {
        fields
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")).map(|v| v.trim().to_string()))
    };
    let (Some(package), Some(version)) = (field("Package"), field("Version")) else {
        bail!("`{}` has no Package/Version fields; is it a .deb?", deb.display());
    };
    let unpacked = scratch.join("deb");
    run_command(
        Command::new("dpkg-deb").arg("-x").arg(deb).arg(&unpacked),
        &format!("dpkg-deb -x on {}", deb.display()),
    )?;
    let src_dir = unpacked.join("usr/src");
    let tarballs: Vec<PathBuf> = fs::read_dir(&src_dir)
        .with_context(|| {
            format!("`{}` has no usr/src; expected a linux-source package", deb.display())
        })?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| is_tarball(&n.to_string_lossy())))
        .collect();
    let [tarball] = tarballs.as_slice() else {
        bail!(
            "`{}` should hold one kernel tarball in usr/src, found {}",
            deb.display(),
            tarballs.len()
        );
    };
    let root = unpack_tarball(tarball, &scratch.join("tar"))?;
    let inner = tarball.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let source = format!("Debian package `{package}` version `{version}`, file `usr/src/{inner}`");
    Ok((root, Provenance { source, given, kernel: None }))
}

/// `VERSION.PATCHLEVEL.SUBLEVEL` (plus EXTRAVERSION) from a kernel Makefile.
fn kernel_version(makefile: &Path) -> Option<String> {
    let text = fs::read_to_string(makefile).ok()?;
    let value = |key: &str| {
        text.lines().take(20).find_map(|line| {
            line.strip_prefix(key)?.trim_start().strip_prefix('=').map(|v| v.trim().to_string())
        })
    };
    let (version, patchlevel) = (value("VERSION")?, value("PATCHLEVEL")?);
    let mut full = format!("{version}.{patchlevel}");
    if let Some(sublevel) = value("SUBLEVEL").filter(|s| !s.is_empty()) {
        full = format!("{full}.{sublevel}");
    }
    full.push_str(&value("EXTRAVERSION").unwrap_or_default());
    Some(full)
}

/// The vendor tree of a kernel source tree (or the argument itself if it already is one).
fn find_arch_dir(kernel_root: &Path) -> Result<PathBuf> {
    let candidates = [
        kernel_root.join(ARCH_IN_KERNEL),
        kernel_root.join("pmu-events/arch"),
        kernel_root.to_path_buf(),
    ];
    candidates.into_iter().find(|dir| dir.join("x86/mapfile.csv").is_file()).with_context(|| {
        format!(
            "no `{ARCH_IN_KERNEL}/x86/mapfile.csv` under `{}`; is it a Linux source tree?",
            kernel_root.display()
        )
    })
}

/// Files under `dir`, relative, with `/` separators, sorted. Only regular files are allowed.
fn list_files(dir: &Path) -> Result<BTreeSet<String>> {
    fn walk(top: &Path, dir: &Path, rel: &str, out: &mut BTreeSet<String>) -> Result<()> {
        for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let name = entry
                .file_name()
                .into_string()
                .map_err(|n| anyhow::anyhow!("non-UTF-8 file name {n:?}"))?;
            let rel = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let kind = entry.file_type()?;
            // perf 7.x links some RISC-V models' files to another model's; a link is read as
            // the file it names (stored as a copy), if that file is in the tree.
            let linked_file = kind.is_symlink()
                && fs::canonicalize(entry.path())
                    .is_ok_and(|target| target.starts_with(top) && target.is_file());
            if kind.is_dir() {
                walk(top, &entry.path(), &rel, out)?;
            } else if kind.is_file() || linked_file {
                out.insert(rel);
            } else {
                bail!(
                    "`{}` is neither a file nor a directory (nor a link to a file in the tree); the vendor tree holds only files",
                    entry.path().display()
                );
            }
        }
        Ok(())
    }
    let mut files = BTreeSet::new();
    if dir.exists() {
        let top = fs::canonicalize(dir).with_context(|| format!("reading {}", dir.display()))?;
        walk(&top, dir, "", &mut files)?;
    }
    Ok(files)
}

/// Makes `dst` an exact copy of `src`, writing only files whose bytes differ.
fn sync_tree(src: &Path, dst: &Path) -> Result<Summary> {
    let upstream = list_files(src)?;
    let mut summary = Summary { files: upstream.len(), ..Summary::default() };
    for rel in &upstream {
        let from = src.join(rel);
        let to = dst.join(rel);
        let bytes = fs::read(&from).with_context(|| format!("reading {}", from.display()))?;
        match fs::read(&to) {
            Ok(existing) if existing == bytes => summary.unchanged += 1,
            existing => {
                if existing.is_ok() {
                    summary.changed += 1;
                } else {
                    summary.added += 1;
                }
                if let Some(parent) = to.parent() {
                    fs::create_dir_all(parent)
                        .with_context(|| format!("creating {}", parent.display()))?;
                }
                fs::write(&to, bytes).with_context(|| format!("writing {}", to.display()))?;
            }
        }
    }
    for rel in list_files(dst)? {
        if !upstream.contains(&rel) {
            let path = dst.join(&rel);
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            summary.removed += 1;
        }
    }
    remove_empty_dirs(dst)?;
    Ok(summary)
}

/// Stores `src` as vintage `version`: `pmu-events/vintage/X.Y/` made anew, holding each file that
/// differs from the base tree as a line delta (or whole, when it is new, not text, or the delta
/// would be larger) and `removed.txt`, the base files this vintage lacks.
fn store_vintage(repo: &Path, src: &Path, version: &str) -> Result<Summary> {
    use tmetric_pmu_events::vintage::{DELTA_SUFFIX, REMOVED_FILE, VINTAGE_DIR_PATH};
    let base_dir = repo.join("pmu-events/arch");
    let dir = repo.join(VINTAGE_DIR_PATH).join(version);
    let replaced = dir.exists();
    if replaced {
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let upstream = list_files(src)?;
    let base = list_files(&base_dir)?;
    let mut summary = Summary {
        vintage: Some(version.to_string()),
        replaced,
        files: upstream.len(),
        ..Summary::default()
    };
    let write = |rel: &str, bytes: &[u8]| -> Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    };
    for rel in &upstream {
        let bytes = fs::read(src.join(rel)).with_context(|| format!("reading {rel}"))?;
        let old = base.contains(rel).then(|| fs::read(base_dir.join(rel))).transpose()?;
        let delta = match &old {
            Some(old) if *old == bytes => {
                summary.unchanged += 1;
                continue;
            }
            Some(old) => {
                summary.changed += 1;
                line_delta(old, &bytes).filter(|d| d.len() < bytes.len())
            }
            None => {
                summary.added += 1;
                None
            }
        };
        match delta {
            Some(delta) => {
                summary.deltas += 1;
                summary.stored_bytes += delta.len() as u64;
                write(&format!("{rel}{DELTA_SUFFIX}"), delta.as_bytes())?;
            }
            None => {
                summary.wholes += 1;
                summary.stored_bytes += bytes.len() as u64;
                write(rel, &bytes)?;
            }
        }
    }
    let removed: Vec<&String> = base.iter().filter(|rel| !upstream.contains(*rel)).collect();
    summary.removed = removed.len();
    let list: String = removed.iter().map(|rel| format!("{rel}\n")).collect();
    write(REMOVED_FILE, list.as_bytes())?;
    // Check the round trip now rather than at the next regen.
    let rebuilt = tmetric_pmu_events::vintage::files(&repo.join("pmu-events"), version)
        .map_err(|err| anyhow::anyhow!("{err}"))?;
    if rebuilt.len() != upstream.len()
        || rebuilt.iter().any(|(rel, bytes)| fs::read(src.join(rel)).ok().as_ref() != Some(bytes))
    {
        bail!(
            "vintage {version} does not rebuild the imported tree byte for byte; this is a bug in the delta writer"
        );
    }
    Ok(summary)
}

/// A line delta from `old` to `new` (both UTF-8), or `None` for other bytes.
fn line_delta(old: &[u8], new: &[u8]) -> Option<String> {
    use tmetric_pmu_events::vintage::{Step, lines, render_delta};
    let (old_text, new_text) = (std::str::from_utf8(old).ok()?, std::str::from_utf8(new).ok()?);
    let (a, b) = (lines(old_text), lines(new_text));
    let mut steps: Vec<Step<'_>> = Vec::new();
    fn push<'a>(steps: &mut Vec<Step<'a>>, step: Step<'a>) {
        match (steps.last_mut(), step) {
            (Some(Step::Keep(n)), Step::Keep(m)) | (Some(Step::Drop(n)), Step::Drop(m)) => *n += m,
            (Some(Step::Add(x)), Step::Add(y)) => x.extend(y),
            (_, step) => steps.push(step),
        }
    }
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, &a, &b) {
        match op {
            similar::DiffOp::Equal { len, .. } => push(&mut steps, Step::Keep(len)),
            similar::DiffOp::Delete { old_len, .. } => push(&mut steps, Step::Drop(old_len)),
            similar::DiffOp::Insert { new_index, new_len, .. } => {
                push(&mut steps, Step::Add(b[new_index..new_index + new_len].to_vec()))
            }
            similar::DiffOp::Replace { old_len, new_index, new_len, .. } => {
                push(&mut steps, Step::Drop(old_len));
                push(&mut steps, Step::Add(b[new_index..new_index + new_len].to_vec()));
            }
        }
    }
    Some(render_delta(old, &steps))
}

/// Removes directories left empty by deleted files (bottom-up); keeps `dst` itself.
fn remove_empty_dirs(dir: &Path) -> Result<bool> {
    let mut empty = true;
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() && remove_empty_dirs(&entry.path())? {
            fs::remove_dir(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
        } else {
            empty = false;
        }
    }
    Ok(empty)
}

/// Per architecture: (files, json files, bytes).
fn count_files(arch_dir: &Path) -> Result<BTreeMap<String, (usize, usize, u64)>> {
    let mut counts: BTreeMap<String, (usize, usize, u64)> = BTreeMap::new();
    for rel in list_files(arch_dir)? {
        let arch = rel.split('/').next().unwrap_or_default().to_string();
        let size = fs::metadata(arch_dir.join(&rel))?.len();
        let entry = counts.entry(arch).or_default();
        entry.0 += 1;
        entry.1 += usize::from(rel.ends_with(".json"));
        entry.2 += size;
    }
    Ok(counts)
}

/// UPSTREAM.md's section on the files perf's build generates (empty when none).
fn generated_note(generated: &Generated) -> String {
    match generated.describe() {
        Some(line) => format!(
            "\n## Generated at import\n\n{line}. import-vendor runs them as perf's build does (each against the vendor tree, its standard output stored unchanged) and stores their files with the vendor's, so `cargo xtask regen` compiles them like any vendor JSON and never runs Python. The counts per architecture above include them.\n"
        ),
        None => String::new(),
    }
}

/// UPSTREAM.md: deterministic (no dates, no absolute paths), so re-importing the same source
/// leaves it unchanged.
fn render_upstream(
    provenance: &Provenance,
    counts: &BTreeMap<String, (usize, usize, u64)>,
    vintage: Option<(&str, &Summary)>,
) -> String {
    let total = counts.values().fold((0, 0, 0), |acc, c| (acc.0 + c.0, acc.1 + c.1, acc.2 + c.2));
    let mut md = String::new();
    match vintage {
        None => {
            md.push_str("# Upstream of `pmu-events/arch`\n\n");
            md.push_str(&format!(
                "Everything in `pmu-events/arch/` is a byte-for-byte copy of `{ARCH_IN_KERNEL}/` from the Linux kernel source: the base tree, perf's vintage that tmetric matches by default. Other vintages are stored beside it in `pmu-events/vintage/X.Y/`.\n"
            ));
        }
        Some((version, summary)) => {
            md.push_str(&format!("# Upstream of vintage {version}\n\n"));
            md.push_str(&format!(
                "This directory and `pmu-events/arch/` together rebuild `{ARCH_IN_KERNEL}/` of the Linux kernel source byte for byte: files that differ from the base tree, whole (new files) or as line deltas (`*.delta`, against `pmu-events/arch/`), and `removed.txt`, the base files this vintage lacks. {} files differ from the base: {} added, {} changed, {} removed; stored as {} deltas and {} whole files, {} bytes.\n",
                summary.added + summary.changed + summary.removed,
                summary.added,
                summary.changed,
                summary.removed,
                summary.deltas,
                summary.wholes,
                summary.stored_bytes
            ));
        }
    }
    md.push_str(
        "This file is written by `cargo xtask import-vendor`; do not edit either by hand.\n\n",
    );
    md.push_str(&format!("- Source: {} (given as `{}`).\n", provenance.source, provenance.given));
    match &provenance.kernel {
        Some(kernel) => md.push_str(&format!("- Kernel version: {kernel} (top-level Makefile).\n")),
        None => md.push_str("- Kernel version: unknown (no top-level Makefile in the source).\n"),
    }
    md.push_str(&format!("- Files: {} ({} json), {} bytes.\n\n", total.0, total.1, total.2));
    md.push_str("## Updating\n\n");
    md.push_str("```\ncargo xtask import-vendor <linux source tree | linux-source-X.Y.tar.xz | linux-source-X.Y_*.deb>\ncargo xtask regen\n```\n\n");
    md.push_str("A kernel of the base tree's version replaces `pmu-events/arch` (changed files overwritten, files gone upstream deleted, this file rewritten); another version is stored as `pmu-events/vintage/X.Y/`, made anew. A vintage's deltas are against the base tree: replacing the base means importing the vintages again.\n");
    md.push_str(
        "`pmu-events/generic/` is tmetric's own: generic metrics that apply to every model of every architecture (see its README.md). The import never touches it.\n\n",
    );
    md.push_str("## Files per architecture\n\n| arch | files | json files | bytes |\n|---|---:|---:|---:|\n");
    for (arch, (files, json, bytes)) in counts {
        md.push_str(&format!("| {arch} | {files} | {json} | {bytes} |\n"));
    }
    md.push_str(&format!("| total | {} | {} | {} |\n", total.0, total.1, total.2));
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// Syncing copies, updates and deletes upstream files, upstream's `common/` included.
    #[test]
    fn sync_mirrors_every_upstream_file() {
        let base = tempfile::tempdir().unwrap();
        let (src, dst) = (base.path().join("src"), base.path().join("dst"));
        write(&src.join("x86/mapfile.csv"), "new map");
        write(&src.join("x86/a/cache.json"), "[]");
        write(&dst.join("x86/mapfile.csv"), "old map");
        write(&dst.join("x86/a/cache.json"), "[]");
        write(&dst.join("x86/gone/old.json"), "[]");
        write(&src.join("common/common/metrics.json"), "[]");
        let summary = sync_tree(&src, &dst).unwrap();
        assert_eq!(
            (summary.files, summary.added, summary.changed, summary.removed, summary.unchanged),
            (3, 1, 1, 1, 1)
        );
        assert_eq!(
            list_files(&dst).unwrap().into_iter().collect::<Vec<_>>(),
            ["common/common/metrics.json", "x86/a/cache.json", "x86/mapfile.csv"]
        );
        assert_eq!(fs::read_to_string(dst.join("x86/mapfile.csv")).unwrap(), "new map");
        assert!(!dst.join("x86/gone").exists());
    }

    /// A kernel tree of another version than the base, with perf 7.x's `arch/common`: stored
    /// as a vintage that rebuilds it byte for byte, whose common table is perf's, with
    /// tmetric's generic metrics where perf has none of the same meaning.
    #[test]
    fn another_version_is_stored_as_a_vintage_with_upstream_common() {
        let scratch = tempfile::tempdir().unwrap();
        let (repo, kernel) = (scratch.path().join("repo"), scratch.path().join("linux-7.2"));
        let base = repo.join("pmu-events/arch");
        // Forty events: a one-line change is stored as a delta, smaller than the file.
        let objects: Vec<String> = (1..=40)
            .map(|n| format!("    {{\n        \"EventName\": \"E{n}\",\n        \"EventCode\": \"0x{n:x}\"\n    }}"))
            .collect();
        let cache = format!("[\n{}\n]\n", objects.join(",\n"));
        let cache = cache.as_str();
        write(
            &base.join("x86/mapfile.csv"),
            "Family-model,Version,Filename,EventType\nGenuineIntel-6-55,v1,a,core\n",
        );
        write(&base.join("x86/a/cache.json"), cache);
        write(&base.join("x86/gone/cache.json"), "[]\n");
        write(
            &repo.join("pmu-events/UPSTREAM.md"),
            "- Kernel version: 6.12.117 (top-level Makefile).\n",
        );
        let generic = "[\n{\"MetricName\": \"cpus_utilized\", \"MetricExpr\": \"task\\\\-clock / (duration_time * 1e9)\"},\n{\"MetricName\": \"tsc_rate\", \"MetricExpr\": \"msr@tsc@ / task\\\\-clock\"}\n]\n";
        write(&repo.join("pmu-events/generic/metrics.json"), generic);
        let up = kernel.join(ARCH_IN_KERNEL);
        write(&kernel.join("Makefile"), "VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 13\n");
        write(
            &up.join("x86/mapfile.csv"),
            "Family-model,Version,Filename,EventType\nGenuineIntel-6-55,v1,a,core\n",
        );
        let changed = cache.replace("\"0x5\"", "\"0x55\"").replace("]\n", "]");
        write(&up.join("x86/a/cache.json"), &changed);
        write(&up.join("x86/new/cache.json"), cache);
        let common = "[\n{\"MetricName\": \"CPUs_utilized\", \"MetricExpr\": \"task\\\\-clock / (duration_time * 1e9)\", \"MetricGroup\": \"Default\"}\n]\n";
        write(&up.join("common/common/metrics.json"), common);

        write(&up.with_file_name("Build"), "JEVENTS_PY = pmu-events/jevents.py\n");
        let summary = import(&repo, &kernel, None, &"python3".into()).unwrap();
        assert_eq!(summary.vintage.as_deref(), Some("7.2"));
        assert_eq!((summary.added, summary.changed, summary.removed), (2, 1, 1));
        let stored = repo.join("pmu-events/vintage/7.2");
        assert!(stored.join("x86/a/cache.json.delta").is_file());
        assert!(stored.join("common/common/metrics.json").is_file());
        assert_eq!(
            fs::read_to_string(stored.join("removed.txt")).unwrap(),
            "x86/gone/cache.json\n"
        );
        // The base tree is left as it was.
        assert_eq!(fs::read_to_string(base.join("x86/a/cache.json")).unwrap(), cache);
        let files = tmetric_pmu_events::vintage::files(&repo.join("pmu-events"), "7.2").unwrap();
        let names: Vec<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
        assert_eq!(
            names,
            [
                "common/common/metrics.json",
                "x86/a/cache.json",
                "x86/mapfile.csv",
                "x86/new/cache.json"
            ]
        );
        assert_eq!(files[1].1, changed.as_bytes());

        let dir = tempfile::tempdir().unwrap();
        let tree =
            tmetric_pmu_events::load_vintage(&repo.join("pmu-events"), Some("7.2"), dir.path())
                .unwrap();
        let names: Vec<&str> = tree.common.metrics.iter().map(|m| m.name.as_str()).collect();
        // perf's CPUs_utilized wins over tmetric's cpus_utilized; tsc_rate stays.
        assert_eq!(names, ["CPUs_utilized", "tsc_rate"]);
        let base_tree =
            tmetric_pmu_events::load_vintage(&repo.join("pmu-events"), None, dir.path()).unwrap();
        let names: Vec<&str> = base_tree.common.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["cpus_utilized", "tsc_rate"]);

        // A base file changed since the vintage was stored is an error naming the delta.
        write(&base.join("x86/a/cache.json"), "[]\n");
        let err = tmetric_pmu_events::vintage::files(&repo.join("pmu-events"), "7.2").unwrap_err();
        assert!(
            err.to_string().contains("x86/a/cache.json.delta:2: made from another base file"),
            "{err}"
        );
    }

    /// A perf 7.2 kernel tree whose `Build` runs `intel_metrics.py`, here the shell script
    /// `script` (run with `sh` in place of Python), and a repository with a 6.12 base.
    fn generator_fixture(script: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let scratch = tempfile::tempdir().unwrap();
        let (repo, kernel) = (scratch.path().join("repo"), scratch.path().join("linux-7.2"));
        let mapfile =
            "Family-model,Version,Filename,EventType\nGenuineIntel-6-55,v1,skylakex,core\n";
        let cache = "[\n{\"EventName\": \"E1\", \"EventCode\": \"0x1\"}\n]\n";
        write(&repo.join("pmu-events/arch/x86/mapfile.csv"), mapfile);
        write(&repo.join("pmu-events/arch/x86/skylakex/cache.json"), cache);
        write(
            &repo.join("pmu-events/UPSTREAM.md"),
            "- Kernel version: 6.12.117 (top-level Makefile).\n",
        );
        write(&kernel.join("Makefile"), "VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 13\n");
        let pmu_events = kernel.join("tools/perf/pmu-events");
        write(&pmu_events.join("arch/x86/mapfile.csv"), mapfile);
        write(&pmu_events.join("arch/x86/skylakex/cache.json"), cache);
        write(&pmu_events.join("arch/common/common/metrics.json"), "[]\n");
        write(
            &pmu_events.join("Build"),
            "GEN_METRIC_DEPS := pmu-events/metric.py pmu-events/common_metrics.py\n$(INTEL_METRICS): pmu-events/intel_metrics.py $(GEN_METRIC_DEPS)\n",
        );
        if let Some(script) = script {
            write(&pmu_events.join("intel_metrics.py"), script);
        }
        (scratch, repo, kernel)
    }

    /// Prints perf's shapes: metrics named after the model argument, and group descriptions.
    const GOOD_GENERATOR: &str = r#"if [ "$1" = -metricgroups ]; then
  printf '{\n  "lpm_br": "branches of %s"\n}\n' "$2"
else
  [ -f "$2/x86/$1/cache.json" ] || { echo "no tree at $2" >&2; exit 9; }
  printf '[\n  {\n    "MetricName": "lpm_br_total_insn_between_branches",\n    "MetricGroup": "lpm_br;lpm_br_total",\n    "BriefDescription": "The number of instructions divided by the number of branches.",\n    "MetricExpr": "d_ratio(instructions, E1)",\n    "ScaleUnit": "1insn"\n  }\n]\n'
fi
"#;

    /// perf 7.x's generators run at import as perf's build runs them; their output is stored in
    /// the vintage with the vendor files, loads as perf 7.2 reads it, and a second import gives
    /// the same bytes.
    #[test]
    fn generators_run_at_import_and_their_json_is_stored() {
        let (_scratch, repo, kernel) = generator_fixture(Some(GOOD_GENERATOR));
        let summary = import(&repo, &kernel, None, &"sh".into()).unwrap();
        assert_eq!(summary.generated.files.get("intel_metrics.py"), Some(&2));
        let stored = repo.join("pmu-events/vintage/7.2");
        let metrics = fs::read_to_string(stored.join("x86/skylakex/extra-metrics.json")).unwrap();
        assert!(metrics.contains("\"MetricExpr\": \"d_ratio(instructions, E1)\""), "{metrics}");
        let groups =
            fs::read_to_string(stored.join("x86/skylakex/extra-metricgroups.json")).unwrap();
        assert_eq!(groups, "{\n  \"lpm_br\": \"branches of skylakex\"\n}\n");
        let upstream = fs::read_to_string(stored.join("UPSTREAM.md")).unwrap();
        assert!(upstream.contains("2 files written by perf's build-time generators"), "{upstream}");

        let dir = tempfile::tempdir().unwrap();
        let tree =
            tmetric_pmu_events::load_vintage(&repo.join("pmu-events"), Some("7.2"), dir.path())
                .unwrap();
        assert_eq!(tree.diagnostics, []);
        let model = tree.model_for_cpuid("x86", "GenuineIntel-6-55-4").unwrap();
        let names: Vec<&str> = model.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["lpm_br_total_insn_between_branches"]);
        assert_eq!(
            model.metric_groups.get("lpm_br").map(String::as_str),
            Some("branches of skylakex")
        );

        let first: Vec<(String, Vec<u8>)> =
            tmetric_pmu_events::vintage::files(&repo.join("pmu-events"), "7.2").unwrap();
        let summary = import(&repo, &kernel, None, &"sh".into()).unwrap();
        assert!(summary.replaced);
        assert_eq!(
            tmetric_pmu_events::vintage::files(&repo.join("pmu-events"), "7.2").unwrap(),
            first
        );
        assert_eq!(fs::read_to_string(stored.join("UPSTREAM.md")).unwrap(), upstream);
    }

    /// Each way a generator run can go wrong is an error naming the script, its arguments and
    /// what to do, and nothing is stored.
    #[test]
    fn generator_failures_are_named_and_store_nothing() {
        let error = |script: Option<&str>, python: &str| {
            let (_scratch, repo, kernel) = generator_fixture(script);
            let err = import(&repo, &kernel, None, &python.into()).unwrap_err();
            assert!(!repo.join("pmu-events/vintage/7.2").exists(), "stored after: {err:#}");
            format!("{err:#}")
        };
        let missing = error(None, "sh");
        assert!(missing.contains("runs `intel_metrics.py`, but `"), "{missing}");
        assert!(missing.contains("intel_metrics.py` does not exist"), "{missing}");

        let failing =
            error(Some("echo 'Exception: No event BR_INST_RETIRED.ANY' >&2\nexit 3\n"), "sh");
        // The first run in perf's order is reported, whichever of the two ends first.
        assert!(failing.contains("perf's build step `intel_metrics.py skylakex pmu-events/arch` (writing `x86/skylakex/extra-metrics.json`) failed (exit status: 3)"),
            "{failing}"
        );
        assert!(failing.contains("Exception: No event BR_INST_RETIRED.ANY"), "{failing}");

        let not_json = error(Some("echo '[{\"MetricName\": oops}]'\n"), "sh");
        assert!(not_json.contains("`intel_metrics.py skylakex pmu-events/arch` (writing `x86/skylakex/extra-metrics.json`) printed what is not JSON (line 1, column 17"), "{not_json}");
        assert!(
            not_json.contains("expected a JSON array of metric or event objects"),
            "{not_json}"
        );

        let wrong_shape = error(Some("echo '[]'\n"), "sh");
        assert!(wrong_shape.contains("`intel_metrics.py -metricgroups skylakex pmu-events/arch` (writing `x86/skylakex/extra-metricgroups.json`) printed JSON that is not a JSON object of metric group names to descriptions"), "{wrong_shape}");

        let no_python = error(Some(GOOD_GENERATOR), "/nonexistent/python3");
        assert!(
            no_python.contains("could not start the Python interpreter `/nonexistent/python3`"),
            "{no_python}"
        );
        assert!(
            no_python.contains(
                "import-vendor needs python3 (install it, or name the interpreter with PYTHON="
            ),
            "{no_python}"
        );
    }

    /// A `Build` running a generator import-vendor has no rule for, and a perf 7.x vendor tree
    /// given without its `Build`, are refused: either would silently lose metrics perf has.
    #[test]
    fn unknown_generators_and_a_missing_build_are_refused() {
        let (_scratch, repo, kernel) = generator_fixture(Some(GOOD_GENERATOR));
        let build = kernel.join("tools/perf/pmu-events/Build");
        fs::write(&build, "$(X): pmu-events/riscv_metrics.py\n").unwrap();
        let err = format!("{:#}", import(&repo, &kernel, None, &"sh".into()).unwrap_err());
        assert!(
            err.contains("runs `riscv_metrics.py`, a generator import-vendor does not know"),
            "{err}"
        );
        assert!(err.contains("add its rule"), "{err}");
        fs::remove_file(&build).unwrap();
        let err = format!("{:#}", import(&repo, &kernel, None, &"sh".into()).unwrap_err());
        assert!(err.contains("has no `Build` beside the vendor tree"), "{err}");
        assert!(err.contains("give the whole Linux source tree"), "{err}");
        assert!(!repo.join("pmu-events/vintage/7.2").exists());
    }

    #[test]
    fn names_and_versions() {
        assert_eq!(tarball_stem("linux-source-6.12.tar.xz"), "linux-source-6.12");
        assert_eq!(tarball_stem("linux-6.12.txz"), "linux-6.12");
        assert!(is_tarball("linux-6.12.tar.gz") && !is_tarball("linux.deb"));
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        write(
            &dir.join("Makefile"),
            "# SPDX\nVERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION = -rc1\nNAME = Baby Opossum Posse\n",
        );
        assert_eq!(kernel_version(&dir.join("Makefile")).as_deref(), Some("6.12.117-rc1"));
    }
}
