//! Streaming aggregation: feeds lines one at a time into per-group sample vectors, sets aside
//! the enable-time noise samples and malformed lines, and turns the groups into a sorted report.
//!
//! Memory is the samples kept (8 bytes each) plus one key per group and the first few
//! malformed lines; a line is dropped as soon as it has been read.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufRead, BufReader, Read};

use regex_lite::Regex;
use serde::Serialize;

use crate::error::LatencyError;
use crate::parse::{self, EventLine, NumberError};
use crate::stats::Stats;

/// The seed's events: the XSAVES and XRSTORS latency tracepoints.
pub const DEFAULT_EVENT_REGEX: &str = "^x86_fpu_latency_(xsave|xrstor)$";
/// The seed's value field.
pub const DEFAULT_VALUE_FIELD: &str = "latency";
/// The seed's grouping, after the event name.
pub const DEFAULT_GROUP_BY: [&str; 2] = ["RFBM", "XINUSE"];
/// How far (in ns) a value may be from its line's timestamp and still be taken for the
/// enable-time noise sample. It covers the microsecond truncation of the printed timestamp, the
/// time between the probe's `trace_clock()` and the ring-buffer timestamp, and the up to one
/// jiffy (10 ms at HZ=100) of skew between CPU clocks when the buffer uses the `global` clock.
pub const NOISE_TOLERANCE_NS: u64 = 10_000_000;
/// At most this many noise samples are listed one by one; all are counted.
const NOISE_LISTED: usize = 1000;
/// Malformed lines are quoted up to this many bytes.
const QUOTE_BYTES: usize = 160;
/// Big reads keep the per-read overhead negligible next to the parsing.
const READ_BUFFER_BYTES: usize = 1 << 20;
/// A group-by value longer than this is no real register mask or id: the line is malformed
/// (else one damaged line would make a table row megabytes wide).
const MAX_GROUP_VALUE_BYTES: usize = 256;

/// What to collect and how to group it.
#[derive(Debug, Clone)]
pub struct Options {
    event: Regex,
    value_field: String,
    group_by: Vec<String>,
    /// Set aside samples that match the enable-time noise rule (see the crate docs).
    pub detect_noise: bool,
    /// How many malformed lines to keep for the report; all are counted.
    pub malformed_listed: usize,
}

impl Options {
    /// Checks and compiles the options. `event_regex` is matched against the event name
    /// (unanchored, like `grep -E`); an empty `group_by` groups by event name only.
    pub fn new(
        event_regex: &str,
        value_field: &str,
        group_by: &[String],
    ) -> Result<Options, LatencyError> {
        let event = Regex::new(event_regex).map_err(|source| LatencyError::EventRegex {
            pattern: event_regex.to_owned(),
            source: Box::new(source),
        })?;
        check_field_name("--value", value_field)?;
        for (idx, name) in group_by.iter().enumerate() {
            check_field_name("--group-by", name)?;
            if name == value_field || group_by[..idx].contains(name) {
                return Err(LatencyError::DuplicateField { name: name.clone() });
            }
        }
        Ok(Options {
            event,
            value_field: value_field.to_owned(),
            group_by: group_by.to_vec(),
            detect_noise: true,
            malformed_listed: 5,
        })
    }

    /// The seed's selection: XSAVES/XRSTORS latency grouped by RFBM and XINUSE.
    pub fn xsave_default() -> Options {
        let group_by = DEFAULT_GROUP_BY.map(str::to_owned);
        Options::new(DEFAULT_EVENT_REGEX, DEFAULT_VALUE_FIELD, &group_by)
            .expect("the default options are valid")
    }

    /// The value field's name.
    pub fn value_field(&self) -> &str {
        &self.value_field
    }

    /// The group-by fields' names, in column order.
    pub fn group_by(&self) -> &[String] {
        &self.group_by
    }
}

fn check_field_name(flag: &'static str, name: &str) -> Result<(), LatencyError> {
    let bad = name.is_empty()
        || name.bytes().any(|b| parse::is_blank(b) || b == b':' || b == b'=' || b == b'\n');
    if bad { Err(LatencyError::FieldName { flag, name: name.to_owned() }) } else { Ok(()) }
}

/// One value of a group-by field. Integers (decimal or `0x` hex) are grouped and sorted by value,
/// as the seed's sqlite INT columns are; anything else is grouped as text and sorts after them.
#[derive(Debug, Clone)]
pub enum GroupValue {
    /// An integer, printed in hex when it was first seen in hex.
    Int {
        /// The value.
        value: u64,
        /// Whether to print it as `0x…`.
        hex: bool,
    },
    /// Any other text, as bytes (trace text need not be UTF-8).
    Text(Box<[u8]>),
}

impl GroupValue {
    fn parse(text: &[u8]) -> GroupValue {
        match parse::parse_u64(text) {
            Ok(value) => {
                GroupValue::Int { value, hex: text.starts_with(b"0x") || text.starts_with(b"0X") }
            }
            Err(_) => GroupValue::Text(text.into()),
        }
    }

    /// Appends this value's grouping identity (not its display base) to a key.
    fn encode_raw(text: &[u8], key: &mut Vec<u8>) {
        match parse::parse_u64(text) {
            Ok(value) => {
                key.push(0);
                key.extend_from_slice(&value.to_le_bytes());
            }
            Err(_) => {
                key.push(1);
                key.extend_from_slice(&(text.len() as u32).to_le_bytes());
                key.extend_from_slice(text);
            }
        }
    }
}

impl PartialEq for GroupValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for GroupValue {}

impl PartialOrd for GroupValue {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for GroupValue {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        match (self, other) {
            (GroupValue::Int { value: a, .. }, GroupValue::Int { value: b, .. }) => a.cmp(b),
            (GroupValue::Int { .. }, GroupValue::Text(_)) => Ordering::Less,
            (GroupValue::Text(_), GroupValue::Int { .. }) => Ordering::Greater,
            (GroupValue::Text(a), GroupValue::Text(b)) => a.cmp(b),
        }
    }
}

impl fmt::Display for GroupValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupValue::Int { value, hex: true } => write!(f, "{value:#x}"),
            GroupValue::Int { value, hex: false } => write!(f, "{value}"),
            GroupValue::Text(text) => f.write_str(&String::from_utf8_lossy(text)),
        }
    }
}

impl Serialize for GroupValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One line of the latency result table: an event and group and its statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencyRow {
    /// Event name.
    pub event: String,
    /// Values of the group-by fields, in `Options::group_by` order.
    pub group: Vec<GroupValue>,
    /// Statistics of the group's kept samples.
    pub stats: Stats,
}

/// A sample set aside by the enable-time noise rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoiseSample {
    /// 1-based line number.
    pub line: u64,
    /// Event name.
    pub event: String,
    /// Values of the group-by fields.
    pub group: Vec<GroupValue>,
    /// The excluded value.
    pub value: u64,
    /// The line's timestamp as printed.
    pub timestamp: String,
}

/// A line that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based line number.
    pub line: u64,
    /// What was wrong and what was expected.
    pub reason: String,
    /// The line, cut to a readable length.
    pub text: String,
}

/// Everything learnt from one trace.
#[derive(Debug, Clone)]
pub struct Report {
    /// Where the trace came from (a path or `<stdin>`).
    pub source: String,
    /// The `--event` regex.
    pub event_regex: String,
    /// The value field's name.
    pub value_field: String,
    /// The group-by fields' names.
    pub group_by: Vec<String>,
    /// Groups sorted by event name, then by group values (the seed's `GROUP BY` order).
    pub rows: Vec<LatencyRow>,
    /// Lines read.
    pub lines: u64,
    /// Samples in `rows` (noise excluded).
    pub samples: u64,
    /// Lines of events not selected by `--event`.
    pub other_events: u64,
    /// Whether the noise rule was applied.
    pub noise_detection: bool,
    /// Noise samples excluded, counted.
    pub noise_count: u64,
    /// The first noise samples, in line order.
    pub noise: Vec<NoiseSample>,
    /// Malformed lines, counted.
    pub malformed_count: u64,
    /// The first malformed lines, in line order.
    pub malformed: Vec<Malformed>,
    /// Lines in which the tracer reported lost events.
    pub lost_lines: u64,
    /// Events the tracer said it lost, where it gave a number.
    pub lost_events: u64,
    /// First line reporting lost events.
    pub first_lost_line: Option<u64>,
}

struct Group {
    event: u32,
    values: Vec<GroupValue>,
    samples: Vec<u64>,
}

/// Accepts trace lines one at a time; `finish` turns them into a [`Report`].
pub struct Analyzer {
    opts: Options,
    source: String,
    /// Event name -> index into `event_names`, or `None` when `--event` does not select it, so
    /// the regex runs once per distinct name rather than once per line.
    event_ids: FastMap<Box<[u8]>, Option<u32>>,
    event_names: Vec<String>,
    /// Encoded (event, group values) -> index into `groups`.
    group_ids: FastMap<Box<[u8]>, u32>,
    groups: Vec<Group>,
    key: Vec<u8>,
    /// The last few (event, group values as printed) and their group, tried before the
    /// values are parsed and hashed: a trace repeats a handful of groups in every line.
    recent: Recent<PrintedGroup, u32>,
    /// The last few event names and their index, tried before `event_ids`.
    recent_events: Recent<Box<[u8]>, Option<u32>>,
    /// The value field's name, then the group-by fields' names.
    names: Vec<Box<[u8]>>,
    /// Per line: the value field then each group-by field, as payload byte ranges.
    slots: Vec<Option<(usize, usize)>>,
    lines: u64,
    other_events: u64,
    noise_count: u64,
    noise: Vec<NoiseSample>,
    malformed_count: u64,
    malformed: Vec<Malformed>,
    lost_lines: u64,
    lost_events: u64,
    first_lost_line: Option<u64>,
}

impl Analyzer {
    /// Starts an empty analysis; `source` names the input in the report.
    pub fn new(opts: Options, source: &str) -> Analyzer {
        let fields = 1 + opts.group_by.len();
        let names = std::iter::once(&opts.value_field)
            .chain(&opts.group_by)
            .map(|name| name.as_bytes().into())
            .collect();
        Analyzer {
            opts,
            source: source.to_owned(),
            event_ids: FastMap::default(),
            event_names: Vec::new(),
            group_ids: FastMap::default(),
            groups: Vec::new(),
            key: Vec::with_capacity(64),
            recent: Recent::default(),
            recent_events: Recent::default(),
            names,
            slots: vec![None; fields],
            lines: 0,
            other_events: 0,
            noise_count: 0,
            noise: Vec::new(),
            malformed_count: 0,
            malformed: Vec::new(),
            lost_lines: 0,
            lost_events: 0,
            first_lost_line: None,
        }
    }

    /// Takes one line, with or without its line terminator.
    pub fn feed_line(&mut self, line: &[u8]) {
        self.lines += 1;
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match parse::split_event_line(line) {
            Some(event_line) => self.event_line(event_line, line),
            None => self.other_line(line),
        }
    }

    fn event_id(&mut self, name: &[u8]) -> Option<u32> {
        if let Some(id) = self.recent_events.get(|known| **known == *name) {
            return id;
        }
        if let Some(&id) = self.event_ids.get(name) {
            self.recent_events.put(|| name.into(), id);
            return id;
        }
        let text = String::from_utf8_lossy(name);
        let id = self.opts.event.is_match(&text).then(|| {
            self.event_names.push(text.into_owned());
            (self.event_names.len() - 1) as u32
        });
        self.event_ids.insert(name.into(), id);
        id
    }

    fn event_line(&mut self, event_line: EventLine<'_>, line: &[u8]) {
        let Some(event) = self.event_id(event_line.event) else {
            self.other_events += 1;
            return;
        };
        let payload = event_line.payload;
        if let Some(missing) = self.find_fields(payload) {
            let name = if missing == 0 {
                &self.opts.value_field
            } else {
                &self.opts.group_by[missing - 1]
            };
            let reason = format!(
                "no `{name}` field (expected `{name}:VALUE` or `{name}=VALUE` after the event name)"
            );
            self.malformed(line, reason);
            return;
        }
        if let Some(idx) = (1..self.slots.len())
            .find(|&idx| field(&self.slots, payload, idx).len() > MAX_GROUP_VALUE_BYTES)
        {
            let reason = format!(
                "`{}` value is {} bytes long; a group value has at most {MAX_GROUP_VALUE_BYTES}",
                self.opts.group_by[idx - 1],
                field(&self.slots, payload, idx).len()
            );
            self.malformed(line, reason);
            return;
        }
        let value_text = field(&self.slots, payload, 0);
        let value = match parse::parse_u64(value_text) {
            Ok(value) => value,
            Err(err) => {
                let reason = value_error(&self.opts.value_field, value_text, err);
                self.malformed(line, reason);
                return;
            }
        };
        if self.opts.detect_noise
            && parse::may_be_near(value, event_line.timestamp, NOISE_TOLERANCE_NS)
            && let Some(timestamp) = parse::timestamp_ns(event_line.timestamp)
            && value.abs_diff(timestamp) <= NOISE_TOLERANCE_NS
        {
            self.noise_count += 1;
            if self.noise.len() < NOISE_LISTED {
                let group = (1..self.slots.len())
                    .map(|idx| GroupValue::parse(field(&self.slots, payload, idx)))
                    .collect();
                self.noise.push(NoiseSample {
                    line: self.lines,
                    event: self.event_names[event as usize].clone(),
                    group,
                    value,
                    timestamp: String::from_utf8_lossy(event_line.timestamp).into_owned(),
                });
            }
            return;
        }
        // The values as printed first: a group's spellings are few, and parsing is not needed
        // to find them again.
        let slots = &self.slots;
        let printed_as = |(known_event, values): &PrintedGroup| {
            *known_event == event
                && values.iter().enumerate().all(|(i, v)| **v == *field(slots, payload, i + 1))
        };
        if let Some(group) = self.recent.get(printed_as) {
            self.groups[group as usize].samples.push(value);
            return;
        }
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.extend_from_slice(&event.to_le_bytes());
        for idx in 1..self.slots.len() {
            GroupValue::encode_raw(field(&self.slots, payload, idx), &mut key);
        }
        let group = match self.group_ids.get(key.as_slice()) {
            Some(&group) => group as usize,
            None => {
                let values = (1..self.slots.len())
                    .map(|idx| GroupValue::parse(field(&self.slots, payload, idx)))
                    .collect();
                self.groups.push(Group { event, values, samples: Vec::new() });
                self.group_ids.insert(key.as_slice().into(), (self.groups.len() - 1) as u32);
                self.groups.len() - 1
            }
        };
        let slots = &self.slots;
        let printed =
            || (event, (1..slots.len()).map(|idx| field(slots, payload, idx).into()).collect());
        self.recent.put(printed, group as u32);
        self.groups[group].samples.push(value);
        self.key = key;
    }

    /// Fills `slots` from the payload; returns the index of the first field that is missing.
    fn find_fields(&mut self, payload: &[u8]) -> Option<usize> {
        self.slots.fill(None);
        let mut missing = self.slots.len();
        let slots = &mut self.slots;
        let names = &self.names;
        let base = payload.as_ptr().addr();
        parse::for_each_field(payload, |key, value| {
            let idx = names.iter().position(|name| **name == *key);
            // The first occurrence of a field wins, like a `key:value` lookup would.
            if let Some(idx) = idx
                && slots[idx].is_none()
            {
                let start = value.as_ptr().addr() - base;
                slots[idx] = Some((start, start + value.len()));
                missing -= 1;
            }
            missing > 0
        });
        if missing == 0 { None } else { self.slots.iter().position(Option::is_none) }
    }

    fn other_line(&mut self, line: &[u8]) {
        let text = parse::trim(line);
        if text.is_empty() || text[0] == b'#' || is_preamble(text) {
            return;
        }
        if let Some(lost) = lost_events(text) {
            self.lost_lines += 1;
            self.lost_events += lost.unwrap_or(0);
            self.first_lost_line.get_or_insert(self.lines);
            return;
        }
        self.malformed(
            line,
            "not an ftrace event line (expected `TASK-PID [CPU] [FLAGS] TIMESTAMP: EVENT: FIELDS`)"
                .into(),
        );
    }

    fn malformed(&mut self, line: &[u8], reason: String) {
        self.malformed_count += 1;
        if self.malformed.len() < self.opts.malformed_listed {
            let mut cut = line.len().min(QUOTE_BYTES);
            // Cut on a character boundary when the line is UTF-8, so the quote stays readable.
            while cut < line.len() && cut > 0 && (line[cut] & 0xc0) == 0x80 {
                cut -= 1;
            }
            let mut text = String::from_utf8_lossy(&line[..cut]).into_owned();
            if cut < line.len() {
                text.push('…');
            }
            self.malformed.push(Malformed { line: self.lines, reason, text });
        }
    }

    /// Computes every group's statistics and the report.
    pub fn finish(self) -> Report {
        let mut rows: Vec<LatencyRow> = Vec::with_capacity(self.groups.len());
        let mut samples = 0;
        for mut group in self.groups {
            samples += group.samples.len() as u64;
            let stats =
                Stats::of(&mut group.samples).expect("a group is created with its first sample");
            rows.push(LatencyRow {
                event: self.event_names[group.event as usize].clone(),
                group: group.values,
                stats,
            });
        }
        rows.sort_by(|a, b| {
            a.event.as_bytes().cmp(b.event.as_bytes()).then_with(|| a.group.cmp(&b.group))
        });
        Report {
            source: self.source,
            event_regex: self.opts.event.as_str().to_owned(),
            value_field: self.opts.value_field,
            group_by: self.opts.group_by,
            rows,
            lines: self.lines,
            samples,
            other_events: self.other_events,
            noise_detection: self.opts.detect_noise,
            noise_count: self.noise_count,
            noise: self.noise,
            malformed_count: self.malformed_count,
            malformed: self.malformed,
            lost_lines: self.lost_lines,
            lost_events: self.lost_events,
            first_lost_line: self.first_lost_line,
        }
    }
}

/// The text of field `idx` once `find_fields` has filled every slot.
fn field<'p>(slots: &[Option<(usize, usize)>], payload: &'p [u8], idx: usize) -> &'p [u8] {
    let (start, end) = slots[idx].expect("find_fields filled every slot");
    &payload[start..end]
}

fn value_error(field: &str, text: &[u8], err: NumberError) -> String {
    let text = String::from_utf8_lossy(text);
    format!("`{field}` value {} {}", tmetric_text::quote(&text), err.describe())
}

/// Lines that `trace-cmd report` prints before the events.
fn is_preamble(text: &[u8]) -> bool {
    let is_empty_cpu = text.starts_with(b"CPU ") && text.ends_with(b" is empty");
    text.starts_with(b"cpus=")
        || text.starts_with(b"version =")
        || text.starts_with(b"version=")
        || is_empty_cpu
}

/// `CPU:3 [LOST 12 EVENTS]` (the kernel) or `CPU:3 [12 EVENTS DROPPED]` (trace-cmd): `Some` with
/// the count when one is given.
fn lost_events(text: &[u8]) -> Option<Option<u64>> {
    let rest = text.strip_prefix(b"CPU:")?;
    let open = parse::find_byte(b'[', rest)?;
    let inside = &rest[open + 1..];
    let mentions = |word: &[u8]| inside.windows(word.len()).any(|w| w == word);
    if !mentions(b"LOST") && !mentions(b"DROPPED") {
        return None;
    }
    let digits_at = inside.iter().position(u8::is_ascii_digit);
    Some(digits_at.and_then(|start| {
        let len = inside[start..].iter().take_while(|b| b.is_ascii_digit()).count();
        parse::parse_u64(&inside[start..start + len]).ok()
    }))
}

/// The longest line read, in bytes: ftrace lines are a few hundred bytes. A longer one (a binary
/// file, `/dev/zero`) ends the reading with [`LatencyError::LineTooLong`], so that memory stays
/// bounded whatever the input.
pub const MAX_LINE: usize = 1 << 20;

/// Reads a whole trace and analyses it.
pub fn analyze<R: Read>(input: R, opts: Options, source: &str) -> Result<Report, LatencyError> {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, input);
    let mut analyzer = Analyzer::new(opts, source);
    // Whole lines are read where they lie in the buffer; only a line the buffer's end cuts
    // is put together here.
    let mut partial: Vec<u8> = Vec::new();
    let too_long = |analyzer: &Analyzer| LatencyError::LineTooLong {
        path: analyzer.source.clone(),
        line: analyzer.lines + 1,
        limit: MAX_LINE,
    };
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(LatencyError::Read {
                    path: analyzer.source.clone(),
                    line: analyzer.lines,
                    source,
                });
            }
        };
        if available.is_empty() {
            break;
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', available) {
            // With its newline, a line may be one byte longer than `MAX_LINE`.
            if partial.len() + end + 1 - start > MAX_LINE + 1 {
                return Err(too_long(&analyzer));
            }
            if partial.is_empty() {
                analyzer.feed_line(&available[start..=end]);
            } else {
                partial.extend_from_slice(&available[start..=end]);
                analyzer.feed_line(&partial);
                partial.clear();
            }
            start = end + 1;
        }
        if partial.len() + available.len() - start > MAX_LINE + 1 {
            return Err(too_long(&analyzer));
        }
        partial.extend_from_slice(&available[start..]);
        let read = available.len();
        reader.consume(read);
    }
    if !partial.is_empty() {
        analyzer.feed_line(&partial);
    }
    Ok(analyzer.finish())
}

/// Opens and analyses a trace file; `-` reads standard input.
pub fn analyze_path(path: &str, opts: Options) -> Result<Report, LatencyError> {
    if path == "-" {
        return analyze(io::stdin().lock(), opts, "<stdin>");
    }
    let file = std::fs::File::open(path)
        .map_err(|source| LatencyError::Open { path: path.to_owned(), source })?;
    analyze(file, opts, path)
}

/// An event index and its group values as printed.
type PrintedGroup = (u32, Vec<Box<[u8]>>);

/// The last [`Recent::SIZE`] keys looked up and what they gave, compared byte for byte: a
/// trace names a handful of events and groups over and over, and comparing a few short keys
/// costs less than parsing and hashing one. Bounded in memory; a trace of many keys, where
/// most lookups would miss, stops it after [`Recent::TRIAL`] lookups.
struct Recent<K, V> {
    entries: Vec<(K, V)>,
    /// The entry the next new key replaces, once the cache is full.
    next: usize,
    hits: u64,
    misses: u64,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent { entries: Vec::new(), next: 0, hits: 0, misses: 0 }
    }
}

impl<K, V: Copy> Recent<K, V> {
    const SIZE: usize = 8;
    const TRIAL: u64 = 1024;

    fn in_use(&self) -> bool {
        self.misses < Self::TRIAL || self.hits >= self.misses
    }

    /// The value of the first key `is` accepts.
    fn get(&mut self, is: impl Fn(&K) -> bool) -> Option<V> {
        if !self.in_use() {
            return None;
        }
        let found = self.entries.iter().find(|(k, _)| is(k)).map(|&(_, v)| v);
        match found {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        found
    }

    /// Keeps `key` (made only when the cache is in use).
    fn put(&mut self, key: impl FnOnce() -> K, value: V) {
        if !self.in_use() {
            return;
        }
        if self.entries.len() < Self::SIZE {
            self.entries.push((key(), value));
        } else {
            self.entries[self.next] = (key(), value);
            self.next = (self.next + 1) % Self::SIZE;
        }
    }
}

/// A small multiplicative hasher (the FxHash scheme): the keys are short byte strings made from
/// trusted local input, so SipHash's flooding resistance would only cost throughput.
#[derive(Default, Clone, Copy)]
struct FastHasher {
    hash: u64,
}

impl FastHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("chunks_exact gives 8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn analyze_text(text: &str, opts: Options) -> Report {
        analyze(text.as_bytes(), opts, "test").unwrap()
    }

    #[test]
    fn lost_event_lines_are_recognised() {
        assert_eq!(lost_events(b"CPU:3 [LOST 12 EVENTS]"), Some(Some(12)));
        assert_eq!(lost_events(b"CPU:0 [4 EVENTS DROPPED]"), Some(Some(4)));
        assert_eq!(lost_events(b"CPU:0 [LOST EVENTS]"), Some(None));
        assert_eq!(lost_events(b"CPU:0 [something]"), None);
    }

    #[test]
    fn hex_and_decimal_spellings_of_one_value_share_a_group() {
        let text =
            "a-1 [0] 1.0: ev: v:1 g:0x10\na-1 [0] 1.0: ev: v:3 g:16\na-1 [0] 1.0: ev: v:5 g:x\n";
        let opts = Options::new("^ev$", "v", &["g".to_owned()]).unwrap();
        let report = analyze_text(text, opts);
        let groups: Vec<String> = report.rows.iter().map(|row| row.group[0].to_string()).collect();
        assert_eq!(groups, ["0x10", "x"]);
        assert_eq!((report.rows[0].stats.count, report.rows[0].stats.avg), (2, 2));
    }

    #[test]
    fn noise_rule_compares_value_with_timestamp() {
        // 100.000001 s = 100_000_001_000 ns; the tolerance is 10 ms either side.
        let line = |value: u64| format!("t-1 [0] 100.000001: ev: v:{value}\n");
        let opts = || Options::new("^ev$", "v", &[]).unwrap();
        let inside = [
            100_000_001_001,
            100_000_001_000 - NOISE_TOLERANCE_NS,
            100_000_001_000 + NOISE_TOLERANCE_NS,
        ];
        for value in inside {
            let report = analyze_text(&line(value), opts());
            assert_eq!((report.noise_count, report.samples), (1, 0), "value {value}");
        }
        for value in [100_000_001_000 - NOISE_TOLERANCE_NS - 1, 5, u64::MAX] {
            let report = analyze_text(&line(value), opts());
            assert_eq!((report.noise_count, report.samples), (0, 1), "value {value}");
        }
        let mut keep = opts();
        keep.detect_noise = false;
        assert_eq!(analyze_text(&line(100_000_001_001), keep).samples, 1);
    }

    #[test]
    fn options_reject_bad_fields() {
        assert!(matches!(Options::new("(", "v", &[]), Err(LatencyError::EventRegex { .. })));
        assert!(matches!(Options::new("x", "", &[]), Err(LatencyError::FieldName { .. })));
        let twice = ["a".to_owned(), "a".to_owned()];
        assert!(matches!(Options::new("x", "v", &twice), Err(LatencyError::DuplicateField { .. })));
        assert!(matches!(
            Options::new("x", "v", &["v".to_owned()]),
            Err(LatencyError::DuplicateField { .. })
        ));
    }
}
