//! `serve` and `rules` flags refused with the reason, and what `tmetric rules` translates (recording
//! rules in dependency order, what it cannot translate, the dashboard).

use serde_json::Value;

use crate::support::{stderr, tmetric};

#[test]
fn serve_and_rules_flags_are_checked() {
    let out = tmetric(&["serve", "--interval", "10x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown unit `x`"), "{}", stderr(&out));
    let out = tmetric(&["serve", "--interval", "50ms"]);
    assert!(stderr(&out).contains("at least 100ms"), "{}", stderr(&out));
    let out = tmetric(&["serve", "--no-host", "-M", "Software"]);
    assert!(stderr(&out).contains("give --cgroup or --for-each-cgroup"), "{}", stderr(&out));
    let out = tmetric(&["serve", "--cgroup", "/a/../b", "-M", "Software"]);
    assert!(stderr(&out).contains("`..` would leave the cgroup tree"), "{}", stderr(&out));
    let out = tmetric(&["serve", "-M", "NoSuchMetricAnywhere"]);
    assert!(stderr(&out).contains("cannot find metric or group `NoSuchMetricAnywhere`"));
    for window in ["1m;drop", "1m1m", "1.5m", "0s", "1s1m", "99999999999999999999s"] {
        let out = tmetric(&["rules", "-M", "Software", "--window", window]);
        assert!(stderr(&out).contains("give a Prometheus duration"), "{window}: {}", stderr(&out));
    }
    let out = tmetric(&["serve", "--interval", "18446744073709551616s"]);
    assert!(stderr(&out).contains("longer than a year"), "{}", stderr(&out));
    // A value clap refuses is a usage error: perf's 129.
    let out = tmetric(&["serve", "--reads", "4000000000"]);
    assert_eq!(out.status.code(), Some(129), "{}", stderr(&out));
    let out = tmetric(&["serve", "--reads", "1000", "--interval", "1s"]);
    assert!(stderr(&out).contains("at least 10ms apart"), "{}", stderr(&out));
    // A failed write is an error, and the rules go nowhere else.
    let out = tmetric(&["rules", "-M", "Software", "-o", "/dev/full"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("cannot write /dev/full"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("record:"), "{}", stderr(&out));
}

#[test]
fn rules_say_what_they_cannot_translate() {
    let out =
        tmetric(&["rules", "-M", "TopdownL1,TopdownL2", "--model", "sapphirerapids", "--events"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.contains("record: tmetric:event:rate1m"));
    assert!(yaml.contains("record: tmetric:tma_retiring_ratio:rate1m"));
    // tma_core_bound reads the recorded rules of other metrics, after them.
    let core = yaml.find("record: tmetric:tma_core_bound_ratio").unwrap();
    assert!(yaml.find("record: tmetric:tma_backend_bound_ratio").unwrap() < core);
    assert!(yaml[core..].contains("clamp_min((sum without (model, pmu) (tmetric:tma_backend_bound_ratio:rate1m{model=\\\"x86/sapphirerapids\\\"}) - sum without (model, pmu) (tmetric:tma_memory_bound_ratio:rate1m{model=\\\"x86/sapphirerapids\\\"})), 0)"), "{yaml}");
    // Without --events, the metric rules only: the event rates' group is loaded once.
    let out = tmetric(&["rules", "-M", "TopdownL2", "--model", "sapphirerapids"]);
    let yaml = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(!yaml.contains("record: tmetric:event:rate1m"), "{yaml}");
    assert!(stderr(&out).contains("load `tmetric rules --events --window 1m` once"));
    // TopdownL2's file records L2 only: the L1 metrics it reads are written into its rules.
    assert!(!yaml.contains("record: tmetric:tma_backend_bound_ratio"), "{yaml}");
    assert!(yaml.contains("record: tmetric:tma_core_bound_ratio"), "{yaml}");
    // A count is not a ratio: said, with the reason.
    let out = tmetric(&["rules", "-M", "tma_info_thread_slots", "--model", "sapphirerapids"]);
    let yaml = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(yaml.contains("# not translated: x86/sapphirerapids tma_info_thread_slots: its value depends on the interval's length"), "{yaml}");
    assert!(stderr(&out).contains("tma_info_thread_slots is not translated"));
    // The dashboard: TopdownL1 and L2 per host and per cgroup, from the exported gauges.
    let out = tmetric(&[
        "rules",
        "-M",
        "Software,TopdownL1,TopdownL2",
        "--model",
        "sapphirerapids",
        "--dashboard",
    ]);
    let dash: Value = serde_json::from_slice(&out.stdout).unwrap();
    let panels = dash["panels"].as_array().unwrap();
    let rows: Vec<&str> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    // The software metrics are not dropped beside a model's, and quality comes first.
    assert_eq!(
        rows,
        [
            "Measurement quality per host",
            "TopdownL1 per host",
            "TopdownL2 per host",
            "common/common per host",
            "Measurement quality per cgroup",
            "TopdownL1 per cgroup",
            "TopdownL2 per cgroup",
            "common/common per cgroup"
        ]
    );
    let exprs: Vec<&str> = panels.iter().filter_map(|p| p["targets"][0]["expr"].as_str()).collect();
    assert!(exprs.contains(&"tmetric_tma_retiring_ratio{instance=~\"$instance\",cgroup=~\"$cgroup\",model=\"x86/sapphirerapids\"}"));
    // Grafana's unit ids, and every "All" matches.
    let units: Vec<&str> =
        panels.iter().filter_map(|p| p["fieldConfig"]["defaults"]["unit"].as_str()).collect();
    assert!(units.contains(&"cps") && units.contains(&"percentunit"), "{units:?}");
    assert!(!units.iter().any(|u| ["per_second", "seconds", "bytes_per_second"].contains(u)));
    for v in dash["templating"]["list"].as_array().unwrap() {
        if v["includeAll"] == true {
            assert!(v["allValue"].is_string(), "{v}");
        }
    }
}
