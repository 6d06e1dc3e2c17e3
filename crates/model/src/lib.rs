//! Plain data shared by the generated catalogue, the compiler and the runtime, and perf's
//! expression semantics as functions. No dependencies, no I/O.
#![warn(missing_docs)]

pub mod catalog;
pub mod literal;
pub mod sem;

pub use catalog::{Evaluator, Model};
pub use literal::Literal;
pub use sem::{Fail, Needed};
