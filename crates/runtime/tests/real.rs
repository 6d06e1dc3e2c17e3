//! Counting with the running kernel. Software events work on every Linux machine, virtual
//! ones included; the expected values come from the workload's own rusage, the test's
//! reading of sysfs, or from the sum of parts, never from the code under test.

use std::ffi::OsString;
use std::time::Duration;

use tmetric_runtime::counter::{Aggregate, OpenFailure};
use tmetric_runtime::event::{self, ResolvedEvent};
use tmetric_runtime::{
    CounterSet, CounterSpec, Environment, Kernel, RunOptions, RunReport, Snapshot,
};
use tmetric_runtime::{Sysfs, Target, Workload, WorkloadError, run};

use crate::helper_argv;

struct Outcome {
    report: RunReport,
    ticks: Vec<(Duration, Snapshot)>,
    failures: Vec<Option<OpenFailure>>,
    layout: Vec<(i32, Vec<usize>)>,
    descriptors: usize,
}

impl Outcome {
    fn total(&self, event: usize) -> Aggregate {
        self.report.totals.aggregate(event).expect("the event is open")
    }
}

fn specs(names: &[&str]) -> Vec<CounterSpec> {
    let sysfs = Sysfs::system();
    names
        .iter()
        .map(|name| match event::resolve(name, &sysfs).expect("a known event") {
            ResolvedEvent::Counter(event) => CounterSpec::from(&event),
            ResolvedEvent::Tool(_) => panic!("{name} is a tool event"),
        })
        .collect()
}

fn count(
    names: &[&str],
    grouped: bool,
    target: Option<Vec<u32>>,
    argv: Vec<OsString>,
    interval: Option<u64>,
) -> Outcome {
    let groups = if grouped { vec![(0..names.len()).collect()] } else { vec![] };
    let mut workload = Workload::prepare(&argv).expect("fork the workload");
    let target = match target {
        Some(cpus) => Target::Cpus(cpus),
        None => Target::Task { pid: workload.pid(), on_exec: true },
    };
    let mut counters =
        CounterSet::open(Kernel, specs(names), &groups, target.clone()).expect("open");
    let mut ticks = Vec::new();
    let options = RunOptions {
        interval: interval.map(Duration::from_millis),
        catch_signals: false,
        ..RunOptions::default()
    };
    let report = run(&mut counters, &target, Some(&mut workload), &options, |tick| {
        ticks.push((tick.length, tick.counts.clone()));
        Ok(())
    })
    .expect("run");
    Outcome {
        report,
        ticks,
        failures: (0..names.len()).map(|e| counters.failure(e)).collect(),
        layout: counters.layout(),
        descriptors: counters.descriptors(),
    }
}

fn online_cpus() -> Vec<u32> {
    // Parsed here, independently of the runtime's parser.
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPU list");
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(lo.parse::<u32>().unwrap()..=hi.parse::<u32>().unwrap());
    }
    cpus
}

#[test]
fn task_clock_agrees_with_the_workloads_rusage() {
    let out = count(&["task-clock", "cpu-clock"], false, None, helper_argv("burn:60"), None);
    let exit = out.report.exit.expect("the workload exited");
    assert_eq!(exit.code(), Some(0));
    let rusage_ns = (exit.user + exit.system).as_nanos() as f64;
    let task_clock = out.total(0);
    assert!(task_clock.counted());
    assert_eq!(task_clock.enabled, task_clock.running, "software counters never multiplex");
    let ns = task_clock.value as f64;
    assert!(ns >= 55e6, "the helper burns 60 ms of CPU, task-clock says {ns} ns");
    // rusage is built from the same scheduler runtime; allow for tick-based splitting.
    assert!(
        ns > rusage_ns * 0.75 - 5e6 && ns < rusage_ns * 1.25 + 5e6,
        "task-clock {ns} ns, rusage {rusage_ns} ns"
    );
    let cpu_clock = out.total(1).value as f64;
    assert!((cpu_clock - ns).abs() < 0.2 * ns + 2e6, "cpu-clock {cpu_clock} vs task-clock {ns}");
    assert!(
        ns <= out.report.elapsed.as_nanos() as f64 * 1.05 + 1e6,
        "one thread cannot beat the wall clock"
    );
}

#[test]
fn context_switches_cover_every_sleep() {
    let sleeps = 6;
    let out = count(
        &["context-switches", "task-clock"],
        true,
        None,
        helper_argv(&format!("sleep:{sleeps}:10")),
        None,
    );
    let switches = out.total(0).value;
    assert!(switches >= sleeps, "{sleeps} sleeps, {switches} context switches");
    assert!(out.report.elapsed >= Duration::from_millis(60));
}

#[test]
fn a_group_read_returns_every_member_with_the_same_times() {
    let names = ["task-clock", "context-switches", "page-faults", "cpu-migrations"];
    let out = count(&names, true, None, helper_argv("burn:20"), None);
    assert_eq!(out.layout, vec![(-1, vec![0, 1, 2, 3])], "one task group, leader first");
    assert_eq!(out.descriptors, 4);
    let cpus: Vec<_> = (0..4).map(|e| out.report.totals.events[e].clone().expect("open")).collect();
    for member in &cpus {
        assert_eq!(member.len(), 1, "a task counter has one reading");
        assert_eq!(member[0].raw.enabled, cpus[0][0].raw.enabled);
        assert_eq!(member[0].raw.running, cpus[0][0].raw.running);
    }
    assert!(cpus[0][0].raw.enabled > 0);
    // A process that starts touches pages: the group really read the other members.
    assert!(out.total(2).value > 10, "page-faults {}", out.total(2).value);
    // The leader's own value is the task clock, within the enabled time.
    assert!(out.total(0).value <= cpus[0][0].raw.enabled);
}

#[test]
fn system_wide_opens_one_counter_per_online_cpu_and_sums_them() {
    let online = online_cpus();
    let argv: Vec<OsString> = vec!["sleep".into(), "0.2".into()];
    let out = count(&["cpu-clock", "context-switches"], true, Some(online.clone()), argv, None);
    assert_eq!(out.descriptors, 2 * online.len());
    let per_cpu = out.report.totals.events[0].clone().expect("open");
    let mut seen: Vec<u32> = per_cpu.iter().map(|c| c.cpu as u32).collect();
    seen.sort_unstable();
    assert_eq!(seen, online);
    let elapsed = out.report.elapsed.as_nanos() as f64;
    let mut sum = 0;
    for c in &per_cpu {
        // A CPU-bound cpu-clock runs all the time, idle or not.
        let v = c.raw.value as f64;
        assert!(
            v > 0.8 * elapsed && v < 1.2 * elapsed + 5e6,
            "cpu {} counted {v} ns of {elapsed}",
            c.cpu
        );
        sum += c.raw.value;
    }
    assert_eq!(out.total(0).value, sum);
    assert_eq!(out.total(0).cpus, online.len());
}

/// The CPUs the calling thread may run on.
fn own_cpus() -> Vec<u32> {
    // SAFETY: sched_getaffinity on the calling thread into a set of the size given.
    let set = unsafe {
        let mut set = std::mem::zeroed::<libc::cpu_set_t>();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    };
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect()
}

/// Per-CPU counters are read CPU by CPU from that CPU (no call to another CPU per counter),
/// and the thread gets its CPUs back after every read; the counts come back in the CPUs'
/// order, each from its own CPU.
#[test]
fn per_cpu_reads_move_the_reader_and_give_its_cpus_back() {
    let online = online_cpus();
    let before = own_cpus();
    let target = Target::Cpus(online.clone());
    let mut counters =
        CounterSet::open(Kernel, specs(&["cpu-clock", "context-switches"]), &[], target)
            .expect("open");
    counters.enable().expect("enable");
    std::thread::sleep(Duration::from_millis(50));
    for _ in 0..3 {
        let snapshot = counters.read().expect("read");
        assert_eq!(own_cpus(), before, "the reader's CPUs after a read");
        for event in &snapshot.events {
            let cpus: Vec<u32> =
                event.as_ref().expect("open").iter().map(|c| c.cpu as u32).collect();
            assert_eq!(cpus, online);
        }
        let clock = snapshot.events[0].as_ref().expect("open");
        assert!(clock.iter().all(|c| c.raw.value > 0), "{clock:?}");
    }
}

#[test]
fn interval_deltas_add_up_to_the_total() {
    let out = count(&["task-clock", "page-faults"], true, None, helper_argv("wall:450"), Some(100));
    assert!(out.ticks.len() >= 4, "450 ms at 100 ms intervals gave {} ticks", out.ticks.len());
    for event in 0..2 {
        let sum: u64 = out.ticks.iter().map(|(_, s)| s.aggregate(event).unwrap().value).sum();
        assert_eq!(sum, out.total(event).value, "event {event}");
    }
    let length: Duration = out.ticks.iter().map(|(l, _)| *l).sum();
    assert!(length.abs_diff(out.report.elapsed) < Duration::from_millis(1));
    // The busy helper runs through the middle intervals. Loosely: other tests (and, on a
    // developer machine, other builds) share the 2 CPUs, and at a load of 15 a busy process
    // still gets several ms of a 100 ms interval; an idle one would get none.
    let middle = out.ticks[1].1.aggregate(0).unwrap().value;
    assert!(middle > 2_000_000, "second interval task-clock {middle} ns");
}

#[test]
fn an_unsupported_hardware_event_does_not_stop_the_run() {
    let sysfs = Sysfs::system();
    let env = Environment::probe(&sysfs, std::path::Path::new("/proc"));
    let out =
        count(&["task-clock", "cycles", "page-faults"], true, None, helper_argv("burn:10"), None);
    assert!(out.total(0).counted());
    assert!(out.total(2).value > 0);
    if env.has_core_pmu {
        // A machine with a PMU counts it; the run is the same.
        assert!(out.failures[1].is_none());
        assert!(out.total(1).value > 0);
    } else {
        let failure = out.failures[1].expect("no PMU, so cycles cannot open");
        assert!(matches!(failure.errno.0, libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV));
        assert!(out.report.totals.events[1].is_none());
        assert_eq!(out.layout, vec![(-1, vec![0, 2])], "the group goes on without it");
        let resolved = match event::resolve("cycles", &sysfs).unwrap() {
            ResolvedEvent::Counter(c) => c,
            ResolvedEvent::Tool(_) => unreachable!(),
        };
        let why = env.explain(failure.errno, &resolved);
        assert!(why.contains("no hardware PMU"), "{why}");
    }
}

#[test]
fn msr_tsc_ticks_at_a_plausible_rate_where_the_msr_pmu_exists() {
    if !Sysfs::system().has_pmu("msr") {
        eprintln!("no msr PMU here: nothing to check");
        return;
    }
    let out = count(&["task-clock", "msr/tsc/"], true, None, helper_argv("burn:30"), None);
    assert!(out.failures[1].is_none(), "{:?}", out.failures[1]);
    let ghz = out.total(1).value as f64 / out.total(0).value as f64;
    assert!((0.2..10.0).contains(&ghz), "TSC ticks per task-clock ns: {ghz}");
}

#[test]
fn exit_codes_and_exec_failures_are_reported() {
    let out =
        count(&["task-clock"], false, None, vec!["sh".into(), "-c".into(), "exit 3".into()], None);
    assert_eq!(out.report.exit.unwrap().code(), Some(3));
    assert_eq!(out.report.exit.unwrap().shell_code(), 3);
    let killed = count(
        &["task-clock"],
        false,
        None,
        vec!["sh".into(), "-c".into(), "kill -TERM $$".into()],
        None,
    );
    assert_eq!(killed.report.exit.unwrap().signal(), Some(libc::SIGTERM));
    assert_eq!(killed.report.exit.unwrap().shell_code(), 128 + libc::SIGTERM);

    let missing = Workload::prepare(&["tmetric-no-such-command".into()]);
    assert!(matches!(missing, Err(WorkloadError::NotFound(_))));
    let mut unrunnable = Workload::prepare(&["/nonexistent/tmetric".into()]).expect("fork");
    match unrunnable.start() {
        Err(WorkloadError::Exec { errno, .. }) => assert_eq!(errno.0, libc::ENOENT),
        other => panic!("expected an exec failure, got {other:?}"),
    }
}

/// The calling thread's id, from `/proc/thread-self` (`<pid>/task/<tid>`).
fn own_tid() -> i32 {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok()).expect("a tid")
}

/// The calling thread's time on a CPU so far, in ns, from `CLOCK_THREAD_CPUTIME_ID`: the
/// scheduler's own figure, read independently of perf events. (`schedstat` of a running
/// thread lags up to a tick: 4 ms at HZ=250, which read 24.0 ms for a 20.4 ms spin here.)
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The machine's stolen time so far (`/proc/stat`, USER_HZ ticks), where it is kept.
fn steal_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().next()?.split_whitespace().nth(8)?.parse().ok()
}

/// Spins until the calling thread has run `ms` more milliseconds; returns the CPU time it
/// used from the call to the return, in ns.
fn spin_cpu(ms: u64) -> u64 {
    let start = thread_cpu_ns();
    let mut x = 0u64;
    while thread_cpu_ns() - start < ms * 1_000_000 {
        for i in 0..10_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
    thread_cpu_ns() - start
}

#[test]
fn per_thread_counters_count_each_thread_apart_and_keep_exited_threads() {
    use std::sync::{Arc, Barrier, mpsc};
    let go = Arc::new(Barrier::new(3));
    let (tids_tx, tids_rx) = mpsc::channel();
    let (used_tx, used_rx) = mpsc::channel::<(char, u64)>();
    // A spins 80 ms, then starts C (after the counters were opened), which spins 60 ms: the
    // kernel's inheritance adds C's time to A's counter. B spins 40 ms. All exit before the
    // counters are read, so every count read is a final one.
    let a = {
        let (go, tids, used) = (go.clone(), tids_tx.clone(), used_tx.clone());
        std::thread::spawn(move || {
            tids.send(('a', own_tid())).unwrap();
            go.wait();
            let mine = spin_cpu(80);
            let c = std::thread::spawn(|| (own_tid(), spin_cpu(60)));
            let (tid_c, child) = c.join().unwrap();
            used.send(('a', mine)).unwrap();
            used.send(('c', child)).unwrap();
            tid_c
        })
    };
    let b = {
        let (go, tids, used) = (go.clone(), tids_tx, used_tx);
        std::thread::spawn(move || {
            tids.send(('b', own_tid())).unwrap();
            go.wait();
            used.send(('b', spin_cpu(40))).unwrap();
        })
    };
    let mut tids = [tids_rx.recv().unwrap(), tids_rx.recv().unwrap()];
    tids.sort();
    let (tid_a, tid_b) = (tids[0].1, tids[1].1);
    // A thread that no longer exists: a joined thread's id, which the kernel answers ESRCH.
    let gone = std::thread::spawn(own_tid).join().unwrap();
    let target = Target::Threads(vec![tid_a, gone, tid_b]);
    let mut counters =
        CounterSet::open(Kernel, specs(&["task-clock"]), &[], target).expect("open per thread");
    assert_eq!(counters.vanished(), &[gone]);
    assert!(counters.failure(0).is_none());
    assert_eq!(counters.descriptors(), 2);
    let steal_before = steal_ticks();
    counters.enable().unwrap();
    go.wait();
    let tid_c = a.join().unwrap();
    b.join().unwrap();
    // `join` returns when the kernel wakes the joiner in `exit_mm`, before the exiting
    // thread's `perf_event_exit_task` has added an inherited counter (C's) to its parent's
    // (A's): read too early, under load, A lacked C's 60 ms. A thread's `/proc` entry goes
    // at `release_task`, after that: wait for every one to go (bounded, and failing if one
    // stays), so the counts read are final.
    for tid in [tid_a, tid_b, tid_c] {
        let entry = std::path::PathBuf::from(format!("/proc/self/task/{tid}"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while entry.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!entry.exists(), "thread {tid} was still there 10 s after it was joined");
    }
    let snapshot = counters.read().expect("read after the threads exited");
    counters.disable().unwrap();
    let used: std::collections::HashMap<char, u64> = used_rx.iter().collect();
    let readings = snapshot.events[0].as_ref().expect("task-clock is open");
    let count = |tid: i32| {
        let found: Vec<_> = readings.iter().filter(|c| c.thread == tid).collect();
        assert_eq!(found.len(), 1, "one reading per thread: {readings:?}");
        assert_eq!(found[0].cpu, -1);
        found[0].raw.value
    };
    // task-clock and the scheduler's runtime measure the same thing, except time the
    // hypervisor stole: the scheduler's clock leaves it out (PARAVIRT_TIME_ACCOUNTING), the
    // perf clock does not, and a loaded VM host steals milliseconds. So the upper bound
    // allows the steal the machine reported meanwhile (10 ms ticks: one more for rounding);
    // the counted span is also a little longer than the spins (barrier wake-up, thread start
    // and exit). The lower bound stays tight: task-clock never counts less.
    let steal = steal_ticks().zip(steal_before).map_or(0, |(after, before)| after - before + 1);
    let slack = 8_000_000 + steal * 10_000_000;
    let a_expected = used[&'a'] + used[&'c'];
    let (a_count, b_count) = (count(tid_a), count(tid_b));
    assert!(
        a_count >= a_expected - 1_000_000 && a_count <= a_expected + slack,
        "A (with C inherited): counted {a_count} ns, the scheduler says {} + {} ns ({steal} ticks stolen)",
        used[&'a'],
        used[&'c']
    );
    assert!(
        b_count >= used[&'b'] - 1_000_000 && b_count <= used[&'b'] + slack,
        "B: counted {b_count} ns, the scheduler says {} ns ({steal} ticks stolen)",
        used[&'b']
    );
    assert_eq!(snapshot.aggregate(0).unwrap().value, a_count + b_count);
}

/// `sample_every` reads the counters during the run without reporting: cumulative readings
/// that only grow, the last one the totals; no interval is reported.
#[test]
fn samples_are_taken_during_the_run_and_end_with_the_totals() {
    let names = ["task-clock"];
    let mut workload = Workload::prepare(&helper_argv("wall:120")).expect("fork the workload");
    let target = Target::Task { pid: workload.pid(), on_exec: true };
    let mut counters = CounterSet::open(Kernel, specs(&names), &[], target.clone()).expect("open");
    let options = RunOptions {
        sample_every: Some(Duration::from_millis(20)),
        catch_signals: false,
        ..RunOptions::default()
    };
    let mut ticks = 0;
    let report = run(&mut counters, &target, Some(&mut workload), &options, |_| {
        ticks += 1;
        Ok(())
    })
    .expect("run");
    assert_eq!((ticks, report.ticks), (0, 0));
    let samples = &report.samples;
    // 120 ms of work read every 20 ms: about six readings (a loaded machine wakes late).
    assert!(samples.len() >= 3, "{} samples", samples.len());
    assert_eq!(samples.last(), Some(&report.totals));
    let values: Vec<u64> = samples.iter().map(|s| s.aggregate(0).expect("open").value).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    assert!(values[0] < *values.last().unwrap(), "{values:?}");
}

/// tmetric's own rotation on the running kernel: two groups of software events (which the
/// kernel never multiplexes) take turns by enable/disable ioctls. Each ran only in its turns,
/// yet each reads the whole run as enabled, so `count * enabled / running` extrapolates to
/// what ran all the time: the task-clocks of both groups scale to the workload's CPU time,
/// and the reads at the turns only grow.
#[test]
fn own_rotation_takes_turns_and_scales_each_group_over_the_whole_run() {
    let names = ["task-clock", "cpu-clock"];
    let mut workload = Workload::prepare(&helper_argv("wall:300")).expect("fork the workload");
    let target = Target::Task { pid: workload.pid(), on_exec: true };
    let groups = vec![vec![0], vec![1]];
    let mut counters =
        CounterSet::open(Kernel, specs(&names), &groups, target.clone()).expect("open");
    let rotation = tmetric_runtime::Rotation {
        turns: vec![vec![0], vec![1]],
        turn: Duration::from_millis(10),
        seed: 1,
    };
    let options = RunOptions {
        sample_every: Some(Duration::from_millis(100)),
        catch_signals: false,
        rotation: Some(rotation),
        ..RunOptions::default()
    };
    let report =
        run(&mut counters, &target, Some(&mut workload), &options, |_| Ok(())).expect("run");
    assert!(counters.rotating());
    // 300 ms in turns of 5-15 ms: a read at each, many more than every 100 ms would give.
    assert!(report.samples.len() >= 8, "{} reads", report.samples.len());
    let values: Vec<u64> =
        report.samples.iter().map(|s| s.aggregate(0).expect("open").running).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
    let cpu = report.exit.map(|e| (e.user + e.system).as_nanos() as f64).expect("exited");
    for (event, name) in names.iter().enumerate() {
        let raw = report.totals.events[event].as_ref().expect("open")[0].raw;
        // Each ran in about half the turns, and reads the whole run as enabled.
        assert!(raw.running < raw.enabled * 9 / 10, "{}: {raw:?}", name);
        assert!(raw.running > raw.enabled / 10, "{}: {raw:?}", name);
        let scaled = raw.scaled().expect("ran") as f64;
        assert!((scaled / cpu - 1.0).abs() < 0.15, "{}: {scaled} ns vs {cpu} ns of CPU", name);
    }
}
