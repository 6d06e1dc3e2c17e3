//! Marking and locating a metric's problems: the identifiers an expression uses, the vendor
//! file and line a diagnostic points at, and reference cycles and references to broken metrics.

use tmetric_expr::{Expr, ExprKind, IdFunc, ParseError};

use super::{Diagnostic, DiagnosticKind, ResolvedMetric};
use crate::{Metric, Table};

pub(super) fn literal_span(expr: &Expr, name: &str) -> tmetric_expr::Span {
    let mut span = expr.span;
    expr.walk(&mut |node| {
        if matches!(&node.kind, ExprKind::Literal(n) if n == name) {
            span = node.span;
        }
    });
    span
}

pub(super) fn mark(resolved: &mut ResolvedMetric, field: &str, field_ok: bool) {
    match field {
        "MetricExpr" => resolved.ok &= field_ok,
        _ => resolved.threshold_ok &= field_ok,
    }
}

/// Identifiers of an expression; `true` marks those only used as `has_event` or
/// `strcmp_cpuid_str` arguments, which may name things that do not exist.
pub(super) fn identifiers(expr: &Expr) -> Vec<(&tmetric_expr::Ident, bool)> {
    let mut out: Vec<(&tmetric_expr::Ident, bool)> = Vec::new();
    expr.walk(&mut |node| match &node.kind {
        ExprKind::Id(id) | ExprKind::IdCall(IdFunc::SourceCount | IdFunc::AggrNr, id) => {
            out.push((id, false))
        }
        ExprKind::IdCall(_, id) => out.push((id, true)),
        _ => {}
    });
    // An identifier used both ways is a real one.
    let real: Vec<String> =
        out.iter().filter(|(_, probe)| !probe).map(|(id, _)| id.name.clone()).collect();
    for entry in &mut out {
        if real.contains(&entry.0.name) {
            entry.1 = false;
        }
    }
    out
}

pub(super) fn parse_message(err: &ParseError) -> String {
    format!("does not parse: {}", err.message())
}

pub(super) fn location_file(metric: &Metric, field: &str) -> String {
    match field {
        "MetricThreshold" => {
            metric.threshold_at.as_ref().map_or(&metric.file, |at| &at.file).clone()
        }
        _ => metric.expr_at.file.clone(),
    }
}

pub(super) fn location_line(metric: &Metric, field: &str) -> usize {
    match field {
        "MetricThreshold" => metric.threshold_at.as_ref().map_or(metric.line, |at| at.line),
        _ => metric.expr_at.line,
    }
}

/// A diagnostic about a whole expression of metric `m` (no single spot to point at).
fn whole_metric(
    table: &Table,
    m: usize,
    field: &'static str,
    kind: DiagnosticKind,
    message: String,
) -> Diagnostic {
    let metric = &table.metrics[m];
    Diagnostic {
        table: table.path.clone(),
        metric: metric.name.clone(),
        file: location_file(metric, field),
        line: location_line(metric, field),
        field,
        kind,
        message,
        caret: None,
    }
}

/// Marks reference cycles and metrics that reference a broken metric.
pub(super) fn check_references(
    table: &Table,
    metrics: &mut [ResolvedMetric],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let refs: Vec<Vec<usize>> = metrics.iter().map(ResolvedMetric::metric_refs).collect();
    // Cycles: depth-first search keeping the chain of metric names. Iterative, with an
    // explicit stack: reference chains come from vendor data, whose length nothing bounds.
    let mut state = vec![0u8; metrics.len()];
    let mut in_cycle = vec![false; metrics.len()];
    fn dfs(
        root: usize,
        refs: &[Vec<usize>],
        state: &mut [u8],
        chain: &mut Vec<usize>,
        cycles: &mut Vec<Vec<usize>>,
    ) {
        // Per open node: the node and the next of its references to look at.
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        state[root] = 1;
        chain.push(root);
        while let Some((m, next)) = stack.last_mut() {
            let m = *m;
            let Some(&r) = refs[m].get(*next) else {
                chain.pop();
                state[m] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            if state[r] == 1 {
                let start = chain.iter().position(|&c| c == r).unwrap_or(0);
                let mut cycle = chain[start..].to_vec();
                cycle.push(r);
                cycles.push(cycle);
            } else if state[r] == 0 {
                state[r] = 1;
                chain.push(r);
                stack.push((r, 0));
            }
        }
    }
    let mut cycles = Vec::new();
    for m in 0..metrics.len() {
        if state[m] == 0 {
            dfs(m, &refs, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    for cycle in cycles {
        let names: Vec<&str> = cycle.iter().map(|&m| table.metrics[m].name.as_str()).collect();
        for &m in &cycle[..cycle.len() - 1] {
            if in_cycle[m] {
                continue;
            }
            in_cycle[m] = true;
            metrics[m].ok = false;
            diagnostics.push(whole_metric(
                table,
                m,
                "MetricExpr",
                DiagnosticKind::Cycle,
                format!("metric references form a cycle: {}", names.join(" -> ")),
            ));
        }
    }
    // Broken references, to a fixed point so chains propagate.
    loop {
        let mut changed = false;
        for m in 0..metrics.len() {
            if !metrics[m].ok {
                continue;
            }
            if let Some(&bad) = refs[m].iter().find(|&&r| !metrics[r].ok) {
                metrics[m].ok = false;
                changed = true;
                diagnostics.push(whole_metric(
                    table,
                    m,
                    "MetricExpr",
                    DiagnosticKind::BrokenReference,
                    format!(
                        "references metric `{}`, which does not compile",
                        table.metrics[bad].name
                    ),
                ));
            }
        }
        if !changed {
            break;
        }
    }
    // A threshold that reads a broken metric (other than its own) cannot be computed.
    for m in 0..metrics.len() {
        let bad = metrics[m].threshold_refs().into_iter().find(|&r| r != m && !metrics[r].ok);
        if let Some(bad) = bad
            && metrics[m].threshold_ok
            && metrics[m].threshold.is_some()
        {
            metrics[m].threshold_ok = false;
            metrics[m].threshold = None;
            diagnostics.push(whole_metric(
                table,
                m,
                "MetricThreshold",
                DiagnosticKind::BrokenReference,
                format!("references metric `{}`, which does not compile", table.metrics[bad].name),
            ));
        }
    }
}
