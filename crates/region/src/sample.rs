//! What a region measured, as data (`Sample`: counts, metrics with why a value is missing or
//! partial, topdown) and as `tmetric stat` prints it; samples of the last region and of every
//! region's total, evaluated through the engine.

use std::io::{self, Write};

use tmetric_engine::view::PrintedCount;
use tmetric_engine::{EvalInput, Source, plan_eval};
use tmetric_runtime::Syscalls;
use tmetric_runtime::counter::{CpuCount, RawCount, Snapshot};

use crate::topdown::{self, Topdown};
use crate::{Measurement, Pages, ReadPath};

/// A metric's value in a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    /// The metric's name.
    pub name: String,
    /// The value as printed (ScaleUnit applied).
    pub value: f64,
    /// The unit of the ScaleUnit (`%`, `GHz`), or empty.
    pub unit: String,
    /// Why the value is missing, partial or decided by a rule (the engine's reason, worded
    /// by its `Display` as `tmetric stat`'s notes word it).
    pub why: Option<tmetric_engine::MetricWhy>,
}

/// One event's count in a sample, as printed, with the metrics printed beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventCount {
    /// The event.
    pub name: String,
    /// The count as printed (task-clock in msec; `None`: not counted).
    pub value: Option<f64>,
    /// The unit (`msec`, a sysfs unit) or empty.
    pub unit: String,
    /// The metrics printed beside it (perf prints a metric on its first event's line).
    pub metrics: Vec<String>,
}

/// The measurement of one region (or a region's total).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The region's name.
    pub region: String,
    /// How many start/stop pairs it sums (1 for a single sample).
    pub runs: usize,
    /// Wall-clock seconds inside the region.
    pub seconds: f64,
    /// How the hardware group was read (software-only selections: `Read`).
    pub path: ReadPath,
    /// The counts.
    pub counts: Vec<EventCount>,
    /// The metrics.
    pub metrics: Vec<MetricValue>,
    /// Topdown from PERF_METRICS when the group was read with `rdpmc`.
    pub topdown: Option<Topdown>,
}

impl Sample {
    /// The count of `event` (`None` if it is not measured or not counted).
    pub fn count(&self, event: &str) -> Option<f64> {
        self.counts.iter().find(|c| c.name == event).and_then(|c| c.value)
    }

    /// The value of metric `name`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics.iter().find(|m| m.name.eq_ignore_ascii_case(name)).map(|m| m.value)
    }

    /// Writes the sample as `tmetric stat` prints counts and metrics.
    pub fn print(&self, out: &mut dyn Write) -> io::Result<()> {
        let path = match self.path {
            ReadPath::Rdpmc => "rdpmc",
            ReadPath::Read => "read()",
        };
        writeln!(
            out,
            "\n Region '{}': {} run{}, {:.9} seconds, read with {path}\n",
            self.region,
            self.runs,
            if self.runs == 1 { "" } else { "s" },
            self.seconds
        )?;
        let metric_text = |m: &MetricValue| {
            let note = m.why.as_ref().map(|w| format!("  ({w})")).unwrap_or_default();
            format!("# {:>8.2} {:<2} {}{note}", m.value, m.unit, m.name)
        };
        let hosted: Vec<&str> =
            self.counts.iter().flat_map(|c| c.metrics.iter().map(String::as_str)).collect();
        for c in &self.counts {
            let value = match c.value {
                Some(v) if c.unit == "msec" => format!("{v:.2}"),
                Some(v) => format!("{v:.0}"),
                None => "<not counted>".to_string(),
            };
            let beside: Vec<&MetricValue> =
                self.metrics.iter().filter(|m| c.metrics.contains(&m.name)).collect();
            let first = beside.first().map(|m| metric_text(m)).unwrap_or_default();
            let line = format!(" {value:>18} {:<5} {:<30} {first}", c.unit, c.name);
            writeln!(out, "{}", line.trim_end())?;
            for m in beside.iter().skip(1) {
                writeln!(out, " {:>18} {:<5} {:<30} {}", "", "", "", metric_text(m))?;
            }
        }
        for m in self.metrics.iter().filter(|m| !hosted.contains(&m.name.as_str())) {
            writeln!(out, " {:>18} {:<5} {:<30} {}", "", "", "", metric_text(m))?;
        }
        if let Some(t) = &self.topdown {
            let l1 = &t.level1;
            writeln!(
                out,
                "\n PERF_METRICS over {} slots (error bound {:.2} points): retiring {:.1}%, bad speculation {:.1}%, frontend bound {:.1}%, backend bound {:.1}%",
                t.slots,
                100.0 * t.error_bound,
                100.0 * l1.retiring,
                100.0 * l1.bad_speculation,
                100.0 * l1.frontend_bound,
                100.0 * l1.backend_bound
            )?;
            if let Some(l2) = &t.level2 {
                writeln!(
                    out,
                    " heavy operations {:.1}%, light operations {:.1}%, branch mispredicts {:.1}%, machine clears {:.1}%, fetch latency {:.1}%, fetch bandwidth {:.1}%, memory bound {:.1}%, core bound {:.1}%",
                    100.0 * l2.heavy_operations,
                    100.0 * l2.light_operations,
                    100.0 * l2.branch_mispredicts,
                    100.0 * l2.machine_clears,
                    100.0 * l2.fetch_latency,
                    100.0 * l2.fetch_bandwidth,
                    100.0 * l2.memory_bound,
                    100.0 * l2.core_bound
                )?;
            }
        }
        Ok(())
    }
}

impl<S: Syscalls, P: Pages> Measurement<S, P> {
    /// The sample of the last region that ended.
    pub fn last(&mut self) -> Option<Sample> {
        let (region, seconds, topdown) = self.last?;
        let name = self.regions[region].name.clone();
        let delta = snapshot(&self.delta);
        Some(self.sample(&name, 1, seconds, &delta, topdown))
    }

    fn sample(
        &mut self,
        name: &str,
        runs: usize,
        seconds: f64,
        delta: &Snapshot,
        topdown: Option<Topdown>,
    ) -> Sample {
        let es = EvalInput::new(delta, seconds);
        let results = self.session.evaluate(&es);
        let plan = self.session.plan();
        let counts = plan
            .rows()
            .iter()
            .filter(|r| r.show && r.copy_of.is_none() && matches!(r.source, Source::Counter(_)))
            .map(|r| EventCount {
                name: r.name.clone(),
                value: match plan_eval::row_count(plan, r, &es).count {
                    PrintedCount::Value(count) => Some(count),
                    _ => None,
                },
                unit: r.unit.clone(),
                metrics: r
                    .roots
                    .iter()
                    .map(|&i| {
                        let root = &plan.roots()[i];
                        root.model.str(root.model.metric(root.metric).name).to_string()
                    })
                    .collect(),
            })
            .collect();
        let metrics = plan
            .roots()
            .iter()
            .zip(&results)
            .enumerate()
            .map(|(r, (root, result))| {
                let model = root.model;
                let metric = model.metric(root.metric);
                MetricValue {
                    name: model.str(metric.name).to_string(),
                    value: result.scaled(model, root.metric),
                    unit: if metric.has_scale_unit {
                        model.str(metric.unit).to_string()
                    } else {
                        String::new()
                    },
                    why: plan.metric_why(r, result, &es),
                }
            })
            .collect();
        Sample {
            region: name.to_string(),
            runs,
            seconds,
            path: self.path(),
            counts,
            metrics,
            topdown,
        }
    }

    /// Every region's total, in the order they were first measured.
    pub fn totals(&mut self) -> Vec<Sample> {
        let regions = self.regions.clone();
        regions
            .iter()
            .filter(|r| r.runs > 0)
            .map(|r| {
                let topdown = r.topdown.and_then(|(f, slots, level2, bound)| {
                    // Fields summed over runs: one "read" of 0 and one of the sums, so the
                    // same slot-weighted arithmetic applies.
                    let ratio = |i: usize| f[i] as f64 / (255.0 * slots as f64);
                    (slots > 0).then(|| {
                        let level1 = topdown::Level1 {
                            retiring: ratio(0),
                            bad_speculation: ratio(1),
                            frontend_bound: ratio(2),
                            backend_bound: ratio(3),
                        };
                        let level2 = level2.then(|| topdown::Level2 {
                            heavy_operations: ratio(4),
                            light_operations: level1.retiring - ratio(4),
                            branch_mispredicts: ratio(5),
                            machine_clears: level1.bad_speculation - ratio(5),
                            fetch_latency: ratio(6),
                            fetch_bandwidth: level1.frontend_bound - ratio(6),
                            memory_bound: ratio(7),
                            core_bound: level1.backend_bound - ratio(7),
                        });
                        Topdown { slots, level1, level2, error_bound: bound }
                    })
                });
                self.sample(&r.name, r.runs, r.seconds, &snapshot(&r.total), topdown)
            })
            .collect()
    }

    /// Prints every region's total as `tmetric stat` prints its counts and metrics.
    pub fn report(&mut self, out: &mut dyn Write) -> io::Result<()> {
        for sample in self.totals() {
            sample.print(out)?;
        }
        for w in self.session.plan().warnings() {
            writeln!(out, "\n tmetric: warning: {w}")?;
        }
        writeln!(out)
    }
}

/// Per-spec counts as the engine's snapshot (one task counter per event).
fn snapshot(values: &[RawCount]) -> Snapshot {
    Snapshot {
        events: values
            .iter()
            .map(|&raw| Some(vec![CpuCount { cpu: -1, thread: -1, raw }]))
            .collect(),
    }
}
