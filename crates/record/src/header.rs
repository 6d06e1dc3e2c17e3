//! The header a record starts with, from what the run knows: the plan, the machine's
//! topology and cpuid, the flags as data ([`HeaderFacts`], built from the engine's session
//! and `stat`'s flags).

use tmetric_engine::session::Session;
use tmetric_engine::{Host, Plan, Refusal, RefusedGroup, Source};
use tmetric_model::literal::Literal;
use tmetric_runtime::{EventKind, Syscalls, Sysfs};

use crate::format::{
    CpuUnits, EstimateRec, EventRec, FORMAT, Header, ProbeRec, RootRec, RowRec, Selection,
    SourceRec, Topology, VERSION,
};

/// What the header records of the run, the machine and the plan.
pub struct HeaderFacts<'a> {
    /// The plan counted.
    pub plan: &'a Plan,
    /// Per spec, why the kernel refused it ([`tmetric_engine::session::Session::failures`]).
    pub failures: Vec<Option<Refusal>>,
    /// The groups the kernel refused ([`tmetric_engine::session::Session::split_notes`]).
    pub splits: Vec<RefusedGroup>,
    /// `--per-thread`: the threads printed apart, (comm, tid).
    pub threads: Vec<(String, i32)>,
    /// `--per-thread -a`: rows that counted nothing are left out.
    pub skip_zero: bool,
    /// The counted machine (a simulated one with `--pmu-sim`).
    pub host: &'a Host,
    /// The model of `-M`, `arch/name`.
    pub model: Option<String>,
    /// `--pmu-sim`: the simulated machine.
    pub simulated: Option<&'a str>,
    /// What was counted, as stat's title says it.
    pub target: String,
    /// Counted per CPU (`-a`, `-C`).
    pub system_wide: bool,
    /// `-I`, in ms.
    pub interval_ms: Option<u64>,
    /// The flags that chose what was counted.
    pub selection: Selection,
    /// perf's aggregation mode, for `STAT_CONFIG` in perf.data.
    pub aggr_mode: tmetric_perfstat::Aggregation,
    /// `--per-cache=L`'s level (perf's 5, above its last level, for `--per-cache` alone).
    pub aggr_level: u32,
    /// The totals show the workload's user and system time (perf's `ru_display`).
    pub ru_display: bool,
}

impl<'a> HeaderFacts<'a> {
    /// The facts `session` knows (its plan, the kernel's refusals, the refused groups) on the
    /// machine `host`, with what was asked for (`selection`); the rest as for one count of a
    /// command, for the front end to change.
    pub fn of_session<S: Syscalls>(
        session: &'a Session<S>,
        host: &'a Host,
        selection: Selection,
    ) -> Self {
        HeaderFacts {
            plan: session.plan(),
            failures: session.failures(),
            splits: session.split_notes(),
            threads: Vec::new(),
            skip_zero: false,
            host,
            model: None,
            simulated: None,
            target: String::new(),
            system_wide: false,
            interval_ms: None,
            selection,
            aggr_mode: tmetric_perfstat::Aggregation::Global,
            aggr_level: 0,
            ru_display: true,
        }
    }
}

/// The header of a record of `f.plan`.
pub fn header(f: &HeaderFacts<'_>) -> Header {
    let plan = f.plan;
    Header {
        format: FORMAT.into(),
        version: VERSION,
        tmetric: env!("CARGO_PKG_VERSION").into(),
        cpuid: f.host.cpuid().map(str::to_string),
        model: f.model.clone(),
        simulated: f.simulated.map(str::to_string),
        target: f.target.clone(),
        system_wide: f.system_wide,
        interval_ms: f.interval_ms,
        topology: topology(f.host.sysfs()),
        literals: Literal::ALL
            .iter()
            .map(|l| (l.name().to_string(), plan.literals()[l.index()]))
            .collect(),
        selection: f.selection.clone(),
        events: plan.events().iter().map(event_rec).collect(),
        groups: groups(plan),
        rows: rows(plan),
        roots: roots(plan),
        probes: plan
            .probes()
            .iter()
            .map(|(model, values)| ProbeRec { model: model.path(), values: values.clone() })
            .collect(),
        retire_latency: plan.retire_latency().iter().cloned().collect(),
        failures: f.failures.clone(),
        splits: f.splits.clone(),
        threads: f.threads.clone(),
        skip_zero: f.skip_zero,
        aggr_mode: Some(f.aggr_mode.code()),
        aggr_level: (f.aggr_mode == tmetric_perfstat::Aggregation::Cache).then_some(f.aggr_level),
        ru_display: Some(f.ru_display),
        vintage: Some(tmetric_catalog::vintage().version.to_string()),
        contract: Some(plan.contract().perf.to_string()),
        estimate: {
            let e = plan.estimate_facts();
            (plan.anchored() && e.rotating).then_some(EstimateRec {
                rotating: e.rotating,
                rotated: e.rotated,
                tick_hz: e.tick_hz,
                siblings: e.siblings,
            })
        },
    }
}

/// The online CPUs with their (socket, die, core).
fn topology(sysfs: &Sysfs) -> Topology {
    let cpus = sysfs.online_cpus().unwrap_or_default();
    let places: Vec<[u32; 4]> = cpus
        .iter()
        .map(|&c| {
            let (s, d, core) = sysfs.cpu_place(c);
            [c, s, d, core]
        })
        .collect();
    let mut cores: Vec<(u32, u32, u32)> = places.iter().map(|p| (p[1], p[2], p[3])).collect();
    cores.sort_unstable();
    cores.dedup();
    let mut sockets: Vec<u32> = places.iter().map(|p| p[1]).collect();
    sockets.sort_unstable();
    sockets.dedup();
    let units = cpus
        .iter()
        .map(|&c| {
            let caches = sysfs.cpu_caches(c);
            CpuUnits {
                node: sysfs.cpu_node(c).unwrap_or(0),
                cluster: sysfs.cpu_cluster(c),
                caches: (1..=4)
                    .filter_map(|l| caches.iter().find(|&&(lvl, _)| lvl == l))
                    .map(|&(l, id)| [l, id])
                    .collect(),
            }
        })
        .collect();
    Topology { cpus, cores: cores.len(), sockets: sockets.len(), places, units }
}

fn event_rec(e: &tmetric_runtime::CounterEvent) -> EventRec {
    EventRec {
        name: e.name.clone(),
        pmu: match &e.kind {
            EventKind::Software => "software".into(),
            EventKind::Hardware => "hardware".into(),
            EventKind::Tracepoint => "tracepoint".into(),
            EventKind::Pmu(p) => p.clone(),
        },
        type_: e.attr.type_,
        config: e.attr.config,
        config1: e.attr.config1,
        config2: e.attr.config2,
        config3: e.attr.config3,
        exclude: [e.attr.exclude_user, e.attr.exclude_kernel, e.attr.exclude_hv],
        cpus: e.cpus.clone(),
        unit: e.unit.clone(),
        scale: e.scale,
    }
}

/// Every spec in exactly one group: the plan's groups, then each other spec alone.
fn groups(plan: &Plan) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for g in plan.groups() {
        let fresh: Vec<usize> =
            g.iter().copied().filter(|s| !groups.iter().flatten().any(|x| x == s)).collect();
        if !fresh.is_empty() {
            groups.push(fresh);
        }
    }
    for s in 0..plan.specs().len() {
        if !groups.iter().flatten().any(|&x| x == s) {
            groups.push(vec![s]);
        }
    }
    groups
}

fn rows(plan: &Plan) -> Vec<RowRec> {
    plan.rows()
        .iter()
        .map(|r| RowRec {
            name: r.name.clone(),
            source: match &r.source {
                Source::Counter(s) => SourceRec::Counter(*s),
                Source::Tool(t) => SourceRec::Tool(t.name().to_string()),
                Source::RetireLatency => SourceRec::RetireLatency,
                Source::Missing(why) => SourceRec::Missing(why.clone()),
            },
            show: r.show,
            copy_of: r.copy_of,
            roots: r.roots.clone(),
            boxes: r.boxes.iter().map(|b| (b.spec, b.name.clone())).collect(),
        })
        .collect()
}

fn roots(plan: &Plan) -> Vec<RootRec> {
    plan.roots()
        .iter()
        .map(|root| {
            let m = root.model.metric(root.metric);
            RootRec {
                model: root.model.path(),
                metric: root.model.str(m.name).to_string(),
                pmu: root.model.str(m.pmu).to_string(),
                inputs: root
                    .slot_rows
                    .iter()
                    .enumerate()
                    .filter_map(|(slot, row)| {
                        let id = &root.model.ids[slot];
                        Some((slot, tmetric_engine::plan::id_name(root.model, id), (*row)?))
                    })
                    .collect(),
            }
        })
        .collect()
}
