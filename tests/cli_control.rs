//! Run control and process semantics as perf 6.12's, for real with software events and child
//! workloads: `--control` over real FIFOs and inherited descriptors (perf's commands, its
//! `ack\n\0`, its messages in order), `-D -1` and `-D N`, `--interval-count` with a workload,
//! `-I` limits and `-I 0`, `--interval-clear` without a terminal, and how a run ends (a
//! signal that ends a system-wide run kills tmetric by that signal once the counts are
//! printed). Bounds are generous and order is asserted rather than time: the machine may be
//! loaded.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{stderr, tmetric};

const BIN: &str = env!("CARGO_BIN_EXE_tmetric");

/// perf's acknowledgement: `ack\n` and its NUL.
const ACK: &[u8] = b"ack\n\0";

/// A scratch directory with two FIFOs, `ctl` and `ack`.
fn fifos() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::Builder::new().prefix("tmetric-control-").tempdir().unwrap();
    let (ctl, ack) = (dir.path().join("ctl"), dir.path().join("ack"));
    let made = Command::new("mkfifo").arg(&ctl).arg(&ack).status().expect("mkfifo runs");
    assert!(made.success());
    (dir, ctl, ack)
}

/// Opens a FIFO read-write and non-blocking, as a controlling script does (`exec 9<>ack`), so
/// neither end waits for the other.
fn open_rw(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}

/// A running `tmetric` whose standard error is read line by line as it comes.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn spawn(command: &mut Command) -> Running {
        let mut child = command.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines, seen: Vec::new() }
    }

    /// Waits (at most 60 s: the machine may be loaded) for a line that `matches`.
    fn wait_for(&mut self, matches: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(line.clone());
                if matches(&line) {
                    return line;
                }
            }
        }
        panic!("no such line in 60 s; so far:\n{}", self.seen.join("\n"));
    }

    /// Waits for the end; returns the status and every line of standard error.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let status = wait_bounded(&mut self.child);
        self.seen.extend(self.lines.iter());
        (status, self.seen)
    }
}

/// Waits at most 60 s for `child`, killing it after that.
fn wait_bounded(child: &mut Child) -> std::process::ExitStatus {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("tmetric did not end in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads one acknowledgement (5 bytes) from `ack`, waiting at most 60 s.
fn read_ack(ack: &mut File) -> Vec<u8> {
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(60);
    while got.len() < ACK.len() && Instant::now() < until {
        let mut buf = [0u8; 5];
        match ack.read(&mut buf[..ACK.len() - got.len()]) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("{e}"),
        }
    }
    got
}

/// Whatever is left in `ack` now.
fn drain(ack: &mut File) -> Vec<u8> {
    let mut rest = Vec::new();
    let mut buf = [0u8; 64];
    while let Ok(n) = ack.read(&mut buf) {
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&buf[..n]);
    }
    rest
}

/// A workload that spins until the file `stop` exists (on the CPU all the while, so
/// task-clock counts the whole of any window in which it is enabled).
fn spin_until(stop: &Path) -> Vec<String> {
    let script = format!("while [ ! -e '{}' ]; do :; done", stop.display());
    vec!["sh".into(), "-c".into(), script]
}

/// The value of the CSV line of `event`.
fn csv_value(lines: &[String], event: &str) -> String {
    let line = lines
        .iter()
        .find(|l| l.split(',').nth(2) == Some(event))
        .unwrap_or_else(|| panic!("no {event} line:\n{}", lines.join("\n")));
    line.split(',').next().unwrap().to_string()
}

/// `-D -1 --control fifo:ctl,ack`: nothing counts until `enable`; `enable` and `disable`
/// are acknowledged with perf's five bytes and said as perf says them, in order, before the
/// counts; task-clock counts only the enabled window.
#[test]
fn a_fifo_pair_enables_and_disables_counting_with_perfs_acks() {
    let (dir, ctl, ack) = fifos();
    let stop = dir.path().join("stop");
    let control = format!("fifo:{},{}", ctl.display(), ack.display());
    let mut run = Running::spawn(
        Command::new(BIN)
            .args(["stat", "-x,", "-e", "task-clock", "-D", "-1", "--control", &control, "--"])
            .args(spin_until(&stop)),
    );
    run.wait_for(|l| l == "Events disabled");
    let mut ctl_w = open_rw(&ctl);
    let mut ack_r = open_rw(&ack);
    let window = Instant::now();
    ctl_w.write_all(b"enable\n").unwrap();
    assert_eq!(read_ack(&mut ack_r), ACK);
    std::thread::sleep(Duration::from_millis(200));
    ctl_w.write_all(b"disable\n").unwrap();
    assert_eq!(read_ack(&mut ack_r), ACK);
    let window = window.elapsed();
    // Spinning on while disabled: none of this counts.
    std::thread::sleep(Duration::from_millis(300));
    File::create(&stop).unwrap();
    let (status, lines) = run.finish();
    assert_eq!(status.code(), Some(0), "{lines:?}");
    let said: Vec<&str> =
        lines.iter().map(String::as_str).filter(|l| l.starts_with("Events")).collect();
    assert_eq!(said, ["Events disabled", "Events enabled", "Events disabled"], "{lines:?}");
    let counts = lines.iter().position(|l| l.contains(",task-clock,")).unwrap();
    assert!(lines[..counts].iter().any(|l| l == "Events enabled"), "{lines:?}");
    let ms: f64 = csv_value(&lines, "task-clock").parse().expect("counted");
    // One spinning thread counts at most the wall time of the window it was enabled in.
    let bound = window.as_secs_f64() * 1000.0 + 5.0;
    assert!(ms > 0.0 && ms <= bound, "{ms} ms counted in a {bound} ms window: {lines:?}");
    assert!(drain(&mut ack_r).is_empty());
}

/// `fd:CTL,ACK` on descriptors the shell opened (`8<>ctl 9<>ack`), with perf's other
/// commands: `disable NAME`, an unknown name, a malformed command, `evlist`, `ping`, `stop`
/// and `snapshot` (the one perf does not acknowledge), and a command it does not know (not
/// acknowledged either). Each message is perf's, in the order the commands came.
#[test]
fn inherited_descriptors_take_perfs_commands_in_order() {
    let (dir, ctl, ack) = fifos();
    let stop = dir.path().join("stop");
    let script = format!(
        "exec '{BIN}' stat -x, -e task-clock,context-switches --control fd:8,0x9 -- \
         sh -c \"while [ ! -e '{}' ]; do :; done\" 8<>'{}' 9<>'{}'",
        stop.display(),
        ctl.display(),
        ack.display()
    );
    let mut ctl_w = open_rw(&ctl);
    let mut ack_r = open_rw(&ack);
    let run = Running::spawn(Command::new("sh").args(["-c", &script]));
    let commands: [(&[u8], bool); 8] = [
        (b"disable context-switches\n", true),
        (b"enable no-such-event\n", true),
        (b"enablex\n", true),
        (b"evlist\n", true),
        (b"snapshot\n", false),
        (b"start\n", false),
        (b"stop\n", true),
        (b"ping\n", true),
    ];
    for (command, acked) in commands {
        ctl_w.write_all(command).unwrap();
        if acked {
            assert_eq!(read_ack(&mut ack_r), ACK, "{}", String::from_utf8_lossy(command));
        }
    }
    File::create(&stop).unwrap();
    let (status, lines) = run.finish();
    assert_eq!(status.code(), Some(0), "{lines:?}");
    // No acknowledgement for `snapshot` or `start`: nothing more than the six read.
    assert!(drain(&mut ack_r).is_empty());
    let said: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .take_while(|l| !l.contains(",task-clock,"))
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        said,
        [
            "Event context-switches disabled",
            "failed: can't find 'no-such-event' event",
            "failed: wrong command",
            "task-clock",
            "context-switches",
        ],
        "{lines:?}"
    );
    // task-clock was never disabled: it counted the spinning.
    let ms: f64 = csv_value(&lines, "task-clock").parse().expect("counted");
    assert!(ms > 0.0, "{lines:?}");
}

/// What perf refuses in `--control` is a usage error (129), said with what to give.
#[test]
fn control_arguments_perf_refuses_are_usage_errors() {
    let dir = tempfile::Builder::new().prefix("tmetric-control-").tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "").unwrap();
    let missing = dir.path().join("missing");
    let (_fifos, ctl, _) = fifos();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&ctl, &link).unwrap();
    for (spec, says) in [
        (format!("fifo:{}", link.display()), "is a symbolic link"),
        ("pipe:3".to_string(), "expected fd:CTL[,ACK]"),
        ("fd:".to_string(), "expected fd:CTL[,ACK]"),
        ("fd:3,".to_string(), "expected fd:CTL[,ACK]"),
        ("fd:987".to_string(), "descriptor 987 is not open"),
        (format!("fifo:{}", plain.display()), "is not a FIFO"),
        (format!("fifo:{}", missing.display()), "No such file or directory"),
    ] {
        let out = tmetric(&["stat", "--control", &spec, "-e", "task-clock", "true"]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(129), "{spec}: {text}");
        assert!(text.contains(&format!("--control {spec}: ")) && text.contains(says), "{text}");
    }
}

/// `-D N`: perf's `Events disabled` before the command starts, `Events enabled` after the
/// delay, then the counts. `-D -1` without `--control`: counting never starts, and the
/// counts say `<not counted>`.
#[test]
fn delays_say_events_disabled_and_enabled() {
    let out = tmetric(&["stat", "-x,", "-D", "50", "-e", "task-clock", "--", "sleep", "0.2"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..2], ["Events disabled", "Events enabled"], "{text}");
    assert!(lines[2].contains(",task-clock,"), "{text}");
    let out = tmetric(&["stat", "-x,", "-D", "-1", "-e", "task-clock", "--", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Events disabled", "{text}");
    assert!(!text.contains("Events enabled"), "{text}");
    assert!(lines[1].starts_with("<not counted>,msec,task-clock,"), "{text}");
}

/// A command that ends during `-D N` does not cut the delay short: perf's `enable_counters`
/// sleeps all of it, then says `Events enabled` (the command's counters then count nothing).
#[test]
fn a_command_that_ends_during_the_delay_leaves_it_whole() {
    let started = Instant::now();
    let out = tmetric(&["stat", "-x,", "-D", "400", "-e", "task-clock", "--", "true"]);
    let took = started.elapsed();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(took >= Duration::from_millis(400), "{took:?}: {text}");
    let said: Vec<&str> = text.lines().filter(|l| l.starts_with("Events")).collect();
    assert_eq!(said, ["Events disabled", "Events enabled"], "{text}");
}

/// `--interval-count` without a workload ends the run after that many intervals; with
/// `-I 0` there are no intervals (perf's unsigned 0 is "off").
#[test]
fn interval_count_ends_a_system_wide_run_and_i_0_is_no_interval() {
    let out =
        tmetric(&["stat", "-a", "-x,", "-I", "100", "--interval-count", "2", "-e", "cpu-clock"]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains(",cpu-clock,")).count(), 2, "{text}");
    let out = tmetric(&["stat", "-I", "0", "-e", "task-clock", "--", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Performance counter stats for 'true'"), "{text}");
    assert!(!text.contains("#           time"), "{text}");
}

/// perf 6.12 refuses `--interval-clear` when its output is not a terminal, and `cmd_stat`
/// then returns -1: exit 255.
#[test]
fn interval_clear_without_a_terminal_exits_255() {
    let out = tmetric(&["stat", "-I", "100", "--interval-clear", "-e", "task-clock", "true"]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(255), "{text}");
    assert!(text.contains("--interval-clear does not work with output"), "{text}");
}

/// A system-wide run that a signal ends prints its counts, then dies by that signal as
/// perf's `sig_atexit` makes perf die (a shell sees 130 for Ctrl-C); SIGTERM, which perf
/// does not catch, ends tmetric the same way but after the counts.
#[test]
fn a_signal_that_ends_a_system_wide_run_kills_tmetric_after_the_counts() {
    for (signal, name) in [(libc::SIGINT, "INT"), (libc::SIGTERM, "TERM")] {
        let mut run = Running::spawn(Command::new(BIN).args([
            "stat",
            "-a",
            "-x,",
            "-I",
            "100",
            "-e",
            "cpu-clock",
        ]));
        // Counting has begun once an interval is printed.
        run.wait_for(|l| l.contains(",cpu-clock,"));
        let pid = run.child.id().to_string();
        let sent = Command::new("kill").args([&format!("-{name}"), &pid]).status().unwrap();
        assert!(sent.success());
        let (status, lines) = run.finish();
        assert_eq!(status.signal(), Some(signal), "{name}: {status:?} {lines:?}");
        assert!(lines.iter().filter(|l| l.contains(",cpu-clock,")).count() >= 2, "{lines:?}");
    }
}

/// `-r N -I MS`: every run prints its intervals, each timed from its own start, and no
/// totals; with `--summary` the mean of the runs follows, with its spread.
#[test]
fn repeats_print_each_runs_intervals() {
    let args = ["stat", "-x,", "-I", "100", "-r", "2", "-e", "task-clock", "--", "sleep", "0.25"];
    let out = tmetric(&args);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let times: Vec<f64> = text
        .lines()
        .filter(|l| l.contains(",task-clock,"))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    // Each run: two whole intervals and the one its end cuts short (a loaded machine that
    // wakes tmetric late may fold them), then the next run starts again from 0.
    let restarts = times.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(restarts, 1, "{text}");
    assert!((2..=6).contains(&times.len()), "{text}");
    assert!(!text.contains("summary"), "{text}");
    let mut with_summary = args.to_vec();
    with_summary.insert(1, "--summary");
    let out = tmetric(&with_summary);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let summary: Vec<&str> = text.lines().filter(|l| l.starts_with("summary,")).collect();
    assert_eq!(summary.len(), 1, "{text}");
    assert!(summary[0].contains(",task-clock,"), "{text}");
}

/// `--interval-clear` with standard error on a terminal: perf `puts`s the clear sequence to
/// standard output before each interval, wherever that goes. Run under `script`, which gives
/// the command a terminal.
#[test]
fn interval_clear_writes_the_clear_sequence_to_standard_output() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("no `script` (util-linux) to give tmetric a terminal: not checked");
        return;
    }
    let dir = tempfile::Builder::new().prefix("tmetric-clear-").tempdir().unwrap();
    let out = dir.path().join("stdout");
    let command = format!(
        "'{BIN}' stat -I 100 --interval-clear --interval-count 2 -e task-clock sleep 0.5 > '{}'",
        out.display()
    );
    let run = Command::new("script").args(["-qec", &command, "/dev/null"]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stdout));
    let cleared = std::fs::read(&out).unwrap();
    assert_eq!(cleared, b"\x1b[H\x1b[2J\n\x1b[H\x1b[2J\n", "{}", String::from_utf8_lossy(&cleared));
    // The counts went to the terminal.
    let terminal = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        terminal.lines().filter(|l| l.contains(" msec task-clock")).count(),
        2,
        "{terminal}"
    );
}

/// `--timeout`: perf sends the workload SIGTERM, says so with `psignal` (`sleep:
/// Terminated`) and exits with WEXITSTATUS, 0.
#[test]
fn a_timeout_stops_the_workload_as_perf_says_it() {
    let start = Instant::now();
    let out = tmetric(&["stat", "--timeout", "200", "-e", "task-clock", "--", "sleep", "30"]);
    let text = stderr(&out);
    assert!(start.elapsed() < Duration::from_secs(25), "it waited for sleep 30: {text}");
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.lines().next(), Some("sleep: Terminated"), "{text}");
    assert!(text.contains("Performance counter stats for 'sleep 30'"), "{text}");
}

/// `-r N` with a command a signal kills: perf's `psignal` line for every run, as each ends,
/// before the counts; exit 0 (WEXITSTATUS).
#[test]
fn every_repeated_run_says_how_its_command_died() {
    let out = tmetric(&["stat", "-r", "3", "-e", "task-clock", "--", "sh", "-c", "kill -9 $$"]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..3], ["sh: Killed"; 3], "{text}");
    assert!(lines[4].contains("Performance counter stats for 'sh -c kill -9 $$' (3 runs)"));
}

/// `-r N -D MS`: every run is delayed and says so, as perf's `__run_perf_stat` does for each.
#[test]
fn every_repeated_run_has_its_delay() {
    let out = tmetric(&["stat", "-r", "2", "-D", "20", "-e", "task-clock", "--", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let said: Vec<&str> = text.lines().filter(|l| l.starts_with("Events")).collect();
    assert_eq!(said, ["Events disabled", "Events enabled"].repeat(2), "{text}");
}

/// After `--timeout`, perf prints `0.000000000 seconds user` (its event loop reaps the command
/// before `wait4` reads the usage); tmetric prints the command's real CPU time, on the same
/// lines: a spinning command's user and system time add up to the CPU time its task-clock
/// counted (on a loaded machine the spinner may get little of the 300 ms, so the run's
/// length is no measure).
#[test]
fn a_timed_out_command_has_its_real_user_and_system_time() {
    let out = tmetric(&[
        "stat",
        "--timeout",
        "300",
        "-e",
        "task-clock",
        "--",
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let seconds = |what: &str| -> f64 {
        let line = text.lines().find(|l| l.trim_end().ends_with(what)).expect(what);
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let cpu = seconds("seconds user") + seconds("seconds sys");
    let counted = text
        .lines()
        .find(|l| l.contains("msec task-clock"))
        .and_then(|l| l.split_whitespace().next()?.replace(',', "").parse::<f64>().ok())
        .map(|ms| ms / 1e3)
        .expect("task-clock is printed");
    assert!(counted > 0.0, "{text}");
    // Both count the spinner's time on a CPU; the clock ticks of `sh`'s start-up and the
    // reading's moments part them by a few milliseconds.
    assert!((cpu - counted).abs() <= 0.25 * counted + 0.005, "{cpu} against {counted}: {text}");
}
