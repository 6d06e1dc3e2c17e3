//! The first hour with tmetric, as a perf user spends it: `--help` shows the `perf stat`
//! form first, bare `tmetric` counts every CPU as bare `perf stat` does, `tmetric list` lists
//! this machine's events and metrics with the model table marking this machine, an event
//! `list` shows either counts with `-e` or says why not, and advice names flags the command
//! it advises takes.

use std::process::{Command, Stdio};

use crate::support::{ok_stdout, stderr, stdout, tmetric};

#[test]
fn help_leads_with_the_perf_stat_form() {
    let help = ok_stdout(&["--help"]);
    let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap();
    assert!(usage.starts_with("Usage: tmetric [stat options] [--] command"), "{help}");
    assert!(help.contains("every CPU until Ctrl-C"), "{help}");
    // The form it shows is the one that works.
    let out = tmetric(&["-e", "task-clock", "--", "true"]);
    assert!(out.status.success() && stderr(&out).contains("task-clock"), "{}", stderr(&out));
}

#[test]
fn bare_tmetric_counts_every_cpu_until_interrupted() {
    let child = Command::new(env!("CARGO_BIN_EXE_tmetric"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = stderr(&out);
    assert!(text.contains("Performance counter stats for 'system wide'"), "{text}");
    // perf's default system-wide events: cpu-clock over every CPU, not a command's task-clock.
    let line = text.lines().find(|l| l.contains("cpu-clock")).expect("cpu-clock");
    let ms: f64 = line.split_whitespace().next().unwrap().replace(',', "").parse().unwrap();
    assert!(ms > 300.0, "{line}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn list_shows_this_machines_events_and_metrics_as_perfs_list_does() {
    let out = tmetric(&["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("List of pre-defined events (to be used in -e or -M):"), "{text}");
    assert!(text.contains("  page-faults OR faults"), "{text}");
    let software = text.lines().find(|l| l.starts_with("  task-clock ")).unwrap();
    assert_eq!(software.find('['), Some(53), "{software}");
    assert!(text.contains("[Tool event]") && text.contains("[Kernel PMU event]"), "{text}");
    // The common metrics at least, whatever the machine: perf's own `CPUs_utilized` in the
    // newest vintage's tables, the default.
    assert!(text.contains("CPUs_utilized"), "{text}");
    assert!(text.contains("`tmetric list models` (this machine: "), "{text}");
    // Every software event it lists counts here.
    for line in text.lines().filter(|l| l.ends_with("[Software event]")) {
        let event = line.split_whitespace().next().unwrap();
        let out = tmetric(&["-e", event, "true"]);
        assert!(out.status.success(), "-e {event}: {}", stderr(&out));
    }
    // The model table marks this machine's model, when it has one.
    let models = ok_stdout(&["list", "models"]);
    let marked: Vec<&str> = models.lines().filter(|l| l.ends_with("<- this machine")).collect();
    let here = text.split("(this machine: ").nth(1).unwrap().split(')').next().unwrap();
    if here.contains('/') {
        assert_eq!(marked.len(), 1, "{models}");
        assert!(marked[0].starts_with(here), "{marked:?} vs {here}");
    } else {
        assert!(marked.is_empty(), "{marked:?}");
    }
}

/// A vendor event that `tmetric list events` shows for this machine's model either counts
/// with `-e` or, on a machine without a core PMU, says why and where it counts: in `stat`
/// and in `serve`, which build their plans alike.
#[test]
fn an_event_list_shows_counts_or_says_why_not() {
    let out = tmetric(&["list", "events", "--json"]);
    if !out.status.success() {
        eprintln!("skipped: no model for this machine: {}", stderr(&out));
        return;
    }
    let first = stdout(&out).lines().next().map(str::to_string).unwrap_or_default();
    let row: serde_json::Value = serde_json::from_str(&first).unwrap();
    let event = row["event"].as_str().unwrap().to_string();
    let run = tmetric(&["-e", &event, "true"]);
    let text = stderr(&run);
    if run.status.success() {
        assert!(text.contains(&event), "{text}");
    } else {
        assert!(!text.contains("unknown event"), "{text}");
        assert!(text.contains("which this machine does not have"), "{text}");
        assert!(text.contains("--pmu-sim "), "{text}");
        let listing = stderr(&tmetric(&["list", "events"]));
        assert!(listing.contains("so -e cannot count these events here"), "{listing}");
        let served = tmetric(&["serve", "--once", "--interval", "100ms", "-e", &event]);
        assert_eq!(stderr(&served), text, "serve says what stat says");
    }
}

#[test]
fn rules_advice_names_flags_rules_takes() {
    // An Intel metric: on a machine whose model lacks it, the advice is a `rules` command.
    let out = tmetric(&["rules", "-M", "tma_dtlb_store"]);
    let text = stderr(&out);
    if out.status.success() {
        return;
    }
    let advice = text.split("; ").last().unwrap();
    assert!(advice.contains("`tmetric rules -M tma_dtlb_store --model x86/"), "{text}");
    assert!(!text.contains("--pmu-sim"), "{text}");
    let model = advice.split("--model ").nth(1).unwrap().trim_end().trim_end_matches('`');
    let ok = tmetric(&["rules", "-M", "tma_dtlb_store", "--model", model]);
    assert!(ok.status.success(), "{}", stderr(&ok));
}

#[test]
fn metric_only_says_what_it_leaves_out() {
    let out = tmetric(&["-e", "task-clock,cs", "--metric-only", "true"]);
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "--metric-only prints metrics only, and task-clock, cs have no metric column"
        ),
        "{text}"
    );
    // The note follows perf's lines, never among CSV ones without -v.
    let csv = stderr(&tmetric(&["-e", "task-clock,cs", "--metric-only", "-x,", "true"]));
    assert!(!csv.contains("--metric-only prints"), "{csv}");
    // With metrics selected, nothing is said: their inputs' counts are not columns in perf
    // either.
    let metrics = stderr(&tmetric(&["-M", "Software", "--metric-only", "true"]));
    assert!(!metrics.contains("--metric-only prints"), "{metrics}");
    assert!(metrics.contains("page_faults_per_sec"), "{metrics}");
}
