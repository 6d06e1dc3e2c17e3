//! perf's runtime parameter: metrics whose expression has `?` (POWER9's and POWER10's hv_24x7
//! metrics, `AggregationMode` PerChip or PerCore). perf instantiates such a metric once per
//! chip or core of the machine, `?` standing for 0, 1, ... in its events
//! (`hv_24x7@PM_PB_CYC\,chip\=?@` becomes the event `hv_24x7/PM_PB_CYC,chip=1/`), and prints
//! each instance as `NAME_N` when the metric has a ScaleUnit, as every vendor one does
//! (tools/perf/util/metricgroup.c `add_metric`, util/expr.l `normalize`, util/stat-shadow.c
//! `generic_metric`). A log holds the instances perf ran, so here an instance is a [`Root`]
//! with its parameter, its inputs are looked up with `?` replaced, and the values `?` takes are
//! read from the terms of the log's rows.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};

use tmetric_catalog::Model;
use tmetric_perfstat::{Block, EventKey};

use tmetric_engine::compiled::Select;

/// A metric to evaluate in a log: one of the model's metrics and, for a metric with perf's
/// runtime parameter, the value `?` stands for (`None` for every other metric, and for a
/// parameterised one selected when the log holds none of its instances).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Root {
    /// Index into the model's metrics.
    pub metric: usize,
    /// The value of `?`.
    pub param: Option<u32>,
}

impl From<usize> for Root {
    fn from(metric: usize) -> Root {
        Root { metric, param: None }
    }
}

impl Root {
    /// The name perf prints it under: `PowerBUS_Frequency_1` for an instance, else the
    /// metric's name.
    pub fn name(&self, model: &Model) -> Cow<'static, str> {
        instance_name(model, self.metric, self.param)
    }
}

/// `NAME_N` for instance `N` of metric `metric`, else its name.
pub fn instance_name(model: &Model, metric: usize, param: Option<u32>) -> Cow<'static, str> {
    let name = model.str(model.metric(metric).name);
    match param {
        Some(n) => Cow::Owned(format!("{name}_{n}")),
        None => Cow::Borrowed(name),
    }
}

/// The instances of `model` that perf prints as `name` (`PowerBUS_Frequency_1`): a metric with
/// the runtime parameter whose name is `name` without its `_N`, one per PMU.
pub fn instances_named(model: &Model, name: &str) -> Vec<Root> {
    let Some((base, n)) = name.rsplit_once('_') else { return Vec::new() };
    // perf prints the parameter with `%d`: no sign, no leading zeros but for 0 itself.
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0'))
    {
        return Vec::new();
    }
    let Ok(param) = n.parse::<u32>() else { return Vec::new() };
    model
        .metrics_named(base)
        .into_iter()
        .filter(|&m| model.metric(m).runtime_param)
        .map(|metric| Root { metric, param: Some(param) })
        .collect()
}

/// The text of input `slot` with `?` replaced by `param` (unchanged without a parameter, or
/// for an input without `?`), as perf's expression lexer replaces it.
pub fn id_text(model: &Model, slot: u16, param: Option<u32>) -> Cow<'static, str> {
    let text = model.str(model.ids[slot as usize].text);
    match param {
        Some(n) if text.contains('?') => Cow::Owned(text.replace('?', &n.to_string())),
        _ => Cow::Borrowed(text),
    }
}

/// Whether input `slot` reads the runtime parameter.
pub fn has_param(model: &Model, slot: u16) -> bool {
    model.str(model.ids[slot as usize].text).contains('?')
}

/// Every input slot of `metric` and the metrics it references.
fn slots_of(model: &Model, metric: usize) -> impl Iterator<Item = u16> + '_ {
    model
        .closure(&[metric])
        .into_iter()
        .flat_map(move |m| model.metric(m as usize).slots.iter().copied())
}

/// The (PMU, term) pairs that carry `?` in the inputs of `metric`: `(hv_24x7, chip)`.
fn param_terms(model: &Model, metric: usize) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for slot in slots_of(model, metric).filter(|&s| has_param(model, s)) {
        let key = EventKey::from_expr_id(model.str(model.ids[slot as usize].text));
        let Some(pmu) = key.pmu else { continue };
        for term in key.name.split(',') {
            if let Some((name, "?")) = term.split_once('=') {
                out.insert((pmu.clone(), name.to_string()));
            }
        }
    }
    out
}

/// The values `?` of `metric` takes in `blocks`: the values of its parameter's term (`chip=N`)
/// on rows of the same PMU, whichever event they count, sorted. They are the chips (or cores)
/// perf ran the metric on, so an instance whose own events are missing is still found, and
/// said to miss them.
pub fn values_in<'a>(
    model: &Model,
    metric: usize,
    blocks: impl IntoIterator<Item = &'a Block>,
) -> Vec<u32> {
    let terms = param_terms(model, metric);
    if terms.is_empty() {
        return Vec::new();
    }
    let mut values = BTreeSet::new();
    for row in blocks.into_iter().flat_map(|b| &b.rows) {
        let Some(pmu) = row.key.pmu.as_deref() else { continue };
        for term in row.key.name.split(',') {
            let Some((name, value)) = term.split_once('=') else { continue };
            if terms.iter().any(|(p, t)| p == pmu && t == name)
                && let Ok(v) = value.parse::<u32>()
            {
                values.insert(v);
            }
        }
    }
    values.into_iter().collect()
}

/// The (PMU, event) pairs, lower case, that the runtime-parameter metrics of `model` read
/// (`(hv_24x7, pm_pb_cyc)`): these events are the hypervisor's, listed in no model's JSON, so
/// they are the model's only through its metrics.
pub fn param_events(model: &Model) -> HashSet<(String, String)> {
    let mut out = HashSet::new();
    for metric in (0..model.metric_count()).filter(|&m| model.metric(m).runtime_param) {
        for slot in slots_of(model, metric).filter(|&s| has_param(model, s)) {
            let key = EventKey::from_expr_id(model.str(model.ids[slot as usize].text));
            if let Some(pmu) = key.pmu {
                let event = key.name.split(',').next().unwrap_or("").to_string();
                out.insert((pmu, event));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn power9() -> &'static Model {
        tmetric_catalog::model("powerpc/power9").expect("the catalogue has POWER9")
    }

    #[test]
    fn instances_are_named_as_perf_prints_them() {
        let model = power9();
        let [root] = instances_named(model, "PowerBUS_Frequency_12")[..] else {
            panic!("one instance")
        };
        assert_eq!(root.param, Some(12));
        assert_eq!(root.name(model), "PowerBUS_Frequency_12");
        // Not a parameter perf prints, or not a metric with one.
        assert!(instances_named(model, "PowerBUS_Frequency_01").is_empty());
        assert!(instances_named(model, "PowerBUS_Frequency_").is_empty());
        assert!(instances_named(model, "PowerBUS_Frequency").is_empty());
        assert!(instances_named(model, "powerbus_freq_0").is_empty());
    }

    #[test]
    fn the_parameter_is_put_into_the_inputs() {
        let model = power9();
        let [root] = instances_named(model, "PowerBUS_Frequency_1")[..] else { panic!() };
        let slot = model.metric(root.metric).slots[0];
        assert!(has_param(model, slot));
        let text = id_text(model, slot, Some(1));
        assert_eq!(
            EventKey::from_expr_id(&text),
            EventKey::from_perf("hv_24x7/PM_PB_CYC,chip=1/"),
            "{text}"
        );
        assert_eq!(id_text(model, slot, None), model.str(model.ids[slot as usize].text));
        let events = param_events(model);
        assert!(events.contains(&("hv_24x7".to_string(), "pm_pb_cyc".to_string())));
        assert!(events.contains(&("hv_24x7".to_string(), "cpm_cs_32mhz_cyc".to_string())));
    }
}
