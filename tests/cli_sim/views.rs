//! How metrics print on a simulated machine: threshold colours, per socket and per core,
//! `--tree`, `--errors`' bars, and the reason beside a `nan` or 0.

use crate::support::{stderr, tmetric};

#[test]
fn thresholds_colour_values_only_when_asked_or_on_a_terminal() {
    let always = stderr(&tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "--color",
        "always",
        "sleep",
        "0.1",
    ]));
    // Backend bound 29.8% crosses its 20% threshold: red; bad speculation 10.2% does not
    // cross 15%: green.
    let backend = always.lines().find(|l| l.contains("tma_backend_bound")).expect(&always);
    assert!(backend.contains("\x1b[31m"), "{backend:?}");
    let bad = always.lines().find(|l| l.contains("tma_bad_speculation")).expect(&always);
    assert!(bad.contains("\x1b[32m"), "{bad:?}");
    for args in [["--color", "never"], ["--color", "auto"]] {
        let mut all = vec!["--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["sleep", "0.1"]);
        let plain = stderr(&tmetric(&all));
        assert!(!plain.contains('\x1b'), "{args:?}: {plain:?}");
    }
}

#[test]
fn per_core_and_per_socket_evaluate_each_unit_and_cputype_filters_hybrids() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "--per-socket",
        "-x",
        ",",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let retiring: Vec<&str> = text.lines().filter(|l| l.contains("tma_retiring")).collect();
    assert_eq!(retiring.len(), 2, "two sockets: {text}");
    assert!(retiring.iter().all(|l| l.starts_with("S0,4,") || l.starts_with("S1,4,")), "{text}");
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "--per-core",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert_eq!(text.lines().filter(|l| l.contains("tma_retiring")).count(), 4, "{text}");
    let out = tmetric(&[
        "--pmu-sim",
        "alderlake",
        "-M",
        "TopdownL1",
        "--cputype",
        "atom",
        "-a",
        "-v",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("cpu_atom/") && !text.contains("cpu_core/"), "{text}");
    assert!(text.contains("group 1: {"), "-v shows the groups: {text}");
    assert!(text.contains("its events count together"), "{text}");
    // Alder Lake's vendor tree has no counter.json: -v says the numbers are vendor defaults.
    assert!(text.contains("PMU cpu_atom: 6 general + 3 fixed counters (vendor default"), "{text}");
}

#[test]
fn tree_nests_children_hides_quiet_nodes_and_marks_the_bottleneck() {
    let out = tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1,TopdownL2",
        "--tree",
        "-a",
        "sleep",
        "0.1",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let line =
        |name: &str| text.lines().find(|l| l.trim_start().starts_with(name)).map(str::to_string);
    // Level 2 is indented under level 1.
    let fetch = line("tma_fetch_latency").expect(&text);
    assert!(fetch.starts_with("  tma_fetch_latency"), "{fetch}");
    assert!(line("tma_frontend_bound").expect(&text).starts_with("tma_frontend_bound"));
    // Bad speculation (10%) is below its 15% threshold: hidden unless --all.
    assert!(line("tma_bad_speculation").is_none(), "{text}");
    let all = stderr(&tmetric(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1,TopdownL2",
        "--tree",
        "--all",
        "-a",
        "sleep",
        "0.1",
    ]));
    assert!(all.contains("tma_bad_speculation"), "{all}");
    // The bottleneck path: one marked node per level, parents before children.
    let marked: Vec<&str> = text.lines().filter(|l| l.ends_with("<==")).collect();
    assert!(!marked.is_empty(), "{text}");
    assert!(!marked[0].starts_with(' '), "the path starts at level 1: {text}");
}

/// `--errors` puts each metric's error bar on its JSON object (`metric-error`, in the
/// metric's printed unit) and beside its value in the default layout; metrics whose events
/// ran together the whole time have counting's own error only; without `--errors` JSON has perf's keys only; CSV
/// (whose fields are perf's) gets the block of bars as comment lines.
#[test]
fn errors_show_beside_metrics_in_json_and_the_default_layout() {
    let run = |group: &str, extra: &[&str]| {
        let mut args =
            vec!["--pmu-sim", "sapphirerapids", "--pmu-sim-workload", "phased", "-M", group, "-a"];
        args.extend_from_slice(extra);
        args.extend(["sleep", "0.5"]);
        let out = tmetric(&args);
        let text = stderr(&out);
        assert!(out.status.success(), "{text}");
        text
    };
    let json = |text: &str| -> Vec<serde_json::Value> {
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    };
    // Level 1 fits the counters: not multiplexed, its bars are counting's own error only,
    // the 8-bit rounding of PERF_METRICS (under a percentage point) and the overcount.
    let l1 = json(&run("TopdownL1", &["-j", "--errors"]));
    let l1_bars: Vec<f64> =
        l1.iter().filter_map(|v| v.get("metric-error")?.as_str()?.parse().ok()).collect();
    assert_eq!(l1_bars.len(), 4, "{l1:?}");
    assert!(l1_bars.iter().all(|&e| e > 0.0 && e < 1.0), "{l1_bars:?}");
    // Level 3 is multiplexed: each metric has a bar, a number in its unit, smaller than
    // the value's range.
    let l3 = json(&run("TopdownL3", &["-j", "--errors", "--full-metrics"]));
    let bars: Vec<(&str, f64, f64)> = l3
        .iter()
        .filter_map(|v| {
            let name = v.get("metric-name")?.as_str()?;
            let value = v.get("metric-value")?.as_str()?.parse().ok()?;
            let error = v.get("metric-error")?.as_str()?.parse().ok()?;
            Some((name, value, error))
        })
        .collect();
    assert!(bars.len() >= 10, "{l3:?}");
    // A difference of two near-equal counts (Sapphire Rapids' `tma_other_mispredicts` under
    // `phased`) may honestly get a wide bar when a loaded machine gives its groups few
    // turns, but never wider than what covers a share's whole 0-100 % from its value.
    assert!(bars.iter().all(|&(_, v, e)| e > 0.0 && e <= v.max(100.0 - v) + 1e-9), "{bars:?}");
    let plain = json(&run("TopdownL3", &["-j"]));
    assert!(plain.iter().all(|v| v.get("metric-error").is_none()));
    // The default layout: `± x` after the label, in the value's decimals.
    let text = run("TopdownL3", &["--errors"]);
    let shown: Vec<&str> =
        text.lines().filter(|l| l.contains(" % ") && l.contains(" ± ")).collect();
    assert!(shown.len() >= 10, "{text}");
    assert!(
        shown.iter().all(|l| {
            let after = l.split(" ± ").nth(1).unwrap_or_default();
            let number = after.split_whitespace().next().unwrap_or_default();
            number.parse::<f64>().is_ok() && number.split('.').nth(1).is_some_and(|d| d.len() == 1)
        }),
        "{text}"
    );
    // CSV: perf's fields, the bars as a block of comment lines.
    let csv = run("TopdownL3", &["-x,", "--errors"]);
    assert!(!csv.lines().any(|l| !l.starts_with('#') && l.contains('±')), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("# Error bars (2 standard deviations")), "{csv}");
}

/// A `nan` or 0 that a fact of the machine decides, or a division by a counted 0, says why
/// without `-v`: the TSX metrics are 0 because the simulated machines have no `cycles-t`
/// (`has_event`), the PMM metrics 0 because they have no NFIT table (`#has_pmem`), and
/// `tma_info_botlnk_l2_dsb_bandwidth` is 0/0 on a workload without fetch bandwidth loss.
#[test]
fn a_nan_or_zero_from_a_fact_or_a_zero_divisor_prints_its_reason() {
    let out = tmetric(&[
        "--perf-version",
        "6.12",
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "tsx_transactional_cycles,tma_info_system_pmm_read_bw,tma_info_thread_ipc",
        "-a",
        "sleep",
        "0.01",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    for note in [
        "tsx_transactional_cycles: 0 because has_event(cycles-t) is false: this machine has no `cycles-t` event",
        "tma_info_system_pmm_read_bw: 0 because #has_pmem is 0 on this machine: this machine has no persistent memory (no ACPI NFIT table)",
    ] {
        assert!(text.contains(note), "{note}\n{text}");
    }
    assert!(!text.contains("tma_info_thread_ipc:"), "a number needs no reason:\n{text}");
    let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sim/no-fetch-bandwidth.json");
    let out = tmetric(&[
        "--perf-version",
        "6.12",
        "--pmu-sim",
        "sapphirerapids",
        "--pmu-sim-workload",
        workload,
        "-M",
        "tma_info_botlnk_l2_dsb_bandwidth",
        "-a",
        "sleep",
        "0.01",
    ]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let note = "tma_info_botlnk_l2_dsb_bandwidth: nan (a division by zero): every input was counted, and tma_dsb, tma_mite are 0";
    assert!(text.contains(note), "{text}");
}

/// perf 6.12's `--no-merge` is `opt_mode.no_aggr`: on a hybrid machine it prints one line per
/// CPU with that CPU's core PMU, as `-A` does, in CPU order; the merged view prints one line
/// per core PMU.
#[test]
fn no_merge_on_a_hybrid_machine_is_per_cpu_as_in_perf_6_12() {
    let lines = |flag: Option<&str>| -> Vec<(String, String)> {
        let mut args = vec!["--pmu-sim", "alderlake", "-a", "-x,", "-e", "cycles"];
        args.extend(flag);
        args.extend(["sleep", "0.05"]);
        let out = tmetric(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        stderr(&out)
            .lines()
            .filter(|l| l.contains("/cycles/"))
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let cpu = if flag.is_some() { f[0].to_string() } else { String::new() };
                (cpu, f.iter().find(|x| x.ends_with("/cycles/")).unwrap().to_string())
            })
            .collect()
    };
    let merged = lines(None);
    assert_eq!(merged.len(), 2, "{merged:?}");
    let per_cpu = lines(Some("-A"));
    assert_eq!(lines(Some("--no-merge")), per_cpu);
    assert!(per_cpu.len() > 2, "{per_cpu:?}");
    // Each CPU once, in order, with one core PMU.
    let cpus: Vec<&str> = per_cpu.iter().map(|(c, _)| c.as_str()).collect();
    let mut sorted = cpus.clone();
    sorted.sort_by_key(|c| c.trim_start_matches("CPU").parse::<u32>().unwrap());
    sorted.dedup();
    assert_eq!(cpus, sorted);
}

/// `#core_wide` follows perf's `core_wide()` for each target: Skylake-X's
/// `tma_info_core_core_clks` reads `CPU_CLK_UNHALTED.THREAD_ANY / 2` only when whole cores are
/// counted (`-a`, or `-a -C` naming both threads of each core: CPUs 0 and 1 share one on the
/// simulated machine), else `THREAD / 2 * (1 + ONE_THREAD_ACTIVE / REF_XCLK)` (per task, `-C`
/// alone, `-a -C` with half a core). The value is worked by hand from the printed counts.
#[test]
fn core_wide_is_perfs_for_each_target() {
    let targets: [(&[&str], bool); 5] = [
        (&[], false),
        (&["-C", "0"], false),
        (&["-a"], true),
        (&["-a", "-C", "0"], false),
        (&["-a", "-C", "0,1"], true),
    ];
    for (target, whole) in targets {
        let mut args = vec!["stat", "--pmu-sim", "skylakex", "--perf-version", "6.12", "-j"];
        args.extend_from_slice(target);
        args.extend_from_slice(&["-M", "tma_info_core_core_clks", "--", "true"]);
        let out = tmetric(&args);
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &stderr(&out);
        assert!(out.status.success(), "{target:?}: {text}");
        let count = |event: &str| -> Option<f64> {
            text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find_map(
                |v| {
                    (v.get("event")?.as_str()? == event)
                        .then(|| v.get("counter-value")?.as_str()?.parse().ok())?
                },
            )
        };
        let want = if whole {
            assert!(count("CPU_CLK_UNHALTED.THREAD").is_none(), "{target:?}: {text}");
            count("CPU_CLK_UNHALTED.THREAD_ANY").unwrap() / 2.0
        } else {
            assert!(count("CPU_CLK_UNHALTED.THREAD_ANY").is_none(), "{target:?}: {text}");
            let thread = count("CPU_CLK_UNHALTED.THREAD").unwrap();
            let one = count("CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE").unwrap();
            let xclk = count("CPU_CLK_UNHALTED.REF_XCLK").unwrap();
            thread / 2.0 * (1.0 + one / xclk)
        };
        let got = super::json_metrics(&text)
            .into_iter()
            .find(|(n, _)| n == "tma_info_core_core_clks")
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("{target:?}: no value: {text}"));
        assert!((got - want).abs() <= 1e-6 * want, "{target:?}: {got} for {want}");
    }
}
