//! A user's own formula (`tmetric eval --expr`) evaluated with perf's semantics over values a
//! front end gives by name: [`evaluate`] runs the interpreter over a [`Given`] environment
//! and says which names had no value and which literals were read. A failure is an
//! [`AdhocError`] that carries the caret lines under its culprit.

use crate::error::caret_lines;
use crate::eval::{Env, EvalError, eval};
use crate::{Expr, Ident, Literal};

/// What an expression reads: each name's value with how many values were summed into it
/// (`source_count`), and each literal's value. A name without a value reads as NaN (perf's
/// rule) and is listed in [`Adhoc::missing`]; `strcmp_cpuid_str()` is NaN (no machine).
pub trait Given {
    /// The value of `name` and how many values were summed into it, if it is given.
    fn value(&self, name: &str) -> Option<(f64, usize)>;
    /// A literal's value; `None` or NaN fails the expression.
    fn literal(&self, literal: Literal) -> Option<f64>;
}

/// An expression's value over what was given.
#[derive(Debug, Clone, PartialEq)]
pub struct Adhoc {
    /// The value (NaN when a name it needs had no value).
    pub value: f64,
    /// The names read that had no value, in first-read order.
    pub missing: Vec<String>,
    /// The literals the expression names, sorted, each once.
    pub literals: Vec<Literal>,
}

/// Why an expression has no value at all (a literal without a value, a remainder by zero).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}\n{caret}")]
pub struct AdhocError {
    /// The interpreter's error.
    pub error: EvalError,
    /// The expression with a caret under the culprit ([`caret_lines`]).
    pub caret: String,
}

/// Evaluates `expr` (parsed from `text`, which the carets of an error quote) over `given`.
pub fn evaluate(expr: &Expr, text: &str, given: &dyn Given) -> Result<Adhoc, AdhocError> {
    let mut env = GivenEnv { given, missing: Vec::new() };
    let value = eval(expr, &mut env).map_err(|error| {
        let caret = caret_lines(text, error.span());
        AdhocError { error, caret }
    })?;
    let mut literals: Vec<Literal> =
        expr.literals().into_iter().filter_map(Literal::from_name).collect();
    literals.sort();
    literals.dedup();
    Ok(Adhoc { value, missing: env.missing, literals })
}

/// [`Given`] as the interpreter's [`Env`], collecting the names without a value.
struct GivenEnv<'a> {
    given: &'a dyn Given,
    missing: Vec<String>,
}

impl Env for GivenEnv<'_> {
    fn id(&mut self, id: &Ident) -> f64 {
        match self.given.value(&id.name) {
            Some((value, _)) => value,
            None => {
                if !self.missing.contains(&id.name) {
                    self.missing.push(id.name.clone());
                }
                f64::NAN
            }
        }
    }

    fn literal(&mut self, literal: Literal) -> Option<f64> {
        self.given.literal(literal)
    }

    fn source_count(&mut self, id: &Ident) -> f64 {
        self.given.value(&id.name).map_or(0.0, |(_, n)| n as f64)
    }

    /// The values summed into the name are the counters summed (a counts file's instances):
    /// none for a name that could not be counted, NaN for one not given (perf's rule for an
    /// unknown name).
    fn aggr_nr(&mut self, id: &Ident) -> f64 {
        match self.given.value(&id.name) {
            Some((v, _)) if v.is_nan() => 0.0,
            Some((_, n)) => n.max(1) as f64,
            None => f64::NAN,
        }
    }

    fn has_event(&mut self, id: &Ident) -> bool {
        self.given.value(&id.name).is_some_and(|(v, _)| !v.is_nan())
    }

    fn cpuid_match(&mut self, _id: &Ident) -> f64 {
        f64::NAN
    }
}
