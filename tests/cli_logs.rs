//! `tmetric eval --from-perf` (and `tmetric latency`) through the binary on logs as people keep
//! them (numbers in perf's locale, a workload's lines around and inside perf's blocks)
//! and on hostile input (no line ends, endless lines that are not perf's, duplicated
//! JSON keys, misleading messages).
//!
//! The logs are crates/perfstat/tests/data/kept, written by hand with every value perf printed
//! worked out from the counts beside it: evaluating them must reproduce each of those values.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{check, check_all, ok, stderr, stdout};

fn kept(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/perfstat/tests/data/kept")
        .join(name)
        .display()
        .to_string()
}

fn scratch(name: &str, text: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Exit code 2, the whole transcript compared with the snapshot `expect`; returns standard error
/// for the decimals the snapshot masks.
fn refused(args: &[&str], expect: &str) -> String {
    let output = check(args, expect);
    assert_eq!(output.status.code(), Some(2), "tmetric {args:?}");
    stderr(&output)
}

/// The header object and the metric objects of `--json` output.
fn json(output: &Output) -> (Value, Vec<Value>) {
    let text = stdout(output);
    let mut lines = text.lines();
    let first: Value = serde_json::from_str(lines.next().expect("a header line")).unwrap();
    let header = first["assumptions"].clone();
    let rows = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    (header, rows)
}

/// (metric, interval, aggr, value, perf's printed text) of every metric line.
fn values(rows: &[Value]) -> Vec<(String, Value, Value, Value, Value)> {
    rows.iter()
        .map(|r| {
            (
                r["metric"].as_str().unwrap().to_string(),
                r["interval"].clone(),
                r["aggr"].clone(),
                r["value"].clone(),
                r["perf"]["printed"].clone(),
            )
        })
        .collect()
}

fn value_of(rows: &[Value], metric: &str, aggr: Option<&str>) -> f64 {
    rows.iter()
        .find(|r| r["metric"] == metric && aggr.is_none_or(|a| r["aggr"] == a))
        .unwrap_or_else(|| panic!("no {metric} in {rows:?}"))["value"]
        .as_f64()
        .unwrap()
}

/// Every value perf printed that tmetric checked agrees, and there were `checked` of them.
#[track_caller]
fn all_agree(output: &Output, checked: usize) {
    let err = stderr(output);
    assert!(
        err.contains(&format!("perf printed {checked} of these values"))
            && err.contains("all agree"),
        "{err}"
    );
}

#[test]
fn locale_numbers_in_each_layout() {
    // (log, values perf printed and tmetric checks, convention, a metric and its value)
    type Case<'a> = (&'a str, usize, Option<&'a str>, &'a str, Option<&'a str>, f64);
    let cases: [Case; 7] = [
        // CPUs utilized, 4 rates, GHz and insn per cycle.
        (
            "std_de_DE.txt",
            6,
            Some("as de_DE prints them"),
            "ghz",
            None,
            4_595_014_128.0 / 1520.45e6,
        ),
        (
            "std_interval_en_IN.txt",
            4,
            Some("as en_IN prints them"),
            "ghz",
            None,
            4_595_014_128.0 / 1000.52e6,
        ),
        (
            "std_per_cpu_fr_FR.txt",
            6,
            Some("as fr_FR prints them"),
            "ghz",
            Some("CPU1"),
            987_654_321.0 / 1001.20e6,
        ),
        (
            "std_interval_per_cpu_de_DE.txt",
            4,
            Some("as de_DE prints them"),
            "ghz",
            Some("CPU1"),
            3.21e9 / 998.10e6,
        ),
        // No elapsed time in `-x`: the rates, GHz and insn per cycle.
        (
            "csv_de_DE.txt",
            5,
            Some("as de_DE and fr_FR print them"),
            "insn_per_cycle",
            None,
            6.1e9 / 4_595_014_128.0,
        ),
        (
            "csv_interval_fr_FR.txt",
            2,
            Some("as de_DE and fr_FR print them"),
            "ghz",
            None,
            4_595_014_128.0 / 1000.52e6,
        ),
        ("csv_per_cpu_en_IN.txt", 2, None, "ghz", Some("CPU0"), 2_345_678_901.0 / 1001.23e6),
    ];
    for (name, checked, convention, metric, aggr, want) in cases {
        let path = kept(name);
        let output = ok(&["eval", "--from-perf", &path, "--json"]);
        all_agree(&output, checked);
        let (header, rows) = json(&output);
        match convention {
            Some(like) => {
                let said = header["numbers"].as_str().unwrap_or_else(|| panic!("{name}: {header}"));
                assert!(said.contains(like), "{name}: {said}");
            }
            None => assert_eq!(header["numbers"], Value::Null, "{name}"),
        }
        let got = value_of(&rows, metric, aggr);
        assert!((got - want).abs() <= 1e-9 * want, "{name}: {metric} {got} != {want}");
        // The text layout names the convention in its header.
        let text = stdout(&ok(&["eval", "--from-perf", &path]));
        let first = text.lines().next().unwrap();
        assert_eq!(first.contains("numbers: "), convention.is_some(), "{name}: {first}");
    }
}

/// perf's printed values are checked at their precision whatever the decimal mark: `3,032 GHz`
/// where the counts give 3.0221 is a disagreement, not within a whole unit.
#[test]
fn locale_values_are_checked_at_their_printed_precision() {
    let de = std::fs::read_to_string(kept("std_de_DE.txt")).unwrap();
    let path = scratch("logs_de_wrong.txt", &de.replace("3,022 GHz", "3,032 GHz"));
    let output = ok(&["eval", "--from-perf", &path]);
    let err = stderr(&output);
    assert!(err.contains("perf printed 6 of these values") && err.contains("1 disagree"), "{err}");
    assert!(stdout(&output).contains("(perf printed 3,032 GHz)"), "{}", stdout(&output));
}

#[test]
fn two_number_formats_in_one_log_are_refused_naming_both_lines() {
    let de = std::fs::read_to_string(kept("std_de_DE.txt")).unwrap();
    let text =
        de.replace("             2.345      page-faults", "             2,345      page-faults");
    let path = scratch("logs_two_locales.txt", &text);
    let err = refused(&["eval", "--from-perf", &path], "cli_logs__two_number_formats");
    // The snapshot masks line 4's number; the message quotes it as the log has it.
    assert!(err.contains("but line 4 `1.520,45` uses it as the decimal mark"), "{err}");
}

/// The JSON values of a log, and of the same log without the lines `noise` (0-based) says.
fn same_as_clean(name: &str, noise: &[(usize, usize)]) -> (Output, Vec<Value>) {
    let path = kept(name);
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let text = std::fs::read_to_string(&path).unwrap();
    let clean: String = text
        .lines()
        .enumerate()
        .filter(|(i, _)| !noise.iter().any(|&(a, b)| (a..b).contains(i)))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    let clean_path = scratch(&format!("clean_{name}"), &clean);
    let clean_output = ok(&["eval", "--from-perf", &clean_path, "--json"]);
    let (_, clean_rows) = json(&clean_output);
    assert!(!rows.is_empty(), "{name}");
    assert_eq!(values(&rows), values(&clean_rows), "{name}");
    assert!(!stderr(&clean_output).contains("not perf's output"), "{}", stderr(&clean_output));
    (output, rows)
}

#[test]
fn a_workloads_lines_around_and_inside_perfs_blocks_are_skipped_and_named() {
    let (output, rows) = same_as_clean("std_bench_interleaved.txt", &[(0, 10), (15, 16), (26, 28)]);
    all_agree(&output, 6);
    assert!((value_of(&rows, "cpus_utilized", None) - 1520.45e6 / 1.523456789e9).abs() < 1e-12);
    let err = stderr(&output);
    assert!(
        err.contains("skipped 13 lines that are not perf's output: 10 before its first block (lines 1-10), 1 inside a block (line 16), 2 after its last block (lines 27-28); the first, line 1: skipped `$ perf stat"),
        "{err}"
    );

    let (output, _) = same_as_clean("std_interval_interleaved.txt", &[(2, 3), (5, 7), (10, 11)]);
    let err = stderr(&output);
    assert!(
        err.contains("3 inside a block (lines 3, 6-7), 1 after its last block (line 11)"),
        "{err}"
    );

    let (output, _) = same_as_clean("std_two_runs_between.txt", &[(8, 10)]);
    assert!(stderr(&output).contains("2 between blocks (lines 9-10)"), "{}", stderr(&output));
    let (output, _) = same_as_clean("csv_bench_interleaved.txt", &[(0, 2), (4, 5), (7, 8)]);
    assert!(stderr(&output).contains("skipped 4 lines"), "{}", stderr(&output));
    let (output, _) = same_as_clean("json_bench_interleaved.txt", &[(0, 2), (4, 5), (6, 7)]);
    assert!(stderr(&output).contains("skipped 4 lines"), "{}", stderr(&output));
}

#[test]
fn a_file_of_only_other_lines_is_still_refused() {
    let path = scratch("logs_noise.txt", "bench v1.2\n3 iterations done in 1.52 s\n1234 ops/sec\n");
    refused(&["eval", "--from-perf", &path], "cli_logs__only_other_lines");
}

/// Issue 22, item 2: input without line ends ends at once with the file and line named.
#[test]
fn input_without_line_ends_is_an_error_naming_the_line() {
    refused(&["eval", "--from-perf", "/dev/zero"], "cli_logs__no_line_end_eval");
    refused(&["latency", "/dev/zero"], "cli_logs__no_line_end_latency");
    // After lines of perf's: the line is the one that is too long.
    let mut text = std::fs::read_to_string(kept("std_de_DE.txt")).unwrap();
    text.push_str(&"7".repeat(2 << 20));
    let path = scratch("logs_long_line.txt", &text);
    refused(&["eval", "--from-perf", &path], "cli_logs__long_line_after_perfs");
}

/// The peak resident memory of a running process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 22, item 3: millions of lines that are not perf's are counted, not kept. The peak
/// memory is read while tmetric still waits for more input, after it has read them all.
#[test]
fn endless_lines_that_are_not_perfs_keep_memory_flat() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["eval", "--from-perf", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let chunk = "x\n".repeat(100_000);
    for _ in 0..20 {
        stdin.write_all(chunk.as_bytes()).unwrap();
    }
    stdin.flush().unwrap();
    // Every byte written is in the pipe or read; give tmetric time to read the pipe empty.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let peak = peak_kib(child.id());
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("(2000000 lines that are not perf's output: 2000000 before its first block (lines 1-2000000); first line: `x`)"),
        "{err}"
    );
    // 4 MB of input; the debug binary's own footprint is about 10 MB.
    assert!(peak < 40_000, "peak {peak} KiB");
}

/// Issue 22, item 10: a key given twice in a `-j` line is an error naming the line.
#[test]
fn a_duplicated_json_key_is_an_error_naming_the_line() {
    let row = |value: &str| {
        format!(
            "{{\"counter-value\" : \"{value}\", \"unit\" : \"\", \"event\" : \"page-faults\", \"event-runtime\" : 1000, \"pcnt-running\" : 100.00}}"
        )
    };
    let twice = row("1.000000").replace("\"unit\"", "\"counter-value\" : \"99.000000\", \"unit\"");
    let path = scratch("logs_dup.json", &format!("{}\n{twice}\n", row("5.000000")));
    refused(&["eval", "--from-perf", &path], "cli_logs__duplicated_json_key");
    // Issue 22, item 11: an event of the wrong type is named as such.
    let array = row("1.000000").replace("\"page-faults\"", "[\"page-faults\"]");
    let path = scratch("logs_array.json", &format!("{}\n{array}\n", row("5.000000")));
    refused(&["eval", "--from-perf", &path], "cli_logs__json_event_an_array");
}

/// Issue 22, item 11: a log written with `-x ::` reads (perf takes any separator).
#[test]
fn a_log_written_with_a_two_character_separator_reads() {
    let log = "1520.45::msec::task-clock::1520450000::100.00::1.000::CPUs utilized\n120::::context-switches::1520450000::100.00::78.924::/sec\n";
    let path = scratch("logs_colons.csv", log);
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (header, rows) = json(&output);
    assert_eq!(header["layout"], "-x ::");
    assert!((value_of(&rows, "context_switches_per_sec", None) - 120.0 / 1.52045).abs() < 1e-9);
    all_agree(&output, 1);
}

/// Issue 22, item 11: a negative `--var` or literal is not called a count.
#[test]
fn negative_values_are_named_for_what_they_are() {
    check_all(
        &[
            &["eval", "--expr", "x + 1", "--var", "x=-1"],
            &["eval", "--expr", "#smt_on + 1", "--literal", "smt_on=-1"],
        ],
        "cli_logs__negative_var_and_literal",
    );
}

/// Issue 22, item 11: metrics whose input rows are all `<not counted>` are said to be not
/// counted, not to lack their inputs.
#[test]
fn not_counted_inputs_are_called_not_counted() {
    let log = " Performance counter stats for 'x':\n\n     <not counted>      context-switches\n     <not counted> msec task-clock\n             5,000      page-faults\n\n       1.000000000 seconds time elapsed\n";
    let path = scratch("logs_not_counted.txt", log);
    let output = check(
        &["eval", "--from-perf", &path, "-M", "context_switches_per_sec"],
        "cli_logs__not_counted_inputs",
    );
    assert!(output.status.success());
}

/// Issue 21: perf's aliases (`cs`, `faults`, `migrations`, `cpu-cycles`,
/// `branch-instructions`, ...) are the events the formulas name.
#[test]
fn perfs_event_aliases_are_known() {
    // 1,000.00 msec task-clock: the rates are the counts per second.
    let log = " Performance counter stats for './bench':\n\n          1,000.00 msec task-clock                       #    1.000 CPUs utilized\n               250      cs                               #  250.000 /sec\n             4,000      faults                           #    4.000 K/sec\n                 2      migrations                       #    2.000 /sec\n     2,000,000,000      cpu-cycles                       #    2.000 GHz\n     3,000,000,000      instructions                     #    1.50  insn per cycle\n       500,000,000      branch-instructions              #  500.000 M/sec\n         5,000,000      branch-misses                    #    1.00% of all branches\n\n       1.000000000 seconds time elapsed\n";
    let path = scratch("logs_aliases.txt", log);
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    assert_eq!(value_of(&rows, "context_switches_per_sec", None), 250.0);
    assert_eq!(value_of(&rows, "page_faults_per_sec", None), 4000.0);
    assert_eq!(value_of(&rows, "cpu_migrations_per_sec", None), 2.0);
    assert_eq!(value_of(&rows, "ghz", None), 2.0);
    assert_eq!(value_of(&rows, "insn_per_cycle", None), 1.5);
    assert_eq!(value_of(&rows, "branch_miss_rate", None), 1.0);
    // CPUs utilized, three rates, GHz, insn per cycle, of all branches.
    all_agree(&output, 7);
}

/// `perf stat record -e cs,faults,migrations`: `report` shows perf's rates for them.
#[test]
fn report_knows_perfs_aliases_in_perf_data() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("logs_alias_data");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("alias.data").display().to_string();
    let recorded = Command::new("perf")
        .args([
            "--perf-version",
            "6.12",
            "stat",
            "record",
            "-o",
            &path,
            "-e",
            "task-clock,cs,faults,migrations",
            "sleep",
            "0.05",
        ])
        .output();
    if !recorded.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: `perf stat record` does not work here");
        return;
    }
    let metrics = "context_switches_per_sec,page_faults_per_sec,cpu_migrations_per_sec";
    let err = stderr(&ok(&["--perf-version", "6.12", "report", "-i", &path, "-M", metrics]));
    for (event, metric) in [
        ("cs", "context_switches_per_sec"),
        ("faults", "page_faults_per_sec"),
        ("migrations", "cpu_migrations_per_sec"),
    ] {
        assert!(
            err.lines().any(|l| l.split_whitespace().nth(1) == Some(event)),
            "no {event} row in:\n{err}"
        );
        // The metric reads the aliased event: a value, not `nan` or a missing input.
        let line = err
            .lines()
            .find(|l| l.trim_end().ends_with(&format!("/sec  {metric}")))
            .unwrap_or_else(|| panic!("no {metric} in:\n{err}"));
        assert!(!line.contains("nan"), "{line}");
    }
}

fn perf_data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf").join(name).display().to_string()
}

/// Issue 27, item 3: a 2023 Tiger Lake log counts `cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/`,
/// which 6.12's formulas call INT_MISC.CLEARS_COUNT (event 0x0d, umask 0x01, cmask 1, edge).
/// Expected values (tigerlake, from the file's counts): retiring 3e9/10e9 = 30%, frontend
/// 2.5e9/10e9 - 2e8/1e10 = 23%, backend 2.5e9/10e9 + 5 * 1e8/1e10 = 30%, bad speculation
/// 1 - (0.23 + 0.30 + 0.30) = 17%.
#[test]
fn an_older_vintages_event_name_is_matched_by_encoding() {
    let path = perf_data("std_older_event_names.txt");
    let output = ok(&["eval", "--from-perf", &path, "--model", "tigerlake", "--json"]);
    all_agree(&output, 4);
    let (_, rows) = json(&output);
    for (metric, want) in [
        ("tma_retiring", 30.0),
        ("tma_frontend_bound", 23.0),
        ("tma_backend_bound", 30.0),
        ("tma_bad_speculation", 17.0),
    ] {
        let got = value_of(&rows, metric, None);
        assert!((got - want).abs() < 1e-9, "{metric}: {got}");
    }
    let backend = rows.iter().find(|r| r["metric"] == "tma_backend_bound").unwrap();
    assert_eq!(
        backend["by_encoding"],
        serde_json::json!([{
            "input": "INT_MISC.CLEARS_COUNT",
            "row": "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/",
            "encoding": "event=0x0d,umask=0x01,cmask=1,edge=1"
        }])
    );
    assert_eq!(backend["missing"], serde_json::json!([]));
    let err = stderr(&output);
    assert!(
        err.contains("note: INT_MISC.CLEARS_COUNT read from `cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/`, which the log names otherwise: both are event=0x0d,umask=0x01,cmask=1,edge=1"),
        "{err}"
    );
    let text = stdout(&ok(&["eval", "--from-perf", &path, "--model", "tigerlake"]));
    assert!(
        text.contains(
            "by encoding: INT_MISC.CLEARS_COUNT from `cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/`"
        ),
        "{text}"
    );

    let log = std::fs::read_to_string(&path).unwrap();
    // The raw encoding reads the same; another counter mask is another event.
    for (row, matched) in [
        ("cpu/event=0x0d,umask=0x01,cmask=1,edge/", true),
        ("cpu/INT_MISC.RECOVERY_CYCLES,cmask=2,edge/", false),
    ] {
        let text = log.replace("cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/", row);
        let path = scratch("logs_encoding.txt", &text);
        let (_, rows) =
            json(&ok(&["eval", "--from-perf", &path, "--model", "tigerlake", "--json"]));
        let backend = rows.iter().find(|r| r["metric"] == "tma_backend_bound").unwrap();
        assert_eq!(backend["by_encoding"][0]["row"] == row, matched, "{row}: {backend}");
        assert_eq!(
            backend["missing"] == serde_json::json!(["INT_MISC.CLEARS_COUNT"]),
            !matched,
            "{row}"
        );
    }
}

/// Issue 27, item 4: cf_z14, cf_z15 and cf_z16 explain the s390 log alike and compute the same
/// value for everything perf printed: evaluated, and said.
#[test]
fn a_tie_whose_models_agree_is_evaluated_and_said() {
    let path = perf_data("std_s390_models_agree.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    all_agree(&output, 4);
    let (header, rows) = json(&output);
    // cf_z14 and cf_z15 are in every stored vintage (5.10 on), cf_z16 from 6.1; perf's
    // mapfile.csv lists z14 before z15.
    assert_eq!(header["model"], "s390/cf_z14");
    assert_eq!(
        header["agreeing"],
        serde_json::json!(["s390/cf_z14", "s390/cf_z15", "s390/cf_z16"])
    );
    let how = header["model_source"].as_str().unwrap();
    assert!(
        how.contains("and agree: each computes the same value for every metric perf printed (12 values compared)")
            && how.contains("s390/cf_z14 stands for them: it is in perf's vendor data since 5.10 or earlier (the oldest vintage stored), as is s390/cf_z15, and perf's mapfile.csv lists it first; s390/cf_z16 only since 6.1"),
        "{how}"
    );
    let text = stdout(&ok(&["eval", "--from-perf", &path]));
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("# tmetric: s390/cf_z14, s390/cf_z15 or s390/cf_z16 (they agree on every value here) + common metrics (inferred: "),
        "{first}"
    );
    assert_eq!(value_of(&rows, "cpi", None), 2.0);
    assert!((value_of(&rows, "est_cpi", None) - 1.99).abs() < 1e-12);
    // What -M adds must agree too: l2p is computed from other events on cf_z16.
    refused(&["eval", "--from-perf", &path, "-M", "l2p"], "cli_logs__tie_differs_on_selection");
    assert!(ok(&["eval", "--from-perf", &path, "-M", "cpi"]).status.success());
}

/// Issue 27, item 4: eight models explain the log alike but compute tma_false_sharing
/// differently (32.5 and 54 cycles per access on icelake and tigerlake, ...): refused, with the
/// values.
#[test]
fn a_tie_whose_models_differ_is_refused_with_the_values() {
    let path = perf_data("std_models_differ.txt");
    let err = refused(&["eval", "--from-perf", &path], "cli_logs__tie_refused");
    // The snapshot masks the values: 32.5 * 2 GHz * 100 / 1e9 cycles, in %.
    assert!(
        err.contains("0.00065 with x86/icelake") && err.contains("0.00108 with x86/tigerlake"),
        "{err}"
    );
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--model", "icelake", "--json"]));
    assert!((value_of(&rows, "tma_false_sharing", None) - 0.00065).abs() < 1e-12);
}
