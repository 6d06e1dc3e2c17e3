//! Fuzzing the expression parser (and every pass over what it accepts) with proptest, on the
//! stable toolchain.
//!
//! CI runs a short pass. A long run sets the case count, e.g.
//! `FUZZ_CASES=2000000 cargo test --release -p tmetric-expr --test fuzz`. Inputs that
//! failed once are kept below as named regression cases (proptest also records shrunk
//! failures in `tests/fuzz.proptest-regressions`, replayed before new cases).

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tmetric_expr::{Env, Facts, Ident, Literal, MAX_NESTING, ParseErrorKind, eval, needed, parse};

/// Cases per property: `FUZZ_CASES`, else a count small enough for the test suite.
fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

/// Every identifier is 1.5, every literal 2; `source_count` and `aggr_nr` are 1.
struct Any;

impl Env for Any {
    fn id(&mut self, _: &Ident) -> f64 {
        1.5
    }
    fn literal(&mut self, _: Literal) -> Option<f64> {
        Some(2.0)
    }
    fn source_count(&mut self, _: &Ident) -> f64 {
        1.0
    }
    fn aggr_nr(&mut self, _: &Ident) -> f64 {
        1.0
    }
    fn has_event(&mut self, _: &Ident) -> bool {
        true
    }
    fn cpuid_match(&mut self, _: &Ident) -> f64 {
        0.0
    }
}

impl Facts for Any {
    fn literal(&self, _: Literal) -> Option<f64> {
        Some(2.0)
    }
    fn has_event(&self, _: &Ident) -> bool {
        true
    }
    fn cpuid_match(&self, _: &Ident) -> f64 {
        0.0
    }
}

/// Parses `text`; on success runs every pass (print, re-parse, evaluate, needed events) and
/// checks that the printed form parses to the same tree.
fn exercise(text: &str) -> Result<(), TestCaseError> {
    match parse(text) {
        Ok(expr) => {
            let printed = expr.to_string();
            match parse(&printed) {
                Ok(again) => prop_assert_eq!(again.to_string(), printed),
                // Printing adds brackets, so an input near the nesting limit may print to
                // one beyond it; anything else is a printer bug.
                Err(err) if err.kind == ParseErrorKind::TooDeep { limit: MAX_NESTING } => {}
                Err(err) => {
                    return Err(TestCaseError::fail(format!("`{printed}` from `{text}`: {err}")));
                }
            }
            let _ = eval(&expr, &mut Any);
            let _ = needed(&expr, &Any);
        }
        Err(err) => {
            // The error renders, its span lies inside the text, and it is never huge.
            let message = err.to_string();
            prop_assert!(err.span.start as usize <= text.len());
            prop_assert!(message.len() < 2000, "{} bytes", message.len());
        }
    }
    Ok(())
}

/// Token soup over the whole grammar, including deep nesting and long chains.
fn tokens() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("("),
        Just(")"),
        Just(","),
        Just("-"),
        Just(" + "),
        Just(" * "),
        Just(" / "),
        Just(" % "),
        Just(" < "),
        Just(" | "),
        Just(" ^ "),
        Just(" & "),
        Just(" if "),
        Just(" else "),
        Just("min("),
        Just("max("),
        Just("d_ratio("),
        Just("source_count("),
        Just("has_event("),
        Just("strcmp_cpuid_str("),
        Just("NaN"),
        Just("#smt_on"),
        Just("#x"),
        Just("1e-3"),
        Just("1e999"),
        Just("1e-999"),
        Just("0x10"),
        Just(".5"),
        Just("7"),
        Just("a"),
        Just("cpu@INST\\,cmask\\=1@"),
        Just("b:k"),
        Just("é"),
        Just("\u{0}"),
        Just("\\"),
        Just("="),
    ];
    prop::collection::vec(token, 0..300).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        // Shrunk failures are kept in `tests/fuzz.proptest-regressions` and replayed first.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// Random bytes never panic the parser.
    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        exercise(&String::from_utf8_lossy(&bytes))?;
    }

    /// Strings over the expression alphabet.
    #[test]
    fn alphabet(text in "[a-c0-9 .e\\-+*/%<>|&^(),#?@:\\\\]{0,80}|(if|else|min|max|d_ratio|NaN| |x|1|\\(|\\)|,|-|\\*)*") {
        exercise(&text)?;
    }

    /// Token soup, including nesting near and beyond the limits.
    #[test]
    fn token_soup(text in tokens()) {
        exercise(&text)?;
    }

    /// Deep structures: N opening tokens of one kind around an atom.
    #[test]
    fn deep(open in prop_oneof![Just("("), Just("min(1,"), Just("-"), Just("1 if 1 else ")], n in 0usize..3000) {
        let close = if open.ends_with('(') || open.ends_with(',') { ")" } else { "" };
        exercise(&format!("{}x{}", open.repeat(n), close.repeat(n)))?;
    }
}

/// Inputs that failed once (stack overflows before nesting was bounded, characters that were
/// silently skipped), kept as regression cases.
#[test]
fn regressions() {
    for text in [
        "(".repeat(5000) + "1" + &")".repeat(5000),
        "min(1,".repeat(10_000) + "1" + &")".repeat(10_000),
        "-".repeat(100_000) + "1",
        vec!["1"; 100_000].join("+"),
        "a\u{e9}".to_string(),
        "x\u{20ac} + 1".to_string(),
        "a\u{1}".to_string(),
        "foo(1,2)".to_string(),
    ] {
        let err = parse(&text).expect_err("must be refused");
        assert!(err.to_string().len() < 2000);
    }
}
