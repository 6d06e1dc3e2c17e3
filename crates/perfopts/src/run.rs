//! perf 6.12's `perf stat` options that change how a run is made rather than what it counts
//! (`--log-fd`, `--pre`/`--post`, `-S`, `-i`, `--no-scale`, `-T`, `--smi-cost`, `-r 0`),
//! each as `builtin-stat.c` does it. `stat`'s flags flatten [`PerfOptions`]; `-o -` and the
//! `[stat]` keys of perf's config files ([`crate::config`]) are applied to the flags by the CLI.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use tmetric_engine::{self as engine, Host};

use crate::exits::{perf_exit, reraise_later, take_interrupted};

/// perf's options of how a run is made (flattened into `stat`'s and `record`'s flags).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PerfOptions {
    /// Set on each of `-r 0`'s runs ([`forever`]): a run that a signal interrupts is not
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

/// perf's rules for these options that need no machine, with perf's messages: `perf`, with
/// whether `-o` names a file, `-I`'s milliseconds and `--interval-count`.
pub fn check_perf_options(
    perf: &PerfOptions,
    output: bool,
    interval: Option<u64>,
    interval_count: Option<u64>,
) -> anyhow::Result<()> {
    // perf's `cmd_stat`: a count of intervals needs intervals (0 is no count at all).
    if interval_count.is_some_and(|n| n > 0) && interval.is_none_or(|i| i == 0) {
        return Err(perf_exit(
            234,
            "interval-count option should be used together with interval-print: give -I MS too",
        ));
    }
    let Some(fd) = perf.log_fd else { return Ok(()) };
    if output {
        return Err(perf_exit(
            234,
            "cannot use both --output and --log-fd: -o names a file, --log-fd an open descriptor",
        ));
    }
    if fd < 0 {
        return Err(perf_exit(
            234,
            "argument to --log-fd must be a > 0: the number of a descriptor the shell opened, as in `3>counts.txt tmetric --log-fd 3 ...`",
        ));
    }
    Ok(())
}

/// perf's `-r 0`: runs `once` (one run of the command, printing its counts as it ends) again
/// and again, until a run is interrupted (Ctrl-C reaches the command too) or fails to start.
pub fn forever(mut once: impl FnMut() -> anyhow::Result<i32>) -> anyhow::Result<i32> {
    loop {
        let code = once()?;
        // Ctrl-C reaches tmetric and the command: the interrupted run is not printed and
        // tmetric dies by the signal once done, as perf (130 for SIGINT from a shell). A
        // signal that reached only the command ends nothing: perf runs it again.
        if let Some(signal) = take_interrupted() {
            reraise_later(signal);
            return Ok(code);
        }
    }
}

/// When [`run_hook`] runs: perf's `--pre` before a run's counters open, `--post` after its
/// workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunHook {
    /// Before a run (`--pre`, then `-S`'s sync).
    Before,
    /// After a run (`--post`).
    After,
}

/// `--pre`, `--post` and `-S` around each run, as perf's `run_perf_stat`: the pre command,
/// then `sync`, then the run, then the post command, each through `/bin/sh -c` as perf's
/// `system()`.
pub fn run_hook(perf: &PerfOptions, hook: RunHook) -> Result<(), String> {
    let (flag, command) = match hook {
        RunHook::Before => ("--pre", &perf.pre),
        RunHook::After => ("--post", &perf.post),
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
    if hook == RunHook::Before && perf.sync {
        tmetric_runtime::sys::sync_filesystems();
    }
    Ok(())
}

/// Where perf's kernel switch for `--smi-cost` is, under a sysfs root.
const FREEZE_ON_SMI: &str = "cpu/freeze_on_smi";

/// Puts `freeze_on_smi` back to 0 when the run that set it ends, as perf does at its exit,
/// saying through the warning function it holds when it cannot.
pub struct SmiReset(Option<PathBuf>, fn(&str));

impl Drop for SmiReset {
    fn drop(&mut self) {
        if let Some(path) = self.0.take()
            && let Err(e) = std::fs::write(&path, "0")
        {
            (self.1)(&format!("cannot set {} back to 0: {e}", path.display()));
        }
    }
}

/// What `-T` and `--smi-cost` add to a run: the metric groups to select, whether to print only
/// metrics, and the `freeze_on_smi` to put back when the run ends.
pub struct MetricModes {
    /// The metric groups perf makes of the options (`transaction`, `smi`), in that order.
    pub groups: Vec<&'static str>,
    /// `--smi-cost`'s metric-only layout (unless `--no-metric-only`); `None`: unchanged.
    pub metric_only: Option<bool>,
    /// Dropped when the run ends.
    pub reset: SmiReset,
}

/// `-T` and `--smi-cost` as the metric groups perf makes of them (`transaction`, `smi`), on
/// `host` (nothing for a null run, `-n`): refused, with perf's words and what to do, where the
/// model has no such metrics or the kernel no `freeze_on_smi`. `warn` says what the reset
/// cannot put back.
pub fn metric_modes(
    perf: &PerfOptions,
    null_run: bool,
    host: &Host,
    warn: fn(&str),
) -> anyhow::Result<MetricModes> {
    let mut modes =
        MetricModes { groups: Vec::new(), metric_only: None, reset: SmiReset(None, warn) };
    if null_run || !(perf.transaction || perf.smi_cost) {
        return Ok(modes);
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
    if perf.transaction {
        if !has_group("transaction") {
            return Err(perf_exit(
                234,
                format!(
                    "Missing transaction metrics: -T counts the `transaction` metric group, which {} does not have (Intel CPUs with TSX have it; `tmetric list metrics` lists this machine's)",
                    on()
                ),
            ));
        }
        modes.groups.push("transaction");
    }
    if perf.smi_cost {
        let path = sysfs.pmu_devices().join(FREEZE_ON_SMI);
        let value = std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse::<i64>().ok());
        let Some(value) = value else {
            return Err(perf_exit(
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
            return Err(perf_exit(
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
            modes.reset = SmiReset(Some(path), warn);
        }
        modes.groups.push("smi");
        modes.metric_only = Some(!perf.no_metric_only);
    }
    Ok(modes)
}
