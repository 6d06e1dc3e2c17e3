//! Helpers shared by the CLI tests: run the `tmetric` binary and read its output.

use std::process::{Command, Output};

/// Runs `tmetric` with `args`.
pub fn tmetric(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(args)
        .output()
        .expect("the tmetric binary runs")
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("stderr is UTF-8")
}

/// Runs `tmetric` and asserts it succeeded.
pub fn ok(args: &[&str]) -> Output {
    let output = tmetric(args);
    assert!(output.status.success(), "tmetric {args:?} failed: {}", stderr(&output));
    output
}

/// Runs `tmetric`, asserts it succeeded, and returns its standard output.
pub fn ok_stdout(args: &[&str]) -> String {
    stdout(&ok(args))
}
