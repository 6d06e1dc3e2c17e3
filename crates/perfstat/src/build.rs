//! Turns the items the layout readers produce into runs and blocks, splits each block's rows into
//! groups, and works out what each block's `duration_time`, `user_time` and `system_time` are.
//!
//! Layout-independent: the text, CSV and JSON readers all feed the same [`Item`]s.

use crate::key::EventKey;
use crate::log::{Aggr, Block, Count, Layout, PerfLog, PrintedMetric, Row, Run, TimeSource, Timed};
use std::collections::{HashMap, HashSet};

/// The interval timestamp and aggregation id printed in front of a row or metric line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Prefix {
    pub interval: Option<f64>,
    pub aggr: Option<Aggr>,
}

/// A counter row before it is placed in a block.
#[derive(Debug, Clone)]
pub(crate) struct RawRow {
    pub line: usize,
    pub prefix: Prefix,
    pub value: Count,
    pub count_text: String,
    pub unit: String,
    pub event: String,
    /// Set by readers that recognise a special form; otherwise computed from `event`.
    pub key: Option<EventKey>,
    pub cgroup: Option<String>,
    pub running_pct: Option<f64>,
    pub variance_pct: Option<f64>,
    pub metrics: Vec<PrintedMetric>,
}

/// One meaningful line of a log.
#[derive(Debug, Clone)]
pub(crate) enum Item {
    RunHeader {
        line: usize,
        command: Option<String>,
        repeats: Option<u32>,
    },
    Elapsed {
        line: usize,
        seconds: f64,
    },
    User {
        line: usize,
        seconds: f64,
    },
    Sys {
        line: usize,
        seconds: f64,
    },
    Row(Box<RawRow>),
    /// A metric on a line of its own: a continuation of the previous row's metrics, or (with a
    /// header) one of perf's `Default` metric-group lines.
    Metric {
        prefix: Prefix,
        metric: PrintedMetric,
    },
}

#[derive(Clone, Copy)]
enum Target {
    Row(usize),
    Loose,
}

/// Blocks by (run, interval bits), then by aggregation id (`""` for global), so that a row
/// finds its block without allocating.
#[derive(Default)]
struct BlockIndex {
    by_time: HashMap<(usize, Option<u64>), HashMap<String, usize>>,
}

impl BlockIndex {
    fn get(&self, run: usize, prefix: &Prefix) -> Option<usize> {
        let inner = self.by_time.get(&(run, prefix.interval.map(f64::to_bits)))?;
        inner.get(prefix.aggr.as_ref().map_or("", |a| a.id.as_str())).copied()
    }
}

pub(crate) fn build(
    layout: Layout,
    items: Vec<Item>,
    mut warnings: Vec<crate::Warning>,
) -> PerfLog {
    let mut runs: Vec<Run> = vec![Run::default()];
    let mut run_used = false;
    let mut blocks: Vec<Block> = Vec::new();
    let mut index = BlockIndex::default();
    // perf prints the same few event names over and over.
    let mut key_cache: HashMap<String, EventKey> = HashMap::new();
    let mut targets: HashMap<usize, Target> = HashMap::new();
    let mut last_target: Option<(usize, Target)> = None;

    for item in items {
        match item {
            Item::RunHeader { line, command, repeats } => {
                if run_used {
                    runs.push(Run::default());
                }
                let run = runs.last_mut().expect("runs is never empty");
                run.header_line = Some(line);
                run.command = command;
                run.repeats = repeats;
                run_used = true;
            }
            Item::Elapsed { line, seconds } => {
                runs.last_mut().expect("runs is never empty").elapsed =
                    Some(Timed { seconds, source: TimeSource::ElapsedLine { line } });
                run_used = true;
            }
            Item::User { line, seconds } => {
                runs.last_mut().expect("runs is never empty").user =
                    Some(Timed { seconds, source: TimeSource::UserLine { line } });
                run_used = true;
            }
            Item::Sys { line, seconds } => {
                runs.last_mut().expect("runs is never empty").system =
                    Some(Timed { seconds, source: TimeSource::SysLine { line } });
                run_used = true;
            }
            Item::Row(raw) => {
                // perf never prints a negative count or a run share outside 0-100%: such a
                // row is damaged, and its value must not reach a metric (negative rates).
                let bad = match (raw.value, raw.running_pct) {
                    (Count::Counted(v), _) if v < 0.0 || !v.is_finite() => Some(format!(
                        "the count {} is not a non-negative number",
                        tmetric_text::quote(&raw.count_text)
                    )),
                    (_, Some(p)) if !(0.0..=100.0).contains(&p) => {
                        Some(format!("the run share {p:.2}% is outside 0-100%"))
                    }
                    // perf prints 0.00% for rows that never ran (`<not counted>`, or 0 in the
                    // CSV layout); a non-zero count that never ran cannot be.
                    (Count::Counted(v), Some(p)) if p == 0.0 && v != 0.0 => Some(format!(
                        "the count {} ran 0.00% of the time",
                        tmetric_text::quote(&raw.count_text)
                    )),
                    _ => None,
                };
                if let Some(why) = bad {
                    warnings.push(crate::Warning {
                        line: raw.line,
                        message: format!("{why}; row {} skipped", tmetric_text::quote(&raw.event)),
                    });
                    continue;
                }
                // Rows after a run's footer belong to a new run (logs concatenated without
                // headers, as `perf stat ... 2>>log` twice produces).
                if runs.last().is_some_and(|r| r.elapsed.is_some()) {
                    runs.push(Run::default());
                }
                run_used = true;
                let run = runs.len() - 1;
                let block = block_for(&mut blocks, &mut index, run, &raw.prefix);
                let raw = *raw;
                let key = match raw.key {
                    Some(key) => key,
                    None => match key_cache.get(&raw.event) {
                        Some(key) => key.clone(),
                        None => {
                            let key = EventKey::from_perf(&raw.event);
                            key_cache.insert(raw.event.clone(), key.clone());
                            key
                        }
                    },
                };
                blocks[block].rows.push(Row {
                    line: raw.line,
                    value: raw.value,
                    count_text: raw.count_text,
                    unit: raw.unit,
                    event: raw.event,
                    key,
                    cgroup: raw.cgroup,
                    running_pct: raw.running_pct,
                    variance_pct: raw.variance_pct,
                    group: 0,
                    metrics: raw.metrics,
                });
                let target = Target::Row(blocks[block].rows.len() - 1);
                targets.insert(block, target);
                last_target = Some((block, target));
            }
            Item::Metric { prefix, metric } => {
                let run = runs.len() - 1;
                let has_prefix = prefix.interval.is_some() || prefix.aggr.is_some();
                let (block, target) = if metric.header.is_some() {
                    (block_for(&mut blocks, &mut index, run, &prefix), Target::Loose)
                } else {
                    match index.get(run, &prefix).and_then(|b| targets.get(&b).map(|t| (b, *t))) {
                        Some(found) if has_prefix => found,
                        _ => match last_target {
                            Some(found) => found,
                            None => {
                                (block_for(&mut blocks, &mut index, run, &prefix), Target::Loose)
                            }
                        },
                    }
                };
                match target {
                    Target::Row(row) => blocks[block].rows[row].metrics.push(metric),
                    Target::Loose => blocks[block].loose_metrics.push(metric),
                }
                targets.insert(block, target);
                last_target = Some((block, target));
            }
        }
    }

    for block in &mut blocks {
        assign_groups(&mut block.rows);
    }
    assign_times(&mut blocks, &runs);
    warnings.sort_by_key(|w| w.line);
    PerfLog { layout, runs, blocks, warnings }
}

fn block_for(
    blocks: &mut Vec<Block>,
    index: &mut BlockIndex,
    run: usize,
    prefix: &Prefix,
) -> usize {
    if let Some(block) = index.get(run, prefix) {
        return block;
    }
    let inner = index.by_time.entry((run, prefix.interval.map(f64::to_bits))).or_default();
    *inner.entry(prefix.aggr.as_ref().map_or(String::new(), |a| a.id.clone())).or_insert_with(
        || {
            blocks.push(Block {
                run,
                interval: prefix.interval,
                aggr: prefix.aggr.clone(),
                rows: Vec::new(),
                loose_metrics: Vec::new(),
                duration: None,
                user_time: None,
                system_time: None,
            });
            blocks.len() - 1
        },
    )
}

/// perf prints no braces, so groups are recovered from the print order. perf prints the events
/// of one event list consecutively, so scanning the rows in order, a row starts a new group when
///
/// 1. its event key already occurs in the current group (the same event measured again belongs
///    to another metric's group), or
/// 2. it is a slots row (`slots`/`TOPDOWN.SLOTS`) and the group already has rows, because perf
///    makes slots the leader of every topdown group and sorts it first, or
/// 3. it follows a tool event (`duration_time`, ...), which perf appends after a group's events.
///
/// When rule 1 fires, the new group may have begun a few rows earlier, with events not seen
/// before. The run share tells: the kernel schedules a group as a whole, so its members print the
/// same `(xx.xx%)` (none printed counts as 100%). The rows just before the repeated row that
/// share its run share, after a row that does not, are moved to the new group. Without this, in
/// `A (40%), CLK (40%), B (60%), CLK (60%)` the metric perf printed on `B` would take the first
/// `CLK` (issue 12). A broken weak group has members with different shares but no repeated
/// event, so it stays one group.
fn assign_groups(rows: &mut [Row]) {
    let mut groups: Vec<usize> = Vec::with_capacity(rows.len());
    let mut group = 0;
    let mut start = 0;
    let mut seen: HashSet<&EventKey> = HashSet::new();
    let mut after_tool = false;
    for (i, row) in rows.iter().enumerate() {
        let repeated = seen.contains(&row.key);
        let starts_group = !seen.is_empty()
            && (repeated || row.key.is_slots() || (after_tool && !row.key.is_tool()));
        if starts_group {
            group += 1;
            seen.clear();
            let moved = if repeated { moved_rows(&rows[start..i], row) } else { 0 };
            start = i - moved;
            for (g, r) in groups[start..].iter_mut().zip(&rows[start..i]) {
                *g = group;
                seen.insert(&r.key);
            }
        }
        seen.insert(&row.key);
        after_tool = row.key.is_tool();
        groups.push(group);
    }
    for (row, group) in rows.iter_mut().zip(groups) {
        row.group = group;
    }
}

/// How many rows at the end of `group` belong with `repeated`, which starts the next group: the
/// trailing rows with its run share, when a row with another share comes before them. A row
/// without a share, or of the repeated event, ends the search with no move.
fn moved_rows(group: &[Row], repeated: &Row) -> usize {
    let Some(share) = run_share(repeated) else { return 0 };
    for (n, row) in group.iter().rev().enumerate() {
        match run_share(row) {
            Some(s) if s != share => return n,
            Some(_) if row.key != repeated.key && !row.key.is_slots() => {}
            _ => return 0,
        }
    }
    0
}

/// The run share of a counted row's group; `None` for rows that say nothing about it:
/// `<not counted>`/`<not supported>`, tool rows and retire latencies (`:R`, sampled by
/// `perf record`, not counted in the group).
fn run_share(row: &Row) -> Option<f64> {
    if row.key.is_tool() || row.key.retire_latency || !matches!(row.value, Count::Counted(_)) {
        return None;
    }
    Some(row.running_pct.unwrap_or(100.0))
}

/// A tool-event row's value in seconds: perf prints these rows in ns.
fn tool_row_seconds(row: &Row) -> Option<Timed> {
    match row.value {
        Count::Counted(v) => {
            let seconds = match row.unit.as_str() {
                "msec" => v * 1e-3,
                "s" | "sec" => v,
                _ => v * 1e-9,
            };
            Some(Timed { seconds, source: TimeSource::Row { line: row.line } })
        }
        Count::NotCounted | Count::NotSupported => None,
    }
}

fn assign_times(blocks: &mut [Block], runs: &[Run]) {
    // Tool rows may be printed in one block only (for example on CPU0 with -A); the other blocks
    // of the same run and interval share them.
    let mut shared: HashMap<(usize, Option<u64>, &str), Timed> = HashMap::new();
    let mut stamps: HashMap<usize, Vec<f64>> = HashMap::new();
    for block in blocks.iter() {
        for row in &block.rows {
            if row.key.is_tool()
                && let Some(t) = tool_row_seconds(row)
            {
                let name = crate::key::TOOL_EVENTS
                    .iter()
                    .find(|n| **n == row.key.name)
                    .copied()
                    .unwrap_or("");
                shared.entry((block.run, block.interval.map(f64::to_bits), name)).or_insert(t);
            }
        }
        if let Some(t) = block.interval {
            stamps.entry(block.run).or_default().push(t);
        }
    }
    // Each timestamp's predecessor, looked up by hash: searching the sorted list for every block
    // made long `-I` logs quadratic.
    let mut previous: HashMap<(usize, u64), f64> = HashMap::new();
    for (run, list) in stamps.iter_mut() {
        list.sort_by(f64::total_cmp);
        list.dedup();
        let mut before = 0.0;
        for t in list.iter() {
            previous.insert((*run, t.to_bits()), before);
            before = *t;
        }
    }
    for block in blocks.iter_mut() {
        let own = |name: &str| {
            block
                .rows
                .iter()
                .find(|r| r.key.is_tool() && r.key.name == name)
                .and_then(tool_row_seconds)
        };
        let sibling =
            |name: &str| shared.get(&(block.run, block.interval.map(f64::to_bits), name)).copied();
        let run = runs.get(block.run);
        let interval_length = block.interval.and_then(|t| {
            let previous = previous.get(&(block.run, t.to_bits()))?;
            Some(Timed { seconds: t - previous, source: TimeSource::IntervalLength })
        });
        block.duration = own("duration_time")
            .or_else(|| sibling("duration_time"))
            .or(interval_length)
            .or_else(|| run.and_then(|r| r.elapsed));
        block.user_time =
            own("user_time").or_else(|| sibling("user_time")).or_else(|| run.and_then(|r| r.user));
        block.system_time = own("system_time")
            .or_else(|| sibling("system_time"))
            .or_else(|| run.and_then(|r| r.system));
    }
}
