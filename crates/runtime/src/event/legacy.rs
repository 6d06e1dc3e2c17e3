//! perf's legacy event names: the software and generic hardware symbols (`cs`, `faults`,
//! `cycles`, `branches`, ...), the hardware cache events (`L1-dcache-loads`, `LLC-load-misses`,
//! `dTLB-loads`, ...), and the names perf prints for each `(type, config)`. Tables and rules
//! are those of `tools/perf/util/parse-events.l` and `evsel.c` in Linux 6.12.

use crate::sys::{TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_SOFTWARE};

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
const HW_NAMES: [&str; 10] = [
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
const SW_NAMES: [&str; 12] = [
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

/// The events perf's `-d`, `-dd` and `-ddd` add (`detailed_attrs`, `very_detailed_attrs`,
/// `very_very_detailed_attrs` of `builtin-stat.c`), per level, in perf's order and with the
/// names perf prints; each level adds to the ones before. A front end passes them through
/// [`super::Resolver`] like `-e` text, so hybrid machines get one per core PMU.
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

/// The `PERF_COUNT_SW_*` config of a software event name (perf's names and aliases).
pub fn software_config(name: &str) -> Option<u64> {
    SOFTWARE.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| c)
}

/// The `PERF_COUNT_HW_*` config of a generic hardware event name.
pub fn hardware_config(name: &str) -> Option<u64> {
    HARDWARE.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| c)
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
const CACHE_TYPES: [&[&str]; 7] = [
    &["L1-dcache", "l1-d", "l1d", "L1-data"],
    &["L1-icache", "l1-i", "l1i", "L1-instruction"],
    &["LLC", "L2"],
    &["dTLB", "d-tlb", "Data-TLB"],
    &["iTLB", "i-tlb", "Instruction-TLB"],
    &["branch", "branches", "bpu", "btb", "bpc"],
    &["node"],
];

/// `evsel__hw_cache_op`.
const CACHE_OPS: [&[&str]; 3] = [
    &["load", "loads", "read"],
    &["store", "stores", "write"],
    &["prefetch", "prefetches", "speculative-read", "speculative-load"],
];

/// `evsel__hw_cache_result`.
const CACHE_RESULTS: [&[&str]; 2] = [&["refs", "Reference", "ops", "access"], &["misses", "miss"]];

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
/// case), and the length of its longest such alias.
fn prefix_alias(text: &str, table: &[&[&str]]) -> Option<(usize, usize)> {
    let mut longest = 0;
    for (i, names) in table.iter().enumerate() {
        for name in names.iter() {
            let n = name.len();
            if n > longest
                && text.len() >= n
                && text.as_bytes()[..n].eq_ignore_ascii_case(name.as_bytes())
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

/// The `PERF_TYPE_HW_CACHE` config of a cache event name (`parse_events__decode_legacy_cache`):
/// type, then operation (default read) and result (default access) in either order. `Err`
/// says why a name the lexer accepts is still not a cache event.
pub fn cache_config(name: &str) -> Result<u64, String> {
    let Some((cache, len)) = prefix_alias(name, &CACHE_TYPES) else {
        return Err(format!("`{name}` does not start with a cache type"));
    };
    let mut rest = name.get(len + 1..).unwrap_or("");
    let mut op = None;
    let mut result = None;
    let check_op = |cache: usize, op: usize| -> Result<(), String> {
        if CACHE_OPS_VALID[cache] & (1 << op) != 0 {
            Ok(())
        } else {
            Err(format!(
                "the {} cache has no {} operation; it has {}",
                CACHE_TYPES[cache][0],
                CACHE_OPS[op][0],
                (0..3)
                    .filter(|o| CACHE_OPS_VALID[cache] & (1 << o) != 0)
                    .map(|o| CACHE_OPS[o][0])
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    };
    for _ in 0..2 {
        if rest.is_empty() {
            break;
        }
        if op.is_none()
            && let Some((o, n)) = prefix_alias(rest, &CACHE_OPS)
        {
            check_op(cache, o)?;
            op = Some(o);
            rest = rest.get(n + 1..).unwrap_or("");
        } else if result.is_none()
            && let Some((r, n)) = prefix_alias(rest, &CACHE_RESULTS)
        {
            result = Some(r);
            rest = rest.get(n + 1..).unwrap_or("");
        } else {
            break;
        }
    }
    let op = op.unwrap_or(0) as u64;
    let result = result.unwrap_or(0) as u64;
    Ok(cache as u64 | op << 8 | result << 16)
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
    /// `PERF_TYPE_HARDWARE`, `PERF_TYPE_SOFTWARE` or `PERF_TYPE_HW_CACHE`.
    pub type_: u32,
    /// The config (without an extended PMU type).
    pub config: u64,
    /// perf's printed name for it (`cs` is `context-switches`, `L1-dcache-load` is
    /// `L1-dcache-loads`).
    pub canonical: String,
    /// The core PMU the name carried (`cpu_core` of `cpu_core/cycles/`), if any.
    pub pmu: Option<String>,
}

/// Resolves a legacy event name as perf prints or accepts it, without sysfs: `cs`, `faults`,
/// `cycles`, `cpu-cycles`, `branches`, `L1-dcache-loads`, `LLC-load-misses`, and the hybrid
/// spellings `cpu_core/cycles/` and `cpu_atom/L1-dcache-loads/`. Modifiers (`cycles:u`) are
/// ignored. Readers of perf's output (logs, perf.data) use this to see that two spellings
/// are one event; `None` for names that are not legacy events.
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
        Some((b, m)) if super::grammar::is_modifier_text(m) || m.is_empty() => b,
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
        for name in [
            "L1-dcache-loads",
            "L1-dcache-load-misses",
            "LLC-loads",
            "LLC-load-misses",
            "dTLB-loads",
            "dTLB-load-misses",
            "iTLB-loads",
            "iTLB-load-misses",
            "L1-icache-loads",
            "L1-icache-load-misses",
            "L1-dcache-prefetches",
            "L1-dcache-prefetch-misses",
        ] {
            let c = cache_config(name).unwrap();
            assert_eq!(legacy_name(TYPE_HW_CACHE, c).as_deref(), Some(name));
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
        for name in DETAILED.iter().flat_map(|l| l.iter()) {
            assert_eq!(
                legacy_name(TYPE_HW_CACHE, cache_config(name).unwrap()).as_deref(),
                Some(*name)
            );
        }
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
        let core = legacy("cpu_core/cycles/").unwrap();
        assert_eq!((core.pmu.as_deref(), core.canonical.as_str()), (Some("cpu_core"), "cycles"));
        assert_eq!(legacy("cpu_atom/L1-dcache-load-misses/").unwrap().config, 1 << 16);
        assert_eq!(legacy("INST_RETIRED.ANY"), None);
        assert_eq!(legacy("cpu/event=0x3c/"), None);
    }
}
