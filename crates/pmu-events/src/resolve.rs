//! Resolution: what each identifier of each metric names, per model (perf's `expr__get_id` in tools/perf/util/expr.c and metric references in util/metricgroup.c).
//!
//! An identifier is, in this order: a metric of the same PMU (case-insensitive), a JSON
//! event of the model (case-insensitive, optionally `PMU@EVENT,terms@mods` or
//! `EVENT:mods`), an event of a PMU the kernel exposes in sysfs (`msr@tsc@`,
//! `cstate_pkg@c6-residency@`), a kernel-named event (`cycles`, `topdown-retiring`), or a
//! tool event (`duration_time`). Anything else is a compile error, never a silent NaN.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use tmetric_expr::{Expr, ExprKind, IdFunc, ParseError, caret_lines, parse};
use tmetric_model::catalog::Tool;

use crate::{Metric, Table, Tree};

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

/// Kernel event names perf knows without JSON (generic hardware and software events, the
/// x86 `cpu/events/` aliases and common cache events). Compared case-insensitively.
const KERNEL_EVENTS: &[&str] = &[
    "cycles",
    "cpu-cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-instructions",
    "branch-misses",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "idle-cycles-frontend",
    "idle-cycles-backend",
    "ref-cycles",
    "cpu-clock",
    "task-clock",
    "page-faults",
    "faults",
    "minor-faults",
    "major-faults",
    "context-switches",
    "cs",
    "cpu-migrations",
    "migrations",
    "alignment-faults",
    "emulation-faults",
    "dummy",
    "bpf-output",
    "cgroup-switches",
    "slots",
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
    "topdown-heavy-ops",
    "topdown-br-mispredict",
    "topdown-fetch-lat",
    "topdown-mem-bound",
    "cycles-t",
    "cycles-ct",
    "tx-start",
    "tx-commit",
    "tx-abort",
    "tx-capacity",
    "tx-conflict",
    "el-start",
    "el-commit",
    "el-abort",
    "el-capacity",
    "el-conflict",
    "mem-loads",
    "mem-stores",
    "mem-loads-aux",
    "l1-dcache-loads",
    "l1-dcache-load-misses",
    "l1-dcache-stores",
    "l1-icache-load-misses",
    "llc-loads",
    "llc-load-misses",
    "llc-stores",
    "llc-store-misses",
    "dtlb-loads",
    "dtlb-load-misses",
    "itlb-loads",
    "itlb-load-misses",
    "branch-loads",
    "branch-load-misses",
    // armv8 PMU sysfs aliases missing from arm64's standard JSON (hip08 uses them).
    "l2i_cache",
    "l2i_cache_refill",
];

/// PMU names that exist in sysfs on real machines but have no JSON table PMU, or whose
/// instances are named directly (`uncore_cha_0`).
fn is_sysfs_pmu(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "msr",
        "power",
        "cstate_core",
        "cstate_pkg",
        "cstate_module",
        "cpu",
        "cpu_core",
        "cpu_atom",
        "breakpoint",
        "software",
        "tracepoint",
        "kprobe",
        "uprobe",
        "intel_pt",
        "intel_bts",
        "hv_24x7",
        "hv_gpci",
        "cpum_cf",
        "cpum_sf",
        "pai_crypto",
        "pai_ext",
        "amd_iommu",
        "ibs_op",
        "ibs_fetch",
        "amd_df",
        "amd_l3",
        "amd_umc",
        "armv8_pmuv3",
    ];
    let lower = name.to_ascii_lowercase();
    NAMES.contains(&lower.as_str())
        || lower.starts_with("uncore_")
        || lower.starts_with("cstate_")
        || lower.starts_with("armv8_")
        || lower.starts_with("imx")
        || lower.starts_with("hisi_")
        || lower.starts_with("arm_")
        || lower.starts_with("amd_")
        || lower.starts_with("cbox_")
        || lower.starts_with("cha_")
        || lower.starts_with("dmc")
        || lower.starts_with("nest_")
}

fn is_core_pmu(pmu: &str) -> bool {
    matches!(pmu, "default_core" | "cpu" | "cpu_core" | "cpu_atom")
}

fn tool_event(name: &str) -> Option<Tool> {
    match name {
        "duration_time" => Some(Tool::DurationTime),
        "user_time" => Some(Tool::UserTime),
        "system_time" => Some(Tool::SystemTime),
        _ => None,
    }
}

struct Lookup<'t, 'a> {
    table: &'t Table,
    /// Lower-cased architecture-standard event names the kernel's core PMU driver exposes in
    /// sysfs (arm64 `armv8_pmuv3*/events/cpu_cycles`, ...), so perf resolves them without JSON.
    core_aliases: &'a HashSet<String>,
    /// Lower-cased event name to indices, in table order.
    events: HashMap<String, Vec<usize>>,
    /// (metric PMU, lower-cased name) to the first metric of that name.
    metrics: HashMap<(&'t str, String), usize>,
    /// Lower-cased PMU names of the table's events.
    pmus: Vec<String>,
}

impl<'t, 'a> Lookup<'t, 'a> {
    fn new(table: &'t Table, core_aliases: &'a HashSet<String>) -> Lookup<'t, 'a> {
        let mut events: HashMap<String, Vec<usize>> = HashMap::new();
        let mut pmus: Vec<String> = Vec::new();
        for (i, event) in table.events.iter().enumerate() {
            events.entry(event.name.to_ascii_lowercase()).or_default().push(i);
            let pmu = event.pmu.to_ascii_lowercase();
            if !pmus.contains(&pmu) {
                pmus.push(pmu);
            }
        }
        let mut metrics = HashMap::new();
        for (i, metric) in table.metrics.iter().enumerate() {
            metrics.entry((metric.pmu.as_str(), metric.name.to_ascii_lowercase())).or_insert(i);
        }
        Lookup { table, core_aliases, events, metrics, pmus }
    }

    /// A JSON event by name, preferring `pmu` (or the core PMU for a core metric).
    fn event(&self, name: &str, pmu: Option<&str>, metric_pmu: &str) -> Option<usize> {
        let candidates = self.events.get(&name.to_ascii_lowercase())?;
        let event_pmu = |i: &usize| self.table.events[*i].pmu.as_str();
        let wanted = match pmu {
            // `cpu@X@` names the core PMU, which JSON calls `default_core` on non-hybrid.
            Some("cpu") => Some("default_core"),
            Some(p) => Some(p),
            None => None,
        };
        if let Some(wanted) = wanted {
            // A `uncore_cha_0@X@` style instance matches the table PMU `uncore_cha`.
            return candidates
                .iter()
                .copied()
                .find(|i| same_pmu(&wanted.to_ascii_lowercase(), event_pmu(i)));
        }
        candidates
            .iter()
            .copied()
            .find(|i| event_pmu(i) == metric_pmu)
            .or_else(|| candidates.iter().copied().find(|i| is_core_pmu(event_pmu(i))))
            .or_else(|| candidates.first().copied())
    }

    fn is_table_pmu(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.pmus.iter().any(|p| same_pmu(&lower, p))
    }
}

/// Whether a PMU named in an expression (lower case) is the table PMU `table_pmu`, as
/// perf's PMU name matching sees it: `cha`, `uncore_cha` and `uncore_cha_0` all name
/// `uncore_cha`, and `cbox_0` names an instance of `uncore_cbox`.
fn same_pmu(named: &str, table_pmu: &str) -> bool {
    let strip_instance = |name: &str| -> String {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
        base.strip_suffix('_').unwrap_or(name).to_string()
    };
    let table_pmu = table_pmu.to_ascii_lowercase();
    [named.to_string(), strip_instance(named)]
        .iter()
        .any(|candidate| *candidate == table_pmu || format!("uncore_{candidate}") == table_pmu)
}

/// Splits `pmu@terms@mods` (perf's `/` spelled `@`) into its three parts.
fn split_at_form(id: &str) -> Option<(&str, &str, &str)> {
    let first = id.find('@')?;
    let last = id.rfind('@')?;
    if first == last {
        return Some((&id[..first], &id[first + 1..], ""));
    }
    Some((&id[..first], &id[first + 1..last], &id[last + 1..]))
}

/// Resolves one identifier to an input slot description, or explains why it cannot.
fn classify(id: &str, lookup: &Lookup<'_, '_>, metric_pmu: &str) -> Result<IdSlot, String> {
    let slot = |kind, pmu: &str, event: &str, terms: &str, modifiers: &str| IdSlot {
        text: id.to_string(),
        kind,
        pmu: pmu.to_string(),
        event: event.to_string(),
        terms: terms.to_string(),
        modifiers: modifiers.to_string(),
        retire_latency: modifiers.contains('R'),
    };
    if let Some(tool) = tool_event(id) {
        return Ok(slot(SlotKind::Tool(tool), "", id, "", ""));
    }
    if let Some((head, middle, modifiers)) = split_at_form(id) {
        let (event_part, terms) = match middle.split_once(',') {
            Some((event, terms)) => (event, terms),
            None => (middle, ""),
        };
        let named_event = !event_part.contains('=');
        if lookup.is_table_pmu(head) || is_sysfs_pmu(head) {
            if named_event {
                if let Some(i) = lookup.event(event_part, Some(head), metric_pmu) {
                    return Ok(slot(SlotKind::Event(i), head, event_part, terms, modifiers));
                }
                if KERNEL_EVENTS.contains(&event_part.to_ascii_lowercase().as_str()) {
                    return Ok(slot(SlotKind::Kernel, head, event_part, terms, modifiers));
                }
                if is_core_pmu(head) {
                    return Err(format!(
                        "`{event_part}` is not an event of this model's `{head}` PMU"
                    ));
                }
                return Ok(slot(SlotKind::Sysfs, head, event_part, terms, modifiers));
            }
            return Ok(slot(SlotKind::Sysfs, head, "", middle, modifiers));
        }
        // `EVENT@terms@`: an event of any PMU, with extra terms.
        if let Some(i) = lookup.event(head, None, metric_pmu) {
            let pmu = lookup.table.events[i].pmu.clone();
            return Ok(slot(SlotKind::Event(i), &pmu, head, middle, modifiers));
        }
        return Err(format!("`{head}` is neither a PMU nor an event of this model"));
    }
    let (name, modifiers) = id.split_once(':').unwrap_or((id, ""));
    if let Some(i) = lookup.event(name, None, metric_pmu) {
        let pmu = lookup.table.events[i].pmu.clone();
        return Ok(slot(SlotKind::Event(i), &pmu, name, "", modifiers));
    }
    let lower = name.to_ascii_lowercase();
    if KERNEL_EVENTS.contains(&lower.as_str()) || lookup.core_aliases.contains(&lower) {
        return Ok(slot(SlotKind::Kernel, "", name, "", modifiers));
    }
    if name.eq_ignore_ascii_case("tsc") {
        // perf resolves the bare `TSC` event to `msr/tsc/`.
        return Ok(slot(SlotKind::Sysfs, "msr", "tsc", "", modifiers));
    }
    Err(format!("`{id}` is not a metric, an event of this model, a kernel event or a tool event"))
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

fn literal_span(expr: &Expr, name: &str) -> tmetric_expr::Span {
    let mut span = expr.span;
    expr.walk(&mut |node| {
        if matches!(&node.kind, ExprKind::Literal(n) if n == name) {
            span = node.span;
        }
    });
    span
}

fn mark(resolved: &mut ResolvedMetric, field: &str, field_ok: bool) {
    match field {
        "MetricExpr" => resolved.ok &= field_ok,
        _ => resolved.threshold_ok &= field_ok,
    }
}

/// Identifiers of an expression; `true` marks those only used as `has_event` or
/// `strcmp_cpuid_str` arguments, which may name things that do not exist.
fn identifiers(expr: &Expr) -> Vec<(&tmetric_expr::Ident, bool)> {
    let mut out: Vec<(&tmetric_expr::Ident, bool)> = Vec::new();
    expr.walk(&mut |node| match &node.kind {
        ExprKind::Id(id) | ExprKind::IdCall(IdFunc::SourceCount, id) => out.push((id, false)),
        ExprKind::IdCall(_, id) => out.push((id, true)),
        _ => {}
    });
    // An identifier used both ways is a real one.
    let real: Vec<String> =
        out.iter().filter(|(_, probe)| !probe).map(|(id, _)| id.name.clone()).collect();
    for entry in &mut out {
        if real.contains(&entry.0.name) {
            entry.1 = false;
        }
    }
    out
}

fn parse_message(err: &ParseError) -> String {
    format!("does not parse: {}", err.message())
}

fn location_file(metric: &Metric, field: &str) -> String {
    match field {
        "MetricThreshold" => {
            metric.threshold_at.as_ref().map_or(&metric.file, |at| &at.file).clone()
        }
        _ => metric.expr_at.file.clone(),
    }
}

fn location_line(metric: &Metric, field: &str) -> usize {
    match field {
        "MetricThreshold" => metric.threshold_at.as_ref().map_or(metric.line, |at| at.line),
        _ => metric.expr_at.line,
    }
}

/// A diagnostic about a whole expression of metric `m` (no single spot to point at).
fn whole_metric(
    table: &Table,
    m: usize,
    field: &'static str,
    kind: DiagnosticKind,
    message: String,
) -> Diagnostic {
    let metric = &table.metrics[m];
    Diagnostic {
        table: table.path.clone(),
        metric: metric.name.clone(),
        file: location_file(metric, field),
        line: location_line(metric, field),
        field,
        kind,
        message,
        caret: None,
    }
}

/// Marks reference cycles and metrics that reference a broken metric.
fn check_references(
    table: &Table,
    metrics: &mut [ResolvedMetric],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let refs: Vec<Vec<usize>> = metrics.iter().map(ResolvedMetric::metric_refs).collect();
    // Cycles: depth-first search keeping the chain of metric names. Iterative, with an
    // explicit stack: reference chains come from vendor data, whose length nothing bounds.
    let mut state = vec![0u8; metrics.len()];
    let mut in_cycle = vec![false; metrics.len()];
    fn dfs(
        root: usize,
        refs: &[Vec<usize>],
        state: &mut [u8],
        chain: &mut Vec<usize>,
        cycles: &mut Vec<Vec<usize>>,
    ) {
        // Per open node: the node and the next of its references to look at.
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        chain.push(root);
        while let Some((m, next)) = stack.last_mut() {
            let m = *m;
            let Some(&r) = refs[m].get(*next) else {
                chain.pop();
                state[m] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            if state[r] == 1 {
                let start = chain.iter().position(|&c| c == r).unwrap_or(0);
                let mut cycle = chain[start..].to_vec();
                cycle.push(r);
                cycles.push(cycle);
            } else if state[r] == 0 {
                state[r] = 1;
                chain.push(r);
                stack.push((r, 0));
            }
        }
    }
    let mut cycles = Vec::new();
    for m in 0..metrics.len() {
        if state[m] == 0 {
            dfs(m, &refs, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    for cycle in cycles {
        let names: Vec<&str> = cycle.iter().map(|&m| table.metrics[m].name.as_str()).collect();
        for &m in &cycle[..cycle.len() - 1] {
            if in_cycle[m] {
                continue;
            }
            in_cycle[m] = true;
            metrics[m].ok = false;
            diagnostics.push(whole_metric(
                table,
                m,
                "MetricExpr",
                DiagnosticKind::Cycle,
                format!("metric references form a cycle: {}", names.join(" -> ")),
            ));
        }
    }
    // Broken references, to a fixed point so chains propagate.
    loop {
        let mut changed = false;
        for m in 0..metrics.len() {
            if !metrics[m].ok {
                continue;
            }
            if let Some(&bad) = refs[m].iter().find(|&&r| !metrics[r].ok) {
                metrics[m].ok = false;
                changed = true;
                diagnostics.push(whole_metric(
                    table,
                    m,
                    "MetricExpr",
                    DiagnosticKind::BrokenReference,
                    format!(
                        "references metric `{}`, which does not compile",
                        table.metrics[bad].name
                    ),
                ));
            }
        }
        if !changed {
            break;
        }
    }
    // A threshold that reads a broken metric (other than its own) cannot be computed.
    for m in 0..metrics.len() {
        let bad = metrics[m].threshold_refs().into_iter().find(|&r| r != m && !metrics[r].ok);
        if let Some(bad) = bad
            && metrics[m].threshold_ok
            && metrics[m].threshold.is_some()
        {
            metrics[m].threshold_ok = false;
            metrics[m].threshold = None;
            diagnostics.push(whole_metric(
                table,
                m,
                "MetricThreshold",
                DiagnosticKind::BrokenReference,
                format!("references metric `{}`, which does not compile", table.metrics[bad].name),
            ));
        }
    }
}
