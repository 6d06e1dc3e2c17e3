//! A measuring session: a plan's counters opened on a target, enabled, read and explained,
//! the one path every front end takes from a plan to counts (`stat`, `record`, `-r`'s runs,
//! the exporter). It returns data: snapshots, the kernel's refusals as [`OpenFailure`]s,
//! refused groups as [`Split`]s, and their explanations; front ends print.

use tmetric_runtime::counter::{CounterError, Split};
use tmetric_runtime::{
    CounterSet, Environment, OpenFailure, RunError, RunOptions, RunReport, Snapshot, Syscalls,
    Target, Tick, Workload,
};

use crate::eval::{EvalInput, Evaluators, RootResult};
use crate::plan::Plan;
use crate::view::{self, Split as ViewSplit, Unit};

/// Why a session could not count at all.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Opening the counters failed as a whole (descriptors, an invalid group plan).
    #[error(transparent)]
    Open(#[from] CounterError),
    /// Every counter was refused, and not merely because this machine lacks its event
    /// (perf goes on then, printing `<not supported>`): permissions, for one.
    #[error("nothing could be counted: {}", reasons.join("; "))]
    NothingCounted {
        /// The distinct reasons, explained.
        reasons: Vec<String>,
    },
    /// Every listed thread had exited before its counters could be opened.
    #[error("every thread to count had exited before its counters could be opened")]
    ThreadsGone,
}

/// Why the kernel refused to open one counter: data, worded only by its `Display` (the text
/// notes put after the event's name: ` (on CPU 3): EACCES: not permitted ...`, or `: why` for
/// a task counter). Record files keep it in this form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The CPU the open failed on (`None` for a task counter).
    pub cpu: Option<u32>,
    /// The errno `perf_event_open` returned (0 when unknown: a record file written before
    /// refusals were kept as data, whose text names no errno this build knows).
    pub errno: i32,
    /// The errno's name and what it means for this event
    /// ([`tmetric_runtime::Environment::explain`]).
    pub why: String,
}

impl Refusal {
    /// A refusal from its text (` (on CPU n): why` or `: why`), as record files kept it before
    /// it was data; the errno is read back from the name `why` starts with.
    pub fn from_text(text: &str) -> Refusal {
        let (cpu, why) = match text.strip_prefix(" (on CPU ").and_then(|r| r.split_once("): ")) {
            Some((cpu, why)) if cpu.parse::<u32>().is_ok() => (cpu.parse().ok(), why),
            _ => (None, text.strip_prefix(": ").unwrap_or(text)),
        };
        let name = why.split(':').next().unwrap_or_default();
        // `Errno::name` knows a few dozen names (all below 134, Linux's last errno) and
        // spells the rest `errno N`.
        let errno = match name.strip_prefix("errno ") {
            Some(n) => n.parse().unwrap_or_default(),
            None => (1..134).find(|&n| tmetric_runtime::Errno(n).name() == name).unwrap_or(0),
        };
        Refusal { cpu, errno, why: why.to_string() }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(cpu) = self.cpu {
            write!(f, " (on CPU {cpu})")?;
        }
        write!(f, ": {}", self.why)
    }
}

/// An open measurement (see the module documentation).
pub struct Session<S: Syscalls> {
    plan: Plan,
    counters: CounterSet<S>,
    target: Target,
    env: Environment,
    evaluators: Evaluators,
}

/// The errnos that mean "this machine has no such event": perf 6.12 prints such an event
/// `<not supported>` and goes on (`stat_handle_error`).
fn unsupported(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENOENT | libc::ENODEV | libc::ENXIO | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP
    )
}

impl<S: Syscalls> Session<S> {
    /// Opens `plan`'s counters on `target` with `sys`. Groups the kernel refuses are split
    /// (topdown events stay behind `slots`); events it refuses are recorded with the reason.
    /// Fails when nothing at all can be counted for a reason other than a missing event.
    pub fn open(
        sys: S,
        plan: Plan,
        target: Target,
        env: Environment,
    ) -> Result<Self, SessionError> {
        let counters = CounterSet::open_with(
            sys,
            plan.specs.clone(),
            &plan.groups,
            &plan.sticky,
            target.clone(),
        )?;
        let session = Session { plan, counters, target, env, evaluators: Evaluators::default() };
        if let Target::Threads(tids) = &session.target
            && !tids.is_empty()
            && session.counters.vanished().len() == tids.len()
        {
            return Err(SessionError::ThreadsGone);
        }
        if let Some(reasons) = session.nothing_counted() {
            return Err(SessionError::NothingCounted { reasons });
        }
        Ok(session)
    }

    /// When no counter opened, and not every refusal means "no such event here": the
    /// distinct reasons.
    fn nothing_counted(&self) -> Option<Vec<String>> {
        let specs = self.plan.specs.len();
        if specs == 0 || self.counters.descriptors() > 0 {
            return None;
        }
        if (0..specs).all(|i| self.counters.failure(i).is_none_or(|f| unsupported(f.errno.0))) {
            return None;
        }
        let mut reasons: Vec<String> = Vec::new();
        for (i, event) in self.plan.events.iter().enumerate() {
            if let Some(failure) = self.counters.failure(i) {
                let why = self.env.explain(failure.errno, event);
                if !reasons.contains(&why) {
                    reasons.push(why);
                }
            }
        }
        Some(reasons)
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan, to change what is evaluated (retire latencies sampled during the run).
    pub fn plan_mut(&mut self) -> &mut Plan {
        &mut self.plan
    }

    /// What is counted.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The machine's environment (for explanations).
    pub fn env(&self) -> &Environment {
        &self.env
    }

    /// The counters (for samplers and recorders that need the runtime's view).
    pub fn counters(&self) -> &CounterSet<S> {
        &self.counters
    }

    /// Per spec: why the kernel refused it, if it did.
    pub fn failure(&self, spec: usize) -> Option<OpenFailure> {
        self.counters.failure(spec)
    }

    /// Per spec: the kernel's refusal, explained for its event.
    pub fn failures(&self) -> Vec<Option<Refusal>> {
        (0..self.plan.specs.len())
            .map(|spec| {
                self.counters.failure(spec).map(|failure| Refusal {
                    cpu: failure.cpu,
                    errno: failure.errno.0,
                    why: self.env.explain(failure.errno, &self.plan.events[spec]),
                })
            })
            .collect()
    }

    /// The groups the kernel refused and how they were reopened.
    pub fn splits(&self) -> &[Split] {
        self.counters.splits()
    }

    /// The refused groups as notes.
    pub fn split_notes(&self) -> Vec<String> {
        self.counters.splits().iter().map(|split| self.plan.split_note(split)).collect()
    }

    /// Specs counted in user mode only because the kernel refused kernel mode
    /// (`perf_event_paranoid` without privilege), by name.
    pub fn user_only(&self) -> Vec<&str> {
        (0..self.plan.specs.len())
            .filter(|&i| self.counters.user_only(i))
            .map(|i| self.plan.specs[i].name.as_str())
            .collect()
    }

    /// [`Target::Threads`]: the listed threads that had exited before their counters opened.
    pub fn vanished(&self) -> &[i32] {
        self.counters.vanished()
    }

    /// Enables every group (per-CPU counting, or a task counted from now).
    pub fn enable(&mut self) -> Result<(), CounterError> {
        self.counters.enable()
    }

    /// Disables every group.
    pub fn disable(&mut self) -> Result<(), CounterError> {
        self.counters.disable()
    }

    /// Reads every counter once: cumulative counts since they were enabled.
    pub fn read(&mut self) -> Result<Snapshot, CounterError> {
        self.counters.read()
    }

    /// Runs: the runtime's loop over these counters (a workload, intervals, signals, the
    /// targets' exits), calling `on_tick` with the plan every interval.
    pub fn run(
        &mut self,
        workload: Option<&mut Workload>,
        options: &RunOptions,
        mut on_tick: impl FnMut(&Plan, &Tick<'_>) -> std::io::Result<()>,
    ) -> Result<RunReport, RunError> {
        let plan = &self.plan;
        tmetric_runtime::run(&mut self.counters, &self.target, workload, options, |tick| {
            on_tick(plan, tick)
        })
    }

    /// Every root metric over `sample`.
    pub fn evaluate(&mut self, sample: &EvalInput<'_>) -> Vec<RootResult> {
        self.plan.evaluate(&mut self.evaluators, sample)
    }

    /// What perf prints for `sample`, split into `split`'s units ([`view::units`]).
    pub fn units(
        &mut self,
        sample: &EvalInput<'_>,
        split: &ViewSplit,
        wall_ns: f64,
        noise: &[Option<f64>],
    ) -> Vec<Unit> {
        view::units(&self.plan, &mut self.evaluators, sample, split, wall_ns, noise)
    }

    /// Why values of `sample` are missing, uncounted or computed around a missing input,
    /// with the kernel's refusals and the refused groups.
    ///
    /// Worded, for exporters that publish them as text; [`Plan::notes`] gives them typed.
    pub fn notes(&mut self, sample: &EvalInput<'_>) -> Vec<String> {
        let failures = self.failures();
        let results = self.plan.evaluate(&mut self.evaluators, sample);
        let notes = self.plan.notes(&results, sample, |spec| failures.get(spec).cloned().flatten());
        let mut notes: Vec<String> = notes.iter().map(ToString::to_string).collect();
        notes.extend(self.split_notes());
        notes
    }
}
