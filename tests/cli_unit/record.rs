//! Unit tests of `crates/cli/record.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;
    use tmetric::record::*;

    fn header_line() -> String {
        let h = Header {
            format: FORMAT.into(),
            version: VERSION,
            tmetric: "0.1.0".into(),
            cpuid: None,
            model: None,
            simulated: None,
            target: "true".into(),
            system_wide: false,
            interval_ms: None,
            topology: Topology { cpus: vec![0], cores: 1, sockets: 1, places: vec![[0, 0, 0, 0]] },
            literals: [("slots".to_string(), 0.1 + 0.2)].into_iter().collect(),
            selection: Selection {
                metrics: vec![],
                events: vec!["task-clock".into()],
                model: None,
                tpebs_mode: None,
                summary: false,
            },
            events: vec![EventRec {
                name: "task-clock".into(),
                pmu: "software".into(),
                type_: 1,
                config: 1,
                config1: 0,
                config2: 0,
                config3: 0,
                exclude: [false; 3],
                cpus: None,
                unit: None,
                scale: None,
            }],
            groups: vec![vec![0]],
            rows: vec![],
            roots: vec![],
            probes: vec![],
            retire_latency: BTreeMap::new(),
            failures: vec![None],
            splits: vec![],
            threads: vec![],
            skip_zero: false,
        };
        serde_json::to_string(&h).unwrap()
    }

    fn parse(text: &str) -> anyhow::Result<Recording> {
        read(Path::new("r.jsonl"), std::io::Cursor::new(text.to_string()))
    }

    #[test]
    fn reads_counts_and_keeps_floats_exact() {
        let text = format!(
            "{}\n{{\"t\":\"final\",\"group\":0,\"cpu\":-1,\"thread\":-1,\"counts\":[[5,10,4]]}}\n{{\"t\":\"end\",\"elapsed_ns\":7,\"user_ns\":null,\"sys_ns\":null,\"exit\":0,\"intervals\":0}}\n",
            header_line()
        );
        let rec = parse(&text).unwrap();
        assert_eq!(rec.header.literals["slots"], 0.1 + 0.2);
        let a = rec.totals.aggregate(0).unwrap();
        assert_eq!((a.value, a.enabled, a.running), (12, 10, 4));
        assert_eq!(rec.elapsed, Duration::from_nanos(7));
    }

    #[test]
    fn intervals_keep_their_latencies_and_samples() {
        let lines = [
            header_line(),
            r#"{"t":"interval","n":1,"at_ns":100,"length_ns":100,"group":0,"cpu":0,"thread":-1,"counts":[[1,2,2]]}"#.into(),
            r#"{"t":"interval","n":1,"at_ns":100,"length_ns":100,"group":0,"cpu":1,"thread":-1,"counts":[[3,2,1]]}"#.into(),
            r#"{"t":"latency","n":1,"values":{"X/R":"12.25"}}"#.into(),
            r#"{"t":"interval","n":2,"at_ns":200,"length_ns":100,"group":0,"cpu":0,"thread":-1,"counts":[null]}"#.into(),
            r#"{"t":"tpebs","event":"X/R","samples":4,"lost":0,"mean":"12.25","min":"1","max":"30","last":"2","p97":null}"#.into(),
            r#"{"t":"end","elapsed_ns":250,"user_ns":1,"sys_ns":2,"exit":0,"intervals":2}"#.into(),
        ];
        let rec = parse(&lines.join("\n")).unwrap();
        assert_eq!(rec.intervals.len(), 2);
        let first = &rec.intervals[0];
        assert_eq!(first.at, Duration::from_nanos(100));
        // CPU 1 ran half the time: 3 scales to 6.
        assert_eq!(first.counts.aggregate(0).unwrap().value, 7);
        assert_eq!(first.latency.as_ref().unwrap()["X/R"], 12.25);
        assert_eq!(rec.intervals[1].counts.events[0], None, "a member that was not open");
        assert!(matches!(rec.tpebs[0], Line::Tpebs { max: Some(30.0), p97: None, .. }));
        assert_eq!(rec.rusage, Some((Duration::from_nanos(1), Duration::from_nanos(2))));
    }

    /// Found by the fuzz target: two readings of u64::MAX added up past 2^64 (a panic in a
    /// debug build, wrapped numbers in a release one); now the reading is named.
    #[test]
    fn counts_that_cannot_add_up_are_named() {
        let huge = u64::MAX;
        let lines = [
            header_line(),
            format!(r#"{{"t":"final","group":0,"cpu":0,"thread":-1,"counts":[[{huge},10,10]]}}"#),
            r#"{"t":"final","group":0,"cpu":1,"thread":-1,"counts":[[1,10,10]]}"#.to_string(),
            r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#
                .into(),
        ];
        let err = format!("{:#}", parse(&lines.join("\n")).unwrap_err());
        assert!(err.starts_with("r.jsonl:3: event 0's counts add up to more than 2^64"), "{err}");
        // Multiplexed: 2^63 counted in half the time scales past 2^64 on its own.
        let half = 1u64 << 63;
        let lines = [
            header_line(),
            format!(r#"{{"t":"final","group":0,"cpu":0,"thread":-1,"counts":[[{half},10,5]]}}"#),
            r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#
                .into(),
        ];
        let err = format!("{:#}", parse(&lines.join("\n")).unwrap_err());
        assert!(err.starts_with("r.jsonl:2: event 0's counts add up"), "{err}");
    }

    /// Found by the fuzz target: interval 0 passed the reader and broke the printer's
    /// header count (`number - 1`).
    #[test]
    fn intervals_are_numbered_from_one() {
        let lines = [
            header_line(),
            r#"{"t":"interval","n":0,"at_ns":1,"length_ns":1,"group":0,"cpu":-1,"thread":-1,"counts":[[1,1,1]]}"#.into(),
            r#"{"t":"end","elapsed_ns":7,"user_ns":null,"sys_ns":null,"exit":0,"intervals":0}"#.into(),
        ];
        let err = format!("{:#}", parse(&lines.join("\n")).unwrap_err());
        assert!(err.starts_with("r.jsonl:2: interval 0 follows interval 0"), "{err}");
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let truncated = format!("{}\n{{\"t\":\"final\",\"group\":0,\"cpu\":-1,\"co", header_line());
        let err = format!("{:#}", parse(&truncated).unwrap_err());
        assert!(err.starts_with("r.jsonl:2: the line is truncated"), "{err}");
        let no_end = format!(
            "{}\n{{\"t\":\"final\",\"group\":0,\"cpu\":-1,\"thread\":-1,\"counts\":[[5,10,4]]}}\n",
            header_line()
        );
        let err = format!("{:#}", parse(&no_end).unwrap_err());
        assert!(err.contains("r.jsonl:2: the record is truncated"), "{err}");
        let bad_group = format!(
            "{}\n{{\"t\":\"final\",\"group\":3,\"cpu\":-1,\"thread\":-1,\"counts\":[[5,10,4]]}}\n",
            header_line()
        );
        let err = format!("{:#}", parse(&bad_group).unwrap_err());
        assert!(err.contains("r.jsonl:2: group 3 does not exist"), "{err}");
        let future = header_line().replace("\"version\":1", "\"version\":9");
        let err = format!("{:#}", parse(&future).unwrap_err());
        assert!(err.contains("r.jsonl:1: record format version 9"), "{err}");
        let err = format!("{:#}", parse("{\"a\":1}").unwrap_err());
        assert!(err.contains("not a tmetric record"), "{err}");
    }
}

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
    use tmetric::record;
    use tmetric::report::{self, ReportArgs};

    fn cases() -> u32 {
        std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    }

    const FIXTURES: &[&str] = &["sw", "task", "spr", "adl", "mtl"];

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
        let name = Path::new("fuzz.jsonl");
        match record::read(name, std::io::Cursor::new(bytes)) {
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
                    if let Err(err) = report::run(&cli.report) {
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
