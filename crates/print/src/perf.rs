//! The printer: perf 6.12's `evlist__print_counters` and the functions it calls in
//! `tools/perf/util/stat-display.c`, over [`Unit`]s of [`Line`]s. Widths, separators, key
//! order and perf's quirks (continuation lines indented to column 49, CSV running
//! percentages in whole numbers, a header every 26 intervals) are kept, because scripts
//! parse them.

use std::io::{self, Write};
use std::time::Duration;

use tmetric_engine::view::{Cell, Count, Fmt, Line};

use crate::num::{c_f, fixed, padded};
use crate::{Aggregation, Config, Footer, Layout, Title, Unit, UnitId, interval_prefix};

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
        Printer { out, config, headers: 0, uncounted: false }
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

    /// perf's `print_footer`: the elapsed time (with its spread over `-r` runs), the
    /// workload's user and system time, and perf's hints. Only in the default layout, and
    /// not after an interval.
    pub fn footer(&mut self, footer: &Footer) -> io::Result<()> {
        if self.config.layout != Layout::Std {
            return Ok(());
        }
        let l = &self.config.locale;
        let mut text = String::new();
        if !footer.null_run {
            text.push('\n');
        }
        match footer.elapsed_sd {
            None => {
                text.push_str(&format!(
                    " {} seconds time elapsed",
                    padded(footer.elapsed, 17, 9, false, l)
                ));
                if let Some((user, sys)) = footer.rusage {
                    text.push_str("\n\n");
                    text.push_str(&format!(" {} seconds user\n", padded(user, 17, 9, false, l)));
                    text.push_str(&format!(" {} seconds sys\n", padded(sys, 17, 9, false, l)));
                }
            }
            Some(sd) => {
                // At most two more significant digits than the spread's.
                let precision = precision_of(sd) + 2;
                if !footer.runs_table.is_empty() {
                    table(&mut text, &footer.runs_table, footer.elapsed, precision, l);
                }
                text.push_str(&format!(
                    " {} +- {} seconds time elapsed",
                    padded(footer.elapsed, 17, precision, false, l),
                    fixed(sd, precision, false, l)
                ));
                let pct = if footer.elapsed != 0.0 { 100.0 * sd / footer.elapsed } else { 0.0 };
                if pct != 0.0 {
                    text.push_str(&format!("  ( +-{}% )", padded(pct, 6, 2, false, l)));
                }
            }
        }
        text.push_str("\n\n");
        if footer.nmi_hint {
            text.push_str(
                "Some events weren't counted. Try disabling the NMI watchdog:\n\
                 \techo 0 > /proc/sys/kernel/nmi_watchdog\n\
                 \tperf stat ...\n\
                 \techo 1 > /proc/sys/kernel/nmi_watchdog\n",
            );
        }
        if footer.mixed_group_hint {
            text.push_str(
                "The events in group usually have to be from the same PMU. Try reorganizing the group.\n",
            );
        }
        self.out.write_all(text.as_bytes())
    }

    /// perf's `print_header`.
    fn header(&mut self, text: &mut String, title: &Title, interval: bool, units: &[Unit]) {
        if self.config.interval_clear {
            // perf `puts`s the clear sequence to standard output.
            let _ = writeln!(io::stdout(), "{CONSOLE_CLEAR}");
        }
        if self.headers == 0 || self.config.interval_clear {
            match &self.config.layout {
                Layout::Json | Layout::Csv(_) => {
                    if self.config.metric_only {
                        self.metric_headers(text, true, interval, units);
                    }
                }
                Layout::Std if interval => self.interval_header(text, units),
                Layout::Std => {
                    text.push_str("\n Performance counter stats for '");
                    text.push_str(&title.target);
                    text.push('\'');
                    if title.runs > 1 {
                        text.push_str(&format!(" ({} runs)", title.runs));
                    }
                    text.push_str(":\n\n");
                    if self.config.metric_only {
                        self.metric_headers(text, false, interval, units);
                    }
                }
            }
        }
        if self.headers == 25 {
            self.headers = 0;
        } else {
            self.headers += 1;
        }
    }

    /// perf's `print_header_interval_std`.
    fn interval_header(&self, text: &mut String, units: &[Unit]) {
        let agg = self.config.aggregation;
        let len = agg.header_len();
        match agg {
            Aggregation::Node
            | Aggregation::Socket
            | Aggregation::Die
            | Aggregation::Cluster
            | Aggregation::Cache
            | Aggregation::Core => {
                text.push_str(&format!("#{:>15} {:<len$} cpus", "time", agg.header_std()));
            }
            Aggregation::Cpu => {
                text.push_str(&format!("#{:>15} {:<len$}", "time", agg.header_std()));
            }
            Aggregation::Thread => {
                text.push_str(&format!("#{:>15} {:>16}-{:<7}", "time", "comm", "pid"));
            }
            Aggregation::Global => text.push_str(&format!("#{:>15}", "time")),
        }
        if self.config.metric_only {
            self.metric_headers(text, true, true, units);
        } else {
            text.push_str(&format!(
                " {:>COUNTS_LEN$} {:>w$} events\n",
                "counts",
                "unit",
                w = self.config.unit_width
            ));
        }
    }

    /// perf's `print_metric_headers`: the metric-only column labels.
    fn metric_headers(&self, text: &mut String, no_indent: bool, interval: bool, units: &[Unit]) {
        match &self.config.layout {
            Layout::Json => {}
            Layout::Csv(sep) => {
                if interval {
                    text.push_str(&format!("time{sep}"));
                }
                for field in self.config.aggregation.header_csv() {
                    text.push_str(field);
                    text.push_str(sep);
                }
            }
            Layout::Std => {
                text.push(' ');
                if !no_indent {
                    let mut len = self.config.aggregation.header_len();
                    if self.config.cgroups {
                        len += CGROUP_LEN + 1;
                    }
                    text.push_str(&" ".repeat(len));
                }
            }
        }
        if let Some(unit) = units.first() {
            for line in &unit.lines {
                for cell in line_cells(line) {
                    let Some(label) = only_label(cell, line) else { continue };
                    match &self.config.layout {
                        Layout::Json => {}
                        Layout::Csv(sep) => {
                            text.push_str(&label);
                            text.push_str(sep);
                        }
                        Layout::Std => {
                            text.push_str(&format!("{label:>METRIC_ONLY_LEN$} "));
                        }
                    }
                }
            }
        }
        if self.config.layout != Layout::Json {
            text.push('\n');
        }
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
                && let Layout::Csv(sep) = &self.config.layout
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
        let ok = matches!(line.count, Count::Value(_));
        if !ok {
            if metric_only {
                // perf prints an empty column for an uncounted event.
                let blank = Cell { label: Some(String::new()), ..Cell::none() };
                self.metric(text, os, &blank);
                return;
            }
            if line.count == Count::NotCounted {
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
        if ok {
            if !metric_only && !line.default_groups.is_empty() {
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

    /// perf's `aggr_printout`.
    fn aggr_id(&self, text: &mut String, unit: &Unit) {
        let agg = self.config.aggregation;
        match (&self.config.layout, &unit.id) {
            (_, UnitId::Global) => {}
            (Layout::Std, UnitId::Cpu(cpu)) => {
                text.push_str(&format!("CPU{cpu:<w$} ", w = agg.header_len() - 3));
            }
            (Layout::Std, UnitId::Label(label)) => {
                text.push_str(&format!("{label:<w$} {:>4} ", unit.cpus, w = agg.header_len()));
            }
            (Layout::Std, UnitId::Thread { comm, tid }) => {
                text.push_str(&format!("{comm:>16}-{tid:<7} "));
            }
            (Layout::Csv(sep), UnitId::Cpu(cpu)) => text.push_str(&format!("CPU{cpu}{sep}")),
            (Layout::Csv(sep), UnitId::Label(label)) => {
                // Also per node, although perf's metric-only header names one field there.
                text.push_str(&format!("{label}{sep}{}{sep}", unit.cpus));
            }
            (Layout::Csv(sep), UnitId::Thread { comm, tid }) => {
                text.push_str(&format!("{comm}-{tid}{sep}"));
            }
            (Layout::Json, UnitId::Cpu(cpu)) => text.push_str(&format!("\"cpu\" : \"{cpu}\", ")),
            (Layout::Json, UnitId::Label(label)) => {
                let key = match agg {
                    Aggregation::Core => "core",
                    Aggregation::Cache => "cache",
                    Aggregation::Cluster => "cluster",
                    Aggregation::Die => "die",
                    Aggregation::Socket => "socket",
                    _ => "node",
                };
                text.push_str(&format!(
                    "\"{key}\" : {}, \"aggregate-number\" : {}, ",
                    json_string(label),
                    unit.cpus
                ));
            }
            (Layout::Json, UnitId::Thread { comm, tid }) => {
                text.push_str(&format!("\"thread\" : {}, ", json_string(&format!("{comm}-{tid}"))));
            }
        }
    }

    /// perf's `print_counter_value`: count, unit and event name.
    fn counter_value(&self, text: &mut String, line: &Line) {
        let l = &self.config.locale;
        let bad = match line.count {
            Count::NotSupported => Some("<not supported>"),
            Count::NotCounted => Some("<not counted>"),
            Count::Value(_) => None,
        };
        let value = match line.count {
            Count::Value(v) => v,
            _ => 0.0,
        };
        match &self.config.layout {
            Layout::Std => {
                match bad {
                    Some(bad) => text.push_str(&format!("{bad:>COUNTS_LEN$} ")),
                    None => {
                        let n = fixed(value, line.decimals, self.config.big_num, l);
                        text.push_str(&format!("{n:>COUNTS_LEN$} "));
                    }
                }
                text.push_str(&format!("{:<w$} ", line.unit, w = self.config.unit_width));
                text.push_str(&format!("{:<EVNAME_LEN$}", line.name));
            }
            Layout::Csv(sep) => {
                match bad {
                    Some(bad) => text.push_str(bad),
                    None => text.push_str(&fixed(value, line.decimals, false, l)),
                }
                text.push_str(sep);
                text.push_str(&line.unit);
                text.push_str(sep);
                text.push_str(&line.name);
            }
            Layout::Json => {
                let count = match bad {
                    Some(bad) => bad.to_string(),
                    None => c_f(value, &tmetric_runtime::locale::NumericLocale::c()),
                };
                text.push_str(&format!(
                    "\"counter-value\" : {}, \"unit\" : {}, \"event\" : {}, ",
                    json_string(&count),
                    json_string(&line.unit),
                    json_string(&line.name)
                ));
            }
        }
    }

    /// perf's `print_cgroup`.
    fn cgroup(&self, text: &mut String, name: &str) {
        match &self.config.layout {
            Layout::Std => text.push_str(&format!(" {name:<CGROUP_LEN$}")),
            Layout::Csv(sep) => {
                text.push_str(sep);
                text.push_str(name);
            }
            Layout::Json => text.push_str(&format!("\"cgroup\" : {}, ", json_string(name))),
        }
    }

    /// perf's `print_noise`: `-r`'s spread, before the metrics in CSV and JSON, after them
    /// in the default layout.
    fn noise(&self, text: &mut String, line: &Line, before_metric: bool) {
        if self.config.runs <= 1 {
            return;
        }
        let pct = line.noise.unwrap_or(0.0);
        let l = &self.config.locale;
        match &self.config.layout {
            Layout::Json if before_metric => {
                text.push_str(&format!("\"variance\" : {:.2}, ", pct));
            }
            Layout::Csv(sep) if before_metric => {
                text.push_str(&format!("{sep}{}%", fixed(pct, 2, false, l)));
            }
            Layout::Std if !before_metric && pct != 0.0 => {
                text.push_str(&format!("  ( +-{}% )", padded(pct, 6, 2, false, l)));
            }
            _ => {}
        }
    }

    /// perf's `print_running`.
    fn running(&self, text: &mut String, line: &Line, before_metric: bool) {
        let (run, ena) = (line.running, line.enabled);
        let l = &self.config.locale;
        // perf computes the CSV and JSON percentage in integers: 100 * run / ena.
        let whole =
            if run != ena && ena != 0 { (100 * run as u128 / ena as u128) as f64 } else { 100.0 };
        match &self.config.layout {
            Layout::Json if before_metric => {
                text.push_str(&format!(
                    "\"event-runtime\" : {run}, \"pcnt-running\" : {whole:.2}, "
                ));
            }
            Layout::Csv(sep) if before_metric => {
                text.push_str(&format!("{sep}{run}{sep}{}", fixed(whole, 2, false, l)));
            }
            Layout::Std if !before_metric && run != ena => {
                let pct = 100.0 * run as f64 / ena as f64;
                text.push_str(&format!("  ({}%)", fixed(pct, 2, false, l)));
            }
            _ => {}
        }
    }

    /// perf's `print_metricgroup_header_*`.
    fn group_header(&self, text: &mut String, os: &mut Line0<'_>, name: Option<&str>) {
        match (&self.config.layout, name) {
            (Layout::Std, None) => text.push_str(&" ".repeat(49)),
            (Layout::Std, Some(name)) => {
                let head = format!(" {name:>EVNAME_LEN$}");
                let n = head.chars().count();
                text.push_str(&head);
                text.push_str(&" ".repeat((MGROUP_LEN - 1).saturating_sub(n)));
            }
            (Layout::Csv(sep), None) => {
                // Room for the running time and percentage.
                text.push_str(&sep.repeat(self.nfields() - 2));
            }
            (Layout::Csv(sep), Some(name)) => {
                text.push_str(&sep.repeat(self.nfields()));
                text.push_str(name);
                self.new_line_csv(text, os);
            }
            (Layout::Json, None) => {}
            (Layout::Json, Some(name)) => {
                text.push_str(&format!("\"metricgroup\" : {}}}", json_string(name)));
                self.new_line_json(text, os);
            }
        }
    }

    /// perf's CSV `nfields`: the fields a continuation line leaves empty.
    fn nfields(&self) -> usize {
        4 + usize::from(self.config.cgroups)
    }

    /// perf's `new_line_*`: before every metric of a line but the first.
    fn new_line(&self, text: &mut String, os: &mut Line0<'_>) {
        if self.config.metric_only {
            return;
        }
        match &self.config.layout {
            Layout::Std => os.newline = true,
            Layout::Csv(_) => self.new_line_csv(text, os),
            Layout::Json => self.new_line_json(text, os),
        }
    }

    /// perf's `__new_line_std_csv`: a new line with the prefix and unit again.
    fn new_line_std_csv(&self, text: &mut String, os: &Line0<'_>) {
        text.push('\n');
        text.push_str(os.prefix);
        self.aggr_id(text, os.unit);
    }

    fn new_line_csv(&self, text: &mut String, os: &Line0<'_>) {
        self.new_line_std_csv(text, os);
        if let Layout::Csv(sep) = &self.config.layout {
            text.push_str(&sep.repeat(self.nfields()));
        }
    }

    fn new_line_json(&self, text: &mut String, os: &Line0<'_>) {
        text.push_str("\n{");
        text.push_str(os.prefix);
        self.aggr_id(text, os.unit);
    }

    /// One metric cell: perf's `print_metric_std`/`_csv`/`_json` and their metric-only
    /// variants.
    fn metric(&self, text: &mut String, os: &mut Line0<'_>, cell: &Cell) {
        if self.config.metric_only {
            return self.metric_only(text, os, cell);
        }
        let l = &self.config.locale;
        let full = self.config.full;
        match &self.config.layout {
            Layout::Std => {
                let newline = std::mem::take(&mut os.newline);
                let (Some(label), Some(fmt)) = (&cell.label, cell.fmt) else {
                    text.push_str(&" ".repeat(METRIC_LEN));
                    return;
                };
                if newline {
                    self.new_line_std_csv(text, os);
                    if self.config.aggregation == Aggregation::Cpu {
                        text.push_str(&" ".repeat(8));
                    }
                    text.push_str(&" ".repeat(MGROUP_LEN - 1));
                }
                let number = format_cell(cell.value, fmt, l);
                // Colour escapes do not count towards the width.
                let n = 3 + number.chars().count();
                text.push_str(" # ");
                match cell.colour.filter(|_| self.config.colour) {
                    Some(c) if !c.escape().is_empty() => {
                        text.push_str(c.escape());
                        text.push_str(&number);
                        text.push_str(RESET);
                    }
                    _ => text.push_str(&number),
                }
                let mut label = full_label(label, cell, full);
                if let Some(error) = cell.error.filter(|_| self.config.errors) {
                    // tmetric's `--errors`: the bar's half width in the value's format.
                    label.push_str(" ± ");
                    label.push_str(&if error.is_nan() {
                        "?".to_string()
                    } else {
                        fixed(error, fmt.decimals, false, l)
                    });
                }
                text.push_str(&format!(" {label:<w$}", w = (METRIC_LEN - 1).saturating_sub(n)));
            }
            Layout::Csv(sep) => {
                let (Some(label), Some(fmt)) = (&cell.label, cell.fmt) else {
                    text.push_str(sep);
                    text.push_str(sep);
                    if full {
                        text.push_str(sep);
                    }
                    return;
                };
                if full {
                    // The value at full precision, the unit and the name apart.
                    let (unit, name) = cell
                        .source
                        .as_ref()
                        .map_or((label.as_str(), ""), |s| (s.unit.as_str(), s.name.as_str()));
                    let value =
                        if cell.value.is_finite() { cell.value.to_string() } else { String::new() };
                    text.push_str(&format!("{sep}{value}{sep}{unit}{sep}{name}"));
                    return;
                }
                let number = format_cell(cell.value, fmt, l);
                let digits: String = number
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                text.push_str(&format!("{sep}{digits}{sep}{}", label.trim_start()));
            }
            Layout::Json => {
                let unit = cell.label.as_deref().unwrap_or("(null)");
                if full {
                    let (unit, name) = cell
                        .source
                        .as_ref()
                        .map_or((unit, ""), |s| (s.unit.as_str(), s.name.as_str()));
                    // As perf, the value is a string; at full precision, `nan` when it has none.
                    let value = match cell.fmt {
                        Some(_) if cell.value.is_finite() => cell.value.to_string(),
                        Some(_) => fixed(cell.value, 0, false, l),
                        None => String::new(),
                    };
                    text.push_str(&format!(
                        "\"metric-value\" : {}, \"metric-unit\" : {}, \"metric-name\" : {}",
                        json_string(&value),
                        json_string(unit),
                        json_string(name)
                    ));
                    self.json_error(text, cell);
                    text.push('}');
                    return;
                }
                let value = if cell.fmt.is_some() { cell.value } else { 0.0 };
                text.push_str(&format!(
                    "\"metric-value\" : {}, \"metric-unit\" : {}",
                    json_string(&c_f(value, &tmetric_runtime::locale::NumericLocale::c())),
                    json_string(unit)
                ));
                self.json_error(text, cell);
                text.push('}');
            }
        }
    }

    /// tmetric's `--errors` in JSON (perf has no such key, so only when asked): the error
    /// bar's half width as `metric-value` is written (`nan` when it is unknown).
    fn json_error(&self, text: &mut String, cell: &Cell) {
        let Some(error) = cell.error.filter(|_| self.config.errors) else { return };
        let c = tmetric_runtime::locale::NumericLocale::c();
        let value =
            if self.config.full && error.is_finite() { error.to_string() } else { c_f(error, &c) };
        text.push_str(&format!(", \"metric-error\" : {}", json_string(&value)));
    }

    /// perf's `print_metric_only*`.
    fn metric_only(&self, text: &mut String, os: &mut Line0<'_>, cell: &Cell) {
        let line = os.line;
        let Some(label) = line.and_then(|line| only_label(cell, line)) else { return };
        let l = &self.config.locale;
        let number = cell.fmt.map(|fmt| format_cell(cell.value, fmt, l)).unwrap_or_default();
        let digits: String =
            number.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        match &self.config.layout {
            Layout::Std => {
                let mut width = METRIC_ONLY_LEN;
                if width < label.chars().count() {
                    width = label.chars().count() + 1;
                }
                let painted = match cell.colour {
                    Some(c) => {
                        // perf widens the column by the escapes whether or not it prints them.
                        width += c.escape().len() + RESET.len();
                        if self.config.colour && !c.escape().is_empty() {
                            format!("{}{number}{RESET}", c.escape())
                        } else {
                            number
                        }
                    }
                    None => number,
                };
                let pad = width.saturating_sub(painted.chars().count());
                text.push_str(&" ".repeat(pad));
                text.push_str(&painted);
                text.push(' ');
            }
            Layout::Csv(sep) => {
                text.push_str(&digits);
                text.push_str(sep);
            }
            Layout::Json => {
                if label.is_empty() || digits.is_empty() {
                    return;
                }
                let lead = if text.ends_with("{") || text.ends_with(", ") { "" } else { ", " };
                text.push_str(&format!("{lead}{} : {}", json_string(&label), json_string(&digits)));
            }
        }
        os.first = false;
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

/// Every cell of a line, default-group cells included.
fn line_cells(line: &Line) -> Vec<&Cell> {
    if line.default_groups.is_empty() {
        line.cells.iter().collect()
    } else {
        line.default_groups.iter().flat_map(|g| g.cells.iter()).collect()
    }
}

/// The label of a metric-only column (perf's `valid_only_metric` and `fixunit`): none for
/// rates per second and `CPUs utilized`; `of all ...` ratios get their event's name first.
fn only_label(cell: &Cell, line: &Line) -> Option<String> {
    let label = cell.label.as_deref()?;
    if label.contains("/sec") || label.contains("CPUs utilized") {
        return None;
    }
    if label.starts_with("of all") {
        return Some(format!("{} {label}", line.name));
    }
    Some(label.to_string())
}

/// A value in its printf format, in the locale.
fn format_cell(value: f64, fmt: Fmt, locale: &tmetric_runtime::locale::NumericLocale) -> String {
    let number = padded(value, fmt.width, fmt.decimals, false, locale);
    format!("{number}{}", fmt.suffix)
}

/// The default layout's label with `--full-metrics`: perf's label, then tmetric's name of a
/// built-in metric where perf's label does not name one.
fn full_label(label: &str, cell: &Cell, full: bool) -> String {
    match (&cell.source, full) {
        (Some(source), true) if source.root.is_none() => format!("{label}  {}", source.name),
        _ => label.to_string(),
    }
}

/// perf's `get_precision`: the decimals that show a spread's first significant digit.
fn precision_of(value: f64) -> usize {
    if value > 1.0 || value <= 0.0 {
        return 0;
    }
    (-value.log10()).ceil().round() as usize
}

/// perf's `--table`: each run's time against the mean.
fn table(
    text: &mut String,
    runs: &[f64],
    avg: f64,
    precision: usize,
    l: &tmetric_runtime::locale::NumericLocale,
) {
    let indent = format!(" {}", padded(avg, 17, precision, false, l))
        .chars()
        .take_while(|c| *c == ' ')
        .count();
    text.push_str(&format!("{:indent$}# Table of individual measurements:\n", ""));
    for &run in runs {
        let n = 1 + ((100.0 * (run - avg) / run) as i64 / 5).unsigned_abs() as usize;
        let diff = fixed(run - avg, precision, false, l);
        let diff = if run - avg >= 0.0 { format!("+{diff}") } else { diff };
        text.push_str(&format!(
            " {} ({diff}) {}\n",
            padded(run, 17, precision, false, l),
            "#".repeat(n)
        ));
    }
    text.push_str(&format!("\n{:indent$}# Final result:\n", ""));
}

/// A JSON string (perf prints them unescaped; tmetric escapes so every line parses).
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}
