//! The expression crate's integration tests (`adhoc`, `expr`, `fuzz`), in one binary: each integration-test file would otherwise be compiled and
//! linked on its own, and a clean `cargo test` would link one binary per file.

mod adhoc;
mod expr;
mod fuzz;
mod perf_order;
