//! `-G` and `--for-each-cgroup`, counted for real in cgroups this test makes under the
//! machine's cgroup2 mount (root only): a busy shell in one cgroup, nothing in the other.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::support::{stderr, tmetric};

/// A cgroup made for one test, removed (with its tasks gone) when dropped.
pub(crate) struct Cgroup {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
}

impl Cgroup {
    pub(crate) fn new(mount: &Path, tag: &str) -> Cgroup {
        let name = format!("tmetric-test-{tag}-{}", std::process::id());
        let path = mount.join(&name);
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Cgroup { path, name }
    }

    /// Starts a shell spinning for about `ms` of wall time inside this cgroup, once it is in
    /// the cgroup (so every CPU cycle it spins is the cgroup's).
    pub(crate) fn spin(&self, ms: u64) -> Child {
        let procs = self.path.join("cgroup.procs");
        let script = format!(
            "echo $$ > {}; end=$(($(date +%s%N) + {ms}000000)); while [ $(date +%s%N) -lt $end ]; do :; done",
            procs.display()
        );
        let child = Command::new("sh").args(["-c", &script]).spawn().unwrap();
        let pid = child.id().to_string();
        for _ in 0..500 {
            let members = std::fs::read_to_string(&procs).unwrap_or_default();
            if members.lines().any(|l| l == pid) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        child
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The cgroup2 mount, when this test can make cgroups in it.
pub(crate) fn mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let path = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
    })?;
    // Only root may make cgroups here: try.
    let probe = path.join(format!("tmetric-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    std::fs::remove_dir(&probe).ok()?;
    Some(path)
}

/// Per CSV line: (cgroup, cpu-clock msec) of `-x,` output (`count,unit,event,cgroup,...`).
fn clock_by_cgroup(text: &str) -> Vec<(String, Option<f64>)> {
    text.lines()
        .filter(|l| l.contains(",cpu-clock,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[3].to_string(), f[0].parse().ok())
        })
        .collect()
}

#[test]
fn for_each_cgroup_counts_each_cgroup_apart() {
    let Some(mount) = mount() else {
        eprintln!("skipped: needs root and a cgroup2 mount");
        return;
    };
    let busy = Cgroup::new(&mount, "busy");
    let idle = Cgroup::new(&mount, "idle");
    let mut spinner = busy.spin(300);
    let list = format!("{},{}", busy.name, idle.name);
    let out = tmetric(&[
        "stat",
        "-a",
        "-x,",
        "-e",
        "cpu-clock",
        "--for-each-cgroup",
        &list,
        "sleep",
        "0.2",
    ]);
    spinner.wait().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    // perf's CSV fields with a cgroup: one more than without (7 separators).
    for line in text.lines().filter(|l| l.contains(",cpu-clock,")) {
        assert_eq!(line.matches(',').count(), 7, "{line}");
    }
    let clocks = clock_by_cgroup(&text);
    assert_eq!(clocks.len(), 2, "{text}");
    assert_eq!(clocks[0].0, busy.name);
    assert_eq!(clocks[1].0, idle.name);
    // The spinner ran in its cgroup during the 0.2 s; how much CPU it got depends on what
    // else the shared machine runs (tests run in parallel), so only that it ran, and no more
    // than one CPU's worth.
    let busy_ms = clocks[0].1.expect("the busy cgroup counted");
    assert!(busy_ms > 5.0 && busy_ms < 260.0, "{text}");
    // Nothing ran in the other one.
    assert!(clocks[1].1.is_none_or(|ms| ms < 5.0), "{text}");
}

#[test]
fn g_puts_each_event_in_its_cgroup_and_prints_perfs_column() {
    let Some(mount) = mount() else {
        eprintln!("skipped: needs root and a cgroup2 mount");
        return;
    };
    let busy = Cgroup::new(&mount, "g");
    let mut spinner = busy.spin(300);
    let list = format!("{},", busy.name);
    // cpu-clock in the cgroup, context-switches everywhere (an empty name).
    let out =
        tmetric(&["stat", "-a", "-e", "cpu-clock,context-switches", "-G", &list, "sleep", "0.2"]);
    spinner.wait().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let clock = text.lines().find(|l| l.contains(" cpu-clock ")).expect(&text);
    // perf 6.12: the event padded to 32, then ` %-16s` for the cgroup.
    let at = clock.find("cpu-clock").unwrap();
    assert_eq!(&clock[at + 32..at + 33 + busy.name.len()], format!(" {}", busy.name), "{text}");
    let switches = text.lines().find(|l| l.contains(" context-switches")).expect(&text);
    assert_eq!(&switches[at + 32..at + 34], "  ", "no cgroup: an empty column: {text}");
    // A group cannot span cgroups; events must come first.
    let two = format!("{},/", busy.name);
    let out = tmetric(&["stat", "-a", "-e", "{cpu-clock,task-clock}", "-G", &two, "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("would count in several cgroups"), "{}", stderr(&out));
    let out = tmetric(&["stat", "-a", "-M", "Software", "-G", &busy.name, "true"]);
    assert!(stderr(&out).contains("must define events before cgroups"), "{}", stderr(&out));
    // Per CPU only, as perf.
    let out = tmetric(&["stat", "-e", "cpu-clock", "-G", &busy.name, "true"]);
    assert!(stderr(&out).contains("only available in system-wide mode"), "{}", stderr(&out));
    // A cgroup that does not exist stops the run, named with where it was looked for.
    let out = tmetric(&["stat", "-a", "-e", "cpu-clock", "-G", "tmetric-no-such-cgroup", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let missing = mount.join("tmetric-no-such-cgroup");
    assert!(
        stderr(&out).contains(&format!("no access to cgroup {}", missing.display())),
        "{}",
        stderr(&out)
    );
}
