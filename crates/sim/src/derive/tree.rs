//! The TMA tree of a core PMU as the workload sees it (levels, parents, the nodes the model
//! lacks folded into their parents), metrics' valid ranges and the Arm `strcmp_cpuid_str`
//! probe.

use std::collections::{BTreeMap, HashMap};

use super::problem::MetricDef;
use crate::machine::{CpuId, Machine};

/// The tree of one core PMU context: node metric indices with parent and level.
pub(super) struct Tree {
    /// `(metric, parent metric or None, level)` in depth-first order.
    pub(super) nodes: Vec<(usize, Option<usize>, u32)>,
}

pub(super) fn tree_level(groups: &str) -> Option<u32> {
    groups.split(';').find_map(|g| {
        g.strip_prefix("TopdownL")
            .or_else(|| g.strip_prefix("PipelineL"))
            .and_then(|n| n.parse::<u32>().ok())
    })
}

pub(super) fn build_tree(metrics: &[MetricDef], groups: &[String], pmu: &str) -> Tree {
    let members: Vec<usize> = (0..metrics.len())
        .filter(|&m| metrics[m].pmu == pmu && metrics[m].tree && tree_level(&groups[m]).is_some())
        .collect();
    let by_name: HashMap<&str, usize> =
        members.iter().map(|&m| (metrics[m].name.as_str(), m)).collect();
    let parent_of = |m: usize| -> Option<usize> {
        groups[m].split(';').find_map(|g| {
            let parent = g.strip_suffix("_group")?;
            if parent.starts_with("tma_L") {
                return None;
            }
            by_name.get(parent).copied().filter(|&p| p != m)
        })
    };
    let mut children: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
    for &m in &members {
        let parent = if tree_level(&groups[m]) == Some(1) { None } else { parent_of(m) };
        // A deeper node whose parent is not in the tree hangs nowhere: left out.
        if parent.is_none() && tree_level(&groups[m]) != Some(1) {
            continue;
        }
        children.entry(parent).or_default().push(m);
    }
    for list in children.values_mut() {
        list.sort_by(|&a, &b| metrics[a].name.cmp(&metrics[b].name));
    }
    let mut nodes = Vec::new();
    fn walk(
        at: Option<usize>,
        level: u32,
        children: &BTreeMap<Option<usize>, Vec<usize>>,
        nodes: &mut Vec<(usize, Option<usize>, u32)>,
    ) {
        for &c in children.get(&at).map(Vec::as_slice).unwrap_or(&[]) {
            if nodes.iter().any(|n| n.0 == c) || level > 12 {
                continue;
            }
            nodes.push((c, at, level));
            walk(Some(c), level + 1, children, nodes);
        }
    }
    walk(None, 1, &children, &mut nodes);
    Tree { nodes }
}

/// The workload's tree made whole for `tree`: fractions of slots per node.
pub(super) fn effective_tree(
    tree: &Tree,
    metrics: &[MetricDef],
    given: &BTreeMap<String, f64>,
) -> HashMap<usize, f64> {
    let mut out: HashMap<usize, f64> = HashMap::new();
    let mut parents: Vec<Option<usize>> = vec![None];
    parents.extend(tree.nodes.iter().map(|n| Some(n.0)));
    for parent in parents {
        let kids: Vec<usize> = tree.nodes.iter().filter(|n| n.1 == parent).map(|n| n.0).collect();
        if kids.is_empty() {
            continue;
        }
        let whole = match parent {
            None => 1.0,
            Some(p) => out.get(&p).copied().unwrap_or(0.0),
        };
        if kids.len() == 1 && parent.is_some() {
            let k = kids[0];
            let v = given.get(&metrics[k].name).copied().unwrap_or(0.1 * whole).min(whole);
            out.insert(k, v);
            continue;
        }
        let named: Vec<(usize, f64)> =
            kids.iter().filter_map(|&k| given.get(&metrics[k].name).map(|&v| (k, v))).collect();
        let unnamed: Vec<usize> =
            kids.iter().copied().filter(|k| !named.iter().any(|n| n.0 == *k)).collect();
        let sum: f64 = named.iter().map(|n| n.1).sum();
        if sum > whole || (unnamed.is_empty() && sum > 0.0) {
            for (k, v) in named {
                out.insert(k, v * whole / sum);
            }
            for k in unnamed {
                out.insert(k, 0.0);
            }
        } else if unnamed.is_empty() {
            // Nothing named and nothing to share: equal parts.
            for &k in &kids {
                out.insert(k, whole / kids.len() as f64);
            }
        } else {
            for (k, v) in named {
                out.insert(k, v);
            }
            let share = (whole - sum) / unnamed.len() as f64;
            for k in unnamed {
                out.insert(k, share);
            }
        }
    }
    out
}

/// The valid range of a metric, raw: tree nodes 0..1, percentages 0..100 printed, else
/// non-negative.
pub(super) fn valid_range(unit: &str, scale: f64, tree: bool) -> (f64, f64) {
    if tree {
        return (0.0, 100.0 / scale);
    }
    let percent = unit.contains('%') || unit.contains("percent");
    if percent {
        return (0.0, 100.0 / scale);
    }
    (0.0, f64::INFINITY)
}

/// arm64's `strcmp_cpuid_str`: implementer, architecture and part equal, variant and revision
/// at least the given ones.
pub(super) fn midr_matches(machine: &Machine, arg: &str) -> f64 {
    let CpuId::Midr(midr) = machine.id else { return 0.0 };
    let Ok(want) = u64::from_str_radix(arg.trim_start_matches("0x"), 16) else { return 0.0 };
    let fixed = |m: u64| m & 0xff0f_fff0;
    let rev = |m: u64| (m >> 20 & 0xf) << 4 | (m & 0xf);
    f64::from(u8::from(fixed(midr) == fixed(want) && rev(midr) >= rev(want)))
}
