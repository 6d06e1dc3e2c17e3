//! perf stat's output layouts for tmetric: the default layout, CSV (`-x SEP`), JSON lines
//! (`-j`) and `--metric-only`, per aggregation mode, as perf 6.12's
//! `tools/perf/util/stat-display.c` prints them, byte for byte, in the user's numeric locale.
//! `stat`, `report` and `record` print through it; what to print comes from the engine as
//! data ([`tmetric_engine::view`]). [`eval`] holds `tmetric eval`'s own layouts (a model's
//! metrics over a counts file or a perf stat log, text, CSV and JSON lines) and the wording
//! of its notes, over the engine's `counts` and `perflog` data. [`list`], [`describe`] and
//! [`plan`] print `tmetric list`, `describe` and `plan` (text and JSON) over the engine's
//! listing rows, metric descriptions and offline plans. [`out`] is where the output goes: a
//! [`out::Sink`] that never loses counts, files created 0600, warnings on standard error;
//! [`verbose`] what `stat -v` says about the counters and groups.
//!
//! tmetric's additions (each metric's name beside perf's label, full-precision values, a
//! metric's unit and name as fields of their own) are printed only with
//! [`Config::full`] (`--full-metrics`); the default layout is perf's.
//!
//! Deliberate differences from perf, where perf's output is broken rather than a habit:
//! JSON numbers always use `.` (perf writes the locale's decimal comma into JSON numbers,
//! which makes the line invalid JSON), and JSON strings are escaped.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod describe;
pub mod eval;
pub mod list;
pub mod names;
pub mod num;
pub mod out;
mod perf;
pub mod plan;
pub mod stat;
pub mod verbose;

use std::io::{self, Write};
use std::time::Duration;

use tmetric_runtime::locale::NumericLocale;

pub use perf::Printer;
pub use tmetric_engine::view::{Unit, UnitId};

pub use tmetric_perfstat::{Aggregation, Layout};

/// What the title and the footer say.
#[derive(Debug, Clone, PartialEq)]
pub struct Title {
    /// What was counted, as perf's title says it: `system wide`, `CPU(s) 0-3`, the command
    /// line, `process id 1234`, `thread id 1234`; tmetric adds the simulated PMU.
    pub target: String,
    /// `-r N`.
    pub runs: u32,
}

impl Title {
    /// What follows `Performance counter stats for `, quoted as perf 6.12's `print_header_std`
    /// quotes it: `'sleep 1'`, `'system wide'`, but `process id '1234'` and
    /// `thread id '1,2'` (the quote after the words).
    pub fn quoted(&self) -> String {
        for words in ["process id ", "thread id "] {
            if let Some(ids) = self.target.strip_prefix(words) {
                let end = ids.find('\'').unwrap_or(ids.len());
                let listed = &ids[..end];
                if !listed.is_empty() && listed.chars().all(|c| c.is_ascii_digit() || c == ',') {
                    return format!("{words}'{ids}'");
                }
            }
        }
        format!("'{}'", self.target)
    }
}

/// The footer's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Footer {
    /// Mean elapsed time in seconds.
    pub elapsed: f64,
    /// `-r`: the standard deviation of the mean elapsed time, in seconds.
    pub elapsed_sd: Option<f64>,
    /// `-r --table`: each run's elapsed time in seconds.
    pub runs_table: Vec<f64>,
    /// The workload's user and system seconds (one run of a command).
    pub rusage: Option<(f64, f64)>,
    /// `-n`: nothing was counted.
    pub null_run: bool,
    /// Some event was not counted and the NMI watchdog holds a counter: perf's hint.
    pub nmi_hint: bool,
    /// A group mixed events of several hardware PMUs: perf's hint.
    pub mixed_group_hint: bool,
}

/// Layout options, perf's `perf_stat_config` fields that matter for printing.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Default, CSV or JSON.
    pub layout: Layout,
    /// `--metric-only`.
    pub metric_only: bool,
    /// Group digits (perf's default `-B`; off with `-x` or `--no-big-num`).
    pub big_num: bool,
    /// The numeric locale (perf's `setlocale(LC_ALL, "")`).
    pub locale: NumericLocale,
    /// Colour metric values (on a terminal).
    pub colour: bool,
    /// tmetric's additions (`--full-metrics`).
    pub full: bool,
    /// The aggregation mode.
    pub aggregation: Aggregation,
    /// `-I`: lines carry the interval's time.
    pub interval: bool,
    /// Lines carry a cgroup column (`-G`, `--for-each-cgroup`).
    pub cgroups: bool,
    /// `-r N`.
    pub runs: u32,
    /// `--summary` with `-I` in CSV: the totals' lines start with `summary` unless
    /// `--no-csv-summary`.
    pub csv_summary: bool,
    /// perf's `-x SEP` given with `-j`: perf 6.12 sets both its `csv_output` and
    /// `json_output`, and JSON wins wherever it is tested first; `printout` tests CSV first,
    /// so a line's metrics, continuation lines and `Default` group headers print as CSV with
    /// this separator inside the JSON lines, and `--summary`'s totals start with `summary`.
    pub csv_with_json: Option<String>,
    /// The width of the unit column (perf's `unit_width`: the longest unit, at least 4).
    pub unit_width: usize,
    /// `--interval-clear`: clear the terminal before each interval.
    pub interval_clear: bool,
    /// `--errors`: a JSON metric's error bar ([`tmetric_engine::view::Cell::error`]) after its
    /// label (`± 1.2`, `± ?` when unknown) and as a `metric-error` key in JSON.
    pub errors: bool,
    /// The perf release whose layout this is (`tmetric_engine::contract`): perf 6.12's unless
    /// the plan's vintage is another's.
    pub contract: &'static tmetric_engine::Contract,
}

impl Config {
    /// perf's defaults for `layout`, in the C locale.
    pub fn new(layout: Layout) -> Config {
        let big_num = layout == Layout::Std;
        Config {
            layout,
            metric_only: false,
            big_num,
            locale: NumericLocale::c(),
            colour: false,
            full: false,
            aggregation: Aggregation::Global,
            interval: false,
            cgroups: false,
            runs: 1,
            csv_summary: false,
            csv_with_json: None,
            unit_width: 4,
            interval_clear: false,
            errors: false,
            contract: &tmetric_engine::contract::PERF_6_12,
        }
    }
}

/// Wraps `text` in perf's threshold colours: red when crossed, green when not.
pub fn paint(text: &str, crossed: Option<bool>, colour: bool) -> String {
    match paint_codes(crossed, colour) {
        Some((on, off)) => format!("{on}{text}{off}"),
        None => text.to_string(),
    }
}

/// The escape codes [`paint`] puts around a value, `None` when it leaves it plain.
pub(crate) fn paint_codes(
    crossed: Option<bool>,
    colour: bool,
) -> Option<(&'static str, &'static str)> {
    match (colour, crossed) {
        (true, Some(true)) => Some(("\x1b[31m", "\x1b[m")),
        (true, Some(false)) => Some(("\x1b[32m", "\x1b[m")),
        _ => None,
    }
}

/// Writes `row` as one line of JSON; key order is the struct's field order.
pub fn json_line<T: serde::Serialize>(out: &mut dyn Write, row: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, row)?;
    out.write_all(b"\n")
}

/// Writes `text` to `out`, for callers that hold a `dyn Write`.
pub fn write_all(out: &mut dyn Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())
}

/// perf's interval prefix of a line: `%6lu.%09lu ` (default), `sec.nsec<sep>` (CSV),
/// `"interval" : sec.nsec, ` (JSON).
pub fn interval_prefix(layout: &Layout, at: Duration) -> String {
    use std::fmt::Write as _;
    let (s, ns) = (at.as_secs(), at.subsec_nanos());
    // Sized once: written at the start of every line of every interval.
    let mut out = String::with_capacity(32);
    let _ = match layout {
        Layout::Std => write!(out, "{s:>6}.{ns:09} "),
        Layout::Csv(sep) => write!(out, "{s}.{ns:09}{sep}"),
        Layout::Json => write!(out, "\"interval\" : {s}.{ns:09}, "),
    };
    out
}
