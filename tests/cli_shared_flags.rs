//! The flags several subcommands share (`crates/cli/args.rs`) mean one thing in each:
//! `-x`'s separator (perf 6.12's `-x '\t'` is a tab, `-x ''` glues the fields), `-x` with
//! `-j`, `--color` only in the default layout, and `-M` naming nothing. Each case runs every
//! subcommand that takes the flag; the expected text is another run's output with its
//! separator swapped, or perf's own where it is installed, never a copy of tmetric's.

use std::path::Path;
use std::process::Command;

use crate::support::{stderr, stdout, tmetric};

/// A `perf stat` log of the importer's fixtures.
fn log(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/perfstat/tests/data")
        .join(rel)
        .display()
        .to_string()
}

/// The standard output of a successful run.
fn ok_out(args: &[&str]) -> String {
    let out = tmetric(args);
    assert!(out.status.success(), "tmetric {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// The standard error of a successful run (where `stat`, `record` and `report` print counts).
fn ok_err(args: &[&str]) -> String {
    let out = tmetric(args);
    assert!(out.status.success(), "tmetric {args:?}: {}", stderr(&out));
    stderr(&out)
}

/// A CSV line's shape: each run of digits and points is `N`, so two runs' lines compare.
fn shape(line: &str) -> String {
    let mut shaped = String::new();
    for c in line.chars() {
        if c.is_ascii_digit() || c == '.' {
            if !shaped.ends_with('N') {
                shaped.push('N');
            }
        } else {
            shaped.push(c);
        }
    }
    shaped
}

/// `eval --from-perf`: `-x '\t'` is a tab and `-x ''` glues the fields, as in `stat`; an
/// empty separator once put a space between every character of every field.
#[test]
fn eval_from_perf_reads_a_tab_and_an_empty_separator_as_perf_does() {
    for fixture in ["seed004/mtl_tma_dtlb_store.txt", "real/csv_semicolon_interval_per_core.txt"] {
        let path = log(fixture);
        let bar = ok_out(&["eval", "--from-perf", &path, "-x", "|"]);
        let rows = bar.lines().filter(|l| !l.starts_with('#')).count();
        assert!(rows > 0 && bar.contains('|'), "{bar}");
        // The comment lines' words are not fields; the columns' line is.
        let swap = |sep: &str| -> Vec<String> {
            let fields = |l: &str| !l.starts_with('#') || l.starts_with("# columns: ");
            bar.lines().map(|l| if fields(l) { l.replace('|', sep) } else { l.into() }).collect()
        };
        let tab = ok_out(&["eval", "--from-perf", &path, "-x", "\\t"]);
        assert_eq!(tab.lines().collect::<Vec<_>>(), swap("\t"), "{fixture}");
        let glued = ok_out(&["eval", "--from-perf", &path, "-x", ""]);
        assert_eq!(glued.lines().collect::<Vec<_>>(), swap(""), "{fixture}");
    }
}

/// `record` prints its counts with the separator given, and `report` prints the record with
/// the same one: a tab for `\t`, nothing for `''`, as a `|` run with `|` swapped.
#[test]
fn record_and_report_read_a_tab_and_an_empty_separator_alike() {
    let dir = tempfile::Builder::new().prefix("tmetric-sep-").tempdir().unwrap();
    for (i, (flag, sep)) in [("\\t", "\t"), ("", "")].into_iter().enumerate() {
        let file = dir.path().join(format!("run{i}.data"));
        let file = file.to_str().unwrap();
        let recorded =
            ok_err(&["record", "-o", file, "-x", flag, "-e", "task-clock,page-faults", "true"]);
        assert_eq!(recorded.lines().count(), 2, "{recorded}");
        let reported = ok_err(&["report", "-i", file, "-x", flag]);
        assert_eq!(reported, recorded, "report -x {flag:?}");
        let bar = ok_err(&["report", "-i", file, "-x", "|"]);
        assert_eq!(bar.lines().next().unwrap().split('|').count(), 7, "{bar}");
        assert_eq!(reported, bar.replace('|', sep), "report -x {flag:?}");
    }
}

/// `stat -x '\t'` gives perf's seven fields between tabs, and `-x ''` the same fields glued;
/// where perf runs here, its `-x ''` lines have the same shape.
#[test]
fn stat_reads_a_tab_and_an_empty_separator_as_perf_does() {
    let events = ["-e", "task-clock,page-faults", "true"];
    let run = |sep: &str| {
        let mut args = vec!["stat", "-x", sep];
        args.extend(events);
        ok_err(&args)
    };
    let tab = run("\\t");
    for line in tab.lines() {
        assert_eq!(line.split('\t').count(), 7, "{line:?}");
    }
    let bar = run("|");
    let glued = run("");
    let shapes = |text: &str| text.lines().map(shape).collect::<Vec<_>>();
    assert_eq!(shapes(&glued), shapes(&bar.replace('|', "")), "{glued}");
    assert_eq!(shapes(&tab.replace('\t', "|")), shapes(&bar), "{tab}");
    let perf = Command::new("perf").args(["stat", "-x", ""]).args(events).output();
    if let Ok(perf) = perf
        && perf.status.success()
    {
        let text = String::from_utf8_lossy(&perf.stderr).into_owned();
        assert_eq!(shapes(&glued), shapes(&text), "perf: {text}\ntmetric: {glued}");
    }
}

/// The JSON line up to its running fields and the CSV line's fields after them, joined: what
/// perf 6.12 prints for one line with `-x SEP -j`. It sets both `csv_output` and
/// `json_output`; `print_counter_aggrdata` and every field printer test JSON first, but
/// `printout` picks the metric printers testing CSV first (util/stat-display.c), so the
/// metrics of a JSON line print as `SEP value SEP unit`, and the line has no closing brace.
fn json_then_csv_metrics(json: &str, csv: &str, sep: char) -> String {
    let key = "\"pcnt-running\" : ";
    let at = json.find(key).expect("a running percentage") + key.len();
    let end = at + json[at..].find(", ").expect("its comma") + 2;
    // perf's CSV fields before the metrics: value, unit, event, run time, percentage.
    let metrics = csv.splitn(6, sep).nth(5).map_or(String::new(), |m| format!("{sep}{m}"));
    format!("{}{metrics}", &json[..end])
}

/// `-x` with `-j`: `stat`, `record` and `report` print as perf 6.12 does (exit 0, on standard
/// error): each JSON line keeps its counter's keys and gets its metrics in CSV; the
/// expectation joins the same record's `-j` and `-x` reports. `eval`, tmetric's own, refuses
/// the pair as a usage error.
#[test]
fn a_separator_with_json_prints_json_lines_with_csv_metrics_as_perf_does() {
    let dir = tempfile::Builder::new().prefix("tmetric-sep-").tempdir().unwrap();
    let file = dir.path().join("run.data");
    let file = file.to_str().unwrap();
    let events = ["-e", "task-clock,page-faults,cycles", "true"];
    let recorded = ok_err(&[&["record", "-o", file, "-x", ";", "-j"][..], &events].concat());
    let json = ok_err(&["report", "-i", file, "-j"]);
    let csv = ok_err(&["report", "-i", file, "-x", ";"]);
    let both = ok_err(&["report", "-i", file, "-x", ";", "-j"]);
    assert_eq!(json.lines().count(), 3, "{json}");
    let expected: Vec<String> =
        json.lines().zip(csv.lines()).map(|(j, c)| json_then_csv_metrics(j, c, ';')).collect();
    assert_eq!(both.lines().collect::<Vec<_>>(), expected, "{both}");
    assert_eq!(recorded, both);
    // A counted line carries its metric; `cycles` is not supported here, so `;;`.
    assert!(expected[0].ends_with("CPUs utilized"), "{}", expected[0]);
    assert!(expected[2].ends_with("100.00, ;;"), "{}", expected[2]);
    // A live run: the same lines, up to its own counts; where perf runs here (perf 6.1
    // prints this pair as 6.12 does), its lines have the same shape.
    let out = tmetric(&[&["stat", "-x", ";", "-j"][..], &events].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let shapes = |text: &str| text.lines().map(shape).collect::<Vec<_>>();
    assert_eq!(shapes(&stderr(&out)), shapes(&both), "{}", stderr(&out));
    let software = ["-e", "task-clock,page-faults", "true"];
    let perf = Command::new("perf").args(["stat", "-x", ";", "-j"]).args(software).output();
    if let Ok(perf) = perf
        && perf.status.success()
    {
        let ours = ok_err(&[&["stat", "-x", ";", "-j"][..], &software].concat());
        assert_eq!(shapes(&ours), shapes(&String::from_utf8_lossy(&perf.stderr)), "{ours}");
    }
    let path = log("seed004/mtl_tma_dtlb_store.txt");
    let out = tmetric(&["eval", "--from-perf", &path, "-x", ",", "-j"]);
    assert_eq!(out.status.code(), Some(129), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot be used with '--json'"), "{}", stderr(&out));
}

/// `--color always` colours the default layout's threshold values and never CSV or JSON, in
/// `eval` and in `report` (of a simulated run, whose TopdownL1 values have thresholds).
#[test]
fn colour_is_for_the_default_layout_only() {
    let dir = tempfile::Builder::new().prefix("tmetric-colour-").tempdir().unwrap();
    let file = dir.path().join("td.data");
    let file = file.to_str().unwrap();
    let sim = ["--pmu-sim", "skylakex", "-M", "TopdownL1", "-a", "-o", file, "sleep", "0.1"];
    ok_err(&[&["record"][..], &sim].concat());
    let path = log("seed004/mtl_tma_dtlb_store.txt");
    let eval = |layout: &[&str]| {
        let args = [&["eval", "--from-perf", &path, "--color"], layout].concat();
        ok_out(&args)
    };
    let report = |layout: &[&str]| ok_err(&[&["report", "-i", file, "--color"], layout].concat());
    for run in [&eval as &dyn Fn(&[&str]) -> String, &report] {
        assert!(run(&["always"]).contains('\x1b'), "{}", run(&["always"]));
        for layout in [&["always", "-x", ","][..], &["always", "-j"], &["never"]] {
            assert!(!run(layout).contains('\x1b'), "{layout:?}: {}", run(layout));
        }
    }
}

/// `-M` naming nothing (`-M ''`, `-M ,`) is a mistake refused with one message by every
/// subcommand that takes `-M`, never read as "no -M" (the default selection) or an empty plan.
#[test]
fn metrics_naming_nothing_are_refused_by_every_subcommand() {
    let dir = tempfile::Builder::new().prefix("tmetric-sep-").tempdir().unwrap();
    let file = dir.path().join("run.data");
    let file = file.to_str().unwrap();
    ok_err(&["record", "-o", file, "-e", "task-clock", "true"]);
    let path = log("seed004/mtl_tma_dtlb_store.txt");
    let runs: [&[&str]; 7] = [
        &["stat", "-e", "task-clock", "true"],
        &["record", "-o", file, "-e", "task-clock", "true"],
        &["report", "-i", file],
        &["eval", "--from-perf", &path],
        &["plan"],
        &["serve", "--once"],
        &["rules"],
    ];
    for run in runs {
        for empty in ["", ","] {
            let mut args = run.to_vec();
            args.splice(1..1, ["-M", empty]);
            let out = tmetric(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert_eq!(
                stderr(&out),
                "tmetric: -M names no metric or group; give a comma-separated list such as `-M Software`\n",
                "{args:?}"
            );
        }
    }
}
