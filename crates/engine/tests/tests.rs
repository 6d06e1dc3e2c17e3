//! The engine's integration tests (`events`, `perflog`, `profile`, `sim`), in one binary: each integration-test file would otherwise be compiled and
//! linked on its own (issue 13: a clean `cargo test` under two minutes).

mod events;
mod perflog;
mod profile;
mod sim;
