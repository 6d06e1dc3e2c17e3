//! The vendor loader's integration tests (`tolerant`, `vendor`, `vintages`), in one binary: each integration-test file would otherwise be compiled and
//! linked on its own (issue 13: a clean `cargo test` under two minutes).

mod tolerant;
mod vendor;
mod vintages;
