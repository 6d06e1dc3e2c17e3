//! Helpers shared by the CLI tests: run the `tmetric` binary and read its output.

use std::process::{Command, Output};

/// Runs `tmetric` with `args`.
pub fn tmetric(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .args(args)
        .output()
        .expect("the tmetric binary runs")
}

/// Runs `script` with bash in `dir` with `TMPDIR` set to it, `$T` being the tmetric binary.
pub fn bash_in(dir: &std::path::Path, script: &str) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("T", env!("CARGO_BIN_EXE_tmetric"))
        .env("TMPDIR", dir)
        .current_dir(dir)
        .output()
        .expect("bash runs")
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

/// One run of `tmetric` for [`check_run`]: its arguments, standard input and environment.
#[derive(Default)]
pub struct Run<'a> {
    /// The arguments after `tmetric`.
    pub args: &'a [&'a str],
    /// Standard input (none: an empty one).
    pub stdin: Option<&'a str>,
    /// Variables added to the environment.
    pub env: &'a [(&'a str, &'a str)],
}

/// Runs `tmetric` with `args` and compares its exit code, standard output and standard error,
/// normalised ([`normalise`]), with the snapshot `expect` in `tests/snapshots/`. Returns the
/// raw output for checks of the values the normaliser masks.
pub fn check(args: &[&str], expect: &str) -> Output {
    check_run(&Run { args, ..Run::default() }, expect)
}

/// [`check`] with standard input and environment.
pub fn check_run(run: &Run<'_>, expect: &str) -> Output {
    let (output, text) = transcript(run);
    snapshot(expect, &text);
    output
}

/// Runs each of `runs` and compares their transcripts, joined by a blank line, with the one
/// snapshot `expect`: for a family of refusals that read best side by side.
pub fn check_all(runs: &[&[&str]], expect: &str) {
    let runs: Vec<Run<'_>> = runs.iter().map(|args| Run { args, ..Run::default() }).collect();
    check_runs(&runs, expect);
}

/// [`check_all`] with standard input and environment.
pub fn check_runs(runs: &[Run<'_>], expect: &str) {
    let texts: Vec<String> = runs.iter().map(|run| transcript(run).1).collect();
    snapshot(expect, &texts.join("\n"));
}

/// Compares `text` (transcripts) with `tests/snapshots/<expect>.snap`: the name says which
/// test file it belongs to (`cli_flags__null_run`), wherever the comparison is made.
pub fn snapshot(expect: &str, text: &str) {
    insta::with_settings!({ prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(expect, text);
    });
}

/// The run as a snapshot holds it: the command line, the exit code, then standard output and
/// standard error, each normalised. Several transcripts may be joined into one snapshot.
pub fn transcript(run: &Run<'_>) -> (Output, String) {
    use std::io::Write;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tmetric"));
    cmd.args(run.args).stdin(std::process::Stdio::piped());
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    for (key, value) in run.env {
        cmd.env(key, value);
    }
    let mut child = cmd.spawn().expect("the tmetric binary runs");
    let mut stdin = child.stdin.take().expect("a piped stdin");
    stdin.write_all(run.stdin.unwrap_or("").as_bytes()).expect("stdin written");
    drop(stdin);
    let output = child.wait_with_output().expect("tmetric ends");
    let code = output.status.code().map_or_else(|| "signal".to_string(), |c| c.to_string());
    let text = format!(
        "$ tmetric {}\nexit: {code}\n--- stdout\n{}--- stderr\n{}",
        unroot(&command_line(run.args)),
        normalise(&unroot(&stdout(&output))),
        normalise(&unroot(&stderr(&output))),
    );
    (output, text)
}

/// The arguments as the transcript's first line shows them: an argument that is empty or
/// holds a space or a control character is quoted with Rust's escapes, so that the snapshot
/// stays plain text and `-e ''` is not read as a missing argument.
fn command_line(args: &[&str]) -> String {
    let quoted = |a: &str| a.is_empty() || a.chars().any(|c| c.is_control() || c.is_whitespace());
    let shown: Vec<String> =
        args.iter().map(|a| if quoted(a) { format!("{a:?}") } else { a.to_string() }).collect();
    shown.join(" ")
}

/// Where this checkout is differs between machines, so the files the tests write under
/// cargo's test directory are shown as `$TMP/...` and those of the repository as `$ROOT/...`,
/// in the command line and in the messages alike: the file's own name, the line and column
/// after it stay part of the snapshot.
pub fn unroot(text: &str) -> String {
    text.replace(env!("CARGO_TARGET_TMPDIR"), "$TMP").replace(env!("CARGO_MANIFEST_DIR"), "$ROOT")
}

/// Masks what varies between runs, so a snapshot holds only what tmetric promises: every
/// decimal number (a time, a rate, a scaled count, a percentage: digits with a `.` between
/// digits, in any locale's grouping) becomes `<num>`, and the spaces that padded it to its
/// column become one, since its width varies; a difference's sign after `(` goes too.
/// The `#` bars of `--table` rows become `<bar>`, and its `#` headings, indented to the
/// numbers' width, one space. Integers stay: exit codes, counts of runs,
/// limits in messages and line numbers are part of the contract.
pub fn normalise(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let word_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if chars[i].is_ascii_digit() && !word_before {
            let mut end = i;
            while end < chars.len() && (chars[end].is_ascii_digit() || ",.".contains(chars[end])) {
                end += 1;
            }
            // A sentence's full stop or a list's comma is not part of the number.
            while end > i && !chars[end - 1].is_ascii_digit() {
                end -= 1;
            }
            let token: String = chars[i..end].iter().collect();
            let word_after =
                end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_');
            if token.contains('.') && !word_after {
                while out.ends_with("  ") {
                    out.pop();
                }
                // A difference's sign varies too: `(+0.00002)`, `(-0.00001)`.
                if out.ends_with("(+") || out.ends_with("(-") {
                    out.pop();
                }
                out.push_str("<num>");
            } else {
                out.push_str(&token);
            }
            i = end;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    // The bars of `--table` grow with each run's distance from the mean.
    out.lines()
        .map(|line| match line.strip_suffix('#') {
            Some(rest) if line.contains("(<num>) ") => {
                format!("{} <bar>", rest.trim_end_matches('#').trim_end())
            }
            // perf indents the table's `#` headings to the width of the numbers.
            _ if line.trim_start().starts_with("# ") && line.starts_with("  ") => {
                format!(" {}", line.trim_start())
            }
            _ => line.to_string(),
        })
        .collect::<Vec<String>>()
        .join("\n")
        + if out.ends_with('\n') { "\n" } else { "" }
}
