//! (a) Code generation timed against perf's jevents.py: finding (or extracting) perf's
//! `tools/perf/pmu-events`, regen in process and as its own process, and jevents.py's run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};

use super::{PASSES, PERF_DEFAULT, Who, cpu_time, mb, regen, secs};

/// perf's `tools/perf/pmu-events`, extracting it from the distribution package when needed.
/// `Err` says why the baselines cannot run; the rest of the benchmark still does.
pub(super) fn find_perf_dir(explicit: Option<PathBuf>, root: &Path) -> Result<PathBuf, String> {
    let has_tools =
        |dir: &Path| dir.join("jevents.py").is_file() && dir.join("metric.py").is_file();
    if let Some(dir) =
        explicit.or_else(|| std::env::var_os("TMETRIC_PERF_PMU_EVENTS").map(PathBuf::from))
    {
        return if has_tools(&dir) {
            Ok(dir)
        } else {
            Err(format!("{} has no jevents.py and metric.py", dir.display()))
        };
    }
    let default = root.join(PERF_DEFAULT);
    if has_tools(&default) {
        return Ok(default);
    }
    println!("{PERF_DEFAULT} is missing: extracting it from the linux-source-6.12 package");
    extract_perf(&root.join("target"))
        .map_err(|err| format!("could not extract perf's pmu-events: {err:#}"))?;
    if has_tools(&default) {
        Ok(default)
    } else {
        Err(format!("{} was not extracted", default.display()))
    }
}

/// `apt-get download linux-source-6.12`, `dpkg -x`, then untar only `tools/perf/pmu-events`
/// into `into` (the workspace's own `target/`), the package unpacked in a private directory.
fn extract_perf(into: &Path) -> Result<()> {
    std::fs::create_dir_all(into).with_context(|| format!("creating {}", into.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("tmetric-bench-deb-")
        .tempdir_in(into)
        .with_context(|| format!("creating a directory in {}", into.display()))?;
    let work = scratch.path();
    let result = (|| {
        run_quiet(
            Command::new("apt-get").args(["download", "linux-source-6.12"]).current_dir(work),
        )?;
        let deb = std::fs::read_dir(work)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .context("apt-get download left no .deb")?;
        run_quiet(Command::new("dpkg").arg("-x").arg(&deb).arg(work.join("x")))?;
        run_quiet(
            Command::new("tar")
                .arg("-xJf")
                .arg(work.join("x/usr/src/linux-source-6.12.tar.xz"))
                .arg("-C")
                .arg(into)
                .args(["--wildcards", "linux-source-6.12/tools/perf/pmu-events/*"]),
        )
    })();
    drop(scratch);
    result
}

fn run_quiet(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    ensure!(
        output.status.success(),
        "{command:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// (a) regen against jevents.py

pub(super) struct RegenFigures {
    /// Best in-process `regen(root, Check)`, CPU time.
    pub(super) in_process: Option<Duration>,
    /// `xtask regen --check` as its own process, CPU time.
    pub(super) process: Option<Duration>,
    /// jevents.py over perf's tree, CPU time.
    pub(super) jevents: Option<Duration>,
}

pub(super) fn bench_regen(root: &Path, perf: Option<&Path>) -> RegenFigures {
    let mut figures = RegenFigures { in_process: None, process: None, jevents: None };
    let best = |slot: &mut Option<Duration>, elapsed: Duration| {
        *slot = Some(slot.map_or(elapsed, |best| best.min(elapsed)));
    };
    // The plain xtask binary sits next to this one: `cargo xtask bench` has just built it.
    let xtask = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("xtask")))
        .filter(|path| path.is_file());
    let mut notes: Vec<String> = Vec::new();
    let mut note = |text: String| {
        if !notes.contains(&text) {
            println!("  {text}");
            notes.push(text);
        }
    };
    // The three run back to back in every pass, so that the load of other processes at a
    // given moment weighs on all of them; the best pass of each counts.
    for _ in 0..PASSES {
        let start = cpu_time(Who::Me);
        let result = regen::regen(root, regen::Mode::Check);
        best(&mut figures.in_process, cpu_time(Who::Me).saturating_sub(start));
        match result {
            Ok(report) => note(format!(
                "regen: {} models, {} metrics, {} bytes",
                report.models, report.metrics, report.bytes
            )),
            // A stale catalogue still did all the work: only the comparison at the end differed.
            Err(err) => note(format!(
                "regen --check failed (timed anyway): {}",
                err.to_string().lines().next().unwrap_or("")
            )),
        }

        match &xtask {
            Some(xtask) => {
                let start = cpu_time(Who::Children);
                let output =
                    Command::new(xtask).args(["regen", "--check"]).current_dir(root).output();
                let elapsed = cpu_time(Who::Children).saturating_sub(start);
                match output {
                    Ok(_) => best(&mut figures.process, elapsed),
                    Err(err) => note(format!("xtask regen --check could not run: {err}")),
                }
            }
            None => {
                note("xtask regen --check as a process: no xtask binary next to this one".into())
            }
        }

        let Some(perf) = perf else { continue };
        match run_jevents(perf) {
            Ok((elapsed, c_bytes)) => {
                best(&mut figures.jevents, elapsed);
                note(format!("perf jevents.py all all writes {} of C", mb(c_bytes)));
            }
            Err(err) => {
                note(format!("perf jevents.py not measured: {err:#}"));
                break;
            }
        }
    }
    let show = |what: &str, time: Option<Duration>| {
        if let Some(time) = time {
            println!("  {what}, best of {PASSES}: {} of CPU", secs(time));
        }
    };
    show("regen --check in process", figures.in_process);
    show("xtask regen --check as a process", figures.process);
    show("perf jevents.py all all", figures.jevents);
    figures
}

/// One run of jevents.py over perf's own tree: its CPU time and the bytes of C it wrote. Ours has
/// `common/`, which jevents.py would take for an architecture; the trees are otherwise identical.
fn run_jevents(perf: &Path) -> Result<(Duration, u64)> {
    let scratch = tempfile::Builder::new().prefix("tmetric-bench-jevents-").tempdir()?;
    let out = scratch.path().join("pmu-events.c");
    let start = cpu_time(Who::Children);
    let output = Command::new("python3")
        .arg(perf.join("jevents.py"))
        .args(["all", "all"])
        .arg(perf.join("arch"))
        .arg(&out)
        .current_dir(perf)
        .output();
    let elapsed = cpu_time(Who::Children).saturating_sub(start);
    let c_bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
    let _ = std::fs::remove_file(&out);
    let output = output.context("running python3")?;
    ensure!(
        output.status.success(),
        "jevents.py failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
    );
    Ok((elapsed, c_bytes))
}
