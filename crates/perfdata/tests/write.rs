//! The perf.data writer against the reader: files and pipes read back with their events,
//! ids, units, maps, rounds, features and extras; perf's CPU map encodings; the attribute
//! sizes chosen for perf 6.1; refused input; and no damage to a written file makes the reader
//! panic. (That perf itself reads the files is tested with the binary in the root package.)
use std::io::Cursor;

use tmetric_perfdata::write::{
    self as pw, Cache, CpuTopology, Event, Features, FileAttr, Group, Setup, Writer,
};
use tmetric_perfdata::{RoundKind, parse_perf_data};

fn event(name: &str, config: u64, ids: &[u64]) -> Event {
    Event {
        name: name.into(),
        attr: FileAttr {
            type_: 1,
            config,
            sample_type: pw::SAMPLE_IDENTIFIER,
            read_format: pw::FORMAT_TOTAL_TIME_ENABLED | pw::FORMAT_TOTAL_TIME_RUNNING,
            disabled: true,
            inherit: true,
            exclude_guest: true,
            ..FileAttr::default()
        },
        ids: ids.to_vec(),
        ..Event::default()
    }
}

fn events() -> Vec<Event> {
    let mut clock = event("task-clock", 1, &[11, 12]);
    clock.unit = Some("msec".into());
    clock.scale = Some(1e-6);
    let mut cs = event("context-switches", 3, &[21, 22]);
    cs.attr.exclude_kernel = true;
    // An event that did not open: no ids.
    let cycles =
        Event { attr: FileAttr { type_: 0, ..FileAttr::default() }, ..event("cycles", 0, &[]) };
    vec![clock, cs, cycles]
}

fn setup() -> Setup {
    Setup {
        threads: vec![(-1, String::new())],
        cpus: vec![0, 1],
        aggr_mode: tmetric_perfstat::Aggregation::Global,
        interval_ms: 100,
        aggr_level: 0,
        scale: true,
    }
}

/// Two intervals, then the totals without a round (perf's -I layout), and extras.
fn write_run<W: std::io::Write>(w: &mut Writer<W>, extras: &[u8]) {
    w.extra(extras).unwrap();
    for (round, t) in [(1u64, 100_000_000u64), (2, 200_000_000)] {
        for (id, cpu) in [(11, 0), (12, 1), (21, 0), (22, 1)] {
            w.stat(id, cpu, 0, [id * round, t, t / 2]).unwrap();
        }
        w.round(RoundKind::Interval, t).unwrap();
    }
    for (id, cpu) in [(11, 0), (12, 1), (21, 0), (22, 1)] {
        w.stat(id, cpu, 0, [id * 3, 250, 125]).unwrap();
    }
    w.extra(b"the end\n").unwrap();
}

fn features() -> Features {
    Features {
        hostname: Some("box".into()),
        os_release: Some("6.12.0".into()),
        version: Some("tmetric 0.1.0".into()),
        arch: Some("x86_64".into()),
        nr_cpus: Some((4, 2)),
        cpu_desc: Some("A CPU".into()),
        cpuid: Some("GenuineIntel,6,143,8".into()),
        total_mem_kb: Some(1 << 20),
        cmdline: Some(vec!["/usr/bin/tmetric".into(), "record".into(), "true".into()]),
        topology: Some(CpuTopology {
            package_cpus: vec!["0-1".into()],
            core_cpus: vec!["0".into(), "1".into()],
            die_cpus: vec!["0-1".into()],
            ids: vec![(0, 0, 0), (1, 0, 0), (-1, -1, -1), (-1, -1, -1)],
        }),
        numa: None,
        pmu_mappings: Some(vec![(1, "software".into()), (4, "cpu".into())]),
        groups: vec![Group { name: "{anon_group}".into(), leader: 0, members: 2 }],
        caches: Some(vec![Cache {
            level: 1,
            line_size: 64,
            sets: 64,
            ways: 12,
            type_: "Data".into(),
            size: "48K".into(),
            cpus: "0".into(),
        }]),
        cpu_pmu_caps: Some(vec![("max_precise".into(), "3".into())]),
        hybrid: None,
        pmu_caps: Some(Vec::new()),
    }
}

#[test]
fn a_file_reads_back() {
    // Extras longer than one record (64 KiB) come back whole.
    let extras: Vec<u8> = (0..150_000).map(|i| b'a' + (i % 26) as u8).collect();
    let mut w = Writer::file(Cursor::new(Vec::new()), events(), &setup()).unwrap();
    write_run(&mut w, &extras);
    let bytes = w.finish_file(&features()).unwrap().into_inner();
    let data = parse_perf_data(&bytes).unwrap();
    assert!(!data.pipe);
    let names: Vec<&str> = data.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["task-clock", "context-switches", "cycles"]);
    assert_eq!(data.events[0].ids, [11, 12]);
    assert!(data.events[2].ids.is_empty());
    assert_eq!(data.events[0].unit.as_deref(), Some("msec"));
    assert_eq!(data.events[0].scale, Some(1e-6));
    assert_eq!(data.events[1].exclude, (false, true, false));
    assert_eq!((data.events[1].type_, data.events[1].config), (1, 3));
    assert_eq!(data.cpus, [0, 1]);
    assert_eq!(data.threads, [(u64::MAX, String::new())]);
    assert_eq!((data.interval_ms, data.aggr_mode), (100, Some(1)));
    let times: Vec<(RoundKind, u64)> = data.rounds.iter().map(|r| (r.kind, r.time_ns)).collect();
    assert_eq!(times, [(RoundKind::Interval, 100_000_000), (RoundKind::Interval, 200_000_000)]);
    let v = data.rounds[1].values.iter().find(|v| v.event == 1 && v.cpu == 1).unwrap();
    assert_eq!((v.value, v.enabled, v.running), (44, 200_000_000, 100_000_000));
    assert_eq!(data.unrounded.len(), 4);
    let mut expected = extras.clone();
    expected.extend_from_slice(b"the end\n");
    assert_eq!(data.extras, expected);
    // Features.
    assert_eq!(data.hostname.as_deref(), Some("box"));
    assert_eq!(data.os_release.as_deref(), Some("6.12.0"));
    assert_eq!(data.perf_version.as_deref(), Some("tmetric 0.1.0"));
    assert_eq!(data.nr_cpus, Some((4, 2)));
    assert_eq!(data.cpuid.as_deref(), Some("GenuineIntel,6,143,8"));
    assert_eq!(data.cmdline, ["/usr/bin/tmetric", "record", "true"]);
    assert_eq!(data.topology, [(0, 0, 0), (1, 0, 0), (-1, -1, -1), (-1, -1, -1)]);
    // The header: perf 6.1's attribute size, the data section where it is.
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(u64_at(16), 128 + 16);
    let feature_bits = u64_at(72);
    for bit in [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 19, 20, 21, 23, 27, 28, 29, 31] {
        assert!(feature_bits & (1 << bit) != 0, "feature {bit} missing: {feature_bits:#x}");
    }
    for bit in [1, 2, 14, 15, 18, 22, 24, 25, 26, 30] {
        assert!(feature_bits & (1 << bit) == 0, "feature {bit} written: {feature_bits:#x}");
    }
    assert_eq!(u64_at(40) + u64_at(48), {
        // The feature table follows the data: its first entry points past the table.
        let table = (u64_at(40) + u64_at(48)) as usize;
        let first = u64::from_le_bytes(bytes[table..table + 8].try_into().unwrap());
        assert_eq!(first, table as u64 + 16 * feature_bits.count_ones() as u64);
        table as u64
    });
}

#[test]
fn a_pipe_reads_back_with_names_from_event_updates() {
    let mut w = Writer::pipe(Vec::new(), events(), &setup()).unwrap();
    write_run(&mut w, b"{\"x\":1}\n");
    let bytes = w.finish_pipe().unwrap();
    assert_eq!(&bytes[8..16], &16u64.to_le_bytes());
    let data = parse_perf_data(&bytes).unwrap();
    assert!(data.pipe);
    let names: Vec<&str> = data.events.iter().map(|e| e.name.as_str()).collect();
    // The event that did not open has no id, so no EVENT_UPDATE can name it: perf's
    // fallback name.
    assert_eq!(names, ["task-clock", "context-switches", "cycles"]);
    assert_eq!(data.events[1].ids, [21, 22]);
    assert_eq!(data.rounds.len(), 2);
    assert_eq!(data.extras, b"{\"x\":1}\nthe end\n");
    // A pipe's attributes are perf 6.12's 136 bytes: 8 + 136 + 2 ids.
    assert_eq!(u16::from_le_bytes(bytes[22..24].try_into().unwrap()), 8 + 136 + 16);
}

#[test]
fn cpu_maps_use_perfs_encodings() {
    for (cpus, kind) in [
        (vec![-1], 0u16),
        (vec![0, 1, 2, 3], 2),
        (vec![4], 2),
        (vec![0, 2, 5], 1),
        (vec![1, 40], 0),
        ((0..64).step_by(2).collect::<Vec<i32>>(), 1),
    ] {
        let s = Setup { cpus: cpus.clone(), ..setup() };
        let w = Writer::pipe(Vec::new(), Vec::new(), &s).unwrap();
        let bytes = w.finish_pipe().unwrap();
        let data = parse_perf_data(&bytes).unwrap();
        assert_eq!(data.cpus, cpus);
        // THREAD_MAP (16 + 24) after the pipe header, then CPU_MAP: its type.
        let at = 16 + 40 + 8;
        assert_eq!(u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()), kind, "{cpus:?}");
    }
}

#[test]
fn an_event_with_config3_needs_the_larger_attribute() {
    let mut e = event("x", 1, &[1]);
    e.attr.config3 = 0x42;
    e.cpus = Some(vec![1]);
    let w = Writer::file(Cursor::new(Vec::new()), vec![e], &setup()).unwrap();
    let bytes = w.finish_file(&Features::default()).unwrap().into_inner();
    assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 136 + 16);
    let data = parse_perf_data(&bytes).unwrap();
    assert_eq!(data.events[0].config3, 0x42);
    assert_eq!(data.events[0].cpus, Some(vec![1]));
}

#[test]
fn bad_input_is_refused() {
    let twice = vec![event("a", 1, &[5]), event("b", 2, &[5])];
    assert!(Writer::pipe(Vec::new(), twice, &setup()).is_err());
    let mut w = Writer::pipe(Vec::new(), events(), &setup()).unwrap();
    assert!(w.extra(b"a\0b").is_err());
}

#[test]
fn damage_to_a_written_file_never_panics() {
    let mut w = Writer::file(Cursor::new(Vec::new()), events(), &setup()).unwrap();
    write_run(&mut w, b"{}\n");
    let good = w.finish_file(&features()).unwrap().into_inner();
    for len in 0..good.len() {
        assert!(parse_perf_data(&good[..len]).is_err(), "cut at {len}");
    }
    for i in (8..good.len()).step_by(3) {
        for value in [0u8, 0x7f, 0xff] {
            let mut bad = good.clone();
            bad[i] = value;
            let _ = parse_perf_data(&bad);
        }
    }
}
