//! A counter line's fields in each layout: perf's `aggr_printout` (the unit),
//! `print_counter_value` (count, unit, event), `print_cgroup`, `print_noise` (`-r`'s spread)
//! and `print_running`.

use std::fmt::Write as _;
use std::io::Write;

use tmetric_engine::view::{Line, PrintedCount};

use crate::num::{c_f, left_align_since, push_fixed, push_left, push_padded, push_right};
use crate::{Aggregation, Layout, Unit, UnitId};

use super::{CGROUP_LEN, COUNTS_LEN, EVNAME_LEN, Printer, json_string};

impl<W: Write> Printer<W> {
    /// perf's `aggr_printout`.
    pub(super) fn aggr_id(&self, text: &mut String, unit: &Unit) {
        let agg = self.config.aggregation;
        match (&self.config.layout, &unit.id) {
            (_, UnitId::Global) => {}
            // Written into the line, not formatted apart: these run for every row of every
            // interval.
            (Layout::Std, UnitId::Cpu(cpu)) => {
                text.push_str("CPU");
                let start = text.len();
                let _ = write!(text, "{cpu}");
                left_align_since(text, start, agg.header_len() - 3);
                text.push(' ');
            }
            (Layout::Std, UnitId::Label(label)) => {
                push_left(text, label, agg.header_len());
                let _ = write!(text, " {:>4} ", unit.cpus);
            }
            (Layout::Std, UnitId::Thread { comm, tid }) => {
                let _ = write!(text, "{comm:>16}-{tid:<7} ");
            }
            (Layout::Csv(sep), UnitId::Cpu(cpu)) => {
                let _ = write!(text, "CPU{cpu}{sep}");
            }
            (Layout::Csv(sep), UnitId::Label(label)) => {
                // Also per node, although perf's metric-only header names one field there.
                let _ = write!(text, "{label}{sep}{}{sep}", unit.cpus);
            }
            (Layout::Csv(sep), UnitId::Thread { comm, tid }) => {
                let _ = write!(text, "{comm}-{tid}{sep}");
            }
            (Layout::Json, UnitId::Cpu(cpu)) => {
                let _ = write!(text, "\"cpu\" : \"{cpu}\", ");
            }
            (Layout::Json, UnitId::Label(label)) => {
                let key = match agg {
                    Aggregation::Core => "core",
                    Aggregation::Cache => "cache",
                    Aggregation::Cluster => "cluster",
                    Aggregation::Die => "die",
                    Aggregation::Socket => "socket",
                    _ => "node",
                };
                let _ = write!(
                    text,
                    "\"{key}\" : {}, \"{}\" : {}, ",
                    json_string(label),
                    self.config.contract.json_unit_cpus,
                    unit.cpus
                );
            }
            (Layout::Json, UnitId::Thread { comm, tid }) => {
                let _ = write!(text, "\"thread\" : {}, ", json_string(&format!("{comm}-{tid}")));
            }
        }
    }

    /// perf's `print_counter_value`: count, unit and event name.
    pub(super) fn counter_value(&self, text: &mut String, line: &Line) {
        let l = &self.config.locale;
        let bad = match line.count {
            PrintedCount::NotSupported => Some("<not supported>"),
            PrintedCount::NotCounted => Some("<not counted>"),
            PrintedCount::Value(_) => None,
        };
        let value = match line.count {
            PrintedCount::Value(v) => v,
            _ => 0.0,
        };
        match &self.config.layout {
            Layout::Std => {
                match bad {
                    Some(bad) => push_right(text, bad, COUNTS_LEN),
                    None => {
                        push_padded(text, value, COUNTS_LEN, line.decimals, self.config.big_num, l)
                    }
                }
                text.push(' ');
                push_left(text, &line.unit, self.config.unit_width);
                text.push(' ');
                push_left(text, &line.name, EVNAME_LEN);
            }
            Layout::Csv(sep) => {
                match bad {
                    Some(bad) => text.push_str(bad),
                    None => push_fixed(text, value, line.decimals, false, l),
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
                let _ = write!(
                    text,
                    "\"counter-value\" : {}, \"unit\" : {}, \"event\" : {}, ",
                    json_string(&count),
                    json_string(&line.unit),
                    json_string(&line.name)
                );
            }
        }
    }

    /// perf's `print_cgroup`.
    pub(super) fn cgroup(&self, text: &mut String, name: &str) {
        match &self.config.layout {
            Layout::Std => {
                text.push(' ');
                push_left(text, name, CGROUP_LEN);
            }
            Layout::Csv(sep) => {
                text.push_str(sep);
                text.push_str(name);
            }
            Layout::Json => {
                let _ = write!(text, "\"cgroup\" : {}, ", json_string(name));
            }
        }
    }

    /// perf's `print_noise`: `-r`'s spread, before the metrics in CSV and JSON, after them
    /// in the default layout.
    pub(super) fn noise(&self, text: &mut String, line: &Line, before_metric: bool) {
        if self.config.runs <= 1 {
            return;
        }
        let pct = line.noise.unwrap_or(0.0);
        let l = &self.config.locale;
        match &self.config.layout {
            Layout::Json if before_metric => {
                let _ = write!(text, "\"variance\" : {:.2}, ", pct);
            }
            Layout::Csv(sep) if before_metric => {
                text.push_str(sep);
                push_fixed(text, pct, 2, false, l);
                text.push('%');
            }
            Layout::Std if !before_metric && pct != 0.0 => {
                text.push_str("  ( +-");
                push_padded(text, pct, 6, 2, false, l);
                text.push_str("% )");
            }
            _ => {}
        }
    }

    /// perf's `print_running`.
    pub(super) fn running(&self, text: &mut String, line: &Line, before_metric: bool) {
        let (run, ena) = (line.running, line.enabled);
        let l = &self.config.locale;
        // perf computes the CSV and JSON percentage in integers: 100 * run / ena.
        let whole =
            if run != ena && ena != 0 { (100 * run as u128 / ena as u128) as f64 } else { 100.0 };
        match &self.config.layout {
            Layout::Json if before_metric => {
                let _ = write!(text, "\"event-runtime\" : {run}, \"pcnt-running\" : {whole:.2}, ");
            }
            Layout::Csv(sep) if before_metric => {
                let _ = write!(text, "{sep}{run}{sep}");
                push_fixed(text, whole, 2, false, l);
            }
            Layout::Std if !before_metric && run != ena => {
                let pct = 100.0 * run as f64 / ena as f64;
                text.push_str("  (");
                push_fixed(text, pct, 2, false, l);
                text.push_str("%)");
            }
            _ => {}
        }
    }
}
