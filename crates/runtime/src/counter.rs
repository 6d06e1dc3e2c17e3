//! Counters: opening events in groups, per task or on every CPU (or a thread's own group,
//! [`open_own_group`]), reading each group with one `read()` of the
//! `GROUP|ID|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING` layout, and turning raw values into counts
//! scaled for multiplexing (perf's `perf_counts_values__scale`, tools/perf/util/stat.c).

use crate::event::CounterEvent;
use crate::sys::{Attr, Errno};

mod set;
mod values;

pub use set::{CounterSet, MOVE_FOR, Opening, Split, open_own_group};
pub use values::{
    Aggregate, CpuCount, GroupRead, RawCount, Snapshot, parse_group_read, scaling, set_scaling,
};

/// What the counters watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One task and the children it creates afterwards (`inherit`).
    Task {
        /// The task.
        pid: i32,
        /// Start counting at the task's next `exec` (`enable_on_exec`), so a forked child
        /// waiting to exec its workload is not counted; otherwise [`CounterSet::enable`] starts.
        on_exec: bool,
    },
    /// Every task, on each of these CPUs (`pid = -1`, one descriptor per event per CPU).
    Cpus(Vec<u32>),
    /// Each of these threads apart (`pid = tid`, `cpu = -1`, one descriptor per event per
    /// thread, with `inherit` as perf's): the threads of `-p`, `-t` and `--per-thread`,
    /// listed once at the start. A thread started later has no counter of its own: the
    /// kernel adds its counts to the counted thread that created it. A thread that exits
    /// keeps its final counts; one already gone at open time is left out
    /// ([`CounterSet::vanished`]).
    Threads(Vec<i32>),
}

/// One event to count.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSpec {
    /// The name errors and reports use.
    pub name: String,
    /// Type, config words and exclude bits.
    pub attr: Attr,
    /// Open only on these CPUs when counting per CPU (a PMU's `cpumask`).
    pub cpus: Option<Vec<u32>>,
    /// Count only tasks of this cgroup (a path under the cgroup mount, as perf's `-G`
    /// names it); per CPU only, as the kernel requires.
    pub cgroup: Option<String>,
    /// A tracepoint's filter (`--filter`), set on every descriptor once the counters are
    /// open, as perf's `evlist__apply_filters`.
    pub filter: Option<String>,
}

impl From<&CounterEvent> for CounterSpec {
    fn from(event: &CounterEvent) -> CounterSpec {
        CounterSpec {
            name: event.name.clone(),
            attr: event.attr.clone(),
            cpus: event.cpus.clone(),
            cgroup: None,
            filter: None,
        }
    }
}

/// Why an event is not counted: the kernel refused to open it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFailure {
    /// The errno.
    pub errno: Errno,
    /// The CPU the open failed on (`None` for a task counter).
    pub cpu: Option<u32>,
}

/// Errors counting.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// The group plan names an event that does not exist or names one twice.
    #[error("counter group {group} names event {event}, which {why}")]
    Plan {
        /// The group's position.
        group: usize,
        /// The event index.
        event: usize,
        /// What is wrong.
        why: &'static str,
    },
    /// `read()` of a group failed.
    #[error("reading the group led by `{event}` failed: {errno}")]
    Read {
        /// The leader's name.
        event: String,
        /// The errno.
        errno: Errno,
    },
    /// `read()` returned something other than the layout asked for.
    #[error("reading the group led by `{event}`: {problem}")]
    Layout {
        /// The leader's name.
        event: String,
        /// What did not match.
        problem: String,
    },
    /// The open-file limit ran out while opening event descriptors.
    #[error(
        "the limit on open files (`ulimit -n`) was reached after opening {opened} event \
         descriptors; this run needs {needed} (one per event per CPU) plus a few for tmetric \
         itself: raise it with `ulimit -n {suggest}` (or count fewer events or CPUs)"
    )]
    FileLimit {
        /// Event descriptors open when `EMFILE` came.
        opened: usize,
        /// Event descriptors the run needs.
        needed: usize,
        /// A limit that would do.
        suggest: usize,
    },
    /// The kernel refused a tracepoint's filter (perf: `failed to set filter`).
    #[error(
        "failed to set filter \"{filter}\" on event {event}: {errno}; a filter compares the \
         tracepoint's fields (listed in its `format` file in tracefs) with values, as \
         `common_pid != 1 && flags & 0x40`"
    )]
    Filter {
        /// The event.
        event: String,
        /// The filter.
        filter: String,
        /// The errno.
        errno: Errno,
    },
    /// An enable or disable ioctl failed.
    #[error("{what} the group led by `{event}` failed: {errno}")]
    Ioctl {
        /// `enabling` or `disabling`.
        what: &'static str,
        /// The leader's name.
        event: String,
        /// The errno.
        errno: Errno,
    },
}
