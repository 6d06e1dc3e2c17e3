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
    let filter = filter.map(NameFilter::new);
    let keep = |name: &str| filter.as_ref().is_none_or(|f| f.matches(name));
    let style = Style { json: args.json, verbose: args.verbose };
    if kind == Some(Kind::Pmu) {
        let events = list::kernel_pmu_events(&tmetric_runtime::Sysfs::system(), &keep);
        if args.raw_dump {
            let names: Vec<&str> = events.iter().map(|e| e.encoding.as_str()).collect();
            return Ok(print::words(out, &names)?);
        }
        return Ok(print::kernel_pmu_events(out, &events, style)?);
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
    let kind = kind.unwrap_or(if args.model.is_some() { Kind::Metrics } else { Kind::Models });
    let model = match (&args.model, kind) {
        (Some(name), _) => find_model(name)?,
        (None, Kind::Models) => return Ok(print::models(out, &list::models(&keep), style)?),
        (None, _) if let Some(model) = this_machine() => {
            tmetric_print::out::warn(&format!(
                "listing {} (this machine's model; --model names another)",
                model.path()
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
        Kind::Models => print::models(out, &list::models(&keep), style),
        Kind::Metrics => print::metrics(out, &path, &list::metrics(model, &keep), style),
        Kind::Groups => print::groups(out, &path, &list::groups(model, &keep), style),
        Kind::Events => {
            print::events(out, &path, &list::events(model, args.deprecated, &keep), style)
        }
        Kind::Pmu => unreachable!("listed above"),
    }?)
}

/// This machine's model, from its cpuid.
fn this_machine() -> Option<&'static Model> {
    let sysfs = tmetric_runtime::Sysfs::system();
    tmetric_engine::models::host_model(None, &sysfs, std::path::Path::new("/proc")).ok()
}
