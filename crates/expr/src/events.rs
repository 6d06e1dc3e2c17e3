//! The needed-events pass: which identifiers an expression needs on a given machine.
//!
//! This is perf's `expr__find_ids` (tools/perf/util/expr.c): literals, `has_event` and
//! `strcmp_cpuid_str` are constants that fold `if`, `|`, `&` and division by zero, so the
//! set depends on the machine. The folding rules live in `tmetric_model::Needed`, shared
//! with the generated code; this file only walks the tree.

use tmetric_model::{IdSet, Literal, Needed};

use crate::ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident};
use crate::eval::{EvalError, literal_value};

/// The constants the events pass folds with.
pub trait Facts {
    /// The value of a literal on this machine; `None` or NaN fails the expression.
    fn literal(&self, literal: Literal) -> Option<f64>;
    /// `has_event(ID)` on this machine.
    fn has_event(&self, id: &Ident) -> bool;
    /// `strcmp_cpuid_str(ID)`: 1, 0, or NaN when unknown.
    fn cpuid_match(&self, id: &Ident) -> f64;
}

/// Runs the events pass over `expr`. Identifiers are deduplicated by name.
pub fn needed<'e>(expr: &'e Expr, facts: &dyn Facts) -> Result<Needed<&'e str>, EvalError> {
    needed_in(expr, facts)
}

/// [`needed`] with the identifiers in any [`IdSet`] (perf's hashmap order with
/// [`tmetric_model::PerfIds`]).
pub fn needed_in<'e, S: IdSet<&'e str>>(
    expr: &'e Expr,
    facts: &dyn Facts,
) -> Result<Needed<&'e str, S>, EvalError> {
    let needed = |e: &'e Expr, f: &dyn Facts| needed_in::<S>(e, f);
    Ok(match &expr.kind {
        ExprKind::Num(v) => Needed::constant(*v),
        ExprKind::Literal(name) => {
            Needed::constant(literal_value(name, expr.span, |lit| facts.literal(lit))?)
        }
        ExprKind::Id(id) | ExprKind::IdCall(IdFunc::SourceCount | IdFunc::AggrNr, id) => {
            Needed::id(id.name.as_str())
        }
        ExprKind::IdCall(IdFunc::HasEvent, id) => {
            Needed::constant(f64::from(u8::from(facts.has_event(id))))
        }
        ExprKind::IdCall(IdFunc::StrcmpCpuidStr, id) => Needed::constant(facts.cpuid_match(id)),
        ExprKind::Neg(inner) => needed(inner, facts)?.negate(),
        ExprKind::Bin(op, lhs, rhs) => {
            let (a, b) = (needed(lhs, facts)?, needed(rhs, facts)?);
            match op {
                BinOp::Add => a.arith(b, |x, y| x + y),
                BinOp::Sub => a.arith(b, |x, y| x - y),
                BinOp::Mul => a.arith(b, |x, y| x * y),
                BinOp::Lt => a.arith(b, tmetric_model::sem::lt),
                BinOp::Gt => a.arith(b, tmetric_model::sem::gt),
                BinOp::Xor => a.arith(b, tmetric_model::sem::xor),
                BinOp::Div => a.divide(b),
                BinOp::Mod => {
                    a.remainder(b).map_err(|_| EvalError::RemainderByZero { span: expr.span })?
                }
                BinOp::Or => a.or(b),
                BinOp::And => a.and(b),
            }
        }
        ExprKind::Call(func, lhs, rhs) => {
            let (a, b) = (needed(lhs, facts)?, needed(rhs, facts)?);
            match func {
                Func::DRatio => a.d_ratio(b),
                Func::Min | Func::Max => a.min_max(b),
            }
        }
        ExprKind::If { then, cond, otherwise } => {
            let (t, c, o) = (needed(then, facts)?, needed(cond, facts)?, needed(otherwise, facts)?);
            Needed::if_else(t, c, o)
        }
    })
}
