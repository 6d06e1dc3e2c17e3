//! The change summary of `cargo xtask import-vendor`: which models, events and metrics the import
//! added, removed or changed, and which metric formulas changed, so a reviewer sees the effect of
//! a vendor update before reading the diff of the generated code.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tmetric_pmu_events::{Event, Metric, Severity, Table, Tree};

/// Added, removed and changed names of one kind of item.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// Items in the old tree.
    pub old: usize,
    /// Items in the new tree.
    pub new: usize,
    /// Only in the new tree.
    pub added: Vec<String>,
    /// Only in the old tree.
    pub removed: Vec<String>,
    /// In both, with a difference that matters (for events: encoding or flags; for metrics: any
    /// field but the descriptions), with what changed.
    pub changed: Vec<String>,
    /// In both, differing only in their descriptions.
    pub descriptions_only: usize,
}

/// Per-model counts of a changed model.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ModelDelta {
    pub events: (usize, usize, usize),
    pub metrics: (usize, usize, usize),
    pub formulas: usize,
}

impl ModelDelta {
    fn total(&self) -> usize {
        self.events.0
            + self.events.1
            + self.events.2
            + self.metrics.0
            + self.metrics.1
            + self.metrics.2
    }
}

/// Everything that changed between two trees.
#[derive(Debug, Default)]
pub struct Changes {
    /// Models (tables with events or metrics, sys tables included), by path.
    pub models: Delta,
    /// Per changed model.
    pub model_deltas: Vec<(String, ModelDelta)>,
    pub events: Delta,
    pub metrics: Delta,
    /// Metrics whose `MetricExpr` changed (blanks ignored): name, old and new formula.
    pub formulas: Vec<(String, String, String)>,
    /// Loader diagnostics (errors, warnings) of the old and the new tree.
    pub diagnostics: ((usize, usize), (usize, usize)),
}

/// An event's identity within a tree: model path, PMU and lower-case name.
fn event_key(table: &Table, event: &Event) -> String {
    item_key(table, &event.pmu, &event.name.to_lowercase())
}

fn metric_key(table: &Table, metric: &Metric) -> String {
    item_key(table, &metric.pmu, &metric.name)
}

fn item_key(table: &Table, pmu: &str, name: &str) -> String {
    if pmu == "default_core" {
        format!("{} {name}", table.path)
    } else {
        format!("{} {pmu}/{name}", table.path)
    }
}

/// What of an event matters for counting: a change here is a changed event.
fn event_fields(e: &Event) -> Vec<(&'static str, String)> {
    vec![
        ("encoding", e.encoding.clone()),
        ("counters", format!("{:?}", e.counters)),
        ("pebs", e.pebs.to_string()),
        ("perpkg", e.per_pkg.to_string()),
        ("deprecated", e.deprecated.to_string()),
        ("experimental", e.experimental.to_string()),
        ("scale", format!("{:?}", e.scale_unit)),
        ("compat", format!("{:?}", e.compat)),
    ]
}

fn event_descriptions(e: &Event) -> (Option<String>, Option<String>) {
    (e.perf_desc(), e.perf_long_desc())
}

fn metric_fields(m: &Metric) -> Vec<(&'static str, String)> {
    vec![
        ("formula", normalize(&m.expr)),
        ("threshold", m.threshold.as_deref().map(normalize).unwrap_or_default()),
        ("groups", m.groups.join(";")),
        ("scale", format!("{:?}", m.scale_unit)),
        ("constraint", format!("{:?}", m.constraint)),
        ("nogroup", m.no_group.join(";")),
        ("default", format!("{:?}", m.default_group)),
        ("compat", format!("{:?}", m.compat)),
        ("aggregation", format!("{:?}", m.aggr_mode)),
    ]
}

/// A formula with runs of blanks made one space, so re-wrapping is not a change.
fn normalize(expr: &str) -> String {
    expr.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Items of one kind by key; a repeated key (the same name twice in a model and PMU) gets `#2`...
fn index<'t, T>(items: impl Iterator<Item = (String, &'t T)>) -> BTreeMap<String, &'t T> {
    let mut map = BTreeMap::new();
    for (key, item) in items {
        let mut unique = key.clone();
        let mut n = 1;
        while map.contains_key(&unique) {
            n += 1;
            unique = format!("{key} #{n}");
        }
        map.insert(unique, item);
    }
    map
}

fn models(tree: &Tree) -> BTreeMap<String, &Table> {
    tree.arches
        .iter()
        .flat_map(|a| &a.tables)
        .filter(|t| !t.is_empty())
        .map(|t| (t.path.clone(), t))
        .collect()
}

/// Compares two loaded trees.
pub fn compare(old: &Tree, new: &Tree) -> Changes {
    let (old_models, new_models) = (models(old), models(new));
    let mut changes = Changes {
        diagnostics: (
            (old.diagnostic_count(Severity::Error), old.diagnostic_count(Severity::Warning)),
            (new.diagnostic_count(Severity::Error), new.diagnostic_count(Severity::Warning)),
        ),
        ..Changes::default()
    };
    changes.models.old = old_models.len();
    changes.models.new = new_models.len();
    let empty = Table::default();
    let mut paths: Vec<&String> = old_models.keys().chain(new_models.keys()).collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        let (before, after) = (old_models.get(path), new_models.get(path));
        match (before, after) {
            (Some(_), None) => changes.models.removed.push(path.clone()),
            (None, Some(_)) => changes.models.added.push(path.clone()),
            _ => {}
        }
        let before = before.copied().unwrap_or(&empty);
        let after = after.copied().unwrap_or(&empty);
        let mut delta = ModelDelta::default();
        // Events.
        let old_events = index(before.events.iter().map(|e| (event_key(before, e), e)));
        let new_events = index(after.events.iter().map(|e| (event_key(after, e), e)));
        let (added, removed, changed, descriptions) =
            diff(&old_events, &new_events, event_fields, |a, b| {
                event_descriptions(a) != event_descriptions(b)
            });
        delta.events = (added.len(), removed.len(), changed.len());
        changes.events.added.extend(added);
        changes.events.removed.extend(removed);
        changes.events.changed.extend(changed);
        changes.events.descriptions_only += descriptions;
        changes.events.old += old_events.len();
        changes.events.new += new_events.len();
        // Metrics.
        let old_metrics = index(before.metrics.iter().map(|m| (metric_key(before, m), m)));
        let new_metrics = index(after.metrics.iter().map(|m| (metric_key(after, m), m)));
        let (added, removed, changed, descriptions) =
            diff(&old_metrics, &new_metrics, metric_fields, |a, b| {
                (&a.brief, &a.public) != (&b.brief, &b.public)
            });
        delta.metrics = (added.len(), removed.len(), changed.len());
        for (key, m) in &new_metrics {
            if let Some(o) = old_metrics.get(key)
                && normalize(&o.expr) != normalize(&m.expr)
            {
                changes.formulas.push((key.clone(), o.expr.clone(), m.expr.clone()));
                delta.formulas += 1;
            }
        }
        changes.metrics.added.extend(added);
        changes.metrics.removed.extend(removed);
        changes.metrics.changed.extend(changed);
        changes.metrics.descriptions_only += descriptions;
        changes.metrics.old += old_metrics.len();
        changes.metrics.new += new_metrics.len();
        if !before.is_empty() && !after.is_empty() && delta.total() > 0 {
            changes.model_deltas.push((path.clone(), delta));
        }
    }
    changes.models.changed = changes.model_deltas.iter().map(|(p, _)| p.clone()).collect();
    changes
}

type Diff = (Vec<String>, Vec<String>, Vec<String>, usize);

/// Keys only in `new`, only in `old`, in both with a different field (`key (field, ...)`), and
/// the number in both that differ only in descriptions.
fn diff<T>(
    old: &BTreeMap<String, &T>,
    new: &BTreeMap<String, &T>,
    fields: impl Fn(&T) -> Vec<(&'static str, String)>,
    descriptions_differ: impl Fn(&T, &T) -> bool,
) -> Diff {
    let added = new.keys().filter(|k| !old.contains_key(*k)).cloned().collect();
    let removed = old.keys().filter(|k| !new.contains_key(*k)).cloned().collect();
    let mut changed = Vec::new();
    let mut descriptions = 0;
    for (key, after) in new {
        let Some(before) = old.get(key) else { continue };
        let which: Vec<&str> = fields(before)
            .into_iter()
            .zip(fields(after))
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a.0)
            .collect();
        if !which.is_empty() {
            changed.push(format!("{key} ({})", which.join(", ")));
        } else if descriptions_differ(before, after) {
            descriptions += 1;
        }
    }
    (added, removed, changed, descriptions)
}

/// The summary as text: counts first, then lists of at most `limit` entries each.
pub fn render(changes: &Changes, limit: usize) -> String {
    let mut out = String::new();
    let c = changes;
    out.push_str("Vendor tree changes (old -> new)\n");
    let _ = writeln!(
        out,
        "  models:  {} -> {}: {} added, {} removed, {} changed",
        c.models.old,
        c.models.new,
        c.models.added.len(),
        c.models.removed.len(),
        c.models.changed.len()
    );
    let _ = writeln!(
        out,
        "  events:  {} -> {}: {} added, {} removed, {} changed, {} with new descriptions only",
        c.events.old,
        c.events.new,
        c.events.added.len(),
        c.events.removed.len(),
        c.events.changed.len(),
        c.events.descriptions_only
    );
    if !c.events.changed.is_empty() {
        let _ = writeln!(out, "           changed fields: {}", field_counts(&c.events.changed));
    }
    let _ = writeln!(
        out,
        "  metrics: {} -> {}: {} added, {} removed, {} changed ({} with a new formula), {} with new descriptions only",
        c.metrics.old,
        c.metrics.new,
        c.metrics.added.len(),
        c.metrics.removed.len(),
        c.metrics.changed.len(),
        c.formulas.len(),
        c.metrics.descriptions_only
    );
    if !c.metrics.changed.is_empty() {
        let _ = writeln!(out, "           changed fields: {}", field_counts(&c.metrics.changed));
    }
    let ((old_e, old_w), (new_e, new_w)) = c.diagnostics;
    let _ = writeln!(
        out,
        "  loader diagnostics: {old_e} errors, {old_w} warnings -> {new_e} errors, {new_w} warnings"
    );
    list(&mut out, "Models added", &c.models.added, limit);
    list(&mut out, "Models removed", &c.models.removed, limit);
    let mut deltas = c.model_deltas.clone();
    deltas.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then_with(|| a.0.cmp(&b.0)));
    let lines: Vec<String> = deltas
        .iter()
        .map(|(path, d)| {
            format!(
                "{path}: events +{} -{} ~{}, metrics +{} -{} ~{} ({} formulas)",
                d.events.0,
                d.events.1,
                d.events.2,
                d.metrics.0,
                d.metrics.1,
                d.metrics.2,
                d.formulas
            )
        })
        .collect();
    list(&mut out, "Models changed (most changes first)", &lines, limit);
    list(&mut out, "Events added", &c.events.added, limit);
    list(&mut out, "Events removed", &c.events.removed, limit);
    list(&mut out, "Events changed", &c.events.changed, limit);
    list(&mut out, "Metrics added", &c.metrics.added, limit);
    list(&mut out, "Metrics removed", &c.metrics.removed, limit);
    let formulas: Vec<String> = c
        .formulas
        .iter()
        .map(|(key, old, new)| format!("{key}\n      old: {}\n      new: {}", clip(old), clip(new)))
        .collect();
    list(&mut out, "Metrics with a new formula", &formulas, limit);
    let other: Vec<String> = c
        .metrics
        .changed
        .iter()
        .filter(|m| m.rsplit_once(" (").is_none_or(|(_, fields)| !fields.contains("formula")))
        .cloned()
        .collect();
    list(&mut out, "Metrics changed otherwise", &other, limit);
    out
}

/// How often each field appears in `key (field, field)` entries: `encoding 12, pebs 3`, most
/// frequent first.
fn field_counts(changed: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in changed {
        if let Some((_, fields)) = entry.rsplit_once(" (") {
            for field in fields.trim_end_matches(')').split(", ") {
                *counts.entry(field).or_default() += 1;
            }
        }
    }
    let mut counts: Vec<(&str, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    counts.iter().map(|(field, n)| format!("{field} {n}")).collect::<Vec<_>>().join(", ")
}

/// `title (n):` then up to `limit` items and "... and N more".
fn list(out: &mut String, title: &str, items: &[String], limit: usize) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title} ({}):", items.len());
    for item in items.iter().take(limit) {
        let _ = writeln!(out, "    {item}");
    }
    if items.len() > limit {
        let _ = writeln!(out, "    ... and {} more", items.len() - limit);
    }
}

/// A formula cut to 160 characters, blanks normalized, for one readable line.
fn clip(expr: &str) -> String {
    let text = normalize(expr);
    match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{} ...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vintage(name: &str) -> Tree {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/vendor-vintages")
            .join(name)
            .join("arch");
        tmetric_pmu_events::load_tree(&root).unwrap()
    }

    /// perf 6.1 -> 6.12 in miniature (tests/data/vendor-vintages/README.md lists what differs).
    #[test]
    fn fixture_vintages_differ_as_written() {
        let changes = compare(&vintage("v6.1"), &vintage("v6.12"));
        let counts = |d: &Delta| (d.old, d.new, d.added.len(), d.removed.len(), d.changed.len());
        assert_eq!(counts(&changes.models), (4, 4, 1, 1, 1));
        assert_eq!(changes.models.added, ["x86/grandridge"]);
        assert_eq!(changes.models.removed, ["x86/bonnell"]);
        assert_eq!(counts(&changes.events), (14, 14, 2, 2, 1));
        assert_eq!(
            changes.events.added,
            [
                "x86/grandridge br_inst_retired.all_branches",
                "x86/haswell br_inst_retired.all_branches"
            ]
        );
        assert_eq!(
            changes.events.removed,
            ["x86/bonnell busq_empty.self", "x86/haswell machine_clears.old"]
        );
        assert_eq!(changes.events.changed, ["x86/haswell uops_retired.all (encoding)"]);
        assert_eq!(changes.events.descriptions_only, 1);
        assert_eq!(counts(&changes.metrics), (3, 3, 1, 1, 2));
        assert_eq!(
            changes.metrics.changed,
            ["x86/haswell IPC (threshold)", "x86/haswell UPI (formula)"]
        );
        assert_eq!(
            changes.formulas,
            [(
                "x86/haswell UPI".to_string(),
                "UOPS_RETIRED.ALL / INST_RETIRED.ANY".to_string(),
                "UOPS_RETIRED.ALL / INST_RETIRED.ANY / 1".to_string()
            )]
        );
        assert_eq!(
            changes.model_deltas,
            [(
                "x86/haswell".to_string(),
                ModelDelta { events: (1, 1, 1), metrics: (1, 1, 2), formulas: 1 }
            )]
        );
        assert_eq!(changes.diagnostics, ((0, 5), (0, 1)));
    }

    #[test]
    fn identical_trees_have_no_changes() {
        let changes = compare(&vintage("v6.12"), &vintage("v6.12"));
        assert_eq!(changes.model_deltas, []);
        assert_eq!((changes.events.added.len(), changes.events.changed.len()), (0, 0));
        assert_eq!(changes.events.descriptions_only + changes.metrics.descriptions_only, 0);
        let text = render(&changes, 20);
        assert_eq!(text.lines().count(), 5, "{text}");
    }

    #[test]
    fn summary_counts_first_then_bounded_lists() {
        let text = render(&compare(&vintage("v6.1"), &vintage("v6.12")), 1);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..7],
            [
                "Vendor tree changes (old -> new)",
                "  models:  4 -> 4: 1 added, 1 removed, 1 changed",
                "  events:  14 -> 14: 2 added, 2 removed, 1 changed, 1 with new descriptions only",
                "           changed fields: encoding 1",
                "  metrics: 3 -> 3: 1 added, 1 removed, 2 changed (1 with a new formula), 0 with new descriptions only",
                "           changed fields: formula 1, threshold 1",
                "  loader diagnostics: 0 errors, 5 warnings -> 0 errors, 1 warnings",
            ]
        );
        assert!(
            text.contains(
                "\nEvents added (2):\n    x86/grandridge br_inst_retired.all_branches\n    ... and 1 more\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("\nMetrics with a new formula (1):\n    x86/haswell UPI\n      old: UOPS_RETIRED.ALL / INST_RETIRED.ANY\n      new: UOPS_RETIRED.ALL / INST_RETIRED.ANY / 1\n"),
            "{text}"
        );
        assert!(
            text.contains("\nMetrics changed otherwise (1):\n    x86/haswell IPC (threshold)\n"),
            "{text}"
        );
    }
}
