//! The scheduler: a pure, deterministic function from metrics (each a set of events with the
//! counters they may use) and a PMU model to perf_event groups, plus perf 6.12's own strategy
//! as a baseline and a lower bound on the time slices any schedule needs.
//!
//! A *time slice* is one group of a PMU that must take its turn on the counters: with N
//! groups on a PMU the kernel rotates them and each counts about 1/N of the time. Fewer slices
//! mean less multiplexing error; a metric whose events share one group is exact whatever the
//! rotation, because its ratio is taken over the same time.

use tmetric_model::PerfIds;

use crate::pmu::{Demand, PmuModel};

mod bound;
mod counters;
mod pack;
mod perf;
mod placement;

pub use bound::{lower_bound, together_lower_bound};
pub use counters::{assign, fits};
use pack::tmetric;
use perf::perf;

/// One distinct event to count.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SchedEvent {
    /// The printed name.
    pub name: String,
    /// Index into [`PmuModel::pmus`]; `None` for events that take no hardware counter
    /// (software, tracepoints, `msr`, tool events).
    pub pmu: Option<usize>,
    /// The counters it may use.
    pub demand: Demand,
}

/// One metric's needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SchedMetric {
    /// The metric's name.
    pub name: String,
    /// Indices into [`Request::events`]: what its value needs.
    pub events: Vec<usize>,
    /// Events only its `MetricThreshold` needs: counted, but not required to share the
    /// value's group (they colour the value, they do not change it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threshold_events: Vec<usize>,
    /// Whether perf would group its events (false for `MetricConstraint`,
    /// `MetricgroupNoGroup` or `--metric-no-group`).
    pub grouped: bool,
    /// Whether tmetric packs its events as a unit anyway: true when perf's reason not to
    /// group is one the scheduler models (the NMI watchdog's counter, SMT's halved counters,
    /// the topdown group perf builds itself), false for `NO_GROUP_EVENTS` and
    /// `--metric-no-group`.
    pub pack: bool,
    /// What perf 6.12's strategy needs to know beyond the events (empty: the events in
    /// request order stand for its identifiers).
    #[serde(skip_serializing_if = "PerfMetric::is_empty")]
    pub perf: PerfMetric,
}

/// perf 6.12's view of a root metric (tools/perf/util/metricgroup.c `struct metric`): where
/// it comes in perf's list before sorting, and its identifiers in perf's order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PerfMetric {
    /// The position of the `-M` item that selected it: perf adds items in order, each item's
    /// metrics in table order, every one at the head of its list.
    pub item: usize,
    /// Its place in perf's metric table: jevents sorts by PMU (`default_core` without a
    /// `Unit`), then name.
    pub table: (String, String),
    /// `DefaultMetricgroupName` (`-M Default` is sorted by it).
    pub default_group: String,
    /// The `:modifier` of its `-M` item (`pmu` for the merge check is the table's).
    pub modifier: Option<String>,
    /// Its identifiers in perf's hashmap order (`__add_metric`, `resolve_metric`).
    #[serde(serialize_with = "perf_keys")]
    pub ids: PerfIds<String>,
    /// The identifiers that are events of this request: key and index into
    /// [`Request::events`] (others are tool, software or uncountable inputs).
    pub events: Vec<(String, usize)>,
}

impl PerfMetric {
    /// Nothing known: the strategy uses the metric's events.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty() && self.table.1.is_empty()
    }
}

fn perf_keys<S: serde::Serializer>(ids: &PerfIds<String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ids.iter())
}

/// perf's options that change its metric grouping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfOptions {
    /// `--metric-no-merge`: every metric its own list.
    pub no_merge: bool,
    /// `-M Default` (or no events at all): metrics re-sorted by `DefaultMetricgroupName`.
    pub default: bool,
}

/// What to schedule.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Request {
    /// Distinct events.
    pub events: Vec<SchedEvent>,
    /// Metrics, in selection order.
    pub metrics: Vec<SchedMetric>,
    /// perf's grouping options.
    pub perf: PerfOptions,
}

/// Which strategy to plan with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// tmetric's: counter-aware packing of whole metrics, fewest slices first.
    Tmetric,
    /// perf 6.12's `parse_groups` (tools/perf/util/metricgroup.c) followed by weak-group splitting at open (builtin-stat.c).
    Perf,
}

/// The counter a group member is placed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    /// General-purpose counter `n`.
    General(u8),
    /// Fixed counter `n`.
    Fixed(u8),
    /// Arm's cycle counter.
    Cycle,
    /// A PERF_METRICS field read through the `slots` leader: no counter of its own.
    Metric,
    /// Takes no hardware counter (software or msr event in a hardware group).
    None,
}

/// One group to open, leader first.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Group {
    /// The PMU; `None` for the group of counterless events.
    pub pmu: Option<usize>,
    /// Event indices, leader first.
    pub events: Vec<usize>,
    /// Per member, where the kernel can place it (one valid assignment).
    pub slots: Vec<Slot>,
}

/// How one metric's events were placed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// All its hardware events count together: one group per PMU it uses.
    Together {
        /// The groups, one per PMU.
        groups: Vec<usize>,
    },
    /// Its events are spread over rotating groups, so they were counted over different time.
    Spread {
        /// The groups its events are in.
        groups: Vec<usize>,
        /// Why.
        why: String,
    },
    /// It needs no hardware counter.
    NoCounters,
    /// Some event can never be placed on this machine.
    Impossible {
        /// Why.
        why: String,
    },
}

/// The result of planning.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Schedule {
    /// Groups to open: hardware groups, then at most one group of counterless events.
    pub groups: Vec<Group>,
    /// Events opened alone (perf's ungrouped events and broken weak groups).
    pub singles: Vec<usize>,
    /// Per metric of the request.
    pub placements: Vec<Placement>,
    /// Per PMU: the time slices (groups that rotate).
    pub slices_per_pmu: Vec<usize>,
    /// The order to open groups and singles in, when it matters (perf's strategy: the
    /// kernel rotates them in that order); empty: groups, then singles.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub open: Vec<Opened>,
    /// Per metric, when the strategy decides it: the entries of [`Schedule::open`] whose
    /// events it reads (perf: its event list's), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<Vec<usize>>,
    /// perf's strategy: the event lists it parses, as `perf stat -vv` prints them
    /// (`Parsing metric events '...'`), in its order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub perf_lists: Vec<PerfList>,
    /// tmetric's strategy gave up keeping metrics whole (that took more slices than perf's
    /// strategy): every event was packed as a filler. Its lower bound is then the counting
    /// one, not the one for whole metrics.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub loose: bool,
}

/// One entry of the open order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Opened {
    /// Index into [`Schedule::groups`].
    Group(usize),
    /// An event opened alone (index into [`Request::events`]).
    Single(usize),
}

/// One event list perf builds for its metrics (`metricgroup__build_event_string`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PerfList {
    /// The text perf parses, `{...}:W` for a weak group.
    pub text: String,
    /// The metrics that read it.
    pub metrics: Vec<String>,
    /// Its weak group did not fit the counters when opened: perf reopened its events alone
    /// (its topdown events still behind `slots`) after everything else.
    pub reopened: bool,
}

impl Schedule {
    /// The time slices of the busiest PMU.
    pub fn slices(&self) -> usize {
        self.slices_per_pmu.iter().copied().max().unwrap_or(0)
    }
}

/// One metric's hardware events on one PMU.
#[derive(Debug, Clone)]
struct Part {
    metric: usize,
    pmu: usize,
    events: Vec<usize>,
    pack: bool,
}

fn parts_of(request: &Request) -> Vec<Part> {
    let mut parts = Vec::new();
    for (m, metric) in request.metrics.iter().enumerate() {
        let mut pmus: Vec<usize> =
            metric.events.iter().filter_map(|&e| request.events[e].pmu).collect();
        pmus.sort_unstable();
        pmus.dedup();
        for pmu in pmus {
            let mut events: Vec<usize> = metric
                .events
                .iter()
                .copied()
                .filter(|&e| request.events[e].pmu == Some(pmu))
                .collect();
            events.sort_unstable();
            events.dedup();
            parts.push(Part { metric: m, pmu, events, pack: metric.grouped || metric.pack });
        }
    }
    parts
}

/// Why an event can never be counted on its PMU, if that is so.
fn unplaceable(model: &PmuModel, ev: &SchedEvent) -> Option<String> {
    let pmu = &model.pmus[ev.pmu?];
    if ev.demand.topdown_metric {
        return (pmu.metric_events == 0)
            .then(|| format!("`{}` needs PERF_METRICS, which {} lacks", ev.name, pmu.name));
    }
    (ev.demand.weight(pmu) == 0).then(|| {
        if ev.demand.fixed != 0 && ev.demand.general == 0 {
            format!(
                "`{}` runs only on a fixed counter that {} does not have free",
                ev.name, pmu.name
            )
        } else {
            format!("`{}` may use no counter that {} has", ev.name, pmu.name)
        }
    })
}

/// Plans `request` on `model` with `strategy`.
pub fn schedule(request: &Request, model: &PmuModel, strategy: Strategy) -> Schedule {
    match strategy {
        Strategy::Tmetric => tmetric(request, model),
        Strategy::Perf => perf(request, model),
    }
}

/// The placements known before packing: metrics with an event no counter here can take, and
/// metrics that need no hardware counter.
fn early_placements(request: &Request, model: &PmuModel) -> Vec<Option<Placement>> {
    let all = &request.events;
    request
        .metrics
        .iter()
        .map(|metric| {
            if let Some(why) = metric.events.iter().find_map(|&e| unplaceable(model, &all[e])) {
                Some(Placement::Impossible { why })
            } else if metric.events.iter().all(|&e| all[e].pmu.is_none()) {
                Some(Placement::NoCounters)
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::{CountSource, PmuCounters, Vendor};

    pub(super) fn intel(general: u8) -> PmuModel {
        PmuModel {
            pmus: vec![PmuCounters {
                name: "cpu".into(),
                core: true,
                vendor: Vendor::Intel,
                general,
                fixed: 4,
                fixed_reserved: 0,
                metric_events: 8,
                cycle_counter: false,
                cpus: None,
                source: CountSource::CounterJson,
                adjustments: Vec::new(),
            }],
            nmi_watchdog: false,
            smt_on: true,
        }
    }

    pub(super) fn ev(name: &str, demand: Demand) -> SchedEvent {
        SchedEvent { name: name.into(), pmu: Some(0), demand }
    }

    pub(super) fn general(mask: u32) -> Demand {
        Demand { general: mask, ..Demand::GENERAL }
    }

    #[test]
    fn topdown_needs_slots() {
        let model = intel(8);
        let any = tmetric_catalog::CounterMask::ANY;
        let events = vec![
            ev("topdown-retiring", crate::pmu::intel_demand(0, 0x80, any)),
            ev("slots", crate::pmu::intel_demand(0, 4, any)),
        ];
        assert!(assign(&model.pmus[0], &events, &[0], false).is_none());
        let slots = assign(&model.pmus[0], &events, &[0, 1], false).unwrap();
        assert_eq!(slots, vec![Slot::Metric, Slot::Fixed(3)]);
        let request = Request {
            events,
            metrics: vec![SchedMetric {
                name: "m".into(),
                events: vec![0, 1],
                grouped: true,
                pack: true,
                threshold_events: vec![],
                perf: PerfMetric::default(),
            }],
            perf: PerfOptions::default(),
        };
        let plan = schedule(&request, &model, Strategy::Tmetric);
        assert_eq!(plan.groups[0].events, vec![1, 0], "slots leads");
    }

    #[test]
    fn packing_shares_groups_and_beats_perf() {
        let model = intel(4);
        let events: Vec<SchedEvent> =
            (0..6).map(|i| ev(&format!("e{i}"), general(u32::MAX))).collect();
        // Three metrics of two events each: two fit in one 4-counter group.
        let metrics = vec![
            SchedMetric {
                name: "a".into(),
                events: vec![0, 1],
                grouped: true,
                pack: true,
                threshold_events: vec![],
                perf: PerfMetric::default(),
            },
            SchedMetric {
                name: "b".into(),
                events: vec![2, 3],
                grouped: true,
                pack: true,
                threshold_events: vec![],
                perf: PerfMetric::default(),
            },
            SchedMetric {
                name: "c".into(),
                events: vec![4, 5],
                grouped: true,
                pack: true,
                threshold_events: vec![],
                perf: PerfMetric::default(),
            },
            SchedMetric {
                name: "d".into(),
                events: vec![0, 2],
                grouped: true,
                pack: true,
                threshold_events: vec![],
                perf: PerfMetric::default(),
            },
        ];
        let request = Request { events, metrics, perf: PerfOptions::default() };
        let ours = schedule(&request, &model, Strategy::Tmetric);
        let perf = schedule(&request, &model, Strategy::Perf);
        assert_eq!(ours.slices(), 2);
        assert_eq!(perf.slices(), 4);
        assert_eq!(lower_bound(&request, &model), vec![2]);
        for p in &ours.placements {
            assert!(matches!(p, Placement::Together { .. }), "{p:?}");
        }
    }

    #[test]
    fn too_big_metrics_are_split_and_say_so() {
        let model = intel(2);
        let events: Vec<SchedEvent> =
            (0..5).map(|i| ev(&format!("e{i}"), general(u32::MAX))).collect();
        let request = Request {
            events,
            metrics: vec![SchedMetric {
                name: "big".into(),
                events: vec![0, 1, 2, 3, 4],
                grouped: true,
                pack: true,
                threshold_events: vec![],
                perf: PerfMetric::default(),
            }],
            perf: PerfOptions::default(),
        };
        let plan = schedule(&request, &model, Strategy::Tmetric);
        assert_eq!(plan.slices(), 3);
        assert!(
            matches!(&plan.placements[0], Placement::Spread { why, .. } if why.contains("do not fit"))
        );
    }

    fn metric(name: &str, events: Vec<usize>) -> SchedMetric {
        SchedMetric {
            name: name.into(),
            events,
            grouped: true,
            pack: true,
            threshold_events: vec![],
            perf: PerfMetric::default(),
        }
    }

    #[test]
    fn the_exact_search_packs_or_proves_no_packing_exists() {
        let model = intel(2);
        let all: Vec<SchedEvent> = ["a", "b", "c", "d"].map(|n| ev(n, general(0b11))).into();
        let items: Vec<(usize, Vec<usize>)> =
            vec![(0, vec![0, 1]), (0, vec![2, 3]), (0, vec![0]), (0, vec![3])];
        let mine = [0, 1, 2, 3];
        let mut budget = 1_000;
        match pack::pack_into(&model, &all, &items, &mine, 0, 2, &mut budget) {
            pack::Search::Packed(groups) => assert_eq!(groups, vec![vec![0, 1], vec![2, 3]]),
            _ => panic!("two groups of two hold four events"),
        }
        assert!(matches!(
            pack::pack_into(&model, &all, &items, &mine, 0, 1, &mut budget),
            pack::Search::Refuted
        ));
        let mut none = 0;
        assert!(matches!(
            pack::pack_into(&model, &all, &items, &mine, 0, 1, &mut none),
            pack::Search::Unknown
        ));
    }

    #[test]
    fn the_bound_for_whole_metrics_rises_past_what_the_search_refutes() {
        // Four events on two counters: two groups by counting. But {a,b} and {a,c} cannot
        // share a group, and d finds no room beside either: whole metrics need three.
        let model = intel(2);
        let request = Request {
            events: ["a", "b", "c", "d"].map(|n| ev(n, general(0b11))).into(),
            metrics: vec![metric("ab", vec![0, 1]), metric("ac", vec![0, 2]), metric("d", vec![3])],
            perf: PerfOptions::default(),
        };
        assert_eq!(lower_bound(&request, &model), vec![2]);
        assert_eq!(together_lower_bound(&request, &model), vec![3]);
        let plan = schedule(&request, &model, Strategy::Tmetric);
        assert_eq!(plan.slices(), 3);
        assert!(!plan.loose);
    }
}
