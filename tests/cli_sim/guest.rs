//! Guests whose hypervisor exposes no virtual PMU (`--pmu-sim emeraldrapids-guest`,
//! `amdzen4-guest`: the host's cpuid, no core, uncore or RAPL PMU, `hypervisor` in cpuinfo),
//! as cloud guests and microVMs are: the default run prints what perf prints there (its
//! software events and `<not supported>` rows), at most one short note, and no sentence that
//! says a metric is defined elsewhere when this machine's model defines it.

use crate::support::{stderr, tmetric};

/// The lines after the footer's `seconds sys` (the default layout's block of notes).
fn block(text: &str) -> Vec<&str> {
    let after = text.split(" seconds sys").nth(1).unwrap_or_default();
    after.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[test]
fn the_default_run_on_a_guest_is_perfs_with_one_short_note() {
    for guest in ["emeraldrapids-guest", "amdzen4-guest"] {
        let out = tmetric(&["--pmu-sim", guest, "sleep", "0.05"]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        // perf's default events: the software ones counted, the hardware ones not supported.
        for event in ["task-clock", "context-switches", "cpu-migrations", "page-faults"] {
            let line = text.lines().find(|l| l.contains(&format!(" {event} "))).expect(&text);
            assert!(!line.contains("<not"), "{line}");
        }
        for event in ["cycles", "instructions", "branches", "branch-misses"] {
            let line = text
                .lines()
                .find(|l| l.ends_with(&format!(" {event}")) || l.contains(&format!(" {event} ")))
                .expect(&text);
            assert!(line.trim_start().starts_with("<not supported>"), "{line}");
        }
        // perf's `Default` metric group (TopdownL1 on Emerald Rapids) is skipped without a
        // word, as perf skips it; the one note says why the hardware events are missing.
        assert!(!text.contains("TopdownL1") && !text.contains("tma_"), "{guest}: {text}");
        let notes = block(&text);
        assert_eq!(notes.len(), 1, "{guest}: {text}");
        assert!(
            notes[0].starts_with("cycles, instructions, branches, branch-misses: <not supported>")
                && notes[0].contains("the hypervisor exposes no virtual PMU"),
            "{guest}: {text}"
        );
        // Only the title and the note say more than perf: nothing before the counts but the
        // simulator's own line.
        let before = text.split(" Performance counter stats").next().unwrap();
        let said: Vec<&str> = before.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(said.len(), 1, "{guest}: {text}");
        assert!(said[0].contains("simulated PMU"), "{text}");
        for circular in ["is defined for", "computed without", "this machine is"] {
            assert!(!text.contains(circular), "{guest}: {circular}: {text}");
        }
    }
}

/// `-M` of this machine's own model on a guest: one warning that says why and what to do,
/// never that the metrics are defined elsewhere; `tma_bad_speculation` (a `max(..., 0)` of
/// inputs none of which counted) is not said to be computed without its inputs.
#[test]
fn model_metrics_on_a_guest_say_why_without_circular_sentences() {
    for (guest, group, model) in [
        ("emeraldrapids-guest", "TopdownL1", "x86/emeraldrapids"),
        ("amdzen4-guest", "PipelineL1", "x86/amdzen4"),
    ] {
        for layout in [&[][..], &["-v"][..], &["-x,", "-v"][..], &["-j", "--full-metrics"][..]] {
            let mut args = vec!["--pmu-sim", guest, "-M", group];
            args.extend_from_slice(layout);
            args.extend(["sleep", "0.05"]);
            let out = tmetric(&args);
            let text = stderr(&out);
            assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
            assert_eq!(text.matches("cannot be counted here").count(), 1, "{args:?}: {text}");
            assert!(text.contains(&format!("of {model} cannot be counted here")), "{text}");
            for circular in ["is defined for", "computed without", "this machine is"] {
                assert!(!text.contains(circular), "{args:?}: {circular}: {text}");
            }
        }
        let text = stderr(&tmetric(&["--pmu-sim", guest, "-M", group, "sleep", "0.05"]));
        // The default layout's block: one line for the rows; the metrics' `nan` follows
        // from them and is said with -v only.
        assert_eq!(block(&text).len(), 1, "{text}");
        let verbose = stderr(&tmetric(&["--pmu-sim", guest, "-M", group, "-v", "sleep", "0.05"]));
        assert!(block(&verbose).len() > 1, "{verbose}");
    }
    let text = stderr(&tmetric(&[
        "--pmu-sim",
        "emeraldrapids-guest",
        "-M",
        "tma_bad_speculation",
        "-v",
        "sleep",
        "0.05",
    ]));
    assert!(
        text.contains("tma_bad_speculation: nan: needs topdown-be-bound, topdown-fe-bound"),
        "{text}"
    );
}

/// CSV and JSON on a guest: perf's lines, and the simulator's mark where perf's readers skip
/// it (a `#` line, a `"simulated-pmu"` object).
#[test]
fn csv_and_json_on_a_guest_hold_perfs_lines_and_the_simulators_mark() {
    let out = tmetric(&["--pmu-sim", "emeraldrapids-guest", "-x,", "sleep", "0.05"]);
    let text = stderr(&out);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "# simulated PMU 'emeraldrapids-guest': every count comes from a simulator, not hardware"
        ),
        "{text}"
    );
    let rest: Vec<&str> = lines.collect();
    assert_eq!(rest.len(), 8, "perf's eight default events: {text}");
    assert!(rest.iter().all(|l| l.matches(',').count() == 6), "{text}");
    let out = tmetric(&["--pmu-sim", "emeraldrapids-guest", "-j", "sleep", "0.05"]);
    let text = stderr(&out);
    let objects: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect(l)).collect();
    assert_eq!(objects[0], serde_json::json!({"simulated-pmu": "emeraldrapids-guest"}));
    assert_eq!(objects.len(), 9, "{text}");
    assert!(objects[1..].iter().all(|o| o["event"].is_string()), "{text}");
}
