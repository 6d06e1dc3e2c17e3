//! The collector: one engine [`Session`] for the host and one per counted cgroup (the plan
//! expanded for that cgroup, as perf's `--for-each-cgroup` does), read a few times per
//! interval and evaluated at each interval's end. Cgroups are discovered again every interval:
//! new ones are opened while the descriptor budget allows, vanished ones closed, and what is
//! left out is kept with the reason for `/metrics`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use tmetric_catalog::Model;
use tmetric_engine::aggr::{self, Aggregation};
use tmetric_engine::session::{Session, SessionError, counts_on_hardware};
use tmetric_engine::view::{Partition, UnitId};
use tmetric_engine::{Bar, EvalInput, Placement, Plan, RootResult, Source};
use tmetric_runtime::{Environment, Snapshot, Syscalls, Sysfs, Target as CountTarget, ToolEvent};

use crate::cgroups::{self, Selection};
use crate::names::{self, Exported};

/// Descriptors kept back from the budget for HTTP connections, sysfs reads, the signal pipe
/// and the HTTP runtime, so counting never starves the server (half of a lower limit).
pub const RESERVED_DESCRIPTORS: usize = 256;

/// The descriptors counting may take under an open-file limit of `limit`.
pub fn budget_under(limit: u64) -> usize {
    let limit = limit as usize;
    limit.saturating_sub(RESERVED_DESCRIPTORS.min(limit / 2))
}

/// An aggregation unit: its label (`("cpu", "3")`; `None` for the whole target) and CPUs.
pub type UnitSpec = (Option<(&'static str, String)>, Vec<i32>);

/// The machine being counted.
#[derive(Debug, Clone)]
pub struct MachineInfo {
    /// Its sysfs tree.
    pub sysfs: Sysfs,
    /// Its procfs root.
    pub proc_root: PathBuf,
    /// The host name (`host` label of `tmetric_host_info`).
    pub host: String,
    /// The catalogue model of its CPU, when known.
    pub model: Option<&'static Model>,
    /// The simulated PMU's name (`--pmu-sim`).
    pub simulated: Option<String>,
    /// The cgroup v2 mount.
    pub cgroup_mount: Option<PathBuf>,
    /// Where the kubelet keeps `pods/` and `containers/` (`--kubelet-log-dir`); `None`: pods
    /// are not named.
    pub kubelet_log_dir: Option<PathBuf>,
}

/// What to count and how often.
#[derive(Debug, Clone)]
pub struct Options {
    /// The interval metrics are computed over.
    pub interval: Duration,
    /// Reads per interval when a counter can be multiplexed (for the error bars; at least 2);
    /// a plan of counters that never are is read once ([`Collector::reads_per_interval`]).
    pub reads: u32,
    /// At most this many event descriptors (events x CPUs x cgroups); `None`: the open-file
    /// limit less [`RESERVED_DESCRIPTORS`].
    pub max_descriptors: Option<usize>,
    /// Partition counts by CPU, core, die or socket; `None`: one value per host or cgroup.
    pub per: Option<Aggregation>,
    /// Count the whole host too.
    pub host: bool,
    /// Which cgroups.
    pub selection: Selection,
    /// Which series `/metrics` holds per target (`--metrics-detail`).
    pub detail: Detail,
}

/// Which series `/metrics` (and `serve --once`) holds per host and cgroup, each level adding to
/// the one before (`--metrics-detail`): series per target are what a fleet's cardinality is
/// made of. The exporter's own families, the cgroups counted and left out, and the notes are
/// served at every level; `/json` holds everything whatever the level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    /// Each metric's gauge, and `tmetric_metric_missing_info` for one without a value (so a
    /// value is never silently absent).
    Metrics,
    /// Also per metric: its running share, whether its inputs were counted together, its error
    /// bar and whether it crossed its threshold.
    Quality,
    /// Also each counter's raw count and its group's enabled and running times: what the
    /// recording rules of `tmetric rules` read.
    Events,
}

impl From<SessionError> for CollectError {
    fn from(err: SessionError) -> CollectError {
        CollectError::Host(err)
    }
}

/// Why the collector could not start.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The host's session failed.
    // Not a `source` as well: error chains would say the cause twice.
    #[error("cannot count on the host: {0}")]
    Host(SessionError),
    /// The online CPUs are unknown.
    #[error("cannot list the online CPUs: {0}")]
    Cpus(String),
    /// Enabling failed.
    #[error("cannot enable the counters: {0}")]
    Enable(String),
    /// Nothing to count.
    #[error("nothing to count: the plan has no event or metric (give -e or -M)")]
    Empty,
    /// No cgroup mount although cgroups were asked for.
    #[error(
        "no cgroup2 (or cgroup v1 perf_event) mount in /proc/self/mounts: mount one, or serve without --cgroup/--for-each-cgroup"
    )]
    NoCgroupMount,
    /// `-e user_time` or `system_time`: the CPU time of a workload, which serve does not run.
    #[error(
        "-e {0}: perf's {0} is the CPU time of the workload perf runs, and serve runs none; count the CPU time of the host or of each cgroup with -e task-clock (exported as tmetric_event_total, in ns), or leave {0} out"
    )]
    WorkloadTime(&'static str),
}

/// One unit's values over an interval.
#[derive(Debug, Clone)]
pub struct UnitValues {
    /// The unit's label (`("cpu", "3")`, `("socket", "0")`), `None` for the whole target.
    pub label: Option<(&'static str, String)>,
    /// The CPUs summed.
    pub cpus: Vec<i32>,
    /// Per root.
    pub results: Vec<RootResult>,
    /// Per root: the smallest share of the interval its counted inputs ran on a counter
    /// (`None` when none was enabled: a cgroup that did not run).
    pub shares: Vec<Option<f64>>,
    /// Per root: its error bar.
    pub bars: Vec<Bar>,
    /// Per spec: raw count, enabled and running ns over the interval (`--once`'s gauges).
    pub totals: Vec<Option<(u64, u64, u64)>>,
}

/// A target's last completed interval.
#[derive(Debug, Clone)]
pub struct Computed {
    /// Seconds covered.
    pub seconds: f64,
    /// Per unit.
    pub units: Vec<UnitValues>,
    /// Why values are missing or partial, and what the kernel refused or split (typed: the
    /// exposition words them).
    pub notes: Vec<tmetric_engine::Note>,
}

/// The host or one cgroup, counted.
pub struct Counted<S: Syscalls> {
    /// The cgroup path (`None`: the host).
    pub cgroup: Option<String>,
    /// Labels from the path.
    pub labels: Vec<(&'static str, String)>,
    /// The engine session.
    pub session: Session<S>,
    /// Cumulative reads since the interval began (the first is its start): the first `used`
    /// of them; the rest are kept for their vectors, so reading allocates nothing.
    reads: Vec<Snapshot>,
    used: usize,
    /// Per read of the interval, its counts since the interval's start (kept for their
    /// vectors as `reads` are).
    relative: Vec<Snapshot>,
    /// The latest read (a scheduled one or a scrape's), for the cumulative counters.
    pub latest: Snapshot,
    /// Why the latest read failed, if it did (the previous `latest` is kept).
    read_error: Option<String>,
    /// The cgroup's id (the inode of its directory; `None`: the host): a cgroup removed and
    /// made again under the same path has a new one and is counted anew.
    pub id: Option<u64>,
    /// A cgroup without child cgroups at the last walk (its counts are its own tasks' only).
    pub leaf: bool,
    started: Instant,
    /// When it was opened: `-e duration_time` counts from here.
    opened: Instant,
    /// Descriptors it holds.
    pub descriptors: usize,
    /// Its last interval, once one has ended.
    pub last: Option<Computed>,
    /// Per root: its inputs counted in one group that the kernel did not split.
    pub together: Vec<bool>,
    /// Per spec: the `group` label of the group it is read in and that group's number
    /// ([`read_group_ids`]).
    pub group_ids: Vec<(String, usize)>,
    /// The labels of its every sample ([`crate::expo::target_labels`]), made once.
    pub base_labels: crate::expo::Labels,
}

/// What the last interval ended with.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Intervals ended.
    pub intervals: u64,
    /// When the last one ended.
    pub ended: Option<SystemTime>,
    /// Its length.
    pub seconds: f64,
    /// CPU time the collector thread spent in it (reads, evaluation, discovery, rendering
    /// excluded), in seconds.
    pub cpu_seconds: f64,
    /// CPU time of every interval so far.
    pub cpu_seconds_total: f64,
    /// CPU time spent rendering `/metrics` and `/json` so far (up to the last interval).
    pub render_cpu_seconds_total: f64,
    /// CPU time of the interval going on, so far.
    interval_cpu_ns: u64,
    /// Cgroups opened since the start (after the first discovery).
    pub added: u64,
    /// Cgroups closed because they vanished.
    pub removed: u64,
    /// The walk was cut at [`cgroups::MAX_LISTED`].
    pub cut: bool,
    /// Read errors, by target, in the last interval.
    pub errors: Vec<String>,
    /// Read errors of the interval going on.
    pending: Vec<String>,
    /// Targets whose every read failed in the last interval.
    pub failed_targets: usize,
}

/// The collector (see the module documentation).
pub struct Collector<S: Syscalls + Clone> {
    sys: S,
    base: Plan,
    env: Environment,
    /// The machine.
    pub machine: MachineInfo,
    /// The options.
    pub options: Options,
    /// The online CPUs.
    pub cpus: Vec<u32>,
    /// The units counts are split into.
    pub units: Vec<UnitSpec>,
    /// The host, when counted.
    pub host: Option<Counted<S>>,
    /// Counted cgroups by path.
    pub cgroups: BTreeMap<String, Counted<S>>,
    /// Cgroups left out, with the reason.
    pub left_out: BTreeMap<String, String>,
    /// The descriptor budget.
    pub budget: usize,
    /// Descriptors one target takes.
    pub cost: usize,
    /// How each root of the plan is exported.
    pub exports: Vec<Exported>,
    /// Per root, its family's help text: made once, at the start, since the descriptions
    /// are inflated on first use and the help never changes.
    pub helps: Vec<String>,
    /// Per root, its `model` and `pmu` labels (the PMU for hybrid models' metrics only, else
    /// empty): made once, as every target's every metric sample carries them.
    pub root_models: Vec<(String, &'static str)>,
    /// Per spec: the name of its row (as metric formulas name the event: `topdown-retiring`,
    /// `msr/tsc/`), the `event` label.
    pub event_names: Vec<String>,
    /// The last interval's status.
    pub status: Status,
    /// When the targets were last read.
    pub last_read: Instant,
    /// Pods' names at the last discovery.
    pub kubernetes: crate::kubernetes::Names,
    /// Whether a counter of the plan can be multiplexed (takes a hardware counter).
    multiplexable: bool,
    /// The cgroup tree's listings, kept from one discovery to the next.
    walker: cgroups::Walker,
}

/// Per spec: the label and number of the group it is read in (`read`: the session's
/// [`Session::read_groups`]), so there is one pair of group times per group the kernel
/// reads: software events the plan opens alone are read as one group per CPU and cgroup, and
/// a group the kernel refused is read in its parts. The label is a hash of the group's event
/// names in order (`g` and 8 hexadecimal digits), so it names the same group whatever else
/// `-M` adds. A spec in no group read (its open failed) is a group of its own.
pub fn read_group_ids(read: &[Vec<usize>], names: &[String]) -> Vec<(String, usize)> {
    (0..names.len())
        .map(|s| match read.iter().position(|g| g.contains(&s)) {
            Some(g) => {
                let members: Vec<&str> = read[g].iter().map(|&m| names[m].as_str()).collect();
                (format!("g{:08x}", fnv(&members.join(","))), g)
            }
            None => (format!("g{:08x}", fnv(&names[s])), read.len() + s),
        })
        .collect()
}

/// FNV-1a, 32 bits: stable across builds and platforms (the std hasher is not).
fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// A unit's label, CPUs and per spec `(raw, enabled ns, running ns)`.
pub type UnitTotals = (Option<(&'static str, String)>, Vec<i32>, Vec<Option<(u64, u64, u64)>>);

/// Per spec, `(raw, enabled ns, running ns)` summed over the snapshot's CPUs.
fn sum_cpus(snapshot: &Snapshot, specs: usize) -> Vec<Option<(u64, u64, u64)>> {
    (0..specs)
        .map(|s| {
            let cpus = snapshot.events.get(s)?.as_ref()?;
            let mut t = (0u64, 0u64, 0u64);
            for c in cpus {
                t.0 = t.0.wrapping_add(c.raw.value);
                t.1 = t.1.wrapping_add(c.raw.enabled);
                t.2 = t.2.wrapping_add(c.raw.running);
            }
            Some(t)
        })
        .collect()
}

/// This thread's CPU time in ns.
pub fn thread_cpu_ns() -> u64 {
    tmetric_runtime::sys::thread_cpu_ns()
}

fn plan_cost(plan: &Plan, cpus: &[u32]) -> usize {
    plan.specs()
        .iter()
        .map(|s| match &s.cpus {
            Some(mask) => cpus.iter().filter(|c| mask.contains(c)).count(),
            None => cpus.len(),
        })
        .sum()
}

fn together(plan: &Plan, splits: &[tmetric_runtime::Split]) -> Vec<bool> {
    plan.roots()
        .iter()
        .map(|root| {
            let grouped = match &root.placement {
                Placement::Together { groups } => groups.len() <= 1,
                Placement::NoCounters => true,
                _ => false,
            };
            let split = root.slot_rows.iter().flatten().any(|&r| match plan.rows()[r].source {
                Source::Counter(s) => splits.iter().any(|sp| sp.events.contains(&s)),
                _ => false,
            });
            grouped && !split
        })
        .collect()
}

/// The tool events `-e` asked for (`duration_time`, perf 7.x's tool PMU facts): shown rows
/// of `plan` that no counter counts, with their printed names; a metric's own
/// `duration_time` (a row that hosts metrics) is its input, not an event asked for.
pub fn tool_rows(plan: &Plan) -> Vec<(String, ToolEvent)> {
    plan.rows()
        .iter()
        .filter(|r| r.show && r.roots.is_empty())
        .filter_map(|r| match r.source {
            Source::Tool(tool) => Some((r.name.clone(), tool)),
            _ => None,
        })
        .collect()
}

impl<S: Syscalls> Counted<S> {
    /// Seconds since it was opened, what `-e duration_time` has counted.
    pub fn seconds_open(&self) -> f64 {
        self.opened.elapsed().as_secs_f64()
    }
}

impl<S: Syscalls + Clone> Collector<S> {
    /// Opens the host's session (when counted) and the cgroups found now.
    pub fn new(
        mut sys: S,
        base: Plan,
        env: Environment,
        machine: MachineInfo,
        options: Options,
    ) -> Result<Collector<S>, CollectError> {
        if base.specs().is_empty() && base.roots().is_empty() && tool_rows(&base).is_empty() {
            return Err(CollectError::Empty);
        }
        for (_, tool) in tool_rows(&base) {
            if matches!(tool, ToolEvent::UserTime | ToolEvent::SystemTime) {
                return Err(CollectError::WorkloadTime(tool.name()));
            }
        }
        if options.selection != Selection::None && machine.cgroup_mount.is_none() {
            return Err(CollectError::NoCgroupMount);
        }
        let cpus = machine.sysfs.online_cpus().map_err(|e| CollectError::Cpus(e.to_string()))?;
        let units = match options.per {
            None => vec![(None, cpus.iter().map(|&c| c as i32).collect())],
            Some(per) => aggr::units_for(&cpus, per, |c| aggr::place_of(&machine.sysfs, c, None))
                .into_iter()
                .map(|(label, cpus)| (Some(unit_label(per, &label)), cpus))
                .collect(),
        };
        let limit = sys.raise_fd_limit();
        let budget = match (options.max_descriptors, limit) {
            (Some(max), Some(limit)) => max.min(budget_under(limit)),
            (Some(max), None) => max,
            (None, Some(limit)) => budget_under(limit),
            (None, None) => usize::MAX,
        };
        let exports = dedup_families(&base);
        let helps = exports
            .iter()
            .enumerate()
            .map(|(r, e)| crate::expo::metric_help(&base, e, r))
            .collect();
        let root_models = base
            .roots()
            .iter()
            .map(|root| {
                let pmu = root.model.str(root.model.metric(root.metric).pmu);
                let pmu = if pmu == "cpu_core" || pmu == "cpu_atom" { pmu } else { "" };
                (root.model.path(), pmu)
            })
            .collect();
        let event_names: Vec<String> = (0..base.specs().len())
            .map(|s| {
                base.rows()
                    .iter()
                    .find(|r| r.source == Source::Counter(s))
                    .map_or_else(|| base.specs()[s].name.clone(), |r| r.name.clone())
            })
            .collect();
        let multiplexable = base.events().iter().any(|e| counts_on_hardware(&e.kind));
        let mut collector = Collector {
            multiplexable,
            event_names,
            cost: plan_cost(&base, &cpus),
            sys,
            base,
            env,
            machine,
            options,
            cpus,
            units,
            host: None,
            cgroups: BTreeMap::new(),
            left_out: BTreeMap::new(),
            budget,
            exports,
            helps,
            root_models,
            last_read: Instant::now(),
            status: Status::default(),
            kubernetes: crate::kubernetes::Names::default(),
            walker: cgroups::Walker::default(),
        };
        if collector.options.host {
            collector.host = Some(collector.open(None, None)?);
        }
        collector.discover();
        collector.status.added = 0;
        Ok(collector)
    }

    /// Reads per interval: `--reads` when a counter of the plan can be multiplexed (one that
    /// takes a hardware counter), for the error bars; else one, at the interval's end. Software
    /// events, tracepoints and `msr` always count, so their counts have no multiplexing error
    /// and their bars are exact whatever the reads; more reads would tell nothing.
    pub fn reads_per_interval(&self) -> u32 {
        if self.multiplexable { self.options.reads.max(2) } else { 1 }
    }

    /// Descriptors held now.
    pub fn descriptors(&self) -> usize {
        self.host.iter().chain(self.cgroups.values()).map(|c| c.descriptors).sum()
    }

    /// The plan of one target (the host's, or a cgroup's).
    pub fn base_plan(&self) -> &Plan {
        &self.base
    }

    fn open(&mut self, cgroup: Option<&str>, id: Option<u64>) -> Result<Counted<S>, SessionError> {
        let mut plan = self.base.clone();
        if let Some(name) = cgroup {
            plan.expand_cgroups(&[name.to_string()]);
        }
        // Software events the metrics want ungrouped (perf 7.x's `NO_GROUP_EVENTS` on
        // `-M Software`) are read with one `read()` per CPU: they never multiplex, so what
        // each counts is the same, and serve switches no event by itself.
        plan.set_software_together(true);
        let target = CountTarget::Cpus(self.cpus.clone());
        let mut session = Session::open(self.sys.clone(), plan, target, self.env.clone())?;
        // The collector reads every session CPU by CPU itself ([`Collector::read_all`]).
        session.set_affinity(false);
        session.enable().map_err(SessionError::Open)?;
        let first = session.read().map_err(SessionError::Open)?;
        let descriptors = session.descriptors();
        let together = together(session.plan(), session.splits());
        let group_ids = read_group_ids(&session.read_groups(), &self.event_names);
        let labels = cgroup.map(cgroups::labels_of).unwrap_or_default();
        Ok(Counted {
            base_labels: crate::expo::target_labels(cgroup, &labels),
            cgroup: cgroup.map(str::to_string),
            labels,
            session,
            latest: first.clone(),
            id,
            leaf: false,
            reads: vec![first],
            used: 1,
            relative: Vec::new(),
            read_error: None,
            started: Instant::now(),
            opened: Instant::now(),
            descriptors,
            last: None,
            together,
            group_ids,
        })
    }

    /// Finds the cgroups to count now: opens new ones while the budget allows, closes
    /// vanished ones and ones made again under the same path (a new cgroup id: a restarted
    /// service or container; its old descriptors count a cgroup that is gone), and keeps what
    /// is left out with the reason.
    pub fn discover(&mut self) {
        use std::os::unix::fs::MetadataExt;
        let Some(mount) = self.machine.cgroup_mount.clone() else { return };
        let found = self.walker.discover(&mount, &self.options.selection);
        self.status.cut = found.cut;
        let ids: BTreeMap<&str, u64> =
            found.cgroups.iter().map(|(p, id)| (p.as_str(), *id)).collect();
        let gone: Vec<String> = self
            .cgroups
            .iter()
            .filter(|(path, c)| ids.get(path.as_str()).is_none_or(|id| c.id != Some(*id)))
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            self.cgroups.remove(&path);
            self.status.removed += 1;
        }
        self.left_out.clear();
        if let Selection::Patterns(patterns) = &self.options.selection {
            for p in patterns.iter().filter(|p| p.is_literal()) {
                let path = p.literal_path();
                if !ids.contains_key(path.as_str()) {
                    self.left_out
                        .insert(path, format!("no such cgroup under {} (yet)", mount.display()));
                }
            }
        }
        for name in &found.unnamed {
            self.left_out.insert(
                name.clone(),
                "its name is not UTF-8 (shown with U+FFFD): cgroups are named by path text, so it cannot be named to the kernel; rename it".into(),
            );
        }
        for (path, c) in &mut self.cgroups {
            c.leaf = found.leaves.contains(path);
        }
        for (path, id) in found.cgroups {
            if self.cgroups.contains_key(&path) {
                continue;
            }
            let used = self.descriptors();
            if used + self.cost > self.budget {
                self.left_out.insert(
                    path,
                    format!(
                        "descriptor budget: counting it takes {} descriptors ({} counters x {} CPUs), {used} of {} are in use",
                        self.cost,
                        self.base.specs().len(),
                        self.cpus.len(),
                        self.budget
                    ),
                );
                continue;
            }
            match self.open(Some(&path), Some(id)) {
                Ok(mut counted) => {
                    // Made again between the walk and the open: the id is the opened one's.
                    let dir = mount.join(path.trim_start_matches('/'));
                    if let Ok(m) = std::fs::symlink_metadata(&dir) {
                        counted.id = Some(m.ino());
                    }
                    counted.leaf = found.leaves.contains(&path);
                    self.cgroups.insert(path, counted);
                    self.status.added += 1;
                }
                Err(e) => {
                    // Gone between the walk and the open: not an error worth keeping.
                    let gone = !mount.join(path.trim_start_matches('/')).is_dir() && path != "/";
                    if !gone {
                        self.left_out.insert(path, e.to_string());
                    }
                }
            }
        }
        // Read only while a pod's cgroup is counted, so other hosts never look.
        let pods = self.cgroups.values().any(|c| crate::kubernetes::is_pod(&c.labels));
        self.kubernetes = match &self.machine.kubelet_log_dir {
            Some(dir) if pods => crate::kubernetes::Names::read(dir),
            _ => crate::kubernetes::Names::default(),
        };
    }

    /// Reads every target once (between interval ends, for the error bars).
    pub fn read(&mut self) {
        let cpu0 = thread_cpu_ns();
        self.read_all();
        self.last_read = Instant::now();
        self.status.interval_cpu_ns += thread_cpu_ns().saturating_sub(cpu0);
    }

    /// Reads every target's cumulative counts for a scrape, so the exported counters are
    /// those of the scrape's moment and `rate()` over them is exact. The error bars' reads stay
    /// the scheduled ones.
    pub fn read_for_scrape(&mut self) {
        let cpu0 = thread_cpu_ns();
        self.read_latest();
        self.last_read = Instant::now();
        self.status.interval_cpu_ns += thread_cpu_ns().saturating_sub(cpu0);
    }

    /// Per unit of `counted`: its label, CPUs and, per spec, the raw count with its enabled
    /// and running ns: cumulative at the latest read, or with `interval` over the last
    /// interval.
    pub fn totals(&self, counted: &Counted<S>, interval: bool) -> Vec<UnitTotals> {
        if interval {
            return counted
                .last
                .iter()
                .flat_map(|l| &l.units)
                .map(|u| (u.label.clone(), u.cpus.clone(), u.totals.clone()))
                .collect();
        }
        self.units
            .iter()
            .map(|(label, cpus)| {
                let specs = counted.session.plan().specs().len();
                let totals = if label.is_some() {
                    sum_cpus(&counted.latest.on_cpus(cpus), specs)
                } else {
                    sum_cpus(&counted.latest, specs)
                };
                (label.clone(), cpus.clone(), totals)
            })
            .collect()
    }

    /// Reads every target's counters into its `latest`: CPU by CPU, every target's counters
    /// on a CPU from that CPU (a read of a counter active on another CPU interrupts that CPU
    /// and waits for it), moving the thread once per CPU rather than once per CPU and target.
    fn read_latest(&mut self) {
        for counted in self.host.iter_mut().chain(self.cgroups.values_mut()) {
            counted.read_error = None;
        }
        let here = self.sys.current_cpu().and_then(|c| i32::try_from(c).ok());
        let mut moved = false;
        // A CPU is read from there only when every target's groups on it together make a move
        // cheaper than reading them from here (each such read interrupts that CPU and waits for
        // it): the rule the runtime's own reads follow. What needs no move comes first.
        let groups_on = |cpu: i32| -> usize {
            self.host.iter().chain(self.cgroups.values()).map(|t| t.session.groups_on(cpu)).sum()
        };
        let mut stay = Vec::new();
        let mut go = Vec::new();
        for cpu in self.cpus.iter().filter_map(|&c| i32::try_from(c).ok()) {
            if Some(cpu) == here || groups_on(cpu) < tmetric_runtime::counter::MOVE_FOR {
                stay.push(cpu);
            } else {
                go.push(cpu);
            }
        }
        for (cpu, must_move) in
            stay.into_iter().map(|c| (c, false)).chain(go.into_iter().map(|c| (c, true)))
        {
            if must_move {
                moved |= self.sys.move_to_cpu(cpu as u32);
            }
            for counted in self.host.iter_mut().chain(self.cgroups.values_mut()) {
                if counted.read_error.is_none()
                    && let Err(e) = counted.session.read_cpu(cpu)
                {
                    counted.read_error = Some(e.to_string());
                }
            }
        }
        if moved {
            self.sys.restore_cpus();
        }
        for counted in self.host.iter_mut().chain(self.cgroups.values_mut()) {
            if counted.read_error.is_none()
                && let Err(e) = counted.session.finish_read(&mut counted.latest)
            {
                counted.read_error = Some(e.to_string());
            }
        }
    }

    fn read_all(&mut self) -> usize {
        self.read_latest();
        let mut failed = 0;
        for counted in self.host.iter_mut().chain(self.cgroups.values_mut()) {
            if let Some(e) = &counted.read_error {
                failed += 1;
                let target = counted.cgroup.as_deref().unwrap_or("host");
                self.status.pending.push(format!("{target}: {e}"));
                continue;
            }
            match counted.reads.get_mut(counted.used) {
                Some(slot) => slot.events.clone_from(&counted.latest.events),
                None => counted.reads.push(counted.latest.clone()),
            }
            counted.used += 1;
        }
        failed
    }

    /// Ends the interval: a last read, the values of every target over it, and a new
    /// discovery of cgroups.
    pub fn end_interval(&mut self) {
        let cpu0 = thread_cpu_ns();
        let failed = self.read_all();
        self.last_read = Instant::now();
        self.status.failed_targets = failed;
        self.status.errors = std::mem::take(&mut self.status.pending);
        let mut seconds_seen = 0.0f64;
        let units = self.units.clone();
        // The units as the engine splits a sample: the whole, or one per labelled unit.
        let split = if units.iter().all(|(label, _)| label.is_none()) {
            Partition::Global
        } else {
            Partition::Cpus(
                units
                    .iter()
                    .map(|(label, cpus)| {
                        let name = label.as_ref().map_or_else(String::new, |l| l.1.clone());
                        (UnitId::Label(name), cpus.clone())
                    })
                    .collect(),
            )
        };
        for counted in self.host.iter_mut().chain(self.cgroups.values_mut()) {
            let now = Instant::now();
            let seconds = now.duration_since(counted.started).as_secs_f64();
            counted.started = now;
            seconds_seen = seconds_seen.max(seconds);
            let reads = &counted.reads[..counted.used];
            let Some(first) = reads.first() else { continue };
            counted.relative.resize_with(reads.len(), Snapshot::default);
            for (r, out) in reads.iter().zip(&mut counted.relative) {
                r.since_into(first, out);
            }
            let relative = &counted.relative[..reads.len()];
            let delta = &relative[relative.len() - 1];
            // The interval evaluated once: each unit's values, bars and the notes.
            let sample = EvalInput::new(delta, seconds);
            let evaluated = counted.session.evaluate_sample(&sample, &split, Some(relative));
            let plan = counted.session.plan();
            let mut out = Vec::with_capacity(units.len());
            for ((label, cpus), unit) in units.iter().zip(evaluated.printed()) {
                let part = unit.counts.as_ref().unwrap_or(delta);
                let shares = plan.roots().iter().map(|root| share(plan, root, part)).collect();
                let results = unit.results.clone();
                let bars = unit.bars.clone().unwrap_or_default();
                let totals = sum_cpus(part, plan.specs().len());
                out.push(UnitValues {
                    label: label.clone(),
                    cpus: cpus.clone(),
                    results,
                    shares,
                    bars,
                    totals,
                });
            }
            let notes = evaluated.notes;
            counted.last = Some(Computed { seconds, units: out, notes });
            // The end is the next interval's start.
            counted.reads.swap(0, counted.used - 1);
            counted.used = 1;
        }
        self.discover();
        let ns =
            thread_cpu_ns().saturating_sub(cpu0) + std::mem::take(&mut self.status.interval_cpu_ns);
        let spent = ns as f64 / 1e9;
        self.status.intervals += 1;
        self.status.ended = Some(SystemTime::now());
        self.status.seconds = seconds_seen;
        self.status.cpu_seconds = spent;
        self.status.cpu_seconds_total += spent;
    }

    /// Why nothing useful is counted, if so: no target is open while cgroups were refused
    /// (not merely absent yet), or every target's reads failed in the last interval.
    /// `/healthz` answers 503 with it and `serve --once` exits non-zero.
    pub fn problem(&self) -> Option<String> {
        let targets = usize::from(self.host.is_some()) + self.cgroups.len();
        if targets == 0 {
            let refused = self.left_out.iter().find(|(_, why)| !why.starts_with("no such cgroup"));
            return refused.map(|(cgroup, why)| {
                format!(
                    "nothing is counted: {} cgroup(s) left out, {cgroup} because {why}",
                    self.left_out.len()
                )
            });
        }
        if self.status.intervals > 0 && self.status.failed_targets == targets {
            let first = self.status.errors.first().map_or("", String::as_str);
            return Some(format!("every read failed in the last interval: {first}"));
        }
        None
    }

    /// The targets counted, host first.
    pub fn targets(&self) -> impl Iterator<Item = &Counted<S>> {
        self.host.iter().chain(self.cgroups.values())
    }
}

/// The smallest running share of `root`'s counted inputs in `part` (`None` when none was
/// enabled).
fn share(plan: &Plan, root: &tmetric_engine::Root, part: &Snapshot) -> Option<f64> {
    let mut least: Option<f64> = None;
    for &row in root.slot_rows.iter().flatten() {
        if let Source::Counter(spec) = plan.rows()[row].source
            && let Some(a) = part.aggregate(spec)
            && a.enabled > 0
        {
            let s = a.running as f64 / a.enabled as f64;
            least = Some(least.map_or(s, |l: f64| l.min(s)));
        }
    }
    let counters = root
        .slot_rows
        .iter()
        .flatten()
        .any(|&r| matches!(plan.rows()[r].source, Source::Counter(_)));
    if counters { least } else { Some(1.0) }
}

/// Label name and value of an aggregation unit: CPUs and sockets by number, others by
/// perf's label.
fn unit_label(per: Aggregation, label: &str) -> (&'static str, String) {
    match per {
        Aggregation::Cpu => ("cpu", label.trim_start_matches("CPU").to_string()),
        Aggregation::Socket => ("socket", label.trim_start_matches('S').to_string()),
        Aggregation::Core => ("core", label.to_string()),
        Aggregation::Die => ("die", label.to_string()),
        Aggregation::Node => ("node", label.trim_start_matches('N').to_string()),
        Aggregation::Cache => ("cache", label.to_string()),
        Aggregation::Cluster => ("cluster", label.to_string()),
        // Not units of CPUs: `--per` never asks for them.
        Aggregation::Global | Aggregation::Thread => ("unit", label.to_string()),
    }
}

/// Per root, its export; two different metrics whose names meet get the model in the name.
fn dedup_families(plan: &Plan) -> Vec<Exported> {
    let mut out: Vec<Exported> = Vec::new();
    let mut owner: Vec<(String, &'static str)> = Vec::new();
    for root in plan.roots() {
        let mut e = names::exported(root.model, root.metric);
        let name = root.model.str(root.model.metric(root.metric).name);
        if let Some((_, other)) = owner.iter().find(|(f, _)| *f == e.family)
            && *other != name
        {
            e.family = format!("{}_{}", e.family, names::snake(&root.model.path()));
        }
        owner.push((e.family.clone(), name));
        out.push(e);
    }
    out
}

/// What `serve` counts without `-M` or `-e`: the common software metrics, and the model's
/// `Default` group (TopdownL1 on Intel) where it has one.
pub fn default_metrics(model: Option<&'static Model>) -> Vec<String> {
    let mut metrics = vec!["Software".to_string()];
    if let Some(model) = model
        && !tmetric_engine::select::find("Default", tmetric_catalog::common(), Some(model))
            .is_empty()
    {
        metrics.push("Default".to_string());
    }
    metrics
}

/// The machine's host name (the `instance` a fleet knows it by); empty when unreadable.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// `picks` without a second metric of the same model, name and PMU (perf's amdzen4 JSON
/// defines `umc_cas_cmd_rate` twice, so `-M all` exported each series twice, which Prometheus
/// refuses), and a line per metric left out. Hybrid models' metrics of one name on two PMUs
/// are different series (`pmu` label) and stay.
pub fn distinct_picks(picks: &[tmetric_engine::Pick]) -> (Vec<tmetric_engine::Pick>, Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for p in picks {
        let m = p.model.metric(p.metric);
        let (name, pmu) = (p.model.str(m.name), p.model.str(m.pmu));
        if seen.insert((p.model.path(), name, pmu)) {
            kept.push(p.clone());
        } else if !dropped.iter().any(|d: &String| d.contains(&format!(" {name} "))) {
            dropped.push(format!(
                "{} defines {name} more than once: the first is served (one series per name)",
                p.model.path()
            ));
        }
    }
    (kept, dropped)
}
