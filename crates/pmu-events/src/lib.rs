//! Loads Linux perf's vendor PMU JSON tree (`pmu-events/arch`) into plain data.
//!
//! This crate reads files and applies jevents.py's rules (Linux 6.12): which directories are
//! tables, `ArchStdEvent` expansion, the exact perf event string of each event, `Unit` to PMU names,
//! `ScaleUnit` parsing and cpuid matching. It does not parse metric expressions (that is
//! `tmetric-expr`); `MetricExpr` and `MetricThreshold` stay raw text with their file and line.
//!
//! Loading is tolerant: only a missing tree root is an error. A bad file, object, value or row is
//! reported in [`Tree::diagnostics`] with its file and line, and what still makes sense is kept.
//!
//! `arch/common/` is not an architecture: it holds perf's common table (perf 7.x) and is loaded
//! into [`Tree::common`], which applies to every model; [`load_vintage`] adds tmetric's own generic
//! metrics (`pmu-events/generic/`) to it. Other vintages are stored as deltas ([`vintage`]).
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]

mod cpuid;
mod diag;
mod error;
mod event;
mod load;
pub mod oracle;
pub mod par;
mod raw;
pub mod resolve;
mod scan;
mod tree;
mod unit;
pub mod vintage;

pub use cpuid::{MapRow, compat_matches, cpuid_matches};
pub use diag::{Diagnostic, Severity};
pub use error::{ObjectError, VendorError};
pub use event::{AggrMode, Constraint, CounterField, Event, Location, Metric};
pub use load::{COMMON_DIR, GENERIC_DIR, load_tree, load_vintage};
pub use tree::{Arch, CounterInfo, Table, Tree};
pub use unit::{ScaleUnit, unit_to_pmu};
