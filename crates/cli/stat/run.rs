//! One `tmetric stat` run, in the order it happens: the plan, the printer, the target, `-r`'s
//! quiet runs, the engine session's run with its intervals (and record, and TPEBS sampling),
//! then the summary, notes and exit status.

use super::*;

/// Runs `tmetric stat` with `sys` on the machine `sysfs` and `proc_root` describe;
/// `simulated` names the simulated PMU, printed with every output.
pub fn run_on<S: Syscalls + Clone>(
    args: &StatArgs,
    sys: S,
    sysfs: &Sysfs,
    proc_root: &Path,
    simulated: Option<&str>,
    record: Option<&tmetric_record::RecordTo>,
) -> anyhow::Result<i32> {
    // Before anything slow: a signal that comes while planning is kept for the run loop.
    let _early_signals =
        tmetric_runtime::signal::catch_stop_signals().context("cannot catch signals")?;
    let layout = layout_of(args);
    let env = Environment::probe(sysfs, proc_root);
    // The model's counter numbers (`counter.json`) size the PMU model with or without -M:
    // an `-e` list is scheduled on the same counters.
    let model = host_model(args.model.as_deref(), sysfs, proc_root).ok();
    let Some((owned, topdown)) = topdown_args(args, &layout, sysfs, proc_root)? else {
        return Ok(1);
    };
    let args = &owned;
    let pmus = PmuModel::probe(sysfs, proc_root, model);
    if topdown.is_some() && pmus.nmi_watchdog {
        warn_topdown_watchdog(simulated);
    }
    let machine = Machine { sysfs, proc_root, env: &env, pmus: &pmus };
    let mut plan = build(args, &machine)?;
    apply_latency_flags(args, &mut plan)?;
    if let Some(name) = simulated {
        warn(&format!(
            "simulated PMU `{name}`: every count below comes from a simulator, not hardware"
        ));
    }
    for warning in &plan.warnings {
        warn(&format!("warning: {warning}"));
    }
    let legacy = match &topdown {
        Some(TopdownMode::Legacy(_)) => Some(core_map(sysfs)),
        _ => None,
    };
    let mut printer = printer_for(args, &layout, &plan, simulated, legacy, record)?;
    let mut workload = if args.command.is_empty() {
        None
    } else {
        Some(Workload::prepare(&args.command).context("cannot start the workload")?)
    };
    let threads = listed_threads(args)?;
    let target = target_of(args, sysfs, workload.as_ref(), threads.as_deref())?;
    if args.verbose {
        describe_pmus(&pmus);
        describe_plan(&plan);
    }
    printer.split = split_of(args, sysfs, &target);
    // The signal pipe before the events: when descriptors run out, the events say so.
    tmetric_runtime::signal::prepare().context("cannot catch signals")?;
    let earlier = quiet_runs(args, &sys, &plan, &env)?;
    let sys_for_sampler = sys.clone();
    let mut session = Session::open(sys, plan, target.clone(), env.clone())?;
    warn_user_only(&session);
    if let Some(threads) = &threads {
        split_threads(args, &session, threads, &mut printer);
    }
    let mode: TpebsMode = args.tpebs_mode.parse().context("--tpebs-mode")?;
    let sampler = if args.record_tpebs {
        Some(start_sampler(session.plan(), sys_for_sampler, &target, sysfs)?)
    } else {
        None
    };
    let recorder = match record {
        Some(to) => {
            use tmetric_perfstat::perfdata::write::aggr;
            let facts = tmetric_record::HeaderFacts {
                plan: session.plan(),
                failures: session.failures(),
                splits: session.split_notes(),
                threads: match &printer.split {
                    Split::Threads { threads, .. } => threads.clone(),
                    _ => Vec::new(),
                },
                skip_zero: matches!(printer.split, Split::Threads { skip_zero: true, .. }),
                sysfs,
                proc_root,
                model: model.map(Model::path),
                simulated,
                target: target_text(args, simulated),
                system_wide: system_wide(args),
                interval_ms: args.interval,
                selection: tmetric_record::format::Selection {
                    metrics: args.metrics.clone(),
                    events: args.events.clone(),
                    model: args.model.clone(),
                    tpebs_mode: args.record_tpebs.then(|| args.tpebs_mode.clone()),
                    summary: args.summary,
                },
                aggr_mode: [
                    (args.no_aggr, aggr::NONE),
                    (args.per_core, aggr::CORE),
                    (args.per_die, aggr::DIE),
                    (args.per_socket, aggr::SOCKET),
                    (args.per_thread, aggr::THREAD),
                ]
                .into_iter()
                .find_map(|(on, mode)| on.then_some(mode))
                .unwrap_or(aggr::GLOBAL),
            };
            let gone = session.vanished();
            let thread_map = threads.iter().flatten().filter(|t| !gone.contains(&t.0)).cloned();
            let thread_map = thread_map.collect();
            Some(tmetric_record::RecordSink::create(to, &facts, &target, thread_map)?)
        }
        None => None,
    };
    let mut counting = Counting { printer, recorder, record_failed: None, sampler, mode };
    let Some(report) = counting.run(&mut session, workload.as_mut(), &run_options(args))? else {
        // The reader went away during a system-wide run: nothing more to say, quietly.
        return Ok(0);
    };
    counting.finish(args, &layout, &pmus, &mut session, report, earlier)
}

/// perf 6.12's warning when `--topdown` counts with the NMI watchdog holding a counter.
fn warn_topdown_watchdog(simulated: Option<&str>) {
    let fix = match simulated {
        Some(name) => format!(
            "it is the simulated `{name}` machine's watchdog (on, as x86 distributions ship it): this machine's /proc/sys/kernel/nmi_watchdog does not change it"
        ),
        None => "disable it with `echo 0 > /proc/sys/kernel/nmi_watchdog`".to_string(),
    };
    warn(&format!(
        "the NMI watchdog is on and holds a counter, so topdown results may be less accurate; {fix}"
    ));
}

/// What the counters are opened on: `-C`'s CPUs, `-p`/`-t`'s threads, every CPU, or the
/// command.
fn target_of(
    args: &StatArgs,
    sysfs: &Sysfs,
    workload: Option<&Workload>,
    threads: Option<&[(i32, String)]>,
) -> anyhow::Result<Target> {
    Ok(if let Some(list) = &args.cpu_list {
        let online = sysfs.online_cpus().context("cannot list the online CPUs")?;
        Target::Cpus(tmetric_runtime::target::cpu_list(list, &online)?)
    } else if let Some(threads) = threads {
        // perf's `-p`: every thread the process has at the start, each with its own counters.
        Target::Threads(threads.iter().map(|t| t.0).collect())
    } else if args.all_cpus {
        Target::Cpus(sysfs.online_cpus().context("cannot list the online CPUs")?)
    } else {
        // With -D the counters are enabled after the delay, not at exec.
        let on_exec = args.delay.is_none_or(|d| d == 0);
        Target::Task { pid: workload.map_or(0, Workload::pid), on_exec }
    })
}

/// `-r N`: the first N-1 runs count quietly; the last one runs as usual and the printed
/// counts are the mean of all N, with perf's `( +- x% )` spread. A signal ends the repeats.
fn quiet_runs<S: Syscalls + Clone>(
    args: &StatArgs,
    sys: &S,
    plan: &Plan,
    env: &Environment,
) -> anyhow::Result<Vec<tmetric_runtime::RunReport>> {
    let mut earlier = Vec::new();
    for _ in 1..args.repeat.max(1) {
        let mut w = Workload::prepare(&args.command).context("cannot start the workload")?;
        let t = Target::Task { pid: w.pid(), on_exec: true };
        let mut run = Session::open(sys.clone(), plan.clone(), t, env.clone())?;
        let report = run.run(
            Some(&mut w),
            &RunOptions { catch_signals: true, ..RunOptions::default() },
            |_, _| Ok(()),
        )?;
        if report.interrupted_by.is_some() {
            break;
        }
        earlier.push(report);
    }
    Ok(earlier)
}

/// `-p`/`-t`: says (with -v) how many threads count apart, and `--per-thread` prints each.
fn split_threads<S: Syscalls>(
    args: &StatArgs,
    session: &Session<S>,
    threads: &[(i32, String)],
    printer: &mut Printer,
) {
    let gone = session.vanished();
    if args.verbose {
        warn(&format!(
            "counting {} threads apart, as listed at the start{}; a thread started later has no counters of its own: the kernel adds its counts to the counted thread that created it (inherit), as with perf",
            threads.len() - gone.len(),
            if gone.is_empty() {
                String::new()
            } else {
                format!(" ({} had exited before their counters opened)", gone.len())
            }
        ));
    }
    if args.per_thread {
        printer.split = Split::Threads {
            threads: threads
                .iter()
                .filter(|(t, _)| !gone.contains(t))
                .map(|(t, comm)| (comm.clone(), *t))
                .collect(),
            skip_zero: args.all_cpus,
        };
    }
}

/// The runtime loop's options from the flags.
fn run_options(args: &StatArgs) -> RunOptions {
    RunOptions {
        interval: args.interval.map(Duration::from_millis),
        catch_signals: true,
        delay: args.delay.map(Duration::from_millis),
        interval_count: args.interval_count.map(|n| n as usize),
        until_gone: tmetric_runtime::target::watched(args.pid, &args.tid, !args.command.is_empty()),
        timeout: args.timeout.map(Duration::from_millis),
        sample_every: error_bar_reads(args),
    }
}

/// The run's outputs while it counts: the printer, the record and the TPEBS sampler.
struct Counting<S: Syscalls> {
    printer: Printer,
    recorder: Option<tmetric_record::RecordSink>,
    /// A record file that cannot be written never stops the workload (as `-o`): the record
    /// stops there, counting and printing go on, and the run fails at its end.
    record_failed: Option<anyhow::Error>,
    sampler: Option<Sampler<S>>,
    mode: TpebsMode,
}

impl<S: Syscalls + Clone> Counting<S> {
    /// Counts until the workload, the targets, a signal, `--timeout` or `--interval-count`
    /// end it, printing (and recording) each interval; `None` when the reader of a
    /// system-wide run went away.
    fn run<T: Syscalls>(
        &mut self,
        session: &mut Session<T>,
        workload: Option<&mut Workload>,
        options: &RunOptions,
    ) -> anyhow::Result<Option<tmetric_runtime::RunReport>> {
        let interval_failures = session.failures();
        let has_workload = workload.is_some();
        let result = session.run(workload, options, |plan, tick| {
            let sample =
                EvalInput { counts: tick.counts, seconds: tick.length.as_secs_f64(), rusage: None };
            // Each interval's metrics use that interval's samples.
            let sampled;
            let plan = match self.sampler.as_mut() {
                Some(s) => {
                    let reports = s.read().map_err(|e| io::Error::other(e.to_string()))?;
                    let mut p = plan.clone();
                    p.set_retire_latency(latencies(&reports, self.mode, true));
                    sampled = p;
                    &sampled
                }
                None => plan,
            };
            if let Some(r) = self.recorder.as_mut() {
                let latencies = self.sampler.is_some().then_some(plan.retire_latency.as_slice());
                if let Err(e) = r
                    .interval(tick.number, tick.at, tick.length, tick.counts, latencies)
                    .map_err(anyhow::Error::from)
                {
                    warn(&format!(
                        "{e:#}; the record stops here, counting goes on and the counts still print"
                    ));
                    self.record_failed = Some(e);
                    self.recorder = None;
                }
            }
            let printer = &mut self.printer;
            printer.interval(plan, &sample, tick.number, tick.at)?;
            printer.interval_notes(plan, &sample, &interval_failures, tick.at)?;
            printer.out().flush()?;
            if printer.out().closed() && !has_workload {
                // Nobody reads a system-wide run any more: end it. With a workload, counting
                // goes on quietly so the workload is not disturbed and its status is kept.
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            Ok(())
        });
        match result {
            Ok(report) => Ok(Some(report)),
            Err(tmetric_runtime::RunError::Report(err))
                if err.kind() == io::ErrorKind::BrokenPipe =>
            {
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// After the run: the sampled latencies, `-r`'s mean and spread, the record's end, the
    /// summary, notes and error bars; the exit status (the workload's, as perf's).
    fn finish<T: Syscalls>(
        self,
        args: &StatArgs,
        layout: &Layout,
        pmus: &PmuModel,
        session: &mut Session<T>,
        report: tmetric_runtime::RunReport,
        mut earlier: Vec<tmetric_runtime::RunReport>,
    ) -> anyhow::Result<i32> {
        let Counting { mut printer, recorder, mut record_failed, sampler, mode } = self;
        let mut sampled: Vec<EventReport> = Vec::new();
        if let Some(s) = sampler {
            let reports = s.stop().context("--record-tpebs")?;
            session.plan_mut().set_retire_latency(latencies(&reports, mode, false));
            report_samples(&reports, args.verbose, *layout == Layout::Json, printer.out())?;
            sampled = reports;
        }
        let elapsed_runs: Option<Vec<f64>> = (!earlier.is_empty())
            .then(|| earlier.iter().chain([&report]).map(|r| r.elapsed.as_secs_f64()).collect());
        let report = if earlier.is_empty() {
            report
        } else {
            earlier.push(report);
            printer.spread =
                tmetric_runtime::RunReport::spread_of(&earlier, session.plan().specs.len());
            tmetric_runtime::RunReport::mean_of(earlier).expect("at least this run")
        };
        // --interval-count, --timeout or SIGUSR1 ended the run and stopped the command: not
        // its failure.
        let stopped = report.stopped;
        if let Some(signal) = report.exit.and_then(|e| e.signal()).filter(|_| !stopped) {
            warn(&format!("the workload was killed by signal {signal} ({})", signal_name(signal)));
        }
        let code = if stopped { 0 } else { report.exit.map_or(0, |e| e.shell_code()) };
        let rusage = report.exit.map(|e| (e.user, e.system));
        let sample =
            EvalInput { counts: &report.totals, seconds: report.elapsed.as_secs_f64(), rusage };
        if let Some(r) = recorder {
            let latencies = args.record_tpebs.then_some(session.plan().retire_latency.as_slice());
            let end = r.finish(&tmetric_record::RunEnd {
                totals: &report.totals,
                elapsed: report.elapsed,
                rusage,
                exit: code,
                intervals: report.ticks,
                samples: &sampled,
                latencies,
                reads: if error_bar_reads(args).is_some() { &report.samples } else { &[] },
            });
            // Said after the counts, which still print.
            record_failed = record_failed.or(end.err().map(Into::into));
        }
        if args.interval.is_none() || args.summary {
            // perf's `ru_display`: user and system time for one run of a command with no
            // other target (-a, -C, -p, -t).
            let task_only =
                args.repeat == 1 && !system_wide(args) && args.pid.is_none() && args.tid.is_empty();
            let mut footer =
                tmetric_print::stat::footer(report.elapsed, rusage.filter(|_| task_only));
            if let Some(elapsed) = &elapsed_runs {
                footer.elapsed_sd = Some(spread_of_mean(elapsed));
                if args.table {
                    footer.runs_table = elapsed.clone();
                }
            }
            footer.null_run = args.null_run;
            footer.nmi_hint = pmus.nmi_watchdog;
            if args.errors {
                printer.error_reads = Some(report.samples.clone());
            }
            printer.summary(session.plan(), &sample, &footer)?;
        }
        let notes =
            printer.notes_for(session.plan(), &sample, &session.failures(), &session.split_notes());
        printer.notes(&notes)?;
        // The block of bars: with -v, or where --errors cannot show them beside the values.
        if args.verbose || (args.errors && !printer.errors_inline()) {
            let bars = session.plan().uncertainties(
                &mut engine::Evaluators::default(),
                &report.samples,
                sample.seconds,
            );
            printer.error_bars(session.plan(), &sample, &bars)?;
        }
        printer.into_inner().finish()?;
        if let Some(e) = record_failed {
            return Err(e.context("the record file is incomplete"));
        }
        Ok(code)
    }
}

/// perf's `exclude_kernel` fallback, said once: events that count user mode only.
pub(super) fn warn_user_only<S: Syscalls>(session: &Session<S>) {
    let user_only = session.user_only();
    if user_only.is_empty() {
        return;
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    warn(&format!(
        "kernel.perf_event_paranoid is {paranoid} and tmetric has no CAP_PERFMON: counting user mode only (exclude_kernel), as perf does, for {}",
        tmetric_text::names_summary(&user_only)
    ));
}

/// The usual name of a signal number.
pub(super) fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// The standard deviation of the mean of `values` (perf's `stddev_stats`).
pub fn spread_of_mean(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (variance / n).sqrt()
}
