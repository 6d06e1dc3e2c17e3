//! Integration tests of the vendor loader: the checked-in pmu-events tree, perf's documented
//! examples, a small fixture layout, and a cross-check against jevents.py's rules. Broken input
//! and its diagnostics are in `tolerant.rs`, trees of other vintages in `vintages.rs`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use tmetric_pmu_events::{
    AggrMode, Constraint, CounterField, Event, Metric, ScaleUnit, Table, Tree, cpuid_matches,
    load_tree, unit_to_pmu,
};

fn arch_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pmu-events/arch")
}

/// The tree, loaded once for all tests of this binary.
fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let pmu_events = arch_root().join("..");
        tmetric_pmu_events::load_vintage(&pmu_events, None, Path::new("unused"))
            .unwrap_or_else(|err| panic!("{err}"))
    })
}

fn table(arch: &str, name: &str) -> &'static Table {
    let arch = tree().arch(arch).unwrap_or_else(|| panic!("no arch {arch}"));
    arch.table(name).unwrap_or_else(|| panic!("no table {name}"))
}

fn event<'a>(table: &'a Table, name: &str) -> &'a Event {
    let mut found = table.events_named(name);
    let event = found.next().unwrap_or_else(|| panic!("no event {name} in {}", table.path));
    assert!(found.next().is_none(), "{name} is defined for several PMUs in {}", table.path);
    event
}

fn metric<'a>(table: &'a Table, name: &str) -> &'a Metric {
    table.metrics_named(name).next().unwrap_or_else(|| panic!("no metric {name} in {}", table.path))
}

/// Per architecture: mapfile rows, tables, sys tables, tables with metrics, events and metrics
/// (after `ArchStdEvent` expansion). Expected values were counted over pmu-events/arch of perf 6.12, and were
/// computed with a separate script over the 6.12 tree.
#[test]
fn counts_per_arch_match_the_spec() {
    let expected = [
        ("arm64", 31, 42, 9, 15, 2887, 452),
        ("nds32", 1, 1, 0, 0, 48, 0),
        ("powerpc", 5, 3, 0, 3, 2503, 951),
        ("riscv", 4, 4, 0, 0, 250, 0),
        ("s390", 7, 7, 0, 5, 690, 58),
        ("test", 0, 2, 1, 1, 16, 15),
        ("x86", 42, 42, 0, 30, 42510, 4617),
    ];
    let names: Vec<&str> = tree().arches.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, expected.iter().map(|e| e.0).collect::<Vec<_>>());
    for (name, rows, tables, sys, with_metrics, events, metrics) in expected {
        let arch = tree().arch(name).unwrap();
        let got = (
            arch.mapfile.len(),
            arch.tables.len(),
            arch.sys_tables().count(),
            arch.tables.iter().filter(|t| !t.metrics.is_empty()).count(),
            arch.tables.iter().map(|t| t.events.len()).sum::<usize>(),
            arch.tables.iter().map(|t| t.metrics.len()).sum::<usize>(),
        );
        assert_eq!(got, (rows, tables, sys, with_metrics, events, metrics), "{name}");
    }
    // Spec F: SPR 2664 events / 297 metrics, alderlake 484 / 309 (212 cpu_core, 81 cpu_atom, 16 default_core).
    let spr = table("x86", "sapphirerapids");
    assert_eq!((spr.events.len(), spr.metrics.len()), (2664, 297));
    let adl = table("x86", "alderlake");
    let per_pmu = |pmu: &str| adl.metrics.iter().filter(|m| m.pmu == pmu).count();
    assert_eq!(
        (adl.events.len(), per_pmu("cpu_core"), per_pmu("cpu_atom"), per_pmu("default_core")),
        (484, 212, 81, 16)
    );
    // Spec B1: 14 objects are both an event and a metric.
    let both = tree()
        .arches
        .iter()
        .flat_map(|a| &a.tables)
        .flat_map(|t| {
            t.metrics.iter().filter(|m| {
                t.events.iter().any(|e| e.file == m.file && e.index_in_file == m.index_in_file)
            })
        })
        .count();
    assert_eq!(both, 14);
    assert!(table("x86", "graniterapids").metrics.is_empty());
    assert!(!table("x86", "graniterapids").events.is_empty());
}

/// Raw object counts come from a plain text search over the files, independent of the loader.
#[test]
fn metric_expr_and_threshold_counts() {
    let mut raw_expr = 0;
    let mut raw_threshold = 0;
    let mut metric_group_entries = 0;
    for file in json_files(&arch_root()) {
        if file.starts_with(arch_root().join("common")) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        if file.ends_with("metricgroups.json") {
            metric_group_entries += text.matches("\":").count();
            continue;
        }
        raw_expr += text.matches("\"MetricExpr\"").count();
        raw_threshold += text.matches("\"MetricThreshold\"").count();
    }
    // The keys tools/perf/pmu-events/jevents.py reads.
    assert_eq!((raw_expr, raw_threshold), (6093, 2291));
    assert_eq!(metric_group_entries, 2583);

    // After expansion: a metric's expression is written either in its own object or in the
    // arch-standard entry it names (arm64 sbsa.json), which is not a table metric by itself.
    let metrics: Vec<&Metric> =
        tree().arches.iter().flat_map(|a| &a.tables).flat_map(|t| &t.metrics).collect();
    let std_text: String = tree()
        .arches
        .iter()
        .flat_map(|a| &a.std_files)
        .map(|f| fs::read_to_string(arch_root().join(f)).unwrap())
        .collect();
    let std_exprs = std_text.matches("\"MetricExpr\"").count();
    let std_thresholds = std_text.matches("\"MetricThreshold\"").count();
    let own_exprs = metrics.iter().filter(|m| m.expr_at.file == m.file).count();
    let own_thresholds = metrics
        .iter()
        .filter(|m| m.threshold_at.as_ref().is_some_and(|t| t.file == m.file))
        .count();
    assert_eq!(own_exprs + std_exprs, raw_expr);
    assert_eq!(own_thresholds + std_thresholds, raw_threshold);
    let with_threshold = metrics.iter().filter(|m| m.threshold.is_some()).count();
    let via_std = metrics.iter().filter(|m| m.arch_std.is_some()).count();
    eprintln!(
        "raw: {raw_expr} MetricExpr, {raw_threshold} MetricThreshold ({std_exprs}/{std_thresholds} in arch-standard files); \
         tables after expansion: {} metrics ({via_std} via ArchStdEvent), {with_threshold} with a threshold",
        metrics.len()
    );
    let metric_groups: usize =
        tree().arches.iter().flat_map(|a| &a.tables).map(|t| t.metric_groups.len()).sum();
    assert_eq!(metric_groups, 2583);
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(json_files(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        }
    }
    files
}

/// jevents.py's `JsonEvent` encoding, taken from perf's own documentation and tests.
#[test]
fn event_strings_from_the_spec() {
    let spr = table("x86", "sapphirerapids");
    let cases = [
        (
            "OCR.DEMAND_DATA_RD.L3_HIT.SNOOP_HITM",
            "event=0x2a,period=100003,umask=1,offcore_rsp=0x10003C0001",
        ),
        ("CYCLE_ACTIVITY.STALLS_TOTAL", "event=0xa3,cmask=4,period=1000003,umask=4"),
        ("TOPDOWN.SLOTS", "event=0,period=10000003,umask=4"),
        ("MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4", "event=0xcd,period=100003,umask=1,ldlat=0x4"),
        // Fixed strings replace whatever the JSON says (jevents.py `real_event`).
        ("INST_RETIRED.ANY", "event=0xc0,period=2000003"),
        ("CPU_CLK_UNHALTED.REF_TSC", "event=0,period=2000003,umask=3"),
    ];
    for (name, expected) in cases {
        assert_eq!(event(spr, name).encoding, expected, "{name}");
    }
    let segment = event(table("test", "test_soc/cpu"), "SEGMENT_REG_LOADS.ANY");
    assert_eq!(segment.encoding, "event=6,period=200000,umask=0x80");
    assert_eq!(
        segment.terms,
        [("event", "6"), ("period", "200000"), ("umask", "0x80")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    let stalls = event(spr, "CYCLE_ACTIVITY.STALLS_TOTAL");
    assert_eq!((stalls.pmu.as_str(), stalls.topic.as_str()), ("default_core", "pipeline"));
    assert_eq!(event(spr, "TOPDOWN.SLOTS").counters, CounterField::Fixed(Some(3)));
    assert_eq!(stalls.counters, CounterField::Generic(vec![0, 1, 2, 3, 4, 5, 6, 7]));
}

#[test]
fn event_fields() {
    let spr = table("x86", "sapphirerapids");
    let load_latency = event(spr, "MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4");
    assert_eq!(load_latency.pebs, 2);
    // Data_LA and PEBS "2" add notes to perf's description.
    assert_eq!(
        load_latency.perf_desc().unwrap(),
        "Counts randomly selected loads when the latency from first dispatch to completion is greater than 4 cycles  Supports address when precise (Must be precise)"
    );
    let cha = event(spr, "UNC_CHA_CLOCKTICKS");
    assert_eq!(cha.pmu, "uncore_cha");
    assert!(cha.per_pkg);
    assert_eq!(spr.counter_info("default_core").map(|c| (c.fixed, c.generic)), Some((4, 8)));
    assert_eq!(spr.counter_info("uncore_cha").map(|c| (c.fixed, c.generic)), Some((0, 4)));
    assert!(spr.metric_groups.contains_key("TopdownL1"));
}

#[test]
fn metric_fields() {
    let spr = table("x86", "sapphirerapids");
    let ipc = metric(spr, "tma_info_thread_ipc");
    assert_eq!(ipc.expr, "INST_RETIRED.ANY / tma_info_thread_clks");
    assert_eq!(ipc.groups, ["Ret", "Summary"]);
    assert_eq!(ipc.pmu, "default_core");
    let frontend = metric(spr, "tma_frontend_bound");
    assert_eq!(frontend.scale_unit, Some(ScaleUnit { scale: 100.0, unit: "%".into() }));
    assert_eq!(frontend.default_group.as_deref(), Some("TopdownL1"));
    assert!(frontend.threshold.is_some());
    let constrained: Vec<Constraint> = tree()
        .arches
        .iter()
        .flat_map(|a| &a.tables)
        .flat_map(|t| &t.metrics)
        .filter_map(|m| m.constraint)
        .collect();
    let count = |c: Constraint| constrained.iter().filter(|&&x| x == c).count();
    // Counted over perf 6.12's pmu-events/arch: 244 NO_GROUP_EVENTS, 88 NO_GROUP_EVENTS_NMI, 18 NO_GROUP_EVENTS_SMT.
    assert_eq!(
        (
            count(Constraint::NoGroupEvents),
            count(Constraint::NoGroupEventsNmi),
            count(Constraint::NoGroupEventsSmt)
        ),
        (244, 88, 18)
    );
    let power10 = table("powerpc", "power10");
    let per_chip =
        power10.metrics.iter().filter(|m| m.aggr_mode == Some(AggrMode::PerChip)).count();
    assert!(per_chip > 0);
}

/// Every metric's line is where its `"MetricName"` key is, and its expression line where its
/// `"MetricExpr"` key is: checked against the raw text of every file.
#[test]
fn metric_lines_point_at_their_keys() {
    let mut cache: HashMap<String, Vec<String>> = HashMap::new();
    let mut lines_of = |file: &str| -> Vec<String> {
        cache
            .entry(file.to_string())
            .or_insert_with(|| {
                fs::read_to_string(arch_root().join(file))
                    .unwrap()
                    .lines()
                    .map(str::to_string)
                    .collect()
            })
            .clone()
    };
    let mut checked = 0;
    for metric in tree().arches.iter().flat_map(|a| &a.tables).flat_map(|t| &t.metrics) {
        let lines = lines_of(&metric.file);
        if metric.arch_std.is_none() {
            let at = &lines[metric.line - 1];
            assert!(
                at.contains("\"MetricName\"") && at.contains(&format!("\"{}\"", metric.name)),
                "{}:{}",
                metric.file,
                metric.line
            );
        }
        let expr_lines = lines_of(&metric.expr_at.file);
        assert!(
            expr_lines[metric.expr_at.line - 1].contains("\"MetricExpr\""),
            "{}",
            metric.expr_at
        );
        if let Some(at) = &metric.threshold_at {
            assert!(lines_of(&at.file)[at.line - 1].contains("\"MetricThreshold\""), "{at}");
        }
        checked += 1;
    }
    assert_eq!(checked, 6093);
    let spr_event = event(table("x86", "sapphirerapids"), "TOPDOWN.SLOTS");
    assert!(lines_of(&spr_event.file)[spr_event.line - 1].contains("\"TOPDOWN.SLOTS\""));
}

/// An arm64 model: `ArchStdEvent` objects copy the event string and unset fields from the
/// arch-standard entry; the values expected here are read from the standard file itself.
#[test]
fn arch_std_event_expansion() {
    let std_file: Vec<Value> = serde_json::from_str(
        &fs::read_to_string(arch_root().join("arm64/common-and-microarch.json")).unwrap(),
    )
    .unwrap();
    let std_entry = std_file.iter().find(|o| o["EventName"] == "L1D_CACHE_REFILL").unwrap();
    let n1 = table("arm64", "arm/neoverse-n1");
    let refill = event(n1, "L1D_CACHE_REFILL");
    let code =
        u64::from_str_radix(std_entry["EventCode"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap();
    assert_eq!(refill.encoding, format!("event={code}"));
    assert_eq!(refill.arch_std.as_deref(), Some("L1D_CACHE_REFILL"));
    assert_eq!(refill.brief.as_deref(), std_entry["BriefDescription"].as_str());
    // The model's own PublicDescription wins over the standard one.
    assert_ne!(refill.public.as_deref(), std_entry["PublicDescription"].as_str());
    assert!(refill.public.as_deref().unwrap().starts_with("Counts level 1 data cache refills"));
    assert_eq!(
        (refill.file.as_str(), refill.topic.as_str()),
        ("arm64/arm/neoverse-n1/l1d_cache.json", "l1d_cache")
    );

    // A metric from sbsa.json with the model's own MetricExpr (ampereonex frontend_bound).
    let sbsa: Vec<Value> =
        serde_json::from_str(&fs::read_to_string(arch_root().join("arm64/sbsa.json")).unwrap())
            .unwrap();
    let std_metric = sbsa.iter().find(|o| o["MetricName"] == "frontend_bound").unwrap();
    let onex = table("arm64", "ampere/ampereonex");
    let frontend = metric(onex, "frontend_bound");
    assert_eq!(
        frontend.expr,
        "100 - (retired_fraction + slots_lost_misspeculation_fraction + backend_bound)"
    );
    assert_eq!(frontend.expr_at.file, "arm64/ampere/ampereonex/metrics.json");
    assert_eq!(frontend.brief.as_deref(), std_metric["BriefDescription"].as_str());
    assert_eq!(frontend.groups.join(";"), std_metric["MetricGroup"].as_str().unwrap());
    assert_eq!(frontend.default_group.as_deref(), std_metric["DefaultMetricgroupName"].as_str());
    assert_eq!(frontend.scale_unit, ScaleUnit::parse(std_metric["ScaleUnit"].as_str().unwrap()));
    // A metric taken whole from sbsa.json: its expression location is in sbsa.json.
    let backend = metric(onex, "backend_bound");
    let std_backend = sbsa.iter().find(|o| o["MetricName"] == "backend_bound").unwrap();
    assert_eq!(backend.expr, std_backend["MetricExpr"].as_str().unwrap());
    assert_eq!(backend.expr_at.file, "arm64/sbsa.json");
}

/// perf's `perf_pmu__convert_scale` (tools/perf/util/pmu.c): strtod prefix, untrimmed rest.
#[test]
fn scale_unit_parsing() {
    let cases = [
        ("100%", 100.0, "%"),
        ("1GHz", 1.0, "GHz"),
        ("64Bytes", 64.0, "Bytes"),
        ("9.765625e-4KB", 0.0009765625, "KB"),
        ("1per cache access", 1.0, "per cache access"),
        ("4", 4.0, ""),
        ("6.103515625E-5MB/sec", 6.103515625e-5, "MB/sec"),
        ("1e3", 1000.0, ""),
        ("1e", 1.0, "e"),
        ("1.5 ns", 1.5, " ns"),
        ("0x10x", 16.0, "x"),
        ("0x1p4GB", 16.0, "GB"),
        (" -2.5ms", -2.5, "ms"),
        ("infinityX", f64::INFINITY, "X"),
    ];
    for (text, scale, unit) in cases {
        assert_eq!(ScaleUnit::parse(text), Some(ScaleUnit { scale, unit: unit.into() }), "{text}");
    }
    let nan = ScaleUnit::parse("nan(1)x").unwrap();
    assert!(nan.scale.is_nan() && nan.unit == "x");
    assert_eq!(ScaleUnit::parse("GHz"), None);
    assert_eq!(ScaleUnit::parse(""), None);
    // Every ScaleUnit in the tree starts with a number (`perf_pmu__convert_scale`), so all parse.
    let all: Vec<_> = tree()
        .arches
        .iter()
        .flat_map(|a| &a.tables)
        .flat_map(|t| &t.metrics)
        .filter_map(|m| m.scale_unit.as_ref())
        .collect();
    assert!(all.iter().all(|s| s.scale.is_finite() && s.scale > 0.0));
}

/// jevents.py's `unit_to_pmu` (`default_core` for core events).
#[test]
fn unit_to_pmu_table() {
    let cases = [
        (None, "default_core"),
        (Some(""), "default_core"),
        (Some("CBO"), "uncore_cbox"),
        (Some("QPI LL"), "uncore_qpi"),
        (Some("SBO"), "uncore_sbox"),
        (Some("iMPH-U"), "uncore_arb"),
        (Some("CPU-M-CF"), "cpum_cf"),
        (Some("CPU-M-SF"), "cpum_sf"),
        (Some("PAI-CRYPTO"), "pai_crypto"),
        (Some("PAI-EXT"), "pai_ext"),
        (Some("UPI LL"), "uncore_upi"),
        (Some("L3PMC"), "amd_l3"),
        (Some("DFPMC"), "amd_df"),
        (Some("UMCPMC"), "amd_umc"),
        (Some("cpu_core"), "cpu_core"),
        (Some("cpu_atom"), "cpu_atom"),
        (Some("hisi_sccl,ddrc"), "hisi_sccl,ddrc"),
        (Some("imx8_ddr"), "imx8_ddr"),
        (Some("imx9_ddr"), "imx9_ddr"),
        (Some("ali_drw"), "ali_drw"),
        (Some("arm_cmn"), "arm_cmn"),
        (Some("CHA"), "uncore_cha"),
        (Some("iMC"), "uncore_imc"),
        (Some("M2M"), "uncore_m2m"),
        (Some("IIO"), "uncore_iio"),
        (Some("PCU"), "uncore_pcu"),
        (Some("imc_free_running"), "uncore_imc_free_running"),
    ];
    for (unit, pmu) in cases {
        assert_eq!(unit_to_pmu(unit), pmu, "{unit:?}");
    }
    // Spec B5: x86 uses 45 table PMUs.
    let x86_pmus: std::collections::BTreeSet<&str> = tree()
        .arch("x86")
        .unwrap()
        .tables
        .iter()
        .flat_map(|t| {
            t.events.iter().map(|e| e.pmu.as_str()).chain(t.metrics.iter().map(|m| m.pmu.as_str()))
        })
        .collect();
    assert_eq!(x86_pmus.len(), 45, "{x86_pmus:?}");
}

/// mapfile.csv matching, as `perf_pmu__find_events_table` (tools/perf/util/pmu.c) does.
#[test]
fn cpuid_lookup() {
    let model =
        |arch: &str, cpuid: &str| tree().model_for_cpuid(arch, cpuid).map(|t| t.name.as_str());
    assert_eq!(model("x86", "GenuineIntel-6-55-4"), Some("skylakex"));
    assert_eq!(model("x86", "GenuineIntel-6-55-7"), Some("cascadelakex"));
    assert_eq!(model("x86", "GenuineIntel-6-8F-8"), Some("sapphirerapids"));
    assert_eq!(model("x86", "GenuineIntel-6-97-2"), Some("alderlake"));
    assert_eq!(model("x86", "GenuineIntel-6-AD-1"), Some("graniterapids"));
    // Family 25 model 0x11 (Genoa) is not in zen3's model list, so the zen4 row matches.
    assert_eq!(model("x86", "AuthenticAMD-25-11-1"), Some("amdzen4"));
    assert_eq!(model("x86", "AuthenticAMD-25-21-0"), Some("amdzen3"));
    assert_eq!(model("x86", "AuthenticAMD-23-1-1"), Some("amdzen1"));
    assert_eq!(model("x86", "AuthenticAMD-23-31-0"), Some("amdzen2"));
    assert_eq!(model("x86", "AuthenticAMD-26-44-0"), Some("amdzen5"));
    assert_eq!(model("x86", "GenuineIntel-6-FF-0"), None);
    // A full row regex needs a full cpuid.
    assert!(!cpuid_matches("x86", "GenuineIntel-6-55-[01234]", "GenuineIntel-6-55"));
    // arm64: MIDR, variant and revision at least the row's (0 in every row).
    assert_eq!(model("arm64", "0x00000000410fd0c0"), Some("arm/neoverse-n1"));
    assert_eq!(model("arm64", "0x00000000413fd0c1"), Some("arm/neoverse-n1"));
    assert_eq!(model("arm64", "0x00000000410fd4f0"), Some("arm/neoverse-n2-v2"));
    assert_eq!(model("arm64", "0x00000000410fd0c8a"), None);
    assert_eq!(model("powerpc", "0x00801200"), Some("power10"));
    assert_eq!(model("powerpc", "0x004e0200"), Some("power9"));
    assert_eq!(model("s390", "IBM,3931,A01,3.6,002f"), Some("cf_z16"));
    assert_eq!(model("riscv", "0x489-0x8000000000000007-0x0000000020181004"), Some("sifive/u74"));
    assert_eq!(model("nds32", "0x0"), Some("n13"));
    let row = tree().arch("x86").unwrap().map_row_for_cpuid("GenuineIntel-6-8F-8").unwrap();
    assert_eq!((row.version.as_str(), row.event_type.as_str()), ("v1.23", "core"));
}

#[test]
fn sys_tables_by_identifier() {
    let names = |identifier: &str| -> Vec<&str> {
        tree().sys_tables_for("arm64", identifier).into_iter().map(|t| t.name.as_str()).collect()
    };
    assert_eq!(names("i.MX8MM"), ["freescale/imx8mm/sys"]);
    // `(434|436|43c|43a).*` must match the whole identifier (arm cmn).
    assert_eq!(names("43602"), ["arm/cmn/sys"]);
    assert!(names("x43602").is_empty());
    assert!(tree().sys_tables_for("x86", "i.MX8MM").is_empty());
}

/// tmetric's common metrics: generic events only, perf syntax, no clash with vendor names.
#[test]
fn common_metrics() {
    let common = &tree().common;
    assert!(common.events.is_empty());
    assert!(common.metrics.len() >= 5);
    let cpus = metric(common, "cpus_utilized");
    assert_eq!(cpus.expr, "task\\-clock / (duration_time * 1e9)");
    assert_eq!(cpus.scale_unit, Some(ScaleUnit { scale: 1.0, unit: "CPUs".into() }));
    // perf's software events (util/parse-events.c event_symbols_sw), tool events and msr/tsc.
    let known = [
        "task-clock",
        "cpu-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "minor-faults",
        "major-faults",
        "alignment-faults",
        "emulation-faults",
        "duration_time",
        "user_time",
        "system_time",
        "msr/tsc/",
    ];
    let vendor_names: std::collections::HashSet<String> = tree()
        .arches
        .iter()
        .flat_map(|a| &a.tables)
        .flat_map(|t| &t.metrics)
        .map(|m| m.name.to_lowercase())
        .collect();
    for metric in &common.metrics {
        assert!(
            !vendor_names.contains(&metric.name.to_lowercase()),
            "{} clashes with a vendor metric",
            metric.name
        );
        assert!(metric.groups.contains(&"Software".to_string()), "{}", metric.name);
        assert!(metric.brief.is_some() && metric.scale_unit.is_some(), "{}", metric.name);
        for id in identifiers(&metric.expr) {
            assert!(known.contains(&id.as_str()), "{}: unknown event {id}", metric.name);
        }
    }
}

/// Identifiers of a perf expression: a letter starts one, `\` escapes the next character, and
/// `@` stands for `/` (tools/perf/util/expr.l). Numbers like `1e9` are skipped.
fn identifiers(expr: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric() || *c == '.') {
                chars.next();
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut id = c.to_string();
            while let Some(&next) = chars.peek() {
                if next == '\\' {
                    chars.next();
                    id.extend(chars.next());
                } else if next.is_ascii_alphanumeric() || "_.@".contains(next) {
                    id.push(if next == '@' { '/' } else { next });
                    chars.next();
                } else {
                    break;
                }
            }
            ids.push(id);
        }
    }
    ids
}

/// A fresh directory under cargo's test scratch space.
fn fixture(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vendor-fixtures").join(name);
    let _ = fs::remove_dir_all(&root);
    for (path, text) in files {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    root
}

const MAPFILE: &str = "Family-model,Version,Filename,EventType\nGenuineIntel-6-8F,v1,model,core\n";

/// perf 6.12's tree loads without an error; its two warnings are upstream typos of description
/// keys (the descriptions are lost in perf too). The list may shrink, never grow unnoticed.
#[test]
fn checked_in_tree_has_only_known_warnings() {
    let found: Vec<String> =
        tree().diagnostics.iter().map(|d| format!("{}: {}", d.severity, d.location())).collect();
    assert_eq!(
        found,
        ["warning: arm64/ampere/ampereonex/mmu.json:33", "warning: x86/amdzen4/cache.json:185",]
    );
    assert!(tree().diagnostics[0].message.contains("`PublicDescrition` (16 objects)"));
    assert!(tree().diagnostics[1].message.contains("`BriefDescript6ion` (2 objects in 2 files"));
}

#[test]
fn fixture_tree_layout() {
    let root = fixture(
        "layout",
        &[
            ("x86/mapfile.csv", MAPFILE),
            (
                "x86/model/cache.json",
                "[{\"EventName\": \"A\", \"EventCode\": \"0x10\", \"Unit\": \"CHA\", \"PerPkg\": \"1\"}]",
            ),
            ("x86/model/metricgroups.json", "{\"G\": \"group g\"}"),
            (
                "x86/model/counter.json",
                "[{\"Unit\": \"core\", \"CountersNumFixed\": 3, \"CountersNumGeneric\": \"4\"}]",
            ),
            (
                "arm64/vendor/chip/sys/uncore.json",
                "[{\"EventName\": \"S\", \"Compat\": \"v1.*\", \"Unit\": \"arm_cmn\"}]",
            ),
            ("arm64/vendor/chip/core.json", "[{\"ArchStdEvent\": \"CYCLES\"}]"),
            (
                "arm64/std.json",
                "[{\"EventName\": \"CYCLES\", \"EventCode\": \"0x11\", \"BriefDescription\": \"Cycles.\"}]",
            ),
            (
                "common/metrics.json",
                "[{\"MetricName\": \"c\", \"MetricExpr\": \"task\\\\-clock\"}]",
            ),
            ("common/README.md", "not json"),
        ],
    );
    let tree = load_tree(&root).unwrap();
    assert_eq!(tree.diagnostics, []);
    assert_eq!(tree.arches.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["arm64", "x86"]);
    let arm = tree.arch("arm64").unwrap();
    assert_eq!(
        arm.tables.iter().map(|t| (t.path.as_str(), t.name.as_str(), t.is_sys)).collect::<Vec<_>>(),
        [
            ("arm64/vendor/chip", "vendor/chip", false),
            ("arm64/vendor/chip/sys", "vendor/chip/sys", true)
        ]
    );
    let cycles = &arm.tables[0].events[0];
    assert_eq!(
        (cycles.name.as_str(), cycles.encoding.as_str(), cycles.perf_desc().as_deref()),
        ("CYCLES", "event=0x11", Some("Cycles"))
    );
    assert_eq!(arm.tables[1].events[0].compat.as_deref(), Some("v1.*"));
    let model = tree.model_for_cpuid("x86", "GenuineIntel-6-8F-1").unwrap();
    assert_eq!(model.events[0].encoding, "event=0x10");
    assert_eq!(model.events[0].pmu, "uncore_cha");
    assert_eq!(model.metric_groups.get("G").map(String::as_str), Some("group g"));
    assert_eq!(
        model.counters.iter().map(|c| (c.pmu.as_str(), c.fixed, c.generic)).collect::<Vec<_>>(),
        [("default_core", 3, 4)]
    );
    assert_eq!(tree.common.metrics[0].expr, "task\\-clock");
}

/// perf 7.x's build writes `extra-metrics.json` and `extra-metricgroups.json` into each model's
/// directory; jevents.py 7.x reads every `*metricgroups.json` as group descriptions (a later file
/// in name order wins) and `extra-metrics.json` as metrics of the `metrics` topic.
#[test]
fn generated_extra_files_load_as_perf_7_reads_them() {
    let root = fixture(
        "extra",
        &[
            ("x86/mapfile.csv", MAPFILE),
            ("x86/model/metricgroups.json", "{\"G\": \"vendor g\", \"V\": \"vendor only\"}"),
            (
                "x86/model/extra-metricgroups.json",
                "{\"G\": \"generated g\", \"lpm_x\": \"generated only\"}",
            ),
            (
                "x86/model/extra-metrics.json",
                "[{\"MetricName\": \"lpm_x_rate\", \"MetricGroup\": \"lpm_x\", \"MetricExpr\": \"d_ratio(instructions, duration_time)\", \"ScaleUnit\": \"1insn/s\"}]",
            ),
        ],
    );
    let tree = load_tree(&root).unwrap();
    assert_eq!(tree.diagnostics, []);
    let model = tree.model_for_cpuid("x86", "GenuineIntel-6-8F-1").unwrap();
    let groups: Vec<(&str, &str)> =
        model.metric_groups.iter().map(|(g, d)| (g.as_str(), d.as_str())).collect();
    assert_eq!(groups, [("G", "vendor g"), ("V", "vendor only"), ("lpm_x", "generated only")]);
    assert_eq!(model.metrics.len(), 1);
    assert_eq!(model.metrics[0].name, "lpm_x_rate");
    assert_eq!(model.metrics[0].expr, "d_ratio(instructions, duration_time)");
    assert_eq!(model.metrics[0].groups, ["lpm_x"]);
}

/// Compares every event and metric of every table with what jevents.py's rules give, through
/// tests/data/jevents_check.py: its own re-implementation of JsonEvent always, and the real
/// jevents.py too when `TMETRIC_JEVENTS_DIR` names a `tools/perf/pmu-events` directory.
#[test]
fn matches_jevents() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!(
            "skipped: python3 is not installed, so jevents.py's rules cannot be cross-checked"
        );
        return;
    }
    check_against_python(None);
    match std::env::var_os("TMETRIC_JEVENTS_DIR") {
        Some(dir) => check_against_python(Some(PathBuf::from(dir))),
        None => eprintln!(
            "real jevents.py not checked: set TMETRIC_JEVENTS_DIR to perf's pmu-events directory"
        ),
    }
}

fn check_against_python(jevents: Option<PathBuf>) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/jevents_check.py");
    let tables: Vec<&Table> = tree().arches.iter().flat_map(|a| &a.tables).collect();
    let mut command = Command::new("python3");
    command.arg(&script).arg("--tree").arg(arch_root());
    if let Some(dir) = &jevents {
        command.arg("--jevents").arg(dir);
    }
    command.args(tables.iter().map(|t| t.path.as_str()));
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();

    let mut events: HashMap<(&str, usize), &Event> = HashMap::new();
    let mut metrics: HashMap<(&str, usize), &Metric> = HashMap::new();
    for table in &tables {
        events.extend(table.events.iter().map(|e| ((e.file.as_str(), e.index_in_file), e)));
        metrics.extend(table.metrics.iter().map(|m| ((m.file.as_str(), m.index_in_file), m)));
    }
    let mut mismatches = Vec::new();
    let (mut n_events, mut n_metrics) = (0, 0);
    for line in stdout.lines() {
        let record: Vec<Value> = serde_json::from_str(line).unwrap();
        let file = record[2].as_str().unwrap();
        let index = record[3].as_u64().unwrap() as usize;
        let mut compare = |what: &str, ours: String, theirs: String| {
            if ours != theirs && mismatches.len() < 30 {
                mismatches
                    .push(format!("{file}#{index} {what}: ours {ours:?}, jevents {theirs:?}"));
            }
        };
        if record[0] == "E" {
            n_events += 1;
            let Some(e) = events.get(&(file, index)) else {
                compare("event", "missing".into(), record[4].to_string());
                continue;
            };
            compare_event(e, &record, &mut compare);
        } else {
            n_metrics += 1;
            let Some(m) = metrics.get(&(file, index)) else {
                compare("metric", "missing".into(), record[4].to_string());
                continue;
            };
            compare_metric(m, &record, &mut compare);
        }
    }
    let which =
        if jevents.is_some() { "jevents.py" } else { "jevents_check.py's re-implementation" };
    assert!(mismatches.is_empty(), "differences from {which}:\n{}", mismatches.join("\n"));
    assert_eq!(
        (n_events, n_metrics),
        (events.len(), metrics.len()),
        "record counts differ from {which}"
    );
    eprintln!("{which}: {n_events} events and {n_metrics} metrics agree");
}

/// jevents.py stores an empty description like a missing one.
fn opt(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
}

fn scale(v: &Value) -> Option<ScaleUnit> {
    v.as_str().and_then(ScaleUnit::parse)
}

/// Compares event `e` with jevents' record of it (`compare(what, ours, theirs)`).
fn compare_event(e: &Event, record: &[Value], compare: &mut impl FnMut(&str, String, String)) {
    compare("name", e.name.to_lowercase(), record[4].as_str().unwrap().into());
    compare("pmu", e.pmu.clone(), record[5].as_str().unwrap().into());
    compare("event", e.encoding.clone(), record[6].as_str().unwrap().into());
    compare("desc", format!("{:?}", e.perf_desc().map(c_escape)), format!("{:?}", opt(&record[7])));
    compare(
        "long_desc",
        format!("{:?}", e.perf_long_desc().map(c_escape)),
        format!("{:?}", opt(&record[8])),
    );
    compare("scale_unit", format!("{:?}", e.scale_unit), format!("{:?}", scale(&record[9])));
    compare(
        "flags",
        format!("{} {}", e.per_pkg, e.deprecated),
        format!("{} {}", record[10], record[11]),
    );
    compare("compat", format!("{:?}", e.compat), format!("{:?}", opt(&record[12])));
}

/// Compares metric `m` with jevents' record of it (`compare(what, ours, theirs)`).
fn compare_metric(m: &Metric, record: &[Value], compare: &mut impl FnMut(&str, String, String)) {
    let constraint = m.constraint.map(|c| match c {
        Constraint::NoGroupEvents => "1",
        Constraint::NoGroupEventsNmi => "2",
        Constraint::NoGroupEventsSmt => "3",
    });
    let aggr = m.aggr_mode.map(|a| match a {
        AggrMode::PerChip => "1",
        AggrMode::PerCore => "2",
    });
    let desc =
        |d: &Option<String>| d.as_deref().map(strip_period).filter(|d| !d.is_empty()).map(c_escape);
    compare("name", m.name.clone(), record[4].as_str().unwrap().into());
    compare("pmu", m.pmu.clone(), record[5].as_str().unwrap().into());
    if let Some(expr) = record[6].as_str() {
        compare("expr", m.expr.clone(), expr.into());
    }
    compare("threshold", format!("{:?}", m.threshold), format!("{:?}", opt(&record[7])));
    compare("groups", m.groups.join(";"), record[8].as_str().unwrap().into());
    compare("scale_unit", format!("{:?}", m.scale_unit), format!("{:?}", scale(&record[9])));
    compare("constraint", format!("{constraint:?}"), format!("{:?}", record[10].as_str()));
    compare("no_group", m.no_group.join(";"), record[11].as_str().unwrap().into());
    compare("default_group", format!("{:?}", m.default_group), format!("{:?}", opt(&record[12])));
    compare("compat", format!("{:?}", m.compat), format!("{:?}", opt(&record[13])));
    compare("aggr_mode", format!("{aggr:?}"), format!("{:?}", record[14].as_str()));
    compare("desc", format!("{:?}", desc(&m.brief)), format!("{:?}", opt(&record[15])));
    compare("long_desc", format!("{:?}", desc(&m.public)), format!("{:?}", opt(&record[16])));
}

/// jevents.py `fixdesc` trailing-period strip.
fn strip_period(text: &str) -> &str {
    let text = text.strip_suffix(".  ").unwrap_or(text);
    let text = text.strip_suffix(". ").unwrap_or(text);
    text.strip_suffix('.').unwrap_or(text)
}

/// The C escaping jevents.py applies to descriptions.
fn c_escape(text: impl AsRef<str>) -> String {
    text.as_ref().replace('\n', "\\n").replace('"', "\\\"").replace('\r', "\\r")
}
