//! The Meteor Lake blocks of perf's TPEBS patch series: printed as perf printed them, their values from the rows and
//! the vendor formulas, and a retire latency without a row.

use std::path::PathBuf;

use crate::support::{ok, stderr, stdout};

use super::{assert_close, count, fixture, json, one, perf_printed, read, text_value};

/// The three Meteor Lake blocks of perf's TPEBS patch series: tmetric prints what perf printed, to perf's
/// precision, with the model inferred from the log or given.
#[test]
fn seed_004_blocks_print_as_perf() {
    let blocks = [
        ("seed004/mtl_tma_dtlb_store.txt", "tma_dtlb_store", "0.6"),
        ("seed004/mtl_tma_split_loads.txt", "tma_split_loads", "1.6"),
        ("seed004/mtl_tma_contested_accesses.txt", "tma_contested_accesses", "0.0"),
    ];
    for (file, metric, expected) in blocks {
        let log = read(file);
        assert_eq!(perf_printed(&log, metric), expected, "{file}");
        let path = fixture(file);
        let inferred = ok(&["eval", "--from-perf", &path, "--color", "never"]);
        let out = stdout(&inferred);
        let header = out.lines().next().unwrap();
        assert!(header.contains("x86/meteorlake") && header.contains("inferred"), "{header}");
        assert_eq!(text_value(&out, metric), expected, "{file}:\n{out}");
        assert!(!out.contains("perf printed"), "{out}");

        let given = ok(&["eval", "--from-perf", &path, "--model", "meteorlake", "--json"]);
        let (header, rows) = json(&given);
        assert_eq!(header["model"], "x86/meteorlake");
        let row = one(&rows, metric);
        assert_eq!(row["pmu"], "cpu_core");
        assert_eq!(row["perf"]["printed"], expected);
        assert_eq!(row["perf"]["agrees"], true);
        let value = row["value"].as_f64().unwrap();
        assert_eq!(format!("{value:.1}"), expected, "{file}");
        assert!(stderr(&given).contains("all agree"), "{}", stderr(&given));
    }
}

/// The values behind those blocks' numbers, from the counts and mtl-metrics.json:
/// tma_split_loads = 100 * SPLIT_LOADS * min(SPLIT_LOADS:R, L1D_PEND_MISS.PENDING /
///                   MEM_LOAD_COMPLETED.L1_MISS_ANY) / CPU_CLK_UNHALTED.THREAD, with the R row (3).
/// tma_dtlb_store = 100 * (STLB_HIT_STORES * min(STLB_HIT_STORES:R, 7) / THREAD
///                  + DTLB_STORE_MISSES.WALK_ACTIVE / core_clks), core_clks being
///                  CPU_CLK_UNHALTED.DISTRIBUTED with SMT on (the default) and THREAD with --smt off.
#[test]
fn seed_004_values_come_from_the_rows() {
    let log = read("seed004/mtl_tma_split_loads.txt");
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let latency = count(&log, "cpu_core/MEM_INST_RETIRED.SPLIT_LOADS/R");
    assert_eq!(latency, 3.0);
    let want = 100.0
        * c("MEM_INST_RETIRED.SPLIT_LOADS")
        * latency.min(c("L1D_PEND_MISS.PENDING") / c("MEM_LOAD_COMPLETED.L1_MISS_ANY"))
        / c("CPU_CLK_UNHALTED.THREAD");
    let path = fixture("seed004/mtl_tma_split_loads.txt");
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    let row = one(&rows, "tma_split_loads");
    assert_close(&row["value"], want);
    assert_eq!(row["latency_zero"], serde_json::json!([]));
    assert_eq!(row["running_pct"], 50.0);

    let log = read("seed004/mtl_tma_dtlb_store.txt");
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let (hits, thread, walk) = (
        c("MEM_INST_RETIRED.STLB_HIT_STORES"),
        c("CPU_CLK_UNHALTED.THREAD"),
        c("DTLB_STORE_MISSES.WALK_ACTIVE"),
    );
    // The RFC-era retire-latency row: `0.00 MEM_INST_RETIRED.STLB_HIT_STORES:p 0 0`.
    let latency = 0.0_f64;
    let path = fixture("seed004/mtl_tma_dtlb_store.txt");
    for (flags, core_clks, literal) in [
        (&[][..], c("CPU_CLK_UNHALTED.DISTRIBUTED"), "default"),
        (&["--smt", "off"][..], thread, "flag"),
    ] {
        let mut args = vec!["eval", "--from-perf", &path, "--json"];
        args.extend(flags);
        let (header, rows) = json(&ok(&args));
        assert_eq!(header["literals"][0]["literal"], "smt_on");
        assert_eq!(header["literals"][0]["source"], literal);
        let want = 100.0 * (hits * latency.min(7.0) / thread + walk / core_clks);
        assert_close(&one(&rows, "tma_dtlb_store")["value"], want);
    }
}

/// A retire latency without a row: 0 where perf printed the metric (perf without
/// --record-tpebs), a named missing input otherwise.
#[test]
fn missing_retire_latency_rule() {
    let log = read("seed004/mtl_tma_split_loads.txt");
    let without_row: String =
        log.lines().filter(|l| !l.ends_with("/R")).map(|l| format!("{l}\n")).collect();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let printed = dir.join("from_perf_no_latency.txt");
    std::fs::write(&printed, &without_row).unwrap();
    let printed = printed.display().to_string();
    let output = ok(&["eval", "--from-perf", &printed, "--model", "meteorlake", "--json"]);
    let (_, rows) = json(&output);
    let row = one(&rows, "tma_split_loads");
    let id = "cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@R";
    assert_eq!(row["latency_zero"], serde_json::json!([id]));
    assert_eq!(row["value"], 0.0);
    // perf printed 1.6 with a latency of 3: the disagreement is shown, not hidden.
    assert_eq!(row["perf"]["agrees"], false);
    let text = stdout(&ok(&["eval", "--from-perf", &printed, "--model", "meteorlake"]));
    assert!(text.contains("(perf printed 1.6)"), "{text}");

    let unprinted: String = without_row.replace("# 1.6 % tma_split_loads", "");
    let path = dir.join("from_perf_no_latency_unprinted.txt");
    std::fs::write(&path, unprinted).unwrap();
    let path = path.display().to_string();
    let args = ["eval", "--from-perf", &path, "--model", "meteorlake", "-M", "tma_split_loads"];
    let text = stdout(&ok(&args));
    let line = text.lines().find(|l| l.contains("tma_split_loads")).unwrap();
    assert!(line.contains(&format!("missing: {id}")) && line.contains("--record-tpebs"), "{line}");
    // The latency reads as NaN, and perf's min() returns its second argument when the first is
    // NaN (util/expr.y divides as C does): 100 * SPLIT_LOADS * (L1D_PEND_MISS.PENDING / L1_MISS_ANY) / THREAD.
    let c = |event: &str| count(&log, &format!("cpu_core/{event}/"));
    let want = 100.0 * c("MEM_INST_RETIRED.SPLIT_LOADS") * c("L1D_PEND_MISS.PENDING")
        / c("MEM_LOAD_COMPLETED.L1_MISS_ANY")
        / c("CPU_CLK_UNHALTED.THREAD");
    assert_eq!(line.split_whitespace().next(), Some(format!("{want:.1}").as_str()), "{line}");
}
