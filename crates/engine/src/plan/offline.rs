//! Planning from the catalogue alone (`tmetric plan --model`) and the comparison `tmetric
//! plan` prints on a machine: the request, tmetric's and perf 6.12's schedules, lower bounds.

use tmetric_catalog::{Id, IdKind, Model};
use tmetric_model::Literal;
use tmetric_runtime::event;

use super::{
    Names, NoGroup, Pick, Plan, PlanOptions, demand_of, grouping, id_name, needed_slots,
    offline_probes, packs, perf_ids,
};
use crate::Host;
use crate::pmu::{self, Demand, PmuModel, Vendor};
use crate::schedule::{
    self, PerfMetric, Placement, Request, SchedEvent, SchedMetric, Schedule, Strategy,
};

/// A plan made from the catalogue alone, for a model named without its machine
/// (`tmetric plan --model M`): the scheduler's request and its outcome under each strategy.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OfflinePlan {
    /// The PMUs assumed (uncore boxes the metrics use are added).
    pub pmus: PmuModel,
    /// The request.
    pub request: Request,
    /// tmetric's schedule.
    pub tmetric: Schedule,
    /// perf 6.12's strategy on the same request.
    pub perf: Schedule,
    /// Per PMU: a lower bound on the time slices.
    pub lower_bound: Vec<usize>,
    /// Per PMU: a lower bound for schedules that keep each packable metric in one group.
    pub together_bound: Vec<usize>,
    /// Per metric: why it is not grouped, if it is not.
    pub ungrouped_why: Vec<Option<NoGroup>>,
}

impl OfflinePlan {
    /// Lower bound on the slices of the busiest PMU.
    pub fn lower(&self) -> usize {
        self.lower_bound.iter().copied().max().unwrap_or(0)
    }

    /// The lower bound tmetric's schedule is measured against: for whole metrics, unless it
    /// gave up keeping them whole.
    pub fn bound(&self) -> usize {
        if self.tmetric.loose {
            self.lower()
        } else {
            self.lower().max(self.together_bound.iter().copied().max().unwrap_or(0))
        }
    }

    /// Metrics whose value events tmetric's schedule counts together, and perf's.
    pub fn together(&self) -> (usize, usize) {
        let count = |s: &Schedule| {
            s.placements.iter().filter(|p| matches!(p, Placement::Together { .. })).count()
        };
        (count(&self.tmetric), count(&self.perf))
    }
}

/// The offline identity of an input: its PMU and encoding, so that the same event reached
/// through two names is counted once.
fn offline_key(model: &Model, id: &Id) -> String {
    let mods = model.str(id.modifiers);
    match id.kind {
        IdKind::Event(i) => {
            let e = &model.events.at(i as usize);
            format!("{}/{},{}/{mods}", model.str(e.pmu), model.str(e.encoding), model.str(id.terms))
        }
        _ => format!("{}/{}/{mods}", model.str(id.pmu), model.str(id.text)),
    }
}

/// Literals for planning without a machine. They only decide which branch an expression takes:
/// 1 keeps every branch a non-zero value takes (`#slots`, `#num_cpus`, ...); `#smt_on` and
/// `#core_wide` follow the assumed SMT state and system-wide counting.
pub fn offline_literals(smt_on: bool, system_wide: bool) -> [f64; Literal::COUNT] {
    let mut literals = [1.0; Literal::COUNT];
    literals[Literal::SmtOn.index()] = f64::from(u8::from(smt_on));
    let whole = crate::host::core_wide(system_wide, smt_on, None, &[]);
    literals[Literal::CoreWide.index()] = f64::from(u8::from(whole));
    literals[Literal::TargetCpu.index()] = f64::from(u8::from(system_wide));
    literals
}

/// perf's `arch_evlist__add_required_events`, as `Plan::add_metrics` applies it on a machine:
/// topdown metric events on a PMU whose `slots` the list lacks get that `slots`.
fn add_required_slots(
    events: &mut Vec<usize>,
    threshold_events: &mut Vec<usize>,
    pmus: &PmuModel,
    request: &mut Request,
    keys: &mut Vec<String>,
) {
    for p in super::metrics::lacking_slots(events, threshold_events, request) {
        // Another metric's `slots` (`TOPDOWN.SLOTS`) is the same counter.
        let e = match (0..request.events.len())
            .find(|&e| request.events[e].demand.slots && request.events[e].pmu == Some(p))
        {
            Some(e) => e,
            None => {
                let pmu = &pmus.pmus[p];
                let Some(demand) = crate::pmu::named_demand("slots", pmu.vendor, pmu.metric_events)
                else {
                    continue;
                };
                let name = super::metrics::slots_name(&pmu.name);
                keys.push(format!("required {name}"));
                request.events.push(SchedEvent { name, pmu: Some(p), demand });
                request.events.len() - 1
            }
        };
        super::metrics::insert_slots(e, p, events, threshold_events, request);
    }
}

/// Plans `picks` from the catalogue alone on the PMUs `pmus` describes.
pub fn plan_offline(picks: &[Pick], pmus: &PmuModel, options: &PlanOptions) -> OfflinePlan {
    let mut pmus = pmus.clone();
    let literals = offline_literals(pmus.smt_on, options.system_wide);
    let mut request = Request::default();
    let mut keys: Vec<String> = Vec::new();
    let mut ungrouped_why = Vec::new();
    let mut items: Vec<&str> = Vec::new();
    request.perf.no_merge = options.no_merge;
    request.perf.default = !picks.is_empty() && picks.iter().all(|p| p.item == "Default");
    for pick in picks {
        let model = pick.model;
        let mut events = Vec::new();
        let mut threshold_events = Vec::new();
        // Per input slot: its event in the request.
        let mut event_of_slot: Vec<(u16, usize)> = Vec::new();
        let probes = offline_probes(model);
        let value_slots = needed_slots(model, pick.metric, &literals, &probes, false);
        for slot in needed_slots(model, pick.metric, &literals, &probes, options.thresholds) {
            let list =
                if value_slots.contains(&slot) { &mut events } else { &mut threshold_events };
            let id = &model.ids[slot as usize];
            if id.retire_latency || matches!(id.kind, IdKind::Tool(_) | IdKind::Probe) {
                continue;
            }
            let key = offline_key(model, id);
            if let Some(i) = keys.iter().position(|k| *k == key) {
                list.push(i);
                event_of_slot.push((slot, i));
                continue;
            }
            let pmu_name = match id.kind {
                IdKind::Event(i) => model.str(model.events.at(i as usize).pmu).to_string(),
                _ => model.str(id.pmu).to_string(),
            };
            let software =
                id.kind == IdKind::Kernel && event::software_config(model.str(id.event)).is_some();
            let counterless = software
                || pmu_name == "msr"
                || pmu_name.starts_with("cstate")
                || pmu_name == "power"
                || pmu_name.starts_with("tool");
            let pmu_name = if pmu_name.is_empty() {
                pmus.pmus
                    .iter()
                    .find(|p| p.core)
                    .map_or_else(|| "default_core".into(), |p| p.name.clone())
            } else {
                pmu_name
            };
            let (pmu, demand) = if counterless {
                (None, Demand::GENERAL)
            } else {
                if pmus.find(&pmu_name).is_none() {
                    pmus.pmus.push(uncore_pmu(model, &pmu_name));
                }
                match demand_of(model, id, &pmu_name, &pmus) {
                    Some((p, d)) => (Some(p), d),
                    None => (None, Demand::GENERAL),
                }
            };
            keys.push(key);
            request.events.push(SchedEvent { name: id_name(model, id), pmu, demand });
            list.push(request.events.len() - 1);
            event_of_slot.push((slot, request.events.len() - 1));
        }
        add_required_slots(&mut events, &mut threshold_events, &pmus, &mut request, &mut keys);
        let why = grouping(pick, options, &pmus).err();
        if !items.contains(&pick.item.as_str()) {
            items.push(&pick.item);
        }
        let item = items.iter().position(|i| *i == pick.item).unwrap_or(0);
        let names = Names::of(model);
        let desc = model.metric(pick.metric);
        let perf =
            match perf_ids(model, &names, pick.metric, &literals, &probes, options.thresholds) {
                Ok(ids) => {
                    let events = ids
                        .iter()
                        .filter_map(|key| {
                            let slot = names.slot(key)? as u16;
                            let e = event_of_slot.iter().find(|(s, _)| *s == slot)?.1;
                            Some((key.clone(), e))
                        })
                        .collect();
                    PerfMetric {
                        item,
                        table: (model.str(desc.pmu).to_string(), model.str(desc.name).to_string()),
                        default_group: model.str(desc.default_group).to_string(),
                        modifier: None,
                        ids,
                        events,
                    }
                }
                Err(_) => PerfMetric::default(),
            };
        request.metrics.push(SchedMetric {
            name: model.str(model.metric(pick.metric).name).to_string(),
            events,
            threshold_events,
            grouped: why.is_none(),
            pack: packs(pick, options),
            perf,
        });
        ungrouped_why.push(why);
    }
    let tmetric = schedule::schedule(&request, &pmus, options.strategy);
    let perf = schedule::schedule(&request, &pmus, Strategy::Perf);
    let lower_bound = schedule::lower_bound(&request, &pmus);
    let together_bound = schedule::together_lower_bound(&request, &pmus);
    OfflinePlan { pmus, request, tmetric, perf, lower_bound, together_bound, ungrouped_why }
}

/// Plans `picks` as `tmetric stat -M` plans them on `machine` (`crate::setup::build`, counting
/// system-wide when `options` say so): its literals, its probes (`has_event`,
/// `strcmp_cpuid_str`), every input resolved through its sysfs; the plan stat would open (the
/// schedule of [`PlanOptions::strategy`]) and, on the same request, perf 6.12's strategy and
/// the lower bounds.
pub fn plan_on_machine(
    picks: &[Pick],
    machine: &Host,
    options: &PlanOptions,
) -> Result<(Plan, OfflinePlan), crate::setup::SetupError> {
    let request = crate::setup::Request {
        metrics: crate::setup::Metrics::Picks(picks.to_vec()),
        all_cpus: options.system_wide,
        options: *options,
        ..Default::default()
    };
    let plan = crate::setup::build_with(&request, machine, Default::default(), true)?.plan;
    let pmus = machine.pmus().clone();
    let request = plan.request.clone();
    let tmetric = plan
        .schedule
        .clone()
        .unwrap_or_else(|| schedule::schedule(&request, &pmus, options.strategy));
    let perf = schedule::schedule(&request, &pmus, Strategy::Perf);
    let lower_bound = schedule::lower_bound(&request, &pmus);
    let together_bound = schedule::together_lower_bound(&request, &pmus);
    let ungrouped_why = picks.iter().map(|pick| grouping(pick, options, &pmus).err()).collect();
    let offline =
        OfflinePlan { pmus, request, tmetric, perf, lower_bound, together_bound, ungrouped_why };
    Ok((plan, offline))
}

/// An uncore PMU a model's metrics use, with `counter.json` numbers or the 4-counter default.
fn uncore_pmu(model: &Model, name: &str) -> crate::pmu::PmuCounters {
    let unit = name.strip_prefix("uncore_").unwrap_or(name);
    let (general, fixed, source) = match pmu::counter_json(model, unit) {
        Some((generic, fixed)) => (generic, fixed, crate::pmu::CountSource::CounterJson),
        None => (
            4,
            0,
            crate::pmu::CountSource::VendorDefault(
                "uncore box: assuming 4 general counters".into(),
            ),
        ),
    };
    crate::pmu::PmuCounters {
        name: name.to_string(),
        core: false,
        vendor: Vendor::Other,
        general: general.max(1),
        fixed,
        fixed_reserved: 0,
        metric_events: 0,
        cycle_counter: false,
        cpus: None,
        source,
        adjustments: Vec::new(),
    }
}
