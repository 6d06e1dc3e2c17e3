//! `adhoc`: a user's formula over values given by name, the names without a value, the
//! literals read, and an error with the caret under its culprit.

use std::collections::HashMap;

use tmetric_expr::adhoc::{Given, evaluate};
use tmetric_expr::{EvalError, Literal, parse};

struct Vals(HashMap<&'static str, (f64, usize)>);

impl Given for Vals {
    fn value(&self, name: &str) -> Option<(f64, usize)> {
        self.0.get(name).copied()
    }
    fn literal(&self, literal: Literal) -> Option<f64> {
        (literal == Literal::SmtOn).then_some(1.0)
    }
}

fn run(text: &str) -> Result<tmetric_expr::adhoc::Adhoc, tmetric_expr::adhoc::AdhocError> {
    let given = Vals(HashMap::from([("A", (6.0, 1)), ("U", (4.0, 3))]));
    evaluate(&parse(text).unwrap(), text, &given)
}

#[test]
fn values_literals_and_source_counts_are_read() {
    let got = run("A / (1 + #smt_on) + source_count(U) + has_event(A)").unwrap();
    assert_eq!(got.value, 3.0 + 3.0 + 1.0);
    assert!(got.missing.is_empty());
    assert_eq!(got.literals, vec![Literal::SmtOn]);
}

#[test]
fn names_without_a_value_are_nan_and_listed_once() {
    let got = run("A + B + B * C").unwrap();
    assert!(got.value.is_nan());
    assert_eq!(got.missing, vec!["B".to_string(), "C".to_string()]);
}

#[test]
fn an_unknown_literal_fails_with_a_caret() {
    let err = run("A * #num_cpus").unwrap_err();
    assert!(matches!(&err.error, EvalError::Literal { name, .. } if name == "num_cpus"));
    assert_eq!(
        err.to_string(),
        "literal `#num_cpus` has no value\n    A * #num_cpus\n        ^^^^^^^^^"
    );
}
