//! Reads a `perf stat` log block by block, in one pass over any [`BufRead`].
//!
//! [`Reader`] owns the line loop: it reads lines ahead only to detect the layout, hands each
//! line to its layout's reader and each item to the [`Builder`], and turns line errors into
//! [`ImportError`]s (a mix of layouts named as such, no perf output before the error named as
//! "not perf stat"). Lines that are not perf's are counted in [`Skipped`], never kept.
//!
//! Memory is bounded by construction, whatever the input: a line is at most [`MAX_LINE`]
//! bytes (a longer one is an error, so `/dev/zero` ends at once), the look-ahead for layout
//! detection at most [`AHEAD_BYTES`] and [`AHEAD_LINES`], the warnings kept at most [`WARNINGS_KEPT`] between two
//! takes (the rest are counted), the rows held back before a header at most [`HELD_ROWS`];
//! beyond that, one batch of blocks (one `-I` interval).

use std::collections::VecDeque;
use std::io::BufRead;

use crate::assemble::{self, Builder, FROM_LAYOUT_MIX, FROM_READER, Item, Noted};
use crate::error::{self, LineError};
use crate::log::{Block, PerfLog, PrintedMetric, Run};
use crate::mode::Layout;
use crate::number::Numbers;
use crate::skipped::Skipped;
use crate::text::Line;
use crate::{ImportError, Warning, csv, json, text};

/// The longest line read, in bytes. perf's lines are a few hundred bytes (a `-j` line with a
/// long event name and cgroup a few thousand).
pub const MAX_LINE: usize = 1 << 20;

/// How many bytes and lines layout detection reads ahead at most.
const AHEAD_BYTES: u64 = 4 << 20;
const AHEAD_LINES: usize = 20_000;

/// How many warnings are kept between two takes; the others are counted.
const WARNINGS_KEPT: usize = 1000;

/// How many rows without perf's marks are held back, before a run's header or first marked
/// row, to be told apart from a workload's output that happens to look like rows.
const HELD_ROWS: usize = 256;

/// Reads `perf stat` output block by block.
///
/// Blocks come in log order, each finished (its groups split and its times known) once its
/// `-I` interval or run has ended. The whole-log functions ([`crate::parse`] and friends) are
/// [`Reader::into_log`] over this reader.
///
/// Differences from the whole log, both for logs perf never writes: rows of an interval that
/// come back after another interval's rows make a second block, and a footer printed after
/// the blocks of a run were finished reaches them only through [`Reader::into_log`].
pub struct Reader<R> {
    input: R,
    source_name: String,
    layout: Layout,
    /// Lines read ahead to detect the layout, not yet processed: text and whether it ended
    /// with a newline.
    ahead: VecDeque<(String, bool)>,
    buf: Vec<u8>,
    /// Lines read so far (1-based number of the last one).
    lines: usize,
    bytes: u64,
    builder: Builder,
    numbers: Numbers,
    warnings: Vec<Noted>,
    /// Warnings found beyond [`WARNINGS_KEPT`] and not kept.
    warnings_dropped: usize,
    /// Warnings of the line being read, before they are ranked.
    scratch: Vec<Warning>,
    /// Rows of another layout among the skipped lines: that layout, its first line, how many.
    mixed: Vec<(String, usize, usize)>,
    /// The first non-blank line, for "not perf stat" errors.
    first_line: Option<String>,
    skipped: Skipped,
    /// Rows without perf's marks read while no run is open, held until a marked line says
    /// whether they are perf's: a header after them makes them the workload's.
    held: Vec<(Item, String)>,
    /// Whether a run is open: a header or row seen and no footer since.
    open: bool,
    /// The prefix the current run's rows have (`-I` timestamp, aggregation id).
    shape: Option<(bool, bool)>,
    seen_perf: bool,
    seen_item: bool,
    seen_row: bool,
    state: State,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    /// The input is exhausted and the last batch finished.
    Done,
    /// An error was returned; nothing more is read.
    Failed,
}

impl<R: BufRead> Reader<R> {
    /// A reader that detects the layout from the first lines. `source_name` (a path or `-`)
    /// is used in errors.
    pub fn new(input: R, source_name: &str) -> Result<Reader<R>, ImportError> {
        Reader::with_layout(input, source_name, None)
    }

    /// A reader for the given layout, or one that detects it when `layout` is `None`.
    pub fn with_layout(
        input: R,
        source_name: &str,
        layout: Option<Layout>,
    ) -> Result<Reader<R>, ImportError> {
        let mut reader = Reader {
            input,
            source_name: source_name.to_string(),
            layout: layout.clone().unwrap_or(Layout::Std),
            ahead: VecDeque::new(),
            buf: Vec::new(),
            lines: 0,
            bytes: 0,
            builder: Builder::new(),
            numbers: Numbers::default(),
            warnings: Vec::new(),
            warnings_dropped: 0,
            scratch: Vec::new(),
            mixed: Vec::new(),
            first_line: None,
            skipped: Skipped::default(),
            held: Vec::new(),
            open: false,
            shape: None,
            seen_perf: false,
            seen_item: false,
            seen_row: false,
            state: State::Reading,
        };
        if layout.is_none() {
            // Detection looks at the lines from the first one that is perf's in some layout
            // (a workload's output may come first), within a bounded look-ahead; they are kept
            // and read again as rows.
            let mut meaningful = 0;
            let mut found = false;
            let mut ahead_bytes = 0;
            while meaningful < crate::DETECT_LINES
                && ahead_bytes < AHEAD_BYTES
                && reader.ahead.len() < AHEAD_LINES
            {
                let Some(ended) = reader.fill()? else { break };
                let line = String::from_utf8_lossy(&reader.buf).into_owned();
                ahead_bytes += line.len() as u64 + 1;
                found = found || crate::perf_line(&line);
                if found && crate::meaningful(&line) {
                    meaningful += 1;
                }
                reader.ahead.push_back((line, ended));
            }
            let from = reader.ahead.iter().position(|(l, _)| crate::perf_line(l)).unwrap_or(0);
            reader.layout =
                crate::detect_lines(reader.ahead.iter().skip(from).map(|(l, _)| l.as_str()));
        }
        Ok(reader)
    }

    /// The layout being read.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The runs seen so far (a run's header comes before its blocks), from run
    /// [`Reader::runs_offset`] on: all of them unless [`Reader::forget_runs_before`] was called.
    pub fn runs(&self) -> &[Run] {
        &self.builder.runs
    }

    /// The index of the first run in [`Reader::runs`].
    pub fn runs_offset(&self) -> usize {
        self.builder.runs_offset
    }

    /// Run `index` ([`Block::run`]), when it is still kept.
    pub fn run(&self, index: usize) -> Option<&Run> {
        index.checked_sub(self.builder.runs_offset).and_then(|i| self.builder.runs.get(i))
    }

    /// How many runs the log has had so far.
    pub fn run_count(&self) -> usize {
        self.builder.runs_offset + self.builder.runs.len()
    }

    /// Forgets the runs before `run` once every block of theirs has been taken: a reader of
    /// a long log of many runs that no longer needs them keeps bounded memory. [`Reader::into_log`]
    /// then returns only the runs kept.
    pub fn forget_runs_before(&mut self, run: usize) {
        self.builder.forget_runs_before(run);
    }

    /// Bytes of input read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// The number convention the log's numbers have shown so far.
    pub fn numbers(&self) -> &Numbers {
        &self.numbers
    }

    /// The lines skipped so far because they are not perf's output.
    pub fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    /// Finished blocks not yet taken: the rest of the interval (or run) the last one came from.
    /// Taking them too ends a prefix of the log at an interval's end.
    pub fn finished_blocks(&self) -> usize {
        self.builder.ready.len()
    }

    /// Whether the whole input has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done && self.builder.ready.is_empty()
    }

    /// The warnings found since the last call, in the order found (roughly line order; those
    /// about a mix of layouts come at the end of the input), at most [`WARNINGS_KEPT`].
    pub fn take_warnings(&mut self) -> Vec<Warning> {
        self.warnings.drain(..).map(|(w, _)| w).collect()
    }

    /// Warnings found and not kept (beyond [`WARNINGS_KEPT`] between two takes), since the
    /// start.
    pub fn warnings_dropped(&self) -> usize {
        self.warnings_dropped
    }

    /// The next finished block, `None` after the last. An error ends the reading.
    pub fn next_block(&mut self) -> Result<Option<Block>, ImportError> {
        loop {
            // Blocks made before any counter row (Default metric-group lines alone) are held
            // back: without a row the input is not perf stat output at all.
            if (self.seen_row || self.state == State::Done)
                && let Some(block) = self.builder.ready.pop_front()
            {
                return Ok(Some(block));
            }
            match self.state {
                State::Reading => {}
                State::Done | State::Failed => return Ok(None),
            }
            match self.step() {
                Ok(()) => {}
                Err(err) => {
                    self.state = State::Failed;
                    self.builder.ready.clear();
                    return Err(err);
                }
            }
        }
    }

    /// Reads whole intervals (every block of the last one read) until at least `budget` bytes
    /// and one block are read: the whole log when the input ended there, else the log so far
    /// (its warnings taken) with this reader for the rest, so that a caller can choose what to
    /// do from a long log's beginning and stream the rest in bounded memory.
    pub fn prefix(mut self, budget: u64) -> Result<(PerfLog, Option<Reader<R>>), ImportError> {
        let mut blocks = Vec::new();
        while blocks.is_empty() || self.bytes_read() < budget || self.finished_blocks() > 0 {
            match self.next_block()? {
                Some(block) => blocks.push(block),
                None => break,
            }
        }
        if self.is_done() {
            return Ok((self.into_log(blocks)?, None));
        }
        let log = PerfLog {
            layout: self.layout().clone(),
            runs: self.runs().to_vec(),
            blocks,
            warnings: self.take_warnings(),
            warnings_dropped: self.warnings_dropped(),
            skipped: self.skipped().clone(),
            numbers: self.numbers().clone(),
        };
        Ok((log, Some(self)))
    }

    /// Reads the rest and returns the whole log: `blocks` (what was taken before) and the
    /// blocks still to come, with every run and warning (in line order), and each block's
    /// times completed with footers printed after it was finished.
    pub fn into_log(mut self, mut blocks: Vec<Block>) -> Result<PerfLog, ImportError> {
        while let Some(block) = self.next_block()? {
            blocks.push(block);
        }
        let offset = self.builder.runs_offset;
        let runs = std::mem::take(&mut self.builder.runs);
        for block in &mut blocks {
            if let Some(run) = block.run.checked_sub(offset).and_then(|i| runs.get(i)) {
                assemble::apply_footers(block, run);
            }
        }
        // Stable: in one line, the reader's warnings, then a mix of layouts, then the
        // builder's.
        self.warnings.sort_by_key(|(w, from)| (w.line, *from));
        let warnings = self.warnings.into_iter().map(|(w, _)| w).collect();
        Ok(PerfLog {
            layout: self.layout,
            runs,
            blocks,
            warnings,
            warnings_dropped: self.warnings_dropped,
            skipped: self.skipped,
            numbers: self.numbers,
        })
    }

    /// Reads and places one line, or finishes at the end of the input.
    fn step(&mut self) -> Result<(), ImportError> {
        if let Some((line, ended)) = self.ahead.pop_front() {
            return self.dispatch(&line, ended);
        }
        let Some(ended) = self.fill()? else { return self.finish() };
        // The line is read where it lies; the buffer is put back for the next one.
        let buf = std::mem::take(&mut self.buf);
        // Invalid UTF-8, which perf only prints inside command or thread names, is replaced
        // by U+FFFD.
        let result = match std::str::from_utf8(&buf) {
            Ok(line) => self.dispatch(line, ended),
            Err(_) => self.dispatch(&String::from_utf8_lossy(&buf), ended),
        };
        self.buf = buf;
        result
    }

    fn dispatch(&mut self, line: &str, ended: bool) -> Result<(), ImportError> {
        if ended {
            return self.line(line);
        }
        if !line.trim().is_empty() {
            self.note_first_line(line);
            self.unterminated(line)?;
        }
        self.finish()
    }

    /// Reads the next line into `buf` without its newline; `Some(ended)` tells whether it had
    /// one, `None` is the end of the input. A line longer than [`MAX_LINE`] is an error.
    fn fill(&mut self) -> Result<Option<bool>, ImportError> {
        self.buf.clear();
        let mut read = 0usize;
        let ended = loop {
            let available = match self.input.fill_buf() {
                Ok(bytes) => bytes,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    return Err(ImportError::Read {
                        source_name: self.source_name.clone(),
                        message: err.to_string(),
                    });
                }
            };
            if available.is_empty() {
                break false;
            }
            let (take, found) = match memchr::memchr(b'\n', available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            let content = if found { take - 1 } else { take };
            if self.buf.len() + content > MAX_LINE {
                self.bytes += read as u64;
                return Err(ImportError::LineTooLong {
                    source_name: self.source_name.clone(),
                    line: self.lines + 1,
                    limit: MAX_LINE,
                });
            }
            self.buf.extend_from_slice(&available[..content]);
            self.input.consume(take);
            read += take;
            if found {
                break true;
            }
        };
        if read == 0 {
            return Ok(None);
        }
        self.bytes += read as u64;
        self.lines += 1;
        Ok(Some(ended))
    }

    fn note_first_line(&mut self, line: &str) {
        if self.first_line.is_none() && !line.trim().is_empty() {
            self.first_line = Some(error::shorten(line.trim(), 60));
        }
    }

    /// Line number of the line being read.
    fn number(&self) -> usize {
        self.lines - self.ahead.len()
    }

    /// Reads `line` (without `\r`) in the log's layout.
    fn read(&mut self, line: &str, n: usize) -> Result<Line, LineError> {
        match &self.layout {
            Layout::Std => text::read_line(line, n, &mut self.numbers),
            Layout::Csv(sep) => csv::read_line(line, n, sep, &mut self.numbers),
            Layout::Json => json::read_line(line, n, &mut self.numbers),
        }
    }

    /// Reads one complete line.
    fn line(&mut self, raw: &str) -> Result<(), ImportError> {
        let n = self.number();
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        self.note_first_line(line);
        // Two rows pasted onto one line (a mail or a terminal that lost a newline): both read,
        // and said.
        if self.layout == Layout::Std
            && let Some(at) = text::pasted_row(line)
        {
            self.scratch.push(Warning {
                line: n,
                message: format!(
                    "two counter rows on one line (pasted together?): read both, the second from column {}",
                    at + 1
                ),
            });
            let (first, second) = line.split_at(at);
            for part in [first, second] {
                let read = self.read(part, n).map_err(|err| self.fail(err, line))?;
                self.take(read, part, n)?;
            }
            return Ok(());
        }
        let read = self.read(line, n).map_err(|err| self.fail(err, line))?;
        self.take(read, line, n)
    }

    /// Places what a line held.
    fn take(&mut self, read: Line, line: &str, n: usize) -> Result<(), ImportError> {
        match read {
            Line::Nothing => {}
            Line::Noise(why) => self.noise(line, n, why),
            Line::Item(item) => {
                if let Item::Row(raw) = &item {
                    note_appended_text(&raw.metrics, n, &mut self.scratch);
                } else if let Item::Metric { metric, .. } = &item {
                    note_appended_text(std::slice::from_ref(metric), n, &mut self.scratch);
                }
                self.perf_item(item);
            }
            Line::WeakRow(item) => self.weak_row(item, line, n),
        }
        Ok(())
    }

    /// A line that is not perf's: counted where it lies, and noted when it is a row of another
    /// layout.
    fn noise(&mut self, line: &str, n: usize, why: &str) {
        // Only the first few are quoted: formatting every one was a third of the time spent
        // on a log with a workload's lines.
        if self.skipped.wants_sample() {
            self.skipped.add(n, &format!("skipped `{}`: {why}", error::shorten(line.trim(), 60)));
        } else {
            self.skipped.add(n, "");
        }
        if let Some(other) = crate::other_layout_row(line, n, &self.layout) {
            match self.mixed.iter_mut().find(|(o, _, _)| *o == other) {
                Some((_, _, count)) => *count += 1,
                None => self.mixed.push((other, n, 1)),
            }
        }
    }

    /// A row without perf's marks (`1,234 cycles`). While no run is open it is held until a
    /// marked line tells (a header after it makes it the workload's); in a run whose rows have
    /// a `-I` timestamp or an aggregation id that it lacks, it is the workload's.
    fn weak_row(&mut self, item: Item, line: &str, n: usize) {
        let Item::Row(raw) = &item else { return self.perf_item(item) };
        let shape = (raw.prefix.interval.is_some(), raw.prefix.aggr.is_some());
        if let Some(known) = self.shape
            && known != shape
        {
            let why = if known.0 && !shape.0 {
                "a row without the `-I` timestamp the rows around it have"
            } else if known.1 && !shape.1 {
                "a row without the aggregation id the rows around it have"
            } else {
                "a row shaped unlike the rows around it"
            };
            return self.noise(line, n, why);
        }
        if self.open {
            return self.perf_item(item);
        }
        self.held.push((item, line.to_string()));
        if self.held.len() >= HELD_ROWS {
            self.release_held(true);
        }
    }

    /// The held rows: read as rows (`rows`), or counted as the workload's.
    fn release_held(&mut self, rows: bool) {
        for (item, text) in std::mem::take(&mut self.held) {
            let Item::Row(raw) = &item else { continue };
            let n = raw.line;
            if rows {
                self.perf_item(item);
            } else {
                self.noise(&text, n, "a count and a word before perf's header, not in its block");
            }
        }
    }

    /// Hands one of perf's items to the builder, ranking the line's warnings first.
    fn perf_item(&mut self, item: Item) {
        if !self.held.is_empty() {
            // A header after held rows makes them the workload's; any other line of perf's
            // makes them perf's.
            self.release_held(!matches!(item, Item::RunHeader { .. }));
        }
        let ends_run = matches!(item, Item::Elapsed { .. } | Item::User { .. } | Item::Sys { .. });
        self.skipped.perf_line(self.seen_perf, self.open);
        self.seen_perf = true;
        match &item {
            Item::RunHeader { .. } => {
                self.open = true;
                self.shape = None;
            }
            _ if ends_run => {
                self.open = false;
                self.shape = None;
            }
            Item::Row(raw) => {
                self.open = true;
                self.shape
                    .get_or_insert((raw.prefix.interval.is_some(), raw.prefix.aggr.is_some()));
            }
            _ => {}
        }
        for w in self.scratch.drain(..) {
            if self.warnings.len() < WARNINGS_KEPT {
                self.warnings.push((w, FROM_READER));
            } else {
                self.warnings_dropped += 1;
            }
        }
        self.seen_item = true;
        self.seen_row |= matches!(item, Item::Row(_));
        self.builder.push(item, &mut self.warnings);
        if self.warnings.len() > WARNINGS_KEPT {
            self.warnings_dropped += self.warnings.len() - WARNINGS_KEPT;
            self.warnings.truncate(WARNINGS_KEPT);
        }
    }

    /// The last line when the input does not end with a newline. A row or metric there is
    /// kept with a warning (it may be cut in its event name or metric); a line that cannot be
    /// read is reported as truncated and skipped rather than failing the whole log, unless no
    /// row came before it (then the error says what is wrong with it).
    fn unterminated(&mut self, raw: &str) -> Result<(), ImportError> {
        let n = self.number();
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let shown = error::shorten(line.trim(), 60);
        match self.read(line, n) {
            Ok(Line::Item(item) | Line::WeakRow(item)) => {
                if matches!(item, Item::Row(_) | Item::Metric { .. }) {
                    self.scratch.push(Warning {
                        line: n,
                        message: format!(
                            "the log ends without a newline after `{shown}`: the file may be truncated and this last row cut short; it was read as it is"
                        ),
                    });
                }
                self.perf_item(item);
            }
            Ok(Line::Nothing) => {}
            // A row cut short reads as noise; after perf's rows, say it was cut.
            Ok(Line::Noise(_)) if self.seen_row && crate::number::looks_numeric(line.trim()) => {
                self.warnings.push((
                    Warning {
                        line: n,
                        message: format!(
                            "truncated last line `{shown}` (the log ends without a newline, and it is not a complete row); skipped"
                        ),
                    },
                    FROM_READER,
                ));
            }
            Ok(Line::Noise(why)) => self.noise(line, n, why),
            Err(err) if !self.seen_row => return Err(self.fail(err, line)),
            Err(err) => {
                self.scratch.push(Warning {
                    line: n,
                    message: format!(
                        "truncated last line `{shown}` (the log ends without a newline; {}); skipped",
                        err.message
                    ),
                });
                self.scratch.drain(..).for_each(|w| self.warnings.push((w, FROM_READER)));
            }
        }
        Ok(())
    }

    /// The end of the input: the held rows are read, the last batch is finished and the notes
    /// on a mix of layouts are added.
    fn finish(&mut self) -> Result<(), ImportError> {
        if !self.held.is_empty() {
            self.release_held(true);
        }
        self.skipped.end(self.seen_perf);
        if !self.seen_row {
            return Err(crate::not_perf_stat(
                &self.source_name,
                self.first_line.as_deref(),
                None,
                &self.skipped,
            ));
        }
        self.builder.finish_batch();
        let this = crate::layout_name(&self.layout);
        for (other, first, count) in self.mixed.drain(..) {
            self.warnings.push((
                Warning {
                    line: first,
                    message: format!(
                        "a mix of layouts in one file: the log was read in the {this} layout, but {count} line(s) from line {first} on are rows of the {other} layout and were skipped; split the file and read each part",
                    ),
                },
                FROM_LAYOUT_MIX,
            ));
        }
        self.state = State::Done;
        Ok(())
    }

    /// The error for a line that must be a row and cannot be read.
    fn fail(&self, mut err: LineError, line: &str) -> ImportError {
        // An error before anything perf-like was seen means the input is not perf stat
        // output at all; say that rather than complain about its first line.
        if !self.seen_item && self.held.is_empty() {
            return crate::not_perf_stat(
                &self.source_name,
                self.first_line.as_deref(),
                Some(&err),
                &self.skipped,
            );
        }
        // A row of another layout after rows of this one: say that, not what this layout's
        // reader made of it.
        if let Some(other) = crate::other_layout_row(line, err.line, &self.layout) {
            err.message = format!(
                "a mix of layouts in one file: this line is a row of the {other} layout, but the rows before it are in the {} layout; split the file and read each part",
                crate::layout_name(&self.layout)
            );
            err.byte = 0;
        }
        err.into_import(&self.source_name, line)
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<Block, ImportError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_block().transpose()
    }
}

/// Text appended after a metric's name (not perf's output) is named, not silently dropped.
fn note_appended_text(metrics: &[PrintedMetric], n: usize, warnings: &mut Vec<Warning>) {
    for m in metrics {
        if let Some(note) = &m.note {
            warnings.push(Warning {
                line: n,
                message: format!(
                    "ignored `{}` after the metric name `{}` (not perf's output)",
                    error::shorten(note, 60),
                    m.name
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVALS: &str = "\
     1.001000000          1,000      cycles
     1.001000000          2,000      instructions
     2.002000000          1,500      cycles
     2.002000000          2,500      instructions
";

    #[test]
    fn blocks_come_one_interval_at_a_time() {
        let mut reader = Reader::new(INTERVALS.as_bytes(), "i.txt").unwrap();
        let first = reader.next_block().unwrap().unwrap();
        assert_eq!(first.interval, Some(1.001));
        assert_eq!(first.rows.len(), 2);
        let length = first.duration.unwrap().seconds;
        assert!((length - 1.001).abs() < 1e-12, "{length}");
        let second = reader.next_block().unwrap().unwrap();
        assert_eq!(second.interval, Some(2.002));
        let length = second.duration.unwrap().seconds;
        assert!((length - 1.001).abs() < 1e-12, "{length}");
        assert!(reader.next_block().unwrap().is_none());
        assert!(reader.is_done());
        assert_eq!(reader.bytes_read(), INTERVALS.len() as u64);
    }

    #[test]
    fn a_timestamp_going_back_starts_a_new_run() {
        let twice = format!("{INTERVALS}{INTERVALS}");
        let log = crate::parse(&twice, "twice.txt").unwrap();
        let runs: Vec<usize> = log.blocks.iter().map(|b| b.run).collect();
        assert_eq!(runs, [0, 0, 1, 1]);
        assert_eq!(log.runs.len(), 2);
        let third = log.blocks[2].duration.unwrap().seconds;
        assert!((third - 1.001).abs() < 1e-12, "{third}");
    }

    #[test]
    fn a_footer_after_finished_blocks_reaches_them_in_the_whole_log() {
        // A second run, headed (a row without the first run's timestamps and no header would
        // be taken for the workload's output).
        let text = "     1.001000000          1,000      cycles\n\
                    \x20Performance counter stats for 'x':\n\
                    1,000      cycles\n\
                    \n       2.5 seconds time elapsed\n";
        let log = crate::parse(text, "f.txt").unwrap();
        assert_eq!(log.blocks.len(), 2);
        assert_eq!(log.blocks[1].duration.map(|t| t.seconds), Some(2.5));
        // The interval block keeps its interval length.
        assert_eq!(log.blocks[0].duration.map(|t| t.seconds), Some(1.001));
    }

    #[test]
    fn runs_stay_bounded() {
        // Headers without rows do not pile up runs.
        let headers = " Performance counter stats for 'x':\n".repeat(10_000);
        let log = crate::parse(&format!("{headers}     1,000      cycles\n"), "h.txt").unwrap();
        assert_eq!(log.runs.len(), 1);
        assert_eq!(log.runs[0].header_line, Some(10_000));
        // A reader forgets the runs whose blocks were taken.
        let run = " Performance counter stats for 'x':\n\n     1,000      cycles\n\n       1.0 seconds time elapsed\n";
        let text = run.repeat(50);
        let mut reader = Reader::new(text.as_bytes(), "r.txt").unwrap();
        let mut seen = 0;
        while let Some(block) = reader.next_block().unwrap() {
            reader.forget_runs_before(block.run);
            assert!(reader.runs().len() <= 2, "{}", reader.runs().len());
            assert_eq!(reader.run(block.run).unwrap().header_line, Some(1 + 5 * block.run));
            seen += 1;
        }
        assert_eq!((seen, reader.run_count()), (50, 50));
    }

    #[test]
    fn errors_end_the_reading() {
        let text = format!("{INTERVALS}     3.003000000          1,02      cycles\n");
        let mut reader = Reader::new(text.as_bytes(), "e.txt").unwrap();
        let mut seen = 0;
        let err = loop {
            match reader.next_block() {
                Ok(Some(_)) => seen += 1,
                Ok(None) => panic!("the bad count must fail"),
                Err(err) => break err,
            }
        };
        // The second interval was still open when line 5 failed.
        assert_eq!(seen, 1);
        assert!(err.to_string().starts_with("e.txt:5:"), "{err}");
        assert!(reader.next_block().unwrap().is_none());
    }
}
