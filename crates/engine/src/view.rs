//! What `perf stat` prints for one aggregation unit of a sample, as data: per shown row, the
//! count as perf prints it and the metric cells perf prints beside it (the JSON metrics hosted
//! on the row, and perf 6.12's built-in metrics: `CPUs utilized`, `GHz`, `insn per cycle`,
//! `stalled cycles per insn`, the idle and miss ratios, `/sec`), each with perf's number
//! format, label and colour. Printers (`tmetric-print`) only lay these out. The built-ins are
//! `shadow.rs` (perf's stat-shadow.c), JSON metric cells `metric.rs`, the TMA tree and its
//! bottleneck path `tree.rs`.

use crate::plan::{Plan, PlanRow, Source};
use crate::plan_eval::{EvalInput, Evaluated, RootResult, RowCount, UnitEval, row_count};
use crate::uncertainty::Bar;

mod metric;
mod shadow;
mod tree;

use metric::cell_error;
pub use metric::{has_hybrid_twins, metric_cell, metric_name};
use shadow::{Peer, builtin_cells, peers};
pub use shadow::{StatType, convert_unit, stat_type};
pub use tree::{TmaNode, TreeNode, bottleneck, bottleneck_of, tma_bottleneck, tma_tree, tree};

pub use tmetric_perfstat::PrintedCount;

/// perf's colours for metric values (`util/color.h`). perf passes "no colour" two ways: a
/// NULL colour and `PERF_COLOR_NORMAL` (an empty one); they print alike, but
/// `--metric-only` widens a column for any colour that is not NULL, so cells keep the
/// difference as `Option<Colour>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// `PERF_COLOR_NORMAL`: no escape.
    Normal,
    /// A JSON metric's threshold is crossed, or a built-in ratio is high.
    Red,
    /// A JSON metric's threshold is not crossed.
    Green,
    /// A built-in ratio is rather high.
    Magenta,
    /// A built-in ratio is somewhat high.
    Yellow,
}

impl Colour {
    /// The escape sequence that starts it (empty for [`Colour::Normal`]).
    pub fn escape(self) -> &'static str {
        match self {
            Colour::Normal => "",
            Colour::Red => "\x1b[31m",
            Colour::Green => "\x1b[32m",
            Colour::Magenta => "\x1b[35m",
            Colour::Yellow => "\x1b[33m",
        }
    }
}

/// A printf number format perf prints a metric value with: `%<width>.<decimals>f` followed
/// by `suffix` (`"%8.3f"`, `"%7.2f "`, `"%7.2f%%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fmt {
    /// Minimum width.
    pub width: usize,
    /// Digits after the decimal mark.
    pub decimals: usize,
    /// Text after the number: `""`, `" "` or `"%"`.
    pub suffix: &'static str,
}

impl Fmt {
    /// `%8.3f`: `CPUs utilized`, `GHz`, `/sec`.
    pub const RATE: Fmt = Fmt { width: 8, decimals: 3, suffix: "" };
    /// `%7.2f `: `insn per cycle`, `stalled cycles per insn`.
    pub const PER_INSN: Fmt = Fmt { width: 7, decimals: 2, suffix: " " };
    /// `%7.2f%%`: the idle and miss ratios.
    pub const PERCENT: Fmt = Fmt { width: 7, decimals: 2, suffix: "%" };
    /// `%8.1f`: a JSON metric with a `ScaleUnit`.
    pub const SCALED: Fmt = Fmt { width: 8, decimals: 1, suffix: "" };
    /// `%8.2f`: a JSON metric without one.
    pub const PLAIN: Fmt = Fmt { width: 8, decimals: 2, suffix: "" };
}

/// Where a cell's value comes from, beyond what perf prints: for `--full-metrics` layouts
/// (the metric's name and unit as separate fields, the value at full precision) and notes.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSource {
    /// The metric's name: the JSON metric's, or tmetric's name of a built-in
    /// (`insn_per_cycle`, `cpus_utilized`, `per_sec`).
    pub name: String,
    /// Its unit alone (`%`, `GHz`, `insn per cycle`, `K/sec`).
    pub unit: String,
    /// The plan root of a JSON metric.
    pub root: Option<usize>,
}

/// One metric value perf prints beside a count.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The value in the printed unit (0 when [`Cell::fmt`] is `None`).
    pub value: f64,
    /// The format; `None`: perf prints no value (a zero denominator, a failed expression).
    pub fmt: Option<Fmt>,
    /// The text after the value (`CPUs utilized`, `%  tma_retiring`); `None` is perf's NULL
    /// unit: no metric applies to the line at all.
    pub label: Option<String>,
    /// The colour perf would paint the value (`None`: perf's NULL colour).
    pub colour: Option<Colour>,
    /// What the value is.
    pub source: Option<CellSource>,
    /// A JSON metric's error bar, when asked for (`--errors`): half its width in the printed
    /// unit; NaN when the metric was multiplexed and the reads do not show how far it may be
    /// off ([`Bar::Unknown`]); `None` when its inputs ran the whole time, or for built-ins.
    pub error: Option<f64>,
    /// With an error bar asked for: the value cannot be true ([`Plan::impossible`]), and a
    /// flag goes beside it.
    pub impossible: bool,
}

impl Cell {
    /// perf's blank metric: no value, no label (`print_metric(..., NULL, NULL, NULL, 0)`).
    pub fn none() -> Cell {
        Cell {
            value: 0.0,
            fmt: None,
            label: None,
            colour: None,
            source: None,
            error: None,
            impossible: false,
        }
    }

    /// A label without a value (a built-in whose denominator is 0).
    fn blank(label: &str, source: Option<CellSource>) -> Cell {
        Cell {
            value: 0.0,
            fmt: None,
            label: Some(label.into()),
            colour: None,
            source,
            error: None,
            impossible: false,
        }
    }
}

/// One printed event line of one aggregation unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The plan row.
    pub row: usize,
    /// Which uncore box of the row the line shows under `-A`/`--no-merge` ([`Plan::per_box`]);
    /// 0 for every other line. `(row, part)` tells an event's lines apart across units.
    pub part: usize,
    /// The count.
    pub count: PrintedCount,
    /// Decimals of the count: 2 for events with a fractional scale (`msec`), else 0.
    pub decimals: usize,
    /// The unit (`msec`, a sysfs `.unit`, or empty).
    pub unit: String,
    /// The event name.
    pub name: String,
    /// ns on a counter.
    pub running: u64,
    /// ns enabled.
    pub enabled: u64,
    /// `-r`: the relative standard deviation of the mean of the count over the runs, in %.
    pub noise: Option<f64>,
    /// The cgroup counted (`-G`, `--for-each-cgroup`).
    pub cgroup: Option<String>,
    /// perf's `Default` metric groups: instead of the count, unit and event, each group's
    /// name (`TopdownL1`; `None` where an earlier line of the same group printed it) and its
    /// metrics. Empty for every other line.
    pub default_groups: Vec<DefaultGroup>,
    /// The metrics printed beside it: the first on the line, each later one on a line of its
    /// own (perf's `new_line`). Never empty: a line without metrics has [`Cell::none`].
    pub cells: Vec<Cell>,
}

/// One `Default` metric group printed on a line (perf's `metricgroup` header).
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultGroup {
    /// The header (`TopdownL1`, `TopdownL1 (cpu_core)` on hybrid machines), or `None`.
    pub name: Option<String>,
    /// Its metrics.
    pub cells: Vec<Cell>,
}

/// One aggregation unit's identity, as perf labels it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitId {
    /// The global total.
    Global,
    /// A CPU (`CPU3`).
    Cpu(i32),
    /// A label perf prints with the number of CPUs summed: `S0-D0-C1`, `S0-D0-L3-ID0`,
    /// `S0-D0-CLS0`, `S0-D0`, `S0`, `N0`.
    Label(String),
    /// A thread: `comm-tid`.
    Thread {
        /// Its `comm`.
        comm: String,
        /// Its id.
        tid: i32,
    },
}

/// One aggregation unit's lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// Which unit.
    pub id: UnitId,
    /// How many CPUs it sums (perf's `aggr_nr`).
    pub cpus: usize,
    /// Its lines, in row order.
    pub lines: Vec<Line>,
}

/// What the view needs beyond the plan and the counts.
#[derive(Debug, Clone, Copy)]
pub struct ViewContext<'a> {
    /// perf's wall time for `CPUs utilized`, in ns: the elapsed time (the mean over `-r`
    /// runs), or the nominal interval with `-I`.
    pub wall_ns: f64,
    /// Each root's evaluation over this unit's counts.
    pub results: &'a [RootResult],
    /// Under `-A`/`--no-merge`: each root's evaluation on the line of its host's box `k`
    /// (at `k - 1`), for rows with several uncore boxes ([`Plan::evaluate_on_box`]).
    pub box_results: &'a [Vec<RootResult>],
    /// Per spec, `-r`'s relative spread of the count in %, when repeated.
    pub noise: &'a [Option<f64>],
    /// Label metrics with their PMU where two core types have one of the same name
    /// ([`has_hybrid_twins`]).
    pub hybrid: bool,
    /// Each root's error bar over this unit's reads, when asked for.
    pub bars: Option<&'a [Bar]>,
    /// Per root: why its value cannot be true, if it cannot ([`UnitEval::impossible`]).
    pub impossible: &'a [Option<String>],
}

/// How a sample splits into perf's aggregation units.
#[derive(Debug, Clone, PartialEq)]
pub enum Partition {
    /// One total over everything counted.
    Global,
    /// `-A` and `--per-*`: each unit with its CPUs.
    Cpus(Vec<(UnitId, Vec<i32>)>),
    /// `--per-thread`: each thread (comm, tid); rows that count 0 are left out when
    /// `skip_zero` (perf does so system-wide).
    Threads {
        /// The threads.
        threads: Vec<(String, i32)>,
        /// Leave out lines that counted 0.
        skip_zero: bool,
    },
}

/// The units perf prints for `sample` split by `split`, from its evaluation (each unit's
/// counts evaluated apart, as perf's aggregation does), with each JSON metric's error bar
/// ([`Cell::error`]) when `errors` and the evaluation has bars. `wall_ns` and `noise` are
/// [`ViewContext`]'s.
pub fn units(
    plan: &Plan,
    sample: &EvalInput<'_>,
    evaluated: &Evaluated,
    split: &Partition,
    wall_ns: f64,
    noise: &[Option<f64>],
    errors: bool,
) -> Vec<Unit> {
    let hybrid = has_hybrid_twins(plan);
    let one = |unit: &UnitEval, skip_zero, cpus| {
        let ctx = ViewContext {
            wall_ns,
            results: &unit.results,
            box_results: &unit.box_results,
            noise,
            hybrid,
            bars: unit.bars.as_deref().filter(|_| errors),
            impossible: &unit.impossible,
        };
        lines(plan, &unit.sample(sample), &ctx, skip_zero, cpus)
    };
    let printed = evaluated.printed();
    match split {
        Partition::Global => {
            vec![Unit { id: UnitId::Global, cpus: 0, lines: one(&evaluated.total, false, None) }]
        }
        Partition::Cpus(units) => units
            .iter()
            .zip(printed)
            .map(|((id, cpus), unit)| Unit {
                id: id.clone(),
                cpus: cpus.len(),
                lines: one(unit, false, Some(cpus.as_slice())),
            })
            .collect(),
        Partition::Threads { threads, skip_zero } => threads
            .iter()
            .zip(printed)
            .map(|((comm, tid), unit)| Unit {
                id: UnitId::Thread { comm: comm.clone(), tid: *tid },
                cpus: 1,
                lines: one(unit, *skip_zero, None),
            })
            .collect(),
    }
}

/// The lines perf prints for `sample` (one aggregation unit's counts), in row order. Rows
/// that are not shown are left out; so are tool rows that count 0 and, when `skip_zero`,
/// rows that count 0 (perf's `--per-thread -a`), and rows whose events cannot run on any of
/// `cpus` (a hybrid PMU on the other core type), when given.
pub fn lines(
    plan: &Plan,
    sample: &EvalInput<'_>,
    ctx: &ViewContext<'_>,
    skip_zero: bool,
    cpus: Option<&[i32]>,
) -> Vec<Line> {
    let peers = peers(plan, sample);
    let mut out = Vec::new();
    // `Default` group headers already printed (group name and PMU).
    let mut headers: Vec<(String, String)> = Vec::new();
    for (r, row) in plan.rows.iter().enumerate() {
        if !row.show {
            continue;
        }
        if let (Some(cpus), Source::Counter(spec)) = (cpus, &row.source)
            && let Some(own) = &plan.events[*spec].cpus
            && !cpus.iter().any(|c| own.contains(&(*c as u32)))
        {
            continue;
        }
        if plan.opened_nowhere(row, sample) {
            continue;
        }
        let RowCount { count, running, enabled } = row_count(plan, row, sample);
        // perf's `should_skip_zero_counter` looks at the value alone: an uncounted line
        // reads 0 too.
        let zero = !matches!(count, PrintedCount::Value(v) if v != 0.0);
        // perf 6.12 leaves out every tool line that reads 0; perf 7.x only those of units
        // without CPU 0, the one CPU it reads its tool PMU on (`should_skip_zero_counter`).
        let off_cpu0 = cpus.is_some_and(|c| !c.contains(&0));
        let tool_zero = match row.source {
            Source::Tool(_) => !plan.contract.tool_pmu || off_cpu0,
            _ => false,
        };
        if zero && (skip_zero || tool_zero) {
            continue;
        }
        if off_cpu0 && matches!(row.source, Source::Tool(tmetric_runtime::ToolEvent::Fact(_))) {
            continue;
        }
        let noise = match row.source {
            Source::Counter(spec) => ctx.noise.get(spec).copied().flatten(),
            _ => None,
        };
        let counted = matches!(count, PrintedCount::Value(_));
        if count == PrintedCount::NotSupported && plan.default_events && !row.is_cycles() {
            // perf 7.x's default events are all skippable but `cycles`: one that could not
            // be opened is not printed (`should_skip_zero_counter`).
            continue;
        }
        let mut default_groups = Vec::new();
        // A row hosts either `Default` metrics printed under their group's name or metrics
        // printed beside its count ([`Plan::show_as_default_view`] gives the former rows of
        // their own).
        let headed: Vec<usize> =
            row.roots.iter().copied().filter(|&r| plan.prints_under_group(r)).collect();
        if !headed.is_empty() {
            // perf skips a `Default` group's event that did not run.
            if !counted {
                continue;
            }
            default_groups = default_group_cells(plan, &headed, ctx, &mut headers);
        }
        let line_cells =
            if (counted || plan.contract.metrics_on_uncounted_lines) && default_groups.is_empty() {
                cells(plan, r, row, &peers, ctx)
            } else {
                vec![Cell::none()]
            };
        if plan.per_box && row.boxes.len() > 1 {
            // perf's `-A`/`--no-merge`: each box is an event of its own, printed under its own
            // name, with the metrics computed from that box's counts.
            for (k, b) in row.boxes.iter().enumerate() {
                let one =
                    PlanRow { source: Source::Counter(b.spec), boxes: Vec::new(), ..row.clone() };
                let RowCount { count, running, enabled } = row_count(plan, &one, sample);
                if matches!(count, PrintedCount::Value(v) if v == 0.0) && skip_zero {
                    continue;
                }
                let cells = if k == 0 {
                    line_cells.clone()
                } else if matches!(count, PrintedCount::Value(_)) {
                    let results = ctx.box_results.get(k - 1).map_or(ctx.results, |r| r.as_slice());
                    let ctx = ViewContext { results, bars: None, ..*ctx };
                    cells(plan, r, row, &peers, &ctx)
                } else {
                    vec![Cell::none()]
                };
                out.push(Line {
                    row: r,
                    part: k,
                    count,
                    decimals: if row.scale.fract() != 0.0 { 2 } else { 0 },
                    unit: row.unit.clone(),
                    name: b.name.clone(),
                    running,
                    enabled,
                    noise: ctx.noise.get(b.spec).copied().flatten(),
                    cgroup: row.cgroup.clone(),
                    default_groups: Vec::new(),
                    cells,
                });
            }
            continue;
        }
        out.push(Line {
            row: r,
            part: 0,
            count,
            decimals: if row.scale.fract() != 0.0 { 2 } else { 0 },
            unit: row.unit.clone(),
            name: row.name.clone(),
            running,
            enabled,
            noise,
            cgroup: row.cgroup.clone(),
            default_groups,
            cells: line_cells,
        });
    }
    out
}

/// The `Default` groups of a row's metrics `roots`, in the order they are hosted; a group's
/// name is printed on the first line that has its metrics (per PMU on hybrid machines, where
/// it reads `TopdownL1 (cpu_core)`).
fn default_group_cells(
    plan: &Plan,
    roots: &[usize],
    ctx: &ViewContext<'_>,
    headers: &mut Vec<(String, String)>,
) -> Vec<DefaultGroup> {
    let hybrid = plan.roots.iter().any(|r| {
        let m = r.model.metric(r.metric);
        r.model.str(m.pmu) == "cpu_atom"
    });
    let mut groups: Vec<(String, String, Vec<Cell>)> = Vec::new();
    for &root in roots {
        let r = &plan.roots[root];
        let m = r.model.metric(r.metric);
        let name = r.model.str(m.default_group).to_string();
        let pmu = r.model.str(m.pmu).to_string();
        let mut cell = metric_cell(plan, root, &ctx.results[root], ctx.hybrid);
        cell.error = cell_error(plan, root, ctx);
        cell.impossible =
            ctx.bars.is_some() && ctx.impossible.get(root).is_some_and(Option::is_some);
        match groups.iter_mut().find(|g| g.0 == name && g.1 == pmu) {
            Some(g) => g.2.push(cell),
            None => groups.push((name, pmu, vec![cell])),
        }
    }
    groups
        .into_iter()
        .map(|(name, pmu, cells)| {
            let key = (name.clone(), pmu.clone());
            let shown = if headers.contains(&key) {
                None
            } else {
                headers.push(key);
                Some(if hybrid && !pmu.is_empty() { format!("{name} ({pmu})") } else { name })
            };
            DefaultGroup { name: shown, cells }
        })
        .collect()
}

/// The metric cells of row `r`: perf's built-in first, then the JSON metrics hosted on it.
fn cells(
    plan: &Plan,
    r: usize,
    row: &PlanRow,
    peers: &[Peer<'_>],
    ctx: &ViewContext<'_>,
) -> Vec<Cell> {
    let mut out = Vec::new();
    if plan.contract.builtin_metrics
        && let Some(me) = peers.iter().find(|p| p.row == r)
    {
        builtin_cells(me, peers, ctx, &mut out);
    }
    let builtins = out.len();
    for &root in &row.roots {
        if let Some(twin) = builtin_twin(plan, root, &mut out[..builtins]) {
            // One value per metric: the common metric perf computes itself on this row
            // (`cpus_utilized`, `page_faults_per_sec`, `tsc_rate`) prints once, perf's
            // built-in value and label followed by the metric's name, as -M metrics are.
            let name = metric_name(plan, root);
            twin.label = twin.label.take().map(|label| format!("{label}  {name}"));
            if let Some(source) = twin.source.as_mut() {
                source.name = name;
                source.root = Some(root);
            }
            twin.error = cell_error(plan, root, ctx);
            continue;
        }
        let mut cell = metric_cell(plan, root, &ctx.results[root], ctx.hybrid);
        cell.error = cell_error(plan, root, ctx);
        cell.impossible =
            ctx.bars.is_some() && ctx.impossible.get(root).is_some_and(Option::is_some);
        out.push(cell);
    }
    if out.is_empty() {
        out.push(Cell::none());
    }
    out
}

/// The built-in cell among `builtins` that prints the same quantity as `root`, a common
/// metric: `CPUs utilized` for `cpus_utilized`, a row's rate per second for its
/// `*_per_sec` metric or `tsc_rate`.
fn builtin_twin<'c>(plan: &Plan, root: usize, builtins: &'c mut [Cell]) -> Option<&'c mut Cell> {
    let r = &plan.roots[root];
    if !std::ptr::eq(r.model, tmetric_catalog::common()) {
        return None;
    }
    let name = metric_name(plan, root);
    builtins.iter_mut().find(|cell| {
        cell.source.as_ref().is_some_and(|source| {
            source.root.is_none()
                && match source.name.as_str() {
                    "cpus_utilized" => name == "cpus_utilized",
                    "per_sec" => name.ends_with("_per_sec") || name == "tsc_rate",
                    _ => false,
                }
        })
    })
}
