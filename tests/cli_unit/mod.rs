//! The CLI's unit tests: each file tests one module of `crates/cli` through the `tmetric`
//! library target.

mod eval_from_perf;
mod record;
