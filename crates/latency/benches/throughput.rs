//! Benchmark: `tmetric latency` lines per second on a generated 1,000,000-line trace, next to seed
//! 002's bash+sqlite3 script on the first 1,000 lines of the same trace, in the same run.
//!
//! Run with `cargo bench -p tmetric-latency`. The seed script is extracted at run time from
//! the seed document `002_*.txt` (patch 2 then patch 3) into a temporary directory; it is never
//! part of the repository. The seeds folder is `$TMETRIC_SEEDS`, else `../shared/seeds` beside
//! the workspace's directory. The script needs bash, sqlite3 and bc; when it cannot
//! run, the reason is printed and tmetric's figure is still reported.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use std::{env, fs, io};

use tmetric_latency::synth::{Synth, TraceLayout};
use tmetric_latency::{Options, Report, analyze_path};

const BIG_LINES: usize = 1_000_000;
const SEED_LINES: usize = 1_000;
const RUNS: usize = 3;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it, and
    // then a quick smoke check is enough (the full run takes half a minute, the seed script most).
    if !env::args().any(|arg| arg == "--bench") {
        smoke();
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("tmetric-latency-bench-")
        .tempdir()
        .expect("create a temporary directory");
    let result = bench(dir.path());
    drop(dir);
    if let Err(err) = result {
        eprintln!("benchmark failed: {err}");
        std::process::exit(1);
    }
}

fn smoke() {
    let synth =
        Synth { lines: 10_000, seed: 2, layout: TraceLayout::TracePipe, enable_noise: true };
    let mut text = Vec::new();
    synth.write(&mut text).expect("write to memory");
    let report = tmetric_latency::analyze(text.as_slice(), Options::xsave_default(), "smoke")
        .expect("analyse");
    assert_eq!((report.samples, report.noise_count, report.malformed_count), (9_999, 1, 0));
    println!("smoke run only; `cargo bench -p tmetric-latency` runs the benchmark");
}

fn bench(dir: &Path) -> io::Result<()> {
    let synth =
        Synth { lines: BIG_LINES, seed: 2, layout: TraceLayout::TracePipe, enable_noise: true };
    let big = dir.join("trace-1m.log");
    let mut writer = io::BufWriter::new(fs::File::create(&big)?);
    synth.write(&mut writer)?;
    io::Write::flush(&mut writer)?;
    drop(writer);
    let bytes = fs::metadata(&big)?.len();

    let big_path = big.to_str().expect("temporary paths are UTF-8");
    let mut best = Duration::MAX;
    let mut report = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let run = analyze_path(big_path, Options::xsave_default()).map_err(io::Error::other)?;
        best = best.min(start.elapsed());
        report = Some(run);
    }
    let report = report.expect("at least one run");
    let tmetric_rate = BIG_LINES as f64 / best.as_secs_f64();
    println!(
        "tmetric latency: {BIG_LINES} lines ({:.1} MB) in {:.3} s (best of {RUNS}): {:.0} lines/s, {:.0} MB/s",
        bytes as f64 / 1e6,
        best.as_secs_f64(),
        tmetric_rate,
        bytes as f64 / 1e6 / best.as_secs_f64()
    );
    println!(
        "  {} groups, {} samples, {} noise excluded, {} malformed; peak RSS {}",
        report.rows.len(),
        report.samples,
        report.noise_count,
        report.malformed_count,
        peak_rss().unwrap_or_else(|| "unknown".into())
    );
    if tmetric_rate < 1_000_000.0 {
        println!("  BELOW TARGET: the target is at least 1,000,000 lines/s");
    }

    let small = dir.join("trace-1k.log");
    let text = fs::read_to_string(&big)?;
    let first: String = text.split_inclusive('\n').take(SEED_LINES).collect();
    fs::write(&small, first)?;
    drop(text);

    match run_seed(dir, &small) {
        Ok((elapsed, table)) => {
            let seed_rate = SEED_LINES as f64 / elapsed.as_secs_f64();
            println!(
                "the original xsave-latency-trace.sh: {SEED_LINES} lines in {:.2} s: {:.1} lines/s",
                elapsed.as_secs_f64(),
                seed_rate
            );
            println!(
                "ratio: tmetric is {:.0}x the seed script (target 5,000x)",
                tmetric_rate / seed_rate
            );
            let mut keep = Options::xsave_default();
            keep.detect_noise = false;
            let ours = analyze_path(small.to_str().expect("UTF-8 path"), keep)
                .map_err(io::Error::other)?;
            report_parity(&table, &ours);
        }
        Err(why) => {
            println!("the original script not run: {why}");
            println!("ratio: not available; tmetric alone: {tmetric_rate:.0} lines/s");
        }
    }
    Ok(())
}

/// Compares the seed's table with ours on the same lines (noise kept, as the seed keeps it).
fn report_parity(seed_table: &[Vec<String>], ours: &Report) {
    let ours: Vec<Vec<String>> = ours
        .rows
        .iter()
        .map(|row| {
            let s = row.stats;
            let mut cells = vec![row.event.clone()];
            cells.extend(row.group.iter().map(ToString::to_string));
            cells.extend([s.count, s.min, s.max, s.avg, s.avg97].map(|n| n.to_string()));
            cells
        })
        .collect();
    if ours == seed_table {
        println!(
            "parity: the seed's table and tmetric's (with --keep-noise) agree on all {} groups",
            ours.len()
        );
    } else {
        println!("parity: MISMATCH between the seed's table and tmetric's");
        println!("  seed:    {seed_table:?}");
        println!("  tmetric: {ours:?}");
    }
}

fn peak_rss() -> Option<String> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line["VmHWM:".len()..].trim().to_owned())
}

fn seeds_dir() -> PathBuf {
    if let Some(dir) = env::var_os("TMETRIC_SEEDS") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/seeds")
}

/// Extracts, runs and times the seed script; returns its elapsed time and table rows.
fn run_seed(dir: &Path, log: &Path) -> Result<(Duration, Vec<Vec<String>>), String> {
    for tool in ["bash", "sqlite3", "bc"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output();
        if !found.is_ok_and(|out| out.status.success()) {
            return Err(format!(
                "`{tool}` is not installed (the seed script needs bash, sqlite3 and bc)"
            ));
        }
    }
    let seeds = seeds_dir();
    let seed_file = fs::read_dir(&seeds)
        .map_err(|err| format!("cannot list {}: {err}", seeds.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("002_"))
        })
        .ok_or_else(|| format!("no 002_*.txt in {}", seeds.display()))?;
    let seed_text =
        fs::read_to_string(&seed_file).map_err(|err| format!("{}: {err}", seed_file.display()))?;
    let script =
        extract_script(&seed_text).map_err(|err| format!("{}: {err}", seed_file.display()))?;
    let script_path = dir.join("xsave-latency-trace.sh");
    fs::write(&script_path, script).map_err(|err| err.to_string())?;

    let start = Instant::now();
    let output = Command::new("bash")
        .arg(&script_path)
        .arg(log)
        .current_dir(dir)
        .output()
        .map_err(|err| format!("cannot start bash: {err}"))?;
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "the script failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // Progress lines end in `\r`; the table follows the last one.
    let table_text = stdout.rsplit('\r').next().unwrap_or_default();
    let rows = table_text
        .lines()
        .skip_while(|line| !line.starts_with("---"))
        .skip(1)
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect();
    Ok((elapsed, rows))
}

const SCRIPT_DIFF: &str = "diff --git a/tools/testing/fpu/xsave-latency-trace.sh";

/// Applies every diff of `tools/testing/fpu/xsave-latency-trace.sh` in the seed, in order.
fn extract_script(seed: &str) -> Result<String, String> {
    let lines: Vec<&str> = seed.lines().collect();
    let mut file: Vec<String> = Vec::new();
    let mut patches = 0;
    let mut idx = 0;
    while idx < lines.len() {
        if !lines[idx].starts_with(SCRIPT_DIFF) {
            idx += 1;
            continue;
        }
        patches += 1;
        idx += 1;
        // Each diff's hunks run until the next diff header or the mail signature.
        let mut offset: isize = 0;
        while idx < lines.len() && !lines[idx].starts_with("diff --git") && lines[idx] != "-- " {
            if let Some(header) = lines[idx].strip_prefix("@@ -") {
                let (old_start, old_len, new_len) = parse_hunk_header(header)?;
                idx += 1;
                let mut old = Vec::new();
                let mut new = Vec::new();
                while old.len() < old_len || new.len() < new_len {
                    let line = *lines.get(idx).ok_or("hunk runs past the end of the seed")?;
                    idx += 1;
                    // Mail clients drop the lone space of an empty context line.
                    let mut chars = line.chars();
                    let tag = chars.next().unwrap_or(' ');
                    let body = chars.as_str();
                    match tag {
                        ' ' => {
                            old.push(body.to_owned());
                            new.push(body.to_owned());
                        }
                        '-' => old.push(body.to_owned()),
                        '+' => new.push(body.to_owned()),
                        _ => return Err(format!("unexpected hunk line `{line}`")),
                    }
                }
                let at = (old_start.saturating_sub(1) as isize + offset) as usize;
                if file.get(at..at + old.len()) != Some(&old[..]) {
                    return Err(format!(
                        "a hunk of patch {patches} does not apply at line {old_start}"
                    ));
                }
                file.splice(at..at + old.len(), new.iter().cloned());
                offset += new.len() as isize - old.len() as isize;
            } else {
                idx += 1;
            }
        }
    }
    if patches == 0 {
        return Err("no diff of tools/testing/fpu/xsave-latency-trace.sh found".into());
    }
    Ok(file.join("\n") + "\n")
}

/// `1,5 +1,7 @@ ...` after the leading `@@ -`: old start, old length and new length.
fn parse_hunk_header(header: &str) -> Result<(usize, usize, usize), String> {
    let bad = || format!("bad hunk header `@@ -{header}`");
    let (old, rest) = header.split_once(" +").ok_or_else(bad)?;
    let (new, _) = rest.split_once(" @@").ok_or_else(bad)?;
    let range = |text: &str| -> Result<(usize, usize), String> {
        let (start, len) = text.split_once(',').unwrap_or((text, "1"));
        Ok((start.parse().map_err(|_| bad())?, len.parse().map_err(|_| bad())?))
    };
    let (old_start, old_len) = range(old)?;
    let (_, new_len) = range(new)?;
    Ok((old_start, old_len, new_len))
}
