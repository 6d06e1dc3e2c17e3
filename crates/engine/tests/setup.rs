//! `engine::setup`: the plan `stat`, `record` and `serve` build from a typed request, on
//! simulated machines' trees and on a machine without a PMU. Expected values come from the
//! request and the catalogue (which list a `--filter` follows, which PMU a metric is on), never
//! from a plan this code built before.

use tmetric_engine::setup::{EventsWhy, Hints, Metrics, Request, SetupError, build};
use tmetric_engine::{CgroupError, FilterError, Host, Source};
use tmetric_runtime::Sysfs;

/// A simulated machine's sysfs and procfs in a private directory, probed.
fn host(name: &str) -> (tempfile::TempDir, Host) {
    let dir = tempfile::Builder::new().prefix("tmetric-setup-").tempdir().unwrap();
    let (sys, proc) = (dir.path().join("sys"), dir.path().join("proc"));
    tmetric_sim::Machine::named(name)
        .expect("a simulated machine")
        .write_sysfs(&sys, &proc)
        .unwrap();
    let host = Host::probe(&Sysfs::new(sys), &proc, None);
    (dir, host)
}

fn request(events: &[&str]) -> Request {
    Request {
        events: events.iter().map(|e| e.to_string()).collect(),
        all_cpus: true,
        ..Request::default()
    }
}

/// A `--filter` belongs to the `-e` list it follows: set on `instructions`' list, it names
/// `instructions` when it cannot be set, not `cycles`.
#[test]
fn a_filter_applies_to_the_list_it_follows() {
    let (_dir, host) = host("sapphirerapids");
    let mut asked = request(&["cycles", "instructions"]);
    asked.filters = vec![(1, "common_pid != 1".into())];
    match build(&asked, &host, Hints::default()) {
        Err(SetupError::Filter(FilterError::NotTracepoint { event, filter })) => {
            assert_eq!((event.as_str(), filter.as_str()), ("instructions", "common_pid != 1"));
        }
        other => panic!("{other:?}"),
    }
}

/// perf's `-G` gives the events before it their cgroups in order, and refuses to come first.
#[test]
fn cgroups_go_to_the_events_before_them() {
    let (_dir, host) = host("sapphirerapids");
    let mut asked = request(&["cycles,instructions"]);
    asked.cgroups = vec!["/a".into(), "/b".into()];
    let plan = build(&asked, &host, Hints::default()).unwrap().plan;
    let cgroups: Vec<Option<&str>> = plan.rows().iter().map(|r| r.cgroup.as_deref()).collect();
    assert_eq!(cgroups, [Some("/a"), Some("/b")]);
    let mut first = request(&[]);
    first.cgroups = vec!["/a".into()];
    first.metrics = Metrics::Picks(Vec::new());
    let err = build(&first, &host, Hints::default()).unwrap_err();
    assert!(matches!(err, SetupError::Cgroups(CgroupError::NoEvents)), "{err:?}");
    assert_eq!(err.to_string(), "-G");
}

/// `--all-user` excludes the kernel from every counter, `--all-kernel` the user.
#[test]
fn all_user_and_all_kernel_set_every_counter() {
    let (_dir, host) = host("sapphirerapids");
    for (user_only, kernel_only) in [(true, false), (false, true)] {
        let asked = Request { user_only, kernel_only, ..request(&["cycles,instructions", "cs"]) };
        let plan = build(&asked, &host, Hints::default()).unwrap().plan;
        assert_eq!(plan.specs().len(), 3);
        for spec in plan.specs() {
            let attr = &spec.attr;
            assert_eq!((attr.exclude_kernel, attr.exclude_user), (user_only, kernel_only));
        }
    }
}

/// No `-e` and no `-M` is perf's default selection; metrics chosen already (serve's) add
/// nothing of their own; `-n` counts nothing whatever is asked.
#[test]
fn only_an_empty_request_gets_perfs_defaults() {
    let (_dir, host) = host("sapphirerapids");
    let defaulted = build(&request(&[]), &host, Hints::default()).unwrap().plan;
    // perf 6.12's default events (`default_attrs0` and `default_attrs1` in builtin-stat.c),
    // counted system-wide: cpu-clock for task-clock.
    let perfs = [
        "cpu-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
        "instructions",
        "branches",
        "branch-misses",
    ];
    let names: Vec<&str> = defaulted.rows().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names[..perfs.len()], perfs);
    let picked = Request { metrics: Metrics::Picks(Vec::new()), ..request(&[]) };
    assert!(build(&picked, &host, Hints::default()).unwrap().plan.rows().is_empty());
    let null = Request { null_run: true, per_box: true, ..request(&["cycles"]) };
    let plan = build(&null, &host, Hints::default()).unwrap().plan;
    assert!(plan.rows().is_empty() && plan.per_box());
}

/// `--cputype atom` keeps the hybrid metrics of `cpu_atom` and those of no hybrid PMU; a `-M`
/// of `cpu_core` metrics only is an error naming both.
#[test]
fn cputype_keeps_its_pmus_metrics() {
    let (_dir, host) = host("alderlake");
    let model = host.model().unwrap();
    let pmu_of = |name: &str| -> Vec<&str> {
        let metrics = model.metrics().filter(|m| model.str(m.name) == name);
        metrics.map(|m| model.str(m.pmu)).collect()
    };
    let core_only = model
        .metrics()
        .map(|m| model.str(m.name))
        .find(|name| pmu_of(name) == ["cpu_core"])
        .expect("a metric of cpu_core alone");
    let both = model
        .metrics()
        .map(|m| model.str(m.name))
        .find(|name| {
            let mut pmus = pmu_of(name);
            pmus.sort();
            pmus == ["cpu_atom", "cpu_core"]
        })
        .expect("a metric of both core PMUs");
    let asked = Request {
        cputype: Some("atom".into()),
        metrics: Metrics::Items(vec![both.to_string()]),
        ..request(&[])
    };
    let plan = build(&asked, &host, Hints::default()).unwrap().plan;
    let pmus: Vec<&str> =
        plan.roots().iter().map(|r| r.model.str(r.model.metric(r.metric).pmu)).collect();
    assert!(!pmus.is_empty() && pmus.iter().all(|&p| p == "cpu_atom"), "{both}: {pmus:?}");
    let asked = Request { metrics: Metrics::Items(vec![core_only.to_string()]), ..asked };
    match build(&asked, &host, Hints::default()) {
        Err(SetupError::NoCputypeMetric { kind, pmu }) => {
            assert_eq!((kind.as_str(), pmu.as_str()), ("atom", "cpu_atom"))
        }
        other => panic!("{core_only}: {other:?}"),
    }
}

/// On a machine without a PMU, a vendor event of its model is named as such, with the
/// simulated machine the hint gives; a metric that selects nothing takes the hint too.
#[test]
fn misses_name_the_flag_and_take_the_hints() {
    let dir = tempfile::Builder::new().prefix("tmetric-setup-").tempdir().unwrap();
    let devices = dir.path().join("sys/bus/event_source/devices");
    std::fs::create_dir_all(&devices).unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let sysfs = Sysfs::new(dir.path().join("sys"));
    let host = Host::probe(&sysfs, &dir.path().join("proc"), Some("skylakex"));
    let model = host.model().unwrap();
    let asked = Request { model: Some(model), ..request(&["INST_RETIRED.ANY"]) };
    let hints = Hints {
        metric: Some(|item, _| Some((format!("--pmu-sim for-{item}"), "x86/elsewhere".into()))),
        event: Some(|_| Some(("elsewhere", "x86/elsewhere".into()))),
    };
    match build(&asked, &host, hints) {
        Err(SetupError::Events { list, why }) => {
            let EventsWhy::NoCorePmu(why) = *why else { panic!("{why:?}") };
            assert_eq!(list, "INST_RETIRED.ANY");
            assert_eq!(why.model, "x86/skylakex");
            assert_eq!(why.simulated, Some(("elsewhere", "x86/elsewhere".to_string())));
        }
        other => panic!("{other:?}"),
    }
    let asked = Request { metrics: Metrics::Items(vec!["no_such_metric".into()]), ..request(&[]) };
    let err = build(&asked, &host, hints).unwrap_err();
    assert!(matches!(err, SetupError::Select(_)), "{err:?}");
    let rows_missing = |plan: &tmetric_engine::Plan| {
        plan.rows().iter().all(|r| matches!(r.source, Source::Missing(_)))
    };
    let asked = Request { metrics: Metrics::Items(vec!["tma_retiring".into()]), ..request(&[]) };
    let setup = build(&asked, &host, hints).unwrap();
    assert!(rows_missing(&setup.plan));
    let uncountable = setup.uncountable.expect("no PMU: said once");
    assert_eq!(uncountable.model, "x86/skylakex");
    assert_eq!(uncountable.metrics, ["tma_retiring"]);
    assert_eq!(
        uncountable.simulated.map(|(flag, _)| flag).as_deref(),
        Some("--pmu-sim for-tma_retiring")
    );
}
