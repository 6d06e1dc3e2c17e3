//! [`SimKernel`]: the perf system calls over a simulated [`Machine`], applying the kernel's
//! rules at open time (PMU lookup, attribute checks, `validate_group` on an empty PMU) and at
//! schedule time (pinned then flexible groups per CPU and PMU, the NMI watchdog's pinned
//! cycles event, rotation every `perf_event_mux_interval_ms` of simulated time), with counts
//! from a [`Profile`], and sampling: rings from [`Syscalls::mmap`] that the simulator fills
//! with sample and lost records whenever simulated time is brought up to date (any call, or
//! the reader loading `data_head`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::machine::CoreKind;
use super::machine::{Machine, PmuClass, X86Core};
use super::profile::{Profile, Rate, Source};
use super::sched::{
    self, ALL_EVENT_FLAGS, AMD_RAW_EVENT_MASK, ARCH_EVENT_MASK, EVENTSEL_ANY, EVENTSEL_EVENT,
    HwEvent, IN_TX, RAW_EVENT_MASK, TD_METRIC_FIRST, TD_METRIC_MAX, TD_SLOTS,
};
use super::workload::{Timeline, Workload};
use tmetric_runtime::ring;
use tmetric_runtime::sys::{
    Attr, Errno, FORMAT_GROUP, FORMAT_ID, FORMAT_TOTAL_TIME_ENABLED, FORMAT_TOTAL_TIME_RUNNING,
    Syscalls, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW, TYPE_SOFTWARE, TYPE_TRACEPOINT,
};

/// `PERF_FORMAT_LOST`.
const FORMAT_LOST: u64 = 0x10;
/// `PERF_COUNT_HW_MAX`.
const HW_MAX: u64 = 10;
/// `PERF_COUNT_SW_MAX` in 6.12.
const SW_MAX: u64 = 12;

/// What kind of record a simulated event produces: counts only, or samples as well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimEventKind {
    /// A counting event: `read()` returns counts and times.
    Counting,
    /// A sampling event (`sample_period` or `sample_freq` non-zero): it counts as well, and
    /// writes `PERF_RECORD_SAMPLE` records into its ring buffer once one is mapped.
    Sampling,
}

/// `PERF_SAMPLE_MAX` in 6.12 (`PERF_SAMPLE_WEIGHT_STRUCT` is 1 << 24).
const SAMPLE_MAX: u64 = 1 << 25;
/// The default and, for root, the only limit the simulated `perf_event_max_sample_rate`
/// applies to `sample_freq` (DEFAULT_MAX_SAMPLE_RATE).
const MAX_SAMPLE_RATE: u64 = 100_000;
/// The sample fields the simulator writes: the fixed 8-byte ones [`tmetric_runtime::ring`] decodes.
const SAMPLE_FIXED: u64 = ring::SAMPLE_IDENTIFIER
    | ring::SAMPLE_IP
    | ring::SAMPLE_TID
    | ring::SAMPLE_TIME
    | ring::SAMPLE_ADDR
    | ring::SAMPLE_ID
    | ring::SAMPLE_STREAM_ID
    | ring::SAMPLE_CPU
    | ring::SAMPLE_PERIOD
    | ring::SAMPLE_WEIGHT
    | ring::SAMPLE_DATA_SRC
    | ring::SAMPLE_TRANSACTION
    | ring::SAMPLE_PHYS_ADDR
    | ring::SAMPLE_WEIGHT_STRUCT;
/// `PERF_RECORD_MISC_USER`: samples are taken in user mode.
const MISC_USER: u16 = 2;
/// The simulated page size (x86 and the arm64 machine's 4 KiB pages).
const PAGE: usize = ring::HEAP_PAGE;

/// How a sampling event samples, and what its ring has seen.
#[derive(Debug, Clone)]
struct Sampling {
    /// `freq`: `period` is samples per second of running time; else events per sample.
    freq: bool,
    period: u64,
    sample_type: u64,
    /// Precise (PEBS on x86): samples carry MISC_EXACT_IP and, with PMU_FL_RETIRE_LATENCY,
    /// the retire latency.
    precise: bool,
    /// The retire latency of each sample of one period, in write order.
    latencies: Vec<u16>,
    /// Samples taken so far (written or lost).
    taken: u64,
    /// Samples dropped since the last PERF_RECORD_LOST (`rb->lost`).
    pending_lost: u64,
    /// Every sample dropped (`event->lost_samples`, read with PERF_FORMAT_LOST).
    lost: u64,
}

/// The producer's handle on a mapped ring.
#[derive(Debug)]
struct SimRing(ring::Mapping);

impl Clone for SimRing {
    fn clone(&self) -> SimRing {
        SimRing(self.0.share().expect("simulated rings live on the heap"))
    }
}

/// The scheduling state of an event (`enum perf_event_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SimState {
    /// A pinned group that could not be placed: reads return 0 bytes until re-enabled.
    Error,
    /// Disabled.
    Off,
    /// Enabled, not on a counter now.
    Inactive,
    /// On a counter.
    Active,
}

/// Where an event lives: a software-context PMU (software, tracepoint, msr) never takes a
/// counter and may join any group; a hardware PMU has counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Home {
    Soft,
    Hw(usize),
}

/// What the counter scheduler needs of a hardware event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HwKind {
    X86(HwEvent),
    Arm {
        config: u64,
    },
    Uncore {
        config: u64,
    },
    /// RAPL: no counter limit.
    Free,
    None,
}

/// An event after `perf_init_event` and the PMU's attribute checks.
#[derive(Debug, Clone)]
pub(crate) struct Init {
    home: Home,
    hw: HwKind,
    /// What it counts, for the rates (`None`: nothing, such as a breakpoint).
    pub(crate) source: Option<Source>,
    /// The CPU whose context it joins (uncore and power move to their cpumask CPU).
    cpu: Option<u32>,
    /// A topdown metric event (PERF_EV_CAP_SIBLING, needs a `slots` leader).
    metric: bool,
    /// The config an x86 core PMU kept (0 elsewhere).
    kept: u64,
}

#[derive(Debug, Clone)]
struct Ev {
    id: u64,
    attr: Attr,
    kind: SimEventKind,
    cpu: u32,
    task: Option<i32>,
    home: Home,
    hw: HwKind,
    rate: Rate,
    /// The true count so far (running time integrated over the workload's phases).
    count: f64,
    leader: i32,
    siblings: Vec<i32>,
    state: SimState,
    pinned: bool,
    index: u64,
    enabled_ns: u64,
    running_ns: u64,
    reset_value: u64,
    metric: bool,
    kernel: bool,
    /// Opened with `cpu == -1` (the kernel's `event->cpu == -1`).
    any_cpu: bool,
    sampling: Option<Sampling>,
    /// The ring, once mapped.
    ring: Option<SimRing>,
}

impl Ev {
    fn value(&self) -> u64 {
        (self.count as u64).saturating_sub(self.reset_value)
    }
}

impl Init {
    /// What the workload adds to the rate of `source` for this attribute: an x86 event with
    /// the AnyThread bit counts both SMT threads; `exclude_user` keeps the kernel share of a
    /// core event's count and `exclude_kernel` the rest.
    pub(crate) fn factor(&self, machine: &Machine, attr: &Attr, kernel_share: f64) -> f64 {
        let mut f = 1.0;
        if self.kept & EVENTSEL_ANY != 0 && machine.smt {
            f *= 2.0;
        }
        let core = matches!(
            self.source,
            Some(Source::X86 { .. } | Source::Arm { .. } | Source::Cache { .. })
        );
        if core {
            if attr.exclude_user {
                f *= kernel_share;
            }
            if attr.exclude_kernel {
                f *= 1.0 - kernel_share;
            }
        }
        f
    }
}

/// Events by descriptor. Descriptors are handed out in sequence and never reused, so a
/// vector indexed by `fd - FIRST_FD` finds them without a tree walk.
#[derive(Debug, Default)]
struct Slab {
    items: Vec<Option<(i32, Ev)>>,
}

/// The first descriptor number (0-2 are stdin, stdout, stderr).
const FIRST_FD: i32 = 3;

impl Slab {
    fn slot(fd: i32) -> Option<usize> {
        usize::try_from(fd - FIRST_FD).ok()
    }

    fn get(&self, fd: &i32) -> Option<&Ev> {
        let slot = Slab::slot(*fd)?;
        self.items.get(slot)?.as_ref().map(|(_, e)| e)
    }

    fn get_mut(&mut self, fd: &i32) -> Option<&mut Ev> {
        let slot = Slab::slot(*fd)?;
        self.items.get_mut(slot)?.as_mut().map(|(_, e)| e)
    }

    fn insert(&mut self, fd: i32, ev: Ev) {
        let Some(slot) = Slab::slot(fd) else { return };
        if self.items.len() <= slot {
            self.items.resize_with(slot + 1, || None);
        }
        self.items[slot] = Some((fd, ev));
    }

    fn remove(&mut self, fd: &i32) -> Option<Ev> {
        let slot = Slab::slot(*fd)?;
        self.items.get_mut(slot)?.take().map(|(_, e)| e)
    }

    fn iter(&self) -> impl Iterator<Item = (&i32, &Ev)> {
        self.items.iter().filter_map(|item| item.as_ref().map(|(fd, e)| (fd, e)))
    }

    fn values(&self) -> impl Iterator<Item = &Ev> {
        self.iter().map(|(_, e)| e)
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Ev> {
        self.items.iter_mut().filter_map(|item| item.as_mut().map(|(_, e)| e))
    }
}

impl std::ops::Index<&i32> for Slab {
    type Output = Ev;

    fn index(&self, fd: &i32) -> &Ev {
        self.get(fd).expect("an open descriptor")
    }
}

impl<'a> IntoIterator for &'a Slab {
    type Item = (&'a i32, &'a Ev);
    type IntoIter = Box<dyn Iterator<Item = (&'a i32, &'a Ev)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[derive(Debug)]
struct Clock {
    start: Option<Instant>,
    offset: u64,
}

impl Clock {
    fn now(&self) -> u64 {
        self.start.map_or(0, |s| s.elapsed().as_nanos() as u64) + self.offset
    }
}

#[derive(Debug)]
struct State {
    machine: Machine,
    profile: Profile,
    timeline: Timeline,
    clock: Clock,
    now: u64,
    mux_ns: u64,
    next_fd: i32,
    next_id: u64,
    next_index: u64,
    events: Slab,
    /// Per (CPU, PMU): when the mux timer fires next.
    timers: BTreeMap<(u32, usize), u64>,
    /// Per (CPU, PMU, task or CPU context): a flexible group did not fit.
    rotate: BTreeSet<(u32, usize, Option<i32>)>,
    /// Group leaders per (CPU, hardware PMU).
    groups: BTreeMap<(u32, usize), Vec<i32>>,
    /// Leaders that are enabled (INACTIVE or ACTIVE); `None` after a change of that.
    on_leaders: Option<Vec<bool>>,
}

/// The simulated kernel. Clones share one state, so a test keeps a handle (to advance the
/// clock or ask for true counts) while [`tmetric_runtime::CounterSet`] owns another.
#[derive(Debug, Clone)]
pub struct SimKernel {
    state: Arc<Mutex<State>>,
}

fn errno(e: i32) -> Errno {
    Errno(e)
}

/// `x86_pmu_hw_config`: `precise_ip` above the PMU's `caps/max_precise` (`x86_pmu_max_precise`)
/// EOPNOTSUPP; `precise_ip` on a counting event EINVAL ("no sense in having PEBS for non
/// sampling events").
fn x86_precise(pmu: &super::machine::SimPmu, attr: &Attr) -> Result<(), Errno> {
    if attr.precise_ip == 0 {
        return Ok(());
    }
    let max = pmu
        .caps
        .iter()
        .find(|(name, _)| name == "max_precise")
        .and_then(|(_, v)| v.trim().parse::<u8>().ok())
        .unwrap_or(0);
    if attr.precise_ip.min(3) > max {
        return Err(errno(libc::EOPNOTSUPP));
    }
    if attr.sample_period == 0 {
        return Err(errno(libc::EINVAL));
    }
    Ok(())
}

/// The counters a precise event may use where the PEBS table narrows them
/// (`intel_glc_pebs_event_constraints`, arch/x86/events/intel/ds.c, for Golden Cove class
/// cores); `None` keeps the ordinary constraint (PMU_FL_PEBS_ALL). Matched on event code and
/// umask without flag bits, as the table's FLAGS constraints do.
fn pebs_constraint(kind: CoreKind, kept: u64) -> Option<u64> {
    if kind != CoreKind::GoldenCove || kept & ALL_EVENT_FLAGS != 0 {
        return None;
    }
    match (kept & 0xffff, kept & 0xff) {
        (0x0100, _) => Some(1 << 32),
        (0x0400, _) => Some(1 << 35),
        (0x01cd, _) => Some(0xfe),
        (0x02cd, _) => Some(0x1),
        (_, 0xc0) => Some(0xfe),
        (_, 0xd0..=0xd4) => Some(0xf),
        _ => None,
    }
}

/// One PERF_RECORD_SAMPLE with the fields of `s.sample_type`, in the ABI's order.
fn sample_record(
    s: &Sampling,
    id: u64,
    cpu: u32,
    task: Option<i32>,
    now: u64,
    period: u64,
    latency: u16,
) -> Vec<u8> {
    let t = s.sample_type;
    let pid = task.unwrap_or(0).max(0) as u32;
    let ip = 0x0040_1000 + (s.taken % 64) * 4;
    let fields: [(u64, u64); 13] = [
        (ring::SAMPLE_IDENTIFIER, id),
        (ring::SAMPLE_IP, ip),
        (ring::SAMPLE_TID, u64::from(pid) | u64::from(pid) << 32),
        (ring::SAMPLE_TIME, now),
        (ring::SAMPLE_ADDR, 0),
        (ring::SAMPLE_ID, id),
        (ring::SAMPLE_STREAM_ID, id),
        (ring::SAMPLE_CPU, u64::from(cpu)),
        (ring::SAMPLE_PERIOD, period),
        // The weight: var3_w for WEIGHT_STRUCT; the plain WEIGHT holds load latency, which
        // the simulator does not model (0).
        (ring::SAMPLE_WEIGHT_STRUCT, ring::Weight::from_parts(0, 0, latency).0),
        (ring::SAMPLE_DATA_SRC, 0),
        (ring::SAMPLE_TRANSACTION, 0),
        (ring::SAMPLE_PHYS_ADDR, 0),
    ];
    let mut body = Vec::with_capacity(8 * 14);
    for (bit, value) in fields {
        if bit == ring::SAMPLE_WEIGHT_STRUCT && t & ring::SAMPLE_WEIGHT != 0 {
            body.extend_from_slice(&0u64.to_ne_bytes());
        } else if t & bit != 0 {
            body.extend_from_slice(&value.to_ne_bytes());
        }
    }
    let misc = MISC_USER | if s.precise { ring::MISC_EXACT_IP } else { 0 };
    let size = (ring::HEADER_SIZE + body.len()) as u16;
    let mut out = ring::Header { type_: ring::RECORD_SAMPLE, misc, size }.to_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

/// PERF_RECORD_LOST: `id, lost` (no `sample_id` trailer: tmetric never sets sample_id_all).
fn lost_record(id: u64, lost: u64) -> Vec<u8> {
    let mut out = ring::Header { type_: ring::RECORD_LOST, misc: 0, size: 24 }.to_bytes().to_vec();
    out.extend_from_slice(&id.to_ne_bytes());
    out.extend_from_slice(&lost.to_ne_bytes());
    out
}

/// Whether `need` bytes fit between `data_head` and the reader's `data_tail`. A tail the
/// reader moved past the head makes the unread span huge, so nothing fits, as in
/// `perf_output_space`.
fn has_room(ring: &ring::Mapping, need: usize) -> bool {
    let Ok((_, size)) = ring.data_area() else { return false };
    let unread = ring.data_head().wrapping_sub(ring.data_tail());
    unread <= size as u64 && size as u64 - unread >= need as u64
}

/// Appends `bytes` at `data_head` and publishes the new head.
fn put(ring: &ring::Mapping, bytes: &[u8]) {
    let head = ring.data_head();
    ring.write_data(head, bytes);
    ring.publish_head(head + bytes.len() as u64);
}

fn any_exclude(attr: &Attr) -> bool {
    attr.exclude_user
        || attr.exclude_kernel
        || attr.exclude_hv
        || attr.exclude_guest
        || attr.exclude_host
}

impl SimKernel {
    /// A kernel on `machine` running the default [`Workload`], on the real monotonic clock:
    /// time passes as it does for the caller, so a sleeping workload behaves naturally.
    pub fn new(machine: Machine) -> SimKernel {
        SimKernel::with_workload(machine, Workload::default_workload())
    }

    /// A kernel whose clock moves only through [`SimKernel::advance`], for deterministic
    /// tests, running the default workload.
    pub fn manual(machine: Machine) -> SimKernel {
        SimKernel::manual_with_workload(machine, Workload::default_workload())
    }

    /// [`SimKernel::manual`] running `workload`.
    pub fn manual_with_workload(machine: Machine, workload: Workload) -> SimKernel {
        let profile = Profile::new(&machine, workload);
        SimKernel::build(machine, profile, None)
    }

    /// [`SimKernel::new`] running `workload`.
    pub fn with_workload(machine: Machine, workload: Workload) -> SimKernel {
        let profile = Profile::new(&machine, workload);
        SimKernel::build(machine, profile, Some(Instant::now()))
    }

    /// The kernel for [`Machine::named`]`(name)` on the real clock.
    pub fn for_model(name: &str) -> Option<SimKernel> {
        Machine::named(name).map(SimKernel::new)
    }

    fn build(machine: Machine, profile: Profile, start: Option<Instant>) -> SimKernel {
        let mux_ns = machine.mux_interval_ms.max(1) * 1_000_000;
        let timeline = profile.timeline();
        let mut state = State {
            machine,
            profile,
            timeline,
            clock: Clock { start, offset: 0 },
            now: 0,
            mux_ns,
            next_fd: FIRST_FD,
            next_id: 1,
            next_index: 1,
            events: Slab::default(),
            timers: BTreeMap::new(),
            rotate: BTreeSet::new(),
            groups: BTreeMap::new(),
            on_leaders: None,
        };
        if state.machine.nmi_watchdog {
            state.add_watchdogs();
        }
        SimKernel { state: Arc::new(Mutex::new(state)) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Moves the simulated clock forward by `ns` (on top of real time for a real clock).
    /// The work is proportional to the mux timer ticks in that span (one per CPU and PMU
    /// that has groups waiting, every `perf_event_mux_interval_ms`).
    pub fn advance(&self, ns: u64) {
        let mut state = self.lock();
        state.clock.offset += ns;
        state.sync();
    }

    /// Writes `perf_event_mux_interval_ms` (minimum 1, as the kernel's store refuses 0): the
    /// next rotations use it.
    pub fn set_mux_interval_ms(&self, ms: u64) {
        let mut state = self.lock();
        state.sync();
        let ms = ms.max(1);
        state.machine.mux_interval_ms = ms;
        state.mux_ns = ms * 1_000_000;
    }

    /// Simulated nanoseconds since the kernel was made.
    pub fn now(&self) -> u64 {
        let mut state = self.lock();
        state.sync();
        state.now
    }

    /// The machine.
    pub fn machine(&self) -> Machine {
        self.lock().machine.clone()
    }

    /// The workload and what was derived from it.
    pub fn profile(&self) -> Profile {
        self.lock().profile.clone()
    }

    /// The workload phase at simulated time `t` nanoseconds.
    pub fn phase_at(&self, t: u64) -> usize {
        self.lock().timeline.phase_at(t)
    }

    /// The count `attr` would reach on `cpu` after `ns` nanoseconds of counting from time 0
    /// without multiplexing: the true value scaled counts are compared with. Errors are the
    /// ones `perf_event_open` would give for the event alone on that CPU.
    pub fn true_count(&self, attr: &Attr, cpu: u32, ns: u64) -> Result<u64, Errno> {
        self.true_count_between(attr, cpu, 0, ns)
    }

    /// The count `attr` makes on `cpu` during `[from, to)` nanoseconds of simulated time,
    /// counted all the time (the workload's phases as they fall in that span).
    pub fn true_count_between(
        &self,
        attr: &Attr,
        cpu: u32,
        from: u64,
        to: u64,
    ) -> Result<u64, Errno> {
        let mut state = self.lock();
        let rate = state.rate_of(attr, cpu)?;
        Ok(rate.integral(&mut state.timeline, from, to) as u64)
    }

    /// The rate of `attr` on `cpu`: counts per second in each phase of the workload.
    pub fn rate(&self, attr: &Attr, cpu: u32) -> Result<Rate, Errno> {
        self.lock().rate_of(attr, cpu)
    }

    /// The state of descriptor `fd` now.
    pub fn state_of(&self, fd: i32) -> Option<SimState> {
        let mut state = self.lock();
        state.sync();
        state.events.get(&fd).filter(|e| !e.kernel).map(|e| e.state)
    }

    /// `(time_enabled, time_running)` of descriptor `fd` now.
    pub fn times(&self, fd: i32) -> Option<(u64, u64)> {
        let mut state = self.lock();
        state.sync();
        state.events.get(&fd).filter(|e| !e.kernel).map(|e| (e.enabled_ns, e.running_ns))
    }

    /// The kind of record descriptor `fd` produces.
    pub fn kind_of(&self, fd: i32) -> Option<SimEventKind> {
        self.lock().events.get(&fd).map(|e| e.kind)
    }

    /// Descriptors opened and not yet closed (the watchdog's kernel events excluded).
    pub fn open_count(&self) -> usize {
        self.lock().events.values().filter(|e| !e.kernel).count()
    }
}

impl State {
    fn init(&self, attr: &Attr, pid: i32, cpu: i32) -> Result<Init, Errno> {
        classify(&self.machine, attr, pid, cpu)
    }

    /// The rate of an event classified as `init` with attribute `attr`, counted on `cpu`.
    fn rate_for(&self, init: &Init, attr: &Attr, cpu: u32) -> Rate {
        let phases = &self.profile.workload.phases;
        match &init.source {
            Some(source) => self.profile.rate(&self.machine, source, cpu, |p| {
                init.factor(&self.machine, attr, phases[p].kernel_share)
            }),
            None => Rate::constant(0.0, phases.len()),
        }
    }

    fn rate_of(&self, attr: &Attr, cpu: u32) -> Result<Rate, Errno> {
        let init = self.init(attr, -1, cpu as i32)?;
        Ok(self.rate_for(&init, attr, cpu))
    }

    fn sync(&mut self) {
        let to = self.clock.now().max(self.now);
        self.advance_to(to);
        self.emit_samples();
    }

    /// The retire latency of each sample of one period for a new sampling event: the
    /// profile's, for precise (PEBS) events of an Intel core PMU when the machine has
    /// PMU_FL_RETIRE_LATENCY; 0 otherwise, as `ds.c` leaves `var3_w` without the feature and
    /// non-PEBS samples have no weight.
    fn latencies(&self, init: &Init, attr: &Attr) -> Vec<u16> {
        let core = match init.home {
            Home::Hw(p) => match &self.machine.pmus[p].class {
                PmuClass::X86Core(core) if core.kind != CoreKind::Zen4 => {
                    Some((core, self.machine.pmus[p].name.as_str()))
                }
                _ => None,
            },
            Home::Soft => None,
        };
        match core {
            Some((core, pmu)) if attr.precise_ip > 0 && self.machine.retire_latency => self
                .profile
                .retire_latencies(core, pmu, init.kept)
                .into_iter()
                .flat_map(|(cycles, n)| std::iter::repeat_n(cycles, n as usize))
                .collect(),
            _ => vec![0],
        }
    }

    /// Writes the samples that running time has made due into each mapped ring, a whole
    /// period of the profile's latencies at a time (so statistics over the samples are the
    /// period's, computable by hand), honouring `data_tail`: a sample that does not fit is
    /// counted lost, and the next one that fits is preceded by PERF_RECORD_LOST
    /// (`perf_output_begin`). Samples due before the ring was mapped are dropped unseen, as
    /// the kernel drops them without a buffer.
    fn emit_samples(&mut self) {
        let now = self.now;
        for e in self.events.values_mut() {
            let Some(s) = e.sampling.as_mut() else { continue };
            let per_period = s.latencies.len().max(1) as u64;
            let due = if s.freq {
                (u128::from(e.running_ns) * u128::from(s.period) / 1_000_000_000) as u64
            } else {
                e.count as u64 / s.period
            };
            let due = due / per_period * per_period;
            let Some(SimRing(ring)) = e.ring.as_ref() else {
                s.taken = due;
                continue;
            };
            // Events per sample, for PERF_SAMPLE_PERIOD.
            let period =
                if s.freq { (e.rate.per_sec(0) as u64) / s.period.max(1) } else { s.period };
            while s.taken < due {
                let latency = s.latencies[(s.taken % per_period) as usize];
                let record = sample_record(s, e.id, e.cpu, e.task, now, period, latency);
                let lost = (s.pending_lost > 0).then(|| lost_record(e.id, s.pending_lost));
                let need = record.len() + lost.as_ref().map_or(0, Vec::len);
                if !has_room(ring, need) {
                    // Nothing frees space until the reader moves data_tail: the rest of what
                    // is due is lost too.
                    let rest = due - s.taken;
                    s.lost += rest;
                    s.pending_lost += rest;
                    s.taken = due;
                    break;
                }
                if let Some(lost) = lost {
                    put(ring, &lost);
                    s.pending_lost = 0;
                }
                put(ring, &record);
                s.taken += 1;
            }
        }
    }

    fn add_watchdogs(&mut self) {
        // kernel/watchdog_perf.c: a pinned, kernel-owned PERF_TYPE_HARDWARE cycles event per
        // CPU; on hybrid parts it lands on the PMU of the CPU's core type.
        let attr = Attr { type_: TYPE_HARDWARE, config: 0, pinned: true, ..Attr::default() };
        for cpu in self.machine.cpu_ids() {
            let Ok(init) = self.init(&attr, -1, cpu as i32) else { continue };
            let rate = self.rate_for(&init, &attr, cpu);
            // A descriptor number the caller never sees (kernel-owned events have none).
            let fd = self.next_fd;
            self.next_fd += 1;
            let index = self.next_index;
            self.next_index += 1;
            self.events.insert(
                fd,
                Ev {
                    id: 0,
                    attr: attr.clone(),
                    kind: SimEventKind::Counting,
                    cpu,
                    task: None,
                    home: init.home,
                    hw: init.hw,
                    rate,
                    count: 0.0,
                    leader: fd,
                    siblings: Vec::new(),
                    state: SimState::Inactive,
                    pinned: true,
                    index,
                    enabled_ns: 0,
                    running_ns: 0,
                    reset_value: 0,
                    metric: false,
                    kernel: true,
                    any_cpu: false,
                    sampling: None,
                    ring: None,
                },
            );
            self.index_group(fd, None);
        }
        self.reschedule_all();
    }

    /// The hardware PMU of the group led by `leader`: a software leader with a hardware
    /// sibling moves to that sibling's PMU (`move_group`).
    fn group_pmu(&self, leader: i32) -> Option<usize> {
        let ev = self.events.get(&leader)?;
        std::iter::once(leader).chain(ev.siblings.iter().copied()).find_map(|fd| {
            match self.events.get(&fd).map(|e| e.home) {
                Some(Home::Hw(p)) => Some(p),
                _ => None,
            }
        })
    }

    /// The leaders of the groups on (cpu, pmu).
    fn leaders_on(&self, cpu: u32, pmu: usize) -> Vec<i32> {
        self.groups.get(&(cpu, pmu)).cloned().unwrap_or_default()
    }

    /// Moves the group led by `lfd` from the index entry `old` to its current CPU and PMU.
    fn index_group(&mut self, lfd: i32, old: Option<(u32, usize)>) {
        if let Some(key) = old
            && let Some(leaders) = self.groups.get_mut(&key)
        {
            leaders.retain(|&f| f != lfd);
        }
        if let (Some(cpu), Some(pmu)) = (self.events.get(&lfd).map(|e| e.cpu), self.group_pmu(lfd))
        {
            let leaders = self.groups.entry((cpu, pmu)).or_default();
            if !leaders.contains(&lfd) {
                leaders.push(lfd);
            }
        }
    }

    /// Whether `events` (already-placed first) fit on PMU `pmu`.
    fn fits(&self, pmu: usize, events: &[HwKind]) -> bool {
        match &self.machine.pmus[pmu].class {
            PmuClass::X86Core(core) => {
                let hw: Vec<HwEvent> = events
                    .iter()
                    .filter_map(|e| match e {
                        HwKind::X86(h) => Some(*h),
                        _ => None,
                    })
                    .collect();
                core.fits(&hw)
            }
            PmuClass::Arm(arm) => {
                let configs: Vec<u64> = events
                    .iter()
                    .filter_map(|e| match e {
                        HwKind::Arm { config } => Some(*config),
                        _ => None,
                    })
                    .collect();
                sched::arm_fits(arm.gp, &configs)
            }
            PmuClass::Uncore { counters, fixed, free_running, .. } => {
                let configs: Vec<u64> = events
                    .iter()
                    .filter_map(|e| match e {
                        HwKind::Uncore { config } => Some(*config),
                        _ => None,
                    })
                    .collect();
                sched::uncore_fits(*counters, *fixed, *free_running, &configs)
            }
            _ => true,
        }
    }

    /// The group checks of the PMU's `event_init` (`validate_group` on a fake PMU) and of
    /// `perf_event_open` for a new event joining `leader`.
    fn check_group(&self, init: &Init, attr: &Attr, leader_fd: Option<i32>) -> Result<(), Errno> {
        let Home::Hw(pmu) = init.home else { return Ok(()) };
        let class = &self.machine.pmus[pmu].class;
        let Some(leader_fd) = leader_fd else {
            // validate_event: an event no counter can take fails alone.
            if init.metric {
                // A metric event must have `slots` as its group leader.
                return Err(errno(libc::EINVAL));
            }
            return if self.fits(pmu, &[init.hw]) { Ok(()) } else { Err(errno(libc::EINVAL)) };
        };
        let leader = &self.events[&leader_fd];
        if init.metric {
            let leader_is_slots = matches!(leader.hw, HwKind::X86(_))
                && leader.home == Home::Hw(pmu)
                && leader.attr.config & ARCH_EVENT_MASK == TD_SLOTS
                && leader.attr.type_ != TYPE_HARDWARE;
            // The slots leader of metric events must not sample (PERF_METRICS needs it to
            // start at 0).
            if !leader_is_slots || leader.attr.sample_period != 0 {
                return Err(errno(libc::EINVAL));
            }
        }
        let members: Vec<&Ev> = std::iter::once(leader)
            .chain(leader.siblings.iter().filter_map(|fd| self.events.get(fd)))
            .collect();
        let mut fake: Vec<HwKind> = Vec::new();
        match class {
            PmuClass::X86Core(_) => {
                // collect_events: the leader if it is an x86 event, siblings that are x86
                // events and not OFF.
                for (i, m) in members.iter().enumerate() {
                    if matches!(m.hw, HwKind::X86(_)) && (i == 0 || m.state > SimState::Off) {
                        fake.push(m.hw);
                    }
                }
            }
            PmuClass::Arm(_) => {
                // arm_pmu.c validate_event: software events pass, another hardware PMU
                // fails, OFF events without enable_on_exec (and ERROR ones) are skipped.
                for m in &members {
                    match m.home {
                        Home::Soft => continue,
                        Home::Hw(p) if p != pmu => return Err(errno(libc::EINVAL)),
                        Home::Hw(_) => {}
                    }
                    if m.state < SimState::Off
                        || (m.state == SimState::Off && !m.attr.enable_on_exec)
                    {
                        continue;
                    }
                    fake.push(m.hw);
                }
                let new_off = attr.disabled && !attr.enable_on_exec;
                if !new_off && !self.fits(pmu, &[fake.clone(), vec![init.hw]].concat()) {
                    return Err(errno(libc::EINVAL));
                }
                return Ok(());
            }
            PmuClass::Uncore { .. } => {
                for (i, m) in members.iter().enumerate() {
                    if m.home == Home::Hw(pmu) && (i == 0 || m.state > SimState::Off) {
                        fake.push(m.hw);
                    }
                }
            }
            _ => return Ok(()),
        }
        fake.push(init.hw);
        if self.fits(pmu, &fake) { Ok(()) } else { Err(errno(libc::EINVAL)) }
    }

    fn open(&mut self, attr: &Attr, pid: i32, cpu: i32, group_fd: i32) -> Result<i32, Errno> {
        self.sync();
        check_open_args(attr, pid, cpu, self.machine.cpus.len() as i32)?;
        // A cgroup event counts as a CPU event does (see `check_open_args`).
        let pid = if attr.pid_is_cgroup { -1 } else { pid };
        let leader_fd = if group_fd >= 0 {
            match self.events.get(&group_fd) {
                Some(e) if !e.kernel => Some(group_fd),
                _ => return Err(errno(libc::EBADF)),
            }
        } else {
            None
        };
        let init = self.init(attr, pid, cpu)?;
        let sampling = attr.sample_period != 0;
        if sampling && attr.sample_type & !SAMPLE_FIXED != 0 {
            // Not modelled: variable-length sample fields (READ, CALLCHAIN, RAW, BRANCH_STACK,
            // REGS_*, STACK_USER, AUX, CGROUP, page sizes).
            return Err(errno(libc::EOPNOTSUPP));
        }
        self.check_group(&init, attr, leader_fd)?;
        let task = (pid != -1).then_some(pid);
        // Where the context is: the given CPU (or the reader CPU the PMU moved it to); a task
        // is placed on the first CPU its hardware PMU covers, CPU 0 for software events.
        let mut ctx_cpu = match (init.cpu, cpu) {
            (Some(moved), _) => moved,
            (None, c) if c >= 0 => c as u32,
            (None, _) => match init.home {
                Home::Hw(p) => {
                    self.machine.pmus[p].cpus.as_ref().and_then(|c| c.first().copied()).unwrap_or(0)
                }
                Home::Soft => 0,
            },
        };
        let old_key = leader_fd.and_then(|lfd| {
            let cpu = self.events[&lfd].cpu;
            self.group_pmu(lfd).map(|p| (cpu, p))
        });
        if let Some(lfd) = leader_fd {
            ctx_cpu = self.join_leader(lfd, &init, attr, task, ctx_cpu)?;
        }
        // A task event counts at the rates of the CPU it is placed on.
        let rate = if cpu < 0 {
            self.rate_of(attr, ctx_cpu).unwrap_or_else(|_| self.rate_for(&init, attr, ctx_cpu))
        } else {
            self.rate_for(&init, attr, cpu as u32)
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        let id = self.next_id;
        self.next_id += 1;
        let index = self.next_index;
        self.next_index += 1;
        let sampling = sampling.then(|| Sampling {
            freq: attr.freq,
            period: attr.sample_period,
            sample_type: attr.sample_type,
            precise: attr.precise_ip > 0,
            latencies: self.latencies(&init, attr),
            taken: 0,
            pending_lost: 0,
            lost: 0,
        });
        let state = if attr.disabled && !attr.enable_on_exec {
            SimState::Off
        } else {
            // The simulator sees no exec: `enable_on_exec` counts from the open.
            SimState::Inactive
        };
        self.events.insert(
            fd,
            Ev {
                id,
                attr: attr.clone(),
                kind: if sampling.is_some() {
                    SimEventKind::Sampling
                } else {
                    SimEventKind::Counting
                },
                cpu: ctx_cpu,
                task,
                home: init.home,
                hw: init.hw,
                rate,
                count: 0.0,
                leader: leader_fd.unwrap_or(fd),
                siblings: Vec::new(),
                state,
                pinned: attr.pinned,
                index,
                enabled_ns: 0,
                running_ns: 0,
                reset_value: 0,
                metric: init.metric,
                kernel: false,
                any_cpu: cpu == -1,
                sampling,
                ring: None,
            },
        );
        if let Some(lfd) = leader_fd
            && let Some(leader) = self.events.get_mut(&lfd)
        {
            leader.siblings.push(fd);
        }
        self.index_group(leader_fd.unwrap_or(fd), old_key);
        self.on_leaders = None;
        self.reschedule_group(leader_fd.unwrap_or(fd));
        Ok(fd)
    }

    /// The checks of a new member of `lfd`'s group (same task, same CPU for CPU events, not
    /// pinned, one hardware PMU); returns the CPU its context is on. A pure software task
    /// group moves to the first hardware member's CPU.
    fn join_leader(
        &mut self,
        lfd: i32,
        init: &Init,
        attr: &Attr,
        task: Option<i32>,
        ctx_cpu: u32,
    ) -> Result<u32, Errno> {
        let leader = &self.events[&lfd];
        if leader.leader != lfd || leader.task != task {
            return Err(errno(libc::EINVAL));
        }
        if task.is_none() && leader.cpu != ctx_cpu {
            return Err(errno(libc::EINVAL));
        }
        if attr.pinned {
            return Err(errno(libc::EINVAL));
        }
        if let (Home::Hw(p), Some(q)) = (init.home, self.group_pmu(lfd))
            && p != q
        {
            return Err(errno(libc::EINVAL));
        }
        if task.is_some() {
            if let (Home::Hw(_), None) = (init.home, self.group_pmu(lfd)) {
                // A pure software task group moves to the hardware event's CPU.
                let members: Vec<i32> =
                    std::iter::once(lfd).chain(leader.siblings.iter().copied()).collect();
                for fd in members {
                    if let Some(e) = self.events.get_mut(&fd) {
                        e.cpu = ctx_cpu;
                    }
                }
            } else {
                return Ok(leader.cpu);
            }
        }
        Ok(ctx_cpu)
    }

    /// Accrues `dt` ns of the current schedule.
    fn accrue(&mut self, dt: u64) {
        if dt == 0 {
            return;
        }
        let leaders_on = self.on_leaders.take().unwrap_or_else(|| {
            let mut on = vec![false; self.events.items.len()];
            for (&fd, e) in self.events.iter() {
                if e.leader == fd
                    && matches!(e.state, SimState::Inactive | SimState::Active)
                    && let Some(slot) = Slab::slot(fd)
                {
                    on[slot] = true;
                }
            }
            on
        });
        // Time per workload phase in this span: an active event counts each phase's rate.
        let split = self.timeline.split(self.now, self.now + dt);
        for e in self.events.values_mut() {
            match e.state {
                SimState::Active => {
                    e.enabled_ns += dt;
                    e.running_ns += dt;
                    e.count += split
                        .iter()
                        .map(|&(phase, ns)| e.rate.per_sec(phase) * ns as f64 / 1e9)
                        .sum::<f64>();
                }
                SimState::Inactive
                    if Slab::slot(e.leader).and_then(|s| leaders_on.get(s)) == Some(&true) =>
                {
                    e.enabled_ns += dt
                }
                _ => {}
            }
        }
        self.on_leaders = Some(leaders_on);
    }

    fn advance_to(&mut self, to: u64) {
        loop {
            let next = self.timers.values().copied().min();
            match next {
                Some(t) if t <= to => {
                    let t = t.max(self.now);
                    self.accrue(t - self.now);
                    self.now = t;
                    let due: Vec<(u32, usize)> =
                        self.timers.iter().filter(|(_, at)| **at <= t).map(|(&k, _)| k).collect();
                    for key in due {
                        self.timers.remove(&key);
                        self.rotate_tick(key.0, key.1);
                    }
                }
                _ => {
                    self.accrue(to.saturating_sub(self.now));
                    self.now = self.now.max(to);
                    return;
                }
            }
        }
    }

    /// `perf_rotate_context`: in each context of (cpu, pmu) that had a flexible group left
    /// out, the first active flexible group (else the first flexible group) moves to the end
    /// of the list; then the flexible groups are scheduled in again.
    fn rotate_tick(&mut self, cpu: u32, pmu: usize) {
        let contexts: Vec<Option<i32>> =
            self.rotate.iter().filter(|k| k.0 == cpu && k.1 == pmu).map(|k| k.2).collect();
        let leaders = self.leaders_on(cpu, pmu);
        for ctx in contexts {
            let mut flexible: Vec<(u64, i32, SimState)> = leaders
                .iter()
                .filter_map(|fd| self.events.get(fd).map(|e| (*fd, e)))
                .filter(|(_, e)| !e.pinned && e.task == ctx)
                .map(|(fd, e)| (e.index, fd, e.state))
                .collect();
            flexible.sort_unstable();
            let pick =
                flexible.iter().find(|g| g.2 == SimState::Active).or(flexible.first()).map(|g| g.1);
            if let Some(fd) = pick {
                let index = self.next_index;
                self.next_index += 1;
                if let Some(e) = self.events.get_mut(&fd) {
                    e.index = index;
                }
            }
        }
        self.reschedule(cpu, pmu);
    }

    /// Schedules every group again, without rotating.
    fn reschedule_all(&mut self) {
        let soft_leaders: Vec<i32> = self
            .events
            .iter()
            .filter(|(fd, e)| e.leader == **fd)
            .map(|(&fd, _)| fd)
            .filter(|&fd| self.group_pmu(fd).is_none())
            .collect();
        for lfd in soft_leaders {
            self.refresh_soft(lfd);
        }
        let mut pairs: BTreeSet<(u32, usize)> = self.timers.keys().copied().collect();
        for (&fd, e) in &self.events {
            if e.leader == fd
                && let Some(p) = self.group_pmu(fd)
            {
                pairs.insert((e.cpu, p));
            }
        }
        for (cpu, pmu) in pairs {
            self.reschedule(cpu, pmu);
        }
    }

    /// A pure software group never waits for a counter: its enabled members are active
    /// while the leader is enabled.
    fn refresh_soft(&mut self, lfd: i32) {
        let Some(leader) = self.events.get(&lfd) else { return };
        let leader_on = matches!(leader.state, SimState::Inactive | SimState::Active);
        let members: Vec<i32> =
            std::iter::once(lfd).chain(leader.siblings.iter().copied()).collect();
        for fd in members {
            if let Some(e) = self.events.get_mut(&fd)
                && matches!(e.state, SimState::Inactive | SimState::Active)
            {
                e.state = if leader_on { SimState::Active } else { SimState::Inactive };
            }
        }
    }

    /// Schedules again what a change to the group led by `lfd` affects: its CPU and PMU
    /// (`ctx_resched`), or just the group when it is pure software.
    fn reschedule_group(&mut self, lfd: i32) {
        let Some(cpu) = self.events.get(&lfd).map(|e| e.cpu) else { return };
        match self.group_pmu(lfd) {
            Some(pmu) => self.reschedule(cpu, pmu),
            None => self.refresh_soft(lfd),
        }
    }

    /// `perf_event_sched_in` for one CPU and PMU: CPU-context pinned groups (the watchdog
    /// first), task pinned, CPU flexible, task flexible; in each pass groups in list order,
    /// and once one does not fit no later hardware group of that pass is tried
    /// (`merge_sched_in` clears `can_add_hw`). A pinned group that does not fit goes to
    /// ERROR; a flexible one waits for rotation.
    fn reschedule(&mut self, cpu: u32, pmu: usize) {
        let leaders = self.leaders_on(cpu, pmu);
        let mut groups: Vec<(u8, i32, u64, i32)> = leaders
            .iter()
            .filter_map(|fd| self.events.get(fd).map(|e| (*fd, e)))
            .map(|(fd, e)| {
                let pass = match (e.pinned, e.task.is_some()) {
                    (true, false) => 0,
                    (true, true) => 1,
                    (false, false) => 2,
                    (false, true) => 3,
                };
                (pass, e.task.unwrap_or(-1), e.index, fd)
            })
            .collect();
        groups.sort_unstable();
        // Everything off the counters first.
        for &(_, _, _, lfd) in &groups {
            let members: Vec<i32> =
                std::iter::once(lfd).chain(self.events[&lfd].siblings.iter().copied()).collect();
            for fd in members {
                if let Some(e) = self.events.get_mut(&fd)
                    && e.state == SimState::Active
                {
                    e.state = SimState::Inactive;
                }
            }
        }
        self.rotate.retain(|k| !(k.0 == cpu && k.1 == pmu));
        let mut placed: Vec<HwKind> = Vec::new();
        let mut pass_key = None;
        let mut can_add = true;
        let mut waiting = false;
        for (pass, task, _, lfd) in groups {
            if pass_key != Some((pass, task)) {
                pass_key = Some((pass, task));
                can_add = true;
            }
            let leader = &self.events[&lfd];
            if leader.state <= SimState::Off {
                continue;
            }
            let members: Vec<i32> = std::iter::once(lfd)
                .chain(leader.siblings.iter().copied())
                .filter(|fd| self.events.get(fd).is_some_and(|e| e.state > SimState::Off))
                .collect();
            let fitted = can_add && {
                let mut candidate = placed.clone();
                candidate.extend(members.iter().filter_map(|fd| self.events.get(fd)).filter_map(
                    |e| match e.home {
                        Home::Hw(p) if p == pmu => Some(e.hw),
                        _ => None,
                    },
                ));
                let fits = self.fits(pmu, &candidate);
                if fits {
                    placed = candidate;
                }
                fits
            };
            if fitted {
                for fd in members {
                    if let Some(e) = self.events.get_mut(&fd) {
                        e.state = SimState::Active;
                    }
                }
            } else {
                can_add = false;
                let leader = self.events.get_mut(&lfd).expect("leader exists");
                if leader.pinned {
                    leader.state = SimState::Error;
                    self.on_leaders = None;
                } else {
                    self.rotate.insert((cpu, pmu, (task >= 0).then_some(task)));
                    waiting = true;
                }
            }
        }
        if waiting {
            let at = self.now + self.mux_ns;
            self.timers.entry((cpu, pmu)).or_insert(at);
        } else {
            self.timers.remove(&(cpu, pmu));
        }
    }

    /// The descriptors an ioctl with or without PERF_IOC_FLAG_GROUP applies to.
    fn targets(&self, fd: i32, group: bool) -> Result<Vec<i32>, Errno> {
        let ev = self.events.get(&fd).filter(|e| !e.kernel).ok_or(errno(libc::EBADF))?;
        if !group {
            return Ok(vec![fd]);
        }
        let leader = &self.events[&ev.leader];
        Ok(std::iter::once(ev.leader).chain(leader.siblings.iter().copied()).collect())
    }

    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.sync();
        let ev = self.events.get(&fd).filter(|e| !e.kernel).ok_or(errno(libc::EBADF))?;
        if ev.state == SimState::Error {
            return Ok(0);
        }
        let format = ev.attr.read_format;
        let mut words: Vec<u64> = Vec::new();
        if format & FORMAT_GROUP != 0 {
            let leader = &self.events[&ev.leader];
            let members: Vec<&Ev> = std::iter::once(leader)
                .chain(leader.siblings.iter().filter_map(|s| self.events.get(s)))
                .collect();
            words.push(members.len() as u64);
            if format & FORMAT_TOTAL_TIME_ENABLED != 0 {
                words.push(leader.enabled_ns);
            }
            if format & FORMAT_TOTAL_TIME_RUNNING != 0 {
                words.push(leader.running_ns);
            }
            for m in members {
                words.push(m.value());
                if format & FORMAT_ID != 0 {
                    words.push(m.id);
                }
                if format & FORMAT_LOST != 0 {
                    words.push(m.sampling.as_ref().map_or(0, |s| s.lost));
                }
            }
        } else {
            words.push(ev.value());
            if format & FORMAT_TOTAL_TIME_ENABLED != 0 {
                words.push(ev.enabled_ns);
            }
            if format & FORMAT_TOTAL_TIME_RUNNING != 0 {
                words.push(ev.running_ns);
            }
            if format & FORMAT_ID != 0 {
                words.push(ev.id);
            }
            if format & FORMAT_LOST != 0 {
                words.push(ev.sampling.as_ref().map_or(0, |s| s.lost));
            }
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        if buf.len() < bytes.len() {
            return Err(errno(libc::ENOSPC));
        }
        buf[..bytes.len()].copy_from_slice(&bytes);
        Ok(bytes.len())
    }

    fn set_enabled(&mut self, fd: i32, group: bool, on: bool) -> Result<(), Errno> {
        self.sync();
        let leader = self.events.get(&fd).map_or(fd, |e| e.leader);
        self.on_leaders = None;
        for target in self.targets(fd, group)? {
            if let Some(e) = self.events.get_mut(&target) {
                if on && e.state <= SimState::Off {
                    e.state = SimState::Inactive;
                } else if !on && e.state >= SimState::Inactive {
                    e.state = SimState::Off;
                }
            }
        }
        self.reschedule_group(leader);
        Ok(())
    }

    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.sync();
        for target in self.targets(fd, group)? {
            if let Some(e) = self.events.get_mut(&target) {
                // perf_event_reset clears the count, not the times.
                e.reset_value = e.count as u64;
            }
        }
        Ok(())
    }

    fn close(&mut self, fd: i32) {
        self.sync();
        let Some(ev) = self.events.get(&fd).filter(|e| !e.kernel).cloned() else { return };
        let old_pmu = self.group_pmu(ev.leader);
        let old_key = old_pmu.map(|p| (ev.cpu, p));
        self.events.remove(&fd);
        self.on_leaders = None;
        if ev.leader == fd
            && let Some(key) = old_key
            && let Some(leaders) = self.groups.get_mut(&key)
        {
            leaders.retain(|&f| f != fd);
        }
        if ev.leader == fd {
            // perf_group_detach: siblings become singleton groups at the end of the list;
            // topdown metric events (PERF_EV_CAP_SIBLING) cannot live without their leader
            // and go to ERROR.
            for &sibling in &ev.siblings {
                let index = self.next_index;
                self.next_index += 1;
                if let Some(e) = self.events.get_mut(&sibling) {
                    e.leader = sibling;
                    e.index = index;
                    if e.metric {
                        e.state = SimState::Error;
                    }
                }
            }
        } else if let Some(leader) = self.events.get_mut(&ev.leader) {
            leader.siblings.retain(|&s| s != fd);
        }
        if ev.leader == fd {
            for &sibling in &ev.siblings {
                self.index_group(sibling, None);
                self.reschedule_group(sibling);
            }
        } else {
            self.index_group(ev.leader, old_key);
            self.reschedule_group(ev.leader);
        }
        if let Some(pmu) = old_pmu {
            self.reschedule(ev.cpu, pmu);
        }
    }
}

/// perf_event_open's checks of its arguments before it looks at the event: a task or a CPU,
/// a CPU that exists, a pid, a CPU for a cgroup event, then (perf_copy_attr) known
/// sample_type bits, not WEIGHT with WEIGHT_STRUCT, and the frequency and period limits.
fn check_open_args(attr: &Attr, pid: i32, cpu: i32, ncpus: i32) -> Result<(), Errno> {
    if pid == -1 && cpu == -1 {
        return Err(errno(libc::EINVAL));
    }
    if cpu < -1 || cpu >= ncpus {
        return Err(errno(libc::EINVAL));
    }
    if pid < -1 {
        return Err(errno(libc::ESRCH));
    }
    // PERF_FLAG_PID_CGROUP: `pid` is a cgroup's descriptor and the event counts on `cpu`
    // while that cgroup's tasks run there (perf_cgroup_connect: a CPU is required). The
    // simulated workload runs in every cgroup, so the event counts as a CPU event does.
    if attr.pid_is_cgroup && cpu < 0 {
        return Err(errno(libc::EINVAL));
    }
    // perf_copy_attr: unknown sample_type bits, WEIGHT with WEIGHT_STRUCT; then
    // perf_event_open's frequency and period limits.
    if attr.sample_type & !(SAMPLE_MAX - 1) != 0 {
        return Err(errno(libc::EINVAL));
    }
    if attr.sample_type & ring::SAMPLE_WEIGHT != 0
        && attr.sample_type & ring::SAMPLE_WEIGHT_STRUCT != 0
    {
        return Err(errno(libc::EINVAL));
    }
    if attr.freq && attr.sample_period > MAX_SAMPLE_RATE
        || !attr.freq && attr.sample_period & 1 << 63 != 0
    {
        return Err(errno(libc::EINVAL));
    }
    Ok(())
}

impl Syscalls for SimKernel {
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno> {
        self.lock().open(attr, pid, cpu, group_fd)
    }

    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.lock().read(fd, buf)
    }

    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.lock().set_enabled(fd, group, true)
    }

    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.lock().set_enabled(fd, group, false)
    }

    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.lock().reset(fd, group)
    }

    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        let state = self.lock();
        state.events.get(&fd).filter(|e| !e.kernel).map(|e| e.id).ok_or(errno(libc::EBADF))
    }

    fn close(&mut self, fd: i32) {
        self.lock().close(fd);
    }

    /// `perf_mmap`: the length rounded up to whole pages as mmap(2) does, then one control
    /// page plus 0 or a power of two of data pages (EINVAL otherwise); EINVAL for an
    /// inherited event opened with `cpu == -1`; a second mapping must have the first's size
    /// (EINVAL) and shares its ring. The caller is root, so the `perf_event_mlock_kb`
    /// allowance (EPERM) never applies. The reader's handle writes the records due whenever
    /// it loads `data_head`.
    fn mmap(&mut self, fd: i32, len: usize) -> Result<ring::Mapping, Errno> {
        let weak = Arc::downgrade(&self.state);
        let mut state = self.lock();
        state.sync();
        let ev = state.events.get_mut(&fd).filter(|e| !e.kernel).ok_or(errno(libc::EBADF))?;
        if len == 0 {
            return Err(errno(libc::EINVAL));
        }
        if ev.any_cpu && ev.attr.inherit {
            return Err(errno(libc::EINVAL));
        }
        let pages = len.div_ceil(PAGE);
        let data_pages = pages - 1;
        if data_pages != 0 && !data_pages.is_power_of_two() {
            return Err(errno(libc::EINVAL));
        }
        let mapping = match &ev.ring {
            Some(SimRing(existing)) => {
                if existing.len() != pages * PAGE {
                    return Err(errno(libc::EINVAL));
                }
                existing.share().expect("a heap ring")
            }
            None => {
                let mapping = ring::Mapping::heap_exact(data_pages * PAGE);
                ev.ring = Some(SimRing(mapping.share().expect("a heap ring")));
                mapping
            }
        };
        let refresh: ring::Refresh = Arc::new(move || {
            if let Some(state) = weak.upgrade() {
                state.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).sync();
            }
        });
        Ok(mapping.with_refresh(refresh))
    }
}

/// The core PMU a PERF_TYPE_HARDWARE / HW_CACHE event goes to (`perf_init_event`): the
/// extended type in config's upper half, else type 4 (`cpu`/`cpu_core`), falling back to
/// the PMU of the CPU's core type; on arm64, the first CPU PMU that accepts it.
fn generic_pmu(machine: &Machine, config: u64, cpu: i32) -> Result<usize, Errno> {
    let is_core = |class: &PmuClass| matches!(class, PmuClass::X86Core(_) | PmuClass::Arm(_));
    let ext = (config >> 32) as u32;
    if ext != 0
        && let Some((index, pmu)) = machine.pmu_by_type(ext)
    {
        // Only PMUs with PERF_PMU_CAP_EXTENDED_HW_TYPE take it; type 4 always may.
        return if is_core(&pmu.class) { Ok(index) } else { Err(errno(libc::ENOENT)) };
    }
    let cores: Vec<(usize, &super::machine::SimPmu)> =
        machine.pmus.iter().enumerate().filter(|(_, p)| is_core(&p.class)).collect();
    let fits_cpu = |p: &super::machine::SimPmu| cpu < 0 || p.covers(cpu as u32);
    if let Some((i, _)) = cores.iter().find(|(_, p)| p.type_ == TYPE_RAW && fits_cpu(p)) {
        return Ok(*i);
    }
    cores.iter().find(|(_, p)| fits_cpu(p)).map(|(i, _)| *i).ok_or(errno(libc::ENOENT))
}

/// `perf_init_event` plus the PMU's `event_init` checks that do not depend on the group: where
/// the event lives, what the counter scheduler needs of it and what it counts.
pub(crate) fn classify(machine: &Machine, attr: &Attr, pid: i32, cpu: i32) -> Result<Init, Errno> {
    let (pmu_index, config) = match attr.type_ {
        TYPE_SOFTWARE => {
            if attr.config >= SW_MAX {
                return Err(errno(libc::ENOENT));
            }
            return Ok(soft(Source::Software(attr.config)));
        }
        TYPE_TRACEPOINT => {
            return Ok(soft(Source::Tracepoint(attr.config)));
        }
        TYPE_HARDWARE => {
            let index = generic_pmu(machine, attr.config, cpu)?;
            let id = attr.config & 0xffff_ffff;
            if id >= HW_MAX {
                return Err(errno(libc::EINVAL));
            }
            let generic = match &machine.pmus[index].class {
                PmuClass::X86Core(core) => core.generic,
                PmuClass::Arm(arm) => arm.generic,
                _ => return Err(errno(libc::ENOENT)),
            };
            (index, generic[id as usize].ok_or(errno(libc::ENOENT))?)
        }
        TYPE_HW_CACHE => return init_cache(machine, attr, cpu),
        other => match machine.pmu_by_type(other) {
            // arm64 has no PMU of type 4: a raw event goes to the first CPU PMU that
            // takes it.
            None if other == TYPE_RAW => (generic_pmu(machine, 0, cpu)?, attr.config),
            None => return Err(errno(libc::ENOENT)),
            Some((index, pmu)) => {
                if matches!(pmu.class, PmuClass::Builtin) {
                    return match pmu.name.as_str() {
                        "cpu_clock" => Ok(soft(Source::Software(0))),
                        "task_clock" => Ok(soft(Source::Software(1))),
                        // breakpoint, kprobe, uprobe need fields tmetric never sets.
                        _ => Err(errno(libc::EINVAL)),
                    };
                }
                (index, attr.config)
            }
        },
    };
    init_on_pmu(machine, pmu_index, config, attr, pid, cpu)
}

/// A software event of `source`: no counter, no PMU.
fn soft(source: Source) -> Init {
    Init {
        home: Home::Soft,
        hw: HwKind::None,
        source: Some(source),
        cpu: None,
        metric: false,
        kept: 0,
    }
}

/// A generic cache event (`PERF_TYPE_HW_CACHE`): cache, op and result within range, on a
/// core PMU that covers `cpu`.
fn init_cache(machine: &Machine, attr: &Attr, cpu: i32) -> Result<Init, Errno> {
    let index = generic_pmu(machine, attr.config, cpu)?;
    let c = attr.config & 0xffff_ffff;
    let (cache, op, result) = (c & 0xff, (c >> 8) & 0xff, (c >> 16) & 0xff);
    if cache >= 7 || op >= 3 || result >= 2 || c >> 24 != 0 {
        return Err(errno(libc::EINVAL));
    }
    // The per-model cache tables are not modelled: a generic cache event is an
    // unconstrained GP event with its own pseudo rate.
    let pmu = &machine.pmus[index];
    if cpu >= 0 && !pmu.covers(cpu as u32) {
        return Err(errno(libc::ENOENT));
    }
    let hw = match &pmu.class {
        PmuClass::X86Core(core) => {
            x86_precise(pmu, attr)?;
            HwKind::X86(HwEvent { constraint: core.unconstrained(), extra: None, metric: false })
        }
        // Any event number but CPU_CYCLES: a programmable counter.
        PmuClass::Arm(_) => HwKind::Arm { config: 0xffff },
        _ => return Err(errno(libc::ENOENT)),
    };
    Ok(Init {
        home: Home::Hw(index),
        hw,
        source: Some(Source::Cache { pmu: index, config: c }),
        cpu: None,
        metric: false,
        kept: 0,
    })
}

/// The PMU's `event_init` checks for `config` on PMU `pmu_index`.
fn init_on_pmu(
    machine: &Machine,
    pmu_index: usize,
    config: u64,
    attr: &Attr,
    pid: i32,
    cpu: i32,
) -> Result<Init, Errno> {
    let sampling = attr.sample_period != 0;
    let pmu = &machine.pmus[pmu_index];
    match &pmu.class {
        PmuClass::X86Core(core) => {
            // x86_pmu_event_init: a hybrid PMU refuses a CPU outside its `cpus`.
            if cpu >= 0 && !pmu.covers(cpu as u32) {
                return Err(errno(libc::ENOENT));
            }
            init_x86(machine, core, pmu_index, attr, config)
        }
        PmuClass::Arm(arm) => {
            if cpu >= 0 && !pmu.covers(cpu as u32) {
                return Err(errno(libc::ENOENT));
            }
            let config = config & 0xffff;
            let _ = arm;
            Ok(Init {
                home: Home::Hw(pmu_index),
                hw: HwKind::Arm { config },
                source: Some(Source::Arm { pmu: pmu_index, config }),
                cpu: None,
                metric: false,
                kept: 0,
            })
        }
        PmuClass::Msr { events } => {
            // msr.c: PERF_PMU_CAP_NO_EXCLUDE, config within the detected MSRs, no
            // sampling.
            if any_exclude(attr) || sampling {
                return Err(errno(libc::EINVAL));
            }
            if config >= 64 || events & (1 << config) == 0 {
                return Err(errno(libc::EINVAL));
            }
            Ok(soft(Source::Msr(config)))
        }
        PmuClass::Power { events } => {
            // rapl.c: CPU events only, no exclude bits, no sampling, config 0-7 naming a
            // domain.
            if cpu < 0 || pid != -1 || any_exclude(attr) || sampling {
                return Err(errno(libc::EINVAL));
            }
            if config & !0xff != 0 || events & (1 << config) == 0 {
                return Err(errno(libc::EINVAL));
            }
            let moved = reader_cpu(machine, pmu_index, cpu as u32);
            Ok(Init {
                home: Home::Hw(pmu_index),
                hw: HwKind::Free,
                source: Some(Source::Power(config)),
                cpu: moved,
                metric: false,
                kept: 0,
            })
        }
        PmuClass::Cstate { events } => {
            // cstate.c: no sampling either.
            if cpu < 0 || pid != -1 || any_exclude(attr) || sampling {
                return Err(errno(libc::EINVAL));
            }
            if config >= 64 || events & (1 << config) == 0 {
                return Err(errno(libc::EINVAL));
            }
            Ok(Init {
                home: Home::Hw(pmu_index),
                hw: HwKind::Free,
                source: Some(Source::Cstate { pmu: pmu_index, config }),
                cpu: None,
                metric: false,
                kept: 0,
            })
        }
        PmuClass::Uncore { config_mask, .. } => {
            init_uncore(machine, pmu_index, *config_mask, config, attr, pid, cpu)
        }
        PmuClass::Builtin => Err(errno(libc::EINVAL)),
    }
}

/// uncore_pmu_event_init: CPU events only, no exclude bits, no sampling; the event moves to
/// the box's reader CPU; config bits outside the box's masks (`config_mask`) are dropped.
fn init_uncore(
    machine: &Machine,
    pmu_index: usize,
    config_mask: u64,
    config: u64,
    attr: &Attr,
    pid: i32,
    cpu: i32,
) -> Result<Init, Errno> {
    let pmu = &machine.pmus[pmu_index];
    let sampling = attr.sample_period != 0;
    if cpu < 0 || pid != -1 || any_exclude(attr) {
        return Err(errno(libc::EINVAL));
    }
    if sampling {
        // Intel's uncore_pmu_event_init refuses sampling (EINVAL); AMD's boxes pass
        // event_init and perf_event_open refuses them for
        // PERF_PMU_CAP_NO_INTERRUPT (EOPNOTSUPP).
        let amd = pmu.name.starts_with("amd_");
        return Err(errno(if amd { libc::EOPNOTSUPP } else { libc::EINVAL }));
    }
    let config = config & config_mask;
    let moved = reader_cpu(machine, pmu_index, cpu as u32);
    let kind = box_kind(&pmu.name).to_string();
    // Filter registers (SKX CHA's config1) select what the box counts.
    let config1 =
        if pmu.formats.iter().any(|(_, f)| f.starts_with("config1")) { attr.config1 } else { 0 };
    Ok(Init {
        home: Home::Hw(pmu_index),
        hw: HwKind::Uncore { config },
        source: Some(Source::Uncore { kind, config, config1 }),
        cpu: moved,
        metric: false,
        kept: 0,
    })
}

/// The `cpumask` CPU of `cpu`'s package.
fn reader_cpu(machine: &Machine, pmu: usize, cpu: u32) -> Option<u32> {
    let package = machine.package_of(cpu)?;
    let mask = machine.pmus[pmu].cpumask.as_ref()?;
    mask.iter().copied().find(|&c| machine.package_of(c) == Some(package))
}

/// An uncore box's kind: its PMU name without the box number (`uncore_cha_1` -> `uncore_cha`).
pub(crate) fn box_kind(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((kind, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => kind,
        _ => name,
    }
}

/// `x86_pmu_hw_config` + `intel_pmu_hw_config` (or AMD's): the kept config, the topdown
/// attribute rules, extra registers and the constraint.
fn init_x86(
    machine: &Machine,
    core: &X86Core,
    pmu_index: usize,
    attr: &Attr,
    config: u64,
) -> Result<Init, Errno> {
    let pmu = &machine.pmus[pmu_index];
    x86_precise(pmu, attr)?;
    let amd = core.kind == CoreKind::Zen4;
    let mut kept = if amd { config & AMD_RAW_EVENT_MASK } else { config & RAW_EVENT_MASK };
    if !amd {
        if core.any_bit && config & EVENTSEL_ANY != 0 {
            kept |= EVENTSEL_ANY;
        }
        if pmu.formats.iter().any(|(n, _)| n == "in_tx") {
            kept |= config & IN_TX;
        }
    }
    let code = kept & ARCH_EVENT_MASK;
    let is_metric = core.topdown_events > 0
        && kept & EVENTSEL_EVENT == 0
        && (TD_METRIC_FIRST..=TD_METRIC_MAX).contains(&code);
    let is_slots = core.topdown_events > 0 && code == TD_SLOTS;
    if is_metric || is_slots {
        // intel_pmu_hw_config: topdown events take no config1/config2 and no filters.
        if attr.config1 != 0 || attr.config2 != 0 {
            return Err(errno(libc::EINVAL));
        }
        if config & ALL_EVENT_FLAGS != 0 {
            return Err(errno(libc::EINVAL));
        }
    }
    let available_metric =
        is_metric && code <= TD_METRIC_FIRST + ((u64::from(core.topdown_events) - 1) << 8);
    if available_metric && attr.sample_period != 0 {
        // intel_pmu_hw_config: "The metric events don't support sampling."
        return Err(errno(libc::EINVAL));
    }
    // Extra registers: config1 must fit the register's valid mask (EINVAL); events
    // without one ignore config1.
    let mut extra = None;
    let mut config1 = 0;
    if let Some(er) = core.extra_regs.iter().find(|er| er.event == code) {
        if attr.config1 & !er.valid != 0 {
            return Err(errno(libc::EINVAL));
        }
        extra = Some((er.kind, attr.config1));
        config1 = attr.config1;
    }
    let mut constraint = core.constraint(kept);
    if attr.precise_ip > 0
        && let Some(mask) = pebs_constraint(core.kind, kept)
    {
        constraint.idxmsk = mask;
        constraint.weight = mask.count_ones();
    }
    Ok(Init {
        home: Home::Hw(pmu_index),
        hw: HwKind::X86(HwEvent { constraint, extra, metric: is_metric }),
        source: Some(Source::X86 { pmu: pmu_index, config: kept & !EVENTSEL_ANY, config1 }),
        cpu: None,
        metric: available_metric,
        kept,
    })
}
