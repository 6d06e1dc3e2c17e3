//! A counter line's fields in each layout: perf's `aggr_printout` (the unit),
//! `print_counter_value` (count, unit, event), `print_cgroup`, `print_noise` (`-r`'s spread)
//! and `print_running`.

use std::io::Write;

use tmetric_engine::view::{Count, Line};

use crate::num::{c_f, fixed, padded};
use crate::{Aggregation, Layout, Unit, UnitId};

use super::{CGROUP_LEN, COUNTS_LEN, EVNAME_LEN, Printer, json_string};

impl<W: Write> Printer<W> {
    /// perf's `aggr_printout`.
    pub(super) fn aggr_id(&self, text: &mut String, unit: &Unit) {
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
                    "\"{key}\" : {}, \"{}\" : {}, ",
                    json_string(label),
                    self.config.contract.json_unit_cpus,
                    unit.cpus
                ));
            }
            (Layout::Json, UnitId::Thread { comm, tid }) => {
                text.push_str(&format!("\"thread\" : {}, ", json_string(&format!("{comm}-{tid}"))));
            }
        }
    }

    /// perf's `print_counter_value`: count, unit and event name.
    pub(super) fn counter_value(&self, text: &mut String, line: &Line) {
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
    pub(super) fn cgroup(&self, text: &mut String, name: &str) {
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
    pub(super) fn noise(&self, text: &mut String, line: &Line, before_metric: bool) {
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
    pub(super) fn running(&self, text: &mut String, line: &Line, before_metric: bool) {
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
}
