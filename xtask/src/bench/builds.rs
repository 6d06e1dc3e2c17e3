//! (c) Build figures: the cold release build, the catalogue rebuilds, a clean test run, the
//! stripped release binary against perf's, and the generated code's sizes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};

use super::{mb, regen, secs};

/// The build figures of one tree.
#[derive(Default)]
pub(super) struct BuildFigures {
    pub(super) cold: Option<Measured>,
    pub(super) rebuild: Option<Measured>,
    /// The crates the CLI rebuild compiled.
    pub(super) recompiled: Vec<String>,
    /// `cargo build -p tmetric-catalog` after touching the catalogue: the catalogue alone.
    pub(super) catalog: Option<Measured>,
    /// The workspace build after that: the crates that depend on the catalogue.
    pub(super) dependents: Option<Measured>,
    /// The crates `dependents` compiled.
    pub(super) dependents_compiled: Vec<String>,
    pub(super) test: Option<Measured>,
    pub(super) binary_bytes: Option<u64>,
    pub(super) stripped_bytes: Option<u64>,
}

/// One timed command: wall time and the peak resident memory of its largest process.
#[derive(Clone, Copy)]
pub(super) struct Measured {
    pub(super) time: Duration,
    /// From `/usr/bin/time` when installed.
    pub(super) peak_kb: Option<u64>,
}

/// Builds and tests each tree in a scratch target directory (a cold build in the developers'
/// one would throw their cache away). Each step runs for every tree before the next, so that
/// the load of other processes weighs on all trees alike.
pub(super) fn bench_build(
    trees: &[(&str, &Path)],
    build: bool,
    test: bool,
) -> Result<Vec<(String, BuildFigures)>> {
    if std::env::var_os("RUSTC_WRAPPER").is_some() {
        println!("  note: RUSTC_WRAPPER is set, so the cold build may hit a compiler cache");
    }
    let scratch_dir = tempfile::Builder::new().prefix("tmetric-bench-").tempdir()?;
    let scratch = scratch_dir.path().to_path_buf();
    let target = |i: usize, what: &str| scratch.join(format!("{i}-{what}"));
    let mut figures: Vec<(String, BuildFigures)> =
        trees.iter().map(|(name, _)| (name.to_string(), BuildFigures::default())).collect();
    let result = (|| -> Result<()> {
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| build) {
            println!("  {name}: cold build in {} (minutes)...", target(i, "release").display());
            let (cold, _) =
                cargo(dir, &target(i, "release"), &["build", "--release", "--workspace"])?;
            println!("  {name}: cold cargo build --release --workspace: {}", cold.show());
            let binary = target(i, "release").join("release/tmetric");
            figures[i].1.binary_bytes = std::fs::metadata(&binary).ok().map(|m| m.len());
            figures[i].1.stripped_bytes = stripped_size(&binary);
            figures[i].1.cold = Some(cold);
        }
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| build) {
            // Only the modification time changes, as an edit would. The CLI's code is in
            // `lib.rs` since the CLI became a library; older trees have it all in `main.rs`.
            let cli = ["crates/cli/lib.rs", "crates/cli/main.rs"]
                .into_iter()
                .find(|f| dir.join(f).is_file())
                .context("no crates/cli/lib.rs or main.rs")?;
            touch(&dir.join(cli))?;
            let (rebuild, recompiled) =
                cargo(dir, &target(i, "release"), &["build", "--release", "--workspace"])?;
            println!(
                "  {name}: rebuild after touching {cli}: {} (compiled: {})",
                rebuild.show(),
                recompiled.join(", ")
            );
            figures[i].1.rebuild = Some(rebuild);
            figures[i].1.recompiled = recompiled;
        }
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| build) {
            // The catalogue alone, then what depends on it: a changed catalogue recompiles
            // every crate that links it.
            touch(&dir.join("crates/catalog/src/lib.rs"))?;
            let (catalog, _) = cargo(
                dir,
                &target(i, "release"),
                &["build", "--release", "-p", "tmetric-catalog"],
            )?;
            println!(
                "  {name}: catalogue rebuild (crates/catalog/src/lib.rs touched, -p tmetric-catalog): {}",
                catalog.show()
            );
            let (dependents, recompiled) =
                cargo(dir, &target(i, "release"), &["build", "--release", "--workspace"])?;
            println!(
                "  {name}: then the workspace: {} (compiled: {})",
                dependents.show(),
                recompiled.join(", ")
            );
            figures[i].1.catalog = Some(catalog);
            figures[i].1.dependents = Some(dependents);
            figures[i].1.dependents_compiled = recompiled;
        }
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| test) {
            println!("  {name}: clean cargo test --workspace -j2 (minutes)...");
            // A test that fails under load (timing-sensitive ones do) does not void the figure:
            // the build and the run took that long either way.
            let (test, failed) = cargo_status(
                dir,
                &target(i, "test"),
                &["test", "--workspace", "-j2", "--no-fail-fast"],
            )?;
            let failed = if failed.is_empty() { String::new() } else { format!(" ({failed})") };
            println!("  {name}: clean cargo test --workspace -j2: {}{failed}", test.show());
            figures[i].1.test = Some(test);
            let _ = std::fs::remove_dir_all(target(i, "test"));
        }
        Ok(())
    })();
    drop(scratch_dir);
    result.map(|()| figures)
}

/// Builds each tree's release binary in its own `target/` (incrementally, as a developer
/// would) and measures it stripped.
pub(super) fn bench_binary(trees: &[(&str, &Path)]) -> Result<Vec<(String, BuildFigures)>> {
    let mut figures = Vec::new();
    for (name, dir) in trees {
        let target = dir.join("target");
        let (built, _) = cargo(dir, &target, &["build", "--release", "--bin", "tmetric"])?;
        let binary = target.join("release/tmetric");
        let stripped = stripped_size(&binary);
        println!(
            "  {name}: release build {}, binary {}, stripped {}",
            built.show(),
            std::fs::metadata(&binary).map_or("missing".to_string(), |m| mb(m.len())),
            stripped.map_or("unknown".to_string(), mb)
        );
        figures.push((
            name.to_string(),
            BuildFigures {
                binary_bytes: std::fs::metadata(&binary).ok().map(|m| m.len()),
                stripped_bytes: stripped,
                ..BuildFigures::default()
            },
        ));
    }
    Ok(figures)
}

fn touch(path: &Path) -> Result<()> {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()))
        .with_context(|| format!("touching {}", path.display()))
}

/// The size of `binary` after `strip` (of a copy).
fn stripped_size(binary: &Path) -> Option<u64> {
    let copy = binary.with_extension("stripped");
    std::fs::copy(binary, &copy).ok()?;
    let ok = Command::new("strip").arg(&copy).status().is_ok_and(|s| s.success());
    let size = std::fs::metadata(&copy).ok().map(|m| m.len());
    let _ = std::fs::remove_file(&copy);
    size.filter(|_| ok)
}

/// The installed perf binary and its size. `/usr/bin/perf` is a shell wrapper on some
/// distributions (Ubuntu's picks `/usr/lib/linux-tools*/perf` or `/usr/bin/perf_X.Y`), so
/// only an ELF file counts.
/// `cargo build --release --bin tmetric` in `root`, and the binary it leaves in
/// `root/target/release`: what the sections that run tmetric against perf time.
pub(super) fn release_tmetric(root: &Path) -> Result<PathBuf> {
    let status = std::process::Command::new("cargo")
        .args(["build", "--release", "--bin", "tmetric"])
        .current_dir(root)
        .status()
        .context("cargo build --release")?;
    if !status.success() {
        bail!("cargo build --release failed");
    }
    Ok(root.join("target/release/tmetric"))
}

pub(super) fn find_perf_binary() -> Option<(PathBuf, u64)> {
    let is_elf = |path: &Path| std::fs::read(path).is_ok_and(|bytes| bytes.starts_with(b"\x7fELF"));
    let mut candidates = vec![PathBuf::from("/usr/bin/perf")];
    for dir in ["/usr/bin", "/usr/lib"] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name =
                    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                name.starts_with("perf_") || name.starts_with("linux-tools")
            })
            .flat_map(|p| if p.is_dir() { vec![p.join("perf")] } else { vec![p] })
            .collect();
        found.sort();
        candidates.extend(found);
    }
    candidates
        .into_iter()
        .find(|p| is_elf(p))
        .and_then(|p| Some((p.clone(), std::fs::metadata(&p).ok()?.len())))
}

/// Runs cargo with `args` in `dir` into `target`; the time, peak memory and crates compiled.
fn cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<(Measured, Vec<String>)> {
    let (measured, output) = run_cargo(dir, target, args)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "cargo {} in {} failed ({}):\n{}",
            args.join(" "),
            dir.display(),
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let compiled = stderr
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("Compiling "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect();
    Ok((measured, compiled))
}

/// Runs cargo; the time, and the failed tests' names (empty when it succeeded).
fn cargo_status(dir: &Path, target: &Path, args: &[&str]) -> Result<(Measured, String)> {
    let (measured, output) = run_cargo(dir, target, args)?;
    if output.status.success() {
        return Ok((measured, String::new()));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failed: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test ")?.strip_suffix(" ... FAILED"))
        .collect();
    Ok((measured, format!("{} FAILED: {}", output.status, failed.join(", "))))
}

fn run_cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<(Measured, std::process::Output)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let time = Path::new("/usr/bin/time");
    let peak_file = target.with_extension("peak");
    let mut command = if time.is_file() {
        let mut command = Command::new(time);
        command.arg("-f").arg("%M").arg("-o").arg(&peak_file).arg(&cargo);
        command
    } else {
        Command::new(&cargo)
    };
    std::fs::create_dir_all(target).with_context(|| format!("creating {}", target.display()))?;
    let start = Instant::now();
    let output = command
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_TERM_COLOR", "never")
        .stdin(Stdio::null())
        .output()
        .context("running cargo")?;
    let elapsed = start.elapsed();
    let peak_kb = std::fs::read_to_string(&peak_file)
        .ok()
        .and_then(|text| text.lines().last()?.trim().parse().ok());
    let _ = std::fs::remove_file(&peak_file);
    Ok((Measured { time: elapsed, peak_kb }, output))
}

impl Measured {
    pub(super) fn show(&self) -> String {
        match self.peak_kb {
            Some(kb) => format!("{}, peak {}", secs(self.time), mb(kb * 1024)),
            None => secs(self.time),
        }
    }
}

/// Generated Rust source, and the binary tables next to it.
pub(super) struct GenSizes {
    pub(super) rust: u64,
    pub(super) rust_files: usize,
    pub(super) data: u64,
}

impl GenSizes {
    pub(super) fn of(root: &Path) -> GenSizes {
        let mut files = Vec::new();
        list_files(&root.join(regen::GEN_DIR), &mut files);
        let mut sizes = GenSizes { rust: 0, rust_files: 0, data: 0 };
        for file in files {
            let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
            if file.extension().is_some_and(|e| e == "rs") {
                sizes.rust += bytes;
                sizes.rust_files += 1;
            } else if !file.ends_with("skipped.txt") {
                sizes.data += bytes;
            }
        }
        sizes
    }
}

fn list_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            list_files(&path, out);
        } else {
            out.push(path);
        }
    }
}
