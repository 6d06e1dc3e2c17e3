//! The system calls on the simulated state: `perf_event_open` with the kernel's argument and
//! `validate_group` checks, group reads, enable/disable, reset and close.

use super::sampling::Sampling;
use super::{
    Ev, FORMAT_LOST, Home, HwKind, Init, MAX_SAMPLE_RATE, SAMPLE_FIXED, SAMPLE_MAX, SimEventKind,
    SimState, State, errno,
};
use crate::machine::PmuClass;
use crate::profile::Source;
use crate::sched::{ARCH_EVENT_MASK, TD_SLOTS};
use tmetric_runtime::ring;
use tmetric_runtime::sys::{
    Attr, Errno, FORMAT_GROUP, FORMAT_ID, FORMAT_TOTAL_TIME_ENABLED, FORMAT_TOTAL_TIME_RUNNING,
    TYPE_HARDWARE,
};

impl State {
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

    pub(super) fn open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno> {
        self.sync();
        check_open_args(attr, pid, cpu, self.machine.cpus.len() as i32)?;
        // perf_cgroup_connect: the descriptor must be a cgroup directory's.
        if attr.pid_is_cgroup && !self.cgroups.contains_key(&pid) {
            return Err(errno(libc::EBADF));
        }
        let cgroup = attr.pid_is_cgroup.then(|| self.cgroups[&pid].clone());
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
        // perf_cgroup_connect: every member of a group counts in its leader's cgroup (a task
        // is in one cgroup at a time), or none.
        if let Some(lfd) = leader_fd
            && self.events[&lfd].cgroup != cgroup
        {
            return Err(errno(libc::EINVAL));
        }
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
        let on = if cpu < 0 { ctx_cpu } else { cpu as u32 };
        let td = self.topdown_for(&init, attr, on);
        let pair = self.pair_of(&init, on);
        // An event's overcount is its own on every CPU and in every group it is opened in:
        // the event's, not the descriptor's.
        let key = |parts: [u64; 4]| parts.iter().fold(0, |h, &p| crate::realism::splitmix(h ^ p));
        let noise_key = match init.source {
            Some(Source::X86 { pmu, config, .. }) if init.metric || config & 0xffff == TD_SLOTS => {
                key([1, pmu as u64, TD_SLOTS, 0])
            }
            Some(Source::X86 { pmu, config, config1 }) => key([2, pmu as u64, config, config1]),
            Some(Source::Arm { pmu, config }) => key([3, pmu as u64, config, 0]),
            Some(Source::Cache { pmu, config }) => key([4, pmu as u64, config, 0]),
            _ => self.next_id,
        };
        let core = matches!(
            init.source,
            Some(Source::X86 { .. } | Source::Arm { .. } | Source::Cache { .. })
        );
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
                core,
                td,
                pair,
                noise_key,
                cgroup,
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

    /// The descriptors an ioctl with or without PERF_IOC_FLAG_GROUP applies to.
    fn targets(&self, fd: i32, group: bool) -> Result<Vec<i32>, Errno> {
        let ev = self.events.get(&fd).filter(|e| !e.kernel).ok_or(errno(libc::EBADF))?;
        if !group {
            return Ok(vec![fd]);
        }
        let leader = &self.events[&ev.leader];
        Ok(std::iter::once(ev.leader).chain(leader.siblings.iter().copied()).collect())
    }

    pub(super) fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.sync();
        self.topdown_read(fd);
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

    pub(super) fn set_enabled(&mut self, fd: i32, group: bool, on: bool) -> Result<(), Errno> {
        self.sync();
        let leader = self.events.get(&fd).map_or(fd, |e| e.leader);
        self.on_leaders = None;
        if !on {
            // A disable stops the counters: `x86_pmu_stop` drains PERF_METRICS into the
            // counts first.
            for target in self.targets(fd, group)? {
                if self.events.get(&target).is_some_and(|e| e.state == SimState::Active) {
                    self.topdown_update(target, false);
                }
            }
        }
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

    pub(super) fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.sync();
        for target in self.targets(fd, group)? {
            if let Some(e) = self.events.get_mut(&target) {
                // perf_event_reset clears the count, not the times.
                e.reset_value = e.count as u64;
            }
        }
        Ok(())
    }

    pub(super) fn close(&mut self, fd: i32) {
        if self.cgroups.remove(&fd).is_some() {
            return;
        }
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
