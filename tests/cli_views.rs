//! Every view tells the truth: the PMU model of `-e`-only runs, the
//! models `describe` and `plan` default to, advice that names the simulated machine that can
//! count a metric, the simulated NMI watchdog, one bottleneck rule in every view and layout,
//! `--all`, `--color`, reading a terminal, `latency` without samples and `--tpebs-mode p97`.
//! Each test runs the binary.

use std::path::Path;
use std::process::{Command, Stdio};

use tmetric_engine::Select;

use crate::support::{ok, ok_stdout, stderr, stdout, tmetric};

/// This machine's model, as `stat` finds it.
fn host_model() -> Option<&'static tmetric_catalog::Model> {
    let sysfs = tmetric_runtime::Sysfs::system();
    tmetric_engine::models::host_model(None, &sysfs, Path::new("/proc")).ok()
}

/// Whether this machine has a core PMU (most VMs have none).
fn has_core_pmu() -> bool {
    tmetric_runtime::Sysfs::system().core_pmu().is_some()
}

/// `-v`'s line about the core PMU `pmu`.
fn pmu_line<'a>(text: &'a str, pmu: &str) -> &'a str {
    let head = format!("tmetric: PMU {pmu}: ");
    text.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no {head}: {text}"))
}

#[test]
fn events_alone_are_scheduled_on_the_models_counters() {
    // Issue 24 item 4: `-v` with only -e said "assuming 4 general counters" where the model
    // (or -M) gives 8. The core PMU is the same with -e alone, with --model, and with -M.
    for (machine, general) in [("sapphirerapids", 8), ("icelake", 8), ("alderlake", 8)] {
        let pmu = if machine == "alderlake" { "cpu_core" } else { "cpu" };
        let events =
            stderr(&ok(&["--pmu-sim", machine, "-v", "-e", "cycles", "-a", "sleep", "0.05"]));
        let line = pmu_line(&events, pmu);
        assert!(line.contains(&format!("{general} general")), "{machine}: {line}");
        assert!(!line.contains("assuming 4 general counters"), "{machine}: {line}");
        let named = stderr(&ok(&[
            "--pmu-sim",
            machine,
            "--model",
            machine,
            "-v",
            "-e",
            "cycles",
            "-a",
            "sleep",
            "0.05",
        ]));
        assert_eq!(pmu_line(&named, pmu), line, "{machine}: --model");
        let metrics =
            stderr(&ok(&["--pmu-sim", machine, "-v", "-M", "TopdownL1", "-a", "sleep", "0.05"]));
        assert_eq!(pmu_line(&metrics, pmu), line, "{machine}: -M");
    }
}

#[test]
fn describe_defaults_to_this_machines_model_and_says_which() {
    let output = ok(&["--perf-version", "6.12", "describe", "tma_retiring"]);
    let (text, err) = (stdout(&output), stderr(&output));
    match host_model() {
        Some(host) if !host.metrics_named("tma_retiring").is_empty() => {
            assert!(err.contains(&format!("describing {}'s `tma_retiring`", host.path())), "{err}");
            assert!(text.starts_with(&format!("tma_retiring  ({}", host.path())), "{text}");
        }
        host => {
            let here = host.map_or("this machine's model is not known".to_string(), |h| {
                format!("this machine's model, {}, has no metric `tma_retiring`", h.path())
            });
            assert!(err.contains(&here), "{err}");
            assert!(err.contains("describing x86/alderlake's, the first of"), "{err}");
            assert!(text.starts_with("tma_retiring  (x86/alderlake, PMU cpu_atom)"), "{text}");
        }
    }
    // The simulated machine whose model is the one described comes first.
    let spr = ok_stdout(&[
        "--perf-version",
        "6.12",
        "describe",
        "tma_retiring",
        "--model",
        "sapphirerapids",
    ]);
    assert!(
        spr.contains("counted on a simulated PMU: `tmetric --pmu-sim sapphirerapids -M tma_retiring -a sleep 1`"),
        "{spr}"
    );
    // A common metric is the common table's, on every machine, and says nothing more.
    let common = ok(&["--perf-version", "6.12", "describe", "cpus_utilized"]);
    assert!(stdout(&common).starts_with("cpus_utilized  (common/common"), "{}", stdout(&common));
    assert_eq!(stderr(&common), "");
}

#[test]
fn describe_prints_formulas_as_perf_reads_them() {
    // perf's JSON writes `task\-clock`; its lexer drops the backslash.
    let text = ok_stdout(&["--perf-version", "6.12", "describe", "cpus_utilized"]);
    assert!(text.contains("  formula: task-clock / (duration_time * 1e9)"), "{text}");
    assert!(text.contains("cpus_utilized = task-clock / (duration_time * 1e9)"), "{text}");
    let json = ok_stdout(&["--perf-version", "6.12", "describe", "cpus_utilized", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["expr"], "task-clock / (duration_time * 1e9)");
    let cstate = ok_stdout(&[
        "--perf-version",
        "6.12",
        "describe",
        "C1_Core_Residency",
        "--model",
        "sapphirerapids",
    ]);
    assert!(cstate.contains("cstate_core@c1-residency@ / TSC"), "{cstate}");
    assert!(!cstate.contains('\\'), "{cstate}");
}

#[test]
fn plan_defaults_to_this_machine_and_names_the_simulated_machine_that_can_count() {
    let output = tmetric(&["plan", "-M", "PipelineL1"]);
    let text = stdout(&output);
    match host_model() {
        Some(host) if !tmetric_engine::select::defined_for("PipelineL1").contains(&host.path()) => {
            // Not this machine's: the models that define it and where to plan it.
            let err = stderr(&output);
            assert!(
                err.contains(&format!(
                    "cannot find metric or group `PipelineL1` among the common metrics or those of {}: `PipelineL1` is defined for ",
                    host.path()
                )),
                "{err}"
            );
            assert!(err.contains("`tmetric plan -M PipelineL1 --pmu-sim amdzen4`"), "{err}");
        }
        Some(host) => {
            assert!(output.status.success(), "{}", stderr(&output));
            let head =
                format!("# plan for -M PipelineL1 on {} (this machine's model;", host.path());
            assert!(text.starts_with(&head), "{text}");
            if !has_core_pmu() {
                // No PMU (this VM): never "no hardware counters needed".
                assert!(!text.contains("no hardware counters needed"), "{text}");
                assert!(text.contains("cannot be counted here: needs "), "{text}");
                // The simulated machine of this machine's own model when there is one (a Zen 5
                // host: amdzen5), else the first that defines the group.
                let sim = tmetric_sim::Machine::names()
                    .iter()
                    .copied()
                    .find(|n| {
                        tmetric_sim::Machine::named(n)
                            .is_some_and(|m| m.catalogue_model == host.name)
                    })
                    .unwrap_or("amdzen4");
                let model = tmetric_sim::Machine::named(sim).unwrap().catalogue_model;
                assert!(
                    text.contains(&format!(
                        "a simulated x86/{model} can: `tmetric plan -M PipelineL1 --pmu-sim {sim}`"
                    )),
                    "{text}"
                );
            }
        }
        None => assert!(!output.status.success()),
    }
    // The advice runs, and there the metrics count together.
    let sim = ok_stdout(&["plan", "-M", "PipelineL1", "--pmu-sim", "amdzen4"]);
    assert!(
        sim.starts_with("# plan for -M PipelineL1 on x86/amdzen4 (simulated PMU `amdzen4`)"),
        "{sim}"
    );
    assert!(sim.contains("together in group"), "{sim}");
    assert!(!sim.contains("cannot be counted here"), "{sim}");
}

#[test]
fn stat_advice_names_the_simulated_machine_whose_model_defines_the_metric() {
    let Some(host) = host_model() else { return };
    // A metric this machine's model lacks: the simulated machine of a model that has it.
    if !host.select("tma_dtlb_store").is_empty() {
        return;
    }
    let err = stderr(&tmetric(&["-M", "tma_dtlb_store", "-a", "sleep", "0.05"]));
    assert!(err.contains(&format!("this machine is {}", host.path())), "{err}");
    assert!(
        err.contains("count it on a simulated x86/sapphirerapids with `--pmu-sim sapphirerapids`"),
        "{err}"
    );
    let named = stderr(&tmetric(&["--model", "amdzen4", "-M", "tma_dtlb_store", "-a", "true"]));
    assert!(named.contains("--model names x86/amdzen4"), "{named}");
    if has_core_pmu() {
        return;
    }
    // AMD pipeline metrics on a machine without a PMU: amdzen4 is simulated, not Sapphire Rapids.
    let err = stderr(&ok(&["--model", "amdzen4", "-M", "PipelineL1", "-a", "sleep", "0.05"]));
    assert!(err.contains("count on a simulated x86/amdzen4 (`--pmu-sim amdzen4`)"), "{err}");
    // It is this machine's model that defines them: no sentence says where they are defined.
    assert!(!err.contains("is defined for"), "{err}");
    assert!(err.contains("`tmetric plan -M frontend_bound --pmu-sim amdzen4`"), "{err}");
    assert!(!err.contains("sapphirerapids"), "{err}");
}

#[test]
fn the_simulated_watchdog_is_the_simulators() {
    // --topdown's warning: the watchdog is the simulated machine's, not /proc's here.
    let err = stderr(&ok(&["--pmu-sim", "sapphirerapids", "--topdown", "-a", "sleep", "0.05"]));
    assert!(err.contains("it is the simulated `sapphirerapids` machine's watchdog"), "{err}");
    assert!(!err.contains("echo 0 >"), "{err}");
    // perf's footer hint after a group that never fit beside the watchdog's counter.
    let err = stderr(&ok(&[
        "--pmu-sim",
        "amdzen4",
        "-e",
        "{r76,rc0,rc2,rc3,rc4,rc5}",
        "-a",
        "sleep",
        "0.05",
    ]));
    assert!(err.contains("<not counted>"), "{err}");
    assert!(
        err.contains("Some events weren't counted: the simulated `amdzen4` machine's NMI watchdog holds a counter"),
        "{err}"
    );
    assert!(!err.contains("echo 0 > /proc/sys/kernel/nmi_watchdog"), "{err}");
}

/// `(metric, state)` of every node of a CSV tree (`level,value,unit,metric,state`).
fn csv_states(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            assert_eq!(fields.len(), 5, "level,value,unit,metric,state: {l}");
            (fields[3].to_string(), fields[4].to_string())
        })
        .collect()
}

/// The simulator's default workload with more heavy operations (15% of the slots, over
/// `tma_retiring`'s 10% threshold): retiring (40%) is the bottleneck, decided by an event
/// that perf's `--topdown` columns do not count.
fn heavy_workload(dir: &Path) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sim/workloads/default.json");
    let mut workload: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    workload["description"] = "heavy operations over their threshold".into();
    workload["topdown"]["tma_heavy_operations"] = 15.into();
    workload["topdown"]["tma_light_operations"] = 25.into();
    let file = dir.join("heavy.json");
    std::fs::write(&file, workload.to_string()).unwrap();
    file.display().to_string()
}

/// The nodes on the bottleneck path of CSV tree states.
fn on_path(states: &[(String, String)]) -> Vec<&str> {
    states.iter().filter(|(_, s)| s == "bottleneck").map(|(m, _)| m.as_str()).collect()
}

#[test]
fn every_view_marks_the_same_bottleneck() {
    // The case: `--topdown` did not count `topdown-heavy-ops`, so tma_retiring's
    // threshold never crossed and its tree marked tma_backend_bound where
    // `-M TopdownL1 --tree` marked tma_retiring. Its tree now counts the threshold events,
    // and every view takes the marker from one rule.
    let dir = tempfile::tempdir().unwrap();
    let workload = heavy_workload(dir.path());
    let run = |machine: &str, extra: &[&str]| {
        let mut args = vec!["--pmu-sim", machine, "--pmu-sim-workload", workload.as_str()];
        args.extend(extra);
        args.extend(["-a", "sleep", "0.1"]);
        stderr(&ok(&args))
    };
    for machine in ["sapphirerapids", "icelake", "skylakex", "alderlake"] {
        let topdown = csv_states(&run(machine, &["--topdown", "--tree", "--all", "-x,"]));
        let metrics = csv_states(&run(machine, &["-M", "TopdownL1", "--all", "-x,"]));
        let names = |s: &[(String, String)]| s.iter().map(|n| n.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&topdown), names(&metrics), "{machine}");
        assert_eq!(on_path(&topdown), on_path(&metrics), "{machine}: --topdown and -M TopdownL1");
        let retiring = on_path(&metrics).iter().any(|m| m.starts_with("tma_retiring"));
        assert!(retiring, "{machine}: {metrics:?}");
    }
    // On one machine, every layout and reader of the same counts.
    let spr = "sapphirerapids";
    let states = csv_states(&run(spr, &["-M", "TopdownL1", "--all", "-x,"]));
    assert_eq!(on_path(&states), ["tma_retiring"], "{states:?}");
    assert_eq!(csv_states(&run(spr, &["--topdown", "--tree", "--all", "-x,"])), states);
    let text = run(spr, &["-M", "TopdownL1", "--tree"]);
    let marked: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with("<=="))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(marked, ["tma_retiring"], "{text}");
    let json = run(spr, &["--topdown", "--tree", "--all", "-j"]);
    let objects: Vec<serde_json::Value> = json
        .lines()
        .filter(|l| !l.contains("simulated-pmu"))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(objects.len(), states.len(), "{json}");
    for ((name, state), object) in states.iter().zip(&objects) {
        assert_eq!(object["metric"], name.as_str());
        assert_eq!(object["bottleneck"], state == "bottleneck", "{object}");
    }
    // report of a record.
    let record = dir.path().join("spr.data");
    let record = record.to_str().unwrap();
    let args = [
        "record",
        "--pmu-sim",
        spr,
        "--pmu-sim-workload",
        &workload,
        "-M",
        "TopdownL1",
        "-o",
        record,
        "-a",
        "sleep",
        "0.1",
    ];
    ok(&args);
    let report = csv_states(&stderr(&ok(&["report", "-i", record, "--all", "-x,"])));
    assert_eq!(report, states, "report");
    // eval --from-perf over stat's own -x, log.
    let log = dir.path().join("spr.csv");
    std::fs::write(&log, run(spr, &["-M", "TopdownL1", "-x,"])).unwrap();
    let eval = ok_stdout(&["eval", "--from-perf", log.to_str().unwrap(), "--color", "never"]);
    let eval_marked: Vec<&str> = eval
        .lines()
        .filter(|l| l.contains("<=="))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("tma_")))
        .collect();
    assert_eq!(eval_marked, ["tma_retiring"], "{eval}");
}

#[test]
fn an_undecided_threshold_marks_no_bottleneck_and_says_why() {
    // Without threshold events tma_retiring's threshold (heavy operations) is unknown: the
    // bottleneck could be it, so nothing is marked, and a note says why.
    let err = stderr(&ok(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "--tree",
        "--metric-no-threshold",
        "-a",
        "sleep",
        "0.05",
    ]));
    assert!(!err.lines().any(|l| l.ends_with("<==")), "{err}");
    assert!(err.contains("tma_retiring: threshold unknown"), "{err}");
    assert!(err.contains("tma_backend_bound"), "{err}");
}

#[test]
fn all_implies_the_tree() {
    let err = stderr(&ok(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "--all",
        "-a",
        "sleep",
        "0.05",
    ]));
    // A tree, not counts: every node, those below their threshold marked without colour.
    assert!(!err.contains("TOPDOWN.SLOTS"), "{err}");
    let bad = err.lines().find(|l| l.starts_with("tma_bad_speculation")).expect(&err);
    assert!(bad.ends_with("(below)"), "{bad}");
    assert!(err.lines().any(|l| l.starts_with("tma_backend_bound") && l.ends_with("<==")), "{err}");
    let refused =
        tmetric(&["--pmu-sim", "sapphirerapids", "--topdown", "--all", "--no-tree", "true"]);
    assert_eq!(refused.status.code(), Some(129));
    assert!(stderr(&refused).contains("'--all' cannot be used with '--no-tree'"));
    let help = ok_stdout(&["report", "--help"]);
    assert!(help.contains("implies --tree"), "{help}");
}

#[test]
fn color_help_names_the_stream_it_looks_at() {
    let stat = ok_stdout(&["stat", "--help"]);
    let para = stat.split("--color <WHEN>").nth(1).unwrap();
    let para = &para[..para.find("[default").unwrap()];
    assert!(para.contains("standard error, unless -o names a file"), "{para}");
    assert!(!para.contains("standard output"), "{para}");
    let eval = ok_stdout(&["eval", "--help"]);
    let para = eval.split("--color <WHEN>").nth(1).unwrap();
    assert!(para[..para.find("[default").unwrap()].contains("standard output"), "{para}");
}

/// Runs `tmetric ARGS` with its standard input on a terminal (`script`'s pty), typing
/// Ctrl-D; `None` where util-linux `script` is not installed.
fn on_a_terminal(args: &str) -> Option<String> {
    let bin = env!("CARGO_BIN_EXE_tmetric");
    let mut child = Command::new("script")
        .args(["-qec", &format!("{bin} {args}"), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    use std::io::Write;
    // Let the command start before the end of input reaches the terminal.
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.stdin.take().unwrap().write_all(b"\x04").unwrap();
    let output = child.wait_with_output().unwrap();
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn reading_standard_input_from_a_terminal_says_so() {
    let Some(text) = on_a_terminal("eval --from-perf -") else { return };
    assert!(
        text.contains("reading a perf stat log from standard input, which is the terminal"),
        "{text}"
    );
    assert!(text.contains("Ctrl-D"), "{text}");
    let Some(text) = on_a_terminal("eval --model sapphirerapids --counts -") else { return };
    assert!(
        text.contains("reading a counts file (JSON, docs/counts-format.md) from standard input"),
        "{text}"
    );
    // Not when the input is a pipe or a file.
    let piped = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["eval", "--from-perf", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!stderr(&piped).contains("which is the terminal"), "{}", stderr(&piped));
}

#[test]
fn latency_without_samples_fails_and_says_whether_the_kernel_has_the_tracepoints() {
    let output = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .arg("latency")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("tmetric: latency: no `latency` samples in <stdin>"), "{err}");
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .map(Path::new)
        .find(|root| std::fs::read_dir(root.join("events")).is_ok());
    match tracefs {
        Some(root) if root.join("events/x86_fpu/x86_fpu_latency_xsave").is_dir() => {
            assert!(err.contains("this kernel has the tracepoints: enable them"), "{err}")
        }
        Some(_) => assert!(err.contains("this kernel has no x86_fpu_latency_xsave"), "{err}"),
        None => assert!(err.contains("tracefs is not readable"), "{err}"),
    }
    // The table and its notes still print, and another --event gets no tracepoint advice.
    assert!(stdout(&output).contains("0 samples in 0 groups"), "{}", stdout(&output));
    let other = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(["latency", "--event", "sched_switch"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2));
    assert!(!stderr(&other).contains("tracepoints"), "{}", stderr(&other));
}

#[test]
fn p97_is_called_the_mean_of_the_lowest_97_percent() {
    for sub in ["stat", "report"] {
        let help = ok_stdout(&[sub, "--help"]);
        let para = help.split("--tpebs-mode <MODE>").nth(1).unwrap();
        assert!(para.contains("the mean of the lowest 97% of the samples"), "{sub}: {para}");
        assert!(para.contains("not the 97th"), "{sub}: {para}");
    }
}
