//! Unit tests of `crates/cli/eval/from_perf/builtin.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric::eval::from_perf::builtin::*;
    use tmetric_engine::builtin::BUILTINS;
    use tmetric_perfstat::PrintedMetric;

    fn printed(text: &str, label: &str) -> PrintedMetric {
        let log = format!(
            " Performance counter stats for 'x':\n\n         1,000      instructions   # {text} {label}\n\n       1.0 seconds time elapsed\n"
        );
        let log = tmetric_perfstat::parse(&log, "t").unwrap();
        log.blocks[0].rows[0].metrics[0].clone()
    }

    #[test]
    fn perf_labels_are_matched_exactly_after_the_value() {
        let m = printed("   45.0%", "Retiring");
        assert_eq!(printed_as(&m, "Retiring"), Some(("45.0".to_string(), Some(45.0))));
        assert_eq!(printed_as(&m, "retiring"), None);
        let m = printed("    1.50 ", " insn per cycle");
        assert_eq!(printed_as(&m, "insn per cycle"), Some(("1.50".to_string(), Some(1.5))));
        let m = printed("  12.345 %", "of all cache refs");
        assert_eq!(printed_as(&m, "of all cache refs"), Some(("12.345".to_string(), Some(12.345))));
        let m = printed("    2.50%", "of all branches");
        assert_eq!(printed_as(&m, "of all branches"), Some(("2.50".to_string(), Some(2.5))));
    }

    #[test]
    fn m_items_split_off_the_builtins() {
        let (b, rest) = select(&["insn_per_cycle", "tma_retiring"]);
        assert_eq!(b.selected.len(), 1);
        assert_eq!(rest, vec!["tma_retiring"]);
        let (b, rest) = select(&["builtin"]);
        assert_eq!(b.selected.len(), BUILTINS.len());
        assert!(rest.is_empty());
        let (b, _) = select(&[]);
        assert_eq!(b.selected.len(), BUILTINS.len());
        let (b, rest) = select(&["tma_retiring"]);
        assert!(b.selected.is_empty());
        assert_eq!(rest, vec!["tma_retiring"]);
    }
}
