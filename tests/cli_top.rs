//! The top level as perf users type it (`tmetric -e ... -- cmd`), `tmetric describe`, and the
//! errors for metrics this machine cannot count or does not define.

use crate::support::{ok_stdout, stderr, tmetric};

#[test]
fn stat_flags_work_without_the_subcommand() {
    let out = tmetric(&["-e", "task-clock,page-faults", "--", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Performance counter stats for 'true'"), "{text}");
    assert!(text.contains("task-clock") && text.contains("page-faults"), "{text}");
    // Subcommands and top-level flags still win.
    let list = tmetric(&["list", "models"]);
    assert!(list.status.success());
    let version = tmetric(&["--version"]);
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("tmetric "));
}

#[test]
fn a_model_metric_without_a_hardware_pmu_says_what_to_do_and_prints_not_supported() {
    // This machine (and CI) has no hardware PMU; a model metric cannot count a thing.
    let out = tmetric(&["-M", "tma_dtlb_store", "--model", "sapphirerapids", "-a", "sleep", "0.1"]);
    let text = stderr(&out);
    if std::path::Path::new("/sys/bus/event_source/devices/cpu/type").exists() {
        return; // a machine with a core PMU counts it instead
    }
    // As perf: the events print `<not supported>`, the run succeeds; tmetric says why first.
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("`tma_dtlb_store` of x86/sapphirerapids cannot be counted here"),
        "{text}"
    );
    assert!(text.contains("x86/sapphirerapids"), "{text}");
    assert!(text.contains("--pmu-sim"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("<not supported>")), "{text}");
}

#[test]
fn a_metric_of_another_model_names_the_models_that_define_it() {
    let out = tmetric(&["-M", "PipelineL1", "--model", "sapphirerapids", "--", "true"]);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("`PipelineL1` is defined for x86/amdzen4"), "{text}");
}

#[test]
fn describe_shows_formula_tree_threshold_and_needed_events() {
    let text = ok_stdout(&["describe", "tma_dtlb_store", "--model", "sapphirerapids"]);
    assert!(text.contains("formula: (7 * cpu@DTLB_STORE_MISSES.STLB_HIT"), "{text}");
    assert!(text.contains("threshold: tma_dtlb_store > 0.05"), "{text}");
    assert!(text.contains("tma_info_core_core_clks = "), "{text}");
    assert!(text.contains("needed events, SMT on: CPU_CLK_UNHALTED.DISTRIBUTED"), "{text}");
    assert!(text.contains("needed events, SMT off: CPU_CLK_UNHALTED.THREAD"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&ok_stdout(&[
        "describe",
        "tma_dtlb_store",
        "--model",
        "sapphirerapids",
        "--json",
    ]))
    .expect("JSON");
    assert_eq!(json["tree"]["metrics"][0]["metric"], "tma_info_core_core_clks");
    let missing = tmetric(&["describe", "tma_nonexistent"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no model of the catalogue defines"), "{}", stderr(&missing));
    let elsewhere = tmetric(&["describe", "tma_dtlb_store", "--model", "amdzen4"]);
    assert!(stderr(&elsewhere).contains("it is defined for"), "{}", stderr(&elsewhere));
}

#[test]
fn a_command_that_cannot_run_exits_as_perf_does() {
    let dir = tempfile::Builder::new().prefix("tmetric-exec-").tempdir().unwrap();
    let file = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
        path.display().to_string()
    };
    let not_executable = file("data", "", 0o644);
    // perf 6.12: `Workload failed: <strerror>` and 255 (`cmd_stat` returns -1), no counts.
    for (program, why) in [
        ("/nonexistent/tmetric-test-cmd", "No such file or directory"),
        ("tmetric-no-such-command-xyz", "No such file or directory"),
        (not_executable.as_str(), "Permission denied"),
    ] {
        let out = tmetric(&["--", program]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(255), "{text}");
        assert_eq!(text.lines().next(), Some(format!("Workload failed: {why}").as_str()), "{text}");
        assert!(!text.contains("Performance counter stats"), "{text}");
    }
    // A workload a signal killed: perf's psignal line, then the counts; the exit code is
    // WEXITSTATUS, 0.
    let killed = tmetric(&["--", "sh", "-c", "kill -9 $$"]);
    let text = stderr(&killed);
    assert_eq!(killed.status.code(), Some(0), "{text}");
    assert_eq!(text.lines().next(), Some("sh: Killed"), "{text}");
    assert!(text.contains("Performance counter stats for 'sh -c kill -9 $$'"), "{text}");
    // An executable file without `#!` runs under /bin/sh, as execvp (perf's) runs it.
    let script = file("script", "exit 5\n", 0o755);
    let out = tmetric(&["-e", "task-clock", "--", &script]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
}

#[test]
fn per_cpu_and_cpu_lists_follow_perf() {
    // -A: one row per online CPU, for real.
    let out = tmetric(&["-a", "-A", "-e", "cpu-clock", "sleep", "0.1"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n = cpus
        .trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum::<usize>();
    let rows: Vec<&str> =
        text.lines().filter(|l| l.starts_with("CPU") && l.contains("cpu-clock")).collect();
    assert_eq!(rows.len(), n, "{text}");
    // -C 0: CPU 0 only; about one CPU's worth of cpu-clock.
    let out = tmetric(&["-C", "0", "-e", "cpu-clock", "sleep", "0.2"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("CPU(s) 0"), "{text}");
    let ms: f64 = text
        .lines()
        .find(|l| l.contains("cpu-clock"))
        .and_then(|l| l.split_whitespace().next())
        .map(|v| v.replace(',', "").parse().unwrap())
        .expect(&text);
    // cpu-clock on one CPU runs for the whole run, however long a loaded machine makes it.
    let elapsed_ms = text
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .map(|s| s * 1e3)
        .expect(&text);
    assert!(elapsed_ms >= 190.0, "{elapsed_ms} ms\n{text}");
    assert!((0.75 * elapsed_ms..1.1 * elapsed_ms).contains(&ms), "{ms} ms\n{text}");
    let bad = tmetric(&["-C", "999", "-e", "cpu-clock", "sleep", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("not online"), "{}", stderr(&bad));
    let no_cpus = tmetric(&["--per-core", "-e", "cpu-clock", "--", "true"]);
    assert_eq!(no_cpus.status.code(), Some(2));
}

#[test]
fn attaching_to_a_running_process_counts_it_until_interrupted() {
    let mut child =
        std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
    let pid = child.id().to_string();
    let stat = std::process::Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["-p", &pid, "-e", "task-clock"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    std::process::Command::new("kill").args(["-INT", &stat.id().to_string()]).status().unwrap();
    let out = stat.wait_with_output().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(text.contains(&format!("process id '{pid}'")), "{text}");
    let ms: f64 = text
        .lines()
        .find(|l| l.contains("task-clock"))
        .and_then(|l| l.split_whitespace().next())
        .map(|v| v.replace(',', "").parse().unwrap())
        .expect(&text);
    // The loop runs all the time it is watched; a loaded machine gives it less than 0.4 s.
    assert!(ms > 10.0, "a busy loop for 0.4 s: {ms} ms\n{text}");
}

#[test]
fn describe_with_counts_gives_each_node_its_value_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counts.json");
    std::fs::write(
        &path,
        r#"{"counts": {"topdown-fe-bound": 200, "topdown-be-bound": 300, "topdown-bad-spec": 100, "TOPDOWN.SLOTS": 1000, "INT_MISC.UOP_DROPPING": 0}}"#,
    )
    .unwrap();
    let text = ok_stdout(&[
        "describe",
        "tma_bad_speculation",
        "--model",
        "sapphirerapids",
        "--counts",
        path.to_str().unwrap(),
    ]);
    // max(1 - (fe + be + NaN), 0) is 0 by perf's rules: the reason is printed beside it.
    let root =
        text.lines().find(|l| l.trim_start().starts_with("tma_bad_speculation =")).expect(&text);
    assert!(
        root.contains("0.0000 %")
            && root.contains("computed without")
            && root.contains("topdown-retiring"),
        "{root}"
    );
    let fe =
        text.lines().find(|l| l.trim_start().starts_with("tma_frontend_bound =")).expect(&text);
    assert!(fe.contains("nan") && fe.contains("topdown-retiring"), "{fe}");
}

#[test]
fn delay_and_interval_count_behave_as_in_perf() {
    // --interval-count 2 with -I 100: two intervals, then none; the command runs to its end
    // (perf waits for it) and exits as it does, without a signal.
    let start = std::time::Instant::now();
    let out = tmetric(&[
        "-I",
        "100",
        "--interval-count",
        "2",
        "-e",
        "task-clock",
        "--",
        "sh",
        "-c",
        "sleep 1; exit 3",
    ]);
    assert!(start.elapsed() >= std::time::Duration::from_secs(1), "the command was cut short");
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    let lines = text.lines().filter(|l| l.contains(" msec task-clock"));
    assert_eq!(lines.count(), 2, "{text}");
    assert!(!text.contains("Terminated") && !text.contains("seconds time elapsed"), "{text}");
    // -D: the first 200 ms of a 400 ms sleep are not counted, so elapsed is about 200 ms.
    let out = tmetric(&["-D", "200", "-e", "task-clock", "--", "sleep", "0.4"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let elapsed: f64 = text
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .and_then(|l| l.split_whitespace().next())
        .map(|v| v.parse().unwrap())
        .expect(&text);
    assert!((0.15..0.35).contains(&elapsed), "{elapsed} s\n{text}");
}

#[test]
fn repeat_prints_the_mean_with_its_spread() {
    let out = tmetric(&["-r", "3", "-e", "task-clock,page-faults", "--", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    // task-clock differs from run to run; page faults of `true` may not, and perf prints no
    // spread for a zero spread.
    let clock = text.lines().find(|l| l.contains("task-clock")).expect(&text);
    assert!(clock.contains("( +- "), "{clock}");
    let faults = text.lines().find(|l| l.contains("page-faults")).expect(&text);
    let value: f64 = faults.split_whitespace().next().unwrap().replace(',', "").parse().unwrap();
    assert!(value > 10.0, "{faults}");
    let bad = tmetric(&["-r", "3", "-a", "-e", "task-clock"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("repeats a command"), "{}", stderr(&bad));
}
