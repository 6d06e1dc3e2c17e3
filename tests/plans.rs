//! `tmetric plan` snapshots: groups, counters and placements for the selections the runtime
//! issue names, and checks that hold for every plan (never worse than perf's strategy, never
//! below the lower bound, slots leading every group with topdown events).

use tmetric_engine::Select;

use crate::support::ok_stdout;

/// A metric and every metric below it in the TMA tree (`<name>_group` members, recursively).
fn subtree(model: &str, root: &str) -> Vec<String> {
    // perf 6.12's tree, which the snapshots plan.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let model = tmetric_catalog::model(model).expect("model");
    let mut names = vec![root.to_string()];
    let mut i = 0;
    while i < names.len() {
        let group = format!("{}_group", names[i]);
        for m in model.select(&group) {
            let name = model.str(model.metric(m).name).to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        i += 1;
    }
    names
}

/// `plan` with perf 6.12's tables: the snapshots are its metrics' plans.
fn plan(args: &[&str]) -> String {
    let mut all = vec!["--perf-version", "6.12", "plan"];
    all.extend_from_slice(args);
    ok_stdout(&all)
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["plan", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok_stdout(&all)).expect("plan --json is JSON")
}

macro_rules! snap {
    ($name:ident, $($arg:expr),+) => {
        #[test]
        fn $name() {
            let text = plan(&[$($arg),+]);
            insta::assert_snapshot!(stringify!($name), text);
        }
    };
}

snap!(plan_spr_topdown_l1, "-M", "TopdownL1", "--model", "sapphirerapids", "--nmi-watchdog", "off");
snap!(plan_spr_topdown_l2, "-M", "TopdownL2", "--model", "sapphirerapids", "--nmi-watchdog", "off");
snap!(plan_spr_topdown_l3, "-M", "TopdownL3", "--model", "sapphirerapids", "--nmi-watchdog", "off");
snap!(plan_spr_backend_bound_group, "-M", "tma_backend_bound_group", "--model", "sapphirerapids");
snap!(plan_icl_topdown_l2, "-M", "TopdownL2", "--model", "icelake");
snap!(
    plan_skx_topdown_l1_smt_on,
    "-M",
    "TopdownL1",
    "--model",
    "skylakex",
    "--smt",
    "on",
    "--nmi-watchdog",
    "off"
);
snap!(
    plan_skx_topdown_l1_smt_off,
    "-M",
    "TopdownL1",
    "--model",
    "skylakex",
    "--smt",
    "off",
    "--nmi-watchdog",
    "off"
);
snap!(plan_mtl_dtlb_store, "-M", "tma_dtlb_store", "--model", "meteorlake");
snap!(plan_zen4_pipeline_l1, "-M", "PipelineL1", "--model", "amdzen4");
snap!(plan_zen4_pipeline_l2, "-M", "PipelineL2", "--model", "amdzen4");
snap!(plan_n2_topdown_l1, "-M", "TopdownL1", "--model", "neoverse-n2-v2");

#[test]
fn plan_spr_backend_bound_subtree() {
    let names = subtree("sapphirerapids", "tma_backend_bound").join(",");
    assert!(names.split(',').count() > 20, "{names}");
    let text = plan(&["-M", &names, "--model", "sapphirerapids"]);
    insta::assert_snapshot!("plan_spr_backend_bound_subtree", text);
}

/// Invariants of every plan: tmetric never needs more slices than perf's strategy, never
/// fewer than the lower bound; each group with topdown metric events is led by `slots`.
#[test]
fn plans_keep_the_kernel_rules() {
    let cases: &[&[&str]] = &[
        &["-M", "TopdownL1,TopdownL2,TopdownL3", "--model", "sapphirerapids"],
        &["-M", "TopdownL4", "--model", "sapphirerapids", "--nmi-watchdog", "off"],
        &["-M", "TopdownL2", "--model", "alderlake"],
        &["-M", "tma_dtlb_store", "--model", "meteorlake"],
        &["-M", "TopdownL1", "--model", "skylakex"],
        &["-M", "PipelineL2", "--model", "amdzen4"],
    ];
    // perf 6.12's tables and the default (the newest vintage's, whose formulas leave `slots`
    // out for the planner to add).
    let pinned: Vec<Vec<&str>> =
        cases.iter().map(|args| [&["--perf-version", "6.12"][..], args].concat()).collect();
    for args in cases.iter().copied().chain(pinned.iter().map(Vec::as_slice)) {
        let doc = json(args);
        let slices = &doc["slices"];
        let (t, p, l) = (
            slices["tmetric"].as_u64().unwrap(),
            slices["perf"].as_u64().unwrap(),
            slices["lower_bound"].as_u64().unwrap(),
        );
        assert!(t <= p, "{args:?}: tmetric {t} > perf {p}");
        assert!(t >= l, "{args:?}: tmetric {t} < lower bound {l}");
        let events = doc["events"].as_array().unwrap();
        for group in doc["schedule"]["groups"].as_array().unwrap() {
            let members: Vec<usize> = group["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_u64().unwrap() as usize)
                .collect();
            let has_metric = members.iter().any(|&e| events[e]["demand"]["topdown_metric"] == true);
            if has_metric {
                assert_eq!(events[members[0]]["demand"]["slots"], true, "{args:?}: {group}");
            }
            // Each member has a counter, and no two share one.
            let slots: Vec<String> =
                group["slots"].as_array().unwrap().iter().map(|s| s.to_string()).collect();
            let mut counters: Vec<&String> =
                slots.iter().filter(|s| !s.contains("metric") && !s.contains("none")).collect();
            let before = counters.len();
            counters.sort();
            counters.dedup();
            assert_eq!(before, counters.len(), "{args:?}: two members on one counter: {slots:?}");
        }
    }
}

/// plan's misses, worded as `stat`, `report` and `eval` word them (engine::select::Miss) with
/// plan's own next step, and exit status 2; the common metrics are looked up first, as `stat`
/// does, and need no hardware counter.
#[test]
fn plan_errors_name_the_problem() {
    crate::support::check_all(
        &[
            &[
                "--perf-version",
                "6.12",
                "plan",
                "-M",
                "no_such_metric",
                "--model",
                "sapphirerapids",
            ],
            &["--perf-version", "6.12", "plan", "-M", "PipelineL1", "--model", "sapphirerapids"],
            &["--perf-version", "6.12", "plan", "-M", "tma_retirng", "--pmu-sim", "icelake"],
            &["--perf-version", "6.12", "plan", "-M", "cpus_utilized", "--model", "sapphirerapids"],
            &["--perf-version", "6.12", "plan", "-M", "TopdownL1", "--model", "nonexist"],
        ],
        "plans__errors",
    );
}
