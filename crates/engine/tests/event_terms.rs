//! perf 7.x's generated server metrics whose events carry several terms, written unescaped
//! in the vendor JSON (`EVENT@filter_opc0=0x202,filter_loc,...@`, `EVENT@umask=0xFF,name=X@`):
//! on the simulated Skylake server each term reaches the `perf_event_attr` word and bits the
//! kernel's `format/` files give it, a later term overrides the event's own field, `name=`
//! names the row, and the metrics evaluate to the Python generator's formulas over the counts
//! the simulated kernel returned.

use tmetric_engine::{EvalInput, Evaluators, Plan, Select, Source, Strategy};
use tmetric_runtime::Snapshot;
use tmetric_sim::SimWorkload;

use crate::harness::{SimTree, count};

/// Linux's `skx_uncore_cha_formats_attr` (arch/x86/events/intel/uncore_snbep.c), written out
/// here rather than read from the simulated tree: the bits each CHA filter term sets.
fn skx_cha_filter(opc0: u64, opc1: u64, loc: bool, rem: bool, nm: bool, not_nm: bool) -> u64 {
    (opc0 << 41)
        | (opc1 << 51)
        | (u64::from(rem) << 32)
        | (u64::from(loc) << 33)
        | (u64::from(nm) << 36)
        | (u64::from(not_nm) << 37)
}

/// The row printed as `name` and its boxes' specs.
fn row(plan: &Plan, name: &str) -> (usize, Vec<usize>) {
    let r = plan
        .rows()
        .iter()
        .position(|row| row.name == name)
        .unwrap_or_else(|| panic!("no row `{name}` in {:?}", plan.rows()));
    let row = &plan.rows()[r];
    assert!(matches!(row.source, Source::Counter(_)), "{name}: {:?}", row.source);
    (r, row.boxes.iter().map(|b| b.spec).collect())
}

/// Sum of the counts of `specs` over every CPU they were read on, and how many readings.
fn summed(snapshot: &Snapshot, specs: &[usize]) -> (f64, usize) {
    let (mut value, mut n) = (0.0, 0);
    for &spec in specs {
        for c in snapshot.events[spec].iter().flatten() {
            assert_eq!(c.raw.running, c.raw.enabled, "nothing multiplexes here");
            value += c.raw.value as f64;
            n += 1;
        }
    }
    (value, n)
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs()
}

#[test]
fn several_unescaped_terms_reach_the_config_bits_their_formats_give() {
    tmetric_catalog::use_vintage(tmetric_catalog::vintage_for("7.2").expect("perf 7.2's"));
    let tree = SimTree::new("skylakex");
    let model = tree.model;
    let names =
        ["lpm_miss_lat_loc", "lpm_miss_lat_rem", "lpm_dir_lookup_hits", "lpm_dir_update_bw"];
    let metrics: Vec<usize> = names
        .iter()
        .map(|n| *model.metrics_named(n).first().unwrap_or_else(|| panic!("7.2 skylakex {n}")))
        .collect();
    let counted =
        count(&tree, "", &metrics, Strategy::Tmetric, &SimWorkload::default_workload(), 100, 100);
    let plan = &counted.plan;
    let cha = |filters: &str| {
        format!("UNC_CHA_TOR_{{}}.IA_MISS/filter_opc0=0x202,filter_opc1=0x25a,{filters}/")
    };
    let (loc, rem) =
        (cha("filter_loc,filter_nm,filter_not_nm"), cha("filter_rem,filter_nm,filter_not_nm"));
    // (row, config: the JSON event's code and umask unless a term overrides it, config1).
    let want = [
        (
            loc.replace("{}", "OCCUPANCY"),
            0x2136,
            skx_cha_filter(0x202, 0x25a, true, false, true, true),
        ),
        (
            loc.replace("{}", "INSERTS"),
            0x2135,
            skx_cha_filter(0x202, 0x25a, true, false, true, true),
        ),
        (
            rem.replace("{}", "OCCUPANCY"),
            0x2136,
            skx_cha_filter(0x202, 0x25a, false, true, true, true),
        ),
        (
            rem.replace("{}", "INSERTS"),
            0x2135,
            skx_cha_filter(0x202, 0x25a, false, true, true, true),
        ),
        // UNC_M2M_DIRECTORY_HIT.DIRTY_I is event 0x2a umask 0x1; `umask=0xFF` replaces it.
        ("UNC_M2M_DIRECTORY_HIT.ANY".to_string(), 0xff2a, 0),
        ("UNC_M2M_DIRECTORY_MISS.ANY".to_string(), 0xff2b, 0),
        // UNC_CHA_DIR_UPDATE.HA is event 0x54 umask 0x1; `umask=3` replaces it.
        ("UNC_CHA_DIR_UPDATE.ANY".to_string(), 0x0354, 0),
    ];
    for (name, config, config1) in &want {
        let (_, specs) = row(plan, name);
        assert_eq!(specs.len(), 2, "{name}: one counter per box");
        for &s in &specs {
            let attr = &plan.specs()[s].attr;
            assert_eq!(attr.config, *config, "{name}: config {:#x}", attr.config);
            assert_eq!(attr.config1, *config1, "{name}: config1 {:#x}", attr.config1);
        }
    }

    // Each metric counted alone (all four need more CHA counters than a box has), and
    // computed by hand from the counts the simulated kernel returned.
    let counts = |name: &str, inputs: &[&str]| {
        let m = *model.metrics_named(name).first().unwrap();
        let counted =
            count(&tree, "", &[m], Strategy::Tmetric, &SimWorkload::default_workload(), 100, 100);
        let plan = &counted.plan;
        let last = counted.reads.last().unwrap();
        let first = row(plan, inputs[0]).1[0];
        let seconds = last.events[first].as_ref().unwrap()[0].raw.enabled as f64 / 1e9;
        let got =
            plan.evaluate(&mut Evaluators::default(), &EvalInput::new(last, seconds))[0].value;
        let sums: Vec<(f64, usize)> =
            inputs.iter().map(|name| summed(last, &row(plan, name).1)).collect();
        assert!(sums.iter().all(|&(v, _)| v > 0.0), "{name}: {sums:?}");
        (got, seconds, sums)
    };
    for (metric, counters) in [("lpm_miss_lat_loc", &loc), ("lpm_miss_lat_rem", &rem)] {
        let (occupancy, inserts) =
            (counters.replace("{}", "OCCUPANCY"), counters.replace("{}", "INSERTS"));
        let (got, seconds, sums) = counts(metric, &["UNC_CHA_CLOCKTICKS", &occupancy, &inserts]);
        let [(ticks, _), (occupancy, _), (inserts, n)] = sums[..] else { unreachable!() };
        assert_eq!(n, 2, "two boxes read on the one package's reader CPU");
        // intel_metrics.py: interval_sec * 1e9 * occ / ((ticks / aggr_nr(ins)) * ins).
        let want = seconds * 1e9 * occupancy / (ticks / n as f64 * inserts);
        assert!(close(got, want), "{metric}: {got} for {want}");
    }
    let (got, _, sums) =
        counts("lpm_dir_lookup_hits", &["UNC_M2M_DIRECTORY_HIT.ANY", "UNC_M2M_DIRECTORY_MISS.ANY"]);
    let want = sums[0].0 / (sums[0].0 + sums[1].0);
    assert!(close(got, want), "lpm_dir_lookup_hits: {got} for {want}");
    let (got, seconds, sums) =
        counts("lpm_dir_update_bw", &["UNC_M2M_DIRECTORY_UPDATE.ANY", "UNC_CHA_DIR_UPDATE.ANY"]);
    let want = (sums[0].0 + sums[1].0) / seconds;
    assert!(close(got, want), "lpm_dir_update_bw: {got} for {want}");
    tmetric_catalog::clear_inferred_vintage();
}

/// A machine whose CHA has no `filter_opc0` format cannot count the events that need it: the
/// reason names the PMU and the term, and no other counter is opened in their place.
#[test]
fn a_term_the_pmu_has_no_format_for_is_refused_naming_it() {
    use tmetric_engine::Resolution;
    use tmetric_engine::plan::resolve_id;
    use tmetric_runtime::{Environment, Sysfs};

    tmetric_catalog::use_vintage(tmetric_catalog::vintage_for("7.2").expect("perf 7.2's"));
    let tree = SimTree::new("skylakex");
    let model = tree.model;
    let format = tree.sys.join("bus/event_source/devices/uncore_cha_0/format/filter_opc0");
    std::fs::remove_file(&format).expect("the simulated CHA has filter_opc0");
    let m = *model.metrics_named("lpm_miss_lat_loc").first().unwrap();
    let sysfs = Sysfs::new(&tree.sys);
    let env = Environment::default();
    let mut refused = 0;
    for &slot in model.metric(m).slots {
        let id = &model.ids[slot as usize];
        if !model.str(id.text).contains("filter_opc0") {
            continue;
        }
        match resolve_id(model, id, &sysfs, &env) {
            Resolution::Missing(why) => {
                assert!(why.contains("`uncore_cha_0` has no term `filter_opc0`"), "{why}");
                refused += 1;
            }
            other => panic!("{:?} resolved without its term: {other:?}", model.str(id.text)),
        }
    }
    assert_eq!(refused, 2, "occupancy and inserts");
    tmetric_catalog::clear_inferred_vintage();
}
