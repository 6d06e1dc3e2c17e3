//! `eval --from-perf`: printing perf's built-in metrics (`insn per cycle`, `GHz`, the miss
//! ratios, TopDown from `topdown-*` rows), which `tmetric_engine::perflog::builtins` computes
//! per block and checks against what perf printed next to the same row, in the layout of the
//! JSON metrics' lines.

use tmetric_engine::builtin::{NSECS, NoValue};
use tmetric_engine::perflog::Checks;
use tmetric_engine::perflog::builtins::{BuiltinOutcome, Builtins};
use tmetric_perfstat::Block;

use super::{Format, GroupJson, MetricJson, PerfJson, Printer};
use crate::output::{json_line, json_number};

/// Evaluates and prints the built-ins of `block`, counting perf's printed values checked.
pub fn print_block(
    builtins: &Builtins,
    printer: &mut Printer,
    block: &Block,
    checks: &mut Checks,
) -> anyhow::Result<usize> {
    let outcomes = builtins.evaluate(block);
    for outcome in &outcomes {
        checks.count(outcome.agrees);
        printer.builtin(block, outcome)?;
    }
    Ok(outcomes.len())
}

impl Printer<'_> {
    /// One built-in of one block, in the layout of the metric lines.
    pub fn builtin(&mut self, block: &Block, o: &BuiltinOutcome) -> anyhow::Result<()> {
        let b = o.builtin;
        let value = o.value.as_ref().ok().copied();
        let (missing, blank): (Vec<String>, Option<&str>) = match &o.value {
            Err(NoValue::Missing(m)) => (m.iter().map(|s| display_input(s)).collect(), None),
            Err(NoValue::Blank(why)) => (Vec::new(), Some(*why)),
            Ok(_) | Err(NoValue::NotShown) => (Vec::new(), None),
        };
        let mut notes: Vec<String> = Vec::new();
        if !missing.is_empty() {
            notes.push(format!("missing: {}", missing.join(", ")));
        }
        if let Some(why) = blank {
            notes.push(format!("no value, as perf prints none: {why}"));
        }
        match &self.format {
            Format::Json => {
                json_line(
                    self.out,
                    &MetricJson {
                        run: block.run + 1,
                        interval: block.interval,
                        aggr: block.aggr.as_ref().map(|a| a.id.as_str()),
                        metric: b.name,
                        pmu: &o.pmu,
                        value: value.and_then(json_number),
                        unit: b.unit,
                        threshold: None,
                        bottleneck: false,
                        group: vec![GroupJson {
                            index: block
                                .rows
                                .iter()
                                .find(|r| r.line == o.carrier_line)
                                .map_or(0, |r| r.group),
                            line: o.carrier_line,
                            metric_group: o.printed.is_some(),
                        }],
                        missing,
                        not_supported: Vec::new(),
                        not_counted: Vec::new(),
                        latency_zero: Vec::new(),
                        unusable: Vec::new(),
                        by_encoding: Vec::new(),
                        error: blank.map(str::to_string),
                        why: None,
                        running_pct: o.running_pct,
                        perf: o.printed.as_ref().map(|(text, _)| PerfJson {
                            printed: text,
                            label: Some(o.label),
                            agrees: o.agrees,
                        }),
                        model: "perf built-in".to_string(),
                    },
                )?;
            }
            Format::Text { .. } => {
                let mut line = self.prefix(Some(block));
                let number =
                    value.map_or(" ".repeat(8), |v| format!("{v:8.prec$}", prec = b.decimals));
                if b.unit.is_empty() {
                    line.push_str(&format!("{number} {}", b.name));
                } else {
                    line.push_str(&format!("{number} {}  {}", b.unit, b.name));
                }
                if !o.pmu.is_empty() && o.pmu != "cpu" {
                    line.push_str(&format!("  [{}]", o.pmu));
                }
                line.push_str(&format!("  [perf built-in: {}, line {}]", o.label, o.carrier_line));
                if let Some(pct) = o.running_pct {
                    line.push_str(&format!("  (multiplexed: ran {pct:.2}%)"));
                }
                for note in &notes {
                    line.push_str(&format!("  {note}"));
                }
                if o.agrees == Some(false)
                    && let Some((text, _)) = &o.printed
                {
                    line.push_str(&format!("  (perf printed {text} {})", o.label));
                }
                writeln!(self.out, "{line}")?;
            }
            Format::Csv { sep } => {
                let clean = |text: &str| text.replace(sep.as_str(), " ");
                let fields = [
                    block.interval.map_or(String::new(), |t| format!("{t:.9}")),
                    block.aggr.as_ref().map_or(String::new(), |a| a.id.clone()),
                    value.map_or(String::new(), |v| format!("{v:.prec$}", prec = b.decimals)),
                    b.unit.to_string(),
                    b.name.to_string(),
                    if o.pmu == "cpu" { String::new() } else { o.pmu.clone() },
                    String::new(),
                    o.carrier_line.to_string(),
                    o.printed.as_ref().map_or(String::new(), |(t, _)| t.clone()),
                    match o.agrees {
                        Some(true) => "1".to_string(),
                        Some(false) => "0".to_string(),
                        None => String::new(),
                    },
                    {
                        let mut all = vec![format!("perf built-in: {}", o.label)];
                        all.extend(notes.iter().cloned());
                        all.join("; ")
                    },
                ];
                let fields: Vec<String> = fields.iter().map(|f| clean(f)).collect();
                writeln!(self.out, "{}", fields.join(sep))?;
            }
        }
        Ok(())
    }
}

fn display_input(input: &str) -> String {
    if input == NSECS { "task-clock or cpu-clock".to_string() } else { input.to_string() }
}
