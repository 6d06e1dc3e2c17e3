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
/// and `[Kernel PMU event]` at column 53, the terms below with `verbose`, or as perf's
/// `--details` encodes them (`msr/event=0x00/`) with `details`.
pub fn kernel_pmu_events(
    out: &mut dyn Write,
    events: &[KernelPmuEvent],
    style: Style,
    details: bool,
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
        if details {
            writeln!(out, "        {}/{}/", event.pmu, event.terms)?;
        } else if style.verbose && !event.terms.is_empty() {
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
    writeln!(out, "\n{}", crate::verbose::vendor_tables())
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
/// only when `hardware` (a core PMU counts them), perf 6.12's three tool events unless
/// `tool_pmu` (perf 7.x lists them with its tool PMU: [`tool_pmu_events`]).
pub fn symbolic_events(
    out: &mut dyn Write,
    hardware: bool,
    tool_pmu: bool,
    style: Style,
) -> io::Result<()> {
    let mut kinds: Vec<(&[(&str, u64)], &str)> = Vec::new();
    if hardware {
        kinds.push((tmetric_names::HARDWARE, "Hardware event"));
    }
    kinds.push((tmetric_names::SOFTWARE, "Software event"));
    if !tool_pmu {
        kinds.push((tmetric_names::TOOL, "Tool event"));
    }
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

/// One event of perf 7.x's tool PMU as `perf list -j` writes it, keys in its order.
#[derive(serde::Serialize)]
struct ToolPmuJson<'a> {
    #[serde(rename = "Unit")]
    unit: &'a str,
    #[serde(rename = "Topic")]
    topic: &'a str,
    #[serde(rename = "EventName")]
    name: &'a str,
    #[serde(rename = "EventType")]
    kind: &'a str,
    #[serde(rename = "BriefDescription")]
    description: &'a str,
    #[serde(rename = "Encoding")]
    encoding: &'a str,
}

/// perf 7.x's tool PMU (`events`, in name order as perf sorts them) as `perf list` shows it:
/// a `tool:` topic, each name with its description and ` Unit: tool`, wrapped as perf wraps
/// at `columns`; with `details` its encoding below (`tool/config=0x1/`); JSON lines with
/// `perf list -j`'s keys; `names_only` is `--raw-dump`'s words.
pub fn tool_pmu_events(
    out: &mut dyn Write,
    events: &[&tmetric_names::ToolPmuEvent],
    style: Style,
    details: bool,
    columns: usize,
) -> io::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    if !style.json {
        writeln!(out, "\n{TOOL_PMU}:")?;
    }
    for event in events {
        // jevents.py's `llx`: below 10 in decimal, else in hex.
        let config = match event.config {
            c @ 0..10 => c.to_string(),
            c => format!("{c:#x}"),
        };
        let encoding = format!("{TOOL_PMU}/config={config}/");
        if style.json {
            json_line(
                out,
                &ToolPmuJson {
                    unit: TOOL_PMU,
                    topic: TOOL_PMU,
                    name: event.name,
                    kind: "Kernel PMU event",
                    description: event.description,
                    encoding: &encoding,
                },
            )?;
            continue;
        }
        writeln!(out, "  {}", event.name)?;
        // `default_print_event`: the PMU is named after the description, after a full stop
        // unless it ends with one.
        let stop = if event.description.ends_with('.') { "" } else { "." };
        let text = format!("{}{stop} Unit: {TOOL_PMU}", event.description);
        writeln!(out, "       [{}]", perf_wordwrap(&text, 8, columns))?;
        if details {
            writeln!(out, "        {}", perf_wordwrap(&encoding, 8, columns))?;
        }
    }
    Ok(())
}

/// perf 7.x's name for its PMU of the events it computes itself.
const TOOL_PMU: &str = "tool";

/// `builtin-list.c`'s `wordwrap`: words (split at blanks and commas, a comma kept before the
/// next word) from column `start`, a line broken before a word that would reach `max`, the
/// next line indented to `start`.
pub fn perf_wordwrap(text: &str, start: usize, max: usize) -> String {
    let mut out = String::new();
    let mut column = start;
    let mut saw_newline = false;
    let mut comma = false;
    let mut rest = text;
    while !rest.is_empty() {
        let wlen = rest.find([' ', ',', '\t', '\n']).unwrap_or(rest.len());
        let mut sep = if comma { "," } else { " " };
        if (column + wlen >= max && column > start) || saw_newline {
            out.push_str(if comma { ",\n" } else { "\n" });
            out.push_str(&" ".repeat(start));
            column = start;
        }
        if column <= start {
            sep = "";
        }
        out.push_str(sep);
        out.push_str(&rest[..wlen]);
        column += sep.len() + wlen;
        saw_newline = rest[wlen..].starts_with('\n');
        rest = &rest[wlen..];
        comma = rest.starts_with(',');
        rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == ',');
    }
    out
}

/// The width perf's `list` wraps descriptions at when it writes to a pipe or file
/// (`pager_get_columns`): `COLUMNS`, else 80 less 2.
pub fn perf_list_columns() -> usize {
    match std::env::var("COLUMNS") {
        Ok(text) => text.trim().parse().unwrap_or(0),
        Err(_) => 78,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand through `builtin-list.c`'s `wordwrap` (column 8, width 78): a word that
    /// would reach column 78 starts the next line at column 8; a comma is the next word's
    /// separator, kept at the end of the line when the break falls there.
    #[test]
    fn descriptions_wrap_as_perf_list_wraps_them() {
        let text = "Number of cores. A core consists of 1 or more thread, with each thread being associated with a logical Linux CPU. Unit: tool";
        assert_eq!(
            perf_wordwrap(text, 8, 78),
            "Number of cores. A core consists of 1 or more thread,with each thread\n        being associated with a logical Linux CPU. Unit: tool"
        );
        assert_eq!(perf_wordwrap("aaaa, bbbb", 2, 8), "aaaa,\n  bbbb");
        assert_eq!(perf_wordwrap("one", 8, 78), "one");
    }
}
