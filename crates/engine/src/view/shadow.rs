//! perf's built-in metrics beside a count (`CPUs utilized`, `GHz`, `insn per cycle`, the
//! idle and miss ratios, `/sec`), as cells: which counted rows pair with which, and perf's
//! printing rules; the metrics themselves (labels, inputs, formulas, formats, colours) are
//! [`crate::builtin::BUILTINS`], the table the log checker reads too.
//!
//! The built-ins follow perf's `tools/perf/util/stat-shadow.c` (6.12): an event's kind comes
//! from its attribute (`evsel__stat_type`), and the other input of a ratio is looked for
//! among the events of the same group when the event is in a group of several, else among
//! all events, with the same exclude modifiers and the same PMU (clocks excepted:
//! `find_stat`).

use tmetric_runtime::sys::{TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE};

use super::{Cell, CellSource, Colour, Fmt, ViewContext};
use crate::builtin::{BUILTINS, NSECS, NoValue};
use crate::plan::{Plan, Source};
use crate::plan_eval::EvalInput;

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

/// One counter row's facts for the built-ins.
#[derive(Debug, Clone, Copy)]
pub(super) struct Peer<'a> {
    pub(super) row: usize,
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

pub(super) fn peers<'a>(plan: &'a Plan, sample: &EvalInput<'_>) -> Vec<Peer<'a>> {
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
            let raw = match crate::plan_eval::row_aggregate(plan, row, sample) {
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

/// The kind of the event a built-in names as an input ([`BUILTINS`]' spelling): how the live
/// view finds it among the counted rows (by attribute, as perf does, not by name).
fn stat_of_input(input: &str) -> StatType {
    match input {
        NSECS => StatType::Nsecs,
        "cycles" => StatType::Cycles,
        "instructions" => StatType::Instructions,
        "stalled-cycles-frontend" => StatType::StalledFront,
        "stalled-cycles-backend" => StatType::StalledBack,
        "branches" => StatType::Branches,
        "branch-misses" => StatType::BranchMisses,
        "cache-references" => StatType::CacheRefs,
        "cache-misses" => StatType::CacheMisses,
        "L1-dcache-loads" => StatType::L1Dcache,
        "L1-icache-loads" => StatType::L1Icache,
        "LLC-loads" => StatType::LlCache,
        "dTLB-loads" => StatType::DtlbCache,
        "iTLB-loads" => StatType::ItlbCache,
        "L1-dcache-load-misses" => StatType::L1dMiss,
        "L1-icache-load-misses" => StatType::L1iMiss,
        "LLC-load-misses" => StatType::LlMiss,
        "dTLB-load-misses" => StatType::DtlbMiss,
        "iTLB-load-misses" => StatType::ItlbMiss,
        // The topdown built-ins: perf 6.12 prints TopDown through the JSON metrics.
        _ => StatType::None,
    }
}

pub(super) fn builtin_cells(
    me: &Peer<'_>,
    peers: &[Peer<'_>],
    ctx: &ViewContext<'_>,
    out: &mut Vec<Cell>,
) {
    match me.stat {
        StatType::Nsecs => {
            let value = me.raw / ctx.wall_ns;
            let (label, name) = ("CPUs utilized", "cpus_utilized");
            out.push(builtin_cell(ctx.wall_ns != 0.0, value, Fmt::RATE, label, name));
            return;
        }
        StatType::None => {
            // Any other event: per second of the clock event, in K, M or G as it grows.
            let nsecs = find_stat(peers, me, StatType::Nsecs);
            if nsecs == 0.0 {
                return;
            }
            let (value, prefix) = convert_unit(1e9 * me.value / nsecs);
            out.push(builtin_cell(true, value, Fmt::RATE, &format!("{prefix}/sec"), "per_sec"));
            return;
        }
        _ => {}
    }
    for b in BUILTINS.iter().filter(|b| stat_of_input(b.carrier) == me.stat) {
        // perf reads 0 for an input it cannot find (`find_stat`).
        let got = b.compute(&mut |input| {
            Some(if input == b.carrier {
                me.value
            } else {
                find_stat(peers, me, stat_of_input(input))
            })
        });
        let cell = match got {
            Ok(value) => Cell {
                value,
                fmt: Some(b.fmt),
                label: Some(b.label.into()),
                colour: b.colour.map(|t| ratio_colour(t, value)),
                source: builtin_source(b.name, b.label),
                error: None,
                impossible: false,
            },
            // perf 6.12 prints no `stalled cycles per insn` line at all without a stalled
            // count (6.1 printed a blank one, which logs of that vintage show).
            Err(NoValue::NotShown) => continue,
            Err(_) if b.name == "stalled_cycles_per_insn" => continue,
            Err(_) => Cell::blank(b.label, builtin_source(b.name, b.label)),
        };
        out.push(cell);
    }
}

/// A built-in metric's cell `label` (source `name`): `value` printed with `fmt` when it is
/// `known`, else blank.
fn builtin_cell(known: bool, value: f64, fmt: Fmt, label: &str, name: &str) -> Cell {
    let source = builtin_source(name, label);
    if !known {
        return Cell::blank(label, source);
    }
    Cell {
        value,
        fmt: Some(fmt),
        label: Some(label.into()),
        colour: None,
        source,
        error: None,
        impossible: false,
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
