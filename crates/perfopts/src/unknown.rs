//! What an option tmetric does not take is answered with, instead of clap's usage line
//! (which printed `Usage: tmetric stat --per-cluster [COMMAND]...` and misled): perf 6.12's
//! `perf stat` options that tmetric leaves out, each with what it does in perf and what to
//! use instead, and for anything else the option, the closest one and where the list is.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// perf 6.12's `perf stat` options tmetric does not take: the spellings, what perf does
/// with it (said after "perf's"), and what to do instead.
const NOT_TAKEN: &[(&[&str], &str, &str)] = &[
    (
        &["--bpf-counters"],
        "counters shared between perf sessions through BPF programs, `bpf_counter.c`",
        "tmetric opens counters of its own, as perf does without the option; to let many readers share one set of counters, run `tmetric serve` and read its /metrics or /json",
    ),
    (
        &["--bpf-attr-map"],
        "pinned map of the BPF programs of --bpf-counters",
        "tmetric opens counters of its own, as perf does without --bpf-counters",
    ),
    (
        &["-b", "--bpf-prog"],
        "counting a loaded BPF program's runs by its id",
        "count the program's process with -p PID, or its CPUs with -a or -C",
    ),
    (
        &["--pfm-events"],
        "libpfm4 event names",
        "give the event to -e by its perf or vendor name (`tmetric list events` lists this machine's)",
    ),
    (
        &["--percore-show-thread"],
        "showing each thread its core's sum of `percore` events",
        "use --per-core for per-core sums",
    ),
    (
        &["--hybrid-merge"],
        "merging the lines of a hybrid machine's core PMUs",
        "the lines stay per core type (`cpu_core`, `cpu_atom`), as in perf without the option",
    ),
    (
        &["--iostat"],
        "I/O bandwidth per PCIe root port from Intel Xeon's uncore IIO PMUs",
        "count the IIO events themselves with -e (`tmetric list events` lists them on a Xeon that has them)",
    ),
];

/// perf's option `flag` tmetric does not take: what perf does with it and what to use
/// instead.
fn not_taken(flag: &str) -> Option<(&'static str, &'static str)> {
    NOT_TAKEN
        .iter()
        .find(|(names, _, _)| names.contains(&flag))
        .map(|&(_, what, instead)| (what, instead))
}

/// The line (for standard error, as it is) for a clap error about an option `tmetric
/// SUBCOMMAND` does not know (`subcommand` as typed, `stat` for perf's form); `None` for
/// every other error, which clap words itself.
pub fn explain(err: &clap::Error, subcommand: &str) -> Option<String> {
    if err.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else { return None };
    let flag = arg.split_once('=').map_or(arg.as_str(), |(f, _)| f);
    if matches!(subcommand, "stat" | "record")
        && let Some((what, instead)) = not_taken(flag)
    {
        return Some(format!("tmetric does not support `{flag}` (perf's {what}): {instead}"));
    }
    let similar = match err.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(s)) => format!("; the closest is `{s}`"),
        Some(ContextValue::Strings(s)) if !s.is_empty() => format!("; the closest is `{}`", s[0]),
        _ => String::new(),
    };
    let what = if flag.starts_with('-') { "option" } else { "argument" };
    let after = if matches!(subcommand, "stat" | "record") {
        "; a command with options of its own goes after `--`"
    } else {
        ""
    };
    Some(format!(
        "tmetric: unknown {what} `{arg}` for `tmetric {subcommand}`{similar} (`tmetric {subcommand} --help` lists the options{after})"
    ))
}
