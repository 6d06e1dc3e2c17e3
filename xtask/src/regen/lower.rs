//! Lowering one metric's expressions to Rust token text (value, needed-events pass, threshold)
//! over metric-local numbering, and binding the result to the shared functions.

use std::collections::{BTreeMap, HashMap};

use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote};
use tmetric_expr::{BinOp, Expr, ExprKind, Func, IdFunc, Literal};
use tmetric_pmu_events::resolve::{ResolvedTable, Target};
use tmetric_pmu_events::{AggrMode, Constraint};

use super::model::{float, int};
use super::shared::Shared;

/// A function body as Rust token text, and which parameters it reads.
pub(super) struct Body {
    /// `TokenStream::to_string()`: also the key under which identical bodies are shared.
    pub(super) text: String,
    pub(super) uses: Uses,
}

impl Body {
    fn new(tokens: &TokenStream, uses: Uses) -> Body {
        Body { text: tokens.to_string(), uses }
    }

    /// The tokens again. Token streams cannot cross threads, so lowering hands over text;
    /// only distinct bodies are parsed back.
    pub(super) fn tokens(&self) -> TokenStream {
        self.text.parse().expect("a body printed from tokens parses")
    }
}

/// A metric's needed-events pass: a static list when nothing can fold on a machine, else a
/// function body.
pub(super) enum NeededPart {
    /// The references as Rust (`Ref::Id(0)`), in the order the pass finds them.
    Static(Vec<String>),
    Dynamic(Body),
}

/// One metric lowered to Rust before anything is shared: its value, needed-events pass and
/// threshold (when it compiles), and its local numbering.
pub(super) struct LoweredMetric {
    value: Body,
    needed: NeededPart,
    threshold: Option<(Body, NeededPart)>,
    locals: Locals,
}

/// Lowers metric `old` of `r` (`new_index`: the kept metrics' new numbers).
pub(super) fn lower_metric(
    r: &ResolvedTable<'_>,
    old: usize,
    new_index: &HashMap<usize, usize>,
) -> LoweredMetric {
    let rm = &r.metrics[old];
    let expr = rm.expr.as_ref().expect("a compiled metric has an expression");
    let mut lower = Lower { targets: &rm.targets, new_index, locals: Locals::default() };
    let mut uses = Uses::default();
    let body = lower.value(expr, &mut uses);
    let value = Body::new(&body, uses);
    let needed = lower.needed_part(expr);
    let threshold = match (&rm.threshold, rm.threshold_ok) {
        (Some(t), true) => {
            let mut uses = Uses::default();
            let body = lower.value(t, &mut uses);
            Some((Body::new(&body, uses), lower.needed_part(t)))
        }
        _ => None,
    };
    // A threshold that does not compile still names metrics: keep them referenced, as before.
    for m in rm.metric_refs().into_iter().chain(rm.threshold_refs()) {
        lower.locals.metric(new_index[&m]);
    }
    LoweredMetric { value, needed, threshold, locals: lower.locals }
}

/// One metric bound to a model: its descriptor's index, its local inputs and metrics (model
/// slots and metric indices), and the call bits of its model slots.
pub(super) struct Binding {
    pub(super) desc: usize,
    pub(super) slots: Vec<usize>,
    pub(super) refs: Vec<usize>,
    pub(super) calls: Vec<(usize, u8)>,
}

/// One metric: its shared descriptor and its binding in the model.
pub(super) fn metric(
    r: &ResolvedTable<'_>,
    old: usize,
    lowered: LoweredMetric,
    shared: &mut Shared,
) -> Binding {
    let vm = &r.table.metrics[old];
    let LoweredMetric { value, needed, threshold, locals } = lowered;
    // In the order the model's functions were first numbered: value, needed, threshold.
    let eval = shared.value_fn(&value);
    let needed = shared.needed_refs(&needed);
    let (threshold, needed_threshold) = match threshold {
        Some((body, needed)) => {
            let index = shared.value_fn(&body);
            let needed = shared.needed_refs(&needed);
            (format!("Some({index})"), format!("Some({needed})"))
        }
        None => ("None".to_string(), "None".to_string()),
    };
    let literals: Vec<String> = locals.literals.iter().map(|l| format!("Literal::{l:?}")).collect();
    let literals = shared.literals.span(&literals);
    let call_bits = &locals.calls;
    let calls = shared.calls.span(if call_bits.iter().all(|&b| b == 0) { &[] } else { call_bits });

    let (scale, unit, has_scale) =
        vm.scale_unit.as_ref().map_or((1.0, "", false), |s| (s.scale, s.unit.as_str(), true));
    let constraint = match vm.constraint {
        None => "None",
        Some(Constraint::NoGroupEvents) => "NoGroupEvents",
        Some(Constraint::NoGroupEventsNmi) => "NoGroupEventsNmi",
        Some(Constraint::NoGroupEventsSmt) => "NoGroupEventsSmt",
    };
    let aggr_mode = match vm.aggr_mode {
        None => "None",
        Some(AggrMode::PerChip) => "PerChip",
        Some(AggrMode::PerCore) => "PerCore",
    };
    let (blob, hot, cold) = (&mut shared.blob, &mut shared.hot, &mut shared.cold);
    let fields = format!(
        "name: {}, pmu: {}, groups: {}, brief: {}, public: {}, expr: {}, threshold_expr: {}, \
         scale: {}, unit: {}, has_scale_unit: {has_scale}, constraint: Constraint::{constraint}, \
         no_group: {}, default_group: {}, compat: {}, runtime_param: {}, \
         aggr_mode: AggrMode::{aggr_mode}, literals: {literals}, calls: {calls}, value_fn: {eval}, \
         threshold_fn: {threshold}, needed: {needed}, needed_threshold: {needed_threshold}",
        hot.add(&vm.name),
        hot.add(&vm.pmu),
        hot.add(&vm.groups.join(";")),
        cold.opt(vm.brief.as_ref()),
        cold.opt(vm.public.as_ref()),
        blob.add(&vm.expr),
        blob.opt(vm.threshold.as_ref()),
        float(scale),
        blob.add(unit),
        hot.add(&vm.no_group.join(";")),
        hot.opt(vm.default_group.as_ref()),
        blob.opt(vm.compat.as_ref()),
        vm.expr.contains('?'),
    );
    let desc = shared.desc(fields);
    let calls = locals.slots.iter().zip(&locals.calls).map(|(&s, &b)| (s, b)).collect();
    Binding { desc, slots: locals.slots, refs: locals.metrics, calls }
}

/// Which parameters a generated function reads, so unused ones get a `_` name.
#[derive(Default, Clone, Copy)]
pub(super) struct Uses {
    /// A value function reads `x`.
    pub(super) inputs: bool,
    /// A needed function reads `f`.
    pub(super) facts: bool,
    /// A needed function reads `s`.
    pub(super) slots: bool,
}

/// A metric's local numbering: model slots and metrics in order of first use.
#[derive(Default)]
struct Locals {
    slots: Vec<usize>,
    /// Per local slot: `id_calls` bits.
    calls: Vec<u8>,
    metrics: Vec<usize>,
    literals: Vec<Literal>,
}

impl Locals {
    fn slot(&mut self, slot: usize, calls: u8) -> usize {
        let k = match self.slots.iter().position(|&s| s == slot) {
            Some(k) => k,
            None => {
                self.slots.push(slot);
                self.calls.push(0);
                self.slots.len() - 1
            }
        };
        self.calls[k] |= calls;
        k
    }

    fn metric(&mut self, m: usize) -> usize {
        self.metrics.iter().position(|&x| x == m).unwrap_or_else(|| {
            self.metrics.push(m);
            self.metrics.len() - 1
        })
    }
}

/// `tmetric_model::catalog::id_calls`.
const HAS_EVENT: u8 = 1;
const STRCMP_CPUID_STR: u8 = 2;
const SOURCE_COUNT: u8 = 4;
const AGGR_NR: u8 = 8;

/// Lowers one metric's expressions to Rust.
struct Lower<'a> {
    targets: &'a BTreeMap<String, Target>,
    new_index: &'a HashMap<usize, usize>,
    locals: Locals,
}

impl Lower<'_> {
    fn target(&self, name: &str) -> Target {
        *self.targets.get(name).expect("every identifier of a compiled metric is resolved")
    }

    /// The local index of a function argument's slot.
    fn arg(&mut self, name: &str, calls: u8) -> usize {
        match self.target(name) {
            Target::Id(slot) => self.locals.slot(slot, calls),
            Target::Metric(_) => unreachable!("probe and source_count arguments are never metrics"),
        }
    }

    fn literal(&mut self, name: &str) -> Ident {
        let lit = Literal::from_name(name).expect("resolution rejects unknown literals");
        if !self.locals.literals.contains(&lit) {
            self.locals.literals.push(lit);
        }
        format_ident!("{}", format!("{lit:?}"))
    }

    /// The value expression.
    fn value(&mut self, expr: &Expr, uses: &mut Uses) -> TokenStream {
        if !matches!(expr.kind, ExprKind::Num(_)) {
            uses.inputs = true;
        }
        match &expr.kind {
            ExprKind::Num(v) => float(*v),
            ExprKind::Literal(name) => {
                let lit = self.literal(name);
                quote!(literal(x.literal(Literal::#lit))?)
            }
            ExprKind::Id(id) => match self.target(&id.name) {
                Target::Id(slot) => {
                    let k = int(self.locals.slot(slot, 0) as u64);
                    quote!(x.value(#k))
                }
                Target::Metric(m) => {
                    let k = int(self.locals.metric(self.new_index[&m]) as u64);
                    quote!(x.metric(#k))
                }
            },
            ExprKind::IdCall(IdFunc::SourceCount, id) => {
                let k = int(self.arg(&id.name, SOURCE_COUNT) as u64);
                quote!(x.source_count(#k))
            }
            ExprKind::IdCall(IdFunc::AggrNr, id) => {
                let k = int(self.arg(&id.name, AGGR_NR) as u64);
                quote!(x.aggr_nr(#k))
            }
            ExprKind::IdCall(IdFunc::HasEvent, id) => {
                let k = int(self.arg(&id.name, HAS_EVENT) as u64);
                quote!(truth(x.probe(#k)))
            }
            ExprKind::IdCall(IdFunc::StrcmpCpuidStr, id) => {
                let k = int(self.arg(&id.name, STRCMP_CPUID_STR) as u64);
                quote!(x.probe(#k))
            }
            ExprKind::Neg(inner) => {
                let inner = self.value(inner, uses);
                quote!((-#inner))
            }
            ExprKind::Bin(op, a, b) => {
                let (a, b) = (self.value(a, uses), self.value(b, uses));
                match op {
                    BinOp::Add => quote!((#a + #b)),
                    BinOp::Sub => quote!((#a - #b)),
                    BinOp::Mul => quote!((#a * #b)),
                    BinOp::Div => quote!(div(#a, #b)),
                    BinOp::Lt => quote!(lt(#a, #b)),
                    BinOp::Gt => quote!(gt(#a, #b)),
                    BinOp::Mod => quote!(rem(#a, #b)?),
                    BinOp::Or => quote!(or(#a, #b)),
                    BinOp::And => quote!(and(#a, #b)),
                    BinOp::Xor => quote!(xor(#a, #b)),
                }
            }
            ExprKind::Call(func, a, b) => {
                let name = Ident::new(
                    match func {
                        Func::DRatio => "d_ratio",
                        Func::Min => "min",
                        Func::Max => "max",
                    },
                    Span::call_site(),
                );
                let (a, b) = (self.value(a, uses), self.value(b, uses));
                quote!(#name(#a, #b))
            }
            ExprKind::If { then, cond, otherwise } => {
                let (then, cond, otherwise) =
                    (self.value(then, uses), self.value(cond, uses), self.value(otherwise, uses));
                quote!(if_else(#then, #cond, #otherwise))
            }
        }
    }

    /// A static list when nothing can fold on a machine, else a function body.
    fn needed_part(&mut self, expr: &Expr) -> NeededPart {
        let depends_on_machine = {
            let mut found = false;
            expr.walk(&mut |node| {
                found |= matches!(
                    node.kind,
                    ExprKind::Literal(_)
                        | ExprKind::IdCall(IdFunc::HasEvent | IdFunc::StrcmpCpuidStr, _)
                );
            });
            found
        };
        if !depends_on_machine {
            struct NoFacts;
            impl tmetric_expr::Facts for NoFacts {
                fn literal(&self, _: Literal) -> Option<f64> {
                    None
                }
                fn has_event(&self, _: &tmetric_expr::Ident) -> bool {
                    false
                }
                fn cpuid_match(&self, _: &tmetric_expr::Ident) -> f64 {
                    f64::NAN
                }
            }
            if let Ok(needed) = tmetric_expr::needed(expr, &NoFacts) {
                let mut refs: Vec<String> = Vec::new();
                for name in needed.ids {
                    let r = match self.local(name) {
                        (k, false) => format!("Ref::Id({k})"),
                        (k, true) => format!("Ref::Metric({k})"),
                    };
                    if !refs.contains(&r) {
                        refs.push(r);
                    }
                }
                return NeededPart::Static(refs);
            }
        }
        let mut uses = Uses::default();
        let body = self.needed(expr, &mut uses);
        NeededPart::Dynamic(Body::new(&body, uses))
    }

    /// The local index of an identifier, and whether it is a metric.
    fn local(&mut self, name: &str) -> (usize, bool) {
        match self.target(name) {
            Target::Id(slot) => (self.locals.slot(slot, 0), false),
            Target::Metric(m) => (self.locals.metric(self.new_index[&m]), true),
        }
    }

    fn reference(&mut self, name: &str) -> TokenStream {
        match self.local(name) {
            (k, false) => {
                let k = int(k as u64);
                quote!(Ref::Id(#k))
            }
            (k, true) => {
                let k = int(k as u64);
                quote!(Ref::Metric(#k))
            }
        }
    }

    fn probe(&mut self, name: &str, calls: u8, uses: &mut Uses) -> TokenStream {
        let k = int(self.arg(name, calls) as u64);
        uses.facts = true;
        uses.slots = true;
        quote!(f.probes[s[#k] as usize])
    }

    /// The needed-events pass as combinator calls.
    fn needed(&mut self, expr: &Expr, uses: &mut Uses) -> TokenStream {
        match &expr.kind {
            ExprKind::Num(v) => {
                let v = float(*v);
                quote!(N::constant(#v))
            }
            ExprKind::Literal(name) => {
                let lit = self.literal(name);
                uses.facts = true;
                quote!(N::literal(f.literals[Literal::#lit.index()])?)
            }
            ExprKind::Id(id) => {
                let r = self.reference(&id.name);
                quote!(N::id(#r))
            }
            ExprKind::IdCall(func @ (IdFunc::SourceCount | IdFunc::AggrNr), id) => {
                let calls = if *func == IdFunc::SourceCount { SOURCE_COUNT } else { AGGR_NR };
                self.arg(&id.name, calls);
                let r = self.reference(&id.name);
                quote!(N::id(#r))
            }
            ExprKind::IdCall(IdFunc::HasEvent, id) => {
                let p = self.probe(&id.name, HAS_EVENT, uses);
                quote!(N::constant(truth(#p)))
            }
            ExprKind::IdCall(IdFunc::StrcmpCpuidStr, id) => {
                let p = self.probe(&id.name, STRCMP_CPUID_STR, uses);
                quote!(N::constant(#p))
            }
            ExprKind::Neg(inner) => {
                let inner = self.needed(inner, uses);
                quote!(#inner.negate())
            }
            ExprKind::Bin(op, a, b) => {
                let (a, b) = (self.needed(a, uses), self.needed(b, uses));
                match op {
                    BinOp::Add => quote!(#a.arith(#b, add)),
                    BinOp::Sub => quote!(#a.arith(#b, sub)),
                    BinOp::Mul => quote!(#a.arith(#b, mul)),
                    BinOp::Lt => quote!(#a.arith(#b, lt)),
                    BinOp::Gt => quote!(#a.arith(#b, gt)),
                    BinOp::Xor => quote!(#a.arith(#b, xor)),
                    BinOp::Div => quote!(#a.divide(#b)),
                    BinOp::Mod => quote!(#a.remainder(#b)?),
                    BinOp::Or => quote!(#a.or(#b)),
                    BinOp::And => quote!(#a.and(#b)),
                }
            }
            ExprKind::Call(func, a, b) => {
                let (a, b) = (self.needed(a, uses), self.needed(b, uses));
                match func {
                    Func::DRatio => quote!(#a.d_ratio(#b)),
                    Func::Min | Func::Max => quote!(#a.min_max(#b)),
                }
            }
            ExprKind::If { then, cond, otherwise } => {
                let (then, cond, otherwise) = (
                    self.needed(then, uses),
                    self.needed(cond, uses),
                    self.needed(otherwise, uses),
                );
                quote!(N::if_else(#then, #cond, #otherwise))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_metrics_name_no_unused_parameter() {
        let expr = tmetric_expr::parse("0").unwrap();
        let targets = BTreeMap::new();
        let new_index = HashMap::new();
        let mut lower =
            Lower { targets: &targets, new_index: &new_index, locals: Locals::default() };
        let mut uses = Uses::default();
        let body = lower.value(&expr, &mut uses);
        let mut shared = Shared::default();
        shared.value_fn(&Body::new(&body, uses));
        let text = shared.funcs[0].to_string();
        assert!(text.contains("_x : & Inputs"), "{text}");
        let needed = shared.needed_refs(&lower.needed_part(&expr));
        assert_eq!(needed, "Needs::Refs(Span(0, 0))");
    }
}
