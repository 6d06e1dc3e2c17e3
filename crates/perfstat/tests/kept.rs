//! Logs as people keep them (tests/data/kept): numbers in the locale perf ran under,
//! and the workload's own lines around and inside perf's blocks.
use crate::common::{load, read, row, value};
use tmetric_perfstat::{Block, Grouping, ImportError, Layout, PerfLog, PrintedCount, parse};

/// (event, value as perf's metrics read it) of every row of a block.
fn counts(block: &Block) -> Vec<(String, f64)> {
    block
        .rows
        .iter()
        .map(|r| {
            let v = match r.value {
                PrintedCount::Value(v) => v,
                PrintedCount::NotCounted => -1.0,
                PrintedCount::NotSupported => -2.0,
            };
            (r.event.clone(), v)
        })
        .collect()
}

/// A block's interval, aggregation id, counts and printed metric values.
type Contents = (Option<f64>, Option<String>, Vec<(String, f64)>, Vec<Option<f64>>);

/// Every block's interval, aggregation id and counts, and every printed metric value.
fn contents(log: &PerfLog) -> Vec<Contents> {
    log.blocks
        .iter()
        .map(|b| {
            let metrics = b.rows.iter().flat_map(|r| r.metrics.iter().map(|m| m.value)).collect();
            (b.interval, b.aggr.as_ref().map(|a| a.id.clone()), counts(b), metrics)
        })
        .collect()
}

#[test]
fn de_de_default_layout() {
    let log = load("kept/std_de_DE.txt");
    assert_eq!(log.layout, Layout::Std);
    let block = &log.blocks[0];
    assert_eq!(value(block, "task-clock", None), 1520.45e6);
    assert_eq!(value(block, "page-faults", None), 2345.0);
    assert_eq!(value(block, "cycles", None), 4_595_014_128.0);
    assert_eq!(row(block, "cycles").running_pct, Some(51.32));
    assert_eq!(row(block, "instructions").running_pct, Some(48.68));
    let ghz = &row(block, "cycles").metrics[0];
    assert_eq!((ghz.value, ghz.name.as_str(), ghz.decimals()), (Some(3.022), "GHz", 3));
    assert_eq!(row(block, "task-clock").metrics[0].value, Some(0.998));
    assert_eq!(log.elapsed_seconds(), Some(1.523456789));
    assert_eq!(log.runs[0].user.map(|t| t.seconds), Some(1.4));
    assert_eq!(
        log.numbers.describe().unwrap(),
        "`.` groups digits and `,` is the decimal mark, as de_DE prints them (line 4 `1.520,45`)"
    );
    assert!(log.warnings.is_empty() && log.skipped.lines() == 0, "{:?}", log.warnings);
}

#[test]
fn en_in_interval_layout() {
    let log = load("kept/std_interval_en_IN.txt");
    assert_eq!(log.blocks.len(), 2);
    assert_eq!(value(&log.blocks[0], "cycles", None), 4_595_014_128.0);
    assert_eq!(value(&log.blocks[0], "instructions", None), 6_100_000_000.0);
    assert_eq!(value(&log.blocks[1], "cycles", None), 3_210_000_000.0);
    assert_eq!(value(&log.blocks[0], "task-clock", None), 1000.52e6);
    let (grouping, at) = log.numbers.grouping.clone().unwrap();
    assert_eq!((grouping, at.line), (Grouping::Lakh, 3));
    let said = log.numbers.describe().unwrap();
    assert!(said.starts_with("`,` groups digits in the Indian lakh pattern"), "{said}");
    assert!(said.contains("as en_IN prints them"), "{said}");
}

#[test]
fn fr_fr_per_cpu_layout() {
    let log = load("kept/std_per_cpu_fr_FR.txt");
    let ids: Vec<&str> = log.blocks.iter().map(|b| b.aggr.as_ref().unwrap().id.as_str()).collect();
    assert_eq!(ids, ["CPU0", "CPU1"]);
    assert_eq!(value(&log.blocks[0], "cycles", None), 2_345_678_901.0);
    assert_eq!(value(&log.blocks[1], "cycles", None), 987_654_321.0);
    assert_eq!(value(&log.blocks[1], "cpu-clock", None), 1001.20e6);
    assert_eq!(row(&log.blocks[0], "instructions").metrics[0].value, Some(1.28));
    let said = log.numbers.describe().unwrap();
    assert!(said.starts_with("a narrow no-break space (U+202F) groups digits and `,` is the decimal mark, as fr_FR prints them"), "{said}");
    // The same log with plain spaces (older C libraries) and with no-break spaces.
    for space in [" ", "\u{a0}"] {
        let text = read("kept/std_per_cpu_fr_FR.txt").replace('\u{202f}', space);
        let other = parse(&text, "fr.txt").unwrap_or_else(|e| panic!("{space:?}: {e}"));
        assert_eq!(contents(&other), contents(&log), "{space:?}");
    }
}

#[test]
fn de_de_interval_per_cpu_layout() {
    let log = load("kept/std_interval_per_cpu_de_DE.txt");
    assert_eq!(log.blocks.len(), 4);
    let b = |i: usize| &log.blocks[i];
    assert_eq!((b(0).interval, b(0).aggr.as_ref().unwrap().id.as_str()), (Some(1.001), "CPU0"));
    assert_eq!(value(b(0), "cpu-clock", None), 1000.52e6);
    assert_eq!(value(b(1), "cpu-clock", None), 998.10e6);
    assert_eq!(value(b(3), "cycles", None), 1_000_500_000.0);
    assert_eq!(row(b(3), "cycles").metrics[0].value, Some(2.0));
}

#[test]
fn de_de_csv_layout_with_split_decimals() {
    let log = load("kept/csv_de_DE.txt");
    assert_eq!(log.layout, Layout::Csv(",".into()));
    let block = &log.blocks[0];
    assert_eq!(value(block, "task-clock", None), 1520.45e6);
    assert_eq!(row(block, "task-clock").running_pct, Some(100.0));
    assert_eq!(row(block, "task-clock").metrics[0].value, Some(0.998));
    assert_eq!(row(block, "cycles").running_pct, Some(51.32));
    assert_eq!(row(block, "cycles").metrics[0].value, Some(3.022));
    assert_eq!(row(block, "instructions").metrics[0].name, "insn per cycle");
    assert_eq!(row(block, "branch-misses").value, PrintedCount::NotCounted);
    assert_eq!(log.numbers.decimal.as_ref().map(|d| (d.mark, d.line)), Some((',', 1)));
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
}

#[test]
fn fr_fr_csv_intervals_and_en_in_csv_per_cpu() {
    let log = load("kept/csv_interval_fr_FR.txt");
    assert_eq!(log.blocks.len(), 2);
    assert_eq!(value(&log.blocks[0], "task-clock", None), 1000.52e6);
    assert_eq!(value(&log.blocks[1], "task-clock", None), 998.10e6);
    assert_eq!(row(&log.blocks[1], "cycles").metrics[0].value, Some(3.216));
    // `-x` prints counts without grouping: en_IN's `-x,` output is the C locale's.
    let log = load("kept/csv_per_cpu_en_IN.txt");
    assert_eq!(log.blocks.len(), 2);
    assert_eq!(value(&log.blocks[0], "cycles", None), 2_345_678_901.0);
    assert_eq!(log.numbers.describe(), None);
}

#[test]
fn locale_logs_read_as_their_c_locale_twins() {
    // The de_DE log and the same run in the C locale hold the same numbers.
    let c = "
 Performance counter stats for './bench':

          1,520.45 msec task-clock                       #    0.998 CPUs utilized
               120      context-switches                 #   78.924 /sec
                 3      cpu-migrations                   #    1.973 /sec
             2,345      page-faults                      #    1.542 K/sec
     4,595,014,128      cycles                           #    3.022 GHz                      (51.32%)
     6,100,000,000      instructions                     #    1.33  insn per cycle           (48.68%)

       1.523456789 seconds time elapsed

       1.400000000 seconds user
       0.120000000 seconds sys

";
    let c = parse(c, "c.txt").unwrap();
    let de = load("kept/std_de_DE.txt");
    assert_eq!(contents(&de), contents(&c));
    assert_eq!(de.runs, c.runs);
}

#[test]
fn two_locales_in_one_log_are_refused_naming_both_lines() {
    let text = format!(
        "{}     1,234,567      branches\n",
        read("kept/std_de_DE.txt").replace("\n\n       1,523456789 seconds time elapsed", "")
    );
    match parse(&text, "two.txt") {
        Err(ImportError::Malformed { line, message, .. }) => {
            assert_eq!(line, 14);
            assert!(
                message.starts_with("`1,234,567` has `,` to group digits, but line 4 `1.520,45` uses it as the decimal mark"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // `-x;` with a decimal comma (`1520,45`) after a `.` decimal (`100.00`).
    let csv = "1520.45;msec;task-clock;1520450000;100.00;0.998;CPUs utilized\n120;;context-switches;1520450000;100,00;78,924;/sec\n";
    let err = parse(csv, "x.csv").unwrap_err().to_string();
    assert!(
        err.starts_with(
            "x.csv:2:1: `100,00` has `,` as the decimal mark, but line 1 `1520.45` uses `.`"
        ),
        "{err}"
    );
}

#[test]
fn a_benchmarks_lines_before_inside_and_after_the_block() {
    let log = load("kept/std_bench_interleaved.txt");
    let events: Vec<&str> = log.blocks[0].rows.iter().map(|r| r.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "task-clock",
            "context-switches",
            "cpu-migrations",
            "page-faults",
            "cycles",
            "instructions"
        ]
    );
    assert_eq!(log.runs.len(), 1);
    assert_eq!(log.elapsed_seconds(), Some(1.523456789));
    let s = &log.skipped;
    assert_eq!((s.before.lines, s.before.ranges.clone()), (10, vec![(1, 10)]));
    assert_eq!((s.inside.lines, s.inside.ranges.clone()), (1, vec![(16, 16)]));
    assert_eq!((s.after.lines, s.after.ranges.clone()), (2, vec![(27, 28)]));
    assert_eq!(
        s.to_string(),
        "13 lines that are not perf's output: 10 before its first block (lines 1-10), 1 inside a block (line 16), 2 after its last block (lines 27-28)"
    );
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    // The same blocks as the log without those lines.
    let clean: String = read("kept/std_bench_interleaved.txt")
        .lines()
        .enumerate()
        .filter(|(i, _)| !(0..10).contains(i) && *i != 15 && *i < 26)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert_eq!(contents(&parse(&clean, "clean.txt").unwrap()), contents(&log));
}

#[test]
fn interval_output_interleaved_with_the_workloads() {
    let log = load("kept/std_interval_interleaved.txt");
    assert_eq!(log.blocks.len(), 2);
    assert_eq!(log.runs.len(), 1);
    assert_eq!(counts(&log.blocks[0]).len(), 3);
    assert_eq!(value(&log.blocks[1], "instructions", None), 4e9);
    // `100 instructions` is shaped like a row but lacks the timestamp of the run's rows.
    let s = &log.skipped;
    assert_eq!(s.inside.ranges, [(3, 3), (6, 7)]);
    assert_eq!(s.after.ranges, [(11, 11)]);
    assert!(
        s.first.iter().any(|(l, why)| *l == 7 && why.contains("without the `-I` timestamp")),
        "{:?}",
        s.first
    );
}

#[test]
fn the_workloads_lines_between_two_runs() {
    let log = load("kept/std_two_runs_between.txt");
    assert_eq!(log.runs.len(), 2);
    assert_eq!(log.runs[1].command.as_deref(), Some("./bench 2"));
    assert_eq!(value(&log.blocks[1], "task-clock", None), 998.10e6);
    assert_eq!(log.skipped.between.ranges, [(9, 10)]);
    assert_eq!(log.skipped.lines(), 2);
}

#[test]
fn csv_and_json_logs_with_the_workloads_lines() {
    let log = load("kept/csv_bench_interleaved.txt");
    assert_eq!(log.layout, Layout::Csv(",".into()));
    assert_eq!(counts(&log.blocks[0]).len(), 4);
    assert_eq!(log.skipped.before.ranges, [(1, 2)]);
    assert_eq!(log.skipped.inside.ranges, [(5, 5)]);
    assert_eq!(log.skipped.after.ranges, [(8, 8)]);
    let log = load("kept/json_bench_interleaved.txt");
    assert_eq!(log.layout, Layout::Json);
    assert_eq!(counts(&log.blocks[0]).len(), 3);
    assert_eq!(log.skipped.before.ranges, [(1, 2)]);
    assert_eq!(log.skipped.inside.ranges, [(5, 5)]);
    assert_eq!(log.skipped.after.ranges, [(7, 7)]);
}

#[test]
fn a_log_of_only_noise_is_still_refused() {
    let noise = "bench v1.2\n3 iterations done in 1.52 s\n1234 ops/sec\n42\nall done\n";
    let err = parse(noise, "noise.txt").unwrap_err();
    assert!(matches!(err, ImportError::NotPerfStat { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("no perf stat counter rows found in `noise.txt` (5 lines that are not perf's output: 5 before its first block (lines 1-5); first line: `bench v1.2`)"),
        "{text}"
    );
    // Rows held back before a header are the workload's when the header follows them.
    let log = parse(
        "12 cycles\n\n Performance counter stats for 'x':\n\n     1,000      cycles\n",
        "h.txt",
    )
    .unwrap();
    assert_eq!(log.runs.len(), 1);
    assert_eq!(counts(&log.blocks[0]), [("cycles".to_string(), 1000.0)]);
    assert_eq!(log.skipped.before.ranges, [(1, 1)]);
    // Without a header they are perf's (a log cut by hand).
    let log = parse("12 cycles\n34 instructions\n", "cut.txt").unwrap();
    assert_eq!(counts(&log.blocks[0]).len(), 2);
}

#[test]
fn de_de_csv_per_cpu_and_per_socket_rows() {
    let csv = "CPU0,1520,45,msec,cpu-clock,1520450000,100,00,0,998,CPUs utilized\nCPU1,4595014128,,cycles,780280000,51,32,3,022,GHz\nS0,2,2345,,page-faults,1520450000,100,00,1,542,K/sec\n";
    let log = parse(csv, "de.csv").unwrap();
    let ids: Vec<&str> = log.blocks.iter().map(|b| b.aggr.as_ref().unwrap().id.as_str()).collect();
    assert_eq!(ids, ["CPU0", "CPU1", "S0"]);
    assert_eq!(value(&log.blocks[0], "cpu-clock", None), 1520.45e6);
    assert_eq!(row(&log.blocks[1], "cycles").running_pct, Some(51.32));
    assert_eq!(row(&log.blocks[1], "cycles").metrics[0].value, Some(3.022));
    assert_eq!(log.blocks[2].aggr.as_ref().unwrap().cpus, Some(2));
    assert_eq!(value(&log.blocks[2], "page-faults", None), 2345.0);
}

/// perf 7.x's JSON names a unit's number of CPUs `counters` (6.12: `aggregate-number`).
#[test]
fn perf_7_json_units_count_their_cpus_as_counters() {
    let json = r#"{"node" : "N0", "counters" : 2, "counter-value" : "20.000000", "unit" : "", "event" : "context-switches", "event-runtime" : 10574584, "pcnt-running" : 100.00, "metric-value" : "1894.352528", "metric-unit" : "cs/sec  cs_per_second"}
{"node" : "N0", "counters" : 0, "counter-value" : "<not supported>", "unit" : "", "event" : "cpu-cycles", "event-runtime" : 0, "pcnt-running" : 100.00, "metric-value" : "nan", "metric-unit" : "GHz  cycles_frequency"}
"#;
    let log = parse(json, "perf72.json").unwrap();
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    let aggr = log.blocks[0].aggr.as_ref().unwrap();
    assert_eq!((aggr.id.as_str(), aggr.cpus), ("N0", Some(2)));
    assert_eq!(value(&log.blocks[0], "context-switches", None), 20.0);
}
