//! tmetric-region: measures regions of code from inside the program. A [`Measurement`] reads
//! its one list as `stat`'s `-M` items and `-e` lists and plans them as `stat` does
//! (`tmetric_engine::setup::build`, one probe of the machine), opens its counter groups for the calling thread
//! in an engine session (`Session::open_own_thread`: the runtime's `open_own_group`, all or
//! nothing), evaluates through that session, and reads the groups at each region's start and stop: with `rdpmc` when every member's mmap page
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
//! * Inside: `group.rs` opens and reads the groups, `region.rs` the region boundaries and
//!   totals, `sample.rs` what a region measured and how it prints.

#![forbid(unsafe_code)]

pub mod topdown;
pub mod workload;

mod group;
mod region;
mod sample;

use group::region_groups;
pub use group::{KernelPages, NoPages, Pages};
pub use region::Running;
pub use sample::{EventCount, MetricValue, Sample};

use std::marker::PhantomData;
use std::path::Path;
use std::time::Instant;

use tmetric_engine::select::{self, Miss};
use tmetric_engine::session::{Session, SessionError};
use tmetric_engine::setup::{self, Hints, Metrics, Request, SetupError};
use tmetric_engine::{Host, Plan};
use tmetric_runtime::counter::{CounterError, RawCount};
use tmetric_runtime::event::ResolvedEvent;
use tmetric_runtime::mmap::Unreadable;
use tmetric_runtime::{Errno, Kernel, Syscalls, Sysfs};

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
    /// The engine session failed otherwise (a group plan naming a spec that does not exist).
    #[error(transparent)]
    Session(SessionError),
    /// The plan could not be built otherwise (as `tmetric stat` with the same `-M`/`-e`
    /// would say).
    #[error(transparent)]
    Setup(SetupError),
}

impl From<SessionError> for RegionError {
    fn from(err: SessionError) -> RegionError {
        match err {
            SessionError::Refused { event, errno, why } => RegionError::Open { event, errno, why },
            SessionError::Open(CounterError::Ioctl { what, event, errno }) => {
                RegionError::Syscall { what, event, errno }
            }
            other => RegionError::Session(other),
        }
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
    pages: P,
    /// Before `session`: the pages are unmapped before the session closes the descriptors.
    groups: Vec<Group<P>>,
    session: Session<S>,
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
    _thread: PhantomData<*const ()>,
}

impl std::fmt::Debug for Measurement<Kernel, KernelPages> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measurement").field("specs", &self.session.plan().specs()).finish()
    }
}

impl Measurement<Kernel, KernelPages> {
    /// Plans `items` (metrics, metric groups or events, as `tmetric stat -M`/`-e` take them)
    /// on this machine and opens them for the calling thread.
    pub fn new(items: &[&str]) -> Result<Self, RegionError> {
        Measurement::with_machine(items, Path::new("/sys"), Path::new("/proc"), Kernel, KernelPages)
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
        let host = Host::probe(&Sysfs::new(sysfs_root), proc_root, None);
        let (request, misses) = request_of(items, &host)?;
        // The plan is built as `stat -M ... -e ...` builds it, on the one probe of the machine.
        let plan = match setup::build(&request, &host, Hints::default()) {
            Ok(setup) => setup.plan,
            Err(SetupError::Events { list, why }) => {
                let miss = misses.into_iter().find(|(item, _)| *item == list).map(|(_, m)| m);
                return Err(match miss {
                    Some(miss) => RegionError::Unknown { item: list, miss, why: why.to_string() },
                    None => RegionError::Setup(SetupError::Events { list, why }),
                });
            }
            Err(other) => return Err(RegionError::Setup(other)),
        };
        let groups = region_groups(&plan)?;
        let mut session = Session::open_own_thread(sys, plan, groups, host.env().clone())?;
        session.enable().map_err(SessionError::Open)?;
        let mut m = Measurement {
            pages,
            groups: Vec::new(),
            session,
            regions: Vec::new(),
            open: None,
            before: Reading::default(),
            after: Reading::default(),
            delta: Vec::new(),
            last: None,
            schedule: ResetSchedule::default(),
            last_slots: None,
            epoch: Instant::now(),
            _thread: PhantomData,
        };
        m.map_groups(host.pmus().pmus.iter().any(|p| p.core && p.metric_events >= 8));
        Ok(m)
    }

    /// The plan (rows, specs, groups, roots).
    pub fn plan(&self) -> &Plan {
        self.session.plan()
    }

    /// How the hardware group is read (`Read` when there is none).
    pub fn path(&self) -> ReadPath {
        if self.groups.iter().any(|g| g.pages.is_some()) { ReadPath::Rdpmc } else { ReadPath::Read }
    }

    /// Sets the topdown reset schedule (rdpmc groups led by `slots` only).
    pub fn set_reset_schedule(&mut self, schedule: ResetSchedule) {
        self.schedule = schedule;
    }
}

/// The region API's one list read as `stat`'s flags: an item perf's `-M` lookup finds is an
/// `-M` item, one it misses is an `-e` list when every event it names is a counter (a region
/// times itself: tool events have no place in it). Each `-e` list keeps its `-M` miss, so an
/// item that is neither says both.
fn request_of(items: &[&str], host: &Host) -> Result<(Request, Vec<(String, Miss)>), RegionError> {
    let tables = host.tables(None);
    let resolver = tmetric_engine::events::resolver(
        host.sysfs(),
        &tables,
        tmetric_engine::contract::current(),
    );
    let mut metrics: Vec<String> = Vec::new();
    let mut events: Vec<(String, Miss)> = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let miss = match select::on_machine(&[item.to_string()], host, |_| None) {
            Ok(_) => {
                metrics.push(item.to_string());
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
    // Nothing at all counts nothing: not perf's default selection.
    let metrics = if metrics.is_empty() && events.is_empty() {
        Metrics::Picks(Vec::new())
    } else {
        Metrics::Items(metrics)
    };
    let request = Request {
        events: events.iter().map(|(item, _)| item.clone()).collect(),
        metrics,
        ..Request::default()
    };
    Ok((request, events))
}

/// A miss as its `Display` words it, with its cause (why no CPU model was found).
fn worded(miss: &Miss) -> String {
    match std::error::Error::source(miss) {
        Some(cause) => format!("{miss} ({cause})"),
        None => miss.to_string(),
    }
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
