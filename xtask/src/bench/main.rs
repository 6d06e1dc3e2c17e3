//! `cargo xtask bench`: the figures of the "cargo xtask regen" issue in one run. Code generation
//! against perf's jevents.py, compiled against interpreted evaluation of every sapphirerapids
//! metric, expression parse rates against perf's metric.py, generated and binary sizes (against
//! the installed perf binary), and with `--build` the cold release build, the catalogue-only
//! rebuild (time and peak memory) and a clean `cargo test --workspace`. With `--baseline DIR`
//! (a checkout of an earlier commit) the build figures of that tree are measured in the same
//! run, interleaved with ours, so that the ratios compare like with like.
//!
//! This is its own binary (`xtask-bench`, behind the `bench` feature) because it links the
//! generated catalogue: plain `cargo xtask regen` must build even when the generated code does
//! not compile, since regen is what repairs it. `cargo xtask bench` runs it through cargo.
//!
//! Baselines run in the same run as tmetric, back to back: the machines are noisy
//! (1.3-2x run to run), so the ratios matter more than the absolute figures.

// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]

// regen in process runs on the allocator `cargo xtask regen` has (`src/main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The benchmark times `regen` in process through the xtask library, as `cargo xtask regen` runs it.
use xtask::regen;
// `--only from-perf`: `eval --from-perf` on generated interval logs against a baseline binary.
mod from_perf;

mod accuracy;
mod benches;
mod builds;
mod ci;
mod codegen;
mod eval;
mod hostile;
mod parse;
mod serve;
mod stat;
mod table;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tmetric_pmu_events::resolve::resolve_tree;

use builds::{GenSizes, bench_binary, bench_build, find_perf_binary};
use codegen::{bench_regen, find_perf_dir};
use eval::bench_eval;
use parse::bench_parse;
use table::{Status, Table};

const USAGE: &str = "usage: cargo xtask bench [--build] [--only <sections>] [--quick] [--baseline <dir>] [--perf-dir <tools/perf/pmu-events>]\n  \
     --build     also time a cold `cargo build --release --workspace` in a scratch target\n              \
     directory, the rebuilds after touching the CLI and crates/catalog/src/lib.rs (the\n              \
     catalogue alone, then its dependents), and a clean `cargo test --workspace -j2`\n              \
     (takes many minutes)\n  \
     --only      run only these comma-separated sections: regen, eval, parse, sizes, binary\n              \
     (the stripped release binary, built in ./target, against perf's and the baseline's),\n              \
     build (cold build and rebuilds), test (clean cargo test), from-perf (eval --from-perf\n              \
     on generated 10/30/100 MB -I logs, against --baseline's release binary), serve\n              \
     (tmetric serve's CPU per interval, scraped once an interval and not scraped, against\n              \
     perf stat -I --for-each-cgroup at 1, 20 and 100 cgroups, side by side; root), hostile (the HTTP attacks of the security round\n              \
     against tmetric serve and node_exporter: $TMETRIC_BENCH_NODE_EXPORTER or in PATH,\n              \
     skipped and said when absent), stat (tmetric stat against perf stat in turn: start-up\n              \
     wall time and a 2 s system-wide -I 10 run's CPU), accuracy (multiplexed metrics against\n              \
     the truth on the realistic simulator over workload classes: tmetric, perf 6.12's\n              \
     grouping and each metric alone; minutes), latency\n              \
     (tmetric latency on a 1M-line trace, against the shell script it replaced), schedule\n              \
     (time slices of every model and selection against the lower bound and perf's\n              \
     strategy), ci (.ci/run on a fresh clone of HEAD: fmt, clippy, tests; many minutes)\n  \
     --quick     with accuracy: its quick subset (three machines, levels 1-3, one seed)\n  \
     --baseline  a checkout of an earlier commit: its sizes and (with --build) build figures\n              \
     are measured in the same run, interleaved with ours\n  \
     --perf-dir  perf's tools/perf/pmu-events (default: $TMETRIC_PERF_PMU_EVENTS, then\n              \
     target/linux-source-6.12/tools/perf/pmu-events, extracted from the distribution's\n              \
     linux-source-6.12 package when missing)";

/// The model of part (b).
const EVAL_MODEL: &str = "x86/sapphirerapids";
/// Random input vectors (one perf interval each).
const VECTORS: usize = 2_000;
/// Passes per figure; the best one counts, as the least disturbed by other processes.
const PASSES: usize = 3;
/// The compiled code is fast enough that one sweep over the vectors is too short to time well.
const COMPILED_SWEEPS: usize = 20;
/// Vectors on which compiled and interpreted results are compared, so that the two timings
/// are known to compute the same thing.
const AGREEMENT_VECTORS: usize = 100;
/// Where perf's tree is extracted, under the workspace's `target/`: a predictable path in a
/// shared directory such as /tmp could be planted by another user, and the bench runs the
/// jevents.py it finds there (as root, on these machines).
const PERF_DEFAULT: &str = "target/linux-source-6.12/tools/perf/pmu-events";

// Targets: the code generation work's, raised by the hot-path work where it set new ones.
const TARGET_REGEN_SPEEDUP: f64 = 25.0;
const TARGET_EVAL_SPEEDUP: f64 = 10.0;
const TARGET_EVAL_NS: f64 = 5.0;
/// Expressions parsed per second, against perf's metric.py.
const TARGET_PARSE_SPEEDUP: f64 = 30.0;
const TARGET_COLD_BUILD_S: f64 = 300.0;
const TARGET_REBUILD_S: f64 = 30.0;
/// Issue 13: a clean `cargo test --workspace` on 2 cores.
const TARGET_TEST_S: f64 = 120.0;
/// Issue 13: the generated Rust source.
const TARGET_GEN_SOURCE_BYTES: u64 = 6_000_000;

/// The sections `--only` selects from.
const SECTIONS: [&str; 15] = [
    "regen",
    "eval",
    "parse",
    "sizes",
    "binary",
    "build",
    "test",
    "from-perf",
    "serve",
    "hostile",
    "stat",
    "accuracy",
    "latency",
    "schedule",
    "ci",
];

struct Options {
    build: bool,
    /// `--only`: the sections to run; empty runs the default ones.
    only: Vec<String>,
    /// `--quick`: the accuracy bench's quick subset.
    quick: bool,
    baseline: Option<PathBuf>,
    perf_dir: Option<PathBuf>,
}

impl Options {
    /// Whether to run `section`: all but the slow ones by default, those too with `--build`.
    fn runs(&self, section: &str) -> bool {
        if self.only.is_empty() {
            self.build
                || !matches!(
                    section,
                    "binary"
                        | "build"
                        | "test"
                        | "from-perf"
                        | "serve"
                        | "hostile"
                        | "stat"
                        | "accuracy"
                        | "latency"
                        | "schedule"
                        | "ci"
                )
        } else {
            self.only.iter().any(|s| s == section)
        }
    }
}

fn parse_args(args: &[String]) -> Result<Options> {
    let mut options =
        Options { build: false, only: Vec::new(), quick: false, baseline: None, perf_dir: None };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--build" => options.build = true,
            "--quick" => options.quick = true,
            "--only" => {
                let list =
                    args.next().with_context(|| format!("--only needs sections\n{USAGE}"))?;
                for section in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    ensure!(
                        SECTIONS.contains(&section),
                        "unknown section `{section}` (sections: {})\n{USAGE}",
                        SECTIONS.join(", ")
                    );
                    options.only.push(section.to_string());
                }
            }
            "--baseline" => {
                let dir = args
                    .next()
                    .with_context(|| format!("--baseline needs a directory\n{USAGE}"))?;
                options.baseline = Some(PathBuf::from(dir));
            }
            "--perf-dir" => {
                let dir = args
                    .next()
                    .with_context(|| format!("--perf-dir needs a directory\n{USAGE}"))?;
                options.perf_dir = Some(PathBuf::from(dir));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    Ok(options)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = parse_args(&args)?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask lives in the workspace")?
        .to_path_buf();
    let mut table = Table::default();

    println!(
        "tmetric bench: {} cores, load average {} (other processes share the cores: compare \
         ratios, not absolute figures)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    let wants_perf = options.runs("regen") || options.runs("parse");
    let perf = match wants_perf.then(|| find_perf_dir(options.perf_dir.clone(), &root)) {
        Some(Ok(dir)) => {
            println!("perf baseline: {}", dir.display());
            Some(dir)
        }
        Some(Err(why)) => {
            println!("perf baseline skipped: {why}");
            None
        }
        None => None,
    };

    // (a) Code generation.
    if options.runs("regen") {
        bench_regen_section(&root, perf.as_deref(), &options, &mut table)?;
    }

    if options.runs("eval") || options.runs("parse") {
        eval_and_parse_sections(&root, perf.as_deref(), &options, &mut table)?;
    }

    // Sizes.
    let perf_binary = find_perf_binary();
    if options.runs("sizes") {
        sizes_section(&root, perf_binary.as_ref(), &options, &mut table);
    }

    // The release binary, built where developers build it (incrementally).
    let trees: Vec<(&str, &Path)> = std::iter::once(("tmetric", root.as_path()))
        .chain(options.baseline.as_deref().map(|b| ("baseline", b)))
        .collect();
    if options.runs("binary") && !options.runs("build") {
        println!("\nrelease binary (cargo build --release --bin tmetric, in each tree's target/)");
        match bench_binary(&trees) {
            Ok(figures) => table.build(&figures, perf_binary.as_ref()),
            Err(err) => {
                println!("  binary not measured: {err:#}");
                table.row("stripped release binary", "failed", "", "", "", Status::Missed);
            }
        }
    }

    // (c) Build times.
    let (build, test) = (options.runs("build"), options.runs("test"));
    if build || test {
        println!("\n(c) release build, catalogue rebuild and clean test of the workspace");
        match bench_build(&trees, build, test) {
            Ok(figures) => table.build(&figures, perf_binary.as_ref()),
            Err(err) => {
                println!("  build not measured: {err:#}");
                table.row("cold release build", "failed", "", "", "< 5 min", Status::Missed);
            }
        }
    } else if options.only.is_empty() {
        println!("\n(c) build times skipped: pass --build (takes minutes)");
    }

    println!("\nload average at the end: {}", load_average());
    // `eval --from-perf` on long logs.
    if options.runs("from-perf") {
        println!("\nfrom-perf: eval --from-perf on generated -I text logs, best of 3");
        if let Err(err) = from_perf::bench(&root, options.baseline.as_deref(), &mut table) {
            println!("  from-perf not measured: {err:#}");
            table.row("from-perf 100 MB -I log", "not measured", "", "", "", Status::Missed);
        }
    }

    if options.runs("serve") {
        println!("\nserve: tmetric serve against perf stat -a -I --for-each-cgroup, side by side");
        if let Err(err) = serve::bench(&root, &mut table) {
            println!("  serve not measured: {err:#}");
            table.row(
                "serve CPU per interval",
                "not measured",
                "",
                "",
                "<= 1.5x perf",
                Status::Missed,
            );
        }
    }

    if options.runs("hostile") {
        println!(
            "\nhostile: the security round's HTTP attacks against tmetric serve and node_exporter"
        );
        if let Err(err) = hostile::bench(&root, &mut table) {
            println!("  hostile not measured: {err:#}");
            table.row("hostile", "not measured", "", "", "", Status::Missed);
        }
    }

    if options.runs("stat") {
        println!("\nstat: tmetric stat against perf stat, in turn");
        if let Err(err) = stat::bench(&root, &mut table) {
            println!("  stat not measured: {err:#}");
            table.row("stat start-up and -I", "not measured", "", "", "", Status::Missed);
        }
    }

    if options.runs("accuracy") {
        println!("\naccuracy: multiplexed metrics against the truth on the realistic simulator");
        if let Err(err) = accuracy::bench(&root, options.quick, &mut table) {
            println!("  accuracy not measured: {err:#}");
            table.row("accuracy", "not measured", "", "", "", Status::Missed);
        }
    }

    if options.runs("latency") {
        println!("\nlatency: tmetric latency on a generated trace, against the shell script");
        if let Err(err) = benches::latency(&root, &mut table) {
            println!("  latency not measured: {err:#}");
            table.row("latency", "not measured", "", "", "", Status::Missed);
        }
    }

    if options.runs("schedule") {
        println!("\nschedule: time slices of every model and selection against the lower bound");
        if let Err(err) = benches::schedule(&root, &mut table) {
            println!("  schedule not measured: {err:#}");
            table.row("schedule", "not measured", "", "", "", Status::Missed);
        }
    }

    if options.runs("ci") {
        println!("\nci: .ci/run on a fresh clone of HEAD, with its own target directory");
        if let Err(err) = ci::bench(&root, &mut table) {
            println!("  ci not measured: {err:#}");
            table.row(".ci/run, fresh clone", "not measured", "", "", "", Status::Missed);
        }
    }

    println!("\nsummary\n{}", table.render());
    Ok(())
}

/// (a) Code generation, and (with `eval` or `parse`) where regen's time goes.
fn bench_regen_section(
    root: &Path,
    perf: Option<&Path>,
    options: &Options,
    table: &mut Table,
) -> Result<()> {
    println!("\n(a) code generation, whole tree");
    let gen_figures = bench_regen(root, perf);
    table.regen(&gen_figures);
    if options.runs("eval") || options.runs("parse") {
        // Where regen's time goes.
        let arch_dir = root.join("pmu-events/arch");
        let (mut load, mut resolve) = (Duration::MAX, Duration::MAX);
        for _ in 1..PASSES {
            let start = cpu_time(Who::Me);
            let tree = tmetric_pmu_events::load_tree(&arch_dir)
                .with_context(|| format!("loading {}", arch_dir.display()))?;
            load = load.min(cpu_time(Who::Me).saturating_sub(start));
            let start = cpu_time(Who::Me);
            black_box(resolve_tree(&tree));
            resolve = resolve.min(cpu_time(Who::Me).saturating_sub(start));
        }
        if let Some(total) = gen_figures.in_process {
            println!(
                "  of which load_tree {}, resolve_tree {}, generate and compare {}",
                secs(load),
                secs(resolve),
                secs(total.saturating_sub(load + resolve))
            );
        }
    }
    Ok(())
}

/// (b) Evaluation and the parse rates, over the whole tree.
fn eval_and_parse_sections(
    root: &Path,
    perf: Option<&Path>,
    options: &Options,
    table: &mut Table,
) -> Result<()> {
    // The tree for the parse and evaluation parts.
    let arch_dir = root.join("pmu-events/arch");
    let tree = tmetric_pmu_events::load_tree(&arch_dir)
        .with_context(|| format!("loading {}", arch_dir.display()))?;
    let resolved = resolve_tree(&tree);

    // (b) Evaluation.
    if options.runs("eval") {
        println!(
            "\n(b) evaluation of every {EVAL_MODEL} metric, {VECTORS} random input vectors, best of {PASSES}"
        );
        match bench_eval(&resolved) {
            Ok(figures) => table.eval(&figures),
            Err(err) => {
                println!("  evaluation not measured: {err:#}");
                table.row("compiled evaluation", "not measured", "", "", "", Status::Missed);
            }
        }
    }

    // Parse rates.
    if options.runs("parse") {
        println!("\nparse rates");
        let parse = bench_parse(&tree, perf);
        table.parse(&parse);
    }
    Ok(())
}

/// The generated and embedded sizes, against the baseline's and the installed perf's.
fn sizes_section(
    root: &Path,
    perf_binary: Option<&(PathBuf, u64)>,
    options: &Options,
    table: &mut Table,
) {
    println!("\nsizes");
    let sizes = GenSizes::of(root);
    println!(
        "  generated ({}): {} of Rust in {} files, {} of data tables",
        regen::GEN_DIR,
        mb(sizes.rust),
        sizes.rust_files,
        mb(sizes.data)
    );
    if let Some(model) = tmetric_catalog::models().first() {
        let (plain, descriptions, events) = model.tables.embedded_bytes();
        println!(
            "  embedded in the binary: {} of names and deflated strings, {} of deflated descriptions, {} of deflated event records and lists",
            mb(plain as u64),
            mb(descriptions as u64),
            mb(events as u64)
        );
    }
    let base_sizes = options.baseline.as_deref().map(GenSizes::of);
    if let Some(base) = &base_sizes {
        println!("  baseline generated: {} of Rust, {} of data", mb(base.rust), mb(base.data));
    }
    table.sizes(&sizes, base_sizes.as_ref());
    match perf_binary {
        Some((path, bytes)) => {
            println!("  installed perf binary ({}): {}", path.display(), mb(*bytes))
        }
        None => println!("  installed perf binary: not found"),
    }
}

/// `/proc/loadavg`'s 1, 5 and 15 minute figures: how busy the machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| text.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_string())
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/// CPU time, user and system, of this process ([`Who::Me`], every thread) or of the
/// children it has waited for ([`Who::Children`]). The regen and parse ratios compare CPU
/// time: another process's load stretches wall time on both sides unevenly (metric.py's
/// ratio moved between 18x and 33x with the load), CPU time much less.
fn cpu_time(who: Who) -> Duration {
    match who {
        Who::Me => tmetric_runtime::sys::own_cpu(),
        Who::Children => tmetric_runtime::sys::children_cpu(),
    }
}

/// Whose CPU time [`cpu_time`] reads.
#[derive(Clone, Copy)]
enum Who {
    Me,
    Children,
}

fn secs(d: Duration) -> String {
    if d.as_secs_f64() < 10.0 {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// `12345.6` as `12,346`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1234567.0), "1,234,567");
    }
}
