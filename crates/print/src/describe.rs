//! `tmetric describe`'s text over the engine's `describe::Description` (its JSON is the
//! description serialized as one pretty-printed document).

use std::io::{self, Write};

use tmetric_engine::describe::{Description, Node};

/// The description as one pretty-printed JSON document.
pub fn json(out: &mut dyn Write, description: &Description) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, description)?;
    writeln!(out)
}

/// The description as text: descriptions, formula, threshold, the tree (valued when counts
/// were given), the needed events, the other models and the simulated machine to try.
pub fn text(out: &mut dyn Write, description: &Description) -> io::Result<()> {
    writeln!(out, "{}  ({}, PMU {})", description.metric, description.model, description.pmu)?;
    if !description.brief.is_empty() {
        writeln!(out, "  {}", description.brief)?;
    }
    if !description.public.is_empty() && description.public != description.brief {
        writeln!(out, "  {}", description.public)?;
    }
    if !description.groups.is_empty() {
        writeln!(out, "  groups: {}", description.groups.join(", "))?;
    }
    if let Some(unit) = &description.scale_unit {
        writeln!(out, "  ScaleUnit: {unit}")?;
    }
    if let Some(constraint) = &description.constraint {
        writeln!(out, "  MetricConstraint: {constraint}")?;
    }
    writeln!(out, "  formula: {}", description.expr)?;
    writeln!(out, "  {}", crate::verbose::vendor_tables())?;
    if let Some(threshold) = &description.threshold {
        writeln!(out, "  threshold: {threshold}")?;
    }
    writeln!(out, "  tree:")?;
    tree(out, &description.tree, 2)?;
    writeln!(out, "  needed events, SMT on: {}", description.needed_smt_on.join(", "))?;
    if description.needed_smt_off != description.needed_smt_on {
        writeln!(out, "  needed events, SMT off: {}", description.needed_smt_off.join(", "))?;
    } else {
        writeln!(out, "  needed events, SMT off: the same")?;
    }
    if !description.also_defined_in.is_empty() {
        let n = description.also_defined_in.len();
        let shown: Vec<&str> =
            description.also_defined_in.iter().take(6).map(String::as_str).collect();
        writeln!(
            out,
            "  also defined for: {}{}",
            shown.join(", "),
            if n > 6 { format!(" and {} more", n - 6) } else { String::new() }
        )?;
    }
    // How the formula changed between perf vintages: shown only when it did.
    let formulas = &description.by_perf_version;
    let distinct: std::collections::BTreeSet<_> = formulas.iter().map(|f| &f.expr).collect();
    if distinct.len() > 1 {
        writeln!(out, "  formula by perf version:")?;
        let mut previous: Option<&Option<String>> = None;
        for f in formulas {
            let text = match (&f.expr, previous) {
                (None, _) => "(not defined)".to_string(),
                (Some(_), Some(p)) if *p == f.expr => "(unchanged)".to_string(),
                (Some(expr), _) => expr.clone(),
            };
            writeln!(out, "    {:<5} {text}", f.perf)?;
            previous = Some(&f.expr);
        }
    }
    if let Some(sim) = description.simulated_on.first() {
        writeln!(
            out,
            "  counted on a simulated PMU: `tmetric --pmu-sim {sim} -M {} -a sleep 1`{}",
            description.metric,
            if description.simulated_on.len() > 1 {
                format!(" (also --pmu-sim {})", description.simulated_on[1..].join(", "))
            } else {
                String::new()
            }
        )?;
    }
    Ok(())
}

fn tree(out: &mut dyn Write, node: &Node, indent: usize) -> io::Result<()> {
    let pad = "  ".repeat(indent);
    match &node.counted {
        Some(v) => {
            let value = v.value.map_or("nan".to_string(), |x| format!("{x:.4}"));
            let why = v.why.as_ref().map(|w| format!("  [{w}]")).unwrap_or_default();
            writeln!(
                out,
                "{pad}{} = {value} {}{why}    ({})",
                node.metric, node.value_unit, node.expr
            )?;
        }
        None => writeln!(out, "{pad}{} = {}", node.metric, node.expr)?,
    }
    if !node.events.is_empty() {
        writeln!(out, "{pad}  events: {}", node.events.join(", "))?;
    }
    for child in &node.metrics {
        tree(out, child, indent + 1)?;
    }
    Ok(())
}
