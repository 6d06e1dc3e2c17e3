//! tmetric-region: measures regions of code from inside the program. A [`Measurement`] plans
//! a metric selection with tmetric's engine, opens one counter group for the calling thread,
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
//! * [`capi`]: the C ABI (`include/tmetric_region.h`).
//! * [`workload`]: workloads with known page faults and CPU time (example and tests).

pub mod capi;
pub mod topdown;
pub mod workload;

use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::Path;
use std::time::Instant;

use tmetric_catalog::Model;
use tmetric_engine::{
    Evaluators, Machine, Pick, Placement, Plan, PlanOptions, PmuModel, Source, eval,
};
use tmetric_runtime::counter::{CpuCount, RawCount, Snapshot, parse_group_read};
use tmetric_runtime::event::{self, EventKind, Resolved};
use tmetric_runtime::mmap::{PageCount, PageRead, Unreadable, UserPage};
use tmetric_runtime::sys::READ_FORMAT;
use tmetric_runtime::{Environment, Errno, Kernel, Syscalls, Sysfs};

use topdown::{ResetSchedule, Topdown, TopdownRead};

/// Errors of the region API.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// An item is neither a metric, a metric group nor an event.
    #[error("`{item}` is not a metric or metric group of {models}, nor an event: {why}")]
    Unknown {
        /// The item.
        item: String,
        /// The models searched.
        models: String,
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
    /// The kernel refused a counter.
    #[error("cannot open `{event}`: {errno}")]
    Open {
        /// The event.
        event: String,
        /// The errno.
        errno: Errno,
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

/// One reading of every group.
#[derive(Debug, Clone)]
struct Reading {
    snapshot: Snapshot,
    /// Per group read with rdpmc and led by slots: the raw values and the leader page's lock.
    topdown: Vec<Option<(TopdownRead, u32)>>,
    at: Instant,
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
        for c in &self.counts {
            let value = match c.value {
                Some(v) if c.unit == "msec" => format!("{v:.2}"),
                Some(v) => format!("{v:.0}"),
                None => "<not counted>".to_string(),
            };
            writeln!(out, " {value:>18} {:<5} {}", c.unit, c.name)?;
        }
        for m in &self.metrics {
            let note = m.note.as_deref().map(|n| format!("  ({n})")).unwrap_or_default();
            writeln!(out, " {:>18} {:<5} # {:>8.2} {} {}{note}", "", "", m.value, m.unit, m.name)?;
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
    total: Snapshot,
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
    open: Option<(String, Reading)>,
    schedule: ResetSchedule,
    last_slots: Option<u64>,
    epoch: Instant,
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Measurement<Kernel, KernelPages> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measurement").field("specs", &self.plan.specs).finish()
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
    /// (the kernel, or `tmetric_runtime::sim::SimKernel`) and `pages` ([`NoPages`] where the
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
        let common = tmetric_catalog::common();
        let mut picks: Vec<Pick> = Vec::new();
        let mut events: Vec<String> = Vec::new();
        for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
            let mut found: Vec<(&'static Model, usize)> =
                common.select(item).into_iter().map(|m| (common, m)).collect();
            if found.is_empty()
                && let Some(model) = model
            {
                found = model.select(item).into_iter().map(|m| (model, m)).collect();
            }
            if found.is_empty() && item.starts_with('{') {
                // A group of events, as `-e '{a,b}'` takes it.
                events.push(item.to_string());
                continue;
            }
            if found.is_empty() {
                match event::resolve(item, &sysfs) {
                    Ok(Resolved::Counter(_)) => events.push(item.to_string()),
                    Ok(Resolved::Tool(_)) => {
                        return Err(RegionError::Unknown {
                            item: item.into(),
                            models: model_names(model),
                            why: "tool events are not counters; duration is in Sample::seconds"
                                .into(),
                        });
                    }
                    Err(err) => {
                        return Err(RegionError::Unknown {
                            item: item.into(),
                            models: model_names(model),
                            why: err.to_string(),
                        });
                    }
                }
            }
            for (m, metric) in found {
                if !picks.iter().any(|p| std::ptr::eq(p.model, m) && p.metric == metric) {
                    picks.push(Pick { model: m, metric, item: item.to_string() });
                }
            }
        }
        for e in &events {
            plan.add_event_lists(std::slice::from_ref(e), &sysfs).map_err(|err| {
                RegionError::Unknown {
                    item: e.clone(),
                    models: model_names(model),
                    why: err.to_string(),
                }
            })?;
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
            schedule: ResetSchedule::default(),
            last_slots: None,
            epoch: Instant::now(),
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
        let hardware = specs.iter().any(|&s| is_hardware(&self.plan.events[s].kind));
        let mut fds: Vec<i32> = Vec::new();
        let mut ids = Vec::new();
        let close_all = |sys: &mut S, fds: &[i32]| {
            for &fd in fds.iter().rev() {
                sys.close(fd);
            }
        };
        for (i, &s) in specs.iter().enumerate() {
            let mut attr = self.plan.specs[s].attr.clone();
            attr.read_format = READ_FORMAT;
            attr.disabled = i == 0;
            // Pinned: the group is counted the whole time or goes to error state; it is
            // never multiplexed inside a region.
            attr.pinned = i == 0 && hardware;
            attr.inherit = false;
            attr.enable_on_exec = false;
            let leader = fds.first().copied().unwrap_or(-1);
            let opened = self.sys.perf_event_open(&attr, 0, -1, leader).and_then(|fd| {
                match self.sys.event_id(fd) {
                    Ok(id) => Ok((fd, id)),
                    Err(e) => {
                        self.sys.close(fd);
                        Err(e)
                    }
                }
            });
            match opened {
                Ok((fd, id)) => {
                    fds.push(fd);
                    ids.push(id);
                }
                Err(errno) => {
                    close_all(&mut self.sys, &fds);
                    return Err(RegionError::Open {
                        event: self.plan.specs[s].name.clone(),
                        errno,
                    });
                }
            }
        }
        let name = self.plan.specs[specs[0]].name.clone();
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
                    specs.iter().map(|&s| &self.plan.specs[s].attr).collect();
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

    fn read_all(&mut self) -> Result<Reading, RegionError> {
        let mut events: Vec<Option<Vec<CpuCount>>> = vec![None; self.plan.specs.len()];
        let mut tds = Vec::with_capacity(self.groups.len());
        for group in &self.groups {
            let leader = &self.plan.specs[group.specs[0]].name;
            match &group.pages {
                None => {
                    tds.push(None);
                    let mut buf = [0u8; 8 * (3 + 2 * 16)];
                    let want = 8 * (3 + 2 * group.fds.len());
                    let buf: &mut [u8] = if want <= buf.len() {
                        &mut buf[..want]
                    } else {
                        return Err(RegionError::Layout {
                            event: leader.clone(),
                            problem: format!("{} members: at most 16 per group", group.fds.len()),
                        });
                    };
                    let got = self.sys.read(group.fds[0], buf).map_err(|errno| {
                        RegionError::Syscall { what: "reading", event: leader.clone(), errno }
                    })?;
                    if got == 0 {
                        return Err(RegionError::Layout {
                            event: leader.clone(),
                            problem: "the pinned group could not be kept on the counters (the kernel put it in error state)".into(),
                        });
                    }
                    let parsed = parse_group_read(&buf[..got], group.fds.len()).map_err(
                        |problem| RegionError::Layout { event: leader.clone(), problem },
                    )?;
                    for (value, id) in parsed.values {
                        let Some(m) = group.ids.iter().position(|&x| x == id) else {
                            return Err(RegionError::Layout {
                                event: leader.clone(),
                                problem: format!("the kernel returned id {id}, which no member has"),
                            });
                        };
                        let raw =
                            RawCount { value, enabled: parsed.enabled, running: parsed.running };
                        events[group.specs[m]] = Some(vec![CpuCount { cpu: -1, raw }]);
                    }
                }
                Some(pages) => {
                    let mut counts = Vec::with_capacity(pages.len());
                    for (m, page) in pages.iter().enumerate() {
                        let c = self.pages.read(page).map_err(|why| RegionError::Rdpmc {
                            event: self.plan.specs[group.specs[m]].name.clone(),
                            why,
                        })?;
                        counts.push(c);
                    }
                    // A pinned group that is on its counters at both ends of a region with
                    // the page unchanged (checked in `end`) ran all along: its enabled and
                    // running times are the wall clock's.
                    let ns = self.epoch.elapsed().as_nanos() as u64;
                    let (enabled, running) = (ns, ns);
                    for (m, c) in counts.iter().enumerate() {
                        let raw = RawCount { value: c.value, enabled, running };
                        events[group.specs[m]] = Some(vec![CpuCount { cpu: -1, raw }]);
                    }
                    tds.push(group.topdown.as_ref().map(|layout| {
                        let metrics = layout
                            .fields
                            .iter()
                            .position(Option::is_some)
                            .map_or(0, |m| counts[m].raw);
                        (TopdownRead { slots: counts[0].raw, metrics }, counts[0].seq)
                    }));
                }
            }
        }
        Ok(Reading { snapshot: Snapshot { events }, topdown: tds, at: Instant::now() })
    }

    /// Opens region `name`: reads the counters (resetting topdown counters first when the
    /// schedule says so).
    pub fn begin(&mut self, name: &str) -> Result<(), RegionError> {
        if let Some((open, _)) = &self.open {
            return Err(RegionError::Nesting(format!(
                "region `{name}` started while `{open}` is open: regions do not nest"
            )));
        }
        let mut reading = self.read_all()?;
        let mut reset = false;
        for (g, td) in reading.topdown.iter().enumerate() {
            if let Some((read, _)) = td
                && self.schedule.due(read.slots, self.last_slots)
            {
                let fd = self.groups[g].fds[0];
                self.sys.reset(fd, true).map_err(|errno| RegionError::Syscall {
                    what: "resetting",
                    event: self.plan.specs[self.groups[g].specs[0]].name.clone(),
                    errno,
                })?;
                reset = true;
            }
        }
        if reset {
            reading = self.read_all()?;
        }
        self.open = Some((name.to_string(), reading));
        Ok(())
    }

    /// Closes the open region: reads the counters and returns its sample, which is also
    /// added to the region's total.
    pub fn end(&mut self) -> Result<Sample, RegionError> {
        let after = self.read_all()?;
        let Some((name, before)) = self.open.take() else {
            return Err(RegionError::Nesting("stop without a started region".into()));
        };
        let seconds = after.at.duration_since(before.at).as_secs_f64();
        let mut delta = after.snapshot.since(&before.snapshot);
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
                    event: self.plan.specs[group.specs[0]].name.clone(),
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
                if let Some(i) = field
                    && let Some(Some(cpus)) = delta.events.get_mut(group.specs[m])
                {
                    cpus[0].raw.value = (fields[*i].max(0) / 255) as u64;
                }
            }
            if let Some(Some(cpus)) = delta.events.get_mut(group.specs[0]) {
                cpus[0].raw.value = b.slots.saturating_sub(a.slots);
            }
            if let Some(t) = t {
                self.last_slots = Some(t.slots);
                topdown_acc = Some((fields, t.slots, layout.level2, t.error_bound));
            }
            topdown = t;
        }
        let sample = self.sample(&name, 1, seconds, &delta, topdown);
        match self.regions.iter_mut().find(|r| r.name == name) {
            Some(r) => {
                r.runs += 1;
                r.seconds += seconds;
                add(&mut r.total, &delta);
                r.topdown = match (r.topdown.take(), topdown_acc) {
                    (Some((mut f, s, l2, e)), Some((g, t, _, e2))) => {
                        for i in 0..8 {
                            f[i] += g[i];
                        }
                        Some((f, s + t, l2, e.max(e2)))
                    }
                    (x, y) => x.or(y),
                };
            }
            None => self.regions.push(Region {
                name,
                runs: 1,
                seconds,
                total: delta,
                topdown: topdown_acc,
            }),
        }
        Ok(sample)
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
        let es = eval::Sample { counts: delta, seconds, rusage: None };
        let results = self.plan.evaluate(&mut self.evaluators, &es);
        let counts = self
            .plan
            .rows
            .iter()
            .filter(|r| r.show && r.copy_of.is_none() && matches!(r.source, Source::Counter(_)))
            .map(|r| Count {
                name: r.name.clone(),
                value: match eval::shown(&self.plan, r, &es) {
                    eval::Shown::Value { count, .. } => Some(count),
                    _ => None,
                },
                unit: r.unit.clone(),
            })
            .collect();
        let metrics = self
            .plan
            .roots
            .iter()
            .zip(&results)
            .map(|(root, result)| {
                let model = root.model;
                let metric = &model.metrics[root.metric];
                let names = |rows: &[usize]| {
                    rows.iter().map(|&r| self.plan.rows[r].name.clone()).collect::<Vec<_>>().join(", ")
                };
                let note = if let Some(fail) = result.failure {
                    Some(format!("no value: {fail}"))
                } else if !result.missing.is_empty() {
                    Some(format!("{} could not be counted", names(&result.missing)))
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
                self.sample(&r.name, r.runs, r.seconds, &r.total, topdown)
            })
            .collect()
    }

    /// Prints every region's total as `tmetric stat` prints its counts and metrics.
    pub fn report(&mut self, out: &mut dyn Write) -> io::Result<()> {
        for sample in self.totals() {
            sample.print(out)?;
        }
        for w in &self.plan.warnings {
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
}

impl<S: Syscalls, P: Pages> Drop for Running<'_, S, P> {
    fn drop(&mut self) {
        if let Some(m) = self.m.take() {
            let _ = m.end();
        }
    }
}

fn model_names(model: Option<&'static Model>) -> String {
    match model {
        Some(m) => format!("the common metrics and {}", m.path()),
        None => "the common metrics (no CPU model matches this machine)".into(),
    }
}

/// Adds `delta` into `total`, event by event.
fn add(total: &mut Snapshot, delta: &Snapshot) {
    for (t, d) in total.events.iter_mut().zip(&delta.events) {
        if let (Some(t), Some(d)) = (t, d) {
            for (a, b) in t.iter_mut().zip(d) {
                a.raw.value += b.raw.value;
                a.raw.enabled += b.raw.enabled;
                a.raw.running += b.raw.running;
            }
        }
    }
}

/// The groups a region opens: at most one hardware group plus one group of software events.
/// Anything more would be multiplexed or read at different moments, so it is an error.
fn region_groups(plan: &Plan) -> Result<Vec<Vec<usize>>, RegionError> {
    let mut hardware: Vec<Vec<usize>> = Vec::new();
    let mut software: Vec<usize> = Vec::new();
    let mut grouped = vec![false; plan.specs.len()];
    for g in &plan.groups {
        for &s in g {
            grouped[s] = true;
        }
        if g.iter().any(|&s| is_hardware(&plan.events[s].kind)) {
            hardware.push(g.clone());
        } else {
            software.extend(g.iter().copied());
        }
    }
    for (s, done) in grouped.iter().enumerate() {
        if *done {
            continue;
        }
        if is_hardware(&plan.events[s].kind) {
            hardware.push(vec![s]);
        } else {
            software.push(s);
        }
    }
    let spread: Vec<String> = plan
        .roots
        .iter()
        .filter(|r| matches!(r.placement, Placement::Spread { .. } | Placement::Impossible { .. }))
        .map(|r| r.model.str(r.model.metrics[r.metric].name).to_string())
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
    Ok(groups)
}
