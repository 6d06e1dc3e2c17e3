//! Expression parse rates: ours over the whole tree against perf's metric.py.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tmetric_pmu_events::Tree;

use super::{PASSES, Who, cpu_time, thousands};

pub(super) struct ParseFigures {
    pub(super) exprs: usize,
    pub(super) thresholds: usize,
    /// tmetric over every MetricExpr: expressions per second, failures.
    pub(super) ours_exprs: (f64, usize),
    /// tmetric over every MetricExpr and MetricThreshold.
    pub(super) ours_all: (f64, usize),
    /// metric.py's ParsePerfJson over the same MetricExpr list.
    pub(super) perf: Option<(f64, usize)>,
}

/// perf's parser over a JSON list of expressions: prints count, failures and the best CPU
/// time (the process's, as ours is measured).
const PERF_PARSE_SCRIPT: &str = r#"
import json, sys, time
sys.path.insert(0, sys.argv[1])
import metric
exprs = json.load(open(sys.argv[2]))
best = None
for _ in range(int(sys.argv[3])):
    fails = 0
    start = time.process_time()
    for e in exprs:
        try:
            metric.ParsePerfJson(e)
        except Exception:
            fails += 1
    elapsed = time.process_time() - start
    best = elapsed if best is None else min(best, elapsed)
print(len(exprs), fails, best)
"#;

pub(super) fn bench_parse(tree: &Tree, perf: Option<&Path>) -> ParseFigures {
    // The vendor metrics only (not tmetric's `common/`), which perf's tree has too.
    let metrics =
        || tree.arches.iter().flat_map(|arch| &arch.tables).flat_map(|table| &table.metrics);
    let exprs: Vec<&str> = metrics().map(|m| m.expr.as_str()).collect();
    let all: Vec<&str> =
        exprs.iter().copied().chain(metrics().filter_map(|m| m.threshold.as_deref())).collect();

    let rate = |list: &[&str]| {
        let mut best = Duration::MAX;
        let mut failures = 0;
        for _ in 0..PASSES {
            let start = cpu_time(Who::Me);
            failures = list
                .iter()
                .filter(|text| black_box(tmetric_expr::parse(black_box(text))).is_err())
                .count();
            best = best.min(cpu_time(Who::Me).saturating_sub(start));
        }
        (list.len() as f64 / best.as_secs_f64(), failures)
    };
    let ours_exprs = rate(&exprs);
    let ours_all = rate(&all);
    println!(
        "  tmetric_expr::parse, {} MetricExpr: {}/s ({} fail), with {} MetricThreshold: {}/s ({} fail)",
        exprs.len(),
        thousands(ours_exprs.0),
        ours_exprs.1,
        all.len() - exprs.len(),
        thousands(ours_all.0),
        ours_all.1
    );

    let perf_rate = perf.and_then(|perf| match perf_parse_rate(perf, &exprs) {
        Ok((count, failures, seconds)) => {
            let rate = count as f64 / seconds;
            println!(
                "  perf metric.py ParsePerfJson, same {count} MetricExpr: {}/s ({failures} fail)",
                thousands(rate)
            );
            Some((rate, failures))
        }
        Err(err) => {
            println!("  perf metric.py not measured: {err:#}");
            None
        }
    });
    ParseFigures {
        exprs: exprs.len(),
        thresholds: all.len() - exprs.len(),
        ours_exprs,
        ours_all,
        perf: perf_rate,
    }
}

fn perf_parse_rate(perf: &Path, exprs: &[&str]) -> Result<(usize, usize, f64)> {
    let scratch = tempfile::Builder::new().prefix("tmetric-bench-exprs-").tempdir()?;
    let list = scratch.path().join("exprs.json");
    std::fs::write(&list, serde_json::to_string(exprs)?)
        .with_context(|| format!("writing {}", list.display()))?;
    // Two passes: one takes seconds.
    let output = Command::new("python3")
        .arg("-c")
        .arg(PERF_PARSE_SCRIPT)
        .arg(perf)
        .arg(&list)
        .arg("2")
        .output();
    let _ = std::fs::remove_file(&list);
    let output = output.context("running python3")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "python3 failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
    );
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    let [count, failures, seconds] = fields[..] else {
        bail!("unexpected output from the metric.py script: {stdout:?}")
    };
    Ok((count.parse()?, failures.parse()?, seconds.parse()?))
}
