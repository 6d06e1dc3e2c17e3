//! `tmetric record` in perf's format (the default): round trips through `tmetric report` on
//! this machine's kernel (software events) and on the simulated kernel; the installed perf
//! reading the files and pipes (`perf stat report`, `perf script`, perf 6.12's
//! tests/shell/stat.sh checks); perf's file handling (`perf.data` in the current directory,
//! the old one kept as `perf.data.old`, mode 0600, symbolic links moved rather than
//! followed); `report -i -` on a pipe of either format; damaged files; and the metrics of a
//! `perf stat record -a` file.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::{ok, stderr, tmetric};

/// A scratch directory for one test, made under a name nobody can guess (the tests run as
/// root), removed when it ends.
struct Scratch {
    root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tmetric-rperf-{name}-"))
            .tempdir()
            .expect("a private directory");
        Scratch { root: dir.path().to_path_buf(), _dir: dir }
    }

    fn path(&self, file: &str) -> String {
        self.root.join(file).display().to_string()
    }
}

/// `tmetric args` in `dir`.
fn tmetric_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tmetric")).current_dir(dir).args(args).output().unwrap()
}

/// `program args` with `input` on its standard input.
fn piped(program: &str, args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // perf may stop reading early; a closed pipe is its business.
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// stat's stderr without the lines only a live run prints (the simulator's warning).
fn printed(text: &str) -> Vec<String> {
    text.lines().filter(|l| !l.contains("simulated PMU `")).map(str::to_string).collect()
}

/// CSV metric values by name: perf's last two fields are the value and `unit  name` (or
/// the name alone, or a built-in metric's label).
fn csv_metrics(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let name = f.last()?.rsplit("  ").next()?.to_string();
            let value = f.get(f.len().checked_sub(2)?)?.parse().ok()?;
            (!name.is_empty()).then_some((name, value))
        })
        .collect()
}

fn perf_works() -> bool {
    Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Counts by event name from std output (perf's or tmetric's): the number before the
/// event name (before `msec` for the clocks), with the interval's time when there is one.
fn counts(text: &str, events: &[&str]) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let time = fields.first().filter(|f| f.contains('.') && f.parse::<f64>().is_ok());
        for e in events {
            if let Some(i) = fields.iter().position(|f| f == e)
                && i >= 1
            {
                let count = if fields[i - 1] == "msec" { fields[i - 2] } else { fields[i - 1] };
                if let Ok(v) = count.replace(',', "").parse::<f64>() {
                    let at = time.map_or(String::new(), |t| format!("{t} "));
                    out.push((format!("{at}{e}"), v));
                }
            }
        }
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    out
}

#[test]
fn round_trips_print_what_stat_printed() {
    let s = Scratch::new("rt");
    let file = s.path("r.data");
    let latencies = s.path("rl.json");
    std::fs::write(&latencies, r#"{"MEM_INST_RETIRED.STLB_HIT_LOADS": 7.5}"#).unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["-e", "task-clock,context-switches", "sleep", "0.05"],
        vec!["-e", "task-clock,context-switches", "-x,", "sleep", "0.05"],
        vec!["-e", "task-clock,context-switches", "-j", "sleep", "0.05"],
        // `cycles` cannot be opened in a VM without a PMU: its note comes back too.
        vec!["-e", "task-clock,cycles", "sleep", "0.05"],
        vec!["-a", "-I", "20", "--summary", "-x,", "-e", "task-clock,context-switches", "sleep"],
        vec!["--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a", "-x,", "sleep", "0.1"],
        // The recorded aggregation is the report's default, as perf stat report's.
        vec!["-a", "-A", "-e", "task-clock,context-switches", "sleep", "0.05"],
        vec!["--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a", "--per-core", "sleep"],
        vec![
            "--pmu-sim",
            "meteorlake",
            "-M",
            "tma_load_stlb_hit",
            "--retire-latency",
            &latencies,
            "-a",
            "-x,",
            "sleep",
            "0.05",
        ],
        vec![
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
            "sleep",
            "0.1",
        ],
    ];
    for run in runs {
        let mut args = vec!["record", "-o", &file];
        args.extend_from_slice(&run);
        if args.last() == Some(&"sleep") {
            args.push("0.07");
        }
        let live = ok(&args);
        let mut rargs = vec!["report", "-i", &file];
        rargs.extend(run.iter().filter(|a| ["-x,", "-j"].contains(a)));
        let replay = ok(&rargs);
        assert_eq!(printed(&stderr(&live)), printed(&stderr(&replay)), "{run:?}");
        assert!(stderr(&replay).lines().count() >= 2, "{run:?}: {}", stderr(&replay));
    }
    // The last run's file: sampled latencies, recorded per interval, another statistic.
    let max = ok(&["report", "-i", &file, "-x,", "--tpebs-mode", "max"]);
    let min = ok(&["report", "-i", &file, "-x,", "--tpebs-mode", "min"]);
    let row = |o: &Output| -> f64 {
        let text = stderr(o);
        let line = text.lines().rev().find(|l| l.contains(",cycles,") && l.contains("/R,"));
        let line = line.unwrap();
        line.strip_prefix("summary,").unwrap_or(line).split(',').next().unwrap().parse().unwrap()
    };
    assert!(row(&max) > row(&min), "{} vs {}", stderr(&max), stderr(&min));
}

#[test]
fn recorded_topdown_evaluates_metrics_not_selected_at_record_time() {
    let s = Scratch::new("td");
    let file = s.path("td.data");
    ok(&[
        "record",
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "-o",
        &file,
        "sleep",
        "0.1",
    ]);
    let l1 = csv_metrics(&stderr(&ok(&["report", "-i", &file, "-x,"])));
    let retiring = l1.iter().find(|m| m.0 == "tma_retiring").expect("tma_retiring").1;
    assert!(retiring > 0.0 && retiring < 100.0, "{l1:?}");
    let l2 = ok(&["report", "-i", &file, "-x,", "-M", "tma_heavy_operations,tma_light_operations"]);
    let l2 = csv_metrics(&stderr(&l2));
    let heavy = l2.iter().find(|m| m.0 == "tma_heavy_operations").expect("heavy").1;
    let light = l2.iter().find(|m| m.0 == "tma_light_operations").expect("light").1;
    assert!(heavy > 0.0 && (heavy + light - retiring).abs() < 1e-6, "{heavy} + {light}");
    // Per core from the recorded topology: 2 sockets x 2 cores x 2 threads.
    let per_core = stderr(&ok(&["report", "-i", &file, "-x,", "--per-core"]));
    let units: std::collections::BTreeSet<&str> = per_core
        .lines()
        .filter_map(|l| l.split(',').next())
        .filter(|u| u.starts_with('S'))
        .collect();
    assert_eq!(units.len(), 4, "{per_core}");
}

#[test]
fn perf_reads_tmetric_files() {
    if !perf_works() {
        eprintln!("skipped: perf is not installed");
        return;
    }
    let s = Scratch::new("perf");
    let events = ["task-clock", "context-switches", "page-faults"];
    let file = s.path("f.data");
    let live = ok(&["record", "-e", &events.join(","), "-o", &file, "sleep", "0.05"]);
    let perf = Command::new("perf").args(["stat", "report", "-i", &file]).output().unwrap();
    let text = String::from_utf8_lossy(&perf.stderr).to_string();
    assert!(perf.status.success(), "{text}");
    // The same counts, and nothing else on perf's standard error: no warnings.
    assert_eq!(counts(&text, &events), counts(&stderr(&live), &events), "{text}");
    let title = text.lines().find(|l| l.contains("Performance counter stats for")).unwrap();
    assert!(title.contains("record -e task-clock,context-switches,page-faults"), "{title}");
    assert!(!text.to_lowercase().contains("warning"), "{text}");
    assert!(text.contains("CPUs utilized"), "{text}");
    // perf script: its header and one line per event, the raw values.
    let script = Command::new("perf").args(["script", "-i", &file]).output().unwrap();
    let out = String::from_utf8_lossy(&script.stdout).to_string();
    assert!(script.status.success(), "{}", String::from_utf8_lossy(&script.stderr));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["CPU", "THREAD", "VAL", "ENA", "RUN", "TIME", "EVENT"]
    );
    assert_eq!(lines.len(), 1 + events.len(), "{out}");
    assert!(lines[1..].iter().all(|l| l.starts_with(" -1")), "{out}");

    // Intervals, system-wide: perf prints each interval's change, as tmetric did.
    let file = s.path("iv.data");
    let ev = ["task-clock", "context-switches"];
    let live = ok(&["record", "-a", "-I", "30", "-e", &ev.join(","), "-o", &file, "sleep", "0.1"]);
    let perf = Command::new("perf").args(["stat", "report", "-i", &file]).output().unwrap();
    let theirs = counts(&String::from_utf8_lossy(&perf.stderr), &ev);
    assert!(theirs.len() >= 6, "{theirs:?}");
    assert_eq!(theirs, counts(&stderr(&live), &ev));

    // -A: perf prints per CPU, from the recorded aggregation mode.
    let file = s.path("a.data");
    let live = ok(&["record", "-a", "-A", "-e", "task-clock", "-o", &file, "sleep", "0.05"]);
    let perf = Command::new("perf").args(["stat", "report", "-i", &file]).output().unwrap();
    let text = String::from_utf8_lossy(&perf.stderr).to_string();
    let per_cpu = |t: &str| -> Vec<String> {
        let mut v: Vec<String> = t
            .lines()
            .filter(|l| l.starts_with("CPU"))
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect();
        v.sort();
        v
    };
    assert!(per_cpu(&text).len() >= 2, "{text}");
    assert_eq!(per_cpu(&text), per_cpu(&stderr(&live)));

    // Simulated Sapphire Rapids: perf reads the groups, the counts and the topology.
    let file = s.path("td.data");
    let ev = ["TOPDOWN.SLOTS", "topdown-retiring", "topdown-be-bound"];
    let live = ok(&[
        "record",
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "-a",
        "-o",
        &file,
        "sleep",
        "0.1",
    ]);
    let perf = Command::new("perf")
        .args(["stat", "report", "-i", &file, "--per-socket"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&perf.stderr).to_string();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("S0 ") || l.starts_with("S1 ")).count(),
        14,
        "{text}"
    );
    let perf = Command::new("perf").args(["stat", "report", "-i", &file]).output().unwrap();
    assert_eq!(counts(&String::from_utf8_lossy(&perf.stderr), &ev), counts(&stderr(&live), &ev));
    let header =
        Command::new("perf").args(["report", "--header-only", "-i", &file]).output().unwrap();
    let header = String::from_utf8_lossy(&header.stdout).to_string();
    for expected in [
        "# cpuid : GenuineIntel,6,143,8",
        "# nrcpus online : 8",
        "# group: {TOPDOWN.SLOTS,",
        "# cpu pmu capabilities: ",
    ] {
        assert!(header.contains(expected), "{expected}: {header}");
    }
}

/// Pipe mode, perf 6.12's tests/shell/stat.sh test_stat_record_report/_script: perf reads
/// `tmetric record -o -` from a pipe, and tmetric reads the same pipe.
#[test]
fn perf_reads_tmetric_pipes() {
    if !perf_works() {
        eprintln!("skipped: perf is not installed");
        return;
    }
    let pipe = tmetric(&["record", "-e", "task-clock", "-o", "-", "true"]);
    assert!(pipe.status.success(), "{}", stderr(&pipe));
    // As perf: nothing printed when recording to a pipe.
    assert!(stderr(&pipe).is_empty(), "{}", stderr(&pipe));
    let report = piped("perf", &["stat", "report", "-i", "-"], &pipe.stdout);
    let text = String::from_utf8_lossy(&report.stderr).to_string();
    assert!(text.contains("Performance counter stats for 'pipe':"), "{text}");
    assert!(report.status.success() && !text.to_lowercase().contains("warning"), "{text}");
    let script = piped("perf", &["script", "-i", "-"], &pipe.stdout);
    let out = String::from_utf8_lossy(&script.stdout).to_string();
    assert!(
        out.contains(
            "CPU   THREAD             VAL             ENA             RUN            TIME EVENT"
        ),
        "{out}"
    );
    assert!(
        script.status.success() && script.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&script.stderr)
    );
    // tmetric reads the same pipe and prints perf's count.
    let ours = piped(env!("CARGO_BIN_EXE_tmetric"), &["report", "-i", "-"], &pipe.stdout);
    assert!(ours.status.success(), "{}", stderr(&ours));
    assert_eq!(counts(&stderr(&ours), &["task-clock"]), counts(&text, &["task-clock"]));
}

#[test]
fn perf_data_in_the_current_directory_as_perf_handles_it() {
    let s = Scratch::new("cwd");
    let run = |expect: &str| {
        let out = tmetric_in(&s.root, &["record", "-e", "task-clock", "true"]);
        assert!(out.status.success(), "{expect}: {}", stderr(&out));
    };
    run("first");
    let data = s.root.join("perf.data");
    let meta = std::fs::symlink_metadata(&data).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let first = std::fs::read(&data).unwrap();
    run("second");
    assert_eq!(std::fs::read(s.root.join("perf.data.old")).unwrap(), first);
    assert_ne!(std::fs::read(&data).unwrap(), first);
    // `report` without -i reads perf.data (standard input here is not a pipe).
    let out = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .current_dir(&s.root)
        .arg("report")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(stderr(&out).contains("Performance counter stats for 'true'"), "{}", stderr(&out));

    // A symbolic link at perf.data is moved to perf.data.old, never written through.
    let victim = s.root.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::fs::remove_file(&data).unwrap();
    std::os::unix::fs::symlink(&victim, &data).unwrap();
    run("link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    let old = std::fs::symlink_metadata(s.root.join("perf.data.old")).unwrap();
    assert!(old.file_type().is_symlink());
    let meta = std::fs::symlink_metadata(&data).unwrap();
    assert!(meta.is_file() && meta.permissions().mode() & 0o777 == 0o600);
    // A dangling link too.
    std::fs::remove_file(&data).unwrap();
    std::os::unix::fs::symlink(s.root.join("nowhere"), &data).unwrap();
    run("dangling");
    assert!(!s.root.join("nowhere").exists());
    assert!(std::fs::symlink_metadata(&data).unwrap().is_file());
}

#[test]
fn report_reads_a_pipe_of_either_format() {
    let s = Scratch::new("stdin");
    let jsonl = s.path("r.jsonl");
    let live =
        ok(&["record", "--format", "jsonl", "-e", "task-clock", "-x,", "-o", &jsonl, "true"]);
    let bytes = std::fs::read(&jsonl).unwrap();
    let out = piped(env!("CARGO_BIN_EXE_tmetric"), &["report", "-i", "-", "-x,"], &bytes);
    assert_eq!(printed(&stderr(&out)), printed(&stderr(&live)));
    // Without -i, a pipe on standard input is read (perf stat report's rule).
    let pipe = tmetric(&["record", "-e", "task-clock,page-faults", "-x,", "-o", "-", "true"]);
    let out = piped(env!("CARGO_BIN_EXE_tmetric"), &["report", "-x,"], &pipe.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.lines().any(|l| l.contains(",page-faults,")), "{text}");
    let faults = text.lines().find(|l| l.contains(",page-faults,")).unwrap();
    assert!(faults.ends_with("/sec"), "perf's built-in rate: {text}");
}

#[test]
fn bad_files_and_flags_are_clear_errors() {
    let s = Scratch::new("bad");
    let pipe = tmetric(&["record", "-e", "task-clock", "-o", "-", "true"]);
    let bytes = pipe.stdout;
    // Record boundaries of the pipe (after its 16-byte header).
    let mut starts = Vec::new();
    let mut p = 16;
    while p < bytes.len() {
        starts.push(p);
        p += u16::from_le_bytes([bytes[p + 6], bytes[p + 7]]) as usize;
    }
    // Cut before the last record (tmetric's end line): the run did not finish.
    let cut = &bytes[..*starts.last().unwrap()];
    let out = piped(env!("CARGO_BIN_EXE_tmetric"), &["report", "-i", "-"], cut);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("the record is truncated"), "{}", stderr(&out));
    // Cut inside a record: the byte offset.
    let out =
        piped(env!("CARGO_BIN_EXE_tmetric"), &["report", "-i", "-"], &bytes[..bytes.len() - 3]);
    assert!(stderr(&out).contains("standard input: at byte"), "{}", stderr(&out));
    let out = piped(env!("CARGO_BIN_EXE_tmetric"), &["report", "-i", "-"], b"");
    assert!(stderr(&out).contains("standard input is empty"), "{}", stderr(&out));
    // A file cut short.
    let file = s.path("f.data");
    ok(&["record", "-e", "task-clock", "-o", &file, "true"]);
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, &whole[..whole.len() / 2]).unwrap();
    let out = tmetric(&["report", "-i", &file]);
    assert!(stderr(&out).contains("f.data: at byte"), "{}", stderr(&out));

    let out = tmetric(&["record", "--format", "jsonl", "-o", "-", "-e", "task-clock", "true"]);
    assert!(stderr(&out).contains("JSON lines are written to a file"), "{}", stderr(&out));
    let out = tmetric(&["record", "--format", "jsonl", "-e", "task-clock", "true"]);
    assert!(stderr(&out).contains("--format jsonl needs -o FILE"), "{}", stderr(&out));
    let out = tmetric(&["record", "-r", "2", "-o", &file, "-e", "task-clock", "true"]);
    assert!(stderr(&out).contains("Cannot use -r option"), "{}", stderr(&out));
}

#[test]
fn perf_stat_record_system_wide_files_get_perfs_metrics() {
    if !perf_works() {
        eprintln!("skipped: perf is not installed");
        return;
    }
    let s = Scratch::new("perf-a");
    let file = s.path("a.data");
    let rec = Command::new("perf")
        .args(["stat", "record", "-o", &file, "-a", "sleep", "0.1"])
        .output()
        .unwrap();
    if !rec.status.success() {
        eprintln!("skipped: `perf stat record -a` failed here");
        return;
    }
    let perf = Command::new("perf").args(["stat", "report", "-i", &file]).output().unwrap();
    let theirs = String::from_utf8_lossy(&perf.stderr).to_string();
    let ours = stderr(&ok(&["report", "-i", &file, "-x,"]));
    // perf's `CPUs utilized` and `/sec` (K/sec) figures, from cpu-clock.
    let perf_value = |event: &str| -> f64 {
        let line = theirs.lines().find(|l| l.contains(&format!(" {event} "))).unwrap();
        let after = line.split('#').nth(1).unwrap();
        let v: f64 = after.split_whitespace().next().unwrap().parse().unwrap();
        if after.contains("K/sec") { v * 1e3 } else { v }
    };
    // Ours: the same built-in metrics, in perf's CSV fields (value, label).
    let ours_value = |event: &str| -> Option<f64> {
        let line = ours.lines().find(|l| l.contains(&format!(",{event},")))?;
        let f: Vec<&str> = line.split(',').collect();
        let v: f64 = f[f.len() - 2].parse().ok()?;
        Some(if f[f.len() - 1] == "K/sec" { v * 1e3 } else { v })
    };
    for event in ["cpu-clock", "context-switches", "cpu-migrations", "page-faults"] {
        let ours = ours_value(event).unwrap_or_else(|| panic!("no metric for {event}: {ours}"));
        let theirs = perf_value(event);
        assert!((ours - theirs).abs() <= 0.001 * theirs.max(1.0), "{event}: {ours} vs {theirs}");
    }
    // Per core from the file's CPU topology: perf's units (`S0-D0-C1`) and CPU counts.
    let units = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter(|l| l.contains("cpu-clock") && l.starts_with("S"))
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .collect();
        v.sort();
        v
    };
    let perf = Command::new("perf").args(["stat", "report", "-i", &file, "--per-core"]).output();
    let theirs = units(&String::from_utf8_lossy(&perf.unwrap().stderr));
    let ours = units(&stderr(&ok(&["report", "-i", &file, "--per-core"])));
    assert!(!theirs.is_empty(), "{theirs:?}");
    assert_eq!(theirs, ours);
    // A system-wide -A file: per CPU by default, as perf stat report.
    let file = s.path("A.data");
    let rec = Command::new("perf")
        .args(["stat", "record", "-o", &file, "-a", "-A", "-e", "cpu-clock", "sleep", "0.05"])
        .output()
        .unwrap();
    assert!(rec.status.success());
    let ours = stderr(&ok(&["report", "-i", &file]));
    assert!(ours.lines().filter(|l| l.starts_with("CPU")).count() >= 2, "{ours}");
}

/// The unit labels a std layout prints before `task-clock` (`CPU0`, `S0-D0-C1`, `N0`, ...).
fn unit_labels(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains(" msec task-clock"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|first| first.parse::<f64>().is_err())
        .collect()
}

/// Every aggregation mode `record` takes is written to perf.data's `STAT_CONFIG` as perf
/// 6.12's `enum aggr_mode` numbers it (`-A` and `--no-merge` 0, `--per-socket` 2,
/// `--per-die` 3, `--per-cluster` 4, `--per-cache` 5 with its level, `--per-core` 6,
/// `--per-thread` 7, `--per-node` 9), and `report` prints in the recorded mode. The installed
/// perf 6.1 numbers its modes so up to `--per-die` and reads those files in the same units
/// as tmetric; for the others it is given the flag (its own numbering has other numbers for
/// them), and prints the same units.
#[test]
fn every_aggregation_mode_is_recorded_as_perf_numbers_it() {
    use tmetric_perfstat::Aggregation as A;
    let s = Scratch::new("aggr");
    let modes: [(&str, A, u64, Option<&str>); 9] = [
        ("", A::Global, 1, None),
        ("-A", A::Cpu, 0, None),
        ("--no-merge", A::Cpu, 0, None),
        ("--per-socket", A::Socket, 2, None),
        ("--per-die", A::Die, 3, None),
        ("--per-cluster", A::Cluster, 4, Some("--per-cluster")),
        ("--per-cache", A::Cache, 5, Some("--per-cache")),
        ("--per-core", A::Core, 6, Some("--per-core")),
        ("--per-node", A::Node, 9, Some("--per-node")),
    ];
    for (flag, mode, code, perf_flag) in modes {
        let file = s.path(&format!("m{code}{flag}.data"));
        let mut args = vec!["record", "-e", "task-clock", "-a", "-o", &file];
        args.extend([flag].iter().filter(|f| !f.is_empty()));
        args.extend(["sleep", "0.05"]);
        let live = ok(&args);
        let data = tmetric_perfdata::parse_perf_data(&std::fs::read(&file).unwrap());
        let data = data.unwrap();
        assert_eq!((data.aggr_mode, mode.code()), (Some(code), code), "{flag}");
        assert_eq!(data.aggregation(), Some(mode), "{flag}");
        assert_eq!(data.aggr_level, (mode == A::Cache).then_some(5), "{flag}: perf's LLC level");
        let report = ok(&["report", "-i", &file]);
        let labels = unit_labels(&stderr(&report));
        assert_eq!(labels, unit_labels(&stderr(&live)), "{flag}: as stat printed it");
        let expected_prefix = match mode {
            A::Global => "",
            A::Cpu => "CPU",
            A::Socket => "S",
            A::Die | A::Core | A::Cluster | A::Cache => "S0-D",
            A::Node => "N",
            A::Thread => unreachable!(),
        };
        assert!(
            mode == A::Global && labels.is_empty()
                || !labels.is_empty() && labels.iter().all(|l| l.starts_with(expected_prefix)),
            "{flag}: {labels:?}"
        );
        if !perf_works() {
            continue;
        }
        // perf 6.1 has no cache or cluster modes: it cannot be asked for those units.
        if matches!(mode, A::Cache | A::Cluster) {
            continue;
        }
        let mut pargs = vec!["stat", "report", "-i", &file];
        pargs.extend(perf_flag);
        let perf = Command::new("perf").args(&pargs).output().unwrap();
        assert_eq!(unit_labels(&stderr(&perf)), labels, "{flag}: perf {pargs:?}");
    }
    // --per-thread: the threads, by the file's mode alone.
    let file = s.path("thread.data");
    ok(&["record", "-e", "task-clock", "--per-thread", "-a", "-o", &file, "sleep", "0.05"]);
    let data = tmetric_perfdata::parse_perf_data(&std::fs::read(&file).unwrap());
    assert_eq!(data.unwrap().aggregation(), Some(A::Thread));
    let report = stderr(&ok(&["report", "-i", &file]));
    // Each line starts with a thread's `comm-tid`.
    let threads: Vec<&str> = report.lines().filter(|l| l.contains(" msec task-clock")).collect();
    // perf's `%16s-%-7d ` then the count (a comm may hold spaces: `opt cgu.14`).
    let comm_tid = |l: &&str| {
        let head = l.split(" msec task-clock").next().unwrap_or_default().trim_end();
        let column = head.rsplit_once(' ').map_or("", |(c, _count)| c).trim();
        column.rsplit_once('-').is_some_and(|(_, tid)| tid.parse::<u32>().is_ok())
    };
    let odd: Vec<&&str> = threads.iter().filter(|l| !comm_tid(l)).collect();
    assert!(threads.len() > 1 && odd.is_empty(), "{odd:?} in {report}");
}

/// A record of a simulated PMU says so in perf.data's own header, where `perf report
/// --header-only` and `perf stat report` show it: the CPU description names the simulator and
/// the command line holds `--pmu-sim`.
#[test]
fn simulated_records_say_so_in_perfs_header() {
    let s = Scratch::new("simhdr");
    let file = s.path("sim.data");
    ok(&[
        "record",
        "--pmu-sim",
        "sapphirerapids",
        "-e",
        "task-clock",
        "-a",
        "-o",
        &file,
        "sleep",
        "0.05",
    ]);
    let bytes = std::fs::read(&file).unwrap();
    let has = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(has("(simulated)") && has("--pmu-sim"), "the header names the simulator");
    if perf_works() {
        let header = Command::new("perf").args(["report", "--header-only", "-i", &file]).output();
        let text = String::from_utf8_lossy(&header.unwrap().stdout).into_owned();
        assert!(
            text.lines().any(|l| l.starts_with("# cpudesc") && l.contains("(simulated)")),
            "{text}"
        );
        let report = Command::new("perf").args(["stat", "report", "-i", &file]).output().unwrap();
        assert!(stderr(&report).contains("--pmu-sim sapphirerapids"), "{}", stderr(&report));
    }
}
