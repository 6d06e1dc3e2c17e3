//! [`CounterSet`]: events opened in groups per task, per CPU or per thread (weak groups
//! split when refused, cgroups, descriptors checked against the limit), enabled, read and
//! closed; and a thread's own group ([`open_own_group`]).

use super::values::{
    CpuCount, RawCount, Snapshot, group_read_members, group_read_times, parse_group_read,
};
use super::{CounterError, CounterSpec, OpenFailure, Target};
use crate::sys::{Attr, Errno, READ_FORMAT, Syscalls, TYPE_SOFTWARE};

#[derive(Debug, Clone)]
struct Member {
    event: usize,
    fd: i32,
    id: u64,
}

/// One group on one CPU or thread: its leader descriptor and members (leader first).
#[derive(Debug, Clone)]
struct CpuGroup {
    cpu: i32,
    /// The thread of a [`Target::Threads`] group, or -1.
    thread: i32,
    members: Vec<Member>,
}

impl CpuGroup {
    fn leader_fd(&self) -> i32 {
        self.members[0].fd
    }
}

/// The set of counters opened for one plan: every group on every CPU, task or thread of its
/// target. Dropping closes every descriptor.
#[derive(Debug)]
pub struct CounterSet<S: Syscalls> {
    sys: S,
    specs: Vec<CounterSpec>,
    failures: Vec<Option<OpenFailure>>,
    groups: Vec<CpuGroup>,
    target: Target,
    broken_groups: usize,
    splits: Vec<Split>,
    /// Per event: opened with `exclude_kernel` after the kernel refused kernel-mode counting.
    user_only: Vec<bool>,
    /// Set when an open failed with `EMFILE`: the descriptors open at that moment.
    fd_exhausted: Option<usize>,
    /// [`Target::Threads`]: threads that had exited before their counters could be opened.
    vanished: Vec<i32>,
    /// Cgroup directory descriptors by name, opened once for `PERF_FLAG_PID_CGROUP`.
    cgroups: Vec<(String, i32)>,
    /// Task and thread counters follow the children their task creates (`inherit`).
    inherit: bool,
    /// tmetric's own rotation, once it has taken over from the kernel's.
    rotation: Option<Box<OwnRotation>>,
    /// Counting is switched off as a whole (`--control`'s `disable`, `-D -1`): tmetric's
    /// rotation keeps its turns but switches nothing on until [`CounterSet::enable`].
    paused: bool,
    /// Per-CPU counters are read from their own CPU ([`CounterSet::set_affinity`]).
    affinity: bool,
    /// Where reads go (boxed: a session holds a set inline).
    bufs: Box<ReadBuffers>,
}

/// A set's reads, kept between reads so that reading allocates nothing once the groups are
/// open.
#[derive(Debug, Default)]
struct ReadBuffers {
    /// Every group's last read, back to back.
    buf: Vec<u8>,
    /// Per group, where its read starts in `buf`, and the end of the last one.
    offsets: Vec<usize>,
    /// Per group, the bytes its last read returned (0: the kernel's EOF, a group in error).
    got: Vec<usize>,
    /// The CPUs of the per-CPU groups, ascending, each once.
    group_cpus: Vec<i32>,
    /// Those of them with [`MOVE_FOR`] groups or more: the thread moves there to read them.
    move_cpus: Vec<i32>,
}

/// The state of tmetric's own rotation ([`CounterSet::rotate`]).
#[derive(Debug, Clone)]
struct OwnRotation {
    /// Per entry of [`CounterSet::groups`], when rotated: the turns it counts in and its
    /// lane (its place in a turn: one lane per PMU, whose groups take turns apart).
    turn_of: Vec<Option<(Vec<bool>, usize)>>,
    /// The turn counting now.
    current: usize,
    /// Per (CPU, thread, lane): the enabled time its rotated groups accrued together before
    /// the takeover (all of them were enabled at once then), beyond the longest one.
    overlap: Vec<(Lane, u64)>,
}

/// The groups of one CPU or thread that take turns with each other: (CPU, thread, lane).
type Lane = (i32, i32, usize);

impl OwnRotation {
    /// Group `i`'s lane on its CPU or thread, when it is rotated.
    fn lane(&self, i: usize, group: &CpuGroup) -> Option<Lane> {
        let (_, lane) = self.turn_of.get(i)?.as_ref()?;
        Some((group.cpu, group.thread, *lane))
    }

    /// Whether group `i` counts in turn `turn` (`false` for groups not rotated).
    fn counts_in(&self, i: usize, turn: usize) -> bool {
        self.turn_of[i].as_ref().is_some_and(|(turns, _)| turns.get(turn) == Some(&true))
    }
}

/// How [`CounterSet::open_as`] opens its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opening {
    /// A task's counters follow the children it creates (`inherit`, perf's default); off
    /// for perf's `-i`, `--no-inherit`.
    pub inherit: bool,
    /// Per-CPU software events that the plan opens alone (no group, no filter) are opened
    /// as one group per CPU (and per cgroup: a group counts in one) instead, read with one
    /// `read()` per CPU rather than one per event. Nothing shows it: software events never multiplex, so each counts
    /// the whole time as it would alone. Only for runs where no event is switched on or
    /// off by itself (`--control`'s `enable NAME` on a group's leader would switch the
    /// whole group) and no group is rotated.
    pub software_together: bool,
}

/// Whether `spec` may share a group with other software events ([`Opening`]).
fn reads_together(spec: &CounterSpec) -> bool {
    spec.attr.type_ == TYPE_SOFTWARE && spec.filter.is_none()
}

/// A group the kernel refused as a whole and that was reopened in parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The group's events, leader first.
    pub events: Vec<usize>,
    /// The errno of the refusal.
    pub errno: Errno,
    /// Events kept together (the topdown events behind their `slots` leader).
    pub kept: Vec<usize>,
}

impl<S: Syscalls> CounterSet<S> {
    /// Opens `specs` for `target`, `groups` listing event indices per group (leader first);
    /// events in no group are opened alone. An event the kernel refuses is recorded as an
    /// [`OpenFailure`] and the rest go on. A group the kernel rejects as a whole (EINVAL
    /// on a sibling: it does not fit the counters) is reopened as single events, as perf does
    /// with weak groups.
    pub fn open(
        sys: S,
        specs: Vec<CounterSpec>,
        groups: &[Vec<usize>],
        target: Target,
    ) -> Result<CounterSet<S>, CounterError> {
        let sticky = vec![false; specs.len()];
        CounterSet::open_with(sys, specs, groups, &sticky, target)
    }

    /// [`CounterSet::open`], where a group the kernel refuses (EINVAL, EBADF or ENOSPC on a
    /// member) is split so that the `sticky` events stay together: topdown metric events
    /// cannot be counted without their `slots` leader, so splitting them off would lose them.
    /// [`CounterSet::splits`] says what was split and why.
    pub fn open_with(
        sys: S,
        specs: Vec<CounterSpec>,
        groups: &[Vec<usize>],
        sticky: &[bool],
        target: Target,
    ) -> Result<CounterSet<S>, CounterError> {
        CounterSet::open_inheriting(sys, specs, groups, sticky, target, true)
    }

    /// [`CounterSet::open_with`], saying whether a task's counters follow the children it
    /// creates (`inherit`, perf's default) or count the task alone (perf's `-i`,
    /// `--no-inherit`). Counters per CPU never inherit: they count every task there.
    pub fn open_inheriting(
        sys: S,
        specs: Vec<CounterSpec>,
        groups: &[Vec<usize>],
        sticky: &[bool],
        target: Target,
        inherit: bool,
    ) -> Result<CounterSet<S>, CounterError> {
        let how = Opening { inherit, software_together: false };
        CounterSet::open_as(sys, specs, groups, sticky, target, how)
    }

    /// [`CounterSet::open_with`], opened as `how` says.
    pub fn open_as(
        sys: S,
        specs: Vec<CounterSpec>,
        groups: &[Vec<usize>],
        sticky: &[bool],
        target: Target,
        how: Opening,
    ) -> Result<CounterSet<S>, CounterError> {
        let Opening { inherit, software_together } = how;
        let mut seen = vec![false; specs.len()];
        for (g, group) in groups.iter().enumerate() {
            for &event in group {
                if event >= specs.len() {
                    return Err(CounterError::Plan { group: g, event, why: "does not exist" });
                }
                if std::mem::replace(&mut seen[event], true) {
                    return Err(CounterError::Plan {
                        group: g,
                        event,
                        why: "is in an earlier group",
                    });
                }
            }
        }
        let together: Vec<usize> = if software_together && matches!(target, Target::Cpus(_)) {
            (0..specs.len()).filter(|&e| !seen[e] && reads_together(&specs[e])).collect()
        } else {
            Vec::new()
        };
        let mut all_groups: Vec<Vec<usize>> = groups.to_vec();
        all_groups.extend(
            (0..specs.len()).filter(|&e| !seen[e] && !together.contains(&e)).map(|e| vec![e]),
        );
        let mut counters = CounterSet {
            sys,
            failures: vec![None; specs.len()],
            user_only: vec![false; specs.len()],
            specs,
            groups: Vec::new(),
            target,
            broken_groups: 0,
            splits: Vec::new(),
            fd_exhausted: None,
            vanished: Vec::new(),
            cgroups: Vec::new(),
            inherit,
            rotation: None,
            paused: false,
            affinity: true,
            bufs: Box::default(),
        };
        counters.sys.raise_fd_limit();
        if together.len() > 1 {
            // One group per cgroup: the kernel refuses a member counting in another cgroup
            // than its leader (EINVAL, `perf_cgroup_connect`).
            let mut by_cgroup: Vec<Vec<usize>> = Vec::new();
            for &e in &together {
                let cgroup = &counters.specs[e].cgroup;
                match by_cgroup.iter_mut().find(|g| &counters.specs[g[0]].cgroup == cgroup) {
                    Some(g) => g.push(e),
                    None => by_cgroup.push(vec![e]),
                }
            }
            for events in by_cgroup {
                counters.open_together(&events);
                if let Some(opened) = counters.fd_exhausted {
                    return Err(counters.out_of_descriptors(opened));
                }
            }
        } else {
            all_groups.extend(together.iter().map(|&e| vec![e]));
        }
        for group in &all_groups {
            if let Err(errno) = counters.open_group(group, true) {
                counters.broken_groups += 1;
                let kept: Vec<usize> =
                    group.iter().copied().filter(|&e| sticky.get(e) == Some(&true)).collect();
                if kept.len() > 1 {
                    counters.open_group(&kept, false).ok();
                }
                for &event in group {
                    if kept.len() <= 1 || !kept.contains(&event) {
                        counters.open_group(&[event], false).ok();
                    }
                }
                let kept = if kept.len() > 1 { kept } else { Vec::new() };
                counters.splits.push(Split { events: group.clone(), errno, kept });
            }
            if let Some(opened) = counters.fd_exhausted {
                return Err(counters.out_of_descriptors(opened));
            }
        }
        counters.apply_filters()?;
        Ok(counters)
    }

    /// Descriptors ran out after `opened`: every later open would fail the same way, so
    /// everything is closed and the error says what the run needs instead of reporting each
    /// event as unsupported.
    fn out_of_descriptors(&mut self, opened: usize) -> CounterError {
        let needed = self.descriptors_needed();
        let groups = std::mem::take(&mut self.groups);
        self.close_groups(&groups);
        CounterError::FileLimit { opened, needed, suggest: (needed + 64).next_multiple_of(64) }
    }

    /// Sets each filtered event's filter on all its descriptors, once every counter is open
    /// (perf's `evlist__apply_filters`); the first refusal fails the open, as in perf.
    fn apply_filters(&mut self) -> Result<(), CounterError> {
        for group in &self.groups {
            for member in &group.members {
                let spec = &self.specs[member.event];
                let Some(filter) = &spec.filter else { continue };
                self.sys.set_filter(member.fd, filter).map_err(|errno| CounterError::Filter {
                    event: spec.name.clone(),
                    filter: filter.clone(),
                    errno,
                })?;
            }
        }
        Ok(())
    }

    /// Descriptors a full open takes: one per event per CPU (or thread) it is opened on.
    fn descriptors_needed(&self) -> usize {
        let places = self.places();
        self.specs
            .iter()
            .map(|spec| {
                places
                    .iter()
                    .filter(|&&(_, cpu)| {
                        cpu < 0 || spec.cpus.as_ref().is_none_or(|m| m.contains(&(cpu as u32)))
                    })
                    .count()
            })
            .sum()
    }

    /// Opens `event` through [`crate::sys::open_counter`]; an event that falls back to
    /// user mode keeps the exclusion in its spec, so its later opens (other CPUs, a group
    /// reopen) match.
    fn open_one(
        &mut self,
        event: usize,
        leader: bool,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<(i32, u64), Errno> {
        let attr = self.attr_for(event, leader);
        let opened = crate::sys::open_counter(&mut self.sys, &attr, pid, cpu, group_fd)?;
        if opened.user_only {
            let spec = &mut self.specs[event].attr;
            spec.exclude_kernel = true;
            spec.exclude_hv = true;
            self.user_only[event] = true;
        }
        Ok((opened.fd, opened.id))
    }

    /// Where each group is opened: `(pid, cpu)` pairs for `perf_event_open`.
    fn places(&self) -> Vec<(i32, i32)> {
        match &self.target {
            Target::Task { pid, .. } => vec![(*pid, -1)],
            Target::Cpus(cpus) => cpus.iter().map(|&c| (-1, c as i32)).collect(),
            Target::Threads(tids) => {
                tids.iter().filter(|t| !self.vanished.contains(t)).map(|&t| (t, -1)).collect()
            }
        }
    }

    fn attr_for(&self, event: usize, leader: bool) -> Attr {
        let mut attr = self.specs[event].attr.clone();
        attr.read_format = READ_FORMAT;
        match self.target {
            Target::Task { on_exec, .. } => {
                // Every member of a task group must have the same `inherit` (else EINVAL).
                attr.inherit = self.inherit;
                attr.disabled = leader;
                attr.enable_on_exec = leader && on_exec;
            }
            Target::Threads(_) => {
                attr.inherit = self.inherit;
                attr.disabled = leader;
            }
            Target::Cpus(_) => {
                attr.disabled = leader;
                attr.pid_is_cgroup = self.specs[event].cgroup.is_some();
            }
        }
        attr
    }

    /// The descriptor of `name`'s cgroup, opened the first time it is asked for.
    fn cgroup_fd(&mut self, name: &str) -> Result<i32, Errno> {
        if let Some((_, fd)) = self.cgroups.iter().find(|(n, _)| n == name) {
            return Ok(*fd);
        }
        let fd = self.sys.open_cgroup(name)?;
        self.cgroups.push((name.to_string(), fd));
        Ok(fd)
    }

    /// Opens one group on every CPU (or thread). Returns the errno, with nothing left open,
    /// when `weak` and the kernel rejected a sibling as not fitting the group (EINVAL, EBADF,
    /// ENOSPC).
    fn open_group(&mut self, events: &[usize], weak: bool) -> Result<(), Errno> {
        let threads = matches!(self.target, Target::Threads(_));
        let mut opened: Vec<CpuGroup> = Vec::new();
        let mut failures: Vec<(usize, OpenFailure)> = Vec::new();
        // A group counts in one cgroup (every member has its leader's): its descriptor is
        // the pid of each per-CPU open.
        let cgroup = match events.first().and_then(|&e| self.specs[e].cgroup.clone()) {
            Some(name) if matches!(self.target, Target::Cpus(_)) => match self.cgroup_fd(&name) {
                Ok(fd) => Some(fd),
                Err(errno) => {
                    for &event in events {
                        self.failures[event].get_or_insert(OpenFailure { errno, cpu: None });
                    }
                    return Ok(());
                }
            },
            _ => None,
        };
        'places: for (pid, cpu) in self.places() {
            let pid = cgroup.unwrap_or(pid);
            let thread = if threads { pid } else { -1 };
            let mut group: Option<CpuGroup> = None;
            for &event in events {
                let failed =
                    self.failures[event].is_some() || failures.iter().any(|f| f.0 == event);
                let outside_mask = cpu >= 0
                    && self.specs[event].cpus.as_ref().is_some_and(|m| !m.contains(&(cpu as u32)));
                if failed || outside_mask {
                    continue;
                }
                let leader_fd = group.as_ref().map_or(-1, CpuGroup::leader_fd);
                match self.open_one(event, group.is_none(), pid, cpu, leader_fd) {
                    Ok((fd, id)) => {
                        let member = Member { event, fd, id };
                        match group.as_mut() {
                            Some(g) => g.members.push(member),
                            None => group = Some(CpuGroup { cpu, thread, members: vec![member] }),
                        }
                    }
                    Err(errno) => {
                        if threads && errno.0 == libc::ESRCH {
                            // The thread exited after it was listed: it has nothing to count
                            // and no row, as perf drops it from its thread map.
                            if let Some(partial) = group.take() {
                                self.close_groups(&[partial]);
                            }
                            self.vanished.push(pid);
                            continue 'places;
                        }
                        if errno.0 == libc::EMFILE || errno.0 == libc::ENFILE {
                            opened.extend(group.take());
                            self.groups.extend(opened);
                            self.fd_exhausted = Some(self.descriptors());
                            return Ok(());
                        }
                        let group_refusal =
                            matches!(errno.0, libc::EINVAL | libc::EBADF | libc::ENOSPC);
                        if weak && group.is_some() && group_refusal {
                            opened.extend(group.take());
                            self.close_groups(&opened);
                            return Err(errno);
                        }
                        let cpu = (cpu >= 0).then_some(cpu as u32);
                        failures.push((event, OpenFailure { errno, cpu }));
                    }
                }
            }
            opened.extend(group);
        }
        for (event, failure) in failures {
            self.failures[event] = Some(failure);
        }
        self.groups.extend(opened);
        Ok(())
    }

    /// Opens `events`, each of which would otherwise be opened alone on every CPU, as one
    /// group per CPU, so that one read per CPU returns them all ([`Opening`]). An event the
    /// kernel refuses as a member is opened alone, as it would have been: what it counts,
    /// and what a refusal says, are what they were.
    fn open_together(&mut self, events: &[usize]) {
        // Every event here counts in the same cgroup, or in none (split by the caller).
        let cgroup = match events.first().and_then(|&e| self.specs[e].cgroup.clone()) {
            Some(name) => match self.cgroup_fd(&name) {
                Ok(fd) => Some(fd),
                Err(errno) => {
                    for &event in events {
                        self.failures[event].get_or_insert(OpenFailure { errno, cpu: None });
                    }
                    return;
                }
            },
            None => None,
        };
        for (pid, cpu) in self.places() {
            let pid = cgroup.unwrap_or(pid);
            let mut group: Option<CpuGroup> = None;
            let mut alone: Vec<CpuGroup> = Vec::new();
            for &event in events {
                let outside_mask = cpu >= 0
                    && self.specs[event].cpus.as_ref().is_some_and(|m| !m.contains(&(cpu as u32)));
                if self.failures[event].is_some() || outside_mask {
                    continue;
                }
                if let Some(leader_fd) = group.as_ref().map(CpuGroup::leader_fd)
                    && let Ok((fd, id)) = self.open_one(event, false, pid, cpu, leader_fd)
                {
                    if let Some(g) = group.as_mut() {
                        g.members.push(Member { event, fd, id });
                    }
                    continue;
                }
                match self.open_one(event, true, pid, cpu, -1) {
                    Ok((fd, id)) => {
                        let single =
                            CpuGroup { cpu, thread: -1, members: vec![Member { event, fd, id }] };
                        if group.is_none() {
                            group = Some(single);
                        } else {
                            alone.push(single);
                        }
                    }
                    Err(errno) if matches!(errno.0, libc::EMFILE | libc::ENFILE) => {
                        self.groups.extend(group);
                        self.groups.extend(alone);
                        self.fd_exhausted = Some(self.descriptors());
                        return;
                    }
                    Err(errno) => {
                        let cpu = (cpu >= 0).then_some(cpu as u32);
                        self.failures[event] = Some(OpenFailure { errno, cpu });
                    }
                }
            }
            self.groups.extend(group);
            self.groups.extend(alone);
        }
    }

    fn close_groups(&mut self, groups: &[CpuGroup]) {
        for group in groups {
            // Siblings first: closing a leader first would briefly promote them.
            for member in group.members.iter().rev() {
                self.sys.close(member.fd);
            }
        }
    }

    /// Why event `event` is not counted, if the kernel refused it.
    pub fn failure(&self, event: usize) -> Option<OpenFailure> {
        self.failures[event]
    }

    /// Whether event `event` counts user mode only because the kernel refused kernel mode
    /// (`perf_event_paranoid` 2 without privilege).
    pub fn user_only(&self, event: usize) -> bool {
        self.user_only[event]
    }

    /// The specs, in the order given (with `exclude_kernel` set on user-only events).
    pub fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// [`Target::Threads`]: the listed threads that had exited before their counters were
    /// opened (the kernel answered `ESRCH`); they are not counted and have no readings.
    pub fn vanished(&self) -> &[i32] {
        &self.vanished
    }

    /// Whether per-CPU counters are read CPU by CPU from that CPU (the default, as perf
    /// stat), or all from wherever the reading thread runs (perf's `--no-affinity`).
    pub fn set_affinity(&mut self, on: bool) {
        self.affinity = on;
    }

    /// Open descriptors (one per event per CPU or thread).
    pub fn descriptors(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum()
    }

    /// The groups as opened: per group and CPU, the CPU and the member events, leader first.
    pub fn layout(&self) -> Vec<(i32, Vec<usize>)> {
        self.groups.iter().map(|g| (g.cpu, g.members.iter().map(|m| m.event).collect())).collect()
    }

    /// How many groups the kernel rejected as a whole and were reopened as single events.
    pub fn broken_groups(&self) -> usize {
        self.broken_groups
    }

    /// The groups the kernel refused and how they were reopened.
    pub fn splits(&self) -> &[Split] {
        &self.splits
    }

    /// The system-call backend.
    pub fn syscalls(&mut self) -> &mut S {
        &mut self.sys
    }

    fn ioctl_all(&mut self, enable: bool) -> Result<(), CounterError> {
        for i in 0..self.groups.len() {
            let fd = self.groups[i].leader_fd();
            let result =
                if enable { self.sys.enable(fd, true) } else { self.sys.disable(fd, true) };
            result.map_err(|errno| CounterError::Ioctl {
                what: if enable { "enabling" } else { "disabling" },
                event: self.specs[self.groups[i].members[0].event].name.clone(),
                errno,
            })?;
        }
        Ok(())
    }

    /// Enables every group (per-CPU counting, or a task target without `on_exec`); under
    /// tmetric's own rotation, every group but those of the other turns.
    pub fn enable(&mut self) -> Result<(), CounterError> {
        self.ioctl_all(true)?;
        self.paused = false;
        let Some(rotation) = self.rotation.as_deref().cloned() else { return Ok(()) };
        if rotation.current == usize::MAX {
            return Ok(());
        }
        for i in 0..self.groups.len() {
            if rotation.turn_of[i].is_none() || rotation.counts_in(i, rotation.current) {
                continue;
            }
            let fd = self.groups[i].leader_fd();
            self.sys.disable(fd, true).map_err(|errno| CounterError::Ioctl {
                what: "disabling",
                event: self.specs[self.groups[i].members[0].event].name.clone(),
                errno,
            })?;
        }
        Ok(())
    }

    /// Disables every group; tmetric's own rotation switches none on until [`Self::enable`].
    pub fn disable(&mut self) -> Result<(), CounterError> {
        self.ioctl_all(false)?;
        self.paused = true;
        Ok(())
    }

    /// Says that the groups were opened disabled and stay so until [`Self::enable`] (`-D -1`),
    /// so tmetric's own rotation switches none of them on before.
    pub fn hold_disabled(&mut self) {
        self.paused = true;
    }

    /// tmetric's own rotation: makes turn `turn` of `turns` the one counting, disabling the
    /// other turns' groups. A turn lists the events that lead the groups counting in it, one
    /// per lane: the groups at place `k` of the turns (one PMU's) take turns with each other,
    /// and a group may count in several turns.
    /// The first call takes over from the kernel's rotation, under which every group was
    /// enabled at once. From then on a rotated group's enabled time, as [`CounterSet::read`]
    /// reports it, is its context's (CPU's or thread's): the sum over the turns, so that
    /// `count * enabled / running` extrapolates each group over the whole run as the kernel's
    /// rotation does. A group that is not a turn's leader keeps its own times.
    pub fn rotate(&mut self, turns: &[Vec<usize>], turn: usize) -> Result<(), CounterError> {
        if self.rotation.is_none() {
            let turn_of: Vec<Option<(Vec<bool>, usize)>> = self
                .groups
                .iter()
                .map(|g| {
                    let leader = g.members[0].event;
                    let lane = turns.iter().find_map(|t| t.iter().position(|&e| e == leader))?;
                    Some((turns.iter().map(|t| t.contains(&leader)).collect(), lane))
                })
                .collect();
            let mut rotation = OwnRotation { turn_of, current: usize::MAX, overlap: Vec::new() };
            let mut per_lane: Vec<(Lane, u64, u64)> = Vec::new();
            for i in 0..self.groups.len() {
                let Some(key) = rotation.lane(i, &self.groups[i]) else { continue };
                let enabled = self.group_times(i)?.0;
                match per_lane.iter_mut().find(|c| c.0 == key) {
                    Some(c) => {
                        c.1 += enabled;
                        c.2 = c.2.max(enabled);
                    }
                    None => per_lane.push((key, enabled, enabled)),
                }
            }
            rotation.overlap = per_lane.into_iter().map(|(k, sum, max)| (k, sum - max)).collect();
            self.rotation = Some(Box::new(rotation));
        }
        let Some(rotation) = self.rotation.as_mut() else { return Ok(()) };
        let previous = std::mem::replace(&mut rotation.current, turn);
        if self.paused {
            // Switched off as a whole: the turn is kept for [`Self::enable`] to resume.
            return Ok(());
        }
        let rotation = rotation.clone();
        // Off first, then on: two turns never count at once. At the takeover every group
        // outside the turn goes off; later those of the previous turn outside this one.
        for on in [false, true] {
            for i in 0..self.groups.len() {
                if rotation.turn_of[i].is_none() {
                    continue;
                }
                let now = rotation.counts_in(i, turn);
                let before = previous == usize::MAX || rotation.counts_in(i, previous);
                let change = if on { now && !before } else { !now && before };
                if !change {
                    continue;
                }
                let fd = self.groups[i].leader_fd();
                let result =
                    if on { self.sys.enable(fd, true) } else { self.sys.disable(fd, true) };
                result.map_err(|errno| CounterError::Ioctl {
                    what: if on { "enabling" } else { "disabling" },
                    event: self.specs[self.groups[i].members[0].event].name.clone(),
                    errno,
                })?;
            }
        }
        Ok(())
    }

    /// Whether tmetric's own rotation has taken over.
    pub fn rotating(&self) -> bool {
        self.rotation.is_some()
    }

    /// The enabled and running times of group `i`, from one read.
    fn group_times(&mut self, i: usize) -> Result<(u64, u64), CounterError> {
        let group = &self.groups[i];
        let leader = &self.specs[group.members[0].event].name;
        let mut buf = vec![0u8; 8 * (3 + 2 * group.members.len())];
        let got = read_group_retrying(&mut self.sys, group.leader_fd(), &mut buf)
            .map_err(|errno| CounterError::Read { event: leader.clone(), errno })?;
        if got == 0 {
            return Ok((0, 0));
        }
        let parsed = parse_group_read(&buf[..got], group.members.len())
            .map_err(|problem| CounterError::Layout { event: leader.clone(), problem })?;
        Ok((parsed.enabled, parsed.running))
    }

    /// perf's control command `enable NAME` / `disable NAME`: switches every descriptor of
    /// the events called `name`, each alone (not its group), as perf's
    /// `evlist__enable_evsel`. Returns how many events have that name (0: none, nothing done).
    pub fn switch_named(&mut self, name: &str, enable: bool) -> Result<usize, CounterError> {
        let events: Vec<usize> = (0..self.specs.len())
            .filter(|&e| self.specs[e].name == name && self.failures[e].is_none())
            .collect();
        for group in 0..self.groups.len() {
            for m in 0..self.groups[group].members.len() {
                let member = &self.groups[group].members[m];
                if !events.contains(&member.event) {
                    continue;
                }
                let (fd, event) = (member.fd, member.event);
                let result =
                    if enable { self.sys.enable(fd, false) } else { self.sys.disable(fd, false) };
                result.map_err(|errno| CounterError::Ioctl {
                    what: if enable { "enabling" } else { "disabling" },
                    event: self.specs[event].name.clone(),
                    errno,
                })?;
            }
        }
        Ok(events.len())
    }

    /// Reads every group once.
    pub fn read(&mut self) -> Result<Snapshot, CounterError> {
        let mut snapshot = Snapshot::default();
        self.read_into(&mut snapshot)?;
        Ok(snapshot)
    }

    /// Reads every group once into `out`, reusing its vectors: once `out` has had one read,
    /// later reads allocate nothing (an exporter reads many sets every interval).
    pub fn read_into(&mut self, out: &mut Snapshot) -> Result<(), CounterError> {
        self.read_raw()?;
        self.finish_read(out)
    }

    /// Reads the groups on CPU `cpu` only, from wherever the calling thread runs, keeping the
    /// bytes for [`CounterSet::finish_read`]. A reader of several sets moves to each CPU once
    /// and reads every set's groups there, rather than each set moving on its own.
    pub fn read_cpu(&mut self, cpu: i32) -> Result<(), CounterError> {
        self.size_buffers();
        self.fetch(|g| g.cpu == cpu)
    }

    /// Reads the groups that are not per CPU (task and thread counters), kept as
    /// [`CounterSet::read_cpu`] keeps them.
    pub fn read_tasks(&mut self) -> Result<(), CounterError> {
        self.size_buffers();
        self.fetch(|g| g.cpu < 0)
    }

    /// How many of the groups count on CPU `cpu`: what a reader of several sets weighs
    /// against [`MOVE_FOR`] before moving there.
    pub fn groups_on(&self, cpu: i32) -> usize {
        self.groups.iter().filter(|g| g.cpu == cpu).count()
    }

    /// The CPUs of the per-CPU groups, ascending.
    pub fn group_cpus(&mut self) -> &[i32] {
        self.size_buffers();
        &self.bufs.group_cpus
    }

    /// Turns the groups' last reads ([`CounterSet::read_cpu`], [`CounterSet::read_tasks`])
    /// into `out`, reusing its vectors.
    pub fn finish_read(&mut self, out: &mut Snapshot) -> Result<(), CounterError> {
        self.size_buffers();
        self.assemble(out)?;
        let Some(rotation) = &self.rotation else { return Ok(()) };
        let snapshot = out;
        // A rotated group's enabled time is its lane's: the sum over the lane's groups, less
        // what they accrued together before the takeover.
        let mut lanes: Vec<(Lane, u64)> = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            let Some(key) = rotation.lane(i, g) else { continue };
            let leader = g.members[0].event;
            let enabled: u64 = snapshot.events[leader]
                .iter()
                .flatten()
                .filter(|c| (c.cpu, c.thread) == (g.cpu, g.thread))
                .map(|c| c.raw.enabled)
                .sum();
            match lanes.iter_mut().find(|x| x.0 == key) {
                Some(x) => x.1 += enabled,
                None => lanes.push((key, enabled)),
            }
        }
        for (key, total) in &mut lanes {
            let overlap = rotation.overlap.iter().find(|o| o.0 == *key).map_or(0, |o| o.1);
            *total = total.saturating_sub(overlap);
        }
        for (i, g) in self.groups.iter().enumerate() {
            let Some(key) = rotation.lane(i, g) else { continue };
            let Some(&(_, total)) = lanes.iter().find(|x| x.0 == key) else { continue };
            for m in &g.members {
                for c in snapshot.events[m.event].iter_mut().flatten() {
                    if (c.cpu, c.thread) == (g.cpu, g.thread) {
                        c.raw.enabled = c.raw.enabled.max(total);
                    }
                }
            }
        }
        Ok(())
    }

    /// Sizes the read buffers for the groups open, once: groups are only added while the set
    /// opens, each with its members complete.
    fn size_buffers(&mut self) {
        if self.bufs.offsets.len() == self.groups.len() + 1 {
            return;
        }
        let total: usize = self.groups.iter().map(|g| 8 * (3 + 2 * g.members.len())).sum();
        self.bufs.offsets.clear();
        self.bufs.offsets.push(0);
        let mut at = 0;
        for g in &self.groups {
            at += 8 * (3 + 2 * g.members.len());
            self.bufs.offsets.push(at);
        }
        self.bufs.buf = vec![0; total];
        self.bufs.got = vec![0; self.groups.len()];
        self.bufs.group_cpus = self.groups.iter().map(|g| g.cpu).filter(|&c| c >= 0).collect();
        self.bufs.group_cpus.sort_unstable();
        self.bufs.group_cpus.dedup();
        let groups = &self.groups;
        self.bufs.move_cpus = self
            .bufs
            .group_cpus
            .iter()
            .copied()
            .filter(|&cpu| groups.iter().filter(|g| g.cpu == cpu).count() >= MOVE_FOR)
            .collect();
    }

    /// Reads the groups `which` picks into their places in the buffer.
    fn fetch(&mut self, which: impl Fn(&CpuGroup) -> bool) -> Result<(), CounterError> {
        for (i, group) in self.groups.iter().enumerate() {
            if !which(group) {
                continue;
            }
            let place = &mut self.bufs.buf[self.bufs.offsets[i]..self.bufs.offsets[i + 1]];
            match read_group_retrying(&mut self.sys, group.leader_fd(), place) {
                Ok(got) => self.bufs.got[i] = got,
                Err(errno) => {
                    let event = self.specs[group.members[0].event].name.clone();
                    return Err(CounterError::Read { event, errno });
                }
            }
        }
        Ok(())
    }

    /// The groups' last reads as a snapshot, in `out`'s vectors.
    fn assemble(&self, out: &mut Snapshot) -> Result<(), CounterError> {
        out.events.resize_with(self.failures.len(), || None);
        for (slot, failure) in out.events.iter_mut().zip(&self.failures) {
            match (failure, slot) {
                (None, Some(cpus)) => cpus.clear(),
                (None, slot) => *slot = Some(Vec::new()),
                (Some(_), slot) => *slot = None,
            }
        }
        for (i, group) in self.groups.iter().enumerate() {
            let got = self.bufs.got[i];
            if got == 0 {
                // A pinned group that could not be placed is in error state and reads EOF:
                // it counted nothing.
                for member in &group.members {
                    if let Some(Some(cpus)) = out.events.get_mut(member.event) {
                        let raw = RawCount::default();
                        cpus.push(CpuCount { cpu: group.cpu, thread: group.thread, raw });
                    }
                }
                continue;
            }
            let bytes = &self.bufs.buf[self.bufs.offsets[i]..self.bufs.offsets[i] + got];
            let leader = || self.specs[group.members[0].event].name.clone();
            let (enabled, running) = group_read_times(bytes, group.members.len())
                .map_err(|problem| CounterError::Layout { event: leader(), problem })?;
            for (value, id) in group_read_members(bytes) {
                let Some(member) = group.members.iter().find(|m| m.id == id) else {
                    return Err(CounterError::Layout {
                        event: leader(),
                        problem: format!("the kernel returned id {id}, which no member has"),
                    });
                };
                if let Some(Some(cpus)) = out.events.get_mut(member.event) {
                    let raw = RawCount { value, enabled, running };
                    cpus.push(CpuCount { cpu: group.cpu, thread: group.thread, raw });
                }
            }
        }
        Ok(())
    }

    /// Reads every group into the buffer. A CPU with [`MOVE_FOR`] groups or more is read
    /// from that CPU, where the backend can move the thread there, as perf stat does: a read
    /// of a counter active on another CPU costs an interrupt of that CPU and a wait for it,
    /// per group. Fewer groups are read from where the thread is: a move costs more than
    /// those reads' interrupts.
    fn read_raw(&mut self) -> Result<(), CounterError> {
        self.size_buffers();
        let here = self.sys.current_cpu().and_then(|c| i32::try_from(c).ok());
        let worth = |cpu: i32, moves: &[i32]| Some(cpu) != here && moves.contains(&cpu);
        let moving = self.affinity && self.bufs.move_cpus.iter().any(|&c| Some(c) != here);
        if !moving {
            return self.fetch(|_| true);
        }
        // What needs no move first: the CPU the thread is on, and CPUs with few groups.
        let moves = std::mem::take(&mut self.bufs.move_cpus);
        let mut result = self.fetch(|g| g.cpu < 0 || !worth(g.cpu, &moves));
        let mut moved = false;
        if result.is_ok() {
            for &cpu in &moves {
                if Some(cpu) == here {
                    continue;
                }
                self.sys.move_to_cpu(cpu as u32);
                moved = true;
                result = self.fetch(|g| g.cpu == cpu);
                if result.is_err() {
                    break;
                }
            }
        }
        self.bufs.move_cpus = moves;
        if moved {
            self.sys.restore_cpus();
        }
        result
    }
}

/// The groups on one CPU for which the reading thread moves there ([`CounterSet::read`]).
/// Measured in a 2-CPU KVM guest, CPU time per 10 ms wake-up that reads both CPUs' groups
/// (24 us with no read): with a move there and back 92 us for one group a CPU, 101 us for
/// three; without a move (the other CPU interrupted for each read) 58 us for one group,
/// 85 us for three. A move costs about what three or four reads from here cost.
pub const MOVE_FOR: usize = 4;

impl<S: Syscalls> Drop for CounterSet<S> {
    fn drop(&mut self) {
        let groups = std::mem::take(&mut self.groups);
        self.close_groups(&groups);
        for (_, fd) in std::mem::take(&mut self.cgroups) {
            self.sys.close(fd);
        }
    }
}

/// How often a group read that the kernel refused with ECHILD is retried.
const ECHILD_RETRIES: u32 = 200;

/// `read()` of a group leader, retried while the kernel answers ECHILD. With `inherit`, a
/// group read sums the workload's child copies of the group, and while an exiting child's
/// copy is being torn down (not atomically across its members) the kernel finds the copy's
/// shape differs from the parent's and refuses the read with ECHILD rather than sum it. The
/// state is transient, so the read is retried, with a short sleep, a bounded number of times.
fn read_group_retrying<S: Syscalls>(sys: &mut S, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut tries = 0;
    loop {
        match sys.read(fd, buf) {
            Err(errno) if errno.0 == libc::ECHILD && tries < ECHILD_RETRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            other => return other,
        }
    }
}

/// Opens a group the calling thread counts on itself (`pid` 0, any CPU): members read as one
/// group ([`READ_FORMAT`]), no inheritance, the leader disabled until enabled and, when
/// `pinned`, pinned (counted the whole time or put in error state, never multiplexed). All or
/// nothing: on a refusal every member opened is closed again and the refused member's index
/// is returned with the errno.
pub fn open_own_group<S: Syscalls + ?Sized>(
    sys: &mut S,
    attrs: &[Attr],
    pinned: bool,
) -> Result<Vec<crate::sys::Opened>, (usize, Errno)> {
    let mut opened: Vec<crate::sys::Opened> = Vec::new();
    for (i, attr) in attrs.iter().enumerate() {
        let mut attr = attr.clone();
        attr.read_format = READ_FORMAT;
        attr.disabled = i == 0;
        attr.pinned = i == 0 && pinned;
        attr.inherit = false;
        attr.enable_on_exec = false;
        let leader = opened.first().map_or(-1, |o| o.fd);
        match crate::sys::open_counter(sys, &attr, 0, -1, leader) {
            Ok(o) => opened.push(o),
            Err(errno) => {
                // Siblings first: closing a leader first would briefly promote them.
                for o in opened.iter().rev() {
                    sys.close(o.fd);
                }
                return Err((i, errno));
            }
        }
    }
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend whose group read answers ECHILD `echild` times before it succeeds.
    struct Teardown {
        echild: u32,
        reads: u32,
    }

    impl Syscalls for Teardown {
        fn perf_event_open(&mut self, _: &Attr, _: i32, _: i32, _: i32) -> Result<i32, Errno> {
            Ok(3)
        }
        fn read(&mut self, _: i32, buf: &mut [u8]) -> Result<usize, Errno> {
            self.reads += 1;
            if self.echild > 0 {
                self.echild -= 1;
                return Err(Errno(libc::ECHILD));
            }
            Ok(buf.len())
        }
        fn enable(&mut self, _: i32, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn disable(&mut self, _: i32, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn reset(&mut self, _: i32, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn event_id(&mut self, _: i32) -> Result<u64, Errno> {
            Ok(1)
        }
        fn close(&mut self, _: i32) {}
    }

    /// Counts the calling thread's allocations (the test binary's allocator).
    struct CountingAlloc;

    thread_local! {
        static ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    // SAFETY: every call is passed on to the system allocator unchanged; the count is a
    // thread-local `Cell` with a const initializer, which never allocates.
    unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
            unsafe { std::alloc::System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: CountingAlloc = CountingAlloc;

    /// Per-CPU groups of two: each leader's read gives `round * 100 + id` per member.
    #[derive(Default)]
    struct Groups {
        next: i32,
        /// Per descriptor (from 3), its group leader.
        leaders: Vec<i32>,
        round: u64,
    }

    impl Syscalls for Groups {
        fn perf_event_open(&mut self, _: &Attr, _: i32, _: i32, group: i32) -> Result<i32, Errno> {
            let fd = 3 + self.next;
            self.next += 1;
            self.leaders.push(if group < 0 { fd } else { group });
            Ok(fd)
        }
        fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
            let mut words = [0u64; 7];
            words[0] = 2;
            words[1] = 1000 * self.round;
            words[2] = 1000 * self.round;
            let mut n = 3;
            for (i, &leader) in self.leaders.iter().enumerate() {
                if leader == fd {
                    let id = 3 + i as u64;
                    words[n] = self.round * 100 + id;
                    words[n + 1] = id;
                    n += 2;
                }
            }
            for (chunk, w) in buf.chunks_mut(8).zip(&words[..n]) {
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            Ok(8 * n)
        }
        fn enable(&mut self, _: i32, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn disable(&mut self, _: i32, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn reset(&mut self, _: i32, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
            Ok(fd as u64)
        }
        fn close(&mut self, _: i32) {}
    }

    #[test]
    fn reading_again_into_a_snapshot_allocates_nothing_and_reads_every_cpu() {
        let spec = |name: &str| CounterSpec {
            name: name.into(),
            attr: Attr::default(),
            cpus: None,
            cgroup: None,
            filter: None,
        };
        let specs = vec![spec("a"), spec("b")];
        let mut set =
            CounterSet::open(Groups::default(), specs, &[vec![0, 1]], Target::Cpus(vec![0, 1]))
                .unwrap();
        let mut snapshot = Snapshot::default();
        set.sys.round = 1;
        set.read_into(&mut snapshot).unwrap();
        set.sys.round = 2;
        let before = ALLOCATIONS.with(std::cell::Cell::get);
        set.read_into(&mut snapshot).unwrap();
        // The CPU by CPU path a reader of several sets takes, too.
        for cpu in [0, 1] {
            set.read_cpu(cpu).unwrap();
        }
        set.finish_read(&mut snapshot).unwrap();
        assert_eq!(ALLOCATIONS.with(std::cell::Cell::get), before, "a read allocated");
        // Descriptors 3 and 4 are the group on CPU 0, 5 and 6 on CPU 1.
        let counts = |e: usize| -> Vec<(i32, u64, u64)> {
            let cpus = snapshot.events[e].as_ref().unwrap();
            cpus.iter().map(|c| (c.cpu, c.raw.value, c.raw.enabled)).collect()
        };
        assert_eq!(counts(0), vec![(0, 203, 2000), (1, 205, 2000)]);
        assert_eq!(counts(1), vec![(0, 204, 2000), (1, 206, 2000)]);
        assert_eq!(set.read().unwrap(), snapshot);
    }

    #[test]
    fn a_group_read_refused_during_a_child_teardown_is_retried_a_bounded_number_of_times() {
        let mut buf = [0u8; 24];
        let mut passing = Teardown { echild: 3, reads: 0 };
        assert_eq!(read_group_retrying(&mut passing, 3, &mut buf), Ok(24));
        assert_eq!(passing.reads, 4);
        let mut stuck = Teardown { echild: u32::MAX, reads: 0 };
        assert_eq!(read_group_retrying(&mut stuck, 3, &mut buf), Err(Errno(libc::ECHILD)));
        assert_eq!(stuck.reads, ECHILD_RETRIES + 1);
    }
}
