//! `cargo xtask`: developer tasks (code generation, vendor import, benchmarks).
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]
use xtask::{diagnostics, import, regen};

// regen allocates per string, token and JSON value: glibc's malloc and free were a quarter of
// its time, and it must stay 10x faster than perf's jevents.py.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // A failure is a message (with its causes), never a backtrace: these are users' errors.
    if let Err(err) = run() {
        eprintln!("error: {err:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf();
    match args.first().map(String::as_str) {
        Some("regen") => {
            let mode = if args.iter().any(|a| a == "--check") {
                regen::Mode::Check
            } else {
                regen::Mode::Write
            };
            let start = std::time::Instant::now();
            let report = regen::regen(&root, mode)?;
            eprintln!(
                "regen: {} models, {} metrics compiled, {} skipped, {} bytes, {} files changed, {:.2?}",
                report.models,
                report.metrics,
                report.skipped,
                report.bytes,
                report.changed.len(),
                start.elapsed()
            );
            for v in &report.vintages {
                eprintln!(
                    "regen: perf {}: {} models ({} of their own, the rest shared with an earlier vintage), {} metrics compiled, {} skipped",
                    v.version, v.models, v.own_models, v.metrics, v.skipped
                );
            }
            let s = report.sharing;
            eprintln!(
                "regen: shared: {} of {} value functions, {} of {} needed-events functions, {} of {} metric descriptors, {} of {} strings distinct; names {} bytes plain, strings {} -> {} bytes, descriptions {} -> {} bytes, events {} -> {} bytes deflated ({} of {} records distinct)",
                s.value_fns.1,
                s.value_fns.0,
                s.needed_fns.1,
                s.needed_fns.0,
                s.descriptors.1,
                s.descriptors.0,
                s.strings.1,
                s.strings.0,
                s.names,
                s.string_bytes.0,
                s.string_bytes.1,
                s.description_bytes.0,
                s.description_bytes.1,
                s.event_bytes.0,
                s.event_bytes.1,
                s.events.1,
                s.events.0
            );
            let diag = root.join(regen::GEN_DIR).join(diagnostics::FILE);
            eprintln!(
                "regen: {} vendor loader diagnostics (see {})",
                diagnostics::count_in(&diag),
                diag.strip_prefix(&root).unwrap_or(&diag).display()
            );
            Ok(())
        }
        Some("import-vendor") => import::run(&args[1..]),
        // The benchmark links the generated catalogue, so it is its own binary behind the
        // `bench` feature: this one must build even when the generated code does not.
        Some("bench") => {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = std::process::Command::new(cargo)
                .current_dir(&root)
                .args([
                    "run",
                    "--package",
                    "xtask",
                    "--release",
                    "--features",
                    "bench",
                    "--bin",
                    "xtask-bench",
                    "--",
                ])
                .args(&args[1..])
                .status()?;
            std::process::exit(status.code().unwrap_or(1))
        }
        _ => anyhow::bail!(
            "usage: cargo xtask regen [--check] | cargo xtask import-vendor <path> | cargo xtask bench [--build]"
        ),
    }
}
