//! The plan a measurement counts, from what its flags ask ([`Request`]): `-e` lists with their
//! `--filter`s, `-G`, `-M` (or metrics chosen already), perf's default and `-d` events,
//! `--cputype`, `--for-each-cgroup`, `--all-user`/`--all-kernel`, on the machine found. `stat`,
//! `record`, `serve`, `plan` and the region API build their plans here; the choices themselves are
//! [`crate::defaults`]' and [`crate::select`]'s.

use tmetric_catalog::Model;
use tmetric_runtime::EventError;

use crate::contract::Defaults;
use crate::defaults::{self, Uncountable, detailed_events};
use crate::events::NoCorePmu;
use crate::select::Miss;
use crate::{CgroupError, CpuTypeError, FilterError, Host, Pick, Plan, PlanOptions, Source};

/// What a plan is built from: the flags of a measurement, typed.
#[derive(Debug, Clone)]
pub struct Request {
    /// `-e` lists, in the order given.
    pub events: Vec<String>,
    /// `--filter`s, each with the index in `events` of the list it follows.
    pub filters: Vec<(usize, String)>,
    /// The metrics to count.
    pub metrics: Metrics,
    /// `--model`: the model vendor events are looked up in (default: the machine's).
    pub model: Option<&'static Model>,
    /// `--cputype`: the `-e` events and hybrid metrics of one core PMU only.
    pub cputype: Option<String>,
    /// perf's `-G`: the cgroups of the `-e` events given before it.
    pub cgroups: Vec<String>,
    /// perf's `--for-each-cgroup`: every event once per cgroup.
    pub for_each_cgroup: Vec<String>,
    /// How many `-d`s.
    pub detailed: u8,
    /// `-a`.
    pub all_cpus: bool,
    /// `-C`'s list as written (its errors are the target's to say).
    pub cpu_list: Option<String>,
    /// Uncore boxes print apart (`-A`, `--no-merge`); every other mode merges them.
    pub per_box: bool,
    /// A task's counters count the children it creates (perf's default; off with `-i`).
    pub inherit: bool,
    /// `-n`: count nothing.
    pub null_run: bool,
    /// `--metric-no-threshold`, `--metric-no-group`, `--metric-no-merge`, the strategy
    /// (`system_wide` is the request's own: `-a` or `-C`).
    pub options: PlanOptions,
    /// `--all-user`: every event counts in user mode only.
    pub user_only: bool,
    /// `--all-kernel`: every event counts in kernel mode only.
    pub kernel_only: bool,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            events: Vec::new(),
            filters: Vec::new(),
            metrics: Metrics::Items(Vec::new()),
            model: None,
            cputype: None,
            cgroups: Vec::new(),
            for_each_cgroup: Vec::new(),
            detailed: 0,
            all_cpus: false,
            cpu_list: None,
            per_box: false,
            inherit: true,
            null_run: false,
            options: PlanOptions::default(),
            user_only: false,
            kernel_only: false,
        }
    }
}

impl Request {
    /// Counting CPUs rather than a task: `-a` or `-C`.
    pub fn system_wide(&self) -> bool {
        self.all_cpus || self.cpu_list.is_some()
    }
}

/// Which metrics a [`Request`] counts.
#[derive(Debug, Clone)]
pub enum Metrics {
    /// `-M`'s items, looked up on the machine. None, and no `-e` either: perf's default
    /// selection for the output contract (`engine::defaults::default_selection`).
    Items(Vec<String>),
    /// Metrics chosen already (`serve`'s, each series once), counted without the explicit
    /// `-M`'s reporting.
    Picks(Vec<Pick>),
}

/// Where "try it there" advice comes from: the simulated machines (`--pmu-sim NAME`), which
/// the engine does not know. `Hints::default()` gives none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hints {
    /// The flag of a simulated machine whose model defines a metric item, and that model,
    /// preferring a machine of the given model.
    pub metric: Option<MetricHint>,
    /// A simulated machine whose model has a vendor event, and that model.
    pub event: Option<EventHint>,
}

/// The flag of a simulated machine whose model defines a metric item, and that model.
pub type MetricHint = fn(&str, Option<&Model>) -> Option<(String, String)>;

/// A simulated machine whose model has a vendor event, and that model.
pub type EventHint = fn(&str) -> Option<(&'static str, String)>;

impl Hints {
    fn metric(&self, item: &str, prefer: Option<&Model>) -> Option<(String, String)> {
        self.metric.and_then(|hint| hint(item, prefer))
    }
}

/// A built plan, with what the front end says about it before counting.
#[derive(Debug)]
pub struct Setup {
    /// The plan.
    pub plan: Plan,
    /// CPU-model metrics selected on a machine without a hardware PMU: perf prints their
    /// events `<not supported>` and goes on, and scripts rely on that, so the front end says
    /// why once and counts the rest. `None` for perf's default views, which skip such metrics
    /// without a word, and where the contract refuses a run that opens nothing (the refusal
    /// says why).
    pub uncountable: Option<Uncountable>,
}

/// Why a plan cannot be built, naming the flag.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `--cputype` names no core PMU.
    #[error(transparent)]
    CpuType(#[from] CpuTypeError),
    /// An `-e` list cannot be counted here.
    #[error("-e {list}")]
    Events {
        /// The list as given.
        list: String,
        /// Why (boxed: the resolver's error carries the list's text and position).
        #[source]
        why: Box<EventsWhy>,
    },
    /// A `--filter` cannot be set.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// `-G` cannot be applied.
    #[error("-G")]
    Cgroups(#[source] CgroupError),
    /// A `-M` item selects nothing.
    #[error(transparent)]
    Select(#[from] Miss),
    /// perf's default events cannot be resolved.
    #[error("perf's default events")]
    DefaultEvents(#[source] EventError),
    /// `-d`'s events cannot be resolved.
    #[error("-d's events")]
    Detailed(#[source] EventError),
    /// `--cputype` leaves none of the `-M` metrics.
    #[error("--cputype {kind}: none of the selected metrics is a `{pmu}` metric")]
    NoCputypeMetric {
        /// `--cputype` as given.
        kind: String,
        /// The core PMU it names.
        pmu: String,
    },
}

/// Why an `-e` list cannot be counted.
#[derive(Debug, thiserror::Error)]
pub enum EventsWhy {
    /// The resolver's error.
    #[error(transparent)]
    Event(#[from] EventError),
    /// A vendor event of the machine's model, on a machine without its core PMU.
    #[error(transparent)]
    NoCorePmu(#[from] NoCorePmu),
}

/// Builds the plan `request` asks for on `host`.
pub fn build(request: &Request, host: &Host, hints: Hints) -> Result<Setup, SetupError> {
    build_with(request, host, hints, false)
}

/// [`build`], keeping perf 6.12's view of every metric (its identifiers in perf's order)
/// whatever the strategy when `perf_view`: `tmetric plan` schedules perf's strategy beside
/// tmetric's.
pub(crate) fn build_with(
    request: &Request,
    host: &Host,
    hints: Hints,
    perf_view: bool,
) -> Result<Setup, SetupError> {
    let sysfs = host.sysfs();
    let system_wide = request.system_wide();
    // `-C`'s list as written: its errors are the target's to say, after the plan.
    let cpus = request.cpu_list.as_deref().and_then(tmetric_runtime::sysfs::parse_cpu_list);
    let mut plan = Plan::new(host.literals(request.all_cpus, cpus.as_deref()));
    plan.set_per_box(request.per_box);
    plan.set_inherit(request.inherit);
    if request.null_run {
        return Ok(Setup { plan, uncountable: None });
    }
    let cputype = match &request.cputype {
        Some(text) => Some(crate::events::cputype_pmu(sysfs, text)?),
        None => None,
    };
    let tables = host.tables(request.model);
    // `-e` is read as every front end reads it under the output contract in use.
    let resolver = crate::events::resolver(sysfs, &tables, plan.contract())
        .with_pmu_filter(cputype.as_deref());
    plan.set_tool_values(crate::tool_pmu::values(host, request.all_cpus, cpus.as_deref()));
    for (i, list) in request.events.iter().enumerate() {
        let rows = plan.rows().len();
        plan.add_event_lists(std::slice::from_ref(list), &resolver).map_err(|e| {
            let hint = |event: &str| hints.event.and_then(|hint| hint(event));
            let why = match crate::events::without_core_pmu(&e, tables.model(), sysfs, hint) {
                Some(better) => EventsWhy::NoCorePmu(better),
                None => EventsWhy::Event(e),
            };
            SetupError::Events { list: list.clone(), why: Box::new(why) }
        })?;
        for (_, filter) in request.filters.iter().filter(|(l, _)| *l == i) {
            plan.set_filter(rows..plan.rows().len(), filter)?;
        }
    }
    if !request.cgroups.is_empty() {
        // perf's -G applies to the events given before it; metrics come later.
        plan.assign_cgroups(&request.cgroups).map_err(SetupError::Cgroups)?;
    }
    let (mut picks, explicit) = match &request.metrics {
        Metrics::Items(items) => {
            let hint = |item: &str| hints.metric(item, None);
            (crate::select::on_machine(items, host, hint)?, !items.is_empty())
        }
        Metrics::Picks(picks) => (picks.clone(), false),
    };
    let contract = plan.contract();
    let mut default_view = false;
    let mut metric_group_defaults = false;
    let defaulted_selection = matches!(&request.metrics, Metrics::Items(items) if items.is_empty());
    if request.events.is_empty() && defaulted_selection {
        let chosen =
            defaults::default_selection(contract.defaults, system_wide, request.detailed, host);
        if let Some(events) = &chosen.events {
            plan.add_event_lists(&[events.join(",")], &resolver)
                .map_err(SetupError::DefaultEvents)?;
        }
        picks = chosen.picks;
        default_view = chosen.default_view;
        metric_group_defaults = chosen.metric_groups;
    }
    // perf 7.x's -d only chooses more default metric groups: with -e it adds nothing.
    if request.detailed > 0 && contract.defaults == Defaults::Events {
        plan.add_event_lists(&[detailed_events(request.detailed).join(",")], &resolver)
            .map_err(SetupError::Detailed)?;
    }
    if let (Some(kind), Some(pmu)) = (&request.cputype, &cputype) {
        // Hybrid metrics name their PMU (`cpu_core`, `cpu_atom`); others apply to both.
        picks.retain(|p| {
            let metric_pmu = p.model.str(p.model.metric(p.metric).pmu);
            metric_pmu == pmu.as_str() || !(metric_pmu == "cpu_core" || metric_pmu == "cpu_atom")
        });
        if picks.is_empty() && explicit {
            return Err(SetupError::NoCputypeMetric { kind: kind.clone(), pmu: pmu.clone() });
        }
    }
    let options = PlanOptions { system_wide, ..request.options };
    let rows_before = plan.rows().len();
    let perf_view = perf_view || options.strategy == crate::Strategy::Perf;
    plan.add_metrics_with(&picks, host, &options, explicit, perf_view);
    if default_view {
        plan.show_as_default_view(rows_before);
    }
    if metric_group_defaults {
        plan.show_default_events(rows_before);
    }
    if request.user_only || request.kernel_only {
        plan.exclude_modes(request.kernel_only, request.user_only);
    }
    if !request.for_each_cgroup.is_empty() {
        plan.expand_cgroups(&request.for_each_cgroup);
    }
    let defaulted = default_view || metric_group_defaults;
    let refused = contract.needs_an_event
        && plan.rows().iter().all(|r| matches!(r.source, Source::Missing(_)));
    let hint = |item: &str, model| hints.metric(item, Some(model));
    let uncountable = defaults::uncountable(&plan, host, hint).filter(|_| !defaulted && !refused);
    Ok(Setup { plan, uncountable })
}
