//! Helpers shared by the test modules: loading fixtures and comparing at perf's precision.
use std::path::{Path, PathBuf};
use tmetric_perfstat::{Block, Found, LogRow, Lookup, PerfLog};

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn read(rel: &str) -> String {
    let path = data_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[track_caller]
pub fn load(rel: &str) -> PerfLog {
    tmetric_perfstat::parse(&read(rel), rel).unwrap_or_else(|e| panic!("{e}"))
}

/// All `.txt` fixtures under `dir` (relative to tests/data), sorted.
pub fn fixtures(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data_dir().join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".txt"))
        .map(|n| format!("{dir}/{n}"))
        .collect();
    names.sort();
    names
}

#[track_caller]
pub fn found(lookup: Lookup) -> Found {
    match lookup {
        Lookup::Found(found) => found,
        other => panic!("expected a value, got {other:?}"),
    }
}

/// The value of `id` in `block` (for `metric`), which must be found.
#[track_caller]
pub fn value(block: &Block, id: &str, metric: Option<&str>) -> f64 {
    found(block.lookup(id, metric)).value
}

/// Half a unit of the last digit perf printed, e.g. 0.05 for `0.6`.
pub fn half_ulp(printed: &str) -> f64 {
    let decimals = printed.trim().split_once('.').map_or(0, |(_, f)| f.len());
    0.5 * 10f64.powi(-(decimals as i32))
}

/// Asserts that `computed` prints as perf's `printed` value (at its precision, allowing for
/// the rounding of perf's own inputs by `slack`).
#[track_caller]
pub fn assert_prints_as(computed: f64, printed: &str, slack: f64, what: &str) {
    let expected: f64 =
        printed.trim().parse().unwrap_or_else(|_| panic!("{what}: `{printed}` is not a number"));
    let tolerance = half_ulp(printed) * (1.0 + 1e-9) + slack;
    assert!(
        (computed - expected).abs() <= tolerance,
        "{what}: computed {computed}, perf printed {printed} (tolerance {tolerance})"
    );
}

/// The row whose event is printed exactly as `event`.
#[track_caller]
pub fn row<'a>(block: &'a Block, event: &str) -> &'a LogRow {
    block
        .rows
        .iter()
        .find(|r| r.event == event)
        .unwrap_or_else(|| panic!("no row `{event}` in {}", block.label()))
}
