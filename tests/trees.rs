//! Snapshots of resolved metric trees for a curated list of metrics, with the events each
//! needs on machines with SMT on and off.
//!
//! Review changes with `cargo insta review`; never edit the `.snap` files by hand.

use std::fmt::Write as _;

use tmetric_catalog::Model;
use tmetric_engine::Select;
use tmetric_expr::{Expr, ExprKind, Literal};
use tmetric_model::catalog::Facts;
use tmetric_pmu_events::resolve::{ResolvedTable, SlotKind, Target};

use crate::catalogue::{generated, resolved};

/// Prints one node per line, identifiers annotated with what they resolved to.
fn render(out: &mut String, r: &ResolvedTable<'_>, metric: usize, expr: &Expr, depth: usize) {
    let pad = "  ".repeat(depth);
    let ident = |name: &str| match r.metrics[metric].targets[name] {
        Target::Metric(m) => format!("metric {}", r.table.metrics[m].name),
        Target::Id(slot) => {
            let id = &r.ids[slot];
            let what = match id.kind {
                SlotKind::Event(e) => {
                    let event = &r.table.events[e];
                    format!("event {} [{}/{}/]", event.name, event.pmu, event.encoding)
                }
                SlotKind::Kernel => "kernel event".to_string(),
                SlotKind::Sysfs => format!("sysfs event of `{}`", id.pmu),
                SlotKind::Tool(tool) => format!("tool {tool:?}"),
                SlotKind::Probe => "probe".to_string(),
            };
            let extra = if id.terms.is_empty() { String::new() } else { format!(" +{}", id.terms) };
            let latency = if id.retire_latency { " (retire latency)" } else { "" };
            format!("{} -> {what}{extra}{latency}", id.text)
        }
    };
    let _ = match &expr.kind {
        ExprKind::Num(v) => writeln!(out, "{pad}{v}"),
        ExprKind::Literal(name) => writeln!(out, "{pad}#{name}"),
        ExprKind::Id(id) => writeln!(out, "{pad}{}", ident(&id.name)),
        ExprKind::IdCall(func, id) => writeln!(out, "{pad}{}({})", func.name(), ident(&id.name)),
        ExprKind::Neg(inner) => {
            let _ = writeln!(out, "{pad}neg");
            render(out, r, metric, inner, depth + 1);
            Ok(())
        }
        ExprKind::Bin(op, a, b) => {
            let _ = writeln!(out, "{pad}{}", op.symbol());
            render(out, r, metric, a, depth + 1);
            render(out, r, metric, b, depth + 1);
            Ok(())
        }
        ExprKind::Call(func, a, b) => {
            let _ = writeln!(out, "{pad}{}", func.name());
            render(out, r, metric, a, depth + 1);
            render(out, r, metric, b, depth + 1);
            Ok(())
        }
        ExprKind::If { then, cond, otherwise } => {
            let _ = writeln!(out, "{pad}if");
            render(out, r, metric, cond, depth + 1);
            let _ = writeln!(out, "{pad}then");
            render(out, r, metric, then, depth + 1);
            let _ = writeln!(out, "{pad}else");
            render(out, r, metric, otherwise, depth + 1);
            Ok(())
        }
    };
}

fn needed(model: &Model, metric: usize, smt_on: f64) -> String {
    let mut literals = [1.0; Literal::COUNT];
    literals[Literal::SmtOn.index()] = smt_on;
    let probes = vec![1.0; model.ids.len()];
    let facts = Facts { literals: &literals, probes: &probes };
    match model.needed_ids(metric, &facts, true) {
        Ok(ids) => ids
            .iter()
            .map(|&slot| model.str(model.ids[slot as usize].text))
            .collect::<Vec<_>>()
            .join("\n    "),
        Err(fail) => format!("(fails: {fail})"),
    }
}

/// The snapshot text of one metric: its tree, the trees of every metric it references, and
/// its needed events.
fn snapshot(path: &str, name: &str, pmu: Option<&str>) -> String {
    let r = resolved()
        .iter()
        .find(|r| r.table.path == path)
        .unwrap_or_else(|| panic!("no table {path}"));
    let m = (0..r.table.metrics.len())
        .find(|&m| {
            r.table.metrics[m].name == name && pmu.is_none_or(|p| r.table.metrics[m].pmu == p)
        })
        .unwrap_or_else(|| panic!("no metric {name} in {path}"));
    let model = generated(r);
    let generated_index = model
        .metrics()
        .position(|x| model.str(x.name) == name && pmu.is_none_or(|p| model.str(x.pmu) == p))
        .expect("generated");
    let mut out = String::new();
    let mut queue = vec![m];
    let mut seen = Vec::new();
    while let Some(current) = queue.pop() {
        if seen.contains(&current) {
            continue;
        }
        seen.push(current);
        let metric = &r.table.metrics[current];
        let _ = writeln!(
            out,
            "metric {} (pmu {}, groups {})",
            metric.name,
            metric.pmu,
            metric.groups.join(";")
        );
        let _ = writeln!(out, "  expr: {}", metric.expr);
        render(&mut out, r, current, r.metrics[current].expr.as_ref().expect("compiled"), 2);
        if current == m
            && let Some(threshold) = &r.metrics[current].threshold
        {
            let _ =
                writeln!(out, "  threshold: {}", metric.threshold.as_deref().unwrap_or_default());
            render(&mut out, r, current, threshold, 2);
        }
        let mut refs = r.metrics[current].metric_refs();
        refs.reverse();
        queue.extend(refs);
    }
    let _ = writeln!(out, "needed events, SMT on:\n    {}", needed(model, generated_index, 1.0));
    let _ = writeln!(out, "needed events, SMT off:\n    {}", needed(model, generated_index, 0.0));
    out
}

macro_rules! tree_snapshot {
    ($test:ident, $path:expr, $name:expr) => {
        tree_snapshot!($test, $path, $name, None);
    };
    ($test:ident, $path:expr, $name:expr, $pmu:expr) => {
        #[test]
        fn $test() {
            insta::assert_snapshot!(snapshot($path, $name, $pmu));
        }
    };
}

tree_snapshot!(meteorlake_tma_dtlb_store, "x86/meteorlake", "tma_dtlb_store", Some("cpu_core"));
tree_snapshot!(sapphirerapids_tma_frontend_bound, "x86/sapphirerapids", "tma_frontend_bound");
tree_snapshot!(sapphirerapids_tma_bad_speculation, "x86/sapphirerapids", "tma_bad_speculation");
tree_snapshot!(sapphirerapids_tma_backend_bound, "x86/sapphirerapids", "tma_backend_bound");
tree_snapshot!(sapphirerapids_tma_retiring, "x86/sapphirerapids", "tma_retiring");
tree_snapshot!(amdzen4_total_dispatch_slots, "x86/amdzen4", "total_dispatch_slots");
tree_snapshot!(neoverse_n2_v2_frontend_bound, "arm64/arm/neoverse-n2-v2", "frontend_bound");
tree_snapshot!(power9_memory_rd_bw_chip, "powerpc/power9", "Memory_RD_BW_Chip");
tree_snapshot!(skylake_tma_info_core_core_clks, "x86/skylake", "tma_info_core_core_clks");
tree_snapshot!(skylake_tma_backend_bound, "x86/skylake", "tma_backend_bound");
