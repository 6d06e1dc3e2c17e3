//! Event keys: one canonical form for an event as perf prints it and as a metric expression names it.
//!
//! perf prints `cpu_core/TOPDOWN.SLOTS/`, `cpu/UOPS_EXECUTED.THREAD,cmask=1/`, `page-faults:u`,
//! `cpu_core/X/R` or `TSC`; expressions name the same events `cpu_core@TOPDOWN.SLOTS@`,
//! `cpu@UOPS_EXECUTED.THREAD\,cmask\=1@`, `X:R`, `msr@tsc@`.
//! Both are reduced to an [`EventKey`] whose equality means "same event"; the looser PMU
//! rules (an id without a PMU matching a row on a core PMU) live in `lookup`, not here.

use std::fmt;

/// Modifier letters perf accepts after `:` or after the closing `/` (Documentation/perf-list.txt),
/// plus `X`/`x` (exclusive) that later kernels added. A `:` suffix made of anything else is part
/// of the event name, as in the tracepoint `sched:sched_switch`.
const MODIFIER_CHARS: &str = "ukhIGHpPSDWebRXx";

/// The core PMUs that an expression id without a PMU may stand for (jevents.py's `default_core`):
/// the names perf gives a CPU's core PMU.
pub fn is_core_pmu(pmu: &str) -> bool {
    matches!(pmu, "cpu" | "cpu_core" | "cpu_atom" | "cpum_cf") || pmu.starts_with("armv8_pmuv3")
}

/// perf's tool events: counted by perf itself, not by a PMU, and seen by metrics in seconds.
pub(crate) const TOOL_EVENTS: [&str; 3] = {
    let t = tmetric_names::TOOL;
    [t[0].0, t[1].0, t[2].0]
};

/// An event in canonical form.
///
/// * `pmu`: lower-cased PMU prefix (`cpu_core`, `msr`, `uncore_imc_0`), `None` for a bare name.
///   `TSC`, `tsc` and `msr/tsc/` all become `Some("msr")` + `tsc`; `tool/duration_time/`
///   becomes a bare `duration_time`.
/// * `name`: lower-cased event name followed by its `key=value` terms, sorted, with numbers in
///   decimal (`uops_executed.thread,cmask=1`; `cmask=0x1` gives the same); a bare flag term such
///   as `edge` becomes `edge=1`. `slots` is spelled `topdown.slots`, because perf prints either
///   name for the same fixed counter. `metric-id=` terms are dropped.
/// * `modifiers`: the modifier letters other than `R`, sorted (`ku` for both `:uk` and `/ku`).
/// * `retire_latency`: the `R` modifier (`X:R`, `cpu_core/X/R`, `cpu_core@X@R`): a retire
///   latency, never the same thing as the count of `X`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventKey {
    /// PMU prefix, lower case.
    pub pmu: Option<String>,
    /// Event name and sorted terms, lower case.
    pub name: String,
    /// Sorted modifier letters, without `R`.
    pub modifiers: String,
    /// Whether this is the retire latency (`R` modifier) of the event.
    pub retire_latency: bool,
}

impl EventKey {
    /// The key of an event name as perf prints it in any layout:
    /// `cpu_core/TOPDOWN.SLOTS/`, `cpu/UOPS_EXECUTED.THREAD,cmask=1/k`, `page-faults:u`,
    /// `cpu_core/MEM_INST_RETIRED.SPLIT_LOADS/R`, `MEM_LOAD_RETIRED.L3_HIT:R`, `msr/tsc/`, `TSC`.
    pub fn from_perf(printed: &str) -> EventKey {
        let printed = printed.trim();
        match (printed.find('/'), printed.rfind('/')) {
            (Some(first), Some(last)) if last > first => {
                let mods = printed[last + 1..].trim_start_matches(':');
                build(Some(&printed[..first]), &printed[first + 1..last], ',', mods)
            }
            _ => {
                let (name, mods) = split_colon_modifiers(printed);
                build(None, name, ',', mods)
            }
        }
    }

    /// The key of an identifier as written in a metric expression, with or without perf's
    /// backslash escapes: `cpu_core@TOPDOWN.SLOTS@`, `cpu@UOPS_EXECUTED.THREAD\,cmask\=1@`,
    /// `MEM_LOAD_RETIRED.L3_HIT:R`, `cpu_core@X@R`, `msr@tsc@`, `TSC`, `topdown\-retiring`,
    /// `duration_time`.
    pub fn from_expr_id(id: &str) -> EventKey {
        let id = unescape(id.trim());
        match (id.find('@'), id.rfind('@')) {
            (Some(first), Some(last)) if last > first => {
                build(Some(&id[..first]), &id[first + 1..last], ',', &id[last + 1..])
            }
            _ => {
                let (name, mods) = split_colon_modifiers(&id);
                build(None, name, ',', mods)
            }
        }
    }

    /// Whether this is one of perf's tool events (`duration_time`, `user_time`, `system_time`).
    pub fn is_tool(&self) -> bool {
        self.pmu.is_none() && TOOL_EVENTS.contains(&self.name.as_str())
    }

    /// Whether this is the slots fixed counter that leads every x86 topdown group.
    pub(crate) fn is_slots(&self) -> bool {
        self.name == "topdown.slots" && self.pmu.as_deref().is_none_or(is_core_pmu)
    }
}

impl fmt::Display for EventKey {
    /// perf's spelling: `pmu/name/mods`, or `name:mods` without a PMU.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = if self.retire_latency { "R" } else { "" };
        match &self.pmu {
            Some(pmu) => write!(f, "{pmu}/{}/{}{r}", self.name, self.modifiers),
            None if self.modifiers.is_empty() && r.is_empty() => write!(f, "{}", self.name),
            None => write!(f, "{}:{}{r}", self.name, self.modifiers),
        }
    }
}

/// Removes perf's expression escapes: `\,` `\=` `\-` `\@` and any other `\x` become `x`.
fn unescape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    let mut chars = id.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits `name:mods` at the last `:` when what follows is made of modifier letters only.
fn split_colon_modifiers(text: &str) -> (&str, &str) {
    if let Some(colon) = text.rfind(':') {
        let mods = &text[colon + 1..];
        if !mods.is_empty() && mods.chars().all(|c| MODIFIER_CHARS.contains(c)) {
            return (&text[..colon], mods);
        }
    }
    (text, "")
}

fn build(pmu: Option<&str>, terms: &str, term_sep: char, mods: &str) -> EventKey {
    let mut pmu = pmu.map(|p| p.trim().to_ascii_lowercase()).filter(|p| !p.is_empty());
    let mut event = String::new();
    let mut params: Vec<String> = Vec::new();
    for (idx, term) in terms.split(term_sep).enumerate() {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        match term.split_once('=') {
            Some((k, _)) if k.trim().eq_ignore_ascii_case("metric-id") => {}
            Some((k, v)) => params.push(format!(
                "{}={}",
                k.trim().to_ascii_lowercase(),
                normalise_number(&v.trim().to_ascii_lowercase())
            )),
            None if idx == 0 => event = term.to_ascii_lowercase(),
            None => params.push(format!("{}=1", term.to_ascii_lowercase())),
        }
    }
    // `TOPDOWN.SLOTS/metric-id=.../` names an event, not a PMU: with no event inside the slashes
    // and no terms left, the text before the first slash is the event.
    if event.is_empty()
        && params.is_empty()
        && let Some(p) = pmu.take()
    {
        event = p;
    }
    params.sort();
    // perf's legacy names and their aliases (`cs`, `cpu-cycles`, `L1-dcache-load-misses`) are one
    // event whatever the spelling: bare, or (hardware and cache events) on a core PMU.
    if params.is_empty()
        && let Some(canonical) =
            canonical_legacy(&event, pmu.as_deref().is_none_or(is_core_pmu), pmu.is_none())
    {
        event = canonical;
    }
    let mut name = event;
    for p in params {
        if !name.is_empty() {
            name.push(',');
        }
        name.push_str(&p);
    }
    if name == "slots" {
        name = "topdown.slots".to_string();
    }
    if name == "tsc" && pmu.as_deref().is_none_or(|p| p == "msr") {
        pmu = Some("msr".to_string());
    }
    if pmu.as_deref() == Some("tool") && TOOL_EVENTS.contains(&name.as_str()) {
        pmu = None;
    }
    let retire_latency = mods.contains('R');
    let mut letters: Vec<char> = mods.chars().filter(|&c| c != 'R' && !c.is_whitespace()).collect();
    letters.sort_unstable();
    EventKey { pmu, name, modifiers: letters.into_iter().collect(), retire_latency }
}

pub use tmetric_names::canonical_event_name;
use tmetric_names::canonical_legacy;

/// `0x1` and `1` are the same term value; perf accepts both.
fn normalise_number(value: &str) -> String {
    let parsed = match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None if value.bytes().all(|b| b.is_ascii_digit()) => value.parse::<u64>().ok(),
        None => None,
    };
    parsed.map_or_else(|| value.to_string(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pmu: Option<&str>, name: &str, mods: &str, r: bool) -> EventKey {
        EventKey {
            pmu: pmu.map(str::to_string),
            name: name.to_string(),
            modifiers: mods.to_string(),
            retire_latency: r,
        }
    }

    #[test]
    fn printed_and_expression_forms_agree() {
        let pairs = [
            ("cpu_core/TOPDOWN.SLOTS/", "cpu_core@TOPDOWN.SLOTS@"),
            ("cpu_core/slots/", "cpu_core@TOPDOWN.SLOTS@"),
            ("cpu/UOPS_EXECUTED.THREAD,cmask=1/", r"cpu@UOPS_EXECUTED.THREAD\,cmask\=1@"),
            ("cpu/UOPS_EXECUTED.THREAD,cmask=0x1/", "cpu@UOPS_EXECUTED.THREAD,cmask=1@"),
            (
                "cpu/ICACHE_16B.IFDATA_STALL,edge,cmask=1/",
                r"cpu@ICACHE_16B.IFDATA_STALL\,cmask\=1\,edge@",
            ),
            ("cpu_core/CPU_CLK_UNHALTED.THREAD_P/k", "cpu_core@CPU_CLK_UNHALTED.THREAD_P@k"),
            ("cpu_core/MEM_INST_RETIRED.SPLIT_LOADS/R", "cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@R"),
            ("MEM_LOAD_RETIRED.L3_HIT:R", "MEM_LOAD_RETIRED.L3_HIT:R"),
            ("msr/tsc/", "TSC"),
            ("TSC", "msr@tsc@"),
            ("topdown-retiring", r"topdown\-retiring"),
            ("cstate_pkg/c6-residency/", r"cstate_pkg@c6\-residency@"),
            ("page-faults:uk", "page-faults:ku"),
            ("TOPDOWN.SLOTS/metric-id=TOPDOWN.SLOTS/", "TOPDOWN.SLOTS"),
            (
                "cpu_core/TOPDOWN.SLOTS,metric-id=cpu_core!3TOPDOWN.SLOTS!3/",
                "cpu_core@TOPDOWN.SLOTS@",
            ),
            ("tool/duration_time/", "duration_time"),
            (
                "UNC_CHA_TOR_OCCUPANCY.IA_MISS_DRD/thresh=1/",
                r"UNC_CHA_TOR_OCCUPANCY.IA_MISS_DRD@thresh\=1@",
            ),
        ];
        for (printed, id) in pairs {
            assert_eq!(
                EventKey::from_perf(printed),
                EventKey::from_expr_id(id),
                "{printed} vs {id}"
            );
        }
    }

    #[test]
    fn canonical_fields() {
        assert_eq!(
            EventKey::from_perf("cpu/UOPS_EXECUTED.THREAD,cmask=1/"),
            key(Some("cpu"), "uops_executed.thread,cmask=1", "", false)
        );
        assert_eq!(
            EventKey::from_expr_id("cpu_core@MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD@R"),
            key(Some("cpu_core"), "mem_load_l3_hit_retired.xsnp_fwd", "", true)
        );
        assert_eq!(EventKey::from_perf("TSC"), key(Some("msr"), "tsc", "", false));
        assert_eq!(EventKey::from_perf("cycles:u"), key(None, "cycles", "u", false));
        assert_eq!(EventKey::from_perf("slots"), key(None, "topdown.slots", "", false));
        // A tracepoint's colon is part of its name, not a modifier.
        assert_eq!(
            EventKey::from_perf("sched:sched_switch"),
            key(None, "sched:sched_switch", "", false)
        );
        assert_eq!(
            EventKey::from_perf("sched:sched_switch:u"),
            key(None, "sched:sched_switch", "u", false)
        );
        assert_eq!(
            EventKey::from_perf("cpu/event=0x3c,umask=0x0/"),
            key(Some("cpu"), "event=60,umask=0", "", false)
        );
    }

    #[test]
    fn distinct_events_stay_distinct() {
        let distinct = [
            "cpu_core/X/",
            "cpu_core/X/R",
            "cpu_core/X/u",
            "cpu_atom/X/",
            "X",
            "cpu_core/X,cmask=1/",
            "cpu_core/X,cmask=2/",
        ];
        for (i, a) in distinct.iter().enumerate() {
            for b in &distinct[i + 1..] {
                assert_ne!(EventKey::from_perf(a), EventKey::from_perf(b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn perfs_aliases_are_one_event() {
        let same = [
            ("cs", "context-switches"),
            ("faults", "page-faults"),
            ("migrations", "cpu-migrations"),
            ("cycles", "cpu-cycles"),
            ("cpu/cycles/", "cpu/cpu-cycles/"),
            ("cpu_core/cycles/u", "cpu_core/cpu-cycles/u"),
            ("branches", "branch-instructions"),
            ("idle-cycles-frontend", "stalled-cycles-frontend"),
            ("idle-cycles-backend:u", "stalled-cycles-backend:u"),
            ("L1-dcache-load-misses", "l1d-read-miss"),
            ("L1-dcache-loads", "L1-data-read"),
            ("L1-dcache-loads", "L1-dcache"),
            ("LLC-load-misses", "L2-loads-misses"),
            ("dTLB-store-misses", "d-tlb-write-miss"),
            ("iTLB-loads", "i-tlb-access"),
            ("branch-loads", "bpu"),
            ("branch-load-misses", "btb-miss"),
            ("node-prefetches", "node-speculative-load-refs"),
        ];
        for (a, b) in same {
            assert_eq!(EventKey::from_perf(a), EventKey::from_perf(b), "{a} vs {b}");
        }
        assert_eq!(EventKey::from_perf("cs").name, "context-switches");
        assert_eq!(EventKey::from_expr_id(r"cs").name, "context-switches");
        assert_eq!(EventKey::from_perf("L2-load-miss").name, "llc-load-misses");
        // Not aliases: other PMUs, terms, software names on a core PMU, unknown spellings.
        for (a, b) in [
            ("cycles", "cpu/cycles,cmask=1/"),
            ("cs", "cpu/cs/"),
            ("cycles", "msr/cycles/"),
            ("branch-misses", "branch-load-misses"),
        ] {
            assert_ne!(EventKey::from_perf(a), EventKey::from_perf(b), "{a} vs {b}");
        }
        for name in ["L1-icache-stores", "iTLB-prefetches", "L1-dcache-loads-misses-x", "cache"] {
            assert!(!tmetric_names::is_legacy_name(&name.to_ascii_lowercase()), "{name}");
        }
        assert_eq!(canonical_event_name("CS"), "context-switches");
        assert_eq!(canonical_event_name("INST_RETIRED.ANY"), "inst_retired.any");
    }

    #[test]
    fn display_uses_perf_spelling() {
        assert_eq!(EventKey::from_expr_id("cpu_core@X.Y@R").to_string(), "cpu_core/x.y/R");
        assert_eq!(EventKey::from_expr_id("X.Y:uk").to_string(), "x.y:ku");
        assert_eq!(EventKey::from_expr_id("TSC").to_string(), "msr/tsc/");
        assert_eq!(EventKey::from_expr_id("duration_time").to_string(), "duration_time");
    }
}
