//! The TMA tree as data: parents from `tma_X_group`, depth-first order, and the bottleneck
//! path every view that marks a bottleneck uses (`stat`'s tree, `report`, `eval`).

use crate::plan::Plan;
use crate::plan_eval::RootResult;

/// One node of the TMA tree view, in print order (depth first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeNode {
    /// The plan root (with [`tma_tree`]: the index into its nodes).
    pub root: usize,
    /// Its depth: 0 for level-1 nodes.
    pub depth: usize,
    /// Its threshold is not crossed ("not a problem here"): hidden unless all nodes show.
    pub below: bool,
    /// It is on the bottleneck path.
    pub bottleneck: bool,
    /// It has a threshold that could not be decided (its events were not counted), so the
    /// bottleneck path does not go past its level.
    pub undecided: bool,
}

/// One metric as the TMA tree reads it, for views that have no [`Plan`] (`eval`, `eval
/// --from-perf`).
#[derive(Debug, Clone, Copy)]
pub struct TmaNode<'a> {
    /// The metric's name.
    pub name: &'a str,
    /// Its metric groups, `;`-separated: `tma_X_group` makes it a child of `tma_X`.
    pub groups: &'a str,
    /// Its PMU: each core type of a hybrid machine has a tree of its own.
    pub pmu: &'a str,
    /// Its value (NaN when it has none).
    pub value: f64,
    /// Its threshold: crossed, not crossed, or unknown (no threshold, or one whose inputs
    /// were not counted).
    pub threshold: Option<bool>,
    /// Whether the metric has a threshold at all (`MetricThreshold`).
    pub has_threshold: bool,
}

impl<'a> TmaNode<'a> {
    /// `metric` of `model` with its value and threshold state.
    pub fn of(
        model: &'a tmetric_catalog::Model,
        metric: usize,
        value: f64,
        threshold: Option<bool>,
    ) -> TmaNode<'a> {
        let m = model.metric(metric);
        TmaNode {
            name: model.str(m.name),
            groups: model.str(m.groups),
            pmu: model.str(m.pmu),
            value,
            threshold,
            has_threshold: !m.threshold_expr.is_empty(),
        }
    }
}

/// The TMA tree of a plan's roots ([`tma_tree`] over them): every view that draws the tree
/// or marks a bottleneck takes it from here.
pub fn tree(plan: &Plan, results: &[RootResult]) -> Vec<TreeNode> {
    let nodes: Vec<TmaNode<'_>> = plan
        .roots
        .iter()
        .zip(results)
        .map(|(r, result)| TmaNode::of(r.model, r.metric, result.value, result.threshold))
        .collect();
    tma_tree(&nodes)
}

/// The TMA tree of `nodes`, depth first: a metric is a child of `tma_X` when its groups name
/// `tma_X_group`. The bottleneck path follows, level by level, the crossed node with the
/// largest value, as toplev marks it (one path per core type on hybrid machines). A level
/// where a node's threshold could not be decided (its events were not counted: an interval
/// its group did not run in, `--metric-no-threshold`) ends the path: the bottleneck could be
/// that node, so none below is claimed.
pub fn tma_tree(nodes: &[TmaNode<'_>]) -> Vec<TreeNode> {
    let parent_of = |i: usize| -> Option<usize> {
        nodes[i].groups.split(';').find_map(|g| {
            let parent = g.strip_suffix("_group")?;
            nodes.iter().position(|n| n.name == parent).filter(|&p| p != i)
        })
    };
    let parents: Vec<Option<usize>> = (0..nodes.len()).map(parent_of).collect();
    let children = |p: Option<usize>| -> Vec<usize> {
        (0..nodes.len()).filter(|&i| parents[i] == p).collect()
    };
    let mut pmus: Vec<&str> = nodes.iter().map(|n| n.pmu).collect();
    pmus.sort_unstable();
    pmus.dedup();
    let path: Vec<usize> = pmus
        .iter()
        .flat_map(|pmu| {
            let within = |p: Option<usize>| -> Vec<usize> {
                children(p).into_iter().filter(|&i| nodes[i].pmu == *pmu).collect()
            };
            bottleneck_path(nodes, &within)
        })
        .collect();
    let mut out = Vec::new();
    let mut stack: Vec<(usize, usize)> = children(None).into_iter().rev().map(|i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        out.push(TreeNode {
            root: i,
            depth,
            below: nodes[i].threshold == Some(false),
            bottleneck: path.contains(&i),
            undecided: nodes[i].has_threshold && nodes[i].threshold.is_none(),
        });
        for c in children(Some(i)).into_iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    out
}

/// The bottleneck path: from the top level down, the crossed node with the largest value,
/// while every node of the level with a threshold has a known state.
fn bottleneck_path(
    nodes: &[TmaNode<'_>],
    children: &dyn Fn(Option<usize>) -> Vec<usize>,
) -> Vec<usize> {
    let mut path = Vec::new();
    let mut level = children(None);
    loop {
        if level.iter().any(|&i| nodes[i].has_threshold && nodes[i].threshold.is_none()) {
            return path;
        }
        let pick =
            level.iter().copied().filter(|&i| nodes[i].threshold == Some(true)).max_by(|&a, &b| {
                nodes[a].value.partial_cmp(&nodes[b].value).unwrap_or(std::cmp::Ordering::Equal)
            });
        match pick {
            Some(i) => {
                path.push(i);
                level = children(Some(i));
            }
            None => return path,
        }
    }
}

/// The roots on the bottleneck path (for views that mark it without drawing the tree).
pub fn bottleneck(plan: &Plan, results: &[RootResult]) -> Vec<usize> {
    tree(plan, results).into_iter().filter(|n| n.bottleneck).map(|n| n.root).collect()
}

/// The indices of `nodes` on the bottleneck path ([`tma_tree`]).
pub fn tma_bottleneck(nodes: &[TmaNode<'_>]) -> Vec<usize> {
    // The path holds crossed nodes only: without one there is no tree to build (the common
    // metrics have no thresholds, and `eval --from-perf` asks once per block).
    if !nodes.iter().any(|n| n.threshold == Some(true)) {
        return Vec::new();
    }
    tma_tree(nodes).into_iter().filter(|n| n.bottleneck).map(|n| n.root).collect()
}

/// The indices of `results` on the TMA bottleneck path of `model`'s metrics ([`tma_tree`]),
/// for front ends that hold results of their own kind (`eval`); `of` gives a result's metric,
/// value and threshold state.
pub fn bottleneck_of<R>(
    model: &tmetric_catalog::Model,
    results: &[R],
    of: impl Fn(&R) -> (usize, f64, Option<bool>),
) -> Vec<usize> {
    let nodes: Vec<TmaNode<'_>> = results
        .iter()
        .map(|r| {
            let (metric, value, threshold) = of(r);
            TmaNode::of(model, metric, value, threshold)
        })
        .collect();
    tma_bottleneck(&nodes)
}
