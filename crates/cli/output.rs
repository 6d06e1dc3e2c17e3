//! Output helpers shared by `list`, `eval` and `stat`'s tree: `--color`, the name filter, and
//! (from `tmetric_print`, where `eval`'s printers use them too) perf's number layout, colour
//! and JSON lines. Nothing here knows a subcommand's flags.

use std::io::{self, IsTerminal};

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

pub use tmetric_print::num::{json_number, perf_number, plain_number};
pub use tmetric_print::{json_line, paint};

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

/// Whether `pmu` is a core PMU name: `default_core` or a name perf gives the core PMU.
pub use tmetric_engine::perflog::is_core_pmu;
