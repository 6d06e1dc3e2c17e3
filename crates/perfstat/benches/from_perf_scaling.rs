//! Scaling of `tmetric eval --from-perf` on generated `perf stat -I` text logs of 10, 30 and
//! 100 MB: wall time, MB/s and peak memory (max RSS) per size, for the current binary and, in
//! the same run, a baseline binary built from an earlier commit.
//!
//! The binaries run as children, so both are measured the same way, end to end (read, parse,
//! infer nothing: `--model icelake`, evaluate, print to /dev/null). Peak memory is the child's
//! max RSS as reported by GNU time (`/usr/bin/time -f`), since the kernel only reports a
//! child's rusage to its parent's wait and this workspace keeps `unsafe` out of this crate.
//!
//! Run:
//! ```text
//! cargo build --release --bin tmetric
//! # baseline: build the base commit in a scratch worktree, e.g.
//! #   git worktree add /tmp/base BASE && (cd /tmp/base && cargo build --release --bin tmetric)
//! TMETRIC_BENCH_BASELINE=/tmp/base/target/release/tmetric cargo bench -p tmetric-perfstat --bench from_perf_scaling
//! ```
//! `TMETRIC_BENCH_BIN` overrides the current binary (default `target/release/tmetric`),
//! `TMETRIC_BENCH_BASELINE` names the baseline (default `target/baseline/tmetric` when it
//! exists) and `TMETRIC_BENCH_MB` the sizes (default `10,30,100`).
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One interval of `perf stat -I 100 -M tma_ports_utilized_1,tma_ports_utilized_2,...` on an
/// Ice Lake: two multiplexed groups that both count CPU_CLK_UNHALTED.THREAD, plus IPC.
fn interval(out: &mut String, i: usize) {
    let ts = format!("{}.{:09}", (i + 1) / 10, ((i + 1) % 10) * 100_000_000 + 1234);
    let k = (i % 97) as u64 + 1;
    let one = 2_000_000 + 1000 * k;
    let clk_a = 20_000_000 + 7000 * k;
    let stalls = 5_000_000 + 300 * k;
    let two = 3_000_000 + 2000 * k;
    let clk_b = 25_000_000 + 5000 * k;
    let inst = 30_000_000 + 11_000 * k;
    let clk_c = 24_000_000 + 3000 * k;
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b as f64;
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      EXE_ACTIVITY.1_PORTS_UTIL        #    {:5.1} %  tma_ports_utilized_1     (40.00%)",
        grouped(one),
        pct(one, clk_a)
    );
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      CPU_CLK_UNHALTED.THREAD                                                  (40.00%)",
        grouped(clk_a)
    );
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      CYCLE_ACTIVITY.STALLS_TOTAL                                              (40.00%)",
        grouped(stalls)
    );
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      EXE_ACTIVITY.2_PORTS_UTIL        #    {:5.1} %  tma_ports_utilized_2     (60.00%)",
        grouped(two),
        pct(two, clk_b)
    );
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      CPU_CLK_UNHALTED.THREAD                                                  (60.00%)",
        grouped(clk_b)
    );
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      INST_RETIRED.ANY                 #     {:4.2} tma_info_thread_ipc          (80.00%)",
        grouped(inst),
        inst as f64 / clk_c as f64
    );
    let _ = writeln!(
        out,
        "{ts:>15} {:>18}      CPU_CLK_UNHALTED.THREAD                                                  (80.00%)",
        grouped(clk_c)
    );
}

fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Writes a log of about `mb` MB; returns its path and number of intervals.
fn generate(dir: &Path, mb: usize) -> (PathBuf, usize) {
    let path = dir.join(format!("interval-{mb}mb.txt"));
    let target = mb * 1_000_000;
    let mut text = String::with_capacity(target + 4096);
    let mut i = 0;
    while text.len() < target {
        if i % 25 == 0 {
            text.push_str("#           time             counts unit events\n");
        }
        interval(&mut text, i);
        i += 1;
    }
    std::fs::write(&path, &text).expect("the bench log is written");
    (path, i)
}

struct Measured {
    seconds: f64,
    max_rss_mb: f64,
}

/// Runs `bin eval --from-perf log --model icelake` under GNU time.
fn measure(bin: &Path, log: &Path) -> Measured {
    let start = Instant::now();
    let output = Command::new("/usr/bin/time")
        .args(["-f", "maxrss_kb=%M"])
        .arg(bin)
        .args(["eval", "--from-perf"])
        .arg(log)
        .args(["--model", "icelake"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("/usr/bin/time runs (install GNU time)");
    let seconds = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{} failed: {stderr}", bin.display());
    let kb: f64 = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("maxrss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no max RSS in: {stderr}"));
    Measured { seconds, max_rss_mb: kb / 1024.0 }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let current = std::env::var_os("TMETRIC_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/tmetric"));
    assert!(
        current.exists(),
        "{} is missing: run `cargo build --release --bin tmetric` first",
        current.display()
    );
    let baseline = std::env::var_os("TMETRIC_BENCH_BASELINE")
        .map(PathBuf::from)
        .or_else(|| Some(root.join("target/baseline/tmetric")).filter(|p| p.exists()));
    let sizes: Vec<usize> = std::env::var("TMETRIC_BENCH_MB")
        .ok()
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10, 30, 100]);
    let dir = std::env::temp_dir().join(format!("tmetric-from-perf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");

    println!("current: {}", current.display());
    match &baseline {
        Some(b) => println!("baseline: {}", b.display()),
        None => println!("baseline: none (set TMETRIC_BENCH_BASELINE)"),
    }
    for mb in sizes {
        let (log, intervals) = generate(&dir, mb);
        let bytes = std::fs::metadata(&log).map(|m| m.len() as f64).unwrap_or(0.0);
        let now = measure(&current, &log);
        let mut line = format!(
            "{:>5.1} MB ({intervals} intervals): current {:6.2} s {:7.1} MB/s {:7.1} MB peak",
            bytes / 1e6,
            now.seconds,
            bytes / 1e6 / now.seconds,
            now.max_rss_mb
        );
        if let Some(b) = &baseline {
            let old = measure(b, &log);
            let _ = write!(
                line,
                " | baseline {:6.2} s {:7.1} MB/s {:7.1} MB peak | speed-up {:.1}x, memory {:.2}x",
                old.seconds,
                bytes / 1e6 / old.seconds,
                old.max_rss_mb,
                old.seconds / now.seconds,
                now.max_rss_mb / old.max_rss_mb
            );
        }
        println!("{line}");
        let _ = std::fs::remove_file(&log);
    }
    let _ = std::fs::remove_dir(&dir);
}
