//! `tmetric plan --pmu-sim` plans the groups `stat --pmu-sim` opens, and `plan --sysfs` needs
//! its tree.

use crate::support::{stderr, tmetric};

/// The hardware groups `tmetric stat -v` opened, as sorted sets of event names.
fn stat_groups(text: &str, hardware: &std::collections::BTreeSet<String>) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = text
        .lines()
        .filter_map(|l| l.split_once("group ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_once(": {").map(|(_, g)| g.trim_end_matches('}')))
        .map(|g| {
            // `cpu/X,cmask=1/` holds commas: pieces join until their slashes pair up.
            let mut names: Vec<String> = Vec::new();
            let mut open = false;
            for piece in g.split(',') {
                match names.last_mut() {
                    Some(last) if open => {
                        last.push(',');
                        last.push_str(piece);
                    }
                    _ => names.push(piece.to_string()),
                }
                if piece.matches('/').count() % 2 == 1 {
                    open = !open;
                }
            }
            names.sort();
            names
        })
        .filter(|g| g.iter().any(|n| hardware.contains(n)))
        .collect();
    groups.sort();
    groups
}

/// The groups `tmetric plan --json` schedules, as sorted sets of event names, and every
/// hardware event's name.
fn plan_groups(doc: &serde_json::Value) -> (Vec<Vec<String>>, std::collections::BTreeSet<String>) {
    let names: Vec<String> = doc["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["name"].as_str().expect("name").to_string())
        .collect();
    let mut groups: Vec<Vec<String>> = doc["schedule"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            let mut members: Vec<String> = g["events"]
                .as_array()
                .expect("events")
                .iter()
                .map(|i| names[i.as_u64().expect("index") as usize].clone())
                .collect();
            members.sort();
            members
        })
        .collect();
    groups.sort();
    (groups, names.into_iter().collect())
}

/// `tmetric plan --pmu-sim MODEL` plans what `tmetric stat --pmu-sim MODEL` opens: the same
/// literals and probes (a `has_event()` the machine answers no to, `#SMT_on`, `#has_pmem`),
/// so the same groups. `cargo test` compares a few groups per machine (the ones with probes
/// and literals among them); `TMETRIC_SIM_SWEEP=1` every metric group of every machine.
#[test]
fn plan_opens_what_stat_opens_on_every_simulated_machine() {
    let sweep = std::env::var_os("TMETRIC_SIM_SWEEP").is_some();
    let (mut compared, mut differing) = (0, Vec::new());
    for name in tmetric_sim::Machine::names() {
        let machine = tmetric_sim::Machine::named(name).expect("machine");
        let model = tmetric_catalog::model(&machine.catalogue_model).expect("model");
        let mut groups: Vec<String> =
            model.metric_group_names().into_iter().map(String::from).collect();
        if !sweep {
            // One group per machine: SPR's and SKX's `Summary` hold `has_event()` and
            // `#SMT_on`-dependent metrics.
            let keep = match *name {
                "sapphirerapids" | "skylakex" => "Summary",
                "icelake" => "TopdownL2",
                "meteorlake" => "TopdownL4",
                "amdzen4" => "PipelineL2",
                _ => "TopdownL1",
            };
            groups.retain(|g| g == keep);
        }
        for group in groups {
            let out = tmetric(&["plan", "--pmu-sim", name, "-M", &group, "--json"]);
            if !out.status.success() {
                continue;
            }
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("plan --json");
            let (planned, hardware) = plan_groups(&doc);
            let out = tmetric(&["--pmu-sim", name, "-M", &group, "-a", "-v", "sleep", "0.01"]);
            let text = stderr(&out);
            assert!(out.status.success(), "{name} {group}: {text}");
            let opened = stat_groups(&text, &hardware);
            compared += 1;
            if planned != opened {
                differing.push(format!("{name} {group}:\n  plan {planned:?}\n  stat {opened:?}"));
            }
        }
    }
    assert!(compared >= if sweep { 500 } else { 8 }, "{compared} groups compared");
    assert!(
        differing.is_empty(),
        "{} of {compared} differ:\n{}",
        differing.len(),
        differing.join("\n")
    );
    eprintln!("{compared} metric groups planned and opened alike");
}

/// `tmetric plan --sysfs` needs a sysfs tree: a missing one is an error that names it, not
/// a plan for this machine.
#[test]
fn plan_refuses_a_missing_sysfs_tree() {
    let out = tmetric(&["plan", "--sysfs", "/nonexistent/sys", "-M", "TopdownL1"]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.contains(
            "--sysfs /nonexistent/sys: cannot read /nonexistent/sys/bus/event_source/devices"
        ),
        "{text}"
    );
    assert!(out.stdout.is_empty());
}
