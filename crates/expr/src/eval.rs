//! The interpreter: perf 6.12's evaluation semantics over the tree (tools/perf/util/expr.y, `expr__parse`).
//!
//! It serves ad-hoc user formulas and is the oracle the generated metric functions are
//! tested against. The arithmetic itself lives in `tmetric_model::sem`, shared with the
//! generated code; this file only walks the tree.

use tmetric_model::Literal;
use tmetric_model::sem::{self, Fail};

use crate::ast::{BinOp, Expr, ExprKind, Func, IdFunc, Ident, Span};

/// What an expression can ask of the world while it is evaluated.
pub trait Env {
    /// The value of an event or metric reference; NaN when it is unknown (perf's rule).
    fn id(&mut self, id: &Ident) -> f64;
    /// The value of a literal on this machine; `None` or NaN fails the expression.
    fn literal(&mut self, literal: Literal) -> Option<f64>;
    /// `source_count(ID)`: how many PMU instances were merged into the event.
    fn source_count(&mut self, id: &Ident) -> f64;
    /// `aggr_nr(ID)` (perf 7.x): how many counters were summed into the event's value in this
    /// aggregation unit.
    fn aggr_nr(&mut self, id: &Ident) -> f64;
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

impl EvalError {
    /// The shared failure kind, as the generated code reports it.
    pub fn fail(&self) -> Fail {
        match self {
            EvalError::RemainderByZero { .. } => Fail::RemainderByZero,
            EvalError::Literal { .. } => Fail::Literal,
        }
    }

    /// Where in the expression it happened.
    pub fn span(&self) -> Span {
        match self {
            EvalError::RemainderByZero { span } | EvalError::Literal { span, .. } => *span,
        }
    }
}

/// Evaluates `expr` with perf's semantics.
pub fn eval(expr: &Expr, env: &mut dyn Env) -> Result<f64, EvalError> {
    Ok(match &expr.kind {
        ExprKind::Num(v) => *v,
        ExprKind::Literal(name) => literal_value(name, expr.span, |lit| env.literal(lit))?,
        ExprKind::Id(id) => env.id(id),
        ExprKind::IdCall(IdFunc::SourceCount, id) => env.source_count(id),
        ExprKind::IdCall(IdFunc::AggrNr, id) => env.aggr_nr(id),
        ExprKind::IdCall(IdFunc::HasEvent, id) => f64::from(u8::from(env.has_event(id))),
        ExprKind::IdCall(IdFunc::StrcmpCpuidStr, id) => env.cpuid_match(id),
        ExprKind::Neg(inner) => -eval(inner, env)?,
        ExprKind::Bin(op, lhs, rhs) => {
            let (a, b) = (eval(lhs, env)?, eval(rhs, env)?);
            match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Div => sem::div(a, b),
                BinOp::Lt => sem::lt(a, b),
                BinOp::Gt => sem::gt(a, b),
                BinOp::Mod => {
                    sem::rem(a, b).map_err(|_| EvalError::RemainderByZero { span: expr.span })?
                }
                BinOp::Or => sem::or(a, b),
                BinOp::And => sem::and(a, b),
                BinOp::Xor => sem::xor(a, b),
            }
        }
        ExprKind::Call(func, lhs, rhs) => {
            let (a, b) = (eval(lhs, env)?, eval(rhs, env)?);
            match func {
                Func::DRatio => sem::d_ratio(a, b),
                Func::Min => sem::min(a, b),
                Func::Max => sem::max(a, b),
            }
        }
        ExprKind::If { then, cond, otherwise } => {
            // perf reduces all three before choosing, so an error anywhere fails the whole.
            let (t, c, o) = (eval(then, env)?, eval(cond, env)?, eval(otherwise, env)?);
            sem::if_else(t, c, o)
        }
    })
}

/// Looks a literal up by its spelling; unknown names and NaN values fail like perf's lexer.
pub(crate) fn literal_value(
    name: &str,
    span: Span,
    mut value_of: impl FnMut(Literal) -> Option<f64>,
) -> Result<f64, EvalError> {
    Literal::from_name(name)
        .and_then(&mut value_of)
        .filter(|v| !v.is_nan())
        .ok_or_else(|| EvalError::Literal { name: name.to_string(), span })
}
