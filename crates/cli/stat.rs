//! `tmetric stat`: counts events for a command (or the whole system) through the runtime,
//! evaluates tmetric's common metrics and selected model metrics over the counts, and prints
//! them as `perf stat` does: the default layout, `-x` CSV or `--json` lines, as totals or per
//! `-I` interval. Events that cannot be counted print `<not supported>` with the reason and
//! their metrics `nan`; nothing is estimated.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use tmetric_catalog::{Id, IdKind, MetricResult, Model, Ref};
use tmetric_model::{Evaluator, Literal};
use tmetric_runtime::event::{self, EventError, EventKind, Resolved};
use tmetric_runtime::{CounterEvent, CounterSpec, Counters, Environment, Kernel, RunOptions};
use tmetric_runtime::{Snapshot, Sysfs, Target, Tool, Workload};

use crate::models;
use crate::output::perf_number;

/// `tmetric stat` flags (perf's names where perf has them).
#[derive(Debug, clap::Args)]
#[command(after_help = "Counts go to standard error, as perf's do, unless -o names a file.\n\
    Without -e or -M: task-clock, context-switches, cpu-migrations, page-faults, major-faults \
    and msr/tsc/ (where the msr PMU exists), with every common metric.\n\
    Examples:\n  tmetric stat -- make -j4\n  tmetric stat -a -I 1000 -M Software\n  \
    tmetric stat -e task-clock,cs -x, -- ./bench")]
pub(crate) struct StatArgs {
    /// Count every task on every online CPU instead of the command and its children.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// Print the counts of every MS milliseconds (at least 10).
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    interval: Option<u64>,
    /// With -I, print the totals at the end too.
    #[arg(long, requires = "interval")]
    summary: bool,
    /// Events to count, comma-separated: software and hardware names, `pmu/event/`,
    /// `pmu/term=value,.../`, `subsystem:tracepoint`, tool events, `{a,b}` groups.
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    events: Vec<String>,
    /// Metrics or metric groups, comma-separated: tmetric's common ones (group `Software`)
    /// or those of this machine's CPU model (see --model).
    #[arg(short = 'M', long = "metrics", value_name = "METRICS", value_delimiter = ',')]
    metrics: Vec<String>,
    /// The CPU model whose metrics -M may name (default: the one this machine's cpuid maps to).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// CSV output with this field separator.
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", conflicts_with = "json")]
    separator: Option<String>,
    /// JSON lines output.
    #[arg(short = 'j', long)]
    json: bool,
    /// Write the counts to FILE instead of standard error.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The command to run and count (after `--` when it has options of its own).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

/// The default events, in perf's order; also the order software events of a merged group
/// print in.
const DEFAULT_EVENTS: &[&str] = &[
    "task-clock",
    "cpu-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "minor-faults",
    "major-faults",
    "msr/tsc/",
];

/// Where a printed row's value comes from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// A counter: index into the counter specs.
    Counter(usize),
    /// A value tmetric computes.
    Tool(Tool),
    /// Nothing can count it; the reason.
    Missing(String),
}

/// What makes two needs the same row.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    Counter(tmetric_runtime::Attr),
    Tool(Tool),
    Missing(String),
}

#[derive(Debug)]
struct Row {
    name: String,
    source: Source,
    key: Key,
    unit: String,
    /// The printed count is the raw count times this (1e-6 for `msec` clocks).
    scale: f64,
    show: bool,
    /// `(table, metric)` printed on this row.
    metrics: Vec<(usize, usize)>,
}

/// One model's metrics to evaluate.
struct Table {
    model: &'static Model,
    evaluator: Evaluator,
    roots: Vec<usize>,
    /// Per input slot: the row that feeds it.
    slot_rows: Vec<Option<usize>>,
}

/// The counters' order, grouping and metrics.
struct Plan {
    rows: Vec<Row>,
    specs: Vec<CounterSpec>,
    events: Vec<CounterEvent>,
    groups: Vec<Vec<usize>>,
    grouped: Vec<bool>,
    /// The group software and msr events of metrics share: they take no hardware counter,
    /// so one group can hold them all and each prints once.
    soft_group: Option<usize>,
    tables: Vec<Table>,
}

impl Plan {
    fn find(&self, key: &Key) -> Option<usize> {
        self.rows.iter().position(|r| &r.key == key)
    }

    fn add(&mut self, resolution: Resolution, name: String, show: bool) -> usize {
        let (source, key, unit, scale) = match resolution {
            Resolution::Counter(event) => {
                let key = Key::Counter(event.attr.clone());
                let clock = event.kind == EventKind::Software && (event.attr.config <= 1);
                let (unit, scale) = if clock {
                    ("msec".to_string(), 1e-6)
                } else {
                    (event.unit.clone().unwrap_or_default(), event.scale.unwrap_or(1.0))
                };
                self.specs.push(CounterSpec::from(&event));
                self.events.push(event);
                self.grouped.push(false);
                (Source::Counter(self.specs.len() - 1), key, unit, scale)
            }
            Resolution::Tool(tool) => (Source::Tool(tool), Key::Tool(tool), "ns".to_string(), 1.0),
            Resolution::Missing(reason) => {
                (Source::Missing(reason), Key::Missing(name.clone()), String::new(), 1.0)
            }
        };
        self.rows.push(Row { name, source, key, unit, scale, show, metrics: Vec::new() });
        self.rows.len() - 1
    }

    /// Puts the counters of `rows` not yet in a group into one, or into the shared software
    /// group when none of them needs a hardware counter.
    fn group(&mut self, rows: &[usize]) {
        let fresh: Vec<usize> = rows
            .iter()
            .filter_map(|&r| match self.rows[r].source {
                Source::Counter(spec) if !self.grouped[spec] => Some(spec),
                _ => None,
            })
            .collect();
        if fresh.is_empty() {
            return;
        }
        for &spec in &fresh {
            self.grouped[spec] = true;
        }
        let counterless = fresh.iter().all(|&s| match &self.events[s].kind {
            EventKind::Software | EventKind::Tracepoint => true,
            EventKind::Pmu(pmu) => pmu == "msr",
            EventKind::Hardware => false,
        });
        match (counterless, self.soft_group) {
            (true, Some(g)) => self.groups[g].extend(fresh),
            (true, None) => {
                self.soft_group = Some(self.groups.len());
                self.groups.push(fresh);
            }
            (false, _) => self.groups.push(fresh),
        }
    }
}

/// How a metric input is counted on this machine.
enum Resolution {
    Counter(CounterEvent),
    Tool(Tool),
    Missing(String),
}

fn from_event_result(
    result: Result<Resolved, EventError>,
    display: &str,
    env: &Environment,
) -> Resolution {
    match result {
        Ok(Resolved::Counter(mut event)) => {
            event.name = display.to_string();
            Resolution::Counter(event)
        }
        Ok(Resolved::Tool(tool)) => Resolution::Tool(tool),
        Err(EventError::NoPmu { pmu, .. }) if models_core_pmu(&pmu) => {
            Resolution::Missing(env.no_hardware_pmu().to_string())
        }
        Err(EventError::NoPmu { pmu, .. }) => {
            Resolution::Missing(format!("this machine has no `{pmu}` PMU"))
        }
        Err(err) => Resolution::Missing(err.to_string()),
    }
}

fn models_core_pmu(pmu: &str) -> bool {
    crate::output::is_core_pmu(pmu)
}

/// The printed name of a model input: perf's `pmu@terms@` spelled `pmu/terms/`.
fn id_name(model: &Model, id: &Id) -> String {
    model.str(id.text).replace('@', "/")
}

fn resolve_id(model: &Model, id: &Id, sysfs: &Sysfs, env: &Environment) -> Resolution {
    let display = id_name(model, id);
    if id.retire_latency {
        return Resolution::Missing(
            "a retire latency (`R`) comes from sampling, which tmetric stat does not do".into(),
        );
    }
    let modifiers = model.str(id.modifiers);
    let with_terms = |event: &str| {
        let terms = model.str(id.terms);
        if terms.is_empty() { event.to_string() } else { format!("{event},{terms}") }
    };
    match id.kind {
        IdKind::Tool(tool) => Resolution::Tool(match tool {
            tmetric_catalog::Tool::DurationTime => Tool::DurationTime,
            tmetric_catalog::Tool::UserTime => Tool::UserTime,
            tmetric_catalog::Tool::SystemTime => Tool::SystemTime,
        }),
        IdKind::Kernel => {
            let event = model.str(id.event);
            let text = if modifiers.is_empty() {
                event.to_string()
            } else {
                format!("{event}:{modifiers}")
            };
            from_event_result(event::resolve(&text, sysfs), &display, env)
        }
        IdKind::Sysfs => {
            let pmu = model.str(id.pmu);
            let terms = with_terms(model.str(id.event));
            let result = event::resolve_on_pmu(pmu, &terms, modifiers, &display, sysfs);
            from_event_result(result.map(Resolved::Counter), &display, env)
        }
        IdKind::Event(index) => {
            let json = model.events.at(index as usize);
            let pmu = model.str(json.pmu);
            let pmu = if models_core_pmu(pmu) && !sysfs.has_pmu(pmu) {
                match sysfs.core_pmu() {
                    Some(core) => core,
                    None => return Resolution::Missing(env.no_hardware_pmu().to_string()),
                }
            } else {
                pmu.to_string()
            };
            let terms = with_terms(model.str(json.encoding));
            let result = event::resolve_on_pmu(&pmu, &terms, modifiers, &display, sysfs);
            from_event_result(result.map(Resolved::Counter), &display, env)
        }
        IdKind::Probe => {
            Resolution::Missing("only an argument of has_event() or strcmp_cpuid_str()".into())
        }
    }
}

fn resolution_key(resolution: &Resolution, name: &str) -> Key {
    match resolution {
        Resolution::Counter(event) => Key::Counter(event.attr.clone()),
        Resolution::Tool(tool) => Key::Tool(*tool),
        Resolution::Missing(_) => Key::Missing(name.to_string()),
    }
}

/// Machine literals for metric expressions, from sysfs and `/proc/cpuinfo`.
fn literals(sysfs: &Sysfs, system_wide: bool) -> [f64; Literal::COUNT] {
    let mut values = [f64::NAN; Literal::COUNT];
    if let Ok(t) = sysfs.topology() {
        values[Literal::NumCpus.index()] = t.num_cpus as f64;
        values[Literal::NumCpusOnline.index()] = t.online.len() as f64;
        values[Literal::NumCores.index()] = t.cores as f64;
        values[Literal::NumDies.index()] = t.dies as f64;
        values[Literal::NumPackages.index()] = t.packages as f64;
        values[Literal::SmtOn.index()] = f64::from(u8::from(t.smt_on));
        // perf's core_wide(): whole cores are counted without SMT, or system-wide.
        values[Literal::CoreWide.index()] = f64::from(u8::from(!t.smt_on || system_wide));
    }
    if let Some(core) = sysfs.core_pmu()
        && let Ok(text) = std::fs::read_to_string(sysfs.pmu_devices().join(core).join("caps/slots"))
        && let Some(slots) = tmetric_runtime::sysfs::parse_number(&text)
    {
        values[Literal::Slots.index()] = slots as f64;
    }
    values[Literal::HasPmem.index()] =
        f64::from(u8::from(sysfs.root().join("firmware/acpi/tables/NFIT").exists()));
    if let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") {
        values[Literal::SystemTscFreq.index()] = tsc_from_model_name(&cpuinfo);
    }
    values
}

/// perf's fallback for `#system_tsc_freq` on x86: the `@ 2.10GHz` of the model name.
fn tsc_from_model_name(cpuinfo: &str) -> f64 {
    let Some(line) = cpuinfo.lines().find(|l| l.starts_with("model name")) else { return f64::NAN };
    let Some((_, after)) = line.split_once('@') else { return f64::NAN };
    let text = after.trim();
    let Some(number) = text.strip_suffix("GHz") else { return f64::NAN };
    number.trim().parse::<f64>().map_or(f64::NAN, |ghz| ghz * 1e9)
}

/// The model -M items not among the common metrics come from.
fn host_model(args: &StatArgs, sysfs: &Sysfs) -> anyhow::Result<&'static Model> {
    if let Some(name) = &args.model {
        return models::find_model(name);
    }
    let cpuid = std::env::var("PERF_CPUID")
        .ok()
        .or_else(|| tmetric_runtime::sysfs::host_cpuid(sysfs, Path::new("/proc")))
        .context("cannot tell this machine's cpuid (no x86 /proc/cpuinfo fields or arm64 midr_el1); name a model with --model")?;
    tmetric_catalog::model_for_cpuid(&cpuid).with_context(|| {
        format!("no model of the catalogue matches this machine's cpuid `{cpuid}`; name one with --model")
    })
}

/// The metrics a `-M` list selects, as `(model, metric)` pairs in order.
fn select(args: &StatArgs, sysfs: &Sysfs) -> anyhow::Result<Vec<(&'static Model, usize)>> {
    let common = tmetric_catalog::common();
    let mut host: Option<&'static Model> = None;
    let mut chosen: Vec<(&'static Model, usize)> = Vec::new();
    for item in args.metrics.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let mut found: Vec<(&'static Model, usize)> =
            common.select(item).into_iter().map(|m| (common, m)).collect();
        if found.is_empty() {
            let model = match host {
                Some(model) => model,
                None => *host.insert(host_model(args, sysfs).with_context(|| {
                    format!("`{item}` is not a common metric or group, so it must be a CPU model's")
                })?),
            };
            found = model.select(item).into_iter().map(|m| (model, m)).collect();
            if found.is_empty() {
                let names = [common, model].into_iter().flat_map(|m| {
                    m.metrics.iter().flat_map(move |x| {
                        std::iter::once(m.str(x.name).to_string()).chain(
                            m.str(x.groups).split(';').filter(|g| !g.is_empty()).map(String::from),
                        )
                    })
                });
                let close = models::closest(item, names, 5);
                let hint = if close.is_empty() {
                    format!("`tmetric list metrics --model {}` lists them", model.path())
                } else {
                    format!("did you mean {}?", models::join_code(&close))
                };
                bail!(
                    "cannot find metric or group `{item}` among the common metrics or those of {}; {hint}",
                    model.path()
                );
            }
        }
        for pick in found {
            if !chosen.iter().any(|c| std::ptr::eq(c.0, pick.0) && c.1 == pick.1) {
                chosen.push(pick);
            }
        }
    }
    Ok(chosen)
}

fn table_index(plan: &mut Plan, model: &'static Model, literals: &[f64; Literal::COUNT]) -> usize {
    if let Some(i) = plan.tables.iter().position(|t| std::ptr::eq(t.model, model)) {
        return i;
    }
    let mut evaluator = Evaluator::new(model);
    evaluator.literals = *literals;
    plan.tables.push(Table {
        model,
        evaluator,
        roots: Vec::new(),
        slot_rows: vec![None; model.ids.len()],
    });
    plan.tables.len() - 1
}

fn rank(name: &str) -> usize {
    DEFAULT_EVENTS.iter().position(|d| *d == name).unwrap_or(DEFAULT_EVENTS.len())
}

/// Adds metric `metric` of table `t`: rows for its inputs (shared with existing rows of the
/// same event), a group for its new counters, and the row it prints on.
fn add_metric(
    plan: &mut Plan,
    t: usize,
    metric: usize,
    sysfs: &Sysfs,
    env: &Environment,
    show_tools: bool,
) {
    let model = plan.tables[t].model;
    if plan.tables[t].roots.contains(&metric) {
        return;
    }
    plan.tables[t].roots.push(metric);
    let facts_literals = plan.tables[t].evaluator.literals;
    let probes = plan.tables[t].evaluator.probes.clone();
    let facts = tmetric_catalog::Facts { literals: &facts_literals, probes: &probes };
    let mut slots = model.needed_ids(metric, &facts, false).unwrap_or_default();
    slots.sort_by_key(|&s| rank(&id_name(model, &model.ids[s as usize])));
    let mut rows = Vec::new();
    for slot in slots {
        let id = &model.ids[slot as usize];
        let name = id_name(model, id);
        let resolution = resolve_id(model, id, sysfs, env);
        let key = resolution_key(&resolution, &name);
        let row = match plan.find(&key) {
            Some(row) => {
                if matches!(plan.rows[row].source, Source::Tool(_)) && show_tools {
                    plan.rows[row].show = true;
                }
                row
            }
            None => {
                let show = show_tools || !matches!(resolution, Resolution::Tool(_));
                plan.add(resolution, name, show)
            }
        };
        plan.tables[t].slot_rows[slot as usize] = Some(row);
        rows.push(row);
    }
    plan.group(&rows);
    // perf prints a metric on its first event's line; expression order decides which.
    let direct: Vec<u16> = model.metrics[metric]
        .needed_refs(&facts)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| match r {
            Ref::Id(slot) => Some(slot),
            Ref::Metric(_) => None,
        })
        .collect();
    let slot_row = |slot: u16| plan.tables[t].slot_rows[slot as usize];
    let host = direct
        .iter()
        .chain(model.needed_ids(metric, &facts, false).unwrap_or_default().iter())
        .filter_map(|&s| slot_row(s))
        .find(|&r| !matches!(plan.rows[r].source, Source::Tool(_)))
        .or_else(|| rows.first().copied());
    match host {
        Some(row) => {
            plan.rows[row].show = true;
            plan.rows[row].metrics.push((t, metric));
        }
        None => {
            // A metric of literals only still needs a line: give it a tool-less one.
            let row = plan.add(Resolution::Tool(Tool::DurationTime), "duration_time".into(), true);
            plan.rows[row].metrics.push((t, metric));
        }
    }
}

/// Builds the plan from the flags.
fn build(args: &StatArgs, sysfs: &Sysfs, env: &Environment) -> anyhow::Result<Plan> {
    let mut plan = Plan {
        rows: Vec::new(),
        specs: Vec::new(),
        events: Vec::new(),
        groups: Vec::new(),
        grouped: Vec::new(),
        soft_group: None,
        tables: Vec::new(),
    };
    let literals = literals(sysfs, args.all_cpus);
    let common = tmetric_catalog::common();
    for list in &args.events {
        for group in event::split_list(list).with_context(|| format!("-e {list}"))? {
            let mut rows = Vec::new();
            for text in group {
                let resolution =
                    match event::resolve(&text, sysfs).with_context(|| format!("-e {list}"))? {
                        Resolved::Counter(event) => Resolution::Counter(event),
                        Resolved::Tool(tool) => Resolution::Tool(tool),
                    };
                rows.push(plan.add(resolution, text.clone(), true));
            }
            // A user's group is opened as given, hardware or not.
            let specs: Vec<usize> = rows
                .iter()
                .filter_map(|&r| match plan.rows[r].source {
                    Source::Counter(s) => Some(s),
                    _ => None,
                })
                .collect();
            for &s in &specs {
                plan.grouped[s] = true;
            }
            if !specs.is_empty() {
                plan.groups.push(specs);
            }
        }
    }
    let mut picks = select(args, sysfs)?;
    let explicit = !args.metrics.is_empty();
    if args.events.is_empty() && !explicit {
        // perf's default view: the software events and every common metric; tsc_rate only
        // where the msr PMU exists, since nobody asked for it.
        picks = (0..common.metrics.len())
            .filter(|&m| common.str(common.metrics[m].name) != "tsc_rate" || sysfs.has_pmu("msr"))
            .map(|m| (common, m))
            .collect();
    } else if !explicit {
        // Like perf's shadow metrics: the common metrics whose events were all asked for.
        let probes = vec![0.0; common.ids.len()];
        let facts = tmetric_catalog::Facts { literals: &literals, probes: &probes };
        for m in 0..common.metrics.len() {
            let slots = common.needed_ids(m, &facts, false).unwrap_or_default();
            let all_there = slots.iter().all(|&s| {
                let id = &common.ids[s as usize];
                let resolution = resolve_id(common, id, sysfs, env);
                let key = resolution_key(&resolution, &id_name(common, id));
                matches!(key, Key::Tool(_)) || plan.find(&key).is_some()
            });
            if all_there && !slots.is_empty() {
                picks.push((common, m));
            }
        }
    }
    // perf orders metrics by how many events they need, most first (spec C3).
    let mut order: Vec<(usize, (&'static Model, usize))> = picks.into_iter().enumerate().collect();
    order.sort_by_key(|(i, (model, m))| {
        let probes = vec![0.0; model.ids.len()];
        let facts = tmetric_catalog::Facts { literals: &literals, probes: &probes };
        let counted = model
            .needed_ids(*m, &facts, false)
            .unwrap_or_default()
            .iter()
            .filter(|&&s| !matches!(model.ids[s as usize].kind, IdKind::Tool(_)))
            .count();
        (std::cmp::Reverse(counted), *i)
    });
    for (_, (model, metric)) in order {
        let t = table_index(&mut plan, model, &literals);
        add_metric(&mut plan, t, metric, sysfs, env, explicit);
    }
    // Within the shared software group, perf's default order (task-clock leads). Rows print
    // in the order they were added: -e events as given, then each metric's new events.
    if let Some(g) = plan.soft_group {
        let names: Vec<String> = plan.specs.iter().map(|s| s.name.clone()).collect();
        plan.groups[g].sort_by_key(|&s| rank(&names[s]));
    }
    Ok(plan)
}

/// The inputs of one evaluation: counts, the span they cover, the workload's rusage.
struct Sample<'a> {
    counts: &'a Snapshot,
    seconds: f64,
    rusage: Option<(Duration, Duration)>,
}

/// A row's printed state.
enum Shown {
    NotSupported,
    NotCounted,
    Value { count: f64, running: u64, enabled: u64 },
}

fn shown(row: &Row, sample: &Sample<'_>) -> Shown {
    match &row.source {
        Source::Counter(spec) => match sample.counts.aggregate(*spec) {
            None => Shown::NotSupported,
            Some(a) if !a.counted() => Shown::NotCounted,
            Some(a) => Shown::Value {
                count: a.value as f64 * row.scale,
                running: a.running,
                enabled: a.enabled,
            },
        },
        Source::Tool(tool) => {
            let seconds = match tool {
                Tool::DurationTime => Some(sample.seconds),
                Tool::UserTime => sample.rusage.map(|r| r.0.as_secs_f64()),
                Tool::SystemTime => sample.rusage.map(|r| r.1.as_secs_f64()),
            };
            match seconds {
                Some(s) => {
                    let ns = (s * 1e9).round();
                    Shown::Value { count: ns, running: ns as u64, enabled: ns as u64 }
                }
                None => Shown::NotCounted,
            }
        }
        Source::Missing(_) => Shown::NotSupported,
    }
}

/// The value a metric expression sees for a row: raw counts (spec E11), seconds for tools,
/// 0 for a counter that never ran and NaN for one that could not be counted (spec C6).
fn metric_input(row: &Row, sample: &Sample<'_>) -> f64 {
    match &row.source {
        Source::Counter(spec) => match sample.counts.aggregate(*spec) {
            None => f64::NAN,
            Some(a) if !a.counted() => 0.0,
            Some(a) => a.value as f64,
        },
        Source::Tool(Tool::DurationTime) => sample.seconds,
        Source::Tool(Tool::UserTime) => sample.rusage.map_or(f64::NAN, |r| r.0.as_secs_f64()),
        Source::Tool(Tool::SystemTime) => sample.rusage.map_or(f64::NAN, |r| r.1.as_secs_f64()),
        Source::Missing(_) => f64::NAN,
    }
}

/// Evaluates every table over `sample`; results per table, in root order.
fn evaluate(plan: &mut Plan, sample: &Sample<'_>) -> Vec<Vec<MetricResult>> {
    let inputs: Vec<f64> = plan.rows.iter().map(|r| metric_input(r, sample)).collect();
    plan.tables
        .iter_mut()
        .map(|table| {
            for (slot, row) in table.slot_rows.iter().enumerate() {
                table.evaluator.values[slot] = row.map_or(f64::NAN, |r| inputs[r]);
            }
            let roots = table.roots.clone();
            table.evaluator.evaluate(table.model, &roots)
        })
        .collect()
}

/// The output layout.
#[derive(Debug, Clone, PartialEq)]
enum Layout {
    Std,
    Csv(String),
    Json,
}

/// `1234567.5` as `1,234,567.50` (2 decimals) or `1,234,568` (none).
fn grouped_number(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (sign, digits) = text.strip_prefix('-').map_or(("", text.as_str()), |d| ("-", d));
    let (int, frac) = digits.split_once('.').map_or((digits, None), |(i, f)| (i, Some(f)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{out}.{f}"),
        None => format!("{sign}{out}"),
    }
}

/// perf prints counts of scaled events (`msec`, `Joules`) with 2 decimals, others without.
fn count_decimals(row: &Row) -> usize {
    if row.scale == 1.0 { 0 } else { 2 }
}

/// A metric's label: `"<unit>  <name>"` with a ScaleUnit, else the name (spec D2).
fn metric_label(model: &Model, metric: usize) -> String {
    let m = &model.metrics[metric];
    let name = model.str(m.name);
    if m.has_scale_unit { format!("{}  {name}", model.str(m.unit)) } else { name.to_string() }
}

/// perf's CSV metric value: printed, then cut to its leading digits and dots, so NaN and
/// negative values print empty.
fn csv_metric(value: f64, has_scale_unit: bool) -> String {
    let text = perf_number(value, has_scale_unit);
    text.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect()
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn c_float(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{value:.6}")
    }
}

struct Printer {
    out: Box<dyn Write>,
    layout: Layout,
}

impl Printer {
    /// Prints every shown row of `sample`; `at` is the interval timestamp.
    fn rows(
        &mut self,
        plan: &mut Plan,
        sample: &Sample<'_>,
        at: Option<Duration>,
    ) -> io::Result<()> {
        let results = evaluate(plan, sample);
        let result_of = |t: usize, m: usize| -> &MetricResult {
            let i = plan.tables[t].roots.iter().position(|&r| r == m).expect("a root");
            &results[t][i]
        };
        let prefix = match (&self.layout, at) {
            (Layout::Std, Some(at)) => format!("{:>6}.{:09} ", at.as_secs(), at.subsec_nanos()),
            (Layout::Csv(sep), Some(at)) => {
                format!("{}.{:09}{sep}", at.as_secs(), at.subsec_nanos())
            }
            (Layout::Json, Some(at)) => {
                format!("\"interval\" : {}.{:09}, ", at.as_secs(), at.subsec_nanos())
            }
            (_, None) => String::new(),
        };
        for row in plan.rows.iter().filter(|r| r.show) {
            let state = shown(row, sample);
            let metrics: Vec<(String, f64, bool)> = row
                .metrics
                .iter()
                .map(|&(t, m)| {
                    let model = plan.tables[t].model;
                    let result = result_of(t, m);
                    (metric_label(model, m), result.scaled(model), model.metrics[m].has_scale_unit)
                })
                .collect();
            let (running, enabled) = match state {
                Shown::Value { running, enabled, .. } => (running, enabled),
                _ => (0, 0),
            };
            match &self.layout {
                Layout::Std => {
                    let count = match state {
                        Shown::NotSupported => "<not supported>".to_string(),
                        Shown::NotCounted => "<not counted>".to_string(),
                        Shown::Value { count, .. } => grouped_number(count, count_decimals(row)),
                    };
                    let mut line = format!("{prefix}{count:>18} {:<4} {:<32}", row.unit, row.name);
                    let run = (running != enabled)
                        .then(|| format!("  ({:.2}%)", 100.0 * running as f64 / enabled as f64));
                    if metrics.is_empty()
                        && let Some(run) = &run
                    {
                        line.push_str(&" ".repeat(38));
                        line.push_str(run);
                    }
                    for (i, (label, value, scaled)) in metrics.iter().enumerate() {
                        if i > 0 {
                            writeln!(self.out, "{}", line.trim_end())?;
                            line = format!("{prefix}{}", " ".repeat(49));
                        }
                        let number = perf_number(*value, *scaled);
                        let width = 38usize.saturating_sub(3 + number.len() + 1);
                        line.push_str(&format!(" # {number} {label:<width$}"));
                        if i + 1 == metrics.len()
                            && let Some(run) = &run
                        {
                            line.push_str(run);
                        }
                    }
                    writeln!(self.out, "{}", line.trim_end())?;
                }
                Layout::Csv(sep) => {
                    let count = match state {
                        Shown::NotSupported => "<not supported>".to_string(),
                        Shown::NotCounted => "<not counted>".to_string(),
                        Shown::Value { count, .. } => format!("{count:.*}", count_decimals(row)),
                    };
                    let percent = if running == enabled {
                        100.0
                    } else {
                        100.0 * running as f64 / enabled as f64
                    };
                    let head = format!(
                        "{prefix}{count}{sep}{}{sep}{}{sep}{running}{sep}{percent:.2}",
                        row.unit, row.name
                    );
                    if metrics.is_empty() {
                        writeln!(self.out, "{head}{sep}{sep}")?;
                    }
                    for (i, (label, value, scaled)) in metrics.iter().enumerate() {
                        let lead = if i == 0 {
                            head.clone()
                        } else {
                            format!("{prefix}{}", sep.repeat(4))
                        };
                        writeln!(
                            self.out,
                            "{lead}{sep}{}{sep}{label}",
                            csv_metric(*value, *scaled)
                        )?;
                    }
                }
                Layout::Json => {
                    let count = match state {
                        Shown::NotSupported => json_string("<not supported>"),
                        Shown::NotCounted => json_string("<not counted>"),
                        Shown::Value { count, .. } => json_string(&c_float(count)),
                    };
                    let percent = if running == enabled {
                        100.0
                    } else {
                        100.0 * running as f64 / enabled as f64
                    };
                    let head = format!(
                        "{{{prefix}\"counter-value\" : {count}, \"unit\" : {}, \"event\" : {}, \"event-runtime\" : {running}, \"pcnt-running\" : {percent:.2}",
                        json_string(&row.unit),
                        json_string(&row.name)
                    );
                    if metrics.is_empty() {
                        writeln!(self.out, "{head}}}")?;
                    }
                    for (i, (label, value, _)) in metrics.iter().enumerate() {
                        let lead = if i == 0 { format!("{head}, ") } else { format!("{{{prefix}") };
                        writeln!(
                            self.out,
                            "{lead}\"metric-value\" : {}, \"metric-unit\" : {}}}",
                            json_string(&c_float(*value)),
                            json_string(label)
                        )?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Why rows print `<not supported>`/`<not counted>` and metrics `nan`.
fn notes(
    plan: &mut Plan,
    counters: &Counters<Kernel>,
    env: &Environment,
    sample: &Sample<'_>,
) -> Vec<String> {
    // Events with the same explanation share one note: a TMA group without a PMU would
    // otherwise repeat it dozens of times.
    let mut events: Vec<(String, Vec<String>)> = Vec::new();
    for row in plan.rows.iter().filter(|r| r.show || !r.metrics.is_empty()) {
        let why = match (&row.source, shown(row, sample)) {
            (Source::Missing(reason), _) => format!("<not supported>: {reason}"),
            (Source::Counter(spec), Shown::NotSupported) => match counters.failure(*spec) {
                Some(failure) => {
                    let cpu = failure.cpu.map(|c| format!(" (on CPU {c})")).unwrap_or_default();
                    format!("<not supported>{cpu}: {}", env.explain(failure.errno, &plan.events[*spec]))
                }
                None => continue,
            },
            (Source::Counter(_), Shown::NotCounted) => {
                "<not counted>: it never ran on a counter (the workload may have ended before it started)"
                    .to_string()
            }
            _ => continue,
        };
        match events.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(row.name.clone()),
            None => events.push((why, vec![row.name.clone()])),
        }
    }
    let mut notes: Vec<String> =
        events.into_iter().map(|(why, names)| format!("{}: {why}", names.join(", "))).collect();
    let results = evaluate(plan, sample);
    for (t, table_results) in results.iter().enumerate() {
        let model = plan.tables[t].model;
        for result in table_results {
            let name = model.str(model.metrics[result.metric].name);
            if let Some(fail) = result.failure {
                notes.push(format!("{name}: no value: {fail}"));
            } else if result.value.is_nan() && !result.missing.is_empty() {
                let names: Vec<String> = result
                    .missing
                    .iter()
                    .map(|&slot| {
                        plan.tables[t].slot_rows[slot as usize].map_or_else(
                            || id_name(model, &model.ids[slot as usize]),
                            |r| plan.rows[r].name.clone(),
                        )
                    })
                    .collect();
                notes.push(format!(
                    "{name}: nan: needs {} which could not be counted",
                    names.join(", ")
                ));
            }
        }
    }
    notes
}

fn command_text(command: &[OsString]) -> String {
    command.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
}

/// Runs `tmetric stat`; returns the exit code (the workload's, as perf does).
pub(crate) fn run(args: &StatArgs) -> anyhow::Result<i32> {
    if args.command.is_empty() && !args.all_cpus {
        bail!(
            "give a command to count (`tmetric stat -- COMMAND ...`), or -a to count the whole system until Ctrl-C"
        );
    }
    if let Some(ms) = args.interval
        && ms < 10
    {
        bail!("-I {ms}: the interval must be at least 10 ms");
    }
    let layout = match (&args.separator, args.json) {
        (Some(sep), _) => Layout::Csv(sep.clone()),
        (None, true) => Layout::Json,
        (None, false) => Layout::Std,
    };
    let sysfs = Sysfs::system();
    let env = Environment::probe(&sysfs, Path::new("/proc"));
    let mut plan = build(args, &sysfs, &env)?;
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(BufWriter::new(
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(io::stderr()),
    };
    let mut printer = Printer { out, layout: layout.clone() };

    let mut workload = if args.command.is_empty() {
        None
    } else {
        Some(Workload::prepare(&args.command).context("cannot start the workload")?)
    };
    let target = if args.all_cpus {
        Target::Cpus(sysfs.online_cpus().context("cannot list the online CPUs")?)
    } else {
        Target::Task { pid: workload.as_ref().map_or(0, Workload::pid), on_exec: true }
    };
    let mut counters = Counters::open(Kernel, plan.specs.clone(), &plan.groups, target.clone())?;
    let options =
        RunOptions { interval: args.interval.map(Duration::from_millis), catch_signals: true };
    let report = {
        let plan = &mut plan;
        let printer = &mut printer;
        tmetric_runtime::run(&mut counters, &target, workload.as_mut(), &options, |tick| {
            if layout == Layout::Std && (tick.number - 1) % 25 == 0 {
                writeln!(printer.out, "#           time             counts unit events")?;
            }
            let sample =
                Sample { counts: tick.counts, seconds: tick.length.as_secs_f64(), rusage: None };
            printer.rows(plan, &sample, Some(tick.at))?;
            printer.out.flush()
        })?
    };
    let rusage = report.exit.map(|e| (e.user, e.system));
    let sample = Sample { counts: &report.totals, seconds: report.elapsed.as_secs_f64(), rusage };
    if args.interval.is_none() || args.summary {
        if layout == Layout::Std {
            let what =
                if args.all_cpus { "system wide".to_string() } else { command_text(&args.command) };
            writeln!(printer.out, "\n Performance counter stats for '{what}':\n")?;
        }
        printer.rows(&mut plan, &sample, None)?;
        if layout == Layout::Std {
            writeln!(
                printer.out,
                "\n {:>17.9} seconds time elapsed",
                report.elapsed.as_secs_f64()
            )?;
            if let Some((user, system)) = rusage {
                writeln!(printer.out, "\n {:>17.9} seconds user", user.as_secs_f64())?;
                writeln!(printer.out, " {:>17.9} seconds sys", system.as_secs_f64())?;
            }
            writeln!(printer.out)?;
        }
    }
    let notes = notes(&mut plan, &counters, &env, &sample);
    if !notes.is_empty() {
        if layout == Layout::Std {
            writeln!(printer.out, " Notes:")?;
            for note in &notes {
                writeln!(printer.out, "   {note}")?;
            }
            writeln!(printer.out)?;
        } else {
            // Keep CSV and JSON parseable: explanations go to standard error.
            for note in &notes {
                eprintln!("tmetric: {note}");
            }
        }
    }
    printer.out.flush()?;
    Ok(report.exit.map_or(0, |e| e.shell_code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_group_like_perf() {
        assert_eq!(grouped_number(1234567.0, 0), "1,234,567");
        assert_eq!(grouped_number(999.0, 0), "999");
        assert_eq!(grouped_number(1000.0, 0), "1,000");
        assert_eq!(grouped_number(1234.567, 2), "1,234.57");
        assert_eq!(grouped_number(0.54, 2), "0.54");
        assert_eq!(grouped_number(-1234.0, 0), "-1,234");
    }

    #[test]
    fn csv_metrics_keep_only_leading_digits() {
        assert_eq!(csv_metric(2.5, true), "2.5");
        assert_eq!(csv_metric(0.123456, false), "0.12");
        assert_eq!(csv_metric(f64::NAN, true), "");
        assert_eq!(csv_metric(-3.0, false), "");
    }

    #[test]
    fn tsc_frequency_from_the_model_name() {
        let text = "model name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n";
        assert_eq!(tsc_from_model_name(text), 2.1e9);
        assert!(tsc_from_model_name("model name\t: AMD EPYC\n").is_nan());
    }

    #[test]
    fn floats_print_as_c_does() {
        assert_eq!(c_float(0.5), "0.500000");
        assert_eq!(c_float(f64::NAN), "nan");
    }
}
