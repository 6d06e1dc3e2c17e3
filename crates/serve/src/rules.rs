//! Prometheus recording rules that compute compiled metrics from the raw counters
//! `tmetric serve` exports, so that a fleet aggregates counts first and derives metrics after
//! (an average of per-host ratios is not the ratio of the fleet), and a Grafana dashboard
//! of TopdownL1/L2 per host and per cgroup.
//!
//! The vendor expression (`MetricExpr`, as the catalogue keeps it) is parsed with the
//! interpreter's parser and translated, never evaluated here:
//! * every event becomes its rate, scaled for multiplexing per counter
//!   (`rate(raw) * rate(enabled) / rate(running)`), averaged over the groups that counted it
//!   twice, per host, cgroup and unit: the first rule, `tmetric:event:rate<window>`;
//! * `duration_time` becomes 1 (seconds per second): with counts as rates, a metric whose
//!   counts and times cancel (a ratio, a rate) is the same; a metric that does not (a count)
//!   is not translated, and said;
//! * `#literals` join `tmetric_machine_literal` per host (`on(instance, job)`); `min`, `max`
//!   and `d_ratio` become PromQL's set operations; comparisons use `bool`; `if`/`else` blends
//!   its branches by the 0/1 condition;
//! * other metrics are the series their own rules record, in an order that puts every rule
//!   after the ones it reads (rules of a group run in order at the same evaluation time).
//!
//! What cannot be translated is listed with the reason: `has_event()`, `strcmp_cpuid_str()`
//! and `source_count()` (decided per machine), retire latencies (`:R`, sampled), user and
//! system time, counts that depend on the interval's length, operands whose label sets
//! PromQL cannot match, a metric whose name an earlier one of the model has with another
//! formula (the series records the first, as `serve` exports it).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use tmetric_catalog::Tool;
use tmetric_catalog::{IdKind, Model};
use tmetric_expr::{BinOp, Expr, ExprKind, Func};
use tmetric_model::Literal;

use crate::names;

/// One recording rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The recorded name.
    pub record: String,
    /// Labels the rule sets on what it records, as the gauge of the same metric carries them:
    /// `model` (the metric's model, `common/common` for the common metrics) and, on hybrid
    /// machines, `pmu`.
    pub labels: Vec<(&'static str, String)>,
    /// PromQL.
    pub expr: String,
    /// The metric it computes, for the comment.
    pub metric: String,
}

/// The rules of a selection and what was left out.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// Rules in evaluation order.
    pub rules: Vec<Rule>,
    /// `(metric, why)` per metric not translated.
    pub skipped: Vec<(String, Untranslatable)>,
    /// The window of `rate()`.
    pub window: String,
}

/// Why a metric has no recording rule: what PromQL over the exported series cannot compute.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Untranslatable {
    /// Metrics that read metrics more than 64 deep.
    #[error("metric references nest too deep")]
    TooDeep,
    /// The vendor expression does not parse.
    #[error("its expression does not parse: {0}")]
    Parse(tmetric_expr::ParseError),
    /// It reads a metric that has no translation.
    #[error("it reads {name}, which is not translated ({why})")]
    Reads {
        /// The metric read.
        name: String,
        /// Why that one has none.
        why: Box<Untranslatable>,
    },
    /// A name that is neither an input nor a metric of the model.
    #[error("`{name}` names no event or metric of {model}")]
    Unknown {
        /// The name.
        name: String,
        /// The model's path.
        model: String,
    },
    /// A retire latency (`:R`), which is sampled.
    #[error("it reads the retire latency {0}, which is sampled, not counted")]
    RetireLatency(String),
    /// A tool event other than `duration_time` (user or system time).
    #[error("it reads {0:?} time, which only a finished workload has")]
    WorkloadTime(Tool),
    /// An argument of `has_event()` or `strcmp_cpuid_str()`.
    #[error("`{0}` is only a probe's argument")]
    ProbeArgument(String),
    /// A `#literal` tmetric does not know.
    #[error("unknown literal #{0}")]
    UnknownLiteral(String),
    /// A probe each machine answers for itself.
    #[error("it calls {func}({arg}), which each machine decides for itself")]
    MachineCall {
        /// The function.
        func: &'static str,
        /// Its argument.
        arg: String,
    },
    /// A count and a ratio added or compared.
    #[error(
        "it adds or compares terms that scale differently with the interval (a count and a ratio): PromQL's rates cannot give the same value"
    )]
    MixedDegrees,
    /// A boolean of constants where a series is needed.
    #[error("a boolean of constants only")]
    ConstantBoolean,
    /// A metric of the model (and core type) before it has this name and another formula
    /// (perf 7.2's build-generated `lpm_br_cond_retired`, once per metric group): its series
    /// holds the first one, as `serve` exports only the first.
    #[error(
        "an earlier metric of this model has this name and another formula: its series records that one, as serve exports it"
    )]
    SharedName,
    /// `d_ratio`, `min` or `max` of a host-wide and a per-unit operand.
    #[error("{0}() of operands PromQL cannot match label for label")]
    Unmatched(&'static str),
    /// A constant or machine literals only.
    #[error("it reads no event (a constant or machine literals only): nothing to aggregate")]
    NoEvent,
    /// A count, or a count per count of time.
    #[error(
        "its value depends on the interval's length (a count, or a count per count of time, not a ratio or a rate): aggregate rate(tmetric_event_total) instead"
    )]
    IntervalDependent,
}

/// What an operand's labels are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A number.
    Scalar,
    /// One series per host (`instance`, `job`): literals.
    Host,
    /// One series per host, cgroup and unit: counts and metrics.
    Full,
}

#[derive(Debug, Clone)]
struct Term {
    text: String,
    shape: Shape,
    /// How the value scales when every count and time is multiplied by `k`: `k^degree`;
    /// `None` for the constant 0, which fits any degree.
    degree: Option<i32>,
    /// A plain number, when it is one.
    number: Option<f64>,
}

impl Term {
    fn scalar(v: f64) -> Term {
        Term {
            text: names::number(v),
            shape: Shape::Scalar,
            degree: if v == 0.0 { None } else { Some(0) },
            number: Some(v),
        }
    }
}

/// Whether `text` is a duration Prometheus accepts (`1m`, `90s`, `1h30m`): numbers with units
/// `ms`, `s`, `m`, `h`, `d`, `w`, `y`, largest first, each once, not zero.
pub fn is_prometheus_duration(text: &str) -> bool {
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    let mut rest = text;
    let mut last: Option<usize> = None;
    let mut total = 0u128;
    if rest.is_empty() || rest.len() > 32 {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 12 {
            return false;
        }
        let n: u128 = rest[..digits].parse().unwrap_or(0);
        rest = &rest[digits..];
        let unit = if rest.starts_with("ms") {
            "ms"
        } else {
            match rest.get(..1) {
                Some(u) if UNITS.contains(&u) => u,
                _ => return false,
            }
        };
        rest = &rest[unit.len()..];
        let rank = UNITS.iter().position(|u| *u == unit).unwrap_or(0);
        if last.is_some_and(|l| rank <= l) {
            return false;
        }
        last = Some(rank);
        total += n;
    }
    total > 0
}

/// The name of the per-event rate rule.
pub fn event_rule(window: &str) -> String {
    format!("tmetric:event:rate{window}")
}

/// The recorded name of a metric.
pub fn metric_rule(family: &str, window: &str) -> String {
    format!("tmetric:{}:rate{window}", family.trim_start_matches("tmetric_"))
}

struct Translator<'a> {
    model: &'static Model,
    window: &'a str,
    /// Translated metrics (model index).
    done: BTreeMap<usize, Term>,
    failed: BTreeMap<usize, Untranslatable>,
    rules: Vec<Rule>,
    common: bool,
    /// The metrics asked for: only these are recorded; a metric they read is written into
    /// their expressions, so two files never record one series.
    selected: Vec<usize>,
    /// Metrics whose name and core type an earlier metric with another formula has.
    repeats: BTreeSet<usize>,
}

impl Translator<'_> {
    fn metric_index(&self, name: &str) -> Option<usize> {
        self.model.metrics().position(|m| self.model.str(m.name) == name)
    }

    /// Translates metric `m` (and first what it reads): its term before `ScaleUnit`. A metric
    /// that is a ratio or a rate is recorded as a rule, and the term names the rule; any
    /// other (a count such as `tma_info_thread_slots`) is inlined where it is read.
    fn metric(&mut self, m: usize, depth: usize) -> Result<Term, Untranslatable> {
        if let Some(t) = self.done.get(&m) {
            return Ok(t.clone());
        }
        if let Some(why) = self.failed.get(&m) {
            return Err(why.clone());
        }
        if depth > 64 {
            return Err(Untranslatable::TooDeep);
        }
        if self.repeats.contains(&m) {
            let why = Untranslatable::SharedName;
            self.failed.insert(m, why.clone());
            return Err(why);
        }
        let desc = self.model.metric(m);
        let text = self.model.str(desc.expr);
        let result = tmetric_expr::parse(text)
            .map_err(Untranslatable::Parse)
            .and_then(|expr| self.term(m, &expr, depth));
        let term = match result {
            Ok(term) => term,
            Err(why) => {
                self.failed.insert(m, why.clone());
                return Err(why);
            }
        };
        let term = if term.shape == Shape::Full
            && term.degree.is_none_or(|d| d == 0)
            && self.selected.contains(&m)
        {
            let exported = names::exported(self.model, m);
            let record = metric_rule(&exported.family, self.window);
            let pmu = hybrid_pmu(self.model, m);
            let mut labels = vec![("model", self.model.path())];
            if let Some(p) = pmu {
                labels.push(("pmu", p.to_string()));
            }
            let expr = if exported.factor != 1.0 {
                format!("{} * {}", term.text, names::number(exported.factor))
            } else {
                term.text.clone()
            };
            self.rules.push(Rule {
                record: record.clone(),
                labels: labels.clone(),
                expr,
                metric: self.model.str(desc.name).to_string(),
            });
            // The recorded series, as this model's (and this core type's) rule wrote it.
            let selector = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", names::label_value(v)))
                .collect::<Vec<_>>()
                .join(",");
            // Read without the labels the rule sets, so it matches event rates and other
            // metrics label for label.
            let series = format!("sum without (model, pmu) ({record}{{{selector}}})");
            let text = if exported.factor != 1.0 {
                format!("({series} / {})", names::number(exported.factor))
            } else {
                series
            };
            Term { text, ..term }
        } else {
            Term { text: format!("({})", term.text), ..term }
        };
        self.done.insert(m, term.clone());
        Ok(term)
    }

    /// Why a selected metric has no rule, if it has none.
    fn recorded(&mut self, m: usize) -> Result<(), Untranslatable> {
        let term = self.metric(m, 0)?;
        if term.shape != Shape::Full {
            return Err(Untranslatable::NoEvent);
        }
        if term.degree.is_some_and(|d| d != 0) {
            return Err(Untranslatable::IntervalDependent);
        }
        Ok(())
    }

    fn leaf_event(&self, name: &str) -> Term {
        let model = if self.common {
            String::new()
        } else {
            format!(",model=\"{}\"", names::label_value(&self.model.path()))
        };
        Term {
            text: format!(
                "sum without (event, model) ({}{{event=\"{}\"{model}}})",
                event_rule(self.window),
                names::label_value(name)
            ),
            shape: Shape::Full,
            degree: Some(1),
            number: None,
        }
    }

    fn ident(&mut self, m: usize, name: &str, depth: usize) -> Result<Term, Untranslatable> {
        let desc = self.model.metric(m);
        // Another metric of the model?
        if let Some(k) = desc
            .refs
            .iter()
            .map(|&r| r as usize)
            .find(|&k| self.model.str(self.model.metric(k).name) == name)
            .or_else(|| {
                self.metric_index(name).filter(|_| {
                    !desc
                        .slots
                        .iter()
                        .any(|&s| self.model.str(self.model.ids[s as usize].text) == name)
                })
            })
        {
            return self.metric(k, depth + 1).map_err(|why| Untranslatable::Reads {
                name: name.to_string(),
                why: Box::new(why),
            });
        }
        let Some(&slot) =
            desc.slots.iter().find(|&&s| self.model.str(self.model.ids[s as usize].text) == name)
        else {
            return Err(Untranslatable::Unknown {
                name: name.to_string(),
                model: self.model.path(),
            });
        };
        let id = &self.model.ids[slot as usize];
        if id.retire_latency {
            return Err(Untranslatable::RetireLatency(name.to_string()));
        }
        match id.kind {
            IdKind::Tool(Tool::DurationTime) => {
                Ok(Term { text: "1".into(), shape: Shape::Scalar, degree: Some(1), number: None })
            }
            IdKind::Tool(t) => Err(Untranslatable::WorkloadTime(t)),
            IdKind::Probe => Err(Untranslatable::ProbeArgument(name.to_string())),
            _ => Ok(self.leaf_event(&tmetric_engine::plan::id_name(self.model, id))),
        }
    }

    fn term(&mut self, m: usize, e: &Expr, depth: usize) -> Result<Term, Untranslatable> {
        Ok(match &e.kind {
            ExprKind::Num(v) => Term::scalar(*v),
            ExprKind::Literal(name) => {
                let lit = Literal::from_name(name.trim_start_matches('#'))
                    .ok_or_else(|| Untranslatable::UnknownLiteral(name.to_string()))?;
                Term {
                    text: format!(
                        "sum without (literal) (tmetric_machine_literal{{literal=\"{}\"}})",
                        lit.name()
                    ),
                    shape: Shape::Host,
                    degree: Some(0),
                    number: None,
                }
            }
            ExprKind::Id(ident) => self.ident(m, &ident.name, depth)?,
            ExprKind::Neg(x) => {
                let t = self.term(m, x, depth)?;
                Term { text: format!("-({})", t.text), number: t.number.map(|v| -v), ..t }
            }
            ExprKind::Bin(op, a, b) => {
                let (a, b) = (self.term(m, a, depth)?, self.term(m, b, depth)?);
                binary(*op, a, b)?
            }
            ExprKind::If { then, cond, otherwise } => {
                let c = self.term(m, cond, depth)?;
                let (t, o) = (self.term(m, then, depth)?, self.term(m, otherwise, depth)?);
                if let Some(v) = c.number {
                    return Ok(if v != 0.0 { t } else { o });
                }
                let truth = binary(BinOp::Gt, c, Term::scalar(0.0))?;
                let not = binary(BinOp::Sub, Term::scalar(1.0), truth.clone())?;
                let left = binary(BinOp::Mul, t, truth)?;
                let right = binary(BinOp::Mul, o, not)?;
                binary(BinOp::Add, left, right)?
            }
            ExprKind::Call(func, a, b) => {
                let (a, b) = (self.term(m, a, depth)?, self.term(m, b, depth)?);
                call(*func, a, b)?
            }
            ExprKind::IdCall(f, ident) => {
                return Err(Untranslatable::MachineCall {
                    func: f.name(),
                    arg: ident.name.to_string(),
                });
            }
        })
    }
}

/// The core type a hybrid model's metric is for (`cpu_core`, `cpu_atom`), as the gauges'
/// `pmu` label says.
fn hybrid_pmu(model: &Model, m: usize) -> Option<&str> {
    let pmu = model.str(model.metric(m).pmu);
    (pmu == "cpu_core" || pmu == "cpu_atom").then_some(pmu)
}

/// `on(instance, job)` matching for operands of different shapes.
fn matching(a: Shape, b: Shape) -> &'static str {
    match (a, b) {
        (Shape::Full, Shape::Host) => " on(instance, job) group_left()",
        (Shape::Host, Shape::Full) => " on(instance, job) group_right()",
        _ => "",
    }
}

fn wider(a: Shape, b: Shape) -> Shape {
    match (a, b) {
        (Shape::Full, _) | (_, Shape::Full) => Shape::Full,
        (Shape::Host, _) | (_, Shape::Host) => Shape::Host,
        _ => Shape::Scalar,
    }
}

fn same_degree(a: Option<i32>, b: Option<i32>) -> Result<Option<i32>, Untranslatable> {
    match (a, b) {
        (None, d) | (d, None) => Ok(d),
        (Some(x), Some(y)) if x == y => Ok(Some(x)),
        _ => Err(Untranslatable::MixedDegrees),
    }
}

fn binary(op: BinOp, a: Term, b: Term) -> Result<Term, Untranslatable> {
    // Constant folding keeps `0 * slots` (perf's way of grouping an event) out of PromQL.
    if let (Some(x), Some(y)) = (a.number, b.number) {
        let v = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            _ => f64::NAN,
        };
        if v.is_finite() {
            return Ok(Term::scalar(v));
        }
    }
    if op == BinOp::Mul && (a.number == Some(0.0) || b.number == Some(0.0)) {
        return Ok(Term::scalar(0.0));
    }
    if op == BinOp::Add && a.number == Some(0.0) {
        return Ok(b);
    }
    if matches!(op, BinOp::Add | BinOp::Sub) && b.number == Some(0.0) {
        return Ok(a);
    }
    if op == BinOp::Mul && a.number == Some(1.0) {
        return Ok(b);
    }
    if matches!(op, BinOp::Mul | BinOp::Div) && b.number == Some(1.0) {
        return Ok(a);
    }
    let on = matching(a.shape, b.shape);
    let shape = wider(a.shape, b.shape);
    let (sym, degree) = match op {
        BinOp::Add => ("+", same_degree(a.degree, b.degree)?),
        BinOp::Sub => ("-", same_degree(a.degree, b.degree)?),
        BinOp::Mul => (
            "*",
            match (a.degree, b.degree) {
                (Some(x), Some(y)) => Some(x + y),
                _ => None,
            },
        ),
        BinOp::Div => (
            "/",
            match (a.degree, b.degree) {
                (Some(x), Some(y)) => Some(x - y),
                (None, _) => None,
                (Some(x), None) => Some(x),
            },
        ),
        BinOp::Mod => ("%", same_degree(a.degree, b.degree)?),
        BinOp::Lt => {
            same_degree(a.degree, b.degree)?;
            ("< bool", Some(0))
        }
        BinOp::Gt => {
            same_degree(a.degree, b.degree)?;
            ("> bool", Some(0))
        }
        BinOp::And | BinOp::Or | BinOp::Xor => {
            let l = binary(BinOp::Gt, abs(a)?, Term::scalar(0.0))?;
            let r = binary(BinOp::Gt, abs(b)?, Term::scalar(0.0))?;
            let sum = binary(BinOp::Add, l, r)?;
            let want = match op {
                BinOp::And => 2.0,
                BinOp::Xor => 1.0,
                _ => 0.0,
            };
            let cmp = if op == BinOp::Or { "> bool" } else { "== bool" };
            let text = if shape == Shape::Scalar {
                return Err(Untranslatable::ConstantBoolean);
            } else {
                format!("({} {cmp} {})", sum.text, names::number(want))
            };
            return Ok(Term { text, shape, degree: Some(0), number: None });
        }
    };
    if shape == Shape::Scalar && sym.ends_with("bool") {
        // Scalars compared need no `bool` in PromQL only between scalars: keep it.
    }
    Ok(Term { text: format!("({} {sym}{on} {})", a.text, b.text), shape, degree, number: None })
}

fn abs(t: Term) -> Result<Term, Untranslatable> {
    Ok(match t.shape {
        Shape::Scalar => Term { text: format!("({})", t.text), ..t },
        _ => Term { text: format!("abs({})", t.text), ..t },
    })
}

fn call(func: Func, a: Term, b: Term) -> Result<Term, Untranslatable> {
    match func {
        Func::DRatio => {
            if let Some(y) = b.number {
                if y == 0.0 {
                    return Ok(Term::scalar(0.0));
                }
                return binary(BinOp::Div, a, b);
            }
            // `duration_time` (1 second per second, scaled by constants), never 0: perf 7.2's
            // build-generated rates (`lpm_br_cond_retired`: `d_ratio(BR_INST_RETIRED.COND,
            // duration_time)`) are the count's rate.
            if b.shape == Shape::Scalar {
                return binary(BinOp::Div, a, b);
            }
            if a.shape == Shape::Scalar || a.shape != b.shape {
                return Err(Untranslatable::Unmatched("d_ratio"));
            }
            let degree = match (a.degree, b.degree) {
                (Some(x), Some(y)) => Some(x - y),
                _ => None,
            };
            Ok(Term {
                text: format!("(({} / ({} != 0)) or ({} == 0))", a.text, b.text, b.text),
                shape: a.shape,
                degree,
                number: None,
            })
        }
        Func::Min | Func::Max => {
            let degree = same_degree(a.degree, b.degree)?;
            let (clamp, cmp) =
                if func == Func::Max { ("clamp_min", ">=") } else { ("clamp_max", "<=") };
            match (a.number, b.number) {
                (Some(x), Some(y)) => {
                    return Ok(Term::scalar(if func == Func::Max { x.max(y) } else { x.min(y) }));
                }
                (Some(_), None) => {
                    return Ok(Term {
                        text: format!("{clamp}({}, {})", b.text, a.text),
                        degree,
                        ..b
                    });
                }
                (None, Some(_)) => {
                    return Ok(Term {
                        text: format!("{clamp}({}, {})", a.text, b.text),
                        degree,
                        ..a
                    });
                }
                _ => {}
            }
            if a.shape != b.shape {
                return Err(Untranslatable::Unmatched(func.name()));
            }
            Ok(Term {
                text: format!("(({} {cmp} {}) or {})", a.text, b.text, b.text),
                shape: a.shape,
                degree,
                number: None,
            })
        }
    }
}

/// The rules computing `metrics` (model indices of `model`) with `rate()` over `window`.
pub fn rules(model: &'static Model, metrics: &[usize], window: &str) -> RuleSet {
    let common = std::ptr::eq(model, tmetric_catalog::common());
    let mut t = Translator {
        model,
        window,
        done: BTreeMap::new(),
        failed: BTreeMap::new(),
        rules: Vec::new(),
        common,
        selected: metrics.to_vec(),
        repeats: repeated_names(model),
    };
    let mut skipped = Vec::new();
    for &m in metrics {
        if let Err(why) = t.recorded(m) {
            skipped.push((model.str(model.metric(m).name).to_string(), why));
        }
    }
    RuleSet { rules: t.rules, skipped, window: window.to_string() }
}

/// The metrics of `model` whose name and core type an earlier metric with another formula
/// has: `serve` exports the first under that name.
fn repeated_names(model: &Model) -> BTreeSet<usize> {
    let mut first: BTreeMap<(&str, Option<&str>), usize> = BTreeMap::new();
    let mut repeats = BTreeSet::new();
    for m in 0..model.metric_count() {
        let key = (model.str(model.metric(m).name), hybrid_pmu(model, m));
        match first.get(&key) {
            Some(&f) if model.str(model.metric(f).expr) != model.str(model.metric(m).expr) => {
                repeats.insert(m);
            }
            Some(_) => {}
            None => {
                first.insert(key, m);
            }
        }
    }
    repeats
}

/// The per-event rate rule.
pub fn event_rate_rule(window: &str) -> Rule {
    Rule {
        record: event_rule(window),
        labels: Vec::new(),
        expr: format!(
            "avg without (group) (rate(tmetric_event_total[{window}]) * ignoring(event) group_left() (rate(tmetric_group_enabled_seconds_total[{window}]) / (rate(tmetric_group_running_seconds_total[{window}]) > 0)))"
        ),
        metric: "every event: its rate, scaled for multiplexing".into(),
    }
}

/// What every rules file says of the series it reads: the raw counters, which `serve` exports
/// only at its highest `--metrics-detail`.
pub const NEEDS_EVENTS: &str = "# They read tmetric_event_total and tmetric_group_{enabled,running}_seconds_total, which tmetric serve\n# exports at --metrics-detail events (the default) only: with metrics or quality they record nothing.\n";

/// The event rates' group (`tmetric rules --events`): one per Prometheus, however many
/// metric files it loads, since every metric rule reads it.
pub fn events_yaml(window: &str, command: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let ev = event_rate_rule(window);
    format!(
        "# Generated by `{command}`.\n# Every event's rate, scaled for multiplexing by its group's enabled and running times: the\n# metric rules of `tmetric rules -M ... --window {window}` read it. Load this group once.\n{NEEDS_EVENTS}groups:\n  - name: {}\n    rules:\n      - record: {}\n        expr: {}\n",
        q(&format!("tmetric_events_{window}")),
        ev.record,
        q(&ev.expr)
    )
}

/// The metric rules file: one group per model (a second metric that would record the same
/// name with the same labels is given its model in the name, as the gauges are), and with
/// `events`, the event rates' group first.
pub fn yaml(sets: &[(&'static Model, RuleSet)], command: &str, events: bool) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out = String::new();
    out.push_str(&format!("# Generated by `{command}`.\n"));
    out.push_str("# Recording rules over tmetric serve's raw counters: counts are aggregated first, metrics derived after.\n");
    out.push_str(NEEDS_EVENTS);
    let window = sets.first().map_or("1m", |(_, s)| s.window.as_str());
    if !events {
        out.push_str(&format!("# They read tmetric:event:rate{window}: load `tmetric rules --events --window {window}` once beside them.\n"));
    }
    for (model, set) in sets {
        for (metric, why) in &set.skipped {
            out.push_str(&format!("# not translated: {} {metric}: {why}\n", model.path()));
        }
    }
    out.push_str("groups:\n");
    if events {
        let ev = event_rate_rule(window);
        out.push_str(&format!(
            "  - name: {}\n    rules:\n",
            q(&format!("tmetric_events_{window}"))
        ));
        out.push_str(&format!("      - record: {}\n        expr: {}\n", ev.record, q(&ev.expr)));
    }
    let mut seen: Vec<(String, Vec<(&'static str, String)>)> = Vec::new();
    for (model, set) in sets {
        if set.rules.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "  - name: {}\n    rules:\n",
            q(&format!("tmetric_{}_{window}", names::snake(&model.path())))
        ));
        for r in &set.rules {
            let key = (r.record.clone(), r.labels.clone());
            if seen.contains(&key) {
                out.push_str(&format!(
                    "      # {} (recorded above by another selection's rule)\n",
                    r.metric
                ));
                continue;
            }
            seen.push(key);
            out.push_str(&format!("      # {}\n", r.metric));
            out.push_str(&format!("      - record: {}\n        expr: {}\n", r.record, q(&r.expr)));
            if !r.labels.is_empty() {
                out.push_str("        labels:\n");
                for (k, v) in &r.labels {
                    out.push_str(&format!("          {k}: {}\n", q(v)));
                }
            }
        }
    }
    out
}

/// Alerting rules (`tmetric rules --alerts`): cgroups left out, metrics multiplexed below a
/// running share, error bars wider than 5 points of a ratio, the event rate rule not loaded,
/// the collector late.
pub fn alerts_yaml(window: &str, command: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let alerts: [(&str, String, &str, &str); 5] = [
        (
            "TmetricCgroupsLeftOut",
            "tmetric_cgroups{state=\"left_out\"} > 0".into(),
            "15m",
            "{{ $value }} cgroups on {{ $labels.instance }} match but are not counted: see tmetric_cgroup_left_out_info for why (the descriptor budget, a refusal, a name that is not UTF-8)",
        ),
        (
            "TmetricMultiplexed",
            "min by (instance, job, cgroup, metric) (tmetric_metric_running_ratio) < 0.5".into(),
            "30m",
            "{{ $labels.metric }} on {{ $labels.instance }} {{ $labels.cgroup }}: an input ran on a counter for {{ $value | humanizePercentage }} of the interval; the rest is estimated. Count fewer metrics per host, or read its error bar",
        ),
        (
            "TmetricErrorBarWide",
            "{__name__=~\"tmetric_.+_error_bar_ratio\"} > 0.05".into(),
            "30m",
            "A ratio metric on {{ $labels.instance }} {{ $labels.cgroup }} is only known to within {{ $value | humanizePercentage }} (half width, 2 sigma): its inputs were multiplexed while the workload changed",
        ),
        (
            "TmetricEventRuleMissing",
            format!("(count(tmetric_event_total) > 0) unless on() (count(tmetric:event:rate{window}) > 0)"),
            "10m",
            "tmetric's raw counters are scraped but tmetric:event:rate{window} is not recorded: load `tmetric rules --events` once, or the metric rules record nothing",
        ),
        (
            "TmetricCollectorLate",
            "time() - tmetric_last_interval_end_timestamp_seconds > 3 * tmetric_interval_seconds and tmetric_intervals_total > 0".into(),
            "5m",
            "tmetric serve on {{ $labels.instance }} ended no interval for three intervals: /healthz says why",
        ),
    ];
    let mut out = format!(
        "# Generated by `{command}`.\n# TmetricMultiplexed and TmetricErrorBarWide read series tmetric serve exports at --metrics-detail\n# quality or events (the default), TmetricEventRuleMissing at events only: below, they never fire.\ngroups:\n  - name: tmetric_alerts\n    rules:\n"
    );
    for (name, expr, duration, summary) in alerts {
        let summary = summary.replace("{window}", window);
        out.push_str(&format!(
            "      - alert: {name}\n        expr: {}\n        for: {duration}\n        labels:\n          severity: warning\n        annotations:\n          summary: {}\n",
            q(&expr),
            q(&summary)
        ));
    }
    out
}

/// Grafana's unit id for an exported unit.
fn grafana_unit(e: &names::Exported) -> &'static str {
    match e.unit.as_str() {
        "ratio" => "percentunit",
        "seconds" => "s",
        "hertz" => "hertz",
        "bytes" => "decbytes",
        "bytes_per_second" => "Bps",
        "per_second" => "cps",
        _ => "short",
    }
}

/// A Grafana dashboard of `sets` (each model's metrics, by index): per host and per cgroup,
/// from the exported gauges with their error bars, plus running shares and thresholds
/// crossed; host, cgroup (leaves only, or any) and data source variables.
pub fn dashboard(sets: &[(&'static Model, &[usize])], title: &str) -> Value {
    let mut panels = Vec::new();
    let mut y = 0;
    let mut id = 1;
    let row = |title: &str, y: &mut i32, id: &mut i32, panels: &mut Vec<Value>| {
        panels.push(json!({
            "type": "row", "title": title, "id": *id, "collapsed": false,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": *y}, "panels": []
        }));
        *id += 1;
        *y += 1;
    };
    let ds = json!({"type": "prometheus", "uid": "${datasource}"});
    let groups: Vec<(String, Vec<(&'static Model, usize)>)> = {
        let mut by: Vec<(String, Vec<(&'static Model, usize)>)> = Vec::new();
        for (model, metrics) in sets {
            for &m in *metrics {
                let g = model.str(model.metric(m).groups);
                let level = g
                    .split(';')
                    .find(|x| x.starts_with("TopdownL"))
                    .map_or_else(|| model.path().to_string(), str::to_string);
                match by.iter_mut().find(|(l, _)| *l == level) {
                    Some((_, v)) => v.push((*model, m)),
                    None => by.push((level, vec![(*model, m)])),
                }
            }
        }
        by.sort_by(|a, b| a.0.cmp(&b.0));
        by
    };
    for (scope, selector, legend) in [
        ("per host", "instance=~\"$instance\",cgroup=\"\"", "{{instance}}"),
        ("per cgroup", "instance=~\"$instance\",cgroup=~\"$cgroup\"", "{{instance}} {{cgroup}}"),
    ] {
        row(&format!("Measurement quality {scope}"), &mut y, &mut id, &mut panels);
        for (x, (t, expr, unit)) in [
            (
                "Least running share",
                format!("min by (instance, cgroup) (tmetric_metric_running_ratio{{{selector}}})"),
                "percentunit",
            ),
            (
                "Thresholds crossed",
                format!(
                    "sum by (instance, cgroup) (tmetric_metric_threshold_crossed{{{selector}}})"
                ),
                "short",
            ),
            (
                "Metrics without a value",
                format!("count by (instance, cgroup) (tmetric_metric_missing_info{{{selector}}})"),
                "short",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            panels.push(json!({
                "type": "timeseries", "id": id, "title": t, "datasource": ds,
                "gridPos": {"h": 6, "w": 8, "x": 8 * x as i32, "y": y},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": "A", "datasource": ds, "expr": expr, "legendFormat": legend}],
            }));
            id += 1;
        }
        y += 6;
        for (level, ms) in &groups {
            row(&format!("{level} {scope}"), &mut y, &mut id, &mut panels);
            let mut x = 0;
            for &(model, m) in ms {
                let e = names::exported(model, m);
                let desc = model.metric(m);
                let ratio = e.unit == "ratio";
                let sel = format!("{selector},model=\"{}\"", model.path());
                panels.push(json!({
                    "type": "timeseries",
                    "id": id,
                    "title": model.str(desc.name),
                    "description": format!("{} Formula: {} The second series is the error bar's half width (2 sigma).", model.str(desc.brief), model.str(desc.expr)),
                    "datasource": ds,
                    "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
                    "fieldConfig": {
                        "defaults": {
                            "unit": grafana_unit(&e),
                            "min": if ratio { Some(0) } else { None },
                            "max": if ratio { Some(1) } else { None },
                        },
                        "overrides": []
                    },
                    "targets": [
                        {"refId": "A", "datasource": ds, "expr": format!("{}{{{sel}}}", e.family), "legendFormat": legend},
                        {"refId": "B", "datasource": ds, "expr": format!("{}{{{sel}}}", e.bar_family), "legendFormat": format!("{legend} error bar")},
                    ],
                }));
                id += 1;
                x += 8;
                if x >= 24 {
                    x = 0;
                    y += 8;
                }
            }
            if x > 0 {
                y += 8;
            }
        }
    }
    let uid = sets.iter().map(|(m, _)| names::snake(&m.path())).collect::<Vec<_>>().join("-");
    json!({
        "title": title,
        "uid": format!("tmetric-{}", &uid[..uid.len().min(30)]),
        "schemaVersion": 39,
        "version": 1,
        "editable": true,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "tags": ["tmetric", "topdown"],
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
            {"name": "instance", "type": "query", "label": "Host",
             "datasource": ds,
             "query": {"query": "label_values(tmetric_host_info, instance)", "refId": "instance"},
             "definition": "label_values(tmetric_host_info, instance)",
             "includeAll": true, "allValue": ".*", "multi": true, "refresh": 2},
            {"name": "leaf", "type": "custom", "label": "Cgroups",
             "description": "Leaves only: a parent cgroup's counts include its children's, so leaves are what sums without counting twice",
             "query": "true,false", "current": {"text": "true", "value": "true"},
             "options": [], "includeAll": false, "multi": false},
            {"name": "cgroup", "type": "query", "label": "Cgroup",
             "datasource": ds,
             "query": {"query": "label_values(tmetric_cgroup_info{instance=~\"$instance\",leaf=~\"$leaf|true\"}, cgroup)", "refId": "cgroup"},
             "definition": "label_values(tmetric_cgroup_info{instance=~\"$instance\",leaf=~\"$leaf|true\"}, cgroup)",
             "includeAll": true, "allValue": ".+", "multi": true, "refresh": 2},
        ]},
        "panels": panels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> &'static Model {
        tmetric_catalog::model(name).unwrap()
    }

    fn index(m: &Model, name: &str) -> usize {
        m.metrics().position(|x| m.str(x.name) == name).unwrap()
    }

    #[test]
    fn ratios_translate_and_counts_are_refused_with_the_reason() {
        let spr = model("sapphirerapids");
        let picked = [
            index(spr, "tma_backend_bound"),
            index(spr, "tma_memory_bound"),
            index(spr, "tma_core_bound"),
        ];
        let set = rules(spr, &picked, "1m");
        let records: Vec<&str> = set.rules.iter().map(|r| r.record.as_str()).collect();
        // What tma_core_bound reads comes first.
        assert_eq!(
            records,
            [
                "tmetric:tma_backend_bound_ratio:rate1m",
                "tmetric:tma_memory_bound_ratio:rate1m",
                "tmetric:tma_core_bound_ratio:rate1m"
            ]
        );
        assert_eq!(
            set.rules[2].expr,
            "clamp_min((sum without (model, pmu) (tmetric:tma_backend_bound_ratio:rate1m{model=\"x86/sapphirerapids\"}) - sum without (model, pmu) (tmetric:tma_memory_bound_ratio:rate1m{model=\"x86/sapphirerapids\"})), 0)"
        );
        assert_eq!(set.rules[2].labels, [("model", "x86/sapphirerapids".to_string())]);
        // Alone, tma_core_bound is the one rule: what it reads is written into it.
        let alone = rules(spr, &[index(spr, "tma_core_bound")], "1m");
        assert_eq!(alone.rules.len(), 1);
        assert!(!alone.rules[0].expr.contains("tmetric:tma_"), "{}", alone.rules[0].expr);
        let slots = rules(spr, &[index(spr, "tma_info_thread_slots")], "1m");
        assert!(slots.rules.is_empty());
        assert_eq!(slots.skipped[0].1, Untranslatable::IntervalDependent);
    }

    #[test]
    fn hybrid_rules_carry_the_core_type_and_durations_are_prometheus_ones() {
        let adl = model("alderlake");
        let picked: Vec<usize> = (0..adl.metric_count())
            .filter(|&m| adl.str(adl.metric(m).name) == "tma_retiring")
            .collect();
        assert_eq!(picked.len(), 2);
        let set = rules(adl, &picked, "1m");
        let pmus: Vec<&str> = set
            .rules
            .iter()
            .map(|r| r.labels.iter().find(|(k, _)| *k == "pmu").unwrap().1.as_str())
            .collect();
        assert_eq!(pmus, ["cpu_atom", "cpu_core"]);
        for ok in ["1m", "90s", "1h30m", "5m30s100ms", "2w", "1y"] {
            assert!(is_prometheus_duration(ok), "{ok}");
        }
        for bad in ["", "1", "m", "1m1m", "1s1m", "1.5m", "0s", "1m;x", "1M", "-1s"] {
            assert!(!is_prometheus_duration(bad), "{bad}");
        }
    }

    #[test]
    fn literals_join_per_host_and_if_blends() {
        let skx = model("skylakex");
        let set = rules(skx, &[index(skx, "tma_frontend_bound")], "5m");
        let expr = &set.rules.last().unwrap().expr;
        assert!(expr.contains("on(instance, job) group_left() (sum without (literal) (tmetric_machine_literal{literal=\"smt_on\"}) > bool 0)"), "{expr}");
        assert_eq!(expr.matches('(').count(), expr.matches(')').count());
    }

    #[test]
    fn a_count_per_duration_time_is_its_rate_and_shared_names_are_not_recorded_twice() {
        // perf 7.2's build-generated metrics divide by duration_time with d_ratio().
        tmetric_catalog::use_vintage(tmetric_catalog::vintage_for("7.2").unwrap());
        let spr = model("sapphirerapids");
        let set = rules(spr, &[index(spr, "lpm_br_far_retired")], "1m");
        assert!(set.skipped.is_empty(), "{:?}", set.skipped);
        assert_eq!(
            set.rules.last().unwrap().expr,
            "(sum without (event, model) (tmetric:event:rate1m{event=\"BR_INST_RETIRED.FAR_BRANCH\",model=\"x86/sapphirerapids\"}) / 1)"
        );
        let all: Vec<usize> = (0..spr.metric_count()).collect();
        let set = rules(spr, &all, "1m");
        let mut series: Vec<(&str, &Vec<(&str, String)>)> =
            set.rules.iter().map(|r| (r.record.as_str(), &r.labels)).collect();
        let n = series.len();
        series.sort();
        series.dedup();
        assert_eq!(series.len(), n, "a series is recorded by two rules");
        // The first `lpm_br_cond_retired` (all conditional branches) is recorded, as served;
        // the second (those not taken) is said.
        let cond = set.rules.iter().find(|r| r.metric == "lpm_br_cond_retired").expect("a rule");
        assert!(cond.expr.contains("\"BR_INST_RETIRED.COND\""), "{}", cond.expr);
        assert!(
            set.skipped.contains(&("lpm_br_cond_retired".into(), Untranslatable::SharedName)),
            "{:?}",
            set.skipped
        );
        tmetric_catalog::clear_inferred_vintage();
    }

    #[test]
    fn most_of_a_model_translates() {
        let spr = model("sapphirerapids");
        let all: Vec<usize> = (0..spr.metric_count()).collect();
        let set = rules(spr, &all, "1m");
        assert!(set.rules.len() >= 270, "{} rules", set.rules.len());
        for (metric, why) in &set.skipped {
            assert!(
                matches!(
                    why,
                    Untranslatable::IntervalDependent
                        | Untranslatable::MachineCall { .. }
                        | Untranslatable::NoEvent
                        | Untranslatable::SharedName
                ),
                "{metric}: {why}"
            );
        }
    }
}
