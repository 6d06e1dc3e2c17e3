//! [`FakeSyscalls`]: a programmable stand-in for the kernel's perf interface. Tests and PMU
//! simulations tell it which events fail to open (with which errno) and which counts, enabled
//! and running times each read returns; it builds the exact `read()` layouts the kernel would
//! and records every call for assertions.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sys::{Attr, Errno, FORMAT_GROUP, FORMAT_ID, FORMAT_TOTAL_TIME_ENABLED};
use crate::sys::{FORMAT_TOTAL_TIME_RUNNING, Syscalls};

/// What one counter reports on one read: its count and the group's enabled/running times
/// (the kernel reports the leader's times for the whole group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reading {
    /// The raw count.
    pub value: u64,
    /// Nanoseconds enabled.
    pub enabled: u64,
    /// Nanoseconds actually on a counter.
    pub running: u64,
}

impl Reading {
    /// A reading.
    pub fn new(value: u64, enabled: u64, running: u64) -> Reading {
        Reading { value, enabled, running }
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `perf_event_open` and its result.
    Open {
        /// The attributes.
        attr: Attr,
        /// `pid`.
        pid: i32,
        /// `cpu`.
        cpu: i32,
        /// `group_fd`.
        group_fd: i32,
        /// The descriptor or the errno.
        result: Result<i32, Errno>,
    },
    /// `PERF_EVENT_IOC_SET_FILTER`.
    SetFilter {
        /// The descriptor.
        fd: i32,
        /// The filter.
        filter: String,
    },
    /// `PERF_EVENT_IOC_ENABLE`.
    Enable {
        /// The descriptor.
        fd: i32,
        /// `PERF_IOC_FLAG_GROUP`.
        group: bool,
    },
    /// `PERF_EVENT_IOC_DISABLE`.
    Disable {
        /// The descriptor.
        fd: i32,
        /// `PERF_IOC_FLAG_GROUP`.
        group: bool,
    },
    /// `PERF_EVENT_IOC_RESET`.
    Reset {
        /// The descriptor.
        fd: i32,
        /// `PERF_IOC_FLAG_GROUP`.
        group: bool,
    },
    /// `read`.
    Read {
        /// The descriptor.
        fd: i32,
    },
    /// `close`.
    Close {
        /// The descriptor.
        fd: i32,
    },
}

/// Which opens a rule applies to: a `(type, config)` pair, on every CPU or on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Match {
    type_: u32,
    config: u64,
    cpu: Option<i32>,
}

impl Match {
    fn applies(&self, attr: &Attr, cpu: i32) -> bool {
        self.type_ == attr.type_ && self.config == attr.config && self.cpu.is_none_or(|c| c == cpu)
    }
}

#[derive(Debug, Clone)]
struct Open {
    attr: Attr,
    /// The leader's descriptor; its own for a leader.
    leader: i32,
    id: u64,
    readings: Vec<Reading>,
}

#[derive(Debug, Default)]
struct State {
    next_fd: i32,
    next_id: u64,
    failures: Vec<(Match, Errno)>,
    programs: Vec<(Match, Vec<Reading>)>,
    max_group: Option<usize>,
    /// `perf_event_paranoid` for an unprivileged caller; `None`: privileged (no checks).
    paranoid: Option<i32>,
    /// How many descriptors may be open at once before `EMFILE`.
    fd_limit: Option<usize>,
    open: BTreeMap<i32, Open>,
    /// Per leader descriptor: how many group reads happened, which picks the reading.
    reads: BTreeMap<i32, usize>,
    calls: Vec<Call>,
}

/// The fake kernel. Clones share one state, so a test keeps a clone to program and inspect
/// while the counters own another.
#[derive(Debug, Clone, Default)]
pub struct FakeSyscalls {
    state: Arc<Mutex<State>>,
}

impl FakeSyscalls {
    /// A kernel where every open succeeds and every counter reads zero, never running.
    pub fn new() -> FakeSyscalls {
        let fake = FakeSyscalls::default();
        fake.lock().next_fd = 100;
        fake.lock().next_id = 1000;
        fake
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the state from the others.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every open of `(type_, config)` fails with `errno`.
    pub fn fail(&self, type_: u32, config: u64, errno: i32) {
        self.lock().failures.push((Match { type_, config, cpu: None }, Errno(errno)));
    }

    /// Opens of `(type_, config)` on `cpu` fail with `errno`.
    pub fn fail_on_cpu(&self, type_: u32, config: u64, cpu: i32, errno: i32) {
        self.lock().failures.push((Match { type_, config, cpu: Some(cpu) }, Errno(errno)));
    }

    /// Counters of `(type_, config)` return `readings[k]` on the group's `k`-th read (the
    /// last one again after the end). Times come from the group leader's reading.
    pub fn program(&self, type_: u32, config: u64, readings: &[Reading]) {
        self.lock().programs.push((Match { type_, config, cpu: None }, readings.to_vec()));
    }

    /// As [`FakeSyscalls::program`], for the counter on one CPU.
    pub fn program_cpu(&self, type_: u32, config: u64, cpu: i32, readings: &[Reading]) {
        self.lock().programs.push((Match { type_, config, cpu: Some(cpu) }, readings.to_vec()));
    }

    /// Groups larger than `members` fail to open with EINVAL, as a PMU with that many
    /// counters does when the kernel validates a group.
    pub fn max_group_size(&self, members: usize) {
        self.lock().max_group = Some(members);
    }

    /// Behave as the kernel does for a caller without `CAP_PERFMON`/`CAP_SYS_ADMIN` at
    /// `perf_event_paranoid` = `level` (kernel/events/core.c, 6.12): above 2 (the Debian
    /// setting) every open is `EACCES`; above 1 an event that counts kernel mode
    /// (`exclude_kernel` clear) is `EACCES`; above 0 a CPU-wide event (`pid` -1) is `EACCES`.
    pub fn unprivileged(&self, level: i32) {
        self.lock().paranoid = Some(level);
    }

    /// Opens beyond `open` descriptors fail with `EMFILE`, as under `ulimit -n`.
    pub fn fd_limit(&self, open: usize) {
        self.lock().fd_limit = Some(open);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Descriptors opened and not yet closed.
    pub fn open_count(&self) -> usize {
        self.lock().open.len()
    }
}

fn push_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_ne_bytes());
}

impl Syscalls for FakeSyscalls {
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno> {
        let mut state = self.lock();
        let failure = state.failures.iter().rev().find(|(m, _)| m.applies(attr, cpu)).map(|f| f.1);
        // The kernel's order: the paranoid-any check, the kernel-mode check, then (when the
        // context is looked up) the CPU-wide check; descriptors are allocated after.
        let refused = state.paranoid.is_some_and(|level| {
            level > 2 || (level > 1 && !attr.exclude_kernel) || (level > 0 && pid == -1)
        });
        // Permission comes first, as in the kernel: the syscall checks it before the PMU
        // sees the event (where programmed failures stand for the PMU's refusals).
        let result = if refused {
            Err(Errno(libc::EACCES))
        } else if let Some(errno) = failure {
            Err(errno)
        } else if state.fd_limit.is_some_and(|limit| state.open.len() >= limit) {
            Err(Errno(libc::EMFILE))
        } else if group_fd >= 0 && !state.open.contains_key(&group_fd) {
            Err(Errno(libc::EBADF))
        } else if group_fd >= 0
            && state.max_group.is_some_and(|max| {
                state.open.values().filter(|o| o.leader == group_fd).count() + 1 > max
            })
        {
            Err(Errno(libc::EINVAL))
        } else {
            let fd = state.next_fd;
            state.next_fd += 1;
            let id = state.next_id;
            state.next_id += 1;
            let readings = state
                .programs
                .iter()
                .rev()
                .find(|(m, _)| m.applies(attr, cpu))
                .map(|p| p.1.clone())
                .unwrap_or_default();
            let leader = if group_fd >= 0 { group_fd } else { fd };
            state.open.insert(fd, Open { attr: attr.clone(), leader, id, readings });
            Ok(fd)
        };
        state.calls.push(Call::Open { attr: attr.clone(), pid, cpu, group_fd, result });
        result
    }

    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut state = self.lock();
        state.calls.push(Call::Read { fd });
        let Some(me) = state.open.get(&fd).cloned() else {
            return Err(Errno(libc::EBADF));
        };
        let leader = me.leader;
        let round = *state.reads.get(&leader).unwrap_or(&0);
        let pick = |o: &Open| -> Reading {
            o.readings.get(round).or(o.readings.last()).copied().unwrap_or_default()
        };
        let format = me.attr.read_format;
        let mut out = Vec::new();
        if format & FORMAT_GROUP != 0 {
            let members: Vec<&Open> = state.open.values().filter(|o| o.leader == leader).collect();
            let times = state.open.get(&leader).map(pick).unwrap_or_default();
            push_u64(&mut out, members.len() as u64);
            if format & FORMAT_TOTAL_TIME_ENABLED != 0 {
                push_u64(&mut out, times.enabled);
            }
            if format & FORMAT_TOTAL_TIME_RUNNING != 0 {
                push_u64(&mut out, times.running);
            }
            for member in members {
                push_u64(&mut out, pick(member).value);
                if format & FORMAT_ID != 0 {
                    push_u64(&mut out, member.id);
                }
            }
        } else {
            let reading = pick(&me);
            push_u64(&mut out, reading.value);
            if format & FORMAT_TOTAL_TIME_ENABLED != 0 {
                push_u64(&mut out, reading.enabled);
            }
            if format & FORMAT_TOTAL_TIME_RUNNING != 0 {
                push_u64(&mut out, reading.running);
            }
            if format & FORMAT_ID != 0 {
                push_u64(&mut out, me.id);
            }
        }
        if buf.len() < out.len() {
            return Err(Errno(libc::ENOSPC));
        }
        buf[..out.len()].copy_from_slice(&out);
        *state.reads.entry(leader).or_default() += 1;
        Ok(out.len())
    }

    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        let mut state = self.lock();
        state.calls.push(Call::Enable { fd, group });
        if state.open.contains_key(&fd) { Ok(()) } else { Err(Errno(libc::EBADF)) }
    }

    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        let mut state = self.lock();
        state.calls.push(Call::Disable { fd, group });
        if state.open.contains_key(&fd) { Ok(()) } else { Err(Errno(libc::EBADF)) }
    }

    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        let mut state = self.lock();
        state.calls.push(Call::Reset { fd, group });
        if state.open.contains_key(&fd) { Ok(()) } else { Err(Errno(libc::EBADF)) }
    }

    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        self.lock().open.get(&fd).map(|o| o.id).ok_or(Errno(libc::EBADF))
    }

    fn set_filter(&mut self, fd: i32, filter: &str) -> Result<(), Errno> {
        let mut state = self.lock();
        state.calls.push(Call::SetFilter { fd, filter: filter.to_string() });
        match state.open.get(&fd) {
            None => Err(Errno(libc::EBADF)),
            // The kernel's `perf_event_set_filter` takes tracepoint filters, and address
            // filters on PMUs that have them (none here); anything else is EINVAL.
            Some(o) if o.attr.type_ != crate::sys::TYPE_TRACEPOINT => Err(Errno(libc::EINVAL)),
            Some(_) => Ok(()),
        }
    }

    fn close(&mut self, fd: i32) {
        let mut state = self.lock();
        state.calls.push(Call::Close { fd });
        state.open.remove(&fd);
        // Closing a leader leaves the siblings as their own groups, as the kernel does.
        let orphans: Vec<i32> =
            state.open.iter().filter(|(_, o)| o.leader == fd).map(|(&k, _)| k).collect();
        for orphan in orphans {
            if let Some(o) = state.open.get_mut(&orphan) {
                o.leader = orphan;
            }
        }
    }
}
