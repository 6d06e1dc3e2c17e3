//! Benchmark: the retire-latency reader's per-sample cost (ring walk + record decode +
//! statistics), in ns/sample, next to a baseline in the same run that only reads each
//! sample's `var3_w` at its fixed offset in a contiguous buffer (the least work any reader
//! does), and the cost of one summary (mean, min, max, last, 97% tail mean).
//!
//! Run with `cargo bench -p tmetric-runtime --bench tpebs`. Without `--bench` (as
//! `cargo test --all-targets` runs it) it does a quick smoke check only.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tmetric_runtime::LatencyStats;
use tmetric_runtime::ring::{
    Header, MISC_EXACT_IP, RECORD_SAMPLE, Record, SAMPLE_TYPE, SampleFormat, Weight, walk,
};

const RECORD: usize = 56;

/// A ring of `size` bytes holding `samples` records of [`SAMPLE_TYPE`] written from position
/// `start` (so they wrap around the end), and the same records contiguous.
fn build(size: usize, samples: usize, start: u64) -> (Vec<u8>, Vec<u8>) {
    let mut ring = vec![0u8; size];
    let mut flat = Vec::with_capacity(samples * RECORD);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for k in 0..samples {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Retire latencies spread like real ones: mostly small, a long tail.
        let latency = ((x % 64) + if x.is_multiple_of(50) { x % 3000 } else { 0 }) as u16;
        let mut bytes = Header { type_: RECORD_SAMPLE, misc: MISC_EXACT_IP, size: RECORD as u16 }
            .to_bytes()
            .to_vec();
        let words = [
            7u64,
            0x40_1000 + k as u64,
            0x0000_0101_0000_0101,
            k as u64 * 1000,
            1,
            Weight::from_parts(0, 0, latency).0,
        ];
        for w in words {
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        flat.extend_from_slice(&bytes);
        for (j, b) in bytes.iter().enumerate() {
            ring[((start + (k * RECORD + j) as u64) % size as u64) as usize] = *b;
        }
    }
    (ring, flat)
}

/// The best of `runs` timings of `f`, per sample.
fn best_ns(runs: usize, samples: usize, mut f: impl FnMut() -> u64) -> (f64, u64) {
    let mut best = Duration::MAX;
    let mut check = 0;
    for _ in 0..runs {
        let started = Instant::now();
        check = black_box(f());
        best = best.min(started.elapsed());
    }
    (best.as_nanos() as f64 / samples as f64, check)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    // 1 MiB ring (256 data pages), filled to 18,000 records (just under its 1,008,000 bytes)
    // starting 20 bytes before its end, as a reader finds it after a burst.
    let size = 1 << 20;
    let samples = 18_000;
    let start = (3 * size - 20) as u64;
    let (ring, flat) = build(size, samples, start);
    let head = start + (samples * RECORD) as u64;
    let format = SampleFormat::new(SAMPLE_TYPE).expect("layout");
    let runs = if full { 200 } else { 2 };
    let mut scratch = Vec::new();

    let (baseline, base_sum) = best_ns(runs, samples, || {
        let mut sum = 0u64;
        for record in flat.chunks_exact(RECORD) {
            sum += u64::from(u16::from_ne_bytes([record[54], record[55]]));
        }
        sum
    });
    let (decode, decode_sum) = best_ns(runs, samples, || {
        let mut sum = 0u64;
        let w = walk(&ring[..], start, head, &format, &mut scratch, |r| {
            if let Record::Sample(s) = r {
                sum += u64::from(s.weight.map_or(0, |w| w.var3_w()));
            }
        });
        assert_eq!((w.records, w.error), (samples as u64, None));
        sum
    });
    let mut stats = LatencyStats::new();
    let (with_stats, stats_count) = best_ns(runs, samples, || {
        stats = LatencyStats::new();
        walk(&ring[..], start, head, &format, &mut scratch, |r| {
            if let Record::Sample(s) = r {
                stats.add(s.weight.map_or(0, |w| w.var3_w()));
            }
        });
        stats.count()
    });
    assert_eq!(base_sum, decode_sum, "the walk and the baseline read the same latencies");
    assert_eq!(stats_count, samples as u64);
    let summary = stats.summary();
    assert_eq!(summary.mean, Some(base_sum as f64 / samples as f64));
    let started = Instant::now();
    let summaries = if full { 200 } else { 2 };
    for _ in 0..summaries {
        black_box(stats.summary());
    }
    let summary_us = started.elapsed().as_nanos() as f64 / summaries as f64 / 1000.0;

    if !full {
        println!(
            "smoke run only; `cargo bench -p tmetric-runtime --bench tpebs` runs the benchmark"
        );
        return;
    }
    println!(
        "retire-latency reader, {samples} samples of {RECORD} bytes in a 1 MiB ring (wrapping), best of {runs}:"
    );
    println!("  baseline (read var3_w at a fixed offset): {baseline:8.2} ns/sample");
    println!(
        "  walk + decode:                            {decode:8.2} ns/sample ({:.1}x baseline)",
        decode / baseline
    );
    println!(
        "  walk + decode + statistics:               {with_stats:8.2} ns/sample ({:.1}x baseline)",
        with_stats / baseline
    );
    println!("  one summary (mean, min, max, last, p97):  {summary_us:8.2} us");
    println!(
        "  check: mean {:.3}, p97 {:.3}, max {:?}",
        summary.mean.unwrap_or(0.0),
        summary.p97.unwrap_or(0.0),
        summary.max
    );
}
