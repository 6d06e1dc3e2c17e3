//! The counting loop of `tmetric stat`: enable the counters, start the workload (or count
//! system-wide until interrupted), wake up for interval reads and `--control` commands, pass
//! signals on, and read the totals at the end.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::control::{Command, ControlFds, ControlReader};
use crate::counter::{CounterError, CounterSet, RawCount, Snapshot, Target};
use crate::signal::{SignalGuard, wait_readable};
use crate::sys::{Errno, Syscalls};
use crate::workload::{Exit, Workload, WorkloadError};

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Read and report every this often (`-I`).
    pub interval: Option<Duration>,
    /// Catch SIGINT, SIGTERM and SIGHUP: end the run (or pass them to the workload) and
    /// still report. Without a workload this is the only way a run ends.
    pub catch_signals: bool,
    /// `-D`: start counting this long after the workload starts (the target must then not
    /// enable on exec: the counters are enabled explicitly).
    pub delay: Option<Duration>,
    /// `-D -1` (any negative delay): start with the counters disabled; only a `--control`
    /// `enable` starts them (the target must not enable on exec).
    pub start_disabled: bool,
    /// `--interval-count`: print no more than this many intervals. A workload runs on to its
    /// end, as in perf (which waits for it); without one the run ends there.
    pub interval_count: Option<usize>,
    /// Also read the counters this often without reporting, keeping the readings
    /// ([`RunReport::samples`]): how counts vary during the run (error bars of multiplexed
    /// counts).
    pub sample_every: Option<Duration>,
    /// Without a workload: end the run once every one of these tasks has exited (`-p`,
    /// `-t`), as perf 6.12 does, so the elapsed time and every rate stop with them.
    pub until_gone: Vec<Watched>,
    /// `--timeout`: end the run this long after counting starts; a workload still running
    /// gets SIGTERM, as perf's `kill(child_pid, SIGTERM)`.
    pub timeout: Option<Duration>,
    /// `--control`: read perf's commands from this descriptor while counting, and
    /// acknowledge them.
    pub control: Option<ControlFds>,
    /// Where the run's own messages go, perf's `pr_info` lines (`Events disabled`,
    /// `Events enabled`, `Event NAME enabled`, `failed: ...`), one line each without its
    /// newline; `None` drops them.
    pub say: Option<fn(&str)>,
    /// tmetric's own rotation of groups that cannot count at once, in place of the kernel's.
    /// With [`RunOptions::sample_every`], the counters are read at every turn instead.
    pub rotation: Option<Rotation>,
}

/// tmetric's own rotation ([`CounterSet::rotate`]): the kernel rotates its groups on a fixed
/// timer, and a workload whose phases repeat with that period shows each group the same
/// phase every turn, so their counts are biased and their spread between reads hides it.
/// Turns of random length, in round-robin order, sample the run's time at random instead:
/// a quarter of [`Rotation::turn`] plus an exponential draw of mean three quarters (at most
/// four turns), so that where a turn starts in a periodic phase is forgotten within a few
/// turns (lengths in a narrow band drift slowly against such a phase, and nearby turns then
/// see the same part of it).
#[derive(Debug, Clone, PartialEq)]
pub struct Rotation {
    /// Per turn, the events leading the groups that count in it.
    pub turns: Vec<Vec<usize>>,
    /// A turn's mean length.
    pub turn: Duration,
    /// Seeds the turns' lengths.
    pub seed: u64,
}

impl Rotation {
    /// The turns in the order they come, with their lengths.
    pub fn schedule(&self) -> Turns {
        Turns { n: self.turns.len(), turn: self.turn, state: self.seed, current: 0 }
    }
}

/// The order and lengths of a [`Rotation`]'s turns ([`Rotation::schedule`]).
#[derive(Debug, Clone)]
pub struct Turns {
    n: usize,
    turn: Duration,
    state: u64,
    current: usize,
}

impl Turns {
    /// A turn's length: a quarter of the mean plus an exponential draw of mean three quarters,
    /// at most four means (splitmix64).
    pub fn length(&mut self) -> Duration {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        self.turn.mul_f64((0.25 - 0.75 * (1.0 - u).ln()).min(4.0))
    }

    /// The next turn and how long it lasts (the run starts under the kernel's rotation, for
    /// one [`Turns::length`], before the first).
    pub fn next_turn(&mut self) -> (usize, Duration) {
        self.current = (self.current + 1) % self.n.max(1);
        (self.current, self.length())
    }
}

/// The most reads a run keeps at tmetric's turns for the estimate of the turns a group missed
/// and for error bars, and the most readings (CPUs times events) they may hold together (32
/// bytes each: 32 MiB at most): past either, every other read is dropped (reads are
/// cumulative, so two intervals merge into one; a group's turns then share an interval, and
/// the estimate falls back towards scaling by time). 16,384 turns of 4 ms are about a minute.
const MAX_SAMPLES: usize = 16_384;
const MAX_READINGS: usize = 1 << 20;

/// A task whose exit ends a run (see [`RunOptions::until_gone`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// A process (`-p`): gone when its last thread has exited.
    Process(i32),
    /// One thread (`-t`).
    Thread(i32),
}

/// `pidfd_open`'s flag for a thread's own descriptor (Linux 6.9+): `O_EXCL`.
const PIDFD_THREAD: libc::c_long = libc::O_EXCL as libc::c_long;

/// The watched tasks: a pidfd each where the kernel gives one (readable once the task has
/// exited, so the run ends at once), else `/proc` looked at on every wake-up.
struct TaskWatch {
    tasks: Vec<(Watched, Option<OwnedFd>, bool)>,
}

impl TaskWatch {
    fn open(watched: &[Watched]) -> TaskWatch {
        let tasks = watched
            .iter()
            .map(|&w| {
                let (id, flags) = match w {
                    Watched::Process(pid) => (pid, 0),
                    Watched::Thread(tid) => (tid, PIDFD_THREAD),
                };
                // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor (close
                // on exec) or -1.
                let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, id, flags) };
                if fd < 0 && Errno::last().0 == libc::ESRCH {
                    return (w, None, true);
                }
                // SAFETY: a non-negative result is a descriptor we now own.
                let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
                (w, fd, false)
            })
            .collect();
        TaskWatch { tasks }
    }

    fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Descriptors to poll.
    fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.tasks.iter().filter(|t| !t.2).filter_map(|t| t.1.as_ref().map(AsRawFd::as_raw_fd))
    }

    /// Whether some task can only be looked for in `/proc` (the loop then wakes regularly).
    fn needs_polling(&self) -> bool {
        self.tasks.iter().any(|t| !t.2 && t.1.is_none())
    }

    /// Updates and returns whether every task has exited.
    fn all_gone(&mut self) -> bool {
        for (w, fd, gone) in &mut self.tasks {
            if *gone {
                continue;
            }
            *gone = match fd {
                Some(fd) => {
                    let mut p =
                        libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one valid pollfd, no wait.
                    unsafe { libc::poll(&mut p, 1, 0) > 0 }
                }
                None => {
                    let id = match *w {
                        Watched::Process(id) | Watched::Thread(id) => id,
                    };
                    !task_alive(id)
                }
            };
        }
        self.tasks.iter().all(|t| t.2)
    }
}

/// Whether `/proc/ID` is a task that has not exited (a zombie has).
fn task_alive(id: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{id}/stat")) else { return false };
    // `pid (comm) S ...`: the state follows the last `)` (a comm may hold one).
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].trim_start().chars().next());
    !matches!(state, Some('Z' | 'X' | 'x') | None)
}

/// One interval's counts.
#[derive(Debug)]
pub struct Tick<'a> {
    /// 1 for the first interval.
    pub number: usize,
    /// Time since the start at the read.
    pub at: Duration,
    /// Length of this interval.
    pub length: Duration,
    /// The counts of this interval (deltas).
    pub counts: &'a Snapshot,
    /// The cumulative reading at the interval's start ([`Tick::counts`] is the interval's
    /// reading less this one).
    pub before: &'a Snapshot,
    /// The cumulative reads [`RunOptions::sample_every`] took inside this interval, oldest
    /// first (at every turn of tmetric's rotation): what an estimate of this interval's
    /// rotated counts and its error bars may use; empty without them.
    pub reads: &'a [Snapshot],
    /// The last interval: the workload ended or the run was interrupted.
    pub last: bool,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunReport {
    /// The counts from start to end.
    pub totals: Snapshot,
    /// Wall-clock time from the start of the workload (or of counting) to its end.
    pub elapsed: Duration,
    /// The workload's exit.
    pub exit: Option<Exit>,
    /// The signal that interrupted the run, if one did.
    pub interrupted_by: Option<i32>,
    /// Intervals reported.
    pub ticks: usize,
    /// The run stopped the workload itself (`--timeout`, SIGUSR1): its SIGTERM is not its
    /// failure.
    pub stopped: bool,
    /// `--timeout` ended the run (and sent a workload SIGTERM).
    pub timed_out: bool,
    /// With [`RunOptions::sample_every`]: the cumulative readings taken during the run, in
    /// order, ending with [`RunReport::totals`] (empty otherwise).
    pub samples: Vec<Snapshot>,
    /// Per sample, how many `-I` intervals had ended when it was taken: a sample with `k`
    /// was read inside interval `k + 1` (what a recording keeps so that `report -I` gives
    /// each interval the reads `stat -I` estimated it from).
    pub sample_ticks: Vec<usize>,
}

impl RunReport {
    /// `-r`: the mean of the runs' counts (CPU by CPU) and elapsed times; the last run's exit,
    /// interruption and intervals. `None` without runs.
    pub fn mean_of(reports: Vec<RunReport>) -> Option<RunReport> {
        let n = reports.len() as u64;
        let mut mean = reports.last()?.totals.clone();
        for (e, event) in mean.events.iter_mut().enumerate() {
            let Some(cpus) = event else { continue };
            for (c, cpu) in cpus.iter_mut().enumerate() {
                let all = reports.iter().filter_map(|r| r.totals.events.get(e)?.as_ref()?.get(c));
                let (mut v, mut en, mut ru) = (0u64, 0u64, 0u64);
                for x in all {
                    v += x.raw.value;
                    en += x.raw.enabled;
                    ru += x.raw.running;
                }
                cpu.raw = RawCount { value: v / n, enabled: en / n, running: ru / n };
            }
        }
        let elapsed = reports.iter().map(|r| r.elapsed).sum::<Duration>() / n as u32;
        let mut last = reports.into_iter().last()?;
        last.totals = mean;
        last.elapsed = elapsed;
        Some(last)
    }

    /// `-r`: per event (of `events`), perf's `( +- x% )`: the standard error of the mean of its
    /// totals over the runs, relative to the mean; `None` for fewer than two runs or a zero
    /// mean.
    pub fn spread_of(reports: &[RunReport], events: usize) -> Vec<Option<f64>> {
        (0..events)
            .map(|e| {
                let values: Vec<f64> = reports
                    .iter()
                    .filter_map(|r| r.totals.aggregate(e))
                    .map(|a| a.value as f64)
                    .collect();
                if values.len() < 2 {
                    return None;
                }
                let n = values.len() as f64;
                let mean = values.iter().sum::<f64>() / n;
                let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
                (mean != 0.0).then(|| 100.0 * (var / n).sqrt() / mean)
            })
            .collect()
    }
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Counting failed.
    #[error(transparent)]
    Counter(#[from] CounterError),
    /// The workload failed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// Signal handling could not be set up.
    #[error("cannot catch signals: {0}")]
    Signals(Errno),
    /// The run has no end: no workload and no signal to stop it.
    #[error("nothing would end this run: give a command, or catch signals so Ctrl-C ends it")]
    Endless,
    /// The interval callback failed.
    #[error(transparent)]
    Report(#[from] io::Error),
}

/// Whether counters opened for `target` wait for an explicit enable.
fn needs_enable(target: &Target) -> bool {
    !matches!(target, Target::Task { on_exec: true, .. })
}

/// Runs: enables `counters` (opened for `target`), starts `workload`, calls `on_tick` every
/// interval with that interval's counts, and returns the totals when the workload ends or
/// (without one) when a signal arrives.
pub fn run<S: Syscalls>(
    counters: &mut CounterSet<S>,
    target: &Target,
    mut workload: Option<&mut Workload>,
    options: &RunOptions,
    mut on_tick: impl FnMut(&Tick<'_>) -> io::Result<()>,
) -> Result<RunReport, RunError> {
    let (guard, mut watch, start) = begin(counters, target, workload.as_deref_mut(), options)?;
    let mut intervals =
        Intervals { previous: Snapshot::default(), last: start, count: 0, first_read: 0 };
    let mut next_tick = options.interval.map(|i| start + i);
    let mut control = options.control.map(ControlReader::new);
    let mut exit = None;
    let mut interrupted_by = None;
    let mut interval_count_reached = false;
    let (mut stopped, mut timed_out) = (false, false);
    let deadline = options.timeout.map(|t| start + t);
    let mut samples = Vec::new();
    let mut sample_ticks: Vec<usize> = Vec::new();
    let rotation = options.rotation.as_ref().filter(|r| r.turns.len() > 1);
    let mut next_sample =
        if rotation.is_some() { None } else { options.sample_every.map(|i| start + i) };
    let mut turns = rotation.map(Rotation::schedule);
    // Until the first turn the kernel rotates, every group enabled.
    let mut next_turn = turns.as_mut().map(|t| start + t.length());
    // Until the first wait, everything is looked at.
    let mut news = News::ALL;
    loop {
        if let Some(w) = workload.as_mut() {
            if news.exited {
                if let Some(e) = w.try_wait()? {
                    exit = Some(e);
                    break;
                }
                // Its exit descriptor is level-triggered: the next wait says so again.
                news.exited = false;
            }
            if stopped {
                exit = Some(stop_workload(w)?);
                break;
            }
        } else if interrupted_by.is_some() || (!watch.is_empty() && watch.all_gone()) {
            break;
        }
        if let Some(reader) = control.as_mut() {
            while let Some(command) = reader.next_command() {
                obey(counters, reader, command, options.say)?;
            }
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            if let Some(w) = workload.as_mut() {
                exit = Some(stop_workload(w)?);
            }
            (stopped, timed_out) = (true, true);
            break;
        }
        if let (Some(due), Some(r), Some(order)) = (next_turn, rotation, turns.as_mut())
            && now >= due
        {
            let (turn, length) = order.next_turn();
            counters.rotate(&r.turns, turn)?;
            if options.sample_every.is_some() {
                let read = counters.read()?;
                let readings: usize = read.events.iter().flatten().map(Vec::len).sum();
                samples.push(read);
                sample_ticks.push(intervals.count);
                let cap = (MAX_READINGS / readings.max(1)).clamp(64, MAX_SAMPLES);
                if samples.len() >= cap {
                    samples = samples.into_iter().skip(1).step_by(2).collect();
                    sample_ticks = sample_ticks.into_iter().skip(1).step_by(2).collect();
                    // The odd reads are kept, read `j` now at `(j - 1) / 2`: the interval's
                    // first kept read is at half its old place.
                    intervals.first_read /= 2;
                }
            }
            next_turn = Some(now + length);
            continue;
        }
        if let (Some(due), Some(every)) = (next_sample, options.sample_every)
            && now >= due
        {
            samples.push(counters.read()?);
            sample_ticks.push(intervals.count);
            next_sample = Some(next_due(due, every, now));
            continue;
        }
        if let (Some(due), Some(interval)) = (next_tick, options.interval)
            && now >= due
        {
            let snapshot = counters.read()?;
            intervals.report(&snapshot, &samples, start, now, false, &mut on_tick)?;
            intervals.previous = snapshot;
            next_tick = Some(next_due(due, interval, now));
            if options.interval_count.is_some_and(|n| intervals.count >= n) {
                interval_count_reached = true;
                // perf stops printing and waits for its workload to end; without one the
                // run ends here.
                next_tick = None;
                if workload.is_none() {
                    break;
                }
            }
            continue;
        }
        let due = [next_tick, next_sample, next_turn, deadline].into_iter().flatten().min();
        let control_fd = control.as_ref().and_then(ControlReader::fd);
        news = wait_for_news(workload.as_deref(), guard.as_ref(), &watch, control_fd, due, now);
        // A signal handled as the wait returned is in the pipe but not in what it said.
        let arrived = guard.as_ref().is_some_and(SignalGuard::arrived);
        if news.signalled || arrived {
            let (signal, stop) = take_signals(guard.as_ref(), workload.as_deref());
            interrupted_by = signal.or(interrupted_by);
            stopped |= stop;
        }
    }
    // A signal that came as the workload ended, before the loop looked, is this run's.
    if guard.as_ref().is_some_and(SignalGuard::arrived) {
        interrupted_by = take_signals(guard.as_ref(), workload.as_deref()).0.or(interrupted_by);
    }
    let end = Instant::now();
    if needs_enable(target) {
        counters.disable()?;
    }
    let totals = counters.read()?;
    // perf prints the interval a signal cuts short (its poll is interrupted: the workload's
    // SIGCHLD, or Ctrl-C), but none after --interval-count's last.
    if options.interval.is_some() && !interval_count_reached {
        intervals.report(&totals, &samples, start, end, true, &mut on_tick)?;
    }
    if options.sample_every.is_some() {
        samples.push(totals.clone());
        sample_ticks.push(intervals.count);
    }
    let ticks = intervals.count;
    let elapsed = end - start;
    Ok(RunReport {
        totals,
        elapsed,
        exit,
        interrupted_by,
        ticks,
        stopped,
        timed_out,
        samples,
        sample_ticks,
    })
}

/// Carries out one `--control` command as perf 6.12's `evlist__ctlfd_process` does, saying
/// what perf says, and acknowledges it. Enabling or disabling prints no interval: perf's
/// `process_evlist` means to, but its test never holds for these commands.
fn obey<S: Syscalls>(
    counters: &mut CounterSet<S>,
    reader: &ControlReader,
    command: Command,
    say: Option<fn(&str)>,
) -> Result<(), RunError> {
    let say = |line: &str| {
        if let Some(say) = say {
            say(line);
        }
    };
    match &command {
        Command::Enable(None) => {
            counters.enable()?;
            say("Events enabled");
        }
        Command::Disable(None) => {
            counters.disable()?;
            say("Events disabled");
        }
        Command::Enable(Some(name)) | Command::Disable(Some(name)) => {
            let enable = matches!(command, Command::Enable(_));
            if counters.switch_named(name, enable)? > 0 {
                say(&format!("Event {name} {}", if enable { "enabled" } else { "disabled" }));
            } else {
                say(&format!("failed: can't find '{name}' event"));
            }
        }
        Command::Malformed => say("failed: wrong command"),
        Command::Evlist(_) => {
            for spec in counters.specs() {
                say(&spec.name);
            }
        }
        Command::Snapshot | Command::Stop | Command::Ping | Command::Unsupported(_) => {}
    }
    if command.acknowledged()
        && let Err(errno) = reader.ack()
    {
        let fd = reader.ack_fd();
        say(&format!("failed to write to ctl_ack_fd {fd}: {}", errno.text()));
    }
    Ok(())
}

/// Starts a run: catches signals if asked, enables the counters and starts the workload,
/// after `--delay` when there is one (saying `Events disabled` and `Events enabled` as
/// perf does). Returns the signal guard, the watch over `-p`/`-t` targets and when counting
/// began.
fn begin<S: Syscalls>(
    counters: &mut CounterSet<S>,
    target: &Target,
    mut workload: Option<&mut Workload>,
    options: &RunOptions,
) -> Result<(Option<SignalGuard>, TaskWatch, Instant), RunError> {
    if workload.is_none() && !options.catch_signals {
        return Err(RunError::Endless);
    }
    let guard = if options.catch_signals {
        Some(SignalGuard::install(crate::signal::STOP_SIGNALS).map_err(RunError::Signals)?)
    } else {
        None
    };
    let say = |line: &str| {
        if let Some(say) = options.say {
            say(line);
        }
    };
    let delayed = options.delay.filter(|d| !d.is_zero() && !options.start_disabled);
    if delayed.is_some() || options.start_disabled {
        counters.hold_disabled();
        say("Events disabled");
    } else if needs_enable(target) {
        counters.enable()?;
    }
    let mut start = Instant::now();
    if let Some(w) = workload.as_mut() {
        w.start()?;
    }
    // After the enable, so watching adds nothing between opening and counting.
    let watch = TaskWatch::open(&options.until_gone);
    if let Some(delay) = delayed {
        wait_out_delay(delay, workload, guard.as_ref())?;
        if needs_enable(target) {
            counters.enable()?;
        }
        say("Events enabled");
        start = Instant::now();
    }
    Ok((guard, watch, start))
}

/// The intervals reported so far (`-I`): the reading the next one is counted from, when
/// the last one ended and how many there were.
struct Intervals {
    previous: Snapshot,
    last: Instant,
    count: usize,
    /// Where the reads taken in the current interval start in the run's samples.
    first_read: usize,
}

impl Intervals {
    /// Reports the interval that ends at `now` with the reading `snapshot` and the run's
    /// `samples` so far (the run began at `start`; `last` for the run's final one). The
    /// caller keeps `snapshot` as `previous` when more intervals follow.
    fn report(
        &mut self,
        snapshot: &Snapshot,
        samples: &[Snapshot],
        start: Instant,
        now: Instant,
        last: bool,
        on_tick: &mut impl FnMut(&Tick<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let counts = snapshot.since(&self.previous);
        self.count += 1;
        let reads = samples.get(self.first_read..).unwrap_or_default();
        on_tick(&Tick {
            number: self.count,
            at: now - start,
            length: now - self.last,
            counts: &counts,
            before: &self.previous,
            reads,
            last,
        })?;
        self.last = now;
        self.first_read = samples.len();
        Ok(())
    }
}

/// Waits out `--delay` whether or not the workload ends meanwhile, as perf does, unless a
/// signal comes first.
fn wait_out_delay(
    delay: Duration,
    mut workload: Option<&mut Workload>,
    guard: Option<&SignalGuard>,
) -> Result<(), RunError> {
    let until = Instant::now() + delay;
    loop {
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let mut fds = Vec::new();
        fds.extend(workload.as_ref().and_then(|w| w.exit_fd()));
        fds.extend(guard.map(SignalGuard::fd));
        wait_readable(&fds, Some((until - now).min(Duration::from_millis(10))));
        if guard.is_some_and(|g| !g.drain().is_empty()) {
            return Ok(());
        }
        // A command that ends during the delay does not end it: perf's `enable_counters`
        // sleeps the whole delay out, then enables and says so. Reaping it here keeps its
        // exit for the run loop and stops polling its descriptor.
        if let Some(w) = workload.as_mut()
            && w.try_wait()?.is_some()
        {
            workload = None;
        }
    }
}

/// The next time a periodic action that was `due` every `every` falls after `now`: a late
/// wake-up skips the missed ones rather than firing them back to back.
fn next_due(due: Instant, every: Duration, now: Instant) -> Instant {
    let mut next = due + every;
    while next <= now {
        next += every;
    }
    next
}

/// What a wait may have brought, so that the loop makes the calls that look (`wait4`, a read
/// of the signal pipe) only then: an interval with neither costs no call but its reads.
#[derive(Debug, Clone, Copy)]
struct News {
    /// The workload may have exited.
    exited: bool,
    /// A signal may have arrived.
    signalled: bool,
}

impl News {
    const ALL: News = News { exited: true, signalled: true };
}

/// Sleeps until something the run loop acts on may have happened: the workload's exit, a
/// signal, a `--control` command, a watched task gone (without a workload), or `due` (the
/// next tick, sample or deadline). Without a descriptor to wait on for an exit, it wakes
/// regularly to look.
fn wait_for_news(
    workload: Option<&Workload>,
    guard: Option<&SignalGuard>,
    watch: &TaskWatch,
    control: Option<RawFd>,
    due: Option<Instant>,
    now: Instant,
) -> News {
    let mut fds = Vec::new();
    let exit_fd = workload.and_then(|w| w.exit_fd());
    fds.extend(exit_fd);
    let signal_fd = guard.map(SignalGuard::fd);
    fds.extend(signal_fd);
    fds.extend(control);
    if workload.is_none() {
        fds.extend(watch.fds());
    }
    let mut timeout = due.map(|due| due.saturating_duration_since(now));
    let poll_every = if workload.is_some() && exit_fd.is_none() {
        // No pidfd (kernel before 5.3): look for the exit regularly.
        Some(Duration::from_millis(10))
    } else if workload.is_none() && watch.needs_polling() {
        // A thread without a pidfd of its own (kernel before 6.9): look in /proc.
        Some(Duration::from_millis(20))
    } else {
        None
    };
    if let Some(every) = poll_every {
        timeout = Some(timeout.map_or(every, |t| t.min(every)));
    }
    let readable = wait_readable(&fds, timeout);
    let signal_bit = u32::from(exit_fd.is_some());
    News {
        // Without an exit descriptor only `wait4` can tell.
        exited: exit_fd.is_none() || readable & 1 != 0,
        signalled: signal_fd.is_some() && readable & (1 << signal_bit) != 0,
    }
}

/// Takes the signals that arrived: the last one's number (the run's interruption, if any)
/// and whether one asks the run to stop the workload (SIGUSR1). Signals `kill`ed at tmetric
/// are passed on to the workload.
fn take_signals(guard: Option<&SignalGuard>, workload: Option<&Workload>) -> (Option<i32>, bool) {
    let (mut last, mut stop) = (None, false);
    for received in guard.map(SignalGuard::drain).unwrap_or_default() {
        last = Some(received.signal);
        if received.signal == libc::SIGUSR1 {
            // perf 6.12 ends its run on SIGUSR1 (its workload-error handler interrupts
            // the wait) and prints the counts; its exit sends the workload SIGTERM.
            stop = true;
            continue;
        }
        if let Some(w) = workload
            && received.from_process
        {
            // A terminal's Ctrl-C reached the workload already (same process group);
            // `kill` aimed at tmetric did not, so pass it on, as the user meant the run.
            w.signal(received.signal);
        }
    }
    (last, stop)
}

/// Ends a workload the user asked no more of: SIGTERM, then SIGKILL if it is still there
/// after 2 s (so the wait is bounded).
fn stop_workload(w: &mut Workload) -> Result<Exit, RunError> {
    w.signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Some(exit) = w.try_wait()? {
            return Ok(exit);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    w.signal(libc::SIGKILL);
    Ok(w.wait()?)
}
