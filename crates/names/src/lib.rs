//! perf's event names without a machine: the one table of the legacy hardware, software and
//! hardware-cache symbols (`cycles`, `cs`, `L1-dcache-load-misses`, ...) with their aliases,
//! the names perf prints for each `(type, config)`, the tool events, and the modifier letters.
//!
//! Tables and rules are those of `tools/perf/util/parse-events.l`, `parse-events.c` and
//! `evsel.c` in Linux 6.12; perf 7.x moved the same tables into its vendor JSON
//! (`arch/common/common/{legacy-hardware,software,tool}.json` and the generated
//! `legacy-cache.json`), and a vendor test checks that they still agree. Every reader of perf's
//! names uses this crate: the `-e` grammar and resolver, the perf stat log and perf.data
//! readers, the vendor loader and log inference.
// Only `tmetric-runtime` may hold `unsafe` (ARCHITECTURE.md, invariants).
#![forbid(unsafe_code)]

/// `PERF_TYPE_HARDWARE`.
pub const TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_HW_CACHE`.
pub const TYPE_HW_CACHE: u32 = 3;

/// Software event names and aliases with their `PERF_COUNT_SW_*` config.
pub const SOFTWARE: &[(&str, u64)] = &[
    ("cpu-clock", 0),
    ("task-clock", 1),
    ("page-faults", 2),
    ("faults", 2),
    ("context-switches", 3),
    ("cs", 3),
    ("cpu-migrations", 4),
    ("migrations", 4),
    ("minor-faults", 5),
    ("major-faults", 6),
    ("alignment-faults", 7),
    ("emulation-faults", 8),
    ("dummy", 9),
    ("bpf-output", 10),
    ("cgroup-switches", 11),
];

/// Generic hardware event names and aliases with their `PERF_COUNT_HW_*` config.
pub const HARDWARE: &[(&str, u64)] = &[
    ("cpu-cycles", 0),
    ("cycles", 0),
    ("instructions", 1),
    ("cache-references", 2),
    ("cache-misses", 3),
    ("branch-instructions", 4),
    ("branches", 4),
    ("branch-misses", 5),
    ("bus-cycles", 6),
    ("stalled-cycles-frontend", 7),
    ("idle-cycles-frontend", 7),
    ("stalled-cycles-backend", 8),
    ("idle-cycles-backend", 8),
    ("ref-cycles", 9),
];

/// The names perf prints for `PERF_COUNT_HW_*` (`evsel__hw_names`).
pub const HW_NAMES: [&str; 10] = [
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branches",
    "branch-misses",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "ref-cycles",
];

/// The names perf prints for `PERF_COUNT_SW_*` (`evsel__sw_names`, then the two newer ones).
pub const SW_NAMES: [&str; 12] = [
    "cpu-clock",
    "task-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
    "alignment-faults",
    "emulation-faults",
    "dummy",
    "bpf-output",
    "cgroup-switches",
];

/// The tool events perf computes itself, with perf 7.x's `tool` PMU config
/// (`tools/perf/util/tool_pmu.c`): wall-clock, user and system time. perf 7.x lists the
/// machine facts (`num_cpus`, `smt_on`, ...) as tool events too; metrics read those as
/// `#literals`.
pub const TOOL: &[(&str, u64)] = &[("duration_time", 1), ("user_time", 2), ("system_time", 3)];

/// perf 7.x's tool events that are machine facts, with their `tool` PMU config; metric
/// expressions name them as `#literals` (`#num_cpus_online`, `#target_cpu`).
pub const TOOL_FACTS: &[(&str, u64)] = &[
    ("has_pmem", 4),
    ("num_cores", 5),
    ("num_cpus", 6),
    ("num_cpus_online", 7),
    ("num_dies", 8),
    ("num_packages", 9),
    ("slots", 10),
    ("smt_on", 11),
    ("system_tsc_freq", 12),
    ("core_wide", 13),
    ("target_cpu", 14),
];

/// One event of perf 7.x's `tool` PMU (`tools/perf/util/tool_pmu.c`, described in
/// `arch/common/common/tool.json`): what `perf list` shows and `-e` opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ToolPmuEvent {
    /// The event name (`num_cpus`).
    pub name: &'static str,
    /// Its config on the `tool` PMU (`ConfigCode`).
    pub config: u64,
    /// `BriefDescription`, as `perf list` prints it.
    pub description: &'static str,
}

/// perf 7.x's tool PMU, in config order (`enum tool_pmu_event`); some are left out on some
/// architectures ([`tool_pmu_skips`]).
pub const TOOL_PMU: &[ToolPmuEvent] = &[
    ToolPmuEvent {
        name: "duration_time",
        config: 1,
        description: "Wall clock interval time in nanoseconds",
    },
    ToolPmuEvent {
        name: "user_time",
        config: 2,
        description: "User (non-kernel) time in nanoseconds",
    },
    ToolPmuEvent {
        name: "system_time",
        config: 3,
        description: "System/kernel time in nanoseconds",
    },
    ToolPmuEvent {
        name: "has_pmem",
        config: 4,
        description: "1 if persistent memory installed otherwise 0",
    },
    ToolPmuEvent {
        name: "num_cores",
        config: 5,
        description: "Number of cores. A core consists of 1 or more thread, with each thread being associated with a logical Linux CPU",
    },
    ToolPmuEvent {
        name: "num_cpus",
        config: 6,
        description: "Number of logical Linux CPUs. There may be multiple such CPUs on a core",
    },
    ToolPmuEvent {
        name: "num_cpus_online",
        config: 7,
        description: "Number of online logical Linux CPUs. There may be multiple such CPUs on a core",
    },
    ToolPmuEvent {
        name: "num_dies",
        config: 8,
        description: "Number of dies. Each die has 1 or more cores",
    },
    ToolPmuEvent {
        name: "num_packages",
        config: 9,
        description: "Number of packages. Each package has 1 or more die",
    },
    ToolPmuEvent {
        name: "slots",
        config: 10,
        description: "Number of functional units that in parallel can execute parts of an instruction",
    },
    ToolPmuEvent {
        name: "smt_on",
        config: 11,
        description: "1 if simultaneous multithreading (aka hyperthreading) is enable otherwise 0",
    },
    ToolPmuEvent {
        name: "system_tsc_freq",
        config: 12,
        description: "The amount a Time Stamp Counter (TSC) increases per second",
    },
    ToolPmuEvent {
        name: "core_wide",
        config: 13,
        description: "1 if not SMT, if SMT are events being gathered on all SMT threads 1 otherwise 0",
    },
    ToolPmuEvent {
        name: "target_cpu",
        config: 14,
        description: "1 if CPUs being analyzed, 0 if threads/processes",
    },
];

/// perf builds its tool PMU without `slots` except on arm64 and without `system_tsc_freq`
/// except on x86 (`tool_pmu__skip_event`): neither is listed nor parsed elsewhere. tmetric
/// follows the architecture it was built for, as perf does.
pub fn tool_pmu_skips(name: &str) -> bool {
    (name.eq_ignore_ascii_case("slots") && !cfg!(target_arch = "aarch64"))
        || (name.eq_ignore_ascii_case("system_tsc_freq")
            && !cfg!(any(target_arch = "x86", target_arch = "x86_64")))
}

/// The tool PMU's events this build has, in config order.
pub fn tool_pmu_events() -> impl Iterator<Item = &'static ToolPmuEvent> {
    TOOL_PMU.iter().filter(|e| !tool_pmu_skips(e.name))
}

/// The tool PMU's event `name` names, ignoring case as perf's alias lookup does
/// (`tool_pmu__str_to_event`); none for an event this architecture's perf leaves out.
pub fn tool_pmu_event(name: &str) -> Option<&'static ToolPmuEvent> {
    tool_pmu_events().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// The events perf's `-d`, `-dd` and `-ddd` add (`detailed_attrs`, `very_detailed_attrs`,
/// `very_very_detailed_attrs` of `builtin-stat.c`), per level, in perf's order and with the
/// names perf prints; each level adds to the ones before.
pub const DETAILED: [&[&str]; 3] = [
    &["L1-dcache-loads", "L1-dcache-load-misses", "LLC-loads", "LLC-load-misses"],
    &[
        "L1-icache-loads",
        "L1-icache-load-misses",
        "dTLB-loads",
        "dTLB-load-misses",
        "iTLB-loads",
        "iTLB-load-misses",
    ],
    &["L1-dcache-prefetches", "L1-dcache-prefetch-misses"],
];

/// The `PERF_COUNT_SW_*` config of a software event name (perf's names and aliases, any case).
pub fn software_config(name: &str) -> Option<u64> {
    SOFTWARE.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| c)
}

/// The `PERF_COUNT_HW_*` config of a generic hardware event name (any case).
pub fn hardware_config(name: &str) -> Option<u64> {
    HARDWARE.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| c)
}

/// The tool event `name` names (`duration_time`, `user_time`, `system_time`; exact case, as
/// metric expressions write them).
pub fn tool_config(name: &str) -> Option<u64> {
    TOOL.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
}

/// The modifier letters perf's lexer takes after `:` or a closing `/`.
pub const MODIFIER_LETTERS: &str = "ukhpPGHSDIWebR";

/// Whether `text` is a run of modifier letters (what perf's lexer takes as modifiers).
pub fn is_modifier_text(text: &str) -> bool {
    !text.is_empty() && text.len() <= 16 && text.chars().all(|c| MODIFIER_LETTERS.contains(c))
}

/// Cache types as the lexer spells them (`lc_type`).
const LEXER_TYPES: &[&str] = &[
    "L1-dcache",
    "l1-d",
    "l1d",
    "L1-data",
    "L1-icache",
    "l1-i",
    "l1i",
    "L1-instruction",
    "LLC",
    "L2",
    "dTLB",
    "d-tlb",
    "Data-TLB",
    "iTLB",
    "i-tlb",
    "Instruction-TLB",
    "branch",
    "branches",
    "bpu",
    "btb",
    "bpc",
    "node",
];

/// Operations and results as the lexer spells them (`lc_op_result`).
const LEXER_OPS: &[&str] = &[
    "load",
    "loads",
    "read",
    "store",
    "stores",
    "write",
    "prefetch",
    "prefetches",
    "speculative-read",
    "speculative-load",
    "refs",
    "Reference",
    "ops",
    "access",
    "misses",
    "miss",
];

/// `evsel__hw_cache`: per `PERF_COUNT_HW_CACHE_*` type, its aliases (the first is printed).
pub const CACHE_TYPES: [&[&str]; 7] = [
    &["L1-dcache", "l1-d", "l1d", "L1-data"],
    &["L1-icache", "l1-i", "l1i", "L1-instruction"],
    &["LLC", "L2"],
    &["dTLB", "d-tlb", "Data-TLB"],
    &["iTLB", "i-tlb", "Instruction-TLB"],
    &["branch", "branches", "bpu", "btb", "bpc"],
    &["node"],
];

/// `evsel__hw_cache_op`.
pub const CACHE_OPS: [&[&str]; 3] = [
    &["load", "loads", "read"],
    &["store", "stores", "write"],
    &["prefetch", "prefetches", "speculative-read", "speculative-load"],
];

/// `evsel__hw_cache_result`.
pub const CACHE_RESULTS: [&[&str]; 2] =
    [&["refs", "Reference", "ops", "access"], &["misses", "miss"]];

/// `evsel__hw_cache_stat`: which operations each cache type has (bit 0 read, 1 write, 2
/// prefetch).
const CACHE_OPS_VALID: [u8; 7] = [0b111, 0b101, 0b111, 0b111, 0b001, 0b001, 0b111];

/// Whether perf's lexer reads `name` as a legacy cache event: a cache type, optionally
/// followed by one or two `-op`/`-result` words, exactly as the lexer spells them.
pub fn is_cache_name(name: &str) -> bool {
    let op_tail = |rest: &str| -> bool {
        LEXER_OPS.iter().any(|o| {
            rest == *o
                || rest
                    .strip_prefix(o)
                    .and_then(|r| r.strip_prefix('-'))
                    .is_some_and(|r| LEXER_OPS.contains(&r))
        })
    };
    LEXER_TYPES.iter().any(|t| match name.strip_prefix(t) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('-').is_some_and(op_tail),
        None => false,
    })
}

/// perf's `parse_aliases`: the first table row with an alias that prefixes `text` (ignoring
/// case), and the length of its longest such alias. With `whole_words`, an alias must end at
/// the end of `text` or at a `-`.
fn prefix_alias(text: &str, table: &[&[&str]], whole_words: bool) -> Option<(usize, usize)> {
    let mut longest = 0;
    for (i, names) in table.iter().enumerate() {
        for name in names.iter() {
            let n = name.len();
            if n > longest
                && text.len() >= n
                && text.as_bytes()[..n].eq_ignore_ascii_case(name.as_bytes())
                && (!whole_words || text.len() == n || text.as_bytes()[n] == b'-')
            {
                longest = n;
            }
        }
        if longest > 0 {
            return Some((i, longest));
        }
    }
    None
}

/// A cache event's parts: type, operation and result, as `PERF_COUNT_HW_CACHE_*` indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CacheParts {
    cache: usize,
    op: usize,
    result: usize,
    /// Every word was read (nothing left over).
    whole: bool,
}

impl CacheParts {
    fn config(self) -> u64 {
        self.cache as u64 | (self.op as u64) << 8 | (self.result as u64) << 16
    }
}

/// `parse_events__decode_legacy_cache`: type, then operation (default read) and result
/// (default access) in either order. `Err` says why the name is not a cache event.
fn cache_parts(name: &str, whole_words: bool) -> Result<CacheParts, String> {
    let Some((cache, len)) = prefix_alias(name, &CACHE_TYPES, whole_words) else {
        return Err(format!("`{name}` does not start with a cache type"));
    };
    let mut rest = name.get(len + 1..).unwrap_or("");
    let mut op = None;
    let mut result = None;
    for _ in 0..2 {
        if rest.is_empty() {
            break;
        }
        if op.is_none()
            && let Some((o, n)) = prefix_alias(rest, &CACHE_OPS, whole_words)
        {
            if CACHE_OPS_VALID[cache] & (1 << o) == 0 {
                return Err(format!(
                    "the {} cache has no {} operation; it has {}",
                    CACHE_TYPES[cache][0],
                    CACHE_OPS[o][0],
                    (0..3)
                        .filter(|p| CACHE_OPS_VALID[cache] & (1 << p) != 0)
                        .map(|p| CACHE_OPS[p][0])
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            op = Some(o);
            rest = rest.get(n + 1..).unwrap_or("");
        } else if result.is_none()
            && let Some((r, n)) = prefix_alias(rest, &CACHE_RESULTS, whole_words)
        {
            result = Some(r);
            rest = rest.get(n + 1..).unwrap_or("");
        } else {
            break;
        }
    }
    Ok(CacheParts {
        cache,
        op: op.unwrap_or(0),
        result: result.unwrap_or(0),
        whole: rest.is_empty(),
    })
}

/// The `PERF_TYPE_HW_CACHE` config of a cache event name as perf's parser decodes it: type,
/// then operation (default read) and result (default access) in either order, each the
/// longest alias that prefixes the rest. `Err` says why a name the lexer accepts is still not
/// a cache event.
pub fn cache_config(name: &str) -> Result<u64, String> {
    cache_parts(name, false).map(CacheParts::config)
}

/// The name perf prints for a legacy event (`evsel__name` without modifiers): `cycles`,
/// `context-switches`, `L1-dcache-loads`, `LLC-load-misses`. The extended PMU type in the
/// upper half of a hardware or cache config is ignored. `None` for other types and unknown
/// configs.
pub fn legacy_name(type_: u32, config: u64) -> Option<String> {
    let low = config & 0xffff_ffff;
    match type_ {
        TYPE_HARDWARE => HW_NAMES.get(low as usize).map(|n| n.to_string()),
        TYPE_SOFTWARE => SW_NAMES.get(config as usize).map(|n| n.to_string()),
        TYPE_HW_CACHE => {
            let (cache, op, result) = (
                (low & 0xff) as usize,
                ((low >> 8) & 0xff) as usize,
                ((low >> 16) & 0xff) as usize,
            );
            if cache >= CACHE_TYPES.len()
                || op >= CACHE_OPS.len()
                || result >= CACHE_RESULTS.len()
                || low >> 24 != 0
                || CACHE_OPS_VALID[cache] & (1 << op) == 0
            {
                return None;
            }
            Some(if result > 0 {
                format!(
                    "{}-{}-{}",
                    CACHE_TYPES[cache][0], CACHE_OPS[op][0], CACHE_RESULTS[result][0]
                )
            } else {
                format!("{}-{}", CACHE_TYPES[cache][0], CACHE_OPS[op][1])
            })
        }
        _ => None,
    }
}

/// A legacy event named without a machine: what perf would open and the name it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Legacy {
    /// [`TYPE_HARDWARE`], [`TYPE_SOFTWARE`] or [`TYPE_HW_CACHE`].
    pub type_: u32,
    /// The config (without an extended PMU type).
    pub config: u64,
    /// perf's printed name for it (`cs` is `context-switches`, `L1-dcache-load` is
    /// `L1-dcache-loads`).
    pub canonical: String,
    /// The core PMU the name carried (`cpu_core` of `cpu_core/cycles/`), if any.
    pub pmu: Option<String>,
}

/// Resolves a legacy event name as perf prints or accepts it: `cs`, `faults`, `cycles`,
/// `cpu-cycles`, `branches`, `L1-dcache-loads`, `LLC-load-misses`, and the hybrid spellings
/// `cpu_core/cycles/` and `cpu_atom/L1-dcache-loads/`. Modifiers (`cycles:u`) are ignored.
/// Readers of perf's output (logs, perf.data) use this to see that two spellings are one
/// event; `None` for names that are not legacy events.
pub fn legacy(name: &str) -> Option<Legacy> {
    let name = name.trim();
    let (pmu, inner) = match name.split_once('/') {
        Some((pmu, rest)) => {
            let inner = rest.strip_suffix('/').or_else(|| rest.rsplit_once('/').map(|(i, _)| i))?;
            if inner.contains(['=', ',', '/']) {
                return None;
            }
            (Some(pmu.to_string()), inner)
        }
        None => (None, name),
    };
    let base = match inner.rsplit_once(':') {
        Some((b, m)) if is_modifier_text(m) || m.is_empty() => b,
        _ => inner,
    };
    let (type_, config) = if let Some(c) = software_config(base) {
        (TYPE_SOFTWARE, c)
    } else if let Some(c) = hardware_config(base) {
        (TYPE_HARDWARE, c)
    } else if is_cache_name(base) {
        (TYPE_HW_CACHE, cache_config(base).ok()?)
    } else {
        return None;
    };
    if pmu.is_some() && type_ == TYPE_SOFTWARE {
        return None;
    }
    Some(Legacy { type_, config, canonical: legacy_name(type_, config)?, pmu })
}

/// perf's printed name of a legacy cache event spelled any way perf accepts, word by word
/// (`l1d-read-miss` is `L1-dcache-load-misses`), lower case; `None` for other names.
fn printed_cache_name(name: &str) -> Option<String> {
    let parts = cache_parts(name, true).ok().filter(|p| p.whole)?;
    legacy_name(TYPE_HW_CACHE, parts.config()).map(|n| n.to_ascii_lowercase())
}

/// The one name of a perf legacy event, lower case: `cpu-cycles` is `cycles`, `cs` is
/// `context-switches`, `L1-dcache-load-miss` is `l1-dcache-load-misses`. `name` is lower
/// case. Hardware and cache names only when `hardware` (bare or on a core PMU), software ones
/// only when `software` (bare). `None` when `name` is none of them or already perf's spelling.
pub fn canonical_legacy(name: &str, hardware: bool, software: bool) -> Option<String> {
    let printed = |table: &[(&str, u64)], names: &[&str]| {
        table
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|&(_, config)| names.get(config as usize))
            .map(|n| n.to_string())
    };
    let found = if software && let Some(n) = printed(SOFTWARE, &SW_NAMES) {
        Some(n)
    } else if !hardware {
        None
    } else if let Some(n) = printed(HARDWARE, &HW_NAMES) {
        Some(n)
    } else {
        printed_cache_name(name)
    };
    found.filter(|n| n != name)
}

/// Whether `name` (lower case) is one of perf's legacy event names or aliases: a hardware
/// or software symbol, or a cache event spelled word by word as perf accepts it.
pub fn is_legacy_name(name: &str) -> bool {
    HARDWARE.iter().chain(SOFTWARE).any(|(n, _)| *n == name) || printed_cache_name(name).is_some()
}

/// perf's own name of a legacy event given by any of its aliases, lower case: `cs` is
/// `context-switches`, `faults` `page-faults`, `migrations` `cpu-migrations`, `cpu-cycles`
/// `cycles`, `branch-instructions` `branches`, `idle-cycles-frontend`
/// `stalled-cycles-frontend`, `L1-dcache-load-miss` `l1-dcache-load-misses`; any other name
/// lower-cased.
pub fn canonical_event_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    canonical_legacy(&lower, true, true).unwrap_or(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_names_decode_as_perf_does() {
        assert_eq!(cache_config("L1-dcache-loads"), Ok(0));
        assert_eq!(cache_config("L1-dcache-load-misses"), Ok(1 << 16));
        assert_eq!(cache_config("LLC-load-misses"), Ok(2 | 1 << 16));
        assert_eq!(cache_config("LLC-stores"), Ok(2 | 1 << 8));
        assert_eq!(cache_config("dTLB-loads"), Ok(3));
        assert_eq!(cache_config("iTLB-load-misses"), Ok(4 | 1 << 16));
        assert_eq!(cache_config("L1-icache-load-misses"), Ok(1 | 1 << 16));
        assert_eq!(cache_config("L1-dcache-prefetch-misses"), Ok(2 << 8 | 1 << 16));
        assert_eq!(cache_config("branch-load-misses"), Ok(5 | 1 << 16));
        assert_eq!(cache_config("L1-dcache-misses"), Ok(1 << 16), "result without op: read");
        assert_eq!(cache_config("L1-dcache"), Ok(0));
        assert!(cache_config("L1-icache-stores").unwrap_err().contains("no store"));
        assert!(cache_config("iTLB-prefetches").is_err());
        assert!(
            is_cache_name("L1-dcache-loads")
                && is_cache_name("LLC")
                && is_cache_name("dTLB-load-misses")
        );
        assert!(!is_cache_name("l1-dcache-loads") && !is_cache_name("L1-dcache-loadz"));
    }

    #[test]
    fn printed_names_round_trip() {
        for name in DETAILED.iter().flat_map(|l| l.iter()) {
            let c = cache_config(name).unwrap();
            assert_eq!(legacy_name(TYPE_HW_CACHE, c).as_deref(), Some(*name));
        }
        assert_eq!(legacy_name(TYPE_HARDWARE, 4 | 8 << 32).as_deref(), Some("branches"));
        // perf's -d levels: (cache, op, result) as builtin-stat.c lists them.
        let configs: Vec<u64> =
            DETAILED.iter().flat_map(|l| l.iter()).map(|n| cache_config(n).unwrap()).collect();
        let want = |c: u64, op: u64, r: u64| c | op << 8 | r << 16;
        assert_eq!(
            configs,
            [
                want(0, 0, 0),
                want(0, 0, 1),
                want(2, 0, 0),
                want(2, 0, 1),
                want(1, 0, 0),
                want(1, 0, 1),
                want(3, 0, 0),
                want(3, 0, 1),
                want(4, 0, 0),
                want(4, 0, 1),
                want(0, 2, 0),
                want(0, 2, 1),
            ]
        );
        assert_eq!(legacy_name(TYPE_SOFTWARE, 3).as_deref(), Some("context-switches"));
    }

    #[test]
    fn aliases_name_one_event() {
        let cs = legacy("cs").unwrap();
        assert_eq!(
            (cs.type_, cs.config, cs.canonical.as_str()),
            (TYPE_SOFTWARE, 3, "context-switches")
        );
        assert_eq!(legacy("migrations").unwrap().canonical, "cpu-migrations");
        assert_eq!(legacy("faults").unwrap().canonical, "page-faults");
        assert_eq!(legacy("cpu-cycles:u").unwrap().canonical, "cycles");
        assert_eq!(legacy("branch-instructions").unwrap().canonical, "branches");
        assert_eq!(legacy("cgroup-switches").unwrap().config, 11);
        assert_eq!(legacy("idle-cycles-backend").unwrap().canonical, "stalled-cycles-backend");
        let core = legacy("cpu_core/cycles/").unwrap();
        assert_eq!((core.pmu.as_deref(), core.canonical.as_str()), (Some("cpu_core"), "cycles"));
        assert_eq!(legacy("cpu_atom/L1-dcache-load-misses/").unwrap().config, 1 << 16);
        assert_eq!(legacy("INST_RETIRED.ANY"), None);
        assert_eq!(legacy("cpu/event=0x3c/"), None);
    }

    #[test]
    fn the_tool_pmu_holds_the_tool_events_and_facts_with_their_configs() {
        let pmu: Vec<(&str, u64)> = TOOL_PMU.iter().map(|e| (e.name, e.config)).collect();
        let both: Vec<(&str, u64)> = TOOL.iter().chain(TOOL_FACTS).copied().collect();
        assert_eq!(pmu, both);
        // Any case, as perf's strcasecmp; what this build's perf leaves out is not there.
        assert_eq!(tool_pmu_event("NUM_CPUS").map(|e| e.config), Some(6));
        assert_eq!(tool_pmu_event("num_cpu"), None);
        let x86 = cfg!(target_arch = "x86_64");
        assert_eq!(tool_pmu_event("system_tsc_freq").is_some(), x86);
        assert_eq!(tool_pmu_event("slots").is_some(), cfg!(target_arch = "aarch64"));
        if x86 {
            assert_eq!(tool_pmu_events().count(), 13);
        }
    }

    #[test]
    fn canonical_names_are_perfs_printed_ones_in_lower_case() {
        for (alias, name) in [
            ("cs", "context-switches"),
            ("faults", "page-faults"),
            ("migrations", "cpu-migrations"),
            ("cpu-cycles", "cycles"),
            ("branch-instructions", "branches"),
            ("idle-cycles-frontend", "stalled-cycles-frontend"),
            ("l1-dcache-load-miss", "l1-dcache-load-misses"),
            ("l1d-read-miss", "l1-dcache-load-misses"),
            ("llc-loads", "llc-loads"),
            ("cgroup-switches", "cgroup-switches"),
            ("INST_RETIRED.ANY", "inst_retired.any"),
        ] {
            assert_eq!(canonical_event_name(alias), name, "{alias}");
        }
        // Word by word: a cache name with anything left over is not one.
        assert!(!is_legacy_name("l1-dcache-loadsx") && !is_legacy_name("l1-dcache-loads-misses-x"));
        assert!(is_legacy_name("cs") && is_legacy_name("idle-cycles-backend"));
        // Software names only bare, hardware also on a core PMU.
        assert_eq!(canonical_legacy("cs", true, false), None);
        assert_eq!(canonical_legacy("cpu-cycles", true, false).as_deref(), Some("cycles"));
        assert_eq!(canonical_legacy("cpu-cycles", false, true), None);
    }
}
