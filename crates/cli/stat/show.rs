//! What the printer is told: the title's target, the print configuration, aggregation units,
//! `-v` descriptions (worded by `tmetric_print::verbose`) and the retire-latency samples'
//! statistics.

use super::*;

/// What was counted, as the title of the totals says it.
pub(super) fn target_text(args: &StatArgs, simulated: Option<&str>) -> String {
    let what = if let Some(pid) = args.pid {
        format!("process id {pid}")
    } else if !args.tid.is_empty() {
        let tids: Vec<String> = args.tid.iter().map(i32::to_string).collect();
        format!("thread id {}", tids.join(","))
    } else if let Some(list) = &args.cpu_list {
        format!("CPU(s) {list}")
    } else if args.all_cpus {
        "system wide".to_string()
    } else {
        command_text(&args.command)
    };
    match simulated {
        Some(name) => format!("{what}' on simulated PMU '{name}"),
        None => what,
    }
}

pub(super) fn command_text(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// The printer's layout options for the flags, in the user's numeric locale.
pub fn print_config(args: &StatArgs, layout: &Layout, unit_width: usize) -> Config {
    let mut config = Config::new(layout.clone());
    config.metric_only = args.metric_only;
    // perf groups digits unless -x (-B is refused there) or --no-big-num is given.
    config.big_num = args.out.separator.is_none() && !args.no_big_num;
    config.csv_with_json = args.out.csv_with_json();
    config.locale = tmetric_runtime::locale::NumericLocale::from_env();
    config.full = args.full_metrics;
    config.aggregation = aggregation(args);
    config.interval = args.interval.is_some();
    config.cgroups = !args.cgroup.is_empty() || !args.for_each_cgroup.is_empty();
    config.runs = args.repeat;
    config.csv_summary = args.summary && !args.no_csv_summary && args.interval.is_some();
    config.unit_width = unit_width;
    config.interval_clear = args.interval_clear;
    config.errors = args.errors;
    config
}

/// How the counts split into printed units: perf's aggregation units (`-A`, `--per-*`) with
/// their CPUs, or one total. (`--per-thread` is set once the threads are known.)
pub(super) fn split_of(args: &StatArgs, sysfs: &Sysfs, target: &Target) -> Partition {
    let Target::Cpus(cpus) = target else { return Partition::Global };
    let level = args.per_cache.as_deref().and_then(cache_level);
    aggr::split(cpus, aggregation(args), |cpu| aggr::place_of(sysfs, cpu, level))
}

/// `-v`: the counters assumed per PMU, then the groups and each metric's placement.
pub(super) fn describe_pmus(pmus: &PmuModel) {
    tmetric_print::verbose::pmus(pmus).iter().for_each(|line| warn(line));
}

/// `-v`: how the events were grouped and where each metric's events landed.
pub(super) fn describe_plan(plan: &Plan) {
    tmetric_print::verbose::plan(plan).iter().for_each(|line| warn(line));
}

/// The printer for the flags: where the counts go (`-o`, `--append`, nowhere with `-q` or a
/// record on standard output), colour, the title, JSON's notes, the tree and `-I`.
pub(super) fn printer_for(
    args: &StatArgs,
    layout: &Layout,
    plan: &Plan,
    simulated: Option<&str>,
    legacy: Option<Vec<(u32, (u32, u32))>>,
    record: Option<&tmetric_record::RecordTo>,
) -> anyhow::Result<Printer> {
    let out = if args.quiet || record.is_some_and(|r| r.to_stdout()) {
        Sink::nowhere()
    } else {
        match &args.output {
            Some(path) if args.append => Sink::append(path)?,
            Some(path) => Sink::create(path)?,
            None => match log_fd(args) {
                Some(fd) => {
                    let file = tmetric_runtime::sys::file_of_descriptor(fd).map_err(|e| {
                        let why = e.to_string();
                        let why = why.split(" (os error").next().unwrap_or(&why).to_string();
                        anyhow::anyhow!(
                            "Failed opening logfd: --log-fd {fd}: {why}; open the descriptor in the shell, as `{fd}>counts.txt tmetric --log-fd {fd} ...`"
                        )
                    })?;
                    Sink::descriptor(file, fd)
                }
                None => Sink::stderr(),
            },
        }
    };
    let to_terminal = crate::args::counts_to_terminal(args.output.as_deref());
    if args.interval_clear && !to_terminal {
        // perf 6.12 refuses it the same way, and its `cmd_stat` then returns -1: 255.
        return Err(super::exits::perf_exit(
            255,
            "--interval-clear does not work with output: it clears a terminal, and the counts go to a file or pipe",
        ));
    }
    let mut config = print_config(args, layout, tmetric_print::verbose::unit_width(plan));
    config.colour = args.out.colour(to_terminal);
    config.contract = plan.contract();
    let title = Title { target: target_text(args, simulated), runs: args.repeat };
    let mut printer = Printer::new(out, config, title, Box::new(warn));
    // `tmetric -x, 2>&1 | script`: tmetric's notes join perf's CSV or JSON lines only when
    // asked (-v, --full-metrics).
    let on_stderr = counts_on_stderr(args, record);
    printer.explain = Explain::choose(layout, on_stderr, args.verbose, args.full_metrics);
    printer.verbose = args.verbose;
    printer.simulated = simulated.map(str::to_string);
    printer.legacy = legacy;
    printer.interval = args.interval.map(Duration::from_millis);
    printer.tree = TreeView::new(prints_tree(args, layout), args.all);
    if args.output.is_some() && !args.quiet {
        printer.started_on(&tmetric_runtime::locale::ctime_now())?;
    }
    printer.simulated_mark()?;
    Ok(printer)
}

/// Whether the counts print on standard error (no `-o FILE`, no `-q`, not recording to
/// standard output), so that tmetric's own lines there would mix into them.
pub(super) fn counts_on_stderr(args: &StatArgs, record: Option<&tmetric_record::RecordTo>) -> bool {
    args.output.is_none()
        && log_fd(args).is_none()
        && !args.quiet
        && !record.is_some_and(|r| r.to_stdout())
}

/// `--log-fd N`'s descriptor; `None` for 0, which is perf's default (standard error).
pub(super) fn log_fd(args: &StatArgs) -> Option<i32> {
    args.perf.log_fd.filter(|&fd| fd > 0)
}

/// `-v` (and `-j`): per sampled event, the sample statistics.
pub(super) fn report_samples(
    reports: &[EventReport],
    verbose: bool,
    json: bool,
    out: &mut Sink,
) -> io::Result<()> {
    for r in reports {
        let t = &r.total;
        if json {
            let line = serde_json::json!({
                "tpebs-event": r.name, "samples": t.count, "lost": r.kernel_lost.unwrap_or(t.lost),
                "mean": t.mean, "min": t.min, "max": t.max, "last": t.last, "p97": t.p97,
            });
            writeln!(out, "{line}")?;
        } else if verbose {
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
            warn(&format!(
                "retire latency of {}: {} samples ({} lost), mean {}, min {}, max {}, last {}, p97 (mean of the lowest 97%) {} cycles",
                r.name,
                t.count,
                r.kernel_lost.unwrap_or(t.lost),
                show(t.mean),
                show(t.min),
                show(t.max),
                show(t.last),
                show(t.p97)
            ));
        }
        if r.kernel_lost.unwrap_or(t.lost) > 0 {
            warn(&format!(
                "--record-tpebs: {} samples of {} were lost (the reader fell behind)",
                r.kernel_lost.unwrap_or(t.lost),
                r.name
            ));
        }
    }
    Ok(())
}
