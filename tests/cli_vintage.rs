//! perf vintages end to end: `--perf-version` selecting a vintage's tables in `list`, `eval`
//! and `describe`, and `eval --from-perf` finding the vintage of a log by its metric names.
//!
//! Expected models, cpuids and formulas are read here from the vendor data in pmu-events/
//! (the base tree and the stored vintages, rebuilt by the loader crate), never from the
//! catalogue.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{ok_stdout as ok, stderr, tmetric};

fn pmu_events() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pmu-events")
}

/// A file of vintage `version` (`None`: the base tree), as perf's tree had it.
fn vendor_file(version: Option<&str>, rel: &str) -> String {
    let bytes = match version {
        None => std::fs::read(pmu_events().join("arch").join(rel)).unwrap(),
        Some(version) => {
            tmetric_pmu_events::vintage::files(&pmu_events(), version)
                .unwrap_or_else(|err| panic!("{err}"))
                .into_iter()
                .find(|(path, _)| path == rel)
                .unwrap_or_else(|| panic!("vintage {version} has no {rel}"))
                .1
        }
    };
    String::from_utf8(bytes).unwrap()
}

/// `MetricExpr` of `metric` in a vendor metrics file.
fn metric_expr(text: &str, metric: &str) -> String {
    let objects: Vec<Value> = serde_json::from_str(text).unwrap();
    let object = objects.iter().find(|o| o["MetricName"] == metric).expect("the metric is there");
    object["MetricExpr"].as_str().unwrap().to_string()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn row<'r>(rows: &'r [Value], model: &str) -> Option<&'r Value> {
    rows.iter().find(|r| r["model"] == model)
}

fn strings(value: &Value) -> Vec<&str> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect()
}

/// perf 7.2's new models are listed with `--perf-version 7.2` (before or after the
/// subcommand) with 7.2's cpuids, and only there; every row says which vintages define it.
#[test]
fn perf_72_lists_its_new_models_with_their_vintages() {
    let mapfile = vendor_file(Some("7.2"), "x86/mapfile.csv");
    let regexes: Vec<&str> = mapfile
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|cols| cols.len() >= 3 && cols[2] == "arrowlake")
        .map(|cols| cols[0])
        .collect();
    assert!(!regexes.is_empty(), "perf 7.2's mapfile names arrowlake");
    let base_mapfile = vendor_file(None, "x86/mapfile.csv");
    assert!(!base_mapfile.contains(",arrowlake,"), "perf 6.12 has no arrowlake");

    let after = json_lines(&ok(&["list", "models", "--json", "--perf-version", "7.2"]));
    let before = json_lines(&ok(&["--perf-version", "7.2", "list", "models", "--json"]));
    assert_eq!(after, before);
    let arrowlake = row(&after, "x86/arrowlake").expect("an arrowlake row with perf 7.2");
    assert_eq!(strings(&arrowlake["vintages"]), ["7.2"]);
    let cpuids: Vec<&str> = arrowlake["cpuids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["regex"].as_str().unwrap())
        .collect();
    assert_eq!(cpuids, regexes);

    let pinned = json_lines(&ok(&["list", "models", "--json", "--perf-version", "6.12"]));
    assert!(row(&pinned, "x86/arrowlake").is_none(), "perf 6.12 has no arrowlake");
    // By default the tables are the newest vintage's: arrowlake is there.
    let default = json_lines(&ok(&["list", "models", "--json"]));
    assert_eq!(row(&default, "x86/arrowlake"), Some(arrowlake));
    let skylake = row(&default, "x86/skylake").unwrap();
    assert_eq!(strings(&skylake["vintages"]), ["5.10", "6.1", "6.12", "7.2"]);
    let text = ok(&["list", "models", "skylake"]);
    assert!(text.lines().next().unwrap().contains("PERF"), "{text}");
    assert!(text.contains("5.10 6.1 6.12 7.2"), "{text}");
}

/// A metric whose formula changed between perf 6.12 and 7.2 is evaluated with the formula of
/// the vintage asked for, and `describe` shows both formulas.
#[test]
fn a_changed_formula_evaluates_per_vintage() {
    let metric = "tma_info_inst_mix_ipswpf";
    let old = metric_expr(&vendor_file(None, "x86/sapphirerapids/spr-metrics.json"), metric);
    let new = metric_expr(&vendor_file(Some("7.2"), "x86/sapphirerapids/spr-metrics.json"), metric);
    assert_eq!(old, "INST_RETIRED.ANY / cpu@SW_PREFETCH_ACCESS.T0\\,umask\\=0xF@");
    assert_eq!(new, "INST_RETIRED.ANY / SW_PREFETCH_ACCESS.ANY");
    let dir = tempfile::tempdir().unwrap();
    let counts = dir.path().join("counts.json");
    std::fs::write(
        &counts,
        r#"{"INST_RETIRED.ANY": 1e9, "SW_PREFETCH_ACCESS.ANY": 1e6, "cpu/SW_PREFETCH_ACCESS.T0,umask=0xF/": 4e6}"#,
    )
    .unwrap();
    let value = |version: &str| -> f64 {
        let path = counts.to_str().unwrap();
        let args = ["eval", "--perf-version", version, "--model", "sapphirerapids"];
        let out = ok(&[&args[..], &["--counts", path, "-M", metric, "--json"]].concat());
        let rows = json_lines(&out);
        let row = rows.iter().find(|r| r["metric"] == metric).unwrap_or_else(|| panic!("{out}"));
        row["value"].as_f64().unwrap_or_else(|| panic!("{row}"))
    };
    // 6.12: 1e9 / 4e6; 7.2: 1e9 / 1e6.
    assert_eq!(value("6.12"), 250.0);
    assert_eq!(value("7.2"), 1000.0);

    let text = ok(&["describe", metric, "--model", "sapphirerapids"]);
    let unescaped = |s: &str| s.replace('\\', "");
    assert!(text.contains("formula by perf version:"), "{text}");
    assert!(text.contains(&format!("    6.12  {}", unescaped(&old))), "{text}");
    assert!(text.contains(&format!("    7.2   {}", unescaped(&new))), "{text}");
}

/// perf 7.2's common metrics (`CPUs_utilized`) stand in for tmetric's copies of the same
/// metric; with perf 6.12 tmetric's own (`cpus_utilized`) are there.
#[test]
fn perf_72_common_metrics_replace_tmetrics_copies() {
    let names = |version: &str| -> Vec<String> {
        let out =
            ok(&["list", "metrics", "--json", "--model", "skylake", "--perf-version", version]);
        json_lines(&out)
            .into_iter()
            .filter(|r| r["common"] == true)
            .map(|r| r["metric"].as_str().unwrap().to_string())
            .collect()
    };
    let (old, new) = (names("6.12"), names("7.2"));
    assert!(old.iter().any(|n| n == "cpus_utilized") && !old.iter().any(|n| n == "CPUs_utilized"));
    assert!(new.iter().any(|n| n == "CPUs_utilized") && !new.iter().any(|n| n == "cpus_utilized"));
    // tmetric's metrics perf has no counterpart of stay.
    assert!(new.iter().any(|n| n == "tsc_rate"), "{new:?}");
    let perf: Vec<Value> =
        serde_json::from_str(&vendor_file(Some("7.2"), "common/common/metrics.json")).unwrap();
    for metric in ["insn_per_cycle", "branch_miss_rate", "cs_per_second"] {
        assert!(perf.iter().any(|m| m["MetricName"] == metric));
        assert!(new.iter().any(|n| n == metric), "{metric} missing from {new:?}");
    }
}

/// A version the catalogue has no vintage for is refused with the stored ones; a release
/// between two vintages uses the older one and says so.
#[test]
fn versions_without_a_vintage_are_said() {
    let out = tmetric(&["--perf-version", "4.0", "list", "models"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("no perf vintage for `4.0`: the catalogue holds perf 5.10, 6.1, 6.12, 7.2"),
        "{err}"
    );
    let out = tmetric(&["list", "models", "--perf-version", "6.5", "--json"]);
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("perf 6.5 has no vendor tables of its own here: using perf 6.1's"),
        "{err}"
    );
    let rows = json_lines(&String::from_utf8_lossy(&out.stdout));
    // perf 6.1 had no graniterapids; 6.12 has.
    assert!(row(&rows, "x86/graniterapids").is_none());
}

/// A perf 5.x log printing `IPC` (a metric name perf 6.x no longer has) is evaluated with the
/// vintage that defines it, and checked against perf's printed value.
#[test]
fn an_old_logs_metric_names_choose_its_vintage() {
    let ipc = metric_expr(&vendor_file(Some("5.10"), "x86/skylake/skl-metrics.json"), "IPC");
    assert_eq!(ipc, "INST_RETIRED.ANY / CPU_CLK_UNHALTED.THREAD");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("perf-5.log");
    // 3,146,215,373 / 2,621,842,156 = 1.19999...
    std::fs::write(
        &log,
        "\n Performance counter stats for 'system wide':\n\n     3,146,215,373      inst_retired.any          #      1.2 IPC                    \n     2,621,842,156      cpu_clk_unhalted.thread                                     \n\n       1.001234567 seconds time elapsed\n\n",
    )
    .unwrap();
    let out = tmetric(&["eval", "--from-perf", log.to_str().unwrap()]);
    let (text, err) = (String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out));
    assert!(out.status.success(), "{text}{err}");
    assert!(text.contains("perf 5.10's vendor tables"), "{text}");
    assert!(text.lines().any(|l| l.trim() == "1.20 IPC"), "{text}");
    assert!(err.contains("perf printed 1 of these values") && err.contains("all agree"), "{err}");
    // With the vintage given, nothing is inferred: perf 6.12 has no `IPC`.
    let out = tmetric(&["eval", "--from-perf", log.to_str().unwrap(), "--perf-version", "6.12"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("1.20 IPC"), "{text}");
}

/// perf 7.x's build-generated metrics (`extra-metrics.json`, written by perf's Python at build
/// time and stored by import-vendor) are in the 7.2 vintage and nowhere before it: each formula
/// below is the one the Python source builds (checked by hand against intel_metrics.py,
/// amd_metrics.py and common_metrics.py of Linux 7.2), and each value is computed here from
/// the counts given.
#[test]
fn perf_72_build_generated_lpm_metrics_evaluate() {
    let generated = |model: &str| vendor_file(Some("7.2"), &format!("{model}/extra-metrics.json"));
    let (skl, zen4) = (generated("x86/skylake"), generated("x86/amdzen4"));
    // intel_metrics.py IntelBr: d_ratio(br_m_all, br_all), the first events skylake has.
    assert_eq!(
        metric_expr(&skl, "lpm_br_total_mispred"),
        "d_ratio(BR_MISP_RETIRED.ALL_BRANCHES, BR_INST_RETIRED.ALL_BRANCHES)"
    );
    // amd_metrics.py AmdBr: the same ratio over AMD's events.
    assert_eq!(metric_expr(&zen4, "lpm_br_total_mispred"), "d_ratio(ex_ret_brn_misp, ex_ret_brn)");
    // intel_metrics.py Idle: d_ratio(max(tsc - mperf, 0), tsc).
    assert_eq!(metric_expr(&skl, "lpm_idle"), "d_ratio(max(msr@tsc@ - msr@mperf@, 0), msr@tsc@)");
    // intel_metrics.py Rapl: pkg (or NaN without it) * 2^-32 joules, per second.
    assert_eq!(
        metric_expr(&skl, "lpm_cpu_power_pkg"),
        "d_ratio((power@energy\\-pkg@ if has_event(power@energy\\-pkg@) else NaN) * 232.83064365386963e-12, duration_time)"
    );
    // common_metrics.py Cycles: user cycles over kernel + guest + user cycles.
    assert_eq!(
        metric_expr(&skl, "lpm_cycles_user"),
        "d_ratio(cpu\\-cycles:uH, cpu\\-cycles:kHh + cpu\\-cycles:G + cpu\\-cycles:uH)"
    );

    let dir = tempfile::tempdir().unwrap();
    let eval = |version: &str, model: &str, counts: &str, metric: &str| -> Option<f64> {
        let path = dir.path().join(format!("{model}.json"));
        std::fs::write(&path, counts).unwrap();
        let path = path.to_str().unwrap();
        let args = ["eval", "--perf-version", version, "--model", model, "--counts", path];
        let out = ok(&[&args[..], &["-M", metric, "--json"]].concat());
        let rows = json_lines(&out);
        let row = rows.iter().find(|r| r["metric"] == metric)?;
        Some(row["value"].as_f64().unwrap_or_else(|| panic!("{row}")))
    };
    let branches = r#"{"BR_MISP_RETIRED.ALL_BRANCHES": 2e6, "BR_INST_RETIRED.ALL_BRANCHES": 1e8}"#;
    assert_eq!(eval("7.2", "skylake", branches, "lpm_br_total_mispred"), Some(2e6 / 1e8 * 100.0));
    let amd = r#"{"ex_ret_brn_misp": 3e6, "ex_ret_brn": 2e8}"#;
    assert_eq!(eval("7.2", "amdzen4", amd, "lpm_br_total_mispred"), Some(3e6 / 2e8 * 100.0));
    let idle = r#"{"msr/tsc/": 1e10, "msr/mperf/": 2.5e9}"#;
    assert_eq!(eval("7.2", "skylake", idle, "lpm_idle"), Some(75.0));
    // 10 J in RAPL's 2^-32 J units over 2 s: 5 W.
    let power = r#"{"power/energy-pkg/": 42949672960, "duration_time": 2.0}"#;
    assert_eq!(eval("7.2", "skylake", power, "lpm_cpu_power_pkg"), Some(5.0));
    let cycles = r#"{"cpu-cycles:uH": 6e8, "cpu-cycles:kHh": 3e8, "cpu-cycles:G": 1e8}"#;
    assert_eq!(eval("7.2", "skylake", cycles, "lpm_cycles_user"), Some(60.0));
    // perf 7.2's common metrics write `software@context-switches,name=context-switches@`: a
    // counts file's plain perf names give them, as they give perf 6.12's.
    let common = r#"{"context-switches": 300, "task-clock": 2e9, "duration_time": 1e9}"#;
    let metric = "cs_per_second";
    let want = metric_expr(&vendor_file(Some("7.2"), "common/common/metrics.json"), metric);
    let formula = r"(software@context\-switches\,name\=context\-switches@ * 1e9) / (software@cpu\-clock\,name\=cpu\-clock@ if #target_cpu else software@task\-clock\,name\=task\-clock@)";
    // Per task (`#target_cpu` 0): context switches over task-clock seconds.
    assert_eq!(want, formula);
    assert_eq!(eval("7.2", "skylake", common, metric), Some(300.0 * 1e9 / 2e9));

    // perf 6.12 has none of them.
    let out = ok(&["list", "metrics", "lpm_*", "--model", "skylake", "--perf-version", "6.12"]);
    assert!(!out.contains("lpm_"), "{out}");
    let out =
        ok(&["list", "metrics", "lpm_*", "--json", "--model", "skylake", "--perf-version", "7.2"]);
    let names: Vec<String> =
        json_lines(&out).iter().map(|r| r["metric"].as_str().unwrap().to_string()).collect();
    let objects: Vec<Value> = serde_json::from_str(&skl).unwrap();
    let mut expected: Vec<String> = objects
        .iter()
        .map(|o| o["MetricName"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("lpm_"))
        .collect();
    expected.sort();
    let mut names = names;
    names.sort();
    assert_eq!(names, expected);
}

/// `describe` shows a generated metric with its description, groups and formula, and the
/// group description from `extra-metricgroups.json`.
#[test]
fn describe_shows_a_build_generated_metric() {
    let args = ["describe", "lpm_br_total_mispred", "--model", "skylake", "--perf-version", "7.2"];
    let text = ok(&args);
    assert!(text.contains("lpm_br_total_mispred"), "{text}");
    assert!(
        text.contains("not correctly predicted as a percentage of all branch instrucions"),
        "{text}"
    );
    assert!(
        text.contains("d_ratio(BR_MISP_RETIRED.ALL_BRANCHES, BR_INST_RETIRED.ALL_BRANCHES)"),
        "{text}"
    );
    assert!(text.contains("lpm_br_total"), "{text}");
    let groups =
        ok(&["list", "metricgroups", "lpm_br", "--model", "skylake", "--perf-version", "7.2"]);
    let perf: Value =
        serde_json::from_str(&vendor_file(Some("7.2"), "x86/skylake/extra-metricgroups.json"))
            .unwrap();
    let description = perf["lpm_br"].as_str().unwrap();
    assert_eq!(description, "breakdown of retired branch instructions");
    assert!(groups.contains(description), "{groups}");
}

/// The newest stored vintage (`7.2`) and the base's (`6.12`), read from pmu-events/: the
/// vintage directories and `UPSTREAM.md`'s kernel version.
fn newest_and_base() -> (String, String) {
    let newest = tmetric_pmu_events::vintage::stored(&pmu_events()).pop().expect("a vintage");
    let kernel = tmetric_pmu_events::vintage::kernel_of(&pmu_events()).unwrap();
    let base = tmetric_pmu_events::vintage::major_minor(&kernel).unwrap();
    assert!(
        tmetric_pmu_events::vintage::version_key(&newest)
            > tmetric_pmu_events::vintage::version_key(&base)
    );
    (newest, base)
}

/// Without --perf-version the vendor tables are the newest vintage's and the output perf
/// 6.12's (its built-in `CPUs utilized` beside task-clock, which perf 7.x no longer prints);
/// `-v`, `list models` and `describe` say so. With --perf-version 6.12 both are 6.12's.
#[test]
fn the_default_takes_the_newest_tables_and_prints_as_perf_6_12() {
    let (newest, base) = newest_and_base();
    let vintage_of = |args: &[&str]| -> Vec<String> {
        let rows = json_lines(&ok(&[&["list", "models", "--json"], args].concat()));
        let mut seen: Vec<String> =
            rows.iter().map(|r| r["vintage"].as_str().unwrap().to_string()).collect();
        seen.dedup();
        seen
    };
    assert_eq!(vintage_of(&[]), std::slice::from_ref(&newest));
    assert_eq!(vintage_of(&["--perf-version", &base]), std::slice::from_ref(&base));

    let text = ok(&["list", "models", "skylake"]);
    let said = format!("vendor tables: perf {newest}'s");
    assert!(text.contains(&said) && text.contains("output as perf 6.12 prints it"), "{text}");
    let text = ok(&["describe", "tma_info_inst_mix_ipswpf", "--model", "sapphirerapids"]);
    assert!(text.contains(&said), "{text}");
    // The formula shown is the newest vintage's.
    let new = metric_expr(
        &vendor_file(Some(&newest), "x86/sapphirerapids/spr-metrics.json"),
        "tma_info_inst_mix_ipswpf",
    );
    assert!(text.contains(&format!("  formula: {new}")), "{text}");

    let stat = |args: &[&str]| {
        let out = tmetric(&[args, &["-v", "-e", "task-clock", "true"]].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
    };
    let err = stat(&[]);
    assert!(err.contains(&said) && err.contains("output as perf 6.12 prints it"), "{err}");
    assert!(err.contains("CPUs utilized"), "perf 6.12's built-in metric: {err}");
    let err = stat(&["--perf-version", &base]);
    let said = format!("vendor tables: perf {base}'s");
    assert!(err.contains(&said) && err.contains("chosen with --perf-version"), "{err}");
    assert!(
        err.contains("output as perf 6.12 prints it") && err.contains("CPUs utilized"),
        "{err}"
    );
    // perf 7.2's contract, for contrast: no built-in metrics.
    let err = stat(&["--perf-version", &newest]);
    assert!(err.contains(&format!("output as perf {newest} prints it")), "{err}");
    assert!(!err.contains("CPUs utilized"), "{err}");
}

/// A CPU model only the newest vintage's mapfile has (arrowlake, a cpuid its row matches)
/// is found by default; with perf 6.12's tables that cpuid names no model.
#[test]
fn a_model_only_the_newest_vintage_has_is_found_by_default() {
    let (newest, base) = newest_and_base();
    let mapfile = vendor_file(Some(&newest), "x86/mapfile.csv");
    let regex = mapfile
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|cols| cols.len() >= 3 && cols[2] == "arrowlake")
        .map(|cols| cols[0].to_string())
        .expect("the newest mapfile names arrowlake");
    // `GenuineIntel-6-C[56]`: a string it matches, the first of each class, stepping 0.
    let mut cpuid = String::new();
    let mut chars = regex.chars();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                cpuid.push(chars.next().unwrap());
                chars.by_ref().find(|&c| c == ']');
            }
            c => {
                assert!(c.is_ascii_alphanumeric() || c == '-', "a literal in {regex}");
                cpuid.push(c);
            }
        }
    }
    cpuid.push_str("-0");
    assert!(!vendor_file(None, "x86/mapfile.csv").contains(",arrowlake,"));
    let plan = ["plan", "--cpuid", &cpuid, "-M", "tma_frontend_bound"];
    let out = ok(&plan);
    let title = format!("# plan for -M tma_frontend_bound on x86/arrowlake (cpuid {cpuid})");
    assert!(out.starts_with(&title), "{out}");
    let out = tmetric(&[&plan[..], &["--perf-version", &base]].concat());
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("arrowlake"));
}
