//! The simulator's integration tests: `events` resolves `-e` lists on simulated machines'
//! trees (perf 6.12's grammar, hybrid expansion, regrouping), `kernel` checks the simulated kernel against the
//! kernel's rules and its trees against the runtime's readers (and their snapshots),
//! `machines` the machine files and their errors, `sampling` its sampling events and rings,
//! `truth` the workloads and what the derivation makes of them. One binary: each
//! would otherwise be compiled and linked on its own.

mod events;
mod kernel;
mod machines;
mod sampling;
mod truth;
