//! Signals while tmetric is blocked on output: SIGTERM and SIGINT were ignored there (the
//! handler only wrote to the run loop's pipe, which a blocked write never looks at); only
//! SIGKILL ended it. perf ends on them.

use std::time::{Duration, Instant};

use super::{bash_in, scratch};

/// Starts `script` (bash, in `dir`), sends `signal` to tmetric after `after`, and returns
/// how tmetric ended (`$?` as the shell saw it) and how long the whole took.
fn ended_by(dir: &std::path::Path, script: &str, signal: &str, after: u32) -> (String, Duration) {
    let start = Instant::now();
    let out = bash_in(
        dir,
        &format!(
            "{script} & pid=$!; sleep {after}; kill -{signal} $pid; \
             for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done; \
             kill -0 $pid 2>/dev/null && {{ echo still-running; kill -9 $pid; }}; wait $pid; echo \"status $?\""
        ),
    );
    (String::from_utf8_lossy(&out.stdout).into_owned(), start.elapsed())
}

#[test]
fn stop_signals_end_a_run_blocked_on_output() {
    let dir = scratch();
    // `-o` to a FIFO no one reads: blocked in the open.
    bash_in(dir.path(), "mkfifo fifo");
    for signal in ["TERM", "INT"] {
        let (text, _) = ended_by(dir.path(), "$T stat -o fifo -e task-clock sleep 30", signal, 1);
        assert!(!text.contains("still-running"), "-o FIFO, SIG{signal}: {text}");
        let number = if signal == "TERM" { 15 } else { 2 };
        assert!(text.contains(&format!("status {}", 128 + number)), "{signal}: {text}");
    }
    // `-I` output into a pipe whose reader never reads: blocked in a write once the pipe's
    // 64 KiB are full (about a second at this rate). The reader writes nowhere: holding this
    // script's output open, it made the test wait for it to end.
    let (text, _) = ended_by(
        dir.path(),
        "exec 3> >(sleep 60 >/dev/null 2>&1); $T stat -I 10 -A -a -e task-clock,context-switches,cpu-migrations,page-faults -x, -o /proc/self/fd/3 sleep 30",
        "TERM",
        4,
    );
    assert!(!text.contains("still-running"), "-I into a stopped pipe: {text}");
    // `record -o` to a FIFO.
    let (text, _) = ended_by(dir.path(), "$T record -o fifo -e task-clock sleep 30", "TERM", 1);
    assert!(!text.contains("still-running"), "record -o FIFO: {text}");
}

/// A SIGTERM while `--pmu-sim` wrote its simulated machine's tree killed tmetric before its
/// signal handlers were in place, and the private directory stayed in `$TMPDIR`; now the
/// directory catches stop signals from its first instant and is removed however early the
/// signal comes.
#[test]
fn a_signal_during_simulated_set_up_leaves_no_directory() {
    let dir = scratch();
    let out = bash_in(
        dir.path(),
        "for d in 0.002 0.005 0.01 0.02 0.04 0.08 0.15; do \
           $T --pmu-sim sapphirerapids -e cycles sleep 0.5 2>/dev/null & p=$!; sleep $d; kill -TERM $p; wait $p; \
         done; ls",
    );
    let left = String::from_utf8_lossy(&out.stdout);
    assert!(!left.contains("tmetric-pmu-sim"), "left behind: {left}");
}
