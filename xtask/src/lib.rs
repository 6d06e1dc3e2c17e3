//! The xtask library: code generation (`regen`), vendor import (`import`), the loader's
//! diagnostics report and the vendor-change summary, shared by the `xtask` binary and the
//! `xtask-bench` binary so that each module is compiled once.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
pub mod changes;
pub mod diagnostics;
pub mod import;
pub mod regen;
