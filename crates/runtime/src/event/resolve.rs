//! Resolving event lists on a machine, as perf 6.12's `parse-events.c` does: legacy symbols
//! and cache events (on every core PMU of a hybrid machine, the PMU type in the config's
//! upper half), PMU events by sysfs alias or vendor table (on every PMU that has them), raw
//! `rNNN`, `pmu/terms/` with the PMU's `format/` files, modifiers, `--cputype`'s PMU filter,
//! and the regrouping perf applies afterwards (groups split per PMU, topdown events behind
//! `slots`, lone topdown events gathered into one group).
//!
//! The vendor tables (perf's pmu-events JSON) are not the runtime's: a caller that has them
//! passes an [`EventTables`] (the engine does, from the catalogue model of the machine).

use std::cmp::Ordering;

use super::grammar::{self, Body, EventAst, Item, Modifiers, Span, TermAst, TermValue};
use super::legacy::{cache_config, hardware_config, is_cache_name, software_config};
use super::{CounterEvent, EventError, EventKind, ResolvedEvent, ToolEvent};
use crate::sys::{Attr, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use crate::sysfs::{Sysfs, SysfsPmu};

/// What a vendor table needs to know about a sysfs PMU to attach events to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuFacts<'a> {
    /// The sysfs name (`cpu`, `cpu_core`, `uncore_imc_0`).
    pub name: &'a str,
    /// A core PMU (`cpu`, or one with a `cpus` file: hybrid and Arm core PMUs).
    pub core: bool,
    /// An uncore PMU (one with a `cpumask` file).
    pub uncore: bool,
}

/// A vendor event found for a PMU.
#[derive(Debug, Clone, PartialEq)]
pub struct TableEvent {
    /// The event name as the table spells it.
    pub name: String,
    /// Its terms (`event=0xc0,period=2000003,umask=0x0`).
    pub terms: String,
    /// `ScaleUnit`'s unit.
    pub unit: Option<String>,
    /// `ScaleUnit`'s factor.
    pub scale: Option<f64>,
}

/// Vendor event tables: perf's pmu-events for this machine.
pub trait EventTables {
    /// The event called `name` (ignoring case) that the tables attach to `pmu`.
    fn find(&self, pmu: &PmuFacts<'_>, name: &str) -> Option<TableEvent>;
}

/// Whether a vendor table's `Unit` PMU name (`default_core`, `cpu_core`, `uncore_imc`,
/// `socket,pmuname`) names sysfs PMU `pmu` (perf's `pmu__name_match`).
pub fn table_pmu_matches(table_pmu: &str, pmu: &PmuFacts<'_>) -> bool {
    table_pmu == pmu.name
        || (pmu.core && (table_pmu == "default_core" || (table_pmu == "cpu" && pmu.name == "cpu")))
        || (pmu.uncore && uncore_alias_match(table_pmu, pmu.name))
}

/// perf's `perf_pmu__match_ignoring_suffix`: `name` is `tok`, or `tok` plus an optional `_`
/// and a number (hex suffixes need 3 digits or more, so `cpu_core` is not `cpu_c` + `ore`).
pub fn matches_ignoring_suffix(name: &str, tok: &str) -> bool {
    let Some(rest) = name.strip_prefix(tok) else { return false };
    if rest.is_empty() {
        return true;
    }
    let digits = rest.strip_prefix('_').unwrap_or(rest);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    digits.chars().all(|c| c.is_ascii_digit()) || digits.len() > 2
}

fn uncore_alias_match(table_pmu: &str, name: &str) -> bool {
    if !table_pmu.contains(',') {
        return matches_ignoring_suffix(name, table_pmu);
    }
    // `socket,pmuname` matches `socketX_pmunameY`: the tokens in order.
    let toks: Vec<&str> = table_pmu.split(',').collect();
    let mut rest = name;
    for (i, tok) in toks.iter().enumerate() {
        let Some(at) = rest.find(tok) else { return false };
        rest = &rest[at..];
        if i + 1 == toks.len() {
            return matches_ignoring_suffix(rest, tok);
        }
        rest = &rest[tok.len()..];
    }
    false
}

/// perf's `perf_pmu__match` for a PMU named in `pmu/terms/` that is not an exact sysfs name:
/// `uncore_imc` (or `imc`) matches `uncore_imc_0`, `uncore_imc_1`; `*` and `?` globs match.
pub fn pmu_wildcard_matches(pmu: &str, tok: &str) -> bool {
    let tok = tok.strip_prefix("uncore_").unwrap_or(tok);
    let name = pmu.strip_prefix("uncore_").unwrap_or(pmu);
    matches_ignoring_suffix(name, tok) || (tok.contains(['*', '?', '[']) && glob(tok, name))
}

/// `fnmatch` without flags: `*`, `?` and `[...]` classes.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|i| go(&p[1..], &t[i..])),
            Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some('[') => {
                let Some(close) = p.iter().position(|&c| c == ']') else {
                    return t.first() == Some(&'[') && go(&p[1..], &t[1..]);
                };
                let Some(&c) = t.first() else { return false };
                let class = &p[1..close];
                let (negate, class) = match class.first() {
                    Some('!') | Some('^') => (true, &class[1..]),
                    _ => (false, class),
                };
                let mut hit = false;
                let mut i = 0;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == '-' {
                        hit |= class[i] <= c && c <= class[i + 2];
                        i += 3;
                    } else {
                        hit |= class[i] == c;
                        i += 1;
                    }
                }
                hit != negate && go(&p[close + 1..], &t[1..])
            }
            Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
        }
    }
    go(&p, &t)
}

/// A topdown event of a PMU with PERF_METRICS: `slots` must lead the group of the metric
/// events, or the kernel refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topdown {
    /// `slots` (fixed counter 3, `event=0x00,umask=0x4`).
    Slots,
    /// A metric event (`event=0x00,umask=0x80` and up): read from PERF_METRICS, no counter.
    Metric,
}

/// One event of a resolved list.
#[derive(Debug, Clone, PartialEq)]
pub struct ListEvent {
    /// The counter (or tool value) and its printed name.
    pub event: ResolvedEvent,
    /// The PMU whose counters it takes, by sysfs name (`None` for software events,
    /// tracepoints, `msr` and tool values, which join any group).
    pub pmu: Option<String>,
    /// Its topdown role, on a PMU with PERF_METRICS.
    pub topdown: Option<Topdown>,
    /// The event is one of several uncore boxes one written event opened on
    /// (`uncore_imc/cas_count_read/` on `uncore_imc_0`, `uncore_imc_1`): perf merges their
    /// counts into one line named as written unless `-A`/`--no-merge`.
    pub uncore_box: Option<UncoreBox>,
}

/// One box of an uncore event written once and opened on every box of its PMU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UncoreBox {
    /// The name perf prints for this box alone (perf's `uniquify_event_name`:
    /// `uncore_imc_0/cas_count_read/`, `UNC_M_CAS_COUNT.RD [uncore_imc_0]`).
    pub name: String,
    /// Which written event of the list it comes from (the boxes of one share it).
    pub origin: usize,
}

/// One group (or lone event) of a resolved list, after perf's regrouping.
#[derive(Debug, Clone, PartialEq)]
pub struct ListGroup {
    /// The events, leader first.
    pub events: Vec<ListEvent>,
    /// Opened as a group: written in braces, or gathered by the topdown rule.
    pub grouped: bool,
    /// `:W`: the user accepts the group being split if the kernel refuses it.
    pub weak: bool,
}

/// A resolved `-e` list.
#[derive(Debug, Clone, PartialEq)]
pub struct EventList {
    /// Groups and lone events, in perf's order.
    pub groups: Vec<ListGroup>,
    /// Things to tell the user once (regrouping, modifiers without effect on counting).
    pub warnings: Vec<String>,
}

/// Resolves event text on one machine.
#[derive(Clone, Copy)]
pub struct Resolver<'a> {
    sysfs: &'a Sysfs,
    tables: Option<&'a dyn EventTables>,
    filter: Option<&'a str>,
}

impl std::fmt::Debug for Resolver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("sysfs", &self.sysfs.root())
            .field("tables", &self.tables.is_some())
            .field("filter", &self.filter)
            .finish()
    }
}

/// A located failure inside [`Resolver`]: the span of the list it is about.
type Fail = (Span, EventError);

/// Whether perf reads `name` as a raw `rNNN` (`r0xNNN` too): up to 16 hex digits.
pub fn raw_config(name: &str) -> Option<u64> {
    let hex = name.strip_prefix('r')?;
    let hex = hex.strip_prefix("0x").unwrap_or(hex);
    if hex.is_empty() || hex.len() > 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Terms the `perf stat` grammar knows but that only mean something when sampling.
const SAMPLING_TERMS: &[&str] = &[
    "freq",
    "branch_type",
    "time",
    "call-graph",
    "stack-size",
    "max-stack",
    "nr",
    "inherit",
    "no-inherit",
    "overwrite",
    "no-overwrite",
    "aux-output",
    "aux-sample-size",
];

fn pmu_sort_key(name: &str) -> (String, u64) {
    // perf's `pmus_cmp`: names compare without a numeric suffix first, then by the number.
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = name.split_at(name.len() - digits);
    (stem.to_string(), num.parse().unwrap_or(0))
}

/// How far a name resolution may spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spread {
    /// perf's list parsing: every PMU that has the event, every core PMU for legacy events.
    All,
    /// One event: the legacy event without a PMU type, an alias on the core PMU or on the only
    /// PMU that has it.
    One,
}

/// An event being built: the counter, its PMU and the `exclude_guest`/`exclude_host` state
/// perf's modifier rules carry from event to group modifiers.
#[derive(Debug, Clone)]
struct Built {
    event: ResolvedEvent,
    pmu: Option<String>,
    gh: bool,
    /// The name was given with `name=`: printed as is.
    named: bool,
}

impl<'a> Resolver<'a> {
    /// A resolver over `sysfs`, without vendor tables or a PMU filter.
    pub fn new(sysfs: &'a Sysfs) -> Resolver<'a> {
        Resolver { sysfs, tables: None, filter: None }
    }

    /// Also finds vendor events (`INST_RETIRED.ANY`) in `tables`.
    pub fn with_tables(self, tables: &'a dyn EventTables) -> Resolver<'a> {
        Resolver { tables: Some(tables), ..self }
    }

    /// Limits wildcard expansion (legacy events on core PMUs, bare names on every PMU) to the
    /// PMU `--cputype` chose ([`Resolver::cputype_pmu`]); an explicit `pmu/.../` is kept.
    pub fn with_pmu_filter(self, pmu: Option<&'a str>) -> Resolver<'a> {
        Resolver { filter: pmu, ..self }
    }

    /// The sysfs tree.
    pub fn sysfs(&self) -> &'a Sysfs {
        self.sysfs
    }

    /// The PMU `--cputype TEXT` names (perf's `perf_pmus__pmu_for_pmu_filter`): a PMU of that
    /// name, or with `uncore_` or `cpu_` before it (`core` is `cpu_core`, `atom` `cpu_atom`).
    pub fn cputype_pmu(sysfs: &Sysfs, text: &str) -> Option<String> {
        let mut names = sysfs.pmu_names();
        names.sort_by_key(|n| pmu_sort_key(n));
        let core: Vec<String> = names.iter().filter(|n| is_core_pmu(sysfs, n)).cloned().collect();
        core.into_iter().chain(names).find(|n| {
            n == text
                || n.strip_prefix("uncore_") == Some(text)
                || n.strip_prefix("cpu_") == Some(text)
        })
    }

    /// Core PMUs in perf's order (`cpu_atom` before `cpu_core`).
    pub fn core_pmus(&self) -> Vec<String> {
        let mut core: Vec<String> =
            self.sysfs.pmu_names().into_iter().filter(|n| is_core_pmu(self.sysfs, n)).collect();
        core.sort_by_key(|n| pmu_sort_key(n));
        core
    }

    /// Every PMU in perf's scan order: core PMUs, then the others by name and number.
    fn all_pmus(&self) -> Vec<String> {
        let mut names = self.sysfs.pmu_names();
        names.retain(|n| self.sysfs.has_pmu(n));
        names.sort_by_key(|n| (!is_core_pmu(self.sysfs, n), pmu_sort_key(n)));
        names
    }

    fn filtered(&self, pmu: &str) -> bool {
        self.filter.is_some_and(|f| f != pmu)
    }

    /// More than one core PMU: legacy events carry the PMU type (perf's
    /// `perf_pmus__supports_extended_type`).
    pub fn hybrid(&self) -> bool {
        self.core_pmus().len() > 1
    }

    fn facts<'n>(&self, name: &'n str) -> PmuFacts<'n> {
        let core = is_core_pmu(self.sysfs, name);
        let uncore = !core && self.sysfs.pmu_devices().join(name).join("cpumask").exists();
        PmuFacts { name, core, uncore }
    }

    /// Whether PMU `name` has event `event`: a sysfs alias, or a vendor event of its tables.
    pub fn pmu_has_event(&self, name: &str, event: &str) -> bool {
        self.alias_terms(name, event).ok().flatten().is_some()
    }

    /// The terms of event `event` on PMU `pmu` (sysfs alias first, then the tables), with its
    /// unit and scale.
    fn alias_terms(&self, pmu: &str, event: &str) -> Result<Option<TableEvent>, EventError> {
        let p = self.sysfs.pmu(pmu)?;
        if let Some(alias) = p.alias(event)? {
            return Ok(Some(TableEvent {
                name: event.to_string(),
                terms: alias.terms,
                unit: alias.unit,
                scale: alias.scale,
            }));
        }
        Ok(self.tables.and_then(|t| t.find(&self.facts(pmu), event)))
    }

    /// Resolves a whole `-e` list: every event, every expansion, perf's regrouping.
    pub fn list(&self, text: &str) -> Result<EventList, EventError> {
        let located = |(span, error): Fail| EventError::Located {
            list: text.to_string(),
            span,
            error: Box::new(error),
        };
        let ast = grammar::parse(text).map_err(|e| {
            located((e.span, EventError::Syntax { text: text.to_string(), message: e.message }))
        })?;
        let mut warnings = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut wildcard_pmus = false;
        let mut next_group = 0usize;
        // Events as written, counted: the uncore boxes of one share its number.
        let mut written = 0usize;
        for item in &ast.items {
            match item {
                Item::Event(e) => {
                    if e.modifiers.weak {
                        return Err(located((
                            e.modifiers.span.clone().unwrap_or(e.span.clone()),
                            EventError::Syntax {
                                text: e.text.clone(),
                                message: "the weak modifier `W` is for groups: write `{a,b}:W`"
                                    .into(),
                            },
                        )));
                    }
                    let built = self
                        .expand(e, Spread::All, &mut warnings, &mut wildcard_pmus)
                        .map_err(located)?;
                    for (b, box_name) in built {
                        let mut entry = Entry::new(b, next_group, false, false, self);
                        entry.uncore_box = box_name.map(|name| UncoreBox { name, origin: written });
                        entries.push(entry);
                        next_group += 1;
                    }
                    written += 1;
                }
                Item::Group(g) => {
                    for e in &g.events {
                        if e.modifiers.weak {
                            return Err(located((
                                e.modifiers.span.clone().unwrap_or(e.span.clone()),
                                EventError::Syntax {
                                    text: e.text.clone(),
                                    message: "the weak modifier `W` applies to the whole group: write `{a,b}:W`".into(),
                                },
                            )));
                        }
                        let built = self
                            .expand(e, Spread::All, &mut warnings, &mut wildcard_pmus)
                            .map_err(located)?;
                        for (mut b, box_name) in built {
                            if let ResolvedEvent::Counter(c) = &mut b.event {
                                let first = !entries.iter().any(|x| x.group == next_group);
                                apply_modifiers(&mut c.attr, &mut b.gh, &g.modifiers, true, first);
                            }
                            let mut entry = Entry::new(b, next_group, true, g.modifiers.weak, self);
                            entry.uncore_box =
                                box_name.map(|name| UncoreBox { name, origin: written });
                            entries.push(entry);
                        }
                        written += 1;
                    }
                    mod_warnings(&g.modifiers, &mut warnings);
                    next_group += 1;
                }
            }
        }
        let perf_metrics = self.core_pmus().iter().any(|p| self.has_perf_metrics(p));
        let (groups, changed) = fix_groups(entries, perf_metrics);
        if changed && !wildcard_pmus {
            let shown: Vec<String> = groups
                .iter()
                .map(|g| {
                    let names: Vec<&str> = g.events.iter().map(|e| e.event.name()).collect();
                    if g.grouped { format!("{{{}}}", names.join(",")) } else { names.join(",") }
                })
                .collect();
            warnings.push(format!(
                "events were regrouped to match PMUs (groups cannot span PMUs, and topdown events follow `slots`): {}",
                shown.join(",")
            ));
        }
        dedup(&mut warnings);
        Ok(EventList { groups, warnings })
    }

    /// Resolves one event written alone (`cycles:u`, `msr/tsc/`, `sched:sched_switch`): the
    /// legacy event without a PMU type, a name on the core PMU or on the only PMU that has it.
    pub fn single(&self, text: &str) -> Result<ResolvedEvent, EventError> {
        let plain = |error: EventError| error;
        let ast = grammar::parse(text).map_err(|e| {
            plain(EventError::Syntax { text: text.trim().to_string(), message: e.message })
        })?;
        let [Item::Event(e)] = ast.items.as_slice() else {
            return Err(EventError::Syntax {
                text: text.trim().to_string(),
                message: "expected one event, not a list or a group".into(),
            });
        };
        let mut warnings = Vec::new();
        let mut wildcard = false;
        let mut built =
            self.expand(e, Spread::One, &mut warnings, &mut wildcard).map_err(|(_, err)| err)?;
        match built.len() {
            1 => Ok(built.remove(0).0.event),
            _ => Err(EventError::Ambiguous {
                name: e.text.clone(),
                pmus: built.iter().filter_map(|b| b.0.pmu.clone()).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// `pmu/terms/modifiers` on one PMU (a vendor encoding, a metric's `cpu_core/cycles/`),
    /// printed as `display` unless a `name=` term says otherwise.
    pub fn on_pmu(
        &self,
        pmu: &str,
        terms: &str,
        modifiers: &str,
        display: &str,
    ) -> Result<CounterEvent, EventError> {
        let syntax = |message: String| EventError::Syntax { text: display.to_string(), message };
        let parsed = grammar::parse_terms(terms, 0).map_err(|e| syntax(e.message))?;
        let mods = grammar::parse_modifiers(modifiers, 0).map_err(|e| syntax(e.message))?;
        let e = EventAst {
            text: display.to_string(),
            span: 0..display.len(),
            body: Body::Slashed { head: pmu.to_string(), head_span: 0..0, terms: parsed.clone() },
            modifiers: mods.clone(),
        };
        let mut warnings = Vec::new();
        let mut b = self.pmu_event(pmu, &[], &parsed, &e, &mut warnings).map_err(|(_, err)| err)?;
        let ResolvedEvent::Counter(mut event) = b.event else {
            return Err(syntax("not a counter".into()));
        };
        if mods.retire_latency {
            return Err(EventError::Modifier {
                event: display.to_string(),
                modifier: 'R',
                why: "asks for a retire latency, which needs sampling",
            });
        }
        apply_modifiers(&mut event.attr, &mut b.gh, &mods, false, true);
        Ok(event)
    }

    /// The uncore PMUs (not core PMUs) a PMU name without its box number names, in perf's
    /// order (`uncore_cha` and `cha`: `uncore_cha_0`, `uncore_cha_1`, ...).
    pub fn uncore_boxes(&self, name: &str) -> Vec<String> {
        self.all_pmus()
            .into_iter()
            .filter(|p| !is_core_pmu(self.sysfs, p) && pmu_wildcard_matches(p, name))
            .collect()
    }

    /// Whether core PMU `pmu` has PERF_METRICS (perf's `evsel__sys_has_perf_metrics`: type 4
    /// with a `slots` event).
    pub fn has_perf_metrics(&self, pmu: &str) -> bool {
        self.sysfs.pmu(pmu).is_ok_and(|p| p.type_ == TYPE_RAW)
            && self.sysfs.pmu(pmu).ok().and_then(|p| p.alias("slots").ok().flatten()).is_some()
    }

    /// The topdown role of a counter on a PMU with PERF_METRICS, from its encoding.
    pub fn topdown_role(&self, event: &CounterEvent) -> Option<Topdown> {
        let EventKind::Pmu(pmu) = &event.kind else { return None };
        if event.attr.type_ != TYPE_RAW || !self.has_perf_metrics(pmu) {
            return None;
        }
        topdown_of_config(event.attr.config)
    }

    /// One event of the list: its expansions, named and with its own modifiers applied.
    fn expand(
        &self,
        e: &EventAst,
        spread: Spread,
        warnings: &mut Vec<String>,
        wildcard_pmus: &mut bool,
    ) -> Result<Vec<(Built, Option<String>)>, Fail> {
        let m = &e.modifiers;
        let mods_span = || m.span.clone().unwrap_or(e.span.clone());
        if m.retire_latency {
            return Err((
                mods_span(),
                EventError::Modifier {
                    event: e.text.clone(),
                    modifier: 'R',
                    why: "asks for a retire latency, which needs sampling; counting cannot read one (metrics with `:R` inputs use --record-tpebs)",
                },
            ));
        }
        let mut built = match &e.body {
            Body::Name { name, span } => self.named(name, span, &[], e, spread, warnings)?,
            Body::Slashed { head, head_span, terms } => {
                self.slashed(head, head_span, terms, e, spread, warnings, wildcard_pmus)?
            }
            Body::Numeric { type_, config } => vec![self.numeric(*type_, *config)],
            Body::Tracepoint { system, name, name_span } => {
                vec![self.tracepoint(system, name, name_span, e, spread)?]
            }
        };
        if built.is_empty() {
            let filter = self.filter.unwrap_or("the PMU filter");
            return Err((
                e.span.clone(),
                EventError::Syntax {
                    text: e.text.clone(),
                    message: format!(
                        "no PMU is left for it: it counts on core PMUs, and --cputype chose `{filter}`"
                    ),
                },
            ));
        }
        let many_uncore = built.iter().filter(|b| b.pmu.is_some()).count() > 1
            && built.iter().all(|b| b.pmu.as_deref().is_some_and(|p| !is_core_pmu(self.sysfs, p)));
        // A lone event ([`Resolver::single`]) is not tied to one core PMU: its name stays.
        let hybrid = spread == Spread::All && self.hybrid();
        let mut boxes = Vec::with_capacity(built.len());
        for b in &mut built {
            let mut box_name = None;
            match &mut b.event {
                ResolvedEvent::Tool(_) => {
                    if !m.is_empty() {
                        return Err((
                            mods_span(),
                            EventError::Syntax {
                                text: e.text.clone(),
                                message: "tool events take no modifiers".into(),
                            },
                        ));
                    }
                }
                ResolvedEvent::Counter(c) => {
                    // Boxes of one uncore PMU are named as written (perf merges them into
                    // one line); each box's own name is for `-A`/`--no-merge`.
                    if !b.named {
                        c.name = display_name(&e.text, b.pmu.as_deref(), hybrid, false, self.sysfs);
                    }
                    if many_uncore {
                        box_name = Some(if b.named {
                            c.name.clone()
                        } else {
                            display_name(&e.text, b.pmu.as_deref(), hybrid, true, self.sysfs)
                        });
                    }
                    apply_modifiers(&mut c.attr, &mut b.gh, m, false, true);
                }
            }
            boxes.push(box_name);
        }
        mod_warnings(m, warnings);
        Ok(built.into_iter().zip(boxes).collect())
    }

    fn software(
        &self,
        config: u64,
        terms: &[TermAst],
        warnings: &mut Vec<String>,
    ) -> Result<Built, Fail> {
        let mut event = counter_event(TYPE_SOFTWARE, config, EventKind::Software, None);
        let named = common_terms(&mut event, terms, warnings)?;
        Ok(Built { event: ResolvedEvent::Counter(event), pmu: None, gh: false, named })
    }

    /// A legacy hardware or cache event: on each core PMU with its type in the upper half of
    /// the config on a hybrid machine (the PMU filter applies), else once without a type.
    fn legacy_wildcard(
        &self,
        type_: u32,
        config: u64,
        terms: &[TermAst],
        spread: Spread,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Built>, Fail> {
        let core = self.core_pmus();
        let mut out = Vec::new();
        if spread == Spread::All && core.len() > 1 {
            for pmu_name in core.iter().filter(|p| !self.filtered(p)) {
                let Ok(pmu) = self.sysfs.pmu(pmu_name) else { continue };
                out.push(on_core_pmu(pmu_name, &pmu, type_, config, terms, warnings)?);
            }
            if !core.is_empty() {
                return Ok(out);
            }
        }
        let mut event = counter_event(type_, config, EventKind::Hardware, None);
        let named = common_terms(&mut event, terms, warnings)?;
        let pmu = self.sysfs.core_pmu();
        out.push(Built { event: ResolvedEvent::Counter(event), pmu, gh: false, named });
        Ok(out)
    }

    fn raw(
        &self,
        config: u64,
        terms: &[TermAst],
        warnings: &mut Vec<String>,
    ) -> Result<Built, Fail> {
        let pmu = self.sysfs.pmu_by_type(TYPE_RAW);
        let kind = pmu.clone().map_or(EventKind::Hardware, EventKind::Pmu);
        let cpus = pmu.as_deref().and_then(|p| self.sysfs.pmu(p).ok()).and_then(|p| p.cpumask);
        let mut event = counter_event(TYPE_RAW, config, kind, cpus);
        let named = common_terms(&mut event, terms, warnings)?;
        Ok(Built {
            event: ResolvedEvent::Counter(event),
            pmu: pmu.or_else(|| self.sysfs.core_pmu()),
            gh: false,
            named,
        })
    }

    /// A name with optional extra terms (`cycles`, `cycles/name=c/`, `L1-dcache-loads`,
    /// `r1a8`, `INST_RETIRED.ANY`, `INST_RETIRED.ANY/cmask=1/`).
    fn named(
        &self,
        name: &str,
        span: &Span,
        terms: &[TermAst],
        e: &EventAst,
        spread: Spread,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Built>, Fail> {
        if let Some(tool) = ToolEvent::from_name(name) {
            if let Some(t) = terms.first() {
                return Err((
                    t.span.clone(),
                    EventError::Syntax {
                        text: e.text.clone(),
                        message: "tool events take no terms".into(),
                    },
                ));
            }
            return Ok(vec![Built {
                event: ResolvedEvent::Tool(tool),
                pmu: None,
                gh: false,
                named: false,
            }]);
        }
        if let Some(config) = software_config(name) {
            return Ok(vec![self.software(config, terms, warnings)?]);
        }
        if let Some(config) = hardware_config(name) {
            return self.legacy_wildcard(TYPE_HARDWARE, config, terms, spread, warnings);
        }
        if is_cache_name(name) {
            return self.cache(name, span, terms, e, spread, warnings);
        }
        if let Some(config) = raw_config(name) {
            return Ok(vec![self.raw(config, terms, warnings)?]);
        }
        self.on_pmus(name, span, terms, e, spread, warnings)
    }

    /// perf's `parse_events_add_cache`: on every PMU that has an event of this name as that
    /// event, on core PMUs as a `PERF_TYPE_HW_CACHE` event.
    fn cache(
        &self,
        name: &str,
        span: &Span,
        terms: &[TermAst],
        e: &EventAst,
        spread: Spread,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Built>, Fail> {
        let config = cache_config(name).map_err(|why| {
            (span.clone(), EventError::Syntax { text: e.text.clone(), message: why })
        })?;
        let core = self.core_pmus();
        if spread == Spread::One || core.len() <= 1 {
            // Without a PMU type, unless the core PMU names the event itself.
            if let Some(c) = core.first()
                && self.pmu_has_event(c, name)
            {
                return Ok(vec![self.pmu_event(c, &named_term(name, span), terms, e, warnings)?]);
            }
            let mut event = counter_event(TYPE_HW_CACHE, config, EventKind::Hardware, None);
            let named = common_terms(&mut event, terms, warnings)?;
            return Ok(vec![Built {
                event: ResolvedEvent::Counter(event),
                pmu: core.first().cloned(),
                gh: false,
                named,
            }]);
        }
        let mut out = Vec::new();
        for pmu_name in self.all_pmus().iter().filter(|p| !self.filtered(p)) {
            if self.pmu_has_event(pmu_name, name) {
                out.push(self.pmu_event(pmu_name, &named_term(name, span), terms, e, warnings)?);
                continue;
            }
            if !is_core_pmu(self.sysfs, pmu_name) {
                continue;
            }
            let Ok(pmu) = self.sysfs.pmu(pmu_name) else { continue };
            out.push(on_core_pmu(pmu_name, &pmu, TYPE_HW_CACHE, config, terms, warnings)?);
        }
        Ok(out)
    }

    /// A PMU event named bare (`INST_RETIRED.ANY`, `slots`, `tsc`): on every PMU that has it
    /// (perf's `parse_events_multi_pmu_add`), or for [`Resolver::single`] the core PMU's or the
    /// only one.
    fn on_pmus(
        &self,
        name: &str,
        span: &Span,
        terms: &[TermAst],
        e: &EventAst,
        spread: Spread,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Built>, Fail> {
        let sysfs_err = |err: EventError| (span.clone(), err);
        let mut found = Vec::new();
        for pmu in self.all_pmus() {
            if spread == Spread::All && self.filtered(&pmu) {
                continue;
            }
            if self.alias_terms(&pmu, name).map_err(sysfs_err)?.is_some() {
                found.push(pmu);
            }
        }
        if spread == Spread::One
            && found.len() > 1
            && let Some(core) = self.sysfs.core_pmu()
            && found.contains(&core)
        {
            found = vec![core];
        }
        if found.is_empty() {
            return Err((span.clone(), self.unknown(name)));
        }
        let term = named_term(name, span);
        found.iter().map(|pmu| self.pmu_event(pmu, &term, terms, e, warnings)).collect()
    }

    fn unknown(&self, name: &str) -> EventError {
        if let Some(filter) = self.filter {
            let others = self
                .all_pmus()
                .into_iter()
                .filter(|p| p != filter && self.pmu_has_event(p, name))
                .collect::<Vec<_>>();
            if !others.is_empty() {
                return EventError::Filtered {
                    name: name.to_string(),
                    filter: filter.to_string(),
                    pmus: others.join(", "),
                };
            }
        }
        EventError::Unknown { name: name.to_string(), tables: self.tables.is_some() }
    }

    #[allow(clippy::too_many_arguments)]
    fn slashed(
        &self,
        head: &str,
        head_span: &Span,
        terms: &[TermAst],
        e: &EventAst,
        spread: Spread,
        warnings: &mut Vec<String>,
        wildcard_pmus: &mut bool,
    ) -> Result<Vec<Built>, Fail> {
        // Legacy names keep their meaning before a slash (`cycles/name=c/`), as perf's lexer
        // reads them before any PMU name.
        if ToolEvent::from_name(head).is_some()
            || software_config(head).is_some()
            || hardware_config(head).is_some()
            || is_cache_name(head)
            || raw_config(head).is_some()
        {
            return self.named(head, head_span, terms, e, spread, warnings);
        }
        if self.sysfs.has_pmu(head) {
            return Ok(vec![self.pmu_event(head, &[], terms, e, warnings)?]);
        }
        let matching: Vec<String> = self
            .all_pmus()
            .into_iter()
            .filter(|p| {
                pmu_wildcard_matches(p, head) && !(spread == Spread::All && self.filtered(p))
            })
            .collect();
        if !matching.is_empty() {
            if spread == Spread::One && matching.len() > 1 {
                return Err((
                    head_span.clone(),
                    EventError::Ambiguous { name: e.text.clone(), pmus: matching.join(", ") },
                ));
            }
            *wildcard_pmus = true;
            return matching.iter().map(|p| self.pmu_event(p, &[], terms, e, warnings)).collect();
        }
        // `event/terms/`: an event name found on PMUs, with extra terms.
        if head.contains(|c: char| c.is_ascii_alphabetic())
            && self.all_pmus().iter().any(|p| self.pmu_has_event(p, head))
        {
            return self.on_pmus(head, head_span, terms, e, spread, warnings);
        }
        if pmu_name_like(head) {
            return Err((
                head_span.clone(),
                EventError::NoPmu { pmu: head.to_string(), dir: self.sysfs.pmu_devices() },
            ));
        }
        Err((
            head_span.clone(),
            EventError::NoPmuOrEvent { name: head.to_string(), dir: self.sysfs.pmu_devices() },
        ))
    }

    fn numeric(&self, type_: u32, config: u64) -> Built {
        let (kind, pmu) = match type_ {
            TYPE_SOFTWARE => (EventKind::Software, None),
            TYPE_TRACEPOINT => (EventKind::Tracepoint, None),
            TYPE_HARDWARE | TYPE_HW_CACHE => (EventKind::Hardware, self.sysfs.core_pmu()),
            other => match self.sysfs.pmu_by_type(other) {
                Some(p) => (EventKind::Pmu(p.clone()), Some(p)),
                None => (EventKind::Pmu(format!("type {other}")), None),
            },
        };
        let cpus = pmu.as_deref().and_then(|p| self.sysfs.pmu(p).ok()).and_then(|p| p.cpumask);
        let pmu = pmu.filter(|p| p != "msr");
        Built {
            event: ResolvedEvent::Counter(counter_event(type_, config, kind, cpus)),
            pmu,
            gh: false,
            named: false,
        }
    }

    fn tracepoint(
        &self,
        system: &str,
        name: &str,
        name_span: &Span,
        e: &EventAst,
        spread: Spread,
    ) -> Result<Built, Fail> {
        match self.sysfs.tracepoint(system, name) {
            Ok(id) => Ok(Built {
                event: ResolvedEvent::Counter(counter_event(
                    TYPE_TRACEPOINT,
                    id,
                    EventKind::Tracepoint,
                    None,
                )),
                pmu: None,
                gh: false,
                named: false,
            }),
            Err(problem) => {
                // `cycles:ukx` is an event with a bad modifier, not a tracepoint.
                let known = ToolEvent::from_name(system).is_some()
                    || software_config(system).is_some()
                    || hardware_config(system).is_some()
                    || is_cache_name(system)
                    || raw_config(system).is_some()
                    || self.all_pmus().iter().any(|p| self.pmu_has_event(p, system));
                if known && name.chars().all(|c| c.is_ascii_alphabetic()) {
                    let (i, c) = name
                        .char_indices()
                        .find(|&(_, c)| !"ukhpPGHSDIWebR".contains(c))
                        .unwrap_or((0, name.chars().next().unwrap_or(' ')));
                    let at = name_span.start + i;
                    return Err((
                        at..at + c.len_utf8(),
                        EventError::Syntax {
                            text: e.text.clone(),
                            message: format!(
                                "unknown modifier `{c}`; expected modifiers: {}",
                                grammar::MODIFIER_HELP
                            ),
                        },
                    ));
                }
                let _ = spread;
                Err((e.span.clone(), EventError::Tracepoint { text: e.text.clone(), problem }))
            }
        }
    }

    /// `pmu/terms/` on one PMU; `first` are terms placed before the user's (the event name of
    /// `INST_RETIRED.ANY/cmask=1/`).
    fn pmu_event(
        &self,
        pmu_name: &str,
        first: &[TermAst],
        terms: &[TermAst],
        e: &EventAst,
        warnings: &mut Vec<String>,
    ) -> Result<Built, Fail> {
        let pmu = self.sysfs.pmu(pmu_name).map_err(|err| (e.span.clone(), err.into()))?;
        let mut b = PmuBuild {
            config: [0; 4],
            hw: None,
            format_used: None,
            name: None,
            unit: None,
            scale: None,
        };
        for term in first.iter().chain(terms) {
            self.apply_term(&pmu, term, &mut b, e, warnings, true)?;
        }
        let named = b.name.is_some();
        let name = b.name.unwrap_or_else(|| e.text.clone());
        let event = match b.hw {
            Some((type_, config, ref term)) => {
                if let Some(format) = b.format_used {
                    return Err((
                        format.1,
                        EventError::Syntax {
                            text: e.text.clone(),
                            message: format!(
                                "`{term}` names a whole event on {pmu_name}; it cannot be combined with the format term `{}`",
                                format.0
                            ),
                        },
                    ));
                }
                CounterEvent {
                    name,
                    attr: Attr { type_, config, ..Attr::default() },
                    kind: EventKind::Hardware,
                    unit: None,
                    scale: None,
                    cpus: pmu.cpumask.clone(),
                }
            }
            None => {
                let [config, config1, config2, config3] = b.config;
                CounterEvent {
                    name,
                    attr: Attr {
                        type_: pmu.type_,
                        config,
                        config1,
                        config2,
                        config3,
                        ..Attr::default()
                    },
                    kind: EventKind::Pmu(pmu_name.to_string()),
                    unit: b.unit,
                    scale: b.scale,
                    cpus: pmu.cpumask.clone(),
                }
            }
        };
        let counts_on = (pmu_name != "msr" && !matches!(pmu_name, "software" | "tracepoint"))
            .then(|| pmu_name.to_string());
        Ok(Built { event: ResolvedEvent::Counter(event), pmu: counts_on, gh: false, named })
    }

    /// Applies one term of `e` on `pmu` to the event being built (`aliases`: a bare term may
    /// name a sysfs alias, false inside an alias's own terms).
    fn apply_term(
        &self,
        pmu: &SysfsPmu,
        term: &TermAst,
        b: &mut PmuBuild,
        e: &EventAst,
        warnings: &mut Vec<String>,
        aliases: bool,
    ) -> Result<(), Fail> {
        if apply_builtin_term(term, b, e, warnings)? {
            return Ok(());
        }
        if term.value.is_none() && self.apply_bare_term(pmu, term, b, e, warnings, aliases)? {
            return Ok(());
        }
        let name = term.name.as_str();
        let Some(format) = pmu.format(name) else {
            return Err(self.unknown_term(pmu, term, e));
        };
        let value = term_number(term, e, name)?;
        format.place(value, &mut b.config).ok_or_else(|| {
            (
                term.span.clone(),
                EventError::BadValue {
                    event: e.text.clone(),
                    term: name.to_string(),
                    value: match &term.value {
                        Some(TermValue::Num(n)) => format!("{n:#x}"),
                        _ => "1".into(),
                    },
                    why: format!(
                        "does not fit the {} bits of the `{}` format",
                        format.bits.len(),
                        format.name
                    ),
                },
            )
        })?;
        b.format_used = Some((name.to_string(), term.span.clone()));
        Ok(())
    }

    /// A term without a value: a format bit (`edge`, `inv`, `any`), else an event of the PMU
    /// (alias or vendor event), else a legacy hardware or cache event of this core PMU, else
    /// a raw `rNNN` config. False when it is none of these.
    fn apply_bare_term(
        &self,
        pmu: &SysfsPmu,
        term: &TermAst,
        b: &mut PmuBuild,
        e: &EventAst,
        warnings: &mut Vec<String>,
        aliases: bool,
    ) -> Result<bool, Fail> {
        let at = |err: EventError| (term.span.clone(), err);
        let name = term.name.as_str();
        if let Some(format) = pmu.format(name) {
            format.place(1, &mut b.config).ok_or_else(|| {
                at(EventError::BadValue {
                    event: e.text.clone(),
                    term: name.to_string(),
                    value: "1".into(),
                    why: "does not fit its format".into(),
                })
            })?;
            b.format_used = Some((name.to_string(), term.span.clone()));
            return Ok(true);
        }
        if aliases && let Some(alias) = self.alias_terms(&pmu.name, name).map_err(at)? {
            b.unit = alias.unit.clone().or(b.unit.take());
            b.scale = alias.scale.or(b.scale);
            let inner = grammar::parse_terms(&alias.terms, 0).map_err(|err| {
                syntax_error(
                    term,
                    e,
                    format!(
                        "`{name}` of PMU `{}` has terms perf cannot read (`{}`): {}",
                        pmu.name, alias.terms, err.message
                    ),
                )
            })?;
            for t in inner {
                let t = TermAst { span: term.span.clone(), ..t };
                self.apply_term(pmu, &t, b, e, warnings, false).map_err(|(span, err)| {
                    (
                        span,
                        EventError::InAlias {
                            alias: name.to_string(),
                            terms: alias.terms.clone(),
                            error: Box::new(err),
                        },
                    )
                })?;
            }
            return Ok(true);
        }
        let core = is_core_pmu(self.sysfs, &pmu.name);
        let ext = if self.hybrid() { u64::from(pmu.type_) << 32 } else { 0 };
        if let Some(config) = hardware_config(name) {
            b.hw = Some((TYPE_HARDWARE, config | ext, name.to_string()));
            return Ok(true);
        }
        if core && is_cache_name(name) {
            let config = cache_config(name).map_err(|m| syntax_error(term, e, m))?;
            b.hw = Some((TYPE_HW_CACHE, config | ext, name.to_string()));
            return Ok(true);
        }
        if let Some(config) = raw_config(name) {
            b.config[0] = config;
            b.format_used = Some((name.to_string(), term.span.clone()));
            return Ok(true);
        }
        Ok(false)
    }

    /// The error for a term `pmu` has no format for, listing the terms it takes.
    fn unknown_term(&self, pmu: &SysfsPmu, term: &TermAst, e: &EventAst) -> Fail {
        let mut known: Vec<String> = pmu.formats.iter().map(|f| f.name.clone()).collect();
        known.extend(
            ["config", "config1", "config2", "config3", "name", "period"].map(String::from),
        );
        let mut known = known.join(", ");
        let aliases = pmu.alias_names();
        if !aliases.is_empty() {
            known.push_str(&format!("; events: {}", aliases.join(", ")));
        }
        if self.tables.is_some() && is_core_pmu(self.sysfs, &pmu.name) {
            known.push_str(" and the vendor events of `tmetric list events`");
        }
        (
            term.span.clone(),
            EventError::UnknownTerm {
                event: e.text.clone(),
                pmu: pmu.name.clone(),
                term: term.name.clone(),
                known,
            },
        )
    }
}

/// Applies a term every PMU takes (`name`, `metric-id`, `period`, `percore`, `config*`), or
/// refuses a sampling or driver configuration term. False for any other term.
fn apply_builtin_term(
    term: &TermAst,
    b: &mut PmuBuild,
    e: &EventAst,
    warnings: &mut Vec<String>,
) -> Result<bool, Fail> {
    let name = term.name.as_str();
    match name {
        "name" => {
            b.name = Some(match &term.value {
                Some(TermValue::Str(s)) => s.clone(),
                Some(TermValue::Num(n)) => n.to_string(),
                None => {
                    return Err(syntax_error(term, e, "`name` needs a value: `name=NAME`".into()));
                }
            });
        }
        "metric-id" => {}
        // Sampling periods come with vendor encodings; counting ignores them.
        "period" => {
            term_number(term, e, name)?;
        }
        "percore" => {
            term_number(term, e, name)?;
            warnings.push(format!(
                "{}: the `percore` term is ignored: tmetric does not sum an event over the SMT siblings of a core",
                e.text
            ));
        }
        "config" | "config1" | "config2" | "config3" => {
            let word = match name {
                "config" => 0,
                "config1" => 1,
                "config2" => 2,
                _ => 3,
            };
            b.config[word] = term_number(term, e, name)?;
            if word == 0 {
                b.format_used = Some((name.to_string(), term.span.clone()));
            }
        }
        _ if SAMPLING_TERMS.contains(&name) => {
            return Err(syntax_error(
                term,
                e,
                format!(
                    "`{name}` is a sampling term, not usable when counting (perf stat refuses it too); expected format terms, config*, name or period"
                ),
            ));
        }
        _ if name.starts_with('@') => {
            return Err(syntax_error(
                term,
                e,
                format!(
                    "driver configuration terms (`{name}`) are for AUX tracing PMUs, which tmetric does not count"
                ),
            ));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A syntax error of `e` at `term`.
fn syntax_error(term: &TermAst, e: &EventAst, message: String) -> Fail {
    (term.span.clone(), EventError::Syntax { text: e.text.clone(), message })
}

/// The value of `term` (named `what` in the error) as a number; a bare term is 1.
fn term_number(term: &TermAst, e: &EventAst, what: &str) -> Result<u64, Fail> {
    match &term.value {
        Some(TermValue::Num(n)) => Ok(*n),
        None => Ok(1),
        Some(TermValue::Str(s)) => Err((
            term.span.clone(),
            EventError::BadValue {
                event: e.text.clone(),
                term: what.to_string(),
                value: s.clone(),
                why: "is not a number (decimal or 0x hex)".into(),
            },
        )),
    }
}

/// A PMU event being built from terms.
struct PmuBuild {
    config: [u64; 4],
    /// A legacy hardware or cache event named as a term (`cpu_core/cycles/`): type, config,
    /// the term.
    hw: Option<(u32, u64, String)>,
    /// A format or config term that was set, for the error when `hw` is set too.
    format_used: Option<(String, Span)>,
    name: Option<String>,
    unit: Option<String>,
    scale: Option<f64>,
}

fn named_term(name: &str, span: &Span) -> Vec<TermAst> {
    vec![TermAst { name: name.to_string(), value: None, span: span.clone() }]
}

/// A name that can only be a PMU (`uncore_imc_7`, `cpu_core`): reported as a missing PMU.
fn pmu_name_like(head: &str) -> bool {
    head.starts_with("uncore_")
        || head.starts_with("cpu")
        || head.starts_with("armv")
        || head.starts_with("amd_")
        || matches!(head, "msr" | "power" | "software" | "tracepoint" | "breakpoint")
        || head.starts_with("cstate")
}

/// perf's `is_pmu_core`: `cpu`, `cpum_cf`, or a PMU with a `cpus` file.
pub fn is_core_pmu(sysfs: &Sysfs, name: &str) -> bool {
    name == "cpu" || name == "cpum_cf" || sysfs.pmu_devices().join(name).join("cpus").exists()
}

/// The topdown role of an Intel core PMU encoding (`event=0x00`): `slots` is umask 0x4, the
/// metric events umask 0x80 to 0x87.
pub fn topdown_of_config(config: u64) -> Option<Topdown> {
    if config & 0xff != 0 || config >> 16 != 0 {
        return None;
    }
    match (config >> 8) & 0xff {
        0x04 => Some(Topdown::Slots),
        0x80..=0x87 => Some(Topdown::Metric),
        _ => None,
    }
}

/// A legacy hardware or cache event (`type_`, `config`) on one core PMU of a hybrid machine:
/// the PMU's type in the config's upper half, counted on that PMU's CPUs, with its terms.
fn on_core_pmu(
    pmu_name: &str,
    pmu: &SysfsPmu,
    type_: u32,
    config: u64,
    terms: &[TermAst],
    warnings: &mut Vec<String>,
) -> Result<Built, Fail> {
    let mut event = counter_event(
        type_,
        config | u64::from(pmu.type_) << 32,
        EventKind::Hardware,
        pmu.cpumask.clone(),
    );
    let named = common_terms(&mut event, terms, warnings)?;
    Ok(Built {
        event: ResolvedEvent::Counter(event),
        pmu: Some(pmu_name.to_string()),
        gh: false,
        named,
    })
}

fn counter_event(type_: u32, config: u64, kind: EventKind, cpus: Option<Vec<u32>>) -> CounterEvent {
    CounterEvent {
        name: String::new(),
        attr: Attr { type_, config, ..Attr::default() },
        kind,
        unit: None,
        scale: None,
        cpus,
    }
}

/// The terms a legacy event takes (perf's `config_term_common` under `perf stat`): `name`,
/// `metric-id`, `period`, `percore`, `config*`. Returns whether `name=` was given.
fn common_terms(
    event: &mut CounterEvent,
    terms: &[TermAst],
    warnings: &mut Vec<String>,
) -> Result<bool, Fail> {
    let mut named = false;
    for term in terms {
        let num = || match &term.value {
            Some(TermValue::Num(n)) => Ok(*n),
            None => Ok(1),
            Some(TermValue::Str(s)) => Err((
                term.span.clone(),
                EventError::BadValue {
                    event: event.name.clone(),
                    term: term.name.clone(),
                    value: s.clone(),
                    why: "is not a number (decimal or 0x hex)".into(),
                },
            )),
        };
        match term.name.as_str() {
            "name" => {
                event.name = match &term.value {
                    Some(TermValue::Str(s)) => s.clone(),
                    Some(TermValue::Num(n)) => n.to_string(),
                    None => String::new(),
                };
                named = !event.name.is_empty();
            }
            "metric-id" => {}
            "period" => {
                num()?;
            }
            "percore" => {
                num()?;
                warnings.push("the `percore` term is ignored: tmetric does not sum an event over the SMT siblings of a core".into());
            }
            "config" => event.attr.config = num()?,
            "config1" => event.attr.config1 = num()?,
            "config2" => event.attr.config2 = num()?,
            "config3" => event.attr.config3 = num()?,
            other => {
                let why = if SAMPLING_TERMS.contains(&other) {
                    format!("`{other}` is a sampling term, not usable when counting")
                } else {
                    format!(
                        "`{other}` is not a term of a legacy event; they take name, period and config*; PMU format terms go inside `pmu/.../` (`cpu/event=0x3c,{other}=.../`)"
                    )
                };
                return Err((
                    term.span.clone(),
                    EventError::Syntax { text: event.name.clone(), message: why },
                ));
            }
        }
    }
    Ok(named)
}

/// perf's `parse_events__modifier_list`: `u`, `k`, `h` keep only those modes (as event
/// modifiers from nothing excluded; as group modifiers on top of the member's own), `G` and
/// `H` guest or host only, `p` the precise level, `I` not when idle, `D`/`e` pinned and
/// exclusive on a group leader.
fn apply_modifiers(attr: &mut Attr, gh: &mut bool, m: &Modifiers, group: bool, leader: bool) {
    if m.is_empty() {
        return;
    }
    let (mut eu, mut ek, mut eh) = if group {
        (attr.exclude_user, attr.exclude_kernel, attr.exclude_hv)
    } else {
        (false, false, false)
    };
    let (mut e_host, mut e_guest) =
        if group { (attr.exclude_host, attr.exclude_guest) } else { (false, false) };
    let mut exclude = eu || ek || eh;
    let mut exclude_gh = group && *gh;
    if m.precise > 0 {
        e_guest = true;
    }
    // The first of `u`, `k`, `h` excludes every mode; each then lets its own mode back in.
    if m.user {
        if !exclude {
            exclude = true;
            (ek, eh) = (true, true);
        }
        if !exclude_gh {
            e_guest = true;
        }
        eu = false;
    }
    if m.kernel {
        if !exclude {
            exclude = true;
            (eu, eh) = (true, true);
        }
        ek = false;
    }
    if m.hypervisor {
        if !exclude {
            (eu, ek) = (true, true);
        }
        eh = false;
    }
    if m.guest {
        if !exclude_gh {
            exclude_gh = true;
            e_host = true;
        }
        e_guest = false;
    }
    if m.host {
        if !exclude_gh {
            exclude_gh = true;
            e_guest = true;
        }
        e_host = false;
    }
    attr.exclude_user = eu;
    attr.exclude_kernel = ek;
    attr.exclude_hv = eh;
    attr.exclude_host = e_host;
    attr.exclude_guest = e_guest;
    *gh = exclude_gh;
    if m.precise > 0 {
        attr.precise_ip = (attr.precise_ip + m.precise).min(3);
    }
    if m.non_idle {
        attr.exclude_idle = true;
    }
    if m.pinned && leader {
        attr.pinned = true;
    }
    if m.exclusive && leader {
        attr.exclusive = true;
    }
}

/// Modifiers that are accepted but change nothing when counting.
fn mod_warnings(m: &Modifiers, warnings: &mut Vec<String>) {
    if m.bpf {
        warnings.push(
            "the `b` modifier (count with BPF) is ignored: tmetric counts with perf_event_open"
                .into(),
        );
    }
    if m.sample_read {
        warnings.push(
            "the `S` modifier (read the group on samples) only matters when sampling; ignored"
                .into(),
        );
    }
    if m.precise_max {
        warnings.push("the `P` modifier (maximum precision) only matters when sampling; the event is counted as written without it".into());
    }
}

fn dedup(v: &mut Vec<String>) {
    let mut seen = Vec::new();
    v.retain(|w| {
        if seen.contains(w) {
            false
        } else {
            seen.push(w.clone());
            true
        }
    });
}

/// The printed name: the text as written, labelled with its PMU where perf would (perf's
/// `uniquify_event_name`: `cpu_core/cycles/` on a hybrid core PMU; `NAME [uncore_imc_0]` for
/// one of several uncore instances, which perf would merge).
fn display_name(
    text: &str,
    pmu: Option<&str>,
    hybrid: bool,
    many_uncore: bool,
    sysfs: &Sysfs,
) -> String {
    let Some(pmu) = pmu else { return text.to_string() };
    if text.starts_with(pmu) {
        return text.to_string();
    }
    if hybrid && is_core_pmu(sysfs, pmu) {
        return match text.find('/') {
            Some(i) => format!("{pmu}{}", &text[i..]),
            None => format!("{pmu}/{text}/"),
        };
    }
    if many_uncore {
        return box_name(text, pmu);
    }
    text.to_string()
}

/// The name perf prints for `display` counted on uncore box `pmu` alone (`-A`,
/// `--no-merge`): `uncore_imc_0/event=0x5/` for `uncore_imc/event=0x5/`,
/// `UNC_M_CAS_COUNT.RD [uncore_imc_0]` for a name.
pub fn box_name(display: &str, pmu: &str) -> String {
    if display.starts_with(pmu) {
        return display.to_string();
    }
    match display.find('/') {
        Some(i) => format!("{pmu}{}", &display[i..]),
        None => format!("{display} [{pmu}]"),
    }
}

/// One event on its way through perf's regrouping.
#[derive(Debug, Clone)]
struct Entry {
    built: Built,
    uncore_box: Option<UncoreBox>,
    /// The group it was written in (each lone event has its own).
    group: usize,
    braced: bool,
    weak: bool,
    idx: usize,
    pmu_name: String,
    software_like: bool,
    topdown: Option<Topdown>,
}

impl Entry {
    fn new(built: Built, group: usize, braced: bool, weak: bool, r: &Resolver<'_>) -> Entry {
        let topdown = match &built.event {
            ResolvedEvent::Counter(c) => r.topdown_role(c),
            ResolvedEvent::Tool(_) => None,
        };
        let (pmu_name, software_like) = match &built.pmu {
            Some(p) => (p.clone(), false),
            None => (String::from("software"), true),
        };
        Entry {
            built,
            uncore_box: None,
            group,
            braced,
            weak,
            idx: 0,
            pmu_name,
            software_like,
            topdown,
        }
    }
}

/// perf's `parse_events__sort_events_and_fix_groups`: lone topdown events are gathered at the
/// first one's place, every group is sorted so `slots` leads and topdown events follow, and
/// groups are split where their PMUs differ. Returns the groups and whether anything moved.
fn fix_groups(mut entries: Vec<Entry>, perf_metrics: bool) -> (Vec<ListGroup>, bool) {
    for (i, e) in entries.iter_mut().enumerate() {
        e.idx = i;
    }
    let n = entries.len();
    let members = |g: usize, entries: &[Entry]| entries.iter().filter(|e| e.group == g).count();
    let counts: Vec<usize> = entries.iter().map(|e| members(e.group, &entries)).collect();
    let leader_idx: Vec<usize> = entries
        .iter()
        .map(|e| entries.iter().find(|x| x.group == e.group).map_or(e.idx, |x| x.idx))
        .collect();
    // Software events in a group count on its hardware PMU.
    let group_pmu: Vec<String> = entries
        .iter()
        .map(|e| {
            if !e.software_like {
                return e.pmu_name.clone();
            }
            entries
                .iter()
                .find(|x| x.group == e.group && !x.software_like)
                .map_or_else(|| e.pmu_name.clone(), |x| x.pmu_name.clone())
        })
        .collect();
    let must = |e: &Entry| perf_metrics && e.topdown.is_some();
    let has_group: Vec<bool> = entries.iter().map(|e| e.braced && counts[e.idx] > 1).collect();
    let force = entries
        .iter()
        .find(|e| leader_idx[e.idx] == e.idx && counts[e.idx] < 2 && must(e))
        .map(|e| e.idx);
    let sort_idx = |e: &Entry| -> usize {
        if has_group[e.idx] {
            leader_idx[e.idx]
        } else if force.is_some() && must(e) {
            force.unwrap_or(e.idx)
        } else {
            e.idx
        }
    };
    let rank = |e: &Entry| match e.topdown {
        Some(Topdown::Slots) => 0,
        Some(Topdown::Metric) => 1,
        None => 2,
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        let (l, r) = (&entries[a], &entries[b]);
        sort_idx(l)
            .cmp(&sort_idx(r))
            .then_with(|| {
                if has_group[a] && has_group[b] {
                    group_pmu[a].cmp(&group_pmu[b])
                } else {
                    Ordering::Equal
                }
            })
            .then_with(|| if must(l) || must(r) { rank(l).cmp(&rank(r)) } else { Ordering::Equal })
            .then_with(|| l.idx.cmp(&r.idx))
    });
    // Regroup in the sorted order.
    let mut leaders: Vec<usize> = Vec::with_capacity(n);
    let mut cur_leader: Option<usize> = None;
    let mut cur_group: Option<usize> = None;
    let mut cur_forced = false;
    for &i in &order {
        let e = &entries[i];
        let forced = force.is_some() && must(e);
        let leader = *cur_leader.get_or_insert(i);
        let other_group = cur_group != Some(e.group) && !(forced && cur_forced);
        if other_group || group_pmu[leader] != group_pmu[i] {
            cur_leader = Some(i);
            cur_group = Some(e.group);
            cur_forced = forced;
        }
        leaders.push(cur_leader.unwrap_or(i));
    }
    let moved = order.iter().enumerate().any(|(pos, &i)| pos != i);
    let orig_leaders = entries.iter().filter(|e| leader_idx[e.idx] == e.idx).count();
    let mut distinct = leaders.clone();
    distinct.dedup();
    let changed = moved || distinct.len() != orig_leaders;
    let mut groups: Vec<ListGroup> = Vec::new();
    let mut last_leader = None;
    for (pos, &i) in order.iter().enumerate() {
        let leader = leaders[pos];
        let e = &mut entries[i];
        let event = ListEvent {
            event: e.built.event.clone(),
            pmu: e.built.pmu.clone(),
            topdown: e.topdown,
            uncore_box: e.uncore_box.clone(),
        };
        if last_leader == Some(leader)
            && let Some(g) = groups.last_mut()
        {
            g.events.push(event);
            g.grouped = true;
            g.weak |= e.weak;
        } else {
            groups.push(ListGroup { events: vec![event], grouped: e.braced, weak: e.weak });
        }
        last_leader = Some(leader);
    }
    (groups, changed)
}
