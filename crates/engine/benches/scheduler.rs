//! Scheduler benchmark: for every model and every selection (TopdownL1..L6, each metric group,
//! all metrics), the time slices of tmetric's schedule, perf 6.12's strategy and the lower
//! bound, in one run; and the time to plan every metric of Sapphire Rapids.
//!
//! `cargo bench -p tmetric-engine` (add `-- --quick` for the Topdown selections only).

use std::time::Instant;

use tmetric_catalog::{Model, models};
use tmetric_engine::plan::plan_offline;
use tmetric_engine::{MachineFacts, Pick, PlanOptions, PmuModel, Select};

fn selections(model: &Model, quick: bool) -> Vec<String> {
    let mut out: Vec<String> =
        (1..=6).map(|l| format!("TopdownL{l}")).filter(|g| !model.select(g).is_empty()).collect();
    if quick {
        return out;
    }
    let groups: Vec<String> = model.metric_group_names().into_iter().map(String::from).collect();
    for g in groups {
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out.push("all".into());
    out
}

fn picks(model: &'static Model, item: &str) -> Vec<Pick> {
    model
        .select(item)
        .into_iter()
        .map(|metric| Pick { model, metric, item: item.to_string() })
        .collect()
}

/// Slices and selections, per model and in all.
#[derive(Default)]
struct Totals {
    selections: usize,
    tmetric: usize,
    perf: usize,
    /// The counting lower bound (any schedule).
    lower: usize,
    /// The bound tmetric's schedule is held to: for whole metrics unless it gave them up.
    bound: usize,
    at_lower: usize,
    at_bound: usize,
    worse: usize,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.selections += other.selections;
        self.tmetric += other.tmetric;
        self.perf += other.perf;
        self.lower += other.lower;
        self.bound += other.bound;
        self.at_lower += other.at_lower;
        self.at_bound += other.at_bound;
        self.worse += other.worse;
    }

    fn share(&self, count: usize) -> f64 {
        100.0 * count as f64 / self.selections.max(1) as f64
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `--gaps`: every selection above its bound.
    let gaps = std::env::args().any(|a| a == "--gaps");
    let facts = MachineFacts { nmi_watchdog: false, smt_on: true };
    let options = PlanOptions { system_wide: true, ..PlanOptions::default() };
    println!(
        "{:<28} {:>5} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}",
        "model", "sel", "tmetric", "perf", "lower", "bound", "at-B%", "worse"
    );
    let mut total = Totals::default();
    let start = Instant::now();
    for &model in models().iter() {
        if model.is_sys || model.metric_count() == 0 || matches!(model.arch, "test" | "common") {
            continue;
        }
        let pmus = PmuModel::for_model(model, facts);
        let mut m = Totals::default();
        for item in selections(model, quick) {
            let picks = picks(model, &item);
            if picks.is_empty() {
                continue;
            }
            let plan = plan_offline(&picks, &pmus, &options);
            let (t, p, l, b) =
                (plan.tmetric.slices(), plan.perf.slices(), plan.lower(), plan.bound());
            m.selections += 1;
            m.tmetric += t;
            m.perf += p;
            m.lower += l;
            m.bound += b;
            m.at_lower += usize::from(t <= l);
            m.at_bound += usize::from(t <= b);
            if t > p {
                m.worse += 1;
                eprintln!("worse than perf: {} {item}: tmetric {t}, perf {p}", model.path());
            }
            if gaps && t > b {
                eprintln!(
                    "above the bound: {} {item}: tmetric {t}, perf {p}, lower {l}, bound {b}{}",
                    model.path(),
                    if plan.tmetric.loose { " (metrics given up whole)" } else { "" }
                );
            }
        }
        if m.selections == 0 {
            continue;
        }
        println!(
            "{:<28} {:>5} {:>8} {:>8} {:>8} {:>8} {:>6.1}% {:>6}",
            model.path(),
            m.selections,
            m.tmetric,
            m.perf,
            m.lower,
            m.bound,
            m.share(m.at_bound),
            m.worse
        );
        total.add(&m);
    }
    println!(
        "TOTAL selections {}: slices tmetric {}, perf {} (tmetric/perf {:.1}%), lower bound {}; at the lower bound on {:.1}% of selections; bound for whole metrics {}; at it on {:.1}% of selections; worse than perf on {}; {:.1} s",
        total.selections,
        total.tmetric,
        total.perf,
        100.0 * total.tmetric as f64 / total.perf.max(1) as f64,
        total.lower,
        total.share(total.at_lower),
        total.bound,
        total.share(total.at_bound),
        total.worse,
        start.elapsed().as_secs_f64()
    );
    let spr = tmetric_catalog::model("sapphirerapids").expect("spr");
    let all = picks(spr, "all");
    let pmus = PmuModel::for_model(spr, facts);
    let runs = 5;
    let mut best = f64::MAX;
    for _ in 0..runs {
        let t0 = Instant::now();
        let plan =
            plan_offline(&all, &pmus, &PlanOptions { system_wide: true, ..PlanOptions::default() });
        std::hint::black_box(&plan.tmetric);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "planning all {} sapphirerapids metrics (tmetric, perf and the bound): best of {runs} {:.1} ms",
        all.len(),
        best * 1e3
    );
    let offline =
        plan_offline(&all, &pmus, &PlanOptions { system_wide: true, ..PlanOptions::default() });
    let (request, pmus) = (offline.request, offline.pmus);
    let mut best = f64::MAX;
    for _ in 0..runs {
        let t0 = Instant::now();
        let schedule =
            tmetric_engine::schedule::schedule(&request, &pmus, tmetric_engine::Strategy::Tmetric);
        std::hint::black_box(&schedule);
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "tmetric's schedule alone for those {} metrics: best of {runs} {:.1} ms (target < 50 ms)",
        all.len(),
        best * 1e3
    );
}
