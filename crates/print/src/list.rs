//! `tmetric list`'s layouts over the engine's listing rows (`tmetric_engine::list`): perf-list
//! -like text, JSON lines (one row per line, every field) and `--raw-dump`'s words.

use std::io::{self, Write};

use tmetric_catalog::catalog::CounterMask;
use tmetric_engine::list::{
    CountersRow, EventRow, GroupRow, KernelPmuEvent, MetricRow, ModelRow, Table,
};

use crate::json_line;

/// How rows are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// One JSON object per line, with every field.
    pub json: bool,
    /// Also long descriptions, expressions, thresholds and group members.
    pub verbose: bool,
}

/// `--raw-dump`: each word followed by a space, for scripts.
pub fn words(out: &mut dyn Write, words: &[&str]) -> io::Result<()> {
    for word in words {
        write!(out, "{word} ")?;
    }
    Ok(())
}

/// Kernel PMU events as perf lists them: `pmu/event/` (`event OR pmu/event/` on core PMUs)
/// and `[Kernel PMU event]` at column 53, the terms below with `verbose`.
pub fn kernel_pmu_events(
    out: &mut dyn Write,
    events: &[KernelPmuEvent],
    style: Style,
) -> io::Result<()> {
    for event in events {
        if style.json {
            json_line(out, event)?;
            continue;
        }
        let name = if event.core {
            format!("  {} OR {}", event.event, event.encoding)
        } else {
            format!("  {}", event.encoding)
        };
        writeln!(out, "{name:<53}[Kernel PMU event]")?;
        if style.verbose && !event.terms.is_empty() {
            writeln!(out, "       [{}]", event.terms)?;
        }
    }
    Ok(())
}

/// The models: a table with a header (text), or one JSON line each.
pub fn models(out: &mut dyn Write, rows: &[ModelRow], style: Style) -> io::Result<()> {
    if style.json {
        for row in rows {
            json_line(out, row)?;
        }
        return Ok(());
    }
    if rows.is_empty() {
        return writeln!(out, "no model matches the filter");
    }
    writeln!(out, "{:<34} {:>6} {:>7}  {:<18} CPUID", "MODEL", "EVENTS", "METRICS", "PERF")?;
    for row in rows {
        let cpuid = if row.sys {
            "(sys: matched by PMU identifier)".to_string()
        } else if row.arch == "common" {
            "(applies to every model)".to_string()
        } else if row.cpuids.is_empty() {
            "-".to_string()
        } else {
            row.cpuids.iter().map(|c| c.regex).collect::<Vec<_>>().join("  ")
        };
        // The perf vintages that define the model (this row's figures are the selected one's).
        let perf = row.vintages.join(" ");
        let mark = if row.this_machine { "  <- this machine" } else { "" };
        writeln!(
            out,
            "{:<34} {:>6} {:>7}  {perf:<18} {cpuid}{mark}",
            row.model, row.events, row.metrics
        )?;
    }
    Ok(())
}

/// `model`'s metrics and the common ones, a titled block per table that has rows.
pub fn metrics(
    out: &mut dyn Write,
    model: &str,
    tables: &[Table<MetricRow>],
    style: Style,
) -> io::Result<()> {
    for table in tables {
        if style.json {
            for row in &table.rows {
                json_line(out, row)?;
            }
            continue;
        }
        if table.rows.is_empty() {
            continue;
        }
        if table.common {
            writeln!(
                out,
                "Common metrics (software events only; they apply to every model, {}):\n",
                table.model.path()
            )?;
        } else {
            writeln!(out, "Metrics of {}:\n", table.model.path())?;
        }
        for row in &table.rows {
            let mut head = format!("  {}", row.metric);
            if row.pmu != "default_core" && !row.pmu.is_empty() {
                head.push_str(&format!("  [{}]", row.pmu));
            }
            if !row.unit.is_empty() {
                head.push_str(&format!("  ({})", row.unit));
            }
            writeln!(out, "{head}")?;
            if !row.brief.is_empty() {
                writeln!(out, "       [{}]", row.brief)?;
            }
            if !row.groups.is_empty() {
                writeln!(out, "       groups: {}", row.groups.join(";"))?;
            }
            if style.verbose {
                if !row.public.is_empty() && row.public != row.brief {
                    writeln!(out, "       {}", row.public)?;
                }
                writeln!(out, "       expr: {}", row.expr)?;
                if let Some(threshold) = row.threshold {
                    writeln!(out, "       threshold: {threshold}")?;
                }
            }
        }
        writeln!(out)?;
    }
    if !style.json && tables.iter().all(|t| t.rows.is_empty()) {
        writeln!(out, "no metric of {model} matches the filter")?;
    }
    Ok(())
}

/// `model`'s metric groups and the common ones, a titled block per table that has rows.
pub fn groups(
    out: &mut dyn Write,
    model: &str,
    tables: &[Table<GroupRow>],
    style: Style,
) -> io::Result<()> {
    for table in tables {
        if style.json {
            for row in &table.rows {
                json_line(out, row)?;
            }
            continue;
        }
        if table.rows.is_empty() {
            continue;
        }
        if table.common {
            writeln!(out, "Common metric groups (every model):\n")?;
        } else {
            writeln!(out, "Metric groups of {}:\n", table.model.path())?;
        }
        for row in &table.rows {
            writeln!(out, "  {}  ({} metrics)", row.group, row.metrics.len())?;
            if !row.description.is_empty() {
                writeln!(out, "       [{}]", row.description)?;
            }
            if style.verbose {
                writeln!(out, "       {}", row.metrics.join(" "))?;
            }
        }
        writeln!(out)?;
    }
    if !style.json && tables.iter().all(|t| t.rows.is_empty()) {
        writeln!(out, "no metric group of {model} matches the filter")?;
    }
    Ok(())
}

/// `model`'s events, under a `topic:` line per topic.
pub fn events(out: &mut dyn Write, model: &str, rows: &[EventRow], style: Style) -> io::Result<()> {
    let mut topic = None;
    for row in rows {
        if style.json {
            json_line(out, row)?;
            continue;
        }
        if topic != Some(row.topic) {
            if topic.is_some() {
                writeln!(out)?;
            }
            writeln!(out, "{}:", if row.topic.is_empty() { "other" } else { row.topic })?;
            topic = Some(row.topic);
        }
        let mut head = format!("  {}", row.event);
        if row.pmu != "default_core" && !row.pmu.is_empty() {
            head.push_str(&format!("  [{}]", row.pmu));
        }
        writeln!(out, "{head}")?;
        if !row.brief.is_empty() {
            writeln!(out, "       [{}]", row.brief)?;
        }
        let mut detail = format!("       {}  counters: {}", row.encoding, counters(&row.counters));
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
        writeln!(out, "{detail}")?;
        if style.verbose && !row.public.is_empty() && row.public != row.brief {
            writeln!(out, "       {}", row.public)?;
        }
    }
    if rows.is_empty() && !style.json {
        writeln!(out, "no event of {model} matches the filter")?;
    }
    Ok(())
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

/// The counters an event may use, as text: `any`, `0-3`, `fixed 1`, `0-3, fixed 0`.
pub fn counters(row: &CountersRow) -> String {
    let mut parts = Vec::new();
    match &row.generic {
        None => parts.push("any".to_string()),
        Some(generic) if !generic.is_empty() => parts.push(ranges(generic)),
        Some(_) => {}
    }
    if !row.fixed.is_empty() {
        parts.push(format!("fixed {}", ranges(&row.fixed)));
    }
    parts.join(", ")
}

/// [`counters`] of a catalogue event's counter masks.
pub fn counters_text(c: CounterMask) -> String {
    counters(&c.into())
}

/// perf's symbolic events as `perf list` shows them: one line per event with its aliases
/// (`page-faults OR faults`) and its kind at column 53 (`[Software event]`); hardware ones
/// only when `hardware` (a core PMU counts them).
pub fn symbolic_events(out: &mut dyn Write, hardware: bool, style: Style) -> io::Result<()> {
    let mut kinds: Vec<(&[(&str, u64)], &str)> = Vec::new();
    if hardware {
        kinds.push((tmetric_names::HARDWARE, "Hardware event"));
    }
    kinds.push((tmetric_names::SOFTWARE, "Software event"));
    kinds.push((tmetric_names::TOOL, "Tool event"));
    for (table, kind) in kinds {
        let mut configs: Vec<u64> = table.iter().map(|&(_, c)| c).collect();
        configs.dedup();
        for config in configs {
            let names: Vec<&str> =
                table.iter().filter(|&&(_, c)| c == config).map(|&(n, _)| n).collect();
            if style.json {
                json_line(
                    out,
                    &serde_json::json!({ "event": names[0], "aliases": &names[1..], "type": kind }),
                )?;
            } else {
                writeln!(out, "{:<53}[{kind}]", format!("  {}", names.join(" OR ")))?;
            }
        }
    }
    Ok(())
}
