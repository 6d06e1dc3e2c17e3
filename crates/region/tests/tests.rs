//! The region API's integration tests (`real`, `sim`), in one binary: each integration-test file would otherwise be compiled and
//! linked on its own, and a clean `cargo test` would link one binary per file.

mod real;
mod sim;
