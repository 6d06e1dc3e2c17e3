//! `--only stat`: `tmetric stat` against `perf stat` on the forms the hot-paths issue times,
//! run in turn (tmetric, perf, tmetric, perf, ...) so that both meet the same machine:
//! start-up (`stat -e task-clock true`, wall time) and a system-wide interval run (`stat -a -I
//! 10 -e task-clock,context-switches,page-faults sleep 2`, CPU time). CPU is the children's
//! user plus system time (`getrusage(RUSAGE_CHILDREN)` around each run); the figure is the
//! median of the runs' ratios, as the machines are noisy. Software events only: they count on
//! every machine, this KVM guest included.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use tmetric_runtime::sys::children_cpu;

use crate::builds::{find_perf_binary, release_tmetric};
use crate::table::{Status, Table};

/// One finished run: wall and CPU time.
struct Timed {
    wall: Duration,
    cpu: Duration,
}

/// Runs `program args` to the end, its output thrown away.
fn run(program: &Path, args: &[&str]) -> Result<Timed> {
    let cpu = children_cpu();
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("{} {}", program.display(), args.join(" ")))?;
    let wall = start.elapsed();
    if !status.success() {
        bail!("{} {} failed: {status}", program.display(), args.join(" "));
    }
    Ok(Timed { wall, cpu: children_cpu().saturating_sub(cpu) })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `runs` pairs of tmetric's and perf's run of `args`, one warm-up pair first: the medians of
/// (tmetric, perf, tmetric / perf) of `figure`.
fn pairs(
    tmetric: &Path,
    perf: &Path,
    args: &[&str],
    runs: usize,
    figure: fn(&Timed) -> f64,
) -> Result<(f64, f64, f64)> {
    run(tmetric, args)?;
    run(perf, args)?;
    let (mut mine, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let a = figure(&run(tmetric, args)?);
        let b = figure(&run(perf, args)?);
        mine.push(a);
        theirs.push(b);
        ratios.push(a / b.max(1e-9));
    }
    Ok((median(mine), median(theirs), median(ratios)))
}

/// The section.
pub fn bench(root: &Path, table: &mut Table) -> Result<()> {
    let Some((perf, _)) = find_perf_binary() else {
        bail!("no perf binary (install linux-perf)");
    };
    let bin = release_tmetric(root)?;
    let wall = |t: &Timed| t.wall.as_secs_f64();
    let cpu = |t: &Timed| t.cpu.as_secs_f64();

    let startup = ["stat", "-e", "task-clock", "true"];
    let (mine, theirs, ratio) = pairs(&bin, &perf, &startup, 15, wall)?;
    println!(
        "  start-up, `stat -e task-clock true`, wall: tmetric {:.2} ms, perf {:.2} ms ({ratio:.2}x, median of 15 pairs)",
        mine * 1e3,
        theirs * 1e3
    );
    table.row(
        "stat start-up (wall)",
        &format!("{:.2} ms", mine * 1e3),
        &format!("perf {:.2} ms", theirs * 1e3),
        &format!("{ratio:.2}x"),
        "<= 0.33x perf (3x faster)",
        if ratio <= 1.0 / 3.0 { Status::Met } else { Status::Missed },
    );

    let interval =
        ["stat", "-a", "-I", "10", "-e", "task-clock,context-switches,page-faults", "sleep", "2"];
    let (mine, theirs, ratio) = pairs(&bin, &perf, &interval, 5, cpu)?;
    println!(
        "  `stat -a -I 10 -e task-clock,context-switches,page-faults sleep 2`, CPU: tmetric {:.1} ms, perf {:.1} ms ({ratio:.2}x, median of 5 pairs)",
        mine * 1e3,
        theirs * 1e3
    );
    table.row(
        "stat -a -I 10, 3 software events, 2 s (CPU)",
        &format!("{:.1} ms", mine * 1e3),
        &format!("perf {:.1} ms", theirs * 1e3),
        &format!("{ratio:.2}x"),
        "<= 0.5x perf",
        if ratio <= 0.5 { Status::Met } else { Status::Missed },
    );
    Ok(())
}
