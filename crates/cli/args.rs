//! Flags several subcommands share, each defined once and flattened where it is used: the
//! metric selection (`-M`, `--model`: [`MetricArgs`]), the switches of metric grouping
//! ([`GroupingArgs`]) and the output's layout and colour (`-x`, `-j`, `--color`:
//! [`OutputArgs`]), with the one mapping from those flags to a [`Layout`] and a colour choice.
//! A subcommand that words a flag differently changes its help with `mut_arg`, never its
//! meaning.

use std::io::IsTerminal;

use tmetric_print::Layout;

/// `-M` and `--model`: which metrics, and from which CPU model's tables.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MetricArgs {
    /// Metrics or metric groups, comma-separated (repeatable): tmetric's common ones (group
    /// `Software`) or those of the CPU model (see --model).
    #[arg(short = 'M', long = "metrics", value_name = "METRICS", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// The CPU model whose metrics -M may name (default: the one this machine's cpuid maps to).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
}

impl MetricArgs {
    /// `-M` naming nothing (`-M ''`, `-M ,`) is a slip, not a request for the default
    /// selection or an empty one: every subcommand refuses it alike.
    pub fn check(&self) -> anyhow::Result<()> {
        if !self.metrics.is_empty() && self.metrics.iter().all(|m| m.trim().is_empty()) {
            anyhow::bail!(
                "-M names no metric or group; give a comma-separated list such as `-M Software`"
            );
        }
        Ok(())
    }
}

/// perf's switches of how metrics are grouped (`--metric-no-group`, ...).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct GroupingArgs {
    /// Do not count the events of metric thresholds (they only colour values).
    #[arg(long)]
    pub metric_no_threshold: bool,
    /// Do not require a metric's events to be counted in one group.
    #[arg(long)]
    pub metric_no_group: bool,
    /// Do not share groups between metrics.
    #[arg(long)]
    pub metric_no_merge: bool,
}

/// `-x`, `-j` and `--color`: the layout of the counts and whether to colour them.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// CSV output with this field separator (perf's fields; `\t` for a tab).
    #[arg(short = 'x', long = "field-separator", value_name = "SEP")]
    pub separator: Option<String>,
    /// JSON lines output, perf's keys.
    #[arg(short = 'j', long = "json", visible_alias = "json-output")]
    pub json: bool,
    /// Colour metric values by their thresholds: auto (when the output goes to a terminal),
    /// always or never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: ColorChoice,
}

impl OutputArgs {
    /// The layout `-x` and `-j` ask for: with both, JSON (as perf 6.12, but for `csv_with_json`).
    pub fn layout(&self) -> Layout {
        match (self.sep(), self.json) {
            (_, true) => Layout::Json,
            (Some(sep), false) => Layout::Csv(sep),
            (None, false) => Layout::Std,
        }
    }

    /// `-x`'s separator given with `-j` (`tmetric_print::Config::csv_with_json`).
    pub fn csv_with_json(&self) -> Option<String> {
        self.sep().filter(|_| self.json)
    }

    /// `-x`'s separator: perf's `-x '\t'` (the two characters, as a shell passes them) is a
    /// tab; any other is used as given, an empty one too (perf accepts it and glues the fields).
    fn sep(&self) -> Option<String> {
        self.separator.as_ref().map(|s| if s == "\\t" { "\t".into() } else { s.clone() })
    }

    /// Whether to colour: `--color`, where `auto` colours when the output is a terminal
    /// (`to_terminal`); only the default layout is ever coloured (perf never colours CSV or
    /// JSON).
    pub fn colour(&self, to_terminal: bool) -> bool {
        self.color.decide(to_terminal) && self.layout() == Layout::Std
    }
}

/// Whether counts that go to standard error unless `-o` names a file (`stat`, `record`,
/// `report`) reach a terminal: what `--color auto` and `--topdown`'s tree look at.
pub fn counts_to_terminal(output: Option<&std::path::Path>) -> bool {
    output.is_none() && std::io::stderr().is_terminal()
}

/// Whether `eval`'s results, printed on standard output (it has no `-o`), reach a terminal.
pub fn eval_results_to_terminal() -> bool {
    std::io::stdout().is_terminal()
}

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
    /// Whether to colour an output that is a terminal or not.
    pub fn decide(self, to_terminal: bool) -> bool {
        match self {
            ColorChoice::Auto => to_terminal,
            ColorChoice::Always => true,
            ColorChoice::Never => false,
        }
    }
}
