//! Memory limits: under a `ulimit -v` too small for a run, tmetric ends with one line that
//! says memory ran out and exit 2, never an abort with a backtrace or death by a signal.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use super::scratch;

/// How the lines of `tmetric_runtime::alloc` start: a failed allocation, a stack that could
/// not grow.
const OUT_OF_MEMORY: &str = "tmetric: out of memory: could not ";

/// What runs under each limit: counting, a simulated PMU's whole plan, and the server's
/// threads.
const RUNS: [&str; 3] = [
    "stat -e task-clock true",
    "stat --pmu-sim sapphirerapids -M TopdownL1 true",
    "serve --listen 127.0.0.1:0 --intervals 1 --interval 100ms -e task-clock",
];

/// `ulimit -v 24000` ended `stat -e task-clock true` with `memory allocation of 19200 bytes
/// failed`, a backtrace (`RUST_BACKTRACE=1`) and SIGABRT (exit 134). Now every limit from
/// where the binary cannot be loaded up to where the run succeeds ends either in success or
/// in exit 2 with one out-of-memory line.
///
/// Below some limit no program of tmetric's size starts: the dynamic loader cannot map a
/// library (exit 127, its message) or, in a window of a few pages, its own thread-local
/// storage, and the kernel cannot map a large debug binary (SIGSEGV, nothing printed). Both
/// happen before any of tmetric's code runs, and perf's binary fails the same way, so they are
/// allowed only below every limit at which tmetric's own code ran.
#[test]
fn out_of_memory_is_one_line_and_exit_2_at_every_limit() {
    let dir = scratch();
    for args in RUNS {
        let mut outcomes = Vec::new();
        let mut started = false;
        let mut out_of_memory = 0;
        let mut succeeded = false;
        // 256 KiB steps from 16 MiB: every binary of this workspace fails to load at the
        // bottom, and a run needs less than 256 MiB.
        for limit in (16 * 1024..=256 * 1024).step_by(256) {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("ulimit -c 0; ulimit -v {limit}; exec \"$T\" {args}"))
                .env("T", env!("CARGO_BIN_EXE_tmetric"))
                .env("RUST_BACKTRACE", "1")
                .env("TMPDIR", dir.path())
                .current_dir(dir.path())
                .output()
                .expect("sh runs");
            let text = String::from_utf8_lossy(&out.stderr).into_owned();
            let code = out.status.code();
            let signal = out.status.signal();
            outcomes.push(format!("{limit} KiB: {code:?} {signal:?} {text}"));
            let loader = code == Some(127) && text.contains("error while loading shared libraries");
            let before_main = signal.is_some() && text.is_empty();
            if !started && (loader || before_main) {
                continue;
            }
            started = true;
            let all = outcomes.join("\n");
            assert_eq!(signal, None, "`{args}` died of a signal at {limit} KiB:\n{all}");
            for word in ["panicked", "stack backtrace", "memory allocation of"] {
                assert!(!text.contains(word), "`{args}` at {limit} KiB printed `{word}`:\n{all}");
            }
            match code {
                Some(0) => {
                    succeeded = true;
                    break;
                }
                Some(2) => {
                    let lines = text.matches(OUT_OF_MEMORY).count();
                    assert!(lines <= 1, "`{args}` at {limit} KiB said it {lines} times:\n{all}");
                    if lines == 1 {
                        out_of_memory += 1;
                        let last = text.lines().last().unwrap_or_default();
                        assert!(
                            last.starts_with(OUT_OF_MEMORY)
                                && last.ends_with(
                                    "; raise the virtual memory limit (`ulimit -v`) or the cgroup's memory.max"
                                ),
                            "`{args}` at {limit} KiB: the out-of-memory line is not the last:\n{all}"
                        );
                    } else {
                        // Memory that is not the allocator's (a thread's stack) is an error
                        // tmetric words itself.
                        assert!(text.contains("tmetric: "), "`{args}` at {limit} KiB:\n{all}");
                    }
                }
                other => panic!("`{args}` at {limit} KiB exited {other:?}:\n{all}"),
            }
        }
        let all = outcomes.join("\n");
        assert!(succeeded, "`{args}` never succeeded below 256 MiB:\n{all}");
        assert!(out_of_memory > 0, "`{args}` never ran out of memory:\n{all}");
    }
}
