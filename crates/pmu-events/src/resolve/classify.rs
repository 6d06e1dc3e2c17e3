//! What one identifier names on a model: a metric of the same PMU, a JSON event (with
//! `PMU@EVENT,terms@mods` and `EVENT:mods` forms), an event of a sysfs PMU, a kernel-named event,
//! or a tool event.

use std::collections::{HashMap, HashSet};

use tmetric_model::catalog::Tool;

use super::{IdSlot, SlotKind};
use crate::Table;

/// Kernel event names perf knows without JSON besides its legacy events
/// (`tmetric_names`): the x86 `cpu/events/` aliases and arm64 sysfs aliases. Compared
/// case-insensitively.
const SYSFS_ALIASES: &[&str] = &[
    "slots",
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
    "topdown-heavy-ops",
    "topdown-br-mispredict",
    "topdown-fetch-lat",
    "topdown-mem-bound",
    "cycles-t",
    "cycles-ct",
    "tx-start",
    "tx-commit",
    "tx-abort",
    "tx-capacity",
    "tx-conflict",
    "el-start",
    "el-commit",
    "el-abort",
    "el-capacity",
    "el-conflict",
    "mem-loads",
    "mem-stores",
    "mem-loads-aux",
    // armv8 PMU sysfs aliases missing from arm64's standard JSON (hip08 uses them).
    "l2i_cache",
    "l2i_cache_refill",
];

/// Whether perf knows `lower` (a lower-cased name) without JSON: one of its legacy events
/// (any alias or cache spelling) or a kernel sysfs alias.
fn is_kernel_event(lower: &str) -> bool {
    tmetric_names::is_legacy_name(lower) || SYSFS_ALIASES.contains(&lower)
}

/// PMU names that exist in sysfs on real machines but have no JSON table PMU, or whose
/// instances are named directly (`uncore_cha_0`).
fn is_sysfs_pmu(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "msr",
        "power",
        "cstate_core",
        "cstate_pkg",
        "cstate_module",
        "cpu",
        "cpu_core",
        "cpu_atom",
        "breakpoint",
        "software",
        "tracepoint",
        "kprobe",
        "uprobe",
        "intel_pt",
        "intel_bts",
        "hv_24x7",
        "hv_gpci",
        "cpum_cf",
        "cpum_sf",
        "pai_crypto",
        "pai_ext",
        "amd_iommu",
        "ibs_op",
        "ibs_fetch",
        "amd_df",
        "amd_l3",
        "amd_umc",
        "armv8_pmuv3",
    ];
    let lower = name.to_ascii_lowercase();
    NAMES.contains(&lower.as_str())
        || lower.starts_with("uncore_")
        || lower.starts_with("cstate_")
        || lower.starts_with("armv8_")
        || lower.starts_with("imx")
        || lower.starts_with("hisi_")
        || lower.starts_with("arm_")
        || lower.starts_with("amd_")
        || lower.starts_with("cbox_")
        || lower.starts_with("cha_")
        || lower.starts_with("dmc")
        || lower.starts_with("nest_")
}

fn is_core_pmu(pmu: &str) -> bool {
    matches!(pmu, "default_core" | "cpu" | "cpu_core" | "cpu_atom")
}

fn tool_event(name: &str) -> Option<Tool> {
    match name {
        "duration_time" => Some(Tool::DurationTime),
        "user_time" => Some(Tool::UserTime),
        "system_time" => Some(Tool::SystemTime),
        _ => None,
    }
}

pub(super) struct Lookup<'t, 'a> {
    table: &'t Table,
    /// Lower-cased architecture-standard event names the kernel's core PMU driver exposes in
    /// sysfs (arm64 `armv8_pmuv3*/events/cpu_cycles`, ...), so perf resolves them without JSON.
    core_aliases: &'a HashSet<String>,
    /// Lower-cased event name to indices, in table order.
    events: HashMap<String, Vec<usize>>,
    /// (metric PMU, lower-cased name) to the first metric of that name.
    pub(super) metrics: HashMap<(&'t str, String), usize>,
    /// Lower-cased PMU names of the table's events.
    pmus: Vec<String>,
}

impl<'t, 'a> Lookup<'t, 'a> {
    pub(super) fn new(table: &'t Table, core_aliases: &'a HashSet<String>) -> Lookup<'t, 'a> {
        let mut events: HashMap<String, Vec<usize>> = HashMap::new();
        let mut pmus: Vec<String> = Vec::new();
        for (i, event) in table.events.iter().enumerate() {
            events.entry(event.name.to_ascii_lowercase()).or_default().push(i);
            let pmu = event.pmu.to_ascii_lowercase();
            if !pmus.contains(&pmu) {
                pmus.push(pmu);
            }
        }
        let mut metrics = HashMap::new();
        for (i, metric) in table.metrics.iter().enumerate() {
            metrics.entry((metric.pmu.as_str(), metric.name.to_ascii_lowercase())).or_insert(i);
        }
        Lookup { table, core_aliases, events, metrics, pmus }
    }

    /// A JSON event by name, preferring `pmu` (or the core PMU for a core metric).
    fn event(&self, name: &str, pmu: Option<&str>, metric_pmu: &str) -> Option<usize> {
        let candidates = self.events.get(&name.to_ascii_lowercase())?;
        let event_pmu = |i: &usize| self.table.events[*i].pmu.as_str();
        let wanted = match pmu {
            // `cpu@X@` names the core PMU, which JSON calls `default_core` on non-hybrid.
            Some("cpu") => Some("default_core"),
            Some(p) => Some(p),
            None => None,
        };
        if let Some(wanted) = wanted {
            // A `uncore_cha_0@X@` style instance matches the table PMU `uncore_cha`.
            return candidates
                .iter()
                .copied()
                .find(|i| same_pmu(&wanted.to_ascii_lowercase(), event_pmu(i)));
        }
        candidates
            .iter()
            .copied()
            .find(|i| event_pmu(i) == metric_pmu)
            .or_else(|| candidates.iter().copied().find(|i| is_core_pmu(event_pmu(i))))
            .or_else(|| candidates.first().copied())
    }

    fn is_table_pmu(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.pmus.iter().any(|p| same_pmu(&lower, p))
    }
}

/// Whether a PMU named in an expression (lower case) is the table PMU `table_pmu`, as
/// perf's PMU name matching sees it: `cha`, `uncore_cha` and `uncore_cha_0` all name
/// `uncore_cha`, and `cbox_0` names an instance of `uncore_cbox`.
fn same_pmu(named: &str, table_pmu: &str) -> bool {
    let strip_instance = |name: &str| -> String {
        let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
        base.strip_suffix('_').unwrap_or(name).to_string()
    };
    let table_pmu = table_pmu.to_ascii_lowercase();
    [named.to_string(), strip_instance(named)]
        .iter()
        .any(|candidate| *candidate == table_pmu || format!("uncore_{candidate}") == table_pmu)
}

/// Splits `pmu@terms@mods` (perf's `/` spelled `@`) into its three parts.
fn split_at_form(id: &str) -> Option<(&str, &str, &str)> {
    let first = id.find('@')?;
    let last = id.rfind('@')?;
    if first == last {
        return Some((&id[..first], &id[first + 1..], ""));
    }
    Some((&id[..first], &id[first + 1..last], &id[last + 1..]))
}

/// Resolves one identifier to an input slot description, or explains why it cannot.
pub(super) fn classify(
    id: &str,
    lookup: &Lookup<'_, '_>,
    metric_pmu: &str,
) -> Result<IdSlot, String> {
    let slot = |kind, pmu: &str, event: &str, terms: &str, modifiers: &str| IdSlot {
        text: id.to_string(),
        kind,
        pmu: pmu.to_string(),
        event: event.to_string(),
        terms: terms.to_string(),
        modifiers: modifiers.to_string(),
        retire_latency: modifiers.contains('R'),
    };
    if let Some(tool) = tool_event(id) {
        return Ok(slot(SlotKind::Tool(tool), "", id, "", ""));
    }
    if let Some((head, middle, modifiers)) = split_at_form(id) {
        let (event_part, terms) = match middle.split_once(',') {
            Some((event, terms)) => (event, terms),
            None => (middle, ""),
        };
        let named_event = !event_part.contains('=');
        if lookup.is_table_pmu(head) || is_sysfs_pmu(head) {
            if named_event {
                if let Some(i) = lookup.event(event_part, Some(head), metric_pmu) {
                    return Ok(slot(SlotKind::Event(i), head, event_part, terms, modifiers));
                }
                if is_kernel_event(&event_part.to_ascii_lowercase()) {
                    return Ok(slot(SlotKind::Kernel, head, event_part, terms, modifiers));
                }
                if is_core_pmu(head) {
                    return Err(format!(
                        "`{event_part}` is not an event of this model's `{head}` PMU"
                    ));
                }
                return Ok(slot(SlotKind::Sysfs, head, event_part, terms, modifiers));
            }
            return Ok(slot(SlotKind::Sysfs, head, "", middle, modifiers));
        }
        // `EVENT@terms@`: an event of any PMU, with extra terms.
        if let Some(i) = lookup.event(head, None, metric_pmu) {
            let pmu = lookup.table.events[i].pmu.clone();
            return Ok(slot(SlotKind::Event(i), &pmu, head, middle, modifiers));
        }
        return Err(format!("`{head}` is neither a PMU nor an event of this model"));
    }
    let (name, modifiers) = id.split_once(':').unwrap_or((id, ""));
    if let Some(i) = lookup.event(name, None, metric_pmu) {
        let pmu = lookup.table.events[i].pmu.clone();
        return Ok(slot(SlotKind::Event(i), &pmu, name, "", modifiers));
    }
    let lower = name.to_ascii_lowercase();
    if is_kernel_event(&lower) || lookup.core_aliases.contains(&lower) {
        return Ok(slot(SlotKind::Kernel, "", name, "", modifiers));
    }
    if name.eq_ignore_ascii_case("tsc") {
        // perf resolves the bare `TSC` event to `msr/tsc/`.
        return Ok(slot(SlotKind::Sysfs, "msr", "tsc", "", modifiers));
    }
    // perf's expression parser takes any name (Granite Rapids' `... * PEBS`, a placeholder
    // Intel's converter left), so the metric is listed, and only opening it fails:
    // parse-events finds no PMU or event of that name and the whole `-M` is refused.
    Err(format!(
        "`{id}` is not a metric, an event of this model, a kernel event or a tool event; perf parses the formula but finds no PMU or event `{id}` to open, so it refuses any -M selection that includes this metric"
    ))
}
