//! `tmetric record --format jsonl` and `tmetric report`: round trips on this machine's kernel
//! (software events) and on the simulated kernel, metrics not selected at record time, another
//! model's formulas, damaged files, and `perf stat record` files against `perf stat report`.
//! The perf.data format of `tmetric record` is tested in `cli_record_perf.rs`.

use std::path::Path;
use std::process::Command;

use crate::support::{ok, stderr, tmetric};

/// A private scratch directory for one test, removed when it ends.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tmetric-record-{name}-"))
            .tempdir()
            .expect("a temp dir");
        Scratch(dir)
    }

    fn path(&self, file: &str) -> String {
        self.0.path().join(file).display().to_string()
    }
}

/// stat's stderr without the lines only a live run prints (the simulator's warning).
fn printed(text: &str) -> Vec<String> {
    text.lines().filter(|l| !l.contains("simulated PMU `")).map(str::to_string).collect()
}

/// CSV metric values by name (`value,unit,name` in the last three fields).
/// The metrics of perf's CSV layout: the last two fields are the value and `unit  name`
/// (or the name alone for a metric without a unit).
/// The factor of a rate's unit prefix (`K/sec  page_faults_per_sec`: 1000), which perf's
/// built-in rates carry and the common `*_per_sec` metrics printed in their place share.
fn rate_prefix(label: &str) -> f64 {
    match label.split("/sec").next() {
        Some("K") => 1e3,
        Some("M") => 1e6,
        Some("G") => 1e9,
        _ => 1.0,
    }
}

fn csv_metrics(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let label = f.last()?;
            let name = label.rsplit("  ").next()?.to_string();
            let value: f64 = f.get(f.len().checked_sub(2)?)?.parse().ok()?;
            (!name.is_empty()).then_some((name, value * rate_prefix(label)))
        })
        .collect()
}

#[test]
fn software_events_round_trip_identically() {
    let s = Scratch::new("sw");
    let file = s.path("run.jsonl");
    // `cycles` cannot be opened in a VM without a PMU: its note must come back too.
    let runs = [
        ("task-clock,context-switches", &[][..]),
        ("task-clock,context-switches", &["-x,"][..]),
        ("task-clock,context-switches", &["-j"][..]),
        ("task-clock,cycles", &[][..]),
    ];
    for (events, layout) in runs {
        let mut args = vec!["record", "--format", "jsonl", "-e", events, "-o", &file];
        args.extend_from_slice(layout);
        args.extend_from_slice(&["sleep", "0.05"]);
        let live = ok(&args);
        let mut rargs = vec!["report", "-i", &file];
        rargs.extend_from_slice(layout);
        let replay = ok(&rargs);
        assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)), "layout {layout:?}");
        let second = events.split(',').nth(1).unwrap();
        assert!(stderr(&replay).contains(second), "{}", stderr(&replay));
    }
}

#[test]
fn intervals_and_per_cpu_round_trip() {
    let s = Scratch::new("iv");
    let file = s.path("iv.jsonl");
    let live = ok(&[
        "record",
        "--format",
        "jsonl",
        "-a",
        "-I",
        "20",
        "--summary",
        "-x,",
        "-e",
        "task-clock,context-switches",
        "-o",
        &file,
        "sleep",
        "0.07",
    ]);
    let replay = ok(&["report", "-i", &file, "-x,"]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    assert!(stderr(&replay).lines().count() >= 6, "{}", stderr(&replay));
    // Per CPU from the recorded per-CPU readings: the task-clock of the CPUs adds up.
    let total = ok(&["report", "-i", &s.path("iv.jsonl"), "-x,"]);
    let per_cpu = ok(&["report", "-i", &file, "-x,", "-A"]);
    let clock = |text: &str| -> f64 {
        text.lines()
            .filter(|l| l.contains(",task-clock,") && !l.starts_with("0."))
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let i = f.iter().position(|x| *x == "task-clock")?;
                f[i - 2].parse::<f64>().ok()
            })
            .sum()
    };
    let (t, a) = (clock(&stderr(&total)), clock(&stderr(&per_cpu)));
    assert!(t > 0.0 && (t - a).abs() < 0.02 * t, "total {t} vs per-CPU sum {a}");
}

#[test]
fn simulated_topdown_round_trips_and_evaluates_other_metrics() {
    let s = Scratch::new("sim");
    let file = s.path("td.jsonl");
    let live = ok(&[
        "record",
        "--format",
        "jsonl",
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "-x,",
        "-o",
        &file,
        "sleep",
        "0.1",
    ]);
    let replay = ok(&["report", "-i", &file, "-x,"]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    let l1 = csv_metrics(&stderr(&replay));
    let retiring = l1.iter().find(|m| m.0 == "tma_retiring").expect("tma_retiring").1;
    assert!(retiring > 0.0 && retiring < 100.0, "{l1:?}");

    // Written by a catalogue whose input slots differ: the inputs are matched by name and
    // the values are the same.
    let text = std::fs::read_to_string(&file).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut header: serde_json::Value = serde_json::from_str(first).unwrap();
    for root in header["roots"].as_array_mut().unwrap() {
        for input in root["inputs"].as_array_mut().unwrap() {
            input[0] = serde_json::json!(input[0].as_u64().unwrap() + 100_000);
        }
    }
    let moved = s.path("moved.jsonl");
    std::fs::write(&moved, format!("{header}\n{rest}")).unwrap();
    let again = ok(&["report", "-i", &moved, "-x,"]);
    assert_eq!(csv_metrics(&stderr(&again)), l1);

    // Not selected at record time: level 2 from the same recorded topdown events.
    let l2 = ok(&["report", "-i", &file, "-x,", "-M", "tma_heavy_operations,tma_light_operations"]);
    let l2 = csv_metrics(&stderr(&l2));
    let heavy = l2.iter().find(|m| m.0 == "tma_heavy_operations").expect("heavy").1;
    let light = l2.iter().find(|m| m.0 == "tma_light_operations").expect("light").1;
    assert!(heavy > 0.0, "{l2:?}");
    assert!((heavy + light - retiring).abs() < 1e-6, "{heavy} + {light} != {retiring}");

    // Another model's formulas: icelake's backend bound needs an event not recorded.
    let other = tmetric(&["report", "-i", &file, "-x,", "-v", "--model", "icelake"]);
    assert!(other.status.success(), "{}", stderr(&other));
    let text = stderr(&other);
    assert!(text.contains("tma_backend_bound: nan: needs INT_MISC.CLEARS_COUNT"), "{text}");
    let fe = csv_metrics(&text).into_iter().find(|m| m.0 == "tma_frontend_bound").unwrap().1;
    let live_fe = l1.iter().find(|m| m.0 == "tma_frontend_bound").unwrap().1;
    assert!(fe.is_finite() && fe > 0.0 && (fe - live_fe).abs() < 5.0, "{fe} vs {live_fe}");

    // A metric the recorded model lacks: the miss names the recorded machine (not `--model`,
    // which was not given) and where the metric is defined; a typo gets close names.
    let err = stderr(&tmetric(&["report", "-i", &file, "-M", "PipelineL1"]));
    assert!(
        err.contains("cannot find metric or group `PipelineL1` among the common metrics or those of x86/sapphirerapids: `PipelineL1` is defined for x86/amdzen"),
        "{err}"
    );
    assert!(
        err.contains(
            "; the recorded machine is x86/sapphirerapids; count it on a simulated x86/amdzen"
        ),
        "{err}"
    );
    let err = stderr(&tmetric(&["report", "-i", &file, "--model", "icelake", "-M", "PipelineL1"]));
    assert!(err.contains("; --model names x86/icelake; "), "{err}");
    let err = stderr(&tmetric(&["report", "-i", &file, "-M", "tma_retirng"]));
    assert!(err.contains("x86/sapphirerapids; did you mean `Ret` or `tma_retiring`?"), "{err}");
}

/// Files written before refusals were kept as data (`{cpu, errno, why}`) held the note's
/// text; `report` still reads both formats and prints the note as `stat` printed it.
#[test]
fn older_records_with_refusals_as_text_print_the_same_note() {
    let note = "topdown-retiring: <not supported> (on CPU 0): EINVAL: a topdown metric event is counted only in a group led by `slots` (write `{slots,topdown-retiring}`), without exclude modifiers";
    for file in ["refused-text.jsonl", "refused-text.data"] {
        let path = format!("{}/tests/data/record/{file}", env!("CARGO_MANIFEST_DIR"));
        let err = stderr(&ok(&["report", "-i", &path]));
        assert!(err.contains(&format!("\n\n{note}\n")), "{file}: {err}");
        assert!(err.contains("<not supported>      topdown-retiring"), "{file}: {err}");
    }
}

/// A group the kernel refused prints the same note from a record written before refused
/// groups were data (`split-text.jsonl`, which holds the note's text) and from one written
/// now (which holds the group as data), in JSON lines and perf.data alike.
#[test]
fn refused_groups_print_the_same_note_from_old_and_new_records() {
    let old = format!("{}/tests/data/record/split-text.jsonl", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&old).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let note = header["splits"][0].as_str().expect("the old file holds text").to_string();
    let err = stderr(&ok(&["report", "-i", &old]));
    assert!(err.contains(&format!("\n{note}\n")), "{err}");
    let group = "{topdown-retiring,slots,topdown-bad-spec,cpu/event=0xd1,umask=0x1/,cpu/event=0xd1,umask=0x2/,\
        cpu/event=0xd1,umask=0x4/,cpu/event=0xd1,umask=0x8/,cpu/event=0xd1,umask=0x10/,cpu/event=0xd1,umask=0x20/,\
        cpu/event=0xc4,umask=0x0/,cpu/event=0xc5,umask=0x0/,cpu/event=0xc2,umask=0x2/}";
    let s = Scratch::new("split");
    for format in ["jsonl", "perf"] {
        let new = s.path(&format!("new.{format}"));
        let args = ["record", "--format", format, "--pmu-sim", "sapphirerapids", "-a", "-e", group];
        let live = stderr(&ok(&[&args[..], &["-o", &new, "sleep", "0.05"]].concat()));
        assert!(live.contains(&format!("\n{note}\n")), "{live}");
        if format == "jsonl" {
            let written = std::fs::read_to_string(&new).unwrap();
            let header: serde_json::Value =
                serde_json::from_str(written.lines().next().unwrap()).unwrap();
            assert_eq!(header["splits"][0]["errno"], 22, "stored as data: {header}");
        }
        let err = stderr(&ok(&["report", "-i", &new]));
        assert!(err.contains(&format!("\n{note}\n")), "{format}: {err}");
    }
}

#[test]
fn damaged_records_are_clear_errors() {
    let s = Scratch::new("bad");
    let file = s.path("r.jsonl");
    ok(&["record", "--format", "jsonl", "-e", "task-clock", "-o", &file, "true"]);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();

    let cut = s.path("cut.jsonl");
    let keep = text.len() - lines.last().unwrap().len() / 2 - 1;
    std::fs::write(&cut, &text[..keep]).unwrap();
    let out = tmetric(&["report", "-i", &cut]);
    assert!(!out.status.success());
    let n = lines.len();
    assert!(
        stderr(&out).contains(&format!("cut.jsonl:{n}: the line is truncated")),
        "{}",
        stderr(&out)
    );

    let no_end = s.path("noend.jsonl");
    std::fs::write(&no_end, lines[..n - 1].join("\n")).unwrap();
    let out = tmetric(&["report", "-i", &no_end]);
    assert!(stderr(&out).contains("the record is truncated: no `end` line"), "{}", stderr(&out));

    let future = s.path("future.jsonl");
    std::fs::write(&future, text.replacen("\"version\":1", "\"version\":2", 1)).unwrap();
    let out = tmetric(&["report", "-i", &future]);
    assert!(stderr(&out).contains("future.jsonl:1: record format version 2"), "{}", stderr(&out));

    let junk = s.path("junk.txt");
    std::fs::write(&junk, "hello\n").unwrap();
    let out = tmetric(&["report", "-i", &junk]);
    assert!(stderr(&out).contains("junk.txt:1: not a tmetric record header"), "{}", stderr(&out));
}

fn perf_works() -> bool {
    Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// perf stat report's counts by event name (the first number of each counter line), with
/// the `CPUn` label of `-A` lines.
fn perf_counts(text: &str, events: &[&str]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let cpu = fields
            .iter()
            .find(|f| f.strip_prefix("CPU").is_some_and(|n| n.parse::<u32>().is_ok()))
            .copied()
            .unwrap_or("");
        for e in events {
            if let Some(i) = fields.iter().position(|f| f == e)
                && i >= 1
            {
                // `[time] [CPUn] count [unit] event`
                let count = if fields[i - 1] == "msec" { fields[i - 2] } else { fields[i - 1] };
                if let Ok(v) = count.replace(',', "").parse::<f64>() {
                    out.push((format!("{cpu}{e}"), v));
                }
            }
        }
    }
    out
}

/// `perf stat record -o FILE extra...`; with a file name starting `pipe`, `-o -` written to
/// it (pipe mode: attributes as records).
fn perf_record(dir: &Path, file: &str, extra: &[&str]) -> Option<String> {
    let path = dir.join(file).display().to_string();
    let pipe = file.starts_with("pipe");
    let mut args = vec!["stat", "record", "-o", if pipe { "-" } else { &path }];
    args.extend_from_slice(extra);
    let out = Command::new("perf").args(&args).output().ok()?;
    if pipe {
        std::fs::write(&path, &out.stdout).ok()?;
    }
    out.status.success().then_some(path)
}

#[test]
fn perf_stat_record_files_give_perfs_counts() {
    if !perf_works() {
        eprintln!("skipped: perf is not installed, so no perf.data file can be made");
        return;
    }
    let s = Scratch::new("perfdata");
    let events = ["task-clock", "context-switches"];
    for (file, extra) in [
        ("task.data", &["-e", "task-clock,context-switches", "sleep", "0.05"][..]),
        ("iv.data", &["-a", "-I", "20", "-e", "task-clock,context-switches", "sleep", "0.07"][..]),
        ("pipe.data", &["-e", "task-clock,context-switches", "sleep", "0.05"][..]),
    ] {
        let Some(path) = perf_record(s.0.path(), file, extra) else {
            eprintln!("skipped: `perf stat record` failed here");
            return;
        };
        let perf = Command::new("perf").args(["stat", "report", "-i", &path]).output().unwrap();
        let theirs = perf_counts(&String::from_utf8_lossy(&perf.stderr), &events);
        let ours = ok(&["report", "-i", &path]);
        let title =
            |t: &str| t.lines().find(|l| l.contains("counter stats for")).map(str::to_string);
        assert_eq!(title(&String::from_utf8_lossy(&perf.stderr)), title(&stderr(&ours)), "{file}");
        let ours = perf_counts(&stderr(&ours), &events);
        assert!(!theirs.is_empty(), "perf printed no counts");
        assert_eq!(theirs, ours, "{file}");
    }
    // Per CPU (`-A`) from a system-wide file: perf prints event by event, tmetric CPU by CPU.
    let Some(path) = perf_record(
        s.0.path(),
        "a.data",
        &["-a", "-e", "task-clock,context-switches", "sleep", "0.05"],
    ) else {
        return;
    };
    let perf = Command::new("perf").args(["stat", "report", "-i", &path, "-A"]).output().unwrap();
    let mut theirs = perf_counts(&String::from_utf8_lossy(&perf.stderr), &events);
    let mut ours = perf_counts(&stderr(&ok(&["report", "-i", &path, "-A"])), &events);
    theirs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    ours.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert!(theirs.iter().any(|(name, _)| name.starts_with("CPU1")), "{theirs:?}");
    assert_eq!(theirs, ours);
}

#[test]
fn damaged_perf_data_is_an_error_with_the_offset() {
    if !perf_works() {
        eprintln!("skipped: perf is not installed");
        return;
    }
    let s = Scratch::new("perfbad");
    let Some(path) = perf_record(s.0.path(), "p.data", &["-e", "task-clock", "true"]) else {
        eprintln!("skipped: `perf stat record` failed here");
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let cut = s.path("cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = tmetric(&["report", "-i", &cut]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cut.data: at byte"), "{}", stderr(&out));
}

#[test]
fn retire_latencies_are_recorded_with_the_counts() {
    let s = Scratch::new("rl");
    let latencies = s.path("rl.json");
    std::fs::write(&latencies, r#"{"MEM_INST_RETIRED.STLB_HIT_LOADS": 7.5}"#).unwrap();
    let file = s.path("rl.jsonl");
    let live = ok(&[
        "record",
        "--format",
        "jsonl",
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_load_stlb_hit",
        "--retire-latency",
        &latencies,
        "-a",
        "-x,",
        "-o",
        &file,
        "sleep",
        "0.05",
    ]);
    // The latency file is gone at report time: the record holds the value.
    std::fs::remove_file(&latencies).unwrap();
    let replay = ok(&["report", "-i", &file, "-x,"]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    let text = stderr(&replay);
    assert!(text.lines().any(|l| l.starts_with("8,cycles,") && l.contains("/R")), "{text}");
    let v = csv_metrics(&text).into_iter().find(|m| m.0 == "tma_load_stlb_hit").unwrap().1;
    assert!(v > 0.0, "{text}");
}

#[test]
fn metrics_not_selected_at_record_time_use_the_recorded_events() {
    let s = Scratch::new("later");
    let file = s.path("r.jsonl");
    ok(&[
        "--perf-version",
        "6.12",
        "record",
        "--format",
        "jsonl",
        "-e",
        "task-clock,page-faults",
        "-M",
        "cpus_utilized",
        "-x,",
        "-o",
        &file,
        "sleep",
        "0.05",
    ]);
    let out =
        ok(&["--perf-version", "6.12", "report", "-i", &file, "-x,", "-M", "page_faults_per_sec"]);
    let text = stderr(&out);
    let field = |event: &str| -> f64 {
        let line = text.lines().find(|l| l.contains(&format!(",{event},"))).unwrap();
        line.split(',').next().unwrap().parse().unwrap()
    };
    let (clock_ms, faults) = (field("task-clock"), field("page-faults"));
    let rate = csv_metrics(&text).into_iter().find(|m| m.0 == "page_faults_per_sec").unwrap().1;
    // page faults per second of task-clock time; the printed clock has 2 decimals.
    let expected = faults / (clock_ms / 1e3);
    assert!((rate - expected).abs() < 0.01 * expected, "{rate} vs {expected}: {text}");
    // A metric whose events were not recorded says so.
    let out = ok(&[
        "--perf-version",
        "6.12",
        "report",
        "-i",
        &file,
        "-x,",
        "-M",
        "context_switches_per_sec",
    ]);
    assert!(
        stderr(&out).contains(
            "context_switches_per_sec: `context-switches` was not counted in the recording"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn per_thread_records_round_trip() {
    let s = Scratch::new("thread");
    let file = s.path("t.jsonl");
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id().to_string();
    let live = tmetric(&[
        "record",
        "--format",
        "jsonl",
        "-p",
        &pid,
        "--per-thread",
        "-e",
        "task-clock,context-switches",
        "-I",
        "50",
        "--interval-count",
        "2",
        "--summary",
        "-x,",
        "-o",
        &file,
    ]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(live.status.success(), "{}", stderr(&live));
    let replay = ok(&["report", "-i", &file, "-x,"]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    let label = format!("sleep-{pid},");
    assert!(
        stderr(&replay).lines().filter(|l| l.contains(&label)).count() >= 6,
        "{}",
        stderr(&replay)
    );
}

#[test]
fn sampled_retire_latencies_round_trip() {
    let s = Scratch::new("tpebs");
    let file = s.path("tp.jsonl");
    let live = ok(&[
        "record",
        "--format",
        "jsonl",
        "--pmu-sim",
        "meteorlake",
        "-M",
        "tma_load_stlb_hit",
        "--record-tpebs",
        "-a",
        "-I",
        "40",
        "--summary",
        "-x,",
        "-o",
        &file,
        "sleep",
        "0.1",
    ]);
    let replay = ok(&["report", "-i", &file, "-x,"]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().filter(|l| l.contains("\"t\":\"latency\"")).count() >= 2, "{text}");
    let stats: serde_json::Value =
        serde_json::from_str(text.lines().find(|l| l.contains("\"t\":\"tpebs\"")).unwrap())
            .unwrap();
    assert!(stats["samples"].as_u64().unwrap() > 0, "{stats}");
    // Another statistic of the same samples: the latency row shows the recorded maximum.
    let max: f64 = stats["max"].as_str().unwrap().parse().unwrap();
    let out = ok(&["report", "-i", &file, "-x,", "--tpebs-mode", "max"]);
    let row = stderr(&out)
        .lines()
        .rev()
        .find(|l| l.contains(",cycles,") && l.contains("/R,"))
        .map(str::to_string)
        .unwrap();
    // The totals of an interval run carry perf's `summary` field first.
    let count = row.strip_prefix("summary,").expect(&row).split(',').next().unwrap();
    assert_eq!(count.parse::<f64>().unwrap(), max.round(), "{row}");
}

/// Uncore events on every box (a metric's and `-e`'s) round trip in both formats: `report`
/// merges the boxes into one line and computes the metric from their sum as `stat` did, and
/// `report -A` prints each box apart, as `stat -A` does.
#[test]
fn uncore_boxes_round_trip_merged_and_per_box() {
    let s = Scratch::new("uncore");
    for format in ["jsonl", "perf"] {
        let file = s.path(&format!("uncore.{format}"));
        let live = ok(&[
            "record",
            "--format",
            format,
            "--pmu-sim",
            "sapphirerapids",
            "-M",
            "memory_bandwidth_read",
            "-e",
            "uncore_imc/cas_count_write/",
            "-a",
            "-x,",
            "-o",
            &file,
            "sleep",
            "0.1",
        ]);
        let text = stderr(&live);
        let replay = ok(&["report", "-i", &file, "-x,"]);
        assert_eq!(printed(&text), printed(&stderr(&replay)), "{format}");
        let events: Vec<&str> =
            text.lines().filter_map(|l| l.split(',').nth(2)).filter(|e| !e.is_empty()).collect();
        assert!(events.contains(&"UNC_M_CAS_COUNT.RD"), "{format}: {text}");
        assert!(events.contains(&"uncore_imc/cas_count_write/"), "{format}: {text}");
        assert!(!text.contains("uncore_imc_0"), "{format}: {text}");
        let bandwidth = csv_metrics(&text)
            .into_iter()
            .find(|m| m.0 == "memory_bandwidth_read")
            .map(|m| m.1)
            .expect("a value");
        // The default workload's 8000 MB/s, from both boxes of both packages.
        assert!((bandwidth - 8000.0).abs() < 80.0, "{format}: {bandwidth}: {text}");
        let per_box = stderr(&ok(&["report", "-i", &file, "-x,", "-A"]));
        for name in [
            "UNC_M_CAS_COUNT.RD [uncore_imc_0]",
            "UNC_M_CAS_COUNT.RD [uncore_imc_1]",
            "uncore_imc_0/cas_count_write/",
            "uncore_imc_1/cas_count_write/",
        ] {
            let lines: Vec<&str> =
                per_box.lines().filter(|l| l.split(',').nth(3) == Some(name)).collect();
            assert_eq!(lines.len(), 2, "{format}: {name} on each package's CPU: {per_box}");
        }
    }
}

/// `--errors` bars survive a record in both formats: `report --errors` prints the same
/// `metric-error` values as `stat --errors -j` printed, and the same `±` beside the values
/// in the default layout; without `--errors` neither prints a bar (perf's JSON has no such
/// key); a record made without `--errors` has no reads, and `report --errors` says so.
#[test]
fn error_bars_round_trip_and_print_only_when_asked() {
    let s = Scratch::new("errors");
    let errors = |text: &str| -> Vec<(String, String)> {
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| {
                let unit = v.get("metric-unit")?.as_str()?.to_string();
                let error = v.get("metric-error")?.as_str()?.to_string();
                Some((unit, error))
            })
            .collect()
    };
    for format in ["jsonl", "perf"] {
        let file = s.path(&format!("errors.{format}"));
        let live = ok(&[
            "record",
            "--format",
            format,
            "--pmu-sim",
            "sapphirerapids",
            "--pmu-sim-workload",
            "phased",
            "-M",
            "TopdownL3",
            "-a",
            "--errors",
            "-j",
            "-o",
            &file,
            "sleep",
            "0.6",
        ]);
        let live = errors(&stderr(&live));
        // TopdownL3 needs more counters than the machine has: most metrics are multiplexed.
        assert!(live.len() >= 10, "{format}: {live:?}");
        assert!(
            live.iter().all(|(_, e)| e.parse::<f64>().is_ok_and(|e| e >= 0.0)),
            "{format}: {live:?}"
        );
        let replay = errors(&stderr(&ok(&["report", "-i", &file, "-j", "--errors"])));
        assert_eq!(live, replay, "{format}");
        assert!(errors(&stderr(&ok(&["report", "-i", &file, "-j"]))).is_empty(), "{format}");
        let text = stderr(&ok(&["report", "-i", &file, "--errors"]));
        let shown = text.lines().filter(|l| l.contains(" % ") && l.contains(" ± ")).count();
        assert_eq!(shown, live.len(), "{format}: {text}");
        let plain = stderr(&ok(&["report", "-i", &file]));
        assert!(!plain.contains('±'), "{format}: {plain}");
    }
    // Under the kernel's rotation, without --errors or -v, no reads are kept (tmetric's own
    // rotation keeps them: its estimate needs them).
    let file = s.path("plain.jsonl");
    ok(&[
        "record",
        "--format",
        "jsonl",
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL3",
        "-a",
        "--rotation",
        "kernel",
        "-o",
        &file,
        "sleep",
        "0.1",
    ]);
    let out = ok(&["report", "-i", &file, "--errors"]);
    assert!(
        stderr(&out)
            .contains("the record keeps no reads for error bars (record with --errors or -v)"),
        "{}",
        stderr(&out)
    );
}

/// `report` prints why a metric is 0 or nan where a literal or a probe of the recorded
/// machine decides it, as `stat` did, in both record formats and every layout's notes.
#[test]
fn report_says_why_a_fact_decides_a_value() {
    let s = Scratch::new("why");
    for format in ["jsonl", "perf"] {
        let file = s.path(&format!("why.{format}"));
        let live = ok(&[
            "--perf-version",
            "6.12",
            "record",
            "--format",
            format,
            "--pmu-sim",
            "sapphirerapids",
            "-M",
            "tma_pmm_bound,tsx_transactional_cycles",
            "-a",
            "-o",
            &file,
            "sleep",
            "0.1",
        ]);
        let pmm = "tma_pmm_bound: 0 because #has_pmem is 0 on this machine: this machine has no persistent memory (no ACPI NFIT table)";
        let tsx = "tsx_transactional_cycles: 0 because has_event(cycles-t) is false: this machine has no `cycles-t` event";
        assert!(stderr(&live).contains(pmm), "{format}: {}", stderr(&live));
        // With -x and -j the notes join perf's lines when asked for.
        for layout in [&[][..], &["-x,", "-v"][..], &["-j", "--full-metrics"][..]] {
            let mut args = vec!["--perf-version", "6.12", "report", "-i", &file];
            args.extend_from_slice(layout);
            let text = stderr(&ok(&args));
            assert!(text.contains(pmm) && text.contains(tsx), "{format} {layout:?}: {text}");
        }
        // Another metric of the recorded counts, chosen at report time, too.
        let other = stderr(&ok(&[
            "--perf-version",
            "6.12",
            "report",
            "-i",
            &file,
            "-M",
            "tma_info_system_mem_pmm_read_latency",
        ]));
        assert!(
            other.contains(
                "tma_info_system_mem_pmm_read_latency: 0 because #has_pmem is 0 on this machine"
            ),
            "{format}: {other}"
        );
    }
}

/// A record keeps the vintage of its vendor tables and the perf release it printed as, and
/// `report` evaluates with them: the default run's (the newest vintage's tables, where perf's
/// own `CPUs_utilized` is; perf 6.12's output) and, for a file written before records kept
/// them, perf 6.12's (where tmetric's `cpus_utilized` is). A vintage this build does not
/// store is refused naming the file, unless --perf-version chooses one.
#[test]
fn records_keep_their_vintage_and_older_files_read_as_perf_6_12s() {
    let s = Scratch::new("vintage");
    let pmu_events = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmu-events");
    let newest = tmetric_pmu_events::vintage::stored(&pmu_events).pop().unwrap();
    let header = |file: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(file).unwrap();
        serde_json::from_str(text.lines().next().unwrap()).unwrap()
    };
    let rewrite = |from: &str, to: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let text = std::fs::read_to_string(from).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut h: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        edit(&mut h);
        lines[0] = h.to_string();
        std::fs::write(to, lines.join("\n") + "\n").unwrap();
    };

    let new = s.path("new.jsonl");
    let live =
        ok(&["record", "--format", "jsonl", "-M", "CPUs_utilized", "-o", &new, "sleep", "0.05"]);
    let h = header(&new);
    assert_eq!((h["vintage"].as_str(), h["contract"].as_str()), (Some(&*newest), Some("6.12")));
    let replay = ok(&["report", "-i", &new]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    assert!(stderr(&replay).contains("CPUs_utilized"), "{}", stderr(&replay));

    let written = s.path("written.jsonl");
    let live = ok(&[
        "record",
        "--perf-version",
        "6.12",
        "--format",
        "jsonl",
        "-M",
        "cpus_utilized",
        "-o",
        &written,
        "sleep",
        "0.05",
    ]);
    let old = s.path("old.jsonl");
    rewrite(&written, &old, &|h| {
        let h = h.as_object_mut().unwrap();
        assert!(h.remove("vintage").is_some() && h.remove("contract").is_some());
    });
    let replay = ok(&["report", "-i", &old]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
    assert!(stderr(&replay).contains("cpus_utilized"), "{}", stderr(&replay));

    let unknown = s.path("unknown.jsonl");
    rewrite(&written, &unknown, &|h| h["vintage"] = "9.9".into());
    let out = tmetric(&["report", "-i", &unknown]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&unknown) && err.contains("perf `9.9`"), "{err}");
    let replay = ok(&["report", "-i", &unknown, "--perf-version", "6.12"]);
    assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)));
}
