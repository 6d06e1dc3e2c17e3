//! Output files: a link or file another user planted in a shared sticky directory is never
//! written through, write failures are errors with exit 2 (a full file system, `ulimit -f`,
//! a closed standard output), and what was written before stays.

use super::{bash_in, fails_with, scratch};

/// With `fs.protected_symlinks` and `fs.protected_regular` off (this machine's setting, and
/// many containers'), `stat -o`, `report -o` and `rules -o` followed `nobody`'s link in a
/// sticky directory and root truncated the target; now each refuses, and the target keeps
/// its bytes. `record -o` moves such a link aside, as perf does.
#[test]
fn planted_links_and_files_in_sticky_directories_are_not_written() {
    let dir = scratch();
    let out = bash_in(
        dir.path(),
        "set -u; mkdir -m 1777 shared && echo keep > victim && chmod 600 victim \
         && ln -s \"$PWD/victim\" shared/out && chown -h nobody shared/out \
         && : > shared/planted && chown nobody shared/planted \
         && $T record -o rec -e task-clock true 2>/dev/null \
         && { $T stat -o shared/out -e task-clock true; echo \"stat $?\"; \
              $T report -i rec -o shared/out; echo \"report $?\"; \
              $T rules --alerts -o shared/out; echo \"rules $?\"; \
              $T stat -o shared/planted -e task-clock true; echo \"planted $?\"; \
              $T stat -o shared/mine -e task-clock true; echo \"mine $?\"; \
              $T stat -o /dev/stdout -e task-clock true 2>/dev/null | grep -c task-clock; }",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    for line in ["stat 2", "report 2", "rules 2", "planted 2", "mine 0"] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    assert_eq!(text.matches("a symbolic link owned by user").count(), 3, "{text}");
    assert!(text.contains("shared/planted is a file owned by user"), "{text}");
    assert!(text.lines().any(|l| l == "1"), "-o /dev/stdout must still work: {text}");
    assert_eq!(std::fs::read_to_string(dir.path().join("victim")).unwrap(), "keep\n");
}

/// `rules -o FILE` and `--dashboard -o FILE` exited 0 when the write failed and sent the rules
/// to standard error; now exit 2 naming the file, and nothing else printed.
#[test]
fn rules_that_cannot_be_written_exit_2() {
    let dir = scratch();
    for args in [
        "rules --alerts -o /dev/full",
        "rules --dashboard -M TopdownL1 --model x86/skylake -o /dev/full",
        "rules -M TopdownL1 --model x86/skylake --events -o /dev/full",
    ] {
        let out = bash_in(dir.path(), &format!("$T {args}"));
        let text = fails_with(&out, 2, "cannot write /dev/full");
        assert!(out.stdout.is_empty(), "{args}");
        assert!(!text.contains("groups:") && !text.contains("\"panels\""), "{args}: {text}");
    }
}

/// `ulimit -f` killed `stat -o` and `record` with SIGXFSZ (exit 153, the file cut mid-line);
/// now the write error is said, the counts go to standard error, and the exit is 2.
#[test]
fn a_file_size_limit_is_a_write_error() {
    let dir = scratch();
    let out = bash_in(dir.path(), "ulimit -f 2; $T -o big -e task-clock -I 10 -a sleep 0.5");
    let text = fails_with(&out, 2, "File too large");
    assert!(text.contains("cannot write the counts to big"), "{text}");
    let out = bash_in(dir.path(), "ulimit -f 2; $T record -o rec -e task-clock -I 10 -a sleep 0.5");
    let text = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("File too large"), "{text}");
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A standard output closed at start (`>&-`) took every line silently (Rust's runtime puts
/// `/dev/null` there) and exited 0; now it is a write error.
#[test]
fn a_closed_standard_output_is_an_error() {
    let dir = scratch();
    let out = bash_in(dir.path(), "$T list models >&-");
    fails_with(&out, 2, "cannot write to standard output: it was closed when tmetric started");
}
