//! Hand-written logs (tests/data/hand) for what the capture machine cannot print: hybrid
//! `cpu_core`/`cpu_atom` rows, `-M` metrics whose groups repeat events, multiplexing,
//! continuation lines, `Default` metric-group lines, uncore instances and scaled units.
//!
//! Each printed metric value in these files was chosen to be the metric's formula over the
//! counts of the group it is printed against; the tests recompute them from lookups.
use crate::common::{assert_prints_as, found, load, row, value};
use tmetric_perfstat::{Aggregation, Block, Lookup, PrintedCount};

fn printed<'a>(block: &'a Block, metric: &str, pmu: Option<&str>) -> &'a str {
    &block.printed_metric(metric, pmu).unwrap_or_else(|| panic!("`{metric}` not printed")).1.text
}

/// std_metric_groups.txt and csv_metric_groups.txt hold the same run.
fn check_metric_groups(name: &str) {
    let log = load(name);
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(log.blocks.len(), 1);
    let block = &log.blocks[0];
    let v = |id: &str, metric: &str| value(block, id, Some(metric));
    let share = |part: &str, metric: &str| {
        let all: f64 =
            ["topdown-retiring", "topdown-bad-spec", "topdown-fe-bound", "topdown-be-bound"]
                .iter()
                .map(|id| v(id, metric))
                .sum();
        100.0 * v(part, metric) / all
    };
    for (metric, part) in [
        ("tma_retiring", "topdown-retiring"),
        ("tma_bad_speculation", "topdown-bad-spec"),
        ("tma_frontend_bound", "topdown-fe-bound"),
    ] {
        assert_prints_as(share(part, metric), printed(block, metric, None), 0.0, metric);
    }
    let ipc = v("INST_RETIRED.ANY", "tma_info_thread_ipc")
        / v("CPU_CLK_UNHALTED.THREAD", "tma_info_thread_ipc");
    assert_prints_as(ipc, printed(block, "tma_info_thread_ipc", None), 0.0, "ipc");

    // The slots row of tma_frontend_bound's group, printed as `slots`, starts group 1.
    let slots = found(block.lookup("TOPDOWN.SLOTS", Some("tma_frontend_bound")));
    assert_eq!((slots.value, slots.group, slots.in_metric_group), (990e6, Some(1), true));
    assert_eq!(slots.event, "slots");
    assert_eq!(slots.running_pct, Some(51.0));
    let first = found(block.lookup("cpu@TOPDOWN.SLOTS@", None));
    assert_eq!((first.value, first.group, first.in_metric_group), (1e9, Some(0), false));
    assert_eq!(v("CPU_CLK_UNHALTED.THREAD", "tma_frontend_bound"), 1.3e6);
    assert_eq!(v("CPU_CLK_UNHALTED.THREAD", "tma_info_thread_ipc"), 1.25e6);
    // INST_RETIRED.ANY is not in tma_frontend_bound's group: the first occurrence, flagged.
    let inst = found(block.lookup("INST_RETIRED.ANY", Some("tma_frontend_bound")));
    assert_eq!((inst.value, inst.group, inst.in_metric_group), (2e6, Some(0), false));
    assert_eq!(
        block.lookup("INST_RETIRED.ANY", Some("no_such_metric")),
        block.lookup("INST_RETIRED.ANY", None)
    );

    assert!(matches!(block.lookup("msr@smi@", None), Lookup::NotSupported { .. }));
    let duration = found(block.lookup("duration_time", None));
    assert_eq!(duration.value, 1_002_145_335.0 * 1e-9);
}

#[test]
fn metric_groups_text() {
    check_metric_groups("hand/std_metric_groups.txt");
    let log = load("hand/std_metric_groups.txt");
    let block = &log.blocks[0];
    // The continuation line's metric belongs to the row above it.
    let names: Vec<&str> =
        row(block, "TOPDOWN.SLOTS").metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["tma_retiring", "tma_bad_speculation"]);
    assert_eq!(row(block, "TOPDOWN.SLOTS").metrics[1].line, 9);
    let groups: Vec<usize> = block.rows.iter().map(|r| r.group).collect();
    assert_eq!(groups, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
}

#[test]
fn metric_groups_csv() {
    check_metric_groups("hand/csv_metric_groups.txt");
    let log = load("hand/csv_metric_groups.txt");
    let block = &log.blocks[0];
    // `-x,` splits `cpu/UOPS_EXECUTED.THREAD,cmask=1/` at its comma; the importer rejoins it.
    assert_eq!(value(block, r"cpu@UOPS_EXECUTED.THREAD\,cmask\=1@", None), 1_234_567.0);
    assert_eq!(row(block, "cpu/UOPS_EXECUTED.THREAD,cmask=1/").running_pct, Some(49.0));
    let idq = block.lookup("cpu@IDQ.MS_UOPS@", None);
    assert!(matches!(idq, Lookup::NotCounted { line: 18, .. }), "{idq:?}");
}

#[test]
fn hybrid_metrics_are_looked_up_per_core_pmu() {
    let log = load("hand/std_hybrid.txt");
    assert!(log.is_hybrid());
    assert_eq!(log.core_pmus(), ["cpu_atom", "cpu_core"]);
    let block = &log.blocks[0];

    let core = |id: &str| value(block, id, Some("tma_retiring"));
    let core_retiring = 100.0 * core(r"cpu_core@topdown\-retiring@")
        / [
            r"cpu_core@topdown\-retiring@",
            r"cpu_core@topdown\-bad\-spec@",
            r"cpu_core@topdown\-fe\-bound@",
            r"cpu_core@topdown\-be\-bound@",
        ]
        .iter()
        .map(|id| core(id))
        .sum::<f64>();
    assert_prints_as(
        core_retiring,
        printed(block, "tma_retiring", Some("cpu_core")),
        0.0,
        "cpu_core tma_retiring",
    );
    let atom =
        |id: &str| found(block.lookup_on_pmu(id, Some("tma_retiring"), Some("cpu_atom"))).value;
    let atom_retiring = 100.0 * atom("cpu_atom@TOPDOWN_RETIRING.ALL@")
        / (5.0 * atom("cpu_atom@CPU_CLK_UNHALTED.CORE@"));
    assert_prints_as(
        atom_retiring,
        printed(block, "tma_retiring", Some("cpu_atom")),
        0.0,
        "cpu_atom tma_retiring",
    );

    // An id without a PMU is ambiguous on hybrid until the PMU is given.
    let Lookup::Ambiguous { lines, events } = block.lookup("INST_RETIRED.ANY", None) else {
        panic!("not ambiguous")
    };
    assert_eq!((lines.as_slice(), events.len()), ([14, 15].as_slice(), 2));
    assert_eq!(
        found(block.lookup_on_pmu("INST_RETIRED.ANY", None, Some("cpu_core"))).value,
        345_678.0
    );
    let atom_inst = block.lookup_on_pmu("INST_RETIRED.ANY", None, Some("cpu_atom"));
    assert!(matches!(atom_inst, Lookup::NotCounted { line: 15, .. }), "{atom_inst:?}");
    assert_eq!(row(block, "cpu_atom/INST_RETIRED.ANY/").running_pct, Some(0.0));
}

#[test]
fn interval_per_core_metric_lines() {
    let log = load("hand/std_interval_per_core_metrics.txt");
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    let labels: Vec<String> = log.blocks.iter().map(Block::label).collect();
    assert_eq!(
        labels,
        [
            "interval 1.001234567 S0-D0-C0",
            "interval 1.001234567 S0-D0-C1",
            "interval 2.002469134 S0-D0-C0",
            "interval 2.002469134 S0-D0-C1"
        ]
    );
    for block in &log.blocks {
        assert_eq!(
            block.aggr.as_ref().map(|a| (a.kind, a.cpus)),
            Some((Aggregation::Core, Some(2)))
        );
        let slots = value(block, "TOPDOWN.SLOTS", None);
        for (metric, id) in
            [("tma_retiring", "topdown-retiring"), ("tma_bad_speculation", "topdown-bad-spec")]
        {
            let share = 100.0 * value(block, id, Some(metric)) / slots;
            assert_prints_as(
                share,
                printed(block, metric, None),
                0.0,
                &format!("{} {metric}", block.label()),
            );
        }
        assert_eq!(block.rows.len(), 3);
        assert_eq!(row(block, "TOPDOWN.SLOTS").metrics.len(), 2);
    }
    // The second interval is 1.001234567 s long.
    assert!((value(&log.blocks[3], "duration_time", None) - 1.001234567).abs() < 1e-12);
}

#[test]
fn default_metric_group_lines_are_kept_without_a_row() {
    let log = load("hand/std_default_metricgroups.txt");
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    let block = &log.blocks[0];
    let loose: Vec<(&str, &str)> =
        block.loose_metrics.iter().map(|m| (m.unit.as_str(), m.name.as_str())).collect();
    assert_eq!(
        loose,
        [
            ("%", "tma_backend_bound"),
            ("%", "tma_bad_speculation"),
            ("%", "tma_frontend_bound"),
            ("%", "tma_retiring")
        ]
    );
    assert_eq!(block.loose_metrics[0].header.as_deref(), Some("TopdownL1 (cpu_core)"));
    // Level 1 of the topdown tree adds up to 100%.
    let total: f64 = block.loose_metrics.iter().filter_map(|m| m.value).sum();
    assert!((total - 100.0).abs() < 0.2, "{total}");
    assert_eq!(block.loose_metric("tma_retiring").and_then(|m| m.value), Some(24.3));
    assert!(log.printed_metric_names().contains("tma_frontend_bound"));
    assert!(matches!(block.lookup("cycles", None), Lookup::Ambiguous { .. }));
    assert_eq!(found(block.lookup_on_pmu("cycles", None, Some("cpu_core"))).value, 577_962.0);
    assert_eq!(value(block, "user_time", None), 0.000975);
    assert_eq!(value(block, "task-clock", None), 0.56e6);
}

#[test]
fn csv_hybrid_per_cpu_intervals() {
    let log = load("hand/csv_hybrid_interval_per_cpu.txt");
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    let labels: Vec<String> = log.blocks.iter().map(Block::label).collect();
    assert_eq!(
        labels,
        [
            "interval 1.001234567 CPU0",
            "interval 1.001234567 CPU8",
            "interval 2.002469134 CPU0",
            "interval 2.002469134 CPU8"
        ]
    );
    let mut checked = 0;
    for block in &log.blocks {
        for pmu in ["cpu_core", "cpu_atom"] {
            let inst = block.lookup_on_pmu("instructions", None, Some(pmu));
            let cycles = block.lookup_on_pmu("cycles", None, Some(pmu));
            match (inst, cycles) {
                (Lookup::Found(inst), Lookup::Found(cycles)) => {
                    let r = block.rows.iter().find(|r| r.line == inst.lines[0]).unwrap();
                    assert_prints_as(
                        inst.value / cycles.value,
                        &r.metric("insn per cycle").unwrap().text,
                        0.0,
                        pmu,
                    );
                    checked += 1;
                }
                (Lookup::NotCounted { .. }, Lookup::NotCounted { .. }) => {}
                other => panic!("{}: {pmu}: {other:?}", block.label()),
            }
        }
        assert!(matches!(block.lookup("cycles", None), Lookup::Ambiguous { .. }));
    }
    assert_eq!(checked, 4);
}

#[test]
fn json_hybrid_uncore_and_units() {
    let log = load("hand/json_hybrid_interval_per_core.txt");
    assert!(log.warnings.is_empty(), "{:?}", log.warnings);
    assert_eq!(log.blocks.len(), 3);
    let (core, atom, second) = (&log.blocks[0], &log.blocks[1], &log.blocks[2]);
    assert_eq!(atom.aggr.as_ref().map(|a| (a.id.as_str(), a.cpus)), Some(("S0-D1-C8", Some(1))));

    let slots = value(core, "cpu_core@TOPDOWN.SLOTS@", Some("tma_retiring"));
    let retiring =
        100.0 * value(core, r"cpu_core@topdown\-retiring@", Some("tma_retiring")) / slots;
    assert_prints_as(
        retiring,
        printed(core, "tma_retiring", Some("cpu_core")),
        0.0,
        "tma_retiring",
    );
    let bad =
        100.0 * value(core, r"cpu_core@topdown\-bad\-spec@", Some("tma_bad_speculation")) / slots;
    assert_prints_as(bad, printed(core, "tma_bad_speculation", None), 0.0, "tma_bad_speculation");
    let atom_retiring = 100.0 * value(atom, "cpu_atom@TOPDOWN_RETIRING.ALL@", None)
        / (5.0 * value(atom, "cpu_atom@CPU_CLK_UNHALTED.CORE@", None));
    assert_prints_as(
        atom_retiring,
        printed(atom, "tma_retiring", Some("cpu_atom")),
        0.0,
        "atom tma_retiring",
    );

    // Uncore instances printed separately are summed, as perf merges them by default.
    for id in ["UNC_M_CAS_COUNT.RD", "uncore_imc@UNC_M_CAS_COUNT.RD@", "imc@UNC_M_CAS_COUNT.RD@"] {
        let cas = found(core.lookup(id, None));
        assert_eq!((cas.value, cas.lines.as_slice()), (1234.0, [10, 11].as_slice()), "{id}");
    }
    assert_eq!(value(core, "uncore_imc_1@UNC_M_CAS_COUNT.RD@", None), 234.0);
    // A unit whose scale only the event table knows is reported, not silently used.
    let mib = found(core.lookup("uncore_imc@cas_count_write@", None));
    assert_eq!((mib.value, mib.unscaled_unit.as_deref()), (12.5, Some("MiB")));
    assert!(matches!(
        core.lookup("power@energy\\-pkg@", None),
        Lookup::NotSupported { line: 12, .. }
    ));

    assert!(matches!(second.lookup("cpu_core@TOPDOWN.SLOTS@", None), Lookup::NotCounted { .. }));
    let nan = &row(second, "cpu_core/topdown-retiring/").metrics[0];
    assert!(nan.value.is_some_and(f64::is_nan));
    assert_eq!(row(second, "cpu_core/topdown-retiring/").value, PrintedCount::Value(3e8));
}

#[test]
fn other_aggregation_prefixes() {
    let text = "\n Performance counter stats for 'system wide':\n\n\
        S0-D0-CLS1           4              1,234      cycles\n\
        S0-D0-L3-ID0         8              5,678      cycles\n\
        S1-C3                2                 42      cycles\n\
          Web Content-4242                  9,999      cycles\n";
    let log = tmetric_perfstat::parse(text, "inline").unwrap();
    let got: Vec<(Aggregation, &str, Option<u32>, f64)> = log
        .blocks
        .iter()
        .map(|b| {
            let a = b.aggr.as_ref().unwrap();
            (a.kind, a.id.as_str(), a.cpus, value(b, "cycles", None))
        })
        .collect();
    assert_eq!(
        got,
        [
            (Aggregation::Cluster, "S0-D0-CLS1", Some(4), 1234.0),
            (Aggregation::Cache, "S0-D0-L3-ID0", Some(8), 5678.0),
            (Aggregation::Core, "S1-C3", Some(2), 42.0),
            (Aggregation::Thread, "Web Content-4242", None, 9999.0),
        ]
    );
}

/// Two multiplexed groups that both count CPU_CLK_UNHALTED.THREAD, the second
/// group led by an event not seen before. The run share (40% vs 60%) tells the groups apart, so
/// tma_ports_utilized_2 = EXE_ACTIVITY.2_PORTS_UTIL / CPU_CLK_UNHALTED.THREAD uses 25,000,000.
#[test]
fn multiplexed_groups_are_split_by_run_share() {
    let text = "\
 Performance counter stats for './bench':

         2,000,000      EXE_ACTIVITY.1_PORTS_UTIL        #     10.0 %  tma_ports_utilized_1  (40.00%)
        20,000,000      CPU_CLK_UNHALTED.THREAD                                              (40.00%)
         5,000,000      CYCLE_ACTIVITY.STALLS_TOTAL                                          (40.00%)
         3,000,000      EXE_ACTIVITY.2_PORTS_UTIL        #     12.0 %  tma_ports_utilized_2  (60.00%)
        25,000,000      CPU_CLK_UNHALTED.THREAD                                              (60.00%)

       0.500000000 seconds time elapsed
";
    let log = tmetric_perfstat::parse(text, "issue12.txt").unwrap();
    let block = &log.blocks[0];
    let groups: Vec<usize> = block.rows.iter().map(|r| r.group).collect();
    assert_eq!(groups, [0, 0, 0, 1, 1]);
    let clks = found(block.lookup("CPU_CLK_UNHALTED.THREAD", Some("tma_ports_utilized_2")));
    assert_eq!((clks.value, clks.group, clks.in_metric_group), (25e6, Some(1), true));
    assert_eq!(clks.lines, [7]);
    let v = |id: &str, m: &str| value(block, id, Some(m));
    let two = 100.0 * v("EXE_ACTIVITY.2_PORTS_UTIL", "tma_ports_utilized_2")
        / v("CPU_CLK_UNHALTED.THREAD", "tma_ports_utilized_2");
    assert_eq!(two, 12.0);
    assert_prints_as(two, printed(block, "tma_ports_utilized_2", None), 0.0, "ports 2");
    let one = 100.0 * v("EXE_ACTIVITY.1_PORTS_UTIL", "tma_ports_utilized_1")
        / v("CPU_CLK_UNHALTED.THREAD", "tma_ports_utilized_1");
    assert_eq!(one, 10.0);
}

/// The run share only moves a group boundary that a repeated event forces: rows without a share
/// count as 100%, a broken weak group (different shares, no repeat) stays one group, and a
/// `<not counted>` row stops the move.
#[test]
fn run_shares_only_move_a_forced_boundary() {
    let groups = |text: &str| -> Vec<usize> {
        let log = tmetric_perfstat::parse(text, "shares.txt").unwrap();
        log.blocks[0].rows.iter().map(|r| r.group).collect()
    };
    let broken_weak_group = "\
         1,000      INST_RETIRED.ANY                 (40.00%)
         2,000      CPU_CLK_UNHALTED.THREAD          (60.00%)
         3,000      EXE_ACTIVITY.1_PORTS_UTIL        (55.00%)
";
    assert_eq!(groups(broken_weak_group), [0, 0, 0]);
    let unmultiplexed = "\
         1,000      INST_RETIRED.ANY
         2,000      CPU_CLK_UNHALTED.THREAD
         3,000      EXE_ACTIVITY.1_PORTS_UTIL
         4,000      CPU_CLK_UNHALTED.THREAD
";
    assert_eq!(groups(unmultiplexed), [0, 0, 0, 1]);
    let not_counted = "\
         1,000      INST_RETIRED.ANY                 (40.00%)
         2,000      CPU_CLK_UNHALTED.THREAD          (40.00%)
   <not counted>      CYCLE_ACTIVITY.STALLS_TOTAL
         3,000      EXE_ACTIVITY.1_PORTS_UTIL        (60.00%)
         4,000      CPU_CLK_UNHALTED.THREAD          (60.00%)
";
    assert_eq!(groups(not_counted), [0, 0, 0, 0, 1]);
    let unprinted_share = "\
         1,000      INST_RETIRED.ANY                 (40.00%)
         2,000      CPU_CLK_UNHALTED.THREAD          (40.00%)
         3,000      EXE_ACTIVITY.1_PORTS_UTIL
         4,000      CPU_CLK_UNHALTED.THREAD
";
    assert_eq!(groups(unprinted_share), [0, 0, 1, 1]);
}
