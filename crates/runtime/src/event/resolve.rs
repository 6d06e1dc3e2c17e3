//! Resolving event lists on a machine, as perf 6.12's `parse-events.c` does: legacy symbols
//! and cache events (on every core PMU of a hybrid machine, the PMU type in the config's
//! upper half), PMU events by sysfs alias or vendor table (on every PMU that has them), raw
//! `rNNN`, `pmu/terms/` with the PMU's `format/` files, modifiers, `--cputype`'s PMU filter,
//! and the regrouping perf applies afterwards (groups split per PMU, topdown events behind
//! `slots`, lone topdown events gathered into one group).
//!
//! The vendor tables (perf's pmu-events JSON) are not the runtime's: a caller that has them
//! passes an [`EventTables`] (the engine does, from the catalogue model of the machine).

use super::grammar::{self, Body, EventAst, Item, Span};
use super::{CounterEvent, EventError, EventKind, ResolvedEvent, ToolEvent};
use crate::sys::TYPE_RAW;
use crate::sysfs::Sysfs;

mod expand;
mod modifiers;
mod names;
mod regroup;
mod terms;

use expand::Spread;
use modifiers::{apply_modifiers, mod_warnings};
use names::pmu_sort_key;
pub use names::{
    box_name, is_core_pmu, matches_ignoring_suffix, pmu_wildcard_matches, table_pmu_matches,
};
use regroup::{Entry, fix_groups};

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
    /// A tool event's printed name: as written (`tool/num_cpus/`, `NUM_CPUS`), as perf names
    /// an event with the text that made it.
    pub tool_name: Option<String>,
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
    /// perf 7.x's `tool` PMU exists: `tool/num_cpus/`, `num_cpus`, `NUM_CPUS`.
    tool_pmu: bool,
}

impl std::fmt::Debug for Resolver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("sysfs", &self.sysfs.root())
            .field("tables", &self.tables.is_some())
            .field("filter", &self.filter)
            .field("tool_pmu", &self.tool_pmu)
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

impl<'a> Resolver<'a> {
    /// A resolver over `sysfs`, without vendor tables or a PMU filter.
    pub fn new(sysfs: &'a Sysfs) -> Resolver<'a> {
        Resolver { sysfs, tables: None, filter: None, tool_pmu: false }
    }

    /// Reads events as perf 7.x does, with its `tool` PMU (`tools/perf/util/tool_pmu.c`): the
    /// machine's facts (`num_cpus`, `smt_on`, ...) and the three times are events of a PMU
    /// called `tool`, written `tool/EVENT/` or bare in any case. perf 6.12 has no such PMU:
    /// without this, only its three lower-case tool names are read.
    pub fn with_tool_pmu(self, tool_pmu: bool) -> Resolver<'a> {
        Resolver { tool_pmu, ..self }
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
                        entry.written = e.text.clone();
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
                            entry.written = e.text.clone();
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
