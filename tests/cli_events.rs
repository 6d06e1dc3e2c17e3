//! `-e` as perf 6.12 reads it, run as the binary: the event forms perf users type
//! (vendor names bare and in `pmu/.../`, hybrid core PMUs, raw `rNNN`, group modifiers,
//! `--cputype`), the checks of perf's `tests/shell/stat.sh` that apply on simulated machines
//! (test_topdown_groups, test_topdown_weak_groups, test_stat_repeat_weak_groups, test_cputype,
//! test_hybrid's one-cycles-event-per-core-PMU), user groups with topdown events (
//! item 1), located errors, and perf's software aliases on this machine for real.

use crate::support::{check, ok, stderr, tmetric};

/// `(count, name)` of each counted row of `-x,` output (`<not supported>` rows have no count).
fn rows(err: &str) -> Vec<(Option<f64>, String)> {
    err.lines()
        .filter(|l| l.contains(',') && !l.starts_with('#') && !l.starts_with("tmetric:"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().ok(), f.get(2).unwrap_or(&"").to_string())
        })
        .collect()
}

fn counted(args: &[&str]) -> Vec<(f64, String)> {
    let out = ok(args);
    rows(&stderr(&out))
        .into_iter()
        .map(|(c, n)| (c.unwrap_or_else(|| panic!("{n} not counted: {}", stderr(&out))), n))
        .collect()
}

fn names(rows: &[(f64, String)]) -> Vec<&str> {
    rows.iter().map(|(_, n)| n.as_str()).collect()
}

#[test]
fn the_event_forms_issue_21_found_refused_are_counted() {
    let spr = ["--pmu-sim", "sapphirerapids", "-x,", "-a"];
    let adl = ["--pmu-sim", "alderlake", "-x,", "-a"];
    let run = |machine: &[&str], extra: &[&str]| {
        let mut args = machine.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["sleep", "0.05"]);
        counted(&args)
    };
    let inst = run(&spr, &["-e", "INST_RETIRED.ANY,cpu/INST_RETIRED.ANY/,instructions"]);
    assert_eq!(names(&inst), ["INST_RETIRED.ANY", "cpu/INST_RETIRED.ANY/", "instructions"]);
    // The vendor encoding and the generic event count the same thing on the simulator.
    assert!((inst[0].0 - inst[2].0).abs() / inst[2].0 < 0.05, "{inst:?}");
    assert!(inst.iter().all(|(c, _)| *c > 0.0));
    let raw = run(&spr, &["-e", "r100003c"]);
    assert_eq!(names(&raw), ["r100003c"]);
    let user = run(&spr, &["-e", "{cycles,instructions}:u"]);
    assert_eq!(names(&user), ["cycles", "instructions"]);
    let core = run(&adl, &["-e", "cpu_core/cycles/"]);
    assert_eq!(names(&core), ["cpu_core/cycles/"]);
    let atom = run(&adl, &["--cputype", "cpu_atom", "-e", "instructions,INST_RETIRED.ANY"]);
    assert_eq!(names(&atom), ["cpu_atom/instructions/", "cpu_atom/INST_RETIRED.ANY/"]);
    let short = run(&adl, &["--cputype", "core", "-e", "instructions"]);
    assert_eq!(names(&short), ["cpu_core/instructions/"]);
}

#[test]
fn hybrid_legacy_events_open_on_each_core_pmu() {
    let both = counted(&[
        "--pmu-sim",
        "alderlake",
        "-x,",
        "-a",
        "-e",
        "cycles,L1-dcache-loads,cs",
        "sleep",
        "0.05",
    ]);
    assert_eq!(
        names(&both),
        [
            "cpu_atom/cycles/",
            "cpu_core/cycles/",
            "cpu_atom/L1-dcache-loads/",
            "cpu_core/L1-dcache-loads/",
            "cs"
        ]
    );
    // E-cores run too: both core types count.
    assert!(both[..4].iter().all(|(c, _)| *c > 0.0), "{both:?}");
    // perf's test_hybrid: one `/cpu-cycles/` line per core PMU (two in this tree).
    let out = ok(&["--pmu-sim", "alderlake", "-a", "-e", "cpu-cycles", "sleep", "0.05"]);
    let text = stderr(&out);
    let lines = text.lines().filter(|l| l.contains("/cpu-cycles/")).count();
    assert_eq!(lines, 2, "{text}");
}

/// perf 6.12's `tests/shell/stat.sh` test_topdown_groups, test_topdown_weak_groups and
/// test_stat_repeat_weak_groups with tmetric as `perf stat` on simulated Sapphire Rapids.
#[test]
fn perfs_topdown_and_weak_group_tests_pass_on_sapphire_rapids() {
    let sim = |extra: &[&str]| {
        let mut args = vec!["--pmu-sim", "sapphirerapids"];
        args.extend_from_slice(extra);
        tmetric(&args)
    };
    for list in ["{slots,topdown-retiring}", "{topdown-retiring,slots}"] {
        let out = sim(&["-e", list, "true"]);
        let text = stderr(&out);
        assert!(out.status.success() && !text.contains("<not supported>"), "{list}: {text}");
        let table = &text[text.find("Performance counter stats").unwrap()..];
        let slots = table.find("slots").unwrap();
        assert!(slots < table.find("topdown-retiring").unwrap(), "slots leads: {text}");
    }
    // test_topdown_weak_groups (without --no-merge, which `perf stat` has and `tmetric stat`
    // does not yet).
    let ok_grouping = "{slots,topdown-bad-spec,topdown-be-bound,topdown-fe-bound,topdown-retiring},branch-instructions,branch-misses,bus-cycles,cache-misses,cache-references,cpu-cycles,instructions,mem-loads,mem-stores,ref-cycles,cache-misses,cache-references";
    assert!(sim(&["-e", ok_grouping, "true"]).status.success());
    let needs_break = "{slots,topdown-bad-spec,topdown-be-bound,topdown-fe-bound,topdown-retiring,branch-instructions,branch-misses,bus-cycles,cache-misses,cache-references,cpu-cycles,instructions,mem-loads,mem-stores,ref-cycles,cache-misses,cache-references}:W";
    let out = sim(&["-e", needs_break, "true"]);
    let text = stderr(&out);
    assert!(out.status.success() && !text.contains("<not supported>"), "{text}");
    assert!(
        text.contains("slots, topdown-bad-spec, topdown-be-bound, topdown-fe-bound, topdown-retiring stayed together behind their `slots` leader"),
        "{text}"
    );
    assert!(!text.contains("multiplexed") && !text.contains("out of range"), "{text}");
    // test_stat_repeat_weak_groups.
    let tens = "{cycles,cycles,cycles,cycles,cycles,cycles,cycles,cycles,cycles,cycles}";
    assert!(stderr(&sim(&["-e", tens, "true"])).contains("seconds time elapsed"));
    assert!(sim(&["-r2", "-e", &format!("{tens}:W"), "true"]).status.success());
}

/// perf 6.12's `tests/shell/stat.sh` test_cputype on both kinds of simulated machine: a bogus
/// type fails; the core PMU found by `-e PMU/instructions/` counts with `--cputype PMU`.
#[test]
fn perfs_cputype_test_passes_on_simulated_machines() {
    for (machine, pmu) in [("sapphirerapids", "cpu"), ("alderlake", "cpu_atom")] {
        let bogus = check(
            &["--pmu-sim", machine, "--cputype=123", "-e", "instructions", "true"],
            &format!("cli_events__bogus_cputype_{machine}"),
        );
        assert_eq!(bogus.status.code(), Some(2), "{machine}");
        // The test looks for `cpu` first: on the hybrid it is not a PMU.
        let cpu = tmetric(&["--pmu-sim", machine, "-e", "cpu/instructions/", "true"]);
        assert_eq!(cpu.status.success(), pmu == "cpu", "{machine}: {}", stderr(&cpu));
        ok(&["--pmu-sim", machine, "-e", &format!("{pmu}/instructions/"), "true"]);
        let out =
            ok(&["--pmu-sim", machine, &format!("--cputype={pmu}"), "-e", "instructions", "true"]);
        assert!(stderr(&out).contains("instructions"), "{}", stderr(&out));
    }
}

#[test]
fn a_lone_topdown_event_says_it_needs_slots() {
    let out = tmetric(&["--pmu-sim", "sapphirerapids", "-e", "topdown-retiring,cycles", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("topdown-retiring: <not supported>: EINVAL: a topdown metric event is counted only in a group led by `slots` (write `{slots,topdown-retiring}`)"),
        "{text}"
    );
    assert!(!text.contains("out of range"), "{text}");
    // Lone topdown events are gathered behind `slots` as perf does.
    let gathered = counted(&[
        "--pmu-sim",
        "sapphirerapids",
        "-x,",
        "-e",
        "slots,cycles,topdown-retiring",
        "true",
    ]);
    assert_eq!(names(&gathered), ["slots", "topdown-retiring", "cycles"]);
}

/// Each error quotes the list and points at the fault with a caret, and exits 2.
#[test]
fn event_errors_show_the_list_with_a_caret_and_exit_2() {
    let cases: [(&[&str], &str); 5] = [
        (&["-e", "cycles,instructions:uu", "true"], "cli_events__duplicate_modifier"),
        (&["-e", "cs,no-such-event", "true"], "cli_events__unknown_event"),
        (&["-e", "{cs,faults", "true"], "cli_events__group_never_closed"),
        (&["-e", "cs:W", "true"], "cli_events__weak_modifier_outside_group"),
        (
            &["--pmu-sim", "sapphirerapids", "-e", "cpu/event=0x3c,umask=0x100/", "true"],
            "cli_events__umask_too_wide",
        ),
    ];
    for (args, expect) in cases {
        assert_eq!(check(args, expect).status.code(), Some(2), "{expect}");
    }
}

/// Software events and perf's aliases count for real on this machine.
#[test]
fn perfs_software_aliases_count_for_real() {
    let rows = counted(&[
        "-x,",
        "-e",
        "cs,faults,migrations,cpu-clock,{task-clock,page-faults}:u",
        "true",
    ]);
    assert_eq!(
        names(&rows),
        ["cs", "faults", "migrations", "cpu-clock", "task-clock", "page-faults"]
    );
    let faults = rows[1].0;
    assert!(faults > 0.0, "a process faults in its pages: {rows:?}");
    let clock = rows[3].0;
    assert!(clock > 0.0, "{rows:?}");
}

#[test]
fn record_reads_the_same_grammar() {
    let scratch = tempfile::Builder::new().prefix("tmetric-cli-events-").tempdir().unwrap();
    let dir = scratch.path();
    let file = dir.join("r.jsonl");
    let file = file.to_str().unwrap();
    ok(&[
        "record",
        "-o",
        file,
        "--pmu-sim",
        "alderlake",
        "-a",
        "-e",
        "INST_RETIRED.ANY",
        "sleep",
        "0.02",
    ]);
    let out = ok(&["report", "-i", file]);
    let text = crate::support::stdout(&out) + &stderr(&out);
    assert!(
        text.contains("cpu_atom/INST_RETIRED.ANY/") && text.contains("cpu_core/INST_RETIRED.ANY/"),
        "{text}"
    );
}
