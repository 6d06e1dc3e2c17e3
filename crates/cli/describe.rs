//! `tmetric describe METRIC`'s flags and glue: the model (`--model`, else the common metrics',
//! this machine's or the first that defines the metric, said on standard error), the counts
//! file, and the errors for a metric no model defines; the description is
//! `tmetric_engine::describe`'s, printed by `tmetric_print::describe`.

use std::io::Write;

use anyhow::bail;
use tmetric_catalog::{Model, models};
use tmetric_engine::Select;
use tmetric_engine::describe::{self, defining};
use tmetric_offline::counts::evaluate_tree;

use tmetric_engine::models::find_model;
use tmetric_text::{closest, join_code};

/// One metric in full: descriptions, formula, threshold, its tree and the events it needs.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  tmetric describe tma_dtlb_store --model sapphirerapids\n  \
    tmetric describe tma_backend_bound --model alderlake --json\n  \
    tmetric describe tma_retiring --model sapphirerapids --counts counts.json")]
pub struct DescribeArgs {
    /// The metric.
    #[arg(value_name = "METRIC")]
    metric: String,
    /// The model whose metric to describe (default: this machine's model when it defines the
    /// metric, else the common metrics', else the first model that does; the others are
    /// listed).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Evaluate the tree over this counts file (docs/counts-format.md; `-` reads standard
    /// input): each node's value, with the reason for every `nan` or out-of-range value.
    #[arg(long, value_name = "FILE")]
    counts: Option<std::path::PathBuf>,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

/// Runs `tmetric describe`.
pub fn run(args: &DescribeArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let defining = defining(&args.metric);
    let model = chosen_model(args, &defining)?;
    let found = model.metrics_named(&args.metric);
    if found.is_empty() {
        let others: Vec<String> = defining.iter().take(8).map(|m| m.path()).collect();
        if others.is_empty() {
            bail!("{} has no metric `{}`, and no other model does", model.path(), args.metric);
        }
        bail!(
            "{} has no metric `{}`; it is defined for {}{}",
            model.path(),
            args.metric,
            others.join(", "),
            if defining.len() > 8 {
                format!(" and {} more", defining.len() - 8)
            } else {
                String::new()
            }
        );
    }
    let file = args.counts.as_deref().map(crate::counts::read).transpose()?;
    for (i, &metric) in found.iter().enumerate() {
        let values = match &file {
            Some(file) => evaluate_tree(model, metric, file)?,
            None => Vec::new(),
        };
        let simulated_on = crate::sim_hint::simulated_for(&args.metric, Some(model))
            .into_iter()
            .map(|(name, _)| name.to_string())
            .collect();
        let description = describe::describe(model, metric, &defining, &values, simulated_on);
        if args.json {
            tmetric_print::describe::json(out, &description)?;
            continue;
        }
        if i > 0 {
            writeln!(out)?;
        }
        tmetric_print::describe::text(out, &description)?;
    }
    Ok(())
}

/// `--model`'s model, else [`default_model`]'s; a metric no model defines is an error with
/// the close names.
fn chosen_model(
    args: &DescribeArgs,
    defining: &[&'static Model],
) -> anyhow::Result<&'static Model> {
    if let Some(name) = &args.model {
        return Ok(find_model(name)?);
    }
    if let Some(model) = default_model(&args.metric, defining) {
        return Ok(model);
    }
    let names = models().iter().flat_map(|m| m.metrics().map(move |x| m.str(x.name).to_string()));
    let close = closest(&args.metric, names, 5);
    let hint = if close.is_empty() {
        "`tmetric list metrics` lists them".to_string()
    } else {
        format!("did you mean {}?", join_code(&close))
    };
    bail!("no model of the catalogue defines a metric `{}`; {hint}", args.metric)
}

/// The model `describe` uses without `--model`: the common metrics' table when it defines
/// `metric` (perf looks there first), else this machine's model when it does, else the first
/// model that does; says which on standard error for a CPU model.
fn default_model(metric: &str, defining: &[&'static Model]) -> Option<&'static Model> {
    // perf's -M looks among the common metrics first; they apply to every machine.
    let common = tmetric_catalog::common();
    if let Some(common) = defining.iter().copied().find(|d| std::ptr::eq(*d, common)) {
        return Some(common);
    }
    let sysfs = tmetric_runtime::Sysfs::system();
    let here = tmetric_engine::models::host_model(None, &sysfs, std::path::Path::new("/proc")).ok();
    if let Some(here) = here
        && defining.iter().any(|d| std::ptr::eq(*d, here))
    {
        tmetric_print::out::warn(&format!(
            "describing {}'s `{metric}` (this machine's model; --model names another)",
            here.path()
        ));
        return Some(here);
    }
    let chosen = defining.first().copied()?;
    let here_text = match here {
        Some(here) => format!("this machine's model, {}, has no metric `{metric}`", here.path()),
        None => "this machine's model is not known".to_string(),
    };
    tmetric_print::out::warn(&format!(
        "{here_text}; describing {}'s, the first of {} models that define it (--model names another)",
        chosen.path(),
        defining.len()
    ));
    Some(chosen)
}
