//! Logs and selections that cannot be evaluated: a malformed line with its position, input that
//! is not perf's, an unknown metric with suggestions, selected metrics without inputs listed.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::ok;

use super::{fixture, json, line_of, one, read, refused, rows_of};

#[test]
fn malformed_line_is_an_error_with_its_position() {
    let log = read("real/std_global.txt");
    let line = line_of(&log, "context-switches", 0);
    let broken = log.replace(
        "                 1      context-switches",
        "              1,0x      context-switches",
    );
    assert_ne!(broken, log);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("from_perf_malformed.txt");
    std::fs::write(&path, broken).unwrap();
    let path = path.display().to_string();
    let err = refused(&["eval", "--from-perf", &path], "cli_from_perf__malformed_line");
    // The line the snapshot holds is the one the fixture has the row on.
    assert!(err.contains(&format!("{path}:{line}:")), "{err}");
}

#[test]
fn not_perf_output_says_what_was_expected() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("from_perf_not_perf.txt");
    std::fs::write(&path, "Dear list,\nplease find my numbers below.\n").unwrap();
    let path = path.display().to_string();
    refused(&["eval", "--from-perf", &path], "cli_from_perf__not_perf_output");
    refused(&["eval", "--from-perf", "/nonexistent/perf.txt"], "cli_from_perf__no_such_log");
}

#[test]
fn unknown_metric_is_an_error_with_suggestions() {
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    refused(
        &["eval", "--from-perf", &path, "-M", "tma_dtbl_store"],
        "cli_from_perf__unknown_metric",
    );
}

/// -M groups and metrics none of whose inputs the log has are still listed, with what is missing.
#[test]
fn selected_metrics_without_inputs_are_listed() {
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    let args = ["eval", "--from-perf", &path, "-M", "tma_dtlb_store,tma_info_system_gflops"];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (_, rows) = json(&ok(&json_args));
    // meteorlake has it on both core PMUs.
    let both = rows_of(&rows, "tma_info_system_gflops");
    assert_eq!(both.len(), 2);
    let gflops = *both.iter().find(|r| r["pmu"] == "cpu_core").unwrap();
    assert_eq!(gflops["value"], Value::Null);
    assert_eq!(gflops["interval"], Value::Null);
    let missing = gflops["missing"].as_array().unwrap();
    assert!(missing.iter().any(|m| m == "cpu_core@FP_ARITH_INST_RETIRED.SCALAR@"), "{missing:?}");
    assert_eq!(one(&rows, "tma_dtlb_store")["perf"]["agrees"], true);
}

/// A per-core `--topdown` table holds shares, not counts: refused as metric-only output at the
/// first share, not as a malformed count.
#[test]
fn a_per_core_topdown_table_is_refused_as_metric_only() {
    let path = fixture("perf/std_topdown_per_core_table.txt");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["eval", "--from-perf", &path])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    let log = read("perf/std_topdown_per_core_table.txt");
    let line = log.lines().position(|l| l.starts_with("S0-D0-C0")).unwrap() + 1;
    let want = format!(
        "{path}:{line}:38: `31.4%` is a metric's value, not a count: a `--topdown` or `--metric-only` table has no counts"
    );
    assert!(err.contains(&want), "{err}");
    assert!(!err.contains("is not a number"), "{err}");
}
