//! Scheduling vectors: every case of `tests/vectors/schedule/*.toml` names a PMU model, the
//! events or metrics requested and the outcome the kernel's rules and perf's metric grouping
//! give, and is run through the scheduler (`schedule::schedule`, or `plan::plan_offline` and
//! `plan::plan_on_machine` for catalogue metrics). Every mismatch of every case is collected
//! and reported by file and case name, then the test fails once.
//!
//! The format is described in `tests/vectors/README.md`. A case marked `disagrees = "..."`
//! records a known disagreement between tmetric and the kernel or perf: it must still
//! mismatch (the runner fails when it starts to agree, so the marker is removed with the fix).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tmetric_catalog::{CounterMask, Model};
use tmetric_engine::plan::{self, NoGroup, OfflinePlan};
use tmetric_engine::pmu::{self, CountSource, MachineFacts};
use tmetric_engine::schedule::{self, Request, SchedEvent, SchedMetric, Schedule, Strategy};
use tmetric_engine::{
    Demand, Pick, Placement, PlanOptions, PmuCounters, PmuModel, Select, Slot, Vendor,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    case: Vec<Case>,
}

/// One case: a PMU model, a request, the expected outcome.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    /// The kernel or perf source the expectation comes from.
    source: String,
    /// A known disagreement of tmetric with the kernel or perf, and why.
    disagrees: Option<String>,
    /// A catalogue model: its PMUs as `PmuModel::for_model` assumes them.
    model: Option<String>,
    /// A simulated machine (`tmetric_sim::Machine::names()`): its sysfs, probed.
    sim: Option<String>,
    /// The NMI watchdog (default off for explicit PMUs and models, the machine's for `sim`).
    nmi_watchdog: Option<bool>,
    /// SMT (default on for models; a simulated machine has its own).
    smt: Option<bool>,
    /// Explicit PMUs, as `PmuModel` takes them.
    #[serde(default)]
    pmu: Vec<PmuSpec>,
    /// Explicit events.
    #[serde(default)]
    event: Vec<EventSpec>,
    /// Explicit metrics over the events.
    #[serde(default)]
    metric: Vec<MetricSpec>,
    /// `-M` items selecting catalogue metrics of `model` or the machine's model.
    #[serde(default)]
    select: Vec<String>,
    #[serde(default)]
    metric_no_group: bool,
    #[serde(default)]
    metric_no_threshold: bool,
    #[serde(default)]
    system_wide: bool,
    /// tmetric's schedule.
    #[serde(default)]
    expect: Expect,
    /// perf 6.12's strategy on the same request.
    perf: Option<Expect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PmuSpec {
    name: String,
    vendor: String,
    core: Option<bool>,
    general: u8,
    #[serde(default)]
    fixed: u8,
    #[serde(default)]
    fixed_reserved: Vec<u8>,
    #[serde(default)]
    metric_events: u8,
    #[serde(default)]
    cycle_counter: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventSpec {
    /// The name groups are written with (defaults to `kernel` or `vendor_event`).
    name: Option<String>,
    /// The PMU (default: the first core PMU).
    pmu: Option<String>,
    /// Takes no counter (software, msr, tool events).
    #[serde(default)]
    software: bool,
    /// A kernel-named event (`cycles`, `slots`, `topdown-retiring`): `pmu::named_demand`.
    kernel: Option<String>,
    /// A perf term string: `pmu::event_demand` with `terms` and the JSON `counter` list.
    encoding: Option<String>,
    #[serde(default)]
    terms: String,
    counter: Option<String>,
    /// A JSON event of the case's model: its encoding and counters from the catalogue.
    vendor_event: Option<String>,
    /// An explicit demand: general and fixed counters allowed.
    general: Option<Vec<u8>>,
    #[serde(default)]
    fixed: Vec<u8>,
    #[serde(default)]
    cycle_counter: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricSpec {
    name: String,
    events: Vec<String>,
    #[serde(default)]
    threshold_events: Vec<String>,
    #[serde(default = "yes")]
    grouped: bool,
    pack: Option<bool>,
}

fn yes() -> bool {
    true
}

/// The outcome; every field is optional and only what is given is checked.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Expect {
    /// Every hardware group, leader first (`*` when any member may lead); members after the
    /// leader compare as a set, and groups in any order.
    groups: Option<Vec<Vec<String>>>,
    /// Events opened alone (perf's ungrouped events and broken weak groups).
    singles: Option<Vec<String>>,
    /// Time slices of the busiest PMU.
    slices: Option<usize>,
    #[serde(default)]
    slices_per_pmu: BTreeMap<String, usize>,
    /// The lower bound on slices of the busiest PMU.
    lower_bound: Option<usize>,
    /// Per metric: `together`, `spread[:split|ungrouped|alone]`,
    /// `impossible[:no_perf_metrics|fixed_taken|no_counter]`, `no_counters`.
    #[serde(default)]
    placement: BTreeMap<String, String>,
    /// Per catalogue metric: perf's grouping decision: `grouped`, `metric_no_group`,
    /// `metricgroup_no_group`, `no_group_events`, `nmi`, `smt`.
    #[serde(default)]
    grouping: BTreeMap<String, String>,
    /// Per event: the counter of its first group (`gp`, `gpN`, `fixedN`, `cycle`, `metric`).
    #[serde(default)]
    counter: BTreeMap<String, String>,
    /// Per PMU: its counters after the machine's adjustments.
    #[serde(default)]
    pmu: BTreeMap<String, PmuExpect>,
    /// perf's strategy: the event lists it parses, exactly as `perf stat -vv` prints them
    /// (`Parsing metric events '...'`), in order.
    lists: Option<Vec<String>>,
    /// perf's strategy: what it opens, in the order the kernel rotates it: each group's
    /// events leader first, a lone event as a group of one.
    opens: Option<Vec<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PmuExpect {
    general: Option<u8>,
    fixed: Option<u8>,
    fixed_reserved: Option<Vec<u8>>,
    metric_events: Option<u8>,
    cycle_counter: Option<bool>,
    capacity: Option<usize>,
    /// `Adjustment` variants by name.
    adjustments: Option<Vec<String>>,
}

/// A case's request planned: the PMUs, the request, both strategies' schedules, and perf's
/// grouping decision per metric (catalogue metrics only).
struct Planned {
    pmus: PmuModel,
    request: Request,
    tmetric: Schedule,
    perf: Schedule,
    lower_bound: Vec<usize>,
    grouping: Vec<Option<NoGroup>>,
    /// Per metric of the request: the name expectations use.
    keys: Vec<String>,
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/schedule")
}

/// Simulated machines' trees, written once per test run in a private directory.
struct SimTrees {
    dir: tempfile::TempDir,
    written: Vec<String>,
}

impl SimTrees {
    fn root(&mut self, name: &str, watchdog: Option<bool>) -> Result<PathBuf, String> {
        let key = format!("{name}-{watchdog:?}");
        let root = self.dir.path().join(&key);
        if !self.written.contains(&key) {
            let mut machine = tmetric_sim::Machine::named(name).ok_or_else(|| {
                format!("no simulated machine `{name}`; known: {:?}", tmetric_sim::Machine::names())
            })?;
            if let Some(on) = watchdog {
                machine = machine.with_nmi_watchdog(on);
            }
            machine
                .write_sysfs(&root.join("sys"), &root.join("proc"))
                .map_err(|e| format!("writing {name}'s tree: {e}"))?;
            self.written.push(key);
        }
        Ok(root)
    }
}

fn vendor(name: &str) -> Result<Vendor, String> {
    Ok(match name {
        "intel" => Vendor::Intel,
        "amd" => Vendor::Amd,
        "arm" => Vendor::Arm,
        "other" => Vendor::Other,
        _ => return Err(format!("vendor `{name}`: expected intel, amd, arm or other")),
    })
}

fn bits(list: &[u8]) -> u32 {
    list.iter().fold(0, |m, &b| m | (1u32 << b))
}

/// A JSON `Counter` text: `0,1,2,3`, `Fixed counter 1`, or `32+N` for fixed counter N.
fn counters(text: &str) -> Result<CounterMask, String> {
    let mut generic = 0u32;
    let mut fixed = 0u8;
    for part in text.split(',') {
        let part = part.trim();
        if let Some(n) = part.strip_prefix("Fixed counter ") {
            fixed |= 1 << n.parse::<u8>().map_err(|e| format!("counter `{text}`: {e}"))?;
            continue;
        }
        let n: u32 = part.parse().map_err(|e| format!("counter `{text}`: {e}"))?;
        if n >= 32 {
            fixed |= 1 << (n - 32);
        } else {
            generic |= 1 << n;
        }
    }
    Ok(CounterMask { generic: if generic == 0 && fixed == 0 { u32::MAX } else { generic }, fixed })
}

fn catalogue_model(name: &str) -> Result<&'static Model, String> {
    tmetric_catalog::model(name).ok_or_else(|| format!("no catalogue model `{name}`"))
}

/// The PMU model of a case, and the catalogue model its metrics come from.
fn pmu_model(
    case: &Case,
    sims: &mut SimTrees,
) -> Result<(PmuModel, Option<&'static Model>, Option<PathBuf>), String> {
    if case.model.is_some() && case.sim.is_some() {
        return Err("name a model or a simulated machine, not both".into());
    }
    if case.model.is_none() && case.sim.is_none() && case.pmu.is_empty() {
        return Err("name [[case.pmu]], a model or a simulated machine".into());
    }
    if let Some(name) = &case.sim {
        if !case.pmu.is_empty() {
            return Err("a simulated machine has its own PMUs".into());
        }
        if case.smt.is_some() {
            return Err("a simulated machine has its own SMT state (skylakex-nosmt is off)".into());
        }
        let root = sims.root(name, case.nmi_watchdog)?;
        let sysfs = tmetric_runtime::Sysfs::new(root.join("sys"));
        let cpuid = tmetric_runtime::sysfs::host_cpuid(&sysfs, &root.join("proc"))
            .ok_or_else(|| format!("{name}: no cpuid"))?;
        let model = tmetric_catalog::model_for_cpuid(&cpuid)
            .ok_or_else(|| format!("{name}: cpuid {cpuid} maps to no model"))?;
        let pmus = tmetric_engine::Host::probe(&sysfs, &root.join("proc"), None).pmus().clone();
        return Ok((pmus, Some(model), Some(root)));
    }
    let facts = MachineFacts {
        nmi_watchdog: case.nmi_watchdog.unwrap_or(false),
        smt_on: case.smt.unwrap_or(true),
    };
    let extra = case
        .pmu
        .iter()
        .map(|p| {
            Ok(PmuCounters {
                name: p.name.clone(),
                core: p.core.unwrap_or_else(|| pmu::is_core_name(&p.name)),
                vendor: vendor(&p.vendor)?,
                general: p.general,
                fixed: p.fixed,
                fixed_reserved: bits(&p.fixed_reserved) as u8,
                metric_events: p.metric_events,
                cycle_counter: p.cycle_counter,
                cpus: None,
                source: CountSource::VendorDefault("test vector".into()),
                adjustments: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    // A model's core PMUs, with the explicit ones (uncore boxes) after them.
    if let Some(name) = &case.model {
        let model = catalogue_model(name)?;
        let mut pmus = PmuModel::for_model(model, facts);
        pmus.pmus.extend(extra);
        return Ok((pmus, Some(model), None));
    }
    Ok((
        PmuModel { pmus: extra, nmi_watchdog: facts.nmi_watchdog, smt_on: facts.smt_on },
        None,
        None,
    ))
}

/// One explicit event as the scheduler sees it.
fn sched_event(
    spec: &EventSpec,
    pmus: &PmuModel,
    model: Option<&'static Model>,
) -> Result<SchedEvent, String> {
    let name = spec
        .name
        .clone()
        .or_else(|| spec.kernel.clone())
        .or_else(|| spec.vendor_event.clone())
        .ok_or("an event needs a name")?;
    if spec.software {
        return Ok(SchedEvent { name, pmu: None, demand: Demand::GENERAL });
    }
    let vendor = match (&spec.vendor_event, model) {
        (Some(wanted), Some(model)) => Some(
            model
                .events
                .iter()
                .find(|e| model.str(e.name).eq_ignore_ascii_case(wanted))
                .ok_or_else(|| {
                    format!("event `{name}`: `{wanted}` is not an event of {}", model.name)
                })?,
        ),
        (Some(_), None) => return Err(format!("event `{name}`: vendor_event needs a model")),
        _ => None,
    };
    // A vendor event is on its catalogue PMU unless the case says otherwise.
    let pmu_name = spec.pmu.clone().or_else(|| {
        let (event, model) = (vendor?, model?);
        Some(model.str(event.pmu).to_string())
    });
    let p = match &pmu_name {
        Some(pmu_name) => pmus
            .find(pmu_name)
            .ok_or_else(|| format!("event `{name}`: no PMU `{pmu_name}` in the model"))?,
        None => pmus.pmus.iter().position(|p| p.core).ok_or("no core PMU")?,
    };
    let pmu = &pmus.pmus[p];
    let ways = [
        spec.kernel.is_some(),
        spec.encoding.is_some(),
        spec.vendor_event.is_some(),
        spec.general.is_some(),
    ];
    if ways.iter().filter(|&&w| w).count() != 1 {
        return Err(format!(
            "event `{name}`: give exactly one of kernel, encoding, vendor_event or general"
        ));
    }
    let demand = if let Some(kernel) = &spec.kernel {
        pmu::named_demand(kernel, pmu.vendor, pmu.metric_events)
            .ok_or_else(|| format!("event `{name}`: no demand for `{kernel}`"))?
    } else if let Some(encoding) = &spec.encoding {
        let json = spec.counter.as_deref().map(counters).transpose()?.unwrap_or(CounterMask::ANY);
        pmu::event_demand(pmu, encoding, &spec.terms, json)
    } else if let (Some(event), Some(model)) = (vendor, model) {
        pmu::event_demand(pmu, model.str(event.encoding), &spec.terms, event.counters)
    } else {
        Demand {
            general: bits(spec.general.as_deref().unwrap_or_default()),
            fixed: bits(&spec.fixed) as u8,
            cycle_counter: spec.cycle_counter,
            ..Demand::GENERAL
        }
    };
    Ok(SchedEvent { name, pmu: Some(p), demand })
}

fn explicit_request(
    case: &Case,
    pmus: &PmuModel,
    model: Option<&'static Model>,
) -> Result<Request, String> {
    let mut request = Request::default();
    for spec in &case.event {
        let event = sched_event(spec, pmus, model)?;
        if request.events.iter().any(|e| e.name == event.name) {
            return Err(format!("event `{}` is given twice", event.name));
        }
        request.events.push(event);
    }
    let index = |name: &String| {
        request
            .events
            .iter()
            .position(|e| e.name == *name)
            .ok_or_else(|| format!("metric event `{name}` is not a [[case.event]]"))
    };
    let mut metrics = Vec::new();
    for m in &case.metric {
        metrics.push(SchedMetric {
            name: m.name.clone(),
            events: m.events.iter().map(index).collect::<Result<_, _>>()?,
            threshold_events: m.threshold_events.iter().map(index).collect::<Result<_, _>>()?,
            grouped: m.grouped,
            pack: m.pack.unwrap_or(m.grouped),
            perf: Default::default(),
        });
    }
    request.metrics = metrics;
    Ok(request)
}

fn plan_case(case: &Case, sims: &mut SimTrees) -> Result<Planned, String> {
    let (pmus, model, root) = pmu_model(case, sims)?;
    let options = PlanOptions {
        thresholds: !case.metric_no_threshold,
        no_group: case.metric_no_group,
        system_wide: case.system_wide,
        ..PlanOptions::default()
    };
    if case.select.is_empty() {
        if case.event.is_empty() || case.metric.is_empty() {
            return Err("give select items, or [[case.event]] and [[case.metric]]".into());
        }
        let request = explicit_request(case, &pmus, model)?;
        let tmetric = schedule::schedule(&request, &pmus, Strategy::Tmetric);
        let perf = schedule::schedule(&request, &pmus, Strategy::Perf);
        let lower_bound = schedule::lower_bound(&request, &pmus);
        let keys = request.metrics.iter().map(|m| m.name.clone()).collect();
        let grouping = vec![None; request.metrics.len()];
        return Ok(Planned { pmus, request, tmetric, perf, lower_bound, grouping, keys });
    }
    if !case.event.is_empty() || !case.metric.is_empty() {
        return Err("select items and explicit events do not mix in one case".into());
    }
    let model = model.ok_or("select needs a model or a simulated machine")?;
    let mut picks = Vec::new();
    for item in &case.select {
        let found = model.select(item);
        if found.is_empty() {
            return Err(format!("`{item}` selects no metric of {}", model.name));
        }
        for metric in found {
            if !picks.iter().any(|p: &Pick| p.metric == metric) {
                picks.push(Pick { model, metric, item: item.clone() });
            }
        }
    }
    let offline: OfflinePlan = match root {
        None => plan::plan_offline(&picks, &pmus, &options),
        Some(root) => {
            let sysfs = tmetric_runtime::Sysfs::new(root.join("sys"));
            let proc_root = root.join("proc");
            // The host probed as `tmetric plan --sysfs` probes it: the PMUs above.
            let machine = tmetric_engine::Host::probe(&sysfs, &proc_root, None);
            let planned = plan::plan_on_machine(&picks, &machine, &options);
            planned.map_err(|e| format!("cannot plan on the machine: {e}"))?.1
        }
    };
    let names: Vec<String> =
        picks.iter().map(|p| model.str(model.metric(p.metric).name).to_string()).collect();
    let keys = picks
        .iter()
        .zip(&names)
        .map(|(p, name)| {
            if names.iter().filter(|n| *n == name).count() > 1 {
                format!("{}/{name}", model.str(model.metric(p.metric).pmu))
            } else {
                name.clone()
            }
        })
        .collect();
    Ok(Planned {
        pmus: offline.pmus,
        request: offline.request,
        tmetric: offline.tmetric,
        perf: offline.perf,
        lower_bound: offline.lower_bound,
        grouping: offline.ungrouped_why,
        keys,
    })
}

/// A placement as `kind[:reason]`.
fn placement_kind(placement: &Placement) -> String {
    match placement {
        Placement::Together { .. } => "together".into(),
        Placement::NoCounters => "no_counters".into(),
        Placement::Spread { why, .. } => {
            let reason = if why.contains("do not fit one group") {
                "split"
            } else if why.starts_with("not grouped") {
                "ungrouped"
            } else if why.contains("counted alone") {
                "alone"
            } else {
                why
            };
            format!("spread:{reason}")
        }
        Placement::Impossible { why } => {
            let reason = if why.contains("needs PERF_METRICS") {
                "no_perf_metrics"
            } else if why.contains("only on a fixed counter") {
                "fixed_taken"
            } else if why.contains("may use no counter") {
                "no_counter"
            } else {
                why
            };
            format!("impossible:{reason}")
        }
    }
}

fn grouping_kind(why: &Option<NoGroup>) -> String {
    match why {
        None => "grouped",
        Some(NoGroup::MetricNoGroupFlag) => "metric_no_group",
        Some(NoGroup::MetricgroupNoGroup(_)) => "metricgroup_no_group",
        Some(NoGroup::NoGroupEventsNmi) => "nmi",
        Some(NoGroup::NoGroupEventsSmt) => "smt",
        Some(NoGroup::NoGroupEvents) => "no_group_events",
    }
    .into()
}

fn slot_name(slot: Slot) -> String {
    match slot {
        Slot::General(n) => format!("gp{n}"),
        Slot::Fixed(n) => format!("fixed{n}"),
        Slot::Cycle => "cycle".into(),
        Slot::Metric => "metric".into(),
        Slot::None => "none".into(),
    }
}

/// `expected` is the leader then the other members, or `*` then every member when the leader
/// is not decided by a rule (perf orders a metric's events by hash-map iteration).
fn same_group(expected: &[String], actual: &[String]) -> bool {
    let any_leader = expected.first().is_some_and(|l| l == "*");
    let skip = usize::from(!any_leader);
    let mut a: Vec<&String> = expected.iter().skip(1).collect();
    let mut b: Vec<&String> = actual.iter().skip(skip).collect();
    a.sort();
    b.sort();
    (any_leader || expected.first() == actual.first()) && a == b
}

/// Every difference between `expect` and one strategy's schedule.
fn check_schedule(
    what: &str,
    expect: &Expect,
    planned: &Planned,
    schedule: &Schedule,
    lower_bound: Option<&[usize]>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let names = |events: &[usize]| -> Vec<String> {
        events.iter().map(|&e| planned.request.events[e].name.clone()).collect()
    };
    let groups: Vec<Vec<String>> =
        schedule.groups.iter().filter(|g| g.pmu.is_some()).map(|g| names(&g.events)).collect();
    if let Some(wanted) = &expect.lists {
        let got: Vec<&str> = schedule.perf_lists.iter().map(|l| l.text.as_str()).collect();
        if got != *wanted {
            problems.push(format!("{what}lists: expected {wanted:#?}, got {got:#?}"));
        }
    }
    if let Some(wanted) = &expect.opens {
        let got: Vec<Vec<String>> = schedule
            .open
            .iter()
            .map(|o| match *o {
                schedule::Opened::Group(g) => names(&schedule.groups[g].events),
                schedule::Opened::Single(e) => names(&[e]),
            })
            .collect();
        if got != *wanted {
            problems.push(format!("{what}opens: expected {wanted:?}, got {got:?}"));
        }
    }
    if let Some(wanted) = &expect.groups {
        let mut left = groups.clone();
        let mut missing = Vec::new();
        for w in wanted {
            match left.iter().position(|g| same_group(w, g)) {
                Some(i) => {
                    left.remove(i);
                }
                None => missing.push(w.clone()),
            }
        }
        if !missing.is_empty() || !left.is_empty() {
            problems.push(format!("{what}groups: expected {wanted:?}, got {groups:?}"));
        }
    }
    if let Some(wanted) = &expect.singles {
        let mut got = names(&schedule.singles);
        let mut wanted = wanted.clone();
        got.sort();
        wanted.sort();
        if got != wanted {
            problems.push(format!("{what}singles: expected {wanted:?}, got {got:?}"));
        }
    }
    if let Some(wanted) = expect.slices
        && schedule.slices() != wanted
    {
        problems.push(format!(
            "{what}slices: expected {wanted}, got {} (groups {groups:?})",
            schedule.slices()
        ));
    }
    for (pmu_name, &wanted) in &expect.slices_per_pmu {
        match planned.pmus.pmus.iter().position(|p| p.name == *pmu_name) {
            Some(p) if schedule.slices_per_pmu[p] == wanted => {}
            Some(p) => problems.push(format!(
                "{what}slices on {pmu_name}: expected {wanted}, got {}",
                schedule.slices_per_pmu[p]
            )),
            None => problems.push(format!("{what}no PMU `{pmu_name}`")),
        }
    }
    if let (Some(wanted), Some(bound)) = (expect.lower_bound, lower_bound) {
        let got = bound.iter().copied().max().unwrap_or(0);
        if got != wanted {
            problems.push(format!("{what}lower bound: expected {wanted}, got {got}"));
        }
    }
    for (metric, wanted) in &expect.placement {
        let Some(m) = planned.keys.iter().position(|k| k == metric) else {
            problems.push(format!(
                "{what}placement of `{metric}`: no such metric in the request (have {:?})",
                planned.keys
            ));
            continue;
        };
        let got = placement_kind(&schedule.placements[m]);
        let matches = if wanted.contains(':') {
            got == *wanted
        } else {
            got.split(':').next() == Some(wanted.as_str())
        };
        if !matches {
            problems.push(format!(
                "{what}placement of `{metric}`: expected {wanted}, got {got} ({:?})",
                schedule.placements[m]
            ));
        }
    }
    for (event, wanted) in &expect.counter {
        let found = schedule.groups.iter().find_map(|g| {
            g.events
                .iter()
                .position(|&e| planned.request.events[e].name == *event)
                .map(|i| slot_name(g.slots[i]))
        });
        match found {
            Some(got) if got == *wanted || (wanted == "gp" && got.starts_with("gp")) => {}
            Some(got) => {
                problems.push(format!("{what}counter of `{event}`: expected {wanted}, got {got}"))
            }
            None => problems.push(format!("{what}counter of `{event}`: it is in no group")),
        }
    }
    problems
}

fn check_case(case: &Case, sims: &mut SimTrees) -> Result<Vec<String>, String> {
    let planned = plan_case(case, sims)?;
    let mut problems =
        check_schedule("", &case.expect, &planned, &planned.tmetric, Some(&planned.lower_bound));
    if let Some(perf) = &case.perf {
        problems.extend(check_schedule("perf: ", perf, &planned, &planned.perf, None));
        if !perf.pmu.is_empty() || !perf.grouping.is_empty() {
            return Err("[case.perf] checks schedules only: put pmu and grouping in expect".into());
        }
    }
    for (metric, wanted) in &case.expect.grouping {
        match planned.keys.iter().position(|k| k == metric) {
            Some(m) => {
                let got = grouping_kind(&planned.grouping[m]);
                if got != *wanted {
                    problems.push(format!("grouping of `{metric}`: expected {wanted}, got {got}"));
                }
            }
            None => problems.push(format!("grouping of `{metric}`: no such metric")),
        }
    }
    for (name, wanted) in &case.expect.pmu {
        let Some(pmu) = planned.pmus.pmus.iter().find(|p| p.name == *name) else {
            let have: Vec<&str> = planned.pmus.pmus.iter().map(|p| p.name.as_str()).collect();
            problems.push(format!("no PMU `{name}` (have {have:?})"));
            continue;
        };
        let mut differ = |field: &str, expected: String, got: String| {
            if expected != got {
                problems.push(format!("PMU {name} {field}: expected {expected}, got {got}"));
            }
        };
        if let Some(v) = wanted.general {
            differ("general", v.to_string(), pmu.general.to_string());
        }
        if let Some(v) = wanted.fixed {
            differ("fixed", v.to_string(), pmu.fixed.to_string());
        }
        if let Some(v) = &wanted.fixed_reserved {
            differ("fixed_reserved", bits(v).to_string(), pmu.fixed_reserved.to_string());
        }
        if let Some(v) = wanted.metric_events {
            differ("metric_events", v.to_string(), pmu.metric_events.to_string());
        }
        if let Some(v) = wanted.cycle_counter {
            differ("cycle_counter", v.to_string(), pmu.cycle_counter.to_string());
        }
        if let Some(v) = wanted.capacity {
            differ("capacity", v.to_string(), pmu.capacity().to_string());
        }
        if let Some(v) = &wanted.adjustments {
            let got: Vec<String> = pmu.adjustments.iter().map(|a| format!("{a:?}")).collect();
            differ("adjustments", format!("{v:?}"), format!("{got:?}"));
        }
    }
    Ok(problems)
}

/// Every case of every file; the number of cases run.
pub(crate) fn run_all() -> (usize, Vec<String>, Vec<String>) {
    let mut sims = SimTrees {
        dir: tempfile::Builder::new().prefix("tmetric-vectors-").tempdir().expect("a temp dir"),
        written: Vec::new(),
    };
    let mut failures = Vec::new();
    let mut known = Vec::new();
    let mut count = 0;
    for (file_name, file) in crate::vector_files::load::<File>(&vectors_dir(), &mut failures) {
        let mut seen = Vec::new();
        for case in &file.case {
            count += 1;
            let at = crate::vector_files::label(
                &file_name,
                &case.name,
                &case.source,
                &mut seen,
                &mut failures,
            );
            match (check_case(case, &mut sims), &case.disagrees) {
                (Err(e), _) => failures.push(format!("{at}: bad case: {e}")),
                (Ok(problems), None) if problems.is_empty() => {}
                (Ok(problems), None) => {
                    failures.push(format!("{at}:\n    {}", problems.join("\n    ")))
                }
                (Ok(problems), Some(_)) if problems.is_empty() => failures.push(format!(
                    "{at}: marked `disagrees` but tmetric now agrees: remove the marker"
                )),
                (Ok(problems), Some(why)) => {
                    known.push(format!("{at}: {why}\n    {}", problems.join("\n    ")))
                }
            }
        }
    }
    (count, failures, known)
}

#[test]
fn schedule_vectors() {
    // perf 6.12's tables: the vectors are perf 6.12's grouping of its metrics.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let (count, failures, known) = run_all();
    for k in &known {
        eprintln!("known disagreement: {k}");
    }
    assert!(
        failures.is_empty(),
        "{} of {count} scheduling vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{count} scheduling vectors, {} known disagreements", known.len());
}
