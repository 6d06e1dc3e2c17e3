//! The metrics of a line: perf's `print_metric_*` in each layout (colours, `--full-metrics`,
//! tmetric's `--errors`), metric-only columns, continuation lines (`new_line_*`) and the
//! `Default` metric group headers.

use std::fmt::Write as _;
use std::io::Write;

use tmetric_engine::view::{Cell, Fmt, Line};

use crate::num::{c_f, fixed, left_align_since, push_blanks, push_fixed, push_padded};
use crate::{Aggregation, Layout};

use super::{
    EVNAME_LEN, Line0, METRIC_LEN, METRIC_ONLY_LEN, MGROUP_LEN, Printer, RESET, json_string,
};

impl<W: Write> Printer<W> {
    /// perf's `print_metricgroup_header_*`.
    pub(super) fn group_header(&self, text: &mut String, os: &mut Line0<'_>, name: Option<&str>) {
        match (&self.csv_first, name) {
            (Layout::Std, None) => push_blanks(text, 49),
            (Layout::Std, Some(name)) => {
                let start = text.len();
                text.push(' ');
                crate::num::push_right(text, name, EVNAME_LEN);
                left_align_since(text, start, MGROUP_LEN - 1);
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
                let _ = write!(text, "\"metricgroup\" : {}}}", json_string(name));
                self.new_line_json(text, os);
            }
        }
    }

    /// perf's CSV `nfields`: the fields a continuation line leaves empty.
    fn nfields(&self) -> usize {
        4 + usize::from(self.config.cgroups)
    }

    /// perf's `new_line_*`: before every metric of a line but the first.
    pub(super) fn new_line(&self, text: &mut String, os: &mut Line0<'_>) {
        if self.config.metric_only {
            return;
        }
        match &self.csv_first {
            Layout::Std => os.newline = true,
            Layout::Csv(_) => self.new_line_csv(text, os),
            Layout::Json => self.new_line_json(text, os),
        }
    }

    /// perf's `__new_line_std_csv`: a new line with the prefix and unit again.
    pub(super) fn new_line_std_csv(&self, text: &mut String, os: &Line0<'_>) {
        text.push('\n');
        text.push_str(os.prefix);
        self.aggr_id(text, os.unit);
    }

    fn new_line_csv(&self, text: &mut String, os: &Line0<'_>) {
        self.new_line_std_csv(text, os);
        if let Layout::Csv(sep) = &self.csv_first {
            text.push_str(&sep.repeat(self.nfields()));
        }
    }

    pub(super) fn new_line_json(&self, text: &mut String, os: &Line0<'_>) {
        text.push_str("\n{");
        text.push_str(os.prefix);
        self.aggr_id(text, os.unit);
    }

    /// One metric cell: perf's `print_metric_std`/`_csv`/`_json` and their metric-only
    /// variants.
    pub(super) fn metric(&self, text: &mut String, os: &mut Line0<'_>, cell: &Cell) {
        if self.config.metric_only {
            return self.metric_only(text, os, cell);
        }
        let l = &self.config.locale;
        let full = self.config.full;
        match &self.csv_first {
            Layout::Std => {
                let newline = std::mem::take(&mut os.newline);
                let (Some(label), Some(fmt)) = (&cell.label, cell.fmt) else {
                    push_blanks(text, METRIC_LEN);
                    return;
                };
                if newline {
                    self.new_line_std_csv(text, os);
                    if self.config.aggregation == Aggregation::Cpu {
                        push_blanks(text, 8);
                    }
                    push_blanks(text, MGROUP_LEN - 1);
                }
                text.push_str(" # ");
                // Colour escapes do not count towards the width.
                let colour = cell.colour.filter(|c| self.config.colour && !c.escape().is_empty());
                if let Some(c) = colour {
                    text.push_str(c.escape());
                }
                let start = text.len();
                push_cell(text, cell.value, fmt, l);
                let n = 3 + text[start..].chars().count();
                if colour.is_some() {
                    text.push_str(RESET);
                }
                // The label, written in place: every metric of every interval prints one.
                text.push(' ');
                let start = text.len();
                push_full_label(text, label, cell, full);
                if let Some(error) = cell.error.filter(|_| self.config.errors) {
                    // tmetric's `--errors`: the bar's half width in the value's format.
                    text.push_str(" ± ");
                    if error.is_nan() {
                        text.push('?');
                    } else {
                        push_fixed(text, error, fmt.decimals, false, l);
                    }
                }
                if cell.impossible && self.config.errors {
                    // Beside the value; the note after the counts says why.
                    text.push_str(" (impossible)");
                }
                left_align_since(text, start, (METRIC_LEN - 1).saturating_sub(n));
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
                    let _ = write!(text, "{sep}{value}{sep}{unit}{sep}{name}");
                    return;
                }
                text.push_str(sep);
                let start = text.len();
                push_cell(text, cell.value, fmt, l);
                // perf's CSV value: the number's leading digits and points, blanks and
                // suffix dropped.
                let number = &text[start..];
                let lead = number.len() - number.trim_start().len();
                let digits =
                    number[lead..].bytes().take_while(|c| c.is_ascii_digit() || *c == b'.').count();
                text.replace_range(start..start + lead, "");
                text.truncate(start + digits);
                text.push_str(sep);
                text.push_str(label.trim_start());
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
                    let _ = write!(
                        text,
                        "\"metric-value\" : {}, \"metric-unit\" : {}, \"metric-name\" : {}",
                        json_string(&value),
                        json_string(unit),
                        json_string(name)
                    );
                    self.json_error(text, cell);
                    text.push('}');
                    return;
                }
                let value = if cell.fmt.is_some() { cell.value } else { 0.0 };
                let _ = write!(
                    text,
                    "\"metric-value\" : {}, \"metric-unit\" : {}",
                    json_string(&c_f(value, &tmetric_runtime::locale::NumericLocale::c())),
                    json_string(unit)
                );
                self.json_error(text, cell);
                text.push('}');
            }
        }
    }

    /// tmetric's `--errors` in JSON (perf has no such key, so only when asked): the error
    /// bar's half width as `metric-value` is written (`nan` when it is unknown).
    fn json_error(&self, text: &mut String, cell: &Cell) {
        if cell.impossible && self.config.errors {
            // Its note says why (with -v or --full-metrics in this stream, as notes go).
            text.push_str(", \"metric-impossible\" : true");
        }
        let Some(error) = cell.error.filter(|_| self.config.errors) else { return };
        let c = tmetric_runtime::locale::NumericLocale::c();
        let value =
            if self.config.full && error.is_finite() { error.to_string() } else { c_f(error, &c) };
        let _ = write!(text, ", \"metric-error\" : {}", json_string(&value));
    }

    /// perf's `print_metric_only*`.
    fn metric_only(&self, text: &mut String, os: &mut Line0<'_>, cell: &Cell) {
        let line = os.line;
        let Some(label) = line.and_then(|line| only_label(cell, line)) else { return };
        let l = &self.config.locale;
        let number = cell.fmt.map(|fmt| format_cell(cell.value, fmt, l)).unwrap_or_default();
        let digits: String =
            number.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        match &self.csv_first {
            Layout::Std if self.config.contract.metric_only_fitted => {
                let width = METRIC_ONLY_LEN.max(label.chars().count());
                let pad = width.saturating_sub(number.chars().count()).max(1);
                text.push_str(&" ".repeat(pad));
                match cell.colour.filter(|c| self.config.colour && !c.escape().is_empty()) {
                    Some(c) => text.push_str(&format!("{}{number}{RESET}", c.escape())),
                    None => text.push_str(&number),
                }
            }
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

/// Every cell of a line, default-group cells included.
pub(super) fn line_cells(line: &Line) -> Vec<&Cell> {
    if line.default_groups.is_empty() {
        line.cells.iter().collect()
    } else {
        line.default_groups.iter().flat_map(|g| g.cells.iter()).collect()
    }
}

/// The label of a metric-only column (perf's `valid_only_metric` and `fixunit`): none for
/// rates per second and `CPUs utilized`; `of all ...` ratios get their event's name first.
pub(super) fn only_label(cell: &Cell, line: &Line) -> Option<String> {
    let label = cell.label.as_deref()?;
    if label.contains("/sec") || label.contains("CPUs utilized") {
        // A metric asked for with -M that perf's built-in prints on its row (`-M Software`'s
        // `cpus_utilized`) keeps its column, named; perf's own rates do not.
        cell.source.as_ref().filter(|s| s.root.is_some())?;
        return Some(label.to_string());
    }
    if label.starts_with("of all") {
        return Some(format!("{} {label}", line.name));
    }
    Some(label.to_string())
}

/// A value in its printf format, in the locale.
fn format_cell(value: f64, fmt: Fmt, locale: &tmetric_runtime::locale::NumericLocale) -> String {
    let mut out = String::with_capacity(fmt.width.max(16));
    push_cell(&mut out, value, fmt, locale);
    out
}

/// [`format_cell`] appended to `out`.
fn push_cell(
    out: &mut String,
    value: f64,
    fmt: Fmt,
    locale: &tmetric_runtime::locale::NumericLocale,
) {
    push_padded(out, value, fmt.width, fmt.decimals, false, locale);
    out.push_str(fmt.suffix);
}

/// The default layout's label with `--full-metrics`: perf's label, then tmetric's name of a
/// built-in metric where perf's label does not name one; appended to `out`.
fn push_full_label(out: &mut String, label: &str, cell: &Cell, full: bool) {
    out.push_str(label);
    match (&cell.source, full) {
        (Some(source), true) if !label.contains(&source.name) => {
            out.push_str("  ");
            out.push_str(&source.name);
        }
        _ => {}
    }
}
