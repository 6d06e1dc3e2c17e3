//! `tmetric stat --pmu-sim`: hardware metrics end to end on the simulated kernel, with the
//! numbers checked against the simulator's profile.

use crate::support::{stderr, tmetric};

/// The profile's level-1 fractions (PERF_METRICS bytes / 255): retiring, bad speculation,
/// frontend bound, backend bound.
const LEVEL1: [(&str, f64); 4] = [
    ("tma_retiring", 102.0 / 255.0),
    ("tma_bad_speculation", 26.0 / 255.0),
    ("tma_frontend_bound", 51.0 / 255.0),
    ("tma_backend_bound", 76.0 / 255.0),
];

/// The value printed before `%  name` on a metric line.
fn percent(text: &str, name: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("%  {name}")))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"));
    let after = line.split('#').nth(1).expect("a metric");
    after.split_whitespace().next().expect("a value").parse().expect("a number")
}

#[test]
fn topdown_level_1_on_simulated_sapphire_rapids_sums_to_100() {
    let out =
        tmetric(&["stat", "--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a", "sleep", "0.3"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("simulated PMU `sapphirerapids`"), "{text}");
    assert!(text.contains("on simulated PMU 'sapphirerapids'"), "{text}");
    let mut sum = 0.0;
    for (name, fraction) in LEVEL1 {
        let value = percent(&text, name);
        assert!((value - 100.0 * fraction).abs() < 0.06, "{name}: {value} vs {}", 100.0 * fraction);
        sum += value;
    }
    assert!((sum - 100.0).abs() <= 0.1, "level 1 sums to {sum}\n{text}");
    assert!(!text.contains("not supported"), "{text}");
    assert!(!text.contains("nan"), "{text}");
}

#[test]
fn hybrid_alder_lake_counts_on_both_core_types() {
    let out = tmetric(&[
        "stat",
        "--pmu-sim",
        "alderlake",
        "-M",
        "tma_dtlb_store,TopdownL1",
        "-a",
        "sleep",
        "0.2",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("not supported"), "{text}");
    assert!(text.contains("cpu_core/"), "{text}");
    assert!(text.contains("cpu_atom/"), "{text}");
    let dtlb = text.lines().find(|l| l.contains("tma_dtlb_store")).expect(&text);
    assert!(!dtlb.contains("nan"), "{dtlb}");
}

#[test]
fn unknown_simulated_machines_are_named() {
    let out = tmetric(&["stat", "--pmu-sim", "pentium", "-a", "sleep", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.contains("no simulated PMU `pentium`") && text.contains("sapphirerapids"),
        "{text}"
    );
}
