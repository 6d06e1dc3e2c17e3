//! Data-driven tests of the grammar, the interpreter and the needed-events pass.

use std::collections::HashMap;

use tmetric_expr::{Env, Facts, Ident, eval, needed, parse};
use tmetric_model::Literal;

/// Parses and prints back fully parenthesised.
#[track_caller]
fn shape(text: &str, expect: &str) {
    let expr = parse(text).unwrap_or_else(|err| panic!("`{text}` did not parse:\n{err}"));
    assert_eq!(expr.to_string(), expect, "shape of `{text}`");
    // The printed form must parse back to the same tree, modulo spans.
    let again = parse(&expr.to_string()).unwrap();
    assert_eq!(again.to_string(), expect);
}

#[test]
fn precedence_and_associativity_follow_expr_y() {
    shape("a + b * c", "(a + (b * c))");
    shape("a - b - c", "((a - b) - c)");
    shape("8 / 2 / 2", "((8.0 / 2.0) / 2.0)");
    shape("a < b < c", "((a < b) < c)");
    shape("-a * b", "(-(a) * b)");
    shape("-a + b", "(-(a) + b)");
    shape("a | b & c", "(a | (b & c))");
    shape("a ^ b | c", "((a ^ b) | c)");
    shape("a & b > c", "(a & (b > c))");
    shape("a > b + c", "(a > (b + c))");
    shape("a % b * c", "((a % b) * c)");
    shape("1 + 2 if 0 else 3 + 4", "(((1.0 + 2.0)) if 0.0 else ((3.0 + 4.0)))");
    shape("a if b else c if d else e", "((a) if b else (((c) if d else (e))))");
    shape("min((a if b else c), d)", "min(((a) if b else (c)), d)");
    shape("d_ratio(x, y) + max(1, 2)", "(d_ratio(x, y) + max(1.0, 2.0))");
}

#[test]
fn lexing_matches_flex_longest_match() {
    // Hex and upper-case exponents are identifiers; `1e+3` is `1e + 3`.
    shape("0x10", "0x10");
    shape("1E3", "1E3");
    shape("1e+3", "(1e + 3.0)");
    shape("1e-3", "0.001");
    shape("1.", "1.0");
    shape(".5", "0.5");
    shape("12abc", "12abc");
    // Keywords only match whole tokens.
    shape("maxx + iff", "(maxx + iff)");
    shape("a\\-b + c\\,d\\=1@", "(a\\-b + c\\,d\\=1@)");
    shape(
        "cpu@UOPS_EXECUTED.THREAD\\,cmask\\=1@ / 2",
        "(cpu@UOPS_EXECUTED.THREAD\\,cmask\\=1@ / 2.0)",
    );
}

#[track_caller]
fn parse_error(text: &str, expect: &str) {
    let err = parse(text).expect_err(text);
    assert_eq!(err.to_string(), expect, "error for `{text}`");
}

#[test]
fn errors_point_at_the_spot() {
    parse_error(
        "INST_RETIRED.ANY / / clks",
        "expected `(`, `-`, a `#literal`, a function call, a number or an event or metric name, found `/`\n    INST_RETIRED.ANY / / clks\n                       ^",
    );
    parse_error(
        "min(a if b else c, d)",
        "expected `,` or an operator, found `if`\n    min(a if b else c, d)\n          ^^",
    );
    parse_error(
        "a == b",
        "unexpected character `=` (U+003D); expressions use ASCII names, numbers, operators and brackets\n    a == b\n      ^",
    );
    // Inside `pmu@event\,terms@` an unescaped `=` is part of the name (jevents.py reads it
    // so, and perf 7.x's hybrid files write `msr@tsc\,cpu=cpu_core@`); nowhere else.
    let expr = parse("cpu_core@CPU_CLK_UNHALTED.REF_TSC@ / msr@tsc\\,cpu=cpu_core@").unwrap();
    let names: Vec<&str> = expr.idents().iter().map(|id| id.name.as_str()).collect();
    assert_eq!(names, ["cpu_core@CPU_CLK_UNHALTED.REF_TSC@", "msr@tsc,cpu=cpu_core@"]);
    // perf 7.x's generated server metrics give an event several terms, unescaped: jevents.py
    // joins the pieces its first pass broke at each comma that a letter follows, and the
    // span ends at its closing `@`; a comma after that `@` still separates arguments.
    let expr = parse(
        "d_ratio(UNC_M2M_DIRECTORY_HIT.DIRTY_I@umask=0xFF,name=UNC_M2M_DIRECTORY_HIT.ANY@, \
         C@filter_opc0=0x202,filter_loc,filter_not_nm@ + max(msr@tsc@,duration_time))",
    )
    .unwrap();
    let names: Vec<&str> = expr.idents().iter().map(|id| id.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "UNC_M2M_DIRECTORY_HIT.DIRTY_I@umask=0xFF,name=UNC_M2M_DIRECTORY_HIT.ANY@",
            "C@filter_opc0=0x202,filter_loc,filter_not_nm@",
            "msr@tsc@",
            "duration_time",
        ]
    );
    // A comma a letter does not follow is not one jevents.py joins.
    parse_error(
        "a@b,1@",
        "expected `if`, an operator or end of expression, found `,`\n    a@b,1@\n       ^",
    );
    parse_error(
        "a@b = c",
        "unexpected character `=` (U+003D); expressions use ASCII names, numbers, operators and brackets\n    a@b = c\n        ^",
    );
    parse_error(
        "(a + b",
        "expected `)`, `if` or an operator, found end of expression\n    (a + b\n          ^",
    );
    parse_error("1e999", "number `1e999` is out of the range of a double\n    1e999\n    ^^^^^");
    parse_error("", "expected an expression, found end of expression\n    \n    ^");
}

/// A test environment: event values by name, literals by name.
#[derive(Default)]
struct Vals {
    ids: HashMap<String, f64>,
    lits: HashMap<String, f64>,
    /// `aggr_nr()` by name: the counters summed into each value.
    nrs: HashMap<String, f64>,
}

impl Env for Vals {
    fn id(&mut self, id: &Ident) -> f64 {
        self.ids.get(&id.name).copied().unwrap_or(f64::NAN)
    }
    fn literal(&mut self, literal: Literal) -> Option<f64> {
        self.lits.get(literal.name()).copied()
    }
    fn source_count(&mut self, id: &Ident) -> f64 {
        if self.ids.contains_key(&id.name) { 1.0 } else { 0.0 }
    }
    fn aggr_nr(&mut self, id: &Ident) -> f64 {
        self.nrs.get(&id.name).copied().unwrap_or(f64::NAN)
    }
    fn has_event(&mut self, id: &Ident) -> bool {
        self.ids.contains_key(&id.name)
    }
    fn cpuid_match(&mut self, _: &Ident) -> f64 {
        f64::NAN
    }
}

impl Facts for Vals {
    fn literal(&self, literal: Literal) -> Option<f64> {
        self.lits.get(literal.name()).copied()
    }
    fn has_event(&self, id: &Ident) -> bool {
        self.ids.contains_key(&id.name)
    }
    fn cpuid_match(&self, _: &Ident) -> f64 {
        1.0
    }
}

fn vals(ids: &[(&str, f64)], lits: &[(&str, f64)]) -> Vals {
    Vals {
        ids: ids.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        lits: lits.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        nrs: HashMap::new(),
    }
}

/// Evaluation vectors for util/expr.y's rules and `expr__get_literal`: (expression, expected value; NaN as f64::NAN).
const EVAL: &[(&str, f64)] = &[
    ("1 + 2 * 3", 7.0),
    ("8 / 2 / 2", 2.0),
    ("-2 * 3 + 1", -5.0),
    ("x / 0", f64::NAN),
    ("x / -0", f64::NAN),
    ("x / (1 - 1)", f64::NAN),
    ("d_ratio(x, 0)", 0.0),
    ("d_ratio(x, y)", 0.5),
    ("d_ratio(nan_ev, 0)", 0.0),
    ("7 % 3", 1.0),
    ("-7 % 3", -1.0),
    ("7.9 % 3.9", 1.0),
    ("min(NaN, 1)", 1.0),
    ("min(1, NaN)", f64::NAN),
    ("max(NaN, 1)", 1.0),
    ("max(1, NaN)", f64::NAN),
    ("min(x, y)", 1.0),
    ("max(x, y)", 2.0),
    ("1 if NaN else 2", 1.0),
    ("1 if 0 else 2", 2.0),
    ("1 if -0 else 2", 2.0),
    ("1 if 0.0001 else 2", 1.0),
    ("1 + 2 if 0 else 3 + 4", 7.0),
    ("NaN < 1", f64::NAN),
    ("1 < NaN", f64::NAN),
    ("1 < 2", 1.0),
    ("2 > 1", 1.0),
    ("2 > 2", 0.0),
    ("0 | NaN", f64::NAN),
    ("NaN | 0", f64::NAN),
    ("1 | NaN", 1.0),
    ("2 | 0", 1.0),
    ("0 | 0", 0.0),
    ("NaN | NaN", f64::NAN),
    ("1 & NaN", f64::NAN),
    ("0 & NaN", 0.0),
    ("NaN & 0", 0.0),
    ("3 & 2", 1.0),
    ("3 & 0", 0.0),
    ("1 ^ 1", 0.0),
    ("1 ^ 0", 1.0),
    ("1 ^ NaN", f64::NAN),
    ("nan_ev * 0", f64::NAN),
    ("x + nan_ev", f64::NAN),
    ("#smt_on", 1.0),
    ("#SMT_on + #SYSTEM_TSC_FREQ", 1e9 + 1.0),
    ("has_event(x)", 1.0),
    ("has_event(nan_ev)", 0.0),
    ("x if has_event(nan_ev) else 5", 5.0),
    ("source_count(x)", 1.0),
    // perf 7.x's `aggr_nr`: x summed 60 counters, y's were not given (NaN, as perf's
    // unknown id)
    ("aggr_nr(x)", 60.0),
    ("aggr_nr(y)", f64::NAN),
    ("aggr_nr(x) / y", 30.0),
];

#[test]
fn evaluation_follows_perf() {
    let mut env =
        vals(&[("x", 1.0), ("y", 2.0), ("a-b", 4.0)], &[("smt_on", 1.0), ("system_tsc_freq", 1e9)]);
    env.nrs.insert("x".into(), 60.0);
    let mut failures = Vec::new();
    for (text, expect) in EVAL {
        let expr = parse(text).unwrap_or_else(|err| panic!("`{text}`: {err}"));
        let got = eval(&expr, &mut env).unwrap_or_else(|err| panic!("`{text}`: {err}"));
        let same = got.to_bits() == expect.to_bits() || (got.is_nan() && expect.is_nan());
        if !same {
            failures.push(format!("`{text}`: expected {expect}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn evaluation_failures() {
    let mut env = vals(&[("x", 1.0)], &[("smt_on", 1.0)]);
    for text in ["x % 0", "1 if 1 else x % 0", "#nonsense + 1", "5 % 0.5"] {
        let expr = parse(text).unwrap();
        assert!(eval(&expr, &mut env).is_err(), "`{text}` should fail");
    }
    // Literal names are case-sensitive except smt_on and system_tsc_freq, whose case folding
    // happens in the literal table, not here.
    assert!(tmetric_model::Literal::from_name("NUM_CPUS").is_none());
    assert!(tmetric_model::Literal::from_name("SMT_ON").is_some());
}

/// Needed-events vectors for `expr__find_ids`: (expression, literals, expected ids in order).
#[track_caller]
fn needs(text: &str, smt_on: f64, expect: &[&str]) {
    let expr = parse(text).unwrap();
    let facts = vals(&[("present", 1.0)], &[("smt_on", smt_on), ("core_wide", 1.0)]);
    let got = needed(&expr, &facts).unwrap();
    let names: Vec<&str> = got.ids.clone();
    assert_eq!(names, expect, "needed events of `{text}` with smt_on={smt_on}");
}

#[test]
fn needed_events_fold_like_perf() {
    needs("a + b * 0", 1.0, &["a", "b"]);
    needs("a / 0", 1.0, &[]);
    needs("d_ratio(a, 0)", 1.0, &[]);
    needs("d_ratio(a, b)", 1.0, &["a", "b"]);
    needs("a if #smt_on else b", 1.0, &["a"]);
    needs("a if #smt_on else b", 0.0, &["b"]);
    needs("a if c else b", 0.0, &["a", "c", "b"]);
    needs("1 if c else 1", 1.0, &[]);
    needs("0 & a > 0", 1.0, &[]);
    needs("1 & a", 1.0, &["a"]);
    needs("1 | a", 1.0, &[]);
    needs("0 | a", 1.0, &["a"]);
    needs("a | 1", 1.0, &[]);
    needs("A if min(0, 0) else B", 1.0, &["A", "B"]);
    needs("x if has_event(present) else 0", 1.0, &["x"]);
    needs("x if has_event(absent) else 0", 1.0, &[]);
    needs("source_count(a) + a", 1.0, &["a"]);
    // `aggr_nr`'s argument is an event the metric opens, as perf's `handle_id` adds it.
    needs("b / aggr_nr(a)", 1.0, &["b", "a"]);
    needs("a + a + -a", 1.0, &["a"]);
    needs("NaN if #smt_on else a", 1.0, &[]);
}

#[test]
fn remainder_by_constant_zero_breaks_the_metric_in_the_events_pass() {
    let expr = parse("a % 0").unwrap();
    assert!(needed(&expr, &vals(&[], &[])).is_err());
}

#[test]
fn runtime_parameter_is_substituted() {
    let expr = parse("hv_24x7@PM_PB_CYC\\,chip\\=?@ / 2").unwrap();
    let inst = expr.with_runtime_param(3);
    assert_eq!(inst.idents()[0].name, "hv_24x7@PM_PB_CYC,chip=3@");
}

/// perf skips characters that start no token; tmetric reports them at their column.
#[test]
fn unexpected_characters_are_errors_at_their_column() {
    parse_error(
        "aé",
        "unexpected character `é` (U+00E9); expressions use ASCII names, numbers, operators and brackets\n    aé\n     ^",
    );
    parse_error(
        "x€ + 1",
        "unexpected character `€` (U+20AC); expressions use ASCII names, numbers, operators and brackets\n    x€ + 1\n     ^",
    );
    let err = parse("a + \u{1}b").unwrap_err();
    assert_eq!(err.span.start, 4);
    assert!(err.message().starts_with("unexpected character `\\u{1}` (U+0001)"), "{err}");
    assert!(parse("a >= b").is_err());
    // Whitespace of every kind the vendor JSON uses is still skipped.
    shape(" a\t+\r\nb ", "(a + b)");
}

#[test]
fn unknown_functions_are_named() {
    parse_error(
        "foo(1,2)",
        "unknown function `foo`; the functions are d_ratio, min, max, source_count, aggr_nr, has_event and strcmp_cpuid_str\n    foo(1,2)\n    ^^^",
    );
    let err = parse("a + INST.ANY (b)").unwrap_err();
    assert!(err.message().starts_with("unknown function `INST.ANY`"), "{err}");
    // A number before `(` is a missing operator, not a call.
    assert!(parse("2(3)").unwrap_err().message().starts_with("expected"));
}

/// Deep nesting is a caret error, never a stack overflow; the limit itself still parses,
/// evaluates and prints (on a test thread's 2 MiB stack).
#[test]
fn nesting_is_bounded() {
    use tmetric_expr::{MAX_DEPTH, MAX_NESTING, ParseErrorKind};
    let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    let err = parse(&deep).unwrap_err();
    assert_eq!(err.kind, ParseErrorKind::TooDeep { limit: MAX_NESTING });
    assert_eq!(err.span.start as usize, MAX_NESTING);
    assert!(err.to_string().contains("more than 100 deep"), "{err}");
    let calls = format!("{}1{}", "min(1,".repeat(10_000), ")".repeat(10_000));
    assert_eq!(parse(&calls).unwrap_err().kind, ParseErrorKind::TooDeep { limit: MAX_NESTING });
    let minus = format!("{}1", "-".repeat(100_000));
    assert_eq!(parse(&minus).unwrap_err().kind, ParseErrorKind::TooDeep { limit: MAX_NESTING });
    let ifs = "1 if 1 else ".repeat(1000) + "1";
    assert_eq!(parse(&ifs).unwrap_err().kind, ParseErrorKind::TooDeep { limit: MAX_NESTING });
    let chain = vec!["a"; 200_000].join(" + ");
    assert_eq!(parse(&chain).unwrap_err().kind, ParseErrorKind::TooLong { limit: MAX_DEPTH });

    // Right at the limits: parses and every recursive pass runs.
    let at_limit = format!("{}x{}", "min(1,".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
    let expr = parse(&at_limit).unwrap();
    assert_eq!(eval(&expr, &mut vals(&[("x", 0.5)], &[])).unwrap(), 0.5);
    assert_eq!(needed(&expr, &vals(&[], &[])).unwrap().ids.len(), 1);
    assert!(expr.to_string().starts_with("min(1.0, min("));
    let long = vec!["x"; MAX_DEPTH - 1].join(" + ");
    let expr = parse(&long).unwrap();
    assert_eq!(eval(&expr, &mut vals(&[("x", 1.0)], &[])).unwrap(), (MAX_DEPTH - 1) as f64);
    // Closed brackets do not add up: many shallow groups in a row are fine.
    let wide = vec!["((x))"; 5000].join(" * ");
    assert!(parse(&wide).is_err_and(|e| e.kind == ParseErrorKind::TooLong { limit: MAX_DEPTH }));
    let wide = vec!["((x))"; 500].join(" * ");
    assert!(parse(&wide).is_ok());
}

/// A huge token is quoted cut short, never echoed whole.
#[test]
fn huge_input_is_not_echoed_whole() {
    let text = format!("a + {}(", "b".repeat(10_000_000));
    let message = parse(&text).unwrap_err().to_string();
    assert!(message.len() < 1000, "{} bytes", message.len());
    assert!(message.contains("(10000000 bytes)"), "{}", &message[..200]);
}
