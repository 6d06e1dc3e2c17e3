//! The CLI's unit tests: each file tests one module of `crates/cli` through the `tmetric`
//! library target's `for_tests`, the only part of the CLI that is public to them (the other
//! modules' tests moved with their code to the crates that own it).

mod eval_from_perf;
mod record;
