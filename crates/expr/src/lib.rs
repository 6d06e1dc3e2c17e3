//! perf's metric expression language: grammar, tree, needed-events pass and interpreter;
//! [`adhoc`] evaluates a user's own formula over values given by name (`eval --expr`).
//!
//! Pure: no I/O, no knowledge of JSON files or PMUs. Identifiers stay strings here; the
//! `vendor` crate decides what each one names.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adhoc;
pub mod ast;
pub mod error;
pub mod eval;
pub mod events;
mod parse;

pub use ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident, Span};
pub use error::{ParseError, ParseErrorKind, caret_lines};
pub use eval::{Env, EvalError, eval};
pub use events::{Facts, needed, needed_in};
pub use parse::{MAX_DEPTH, MAX_NESTING, normalize, parse};
pub use tmetric_model::{Fail, IdSet, Literal, Needed, PerfIds, sem};
