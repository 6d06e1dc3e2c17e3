//! How a `tmetric stat` run ends, as perf 6.12's does: perf's exit codes for what it refuses
//! ([`PerfExit`]), the workload's fate said as perf's `psignal` says it, and the signal that
//! ended a run without a workload raised again once everything is printed ([`reraise_later`]),
//! and perf 7.x's refusal of a run that can open none of its events.

use std::sync::atomic::{AtomicI32, Ordering};

use tmetric_engine::session::Session;
use tmetric_runtime::Syscalls;

/// An error that ends tmetric with perf's exit code for it rather than tmetric's 2: 255
/// where perf's `cmd_stat` returns -1 (`Workload failed:`, `--interval-clear` without a
/// terminal), 129 where its option parser refuses a value (`--control`). `main` prints
/// `message` as every error and exits with `code`.
#[derive(Debug)]
pub struct PerfExit {
    /// The exit code.
    pub code: u8,
    /// What went wrong and what to do.
    pub message: String,
}

impl std::fmt::Display for PerfExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PerfExit {}

/// A [`PerfExit`] as an error.
pub fn perf_exit(code: u8, message: impl Into<String>) -> anyhow::Error {
    PerfExit { code, message: message.into() }.into()
}

/// The signal to die by once the run is over (0: none).
static RERAISE: AtomicI32 = AtomicI32::new(0);

/// perf's `sig_atexit`: a run without a workload that a signal ended (Ctrl-C on `-a`) ends
/// by that signal once everything is printed and closed, so its parent sees it (130 for
/// SIGINT from a shell). With a workload perf's last caught signal is always the workload's
/// SIGCHLD, which ends nothing: its exit code is the workload's.
/// SIGQUIT, which tmetric catches so that a background run (started with it ignored) can
/// still be ended, ends tmetric normally: its default action would dump core.
pub fn reraise_later(signal: i32) {
    if signal != libc::SIGQUIT {
        RERAISE.store(signal, Ordering::Relaxed);
    }
}

/// The signal that interrupted `-r 0`'s last run (0: none), for [`crate::run::forever`].
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// Notes that a signal tmetric caught interrupted a run of `-r 0`.
pub fn note_interrupted(signal: i32) {
    INTERRUPTED.store(signal, Ordering::Relaxed);
}

/// The signal [`note_interrupted`] kept, once.
pub fn take_interrupted() -> Option<i32> {
    Some(INTERRUPTED.swap(0, Ordering::Relaxed)).filter(|&s| s > 0)
}

/// Raises the signal [`reraise_later`] kept, if any: called by `main` after the run's
/// outputs are flushed and its temporary files removed.
pub fn reraise_now() {
    let signal = RERAISE.swap(0, Ordering::Relaxed);
    if signal > 0 {
        tmetric_runtime::signal::die_by(signal);
    }
}

/// perf's `psignal` line for one run's workload if a signal killed it, `--timeout`'s SIGTERM
/// too; not for the SIGTERM that follows SIGUSR1 (perf sends it at its exit, after the
/// counts).
pub fn say_fate(command: &[std::ffi::OsString], report: &tmetric_runtime::RunReport) {
    let stopped_quietly = report.stopped && !report.timed_out;
    if let Some(signal) = report.exit.and_then(|e| e.signal()).filter(|_| !stopped_quietly) {
        say_killed(command, signal);
    }
}

/// perf's `psignal(WTERMSIG(status), argv[0])` for a workload a signal killed: the command as
/// typed, a colon and the C library's description (`sh: Killed`), on standard error before
/// the counts.
pub fn say_killed(command: &[std::ffi::OsString], signal: i32) {
    use std::io::Write;
    let name = command.first().map(|c| c.to_string_lossy()).unwrap_or_default();
    let text = tmetric_runtime::signal::describe(signal);
    let _ = writeln!(std::io::stderr().lock(), "{name}: {text}");
}

/// perf's `pr_info` lines of a run (`Events disabled`, `Events enabled`): on standard error
/// as perf writes them, whatever the layout, so that they stand where perf's stand.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// perf 7.x ends a run that could open none of its events (`No supported events found.`,
/// exit 1) where perf 6.12 prints them `<not supported>` (`Contract::needs_an_event`);
/// perf's words, then which events and why.
pub fn refuse_an_empty_run<S: Syscalls>(session: &Session<S>) -> anyhow::Result<()> {
    let plan = session.plan();
    if !plan.contract().needs_an_event {
        return Ok(());
    }
    let Some(rows) = session.nothing_opened() else { return Ok(()) };
    // One clause per reason, naming its events.
    let mut reasons: Vec<(String, Vec<&str>)> = Vec::new();
    for (name, why) in &rows {
        match reasons.iter_mut().find(|(w, _)| w == why) {
            Some((_, names)) => names.push(name),
            None => reasons.push((why.clone(), vec![name])),
        }
    }
    let reasons: Vec<String> = reasons
        .iter()
        .map(|(why, names)| format!("{}: {why}", tmetric_text::names_summary(names)))
        .collect();
    Err(perf_exit(
        1,
        format!(
            "No supported events found. {}; perf {} ends a run that can open none of its events (count events this machine has, such as -e task-clock, or give a model with --pmu-sim)",
            reasons.join("; "),
            plan.contract().perf
        ),
    ))
}
