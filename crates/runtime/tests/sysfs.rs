//! Event resolution over the fake sysfs tree in `tests/data/sysfs`: an x86 `cpu` PMU, `msr`,
//! `power` (with `.scale`/`.unit` and a `cpumask`), an `amd_df` with split format ranges, and
//! a 2-core, 4-thread topology. Expected configs are worked out from the format files by hand.

use std::path::PathBuf;

use tmetric_runtime::event::{self, EventError, EventKind, ResolvedEvent};
use tmetric_runtime::{CounterEvent, Environment, Sysfs};

fn tree() -> Sysfs {
    Sysfs::new(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysfs"))
}

fn counter(text: &str) -> CounterEvent {
    match event::resolve(text, &tree()) {
        Ok(ResolvedEvent::Counter(c)) => c,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn msr_tsc_resolves_to_the_msr_type_and_config() {
    let tsc = counter("msr/tsc/");
    assert_eq!((tsc.attr.type_, tsc.attr.config), (13, 0));
    assert_eq!(tsc.kind, EventKind::Pmu("msr".into()));
    assert_eq!(tsc.name, "msr/tsc/");
    assert!(!tsc.attr.exclude_kernel && !tsc.attr.exclude_user, "msr rejects exclude bits");
    let aperf = counter("msr/aperf/");
    assert_eq!((aperf.attr.type_, aperf.attr.config), (13, 1));
    // A bare name found on exactly one PMU.
    let bare = counter("tsc");
    assert_eq!((bare.attr.type_, bare.attr.config), (13, 0));
}

#[test]
fn terms_are_placed_by_the_format_files() {
    let e = counter("cpu/event=0x3c,umask=0x1,cmask=2,edge/");
    assert_eq!(e.attr.type_, 4);
    assert_eq!(e.attr.config, 0x3c | 0x1 << 8 | 1 << 18 | 2 << 24);
    let loads = counter("cpu/mem-loads/");
    assert_eq!(loads.attr.config, 0xcd | 0x1 << 8);
    assert_eq!(loads.attr.config1, 3, "ldlat is config1:0-15");
    let slots = counter("cpu/topdown-total-slots/");
    assert_eq!(slots.scale, Some(4.0));
    // AMD DF: `event` is config:0-7,32-35,59-60, so 0x1F3 puts 0xF3 low and 0x1 at bit 32.
    let df = counter("amd_df/event=0x1F3,umask=0x3/");
    assert_eq!(df.attr.config, 0xF3 | 0x3 << 8 | 1 << 32);
    let df_high = counter("amd_df/event=0x1000/");
    assert_eq!(df_high.attr.config, 1 << 59, "bit 12 of the value lands on the 13th position");
    assert_eq!(df.cpus, Some(vec![0, 2]), "the cpumask travels with the event");
    let raw = counter("cpu/config=0x1234,config1=7,name=mine/");
    assert_eq!((raw.attr.config, raw.attr.config1, raw.name.as_str()), (0x1234, 7, "mine"));
}

#[test]
fn aliases_carry_scale_unit_and_cpumask() {
    let energy = counter("power/energy-pkg/");
    assert_eq!((energy.attr.type_, energy.attr.config), (27, 2));
    assert_eq!(energy.unit.as_deref(), Some("Joules"));
    // 2^-32, as the power PMU writes it.
    assert_eq!(energy.scale, Some(1.0 / 4294967296.0));
    assert_eq!(energy.cpus, Some(vec![0]));
}

/// perf 7.x's JSON legacy events are encoded `legacy-hardware-config=N` and
/// `legacy-cache-config=N`: the core PMU's generic events, within perf's limits.
#[test]
fn legacy_config_terms_are_generic_events_of_the_core_pmu() {
    let misses = counter("cpu/legacy-hardware-config=5/");
    assert_eq!((misses.attr.type_, misses.attr.config), (0, 5));
    assert_eq!(misses.kind, EventKind::Hardware);
    assert_eq!(counter("branch-misses").attr, misses.attr, "the same event as its name");
    // L1-dcache-load-misses: L1D (0), read (0 << 8), miss (1 << 16).
    let l1 = counter("cpu/legacy-cache-config=0x10000/");
    assert_eq!((l1.attr.type_, l1.attr.config), (3, 0x10000));
    assert_eq!(counter("L1-dcache-load-misses").attr, l1.attr);
    for bad in [
        "cpu/legacy-hardware-config=10/",
        "cpu/legacy-cache-config=0x1000000/",
        "cpu/legacy-cache-config=7/",
        "msr/legacy-hardware-config=0/",
    ] {
        let err = event::resolve(bad, &tree()).unwrap_err();
        assert!(matches!(err, EventError::BadValue { .. }), "{bad}: {err}");
    }
}

#[test]
fn bad_terms_and_pmus_are_clear_errors() {
    let too_big = event::resolve("cpu/umask=0x100/", &tree()).unwrap_err();
    assert!(matches!(too_big, EventError::BadValue { .. }));
    assert!(too_big.to_string().contains("8 bits"), "{too_big}");
    let unknown = event::resolve("cpu/frobnicate=1/", &tree()).unwrap_err();
    let text = unknown.to_string();
    assert!(
        text.contains("frobnicate") && text.contains("umask") && text.contains("mem-loads"),
        "{text}"
    );
    let no_pmu = event::resolve("uncore_imc_0/event=0x4/", &tree()).unwrap_err();
    assert!(matches!(no_pmu, EventError::NoPmu { ref pmu, .. } if pmu == "uncore_imc_0"));
    let not_number = event::resolve("cpu/event=x/", &tree()).unwrap_err();
    assert!(matches!(not_number, EventError::BadValue { .. }));
}

#[test]
fn topology_counts_cores_and_threads() {
    let topology = tree().topology().unwrap();
    assert_eq!(topology.num_cpus, 4);
    assert_eq!(topology.online, vec![0, 1, 2, 3]);
    assert_eq!((topology.cores, topology.dies, topology.packages), (2, 1, 1));
    assert!(topology.smt_on);
    // Each CPU's first other thread of its core.
    assert_eq!(topology.siblings, vec![(0, 2), (1, 3), (2, 0), (3, 1)]);
    assert_eq!(tree().core_pmu().as_deref(), Some("cpu"));
    let env = Environment::probe(&tree(), std::path::Path::new("/nonexistent"));
    assert!(env.has_core_pmu && !env.virtualized && env.paranoid.is_none());
}

/// A `Sysfs` value reads its PMU directory and each PMU once: PMUs, formats and aliases that
/// appear later are not its (PMU drivers do not come and go during a run), a fresh value's.
#[test]
fn a_sysfs_value_reads_each_pmu_once() {
    let dir = tempfile::tempdir().unwrap();
    let devices = dir.path().join("bus/event_source/devices");
    let pmu = |name: &str, type_: u32| {
        let pmu = devices.join(name);
        std::fs::create_dir_all(pmu.join("format")).unwrap();
        std::fs::create_dir_all(pmu.join("events")).unwrap();
        std::fs::write(pmu.join("type"), format!("{type_}\n")).unwrap();
        std::fs::write(pmu.join("format/event"), "config:0-7\n").unwrap();
        std::fs::write(pmu.join("cpumask"), "0\n").unwrap();
        pmu
    };
    let first = pmu("first", 20);
    std::fs::write(first.join("events/ops"), "event=0x1\n").unwrap();
    let sysfs = Sysfs::new(dir.path());
    assert_eq!(sysfs.pmu_names(), ["first"]);
    let read = sysfs.pmu("first").unwrap();
    assert_eq!((read.type_, read.cpumask.clone()), (20, Some(vec![0])));
    assert_eq!(read.alias("ops").unwrap().unwrap().terms, "event=0x1");
    assert_eq!(sysfs.pmu_cpus("first"), Some(vec![0]));

    pmu("second", 21);
    std::fs::write(first.join("type"), "22\n").unwrap();
    std::fs::write(first.join("cpumask"), "1\n").unwrap();
    std::fs::write(first.join("events/ops"), "event=0x2\n").unwrap();
    assert_eq!(sysfs.pmu_names(), ["first"], "listed once");
    let again = sysfs.pmu("first").unwrap();
    assert_eq!((again.type_, again.cpumask.clone()), (20, Some(vec![0])), "read once");
    assert_eq!(again.alias("ops").unwrap().unwrap().terms, "event=0x1", "alias read once");
    assert_eq!(sysfs.pmu_cpus("first"), Some(vec![0]));
    // A clone keeps what was read; a fresh value reads the tree as it is now.
    assert_eq!(sysfs.clone().pmu("first").unwrap().type_, 20);
    let fresh = Sysfs::new(dir.path());
    assert_eq!(fresh.pmu_names(), ["first", "second"]);
    let now = fresh.pmu("first").unwrap();
    assert_eq!((now.type_, now.cpumask.clone()), (22, Some(vec![1])));
    assert_eq!(now.alias("ops").unwrap().unwrap().terms, "event=0x2");
}

/// tracefs is looked for in both of its places; without it the error says it is not mounted
/// (a fake root is never mounted on), and a missing tracepoint names the directory.
#[test]
fn tracepoints_are_found_in_either_tracefs_place() {
    use tmetric_runtime::TracefsProblem;
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let sysfs = Sysfs::new(root);
    std::fs::create_dir_all(root.join("kernel/tracing")).unwrap();
    assert_eq!(
        sysfs.tracepoint("sched", "sched_switch"),
        Err(TracefsProblem::NotMounted { mount_failed: None })
    );
    match event::resolve("sched:sched_switch", &sysfs) {
        Err(err @ EventError::Tracepoint { .. }) => {
            let text = err.to_string();
            assert!(text.contains("tracefs is not mounted"), "{text}");
            assert!(text.contains("/sys/kernel/debug/tracing"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // The debugfs place only.
    let dir = root.join("kernel/debug/tracing/events/sched/sched_switch");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("id"), "372\n").unwrap();
    assert_eq!(sysfs.tracepoint("sched", "sched_switch"), Ok(372));
    match event::resolve("sched:sched_switch", &sysfs) {
        Ok(ResolvedEvent::Counter(c)) => {
            assert_eq!((c.attr.type_, c.attr.config), (2, 372));
            assert_eq!(c.kind, EventKind::Tracepoint);
        }
        other => panic!("{other:?}"),
    }
    let missing = event::resolve("sched:no_such", &sysfs).unwrap_err().to_string();
    assert!(missing.contains("no such tracepoint in"), "{missing}");
    assert!(missing.contains("kernel/debug/tracing/events/sched"), "{missing}");
}

/// Globs expand over a fake tracefs as perf's `add_tracepoint_multi_event` and
/// `add_tracepoint_multi_sys` do: in the directory's own order, `enable`, `filter` and the
/// `header_*` files skipped; a system glob keeps the systems that have the tracepoint, and a
/// glob that matches nothing is an error naming where it looked.
#[test]
fn tracepoint_globs_expand_in_the_directorys_order() {
    use tmetric_runtime::TracefsProblem;
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path();
    let events = root.join("kernel/tracing/events");
    let tracepoint = |system: &str, name: &str, id: u64| {
        let dir = events.join(system).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("id"), format!("{id}\n")).unwrap();
    };
    tracepoint("sched", "sched_switch", 10);
    tracepoint("sched", "sched_wakeup", 11);
    tracepoint("sched", "sched_waking", 12);
    tracepoint("block", "block_rq_issue", 20);
    tracepoint("probe_libc", "malloc", 30);
    tracepoint("probe_libc", "sched_switch", 31);
    for file in ["enable", "header_event", "header_page"] {
        std::fs::write(events.join(file), "").unwrap();
    }
    for file in ["enable", "filter"] {
        std::fs::write(events.join("sched").join(file), "").unwrap();
    }
    let sysfs = Sysfs::new(root);
    let order = |dir: &str| -> Vec<String> {
        std::fs::read_dir(events.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect()
    };
    let wak: Vec<(String, String, u64)> = order("sched")
        .into_iter()
        .filter(|n| n.starts_with("sched_wak"))
        .map(|n| {
            let id = if n == "sched_wakeup" { 11 } else { 12 };
            ("sched".to_string(), n, id)
        })
        .collect();
    assert_eq!(sysfs.tracepoints("sched", "sched_wak*").unwrap(), wak);
    assert_eq!(
        sysfs.tracepoints("sched", "sched_wak?ng").unwrap(),
        [("sched".into(), "sched_waking".into(), 12)]
    );
    assert_eq!(
        sysfs.tracepoints("sched", "*").unwrap().len(),
        3,
        "enable and filter are not tracepoints"
    );
    let switch: Vec<u64> =
        sysfs.tracepoints("*", "sched_switch").unwrap().into_iter().map(|t| t.2).collect();
    let systems: Vec<u64> = order("")
        .into_iter()
        .filter_map(|s| match s.as_str() {
            "sched" => Some(10),
            "probe_libc" => Some(31),
            _ => None,
        })
        .collect();
    assert_eq!(switch, systems);
    assert_eq!(sysfs.tracepoints("probe_*", "*").unwrap().len(), 2);
    assert_eq!(
        sysfs.tracepoints("block", "block_rq_issue").unwrap(),
        [("block".into(), "block_rq_issue".into(), 20)]
    );
    match sysfs.tracepoints("sched", "nothing*") {
        Err(TracefsProblem::NoMatch { pattern, dir }) => {
            assert_eq!((pattern.as_str(), dir), ("sched:nothing*", events.join("sched")))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(sysfs.tracepoints("none*", "x"), Err(TracefsProblem::NoMatch { .. })));
    assert!(matches!(sysfs.tracepoints("nosys", "x*"), Err(TracefsProblem::NoTracepoint { .. })));
    // Through the resolver: one event per match, each named `system:name`.
    let list = tmetric_runtime::event::Resolver::new(&sysfs).list("sched:sched_wak*:k").unwrap();
    let names: Vec<&str> =
        list.groups.iter().flat_map(|g| g.events.iter().map(|e| e.event.name())).collect();
    let expected: Vec<String> = wak.iter().map(|t| format!("sched:{}", t.1)).collect();
    assert_eq!(names, expected);
}

/// perf's `S0-D0-C1` places from the topology files: cpu0 and cpu2 are the two threads of
/// core 0 (`thread_siblings_list` 0,2), cpu1 and cpu3 those of core 1; a CPU without files
/// is at 0.
#[test]
fn cpu_places_come_from_the_topology_files() {
    let sysfs = tree();
    let places: Vec<(u32, u32, u32)> = (0..4).map(|c| sysfs.cpu_place(c)).collect();
    assert_eq!(places, [(0, 0, 0), (0, 0, 1), (0, 0, 0), (0, 0, 1)]);
    assert_eq!(sysfs.cpu_place(99), (0, 0, 0));
}
