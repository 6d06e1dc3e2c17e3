//! Output helpers shared by `list` and `eval`: perf's number layout, colour, JSON lines and
//! the name filter. Nothing here knows a subcommand's flags.

use std::io::{self, IsTerminal, Write};

use serde::Serialize;

/// `--color`: when to colour threshold states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when the output goes to a terminal (the flag's help says which stream).
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to write colour escapes to standard output (`eval`'s stream; `stat` and
    /// `report` decide for standard error or their `-o` file themselves).
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Auto => io::stdout().is_terminal(),
            ColorChoice::Always => true,
            ColorChoice::Never => false,
        }
    }
}

/// Wraps `text` in perf's threshold colours: red when crossed, green when not.
pub fn paint(text: &str, crossed: Option<bool>, colour: bool) -> String {
    match (colour, crossed) {
        (true, Some(true)) => format!("\x1b[31m{text}\x1b[m"),
        (true, Some(false)) => format!("\x1b[32m{text}\x1b[m"),
        _ => text.to_string(),
    }
}

/// A number in full precision, as a person would write it (`7`, `0.25`, the shortest text
/// that reads back as the same double); NaN and infinities as `nan`, `inf`, `-inf`. CSV and
/// JSON metric values and `eval` use it (perf prints `%.2f`, so 0.003 becomes `0.0`).
pub fn plain_number(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        value.to_string()
    }
}

/// A metric value as perf prints it: `%8.1f` with a ScaleUnit, `%8.2f` without; NaN and
/// infinities as C's printf spells them.
pub fn perf_number(value: f64, has_scale_unit: bool) -> String {
    if value.is_nan() {
        return format!("{:>8}", "nan");
    }
    if value.is_infinite() {
        return format!("{:>8}", if value > 0.0 { "inf" } else { "-inf" });
    }
    if has_scale_unit { format!("{value:8.1}") } else { format!("{value:8.2}") }
}

/// A finite number for JSON; `None` (printed `null`) for NaN and infinities, which JSON lacks.
pub fn json_number(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

/// Writes `row` as one line of JSON; key order is the struct's field order.
pub fn json_line<T: Serialize>(out: &mut dyn Write, row: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, row)?;
    out.write_all(b"\n")
}

/// The command line's name filter: a case-insensitive substring, or a glob over the whole
/// name when it contains `*` or `?`.
#[derive(Debug, Clone)]
pub struct NameFilter {
    pattern: Vec<char>,
    glob: bool,
}

impl NameFilter {
    /// The filter for `pattern`.
    pub fn new(pattern: &str) -> NameFilter {
        NameFilter {
            pattern: pattern.to_lowercase().chars().collect(),
            glob: pattern.contains(['*', '?']),
        }
    }

    /// Whether `name` passes.
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.to_lowercase().chars().collect();
        if self.glob {
            glob_match(&self.pattern, &name)
        } else {
            self.pattern.is_empty()
                || name.windows(self.pattern.len()).any(|w| w == self.pattern.as_slice())
        }
    }
}

/// `*` matches any run of characters, `?` one character; everything else itself.
fn glob_match(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently swallows up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// The name perf gives the core PMU of an architecture, for spelling `default_core` events.
pub fn core_pmu_name(arch: &str) -> &'static str {
    match arch {
        "s390" => "cpum_cf",
        "arm64" => "armv8_pmuv3",
        _ => "cpu",
    }
}

/// Whether `pmu` is a core PMU name: `default_core` or a name perf gives the core PMU.
pub use tmetric_engine::perflog::is_core_pmu;
