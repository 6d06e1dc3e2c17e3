//! Unit tests of `crates/cli/report.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric::report::*;

    #[test]
    fn perf_cpuid_spelling() {
        assert_eq!(perf_cpuid("GenuineIntel,6,167,8"), "GenuineIntel-6-A7-8");
        assert_eq!(perf_cpuid("0x00000000410fd0c0"), "0x00000000410fd0c0");
    }

    #[test]
    fn names_match_without_the_core_pmu() {
        assert_eq!(normal("cpu/TOPDOWN.SLOTS/"), "topdown.slots");
        assert_eq!(normal("cpu_core/topdown-retiring/"), "topdown-retiring");
        assert_eq!(normal("msr/tsc/"), "msr/tsc/");
    }
}
