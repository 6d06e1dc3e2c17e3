//! `perflog`: metrics over perf stat logs through the library, as an exporter or benchmark
//! harness would call it, on logs perf printed (hand-written in perf's layouts).

use std::path::Path;

use tmetric_catalog::Model;
use tmetric_engine::{LiteralSource, Literals, Select};
use tmetric_model::Literal;
use tmetric_offline::perflog::builtins::{printed_as, select};
use tmetric_offline::perflog::infer::{Inference, Score, infer_model};
use tmetric_offline::perflog::literals::{Unsolved, infer_literals};
use tmetric_offline::perflog::{
    InputSource, LogEvaluator, Selection, default_selection, header_pmu, lookup_pmu_name,
    printed_metrics,
};
use tmetric_perfstat::{PerfLog, PrintedMetric};

fn log(path: &str) -> (PerfLog, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join(path)).unwrap();
    (tmetric_perfstat::parse(&text, path).unwrap(), text)
}

fn model(path: &str) -> &'static Model {
    tmetric_catalog::model(path).unwrap_or_else(|| panic!("no model {path}"))
}

fn defaults() -> Literals {
    let mut literals = Literals::default();
    literals.apply_defaults();
    literals
}

/// The line (1-based) of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn scores_order_by_agreement_first() {
    let agree = Score { agree: 1, ..Score::default() };
    let rows = Score { explained: 20, known_events: 30, ..Score::default() };
    assert!(agree > rows);
    assert_eq!(header_pmu(Some("TopdownL1 (cpu_core)")), Some("cpu_core".to_string()));
    assert_eq!(header_pmu(Some("TopdownL1")), None);
    assert_eq!(lookup_pmu_name("default_core"), None);
    assert_eq!(lookup_pmu_name("cpu_atom"), Some("cpu_atom"));
}

/// On the hybrid log the default selection is the two tma_retiring perf printed, one per
/// core PMU, each recomputed from its PMU's rows to perf's value: cpu_atom's is
/// TOPDOWN_RETIRING.ALL / (5 * CPU_CLK_UNHALTED.CORE) = 12,345,678 / 50,000,000.
#[test]
fn hybrid_rows_agree_with_perf() {
    let (log, text) = log("crates/perfstat/tests/data/hand/std_hybrid.txt");
    let adl = model("x86/alderlake");
    let mut evaluators = vec![LogEvaluator::new(adl, false, &defaults(), None)];
    let printed = printed_metrics(&log);
    let mut selection = Selection::default();
    let roots = default_selection(&mut evaluators, &log, &printed, &mut selection);
    let shown: Vec<(&str, &str)> = roots[0]
        .iter()
        .map(|r| (adl.str(adl.metric(r.metric).name), adl.str(adl.metric(r.metric).pmu)))
        .collect();
    assert_eq!(shown, [("tma_retiring", "cpu_core"), ("tma_retiring", "cpu_atom")]);
    assert!(selection.also.iter().any(|m| m == "tma_info_core_ipc"), "{selection:?}");
    let atom = evaluators[0].evaluate(&log.blocks[0], roots[0][1]);
    assert!(atom.complete());
    let expected = 100.0 * 12_345_678.0 / (5.0 * 10_000_000.0);
    assert!((atom.scaled(adl).unwrap() - expected).abs() < 1e-9, "{:?}", atom.result);
    assert_eq!(atom.check, Some(true));
    let line = line_of(&text, "cpu_atom/TOPDOWN_RETIRING.ALL/");
    assert!(atom.inputs.iter().any(|i| matches!(
        &i.source,
        InputSource::Row { value, lines, .. } if *value == 12_345_678.0 && lines == &[line]
    )));
    let core = evaluators[0].evaluate(&log.blocks[0], roots[0][0]);
    assert_eq!(core.check, Some(true));
}

/// The hybrid log's printed metrics recompute to perf's values only on Alder Lake; a log
/// that six models explain alike is an answer too, with the six.
#[test]
fn models_inferred_from_printed_metrics() {
    // perf 6.12's tables: the logs are perf 6.12's output.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let (hybrid, _) = log("crates/perfstat/tests/data/hand/std_hybrid.txt");
    match infer_model(&hybrid, &defaults()) {
        Inference::Model { model, score, .. } => {
            assert_eq!(model.path(), "x86/alderlake");
            assert_eq!((score.agree, score.known_metrics), (2, 2));
        }
        other => panic!("{other:?}"),
    }
    let (per_core, _) = log("crates/perfstat/tests/data/hand/std_interval_per_core_metrics.txt");
    match infer_model(&per_core, &defaults()) {
        Inference::Tied { models, .. } => {
            let paths: Vec<String> = models.iter().map(|m| m.path()).collect();
            assert!(paths.contains(&"x86/sapphirerapids".to_string()), "{paths:?}");
            assert_eq!(paths.len(), 6, "{paths:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// Neoverse N2 without `#slots`: `#slots` solved from perf's printed frontend_bound (35.0
/// only for #slots = 5 among 1..16), and the metric recomputed to perf's value.
#[test]
fn slots_from_an_arm_log() {
    let (log, text) = log("tests/data/perf/arm_n2_frontend_bound.txt");
    let mut literals = defaults();
    let n2 = model("arm64/arm/neoverse-n2-v2");
    let root = n2.metrics_named("frontend_bound")[0];
    let mut evaluators = vec![LogEvaluator::new(n2, false, &literals, None)];
    let before = evaluators[0].evaluate(&log.blocks[0], root);
    assert!(before.result.failure.is_some(), "#slots is unknown: {:?}", before.result);
    let unsolved = infer_literals(&mut evaluators, &[vec![root.into()]], &log, &mut literals, None);
    assert!(unsolved.is_empty(), "{unsolved:?}");
    let line = line_of(&text, "1,000,000,000      CPU_CYCLES");
    assert_eq!(literals.get(Literal::Slots), 5.0);
    assert_eq!(literals.source(Literal::Slots), LiteralSource::Inferred("frontend_bound", line));
    let after = evaluators[0].evaluate(&log.blocks[0], root);
    let expected = 100.0 * (1.8e9 / (1e9 * 5.0) - 1e7 / 1e9);
    assert!((after.scaled(n2).unwrap() - expected).abs() < 1e-9, "{:?}", after.result);
    assert_eq!(after.check, Some(true));
}

/// A printed value that every candidate reproduces fixes nothing, and says how many fit.
#[test]
fn an_unconstrained_literal_stays_unknown() {
    let (_, text) = log("tests/data/perf/arm_n2_frontend_bound.txt");
    let text = text
        .replace("1,800,000,000      STALL_SLOT_FRONTEND", "            0      STALL_SLOT_FRONTEND")
        .replace("35.0 percent of slots", "-1.0 percent of slots");
    let log = tmetric_perfstat::parse(&text, "n2").unwrap();
    let n2 = model("arm64/arm/neoverse-n2-v2");
    let root = n2.metrics_named("frontend_bound")[0];
    let mut literals = defaults();
    let mut evaluators = vec![LogEvaluator::new(n2, false, &literals, None)];
    let unsolved = infer_literals(&mut evaluators, &[vec![root.into()]], &log, &mut literals, None);
    assert!(
        matches!(&unsolved[..], [Unsolved::Several { literal: Literal::Slots, count: 16, .. }]),
        "{unsolved:?}"
    );
    assert!(literals.get(Literal::Slots).is_nan());
    // The cpuid of an N2 (MIDR part 0xd49) gives the vendor's documented 5.
    let mut literals = defaults();
    infer_literals(
        &mut evaluators,
        &[vec![root.into()]],
        &log,
        &mut literals,
        Some("0x00000000410fd493"),
    );
    assert_eq!(literals.get(Literal::Slots), 5.0);
    assert_eq!(literals.source(Literal::Slots), LiteralSource::Vendor("Neoverse N2"));
}

/// Only software events: no CPU model, and the rows no common metric reads are named.
#[test]
fn software_logs_have_no_cpu_model() {
    let (log, _) = log("tests/data/perf/std_software_tracepoints.txt");
    match infer_model(&log, &defaults()) {
        Inference::SoftwareOnly { ignored } => assert!(!ignored.is_empty()),
        other => panic!("{other:?}"),
    }
}

fn printed(text: &str, label: &str) -> PrintedMetric {
    let log = format!(
        " Performance counter stats for 'x':\n\n         1,000      instructions   # {text} {label}\n\n       1.0 seconds time elapsed\n"
    );
    let log = tmetric_perfstat::parse(&log, "t").unwrap();
    log.blocks[0].rows[0].metrics[0].clone()
}

#[test]
fn perf_labels_are_matched_exactly_after_the_value() {
    let m = printed("   45.0%", "Retiring");
    assert_eq!(printed_as(&m, "Retiring"), Some(("45.0".to_string(), Some(45.0))));
    assert_eq!(printed_as(&m, "retiring"), None);
    let m = printed("    1.50 ", " insn per cycle");
    assert_eq!(printed_as(&m, "insn per cycle"), Some(("1.50".to_string(), Some(1.5))));
    let m = printed("  12.345 %", "of all cache refs");
    assert_eq!(printed_as(&m, "of all cache refs"), Some(("12.345".to_string(), Some(12.345))));
    let m = printed("    2.50%", "of all branches");
    assert_eq!(printed_as(&m, "of all branches"), Some(("2.50".to_string(), Some(2.5))));
}

#[test]
fn m_items_split_off_the_builtins() {
    use tmetric_engine::builtin::BUILTINS;
    let (b, rest) = select(&["insn_per_cycle", "tma_retiring"]);
    assert_eq!(b.selected.len(), 1);
    assert_eq!(rest, vec!["tma_retiring"]);
    let (b, rest) = select(&["builtin"]);
    assert_eq!(b.selected.len(), BUILTINS.len());
    assert!(rest.is_empty());
    let (b, _) = select(&[]);
    assert_eq!(b.selected.len(), BUILTINS.len());
    let (b, rest) = select(&["tma_retiring"]);
    assert!(b.selected.is_empty());
    assert_eq!(rest, vec!["tma_retiring"]);
}

/// Models that tie and compute the same value for everything perf printed are
/// one answer; models that tie and differ are not, and the difference is given.
#[test]
fn ties_that_agree_and_ties_that_differ() {
    // perf 6.12's tables: the logs are perf 6.12's output.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let (s390, _) = log("tests/data/perf/std_s390_models_agree.txt");
    match infer_model(&s390, &defaults()) {
        Inference::Agreeing { model, others, compared, stands_for, .. } => {
            assert_eq!(model.path(), "s390/cf_z14");
            let others: Vec<String> = others.iter().map(|m| m.path()).collect();
            assert_eq!(others, ["s390/cf_z15", "s390/cf_z16"]);
            // z14 and z15 are in the oldest stored vintage, z16 from perf 6.1; perf's
            // mapfile.csv lists z14 before z15.
            assert_eq!((stands_for.since, stands_for.since_oldest_stored), ("5.10", true));
            let as_old: Vec<String> = stands_for.as_old.iter().map(|m| m.path()).collect();
            assert_eq!(as_old, ["s390/cf_z15"]);
            assert!(stands_for.mapfile_first && stands_for.hybrid.is_empty());
            let newer: Vec<(String, &str)> =
                stands_for.newer.iter().map(|(m, v)| (m.path(), *v)).collect();
            assert_eq!(newer, [("s390/cf_z16".to_string(), "6.1")]);
            // Four metrics in one block, three models.
            assert_eq!(compared, 12);
        }
        other => panic!("{}", matches!(other, Inference::Tied { .. })),
    }
    let (differ, _) = log("tests/data/perf/std_models_differ.txt");
    match infer_model(&differ, &defaults()) {
        Inference::Tied { models, differ: Some(d), .. } => {
            assert!(models.len() > 2);
            assert_eq!(d.metric, "tma_false_sharing");
            let icelake = d.values.iter().find(|(m, _)| m.path() == "x86/icelake").unwrap().1;
            // 32.5 * 2 GHz * 100 / 1e9 cycles, in %.
            assert!((icelake.unwrap() - 0.00065).abs() < 1e-12, "{icelake:?}");
        }
        other => panic!("{}", matches!(other, Inference::Agreeing { .. })),
    }
}

/// An input read from a row of another name with the same encoding.
#[test]
fn inputs_are_read_by_encoding_when_names_differ() {
    let (log, _) = log("tests/data/perf/std_older_event_names.txt");
    let tgl = model("x86/tigerlake");
    let mut evaluator = LogEvaluator::new(tgl, false, &defaults(), None);
    let root = tgl.metrics_named("tma_backend_bound")[0];
    let outcome = evaluator.evaluate(&log.blocks[0], root);
    assert_eq!(outcome.check, Some(true));
    let clears = outcome
        .inputs
        .iter()
        .find(|i| tgl.str(tgl.ids[i.slot as usize].text) == "INT_MISC.CLEARS_COUNT")
        .unwrap();
    assert!(matches!(clears.source, InputSource::Row { value, .. } if value == 1e8));
    let by = clears.by_encoding.as_ref().unwrap();
    assert_eq!(by.row, "cpu/INT_MISC.RECOVERY_CYCLES,cmask=1,edge/");
    assert_eq!(by.encoding, "event=0x0d,umask=0x01,cmask=1,edge=1");
}

/// perf 7.2's `lpm_miss_lat_loc` divides the CHAs' clockticks by `aggr_nr()`, the counters
/// perf summed, which `--per-socket` prints after the socket: 60 CHAs of a socket at 2.2 GHz
/// for a second, each miss 81 ns in the TOR (Little's law), read back as 81 ns from the
/// printed 60; the same rows without that column read one counter each.
#[test]
fn aggr_nr_is_the_counters_perf_printed_beside_the_row() {
    let text = "\
# Hand-written: perf 7.2, `perf stat -a --per-socket -M lpm_miss_lat_loc`.
S0       60    132,000,000,000      UNC_CHA_CLOCKTICKS
S0       60      1,069,200,000      UNC_CHA_TOR_OCCUPANCY.IA_MISS_DRD_LOCAL
S0       60          6,000,000      UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL

       1.000000000 seconds time elapsed
";
    let v72 = tmetric_catalog::vintage_for("7.2").unwrap();
    let spr = tmetric_catalog::model_in(v72, "x86/sapphirerapids").unwrap();
    let metric = spr.metrics_named("lpm_miss_lat_loc")[0];
    let value = |text: &str| {
        let log = tmetric_perfstat::parse(text, "per-socket.txt").unwrap();
        let mut evaluator = LogEvaluator::new(spr, false, &defaults(), None);
        let outcome = evaluator.evaluate(&log.blocks[0], metric);
        assert!(outcome.complete(), "{:?}", outcome.result);
        outcome.scaled(spr).unwrap()
    };
    let ns = value(text);
    assert!((ns - 81.0).abs() < 1e-9, "{ns}");
    let global = text.replace("S0       60 ", "");
    let ns = value(&global);
    assert!((ns - 81.0 / 60.0).abs() < 1e-9, "{ns}");
}

/// The global layout prints no counters column: perf's header says what it can (one counter
/// per task for a command; `-C`'s CPUs for per-CPU events) and otherwise the one counter per
/// row tmetric reads is recorded as assumed, so that the run says so.
#[test]
fn a_global_log_says_its_counters_from_its_header_or_records_them_as_assumed() {
    use tmetric_offline::perflog::LogCounters;

    let rows = "\
   132,000,000,000      UNC_CHA_CLOCKTICKS
     1,069,200,000      UNC_CHA_TOR_OCCUPANCY.IA_MISS_DRD_LOCAL
         6,000,000      UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL

       1.000000000 seconds time elapsed
";
    let parsed = |header: &str| {
        let text = format!("\n Performance counter stats for '{header}':\n\n{rows}");
        tmetric_perfstat::parse(&text, "global.txt").unwrap()
    };
    assert_eq!(LogCounters::of(&parsed("sleep 1")), LogCounters::PerTask);
    assert_eq!(LogCounters::of(&parsed("process id '42'")), LogCounters::PerTask);
    assert_eq!(LogCounters::of(&parsed("CPU(s) 0-3,8")), LogCounters::Cpus(5));
    assert!(matches!(LogCounters::of(&parsed("system wide")), LogCounters::Unsaid(_)));
    let no_header = tmetric_perfstat::parse(rows, "no-header.txt").unwrap();
    assert!(matches!(LogCounters::of(&no_header), LogCounters::Unsaid(_)));

    let v72 = tmetric_catalog::vintage_for("7.2").unwrap();
    let spr = tmetric_catalog::model_in(v72, "x86/sapphirerapids").unwrap();
    let metric = spr.metrics_named("lpm_miss_lat_loc")[0];
    let inserts = spr
        .ids
        .iter()
        .position(|id| spr.str(id.text) == "UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL")
        .unwrap() as u16;
    for (header, assumed) in [("system wide", true), ("CPU(s) 0-3", true), ("sleep 1", false)] {
        let log = parsed(header);
        let mut evaluator = LogEvaluator::new(spr, false, &defaults(), None);
        evaluator.set_counters(LogCounters::of(&log));
        let outcome = evaluator.evaluate(&log.blocks[0], metric);
        // One counter per row either way: 81 ns over the 60 CHAs' clockticks taken for one's.
        let ns = outcome.scaled(spr).unwrap();
        assert!((ns - 81.0 / 60.0).abs() < 1e-9, "{header}: {ns}");
        let said: Vec<(u16, f64)> = evaluator.assumed_aggr_nrs().collect();
        assert_eq!(said.contains(&(inserts, 1.0)), assumed, "{header}: {said:?}");
    }
}
