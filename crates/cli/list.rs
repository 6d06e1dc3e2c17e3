//! `tmetric list`'s flags and glue: which kind of row, the filter and the model (`--model`,
//! else this machine's); the rows are `tmetric_engine::list`'s, laid out by
//! `tmetric_print::list`. Reads only the compiled catalogue and sysfs, never vendor JSON.

use std::io::Write;

use anyhow::bail;
use tmetric_catalog::Model;
use tmetric_engine::list;
use tmetric_print::list::{self as print, Style};

use tmetric_engine::models::find_model;
use tmetric_engine::select::examples;
use tmetric_print::names::NameFilter;

/// The compiled catalogue: models, metrics, metric groups and events.
#[derive(Debug, clap::Args)]
#[command(
    infer_long_args = true, // as perf's parser: its tests type `perf list --raw pmu`
    after_help = "\
KIND is one of models, metrics, metricgroups, events, pmu (the kernel PMU events in sysfs, as perf \
lists them). Without KIND: metrics when --model is given, \
else what perf's list shows: this machine's events (perf's, the kernel's, its model's) and \
metrics.\nFILTER is a case-insensitive substring, or a glob (`tma_*`) over the whole name; \
metrics also match on their group names."
)]
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
    /// Also how events are encoded: perf's `--details` (implies --verbose).
    #[arg(long)]
    details: bool,
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
    let filter = filter.map(NameFilter::new);
    let keep = |name: &str| filter.as_ref().is_none_or(|f| f.matches(name));
    let style = Style { json: args.json, verbose: args.verbose || args.details };
    let tools = list::tool_pmu_events(&keep);
    if kind == Some(Kind::Pmu) {
        let events = list::kernel_pmu_events(&tmetric_runtime::Sysfs::system(), &keep);
        if args.raw_dump {
            // perf lists events without a description first, then by topic (`tool`).
            let names: Vec<&str> = events
                .iter()
                .map(|e| e.encoding.as_str())
                .chain(tools.iter().map(|t| t.name))
                .collect();
            return Ok(print::words(out, &names)?);
        }
        print::kernel_pmu_events(out, &events, style, args.details)?;
        return Ok(print::tool_pmu_events(
            out,
            &tools,
            style,
            args.details,
            print::perf_list_columns(),
        )?);
    }
    if args.raw_dump {
        // perf's `list --raw-dump [metrics|metricgroups|GLOB]`: this machine's model (or
        // `--model`) and the common metrics; with a glob, the groups and then the names of
        // the metrics it matches.
        let model = match &args.model {
            Some(name) => Some(find_model(name)?),
            None => this_machine(),
        };
        let (groups, names) = list::raw_names(model, &keep);
        let words: Vec<&str> = match kind {
            Some(Kind::Metrics) => names,
            Some(Kind::Groups) => groups,
            _ => groups.into_iter().chain(names).collect(),
        };
        return Ok(print::words(out, &words)?);
    }
    let Some(kind) = kind.or(args.model.is_some().then_some(Kind::Metrics)) else {
        return machine_list(out, args, &keep, style, &tools);
    };
    let model = match (&args.model, kind) {
        (Some(name), _) => find_model(name)?,
        (None, Kind::Models) => return Ok(print::models(out, &models_marked(&keep), style)?),
        (None, _) if let Some(model) = this_machine() => {
            tmetric_print::out::warn(&format!(
                "listing {} (this machine's model; --model names another){}",
                model.path(),
                if kind == Kind::Events { no_core_pmu_note(model) } else { String::new() }
            ));
            model
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
    let path = model.path();
    Ok(match kind {
        Kind::Models => print::models(out, &models_marked(&keep), style),
        Kind::Metrics => print::metrics(out, &path, &list::metrics(model, &keep), style),
        Kind::Groups => print::groups(out, &path, &list::groups(model, &keep), style),
        Kind::Events => {
            print::events(out, &path, &list::events(model, args.deprecated, &keep), style)
        }
        Kind::Pmu => unreachable!("listed above"),
    }?)
}

/// The catalogue's models, this machine's marked.
fn models_marked(keep: &dyn Fn(&str) -> bool) -> Vec<list::ModelRow> {
    let here = this_machine().map(Model::path);
    let mut rows = list::models(keep);
    for row in &mut rows {
        row.this_machine = here.as_deref() == Some(row.model.as_str());
    }
    rows
}

/// When this machine has no core PMU (a guest without a virtual PMU), why `-e` cannot count
/// its model's events here and where it can: said with every listing of them.
fn no_core_pmu_note(model: &Model) -> String {
    if tmetric_runtime::Sysfs::system().core_pmu().is_some() {
        return String::new();
    }
    let there = crate::sim_hint::simulated_for_event(
        model.events.iter().next().map_or("", |e| model.str(e.name)),
    )
    .map(|(sim, _)| format!(" (`--pmu-sim {sim}` counts them on a simulated one)"))
    .unwrap_or_default();
    format!(
        "; this machine has no core PMU (a virtual machine without a virtual PMU), so -e cannot count these events here{there}"
    )
}

/// `tmetric list` without KIND or --model, as perf's `list`: this machine's events (perf's
/// symbolic ones, the kernel's PMU events, its model's) and then the metrics, with the model
/// named and what cannot be counted here said.
fn machine_list(
    out: &mut dyn Write,
    args: &ListArgs,
    keep: &dyn Fn(&str) -> bool,
    style: Style,
    tools: &[&'static tmetric_names::ToolPmuEvent],
) -> anyhow::Result<()> {
    let deprecated = args.deprecated;
    let sysfs = tmetric_runtime::Sysfs::system();
    if !style.json {
        writeln!(out, "\nList of pre-defined events (to be used in -e or -M):\n")?;
    }
    let tool_pmu = tmetric_engine::contract::current().tool_pmu;
    print::symbolic_events(out, sysfs.core_pmu().is_some(), tool_pmu, style)?;
    print::kernel_pmu_events(out, &list::kernel_pmu_events(&sysfs, keep), style, args.details)?;
    print::tool_pmu_events(out, tools, style, args.details, print::perf_list_columns())?;
    let model = this_machine();
    if let Some(model) = model {
        tmetric_print::out::warn(&format!(
            "this machine's model is {}{}",
            model.path(),
            no_core_pmu_note(model)
        ));
        if !style.json {
            writeln!(out)?;
        }
        print::events(out, &model.path(), &list::events(model, deprecated, keep), style)?;
        if !style.json {
            writeln!(out)?;
        }
        print::metrics(out, &model.path(), &list::metrics(model, keep), style)?;
    } else {
        // The common metrics still apply.
        let common = tmetric_catalog::common();
        print::metrics(out, &common.path(), &list::metrics(common, keep), style)?;
    }
    if !style.json {
        let here = model.map_or("no model in the catalogue".to_string(), Model::path);
        writeln!(
            out,
            "\nThe catalogue's {} models: `tmetric list models` (this machine: {here}).",
            list::models(&|_: &str| true).len()
        )?;
    }
    Ok(())
}

/// This machine's model, from its cpuid.
fn this_machine() -> Option<&'static Model> {
    let sysfs = tmetric_runtime::Sysfs::system();
    tmetric_engine::models::host_model(None, &sysfs, std::path::Path::new("/proc")).ok()
}
