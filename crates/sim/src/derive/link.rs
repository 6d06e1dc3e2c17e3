//! Linking formulas to the unknowns: each identifier a metric reads becomes an input (another
//! metric, a sum of counts by [`Source`], a constant), with its family (clock counts, topdown
//! fields, cycle-type and micro-op events) and its default rate.

use std::collections::{BTreeSet, HashMap};

use tmetric_catalog::{IdKind, Model};
use tmetric_runtime::Attr;
use tmetric_runtime::sys::TYPE_HARDWARE;

use super::encode::{attr_on, cpus_of, generic_id, is_core_pmu, pmus_named, take_cpu_term, terms};
use super::problem::{Input, MetricDef, Var};
use super::tree::{midr_matches, tree_level, valid_range};
use crate::formula::{self, Expr, ProbeFn};
use crate::kernel::classify;
use crate::machine::{Machine, PmuClass};
use crate::profile::{Source, retire_latency_mean};
use crate::workload::{PhaseSpec, SimWorkload};

/// What the clock families count: known, never solved.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Family {
    Cycles,
    Instructions,
    Slots,
    /// Per second, the reference clock.
    Ref,
    /// Per second, the TSC.
    Tsc,
    /// A topdown PERF_METRICS field of slots: the tree node it is.
    Topdown(&'static str),
    /// A fixed per-second rate.
    Fixed(f64),
    /// A fixed per-cycle ratio.
    PerCycle(f64),
}

/// The PERF_METRICS fields (umask 0x80 + n) and the tree node each is.
pub(super) const TOPDOWN_FIELDS: [&str; 8] = [
    "tma_retiring",
    "tma_bad_speculation",
    "tma_frontend_bound",
    "tma_backend_bound",
    "tma_heavy_operations",
    "tma_branch_mispredicts",
    "tma_fetch_latency",
    "tma_memory_bound",
];

/// The family of an identifier by its vendor or kernel name and extra terms.
fn family(name: &str, extra_terms: bool) -> Option<Family> {
    if extra_terms {
        return None;
    }
    // The AnyThread variants count the same thing for both threads (a factor the kernel
    // applies).
    let name =
        name.strip_suffix("_ANY").filter(|n| n.starts_with("CPU_CLK_UNHALTED.")).unwrap_or(name);
    Some(match name {
        "CPU_CLK_UNHALTED.THREAD"
        | "CPU_CLK_UNHALTED.THREAD_P"
        | "CPU_CLK_UNHALTED.CORE"
        | "CPU_CLK_UNHALTED.CORE_P"
        | "CPU_CLK_UNHALTED.DISTRIBUTED"
        | "CPU_CLK_UNHALTED.THREAD_ANY"
        | "cycles"
        | "cpu-cycles"
        | "ls_not_halted_cyc"
        | "CPU_CYCLES"
        | "cpu_cycles" => Family::Cycles,
        "INST_RETIRED.ANY"
        | "INST_RETIRED.ANY_P"
        | "INST_RETIRED.PREC_DIST"
        | "instructions"
        | "ex_ret_instr"
        | "INST_RETIRED"
        | "inst_retired" => Family::Instructions,
        "TOPDOWN.SLOTS" | "TOPDOWN.SLOTS_P" | "slots" => Family::Slots,
        "CPU_CLK_UNHALTED.REF_TSC"
        | "CPU_CLK_UNHALTED.REF_TSC_P"
        | "CPU_CLK_UNHALTED.REF_DISTRIBUTED"
        | "CPU_CLK_UNHALTED.REF_XCLK"
        | "ref-cycles" => Family::Ref,
        "topdown-retiring" => Family::Topdown(TOPDOWN_FIELDS[0]),
        "topdown-bad-spec" => Family::Topdown(TOPDOWN_FIELDS[1]),
        "topdown-fe-bound" => Family::Topdown(TOPDOWN_FIELDS[2]),
        "topdown-be-bound" => Family::Topdown(TOPDOWN_FIELDS[3]),
        "topdown-heavy-ops" => Family::Topdown(TOPDOWN_FIELDS[4]),
        "topdown-br-mispredict" => Family::Topdown(TOPDOWN_FIELDS[5]),
        "topdown-fetch-lat" => Family::Topdown(TOPDOWN_FIELDS[6]),
        "topdown-mem-bound" => Family::Topdown(TOPDOWN_FIELDS[7]),
        _ => return None,
    })
}

/// An event that counts cycles (so at most one per cycle): a `cmask`/`edge` term, or a name
/// of the cycle and stall families.
pub fn counts_cycles(name: &str, terms_text: &str) -> bool {
    let t = terms(terms_text);
    if t.iter().any(|(n, v)| (n == "cmask" || n == "thresh") && *v >= 1 || n == "edge") {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    // Dispatch and issue slots count up to the pipeline width per cycle.
    if upper.contains("SLOT") {
        return false;
    }
    const PARTS: [&str; 22] = [
        "CYCLES",
        "STALLS",
        "STALL_",
        "_ACTIVE",
        "ACTIVITY.",
        "PENALTY",
        "DECODE.LCP",
        "FB_FULL",
        "L2_STALL",
        "AMX_BUSY",
        "_AT_RET",
        "MEM_BOUND_STALLS",
        "MEM_SCHEDULER_BLOCK",
        "CPU_CLK_UNHALTED",
        "BOUND_ON",
        "SCOREBOARD",
        "CLEAR_RESTEER",
        "RS.EMPTY",
        "XQ.FULL",
        "LSD.CYCLES",
        "ICACHE_DATA",
        "ICACHE_TAG",
    ];
    PARTS.iter().any(|p| upper.contains(p))
}

/// Default share of the rate a free unknown gets: per cycle for core events.
const DEFAULT_PER_CYCLE: f64 = 0.01;
/// Default per-second rate of a free uncore quantity, per box.
const DEFAULT_PER_SECOND: f64 = 2e7;

pub(super) struct Builder<'a> {
    pub(super) machine: &'a Machine,
    pub(super) model: &'static Model,
    pub(super) workload: &'a SimWorkload,
    pub(super) phase: &'a PhaseSpec,
    pub(super) phase_index: usize,
    pub(super) vars: Vec<Var>,
    pub(super) var_of: HashMap<Source, usize>,
    pub(super) inputs: Vec<Input>,
    pub(super) input_of: HashMap<(String, String), usize>,
    pub(super) notes: Vec<String>,
}

impl Builder<'_> {
    fn literal(&self, name: &str) -> f64 {
        let m = self.machine;
        let mut cores = BTreeSet::new();
        let mut dies = BTreeSet::new();
        let mut packages = BTreeSet::new();
        for c in &m.cpus {
            cores.insert((c.package, c.core));
            dies.insert((c.package, c.die));
            packages.insert(c.package);
        }
        match name.to_ascii_lowercase().as_str() {
            "num_cpus" | "num_cpus_online" => m.cpus.len() as f64,
            "num_cores" => cores.len() as f64,
            "num_dies" => dies.len() as f64,
            "num_packages" => packages.len() as f64,
            "smt_on" => f64::from(u8::from(m.smt)),
            // `-a` counts every CPU of each core.
            "core_wide" => 1.0,
            "slots" => m
                .pmus
                .iter()
                .find_map(|p| match &p.class {
                    PmuClass::Arm(a) => Some(a.width as f64),
                    _ => None,
                })
                .unwrap_or(f64::NAN),
            "has_pmem" => 0.0,
            "system_tsc_freq" => self.workload.tsc_hz,
            _ => f64::NAN,
        }
    }

    fn var(
        &mut self,
        source: Source,
        label: &str,
        per_cycle: bool,
        hi: f64,
        default: f64,
    ) -> usize {
        if let Some(&v) = self.var_of.get(&source) {
            return v;
        }
        self.vars.push(Var {
            source: source.clone(),
            per_cycle,
            value: None,
            hi,
            default,
            pinned: false,
            soft: false,
            known: false,
            label: label.to_string(),
        });
        self.var_of.insert(source, self.vars.len() - 1);
        self.vars.len() - 1
    }

    /// The machine PMUs, term text and display name of identifier slot `slot` in a metric
    /// of `context` PMUs.
    fn locate(&self, slot: usize, context: &[usize]) -> Option<(Vec<usize>, String, String)> {
        let model = self.model;
        let id = &model.ids[slot];
        let id_pmu = model.str(id.pmu);
        match id.kind {
            IdKind::Event(i) => {
                let ev = model.events.at(i as usize);
                let pmu = if id_pmu.is_empty() { model.str(ev.pmu) } else { id_pmu };
                let text = format!("{},{}", model.str(ev.encoding), model.str(id.terms));
                let pmus = pmus_named(self.machine, pmu, context);
                Some((pmus, text, model.str(ev.name).to_string()))
            }
            IdKind::Kernel | IdKind::Sysfs => {
                let event = model.str(id.event);
                let pmus = pmus_named(self.machine, id_pmu, context);
                if event.is_empty() {
                    return Some((
                        pmus,
                        model.str(id.terms).to_string(),
                        model.str(id.text).into(),
                    ));
                }
                // A sysfs alias of the PMU, else a generic hardware event (handled by the
                // caller through an empty term list and the name).
                let alias = pmus.iter().find_map(|&p| self.machine.pmus[p].alias(event));
                match alias {
                    Some(t) => Some((pmus, format!("{t},{}", model.str(id.terms)), event.into())),
                    None if generic_id(event).is_some() => {
                        Some((pmus, String::new(), event.to_string()))
                    }
                    None => None,
                }
            }
            _ => None,
        }
    }

    /// The input for identifier slot `slot` read by a metric of core PMUs `context`.
    fn input(&mut self, slot: usize, context: &[usize]) -> usize {
        let key = (slot.to_string(), format!("{context:?}"));
        if let Some(&i) = self.input_of.get(&key) {
            return i;
        }
        let input = self.build_input(slot, context);
        self.inputs.push(input);
        self.input_of.insert(key, self.inputs.len() - 1);
        self.inputs.len() - 1
    }

    fn build_input(&mut self, slot: usize, context: &[usize]) -> Input {
        let model = self.model;
        let id = &model.ids[slot];
        match id.kind {
            IdKind::Tool(_) => return Input::Const(1.0),
            IdKind::Probe => return Input::Const(f64::NAN),
            _ => {}
        }
        let text = model.str(id.text);
        if id.retire_latency {
            let mean = match id.kind {
                IdKind::Event(i) => {
                    let ev = model.events.at(i as usize);
                    let pmus = pmus_named(self.machine, model.str(ev.pmu), context);
                    pmus.first()
                        .and_then(|&p| attr_on(self.machine, p, model.str(ev.encoding)))
                        .map_or(0.0, |a| retire_latency_mean(self.machine, a.config))
                }
                _ => 0.0,
            };
            return Input::Const(mean);
        }
        let Some((pmus, terms_text, name)) = self.locate(slot, context) else {
            self.notes.push(format!("`{text}` names nothing on this machine"));
            return Input::Missing;
        };
        let (terms_text, term_cpus) = take_cpu_term(self.machine, &terms_text);
        let modifiers = model.str(id.modifiers);
        let extra_terms = !model.str(id.terms).is_empty();
        let family = family(&name, extra_terms);
        let context_cpus: Vec<u32> = context
            .iter()
            .flat_map(|&p| cpus_of(self.machine, p, &[]))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut parts = Vec::new();
        for &p in &pmus {
            let pmu = &self.machine.pmus[p];
            let attr = if terms_text.is_empty() {
                // A generic hardware event on this core PMU (extended type).
                let Some(g) = generic_id(&name) else { continue };
                Attr {
                    type_: TYPE_HARDWARE,
                    config: g | u64::from(pmu.type_) << 32,
                    ..Attr::default()
                }
            } else {
                match attr_on(self.machine, p, &terms_text) {
                    Some(a) => a,
                    None => {
                        self.notes.push(format!("`{text}`: a term has no format on {}", pmu.name));
                        continue;
                    }
                }
            };
            let attr = Attr {
                exclude_user: modifiers.contains('k') && !modifiers.contains('u'),
                exclude_kernel: modifiers.contains('u') && !modifiers.contains('k'),
                ..attr
            };
            let cpus = term_cpus.clone().unwrap_or_else(|| cpus_of(self.machine, p, &context_cpus));
            let Some(&first) = cpus.first() else { continue };
            let Ok(init) = classify(self.machine, &attr, -1, first as i32) else {
                self.notes.push(format!("`{text}` does not open on {}", pmu.name));
                continue;
            };
            let factor = init.factor(self.machine, &attr, self.phase.kernel_share);
            let Some(source) = init.source.clone() else { continue };
            let (per_cycle, hi, default, known) = self.kind_of(&source, family, &name, &terms_text);
            let v = self.var(source, &name, per_cycle, hi, default);
            if let Some(value) = known {
                // A known family decides the quantity, whichever name met it first.
                let var = &mut self.vars[v];
                var.per_cycle = per_cycle;
                var.hi = hi;
                var.default = default;
                var.value = Some(value);
                var.pinned = true;
                var.known = true;
            }
            let base: f64 = if per_cycle {
                cpus.iter().map(|&c| self.workload.cycles_on(self.phase_index, c)).sum()
            } else {
                cpus.len() as f64
            };
            parts.push((v, base * factor));
        }
        if parts.is_empty() {
            self.notes.push(format!("`{text}` opens on no PMU of this machine"));
            return Input::Missing;
        }
        Input::Vars(parts)
    }

    /// Per cycle or per second, the range, the default and the known value of a quantity.
    fn kind_of(
        &self,
        source: &Source,
        family: Option<Family>,
        name: &str,
        terms_text: &str,
    ) -> (bool, f64, f64, Option<f64>) {
        let phase = self.phase;
        let width = match source {
            Source::X86 { pmu, .. } | Source::Arm { pmu, .. } => {
                match &self.machine.pmus[*pmu].class {
                    PmuClass::X86Core(c) => c.width as f64,
                    PmuClass::Arm(a) => a.width as f64,
                    _ => 4.0,
                }
            }
            _ => 4.0,
        };
        let msr = match source {
            Source::Msr(c) => Some(match c {
                0 => Family::Tsc,
                1 => Family::Cycles,
                2 => Family::Ref,
                3 => Family::PerCycle(0.9),
                6 => Family::Instructions,
                _ => Family::Fixed(0.0),
            }),
            Source::Power(c) => {
                let pkg = self.workload.package_watts * 4_294_967_296.0;
                Some(Family::Fixed(if *c == 2 { pkg } else { pkg / 4.0 }))
            }
            _ => None,
        };
        match msr.or(family) {
            Some(Family::Cycles) => (true, 1.0, 1.0, Some(1.0)),
            Some(Family::Instructions) => (true, width, phase.ipc, Some(phase.ipc)),
            Some(Family::Slots) => (true, width, width, Some(width)),
            Some(Family::PerCycle(r)) => (true, r, r, Some(r)),
            Some(Family::Ref) => (false, phase.ref_hz, phase.ref_hz, Some(phase.ref_hz)),
            Some(Family::Tsc) => {
                (false, self.workload.tsc_hz, self.workload.tsc_hz, Some(self.workload.tsc_hz))
            }
            Some(Family::Fixed(v)) => (false, v, v, Some(v)),
            Some(Family::Topdown(node)) => {
                // The value is set once the tree is known (`topdown_fields`).
                let _ = node;
                (true, width, 0.0, None)
            }
            None => match source {
                Source::X86 { .. } | Source::Arm { .. } => {
                    let upper = name.to_ascii_uppercase();
                    if counts_cycles(name, terms_text) {
                        (true, 1.0, DEFAULT_PER_CYCLE, None)
                    } else if upper.contains("UOPS") || upper.contains("SLOT") {
                        // Micro-ops flow at a good part of the pipeline's width.
                        (true, 2.0 * width, 0.4 * width, None)
                    } else {
                        (true, 64.0, DEFAULT_PER_CYCLE, None)
                    }
                }
                Source::Cstate { .. } => {
                    let tsc = self.workload.tsc_hz;
                    (false, tsc, 0.05 * tsc, None)
                }
                _ => (false, 1e12, DEFAULT_PER_SECOND, None),
            },
        }
    }
}

/// Every metric of `model` with its valid range and TMA group, and its formula parsed
/// (`None`, with a note, where it does not parse).
pub(super) fn parse_metrics(
    model: &'static Model,
    notes: &mut Vec<String>,
) -> (Vec<MetricDef>, Vec<String>, Vec<Option<Expr>>) {
    let mut defs: Vec<MetricDef> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    let mut parsed: Vec<Option<Expr>> = Vec::new();
    for metric in model.metrics() {
        let name = model.str(metric.name).to_string();
        let pmu = model.str(metric.pmu).to_string();
        let g = model.str(metric.groups).to_string();
        let expr = match formula::parse(model.str(metric.expr)) {
            Ok(e) => Some(e),
            Err(e) => {
                notes.push(format!("{name}: {e}"));
                None
            }
        };
        let tree = tree_level(&g).is_some() && !name.starts_with("tma_info");
        let unit = model.str(metric.unit);
        defs.push(MetricDef {
            range: valid_range(unit, metric.scale, tree),
            name,
            pmu,
            expr: Expr::Num(f64::NAN),
            scale: metric.scale,
            tree,
        });
        groups.push(g);
        parsed.push(expr);
    }
    (defs, groups, parsed)
}

impl Builder<'_> {
    /// Links each parsed formula's identifiers to inputs: other metrics of the same PMU first,
    /// then the model's ids (on the metric's core PMUs), literals and probes as constants.
    pub(super) fn link_metrics(&mut self, defs: &mut [MetricDef], parsed: Vec<Option<Expr>>) {
        // The core PMUs each metric's events default to.
        let core_pmus: Vec<usize> = (0..self.machine.pmus.len())
            .filter(|&i| is_core_pmu(&self.machine.pmus[i].class))
            .collect();
        let context_of = |pmu: &str| -> Vec<usize> {
            match self.machine.pmus.iter().position(|p| p.name == pmu) {
                Some(p) if is_core_pmu(&self.machine.pmus[p].class) => vec![p],
                _ => core_pmus.clone(),
            }
        };
        // Link identifiers: other metrics of the same PMU first, then the model's ids.
        let mut by_name: HashMap<(String, String), usize> = HashMap::new();
        for (i, d) in defs.iter().enumerate() {
            by_name.entry((d.pmu.clone(), d.name.to_ascii_lowercase())).or_insert(i);
        }
        let id_slot: HashMap<&str, usize> =
            self.model.ids.iter().enumerate().map(|(i, id)| (self.model.str(id.text), i)).collect();
        for (m, expr) in parsed.into_iter().enumerate() {
            let Some(mut expr) = expr else { continue };
            let pmu = defs[m].pmu.clone();
            let context = context_of(&pmu);
            let mut names = Vec::new();
            expr.names(&mut names);
            let mut table: HashMap<String, usize> = HashMap::new();
            for name in names {
                let (key, input) = match &name {
                    Expr::Ident(text) => {
                        let lower = text.to_ascii_lowercase();
                        let metric = by_name
                            .get(&(pmu.clone(), lower.clone()))
                            .or_else(|| {
                                by_name.iter().find(|((_, n), _)| *n == lower).map(|(_, i)| i)
                            })
                            .copied();
                        let input = match metric {
                            Some(r) if r != m => Some(Input::Metric(r)),
                            _ => id_slot.get(text.as_str()).map(|&s| {
                                let i = self.input(s, &context);
                                self.inputs[i].clone()
                            }),
                        };
                        (format!("i:{text}"), input.unwrap_or(Input::Const(f64::NAN)))
                    }
                    Expr::Literal(l) => (format!("l:{l}"), Input::Const(self.literal(l))),
                    Expr::Probe(f, arg) => {
                        let v = match f {
                            ProbeFn::HasEvent => {
                                let ok = id_slot.get(arg.as_str()).is_some_and(|&s| {
                                    let i = self.input(s, &context);
                                    matches!(self.inputs[i], Input::Vars(_))
                                });
                                f64::from(u8::from(ok))
                            }
                            ProbeFn::StrcmpCpuid => midr_matches(self.machine, arg),
                            ProbeFn::SourceCount => id_slot
                                .get(arg.as_str())
                                .and_then(|&s| self.locate(s, &context))
                                .map_or(1.0, |(pmus, _, _)| pmus.len().max(1) as f64),
                            // The whole machine's truth is what `-a` sums: each instance on
                            // every CPU it is read on.
                            ProbeFn::AggrNr => id_slot
                                .get(arg.as_str())
                                .and_then(|&s| self.locate(s, &context))
                                .map_or(1.0, |(pmus, _, _)| {
                                    let cpus = self.machine.cpu_ids();
                                    let n: usize = pmus
                                        .iter()
                                        .map(|&p| cpus_of(self.machine, p, &cpus).len())
                                        .sum();
                                    n.max(1) as f64
                                }),
                        };
                        (format!("p:{f:?}:{arg}"), Input::Const(v))
                    }
                    _ => continue,
                };
                table.entry(key).or_insert_with(|| {
                    self.inputs.push(input);
                    self.inputs.len() - 1
                });
            }
            expr.link(&mut |e| {
                let key = match e {
                    Expr::Ident(t) => format!("i:{t}"),
                    Expr::Literal(l) => format!("l:{l}"),
                    Expr::Probe(f, a) => format!("p:{f:?}:{a}"),
                    _ => return None,
                };
                table.get(&key).copied()
            });
            defs[m].expr = expr;
        }
    }
}
