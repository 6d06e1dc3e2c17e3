//! `--only latency` and `--only schedule`: the crates' own `cargo bench` targets, run through
//! cargo in release, their lines printed as they come and their headline figures put in the
//! summary against the hot-path targets.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

use crate::table::Table;

/// `tmetric latency` on a generated trace: lines per second.
const TARGET_LATENCY_LINES_S: f64 = 8_000_000.0;
/// The scheduler's time slices over their bound (for whole metrics, unless the schedule gave
/// them up), summed over every model and selection.
const TARGET_SLICES_OVER_BOUND: f64 = 1.01;
/// Share of selections whose schedule is at that bound.
const TARGET_AT_BOUND_PERCENT: f64 = 97.0;

/// Runs `cargo bench -p PACKAGE --bench BENCH -- ARGS` in `root`, echoing each line indented,
/// and returns the lines.
pub(super) fn run(root: &Path, package: &str, bench: &str, args: &[&str]) -> Result<Vec<String>> {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root)
        .args(["bench", "-p", package, "--bench", bench, "--"])
        .args(args)
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().context("cannot run cargo bench")?;
    let stdout = child.stdout.take().context("no standard output")?;
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the bench's output")?;
        println!("  {line}");
        lines.push(line);
    }
    let status = child.wait().context("waiting for cargo bench")?;
    ensure!(status.success(), "cargo bench -p {package} --bench {bench} failed: {status}");
    Ok(lines)
}

/// `--only latency`.
pub(super) fn latency(root: &Path, table: &mut Table) -> Result<()> {
    let lines = run(root, "tmetric-latency", "throughput", &["--bench"])?;
    let rate = lines
        .iter()
        .find_map(|line| latency_rate(line))
        .context("the latency bench printed no `tmetric latency: ... lines/s` line")?;
    let seed = lines.iter().find_map(|line| {
        let rest = line.strip_prefix("ratio: tmetric is ")?;
        rest.split_once("x ").map(|(x, _)| format!("{x}x the shell script"))
    });
    table.check(
        "latency, 1M-line trace",
        &format!("{:.2}M lines/s", rate / 1e6),
        "",
        &seed.unwrap_or_default(),
        &format!(">= {:.0}M lines/s", TARGET_LATENCY_LINES_S / 1e6),
        rate >= TARGET_LATENCY_LINES_S,
    );
    Ok(())
}

/// The rate of `tmetric latency: N lines (M MB) in T s (best of R): RATE lines/s, ...`.
fn latency_rate(line: &str) -> Option<f64> {
    let rest = line.strip_prefix("tmetric latency: ")?;
    let (_, after) = rest.split_once("): ")?;
    after.split_once(" lines/s")?.0.parse().ok()
}

/// `--only schedule`.
pub(super) fn schedule(root: &Path, table: &mut Table) -> Result<()> {
    let lines = run(root, "tmetric-engine", "scheduler", &[])?;
    let total = lines
        .iter()
        .find_map(|line| Totals::parse(line))
        .context("the scheduler bench printed no TOTAL line")?;
    let over = total.tmetric as f64 / total.bound.max(1) as f64;
    table.check(
        &format!("schedule: time slices, {} selections", total.selections),
        &format!("{} slices", total.tmetric),
        &format!("bound {} (counting {})", total.bound, total.lower),
        &format!("{over:.3}x the bound"),
        &format!("<= {TARGET_SLICES_OVER_BOUND}x"),
        over <= TARGET_SLICES_OVER_BOUND,
    );
    table.check(
        "schedule: selections at the bound",
        &format!("{:.1} %", total.at_bound),
        &format!("perf's strategy {} slices", total.perf),
        &format!("{:.1} % at the counting bound", total.at_lower),
        &format!(">= {TARGET_AT_BOUND_PERCENT} %"),
        total.at_bound >= TARGET_AT_BOUND_PERCENT,
    );
    Ok(())
}

/// The scheduler bench's TOTAL line.
#[derive(Debug, PartialEq)]
struct Totals {
    selections: usize,
    tmetric: usize,
    perf: usize,
    /// The counting lower bound, which holds for any schedule.
    lower: usize,
    at_lower: f64,
    /// The bound for schedules that keep metrics whole (tmetric's, unless it gave that up).
    bound: usize,
    at_bound: f64,
}

impl Totals {
    /// `TOTAL selections N: slices tmetric T, perf P (...), lower bound L; at the lower bound
    /// on A% of selections; bound for whole metrics B; at it on C% of selections; ...`.
    fn parse(line: &str) -> Option<Totals> {
        let rest = line.strip_prefix("TOTAL selections ")?;
        let (selections, rest) = rest.split_once(": slices tmetric ")?;
        let (tmetric, rest) = rest.split_once(", perf ")?;
        let (perf, rest) = rest.split_once(' ')?;
        let (_, rest) = rest.split_once("lower bound ")?;
        let (lower, rest) = rest.split_once("; at the lower bound on ")?;
        let (at_lower, rest) = rest.split_once('%')?;
        let (_, rest) = rest.split_once("bound for whole metrics ")?;
        let (bound, rest) = rest.split_once("; at it on ")?;
        let (at_bound, _) = rest.split_once('%')?;
        Some(Totals {
            selections: selections.parse().ok()?,
            tmetric: tmetric.parse().ok()?,
            perf: perf.parse().ok()?,
            lower: lower.parse().ok()?,
            at_lower: at_lower.parse().ok()?,
            bound: bound.parse().ok()?,
            at_bound: at_bound.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_benches_headlines_are_read() {
        let line = "TOTAL selections 4210: slices tmetric 9876, perf 12000 (tmetric/perf 82.3%), lower bound 9500; at the lower bound on 92.5% of selections; bound for whole metrics 9700; at it on 97.5% of selections; worse than perf on 0; 12.0 s";
        assert_eq!(
            Totals::parse(line),
            Some(Totals {
                selections: 4210,
                tmetric: 9876,
                perf: 12000,
                lower: 9500,
                at_lower: 92.5,
                bound: 9700,
                at_bound: 97.5
            })
        );
        assert_eq!(Totals::parse("TOTAL selections x"), None);
        let line = "tmetric latency: 1000000 lines (61.2 MB) in 0.262 s (best of 3): 3812345 lines/s, 233 MB/s";
        assert_eq!(latency_rate(line), Some(3_812_345.0));
        assert_eq!(latency_rate("tmetric latency: garbage"), None);
    }
}
