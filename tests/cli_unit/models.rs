//! Unit tests of `crates/cli/models.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric::models::*;

    #[test]
    fn unknown_models_list_near_names() {
        let err = find_model("x86/nonexist").unwrap_err().to_string();
        assert!(
            err.starts_with("unknown model `x86/nonexist`; the nearest names are `x86/"),
            "{err}"
        );
        let err = find_model("x86/skylakx").unwrap_err().to_string();
        assert!(err.contains("`x86/skylake`") || err.contains("`x86/skylakex`"), "{err}");
    }
}
