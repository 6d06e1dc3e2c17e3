//! Built-in metric vectors: every case of `tests/vectors/builtin/*.toml` runs one entry of
//! `tmetric_engine::builtin::BUILTINS` (the table behind perf's `insn per cycle`, `GHz` and
//! miss ratios in `stat`, `report` and `eval --from-perf`) on the case's inputs and checks
//! the value, format, colour and label perf prints. Every mismatch is collected and reported
//! by file and case name; the test fails once.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use tmetric_engine::builtin::{Builtin, NoValue};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    case: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    source: String,
    /// tmetric's name of the built-in.
    builtin: String,
    /// Input values by the table's input names; an input left out has no row.
    inputs: BTreeMap<String, f64>,
    value: Option<f64>,
    /// perf prints the label with no value.
    #[serde(default)]
    blank: bool,
    /// `false`: perf prints no line.
    #[serde(default = "yes")]
    shown: bool,
    /// perf's printf format, `%<width>.<decimals>f` and its suffix.
    fmt: Option<String>,
    /// `red`, `magenta`, `yellow` or `normal`.
    colour: Option<String>,
    label: Option<String>,
}

fn yes() -> bool {
    true
}

fn colour_name(thresholds: Option<[f64; 3]>, value: f64) -> &'static str {
    match thresholds {
        None => "none",
        Some(t) if value > t[0] => "red",
        Some(t) if value > t[1] => "magenta",
        Some(t) if value > t[2] => "yellow",
        Some(_) => "normal",
    }
}

fn check(case: &Case, b: &Builtin, at: &str, failures: &mut Vec<String>) {
    let got = b.compute(&mut |input| case.inputs.get(input).copied());
    match (&got, case.value, case.blank, case.shown) {
        (Ok(v), Some(want), false, true) if (v - want).abs() <= 1e-9 * want.abs().max(1.0) => {}
        (Err(NoValue::Blank(_)), None, true, true) => {}
        (Err(NoValue::NotShown), None, false, false) => {}
        _ => failures.push(format!(
            "{at}: got {got:?}; want value {:?}, blank {}, shown {}",
            case.value, case.blank, case.shown
        )),
    }
    if let Some(fmt) = &case.fmt {
        let printf = format!("%{}.{}f{}", b.fmt.width, b.fmt.decimals, b.fmt.suffix);
        if &printf != fmt {
            failures.push(format!("{at}: format {printf}, want {fmt}"));
        }
    }
    if let (Some(want), Ok(v)) = (&case.colour, &got) {
        let colour = colour_name(b.colour, *v);
        if colour != want {
            failures.push(format!("{at}: colour {colour}, want {want}"));
        }
    }
    if let Some(label) = &case.label
        && label != b.label
    {
        failures.push(format!("{at}: label {:?}, want {label:?}", b.label));
    }
}

#[test]
fn builtin_vectors_match_perf() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/builtin");
    let mut failures = Vec::new();
    let mut ran = 0;
    for (file_name, file) in crate::vector_files::load::<File>(&dir, &mut failures) {
        let mut seen = Vec::new();
        for case in &file.case {
            let at = crate::vector_files::label(
                &file_name,
                &case.name,
                &case.source,
                &mut seen,
                &mut failures,
            );
            match Builtin::named(&case.builtin) {
                Some(b) => check(case, b, &at, &mut failures),
                None => failures.push(format!("{at}: no built-in named {}", case.builtin)),
            }
            ran += 1;
        }
    }
    assert!(ran >= 16, "only {ran} cases ran");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}
