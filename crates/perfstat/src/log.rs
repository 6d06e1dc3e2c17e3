//! The imported log: runs, blocks (one per interval × aggregation id), rows and printed metrics.
//!
//! Plain data. Values are kept as perf printed them; `lookup` turns them into what perf's metric
//! code would see.

use crate::key::{EventKey, is_core_pmu};
use crate::mode::{Aggregation, Layout};
use std::collections::BTreeSet;

/// A whole imported `perf stat` log.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfLog {
    /// The layout that was read.
    pub layout: Layout,
    /// One entry per "Performance counter stats for ..." header; CSV and JSON logs, and text
    /// logs without a header (`-I`), have one run without a command.
    pub runs: Vec<Run>,
    /// Evaluation units in the order their first row was printed.
    pub blocks: Vec<Block>,
    /// Rows skipped as damaged (a negative count, a run share over 100%), text appended to a
    /// metric, a truncated last line, a mix of layouts: each with its line and reason.
    pub warnings: Vec<crate::Warning>,
    /// Warnings found and not kept in [`PerfLog::warnings`] (a hostile log can have millions).
    pub warnings_dropped: usize,
    /// The lines that are not perf's output (a workload's, a shell prompt), by where they lie.
    pub skipped: crate::Skipped,
    /// The number convention (perf's locale) the log's numbers showed.
    pub numbers: crate::Numbers,
}

/// One `perf stat` invocation inside a log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// Line of the "Performance counter stats for" header.
    pub header_line: Option<usize>,
    /// What was measured: `sleep 1`, `system wide`, `CPU(s) 1-4`, `process id '1'`.
    pub command: Option<String>,
    /// `N` from `(N runs)` with `-r N`.
    pub repeats: Option<u32>,
    /// From the "`S` seconds time elapsed" footer (the mean with `-r`).
    pub elapsed: Option<Timed>,
    /// From the "`S` seconds user" footer.
    pub user: Option<Timed>,
    /// From the "`S` seconds sys" footer.
    pub system: Option<Timed>,
}

/// A time in seconds and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    /// Seconds.
    pub seconds: f64,
    /// Where the value was read.
    pub source: TimeSource,
}

/// Where a time was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSource {
    /// A `duration_time`/`user_time`/`system_time` row (printed in ns) at this line.
    Row {
        /// 1-based line.
        line: usize,
    },
    /// The "seconds time elapsed" footer at this line.
    ElapsedLine {
        /// 1-based line.
        line: usize,
    },
    /// The "seconds user" footer at this line.
    UserLine {
        /// 1-based line.
        line: usize,
    },
    /// The "seconds sys" footer at this line.
    SysLine {
        /// 1-based line.
        line: usize,
    },
    /// The difference between this interval's timestamp and the previous one (`-I`).
    IntervalLength,
}

/// The aggregation id of a block.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Aggr {
    /// Which aggregation mode.
    pub kind: Aggregation,
    /// The id as perf prints it in the text layout (`CPU3`, `S0-D0-C1`, `S0`, `bash-1234`).
    pub id: String,
    /// How many CPUs were summed into the row (printed after the id by the per-X modes).
    pub cpus: Option<u32>,
}

/// One evaluation unit: the rows of one run, one interval timestamp and one aggregation id.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Index into [`PerfLog::runs`].
    pub run: usize,
    /// The `-I` timestamp in seconds.
    pub interval: Option<f64>,
    /// The aggregation id; `None` for perf's default global aggregation.
    pub aggr: Option<Aggr>,
    /// Counter rows in print order.
    pub rows: Vec<LogRow>,
    /// Metrics printed without a counter row: perf's `Default` metric-group lines such as
    /// `TopdownL1 (cpu_core)   #  38.9 %  tma_backend_bound`.
    pub loose_metrics: Vec<PrintedMetric>,
    /// What perf's metrics see as `duration_time`: a `duration_time` row of this block (or of
    /// another block of the same interval), else the interval length, else the elapsed footer.
    pub duration: Option<Timed>,
    /// What metrics see as `user_time`: a `user_time` row, else the "seconds user" footer.
    pub user_time: Option<Timed>,
    /// What metrics see as `system_time`: a `system_time` row, else the "seconds sys" footer.
    pub system_time: Option<Timed>,
}

/// A count as perf stat prints it: what a log row holds, what `tmetric stat` prints on a line
/// (`tmetric_engine::view::Line`), one type for the reader and the printers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PrintedCount {
    /// A number, already scaled by perf for multiplexing and for the event's unit (so
    /// `task-clock` is in msec here).
    Value(f64),
    /// `<not counted>`: the event was never scheduled (perf's metrics use 0).
    NotCounted,
    /// `<not supported>`: the event could not be opened (perf's metrics use NaN).
    NotSupported,
}

/// One counter row of a perf stat log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    /// 1-based line number.
    pub line: usize,
    /// The count as printed.
    pub value: PrintedCount,
    /// The count's text as printed (to know its precision).
    pub count_text: String,
    /// The unit column (`msec`, `ns`, `Joules`), empty when none.
    pub unit: String,
    /// The event name as printed.
    pub event: String,
    /// The canonical key of `event`.
    pub key: EventKey,
    /// The cgroup column (`-G`), CSV and JSON only.
    pub cgroup: Option<String>,
    /// The `(xx.xx%)` share of time the event was counting (CSV/JSON `pcnt-running`);
    /// `None` when the text layout printed none (100%).
    pub running_pct: Option<f64>,
    /// The `( +- x% )` variance with `-r`.
    pub variance_pct: Option<f64>,
    /// Heuristic group index inside the block (see the crate docs).
    pub group: usize,
    /// Metrics perf printed on this row and its continuation lines.
    pub metrics: Vec<PrintedMetric>,
    /// How many counters perf summed into the count (`perf_stat_aggr.nr`, perf 7.x's
    /// `aggr_nr()`), as the per-X modes print it after the id; `None` when not printed.
    pub counters: Option<u32>,
}

/// A metric value perf printed: `# 0.6 % tma_dtlb_store`, `# 0.010 CPUs utilized`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrintedMetric {
    /// 1-based line number.
    pub line: usize,
    /// The value; NaN for `nan`; `None` when perf left it blank.
    pub value: Option<f64>,
    /// The value's text as printed (to compare at perf's precision).
    pub text: String,
    /// The label split into the ScaleUnit part (`%`), empty for shadow metrics.
    pub unit: String,
    /// The metric name (`tma_dtlb_store`) or shadow label (`CPUs utilized`, `K/sec`).
    pub name: String,
    /// For a [`Block::loose_metrics`] entry: the metric-group header (`TopdownL1 (cpu_core)`).
    pub header: Option<String>,
    /// Text after the metric name that perf does not print (a note someone appended to the
    /// line); it is not part of the name.
    pub note: Option<String>,
}

impl PrintedMetric {
    /// Builds a metric from perf's label, which is `"<unit>  <name>"` (two spaces) for JSON
    /// metrics with a ScaleUnit and the bare name or a shadow label otherwise. When the two
    /// spaces were lost (mail, copy-paste) a last word that looks like a metric name
    /// (`% tma_dtlb_store`) is still split off.
    pub(crate) fn new(
        line: usize,
        text: &str,
        label: &str,
        header: Option<String>,
    ) -> PrintedMetric {
        let text = text.trim();
        let value = if text.is_empty() {
            None
        } else {
            crate::number::parse_metric_value(text).map(|(v, _)| v)
        };
        let (unit, name, note) = split_label(label);
        PrintedMetric { line, value, text: text.to_string(), unit, name, header, note }
    }

    /// Number of decimals perf printed (after `.` or, in some locales, `,`), to compare at its
    /// precision.
    pub fn decimals(&self) -> usize {
        crate::number::printed_decimals(&self.text)
    }
}

/// Splits perf's label into (unit, name, note). The name is what follows the unit and two
/// spaces; when more follows after another two spaces, or the spaces were lost, the first word
/// shaped like a metric name (`tma_dtlb_store`) is the name and what comes after it is a note
/// someone appended, which must not hide the metric.
fn split_label(label: &str) -> (String, String, Option<String>) {
    let label = label.trim();
    // Most labels are perf's own (`CPUs utilized`, `K/sec`): no metric name (`_`), words
    // apart by one space, so the words joined again are the label.
    if label.is_ascii()
        && !label.contains('_')
        && !label.contains("  ")
        && !label.bytes().any(|b| b.is_ascii_whitespace() && b != b' ')
    {
        return (String::new(), label.to_string(), None);
    }
    let is_id = |w: &str| {
        w.contains('_')
            && w.starts_with(|c: char| c.is_ascii_alphabetic())
            && w.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
    };
    if let Some(at) = label.find("  ") {
        let (unit, name) = (label[..at].trim(), label[at..].trim());
        // A unit is never shaped like a metric name: `tma_x  note` is a bare name and a note.
        if !name.is_empty() && !name.contains("  ") && (!is_id(unit) || is_id(name)) {
            return (unit.to_string(), name.to_string(), None);
        }
    }
    let words: Vec<&str> = label.split_whitespace().collect();
    if let Some(at) = words.iter().position(|w| is_id(w)) {
        let rest = &words[at + 1..];
        // `% tma_dtlb_store` (spaces lost) has no note; a note needs a word after the name.
        if at > 0 || !rest.is_empty() {
            let note = (!rest.is_empty()).then(|| rest.join(" "));
            return (words[..at].join(" "), words[at].to_string(), note);
        }
    }
    (String::new(), words.join(" "), None)
}

impl LogRow {
    /// Half a unit of the last digit perf printed of the count, relative to the count (0 for
    /// `<not counted>` or 0): `1,520.45` and `1.520,45` are precise to 0.005 in 1520.45.
    pub fn count_precision(&self) -> f64 {
        let Ok((value, marks)) = crate::number::parse_count(self.count_text.trim()) else {
            return 0.0;
        };
        if value == 0.0 || !value.is_finite() {
            return 0.0;
        }
        let decimals = marks
            .decimal
            .and_then(|d| self.count_text.rsplit_once(d))
            .map_or(0, |(_, frac)| frac.trim().len());
        0.5 * 10f64.powi(-(decimals as i32)) / value.abs()
    }

    /// The printed metric with this name (case-insensitive), if perf printed it on this row.
    pub fn metric(&self, name: &str) -> Option<&PrintedMetric> {
        self.metrics.iter().find(|m| m.name.eq_ignore_ascii_case(name))
    }
}

impl Block {
    /// A short description for messages: `interval 1.001 CPU3`, `S0-D0-C1`, `global`.
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.interval {
            parts.push(format!("interval {t:.9}"));
        }
        if let Some(a) = &self.aggr {
            parts.push(a.id.clone());
        }
        if parts.is_empty() { "global".to_string() } else { parts.join(" ") }
    }

    /// The row and printed metric where perf printed `metric` (case-insensitive). With `pmu`,
    /// a row on that PMU wins over others, for hybrid logs where `tma_retiring` is printed once
    /// for `cpu_core` and once for `cpu_atom`.
    pub fn printed_metric(
        &self,
        metric: &str,
        pmu: Option<&str>,
    ) -> Option<(&LogRow, &PrintedMetric)> {
        // Walked twice rather than collected: this runs for every input of every metric of a
        // log, and a block has a few rows.
        let hits = || self.rows.iter().filter_map(|row| row.metric(metric).map(|m| (row, m)));
        let Some(pmu) = pmu else { return hits().next() };
        let on_pmu = |p: Option<&str>| p.is_some_and(|p| p.eq_ignore_ascii_case(pmu));
        let other_core =
            |p: Option<&str>| p.is_some_and(|p| is_core_pmu(p) && !p.eq_ignore_ascii_case(pmu));
        hits()
            .find(|(row, _)| on_pmu(row.key.pmu.as_deref()))
            .or_else(|| hits().find(|(row, _)| !other_core(row.key.pmu.as_deref())))
    }

    /// A metric printed without a row (perf's `Default` metric groups).
    pub fn loose_metric(&self, metric: &str) -> Option<&PrintedMetric> {
        self.loose_metrics.iter().find(|m| m.name.eq_ignore_ascii_case(metric))
    }

    /// The rows of heuristic group `group`.
    pub fn group_rows(&self, group: usize) -> impl Iterator<Item = &LogRow> {
        self.rows.iter().filter(move |r| r.group == group)
    }
}

impl PerfLog {
    /// The command of the first run (`sleep 1`, `system wide`).
    pub fn command(&self) -> Option<&str> {
        self.runs.first().and_then(|r| r.command.as_deref())
    }

    /// Seconds from the first run's "seconds time elapsed" footer.
    pub fn elapsed_seconds(&self) -> Option<f64> {
        self.runs.first().and_then(|r| r.elapsed).map(|t| t.seconds)
    }

    /// Core PMU prefixes seen on rows (`cpu`, `cpu_core`, `cpu_atom`), sorted.
    pub fn core_pmus(&self) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .blocks
            .iter()
            .flat_map(|b| &b.rows)
            .filter_map(|r| r.key.pmu.as_deref())
            .filter(|p| is_core_pmu(p))
            .collect();
        set.into_iter().map(str::to_string).collect()
    }

    /// Whether rows from both `cpu_core` and `cpu_atom` (a hybrid CPU) appear.
    pub fn is_hybrid(&self) -> bool {
        let pmus = self.core_pmus();
        pmus.iter().any(|p| p == "cpu_core") && pmus.iter().any(|p| p == "cpu_atom")
    }

    /// Every distinct event key in the log, for example to infer the CPU model.
    pub fn event_keys(&self) -> BTreeSet<&EventKey> {
        // Repeats dropped by hash first: a long log repeats a few keys in every block, and
        // sorting every row's key (strings compared field by field) was most of the time.
        let distinct: foldhash::HashSet<&EventKey> =
            self.blocks.iter().flat_map(|b| &b.rows).map(|r| &r.key).collect();
        distinct.into_iter().collect()
    }

    /// Every distinct printed metric name (rows and loose lines), sorted.
    pub fn printed_metric_names(&self) -> BTreeSet<&str> {
        let mut names = BTreeSet::new();
        for metric in self
            .blocks
            .iter()
            .flat_map(|b| b.rows.iter().flat_map(|r| &r.metrics).chain(&b.loose_metrics))
        {
            names.insert(metric.name.as_str());
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_precision_in_any_locale() {
        let row = |text: &str| {
            let log = crate::parse(&format!("     {text}      cycles\n"), "p").unwrap();
            log.blocks[0].rows[0].count_precision()
        };
        assert_eq!(row("1,520.45"), 0.005 / 1520.45);
        assert_eq!(row("1.520,45"), 0.005 / 1520.45);
        assert_eq!(row("4.595.014.128"), 0.5 / 4_595_014_128.0);
        assert_eq!(row("1,234"), 0.5 / 1234.0);
    }

    #[test]
    fn perfs_own_labels_read_as_the_general_splitting_reads_them() {
        let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
        for label in ["CPUs utilized", " K/sec ", "insn per cycle", "CPUs\tutilized", "a\u{a0}b"] {
            assert_eq!(split_label(label), (String::new(), words(label), None), "{label:?}");
        }
    }

    #[test]
    fn labels() {
        let split = |l: &str| {
            let (unit, name, _) = split_label(l);
            (unit, name)
        };
        assert_eq!(split("%  tma_dtlb_store"), ("%".into(), "tma_dtlb_store".into()));
        assert_eq!(split("% tma_dtlb_store"), ("%".into(), "tma_dtlb_store".into()));
        assert_eq!(split("CPUs utilized"), ("".into(), "CPUs utilized".into()));
        assert_eq!(split("K/sec"), ("".into(), "K/sec".into()));
        assert_eq!(split("tma_info_thread_ipc"), ("".into(), "tma_info_thread_ipc".into()));
        assert_eq!(split("insn per cycle"), ("".into(), "insn per cycle".into()));
        assert_eq!(split("100%  tma_x"), ("100%".into(), "tma_x".into()));
        assert_eq!(
            split_label("%  tma_ports_utilized_2  <- checked by Bob"),
            ("%".into(), "tma_ports_utilized_2".into(), Some("<- checked by Bob".into()))
        );
        assert_eq!(
            split_label("% tma_x (rerun) ok"),
            ("%".into(), "tma_x".into(), Some("(rerun) ok".into()))
        );
        assert_eq!(
            split_label("tma_info_thread_ipc  note"),
            ("".into(), "tma_info_thread_ipc".into(), Some("note".into()))
        );
        assert_eq!(split_label("insn per cycle"), ("".into(), "insn per cycle".into(), None));
    }
}
