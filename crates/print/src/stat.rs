//! `stat`'s and `report`'s printer: lays out an evaluated sample (the engine's [`Evaluated`],
//! turned into perf's lines per aggregation unit by `engine::view`) in perf's layouts
//! ([`crate::Printer`]), or as the TMA tree (`--tree`, [`TreeView`]) or the `--topdown` patch series' legacy
//! TopDown columns; then the notes. It never evaluates.
//! It writes to any [`Write`]; notes that belong on standard error go through the caller's
//! warning function, so the caller decides how they are worded and whether they are quiet.

use std::io::{self, Write};
use std::time::Duration;

use tmetric_engine::view::{self, Partition, TreeNode};
use tmetric_engine::{self as engine, EvalInput, Evaluated, Plan};

use crate::num::{json_number, perf_number, plain_number};
use crate::{Config, Footer, Layout, Title, paint};

/// What `--tree` shows of the TMA hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TreeView {
    /// No tree: perf's layouts (or the legacy TopDown columns).
    #[default]
    Off,
    /// `--tree`: nodes whose threshold says "not a problem" are hidden.
    Pruned,
    /// `--tree --all`: every node; those below their threshold dimmed (or marked `(below)`).
    All,
}

impl TreeView {
    /// The view for `tree` (the tree is printed) and `all` (`--all`).
    pub fn new(tree: bool, all: bool) -> TreeView {
        match (tree, all) {
            (false, _) => TreeView::Off,
            (true, false) => TreeView::Pruned,
            (true, true) => TreeView::All,
        }
    }

    /// Whether the tree is printed.
    pub fn is_on(self) -> bool {
        self != TreeView::Off
    }
}

/// Says a note on standard error (the caller's wording, `--quiet` and comment prefix).
pub type Warn = Box<dyn FnMut(&str)>;

/// Where tmetric's explanations of the counts go (the notes on `<not supported>`, `<not
/// counted>` and `nan`, the error-bar block), so that the lines scripts read stay perf's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Explain {
    /// The default layout: a short block after the counts, where perf prints its own hints
    /// (the NMI watchdog's); with `-I`, after the last interval.
    Block,
    /// `#` comment lines among the CSV lines, which perf's readers skip (`-x` with `-v` or
    /// `--full-metrics`).
    Comments,
    /// JSON objects of their own with a `"note"` key (`-j --full-metrics`).
    Json,
    /// Standard error, as `tmetric:` lines: the counts go to a file, or `-j -v` on a terminal
    /// reader's stream.
    Stderr,
    /// Not said: CSV or JSON counts share standard error and neither `-v` nor
    /// `--full-metrics` asked for more than perf's lines.
    Quiet,
}

impl Explain {
    /// Where explanations go for `layout`: `counts_on_stderr` when the counts share standard
    /// error (no `-o FILE`), `verbose` for `-v`, `full` for `--full-metrics`.
    pub fn choose(layout: &Layout, counts_on_stderr: bool, verbose: bool, full: bool) -> Explain {
        match layout {
            Layout::Std => Explain::Block,
            _ if !counts_on_stderr => Explain::Stderr,
            Layout::Csv(_) if verbose || full => Explain::Comments,
            Layout::Json if full => Explain::Json,
            Layout::Json if verbose => Explain::Stderr,
            _ => Explain::Quiet,
        }
    }
}

/// Prints a plan's counts to `W` (see the module documentation).
pub struct StatPrinter<W: Write> {
    perf: crate::Printer<W>,
    warn: Warn,
    /// How counts split into printed units.
    pub split: Partition,
    /// The title's target and runs.
    pub title: Title,
    /// `--topdown` from the older events: each CPU's (package, core).
    pub legacy: Option<Vec<(u32, (u32, u32))>>,
    /// `--tree` and `--all`.
    pub tree: TreeView,
    /// `-r`: per spec, the relative standard deviation of its count over the runs, in %.
    pub spread: Vec<Option<f64>>,
    /// `-I`'s interval, perf's wall time for `CPUs utilized` in each interval.
    pub interval: Option<Duration>,
    /// Tree and legacy lines printed, for their headers.
    lines: usize,
    /// Notes already said for an interval (each is said once, at its first interval).
    said: Vec<String>,
    /// Interval notes the default layout's block says after the last interval.
    pending: Vec<String>,
    /// Where explanations go.
    pub explain: Explain,
    /// `-v`: every note, not only the default layout's short block.
    pub verbose: bool,
    /// `--pmu-sim`'s machine: perf's NMI-watchdog hint would send the user to this machine's
    /// `/proc/sys/kernel/nmi_watchdog`, but the watchdog that held a counter is the simulated
    /// machine's.
    pub simulated: Option<String>,
    /// `--metric-only` with events alone: those that got no column in the totals.
    left_out: Vec<String>,
}

impl<W: Write> StatPrinter<W> {
    /// A printer writing to `out` in `config`'s layout; notes for standard error go to `warn`.
    /// Explanations go where they would for counts on standard error without `-v` or
    /// `--full-metrics` ([`Explain::choose`]).
    pub fn new(out: W, config: Config, title: Title, warn: Warn) -> StatPrinter<W> {
        let explain = Explain::choose(&config.layout, true, false, false);
        StatPrinter {
            perf: crate::Printer::new(out, config),
            warn,
            split: Partition::Global,
            title,
            legacy: None,
            tree: TreeView::Off,
            spread: Vec::new(),
            interval: None,
            lines: 0,
            said: Vec::new(),
            pending: Vec::new(),
            explain,
            verbose: false,
            simulated: None,
            left_out: Vec::new(),
        }
    }

    /// The output.
    pub fn out(&mut self) -> &mut W {
        self.perf.out()
    }

    /// The layout options.
    pub fn config(&self) -> &Config {
        self.perf.config()
    }

    /// The output, to finish it.
    pub fn into_inner(self) -> W {
        self.perf.into_inner()
    }

    /// perf's `# started on` line at the top of an `-o` file.
    pub fn started_on(&mut self, ctime: &str) -> io::Result<()> {
        self.perf.started_on(ctime)
    }

    /// Whether a printed event was `<not counted>` although supported.
    pub fn saw_uncounted(&self) -> bool {
        self.perf.saw_uncounted()
    }

    /// One `-I` interval as `stat` and `report` print it: the counts, then the notes of what
    /// this interval could not count ([`StatPrinter::interval_notes`]), and with `--errors`
    /// the interval's bars where they cannot go beside its values.
    pub fn tick(
        &mut self,
        plan: &Plan,
        sample: &EvalInput<'_>,
        evaluated: &Evaluated,
        at: Duration,
    ) -> io::Result<()> {
        self.interval(plan, sample, evaluated, at)?;
        self.interval_notes(plan, evaluated, at)?;
        // `--errors` where the layout cannot put the interval's bars beside its values: the
        // totals' block, for this interval.
        if self.config().errors && !self.errors_inline() {
            self.bars_of(plan, evaluated, Some(at))?;
        }
        Ok(())
    }

    /// The end of a run as `stat` and `report` print it: the totals with perf's title and
    /// `footer` (unless `-I` without `--summary`: `None`), the notes, and with `bars` the block
    /// of error bars ([`StatPrinter::error_bars`]).
    pub fn totals(
        &mut self,
        plan: &Plan,
        sample: &EvalInput<'_>,
        evaluated: &Evaluated,
        footer: Option<&Footer>,
        bars: bool,
    ) -> io::Result<()> {
        if let Some(footer) = footer {
            self.summary(plan, sample, evaluated, footer)?;
        }
        let notes = self.notes_for(plan, evaluated);
        self.notes(&notes)?;
        if bars {
            self.error_bars(plan, evaluated)?;
        }
        Ok(())
    }

    /// Marks the output of a simulated PMU where perf's readers skip it (the default layout's
    /// title says it): a `#` comment before CSV lines, a JSON object with the
    /// `"simulated-pmu"` key before JSON lines.
    pub fn simulated_mark(&mut self) -> io::Result<()> {
        let Some(name) = self.simulated.clone() else { return Ok(()) };
        match self.config().layout.clone() {
            Layout::Std => Ok(()),
            Layout::Csv(_) => writeln!(
                self.out(),
                "# simulated PMU '{name}': every count comes from a simulator, not hardware"
            ),
            Layout::Json => {
                writeln!(self.out(), "{}", serde_json::json!({ "simulated-pmu": name }))
            }
        }
    }

    /// One `-I` interval: `sample` and its evaluation.
    pub fn interval(
        &mut self,
        plan: &Plan,
        sample: &EvalInput<'_>,
        evaluated: &Evaluated,
        at: Duration,
    ) -> io::Result<()> {
        let wall = self.interval.map_or(sample.seconds, |i| i.as_secs_f64()) * 1e9;
        self.block(plan, sample, evaluated, Some(at), wall)
    }

    /// The totals: the counts (with perf's title) and the footer. The metrics show their
    /// error bars beside their values when `evaluated` has them and the layout shows them
    /// there ([`StatPrinter::errors_inline`]).
    pub fn summary(
        &mut self,
        plan: &Plan,
        sample: &EvalInput<'_>,
        evaluated: &Evaluated,
        footer: &Footer,
    ) -> io::Result<()> {
        self.block(plan, sample, evaluated, None, footer.elapsed * 1e9)?;
        let mut footer = footer.clone();
        footer.nmi_hint = footer.nmi_hint && self.perf.saw_uncounted();
        let simulated = self.simulated.clone().filter(|_| footer.nmi_hint);
        if simulated.is_some() {
            footer.nmi_hint = false;
        }
        self.perf.footer(&footer)?;
        match simulated {
            Some(name) if self.config().layout == Layout::Std => writeln!(
                self.out(),
                "Some events weren't counted: the simulated `{name}` machine's NMI watchdog holds a counter \
                 (on, as x86 distributions ship it; this machine's /proc/sys/kernel/nmi_watchdog does not change it).",
            ),
            _ => Ok(()),
        }
    }

    fn block(
        &mut self,
        plan: &Plan,
        sample: &EvalInput<'_>,
        evaluated: &Evaluated,
        at: Option<Duration>,
        wall_ns: f64,
    ) -> io::Result<()> {
        if self.own_lines() {
            if at.is_none() && self.config().layout == Layout::Std {
                let title = self.title.clone();
                write!(self.out(), "\n Performance counter stats for {}:\n\n", title.quoted())?;
            }
            if self.legacy.is_some() {
                return self.legacy_topdown(plan, sample, at);
            }
            return self.tree_view(plan, &evaluated.total.results, at);
        }
        let units = view::units(
            plan,
            sample,
            evaluated,
            &self.split,
            wall_ns,
            &self.spread,
            self.errors_inline(),
        );
        if at.is_none() && self.config().metric_only && plan.roots().is_empty() {
            self.left_out = crate::Printer::<W>::metric_only_left_out(&units);
        }
        self.perf.counters(&self.title, at, &units)
    }

    /// Whether the counts print as tmetric's own lines (the legacy TopDown columns, which win
    /// when both are asked for, or the tree) rather than in perf's layouts.
    fn own_lines(&self) -> bool {
        self.legacy.is_some() || self.tree.is_on()
    }

    /// Whether `--errors` shows each metric's bar beside its value: in the default layout
    /// and JSON, not in CSV (whose fields are perf's), `--metric-only`, `--tree` or the
    /// legacy TopDown columns, which print the separate block ([`StatPrinter::error_bars`]).
    pub fn errors_inline(&self) -> bool {
        let config = self.config();
        config.errors
            && !config.metric_only
            && !self.own_lines()
            && matches!(config.layout, Layout::Std | Layout::Json)
    }

    /// The notes of an evaluated sample, worded: its notes (rows, metrics, the kernel's
    /// refusals, then the refused groups), with `--tree` the undecided thresholds, and each
    /// thread's own notes with `--per-thread`.
    pub fn notes_for(&self, plan: &Plan, evaluated: &Evaluated) -> Vec<String> {
        // Worded here, at the printer: the engine's notes are typed. The refused groups
        // come last, after every thread's notes.
        let (groups, rest): (Vec<&engine::Note>, Vec<&engine::Note>) =
            evaluated.notes.iter().partition(|n| matches!(n, engine::Note::Group(_)));
        let short = self.explain == Explain::Block && !self.verbose;
        let mut notes: Vec<String> = rest
            .iter()
            .filter(|n| !(short && implied(n, &evaluated.notes)))
            // How an interval's counts were estimated is `-v`'s detail, as the totals' is.
            .filter(|n| self.verbose || !scaled_by_time(n))
            .map(ToString::to_string)
            .collect();
        if self.tree.is_on() {
            notes.extend(undecided_note(plan, &evaluated.total.results));
        }
        if !self.left_out.is_empty() {
            let names: Vec<&str> = self.left_out.iter().map(String::as_str).collect();
            notes.push(format!(
                "--metric-only prints metrics only, and {} {} no metric column (perf's rates per second and `CPUs utilized` are not metric-only columns): select metrics with -M, or drop --metric-only to see the counts",
                tmetric_text::names_summary(&names),
                if names.len() == 1 { "has" } else { "have" }
            ));
        }
        if let Partition::Threads { threads, skip_zero: false } = &self.split {
            // Each thread's rows were evaluated over its own counts: a thread that never ran
            // (a sleeping main thread) has `<not counted>` rows and metrics read from 0, which
            // the totals do not show. Threads with the same note share it.
            let mut per_thread: Vec<(String, Vec<String>)> = Vec::new();
            for ((comm, tid), unit) in threads.iter().zip(&evaluated.units) {
                for note in unit.notes.iter().map(ToString::to_string) {
                    if notes.contains(&note) {
                        continue;
                    }
                    let label = format!("{comm}-{tid}");
                    match per_thread.iter_mut().find(|(n, _)| *n == note) {
                        Some((_, labels)) => labels.push(label),
                        None => per_thread.push((note, vec![label])),
                    }
                }
            }
            for (note, labels) in per_thread {
                let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
                notes.push(format!("{}: {note}", tmetric_text::names_summary(&labels)));
            }
        }
        notes.extend(groups.iter().map(ToString::to_string));
        notes
    }

    /// With `-I`: why this interval prints `<not counted>`, `nan` or a value computed around a
    /// missing input (a group that ran in other intervals but not in this one), each reason
    /// once, at the first interval it applies to, with the interval's time. The refused
    /// groups are said once, after the run.
    pub fn interval_notes(
        &mut self,
        plan: &Plan,
        evaluated: &Evaluated,
        at: Duration,
    ) -> io::Result<()> {
        let notes = self.notes_for(plan, evaluated);
        let groups: Vec<String> = evaluated
            .notes
            .iter()
            .filter(|n| matches!(n, engine::Note::Group(_)))
            .map(ToString::to_string)
            .collect();
        let fresh: Vec<String> =
            notes.into_iter().filter(|n| !self.said.contains(n) && !groups.contains(n)).collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let time = format!("{}.{:09}", at.as_secs(), at.subsec_nanos());
        let lines: Vec<String> = fresh.iter().map(|n| format!("{time}: {n}")).collect();
        self.said.extend(fresh);
        if self.explain == Explain::Block {
            // The default layout's intervals are perf's lines: the block follows the last.
            self.pending.extend(lines);
            return Ok(());
        }
        self.say(&lines)
    }

    /// Writes explanations where [`StatPrinter::explain`] puts them, except the default
    /// layout's block ([`StatPrinter::block_of`]).
    fn say(&mut self, lines: &[String]) -> io::Result<()> {
        self.say_in(self.explain, lines)
    }

    /// Writes `lines` as `explain` says.
    fn say_in(&mut self, explain: Explain, lines: &[String]) -> io::Result<()> {
        match explain {
            Explain::Comments => {
                let out = self.out();
                for line in lines {
                    writeln!(out, "# {line}")?;
                }
            }
            Explain::Json => {
                let out = self.out();
                for line in lines {
                    writeln!(out, "{}", serde_json::json!({ "note": line }))?;
                }
            }
            Explain::Stderr | Explain::Block => {
                // Standard error may also hold the counts: theirs first.
                self.out().flush()?;
                for line in lines {
                    (self.warn)(line);
                }
            }
            Explain::Quiet => {}
        }
        Ok(())
    }

    /// The default layout's block of `lines` after the counts: flush left as perf's hints,
    /// then an empty line.
    fn block_of(&mut self, lines: &[String]) -> io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let out = self.out();
        for line in lines {
            writeln!(out, "{line}")?;
        }
        writeln!(out)
    }

    /// The notes after the counts: in the default layout a short block below the footer (or
    /// the last interval), where perf prints its hints, with the intervals' notes; else as
    /// [`StatPrinter::explain`] says.
    pub fn notes(&mut self, notes: &[String]) -> io::Result<()> {
        // What an interval already said is not said again.
        let mut notes: Vec<String> =
            notes.iter().filter(|n| !self.said.contains(n)).cloned().collect();
        if self.explain != Explain::Block {
            return self.say(&notes);
        }
        let mut all = std::mem::take(&mut self.pending);
        all.append(&mut notes);
        self.block_of(&all)
    }

    /// The error bars (`--errors`, `-v`) of the metrics of `plan` in an evaluated sample's
    /// totals, after the counts: for a metric counted in parts of the time (`Bar::Sigma`)
    /// its value and `±` the half width in its unit; `± ?` with the reason when the run was
    /// too short to see how its counts vary; nothing for a metric of software counts only, or
    /// when the evaluation has no bars. A block in the default layout, else as
    /// notes are said.
    pub fn error_bars(&mut self, plan: &Plan, evaluated: &Evaluated) -> io::Result<()> {
        self.bars_of(plan, evaluated, None)
    }

    /// [`StatPrinter::error_bars`] of the interval that ended `at` (since the start), or of
    /// the totals (`None`). The default layout's intervals are perf's lines: an interval's
    /// block waits for the end, with the intervals' notes.
    fn bars_of(
        &mut self,
        plan: &Plan,
        evaluated: &Evaluated,
        at: Option<Duration>,
    ) -> io::Result<()> {
        use tmetric_engine::Bar;
        let Some(bars) = evaluated.total.bars.as_deref() else { return Ok(()) };
        let results = &evaluated.total.results;
        let mut lines = Vec::new();
        for (r, (result, bar)) in results.iter().zip(bars).enumerate() {
            let root = &plan.roots()[r];
            let desc = root.model.metric(root.metric);
            let name = view::metric_name(plan, r);
            let unit = root.model.str(desc.unit);
            let value = result.value * desc.scale;
            match bar {
                Bar::Exact => {}
                Bar::Unknown => lines.push(format!(
                    "{name:<40} {value:>12.3} {unit} ± ?: multiplexed, and the run was too short to see how its counts vary (two reads at least: 200 ms)"
                )),
                Bar::Sigma(_) => {
                    let half = bar.half_width().unwrap_or(0.0) * desc.scale;
                    // Which estimate the value and its bar are (what -v shows).
                    let mut how = if evaluated.total.multiplexed.get(r) == Some(&false) {
                        "counted the whole time: counting's own error".to_string()
                    } else if plan.rotating() && plan.anchored() {
                        "regressed over tmetric's turns".to_string()
                    } else if plan.rotating() {
                        "scaled over tmetric's turns".to_string()
                    } else {
                        "time-scaled over the kernel's rotation".to_string()
                    };
                    if evaluated.total.sampled.get(r) == Some(&true) {
                        how.push_str(", bar sampled from its inputs' spread (the value sits at a clamp)");
                    }
                    if let Some(Some(why)) = evaluated.total.impossible.get(r) {
                        how.push_str(&format!(", impossible: {why}"));
                    }
                    lines.push(format!("{name:<40} {value:>12.3} {unit} ± {half:.3}  ({how})"));
                }
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        let reads = if plan.rotating() {
            "reads at every turn of tmetric's rotation"
        } else {
            "reads every 100 ms"
        };
        let of = match at {
            Some(at) => {
                format!(" of the interval ending at {}.{:09} s", at.as_secs(), at.subsec_nanos())
            }
            None => String::new(),
        };
        let head = format!(
            "Error bars{of} ({} standard deviations of the value, from {reads}, with counting's own error: the overcount and PERF_METRICS' 8-bit rounding):",
            tmetric_engine::BAR_SIGMAS
        );
        let mut all = vec![head];
        all.extend(lines.into_iter().map(|l| format!("  {l}")));
        // Asked for (`--errors`): where CSV and JSON would say nothing, among their lines.
        let explain = match (self.explain, &self.config().layout) {
            (Explain::Block, _) if at.is_some() => {
                self.pending.extend(all);
                return Ok(());
            }
            (Explain::Block, _) => return self.block_of(&all),
            (Explain::Quiet, Layout::Csv(_)) => Explain::Comments,
            (Explain::Quiet, _) => Explain::Json,
            (explain, _) => explain,
        };
        self.say_in(explain, &all)
    }

    /// The time column of a tree or legacy line.
    fn interval_prefix(&self, at: Option<Duration>) -> String {
        match (&self.config().layout, at) {
            (Layout::Json, _) | (_, None) => String::new(),
            (layout, Some(at)) => crate::interval_prefix(layout, at),
        }
    }

    /// `--tree`: the TMA hierarchy from [`engine::view::tree`]; nodes whose threshold says
    /// "not a problem" are hidden (with `--all` dimmed, or marked `(below)` without colour),
    /// the bottleneck path marked `<==`. With `-x`, one CSV line per node (`level, value,
    /// unit, metric, state`); with `-j`, one JSON object (`metric`, `level`, `value`, `unit`,
    /// `threshold`, `bottleneck`); the state is the same in every layout.
    fn tree_view(
        &mut self,
        plan: &Plan,
        results: &[engine::RootResult],
        at: Option<Duration>,
    ) -> io::Result<()> {
        let show_all = self.tree == TreeView::All;
        let colour = self.config().colour;
        let layout = self.config().layout.clone();
        let prefix = self.interval_prefix(at);
        if let (Some(at), Layout::Std) = (at, &layout) {
            writeln!(self.out(), "# {:>6}.{:09}", at.as_secs(), at.subsec_nanos())?;
        }
        for TreeNode { root: i, depth, below, bottleneck, .. } in view::tree(plan, results) {
            if below && !show_all {
                continue;
            }
            let root = &plan.roots()[i];
            let metric = root.model.metric(root.metric);
            let value = results[i].scaled(root.model, root.metric);
            let unit = root.model.str(metric.unit);
            let name = view::metric_name(plan, i);
            // The same node states in every layout: on the bottleneck path, crossed, below
            // its threshold, or unknown (no threshold, or its events were not counted).
            let state = match (bottleneck, results[i].threshold) {
                (true, _) => "bottleneck",
                (false, Some(true)) => "crossed",
                (false, Some(false)) => "below",
                (false, None) => "",
            };
            let line = match &layout {
                Layout::Std => {
                    let number = perf_number(value, metric.has_scale_unit);
                    let mark = match (bottleneck, below && !colour) {
                        (true, _) => "  <==",
                        (false, true) => "  (below)",
                        (false, false) => "",
                    };
                    let line = format!(
                        "{}{:<w$} {number} {unit}{mark}",
                        "  ".repeat(depth),
                        name,
                        w = 44 - 2 * depth.min(10)
                    );
                    if below && colour { format!("\x1b[2m{line}\x1b[m") } else { line }
                }
                Layout::Csv(sep) => {
                    let number =
                        if value.is_finite() { plain_number(value) } else { String::new() };
                    format!("{prefix}{}{sep}{number}{sep}{unit}{sep}{name}{sep}{state}", depth + 1)
                }
                Layout::Json => {
                    let mut line = serde_json::json!({
                        "metric": name,
                        "level": depth + 1,
                        "value": json_number(value),
                        "unit": unit,
                        "threshold": results[i].threshold,
                        "bottleneck": bottleneck,
                    });
                    if let Some(at) = at {
                        line["interval"] = serde_json::json!(at.as_secs_f64());
                    }
                    line.to_string()
                }
            };
            writeln!(self.out(), "{line}")?;
        }
        Ok(())
    }

    /// `--topdown` from the kernel's older events: the `--topdown` patch series' level 1 per core.
    fn legacy_topdown(
        &mut self,
        plan: &Plan,
        sample: &EvalInput<'_>,
        at: Option<Duration>,
    ) -> io::Result<()> {
        let cores = self.legacy.clone().unwrap_or_default();
        let mut units: Vec<(u32, u32)> = cores.iter().map(|c| c.1).collect();
        units.sort_unstable();
        units.dedup();
        let spec_of = |name: &str| plan.specs().iter().position(|s| s.name == name);
        let header_due = self.lines.is_multiple_of(25);
        self.lines += 1;
        let prefix = self.interval_prefix(at);
        let colour = self.config().colour;
        let layout = self.config().layout.clone();
        let labels = ["retiring", "bad speculation", "frontend bound"];
        for (i, unit) in units.iter().enumerate() {
            let cpus: Vec<i32> =
                cores.iter().filter(|c| c.1 == *unit).map(|c| c.0 as i32).collect();
            let value = |name: &str| -> Option<f64> {
                let spec = spec_of(name)?;
                let per_cpu = sample.counts.events.get(spec)?.as_ref()?;
                let scale = plan.events()[spec].scale.unwrap_or(1.0);
                Some(
                    per_cpu
                        .iter()
                        .filter(|c| cpus.contains(&c.cpu))
                        .map(|c| c.raw.scaled().unwrap_or(0) as f64 * scale)
                        .sum(),
                )
            };
            let counts = engine::topdown::LegacyCounts {
                total_slots: value("topdown-total-slots").unwrap_or(0.0),
                slots_issued: value("topdown-slots-issued").unwrap_or(0.0),
                slots_retired: value("topdown-slots-retired").unwrap_or(0.0),
                fetch_bubbles: value("topdown-fetch-bubbles").unwrap_or(0.0),
                recovery_bubbles: value("topdown-recovery-bubbles"),
            };
            let l1 = engine::topdown::level1(&counts);
            let values = [
                Some(l1.retiring),
                Some(l1.bad_speculation),
                Some(l1.frontend_bound),
                l1.backend_bound,
            ];
            let names = [labels[0], labels[1], labels[2], l1.backend_label];
            let core = format!("S{}-C{}", unit.0, unit.1);
            let out = self.out();
            match &layout {
                Layout::Std => {
                    if header_due && i == 0 {
                        let cols: Vec<String> = names
                            .iter()
                            .map(|n| format!("{:>w$}", format!("% {n}"), w = legacy_width(n)))
                            .collect();
                        let time = if at.is_some() {
                            format!("{:<17}", "#           time")
                        } else {
                            String::new()
                        };
                        writeln!(out, "{time}{:<8}{:>5}  {}", "core", "cpus", cols.join("  "))?;
                    }
                    let cols: Vec<String> = values
                        .iter()
                        .zip(names)
                        .map(|(v, n)| {
                            let w = legacy_width(n);
                            v.map_or(format!("{:>w$}", ""), |v| {
                                let text = format!("{:>w$.1}", 100.0 * v);
                                let crossed = match engine::topdown::colour(n, v) {
                                    engine::topdown::Colour::Red => Some(true),
                                    engine::topdown::Colour::Green => Some(false),
                                    engine::topdown::Colour::Plain => None,
                                };
                                paint(&text, crossed, colour)
                            })
                        })
                        .collect();
                    writeln!(out, "{prefix}{core:<8}{:>5}  {}", cpus.len(), cols.join("  "))?;
                }
                Layout::Csv(sep) => {
                    if header_due && i == 0 {
                        let time = if at.is_some() { format!("time{sep}") } else { String::new() };
                        writeln!(out, "{time}core{sep}cpus{sep}{}", names.join(sep))?;
                    }
                    let cols: Vec<String> = values
                        .iter()
                        .map(|v| v.map_or(String::new(), |v| format!("{}", 100.0 * v)))
                        .collect();
                    writeln!(out, "{prefix}{core}{sep}{}{sep}{}", cpus.len(), cols.join(sep))?;
                }
                Layout::Json => {
                    let mut line = serde_json::json!({ "core": core, "cpus": cpus.len() });
                    for (n, v) in names.iter().zip(values) {
                        line[*n] =
                            v.map_or(serde_json::Value::Null, |v| serde_json::json!(100.0 * v));
                    }
                    if let Some(at) = at {
                        line["interval"] = serde_json::json!(at.as_secs_f64());
                    }
                    writeln!(out, "{line}")?;
                }
            }
        }
        Ok(())
    }
}

/// Whether `note` says only what the notes on rows already say: a metric is `nan` because
/// rows are `<not supported>`, and each of those rows has its own note. The default layout's
/// short block leaves it out (`-v` keeps it).
/// Whether `note` says an interval's counts were scaled by time (too few turns).
fn scaled_by_time(note: &engine::Note) -> bool {
    matches!(note, engine::Note::Rows { why: engine::RowWhy::ScaledByTime, .. })
}

fn implied(note: &engine::Note, notes: &[engine::Note]) -> bool {
    use engine::{MetricWhy, Note, RowWhy};
    let Note::Metric { why: MetricWhy::NanWithout(needs), .. } = note else { return false };
    needs.iter().all(|name| {
        notes.iter().any(|n| {
            matches!(n, Note::Rows { rows, why: RowWhy::Missing(_) | RowWhy::Refused(_) }
                if rows.contains(name))
        })
    })
}

/// With `--tree`: which nodes' thresholds could not be decided, which keeps `<==` from
/// going past their level (the bottleneck could be one of them).
fn undecided_note(plan: &Plan, results: &[engine::RootResult]) -> Option<String> {
    let names: Vec<String> = view::tree(plan, results)
        .into_iter()
        .filter(|n| n.undecided)
        .map(|n| view::metric_name(plan, n.root))
        .collect();
    if names.is_empty() {
        return None;
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Some(format!(
        "{}: threshold unknown (its events were not counted: --metric-no-threshold, or not in this interval), so `<==` marks no bottleneck at or below its level",
        tmetric_text::names_summary(&names)
    ))
}

/// A legacy topdown column: wide enough for `% <label>`.
fn legacy_width(label: &str) -> usize {
    (label.len() + 2).max(10)
}

/// The footer's figures for a run that took `elapsed` and left `rusage`.
pub fn footer(elapsed: Duration, rusage: Option<(Duration, Duration)>) -> Footer {
    Footer {
        elapsed: elapsed.as_secs_f64(),
        rusage: rusage.map(|(u, s)| (u.as_secs_f64(), s.as_secs_f64())),
        ..Footer::default()
    }
}
