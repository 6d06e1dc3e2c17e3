//! `tmetric list` end to end through the binary.
//!
//! Expected names, groups, cpuid regexes and counter numbers are read here from the vendor
//! files in pmu-events/ (the catalogue's source), not from the catalogue itself.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{check, ok_stdout as ok, stderr, tmetric};

/// Every line of `text` as a JSON object.
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
        })
        .inspect(|v| assert!(v.is_object(), "not an object: {v}"))
        .collect()
}

fn arch_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pmu-events/arch")
}

fn vendor_json(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(arch_dir().join(path)).expect("vendor JSON is present");
    serde_json::from_str(&text).expect("vendor JSON parses")
}

/// The cpuid regexes mapfile.csv gives the model directory `dir`.
fn mapfile_regexes(arch: &str, dir: &str) -> Vec<String> {
    let text = std::fs::read_to_string(arch_dir().join(arch).join("mapfile.csv")).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|cols| cols.len() >= 3 && cols[2] == dir)
        .map(|cols| cols[0].to_string())
        .collect()
}

#[test]
fn models_show_sapphirerapids_with_its_cpuid() {
    let regexes = mapfile_regexes("x86", "sapphirerapids");
    assert!(!regexes.is_empty());
    let text = ok(&["list", "models"]);
    let line =
        text.lines().find(|l| l.starts_with("x86/sapphirerapids ")).expect("a sapphirerapids row");
    for regex in &regexes {
        assert!(line.contains(regex.as_str()), "{line} lacks {regex}");
    }
    let rows = json_lines(&ok(&["list", "models", "--json"]));
    let spr =
        rows.iter().find(|r| r["model"] == "x86/sapphirerapids").expect("a sapphirerapids object");
    assert_eq!(spr["sys"], false);
    let cpuids: Vec<&str> =
        spr["cpuids"].as_array().unwrap().iter().map(|c| c["regex"].as_str().unwrap()).collect();
    assert_eq!(cpuids, regexes);
    // The common table is listed as a model too.
    assert!(rows.iter().any(|r| r["model"] == "common/common"));
}

/// The filter is a case-insensitive substring of the model's path.
#[test]
fn models_filter_is_a_substring() {
    let rows = json_lines(&ok(&["list", "models", "SAPPHIRE", "--json"]));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["model"], "x86/sapphirerapids");
}

#[test]
fn metrics_glob_finds_tma_metrics_with_their_groups() {
    let text =
        ok(&["--perf-version", "6.12", "list", "metrics", "--model", "sapphirerapids", "tma_*"]);
    assert!(text.lines().any(|l| l.trim_end() == "  tma_frontend_bound  (%)"), "{text}");
    // Every metric header line is a `tma_` name.
    for line in text.lines().filter(|l| l.starts_with("  ") && !l.starts_with("   ")) {
        assert!(line.trim_start().starts_with("tma_"), "{line}");
    }

    let rows = json_lines(&ok(&[
        "--perf-version",
        "6.12",
        "list",
        "--model",
        "x86/sapphirerapids",
        "tma_*",
        "--json",
    ]));
    let vendor = vendor_json("x86/sapphirerapids/spr-metrics.json");
    let expected: Vec<&str> = {
        let mut names: Vec<&str> = vendor
            .iter()
            .map(|m| m["MetricName"].as_str().unwrap())
            .filter(|n| n.to_lowercase().starts_with("tma_"))
            .collect();
        names.sort_unstable();
        names
    };
    let got: Vec<&str> = rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(got, expected);
    let frontend = rows.iter().find(|r| r["metric"] == "tma_frontend_bound").unwrap();
    let json = vendor.iter().find(|m| m["MetricName"] == "tma_frontend_bound").unwrap();
    assert_eq!(frontend["expr"], json["MetricExpr"]);
    assert_eq!(frontend["threshold"], json["MetricThreshold"]);
    let groups: Vec<&str> = json["MetricGroup"].as_str().unwrap().split(';').collect();
    assert_eq!(frontend["groups"], serde_json::json!(groups));
    assert_eq!(frontend["common"], false);
    assert_eq!(frontend["unit"], "%");
    assert_eq!(frontend["scale"], 100.0);
}

#[test]
fn metrics_filter_matches_group_names() {
    let rows =
        json_lines(&ok(&["list", "metrics", "--model", "sapphirerapids", "topdownl1", "--json"]));
    let vendor = vendor_json("x86/sapphirerapids/spr-metrics.json");
    let mut expected: Vec<&str> = vendor
        .iter()
        .filter(|m| {
            let name = m["MetricName"].as_str().unwrap().to_lowercase();
            let groups = m["MetricGroup"].as_str().unwrap_or("").to_lowercase();
            name.contains("topdownl1") || groups.contains("topdownl1")
        })
        .map(|m| m["MetricName"].as_str().unwrap())
        .collect();
    expected.sort_unstable();
    let got: Vec<&str> = rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(got, expected);
}

#[test]
fn common_metrics_are_listed_for_every_model() {
    let vendor = vendor_json("../generic/metrics.json");
    let first = vendor[0]["MetricName"].as_str().unwrap();
    for model in ["sapphirerapids", "arm/neoverse-n1"] {
        // The text form in whole: the common metric under its own heading.
        let slug = model.replace(['/', '-'], "_");
        let out = check(
            &["--perf-version", "6.12", "list", "metrics", "--model", model, first],
            &format!("cli_list__common_metric_{slug}"),
        );
        assert!(out.status.success());
        let rows = json_lines(&ok(&[
            "--perf-version",
            "6.12",
            "list",
            "metrics",
            "--model",
            model,
            first,
            "--json",
        ]));
        let row = rows.iter().find(|r| r["metric"] == first).expect("the common metric");
        assert_eq!(row["common"], true);
        assert_eq!(row["expr"], vendor[0]["MetricExpr"]);
    }
}

#[test]
fn metricgroups_list_their_metrics() {
    let rows = json_lines(&ok(&[
        "list",
        "metricgroups",
        "--model",
        "sapphirerapids",
        "TopdownL1",
        "--json",
    ]));
    assert_eq!(rows.len(), 1, "{rows:?}");
    let vendor = vendor_json("x86/sapphirerapids/spr-metrics.json");
    let mut expected: Vec<&str> = vendor
        .iter()
        .filter(|m| m["MetricGroup"].as_str().unwrap_or("").split(';').any(|g| g == "TopdownL1"))
        .map(|m| m["MetricName"].as_str().unwrap())
        .collect();
    expected.sort_unstable();
    assert_eq!(rows[0]["metrics"], serde_json::json!(expected));
}

#[test]
fn events_show_encoding_and_counters() {
    let pipeline = vendor_json("x86/sapphirerapids/pipeline.json");
    let counter_of = |name: &str| -> String {
        pipeline.iter().find(|e| e["EventName"] == name).unwrap()["Counter"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(counter_of("INST_RETIRED.ANY"), "Fixed counter 0");
    assert_eq!(counter_of("INST_RETIRED.ANY_P"), "0,1,2,3,4,5,6,7");

    let rows = json_lines(&ok(&[
        "list",
        "events",
        "--model",
        "sapphirerapids",
        "inst_retired.any*",
        "--json",
    ]));
    let any = rows.iter().find(|r| r["event"] == "INST_RETIRED.ANY").expect("INST_RETIRED.ANY");
    // jevents replaces inst_retired.any's encoding by a fixed string (jevents.py's `JsonEvent`).
    assert_eq!(any["encoding"], "cpu/event=0xc0,period=2000003/");
    assert_eq!(any["counters"]["fixed"], serde_json::json!([0]));
    let any_p =
        rows.iter().find(|r| r["event"] == "INST_RETIRED.ANY_P").expect("INST_RETIRED.ANY_P");
    assert_eq!(any_p["counters"]["generic"], serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7]));

    // The text form: the counters (`counters: 0-7`), an uncore event's PMU and encoding.
    check(
        &["list", "events", "--model", "sapphirerapids", "INST_RETIRED.ANY_P"],
        "cli_list__events_inst_retired_any_p",
    );
    check(
        &["list", "events", "--model", "sapphirerapids", "UNC_M_CAS_COUNT.RD"],
        "cli_list__events_uncore_imc",
    );
}

/// A misspelt model: exit status 2, nothing on standard output, the candidates named.
#[test]
fn unknown_model_exits_2_with_candidates() {
    check(
        &["--perf-version", "6.12", "list", "metrics", "--model", "sapphirerapid"],
        "cli_list__unknown_model",
    );
}

#[test]
fn metrics_without_a_model_list_this_machines_and_say_so() {
    let output = tmetric(&["list", "metrics"]);
    let err = stderr(&output);
    if output.status.success() {
        // This machine's cpuid maps to a model: it is listed, and named.
        let model = err
            .split("listing ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("{err}"));
        assert!(err.contains("(this machine's model; --model names another)"), "{err}");
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(out.starts_with(&format!("Metrics of {model}:")), "{out}");
    } else {
        assert_eq!(output.status.code(), Some(2));
        assert!(err.contains("--model") && err.contains("x86/"), "{err}");
    }
}

/// perf's `list --raw-dump`, which perf's own shell tests read: names separated by spaces.
#[test]
fn raw_dump_lists_names_for_scripts() {
    let output = tmetric(&[
        "--perf-version",
        "6.12",
        "list",
        "--raw-dump",
        "metricgroups",
        "--model",
        "sapphirerapids",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let groups: Vec<&str> = text.split_whitespace().collect();
    assert!(groups.contains(&"TopdownL1") && groups.contains(&"Software"), "{text}");
    // Only groups some metric names (`-M` accepts each).
    assert!(!groups.contains(&"LSD"), "{text}");
    let mut sorted = groups.clone();
    sorted.sort_unstable();
    assert_eq!(groups, sorted);
    let output = tmetric(&[
        "--perf-version",
        "6.12",
        "list",
        "--raw-dump",
        "metrics",
        "--model",
        "sapphirerapids",
    ]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let metrics: Vec<&str> = text.split_whitespace().collect();
    assert!(metrics.contains(&"tma_retiring") && metrics.contains(&"cpus_utilized"), "{text}");
    assert!(!text.contains('\n'), "one line, as perf's");
}

/// A kind that is not one (`metricz`) with a filter after it: exit status 2, named.
#[test]
fn unknown_kind_with_a_filter_is_an_error() {
    check(&["list", "metricz", "tma_*", "--model", "sapphirerapids"], "cli_list__unknown_kind");
}

/// The kernel PMU events of this machine, read from sysfs here: `pmu/event/` per file under
/// `events/` that is not a `.scale`/`.unit` companion.
fn sysfs_pmu_events() -> Vec<String> {
    let mut found = Vec::new();
    let Ok(pmus) = std::fs::read_dir("/sys/bus/event_source/devices") else { return found };
    for pmu in pmus.flatten() {
        let Ok(events) = std::fs::read_dir(pmu.path().join("events")) else { continue };
        for event in events.flatten() {
            let name = event.file_name().to_string_lossy().into_owned();
            if !name.contains('.') {
                found.push(format!("{}/{name}/", pmu.file_name().to_string_lossy()));
            }
        }
    }
    found.sort();
    found
}

/// perf's stat_all_pmu.sh loop: `list --raw-dump pmu` names every sysfs PMU event, and
/// `stat -e` on each prints the name or `<not supported>`.
#[test]
fn pmu_lists_the_kernel_pmu_events_and_each_one_counts() {
    let expected = sysfs_pmu_events();
    let raw = ok(&["list", "--raw-dump", "pmu"]);
    let listed: Vec<&str> = raw.split_whitespace().collect();
    assert_eq!(listed, expected.iter().map(String::as_str).collect::<Vec<_>>());
    let text = ok(&["list", "pmu"]);
    assert_eq!(text.lines().count(), expected.len(), "{text}");
    for line in text.lines() {
        assert_eq!(line.find("[Kernel PMU event]"), Some(53), "{line}");
    }
    for event in listed.iter().filter(|e| !e.contains('?')) {
        let out = tmetric(&["stat", "-e", event, "true"]);
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(all.contains(event) || all.contains("<not supported>"), "{event}: {all}");
    }
    let json = json_lines(&ok(&["list", "-j", "pmu", "tsc"]));
    let tsc: Vec<&Value> = json.iter().filter(|v| v["event"] == "tsc").collect();
    if expected.iter().any(|e| e == "msr/tsc/") {
        assert_eq!(tsc.len(), 1, "{json:?}");
        assert_eq!(tsc[0]["encoding"], "msr/tsc/");
        assert_eq!(tsc[0]["terms"], "event=0x00");
    }
}
