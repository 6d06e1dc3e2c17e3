//! One `tmetric stat` run, in the order it happens, as glue between the flags, the engine's
//! session and the printer: the plan, the printer, the target, `-r`'s repeats, the session's
//! run with its intervals (printed and recorded; TPEBS sampling is the session's), then the
//! outcome's summary, notes and the exit status.

use super::*;

/// Runs `tmetric stat` with `sys` on the machine `sysfs` and `proc_root` describe, listing
/// the threads of `-p`/`-t` under `tasks_root`; `simulated` names the simulated PMU, printed
/// with every output.
pub fn run_on<S: Syscalls + Clone>(
    args: &StatArgs,
    sys: S,
    sysfs: &Sysfs,
    proc_root: &Path,
    tasks_root: &Path,
    simulated: Option<&str>,
    record: Option<&tmetric_record::RecordTo>,
) -> anyhow::Result<i32> {
    // Before anything slow: a signal that comes while planning is kept for the run loop.
    let _early_signals =
        tmetric_runtime::signal::catch_stop_signals().context("cannot catch signals")?;
    // perf opens --control's FIFOs while it reads its options, and a refusal there is a
    // usage error (129). They stay open until the run is over.
    let control = match &args.control {
        Some(spec) => Some(
            tmetric_runtime::Control::open(spec)
                .map_err(|e| super::exits::perf_exit(129, format!("--control {spec}: {e}")))?,
        ),
        None => None,
    };
    let layout = args.out.layout();
    // The machine, once for the run. The model's counter numbers (`counter.json`) size its
    // PMU model with or without -M: an `-e` list is scheduled on the same counters.
    let host = Host::probe(sysfs, proc_root, args.metric.model.as_deref());
    // Through the host's tree from here: it lists the PMUs once.
    let sysfs = host.sysfs();
    let model = host.model().ok();
    let Some((owned, topdown)) = topdown_args(args, &layout, &host)? else {
        return Ok(1);
    };
    let MetricModes { groups, metric_only, reset: _smi_reset } =
        metric_modes(&owned.perf, owned.null_run, &host, warn)?;
    let mut owned = owned;
    owned.metric.metrics.extend(groups.iter().map(|g| g.to_string()));
    if let Some(metric_only) = metric_only {
        owned.metric_only = metric_only;
    }
    let args = &owned;
    let pmus = host.pmus();
    if topdown.is_some() && pmus.nmi_watchdog {
        warn_topdown_watchdog(simulated);
    }
    let mut plan = build(args, &host)?;
    let sources =
        LatencySources { file: args.retire_latency.as_deref(), sampled: args.record_tpebs };
    let unused = tpebs::apply_latency_sources(&mut plan, sources)?;
    if let (Some(path), false) = (&args.retire_latency, unused.is_empty()) {
        let path = path.display();
        warn(&format!("--retire-latency {path}: no selected metric reads {}", unused.join(", ")));
    }
    if let Some(name) = simulated {
        warn(&format!(
            "simulated PMU `{name}`: every count below comes from a simulator, not hardware"
        ));
    }
    for warning in plan.warnings() {
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
    let threads = listed_threads(args, tasks_root)?;
    let target = target_of(args, &host, plan.contract(), workload.as_ref(), threads.as_deref())?;
    if args.verbose {
        warn(&tmetric_print::verbose::vendor_tables());
        describe_pmus(pmus);
        describe_plan(&plan);
    }
    printer.split = split_of(args, sysfs, &target);
    // The signal pipe before the events: when descriptors run out, the events say so.
    tmetric_runtime::signal::prepare().context("cannot catch signals")?;
    let mut options = run_options(args, control.as_ref().map(|c| c.fds));
    if args.rotation == "tmetric" {
        options.rotation = plan.rotation();
        // The estimate of the turns a group missed regresses on the reads at every turn
        // (`tmetric_engine::estimate`): they are kept whenever a rotated group has an anchor.
        if options.rotation.is_some() && plan.anchored() {
            options.sample_every.get_or_insert(Duration::from_millis(100));
        }
        // Said now, for the record's header: the run rotates the groups itself.
        plan.set_rotating(options.rotation.as_ref().is_some_and(|r| r.turns.len() > 1));
    } else if (args.errors || args.verbose) && plan.rotation().is_some() {
        // Said once: the bars are honest only about what the reads can show.
        warn(
            "--rotation kernel: the error bars cannot see phases of the workload in step with the kernel's rotation (every read is then equally biased); impossible values are still flagged",
        );
    }
    if args.interval.is_some() && args.repeat > 1 && record.is_some() {
        bail!(
            "-I with -r prints every run's intervals, and a record holds one run's: record without -r, or without -I for the mean of the runs"
        );
    }
    // One read per CPU for the software events, unless something switches events one by one.
    plan.set_software_together(options.control.is_none() && options.rotation.is_none());
    let (earlier, back) = repeats(args, &host, &sys, &plan, printer, &options)?;
    printer = back;
    run_hook(&args.perf, RunHook::Before).map_err(anyhow::Error::msg)?;
    let sys_for_sampler = sys.clone();
    let mut session = Session::open(sys, plan, target, host.env().clone())?;
    super::exits::refuse_an_empty_run(&session)?;
    session.set_affinity(!args.perf.no_affinity);
    // Each interval's bars come from the reads inside it, as the totals' from the run's.
    session.set_interval_bars(error_bar_reads(args).is_some());
    warn_user_only(&session);
    if let Some(threads) = &threads {
        split_threads(args, &session, threads, &mut printer);
    }
    let mode: TpebsMode = args.tpebs_mode.parse().context("--tpebs-mode")?;
    if args.record_tpebs {
        session.start_sampling(sys_for_sampler, sysfs, mode)?;
    }
    let recorder = match record {
        Some(to) => {
            let model = model.map(Model::path);
            let facts = header_facts(args, &session, &printer.split, &host, simulated);
            let facts = tmetric_record::HeaderFacts { model, ..facts };
            let threads = session.counted_threads(threads.as_deref().unwrap_or_default());
            let target = session.target();
            Some(tmetric_record::RecordSink::create(to, &facts, target, threads)?)
        }
        None => None,
    };
    let mut counting = Counting { printer, recorder, record_failed: None };
    let Some(report) = counting.run(&mut session, workload.as_mut(), &options)? else {
        // The reader went away during a system-wide run: nothing more to say, quietly.
        return Ok(0);
    };
    // The counts are the run's whatever the post command does: it is said, not fatal.
    if let Err(why) = run_hook(&args.perf, RunHook::After) {
        warn(&why);
    }
    counting.finish(args, &layout, pmus, &mut session, report, earlier)
}

/// `-r N`: the first N - 1 runs, each as perf runs it (its own `-D`, `--control` and
/// `--timeout`), printing its intervals with `-I` (timed from its own start) and its
/// command's fate; the last run is the caller's. A signal ends the repeats. Returns the
/// runs' reports and the printer.
fn repeats<S: Syscalls + Clone>(
    args: &StatArgs,
    host: &Host,
    sys: &S,
    plan: &Plan,
    printer: Printer,
    options: &RunOptions,
) -> anyhow::Result<(Vec<tmetric_runtime::RunReport>, Printer)> {
    let mut counting = Counting { printer, recorder: None, record_failed: None };
    let mut earlier = Vec::new();
    for _ in 1..args.repeat {
        run_hook(&args.perf, RunHook::Before).map_err(anyhow::Error::msg)?;
        let mut workload = Workload::prepare(&args.command).context("cannot start the workload")?;
        let target = target_of(args, host, plan.contract(), Some(&workload), None)?;
        let mut session = Session::open(sys.clone(), plan.clone(), target, host.env().clone())?;
        super::exits::refuse_an_empty_run(&session)?;
        session.set_affinity(!args.perf.no_affinity);
        session.set_interval_bars(error_bar_reads(args).is_some());
        let Some(report) = counting.run(&mut session, Some(&mut workload), options)? else {
            break;
        };
        if report.interrupted_by.is_some() {
            break;
        }
        super::exits::say_fate(&args.command, &report);
        earlier.push(report);
        run_hook(&args.perf, RunHook::After).map_err(anyhow::Error::msg)?;
    }
    Ok((earlier, counting.printer))
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
/// command. CPUs of `-C` that are not online are refused (perf 6.12), or left out with a
/// warning where the contract counts on the others (perf 7.x: none left, no event opens).
fn target_of(
    args: &StatArgs,
    host: &Host,
    contract: &tmetric_engine::Contract,
    workload: Option<&Workload>,
    threads: Option<&[Thread]>,
) -> anyhow::Result<Target> {
    let counted = if let Some(list) = &args.cpu_list {
        let online = host.online_cpus().context("cannot list the online CPUs")?;
        let (cpus, offline) = tmetric_runtime::target::cpu_list_online(list, &online)?;
        match offline {
            Some(offline) if !contract.needs_an_event => return Err(offline.into()),
            Some(offline) if cpus.is_empty() => {
                return Err(super::exits::perf_exit(
                    1,
                    format!(
                        "No supported events found. {offline}: no event can open on a CPU that is not online; give online CPUs"
                    ),
                ));
            }
            Some(offline) => warn(&format!(
                "{offline}: counting on the online ones, as perf {} does",
                contract.perf
            )),
            None => {}
        }
        Counted::Cpus(cpus)
    } else if let Some(threads) = threads {
        // perf's `-p`: every thread the process has at the start, each with its own counters.
        Counted::Threads(threads)
    } else if args.all_cpus {
        Counted::AllCpus
    } else {
        // With -D the counters are enabled after the delay, not at exec.
        let on_exec = args.delay.is_none_or(|d| d == 0);
        Counted::Command { pid: workload.map_or(0, Workload::pid), on_exec }
    };
    counted.target(host).context("cannot list the online CPUs")
}

/// The threads of `-p`, `-t` and `--per-thread -a`, each with its `comm`, listed once under
/// `tasks_root` (the real `/proc`: a simulated PMU still counts real tasks); `None` for other
/// targets.
fn listed_threads(args: &StatArgs, tasks_root: &Path) -> anyhow::Result<Option<Vec<Thread>>> {
    let which = if let Some(pid) = args.pid {
        Threads::Process(pid)
    } else if !args.tid.is_empty() {
        Threads::Listed(&args.tid)
    } else if args.per_thread && args.all_cpus {
        Threads::All
    } else {
        return Ok(None);
    };
    Ok(Some(threads::list_threads(tasks_root, which)?))
}

/// What a record's header says of the run: the session's facts and the flags.
fn header_facts<'a, S: Syscalls>(
    args: &StatArgs,
    session: &'a Session<S>,
    split: &Partition,
    host: &'a Host,
    simulated: Option<&'a str>,
) -> tmetric_record::HeaderFacts<'a> {
    let selection = tmetric_record::format::Selection {
        metrics: args.metric.metrics.clone(),
        events: args.events.clone(),
        model: args.metric.model.clone(),
        tpebs_mode: args.record_tpebs.then(|| args.tpebs_mode.clone()),
        summary: args.summary,
    };
    let facts = tmetric_record::HeaderFacts::of_session(session, host, selection);
    tmetric_record::HeaderFacts {
        threads: match split {
            Partition::Threads { threads, .. } => threads.clone(),
            _ => Vec::new(),
        },
        skip_zero: matches!(split, Partition::Threads { skip_zero: true, .. }),
        simulated,
        target: target_text(args, simulated),
        system_wide: system_wide(args),
        interval_ms: args.interval,
        aggr_mode: aggregation(args),
        // perf's level for `--per-cache` alone is 5, above its last level (4).
        aggr_level: args.per_cache.as_deref().map_or(0, |l| cache_level(l).unwrap_or(5)),
        ru_display: ru_display(args),
        ..facts
    }
}

/// `-p`/`-t`: says (with -v) how many threads count apart, and `--per-thread` prints each.
fn split_threads<S: Syscalls>(
    args: &StatArgs,
    session: &Session<S>,
    threads: &[Thread],
    printer: &mut Printer,
) {
    let counted = session.counted_threads(threads);
    if args.verbose {
        warn(&format!(
            "counting {} threads apart, as listed at the start{}; a thread started later has no counters of its own: the kernel adds its counts to the counted thread that created it (inherit), as with perf",
            counted.len(),
            if counted.len() == threads.len() {
                String::new()
            } else {
                let gone = threads.len() - counted.len();
                format!(" ({gone} had exited before their counters opened)")
            }
        ));
    }
    if args.per_thread {
        printer.split = Partition::Threads {
            threads: counted.into_iter().map(|(t, comm)| (comm, t)).collect(),
            skip_zero: args.all_cpus,
        };
    }
}

/// The runtime loop's options from the flags (and `--control`'s descriptors).
fn run_options(args: &StatArgs, control: Option<tmetric_runtime::ControlFds>) -> RunOptions {
    RunOptions {
        interval: args.interval.map(Duration::from_millis),
        catch_signals: true,
        // perf's -D takes any integer: a negative one starts disabled.
        delay: args.delay.filter(|&d| d > 0).map(|d| Duration::from_millis(d.unsigned_abs())),
        start_disabled: args.delay.is_some_and(|d| d < 0),
        control,
        say: Some(super::exits::say),
        interval_count: args.interval_count.filter(|&n| n > 0).map(|n| n as usize),
        until_gone: tmetric_runtime::target::watched(args.pid, &args.tid, !args.command.is_empty()),
        timeout: args.timeout.map(Duration::from_millis),
        sample_every: error_bar_reads(args),
        rotation: None,
    }
}

/// The run's outputs while it counts: the printer and the record.
struct Counting {
    printer: Printer,
    recorder: Option<tmetric_record::RecordSink>,
    /// A record file that cannot be written never stops the workload (as `-o`): the record
    /// stops there, counting and printing go on, and the run fails at its end.
    record_failed: Option<anyhow::Error>,
}

impl Counting {
    /// Counts until the workload, the targets, a signal, `--timeout` or `--interval-count`
    /// end it, printing (and recording) each interval; `None` when the reader of a
    /// system-wide run went away.
    fn run<T: Syscalls>(
        &mut self,
        session: &mut Session<T>,
        workload: Option<&mut Workload>,
        options: &RunOptions,
    ) -> anyhow::Result<Option<tmetric_runtime::RunReport>> {
        let has_workload = workload.is_some();
        let split = self.printer.split.clone();
        // The session evaluates each interval once, with that interval's sampled latencies.
        let result = session.run(workload, options, &split, |plan, tick, sample, evaluated| {
            if let Some(r) = self.recorder.as_mut() {
                let latencies = sample.latencies;
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
            printer.tick(plan, sample, evaluated, tick.at)?;
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

    /// After the run: the session's outcome (sampled latencies, `-r`'s mean and spread), the
    /// record's end, the summary, notes and error bars; the exit status (the workload's, as
    /// perf's).
    fn finish<T: Syscalls>(
        self,
        args: &StatArgs,
        layout: &Layout,
        pmus: &PmuModel,
        session: &mut Session<T>,
        report: tmetric_runtime::RunReport,
        earlier: Vec<tmetric_runtime::RunReport>,
    ) -> anyhow::Result<i32> {
        let Counting { mut printer, recorder, mut record_failed } = self;
        if args.perf.forever
            && let Some(signal) = report.interrupted_by
        {
            super::exits::note_interrupted(signal);
            return Ok(0);
        }
        let outcome = session.outcome(report, earlier)?;
        report_samples(&outcome.samples, args.verbose, *layout == Layout::Json, printer.out())?;
        printer.spread = outcome.spread.clone();
        let report = &outcome.report;
        super::exits::say_fate(&args.command, report);
        // perf's exit code is WEXITSTATUS of the workload: 0 when a signal killed it.
        let code = report.exit.and_then(|e| e.code()).unwrap_or(0);
        if args.command.is_empty()
            && let Some(signal) = report.interrupted_by
        {
            super::exits::reraise_later(signal);
        }
        let rusage = report.exit.map(|e| (e.user, e.system));
        // The counts of anchored rotated groups, estimated from the turns' reads.
        let totals = session.plan().estimated(&report.totals, &report.samples);
        if args.verbose && totals != report.totals {
            let plan = session.plan();
            for (s, kind) in plan.estimate_kinds(&report.samples).into_iter().enumerate() {
                if let Some(kind) = kind {
                    warn(&format!("estimate of {}: {kind}", plan.specs()[s].name));
                }
            }
        }
        let sample = EvalInput::new(&totals, report.elapsed.as_secs_f64())
            .with_rusage(rusage)
            .with_latencies(outcome.latencies.as_deref());
        // Evaluated once, for the counts, the notes and the error bars: with bars from the
        // reads when --errors or -v asked for them.
        let reads = error_bar_reads(args).map(|_| report.samples.as_slice());
        let evaluated = session.evaluate_sample(&sample, &printer.split, reads);
        if let Some(r) = recorder {
            let latencies = outcome.latencies.as_deref().filter(|_| args.record_tpebs);
            let read_intervals: Vec<Option<u64>> = if args.interval.is_some() {
                let inside = |k: usize| (k < report.ticks).then_some(k as u64 + 1);
                report.sample_ticks.iter().map(|&k| inside(k)).collect()
            } else {
                Vec::new()
            };
            let end = r.finish(&tmetric_record::RunEnd {
                totals: &report.totals,
                elapsed: report.elapsed,
                rusage,
                exit: code,
                intervals: report.ticks,
                samples: &outcome.samples,
                latencies,
                // Kept for the bars, and for the estimate of rotated groups' counts.
                reads: &report.samples,
                // Which interval each was read inside, so that `report -I` estimates each
                // interval from the reads `stat -I` did.
                read_intervals: &read_intervals,
            });
            // Said after the counts, which still print.
            record_failed = record_failed.or(end.err().map(Into::into));
        }
        let footer = if args.interval.is_none() || args.summary {
            let mut footer =
                tmetric_print::stat::footer(report.elapsed, rusage.filter(|_| ru_display(args)));
            if let Some(sd) = outcome.elapsed_spread() {
                footer.elapsed_sd = Some(sd);
                if args.table {
                    footer.runs_table = outcome.elapsed_runs.clone();
                }
            }
            footer.null_run = args.null_run;
            footer.nmi_hint = pmus.nmi_watchdog;
            Some(footer)
        } else {
            None
        };
        // The block of bars: with -v, or where --errors cannot show them beside the values.
        let bars = args.verbose || (args.errors && !printer.errors_inline());
        printer.totals(session.plan(), &sample, &evaluated, footer.as_ref(), bars)?;
        printer.into_inner().finish()?;
        if let Some(e) = record_failed {
            return Err(e.context("the record file is incomplete"));
        }
        Ok(code)
    }
}

/// perf's `ru_display`: the totals show the workload's user and system time for one run of a
/// command with no other target (`-a`, `-C`, `-p`, `-t`), never for `-r 0` (perf decides
/// before it turns `-r 0` into runs of one).
fn ru_display(args: &StatArgs) -> bool {
    args.repeat == 1
        && !args.perf.forever
        && !system_wide(args)
        && args.pid.is_none()
        && args.tid.is_empty()
}

/// perf's `exclude_kernel` fallback, said once: events that count user mode only.
pub(super) fn warn_user_only<S: Syscalls>(session: &Session<S>) {
    let user_only = session.user_only();
    if user_only.is_empty() {
        return;
    }
    // The machine's value (the simulated machine's under --pmu-sim, whose kernel decided).
    let paranoid = session.env().paranoid.map_or_else(|| "?".to_string(), |p| p.to_string());
    warn(&format!(
        "kernel.perf_event_paranoid is {paranoid} and tmetric has no CAP_PERFMON: counting user mode only (exclude_kernel), as perf does, for {}",
        tmetric_text::names_summary(&user_only)
    ));
}
