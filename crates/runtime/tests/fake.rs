//! The counting logic over [`FakeSyscalls`]: attributes, group layouts (a thread's own group too),
//! open failures, multiplex scaling and not-counted events, with values worked out by hand.

use tmetric_runtime::fake::Call;
use tmetric_runtime::sys::{READ_FORMAT, TYPE_RAW, TYPE_SOFTWARE};
use tmetric_runtime::{Attr, CounterSet, CounterSpec, FakeSyscalls, Reading, Target};

fn spec(name: &str, type_: u32, config: u64) -> CounterSpec {
    CounterSpec {
        name: name.into(),
        attr: Attr { type_, config, ..Attr::default() },
        cpus: None,
        cgroup: None,
        filter: None,
    }
}

fn three() -> Vec<CounterSpec> {
    vec![spec("a", TYPE_RAW, 0x3c), spec("b", TYPE_RAW, 0xc0), spec("c", TYPE_SOFTWARE, 1)]
}

/// One recorded open: attributes, pid, cpu, group_fd and the descriptor or errno.
type Opened = (Attr, i32, i32, i32, Result<i32, i32>);

fn opens(fake: &FakeSyscalls) -> Vec<Opened> {
    fake.calls()
        .into_iter()
        .filter_map(|call| match call {
            Call::Open { attr, pid, cpu, group_fd, result } => {
                Some((attr, pid, cpu, group_fd, result.map_err(|e| e.0)))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn task_groups_set_the_attributes_perf_sets() {
    let fake = FakeSyscalls::new();
    let target = Target::Task { pid: 4242, on_exec: true };
    let counters = CounterSet::open(fake.clone(), three(), &[vec![0, 1, 2]], target).unwrap();
    let opened = opens(&fake);
    assert_eq!(opened.len(), 3);
    let leader_fd = opened[0].4.unwrap();
    for (i, (attr, pid, cpu, group_fd, _)) in opened.iter().enumerate() {
        assert_eq!((*pid, *cpu), (4242, -1));
        assert_eq!(attr.read_format, 0xf, "GROUP|ID|ENABLED|RUNNING");
        assert!(attr.inherit, "every task member inherits");
        assert_eq!(attr.disabled, i == 0, "only the leader starts disabled");
        assert_eq!(attr.enable_on_exec, i == 0, "only the leader enables on exec");
        assert_eq!(*group_fd, if i == 0 { -1 } else { leader_fd });
    }
    assert_eq!(READ_FORMAT, 0xf);
    assert_eq!(counters.layout(), vec![(-1, vec![0, 1, 2])]);
    drop(counters);
    assert_eq!(fake.open_count(), 0, "dropping closes every descriptor");
}

#[test]
fn per_cpu_counting_opens_each_group_on_each_cpu_and_enables_leaders() {
    let fake = FakeSyscalls::new();
    let target = Target::Cpus(vec![0, 1, 3]);
    let mut counters =
        CounterSet::open(fake.clone(), three(), &[vec![0, 1], vec![2]], target).unwrap();
    let opened = opens(&fake);
    assert_eq!(opened.len(), 9);
    assert!(opened.iter().all(|o| o.1 == -1 && !o.0.enable_on_exec && !o.0.inherit));
    let cpus: Vec<i32> = opened.iter().map(|o| o.2).collect();
    assert_eq!(cpus, vec![0, 0, 1, 1, 3, 3, 0, 1, 3]);
    assert_eq!(counters.descriptors(), 9);
    counters.enable().unwrap();
    let enables: Vec<(i32, bool)> = fake
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Enable { fd, group } => Some((fd, group)),
            _ => None,
        })
        .collect();
    let leaders: Vec<i32> = opened.iter().filter(|o| o.0.disabled).map(|o| o.4.unwrap()).collect();
    assert_eq!(leaders.len(), 6, "3 CPUs x 2 groups");
    assert_eq!(enables, leaders.iter().map(|&fd| (fd, true)).collect::<Vec<_>>());
}

#[test]
fn multiplexed_counts_are_scaled_per_cpu_and_summed() {
    let fake = FakeSyscalls::new();
    // CPU 0: the group ran a quarter of the time; CPU 1: all the time.
    fake.program_cpu(TYPE_RAW, 0x3c, 0, &[Reading::new(100, 1000, 250)]);
    fake.program_cpu(TYPE_RAW, 0xc0, 0, &[Reading::new(50, 1000, 250)]);
    fake.program_cpu(TYPE_RAW, 0x3c, 1, &[Reading::new(30, 1000, 1000)]);
    fake.program_cpu(TYPE_RAW, 0xc0, 1, &[Reading::new(7, 1000, 1000)]);
    let specs = three()[..2].to_vec();
    let mut counters =
        CounterSet::open(fake.clone(), specs, &[vec![0, 1]], Target::Cpus(vec![0, 1])).unwrap();
    let snapshot = counters.read().unwrap();
    let a = snapshot.aggregate(0).unwrap();
    // 100 * 1000 / 250 = 400 on CPU 0, plus 30.
    assert_eq!(a.value, 430);
    assert_eq!((a.enabled, a.running, a.cpus), (2000, 1250, 2));
    assert!((a.running_percent() - 62.5).abs() < 1e-12);
    let b = snapshot.aggregate(1).unwrap();
    assert_eq!(b.value, 50 * 4 + 7);
    assert!(a.counted() && b.counted());
}

#[test]
fn a_group_that_never_ran_is_not_counted() {
    let fake = FakeSyscalls::new();
    fake.program(TYPE_RAW, 0x3c, &[Reading::new(0, 5000, 0)]);
    fake.program(TYPE_RAW, 0xc0, &[Reading::new(123, 5000, 0)]);
    let target = Target::Task { pid: 1, on_exec: true };
    let mut counters =
        CounterSet::open(fake, three()[..2].to_vec(), &[vec![0, 1]], target).unwrap();
    let snapshot = counters.read().unwrap();
    for event in 0..2 {
        let agg = snapshot.aggregate(event).unwrap();
        assert!(!agg.counted());
        assert_eq!(agg.value, 0, "a never-running counter contributes 0, whatever it read");
        assert_eq!(agg.enabled, 5000);
    }
}

#[test]
fn an_event_the_kernel_refuses_is_recorded_and_the_group_goes_on() {
    let fake = FakeSyscalls::new();
    fake.fail(TYPE_RAW, 0x3c, libc::ENOENT);
    fake.program(TYPE_RAW, 0xc0, &[Reading::new(11, 100, 100)]);
    fake.program(TYPE_SOFTWARE, 1, &[Reading::new(22, 100, 100)]);
    let target = Target::Task { pid: 1, on_exec: true };
    let mut counters = CounterSet::open(fake.clone(), three(), &[vec![0, 1, 2]], target).unwrap();
    assert_eq!(counters.failure(0).map(|f| f.errno.0), Some(libc::ENOENT));
    assert!(counters.failure(1).is_none() && counters.failure(2).is_none());
    // `b` became the leader.
    assert_eq!(counters.layout(), vec![(-1, vec![1, 2])]);
    let opened = opens(&fake);
    assert!(opened[1].0.disabled && opened[1].0.enable_on_exec && opened[1].3 == -1);
    let snapshot = counters.read().unwrap();
    assert!(snapshot.aggregate(0).is_none());
    assert_eq!(snapshot.aggregate(1).unwrap().value, 11);
    assert_eq!(snapshot.aggregate(2).unwrap().value, 22);
}

#[test]
fn a_group_too_big_for_the_pmu_is_reopened_as_single_events() {
    let fake = FakeSyscalls::new();
    fake.max_group_size(2);
    let target = Target::Task { pid: 1, on_exec: true };
    let counters = CounterSet::open(fake.clone(), three(), &[vec![0, 1, 2]], target).unwrap();
    assert_eq!(counters.broken_groups(), 1);
    assert_eq!(counters.layout(), vec![(-1, vec![0]), (-1, vec![1]), (-1, vec![2])]);
    assert!((0..3).all(|e| counters.failure(e).is_none()));
    // The rejected attempt was closed: only the three singles remain.
    assert_eq!(fake.open_count(), 3);
}

#[test]
fn successive_reads_give_deltas_that_add_up() {
    let fake = FakeSyscalls::new();
    let readings =
        [Reading::new(10, 100, 100), Reading::new(25, 200, 200), Reading::new(70, 300, 300)];
    fake.program(TYPE_SOFTWARE, 1, &readings);
    let target = Target::Task { pid: 1, on_exec: true };
    let mut counters =
        CounterSet::open(fake, vec![spec("c", TYPE_SOFTWARE, 1)], &[], target).unwrap();
    let mut previous = tmetric_runtime::Snapshot::default();
    let mut deltas = Vec::new();
    for _ in 0..3 {
        let now = counters.read().unwrap();
        deltas.push(now.since(&previous).aggregate(0).unwrap().value);
        previous = now;
    }
    assert_eq!(deltas, vec![10, 15, 45]);
    assert_eq!(deltas.iter().sum::<u64>(), previous.aggregate(0).unwrap().value);
}

#[test]
fn an_event_failing_on_one_cpu_is_not_half_counted() {
    let fake = FakeSyscalls::new();
    fake.fail_on_cpu(TYPE_RAW, 0xc0, 1, libc::ENODEV);
    fake.program(TYPE_RAW, 0xc0, &[Reading::new(5, 10, 10)]);
    let specs = three()[..2].to_vec();
    let mut counters =
        CounterSet::open(fake, specs, &[vec![0, 1]], Target::Cpus(vec![0, 1])).unwrap();
    let failure = counters.failure(1).expect("failed on CPU 1");
    assert_eq!((failure.errno.0, failure.cpu), (libc::ENODEV, Some(1)));
    let snapshot = counters.read().unwrap();
    assert!(snapshot.aggregate(1).is_none(), "a sum over some CPUs would be silently low");
    assert_eq!(snapshot.aggregate(0).unwrap().cpus, 2);
}

/// A refused group is split, but the topdown events stay together behind `slots`: the kernel
/// would refuse them alone, and a split that loses them loses every topdown metric.
#[test]
fn a_refused_group_keeps_its_topdown_events_behind_slots() {
    let fake = FakeSyscalls::new();
    fake.max_group_size(3);
    let specs = vec![
        spec("slots", TYPE_RAW, 0x0400),
        spec("topdown-retiring", TYPE_RAW, 0x8000),
        spec("topdown-be-bound", TYPE_RAW, 0x8300),
        spec("x", TYPE_RAW, 0x01a3),
        spec("y", TYPE_RAW, 0x02a3),
    ];
    let sticky = [true, true, true, false, false];
    let counters = CounterSet::open_with(
        fake.clone(),
        specs,
        &[vec![0, 1, 2, 3, 4]],
        &sticky,
        Target::Cpus(vec![0]),
    )
    .unwrap();
    assert_eq!(counters.layout(), vec![(0, vec![0, 1, 2]), (0, vec![3]), (0, vec![4])]);
    let splits = counters.splits();
    assert_eq!(splits.len(), 1);
    assert_eq!(splits[0].errno.0, libc::EINVAL);
    assert_eq!(splits[0].kept, vec![0, 1, 2]);
    assert_eq!(counters.broken_groups(), 1);
}

/// At `perf_event_paranoid` 2 an unprivileged task counter is refused kernel mode (EACCES)
/// and reopened user-only, as perf's fallback does; every member of the group follows.
#[test]
fn paranoid_2_falls_back_to_user_mode() {
    let fake = FakeSyscalls::new();
    fake.unprivileged(2);
    let target = Target::Task { pid: 4242, on_exec: true };
    let counters = CounterSet::open(fake.clone(), three(), &[vec![0, 1, 2]], target).unwrap();
    let opened = opens(&fake);
    // Each event: one refused open, then one user-only open that succeeds.
    assert_eq!(opened.len(), 6);
    for pair in opened.chunks(2) {
        assert_eq!(pair[0].4, Err(libc::EACCES));
        assert!(!pair[0].0.exclude_kernel);
        assert!(pair[1].4.is_ok());
        assert!(pair[1].0.exclude_kernel && pair[1].0.exclude_hv);
    }
    // They stay one group: members name the leader's descriptor.
    let leader = opened[1].4.unwrap();
    assert_eq!((opened[3].3, opened[5].3), (leader, leader));
    assert!((0..3).all(|e| counters.user_only(e) && counters.failure(e).is_none()));
    assert!(counters.specs().iter().all(|s| s.attr.exclude_kernel));
    assert_eq!(counters.descriptors(), 3);
}

/// Events that already exclude the kernel are not retried; at level 3 (Debian) nothing opens,
/// and a CPU-wide counter is refused at level 1 whatever its exclusions.
#[test]
fn paranoid_refusals_follow_the_kernel() {
    let fake = FakeSyscalls::new();
    fake.unprivileged(3);
    let target = Target::Task { pid: 1, on_exec: true };
    let counters = CounterSet::open(fake.clone(), three(), &[], target).unwrap();
    assert!((0..3).all(|e| counters.failure(e).map(|f| f.errno.0) == Some(libc::EACCES)));
    assert!((0..3).all(|e| !counters.user_only(e)));
    assert_eq!(counters.descriptors(), 0);

    let fake = FakeSyscalls::new();
    fake.unprivileged(1);
    let counters = CounterSet::open(fake.clone(), three(), &[], Target::Cpus(vec![0, 1])).unwrap();
    assert!((0..3).all(|e| counters.failure(e).map(|f| f.errno.0) == Some(libc::EACCES)));
    // Per task at level 1, kernel mode is allowed: no fallback.
    let fake = FakeSyscalls::new();
    fake.unprivileged(1);
    let target = Target::Task { pid: 1, on_exec: true };
    let counters = CounterSet::open(fake.clone(), three(), &[], target).unwrap();
    assert_eq!(opens(&fake).len(), 3);
    assert!((0..3).all(|e| !counters.user_only(e)));
}

/// Running out of descriptors ends the open with how many the run needs, and closes what
/// was opened.
#[test]
fn running_out_of_descriptors_says_how_many_are_needed() {
    let fake = FakeSyscalls::new();
    fake.fd_limit(4);
    let cpus = Target::Cpus(vec![0, 1, 2, 3]);
    let err = CounterSet::open(fake.clone(), three(), &[vec![0, 1], vec![2]], cpus).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("after opening 4 event descriptors"), "{text}");
    assert!(text.contains("this run needs 12"), "{text}");
    assert!(text.contains("ulimit -n 128"), "{text}");
    assert_eq!(fake.open_count(), 0);
}

/// The fallback's second open can run out of descriptors too: that is reported as such, and
/// an event the user-only open also fails for keeps the permission error.
#[test]
fn the_fallback_reports_descriptors_and_permission_truthfully() {
    let fake = FakeSyscalls::new();
    fake.unprivileged(2);
    fake.fd_limit(1);
    let target = Target::Task { pid: 1, on_exec: true };
    let err = CounterSet::open(fake.clone(), three(), &[], target.clone()).unwrap_err();
    assert!(err.to_string().contains("after opening 1 event descriptors"), "{err}");

    let fake = FakeSyscalls::new();
    fake.unprivileged(2);
    // A PMU that rejects exclude bits: the user-only retry of `b` fails with EINVAL.
    fake.fail(TYPE_RAW, 0xc0, libc::EINVAL);
    let counters = CounterSet::open(fake.clone(), three(), &[], target).unwrap();
    assert_eq!(counters.failure(1).map(|f| f.errno.0), Some(libc::EACCES));
    assert!(counters.user_only(0) && !counters.user_only(1) && counters.user_only(2));
}

fn snapshot(per_cpu: &[(i32, i32, u64)]) -> tmetric_runtime::Snapshot {
    let counts = per_cpu
        .iter()
        .map(|&(cpu, thread, value)| tmetric_runtime::counter::CpuCount {
            cpu,
            thread,
            raw: tmetric_runtime::RawCount { value, enabled: 100, running: 100 },
        })
        .collect();
    tmetric_runtime::Snapshot { events: vec![Some(counts), None] }
}

/// `-r 3`: counts averaged CPU by CPU, elapsed times averaged, and perf's spread: totals 30,
/// 50 and 70 have mean 50 and sample deviation 20, so the standard error is 20/sqrt(3) =
/// 23.09% of the mean. An event that is not open has no spread.
#[test]
fn repeated_runs_average_per_cpu_with_perfs_spread() {
    use std::time::Duration;
    use tmetric_runtime::RunReport;
    let run = |a: u64, b: u64, ms: u64| RunReport {
        totals: snapshot(&[(0, -1, a), (1, -1, b)]),
        elapsed: Duration::from_millis(ms),
        exit: None,
        interrupted_by: None,
        ticks: 0,
        stopped: false,
        timed_out: false,
        samples: Vec::new(),
        sample_ticks: Vec::new(),
    };
    let runs = vec![run(10, 20, 100), run(20, 30, 200), run(30, 40, 600)];
    let spread = RunReport::spread_of(&runs, 2);
    assert!((spread[0].unwrap() - 100.0 * 20.0 / 3f64.sqrt() / 50.0).abs() < 1e-9, "{spread:?}");
    assert_eq!(spread[1], None);
    let mean = RunReport::mean_of(runs).unwrap();
    let values: Vec<u64> =
        mean.totals.events[0].as_ref().unwrap().iter().map(|c| c.raw.value).collect();
    assert_eq!(values, [20, 30]);
    assert_eq!(mean.elapsed, Duration::from_millis(300));
    assert!(RunReport::mean_of(Vec::new()).is_none());
}

/// A snapshot split by aggregation unit or by thread keeps only those readings.
#[test]
fn snapshots_split_by_cpu_and_by_thread() {
    let all = snapshot(&[(0, 7, 1), (1, 7, 2), (0, 8, 4), (1, 8, 8)]);
    let sum = |s: &tmetric_runtime::Snapshot| s.aggregate(0).unwrap().value;
    assert_eq!(sum(&all.on_cpus(&[1])), 2 + 8);
    assert_eq!(sum(&all.of_thread(8)), 4 + 8);
    assert_eq!(all.on_cpus(&[5]).aggregate(0).unwrap().cpus, 0);
    assert!(all.of_thread(7).aggregate(1).is_none());
}

#[test]
fn a_threads_own_group_is_pinned_not_inherited_and_all_or_nothing() {
    let fake = FakeSyscalls::new();
    let attrs: Vec<Attr> = three().into_iter().map(|s| s.attr).collect();
    let mut sys = fake.clone();
    let opened = tmetric_runtime::counter::open_own_group(&mut sys, &attrs, true).unwrap();
    assert_eq!(opened.len(), 3);
    let leader = opened[0].fd;
    let calls = opens(&fake);
    for (i, (attr, pid, cpu, group_fd, result)) in calls.iter().enumerate() {
        assert_eq!((*pid, *cpu), (0, -1), "the calling thread, on any CPU");
        assert_eq!(*group_fd, if i == 0 { -1 } else { leader });
        assert_eq!(*result, Ok(opened[i].fd));
        assert_eq!(attr.read_format, READ_FORMAT);
        assert_eq!((attr.disabled, attr.pinned), (i == 0, i == 0), "member {i}");
        assert!(!attr.inherit && !attr.enable_on_exec);
    }
    let ids: Vec<u64> = opened.iter().map(|o| o.id).collect();
    assert!(ids.iter().all(|&id| id >= 1000) && ids[0] != ids[1], "{ids:?}");
    assert!(opened.iter().all(|o| !o.user_only));

    // The third member refused: the two opened are closed again, its index comes back.
    let fake = FakeSyscalls::new();
    fake.fail(TYPE_SOFTWARE, 1, libc::ENOENT);
    let mut sys = fake.clone();
    let refused = tmetric_runtime::counter::open_own_group(&mut sys, &attrs, false).unwrap_err();
    assert_eq!((refused.0, refused.1.0), (2, libc::ENOENT));
    assert_eq!(fake.open_count(), 0);
    assert!(!opens(&fake)[0].0.pinned, "not pinned when not asked");
}

/// `--filter`: set on every descriptor of a filtered tracepoint once all are open (perf's
/// `evlist__apply_filters`), on each CPU; a filter the kernel refuses (here on a counter that
/// is not a tracepoint: EINVAL) fails the open, and every descriptor is closed.
#[test]
fn filters_are_set_on_every_descriptor_after_the_opens() {
    use tmetric_runtime::sys::TYPE_TRACEPOINT;
    let fake = FakeSyscalls::new();
    let mut tp = spec("sched:sched_switch", TYPE_TRACEPOINT, 316);
    tp.filter = Some("prev_pid == 1".into());
    let specs = vec![spec("cs", TYPE_SOFTWARE, 3), tp];
    let counters = CounterSet::open(fake.clone(), specs, &[], Target::Cpus(vec![0, 1])).unwrap();
    let calls = fake.calls();
    let last_open = calls.iter().rposition(|c| matches!(c, Call::Open { .. })).unwrap();
    let filters: Vec<(usize, i32, String)> = calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match c {
            Call::SetFilter { fd, filter } => Some((i, *fd, filter.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(filters.len(), 2, "one per CPU: {calls:?}");
    assert!(filters.iter().all(|(i, _, f)| *i > last_open && f == "prev_pid == 1"));
    let tp_fds: Vec<i32> = opens(&fake)
        .into_iter()
        .filter(|o| o.0.type_ == TYPE_TRACEPOINT)
        .map(|o| o.4.unwrap())
        .collect();
    assert_eq!(filters.iter().map(|f| f.1).collect::<Vec<_>>(), tp_fds);
    drop(counters);

    let fake = FakeSyscalls::new();
    let mut cs = spec("cs", TYPE_SOFTWARE, 3);
    cs.filter = Some("prev_pid == 1".into());
    let err = CounterSet::open(fake.clone(), vec![cs], &[], Target::Cpus(vec![0])).unwrap_err();
    assert_eq!(
        err.to_string().split(';').next().unwrap(),
        "failed to set filter \"prev_pid == 1\" on event cs: EINVAL (Invalid argument)"
    );
    assert_eq!(fake.open_count(), 0);
}

fn software_together() -> tmetric_runtime::counter::Opening {
    tmetric_runtime::counter::Opening { inherit: true, software_together: true }
}

fn group_reads(fake: &FakeSyscalls) -> usize {
    fake.calls().iter().filter(|c| matches!(c, Call::Read { .. })).count()
}

/// Software events the plan opens alone are one group per CPU when asked: one read per
/// CPU, every event's count on every CPU what it would be alone; a plan's own group and
/// events of other PMUs are opened as before.
#[test]
fn software_events_opened_alone_read_as_one_group_per_cpu() {
    let fake = FakeSyscalls::new();
    let specs = vec![
        spec("a", TYPE_RAW, 0x3c),
        spec("b", TYPE_RAW, 0xc0),
        spec("task-clock", TYPE_SOFTWARE, 1),
        spec("context-switches", TYPE_SOFTWARE, 3),
        spec("page-faults", TYPE_SOFTWARE, 2),
        spec("c", TYPE_RAW, 0x2e),
    ];
    for (config, base) in [(1, 1000), (3, 20), (2, 300)] {
        for cpu in [0, 1] {
            let value = base + cpu as u64;
            fake.program_cpu(TYPE_SOFTWARE, config, cpu, &[Reading::new(value, 50, 50)]);
        }
    }
    let mut counters = CounterSet::open_as(
        fake.clone(),
        specs,
        &[vec![0, 1]],
        &[false; 6],
        Target::Cpus(vec![0, 1]),
        software_together(),
    )
    .unwrap();
    assert_eq!(
        counters.layout(),
        vec![
            (0, vec![2, 3, 4]),
            (1, vec![2, 3, 4]),
            (0, vec![0, 1]),
            (1, vec![0, 1]),
            (0, vec![5]),
            (1, vec![5]),
        ]
    );
    let before = group_reads(&fake);
    let snapshot = counters.read().unwrap();
    assert_eq!(group_reads(&fake) - before, 6, "one read per group and CPU");
    for (event, base) in [(2, 1000), (3, 20), (4, 300)] {
        let cpus = snapshot.events[event].as_ref().unwrap();
        let values: Vec<(i32, u64)> = cpus.iter().map(|c| (c.cpu, c.raw.value)).collect();
        assert_eq!(values, vec![(0, base), (1, base + 1)]);
    }
    // Per task, or without being asked, each is opened alone.
    for (target, together) in [
        (Target::Task { pid: 7, on_exec: true }, software_together()),
        (
            Target::Cpus(vec![0, 1]),
            tmetric_runtime::counter::Opening { inherit: true, software_together: false },
        ),
    ] {
        let counters =
            CounterSet::open_as(FakeSyscalls::new(), three(), &[], &[false; 3], target, together)
                .unwrap();
        assert!(counters.layout().iter().all(|(_, events)| events.len() == 1));
    }
}

/// An event refused as a member is opened alone, and a refusal is recorded as it is for
/// events opened alone: the same errno and CPU, the event not counted on any CPU.
#[test]
fn software_events_refused_together_are_opened_alone_or_refused_as_before() {
    let specs = || {
        vec![
            spec("task-clock", TYPE_SOFTWARE, 1),
            spec("context-switches", TYPE_SOFTWARE, 3),
            spec("page-faults", TYPE_SOFTWARE, 2),
            spec("cpu-migrations", TYPE_SOFTWARE, 4),
        ]
    };
    let fake = FakeSyscalls::new();
    fake.max_group_size(2);
    fake.fail_on_cpu(TYPE_SOFTWARE, 2, 1, libc::ENOENT);
    let target = Target::Cpus(vec![0, 1]);
    let together =
        CounterSet::open_as(fake, specs(), &[], &[false; 4], target.clone(), software_together())
            .unwrap();
    assert_eq!(
        together.layout(),
        vec![(0, vec![0, 1]), (0, vec![2]), (0, vec![3]), (1, vec![0, 1]), (1, vec![3])]
    );
    let alone_fake = FakeSyscalls::new();
    alone_fake.fail_on_cpu(TYPE_SOFTWARE, 2, 1, libc::ENOENT);
    let alone = CounterSet::open(alone_fake, specs(), &[], target).unwrap();
    for event in 0..4 {
        assert_eq!(together.failure(event), alone.failure(event), "event {event}");
    }
    let failure = together.failure(2).unwrap();
    assert_eq!((failure.errno.0, failure.cpu), (libc::ENOENT, Some(1)));
}

/// Records where the reading thread is moved ([`tmetric_runtime::Syscalls::move_to_cpu`]).
struct Moving {
    fake: FakeSyscalls,
    here: u32,
    moves: std::rc::Rc<std::cell::RefCell<Vec<Option<u32>>>>,
}

impl tmetric_runtime::Syscalls for Moving {
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, tmetric_runtime::Errno> {
        self.fake.perf_event_open(attr, pid, cpu, group_fd)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, tmetric_runtime::Errno> {
        self.fake.read(fd, buf)
    }
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), tmetric_runtime::Errno> {
        self.fake.enable(fd, group)
    }
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), tmetric_runtime::Errno> {
        self.fake.disable(fd, group)
    }
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), tmetric_runtime::Errno> {
        self.fake.reset(fd, group)
    }
    fn event_id(&mut self, fd: i32) -> Result<u64, tmetric_runtime::Errno> {
        self.fake.event_id(fd)
    }
    fn close(&mut self, fd: i32) {
        self.fake.close(fd)
    }
    fn move_to_cpu(&mut self, cpu: u32) -> bool {
        self.moves.borrow_mut().push(Some(cpu));
        self.here = cpu;
        true
    }
    fn restore_cpus(&mut self) {
        self.moves.borrow_mut().push(None);
    }
    fn current_cpu(&mut self) -> Option<u32> {
        Some(self.here)
    }
}

/// The reading thread moves to a CPU only for enough groups there: a move costs more than
/// the interrupts of a few reads from where it is. It never moves for its own CPU, and gets
/// its CPUs back after a read that moved it.
#[test]
fn the_reader_moves_only_to_cpus_with_many_groups() {
    use tmetric_runtime::Syscalls;
    let moves = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let four: Vec<CounterSpec> =
        (0..4).map(|i| spec(&format!("e{i}"), TYPE_RAW, 0x10 + i as u64)).collect();
    let cases = [(1, vec![]), (3, vec![]), (4, vec![Some(0), None])];
    for (groups, expected) in cases {
        moves.borrow_mut().clear();
        let sys = Moving { fake: FakeSyscalls::new(), here: 1, moves: moves.clone() };
        let specs = four[..groups].to_vec();
        let mut counters = CounterSet::open(sys, specs, &[], Target::Cpus(vec![0, 1])).unwrap();
        counters.read().unwrap();
        assert_eq!(*moves.borrow(), expected, "{groups} groups a CPU");
        assert_eq!(counters.syscalls().current_cpu(), Some(if groups >= 4 { 0 } else { 1 }));
    }
}
