//! `--only accuracy`: the accuracy bench of `crates/engine/benches/accuracy.rs` (tmetric, perf
//! 6.12's grouping and each metric alone against the truth on the realistic simulator, over
//! workload classes), run through cargo in release; its per-class table is printed as it
//! comes, and the summary gets the overall ratio and whether the targets were met.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

use crate::table::{Status, Table};

/// Runs the bench (`quick`: its `--quick` subset) and adds its figures to `table`.
pub(super) fn bench(root: &Path, quick: bool, table: &mut Table) -> Result<()> {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root)
        .args(["bench", "-p", "tmetric-engine", "--bench", "accuracy", "--"])
        .stdout(Stdio::piped());
    if quick {
        cmd.arg("--quick");
    }
    let mut child = cmd.spawn().context("cannot run cargo bench")?;
    let stdout = child.stdout.take().context("no standard output")?;
    let (mut total, mut targets) = (None, None);
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the bench's output")?;
        println!("  {line}");
        // The per-class table's TOTAL row: its t/p % is the fifth column.
        if line.starts_with("TOTAL ") && total.is_none() {
            total = line.split('|').nth(4).map(|f| f.trim().to_string());
        }
        if let Some(rest) = line.strip_prefix("targets (") {
            targets = rest.rsplit(": ").next().map(str::to_string);
        }
    }
    let status = child.wait().context("waiting for cargo bench")?;
    ensure!(status.success(), "cargo bench --bench accuracy failed: {status}");
    let total = total.context("the bench printed no TOTAL row")?;
    let ratio: f64 = total.parse().with_context(|| format!("t/p `{total}` is not a number"))?;
    table.row(
        "accuracy: tmetric's mean error, % of perf's",
        &format!("{ratio:.1} %"),
        "",
        "",
        "<= 20 %",
        if ratio <= 20.0 { Status::Met } else { Status::Missed },
    );
    let targets = targets.context("the bench printed no targets line")?;
    table.row(
        "accuracy: the issue's targets",
        &targets,
        "",
        "",
        "met",
        if targets == "met" { Status::Met } else { Status::Missed },
    );
    Ok(())
}
