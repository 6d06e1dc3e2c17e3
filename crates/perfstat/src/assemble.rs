//! Turns the items the layout readers produce into runs and blocks as they come, splits each
//! block's rows into groups, and works out what each block's `duration_time`, `user_time` and
//! `system_time` are.
//!
//! Layout-independent: the text, CSV and JSON readers all feed the same [`Item`]s.

use crate::key::{EventKey, TOOL_EVENTS};
use crate::log::{Aggr, Block, LogRow, PrintedCount, PrintedMetric, Run, TimeSource, Timed};
use std::collections::VecDeque;

use foldhash::HashMap;

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
    pub value: PrintedCount,
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

/// Where warnings come from, to order those of one line as the whole-log reader always has:
/// the layout reader's first, then the note on a mix of layouts, then the builder's.
pub(crate) const FROM_READER: u8 = 0;
pub(crate) const FROM_LAYOUT_MIX: u8 = 1;
pub(crate) const FROM_BUILDER: u8 = 2;

/// A warning and where it came from ([`FROM_READER`], ...).
pub(crate) type Noted = (crate::Warning, u8);

/// Places items into runs and blocks as they are read, in one pass.
///
/// Blocks are finished a batch at a time. A batch is the blocks of one run and one `-I`
/// timestamp (or of a run's rows without a timestamp); it ends when a row or a metric-group
/// line opens a block of another run or timestamp, and at the end of the input. Only then are
/// its groups split and its times known (a `duration_time` row printed for `CPU0` only serves
/// every block of its interval). Finished blocks wait in `ready`.
///
/// A timestamp lower than the one before it in the same run starts a new run, as rows after a
/// footer do: perf's timestamps only grow within one `perf stat -I`, so such a log is two runs
/// appended without a header.
#[derive(Default)]
pub(crate) struct Builder {
    /// The runs kept: all of them, unless the reader forgot finished ones
    /// ([`Builder::forget_runs_before`]); `runs[i]` is run `runs_offset + i`.
    pub runs: Vec<Run>,
    pub runs_offset: usize,
    run_used: bool,
    /// The current run has rows (a header after a run without any starts no new run: it
    /// replaces the empty one, so that a log of headers alone does not grow).
    run_rows: bool,
    /// The open batch's blocks, in the order their first row was printed.
    batch: Vec<Block>,
    /// (run, interval bits) of the open batch.
    batch_key: Option<(usize, Option<u64>)>,
    /// Aggregation id (`""` for global) to index in `batch`, so that a row finds its block
    /// without allocating.
    batch_index: HashMap<String, usize>,
    /// Where a metric line without a row of its own goes, per block of the batch.
    targets: Vec<Option<Target>>,
    last_target: Option<(usize, Target)>,
    /// The timestamp the open batch's interval length is measured from.
    batch_previous: f64,
    stamps: Stamps,
    /// perf prints the same few event names over and over.
    key_cache: HashMap<String, EventKey>,
    /// Rows of the largest block of the last batch: the next blocks are sized for as many, so
    /// that their rows are not copied as the vector grows.
    rows_hint: usize,
    pub ready: VecDeque<Block>,
}

/// The last two distinct `-I` timestamps of one run: an interval's length is measured from the
/// one before it (0 for the first).
#[derive(Default)]
struct Stamps {
    run: usize,
    last: Option<f64>,
    before: f64,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder { runs: vec![Run::default()], ..Builder::default() }
    }

    fn run_mut(&mut self) -> &mut Run {
        self.runs.last_mut().expect("runs is never empty")
    }

    /// The index of the current run.
    fn current_run(&self) -> usize {
        self.runs_offset + self.runs.len() - 1
    }

    /// Starts a new run.
    fn new_run(&mut self) {
        self.runs.push(Run::default());
        self.run_rows = false;
    }

    /// Forgets the runs before `run` (their blocks are all handed out), keeping the current
    /// one, so that a long log of many runs read block by block keeps bounded memory.
    pub(crate) fn forget_runs_before(&mut self, run: usize) {
        let open = self.batch_key.map_or(self.current_run(), |(r, _)| r);
        let keep_from = run.min(open).min(self.current_run());
        if keep_from > self.runs_offset {
            self.runs.drain(..keep_from - self.runs_offset);
            self.runs_offset = keep_from;
        }
    }

    /// The run a row or metric line with `prefix` belongs to, starting a new one when its
    /// timestamp goes back.
    fn run_for(&mut self, prefix: &Prefix) -> usize {
        let run = self.current_run();
        if let Some(t) = prefix.interval
            && self.stamps.run == run
            && self.stamps.last.is_some_and(|last| t < last)
        {
            self.new_run();
            self.run_used = true;
            return run + 1;
        }
        run
    }

    pub(crate) fn push(&mut self, item: Item, warnings: &mut Vec<Noted>) {
        match item {
            Item::RunHeader { line, command, repeats } => {
                if self.run_used && self.run_rows {
                    self.new_run();
                } else {
                    *self.run_mut() = Run::default();
                }
                let run = self.run_mut();
                run.header_line = Some(line);
                // A command line is kept for messages: a hostile one is cut short.
                run.command = command.map(|c| crate::error::shorten(&c, 1000));
                run.repeats = repeats;
                self.run_used = true;
            }
            Item::Elapsed { line, seconds } => {
                self.run_mut().elapsed =
                    Some(Timed { seconds, source: TimeSource::ElapsedLine { line } });
                self.run_used = true;
            }
            Item::User { line, seconds } => {
                self.run_mut().user =
                    Some(Timed { seconds, source: TimeSource::UserLine { line } });
                self.run_used = true;
            }
            Item::Sys { line, seconds } => {
                self.run_mut().system =
                    Some(Timed { seconds, source: TimeSource::SysLine { line } });
                self.run_used = true;
            }
            Item::Row(raw) => self.push_row(raw, warnings),
            Item::Metric { prefix, metric } => self.push_metric(prefix, metric),
        }
    }

    /// Places a counter row in its run and block (a damaged one is skipped with a warning).
    fn push_row(&mut self, raw: Box<RawRow>, warnings: &mut Vec<Noted>) {
        // perf never prints a negative count or a run share outside 0-100%: such a
        // row is damaged, and its value must not reach a metric (negative rates).
        let bad = match (raw.value, raw.running_pct) {
            (PrintedCount::Value(v), _) if v < 0.0 || !v.is_finite() => Some(format!(
                "the count {} is not a non-negative number",
                tmetric_text::quote(&raw.count_text)
            )),
            (_, Some(p)) if !(0.0..=100.0).contains(&p) => {
                Some(format!("the run share {p:.2}% is outside 0-100%"))
            }
            // perf prints 0.00% for rows that never ran (`<not counted>`, or 0 in the
            // CSV layout); a non-zero count that never ran cannot be.
            (PrintedCount::Value(v), Some(p)) if p == 0.0 && v != 0.0 => Some(format!(
                "the count {} ran 0.00% of the time",
                tmetric_text::quote(&raw.count_text)
            )),
            _ => None,
        };
        if let Some(why) = bad {
            let message = format!("{why}; row {} skipped", tmetric_text::quote(&raw.event));
            warnings.push((crate::Warning { line: raw.line, message }, FROM_BUILDER));
            return;
        }
        // Rows after a run's footer belong to a new run (logs concatenated without
        // headers, as `perf stat ... 2>>log` twice produces).
        if self.runs.last().is_some_and(|r| r.elapsed.is_some()) {
            self.new_run();
        }
        self.run_used = true;
        self.run_rows = true;
        let run = self.run_for(&raw.prefix);
        let block = self.block_for(run, &raw.prefix);
        let raw = *raw;
        let key = match raw.key {
            Some(key) => key,
            None => match self.key_cache.get(raw.event.as_str()) {
                Some(key) => key.clone(),
                None => {
                    let key = EventKey::from_perf(&raw.event);
                    self.key_cache.insert(raw.event.clone(), key.clone());
                    key
                }
            },
        };
        let counters = raw.prefix.aggr.as_ref().and_then(|a| a.cpus);
        let rows = &mut self.batch[block].rows;
        rows.push(LogRow {
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
            counters,
        });
        let target = Target::Row(rows.len() - 1);
        self.targets[block] = Some(target);
        self.last_target = Some((block, target));
    }

    /// Attaches a metric line to the row it continues, or to its block as a loose metric.
    fn push_metric(&mut self, prefix: Prefix, metric: PrintedMetric) {
        let has_prefix = prefix.interval.is_some() || prefix.aggr.is_some();
        let (block, target) = if metric.header.is_some() {
            let run = self.run_for(&prefix);
            (self.block_for(run, &prefix), Target::Loose)
        } else {
            let run = self.current_run();
            let known =
                self.batch_block(run, &prefix).and_then(|b| self.targets[b].map(|t| (b, t)));
            match known {
                Some(found) if has_prefix => found,
                _ => match self.last_target {
                    Some(found) => found,
                    None => (self.block_for(run, &prefix), Target::Loose),
                },
            }
        };
        match target {
            Target::Row(row) => self.batch[block].rows[row].metrics.push(metric),
            Target::Loose => self.batch[block].loose_metrics.push(metric),
        }
        self.targets[block] = Some(target);
        self.last_target = Some((block, target));
    }

    /// The block of the open batch for `prefix` in `run`, if it has one.
    fn batch_block(&self, run: usize, prefix: &Prefix) -> Option<usize> {
        if self.batch_key != Some((run, prefix.interval.map(f64::to_bits))) {
            return None;
        }
        self.batch_index.get(prefix.aggr.as_ref().map_or("", |a| a.id.as_str())).copied()
    }

    /// The block for `prefix` in `run`: found in the open batch, or added to it, or the first
    /// of a new batch (which finishes the open one).
    fn block_for(&mut self, run: usize, prefix: &Prefix) -> usize {
        let key = (run, prefix.interval.map(f64::to_bits));
        if self.batch_key != Some(key) {
            self.finish_batch();
            self.batch_key = Some(key);
            self.batch_previous = match prefix.interval {
                Some(t) => self.stamps.previous(run, t),
                None => 0.0,
            };
        }
        let id = prefix.aggr.as_ref().map_or("", |a| a.id.as_str());
        // A batch's rows mostly come block by block (all of them in one block without `-A`
        // or `--per-*`): the last block, if it is this one, without hashing its id.
        if let Some(last) = self.batch.last()
            && last.aggr.as_ref().map_or("", |a| a.id.as_str()) == id
        {
            return self.batch.len() - 1;
        }
        if let Some(&block) = self.batch_index.get(id) {
            return block;
        }
        self.batch.push(Block {
            run,
            interval: prefix.interval,
            aggr: prefix.aggr.clone(),
            rows: Vec::with_capacity(self.rows_hint),
            loose_metrics: Vec::new(),
            duration: None,
            user_time: None,
            system_time: None,
        });
        self.targets.push(None);
        self.batch_index.insert(id.to_string(), self.batch.len() - 1);
        self.batch.len() - 1
    }

    /// Splits the open batch's groups, sets its times and moves it to `ready`.
    pub(crate) fn finish_batch(&mut self) {
        let Some((run, _)) = self.batch_key.take() else { return };
        let mut blocks = std::mem::take(&mut self.batch);
        for block in &mut blocks {
            assign_groups(&mut block.rows);
        }
        assign_times(&mut blocks, &self.runs[run - self.runs_offset], self.batch_previous);
        // Bounded, so that one odd block does not size every later one.
        self.rows_hint = blocks.iter().map(|b| b.rows.len()).max().unwrap_or(0).min(1024);
        self.ready.extend(blocks);
        self.batch_index.clear();
        self.targets.clear();
        self.last_target = None;
    }
}

impl Stamps {
    /// The timestamp before `t` in `run`, as a new batch at `t` starts.
    fn previous(&mut self, run: usize, t: f64) -> f64 {
        if self.run != run {
            *self = Stamps { run, last: None, before: 0.0 };
        }
        match self.last {
            Some(last) if t == last => self.before,
            // A lower timestamp starts a new run (`Builder::run_for`); should one reach here
            // anyway, it is measured as a first interval rather than a negative one.
            Some(last) if t < last => {
                *self = Stamps { run, last: Some(t), before: 0.0 };
                0.0
            }
            Some(last) => {
                self.before = last;
                self.last = Some(t);
                last
            }
            None => {
                self.last = Some(t);
                0.0
            }
        }
    }
}

/// A finished block's times from its run's footers, once the whole log is read: a footer may
/// come after blocks were finished (a `perf stat` run without `-I` prints rows, then footers, and
/// a batch can end before them). Times from rows and interval lengths stay.
pub(crate) fn apply_footers(block: &mut Block, run: &Run) {
    if matches!(block.duration, None | Some(Timed { source: TimeSource::ElapsedLine { .. }, .. })) {
        block.duration = run.elapsed;
    }
    if matches!(block.user_time, None | Some(Timed { source: TimeSource::UserLine { .. }, .. })) {
        block.user_time = run.user;
    }
    if matches!(block.system_time, None | Some(Timed { source: TimeSource::SysLine { .. }, .. })) {
        block.system_time = run.system;
    }
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
/// `CLK`. A broken weak group has members with different shares but no repeated
/// event, so it stays one group.
fn assign_groups(rows: &mut [LogRow]) {
    let mut groups: Vec<usize> = Vec::with_capacity(rows.len());
    let mut group = 0;
    let mut start = 0;
    // A group has a few events: a list is faster to search than a hash set is to hash into.
    let mut seen: Vec<&EventKey> = Vec::with_capacity(16);
    let mut after_tool = false;
    for (i, row) in rows.iter().enumerate() {
        let repeated = seen.contains(&&row.key);
        let starts_group = !seen.is_empty()
            && (repeated || row.key.is_slots() || (after_tool && !row.key.is_tool()));
        if starts_group {
            group += 1;
            seen.clear();
            let moved = if repeated { moved_rows(&rows[start..i], row) } else { 0 };
            start = i - moved;
            for (g, r) in groups[start..].iter_mut().zip(&rows[start..i]) {
                *g = group;
                if !seen.contains(&&r.key) {
                    seen.push(&r.key);
                }
            }
        }
        if !seen.contains(&&row.key) {
            seen.push(&row.key);
        }
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
fn moved_rows(group: &[LogRow], repeated: &LogRow) -> usize {
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
fn run_share(row: &LogRow) -> Option<f64> {
    if row.key.is_tool() || row.key.retire_latency || !matches!(row.value, PrintedCount::Value(_)) {
        return None;
    }
    Some(row.running_pct.unwrap_or(100.0))
}

/// A tool-event row's value in seconds: perf prints these rows in ns.
fn tool_row_seconds(row: &LogRow) -> Option<Timed> {
    match row.value {
        PrintedCount::Value(v) => {
            let seconds = match row.unit.as_str() {
                "msec" => v * 1e-3,
                "s" | "sec" => v,
                _ => v * 1e-9,
            };
            Some(Timed { seconds, source: TimeSource::Row { line: row.line } })
        }
        PrintedCount::NotCounted | PrintedCount::NotSupported => None,
    }
}

/// Sets the times of one batch's blocks (one run, one interval), whose interval length is
/// measured from `previous`.
fn assign_times(blocks: &mut [Block], run: &Run, previous: f64) {
    // Tool rows may be printed in one block only (for example on CPU0 with -A); the other blocks
    // of the same run and interval share them.
    let mut shared: [Option<Timed>; TOOL_EVENTS.len()] = [None; TOOL_EVENTS.len()];
    for row in blocks.iter().flat_map(|b| &b.rows) {
        if row.key.is_tool()
            && let Some(t) = tool_row_seconds(row)
            && let Some(i) = TOOL_EVENTS.iter().position(|n| *n == row.key.name)
        {
            shared[i].get_or_insert(t);
        }
    }
    let sibling = |name: &str| TOOL_EVENTS.iter().position(|n| *n == name).and_then(|i| shared[i]);
    for block in blocks.iter_mut() {
        let own = |name: &str| {
            block
                .rows
                .iter()
                .find(|r| r.key.is_tool() && r.key.name == name)
                .and_then(tool_row_seconds)
        };
        let interval_length = block
            .interval
            .map(|t| Timed { seconds: t - previous, source: TimeSource::IntervalLength });
        block.duration = own("duration_time")
            .or_else(|| sibling("duration_time"))
            .or(interval_length)
            .or(run.elapsed);
        block.user_time = own("user_time").or_else(|| sibling("user_time")).or(run.user);
        block.system_time = own("system_time").or_else(|| sibling("system_time")).or(run.system);
    }
}
