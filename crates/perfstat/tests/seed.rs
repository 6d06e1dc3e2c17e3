//! The three Meteor Lake `perf stat -M` blocks printed in perf's TPEBS patch series' review thread (tests/data/seed004).
//!
//! The counts must be exactly those printed, every identifier the metric's expression uses
//! (meteorlake `mtl-metrics.json` of Linux 6.12, quoted below) must find its row, and the
//! metric recomputed from those values must print as perf printed it.
use crate::common::{assert_prints_as, found, load, read};
use tmetric_perfstat::{Block, Lookup, PrintedCount, TimeSource};

/// Every counter row's count, re-read with nothing but `str::replace` and `f64::from_str`.
fn assert_counts_verbatim(name: &str) {
    let text = read(name);
    let log = load(name);
    let rows: Vec<_> = log.blocks.iter().flat_map(|b| &b.rows).collect();
    let expected: Vec<(usize, f64)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let first = line.split_whitespace().next()?;
            let count: f64 = first.replace(',', "").parse().ok()?;
            (!line.contains("seconds time elapsed")).then_some((i + 1, count))
        })
        .collect();
    let got: Vec<(usize, f64)> = rows
        .iter()
        .map(|r| match r.value {
            PrintedCount::Value(v) => (r.line, v),
            other => panic!("{name}:{}: {other:?}", r.line),
        })
        .collect();
    assert_eq!(got, expected, "{name}");
}

/// Looks `id` up for `metric` and checks it came from the row at `line`, in the metric's group.
#[track_caller]
fn at(block: &Block, id: &str, metric: &str, line: usize) -> f64 {
    let hit = found(block.lookup_on_pmu(id, Some(metric), Some("cpu_core")));
    assert_eq!(hit.lines, [line], "{id}");
    assert!(hit.in_metric_group, "{id}");
    hit.value
}

#[test]
fn tma_dtlb_store() {
    let name = "seed004/mtl_tma_dtlb_store.txt";
    assert_counts_verbatim(name);
    let log = load(name);
    assert_eq!(log.command(), Some("system wide"));
    assert_eq!(log.elapsed_seconds(), Some(1.003105924));
    // Only the shell command line is not perf output; `[ perf record: ... ]` is perf's.
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(log.skipped.lines(), 1);
    assert_eq!(log.skipped.before.ranges, [(1, 1)]);
    let block = &log.blocks[0];
    let m = "tma_dtlb_store";
    // tma_dtlb_store = cpu_core@MEM_INST_RETIRED.STLB_HIT_STORES@ * min(cpu_core@MEM_INST_RETIRED.STLB_HIT_STORES@R, 7)
    //                  / tma_info_thread_clks + tma_store_stlb_miss
    // tma_info_thread_clks = cpu_core@CPU_CLK_UNHALTED.THREAD@
    // tma_store_stlb_miss = cpu_core@DTLB_STORE_MISSES.WALK_ACTIVE@ / tma_info_core_core_clks
    // tma_info_core_core_clks = cpu_core@CPU_CLK_UNHALTED.DISTRIBUTED@ if #SMT_on else tma_info_thread_clks
    let hits = at(block, "cpu_core@MEM_INST_RETIRED.STLB_HIT_STORES@", m, 12);
    // The RFC series printed the retire latency as `0.00 MEM_INST_RETIRED.STLB_HIT_STORES:p 0 0`.
    let latency = at(block, "cpu_core@MEM_INST_RETIRED.STLB_HIT_STORES@R", m, 16);
    let thread = at(block, "cpu_core@CPU_CLK_UNHALTED.THREAD@", m, 14);
    let distributed = at(block, "cpu_core@CPU_CLK_UNHALTED.DISTRIBUTED@", m, 13);
    let walk = at(block, "cpu_core@DTLB_STORE_MISSES.WALK_ACTIVE@", m, 15);
    assert_eq!(
        (hits, latency, thread, distributed, walk),
        (4582.0, 0.0, 30_556_790.0, 30_183_104.0, 168_486.0)
    );
    let printed = &block.printed_metric(m, Some("cpu_core")).unwrap().1.text;
    assert_eq!(printed, "0.6");
    for core_clks in [distributed, thread] {
        let value = 100.0 * (hits * latency.min(7.0) / thread + walk / core_clks);
        assert_prints_as(value, printed, 0.0, m);
    }
}

#[test]
fn tma_split_loads() {
    let name = "seed004/mtl_tma_split_loads.txt";
    assert_counts_verbatim(name);
    let log = load(name);
    assert_eq!(log.command(), Some("CPU(s) 1-4"));
    let block = &log.blocks[0];
    let m = "tma_split_loads";
    // tma_split_loads = cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@ * min(cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@R,
    //                   tma_info_memory_load_miss_real_latency) / tma_info_thread_clks
    // tma_info_memory_load_miss_real_latency = cpu_core@L1D_PEND_MISS.PENDING@ / cpu_core@MEM_LOAD_COMPLETED.L1_MISS_ANY@
    let loads = at(block, "cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@", m, 16);
    let latency = at(block, "cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@R", m, 17);
    let pending = at(block, "cpu_core@L1D_PEND_MISS.PENDING@", m, 11);
    let misses = at(block, "cpu_core@MEM_LOAD_COMPLETED.L1_MISS_ANY@", m, 15);
    let thread = at(block, "cpu_core@CPU_CLK_UNHALTED.THREAD@", m, 14);
    assert_eq!(latency, 3.0);
    assert_eq!(
        found(block.lookup("cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@", None)).running_pct,
        Some(50.0)
    );
    let value = 100.0 * loads * latency.min(pending / misses) / thread;
    let printed = &block.printed_metric(m, None).unwrap().1.text;
    assert_eq!(printed, "1.6");
    assert_prints_as(value, printed, 0.0, m);
}

#[test]
fn tma_contested_accesses() {
    let name = "seed004/mtl_tma_contested_accesses.txt";
    assert_counts_verbatim(name);
    let log = load(name);
    assert_eq!(log.command(), Some("CPU(s) 1"));
    let block = &log.blocks[0];
    let m = "tma_contested_accesses";
    // tma_contested_accesses = (cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS@ * min(cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS@R, 24 * tma_info_system_core_frequency)
    //   + cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD@ * min(cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD@R, 25 * tma_info_system_core_frequency)
    //   * (cpu_core@OCR.DEMAND_DATA_RD.L3_HIT.SNOOP_HITM@ / (cpu_core@OCR.DEMAND_DATA_RD.L3_HIT.SNOOP_HITM@ + cpu_core@OCR.DEMAND_DATA_RD.L3_HIT.SNOOP_HIT_WITH_FWD@)))
    //   * (1 + cpu_core@MEM_LOAD_RETIRED.FB_HIT@ / cpu_core@MEM_LOAD_RETIRED.L1_MISS@ / 2) / tma_info_thread_clks
    // tma_info_system_core_frequency = tma_info_system_turbo_utilization * TSC / 1e9 / duration_time
    // tma_info_system_turbo_utilization = tma_info_thread_clks / cpu_core@CPU_CLK_UNHALTED.REF_TSC@
    let miss = at(block, "cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS@", m, 15);
    let miss_lat = at(block, "cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS@R", m, 21);
    let fwd = at(block, "cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD@", m, 19);
    let fwd_lat = at(block, "cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD@R", m, 20);
    let hitm = at(block, "cpu_core@OCR.DEMAND_DATA_RD.L3_HIT.SNOOP_HITM@", m, 9);
    let hit_fwd = at(block, "cpu_core@OCR.DEMAND_DATA_RD.L3_HIT.SNOOP_HIT_WITH_FWD@", m, 13);
    let fb_hit = at(block, "cpu_core@MEM_LOAD_RETIRED.FB_HIT@", m, 16);
    let l1_miss = at(block, "cpu_core@MEM_LOAD_RETIRED.L1_MISS@", m, 12);
    let thread = at(block, "cpu_core@CPU_CLK_UNHALTED.THREAD@", m, 14);
    let ref_tsc = at(block, "cpu_core@CPU_CLK_UNHALTED.REF_TSC@", m, 18);
    let tsc = at(block, "TSC", m, 17);
    let duration = found(block.lookup_on_pmu("duration_time", Some(m), Some("cpu_core")));
    // duration_time comes from its own row (ns), not from the elapsed footer.
    assert_eq!((duration.value, duration.time), (1.006816667, Some(TimeSource::Row { line: 22 })));
    assert_eq!((miss_lat, fwd_lat), (0.0, 0.0));

    let frequency = thread / ref_tsc * tsc / 1e9 / duration.value;
    assert!((1.0..1.3).contains(&frequency), "core frequency {frequency} GHz");
    let value = (miss * miss_lat.min(24.0 * frequency)
        + fwd * fwd_lat.min(25.0 * frequency) * (hitm / (hitm + hit_fwd)))
        * (1.0 + fb_hit / l1_miss / 2.0)
        / thread
        * 100.0;
    let printed = &block.printed_metric(m, Some("cpu_core")).unwrap().1.text;
    assert_eq!(printed, "0.0");
    assert_prints_as(value, printed, 0.0, m);
    // Run shares differ per event, since this weak group was split by perf.
    assert_eq!(
        found(block.lookup("cpu_core@MEM_LOAD_RETIRED.L1_MISS@", None)).running_pct,
        Some(45.54)
    );
    assert_eq!(block.lookup("cpu_core@MEM_LOAD_RETIRED.L1_MISS@R", None), Lookup::Missing);
}
