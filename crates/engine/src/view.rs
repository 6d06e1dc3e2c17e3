//! What `perf stat` prints for one aggregation unit of a sample, as data: per shown row, the
//! count as perf prints it and the metric cells perf prints beside it (the JSON metrics hosted
//! on the row, and perf 6.12's built-in metrics: `CPUs utilized`, `GHz`, `insn per cycle`,
//! `stalled cycles per insn`, the idle and miss ratios, `/sec`), each with perf's number
//! format, label and colour. Printers (`tmetric-print`) only lay these out.
//!
//! The built-ins follow perf's `tools/perf/util/stat-shadow.c` (6.12): an event's kind comes
//! from its attribute (`evsel__stat_type`), and the other input of a ratio is looked for
//! among the events of the same group when the event is in a group of several, else among
//! all events, with the same exclude modifiers and the same PMU (clocks excepted:
//! `find_stat`).

use crate::eval::{EvalInput, Evaluators, RootResult, Shown, shown};
use crate::plan::{Plan, PlanRow, Source};
use crate::uncertainty::Bar;
use tmetric_runtime::Snapshot;
use tmetric_runtime::sys::{TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE};

/// A count as printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// The event could not be opened: `<not supported>`.
    NotSupported,
    /// It never ran on a counter: `<not counted>`.
    NotCounted,
    /// The count, scaled to the printed unit.
    Value(f64),
}

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
}

impl Cell {
    /// perf's blank metric: no value, no label (`print_metric(..., NULL, NULL, NULL, 0)`).
    pub fn none() -> Cell {
        Cell { value: 0.0, fmt: None, label: None, colour: None, source: None, error: None }
    }

    /// A label without a value (a built-in whose denominator is 0).
    fn blank(label: &str, source: Option<CellSource>) -> Cell {
        Cell { value: 0.0, fmt: None, label: Some(label.into()), colour: None, source, error: None }
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
    pub count: Count,
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

/// perf's kinds of events for its built-in metrics (`enum stat_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatType {
    /// `cpu-clock`, `task-clock`.
    Nsecs,
    /// `cycles`.
    Cycles,
    /// `instructions`.
    Instructions,
    /// `stalled-cycles-frontend`.
    StalledFront,
    /// `stalled-cycles-backend`.
    StalledBack,
    /// `branches`.
    Branches,
    /// `branch-misses`.
    BranchMisses,
    /// `cache-references`.
    CacheRefs,
    /// `cache-misses`.
    CacheMisses,
    /// `L1-dcache-loads`.
    L1Dcache,
    /// `L1-icache-loads`.
    L1Icache,
    /// `LLC-loads`.
    LlCache,
    /// `dTLB-loads`.
    DtlbCache,
    /// `iTLB-loads`.
    ItlbCache,
    /// `L1-dcache-load-misses`.
    L1dMiss,
    /// `L1-icache-load-misses`.
    L1iMiss,
    /// `LLC-load-misses`.
    LlMiss,
    /// `dTLB-load-misses`.
    DtlbMiss,
    /// `iTLB-load-misses`.
    ItlbMiss,
    /// Anything else: `/sec` when a clock is counted.
    None,
}

/// The kind of an event with this type and config (`evsel__stat_type`); the PMU type that
/// hybrid machines put in the high 32 bits of legacy events does not matter.
pub fn stat_type(type_: u32, config: u64) -> StatType {
    let low = config & 0xffff_ffff;
    const MISS: u64 = 1 << 16;
    match type_ {
        TYPE_SOFTWARE if config <= 1 => StatType::Nsecs,
        TYPE_HARDWARE => match low {
            0 => StatType::Cycles,
            1 => StatType::Instructions,
            7 => StatType::StalledFront,
            8 => StatType::StalledBack,
            4 => StatType::Branches,
            5 => StatType::BranchMisses,
            2 => StatType::CacheRefs,
            3 => StatType::CacheMisses,
            _ => StatType::None,
        },
        TYPE_HW_CACHE => match low {
            0 => StatType::L1Dcache,
            1 => StatType::L1Icache,
            2 => StatType::LlCache,
            3 => StatType::DtlbCache,
            4 => StatType::ItlbCache,
            x if x == MISS => StatType::L1dMiss,
            x if x == MISS | 1 => StatType::L1iMiss,
            x if x == MISS | 2 => StatType::LlMiss,
            x if x == MISS | 3 => StatType::DtlbMiss,
            x if x == MISS | 4 => StatType::ItlbMiss,
            _ => StatType::None,
        },
        _ => StatType::None,
    }
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
}

/// One counter row's facts for the built-ins.
#[derive(Debug, Clone, Copy)]
struct Peer<'a> {
    row: usize,
    stat: StatType,
    /// Exclude bits (perf's `evsel_context`).
    context: u8,
    /// PMU identity: type, and the extended type of legacy hybrid events.
    pmu: (u32, u64),
    /// The group (index into `plan.groups`) when it has several members.
    group: Option<usize>,
    /// Its cgroup: perf pairs events of one cgroup only.
    cgroup: Option<&'a str>,
    /// The scaled count (multiplexing and the event's scale applied; 0 when not counted).
    value: f64,
    /// The raw (multiplex-scaled) count, for clocks.
    raw: f64,
}

/// How a sample splits into perf's aggregation units.
#[derive(Debug, Clone, PartialEq)]
pub enum Split {
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

/// The units perf prints for `sample` split by `split`: each unit's counts evaluated apart,
/// as perf's aggregation does. `wall_ns` and `noise` are [`ViewContext`]'s.
pub fn units(
    plan: &Plan,
    evaluators: &mut Evaluators,
    sample: &EvalInput<'_>,
    split: &Split,
    wall_ns: f64,
    noise: &[Option<f64>],
) -> Vec<Unit> {
    units_with_errors(plan, evaluators, sample, split, wall_ns, noise, None)
}

/// [`units`], with each JSON metric's error bar ([`Cell::error`]) from `reads`, the counters
/// read during the run ([`Plan::uncertainties`]): each unit's from its own CPUs' or thread's
/// readings.
pub fn units_with_errors(
    plan: &Plan,
    evaluators: &mut Evaluators,
    sample: &EvalInput<'_>,
    split: &Split,
    wall_ns: f64,
    noise: &[Option<f64>],
    reads: Option<&[Snapshot]>,
) -> Vec<Unit> {
    let hybrid = has_hybrid_twins(plan);
    let one = |evaluators: &mut Evaluators,
               sample: &EvalInput<'_>,
               skip_zero,
               part: Option<&dyn Fn(&Snapshot) -> Snapshot>,
               cpus| {
        let bars: Option<Vec<Bar>> = reads.map(|reads| {
            let reads: Vec<Snapshot> = match part {
                Some(part) => reads.iter().map(part).collect(),
                None => reads.to_vec(),
            };
            plan.uncertainties(evaluators, &reads, sample.seconds)
        });
        let results = plan.evaluate(evaluators, sample);
        let box_results: Vec<Vec<RootResult>> = if plan.per_box {
            (1..plan.max_boxes()).map(|k| plan.evaluate_on_box(evaluators, sample, k)).collect()
        } else {
            Vec::new()
        };
        let ctx = ViewContext {
            wall_ns,
            results: &results,
            box_results: &box_results,
            noise,
            hybrid,
            bars: bars.as_deref(),
        };
        lines(plan, sample, &ctx, skip_zero, cpus)
    };
    match split {
        Split::Global => {
            let lines = one(evaluators, sample, false, None, None);
            vec![Unit { id: UnitId::Global, cpus: 0, lines }]
        }
        Split::Cpus(units) => units
            .iter()
            .map(|(id, cpus)| {
                let counts = sample.counts.on_cpus(cpus);
                let part = EvalInput { counts: &counts, ..*sample };
                let on = |s: &Snapshot| s.on_cpus(cpus);
                let lines = one(evaluators, &part, false, Some(&on), Some(cpus.as_slice()));
                Unit { id: id.clone(), cpus: cpus.len(), lines }
            })
            .collect(),
        Split::Threads { threads, skip_zero } => threads
            .iter()
            .map(|(comm, tid)| {
                let counts = sample.counts.of_thread(*tid);
                let part = EvalInput { counts: &counts, ..*sample };
                let of = |s: &Snapshot| s.of_thread(*tid);
                let lines = one(evaluators, &part, *skip_zero, Some(&of), None);
                Unit { id: UnitId::Thread { comm: comm.clone(), tid: *tid }, cpus: 1, lines }
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
        let state = shown(plan, row, sample);
        let (count, running, enabled) = match state {
            Shown::NotSupported => (Count::NotSupported, 0, 0),
            Shown::NotCounted => (Count::NotCounted, 0, 0),
            Shown::Value { count, running, enabled } => (Count::Value(count), running, enabled),
        };
        // perf's `should_skip_zero_counter` looks at the value alone: an uncounted line
        // reads 0 too.
        let zero = !matches!(count, Count::Value(v) if v != 0.0);
        if zero && (skip_zero || matches!(row.source, Source::Tool(_))) {
            continue;
        }
        let noise = match row.source {
            Source::Counter(spec) => ctx.noise.get(spec).copied().flatten(),
            _ => None,
        };
        let counted = matches!(count, Count::Value(_));
        let mut default_groups = Vec::new();
        if plan.default_metrics && !row.roots.is_empty() {
            // perf skips a `Default` group's event that did not run.
            if !counted {
                continue;
            }
            default_groups = default_group_cells(plan, row, ctx, &mut headers);
        }
        let line_cells = if counted && default_groups.is_empty() {
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
                let (count, running, enabled) = match shown(plan, &one, sample) {
                    Shown::NotSupported => (Count::NotSupported, 0, 0),
                    Shown::NotCounted => (Count::NotCounted, 0, 0),
                    Shown::Value { count, running, enabled } => {
                        (Count::Value(count), running, enabled)
                    }
                };
                if matches!(count, Count::Value(v) if v == 0.0) && skip_zero {
                    continue;
                }
                let cells = if k == 0 {
                    line_cells.clone()
                } else if matches!(count, Count::Value(_)) {
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

/// The `Default` groups of a row's metrics, in the order they are hosted; a group's name is
/// printed on the first line that has its metrics (per PMU on hybrid machines, where it
/// reads `TopdownL1 (cpu_core)`).
fn default_group_cells(
    plan: &Plan,
    row: &PlanRow,
    ctx: &ViewContext<'_>,
    headers: &mut Vec<(String, String)>,
) -> Vec<DefaultGroup> {
    let hybrid = plan.roots.iter().any(|r| {
        let m = &r.model.metrics[r.metric];
        r.model.str(m.pmu) == "cpu_atom"
    });
    let mut groups: Vec<(String, String, Vec<Cell>)> = Vec::new();
    for &root in &row.roots {
        let r = &plan.roots[root];
        let m = &r.model.metrics[r.metric];
        let name = r.model.str(m.default_group).to_string();
        let pmu = r.model.str(m.pmu).to_string();
        let mut cell = metric_cell(plan, root, &ctx.results[root], ctx.hybrid);
        cell.error = cell_error(plan, root, ctx);
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

fn peers<'a>(plan: &'a Plan, sample: &EvalInput<'_>) -> Vec<Peer<'a>> {
    plan.rows
        .iter()
        .enumerate()
        .filter_map(|(r, row)| {
            let Source::Counter(spec) = row.source else { return None };
            let attr = &plan.events[spec].attr;
            let context = (attr.exclude_kernel as u8)
                | (attr.exclude_user as u8) << 1
                | (attr.exclude_hv as u8) << 2
                | (attr.exclude_host as u8) << 3;
            let extended = match attr.type_ {
                TYPE_HARDWARE | TYPE_HW_CACHE => attr.config >> 32,
                _ => 0,
            };
            let group = plan.groups.iter().position(|g| g.len() > 1 && g.contains(&spec));
            let raw = match crate::eval::row_aggregate(plan, row, sample) {
                Some(a) if a.counted() => a.value as f64,
                _ => 0.0,
            };
            Some(Peer {
                row: r,
                stat: stat_type(attr.type_, attr.config),
                context,
                pmu: (attr.type_, extended),
                group,
                cgroup: row.cgroup.as_deref(),
                value: raw * row.scale,
                raw,
            })
        })
        .collect()
}

/// perf's `find_stat`: the first other event of kind `want` this row may pair with; 0 when
/// there is none (perf's rule: a zero denominator prints a blank value).
fn find_stat(peers: &[Peer<'_>], me: &Peer<'_>, want: StatType) -> f64 {
    for p in peers {
        if p.row == me.row {
            continue;
        }
        if me.group.is_some() && p.group != me.group {
            continue;
        }
        if p.context != me.context || p.stat != want || p.cgroup != me.cgroup {
            continue;
        }
        if want != StatType::Nsecs && p.pmu != me.pmu {
            continue;
        }
        return if want == StatType::Nsecs { p.raw } else { p.value };
    }
    0.0
}

/// perf's `get_ratio_color`.
fn ratio_colour(thresholds: [f64; 3], value: f64) -> Colour {
    if value > thresholds[0] {
        Colour::Red
    } else if value > thresholds[1] {
        Colour::Magenta
    } else if value > thresholds[2] {
        Colour::Yellow
    } else {
        Colour::Normal
    }
}

fn builtin_source(name: &str, unit: &str) -> Option<CellSource> {
    Some(CellSource { name: name.into(), unit: unit.into(), root: None })
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
    if let Some(me) = peers.iter().find(|p| p.row == r) {
        builtin_cells(me, peers, ctx, &mut out);
    }
    for &root in &row.roots {
        let mut cell = metric_cell(plan, root, &ctx.results[root], ctx.hybrid);
        cell.error = cell_error(plan, root, ctx);
        out.push(cell);
    }
    if out.is_empty() {
        out.push(Cell::none());
    }
    out
}

fn builtin_cells(me: &Peer<'_>, peers: &[Peer<'_>], ctx: &ViewContext<'_>, out: &mut Vec<Cell>) {
    let ratio = |den: StatType, thresholds: [f64; 3], label: &str, name: &str| {
        ratio_cell(me, find_stat(peers, me, den), thresholds, label, name)
    };
    const MISS: [f64; 3] = [20.0, 10.0, 5.0];
    let cell = match me.stat {
        StatType::Nsecs => {
            let value = me.raw / ctx.wall_ns;
            builtin_cell(ctx.wall_ns != 0.0, value, Fmt::RATE, "CPUs utilized", "cpus_utilized")
        }
        StatType::Cycles => {
            let nsecs = find_stat(peers, me, StatType::Nsecs);
            let known = me.value != 0.0 && nsecs != 0.0;
            builtin_cell(known, me.value / nsecs, Fmt::RATE, "GHz", "ghz")
        }
        StatType::Instructions => {
            let cycles = find_stat(peers, me, StatType::Cycles);
            let (label, name) = ("insn per cycle", "insn_per_cycle");
            out.push(builtin_cell(cycles != 0.0, me.value / cycles, Fmt::PER_INSN, label, name));
            let stalled = find_stat(peers, me, StatType::StalledFront).max(find_stat(
                peers,
                me,
                StatType::StalledBack,
            ));
            if stalled == 0.0 || me.value == 0.0 {
                return;
            }
            let (label, name) = ("stalled cycles per insn", "stalled_cycles_per_insn");
            builtin_cell(true, stalled / me.value, Fmt::PER_INSN, label, name)
        }
        StatType::StalledFront => ratio(
            StatType::Cycles,
            [50.0, 30.0, 10.0],
            "frontend cycles idle",
            "frontend_cycles_idle",
        ),
        StatType::StalledBack => ratio(
            StatType::Cycles,
            [75.0, 50.0, 20.0],
            "backend cycles idle",
            "backend_cycles_idle",
        ),
        StatType::BranchMisses => {
            ratio(StatType::Branches, MISS, "of all branches", "branch_miss_rate")
        }
        StatType::CacheMisses => {
            ratio(StatType::CacheRefs, MISS, "of all cache refs", "cache_miss_rate")
        }
        StatType::L1dMiss => {
            ratio(StatType::L1Dcache, MISS, "of all L1-dcache accesses", "l1d_miss_rate")
        }
        StatType::L1iMiss => {
            ratio(StatType::L1Icache, MISS, "of all L1-icache accesses", "l1i_miss_rate")
        }
        StatType::LlMiss => {
            ratio(StatType::LlCache, MISS, "of all LL-cache accesses", "llc_miss_rate")
        }
        StatType::DtlbMiss => {
            ratio(StatType::DtlbCache, MISS, "of all dTLB cache accesses", "dtlb_miss_rate")
        }
        StatType::ItlbMiss => {
            ratio(StatType::ItlbCache, MISS, "of all iTLB cache accesses", "itlb_miss_rate")
        }
        _ => {
            // Any other event: per second of the clock event, in K, M or G as it grows.
            let nsecs = find_stat(peers, me, StatType::Nsecs);
            if nsecs == 0.0 {
                return;
            }
            let (value, prefix) = convert_unit(1e9 * me.value / nsecs);
            builtin_cell(true, value, Fmt::RATE, &format!("{prefix}/sec"), "per_sec")
        }
    };
    out.push(cell);
}

/// A built-in metric's cell `label` (source `name`): `value` printed with `fmt` when it is
/// `known`, else blank.
fn builtin_cell(known: bool, value: f64, fmt: Fmt, label: &str, name: &str) -> Cell {
    let source = builtin_source(name, label);
    if !known {
        return Cell::blank(label, source);
    }
    Cell { value, fmt: Some(fmt), label: Some(label.into()), colour: None, source, error: None }
}

/// A built-in miss or stall ratio: `me` as a percentage of `den`, coloured by `thresholds`
/// (blank when either is 0).
fn ratio_cell(me: &Peer<'_>, den: f64, thresholds: [f64; 3], label: &str, name: &str) -> Cell {
    if me.value == 0.0 || den == 0.0 {
        return Cell::blank(label, builtin_source(name, label));
    }
    let v = me.value / den * 100.0;
    Cell {
        value: v,
        fmt: Some(Fmt::PERCENT),
        label: Some(label.into()),
        colour: Some(ratio_colour(thresholds, v)),
        source: builtin_source(name, label),
        error: None,
    }
}

/// perf's `convert_unit_double`: the value in K, M or G while it is over 1000.
pub fn convert_unit(mut value: f64) -> (f64, &'static str) {
    let mut prefix = "";
    for p in ["K", "M", "G"] {
        if value > 1000.0 {
            value /= 1000.0;
            prefix = p;
        }
    }
    (value, prefix)
}

/// Whether another root has `root`'s metric name on another PMU (a hybrid machine's two
/// core types).
fn twice(plan: &Plan, root: usize) -> bool {
    let r = &plan.roots[root];
    let name = r.model.str(r.model.metrics[r.metric].name);
    let pmu = r.model.str(r.model.metrics[r.metric].pmu);
    plan.roots.iter().any(|o| {
        let m = &o.model.metrics[o.metric];
        o.model.str(m.name) == name && o.model.str(m.pmu) != pmu
    })
}

/// A root's metric name as every view prints it: with its PMU (`tma_retiring (cpu_core)`)
/// where another core type has a metric of the same name.
pub fn metric_name(plan: &Plan, root: usize) -> String {
    let r = &plan.roots[root];
    let m = &r.model.metrics[r.metric];
    let name = r.model.str(m.name);
    if twice(plan, root) { format!("{name} ({})", r.model.str(m.pmu)) } else { name.to_string() }
}

/// Whether any two roots of `plan` share a metric name on different PMUs.
pub fn has_hybrid_twins(plan: &Plan) -> bool {
    (0..plan.roots.len()).any(|r| twice(plan, r))
}

/// Root `root`'s error bar as [`Cell::error`] holds it: in the printed unit (`ScaleUnit`
/// applied), NaN when unknown, `None` when exact or not asked for.
fn cell_error(plan: &Plan, root: usize, ctx: &ViewContext<'_>) -> Option<f64> {
    let r = &plan.roots[root];
    match ctx.bars?.get(root)? {
        Bar::Exact => None,
        Bar::Unknown => Some(f64::NAN),
        bar @ Bar::Sigma(_) => bar.half_width().map(|h| h * r.model.metrics[r.metric].scale),
    }
}

/// A JSON metric's cell (`generic_metric`): `%8.1f` and `unit  name` with a `ScaleUnit`,
/// else `%8.2f` and the name; red when its threshold is crossed, green when not. With
/// `hybrid` (the plan has a metric of this name on both core types), the name carries its
/// PMU (`tma_retiring (cpu_core)`), so two columns or lines are never named alike.
pub fn metric_cell(plan: &Plan, root: usize, result: &RootResult, hybrid: bool) -> Cell {
    let r = &plan.roots[root];
    let (model, m) = (r.model, r.metric);
    let metric = &model.metrics[m];
    let mut name = model.str(metric.name).to_string();
    if hybrid && twice(plan, root) {
        name = format!("{name} ({})", model.str(metric.pmu));
    }
    let unit =
        if metric.has_scale_unit { model.str(metric.unit).to_string() } else { String::new() };
    let colour = match result.threshold {
        Some(true) => Some(Colour::Red),
        Some(false) => Some(Colour::Green),
        None => None,
    };
    let (fmt, label) = if metric.has_scale_unit {
        (Fmt::SCALED, format!("{unit}  {name}"))
    } else {
        (Fmt::PLAIN, name.clone())
    };
    let source = Some(CellSource { name, unit, root: Some(root) });
    if result.failure.is_some() && !result.value.is_nan() {
        return Cell {
            value: 0.0,
            fmt: None,
            label: Some(String::new()),
            colour,
            source,
            error: None,
        };
    }
    Cell {
        value: result.scaled(model, m),
        fmt: Some(fmt),
        label: Some(label),
        colour,
        source,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_types_follow_perfs_attribute_rules() {
        assert_eq!(stat_type(TYPE_SOFTWARE, 1), StatType::Nsecs);
        assert_eq!(stat_type(TYPE_SOFTWARE, 0), StatType::Nsecs);
        assert_eq!(stat_type(TYPE_SOFTWARE, 2), StatType::None);
        // A hybrid cycles event carries its PMU type in the high bits.
        assert_eq!(stat_type(TYPE_HARDWARE, 8 << 32), StatType::Cycles);
        assert_eq!(stat_type(TYPE_HW_CACHE, 0x10002), StatType::LlMiss);
        assert_eq!(stat_type(TYPE_HW_CACHE, 0x2), StatType::LlCache);
        // L1-dcache-prefetches (op 2) have no ratio.
        assert_eq!(stat_type(TYPE_HW_CACHE, 0x200), StatType::None);
    }

    #[test]
    fn convert_unit_steps_through_k_m_g() {
        assert_eq!(convert_unit(999.0), (999.0, ""));
        let (v, p) = convert_unit(75_294.6);
        assert!((v - 75.2946).abs() < 1e-9 && p == "K");
        assert_eq!(convert_unit(2.5e9).1, "G");
        assert_eq!(convert_unit(2.5e13).1, "G");
    }
}

/// One node of the TMA tree view, in print order (depth first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeNode {
    /// The plan root (with [`tma_tree`]: the index into its nodes).
    pub root: usize,
    /// Its depth: 0 for level-1 nodes.
    pub depth: usize,
    /// Its threshold is not crossed ("not a problem here"): hidden unless all nodes show.
    pub below: bool,
    /// It is on the bottleneck path.
    pub bottleneck: bool,
    /// It has a threshold that could not be decided (its events were not counted), so the
    /// bottleneck path does not go past its level.
    pub undecided: bool,
}

/// One metric as the TMA tree reads it, for views that have no [`Plan`] (`eval`, `eval
/// --from-perf`).
#[derive(Debug, Clone, Copy)]
pub struct TmaNode<'a> {
    /// The metric's name.
    pub name: &'a str,
    /// Its metric groups, `;`-separated: `tma_X_group` makes it a child of `tma_X`.
    pub groups: &'a str,
    /// Its PMU: each core type of a hybrid machine has a tree of its own.
    pub pmu: &'a str,
    /// Its value (NaN when it has none).
    pub value: f64,
    /// Its threshold: crossed, not crossed, or unknown (no threshold, or one whose inputs
    /// were not counted).
    pub threshold: Option<bool>,
    /// Whether the metric has a threshold at all (`MetricThreshold`).
    pub has_threshold: bool,
}

impl<'a> TmaNode<'a> {
    /// `metric` of `model` with its value and threshold state.
    pub fn of(
        model: &'a tmetric_catalog::Model,
        metric: usize,
        value: f64,
        threshold: Option<bool>,
    ) -> TmaNode<'a> {
        let m = &model.metrics[metric];
        TmaNode {
            name: model.str(m.name),
            groups: model.str(m.groups),
            pmu: model.str(m.pmu),
            value,
            threshold,
            has_threshold: m.threshold_expr.1 > 0,
        }
    }
}

/// The TMA tree of a plan's roots ([`tma_tree`] over them): every view that draws the tree
/// or marks a bottleneck takes it from here.
pub fn tree(plan: &Plan, results: &[RootResult]) -> Vec<TreeNode> {
    let nodes: Vec<TmaNode<'_>> = plan
        .roots
        .iter()
        .zip(results)
        .map(|(r, result)| TmaNode::of(r.model, r.metric, result.value, result.threshold))
        .collect();
    tma_tree(&nodes)
}

/// The TMA tree of `nodes`, depth first: a metric is a child of `tma_X` when its groups name
/// `tma_X_group`. The bottleneck path follows, level by level, the crossed node with the
/// largest value, as toplev marks it (one path per core type on hybrid machines). A level
/// where a node's threshold could not be decided (its events were not counted: an interval
/// its group did not run in, `--metric-no-threshold`) ends the path: the bottleneck could be
/// that node, so none below is claimed.
pub fn tma_tree(nodes: &[TmaNode<'_>]) -> Vec<TreeNode> {
    let parent_of = |i: usize| -> Option<usize> {
        nodes[i].groups.split(';').find_map(|g| {
            let parent = g.strip_suffix("_group")?;
            nodes.iter().position(|n| n.name == parent).filter(|&p| p != i)
        })
    };
    let parents: Vec<Option<usize>> = (0..nodes.len()).map(parent_of).collect();
    let children = |p: Option<usize>| -> Vec<usize> {
        (0..nodes.len()).filter(|&i| parents[i] == p).collect()
    };
    let mut pmus: Vec<&str> = nodes.iter().map(|n| n.pmu).collect();
    pmus.sort_unstable();
    pmus.dedup();
    let path: Vec<usize> = pmus
        .iter()
        .flat_map(|pmu| {
            let within = |p: Option<usize>| -> Vec<usize> {
                children(p).into_iter().filter(|&i| nodes[i].pmu == *pmu).collect()
            };
            bottleneck_path(nodes, &within)
        })
        .collect();
    let mut out = Vec::new();
    let mut stack: Vec<(usize, usize)> = children(None).into_iter().rev().map(|i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        out.push(TreeNode {
            root: i,
            depth,
            below: nodes[i].threshold == Some(false),
            bottleneck: path.contains(&i),
            undecided: nodes[i].has_threshold && nodes[i].threshold.is_none(),
        });
        for c in children(Some(i)).into_iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    out
}

/// The bottleneck path: from the top level down, the crossed node with the largest value,
/// while every node of the level with a threshold has a known state.
fn bottleneck_path(
    nodes: &[TmaNode<'_>],
    children: &dyn Fn(Option<usize>) -> Vec<usize>,
) -> Vec<usize> {
    let mut path = Vec::new();
    let mut level = children(None);
    loop {
        if level.iter().any(|&i| nodes[i].has_threshold && nodes[i].threshold.is_none()) {
            return path;
        }
        let pick =
            level.iter().copied().filter(|&i| nodes[i].threshold == Some(true)).max_by(|&a, &b| {
                nodes[a].value.partial_cmp(&nodes[b].value).unwrap_or(std::cmp::Ordering::Equal)
            });
        match pick {
            Some(i) => {
                path.push(i);
                level = children(Some(i));
            }
            None => return path,
        }
    }
}

/// The roots on the bottleneck path (for views that mark it without drawing the tree).
pub fn bottleneck(plan: &Plan, results: &[RootResult]) -> Vec<usize> {
    tree(plan, results).into_iter().filter(|n| n.bottleneck).map(|n| n.root).collect()
}

/// The indices of `nodes` on the bottleneck path ([`tma_tree`]).
pub fn tma_bottleneck(nodes: &[TmaNode<'_>]) -> Vec<usize> {
    tma_tree(nodes).into_iter().filter(|n| n.bottleneck).map(|n| n.root).collect()
}

/// The indices of `results` on the TMA bottleneck path of `model`'s metrics ([`tma_tree`]),
/// for front ends that hold results of their own kind (`eval`); `of` gives a result's metric,
/// value and threshold state.
pub fn bottleneck_of<R>(
    model: &tmetric_catalog::Model,
    results: &[R],
    of: impl Fn(&R) -> (usize, f64, Option<bool>),
) -> Vec<usize> {
    let nodes: Vec<TmaNode<'_>> = results
        .iter()
        .map(|r| {
            let (metric, value, threshold) = of(r);
            TmaNode::of(model, metric, value, threshold)
        })
        .collect();
    tma_bottleneck(&nodes)
}
