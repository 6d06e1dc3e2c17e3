//! `perf stat record` files made by perf 6.1 on a 2-CPU VM (tests/data/perfdata): a task run,
//! a system-wide `-I 50` run and a piped run (`-o -`), each with task-clock and
//! context-switches; values as `perf stat report` printed them. Then every truncation and many
//! byte changes of each file: an error or a result, never a panic.
use tmetric_perfdata::{RoundKind, parse_perf_data};

use crate::data_dir;

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(data_dir().join("perfdata").join(name)).unwrap()
}

#[test]
fn a_task_run() {
    let data = parse_perf_data(&bytes("task.data")).unwrap();
    let names: Vec<&str> = data.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["task-clock", "context-switches"]);
    assert_eq!(data.events[0].unit.as_deref(), Some("msec"));
    assert_eq!(data.events[0].scale, Some(1e-6));
    assert_eq!(data.cpus, [-1]);
    assert_eq!(data.cpuid.as_deref(), Some("GenuineIntel,6,167,8"));
    assert_eq!(data.nr_cpus, Some((2, 2)));
    assert_eq!(data.cmdline[..3], ["/usr/bin/perf", "stat", "record"]);
    assert_eq!(data.interval_ms, 0);
    assert_eq!(data.rounds.len(), 1);
    let round = &data.rounds[0];
    assert_eq!((round.kind, round.time_ns), (RoundKind::Final, 101_285_014));
    let v: Vec<(usize, i32, u64, u64, u64)> =
        round.values.iter().map(|v| (v.event, v.cpu, v.value, v.enabled, v.running)).collect();
    assert_eq!(v, [(0, -1, 703_061, 703_061, 703_061), (1, -1, 1, 703_061, 703_061)]);
    assert!(!data.pipe);
}

#[test]
fn a_system_wide_interval_run() {
    let data = parse_perf_data(&bytes("system-wide-I50.data")).unwrap();
    assert_eq!(data.cpus, [0, 1]);
    assert_eq!(data.interval_ms, 50);
    let times: Vec<u64> = data.rounds.iter().map(|r| r.time_ns).collect();
    assert_eq!(times, [50_083_542, 103_470_160, 121_198_024]);
    assert!(data.rounds.iter().all(|r| r.kind == RoundKind::Interval && r.values.len() == 4));
    // Cumulative: CPU 1's context switches at the first and second interval.
    let cs =
        |r: usize| data.rounds[r].values.iter().find(|v| v.event == 1 && v.cpu == 1).unwrap().value;
    assert_eq!((cs(0), cs(1)), (530, 1255));
    // perf writes the totals after the last interval without a round.
    assert_eq!(data.unrounded.len(), 4);
}

#[test]
fn a_piped_run() {
    let data = parse_perf_data(&bytes("pipe.data")).unwrap();
    assert!(data.pipe);
    let names: Vec<&str> = data.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["task-clock", "context-switches"]);
    let round = data.rounds.last().unwrap();
    assert_eq!((round.kind, round.time_ns), (RoundKind::Final, 51_510_395));
    assert_eq!(round.values.iter().find(|v| v.event == 1).unwrap().value, 1);
}

#[test]
fn damaged_files_never_panic() {
    for name in ["task.data", "system-wide-I50.data", "pipe.data"] {
        let good = bytes(name);
        for len in 0..good.len() {
            // A file's sections are bounded by its header, so any cut is seen; a pipe cut at
            // a record boundary looks like a shorter pipe.
            let result = parse_perf_data(&good[..len]);
            assert!(result.is_err() || name.starts_with("pipe"), "{name} cut at {len}");
        }
        for i in 8..good.len() {
            for value in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] = value;
                let _ = parse_perf_data(&bad);
            }
        }
    }
}
