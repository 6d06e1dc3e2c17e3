//! `tmetric latency`: per-group latency statistics from ftrace text (seed 002).
use std::io::Write;

/// Flags of `tmetric latency`.
#[derive(Debug, clap::Args)]
pub struct LatencyArgs {
    /// Trace file to read, or `-` for standard input.
    #[arg(default_value = "-")]
    pub file: String,
}

/// Runs `tmetric latency` and writes its report to `out`.
pub fn run(args: &LatencyArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = (args, out);
    anyhow::bail!("not implemented yet")
}
