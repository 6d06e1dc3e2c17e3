//! perf's built-in metrics (`insn per cycle`, `GHz`, the miss ratios, TopDown from
//! `topdown-*` rows) over a log's blocks, computed by [`tmetric_engine::builtin`] from the rows of the
//! log and checked against what perf printed next to the same row.
//!
//! Rules (docs/from-perf.md): each built-in is shown on every row of its carrier event (the
//! event perf prints it on), reading the other inputs with the carrier's PMU and modifiers,
//! from the carrier's group when they are in it (perf 6.12 looks only there when the carrier
//! is in a group), else from the first such row. perf's printed text is matched exactly,
//! after the value (`45.0% Retiring`, `2.50% of all branches`).

use tmetric_perfstat::{
    Block, LogRow, PerfLog, PrintedCount, PrintedMetric, printed_decimals, printed_value,
};

use super::{count_precision, is_core_pmu};
use tmetric_engine::builtin::{BUILTINS, Builtin, NSECS, NoValue};

/// The `-M` item that selects every built-in.
const ALL: &str = "builtin";

/// The built-ins to show.
#[derive(Debug, Default)]
pub struct Builtins {
    /// In `-M` order, or the catalogue's.
    pub selected: Vec<&'static Builtin>,
    /// Chosen without `-M`: narrowed to the log by [`Builtins::for_log`].
    by_default: bool,
}

/// Splits `-M` items into built-in names (or `builtin`, or `all`) and the rest. Without
/// items every built-in is shown where the log has its carrier event.
pub fn select<'a>(items: &[&'a str]) -> (Builtins, Vec<&'a str>) {
    if items.is_empty() {
        return (Builtins { selected: BUILTINS.iter().collect(), by_default: true }, Vec::new());
    }
    let mut selected: Vec<&'static Builtin> = Vec::new();
    let mut rest = Vec::new();
    for &item in items {
        if item.eq_ignore_ascii_case(ALL) || item.eq_ignore_ascii_case("all") {
            selected = BUILTINS.iter().collect();
            if item.eq_ignore_ascii_case("all") {
                rest.push(item);
            }
        } else if let Some(b) = Builtin::named(item) {
            if !selected.contains(&b) {
                selected.push(b);
            }
        } else {
            rest.push(item);
        }
    }
    (Builtins { selected, by_default: false }, rest)
}

/// One built-in on one carrier row.
#[derive(Debug, Clone)]
pub struct BuiltinOutcome {
    /// Which built-in.
    pub builtin: &'static Builtin,
    /// perf's label for this log (the `--topdown` series' backend line depends on recovery bubbles).
    pub label: &'static str,
    /// The line of the row it is shown on.
    pub carrier_line: usize,
    /// The value, or why there is none.
    pub value: Result<f64, NoValue>,
    /// (text, value) perf printed next to the carrier under this label.
    pub printed: Option<(String, Option<f64>)>,
    /// Whether the value agrees with perf's at its printed precision.
    pub agrees: Option<bool>,
    /// The carrier row's PMU (empty: the core PMU).
    pub pmu: String,
    /// The lowest multiplexing percentage of the rows read, when below 100.
    pub running_pct: Option<f64>,
}

impl Builtins {
    /// Without `-M`, in a log where perf printed JSON metrics (`json_printed`), only the
    /// built-ins perf printed too: the others would repeat those metrics under other names
    /// (perf 6.12's `tma_retiring` from the same `topdown-*` rows). A log without JSON metrics
    /// gets every built-in its rows allow.
    pub fn for_log(mut self, log: &PerfLog, json_printed: bool) -> Builtins {
        if self.by_default && json_printed {
            self.selected.retain(|b| {
                log.blocks.iter().flat_map(|block| &block.rows).any(|row| {
                    canonical(&row.key.name).eq_ignore_ascii_case(b.carrier)
                        && [b.label, b.label_for(false)]
                            .iter()
                            .any(|label| row.metrics.iter().any(|m| printed_as(m, label).is_some()))
                })
            });
        }
        self
    }

    /// The built-ins of `block`, in row order.
    pub fn evaluate(&self, block: &Block) -> Vec<BuiltinOutcome> {
        let mut out = Vec::new();
        if self.selected.is_empty() {
            return out;
        }
        let has_recovery =
            block.rows.iter().any(|r| canonical(&r.key.name) == "topdown-recovery-bubbles");
        for row in &block.rows {
            let name = canonical(&row.key.name);
            for &b in self.selected.iter().filter(|b| b.carrier.eq_ignore_ascii_case(name)) {
                if matches!(row.value, PrintedCount::NotSupported) {
                    continue;
                }
                let label = b.label_for(has_recovery);
                let mut lines = vec![row.line];
                let mut running_pct = row.running_pct;
                let value = b.compute(&mut |input| {
                    let found = if input.eq_ignore_ascii_case(b.carrier) {
                        Some(row)
                    } else {
                        input_row(block, row, input)
                    }?;
                    if found.line != row.line {
                        lines.push(found.line);
                    }
                    if let Some(p) = found.running_pct {
                        running_pct = Some(running_pct.map_or(p, |m: f64| m.min(p)));
                    }
                    row_value(found)
                });
                if value == Err(NoValue::NotShown) {
                    continue;
                }
                let printed = row.metrics.iter().find_map(|m| printed_as(m, label));
                let agrees = match (&value, &printed) {
                    (Ok(ours), Some((text, Some(theirs)))) => {
                        Some(agrees(block, *ours, text, *theirs, &lines))
                    }
                    _ => None,
                };
                out.push(BuiltinOutcome {
                    builtin: b,
                    label,
                    carrier_line: row.line,
                    value,
                    printed,
                    agrees,
                    pmu: row.key.pmu.clone().unwrap_or_default(),
                    running_pct: running_pct.filter(|p| *p < 100.0),
                });
            }
        }
        out
    }
}

/// Whether `m` is a built-in perf printed on its carrier `row` (`Retiring` on
/// `topdown-retiring`), not a JSON metric that happens to share the name.
pub fn is_builtin_label(row: &LogRow, m: &PrintedMetric) -> bool {
    let name = canonical(&row.key.name);
    BUILTINS
        .iter()
        .filter(|b| b.carrier.eq_ignore_ascii_case(name))
        .any(|b| [b.label, b.label_for(false)].iter().any(|label| printed_as(m, label).is_some()))
}

/// perf's aliases, to the name the built-ins use. Logs' keys are lower case
/// (`l1-dcache-loads`), so callers compare with the table's names ignoring case.
fn canonical(name: &str) -> &str {
    match name {
        "cpu-cycles" => "cycles",
        "branch-instructions" => "branches",
        "idle-cycles-frontend" => "stalled-cycles-frontend",
        "idle-cycles-backend" => "stalled-cycles-backend",
        other => other,
    }
}

/// The row of `input` for the built-in on `carrier`: same modifiers, a compatible PMU (clocks:
/// any), in the carrier's group when there is one there, else the first.
fn input_row<'a>(block: &'a Block, carrier: &LogRow, input: &str) -> Option<&'a LogRow> {
    let names: &[&str] = if input == NSECS { &["task-clock", "cpu-clock"] } else { &[input] };
    let fits = |r: &&LogRow| {
        names.iter().any(|n| n.eq_ignore_ascii_case(canonical(&r.key.name)))
            && r.key.modifiers == carrier.key.modifiers
            && !r.key.retire_latency
            && (input == NSECS || same_pmu(r.key.pmu.as_deref(), carrier.key.pmu.as_deref()))
    };
    let mut rows = block.rows.iter().filter(fits);
    let first = rows.next()?;
    Some(std::iter::once(first).chain(rows).find(|r| r.group == carrier.group).unwrap_or(first))
}

/// A row without a PMU is on the core PMU; two core PMUs of a hybrid CPU differ.
fn same_pmu(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        (None, None) => true,
        (Some(p), None) | (None, Some(p)) => is_core_pmu(p),
    }
}

/// The count perf's shadow code reads: clocks in ns (`msec` rows back to ns), `<not
/// counted>` as 0; rows in other units are not used.
fn row_value(row: &LogRow) -> Option<f64> {
    match row.value {
        PrintedCount::Value(v) => match row.unit.as_str() {
            "" | "ns" => Some(v),
            "msec" => Some(v * 1e6),
            _ => None,
        },
        PrintedCount::NotCounted => Some(0.0),
        PrintedCount::NotSupported => None,
    }
}

/// (text, value) when `m` is perf's `label`. The text reader keeps a value with its `%`
/// (`45.0% Retiring`, perf's `%8.1f%%`) in the label; perf 6.1's cache line prints `% of all
/// cache refs`.
pub fn printed_as(m: &PrintedMetric, label: &str) -> Option<(String, Option<f64>)> {
    let name = m.name.trim();
    if m.value.is_some() {
        let rest = name.strip_prefix('%').map_or(name, str::trim_start);
        return (rest == label).then(|| (m.text.clone(), m.value));
    }
    let text = m.text.trim();
    if let Some(number) = text.strip_suffix('%') {
        // CSV: the value field holds `45.0%`.
        return (name == label).then(|| (number.to_string(), printed_value(number)));
    }
    let (first, rest) = name.split_once(' ')?;
    let number = first.strip_suffix('%').unwrap_or(first);
    // `45.0%` or, under a decimal-comma locale, `45,0%`.
    let value = printed_value(number)?;
    (rest.trim() == label).then(|| (number.to_string(), Some(value)))
}

/// Within half a unit of perf's last printed digit, widened by how precisely perf printed the
/// counts read (as for the JSON metrics).
fn agrees(block: &Block, ours: f64, text: &str, theirs: f64, lines: &[usize]) -> bool {
    if ours.is_nan() || theirs.is_nan() {
        return ours.is_nan() && theirs.is_nan();
    }
    let decimals = printed_decimals(text);
    let half_ulp = 0.5 * 10f64.powi(-(decimals as i32));
    let relative: f64 = lines
        .iter()
        .filter_map(|l| block.rows.iter().find(|r| r.line == *l))
        .map(count_precision)
        .sum();
    (ours - theirs).abs() <= half_ulp * (1.0 + 1e-9) + ours.abs() * relative
}
