//! The kernel's refusals in record files: kept as data (`{cpu, errno, why}`), and files
//! written before, which kept them as text, still read as the same refusals (JSON lines and
//! perf.data alike).

use tmetric_engine::Refusal;
use tmetric_record::{Input, open, read_jsonl};

const WHY: &str = "EINVAL: a topdown metric event is counted only in a group led by `slots` (write `{slots,topdown-retiring}`), without exclude modifiers";

fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = format!("{}/../../tests/data/record/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fixture(name: &str) -> String {
    String::from_utf8(fixture_bytes(name)).expect("UTF-8")
}

/// `refused-text.jsonl` was written by tmetric before refusals were data: `record --format
/// jsonl --pmu-sim sapphirerapids -a -e topdown-retiring,cycles`, whose lone topdown event
/// the simulated kernel refuses with EINVAL on CPU 0.
#[test]
fn a_file_with_refusals_as_text_reads_them_as_data() {
    let text = fixture("refused-text.jsonl");
    let old = format!(" (on CPU 0): {WHY}");
    assert!(text.lines().next().unwrap().contains(&serde_json::to_string(&old).unwrap()));
    let rec = read_jsonl("refused-text.jsonl", std::io::Cursor::new(&text)).unwrap();
    let refusal = Refusal { cpu: Some(0), errno: 22, why: WHY.to_string() };
    assert_eq!(rec.header.failures, vec![Some(refusal.clone()), None]);
    // Printed exactly as the text was.
    assert_eq!(refusal.to_string(), old);
    // Written again, it is data, and reads back the same.
    let header = serde_json::to_value(&rec.header).unwrap();
    assert_eq!(header["failures"][0], serde_json::json!({"cpu": 0, "errno": 22, "why": WHY}));
    let rest: Vec<&str> = text.lines().skip(1).collect();
    let again = format!("{header}\n{}\n", rest.join("\n"));
    let rec = read_jsonl("typed.jsonl", std::io::Cursor::new(again)).unwrap();
    assert_eq!(rec.header.failures[0], Some(refusal));
}

#[test]
fn refusal_text_of_a_task_counter_and_unknown_errnos() {
    let task = Refusal::from_text(": ENOENT: the kernel or the PMU does not implement this event");
    assert_eq!(task.cpu, None);
    assert_eq!(task.errno, 2);
    assert_eq!(task.why, "ENOENT: the kernel or the PMU does not implement this event");
    assert_eq!(task.to_string(), ": ENOENT: the kernel or the PMU does not implement this event");
    // `Errno::name` spells an errno it has no name for `errno N`.
    let odd = Refusal::from_text(" (on CPU 7): errno 121: Remote I/O error");
    assert_eq!((odd.cpu, odd.errno), (Some(7), 121));
    assert_eq!(odd.to_string(), " (on CPU 7): errno 121: Remote I/O error");
    // Text that is neither form (a damaged file) is kept, its errno unknown.
    let damaged = Refusal::from_text("gibberish");
    assert_eq!((damaged.cpu, damaged.errno, damaged.why.as_str()), (None, 0, "gibberish"));
}

#[test]
fn a_refusal_that_is_neither_text_nor_data_is_a_bad_header() {
    let text = fixture("refused-text.jsonl");
    let old = serde_json::to_string(&format!(" (on CPU 0): {WHY}")).unwrap();
    let bad = text.replacen(&old, r#"{"cpu":0,"errno":22}"#, 1);
    let err = read_jsonl("bad.jsonl", std::io::Cursor::new(bad)).unwrap_err();
    assert!(err.to_string().starts_with("bad.jsonl:1: a bad header: "), "{err}");
}

/// `refused-text.data`: the same run in perf.data (`record --pmu-sim sapphirerapids -a -e
/// topdown-retiring,cycles`), written by the build before refusals were data; tmetric's
/// extras inside hold the same header.
#[test]
fn a_perf_data_file_with_refusals_as_text_reads_them_as_data() {
    let bytes = fixture_bytes("refused-text.data");
    let old = serde_json::to_string(&format!(" (on CPU 0): {WHY}")).unwrap();
    assert!(bytes.windows(old.len()).any(|w| w == old.as_bytes()), "the text form is inside");
    let Input::Record(rec) = open("refused-text.data", &bytes).unwrap() else {
        panic!("tmetric's perf.data is a record")
    };
    let refusal = Refusal { cpu: Some(0), errno: 22, why: WHY.to_string() };
    assert_eq!(rec.header.failures, vec![Some(refusal), None]);
}
