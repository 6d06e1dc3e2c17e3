//! Real perf 6.1 outputs (tests/data/real, software events on a 2-CPU machine).
//!
//! Besides structure, perf's own shadow metrics are recomputed from the imported values: every
//! `/sec` rate is the row's raw count over the block's task-clock, and "CPUs utilized" is
//! task-clock over the elapsed time. Both only agree with what perf printed if counts, units
//! (msec back to ns), blocks and the elapsed footer were all read correctly.
use crate::common::{assert_prints_as, fixtures, found, half_ulp, load, row, value};
use tmetric_perfstat::{Aggregation, Layout, Lookup, PerfLog, PrintedCount, TimeSource};

fn expected_layout(name: &str) -> Layout {
    let file = name.rsplit('/').next().unwrap_or(name);
    if file.starts_with("std_") {
        Layout::Std
    } else if file.starts_with("json_") {
        Layout::Json
    } else if file.contains("semicolon") {
        Layout::Csv(";".into())
    } else {
        Layout::Csv(",".into())
    }
}

#[test]
fn every_capture_is_detected_and_read_without_warnings() {
    let names = fixtures("real");
    assert!(names.len() >= 40, "captures missing: {names:?}");
    for name in names {
        let log = load(&name);
        assert_eq!(log.layout, expected_layout(&name), "{name}");
        assert!(log.warnings.is_empty(), "{name}: {:?}", log.warnings);
        assert!(log.blocks.iter().all(|b| !b.rows.is_empty()), "{name}");
    }
}

/// Multiplier of perf's rate labels.
fn rate_scale(label: &str) -> Option<f64> {
    match label {
        "/sec" => Some(1.0),
        "K/sec" => Some(1e3),
        "M/sec" => Some(1e6),
        "G/sec" => Some(1e9),
        _ => None,
    }
}

#[test]
fn rates_are_counts_over_task_clock_in_every_layout() {
    let mut checked = 0;
    // With -r perf prints mean counts but computes the rates from per-run statistics, so
    // repeated runs cannot be checked this way.
    for name in fixtures("real").into_iter().filter(|n| !n.contains("repeat")) {
        let log = load(&name);
        for block in &log.blocks {
            let Some(clock) = block.rows.iter().find(|r| r.key.name == "task-clock") else {
                continue;
            };
            let PrintedCount::Value(clock_msec) = clock.value else { continue };
            // task-clock is printed rounded; the rate perf printed used the exact value.
            let clock_err = half_ulp(&clock.count_text);
            let clock_s = found(block.lookup(&clock.event, None)).value * 1e-9;
            assert!(
                (clock_s - clock_msec * 1e-3).abs() < 1e-12,
                "{name}: task-clock is ns for metrics"
            );
            for r in &block.rows {
                for m in &r.metrics {
                    let (Some(scale), PrintedCount::Value(count)) = (rate_scale(&m.name), r.value)
                    else {
                        continue;
                    };
                    if clock_msec == 0.0 {
                        continue;
                    }
                    let rate = |secs: f64| count / secs / scale;
                    let (lo, hi) = (
                        rate((clock_msec + clock_err) * 1e-3),
                        rate((clock_msec - clock_err).max(1e-9) * 1e-3),
                    );
                    let mid = 0.5 * (lo + hi);
                    assert_prints_as(
                        mid,
                        &m.text,
                        0.5 * (hi - lo),
                        &format!("{name}:{} {}", r.line, r.event),
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 100, "only {checked} rates checked");
}

#[test]
fn cpus_utilized_is_task_clock_over_elapsed() {
    let mut checked = 0;
    for name in
        fixtures("real").into_iter().filter(|n| n.contains("/std_") && !n.contains("interval"))
    {
        let log = load(&name);
        for block in &log.blocks {
            let Some(r) = block.rows.iter().find(|r| r.metric("CPUs utilized").is_some()) else {
                continue;
            };
            let printed = &r.metric("CPUs utilized").unwrap().text;
            let elapsed =
                log.runs[block.run].elapsed.expect("std captures have an elapsed footer").seconds;
            let PrintedCount::Value(msec) = r.value else { continue };
            let slack = half_ulp(&r.count_text) * 1e-3 / elapsed;
            assert_prints_as(msec * 1e-3 / elapsed, printed, slack, &name);
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} checked");
}

#[test]
fn per_cpu_rows_become_one_block_per_cpu() {
    for (name, layout_task_clock) in [
        ("real/std_per_cpu.txt", [151.95, 151.94]),
        ("real/csv_per_cpu.txt", [155.77, 155.78]),
        ("real/json_per_cpu.txt", [152.323753, 152.312827]),
    ] {
        let log = load(name);
        let ids: Vec<&str> =
            log.blocks.iter().map(|b| b.aggr.as_ref().unwrap().id.as_str()).collect();
        assert_eq!(ids, ["CPU0", "CPU1"], "{name}");
        for (block, msec) in log.blocks.iter().zip(layout_task_clock) {
            let aggr = block.aggr.as_ref().unwrap();
            assert_eq!((aggr.kind, aggr.cpus), (Aggregation::Cpu, None));
            assert_eq!(block.rows.len(), 3);
            let ns = value(block, "task-clock", None);
            assert!((ns - msec * 1e6).abs() < 1e-3, "{name}: {ns}");
        }
    }
    let log = load("real/std_per_cpu.txt");
    assert_eq!(value(&log.blocks[1], "page-faults", None), 2.0);
    assert_eq!(value(&log.blocks[0], "context-switches", None), 21.0);
}

#[test]
fn aggregation_prefixes_name_the_unit_and_its_cpus() {
    let cases: [(&str, Aggregation, &[&str], Option<u32>); 9] = [
        ("real/std_per_core.txt", Aggregation::Core, &["S0-D0-C0", "S0-D0-C1"], Some(1)),
        ("real/csv_per_core.txt", Aggregation::Core, &["S0-D0-C0", "S0-D0-C1"], Some(1)),
        ("real/json_per_core.txt", Aggregation::Core, &["S0-D0-C0", "S0-D0-C1"], Some(1)),
        ("real/std_per_socket.txt", Aggregation::Socket, &["S0"], Some(2)),
        ("real/csv_per_socket.txt", Aggregation::Socket, &["S0"], Some(2)),
        ("real/json_per_socket.txt", Aggregation::Socket, &["S0"], Some(2)),
        ("real/std_per_die.txt", Aggregation::Die, &["S0-D0"], Some(2)),
        ("real/std_per_node.txt", Aggregation::Node, &["N0"], Some(2)),
        ("real/std_per_thread.txt", Aggregation::Thread, &["sh-10057"], None),
    ];
    for (name, kind, first_ids, cpus) in cases {
        let log = load(name);
        for (block, id) in log.blocks.iter().zip(first_ids) {
            let aggr = block.aggr.as_ref().unwrap();
            assert_eq!((&aggr.kind, aggr.id.as_str(), aggr.cpus), (&kind, *id, cpus), "{name}");
        }
    }
    // Per socket: the two CPUs' rows are already summed by perf.
    let log = load("real/std_per_socket.txt");
    assert_eq!(value(&log.blocks[0], "page-faults", None), 80.0);
    let log = load("real/csv_per_thread.txt");
    assert_eq!(log.blocks.len(), 1);
    assert_eq!(value(&log.blocks[0], "task-clock", None), 49.04e6);
}

#[test]
fn intervals_become_blocks_with_their_length_as_duration() {
    let log = load("real/std_interval.txt");
    let stamps: Vec<f64> = log.blocks.iter().map(|b| b.interval.unwrap()).collect();
    assert_eq!(stamps, [0.050126688, 0.100489505, 0.150783150, 0.151769412]);
    let previous = [0.0, 0.050126688, 0.100489505, 0.150783150];
    for ((block, stamp), previous) in log.blocks.iter().zip(&stamps).zip(previous) {
        assert!((value(block, "duration_time", None) - (stamp - previous)).abs() < 1e-12);
    }
    assert_eq!(log.blocks[0].duration.unwrap().source, TimeSource::IntervalLength);
    // The middle intervals were not counted at all: perf's metrics would see 0.
    let middle = log.blocks[1].lookup("page-faults", None);
    assert!(matches!(middle, Lookup::NotCounted { line: 7, .. }), "{middle:?}");
    assert_eq!(middle.perf_value(), Some(0.0));
    assert_eq!(value(&log.blocks[0], "page-faults", None), 75.0);
    assert_eq!(value(&log.blocks[3], "task-clock", None), 0.06e6);

    for (name, blocks) in [
        ("real/std_interval_per_cpu.txt", 4),
        ("real/std_interval_per_core.txt", 4),
        ("real/csv_interval.txt", 2),
        ("real/csv_semicolon_interval_per_core.txt", 4),
        ("real/json_interval.txt", 2),
        ("real/json_interval_per_cpu.txt", 4),
    ] {
        let log = load(name);
        assert_eq!(log.blocks.len(), blocks, "{name}");
        assert!(log.blocks.iter().all(|b| b.interval.is_some() && b.rows.len() == 3), "{name}");
    }
}

#[test]
fn a_duration_time_row_is_seconds_for_metrics() {
    let log = load("real/std_duration.txt");
    let block = &log.blocks[0];
    let duration = found(block.lookup("duration_time", None));
    assert_eq!(duration.value, 153_546_634.0 * 1e-9);
    assert_eq!(duration.time, Some(TimeSource::Row { line: 4 }));
    // perf's elapsed footer is the same clock.
    assert!((duration.value - log.elapsed_seconds().unwrap()).abs() < 1e-12);

    let log = load("real/json_duration.txt");
    assert_eq!(value(&log.blocks[0], "duration_time", None), 155_378_189.0 * 1e-9);

    // With -I, each interval's duration_time row holds that interval's length.
    let log = load("real/std_interval_msr.txt");
    assert_eq!(value(&log.blocks[1], "duration_time", None), 51_359_524.0 * 1e-9);
    assert_eq!(value(&log.blocks[1], "TSC", None), 249_363_790.0);
}

#[test]
fn tool_times_come_from_rows_or_footers() {
    let log = load("real/std_tools.txt");
    let block = &log.blocks[0];
    let sys = found(block.lookup("system_time", None));
    assert_eq!((sys.value, sys.time), (1_915_000.0 * 1e-9, Some(TimeSource::Row { line: 5 })));
    // The user_time row is `<not counted>`, so the "seconds user" footer is used.
    let user = found(block.lookup("user_time", None));
    assert_eq!((user.value, user.time), (0.0, Some(TimeSource::UserLine { line: 12 })));
    assert_eq!(log.runs[0].system.unwrap().seconds, 0.001915);
    assert_eq!(log.command(), Some("sleep 0.15"));

    let log = load("real/csv_tools.txt");
    assert_eq!(value(&log.blocks[0], "user_time", None), 1_704_000.0 * 1e-9);
    assert_eq!(value(&log.blocks[0], "duration_time", None), 151_679_809.0 * 1e-9);
    // CSV has no footer: without a row there is nothing to read system_time from.
    assert_eq!(log.blocks[0].lookup("system_time", None), Lookup::Missing);
}

#[test]
fn repeated_runs_keep_means_and_variances() {
    let log = load("real/std_repeat.txt");
    assert_eq!(log.runs[0].repeats, Some(3));
    assert_eq!(log.command(), Some("sleep 0.15"));
    assert_eq!(log.elapsed_seconds(), Some(0.152148));
    let block = &log.blocks[0];
    assert_eq!(row(block, "task-clock").variance_pct, Some(9.91));
    assert_eq!(row(block, "context-switches").variance_pct, None);
    assert_eq!(row(block, "page-faults").variance_pct, Some(0.44));

    let csv = load("real/csv_repeat.txt");
    assert_eq!(row(&csv.blocks[0], "task-clock").variance_pct, Some(5.67));
    assert_eq!(row(&csv.blocks[0], "task-clock").running_pct, Some(100.0));
    let json = load("real/json_repeat.txt");
    assert_eq!(row(&json.blocks[0], "page-faults").variance_pct, Some(0.67));
}

#[test]
fn the_same_event_in_two_groups_keeps_both() {
    // `-e '{task-clock,page-faults},{page-faults,context-switches}'`
    let log = load("real/std_groups.txt");
    let groups: Vec<(usize, &str)> =
        log.blocks[0].rows.iter().map(|r| (r.group, r.event.as_str())).collect();
    assert_eq!(
        groups,
        [(0, "task-clock"), (0, "page-faults"), (1, "page-faults"), (1, "context-switches")]
    );
    let first = found(log.blocks[0].lookup("page-faults", None));
    assert_eq!((first.lines.as_slice(), first.group), ([5].as_slice(), Some(0)));
}

#[test]
fn modifiers_select_rows() {
    let log = load("real/std_modifiers.txt");
    let block = &log.blocks[0];
    assert_eq!(value(block, "page-faults:u", None), 73.0);
    assert_eq!(value(block, "page-faults:k", None), 3.0);
    // An id without modifiers falls back to the `:u` row (what perf prints after excluding
    // the kernel) and says which row it used.
    let fallback = found(block.lookup("page-faults", None));
    assert_eq!((fallback.value, fallback.event.as_str()), (73.0, "page-faults:u"));
    assert_eq!(block.lookup("page-faults:h", None), Lookup::Missing);
}

#[test]
fn msr_tsc_answers_every_spelling() {
    for name in ["real/std_msr.txt", "real/csv_msr.txt"] {
        let log = load(name);
        let block = &log.blocks[0];
        let tsc = value(block, "TSC", None);
        assert_eq!(tsc, value(block, "msr@tsc@", None));
        assert_eq!(tsc, value(block, "tsc", None));
    }
    assert_eq!(value(&load("real/std_msr.txt").blocks[0], "TSC", None), 787_639_034.0);
}

#[test]
fn unsupported_events_are_nan_for_metrics() {
    for name in
        ["real/std_not_supported.txt", "real/csv_not_supported.txt", "real/json_not_supported.txt"]
    {
        let log: PerfLog = load(name);
        let cycles = log.blocks[0].lookup("cycles", None);
        assert!(matches!(cycles, Lookup::NotSupported { .. }), "{name}: {cycles:?}");
        assert!(cycles.perf_value().unwrap().is_nan());
    }
}

#[test]
fn output_file_comment_is_skipped() {
    let log = load("real/std_output_file.txt");
    assert!(log.warnings.is_empty());
    assert_eq!(log.runs[0].header_line, Some(4));
    assert_eq!(log.blocks[0].rows.len(), 3);
}
