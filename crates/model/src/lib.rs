//! Plain data shared by the generated catalogue, the compiler and the runtime, and perf's
//! expression semantics as functions. No I/O; the only dependency is `regex`, for cpuid rows.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod catalog;
pub mod cpuid;
pub mod generic;
pub mod literal;
pub mod sem;

pub use catalog::Model;
pub use literal::Literal;
pub use sem::{Fail, IdSet, Needed, PerfIds};
