//! perf 6.12's layouts over hand-made lines. Expected texts follow perf's format strings in
//! `tools/perf/util/stat-display.c`; the default and CSV ones were also compared with what
//! perf 6.1 prints on this machine for `perf stat true`: the same but for 6.12's wider
//! metric column (`METRIC_LEN` 38, 35 in 6.1), so 6.12's lines end 3 spaces later.

use std::time::Duration;

use tmetric_engine::view::{Cell, CellSource, Colour, DefaultGroup, Fmt, Line, PrintedCount};
use tmetric_print::{Aggregation, Config, Footer, Layout, Printer, Title, Unit, UnitId};
use tmetric_runtime::locale::NumericLocale;

fn cell(value: f64, fmt: Fmt, label: &str) -> Cell {
    Cell {
        value,
        fmt: Some(fmt),
        label: Some(label.into()),
        colour: None,
        source: Some(CellSource { name: "x".into(), unit: label.into(), root: None }),
        error: None,
        impossible: false,
    }
}

fn line(row: usize, count: PrintedCount, unit: &str, name: &str, cells: Vec<Cell>) -> Line {
    let (running, enabled) = match count {
        PrintedCount::Value(_) => (1_000_000, 1_000_000),
        _ => (0, 0),
    };
    Line {
        row,
        part: 0,
        count,
        decimals: if unit == "msec" { 2 } else { 0 },
        unit: unit.into(),
        name: name.into(),
        running,
        enabled,
        noise: None,
        cgroup: None,
        default_groups: Vec::new(),
        cells: if cells.is_empty() { vec![Cell::none()] } else { cells },
    }
}

/// `perf stat true` on a machine without a hardware PMU.
fn no_args() -> Vec<Line> {
    vec![
        line(
            0,
            PrintedCount::Value(0.78),
            "msec",
            "task-clock",
            vec![cell(0.5, Fmt::RATE, "CPUs utilized")],
        ),
        line(
            1,
            PrintedCount::Value(1.0),
            "",
            "context-switches",
            vec![cell(1.281, Fmt::RATE, "K/sec")],
        ),
        line(
            2,
            PrintedCount::Value(48.0),
            "",
            "page-faults",
            vec![cell(61.489, Fmt::RATE, "K/sec")],
        ),
        line(3, PrintedCount::NotSupported, "", "cycles", vec![]),
    ]
}

fn print(config: Config, at: Option<Duration>, units: &[Unit], footer: Option<&Footer>) -> String {
    let mut p = Printer::new(Vec::new(), config);
    let title = Title { target: "true".into(), runs: 1 };
    p.counters(&title, at, units).unwrap();
    if let Some(f) = footer {
        p.footer(f).unwrap();
    }
    String::from_utf8(p.into_inner()).unwrap()
}

fn global(lines: Vec<Line>) -> Vec<Unit> {
    vec![Unit { id: UnitId::Global, cpus: 2, lines }]
}

#[test]
fn default_layout_is_perfs() {
    let footer = Footer { elapsed: 0.00156245, rusage: Some((0.00145, 0.0)), ..Footer::default() };
    let text = print(Config::new(Layout::Std), None, &global(no_args()), Some(&footer));
    let expected = "\n Performance counter stats for 'true':\n\n\
        \x20             0.78 msec task-clock                       #    0.500 CPUs utilized             \n\
        \x20                1      context-switches                 #    1.281 K/sec                     \n\
        \x20               48      page-faults                      #   61.489 K/sec                     \n\
        \x20  <not supported>      cycles                                                                \n\
        \n       0.001562450 seconds time elapsed\n\n\
        \x20      0.001450000 seconds user\n\
        \x20      0.000000000 seconds sys\n\n\n";
    assert_eq!(text, expected);
}

#[test]
fn csv_has_perfs_six_separators_and_trims_metric_values() {
    let text = print(Config::new(Layout::Csv(",".into())), None, &global(no_args()), None);
    let expected = "0.78,msec,task-clock,1000000,100.00,0.500,CPUs utilized\n\
        1,,context-switches,1000000,100.00,1.281,K/sec\n\
        48,,page-faults,1000000,100.00,61.489,K/sec\n\
        <not supported>,,cycles,0,100.00,,\n";
    assert_eq!(text, expected);
    for l in text.lines() {
        assert_eq!(l.matches(',').count(), 6, "{l}");
    }
}

#[test]
fn json_has_perfs_seven_keys_with_quoted_values() {
    let text = print(Config::new(Layout::Json), None, &global(no_args()), None);
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        r#"{"counter-value" : "0.780000", "unit" : "msec", "event" : "task-clock", "event-runtime" : 1000000, "pcnt-running" : 100.00, "metric-value" : "0.500000", "metric-unit" : "CPUs utilized"}"#
    );
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        r#"{"counter-value" : "<not supported>", "unit" : "", "event" : "cycles", "event-runtime" : 0, "pcnt-running" : 100.00, "metric-value" : "0.000000", "metric-unit" : ""}"#
    );
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 7, "{l}");
    }
}

#[test]
fn grouping_and_decimal_mark_follow_the_locale() {
    let lines = vec![line(
        0,
        PrintedCount::Value(2004.25),
        "msec",
        "task-clock",
        vec![cell(2.0, Fmt::RATE, "CPUs utilized")],
    )];
    let mut config = Config::new(Layout::Std);
    config.locale = NumericLocale::en_us();
    let text = print(config.clone(), None, &global(lines.clone()), None);
    assert!(text.contains("          2,004.25 msec task-clock"), "{text}");
    config.big_num = false;
    let text = print(config, None, &global(lines.clone()), None);
    assert!(text.contains("           2004.25 msec task-clock"), "{text}");
    let mut de = Config::new(Layout::Std);
    de.locale =
        NumericLocale { decimal_point: ",".into(), thousands_sep: ".".into(), grouping: vec![3] };
    let text = print(de, None, &global(lines), None);
    assert!(
        text.contains(
            "          2.004,25 msec task-clock                       #    2,000 CPUs utilized"
        ),
        "{text}"
    );
}

#[test]
fn continuation_metrics_start_at_column_49_and_running_follows_the_last() {
    let mut l = line(
        0,
        PrintedCount::Value(1_051_069_590.0),
        "",
        "instructions",
        vec![
            cell(1.45, Fmt::PER_INSN, "insn per cycle"),
            cell(0.2, Fmt::PER_INSN, "stalled cycles per insn"),
        ],
    );
    l.running = 500;
    l.enabled = 1000;
    let mut config = Config::new(Layout::Std);
    config.locale = NumericLocale::en_us();
    let mut p = Printer::new(Vec::new(), config);
    p.counters(&Title { target: "x".into(), runs: 1 }, None, &global(vec![l.clone()])).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    let body: Vec<&str> = text.lines().skip(3).collect();
    assert_eq!(
        body[0],
        "     1,051,069,590      instructions                     #    1.45  insn per cycle            "
    );
    assert_eq!(
        body[1],
        format!("{}#    0.20  stalled cycles per insn     (50.00%)", " ".repeat(50))
    );
    // CSV: the continuation line leaves count, unit, event and running empty.
    let mut p = Printer::new(Vec::new(), Config::new(Layout::Csv(";".into())));
    p.counters(&Title { target: "x".into(), runs: 1 }, None, &global(vec![l])).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    assert_eq!(
        text,
        "1051069590;;instructions;500;50.00;1.45;insn per cycle\n;;;;;0.20;stalled cycles per insn\n"
    );
}

#[test]
fn per_cpu_lines_go_event_by_event_and_per_core_unit_by_unit() {
    let units = |lines: fn(usize) -> Vec<Line>| -> Vec<Unit> {
        (0..2).map(|c| Unit { id: UnitId::Cpu(c as i32), cpus: 1, lines: lines(c) }).collect()
    };
    let two = |c: usize| {
        vec![
            line(0, PrintedCount::Value(10.0 + c as f64), "", "cs", vec![]),
            line(1, PrintedCount::Value(20.0 + c as f64), "", "faults", vec![]),
        ]
    };
    let mut config = Config::new(Layout::Csv(",".into()));
    config.aggregation = Aggregation::Cpu;
    let text = print(config, None, &units(two), None);
    let firsts: Vec<&str> = text.lines().map(|l| l.split(',').next().unwrap()).collect();
    let events: Vec<&str> = text.lines().map(|l| l.split(',').nth(3).unwrap()).collect();
    assert_eq!(firsts, ["CPU0", "CPU1", "CPU0", "CPU1"]);
    assert_eq!(events, ["cs", "cs", "faults", "faults"]);
    for l in text.lines() {
        assert_eq!(l.matches(',').count(), 7, "{l}");
    }
    let mut config = Config::new(Layout::Std);
    config.aggregation = Aggregation::Core;
    let cores: Vec<Unit> = (0..2)
        .map(|c| Unit { id: UnitId::Label(format!("S0-D0-C{c}")), cpus: 2, lines: two(c) })
        .collect();
    let text = print(config, None, &cores, None);
    let body: Vec<&str> = text.lines().filter(|l| l.starts_with("S0")).collect();
    assert_eq!(body.len(), 4);
    assert!(
        body[0].starts_with("S0-D0-C0              2                 10      cs"),
        "{}",
        body[0]
    );
    assert!(
        body[1].starts_with("S0-D0-C0              2                 20      faults"),
        "{}",
        body[1]
    );
    assert!(body[2].starts_with("S0-D0-C1"), "{}", body[2]);
}

#[test]
fn interval_header_repeats_every_twenty_six_prints() {
    let mut p = Printer::new(Vec::new(), {
        let mut c = Config::new(Layout::Std);
        c.interval = true;
        c
    });
    let title = Title { target: "x".into(), runs: 1 };
    for i in 1..=60u64 {
        let units = global(vec![line(0, PrintedCount::Value(1.0), "", "cs", vec![])]);
        p.counters(&title, Some(Duration::from_millis(100 * i)), &units).unwrap();
    }
    let text = String::from_utf8(p.into_inner()).unwrap();
    let headers: Vec<usize> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .enumerate()
        .filter(|_| true)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(headers.len(), 60);
    let at: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "#           time             counts unit events")
        .map(|(i, _)| i)
        .collect();
    // Printed before intervals 1, 27 and 53.
    assert_eq!(at, [0, 27, 54]);
    assert!(
        text.lines().nth(1).unwrap().starts_with("     0.100000000                  1      cs")
    );
}

#[test]
fn csv_summary_lines_start_with_summary() {
    let mut config = Config::new(Layout::Csv(" ".into()));
    config.csv_summary = true;
    let units = global(vec![line(0, PrintedCount::Value(9224197.0), "", "cycles", vec![])]);
    let text = print(config.clone(), None, &units, None);
    assert_eq!(text, "summary 9224197  cycles 1000000 100.00  \n");
    let text = print(config, Some(Duration::from_millis(1001)), &units, None);
    assert!(text.starts_with("1.001000000 9224197  cycles"), "{text}");
}

#[test]
fn metric_only_prints_one_row_with_perfs_column_widths() {
    let cells = vec![
        Cell { colour: Some(Colour::Red), ..cell(40.0, Fmt::SCALED, "%  tma_retiring") },
        cell(0.5, Fmt::RATE, "CPUs utilized"),
    ];
    let mut config = Config::new(Layout::Std);
    config.metric_only = true;
    let units = global(vec![line(0, PrintedCount::Value(5.0), "", "slots", cells.clone())]);
    let text = print(config.clone(), None, &units, None);
    let lines: Vec<&str> = text.lines().collect();
    // Header: a space, then each label right-aligned in 20; `CPUs utilized` is left out.
    assert_eq!(lines[3], format!(" {:>20} ", "%  tma_retiring"));
    // The value's column is widened by the colour escapes perf counts even when it does not
    // print them.
    assert_eq!(lines[4], format!("{:>28} ", "    40.0"));
    let mut json = config.clone();
    json.layout = Layout::Json;
    let text = print(json, None, &units, None);
    assert_eq!(text, "{\"%  tma_retiring\" : \"40.0\"}\n");
    let mut csv = config;
    csv.layout = Layout::Csv(",".into());
    let text = print(csv, None, &units, None);
    assert_eq!(text, "%  tma_retiring,\n40.0,\n");
}

#[test]
fn runs_add_perfs_spread_fields() {
    let mut l = line(0, PrintedCount::Value(100.0), "", "cs", vec![]);
    l.noise = Some(1.5);
    let mut config = Config::new(Layout::Csv(",".into()));
    config.runs = 3;
    let text = print(config.clone(), None, &global(vec![l.clone()]), None);
    assert_eq!(text, "100,,cs,1.50%,1000000,100.00,,\n");
    config.layout = Layout::Std;
    let mut p = Printer::new(Vec::new(), config);
    p.counters(&Title { target: "true".into(), runs: 3 }, None, &global(vec![l])).unwrap();
    p.footer(&Footer { elapsed: 1.000123, elapsed_sd: Some(0.000987), ..Footer::default() })
        .unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    assert!(text.contains("Performance counter stats for 'true' (3 runs):"), "{text}");
    assert!(text.contains("( +-  1.50% )"), "{text}");
    // The spread's first significant digit is the 4th decimal: 4 + 2 decimals.
    assert!(
        text.contains("          1.000123 +- 0.000987 seconds time elapsed  ( +-  0.10% )"),
        "{text}"
    );
}

#[test]
fn default_metric_groups_print_the_group_name_instead_of_the_count() {
    let mut l = line(0, PrintedCount::Value(1e9), "", "TOPDOWN.SLOTS", vec![]);
    l.default_groups = vec![DefaultGroup {
        name: Some("TopdownL1".into()),
        cells: vec![
            cell(29.8, Fmt::SCALED, "%  tma_backend_bound"),
            cell(20.0, Fmt::SCALED, "%  tma_frontend_bound"),
        ],
    }];
    let text = print(Config::new(Layout::Std), None, &global(vec![l.clone()]), None);
    let body: Vec<&str> = text.lines().skip(3).collect();
    assert_eq!(
        body[0],
        format!("{:>33}{:16} #     29.8 %  tma_backend_bound      ", "TopdownL1", "")
    );
    assert_eq!(body[1], format!("{:49} #     20.0 %  tma_frontend_bound     ", ""));
    let text = print(Config::new(Layout::Json), None, &global(vec![l]), None);
    let first = text.lines().next().unwrap();
    // perf prints the running time before the group's name here too.
    assert_eq!(
        first,
        r#"{"event-runtime" : 1000000, "pcnt-running" : 100.00, "metricgroup" : "TopdownL1"}"#
    );
}

/// tmetric's `--errors`: a metric's bar after its label in the default layout (`± ?` when
/// unknown) and a `metric-error` key after perf's keys in JSON; nothing without the flag.
#[test]
fn errors_follow_the_label_and_perfs_json_keys_only_when_asked() {
    let retiring = Cell { error: Some(1.25), ..cell(25.3, Fmt::SCALED, "%  tma_retiring") };
    let unknown = Cell { error: Some(f64::NAN), ..cell(4.0, Fmt::SCALED, "%  tma_x") };
    let lines =
        vec![line(0, PrintedCount::Value(10.0), "", "TOPDOWN.SLOTS", vec![retiring, unknown])];
    let mut std = Config::new(Layout::Std);
    std.errors = true;
    let text = print(std, None, &global(lines.clone()), None);
    assert!(text.contains("#     25.3 %  tma_retiring ± 1.2  "), "{text}");
    assert!(text.contains("#      4.0 %  tma_x ± ?  "), "{text}");
    let plain = print(Config::new(Layout::Std), None, &global(lines.clone()), None);
    assert!(!plain.contains('±'), "{plain}");
    let mut json = Config::new(Layout::Json);
    json.errors = true;
    let text = print(json, None, &global(lines.clone()), None);
    assert!(
        text.contains(
            "\"metric-value\" : \"25.300000\", \"metric-unit\" : \"%  tma_retiring\", \"metric-error\" : \"1.250000\"}"
        ),
        "{text}"
    );
    assert!(text.contains("\"metric-error\" : \"nan\"}"), "{text}");
    let plain = print(Config::new(Layout::Json), None, &global(lines), None);
    assert!(!plain.contains("metric-error"), "{plain}");
}

/// A value that cannot be true (a negative share) is flagged beside it in the default layout
/// and by a `metric-impossible` key in JSON, with `--errors`; its note says why elsewhere.
#[test]
fn impossible_values_are_flagged_beside_the_value_and_in_json() {
    let bad = Cell {
        error: Some(16.4),
        impossible: true,
        ..cell(-16.4, Fmt::SCALED, "%  tma_core_bound")
    };
    let good = Cell { error: Some(0.5), ..cell(18.0, Fmt::SCALED, "%  tma_retiring") };
    let lines = vec![line(0, PrintedCount::Value(10.0), "", "UOPS_ISSUED.ANY", vec![bad, good])];
    let mut std = Config::new(Layout::Std);
    std.errors = true;
    let text = print(std, None, &global(lines.clone()), None);
    assert!(text.contains("tma_core_bound ± 16.4 (impossible)"), "{text}");
    assert!(!text.contains("tma_retiring ± 0.5 (impossible)"), "{text}");
    let mut json = Config::new(Layout::Json);
    json.errors = true;
    let text = print(json, None, &global(lines), None);
    assert_eq!(text.matches("\"metric-impossible\" : true").count(), 1, "{text}");
}
