//! `tmetric latency`: per-group latency statistics from ftrace text (XSAVES/XRSTORS latency tracepoints).
//!
//! A kernel patch adds the `x86_fpu_latency_xsave` and `x86_fpu_latency_xrstor` tracepoints, which
//! log `latency:N RFBM:0x.. XINUSE:0x..` for every XSAVES/XRSTORS, and a bash+sqlite3 script
//! that prints, per (event, RFBM, XINUSE), the count, min, max, average and the average of the
//! lowest 97%. This crate computes the same table in one streaming pass and generalises it to
//! any tracepoint that logs `key:value` (or `key=value`) fields.
//!
//! # Input
//!
//! Lines of `trace_pipe`, of the `trace` file (its `#` header is skipped) or of
//! `trace-cmd report` (its `cpus=`/`version =` preamble is skipped), with or without the
//! irq-info flags column. An event line is recognised by `TIMESTAMP: EVENT: PAYLOAD`, where the
//! timestamp is the first digits-and-one-dot token preceded by whitespace; what comes before it
//! (task, pid, CPU, flags) is ignored. `--event REGEX` selects events by name (unanchored
//! match; default `^x86_fpu_latency_(xsave|xrstor)$`), `--value FIELD` names the sample
//! (default `latency`) and `--group-by FIELD,...` the grouping after the event name (default
//! `RFBM,XINUSE`). Integer group values (decimal or `0x` hex) group and sort by value and print
//! in hex when written in hex; other values group as text.
//!
//! # Statistics (per group, after excluding noise)
//!
//! - `CNT`, `min`, `max`.
//! - `avg`: the mean rounded half up, `floor(mean + 0.5)`, as the seed's `bc` rounding does.
//! - `avg(97%)`: the mean of the lowest `floor(0.97 n + 0.5)` samples after sorting
//!   ascending (the seed's bc expression), rounded the same way.
//! - `p50`, `p99`: nearest rank, the sample at 1-based rank `ceil(p/100 · n)` of the sorted
//!   samples.
//!
//! All arithmetic is on integers, so no group is lost or misprinted whatever its values (the
//! seed dropped any group whose average reached 1e15).
//!
//! # Enable-time noise
//!
//! The probe starts with `tc = -1` and logs `trace_clock() - tc`; when the tracepoint is enabled
//! between its two checks, the logged value is `trace_clock() + 1`, i.e. the clock itself
//! (nanoseconds since boot). A sample is taken for this noise when its line's timestamp is in
//! seconds (`SECS.FRACTION`, the nanosecond trace clocks) and the value is within
//! [`NOISE_TOLERANCE_NS`] (10 ms) of that timestamp in nanoseconds. Such samples are left out of
//! the statistics and listed (line, event, group, value) under the table; `--keep-noise` keeps
//! them. Lines with a counter timestamp (no dot: `x86-tsc`, `counter` clocks) are never
//! classified as noise.
//!
//! # Problems in the input
//!
//! Nothing is dropped silently. A selected event line without the value or a group field, or
//! with a value that is not an unsigned 64-bit integer (e.g. negative), and any line that is
//! neither an event, a header, a preamble nor a lost-events marker, is counted as malformed;
//! the first few are quoted with their line numbers. `CPU:N [LOST M EVENTS]` markers are
//! summed into a warning.
//!
//! # Output
//!
//! The default table goes to stdout with the notes under it. With `--csv` or `--json` stdout
//! carries only the data (JSON also holds the notes as fields) and the notes go to stderr.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]

mod analyze;
mod error;
mod parse;
mod render;
mod stats;
pub mod synth;

use std::io::Write;
use std::path::Path;

use anyhow::Context;

pub use analyze::{
    Analyzer, DEFAULT_EVENT_REGEX, DEFAULT_GROUP_BY, DEFAULT_VALUE_FIELD, GroupValue, LatencyRow,
    MAX_LINE, Malformed, NOISE_TOLERANCE_NS, NoiseSample, Options, Report, analyze, analyze_path,
};
pub use error::LatencyError;
pub use render::{headers, write_csv, write_json, write_notes, write_table};
pub use stats::Stats;

const HELP_DETAILS: &str = "\
Input: trace_pipe, the trace file or `trace-cmd report` text, with or without the flags column.

Statistics per group: CNT, min, max; avg = mean rounded half up; avg(97%) = mean of the lowest
round(0.97 n) samples (n*0.97 + 0.5, truncated); p50/p99 = nearest rank (sample at rank
ceil(p/100 * n) of the sorted samples).

Noise: the probe logs trace_clock() - (-1) = trace_clock() + 1 when the tracepoint is enabled
mid-measurement. A sample whose value is within 10 ms (10,000,000 ns) of its line's timestamp
converted to ns (timestamps printed as SECS.FRACTION only) is excluded and listed under the table
with its line number; --keep-noise keeps it.

Malformed lines (selected events missing a field or with a non-integer value, and lines that are
not trace events) are counted and the first few quoted with line numbers. With --csv/--json the
notes go to stderr so stdout stays machine-readable; --json also carries them.";

/// Latency statistics from ftrace text (XSAVES/XRSTORS tracepoints by default).
#[derive(Debug, clap::Args)]
#[command(after_long_help = HELP_DETAILS)]
pub struct LatencyArgs {
    /// Trace text to read (trace_pipe, the trace file or `trace-cmd report` output), or `-` for standard input.
    #[arg(default_value = "-", value_name = "FILE")]
    pub file: String,
    /// Events to analyse: a regex matched against the event name (add ^ and $ for an exact name); classes such as \w and [[:alpha:]] are ASCII only.
    #[arg(long, value_name = "REGEX", default_value = DEFAULT_EVENT_REGEX)]
    pub event: String,
    /// Field holding the sample, written `FIELD:N` or `FIELD=N` in the event text.
    #[arg(long, value_name = "FIELD", default_value = DEFAULT_VALUE_FIELD)]
    pub value: String,
    /// Fields to group by after the event name; `--group-by ''` groups by event only.
    #[arg(long, value_name = "FIELD,...", value_delimiter = ',', default_value = "RFBM,XINUSE")]
    pub group_by: Vec<String>,
    /// Print CSV instead of the table (notes go to stderr).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Print one JSON document with the groups and all notes.
    #[arg(long)]
    pub json: bool,
    /// Keep enable-time noise samples (value within 10 ms of the line's timestamp) in the statistics.
    #[arg(long)]
    pub keep_noise: bool,
    /// How many malformed lines to quote; all are counted.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub show_malformed: usize,
}

impl LatencyArgs {
    /// The library options these flags ask for.
    pub fn options(&self) -> Result<Options, LatencyError> {
        // `--group-by ''` arrives as one empty name: it means no group fields at all.
        let group_by: &[String] =
            if self.group_by.iter().all(String::is_empty) { &[] } else { &self.group_by };
        let mut opts = Options::new(&self.event, &self.value, group_by)?;
        opts.detect_noise = !self.keep_noise;
        opts.malformed_listed = self.show_malformed;
        Ok(opts)
    }
}

/// Runs `tmetric latency` and writes its report to `out`; notes for `--csv`/`--json` go to stderr.
pub fn run(args: &LatencyArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    run_with(args, out, &mut std::io::stderr().lock())
}

/// [`run`] with the notes stream chosen by the caller.
pub fn run_with(
    args: &LatencyArgs,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> anyhow::Result<()> {
    let opts = args.options()?;
    if args.file == "-" && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Reading a terminal would otherwise just wait, silently.
        let _ = writeln!(
            notes,
            "tmetric latency: reading ftrace text from the terminal; give a FILE, or pipe a trace in \
             (`tmetric latency < /sys/kernel/tracing/trace`); Ctrl-D ends the input"
        );
    }
    let report = analyze_path(&args.file, opts)?;
    let result = if args.json {
        write_json(&report, out).and_then(|()| write_notes(&report, notes))
    } else if args.csv {
        write_csv(&report, out).and_then(|()| write_notes(&report, notes))
    } else {
        write_table(&report, out)
            .and_then(|()| writeln!(out))
            .and_then(|()| write_notes(&report, out))
    };
    result.context("cannot write the latency report")?;
    if report.rows.is_empty() {
        // Nothing could be read: not a success, and the usual reason is the kernel.
        let why = if args.event == DEFAULT_EVENT_REGEX {
            format!("; {}", tracepoint_advice(&TRACEFS_ROOTS.map(Path::new)))
        } else {
            String::new()
        };
        anyhow::bail!("latency: no `{}` samples in {}{why}", args.value, report.source);
    }
    Ok(())
}

/// Where tracefs is mounted (the same places `perf` and `tmetric stat` look).
const TRACEFS_ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The XSAVES/XRSTORS tracepoints the default `--event` reads (added by a kernel patch that
/// traces `x86_fpu` saves and restores; mainline kernels do not have them).
const XSAVE_TRACEPOINTS: [&str; 2] = ["x86_fpu_latency_xsave", "x86_fpu_latency_xrstor"];

/// Why a trace may hold no XSAVES/XRSTORS sample, from this kernel's tracefs under `roots`:
/// the tracepoints are absent (the kernel lacks the patch that adds them), present but perhaps not
/// enabled, or tracefs cannot be read to tell.
pub fn tracepoint_advice(roots: &[&Path]) -> String {
    let names = XSAVE_TRACEPOINTS.join(" and ");
    for root in roots {
        let events = root.join("events");
        if std::fs::read_dir(&events).is_err() {
            continue;
        }
        let dir = events.join("x86_fpu");
        let present: Vec<&str> =
            XSAVE_TRACEPOINTS.iter().copied().filter(|t| dir.join(t).is_dir()).collect();
        if present.is_empty() {
            return format!(
                "this kernel has no {names} tracepoints (none in {}; a kernel patch that traces XSAVES and XRSTORS adds them, mainline kernels have none), so its traces hold no such samples: read a trace of a kernel that has them, or name another tracepoint with --event",
                dir.display()
            );
        }
        let enable: Vec<String> = present
            .iter()
            .map(|t| format!("echo 1 > {}", dir.join(t).join("enable").display()))
            .collect();
        return format!(
            "this kernel has the tracepoints: enable them (`{}`) and read {} while the workload runs",
            enable.join("; "),
            root.join("trace_pipe").display()
        );
    }
    format!(
        "tracefs is not readable at {} here, so whether this kernel has the {names} tracepoints is unknown",
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(" or ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tracefs tree with `x86_fpu` events `names`.
    fn tracefs(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let fpu = dir.path().join("events/x86_fpu");
        std::fs::create_dir_all(&fpu).unwrap();
        for name in names {
            std::fs::create_dir(fpu.join(name)).unwrap();
        }
        dir
    }

    #[test]
    fn advice_says_whether_the_kernel_has_the_tracepoints() {
        let without = tracefs(&["x86_fpu_before_save", "x86_fpu_after_save"]);
        let text = tracepoint_advice(&[without.path()]);
        assert!(text.starts_with("this kernel has no x86_fpu_latency_xsave"), "{text}");
        assert!(text.contains("--event"), "{text}");

        let with = tracefs(&["x86_fpu_latency_xsave", "x86_fpu_latency_xrstor"]);
        let text = tracepoint_advice(&[Path::new("/nonexistent-tracefs"), with.path()]);
        let enable = with.path().join("events/x86_fpu/x86_fpu_latency_xrstor/enable");
        assert!(text.contains(&format!("echo 1 > {}", enable.display())), "{text}");
        assert!(text.contains("trace_pipe"), "{text}");

        let text = tracepoint_advice(&[Path::new("/nonexistent-tracefs")]);
        assert!(text.starts_with("tracefs is not readable at /nonexistent-tracefs"), "{text}");
    }
}
