//! The tolerant loader on small broken trees: each reading perf accepts gives the same event with
//! no diagnostic; each other problem gives one diagnostic at its file:line, and what still makes
//! sense (the other events of the file, the metric of the same object) is kept.

use std::fs;
use std::path::PathBuf;

use tmetric_pmu_events::{CounterField, Diagnostic, Severity, Tree, load_tree};

const MAPFILE: &str = "Family-model,Version,Filename,EventType\nGenuineIntel-6-8F,v1,model,core\n";

/// A fresh tree under cargo's test scratch space.
fn fixture(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tolerant-fixtures").join(name);
    let _ = fs::remove_dir_all(&root);
    for (path, text) in files {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    root
}

/// Loads `x86/model/cache.json` = `json` (with a mapfile) and returns the tree.
fn load_one(name: &str, json: &str) -> Tree {
    let root = fixture(name, &[("x86/mapfile.csv", MAPFILE), ("x86/model/cache.json", json)]);
    load_tree(&root).unwrap_or_else(|err| panic!("{name}: {err}"))
}

fn model(tree: &Tree) -> &tmetric_pmu_events::Table {
    tree.arch("x86").unwrap().table("model").unwrap()
}

fn encodings(tree: &Tree) -> Vec<(&str, &str)> {
    model(tree).events.iter().map(|e| (e.name.as_str(), e.encoding.as_str())).collect()
}

fn metric_names(tree: &Tree) -> Vec<&str> {
    model(tree).metrics.iter().map(|m| m.name.as_str()).collect()
}

/// The only diagnostic of the tree.
fn only(tree: &Tree) -> &Diagnostic {
    assert_eq!(tree.diagnostics.len(), 1, "{:#?}", tree.diagnostics);
    &tree.diagnostics[0]
}

#[test]
fn trailing_comma_in_counter_is_read_as_perf_6_1_wrote_it() {
    let tree = load_one(
        "counter-comma",
        r#"[{"EventName": "UNC_ARB_TRK_OCCUPANCY.ALL", "EventCode": "0x80", "UMask": "0x01",
             "Counter": "0,", "Unit": "ARB", "PerPkg": "1"}]"#,
    );
    assert_eq!(tree.diagnostics, []);
    let event = &model(&tree).events[0];
    assert_eq!(event.counters, CounterField::Generic(vec![0]));
    assert_eq!((event.encoding.as_str(), event.pmu.as_str()), ("event=0x80,umask=1", "uncore_arb"));
}

#[test]
fn numbers_may_be_json_numbers_or_strings() {
    let tree = load_one(
        "numbers",
        r#"[{"EventName": "A", "EventCode": 192, "UMask": 4, "SampleAfterValue": 100003, "PerPkg": 1},
            {"EventName": "B", "EventCode": "0xc0", "UMask": "4", "SampleAfterValue": "100003", "PerPkg": "1"}]"#,
    );
    assert_eq!(tree.diagnostics, []);
    let events = &model(&tree).events;
    assert_eq!(events[0].encoding, "event=0xc0,period=100003,umask=4");
    assert_eq!(events[0].encoding, events[1].encoding);
    assert!(events[0].per_pkg && events[1].per_pkg);
}

#[test]
fn upper_case_hex_prefix_and_blanks_read_as_python_int_does() {
    // perf 6.1's elkhartlake cache.json writes "EventCode": "0XB7".
    let tree = load_one(
        "hex",
        r#"[{"EventName": "A", "EventCode": "0XB7", "UMask": "0X01", "CounterMask": " 0x2 "}]"#,
    );
    assert_eq!(tree.diagnostics, []);
    assert_eq!(encodings(&tree), [("A", "event=0xb7,cmask=2,umask=1")]);
}

#[test]
fn counter_json_counts_may_be_numbers_or_strings_and_the_file_may_be_missing() {
    let root = fixture(
        "counters",
        &[
            ("x86/mapfile.csv", MAPFILE),
            ("x86/model/cache.json", r#"[{"EventName": "A", "EventCode": "0x1"}]"#),
            (
                "x86/model/counter.json",
                r#"[{"Unit": "core", "CountersNumFixed": 3, "CountersNumGeneric": "8"},
                    {"Unit": "CHA", "CountersNumFixed": "0", "CountersNumGeneric": 4}]"#,
            ),
            ("x86/other/cache.json", r#"[{"EventName": "A", "EventCode": "0x1"}]"#),
        ],
    );
    let tree = load_tree(&root).unwrap();
    assert_eq!(tree.diagnostics, []);
    let x86 = tree.arch("x86").unwrap();
    let counts: Vec<(&str, u32, u32)> = x86
        .table("model")
        .unwrap()
        .counters
        .iter()
        .map(|c| (c.pmu.as_str(), c.fixed, c.generic))
        .collect();
    assert_eq!(counts, [("default_core", 3, 8), ("uncore_cha", 0, 4)]);
    // No counter.json (every model before perf 6.9, AMD, Arm): no counters, and no finding.
    assert_eq!(x86.table("other").unwrap().counters, []);
}

#[test]
fn arch_std_event_names_are_case_insensitive() {
    let root = fixture(
        "std-case",
        &[
            (
                "arm64/mapfile.csv",
                "MIDR,Version,JSON/file/pathname,Type\n0x00000000410fd070,v1,arm/cortex-a57-a72,core\n",
            ),
            (
                "arm64/common-and-microarch.json",
                r#"[{"EventName": "L1D_CACHE", "EventCode": "0x04", "BriefDescription": "Level 1 data cache access"}]"#,
            ),
            ("arm64/arm/cortex-a57-a72/cache.json", r#"[{"ArchStdEvent": "l1d_cache"}]"#),
        ],
    );
    let tree = load_tree(&root).unwrap();
    assert_eq!(tree.diagnostics, []);
    let event = &tree.arch("arm64").unwrap().tables[0].events[0];
    assert_eq!((event.name.as_str(), event.encoding.as_str()), ("L1D_CACHE", "event=4"));
}

#[test]
fn unknown_keys_are_one_warning_per_key_with_counts_and_a_spelling_hint() {
    let tree = load_one(
        "unknown",
        "[\n {\"EventName\": \"A\",\n  \"PublicDescrition\": \"x\", \"Speculative\": \"1\"},\n {\"EventName\": \"B\", \"Speculative\": \"0\"}\n]",
    );
    let found: Vec<String> = tree.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "warning: x86/model/cache.json:3: event `A`: unknown key `PublicDescrition` (1 object), ignored as perf does; a typo of `PublicDescription`? Fix the spelling upstream",
            "warning: x86/model/cache.json:3: event `A`: unknown key `Speculative` (2 objects), ignored as perf does",
        ]
    );
    assert_eq!(model(&tree).events.len(), 2);
}

#[test]
fn an_ignored_umask_ext_says_what_it_changes() {
    let tree = load_one(
        "umask-ext",
        r#"[{"EventName": "UNC_UPI_TxL_HDR_MATCH.LOC", "EventCode": "0x4", "UMaskExt": "0x02", "Unit": "UPI LL", "PerPkg": "1"}]"#,
    );
    // perf 6.1 built the same string: it never read UMaskExt.
    assert_eq!(encodings(&tree), [("UNC_UPI_TxL_HDR_MATCH.LOC", "event=4")]);
    let d = only(&tree);
    assert_eq!(d.severity, Severity::Warning);
    assert!(
        d.message.starts_with("unknown key `UMaskExt` (1 object), ignored as perf does; the event strings lack these extended umask bits"),
        "{d}"
    );
}

#[test]
fn a_repeated_key_keeps_the_last_value_as_python_does() {
    let tree =
        load_one("dup-key", "[{\"EventName\": \"A\", \"UMask\": \"0x1\",\n \"UMask\": \"0x2\"}]");
    assert_eq!(encodings(&tree), [("A", "event=0,umask=2")]);
    let d = only(&tree);
    assert_eq!((d.severity, d.location()), (Severity::Warning, "x86/model/cache.json:1".into()));
    assert!(d.message.ends_with("last value used"), "{d}");
}

/// One bad value: (name, json, expected diagnostic, events kept, metrics kept).
type Case =
    (&'static str, &'static str, &'static str, &'static [&'static str], &'static [&'static str]);

/// Every kind of bad value the loader tolerates.
const BAD_VALUES: &[Case] = &[
    (
        "null-umask",
        "[{\"EventName\": \"A\",\n \"UMask\": null}, {\"EventName\": \"B\"}]",
        "error: x86/model/cache.json:2: event `A`: `UMask` is a JSON null; write it as a string, e.g. \"UMask\": \"1\"; event dropped",
        &["B"],
        &[],
    ),
    (
        "bool-description",
        "[{\"EventName\": \"A\",\n \"BriefDescription\": true}]",
        "warning: x86/model/cache.json:2: event `A`: `BriefDescription` is a JSON boolean; write it as a string, e.g. \"BriefDescription\": \"1\"; value ignored",
        &["A"],
        &[],
    ),
    (
        "bad-event-code",
        "[{\"EventName\": \"A\", \"MetricName\": \"m\", \"MetricExpr\": \"1\",\n \"EventCode\": \"010\"}]",
        "error: x86/model/cache.json:2: event `A`: `EventCode` value `010` is not an integer (expected decimal without leading zeros, or 0x hex); event dropped",
        &[],
        &["m"],
    ),
    (
        "bad-period",
        "[{\"EventName\": \"A\", \"EventCode\": \"0x3c\",\n \"SampleAfterValue\": \"2M\"}]",
        "warning: x86/model/cache.json:2: event `A`: `SampleAfterValue` value `2M` is not an integer (expected decimal without leading zeros, or 0x hex); no sampling period",
        &["A"],
        &[],
    ),
    (
        "msr",
        "[{\"EventName\": \"OCR.X\",\n \"MSRIndex\": \"0x123\", \"MSRValue\": \"1\"}]",
        "error: x86/model/cache.json:2: event `OCR.X`: unknown `MSRIndex` `0x123`; perf knows 0x1A6/0x1A7 (offcore_rsp), 0x3F6 (ldlat) and 0x3F7 (frontend); event dropped",
        &[],
        &[],
    ),
    (
        "counter",
        "[{\"EventName\": \"A\",\n \"Counter\": \"0,x\"}]",
        "warning: x86/model/cache.json:2: event `A`: `Counter` `0,x` is neither a list of counter numbers (\"0,1,2,3\") nor \"Fixed counter N\"; any counter assumed",
        &["A"],
        &[],
    ),
    (
        "pebs",
        "[{\"EventName\": \"A\",\n \"PEBS\": \"yes\"}]",
        "warning: x86/model/cache.json:2: event `A`: `PEBS` value `yes` is not a flag; expected \"0\" or \"1\"; read as 0",
        &["A"],
        &[],
    ),
    (
        "perpkg",
        "[{\"EventName\": \"A\",\n \"PerPkg\": \"yes\"}]",
        "error: x86/model/cache.json:2: event `A`: `PerPkg` value `yes` is not a flag; expected \"0\" or \"1\"; event dropped",
        &[],
        &[],
    ),
    (
        "scale",
        "[{\"MetricName\": \"m\", \"MetricExpr\": \"a\",\n \"ScaleUnit\": \"GHz\"}]",
        "error: x86/model/cache.json:2: metric `m`: `ScaleUnit` `GHz` does not start with a number; write e.g. \"1GHz\" or \"100%\"; metric dropped",
        &[],
        &[],
    ),
    (
        "constraint",
        "[{\"MetricName\": \"m\", \"MetricExpr\": \"a\",\n \"MetricConstraint\": \"NO\"}]",
        "warning: x86/model/cache.json:2: metric `m`: unknown `MetricConstraint` `NO`; expected NO_GROUP_EVENTS, NO_GROUP_EVENTS_NMI, NO_NMI_WATCHDOG or NO_GROUP_EVENTS_SMT; events grouped as without a constraint",
        &[],
        &["m"],
    ),
    (
        "aggregation",
        "[{\"MetricName\": \"m\", \"MetricExpr\": \"a\",\n \"AggregationMode\": \"PerSocket\"}]",
        "error: x86/model/cache.json:2: metric `m`: unknown `AggregationMode` `PerSocket`; expected PerChip or PerCore; metric dropped",
        &[],
        &[],
    ),
    (
        "compat",
        "[{\"EventName\": \"A\",\n \"Compat\": \"(43\"}]",
        "error: x86/model/cache.json:2: event `A`: `Compat` `(43` is not a valid regular expression",
        &[],
        &[],
    ),
    (
        "no-expr",
        "[{\"MetricName\": \"m\"}, {\"MetricName\": \"n\", \"MetricExpr\": \"1\"}]",
        "error: x86/model/cache.json:1: metric `m`: metric has no `MetricExpr`; metric dropped",
        &[],
        &["n"],
    ),
    (
        "no-name",
        "[{\"EventName\": \"A\",\n \"MetricExpr\": \"1\"}]",
        "warning: x86/model/cache.json:2: event `A`: `MetricExpr` without `MetricName`; add a name; `MetricExpr` ignored",
        &["A"],
        &[],
    ),
    (
        "nameless",
        "[{\"BriefDescription\": \"x\"}]",
        "warning: x86/model/cache.json:1: object #0: object has no `EventName`, `MetricName` or `ArchStdEvent`; add a name; object ignored",
        &[],
        &[],
    ),
    (
        "duplicate",
        "[{\"EventName\": \"A.B\", \"EventCode\": \"0x1\"},\n{\"EventName\": \"a.b\", \"EventCode\": \"0x2\"}]",
        "error: x86/model/cache.json:2: event `a.b`: event name already used in this table and PMU at x86/model/cache.json:1; rename one; event dropped, the first one is kept",
        &["A.B"],
        &[],
    ),
    (
        "nameless-bad-scale",
        "[{\"ScaleUnit\": \"GHz\"}]",
        "warning: x86/model/cache.json:1: object #0: object has no `EventName`, `MetricName` or `ArchStdEvent`; add a name; object ignored",
        &[],
        &[],
    ),
    (
        "expr-only",
        "[{\"MetricExpr\": \"1\"}]",
        "warning: x86/model/cache.json:1: object #0: `MetricExpr` without `MetricName`; add a name; `MetricExpr` ignored",
        &[],
        &[],
    ),
    (
        "not-object",
        "[\"stray\", {\"EventName\": \"A\"}]",
        "warning: x86/model/cache.json: element #0: array element is a JSON string, not an event or metric object; ignored",
        &["A"],
        &[],
    ),
];

#[test]
fn each_bad_value_is_one_diagnostic_and_the_rest_is_kept() {
    for (name, json, expected, events, metrics) in BAD_VALUES {
        let tree = load_one(name, json);
        let found: Vec<String> = tree.diagnostics.iter().map(ToString::to_string).collect();
        assert_eq!(found.len(), 1, "{name}: {found:#?}");
        assert!(found[0].starts_with(expected), "{name}:\n{}\nexpected:\n{expected}", found[0]);
        let kept: Vec<&str> = model(&tree).events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            (kept.as_slice(), metric_names(&tree).as_slice()),
            (*events, *metrics),
            "{name}"
        );
    }
}

#[test]
fn unknown_arch_std_event_keeps_the_objects_own_fields_like_perf_6_1() {
    let root = fixture(
        "std-unknown",
        &[
            (
                "arm64/mapfile.csv",
                "MIDR,Version,JSON/file/pathname,Type\n0x00000000410fd070,v1,arm/a57,core\n",
            ),
            (
                "arm64/std.json",
                r#"[{"EventName": "CPU_CYCLES", "EventCode": "0x11"},
                    {"MetricName": "ipc", "MetricExpr": "INST_RETIRED / CPU_CYCLES"}]"#,
            ),
            (
                "arm64/arm/a57/pipeline.json",
                "[{\"ArchStdEvent\": \"NOPE\", \"EventName\": \"OWN\", \"EventCode\": \"0x7\"},\n {\"ArchStdEvent\": \"GONE\"},\n {\"ArchStdEvent\": \"ipc\", \"EventName\": \"X\"}]",
            ),
        ],
    );
    let tree = load_tree(&root).unwrap();
    let found: Vec<String> = tree.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "warning: arm64/arm/a57/pipeline.json:1: event `OWN`: no event or metric `NOPE` in the json files directly in the architecture directory; fix the name; built from the object's own fields, as perf 6.1 did",
            "error: arm64/arm/a57/pipeline.json:2: `ArchStdEvent` object `GONE`: no event or metric `GONE` in the json files directly in the architecture directory; fix the name; object dropped",
            "error: arm64/arm/a57/pipeline.json:3: event `X`: `ArchStdEvent` `ipc` is a metric, so this object (which has `EventName`) gets no event string; event dropped",
        ]
    );
    let table = &tree.arch("arm64").unwrap().tables[0];
    let events: Vec<(&str, &str)> =
        table.events.iter().map(|e| (e.name.as_str(), e.encoding.as_str())).collect();
    assert_eq!(events, [("OWN", "event=7")]);
    // The metric half of the third object still expands.
    assert_eq!(table.metrics.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["ipc"]);
}

#[test]
fn malformed_json_skips_only_that_file() {
    let broken = "[\n  {\n    \"EventName\": \"A\",\n    \"EventCode\": \"0x1\"\n    \"UMask\": \"0x2\"\n  }\n]\n";
    let root = fixture(
        "malformed",
        &[
            ("x86/mapfile.csv", MAPFILE),
            ("x86/model/cache.json", broken),
            ("x86/model/memory.json", r#"[{"EventName": "M", "EventCode": "0x2"}]"#),
        ],
    );
    let tree = load_tree(&root).unwrap();
    assert_eq!(
        only(&tree).to_string(),
        "error: x86/model/cache.json:5: malformed JSON at column 5: expected `,` or `}`; file skipped (fix the file upstream, or in pmu-events/ and re-import)"
    );
    assert_eq!(encodings(&tree), [("M", "event=2")]);
}

#[test]
fn trailing_commas_in_json_are_read_as_absent_with_a_warning() {
    let tree = load_one(
        "json-comma",
        "[\n {\"EventName\": \"A\", \"EventCode\": \"0x1\",},\n {\"EventName\": \"B\"},\n]\n",
    );
    let found: Vec<String> = tree.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "warning: x86/model/cache.json:2: trailing comma, which JSON forbids (perf's reader rejects the file); read as absent",
            "warning: x86/model/cache.json:3: trailing comma, which JSON forbids (perf's reader rejects the file); read as absent",
        ]
    );
    assert_eq!(encodings(&tree), [("A", "event=1"), ("B", "event=0")]);
}

#[test]
fn bad_mapfile_rows_counter_entries_groups_and_stray_files() {
    let root = fixture(
        "files",
        &[
            (
                "x86/mapfile.csv",
                "header\nGenuineIntel-6-(,v1,bad,core\nGenuineIntel-6-8F,v1,model,core\nshort,row\n",
            ),
            ("x86/model/cache.json", r#"[{"EventName": "A"}]"#),
            (
                "x86/model/counter.json",
                "[{\"Unit\": \"core\", \"CountersNumFixed\": 3, \"CountersNumGeneric\": 8},\n {\"Unit\": \"CHA\", \"CountersNumFixed\": -1}]",
            ),
            ("x86/model/metricgroups.json", r#"{"G": "group g", "H": 7}"#),
            ("arm64/arm/a.json", "[]"),
            ("arm64/arm/cortex/b.json", "[]"),
        ],
    );
    let tree = load_tree(&root).unwrap();
    let found: Vec<String> = tree.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        found,
        [
            "error: arm64/arm/a.json: `arm64/arm` has model subdirectories, so this file belongs to no table (json files belong in a model directory: a leaf, or one holding only `sys/`); file ignored",
            "error: x86/mapfile.csv:2: cpuid `GenuineIntel-6-(` is not a valid regular expression: found open group without closing ')'; row skipped",
            "error: x86/mapfile.csv:4: expected 4 comma-separated fields (cpuid,version,directory,type), found 2; row skipped",
            "error: x86/model/counter.json:2: object #1: counter.json entry needs `Unit`, `CountersNumFixed` and `CountersNumGeneric` (non-negative integers); entry skipped",
            "warning: x86/model/metricgroups.json: the description of metric group `H` is a number, not a string; group description ignored",
        ]
    );
    let x86 = tree.arch("x86").unwrap();
    assert_eq!(x86.mapfile.iter().map(|r| r.dir.as_str()).collect::<Vec<_>>(), ["model"]);
    let model = x86.table("model").unwrap();
    assert_eq!(model.counters.len(), 1);
    assert_eq!(model.metric_groups.keys().collect::<Vec<_>>(), ["G"]);
    assert_eq!(tree.model_for_cpuid("x86", "GenuineIntel-6-8F-0").unwrap().events[0].name, "A");
}

#[test]
fn only_a_missing_root_is_fatal() {
    let missing =
        load_tree(std::path::Path::new("/nonexistent/pmu-events/arch")).unwrap_err().to_string();
    assert!(missing.starts_with("cannot read `/nonexistent/pmu-events/arch`"), "{missing}");
}

/// perf 7.2's Granite Rapids `tma_remote_cache` multiplies by `PEBS`, a name its expression
/// parser takes as an event and parse-events then finds nowhere (`perf stat -M` exits 1:
/// "Unable to find PMU or event on a PMU of 'PEBS'"). The metric is skipped, and the reason
/// says that perf refuses it too rather than only that tmetric could not resolve it.
#[test]
fn a_name_perf_parses_but_cannot_open_is_said_to_be_refused_by_perf_too() {
    let root = fixture(
        "pebs-placeholder",
        &[
            ("x86/mapfile.csv", MAPFILE),
            (
                "x86/model/cache.json",
                r#"[{"EventCode": "0xd3", "UMask": "0x2", "EventName": "MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM"}]"#,
            ),
            (
                "x86/model/metrics.json",
                r#"[{"MetricName": "tma_remote_mem", "MetricExpr": "MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM * PEBS"}]"#,
            ),
        ],
    );
    let tree = load_tree(&root).unwrap();
    let resolved = tmetric_pmu_events::resolve::resolve(model(&tree));
    assert!(!resolved.metrics[0].ok);
    let said: Vec<String> = resolved.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:#?}");
    assert!(
        said[0].contains(
            "`PEBS` is not a metric, an event of this model, a kernel event or a tool event; perf parses the formula but finds no PMU or event `PEBS` to open, so it refuses any -M selection that includes this metric"
        ),
        "{}",
        said[0]
    );
}
