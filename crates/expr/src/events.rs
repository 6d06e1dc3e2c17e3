//! The needed-events pass: which identifiers an expression needs on a given machine.
//!
//! This is perf's `expr__find_ids` (util/expr.y with `compute_ids` on): literals,
//! `has_event` and `strcmp_cpuid_str` are constants that fold `if`, `|`, `&` and division
//! by zero, so the set depends on the machine's literal values. See spec A7.

use crate::literal::Literal;
use crate::ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident};
use crate::eval::EvalError;

/// The constants the events pass folds with.
pub trait Facts {
    /// The value of `#name`; `None` for an unknown literal.
    fn literal(&self, literal: Literal) -> Option<f64>;
    /// `has_event(ID)` on this machine.
    fn has_event(&self, id: &Ident) -> bool;
    /// `strcmp_cpuid_str(ID)`: 1, 0, or NaN when unknown.
    fn cpuid_match(&self, id: &Ident) -> f64;
}

/// The result of the pass over one node: a finite constant, or BOTTOM (NaN, "known only at
/// run time") with the identifiers that decide it.
#[derive(Debug, Clone, PartialEq)]
pub struct Needed<'e> {
    /// A finite value when the node folded to a constant, NaN otherwise.
    pub value: f64,
    /// The identifiers needed, in first-seen order, without duplicates by name.
    pub ids: Vec<&'e Ident>,
}

impl<'e> Needed<'e> {
    fn constant(value: f64) -> Needed<'e> {
        Needed { value, ids: Vec::new() }
    }

    fn is_const(&self) -> bool {
        self.value.is_finite()
    }

    /// perf's `union_expr`: BOTTOM with both id sets.
    fn union(mut self, other: Needed<'e>) -> Needed<'e> {
        for id in other.ids {
            if !self.ids.iter().any(|have| have.name == id.name) {
                self.ids.push(id);
            }
        }
        self.value = f64::NAN;
        self
    }
}

/// Runs the events pass over `expr`.
pub fn needed<'e>(expr: &'e Expr, facts: &dyn Facts) -> Result<Needed<'e>, EvalError> {
    Ok(match &expr.kind {
        // The keyword NaN is indistinguishable from BOTTOM here, as in perf.
        ExprKind::Num(v) => Needed::constant(*v),
        ExprKind::Literal(name) => match Literal::from_name(name).and_then(|lit| facts.literal(lit)) {
            Some(v) if !v.is_nan() => Needed::constant(v),
            _ => return Err(EvalError::Literal { name: name.clone(), span: expr.span }),
        },
        ExprKind::Id(id) | ExprKind::IdCall(IdFunc::SourceCount, id) => Needed { value: f64::NAN, ids: vec![id] },
        ExprKind::IdCall(IdFunc::HasEvent, id) => Needed::constant(if facts.has_event(id) { 1.0 } else { 0.0 }),
        ExprKind::IdCall(IdFunc::StrcmpCpuidStr, id) => Needed::constant(facts.cpuid_match(id)),
        ExprKind::Neg(inner) => {
            let mut inner = needed(inner, facts)?;
            inner.value = -inner.value;
            inner
        }
        ExprKind::Bin(op, lhs, rhs) => binary(*op, needed(lhs, facts)?, needed(rhs, facts)?, expr)?,
        ExprKind::Call(func, lhs, rhs) => {
            let (a, b) = (needed(lhs, facts)?, needed(rhs, facts)?);
            match func {
                Func::DRatio if b.value == 0.0 => Needed::constant(0.0),
                Func::DRatio if a.is_const() && b.is_const() => Needed::constant(crate::eval::d_ratio(a.value, b.value)),
                // min and max never fold, even over two constants (perf's quirk, spec E7).
                _ => a.union(b),
            }
        }
        ExprKind::If { then, cond, otherwise } => {
            let (t, c, o) = (needed(then, facts)?, needed(cond, facts)?, needed(otherwise, facts)?);
            if c.value == 0.0 {
                o
            } else if c.is_const() {
                t
            } else if t.value == o.value {
                // Both branches are the same constant: no events decide anything.
                Needed::constant(t.value)
            } else {
                t.union(c).union(o)
            }
        }
    })
}

fn binary<'e>(op: BinOp, a: Needed<'e>, b: Needed<'e>, expr: &Expr) -> Result<Needed<'e>, EvalError> {
    let both = a.is_const() && b.is_const();
    Ok(match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Lt | BinOp::Gt | BinOp::Xor => {
            // `x * 0` is deliberately not folded: the JSON uses `+ 0 * slots` to pull in events.
            if both {
                Needed::constant(crate::eval::binary(op, a.value, b.value).unwrap_or(f64::NAN))
            } else {
                a.union(b)
            }
        }
        BinOp::Div => {
            if b.value == 0.0 {
                // Division by a constant zero drops the numerator's events.
                Needed::constant(f64::NAN)
            } else if both {
                Needed::constant(a.value / b.value)
            } else {
                a.union(b)
            }
        }
        BinOp::Mod => {
            if b.value == 0.0 {
                return Err(EvalError::RemainderByZero { span: expr.span });
            } else if both {
                match crate::eval::rem(a.value, b.value) {
                    Some(v) => Needed::constant(v),
                    None => return Err(EvalError::RemainderByZero { span: expr.span }),
                }
            } else {
                a.union(b)
            }
        }
        BinOp::Or | BinOp::And => match (a.is_const(), b.is_const()) {
            (true, true) => Needed::constant(crate::eval::binary(op, a.value, b.value).unwrap_or(f64::NAN)),
            (true, false) => short_circuit(op, a.value, b),
            (false, true) => short_circuit(op, b.value, a),
            (false, false) => a.union(b),
        },
    })
}

/// `|`/`&` with one constant side: `0 | X` and `1 & X` keep X, `1 | X` is 1, `0 & X` is 0.
fn short_circuit(op: BinOp, constant: f64, other: Needed<'_>) -> Needed<'_> {
    match (op, constant == 0.0) {
        (BinOp::Or, true) | (BinOp::And, false) => other,
        (BinOp::Or, false) => Needed::constant(1.0),
        _ => Needed::constant(0.0),
    }
}
