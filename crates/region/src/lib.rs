//! tmetric-region: measures regions of code from inside the program. A [`Measurement`] plans
//! a metric selection with tmetric's engine, opens one counter group for the calling thread
//! (through the runtime's `open_own_group`, on the open path every session's counters take),
//! and reads it at each region's start and stop: with `rdpmc` when every member's mmap page
//! allows it (topdown decoded from PERF_METRICS, see [`topdown`]), otherwise with one
//! `read()` of the group, never both on one group.
//!
//! ```no_run
//! let mut m = tmetric_region::Measurement::new(&["page-faults", "task-clock"]).unwrap();
//! let (sum, sample) = m.measure("sum", || (0..1_000_000u64).sum::<u64>()).unwrap();
//! println!("{sum}: {:?} page faults", sample.count("page-faults"));
//! m.report(&mut std::io::stderr()).unwrap();
//! ```
//!
//! * [`topdown`]: PERF_METRICS fields, slots-scaled deltas, level 1 and 2, the reset schedule.
//! * The C ABI (`include/tmetric_region.h`) is the `tmetric-region-capi` crate, the one place
//!   outside the runtime that needs `unsafe` (`no_mangle` and the caller's C strings).
//! * [`workload`]: workloads with known page faults and CPU time (example and tests).

#![forbid(unsafe_code)]

pub mod topdown;
pub mod workload;

use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::Path;
use std::time::Instant;

use tmetric_catalog::Model;
use tmetric_engine::select::{self, Miss, ModelFrom};
use tmetric_engine::{
    Evaluators, Machine, Pick, Placement, Plan, PlanOptions, PmuModel, Source, eval,
};
use tmetric_runtime::counter::{CpuCount, RawCount, Snapshot, parse_group_read};
use tmetric_runtime::event::{self, EventKind, ResolvedEvent};
use tmetric_runtime::mmap::{PageCount, PageRead, Unreadable, UserPage};
use tmetric_runtime::{Environment, Errno, Kernel, Syscalls, Sysfs};

use topdown::{ResetSchedule, Topdown, TopdownRead};

/// Splits a comma-separated selection, keeping commas inside `pmu/terms/` and `{groups}`
/// intact: `"page-faults,cpu/event=0x3c,umask=0/,{a,b}"` is three items.
pub fn split_items(list: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let (mut slash, mut brace) = (false, 0usize);
    for c in list.chars() {
        match c {
            '/' => slash = !slash,
            '{' => brace += 1,
            '}' => brace = brace.saturating_sub(1),
            _ => {}
        }
        if c == ',' && !slash && brace == 0 {
            items.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    items.push(current);
    items.into_iter().map(|i| i.trim().to_string()).filter(|i| !i.is_empty()).collect()
}

/// Errors of the region API.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// An item is neither a metric, a metric group nor an event: the `-M` miss, worded as
    /// every front end words it, and why the item is not an event either.
    #[error("{}; nor is `{item}` an event: {why}", worded(miss))]
    Unknown {
        /// The item.
        item: String,
        /// Why it selects no metric.
        miss: Miss,
        /// Why it is not an event.
        why: String,
    },
    /// The selection needs more than one hardware group, so it would be multiplexed.
    #[error(
        "the selection does not fit one counter group on this machine ({why}); a region is never multiplexed: measure fewer metrics per Measurement"
    )]
    TooManyGroups {
        /// What does not fit.
        why: String,
    },
    /// A metric's events can never be placed on this machine's counters.
    #[error("`{metric}` cannot be counted on this machine: {why}")]
    Impossible {
        /// The metric.
        metric: String,
        /// Why.
        why: String,
    },
    /// The kernel refused a counter.
    #[error("cannot open `{event}`: {why}")]
    Open {
        /// The event.
        event: String,
        /// The errno.
        errno: Errno,
        /// The errno with the reason and what to do.
        why: String,
    },
    /// A system call on an open group failed.
    #[error("{what} the group led by `{event}` failed: {errno}")]
    Syscall {
        /// What was done.
        what: &'static str,
        /// The leader.
        event: String,
        /// The errno.
        errno: Errno,
    },
    /// `read()` returned an unexpected layout, or nothing (a pinned group the kernel could not
    /// keep on the counters is in error state and reads 0 bytes).
    #[error("reading the group led by `{event}`: {problem}")]
    Layout {
        /// The leader.
        event: String,
        /// The problem.
        problem: String,
    },
    /// A group chosen for `rdpmc` could not be read that way at a region boundary (it is
    /// never read with `read()` instead: the two must not be mixed).
    #[error("rdpmc read of `{event}` failed: {why}")]
    Rdpmc {
        /// The event.
        event: String,
        /// Why.
        why: Unreadable,
    },
    /// `start` while a region is open, or `stop` without one.
    #[error("{0}")]
    Nesting(String),
}

/// How a [`Measurement`] maps the user pages of its counters.
pub trait Pages {
    /// A mapped page.
    type Page: PageRead;
    /// Maps `fd`'s page; `None` when there is none (the caller then reads with `read()`).
    fn map(&mut self, fd: i32) -> Option<Self::Page>;
    /// Reads a page by the seqlock protocol.
    fn read(&self, page: &Self::Page) -> Result<PageCount, Unreadable>;
}

/// The kernel's pages and the `rdpmc` instruction.
#[derive(Debug, Default, Clone, Copy)]
pub struct KernelPages;

impl Pages for KernelPages {
    type Page = UserPage;
    fn map(&mut self, fd: i32) -> Option<UserPage> {
        UserPage::map(fd).ok()
    }
    fn read(&self, page: &UserPage) -> Result<PageCount, Unreadable> {
        page.read()
    }
}

/// No user pages: every group is read with `read()` (the simulated kernel's descriptors
/// are not files and cannot be mapped).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPages;

impl Pages for NoPages {
    type Page = tmetric_runtime::mmap::PageImage;
    fn map(&mut self, _fd: i32) -> Option<Self::Page> {
        None
    }
    fn read(&self, _page: &Self::Page) -> Result<PageCount, Unreadable> {
        Err(Unreadable::NoUserRdpmc)
    }
}

/// How a group is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPath {
    /// `rdpmc` through the mmap pages.
    Rdpmc,
    /// One `read()` of the group.
    Read,
}

/// Topdown members of a group read with `rdpmc`: the leader is `slots`.
#[derive(Debug, Clone)]
struct TopdownLayout {
    /// Per member: its PERF_METRICS field (`None` for the leader and other events).
    fields: Vec<Option<usize>>,
    /// Whether the PMU has the level-2 fields.
    level2: bool,
}

struct Group<P: Pages> {
    specs: Vec<usize>,
    fds: Vec<i32>,
    ids: Vec<u64>,
    pages: Option<Vec<P::Page>>,
    topdown: Option<TopdownLayout>,
}

/// Most members a group read can return (the largest PMU has 8 general, 4 fixed and 8
/// metric counters; software groups are smaller than this too).
const MAX_MEMBERS: usize = 32;

/// One reading of every group.
#[derive(Debug, Clone, Default)]
struct Reading {
    /// Per spec.
    values: Vec<RawCount>,
    /// Per group read with rdpmc and led by slots: the raw values and the leader page's lock.
    topdown: Vec<Option<(TopdownRead, u32)>>,
    at: Option<Instant>,
}

/// A metric's value in a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    /// The metric's name.
    pub name: String,
    /// The value as printed (ScaleUnit applied).
    pub value: f64,
    /// The unit of the ScaleUnit (`%`, `GHz`), or empty.
    pub unit: String,
    /// Why the value is missing or partial.
    pub note: Option<String>,
}

/// A count in a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Count {
    /// The event.
    pub name: String,
    /// The count as printed (task-clock in msec; `None`: not counted).
    pub value: Option<f64>,
    /// The unit (`msec`, a sysfs unit) or empty.
    pub unit: String,
    /// The metrics printed beside it (perf prints a metric on its first event's line).
    pub metrics: Vec<String>,
}

/// The measurement of one region (or a region's total).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The region's name.
    pub region: String,
    /// How many start/stop pairs it sums (1 for a single sample).
    pub runs: usize,
    /// Wall-clock seconds inside the region.
    pub seconds: f64,
    /// How the hardware group was read (software-only selections: `Read`).
    pub path: ReadPath,
    /// The counts.
    pub counts: Vec<Count>,
    /// The metrics.
    pub metrics: Vec<MetricValue>,
    /// Topdown from PERF_METRICS when the group was read with `rdpmc`.
    pub topdown: Option<Topdown>,
}

impl Sample {
    /// The count of `event` (`None` if it is not measured or not counted).
    pub fn count(&self, event: &str) -> Option<f64> {
        self.counts.iter().find(|c| c.name == event).and_then(|c| c.value)
    }

    /// The value of metric `name`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.iter().find(|m| m.name.eq_ignore_ascii_case(name)).map(|m| m.value)
    }

    /// Writes the sample as `tmetric stat` prints counts and metrics.
    pub fn print(&self, out: &mut dyn Write) -> io::Result<()> {
        let path = match self.path {
            ReadPath::Rdpmc => "rdpmc",
            ReadPath::Read => "read()",
        };
        writeln!(
            out,
            "\n Region '{}': {} run{}, {:.9} seconds, read with {path}\n",
            self.region,
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            self.seconds
        )?;
        let metric_text = |m: &MetricValue| {
            let note = m.note.as_deref().map(|n| format!("  ({n})")).unwrap_or_default();
            format!("# {:>8.2} {:<2} {}{note}", m.value, m.unit, m.name)
        };
        let hosted: Vec<&str> =
            self.counts.iter().flat_map(|c| c.metrics.iter().map(String::as_str)).collect();
        for c in &self.counts {
            let value = match c.value {
                Some(v) if c.unit == "msec" => format!("{v:.2}"),
                Some(v) => format!("{v:.0}"),
                None => "<not counted>".to_string(),
            };
            let beside: Vec<&MetricValue> =
                self.metrics.iter().filter(|m| c.metrics.contains(&m.name)).collect();
            let first = beside.first().map(|m| metric_text(m)).unwrap_or_default();
            let line = format!(" {value:>18} {:<5} {:<30} {first}", c.unit, c.name);
            writeln!(out, "{}", line.trim_end())?;
            for m in beside.iter().skip(1) {
                writeln!(out, " {:>18} {:<5} {:<30} {}", "", "", "", metric_text(m))?;
            }
        }
        for m in self.metrics.iter().filter(|m| !hosted.contains(&m.name.as_str())) {
            writeln!(out, " {:>18} {:<5} {:<30} {}", "", "", "", metric_text(m))?;
        }
        if let Some(t) = &self.topdown {
            let l1 = &t.level1;
            writeln!(
                out,
                "\n PERF_METRICS over {} slots (error bound {:.2} points): retiring {:.1}%, bad speculation {:.1}%, frontend bound {:.1}%, backend bound {:.1}%",
                t.slots,
                100.0 * t.error_bound,
                100.0 * l1.retiring,
                100.0 * l1.bad_speculation,
                100.0 * l1.frontend_bound,
                100.0 * l1.backend_bound
            )?;
            if let Some(l2) = &t.level2 {
                writeln!(
                    out,
                    " heavy operations {:.1}%, light operations {:.1}%, branch mispredicts {:.1}%, machine clears {:.1}%, fetch latency {:.1}%, fetch bandwidth {:.1}%, memory bound {:.1}%, core bound {:.1}%",
                    100.0 * l2.heavy_operations,
                    100.0 * l2.light_operations,
                    100.0 * l2.branch_mispredicts,
                    100.0 * l2.machine_clears,
                    100.0 * l2.fetch_latency,
                    100.0 * l2.fetch_bandwidth,
                    100.0 * l2.memory_bound,
                    100.0 * l2.core_bound
                )?;
            }
        }
        Ok(())
    }
}

/// The samples of one named region, summed (counts are added, never fractions averaged).
#[derive(Debug, Clone)]
struct Region {
    name: String,
    runs: usize,
    seconds: f64,
    total: Vec<RawCount>,
    /// Per PERF_METRICS field, slots in 255ths, and the slots, summed over rdpmc topdown runs.
    topdown: Option<([i128; 8], u64, bool, f64)>,
}

/// Counters for the calling thread, planned for a metric selection, and the regions measured.
///
/// Not `Send`: the counters count the thread that opened them, and `rdpmc` reads the
/// counters of the CPU the caller runs on.
pub struct Measurement<S: Syscalls = Kernel, P: Pages = KernelPages> {
    sys: S,
    pages: P,
    plan: Plan,
    evaluators: Evaluators,
    groups: Vec<Group<P>>,
    regions: Vec<Region>,
    /// The open region.
    open: Option<usize>,
    before: Reading,
    after: Reading,
    delta: Vec<RawCount>,
    /// The last region that ended, its seconds and topdown (its counts are in `delta`).
    last: Option<(usize, f64, Option<Topdown>)>,
    schedule: ResetSchedule,
    last_slots: Option<u64>,
    epoch: Instant,
    env: Environment,
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Measurement<Kernel, KernelPages> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measurement").field("specs", &self.plan.specs()).finish()
    }
}

impl Measurement<Kernel, KernelPages> {
    /// Plans `items` (metrics, metric groups or events, as `tmetric stat -M`/`-e` take them)
    /// on this machine and opens them for the calling thread.
    pub fn new(items: &[&str]) -> Result<Self, RegionError> {
        Measurement::with_machine(items, Path::new("/sys"), Path::new("/proc"), Kernel, KernelPages)
    }
}

/// The model metric items that are not common metrics come from: this machine's cpuid.
fn host_model(sysfs: &Sysfs, proc_root: &Path) -> Option<&'static Model> {
    let cpuid = std::env::var("PERF_CPUID")
        .ok()
        .or_else(|| tmetric_runtime::sysfs::host_cpuid(sysfs, proc_root))?;
    tmetric_catalog::model_for_cpuid(&cpuid)
}

fn is_hardware(kind: &EventKind) -> bool {
    match kind {
        EventKind::Software | EventKind::Tracepoint => false,
        EventKind::Hardware => true,
        EventKind::Pmu(p) => p != "msr",
    }
}

impl<S: Syscalls, P: Pages> Measurement<S, P> {
    /// [`Measurement::new`] on the machine under `sysfs_root` and `proc_root`, through `sys`
    /// (the kernel, or `tmetric_sim::SimKernel`) and `pages` ([`NoPages`] where the
    /// descriptors are not the kernel's).
    pub fn with_machine(
        items: &[&str],
        sysfs_root: &Path,
        proc_root: &Path,
        sys: S,
        pages: P,
    ) -> Result<Self, RegionError> {
        let sysfs = Sysfs::new(sysfs_root);
        let env = Environment::probe(&sysfs, proc_root);
        let model = host_model(&sysfs, proc_root);
        let pmus = PmuModel::probe(&sysfs, proc_root, model);
        let machine = Machine { sysfs: &sysfs, proc_root, env: &env, pmus: &pmus };
        let mut plan = Plan::new(tmetric_engine::plan::literals(&sysfs, proc_root, false));
        let tables = tmetric_engine::events::CatalogTables::for_machine(&sysfs, proc_root, model);
        let resolver = event::Resolver::new(&sysfs).with_tables(&tables);
        let mut picks: Vec<Pick> = Vec::new();
        let mut events: Vec<(String, Miss)> = Vec::new();
        for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
            // perf's `-M` lookup first; an item it misses may be an event.
            let host = || model.ok_or("no CPU model matches this machine");
            let miss = match select::items(&[item.to_string()], host, ModelFrom::Machine, |_| None)
            {
                Ok(found) => {
                    select::add_unique(&mut picks, found);
                    continue;
                }
                Err(miss) => miss,
            };
            if item.starts_with('{') {
                // A group of events, as `-e '{a,b}'` takes it.
                events.push((item.to_string(), miss));
                continue;
            }
            let listed = resolver.list(item).map(|l| {
                l.groups.into_iter().flat_map(|g| g.events).map(|e| e.event).collect::<Vec<_>>()
            });
            let why = match listed {
                Ok(all) if all.iter().all(|e| matches!(e, ResolvedEvent::Counter(_))) => {
                    events.push((item.to_string(), miss));
                    continue;
                }
                Ok(_) => "tool events are not counters; duration is in Sample::seconds".into(),
                Err(err) => err.to_string(),
            };
            return Err(RegionError::Unknown { item: item.into(), miss, why });
        }
        for (item, miss) in events {
            if let Err(err) = plan.add_event_lists(std::slice::from_ref(&item), &resolver) {
                return Err(RegionError::Unknown { item, miss, why: err.to_string() });
            }
        }
        plan.add_metrics(&picks, &machine, &PlanOptions::default(), true);
        let groups = region_groups(&plan)?;
        let mut m = Measurement {
            sys,
            pages,
            plan,
            evaluators: Evaluators::default(),
            groups: Vec::new(),
            regions: Vec::new(),
            open: None,
            before: Reading::default(),
            after: Reading::default(),
            delta: Vec::new(),
            last: None,
            schedule: ResetSchedule::default(),
            last_slots: None,
            epoch: Instant::now(),
            env,
            _thread: PhantomData,
        };
        let level2 = pmus.pmus.iter().any(|p| p.core && p.metric_events >= 8);
        for specs in groups {
            let group = m.open_group(specs, level2)?;
            m.groups.push(group);
        }
        Ok(m)
    }

    /// The plan (rows, specs, groups, roots).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// How the hardware group is read (`Read` when there is none).
    pub fn path(&self) -> ReadPath {
        if self.groups.iter().any(|g| g.pages.is_some()) { ReadPath::Rdpmc } else { ReadPath::Read }
    }

    /// Sets the topdown reset schedule (rdpmc groups led by `slots` only).
    pub fn set_reset_schedule(&mut self, schedule: ResetSchedule) {
        self.schedule = schedule;
    }

    fn open_group(&mut self, specs: Vec<usize>, level2: bool) -> Result<Group<P>, RegionError> {
        let hardware = specs.iter().any(|&s| is_hardware(&self.plan.events()[s].kind));
        let close_all = |sys: &mut S, fds: &[i32]| {
            for &fd in fds.iter().rev() {
                sys.close(fd);
            }
        };
        // Pinned: the group is counted the whole time or goes to error state; it is never
        // multiplexed inside a region.
        let attrs: Vec<tmetric_runtime::Attr> =
            specs.iter().map(|&s| self.plan.specs()[s].attr.clone()).collect();
        let opened = tmetric_runtime::counter::open_own_group(&mut self.sys, &attrs, hardware)
            .map_err(|(member, errno)| {
                let s = specs[member];
                RegionError::Open {
                    event: self.plan.specs()[s].name.clone(),
                    errno,
                    why: self.env.explain(errno, &self.plan.events()[s]),
                }
            })?;
        for (o, &s) in opened.iter().zip(&specs) {
            if o.user_only {
                let event = self.plan.specs()[s].name.clone();
                self.plan.add_warning(tmetric_engine::Warning::UserOnly { event });
            }
        }
        let fds: Vec<i32> = opened.iter().map(|o| o.fd).collect();
        let ids: Vec<u64> = opened.iter().map(|o| o.id).collect();
        let name = self.plan.specs()[specs[0]].name.clone();
        if let Err(errno) = self.sys.enable(fds[0], true) {
            close_all(&mut self.sys, &fds);
            return Err(RegionError::Syscall { what: "enabling", event: name, errno });
        }
        // rdpmc only if every member's page allows it now; otherwise read() for good.
        let mut pages = None;
        let mut topdown = None;
        if hardware {
            let mapped: Vec<P::Page> = fds.iter().filter_map(|&fd| self.pages.map(fd)).collect();
            let reads: Vec<Result<PageCount, Unreadable>> =
                mapped.iter().map(|p| self.pages.read(p)).collect();
            if mapped.len() == fds.len() && reads.iter().all(Result::is_ok) {
                let counts: Vec<PageCount> = reads.into_iter().flatten().collect();
                let attrs: Vec<&tmetric_runtime::Attr> =
                    specs.iter().map(|&s| &self.plan.specs()[s].attr).collect();
                let fields: Vec<Option<usize>> =
                    attrs.iter().map(|a| topdown::field_of_config(a.config)).collect();
                let led_by_slots = attrs[0].config == topdown::SLOTS_CONFIG
                    && counts[0].selector == topdown::SLOTS_SELECTOR;
                let metrics_ok = fields
                    .iter()
                    .zip(&counts)
                    .all(|(f, c)| f.is_none() || c.selector == topdown::METRICS_SELECTOR);
                let any_metric = fields.iter().any(Option::is_some);
                if any_metric && !(led_by_slots && metrics_ok) {
                    // Metric events whose pages do not publish the documented selectors:
                    // leave the group to read().
                } else {
                    if any_metric {
                        topdown = Some(TopdownLayout { fields, level2 });
                    }
                    pages = Some(mapped);
                }
            }
        }
        Ok(Group { specs, fds, ids, pages, topdown })
    }

    /// Reads every group into `reading` (buffers reused: the hot path allocates nothing).
    fn read_into(&mut self, reading: &mut Reading) -> Result<(), RegionError> {
        reading.values.resize(self.plan.specs().len(), RawCount::default());
        reading.topdown.clear();
        let at = Instant::now();
        for group in &self.groups {
            let leader = &self.plan.specs()[group.specs[0]].name;
            match &group.pages {
                None => {
                    reading.topdown.push(None);
                    let mut buf = [0u8; 8 * (3 + 2 * MAX_MEMBERS)];
                    let want = 8 * (3 + 2 * group.fds.len());
                    let buf = &mut buf[..want];
                    let got = self.sys.read(group.fds[0], buf).map_err(|errno| {
                        RegionError::Syscall { what: "reading", event: leader.clone(), errno }
                    })?;
                    if got == 0 {
                        return Err(RegionError::Layout {
                            event: leader.clone(),
                            problem: "the pinned group could not be kept on the counters (the kernel put it in error state)".into(),
                        });
                    }
                    // The layout is checked as the runtime's parser does, without its
                    // allocation: nr, time_enabled, time_running, then (value, id) pairs.
                    let word = |i: usize| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&buf[i * 8..i * 8 + 8]);
                        u64::from_ne_bytes(w)
                    };
                    if got != want || word(0) as usize != group.fds.len() {
                        let problem = parse_group_read(&buf[..got], group.fds.len())
                            .err()
                            .unwrap_or_else(|| format!("{got} bytes, expected {want}"));
                        return Err(RegionError::Layout { event: leader.clone(), problem });
                    }
                    let (enabled, running) = (word(1), word(2));
                    for i in 0..group.fds.len() {
                        let (value, id) = (word(3 + 2 * i), word(4 + 2 * i));
                        let Some(m) = group.ids.iter().position(|&x| x == id) else {
                            return Err(RegionError::Layout {
                                event: leader.clone(),
                                problem: format!(
                                    "the kernel returned id {id}, which no member has"
                                ),
                            });
                        };
                        reading.values[group.specs[m]] = RawCount { value, enabled, running };
                    }
                }
                Some(pages) => {
                    // A pinned group that is on its counters at both ends of a region with
                    // the page unchanged (checked in `end`) ran all along: its enabled and
                    // running times are the wall clock's.
                    let ns = at.duration_since(self.epoch).as_nanos() as u64;
                    let mut slots = None;
                    let mut metrics = 0;
                    let mut metrics_read = false;
                    for (m, page) in pages.iter().enumerate() {
                        let field = group.topdown.as_ref().and_then(|l| l.fields[m]);
                        if field.is_some() && metrics_read {
                            // Every metric event reads the same PERF_METRICS register: one
                            // rdpmc serves them all (their counts come from the fields).
                            continue;
                        }
                        let c = self.pages.read(page).map_err(|why| RegionError::Rdpmc {
                            event: self.plan.specs()[group.specs[m]].name.clone(),
                            why,
                        })?;
                        reading.values[group.specs[m]] =
                            RawCount { value: c.value, enabled: ns, running: ns };
                        if group.topdown.is_some() {
                            if m == 0 {
                                slots = Some((c.raw, c.seq));
                            } else if field.is_some() {
                                metrics = c.raw;
                                metrics_read = true;
                            }
                        }
                    }
                    if let Some(layout) = &group.topdown {
                        // The metric events' values are replaced by slots-scaled fields in
                        // `end_total`; keep their times consistent with the group's.
                        for (m, f) in layout.fields.iter().enumerate() {
                            if f.is_some() {
                                reading.values[group.specs[m]] =
                                    RawCount { value: 0, enabled: ns, running: ns };
                            }
                        }
                    }
                    reading
                        .topdown
                        .push(slots.map(|(raw, seq)| (TopdownRead { slots: raw, metrics }, seq)));
                }
            }
        }
        reading.at = Some(at);
        Ok(())
    }

    /// Opens region `name`: reads the counters (resetting topdown counters first when the
    /// schedule says so).
    pub fn begin(&mut self, name: &str) -> Result<(), RegionError> {
        if let Some(open) = self.open {
            return Err(RegionError::Nesting(format!(
                "region `{name}` started while `{}` is open: regions do not nest",
                self.regions[open].name
            )));
        }
        let region = match self.regions.iter().position(|r| r.name == name) {
            Some(r) => r,
            None => {
                self.regions.push(Region {
                    name: name.to_string(),
                    runs: 0,
                    seconds: 0.0,
                    total: vec![RawCount::default(); self.plan.specs().len()],
                    topdown: None,
                });
                self.regions.len() - 1
            }
        };
        let mut before = std::mem::take(&mut self.before);
        let result = self.read_into(&mut before);
        let mut reset = false;
        if result.is_ok() {
            for (g, td) in before.topdown.iter().enumerate() {
                if let Some((read, _)) = td
                    && self.schedule.due(read.slots, self.last_slots)
                {
                    let fd = self.groups[g].fds[0];
                    if let Err(errno) = self.sys.reset(fd, true) {
                        self.before = before;
                        return Err(RegionError::Syscall {
                            what: "resetting",
                            event: self.plan.specs()[self.groups[g].specs[0]].name.clone(),
                            errno,
                        });
                    }
                    reset = true;
                }
            }
        }
        let result = if reset && result.is_ok() { self.read_into(&mut before) } else { result };
        self.before = before;
        result?;
        self.open = Some(region);
        Ok(())
    }

    /// Closes the open region and adds it to the region's total, without building a
    /// [`Sample`] (the cheapest stop; [`Measurement::last`] builds one afterwards).
    pub fn end_total(&mut self) -> Result<(), RegionError> {
        self.last = None;
        let Some(region) = self.open else {
            return Err(RegionError::Nesting("stop without a started region".into()));
        };
        let mut after = std::mem::take(&mut self.after);
        let result = self.read_into(&mut after);
        self.after = after;
        self.open = None;
        result?;
        let (before, after) = (&self.before, &self.after);
        let seconds = match (before.at, after.at) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        self.delta.clear();
        self.delta.extend(after.values.iter().zip(&before.values).map(|(b, a)| b.since(*a)));
        let mut topdown_acc: Option<([i128; 8], u64, bool, f64)> = None;
        let mut topdown = None;
        for (g, group) in self.groups.iter().enumerate() {
            let (Some(layout), Some((a, seq_a)), Some((b, seq_b))) =
                (&group.topdown, before.topdown[g], after.topdown[g])
            else {
                continue;
            };
            if seq_a != seq_b {
                // The kernel rescheduled the group (folding and zeroing slots and
                // PERF_METRICS): the raw values no longer share a base.
                return Err(RegionError::Rdpmc {
                    event: self.plan.specs()[group.specs[0]].name.clone(),
                    why: Unreadable::Unstable,
                });
            }
            let t = topdown::between(a, b, layout.level2).ok();
            let mut fields = [0i128; 8];
            for (i, f) in fields.iter_mut().enumerate() {
                *f = topdown::field_slots(a, b, i);
            }
            // The metric events' counts for the compiled formulas: slots-scaled fields, as
            // the kernel's own read() computes them.
            for (m, field) in layout.fields.iter().enumerate() {
                if let Some(i) = field {
                    self.delta[group.specs[m]].value = (fields[*i].max(0) / 255) as u64;
                }
            }
            self.delta[group.specs[0]].value = b.slots.saturating_sub(a.slots);
            if let Some(t) = t {
                self.last_slots = Some(t.slots);
                topdown_acc = Some((fields, t.slots, layout.level2, t.error_bound));
            }
            topdown = t;
        }
        let r = &mut self.regions[region];
        r.runs += 1;
        r.seconds += seconds;
        for (t, d) in r.total.iter_mut().zip(&self.delta) {
            t.value += d.value;
            t.enabled += d.enabled;
            t.running += d.running;
        }
        r.topdown = match (r.topdown.take(), topdown_acc) {
            (Some((mut f, s, l2, e)), Some((g, t, _, e2))) => {
                for i in 0..8 {
                    f[i] += g[i];
                }
                Some((f, s + t, l2, e.max(e2)))
            }
            (x, y) => x.or(y),
        };
        self.last = Some((region, seconds, topdown));
        Ok(())
    }

    /// Closes the open region: reads the counters and returns its sample, which is also
    /// added to the region's total.
    pub fn end(&mut self) -> Result<Sample, RegionError> {
        self.end_total()?;
        Ok(self.last().expect("a region just ended"))
    }

    /// The sample of the last region that ended.
    pub fn last(&mut self) -> Option<Sample> {
        let (region, seconds, topdown) = self.last?;
        let name = self.regions[region].name.clone();
        let delta = snapshot(&self.delta);
        Some(self.sample(&name, 1, seconds, &delta, topdown))
    }

    /// Starts region `name`; the guard's [`Running::stop`] returns the sample.
    pub fn start(&mut self, name: &str) -> Result<Running<'_, S, P>, RegionError> {
        self.begin(name)?;
        Ok(Running { m: Some(self) })
    }

    /// Runs `work` as region `name`.
    pub fn measure<T>(
        &mut self,
        name: &str,
        work: impl FnOnce() -> T,
    ) -> Result<(T, Sample), RegionError> {
        self.begin(name)?;
        let value = work();
        let sample = self.end()?;
        Ok((value, sample))
    }

    fn sample(
        &mut self,
        name: &str,
        runs: usize,
        seconds: f64,
        delta: &Snapshot,
        topdown: Option<Topdown>,
    ) -> Sample {
        let es = eval::EvalInput { counts: delta, seconds, rusage: None };
        let results = self.plan.evaluate(&mut self.evaluators, &es);
        let counts = self
            .plan
            .rows()
            .iter()
            .filter(|r| r.show && r.copy_of.is_none() && matches!(r.source, Source::Counter(_)))
            .map(|r| Count {
                name: r.name.clone(),
                value: match eval::shown(&self.plan, r, &es) {
                    eval::Shown::Value { count, .. } => Some(count),
                    _ => None,
                },
                unit: r.unit.clone(),
                metrics: r
                    .roots
                    .iter()
                    .map(|&i| {
                        let root = &self.plan.roots()[i];
                        root.model.str(root.model.metrics[root.metric].name).to_string()
                    })
                    .collect(),
            })
            .collect();
        let metrics = self
            .plan
            .roots()
            .iter()
            .zip(&results)
            .map(|(root, result)| {
                let model = root.model;
                let metric = &model.metrics[root.metric];
                let names = |rows: &[usize]| {
                    rows.iter()
                        .map(|&r| self.plan.rows()[r].name.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let note = if let Some(fail) = result.failure {
                    Some(format!("no value: {fail}"))
                } else if !result.missing.is_empty() {
                    let reason =
                        result.missing.iter().find_map(|&r| match &self.plan.rows()[r].source {
                            Source::Missing(why) => Some(format!(": {why}")),
                            _ => None,
                        });
                    let n = result.missing.len();
                    let shown = names(&result.missing[..n.min(3)]);
                    let more = if n > 3 { format!(" and {} more", n - 3) } else { String::new() };
                    let value = if result.value.is_nan() {
                        "no value"
                    } else {
                        "computed without them, treat with care"
                    };
                    Some(format!(
                        "{value}: {shown}{more} could not be counted{}",
                        reason.unwrap_or_default()
                    ))
                } else if !result.not_counted.is_empty() {
                    Some(format!("{} never ran on a counter", names(&result.not_counted)))
                } else {
                    None
                };
                MetricValue {
                    name: model.str(metric.name).to_string(),
                    value: result.scaled(model, root.metric),
                    unit: if metric.has_scale_unit {
                        model.str(metric.unit).to_string()
                    } else {
                        String::new()
                    },
                    note,
                }
            })
            .collect();
        Sample {
            region: name.to_string(),
            runs,
            seconds,
            path: self.path(),
            counts,
            metrics,
            topdown,
        }
    }

    /// Every region's total, in the order they were first measured.
    pub fn totals(&mut self) -> Vec<Sample> {
        let regions = self.regions.clone();
        regions
            .iter()
            .filter(|r| r.runs > 0)
            .map(|r| {
                let topdown = r.topdown.and_then(|(f, slots, level2, bound)| {
                    // Fields summed over runs: one "read" of 0 and one of the sums, so the
                    // same slot-weighted arithmetic applies.
                    let ratio = |i: usize| f[i] as f64 / (255.0 * slots as f64);
                    (slots > 0).then(|| {
                        let level1 = topdown::Level1 {
                            retiring: ratio(0),
                            bad_speculation: ratio(1),
                            frontend_bound: ratio(2),
                            backend_bound: ratio(3),
                        };
                        let level2 = level2.then(|| topdown::Level2 {
                            heavy_operations: ratio(4),
                            light_operations: level1.retiring - ratio(4),
                            branch_mispredicts: ratio(5),
                            machine_clears: level1.bad_speculation - ratio(5),
                            fetch_latency: ratio(6),
                            fetch_bandwidth: level1.frontend_bound - ratio(6),
                            memory_bound: ratio(7),
                            core_bound: level1.backend_bound - ratio(7),
                        });
                        Topdown { slots, level1, level2, error_bound: bound }
                    })
                });
                self.sample(&r.name, r.runs, r.seconds, &snapshot(&r.total), topdown)
            })
            .collect()
    }

    /// Prints every region's total as `tmetric stat` prints its counts and metrics.
    pub fn report(&mut self, out: &mut dyn Write) -> io::Result<()> {
        for sample in self.totals() {
            sample.print(out)?;
        }
        for w in self.plan.warnings() {
            writeln!(out, "\n tmetric: warning: {w}")?;
        }
        writeln!(out)
    }
}

impl<S: Syscalls, P: Pages> Drop for Measurement<S, P> {
    fn drop(&mut self) {
        for group in std::mem::take(&mut self.groups) {
            drop(group.pages);
            // Siblings first: closing a leader first would briefly promote them.
            for &fd in group.fds.iter().rev() {
                self.sys.close(fd);
            }
        }
    }
}

/// An open region; [`Running::stop`] ends it (dropping it ends it too, discarding errors).
pub struct Running<'a, S: Syscalls, P: Pages> {
    m: Option<&'a mut Measurement<S, P>>,
}

impl<S: Syscalls, P: Pages> Running<'_, S, P> {
    /// Ends the region and returns its sample.
    pub fn stop(mut self) -> Result<Sample, RegionError> {
        let m = self.m.take().expect("a running region has its measurement");
        m.end()
    }

    /// Ends the region, adding it to the region's total only (no [`Sample`] is built).
    pub fn finish(mut self) -> Result<(), RegionError> {
        let m = self.m.take().expect("a running region has its measurement");
        m.end_total()
    }
}

impl<S: Syscalls, P: Pages> Drop for Running<'_, S, P> {
    fn drop(&mut self) {
        if let Some(m) = self.m.take() {
            let _ = m.end_total();
        }
    }
}

/// A miss as its `Display` words it, with its cause (why no CPU model was found).
fn worded(miss: &Miss) -> String {
    match std::error::Error::source(miss) {
        Some(cause) => format!("{miss} ({cause})"),
        None => miss.to_string(),
    }
}

/// Per-spec counts as the engine's snapshot (one task counter per event).
fn snapshot(values: &[RawCount]) -> Snapshot {
    Snapshot {
        events: values
            .iter()
            .map(|&raw| Some(vec![CpuCount { cpu: -1, thread: -1, raw }]))
            .collect(),
    }
}

/// The groups a region opens: at most one hardware group plus one group of software events.
/// Anything more would be multiplexed or read at different moments, so it is an error.
fn region_groups(plan: &Plan) -> Result<Vec<Vec<usize>>, RegionError> {
    let mut hardware: Vec<Vec<usize>> = Vec::new();
    let mut software: Vec<usize> = Vec::new();
    let mut grouped = vec![false; plan.specs().len()];
    for g in plan.groups() {
        for &s in g {
            grouped[s] = true;
        }
        if g.iter().any(|&s| is_hardware(&plan.events()[s].kind)) {
            hardware.push(g.clone());
        } else {
            software.extend(g.iter().copied());
        }
    }
    for (s, done) in grouped.iter().enumerate() {
        if *done {
            continue;
        }
        if is_hardware(&plan.events()[s].kind) {
            hardware.push(vec![s]);
        } else {
            software.push(s);
        }
    }
    let name = |r: &tmetric_engine::Root| r.model.str(r.model.metrics[r.metric].name).to_string();
    if let Some((root, why)) = plan.roots().iter().find_map(|r| match &r.placement {
        Placement::Impossible { why } => Some((r, why)),
        _ => None,
    }) {
        return Err(RegionError::Impossible { metric: name(root), why: why.clone() });
    }
    let spread: Vec<String> = plan
        .roots()
        .iter()
        .filter(|r| matches!(r.placement, Placement::Spread { .. }))
        .map(name)
        .collect();
    if hardware.len() > 1 || !spread.is_empty() {
        let mut why = format!("{} hardware groups", hardware.len());
        if !spread.is_empty() {
            why += &format!("; not counted together: {}", spread.join(", "));
        }
        return Err(RegionError::TooManyGroups { why });
    }
    let mut groups = hardware;
    if !software.is_empty() {
        software.sort_unstable();
        software.dedup();
        groups.push(software);
    }
    if let Some(big) = groups.iter().find(|g| g.len() > MAX_MEMBERS) {
        return Err(RegionError::TooManyGroups {
            why: format!("a group of {} events; at most {MAX_MEMBERS} are read at once", big.len()),
        });
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_split_outside_pmu_terms_and_groups() {
        assert_eq!(
            split_items("page-faults, cpu/event=0x3c,umask=0/,TopdownL1,{cycles,instructions}"),
            vec!["page-faults", "cpu/event=0x3c,umask=0/", "TopdownL1", "{cycles,instructions}"]
        );
        assert_eq!(split_items(" , "), Vec::<String>::new());
    }
}
