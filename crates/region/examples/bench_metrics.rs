//! A benchmark harness in the style of criterion's `b.iter(|| ...)` that reports tmetric's
//! metrics per benchmark: each timed batch is a region named after the benchmark, so the
//! report sums counts over every batch and prints per-iteration figures next to the time.
//!
//! `cargo run --release -p tmetric-region --example bench_metrics [ITEMS]`, where ITEMS is a
//! comma-separated selection (default `page-faults,task-clock,context-switches`; on a machine
//! with a PMU, for example `TopdownL1` or `{cycles,instructions}`).
//!
//! The same pattern works inside a criterion benchmark: open the [`Measurement`] once, and in
//! `b.iter_custom(|iters| ...)` wrap the timed loop in `m.start(name)` / `finish()`.

use std::hint::black_box;
use std::time::Instant;

use tmetric_region::{Measurement, Pages, RegionError};
use tmetric_runtime::Syscalls;

/// One benchmark: its name and the time per iteration of each batch.
struct Bencher<'a, S: Syscalls, P: Pages> {
    m: &'a mut Measurement<S, P>,
    name: &'static str,
    iters: u64,
    batches: u32,
    ns_per_iter: Vec<f64>,
}

impl<S: Syscalls, P: Pages> Bencher<'_, S, P> {
    /// Runs `routine` in timed batches, each inside a region.
    fn iter<T>(&mut self, mut routine: impl FnMut() -> T) -> Result<(), RegionError> {
        // Warm-up outside any region, as criterion does.
        for _ in 0..self.iters / 10 + 1 {
            black_box(routine());
        }
        for _ in 0..self.batches {
            let region = self.m.start(self.name)?;
            let t = Instant::now();
            for _ in 0..self.iters {
                black_box(routine());
            }
            let ns = t.elapsed().as_nanos() as f64;
            region.finish()?;
            self.ns_per_iter.push(ns / self.iters as f64);
        }
        Ok(())
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let items =
        std::env::args().nth(1).unwrap_or_else(|| "page-faults,task-clock,context-switches".into());
    let list = tmetric_region::split_items(&items);
    let refs: Vec<&str> = list.iter().map(String::as_str).collect();
    let mut m = Measurement::new(&refs)?;

    let mut results: Vec<(&str, u64, Vec<f64>)> = Vec::new();
    let mut run = |m: &mut Measurement,
                   name: &'static str,
                   iters: u64,
                   f: &mut dyn FnMut() -> u64|
     -> Result<(), RegionError> {
        let mut b = Bencher { m, name, iters, batches: 10, ns_per_iter: Vec::new() };
        b.iter(f)?;
        results.push((name, iters * u64::from(b.batches), b.ns_per_iter));
        Ok(())
    };

    let data: Vec<u64> = (0..10_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    run(&mut m, "sort_10k", 20, &mut || {
        let mut v = data.clone();
        v.sort_unstable();
        v[0]
    })?;
    run(&mut m, "hashmap_insert_1k", 200, &mut || {
        let mut h = std::collections::HashMap::new();
        for i in 0..1000u64 {
            h.insert(i, i);
        }
        h.len() as u64
    })?;
    run(&mut m, "fresh_pages_256", 20, &mut || tmetric_region::workload::touch_pages(256) as u64)?;

    let totals = m.totals();
    println!("{:<20} {:>12} {:>12}  per iteration", "benchmark", "median ns", "iterations");
    for (name, iterations, mut ns) in results {
        ns.sort_by(f64::total_cmp);
        let median = ns[ns.len() / 2];
        let total = totals.iter().find(|t| t.region == name).expect("a region per benchmark");
        let per: Vec<String> = total
            .counts
            .iter()
            .filter_map(|c| {
                let v = c.value? / iterations as f64;
                let unit = if c.unit.is_empty() { String::new() } else { format!(" {}", c.unit) };
                Some(format!("{} {v:.3}{unit}", c.name))
            })
            .chain(total.metrics.iter().map(|x| format!("{} {:.2}{}", x.name, x.value, x.unit)))
            .collect();
        println!("{name:<20} {median:>12.1} {iterations:>12}  {}", per.join(", "));
    }
    m.report(&mut std::io::stdout())?;
    Ok(())
}
