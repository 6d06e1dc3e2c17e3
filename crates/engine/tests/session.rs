//! The session's data outside the counters: threads listed under a fake tasks tree, `-r`'s
//! outcome (mean, spread, the runs' times) and sampled latencies by statistic; and the region
//! API's session on the calling thread's own groups over `FakeSyscalls`.

use std::path::Path;
use std::time::Duration;

use tmetric_engine::session::{Counted, Outcome, spread_of_mean};
use tmetric_engine::threads::{Threads, ThreadsError, list_threads};
use tmetric_engine::tpebs::latencies;
use tmetric_runtime::{CpuCount, EventReport, RawCount, RunReport, Snapshot, Sysfs, Target};
use tmetric_runtime::{Summary, TpebsMode};

/// A process's threads and their `comm` (`None`: the comm is gone).
type Process<'a> = (i32, &'a [(i32, Option<&'a str>)]);

/// A tasks tree of `processes`.
fn tasks_tree(root: &Path, processes: &[Process<'_>]) {
    for (pid, threads) in processes {
        for (tid, comm) in *threads {
            let dir = root.join(format!("{pid}/task/{tid}"));
            std::fs::create_dir_all(&dir).unwrap();
            if let Some(comm) = comm {
                std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
                // `-t TID` reads `TID/comm`, as /proc has it for every thread.
                std::fs::create_dir_all(root.join(tid.to_string())).unwrap();
                std::fs::write(root.join(format!("{tid}/comm")), format!("{comm}\n")).unwrap();
            }
        }
    }
}

#[test]
fn threads_are_listed_under_the_tasks_root_given() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tasks_tree(
        root,
        &[
            (40, &[(40, Some("server")), (43, Some("worker 2")), (41, Some("worker 1"))]),
            (7, &[(7, Some("init")), (9, None)]),
            (50, &[(50, None)]),
        ],
    );
    // Not a process: left out of `All`.
    std::fs::create_dir_all(root.join("self")).unwrap();
    std::fs::write(root.join("uptime"), "1.0 1.0\n").unwrap();

    let process = list_threads(root, Threads::Process(40)).unwrap();
    assert_eq!(
        process,
        [(40, "server".to_string()), (41, "worker 1".to_string()), (43, "worker 2".to_string())]
    );
    // A thread whose comm is gone ended while it was read: left out.
    assert_eq!(list_threads(root, Threads::Process(7)).unwrap(), [(7, "init".to_string())]);

    let listed = list_threads(root, Threads::Listed(&[43, 7, 43])).unwrap();
    assert_eq!(listed, [(43, "worker 2".to_string()), (7, "init".to_string())]);

    let all = list_threads(root, Threads::All).unwrap();
    let tids: Vec<i32> = all.iter().map(|t| t.0).collect();
    assert_eq!(tids, [7, 40, 41, 43], "processes in order, each one's threads in order");

    let no_process = list_threads(root, Threads::Process(99)).unwrap_err();
    assert!(matches!(no_process, ThreadsError::NoProcess { pid: 99, .. }));
    assert_eq!(no_process.to_string(), "-p 99: no such process");
    let exiting = list_threads(root, Threads::Process(50)).unwrap_err();
    assert_eq!(exiting.to_string(), "-p 50: the process has no threads left (it is exiting)");
    let no_thread = list_threads(root, Threads::Listed(&[7, 12])).unwrap_err();
    assert_eq!(
        no_thread.to_string(),
        format!("-t 12: no such thread ({} has no comm)", root.join("12").display())
    );
    let missing = root.join("absent");
    let unlisted = list_threads(&missing, Threads::All).unwrap_err();
    assert_eq!(unlisted.to_string(), format!("cannot list {}", missing.display()));
}

#[test]
fn listed_threads_are_the_target() {
    let threads = [(40, "server".to_string()), (41, "worker".to_string())];
    let host = tmetric_engine::Host::probe(
        &Sysfs::new("/nonexistent"),
        std::path::Path::new("/nonexistent"),
        None,
    );
    let target = Counted::Threads(&threads).target(&host).unwrap();
    assert_eq!(target, Target::Threads(vec![40, 41]));
    let command = Counted::Command { pid: 12, on_exec: false }.target(&host).unwrap();
    assert_eq!(command, Target::Task { pid: 12, on_exec: false });
    // Every CPU of a machine whose sysfs cannot say which are online: an error, not none.
    let err = Counted::AllCpus.target(&host).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/devices/system/cpu/online"), "{err}");
}

/// A run that counted `value` on one CPU (enabled and running 100 ns) in `seconds`.
fn run(value: u64, seconds: f64) -> RunReport {
    let raw = RawCount { value, enabled: 100, running: 100 };
    RunReport {
        totals: Snapshot { events: vec![Some(vec![CpuCount { cpu: 0, thread: -1, raw }])] },
        elapsed: Duration::from_secs_f64(seconds),
        exit: None,
        interrupted_by: None,
        ticks: 0,
        stopped: false,
        timed_out: false,
        samples: Vec::new(),
        sample_ticks: Vec::new(),
    }
}

#[test]
fn repeated_runs_give_their_mean_and_spread() {
    let one = Outcome::of(run(10, 1.0), Vec::new(), 1, Vec::new());
    assert_eq!(one.report.totals.aggregate(0).unwrap().value, 10);
    assert!(one.spread.is_empty() && one.elapsed_runs.is_empty());
    assert_eq!(one.elapsed_spread(), None);

    let three = Outcome::of(run(30, 3.0), vec![run(10, 1.0), run(20, 2.0)], 1, Vec::new());
    assert_eq!(three.report.totals.aggregate(0).unwrap().value, 20, "the mean count");
    assert_eq!(three.report.elapsed, Duration::from_secs(2), "the mean time");
    assert_eq!(three.elapsed_runs, [1.0, 2.0, 3.0]);
    // Standard error of the mean of 10, 20, 30: sd 10, over sqrt(3), relative to 20.
    let spread = three.spread[0].unwrap();
    assert!((spread - 100.0 * 10.0 / 3f64.sqrt() / 20.0).abs() < 1e-9, "{spread}");
    let sd = three.elapsed_spread().unwrap();
    assert!((sd - 1.0 / 3f64.sqrt()).abs() < 1e-12, "{sd}");
    assert_eq!(spread_of_mean(&[5.0]), 0.0);
}

#[test]
fn sampled_latencies_by_statistic_and_period() {
    let summary = |mean: f64, last: f64| Summary {
        count: 2,
        mean: Some(mean),
        last: Some(last),
        ..Summary::default()
    };
    let reports = [
        EventReport {
            name: "cpu/MEM_INST_RETIRED.STLB_HIT_LOADS/R".into(),
            total: summary(12.0, 9.0),
            interval: summary(30.0, 31.0),
            hung_up: 0,
            decode_errors: 0,
            first_error: None,
            kernel_lost: None,
        },
        EventReport {
            name: "cpu/FRONTEND_RETIRED.ITLB_MISS/R".into(),
            total: Summary::default(),
            interval: Summary::default(),
            hung_up: 0,
            decode_errors: 0,
            first_error: None,
            kernel_lost: None,
        },
    ];
    let total = latencies(&reports, TpebsMode::Mean, false);
    assert_eq!(total[0], ("cpu/MEM_INST_RETIRED.STLB_HIT_LOADS/R".to_string(), 12.0));
    assert_eq!(total[1].1, 0.0, "no samples read 0, as perf's");
    assert_eq!(latencies(&reports, TpebsMode::Last, true)[0].1, 31.0);
}

/// A plan of `list` resolved over an empty sysfs (generic hardware and software events), the
/// environment it is explained in, and the tree's directory (kept alive by the caller).
fn own_plan(list: &str) -> (tmetric_engine::Plan, tmetric_runtime::Environment, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sys")).unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let sysfs = Sysfs::new(dir.path().join("sys"));
    let proc_root = dir.path().join("proc");
    let env = tmetric_runtime::Environment::probe(&sysfs, &proc_root);
    let mut plan = tmetric_engine::Plan::new(
        tmetric_engine::Host::probe(&sysfs, &proc_root, None).literals(false, None),
    );
    let resolver = tmetric_runtime::event::Resolver::new(&sysfs);
    plan.add_event_lists(&[list.to_string()], &resolver).unwrap();
    (plan, env, dir)
}

/// The region API's session on `FakeSyscalls`: each group opened for the calling thread
/// (pid 0, any CPU) as one read group, the hardware leader pinned and disabled until enabled,
/// nothing inherited or enabled at an exec; read through the session, closed siblings first.
#[test]
fn own_thread_groups_are_pinned_when_hardware_not_inherited_and_read_as_groups() {
    use tmetric_engine::session::Session;
    use tmetric_runtime::fake::Call;
    use tmetric_runtime::{FakeSyscalls, Reading};
    let (plan, env, _dir) = own_plan("cycles,instructions,task-clock,page-faults");
    let names: Vec<&str> = plan.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["cycles", "instructions", "task-clock", "page-faults"]);
    let fake = FakeSyscalls::new();
    let program = |spec: usize, reading: Reading| {
        let attr = &plan.specs()[spec].attr;
        fake.program(attr.type_, attr.config, &[reading]);
    };
    // Times are the leader's: the kernel reports them for the whole group.
    program(0, Reading::new(5000, 70, 70));
    program(2, Reading::new(800, 90, 90));
    program(3, Reading::new(12, 0, 0));
    let mut s =
        Session::open_own_thread(fake.clone(), plan, vec![vec![0, 1], vec![2, 3]], env).unwrap();
    let opens: Vec<_> = fake
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Open { attr, pid, cpu, group_fd, result } => {
                Some((attr, pid, cpu, group_fd, result.unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(opens.len(), 4);
    for (i, (attr, pid, cpu, group_fd, _)) in opens.iter().enumerate() {
        let leader = i % 2 == 0;
        assert_eq!((*pid, *cpu), (0, -1), "the calling thread, on any CPU");
        assert_eq!(*group_fd, if leader { -1 } else { opens[i - 1].4 });
        assert_eq!(attr.pinned, i == 0, "only the hardware leader is pinned ({i})");
        assert_eq!(attr.disabled, leader);
        assert!(!attr.inherit && !attr.enable_on_exec);
        assert_eq!(attr.read_format, tmetric_runtime::sys::READ_FORMAT);
    }
    let own = s.own_groups().unwrap().to_vec();
    assert_eq!(own.len(), 2);
    assert_eq!((own[0].pinned, own[1].pinned), (true, false));
    assert_eq!(own[0].fds, [opens[0].4, opens[1].4]);
    assert_eq!(own[1].specs, [2, 3]);
    assert_eq!(s.descriptors(), 4);
    assert!(s.failures().iter().all(Option::is_none) && s.splits().is_empty());

    s.enable().unwrap();
    let snapshot = s.read().unwrap();
    let value = |i: usize| snapshot.events[i].as_ref().unwrap()[0].raw;
    assert_eq!(value(0), RawCount { value: 5000, enabled: 70, running: 70 });
    assert_eq!(value(3), RawCount { value: 12, enabled: 90, running: 90 });
    let run = s.run(
        None,
        &tmetric_runtime::RunOptions::default(),
        &tmetric_engine::view::Partition::Global,
        |_, _, _, _| Ok(()),
    );
    assert!(run.is_err(), "the program is the workload: no run loop");
    drop(s);
    assert_eq!(fake.open_count(), 0);
    let closed: Vec<i32> = fake
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Close { fd } => Some(fd),
            _ => None,
        })
        .collect();
    assert_eq!(closed, [opens[3].4, opens[2].4, opens[1].4, opens[0].4]);
    let enabled: Vec<Call> =
        fake.calls().into_iter().filter(|c| matches!(c, Call::Enable { .. })).collect();
    let group = true;
    assert_eq!(
        enabled,
        [Call::Enable { fd: opens[0].4, group }, Call::Enable { fd: opens[2].4, group }]
    );
}

/// All or nothing: a refused member closes every counter opened, the groups before it too,
/// and the refusal names the event, its errno and the explanation; a user-only fallback
/// becomes the plan's warning.
#[test]
fn an_own_thread_refusal_closes_everything_and_user_only_is_a_warning() {
    use tmetric_engine::session::{Session, SessionError};
    use tmetric_runtime::{Errno, FakeSyscalls};
    let (plan, env, _dir) = own_plan("cycles,instructions,task-clock,page-faults");
    let fake = FakeSyscalls::new();
    let faults = plan.specs()[3].attr.clone();
    fake.fail(faults.type_, faults.config, libc_eopnotsupp());
    let why = env.explain(Errno(libc_eopnotsupp()), &plan.events()[3]);
    let groups = vec![vec![0, 1], vec![2, 3]];
    let err = Session::open_own_thread(fake.clone(), plan.clone(), groups.clone(), env.clone())
        .err()
        .expect("refused");
    match err {
        SessionError::Refused { event, errno, why: got } => {
            assert_eq!((event.as_str(), errno), ("page-faults", Errno(libc_eopnotsupp())));
            assert_eq!(got, why);
        }
        other => panic!("{other}"),
    }
    assert_eq!(fake.open_count(), 0, "every counter closed again");

    let fake = FakeSyscalls::new();
    fake.unprivileged(2);
    let s = Session::open_own_thread(fake.clone(), plan, groups, env).unwrap();
    assert_eq!(s.user_only(), ["cycles", "instructions", "task-clock", "page-faults"]);
    let warned: Vec<String> = s
        .plan()
        .warnings()
        .iter()
        .filter_map(|w| match w {
            tmetric_engine::Warning::UserOnly { event } => Some(event.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(warned, ["cycles", "instructions", "task-clock", "page-faults"]);
}

/// `EOPNOTSUPP` on Linux.
fn libc_eopnotsupp() -> i32 {
    95
}
