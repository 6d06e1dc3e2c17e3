//! Inputs that are not perf stat output, malformed lines (errors with line and column) and
//! skippable lines (warnings).
use tmetric_perfstat::{ImportError, Layout, parse, parse_bytes, parse_with};

const HEADER: &str = "\n Performance counter stats for 'sleep 1':\n\n";

#[track_caller]
fn malformed(input: &str) -> (usize, usize, String) {
    match parse(input, "x.log") {
        Err(ImportError::Malformed { source_name, line, column, message, .. }) => {
            assert_eq!(source_name, "x.log");
            (line, column, message)
        }
        other => panic!("expected a malformed-line error, got {other:?}"),
    }
}

#[track_caller]
fn not_perf(input: &str) -> String {
    match parse(input, "x.log") {
        Err(err @ ImportError::NotPerfStat { .. }) => err.to_string(),
        other => panic!("expected not-perf-stat, got {other:?}"),
    }
}

#[test]
fn inputs_that_are_not_perf_stat_output() {
    for input in [
        "",
        "\n\n  \n",
        "hello world\nthis is prose\n",
        "# only a comment\n",
        "\u{0}\u{1}\u{2}binary",
        // `perf record` prints no counter rows.
        "[ perf record: Woken up 1 times to write data ]\n[ perf record: Captured and wrote 0.044 MB perf.data ]\n",
        "{\"not\": \"perf\"}\n",
        "a;b;c\n1;2;3\n",
    ] {
        let message = not_perf(input);
        assert!(message.starts_with("no perf stat counter rows found in `x.log`"), "{message}");
        assert!(message.contains("expected `perf stat` output"), "{message}");
    }
    assert!(not_perf("").contains("(it is empty)"));
    let message = not_perf("hello world\n");
    assert!(message.contains("(1 line that is not perf's output: 1 before its first block (line 1); first line: `hello world`)"), "{message}");
    assert!(matches!(
        parse_bytes(&[0xff, 0xfe, 0x00, 0x41], "b"),
        Err(ImportError::NotPerfStat { .. })
    ));
}

#[test]
fn metric_only_output_is_refused() {
    // `perf stat --metric-only -M TopdownL1` prints metric values and no counts.
    let text = format!(
        "{HEADER}  %  tma_retiring  %  tma_bad_speculation\n              24.6                    7.5\n"
    );
    let (line, column, message) = malformed(&text);
    assert_eq!((line, column), (5, 39));
    assert!(message.contains("--metric-only"), "{message}");
    let csv = "24.6,7.5,40.1,27.8,\n";
    let err = parse(csv, "m.csv").unwrap_err().to_string();
    assert!(err.contains("--metric-only"), "{err}");
}

#[test]
fn malformed_text_rows_name_line_and_column() {
    let cases: [(&str, usize, usize, &str); 8] = [
        // `,` as the decimal mark after `,` grouped digits: two locales in one log.
        (
            "     1,234,567      cycles\n          1,02 msec task-clock\n",
            2,
            11,
            "`1,02` has `,` as the decimal mark, but line 4 `1,234,567` groups digits with it",
        ),
        // Digits grouped with `.` after digits grouped with `,`.
        (
            "     1,234,567      cycles\n     1.234.567      instructions\n",
            2,
            6,
            "`1.234.567` has `.` to group digits, but line 4 `1,234,567` groups them with `,`",
        ),
        (
            "     1,234,567      cycles\n     <not countd>      instructions\n",
            2,
            6,
            "`<not counted>`",
        ),
        ("     1,234,567      cycles\n     1,234,567  msec\n", 2, 21, "no event name"),
        (
            "     1,234,567      cycles\n     1,234,567      msec  task-clock  foo  bar\n",
            2,
            44,
            "found 4 words",
        ),
        ("     1.001234567      1,234   cycles\n     2.002469134   \n", 2, 17, "no event name"),
        ("     1.001234567      1,234   cycles\n     2.002469134  CPU0\n", 2, 23, "no count"),
        (
            "S0-D0-C0   2    1,234   cycles\nS0-D0-C1   2    seven   cycles\n",
            2,
            17,
            "expected a count",
        ),
    ];
    for (body, line, column, needle) in cases {
        let input = format!("{HEADER}{body}");
        let (got_line, got_column, message) = malformed(&input);
        assert_eq!((got_line, got_column), (line + 3, column), "{body:?}: {message}");
        assert!(message.contains(needle), "{body:?}: {message}");
    }
}

#[test]
fn a_lone_number_is_not_a_damaged_row() {
    // Without perf's marks (a unit, a `#`, a prefix, perf's alignment) a number alone is
    // someone's output, skipped and counted.
    let text =
        format!("{HEADER}     1,234,567      cycles\n42\n     2,345,678      instructions\n");
    let log = parse(&text, "x.log").unwrap();
    assert_eq!(log.blocks[0].rows.len(), 2);
    assert_eq!(log.skipped.inside.ranges, [(5, 5)]);
}

#[test]
fn the_error_shows_file_line_column_and_text() {
    let input = format!("{HEADER}     1,234,567      cycles\r\n          1,02 msec task-clock\r\n");
    let err = parse(&input, "run.log").unwrap_err();
    let shown = err.to_string();
    assert!(shown.starts_with("run.log:5:11: `1,02` has `,` as the decimal mark"), "{shown}");
    assert!(shown.ends_with("\n  |           1,02 msec task-clock"), "{shown:?}");
}

#[test]
fn malformed_csv_and_json_rows() {
    let csv = "1234,,cycles,1000,100.00,,\n5678,,instructions\n";
    let (line, _, message) = malformed(csv);
    assert_eq!(line, 2);
    assert!(message.contains("run-time and pcnt-running"), "{message}");

    let csv = "1234,,cycles,1000,100.00,,\n<not countd>,,instructions,0,100.00,,\n";
    assert_eq!(malformed(csv).0, 2);

    let csv =
        "     1.001234567,1234,,cycles,1000,100.00,,\n     2.002469134,12x,,cycles,1000,100.00,,\n";
    let (line, column, message) = malformed(csv);
    assert_eq!((line, column), (2, 18));
    assert!(message.contains("`12x`"), "{message}");

    let good = r#"{"counter-value" : "1.000000", "unit" : "", "event" : "cycles", "event-runtime" : 1, "pcnt-running" : 100.00, "metric-value" : "0.000000", "metric-unit" : ""}"#;
    let truncated = format!("{good}\n{}\n", &good[..60]);
    let (line, _, message) = malformed(&truncated);
    assert_eq!(line, 2);
    assert!(message.contains("invalid JSON object"), "{message}");
    let no_event = format!("{good}\n{{\"counter-value\" : \"2.000000\", \"unit\" : \"\"}}\n");
    let (line, _, message) = malformed(&no_event);
    assert_eq!(line, 2);
    assert!(message.contains("no `event`"), "{message}");
    let bad_count = format!("{good}\n{}\n", good.replace("\"1.000000\"", "\"1,0\""));
    let (line, column, message) = malformed(&bad_count);
    assert_eq!((line, column), (2, 2));
    assert!(message.contains("counter-value"), "{message}");
}

#[test]
fn prose_lines_are_skipped_with_warnings() {
    let input = format!(
        "$ perf stat -e cycles sleep 1{HEADER}     1,234,567      cycles\n\nSome events weren't counted. Try disabling the NMI watchdog:\n\techo 0 > /proc/sys/kernel/nmi_watchdog\n\tperf stat ...\n\techo 1 > /proc/sys/kernel/nmi_watchdog\nthe end\n"
    );
    let log = parse(&input, "x.log").unwrap();
    // Not perf's: counted where they lie, not kept as warnings; perf's own hints are not
    // counted.
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(log.skipped.before.ranges, [(1, 1)]);
    assert_eq!(log.skipped.after.ranges, [(10, 10)]);
    assert_eq!(log.skipped.first[1], (10, "skipped `the end`: not a perf stat counter row".into()));
    assert_eq!(log.blocks[0].rows.len(), 1);
}

#[test]
fn a_forced_layout_is_used() {
    let csv = "1234|msec|task-clock|1234000|100.00|0.001|CPUs utilized\n";
    let log = parse_with(csv, "x", Some(Layout::Csv("|".into()))).unwrap();
    assert_eq!(log.blocks[0].rows[0].event, "task-clock");
    // Multi-character separators are not detected but can be given.
    let csv = "1234::::cycles::1000::100.00::::\n";
    let log = parse_with(csv, "x", Some(Layout::Csv("::".into()))).unwrap();
    assert_eq!(log.blocks[0].rows[0].event, "cycles");
    assert!(matches!(
        parse_with(csv, "x", Some(Layout::Csv(String::new()))),
        Err(ImportError::NotPerfStat { .. })
    ));
    // Text forced onto JSON output finds no counter rows.
    let json = r#"{"counter-value" : "1.000000", "unit" : "", "event" : "cycles", "event-runtime" : 1, "pcnt-running" : 100.00}"#;
    assert!(parse_with(json, "x", Some(Layout::Std)).is_err());
    assert!(parse_with(json, "x", Some(Layout::Json)).is_ok());
}
