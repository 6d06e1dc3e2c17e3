//! Event encodings on a simulated machine: vendor terms placed by the PMU's formats, legacy
//! names, and the PMUs and CPUs an event of a metric counts on.

use tmetric_runtime::Attr;

use crate::machine::{Machine, PmuClass};

/// `event=0x3c,umask=1` terms, later ones overriding earlier ones; a term without a value
/// is 1.
pub(super) fn terms(text: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => {
                let v = v.trim();
                let parsed = if let Some(hex) = v.strip_prefix("0x").or(v.strip_prefix("0X")) {
                    u64::from_str_radix(hex, 16).ok()
                } else {
                    v.parse().ok()
                };
                let Some(parsed) = parsed else { continue };
                (n.trim().to_string(), parsed)
            }
            None => (part.to_string(), 1),
        };
        out.retain(|(n, _)| *n != name);
        out.push((name, value));
    }
    out
}

/// Takes perf 7.x's `cpu` term out of `text`: the CPUs it names (an online CPU's number or a
/// PMU's CPUs, as parse-events.c's `get_config_cpu` reads it; `cpu=cpu_core` in 7.2's Alder
/// Lake formulas reads the TSC on one core type's CPUs), and the other terms.
pub(super) fn take_cpu_term(machine: &Machine, text: &str) -> (String, Option<Vec<u32>>) {
    let mut cpus: Option<Vec<u32>> = None;
    let mut rest: Vec<&str> = Vec::new();
    for part in text.split(',') {
        let Some(value) = part.trim().strip_prefix("cpu=") else {
            rest.push(part);
            continue;
        };
        let value = value.trim();
        let named = match machine.pmus.iter().position(|p| p.name == value) {
            Some(p) => cpus_of(machine, p, &[]),
            None => value.parse::<u32>().ok().into_iter().collect(),
        };
        let all = cpus.get_or_insert_with(Vec::new);
        all.extend(named);
        all.sort_unstable();
        all.dedup();
    }
    (rest.join(","), cpus)
}

/// Writes `value` into the bits `spec` names (`config:0-7,21`, `config1:0-63`).
fn apply_format(spec: &str, value: u64, words: &mut [u64; 3]) -> bool {
    let Some((field, ranges)) = spec.split_once(':') else { return false };
    let word = match field {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        _ => return false,
    };
    let mut v = value;
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok(), b.parse::<u32>().ok()),
            None => (range.parse().ok(), range.parse().ok()),
        };
        let (Some(lo), Some(hi)) = (lo, hi) else { return false };
        let width = hi - lo + 1;
        let mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
        words[word] |= (v & mask) << lo;
        v = if width >= 64 { 0 } else { v >> width };
    }
    true
}

impl Machine {
    /// The attribute perf's term list `terms` (`event=0x3c,umask=1,cmask=1`, later terms
    /// overriding earlier ones; `config1=` and friends as raw words) makes on this machine's
    /// PMU `pmu`; `None` without that PMU or when a term has no format there.
    pub fn encode(&self, pmu: &str, terms: &str) -> Option<Attr> {
        let index = self.pmus.iter().position(|p| p.name == pmu)?;
        attr_on(self, index, terms)
    }
}

/// The attribute `terms` make on machine PMU `pmu`; `None` when a term has no format.
pub(super) fn attr_on(machine: &Machine, pmu: usize, text: &str) -> Option<Attr> {
    let p = &machine.pmus[pmu];
    let mut words = [0u64; 3];
    for (name, value) in terms(text) {
        if name == "period" {
            continue;
        }
        // perf's built-in terms for the raw attribute words.
        let raw = match name.as_str() {
            "config" => Some(0),
            "config1" => Some(1),
            "config2" => Some(2),
            _ => None,
        };
        if let Some(word) = raw {
            words[word] = value;
            continue;
        }
        let spec = p.formats.iter().find(|(n, _)| *n == name).map(|(_, s)| s.as_str())?;
        if !apply_format(spec, value, &mut words) {
            return None;
        }
    }
    Some(Attr {
        type_: p.type_,
        config: words[0],
        config1: words[1],
        config2: words[2],
        ..Attr::default()
    })
}

/// `PERF_TYPE_HARDWARE` ids by name.
pub(super) fn generic_id(name: &str) -> Option<u64> {
    Some(match name {
        "cycles" | "cpu-cycles" => 0,
        "instructions" => 1,
        "cache-references" => 2,
        "cache-misses" => 3,
        "branches" | "branch-instructions" => 4,
        "branch-misses" => 5,
        "bus-cycles" => 6,
        "stalled-cycles-frontend" => 7,
        "stalled-cycles-backend" => 8,
        "ref-cycles" => 9,
        _ => return None,
    })
}

pub(super) fn is_core_pmu(class: &PmuClass) -> bool {
    matches!(class, PmuClass::X86Core(_) | PmuClass::Arm(_))
}

/// Machine PMUs a JSON or identifier PMU name means: the PMU itself, its numbered boxes
/// (`uncore_cha` -> `uncore_cha_0`, `uncore_cha_1`), `default_core`/`cpu` the core PMU(s).
pub(super) fn pmus_named(machine: &Machine, name: &str, context: &[usize]) -> Vec<usize> {
    let cores: Vec<usize> =
        (0..machine.pmus.len()).filter(|&i| is_core_pmu(&machine.pmus[i].class)).collect();
    if name.is_empty() || name == "default_core" || (name == "cpu" && machine.pmu("cpu").is_none())
    {
        return if context.is_empty() { cores } else { context.to_vec() };
    }
    // perf matches `cha` and `imc_0` to `uncore_cha_*` and `uncore_imc_0` too.
    let matches = |p: &str| {
        let bare = p.strip_prefix("uncore_").unwrap_or(p);
        [p, bare].iter().any(|p| {
            *p == name
                || p.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
    };
    (0..machine.pmus.len()).filter(|&i| matches(&machine.pmus[i].name)).collect()
}

/// The CPUs an event of PMU `pmu` is counted on under `-a`: its `cpumask`, else its `cpus`,
/// else every CPU.
pub(super) fn cpus_of(machine: &Machine, pmu: usize, context: &[u32]) -> Vec<u32> {
    let p = &machine.pmus[pmu];
    if let Some(mask) = &p.cpumask {
        return mask.clone();
    }
    if let Some(cpus) = &p.cpus {
        return cpus.clone();
    }
    // `msr` and other PMUs without a mask are opened on every CPU, also in a metric of one
    // hybrid core type (as perf does).
    let _ = context;
    machine.cpu_ids()
}
