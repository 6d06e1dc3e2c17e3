//! Issue 22, end to end through the binary: nothing written where it should not be (the
//! simulated machine's private directory, 0600 files, a report never overwriting its input),
//! the workload given exactly what perf gives its own (signals, mask, descriptors, limits,
//! environment) and never harmed (a record file that cannot be written), runs that end when
//! their targets do, signals as perf 6.12 takes them, record files whose damage is named, and
//! messages that say what happened.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{bash_in, stderr, stdout, tmetric};

const BIN: &str = env!("CARGO_BIN_EXE_tmetric");

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("tmetric-secure-").tempdir().expect("a scratch directory")
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[track_caller]
fn fails_with(out: &Output, code: i32, needle: &str) -> String {
    let text = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{text}");
    assert!(text.contains(needle), "expected `{needle}` in:\n{text}");
    assert!(!text.contains("panicked"), "{text}");
    text
}

// ---- 1. the simulated machine's tree ---------------------------------------------------

/// The tree went to `$TMPDIR/tmetric-pmu-sim-<pid>-<model>`, reusing a directory that was
/// there and following links in it: a link planted at `proc/cpuinfo` (here by the shell that
/// then becomes tmetric, so the pid is known) redirected root's write. Now the tree goes to a
/// fresh 0700 directory of this run's own, the planted target is untouched, and the
/// directory is gone afterwards while the planted one is left as it was.
#[test]
fn the_simulated_tree_is_private_and_planted_links_are_not_followed() {
    let dir = scratch();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = bash_in(
        dir.path(),
        r#"plant="$TMPDIR/tmetric-pmu-sim-$$-sapphirerapids"
           mkdir -p "$plant/proc" && ln -s "$TMPDIR/victim" "$plant/proc/cpuinfo"
           exec "$T" --pmu-sim sapphirerapids -x, -e task-clock -a -- \
             sh -c 'for d in "$TMPDIR"/tmetric-pmu-sim-*; do stat -c "%a %U %n" "$d"; done'"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the link was followed");
    // While the workload ran: the planted directory (755) and one private 0700 directory
    // with a random name, both root's here.
    let listing = stdout(&out);
    let private: Vec<&str> =
        listing.lines().filter(|l| l.contains("/tmetric-pmu-sim-sapphirerapids-")).collect();
    assert_eq!(private.len(), 1, "{listing}");
    assert!(private[0].starts_with("700 "), "{listing}");
    assert!(private[0].contains("/tmetric-pmu-sim-sapphirerapids-"), "{listing}");
    // Afterwards: only what the test made.
    let left = names_in(dir.path());
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&"victim".to_string()), "{left:?}");
    let planted = left.iter().find(|n| n.starts_with("tmetric-pmu-sim-")).unwrap();
    let link = dir.path().join(planted).join("proc/cpuinfo");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
}

/// `TMPDIR=/nonexistent/a/b` created those parents (as root, left behind); now it is a
/// clear error and nothing is created.
#[test]
fn a_missing_temporary_directory_is_an_error_and_nothing_is_created() {
    let dir = scratch();
    let missing = dir.path().join("nonexistent/a/b");
    let out = Command::new(BIN)
        .args(["--pmu-sim", "sapphirerapids", "-e", "task-clock", "-a", "--", "true"])
        .env("TMPDIR", &missing)
        .output()
        .unwrap();
    let text = fails_with(&out, 2, "cannot create a private directory for the simulated machine");
    assert!(text.contains(&missing.display().to_string()), "{text}");
    assert!(text.contains("set TMPDIR"), "{text}");
    assert!(names_in(dir.path()).is_empty(), "{:?}", names_in(dir.path()));
}

/// Under `ulimit -n 7` the tree was left behind (removing it needed a descriptor per level);
/// at every low limit it is now removed, and the message says descriptors ran out (it said
/// "cannot tell this machine's cpuid" at 5).
#[test]
fn the_simulated_tree_is_removed_when_descriptors_run_out() {
    let dir = scratch();
    for limit in [4, 5, 6, 7, 8, 10, 12] {
        let out = bash_in(
            dir.path(),
            &format!(
                r#"ulimit -n {limit}; exec "$T" --pmu-sim sapphirerapids -M TopdownL1 -a -- sleep 0.05"#
            ),
        );
        let text = stderr(&out);
        assert!(names_in(dir.path()).is_empty(), "limit {limit}: {:?}", names_in(dir.path()));
        assert!(!text.contains("cpuid"), "limit {limit}: {text}");
        if !out.status.success() {
            assert!(text.contains("descriptors ran out"), "limit {limit}: {text}");
            assert!(text.contains("ulimit -n"), "limit {limit}: {text}");
        }
    }
}

// ---- 4. -p and -t end with their targets -----------------------------------------------

/// `tmetric -p PID` counted until Ctrl-C after the process had exited, so the elapsed time
/// (and every rate) included the idle tail; now it ends when the process does.
#[test]
fn attaching_ends_when_the_process_exits() {
    let mut target = Command::new("sleep").arg("0.4").spawn().unwrap();
    let pid = target.id().to_string();
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args(["-x,", "-e", "task-clock", "-p", &pid])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Reaped here, so the process is really gone (not a zombie) once it exits.
    target.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        let out = child.wait_with_output().unwrap();
        panic!("tmetric -p went on after the process exited: {}", stderr(&out));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(stderr(&out).contains(",task-clock,"), "{}", stderr(&out));
}

/// The child the `-t` test watches (does nothing in a normal run): prints the id of a thread
/// that lives 300 ms, then keeps the process alive until its input ends.
#[test]
#[ignore = "the child process of `attaching_to_a_thread_ends_when_that_thread_exits`"]
fn short_thread() {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        tx.send(link.file_name().unwrap().to_string_lossy().into_owned()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    });
    println!("tid {}", rx.recv().unwrap());
    t.join().unwrap();
    for _ in std::io::stdin().lock().lines() {}
}

/// `-t TID` ends when that thread exits, though its process lives on.
#[test]
fn attaching_to_a_thread_ends_when_that_thread_exits() {
    let mut process = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "cli_secure::short_thread",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
    let tid = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| Some(l.split_once("tid ")?.1.trim().to_string()))
        .expect("the helper prints its thread's id");
    let started = Instant::now();
    let out = Command::new("timeout")
        .args(["-s", "INT", "5", BIN, "-x,", "-e", "task-clock", "-t", &tid])
        .output()
        .unwrap();
    let took = started.elapsed();
    drop(process.stdin.take());
    process.wait().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(took < Duration::from_secs(3), "tmetric -t ran {took:?}: {}", stderr(&out));
}

/// `-p PID COMMAND` (perf's idiom `-p 1234 sleep 5`) was refused; now the process is counted
/// while the command runs, the command only times the run, and its exit status is tmetric's.
#[test]
fn a_command_with_pid_times_the_count() {
    let mut busy = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
    let pid = busy.id().to_string();
    let started = Instant::now();
    let out =
        tmetric(&["-x,", "-e", "task-clock", "-p", &pid, "--", "sh", "-c", "sleep 0.5; exit 3"]);
    let took = started.elapsed();
    let _ = busy.kill();
    let _ = busy.wait();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(5), "{took:?}");
    // The spinning process was counted, not the sleeping command (a millisecond or two). One
    // spinning thread cannot run longer than the wall time around the whole run: a hard bound
    // on a loaded machine, where the kernel's tick-sampled utime/stime (the earlier bound)
    // undercounts by tens of milliseconds.
    let msec: f64 = text
        .lines()
        .find(|l| l.contains(",task-clock,"))
        .and_then(|l| l.split(',').next()?.parse().ok())
        .expect(&text);
    let wall = took.as_secs_f64() * 1000.0;
    assert!(msec > 20.0 && msec <= wall, "{msec} ms counted in {wall} ms of wall time: {text}");
}

// ---- 5. record never harms the workload ------------------------------------------------

/// A record file that could not be written killed the workload (SIGKILL) with -I; `stat -o`
/// on the same full disk let it finish. Now the record stops, the workload finishes, the
/// counts print, and the run fails at its end (exit 2, as `stat -o`).
#[test]
fn an_unwritable_record_never_stops_the_workload() {
    let dir = scratch();
    let marker = dir.path().join("finished");
    let script = format!("sleep 0.3; touch {}", marker.display());
    for extra in [&["-I", "20"][..], &[][..]] {
        let _ = std::fs::remove_file(&marker);
        let mut args =
            vec!["record", "--format", "jsonl", "-a", "-x,", "-e", "task-clock", "-o", "/dev/full"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", &script]);
        let out = tmetric(&args);
        let text = fails_with(&out, 2, "cannot write the record file /dev/full");
        assert!(marker.exists(), "{extra:?}: the workload was stopped: {text}");
        assert!(text.contains("the record file is incomplete"), "{text}");
        assert!(text.lines().any(|l| l.contains(",task-clock,")), "{extra:?}: {text}");
    }
}

// ---- 6. damaged record files -----------------------------------------------------------

/// Records `-a -I 50` and returns the file's lines.
fn recorded_lines(dir: &Path) -> Vec<String> {
    let file = dir.join("run.jsonl");
    let out = tmetric(&[
        "record",
        "--format",
        "jsonl",
        "-a",
        "-I",
        "50",
        "-e",
        "task-clock",
        "-o",
        &file.display().to_string(),
        "--",
        "sleep",
        "0.12",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read_to_string(file).unwrap().lines().map(str::to_string).collect()
}

fn report_of(dir: &Path, lines: &[String]) -> Output {
    let file = dir.join("edited.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    tmetric(&["report", "-i", &file.display().to_string(), "-A"])
}

/// A duplicated line was summed (task-clock doubled, "3.0 CPUs" on a 2-CPU machine, exit 0),
/// an `end` line's interval count was not checked, and a CPU missing from the recorded
/// topology vanished from `report -A`: each is now an error naming its line.
#[test]
fn damaged_record_files_are_errors_naming_the_line() {
    let dir = scratch();
    let lines = recorded_lines(dir.path());
    assert!(report_of(dir.path(), &lines).status.success());

    let last_final = lines.iter().rposition(|l| l.contains(r#""t":"final""#)).unwrap();
    let mut doubled = lines.clone();
    doubled.insert(last_final + 1, lines[last_final].clone());
    let out = report_of(dir.path(), &doubled);
    let text = fails_with(&out, 2, &format!("edited.jsonl:{}: the final counts", last_final + 2));
    assert!(text.contains(&format!("again (first at line {})", last_final + 1)), "{text}");

    let first_interval = lines.iter().position(|l| l.contains(r#""t":"interval""#)).unwrap();
    let mut doubled = lines.clone();
    doubled.insert(first_interval + 1, lines[first_interval].clone());
    fails_with(&report_of(dir.path(), &doubled), 2, "interval 1's counts of group 0 on CPU");

    let end = lines.len() - 1;
    let mut wrong_end = lines.clone();
    let n: u64 = lines.iter().filter_map(|l| interval_number(l)).max().unwrap();
    wrong_end[end] =
        lines[end].replace(&format!(r#""intervals":{n}"#), &format!(r#""intervals":{}"#, n + 1));
    assert_ne!(wrong_end[end], lines[end]);
    fails_with(
        &report_of(dir.path(), &wrong_end),
        2,
        &format!(
            "edited.jsonl:{}: the `end` line counts {} intervals, but the file holds {n}",
            end + 1,
            n + 1
        ),
    );

    // CPU 0 taken out of the topology (its list and its place): its counts are named.
    let mut header: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    let topo = &mut header["topology"];
    topo["cpus"].as_array_mut().unwrap().retain(|c| c != 0);
    topo["places"].as_array_mut().unwrap().retain(|p| p[0] != 0);
    let mut moved = lines.clone();
    moved[0] = header.to_string();
    fails_with(
        &report_of(dir.path(), &moved),
        2,
        "counts for CPU 0, which the header's topology does not list",
    );
}

fn interval_number(line: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v["t"] == "interval").then(|| v["n"].as_u64()).flatten()
}

// ---- 7. report never overwrites its input ----------------------------------------------

#[test]
fn report_refuses_to_write_over_its_input() {
    let dir = scratch();
    recorded_lines(dir.path());
    let file = dir.path().join("run.jsonl");
    let before = std::fs::read(&file).unwrap();
    let symlink = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&file, &symlink).unwrap();
    let hardlink = dir.path().join("hard.jsonl");
    std::fs::hard_link(&file, &hardlink).unwrap();
    for output in [&file, &symlink, &hardlink] {
        let out = tmetric(&[
            "report",
            "-i",
            &file.display().to_string(),
            "-o",
            &output.display().to_string(),
        ]);
        fails_with(&out, 2, "is the input file");
        assert_eq!(std::fs::read(&file).unwrap(), before, "-o {}", output.display());
    }
    // Another file is fine.
    let other = dir.path().join("report.txt");
    let out =
        tmetric(&["report", "-i", &file.display().to_string(), "-o", &other.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&other).unwrap().contains("task-clock"));
}

// ---- 8. the workload's environment -----------------------------------------------------

/// Runs `prefix PROGRAM` for two probe programs under a shell with a lowered soft
/// descriptor limit, signals ignored (SIGQUIT and SIGINT as a shell starts background jobs,
/// SIGHUP as `nohup` does, and SIGALRM, SIGUSR1, SIGCHLD) and descriptor 5 open, in `dir`, and returns what the workload saw of what it inherited: the signal fields
/// of its `/proc/self/status`, its limits, its environment (sorted; `_`, which bash sets per
/// command, left out) and its open descriptors. The probes are single programs, not a shell,
/// whose own signal handling around its forks would show in the fields.
fn probe_under(dir: &Path, prefix: &str) -> Vec<String> {
    let script = format!(
        "ulimit -S -n 512; trap '' QUIT INT HUP ALRM USR1 CHLD; exec 5</dev/null
         {prefix} cat /proc/self/status /proc/self/limits /proc/self/environ
         echo; {prefix} ls /proc/self/fd"
    );
    let out = bash_in(dir, &script);
    assert!(out.status.success(), "{prefix}: {}", stderr(&out));
    let text = stdout(&out);
    let mut seen: Vec<String> = Vec::new();
    for line in text.split(['\n', '\0']) {
        // `SigQ` counts signals queued for the user across all its processes: not inherited.
        let keep = (line.starts_with("Sig") && !line.starts_with("SigQ"))
            || line.starts_with("ShdPnd")
            || line.starts_with("Max ")
            || (line.contains('=') && !line.starts_with("_="))
            || (!line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()));
        if keep {
            seen.push(line.to_string());
        }
    }
    seen.sort();
    seen
}

fn field(seen: &[String], name: &str) -> u64 {
    let line = seen.iter().find(|l| l.starts_with(name)).expect(name);
    u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
}

const fn bit(signal: u32) -> u64 {
    1 << (signal - 1)
}

/// perf 6.12's workload gets SIGINT, SIGCHLD, SIGALRM, SIGABRT and SIGTERM with their
/// default action whatever perf was started with (perf catches the first four before it
/// forks, and `exec` resets them; its child resets SIGTERM); every other ignored signal stays
/// ignored (SIGUSR1 too: perf catches it only after the fork).
const PERF_RESETS: u64 = bit(2) | bit(17) | bit(14) | bit(6) | bit(15);

/// `seen` with `SigIgn` as perf's workload would have it.
fn as_perf_gives(seen: &[String]) -> Vec<String> {
    let ignored = field(seen, "SigIgn") & !PERF_RESETS;
    let mut out: Vec<String> =
        seen.iter()
            .map(|l| {
                if l.starts_with("SigIgn") { format!("SigIgn:\t{ignored:016x}") } else { l.clone() }
            })
            .collect();
    out.sort();
    out
}

/// The workload ran with SIGPIPE ignored (Rust's runtime ignores it), so `seq | head -1`
/// saw a write error instead of dying of the signal; tmetric's raised descriptor limit and
/// any descriptor it opened could leak too. Now the workload sees what a command run
/// directly by the shell sees, but for the signals perf's workload always gets with their
/// default action, under every way of running one (`-o`, `-I`, `-r`, `record`, `-a`,
/// `--pmu-sim`); and what perf's workload sees, less perf's own additions: perf blocks
/// SIGWINCH in its workload (its TUI's `pthread__block_sigwinch`) and adds its variables
/// (`PERF_BUILDID_DIR`, `PREFIX`, its exec path in `PATH`).
#[test]
fn the_workload_gets_what_perfs_workload_gets() {
    let dir = scratch();
    let seen_directly = probe_under(dir.path(), "");
    let ignored = field(&seen_directly, "SigIgn");
    for signal in [1, 2, 3, 10, 14, 17] {
        assert_ne!(ignored & bit(signal), 0, "{signal}: {seen_directly:?}");
    }
    let direct = as_perf_gives(&seen_directly);
    assert_eq!(field(&direct, "SigIgn") & (bit(1) | bit(3) | bit(2)), bit(1) | bit(3));
    assert!(direct.iter().any(|l| l.starts_with("Max open files") && l.contains(" 512 ")));
    assert!(direct.iter().any(|l| l == "5"), "{direct:?}");
    for prefix in [
        r#""$T" -e task-clock -o "$TMPDIR/counts" --"#,
        r#""$T" -e task-clock -I 50 -o "$TMPDIR/counts" --"#,
        r#""$T" record -e task-clock -o "$TMPDIR/run.jsonl" --"#,
        r#""$T" -a -e task-clock 2>/dev/null --"#,
        r#""$T" --pmu-sim icelake -e cycles -o "$TMPDIR/counts" --"#,
    ] {
        assert_eq!(probe_under(dir.path(), prefix), direct, "under {prefix}");
    }
    // -r 2 runs each probe twice: both runs see the same.
    let twice: Vec<String> = direct.iter().flat_map(|l| [l.clone(), l.clone()]).collect();
    assert_eq!(probe_under(dir.path(), r#""$T" -e task-clock -r 2 -o "$TMPDIR/counts" --"#), twice);
    if !Path::new("/usr/bin/perf").exists() {
        eprintln!("skipped the comparison with perf: /usr/bin/perf is not installed");
        return;
    }
    let perf = probe_under(dir.path(), "perf stat -e task-clock 2>/dev/null --");
    let tm = probe_under(dir.path(), r#""$T" -e task-clock 2>/dev/null --"#);
    for name in ["SigPnd", "ShdPnd", "SigIgn", "SigCgt"] {
        assert_eq!(field(&tm, name), field(&perf, name), "{name}\n{tm:?}\n{perf:?}");
    }
    let sigwinch = 1u64 << (28 - 1);
    assert_eq!(field(&tm, "SigBlk"), field(&perf, "SigBlk") & !sigwinch, "{tm:?}\n{perf:?}");
    let rest = |seen: &[String]| -> Vec<String> {
        let mut rest: Vec<String> = seen
            .iter()
            .filter(|l| !l.starts_with("Sig") && !l.starts_with("ShdPnd"))
            .filter(|l| !l.starts_with("PERF_BUILDID_DIR=") && !l.starts_with("PREFIX="))
            .map(|l| l.replacen("PATH=/usr/lib/perf-core:", "PATH=", 1))
            .map(|l| l.replacen("PATH=/usr/libexec/perf-core:", "PATH=", 1))
            .collect();
        rest.sort();
        rest
    };
    assert_eq!(rest(&tm), rest(&perf));
}

/// The effect of the SIGPIPE above: `seq 1000000 | head -1` ends seq by the signal (141)
/// under tmetric, as in a shell and under perf; it was `seq: write error` (exit 1).
#[test]
fn a_pipe_in_the_workload_ends_on_sigpipe() {
    let out = tmetric(&[
        "-o",
        "/dev/null",
        "--",
        "bash",
        "-c",
        "seq 1000000 | head -1 >/dev/null; echo ${PIPESTATUS[0]}",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "141", "{}", stderr(&out));
}

/// Started with SIGCHLD ignored, tmetric failed ("waiting for the workload failed: ECHILD":
/// the kernel reaped the workload itself); perf catches SIGCHLD, and so the workload is
/// waited for now, its status kept.
#[test]
fn an_ignored_sigchld_does_not_lose_the_workload() {
    let dir = scratch();
    let out = bash_in(dir.path(), r#"trap '' CHLD; exec "$T" -x, -e task-clock -- sh -c 'exit 3'"#);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains(",task-clock,"), "{}", stderr(&out));
}

// ---- 9. signals ------------------------------------------------------------------------

/// SIGUSR1 killed tmetric (138) and left the `-o` file empty; perf 6.12 ends its run on it,
/// prints the counts, exits 0 and sends its workload SIGTERM: so does tmetric now.
#[test]
fn sigusr1_ends_the_run_with_the_counts_printed() {
    let dir = scratch();
    let file = dir.path().join("counts");
    let child = Command::new(BIN)
        .args(["-x,", "-e", "task-clock", "-o", &file.display().to_string(), "--", "sleep", "10"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let started = Instant::now();
    Command::new("kill").args(["-USR1", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "tmetric waited for sleep 10");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let counts = std::fs::read_to_string(&file).unwrap();
    assert!(counts.lines().any(|l| l.contains(",task-clock,")), "{counts}");
    // perf sends its SIGTERM after the counts, so it prints no `sleep: Terminated`.
    assert!(!stderr(&out).contains("Terminated"), "{}", stderr(&out));
}

/// A shell starts a background job with SIGQUIT ignored, and `-a -I` then ignored
/// `kill -QUIT`; now it ends the run and prints what was counted.
#[test]
fn sigquit_ends_a_background_interval_run() {
    let dir = scratch();
    let out = bash_in(
        dir.path(),
        r#"trap '' QUIT
           "$T" -a -I 100 -x, -e task-clock -o "$TMPDIR/counts" & pid=$!
           sleep 0.5; kill -QUIT $pid
           for i in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
           if kill -0 $pid 2>/dev/null; then kill -INT $pid; echo "still running"; fi
           wait $pid; echo "status $?""#,
    );
    let text = stdout(&out);
    assert!(!text.contains("still running"), "{text}");
    assert!(text.contains("status 0"), "{text} {}", stderr(&out));
    let counts = std::fs::read_to_string(dir.path().join("counts")).unwrap();
    assert!(counts.lines().filter(|l| l.contains(",task-clock,")).count() >= 2, "{counts}");
}

// ---- 11. messages ----------------------------------------------------------------------

#[test]
fn cpu_lists_say_what_is_wrong_with_them() {
    let text = fails_with(&tmetric(&["-C", "", "--", "true"]), 2, "-C ``: no CPU given");
    assert!(!text.contains("nothing could be counted"), "{text}");
    let text = fails_with(&tmetric(&["-C", "0-99999999", "--", "true"]), 2, "are not online");
    assert!(!text.contains("expected a CPU list"), "{text}");
    assert!(text.contains("-99999999 are not online (online: 0"), "{text}");
    fails_with(&tmetric(&["-C", "99999999999", "--", "true"]), 2, "CPU 99999999999 is too large");
    fails_with(&tmetric(&["-C", "1-0", "--", "true"]), 2, "runs backwards");
    fails_with(&tmetric(&["-C", "0,x", "--", "true"]), 2, "`x` is not a CPU number or range");
}

#[test]
fn a_full_standard_output_is_named() {
    for args in [&["list", "models"][..], &["eval", "--expr", "1 + 1"][..]] {
        let out = Command::new(BIN)
            .args(args)
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        let text = fails_with(&out, 2, "cannot write to standard output: No space left on device");
        assert!(!text.contains("os error"), "{text}");
    }
}

#[test]
fn plan_refuses_a_sysfs_tree_that_is_not_there() {
    let out = tmetric(&["plan", "--sysfs", "/nonexistent", "-M", "TopdownL1"]);
    let text = fails_with(
        &out,
        2,
        "--sysfs /nonexistent: cannot read /nonexistent/bus/event_source/devices: give the root of a sysfs (/sys) tree",
    );
    assert!(stdout(&out).is_empty(), "planned anyway: {}", stdout(&out));
    assert!(!text.contains("cannot find metric"), "{text}");
}

#[test]
fn an_empty_report_file_is_said_to_be_empty() {
    let dir = scratch();
    let file = dir.path().join("perf.data");
    std::fs::write(&file, b"").unwrap();
    let out = tmetric(&["report", "-i", &file.display().to_string()]);
    let text = fails_with(&out, 2, "the file is empty (0 bytes)");
    assert!(text.contains("perf.data"), "{text}");
    assert!(!text.contains("not a tmetric record"), "{text}");
}

// ---- 12. modes -------------------------------------------------------------------------

/// Record files (which hold the command line) were created 0644; perf creates perf.data
/// 0600. Every file tmetric creates is 0600 now, whatever the umask lets through.
#[test]
fn created_files_are_private() {
    let dir = scratch();
    let out = bash_in(
        dir.path(),
        r#"umask 022
           "$T" record -e task-clock -o run.jsonl -- true &&
           "$T" -e task-clock -o counts -- true &&
           "$T" report -i run.jsonl -o report.txt"#,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for name in ["run.jsonl", "counts", "report.txt"] {
        let mode = std::fs::metadata(dir.path().join(name)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{name}: {mode:o}");
    }
}
