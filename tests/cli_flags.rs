//! perf's `stat` flags that change what is counted or how it prints, run as the binary on
//! this machine: `-n`, `-q`, `-B`/`--no-big-num` and the locale, `--append`, `-d`,
//! `--table`, `--per-node`/`--per-cache`/`--per-cluster`, and perf's refusals.

use std::process::{Command, Output};

use crate::support::{check, check_all, stderr, tmetric};

fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tmetric"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn null_run_prints_only_the_elapsed_time() {
    let out = check(&["stat", "-n", "--", "sleep", "0.05"], "cli_flags__null_run");
    // The snapshot masks the time; it is the sleep's.
    let text = stderr(&out);
    let elapsed: f64 = text
        .lines()
        .find(|l| l.ends_with(" seconds time elapsed"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((0.05..2.0).contains(&elapsed), "{text}");
}

/// `-q`: counts, notes and warnings are silent; errors still print, with exit status 2.
#[test]
fn quiet_prints_nothing_but_errors() {
    check_all(
        &[
            &["stat", "-q", "-e", "task-clock,cycles", "--", "true"],
            &["stat", "-q", "-e", "no-such-event", "--", "true"],
        ],
        "cli_flags__quiet",
    );
}

/// perf's refusals of flag combinations, in perf's words, with exit status 2.
#[test]
fn perfs_flag_refusals_and_their_messages() {
    check_all(
        &[
            &["stat", "-B", "-x,", "true"],
            &["stat", "--metric-only", "-r", "2", "true"],
            &["stat", "--table", "true"],
            &["stat", "--timeout", "5", "true"],
            &["stat", "--timeout", "100", "-I", "100", "true"],
            &["stat", "-I", "100", "--interval-clear", "-o", "/dev/null", "true"],
            &["stat", "--per-node", "true"],
            &["stat", "--per-cache=L9x", "-a", "true"],
        ],
        "cli_flags__refusals",
    );
}

/// Digits grouped in the user's locale, as perf's `%'` prints them; `--no-big-num` and CSV
/// never group. Locales are compiled into a private directory (`LOCPATH`), so the test
/// needs only `localedef` and the locale sources, which Debian's `locales` package has.
#[test]
fn counts_follow_the_users_locale_as_perfs_do() {
    let scratch = tempfile::Builder::new().prefix("tmetric-locale-").tempdir().unwrap();
    let dir = scratch.path();
    let made = ["en_US", "de_DE"].iter().all(|l| {
        Command::new("localedef")
            .args(["-i", l, "-f", "UTF-8"])
            .arg(dir.join(format!("{l}.UTF-8")))
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !made {
        eprintln!("skipped: localedef or its locale sources are missing");
        return;
    }
    let locpath = dir.to_str().unwrap();
    // cpu-clock over 0.6 s on every CPU: more than 1000 msec, so a group separator shows.
    let clock = |locale: &str, extra: &[&str]| -> String {
        let mut args = vec!["stat", "-a", "-e", "cpu-clock"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["sleep", "0.6"]);
        let out = run_env(&args, &[("LOCPATH", locpath), ("LC_ALL", locale)]);
        let text = stderr(&out);
        assert!(out.status.success(), "{text}");
        text.lines().find(|l| l.contains("cpu-clock")).unwrap().to_string()
    };
    // The count's digits as a shape: `9,999.99`.
    let shape = |line: &str| -> String {
        line.split_whitespace()
            .next()
            .unwrap()
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect()
    };
    let us = clock("en_US.UTF-8", &[]);
    assert!(shape(&us).contains(',') && shape(&us).contains('.'), "{us}");
    assert!(us.contains(" CPUs utilized"), "{us}");
    let de = clock("de_DE.UTF-8", &[]);
    assert!(shape(&de).contains('.') && shape(&de).ends_with(",99"), "{de}");
    // The metric's decimal mark follows the locale too (`2,000 CPUs utilized`).
    let cpus = de.split('#').nth(1).unwrap().split_whitespace().next().unwrap();
    assert!(cpus.contains(','), "{de}");
    let plain = clock("en_US.UTF-8", &["--no-big-num"]);
    assert!(!shape(&plain).contains(','), "{plain}");
    let csv = clock("en_US.UTF-8", &["-x;"]);
    assert!(!csv.split(';').next().unwrap().contains(','), "{csv}");
    // perf itself, where installed and counting here: the same shapes.
    let perf = Command::new("perf")
        .args(["stat", "-a", "-e", "cpu-clock", "sleep", "0.6"])
        .env("LOCPATH", locpath)
        .env("LC_ALL", "de_DE.UTF-8")
        .output();
    if let Ok(perf) = perf
        && perf.status.success()
    {
        let text = String::from_utf8_lossy(&perf.stderr).into_owned();
        let line = text.lines().find(|l| l.contains("cpu-clock")).unwrap();
        assert_eq!(shape(line), shape(&de), "perf: {line}\ntmetric: {de}");
    }
}

#[test]
fn append_adds_to_the_output_file_and_starts_with_perfs_comment() {
    let scratch = tempfile::Builder::new().prefix("tmetric-append-").tempdir().unwrap();
    let dir = scratch.path();
    let file = dir.join("out.txt");
    let path = file.to_str().unwrap();
    for _ in 0..2 {
        let out = tmetric(&["stat", "-e", "task-clock", "-o", path, "--append", "true"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("# started on ").count(), 2, "{text}");
    assert_eq!(text.matches("Performance counter stats for 'true'").count(), 2, "{text}");
    let out = tmetric(&["stat", "-e", "task-clock", "-o", path, "true"]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("# started on ").count(), 1, "without --append: replaced: {text}");
}

#[test]
fn detailed_runs_add_perfs_cache_events() {
    let names = |level: &str| -> Vec<String> {
        let out = tmetric(&["stat", level, "-x,", "--", "true"]);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("tmetric:"))
            .map(|l| l.split(',').nth(2).unwrap().to_string())
            .collect()
    };
    let d = names("-d");
    assert_eq!(
        d[8..],
        ["L1-dcache-loads", "L1-dcache-load-misses", "LLC-loads", "LLC-load-misses"],
        "{d:?}"
    );
    let ddd = names("-ddd");
    assert_eq!(ddd.len(), 8 + 4 + 6 + 2, "{ddd:?}");
    assert_eq!(ddd.last().unwrap(), "L1-dcache-prefetch-misses");
}

/// `-r 3 --table`: perf's header with the number of runs, one table row per run, the final
/// result with its spread.
#[test]
fn repeats_print_the_runs_and_their_table() {
    let out = check(
        &["stat", "-r", "3", "--table", "-e", "task-clock", "--", "true"],
        "cli_flags__repeats_table",
    );
    assert!(out.status.success());
}

/// perf's labels of `--per-node` (`N0`), `--per-cache` (`S0-D0-L3-ID0`) and `--per-cluster`
/// (`S0-D0-CLS0`), from this machine's sysfs, with the number of CPUs each sums.
#[test]
fn node_cache_and_cluster_units_carry_perfs_labels() {
    let sys = std::path::Path::new("/sys/devices/system/cpu");
    let cpus = std::fs::read_to_string(sys.join("online")).unwrap();
    for (flag, prefix) in [("--per-node", "N"), ("--per-cache", "S"), ("--per-cluster", "S")] {
        let out = tmetric(&["stat", flag, "-a", "-x,", "-e", "cpu-clock", "true"]);
        let text = stderr(&out);
        assert!(out.status.success(), "{flag}: {text}");
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(",cpu-clock,")).collect();
        assert!(!lines.is_empty(), "{flag}: {text}");
        let mut total = 0;
        for line in &lines {
            let f: Vec<&str> = line.split(',').collect();
            assert!(f[0].starts_with(prefix), "{flag}: {line}");
            total += f[1].parse::<usize>().unwrap();
        }
        let online = tmetric_runtime::sysfs::parse_cpu_list(cpus.trim()).unwrap().len();
        assert_eq!(total, online, "{flag}: every online CPU in one unit: {text}");
        if flag == "--per-cache" {
            assert!(lines[0].contains("-L") && lines[0].contains("-ID"), "{text}");
        }
        if flag == "--per-cluster" {
            assert!(lines[0].contains("-CLS"), "{text}");
        }
    }
}

/// perf's `--timeout MS`: the command is stopped (SIGTERM) and the counts print; without a
/// command the system-wide run ends there.
#[test]
fn timeout_stops_the_run_and_prints_the_counts() {
    let start = std::time::Instant::now();
    let out = tmetric(&["stat", "--timeout", "200", "-e", "task-clock", "--", "sleep", "5"]);
    let took = start.elapsed().as_secs_f64();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(took < 3.0, "it waited for sleep 5: {took} s");
    let elapsed: f64 = text
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect(&text);
    assert!((0.19..1.0).contains(&elapsed), "{elapsed}: {text}");
    let out = tmetric(&["stat", "-a", "--timeout", "150", "-x,", "-e", "cpu-clock"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let ms: f64 = text
        .lines()
        .find(|l| l.contains(",cpu-clock,"))
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Every online CPU for about 150 ms.
    assert!(ms > 100.0, "{text}");
}

/// Page faults of `dd bs=32M`, counted as `-x,` under `flags`: the buffer is filled by the
/// kernel's copy (faults in kernel mode), the program's own pages fault in user mode.
fn dd_faults(program: &str, flags: &[&str]) -> f64 {
    let mut args = vec!["stat"];
    if program != env!("CARGO_BIN_EXE_tmetric") {
        args.clear();
    }
    args.extend_from_slice(flags);
    args.extend(["-e", "page-faults", "-x,", "--", "dd", "if=/dev/zero", "of=/dev/null"]);
    args.extend(["bs=32M", "count=1"]);
    let out = Command::new(program).args(&args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{program} {flags:?}: {text}");
    let line = text.lines().find(|l| l.contains(",page-faults")).expect("a page-faults row");
    line.split(',').next().unwrap().parse().unwrap_or_else(|_| panic!("a count: {line}"))
}

/// perf's `--all-user` and `--all-kernel` set `exclude_kernel`/`exclude_user` on every
/// counter: the kernel counts each fault in the mode it was taken in, so the two add up to
/// the unfiltered count, and each matches perf's (when installed).
#[test]
fn all_user_and_all_kernel_count_one_mode_each() {
    let tmetric = env!("CARGO_BIN_EXE_tmetric");
    let all = dd_faults(tmetric, &[]);
    let user = dd_faults(tmetric, &["--all-user"]);
    let kernel = dd_faults(tmetric, &["--all-kernel"]);
    assert!(user > 0.0 && kernel > 0.0 && user < all && kernel < all, "{user} {kernel} {all}");
    assert!((user + kernel - all).abs() <= 0.05 * all + 20.0, "{user} + {kernel} vs {all}");
    if std::path::Path::new("/usr/bin/perf").exists() {
        for (flag, ours) in [("--all-user", user), ("--all-kernel", kernel)] {
            let perf = dd_faults("/usr/bin/perf", &["stat", flag]);
            assert!((ours - perf).abs() <= 0.05 * perf + 20.0, "{flag}: {ours} vs perf's {perf}");
        }
    }
}
