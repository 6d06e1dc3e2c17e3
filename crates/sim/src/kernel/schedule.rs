//! Simulated time and scheduling: counts accrue as time advances, pinned then flexible groups
//! are placed on each CPU's PMU counters, the NMI watchdog's pinned cycles event, and rotation
//! every `perf_event_mux_interval_ms`.

use std::collections::BTreeSet;

use std::collections::BTreeMap;

use super::{Ev, Home, HwKind, Init, SimEventKind, SimState, Slab, State, Topdown};
use crate::machine::PmuClass;
use crate::profile::{Rate, Source};
use crate::realism::topdown_value;
use crate::sched::{self, HwEvent, TD_METRIC_FIRST, TD_SLOTS};
use tmetric_runtime::sys::{Attr, TYPE_HARDWARE};

/// What [`crate::Realism::uniform`] draws for here: a span's non-determinism, a CPU's and an
/// expiry's hrtimer lateness.
const NOISE_DRAW: u64 = 3;
const LATE_CPU_DRAW: u64 = 4;
const LATE_EXPIRY_DRAW: u64 = 5;

impl State {
    pub(super) fn add_watchdogs(&mut self) {
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
                    core: true,
                    td: None,
                    pair: None,
                    noise_key: index,
                    cgroup: None,
                },
            );
            self.index_group(fd, None);
        }
        self.reschedule_all();
    }

    /// The hardware PMU of the group led by `leader`: a software leader with a hardware
    /// sibling moves to that sibling's PMU (`move_group`).
    pub(super) fn group_pmu(&self, leader: i32) -> Option<usize> {
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
    pub(super) fn index_group(&mut self, lfd: i32, old: Option<(u32, usize)>) {
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
    pub(super) fn fits(&self, pmu: usize, events: &[HwKind]) -> bool {
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
                let placed: Vec<sched::ArmEvent> = events
                    .iter()
                    .filter_map(|e| match e {
                        HwKind::Arm(ev) => Some(*ev),
                        _ => None,
                    })
                    .collect();
                sched::arm_fits(arm.gp, arm.long_counters, &placed)
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

    /// Accrues `dt` ns of the current schedule: an active event counts each phase's rate
    /// over the time its CPU spends in that phase (its own phases under
    /// [`crate::Realism::phase_offsets`]). Under realism a core event also counts one per
    /// interrupt (the HZ tick and the rotation hrtimer) and a small random overcount, and a
    /// topdown metric event accumulates PERF_METRICS' state instead of a count.
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
        let (from, to) = (self.now, self.now + dt);
        // The tick's interrupts, and the rotation hrtimer's where it is armed.
        let (ticks, rotations) = if self.realism.interrupt_overcount {
            let secs = dt as f64 / 1e9;
            (f64::from(self.machine.hz) * secs, 1e9 / self.mux_ns as f64 * secs)
        } else {
            (0.0, 0.0)
        };
        let State { events, timeline, offsets, realism, timers, .. } = self;
        // Time per workload phase in this span, per CPU offset.
        let mut splits: BTreeMap<u64, Vec<(usize, u64)>> = BTreeMap::new();
        for e in events.values_mut() {
            match e.state {
                SimState::Active => {
                    e.enabled_ns += dt;
                    e.running_ns += dt;
                    let offset = |cpu: u32| offsets.get(cpu as usize).copied().unwrap_or(0);
                    let off = offset(e.cpu);
                    let pair = e.pair.map(offset);
                    for o in std::iter::once(off).chain(pair) {
                        splits.entry(o).or_insert_with(|| timeline.split(from + o, to + o));
                    }
                    let on = |o: u64, rate: &Rate| -> f64 {
                        splits[&o].iter().map(|&(p, ns)| rate.per_sec(p) * ns as f64 / 1e9).sum()
                    };
                    // An AnyThread event counts half at its sibling's phases.
                    let over = |rate: &Rate| -> f64 {
                        match pair {
                            Some(p) => 0.5 * (on(off, rate) + on(p, rate)),
                            None => on(off, rate),
                        }
                    };
                    // What a core counter adds over a true `add`: the span's overcount and
                    // one per interrupt.
                    let armed =
                        matches!(e.home, Home::Hw(pmu) if timers.contains_key(&(e.cpu, pmu)));
                    let counted = |add: f64| -> f64 {
                        if add <= 0.0 {
                            return add;
                        }
                        let mut add = add;
                        if realism.noise > 0.0 {
                            add *=
                                1.0 + realism.noise * realism.uniform(&[NOISE_DRAW, e.noise_key]);
                        }
                        add + ticks + if armed { rotations } else { 0.0 }
                    };
                    if let Some(td) = e.td.as_mut() {
                        let slots = over(&td.slots_rate);
                        td.slots += slots;
                        td.slots_read += counted(slots);
                        td.metric += over(&e.rate);
                        if let Some(rate) = &td.before_rate {
                            td.before += over(rate);
                        }
                        continue;
                    }
                    let add = over(&e.rate);
                    e.count += if e.core { counted(add) } else { add };
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

    /// The PERF_METRICS state of a new topdown metric event under
    /// [`crate::Realism::quantised_metrics`], counting on `cpu`.
    pub(super) fn topdown_for(&self, init: &Init, attr: &Attr, cpu: u32) -> Option<Box<Topdown>> {
        if !(self.realism.quantised_metrics && init.metric) {
            return None;
        }
        let Home::Hw(pmu) = init.home else { return None };
        let phases = &self.profile.workload.phases;
        let rate_of = |config: u64| {
            let source = Source::X86 { pmu, config, config1: 0 };
            self.profile.rate(&self.machine, &source, cpu, |p| {
                init.factor(&self.machine, attr, phases[p].kernel_share)
            })
        };
        let slots_rate = rate_of(TD_SLOTS);
        // Level 1 is bytes 0-3 (retiring, bad speculation, frontend bound, backend bound).
        let field = (init.kept & 0xffff).saturating_sub(TD_METRIC_FIRST) >> 8;
        let before_rate = (field < 4).then(|| {
            let mut sum = Rate::constant(0.0, phases.len());
            for k in 0..field {
                for (s, r) in sum.0.iter_mut().zip(rate_of(TD_METRIC_FIRST + (k << 8)).0) {
                    *s += r;
                }
            }
            sum
        });
        Some(Box::new(Topdown {
            slots_rate,
            slots: 0.0,
            slots_read: 0.0,
            metric: 0.0,
            before_rate,
            before: 0.0,
            saved: 0,
        }))
    }

    /// `intel_update_topdown_event` (arch/x86/events/intel/core.c) for metric event `fd`: the
    /// count derived from PERF_METRICS now, less the one derived from the saved registers, is
    /// added only when positive (`__icl_update_topdown_event`). A stop (`reset == false`,
    /// `x86_pmu_stop` at every rotation or disable) saves the registers, which the next
    /// schedule-in restores; a read of the active group (`reset`) zeroes FIXED_CTR3 and
    /// PERF_METRICS and the saved values.
    pub(super) fn topdown_update(&mut self, fd: i32, reset: bool) {
        let Some(e) = self.events.get_mut(&fd) else { return };
        let Some(td) = e.td.as_mut() else { return };
        let before = td.before_rate.as_ref().map(|_| td.before);
        let value = topdown_value(td.slots, td.metric, td.slots_read, before);
        if value > td.saved {
            e.count += (value - td.saved) as f64;
        }
        if reset {
            td.slots = 0.0;
            td.slots_read = 0.0;
            td.before = 0.0;
            td.metric = 0.0;
            td.saved = 0;
        } else {
            td.saved = value;
        }
    }

    /// A read of `fd`: when its group is on the counters, `intel_pmu_read_event` updates
    /// every topdown metric event of the group and resets PERF_METRICS; an inactive group's
    /// counts were drained when it stopped (`__perf_event_read` reads only ACTIVE events).
    pub(super) fn topdown_read(&mut self, fd: i32) {
        let Some(ev) = self.events.get(&fd) else { return };
        let leader = ev.leader;
        let Some(l) = self.events.get(&leader) else { return };
        let members: Vec<i32> = std::iter::once(leader).chain(l.siblings.iter().copied()).collect();
        for m in members {
            if self.events.get(&m).is_some_and(|e| e.td.is_some() && e.state == SimState::Active) {
                self.topdown_update(m, true);
            }
        }
    }

    /// When the rotation hrtimer of (`cpu`, `pmu`) fires next if started now: one interval
    /// from now (the exact model), or the next point of the grid since boot plus the
    /// interrupt's lateness ([`crate::Realism::boot_grid`], `timer_lateness_ns`).
    fn next_rotation(&self, cpu: u32, pmu: usize) -> u64 {
        let r = &self.realism;
        if !r.boot_grid {
            return self.now + self.mux_ns;
        }
        // `perf_mux_hrtimer_restart`/`perf_mux_hrtimer_handler`: `hrtimer_forward_now` from
        // the old expiry (0 at `hrtimer_init`) to the first multiple of the interval after
        // now.
        let k = (self.now + self.boot_ns) / self.mux_ns + 1;
        let expiry = k * self.mux_ns - self.boot_ns;
        let bound = r.timer_lateness_ns.min(self.mux_ns / 2) as f64;
        // Half the bound is the CPU's own (its interrupt load), half this expiry's.
        let late = bound
            * 0.5
            * (r.uniform(&[LATE_CPU_DRAW, u64::from(cpu), pmu as u64])
                + r.uniform(&[LATE_EXPIRY_DRAW, u64::from(cpu), pmu as u64, k]));
        expiry + late as u64
    }

    pub(super) fn advance_to(&mut self, to: u64) {
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
    pub(super) fn reschedule_group(&mut self, lfd: i32) {
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
    pub(super) fn reschedule(&mut self, cpu: u32, pmu: usize) {
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
        // Everything off the counters first (`ctx_sched_out`: every active event is stopped,
        // which drains PERF_METRICS into the topdown counts).
        for &(_, _, _, lfd) in &groups {
            let members: Vec<i32> =
                std::iter::once(lfd).chain(self.events[&lfd].siblings.iter().copied()).collect();
            for fd in members {
                if self.events.get(&fd).is_some_and(|e| e.state == SimState::Active) {
                    self.topdown_update(fd, false);
                }
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
            let at = self.next_rotation(cpu, pmu);
            self.timers.entry((cpu, pmu)).or_insert(at);
        } else {
            self.timers.remove(&(cpu, pmu));
        }
    }
}
