//! `cargo xtask import-vendor <path>`: copies perf's vendor JSON (`tools/perf/pmu-events/arch`)
//! byte for byte into `pmu-events/arch/` and records where it came from in `pmu-events/UPSTREAM.md`.
//!
//! The source is a Linux source tree, a kernel source tarball (`linux-source-6.12.tar.xz`, unpacked
//! with the `tar` command) or a Debian `linux-source-*` package (unpacked with `dpkg-deb`).
//! `pmu-events/arch/common/` is tmetric's own and is never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The directory under `pmu-events/arch` that belongs to tmetric, not upstream.
const OURS: &str = tmetric_pmu_events::COMMON_DIR;

/// Where the vendor tree sits in a kernel source tree.
const ARCH_IN_KERNEL: &str = "tools/perf/pmu-events/arch";

/// How many entries each list of the change summary shows.
const LIST_LIMIT: usize = 20;

/// Entry point: `args` are the words after `import-vendor`.
pub fn run(args: &[String]) -> Result<()> {
    let (source, changes_file) = match args {
        [source] => (source, None),
        [source, flag, file] if flag == "--changes" => (source, Some(PathBuf::from(file))),
        _ => bail!(
            "usage: cargo xtask import-vendor <linux source tree | linux-source-X.Y.tar.xz | linux-source-X.Y_*.deb> [--changes FILE]"
        ),
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask lives in the workspace")?
        .to_path_buf();
    let arch_dir = repo.join("pmu-events/arch");
    // The tree before the import, for the change summary; none yet is an empty tree.
    let old_tree = tmetric_pmu_events::load_tree(&arch_dir).ok();
    let summary = import(&repo, Path::new(source))?;
    println!(
        "imported {} files from {}: {} added, {} changed, {} removed, {} unchanged",
        summary.files,
        summary.origin,
        summary.added,
        summary.changed,
        summary.removed,
        summary.unchanged
    );
    // Loading only fails without a tree; everything else is a diagnostic, shown here and
    // written by regen to crates/catalog/src/generated/diagnostics.txt.
    let tree = tmetric_pmu_events::load_tree(&arch_dir)
        .with_context(|| format!("loading the imported tree {}", arch_dir.display()))?;
    let tables: usize = tree.arches.iter().map(|a| a.tables.len()).sum();
    let events: usize = tree.arches.iter().flat_map(|a| &a.tables).map(|t| t.events.len()).sum();
    let metrics: usize = tree.arches.iter().flat_map(|a| &a.tables).map(|t| t.metrics.len()).sum();
    println!(
        "loads: {} architectures, {tables} tables, {events} events, {metrics} metrics",
        tree.arches.len()
    );
    crate::diagnostics::print_summary(&tree, 10);
    let empty = tmetric_pmu_events::Tree {
        root: arch_dir.clone(),
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

/// What an import did.
#[derive(Debug, Default)]
pub struct Summary {
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

/// Imports from `source` into `repo/pmu-events`.
pub fn import(repo: &Path, source: &Path) -> Result<Summary> {
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
    let upstream_arch = find_arch_dir(&kernel_root)?;
    if upstream_arch.join(OURS).exists() {
        bail!(
            "upstream now has `{ARCH_IN_KERNEL}/{OURS}`, which collides with tmetric's own `pmu-events/arch/{OURS}`; rename ours first (crates/pmu-events COMMON_DIR)"
        );
    }
    let vendor_arch = repo.join("pmu-events/arch");
    let mut summary = sync_tree(&upstream_arch, &vendor_arch)?;
    summary.origin = format!("{} ({})", provenance.source, provenance.given);
    let upstream_md = render_upstream(&provenance, &count_files(&upstream_arch)?);
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

/// Unpacks only the vendor tree and the top-level Makefile of a kernel tarball into `dest`, and
/// returns the kernel tree root inside it.
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
            .arg(format!("*/{ARCH_IN_KERNEL}"))
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
    fn walk(dir: &Path, rel: &str, out: &mut BTreeSet<String>) -> Result<()> {
        for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let name = entry
                .file_name()
                .into_string()
                .map_err(|n| anyhow::anyhow!("non-UTF-8 file name {n:?}"))?;
            let rel = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(&entry.path(), &rel, out)?;
            } else if kind.is_file() {
                out.insert(rel);
            } else {
                bail!(
                    "`{}` is neither a file nor a directory; the vendor tree holds only files",
                    entry.path().display()
                );
            }
        }
        Ok(())
    }
    let mut files = BTreeSet::new();
    if dir.exists() {
        walk(dir, "", &mut files)?;
    }
    Ok(files)
}

/// Makes `dst` (except `common/`) an exact copy of `src`, writing only files whose bytes differ.
fn sync_tree(src: &Path, dst: &Path) -> Result<Summary> {
    let upstream = list_files(src)?;
    let ours_prefix = format!("{OURS}/");
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
        if !upstream.contains(&rel) && !rel.starts_with(&ours_prefix) {
            let path = dst.join(&rel);
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            summary.removed += 1;
        }
    }
    remove_empty_dirs(dst)?;
    Ok(summary)
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

/// UPSTREAM.md: deterministic (no dates, no absolute paths), so re-importing the same source
/// leaves it unchanged.
fn render_upstream(
    provenance: &Provenance,
    counts: &BTreeMap<String, (usize, usize, u64)>,
) -> String {
    let total = counts.values().fold((0, 0, 0), |acc, c| (acc.0 + c.0, acc.1 + c.1, acc.2 + c.2));
    let mut md = String::new();
    md.push_str("# Upstream of `pmu-events/arch`\n\n");
    md.push_str(&format!(
        "Everything in `pmu-events/arch/` except `common/` is a byte-for-byte copy of `{ARCH_IN_KERNEL}/` from the Linux kernel source.\n"
    ));
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
    md.push_str("The import overwrites changed files, deletes files that are gone upstream and rewrites this file.\n");
    md.push_str(&format!(
        "`pmu-events/arch/{OURS}/` is tmetric's own: generic metrics that apply to every model of every architecture (see its README.md). The import never touches it.\n\n"
    ));
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

    /// Syncing copies, updates and deletes upstream files but leaves `common/` alone.
    #[test]
    fn sync_keeps_common_and_mirrors_the_rest() {
        let base = tempfile::tempdir().unwrap();
        let (src, dst) = (base.path().join("src"), base.path().join("dst"));
        write(&src.join("x86/mapfile.csv"), "new map");
        write(&src.join("x86/a/cache.json"), "[]");
        write(&dst.join("x86/mapfile.csv"), "old map");
        write(&dst.join("x86/a/cache.json"), "[]");
        write(&dst.join("x86/gone/old.json"), "[]");
        write(&dst.join("common/metrics.json"), "ours");
        let summary = sync_tree(&src, &dst).unwrap();
        assert_eq!(
            (summary.files, summary.added, summary.changed, summary.removed, summary.unchanged),
            (2, 0, 1, 1, 1)
        );
        assert_eq!(
            list_files(&dst).unwrap().into_iter().collect::<Vec<_>>(),
            ["common/metrics.json", "x86/a/cache.json", "x86/mapfile.csv"]
        );
        assert_eq!(fs::read_to_string(dst.join("x86/mapfile.csv")).unwrap(), "new map");
        assert!(!dst.join("x86/gone").exists());
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
