//! Counting over the simulated kernel: the runtime's `CounterSet` for a task and per CPU, software
//! events' time, topdown reads from the workload's fractions, and the real clock.

use tmetric_runtime::sys::{TYPE_RAW, TYPE_SOFTWARE};
use tmetric_runtime::{Attr, CounterSet, CounterSpec, Syscalls, Target};
use tmetric_sim::SimKernel;

use super::{MS, TOPDOWN, group, kernel, machine, raw, read_group, typed};

#[test]
fn counters_count_a_task_over_the_simulated_kernel() {
    let k = kernel("alderlake", true);
    let handle = k.clone();
    let specs = vec![
        CounterSpec {
            name: "task-clock".into(),
            attr: typed(TYPE_SOFTWARE, 1),
            cpus: None,
            cgroup: None,
            filter: None,
        },
        CounterSpec {
            name: "cycles".into(),
            attr: raw(0x3c),
            cpus: None,
            cgroup: None,
            filter: None,
        },
        CounterSpec {
            name: "instructions".into(),
            attr: raw(0xc0),
            cpus: None,
            cgroup: None,
            filter: None,
        },
    ];
    let target = Target::Task { pid: 4242, on_exec: true };
    let mut counters = CounterSet::open(k, specs, &[vec![0, 1, 2]], target).expect("open");
    handle.advance(50 * MS);
    let snapshot = counters.read().unwrap();
    let cycles = snapshot.aggregate(1).unwrap();
    assert_eq!(cycles.running, 50 * MS);
    // The task group moved to the first cpu_core CPU, 0.
    assert_eq!(cycles.value, handle.true_count(&raw(0x3c), 0, 50 * MS).unwrap());
    assert_eq!(snapshot.aggregate(0).unwrap().value, 50 * MS);
}

#[test]
fn software_events_always_run_and_count_time() {
    let mut k = kernel("amdzen4", true);
    let fds = group(
        &mut k,
        3,
        &[typed(TYPE_SOFTWARE, 1), typed(TYPE_SOFTWARE, 3), typed(TYPE_SOFTWARE, 2)],
    )
    .unwrap();
    let task = k.perf_event_open(&typed(TYPE_SOFTWARE, 0), 4242, -1, -1).unwrap();
    k.advance(1_000 * MS);
    let (enabled, running, values) = read_group(&mut k, fds[0], 3);
    assert_eq!((enabled, running), (1_000 * MS, 1_000 * MS));
    assert_eq!(values, vec![1_000_000_000, 500, 2_000]);
    assert_eq!(read_group(&mut k, task, 1).2, vec![1_000_000_000]);
}

#[test]
fn topdown_reads_are_slots_times_the_workload_fractions() {
    let mut k = kernel("sapphirerapids", true);
    let mut attrs = vec![raw(0x0400)];
    attrs.extend((0..8).map(|n| raw(0x8000 + (n << 8))));
    let fds = group(&mut k, 1, &attrs).unwrap();
    k.advance(100 * MS);
    let (_, _, values) = read_group(&mut k, fds[0], 9);
    let slots = values[0];
    assert_eq!(slots, k.true_count(&raw(0x0400), 1, 100 * MS).unwrap());
    assert_eq!(slots, 6 * 2_625_000_000 / 10, "6-wide, CPU 1 at 105 % of 2.5 GHz, 100 ms");
    for (n, fraction) in TOPDOWN.iter().enumerate() {
        let want = slots as f64 * fraction;
        assert!(
            (values[n + 1] as f64 - want).abs() <= 1.0,
            "field {n}: {} vs {want}",
            values[n + 1]
        );
    }
    let level1: u64 = values[1..5].iter().sum();
    assert!(slots - level1 <= 4, "level 1 sums to slots up to rounding");
}

#[test]
fn counters_run_over_the_simulated_kernel() {
    let k = kernel("sapphirerapids", true);
    let handle = k.clone();
    let spec = |name: &str, config: u64| CounterSpec {
        name: name.into(),
        attr: Attr { type_: TYPE_RAW, config, ..Attr::default() },
        cpus: None,
        cgroup: None,
        filter: None,
    };
    let mut specs = vec![
        spec("slots", 0x0400),
        spec("topdown-retiring", 0x8000),
        spec("topdown-bad-spec", 0x8100),
        spec("topdown-fe-bound", 0x8200),
        spec("topdown-be-bound", 0x8300),
    ];
    // A group with a topdown event led by something else fails as a whole and is split
    // into single events by the runtime's weak-group fallback.
    specs.push(spec("cycles", 0x3c));
    specs.push(spec("retiring-again", 0x8000));
    let groups = vec![vec![0, 1, 2, 3, 4], vec![5, 6]];
    let mut counters =
        CounterSet::open(k, specs, &groups, Target::Cpus(vec![0, 1, 2, 3])).expect("open");
    assert_eq!(counters.broken_groups(), 1);
    assert_eq!(counters.failure(6).map(|f| f.errno.0), Some(libc::EINVAL));
    counters.enable().unwrap();
    let before = counters.read().unwrap();
    handle.advance(200 * MS);
    let delta = counters.read().unwrap().since(&before);
    let slots = delta.aggregate(0).unwrap();
    assert!(slots.counted() && slots.running == slots.enabled);
    let expected: u64 =
        (0..4).map(|c| handle.true_count(&spec("", 0x400).attr, c, 200 * MS).unwrap()).sum();
    assert_eq!(slots.value, expected);
    for (i, want) in TOPDOWN[..4].iter().enumerate() {
        let fraction = delta.aggregate(1 + i).unwrap().value as f64 / slots.value as f64;
        assert!((fraction - want).abs() < 1e-6, "metric {i}: {fraction}");
    }
    drop(counters);
    assert_eq!(handle.open_count(), 0);
}

#[test]
fn the_real_clock_moves_with_wall_time() {
    let mut k = SimKernel::new(machine("icelake", true));
    let fd = k.perf_event_open(&typed(TYPE_SOFTWARE, 1), 4242, -1, -1).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (enabled, running, values) = read_group(&mut k, fd, 1);
    assert!(enabled >= 20 * MS && running == enabled, "{enabled}");
    assert!(values[0] >= 20 * MS);
}
