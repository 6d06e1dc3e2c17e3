//! The engine's integration tests (`accuracy`, `aggr_nr`, `bars`, `evaluated`, `event_terms`, `events`, `intervals`, `models`,
//! `profile`, `session`, `setup`, `sim`, `skew`, and the data-driven `schedule_vectors`,
//! `eval_vectors` and `builtin_vectors` over
//! `tests/vectors/`, whose files `vector_files` loads; `harness` measures metrics on simulated
//! machines against the truth, shared with the accuracy benchmark), in one binary: each
//! integration-test file would otherwise be compiled and linked on its own, and a clean
//! `cargo test` would link a dozen binaries.

mod accuracy;
mod aggr_nr;
mod bars;
mod builtin_vectors;
mod eval_vectors;
mod evaluated;
mod event_terms;
mod events;
mod harness;
mod intervals;
mod models;
mod profile;
mod schedule_vectors;
mod session;
mod setup;
mod sim;
mod skew;
mod vector_files;
