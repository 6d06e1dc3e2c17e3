//! Tracepoints on this machine's kernel, for real: globs over tracefs expanded one line per
//! tracepoint in tracefs's own order (perf 6.12's `add_tracepoint_multi_event`), `--filter`
//! set with `PERF_EVENT_IOC_SET_FILTER` on the tracepoints of the `-e` before it, and the
//! counts through `record`/`report` and `eval --from-perf`. The workloads make known system
//! calls (a shell redirection opens with `O_CREAT`), so the counts are exact.

use std::path::{Path, PathBuf};

use crate::support::{check_all, ok, stderr, tmetric};

/// tracefs's `events` directory, when this user can read it (root here); `None` skips.
fn events() -> Option<PathBuf> {
    let dir = Path::new("/sys/kernel/tracing/events");
    if std::fs::read_dir(dir.join("syscalls")).is_ok() {
        return Some(dir.to_path_buf());
    }
    eprintln!("skipped: {} is not readable here (tracefs needs root)", dir.display());
    None
}

/// `(count, name)` of each line of `-x,` output.
fn rows(err: &str) -> Vec<(u64, String)> {
    err.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("tmetric") && l.contains(','))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap_or_else(|_| panic!("a count in {l}")), f[2].to_string())
        })
        .collect()
}

/// Runs `tmetric ARGS` in a fresh directory (the workloads create files there).
fn run_in(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("tmetric runs");
    assert!(out.status.success(), "tmetric {args:?}: {}", stderr(&out));
    out
}

/// The names in a tracefs directory that `keep` accepts, in the directory's order.
fn listed(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "enable" && n != "filter" && keep(n))
        .collect()
}

#[test]
fn a_glob_counts_one_line_per_tracepoint_in_tracefs_order() {
    let Some(events) = events() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // Three redirections: three `openat`s with O_CREAT, whatever the shell loads.
    let out = run_in(
        tmp.path(),
        &["-x,", "-e", "syscalls:sys_enter_open*", "sh", "-c", ": > a; : > b; : > c"],
    );
    let rows = rows(&stderr(&out));
    let expected: Vec<String> =
        listed(&events.join("syscalls"), |n| n.starts_with("sys_enter_open"))
            .into_iter()
            .map(|n| format!("syscalls:{n}"))
            .collect();
    assert!(expected.len() >= 2, "{expected:?}");
    assert_eq!(rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(), expected);
    let openat = rows.iter().find(|r| r.1 == "syscalls:sys_enter_openat").unwrap().0;
    // Two more redirections open exactly two more files.
    let more = run_in(
        tmp.path(),
        &[
            "-x,",
            "-e",
            "syscalls:sys_enter_openat",
            "sh",
            "-c",
            ": > a; : > b; : > c; : > d; : > e",
        ],
    );
    assert_eq!(self::rows(&stderr(&more))[0].0, openat + 2, "{}", stderr(&more));

    // A glob over systems keeps the systems that have the tracepoint (perf stops at the first
    // that does not); `sh -c true` is one process that exits once.
    let out = run_in(tmp.path(), &["-x,", "-e", "*:sched_process_exit", "sh", "-c", "true"]);
    assert_eq!(self::rows(&stderr(&out)), [(1, "sched:sched_process_exit".to_string())]);
    // Every tracepoint of a system, modifiers left out of the printed names as perf does.
    let out = run_in(tmp.path(), &["-x,", "-e", "sched:sched_process_*:u", "true"]);
    let names: Vec<String> = self::rows(&stderr(&out)).into_iter().map(|r| r.1).collect();
    let expected: Vec<String> = listed(&events.join("sched"), |n| n.starts_with("sched_process_"))
        .into_iter()
        .map(|n| format!("sched:{n}"))
        .collect();
    assert_eq!(names, expected);
}

#[test]
fn filters_apply_to_the_tracepoints_of_the_e_before_them() {
    if events().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = ["sh", "-c", ": > a; : > b; : > c; cat a b c"];
    let mut args = vec!["-x,", "-e", "syscalls:sys_enter_openat", "--filter", "flags & 0x40"];
    args.extend(["-e", "syscalls:sys_enter_openat"]);
    args.extend(work);
    let rows = rows(&stderr(&run_in(tmp.path(), &args)));
    // O_CREAT (0x40): only the three redirections; `cat` opens its files read-only.
    assert_eq!(rows[0], (3, "syscalls:sys_enter_openat".to_string()));
    // The second -e has no filter: the redirections, cat's three files and the loaders'.
    assert!(rows[1].0 >= 6, "{rows:?}");
    // Two filters on one event join with `&&`: O_CREAT and mode 0666 (the shell's), then a
    // mode nothing was opened with.
    for (mode, count) in [("0666", 3), ("0600", 0)] {
        let filter = format!("mode == {mode}");
        let mut args = vec!["-x,", "-e", "syscalls:sys_enter_openat", "--filter", "flags & 0x40"];
        args.extend(["--filter", filter.as_str()]);
        args.extend(work);
        let rows = self::rows(&stderr(&run_in(tmp.path(), &args)));
        assert_eq!(rows, [(count, "syscalls:sys_enter_openat".to_string())], "{mode}");
    }
}

#[test]
fn tracepoints_and_filters_are_refused_with_perfs_reasons() {
    if events().is_none() {
        return;
    }
    check_all(
        &[
            &["--filter", "flags & 0x40", "-e", "syscalls:sys_enter_openat", "true"],
            &["-e", "task-clock", "--filter", "flags & 0x40", "true"],
            &["-e", "syscalls:sys_enter_openat", "--filter", "no_such_field == 1", "true"],
            &["-e", "sched:no_such_*", "true"],
            &["-e", "no_such_system*:x", "true"],
        ],
        "cli_tracepoints__refusals",
    );
}

#[test]
fn recorded_tracepoints_report_the_counts_stat_printed() {
    if events().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for format in ["perf", "jsonl"] {
        let data = tmp.path().join(format!("tp.{format}"));
        let mut args = vec!["record", "--format", format, "-o", data.to_str().unwrap(), "-x,"];
        args.extend(["-e", "syscalls:sys_enter_openat", "--filter", "flags & 0x40"]);
        args.extend(["-e", "sched:sched_process_e*", "sh", "-c", ": > a; : > b"]);
        let printed = rows(&stderr(&run_in(tmp.path(), &args)));
        assert_eq!(printed[0], (2, "syscalls:sys_enter_openat".to_string()), "{format}");
        assert!(printed[1..].iter().all(|r| r.1.starts_with("sched:sched_process_e")));
        let report = ok(&["report", "-i", data.to_str().unwrap(), "-x,"]);
        assert_eq!(rows(&stderr(&report)), printed, "{format}");
    }
}

#[test]
fn a_perf_log_of_tracepoints_is_read_as_tracepoints() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("perf.csv");
    // `perf stat -x, -e 'syscalls:sys_enter_open*,task-clock'`, as perf 6.1 printed it here.
    std::fs::write(
        &log,
        "0,,syscalls:sys_enter_openat2,1093110,100.00,,\n\
         3,,syscalls:sys_enter_openat,1093110,100.00,,\n\
         1.09,msec,task-clock,1093110,100.00,0.562,CPUs utilized\n",
    )
    .unwrap();
    let out = tmetric(&["eval", "--from-perf", log.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(err.contains("only software events and tracepoints"), "{err}");
    assert!(err.contains("`syscalls:sys_enter_openat` (line 2)"), "{err}");
}

/// A uprobe made with `perf probe -x libc` (group `probe_libc`, as perf's users make them)
/// and named by a glob counts what perf counts: `-e 'probe_libc:NAME*'` expands to the probe
/// and gives the same number of `malloc` calls as perf's own `perf stat` on the same command.
/// Skipped where perf or uprobes are missing.
#[test]
fn a_uprobe_glob_counts_what_perf_counts() {
    if events().is_none() {
        return;
    }
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    let name = format!("tmetric_{}", std::process::id());
    let added = std::process::Command::new("perf")
        .args(["probe", "-q", "-x", libc, "-a", &format!("{name}=malloc")])
        .output();
    if !added.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: `perf probe -x {libc}` could not add a uprobe here");
        return;
    }
    /// Removes the probe however the test ends.
    struct Probe(String);
    impl Drop for Probe {
        fn drop(&mut self) {
            let _ = std::process::Command::new("perf")
                .args(["probe", "-q", "-d", &format!("probe_libc:{}", self.0)])
                .output();
        }
    }
    let _probe = Probe(name.clone());
    let glob = format!("probe_libc:{name}*");
    // Not through a shell: perf puts its own directory first in the workload's PATH, which
    // a shell parses with a few more `malloc`s (tmetric keeps the user's PATH).
    let command = ["ls", "-d", "/usr"];
    let ours = tmetric(&[&["-x,", "-e", glob.as_str(), "--"][..], &command[..]].concat());
    assert!(ours.status.success(), "{}", stderr(&ours));
    let ours = rows(&stderr(&ours));
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert_eq!(ours[0].1, format!("probe_libc:{name}"));
    assert!(ours[0].0 > 0, "{ours:?}");
    let perf = std::process::Command::new("perf")
        .args([&["stat", "-x,", "-e", glob.as_str(), "--"][..], &command[..]].concat())
        .output()
        .expect("perf runs");
    let theirs = rows(&String::from_utf8_lossy(&perf.stderr));
    assert_eq!(ours, theirs, "perf: {}", String::from_utf8_lossy(&perf.stderr));
}
