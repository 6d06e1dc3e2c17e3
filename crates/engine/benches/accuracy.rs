//! Accuracy benchmark: how far multiplexed metrics land from the truth on simulated machines
//! whose workload changes phases (the built-in `phased` workload: compute, memory and
//! frontend phases of 2 to 40 ms in random order), for every simulated machine and
//! TopdownL1..L6 (AMD's PipelineL1/L2), and with `--groups` every metric group the scheduler
//! benchmark covers. Three ways to count each selection, over the same simulated second:
//!
//! * `tmetric`: tmetric's schedule;
//! * `perf`: perf 6.12's strategy (the engine's baseline [`Strategy::Perf`]);
//! * `alone`: each metric counted by itself (no other metric's events competing).
//!
//! For each, the mean and worst absolute error in percentage points of the metrics that print
//! as percentages, against the metric over the simulator's exact counts of the same second;
//! and the error bars' coverage (the share of tmetric's values whose bar holds the truth).
//!
//! `cargo bench -p tmetric-engine --bench accuracy` (`-- --quick`: level 1 to 3 on three
//! machines; `-- --groups`: every metric group too; `-- --workload NAME|FILE`; `-- --seeds N`
//! phase orders per selection, 3 by default; `-- --machine NAME`, `-- --selection NAME`: one
//! of each). A row says when a strategy gave fewer values than tmetric's schedule (`nan`
//! where it could not count a metric): its errors are over the values it gave.

#[path = "../tests/harness.rs"]
mod harness;

use harness::{Measured, SimTree, measure, percent_metrics};
use tmetric_engine::{Bar, Select, Strategy};
use tmetric_sim::{Machine, Workload};

/// Milliseconds of simulated time each selection is counted for, and between reads.
const RUN_MS: u64 = 1_000;
const READ_MS: u64 = 100;

#[derive(Default, Clone, Copy)]
struct Errors {
    sum: f64,
    worst: f64,
    n: usize,
    covered: usize,
    bars: usize,
    /// Sum of the bars' half widths, in percentage points.
    width: f64,
}

impl Errors {
    /// Whether `m` is a value these errors take: a percentage, computed, with a truth.
    fn counts(m: &Measured) -> bool {
        m.percent && m.value.is_finite() && m.truth.is_finite()
    }

    fn add(&mut self, m: &Measured) {
        if !Errors::counts(m) {
            return;
        }
        let e = (m.value - m.truth).abs() * m.scale;
        self.sum += e;
        self.worst = self.worst.max(e);
        self.n += 1;
        if m.bar != Bar::Exact {
            self.bars += 1;
        }
        self.width += m.bar.half_width().unwrap_or(0.0) * m.scale;
        if m.bar.covers(m.value, m.truth) {
            self.covered += 1;
        }
    }

    fn merge(&mut self, o: Errors) {
        self.sum += o.sum;
        self.worst = self.worst.max(o.worst);
        self.n += o.n;
        self.covered += o.covered;
        self.bars += o.bars;
        self.width += o.width;
    }

    fn mean(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.sum / self.n as f64 }
    }
}

fn selections(tree: &SimTree, groups: bool) -> Vec<String> {
    let model = tree.model;
    let mut out: Vec<String> = (1..=6)
        .map(|l| format!("TopdownL{l}"))
        .chain((1..=2).map(|l| format!("PipelineL{l}")))
        .filter(|g| !model.select(g).is_empty())
        .collect();
    if groups {
        let all: Vec<String> = model.metric_group_names().into_iter().map(String::from).collect();
        for g in all {
            if !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out
}

/// The same workload with `seeds` random phase orders: the error of one run depends on how
/// its phases fall against the rotation.
fn phase_orders(workload: &Workload, seeds: u64) -> Vec<Workload> {
    (0..seeds)
        .map(|k| {
            let mut w = workload.clone();
            if let tmetric_sim::Schedule::Random { seed, .. } = &mut w.schedule {
                *seed = seed.wrapping_add(k * 7919);
            }
            w
        })
        .collect()
}

/// The table's title and column heads.
fn print_header(workload_name: &str) {
    println!(
        "workload `{workload_name}`, {RUN_MS} ms per selection, reads every {READ_MS} ms; errors in percentage points of the metrics that print as percentages"
    );
    println!(
        "{:<16} {:<22} {:>4} | {:>7} {:>7} | {:>7} {:>7} | {:>7} {:>7} | {:>6} {:>6}",
        "machine",
        "selection",
        "n",
        "tmetric",
        "worst",
        "perf",
        "worst",
        "alone",
        "worst",
        "cover",
        "±mean"
    );
}

/// One selection's `metrics` over every workload: the errors of tmetric's schedule, perf's
/// strategy and each metric alone; the values both strategies gave go to `both`.
fn measure_selection(
    tree: &SimTree,
    item: &str,
    metrics: &[usize],
    workloads: &[Workload],
    both: (&mut Errors, &mut Errors),
) -> (Errors, Errors, Errors) {
    let (both_t, both_p) = both;
    let (mut t, mut p, mut a) = (Errors::default(), Errors::default(), Errors::default());
    for workload in workloads {
        let tm = measure(tree, item, metrics, Strategy::Tmetric, workload, RUN_MS, READ_MS);
        let pm = measure(tree, item, metrics, Strategy::Perf, workload, RUN_MS, READ_MS);
        for m in &tm {
            t.add(m);
        }
        for m in &pm {
            p.add(m);
        }
        // The values both strategies gave, metric by metric.
        for m in &tm {
            if let Some(o) = pm.iter().find(|o| o.metric == m.metric)
                && Errors::counts(m)
                && Errors::counts(o)
            {
                both_t.add(m);
                both_p.add(o);
            }
        }
        for &metric in metrics {
            let name = tree.model.str(tree.model.metrics[metric].name);
            for m in measure(tree, name, &[metric], Strategy::Tmetric, workload, RUN_MS, READ_MS) {
                a.add(&m);
            }
        }
    }
    (t, p, a)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let groups = args.iter().any(|a| a == "--groups");
    let workload_name = args
        .iter()
        .position(|a| a == "--workload")
        .and_then(|i| args.get(i + 1))
        .map_or("phased", String::as_str);
    let workload = Workload::load(workload_name).unwrap_or_else(|e| panic!("{e}"));
    let seeds: u64 = args
        .iter()
        .position(|a| a == "--seeds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let workloads = phase_orders(&workload, seeds);
    let only = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
    let mut machines: Vec<&'static str> = if quick {
        vec!["sapphirerapids", "icelake", "alderlake"]
    } else {
        Machine::names().to_vec()
    };
    if let Some(name) = only("--machine") {
        machines.retain(|m| m == name);
    }
    print_header(workload_name);
    let (mut all_t, mut all_p, mut all_a) =
        (Errors::default(), Errors::default(), Errors::default());
    // Over the values both tmetric's schedule and perf's strategy gave: perf's groups that
    // never fit (the NMI watchdog's counter, too many events) give no value, and a mean
    // over the others alone would flatter it.
    let (mut both_t, mut both_p) = (Errors::default(), Errors::default());
    let start = std::time::Instant::now();
    for name in machines {
        let tree = SimTree::new(name);
        let mut sels = selections(&tree, groups);
        if let Some(sel) = only("--selection") {
            sels.retain(|s| s == sel);
        }
        if quick {
            sels.retain(|s| {
                ["TopdownL1", "TopdownL2", "TopdownL3", "PipelineL1"].contains(&s.as_str())
            });
        }
        for sel in sels {
            let metrics = percent_metrics(tree.model, &sel);
            if metrics.is_empty() {
                continue;
            }
            let (t, p, a) =
                measure_selection(&tree, &sel, &metrics, &workloads, (&mut both_t, &mut both_p));
            if t.n == 0 {
                continue;
            }
            println!(
                "{:<16} {:<22} {:>4} | {:>7.3} {:>7.3} | {:>7.3} {:>7.3} | {:>7.3} {:>7.3} | {:>5.1}% {:>6.3}",
                name,
                sel,
                t.n,
                t.mean(),
                t.worst,
                p.mean(),
                p.worst,
                a.mean(),
                a.worst,
                100.0 * t.covered as f64 / t.n as f64,
                t.width / t.n as f64,
            );
            for (who, o) in [("perf", &p), ("alone", &a)] {
                if o.n != t.n {
                    println!("{:<40}   ({who}: {} values, tmetric {})", "", o.n, t.n);
                }
            }
            all_t.merge(t);
            all_p.merge(p);
            all_a.merge(a);
        }
    }
    println!(
        "TOTAL {} values: mean error tmetric {:.3} pp (worst {:.3}), perf {:.3} pp (worst {:.3}), alone {:.3} pp (worst {:.3}); tmetric/perf {:.1}%; error bars hold the truth for {:.1}% of tmetric's values ({} of them with a bar, mean half width {:.3} pp); {} phase orders per selection; {:.1} s",
        all_t.n,
        all_t.mean(),
        all_t.worst,
        all_p.mean(),
        all_p.worst,
        all_a.mean(),
        all_a.worst,
        100.0 * all_t.mean() / all_p.mean().max(1e-12),
        100.0 * all_t.covered as f64 / all_t.n.max(1) as f64,
        all_t.bars,
        all_t.width / all_t.bars.max(1) as f64,
        seeds,
        start.elapsed().as_secs_f64()
    );
    println!(
        "On the {} values both gave: tmetric {:.3} pp (worst {:.3}), perf {:.3} pp (worst {:.3}); tmetric/perf {:.1}%; perf gave no value for {} of tmetric's {}",
        both_t.n,
        both_t.mean(),
        both_t.worst,
        both_p.mean(),
        both_p.worst,
        100.0 * both_t.mean() / both_p.mean().max(1e-12),
        all_t.n - both_t.n,
        all_t.n
    );
}
