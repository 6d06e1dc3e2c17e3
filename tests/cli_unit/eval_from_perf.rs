//! Unit tests of `crates/cli/eval/from_perf.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use clap::Parser;
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::OnceLock;
    use tmetric::for_tests::{EvalArgs, PREFIX_BYTES, run_log, run_log_with};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: EvalArgs,
    }

    fn args(extra: &[&str]) -> EvalArgs {
        let argv = std::iter::once("eval").chain(extra.iter().copied());
        Cli::try_parse_from(argv).expect("valid flags").args
    }

    /// Every perf stat log the tests use.
    fn fixtures() -> &'static [String] {
        static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
        TEXTS.get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let dirs = ["real", "hand", "seed004"]
                .iter()
                .map(|d| root.join("crates/perfstat/tests/data").join(d))
                .chain([root.join("tests/data/perf")]);
            let mut texts = Vec::new();
            for dir in dirs {
                let mut paths: Vec<_> = std::fs::read_dir(dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "txt"))
                    .collect();
                paths.sort();
                texts.extend(paths.iter().map(|p| std::fs::read_to_string(p).unwrap()));
            }
            texts
        })
    }

    /// A log read block by block after its first interval prints what the whole log prints,
    /// but for the header's block count.
    #[test]
    fn a_streamed_log_prints_what_the_whole_log_prints() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        // Logs of several intervals, with a model or inferring one.
        let logs = [
            ("hand/std_interval_per_core_metrics.txt", Some("alderlake")),
            ("hand/json_hybrid_interval_per_core.txt", Some("alderlake")),
            ("real/std_interval_per_cpu.txt", None),
            ("real/csv_interval.txt", None),
            ("real/json_interval.txt", None),
        ];
        for (log, model) in logs {
            let text =
                std::fs::read_to_string(root.join("crates/perfstat/tests/data").join(log)).unwrap();
            for format in [&[][..], &["--json"], &["-x;"]] {
                let mut flags = vec!["--from-perf", "-"];
                if let Some(model) = model {
                    flags.extend(["--model", model]);
                }
                flags.extend(format);
                let run = |budget: u64| {
                    let mut out = Vec::new();
                    run_log_with(&args(&flags), log, text.as_bytes(), &mut out, budget)
                        .unwrap_or_else(|e| panic!("{log} {flags:?}: {e:#}"));
                    String::from_utf8(out).unwrap()
                };
                let (whole, streamed) = (run(PREFIX_BYTES), run(1));
                let body = |out: &str| out.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
                assert!(body(&whole).len() > 2, "{log} {flags:?}:\n{whole}");
                assert_eq!(body(&whole), body(&streamed), "{log} {flags:?}");
                let head = streamed.lines().next().unwrap();
                assert!(
                    head.contains("read block by block, metrics chosen from its first")
                        || head.contains("\"blocks\":null"),
                    "{head}"
                );
                assert_ne!(whole.lines().next(), streamed.lines().next());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Truncated and mutated logs, evaluated with and without a model, in every output
        /// layout: an error or an output, never a panic.
        #[test]
        fn odd_logs_never_panic(
            pick in any::<prop::sample::Index>(),
            cut in any::<prop::sample::Index>(),
            flip in proptest::option::of((any::<prop::sample::Index>(), "[ 0-9,.#%:/<>a-zA-Z(){}\n-]")),
            model in prop::sample::select(vec!["", "meteorlake", "icelake", "alderlake", "common"]),
            format in prop::sample::select(vec!["", "--json", "-x;"]),
        ) {
            let text = pick.get(fixtures());
            let mut end = cut.index(text.len() + 1);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let mut input = text[..end].to_string();
            if let Some((at, with)) = flip && !input.is_empty() {
                let mut at = at.index(input.len());
                while !input.is_char_boundary(at) {
                    at -= 1;
                }
                input.insert_str(at, &with);
            }
            let mut flags: Vec<&str> = vec!["--from-perf", "-"];
            if !model.is_empty() {
                flags.extend(["--model", model]);
            }
            if !format.is_empty() {
                flags.push(format);
            }
            let mut out = Vec::new();
            let _ = run_log(&args(&flags), "fuzz", input.as_bytes(), &mut out);
        }
    }
}
