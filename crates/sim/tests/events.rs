//! Event lists resolved on simulated machines' sysfs trees, as perf 6.12 resolves them:
//! legacy events on every core PMU of Alder Lake with the PMU type in the config's upper half,
//! `--cputype`'s filter, perf's regrouping (groups split per PMU, `slots` first, lone topdown
//! events gathered), raw and numeric events, format terms, modifiers' exclude bits, vendor
//! events through a table, and errors that point at the bad spot. Expected configs are worked
//! out by hand from the trees' `format/` files and the kernel's `PERF_TYPE_*` numbers.

use tmetric_runtime::event::{
    EventError, EventKind, EventList, EventTables, PmuFacts, ResolvedEvent, Resolver, TableEvent,
    Topdown,
};
use tmetric_runtime::sys::{TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW, TYPE_SOFTWARE};
use tmetric_runtime::{CounterEvent, Sysfs};
use tmetric_sim::Machine;

/// A simulated machine's sysfs tree in a private temporary directory, removed when dropped.
struct Tree {
    _dir: tempfile::TempDir,
    sysfs: Sysfs,
}

impl Tree {
    fn new(machine: &str) -> Tree {
        let dir = tempfile::tempdir().expect("a private directory");
        let m = Machine::named(machine).expect("a simulated machine");
        m.write_sysfs(&dir.path().join("sys"), &dir.path().join("proc"))
            .expect("the tree is written");
        let sysfs = Sysfs::new(dir.path().join("sys"));
        Tree { _dir: dir, sysfs }
    }

    fn type_of(&self, pmu: &str) -> u64 {
        u64::from(self.sysfs.pmu(pmu).unwrap().type_)
    }
}

fn counters(list: &EventList) -> Vec<CounterEvent> {
    list.groups
        .iter()
        .flat_map(|g| &g.events)
        .filter_map(|e| match &e.event {
            ResolvedEvent::Counter(c) => Some(c.clone()),
            ResolvedEvent::Tool(_) => None,
        })
        .collect()
}

fn names(list: &EventList) -> Vec<Vec<String>> {
    list.groups
        .iter()
        .map(|g| g.events.iter().map(|e| e.event.name().to_string()).collect())
        .collect()
}

#[test]
fn legacy_events_open_on_every_core_pmu_of_a_hybrid_with_its_type() {
    let adl = Tree::new("alderlake");
    let r = Resolver::new(&adl.sysfs);
    assert_eq!(r.core_pmus(), ["cpu_atom", "cpu_core"]);
    let (atom, core) = (adl.type_of("cpu_atom"), adl.type_of("cpu_core"));
    let list = r.list("cycles,L1-dcache-load-misses,cs").unwrap();
    let c = counters(&list);
    let got: Vec<(&str, u32, u64)> =
        c.iter().map(|e| (e.name.as_str(), e.attr.type_, e.attr.config)).collect();
    assert_eq!(
        got,
        [
            ("cpu_atom/cycles/", TYPE_HARDWARE, atom << 32),
            ("cpu_core/cycles/", TYPE_HARDWARE, core << 32),
            ("cpu_atom/L1-dcache-load-misses/", TYPE_HW_CACHE, 1 << 16 | atom << 32),
            ("cpu_core/L1-dcache-load-misses/", TYPE_HW_CACHE, 1 << 16 | core << 32),
            ("cs", TYPE_SOFTWARE, 3),
        ]
    );
    // Each opens only on the CPUs of its core type (the PMU's `cpus`).
    assert_eq!(c[0].cpus.as_deref(), Some(&[4, 5, 6, 7][..]));
    assert_eq!(c[1].cpus.as_deref(), Some(&[0, 1, 2, 3][..]));
    assert!(list.groups.iter().all(|g| !g.grouped));
    // An explicit core PMU: the legacy event with that PMU's type, unless the PMU has an
    // event of that name, which perf prefers (the simulated tree has a `cycles` alias; the
    // 6.12 kernel's has only `cpu-cycles`).
    let one = counters(
        &r.list("cpu_core/stalled-cycles-frontend/,cpu_atom/L1-dcache-loads/,cpu_core/cycles/")
            .unwrap(),
    );
    assert_eq!((one[0].attr.type_, one[0].attr.config), (TYPE_HARDWARE, 7 | core << 32));
    assert_eq!((one[1].attr.type_, one[1].attr.config), (TYPE_HW_CACHE, atom << 32));
    assert_eq!(one[0].name, "cpu_core/stalled-cycles-frontend/");
    assert_eq!(
        (one[2].name.as_str(), one[2].attr.type_, one[2].attr.config),
        ("cpu_core/cycles/", 4, 0x3c)
    );
    // A lone event (`single`) keeps perf's older meaning: no PMU type, the kernel picks.
    let ResolvedEvent::Counter(plain) = r.single("cycles").unwrap() else { panic!() };
    assert_eq!((plain.attr.config, plain.name.as_str()), (0, "cycles"));
}

#[test]
fn cputype_chooses_one_core_pmu_and_bogus_types_have_none() {
    let adl = Tree::new("alderlake");
    assert_eq!(Resolver::cputype_pmu(&adl.sysfs, "atom").as_deref(), Some("cpu_atom"));
    assert_eq!(Resolver::cputype_pmu(&adl.sysfs, "cpu_core").as_deref(), Some("cpu_core"));
    assert_eq!(Resolver::cputype_pmu(&adl.sysfs, "core").as_deref(), Some("cpu_core"));
    assert_eq!(Resolver::cputype_pmu(&adl.sysfs, "cpu"), None);
    assert_eq!(Resolver::cputype_pmu(&adl.sysfs, "123"), None);
    let r = Resolver::new(&adl.sysfs).with_pmu_filter(Some("cpu_atom"));
    let list = r.list("instructions,cpu_core/cycles/,cs").unwrap();
    assert_eq!(names(&list), [["cpu_atom/instructions/"], ["cpu_core/cycles/"], ["cs"]]);
    let spr = Tree::new("sapphirerapids");
    assert_eq!(Resolver::cputype_pmu(&spr.sysfs, "cpu").as_deref(), Some("cpu"));
    assert_eq!(Resolver::cputype_pmu(&spr.sysfs, "core"), None);
    // Not hybrid: legacy events carry no PMU type, with or without the filter.
    let r = Resolver::new(&spr.sysfs).with_pmu_filter(Some("cpu"));
    let c = counters(&r.list("instructions").unwrap());
    assert_eq!(
        (c[0].attr.type_, c[0].attr.config, c[0].name.as_str()),
        (TYPE_HARDWARE, 1, "instructions")
    );
    // A bare name the filter excludes says where it is.
    let err = r.list("tsc").unwrap_err();
    assert!(matches!(err.inner(), EventError::Filtered { pmus, .. } if pmus == "msr"), "{err}");
}

#[test]
fn groups_are_split_per_pmu_and_slots_leads_the_topdown_events() {
    let adl = Tree::new("alderlake");
    let list = Resolver::new(&adl.sysfs).list("{cycles,instructions}:u").unwrap();
    assert_eq!(
        names(&list),
        [
            ["cpu_atom/cycles/", "cpu_atom/instructions/"],
            ["cpu_core/cycles/", "cpu_core/instructions/"]
        ]
    );
    assert!(list.groups.iter().all(|g| g.grouped));
    assert!(list.warnings.iter().any(|w| w.contains("regrouped")), "{:?}", list.warnings);
    for c in counters(&list) {
        assert!(c.attr.exclude_kernel && c.attr.exclude_hv && !c.attr.exclude_user, "{c:?}");
    }

    let spr = Tree::new("sapphirerapids");
    let r = Resolver::new(&spr.sysfs);
    let reordered = r.list("{topdown-retiring,slots}").unwrap();
    assert_eq!(names(&reordered), [["slots", "topdown-retiring"]]);
    let roles: Vec<Option<Topdown>> =
        reordered.groups[0].events.iter().map(|e| e.topdown).collect();
    assert_eq!(roles, [Some(Topdown::Slots), Some(Topdown::Metric)]);
    assert!(!reordered.warnings.is_empty());
    let mixed = r.list("{cycles,topdown-be-bound,slots,instructions}").unwrap();
    assert_eq!(names(&mixed), [["slots", "topdown-be-bound", "cycles", "instructions"]]);
    // Lone topdown events are gathered into one group at the first one's place.
    let gathered = r.list("cs,slots,cycles,topdown-retiring").unwrap();
    assert_eq!(names(&gathered), [vec!["cs"], vec!["slots", "topdown-retiring"], vec!["cycles"]]);
    assert!(gathered.groups[1].grouped && !gathered.groups[2].grouped);
    // Alone it stays alone (the kernel refuses it; the errno explanation says why).
    let alone = r.list("topdown-retiring").unwrap();
    assert_eq!(names(&alone), [["topdown-retiring"]]);
    assert!(!alone.groups[0].grouped && alone.warnings.is_empty());
    // Weak groups are marked; a weak lone event is refused as perf 6.12 does.
    assert!(r.list("{cycles,instructions}:W").unwrap().groups[0].weak);
    let err = r.list("cycles:W").unwrap_err().to_string();
    assert!(err.contains("`{a,b}:W`") && err.ends_with("\n  cycles:W\n         ^"), "{err}");
    // The same reordering on a machine without PERF_METRICS does nothing.
    let skx = Tree::new("skylakex");
    let plain = Resolver::new(&skx.sysfs).list("{cycles,topdown-total-slots}").unwrap();
    assert_eq!(names(&plain), [["cycles", "topdown-total-slots"]]);
    assert!(plain.warnings.is_empty());
}

#[test]
fn raw_numeric_and_format_terms_give_perfs_configs() {
    let spr = Tree::new("sapphirerapids");
    let r = Resolver::new(&spr.sysfs);
    let list = r
        .list("r100003c,r0x1a8,4:0x3c,cpu/event=0x3c,umask=0x1,cmask=2,inv,edge/,cpu/r1a8/,cycles/name=c/,cpu/config=0x1234,name=mine/k")
        .unwrap();
    let c = counters(&list);
    let got: Vec<(&str, u32, u64)> =
        c.iter().map(|e| (e.name.as_str(), e.attr.type_, e.attr.config)).collect();
    assert_eq!(
        got,
        [
            ("r100003c", TYPE_RAW, 0x100003c),
            ("r0x1a8", TYPE_RAW, 0x1a8),
            ("4:0x3c", TYPE_RAW, 0x3c),
            (
                "cpu/event=0x3c,umask=0x1,cmask=2,inv,edge/",
                4,
                0x3c | 1 << 8 | 1 << 18 | 1 << 23 | 2 << 24
            ),
            ("cpu/r1a8/", 4, 0x1a8),
            ("c", TYPE_HARDWARE, 0),
            ("mine", 4, 0x1234),
        ]
    );
    assert!(c[6].attr.exclude_user && !c[6].attr.exclude_kernel);
    assert_eq!(c[0].kind, EventKind::Pmu("cpu".into()));
    // A PMU named without its instance number is every instance (perf's wildcard), named
    // as written (perf merges them into one line), each box with its own name for `-A`.
    let boxes = r.list("uncore_imc/event=0x5,umask=0xcf/,uncore_imc/event=0x4/").unwrap();
    assert_eq!(
        names(&boxes),
        [
            ["uncore_imc/event=0x5,umask=0xcf/"],
            ["uncore_imc/event=0x5,umask=0xcf/"],
            ["uncore_imc/event=0x4/"],
            ["uncore_imc/event=0x4/"]
        ]
    );
    let each: Vec<(String, usize)> = boxes
        .groups
        .iter()
        .flat_map(|g| &g.events)
        .map(|e| e.uncore_box.clone().map(|b| (b.name, b.origin)).expect("a box"))
        .collect();
    assert_eq!(
        each,
        [
            ("uncore_imc_0/event=0x5,umask=0xcf/".to_string(), 0),
            ("uncore_imc_1/event=0x5,umask=0xcf/".to_string(), 0),
            ("uncore_imc_0/event=0x4/".to_string(), 1),
            ("uncore_imc_1/event=0x4/".to_string(), 1)
        ]
    );
    // One box named exactly is no box of several.
    let one = r.list("uncore_imc_1/event=0x5/").unwrap();
    assert_eq!(names(&one), [["uncore_imc_1/event=0x5/"]]);
    assert!(one.groups[0].events[0].uncore_box.is_none());
    assert!(boxes.warnings.is_empty(), "a PMU wildcard is not a regrouping");
    // Aliases carry their encoding; the topdown role comes from it.
    let slots = counters(&r.list("cpu/slots/").unwrap());
    assert_eq!(slots[0].attr.config, 0x400);
}

#[test]
fn modifiers_set_perfs_exclude_bits() {
    let spr = Tree::new("sapphirerapids");
    let r = Resolver::new(&spr.sysfs);
    let c = counters(&r.list("cycles:k,cycles:G,cycles:H,cycles:uh,cycles:I,cycles:D,cycles:e,cycles:ppp,{cycles:k,instructions}:u,{cs,faults}:D").unwrap());
    let k = &c[0].attr;
    assert!(k.exclude_user && k.exclude_hv && !k.exclude_kernel && !k.exclude_guest);
    assert!(c[1].attr.exclude_host && !c[1].attr.exclude_guest);
    assert!(c[2].attr.exclude_guest && !c[2].attr.exclude_host);
    let uh = &c[3].attr;
    assert!(!uh.exclude_user && !uh.exclude_hv && uh.exclude_kernel && uh.exclude_guest);
    assert!(c[4].attr.exclude_idle);
    assert!(c[5].attr.pinned && c[6].attr.exclusive);
    assert_eq!(c[7].attr.precise_ip, 3);
    // A group modifier adds to the member's own: `cycles:k` in `{...}:u` counts both modes.
    assert!(!c[8].attr.exclude_user && !c[8].attr.exclude_kernel && c[8].attr.exclude_hv);
    assert!(!c[9].attr.exclude_user && c[9].attr.exclude_kernel);
    // `D` on a group pins its leader only.
    assert!(c[10].attr.pinned && !c[11].attr.pinned);
    let list = r.list("cycles:b,cycles:S").unwrap();
    assert_eq!(list.warnings.len(), 2, "{:?}", list.warnings);
}

/// A vendor table with two events: a core one for any core PMU and an uncore one.
struct Table;

impl EventTables for Table {
    fn find(&self, pmu: &PmuFacts<'_>, name: &str) -> Option<TableEvent> {
        let (unit, terms) = match name.to_ascii_uppercase().as_str() {
            "INST_RETIRED.ANY" => ("default_core", "event=0xc0,period=2000003"),
            "UNC_M_CAS_COUNT.RD" => ("uncore_imc", "event=0x5,umask=0xcf"),
            _ => return None,
        };
        tmetric_runtime::event::resolve::table_pmu_matches(unit, pmu).then(|| TableEvent {
            name: name.to_string(),
            terms: terms.to_string(),
            unit: None,
            scale: None,
        })
    }
}

#[test]
fn vendor_events_resolve_bare_and_inside_a_pmu() {
    let spr = Tree::new("sapphirerapids");
    let r = Resolver::new(&spr.sysfs).with_tables(&Table);
    let c = counters(
        &r.list("INST_RETIRED.ANY,cpu/INST_RETIRED.ANY/,INST_RETIRED.ANY/cmask=1/u").unwrap(),
    );
    assert_eq!(
        (c[0].name.as_str(), c[0].attr.type_, c[0].attr.config),
        ("INST_RETIRED.ANY", 4, 0xc0)
    );
    assert_eq!((c[1].name.as_str(), c[1].attr.config), ("cpu/INST_RETIRED.ANY/", 0xc0));
    assert_eq!(c[2].attr.config, 0xc0 | 1 << 24);
    assert!(c[2].attr.exclude_kernel);
    let boxes = r.list("UNC_M_CAS_COUNT.RD").unwrap();
    assert_eq!(names(&boxes), [["UNC_M_CAS_COUNT.RD"], ["UNC_M_CAS_COUNT.RD"]]);
    let adl = Tree::new("alderlake");
    let hybrid = Resolver::new(&adl.sysfs).with_tables(&Table);
    let list = hybrid.list("inst_retired.any").unwrap();
    assert_eq!(names(&list), [["cpu_atom/inst_retired.any/"], ["cpu_core/inst_retired.any/"]]);
    // Without the table the name is unknown, and the error says what was expected.
    let err = Resolver::new(&spr.sysfs).list("cs,INST_RETIRED.ANY").unwrap_err();
    assert!(matches!(err.inner(), EventError::Unknown { tables: false, .. }), "{err}");
    assert!(err.to_string().ends_with("  cs,INST_RETIRED.ANY\n     ^^^^^^^^^^^^^^^^"), "{err}");
}

#[test]
fn errors_name_the_event_and_point_at_the_bad_spot() {
    let spr = Tree::new("sapphirerapids");
    let r = Resolver::new(&spr.sysfs);
    let at = |list: &str| {
        let err = r.list(list).unwrap_err();
        let EventError::Located { span, .. } = &err else { panic!("{list}: {err}") };
        (span.clone(), err.to_string())
    };
    let (span, text) = at("cycles,cpu/event=0x3c,frob=1/");
    assert_eq!(span, 22..28);
    assert!(text.contains("PMU `cpu` has no term `frob`") && text.contains("umask"), "{text}");
    let (span, text) = at("cpu/umask=0x100/");
    assert_eq!(span, 4..15);
    assert!(text.contains("8 bits"), "{text}");
    let (span, text) = at("cs,uncore_imc_7/event=1/");
    assert_eq!(span, 3..15);
    assert!(text.contains("no PMU `uncore_imc_7`"), "{text}");
    let (span, text) = at("cycles:ukx");
    assert_eq!(span, 9..10);
    assert!(text.contains("unknown modifier `x`"), "{text}");
    let (_, text) = at("L1-icache-stores");
    assert!(text.contains("no store operation"), "{text}");
    let (span, text) = at("cycles/umask=1/");
    assert_eq!(span, 7..14);
    assert!(text.contains("inside `pmu/.../`"), "{text}");
    let (_, text) = at("cpu/event=1,call-graph=dwarf/");
    assert!(text.contains("sampling term"), "{text}");
}
