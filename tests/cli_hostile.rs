//! Hostile and unlucky inputs and outputs through the binary, one test per finding of the
//! security round: every input file read by one bounded reader (`inputs`), output files that
//! never follow a link another user planted and write errors that are errors (`outputs`),
//! signals that end a run blocked on output (`signals`), values checked for range
//! (`values`), and memory that runs out under `ulimit -v` (`memory`).

use std::process::Output;

use crate::support::{bash_in, stderr};

mod inputs;
mod memory;
mod outputs;
mod signals;
mod values;

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("tmetric-hostile-").tempdir().expect("a scratch directory")
}

/// Asserts exit `code` and `needle` in standard error; returns standard error.
#[track_caller]
fn fails_with(out: &Output, code: i32, needle: &str) -> String {
    let text = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{text}");
    assert!(text.contains(needle), "expected `{needle}` in:\n{text}");
    text
}
