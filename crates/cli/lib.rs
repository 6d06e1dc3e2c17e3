//! The `tmetric` command line as a library: flag parsing, subcommand dispatch and the
//! exit-code policy. `main.rs` only calls [`main`]; the library exists so that the CLI's unit
//! tests (`tests/cli_unit`) link it instead of compiling the CLI a second time in test mode.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod counts;
mod describe;
mod eval;
mod list;
mod plan;
mod record;
mod report;
mod serve;
mod sim_hint;
mod stat;

/// What the CLI's unit tests (`tests/cli_unit`) reach inside the CLI, and nothing more: every
/// other module is private. `eval --from-perf`'s reader with a chosen streaming budget (a
/// long log read block by block must print what the whole log prints) and `report` run
/// in-process by the record-file fuzzer's child.
#[doc(hidden)]
pub mod for_tests {
    pub use crate::eval::EvalArgs;
    pub use crate::eval::from_perf::{PREFIX_BYTES, run_log, run_log_with};
    pub use crate::report::{ReportArgs, run as report};
}

/// Compiled CPU performance metrics from Linux perf's vendor JSON.
#[derive(Debug, Parser)]
#[command(
    name = "tmetric",
    version,
    about,
    override_usage = "tmetric [stat options] [--] command [args]   (as `perf stat`; `tmetric stat --help` lists the options)\n       \
    tmetric [stat options]                     (every CPU until Ctrl-C)\n       \
    tmetric <COMMAND> ...",
    after_help = "Without a subcommand tmetric is `tmetric stat`: `tmetric -e cycles,instructions -- make -j4`, `tmetric -a -I 1000 -M Software`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Use perf release X.Y's vendor tables (metrics, formulas, events) and print as it prints:
    /// one of the stored vintages (5.10, 6.1, 6.12, 7.2), or a release between them, which
    /// uses the newest older one. Default: the newest vintage's tables, printed as perf 6.12
    /// prints (`--perf-version 6.12` is exactly perf 6.12; `tmetric list models` shows each
    /// model's vintages).
    #[arg(long, global = true, value_name = "X.Y")]
    perf_version: Option<String>,
}

/// `defer`: a subcommand's flags are added when it is built, so a run builds only the one it
/// names (all of them were a third of `tmetric -e task-clock true`'s instructions). Its `Args`
/// struct's doc, added then, is its help's about; the variant's is the listing's (kept equal).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    /// Latency statistics from ftrace text (XSAVES/XRSTORS tracepoints by default).
    Latency(tmetric_latency::LatencyArgs),
    /// The compiled catalogue: models, metrics, metric groups and events.
    List(list::ListArgs),
    /// Evaluate a model's metrics over a counts file, or an ad-hoc expression.
    Eval(eval::EvalArgs),
    /// Count events for a command (or system-wide) and print them with metrics, as perf stat does.
    Stat(stat::StatArgs),
    /// `stat` that also saves the raw counts, with what is needed to evaluate them later, to
    /// `-o FILE` (docs/record-format.md).
    Record(record::RecordArgs),
    /// Evaluate and print a `tmetric record` file or a `perf stat record` perf.data file.
    Report(report::ReportArgs),
    /// How a metric selection would be grouped and scheduled on a machine's counters.
    Plan(plan::PlanArgs),
    /// One metric in full: descriptions, formula, threshold, its tree and the events it needs.
    Describe(describe::DescribeArgs),
    /// Export metrics per host and per cgroup to Prometheus over HTTP (/metrics, /json,
    /// /healthz), read every interval.
    Serve(serve::ServeArgs),
    /// Prometheus recording rules (or a Grafana dashboard) computing metrics from the raw
    /// counters `serve` exports.
    Rules(serve::RulesArgs),
}

/// Selects the vintage `--perf-version` names, saying so when the release has none of its own.
fn select_vintage(version: &str) -> anyhow::Result<()> {
    let chosen = tmetric_catalog::select_vintage(version).map_err(anyhow::Error::msg)?;
    let exact = version == chosen.version || version.starts_with(&format!("{}.", chosen.version));
    if !exact {
        tmetric_print::out::warn(&format!(
            "perf {version} has no vendor tables of its own here: using perf {}'s, the newest older vintage",
            chosen.version
        ));
    }
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Some(version) = &cli.perf_version {
        select_vintage(version)?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(tmetric_print::out::NamedStdout(stdout.lock()));
    match cli.command {
        Command::Latency(args) => tmetric_latency::run(&args, &mut out)?,
        Command::List(args) => list::run(&args, &mut out)?,
        Command::Eval(args) => eval::run(&args, &mut out)?,
        Command::Plan(args) => plan::run(&args, &mut out)?,
        Command::Describe(args) => describe::run(&args, &mut out)?,
        Command::Report(args) => report::run(&args)?,
        Command::Serve(args) => serve::run(&args)?,
        Command::Rules(args) => serve::rules(&args, &mut out)?,
        Command::Stat(args) => {
            // The exit code is the workload's, as perf stat's is.
            let code = stat::run(&args)?;
            out.flush()?;
            stat::reraise_now();
            if code != 0 {
                std::process::exit(code);
            }
        }
        Command::Record(args) => {
            let code = record::run(&args)?;
            out.flush()?;
            stat::reraise_now();
            if code != 0 {
                std::process::exit(code);
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// `tmetric [stat flags] [--] cmd args`: as perf users type `perf stat`, the top level is
/// `stat` when the first argument is not a subcommand or a top-level flag.
fn with_default_subcommand(
    mut args: Vec<std::ffi::OsString>,
    cli: &clap::Command,
) -> Vec<std::ffi::OsString> {
    let first = args.get(1).and_then(|a| a.to_str()).map(str::to_string);
    // perf's `perf stat record ...` and `perf stat report ...` (abbreviations of at least
    // three letters, as perf accepts them) are tmetric's `record` and `report`.
    if first.as_deref() == Some("stat")
        && let Some(sub) = args.get(2).and_then(|a| a.to_str()).map(str::to_string)
        && sub.len() > 2
    {
        for name in ["record", "report"] {
            if name.starts_with(&sub) {
                args.remove(1);
                args[1] = name.into();
                return args;
            }
        }
    }
    match first {
        Some(first) if !is_top_level(cli, &first) => args.insert(1, "stat".into()),
        // Bare `tmetric`, as bare `perf stat`: count every CPU until Ctrl-C.
        None => args.insert(1, "stat".into()),
        _ => {}
    }
    args
}

/// Whether `word` is what the top level reads itself: a subcommand's name or alias, a
/// top-level flag of `cli`, or what building `cli` adds to them (the `help` subcommand,
/// `-h`/`--help`, `-V`/`--version`), which the command as defined does not list yet.
fn is_top_level(cli: &clap::Command, word: &str) -> bool {
    if matches!(word, "help" | "-h" | "--help" | "-V" | "--version") {
        return true;
    }
    let flag = |arg: &clap::Arg| {
        arg.get_short().is_some_and(|s| word.strip_prefix('-') == Some(s.encode_utf8(&mut [0; 4])))
            || arg.get_long().is_some_and(|l| word.strip_prefix("--") == Some(l))
    };
    cli.get_subcommands()
        .any(|sub| sub.get_name() == word || sub.get_all_aliases().any(|a| a == word))
        || cli.get_arguments().any(flag)
}

/// Why the workload could not be run, when that is what failed: a program not found in
/// `PATH` is perf's ENOENT from `execvp`.
fn workload_failure(err: &anyhow::Error) -> Option<tmetric_runtime::Errno> {
    use tmetric_runtime::{Errno, RunError, WorkloadError};
    let errno = |w: &WorkloadError| match w {
        WorkloadError::NotFound(_) => Some(Errno(libc_enoent())),
        WorkloadError::Exec { errno, .. } => Some(*errno),
        _ => None,
    };
    err.chain().find_map(|cause| {
        if let Some(w) = cause.downcast_ref::<WorkloadError>() {
            return errno(w);
        }
        match cause.downcast_ref::<RunError>()? {
            RunError::Workload(w) => errno(w),
            _ => None,
        }
    })
}

/// `ENOENT`, without a libc dependency in the binary.
fn libc_enoent() -> i32 {
    std::io::Error::from(std::io::ErrorKind::NotFound).raw_os_error().unwrap_or(2)
}

/// A safety net for `eprintln!` anywhere in the binary: when standard error cannot be written
/// (`2>/dev/full`) it panics with "failed printing to stderr"; exit 2 quietly instead of 101
/// with a panic message nobody can read. Code on the `stat` path writes through
/// [`tmetric_print::out::warn`] and never gets here.
fn exit_2_when_stderr_fails() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stderr") {
            std::process::exit(2);
        }
        default(info);
    }));
}

/// Why a command line does not parse.
enum ParseError {
    /// clap's own error (also `--help` and `--version`, which clap prints on standard output).
    Clap(clap::Error),
    /// An option the subcommand does not take, worded by [`tmetric_perfopts::unknown::explain`].
    Unknown(String),
}

/// Parses a command line (with the program name) as `main` reads it: `stat` when no
/// subcommand is named, clap's matches, then what only the order of the options says (perf
/// reads them one by one: `--filter` follows its `-e`).
fn parse(mut argv: Vec<std::ffi::OsString>) -> Result<Cli, ParseError> {
    use clap::{CommandFactory, FromArgMatches};
    // Made once, and never built whole: building finishes every subcommand's flags, the
    // largest part of a short run, while parsing builds the top level and the one subcommand
    // named. The helpers read the command as defined (`is_top_level` knows what building adds).
    let mut command = Cli::command();
    let defined = &command;
    // `tmetric --perf-version 7.2 list ...`: the global flag ahead of the subcommand moves
    // behind it, so the default subcommand (`stat`) is still inserted where it belongs.
    let leading: Vec<std::ffi::OsString> = match argv.get(1).and_then(|a| a.to_str()) {
        Some(flag) if flag.starts_with("--perf-version=") => vec![argv.remove(1)],
        Some("--perf-version") if argv.len() > 2 => argv.drain(1..3).collect(),
        _ => Vec::new(),
    };
    let mut argv = with_default_subcommand(argv, defined);
    if !leading.is_empty() {
        let at = 2.min(argv.len());
        argv.splice(at..at, leading);
    }
    let argv = perfs_negations(argv, &mut command);
    let matches = command.try_get_matches_from(&argv).map_err(|err| {
        let sub = argv.get(1).and_then(|a| a.to_str()).unwrap_or("stat");
        match tmetric_perfopts::unknown::explain(&err, sub) {
            Some(text) => ParseError::Unknown(text),
            None => ParseError::Clap(err),
        }
    })?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(ParseError::Clap)?;
    if let Some((_, sub)) = matches.subcommand() {
        match &mut cli.command {
            Command::Stat(args) => args.read_order(sub),
            Command::Record(args) => args.stat.read_order(sub),
            _ => {}
        }
    }
    Ok(cli)
}

/// `stat`'s and `record`'s options with perf's `--no-X` negations applied
/// ([`tmetric_perfopts::negate`]).
fn perfs_negations(
    argv: Vec<std::ffi::OsString>,
    cli: &mut clap::Command,
) -> Vec<std::ffi::OsString> {
    let Some(sub) = argv.get(1).and_then(|a| a.to_str()) else { return argv };
    if !matches!(sub, "stat" | "record") {
        return argv;
    }
    // Negation reads each flag's action, which building settles. The subcommand is built in
    // place, once: parsing finds it built and does not build it again. Parsing would first
    // give it the top level's global flags (`--perf-version`), so they are given here first,
    // as parsing adds them.
    let global: Vec<clap::Arg> =
        cli.get_arguments().filter(|arg| arg.is_global_set()).cloned().collect();
    match cli.find_subcommand_mut(sub) {
        Some(command) => {
            for arg in global {
                if !command.get_arguments().any(|a| a.get_id() == arg.get_id()) {
                    *command = std::mem::take(command).arg(arg);
                }
            }
            command.build();
            tmetric_perfopts::negate::apply(command, argv)
        }
        None => argv,
    }
}

/// Whether `args` (without the program name) parse as a `tmetric` command line, as `main`
/// would read them, without running anything: for the tests that hold the README and the
/// `--help` texts to the flags that exist.
pub fn parse_check(args: &[&str]) -> Result<(), String> {
    let mut argv: Vec<std::ffi::OsString> = vec!["tmetric".into()];
    argv.extend(args.iter().map(std::ffi::OsString::from));
    match parse(argv) {
        Ok(_) => Ok(()),
        Err(ParseError::Clap(e)) => Err(e.to_string()),
        Err(ParseError::Unknown(text)) => Err(text),
    }
}

/// The subcommands' names, and for each its flags as typed (`--metrics`, `-M`, ...),
/// hidden ones included.
pub fn flags() -> Vec<(String, Vec<String>)> {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    cli.build(); // adds the deferred flags (and `help`, `--help` and the globals: left out)
    // Global flags (`--perf-version`) belong to every subcommand.
    let global: Vec<String> = cli
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .filter_map(|arg| arg.get_long().map(|l| format!("--{l}")))
        .collect();
    cli.get_subcommands()
        .filter(|sub| sub.get_name() != "help")
        .map(|sub| {
            let mut flags = vec!["--help".to_string(), "-h".to_string()];
            flags.extend(global.iter().cloned());
            for arg in sub.get_arguments().filter(|a| !a.is_global_set() && a.get_id() != "help") {
                flags.extend(arg.get_long().map(|l| format!("--{l}")));
                flags.extend(arg.get_short().map(|s| format!("-{s}")));
                flags.extend(
                    arg.get_all_aliases().unwrap_or_default().iter().map(|a| format!("--{a}")),
                );
            }
            (sub.get_name().to_string(), flags)
        })
        .collect()
}

/// The whole command: parse the arguments, run, and map errors to exit codes.
pub fn main() -> ExitCode {
    // `ulimit -v`: a stack that cannot grow is one line and exit 2, as a failed allocation is.
    tmetric_runtime::alloc::report_stack_exhaustion();
    exit_2_when_stderr_fails();
    // `ulimit -f`: a write error naming the file, not death by SIGXFSZ.
    tmetric_runtime::signal::file_size_limit_is_an_error();
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        // perf's code for a usage error: 129 (`usage_with_options` exits with it).
        Err(ParseError::Unknown(text)) => {
            let _ = writeln!(std::io::stderr(), "{text}");
            return ExitCode::from(129);
        }
        Err(ParseError::Clap(err)) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 129 } else { 0 });
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // A closed pipe (`tmetric list | head`) is not an error worth reporting.
            if err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            if let Some(exit) = err.chain().find_map(|c| c.downcast_ref::<stat::PerfExit>()) {
                tmetric_print::out::error(&exit.message);
                return ExitCode::from(exit.code);
            }
            if let Some(errno) = workload_failure(&err) {
                // perf's words and code (`cmd_stat` returns -1) for a command that cannot be
                // run, then tmetric's, which name it.
                let _ = writeln!(std::io::stderr(), "Workload failed: {}", errno.text());
                tmetric_print::out::error(&format!("{err:#}"));
                return ExitCode::from(255);
            }
            // Never `eprintln!`: it panics when standard error cannot be written.
            let mut text = format!("{err:#}");
            // Decided on the errno in the error chain, never on the message's words.
            let out_of_descriptors = err.chain().any(|cause| {
                cause
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(tmetric_runtime::sys::out_of_descriptors)
                    || cause
                        .downcast_ref::<tmetric_runtime::Errno>()
                        .copied()
                        .or_else(|| cause.downcast_ref::<tmetric_runtime::WorkloadError>()?.errno())
                        .is_some_and(|e| matches!(e.0, libc::EMFILE | libc::ENFILE))
            });
            if out_of_descriptors && !text.contains("ulimit -n") {
                // Whatever ran out of descriptors (a pipe, the signal pipe, a file), the
                // remedy is the same.
                text.push_str("; descriptors ran out: raise the limit with `ulimit -n`");
            }
            tmetric_print::out::error(&text);
            ExitCode::from(2)
        }
    }
}
