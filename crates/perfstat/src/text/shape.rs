//! What perf's names look like: units, and the shapes of event names perf prints, which tell a
//! row from a line someone else printed.

/// Units perf prints are plain words (`msec`, `ns`, `Joules`, `MiB`); event names carry
/// `/`, `.`, `-`, `_` or `:`.
pub(super) fn looks_like_unit(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_alphabetic() || matches!(c, '%' | '(' | ')'))
}

/// perf's event names that are one lower-case word: the legacy hardware and software events
/// and their aliases (tools/perf/util/parse-events.c), the tool events and sysfs aliases.
const PLAIN_EVENTS: [&str; 11] = [
    "cycles",
    "instructions",
    "branches",
    "faults",
    "migrations",
    "cs",
    "dummy",
    "slots",
    "tsc",
    "mperf",
    "aperf",
];

/// The first word of perf's hyphenated lower-case event names (`cpu-clock`, `page-faults`,
/// `topdown-retiring`, `l1-dcache-loads`, `mem-loads`, `tx-start`, `cycles-ct`).
const HYPHEN_HEADS: [&str; 31] = [
    "cpu",
    "task",
    "page",
    "context",
    "minor",
    "major",
    "alignment",
    "emulation",
    "bpf",
    "cgroup",
    "branch",
    "cache",
    "bus",
    "stalled",
    "idle",
    "ref",
    "topdown",
    "mem",
    "tx",
    "el",
    "cycles",
    "l1",
    "llc",
    "l2",
    "dtlb",
    "itlb",
    "d",
    "i",
    "data",
    "instruction",
    "node",
];

/// Whether `event` is shaped like an event name perf prints: `pmu/terms/mods`, a vendor name
/// (`INST_RETIRED.ANY`), a tracepoint (`sched:sched_switch`), a raw `r1a2`, or one of perf's
/// own names. Words people print (`iterations`, `ops/sec`, `done.`) are not.
pub(crate) fn plausible_event(event: &str) -> bool {
    let valid = |c: char| c.is_ascii_alphanumeric() || "_.-:/,=@!+[]".contains(c);
    if event.is_empty()
        || !event.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        || !event.chars().all(valid)
        || event.ends_with(['.', ',', ':'])
    {
        return false;
    }
    let slashes = event.matches('/').count();
    if slashes > 0 {
        // `pmu/terms/` with optional modifiers after the second slash.
        return slashes >= 2 && !event.starts_with('/') && !event.contains("//");
    }
    let base = event.split(':').next().unwrap_or(event);
    if event.contains(':') {
        // `name:mods` or a tracepoint `subsystem:name`.
        return !base.is_empty();
    }
    if base.contains(['_', '.', '=', ',', '@']) || base.bytes().any(|b| b.is_ascii_uppercase()) {
        return true;
    }
    let lower = base.to_ascii_lowercase();
    if tmetric_names::is_legacy_name(&lower) {
        return true;
    }
    if let Some((head, _)) = lower.split_once('-') {
        return HYPHEN_HEADS.contains(&head);
    }
    PLAIN_EVENTS.contains(&lower.as_str())
        || (lower.len() > 1
            && lower.starts_with('r')
            && lower[1..].bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_shapes() {
        for yes in [
            "cycles",
            "cpu-cycles",
            "cs",
            "page-faults",
            "L1-dcache-load-misses",
            "dTLB-loads",
            "topdown-retiring",
            "INST_RETIRED.ANY",
            "cpu/UOPS_EXECUTED.THREAD,cmask=1/",
            "cpu_core/TOPDOWN.SLOTS/",
            "msr/tsc/",
            "TSC",
            "sched:sched_switch",
            "cycles:u",
            "r01c2",
            "duration_time",
            "power/energy-pkg/",
            "cpu/event=0x3c/k",
            "ls_dispatch.ld_dispatch",
            "UNC_M_CAS_COUNT.RD",
            "migrations",
            "l1d",
            "bpu",
            "L1-dcache-load-misses",
        ] {
            assert!(plausible_event(yes), "{yes}");
        }
        for no in [
            "iterations",
            "ops/sec",
            "done.",
            "requests,",
            "test-cases",
            "ms",
            "/sec",
            "a//b",
            "$HOME",
            "(null)",
            "42x",
            "apples",
        ] {
            assert!(!plausible_event(no), "{no}");
        }
    }
}
