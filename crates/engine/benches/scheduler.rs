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

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let facts = MachineFacts { nmi_watchdog: false, smt_on: true };
    let options = PlanOptions { system_wide: true, ..PlanOptions::default() };
    println!(
        "{:<28} {:>5} {:>8} {:>8} {:>8} {:>7} {:>6}",
        "model", "sel", "tmetric", "perf", "lower", "at-LB%", "worse"
    );
    let (mut n, mut t_all, mut p_all, mut l_all, mut at_lb, mut worse) =
        (0usize, 0usize, 0usize, 0usize, 0usize, 0usize);
    let start = Instant::now();
    for &model in models().iter() {
        if model.is_sys || model.metrics.is_empty() || matches!(model.arch, "test" | "common") {
            continue;
        }
        let pmus = PmuModel::for_model(model, facts);
        let (mut mn, mut mt, mut mp, mut ml, mut mat, mut mw) = (0, 0, 0, 0, 0, 0);
        for item in selections(model, quick) {
            let picks = picks(model, &item);
            if picks.is_empty() {
                continue;
            }
            let plan = plan_offline(&picks, &pmus, &options);
            let (t, p, l) = (plan.tmetric.slices(), plan.perf.slices(), plan.lower());
            mn += 1;
            mt += t;
            mp += p;
            ml += l;
            mat += usize::from(t <= l);
            if t > p {
                mw += 1;
                eprintln!("worse than perf: {} {item}: tmetric {t}, perf {p}", model.path());
            }
        }
        if mn == 0 {
            continue;
        }
        println!(
            "{:<28} {:>5} {:>8} {:>8} {:>8} {:>6.1}% {:>6}",
            model.path(),
            mn,
            mt,
            mp,
            ml,
            100.0 * mat as f64 / mn as f64,
            mw
        );
        n += mn;
        t_all += mt;
        p_all += mp;
        l_all += ml;
        at_lb += mat;
        worse += mw;
    }
    println!(
        "TOTAL selections {n}: slices tmetric {t_all}, perf {p_all} (tmetric/perf {:.1}%), lower bound {l_all}; at the lower bound on {:.1}% of selections; worse than perf on {worse}; {:.1} s",
        100.0 * t_all as f64 / p_all.max(1) as f64,
        100.0 * at_lb as f64 / n.max(1) as f64,
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
