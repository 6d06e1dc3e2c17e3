//! `tmetric latency` end to end through the binary.
//!
//! The traces are written here, by hand-made formatters for each tool's layout, and the expected
//! statistics are computed here from the samples the test chose; nothing of the library is used.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const XSAVE: &str = "x86_fpu_latency_xsave";
const XRSTOR: &str = "x86_fpu_latency_xrstor";

/// One sample the test puts into a trace.
#[derive(Debug, Clone)]
struct Sample {
    event: &'static str,
    rfbm: u64,
    xinuse: u64,
    latency: u64,
    /// Timestamp in microseconds.
    micros: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Layout {
    /// `cat trace_pipe` on a recent kernel: five flag characters.
    Pipe,
    /// `cat trace` on an older kernel: the header and four flag characters.
    File,
    /// `trace-cmd report`: preamble, no flags, event names padded.
    Cmd,
}

fn fpu_fields(s: &Sample) -> String {
    format!("x86/fpu: latency:{} RFBM:{:#x} XINUSE:{:#x}", s.latency, s.rfbm, s.xinuse)
}

fn format_line(layout: Layout, idx: usize, s: &Sample) -> String {
    let (comm, pid) =
        [("bash", 4242), ("<idle>", 0), ("kworker/u8:2", 77), ("Web Content", 31337)][idx % 4];
    let cpu = idx % 3;
    let (secs, micros) = (s.micros / 1_000_000, s.micros % 1_000_000);
    match layout {
        Layout::Pipe => {
            format!(
                "{comm:>16}-{pid:<7} [{cpu:03}] d..1. {secs:>5}.{micros:06}: {}: {}",
                s.event,
                fpu_fields(s)
            )
        }
        Layout::File => {
            format!(
                "{comm:>16}-{pid:<7} [{cpu:03}] d..1 {secs:>5}.{micros:06}: {}: {}",
                s.event,
                fpu_fields(s)
            )
        }
        Layout::Cmd => {
            let event = format!("{}:", s.event);
            format!(
                "{comm:>16}-{pid:<5} [{cpu:03}] {secs:>5}.{micros:06}: {event:<24} {}",
                fpu_fields(s)
            )
        }
    }
}

fn header(layout: Layout) -> Vec<&'static str> {
    match layout {
        Layout::Pipe => vec![],
        Layout::File => vec![
            "# tracer: nop",
            "#",
            "# entries-in-buffer/entries-written: 600/600   #P:4",
            "#",
            "#                              _-----=> irqs-off",
            "#                             / _----=> need-resched",
            "#                            | / _---=> hardirq/softirq",
            "#                            || / _--=> preempt-depth",
            "#                            ||| /     delay",
            "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION",
            "#              | |       |   ||||       |         |",
        ],
        Layout::Cmd => vec!["version = 6", "cpus=4"],
    }
}

fn trace_text(layout: Layout, samples: &[Sample]) -> String {
    let mut text = String::new();
    for line in header(layout) {
        text.push_str(line);
        text.push('\n');
    }
    for (idx, sample) in samples.iter().enumerate() {
        text.push_str(&format_line(layout, idx, sample));
        text.push('\n');
    }
    text
}

/// A linear congruential generator, so the traces are the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

fn random_samples(count: usize, seed: u64) -> Vec<Sample> {
    let groups = [
        (XSAVE, 0x206e7, 0x202),
        (XSAVE, 0x206e7, 0x246),
        (XRSTOR, 0x206e7, 0x202),
        (XRSTOR, 0x206e7, 0x0),
    ];
    let mut rng = Lcg(seed);
    let mut micros = 5_000_000_000;
    (0..count)
        .map(|_| {
            let (event, rfbm, xinuse) = groups[rng.next(groups.len() as u64) as usize];
            micros += 1 + rng.next(30);
            let tail = if rng.next(25) == 0 { 1000 + rng.next(5000) } else { 0 };
            Sample { event, rfbm, xinuse, latency: 60 + rng.next(300) + tail, micros }
        })
        .collect()
}

/// The statistics as the seed defines them, computed without the library:
/// [count, min, max, avg, avg97, p50, p99].
fn expected_stats(values: &[u64]) -> [u64; 7] {
    let mut sorted = values.to_vec();
    sorted.sort();
    let n = sorted.len() as u64;
    let mean_half_up = |part: &[u64]| {
        let sum: u128 = part.iter().map(|&v| v as u128).sum();
        let len = part.len() as u128;
        let (quotient, remainder) = (sum / len, sum % len);
        (if 2 * remainder >= len { quotient + 1 } else { quotient }) as u64
    };
    // bc: scale=0; (n*0.97 + 0.5)/1 truncates the exact decimal, i.e. floor((97n + 50) / 100).
    let kept = ((97 * n + 50) / 100) as usize;
    let rank = |p: u64| sorted[((p * n).div_ceil(100).max(1) - 1) as usize];
    [
        n,
        sorted[0],
        sorted[sorted.len() - 1],
        mean_half_up(&sorted),
        mean_half_up(&sorted[..kept]),
        rank(50),
        rank(99),
    ]
}

/// Expected rows keyed and ordered like the seed's `GROUP BY event_name, RFBM, XINUSE`.
fn expected_rows(samples: &[Sample]) -> Vec<(String, u64, u64, [u64; 7])> {
    let mut groups: std::collections::BTreeMap<(&str, u64, u64), Vec<u64>> = Default::default();
    for s in samples {
        groups.entry((s.event, s.rfbm, s.xinuse)).or_default().push(s.latency);
    }
    groups.into_iter().map(|((e, r, x), v)| (e.to_owned(), r, x, expected_stats(&v))).collect()
}

fn tmetric(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .arg("latency")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tmetric");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout_of(output: &Output) -> String {
    assert!(output.status.success(), "tmetric failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn json_of(args: &[&str], stdin: &str) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&stdout_of(&tmetric(&all, stdin))).expect("valid JSON")
}

fn parse_hex(text: &str) -> u64 {
    u64::from_str_radix(text.strip_prefix("0x").expect("hex group value"), 16).unwrap()
}

fn rows_of_json(doc: &Value) -> Vec<(String, u64, u64, [u64; 7])> {
    let groups = doc["groups"].as_array().unwrap();
    groups
        .iter()
        .map(|g| {
            let stat = |k: &str| g[k].as_u64().unwrap();
            (
                g["event"].as_str().unwrap().to_owned(),
                parse_hex(g["group"]["RFBM"].as_str().unwrap()),
                parse_hex(g["group"]["XINUSE"].as_str().unwrap()),
                ["count", "min", "max", "avg", "avg97", "p50", "p99"].map(stat),
            )
        })
        .collect()
}

/// A file in a private temporary directory, removed (with the directory) when dropped.
struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl TempFile {
    fn new(name: &str, contents: &str) -> TempFile {
        let dir = tempfile::Builder::new().prefix("tmetric-latency-").tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        TempFile { _dir: dir, path }
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

#[test]
fn every_layout_gives_the_independently_computed_statistics() {
    for (seed, layout) in [(1, Layout::Pipe), (2, Layout::File), (3, Layout::Cmd)] {
        let samples = random_samples(600, seed);
        let file = TempFile::new(&format!("{layout:?}.log"), &trace_text(layout, &samples));
        let doc = json_of(&[file.path()], "");
        assert_eq!(rows_of_json(&doc), expected_rows(&samples), "{layout:?}");
        assert_eq!(doc["malformed"]["count"], 0, "{layout:?}");
        assert_eq!(doc["noise"]["count"], 0, "{layout:?}");
        assert_eq!(doc["lines"], (600 + header(layout).len()) as u64, "{layout:?}");
    }
}

#[test]
fn table_has_the_seed_columns_in_seed_order() {
    let samples = random_samples(300, 9);
    let text = stdout_of(&tmetric(&[], &trace_text(Layout::Pipe, &samples)));
    let mut lines = text.lines();
    let headers: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let seed_columns =
        ["EVENTs", "RFBM", "XINUSE", "CNT", "lat_min", "lat_max", "lat_avg", "lat_avg(97%)"];
    assert_eq!(headers, [&seed_columns[..], &["lat_p50", "lat_p99"]].concat());
    assert!(lines.next().unwrap().starts_with("------"));
    let rows: Vec<(String, u64, u64, [u64; 7])> = lines
        .by_ref()
        .take_while(|line| !line.is_empty())
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            let numbers: Vec<u64> = cells[3..].iter().map(|c| c.parse().unwrap()).collect();
            (
                cells[0].to_owned(),
                parse_hex(cells[1]),
                parse_hex(cells[2]),
                numbers.try_into().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, expected_rows(&samples));
    let footer: Vec<&str> = lines.collect();
    assert_eq!(
        footer,
        ["300 samples in 4 groups from 300 lines of <stdin> (0 lines of other events)"]
    );
}

#[test]
fn csv_matches_the_statistics_and_keeps_notes_off_stdout() {
    let samples = random_samples(200, 4);
    let mut text = trace_text(Layout::Pipe, &samples);
    text.push_str("garbage\n");
    let output = tmetric(&["--csv"], &text);
    let csv = stdout_of(&output);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "EVENTs,RFBM,XINUSE,CNT,lat_min,lat_max,lat_avg,lat_avg(97%),lat_p50,lat_p99"
    );
    let rows: Vec<(String, u64, u64, [u64; 7])> = lines
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let numbers: Vec<u64> = cells[3..].iter().map(|c| c.parse().unwrap()).collect();
            (
                cells[0].to_owned(),
                parse_hex(cells[1]),
                parse_hex(cells[2]),
                numbers.try_into().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, expected_rows(&samples));
    let notes = String::from_utf8(output.stderr).unwrap();
    assert!(
        notes.contains("skipped 1 malformed line:\n  line 201: not an ftrace event line"),
        "{notes}"
    );
}

#[test]
fn enable_time_noise_sample_is_excluded_and_reported() {
    let mut samples = random_samples(50, 5);
    // The probe's start time was still -1: it logged trace_clock() + 1, and the ring buffer
    // stamped the event 240 ns after that trace_clock() read.
    let noise_micros = samples[0].micros - 1;
    let noise_value = noise_micros * 1000 - 240 + 1;
    let noise = Sample {
        event: XSAVE,
        rfbm: 0x206e7,
        xinuse: 0x202,
        latency: noise_value,
        micros: noise_micros,
    };
    samples.insert(0, noise.clone());
    let text = trace_text(Layout::File, &samples);
    let header_lines = header(Layout::File).len() as u64;

    let doc = json_of(&[], &text);
    assert_eq!(rows_of_json(&doc), expected_rows(&samples[1..]));
    assert_eq!(doc["noise"]["count"], 1);
    let listed = &doc["noise"]["samples"][0];
    assert_eq!(listed["line"], header_lines + 1);
    assert_eq!(listed["value"], noise_value);
    assert_eq!(listed["event"], XSAVE);
    assert_eq!(listed["group"]["XINUSE"], "0x202");

    let table = stdout_of(&tmetric(&[], &text));
    let expected_note = format!(
        "  line {}: {XSAVE} RFBM=0x206e7 XINUSE=0x202 latency={noise_value} at {}.{:06} s",
        header_lines + 1,
        noise_micros / 1_000_000,
        noise_micros % 1_000_000
    );
    assert!(table.contains("excluded 1 enable-time noise sample"), "{table}");
    assert!(table.lines().any(|line| line == expected_note), "{table}");

    let kept = json_of(&["--keep-noise"], &text);
    assert_eq!(rows_of_json(&kept), expected_rows(&samples));
    assert_eq!(kept["noise"]["count"], 0);
}

#[test]
fn groups_with_huge_values_are_never_lost() {
    let mut samples = random_samples(40, 6);
    let start = samples.last().unwrap().micros;
    // Averages of 1e15 and beyond made the seed's group vanish; these are nowhere near the
    // timestamps (about 5e12 ns), so they are real values and must be kept.
    let huge = [
        1_000_000_000_000_000,
        1_000_000_000_000_001,
        u64::MAX - 1,
        u64::MAX,
        18_000_000_000_000_000_000,
    ];
    for (idx, &latency) in huge.iter().enumerate() {
        let micros = start + 1 + idx as u64;
        samples.push(Sample {
            event: XRSTOR,
            rfbm: 0xffff_ffff_ffff_ffff,
            xinuse: 0x60_2a2,
            latency,
            micros,
        });
    }
    samples.push(Sample {
        event: XSAVE,
        rfbm: 0x1,
        xinuse: 0x1,
        latency: 999_999_999_999_999_999,
        micros: start + 9,
    });
    let doc = json_of(&[], &trace_text(Layout::Cmd, &samples));
    let rows = rows_of_json(&doc);
    assert_eq!(rows, expected_rows(&samples));
    let big = rows.iter().find(|row| row.1 == u64::MAX).expect("the huge group is in the table");
    assert_eq!(big.3[0], 5);
    assert_eq!(doc["noise"]["count"], 0);
}

#[test]
fn malformed_lines_are_counted_and_quoted_with_line_numbers() {
    let samples = random_samples(30, 7);
    let mut lines: Vec<String> =
        samples.iter().enumerate().map(|(i, s)| format_line(Layout::Pipe, i, s)).collect();
    let bad = [
        (
            3,
            "            bash-1 [000] d..1.  5000.100000: x86_fpu_latency_xsave: x86/fpu: latency:-5 RFBM:0x1 XINUSE:0x1",
        ),
        (
            8,
            "            bash-1 [000] d..1.  5000.100001: x86_fpu_latency_xsave: x86/fpu: latency:12 RFBM:0x1",
        ),
        (
            12,
            "            bash-1 [000] d..1.  5000.100002: x86_fpu_latency_xrstor: x86/fpu: latency:abc RFBM:0x1 XINUSE:0x1",
        ),
        (20, "            bash-1 [000] d..1.  5000.10"),
        (
            25,
            "            bash-1 [000] d..1.  5000.100003: x86_fpu_latency_xrstor: x86/fpu: latency:99999999999999999999 RFBM:0x1 XINUSE:0x1",
        ),
        (28, "CPU:2 [LOST 17 EVENTS]"),
        (
            29,
            "            bash-1 [000] d..1.  5000.100004: sched_switch: prev_comm=bash prev_pid=1",
        ),
    ];
    for (at, line) in bad {
        lines.insert(at - 1, line.to_owned());
    }
    let text = lines.join("\n") + "\n";
    let doc = json_of(&["--show-malformed", "3"], &text);
    assert_eq!(rows_of_json(&doc), expected_rows(&samples));
    assert_eq!(doc["malformed"]["count"], 5);
    let first: Vec<(u64, String)> = doc["malformed"]["first"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["line"].as_u64().unwrap(), m["reason"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(first.iter().map(|m| m.0).collect::<Vec<_>>(), [3, 8, 12]);
    assert!(first[0].1.contains("`latency` value `-5` is negative"), "{first:?}");
    assert!(first[1].1.contains("no `XINUSE` field"), "{first:?}");
    assert!(first[2].1.contains("`latency` value `abc` is not a decimal"), "{first:?}");
    assert_eq!(
        (doc["lost"]["events"].as_u64(), doc["lost"]["first_line"].as_u64()),
        (Some(17), Some(28))
    );
    assert_eq!(doc["other_event_lines"], 1);

    let table = stdout_of(&tmetric(&[], &text));
    assert!(table.contains("skipped 5 malformed lines:"), "{table}");
    assert!(table.contains("  line 20: not an ftrace event line"), "{table}");
    assert!(
        table.contains("  line 25: `latency` value `99999999999999999999` does not fit in 64 bits"),
        "{table}"
    );
    assert!(
        table.contains("warning: the tracer lost 17 events (1 report line, first at line 28)"),
        "{table}"
    );
}

#[test]
fn any_tracepoint_with_key_value_fields_can_be_analysed() {
    let mut rng = Lcg(8);
    let mut text = String::new();
    let mut by_group: std::collections::BTreeMap<(u64, String), Vec<u64>> = Default::default();
    for idx in 0..400u64 {
        let (cpu, kind) = (rng.next(3), ["read", "write"][rng.next(2) as usize]);
        let delay = 1000 + rng.next(90_000);
        let micros = 7_000_000_000 + idx * 13;
        let (secs, frac) = (micros / 1_000_000, micros % 1_000_000);
        text.push_str(&format!(
            "   fio-{idx:<5} [{cpu:03}] ..... {secs:>5}.{frac:06}: block_lat: dev=8:0 kind={kind} delay={delay} cpu={cpu}\n"
        ));
        by_group.entry((cpu, kind.to_owned())).or_default().push(delay);
        // Other events in between must not disturb anything.
        text.push_str(&format!(
            "   fio-1 [000] ..... {secs:>5}.{frac:06}: block_rq_issue: dev=8:0 delay=1\n"
        ));
    }
    let doc =
        json_of(&["--event", "^block_lat$", "--value", "delay", "--group-by", "cpu,kind"], &text);
    let got: Vec<((u64, String), [u64; 7])> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            assert_eq!(g["event"], "block_lat");
            let cpu = g["group"]["cpu"].as_str().unwrap().parse().unwrap();
            let kind = g["group"]["kind"].as_str().unwrap().to_owned();
            (
                (cpu, kind),
                ["count", "min", "max", "avg", "avg97", "p50", "p99"]
                    .map(|k| g[k].as_u64().unwrap()),
            )
        })
        .collect();
    let expected: Vec<((u64, String), [u64; 7])> =
        by_group.into_iter().map(|(k, v)| (k, expected_stats(&v))).collect();
    assert_eq!(got, expected);
    assert_eq!(doc["other_event_lines"], 400);

    let table = stdout_of(&tmetric(
        &["--event", "^block_lat$", "--value", "delay", "--group-by", ""],
        &text,
    ));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[..3], ["EVENTs", "CNT", "delay_min"]);
    assert!(table.lines().nth(2).unwrap().starts_with("block_lat  400  "), "{table}");
}

#[test]
fn errors_name_the_file_and_bad_flags() {
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("no-such-file.log");
    let output = tmetric(&[missing.to_str().unwrap()], "");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(&format!("cannot open trace file `{}`", missing.display())),
        "{stderr}"
    );
    assert!(stderr.contains("No such file"), "{stderr}");

    let dir = scratch.path();
    let output = tmetric(&[dir.to_str().unwrap()], "");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(&format!("cannot read trace file `{}` after line 0", dir.display())),
        "{stderr}"
    );

    let output = tmetric(&["--event", "("], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8(output.stderr).unwrap().contains("invalid `--event` regex `(`"));
}
