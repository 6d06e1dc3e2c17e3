//! perf 6.12's `perf stat` options that change how a run is made rather than what it counts
//! (`--log-fd`, `--pre`/`--post`, `-S`, `-i`, `--no-scale`, `-T`, `--smi-cost`, `-r 0`,
//! `-o -`), each as `builtin-stat.c` does it, and the `[stat]` keys of perf's config files
//! applied under the flags.

use std::process::Command;

use super::*;

/// perf's options of how a run is made (flattened into [`StatArgs`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PerfOptions {
    /// Set by [`forever`] on each of `-r 0`'s runs: a run that a signal interrupts is not
    /// printed and ends the repeats (perf 6.1 prints the runs before it, then dies by it).
    #[arg(skip)]
    pub forever: bool,
    /// Write the counts to this open descriptor instead of standard error, as perf's
    /// `--log-fd` (`3>counts.txt tmetric --log-fd 3 -- make`; `3>>counts.txt` appends).
    #[arg(long, value_name = "FD", allow_hyphen_values = true)]
    pub log_fd: Option<i32>,
    /// A shell command run before each run of the command (`-r`), as perf's `--pre`; the
    /// run does not start when it fails.
    #[arg(long, value_name = "CMD")]
    pub pre: Option<String>,
    /// A shell command run after each run of the command (`-r`), as perf's `--post`.
    #[arg(long, value_name = "CMD")]
    pub post: Option<String>,
    /// Count the command alone, not the children it creates (perf's `-i`; `--inherit` undoes
    /// it).
    #[arg(short = 'i', long = "no-inherit")]
    pub no_inherit: bool,
    /// Read every counter from where tmetric runs, not each CPU's from that CPU (perf's
    /// `--no-affinity`: fewer moves, more calls between CPUs).
    #[arg(long = "no-affinity")]
    pub no_affinity: bool,
    /// Flush every filesystem's buffered writes (`sync`) before each run, as perf's `-S`.
    #[arg(short = 'S', long = "sync")]
    pub sync: bool,
    /// Scale a multiplexed count to the time its event was enabled (the default; `-c` is
    /// older perf's spelling).
    #[arg(short = 'c', long = "scale", overrides_with = "no_scale")]
    pub scale: bool,
    /// Print each count as read, not scaled for multiplexing (perf's `--no-scale`).
    #[arg(long = "no-scale", overrides_with = "scale")]
    pub no_scale: bool,
    /// Hardware transaction (TSX) statistics: the model's `transaction` metric group, as
    /// perf's `-T` (`-M transaction`).
    #[arg(short = 'T', long = "transaction")]
    pub transaction: bool,
    /// The share of cycles spent in System Management Interrupts and their number: the
    /// model's `smi` metrics from `msr/aperf/`, `msr/smi/` and `cycles`, with the core PMU's
    /// `freeze_on_smi` set while counting, as perf's `--smi-cost` (implies --metric-only).
    #[arg(long)]
    pub smi_cost: bool,
    /// Counts with their metrics beside them even where --topdown or --smi-cost would print
    /// only metrics (perf's `--no-metric-only`).
    #[arg(long, overrides_with = "metric_only")]
    pub no_metric_only: bool,
}

/// `-r N` as perf reads it: any count that is not negative (0 repeats until Ctrl-C; perf
/// documents 100 as the maximum but does not hold to it).
pub fn run_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if n < 0 => {
            Err("Run count must be a positive number (0 repeats until Ctrl-C)".into())
        }
        Ok(n) => u32::try_from(n).map_err(|_| format!("{n} runs are more than tmetric counts")),
        Err(_) => Err(format!("`{text}` is not a number of runs, as in -r 5")),
    }
}

/// perf's rules for these options that need no machine, with perf's messages.
pub(super) fn check_perf_options(args: &StatArgs) -> anyhow::Result<()> {
    // perf's `cmd_stat`: a count of intervals needs intervals (0 is no count at all).
    if args.interval_count.is_some_and(|n| n > 0) && args.interval.is_none_or(|i| i == 0) {
        return Err(super::exits::perf_exit(
            234,
            "interval-count option should be used together with interval-print: give -I MS too",
        ));
    }
    let Some(fd) = args.perf.log_fd else { return Ok(()) };
    if args.output.is_some() {
        return Err(super::exits::perf_exit(
            234,
            "cannot use both --output and --log-fd: -o names a file, --log-fd an open descriptor",
        ));
    }
    if fd < 0 {
        return Err(super::exits::perf_exit(
            234,
            "argument to --log-fd must be a > 0: the number of a descriptor the shell opened, as in `3>counts.txt tmetric --log-fd 3 ...`",
        ));
    }
    Ok(())
}

/// The flags as perf reads them before a run: `-o -` is standard error (not a file named
/// `-`), and the `[stat]` keys of perf's config files (`stat.big-num`,
/// `stat.no-csv-summary`) apply where no flag says otherwise.
pub fn as_perf_reads(args: &StatArgs) -> StatArgs {
    let mut args = args.clone();
    if args.output.as_deref() == Some(Path::new("-")) {
        args.output = None;
    }
    let config = tmetric_perfopts::config::load(warn);
    if config.big_num == Some(false) && !args.big_num {
        args.no_big_num = true;
    }
    if config.no_csv_summary == Some(true) && !args.csv_summary {
        args.no_csv_summary = true;
    }
    if !args.perf.scale || args.perf.no_scale {
        tmetric_runtime::counter::set_scaling(!args.perf.no_scale);
    }
    args
}

/// perf's `-r 0`: runs the command again and again, printing each run's counts as it ends,
/// until a run is interrupted (Ctrl-C reaches the command too) or fails to start.
pub fn forever(
    args: &StatArgs,
    mut once: impl FnMut(&StatArgs) -> anyhow::Result<i32>,
) -> anyhow::Result<i32> {
    if args.command.is_empty() {
        bail!("-r 0 repeats a command until Ctrl-C: give a command");
    }
    let mut each = args.clone();
    each.repeat = 1;
    each.perf.forever = true;
    loop {
        let code = once(&each)?;
        // Ctrl-C reaches tmetric and the command: the interrupted run is not printed and
        // tmetric dies by the signal once done, as perf (130 for SIGINT from a shell). A
        // signal that reached only the command ends nothing: perf runs it again.
        if let Some(signal) = super::exits::take_interrupted() {
            super::exits::reraise_later(signal);
            return Ok(code);
        }
    }
}

/// When [`run_hook`] runs: perf's `--pre` before a run's counters open, `--post` after its
/// workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunHook {
    /// Before a run (`--pre`, then `-S`'s sync).
    Before,
    /// After a run (`--post`).
    After,
}

/// `--pre`, `--post` and `-S` around each run, as perf's `run_perf_stat`: the pre command,
/// then `sync`, then the run, then the post command, each through `/bin/sh -c` as perf's
/// `system()`.
pub(super) fn run_hook(args: &StatArgs, hook: RunHook) -> Result<(), String> {
    let (flag, command) = match hook {
        RunHook::Before => ("--pre", &args.perf.pre),
        RunHook::After => ("--post", &args.perf.post),
    };
    if let Some(command) = command {
        let status = Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .status()
            .map_err(|e| format!("{flag} `{command}`: cannot run /bin/sh: {e}"))?;
        if !status.success() {
            let how = match (status.code(), std::os::unix::process::ExitStatusExt::signal(&status))
            {
                (Some(code), _) => format!("exited with {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "failed".to_string(),
            };
            return Err(match hook {
                RunHook::Before => format!(
                    "{flag} `{command}` {how}, so the run it prepares was not made (perf would print empty counts)"
                ),
                RunHook::After => format!("{flag} `{command}` {how}"),
            });
        }
    }
    if hook == RunHook::Before && args.perf.sync {
        tmetric_runtime::sys::sync_filesystems();
    }
    Ok(())
}

/// Where perf's kernel switch for `--smi-cost` is, under a sysfs root.
const FREEZE_ON_SMI: &str = "cpu/freeze_on_smi";

/// Puts `freeze_on_smi` back to 0 when the run that set it ends, as perf does at its exit.
pub struct SmiReset(Option<PathBuf>);

impl Drop for SmiReset {
    fn drop(&mut self) {
        if let Some(path) = self.0.take()
            && let Err(e) = std::fs::write(&path, "0")
        {
            warn(&format!("cannot set {} back to 0: {e}", path.display()));
        }
    }
}

/// `-T` and `--smi-cost` as the metric groups perf makes of them (`transaction`, `smi`), on
/// `host`: refused, with perf's words and what to do, where the model has no such metrics or
/// the kernel no `freeze_on_smi`.
pub(super) fn metric_modes(
    mut args: StatArgs,
    host: &Host,
) -> anyhow::Result<(StatArgs, SmiReset)> {
    let mut reset = SmiReset(None);
    if args.null_run || !(args.perf.transaction || args.perf.smi_cost) {
        return Ok((args, reset));
    }
    let model = host.model().ok();
    let sysfs = host.sysfs();
    let has_group = |group: &str| {
        model.is_some_and(|m| {
            !engine::select::find(group, tmetric_catalog::common(), Some(m)).is_empty()
        })
    };
    let on = || match model {
        Some(m) => format!("the {} model", m.name),
        None => "this machine (no CPU model is known for it)".to_string(),
    };
    if args.perf.transaction {
        if !has_group("transaction") {
            return Err(super::exits::perf_exit(
                234,
                format!(
                    "Missing transaction metrics: -T counts the `transaction` metric group, which {} does not have (Intel CPUs with TSX have it; `tmetric list metrics` lists this machine's)",
                    on()
                ),
            ));
        }
        args.metric.metrics.push("transaction".into());
    }
    if args.perf.smi_cost {
        let path = sysfs.pmu_devices().join(FREEZE_ON_SMI);
        let value = std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse::<i64>().ok());
        let Some(value) = value else {
            return Err(super::exits::perf_exit(
                234,
                format!(
                    "freeze_on_smi is not supported: --smi-cost needs sysfs's bus/event_source/devices/{FREEZE_ON_SMI}, which an Intel core PMU has (this machine has {})",
                    if sysfs.core_pmu().is_some() {
                        "a core PMU without it"
                    } else {
                        "no core PMU"
                    }
                ),
            ));
        };
        if !has_group("smi") {
            return Err(super::exits::perf_exit(
                234,
                format!(
                    "Missing smi metrics: --smi-cost counts the `smi` metric group, which {} does not have",
                    on()
                ),
            ));
        }
        if value == 0 {
            std::fs::write(&path, "1")
                .with_context(|| format!("Failed to set freeze_on_smi: {}", path.display()))?;
            reset = SmiReset(Some(path));
        }
        args.metric.metrics.push("smi".into());
        args.metric_only = !args.perf.no_metric_only;
    }
    Ok((args, reset))
}
