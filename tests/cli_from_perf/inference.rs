//! What the log decides: the model (`--cpuid`, or candidates when none fits), `#slots` and
//! `#SMT_on` from printed values, and a 0 a fact decides, with its reason.

use crate::support::{ok, stderr, stdout};

use super::{
    assert_close, count, fixture, json, line_of, one, perf_printed, read, refused, rows_of,
    text_value, tmetric_stdin,
};

/// --cpuid picks the model perf would.
#[test]
fn cpuid_picks_the_model() {
    let path = fixture("perf/std_duplicate_groups.txt");
    let output = ok(&["eval", "--from-perf", &path, "--cpuid", "GenuineIntel-6-7E-5", "--json"]);
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "x86/icelake");
    assert_eq!(header["model_source"], "for cpuid GenuineIntel-6-7E-5");
    assert_eq!(rows_of(&rows, "tma_retiring").len(), 1);
}

#[test]
fn no_model_inferable_lists_candidates() {
    // Ice Lake-like topdown rows: several models explain them equally well, and compute the
    // same values for what perf printed: each is named, and Ice Lake, the only one in perf
    // 5.10's vendor data, stands for them.
    let path = fixture("perf/std_duplicate_groups.txt");
    let out = stdout(&ok(&["eval", "--from-perf", &path]));
    let header = out.lines().next().unwrap();
    assert!(
        header.starts_with("# tmetric: x86/icelake, x86/icelakex, x86/sapphirerapids, x86/tigerlake, x86/emeraldrapids or x86/rocketlake (they agree on every value here) + common metrics"),
        "{header}"
    );
    assert!(header.contains("and agree: each computes the same value"), "{header}");
    assert!(
        header.contains("x86/icelake stands for them: it is in perf's vendor data since 5.10 or earlier (the oldest vintage stored), x86/icelakex, x86/sapphirerapids and x86/tigerlake only since 6.1, x86/emeraldrapids and x86/rocketlake only since 6.12"),
        "{header}"
    );
    // Models that differ on what perf printed are refused with the candidates and their
    // values: cli_logs' a_tie_whose_models_differ_is_refused_with_the_values.
    // Events no model knows.
    let path = fixture("perf/std_unknown_events.txt");
    refused(&["eval", "--from-perf", &path], "cli_from_perf__unknown_events");
}

/// `#slots` solved from perf's printed frontend_bound on Neoverse N2:
/// frontend_bound = 100 * (STALL_SLOT_FRONTEND / (CPU_CYCLES * #slots) - BR_MIS_PRED / CPU_CYCLES)
/// is 35.0 only for #slots = 5 among 1..16.
#[test]
fn slots_inferred_from_a_printed_arm_metric() {
    let log = read("perf/arm_n2_frontend_bound.txt");
    let (cycles, stall, mispred) =
        (count(&log, "CPU_CYCLES"), count(&log, "STALL_SLOT_FRONTEND"), count(&log, "BR_MIS_PRED"));
    let fits: Vec<u32> = (1..=16)
        .filter(|&s| {
            let v = 100.0 * (stall / (cycles * f64::from(s)) - mispred / cycles);
            (v - 35.0).abs() <= 0.05
        })
        .collect();
    assert_eq!(fits, vec![5]);
    let path = fixture("perf/arm_n2_frontend_bound.txt");
    let args = ["eval", "--from-perf", &path, "--model", "neoverse-n2-v2"];
    let text = stdout(&ok(&args));
    let line = line_of(&log, "CPU_CYCLES", 0);
    assert!(
        text.contains(&format!("#slots=5 (inferred from frontend_bound printed on line {line})")),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (header, rows) = json(&ok(&json_args));
    let slots = header["literals"].as_array().unwrap().iter().find(|l| l["literal"] == "slots");
    assert_eq!(slots.unwrap()["value"], 5.0);
    let row = one(&rows, "frontend_bound");
    assert_close(&row["value"], 100.0 * (stall / (cycles * 5.0) - mispred / cycles));
    assert_eq!(row["perf"]["agrees"], true);
}

/// With no stall slots perf's printed frontend_bound (-1.0) is the same for every #slots: no
/// inference, a warning that says so and the error naming --slots; without a printed value the
/// vendor's documented N2 value applies when the cpuid names an N2.
#[test]
fn slots_not_fixed_by_the_log() {
    let log = read("perf/arm_n2_frontend_bound.txt")
        .replace("1,800,000,000      STALL_SLOT_FRONTEND", "            0      STALL_SLOT_FRONTEND")
        .replace("35.0 percent of slots", "-1.0 percent of slots");
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--model", "neoverse-n2-v2"], &log);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("#slots could not be inferred: 16 values reproduce frontend_bound"),
        "{err}"
    );
    let text = stdout(&output);
    assert!(text.contains("#slots is unknown: pass --slots N"), "{text}");

    // Not printed: nothing to solve from; the cpuid of an N2 (MIDR part 0xd49) gives 5.
    let unprinted = read("perf/arm_n2_frontend_bound.txt")
        .replace("#     35.0 percent of slots  frontend_bound", "");
    let args = ["eval", "--from-perf", "-", "-M", "frontend_bound", "--model", "neoverse-n2-v2"];
    let output = tmetric_stdin(&args, &unprinted);
    assert!(stdout(&output).contains("#slots is unknown: pass --slots N"), "{}", stdout(&output));
    let mut with_cpuid = args.to_vec();
    with_cpuid.extend(["--cpuid", "0x00000000410fd493"]);
    let output = tmetric_stdin(&with_cpuid, &unprinted);
    let text = stdout(&output);
    assert!(text.contains("#slots=5 (vendor default for Neoverse N2)"), "{text}");
    let value: f64 = text_value(&text, "frontend_bound").parse().unwrap();
    assert!((value - 35.0).abs() < 0.05, "{text}");
}

/// `#smt_on` (defaulted to 1) solved from perf's printed value when only one of 0 and 1
/// reproduces it: tma_dtlb_store = 100 * (STLB_HIT_STORES * min(latency, 7) / THREAD +
/// WALK_ACTIVE / core_clks), core_clks = DISTRIBUTED with SMT on and THREAD with it off. With
/// 3,000,000 walk cycles the two give 9.9 and 9.8; the seed's own value (0.6) fits both, so the
/// default stays.
#[test]
fn smt_on_inferred_when_the_printed_value_decides() {
    let seed = read("seed004/mtl_tma_dtlb_store.txt");
    let log =
        seed.replace("168,486 cpu_core/DTLB_STORE_MISSES", "3,000,000 cpu_core/DTLB_STORE_MISSES");
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let walk = c("DTLB_STORE_MISSES.WALK_ACTIVE");
    assert_eq!(walk, 3e6);
    let on = 100.0 * walk / c("CPU_CLK_UNHALTED.DISTRIBUTED");
    let off = 100.0 * walk / c("CPU_CLK_UNHALTED.THREAD");
    assert_eq!((format!("{on:.1}"), format!("{off:.1}")), ("9.9".to_string(), "9.8".to_string()));
    let line = line_of(&log, "cpu_core/TOPDOWN.SLOTS/", 0);
    for (printed, smt, value) in [("9.9", 1.0, on), ("9.8", 0.0, off)] {
        let edited =
            log.replace("# 0.6 % tma_dtlb_store", &format!("# {printed} % tma_dtlb_store"));
        let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &edited);
        assert!(output.status.success(), "{}", stderr(&output));
        let (header, rows) = json(&output);
        let lit = &header["literals"][0];
        assert_eq!(lit["literal"], "smt_on");
        assert_eq!(lit["value"], smt);
        assert_eq!(lit["source"], format!("inferred from tma_dtlb_store printed on line {line}"));
        let row = one(&rows, "tma_dtlb_store");
        assert_close(&row["value"], value);
        assert_eq!(row["perf"]["agrees"], true);
    }
    // A flag wins over the log.
    let edited = log.replace("# 0.6 % tma_dtlb_store", "# 9.8 % tma_dtlb_store");
    let (header, _) =
        json(&tmetric_stdin(&["eval", "--from-perf", "-", "--json", "--smt", "on"], &edited));
    assert_eq!(header["literals"][0]["source"], "flag");
}

/// A metric perf printed as 0 because of a literal or a probe says why in every layout of
/// `eval --from-perf`, as `stat` said in its notes.
#[test]
fn a_zero_that_a_fact_decides_says_why() {
    let log = "\n Performance counter stats for 'system wide':\n\n\
        \x20      4543031826      topdown-be-bound\n\
        \x20     15143439429      TOPDOWN.SLOTS\n\
        \x20      2725819094      topdown-mem-bound\n\
        \x20       107342310 ns   duration_time                    #      0.0 %  tma_pmm_bound          \n\
        \x20       107342310 ns   duration_time                    #      0.0 %  tsx_transactional_cycles\n\
        \n       0.107342310 seconds time elapsed\n\n";
    let args = ["eval", "--from-perf", "-", "--model", "sapphirerapids", "--literal", "has_pmem=0"];
    let out = tmetric_stdin(&args, log);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = |m: &str| text.lines().find(|l| l.contains(&format!("%  {m} "))).unwrap_or_default();
    assert!(line("tma_pmm_bound").contains("why: 0 because #has_pmem is 0 (flag)"), "{text}");
    assert!(
        line("tsx_transactional_cycles").contains(
            "why: 0 because has_event(cycles-t) is false: the log has no row for `cycles-t`"
        ),
        "{text}"
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let (_, rows) = json(&tmetric_stdin(&json_args, log));
    assert_eq!(one(&rows, "tma_pmm_bound")["why"], "0 because #has_pmem is 0 (flag)");
    assert!(
        one(&rows, "tsx_transactional_cycles")["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("0 because has_event(cycles-t) is false")),
        "{rows:?}"
    );
}

/// A log tmetric's simulator wrote for Sapphire Rapids (`tmetric stat --pmu-sim sapphirerapids
/// -M TopdownL1 -a sleep 1`): Emerald Rapids defines TopdownL1 alike, so both explain it and
/// agree. Both are named; Sapphire Rapids, in perf's vendor data since 6.1 (Emerald Rapids
/// since 6.12), stands for them, though it comes second by name. With perf 6.1's tables
/// Alder Lake ties instead, and Sapphire Rapids stands for them as the log names no hybrid PMU.
/// The values, with sum = topdown-fe-bound + topdown-bad-spec + topdown-retiring +
/// topdown-be-bound and ScaleUnit 100%: tma_backend_bound = 100 * be / sum, tma_retiring =
/// 100 * ret / sum, tma_frontend_bound = 100 * (fe / sum - INT_MISC.UOP_DROPPING /
/// TOPDOWN.SLOTS), tma_bad_speculation = 100 * max(1 - (fe/sum - drop/slots + be/sum +
/// ret/sum), 0).
#[test]
fn models_that_agree_are_all_named_and_the_oldest_stands_for_them() {
    let log = read("perf/std_sim_spr_emr_agree.txt");
    let (fe, bad, ret, be) = (
        count(&log, "topdown-fe-bound"),
        count(&log, "topdown-bad-spec"),
        count(&log, "topdown-retiring"),
        count(&log, "topdown-be-bound"),
    );
    let (slots, drop) = (count(&log, "TOPDOWN.SLOTS"), count(&log, "INT_MISC.UOP_DROPPING"));
    let sum = fe + bad + ret + be;
    let frontend = fe / sum - drop / slots;
    let expected = [
        ("tma_backend_bound", 100.0 * be / sum),
        ("tma_bad_speculation", 100.0 * (1.0 - (frontend + be / sum + ret / sum)).max(0.0)),
        ("tma_frontend_bound", 100.0 * frontend),
        ("tma_retiring", 100.0 * ret / sum),
    ];
    let path = fixture("perf/std_sim_spr_emr_agree.txt");
    let text = stdout(&ok(&["eval", "--from-perf", &path]));
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with("# tmetric: x86/sapphirerapids or x86/emeraldrapids (they agree on every value here) + common metrics (inferred: they explain it equally well (4 of 4 printed metrics recomputed to perf's value, 7 of 7 rows are their inputs, 1 of 1 event names known)"),
        "{header}"
    );
    assert!(
        header.contains("(8 values compared); x86/sapphirerapids stands for them: it is in perf's vendor data since 6.1, x86/emeraldrapids only since 6.12)"),
        "{header}"
    );
    for (metric, value) in expected {
        assert_eq!(text_value(&text, metric), format!("{value:.1}"), "{metric}");
        assert_eq!(format!("{value:.1}"), perf_printed(&log, metric), "{metric}");
    }
    let (json_header, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    assert_eq!(json_header["model"], "x86/sapphirerapids");
    assert_eq!(
        json_header["agreeing"],
        serde_json::json!(["x86/sapphirerapids", "x86/emeraldrapids"])
    );
    for (metric, value) in expected {
        let row = one(&rows, metric);
        assert_close(&row["value"], value);
        assert_eq!(row["perf"]["agrees"], true, "{row}");
        assert_eq!(row["model"], "x86/sapphirerapids");
    }
    // perf 6.1 had no Emerald Rapids; its Alder Lake, a hybrid, ties instead.
    let text = stdout(&ok(&["eval", "--from-perf", &path, "--perf-version", "6.1"]));
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with("# tmetric: x86/sapphirerapids or x86/alderlake (they agree on every value here)")
            && header.contains("x86/sapphirerapids stands for them: the events of x86/alderlake are on cpu_core and cpu_atom, which the log's rows do not name; it is in perf's vendor data since 6.1"),
        "{header}"
    );
    // A model given with --model is named alone.
    let (json_header, _) = json(&ok(&[
        "eval",
        "--from-perf",
        &fixture("perf/std_duplicate_groups.txt"),
        "--json",
        "--model",
        "x86/tigerlake",
    ]));
    assert_eq!(json_header["agreeing"], serde_json::json!([]));
}
