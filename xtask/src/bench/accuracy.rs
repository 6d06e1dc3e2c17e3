//! `--only accuracy`: the accuracy bench of `crates/engine/benches/accuracy.rs` (tmetric, perf
//! 6.12's grouping and each metric alone against the truth on the realistic simulator, over
//! workload classes), run through cargo in release; its per-class table is printed as it
//! comes, and the summary gets the overall ratio and whether the targets were met.

use std::path::Path;

use anyhow::{Context, Result};

use crate::benches;
use crate::table::{Status, Table};

/// Runs the bench (`quick`: its `--quick` subset) and adds its figures to `table`.
pub(super) fn bench(root: &Path, quick: bool, table: &mut Table) -> Result<()> {
    let args: &[&str] = if quick { &["--quick"] } else { &[] };
    let lines = benches::run(root, "tmetric-engine", "accuracy", args)?;
    // The per-class table's TOTAL row: its t/p % is the fifth column.
    let total = lines
        .iter()
        .find(|line| line.starts_with("TOTAL "))
        .and_then(|line| line.split('|').nth(4))
        .map(|f| f.trim().to_string());
    let targets = lines
        .iter()
        .find_map(|line| line.strip_prefix("targets ("))
        .and_then(|rest| rest.rsplit(": ").next())
        .map(str::to_string);
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
