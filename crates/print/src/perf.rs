//! The printer: perf 6.12's `evlist__print_counters` and the functions it calls in
//! `tools/perf/util/stat-display.c`, over [`Unit`]s of [`Line`]s. Widths, separators, key
//! order and perf's quirks (continuation lines indented to column 49, CSV running
//! percentages in whole numbers, a header every 26 intervals) are kept, because scripts
//! parse them.

use std::io::{self, Write};
use std::time::Duration;

use tmetric_engine::view::{Cell, Line, PrintedCount};

use crate::{Aggregation, Config, Layout, Title, Unit, interval_prefix};

mod fields;
mod frame;
mod metric;

/// perf's `METRIC_LEN`: the width of a metric (` # `, value and label).
const METRIC_LEN: usize = 38;
/// perf's `EVNAME_LEN`.
const EVNAME_LEN: usize = 32;
/// perf's `COUNTS_LEN`.
const COUNTS_LEN: usize = 18;
/// perf's `MGROUP_LEN`.
const MGROUP_LEN: usize = 50;
/// perf's `METRIC_ONLY_LEN`.
const METRIC_ONLY_LEN: usize = 20;
/// perf's `CGROUP_LEN`.
const CGROUP_LEN: usize = 16;
/// The escape that ends a colour.
const RESET: &str = "\x1b[m";
/// perf's `CONSOLE_CLEAR`.
const CONSOLE_CLEAR: &str = "\x1b[H\x1b[2J";

/// Prints counts as perf stat does (see the crate documentation).
pub struct Printer<W: Write> {
    out: W,
    config: Config,
    /// perf's `num_print_iv`: headers print when it is 0; it wraps after 25.
    headers: usize,
    /// An event line was printed `<not counted>` while supported.
    uncounted: bool,
    /// The layout where perf tests `csv_output` before `json_output`
    /// ([`Config::csv_with_json`]): CSV whenever `-x` is given.
    csv_first: Layout,
}

/// The state of one line being printed (perf's `struct outstate`).
struct Line0<'a> {
    prefix: &'a str,
    unit: &'a Unit,
    cgroup: Option<&'a str>,
    /// A metric was printed on this metric-only line.
    first: bool,
    /// The next metric starts a continuation line.
    newline: bool,
    line: Option<&'a Line>,
}

impl<W: Write> Printer<W> {
    /// A printer writing to `out`.
    pub fn new(out: W, config: Config) -> Printer<W> {
        let csv_first = match (&config.layout, &config.csv_with_json) {
            (Layout::Json, Some(sep)) => Layout::Csv(sep.clone()),
            (layout, _) => layout.clone(),
        };
        Printer { out, config, headers: 0, uncounted: false, csv_first }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The writer.
    pub fn out(&mut self) -> &mut W {
        &mut self.out
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Whether some printed event was `<not counted>` although supported (perf's
    /// `print_free_counters_hint`).
    pub fn saw_uncounted(&self) -> bool {
        self.uncounted
    }

    /// perf's `# started on <ctime>` comment at the top of an `-o` file (not in JSON).
    pub fn started_on(&mut self, ctime: &str) -> io::Result<()> {
        if self.config.layout == Layout::Json {
            return Ok(());
        }
        write!(self.out, "# started on {ctime}\n\n")
    }

    /// `--metric-only`: the events of `units`' first unit that get no column (no metric of
    /// their own; perf's rates per second and `CPUs utilized` are not metric-only columns),
    /// each named once.
    pub fn metric_only_left_out(units: &[Unit]) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for line in units.first().map_or(&[][..], |u| &u.lines[..]) {
            let none =
                metric::line_cells(line).iter().all(|c| metric::only_label(c, line).is_none());
            if none && !names.contains(&line.name) {
                names.push(line.name.clone());
            }
        }
        names
    }

    /// One print of the counters: the interval `at`'s lines (with `-I`) or the totals
    /// (`None`), with perf's headers; the footer is printed by [`Printer::footer`].
    pub fn counters(
        &mut self,
        title: &Title,
        at: Option<Duration>,
        units: &[Unit],
    ) -> io::Result<()> {
        let mut text = String::new();
        let prefix = at.map(|at| interval_prefix(&self.config.layout, at)).unwrap_or_default();
        self.header(&mut text, title, at.is_some(), units);
        let cgroups = self.config.cgroups;
        let cgroup_of =
            |l: &Line| -> Option<String> { cgroups.then(|| l.cgroup.clone().unwrap_or_default()) };
        match self.config.aggregation {
            agg if agg.unit_major() => {
                for unit in units {
                    self.metric_begin(&mut text, &prefix, unit);
                    for line in &unit.lines {
                        let cg = cgroup_of(line);
                        self.aggr_line(&mut text, &prefix, unit, line, cg.as_deref(), at.is_none());
                    }
                    self.metric_end(&mut text);
                }
            }
            Aggregation::Cpu if self.config.metric_only => {
                for unit in units {
                    if unit.lines.is_empty() {
                        continue;
                    }
                    self.metric_begin(&mut text, &prefix, unit);
                    for line in &unit.lines {
                        let cg = cgroup_of(line);
                        self.aggr_line(&mut text, &prefix, unit, line, cg.as_deref(), at.is_none());
                    }
                    self.metric_end(&mut text);
                }
            }
            _ if self.config.metric_only && cgroups => {
                // One metric-only line per cgroup (perf's `print_cgroup_counter`).
                for unit in units {
                    let mut current: Option<Option<&str>> = None;
                    for line in &unit.lines {
                        let cg = line.cgroup.as_deref();
                        if current != Some(cg) {
                            if current.is_some() {
                                self.metric_end(&mut text);
                            }
                            self.metric_begin_in(&mut text, &prefix, unit, cg);
                            current = Some(cg);
                        }
                        let cg = cgroup_of(line);
                        self.aggr_line(&mut text, &prefix, unit, line, cg.as_deref(), at.is_none());
                    }
                    if current.is_some() {
                        self.metric_end(&mut text);
                    }
                }
            }
            _ => {
                // Event by event, and within an event unit by unit (perf's `print_counter`).
                if let Some(first) = units.first() {
                    self.metric_begin(&mut text, &prefix, first);
                }
                for row in row_order(units) {
                    for unit in units {
                        if let Some(line) = unit.lines.iter().find(|l| (l.row, l.part) == row) {
                            let cg = cgroup_of(line);
                            self.aggr_line(
                                &mut text,
                                &prefix,
                                unit,
                                line,
                                cg.as_deref(),
                                at.is_none(),
                            );
                        }
                    }
                }
                if !units.is_empty() {
                    self.metric_end(&mut text);
                }
            }
        }
        self.out.write_all(text.as_bytes())
    }

    /// perf's `print_metric_begin` (metric-only lines start with the unit).
    fn metric_begin(&self, text: &mut String, prefix: &str, unit: &Unit) {
        let cg = unit.lines.first().and_then(|l| l.cgroup.as_deref());
        self.metric_begin_in(text, prefix, unit, cg);
    }

    /// [`Printer::metric_begin`] for the lines of cgroup `cgroup`.
    fn metric_begin_in(&self, text: &mut String, prefix: &str, unit: &Unit, cgroup: Option<&str>) {
        if !self.config.metric_only {
            return;
        }
        if self.config.layout == Layout::Json {
            text.push('{');
        }
        text.push_str(prefix);
        self.aggr_id(text, unit);
        if self.config.cgroups {
            self.cgroup(text, cgroup.unwrap_or(""));
        }
    }

    /// perf's `print_metric_end`.
    fn metric_end(&self, text: &mut String) {
        if !self.config.metric_only {
            return;
        }
        if self.config.layout == Layout::Json {
            // No metric on the line: perf says so.
            if text.ends_with("{") || text.ends_with(", ") {
                text.push_str("\"metric-value\" : \"none\"");
            }
            text.push('}');
        }
        text.push('\n');
    }

    /// perf's `print_counter_aggrdata` for one line of one unit.
    fn aggr_line(
        &mut self,
        text: &mut String,
        prefix: &str,
        unit: &Unit,
        line: &Line,
        cgroup: Option<&str>,
        totals: bool,
    ) {
        let metric_only = self.config.metric_only;
        if !metric_only {
            if self.config.layout == Layout::Json {
                text.push('{');
            }
            if !prefix.is_empty() {
                text.push_str(prefix);
            } else if totals
                && self.config.csv_summary
                && let Layout::Csv(sep) = &self.csv_first
            {
                text.push_str("summary");
                text.push_str(sep);
            }
        }
        let mut os = Line0 { prefix, unit, cgroup, first: true, newline: false, line: Some(line) };
        self.printout(text, &mut os, line);
        if !metric_only {
            text.push('\n');
        }
    }

    /// perf's `printout`.
    fn printout(&mut self, text: &mut String, os: &mut Line0<'_>, line: &Line) {
        let metric_only = self.config.metric_only;
        let ok = matches!(line.count, PrintedCount::Value(_));
        // perf 7.x prints an uncounted line's metrics too (`nan`); perf 6.12 a blank.
        let metrics = ok || self.config.contract.metrics_on_uncounted_lines;
        if !ok {
            if metric_only && !metrics {
                // perf prints an empty column for an uncounted event.
                let blank = Cell { label: Some(String::new()), ..Cell::none() };
                self.metric(text, os, &blank);
                return;
            }
            if line.count == PrintedCount::NotCounted {
                self.uncounted = true;
            }
        }
        if !metric_only && line.default_groups.is_empty() {
            self.aggr_id(text, os.unit);
            self.counter_value(text, line);
            if let Some(cg) = os.cgroup {
                self.cgroup(text, cg);
            }
            self.noise(text, line, true);
            self.running(text, line, true);
        }
        if metrics {
            if ok && !metric_only && !line.default_groups.is_empty() {
                self.aggr_id(text, os.unit);
                for (i, group) in line.default_groups.iter().enumerate() {
                    if i > 0 {
                        match &self.config.layout {
                            Layout::Json => self.new_line_json(text, os),
                            _ => self.new_line_std_csv(text, os),
                        }
                    }
                    self.noise(text, line, true);
                    self.running(text, line, true);
                    self.group_header(text, os, group.name.as_deref());
                    for (j, cell) in group.cells.iter().enumerate() {
                        if j > 0 {
                            self.new_line(text, os);
                        }
                        self.metric(text, os, cell);
                    }
                }
            } else {
                for (i, cell) in line.cells.iter().enumerate() {
                    if i > 0 {
                        self.new_line(text, os);
                    }
                    self.metric(text, os, cell);
                }
            }
        } else {
            let blank = Cell { label: Some(String::new()), ..Cell::none() };
            self.metric(text, os, &blank);
        }
        if !metric_only {
            self.noise(text, line, false);
            self.running(text, line, false);
        }
    }
}

/// The rows (and uncore boxes of a row) of `units` in print order: the order of their first
/// appearance.
fn row_order(units: &[Unit]) -> Vec<(usize, usize)> {
    let mut rows: Vec<(usize, usize)> = Vec::new();
    for unit in units {
        for line in &unit.lines {
            if !rows.contains(&(line.row, line.part)) {
                rows.push((line.row, line.part));
            }
        }
    }
    rows
}

/// A JSON string (perf prints them unescaped; tmetric escapes so every line parses).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}
