//! Unit tests of `crates/cli/list.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric::list::*;
    use tmetric_catalog::catalog::CounterMask;

    #[test]
    fn counter_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranges(&[0, 1, 3]), "0,1,3");
        assert_eq!(ranges(&[1, 2, 3, 4, 5, 6, 7]), "1-7");
        assert_eq!(counters_text(CounterMask { generic: 0, fixed: 2 }), "fixed 1");
        assert_eq!(counters_text(CounterMask::ANY), "any");
        assert_eq!(counters_text(CounterMask { generic: 0xf, fixed: 0 }), "0-3");
    }
}
