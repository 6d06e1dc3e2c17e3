//! One written event expanded on the machine: tool, software, legacy hardware and cache
//! events (on every core PMU of a hybrid machine), raw `rNNN`, PMU events by name on every
//! PMU that has them, `pmu/terms/` heads, numeric `type/config` and tracepoints.

use super::modifiers::{apply_modifiers, mod_warnings};
use super::names::{display_name, is_core_pmu, pmu_name_like, pmu_wildcard_matches};
use super::terms::common_terms;
use super::{
    CounterEvent, EventError, EventKind, Fail, ResolvedEvent, Resolver, ToolEvent, raw_config,
};
use crate::event::grammar::{self, Body, EventAst, Span, TermAst};
use crate::event::legacy::{cache_config, hardware_config, is_cache_name, software_config};
use crate::sys::{Attr, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use crate::sysfs::SysfsPmu;

impl Resolver<'_> {
    /// One event of the list: its expansions, named and with its own modifiers applied.
    pub(super) fn expand(
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
                self.tracepoints(system, name, name_span, e)?
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
        let tool =
            if self.tool_pmu { ToolEvent::on_tool_pmu(name) } else { ToolEvent::from_name(name) };
        if let Some(tool) = tool {
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
        if self.tool_pmu && head == TOOL_PMU && !self.sysfs.has_pmu(head) {
            return self.on_tool_pmu(terms, head_span, e);
        }
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

    /// `tool/EVENT/` on perf 7.x's tool PMU: one term, an event of it in any case (perf finds
    /// aliases ignoring case); the PMU has no format, so nothing else can be written there.
    fn on_tool_pmu(
        &self,
        terms: &[TermAst],
        head_span: &Span,
        e: &EventAst,
    ) -> Result<Vec<Built>, Fail> {
        let events =
            || tmetric_names::tool_pmu_events().map(|t| t.name).collect::<Vec<_>>().join(", ");
        let tool = match terms {
            [TermAst { name, value: None, .. }] => ToolEvent::on_tool_pmu(name),
            _ => None,
        };
        let Some(tool) = tool else {
            let span = match terms {
                [] => head_span.clone(),
                [first, ..] => {
                    first.span.start..terms.last().map_or(first.span.end, |t| t.span.end)
                }
            };
            return Err((
                span,
                EventError::Syntax {
                    text: e.text.clone(),
                    message: format!(
                        "the tool PMU takes one of its events and nothing else: expected `tool/EVENT/` with EVENT one of {}",
                        events()
                    ),
                },
            ));
        };
        Ok(vec![Built { event: ResolvedEvent::Tool(tool), pmu: None, gh: false, named: false }])
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

    /// `system:name`, either part a glob (`syscalls:sys_enter_open*`, `block:*`): every
    /// tracepoint it names, in tracefs's order, each printed `system:name` as perf prints
    /// tracepoints (modifiers are not part of the name).
    fn tracepoints(
        &self,
        system: &str,
        name: &str,
        name_span: &Span,
        e: &EventAst,
    ) -> Result<Vec<Built>, Fail> {
        match self.sysfs.tracepoints(system, name) {
            Ok(found) => Ok(found
                .into_iter()
                .map(|(system, name, id)| {
                    let mut event = counter_event(TYPE_TRACEPOINT, id, EventKind::Tracepoint, None);
                    event.name = format!("{system}:{name}");
                    Built {
                        event: ResolvedEvent::Counter(event),
                        pmu: None,
                        gh: false,
                        named: true,
                    }
                })
                .collect()),
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
                Err((e.span.clone(), EventError::Tracepoint { text: e.text.clone(), problem }))
            }
        }
    }
}

/// perf 7.x's PMU of the events it computes itself.
const TOOL_PMU: &str = "tool";

/// How far a name resolution may spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Spread {
    /// perf's list parsing: every PMU that has the event, every core PMU for legacy events.
    All,
    /// One event: the legacy event without a PMU type, an alias on the core PMU or on the only
    /// PMU that has it.
    One,
}

/// An event being built: the counter, its PMU and the `exclude_guest`/`exclude_host` state
/// perf's modifier rules carry from event to group modifiers.
#[derive(Debug, Clone)]
pub(super) struct Built {
    pub(super) event: ResolvedEvent,
    pub(super) pmu: Option<String>,
    pub(super) gh: bool,
    /// The name was given with `name=`: printed as is.
    pub(super) named: bool,
}

fn named_term(name: &str, span: &Span) -> Vec<TermAst> {
    vec![TermAst { name: name.to_string(), value: None, span: span.clone() }]
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
