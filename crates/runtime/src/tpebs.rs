//! Retire-latency (TPEBS, `:R`) sampling in-process: per-event latency statistics and the
//! [`Sampler`], which opens one sampling event per CPU (or one per task), maps each ring
//! buffer and drains the rings in a reader thread whose every wait is bounded.
//!
//! # Public API
//! * [`TpebsMode`] (`mean`, `min`, `max`, `last`, `p97`; `FromStr`, `Display`): which
//!   statistic `--tpebs-mode` feeds to the metrics; [`TpebsMode::ALL`] lists them.
//! * [`LatencyStats`]: one event's samples (count, sum, min, max, last, a 2^16-bucket
//!   histogram of `var3_w`, lost and throttle records); [`LatencyStats::add`] is O(1).
//!   [`LatencyStats::summary`] gives a [`Summary`] with the mean, min, max, last and the 97%
//!   tail mean, and [`Summary::value`] picks one by mode.
//! * [`tail_count`]: how many of the lowest samples the 97% mean keeps (the original latency script's rule).
//! * [`SampleSpec`], [`SamplerOptions`], [`Sampler::start`] (over any [`Syscalls`](crate::Syscalls); per
//!   CPU, or per task: one inherited event per CPU of [`SamplerOptions::task_cpus`] that
//!   the spec's PMU covers, else
//!   one event for the task alone), [`Sampler::read`] (totals and the interval since the
//!   previous read, per event, as [`EventReport`]s, with the kernel's exact lost-sample
//!   count from `PERF_FORMAT_LOST` beside the `PERF_RECORD_LOST` records seen) and
//!   [`Sampler::stop`] (disables, drains, joins, closes). Errors are [`SamplerError`] and
//!   name the event, the CPU and the errno with the kernel's reason.
//!
//! # Statistics
//! The retire latency of a sample is `var3_w` of its `PERF_SAMPLE_WEIGHT_STRUCT` weight (see
//! [`crate::ring`]). Values are f64 and unrounded: perf 6.12 feeds `rint(sum / count)` to the
//! metrics, so a caller wanting perf's exact figure rounds the mean itself. The 97% tail mean
//! sorts the samples ascending, keeps the lowest [`tail_count`]`(n) = floor(0.97 n + 0.5)` and
//! averages them. `tmetric latency` uses this same rule (its unit tests check that both give
//! the same statistics on the same samples).
//!
//! # Bounded waits
//! Nothing here blocks for ever, unlike perf 6.12, whose forked `perf record` could hang
//! `perf stat` when it failed. [`Sampler::start`] makes only non-blocking calls (open, mmap,
//! ioctl) and fails with the first refusal, leaving nothing open. The reader thread sleeps in
//! `poll(2)` on the rings plus a wake-up socket for at most [`SamplerOptions::poll_interval`];
//! it drains every ring on each wake, drops a ring the kernel hangs up (the sampled task
//! exited: poll would otherwise return at once for ever), and answers [`Sampler::read`] and
//! [`Sampler::stop`] after a fresh drain. Both wait for the answer at most
//! [`SamplerOptions::answer_timeout`] and return [`SamplerError::NoAnswer`] otherwise; a reader
//! that died is reported with its panic message. A sampler dropped without `stop` tells its
//! thread to finish and closes its descriptors without waiting.

use std::time::Duration;

use crate::sys::{Attr, Errno};

mod reader;
mod sampler;
mod stats;

pub use sampler::Sampler;
pub use stats::{LatencyStats, Summary, TpebsMode, UnknownMode, tail_count};

/// One event to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleSpec {
    /// The name reports and errors use (the `:R` event's name).
    pub name: String,
    /// The event's attributes. The sampler fills in `sample_type` ([`SAMPLE_TYPE`](crate::ring::SAMPLE_TYPE) when 0),
    /// the period (the options' frequency when `sample_period` is 0), the wake-up watermark
    /// and the enable bits; `precise_ip` is the caller's (TPEBS needs 1 or more).
    pub attr: Attr,
    /// Open only on these CPUs (a PMU's `cpus`/`cpumask`), when sampling per CPU and for a
    /// task opened per CPU ([`SamplerOptions::task_cpus`]).
    pub cpus: Option<Vec<u32>>,
}

/// How a [`Sampler`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerOptions {
    /// Samples per second per event when a spec gives no period (perf record's default,
    /// 4000 Hz).
    pub frequency: u64,
    /// Data pages per ring (plus one control page), rounded up to a power of two as the
    /// kernel requires.
    pub data_pages: usize,
    /// For a task target: the CPUs to open it on, one event per CPU with `inherit`, so the
    /// task's children are sampled too. Empty: one event on any CPU without `inherit` (the
    /// task alone), because the kernel refuses to mmap an inherited event with `cpu = -1`
    /// (EINVAL).
    pub task_cpus: Vec<u32>,
    /// The longest the reader sleeps between drains.
    pub poll_interval: Duration,
    /// The longest [`Sampler::read`] and [`Sampler::stop`] wait for the reader.
    pub answer_timeout: Duration,
    /// Test hook: the reader sleeps this long before each answer, standing in for a reader
    /// starved of CPU, to test the bounded waits. Zero in normal use.
    #[doc(hidden)]
    pub reader_delay: Duration,
}

impl Default for SamplerOptions {
    fn default() -> SamplerOptions {
        SamplerOptions {
            frequency: 4000,
            data_pages: 16,
            task_cpus: Vec::new(),
            poll_interval: Duration::from_millis(100),
            answer_timeout: Duration::from_secs(2),
            reader_delay: Duration::ZERO,
        }
    }
}

/// One event's statistics at a [`Sampler::read`] or [`Sampler::stop`].
#[derive(Debug, Clone, PartialEq)]
pub struct EventReport {
    /// The spec's name.
    pub name: String,
    /// Since the sampler started.
    pub total: Summary,
    /// Since the previous read (or the start).
    pub interval: Summary,
    /// Rings (CPUs or tasks) the kernel has closed, e.g. because the sampled task exited.
    pub hung_up: u32,
    /// Malformed records or ring positions met, and the first such error.
    pub decode_errors: u64,
    /// The first decoding error's text.
    pub first_error: Option<String>,
    /// Samples the kernel dropped since the start (`PERF_FORMAT_LOST`, summed over CPUs).
    /// Exact, whereas the `lost` of the summaries counts `PERF_RECORD_LOST` records, which the
    /// kernel writes only once the ring has room again, so they can trail (and at stop, never
    /// come). `None` when the kernel (before 6.0) or the backend cannot tell.
    pub kernel_lost: Option<u64>,
}

/// Errors sampling.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// Nothing to open: no specs, or no CPU left for any.
    #[error("retire-latency sampling has nothing to open: {0}")]
    Nothing(String),
    /// The spec's `sample_type` cannot be decoded.
    #[error("cannot sample `{event}`: {error}")]
    Format {
        /// The event.
        event: String,
        /// Why.
        error: crate::ring::DecodeError,
    },
    /// The kernel refused to open a sampling event.
    #[error("cannot start retire-latency sampling: the kernel refused to open `{event}`{}: {errno}; {hint}", on_cpu(*.cpu))]
    Open {
        /// The event.
        event: String,
        /// The CPU (`None` for a task event).
        cpu: Option<u32>,
        /// The errno.
        errno: Errno,
        /// The likely reason.
        hint: &'static str,
    },
    /// The ring buffer could not be mapped.
    #[error("cannot start retire-latency sampling: mapping the ring buffer of `{event}`{} failed: {errno}; {hint}", on_cpu(*.cpu))]
    Map {
        /// The event.
        event: String,
        /// The CPU.
        cpu: Option<u32>,
        /// The errno.
        errno: Errno,
        /// The likely reason.
        hint: &'static str,
    },
    /// Enabling or disabling the events failed.
    #[error("retire-latency sampling: {what} `{event}` failed: {errno}")]
    Control {
        /// `enabling` or `disabling`.
        what: &'static str,
        /// The event.
        event: String,
        /// The errno.
        errno: Errno,
    },
    /// The reader thread could not be created.
    #[error("cannot start the retire-latency reader thread: {0}")]
    Spawn(String),
    /// The reader did not answer in time.
    #[error(
        "the retire-latency reader did not answer within {} ms when asked to {what}; its samples since the last answer are not counted",
        .waited.as_millis()
    )]
    NoAnswer {
        /// `read` or `stop`.
        what: &'static str,
        /// How long it was given.
        waited: Duration,
    },
    /// The reader thread ended without being asked to.
    #[error("the retire-latency reader thread ended unexpectedly: {0}")]
    ReaderDied(String),
}

fn on_cpu(cpu: Option<u32>) -> String {
    cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default()
}

/// The kernel's likely reason for refusing a sampling event.
pub fn explain_open(errno: Errno) -> &'static str {
    match errno.0 {
        libc::EOPNOTSUPP => {
            "the PMU cannot sample this way: precise_ip above caps/max_precise (no PEBS, as in most VMs), or sampling unsupported by the PMU"
        }
        libc::EACCES | libc::EPERM => {
            "not permitted: lower /proc/sys/kernel/perf_event_paranoid, or run with CAP_PERFMON"
        }
        libc::ENOENT | libc::ENODEV => "the event or its PMU does not exist on this machine",
        libc::EINVAL => {
            "the PMU refuses the attributes (sampling on a counting-only PMU, WEIGHT with WEIGHT_STRUCT, or a bad config)"
        }
        libc::EMFILE | libc::ENFILE => {
            "too many open files: raise the descriptor limit (ulimit -n)"
        }
        libc::ENOSYS => "this backend cannot open sampling events",
        _ => "see perf_event_open(2)",
    }
}
