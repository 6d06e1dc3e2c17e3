//! The summary table: each figure against its target and the baseline, met or missed.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::builds::{BuildFigures, GenSizes, Measured};
use super::codegen::RegenFigures;
use super::eval::EvalFigures;
use super::parse::ParseFigures;
use super::{
    TARGET_COLD_BUILD_S, TARGET_EVAL_NS, TARGET_EVAL_SPEEDUP, TARGET_GEN_SOURCE_BYTES,
    TARGET_PARSE_SPEEDUP, TARGET_REBUILD_S, TARGET_REGEN_SPEEDUP, TARGET_TEST_S, mb, secs,
    thousands,
};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Met,
    Missed,
    Info,
}

#[derive(Default)]
pub(super) struct Table {
    rows: Vec<[String; 6]>,
}

impl Table {
    pub(super) fn row(
        &mut self,
        figure: &str,
        measured: &str,
        baseline: &str,
        ratio: &str,
        target: &str,
        status: Status,
    ) {
        let status = match status {
            Status::Met => "met",
            Status::Missed => "MISSED",
            Status::Info => "",
        };
        self.rows.push([figure, measured, baseline, ratio, target, status].map(str::to_string));
    }

    pub(super) fn check(
        &mut self,
        figure: &str,
        measured: &str,
        baseline: &str,
        ratio: &str,
        target: &str,
        met: bool,
    ) {
        self.row(
            figure,
            measured,
            baseline,
            ratio,
            target,
            if met { Status::Met } else { Status::Missed },
        );
    }

    pub(super) fn regen(&mut self, f: &RegenFigures) {
        let Some(ours) = f.in_process else { return };
        match f.jevents {
            Some(jevents) => {
                let ratio = jevents.as_secs_f64() / ours.as_secs_f64();
                self.check(
                    "(a) regen, in process",
                    &secs(ours),
                    &format!("jevents.py {}", secs(jevents)),
                    &format!("{ratio:.1}x faster"),
                    &format!(">= {TARGET_REGEN_SPEEDUP}x"),
                    ratio >= TARGET_REGEN_SPEEDUP,
                );
                if let Some(process) = f.process {
                    let ratio = jevents.as_secs_f64() / process.as_secs_f64();
                    self.check(
                        "(a) xtask regen --check",
                        &secs(process),
                        &format!("jevents.py {}", secs(jevents)),
                        &format!("{ratio:.1}x faster"),
                        &format!(">= {TARGET_REGEN_SPEEDUP}x"),
                        ratio >= TARGET_REGEN_SPEEDUP,
                    );
                }
            }
            None => self.row(
                "(a) regen, in process",
                &secs(ours),
                "jevents.py not run",
                "",
                "",
                Status::Info,
            ),
        }
    }

    pub(super) fn eval(&mut self, f: &EvalFigures) {
        let ratio = f.interpreted_ns / f.compiled_ns;
        self.check(
            &format!("(b) compiled, {} metrics", f.metrics),
            &format!("{:.1} ns/metric", f.compiled_ns),
            &format!("interpreter {:.0} ns", f.interpreted_ns),
            &format!("{ratio:.1}x faster"),
            &format!(">= {TARGET_EVAL_SPEEDUP}x, < {TARGET_EVAL_NS} ns"),
            ratio >= TARGET_EVAL_SPEEDUP && f.compiled_ns < TARGET_EVAL_NS,
        );
    }

    pub(super) fn parse(&mut self, f: &ParseFigures) {
        let ours = format!("{}/s", thousands(f.ours_exprs.0));
        let figure = format!("parse, {} MetricExpr", f.exprs);
        let target = format!(">= {TARGET_PARSE_SPEEDUP}x metric.py");
        match f.perf {
            Some((perf, _)) => {
                let ratio = f.ours_exprs.0 / perf;
                self.check(
                    &figure,
                    &ours,
                    &format!("metric.py {}/s", thousands(perf)),
                    &format!("{ratio:.0}x faster"),
                    &target,
                    ratio >= TARGET_PARSE_SPEEDUP,
                );
            }
            None => self.row(&figure, &ours, "metric.py not run", "", &target, Status::Missed),
        }
        let all = format!("{}/s", thousands(f.ours_all.0));
        self.row(
            &format!("parse, + {} MetricThreshold", f.thresholds),
            &all,
            "",
            "",
            "",
            Status::Info,
        );
    }

    pub(super) fn sizes(&mut self, ours: &GenSizes, base: Option<&GenSizes>) {
        let (baseline, ratio) = match base {
            Some(b) => (mb(b.rust), format!("{:.2}x", ours.rust as f64 / b.rust as f64)),
            None => (String::new(), String::new()),
        };
        self.check(
            "generated Rust source",
            &mb(ours.rust),
            &baseline,
            &ratio,
            "<= 6 MB",
            ours.rust <= TARGET_GEN_SOURCE_BYTES,
        );
        self.row("generated data tables", &mb(ours.data), "", "", "", Status::Info);
    }

    pub(super) fn build(
        &mut self,
        trees: &[(String, BuildFigures)],
        perf: Option<&(PathBuf, u64)>,
    ) {
        let Some((_, f)) = trees.first() else { return };
        let base = trees.get(1).map(|(_, b)| b);
        let ratio = |ours: Option<Measured>, base: Option<Measured>| -> (String, String, f64) {
            match (ours, base) {
                (Some(o), Some(b)) => {
                    let r = o.time.as_secs_f64() / b.time.as_secs_f64();
                    (b.show(), format!("{r:.2}x"), r)
                }
                _ => (String::new(), String::new(), f64::NAN),
            }
        };
        if let Some(cold) = f.cold {
            let (baseline, shown, r) = ratio(f.cold, base.and_then(|b| b.cold));
            self.check(
                "(c) cold release build",
                &cold.show(),
                &baseline,
                &shown,
                "< 5 min",
                cold.time.as_secs_f64() < TARGET_COLD_BUILD_S || r <= 0.5,
            );
        }
        if let Some(rebuild) = f.rebuild {
            let catalog = f.recompiled.iter().any(|c| c == "tmetric-catalog");
            let note = if catalog { "catalog REBUILT" } else { "catalog not rebuilt" };
            self.check(
                "(c) rebuild, cli touched",
                &secs(rebuild.time),
                note,
                "",
                "< 30 s, no catalog",
                rebuild.time.as_secs_f64() < TARGET_REBUILD_S && !catalog,
            );
        }
        if let Some(catalog) = f.catalog {
            let b = base.and_then(|b| b.catalog);
            let (_, shown, r) = ratio(f.catalog, b);
            self.check(
                "(c) catalogue rebuild, time",
                &secs(catalog.time),
                &b.map(|b| secs(b.time)).unwrap_or_default(),
                &shown,
                "halve",
                r <= 0.5,
            );
            if let Some(peak) = catalog.peak_kb {
                let b = b.and_then(|b| b.peak_kb);
                let r = b.map_or(f64::NAN, |b| peak as f64 / b as f64);
                self.check(
                    "(c) catalogue rebuild, peak memory",
                    &mb(peak * 1024),
                    &b.map(|b| mb(b * 1024)).unwrap_or_default(),
                    &if r.is_nan() { String::new() } else { format!("{r:.2}x") },
                    "halve",
                    r <= 0.5,
                );
            }
        }
        if let Some(dependents) = f.dependents {
            let b = base.and_then(|b| b.dependents);
            let (_, shown, _) = ratio(f.dependents, b);
            self.row(
                &format!("(c) then its {} dependents", f.dependents_compiled.len()),
                &secs(dependents.time),
                &b.map(|b| secs(b.time)).unwrap_or_default(),
                &shown,
                "",
                Status::Info,
            );
        }
        if let Some(test) = f.test {
            let (baseline, shown, _) = ratio(f.test, base.and_then(|b| b.test));
            self.check(
                "(c) clean cargo test --workspace -j2",
                &test.show(),
                &baseline,
                &shown,
                "< 2 min",
                test.time.as_secs_f64() < TARGET_TEST_S,
            );
        }
        if let Some(bytes) = f.stripped_bytes {
            let (baseline, shown) = match perf {
                Some((path, perf)) => (
                    format!("{} {}", path.display(), mb(*perf)),
                    format!("{:.2}x", bytes as f64 / *perf as f64),
                ),
                None => ("perf not found".to_string(), String::new()),
            };
            self.check(
                "(c) stripped release binary",
                &mb(bytes),
                &baseline,
                &shown,
                "smaller than perf's",
                perf.is_some_and(|(_, perf)| bytes < *perf),
            );
            if let Some(b) = base.and_then(|b| b.stripped_bytes) {
                self.row(
                    "(c) stripped release binary, baseline tree",
                    &mb(b),
                    "",
                    &format!("ours {:.2}x", bytes as f64 / b as f64),
                    "",
                    Status::Info,
                );
            }
        }
        if let Some(bytes) = f.binary_bytes {
            self.row("(c) release binary, unstripped", &mb(bytes), "", "", "", Status::Info);
        }
    }

    pub(super) fn render(&self) -> String {
        let header =
            ["figure", "tmetric", "baseline", "ratio", "target", "status"].map(str::to_string);
        let rows: Vec<&[String; 6]> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> =
            (0..6).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for row in rows {
            let cells: Vec<String> =
                row.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
            let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
        }
        out
    }
}
