//! `tmetric_print::names`: the command line's name filter and the note's name summary.

use tmetric_engine::list::core_pmu_name;
use tmetric_print::names::NameFilter;
use tmetric_text::names_summary as summary;

#[test]
fn filters() {
    let glob = NameFilter::new("tma_*");
    assert!(glob.matches("TMA_frontend_bound"));
    assert!(!glob.matches("x_tma_frontend_bound"));
    let glob = NameFilter::new("*bound?");
    assert!(glob.matches("tma_boundx"));
    assert!(!glob.matches("tma_bound"));
    let glob = NameFilter::new("a*b*c");
    assert!(glob.matches("aXbYbZc"));
    assert!(!glob.matches("aXbYbZ"));
    let sub = NameFilter::new("FRONTEND");
    assert!(sub.matches("tma_frontend_bound"));
    assert!(!sub.matches("tma_backend_bound"));
}

#[test]
fn core_pmus_are_spelled_as_perf_spells_them() {
    assert_eq!(core_pmu_name("x86"), "cpu");
    assert_eq!(core_pmu_name("arm64"), "armv8_pmuv3");
    assert_eq!(core_pmu_name("s390"), "cpum_cf");
}

#[test]
fn long_lists_are_cut_after_eight_names() {
    let names: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(summary(&names[..2]), "t0, t1");
    assert_eq!(summary(&names[..8]), "t0, t1, t2, t3, t4, t5, t6, t7");
    assert_eq!(summary(&names), "t0, t1, t2, t3, t4, t5, t6, t7 and 2 more");
}
