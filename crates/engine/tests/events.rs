//! User events through the engine on simulated machines: the catalogue's vendor events as the
//! resolver's tables (core events on `cpu`, both hybrid core PMUs, uncore events on every box),
//! `--cputype`'s messages, user groups whose topdown events stay behind `slots` when the
//! simulated kernel refuses the group, and the split note's wording.

use std::path::PathBuf;

use tmetric_engine::events::cputype_pmu;
use tmetric_engine::{Host, Pick, Plan, PlanOptions};
use tmetric_runtime::event::{EventTables, PmuFacts, Resolver};
use tmetric_runtime::{CounterSet, Environment, Errno, Split, Sysfs, Target};
use tmetric_sim::{Machine as SimMachine, SimKernel};

/// `EINVAL`, the errno of a group that does not fit.
const EINVAL: i32 = 22;

/// A simulated machine's trees in a fresh directory, removed when dropped.
struct Tree {
    dir: PathBuf,
    _scratch: tempfile::TempDir,
    name: &'static str,
    sysfs: Sysfs,
}

impl Tree {
    fn new(name: &'static str) -> Tree {
        let scratch = tempfile::Builder::new()
            .prefix(&format!("tmetric-engine-events-{name}-"))
            .tempdir()
            .expect("a private directory");
        let dir = scratch.path().to_path_buf();
        SimMachine::named(name)
            .expect("a simulated machine")
            .write_sysfs(&dir.join("sys"), &dir.join("proc"))
            .expect("trees written");
        let sysfs = Sysfs::new(dir.join("sys"));
        Tree { dir, _scratch: scratch, name, sysfs }
    }

    fn proc_root(&self) -> PathBuf {
        self.dir.join("proc")
    }
}

#[test]
fn the_machines_catalogue_model_supplies_vendor_events() {
    let spr = Tree::new("sapphirerapids");
    let tables = Host::probe(&spr.sysfs, &spr.proc_root(), None).tables(None);
    assert_eq!(tables.model().map(|m| m.path()).as_deref(), Some("x86/sapphirerapids"));
    let core = PmuFacts { name: "cpu", core: true, uncore: false };
    let inst = tables.find(&core, "inst_retired.any").expect("a core event");
    assert_eq!(
        (inst.name.as_str(), inst.terms.as_str()),
        ("INST_RETIRED.ANY", "event=0xc0,period=2000003")
    );
    let imc0 = PmuFacts { name: "uncore_imc_0", core: false, uncore: true };
    assert!(tables.find(&imc0, "UNC_M_CAS_COUNT.RD").is_some());
    assert!(
        tables.find(&core, "UNC_M_CAS_COUNT.RD").is_none(),
        "an uncore event is not a core one"
    );
    let cha = PmuFacts { name: "uncore_cha_1", core: false, uncore: true };
    assert!(tables.find(&cha, "UNC_M_CAS_COUNT.RD").is_none());

    let r = Resolver::new(&spr.sysfs).with_tables(&tables);
    let list = r.list("INST_RETIRED.ANY,UNC_M_CAS_COUNT.RD").unwrap();
    let names: Vec<&str> = list.groups.iter().map(|g| g.events[0].event.name()).collect();
    assert_eq!(names, ["INST_RETIRED.ANY", "UNC_M_CAS_COUNT.RD", "UNC_M_CAS_COUNT.RD"]);
    let boxes: Vec<Option<String>> = list
        .groups
        .iter()
        .map(|g| g.events[0].uncore_box.as_ref().map(|b| b.name.clone()))
        .collect();
    assert_eq!(
        boxes,
        [
            None,
            Some("UNC_M_CAS_COUNT.RD [uncore_imc_0]".into()),
            Some("UNC_M_CAS_COUNT.RD [uncore_imc_1]".into())
        ]
    );

    let adl = Tree::new("alderlake");
    let tables = Host::probe(&adl.sysfs, &adl.proc_root(), None).tables(None);
    let r = Resolver::new(&adl.sysfs).with_tables(&tables);
    let list = r.list("INST_RETIRED.ANY").unwrap();
    let names: Vec<&str> = list.groups.iter().map(|g| g.events[0].event.name()).collect();
    assert_eq!(names, ["cpu_atom/INST_RETIRED.ANY/", "cpu_core/INST_RETIRED.ANY/"]);
    // `--cputype atom` keeps the E-core's only.
    let atom = cputype_pmu(&adl.sysfs, "atom").unwrap();
    let only = Resolver::new(&adl.sysfs).with_tables(&tables).with_pmu_filter(Some(&atom));
    assert_eq!(only.list("INST_RETIRED.ANY").unwrap().groups.len(), 1);
    let err = cputype_pmu(&adl.sysfs, "123").unwrap_err();
    assert_eq!(err.core_pmus, ["cpu_atom", "cpu_core"]);
    assert_eq!(
        err.to_string(),
        "--cputype 123 is not supported: this machine's core PMUs are cpu_atom, cpu_core \
         (expected one of `atom`, `cpu_atom`, `core`, `cpu_core`)"
    );
    // As any engine error, with the kind kept.
    let any: tmetric_engine::Error = err.into();
    assert!(matches!(any, tmetric_engine::Error::CpuType(ref e) if e.text == "123"));
}

/// `-e '{slots,topdown-retiring,topdown-bad-spec,9 GP events}' -a` on Sapphire Rapids: the
/// simulated kernel refuses the group (8 GP counters), the runtime splits it, and the topdown
/// events are opened behind `slots` instead of alone, where the kernel would refuse them.
#[test]
fn a_refused_user_group_keeps_its_topdown_events_behind_slots() {
    let spr = Tree::new("sapphirerapids");
    let proc_root = spr.proc_root();
    let env = Environment::probe(&spr.sysfs, &proc_root);
    let list = "{topdown-retiring,slots,topdown-bad-spec,cpu/event=0xd1,umask=0x1/,cpu/event=0xd1,umask=0x2/,\
        cpu/event=0xd1,umask=0x4/,cpu/event=0xd1,umask=0x8/,cpu/event=0xd1,umask=0x10/,cpu/event=0xd1,umask=0x20/,\
        cpu/event=0xc4,umask=0x0/,cpu/event=0xc5,umask=0x0/,cpu/event=0xc2,umask=0x2/}";
    let mut plan = Plan::new(Host::probe(&spr.sysfs, &proc_root, None).literals(true, None));
    plan.add_event_lists(&[list.to_string()], &Resolver::new(&spr.sysfs)).unwrap();
    assert_eq!(plan.groups().len(), 1);
    let names: Vec<&str> =
        plan.groups()[0].iter().map(|&s| plan.specs()[s].name.as_str()).collect();
    assert_eq!(&names[..3], ["slots", "topdown-retiring", "topdown-bad-spec"], "slots leads");
    let sticky: Vec<bool> = plan.groups()[0].iter().map(|&s| plan.sticky()[s]).collect();
    assert_eq!(sticky.iter().filter(|&&s| s).count(), 3);
    assert!(sticky[..3].iter().all(|&s| s));
    assert!(
        plan.warnings().iter().any(|w| w.to_string().contains("regrouped")),
        "{:?}",
        plan.warnings()
    );

    let kernel = SimKernel::manual(SimMachine::named(spr.name).unwrap());
    let cpus = spr.sysfs.online_cpus().unwrap();
    let mut counters = CounterSet::open_with(
        kernel.clone(),
        plan.specs().to_vec(),
        plan.groups(),
        plan.sticky(),
        Target::Cpus(cpus),
    )
    .unwrap();
    let failures: Vec<String> = (0..plan.specs().len())
        .filter_map(|s| {
            counters.failure(s).map(|f| format!("{}: {}", plan.specs()[s].name, f.errno))
        })
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
    let [split] = counters.splits() else { panic!("one split: {:?}", counters.splits()) };
    let split = split.clone();
    assert_eq!(split.kept.len(), 3);
    counters.enable().unwrap();
    kernel.advance(10_000_000);
    counters.disable().unwrap();
    let snapshot = counters.read().unwrap();
    for &s in &plan.groups()[0][..3] {
        assert!(
            snapshot.aggregate(s).is_some_and(|a| a.counted() && a.value > 0),
            "{}",
            plan.specs()[s].name
        );
    }
    let group = plan.split_note(&split);
    let tmetric_engine::Reopened::Split { kept, alone } = &group.reopened else {
        panic!("split behind slots: {group:?}")
    };
    assert_eq!(kept, &["slots", "topdown-retiring", "topdown-bad-spec"]);
    assert_eq!(alone.len(), 9);
    assert_eq!(group.events.len(), 12);
    assert_eq!(group.errno, EINVAL);
    // Worded by its Display, and read back from that text as the same data.
    let note = group.to_string();
    assert_eq!(tmetric_engine::RefusedGroup::from_text(&note).as_ref(), Some(&group));
    assert!(
        note.contains(
            "slots, topdown-retiring, topdown-bad-spec stayed together behind their `slots` leader"
        ),
        "{note}"
    );
    assert!(!note.contains("multiplexed") && !note.contains("out of range"), "{note}");
    let _ = env;
}

/// The split note mentions multiplexed metrics only when metrics read the split events.
#[test]
fn split_notes_mention_metrics_only_when_there_are_some() {
    let spr = Tree::new("sapphirerapids");
    let proc_root = spr.proc_root();
    let machine = Host::probe(&spr.sysfs, &proc_root, Some("sapphirerapids"));
    let model = machine.model().unwrap();
    let mut plan = Plan::new(machine.literals(true, None));
    plan.add_event_lists(&["{cycles,instructions}".to_string()], &Resolver::new(&spr.sysfs))
        .unwrap();
    let user = Split { events: plan.groups()[0].clone(), errno: Errno(EINVAL), kept: vec![] };
    let group = plan.split_note(&user);
    assert_eq!(group.reopened, tmetric_engine::Reopened::Alone);
    assert!(group.multiplexed.is_empty());
    let note = group.to_string();
    assert_eq!(tmetric_engine::RefusedGroup::from_text(&note).as_ref(), Some(&group));
    assert!(
        note.starts_with("the kernel refused the group {cycles,instructions} (EINVAL"),
        "{note}"
    );
    assert!(note.ends_with("so its events were counted alone"), "{note}");
    let ipc =
        model.metrics().position(|m| model.str(m.name) == "tma_info_thread_ipc").expect("ipc");
    plan.add_metrics(
        &[Pick { model, metric: ipc, item: "tma_info_thread_ipc".into() }],
        &machine,
        &PlanOptions { system_wide: true, ..PlanOptions::default() },
        true,
    );
    let metric_group = plan.groups().len() - 1;
    let split =
        Split { events: plan.groups()[metric_group].clone(), errno: Errno(EINVAL), kept: vec![] };
    let group = plan.split_note(&split);
    assert_eq!(group.multiplexed, ["tma_info_thread_ipc"]);
    let note = group.to_string();
    assert_eq!(tmetric_engine::RefusedGroup::from_text(&note).as_ref(), Some(&group));
    assert!(
        note.contains(
            "tma_info_thread_ipc now read counts from different time slices (multiplexed)"
        ),
        "{note}"
    );
}

/// `-e` is read by the output contract in use, the same way for every front end
/// (`events::resolver`): perf 7.x's tool PMU (`tool/num_cpus/`, a bare `smt_on`) under perf
/// 7.2's, an unknown PMU or event under perf 6.12's.
#[test]
fn the_contracts_reading_of_tool_events_is_one_function() {
    use tmetric_engine::contract;
    use tmetric_runtime::event::{ResolvedEvent, ToolEvent};
    let spr = Tree::new("sapphirerapids");
    let tables = Host::probe(&spr.sysfs, &spr.proc_root(), None).tables(None);
    let v7 = tmetric_engine::events::resolver(&spr.sysfs, &tables, contract::of("7.2"));
    let v6 = tmetric_engine::events::resolver(&spr.sysfs, &tables, contract::of("6.12"));
    for text in ["tool/num_cpus/", "smt_on"] {
        let list = v7.list(text).unwrap_or_else(|e| panic!("{text} under 7.2: {e}"));
        let event = &list.groups[0].events[0].event;
        assert!(matches!(event, ResolvedEvent::Tool(ToolEvent::Fact(_))), "{text}: {event:?}");
        assert!(v6.list(text).is_err(), "{text} is no event of perf 6.12");
    }
    // Both read the machine's counters alike.
    for r in [&v6, &v7] {
        let list = r.list("cycles,INST_RETIRED.ANY").unwrap();
        assert!(list.groups.iter().all(|g| matches!(g.events[0].event, ResolvedEvent::Counter(_))));
    }
}
