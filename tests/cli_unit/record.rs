//! Fuzzing of `crates/cli/report.rs` over `tmetric_record`'s reader (the reader's own unit
//! tests are in `crates/record/tests`), through the CLI's library.

/// Fuzzing the record-file reader and everything `tmetric report` does with what it accepts
/// (rebuilding the plan, every layout and aggregation, other metrics), with proptest on the
/// stable toolchain: random bytes, line soup, and real records (`tests/data/record`: software
/// counts per CPU with intervals, a task, simulated Sapphire Rapids, Alder Lake and Meteor
/// Lake with sampled retire latencies) with lines deleted, repeated, swapped, cut, numbers
/// replaced and tokens inserted.
///
/// `fuzz` runs the cases in a child process (this test binary, `fuzz::cases`) so that what
/// `report` prints on standard error stays out of the test run's output, and so that a hang
/// is caught: the child is killed after a bound. It also reports the child's peak memory.
/// `FUZZ_CASES=N` sets the cases per property (default 256); failures are kept in
/// `tests/cli_unit/record.proptest-regressions` and replayed first.
mod fuzz {
    use std::io::Read;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use clap::Parser;
    use proptest::prelude::*;
    use proptest::test_runner::FileFailurePersistence;
    use tmetric::for_tests::{ReportArgs, report};

    fn cases() -> u32 {
        std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    }

    const FIXTURES: &[&str] = &["sw", "task", "spr", "adl", "mtl", "refused-text"];

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/data/record/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        report: ReportArgs,
    }

    /// What `report` is asked of every readable record.
    const VIEWS: &[&[&str]] = &[
        &[],
        &["-A"],
        &["--per-core"],
        &["-x", ","],
        &["-j"],
        &["--metric-only"],
        &["--tree", "--all"],
        &["-M", "tma_retiring,page_faults_per_sec"],
        &["--model", "x86/icelake"],
    ];

    /// Reads; on success reports in every view into a file; errors must be positioned,
    /// short messages. Nothing may panic.
    fn exercise(bytes: &[u8], dir: &Path) -> Result<(), TestCaseError> {
        match tmetric_record::read_jsonl("fuzz.jsonl", std::io::Cursor::new(bytes)) {
            Err(err) => {
                let message = format!("{err:#}");
                prop_assert!(message.starts_with("fuzz.jsonl"), "{message}");
                prop_assert!(message.len() < 4000, "{} bytes", message.len());
            }
            Ok(_) => {
                let input = dir.join("in.jsonl");
                std::fs::write(&input, bytes).unwrap();
                let output = dir.join("report.txt");
                for view in VIEWS {
                    let mut args = vec!["report", "-i", input.to_str().unwrap()];
                    args.extend_from_slice(&["-o", output.to_str().unwrap()]);
                    args.extend_from_slice(view);
                    let cli = Cli::try_parse_from(&args).expect("report's flags");
                    if let Err(err) = report(&cli.report) {
                        let message = format!("{err:#}");
                        prop_assert!(message.len() < 4000, "{view:?}: {} bytes", message.len());
                    }
                }
            }
        }
        Ok(())
    }

    #[derive(Debug, Clone)]
    enum Edit {
        Delete(usize),
        Repeat(usize),
        Swap(usize, usize),
        Cut(usize),
        Number(usize, &'static str),
        Insert(usize, &'static str),
        Byte(usize, u8),
    }

    const NUMBERS: &[&str] = &[
        "0",
        "1",
        "-1",
        "2",
        "4294967295",
        "4294967296",
        "2147483648",
        "-2147483649",
        "18446744073709551615",
        "18446744073709551616",
        "1e308",
        "0.5",
        "99999",
        "null",
        "\"1\"",
    ];

    const PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\n",
        "null",
        "\"NaN\"",
        "\"inf\"",
        "\"-0\"",
        r#""t":"final","#,
        r#""t":"interval","n":1,"#,
        r#""t":"end","#,
        r#""t":"latency","n":null,"values":{},"#,
        r#""group":0,"#,
        r#""cpu":-1,"#,
        r#""cpu":7,"#,
        r#""thread":0,"#,
        r#""counts":[[1,2,3]],"#,
        r#""counts":[null],"#,
        r#"{"t":"end","elapsed_ns":1,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#,
        r#""source":{"counter":999},"#,
        r#""copy_of":5,"#,
        r#""roots":[99],"#,
        "é",
        "\u{0}",
    ];

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            any::<usize>().prop_map(Edit::Delete),
            any::<usize>().prop_map(Edit::Repeat),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
            any::<usize>().prop_map(Edit::Cut),
            (any::<usize>(), prop::sample::select(NUMBERS)).prop_map(|(i, n)| Edit::Number(i, n)),
            (any::<usize>(), prop::sample::select(PIECES)).prop_map(|(i, p)| Edit::Insert(i, p)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Byte(i, b)),
        ]
    }

    fn apply(text: &str, edits: &[Edit]) -> Vec<u8> {
        let mut bytes = text.as_bytes().to_vec();
        for e in edits {
            let mut lines: Vec<Vec<u8>> =
                bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let n = lines.len().max(1);
            match *e {
                Edit::Delete(i) => {
                    if !lines.is_empty() {
                        lines.remove(i % n);
                    }
                }
                Edit::Repeat(i) => {
                    if !lines.is_empty() {
                        let line = lines[i % n].clone();
                        lines.insert(i % n, line);
                    }
                }
                Edit::Swap(a, b) => {
                    if !lines.is_empty() {
                        lines.swap(a % n, b % n);
                    }
                }
                Edit::Cut(at) => {
                    bytes.truncate(at % (bytes.len() + 1));
                    continue;
                }
                Edit::Number(i, with) => {
                    let mut runs = Vec::new();
                    let mut start = None;
                    for (k, b) in bytes.iter().enumerate() {
                        match (b.is_ascii_digit(), start) {
                            (true, None) => start = Some(k),
                            (false, Some(s)) => {
                                runs.push((s, k));
                                start = None;
                            }
                            _ => {}
                        }
                    }
                    if let Some((s, k)) = runs.get(i % runs.len().max(1)).copied() {
                        bytes.splice(s..k, with.bytes());
                    }
                    continue;
                }
                Edit::Insert(at, piece) => {
                    let at = at % (bytes.len() + 1);
                    bytes.splice(at..at, piece.bytes());
                    continue;
                }
                Edit::Byte(at, b) => {
                    if !bytes.is_empty() {
                        let at = at % bytes.len();
                        bytes[at] = b;
                    }
                    continue;
                }
            }
            bytes = lines.join(&b'\n');
        }
        bytes
    }

    fn scratch() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("tmetric-record-fuzz-").tempdir().unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: cases(),
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
            ..ProptestConfig::default()
        })]

        #[test]
        #[ignore = "run by `fuzz`, in a child process"]
        fn edited_records(which in 0..FIXTURES.len(), edits in prop::collection::vec(edit(), 1..5)) {
            let dir = scratch();
            exercise(&apply(&fixture(FIXTURES[which]), &edits), dir.path())?;
        }

        /// Numbers changed only, so most files still read and `report` gets them: counts,
        /// times, CPUs, and the header's indices (groups, rows, roots, copies, slots).
        #[test]
        #[ignore = "run by `fuzz`, in a child process"]
        fn edited_numbers(
            which in 0..FIXTURES.len(),
            edits in prop::collection::vec((any::<usize>(), prop::sample::select(NUMBERS)), 1..4),
        ) {
            let dir = scratch();
            let edits: Vec<Edit> = edits.into_iter().map(|(i, n)| Edit::Number(i, n)).collect();
            exercise(&apply(&fixture(FIXTURES[which]), &edits), dir.path())?;
        }

        #[test]
        #[ignore = "run by `fuzz`, in a child process"]
        fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let dir = scratch();
            exercise(&bytes, dir.path())?;
        }

        #[test]
        #[ignore = "run by `fuzz`, in a child process"]
        fn line_soup(which in 0..FIXTURES.len(), picks in prop::collection::vec(any::<usize>(), 0..40)) {
            // Lines of a real record (its header first), in any order and number.
            let text = fixture(FIXTURES[which]);
            let lines: Vec<&str> = text.lines().collect();
            let mut out = vec![lines[0]];
            out.extend(picks.iter().map(|p| lines[p % lines.len()]));
            let dir = scratch();
            exercise(out.join("\n").as_bytes(), dir.path())?;
        }
    }

    /// Peak resident memory of a running process (`VmHWM`), in kB.
    fn peak_kb(pid: u32) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    #[test]
    fn fuzz() {
        let started = Instant::now();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--test-threads=1", "cli_unit::record::fuzz::"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read both pipes on threads, so a full pipe never stalls the child.
        let pipe = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                let _ = r.read_to_end(&mut text);
                text
            })
        };
        let out = pipe(Box::new(child.stdout.take().unwrap()));
        let err = pipe(Box::new(child.stderr.take().unwrap()));
        // Generous for a loaded machine; a case takes milliseconds.
        let bound = Duration::from_secs(300) + Duration::from_millis(200) * cases();
        let mut peak = 0;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            peak = peak.max(peak_kb(child.id()).unwrap_or(0));
            if started.elapsed() > bound {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the record fuzz cases did not finish in {bound:?}: a hang");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let out = String::from_utf8_lossy(&out.join().unwrap()).into_owned();
        let err = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
        let tail = |t: &str| t[t.len().saturating_sub(6000)..].to_string();
        assert!(status.success(), "{}\n{}", tail(&out), tail(&err));
        assert!(out.contains("4 passed"), "{}", tail(&out));
        // Written for `FUZZ_CASES` runs, where the figures are wanted.
        eprintln!(
            "record fuzz: {} cases per property in {:.1} s, child peak memory {} MB",
            cases(),
            started.elapsed().as_secs_f64(),
            peak / 1024
        );
        assert!(peak < 200 * 1024, "peak memory {peak} kB");
    }
}
