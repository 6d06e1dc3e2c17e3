//! Measures two regions on this machine through the `read()` fallback (software events count
//! everywhere, VMs without a PMU included): one touches a known number of fresh pages, one
//! burns a known amount of CPU time. Prints each sample, the per-region report, and whether
//! the counts agree with the workload.
//!
//! `cargo run --release -p tmetric-region --example region [PAGES] [MILLISECONDS]`

use std::time::Duration;

use tmetric_region::Measurement;
use tmetric_region::workload::{burn, touch_pages};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let pages: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let ms: u64 = args.next().map_or(Ok(200), |a| a.parse())?;
    let mut m = Measurement::new(&["page-faults", "task-clock", "page_faults_per_sec"])?;
    println!("read path: {:?}", m.path());

    let (touched, sample) = m.measure("touch", || touch_pages(pages))?;
    let faults = sample.count("page-faults").unwrap_or(f64::NAN);
    println!(
        "touch: {touched} pages touched, {faults} page faults ({})",
        if faults >= pages as f64 { "agrees: >= one per page" } else { "DISAGREES" }
    );

    let (cpu, sample) = m.measure("burn", || burn(Duration::from_millis(ms)))?;
    let task_ms = sample.count("task-clock").unwrap_or(f64::NAN);
    let cpu_ms = cpu.as_secs_f64() * 1e3;
    // schedstat's sum is as of the last tick or switch: each read lags by up to a tick.
    let off = (task_ms - cpu_ms).abs();
    println!(
        "burn: {cpu_ms:.3} ms of thread CPU time (schedstat, tick resolution), task-clock {task_ms:.3} ms ({off:.3} ms apart: {})",
        if off < 10.0 { "agrees within two ticks" } else { "DISAGREES" }
    );

    for _ in 0..3 {
        m.measure("touch", || touch_pages(pages / 10))?;
    }
    m.report(&mut std::io::stdout())?;
    Ok(())
}
