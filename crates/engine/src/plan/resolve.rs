//! How one model input is counted on a machine: its printed name, its resolution through
//! sysfs (a counter, every box of an uncore PMU, a tool value, a retire latency, or missing and
//! why), the counters it may use, and the input slots a metric needs.

use tmetric_catalog::{Id, IdKind, Model};
use tmetric_model::Literal;
use tmetric_runtime::event::{self, EventError, ResolvedEvent};
use tmetric_runtime::{Environment, Sysfs, ToolEvent};

use super::Resolution;
use crate::compiled::Select;
use crate::pmu::{self, Demand, PmuModel};

/// The printed name of a model input: perf's `pmu@terms@` spelled `pmu/terms/`, or the
/// value of its `name=` term, which perf prints as the event's name
/// (`software@task\-clock\,name\=task\-clock@`, perf 7.x's common metrics: `task-clock`).
pub fn id_name(model: &Model, id: &Id) -> String {
    let text = model.str(id.text);
    let named = text
        .strip_suffix('@')
        .and_then(|t| t.split_once('@'))
        .and_then(|(_, terms)| terms.split(',').find_map(|t| t.strip_prefix("name=")))
        .filter(|name| !name.is_empty());
    match named {
        Some(name) => name.to_string(),
        None => text.replace('@', "/"),
    }
}

fn from_event_result(
    result: Result<ResolvedEvent, EventError>,
    display: &str,
    env: &Environment,
) -> Resolution {
    match result {
        Ok(ResolvedEvent::Counter(mut event)) => {
            event.name = display.to_string();
            Resolution::Counter(event)
        }
        Ok(ResolvedEvent::Tool(tool)) => Resolution::Tool(tool),
        Err(EventError::NoPmu { pmu, .. }) if pmu::is_core_name(&pmu) => {
            Resolution::Missing(env.no_hardware_pmu().to_string())
        }
        Err(EventError::NoPmu { pmu, .. }) => {
            Resolution::Missing(format!("this machine has no `{pmu}` PMU"))
        }
        Err(err) => Resolution::Missing(err.to_string()),
    }
}

/// How input `id` of `model` is counted on the machine `sysfs` describes.
pub fn resolve_id(model: &Model, id: &Id, sysfs: &Sysfs, env: &Environment) -> Resolution {
    let display = id_name(model, id);
    if id.retire_latency {
        return Resolution::RetireLatency;
    }
    let modifiers = model.str(id.modifiers);
    // `uncore_cha_0@event\=0x1@` has terms and no event name.
    let with_terms = |event: &str| {
        let terms = model.str(id.terms);
        match (event.is_empty(), terms.is_empty()) {
            (_, true) => event.to_string(),
            (true, false) => terms.to_string(),
            (false, false) => format!("{event},{terms}"),
        }
    };
    // An uncore PMU named without its box number is every box, as perf matches it.
    let on_boxes = |pmu: &str, terms: &str| match event::resolve_on_boxes(
        pmu, terms, modifiers, &display, sysfs,
    ) {
        Ok(mut boxes) if boxes.len() == 1 => {
            Resolution::Counter(boxes.pop().expect("one box").event)
        }
        Ok(boxes) => Resolution::Boxes(boxes),
        Err(err) => from_event_result(Err(err), &display, env),
    };
    match id.kind {
        IdKind::Tool(tool) => Resolution::Tool(match tool {
            tmetric_catalog::Tool::DurationTime => ToolEvent::DurationTime,
            tmetric_catalog::Tool::UserTime => ToolEvent::UserTime,
            tmetric_catalog::Tool::SystemTime => ToolEvent::SystemTime,
        }),
        IdKind::Kernel => {
            let event = model.str(id.event);
            let pmu = model.str(id.pmu);
            // A hybrid metric's kernel event lives on its own core PMU (`cpu_atom/cycles/`).
            if (pmu == "cpu_core" || pmu == "cpu_atom") && sysfs.has_pmu(pmu) {
                let result = event::resolve_on_pmu(pmu, event, modifiers, &display, sysfs);
                return from_event_result(result.map(ResolvedEvent::Counter), &display, env);
            }
            let text = if modifiers.is_empty() {
                event.to_string()
            } else {
                format!("{event}:{modifiers}")
            };
            match event::resolve(&text, sysfs) {
                // `topdown-*`, `slots` and the like are core PMU aliases: without a core PMU
                // the reason is the missing PMU, not an unknown name.
                Err(EventError::Unknown { .. }) if sysfs.core_pmu().is_none() => {
                    Resolution::Missing(env.no_hardware_pmu().to_string())
                }
                result => from_event_result(result, &display, env),
            }
        }
        IdKind::Sysfs => {
            let pmu = model.str(id.pmu);
            let terms = with_terms(model.str(id.event));
            if pmu::is_core_name(pmu) {
                let result = event::resolve_on_pmu(pmu, &terms, modifiers, &display, sysfs);
                return from_event_result(result.map(ResolvedEvent::Counter), &display, env);
            }
            on_boxes(pmu, &terms)
        }
        IdKind::Event(index) => {
            let json = &model.events.at(index as usize);
            let pmu = model.str(json.pmu);
            let pmu = if pmu::is_core_name(pmu) && !sysfs.has_pmu(pmu) {
                match sysfs.core_pmu() {
                    Some(core) => core,
                    None => return Resolution::Missing(env.no_hardware_pmu().to_string()),
                }
            } else {
                pmu.to_string()
            };
            let terms = with_terms(model.str(json.encoding));
            if pmu::is_core_name(&pmu) || sysfs.has_pmu(&pmu) {
                let result = event::resolve_on_pmu(&pmu, &terms, modifiers, &display, sysfs);
                return from_event_result(result.map(ResolvedEvent::Counter), &display, env);
            }
            on_boxes(&pmu, &terms)
        }
        IdKind::Probe => {
            Resolution::Missing("only an argument of has_event() or strcmp_cpuid_str()".into())
        }
    }
}

/// The counters input `id` may use on `pmus`, and its PMU index; `None` for inputs that take
/// no hardware counter. `pmu_name` is the PMU the input was resolved to.
pub fn demand_of(
    model: &Model,
    id: &Id,
    pmu_name: &str,
    pmus: &PmuModel,
) -> Option<(usize, Demand)> {
    let p = pmus.find(pmu_name)?;
    let pmu = &pmus.pmus[p];
    let demand = match id.kind {
        IdKind::Event(index) => {
            let json = &model.events.at(index as usize);
            pmu::event_demand(pmu, model.str(json.encoding), model.str(id.terms), json.counters)
        }
        IdKind::Kernel => {
            let name = model.str(id.event);
            if event::software_config(name).is_some() {
                return None;
            }
            pmu::named_demand(name, pmu.vendor, pmu.metric_events)?
        }
        IdKind::Sysfs => Demand::GENERAL,
        IdKind::Tool(_) | IdKind::Probe => return None,
    };
    Some((p, demand))
}

/// The input slots root `metric` needs (its threshold's too when `thresholds`), with the
/// model's literals and probe values (from [`super::machine_probes`] or [`super::offline_probes`]).
pub fn needed_slots(
    model: &Model,
    metric: usize,
    literals: &[f64; Literal::COUNT],
    probes: &[f64],
    thresholds: bool,
) -> Vec<u16> {
    let facts = tmetric_catalog::Facts { literals, probes };
    let mut slots = model.needed_ids(metric, &facts, false).unwrap_or_default();
    if thresholds && model.metric(metric).threshold_fn.is_some() {
        for s in model.needed_ids(metric, &facts, true).unwrap_or_default() {
            if !slots.contains(&s) {
                slots.push(s);
            }
        }
    }
    slots.sort_unstable();
    slots
}
