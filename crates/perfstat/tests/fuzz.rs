//! No input makes the importer panic: random text, random bytes, perf-like token soup, and
//! truncated or mutated fixtures, read with detection and with each forced layout. Whatever
//! is read is then looked up in every way the caller can.
use crate::common::{fixtures, read};
use proptest::prelude::*;
use std::sync::OnceLock;
use tmetric_perfstat::{EventKey, ImportError, Layout, PerfLog, parse, parse_bytes, parse_with};

fn all_fixtures() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        ["real", "hand", "seed004", "kept"]
            .iter()
            .flat_map(|d| fixtures(d))
            .map(|n| read(&n))
            .collect()
    })
}

/// Everything a caller may do with a log, so that it runs on odd logs too.
fn exercise(log: &PerfLog, input: &str) {
    let lines = input.split('\n').count();
    let _ = (
        log.core_pmus(),
        log.is_hybrid(),
        log.command(),
        log.elapsed_seconds(),
        log.printed_metric_names(),
    );
    for block in &log.blocks {
        let _ = block.label();
        for row in &block.rows {
            assert!(row.line >= 1 && row.line <= lines, "row line {} of {lines}", row.line);
            let _ = EventKey::from_perf(&row.event).to_string();
            let printed_metric = row.metrics.first().map(|m| m.name.clone());
            for pmu in [None, Some("cpu_core"), Some("cpu_atom")] {
                let _ = block.lookup_key(&row.key, printed_metric.as_deref(), pmu).perf_value();
                let _ = block.lookup_on_pmu(&row.event, None, pmu);
            }
        }
        for id in [
            "duration_time",
            "user_time",
            "system_time",
            "TSC",
            "cpu_core@X@R",
            "@",
            "\\",
            ":R",
            "",
        ] {
            let _ = block.lookup(id, Some("tma_x"));
        }
    }
}

fn run_all_layouts(input: &str) {
    if let Ok(log) = parse(input, "fuzz") {
        exercise(&log, input);
    }
    for layout in [Layout::Std, Layout::Json, Layout::Csv(",".into()), Layout::Csv(";".into())] {
        if let Ok(log) = parse_with(input, "fuzz", Some(layout)) {
            exercise(&log, input);
        }
    }
}

const PIECES: &[&str] = &[
    "1,234",
    "12",
    "0.00",
    "1.001234567",
    "<not counted>",
    "<not supported>",
    "<not",
    "cycles",
    "msec",
    "ns",
    "task-clock",
    "cpu_core/TOPDOWN.SLOTS/",
    "cpu/X,cmask=1/",
    "X:R",
    "cpu_core/X/R",
    "X:p 0 0",
    "TSC",
    "msr/tsc/",
    "duration_time",
    "#",
    "# 0.6 % tma_x",
    "nan",
    "(50.00%)",
    "( +- 1.2% )",
    "CPU0",
    "S0-D0-C0 2",
    "S0",
    "N0",
    "comm-12",
    "seconds time elapsed",
    "seconds user",
    "+-",
    "Performance counter stats for 'x' (3 runs):",
    ",",
    ";",
    ",,",
    "{",
    "}",
    "\"counter-value\" : \"1.0\"",
    "\"event\" : \"cycles\"",
    "\"interval\" : 1.5",
    "\"cpu\" : \"0\"",
    "\"metric-value\" : nan",
    "\"metric-unit\" : \"%  tma_x\"",
    ": ",
    ", ",
    " ",
    "   ",
    "\n",
    "\r\n",
    "\t",
    "-",
    "'",
    "é",
    "\u{202f}",
    "TopdownL1 (cpu_core)",
    "[ perf record: x ]",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..60).prop_map(|v| v.concat())
}

/// Cases per property: `FUZZ_CASES` (or `PROPTEST_CASES`) for a long run, else 256 for CI.
fn cases() -> u32 {
    ["FUZZ_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(256)
}

proptest! {
    // Shrunk failures are kept in `tests/fuzz.proptest-regressions` and replayed first.
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]
    #[test]
    fn random_text_never_panics(input in "\\PC{0,200}") {
        run_all_layouts(&input);
    }

    #[test]
    fn random_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(log) = parse_bytes(&input, "fuzz") {
            exercise(&log, &String::from_utf8_lossy(&input));
        }
    }

    #[test]
    fn perf_like_soup_never_panics(input in soup()) {
        run_all_layouts(&input);
    }

    #[test]
    fn mutated_fixtures_never_panic(
        pick in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        insert in prop::sample::select(PIECES),
        delete in 0usize..8,
    ) {
        let texts = all_fixtures();
        let text = pick.get(texts);
        let boundaries: Vec<usize> = (0..=text.len()).filter(|&b| text.is_char_boundary(b)).collect();
        let end = *cut.get(&boundaries);
        let mut mutated = text[..end].to_string();
        let spot = *at.get(&boundaries.iter().copied().filter(|&b| b <= end).collect::<Vec<_>>());
        let stop = (spot..=end).filter(|&b| mutated.is_char_boundary(b)).take(delete + 1).last().unwrap_or(spot);
        mutated.replace_range(spot..stop, insert);
        run_all_layouts(&mutated);
    }
}

#[test]
fn fixtures_cut_at_any_line_end_read_or_say_not_perf_stat() {
    for text in all_fixtures() {
        let text = text.as_str();
        let mut end = 0;
        for line in text.split_inclusive('\n') {
            end += line.len();
            let prefix = &text[..end];
            match parse(prefix, "cut") {
                Ok(log) => exercise(&log, prefix),
                Err(ImportError::NotPerfStat { .. }) => {}
                Err(other) => panic!("complete lines must read: {other}\n--- input:\n{prefix}"),
            }
            // Cut in the middle of the line: an error is fine, a panic is not.
            let middle =
                (end - line.len() / 2..=end).find(|&b| text.is_char_boundary(b)).unwrap_or(end);
            run_all_layouts(&text[..middle]);
        }
    }
}

/// Inputs that once got through: a negative run share and a negative count reached metrics
/// as negative rates. They are now skipped with a warning naming the line.
#[test]
fn regressions() {
    let log = "\n Performance counter stats for 'true':\n\n\
               \x20             100      page-faults                      (-3.00%)\n\
               \x20             -50      context-switches\n\
               \x20             1.00 msec task-clock\n\n\
               \x20      0.002000000 seconds time elapsed\n";
    let parsed = parse(log, "regression").unwrap();
    let rows: Vec<&str> =
        parsed.blocks.iter().flat_map(|b| b.rows.iter().map(|r| r.event.as_str())).collect();
    assert_eq!(rows, ["task-clock"]);
    let lines: Vec<usize> = parsed.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [4, 5]);
}
