//! Unit tests of `crates/cli/stat.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric_engine as engine;

    #[test]
    fn tsc_frequency_from_the_model_name() {
        let text = "model name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n";
        assert_eq!(engine::plan::tsc_from_model_name(text), 2.1e9);
        assert!(engine::plan::tsc_from_model_name("model name\t: AMD EPYC\n").is_nan());
    }
}
