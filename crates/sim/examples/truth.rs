//! Prints what the simulator derives from a workload on a simulated machine: every metric's
//! value, its target and range, and which targets and ranges are not met.
//!
//! `cargo run -p tmetric-sim --example truth -- MACHINE [WORKLOAD] [--all] [--perf-version X.Y]`

use tmetric_sim::{Derivation, Machine, SimWorkload};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = args.iter().any(|a| a == "--all");
    // The formulas are those of the vintage `--perf-version` names, else the default's.
    if let Some(i) = args.iter().position(|a| a == "--perf-version") {
        let version = args.get(i + 1).map_or("", String::as_str);
        if let Err(e) = tmetric_catalog::select_vintage(version) {
            eprintln!("truth: --perf-version: {e}");
            std::process::exit(2);
        }
    }
    let mut skip_value = false;
    let args: Vec<&String> = args
        .iter()
        .filter(|a| {
            let keep = !skip_value && !a.starts_with("--");
            skip_value = *a == "--perf-version";
            keep
        })
        .collect();
    let machine =
        Machine::named(args.first().map_or("sapphirerapids", |s| s.as_str())).expect("machine");
    let workload =
        SimWorkload::load(args.get(1).map_or("default", |s| s.as_str())).expect("workload");
    let t = std::time::Instant::now();
    let d = Derivation::of(&machine, &workload);
    eprintln!("derived in {:?}", t.elapsed());
    for note in &d.notes {
        println!("note: {note}");
    }
    for (p, report) in d.report.iter().enumerate() {
        println!("== phase {p} ({})", workload.phases[p].name);
        let mut bad = 0;
        for m in report {
            let flag = match (m.met(), m.in_range() || !m.available) {
                (true, true) => "",
                (false, true) => "MISSED",
                (true, false) => "RANGE",
                (false, false) => "MISSED+RANGE",
            };
            if !flag.is_empty() {
                bad += 1;
            }
            if all || !flag.is_empty() {
                println!(
                    "{:<8} {:<10} {:<55} {:>14.6} target {:>14} range {:?} {}",
                    flag,
                    m.pmu,
                    m.name,
                    m.value * m.scale,
                    m.target.map_or("-".into(), |t| format!("{:.6}", t * m.scale)),
                    (m.range.0 * m.scale, m.range.1 * m.scale),
                    if m.tree { "tree" } else { "" }
                );
            }
        }
        println!("{bad} of {} metrics missed or out of range", report.len());
    }
}
