//! A session on the calling thread's own counter groups (the region API's): each group opened
//! with the runtime's `open_own_group` (pid 0, any CPU, not inherited, not enabled at exec, a
//! hardware group pinned), all or nothing and never split, and read with one `read()` per
//! group.

use tmetric_runtime::counter::{CounterError, parse_group_read};
use tmetric_runtime::event::EventKind;
use tmetric_runtime::{CpuCount, Environment, RawCount, Snapshot, Syscalls};

use super::SessionError;
use crate::plan::{Plan, Warning};

/// One group the calling thread counts on itself, as opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnGroup {
    /// The plan's specs, leader first.
    pub specs: Vec<usize>,
    /// Their descriptors, in the same order.
    pub fds: Vec<i32>,
    /// Their kernel ids (`PERF_EVENT_IOC_ID`), which a group read pairs values with.
    pub ids: Vec<u64>,
    /// Whether the group is pinned (it holds a hardware event).
    pub pinned: bool,
}

/// Whether an event of `kind` takes one of the core PMU's counters (or an uncore's): such a
/// group is pinned, so it is counted the whole time or put in error state, never multiplexed.
/// Software events, tracepoints and `msr` always count.
pub fn counts_on_hardware(kind: &EventKind) -> bool {
    match kind {
        EventKind::Software | EventKind::Tracepoint => false,
        EventKind::Hardware => true,
        // The kernel's software-context PMUs, also when an event names them as a PMU
        // (`software/cpu-clock/`, as perf 7.x's common metrics write their events).
        EventKind::Pmu(p) => !matches!(
            p.as_str(),
            "msr" | "software" | "tracepoint" | "cpu_clock" | "task_clock" | "kprobe" | "uprobe"
        ),
    }
}

/// The open groups and the backend that owns their descriptors.
pub(crate) struct OwnGroups<S: Syscalls> {
    pub(crate) sys: S,
    pub(crate) groups: Vec<OwnGroup>,
    /// Per spec: counted in user mode only because the kernel refused kernel mode.
    pub(crate) user_only: Vec<bool>,
}

impl<S: Syscalls> OwnGroups<S> {
    /// Opens `groups` of `plan`'s specs. The first refusal closes every group opened and
    /// is returned as [`SessionError::Refused`], explained for its event by `env`. A user-only
    /// fallback becomes the plan's [`Warning::UserOnly`].
    pub(crate) fn open(
        sys: S,
        plan: &mut Plan,
        groups: Vec<Vec<usize>>,
        env: &Environment,
    ) -> Result<Self, SessionError> {
        let mut own =
            OwnGroups { sys, groups: Vec::new(), user_only: vec![false; plan.specs.len()] };
        for specs in groups {
            if let Some(&bad) = specs.iter().find(|&&s| s >= plan.specs.len()) {
                return Err(SessionError::Open(CounterError::Plan {
                    group: own.groups.len(),
                    event: bad,
                    why: "does not exist",
                }));
            }
            let pinned = specs.iter().any(|&s| counts_on_hardware(&plan.events[s].kind));
            let attrs: Vec<_> = specs.iter().map(|&s| plan.specs[s].attr.clone()).collect();
            let opened = tmetric_runtime::counter::open_own_group(&mut own.sys, &attrs, pinned)
                .map_err(|(member, errno)| {
                    let s = specs[member];
                    SessionError::Refused {
                        event: plan.specs[s].name.clone(),
                        errno,
                        why: env.explain(errno, &plan.events[s]),
                    }
                })?;
            for (o, &s) in opened.iter().zip(&specs) {
                if o.user_only {
                    own.user_only[s] = true;
                    plan.add_warning(Warning::UserOnly { event: plan.specs[s].name.clone() });
                }
            }
            let fds = opened.iter().map(|o| o.fd).collect();
            let ids = opened.iter().map(|o| o.id).collect();
            own.groups.push(OwnGroup { specs, fds, ids, pinned });
        }
        Ok(own)
    }

    /// Enables or disables every group through its leader.
    pub(crate) fn ioctl_all(&mut self, plan: &Plan, enable: bool) -> Result<(), CounterError> {
        for group in &self.groups {
            let fd = group.fds[0];
            let result =
                if enable { self.sys.enable(fd, true) } else { self.sys.disable(fd, true) };
            result.map_err(|errno| CounterError::Ioctl {
                what: if enable { "enabling" } else { "disabling" },
                event: plan.specs[group.specs[0]].name.clone(),
                errno,
            })?;
        }
        Ok(())
    }

    /// Reads every group once (one reading per spec, CPU and thread -1). A pinned group the
    /// kernel could not keep on its counters reads nothing: its members count 0, never run.
    pub(crate) fn read(&mut self, plan: &Plan) -> Result<Snapshot, CounterError> {
        let mut events: Vec<Option<Vec<CpuCount>>> = vec![None; plan.specs.len()];
        for group in &self.groups {
            let leader = || plan.specs[group.specs[0]].name.clone();
            let mut buf = vec![0u8; 8 * (3 + 2 * group.fds.len())];
            let got = self
                .sys
                .read(group.fds[0], &mut buf)
                .map_err(|errno| CounterError::Read { event: leader(), errno })?;
            let reading = |raw| Some(vec![CpuCount { cpu: -1, thread: -1, raw }]);
            if got == 0 {
                for &s in &group.specs {
                    events[s] = reading(RawCount::default());
                }
                continue;
            }
            let parsed = parse_group_read(&buf[..got], group.fds.len())
                .map_err(|problem| CounterError::Layout { event: leader(), problem })?;
            for (value, id) in parsed.values {
                let Some(m) = group.ids.iter().position(|&x| x == id) else {
                    let problem = format!("the kernel returned id {id}, which no member has");
                    return Err(CounterError::Layout { event: leader(), problem });
                };
                let raw = RawCount { value, enabled: parsed.enabled, running: parsed.running };
                events[group.specs[m]] = reading(raw);
            }
        }
        Ok(Snapshot { events })
    }
}

impl<S: Syscalls> Drop for OwnGroups<S> {
    fn drop(&mut self) {
        for group in std::mem::take(&mut self.groups).iter().rev() {
            // Siblings first: closing a leader first would briefly promote them.
            for &fd in group.fds.iter().rev() {
                self.sys.close(fd);
            }
        }
    }
}
