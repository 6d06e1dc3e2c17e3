//! A `stat` run probes its machine once (`tmetric_engine::Host`): under strace, every sysfs
//! and procfs file and directory it reads is opened once, on the real machine and on a
//! simulated one. Skipped, saying so, where strace is missing or cannot trace.

use std::collections::BTreeMap;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tmetric");

/// The files and directories `args` opens for reading under a sysfs or procfs tree, with how
/// often; `None` when strace cannot run here.
fn reads(args: &[&str]) -> Option<BTreeMap<String, usize>> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("trace");
    let traced = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=openat", "-o"])
        .arg(&log)
        .arg(BIN)
        .args(args)
        .output();
    let output = match traced {
        Ok(output) => output,
        Err(e) => {
            eprintln!("skipped: strace does not run here ({e})");
            return None;
        }
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    if !text.contains("openat(") {
        // No ptrace in this container: strace says so and traces nothing.
        eprintln!(
            "skipped: strace traced nothing here: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    let mut counts = BTreeMap::new();
    // The run's reads start at the probe's first, `cpuinfo`: before it `--pmu-sim` writes its
    // tree and walks it to make it private.
    let mut lines = text.lines().skip_while(|l| !l.contains("/cpuinfo\", O_RDONLY")).peekable();
    assert!(lines.peek().is_some(), "{args:?} never read cpuinfo:\n{text}");
    for line in lines {
        let Some((_, rest)) = line.split_once("openat(AT_FDCWD, \"") else { continue };
        let Some((path, flags)) = rest.split_once('"') else { continue };
        // Only reads count (`--smi-cost` writes `freeze_on_smi`).
        if ["O_WRONLY", "O_RDWR", "O_CREAT"].iter().any(|w| flags.contains(w)) {
            continue;
        }
        // The machine's trees, `/sys` and `/proc` or the simulated ones in a private directory;
        // the process's own `/proc/self` (std's stack guard reads its maps) is not the machine.
        let machine = path.contains("/sys/") || path.contains("/proc/");
        let own = path.starts_with("/proc/self/") || path.starts_with("/proc/thread-self/");
        if machine && !own {
            *counts.entry(path.to_string()).or_insert(0) += 1;
        }
    }
    Some(counts)
}

fn assert_each_once(args: &[&str], must: &[&str]) {
    let Some(counts) = reads(args) else { return };
    for file in must {
        assert!(
            counts.keys().any(|p| p.ends_with(file)),
            "{args:?} never read {file}; it read {counts:#?}"
        );
    }
    let again: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(again.is_empty(), "{args:?} read these more than once: {again:#?}");
}

#[test]
fn a_stat_run_reads_each_file_of_its_machine_once() {
    // The files every probe of the host reads: two probes would read each twice.
    let host = ["/proc/cpuinfo", "/bus/event_source/devices", "/devices/system/cpu/online"];
    assert_each_once(&["stat", "-e", "task-clock", "true"], &host);
    assert_each_once(&["stat", "--pmu-sim", "sapphirerapids", "-e", "task-clock", "true"], &host);
    let mut with_pmu = host.to_vec();
    with_pmu.extend(["/bus/event_source/devices/cpu/format/event", "/kernel/nmi_watchdog"]);
    let topdown = ["stat", "--pmu-sim", "sapphirerapids", "-M", "TopdownL1", "-a", "true"];
    assert_each_once(&topdown, &with_pmu);
}
