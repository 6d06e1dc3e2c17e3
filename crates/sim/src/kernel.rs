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

use super::machine::Machine;
use super::profile::{Profile, Rate, Source};
use super::realism::Realism;
use super::sched::{EVENTSEL_ANY, HwEvent};
use super::workload::{Schedule, SimWorkload, Timeline};
use tmetric_runtime::ring;
use tmetric_runtime::sys::{Attr, Errno, Syscalls};

mod calls;
mod classify;
mod sampling;
mod schedule;

pub(crate) use classify::classify;
use sampling::{Sampling, SimRing};

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
    Arm(crate::sched::ArmEvent),
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
    /// A core PMU event (counts interrupts and non-determinism under [`Realism`]).
    core: bool,
    /// A topdown metric event read through 8-bit PERF_METRICS ([`Realism::quantised_metrics`]).
    td: Option<Box<Topdown>>,
    /// The SMT sibling whose events an AnyThread event counts too: half its rate follows
    /// the sibling's phases.
    pair: Option<u32>,
    /// What the overcount is drawn for: the event (its PMU and config, whatever the CPU or
    /// group), or for `slots` and the topdown metric events FIXED_CTR3, which they all read.
    noise_key: u64,
    /// The cgroup a cgroup event counts in (its descriptor's directory).
    cgroup: Option<String>,
}

/// What PERF_METRICS and FIXED_CTR3 hold for one metric event since their last reset, and
/// the count the kernel last derived from them (`hw.saved_slots`/`saved_metric`).
#[derive(Debug, Clone)]
struct Topdown {
    /// The slots rate on the event's CPU.
    slots_rate: Rate,
    /// Slots since the reset.
    slots: f64,
    /// What FIXED_CTR3 counted of them (with the overcount the slots event gets).
    slots_read: f64,
    /// The metric's true slots since the reset.
    metric: f64,
    /// For a level-1 field: the rate of the level-1 fields before it in PERF_METRICS, and
    /// their true slots since the reset.
    before_rate: Option<Rate>,
    before: f64,
    /// The value derived from the saved registers (0 after a reset).
    saved: u64,
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
    /// Open cgroup descriptors and their cgroups: numbered from the events' sequence, so
    /// closing one never closes an event (the machine's own descriptor numbers did collide).
    cgroups: BTreeMap<i32, String>,
    /// How unkind the kernel and hardware are.
    realism: Realism,
    /// Where each CPU (by number) is in the workload's phases: its timeline runs this many
    /// ns ahead of the kernel's clock.
    offsets: Vec<u64>,
    /// Nanoseconds from the simulated boot to the kernel's time 0: where the run starts on
    /// the rotation hrtimers' grid ([`Realism::boot_grid`]).
    boot_ns: u64,
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

impl SimKernel {
    /// A kernel on `machine` running the default [`SimWorkload`], on the real monotonic clock:
    /// time passes as it does for the caller, so a sleeping workload behaves naturally.
    pub fn new(machine: Machine) -> SimKernel {
        SimKernel::with_workload(machine, SimWorkload::default_workload())
    }

    /// A kernel whose clock moves only through [`SimKernel::advance`], for deterministic
    /// tests, running the default workload.
    pub fn manual(machine: Machine) -> SimKernel {
        SimKernel::manual_with_workload(machine, SimWorkload::default_workload())
    }

    /// [`SimKernel::manual`] running `workload`.
    pub fn manual_with_workload(machine: Machine, workload: SimWorkload) -> SimKernel {
        let profile = Profile::new(&machine, workload);
        SimKernel::build(machine, profile, None)
    }

    /// [`SimKernel::new`] running `workload`.
    pub fn with_workload(machine: Machine, workload: SimWorkload) -> SimKernel {
        let profile = Profile::new(&machine, workload);
        SimKernel::build(machine, profile, Some(Instant::now()))
    }

    /// The kernel for [`Machine::named`]`(name)` on the real clock.
    pub fn for_model(name: &str) -> Option<SimKernel> {
        Machine::named(name).map(SimKernel::new)
    }

    fn build(machine: Machine, profile: Profile, start: Option<Instant>) -> SimKernel {
        let spec = profile.workload.kernel.clone();
        let machine = match spec.hz {
            Some(hz) => machine.with_hz(hz),
            None => machine,
        };
        let realism = spec.realism();
        let mux_ns = machine.mux_interval_ms.max(1) * 1_000_000;
        let timeline = profile.timeline();
        // How far apart CPUs may start in the phases: a whole cycle of a periodic schedule,
        // a second of a random one.
        let span = match profile.workload.schedule {
            Schedule::Constant => 0,
            Schedule::Every(every) => every.saturating_mul(profile.workload.phases.len() as u64),
            Schedule::Random { .. } | Schedule::Lengths { .. } => 1_000_000_000,
        };
        let cpus = machine.cpus.iter().map(|c| c.id as usize + 1).max().unwrap_or(1);
        let offsets = (0..cpus)
            .map(|cpu| match profile.workload.cpu_offsets_ns.get(cpu) {
                Some(&ns) => ns,
                None if realism.phase_offsets => {
                    (realism.uniform(&[OFFSET_DRAW, cpu as u64]) * span as f64) as u64
                }
                None => 0,
            })
            .collect();
        let boot_ns =
            if realism.boot_grid { (realism.uniform(&[BOOT_DRAW]) * 1e9) as u64 } else { 0 };
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
            cgroups: BTreeMap::new(),
            realism,
            offsets,
            boot_ns,
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

    /// The workload phase at simulated time `t` nanoseconds (on a CPU whose phases are not
    /// offset: see [`SimKernel::phase_on`]).
    pub fn phase_at(&self, t: u64) -> usize {
        self.lock().timeline.phase_at(t)
    }

    /// The workload phase `cpu` runs at simulated time `t` nanoseconds.
    pub fn phase_on(&self, cpu: u32, t: u64) -> usize {
        let mut state = self.lock();
        let off = state.offset(cpu);
        state.timeline.phase_at(t + off)
    }

    /// How unkind this kernel is.
    pub fn realism(&self) -> Realism {
        self.lock().realism.clone()
    }

    /// One line on the simulated kernel, for `--pmu-sim`'s banner: its HZ, the rotation
    /// interval, and which rules of [`Realism`] are on.
    pub fn summary(&self) -> String {
        let state = self.lock();
        let m = &state.machine;
        let r = &state.realism;
        let mut text =
            format!("kernel HZ {}, multiplexed groups rotate every {} ms", m.hz, m.mux_interval_ms);
        if !r.any() {
            text.push_str(" on every CPU in step; exact counts (lockstep model)");
            return text;
        }
        let mut on = Vec::new();
        if r.boot_grid {
            on.push("on the hrtimer grid since boot".to_string());
        }
        if r.timer_lateness_ns > 0 {
            on.push(format!("timers up to {} us late", r.timer_lateness_ns / 1000));
        }
        if r.phase_offsets {
            on.push("each CPU at its own phase".into());
        }
        if r.interrupt_overcount {
            on.push("one count per interrupt".into());
        }
        if r.noise > 0.0 {
            on.push(format!("overcount up to {} %", r.noise * 100.0));
        }
        if r.quantised_metrics {
            on.push("8-bit PERF_METRICS".into());
        }
        text.push_str(&format!(", {} (seed {})", on.join(", "), r.seed));
        text
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
        let init = state.init(attr, -1, cpu as i32)?;
        let rate = state.rate_for(&init, attr, cpu);
        let off = state.offset(cpu);
        let own = rate.integral(&mut state.timeline, from + off, to + off);
        Ok(match state.pair_of(&init, cpu) {
            Some(sibling) => {
                let off = state.offset(sibling);
                let theirs = rate.integral(&mut state.timeline, from + off, to + off);
                0.5 * (own + theirs)
            }
            None => own,
        } as u64)
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

/// What [`Realism::uniform`] draws for: a CPU's phase offset, the boot's place on the grid.
const OFFSET_DRAW: u64 = 1;
const BOOT_DRAW: u64 = 2;

impl State {
    /// How far `cpu`'s phases run ahead of the kernel's clock.
    fn offset(&self, cpu: u32) -> u64 {
        self.offsets.get(cpu as usize).copied().unwrap_or(0)
    }

    /// The SMT sibling an event with the AnyThread bit on `cpu` counts too, when it runs
    /// other phases (the event's rate is twice the thread's: half is the sibling's).
    fn pair_of(&self, init: &Init, cpu: u32) -> Option<u32> {
        if init.kept & EVENTSEL_ANY == 0 || !self.machine.smt {
            return None;
        }
        self.machine
            .siblings(cpu)
            .into_iter()
            .find(|&c| c != cpu)
            .filter(|&c| self.offset(c) != self.offset(cpu))
    }

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

    /// The cgroup must exist on this machine (its directory opens as the real kernel's
    /// would; the simulated workload runs in every cgroup), and the descriptor is the
    /// simulated kernel's own.
    fn open_cgroup(&mut self, name: &str) -> Result<i32, Errno> {
        let real = tmetric_runtime::sys::open_cgroup_dir(name)?;
        tmetric_runtime::Kernel.close(real);
        let mut state = self.lock();
        let fd = state.next_fd;
        state.next_fd += 1;
        state.cgroups.insert(fd, name.to_string());
        Ok(fd)
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
