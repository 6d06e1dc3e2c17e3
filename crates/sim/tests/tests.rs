//! The simulator's integration tests: `kernel` checks the simulated kernel against the
//! kernel's rules and its trees against the runtime's readers, `sampling` its sampling events
//! and rings, `truth` the workloads and what the derivation makes of them. One binary: each
//! would otherwise be compiled and linked on its own.

mod kernel;
mod sampling;
mod truth;
