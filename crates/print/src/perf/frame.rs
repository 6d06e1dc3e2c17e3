//! What surrounds the counts: perf's headers (`print_header`: the title, the interval and
//! metric-only column headers, repeated every 26 intervals) and footer (`print_footer`: the
//! elapsed time, `-r`'s spread and `--table`, the user and system time, perf's hints).

use std::io::{self, Write};

use crate::num::{fixed, padded};
use crate::{Aggregation, Footer, Layout, Title, Unit};

use super::metric::{line_cells, only_label};
use super::{CGROUP_LEN, CONSOLE_CLEAR, COUNTS_LEN, METRIC_ONLY_LEN, Printer};

impl<W: Write> Printer<W> {
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
    pub(super) fn header(
        &mut self,
        text: &mut String,
        title: &Title,
        interval: bool,
        units: &[Unit],
    ) {
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
                    text.push_str("\n Performance counter stats for ");
                    text.push_str(&title.quoted());
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
