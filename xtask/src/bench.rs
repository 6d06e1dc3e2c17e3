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

// regen in process runs on the allocator `cargo xtask regen` has (`main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The benchmark times `regen` in process; it never writes, so `Mode::Write` and friends are
// unused here.
#[allow(dead_code)]
#[path = "regen.rs"]
mod regen;
// regen writes the loader's diagnostics report through this module.
#[allow(dead_code)]
#[path = "diagnostics.rs"]
mod diagnostics;
// `--only from-perf`: `eval --from-perf` on generated interval logs against a baseline binary.
#[path = "bench_from_perf.rs"]
mod from_perf;

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail, ensure};
use tmetric_catalog::{IdKind, Model};
use tmetric_engine::Evaluator;
use tmetric_expr::Literal;
use tmetric_pmu_events::Tree;
use tmetric_pmu_events::oracle::{Oracle, OracleInputs};
use tmetric_pmu_events::resolve::{ResolvedTable, SlotKind, resolve_tree};

const USAGE: &str = "usage: cargo xtask bench [--build] [--only <sections>] [--baseline <dir>] [--perf-dir <tools/perf/pmu-events>]\n  \
     --build     also time a cold `cargo build --release --workspace` in a scratch target\n              \
     directory, the rebuilds after touching the CLI and crates/catalog/src/lib.rs (the\n              \
     catalogue alone, then its dependents), and a clean `cargo test --workspace -j2`\n              \
     (takes many minutes)\n  \
     --only      run only these comma-separated sections: regen, eval, parse, sizes, binary\n              \
     (the stripped release binary, built in ./target, against perf's and the baseline's),\n              \
     build (cold build and rebuilds), test (clean cargo test), from-perf (eval --from-perf\n              \
     on generated 10/30/100 MB -I logs, against --baseline's release binary)\n  \
     --baseline  a checkout of an earlier commit: its sizes and (with --build) build figures\n              \
     are measured in the same run, interleaved with ours\n  \
     --perf-dir  perf's tools/perf/pmu-events (default: $TMETRIC_PERF_PMU_EVENTS, then\n              \
     /tmp/linux-source-6.12/tools/perf/pmu-events, extracted from the distribution's\n              \
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
/// Where the brief's perf tree is.
const PERF_DEFAULT: &str = "/tmp/linux-source-6.12/tools/perf/pmu-events";

// Targets of the issue.
const TARGET_REGEN_SPEEDUP: f64 = 10.0;
const TARGET_EVAL_SPEEDUP: f64 = 10.0;
const TARGET_EVAL_NS: f64 = 20.0;
const TARGET_COLD_BUILD_S: f64 = 300.0;
const TARGET_REBUILD_S: f64 = 30.0;
/// Issue 13: a clean `cargo test --workspace` on 2 cores.
const TARGET_TEST_S: f64 = 120.0;
/// Issue 13: the generated Rust source.
const TARGET_GEN_SOURCE_BYTES: u64 = 6_000_000;

/// The sections `--only` selects from.
const SECTIONS: [&str; 8] =
    ["regen", "eval", "parse", "sizes", "binary", "build", "test", "from-perf"];

struct Options {
    build: bool,
    /// `--only`: the sections to run; empty runs the default ones.
    only: Vec<String>,
    baseline: Option<PathBuf>,
    perf_dir: Option<PathBuf>,
}

impl Options {
    /// Whether to run `section`: all but the slow ones by default, those too with `--build`.
    fn runs(&self, section: &str) -> bool {
        if self.only.is_empty() {
            self.build || !matches!(section, "binary" | "build" | "test" | "from-perf")
        } else {
            self.only.iter().any(|s| s == section)
        }
    }
}

fn parse_args(args: &[String]) -> Result<Options> {
    let mut options = Options { build: false, only: Vec::new(), baseline: None, perf_dir: None };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--build" => options.build = true,
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
    let perf = match wants_perf.then(|| find_perf_dir(options.perf_dir.clone())) {
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
            let start = Instant::now();
            let tree = tmetric_pmu_events::load_tree(&arch_dir)
                .with_context(|| format!("loading {}", arch_dir.display()))?;
            load = load.min(start.elapsed());
            let start = Instant::now();
            black_box(resolve_tree(&tree));
            resolve = resolve.min(start.elapsed());
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
    if let Some(model) = tmetric_catalog::MODELS.first() {
        let (plain, descriptions, events) = model.tables.embedded_bytes();
        println!(
            "  embedded in the binary: {} of plain strings, {} of deflated descriptions, {} of deflated event records",
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
// perf's tree

/// perf's `tools/perf/pmu-events`, extracting it from the distribution package when needed.
/// `Err` says why the baselines cannot run; the rest of the benchmark still does.
fn find_perf_dir(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    let has_tools =
        |dir: &Path| dir.join("jevents.py").is_file() && dir.join("metric.py").is_file();
    if let Some(dir) =
        explicit.or_else(|| std::env::var_os("TMETRIC_PERF_PMU_EVENTS").map(PathBuf::from))
    {
        return if has_tools(&dir) {
            Ok(dir)
        } else {
            Err(format!("{} has no jevents.py and metric.py", dir.display()))
        };
    }
    let default = PathBuf::from(PERF_DEFAULT);
    if has_tools(&default) {
        return Ok(default);
    }
    println!("{PERF_DEFAULT} is missing: extracting it from the linux-source-6.12 package");
    extract_perf(&std::env::temp_dir())
        .map_err(|err| format!("could not extract perf's pmu-events: {err:#}"))?;
    let extracted = std::env::temp_dir().join("linux-source-6.12/tools/perf/pmu-events");
    if has_tools(&extracted) {
        Ok(extracted)
    } else {
        Err(format!("{} was not extracted", extracted.display()))
    }
}

/// `apt-get download linux-source-6.12`, `dpkg -x`, then untar only `tools/perf/pmu-events`
/// into `into`.
fn extract_perf(into: &Path) -> Result<()> {
    let work = into.join(format!("tmetric-bench-deb-{}", std::process::id()));
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let result = (|| {
        run_quiet(
            Command::new("apt-get").args(["download", "linux-source-6.12"]).current_dir(&work),
        )?;
        let deb = std::fs::read_dir(&work)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .context("apt-get download left no .deb")?;
        run_quiet(Command::new("dpkg").arg("-x").arg(&deb).arg(work.join("x")))?;
        run_quiet(
            Command::new("tar")
                .arg("-xJf")
                .arg(work.join("x/usr/src/linux-source-6.12.tar.xz"))
                .arg("-C")
                .arg(into)
                .args(["--wildcards", "linux-source-6.12/tools/perf/pmu-events/*"]),
        )
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn run_quiet(command: &mut Command) -> Result<()> {
    let output = command.output().with_context(|| format!("running {command:?}"))?;
    ensure!(
        output.status.success(),
        "{command:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// (a) regen against jevents.py

struct RegenFigures {
    /// Best in-process `regen(root, Check)`.
    in_process: Option<Duration>,
    /// `xtask regen --check` as its own process.
    process: Option<Duration>,
    /// jevents.py over perf's tree.
    jevents: Option<Duration>,
}

fn bench_regen(root: &Path, perf: Option<&Path>) -> RegenFigures {
    let mut figures = RegenFigures { in_process: None, process: None, jevents: None };
    let best = |slot: &mut Option<Duration>, elapsed: Duration| {
        *slot = Some(slot.map_or(elapsed, |best| best.min(elapsed)));
    };
    // The plain xtask binary sits next to this one: `cargo xtask bench` has just built it.
    let xtask = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("xtask")))
        .filter(|path| path.is_file());
    let mut notes: Vec<String> = Vec::new();
    let mut note = |text: String| {
        if !notes.contains(&text) {
            println!("  {text}");
            notes.push(text);
        }
    };
    // The three run back to back in every pass, so that the load of other processes at a
    // given moment weighs on all of them; the best pass of each counts.
    for _ in 0..PASSES {
        let start = Instant::now();
        let result = regen::regen(root, regen::Mode::Check);
        best(&mut figures.in_process, start.elapsed());
        match result {
            Ok(report) => note(format!(
                "regen: {} models, {} metrics, {} bytes",
                report.models, report.metrics, report.bytes
            )),
            // A stale catalogue still did all the work: only the comparison at the end differed.
            Err(err) => note(format!(
                "regen --check failed (timed anyway): {}",
                err.to_string().lines().next().unwrap_or("")
            )),
        }

        match &xtask {
            Some(xtask) => {
                let start = Instant::now();
                let output =
                    Command::new(xtask).args(["regen", "--check"]).current_dir(root).output();
                let elapsed = start.elapsed();
                match output {
                    Ok(_) => best(&mut figures.process, elapsed),
                    Err(err) => note(format!("xtask regen --check could not run: {err}")),
                }
            }
            None => {
                note("xtask regen --check as a process: no xtask binary next to this one".into())
            }
        }

        let Some(perf) = perf else { continue };
        match run_jevents(perf) {
            Ok((elapsed, c_bytes)) => {
                best(&mut figures.jevents, elapsed);
                note(format!("perf jevents.py all all writes {} of C", mb(c_bytes)));
            }
            Err(err) => {
                note(format!("perf jevents.py not measured: {err:#}"));
                break;
            }
        }
    }
    let show = |what: &str, time: Option<Duration>| {
        if let Some(time) = time {
            println!("  {what}, best of {PASSES}: {}", secs(time));
        }
    };
    show("regen --check in process", figures.in_process);
    show("xtask regen --check as a process", figures.process);
    show("perf jevents.py all all", figures.jevents);
    figures
}

/// One run of jevents.py over perf's own tree: its time and the bytes of C it wrote. Ours has
/// `common/`, which jevents.py would take for an architecture; the trees are otherwise identical.
fn run_jevents(perf: &Path) -> Result<(Duration, u64)> {
    let scratch = tempfile::Builder::new().prefix("tmetric-bench-jevents-").tempdir()?;
    let out = scratch.path().join("pmu-events.c");
    let start = Instant::now();
    let output = Command::new("python3")
        .arg(perf.join("jevents.py"))
        .args(["all", "all"])
        .arg(perf.join("arch"))
        .arg(&out)
        .current_dir(perf)
        .output();
    let elapsed = start.elapsed();
    let c_bytes = std::fs::metadata(&out).map_or(0, |m| m.len());
    let _ = std::fs::remove_file(&out);
    let output = output.context("running python3")?;
    ensure!(
        output.status.success(),
        "jevents.py failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
    );
    Ok((elapsed, c_bytes))
}

// ---------------------------------------------------------------------------------------------
// (b) compiled against interpreted evaluation

struct EvalFigures {
    metrics: usize,
    compiled_ns: f64,
    interpreted_ns: f64,
}

/// SplitMix64: deterministic, so every run evaluates the same inputs, and good enough to
/// scatter values over magnitudes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One input value for a slot: counts are zero (10%, which exercises perf's division rules),
/// small (25%) or spread log-uniformly over 1e3..1e11; retire latencies are cycles; tool
/// events are seconds.
fn random_value(rng: &mut Rng, kind: SlotKind, retire_latency: bool) -> f64 {
    let u = rng.unit();
    match kind {
        SlotKind::Tool(_) => 0.05 + u,
        _ if retire_latency => (1.0 + 300.0 * u).floor(),
        _ if u < 0.10 => 0.0,
        _ if u < 0.35 => (u * 4_000.0).floor(),
        _ => 10f64.powf(3.0 + 8.0 * rng.unit()).floor(),
    }
}

/// Plausible literals of a two-socket sapphirerapids with SMT on.
fn literals() -> [f64; Literal::COUNT] {
    let mut literals = [f64::NAN; Literal::COUNT];
    for literal in Literal::ALL {
        literals[literal.index()] = match literal {
            Literal::NumCpus | Literal::NumCpusOnline => 224.0,
            Literal::NumCores => 112.0,
            Literal::NumDies | Literal::NumPackages => 2.0,
            Literal::SmtOn | Literal::CoreWide => 1.0,
            Literal::Slots => 6.0,
            Literal::HasPmem => 0.0,
            Literal::SystemTscFreq => 2.1e9,
        };
    }
    literals
}

/// The compiled model and the resolved table (with `ok` metrics that compile) must describe
/// the same slots and metrics, or the comparison is meaningless.
fn ensure_same_slots(model: &Model, table: &ResolvedTable<'_>, ok: usize) -> Result<()> {
    ensure!(
        ok == model.metrics.len() && table.ids.len() == model.ids.len(),
        "the catalogue is stale ({} metrics and {} slots compiled, {} and {} in pmu-events): run `cargo xtask regen`",
        model.metrics.len(),
        model.ids.len(),
        ok,
        table.ids.len()
    );
    for (slot, id) in table.ids.iter().enumerate() {
        ensure!(
            model.str(model.ids[slot].text) == id.text,
            "the catalogue is stale (slot {slot} is `{}`, pmu-events says `{}`): run `cargo xtask regen`",
            model.str(model.ids[slot].text),
            id.text
        );
    }
    Ok(())
}

fn bench_eval(resolved: &[ResolvedTable<'_>]) -> Result<EvalFigures> {
    let model: &Model = tmetric_catalog::model(EVAL_MODEL)
        .with_context(|| format!("{EVAL_MODEL} is not in the catalogue"))?;
    let table = resolved
        .iter()
        .find(|r| r.table.path == EVAL_MODEL)
        .with_context(|| format!("{EVAL_MODEL} is not in pmu-events/arch"))?;
    let ok: Vec<usize> = (0..table.metrics.len()).filter(|&m| table.metrics[m].ok).collect();
    ensure_same_slots(model, table, ok.len())?;

    let mut rng = Rng(0x746d_6574_7269_6321);
    let literals = literals();
    let source_counts = vec![1.0; model.ids.len()];
    // Probes are machine facts, fixed for a run: about half the `has_event` answers are yes.
    let probes: Vec<f64> = model
        .ids
        .iter()
        .map(|id| if matches!(id.kind, IdKind::Probe) && rng.unit() < 0.5 { 1.0 } else { 0.0 })
        .collect();
    let mut vectors: Vec<Vec<f64>> = (0..VECTORS)
        .map(|_| {
            table.ids.iter().map(|id| random_value(&mut rng, id.kind, id.retire_latency)).collect()
        })
        .collect();

    let mut evaluator = Evaluator::new(model);
    evaluator.literals = literals;
    evaluator.probes.clone_from(&probes);
    evaluator.source_counts.clone_from(&source_counts);
    // Agreement first: both sides must compute the same numbers.
    let mut mismatches = 0usize;
    let mut finite = 0usize;
    let mut first_mismatch = None;
    for values in vectors.iter_mut().take(AGREEMENT_VECTORS) {
        std::mem::swap(&mut evaluator.values, values);
        evaluator.run(model, model.eval_order);
        std::mem::swap(&mut evaluator.values, values);
        let inputs = OracleInputs {
            values,
            source_counts: &source_counts,
            probes: &probes,
            literals: &literals,
        };
        let mut oracle = Oracle::new(table, inputs);
        for (i, &m) in ok.iter().enumerate() {
            let interpreted = oracle.metric(m).unwrap_or(f64::NAN);
            let compiled = evaluator.metrics[i];
            finite += usize::from(compiled.is_finite());
            if !same(compiled, interpreted) {
                mismatches += 1;
                first_mismatch.get_or_insert_with(|| {
                    format!(
                        "{}: compiled {compiled}, interpreted {interpreted}",
                        table.table.metrics[m].name
                    )
                });
            }
        }
    }
    match &first_mismatch {
        // Mostly finite results show the inputs exercise the arithmetic, not just NaN paths.
        None => println!(
            "  agreement: {} metrics x {AGREEMENT_VECTORS} vectors, compiled and interpreted equal \
             ({:.0}% finite)",
            ok.len(),
            100.0 * finite as f64 / (ok.len() * AGREEMENT_VECTORS) as f64
        ),
        Some(first) => println!("  agreement: {mismatches} MISMATCHES, first {first}"),
    }
    ensure!(
        mismatches == 0,
        "compiled and interpreted results differ; the timings would compare different work"
    );

    let per_metric = |elapsed: Duration, vectors: usize| {
        elapsed.as_secs_f64() * 1e9 / (vectors * ok.len()) as f64
    };
    let mut compiled_ns = f64::INFINITY;
    for _ in 0..PASSES {
        let start = Instant::now();
        for _ in 0..COMPILED_SWEEPS {
            for values in &mut vectors {
                // Swapping the vector in costs nothing, where copying it would add to the time.
                std::mem::swap(&mut evaluator.values, values);
                evaluator.run(model, black_box(model.eval_order));
                std::mem::swap(&mut evaluator.values, values);
                black_box(&evaluator.metrics);
            }
        }
        compiled_ns = compiled_ns.min(per_metric(start.elapsed(), COMPILED_SWEEPS * VECTORS));
    }
    println!("  compiled (Evaluator::run over eval_order): {compiled_ns:.1} ns/metric");

    let mut interpreted_ns = f64::INFINITY;
    for _ in 0..PASSES {
        let start = Instant::now();
        for values in &vectors {
            // A fresh oracle per vector: perf re-evaluates every metric each interval, and the
            // cache only shares references within one.
            let inputs = OracleInputs {
                values,
                source_counts: &source_counts,
                probes: &probes,
                literals: &literals,
            };
            let mut oracle = Oracle::new(table, inputs);
            for &m in &ok {
                black_box(oracle.metric(black_box(m)).unwrap_or(f64::NAN));
            }
        }
        interpreted_ns = interpreted_ns.min(per_metric(start.elapsed(), VECTORS));
    }
    println!("  interpreted (vendor::oracle::Oracle): {interpreted_ns:.1} ns/metric");
    println!("  speed-up: {:.1}x", interpreted_ns / compiled_ns);
    Ok(EvalFigures { metrics: ok.len(), compiled_ns, interpreted_ns })
}

/// Equal values, NaN equal to NaN, with room for the last bit of a reassociated sum.
fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

// ---------------------------------------------------------------------------------------------
// Parse rates

struct ParseFigures {
    exprs: usize,
    thresholds: usize,
    /// tmetric over every MetricExpr: expressions per second, failures.
    ours_exprs: (f64, usize),
    /// tmetric over every MetricExpr and MetricThreshold.
    ours_all: (f64, usize),
    /// metric.py's ParsePerfJson over the same MetricExpr list.
    perf: Option<(f64, usize)>,
}

/// perf's parser over a JSON list of expressions: prints count, failures and the best time.
const PERF_PARSE_SCRIPT: &str = r#"
import json, sys, time
sys.path.insert(0, sys.argv[1])
import metric
exprs = json.load(open(sys.argv[2]))
best = None
for _ in range(int(sys.argv[3])):
    fails = 0
    start = time.perf_counter()
    for e in exprs:
        try:
            metric.ParsePerfJson(e)
        except Exception:
            fails += 1
    elapsed = time.perf_counter() - start
    best = elapsed if best is None else min(best, elapsed)
print(len(exprs), fails, best)
"#;

fn bench_parse(tree: &Tree, perf: Option<&Path>) -> ParseFigures {
    // The vendor metrics only (not tmetric's `common/`), which perf's tree has too.
    let metrics =
        || tree.arches.iter().flat_map(|arch| &arch.tables).flat_map(|table| &table.metrics);
    let exprs: Vec<&str> = metrics().map(|m| m.expr.as_str()).collect();
    let all: Vec<&str> =
        exprs.iter().copied().chain(metrics().filter_map(|m| m.threshold.as_deref())).collect();

    let rate = |list: &[&str]| {
        let mut best = Duration::MAX;
        let mut failures = 0;
        for _ in 0..PASSES {
            let start = Instant::now();
            failures = list
                .iter()
                .filter(|text| black_box(tmetric_expr::parse(black_box(text))).is_err())
                .count();
            best = best.min(start.elapsed());
        }
        (list.len() as f64 / best.as_secs_f64(), failures)
    };
    let ours_exprs = rate(&exprs);
    let ours_all = rate(&all);
    println!(
        "  tmetric_expr::parse, {} MetricExpr: {}/s ({} fail), with {} MetricThreshold: {}/s ({} fail)",
        exprs.len(),
        thousands(ours_exprs.0),
        ours_exprs.1,
        all.len() - exprs.len(),
        thousands(ours_all.0),
        ours_all.1
    );

    let perf_rate = perf.and_then(|perf| match perf_parse_rate(perf, &exprs) {
        Ok((count, failures, seconds)) => {
            let rate = count as f64 / seconds;
            println!(
                "  perf metric.py ParsePerfJson, same {count} MetricExpr: {}/s ({failures} fail)",
                thousands(rate)
            );
            Some((rate, failures))
        }
        Err(err) => {
            println!("  perf metric.py not measured: {err:#}");
            None
        }
    });
    ParseFigures {
        exprs: exprs.len(),
        thresholds: all.len() - exprs.len(),
        ours_exprs,
        ours_all,
        perf: perf_rate,
    }
}

fn perf_parse_rate(perf: &Path, exprs: &[&str]) -> Result<(usize, usize, f64)> {
    let scratch = tempfile::Builder::new().prefix("tmetric-bench-exprs-").tempdir()?;
    let list = scratch.path().join("exprs.json");
    std::fs::write(&list, serde_json::to_string(exprs)?)
        .with_context(|| format!("writing {}", list.display()))?;
    // Two passes: one takes seconds.
    let output = Command::new("python3")
        .arg("-c")
        .arg(PERF_PARSE_SCRIPT)
        .arg(perf)
        .arg(&list)
        .arg("2")
        .output();
    let _ = std::fs::remove_file(&list);
    let output = output.context("running python3")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "python3 failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
    );
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    let [count, failures, seconds] = fields[..] else {
        bail!("unexpected output from the metric.py script: {stdout:?}")
    };
    Ok((count.parse()?, failures.parse()?, seconds.parse()?))
}

// ---------------------------------------------------------------------------------------------
// (c) build times

/// The build figures of one tree.
#[derive(Default)]
struct BuildFigures {
    cold: Option<Measured>,
    rebuild: Option<Measured>,
    /// The crates the CLI rebuild compiled.
    recompiled: Vec<String>,
    /// `cargo build -p tmetric-catalog` after touching the catalogue: the catalogue alone.
    catalog: Option<Measured>,
    /// The workspace build after that: the crates that depend on the catalogue.
    dependents: Option<Measured>,
    /// The crates `dependents` compiled.
    dependents_compiled: Vec<String>,
    test: Option<Measured>,
    binary_bytes: Option<u64>,
    stripped_bytes: Option<u64>,
}

/// One timed command: wall time and the peak resident memory of its largest process.
#[derive(Clone, Copy)]
struct Measured {
    time: Duration,
    /// From `/usr/bin/time` when installed.
    peak_kb: Option<u64>,
}

/// Builds and tests each tree in a scratch target directory (a cold build in the developers'
/// one would throw their cache away). Each step runs for every tree before the next, so that
/// the load of other processes weighs on all trees alike.
fn bench_build(
    trees: &[(&str, &Path)],
    build: bool,
    test: bool,
) -> Result<Vec<(String, BuildFigures)>> {
    if std::env::var_os("RUSTC_WRAPPER").is_some() {
        println!("  note: RUSTC_WRAPPER is set, so the cold build may hit a compiler cache");
    }
    let scratch_dir = tempfile::Builder::new().prefix("tmetric-bench-").tempdir()?;
    let scratch = scratch_dir.path().to_path_buf();
    let target = |i: usize, what: &str| scratch.join(format!("{i}-{what}"));
    let mut figures: Vec<(String, BuildFigures)> =
        trees.iter().map(|(name, _)| (name.to_string(), BuildFigures::default())).collect();
    let result = (|| -> Result<()> {
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| build) {
            println!("  {name}: cold build in {} (minutes)...", target(i, "release").display());
            let (cold, _) =
                cargo(dir, &target(i, "release"), &["build", "--release", "--workspace"])?;
            println!("  {name}: cold cargo build --release --workspace: {}", cold.show());
            let binary = target(i, "release").join("release/tmetric");
            figures[i].1.binary_bytes = std::fs::metadata(&binary).ok().map(|m| m.len());
            figures[i].1.stripped_bytes = stripped_size(&binary);
            figures[i].1.cold = Some(cold);
        }
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| build) {
            // Only the modification time changes, as an edit would. The CLI's code is in
            // `lib.rs` since the CLI became a library; older trees have it all in `main.rs`.
            let cli = ["crates/cli/lib.rs", "crates/cli/main.rs"]
                .into_iter()
                .find(|f| dir.join(f).is_file())
                .context("no crates/cli/lib.rs or main.rs")?;
            touch(&dir.join(cli))?;
            let (rebuild, recompiled) =
                cargo(dir, &target(i, "release"), &["build", "--release", "--workspace"])?;
            println!(
                "  {name}: rebuild after touching {cli}: {} (compiled: {})",
                rebuild.show(),
                recompiled.join(", ")
            );
            figures[i].1.rebuild = Some(rebuild);
            figures[i].1.recompiled = recompiled;
        }
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| build) {
            // The catalogue alone, then what depends on it: a changed catalogue recompiles
            // every crate that links it.
            touch(&dir.join("crates/catalog/src/lib.rs"))?;
            let (catalog, _) = cargo(
                dir,
                &target(i, "release"),
                &["build", "--release", "-p", "tmetric-catalog"],
            )?;
            println!(
                "  {name}: catalogue rebuild (crates/catalog/src/lib.rs touched, -p tmetric-catalog): {}",
                catalog.show()
            );
            let (dependents, recompiled) =
                cargo(dir, &target(i, "release"), &["build", "--release", "--workspace"])?;
            println!(
                "  {name}: then the workspace: {} (compiled: {})",
                dependents.show(),
                recompiled.join(", ")
            );
            figures[i].1.catalog = Some(catalog);
            figures[i].1.dependents = Some(dependents);
            figures[i].1.dependents_compiled = recompiled;
        }
        for (i, (name, dir)) in trees.iter().enumerate().filter(|_| test) {
            println!("  {name}: clean cargo test --workspace -j2 (minutes)...");
            // A test that fails under load (timing-sensitive ones do) does not void the figure:
            // the build and the run took that long either way.
            let (test, failed) = cargo_status(
                dir,
                &target(i, "test"),
                &["test", "--workspace", "-j2", "--no-fail-fast"],
            )?;
            let failed = if failed.is_empty() { String::new() } else { format!(" ({failed})") };
            println!("  {name}: clean cargo test --workspace -j2: {}{failed}", test.show());
            figures[i].1.test = Some(test);
            let _ = std::fs::remove_dir_all(target(i, "test"));
        }
        Ok(())
    })();
    drop(scratch_dir);
    result.map(|()| figures)
}

/// Builds each tree's release binary in its own `target/` (incrementally, as a developer
/// would) and measures it stripped.
fn bench_binary(trees: &[(&str, &Path)]) -> Result<Vec<(String, BuildFigures)>> {
    let mut figures = Vec::new();
    for (name, dir) in trees {
        let target = dir.join("target");
        let (built, _) = cargo(dir, &target, &["build", "--release", "--bin", "tmetric"])?;
        let binary = target.join("release/tmetric");
        let stripped = stripped_size(&binary);
        println!(
            "  {name}: release build {}, binary {}, stripped {}",
            built.show(),
            std::fs::metadata(&binary).map_or("missing".to_string(), |m| mb(m.len())),
            stripped.map_or("unknown".to_string(), mb)
        );
        figures.push((
            name.to_string(),
            BuildFigures {
                binary_bytes: std::fs::metadata(&binary).ok().map(|m| m.len()),
                stripped_bytes: stripped,
                ..BuildFigures::default()
            },
        ));
    }
    Ok(figures)
}

fn touch(path: &Path) -> Result<()> {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()))
        .with_context(|| format!("touching {}", path.display()))
}

/// The size of `binary` after `strip` (of a copy).
fn stripped_size(binary: &Path) -> Option<u64> {
    let copy = binary.with_extension("stripped");
    std::fs::copy(binary, &copy).ok()?;
    let ok = Command::new("strip").arg(&copy).status().is_ok_and(|s| s.success());
    let size = std::fs::metadata(&copy).ok().map(|m| m.len());
    let _ = std::fs::remove_file(&copy);
    size.filter(|_| ok)
}

/// The installed perf binary and its size. `/usr/bin/perf` is a shell wrapper on some
/// distributions (Ubuntu's picks `/usr/lib/linux-tools*/perf` or `/usr/bin/perf_X.Y`), so
/// only an ELF file counts.
fn find_perf_binary() -> Option<(PathBuf, u64)> {
    let is_elf = |path: &Path| std::fs::read(path).is_ok_and(|bytes| bytes.starts_with(b"\x7fELF"));
    let mut candidates = vec![PathBuf::from("/usr/bin/perf")];
    for dir in ["/usr/bin", "/usr/lib"] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name =
                    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                name.starts_with("perf_") || name.starts_with("linux-tools")
            })
            .flat_map(|p| if p.is_dir() { vec![p.join("perf")] } else { vec![p] })
            .collect();
        found.sort();
        candidates.extend(found);
    }
    candidates
        .into_iter()
        .find(|p| is_elf(p))
        .and_then(|p| Some((p.clone(), std::fs::metadata(&p).ok()?.len())))
}

/// Runs cargo with `args` in `dir` into `target`; the time, peak memory and crates compiled.
fn cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<(Measured, Vec<String>)> {
    let (measured, output) = run_cargo(dir, target, args)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "cargo {} in {} failed ({}):\n{}",
            args.join(" "),
            dir.display(),
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let compiled = stderr
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("Compiling "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect();
    Ok((measured, compiled))
}

/// Runs cargo; the time, and the failed tests' names (empty when it succeeded).
fn cargo_status(dir: &Path, target: &Path, args: &[&str]) -> Result<(Measured, String)> {
    let (measured, output) = run_cargo(dir, target, args)?;
    if output.status.success() {
        return Ok((measured, String::new()));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let failed: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("test ")?.strip_suffix(" ... FAILED"))
        .collect();
    Ok((measured, format!("{} FAILED: {}", output.status, failed.join(", "))))
}

fn run_cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<(Measured, std::process::Output)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let time = Path::new("/usr/bin/time");
    let peak_file = target.with_extension("peak");
    let mut command = if time.is_file() {
        let mut command = Command::new(time);
        command.arg("-f").arg("%M").arg("-o").arg(&peak_file).arg(&cargo);
        command
    } else {
        Command::new(&cargo)
    };
    std::fs::create_dir_all(target).with_context(|| format!("creating {}", target.display()))?;
    let start = Instant::now();
    let output = command
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_TERM_COLOR", "never")
        .stdin(Stdio::null())
        .output()
        .context("running cargo")?;
    let elapsed = start.elapsed();
    let peak_kb = std::fs::read_to_string(&peak_file)
        .ok()
        .and_then(|text| text.lines().last()?.trim().parse().ok());
    let _ = std::fs::remove_file(&peak_file);
    Ok((Measured { time: elapsed, peak_kb }, output))
}

impl Measured {
    fn show(&self) -> String {
        match self.peak_kb {
            Some(kb) => format!("{}, peak {}", secs(self.time), mb(kb * 1024)),
            None => secs(self.time),
        }
    }
}

/// Generated Rust source, and the binary tables next to it.
struct GenSizes {
    rust: u64,
    rust_files: usize,
    data: u64,
}

impl GenSizes {
    fn of(root: &Path) -> GenSizes {
        let mut files = Vec::new();
        list_files(&root.join(regen::GEN_DIR), &mut files);
        let mut sizes = GenSizes { rust: 0, rust_files: 0, data: 0 };
        for file in files {
            let bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
            if file.extension().is_some_and(|e| e == "rs") {
                sizes.rust += bytes;
                sizes.rust_files += 1;
            } else if !file.ends_with("skipped.txt") {
                sizes.data += bytes;
            }
        }
        sizes
    }
}

fn list_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            list_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The summary

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Met,
    Missed,
    Info,
}

#[derive(Default)]
struct Table {
    rows: Vec<[String; 6]>,
}

impl Table {
    fn row(
        &mut self,
        figure: &str,
        measured: &str,
        baseline: &str,
        ratio: &str,
        target: &str,
        status: Status,
    ) {
        let status = match status {
            Status::Met => "met",
            Status::Missed => "MISSED",
            Status::Info => "",
        };
        self.rows.push([figure, measured, baseline, ratio, target, status].map(str::to_string));
    }

    fn check(
        &mut self,
        figure: &str,
        measured: &str,
        baseline: &str,
        ratio: &str,
        target: &str,
        met: bool,
    ) {
        self.row(
            figure,
            measured,
            baseline,
            ratio,
            target,
            if met { Status::Met } else { Status::Missed },
        );
    }

    fn regen(&mut self, f: &RegenFigures) {
        let Some(ours) = f.in_process else { return };
        match f.jevents {
            Some(jevents) => {
                let ratio = jevents.as_secs_f64() / ours.as_secs_f64();
                self.check(
                    "(a) regen, in process",
                    &secs(ours),
                    &format!("jevents.py {}", secs(jevents)),
                    &format!("{ratio:.1}x faster"),
                    &format!(">= {TARGET_REGEN_SPEEDUP}x"),
                    ratio >= TARGET_REGEN_SPEEDUP,
                );
                if let Some(process) = f.process {
                    let ratio = jevents.as_secs_f64() / process.as_secs_f64();
                    self.check(
                        "(a) xtask regen --check",
                        &secs(process),
                        &format!("jevents.py {}", secs(jevents)),
                        &format!("{ratio:.1}x faster"),
                        &format!(">= {TARGET_REGEN_SPEEDUP}x"),
                        ratio >= TARGET_REGEN_SPEEDUP,
                    );
                }
            }
            None => self.row(
                "(a) regen, in process",
                &secs(ours),
                "jevents.py not run",
                "",
                "",
                Status::Info,
            ),
        }
    }

    fn eval(&mut self, f: &EvalFigures) {
        let ratio = f.interpreted_ns / f.compiled_ns;
        self.check(
            &format!("(b) compiled, {} metrics", f.metrics),
            &format!("{:.1} ns/metric", f.compiled_ns),
            &format!("interpreter {:.0} ns", f.interpreted_ns),
            &format!("{ratio:.1}x faster"),
            &format!(">= {TARGET_EVAL_SPEEDUP}x, < {TARGET_EVAL_NS} ns"),
            ratio >= TARGET_EVAL_SPEEDUP && f.compiled_ns < TARGET_EVAL_NS,
        );
    }

    fn parse(&mut self, f: &ParseFigures) {
        let (baseline, ratio) = match f.perf {
            Some((perf, _)) => (
                format!("metric.py {}/s", thousands(perf)),
                format!("{:.0}x faster", f.ours_exprs.0 / perf),
            ),
            None => ("metric.py not run".to_string(), String::new()),
        };
        let ours = format!("{}/s", thousands(f.ours_exprs.0));
        self.row(
            &format!("parse, {} MetricExpr", f.exprs),
            &ours,
            &baseline,
            &ratio,
            "",
            Status::Info,
        );
        let all = format!("{}/s", thousands(f.ours_all.0));
        self.row(
            &format!("parse, + {} MetricThreshold", f.thresholds),
            &all,
            "",
            "",
            "",
            Status::Info,
        );
    }

    fn sizes(&mut self, ours: &GenSizes, base: Option<&GenSizes>) {
        let (baseline, ratio) = match base {
            Some(b) => (mb(b.rust), format!("{:.2}x", ours.rust as f64 / b.rust as f64)),
            None => (String::new(), String::new()),
        };
        self.check(
            "generated Rust source",
            &mb(ours.rust),
            &baseline,
            &ratio,
            "<= 6 MB",
            ours.rust <= TARGET_GEN_SOURCE_BYTES,
        );
        self.row("generated data tables", &mb(ours.data), "", "", "", Status::Info);
    }

    fn build(&mut self, trees: &[(String, BuildFigures)], perf: Option<&(PathBuf, u64)>) {
        let Some((_, f)) = trees.first() else { return };
        let base = trees.get(1).map(|(_, b)| b);
        let ratio = |ours: Option<Measured>, base: Option<Measured>| -> (String, String, f64) {
            match (ours, base) {
                (Some(o), Some(b)) => {
                    let r = o.time.as_secs_f64() / b.time.as_secs_f64();
                    (b.show(), format!("{r:.2}x"), r)
                }
                _ => (String::new(), String::new(), f64::NAN),
            }
        };
        if let Some(cold) = f.cold {
            let (baseline, shown, r) = ratio(f.cold, base.and_then(|b| b.cold));
            self.check(
                "(c) cold release build",
                &cold.show(),
                &baseline,
                &shown,
                "< 5 min",
                cold.time.as_secs_f64() < TARGET_COLD_BUILD_S || r <= 0.5,
            );
        }
        if let Some(rebuild) = f.rebuild {
            let catalog = f.recompiled.iter().any(|c| c == "tmetric-catalog");
            let note = if catalog { "catalog REBUILT" } else { "catalog not rebuilt" };
            self.check(
                "(c) rebuild, cli touched",
                &secs(rebuild.time),
                note,
                "",
                "< 30 s, no catalog",
                rebuild.time.as_secs_f64() < TARGET_REBUILD_S && !catalog,
            );
        }
        if let Some(catalog) = f.catalog {
            let b = base.and_then(|b| b.catalog);
            let (_, shown, r) = ratio(f.catalog, b);
            self.check(
                "(c) catalogue rebuild, time",
                &secs(catalog.time),
                &b.map(|b| secs(b.time)).unwrap_or_default(),
                &shown,
                "halve",
                r <= 0.5,
            );
            if let Some(peak) = catalog.peak_kb {
                let b = b.and_then(|b| b.peak_kb);
                let r = b.map_or(f64::NAN, |b| peak as f64 / b as f64);
                self.check(
                    "(c) catalogue rebuild, peak memory",
                    &mb(peak * 1024),
                    &b.map(|b| mb(b * 1024)).unwrap_or_default(),
                    &if r.is_nan() { String::new() } else { format!("{r:.2}x") },
                    "halve",
                    r <= 0.5,
                );
            }
        }
        if let Some(dependents) = f.dependents {
            let b = base.and_then(|b| b.dependents);
            let (_, shown, _) = ratio(f.dependents, b);
            self.row(
                &format!("(c) then its {} dependents", f.dependents_compiled.len()),
                &secs(dependents.time),
                &b.map(|b| secs(b.time)).unwrap_or_default(),
                &shown,
                "",
                Status::Info,
            );
        }
        if let Some(test) = f.test {
            let (baseline, shown, _) = ratio(f.test, base.and_then(|b| b.test));
            self.check(
                "(c) clean cargo test --workspace -j2",
                &test.show(),
                &baseline,
                &shown,
                "< 2 min",
                test.time.as_secs_f64() < TARGET_TEST_S,
            );
        }
        if let Some(bytes) = f.stripped_bytes {
            let (baseline, shown) = match perf {
                Some((path, perf)) => (
                    format!("{} {}", path.display(), mb(*perf)),
                    format!("{:.2}x", bytes as f64 / *perf as f64),
                ),
                None => ("perf not found".to_string(), String::new()),
            };
            self.check(
                "(c) stripped release binary",
                &mb(bytes),
                &baseline,
                &shown,
                "smaller than perf's",
                perf.is_some_and(|(_, perf)| bytes < *perf),
            );
            if let Some(b) = base.and_then(|b| b.stripped_bytes) {
                self.row(
                    "(c) stripped release binary, baseline tree",
                    &mb(b),
                    "",
                    &format!("ours {:.2}x", bytes as f64 / b as f64),
                    "",
                    Status::Info,
                );
            }
        }
        if let Some(bytes) = f.binary_bytes {
            self.row("(c) release binary, unstripped", &mb(bytes), "", "", "", Status::Info);
        }
    }

    fn render(&self) -> String {
        let header =
            ["figure", "tmetric", "baseline", "ratio", "target", "status"].map(str::to_string);
        let rows: Vec<&[String; 6]> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> =
            (0..6).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for row in rows {
            let cells: Vec<String> =
                row.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
            let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

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

    #[test]
    fn rng_is_uniform_enough() {
        let mut rng = Rng(1);
        let values: Vec<f64> = (0..10_000).map(|_| rng.unit()).collect();
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn same_treats_nan_as_equal_and_tolerates_rounding() {
        assert!(same(f64::NAN, f64::NAN));
        assert!(same(1.0, 1.0 + 1e-15));
        assert!(!same(1.0, 1.0001));
        assert!(!same(f64::NAN, 0.0));
    }
}
