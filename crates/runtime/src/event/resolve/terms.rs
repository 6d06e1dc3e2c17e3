//! Terms: `pmu/terms/` on one PMU (its `format/` files, its aliases and vendor events, the
//! terms every PMU takes) and the few terms a legacy event takes.

use super::expand::Built;
use super::names::is_core_pmu;
use super::{CounterEvent, EventError, EventKind, Fail, ResolvedEvent, Resolver, raw_config};
use crate::event::grammar::{self, EventAst, Span, TermAst, TermValue};
use crate::event::legacy::{cache_config, hardware_config, is_cache_name};
use crate::sys::{Attr, TYPE_HARDWARE, TYPE_HW_CACHE};
use crate::sysfs::SysfsPmu;

impl Resolver<'_> {
    /// `pmu/terms/` on one PMU; `first` are terms placed before the user's (the event name of
    /// `INST_RETIRED.ANY/cmask=1/`).
    pub(super) fn pmu_event(
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
        // perf 7.x's `cpu` term: the CPUs the event opens on, in place of its PMU's.
        let mut term_cpus: Option<Vec<u32>> = None;
        for term in first.iter().chain(terms) {
            if term.name == "cpu" {
                let mut cpus = self.cpu_term(term, e)?;
                cpus.extend(term_cpus.take().unwrap_or_default());
                cpus.sort_unstable();
                cpus.dedup();
                term_cpus = Some(cpus);
                continue;
            }
            self.apply_term(&pmu, term, &mut b, e, warnings, true)?;
        }
        let cpus = term_cpus.or_else(|| pmu.cpumask.clone());
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
                    cpus: cpus.clone(),
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
                    cpus,
                }
            }
        };
        let counts_on = (pmu_name != "msr" && !matches!(pmu_name, "software" | "tracepoint"))
            .then(|| pmu_name.to_string());
        Ok(Built { event: ResolvedEvent::Counter(event), pmu: counts_on, gh: false, named })
    }

    /// The CPUs of perf 7.x's `cpu` term (parse-events.c's `get_config_cpu`): an online CPU's
    /// number, or a PMU's CPUs (`cpu=cpu_core`; a core PMU without a `cpus` file has every
    /// online CPU).
    fn cpu_term(&self, term: &TermAst, e: &EventAst) -> Result<Vec<u32>, Fail> {
        let bad = |value: String, why: String| {
            (
                term.span.clone(),
                EventError::BadValue { event: e.text.clone(), term: "cpu".into(), value, why },
            )
        };
        let online = self.sysfs.online_cpus().map_err(|err| (term.span.clone(), err.into()))?;
        let text = match &term.value {
            None => {
                return Err(bad(
                    String::new(),
                    "needs a value: a CPU (`cpu=0`) or a PMU (`cpu=cpu_core`)".into(),
                ));
            }
            Some(TermValue::Num(n)) => n.to_string(),
            Some(TermValue::Str(s)) => {
                if let Ok(pmu) = self.sysfs.pmu(s) {
                    return Ok(pmu.cpumask.unwrap_or(online));
                }
                s.clone()
            }
        };
        crate::target::cpu_list(&text, &online).map_err(|why| {
            bad(
                text.clone(),
                format!(
                    "names no PMU of this machine and no online CPU ({}); give a CPU (`cpu=0`) or a PMU (`cpu=cpu_core`)",
                    why.problem
                ),
            )
        })
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
        if let Some(legacy) = self.legacy_term(pmu, term, e)? {
            b.hw = Some(legacy);
            return Ok(());
        }
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

    /// perf 7.x's `legacy-hardware-config=N` and `legacy-cache-config=N` (the encodings of
    /// its JSON legacy events): the core PMU's generic hardware or cache event N, with
    /// perf's limits (`config_term_pmu`). `None` for any other term.
    fn legacy_term(
        &self,
        pmu: &SysfsPmu,
        term: &TermAst,
        e: &EventAst,
    ) -> Result<Option<(u32, u64, String)>, Fail> {
        let name = term.name.as_str();
        let type_ = match name {
            "legacy-hardware-config" => TYPE_HARDWARE,
            "legacy-cache-config" => TYPE_HW_CACHE,
            _ => return Ok(None),
        };
        let value = term_number(term, e, name)?;
        let bad = |why: &str| {
            (
                term.span.clone(),
                EventError::BadValue {
                    event: e.text.clone(),
                    term: name.to_string(),
                    value: value.to_string(),
                    why: why.to_string(),
                },
            )
        };
        if !is_core_pmu(self.sysfs, &pmu.name) {
            return Err(bad(&format!("needs a core PMU, and `{}` is not one", pmu.name)));
        }
        // perf's PERF_COUNT_HW_MAX, and a cache event's three bytes (type, op, result)
        // within PERF_COUNT_HW_CACHE_MAX, _OP_MAX and _RESULT_MAX.
        let fits = if type_ == TYPE_HARDWARE {
            value < 10
        } else {
            value & !0xff_ffff == 0
                && value & 0xff < 7
                && (value >> 8) & 0xff < 3
                && (value >> 16) & 0xff < 2
        };
        if !fits {
            return Err(bad("is too big for a generic event"));
        }
        let ext = if self.hybrid() { u64::from(pmu.type_) << 32 } else { 0 };
        Ok(Some((type_, value | ext, name.to_string())))
    }

    /// The error for a term `pmu` has no format for, listing the terms it takes.
    fn unknown_term(&self, pmu: &SysfsPmu, term: &TermAst, e: &EventAst) -> Fail {
        let mut known: Vec<String> = pmu.formats.iter().map(|f| f.name.clone()).collect();
        known.extend(
            ["config", "config1", "config2", "config3", "cpu", "name", "period"].map(String::from),
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

/// The terms a legacy event takes (perf's `config_term_common` under `perf stat`): `name`,
/// `metric-id`, `period`, `percore`, `config*`. Returns whether `name=` was given.
pub(super) fn common_terms(
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
