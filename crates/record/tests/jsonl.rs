//! The JSON-lines reader: counts, floats kept exact, intervals with their latencies and
//! samples, and damaged files refused naming the file and line.

use std::collections::BTreeMap;
use std::time::Duration;
use tmetric_record::format::{EventRec, Selection, Topology};
use tmetric_record::*;

fn header_line() -> String {
    let h = Header {
        format: FORMAT.into(),
        version: VERSION,
        tmetric: "0.1.0".into(),
        cpuid: None,
        model: None,
        simulated: None,
        target: "true".into(),
        system_wide: false,
        interval_ms: None,
        topology: Topology {
            cpus: vec![0],
            cores: 1,
            sockets: 1,
            places: vec![[0, 0, 0, 0]],
            units: vec![],
        },
        literals: [("slots".to_string(), 0.1 + 0.2)].into_iter().collect(),
        selection: Selection {
            metrics: vec![],
            events: vec!["task-clock".into()],
            model: None,
            tpebs_mode: None,
            summary: false,
        },
        events: vec![EventRec {
            name: "task-clock".into(),
            pmu: "software".into(),
            type_: 1,
            config: 1,
            config1: 0,
            config2: 0,
            config3: 0,
            exclude: [false; 3],
            cpus: None,
            unit: None,
            scale: None,
        }],
        groups: vec![vec![0]],
        rows: vec![],
        roots: vec![],
        probes: vec![],
        retire_latency: BTreeMap::new(),
        failures: vec![None],
        splits: vec![],
        threads: vec![],
        skip_zero: false,
        aggr_mode: None,
        aggr_level: None,
        ru_display: None,
        estimate: None,
        vintage: None,
        contract: None,
    };
    serde_json::to_string(&h).unwrap()
}

fn parse(text: &str) -> Result<Recording, ReadError> {
    read_jsonl("r.jsonl", std::io::Cursor::new(text.to_string()))
}

#[test]
fn reads_counts_and_keeps_floats_exact() {
    let text = format!(
        "{}\n{{\"t\":\"final\",\"group\":0,\"cpu\":-1,\"thread\":-1,\"counts\":[[5,10,4]]}}\n{{\"t\":\"end\",\"elapsed_ns\":7,\"user_ns\":null,\"sys_ns\":null,\"exit\":0,\"intervals\":0}}\n",
        header_line()
    );
    let rec = parse(&text).unwrap();
    assert_eq!(rec.header.literals["slots"], 0.1 + 0.2);
    let a = rec.totals.aggregate(0).unwrap();
    assert_eq!((a.value, a.enabled, a.running), (12, 10, 4));
    assert_eq!(rec.elapsed, Duration::from_nanos(7));
}

#[test]
fn intervals_keep_their_latencies_and_samples() {
    let lines = [
        header_line(),
        r#"{"t":"interval","n":1,"at_ns":100,"length_ns":100,"group":0,"cpu":0,"thread":-1,"counts":[[1,2,2]]}"#.into(),
        r#"{"t":"interval","n":1,"at_ns":100,"length_ns":100,"group":0,"cpu":1,"thread":-1,"counts":[[3,2,1]]}"#.into(),
        r#"{"t":"latency","n":1,"values":{"X/R":"12.25"}}"#.into(),
        r#"{"t":"interval","n":2,"at_ns":200,"length_ns":100,"group":0,"cpu":0,"thread":-1,"counts":[null]}"#.into(),
        r#"{"t":"tpebs","event":"X/R","samples":4,"lost":0,"mean":"12.25","min":"1","max":"30","last":"2","p97":null}"#.into(),
        r#"{"t":"end","elapsed_ns":250,"user_ns":1,"sys_ns":2,"exit":0,"intervals":2}"#.into(),
    ];
    let rec = parse(&lines.join("\n")).unwrap();
    assert_eq!(rec.intervals.len(), 2);
    let first = &rec.intervals[0];
    assert_eq!(first.at, Duration::from_nanos(100));
    // CPU 1 ran half the time: 3 scales to 6.
    assert_eq!(first.counts.aggregate(0).unwrap().value, 7);
    assert_eq!(first.latency.as_ref().unwrap()["X/R"], 12.25);
    assert_eq!(rec.intervals[1].counts.events[0], None, "a member that was not open");
    assert!(matches!(rec.tpebs[0], Line::Tpebs { max: Some(30.0), p97: None, .. }));
    assert_eq!(rec.rusage, Some((Duration::from_nanos(1), Duration::from_nanos(2))));
}

/// Found by the fuzz target: two readings of u64::MAX added up past 2^64 (a panic in a
/// debug build, wrapped numbers in a release one); now the reading is named.
#[test]
fn counts_that_cannot_add_up_are_named() {
    let huge = u64::MAX;
    let lines = [
        header_line(),
        format!(r#"{{"t":"final","group":0,"cpu":0,"thread":-1,"counts":[[{huge},10,10]]}}"#),
        r#"{"t":"final","group":0,"cpu":1,"thread":-1,"counts":[[1,10,10]]}"#.to_string(),
        r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#.into(),
    ];
    let err = format!("{}", parse(&lines.join("\n")).unwrap_err());
    assert!(err.starts_with("r.jsonl:3: event 0's counts add up to more than 2^64"), "{err}");
    // Multiplexed: 2^63 counted in half the time scales past 2^64 on its own.
    let half = 1u64 << 63;
    let lines = [
        header_line(),
        format!(r#"{{"t":"final","group":0,"cpu":0,"thread":-1,"counts":[[{half},10,5]]}}"#),
        r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#.into(),
    ];
    let err = format!("{}", parse(&lines.join("\n")).unwrap_err());
    assert!(err.starts_with("r.jsonl:2: event 0's counts add up"), "{err}");
}

/// Found by the fuzz target: interval 0 passed the reader and broke the printer's
/// header count (`number - 1`).
#[test]
fn intervals_are_numbered_from_one() {
    let lines = [
        header_line(),
        r#"{"t":"interval","n":0,"at_ns":1,"length_ns":1,"group":0,"cpu":-1,"thread":-1,"counts":[[1,1,1]]}"#.into(),
        r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#.into(),
    ];
    let err = format!("{}", parse(&lines.join("\n")).unwrap_err());
    assert!(err.starts_with("r.jsonl:2: interval 0 follows interval 0"), "{err}");
}

#[test]
fn bad_lines_name_file_and_line() {
    let truncated = format!("{}\n{{\"t\":\"final\",\"group\":0,\"cpu\":-1,\"co", header_line());
    let err = format!("{}", parse(&truncated).unwrap_err());
    assert!(err.starts_with("r.jsonl:2: the line is truncated"), "{err}");
    let no_end = format!(
        "{}\n{{\"t\":\"final\",\"group\":0,\"cpu\":-1,\"thread\":-1,\"counts\":[[5,10,4]]}}\n",
        header_line()
    );
    let err = format!("{}", parse(&no_end).unwrap_err());
    assert!(err.contains("r.jsonl:2: the record is truncated"), "{err}");
    let bad_group = format!(
        "{}\n{{\"t\":\"final\",\"group\":3,\"cpu\":-1,\"thread\":-1,\"counts\":[[5,10,4]]}}\n",
        header_line()
    );
    let err = format!("{}", parse(&bad_group).unwrap_err());
    assert!(err.contains("r.jsonl:2: group 3 does not exist"), "{err}");
    let future = header_line().replace("\"version\":1", "\"version\":9");
    let err = format!("{}", parse(&future).unwrap_err());
    assert!(err.contains("r.jsonl:1: record format version 9"), "{err}");
    let err = format!("{}", parse("{\"a\":1}").unwrap_err());
    assert!(err.contains("not a tmetric record"), "{err}");
}

/// A read says which `-I` interval it was taken inside; reads without it (files written
/// before it was kept) still read, and a read whose lines disagree, or that goes back to an
/// earlier interval, is refused naming the line.
#[test]
fn reads_keep_their_interval() {
    let read = |n: u64, cpu: i32, interval: Option<u64>| {
        let tail = interval.map_or(String::new(), |i| format!(r#","interval":{i}"#));
        format!(
            r#"{{"t":"read","n":{n},"group":0,"cpu":{cpu},"thread":-1,"counts":[[1,2,2]]{tail}}}"#
        )
    };
    let end = r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#;
    let file = |reads: &[String]| {
        let mut lines = vec![header_line()];
        lines.extend_from_slice(reads);
        lines.push(end.to_string());
        lines.join("\n")
    };
    let rec = parse(&file(&[
        read(1, 0, Some(1)),
        read(1, 1, Some(1)),
        read(2, 0, Some(2)),
        read(3, 0, None),
    ]))
    .unwrap();
    assert_eq!(rec.read_intervals, vec![Some(1), Some(2), None]);
    let old = parse(&file(&[read(1, 0, None), read(2, 0, None)])).unwrap();
    assert_eq!(old.read_intervals, vec![None, None]);
    let err = format!("{}", parse(&file(&[read(1, 0, Some(1)), read(1, 1, Some(2))])).unwrap_err());
    assert!(err.starts_with("r.jsonl:3: read 1 says it was read inside interval 2"), "{err}");
    let err = format!("{}", parse(&file(&[read(1, 0, Some(2)), read(2, 0, Some(1))])).unwrap_err());
    assert!(err.starts_with("r.jsonl:3: read 2 says it was read inside interval 1"), "{err}");
}
