//! The shape of one compiled CPU model: event tables as data, metrics as functions.
//!
//! Generated code builds these as `static`s over binary tables embedded with `include_bytes!`;
//! the runtime and the CLI read them through typed accessors. Strings live in one
//! deduplicated blob shared by every model and are named by [`Str`] ids (4 bytes, through the
//! blob's offset table), as the event records name them. Events are fixed-size little-endian
//! records ([`Events`]) decoded on access, without copying. Metric descriptors ([`MetricDesc`])
//! and their functions read inputs through metric-local indices, so one descriptor serves every
//! model where the metric is the same; a model binds it to its own input slots and metrics
//! ([`MetricAt`], read as a [`Metric`]).
//! The statics hold indices into shared tables ([`Code`]) rather than pointers, so that the
//! loader has almost nothing to relocate when the binary starts.

mod blocks;

pub use blocks::{
    DESCRIPTIONS_PER_BLOCK, RECORDS_PER_BLOCK, STRINGS_PER_BLOCK, event_list, record_block,
    string_block,
};

use crate::Literal;
use crate::sem::{Fail, Needed};
use blocks::{Deflated, StringBlock};

/// A string of the shared tables, by id: 4 bytes where an offset and a length took 8 (a
/// hundred thousand of them in the descriptors and input slots). Ids with [`Str::COLD`] set are
/// in the compressed description table, ids with [`Str::HOT`] in the plain table of the names
/// every metric lookup scans ([`Tables`]); id 0 is the empty string in every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Str(pub u32);

impl Str {
    /// The id bit of strings in the compressed description table.
    pub const COLD: u32 = 1 << 31;

    /// The id bit of strings in the plain table of metric names and groups.
    pub const HOT: u32 = 1 << 30;

    /// String `id` of the description table.
    pub const fn cold(id: u32) -> Str {
        Str(id | Str::COLD)
    }

    /// String `id` of the metric names' table.
    pub const fn hot(id: u32) -> Str {
        Str(id | Str::HOT)
    }

    /// Whether this is the empty string (the only string with id 0, in any table).
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 & !(Str::COLD | Str::HOT) == 0
    }
}

/// Which counters an event may use, as masks of general and fixed counters: the compiled form of
/// the vendor JSON's `Counter` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CounterMask {
    /// Bit `n`: general counter `n` is allowed. `u32::MAX` when the JSON gives no restriction.
    pub generic: u32,
    /// Bit `n`: fixed counter `n` is allowed.
    pub fixed: u8,
}

impl CounterMask {
    /// No restriction known.
    pub const ANY: CounterMask = CounterMask { generic: u32::MAX, fixed: 0 };
}

/// Event flags.
pub mod event_flags {
    /// `PerPkg`: counted once per package.
    pub const PER_PKG: u8 = 1;
    /// `Deprecated`: hidden from `list` but usable.
    pub const DEPRECATED: u8 = 2;
    /// `Experimental`.
    pub const EXPERIMENTAL: u8 = 4;
}

/// One JSON event of a model.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// `EventName` as written in the JSON.
    pub name: Str,
    /// The PMU the event belongs to (`default_core`, `cpu_core`, `uncore_imc`, ...).
    pub pmu: Str,
    /// The JSON file's topic (`cache`, `uncore memory`, ...).
    pub topic: Str,
    /// perf's event term string, e.g. `event=0xa3,cmask=4,period=1000003,umask=4`.
    pub encoding: Str,
    /// `BriefDescription`.
    pub brief: Str,
    /// `PublicDescription`.
    pub public: Str,
    /// `Compat` regex for sys PMUs.
    pub compat: Str,
    /// `ScaleUnit` unit text.
    pub unit: Str,
    /// `ScaleUnit` factor (1 when absent).
    pub scale: f64,
    /// Allowed counters.
    pub counters: CounterMask,
    /// `PEBS` level (0, 1 or 2).
    pub pebs: u8,
    /// [`event_flags`] bits.
    pub flags: u8,
}

/// The size of one record of [`Events`].
pub const EVENT_RECORD: usize = 48;

/// The binary tables every model's data points into, embedded once (`include_bytes!`).
///
/// Models hold a reference to the one `static` of this type: a model that copied the slices
/// out of another static would make the compiler emit a second copy of the bytes.
///
/// The names `-M` and `list` scan (metrics' names, groups and PMUs, every metric of a model
/// read in turn) are one plain table; every other table is stored as deflated blocks inflated
/// on first read ([`blocks`]): the strings (event names, encodings, identifiers and
/// expressions of every model of every vintage), the descriptions
/// (events', metrics' and groups' brief and public texts, which only `list`, `describe` and
/// `-v` print, in a table of their own so that reading names never inflates them), the event
/// records (each distinct record once: a third of all models' records are distinct, since a
/// vintage mostly repeats an earlier one's), and each model's list of its records.
pub struct Tables {
    names: &'static str,
    name_offsets: &'static [u8],
    strings: Deflated<StringBlock>,
    descriptions: Deflated<StringBlock>,
    records: Deflated<Box<[u8]>>,
    event_lists: Deflated<Box<[u32]>>,
}

impl Tables {
    /// The tables `cargo xtask regen` writes: `names` (the text of every name) with
    /// `name_offsets` (little-endian `u32`: name `i` spans offsets `i..i + 1`), then each other
    /// table as deflated blocks and their `u32` offsets (then the end): `strings` and
    /// `descriptions` ([`blocks::string_block`] layout,
    /// [`STRINGS_PER_BLOCK`] and [`DESCRIPTIONS_PER_BLOCK`] strings a block), `records`
    /// ([`RECORDS_PER_BLOCK`] [`EVENT_RECORD`]-byte records a block, [`blocks::record_block`]
    /// layout) and `event_lists` (one block per list,
    /// [`blocks::event_list`] layout).
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        names: &'static str,
        name_offsets: &'static [u8],
        strings: &'static [u8],
        string_index: &'static [u8],
        descriptions: &'static [u8],
        description_index: &'static [u8],
        records: &'static [u8],
        record_index: &'static [u8],
        event_lists: &'static [u8],
        event_list_index: &'static [u8],
    ) -> Tables {
        Tables {
            names,
            name_offsets,
            strings: Deflated::new(strings, string_index),
            descriptions: Deflated::new(descriptions, description_index),
            records: Deflated::new(records, record_index),
            event_lists: Deflated::new(event_lists, event_list_index),
        }
    }

    /// The text of `s`.
    pub fn str(&'static self, s: Str) -> &'static str {
        if s.is_empty() {
            return "";
        }
        let id = (s.0 & !(Str::COLD | Str::HOT)) as usize;
        if s.0 & Str::HOT != 0 {
            let start = blocks::u32_at(self.name_offsets, id * 4) as usize;
            let end = blocks::u32_at(self.name_offsets, id * 4 + 4) as usize;
            return &self.names[start..end];
        }
        let (table, per_block, what) = if s.0 & Str::COLD == 0 {
            (&self.strings, STRINGS_PER_BLOCK, "strings")
        } else {
            (&self.descriptions, DESCRIPTIONS_PER_BLOCK, "description strings")
        };
        let block = table.block(id / per_block, what, |b| StringBlock::decode(b, what));
        block.get(id % per_block)
    }

    /// The record numbers of event list `list`.
    fn event_list(&'static self, list: usize) -> &'static [u32] {
        self.event_lists.block(list, "event lists", blocks::decode_event_list)
    }

    /// Record `record` of the record table.
    fn record(&'static self, record: u32) -> &'static [u8] {
        let record = record as usize;
        let block = self.records.block(
            record / RECORDS_PER_BLOCK,
            "event records",
            blocks::decode_record_block,
        );
        let at = record % RECORDS_PER_BLOCK * EVENT_RECORD;
        &block[at..at + EVENT_RECORD]
    }

    /// Bytes of the tables as embedded: names and strings, descriptions, event records with
    /// the models' lists of them (offset tables included).
    pub fn embedded_bytes(&self) -> (usize, usize, usize) {
        (
            self.names.len() + self.name_offsets.len() + self.strings.embedded_bytes(),
            self.descriptions.embedded_bytes(),
            self.records.embedded_bytes() + self.event_lists.embedded_bytes(),
        )
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("names", &self.names.len())
            .field("strings", &self.strings)
            .field("descriptions", &self.descriptions)
            .field("records", &self.records)
            .field("event_lists", &self.event_lists)
            .finish()
    }
}

/// A model's JSON events: fixed-size records over the shared string table, decoded on access.
///
/// Record layout (little-endian): eight `u32` string ids (name, pmu, topic, encoding, brief,
/// public, compat, unit), `scale` as `f64` bits, the general counter mask `u32`, then the
/// fixed counter mask, `pebs` and flags as `u8`, and one padding byte. `brief` and `public`
/// are ids of the description table, the others of the plain one. A model's events are the
/// records its event list names, so models that share events share their records.
#[derive(Debug, Clone, Copy)]
pub struct Events {
    tables: &'static Tables,
    list: usize,
    len: usize,
}

impl Events {
    /// The `len` records event list `list` of `tables` names.
    pub const fn new(tables: &'static Tables, list: usize, len: usize) -> Events {
        Events { tables, list, len }
    }

    /// Number of events.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Event `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<Event> {
        (i < self.len).then(|| self.decode(i))
    }

    /// Event `i`; panics past the end, as slice indexing does.
    pub fn at(&self, i: usize) -> Event {
        self.get(i).unwrap_or_else(|| panic!("event {i} of {}", self.len))
    }

    /// Every event, in JSON order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Event> + DoubleEndedIterator + 'static {
        let this = *self;
        (0..self.len).map(move |i| this.decode(i))
    }

    fn decode(&self, i: usize) -> Event {
        let tables = self.tables;
        let r = tables.record(tables.event_list(self.list)[i]);
        let id = |field: usize| blocks::u32_at(r, field * 4);
        let s = |field: usize| Str(id(field));
        // The empty description stays `Str(0)`, equal to every other empty string.
        let cold = |field: usize| match id(field) {
            0 => Str::default(),
            id => Str::cold(id),
        };
        let mut scale = [0u8; 8];
        scale.copy_from_slice(&r[32..40]);
        Event {
            name: s(0),
            pmu: s(1),
            topic: s(2),
            encoding: s(3),
            brief: cold(4),
            public: cold(5),
            compat: s(6),
            unit: s(7),
            scale: f64::from_le_bytes(scale),
            counters: CounterMask { generic: blocks::u32_at(r, 40), fixed: r[44] },
            pebs: r[45],
            flags: r[46],
        }
    }
}

/// Tool events perf computes itself rather than counting (`duration_time`, `user_time`, ...: tools/perf/util/expr.c and stat-shadow.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// Wall-clock time in seconds.
    DurationTime,
    /// User CPU time of the workload in seconds.
    UserTime,
    /// System CPU time of the workload in seconds.
    SystemTime,
}

/// What an identifier of a metric expression names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// A JSON event of this model (index into [`Model::events`]), maybe with extra terms.
    Event(u32),
    /// A kernel-named event such as `cycles` or `topdown-retiring`.
    Kernel,
    /// An event of a PMU known from sysfs, such as `msr@tsc@` or `cstate_pkg@c6-residency@`.
    Sysfs,
    /// A tool event.
    Tool(Tool),
    /// Only the argument of `has_event` or `strcmp_cpuid_str`: never counted.
    Probe,
}

/// One distinct identifier used by the model's expressions: an input slot.
#[derive(Debug, Clone, Copy)]
pub struct Id {
    /// The identifier as perf normalises it (escapes removed): the key of a counts map.
    pub text: Str,
    /// What it names.
    pub kind: IdKind,
    /// The PMU named in the identifier, or the event's PMU; empty for the core PMU.
    pub pmu: Str,
    /// The event name (or raw terms) part.
    pub event: Str,
    /// Extra terms (`cmask=1`), empty when none.
    pub terms: Str,
    /// Modifiers after `:` or the last `@` (`k`, `u`, `R`, ...).
    pub modifiers: Str,
    /// The `R` modifier: the value is a retire latency, not a count.
    pub retire_latency: bool,
    /// [`id_calls`] bits: the functions of any metric that take this identifier as their
    /// argument (for [`IdKind::Probe`], which probe it is).
    pub calls: u8,
}

/// Which functions take an identifier as their argument (`Id::calls`, `MetricDesc::calls`).
pub mod id_calls {
    /// `has_event(id)`.
    pub const HAS_EVENT: u8 = 1;
    /// `strcmp_cpuid_str(id)`.
    pub const STRCMP_CPUID_STR: u8 = 2;
    /// `source_count(id)`.
    pub const SOURCE_COUNT: u8 = 4;
    /// `aggr_nr(id)` (perf 7.x).
    pub const AGGR_NR: u8 = 8;
}

/// What an expression refers to: an input slot or another metric of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ref {
    /// Index into [`Model::ids`].
    Id(u16),
    /// Index into [`Model::metrics`].
    Metric(u16),
}

/// `MetricConstraint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Constraint {
    /// No constraint: the events are grouped.
    None,
    /// `NO_GROUP_EVENTS`.
    NoGroupEvents,
    /// `NO_GROUP_EVENTS_NMI` (or `NO_NMI_WATCHDOG`).
    NoGroupEventsNmi,
    /// `NO_GROUP_EVENTS_SMT`.
    NoGroupEventsSmt,
}

/// `AggregationMode` (powerpc hv_24x7): what the runtime parameter `?` ranges over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggrMode {
    /// Not given.
    None,
    /// `PerChip`: one instance per socket.
    PerChip,
    /// `PerCore`: one instance per core.
    PerCore,
}

/// Everything a compiled expression reads. Compiled functions name inputs by metric-local
/// index; `slots` and `refs` (the evaluated [`Metric`]'s) map them to the model's.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// Local input `k` is model slot `slots[k]`.
    pub slots: &'a [u16],
    /// Local metric `k` is model metric `refs[k]`.
    pub refs: &'a [u16],
    /// Per [`Model::ids`] slot: the count, retire latency or tool value; NaN when unknown.
    pub values: &'a [f64],
    /// Per slot: `source_count()` of the event.
    pub source_counts: &'a [f64],
    /// Per slot: `aggr_nr()` of the event (perf 7.x): the counters summed into its value in
    /// the aggregation unit evaluated.
    pub aggr_nrs: &'a [f64],
    /// Per slot: `has_event()` (1 or 0) or `strcmp_cpuid_str()` (1, 0 or NaN).
    pub probes: &'a [f64],
    /// Per [`Literal`]: its value, NaN when unknown.
    pub literals: &'a [f64; Literal::COUNT],
    /// Per [`Model::metrics`]: values already computed (NaN for failed or not computed).
    pub metrics: &'a [f64],
}

impl Inputs<'_> {
    /// The value of local input `k`.
    #[inline]
    pub fn value(&self, k: usize) -> f64 {
        self.values[self.slots[k] as usize]
    }

    /// `source_count()` of local input `k`.
    #[inline]
    pub fn source_count(&self, k: usize) -> f64 {
        self.source_counts[self.slots[k] as usize]
    }

    /// `aggr_nr()` of local input `k`.
    #[inline]
    pub fn aggr_nr(&self, k: usize) -> f64 {
        self.aggr_nrs[self.slots[k] as usize]
    }

    /// The probe result of local input `k`.
    #[inline]
    pub fn probe(&self, k: usize) -> f64 {
        self.probes[self.slots[k] as usize]
    }

    /// The value of local metric `k`.
    #[inline]
    pub fn metric(&self, k: usize) -> f64 {
        self.metrics[self.refs[k] as usize]
    }

    /// The value of a literal, NaN when unknown.
    #[inline]
    pub fn literal(&self, lit: Literal) -> f64 {
        self.literals[lit.index()]
    }
}

/// What the needed-events pass folds with: literal values and probe results.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// Per [`Literal`]: its value, NaN when unknown.
    pub literals: &'a [f64; Literal::COUNT],
    /// Per slot: `has_event()` or `strcmp_cpuid_str()` result.
    pub probes: &'a [f64],
}

/// A compiled `MetricExpr` or `MetricThreshold`.
pub type MetricFn = fn(&Inputs<'_>) -> Result<f64, Fail>;

/// A compiled needed-events pass. It reads probes through the metric's slot map (the second
/// argument) and returns metric-local references.
pub type NeededFn = fn(&Facts<'_>, &[u16]) -> Result<Needed<Ref>, Fail>;

/// The direct references of an expression on a machine, as metric-local indices.
#[derive(Debug, Clone, Copy)]
pub enum NeededRefs {
    /// The expression has nothing to fold: these, always.
    Static(&'static [Ref]),
    /// Depends on literals or probes.
    Dynamic(NeededFn),
}

/// `len` entries of one of [`Code`]'s pools (or of a model's `locals`) from index `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span(pub u32, pub u32);

impl Span {
    fn of<T>(self, pool: &'static [T]) -> &'static [T] {
        &pool[self.0 as usize..(self.0 + self.1) as usize]
    }
}

/// How a descriptor finds an expression's direct references: the stored form of
/// [`NeededRefs`], as indices into [`Code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Needs {
    /// These references of [`Code::refs`], always.
    Refs(Span),
    /// The needed-events function [`Code::needed_fns`]`[i]`.
    Fn(u32),
}

/// The compiled functions and the pools the descriptors index, one `static` for the catalogue.
///
/// Descriptors and models name functions, literal lists and reference lists by index rather
/// than by pointer: a position-independent binary relocates every pointer of its statics at
/// each start (and dirties the pages that hold them), so the only pointers left are one per
/// function and one per table.
#[derive(Debug)]
pub struct Code {
    /// Every metric descriptor; a model's [`MetricAt::desc`] indexes it.
    pub descs: &'static [MetricDesc],
    /// Value and threshold functions ([`MetricDesc::value_fn`], [`MetricDesc::threshold_fn`]).
    pub value_fns: &'static [MetricFn],
    /// Needed-events functions ([`Needs::Fn`]).
    pub needed_fns: &'static [NeededFn],
    /// Pool of the descriptors' `#literal` lists ([`MetricDesc::literals`]).
    pub literals: &'static [Literal],
    /// Pool of the descriptors' call bits ([`MetricDesc::calls`]).
    pub calls: &'static [u8],
    /// Pool of the static reference lists ([`Needs::Refs`]).
    pub refs: &'static [Ref],
}

impl Code {
    fn needed(&'static self, needs: Needs) -> NeededRefs {
        match needs {
            Needs::Refs(span) => NeededRefs::Static(span.of(self.refs)),
            Needs::Fn(i) => NeededRefs::Dynamic(self.needed_fns[i as usize]),
        }
    }
}

/// One compiled metric, independent of the model: inputs and referenced metrics are named by
/// local index (in order of first use in `MetricExpr`, then `MetricThreshold`), so models
/// whose metric is the same share one descriptor and its functions. Functions and lists are
/// indices into the catalogue's [`Code`]; a [`Metric`] reads them.
#[derive(Debug, Clone, Copy)]
pub struct MetricDesc {
    /// `MetricName`.
    pub name: Str,
    /// The metric's PMU (`default_core`, `cpu_core`, `cpu_atom`, ...).
    pub pmu: Str,
    /// `MetricGroup`, `;`-separated.
    pub groups: Str,
    /// `BriefDescription`.
    pub brief: Str,
    /// `PublicDescription`.
    pub public: Str,
    /// `MetricExpr` as written in the JSON.
    pub expr: Str,
    /// `MetricThreshold` as written, empty when none.
    pub threshold_expr: Str,
    /// `ScaleUnit` factor (1 when absent).
    pub scale: f64,
    /// `ScaleUnit` unit, empty when absent.
    pub unit: Str,
    /// Whether the JSON gave a `ScaleUnit` (perf prints `%8.1f` then, else `%8.2f`).
    pub has_scale_unit: bool,
    /// `MetricConstraint`.
    pub constraint: Constraint,
    /// `MetricgroupNoGroup`, `;`-separated.
    pub no_group: Str,
    /// `DefaultMetricgroupName`.
    pub default_group: Str,
    /// `Compat`, for sys metrics.
    pub compat: Str,
    /// The expression uses `?`: instantiated once per runtime parameter value.
    pub runtime_param: bool,
    /// `AggregationMode`: what `?` ranges over.
    pub aggr_mode: AggrMode,
    /// The `#literal`s of the expression and the threshold, in order of first use
    /// ([`Code::literals`]).
    pub literals: Span,
    /// Per local input: [`id_calls`] bits of the functions that take it as their argument;
    /// empty when none does ([`Code::calls`]).
    pub calls: Span,
    /// The compiled `MetricExpr` ([`Code::value_fns`]).
    pub value_fn: u32,
    /// The compiled `MetricThreshold` ([`Code::value_fns`]).
    pub threshold_fn: Option<u32>,
    /// Direct references of `MetricExpr`.
    pub needed: Needs,
    /// Direct references of `MetricThreshold`.
    pub needed_threshold: Option<Needs>,
}

/// One metric of a model as stored: descriptor [`Code::descs`]`[desc]`, and its local inputs
/// and metrics, `slots` then `refs` entries of the model's `locals` from `at`.
#[derive(Debug, Clone, Copy)]
pub struct MetricAt {
    /// Index into [`Code::descs`].
    pub desc: u32,
    /// Where the metric's slots, then its references, start in [`Model::locals`].
    pub at: u32,
    /// Number of local inputs.
    pub slots: u16,
    /// Number of local metrics.
    pub refs: u16,
}

/// One metric of a model: a shared descriptor bound to the model's slots and metrics, built by
/// [`Model::metric`]. Fields of the descriptor read through it (`metric.name`).
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The descriptor.
    pub desc: &'static MetricDesc,
    /// Local input `k` is [`Model::ids`] slot `slots[k]`.
    pub slots: &'static [u16],
    /// Every metric the expression or threshold may reference: local metric `k` is
    /// [`Model::metric`] index `refs[k]`.
    pub refs: &'static [u16],
    code: &'static Code,
}

impl std::ops::Deref for Metric {
    type Target = MetricDesc;

    fn deref(&self) -> &MetricDesc {
        self.desc
    }
}

impl Metric {
    /// The `#literal`s of the expression and the threshold, in order of first use.
    pub fn literals(&self) -> &'static [Literal] {
        self.desc.literals.of(self.code.literals)
    }

    /// Per local input: [`id_calls`] bits of the functions that take it as their argument;
    /// empty when none does.
    pub fn calls(&self) -> &'static [u8] {
        self.desc.calls.of(self.code.calls)
    }

    /// The compiled `MetricExpr`.
    pub fn value_fn(&self) -> MetricFn {
        self.code.value_fns[self.desc.value_fn as usize]
    }

    /// The compiled `MetricThreshold`, if the metric has one that compiles.
    pub fn threshold_fn(&self) -> Option<MetricFn> {
        self.desc.threshold_fn.map(|i| self.code.value_fns[i as usize])
    }

    /// Direct references of `MetricExpr`, as local indices.
    pub fn needed(&self) -> NeededRefs {
        self.code.needed(self.desc.needed)
    }

    /// Direct references of `MetricThreshold`, as local indices; `None` without one.
    pub fn needed_threshold(&self) -> Option<NeededRefs> {
        self.desc.needed_threshold.map(|needs| self.code.needed(needs))
    }

    /// Direct references of `MetricExpr` with these facts, as model indices, in the order
    /// perf's needed-events pass finds them.
    pub fn needed_refs(&self, facts: &Facts<'_>) -> Result<Vec<Ref>, Fail> {
        self.bind(self.needed(), facts)
    }

    /// Direct references of `MetricThreshold`; `None` without one.
    pub fn needed_threshold_refs(&self, facts: &Facts<'_>) -> Option<Result<Vec<Ref>, Fail>> {
        self.needed_threshold().map(|needed| self.bind(needed, facts))
    }

    fn bind(&self, needed: NeededRefs, facts: &Facts<'_>) -> Result<Vec<Ref>, Fail> {
        let local = match needed {
            NeededRefs::Static(refs) => refs.to_vec(),
            NeededRefs::Dynamic(func) => func(facts, self.slots)?.ids,
        };
        Ok(local
            .into_iter()
            .map(|r| match r {
                Ref::Id(k) => Ref::Id(self.slots[k as usize]),
                Ref::Metric(k) => Ref::Metric(self.refs[k as usize]),
            })
            .collect())
    }

    /// Model slots that `calls` ([`id_calls`] bits) functions of this metric take as argument.
    pub fn call_slots(&self, calls: u8) -> impl Iterator<Item = u16> + use<> {
        let slots = self.slots;
        self.calls()
            .iter()
            .zip(slots)
            .filter(move |(bits, _)| *bits & calls != 0)
            .map(|(_, &slot)| slot)
    }
}

/// A metric group's description from `metricgroups.json`.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    /// Group name.
    pub name: Str,
    /// Description.
    pub description: Str,
}

/// Counter numbers for one PMU from `counter.json`.
#[derive(Debug, Clone, Copy)]
pub struct CounterInfo {
    /// The PMU.
    pub pmu: Str,
    /// `CountersNumFixed`.
    pub fixed: u8,
    /// `CountersNumGeneric`.
    pub generic: u8,
}

/// One compiled CPU model (a vendor directory, or a `sys/` table).
#[derive(Debug)]
pub struct Model {
    /// Architecture directory (`x86`, `arm64`, ...).
    pub arch: &'static str,
    /// Model name, the directory below the architecture (`sapphirerapids`, `arm/cortex-a76`).
    pub name: &'static str,
    /// True for a `sys/` table matched by `Compat`.
    pub is_sys: bool,
    /// The shared binary tables (strings, events).
    pub tables: &'static Tables,
    /// JSON events.
    pub events: Events,
    /// The catalogue's functions and descriptors, which `metric_table` indexes.
    pub code: &'static Code,
    /// Input slots: every distinct identifier the metrics use.
    pub ids: &'static [Id],
    /// Metrics, as stored: read them with [`Model::metric`] and [`Model::metrics`].
    pub metric_table: &'static [MetricAt],
    /// The metrics' local inputs and references ([`MetricAt::at`]).
    pub locals: &'static [u16],
    /// Metrics in dependency order: every metric after the metrics it references.
    pub eval_order: &'static [u16],
    /// Metric group descriptions.
    pub groups: &'static [Group],
    /// Counter numbers per PMU.
    pub counters: &'static [CounterInfo],
}

impl Model {
    /// The text of a [`Str`].
    #[inline]
    pub fn str(&self, s: Str) -> &'static str {
        self.tables.str(s)
    }

    /// Metric `i`; panics past the end, as slice indexing does.
    #[inline]
    pub fn metric(&self, i: usize) -> Metric {
        let at = self.metric_table[i];
        let start = at.at as usize;
        let mid = start + usize::from(at.slots);
        Metric {
            desc: &self.code.descs[at.desc as usize],
            slots: &self.locals[start..mid],
            refs: &self.locals[mid..mid + usize::from(at.refs)],
            code: self.code,
        }
    }

    /// Every metric, in order.
    pub fn metrics(
        &self,
    ) -> impl ExactSizeIterator<Item = Metric> + DoubleEndedIterator + Clone + '_ {
        (0..self.metric_table.len()).map(move |i| self.metric(i))
    }

    /// Number of metrics.
    #[inline]
    pub fn metric_count(&self) -> usize {
        self.metric_table.len()
    }

    /// Every metric group a metric of the model names (`MetricGroup`, `;`-separated), sorted
    /// and distinct: the groups `-M` can select.
    pub fn metric_group_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .metrics()
            .flat_map(|m| self.str(m.groups).split(';').filter(|g| !g.is_empty()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// One perf vintage of the catalogue: the models and cpuid map of one kernel's vendor tree.
/// A model whose compiled form is the same in two vintages is one static both list.
#[derive(Debug, Clone, Copy)]
pub struct Vintage {
    /// `major.minor` of the kernel: `6.12`.
    pub version: &'static str,
    /// The full kernel version the tree was imported from: `6.12.117`.
    pub kernel: &'static str,
    /// Every model, sorted by architecture then name.
    pub models: &'static [&'static Model],
    /// `mapfile.csv` rows of every architecture, in file order (indices into `models`).
    pub cpuid_map: &'static [CpuidRow],
}

/// One `mapfile.csv` row: which model a cpuid selects.
#[derive(Debug, Clone, Copy)]
pub struct CpuidRow {
    /// Architecture of the row.
    pub arch: &'static str,
    /// The cpuid regex (or MIDR, PVR, ...).
    pub regex: &'static str,
    /// The vendor's data version.
    pub version: &'static str,
    /// `core`, `uncore`, ...
    pub event_type: &'static str,
    /// Index into the catalogue's model list.
    pub model: usize,
}

impl Model {
    /// `arch/name`, e.g. `x86/sapphirerapids`.
    pub fn path(&self) -> String {
        format!("{}/{}", self.arch, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks deflated back to back, with their offsets, as regen lays them out.
    fn deflated(blocks: &[Vec<u8>]) -> (&'static [u8], &'static [u8]) {
        let (mut data, mut index) = (Vec::new(), Vec::new());
        for block in blocks {
            index.extend_from_slice(&(data.len() as u32).to_le_bytes());
            data.extend(miniz_oxide::deflate::compress_to_vec(block, 2));
        }
        index.extend_from_slice(&(data.len() as u32).to_le_bytes());
        (data.leak(), index.leak())
    }

    /// Plain strings over two blocks (id `STRINGS_PER_BLOCK` is the first of the second), one
    /// description, and two events, the second model's list naming a record of the first's.
    fn tables() -> &'static Tables {
        let mut plain: Vec<String> = (0..STRINGS_PER_BLOCK + 2).map(|i| format!("s{i}")).collect();
        plain[0] = String::new();
        plain[1] = "cycles".into();
        plain[STRINGS_PER_BLOCK] = "event=0x3c".into();
        let strings: Vec<Vec<u8>> = plain
            .chunks(STRINGS_PER_BLOCK)
            .map(|c| string_block(c.iter().map(String::as_str)))
            .collect();
        let (strings, string_index) = deflated(&strings);
        let (descriptions, description_index) =
            deflated(&[string_block(["", "Counts cycles."].into_iter())]);
        let record = |name: u32, encoding: u32, brief: u32| {
            let mut r = Vec::new();
            for id in [name, 0, 0, encoding, brief, 0, 0, 0] {
                r.extend_from_slice(&id.to_le_bytes());
            }
            r.extend_from_slice(&2.5f64.to_le_bytes());
            r.extend_from_slice(&3u32.to_le_bytes());
            r.extend_from_slice(&[1, 2, event_flags::PER_PKG, 0]);
            <[u8; EVENT_RECORD]>::try_from(r).expect("a whole record")
        };
        let records = [record(1, STRINGS_PER_BLOCK as u32, 1), record(2, 0, 0)];
        let (records, record_index) = deflated(&[record_block(&records)]);
        let (lists, list_index) = deflated(&[event_list(&[0, 1]), event_list(&[1])]);
        Box::leak(Box::new(Tables::new(
            "tma_retiringTopdownL1",
            [0u32, 0, 12, 21].iter().flat_map(|o| o.to_le_bytes()).collect::<Vec<u8>>().leak(),
            strings,
            string_index,
            descriptions,
            description_index,
            records,
            record_index,
            lists,
            list_index,
        )))
    }

    #[test]
    fn an_event_reads_its_record_through_its_models_list() {
        let tables = tables();
        let first = Events::new(tables, 0, 2);
        let event = first.at(0);
        assert_eq!(tables.str(event.name), "cycles");
        assert_eq!(tables.str(event.encoding), "event=0x3c");
        assert_eq!(tables.str(event.brief), "Counts cycles.");
        assert_eq!((event.scale, event.counters.generic, event.counters.fixed), (2.5, 3, 1));
        assert_eq!((event.pebs, event.flags), (2, event_flags::PER_PKG));
        let second = Events::new(tables, 1, 1);
        assert_eq!(tables.str(second.at(0).name), "s2");
        assert_eq!(tables.str(first.at(1).name), "s2");
        assert!(second.get(1).is_none());
    }

    #[test]
    fn a_string_id_reads_its_text_from_its_own_table() {
        let tables = tables();
        assert_eq!(tables.str(Str(1)), "cycles");
        assert_eq!(tables.str(Str(STRINGS_PER_BLOCK as u32)), "event=0x3c");
        assert_eq!(
            tables.str(Str(STRINGS_PER_BLOCK as u32 + 1)),
            format!("s{}", STRINGS_PER_BLOCK + 1)
        );
        assert_eq!(
            tables.str(Str(STRINGS_PER_BLOCK as u32 - 1)),
            format!("s{}", STRINGS_PER_BLOCK - 1)
        );
        assert_eq!(tables.str(Str::cold(1)), "Counts cycles.");
        assert_eq!(tables.str(Str::hot(1)), "tma_retiring");
        assert_eq!(tables.str(Str::hot(2)), "TopdownL1");
        assert_eq!(tables.str(Str(0)), "");
        assert_eq!(tables.str(Str::hot(0)), "");
        assert!(Str::hot(0).is_empty() && !Str::hot(1).is_empty());
        assert!(Str(0).is_empty() && Str::default().is_empty());
        assert!(!Str(1).is_empty() && !Str::cold(1).is_empty());
    }
}
