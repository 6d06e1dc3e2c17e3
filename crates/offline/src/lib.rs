//! Offline evaluation: a model's metrics over counts that tmetric did not measure itself, a
//! `perf stat` log (`eval --from-perf`) or a counts file (`eval --counts`, `describe --counts`),
//! each value explained and, for logs, checked against what perf printed. It reads input
//! already parsed (`tmetric_perfstat`, serde) and evaluates through the engine's evaluator;
//! nothing here prints or opens a counter.
//!
//! * [`perflog`]: metrics over a `perf stat` log, checked against what perf printed; the
//!   log's CPU model and literals inferred.
//! * [`counts`]: the counts file of `eval --counts`, its keys as a model's inputs, and the
//!   metrics over it.
//!
//! A recording (`tmetric report`) is rebuilt into a plan by `tmetric_engine::replay`, beside
//! the plan it constructs.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod counts;
pub mod perflog;
