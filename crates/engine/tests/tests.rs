//! The engine's integration tests (`accuracy`, `evaluated`, `events`, `models`, `profile`,
//! `session`, `sim`, `skew`, and the data-driven `schedule_vectors` and `eval_vectors` over
//! `tests/vectors/`, whose files `vector_files` loads; `harness` measures metrics on simulated
//! machines against the truth, shared with the accuracy benchmark), in one binary: each
//! integration-test file would otherwise be compiled and linked on its own (issue 13: a clean
//! `cargo test` under two minutes).

mod accuracy;
mod eval_vectors;
mod evaluated;
mod events;
mod harness;
mod models;
mod profile;
mod schedule_vectors;
mod session;
mod sim;
mod skew;
mod vector_files;
