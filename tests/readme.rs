//! The README as executable documentation: every command in its tables and
//! examples runs here, so the README cannot drift from the program; and every flag or command
//! the `--help` texts mention exists.
//!
//! What runs, and what is checked:
//! - Every line of a ```` ```sh ```` block, in order, in one scratch directory (so `-o td.data`
//!   and the `report -i td.data` after it meet), through `sh` with the binary first on `PATH`:
//!   it must succeed. `cargo` lines are the developer's and are not run; `perf` lines run where
//!   perf is installed. A line that is a single `tmetric` `stat`, `record` or `plan` command
//!   without a machine of its own runs again with `--pmu-sim sapphirerapids`, which must
//!   succeed and say it is simulated.
//! - Every untitled block is the output of the last `tmetric` command quoted in the paragraph
//!   before it: that command runs and its output (standard output, then standard error) must
//!   have the block's shape: the same lines once runs of spaces are one and numbers are `N`
//!   (and `/sec`'s `K`, `M`, `G` are gone). Under `--pmu-sim` only the times are masked: the
//!   simulated values are not the machine's. On a machine with a core PMU the block of this
//!   VM (which has none) is only checked for its title and footer.
//! - Every example of the events table is counted with `-e`: vendor events and PMU terms on
//!   `--pmu-sim sapphirerapids` (`cpu_core/` ones on `alderlake`), tracepoints on this machine,
//!   the rest on both.
//! - Every other `tmetric ...` quoted in the text (the commands table's synopses included):
//!   each flag it names exists for its subcommand; if it parses as a command line it runs
//!   (briefly: one waiting for Ctrl-C is interrupted after 3 s) and must not be a usage error.
//! - The table of commands: each subcommand in it has a line in the `sh` block that follows.
//!
//! `sleep 1` runs as `sleep 0.1`: the shapes do not depend on it, and the suite stays quick.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The README.
fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md is readable")
}

/// A fenced block: its language (empty for output), its lines, the paragraph before it and
/// its first line's number.
struct Block {
    lang: String,
    lines: Vec<String>,
    before: String,
    line: usize,
}

/// The fenced blocks of `text`, and the text outside them (line number, line).
fn split(text: &str) -> (Vec<Block>, Vec<(usize, String)>) {
    let mut blocks = Vec::new();
    let mut prose: Vec<(usize, String)> = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                // The paragraph before the block: the prose lines since the last blank one.
                let mut before: Vec<&str> = Vec::new();
                for (_, l) in prose.iter().rev() {
                    if l.trim().is_empty() {
                        if before.is_empty() {
                            continue;
                        }
                        break;
                    }
                    before.push(l);
                }
                before.reverse();
                open = Some(Block {
                    lang: lang.trim().to_string(),
                    lines: Vec::new(),
                    before: before.join("\n"),
                    line: n,
                });
            }
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some(block), None) => block.lines.push(line.to_string()),
            (None, None) => prose.push((n, line.to_string())),
        }
    }
    assert!(open.is_none(), "README.md: a code block is not closed");
    (blocks, prose)
}

/// The backticked spans of a line (markdown's `\|` is a `|`).
fn spans(line: &str) -> Vec<String> {
    line.split('`').skip(1).step_by(2).map(|s| s.replace("\\|", "|")).collect()
}

/// Runs `sh -c script` in `dir` with the binary first on `PATH`, for at most `limit` (then
/// SIGINT, as a user's Ctrl-C; `None` as the status's code then means it was interrupted).
fn sh(script: &str, dir: &Path, limit: Duration) -> (Output, bool) {
    let bin = Path::new(env!("CARGO_BIN_EXE_tmetric")).parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&path));
    let mut child = Command::new("sh")
        .args(["-c", &format!("exec {script}")])
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    // Read both pipes while waiting, so a long output cannot block the child.
    fn drain(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    }
    let out_thread = drain(child.stdout.take().unwrap());
    let err_thread = drain(child.stderr.take().unwrap());
    let start = Instant::now();
    let mut interrupted = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit && !interrupted {
            interrupted = true;
            let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        }
        if start.elapsed() > limit + Duration::from_secs(20) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output =
        Output { status, stdout: out_thread.join().unwrap(), stderr: err_thread.join().unwrap() };
    (output, interrupted)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `sleep 1` as `sleep 0.1`; `tmetric serve` (which serves until stopped) for one short
/// interval on a free port.
fn quick(command: &str) -> String {
    let command = command.replace("sleep 1", "sleep 0.1");
    if command.starts_with("tmetric serve") && !command.contains("--once") {
        return command.replacen(
            "tmetric serve",
            "tmetric serve --intervals 1 --interval 200ms --listen 127.0.0.1:0",
            1,
        );
    }
    command
}

/// A private scratch directory.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("tmetric-readme-").tempdir().expect("a scratch directory")
}

/// The subcommand a command line runs (`stat` when it names none), and its words.
fn subcommand(words: &[&str]) -> String {
    let subs: Vec<String> = tmetric::flags().into_iter().map(|(name, _)| name).collect();
    match words.get(1) {
        Some(w) if subs.iter().any(|s| s == w) => w.to_string(),
        Some(&"[stat]") => "stat".to_string(),
        _ => "stat".to_string(),
    }
}

/// The flags a command line or synopsis names: `-x`, `--name`, `--per-*` (as `--per-`), the
/// flag part of `--per-cache[=L]` and `-d[d[d]]`.
fn named_flags(command: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for word in command.split(|c: char| c.is_whitespace() || "[]|(){}".contains(c)) {
        let Some(rest) = word.strip_prefix('-') else { continue };
        let long = rest.strip_prefix('-');
        let body = long.unwrap_or(rest);
        // Dots inside a name too (`--web.config.file`, as Prometheus's exporters spell it),
        // not a sentence's full stop after it.
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
            .collect();
        let name = name.trim_end_matches('.').to_string();
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        match long {
            Some(_) if body[name.len()..].starts_with('*') => flags.push(format!("--{name}*")),
            Some(_) => flags.push(format!("--{name}")),
            // `-x`: one letter (`-ddd` is `-d` three times).
            None => flags.push(format!("-{}", &name[..1])),
        }
    }
    flags
}

/// Whether `flag` (from [`named_flags`]) is one of `known`.
fn flag_exists(flag: &str, known: &[String]) -> bool {
    match flag.strip_suffix('*') {
        Some(prefix) => known.iter().any(|k| k.starts_with(prefix)),
        None => known.iter().any(|k| k == flag),
    }
}

/// The flags of subcommand `sub`.
fn flags_of(sub: &str) -> Vec<String> {
    tmetric::flags().into_iter().find(|(name, _)| name == sub).map(|(_, f)| f).unwrap_or_default()
}

/// A line with runs of spaces as one, and (when `numbers`) every number as `N` and `K/sec`,
/// `M/sec`, `G/sec` as `/sec`.
fn shape(line: &str, numbers: bool) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            out.push(' ');
        } else if numbers && c.is_ascii_digit() {
            while chars.peek().is_some_and(|c| c.is_ascii_digit() || *c == ',' || *c == '.') {
                chars.next();
            }
            out.push('N');
        } else {
            out.push(c);
        }
    }
    let out = out.replace("N K/sec", "N /sec").replace("N M/sec", "N /sec");
    out.replace("N G/sec", "N /sec")
}

/// The lines of `text` as [`shape`]s, without leading and trailing blank lines; `numbers`:
/// mask every number, else only those of the footer's times.
fn shapes(text: &str, numbers: bool) -> Vec<String> {
    let lines: Vec<String> =
        text.lines().map(|l| shape(l, numbers || l.contains(" seconds "))).collect();
    let first = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(lines.len());
    let last = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(first, |i| i + 1);
    lines[first..last].to_vec()
}

fn has_core_pmu() -> bool {
    tmetric_runtime::Sysfs::system().core_pmu().is_some()
}

fn has_perf() -> bool {
    Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The same single `tmetric` command on `--pmu-sim sapphirerapids`, when it applies: `stat`,
/// `record` and `plan` commands that name no machine of their own.
fn on_simulator(line: &str) -> Option<String> {
    if line.contains(['|', '&', '>', ';']) {
        return None;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.first() != Some(&"tmetric") {
        return None;
    }
    if ["--pmu-sim", "--model", "--cpuid", "--sysfs"].iter().any(|f| words.contains(f)) {
        return None;
    }
    match subcommand(&words).as_str() {
        "stat" if words.get(1) == Some(&"stat") => {
            Some(line.replacen("tmetric stat", "tmetric stat --pmu-sim sapphirerapids", 1))
        }
        "stat" => Some(line.replacen("tmetric", "tmetric --pmu-sim sapphirerapids", 1)),
        sub @ ("record" | "plan") => Some(line.replacen(
            &format!("tmetric {sub}"),
            &format!("tmetric {sub} --pmu-sim sapphirerapids"),
            1,
        )),
        _ => None,
    }
}

#[test]
fn every_sh_line_of_the_readme_runs_here_and_on_the_simulator() {
    let (blocks, _) = split(&readme());
    let dir = scratch();
    let perf = has_perf();
    let mut ran = 0;
    for block in blocks.iter().filter(|b| b.lang == "sh") {
        for (i, line) in block.lines.iter().enumerate() {
            let command = line.split("  #").next().unwrap().trim();
            let at = format!("README.md:{}", block.line + 1 + i);
            if command.is_empty() || command.starts_with("cargo ") {
                continue;
            }
            if (command.starts_with("perf ") || command.contains("| perf ")) && !perf {
                eprintln!("{at}: perf is not installed: not run: {command}");
                continue;
            }
            let (output, _) = sh(&quick(command), dir.path(), Duration::from_secs(60));
            assert!(output.status.success(), "{at}: `{command}` failed: {}", text(&output));
            ran += 1;
            if let Some(simulated) = on_simulator(command) {
                let (output, _) = sh(&quick(&simulated), dir.path(), Duration::from_secs(60));
                let said = text(&output);
                assert!(output.status.success(), "{at}: `{simulated}` failed: {said}");
                assert!(
                    said.contains("simulated PMU `sapphirerapids`"),
                    "{at}: `{simulated}`: {said}"
                );
                ran += 1;
            }
        }
    }
    assert!(ran >= 15, "only {ran} README lines ran");
}

#[test]
fn every_readme_output_block_has_the_shape_tmetric_prints() {
    let (blocks, _) = split(&readme());
    let dir = scratch();
    let mut compared = 0;
    for block in blocks.iter().filter(|b| b.lang.is_empty()) {
        let command = spans(&block.before)
            .into_iter()
            .rev()
            .find(|s| s.starts_with("tmetric "))
            .unwrap_or_else(|| {
                panic!(
                    "README.md:{}: an output block without a `tmetric` command before it",
                    block.line
                )
            });
        let (output, _) = sh(&quick(&command), dir.path(), Duration::from_secs(60));
        // Simulated values are compared exactly, except serve's: it prints every digit of
        // a ratio over wall-clock intervals, whose last digits vary from run to run.
        let simulated = command.contains("--pmu-sim") && !command.contains("tmetric serve");
        let got = shapes(&text(&output), !simulated);
        let want = shapes(&block.lines.join("\n"), !simulated);
        let at = format!("README.md:{}: `{command}`", block.line);
        if !simulated
            && has_core_pmu()
            && want.iter().any(|l| l.contains("Performance counter stats"))
        {
            // This VM's counts: with a PMU the events count, so only the frame is the same.
            for line in want.iter().filter(|l| {
                l.contains("Performance counter stats") || l.contains("seconds time elapsed")
            }) {
                assert!(got.contains(line), "{at}: no `{line}` in:\n{}", got.join("\n"));
            }
        } else {
            assert_eq!(got, want, "{at}: the README shows another output than tmetric prints now");
        }
        compared += 1;
    }
    assert!(compared >= 3, "only {compared} output blocks compared");
}

/// The examples of the events table (its second column).
fn event_examples(text: &str) -> Vec<String> {
    let start = text.find("| form | example |").expect("the events table");
    text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            spans(cells.last().unwrap())
        })
        .collect()
}

/// Counts `events` with `-e` (`machine`: on that simulated PMU), all in one run; when that
/// fails, one by one, to name the one that does not count. `tolerate` accepts a failure
/// whose message it recognises.
fn count_each(events: &[&String], machine: Option<&str>, tolerate: &dyn Fn(&str) -> bool) {
    if events.is_empty() {
        return;
    }
    let dir = scratch();
    let run = |list: &str| {
        let sim = machine.map_or(String::new(), |m| format!("--pmu-sim {m} "));
        let (output, _) = sh(
            &format!("tmetric {sim}-e '{list}' -a sleep 0.05"),
            dir.path(),
            Duration::from_secs(60),
        );
        (output.status.success(), text(&output))
    };
    let all: Vec<&str> = events.iter().map(|e| e.as_str()).collect();
    if run(&all.join(",")).0 {
        return;
    }
    for event in all {
        let (ok, said) = run(event);
        assert!(
            ok || tolerate(&said),
            "-e {event} on {}: {said}",
            machine.unwrap_or("this machine")
        );
    }
}

#[test]
fn every_event_form_of_the_readme_counts() {
    let examples = event_examples(&readme());
    assert!(examples.len() >= 30, "{examples:?}");
    let vendor = |e: &str| {
        e.contains('/') || e.starts_with(|c: char| c.is_ascii_uppercase()) && e.contains(['.', '_'])
    };
    let tracepoint = |e: &str| {
        !vendor(e)
            && e.split_once(':').is_some_and(|(s, _)| {
                !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
    };
    let hybrid = |e: &str| e.contains("cpu_core/") || e.contains("cpu_atom/");
    let pick = |keep: &dyn Fn(&str) -> bool| -> Vec<&String> {
        examples.iter().filter(|e| keep(e)).collect()
    };
    let never = |_: &str| false;
    count_each(&pick(&|e| !tracepoint(e) && !hybrid(e)), Some("sapphirerapids"), &never);
    count_each(&pick(&|e| hybrid(e)), Some("alderlake"), &never);
    // Here: all but vendor events; tracepoints need a readable tracefs (root, or tracefs
    // permissions).
    count_each(&pick(&|e| !vendor(e)), None, &|said| said.contains("tracefs"));
}

#[test]
fn every_command_the_readme_quotes_names_flags_that_exist() {
    let text = readme();
    let (_, prose) = split(&text);
    let dir = scratch();
    let mut checked = 0;
    for (n, line) in &prose {
        for span in spans(line).into_iter().filter(|s| s.starts_with("tmetric ")) {
            // The tmetric command of a pipeline, before any redirection.
            let span = span.split(" | ").next().unwrap_or_default().to_string();
            let span = span.split(" 2>").next().unwrap_or_default().to_string();
            let words: Vec<&str> = span.split_whitespace().collect();
            let sub = subcommand(&words);
            let known = flags_of(&sub);
            for flag in named_flags(&span) {
                assert!(
                    flag_exists(&flag, &known),
                    "README.md:{n}: `{span}`: tmetric {sub} has no {flag}"
                );
            }
            checked += 1;
            let args: Vec<&str> = words[1..].iter().map(|w| w.trim_matches('\'')).collect();
            if tmetric::parse_check(&args).is_err() {
                // A synopsis (`[-a | -C CPUS]`, `METRIC`) or a bare reference.
                continue;
            }
            let (output, interrupted) = sh(&quick(&span), dir.path(), Duration::from_secs(3));
            let said = self::text(&output);
            assert!(!said.contains("Usage:"), "README.md:{n}: `{span}` is a usage error: {said}");
            assert!(
                interrupted || output.status.code().is_some_and(|c| c != 101),
                "README.md:{n}: `{span}` crashed: {said}"
            );
        }
    }
    assert!(checked >= 15, "only {checked} quoted commands");
}

#[test]
fn every_subcommand_of_the_commands_table_has_a_line_to_try() {
    let text = readme();
    let table = &text[text.find("| command | what it does |").expect("the commands table")..];
    let rows: Vec<&str> = table.lines().skip(2).take_while(|l| l.starts_with('|')).collect();
    let (blocks, _) = split(&text);
    let tried = blocks
        .iter()
        .find(|b| b.lang == "sh" && b.before.contains("Each command once"))
        .expect("the block of commands to try after the table");
    for row in rows {
        let synopsis = spans(row).into_iter().next().unwrap();
        let words: Vec<&str> = synopsis.split_whitespace().collect();
        let sub = subcommand(&words);
        // `eval` has three forms: each has its own line.
        let form = named_flags(&synopsis)
            .into_iter()
            .find(|f| ["--counts", "--from-perf", "--expr"].contains(&f.as_str()));
        let found = tried.lines.iter().any(|l| {
            l.split(['|', '&']).any(|part| {
                let w: Vec<&str> = part.split_whitespace().collect();
                w.first() == Some(&"tmetric")
                    && subcommand(&w) == sub
                    && form.as_ref().is_none_or(|f| w.contains(&f.as_str()))
            })
        });
        assert!(found, "no line to try `{synopsis}`");
    }
}

/// `tmetric --help` and every subcommand's `--help`.
fn help_texts() -> Vec<(String, String)> {
    let bin = env!("CARGO_BIN_EXE_tmetric");
    let mut texts = Vec::new();
    let top = Command::new(bin).arg("--help").output().unwrap();
    texts.push((String::new(), String::from_utf8(top.stdout).unwrap()));
    for (sub, _) in tmetric::flags() {
        let out = Command::new(bin).args([sub.as_str(), "--help"]).output().unwrap();
        assert!(out.status.success(), "{sub} --help");
        texts.push((sub, String::from_utf8(out.stdout).unwrap()));
    }
    texts
}

#[test]
fn every_flag_and_command_the_help_texts_mention_exists() {
    let mut all: Vec<String> = tmetric::flags().into_iter().flat_map(|(_, f)| f).collect();
    // The top level's own.
    all.extend(["-V", "--version"].map(String::from));
    let mut examples = 0;
    for (sub, help) in help_texts() {
        let own = if sub.is_empty() { all.clone() } else { flags_of(&sub) };
        for line in help.lines() {
            // `tmetric SUB ...`, in examples and prose: SUB exists and has the flags named;
            // a whole example line parses.
            if let Some(at) = line.find("tmetric ") {
                // Up to the end of the quote, or an aligned comment after two spaces.
                let command: String =
                    line[at..].split('`').next().unwrap().split("  ").next().unwrap().to_string();
                let words: Vec<&str> = command.split_whitespace().collect();
                let target = flags_of(&subcommand(&words));
                // Up to a pipe or `&&`: what follows is another program.
                let own_part = command.split(" | ").next().unwrap().split(" && ").next().unwrap();
                for flag in named_flags(own_part) {
                    assert!(flag_exists(&flag, &target), "{sub} --help: `{command}`: no {flag}");
                }
                if line.trim_start().starts_with("tmetric ") {
                    let args: Vec<&str> =
                        own_part.split_whitespace().skip(1).map(|w| w.trim_matches('\'')).collect();
                    tmetric::parse_check(&args)
                        .unwrap_or_else(|e| panic!("{sub} --help example `{own_part}`: {e}"));
                    examples += 1;
                }
            }
            // Every other flag mentioned: this command's, or another's where it says so.
            for flag in named_flags(line) {
                assert!(
                    flag_exists(&flag, &own) || flag_exists(&flag, &all),
                    "{sub} --help mentions {flag}, which no command has: {line}"
                );
            }
        }
    }
    assert!(examples >= 10, "only {examples} help examples");
}

#[test]
fn the_checks_catch_what_they_are_for() {
    // The flags of synopses, as the checks read them.
    assert_eq!(
        named_flags(
            "tmetric [stat] [-a | -C CPUS] [-d[d[d]]] [--per-cache[=L] | --per-*] [-- cmd]"
        ),
        ["-a", "-C", "-d", "--per-cache", "--per-*"]
    );
    let stat = flags_of("stat");
    assert!(flag_exists("--per-*", &stat) && flag_exists("-C", &stat));
    // What `stat --help` once named: `tmetric plan --list-sim` does not exist.
    assert!(!flag_exists("--list-sim", &flags_of("plan")));
    assert!(tmetric::parse_check(&["plan", "-M", "TopdownL1", "--list-sim"]).is_err());
    assert!(tmetric::parse_check(&["-a", "sleep", "1"]).is_ok());
    // Shapes: numbers and column widths do not matter, words and lines do.
    assert_eq!(
        shapes("\n   2,010.48 msec cpu-clock   #  2.000 CPUs utilized\n\n", true),
        [" N msec cpu-clock # N CPUs utilized"]
    );
    assert_eq!(shape("  13.332 K/sec", true), " N /sec");
    assert_eq!(
        shapes("tma_retiring   40.0 %\n  1.00 seconds time elapsed", false),
        ["tma_retiring 40.0 %", " N seconds time elapsed"]
    );
    assert_eq!(
        on_simulator("tmetric -e cycles sleep 1").as_deref(),
        Some("tmetric --pmu-sim sapphirerapids -e cycles sleep 1")
    );
    assert_eq!(on_simulator("tmetric plan -M X --model icelake"), None);
    assert_eq!(on_simulator("tmetric describe X"), None);
}

/// A subcommand's help leads with the line `tmetric --help` lists it with. The two are written
/// twice (the subcommand's flags, with its own about, are added only when it is used).
#[test]
fn each_subcommands_help_leads_with_its_line_in_the_listing() {
    let texts = help_texts();
    let top = &texts[0].1;
    for (sub, help) in &texts[1..] {
        let listed = top
            .lines()
            .find_map(|l| l.trim_start().strip_prefix(sub.as_str())?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("`tmetric --help` does not list {sub}"));
        assert_eq!(help.lines().next(), Some(listed.trim()), "{sub} --help");
    }
}
