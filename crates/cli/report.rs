//! `tmetric report -i FILE`: evaluates and prints recorded counts with `stat`'s printer. The
//! file is a `tmetric record` file (JSON lines, `record.rs`) or a `perf stat record`
//! perf.data file (told apart by perf's magic; read by `tmetric_perfstat::perfdata`). The
//! recorded plan is rebuilt row for row, so the recorded metrics give the values `stat`
//! printed; `-M` adds any metric whose inputs were counted (by event name, preferring one
//! group), and `--model` evaluates with another model's formulas.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use tmetric_catalog::Model;
use tmetric_engine::plan::{id_name, needed_slots};
use tmetric_engine::{Placement, Plan, Resolution, Root, Sample, Select, Source};
use tmetric_model::literal::Literal;
use tmetric_perfstat::perfdata::{self, PerfData, RoundKind};
use tmetric_runtime::counter::CpuCount;
use tmetric_runtime::{Attr, CounterEvent, EventKind, RawCount, Snapshot, Sysfs, Tool};

use crate::models;
use crate::out::{Sink, warn};
use crate::output::ColorChoice;
use crate::record::{self, Recording, SourceRec};
use crate::stat::{self, Layout, Printer};
use tmetric_engine::aggr::{self, Aggr, units_for};
use tmetric_engine::view::{Split, UnitId};
use tmetric_print::{Aggregation, Config, Title};

/// `tmetric report` flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  tmetric report                      (perf.data, or the pipe on standard input)\n  \
    tmetric report -i td.data -M tma_frontend_bound --model icelake -x,\n  \
    tmetric record -a -e task-clock -o - sleep 1 | tmetric report -i -\n  \
    perf stat record -o perf.data -e task-clock,context-switches sleep 1 && tmetric report -i perf.data"
)]
pub struct ReportArgs {
    /// The file: from `tmetric record` (perf.data or JSON lines), or perf.data from `perf
    /// stat record`; `-` reads standard input (a pipe of either). Default: standard input
    /// when it is a pipe, else perf.data (as perf stat report).
    #[arg(short = 'i', long = "input", value_name = "FILE")]
    input: Option<PathBuf>,
    /// Metrics or metric groups to evaluate (default: those recorded, or for perf.data the
    /// common metrics whose events were counted); any metric whose events were counted works.
    #[arg(short = 'M', long = "metrics", value_name = "METRICS", value_delimiter = ',')]
    metrics: Vec<String>,
    /// Use this model's formulas (default: the recorded model, or perf.data's cpuid).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// CSV output with this field separator (as `stat -x`).
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", conflicts_with = "json")]
    separator: Option<String>,
    /// JSON lines output (as `stat -j`).
    #[arg(short = 'j', long)]
    json: bool,
    /// Per CPU: no aggregation over CPUs.
    #[arg(short = 'A', long = "no-aggr", conflicts_with_all = ["per_core", "per_socket", "per_die"])]
    no_aggr: bool,
    /// Aggregate per physical core (from the file's CPU topology).
    #[arg(long, conflicts_with_all = ["per_socket", "per_die"])]
    per_core: bool,
    /// Aggregate per die.
    #[arg(long, conflicts_with = "per_socket")]
    per_die: bool,
    /// Aggregate per socket.
    #[arg(long)]
    per_socket: bool,
    /// Print only metrics: one column each.
    #[arg(long)]
    metric_only: bool,
    /// Print the metrics as the TMA tree (the bottleneck path marked `<==`).
    #[arg(long, default_value_if("all", clap::builder::ArgPredicate::IsPresent, "true"))]
    tree: bool,
    /// The TMA tree with every node, those below their threshold too; implies --tree.
    #[arg(long)]
    all: bool,
    /// Which statistic of `--record-tpebs` samples the metrics use (default: the recorded one):
    /// mean, min, max, last, or p97, the mean of the lowest 97% of the samples (not the 97th
    /// percentile).
    #[arg(long, value_name = "MODE", value_parser = ["mean", "min", "max", "last", "p97"])]
    tpebs_mode: Option<String>,
    /// Colour metric values by their thresholds: auto (when the report goes to a terminal:
    /// standard error, unless -o names a file), always or never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    color: ColorChoice,
    /// Write the report to FILE instead of standard error.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Each metric's error bar, as `stat --errors` printed it, from the reads the record keeps
    /// (recorded with --errors or -v).
    #[arg(long)]
    errors: bool,
}

/// One `-I` interval made ready to print.
struct Step {
    number: usize,
    at: Duration,
    length: Duration,
    counts: Snapshot,
    /// The retire latencies its metrics used, when they differ per interval.
    latency: Option<Vec<(String, f64)>>,
}

/// A counted CPU and its (socket, die, core) where known.
type Place = (u32, Option<(u32, u32, u32)>);

/// Recorded counts made ready to print.
struct Replay {
    plan: Plan,
    intervals: Vec<Step>,
    totals: Option<Snapshot>,
    elapsed: Duration,
    rusage: Option<(Duration, Duration)>,
    target: String,
    /// The CPUs counted, with their (socket, die, core) where known.
    places: Vec<Place>,
    /// Per plan spec: why the kernel refused it, when recorded.
    failures: Vec<Option<String>>,
    /// Groups the kernel refused, as recorded.
    splits: Vec<String>,
    /// `--per-thread`: the threads printed apart (comm, tid), and whether rows that counted
    /// nothing were left out.
    threads: Vec<(String, i32)>,
    skip_zero: bool,
    /// `-I`'s interval when recorded: perf's wall time for `CPUs utilized` per interval.
    interval: Option<Duration>,
    /// The aggregation the file was recorded with (perf.data's `STAT_CONFIG`), used when no
    /// flag asks for one, as `perf stat report` does.
    aggr: Option<Aggr>,
    /// The error-bar reads the record keeps (`stat --errors`/`-v`), numbered as the plan's
    /// specs; empty when it has none.
    reads: Vec<Snapshot>,
}

/// perf's `STAT_CONFIG` aggregation mode as a unit of aggregation. `-A`, `--per-socket` and
/// `--per-die` have the same number in every perf; `--per-core` is 6 in perf 6.12's numbering
/// (which tmetric writes) but 4 or 5 in older perfs, so it is taken from tmetric's files only.
fn aggr_of(mode: Option<u64>, tmetric: bool) -> Option<Aggr> {
    use tmetric_perfstat::perfdata::write::aggr;
    match mode? {
        aggr::NONE => Some(Aggr::Cpu),
        aggr::SOCKET => Some(Aggr::Socket),
        aggr::DIE => Some(Aggr::Die),
        aggr::CORE if tmetric => Some(Aggr::Core),
        _ => None,
    }
}

/// Runs `tmetric report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let mut args = args.clone();
    let path = args.input.get_or_insert_with(default_input).clone();
    let args = &args;
    if let Some(output) = &args.output
        && path.as_os_str() != "-"
    {
        refuse_same_file(&path, output)?;
    }
    let bytes = if path.as_os_str() == "-" {
        crate::out::stdin_hint(
            "a record",
            "a file (`-i perf.data`) or a pipe (`tmetric record -o - ... | tmetric report -i -`)",
        );
        let mut bytes = Vec::new();
        std::io::stdin().lock().read_to_end(&mut bytes).context("cannot read standard input")?;
        bytes
    } else {
        std::fs::read(&path).with_context(|| {
            format!("cannot read {} (give the file with -i FILE)", path.display())
        })?
    };
    let name = if path.as_os_str() == "-" {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    if bytes.is_empty() && path.as_os_str() != "-" {
        // Not "not a tmetric record": whichever kind was meant, the file holds nothing.
        bail!(
            "{name}: the file is empty (0 bytes), so it holds no recording, neither a `tmetric record` file nor a `perf stat record` perf.data; the run that wrote it may have failed before writing"
        );
    }
    let replay = if perfdata::is_perf_data(&bytes) {
        let data = perfdata::parse_perf_data(&bytes).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let mut replay = if data.extras.is_empty() {
            from_perf_data(args, &data)?
        } else {
            // Written by `tmetric record`: its plan, literals and model are inside.
            from_record(args, &record::perf::read(&name, &data)?)?
        };
        replay.aggr = aggr_of(data.aggr_mode, !data.extras.is_empty());
        if data.pipe {
            // perf stat report names no command for a pipe: its title says 'pipe'.
            replay.target = "pipe".into();
        }
        replay
    } else {
        if bytes.is_empty() && path.as_os_str() == "-" {
            bail!("standard input is empty: expected a record (`tmetric record -o - ... |`)");
        }
        let rec = record::read(Path::new(&name), std::io::Cursor::new(bytes))?;
        from_record(args, &rec)?
    };
    print(args, replay)
}

/// perf stat report's default input: standard input when it is a pipe, else perf.data.
fn default_input() -> PathBuf {
    use std::os::unix::fs::FileTypeExt;
    let piped = std::fs::metadata("/dev/stdin").is_ok_and(|m| m.file_type().is_fifo());
    PathBuf::from(if piped { "-" } else { "perf.data" })
}

/// `-o` must not be the input: creating the report truncates it before a byte is read (by
/// any name: the same path, a symbolic or a hard link, so device and inode are compared).
fn refuse_same_file(input: &Path, output: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(i), Ok(o)) = (std::fs::metadata(input), std::fs::metadata(output)) else {
        return Ok(());
    };
    if i.dev() == o.dev() && i.ino() == o.ino() && i.is_file() {
        bail!(
            "-o {} is the input file {} (the same file{}): writing the report would destroy the recording; give another output file",
            output.display(),
            input.display(),
            if input == output { "" } else { " by another name" }
        );
    }
    Ok(())
}

fn print(args: &ReportArgs, replay: Replay) -> anyhow::Result<()> {
    let layout = match (&args.separator, args.json) {
        (Some(sep), _) => Layout::Csv(sep.clone()),
        (None, true) => Layout::Json,
        (None, false) => Layout::Std,
    };
    let aggr = if args.no_aggr {
        Some(Aggr::Cpu)
    } else if args.per_core {
        Some(Aggr::Core)
    } else if args.per_die {
        Some(Aggr::Die)
    } else if args.per_socket {
        Some(Aggr::Socket)
    } else {
        replay.aggr
    };
    let split = match aggr {
        None if !replay.threads.is_empty() => {
            Split::Threads { threads: replay.threads.clone(), skip_zero: replay.skip_zero }
        }
        None => Split::Global,
        Some(aggr) => {
            let cpus: Vec<u32> = replay.places.iter().map(|p| p.0).collect();
            if cpus.is_empty() {
                bail!("-A and --per-*: the file holds counts of a task, not per CPU");
            }
            if aggr != Aggr::Cpu && replay.places.iter().any(|p| p.1.is_none()) {
                bail!("--per-core, --per-die, --per-socket: the file has no CPU topology; use -A");
            }
            let place = |cpu: u32| {
                let (socket, die, core) = replay
                    .places
                    .iter()
                    .find(|p| p.0 == cpu)
                    .and_then(|p| p.1)
                    .unwrap_or((0, 0, 0));
                aggr::Place { socket, die, core, ..aggr::Place::default() }
            };
            Split::Cpus(
                units_for(&cpus, aggr, place)
                    .into_iter()
                    .map(|(label, cpus)| {
                        let id = if aggr == Aggr::Cpu {
                            UnitId::Cpu(cpus[0])
                        } else {
                            UnitId::Label(label)
                        };
                        (id, cpus)
                    })
                    .collect(),
            )
        }
    };
    let out = match &args.output {
        Some(path) => Sink::create(path)?,
        None => Sink::stderr(),
    };
    let colour = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => args.output.is_none() && std::io::stderr().is_terminal(),
    } && layout == Layout::Std;
    let mut config = Config::new(layout.clone());
    config.metric_only = args.metric_only;
    config.colour = colour;
    config.locale = tmetric_runtime::locale::NumericLocale::from_env();
    config.aggregation = match (aggr, &split) {
        (Some(Aggr::Cpu), _) => Aggregation::Cpu,
        (Some(Aggr::Core), _) => Aggregation::Core,
        (Some(Aggr::Die), _) => Aggregation::Die,
        (Some(Aggr::Socket), _) => Aggregation::Socket,
        (Some(_), _) => Aggregation::Global,
        (None, Split::Threads { .. }) => Aggregation::Thread,
        (None, _) => Aggregation::Global,
    };
    config.interval = !replay.intervals.is_empty();
    // An interval record's totals were printed with --summary: perf's `summary` field.
    config.csv_summary = !replay.intervals.is_empty();
    config.unit_width = crate::stat::plan_unit_width(&replay.plan);
    config.errors = args.errors;
    let title = Title { target: replay.target.clone(), runs: 1 };
    let mut printer = Printer::new(out, config, title);
    printer.split = split;
    printer.tree = args.tree.then_some(args.all);
    printer.interval = replay.interval;
    if args.errors && replay.totals.is_some() {
        if replay.reads.is_empty() {
            warn(
                "--errors: the record keeps no reads for error bars (record with --errors or -v); the metrics print without them",
            );
        } else {
            printer.error_reads = Some(replay.reads.clone());
        }
    }
    let mut plan = replay.plan;
    // As stat printed it: each uncore box apart under -A, merged otherwise.
    plan.per_box = aggr == Some(Aggr::Cpu);
    for warning in &plan.warnings {
        warn(&format!("warning: {warning}"));
    }
    for step in &replay.intervals {
        let sample =
            Sample { counts: &step.counts, seconds: step.length.as_secs_f64(), rusage: None };
        let recorded = plan.retire_latency.clone();
        if let Some(l) = &step.latency {
            plan.retire_latency = l.clone();
        }
        printer.interval(&plan, &sample, step.number, step.at)?;
        printer.interval_notes(&plan, &sample, &replay.failures, step.at)?;
        plan.retire_latency = recorded;
    }
    if let Some(totals) = &replay.totals {
        let sample =
            Sample { counts: totals, seconds: replay.elapsed.as_secs_f64(), rusage: replay.rusage };
        // As stat printed it: user and system time only for a command with no other target.
        let t = &replay.target;
        let task_only = !(t.starts_with("system wide")
            || t == "pipe"
            || t.starts_with("CPU(s) ")
            || t.starts_with("process id ")
            || t.starts_with("thread id "));
        let rusage = replay.rusage.filter(|_| task_only);
        printer.summary(&plan, &sample, &crate::printer::footer(replay.elapsed, rusage))?;
        let notes = printer.notes_for(&plan, &sample, &replay.failures, &replay.splits);
        printer.notes(&notes)?;
        // As stat: the block of bars where they cannot show beside the values.
        if args.errors && !replay.reads.is_empty() && !printer.errors_inline() {
            let bars = plan.uncertainties(
                &mut tmetric_engine::Evaluators::default(),
                &replay.reads,
                sample.seconds,
            );
            printer.error_bars(&plan, &sample, &bars)?;
        }
    }
    printer.finish()
}

/// The further uncore boxes of recorded row `row` (plan row `r`), their events numbered in
/// `spec_map`.
fn add_boxes(
    args: &ReportArgs,
    plan: &mut Plan,
    r: usize,
    row: &record::RowRec,
    events: &[record::EventRec],
    spec_map: &mut [usize],
) -> anyhow::Result<()> {
    let Some(((first, first_name), rest)) = row.boxes.split_first() else { return Ok(()) };
    if row.source != SourceRec::Counter(*first) {
        bail!(
            "{}:1: row `{}`'s first box is event {first}, not its counter",
            input_name(args),
            row.name
        );
    }
    if let Source::Counter(spec) = plan.rows[r].source {
        plan.rows[r].boxes = vec![tmetric_engine::plan::RowBox { spec, name: first_name.clone() }];
    }
    for (s, name) in rest {
        let event = events.get(*s).with_context(|| {
            format!(
                "{}:1: row `{}` names box event {s}, which the header lacks",
                input_name(args),
                row.name
            )
        })?;
        if spec_map[*s] != usize::MAX {
            bail!("{}:1: event {s} is named by two rows", input_name(args));
        }
        spec_map[*s] = plan.add_box(r, counter_event(event), name.clone());
    }
    Ok(())
}

/// A recorded event as the runtime describes it.
fn counter_event(e: &record::EventRec) -> CounterEvent {
    let kind = match e.pmu.as_str() {
        "software" => EventKind::Software,
        "hardware" => EventKind::Hardware,
        "tracepoint" => EventKind::Tracepoint,
        pmu => EventKind::Pmu(pmu.to_string()),
    };
    CounterEvent {
        name: e.name.clone(),
        attr: Attr {
            type_: e.type_,
            config: e.config,
            config1: e.config1,
            config2: e.config2,
            config3: e.config3,
            exclude_user: e.exclude[0],
            exclude_kernel: e.exclude[1],
            exclude_hv: e.exclude[2],
            ..Attr::default()
        },
        kind,
        unit: e.unit.clone(),
        scale: e.scale,
        cpus: e.cpus.clone(),
    }
}

/// `snap` with its specs renumbered by `map` (recorded spec -> plan spec).
fn renumber(snap: &Snapshot, map: &[usize], specs: usize) -> Snapshot {
    let mut events = vec![None; specs];
    for (old, counts) in snap.events.iter().enumerate() {
        if let Some(&new) = map.get(old) {
            events[new] = counts.clone();
        }
    }
    Snapshot { events }
}

/// The input as errors name it.
fn input_name(args: &ReportArgs) -> String {
    match &args.input {
        Some(p) if p.as_os_str() == "-" => "standard input".to_string(),
        Some(p) => p.display().to_string(),
        None => "perf.data".to_string(),
    }
}

/// The model `-M` items come from: `--model`, else `recorded`, else the cpuid's.
fn model_for(args: &ReportArgs, recorded: Option<&str>, cpuid: Option<&str>) -> Option<String> {
    args.model.clone().or_else(|| recorded.map(str::to_string)).or_else(|| {
        let model = tmetric_catalog::model_for_cpuid(&perf_cpuid(cpuid?))?;
        Some(model.path())
    })
}

/// perf.data's `GenuineIntel,6,167,8` as perf's mapfile spells cpuids
/// (`GenuineIntel-6-A7-8`); other spellings unchanged.
pub fn perf_cpuid(cpuid: &str) -> String {
    let parts: Vec<&str> = cpuid.split(',').collect();
    if let [vendor, family, model, stepping] = parts.as_slice()
        && let (Ok(f), Ok(m), Ok(s)) =
            (family.parse::<u32>(), model.parse::<u32>(), stepping.parse::<u32>())
    {
        return format!("{vendor}-{f}-{m:X}-{s:X}");
    }
    cpuid.to_string()
}

/// The metrics `-M` selects, from the common metrics or `model`.
fn picks(items: &[String], model: Option<&str>) -> anyhow::Result<Vec<tmetric_engine::Pick>> {
    // Selection never reads sysfs when the model is named.
    let sysfs = Sysfs::new(Path::new("/nonexistent"));
    stat::select_items(items, model, &sysfs, Path::new("/nonexistent")).map_err(|e| {
        if model.is_none() {
            e.context("the file names no CPU model: give one with --model")
        } else {
            e
        }
    })
}

/// A lower-case event name without a core PMU's `cpu/.../` wrapping, for matching inputs
/// to recorded rows by name.
pub fn normal(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    for pmu in ["cpu/", "cpu_core/", "cpu_atom/", "armv8_pmuv3_0/"] {
        if let Some(inner) = lower.strip_prefix(pmu).and_then(|r| r.strip_suffix('/')) {
            return tmetric_perfstat::canonical_event_name(inner);
        }
    }
    // perf's aliases (`cs`, `faults`, `migrations`, `cpu-cycles`, ...) are one event.
    tmetric_perfstat::canonical_event_name(&lower)
}

/// Whether `plan` has a row that gives input `name`: a counter of that name, or a tool.
fn counted(plan: &Plan, name: &str) -> bool {
    Tool::from_name(name).is_some()
        || plan.rows.iter().any(|r| match r.source {
            Source::Counter(s) => gives(plan, &r.name, &plan.events[s].name, name),
            _ => false,
        })
}

/// Whether a counter row `row` of event `event` gives input `input`: by name, or `cpu-clock`
/// for `task-clock` when the plan counted no `task-clock`. perf computes its CPUs-utilized
/// and per-second figures from either clock, and `perf stat record -a` counts `cpu-clock`,
/// where the common metrics read `task-clock`.
fn gives(plan: &Plan, row: &str, event: &str, input: &str) -> bool {
    let input = normal(input);
    let (row, event) = (normal(row), normal(event));
    if row == input || event == input {
        return true;
    }
    input == "task-clock"
        && (row == "cpu-clock" || event == "cpu-clock")
        && !plan.rows.iter().any(|r| match r.source {
            Source::Counter(s) => {
                normal(&r.name) == "task-clock" || normal(&plan.events[s].name) == "task-clock"
            }
            _ => false,
        })
}

/// `model`'s probe values over a recording, as perf gives them when it parses a metric:
/// `has_event(X)` is 1 when X was counted, `strcmp_cpuid_str(ID)` compares with the recorded
/// cpuid (NaN without one); other slots read 0.
fn probes_for(plan: &Plan, model: &Model, cpuid: Option<&str>) -> Vec<f64> {
    use tmetric_catalog::catalog::id_calls;
    let mut probes = vec![0.0; model.ids.len()];
    for (slot, id) in model.ids.iter().enumerate() {
        if id.calls & id_calls::STRCMP_CPUID_STR != 0 {
            let text = model.str(id.text);
            probes[slot] = cpuid.map_or(f64::NAN, |cpuid| {
                f64::from(u8::from(tmetric_model::cpuid::cpuid_matches(model.arch, text, cpuid)))
            });
        } else if id.calls & id_calls::HAS_EVENT != 0 {
            probes[slot] = f64::from(u8::from(counted(plan, &id_name(model, id))));
        }
    }
    probes
}

/// Adds a root for `model`'s `metric`, its inputs matched to `plan`'s rows by name and
/// taken from one group where possible (`group_of`: spec -> group). Inputs nobody counted
/// become rows that say so. Returns whether every input the value needs was found.
fn add_root(
    plan: &mut Plan,
    model: &'static Model,
    metric: usize,
    group_of: &[usize],
    cpuid: Option<&str>,
) -> bool {
    if plan.probes_of(model).is_empty() {
        let probes = probes_for(plan, model, cpuid);
        plan.probes.push((model, probes));
    }
    let probes = plan.probes_of(model).to_vec();
    let value_slots = needed_slots(model, metric, &plan.literals, &probes, false);
    let all_slots = needed_slots(model, metric, &plan.literals, &probes, true);
    let mut candidates: Vec<(u16, Vec<usize>)> = Vec::new();
    for &slot in &all_slots {
        let id = &model.ids[slot as usize];
        let name = id_name(model, id);
        let rows: Vec<usize> = (0..plan.rows.len())
            .filter(|&r| {
                let row = &plan.rows[r];
                match &row.source {
                    Source::Counter(s) => {
                        !id.retire_latency && gives(plan, &row.name, &plan.events[*s].name, &name)
                    }
                    Source::Tool(t) => t.name() == name,
                    Source::RetireLatency => id.retire_latency && row.name == name,
                    Source::Missing(_) => false,
                }
            })
            .collect();
        candidates.push((slot, rows));
    }
    // The group holding most inputs: a metric's inputs should come from one group.
    let mut votes: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, rows) in &candidates {
        let mut groups: Vec<usize> = rows
            .iter()
            .filter_map(|&r| match plan.rows[r].source {
                Source::Counter(s) => group_of.get(s).copied(),
                _ => None,
            })
            .collect();
        groups.dedup();
        for g in groups {
            *votes.entry(g).or_default() += 1;
        }
    }
    let best = votes.iter().max_by_key(|(g, n)| (**n, std::cmp::Reverse(**g))).map(|(g, _)| *g);
    let mut slot_rows = vec![None; model.ids.len()];
    let mut complete = true;
    let mut lacking: Vec<String> = Vec::new();
    for (slot, rows) in candidates {
        let pick = rows
            .iter()
            .copied()
            .find(|&r| match plan.rows[r].source {
                Source::Counter(s) => group_of.get(s).copied() == best,
                _ => true,
            })
            .or_else(|| rows.first().copied());
        let needed = value_slots.contains(&slot);
        let row = match pick {
            Some(r) => r,
            None if needed => {
                complete = false;
                let id = &model.ids[slot as usize];
                let name = id_name(model, id);
                let known = plan.rows.iter().position(|r| {
                    matches!(r.source, Source::Missing(_)) && normal(&r.name) == normal(&name)
                });
                if let Some(row) = known {
                    // Another metric found it missing already: one row says so.
                    lacking.push(format!("`{name}`"));
                    row
                } else if let Some(tool) = Tool::from_name(&name) {
                    plan.add(Resolution::Tool(tool), name, false)
                } else if id.retire_latency {
                    plan.add(Resolution::RetireLatency, name, false)
                } else {
                    let why = format!("`{name}` was not counted in the recording");
                    lacking.push(format!("`{name}`"));
                    plan.add(Resolution::Missing(why), name, false)
                }
            }
            // A threshold input nobody counted: the value is still right, only its colour
            // is unknown.
            None => continue,
        };
        slot_rows[slot as usize] = Some(row);
    }
    if !lacking.is_empty() {
        plan.warnings.push(tmetric_engine::Warning::NotRecorded {
            metric: model.str(model.metrics[metric].name).to_string(),
            inputs: lacking.iter().map(|l| l.to_string()).collect(),
        });
    }
    let r = plan.roots.len();
    plan.roots.push(Root { model, metric, slot_rows, placement: Placement::NoCounters });
    // perf prints a metric on its first event's line, as the engine's plan does.
    plan.host_root(r, &probes);
    complete
}

/// Rebuilds the recorded plan and chooses the metrics.
fn from_record(args: &ReportArgs, rec: &Recording) -> anyhow::Result<Replay> {
    let h = &rec.header;
    let mut literals = [f64::NAN; Literal::COUNT];
    for lit in Literal::ALL {
        if let Some(v) = h.literals.get(lit.name()) {
            literals[lit.index()] = *v;
        }
    }
    let mut plan = Plan::new(literals);
    let mut spec_map = vec![usize::MAX; h.events.len()];
    for (i, row) in h.rows.iter().enumerate() {
        let resolution = match &row.source {
            SourceRec::Counter(s) => {
                let event = h.events.get(*s).with_context(|| {
                    format!(
                        "{}:1: row {i} names event {s}, which the header lacks",
                        input_name(args)
                    )
                })?;
                Resolution::Counter(counter_event(event))
            }
            SourceRec::Tool(name) => {
                Resolution::Tool(Tool::from_name(name).with_context(|| {
                    format!("{}:1: row {i} names the unknown tool event `{name}`", input_name(args))
                })?)
            }
            SourceRec::RetireLatency => Resolution::RetireLatency,
            SourceRec::Missing(why) => Resolution::Missing(why.clone()),
        };
        let r = plan.add(resolution, row.name.clone(), row.show);
        plan.rows[r].copy_of = row.copy_of;
        if let (SourceRec::Counter(old), Source::Counter(new)) = (&row.source, &plan.rows[r].source)
        {
            spec_map[*old] = *new;
        }
        add_boxes(args, &mut plan, r, row, &h.events, &mut spec_map)?;
    }
    // Specs no row names still count (a user's `-e` group member): keep their slots.
    for (old, event) in h.events.iter().enumerate() {
        if spec_map[old] == usize::MAX {
            let r = plan.add(Resolution::Counter(counter_event(event)), event.name.clone(), false);
            if let Source::Counter(new) = plan.rows[r].source {
                spec_map[old] = new;
            }
        }
    }
    let mut group_of = vec![usize::MAX; plan.specs.len()];
    for (g, members) in h.groups.iter().enumerate() {
        for &s in members {
            group_of[spec_map[s]] = g;
        }
    }
    plan.groups = h.groups.iter().map(|g| g.iter().map(|&s| spec_map[s]).collect()).collect();
    let latency = |values: &BTreeMap<String, f64>| -> Vec<(String, f64)> {
        values.iter().map(|(k, v)| (k.clone(), *v)).collect()
    };
    plan.retire_latency = latency(&h.retire_latency);
    for rec in &h.probes {
        if let Some(model) = tmetric_catalog::model(&rec.model)
            && rec.values.len() == model.ids.len()
        {
            plan.probes.push((model, rec.values.clone()));
        }
    }
    // --tpebs-mode: the statistic from the recorded samples.
    let tpebs: Option<Vec<(String, f64)>> = args.tpebs_mode.as_ref().map(|mode| {
        rec.tpebs
            .iter()
            .filter_map(|line| match line {
                record::Line::Tpebs { event, mean, min, max, last, p97, .. } => {
                    let v = match mode.as_str() {
                        "min" => *min,
                        "max" => *max,
                        "last" => *last,
                        "p97" => *p97,
                        _ => *mean,
                    };
                    Some((event.clone(), v.unwrap_or(0.0)))
                }
                _ => None,
            })
            .collect()
    });
    if let Some(values) = rec.final_latency.as_ref() {
        plan.retire_latency = latency(values);
    }
    if let Some(values) = &tpebs {
        plan.retire_latency = values.clone();
    }

    // The metrics: those recorded (as printed then), or -M / --model.
    let recorded: Vec<(&'static Model, usize, usize)> = h
        .roots
        .iter()
        .enumerate()
        .filter_map(|(i, root)| {
            let model = tmetric_catalog::model(&root.model)?;
            let metric = model
                .metrics_named(&root.metric)
                .into_iter()
                .find(|&m| model.str(model.metrics[m].pmu) == root.pmu)?;
            Some((model, metric, i))
        })
        .collect();
    if recorded.len() < h.roots.len() {
        warn("some recorded metrics are not in this tmetric's catalogue; they are left out");
    }
    let model_name = model_for(args, h.model.as_deref(), h.cpuid.as_deref());
    let selection: Vec<tmetric_engine::Pick> = if !args.metrics.is_empty() {
        picks(&args.metrics, model_name.as_deref())?
    } else if let Some(name) = &args.model {
        let other = models::find_model(name).context("--model")?;
        let common = tmetric_catalog::common();
        let mut out = Vec::new();
        for (model, metric, _) in &recorded {
            let metric_name = model.str(model.metrics[*metric].name);
            let target = if std::ptr::eq(*model, common) { common } else { other };
            match target.metrics_named(metric_name).first() {
                Some(&m) => {
                    out.push(tmetric_engine::Pick { model: target, metric: m, item: String::new() })
                }
                None => warn(&format!("{}: has no metric `{metric_name}`", target.path())),
            }
        }
        out
    } else {
        recorded
            .iter()
            .map(|(model, metric, _)| tmetric_engine::Pick {
                model,
                metric: *metric,
                item: String::new(),
            })
            .collect()
    };
    for pick in &selection {
        let same =
            recorded.iter().find(|(m, x, _)| std::ptr::eq(*m, pick.model) && *x == pick.metric);
        match same {
            // A recorded metric: the very rows it read when it was printed.
            Some(&(model, metric, i)) => {
                let root = &h.roots[i];
                let mut slot_rows = vec![None; model.ids.len()];
                let mut moved = false;
                for (slot, name, row) in &root.inputs {
                    match model.ids.get(*slot) {
                        Some(id) if id_name(model, id) == *name => slot_rows[*slot] = Some(*row),
                        _ => moved = true,
                    }
                }
                if moved {
                    // Written by a catalogue whose slots differ: match the inputs by name.
                    add_root(&mut plan, model, metric, &group_of, h.cpuid.as_deref());
                    continue;
                }
                if let Some(bad) = slot_rows.iter().flatten().find(|&&r| r >= plan.rows.len()) {
                    bail!(
                        "{}:1: metric {} reads row {bad}, which the header lacks",
                        input_name(args),
                        root.metric
                    );
                }
                let r = plan.roots.len();
                plan.roots.push(Root {
                    model,
                    metric,
                    slot_rows,
                    placement: Placement::NoCounters,
                });
                let host = h.rows.iter().position(|row| row.roots.contains(&i));
                match host {
                    Some(host) => {
                        plan.rows[host].show = true;
                        plan.rows[host].roots.push(r);
                    }
                    None => {
                        bail!("{}:1: no row prints metric {}", input_name(args), root.metric)
                    }
                }
            }
            None => {
                add_root(&mut plan, pick.model, pick.metric, &group_of, h.cpuid.as_deref());
            }
        }
    }
    let specs = plan.specs.len();
    let intervals = rec
        .intervals
        .iter()
        .map(|x| {
            let latency = match (&tpebs, &x.latency) {
                (None, Some(l)) => Some(latency(l)),
                _ => None,
            };
            Step {
                number: x.n as usize,
                at: x.at,
                length: x.length,
                counts: renumber(&x.counts, &spec_map, specs),
                latency,
            }
        })
        .collect();
    let totals = (h.interval_ms.is_none() || h.selection.summary)
        .then(|| renumber(&rec.totals, &spec_map, specs));
    let places = if h.system_wide {
        h.topology.places.iter().map(|p| (p[0], Some((p[1], p[2], p[3])))).collect()
    } else {
        Vec::new()
    };
    // Only CPUs that were counted.
    let counted: Vec<i32> = rec.totals.events.iter().flatten().flatten().map(|c| c.cpu).collect();
    let places = places.into_iter().filter(|p: &Place| counted.contains(&(p.0 as i32))).collect();
    let mut failures = vec![None; plan.specs.len()];
    for (old, why) in h.failures.iter().enumerate() {
        if let Some(&new) = spec_map.get(old) {
            failures[new] = why.clone();
        }
    }
    Ok(Replay {
        plan,
        intervals,
        totals,
        elapsed: rec.elapsed,
        rusage: rec.rusage,
        target: h.target.clone(),
        places,
        failures,
        splits: h.splits.clone(),
        threads: h.threads.clone(),
        skip_zero: h.skip_zero,
        interval: h.interval_ms.map(Duration::from_millis),
        aggr: None,
        reads: rec.reads.iter().map(|r| renumber(r, &spec_map, specs)).collect(),
    })
}

/// A perf.data file's events as rows, with the common metrics whose events were all counted
/// (as perf prints its shadow metrics) or the `-M` selection.
fn from_perf_data(args: &ReportArgs, data: &PerfData) -> anyhow::Result<Replay> {
    if data.events.is_empty() {
        bail!("{}: the perf.data file has no events", input_name(args));
    }
    if data.rounds.is_empty() && data.unrounded.is_empty() {
        bail!(
            "{}: the perf.data file has no PERF_RECORD_STAT records: it was not written by `perf stat record`",
            input_name(args)
        );
    }
    let literals = tmetric_engine::plan::offline_literals(false, data.cpus.iter().any(|&c| c >= 0));
    let mut plan = Plan::new(literals);
    for e in &data.events {
        let kind = match e.type_ {
            0 => EventKind::Hardware,
            1 => EventKind::Software,
            2 => EventKind::Tracepoint,
            t => EventKind::Pmu(format!("type{t}")),
        };
        let event = CounterEvent {
            name: e.name.clone(),
            attr: Attr {
                type_: e.type_,
                config: e.config,
                config1: e.config1,
                config2: e.config2,
                exclude_user: e.exclude.0,
                exclude_kernel: e.exclude.1,
                exclude_hv: e.exclude.2,
                ..Attr::default()
            },
            kind,
            unit: e.unit.clone().filter(|u| !u.is_empty()),
            scale: e.scale,
            cpus: None,
        };
        plan.add(Resolution::Counter(event), e.name.clone(), true);
    }
    let group_of: Vec<usize> = (0..plan.specs.len()).collect();
    let model_name = model_for(args, None, data.cpuid.as_deref());
    let cpuid = data.cpuid.as_deref().map(perf_cpuid);
    // Without -M, perf's built-in metrics (printed by the view) are what `perf stat report`
    // shows; -M adds the metrics asked for.
    if !args.metrics.is_empty() {
        for pick in picks(&args.metrics, model_name.as_deref())? {
            add_root(&mut plan, pick.model, pick.metric, &group_of, cpuid.as_deref());
        }
    }
    // Readings per event, CPU by CPU (threads summed, as perf aggregates them).
    let snapshot = |values: &[perfdata::StatValue]| -> Snapshot {
        let mut events: Vec<Option<Vec<CpuCount>>> = vec![None; data.events.len()];
        for v in values {
            let per = events[v.event].get_or_insert_with(Vec::new);
            let raw = RawCount { value: v.value, enabled: v.enabled, running: v.running };
            match per.iter_mut().find(|c| c.cpu == v.cpu) {
                Some(c) => {
                    c.raw.value += raw.value;
                    c.raw.enabled += raw.enabled;
                    c.raw.running += raw.running;
                }
                None => per.push(CpuCount { cpu: v.cpu, thread: -1, raw }),
            }
        }
        Snapshot { events }
    };
    let mut intervals = Vec::new();
    let mut totals = None;
    let mut elapsed = Duration::ZERO;
    let mut previous = Snapshot { events: vec![None; data.events.len()] };
    let mut previous_ns = 0u64;
    for round in &data.rounds {
        let now = snapshot(&round.values);
        match round.kind {
            // Interval records hold counts since the start: print the change.
            RoundKind::Interval => {
                let n = intervals.len() + 1;
                let delta = now.since(&previous);
                let length = Duration::from_nanos(round.time_ns.saturating_sub(previous_ns));
                intervals.push(Step {
                    number: n,
                    at: Duration::from_nanos(round.time_ns),
                    length,
                    counts: delta,
                    latency: None,
                });
                previous = now;
                previous_ns = round.time_ns;
            }
            RoundKind::Final => {
                totals = Some(now);
                elapsed = Duration::from_nanos(round.time_ns);
            }
        }
    }
    if intervals.is_empty() && totals.is_none() {
        // STAT records without a round (a run cut short): totals, time unknown.
        warn(
            "the perf.data file has no STAT_ROUND: the counts are printed without their elapsed time",
        );
        totals = Some(snapshot(&data.unrounded));
    }
    // (socket, die, core) from the file's CPU topology, where it has one.
    let place = |cpu: i32| {
        let &(core, socket, die) = data.topology.get(cpu as usize)?;
        (core >= 0 && socket >= 0 && die >= 0).then_some((socket as u32, die as u32, core as u32))
    };
    let places = data.cpus.iter().filter(|&&c| c >= 0).map(|&c| (c as u32, place(c))).collect();
    // perf's title: the recorded command line, or `pipe` for a piped file without one.
    let target = match (data.cmdline.is_empty(), data.pipe) {
        (false, _) => data.cmdline.join(" "),
        (true, true) => "pipe".to_string(),
        (true, false) => "perf.data".to_string(),
    };
    Ok(Replay {
        plan,
        intervals,
        totals,
        elapsed,
        rusage: None,
        target,
        places,
        failures: Vec::new(),
        splits: Vec::new(),
        threads: Vec::new(),
        skip_zero: false,
        interval: (data.interval_ms > 0).then(|| Duration::from_millis(data.interval_ms)),
        aggr: None,
        reads: Vec::new(),
    })
}
