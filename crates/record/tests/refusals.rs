//! The kernel's refusals in record files, of events and of groups: kept as data (`{cpu,
//! errno, why}`, [`RefusedGroup`]), and files written before, which kept them as text, still
//! read as the same refusals (JSON lines and perf.data alike).

use tmetric_engine::{Refusal, RefusedGroup, Reopened};
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

/// `split-text.jsonl` was written by tmetric before refused groups were data: `record --format
/// jsonl --pmu-sim sapphirerapids -a -e '{topdown-retiring,slots,topdown-bad-spec,9 GP
/// events}' -e '{cycles,...}'`, whose first group the simulated kernel refuses (EINVAL: 8 GP
/// counters) and the runtime splits, keeping the topdown events behind `slots`.
#[test]
fn a_file_with_refused_groups_as_text_reads_them_as_data() {
    let text = fixture("split-text.jsonl");
    let header: serde_json::Value =
        serde_json::from_str(text.lines().next().unwrap()).expect("a JSON header");
    let old = header["splits"][0].as_str().expect("the text form").to_string();
    let rec = read_jsonl("split-text.jsonl", std::io::Cursor::new(&text)).unwrap();
    let [group] = &rec.header.splits[..] else { panic!("{:?}", rec.header.splits) };
    let pmu = |e: &str| format!("cpu/event={e}/");
    let alone: Vec<String> = [
        "0xd1,umask=0x1",
        "0xd1,umask=0x2",
        "0xd1,umask=0x4",
        "0xd1,umask=0x8",
        "0xd1,umask=0x10",
        "0xd1,umask=0x20",
        "0xc4,umask=0x0",
        "0xc5,umask=0x0",
        "0xc2,umask=0x2",
    ]
    .iter()
    .map(|e| pmu(e))
    .collect();
    let kept: Vec<String> =
        ["slots", "topdown-retiring", "topdown-bad-spec"].map(String::from).into();
    let events: Vec<String> = kept.iter().chain(&alone).cloned().collect();
    let want = RefusedGroup {
        events,
        errno: 22,
        reopened: Reopened::Split { kept, alone },
        multiplexed: Vec::new(),
    };
    assert_eq!(group, &want);
    // Printed exactly as the text was.
    assert_eq!(group.to_string(), old);
    // Written again, it is data, and reads back the same.
    let header = serde_json::to_value(&rec.header).unwrap();
    assert_eq!(header["splits"][0]["errno"], 22);
    assert_eq!(header["splits"][0]["reopened"]["split"]["kept"][0], "slots");
    let rest: Vec<&str> = text.lines().skip(1).collect();
    let again = format!("{header}\n{}\n", rest.join("\n"));
    let rec = read_jsonl("typed.jsonl", std::io::Cursor::new(again)).unwrap();
    assert_eq!(rec.header.splits, vec![want]);
}

/// Every way a group is reopened reads back from its text, and text that is not a refused
/// group's is a bad header naming the line.
#[test]
fn refused_group_text_of_every_kind_and_damaged_text() {
    let together = RefusedGroup {
        events: vec!["topdown-retiring".into(), "slots".into()],
        errno: 22,
        reopened: Reopened::Together(vec!["slots".into(), "topdown-retiring".into()]),
        multiplexed: vec!["tma_retiring".into(), "tma_info_thread_slots".into()],
    };
    let text = together.to_string();
    assert!(text.ends_with("so it was reopened as {slots,topdown-retiring}; tma_retiring, tma_info_thread_slots now read counts from different time slices (multiplexed)"), "{text}");
    assert_eq!(RefusedGroup::from_text(&text), Some(together));
    let one = RefusedGroup {
        events: vec!["slots".into(), "cpu/event=0xd1,umask=0x1/".into()],
        errno: 7,
        reopened: Reopened::Split {
            kept: vec!["slots".into()],
            alone: vec!["cpu/event=0xd1,umask=0x1/".into()],
        },
        multiplexed: Vec::new(),
    };
    let text = one.to_string();
    assert!(text.ends_with("cpu/event=0xd1,umask=0x1/ was counted alone"), "{text}");
    assert!(text.contains(" (E2BIG ("), "{text}");
    assert_eq!(RefusedGroup::from_text(&text), Some(one));
    assert_eq!(RefusedGroup::from_text("the kernel refused the group {a,b}"), None);

    let old = fixture("split-text.jsonl");
    let mut header: serde_json::Value = serde_json::from_str(old.lines().next().unwrap()).unwrap();
    header["splits"][0] = "gibberish".into();
    let rest: Vec<&str> = old.lines().skip(1).collect();
    let bad = format!("{header}\n{}\n", rest.join("\n"));
    let err = read_jsonl("bad.jsonl", std::io::Cursor::new(bad)).unwrap_err().to_string();
    assert!(err.starts_with("bad.jsonl:1: a bad header: "), "{err}");
    assert!(err.contains("`gibberish` is not a refused group's note"), "{err}");
}
