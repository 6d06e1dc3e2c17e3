//! A measuring session: a plan's counters opened on a target, enabled, run, read and
//! explained, the one path every front end takes from a plan to counts (`stat`, `record`,
//! each of `-r`'s runs, TPEBS sampling beside the counters, the exporter). It returns data:
//! snapshots, the kernel's refusals as [`OpenFailure`]s and [`Refusal`]s, refused groups as
//! [`Split`]s and [`RefusedGroup`]s, typed notes, and a run's [`Outcome`] (`-r`'s mean and
//! spread, sampled latencies); front ends word them, print and choose their exit status.
//! The region API's session counts the calling thread on its own groups instead
//! ([`Session::open_own_thread`], `session/own.rs`).

use tmetric_runtime::counter::{CounterError, Opening, Split};
use tmetric_runtime::{
    CounterSet, Environment, Errno, EventReport, OpenFailure, RunError, RunOptions, RunReport,
    Snapshot, Syscalls, Sysfs, SysfsError, Target, Tick, TpebsMode, Workload,
};

use crate::notes::Note;
pub use crate::notes::{Refusal, RefusedGroup, Reopened};
use crate::plan::{Plan, PlanRow, Source};
use crate::plan_eval::{EvalInput, Evaluated, Evaluators, RootResult};
use crate::threads::Thread;
use crate::tpebs::{self, Sampling, TpebsError};
use crate::view::Partition;

pub(crate) mod own;

use own::OwnGroups;
pub use own::{OwnGroup, counts_on_hardware};

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
    /// [`Session::open_own_thread`]: the kernel refused a counter, and every group was closed
    /// again (all or nothing).
    #[error("cannot open `{event}`: {why}")]
    Refused {
        /// The event.
        event: String,
        /// The errno.
        errno: Errno,
        /// The errno with the reason and what to do ([`Environment::explain`]).
        why: String,
    },
}

/// An open measurement (see the module documentation).
pub struct Session<S: Syscalls> {
    plan: Plan,
    counters: Counting<S>,
    target: Target,
    env: Environment,
    evaluators: Evaluators,
    /// `:R` latencies sampled beside the counters ([`Session::start_sampling`]).
    sampling: Option<Sampling<S>>,
    /// Whether [`Session::run`] gives each interval error bars ([`Session::set_interval_bars`]).
    interval_bars: bool,
}

/// How a session's counters are held.
enum Counting<S: Syscalls> {
    /// Opened on a target, groups split when refused ([`Session::open`]).
    Set(CounterSet<S>),
    /// The calling thread's own groups ([`Session::open_own_thread`]).
    Own(OwnGroups<S>),
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
    /// Whether per-CPU counters are read from their own CPU (the default, as perf stat), or
    /// all from where the reading thread runs (perf's `--no-affinity`).
    pub fn set_affinity(&mut self, on: bool) {
        if let Counting::Set(counters) = &mut self.counters {
            counters.set_affinity(on);
        }
    }

    /// Whether each interval of [`Session::run`] is evaluated with error bars from the reads
    /// inside it (`--errors`, `-v`), as the totals are with the run's.
    pub fn set_interval_bars(&mut self, on: bool) {
        self.interval_bars = on;
    }

    /// Opens `plan`'s counters on `target` with `sys`. Groups the kernel refuses are split
    /// (topdown events stay behind `slots`); events it refuses are recorded with the reason.
    /// Fails when nothing at all can be counted for a reason other than a missing event.
    pub fn open(
        sys: S,
        plan: Plan,
        target: Target,
        env: Environment,
    ) -> Result<Self, SessionError> {
        let how = Opening { inherit: plan.inherit, software_together: plan.software_together };
        let counters = CounterSet::open_as(
            sys,
            plan.specs.clone(),
            &plan.groups,
            &plan.sticky,
            target.clone(),
            how,
        )?;
        let evaluators = Evaluators::default();
        let counters = Counting::Set(counters);
        let session = Session {
            plan,
            counters,
            target,
            env,
            evaluators,
            sampling: None,
            interval_bars: false,
        };
        if let Target::Threads(tids) = &session.target
            && !tids.is_empty()
            && session.vanished().len() == tids.len()
        {
            return Err(SessionError::ThreadsGone);
        }
        if let Some(reasons) = session.nothing_counted() {
            return Err(SessionError::NothingCounted { reasons });
        }
        Ok(session)
    }

    /// Opens `groups` of `plan`'s specs for the calling thread to count on itself, as the
    /// region API measures: each through the runtime's `open_own_group` (pid 0, any CPU,
    /// not inherited, not enabled at an exec, disabled until [`Session::enable`], read as
    /// one group), a group holding a hardware event pinned ([`counts_on_hardware`]), never
    /// split. All or nothing: the first refusal closes every counter opened and is returned
    /// as [`SessionError::Refused`]. Events counted in user mode only because the kernel
    /// refused kernel mode become the plan's [`crate::Warning::UserOnly`].
    ///
    /// The session has no [`Session::run`]: the program is the workload, read at its
    /// boundaries ([`Session::read`], or `rdpmc` through [`Session::own_groups`]).
    pub fn open_own_thread(
        sys: S,
        mut plan: Plan,
        groups: Vec<Vec<usize>>,
        env: Environment,
    ) -> Result<Self, SessionError> {
        let own = OwnGroups::open(sys, &mut plan, groups, &env)?;
        Ok(Session {
            plan,
            counters: Counting::Own(own),
            target: Target::Task { pid: 0, on_exec: false },
            env,
            evaluators: Evaluators::default(),
            sampling: None,
            interval_bars: false,
        })
    }

    /// perf 7.x's test before it counts (`has_supported_counters`): the plan has inputs and
    /// none of them opened, a tool value (`duration_time`) counting as opened. Then each
    /// input with why it did not open, in row order; `None` when something opened.
    pub fn nothing_opened(&self) -> Option<Vec<(String, String)>> {
        if self.descriptors() > 0 {
            return None;
        }
        let rows: Vec<&PlanRow> = self.plan.rows.iter().filter(|r| r.copy_of.is_none()).collect();
        if rows.is_empty()
            || rows.iter().any(|r| !matches!(r.source, Source::Missing(_) | Source::Counter(_)))
        {
            return None;
        }
        let why = |row: &PlanRow| match &row.source {
            Source::Missing(why) => why.clone(),
            Source::Counter(spec) => match self.failure(*spec) {
                Some(failure) => self.env.explain(failure.errno, &self.plan.events[*spec]),
                None => "opened on no CPU or task of the target".to_string(),
            },
            _ => String::new(),
        };
        Some(rows.into_iter().map(|row| (row.name.clone(), why(row))).collect())
    }

    /// When no counter opened, and not every refusal means "no such event here": the
    /// distinct reasons.
    fn nothing_counted(&self) -> Option<Vec<String>> {
        let specs = self.plan.specs.len();
        if specs == 0 || self.descriptors() > 0 {
            return None;
        }
        if (0..specs).all(|i| self.failure(i).is_none_or(|f| unsupported(f.errno.0))) {
            return None;
        }
        let mut reasons: Vec<String> = Vec::new();
        for (i, event) in self.plan.events.iter().enumerate() {
            if let Some(failure) = self.failure(i) {
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

    /// What is counted.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The machine's environment (for explanations).
    pub fn env(&self) -> &Environment {
        &self.env
    }

    /// Open descriptors (one per event per CPU or thread).
    pub fn descriptors(&self) -> usize {
        match &self.counters {
            Counting::Set(set) => set.descriptors(),
            Counting::Own(own) => own.groups.iter().map(|g| g.fds.len()).sum(),
        }
    }

    /// [`Session::open_own_thread`]: the groups as opened (descriptors and ids, for user
    /// pages and `rdpmc`); `None` for a session opened on a target.
    pub fn own_groups(&self) -> Option<&[OwnGroup]> {
        match &self.counters {
            Counting::Set(_) => None,
            Counting::Own(own) => Some(&own.groups),
        }
    }

    /// The system-call backend the counters were opened with (a region reads and resets
    /// its groups through it between regions).
    pub fn syscalls(&mut self) -> &mut S {
        match &mut self.counters {
            Counting::Set(set) => set.syscalls(),
            Counting::Own(own) => &mut own.sys,
        }
    }

    /// The plan and the system-call backend together (a region's reads name the plan's
    /// events in their errors).
    pub fn plan_and_syscalls(&mut self) -> (&Plan, &mut S) {
        let sys = match &mut self.counters {
            Counting::Set(set) => set.syscalls(),
            Counting::Own(own) => &mut own.sys,
        };
        (&self.plan, sys)
    }

    /// Per spec: why the kernel refused it, if it did (never, on the calling thread's own
    /// groups: a refusal there fails the open).
    pub fn failure(&self, spec: usize) -> Option<OpenFailure> {
        match &self.counters {
            Counting::Set(set) => set.failure(spec),
            Counting::Own(_) => None,
        }
    }

    /// Per spec: the kernel's refusal, explained for its event.
    pub fn failures(&self) -> Vec<Option<Refusal>> {
        (0..self.plan.specs.len())
            .map(|spec| {
                self.failure(spec).map(|failure| Refusal {
                    cpu: failure.cpu,
                    errno: failure.errno.0,
                    why: self.env.explain(failure.errno, &self.plan.events[spec]),
                })
            })
            .collect()
    }

    /// The groups the kernel refused and how they were reopened.
    pub fn splits(&self) -> &[Split] {
        match &self.counters {
            Counting::Set(set) => set.splits(),
            Counting::Own(_) => &[],
        }
    }

    /// The groups as the kernel reads them, each once however many CPUs it is opened on:
    /// its specs, leader first. They can differ from the plan's groups: a group the kernel
    /// refused is reopened in parts ([`Session::splits`]), and per-CPU software events the
    /// plan opens alone are read as one group ([`Plan::set_software_together`]).
    pub fn read_groups(&self) -> Vec<Vec<usize>> {
        match &self.counters {
            Counting::Set(set) => {
                let mut groups: Vec<Vec<usize>> = Vec::new();
                for (_, members) in set.layout() {
                    if !groups.contains(&members) {
                        groups.push(members);
                    }
                }
                groups
            }
            Counting::Own(own) => own.groups.iter().map(|g| g.specs.clone()).collect(),
        }
    }

    /// The refused groups, typed ([`Plan::split_note`]).
    pub fn split_notes(&self) -> Vec<RefusedGroup> {
        self.splits().iter().map(|split| self.plan.split_note(split)).collect()
    }

    /// Specs counted in user mode only because the kernel refused kernel mode
    /// (`perf_event_paranoid` without privilege), by name.
    pub fn user_only(&self) -> Vec<&str> {
        (0..self.plan.specs.len())
            .filter(|&i| match &self.counters {
                Counting::Set(set) => set.user_only(i),
                Counting::Own(own) => own.user_only[i],
            })
            .map(|i| self.plan.specs[i].name.as_str())
            .collect()
    }

    /// [`Target::Threads`]: the listed threads that had exited before their counters opened.
    pub fn vanished(&self) -> &[i32] {
        match &self.counters {
            Counting::Set(set) => set.vanished(),
            Counting::Own(_) => &[],
        }
    }

    /// Of `threads` (as listed for [`Target::Threads`]), those counted: the ones that had not
    /// exited before their counters opened.
    pub fn counted_threads(&self, threads: &[Thread]) -> Vec<Thread> {
        let gone = self.vanished();
        threads.iter().filter(|t| !gone.contains(&t.0)).cloned().collect()
    }

    /// Enables every group (per-CPU counting, or a task counted from now).
    pub fn enable(&mut self) -> Result<(), CounterError> {
        match &mut self.counters {
            Counting::Set(set) => set.enable(),
            Counting::Own(own) => own.ioctl_all(&self.plan, true),
        }
    }

    /// Disables every group.
    pub fn disable(&mut self) -> Result<(), CounterError> {
        match &mut self.counters {
            Counting::Set(set) => set.disable(),
            Counting::Own(own) => own.ioctl_all(&self.plan, false),
        }
    }

    /// Reads every counter once: cumulative counts since they were enabled.
    pub fn read(&mut self) -> Result<Snapshot, CounterError> {
        match &mut self.counters {
            Counting::Set(set) => set.read(),
            Counting::Own(own) => own.read(&self.plan),
        }
    }

    /// [`Session::read`] into `out`, reusing its vectors: counters opened on a target read
    /// without allocating once `out` has had one read.
    pub fn read_into(&mut self, out: &mut Snapshot) -> Result<(), CounterError> {
        match &mut self.counters {
            Counting::Set(set) => set.read_into(out),
            Counting::Own(own) => {
                *out = own.read(&self.plan)?;
                Ok(())
            }
        }
    }

    /// The CPUs of the per-CPU counters, ascending (none for a task or its own thread).
    pub fn counter_cpus(&mut self) -> &[i32] {
        match &mut self.counters {
            Counting::Set(set) => set.group_cpus(),
            Counting::Own(_) => &[],
        }
    }

    /// Reads the counters on CPU `cpu` only, from wherever the calling thread runs, for
    /// [`Session::finish_read`]: a reader of many sessions moves to each CPU once and reads
    /// every session's counters there (as perf stat reads all its events CPU by CPU), rather
    /// than each session moving on its own. Counters not per CPU are read with `cpu` -1.
    pub fn read_cpu(&mut self, cpu: i32) -> Result<(), CounterError> {
        match &mut self.counters {
            Counting::Set(set) if cpu < 0 => set.read_tasks(),
            Counting::Set(set) => set.read_cpu(cpu),
            Counting::Own(_) => Ok(()),
        }
    }

    /// How many of the counters' groups count on CPU `cpu` (none when the session counts
    /// its own thread).
    pub fn groups_on(&self, cpu: i32) -> usize {
        match &self.counters {
            Counting::Set(set) => set.groups_on(cpu),
            Counting::Own(_) => 0,
        }
    }

    /// The counters' reads since the last [`Session::finish_read`], from
    /// [`Session::read_cpu`], as a snapshot in `out` (its vectors reused).
    pub fn finish_read(&mut self, out: &mut Snapshot) -> Result<(), CounterError> {
        match &mut self.counters {
            Counting::Set(set) => set.finish_read(out),
            Counting::Own(own) => {
                *out = own.read(&self.plan)?;
                Ok(())
            }
        }
    }

    /// Starts sampling the plan's `:R` inputs beside the counters, with `sys` (on the
    /// session's target; a task is sampled on the online CPUs of `sysfs`): every interval
    /// of [`Session::run`] then evaluates with that interval's latencies by `mode`, and
    /// [`Session::outcome`] gives the run's.
    pub fn start_sampling(
        &mut self,
        sys: S,
        sysfs: &Sysfs,
        mode: TpebsMode,
    ) -> Result<(), TpebsError> {
        let sampler = tpebs::start_sampler(&self.plan, sys, &self.target, sysfs)?;
        self.sampling = Some(Sampling { sampler, mode });
        Ok(())
    }

    /// Whether retire latencies are sampled during the run.
    pub fn sampling(&self) -> bool {
        self.sampling.is_some()
    }

    /// Stops the sampler: the whole run's retire latencies by the sampling's statistic and
    /// the per-event sample statistics (`None` and none when nothing was sampled).
    fn stop_sampling(&mut self) -> Result<(SampledLatencies, Vec<EventReport>), TpebsError> {
        let Some(Sampling { sampler, mode }) = self.sampling.take() else {
            return Ok((None, Vec::new()));
        };
        let reports = sampler.stop().map_err(TpebsError::Stop)?;
        Ok((Some(tpebs::latencies(&reports, mode, false)), reports))
    }

    /// Runs: the runtime's loop over these counters (a workload, intervals, signals, the
    /// targets' exits). Every interval is evaluated once, split into `split`'s units, with
    /// that interval's sampled retire latencies while sampling, and handed to `on_tick`
    /// with the plan, the tick and its evaluation input.
    pub fn run(
        &mut self,
        workload: Option<&mut Workload>,
        options: &RunOptions,
        split: &Partition,
        mut on_tick: impl FnMut(&Plan, &Tick<'_>, &EvalInput<'_>, &Evaluated) -> std::io::Result<()>,
    ) -> Result<RunReport, RunError> {
        let failures = self.failures();
        self.plan.rotating = options.rotation.as_ref().is_some_and(|r| r.turns.len() > 1);
        // Only a plan with rotated groups looks at the reads inside an interval: a run whose
        // counters all count at once prints its intervals' counts as read.
        let multiplexed = self.plan.rotation().is_some();
        let bars = self.interval_bars;
        let Counting::Set(counters) = &mut self.counters else {
            return Err(RunError::Report(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "a session on the calling thread's own groups has no run: read it at the boundaries of the work",
            )));
        };
        let (plan, sampling, evaluators) = (&self.plan, &mut self.sampling, &mut self.evaluators);
        // The interval before's start and reads, which an interval with few turns borrows.
        let mut earlier: Vec<Snapshot> = Vec::new();
        tmetric_runtime::run(counters, &self.target, workload, options, |tick| {
            let latencies = match sampling.as_mut() {
                Some(s) => {
                    let reports =
                        s.sampler.read().map_err(|e| std::io::Error::other(e.to_string()))?;
                    Some(tpebs::latencies(&reports, s.mode, true))
                }
                None => None,
            };
            // The interval's own estimate and bars, from the reads inside it (no look-ahead:
            // the interval prints now; `crate::interval` says what is used).
            let estimate = (multiplexed && !tick.reads.is_empty())
                .then(|| plan.estimate_interval(&earlier, tick.before, tick.reads, tick.counts));
            earlier.clear();
            if multiplexed && !tick.reads.is_empty() {
                earlier.push(tick.before.clone());
                earlier.extend_from_slice(tick.reads);
            }
            let counts = estimate.as_ref().map_or(tick.counts, |e| &e.counts);
            let sample = EvalInput::new(counts, tick.length.as_secs_f64())
                .with_latencies(latencies.as_deref());
            let reads = estimate.as_ref().filter(|_| bars).map(|e| e.reads.as_slice());
            let from = estimate.as_ref().map_or(0, |e| e.from);
            let mut evaluated =
                plan.evaluate_sample_from(evaluators, &sample, split, reads, from, &failures);
            if let Some(e) = estimate.as_ref().filter(|e| !e.scaled.is_empty()) {
                evaluated.notes.push(crate::interval::scaled_note(plan, e));
            }
            on_tick(plan, tick, &sample, &evaluated)
        })
    }

    /// After [`Session::run`]: the sampled latencies and, for `-r`, the mean of `earlier`
    /// runs and this one (`report`) with each count's spread.
    pub fn outcome(
        &mut self,
        report: RunReport,
        earlier: Vec<RunReport>,
    ) -> Result<Outcome, TpebsError> {
        let (latencies, samples) = self.stop_sampling()?;
        let mut outcome = Outcome::of(report, earlier, self.plan.specs.len(), samples);
        outcome.latencies = latencies;
        Ok(outcome)
    }

    /// Every root metric over `sample` (a region's delta: no split, no bars, no notes).
    pub fn evaluate(&mut self, sample: &EvalInput<'_>) -> Vec<RootResult> {
        self.plan.evaluate(&mut self.evaluators, sample)
    }

    /// `sample` evaluated once for every reader ([`Plan::evaluate_sample`]): split into
    /// `split`'s units, with error bars from `reads` when given, and the notes with the
    /// kernel's refusals and the refused groups ([`Note::Group`]), typed: exporters word them.
    pub fn evaluate_sample(
        &mut self,
        sample: &EvalInput<'_>,
        split: &Partition,
        reads: Option<&[Snapshot]>,
    ) -> Evaluated {
        let failures = self.failures();
        let mut evaluated =
            self.plan.evaluate_sample(&mut self.evaluators, sample, split, reads, &failures);
        evaluated.notes.extend(self.split_notes().into_iter().map(Note::Group));
        evaluated
    }
}

/// Retire latencies sampled over a run, by `:R` input (`None`: not sampled).
type SampledLatencies = Option<Vec<(String, f64)>>;

/// What a run measured, as data: the counts (`-r`'s mean), their spread, the runs' times
/// and the retire-latency samples. The exit status is the front end's to choose.
#[derive(Debug)]
pub struct Outcome {
    /// The run's report; with `-r`, the mean of the runs' counts and times (the last run's
    /// exit, interruption and intervals).
    pub report: RunReport,
    /// `-r`: per spec, perf's `( +- x% )` (empty for one run).
    pub spread: Vec<Option<f64>>,
    /// `-r`: every run's elapsed seconds, in order (empty for one run).
    pub elapsed_runs: Vec<f64>,
    /// The retire-latency samples' statistics per `:R` input (empty without sampling).
    pub samples: Vec<EventReport>,
    /// The whole run's sampled retire latencies, by `:R` input: what the totals are
    /// evaluated with ([`EvalInput::latencies`]); `None` when nothing was sampled.
    pub latencies: Option<Vec<(String, f64)>>,
}

impl Outcome {
    /// The outcome of `earlier` runs and the last one, `report`, over `specs` counters.
    pub fn of(
        report: RunReport,
        mut earlier: Vec<RunReport>,
        specs: usize,
        samples: Vec<EventReport>,
    ) -> Outcome {
        if earlier.is_empty() {
            return Outcome {
                report,
                spread: Vec::new(),
                elapsed_runs: Vec::new(),
                samples,
                latencies: None,
            };
        }
        earlier.push(report);
        let elapsed_runs = earlier.iter().map(|r| r.elapsed.as_secs_f64()).collect();
        let spread = RunReport::spread_of(&earlier, specs);
        let report = RunReport::mean_of(earlier).expect("at least the last run");
        Outcome { report, spread, elapsed_runs, samples, latencies: None }
    }

    /// `-r`: the standard deviation of the mean elapsed time (`None` for one run).
    pub fn elapsed_spread(&self) -> Option<f64> {
        (!self.elapsed_runs.is_empty()).then(|| spread_of_mean(&self.elapsed_runs))
    }
}

/// The standard deviation of the mean of `values` (perf's `stddev_stats`); 0 for fewer than
/// two.
pub fn spread_of_mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (variance / n).sqrt()
}

/// What a run counts, as a front end chose it, before it is the runtime's [`Target`].
#[derive(Debug, Clone)]
pub enum Counted<'a> {
    /// These CPUs (`-C`, already checked against the online ones).
    Cpus(Vec<u32>),
    /// These threads, each with counters of its own (perf's `-p` and `-t`).
    Threads(&'a [Thread]),
    /// Every online CPU (`-a`).
    AllCpus,
    /// A command's process: enabled at its exec, or later (`-D`) when not `on_exec`.
    Command {
        /// The process (0: this one).
        pid: i32,
        /// Whether the counters start at the exec.
        on_exec: bool,
    },
}

impl Counted<'_> {
    /// The runtime's target, with the online CPUs of `host` for [`Counted::AllCpus`].
    pub fn target(self, host: &crate::Host) -> Result<Target, SysfsError> {
        Ok(match self {
            Counted::Cpus(cpus) => Target::Cpus(cpus),
            Counted::Threads(threads) => Target::Threads(threads.iter().map(|t| t.0).collect()),
            Counted::AllCpus => Target::Cpus(host.online_cpus()?),
            Counted::Command { pid, on_exec } => Target::Task { pid, on_exec },
        })
    }
}
