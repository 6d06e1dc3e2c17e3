//! Fuzzing the ftrace text reader with proptest, on the stable toolchain: random bytes, and
//! trace-like token soup around real event lines, read with the default selection and with a
//! user selection, then rendered in every format. Nothing may panic, every sample must come
//! from a line that was read, and no note may echo a huge field whole.
//!
//! CI runs a short pass; `FUZZ_CASES=N` sets the cases per property for a long run.
//! Shrunk failures are kept in `tests/fuzz.proptest-regressions` and replayed first.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tmetric_latency::{Options, Report, analyze, write_csv, write_json, write_notes, write_table};

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

fn read(input: &[u8], opts: Options) -> Report {
    let report = analyze(input, opts, "fuzz").expect("reading memory never fails");
    let lines = input.split(|&b| b == b'\n').count() as u64;
    assert!(report.lines <= lines, "{} lines read of {lines}", report.lines);
    let counted: u64 = report.rows.iter().map(|r| r.stats.count).sum();
    assert_eq!(counted, report.samples);
    assert!(report.malformed_count >= report.malformed.len() as u64);
    report
}

fn render(report: &Report) {
    let mut out = Vec::new();
    write_table(report, &mut out).unwrap();
    write_csv(report, &mut out).unwrap();
    write_json(report, &mut out).unwrap();
    let mut notes = Vec::new();
    write_notes(report, &mut notes).unwrap();
    // Notes quote lines cut short: a few hundred bytes per listed line at most.
    assert!(notes.len() < 2000 + 600 * report.malformed.len() + 200 * report.noise.len());
}

fn exercise(input: &[u8]) {
    render(&read(input, Options::xsave_default()));
    let custom = Options::new("^sched_", "prev_pid", &["prev_state".to_string()]).unwrap();
    render(&read(input, custom));
}

const PIECES: &[&str] = &[
    "  bash-1234  [003] d..1. ",
    "<idle>-0     [001] ",
    "kworker/u8:2-99 [000] ",
    "100.000001: ",
    "12345678: ",
    "1.: ",
    "x86_fpu_latency_xsave: ",
    "x86_fpu_latency_xrstor: ",
    "sched_switch: ",
    "x86/fpu: ",
    "latency:5 ",
    "latency:18446744073709551616 ",
    "latency=-1 ",
    "latency:0x10 ",
    "RFBM:0x3 ",
    "RFBM=0x7 ",
    "XINUSE:0x1 ",
    "prev_pid=12 ",
    "prev_state=S ",
    "CPU:3 [LOST 12 EVENTS]",
    "CPU:1 [7 EVENTS DROPPED]",
    "# tracer: nop",
    "cpus=4",
    "\n",
    "\r\n",
    ":",
    "=",
    " ",
    "é",
    "\u{0}",
];

fn soup() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(PIECES), 0..120)
        .prop_map(|v| v.concat().into_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes(input in prop::collection::vec(any::<u8>(), 0..400)) {
        exercise(&input);
    }

    #[test]
    fn trace_soup(input in soup()) {
        exercise(&input);
    }

    /// A valid line with one field blown up to a random size.
    #[test]
    fn oversized_fields(size in 0usize..200_000, which in 0usize..3) {
        let big = "7".repeat(size);
        let (lat, rfbm, xin) = match which {
            0 => (big.as_str(), "0x3", "0x1"),
            1 => ("5", big.as_str(), "0x1"),
            _ => ("5", "0x3", big.as_str()),
        };
        let line = format!("  a-1 [000] .... 1.000001: x86_fpu_latency_xsave: x86/fpu: latency:{lat} RFBM:{rfbm} XINUSE:{xin}\n");
        exercise(line.as_bytes());
    }
}

/// Inputs that failed once: a 10 MB group value became a 50 MB table row. A line is now at
/// most `MAX_LINE` bytes a longer one ends the reading with an error naming
/// the line, and a group value just under the limit is still malformed and shown cut short.
#[test]
fn regressions() {
    let line = |value: usize| {
        format!(
            "  a-1 [000] .... 1.000001: x86_fpu_latency_xsave: x86/fpu: latency:5 RFBM:{} XINUSE:0x1\n",
            "x".repeat(value)
        )
    };
    let report = read(line(tmetric_latency::MAX_LINE - 200).as_bytes(), Options::xsave_default());
    assert_eq!((report.samples, report.malformed_count), (0, 1));
    render(&report);
    let long = format!("{}{}", line(10), line(10_000_000));
    match analyze(long.as_bytes(), Options::xsave_default(), "big.txt") {
        Err(tmetric_latency::LatencyError::LineTooLong { path, line: 2, limit }) => {
            assert_eq!((path.as_str(), limit), ("big.txt", tmetric_latency::MAX_LINE));
        }
        other => panic!("{:?}", other.map(|r| r.lines)),
    }
}
