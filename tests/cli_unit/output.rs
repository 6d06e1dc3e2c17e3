//! Unit tests of `crates/cli/output.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric::output::*;

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
}
