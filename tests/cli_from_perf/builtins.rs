//! perf's built-in metrics (CPUs utilized, GHz, IPC, stalled cycles, branch misses, `/sec`
//! rates) from text and CSV logs, agreeing with what perf printed.

use crate::support::{ok, stderr, stdout};

use super::{
    assert_close, builtin, count, elapsed, fixture, json, one, read, rows_of, text_value,
    tmetric_stdin,
};

/// Issue 12, item 3 (part): a system-wide log whose clock is `cpu-clock` (perf 6.1, this machine,
/// `-a`). perf's `CPUs utilized` and `/sec` rates use that clock; so do the common metrics:
/// cpus_utilized = clock (ns) / (duration_time * 1e9), rates = count / (clock / 1e9).
#[test]
fn system_wide_cpu_clock_logs_give_perfs_builtin_metrics() {
    let log = read("perf/std_system_wide_cpu_clock.txt");
    let path = fixture("perf/std_system_wide_cpu_clock.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let clock_s = count(&log, "cpu-clock") / 1e3;
    let cpus = one(&rows, "cpus_utilized");
    assert_close(&cpus["value"], clock_s / elapsed(&log));
    assert_eq!(cpus["perf"]["agrees"], true, "{cpus}");
    for (metric, event) in [
        ("context_switches_per_sec", "context-switches"),
        ("cpu_migrations_per_sec", "cpu-migrations"),
        ("page_faults_per_sec", "page-faults"),
    ] {
        let row = one(&rows, metric);
        assert_close(&row["value"], count(&log, event) / clock_s);
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }
    assert!(!stderr(&output).contains("disagree"), "{}", stderr(&output));
}

/// perf's built-ins on a hand-written system-wide perf 6.1 log whose time base is cpu-clock:
/// insn per cycle = instructions / cycles; GHz = cycles / cpu-clock (ns); stalled cycles per
/// insn = max(stalled-cycles-frontend, stalled-cycles-backend) / instructions; frontend and
/// backend cycles idle = stalled / cycles * 100; of all branches = branch-misses / branches * 100.
#[test]
fn builtins_from_a_hardware_log_agree_with_perf() {
    let log = read("perf/hw_builtins_perf61.txt");
    let (cycles, insns) = (count(&log, "cycles"), count(&log, "instructions"));
    let (fe, be) = (count(&log, "stalled-cycles-frontend"), count(&log, "stalled-cycles-backend"));
    let clock_ns = count(&log, "cpu-clock") * 1e6;
    let path = fixture("perf/hw_builtins_perf61.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    let want = [
        ("insn_per_cycle", insns / cycles, "insn per cycle"),
        ("ghz", cycles / clock_ns, "GHz"),
        ("stalled_cycles_per_insn", fe.max(be) / insns, "stalled cycles per insn"),
        ("frontend_cycles_idle", fe / cycles * 100.0, "frontend cycles idle"),
        ("backend_cycles_idle", be / cycles * 100.0, "backend cycles idle"),
        (
            "branch_miss_rate",
            count(&log, "branch-misses") / count(&log, "branches") * 100.0,
            "of all branches",
        ),
    ];
    for (metric, value, label) in want {
        let row = builtin(&rows, metric);
        assert_close(&row["value"], value);
        assert_eq!(row["perf"]["label"], label, "{row}");
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }
    assert_eq!(builtin(&rows, "ghz")["perf"]["printed"], "2.400");
    // CPUs utilized on the cpu-clock row (the common metric) agrees too.
    assert_eq!(one(&rows, "cpus_utilized")["perf"]["agrees"], true);
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));

    // A value perf did not print is flagged, with perf's own text.
    let edited = log.replace("1.50  insn per cycle", "1.60  insn per cycle");
    let output = tmetric_stdin(&["eval", "--from-perf", "-"], &edited);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let line = text.lines().find(|l| l.contains(" insn_per_cycle")).expect("an IPC line");
    assert!(line.contains("(perf printed 1.60 insn per cycle)"), "{line}");
    assert_eq!(text_value(&text, "insn_per_cycle"), "1.50");
    assert!(stderr(&output).contains("1 disagree"), "{}", stderr(&output));

    // Without cycles IPC has no value and says why (perf prints it blank), and there is no GHz
    // (perf prints it on the cycles row); without stalled counts no stalled-per-insn line.
    let stripped: String =
        log.lines().filter(|l| !l.contains("cycles")).map(|l| format!("{l}\n")).collect();
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &stripped);
    assert!(output.status.success(), "{}", stderr(&output));
    let (_, rows) = json(&output);
    let ipc = builtin(&rows, "insn_per_cycle");
    assert!(ipc["value"].is_null(), "{ipc}");
    assert_eq!(ipc["missing"], serde_json::json!(["cycles"]));
    assert!(rows_of(&rows, "ghz").is_empty());
    assert!(rows_of(&rows, "stalled_cycles_per_insn").is_empty());
    assert_eq!(builtin(&rows, "branch_miss_rate")["perf"]["agrees"], true);

    // Only the built-ins named with -M, and no catalogue metric.
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json", "-M", "ghz"]));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_close(&builtin(&rows, "ghz")["value"], cycles / clock_ns);
}

/// A log from this machine's perf (no hardware PMU): the hardware rows are <not supported>, so
/// no built-in is shown; CPUs utilized on both clocks and the /sec rate are checked.
#[test]
fn builtins_on_a_real_system_wide_log() {
    let path = fixture("perf/std_real_builtins_system_wide.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    assert!(rows.iter().all(|r| r["model"] != "perf built-in"), "{rows:?}");
    assert_eq!(one(&rows, "cpus_utilized")["perf"]["agrees"], true);
    assert_eq!(one(&rows, "context_switches_per_sec")["perf"]["agrees"], true);
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));
}

/// The same built-ins in perf's -x layout, where perf prints level 1 as `40.0,Retiring`: a
/// label that is also a metric name of some models (`retiring`), which must not make the log
/// look like theirs.
#[test]
fn builtins_from_a_csv_log() {
    let path = fixture("perf/csv_builtins_perf61.txt");
    let log = read("perf/csv_builtins_perf61.txt");
    let field = |event: &str| -> f64 {
        let line = log.lines().find(|l| l.split(',').nth(2) == Some(event)).unwrap();
        line.split(',').next().unwrap().parse().unwrap()
    };
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "common/common", "{header}");
    let ipc = builtin(&rows, "insn_per_cycle");
    assert_close(&ipc["value"], field("instructions") / field("cycles"));
    assert_eq!(ipc["perf"]["agrees"], true);
    let ghz = builtin(&rows, "ghz");
    assert_close(&ghz["value"], field("cycles") / (field("cpu-clock") * 1e6));
    assert_eq!(ghz["perf"]["agrees"], true);
    let sum: f64 = ["topdown-retiring", "topdown-bad-spec", "topdown-fe-bound", "topdown-be-bound"]
        .iter()
        .map(|e| field(e))
        .sum();
    let retiring = builtin(&rows, "td_retiring");
    assert_close(&retiring["value"], field("topdown-retiring") / sum * 100.0);
    assert_eq!(retiring["perf"]["label"], "Retiring");
    assert_eq!(retiring["perf"]["agrees"], true);
    assert_eq!(builtin(&rows, "branch_miss_rate")["perf"]["agrees"], true);
}

/// The cache and TLB miss ratios (`perf stat -d`'s `of all L1-dcache accesses` and the others)
/// come from the same built-in table as `insn per cycle`, so a log's printed ratios are
/// checked: misses / loads * 100 for L1-dcache, L1-icache, LLC, dTLB and iTLB. A value edited
/// in the log is flagged with perf's own text.
#[test]
fn cache_miss_ratios_from_a_d_log_agree_with_perf() {
    let log = read("perf/hw_cache_builtins_perf612.txt");
    let path = fixture("perf/hw_cache_builtins_perf612.txt");
    let output = ok(&["eval", "--from-perf", &path, "--json"]);
    let (_, rows) = json(&output);
    for (metric, misses, loads, label) in [
        ("l1d_miss_rate", "L1-dcache-load-misses", "L1-dcache-loads", "of all L1-dcache accesses"),
        ("l1i_miss_rate", "L1-icache-load-misses", "L1-icache-loads", "of all L1-icache accesses"),
        ("llc_miss_rate", "LLC-load-misses", "LLC-loads", "of all LL-cache accesses"),
        ("dtlb_miss_rate", "dTLB-load-misses", "dTLB-loads", "of all dTLB cache accesses"),
        ("itlb_miss_rate", "iTLB-load-misses", "iTLB-loads", "of all iTLB cache accesses"),
    ] {
        let row = builtin(&rows, metric);
        assert_close(&row["value"], count(&log, misses) / count(&log, loads) * 100.0);
        assert_eq!(row["perf"]["label"], label, "{row}");
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));

    let edited = log.replace("13.00% of all LL-cache", "31.00% of all LL-cache");
    let output = tmetric_stdin(&["eval", "--from-perf", "-"], &edited);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let line = text.lines().find(|l| l.contains(" llc_miss_rate")).expect("an LLC line");
    assert!(line.contains("(perf printed 31.00 of all LL-cache accesses)"), "{line}");
    assert!(stderr(&output).contains("1 disagree"), "{}", stderr(&output));
}
