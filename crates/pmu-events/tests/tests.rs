//! The vendor loader's integration tests (`tolerant`, `vendor`, `vintages`), in one binary: each integration-test file would otherwise be compiled and
//! linked on its own, and a clean `cargo test` would link one binary per file.

mod tolerant;
mod vendor;
mod vintages;
