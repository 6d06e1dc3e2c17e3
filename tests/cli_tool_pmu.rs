//! perf 7.x's tool PMU under `--perf-version 7.2`: `-e tool/num_cpus/` and the bare names
//! print the values perf 7.2's `tool_pmu__read_event` reads, checked against this machine's
//! `/sys/devices/system/cpu` read here; `list` shows the events as perf 7.2's `list` prints
//! them, checked against the imported perf 7.2 `tool.json`; perf 6.12 (the default) refuses
//! them as before.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{stderr, stdout};

/// `tmetric ARGS` in the C locale (no digit grouping), with `env` set.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tmetric"));
    command.args(args).env("LC_ALL", "C").env_remove("COLUMNS");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("the tmetric binary runs")
}

fn cpu_dir() -> PathBuf {
    PathBuf::from("/sys/devices/system/cpu")
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|t| t.trim().to_string())
}

/// `0-3,6` as CPU numbers.
fn cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => cpus.extend(lo.parse::<u32>().unwrap()..=hi.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// How many different texts a topology file has over the online CPUs (perf's `cputopo.c`
/// counts cores, dies and packages so).
fn distinct(online: &[u32], file: &str) -> usize {
    let texts: BTreeSet<String> = online
        .iter()
        .filter_map(|cpu| read(&cpu_dir().join(format!("cpu{cpu}/topology/{file}"))))
        .collect();
    texts.len()
}

/// The values perf 7.2 prints for the tool PMU's facts on this machine with `target` (no flag:
/// per task; `-a`; `-C 0`), from sysfs and cpuinfo read here.
fn expected(target: &[&str]) -> Vec<(&'static str, u64)> {
    let all = target == ["-a"];
    let on_cpus = !target.is_empty();
    let online = cpu_list(&read(&cpu_dir().join("online")).unwrap());
    let smt_on = match read(&cpu_dir().join("smt/active")) {
        Some(active) => active == "1",
        None => online.iter().any(|cpu| {
            let list = read(&cpu_dir().join(format!("cpu{cpu}/topology/core_cpus_list")));
            list.is_some_and(|l| cpu_list(&l).len() > 1)
        }),
    };
    let dies =
        if cfg!(target_arch = "x86_64") && cpu_dir().join("cpu0/topology/die_cpus_list").exists() {
            distinct(&online, "die_cpus_list")
        } else {
            0
        };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let intel = cpuinfo.lines().any(|l| l.starts_with("vendor_id") && l.contains("Intel"));
    let mut facts = vec![
        ("has_pmem", u64::from(Path::new("/sys/firmware/acpi/tables/NFIT").exists())),
        ("num_cores", distinct(&online, "core_cpus_list") as u64),
        // A per-task event may run on any CPU: the tool PMU's, the online ones; `-a` and
        // `-C` leave perf one CPU to read it on.
        ("num_cpus", if on_cpus { 1 } else { online.len() as u64 }),
        ("num_cpus_online", if on_cpus { 1 } else { online.len() as u64 }),
        ("num_dies", dies as u64),
        ("num_packages", distinct(&online, "package_cpus_list") as u64),
        ("smt_on", u64::from(smt_on)),
        // Whole cores only with `-a` (perf stat's `system_wide`), which covers every sibling.
        ("core_wide", u64::from(all)),
        ("target_cpu", u64::from(on_cpus)),
    ];
    // perf's x86 `arch_get_tsc_freq` is 0 on every CPU but Intel's (whose figure needs
    // CPUID, not checked here).
    if cfg!(target_arch = "x86_64") && !intel {
        facts.push(("system_tsc_freq", 0));
    }
    facts
}

/// The printed (count, name) of each counted line, and whether any unit column held text.
fn counted(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| l.starts_with("  ") && !l.contains("seconds"))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words.len() >= 2).then(|| (words[0].to_string(), words[1..].join(" ")))
        })
        .collect()
}

/// perf 7.2's facts, bare and as `tool/EVENT/`, print this machine's values with no unit
/// (perf's `%18s` count, an empty unit column, the name as written); the three times too.
#[test]
fn tool_pmu_facts_print_this_machines_values() {
    for target in [&[][..], &["-a"], &["-C", "0"]] {
        let facts = expected(target);
        let names: Vec<String> = facts
            .iter()
            .enumerate()
            .map(
                |(i, (name, _))| {
                    if i % 2 == 0 { format!("tool/{name}/") } else { name.to_string() }
                },
            )
            .collect();
        let list = format!("{},duration_time,user_time", names.join(","));
        let mut args = vec!["--perf-version", "7.2", "stat"];
        args.extend(target);
        args.extend(["-e", &list, "sleep", "0.05"]);
        let out = run(&args, &[]);
        let text = stderr(&out);
        assert!(out.status.success(), "{args:?}: {text}");
        let rows = counted(&text);
        for ((_, value), name) in facts.iter().zip(&names) {
            let line = format!("{value:>18}      {name}");
            assert!(
                text.lines().any(|l| l.trim_end() == line),
                "{target:?}: no line `{line}` in\n{text}"
            );
        }
        for time in ["duration_time", "user_time"] {
            let row = rows.iter().find(|(_, n)| n == time).unwrap_or_else(|| panic!("{text}"));
            assert!(row.0.parse::<u64>().is_ok(), "{time} has a unit or no count: {text}");
        }
        let duration: u64 =
            rows.iter().find(|(_, n)| n == "duration_time").unwrap().0.parse().unwrap();
        assert!(duration >= 50_000_000, "sleep 0.05 lasted {duration} ns: {text}");
    }
}

/// perf 6.12 has no tool PMU: both spellings are refused as before (unknown event, no such
/// PMU), and its own three tool events keep their `ns`.
#[test]
fn perf_6_12_refuses_the_tool_pmu() {
    let out = run(&["stat", "-e", "num_cpus", "true"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("-e num_cpus: unknown event `num_cpus`"), "{}", stderr(&out));
    let out = run(&["stat", "-e", "tool/num_cpus/", "true"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`tool` is neither a PMU"), "{}", stderr(&out));
    let out = run(&["stat", "-e", "duration_time", "true"], &[]);
    let text = stderr(&out);
    assert!(text.lines().any(|l| l.contains(" ns   duration_time")), "{text}");
}

/// perf 7.2's `tool.json`, imported with its vintage: (name, config, description) in file
/// order.
fn tool_json() -> Vec<(String, u64, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("pmu-events/vintage/7.2/common/common/tool.json");
    let json: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json.iter()
        .map(|e| {
            (
                e["EventName"].as_str().unwrap().to_string(),
                e["ConfigCode"].as_str().unwrap().parse().unwrap(),
                e["BriefDescription"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(name, ..)| {
            // perf's `tool_pmu__skip_event` on this architecture.
            (name != "slots" || cfg!(target_arch = "aarch64"))
                && (name != "system_tsc_freq" || cfg!(target_arch = "x86_64"))
        })
        .collect()
}

/// `perf list`'s tool section, built from `tool.json` by perf 7.2's `default_print_event`:
/// sorted by name, `  NAME` then the description and `. Unit: tool` in brackets at column 8,
/// with `--details` the encoding (`tool/config=1/`: jevents' `llx`) at column 8.
fn perf_list_tool_section(details: bool) -> String {
    let mut events = tool_json();
    events.sort();
    let mut text = String::from("\ntool:\n");
    for (name, config, desc) in &events {
        // perf's `wordwrap` writes a comma as the next word's separator and drops the blanks
        // after it (`SMT,if SMT`), wrapping or not.
        let desc = desc.replace(", ", ",");
        text.push_str(&format!("  {name}\n       [{desc}. Unit: tool]\n"));
        if details {
            let config = if *config < 10 { config.to_string() } else { format!("{config:#x}") };
            text.push_str(&format!("        tool/config={config}/\n"));
        }
    }
    text
}

/// `list` under perf 7.2 shows the tool PMU as perf 7.2 does, in every form: plain (with a
/// width that wraps nothing, so the lines are whole), `--details`, JSON's keys and
/// `--raw-dump pmu`'s names (what perf's `stat_all_pmu.sh` counts); perf 6.12's list keeps
/// its three `[Tool event]` lines and no tool section.
#[test]
fn list_shows_the_tool_pmu_as_perf_72() {
    let wide = [("COLUMNS", "1000")];
    for (args, details) in [
        (&["list", "pmu"][..], false),
        (&["list", "pmu", "--details"][..], true),
        (&["list"][..], false),
    ] {
        let mut all = vec!["--perf-version", "7.2"];
        all.extend_from_slice(args);
        let text = stdout(&run(&all, &wide));
        let want = perf_list_tool_section(details);
        assert!(text.contains(&want), "{all:?}: no\n{want}\nin\n{text}");
        assert!(!text.contains("[Tool event]"), "{text}");
    }
    let json = stdout(&run(&["--perf-version", "7.2", "list", "pmu", "-j"], &[]));
    let objects: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|o: &serde_json::Value| o["Unit"] == "tool")
        .collect();
    let mut want = tool_json();
    want.sort();
    assert_eq!(objects.len(), want.len(), "{json}");
    for (object, (name, config, desc)) in objects.iter().zip(&want) {
        assert_eq!(object["EventName"], name.as_str());
        assert_eq!(object["BriefDescription"], desc.as_str());
        assert_eq!(object["Topic"], "tool");
        assert_eq!(object["EventType"], "Kernel PMU event");
        let config = if *config < 10 { config.to_string() } else { format!("{config:#x}") };
        assert_eq!(object["Encoding"], format!("tool/config={config}/").as_str());
    }
    let raw = stdout(&run(&["--perf-version", "7.2", "list", "pmu", "--raw-dump"], &[]));
    let names: Vec<String> = want.iter().map(|(n, ..)| n.clone()).collect();
    assert!(raw.trim_end().ends_with(&names.join(" ")), "{raw}");

    let old = stdout(&run(&["list"], &wide));
    assert!(!old.contains("\ntool:\n"), "{old}");
    for name in ["duration_time", "user_time", "system_time"] {
        assert!(
            old.lines()
                .any(|l| l.starts_with(&format!("  {name} ")) && l.ends_with("[Tool event]"))
        );
    }
    let raw = stdout(&run(&["list", "pmu", "--raw-dump"], &[]));
    assert!(!raw.contains("num_cpus"), "{raw}");
}
