//! The loader end to end on `tests/data/vendor-vintages`: small trees with the odd but real
//! constructs of perf's trees of other vintages (see the README there), so CI covers them without
//! downloading a kernel.

use std::path::PathBuf;

use tmetric_pmu_events::resolve::resolve_tree;
use tmetric_pmu_events::{CounterField, Severity, Table, Tree, load_tree};

fn vintage(name: &str) -> Tree {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/vendor-vintages")
        .join(name)
        .join("arch");
    load_tree(&root).unwrap_or_else(|err| panic!("{err}"))
}

fn table<'t>(tree: &'t Tree, arch: &str, name: &str) -> &'t Table {
    tree.arch(arch).unwrap().table(name).unwrap_or_else(|| panic!("no {arch}/{name}"))
}

fn encoding<'t>(table: &'t Table, name: &str) -> &'t str {
    let event = table.events_named(name).next().unwrap_or_else(|| panic!("no {name}"));
    &event.encoding
}

fn findings(tree: &Tree) -> Vec<String> {
    tree.diagnostics.iter().map(ToString::to_string).collect()
}

#[test]
fn perf_6_1_tree_loads_with_only_unknown_key_warnings() {
    let tree = vintage("v6.1");
    // Intel's converter wrote keys perf never read; each is one warning for the whole tree.
    assert_eq!(
        findings(&tree),
        [
            "warning: x86/elkhartlake/cache.json:9: event `OCR.ALL_CODE_RD.L3_HIT`: unknown key `Offcore` (1 object), ignored as perf does",
            "warning: x86/elkhartlake/cache.json:15: event `MEM_LOAD_UOPS_RETIRED.L1_HIT`: unknown key `CollectPEBSRecord` (1 object), ignored as perf does",
            "warning: x86/elkhartlake/cache.json:20: event `MEM_LOAD_UOPS_RETIRED.L1_HIT`: unknown key `PDIR_COUNTER` (1 object), ignored as perf does",
            "warning: x86/elkhartlake/cache.json:23: event `MEM_LOAD_UOPS_RETIRED.L1_HIT`: unknown key `Speculative` (1 object), ignored as perf does",
            "warning: x86/haswell/pipeline.json:5: event `INST_RETIRED.ANY`: unknown key `CounterHTOff` (4 objects), ignored as perf does",
        ]
    );
    assert_eq!(tree.diagnostic_count(Severity::Error), 0);
    let haswell = table(&tree, "x86", "haswell");
    // "Counter": "0," is counter 0.
    let busy =
        haswell.events_named("UNC_ARB_TRK_OCCUPANCY.CYCLES_WITH_ANY_REQUEST").next().unwrap();
    assert_eq!(busy.counters, CounterField::Generic(vec![0]));
    assert_eq!(busy.encoding, "event=0x80,cmask=1,umask=1");
    assert_eq!(busy.pmu, "uncore_arb");
    // No counter.json before perf 6.9: no counter information, and no finding either.
    assert_eq!(haswell.counters, []);
    // "EventCode": "0XB7".
    let elkhartlake = table(&tree, "x86", "elkhartlake");
    assert_eq!(
        encoding(elkhartlake, "OCR.ALL_CODE_RD.L3_HIT"),
        "event=0xb7,period=100003,umask=1,offcore_rsp=0x1F803C0044"
    );
    // The constant metric loads like any other.
    let constant = haswell.metrics_named("L3_Cache_Access_BW_1T").next().unwrap();
    assert_eq!(constant.expr, "0");
    // ArchStdEvent in lower case, and an own description over the standard one.
    let a57 = table(&tree, "arm64", "arm/cortex-a57-a72");
    let refill = a57.events_named("L1D_CACHE_REFILL").next().unwrap();
    assert_eq!(refill.encoding, "event=3");
    assert_eq!(
        refill.public.as_deref(),
        Some("L1D cache refill (as the Cortex-A57 manual names it)")
    );
    assert_eq!(refill.brief.as_deref(), Some("Attributable Level 1 data cache refill"));
    assert_eq!(encoding(a57, "L1D_CACHE_RD"), "event=0x40");
    let counts: Vec<(&str, usize, usize)> = tree
        .arches
        .iter()
        .flat_map(|a| &a.tables)
        .map(|t| (t.path.as_str(), t.events.len(), t.metrics.len()))
        .collect();
    assert_eq!(
        counts,
        [
            ("arm64/arm/cortex-a57-a72", 5, 0),
            ("x86/bonnell", 1, 0),
            ("x86/elkhartlake", 2, 0),
            ("x86/haswell", 6, 3),
        ]
    );
}

#[test]
fn perf_6_12_tree_loads_with_its_typo_warning() {
    let tree = vintage("v6.12");
    assert_eq!(
        findings(&tree),
        [
            "warning: x86/grandridge/pipeline.json:3: event `BR_INST_RETIRED.ALL_BRANCHES`: unknown key `BriefDescript6ion` (1 object), ignored as perf does; a typo of `BriefDescription`? Fix the spelling upstream"
        ]
    );
    let haswell = table(&tree, "x86", "haswell");
    // counter.json with counts as JSON numbers and as strings.
    let counters: Vec<(&str, u32, u32, usize)> =
        haswell.counters.iter().map(|c| (c.pmu.as_str(), c.fixed, c.generic, c.at.line)).collect();
    assert_eq!(counters, [("default_core", 3, 4, 2), ("uncore_arb", 0, 2, 7)]);
    // The same events as 6.1 wrote them differently read the same.
    let old = vintage("v6.1");
    let old_haswell = table(&old, "x86", "haswell");
    for name in ["UNC_ARB_TRK_OCCUPANCY.CYCLES_WITH_ANY_REQUEST", "UNC_ARB_TRK_OCCUPANCY.ALL"] {
        let (a, b) = (
            haswell.events_named(name).next().unwrap(),
            old_haswell.events_named(name).next().unwrap(),
        );
        assert_eq!((&a.encoding, &a.counters), (&b.encoding, &b.counters), "{name}");
    }
    let ocr = "OCR.ALL_CODE_RD.L3_HIT";
    assert_eq!(
        encoding(table(&tree, "x86", "elkhartlake"), ocr),
        encoding(table(&old, "x86", "elkhartlake"), ocr)
    );
}

/// Every metric of both vintages resolves, the constant one included, so the generator gets
/// them all.
#[test]
fn every_fixture_metric_resolves() {
    for name in ["v6.1", "v6.12"] {
        let tree = vintage(name);
        let resolved = resolve_tree(&tree);
        for r in &resolved {
            assert_eq!(r.diagnostics.len(), 0, "{name} {}: {:#?}", r.table.path, r.diagnostics);
            assert!(r.metrics.iter().all(|m| m.ok), "{name} {}", r.table.path);
        }
        let metrics: usize = resolved.iter().map(|r| r.metrics.len()).sum();
        assert_eq!(metrics, 3, "{name}");
    }
}

/// `tmetric list` and `-e` take perf 7.x's tool PMU from `tmetric_names::TOOL_PMU`: it must say
/// what the imported perf 7.2's `tool.json` says, event by event (name, config, description).
#[test]
fn the_tool_pmu_table_is_perf_7_2s_tool_json() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../pmu-events/vintage/7.2/common/common/tool.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let from_json: Vec<(String, u64, String)> = json
        .iter()
        .map(|e| {
            assert_eq!(e["Unit"], "tool");
            let config = e["ConfigCode"].as_str().unwrap().parse::<u64>().unwrap();
            (
                e["EventName"].as_str().unwrap().into(),
                config,
                e["BriefDescription"].as_str().unwrap().into(),
            )
        })
        .collect();
    let ours: Vec<(String, u64, String)> = tmetric_names::TOOL_PMU
        .iter()
        .map(|e| (e.name.into(), e.config, e.description.into()))
        .collect();
    assert_eq!(ours, from_json);
}
