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
//! * [`tail_count`]: how many of the lowest samples the 97% mean keeps (seed 002's rule).
//! * [`SampleSpec`], [`SamplerOptions`], [`Sampler::start`] (over any [`Syscalls`]; per
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
//! averages them. This is `tmetric-latency`'s rule (seed 002's `bc` expression); that crate
//! keeps its `tail_count` private and works on sorted slices, so the one-line rule is
//! restated here and a test checks both agree on the same samples.
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

use std::fmt;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::str::FromStr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::counter::Target;
use crate::ring::{Reader, Record, SAMPLE_TYPE, SampleFormat, explain_mmap};
use crate::sys::{Attr, Errno, Syscalls};

/// Which statistic of the sampled retire latencies the metrics use (`--tpebs-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TpebsMode {
    /// The arithmetic mean (perf 6.12's choice, and the default).
    #[default]
    Mean,
    /// The smallest sample.
    Min,
    /// The largest sample.
    Max,
    /// The most recent sample.
    Last,
    /// The mean of the lowest 97% (seed 002's tail statistic).
    P97,
}

impl TpebsMode {
    /// Every mode, in the order `--help` lists them.
    pub const ALL: [TpebsMode; 5] =
        [TpebsMode::Mean, TpebsMode::Min, TpebsMode::Max, TpebsMode::Last, TpebsMode::P97];

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            TpebsMode::Mean => "mean",
            TpebsMode::Min => "min",
            TpebsMode::Max => "max",
            TpebsMode::Last => "last",
            TpebsMode::P97 => "p97",
        }
    }
}

impl fmt::Display for TpebsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown `--tpebs-mode` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown --tpebs-mode `{0}`: expected one of mean, min, max, last, p97")]
pub struct UnknownMode(pub String);

impl FromStr for TpebsMode {
    type Err = UnknownMode;

    fn from_str(text: &str) -> Result<TpebsMode, UnknownMode> {
        TpebsMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| UnknownMode(text.to_string()))
    }
}

/// How many of the lowest samples the 97% mean keeps: `floor((97 n + 50) / 100)`, i.e. seed
/// 002's `scale=0; (n*0.97 + 0.5)/1` (the same as `tmetric-latency`'s private rule). At least
/// 1 for any non-empty set.
pub fn tail_count(count: u64) -> u64 {
    ((u128::from(count) * 97 + 50) / 100) as u64
}

const BUCKETS: usize = 1 << 16;

/// One event's retire-latency samples over some span.
#[derive(Clone, Default)]
pub struct LatencyStats {
    count: u64,
    sum: u128,
    min: u16,
    max: u16,
    last: u16,
    /// Samples per `var3_w` value, allocated at the first sample (512 KiB).
    histogram: Option<Box<[u64]>>,
    lost: u64,
    throttles: u64,
}

impl fmt::Debug for LatencyStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyStats")
            .field("count", &self.count)
            .field("sum", &self.sum)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("last", &self.last)
            .field("lost", &self.lost)
            .field("throttles", &self.throttles)
            .finish()
    }
}

impl LatencyStats {
    /// No samples.
    pub fn new() -> LatencyStats {
        LatencyStats::default()
    }

    /// Adds one sample's retire latency (cycles).
    pub fn add(&mut self, latency: u16) {
        if self.count == 0 {
            self.min = latency;
            self.max = latency;
        } else {
            self.min = self.min.min(latency);
            self.max = self.max.max(latency);
        }
        self.count += 1;
        self.sum += u128::from(latency);
        self.last = latency;
        let histogram = self.histogram.get_or_insert_with(|| vec![0; BUCKETS].into_boxed_slice());
        histogram[usize::from(latency)] += 1;
    }

    /// Counts `n` records the kernel dropped (`PERF_RECORD_LOST`).
    pub fn add_lost(&mut self, n: u64) {
        self.lost = self.lost.saturating_add(n);
    }

    /// Counts one `PERF_RECORD_THROTTLE`.
    pub fn add_throttle(&mut self) {
        self.throttles += 1;
    }

    /// Adds `other`'s samples (taken after this one's, so its `last` wins when it has samples).
    pub fn merge(&mut self, other: &LatencyStats) {
        if other.count > 0 {
            if self.count == 0 {
                self.min = other.min;
                self.max = other.max;
            } else {
                self.min = self.min.min(other.min);
                self.max = self.max.max(other.max);
            }
            self.count += other.count;
            self.sum += other.sum;
            self.last = other.last;
            if let Some(theirs) = &other.histogram {
                let ours =
                    self.histogram.get_or_insert_with(|| vec![0; BUCKETS].into_boxed_slice());
                for (o, t) in ours.iter_mut().zip(theirs.iter()) {
                    *o += t;
                }
            }
        }
        self.lost = self.lost.saturating_add(other.lost);
        self.throttles += other.throttles;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean of the lowest [`tail_count`] samples.
    fn tail_mean(&self) -> Option<f64> {
        let histogram = self.histogram.as_ref()?;
        let mut keep = tail_count(self.count);
        if keep == 0 {
            return None;
        }
        let kept = keep;
        let mut sum = 0u128;
        for (value, &n) in histogram.iter().enumerate() {
            let take = n.min(keep);
            sum += u128::from(take) * value as u128;
            keep -= take;
            if keep == 0 {
                break;
            }
        }
        Some(sum as f64 / kept as f64)
    }

    /// The statistics.
    pub fn summary(&self) -> Summary {
        let some = |v: u16| (self.count > 0).then_some(f64::from(v));
        Summary {
            count: self.count,
            lost: self.lost,
            throttles: self.throttles,
            mean: (self.count > 0).then(|| self.sum as f64 / self.count as f64),
            min: some(self.min),
            max: some(self.max),
            last: some(self.last),
            p97: self.tail_mean(),
        }
    }
}

/// The statistics of one event's retire latencies (cycles); `None` without samples.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Samples.
    pub count: u64,
    /// Records the kernel dropped because the ring was full.
    pub lost: u64,
    /// Times the kernel throttled the event (too many interrupts).
    pub throttles: u64,
    /// Mean.
    pub mean: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Most recent.
    pub last: Option<f64>,
    /// Mean of the lowest 97%.
    pub p97: Option<f64>,
}

impl Summary {
    /// The statistic `mode` selects.
    pub fn value(&self, mode: TpebsMode) -> Option<f64> {
        match mode {
            TpebsMode::Mean => self.mean,
            TpebsMode::Min => self.min,
            TpebsMode::Max => self.max,
            TpebsMode::Last => self.last,
            TpebsMode::P97 => self.p97,
        }
    }
}

/// One event to sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleSpec {
    /// The name reports and errors use (the `:R` event's name).
    pub name: String,
    /// The event's attributes. The sampler fills in `sample_type` ([`SAMPLE_TYPE`] when 0),
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

/// `PERF_FORMAT_LOST`: `read()` of a sampling event gives `value, lost`.
const FORMAT_LOST: u64 = 0x10;

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

enum Command {
    Read(u64),
    Stop(u64),
}

struct Answer {
    seq: u64,
    reports: Vec<EventReport>,
}

struct Ring {
    event: usize,
    reader: Reader,
    live: bool,
}

struct EventState {
    name: String,
    total: LatencyStats,
    interval: LatencyStats,
    hung_up: u32,
    decode_errors: u64,
    first_error: Option<String>,
}

impl EventState {
    fn report(&mut self, reset: bool) -> EventReport {
        let report = EventReport {
            name: self.name.clone(),
            total: self.total.summary(),
            interval: self.interval.summary(),
            hung_up: self.hung_up,
            decode_errors: self.decode_errors,
            first_error: self.first_error.clone(),
            kernel_lost: None,
        };
        if reset {
            self.interval = LatencyStats::new();
        }
        report
    }
}

/// Hands one record to its event's statistics (the ring names the event: one event per ring).
fn account(event: &mut EventState, record: Record) {
    match record {
        Record::Sample(sample) => {
            let latency = sample.weight.map_or(0, |w| w.var3_w());
            event.total.add(latency);
            event.interval.add(latency);
        }
        Record::Lost { lost, .. } => {
            event.total.add_lost(lost);
            event.interval.add_lost(lost);
        }
        Record::Throttle { throttle: true, .. } => {
            event.total.add_throttle();
            event.interval.add_throttle();
        }
        Record::Throttle { throttle: false, .. } | Record::Other(_) => {}
    }
}

/// Decodes every ring into its event's statistics; returns the number of records.
fn drain_rings(rings: &mut [Ring], events: &mut [EventState]) -> u64 {
    let mut records = 0;
    for ring in rings.iter_mut() {
        let event = &mut events[ring.event];
        let walk = ring.reader.drain(|record| account(event, record));
        records += walk.records;
        if let Some(error) = walk.error {
            event.decode_errors += 1;
            event.first_error.get_or_insert_with(|| error.to_string());
        }
    }
    records
}

struct Thread {
    rings: Vec<Ring>,
    events: Vec<EventState>,
    commands: Receiver<Command>,
    answers: Sender<Answer>,
    wake: UnixStream,
    poll_interval: Duration,
    reader_delay: Duration,
}

impl Thread {
    fn run(mut self) {
        loop {
            let hung = self.wait();
            drain_rings(&mut self.rings, &mut self.events);
            // Rings the kernel closed are drained above and polled no more.
            for k in hung {
                if self.rings[k].live {
                    self.rings[k].live = false;
                    self.events[self.rings[k].event].hung_up += 1;
                }
            }
            loop {
                match self.commands.try_recv() {
                    Ok(Command::Read(seq)) => self.answer(seq),
                    Ok(Command::Stop(seq)) => {
                        drain_rings(&mut self.rings, &mut self.events);
                        self.answer(seq);
                        return;
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            }
        }
    }

    fn answer(&mut self, seq: u64) {
        if !self.reader_delay.is_zero() {
            std::thread::sleep(self.reader_delay);
        }
        let reports = self.events.iter_mut().map(|e| e.report(true)).collect();
        // The sampler may have given up waiting and gone; nothing to do then.
        let _ = self.answers.send(Answer { seq, reports });
    }

    /// Sleeps until a ring has data, a command arrives or the interval passes; returns the
    /// rings the kernel hung up.
    fn wait(&mut self) -> Vec<usize> {
        let mut fds =
            vec![libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        let mut which = Vec::new();
        for (k, ring) in self.rings.iter().enumerate() {
            if let (true, Some(fd)) = (ring.live, ring.reader.mapping().fd()) {
                fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
                which.push(k);
            }
        }
        let timeout = self.poll_interval.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structs that poll may write.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n <= 0 {
            // Timeout, or EINTR: drain anyway; the next wait is bounded again.
            return Vec::new();
        }
        if fds[0].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!(self.wake.read(&mut sink), Ok(n) if n > 0) {}
        }
        let closed = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        fds[1..]
            .iter()
            .zip(which)
            .filter(|(p, _)| p.revents & closed != 0)
            .map(|(_, k)| k)
            .collect()
    }
}

/// One opened sampling event.
#[derive(Debug, Clone, Copy)]
struct Opened {
    event: usize,
    cpu: Option<u32>,
    fd: i32,
}

/// Retire-latency sampling of some events, per CPU or per task, drained by a reader thread.
pub struct Sampler<S: Syscalls> {
    sys: S,
    names: Vec<String>,
    opened: Vec<Opened>,
    commands: Option<Sender<Command>>,
    answers: Receiver<Answer>,
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
    seq: u64,
    answer_timeout: Duration,
}

impl<S: Syscalls> fmt::Debug for Sampler<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sampler")
            .field("events", &self.names)
            .field("descriptors", &self.opened.len())
            .finish()
    }
}

/// Wakes the reader from its poll. `send` with MSG_NOSIGNAL, so a reader already gone (its
/// end closed) gives EPIPE instead of a SIGPIPE that would kill a program that restored the
/// default action; a full buffer (EAGAIN) already means a pending wake-up.
fn wake(socket: &UnixStream) {
    let byte = 1u8;
    // SAFETY: the pointer and length describe `byte`, which outlives the call.
    unsafe {
        libc::send(
            socket.as_raw_fd(),
            (&byte as *const u8).cast(),
            1,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        );
    }
}

fn close_all<S: Syscalls>(sys: &mut S, opened: &[Opened]) {
    for o in opened {
        sys.close(o.fd);
    }
}

/// Opens every spec as a sampling event on its CPUs of `target` (or on the task `pid`), with
/// a ring of `ring_bytes` of data; returns the descriptors and each spec's sample layout.
/// Fails with the first refusal, with everything closed again.
fn open_all<S: Syscalls>(
    sys: &mut S,
    specs: &[SampleSpec],
    target: &Target,
    options: &SamplerOptions,
    pid: i32,
    ring_bytes: usize,
) -> Result<(Vec<Opened>, Vec<SampleFormat>), SamplerError> {
    let mut opened: Vec<Opened> = Vec::new();
    let mut formats = Vec::new();
    for (event, spec) in specs.iter().enumerate() {
        let mut attr = spec.attr.clone();
        if attr.sample_type == 0 {
            attr.sample_type = SAMPLE_TYPE;
        }
        let format = SampleFormat::new(attr.sample_type).map_err(|error| {
            close_all(sys, &opened);
            SamplerError::Format { event: spec.name.clone(), error }
        })?;
        formats.push(format);
        if attr.sample_period == 0 {
            attr.sample_period = options.frequency.max(1);
            attr.freq = true;
        }
        // Wake the reader when a quarter of the ring is full; the poll interval bounds the
        // delay otherwise.
        attr.watermark = true;
        attr.wakeup = (ring_bytes / 4) as u32;
        attr.disabled = true;
        attr.enable_on_exec = matches!(target, Target::Task { on_exec: true, .. });
        attr.inherit = matches!(target, Target::Task { .. }) && !options.task_cpus.is_empty();
        // The event's count of dropped samples, exact even when the kernel has not yet
        // written the LOST record (it writes one only once the ring has room again).
        attr.read_format = FORMAT_LOST;
        for cpu in sample_cpus(spec, target, options) {
            let raw_cpu = cpu.map_or(-1, |c| c as i32);
            let mut result = sys.perf_event_open(&attr, pid, raw_cpu, -1);
            if result == Err(Errno(libc::EINVAL)) && attr.read_format != 0 {
                // Kernels before 6.0 refuse PERF_FORMAT_LOST; LOST records still count.
                attr.read_format = 0;
                result = sys.perf_event_open(&attr, pid, raw_cpu, -1);
            }
            match result {
                Ok(fd) => opened.push(Opened { event, cpu, fd }),
                Err(errno) => {
                    close_all(sys, &opened);
                    return Err(SamplerError::Open {
                        event: spec.name.clone(),
                        cpu,
                        errno,
                        hint: explain_open(errno),
                    });
                }
            }
        }
    }
    Ok((opened, formats))
}

/// The CPUs `spec` is opened on for `target` (`None`: the task on any CPU). A hybrid PMU
/// exists only on its own CPUs (ENOENT elsewhere), for task events opened per CPU too.
fn sample_cpus(spec: &SampleSpec, target: &Target, options: &SamplerOptions) -> Vec<Option<u32>> {
    let allowed = |c: &&u32| spec.cpus.as_ref().is_none_or(|allowed| allowed.contains(c));
    match target {
        Target::Task { .. } if options.task_cpus.is_empty() => vec![None],
        Target::Task { .. } | Target::Threads(_) => {
            options.task_cpus.iter().filter(allowed).map(|&c| Some(c)).collect()
        }
        Target::Cpus(cpus) => cpus.iter().filter(allowed).map(|&c| Some(c)).collect(),
    }
}

/// Maps a ring of `len` bytes for every opened event; on a refusal, closes everything and
/// says which event and CPU.
fn map_rings<S: Syscalls>(
    sys: &mut S,
    specs: &[SampleSpec],
    opened: &[Opened],
    formats: &[SampleFormat],
    len: usize,
) -> Result<Vec<Ring>, SamplerError> {
    let mut rings = Vec::new();
    for o in opened {
        match sys.mmap(o.fd, len) {
            Ok(mapping) => rings.push(Ring {
                event: o.event,
                reader: Reader::new(mapping, formats[o.event]),
                live: true,
            }),
            Err(errno) => {
                drop(rings);
                close_all(sys, opened);
                return Err(SamplerError::Map {
                    event: specs[o.event].name.clone(),
                    cpu: o.cpu,
                    errno,
                    hint: explain_mmap(errno),
                });
            }
        }
    }
    Ok(rings)
}

impl<S: Syscalls> Sampler<S> {
    /// Opens every spec on every CPU of `target` (or on the task), maps the rings, starts the
    /// reader and enables the events (unless `Target::Task { on_exec: true }`, where the exec
    /// enables them). Fails with the first refusal, with everything closed again.
    pub fn start(
        mut sys: S,
        specs: &[SampleSpec],
        target: &Target,
        options: &SamplerOptions,
    ) -> Result<Sampler<S>, SamplerError> {
        if specs.is_empty() {
            return Err(SamplerError::Nothing("no events".to_string()));
        }
        let data_pages = options.data_pages.max(1).next_power_of_two();
        let page = crate::ring::page_size();
        let len = page * (1 + data_pages);
        let (pid, on_exec) = match target {
            Target::Task { pid, on_exec } => (*pid, *on_exec),
            Target::Cpus(_) => (-1, false),
            Target::Threads(_) => {
                return Err(SamplerError::Nothing(
                    "per-thread targets: sample the process (`Target::Task`) instead".to_string(),
                ));
            }
        };
        let (opened, formats) = open_all(&mut sys, specs, target, options, pid, page * data_pages)?;
        if opened.is_empty() {
            return Err(SamplerError::Nothing(
                "no selected CPU is in any event's CPU list".to_string(),
            ));
        }
        let rings = map_rings(&mut sys, specs, &opened, &formats, len)?;
        let fail = |sys: &mut S, opened: &[Opened], e: std::io::Error| {
            close_all(sys, opened);
            SamplerError::Spawn(e.to_string())
        };
        let (wake, wake_reader) = match UnixStream::pair() {
            Ok(pair) => pair,
            Err(e) => return Err(fail(&mut sys, &opened, e)),
        };
        if let Err(e) = wake_reader.set_nonblocking(true).and(wake.set_nonblocking(true)) {
            return Err(fail(&mut sys, &opened, e));
        }
        let (command_tx, command_rx) = mpsc::channel();
        let (answer_tx, answer_rx) = mpsc::channel();
        let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let events = names
            .iter()
            .map(|name| EventState {
                name: name.clone(),
                total: LatencyStats::new(),
                interval: LatencyStats::new(),
                hung_up: 0,
                decode_errors: 0,
                first_error: None,
            })
            .collect();
        let thread = Thread {
            rings,
            events,
            commands: command_rx,
            answers: answer_tx,
            wake: wake_reader,
            poll_interval: options.poll_interval.max(Duration::from_millis(1)),
            reader_delay: options.reader_delay,
        };
        let handle = match std::thread::Builder::new()
            .name("tmetric-tpebs".to_string())
            .spawn(move || thread.run())
        {
            Ok(handle) => handle,
            Err(e) => return Err(fail(&mut sys, &opened, e)),
        };
        let mut sampler = Sampler {
            sys,
            names,
            opened,
            commands: Some(command_tx),
            answers: answer_rx,
            wake,
            thread: Some(handle),
            seq: 0,
            answer_timeout: options.answer_timeout,
        };
        if !on_exec {
            sampler.control(true)?;
        }
        Ok(sampler)
    }

    fn control(&mut self, enable: bool) -> Result<(), SamplerError> {
        for o in self.opened.clone() {
            let result =
                if enable { self.sys.enable(o.fd, false) } else { self.sys.disable(o.fd, false) };
            if let Err(errno) = result {
                return Err(SamplerError::Control {
                    what: if enable { "enabling" } else { "disabling" },
                    event: self.names[o.event].clone(),
                    errno,
                });
            }
        }
        Ok(())
    }

    /// The descriptors open (one per event per CPU, or per event for a task).
    pub fn descriptors(&self) -> usize {
        self.opened.len()
    }

    /// The backend.
    pub fn syscalls(&mut self) -> &mut S {
        &mut self.sys
    }

    fn ask(&mut self, stop: bool) -> Result<Vec<EventReport>, SamplerError> {
        let what = if stop { "stop" } else { "read" };
        self.seq += 1;
        let seq = self.seq;
        let command = if stop { Command::Stop(seq) } else { Command::Read(seq) };
        let sent = self.commands.as_ref().is_some_and(|c| c.send(command).is_ok());
        if !sent {
            return Err(self.died());
        }
        wake(&self.wake);
        let deadline = Instant::now() + self.answer_timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                // An answer to an earlier request that timed out: skip it.
                Ok(answer) if answer.seq < seq => continue,
                Ok(answer) => return Ok(answer.reports),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(SamplerError::NoAnswer { what, waited: self.answer_timeout });
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.died()),
            }
        }
    }

    /// Why the reader is gone: its panic message when it panicked.
    fn died(&mut self) -> SamplerError {
        self.commands = None;
        let message = match self.thread.take() {
            Some(handle) if handle.is_finished() => match handle.join() {
                Err(panic) => panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "it panicked".to_string()),
                Ok(()) => "it returned".to_string(),
            },
            _ => "its channel closed".to_string(),
        };
        SamplerError::ReaderDied(message)
    }

    /// Every event's statistics: totals, and the interval since the previous read (which
    /// this read ends). Waits at most the answer timeout.
    pub fn read(&mut self) -> Result<Vec<EventReport>, SamplerError> {
        let mut reports = self.ask(false)?;
        self.add_kernel_lost(&mut reports);
        Ok(reports)
    }

    /// Fills in [`EventReport::kernel_lost`] from each descriptor's `PERF_FORMAT_LOST` count.
    fn add_kernel_lost(&mut self, reports: &mut [EventReport]) {
        let mut lost: Vec<Option<u64>> = vec![Some(0); reports.len()];
        for o in &self.opened {
            let mut buf = [0u8; 16];
            let read = self.sys.read(o.fd, &mut buf);
            let value = match read {
                Ok(16) => Some(u64::from_ne_bytes(buf[8..].try_into().expect("8 bytes"))),
                _ => None,
            };
            if let Some(slot) = lost.get_mut(o.event) {
                *slot = slot.zip(value).map(|(a, b)| a + b);
            }
        }
        for (report, lost) in reports.iter_mut().zip(lost) {
            report.kernel_lost = lost;
        }
    }

    /// Disables the events, has the reader drain the rings one last time and end, and closes
    /// the descriptors; returns the final statistics. Waits at most the answer timeout (plus
    /// as long again for the thread to end); after a timeout the reader is left to finish on
    /// its own and the descriptors are closed anyway.
    pub fn stop(mut self) -> Result<Vec<EventReport>, SamplerError> {
        let disabled = self.control(false);
        let mut answer = self.ask(true);
        if let Ok(reports) = &mut answer {
            self.add_kernel_lost(reports);
        }
        if answer.is_ok()
            && let Some(handle) = self.thread.take()
        {
            let deadline = Instant::now() + self.answer_timeout;
            while !handle.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if handle.is_finished() {
                let _ = handle.join();
            }
        }
        disabled?;
        answer
    }
}

impl<S: Syscalls> Drop for Sampler<S> {
    fn drop(&mut self) {
        if let Some(commands) = self.commands.take() {
            self.seq += 1;
            let _ = commands.send(Command::Stop(self.seq));
            wake(&self.wake);
        }
        // The reader owns the mappings, which stay valid after their descriptors close; it
        // ends at its next wake-up.
        let opened = std::mem::take(&mut self.opened);
        close_all(&mut self.sys, &opened);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in TpebsMode::ALL {
            assert_eq!(mode.to_string().parse::<TpebsMode>(), Ok(mode));
        }
        assert_eq!("P97".parse::<TpebsMode>(), Ok(TpebsMode::P97));
        assert_eq!(TpebsMode::default(), TpebsMode::Mean);
        let err = "median".parse::<TpebsMode>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown --tpebs-mode `median`: expected one of mean, min, max, last, p97"
        );
    }

    #[test]
    fn statistics_of_known_samples() {
        let mut stats = LatencyStats::new();
        assert_eq!(stats.summary(), Summary::default());
        // 40 samples: 38 of 10 cycles, then 300 and 500. tail_count(40) = floor(38.8 + 0.5) =
        // 39, so the 97% mean keeps the 38 tens and the 300: (380 + 300) / 39.
        for _ in 0..38 {
            stats.add(10);
        }
        stats.add(500);
        stats.add(300);
        stats.add_lost(4);
        stats.add_throttle();
        let s = stats.summary();
        assert_eq!(s.count, 40);
        assert_eq!(s.mean, Some(1180.0 / 40.0));
        assert_eq!((s.min, s.max, s.last), (Some(10.0), Some(500.0), Some(300.0)));
        assert_eq!(s.p97, Some(680.0 / 39.0));
        assert_eq!((s.lost, s.throttles), (4, 1));
        assert_eq!(s.value(TpebsMode::Mean), Some(29.5));
        assert_eq!(s.value(TpebsMode::Last), Some(300.0));
        assert_eq!(s.value(TpebsMode::P97), s.p97);
        // One sample: the tail keeps it.
        let mut one = LatencyStats::new();
        one.add(u16::MAX);
        assert_eq!(one.summary().p97, Some(65535.0));
        assert_eq!(one.summary().mean, Some(65535.0));
    }

    #[test]
    fn merge_equals_adding_in_order() {
        let (mut a, mut b, mut all) =
            (LatencyStats::new(), LatencyStats::new(), LatencyStats::new());
        for (k, v) in [5u16, 9, 1, 7, 3, 8].into_iter().enumerate() {
            if k < 3 {
                a.add(v)
            } else {
                b.add(v)
            }
            all.add(v);
        }
        b.add_lost(2);
        all.add_lost(2);
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged.summary(), all.summary());
        let mut empty = LatencyStats::new();
        empty.merge(&a);
        assert_eq!(empty.summary(), a.summary());
        a.merge(&LatencyStats::new());
        assert_eq!(a.summary().last, Some(1.0));
    }

    #[test]
    fn tail_count_follows_seed_002() {
        assert_eq!(
            [0, 1, 2, 16, 17, 40, 50, 100, 1000].map(tail_count),
            [0, 1, 2, 16, 16, 39, 49, 97, 970]
        );
    }
}
