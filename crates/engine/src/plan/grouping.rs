//! Whether a metric's events share a group: perf's reasons not to (`NoGroup`) and whether
//! tmetric's scheduler packs them as a unit anyway.

use tmetric_catalog::Constraint;

use super::{Pick, PlanOptions};
use crate::pmu::PmuModel;

/// Why perf does not put a metric's events in one group (`metric__group_events` in perf's
/// `util/metricgroup.c`); tmetric's scheduler reads the kind, the printer the wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoGroup {
    /// `--metric-no-group`.
    MetricNoGroupFlag,
    /// The metric group the metric was selected by is in its `MetricgroupNoGroup`.
    MetricgroupNoGroup(String),
    /// `MetricConstraint: NO_GROUP_EVENTS`.
    NoGroupEvents,
    /// `MetricConstraint: NO_GROUP_EVENTS_NMI` and the NMI watchdog is on.
    NoGroupEventsNmi,
    /// `MetricConstraint: NO_GROUP_EVENTS_SMT` and SMT is on.
    NoGroupEventsSmt,
}

/// Serialized as its wording, as `plan --json` has always printed it.
impl serde::Serialize for NoGroup {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for NoGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoGroup::MetricNoGroupFlag => f.write_str("--metric-no-group"),
            NoGroup::MetricgroupNoGroup(group) => write!(f, "MetricgroupNoGroup of `{group}`"),
            NoGroup::NoGroupEvents => f.write_str("MetricConstraint NO_GROUP_EVENTS"),
            NoGroup::NoGroupEventsNmi => {
                f.write_str("MetricConstraint NO_GROUP_EVENTS_NMI with the NMI watchdog on")
            }
            NoGroup::NoGroupEventsSmt => {
                f.write_str("MetricConstraint NO_GROUP_EVENTS_SMT with SMT on")
            }
        }
    }
}

/// Whether a root's events should share a group, and if not why, following perf's
/// `metric__group_events` (`tools/perf/util/metricgroup.c`).
pub fn grouping(pick: &Pick, options: &PlanOptions, pmus: &PmuModel) -> Result<(), NoGroup> {
    let model = pick.model;
    let metric = model.metric(pick.metric);
    if options.no_group {
        return Err(NoGroup::MetricNoGroupFlag);
    }
    if model
        .str(metric.no_group)
        .split(';')
        .any(|g| !g.is_empty() && g.eq_ignore_ascii_case(&pick.item))
    {
        return Err(NoGroup::MetricgroupNoGroup(pick.item.clone()));
    }
    match metric.constraint {
        Constraint::None => Ok(()),
        Constraint::NoGroupEvents => Err(NoGroup::NoGroupEvents),
        Constraint::NoGroupEventsNmi if pmus.nmi_watchdog => Err(NoGroup::NoGroupEventsNmi),
        Constraint::NoGroupEventsSmt if pmus.smt_on => Err(NoGroup::NoGroupEventsSmt),
        _ => Ok(()),
    }
}

/// Whether tmetric packs a root's events as a unit even where perf would not group them:
/// yes unless `--metric-no-group` or `NO_GROUP_EVENTS`, because the other reasons (the NMI
/// watchdog's counter, SMT's halved counters, perf's own topdown grouping) are modelled by
/// the scheduler.
pub fn packs(pick: &Pick, options: &PlanOptions) -> bool {
    !options.no_group && pick.model.metric(pick.metric).constraint != Constraint::NoGroupEvents
}
