//! The interpreter: perf 6.12's evaluation semantics (util/expr.y with `compute_ids` off).
//!
//! It serves ad-hoc user formulas and is the oracle the generated metric functions are
//! tested against, so every rule here mirrors perf, NaN cases included.

use crate::literal::Literal;
use crate::ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident, Span};

/// What an expression can ask of the world while it is evaluated.
pub trait Env {
    /// The value of an event or metric reference; NaN when it is unknown (perf's rule).
    fn id(&mut self, id: &Ident) -> f64;
    /// The value of `#name`; `None` for an unknown literal, which fails the expression.
    fn literal(&mut self, literal: Literal) -> Option<f64>;
    /// `source_count(ID)`: how many PMU instances were merged into the event.
    fn source_count(&mut self, id: &Ident) -> f64;
    /// `has_event(ID)`.
    fn has_event(&mut self, id: &Ident) -> bool;
    /// `strcmp_cpuid_str(ID)`: 1 when the cpuid matches, 0 when not, NaN when unknown.
    fn cpuid_match(&mut self, id: &Ident) -> f64;
}

/// Why an expression produced no value at all (perf prints such a metric blank).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// `x % 0`: perf aborts the parse.
    #[error("remainder by zero")]
    RemainderByZero {
        /// The `%` expression.
        span: Span,
    },
    /// `#nonsense`, or a literal whose value is unknown on this machine.
    #[error("literal `#{name}` has no value")]
    Literal {
        /// The literal's name without `#`.
        name: String,
        /// Where it is.
        span: Span,
    },
}

/// Evaluates `expr` with perf's semantics.
pub fn eval(expr: &Expr, env: &mut dyn Env) -> Result<f64, EvalError> {
    Ok(match &expr.kind {
        ExprKind::Num(v) => *v,
        ExprKind::Literal(name) => match Literal::from_name(name).and_then(|lit| env.literal(lit)) {
            Some(v) if !v.is_nan() => v,
            _ => return Err(EvalError::Literal { name: name.clone(), span: expr.span }),
        },
        ExprKind::Id(id) => env.id(id),
        ExprKind::IdCall(IdFunc::SourceCount, id) => env.source_count(id),
        ExprKind::IdCall(IdFunc::HasEvent, id) => {
            if env.has_event(id) {
                1.0
            } else {
                0.0
            }
        }
        ExprKind::IdCall(IdFunc::StrcmpCpuidStr, id) => env.cpuid_match(id),
        ExprKind::Neg(inner) => -eval(inner, env)?,
        ExprKind::Bin(op, lhs, rhs) => {
            let (a, b) = (eval(lhs, env)?, eval(rhs, env)?);
            binary(*op, a, b).ok_or(EvalError::RemainderByZero { span: expr.span })?
        }
        ExprKind::Call(func, lhs, rhs) => call(*func, eval(lhs, env)?, eval(rhs, env)?),
        ExprKind::If { then, cond, otherwise } => {
            // perf reduces all three before choosing, so an error anywhere fails the whole.
            let (t, c, o) = (eval(then, env)?, eval(cond, env)?, eval(otherwise, env)?);
            if_else(t, c, o)
        }
    })
}

/// A binary operator on two values; `None` for a remainder by zero.
#[inline]
pub fn binary(op: BinOp, a: f64, b: f64) -> Option<f64> {
    Some(match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => div(a, b),
        BinOp::Lt => lt(a, b),
        BinOp::Gt => gt(a, b),
        BinOp::Mod => return rem(a, b),
        BinOp::Or => or(a, b),
        BinOp::And => and(a, b),
        BinOp::Xor => xor(a, b),
    })
}

/// `a / b`: NaN when `b` is zero of either sign.
#[inline]
pub fn div(a: f64, b: f64) -> f64 {
    if b == 0.0 { f64::NAN } else { a / b }
}

/// `a < b`: NaN if either side is NaN, else 1 or 0.
#[inline]
pub fn lt(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { f64::from(u8::from(a < b)) }
}

/// `a > b`: NaN if either side is NaN, else 1 or 0.
#[inline]
pub fn gt(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { f64::from(u8::from(a > b)) }
}

/// C's `(long)x` on x86-64: NaN and out-of-range values become the "integer indefinite"
/// `LONG_MIN`, unlike Rust's saturating `as`.
/// 2^63, the first double past `i64::MAX`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

#[inline]
fn c_long(x: f64) -> i64 {
    if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// `a % b` as `(long)a % (long)b`. `None` when `b` is zero; perf aborts there, and also
/// when `(long)b` is zero (SIGFPE in perf), which we report the same way instead of crashing.
#[inline]
pub fn rem(a: f64, b: f64) -> Option<f64> {
    if b == 0.0 {
        return None;
    }
    let divisor = c_long(b);
    if divisor == 0 {
        return None;
    }
    Some(c_long(a).wrapping_rem(divisor) as f64)
}

/// `|`: logical or; a finite operand short-circuits even against NaN.
#[inline]
pub fn or(a: f64, b: f64) -> f64 {
    match (a.is_finite(), b.is_finite()) {
        (true, true) => f64::from(u8::from(a != 0.0 || b != 0.0)),
        (true, false) => {
            if a == 0.0 {
                b
            } else {
                1.0
            }
        }
        (false, true) => {
            if b == 0.0 {
                a
            } else {
                1.0
            }
        }
        (false, false) => f64::NAN,
    }
}

/// `&`: logical and; a finite operand short-circuits even against NaN.
#[inline]
pub fn and(a: f64, b: f64) -> f64 {
    match (a.is_finite(), b.is_finite()) {
        (true, true) => f64::from(u8::from(a != 0.0 && b != 0.0)),
        (true, false) => {
            if a == 0.0 {
                0.0
            } else {
                b
            }
        }
        (false, true) => {
            if b == 0.0 {
                0.0
            } else {
                a
            }
        }
        (false, false) => f64::NAN,
    }
}

/// `^`: logical exclusive or of two finite values, else NaN.
#[inline]
pub fn xor(a: f64, b: f64) -> f64 {
    if a.is_finite() && b.is_finite() { f64::from(u8::from((a != 0.0) != (b != 0.0))) } else { f64::NAN }
}

/// `d_ratio`, `min` and `max`.
#[inline]
pub fn call(func: Func, a: f64, b: f64) -> f64 {
    match func {
        Func::DRatio => d_ratio(a, b),
        Func::Min => min(a, b),
        Func::Max => max(a, b),
    }
}

/// `d_ratio(a, b)`: 0 when `b` is zero, else `a / b`.
#[inline]
pub fn d_ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// `min(a, b)` as C's `a < b ? a : b`: if either is NaN the result is `b`.
#[inline]
pub fn min(a: f64, b: f64) -> f64 {
    if a < b { a } else { b }
}

/// `max(a, b)` as C's `a > b ? a : b`: if either is NaN the result is `b`.
#[inline]
pub fn max(a: f64, b: f64) -> f64 {
    if a > b { a } else { b }
}

/// `then if cond else otherwise`: only an exact zero selects `otherwise`; NaN is true.
#[inline]
pub fn if_else(then: f64, cond: f64, otherwise: f64) -> f64 {
    if cond == 0.0 { otherwise } else { then }
}
