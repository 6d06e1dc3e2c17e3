//! Topdown from logs: levels 1 and 2 from slots and the PERF_METRICS rows, and the `--topdown` patch series' level
//! 1 from the older events.

use crate::support::{ok, stderr};

use super::{assert_close, builtin, count, fixture, json, read, rows_of, tmetric_stdin};

/// perf 6.1 prints level 1 from PERF_METRICS events as each event over the sum of the four
/// level-1 events (`td_metric_ratio`); level 2 is the level-2 event over the same sum, and its
/// sibling the parent minus it (light ops = retiring - heavy ops, machine clears = bad spec -
/// mispredicts, fetch bandwidth = frontend - fetch latency, core bound = backend - memory).
#[test]
fn topdown_levels_1_and_2_from_slots_and_topdown_rows() {
    for (file, printed) in
        [("perf/hw_topdown_perf61.txt", true), ("perf/hw_topdown_perf612.txt", false)]
    {
        let log = read(file);
        let c = |e: &str| count(&log, e);
        let sum = c("topdown-retiring")
            + c("topdown-bad-spec")
            + c("topdown-fe-bound")
            + c("topdown-be-bound");
        let pct = |x: f64| x / sum * 100.0;
        let l1 = [
            ("td_retiring", pct(c("topdown-retiring")), "Retiring"),
            ("td_bad_speculation", pct(c("topdown-bad-spec")), "Bad Speculation"),
            ("td_frontend_bound", pct(c("topdown-fe-bound")), "Frontend Bound"),
            ("td_backend_bound", pct(c("topdown-be-bound")), "Backend Bound"),
        ];
        let l2 = [
            ("td_heavy_operations", pct(c("topdown-heavy-ops"))),
            ("td_light_operations", pct(c("topdown-retiring") - c("topdown-heavy-ops"))),
            ("td_branch_mispredict", pct(c("topdown-br-mispredict"))),
            ("td_machine_clears", pct(c("topdown-bad-spec") - c("topdown-br-mispredict"))),
            ("td_fetch_latency", pct(c("topdown-fetch-lat"))),
            ("td_fetch_bandwidth", pct(c("topdown-fe-bound") - c("topdown-fetch-lat"))),
            ("td_memory_bound", pct(c("topdown-mem-bound"))),
            ("td_core_bound", pct(c("topdown-be-bound") - c("topdown-mem-bound"))),
        ];
        let path = fixture(file);
        let output = ok(&["eval", "--from-perf", &path, "--json"]);
        let (_, rows) = json(&output);
        for (metric, value, label) in l1 {
            let row = builtin(&rows, metric);
            assert_close(&row["value"], value);
            if printed {
                assert_eq!(row["perf"]["label"], label, "{row}");
                assert_eq!(row["perf"]["agrees"], true, "{row}");
            } else {
                assert!(row["perf"].is_null(), "{row}");
            }
        }
        for (metric, value) in l2 {
            let row = builtin(&rows, metric);
            assert_close(&row["value"], value);
            assert!(row["perf"].is_null(), "{row}");
        }
    }
    // A level-1 value perf printed differently is a disagreement.
    let log = read("perf/hw_topdown_perf61.txt").replace("40.0% Retiring", "41.0% Retiring");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &log);
    let (_, rows) = json(&output);
    assert_eq!(builtin(&rows, "td_retiring")["perf"]["agrees"], false);
}

/// The `--topdown` patch series' level 1 from the older events: retiring = slots-retired / total-slots; bad
/// speculation = (slots-issued - slots-retired + recovery-bubbles) / total-slots; frontend =
/// fetch-bubbles / total-slots; backend = 1 - the three. Without recovery bubbles perf labels
/// the backend line "backend bound/bad spec".
#[test]
fn seed_000_topdown_from_the_older_events() {
    let log = read("perf/hw_topdown_legacy.txt");
    let c = |e: &str| count(&log, e);
    let total = c("topdown-total-slots");
    let retiring = c("topdown-slots-retired") / total;
    let bad = (c("topdown-slots-issued") - c("topdown-slots-retired")
        + c("topdown-recovery-bubbles"))
        / total;
    let frontend = c("topdown-fetch-bubbles") / total;
    let path = fixture("perf/hw_topdown_legacy.txt");
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    for (metric, value, label) in [
        ("td_legacy_retiring", retiring, "retiring"),
        ("td_legacy_bad_speculation", bad, "bad speculation"),
        ("td_legacy_frontend_bound", frontend, "frontend bound"),
        ("td_legacy_backend_bound", 1.0 - retiring - bad - frontend, "backend bound"),
    ] {
        let row = builtin(&rows, metric);
        assert_close(&row["value"], value * 100.0);
        assert_eq!(row["perf"]["label"], label, "{row}");
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }

    let without: String = log
        .lines()
        .filter(|l| !l.contains("topdown-recovery-bubbles  "))
        .map(|l| format!("{l}\n"))
        .collect();
    let without = without.replace("18.0% backend bound", "20.0% backend bound/bad spec");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &without);
    assert!(output.status.success(), "{}", stderr(&output));
    let (_, rows) = json(&output);
    let bad = (c("topdown-slots-issued") - c("topdown-slots-retired")) / total;
    let row = builtin(&rows, "td_legacy_backend_bound");
    assert_close(&row["value"], (1.0 - retiring - bad - frontend) * 100.0);
    assert_eq!(row["perf"]["label"], "backend bound/bad spec", "{row}");
    assert_eq!(row["perf"]["agrees"], true, "{row}");
    assert!(rows_of(&rows, "td_legacy_bad_speculation").is_empty());
}
