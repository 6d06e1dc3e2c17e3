//! The printer against `perf stat` 6.1 output captured on this kind of machine
//! (`crates/perfstat/tests/data/real`, see its `capture.sh`): lines rebuilt from the
//! captured values must equal the captured lines, up to what perf 6.12 changed in its
//! layout (its metric column is 3 wider, `METRIC_LEN` 38; its thread id is padded to 7, not
//! 8; it quotes JSON metric values).

use tmetric_engine::view::{Cell, CellSource, Fmt, Line, PrintedCount};
use tmetric_print::{Aggregation, Config, Layout, Printer, Title, Unit, UnitId};

fn capture(name: &str) -> String {
    let path = format!("{}/../perfstat/tests/data/real/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn cell(value: f64, label: &str) -> Cell {
    Cell {
        value,
        fmt: Some(Fmt::RATE),
        label: Some(label.into()),
        colour: None,
        source: Some(CellSource { name: "x".into(), unit: label.into(), root: None }),
        error: None,
        impossible: false,
    }
}

fn line(row: usize, count: f64, unit: &str, name: &str, run: u64, metric: (f64, &str)) -> Line {
    Line {
        row,
        part: 0,
        count: PrintedCount::Value(count),
        decimals: if unit == "msec" { 2 } else { 0 },
        unit: unit.into(),
        name: name.into(),
        running: run,
        enabled: run,
        noise: None,
        cgroup: None,
        default_groups: Vec::new(),
        cells: vec![cell(metric.0, metric.1)],
    }
}

fn print(config: Config, units: &[Unit]) -> String {
    let mut p = Printer::new(Vec::new(), config);
    p.counters(&Title { target: "x".into(), runs: 1 }, None, units).unwrap();
    String::from_utf8(p.into_inner()).unwrap()
}

#[test]
fn per_thread_lines_equal_perfs() {
    let thread = |tid| UnitId::Thread { comm: "sh".into(), tid };
    let unit = |tid, lines| Unit { id: thread(tid), cpus: 1, lines };
    let lines = |task: f64, run: u64, cpus: f64| {
        vec![
            line(0, task, "msec", "task-clock", run, (cpus, "CPUs utilized")),
            line(1, 0.0, "", "page-faults", run, (0.0, "/sec")),
        ]
    };
    let mut std = Config::new(Layout::Std);
    std.aggregation = Aggregation::Thread;
    let ours = print(std, &[unit(10057, lines(55.32, 55_320_000, 0.338))]);
    let perf = capture("std_per_thread.txt");
    for (mine, theirs) in ours.lines().skip(3).zip(perf.lines().skip(3).take(2)) {
        // 6.1 pads the tid to 8 and the metric to 35.
        let theirs = theirs.replacen("10057 ", "10057", 1);
        assert_eq!(mine.trim_end(), theirs.trim_end());
        assert_eq!(mine.len(), theirs.len() + 3, "6.12's metric column is 3 wider");
    }
    let mut csv = Config::new(Layout::Csv(",".into()));
    csv.aggregation = Aggregation::Thread;
    let mut two = lines(49.04, 49_039_944, 0.331);
    two[1].running = 49_039_944;
    two[1].enabled = 49_039_944;
    let ours = print(csv, &[unit(10081, two)]);
    let perf = capture("csv_per_thread.txt");
    assert_eq!(ours, perf.lines().take(2).map(|l| format!("{l}\n")).collect::<String>());
}

#[test]
fn per_core_csv_lines_equal_perfs() {
    let perf = capture("csv_per_core.txt");
    let mut units = Vec::new();
    for (c, chunk) in perf.lines().collect::<Vec<_>>().chunks(3).enumerate() {
        let fields: Vec<Vec<&str>> = chunk.iter().map(|l| l.split(',').collect()).collect();
        let lines = fields
            .iter()
            .enumerate()
            .map(|(row, f)| {
                let (count, unit, name, run) = (f[2], f[3], f[4], f[5]);
                line(
                    row,
                    count.parse().unwrap(),
                    unit,
                    name,
                    run.parse().unwrap(),
                    (f[7].parse().unwrap(), f[8]),
                )
            })
            .collect();
        units.push(Unit { id: UnitId::Label(format!("S0-D0-C{c}")), cpus: 1, lines });
    }
    let mut csv = Config::new(Layout::Csv(",".into()));
    csv.aggregation = Aggregation::Core;
    assert_eq!(print(csv, &units), perf);
}

#[test]
fn global_lines_equal_perfs_up_to_the_wider_metric_column() {
    let perf = capture("std_global.txt");
    let lines = vec![
        line(0, 1.04, "msec", "task-clock", 1, (0.007, "CPUs utilized")),
        line(1, 1.0, "", "context-switches", 1, (958.777, "/sec")),
        line(2, 74.0, "", "page-faults", 1, (70.950, "K/sec")),
        line(3, 0.0, "", "cpu-migrations", 1, (0.0, "/sec")),
    ];
    let mut p = Printer::new(Vec::new(), Config::new(Layout::Std));
    p.counters(
        &Title { target: "sleep 0.15".into(), runs: 1 },
        None,
        &[Unit { id: UnitId::Global, cpus: 0, lines }],
    )
    .unwrap();
    let ours = String::from_utf8(p.into_inner()).unwrap();
    for (mine, theirs) in ours.lines().zip(perf.lines()) {
        assert_eq!(mine.trim_end(), theirs.trim_end());
        if theirs.contains('#') {
            assert_eq!(mine.len(), theirs.len() + 3, "6.12's metric column is 3 wider");
        }
    }
}
