//! `--only ci`: the whole of `.ci/run` (fmt, clippy, the tests, perf's shell tests) on a fresh
//! clone of HEAD with its own empty target directory, timed, as CI runs it on every landing.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};

use crate::secs;
use crate::table::Table;

/// CI's budget on the 2-core machines.
const TARGET_CI_S: f64 = 600.0;

pub(super) fn bench(root: &Path, table: &mut Table) -> Result<()> {
    let head = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .context("cannot run git")?;
    ensure!(head.status.success(), "git rev-parse HEAD failed in {}", root.display());
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let scratch = tempfile::Builder::new().prefix("tmetric-bench-ci-").tempdir()?;
    let clone = scratch.path().join("clone");
    let status = Command::new("git")
        .args(["clone", "--quiet", "--no-hardlinks"])
        .arg(root)
        .arg(&clone)
        .status()
        .context("cannot run git clone")?;
    ensure!(status.success(), "git clone of {} failed: {status}", root.display());
    println!("  HEAD {head} (uncommitted changes are not in the clone)");
    let start = Instant::now();
    let status = Command::new(clone.join(".ci/run"))
        .current_dir(&clone)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .status()
        .context("cannot run .ci/run")?;
    let took = start.elapsed();
    ensure!(status.success(), ".ci/run failed on a fresh clone of {head}: {status}");
    table.check(
        ".ci/run on a fresh clone",
        &secs(took),
        "",
        "",
        &format!("< {:.0} min", TARGET_CI_S / 60.0),
        took.as_secs_f64() < TARGET_CI_S,
    );
    Ok(())
}
