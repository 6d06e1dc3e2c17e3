//! Finds the value a metric expression identifier stands for in one block, the way perf's
//! metric code would see it.
//!
//! Matching (after [`EventKey`] canonicalisation):
//! * names and the retire-latency flag must be equal;
//! * modifiers must be equal, except that an id without modifiers also takes a row with `u`
//!   (perf prints `cycles:u` when `perf_event_paranoid` made it exclude the kernel), at a lower
//!   rank;
//! * an id with a PMU takes rows on that PMU, on `uncore_<pmu>`, or on its numbered instances
//!   (`uncore_imc_0`, `uncore_imc_1`: summed, as perf merges them); an id on a core PMU also
//!   takes a row printed without a PMU, at a lower rank;
//! * an id without a PMU takes rows without one first, then rows on a core PMU, then rows on
//!   other PMUs. Given a core PMU (`lookup_on_pmu(.., Some("cpu_core"))`), rows on the other
//!   core PMUs are ignored; without one, matches on several core PMUs are
//!   [`Lookup::Ambiguous`] rather than a guess.
//!
//! Groups: rows in the group where `metric` was printed win; otherwise the best-ranked,
//! earliest row wins, and [`Found::in_metric_group`] says so.

use crate::key::{EventKey, is_core_pmu};
use crate::log::{Block, LogRow, PrintedCount, TimeSource, Timed};

/// The result of looking up an expression identifier in a block.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// A value.
    Found(Found),
    /// The row says `<not counted>`; perf's metrics use 0.
    NotCounted {
        /// 1-based line of the row.
        line: usize,
        /// Heuristic group of the row.
        group: usize,
        /// The event as printed.
        event: String,
    },
    /// The row says `<not supported>`; perf's metrics use NaN.
    NotSupported {
        /// 1-based line of the row.
        line: usize,
        /// Heuristic group of the row.
        group: usize,
        /// The event as printed.
        event: String,
    },
    /// Several rows on different core PMUs match an id without a PMU (a hybrid log): ask again
    /// with [`Block::lookup_on_pmu`].
    Ambiguous {
        /// 1-based lines of the candidate rows.
        lines: Vec<usize>,
        /// Their events as printed.
        events: Vec<String>,
    },
    /// No row matches. For a retire latency (`X:R`) this means perf ran without
    /// `--record-tpebs` or before TPEBS existed; perf 6.12 then uses 0, and the caller decides.
    Missing,
}

/// A value found for an identifier.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// What perf's metric code sees: the raw count (perf's `msec` scaling of `task-clock` and
    /// `cpu-clock` undone, so nanoseconds), a retire latency in cycles, or seconds for
    /// `duration_time`, `user_time` and `system_time`.
    pub value: f64,
    /// The rows used: one, or several uncore instances that were summed. For times, the line
    /// of the row or footer they came from (empty for an interval length).
    pub lines: Vec<usize>,
    /// The heuristic group of the rows used; `None` for times.
    pub group: Option<usize>,
    /// The event(s) as printed, or where a time came from.
    pub event: String,
    /// Whether the rows are in the group where the requested metric was printed.
    pub in_metric_group: bool,
    /// The row's run share (`(50.00%)`), if printed.
    pub running_pct: Option<f64>,
    /// The unit when perf printed the count scaled by a unit this crate cannot undo (`MiB`,
    /// `Joules`, `Bytes`): `value` is then as printed, and the caller must divide it by the
    /// event's scale (its ScaleUnit) to get the raw count perf's metrics use.
    pub unscaled_unit: Option<String>,
    /// For times: where the value came from.
    pub time: Option<TimeSource>,
}

impl Lookup {
    /// The value perf's metric code would use: the found value, 0 for `<not counted>`, NaN for
    /// `<not supported>`, `None` when missing or ambiguous.
    pub fn perf_value(&self) -> Option<f64> {
        match self {
            Lookup::Found(found) => Some(found.value),
            Lookup::NotCounted { .. } => Some(0.0),
            Lookup::NotSupported { .. } => Some(f64::NAN),
            Lookup::Ambiguous { .. } | Lookup::Missing => None,
        }
    }
}

type Rank = (u8, u8);

impl Block {
    /// The value for expression identifier `expr_id` (`cpu_core@TOPDOWN.SLOTS@`, `TSC`,
    /// `MEM_LOAD_RETIRED.L3_HIT:R`, `duration_time`), preferring the group in which `metric`
    /// was printed.
    pub fn lookup(&self, expr_id: &str, metric: Option<&str>) -> Lookup {
        self.lookup_key(&EventKey::from_expr_id(expr_id), metric, None)
    }

    /// Like [`Block::lookup`], for a metric of core PMU `pmu` (`cpu_core` or `cpu_atom` on
    /// hybrid): rows on other core PMUs are ignored.
    pub fn lookup_on_pmu(&self, expr_id: &str, metric: Option<&str>, pmu: Option<&str>) -> Lookup {
        self.lookup_key(&EventKey::from_expr_id(expr_id), metric, pmu)
    }

    /// Like [`Block::lookup_on_pmu`] with an already built key.
    pub fn lookup_key(&self, want: &EventKey, metric: Option<&str>, pmu: Option<&str>) -> Lookup {
        let preferred = metric.and_then(|m| self.printed_group(m, pmu));
        self.lookup_key_preferring(want, preferred, pmu)
    }

    /// The group metric `metric` of core PMU `pmu` was printed in, which its inputs prefer.
    pub fn printed_group(&self, metric: &str, pmu: Option<&str>) -> Option<usize> {
        self.printed_metric(metric, pmu).map(|(row, _)| row.group)
    }

    /// Like [`Block::lookup_key`], preferring group `preferred` ([`Block::printed_group`],
    /// found once for all of a metric's inputs).
    pub fn lookup_key_preferring(
        &self,
        want: &EventKey,
        preferred: Option<usize>,
        pmu: Option<&str>,
    ) -> Lookup {
        if want.is_tool() && want.modifiers.is_empty() && !want.retire_latency {
            let time = match want.name.as_str() {
                "duration_time" => self.duration,
                "user_time" => self.user_time,
                _ => self.system_time,
            };
            return time.map_or(Lookup::Missing, |t| found_time(&want.name, t));
        }

        // Lookups run for every input of every metric in every block: no allocation unless
        // the answer needs one.
        let lower;
        let pmu = match pmu {
            Some(p) if p.bytes().any(|b| b.is_ascii_uppercase()) => {
                lower = p.to_ascii_lowercase();
                Some(lower.as_str())
            }
            other => other,
        };
        // Ranked once (the `Vec` allocates only when some row matches), then walked without
        // allocating.
        let matches: Vec<(Rank, &LogRow)> = self
            .rows
            .iter()
            .filter_map(|row| rank(want, &row.key, pmu).map(|r| (r, row)))
            .collect();
        let candidates = || matches.iter().copied();
        let Some(best) = candidates().map(|(r, _)| r).min() else { return Lookup::Missing };

        // Without a PMU to choose, the same event on several core PMUs has no single answer.
        if pmu.is_none() {
            let mut core_pmus = candidates()
                .filter(|(r, _)| *r == best)
                .filter_map(|(_, row)| row.key.pmu.as_deref())
                .filter(|p| is_core_pmu(p));
            if let Some(one) = core_pmus.next()
                && core_pmus.any(|p| p != one)
            {
                let best_rows: Vec<&LogRow> =
                    candidates().filter(|(r, _)| *r == best).map(|(_, row)| row).collect();
                return Lookup::Ambiguous {
                    lines: best_rows.iter().map(|r| r.line).collect(),
                    events: best_rows.iter().map(|r| r.event.clone()).collect(),
                };
            }
        }

        let in_preferred =
            candidates().filter(|(_, row)| Some(row.group) == preferred).map(|(r, _)| r).min();
        let (group, group_best) = match in_preferred {
            Some(r) => (preferred.unwrap_or(0), r),
            None => {
                let first = candidates().find(|(r, _)| *r == best).map(|(_, row)| row);
                (first.map_or(0, |row| row.group), best)
            }
        };
        let mut chosen = candidates()
            .filter(|(r, row)| row.group == group && *r == group_best)
            .map(|(_, row)| row);
        let in_metric_group = preferred == Some(group);
        let Some(one) = chosen.next() else { return Lookup::Missing };
        let Some(two) = chosen.next() else { return from_row(one, in_metric_group) };
        let rows: Vec<&LogRow> = [one, two].into_iter().chain(chosen).collect();
        if is_instance_set(&rows) {
            sum_rows(&rows, group, in_metric_group)
        } else {
            Lookup::Ambiguous {
                lines: rows.iter().map(|r| r.line).collect(),
                events: rows.iter().map(|r| r.event.clone()).collect(),
            }
        }
    }
}

fn found_time(name: &str, t: Timed) -> Lookup {
    let (lines, event) = match t.source {
        TimeSource::Row { line } => (vec![line], format!("{name} row")),
        TimeSource::ElapsedLine { line } => (vec![line], "seconds time elapsed".to_string()),
        TimeSource::UserLine { line } => (vec![line], "seconds user".to_string()),
        TimeSource::SysLine { line } => (vec![line], "seconds sys".to_string()),
        TimeSource::IntervalLength => (Vec::new(), "interval length".to_string()),
    };
    Lookup::Found(Found {
        value: t.seconds,
        lines,
        group: None,
        event,
        in_metric_group: false,
        running_pct: None,
        unscaled_unit: None,
        time: Some(t.source),
    })
}

/// `(pmu rank, modifier rank)`, lower is better; `None` when the row is not the event.
fn rank(want: &EventKey, row: &EventKey, core_pmu: Option<&str>) -> Option<Rank> {
    if want.retire_latency != row.retire_latency || !same_name(&want.name, &row.name) {
        return None;
    }
    let modifier_rank = if same_name(&want.modifiers, &row.modifiers) {
        0
    } else if want.modifiers.is_empty() && row.modifiers == "u" {
        1
    } else {
        return None;
    };
    let want_core = want.pmu.as_deref().is_some_and(is_core_pmu);
    if let (Some(only), Some(p)) = (core_pmu, row.pmu.as_deref())
        && !want_core
        && is_core_pmu(p)
        && p != only
    {
        return None;
    }
    let pmu_rank = match (want.pmu.as_deref(), row.pmu.as_deref()) {
        (None, None) => 0,
        (None, Some(p)) if is_core_pmu(p) => 1,
        (None, Some(_)) => 2,
        (Some(_), None) if want_core => 1,
        (Some(_), None) => return None,
        (Some(w), Some(p)) => {
            let base = instance_base(p);
            let prefixed = |name: &str| name.strip_prefix("uncore_") == Some(w);
            if w == p || prefixed(p) || base == w || prefixed(base) {
                0
            } else {
                return None;
            }
        }
    };
    Some((pmu_rank, modifier_rank))
}

/// `a == b` eight bytes at a time, without calling `memcmp`: every input of every metric is
/// compared with every row of every block, and a library call per comparison (most of them of
/// equal or empty strings) was a fifth of `eval --from-perf`'s time.
#[inline]
pub fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("chunks of eight"));
    let (mut x, mut y) = (a.chunks_exact(8), b.chunks_exact(8));
    if (&mut x).zip(&mut y).any(|(p, q)| word(p) != word(q)) {
        return false;
    }
    x.remainder().iter().zip(y.remainder()).all(|(p, q)| p == q)
}

/// `uncore_imc_0` → `uncore_imc`; other names unchanged.
fn instance_base(pmu: &str) -> &str {
    match pmu.rsplit_once('_') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => pmu,
    }
}

/// Rows of numbered instances of one non-core PMU, which perf would have merged.
fn is_instance_set(rows: &[&LogRow]) -> bool {
    let pmus: Vec<&str> = rows.iter().filter_map(|r| r.key.pmu.as_deref()).collect();
    if pmus.len() != rows.len() || pmus.iter().any(|p| is_core_pmu(p)) {
        return false;
    }
    let base = instance_base(pmus[0]);
    let mut sorted = pmus.clone();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.len() == pmus.len() && pmus.iter().all(|p| instance_base(p) == base && *p != base)
}

/// The value perf's metric code sees for a row's printed count, and the unit when unknown.
fn raw_value(row: &LogRow, printed: f64) -> (f64, Option<String>) {
    match row.unit.as_str() {
        "" | "ns" => (printed, None),
        // task-clock and cpu-clock count ns and perf prints them with scale 1e-6 as msec.
        "msec" => (printed * 1e6, None),
        other => (printed, Some(other.to_string())),
    }
}

fn from_row(row: &LogRow, in_metric_group: bool) -> Lookup {
    match row.value {
        PrintedCount::NotCounted => {
            Lookup::NotCounted { line: row.line, group: row.group, event: row.event.clone() }
        }
        PrintedCount::NotSupported => {
            Lookup::NotSupported { line: row.line, group: row.group, event: row.event.clone() }
        }
        PrintedCount::Value(v) => {
            let (value, unscaled_unit) = raw_value(row, v);
            Lookup::Found(Found {
                value,
                lines: vec![row.line],
                group: Some(row.group),
                event: row.event.clone(),
                in_metric_group,
                running_pct: row.running_pct,
                unscaled_unit,
                time: None,
            })
        }
    }
}

fn sum_rows(rows: &[&LogRow], group: usize, in_metric_group: bool) -> Lookup {
    if let Some(row) = rows.iter().find(|r| r.value == PrintedCount::NotSupported) {
        return from_row(row, in_metric_group);
    }
    let counted: Vec<&&LogRow> =
        rows.iter().filter(|r| matches!(r.value, PrintedCount::Value(_))).collect();
    if counted.is_empty() {
        return from_row(rows[0], in_metric_group);
    }
    let mut value = 0.0;
    let mut unscaled_unit = None;
    for row in &counted {
        if let PrintedCount::Value(v) = row.value {
            let (raw, unit) = raw_value(row, v);
            value += raw;
            unscaled_unit = unscaled_unit.or(unit);
        }
    }
    Lookup::Found(Found {
        value,
        lines: rows.iter().map(|r| r.line).collect(),
        group: Some(group),
        event: rows.iter().map(|r| r.event.as_str()).collect::<Vec<_>>().join(" + "),
        in_metric_group,
        running_pct: None,
        unscaled_unit,
        time: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_as_strings_do() {
        let names = [
            "",
            "u",
            "ku",
            "cycles",
            "cpu_clk_unhalted.thread",
            "cpu_clk_unhalted.thread_p",
            "cpu_clk_unhalted.ref_tsc",
            "exe_activity.1_ports_util",
            "exe_activity.2_ports_util",
            "inst_retired.any",
            "inst_retired.anz",
            "xnst_retired.any",
        ];
        for a in names {
            for b in names {
                assert_eq!(same_name(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }
}
