//! Findings of the tolerant loader: what it ignored or dropped, each with its file and line.
//!
//! The loader never stops on one bad field, object, row or file. What perf reads leniently
//! (a trailing comma in `Counter`, numbers written as JSON numbers, `0X` hex prefixes, keys it does
//! not know) is accepted like perf; anything else is recorded here, and the event or metric is
//! kept whenever it still means what the vendor wrote.

use std::fmt;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Something named was dropped: an event, a metric, a file, a mapfile row, a counter entry.
    Error,
    /// A value or key was ignored, or read in a way perf does not; the object was kept.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One finding, at a place relative to the tree root so reports do not depend on the checkout.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Diagnostic {
    /// File relative to the tree root (`x86/haswell/uncore-other.json`), or a directory.
    pub file: String,
    /// 1-based line; 0 when the finding is about the whole file.
    pub line: usize,
    /// Which object, e.g. ``event `UNC_ARB_TRK_OCCUPANCY.ALL` ``; empty for file-level findings.
    pub object: String,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, then what the loader did (`...; event dropped`).
    pub message: String,
}

impl Diagnostic {
    /// `file:line`, or just `file` for whole-file findings.
    pub fn location(&self) -> String {
        if self.line == 0 { self.file.clone() } else { format!("{}:{}", self.file, self.line) }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: ", self.severity, self.location())?;
        if !self.object.is_empty() {
            write!(f, "{}: ", self.object)?;
        }
        f.write_str(&self.message)
    }
}
