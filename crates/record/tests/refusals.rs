//! The kernel's refusals in record files: kept as data (`{cpu, errno, why}`), and files
//! written before, which kept them as text, still read as the same refusals.

use tmetric_engine::Refusal;
use tmetric_record::read_jsonl;

const WHY: &str = "EINVAL: a topdown metric event is counted only in a group led by `slots` (write `{slots,topdown-retiring}`), without exclude modifiers";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/record/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
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
