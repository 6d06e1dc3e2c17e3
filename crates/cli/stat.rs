//! `tmetric stat`: counts events for a command (or the whole system) through the runtime,
//! evaluates tmetric's common metrics and selected model metrics over the counts, and prints
//! them as `perf stat` does: the default layout, `-x` CSV or `--json` lines, as totals or per
//! `-I` interval. Events that cannot be counted print `<not supported>` with the reason and
//! their metrics `nan`; nothing is estimated.

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use tmetric_catalog::Model;
use tmetric_engine::EvalInput;
use tmetric_engine::aggr;
use tmetric_engine::defaults::{TopdownMode, core_map};
use tmetric_engine::session::{Counted, Session};
use tmetric_engine::threads::{self, Thread, Threads};
use tmetric_engine::tpebs::{self, LatencySources};
use tmetric_engine::view::Partition;
use tmetric_engine::{self as engine, Host, Pick, Plan, PlanOptions, PmuModel};
use tmetric_print::stat::{Explain, TreeView};
use tmetric_print::{Aggregation, Config, Title};
use tmetric_runtime::{EventReport, TpebsMode, Workload};
use tmetric_runtime::{Kernel, RunOptions, Syscalls, Sysfs, Target};

use tmetric_print::out::{Sink, warn};

mod args;
mod run;
mod setup;
mod show;

pub use args::*;
pub use run::*;
pub use setup::*;
pub use show::*;
use tmetric_perfopts::exits;
pub use tmetric_perfopts::exits::{PerfExit, reraise_now};
pub(crate) use tmetric_perfopts::rules::{cache_level, check_cache_level, check_cgroup};
use tmetric_perfopts::run::{MetricModes, RunHook, check_perf_options, metric_modes, run_hook};

/// `stat`'s and `report`'s printer, writing to a [`Sink`]; its notes for standard error are
/// [`warn`]ings.
pub type Printer = tmetric_print::stat::StatPrinter<Sink>;
pub use tmetric_print::Layout;

/// Where the threads of `-p`, `-t` and `--per-thread -a` are listed: the real tasks.
const TASKS: &str = "/proc";

/// Runs `tmetric stat`; returns the exit code (the workload's, as perf does).
pub fn run(args: &StatArgs) -> anyhow::Result<i32> {
    let args = &as_perf_reads(args);
    if args.repeat == 0 {
        if args.command.is_empty() {
            bail!("-r 0 repeats a command until Ctrl-C: give a command");
        }
        let mut each = args.clone();
        each.repeat = 1;
        each.perf.forever = true;
        return tmetric_perfopts::run::forever(|| run_recording(&each, None));
    }
    run_recording(args, None)
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

/// Runs `tmetric stat`, also writing the raw counts to `record` (`tmetric record`).
pub fn run_recording(
    args: &StatArgs,
    record: Option<&tmetric_record::RecordTo>,
) -> anyhow::Result<i32> {
    if args.interval == Some(0) {
        // perf's `-I 0`: no intervals.
        let mut plain = args.clone();
        plain.interval = None;
        return run_recording(&plain, record);
    }
    let attach = args.pid.is_some() || !args.tid.is_empty();
    if args.command.is_empty() && !system_wide(args) && !attach {
        // perf's `setup_system_wide`: without a command or a target, count every CPU (until
        // Ctrl-C, --interval-count or --timeout).
        let mut all = args.clone();
        all.all_cpus = true;
        return run_recording(&all, record);
    }
    if attach && args.repeat > 1 {
        bail!(
            "-r {} repeats a command to count it; -p/-t count a running process, so give -r without them",
            args.repeat
        );
    }
    let cgroups = !args.cgroup.is_empty() || !args.for_each_cgroup.is_empty();
    if (aggregation(args) != Aggregation::Global && !args.per_thread || cgroups)
        && !system_wide(args)
    {
        bail!(
            "both cgroup and no-aggregation modes only available in system-wide mode: -A, --no-merge, --per-core, --per-cache, --per-cluster, --per-die, --per-socket, --per-node, -G and --for-each-cgroup split counts by CPU or cgroup, so add -a or -C"
        );
    }
    check_per_thread(args, attach)?;
    check_perf_flags(args)?;
    check_perf_options(&args.perf, args.output.is_some(), args.interval, args.interval_count)?;
    if args.quiet {
        tmetric_print::out::set_quiet();
    }
    // Warnings share standard error with CSV or JSON counts unless -o names a file: the
    // counts' stream stays perf's (`tmetric -x, 2>&1 | script`, `tmetric -j 2>&1 | jq`).
    // tmetric's warnings join it only when -v or --full-metrics asks: as `#` comment lines
    // among CSV lines, as JSON objects among JSON lines (plain with -j -v).
    let layout = args.out.layout();
    if counts_on_stderr(args, None) {
        match Explain::choose(&layout, true, args.verbose, args.full_metrics) {
            Explain::Comments => tmetric_print::out::set_comment_warnings(),
            Explain::Json => tmetric_print::out::set_json_warnings(),
            Explain::Quiet => tmetric_print::out::set_quiet(),
            Explain::Block | Explain::Stderr => {}
        }
    }
    validate_flags(args)?;
    match &args.pmu_sim {
        Some(name) => {
            let sim =
                tmetric_sim::private::simulated(name, args.pmu_sim_workload.as_deref(), warn)?;
            if args.verbose {
                // How the simulated kernel multiplexes: its HZ, the rotation interval and
                // whether it is the exact lockstep model or as unkind as hardware.
                warn(&format!("simulated PMU `{name}`: {}", sim.kernel.summary()));
            }
            // The tree is removed when `sim` drops, after the run.
            // `-p PID` names a real process: its threads are listed under the real /proc.
            let (sysfs, proc_root) = (&sim.sysfs, &sim.proc_root);
            run_on(args, sim.kernel.clone(), sysfs, proc_root, Path::new(TASKS), Some(name), record)
        }
        None => {
            let sysfs = Sysfs::system();
            run_on(args, Kernel, &sysfs, Path::new("/proc"), Path::new(TASKS), None, record)
        }
    }
}
