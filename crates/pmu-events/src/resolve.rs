//! Resolution: what each identifier of each metric names, per model (perf's `expr__get_id` in tools/perf/util/expr.c and metric references in util/metricgroup.c).
//!
//! An identifier is, in this order: a metric of the same PMU (case-insensitive), a JSON
//! event of the model (case-insensitive, optionally `PMU@EVENT,terms@mods` or
//! `EVENT:mods`), an event of a PMU the kernel exposes in sysfs (`msr@tsc@`,
//! `cstate_pkg@c6-residency@`), a kernel-named event (`cycles`, `topdown-retiring`), or a
//! tool event (`duration_time`). Anything else is a compile error, never a silent NaN.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use tmetric_expr::{Expr, caret_lines, parse};
use tmetric_model::catalog::Tool;

use crate::{Table, Tree};

mod classify;
mod diagnose;

use classify::{Lookup, classify};
use diagnose::{
    check_references, identifiers, literal_span, location_file, location_line, mark, parse_message,
};

/// What an input slot names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// A JSON event of the table (index into `Table::events`).
    Event(usize),
    /// A kernel-named event (`cycles`, `topdown-retiring`, `task-clock`).
    Kernel,
    /// An event of a PMU found in sysfs (`msr@tsc@`, `uncore_cha_0@event=0x1@`).
    Sysfs,
    /// A tool event perf computes itself.
    Tool(Tool),
    /// Only the argument of `has_event`/`strcmp_cpuid_str`.
    Probe,
}

/// One distinct identifier of a table's expressions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdSlot {
    /// The identifier after perf's normalisation.
    pub text: String,
    /// What it names.
    pub kind: SlotKind,
    /// The PMU written in the identifier, or the JSON event's PMU.
    pub pmu: String,
    /// The event name, or the raw terms when the identifier names none.
    pub event: String,
    /// Extra terms after the event name (`cmask=1`).
    pub terms: String,
    /// Modifiers (`k`, `u`, `R`).
    pub modifiers: String,
    /// The `R` modifier: a retire latency, not a count.
    pub retire_latency: bool,
}

/// What an identifier of one metric refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Index into [`ResolvedTable::ids`].
    Id(usize),
    /// Index into `Table::metrics`.
    Metric(usize),
}

/// One metric after parsing and resolution.
#[derive(Debug, Clone)]
pub struct ResolvedMetric {
    /// The parsed `MetricExpr`.
    pub expr: Option<Expr>,
    /// The parsed `MetricThreshold`.
    pub threshold: Option<Expr>,
    /// Identifier text to target, for both expressions.
    pub targets: BTreeMap<String, Target>,
    /// Whether `MetricExpr` compiled: parsed, every identifier resolved, no reference
    /// cycle, and every referenced metric compiled too.
    pub ok: bool,
    /// Whether `MetricThreshold` (if any) compiled; a broken threshold does not break the metric.
    pub threshold_ok: bool,
}

impl ResolvedMetric {
    /// Metrics referenced by `MetricExpr`, ascending, without duplicates.
    pub fn metric_refs(&self) -> Vec<usize> {
        self.refs_of(self.expr.as_ref())
    }

    /// Metrics referenced by `MetricThreshold` (usually the metric itself), ascending.
    pub fn threshold_refs(&self) -> Vec<usize> {
        self.refs_of(self.threshold.as_ref())
    }

    fn refs_of(&self, expr: Option<&Expr>) -> Vec<usize> {
        let Some(expr) = expr else { return Vec::new() };
        let mut refs: Vec<usize> = expr
            .idents()
            .into_iter()
            .filter_map(|id| match self.targets.get(&id.name) {
                Some(Target::Metric(m)) => Some(*m),
                _ => None,
            })
            .collect();
        refs.sort_unstable();
        refs.dedup();
        refs
    }
}

/// Why a metric does not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiagnosticKind {
    /// The expression does not parse.
    Parse,
    /// An identifier names nothing known.
    UnknownIdentifier,
    /// Metrics reference each other in a loop.
    Cycle,
    /// It references a metric that does not compile.
    BrokenReference,
}

/// A vendor-data problem, with enough context to find and fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The table (`x86/skylake`).
    pub table: String,
    /// The metric's name.
    pub metric: String,
    /// The JSON file, relative to `pmu-events/arch`.
    pub file: String,
    /// 1-based line of the expression in that file.
    pub line: usize,
    /// `MetricExpr` or `MetricThreshold`.
    pub field: &'static str,
    /// What kind of problem.
    pub kind: DiagnosticKind,
    /// One-line explanation.
    pub message: String,
    /// The expression with a caret under the spot, when there is one.
    pub caret: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "metric `{}` of {} ({}:{}, {}): {}",
            self.metric, self.table, self.file, self.line, self.field, self.message
        )?;
        if let Some(caret) = &self.caret {
            write!(f, "\n{caret}")?;
        }
        Ok(())
    }
}

/// A vendor table with every metric parsed and each identifier resolved.
#[derive(Debug)]
pub struct ResolvedTable<'t> {
    /// The table.
    pub table: &'t Table,
    /// Input slots in order of first use.
    pub ids: Vec<IdSlot>,
    /// One per `table.metrics`, same index.
    pub metrics: Vec<ResolvedMetric>,
    /// Problems, in metric order.
    pub diagnostics: Vec<Diagnostic>,
}

impl ResolvedTable<'_> {
    /// Metric indices in dependency order (referenced metrics first), compiled ones only.
    pub fn eval_order(&self) -> Vec<usize> {
        let mut order = Vec::with_capacity(self.metrics.len());
        let mut state = vec![0u8; self.metrics.len()];
        fn visit(m: usize, metrics: &[ResolvedMetric], state: &mut [u8], order: &mut Vec<usize>) {
            if state[m] != 0 || !metrics[m].ok {
                return;
            }
            state[m] = 1;
            for r in metrics[m].metric_refs() {
                visit(r, metrics, state, order);
            }
            state[m] = 2;
            order.push(m);
        }
        for m in 0..self.metrics.len() {
            visit(m, &self.metrics, &mut state, &mut order);
        }
        order
    }
}

/// Resolves every table of every architecture, and the common table last.
pub fn resolve_tree(tree: &Tree) -> Vec<ResolvedTable<'_>> {
    let aliases: Vec<HashSet<String>> =
        tree.arches.iter().map(|arch| arch_aliases(tree, &arch.std_files)).collect();
    let none = HashSet::new();
    let mut jobs: Vec<(&Table, &HashSet<String>)> = Vec::new();
    for (arch, aliases) in tree.arches.iter().zip(&aliases) {
        jobs.extend(arch.tables.iter().map(|table| (table, aliases)));
    }
    jobs.push((&tree.common, &none));
    crate::par::par_map(&jobs, |(table, aliases)| resolve_with(table, aliases))
}

/// The event names of an architecture's standard files (`arm64/common-and-microarch.json`).
fn arch_aliases(tree: &Tree, std_files: &[String]) -> HashSet<String> {
    let mut names = HashSet::new();
    for file in std_files {
        let Ok(text) = std::fs::read_to_string(tree.root.join(file)) else { continue };
        let Ok(serde_json::Value::Array(objects)) = serde_json::from_str(&text) else { continue };
        for object in objects {
            if let Some(serde_json::Value::String(name)) = object.get("EventName") {
                names.insert(name.to_ascii_lowercase());
            }
        }
    }
    names
}

/// Parses and resolves every metric of `table`, with no architecture aliases.
pub fn resolve(table: &Table) -> ResolvedTable<'_> {
    resolve_with(table, &HashSet::new())
}

/// Parses and resolves every metric of `table`; `core_aliases` are lower-cased event names
/// the core PMU exposes in sysfs on this architecture.
pub fn resolve_with<'t>(table: &'t Table, core_aliases: &HashSet<String>) -> ResolvedTable<'t> {
    let lookup = Lookup::new(table, core_aliases);
    let mut ids: Vec<IdSlot> = Vec::new();
    let mut id_index: HashMap<String, usize> = HashMap::new();
    let mut metrics = Vec::with_capacity(table.metrics.len());
    let mut diagnostics = Vec::new();

    for metric in &table.metrics {
        let mut resolved = ResolvedMetric {
            expr: None,
            threshold: None,
            targets: BTreeMap::new(),
            ok: true,
            threshold_ok: true,
        };
        let texts = [
            ("MetricExpr", Some(metric.expr.as_str())),
            ("MetricThreshold", metric.threshold.as_deref()),
        ];
        for (field, text) in texts {
            let Some(text) = text else { continue };
            let diag = |kind, message: String, caret: Option<String>| Diagnostic {
                table: table.path.clone(),
                metric: metric.name.clone(),
                file: location_file(metric, field),
                line: location_line(metric, field),
                field,
                kind,
                message,
                caret,
            };
            let mut field_ok = true;
            let expr = match parse(text) {
                Ok(expr) => Some(expr),
                Err(err) => {
                    diagnostics.push(diag(
                        DiagnosticKind::Parse,
                        parse_message(&err),
                        Some(err.caret()),
                    ));
                    field_ok = false;
                    None
                }
            };
            let Some(expr) = expr else {
                mark(&mut resolved, field, field_ok);
                continue;
            };
            for name in expr.literals() {
                if tmetric_expr::Literal::from_name(name).is_none() {
                    let span = literal_span(&expr, name);
                    diagnostics.push(diag(
                        DiagnosticKind::UnknownIdentifier,
                        format!("`#{name}` is not a literal perf knows"),
                        Some(caret_lines(text, span)),
                    ));
                    field_ok = false;
                }
            }
            for (ident, probe) in identifiers(&expr) {
                if resolved.targets.contains_key(&ident.name) {
                    continue;
                }
                let key = (metric.pmu.as_str(), ident.name.to_ascii_lowercase());
                if let Some(&m) = lookup.metrics.get(&key)
                    && !probe
                {
                    resolved.targets.insert(ident.name.clone(), Target::Metric(m));
                    continue;
                }
                let slot = match classify(&ident.name, &lookup, &metric.pmu) {
                    Ok(slot) => slot,
                    Err(_) if probe => IdSlot {
                        text: ident.name.clone(),
                        kind: SlotKind::Probe,
                        pmu: String::new(),
                        event: ident.name.clone(),
                        terms: String::new(),
                        modifiers: String::new(),
                        retire_latency: false,
                    },
                    Err(message) => {
                        diagnostics.push(diag(
                            DiagnosticKind::UnknownIdentifier,
                            message,
                            Some(caret_lines(text, ident.span)),
                        ));
                        field_ok = false;
                        continue;
                    }
                };
                let index = *id_index.entry(slot.text.clone()).or_insert_with(|| {
                    ids.push(slot);
                    ids.len() - 1
                });
                resolved.targets.insert(ident.name.clone(), Target::Id(index));
            }
            mark(&mut resolved, field, field_ok);
            if field_ok {
                match field {
                    "MetricExpr" => resolved.expr = Some(expr),
                    _ => resolved.threshold = Some(expr),
                }
            }
        }
        metrics.push(resolved);
    }

    check_references(table, &mut metrics, &mut diagnostics);
    ResolvedTable { table, ids, metrics, diagnostics }
}
