//! `cargo xtask bench --only from-perf`: `tmetric eval --from-perf` on generated `perf stat -I`
//! text logs of 10, 30 and 100 MB: MB/s and peak memory for each size, for the
//! release binary of this tree and, in the same run, the one of `--baseline DIR` (a checkout of
//! an earlier commit, e.g. `git worktree add /tmp/base <commit>`).
//!
//! Both binaries run as children under GNU time (`/usr/bin/time -f`), end to end (read, parse,
//! `--model icelake`, evaluate, print to /dev/null), alternately, best of [`PASSES`]. Peak
//! memory is the child's max RSS; MB/s is given per wall second and per CPU second (user +
//! system), the latter being steadier on a machine shared with other builds.
//!
//! Then logs as people keep them and hostile input (issues 22 and 27): a 10 MB log whose
//! intervals are interleaved with a workload's own lines (about half its bytes), against a clean
//! log of the same size (what the skipped share costs, as a ratio of CPU time); 20 MB of lines
//! that are not perf's at all, and one 64 MB line without a line end, each of which must end
//! with an error in bounded memory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::{Status, Table};

/// Log sizes, in MB.
const SIZES: [usize; 3] = [10, 30, 100];
/// Runs per binary and size; the fastest counts, as the least disturbed.
const PASSES: usize = 3;
/// At least this many MB/s on the 100 MB log, memory flat.
const TARGET_MB_S: f64 = 100.0;

/// One run of one binary on one log.
#[derive(Clone, Copy)]
struct Run {
    wall: f64,
    cpu: f64,
    max_rss_mb: f64,
}

/// The figures for one log size.
struct Size {
    mb: f64,
    intervals: usize,
    ours: Run,
    base: Option<Run>,
}

/// Builds the binaries, generates the logs, measures; returns one entry per size.
pub(crate) fn bench(root: &Path, baseline: Option<&Path>, table: &mut Table) -> Result<()> {
    let ours = release_binary(root)?;
    let base = match baseline {
        Some(dir) => Some(
            release_binary(dir)
                .with_context(|| format!("building the baseline's tmetric in {}", dir.display()))?,
        ),
        None => None,
    };
    println!("  tmetric: {}", ours.display());
    match &base {
        Some(b) => println!("  baseline: {}", b.display()),
        None => println!("  baseline: none (pass --baseline DIR, a checkout of an earlier commit)"),
    }
    // A private scratch directory (fresh name, 0700), removed when dropped.
    let scratch = tempfile::Builder::new()
        .prefix("tmetric-from-perf-bench-")
        .tempdir()
        .context("a scratch directory for the logs")?;
    let dir = scratch.path();
    let mut sizes = Vec::new();
    for mb in SIZES {
        let (log, intervals) = generate(dir, mb)?;
        let bytes = std::fs::metadata(&log).map(|m| m.len() as f64).unwrap_or(0.0);
        let mut best: (Option<Run>, Option<Run>) = (None, None);
        for _ in 0..PASSES {
            let run = measure(&ours, &log)?;
            best.0 = Some(best.0.map_or(run, |b| faster(b, run)));
            if let Some(base) = &base {
                let run = measure(base, &log)?;
                best.1 = Some(best.1.map_or(run, |b| faster(b, run)));
            }
        }
        let size = Size {
            mb: bytes / 1e6,
            intervals,
            ours: best.0.context("at least one pass")?,
            base: best.1,
        };
        println!("  {}", show(&size));
        sizes.push(size);
        let _ = std::fs::remove_file(&log);
    }
    summarise(&sizes, table);
    software(dir, &ours, base.as_deref(), table)?;
    mixed(dir, &ours, table)?;
    hostile(dir, &ours, base.as_deref(), table)?;
    drop(scratch);
    Ok(())
}

/// Size of the software-event log, in MB.
const SOFTWARE_MB: usize = 40;

/// `perf stat -a -I 10` with its default events on a machine without a hardware PMU (a VM):
/// the software events counted, the hardware ones `<not supported>`; no `--model`, so the
/// model is inferred as a user's run would have it.
fn software(dir: &Path, ours: &Path, base: Option<&Path>, table: &mut Table) -> Result<()> {
    let path = dir.join("software.txt");
    let target = SOFTWARE_MB * 1_000_000;
    let mut text = String::with_capacity(target + 4096);
    text.push_str("#           time             counts unit events\n");
    let mut i = 0usize;
    while text.len() < target {
        let ts = format!("{}.{:09}", (i + 1) / 100, ((i + 1) % 100) * 10_000_000 + 80_234);
        let k = (i % 89) as f64;
        let clock = 20.0 + k * 0.01;
        let rows = [
            (
                format!("{clock:.2} msec"),
                "cpu-clock",
                format!("#    {:.3} CPUs utilized", clock / 10.0),
            ),
            (
                format!("{}", 19 + i % 7),
                "context-switches",
                format!("#  {:.3} /sec", (19 + i % 7) as f64 / clock * 1000.0),
            ),
            (
                format!("{}", i % 4),
                "cpu-migrations",
                format!("#  {:.3} /sec", (i % 4) as f64 / clock * 1000.0),
            ),
            (
                format!("{}", 80 + i % 13),
                "page-faults",
                format!("#    {:.3} K/sec", (80 + i % 13) as f64 / clock),
            ),
        ];
        for (count, event, metric) in rows {
            let _ = writeln!(text, "{ts:>15} {count:>18}      {event:<32} {metric:<30}");
        }
        for event in ["cycles", "instructions", "branches", "branch-misses"] {
            let _ = writeln!(text, "{ts:>15} {:>18}      {event:<59}", "<not supported>");
        }
        i += 1;
    }
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    let mb = text.len() as f64 / 1e6;
    drop(text);
    let (mut best, mut best_base): (Option<Run>, Option<Run>) = (None, None);
    for _ in 0..PASSES {
        let run = measure_with(ours, &path, &[])?;
        best = Some(best.map_or(run, |b| faster(b, run)));
        if let Some(base) = base {
            let run = measure_with(base, &path, &[])?;
            best_base = Some(best_base.map_or(run, |b| faster(b, run)));
        }
    }
    let ours_run = best.context("at least one pass")?;
    let rate_ours = rate(mb, ours_run.cpu);
    println!(
        "  software-event -I log, {mb:.1} MB ({i} intervals, model inferred): {:.2} s CPU, {rate_ours:.1} MB/s, {:.1} MB peak",
        ours_run.cpu, ours_run.max_rss_mb
    );
    let (baseline, ratio) = match best_base {
        Some(b) => {
            (format!("{:.1} MB/s", rate(mb, b.cpu)), format!("{:.1}x faster", b.cpu / ours_run.cpu))
        }
        None => (String::new(), String::new()),
    };
    table.check(
        &format!("from-perf {mb:.0} MB software-event -I log (CPU time)"),
        &format!("{rate_ours:.1} MB/s, {:.0} MB", ours_run.max_rss_mb),
        &baseline,
        &ratio,
        &format!(">= {TARGET_MB_S} MB/s"),
        rate_ours >= TARGET_MB_S,
    );
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// A line a workload prints between perf's intervals, varied like real output.
fn noise_line(out: &mut String, i: usize, j: usize) {
    let n = i * 31 + j * 7;
    let _ = match j % 6 {
        0 => writeln!(out, "iteration {n}: {}.{:02} ms/op", n % 9 + 1, n % 100),
        1 => writeln!(out, "worker {} finished: {} tasks", j % 8, n % 1000),
        2 => writeln!(out, "{} ops/sec", 1000 + n % 9000),
        3 => writeln!(out, "<progress {}%>", n % 100),
        4 => writeln!(out, "{} instructions retired so far", 1000 + n),
        _ => writeln!(out, "[bench] checkpoint {n} written to /tmp/state-{j}.bin"),
    };
}

/// Writes the same intervals with `noise` workload lines after each (0: a clean log) up to
/// about `mb` MB; returns the path and the bytes and lines of the workload's.
fn generate_mixed(dir: &Path, mb: usize, noise: usize) -> Result<(PathBuf, usize, usize, usize)> {
    let path = dir.join(format!("mixed-{mb}mb-{noise}.txt"));
    let target = mb * 1_000_000;
    let mut text = String::with_capacity(target + 4096);
    let (mut noise_bytes, mut noise_lines, mut lines) = (0, 0, 0);
    let mut i = 0;
    while text.len() < target {
        let before = text.len();
        interval(&mut text, i);
        lines += text[before..].matches('\n').count();
        for j in 0..noise {
            let before = text.len();
            noise_line(&mut text, i, j);
            noise_bytes += text.len() - before;
            noise_lines += 1;
            lines += 1;
        }
        i += 1;
    }
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    Ok((path, noise_bytes, noise_lines, lines))
}

/// The 10 MB mixed log against a clean one of the same size.
fn mixed(dir: &Path, bin: &Path, table: &mut Table) -> Result<()> {
    let (clean, ..) = generate_mixed(dir, 10, 0)?;
    let (mixed, noise_bytes, noise_lines, lines) = generate_mixed(dir, 10, 24)?;
    let bytes = std::fs::metadata(&mixed).map(|m| m.len() as f64).unwrap_or(1.0);
    let (mut best_clean, mut best_mixed): (Option<Run>, Option<Run>) = (None, None);
    for _ in 0..PASSES {
        let run = measure(bin, &clean)?;
        best_clean = Some(best_clean.map_or(run, |b| faster(b, run)));
        let run = measure(bin, &mixed)?;
        best_mixed = Some(best_mixed.map_or(run, |b| faster(b, run)));
    }
    let (c, m) = (best_clean.context("a pass")?, best_mixed.context("a pass")?);
    let share = noise_bytes as f64 / bytes;
    let mb = bytes / 1e6;
    println!(
        "  mixed {mb:.1} MB log: {:.0}% of its bytes ({noise_lines} of {lines} lines) are a workload's; {:.2} s CPU ({:.1} MB/s, {:.1} MB peak) against {:.2} s CPU ({:.1} MB/s) for a clean log of the same size: {:.2}x the time",
        100.0 * share,
        m.cpu,
        rate(mb, m.cpu),
        m.max_rss_mb,
        c.cpu,
        rate(mb, c.cpu),
        m.cpu / c.cpu
    );
    table.row(
        &format!("from-perf 10 MB log, {:.0}% a workload's lines (CPU time)", 100.0 * share),
        &format!("{:.1} MB/s, {:.0} MB", rate(mb, m.cpu), m.max_rss_mb),
        &format!("clean: {:.1} MB/s", rate(mb, c.cpu)),
        &format!("{:.2}x the time", m.cpu / c.cpu),
        "",
        Status::Info,
    );
    let _ = std::fs::remove_file(clean);
    let _ = std::fs::remove_file(mixed);
    Ok(())
}

/// Runs `bin eval --from-perf log` expecting it to fail; (run, the last line of stderr).
fn measure_failing(bin: &Path, log: &Path) -> Result<(Run, String)> {
    let output = Command::new("/usr/bin/time")
        .args(["-f", "tmetric-bench wall=%e user=%U sys=%S maxrss_kb=%M"])
        .arg(bin)
        .args(["eval", "--from-perf"])
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running /usr/bin/time (install GNU time)")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("tmetric-bench "))
        .with_context(|| format!("no figures from GNU time in: {stderr}"))?;
    let field = |name: &str| -> Result<f64> {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in `{line}`"))
    };
    let said = stderr.lines().find(|l| l.starts_with("tmetric:")).map_or_else(
        || format!("exit {:?}", output.status.code()),
        |l| l.chars().take(100).collect(),
    );
    let run = Run {
        wall: field("wall")?,
        cpu: field("user")? + field("sys")?,
        max_rss_mb: field("maxrss_kb")? / 1024.0,
    };
    Ok((run, said))
}

/// Hostile input: only lines that are not perf's, and one line without an end.
fn hostile(dir: &Path, bin: &Path, base: Option<&Path>, table: &mut Table) -> Result<()> {
    let noise = dir.join("noise-20mb.txt");
    let mut text = String::with_capacity(20_000_000 + 64);
    let mut i = 0;
    while text.len() < 20_000_000 {
        noise_line(&mut text, i / 6, i);
        i += 1;
    }
    std::fs::write(&noise, &text).context("writing the noise log")?;
    drop(text);
    let long = dir.join("one-line-64mb.txt");
    std::fs::write(&long, vec![b'7'; 64 << 20]).context("writing the one-line log")?;
    for (path, what, limit_mb) in [
        (&noise, format!("20 MB, {i} lines none of which is perf's"), 64.0),
        (&long, "one 64 MB line without a line end".to_string(), 64.0),
    ] {
        let (ours, said) = measure_failing(bin, path)?;
        println!(
            "  hostile: {what}: {:.2} s wall, {:.1} MB peak: {said}",
            ours.wall, ours.max_rss_mb
        );
        let base_run = match base {
            Some(b) => Some(measure_failing(b, path)?.0),
            None => None,
        };
        if let Some(b) = base_run {
            println!("  {:>9} baseline: {:.2} s wall, {:.1} MB peak", "", b.wall, b.max_rss_mb);
        }
        table.check(
            &format!("from-perf hostile: {what}"),
            &format!("{:.2} s, {:.0} MB peak", ours.wall, ours.max_rss_mb),
            &base_run.map_or(String::new(), |b| format!("{:.2} s, {:.0} MB", b.wall, b.max_rss_mb)),
            &base_run.map_or(String::new(), |b| {
                format!("{:.2}x memory", ours.max_rss_mb / b.max_rss_mb)
            }),
            &format!("an error, <= {limit_mb:.0} MB"),
            ours.max_rss_mb <= limit_mb,
        );
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// `cargo build --release --bin tmetric` in `tree`; the binary's path.
fn release_binary(tree: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(tree)
        .args(["build", "--release", "--quiet", "--bin", "tmetric"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release --bin tmetric failed in {}", tree.display());
    }
    let binary = tree.join("target/release/tmetric");
    if !binary.exists() {
        bail!("{} is missing after the build", binary.display());
    }
    Ok(binary)
}

fn faster(a: Run, b: Run) -> Run {
    if b.cpu < a.cpu { b } else { a }
}

/// Runs `bin eval --from-perf log --model icelake` under GNU time.
fn measure(bin: &Path, log: &Path) -> Result<Run> {
    measure_with(bin, log, &["--model", "icelake"])
}

/// Runs `bin eval --from-perf log ARGS` under GNU time.
fn measure_with(bin: &Path, log: &Path, args: &[&str]) -> Result<Run> {
    let output = Command::new("/usr/bin/time")
        .args(["-f", "tmetric-bench wall=%e user=%U sys=%S maxrss_kb=%M"])
        .arg(bin)
        .args(["eval", "--from-perf"])
        .arg(log)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running /usr/bin/time (install GNU time)")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!("{} failed: {stderr}", bin.display());
    }
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("tmetric-bench "))
        .with_context(|| format!("no figures from GNU time in: {stderr}"))?;
    let field = |name: &str| -> Result<f64> {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {name} in `{line}`"))
    };
    Ok(Run {
        wall: field("wall")?,
        cpu: field("user")? + field("sys")?,
        max_rss_mb: field("maxrss_kb")? / 1024.0,
    })
}

fn rate(mb: f64, seconds: f64) -> f64 {
    mb / seconds.max(1e-3)
}

fn show(size: &Size) -> String {
    let one = |r: Run| {
        format!(
            "{:6.2} s wall {:6.1} MB/s, {:6.2} s CPU {:6.1} MB/s, {:7.1} MB peak",
            r.wall,
            rate(size.mb, r.wall),
            r.cpu,
            rate(size.mb, r.cpu),
            r.max_rss_mb
        )
    };
    let mut line =
        format!("{:5.1} MB ({} intervals): tmetric {}", size.mb, size.intervals, one(size.ours));
    if let Some(base) = size.base {
        let _ = write!(
            line,
            "\n  {:>28} baseline {} | {:.1}x the CPU speed, {:.2}x the memory",
            "",
            one(base),
            base.cpu / size.ours.cpu,
            size.ours.max_rss_mb / base.max_rss_mb
        );
    }
    line
}

fn summarise(sizes: &[Size], table: &mut Table) {
    for size in sizes {
        let ours = rate(size.mb, size.ours.cpu);
        let (base, ratio) = match size.base {
            Some(b) => (
                format!("{:.1} MB/s, {:.0} MB", rate(size.mb, b.cpu), b.max_rss_mb),
                format!(
                    "{:.1}x faster, {:.2}x memory",
                    b.cpu / size.ours.cpu,
                    size.ours.max_rss_mb / b.max_rss_mb
                ),
            ),
            None => (String::new(), String::new()),
        };
        let figure = format!("from-perf {:.0} MB -I log (CPU time)", size.mb);
        let measured = format!("{ours:.1} MB/s, {:.0} MB", size.ours.max_rss_mb);
        if size.mb >= 99.0 {
            table.check(
                &figure,
                &measured,
                &base,
                &ratio,
                &format!(">= {TARGET_MB_S} MB/s"),
                ours >= TARGET_MB_S,
            );
        } else {
            table.row(&figure, &measured, &base, &ratio, "", Status::Info);
        }
    }
    // Linear growth: memory bounded as the log grows tenfold.
    if let (Some(small), Some(large)) = (sizes.first(), sizes.last()) {
        let growth = large.ours.max_rss_mb / small.ours.max_rss_mb;
        table.check(
            &format!("from-perf peak memory, {:.0} MB / {:.0} MB log", large.mb, small.mb),
            &format!("{growth:.2}x"),
            &small
                .base
                .zip(large.base)
                .map_or(String::new(), |(s, l)| format!("{:.2}x", l.max_rss_mb / s.max_rss_mb)),
            "",
            &format!("<= {:.0}x (linear)", large.mb / small.mb),
            growth <= large.mb / small.mb,
        );
    }
}

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
    let rows = [
        (
            one,
            "EXE_ACTIVITY.1_PORTS_UTIL",
            format!("#    {:5.1} %  tma_ports_utilized_1", pct(one, clk_a)),
            40,
        ),
        (clk_a, "CPU_CLK_UNHALTED.THREAD", String::new(), 40),
        (stalls, "CYCLE_ACTIVITY.STALLS_TOTAL", String::new(), 40),
        (
            two,
            "EXE_ACTIVITY.2_PORTS_UTIL",
            format!("#    {:5.1} %  tma_ports_utilized_2", pct(two, clk_b)),
            60,
        ),
        (clk_b, "CPU_CLK_UNHALTED.THREAD", String::new(), 60),
        (
            inst,
            "INST_RETIRED.ANY",
            format!("#     {:4.2} tma_info_thread_ipc", inst as f64 / clk_c as f64),
            80,
        ),
        (clk_c, "CPU_CLK_UNHALTED.THREAD", String::new(), 80),
    ];
    for (count, event, metric, share) in rows {
        let _ = writeln!(
            out,
            "{ts:>15} {:>18}      {event:<32} {metric:<40} ({share}.00%)",
            grouped(count)
        );
    }
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
fn generate(dir: &Path, mb: usize) -> Result<(PathBuf, usize)> {
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
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    Ok((path, i))
}
