//! PMU names: perf's matching of table `Unit`s and written PMU names against sysfs PMUs
//! (suffixes, `socket,pmuname`, globs), its PMU order, and the names events are printed with.

use super::PmuFacts;
use crate::sysfs::Sysfs;

/// Whether a vendor table's `Unit` PMU name (`default_core`, `cpu_core`, `uncore_imc`,
/// `socket,pmuname`) names sysfs PMU `pmu` (perf's `pmu__name_match`).
pub fn table_pmu_matches(table_pmu: &str, pmu: &PmuFacts<'_>) -> bool {
    table_pmu == pmu.name
        || (pmu.core && (table_pmu == "default_core" || (table_pmu == "cpu" && pmu.name == "cpu")))
        || (pmu.uncore && uncore_alias_match(table_pmu, pmu.name))
}

/// perf's `perf_pmu__match_ignoring_suffix`: `name` is `tok`, or `tok` plus an optional `_`
/// and a number (hex suffixes need 3 digits or more, so `cpu_core` is not `cpu_c` + `ore`).
pub fn matches_ignoring_suffix(name: &str, tok: &str) -> bool {
    let Some(rest) = name.strip_prefix(tok) else { return false };
    if rest.is_empty() {
        return true;
    }
    let digits = rest.strip_prefix('_').unwrap_or(rest);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    digits.chars().all(|c| c.is_ascii_digit()) || digits.len() > 2
}

fn uncore_alias_match(table_pmu: &str, name: &str) -> bool {
    if !table_pmu.contains(',') {
        return matches_ignoring_suffix(name, table_pmu);
    }
    // `socket,pmuname` matches `socketX_pmunameY`: the tokens in order.
    let toks: Vec<&str> = table_pmu.split(',').collect();
    let mut rest = name;
    for (i, tok) in toks.iter().enumerate() {
        let Some(at) = rest.find(tok) else { return false };
        rest = &rest[at..];
        if i + 1 == toks.len() {
            return matches_ignoring_suffix(rest, tok);
        }
        rest = &rest[tok.len()..];
    }
    false
}

/// perf's `perf_pmu__match` for a PMU named in `pmu/terms/` that is not an exact sysfs name:
/// `uncore_imc` (or `imc`) matches `uncore_imc_0`, `uncore_imc_1`; `*` and `?` globs match.
pub fn pmu_wildcard_matches(pmu: &str, tok: &str) -> bool {
    let tok = tok.strip_prefix("uncore_").unwrap_or(tok);
    let name = pmu.strip_prefix("uncore_").unwrap_or(pmu);
    matches_ignoring_suffix(name, tok)
        || (tok.contains(['*', '?', '[']) && crate::glob::matches(tok, name))
}

pub(super) fn pmu_sort_key(name: &str) -> (String, u64) {
    // perf's `pmus_cmp`: names compare without a numeric suffix first, then by the number.
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, num) = name.split_at(name.len() - digits);
    (stem.to_string(), num.parse().unwrap_or(0))
}

/// A name that can only be a PMU (`uncore_imc_7`, `cpu_core`): reported as a missing PMU.
pub(super) fn pmu_name_like(head: &str) -> bool {
    head.starts_with("uncore_")
        || head.starts_with("cpu")
        || head.starts_with("armv")
        || head.starts_with("amd_")
        || matches!(head, "msr" | "power" | "software" | "tracepoint" | "breakpoint")
        || head.starts_with("cstate")
}

/// perf's `is_pmu_core`: `cpu`, `cpum_cf`, or a PMU with a `cpus` file.
pub fn is_core_pmu(sysfs: &Sysfs, name: &str) -> bool {
    name == "cpu" || name == "cpum_cf" || sysfs.pmu_devices().join(name).join("cpus").exists()
}

/// The printed name: the text as written, labelled with its PMU where perf would (perf's
/// `uniquify_event_name`: `cpu_core/cycles/` on a hybrid core PMU; `NAME [uncore_imc_0]` for
/// one of several uncore instances, which perf would merge).
pub(super) fn display_name(
    text: &str,
    pmu: Option<&str>,
    hybrid: bool,
    many_uncore: bool,
    sysfs: &Sysfs,
) -> String {
    let Some(pmu) = pmu else { return text.to_string() };
    if text.starts_with(pmu) {
        return text.to_string();
    }
    if hybrid && is_core_pmu(sysfs, pmu) {
        return match text.find('/') {
            Some(i) => format!("{pmu}{}", &text[i..]),
            None => format!("{pmu}/{text}/"),
        };
    }
    if many_uncore {
        return box_name(text, pmu);
    }
    text.to_string()
}

/// The name perf prints for `display` counted on uncore box `pmu` alone (`-A`,
/// `--no-merge`): `uncore_imc_0/event=0x5/` for `uncore_imc/event=0x5/`,
/// `UNC_M_CAS_COUNT.RD [uncore_imc_0]` for a name.
pub fn box_name(display: &str, pmu: &str) -> String {
    if display.starts_with(pmu) {
        return display.to_string();
    }
    match display.find('/') {
        Some(i) => format!("{pmu}{}", &display[i..]),
        None => format!("{display} [{pmu}]"),
    }
}
