//! Values checked for range: durations, read counts and simulated workloads that cannot be
//! meant are refused with what would be accepted, never a panic, an endless wait or a
//! silent wrong number.

use super::{bash_in, fails_with, scratch};

/// `serve --interval 18446744073709551616s` panicked and `--reads 4000000000` never ended
/// an interval; now both are refused with what is accepted.
#[test]
fn serve_durations_and_reads_are_range_checked() {
    let dir = scratch();
    let out = bash_in(dir.path(), "$T serve --once --interval 18446744073709551616s -M Software");
    fails_with(&out, 2, "is longer than a year");
    let out = bash_in(dir.path(), "$T serve --once --reads 4000000000 -M Software");
    fails_with(&out, 129, "4000000000 is not in 2..=1000");
}

/// A workload with `cycles_ghz 1e12` printed 18446744073709551616 cycles without a warning;
/// 1,000 phases took 49 s before counting and 100,000 never started. Now each is refused,
/// naming the key and its line.
#[test]
fn absurd_simulated_workloads_are_refused() {
    let dir = scratch();
    let phases: Vec<String> = (0..1000).map(|i| format!("{{\"ipc\": {}}}", 1 + i % 3)).collect();
    std::fs::write(dir.path().join("clock.json"), "{\n  \"cycles_ghz\": 1e12\n}\n").unwrap();
    std::fs::write(
        dir.path().join("phases.json"),
        format!("{{\"phases\": {{\"switch_every_ms\": 1,\n \"list\": [{}]}}}}", phases.join(",")),
    )
    .unwrap();
    let run = |file: &str| {
        bash_in(
            dir.path(),
            &format!("timeout 60 $T --pmu-sim skylakex --pmu-sim-workload {file} -e cycles true"),
        )
    };
    fails_with(&run("clock.json"), 2, "clock.json:2: `cycles_ghz`: 1000000000000 is more than 100");
    fails_with(&run("phases.json"), 2, "phases.json:2: `list`: 1000 phases: at most 64");
}

/// A `--retire-latency` key given twice was accepted (the last value silently won).
#[test]
fn a_retire_latency_key_given_twice_is_refused() {
    let dir = scratch();
    std::fs::write(
        dir.path().join("lat.json"),
        r#"{"MEM_INST_RETIRED.STLB_HIT_LOADS": 7, "mem_inst_retired.stlb_hit_loads": 900}"#,
    )
    .unwrap();
    let out = bash_in(
        dir.path(),
        "$T --pmu-sim meteorlake -M tma_load_stlb_hit --retire-latency lat.json -a sleep 0.1",
    );
    fails_with(&out, 2, "`mem_inst_retired.stlb_hit_loads` is given twice");
}

/// A bind or read error said its cause twice in one line ("Address already in use (os error
/// 98): Address already in use (os error 98)"); once now.
#[test]
fn errors_say_their_cause_once() {
    let dir = scratch();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let out = bash_in(dir.path(), &format!("$T serve --listen {addr} -M Software"));
    let text = fails_with(&out, 2, "Address already in use");
    assert_eq!(text.matches("Address already in use").count(), 1, "{text}");
    let out = bash_in(dir.path(), "$T serve --web.config.file nonexistent.yml -M Software");
    let text = fails_with(&out, 2, "No such file or directory");
    assert_eq!(text.matches("No such file").count(), 1, "{text}");
    let out = bash_in(
        dir.path(),
        "setpriv --reuid nobody --regid nogroup --clear-groups $T serve --once -M Software",
    );
    if out.status.code() == Some(2) {
        let text = super::super::support::stderr(&out);
        assert_eq!(text.matches("nothing could be counted").count(), 1, "{text}");
    }
}

/// perf's amdzen4 JSON defines `umc_cas_cmd_rate` and `umc_cas_cmd_read_ratio` twice, and
/// `serve --pmu-sim amdzen4 -M all` exported each of their series twice (Prometheus refuses
/// the scrape); `-e task-clock,task-clock` too. Now every series is once, and the repeat said.
#[test]
fn no_series_is_exported_twice() {
    let dir = scratch();
    for args in ["--pmu-sim amdzen4 -M all", "-e task-clock,task-clock -M Software"] {
        let out = bash_in(dir.path(), &format!("$T serve --once --interval 200ms {args}"));
        assert!(out.status.success(), "{args}: {}", super::super::support::stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let mut series: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s))
            .collect();
        let all = series.len();
        assert!(all > 10, "{args}: {text}");
        series.sort_unstable();
        series.dedup();
        assert_eq!(series.len(), all, "{args}: a series is exported twice");
    }
    let out = bash_in(dir.path(), "$T serve --once --interval 200ms --pmu-sim amdzen4 -M all");
    let text = super::super::support::stderr(&out);
    assert!(text.contains("x86/amdzen4 defines umc_cas_cmd_rate more than once"), "{text}");
}
