//! What `perf stat` prints differs between perf releases beyond the vendor tables: perf 7.x
//! dropped the built-in metrics of perf 6.12's `stat-shadow.c`, counts its `Default` metric
//! groups by default, prints a metric beside an event it could not count, renames a JSON key
//! and refuses a run that opens no event. [`Contract`] holds those differences as data, one
//! value per perf release whose layout tmetric follows. It is perf 6.12's unless
//! `--perf-version` chooses a release ([`current`]), even though the vendor tables default to
//! the newest vintage; the plan, the views, the printers and `stat` read its fields rather
//! than the version.

use tmetric_catalog::Vintage;

/// One perf release's output contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contract {
    /// The perf release it is (`6.12`, `7.2`).
    pub perf: &'static str,
    /// perf 6.12's built-in metrics (`CPUs utilized`, `GHz`, `insn per cycle`, `/sec`, the
    /// idle and miss ratios) print beside the events that feed them. perf 7.x has none: every
    /// metric it prints comes from a metric group.
    pub builtin_metrics: bool,
    /// What `stat` counts without `-e` or `-M`.
    pub defaults: Defaults,
    /// A metric prints on the line of its first input even when that input was not counted
    /// (`<not supported>`, its value `nan`), as perf 7.x prints it; perf 6.12 prints metrics
    /// on counted lines only, so a metric is hosted on a counted input where one exists.
    pub metrics_on_uncounted_lines: bool,
    /// The JSON key of the number of CPUs an aggregation unit (`--per-core`, ...) sums.
    pub json_unit_cpus: &'static str,
    /// `--metric-only`'s default layout: perf 7.x right-aligns a value in its column (the
    /// label's width, at least 20) with nothing after it (`print_metric_only`); perf 6.12
    /// makes a longer label's column one wider, widens it by the colour's escape codes and
    /// prints a blank after the value.
    pub metric_only_fitted: bool,
    /// A run that opens no event at all fails with perf 7.x's `No supported events found.`
    /// (exit 1), and `-C` CPUs that are not online are left out with a warning rather than
    /// refused (none left: no event opens). perf 6.12 prints such a run's events
    /// `<not supported>` and exits 0.
    pub needs_an_event: bool,
    /// perf 7.x's `tool` PMU (`tools/perf/util/tool_pmu.c`): `-e` reads `tool/EVENT/` and its
    /// machine facts (`num_cpus`, `smt_on`, ...) as events, each printed with the value perf
    /// reads when it opens it and no unit (the three times too: its `tool.json` gives none),
    /// and `list` shows them under `tool:`. perf 6.12 knows `duration_time`, `user_time`
    /// and `system_time` only, printed in `ns`.
    pub tool_pmu: bool,
    /// The expression grammar's `aggr_nr()` (perf 7.x's expr.l and expr.y); perf 6.12's has
    /// no such keyword, so `aggr_nr(X)` is a name followed by `(`, a syntax error.
    pub aggr_nr: bool,
}

/// What `stat` counts when neither `-e` nor `-M` names anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defaults {
    /// perf 6.12's default events (`crate::defaults::default_events`) and `-d`'s cache
    /// events, with the model's own `Default` metric group printed under its group's name.
    Events,
    /// perf 7.x's metric groups `Default`, and `Default2` to `Default4` for `-d` to `-ddd`,
    /// from the common table and the model's; the events are those metrics' inputs, each
    /// printed only where it hosts a metric, and (but `cycles`) only where it could be opened.
    MetricGroups,
}

/// perf 6.12's contract: tmetric's default, byte for byte.
pub const PERF_6_12: Contract = Contract {
    perf: "6.12",
    builtin_metrics: true,
    defaults: Defaults::Events,
    metrics_on_uncounted_lines: false,
    json_unit_cpus: "aggregate-number",
    metric_only_fitted: false,
    needs_an_event: false,
    tool_pmu: false,
    aggr_nr: false,
};

/// perf 7.2's contract, where its own stat shell tests state it (`docs/stat-output.md`).
pub const PERF_7_2: Contract = Contract {
    perf: "7.2",
    builtin_metrics: false,
    defaults: Defaults::MetricGroups,
    metrics_on_uncounted_lines: true,
    json_unit_cpus: "counters",
    metric_only_fitted: true,
    needs_an_event: true,
    tool_pmu: true,
    aggr_nr: true,
};

/// The contract of perf release `version` (`6.12`, `7.2.13`): perf 7.2's from 7.0 on, else
/// perf 6.12's. Older vintages (5.10, 6.1) change the tables only: their layout is printed as
/// perf 6.12 prints it.
pub fn of(version: &str) -> &'static Contract {
    let major = version.split('.').next().and_then(|m| m.parse::<u32>().ok());
    if major.is_some_and(|m| m >= 7) { &PERF_7_2 } else { &PERF_6_12 }
}

/// The contract of `vintage`.
pub fn of_vintage(vintage: &Vintage) -> &'static Contract {
    of(vintage.version)
}

/// The contract this thread's output follows ([`tmetric_catalog::contract_vintage`]): perf
/// 6.12's unless `--perf-version` chose another release, or a log or a recording says so,
/// whichever vintage the vendor tables come from.
pub fn current() -> &'static Contract {
    of_vintage(tmetric_catalog::contract_vintage())
}

/// Refuses, under the current contract, an expression its perf could not parse: perf 6.12's
/// grammar has no `aggr_nr()` and refuses `aggr_nr(X)` as a syntax error, so `eval --expr`
/// does too, pointing at the call. The message is the error, caret lines included.
pub fn check_expr(expr: &tmetric_expr::Expr, text: &str) -> Result<(), String> {
    let contract = current();
    if contract.aggr_nr {
        return Ok(());
    }
    let mut call = None;
    expr.walk(&mut |e| {
        if call.is_none()
            && let tmetric_expr::ast::ExprKind::IdCall(tmetric_expr::ast::IdFunc::AggrNr, _) =
                &e.kind
        {
            call = Some(e.span);
        }
    });
    match call {
        None => Ok(()),
        Some(span) => Err(format!(
            "cannot parse the expression: aggr_nr() is perf 7.x's; perf {}'s expression grammar has no aggr_nr and refuses `aggr_nr(...)` as a syntax error (pass --perf-version 7.2 to evaluate it as perf 7.2 does)\n{}",
            contract.perf,
            tmetric_expr::caret_lines(text, span)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_release_has_the_contract_of_its_layout() {
        assert_eq!(of("6.12"), &PERF_6_12);
        assert_eq!(of("6.1"), &PERF_6_12);
        assert_eq!(of("5.10"), &PERF_6_12);
        assert_eq!(of("7.2"), &PERF_7_2);
        assert_eq!(of("7.2.13"), &PERF_7_2);
        assert_eq!(of("junk"), &PERF_6_12);
        let stored: Vec<&str> =
            tmetric_catalog::VINTAGES.iter().map(|v| of_vintage(v).perf).collect();
        assert_eq!(stored, ["6.12", "6.12", "6.12", "7.2"]);
    }
}
