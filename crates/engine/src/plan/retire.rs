//! Retire latencies (`:R` inputs): the event each one samples, the metrics that read it,
//! the values a file gives (sampled values travel in each sample's `EvalInput`), and the
//! warning when they are not sampled.

use tmetric_catalog::{Id, IdKind, Model};
use tmetric_runtime::event;
use tmetric_runtime::{CounterEvent, Environment, Sysfs};

use super::{Plan, Source, Warning, id_name};
use crate::Host;
use crate::pmu;

/// A retire-latency input and the sampling event behind it.
#[derive(Debug, Clone)]
pub struct RetireEvent {
    /// The input's name (`cpu_core/MEM_INST_RETIRED.STLB_HIT_LOADS/R`).
    pub name: String,
    /// The metrics that read it.
    pub metrics: Vec<String>,
    /// The event to sample (the same event without `R`), or why there is none.
    pub event: Result<CounterEvent, String>,
}

/// The event a `:R` input samples: the same event and PMU, without the `R` modifier.
fn retire_base(
    model: &Model,
    id: &Id,
    sysfs: &Sysfs,
    env: &Environment,
) -> Result<CounterEvent, String> {
    let display = id_name(model, id);
    let modifiers: String = model.str(id.modifiers).chars().filter(|&c| c != 'R').collect();
    let terms = model.str(id.terms);
    let (pmu, event) = match id.kind {
        IdKind::Event(index) => {
            let json = &model.events.at(index as usize);
            let pmu = model.str(json.pmu);
            let pmu = if pmu::is_core_name(pmu) && !sysfs.has_pmu(pmu) {
                sysfs.core_pmu().ok_or_else(|| env.no_hardware_pmu().to_string())?
            } else {
                pmu.to_string()
            };
            (pmu, model.str(json.encoding).to_string())
        }
        _ => {
            let pmu = model.str(id.pmu);
            let pmu = if pmu.is_empty() {
                sysfs.core_pmu().ok_or_else(|| env.no_hardware_pmu().to_string())?
            } else {
                pmu.to_string()
            };
            (pmu, model.str(id.event).to_string())
        }
    };
    let terms = if terms.is_empty() { event } else { format!("{event},{terms}") };
    event::resolve_on_pmu(&pmu, &terms, &modifiers, &display, sysfs).map_err(|e| e.to_string())
}

impl Plan {
    /// One retire-latency input's value in cycles (`--retire-latency FILE`), replacing an
    /// earlier one.
    pub fn set_retire_latency_of(&mut self, name: String, cycles: f64) {
        self.retire_latency.retain(|(n, _)| *n != name);
        self.retire_latency.push((name, cycles));
    }

    /// Hosts the roots from `first_root` on, and lists the retire latencies they read, with a
    /// warning that they are not sampled.
    pub(super) fn note_retire_latency(&mut self, first_root: usize, machine: &Host) {
        for r in first_root..self.roots.len() {
            let probes = self.probes_of(self.roots[r].model).to_vec();
            self.host_root(r, &probes);
        }
        for root in &self.roots[first_root..] {
            let model = root.model;
            let metric = model.str(model.metric(root.metric).name).to_string();
            for (slot, row) in root.slot_rows.iter().enumerate() {
                let Some(row) = row else { continue };
                if self.rows[*row].source != Source::RetireLatency {
                    continue;
                }
                let name = self.rows[*row].name.clone();
                match self.retire_events.iter_mut().find(|r| r.name == name) {
                    Some(r) => {
                        if !r.metrics.contains(&metric) {
                            r.metrics.push(metric.clone());
                        }
                    }
                    None => {
                        let event =
                            retire_base(model, &model.ids[slot], machine.sysfs(), machine.env());
                        self.retire_events.push(RetireEvent {
                            name,
                            metrics: vec![metric.clone()],
                            event,
                        });
                    }
                }
            }
        }
        let retire: Vec<String> = self
            .roots
            .iter()
            .filter(|root| {
                root.slot_rows
                    .iter()
                    .flatten()
                    .any(|&row| self.rows[row].source == Source::RetireLatency)
            })
            .map(|root| root.model.str(root.model.metric(root.metric).name).to_string())
            .collect();
        if !retire.is_empty() {
            self.warnings.push(Warning::RetireLatencyUnsampled { metrics: retire });
        }
    }
}
