//! perf 6.12's `perf stat` options of how a run is made, run as the binary with software
//! events (and the simulated PMU where hardware is needed): `--log-fd`, `--pre`/`--post`,
//! `-S`, `-i`, `--no-scale`, `-T`, `--smi-cost`, `-o -`, `-r 0`, `-r 101`, `--per-cache`'s
//! levels, the `-t`/`-p` title, perf's `--no-X` negations and perf's config files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{Run, check_all, check_runs, stderr, tmetric};

/// A fresh directory of this test's own under cargo's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("perf-forms-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `tmetric ARGS` through `sh -c` in `dir`, for descriptors the shell opens.
fn in_shell(dir: &Path, script: &str, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(script).current_dir(dir).env("T", env!("CARGO_BIN_EXE_tmetric"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The first number of the line naming `event`, without separators.
fn count(text: &str, event: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(event) || l.contains(&format!(" {event} ")))
        .unwrap_or_else(|| panic!("no {event} line in\n{text}"));
    line.split_whitespace().next().unwrap().replace(',', "").parse().unwrap()
}

#[test]
fn log_fd_writes_the_counts_to_the_descriptor_the_shell_opened() {
    let dir = scratch("log-fd");
    let out = in_shell(&dir, "\"$T\" --log-fd 3 -e task-clock true 3>counts.txt", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = std::fs::read_to_string(dir.join("counts.txt")).unwrap();
    assert!(file.contains("Performance counter stats for 'true'"), "{file}");
    assert!(count(&file, "task-clock") > 0.0, "{file}");
    // Unlike -o FILE, no `# started on` line: perf writes that only to files it opens.
    assert!(!file.contains("# started on"), "{file}");
    assert!(!stderr(&out).contains("task-clock"), "{}", stderr(&out));
    // `3>>` appends, with or without --append, since the shell opened the file.
    let out = in_shell(&dir, "\"$T\" --log-fd 3 --append -e task-clock true 3>>counts.txt", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let file = std::fs::read_to_string(dir.join("counts.txt")).unwrap();
    assert_eq!(file.matches("Performance counter stats").count(), 2, "{file}");
    // 0 is perf's default: standard error.
    let out = tmetric(&["--log-fd", "0", "-e", "task-clock", "true"]);
    assert!(stderr(&out).contains("task-clock"), "{}", stderr(&out));
    check_all(
        &[
            &["--log-fd", "-1", "true"],
            &["-o", "x", "--log-fd", "3", "true"],
            &["--log-fd", "87", "-e", "task-clock", "true"],
        ],
        "cli_perf_forms__log_fd_refusals",
    );
}

#[test]
fn pre_and_post_run_around_every_run_and_a_failed_pre_stops_the_run() {
    let dir = scratch("pre-post");
    let script = "\"$T\" -r 3 -S --pre 'echo pre >>log' --post 'echo post >>log' -e task-clock -- sh -c 'echo work >>log'";
    let out = in_shell(&dir, script, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    assert_eq!(log, "pre\nwork\npost\n".repeat(3));
    assert!(stderr(&out).contains("(3 runs)"), "{}", stderr(&out));
    let out = in_shell(&dir, "\"$T\" --pre 'exit 3' -e task-clock -- sh -c 'echo late >>log'", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!std::fs::read_to_string(dir.join("log")).unwrap().contains("late"));
    assert!(stderr(&out).contains("--pre `exit 3` exited with 3"), "{}", stderr(&out));
    // A failed post command is said; the counts it follows still print.
    let out = in_shell(&dir, "\"$T\" --post false -e task-clock true", &[]);
    let text = stderr(&out);
    assert!(out.status.success() && text.contains("--post `false` exited with 1"), "{text}");
    assert!(text.contains("task-clock"), "{text}");
}

#[test]
fn no_inherit_counts_the_command_alone_and_inherit_undoes_it() {
    let args = |extra: &[&str]| -> f64 {
        let mut a = vec!["-e", "page-faults"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--", "sh", "-c", "ls / >/dev/null; ls / >/dev/null"]);
        let out = tmetric(&a);
        assert!(out.status.success(), "{}", stderr(&out));
        count(&stderr(&out), "page-faults")
    };
    let inherit = args(&[]);
    let alone = args(&["-i"]);
    // Each `ls` faults in its own pages; `sh` alone faults far fewer than it and two children.
    assert!(alone * 1.5 < inherit, "-i {alone} vs inherited {inherit}");
    let undone = args(&["-i", "--inherit"]);
    assert!(alone * 1.5 < undone, "-i --inherit {undone} vs -i {alone}");
    let long = args(&["--no-inherit"]);
    assert!(long * 1.5 < inherit, "--no-inherit {long} vs inherited {inherit}");
}

/// `--no-affinity` (perf's: read every CPU's counters from where tmetric runs) counts the same
/// system-wide clocks as the default, which reads a CPU with many groups from that CPU.
#[test]
fn no_affinity_reads_every_cpu_from_where_tmetric_runs() {
    let clock = |extra: &[&str]| -> f64 {
        let mut a = vec!["-a", "-e", "cpu-clock"];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--", "sleep", "0.3"]);
        let out = tmetric(&a);
        assert!(out.status.success(), "{}", stderr(&out));
        count(&stderr(&out), "cpu-clock")
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for extra in [&[][..], &["--no-affinity"][..]] {
        // cpu-clock counts every online CPU the whole time, idle or not: msec printed.
        let ms = clock(extra);
        assert!(ms > 0.8 * 300.0 * cpus && ms < 1.3 * 300.0 * cpus, "{extra:?}: {ms} msec");
    }
}

#[test]
fn no_scale_prints_counts_as_read_where_events_multiplex() {
    // More hardware events than the simulated Skylake-X has counters: they take turns.
    let events = "cycles,instructions,branches,branch-misses,cache-misses,cache-references,L1-dcache-loads,L1-dcache-load-misses,LLC-loads,LLC-load-misses";
    let run = |extra: &[&str]| -> String {
        let mut a = vec!["--pmu-sim", "skylakex", "-a", "-x", ",", "-e", events];
        a.extend_from_slice(extra);
        a.extend_from_slice(&["sleep", "0.3"]);
        let out = tmetric(&a);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let rows = |text: &str| -> Vec<(String, f64, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains(','))
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[2].to_string(), f[0].parse().unwrap(), f[4].parse().unwrap())
            })
            .collect()
    };
    let scaled = rows(&run(&[]));
    let raw = rows(&run(&["--no-scale"]));
    assert_eq!(scaled.len(), 10, "{scaled:?}");
    for ((name, s, _), (_, r, share)) in scaled.iter().zip(&raw) {
        assert!(*share < 99.0, "{name} did not multiplex: {share}%");
        // The raw count is the scaled one's running share, give or take the simulated
        // workload's variation between the two runs.
        let expected = s * share / 100.0;
        assert!((r / expected - 1.0).abs() < 0.2, "{name}: raw {r}, scaled {s} at {share}%");
    }
    // `--scale` (and old perf's `-c`) is the default; the last of the two wins.
    let back = rows(&run(&["--no-scale", "--scale"]));
    let cycles = |rows: &[(String, f64, f64)]| rows[0].1;
    assert!(cycles(&back) > cycles(&raw) * 1.5, "{back:?} vs {raw:?}");
}

#[test]
fn transaction_and_smi_cost_refuse_where_the_hardware_is_missing() {
    check_all(
        &[
            &["--pmu-sim", "amdzen4", "-T", "true"],
            &["--pmu-sim", "amdzen4", "--smi-cost", "true"],
            &["--pmu-sim", "skylakex", "-T", "-n", "true"],
        ],
        "cli_perf_forms__transaction_smi_refused",
    );
    // This machine has no hardware PMU: no `freeze_on_smi` either.
    let out = tmetric(&["--smi-cost", "true"]);
    assert!(stderr(&out).contains("freeze_on_smi is not supported"), "{}", stderr(&out));
}

#[test]
fn transaction_and_smi_cost_count_perfs_metric_groups_on_a_simulated_intel() {
    let out = tmetric(&["--pmu-sim", "skylakex", "-T", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    for metric in ["tsx_transactional_cycles", "tsx_aborted_cycles", "tsx_cycles_per_elision"] {
        assert!(text.contains(metric), "{metric} missing:\n{text}");
    }
    // -T replaces perf's default events, as perf's `add_default_attributes` does.
    assert!(!text.contains("context-switches"), "{text}");
    let out = tmetric(&["--pmu-sim", "skylakex", "--smi-cost", "-a", "sleep", "0.1"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    // Metric-only columns, as perf's --smi-cost.
    assert!(text.contains("smi_cycles") && text.contains("SMI#"), "{text}");
    assert!(!text.contains("msr/aperf/"), "{text}");
    // perf's --no-metric-only: the counts, with the metrics beside them.
    let args = ["--pmu-sim", "skylakex", "--smi-cost", "--no-metric-only", "-a", "sleep", "0.1"];
    let text = stderr(&tmetric(&args));
    let aperf = text.lines().find(|l| l.contains("msr/aperf/")).expect("an msr/aperf/ row");
    assert!(aperf.contains("smi_cycles"), "{text}");
    assert!(text.lines().any(|l| l.contains("msr/smi/") && l.contains("smi_num")), "{text}");
}

#[test]
fn output_dash_is_standard_error_not_a_file() {
    let dir = scratch("dash");
    let out = in_shell(&dir, "\"$T\" -o - -e task-clock true", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("task-clock"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("# started on"), "{}", stderr(&out));
    assert!(!dir.join("-").exists());
}

#[test]
fn repeat_zero_runs_until_interrupted_and_repeat_101_is_accepted() {
    let dir = scratch("forever");
    // The third run is interrupted as Ctrl-C would do it, SIGINT to tmetric (the command's
    // parent) and to the command: the runs before it each printed, the interrupted one not,
    // and tmetric dies by SIGINT (perf 6.1 on this machine does exactly this).
    let script = "\"$T\" -r 0 -e task-clock -- sh -c 'echo x >>n; [ $(wc -l <n) -ge 3 ] && kill -INT $PPID $$; exit 0'";
    let out = in_shell(&dir, script, &[]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert_eq!(text.matches("Performance counter stats for").count(), 2, "{text}");
    assert_eq!(std::fs::read_to_string(dir.join("n")).unwrap().lines().count(), 3);
    // perf shows no user and system times for `-r 0`'s runs.
    assert!(!text.contains("seconds user"), "{text}");
    // perf's -r 0 sets one run: no `(N runs)` in the title.
    assert!(!text.contains("runs)"), "{text}");
    let out = tmetric(&["-r", "-1", "true"]);
    assert_eq!(out.status.code(), Some(129), "{}", stderr(&out));
    assert!(stderr(&out).contains("Run count must be a positive number"), "{}", stderr(&out));
    let out = tmetric(&["-r", "101", "-e", "task-clock", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("'true' (101 runs)"), "{}", stderr(&out));
}

#[test]
fn per_cache_levels_are_perfs() {
    check_all(
        &[
            &["-a", "--per-cache=2", "true"],
            &["-a", "--per-cache=L5", "true"],
            &["-a", "--per-cache=L0", "true"],
        ],
        "cli_perf_forms__per_cache",
    );
    let out = tmetric(&["-a", "--per-cache=l2", "-e", "cs", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("-L2-ID"), "{}", stderr(&out));
}

#[test]
fn titles_quote_the_ids_as_perf_does() {
    let mut sleeper = Command::new("sleep").arg("5").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let me = std::process::id().to_string();
    let tids = format!("{pid},{me}");
    let out = tmetric(&["-t", &tids, "-e", "task-clock", "sleep", "0.1"]);
    assert!(stderr(&out).contains(&format!("for thread id '{tids}':")), "{}", stderr(&out));
    let out = tmetric(&["-p", &pid, "-e", "task-clock", "sleep", "0.1"]);
    assert!(stderr(&out).contains(&format!("for process id '{pid}':")), "{}", stderr(&out));
    sleeper.kill().ok();
    sleeper.wait().ok();
}

#[test]
fn every_boolean_takes_perfs_negation_and_the_last_one_wins() {
    let text = |args: &[&str]| {
        let out = tmetric(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stderr(&out)
    };
    assert!(text(&["-a", "--no-all-cpus", "-e", "cs", "true"]).contains("for 'true'"));
    assert!(text(&["--no-all-cpus", "-a", "-e", "cs", "true"]).contains("for 'system wide'"));
    let detailed = text(&["-d", "-dd", "--no-detailed", "-e", "cs", "true"]);
    assert!(!detailed.contains("L1-dcache"), "{detailed}");
    let csv = text(&[
        "-x,",
        "-e",
        "cs",
        "-I",
        "50",
        "--interval-count",
        "1",
        "--summary",
        "--no-summary",
        "true",
    ]);
    assert!(!csv.contains("summary"), "{csv}");
    let merged = text(&["-a", "--no-merge", "--merge", "-e", "cs", "true"]);
    assert!(!merged.contains("CPU0"), "{merged}");
    let out = tmetric(&["--no-bogus", "true"]);
    assert_eq!(out.status.code(), Some(129), "{}", stderr(&out));
    // A value is not read as a negation: `-e` takes `--no-x`'s place as its value would.
    let out = tmetric(&["-I", "50", "--interval-count", "1", "-e", "cs", "--no-summary", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `Run`s with the environment of a config test: the config file and nothing else perf reads.
fn config_run<'a>(args: &'a [&'a str], env: &'a [(&'a str, &'a str)]) -> Run<'a> {
    Run { args, env, ..Run::default() }
}

#[test]
fn perfs_config_files_set_stat_defaults_and_bad_lines_are_named() {
    let dir = scratch("config");
    let file = |name: &str, text: &str| -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let csv_summary = file(
        "summary.cfg",
        "# as `perf config stat.no-csv-summary=true` writes it\n[stat]\n\tno-csv-summary = true\n",
    );
    let args =
        ["-x,", "-e", "task-clock", "-I", "50", "--interval-count", "1", "--summary", "true"];
    let summary_lines = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tmetric"));
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out).lines().filter(|l| l.starts_with("summary,")).count()
    };
    assert_eq!(summary_lines(&[("PERF_CONFIG", "/dev/null")]), 1);
    assert_eq!(summary_lines(&[("PERF_CONFIG", &csv_summary)]), 0);
    // An option wins over the config: perf's `--csv-summary` undoes `stat.no-csv-summary`.
    let (options, command) = args.split_at(args.len() - 1);
    let out = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(options)
        .arg("--csv-summary")
        .args(command)
        .env("PERF_CONFIG", &csv_summary)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().filter(|l| l.starts_with("summary,")).count(), 1);
    // ~/.perfconfig when PERF_CONFIG is not set, owned by this user or root.
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::copy(&csv_summary, home.join(".perfconfig")).unwrap();
    let home = home.to_str().unwrap();
    let nosys = ("PERF_CONFIG_NOSYSTEM", "1");
    assert_eq!(summary_lines(&[("HOME", home), nosys]), 0);
    assert_eq!(summary_lines(&[("HOME", home), nosys, ("PERF_CONFIG_NOGLOBAL", "yes")]), 1);
    // Keys before a bad line count; the line is named with its file.
    let bad = file("bad.cfg", "[stat]\nno-csv-summary\nbig-num false\n");
    let bad_value = file("value.cfg", "[stat]\nbig-num = maybe\n");
    let bad_section = file("section.cfg", "[stat\nno-csv-summary\n");
    check_runs(
        &[
            config_run(&["-n", "true"], &[("PERF_CONFIG", &bad)]),
            config_run(&["-n", "true"], &[("PERF_CONFIG", &bad_value)]),
            config_run(&["-n", "true"], &[("PERF_CONFIG", &bad_section)]),
            config_run(&["-n", "true"], &[("PERF_CONFIG", dir.to_str().unwrap())]),
        ],
        "cli_perf_forms__config_errors",
    );
    assert_eq!(summary_lines(&[("PERF_CONFIG", &bad)]), 0);
    // A file someone else owns is not read, as perf refuses it.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(&csv_summary, other.join(".perfconfig")).unwrap();
    let chown = Command::new("chown").arg("65534").arg(other.join(".perfconfig")).status();
    if chown.is_ok_and(|s| s.success()) {
        let env = [("HOME", other.to_str().unwrap()), nosys];
        assert_eq!(summary_lines(&env), 1);
        let out = Command::new(env!("CARGO_BIN_EXE_tmetric"))
            .args(["-e", "cs", "true"])
            .envs(env)
            .output()
            .unwrap();
        assert!(stderr(&out).contains("not owned by current user or root, ignoring it"));
    }
}

/// `stat.big-num = false` turns the locale's digit grouping off, as `--no-big-num` does, and
/// `-B` still turns it on. Needs `localedef` for an en_US locale of the test's own.
#[test]
fn config_big_num_false_stops_digit_grouping() {
    let dir = scratch("big-num");
    let made = Command::new("localedef")
        .args(["-i", "en_US", "-f", "UTF-8"])
        .arg(dir.join("en_US.UTF-8"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        eprintln!("skipped: localedef or its locale sources are missing");
        return;
    }
    let cfg = dir.join("plain.cfg");
    std::fs::write(&cfg, "[stat]\nbig-num = false\n").unwrap();
    let duration = |config: &Path, extra: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_tmetric"))
            .args(["-e", "duration_time"])
            .args(extra)
            .args(["sleep", "0.01"])
            .env("LOCPATH", &dir)
            .env("LC_ALL", "en_US.UTF-8")
            .env("PERF_CONFIG", config)
            .output()
            .unwrap();
        let text = stderr(&out);
        text.lines().find(|l| l.contains("duration_time")).unwrap().trim().to_string()
    };
    let grouped = duration(Path::new("/dev/null"), &[]);
    assert!(grouped.split_whitespace().next().unwrap().contains(','), "{grouped}");
    let plain = duration(&cfg, &[]);
    assert!(!plain.split_whitespace().next().unwrap().contains(','), "{plain}");
    let forced = duration(&cfg, &["-B"]);
    assert!(forced.split_whitespace().next().unwrap().contains(','), "{forced}");
}

#[test]
fn report_reads_perfs_config_too() {
    let dir = scratch("report-config");
    let data = dir.join("r.data");
    let data = data.to_str().unwrap();
    let args = ["record", "-o", data, "-e", "task-clock", "-I", "50", "--interval-count", "1"];
    let out = tmetric(&[&args[..], &["--summary", "true"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let cfg = dir.join("summary.cfg");
    std::fs::write(&cfg, "[stat]\nno-csv-summary = true\n").unwrap();
    let report = |config: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_tmetric"))
            .args(["report", "-i", data, "-x,"])
            .env("PERF_CONFIG", config)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out).lines().filter(|l| l.starts_with("summary,")).count()
    };
    assert_eq!(report(Path::new("/dev/null")), 1);
    assert_eq!(report(&cfg), 0);
}

/// `--no-scale` is recorded in perf.data's `STAT_CONFIG` (its scale term 0), so `report` and
/// perf's own `perf stat report` print the raw counts `stat` printed.
#[test]
fn no_scale_is_recorded_and_reported_raw() {
    let dir = scratch("no-scale-record");
    let data = dir.join("ns.data");
    let data = data.to_str().unwrap();
    let events = "cycles,instructions,branches,branch-misses,cache-misses,cache-references,L1-dcache-loads,L1-dcache-load-misses,LLC-loads,LLC-load-misses";
    let args = ["record", "--pmu-sim", "skylakex", "--no-scale", "-o", data, "-x,", "-e", events];
    let out = tmetric(&[&args[..], &["-a", "sleep", "0.2"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let first = |text: &str| -> String {
        text.lines().find(|l| l.contains(",cycles,")).unwrap().split(',').next().unwrap().into()
    };
    let printed = first(&stderr(&out));
    let report = tmetric(&["report", "-i", data, "-x,"]);
    assert_eq!(first(&stderr(&report)), printed, "{}", stderr(&report));
    if let Ok(perf) = Command::new("perf").args(["stat", "report", "-i", data]).output()
        && perf.status.success()
    {
        let text = String::from_utf8_lossy(&perf.stderr).into_owned()
            + &String::from_utf8_lossy(&perf.stdout);
        let line = text.lines().find(|l| l.contains(" cycles ")).unwrap();
        let count = line.split_whitespace().next().unwrap().replace(',', "");
        assert_eq!(count, printed, "perf: {line}");
    }
    // The JSON-lines format has nowhere to keep it: refused rather than reported scaled.
    let jsonl = dir.join("ns.jsonl");
    let out = tmetric(&[
        "record",
        "--format",
        "jsonl",
        "--no-scale",
        "-o",
        jsonl.to_str().unwrap(),
        "-e",
        "task-clock",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--no-scale with --format jsonl"), "{}", stderr(&out));
    assert!(!jsonl.exists());
}

/// perf's `cmd_stat`: `--interval-count 0` is no count at all (the run goes on), and a count
/// without `-I` is refused with perf's words and its `-EINVAL` exit (234).
#[test]
fn interval_count_zero_is_no_limit_and_needs_intervals_otherwise() {
    let out =
        tmetric(&["-x,", "-I", "50", "--interval-count", "0", "-e", "task-clock", "sleep", "0.3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let intervals = stderr(&out).lines().filter(|l| l.contains(",task-clock,")).count();
    assert!(intervals >= 3, "{}", stderr(&out));
    for args in [
        &["--interval-count", "2", "-e", "task-clock", "true"][..],
        &["-I", "0", "--interval-count", "2", "-e", "task-clock", "true"][..],
    ] {
        let out = tmetric(args);
        assert_eq!(out.status.code(), Some(234), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out)
                .contains("interval-count option should be used together with interval-print"),
            "{}",
            stderr(&out)
        );
    }
}
