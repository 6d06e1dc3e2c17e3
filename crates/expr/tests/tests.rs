//! The expression crate's integration tests (`adhoc`, `expr`, `fuzz`), in one binary: each integration-test file would otherwise be compiled and
//! linked on its own (issue 13: a clean `cargo test` under two minutes).

mod adhoc;
mod expr;
mod fuzz;
mod perf_order;
