//! `tmetric record`: `stat`'s flags plus `-o FILE` and `--format`; counts as `stat` does and
//! also writes the raw counts, with everything needed to evaluate them later
//! (docs/record-format.md). The formats, writer and reader are `tmetric_record`'s; this is
//! the flags and the call into `stat`.

use std::path::PathBuf;

use anyhow::bail;
use tmetric_record::{Format, RecordTo};

use crate::stat::StatArgs;

/// The file formats of `tmetric record`, as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// perf.data, as `perf stat record` writes it, with tmetric's extras.
    Perf,
    /// JSON lines (format version 1 of docs/record-format.md).
    Jsonl,
}

/// `stat` that also saves the raw counts, with what is needed to evaluate them later, to
/// `-o FILE` (docs/record-format.md).
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("output", |a| a.help("The record file to write (default perf.data, an existing one moved to perf.data.old, as perf does); `-` writes a perf pipe to standard output. The counts still print to standard error, except to a pipe (as perf)")),
    after_help = "Examples:\n  tmetric record -e task-clock,context-switches -- ./bench\n  \
    tmetric record --pmu-sim sapphirerapids -M TopdownL1 -a -o td.data sleep 1\n  \
    tmetric report -i td.data -M tma_retiring\n  \
    tmetric record -e task-clock -o - true | perf stat report -i -\n  \
    tmetric record --format jsonl -o run.jsonl -e task-clock true"
)]
pub struct RecordArgs {
    #[command(flatten)]
    pub stat: StatArgs,
    /// The file format: `perf` (perf.data as `perf stat record` writes it, which `perf stat
    /// report` and `perf script` read, with tmetric's plan inside) or `jsonl` (JSON lines,
    /// docs/record-format.md).
    #[arg(long, value_enum, default_value = "perf", value_name = "FORMAT")]
    pub format: FormatArg,
}

/// Runs `tmetric record`.
pub fn run(args: &RecordArgs) -> anyhow::Result<i32> {
    if args.format == FormatArg::Jsonl && args.stat.output.is_none() {
        bail!("--format jsonl needs -o FILE (perf.data is the name of the perf format)");
    }
    let path = args.stat.output.clone().unwrap_or_else(|| PathBuf::from("perf.data"));
    let format = match args.format {
        FormatArg::Perf => Format::Perf,
        FormatArg::Jsonl => Format::Jsonl,
    };
    let to = RecordTo { path, format };
    if args.stat.repeat == 0 {
        bail!("-r 0 repeats a command until Ctrl-C; a record holds one run, so record without -r");
    }
    if to.format == Format::Perf && args.stat.repeat > 1 {
        bail!("Cannot use -r option with tmetric record (as with perf stat record)");
    }
    if to.format == Format::Jsonl && args.stat.perf.no_scale {
        // The JSON-lines format has no field for it, and `report` would scale the raw counts.
        bail!(
            "--no-scale with --format jsonl: the JSON-lines format does not record that the counts are raw, so report would scale them; record it in the default perf.data format (its STAT_CONFIG keeps the scale term)"
        );
    }
    if to.format == Format::Jsonl && to.to_stdout() {
        bail!(
            "--format jsonl -o -: JSON lines are written to a file (`-o /dev/stdout` for a pipe)"
        );
    }
    let mut stat = crate::stat::as_perf_reads(&args.stat);
    stat.output = None;
    crate::stat::run_recording(&stat, Some(&to))
}
