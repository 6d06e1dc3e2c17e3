//! `tmetric list`: the models, metrics, metric groups and events of the compiled catalogue, as
//! perf-list-like text or JSON lines. Reads only `tmetric_catalog`, never vendor JSON.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::bail;
use serde::Serialize;
use tmetric_catalog::catalog::{Constraint, Counters, Event, Metric, event_flags};
use tmetric_catalog::{CPUID_MAP, MODELS, Model};

use crate::models::{examples, find_model};
use tmetric_print::json_line;
use tmetric_print::names::{NameFilter, core_pmu_name};

/// Flags of `tmetric list`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
KIND is one of models, metrics, metricgroups, events, pmu (the kernel PMU events in sysfs, as perf \
lists them). Without KIND: metrics when --model is given, \
else models.\nFILTER is a case-insensitive substring, or a glob (`tma_*`) over the whole name; \
metrics also match on their group names.")]
pub struct ListArgs {
    /// KIND (models, metrics, metricgroups, events, pmu), or FILTER when no KIND is given.
    #[arg(value_name = "KIND")]
    first: Option<String>,
    /// Keep only names that match: a case-insensitive substring or a glob such as `tma_*`.
    #[arg(value_name = "FILTER")]
    second: Option<String>,
    /// The model: `x86/sapphirerapids` or `sapphirerapids` (see `tmetric list models`).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// One JSON object per line, with every field.
    #[arg(short = 'j', long)]
    json: bool,
    /// Also show long descriptions, expressions and thresholds.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Also list deprecated events (perf hides them).
    #[arg(long)]
    deprecated: bool,
    /// Names only, separated by spaces (perf's `--raw-dump`, for scripts).
    #[arg(long, hide = true)]
    raw_dump: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Models,
    Metrics,
    Groups,
    Events,
    /// The kernel's PMU events: `events/*` of every PMU in sysfs.
    Pmu,
}

impl Kind {
    fn parse(word: &str) -> Option<Kind> {
        Some(match word.to_ascii_lowercase().as_str() {
            "models" | "model" => Kind::Models,
            "metrics" | "metric" => Kind::Metrics,
            "metricgroups" | "metricgroup" | "groups" | "group" => Kind::Groups,
            "events" | "event" => Kind::Events,
            "pmu" => Kind::Pmu,
            _ => return None,
        })
    }
}

/// Runs `tmetric list`.
pub fn run(args: &ListArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let (kind, filter) = match (args.first.as_deref(), args.second.as_deref()) {
        (None, _) => (None, None),
        (Some(first), second) => match (Kind::parse(first), second) {
            (Some(kind), filter) => (Some(kind), filter),
            (None, None) => (None, Some(first)),
            (None, Some(_)) => {
                bail!(
                    "unknown list kind `{first}`: expected models, metrics, metricgroups or events"
                )
            }
        },
    };
    if kind == Some(Kind::Pmu) {
        let filter = filter.map(NameFilter::new);
        let events = kernel_pmu_events(&tmetric_runtime::Sysfs::system(), filter.as_ref());
        return print_kernel_pmu_events(&events, args, out);
    }
    if args.raw_dump {
        return raw_dump(args, kind, filter, out);
    }
    let kind = kind.unwrap_or(if args.model.is_some() { Kind::Metrics } else { Kind::Models });
    let filter = filter.map(NameFilter::new);
    let model = match (&args.model, kind) {
        (Some(name), _) => Some(find_model(name)?),
        (None, Kind::Models) => None,
        (None, _) if let Some(model) = this_machine() => {
            crate::out::warn(&format!(
                "listing {} (this machine's model; --model names another)",
                model.path()
            ));
            Some(model)
        }
        (None, _) => {
            let word = match kind {
                Kind::Events => "events",
                Kind::Groups => "metricgroups",
                _ => "metrics",
            };
            bail!(
                "`tmetric list {word}` needs --model MODEL, one of {}, ... (`tmetric list models` lists them all)",
                examples()
            )
        }
    };
    let list = Lister { out, filter: filter.as_ref(), json: args.json, verbose: args.verbose };
    match (kind, model) {
        (Kind::Models, _) => list.models(),
        (Kind::Metrics, Some(model)) => list.metrics(model),
        (Kind::Groups, Some(model)) => list.groups(model),
        (Kind::Events, Some(model)) => list.events(model, args.deprecated),
        (Kind::Pmu, _) => unreachable!("listed above"),
        (_, None) => unreachable!("a model was required above"),
    }
}

/// This machine's model, from its cpuid.
fn this_machine() -> Option<&'static Model> {
    let sysfs = tmetric_runtime::Sysfs::system();
    crate::stat::host_model(None, &sysfs, std::path::Path::new("/proc")).ok()
}

/// One kernel PMU event: a file under `<pmu>/events/` in sysfs.
#[derive(Debug, Serialize, PartialEq)]
struct KernelPmuEvent {
    pmu: String,
    event: String,
    /// The event as `-e` takes it: `pmu/event/`.
    encoding: String,
    /// The file's terms, such as `event=0x3c`.
    terms: String,
    /// Whether the PMU is a core PMU, whose events perf names without the PMU prefix.
    core: bool,
}

/// Every `events/*` alias of every PMU under `sysfs`, sorted by PMU then name, as perf 6.12's
/// `list pmu` finds them (its sysfs half; the vendor JSON events are `tmetric list events`).
fn kernel_pmu_events(
    sysfs: &tmetric_runtime::Sysfs,
    filter: Option<&NameFilter>,
) -> Vec<KernelPmuEvent> {
    let core = sysfs.core_pmu();
    let mut events = Vec::new();
    for name in sysfs.pmu_names() {
        let Ok(pmu) = sysfs.pmu(&name) else { continue };
        let is_core = core.as_deref() == Some(name.as_str()) || name == "cpu_atom";
        for event in pmu.alias_names() {
            let encoding = format!("{name}/{event}/");
            if filter.is_some_and(|f| !f.matches(&event) && !f.matches(&encoding)) {
                continue;
            }
            let terms = std::fs::read_to_string(pmu.dir().join("events").join(&event))
                .map(|t| t.trim().to_string())
                .unwrap_or_default();
            events.push(KernelPmuEvent {
                pmu: name.clone(),
                event,
                encoding,
                terms,
                core: is_core,
            });
        }
    }
    events
}

/// Prints kernel PMU events as perf does: `pmu/event/` (`event OR pmu/event/` on core PMUs)
/// and `[Kernel PMU event]` at column 53; with `--raw-dump`, the `pmu/event/` names only.
fn print_kernel_pmu_events(
    events: &[KernelPmuEvent],
    args: &ListArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    for event in events {
        if args.raw_dump {
            write!(out, "{} ", event.encoding)?;
        } else if args.json {
            json_line(out, event)?;
        } else {
            let name = if event.core {
                format!("  {} OR {}", event.event, event.encoding)
            } else {
                format!("  {}", event.encoding)
            };
            writeln!(out, "{name:<53}[Kernel PMU event]")?;
            if args.verbose && !event.terms.is_empty() {
                writeln!(out, "       [{}]", event.terms)?;
            }
        }
    }
    Ok(())
}

/// perf's `list --raw-dump [metrics|metricgroups|GLOB]`: names separated by spaces, of this
/// machine's model (or `--model`) and the common metrics; with a glob, the groups and then
/// the names of the metrics it matches.
fn raw_dump(
    args: &ListArgs,
    kind: Option<Kind>,
    filter: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let model = match &args.model {
        Some(name) => Some(find_model(name)?),
        None => this_machine(),
    };
    let common = tmetric_catalog::common();
    let mut tables = vec![common];
    if let Some(m) = model.filter(|m| !std::ptr::eq(*m, common)) {
        tables.insert(0, m);
    }
    let glob = filter.map(NameFilter::new);
    let mut groups: Vec<&str> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for table in &tables {
        for metric in table.metrics {
            let name = table.str(metric.name);
            if glob.as_ref().is_some_and(|g| !g.matches(name)) {
                continue;
            }
            names.push(name);
            groups.extend(split_groups(table.str(metric.groups)));
        }
    }
    groups.sort_unstable();
    groups.dedup();
    names.sort_unstable();
    names.dedup();
    let words: Vec<&str> = match kind {
        Some(Kind::Metrics) => names,
        Some(Kind::Groups) => groups,
        _ => groups.into_iter().chain(names).collect(),
    };
    for word in words {
        write!(out, "{word} ")?;
    }
    Ok(())
}

struct Lister<'a> {
    out: &'a mut dyn Write,
    filter: Option<&'a NameFilter>,
    json: bool,
    verbose: bool,
}

#[derive(Serialize)]
struct CpuidJson<'a> {
    regex: &'a str,
    version: &'a str,
    event_type: &'a str,
}

#[derive(Serialize)]
struct ModelJson<'a> {
    model: String,
    arch: &'a str,
    name: &'a str,
    sys: bool,
    events: usize,
    metrics: usize,
    groups: usize,
    cpuids: Vec<CpuidJson<'a>>,
}

#[derive(Serialize)]
struct MetricJson<'a> {
    metric: &'a str,
    model: String,
    /// True for the common table's metrics, which apply to every model.
    common: bool,
    pmu: &'a str,
    groups: Vec<&'a str>,
    unit: &'a str,
    scale: f64,
    brief: &'a str,
    public: &'a str,
    expr: &'a str,
    threshold: Option<&'a str>,
    constraint: Option<&'a str>,
    default_group: Option<&'a str>,
    no_group: Vec<&'a str>,
    compat: Option<&'a str>,
}

#[derive(Serialize)]
struct GroupJson<'a> {
    group: &'a str,
    model: String,
    common: bool,
    description: &'a str,
    metrics: Vec<&'a str>,
}

#[derive(Serialize)]
struct CountersJson {
    /// General-purpose counters the event may use; `null` when the JSON sets no restriction.
    generic: Option<Vec<u32>>,
    /// Fixed counters the event may use.
    fixed: Vec<u32>,
}

#[derive(Serialize)]
struct EventJson<'a> {
    event: &'a str,
    model: String,
    pmu: &'a str,
    topic: &'a str,
    /// `pmu/terms/`, as it would be passed to `perf stat -e`.
    encoding: String,
    /// The terms alone, as jevents writes them.
    terms: &'a str,
    brief: &'a str,
    public: &'a str,
    unit: &'a str,
    scale: f64,
    counters: CountersJson,
    pebs: u8,
    per_pkg: bool,
    deprecated: bool,
    experimental: bool,
    compat: Option<&'a str>,
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn split_groups(s: &str) -> Vec<&str> {
    s.split(';').filter(|g| !g.is_empty()).collect()
}

fn constraint_name(c: Constraint) -> Option<&'static str> {
    match c {
        Constraint::None => None,
        Constraint::NoGroupEvents => Some("NO_GROUP_EVENTS"),
        Constraint::NoGroupEventsNmi => Some("NO_GROUP_EVENTS_NMI"),
        Constraint::NoGroupEventsSmt => Some("NO_GROUP_EVENTS_SMT"),
    }
}

fn bits(mask: u32) -> Vec<u32> {
    (0..32).filter(|b| mask & (1 << b) != 0).collect()
}

/// `0-3,5` for a set of counter numbers.
pub fn ranges(numbers: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        while i + 1 < numbers.len() && numbers[i + 1] == numbers[i] + 1 {
            i += 1;
        }
        let end = numbers[i];
        parts.push(if end > start + 1 {
            format!("{start}-{end}")
        } else if end == start + 1 {
            format!("{start},{end}")
        } else {
            start.to_string()
        });
        i += 1;
    }
    parts.join(",")
}

fn counters_json(c: Counters) -> CountersJson {
    CountersJson {
        generic: (c.generic != Counters::ANY.generic).then(|| bits(c.generic)),
        fixed: bits(u32::from(c.fixed)),
    }
}

pub fn counters_text(c: Counters) -> String {
    let json = counters_json(c);
    let mut parts = Vec::new();
    match &json.generic {
        None => parts.push("any".to_string()),
        Some(generic) if !generic.is_empty() => parts.push(ranges(generic)),
        Some(_) => {}
    }
    if !json.fixed.is_empty() {
        parts.push(format!("fixed {}", ranges(&json.fixed)));
    }
    parts.join(", ")
}

fn event_encoding(model: &Model, event: &Event) -> String {
    let pmu = model.str(event.pmu);
    let pmu = if pmu == "default_core" || pmu.is_empty() { core_pmu_name(model.arch) } else { pmu };
    format!("{pmu}/{}/", model.str(event.encoding))
}

impl Lister<'_> {
    fn keep(&self, names: &[&str]) -> bool {
        self.filter.is_none_or(|f| names.iter().any(|n| f.matches(n)))
    }

    fn models(self) -> anyhow::Result<()> {
        let mut shown = 0;
        let rows: Vec<&Model> =
            MODELS.iter().copied().filter(|m| self.keep(&[&m.path()])).collect();
        if !self.json && !rows.is_empty() {
            writeln!(self.out, "{:<34} {:>6} {:>7}  CPUID", "MODEL", "EVENTS", "METRICS")?;
        }
        for (index, model) in MODELS.iter().enumerate() {
            if !rows.iter().any(|m| std::ptr::eq(*m, *model)) {
                continue;
            }
            shown += 1;
            let cpuids: Vec<CpuidJson> = CPUID_MAP
                .iter()
                .filter(|row| row.model == index)
                .map(|row| CpuidJson {
                    regex: row.regex,
                    version: row.version,
                    event_type: row.event_type,
                })
                .collect();
            if self.json {
                json_line(
                    self.out,
                    &ModelJson {
                        model: model.path(),
                        arch: model.arch,
                        name: model.name,
                        sys: model.is_sys,
                        events: model.events.len(),
                        metrics: model.metrics.len(),
                        groups: model.groups.len(),
                        cpuids,
                    },
                )?;
            } else {
                let mut cpuid = cpuids.iter().map(|c| c.regex).collect::<Vec<_>>().join("  ");
                if model.is_sys {
                    cpuid = "(sys: matched by PMU identifier)".to_string();
                } else if model.arch == "common" {
                    cpuid = "(applies to every model)".to_string();
                } else if cpuid.is_empty() {
                    cpuid = "-".to_string();
                }
                writeln!(
                    self.out,
                    "{:<34} {:>6} {:>7}  {cpuid}",
                    model.path(),
                    model.events.len(),
                    model.metrics.len()
                )?;
            }
        }
        if shown == 0 && !self.json {
            writeln!(self.out, "no model matches the filter")?;
        }
        Ok(())
    }

    fn metric_json<'m>(model: &'m Model, metric: &Metric, common: bool) -> MetricJson<'m> {
        MetricJson {
            metric: model.str(metric.name),
            model: model.path(),
            common,
            pmu: model.str(metric.pmu),
            groups: split_groups(model.str(metric.groups)),
            unit: model.str(metric.unit),
            scale: metric.scale,
            brief: model.str(metric.brief),
            public: model.str(metric.public),
            expr: model.str(metric.expr),
            threshold: non_empty(model.str(metric.threshold_expr)),
            constraint: constraint_name(metric.constraint),
            default_group: non_empty(model.str(metric.default_group)),
            no_group: split_groups(model.str(metric.no_group)),
            compat: non_empty(model.str(metric.compat)),
        }
    }

    fn metrics(self, model: &'static Model) -> anyhow::Result<()> {
        let common = tmetric_catalog::common();
        let mut tables = vec![(model, false)];
        if !std::ptr::eq(model, common) {
            tables.push((common, true));
        }
        let mut shown = 0;
        for (table, is_common) in tables {
            let mut rows: Vec<MetricJson> = table
                .metrics
                .iter()
                .map(|m| Self::metric_json(table, m, is_common))
                .filter(|row| {
                    let mut names = vec![row.metric];
                    names.extend(row.groups.iter().copied());
                    self.keep(&names)
                })
                .collect();
            rows.sort_by(|a, b| a.metric.cmp(b.metric).then(a.pmu.cmp(b.pmu)));
            shown += rows.len();
            if self.json {
                for row in &rows {
                    json_line(self.out, row)?;
                }
                continue;
            }
            if rows.is_empty() {
                continue;
            }
            let title = if is_common {
                format!(
                    "Common metrics (software events only; they apply to every model, {}):",
                    table.path()
                )
            } else {
                format!("Metrics of {}:", table.path())
            };
            writeln!(self.out, "{title}\n")?;
            for row in &rows {
                let mut head = format!("  {}", row.metric);
                if row.pmu != "default_core" && !row.pmu.is_empty() {
                    head.push_str(&format!("  [{}]", row.pmu));
                }
                if !row.unit.is_empty() {
                    head.push_str(&format!("  ({})", row.unit));
                }
                writeln!(self.out, "{head}")?;
                if !row.brief.is_empty() {
                    writeln!(self.out, "       [{}]", row.brief)?;
                }
                if !row.groups.is_empty() {
                    writeln!(self.out, "       groups: {}", row.groups.join(";"))?;
                }
                if self.verbose {
                    if !row.public.is_empty() && row.public != row.brief {
                        writeln!(self.out, "       {}", row.public)?;
                    }
                    writeln!(self.out, "       expr: {}", row.expr)?;
                    if let Some(threshold) = row.threshold {
                        writeln!(self.out, "       threshold: {threshold}")?;
                    }
                }
            }
            writeln!(self.out)?;
        }
        if shown == 0 && !self.json {
            writeln!(self.out, "no metric of {} matches the filter", model.path())?;
        }
        Ok(())
    }

    fn groups(self, model: &'static Model) -> anyhow::Result<()> {
        let common = tmetric_catalog::common();
        let mut tables = vec![(model, false)];
        if !std::ptr::eq(model, common) {
            tables.push((common, true));
        }
        let mut shown = 0;
        for (table, is_common) in tables {
            // Every group a metric names, with the description metricgroups.json gives, if any.
            let mut groups: BTreeMap<&str, (&str, Vec<&str>)> = BTreeMap::new();
            for group in table.groups {
                groups.entry(table.str(group.name)).or_default().0 = table.str(group.description);
            }
            for metric in table.metrics {
                for group in split_groups(table.str(metric.groups)) {
                    let names = &mut groups.entry(group).or_default().1;
                    let name = table.str(metric.name);
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            // A group no metric names (metricgroups.json describes more groups than the
            // metrics use) cannot be selected with -M, so it is not listed.
            let rows: Vec<GroupJson> = groups
                .into_iter()
                .filter(|(_, (_, metrics))| !metrics.is_empty())
                .filter(|(name, _)| self.keep(&[name]))
                .map(|(group, (description, mut metrics))| {
                    metrics.sort_unstable();
                    GroupJson {
                        group,
                        model: table.path(),
                        common: is_common,
                        description,
                        metrics,
                    }
                })
                .collect();
            shown += rows.len();
            if self.json {
                for row in &rows {
                    json_line(self.out, row)?;
                }
                continue;
            }
            if rows.is_empty() {
                continue;
            }
            let title =
                if is_common { "Common metric groups (every model):" } else { "Metric groups of" };
            if is_common {
                writeln!(self.out, "{title}\n")?;
            } else {
                writeln!(self.out, "{title} {}:\n", table.path())?;
            }
            for row in &rows {
                writeln!(self.out, "  {}  ({} metrics)", row.group, row.metrics.len())?;
                if !row.description.is_empty() {
                    writeln!(self.out, "       [{}]", row.description)?;
                }
                if self.verbose {
                    writeln!(self.out, "       {}", row.metrics.join(" "))?;
                }
            }
            writeln!(self.out)?;
        }
        if shown == 0 && !self.json {
            writeln!(self.out, "no metric group of {} matches the filter", model.path())?;
        }
        Ok(())
    }

    fn events(self, model: &'static Model, deprecated: bool) -> anyhow::Result<()> {
        let mut rows: Vec<Event> = model
            .events
            .iter()
            .filter(|e| deprecated || e.flags & event_flags::DEPRECATED == 0)
            .filter(|e| self.keep(&[model.str(e.name)]))
            .collect();
        // perf list groups events by topic, then sorts by name.
        rows.sort_by(|a, b| {
            (model.str(a.topic), model.str(a.name), model.str(a.pmu)).cmp(&(
                model.str(b.topic),
                model.str(b.name),
                model.str(b.pmu),
            ))
        });
        let mut topic = None;
        for event in &rows {
            let row = EventJson {
                event: model.str(event.name),
                model: model.path(),
                pmu: model.str(event.pmu),
                topic: model.str(event.topic),
                encoding: event_encoding(model, event),
                terms: model.str(event.encoding),
                brief: model.str(event.brief),
                public: model.str(event.public),
                unit: model.str(event.unit),
                scale: event.scale,
                counters: counters_json(event.counters),
                pebs: event.pebs,
                per_pkg: event.flags & event_flags::PER_PKG != 0,
                deprecated: event.flags & event_flags::DEPRECATED != 0,
                experimental: event.flags & event_flags::EXPERIMENTAL != 0,
                compat: non_empty(model.str(event.compat)),
            };
            if self.json {
                json_line(self.out, &row)?;
                continue;
            }
            if topic != Some(row.topic) {
                if topic.is_some() {
                    writeln!(self.out)?;
                }
                writeln!(self.out, "{}:", if row.topic.is_empty() { "other" } else { row.topic })?;
                topic = Some(row.topic);
            }
            let mut head = format!("  {}", row.event);
            if row.pmu != "default_core" && !row.pmu.is_empty() {
                head.push_str(&format!("  [{}]", row.pmu));
            }
            writeln!(self.out, "{head}")?;
            if !row.brief.is_empty() {
                writeln!(self.out, "       [{}]", row.brief)?;
            }
            let mut detail =
                format!("       {}  counters: {}", row.encoding, counters_text(event.counters));
            if !row.unit.is_empty() {
                detail.push_str(&format!("  scale: {} {}", row.scale, row.unit));
            }
            for (flag, word) in [
                (row.per_pkg, "per package"),
                (row.deprecated, "deprecated"),
                (row.experimental, "experimental"),
            ] {
                if flag {
                    detail.push_str(&format!("  ({word})"));
                }
            }
            writeln!(self.out, "{detail}")?;
            if self.verbose && !row.public.is_empty() && row.public != row.brief {
                writeln!(self.out, "       {}", row.public)?;
            }
        }
        if rows.is_empty() && !self.json {
            writeln!(self.out, "no event of {} matches the filter", model.path())?;
        }
        Ok(())
    }
}
