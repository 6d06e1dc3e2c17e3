//! `tmetric describe --counts`: every metric of a metric's tree valued over a counts file,
//! with the reason for every `nan` or out-of-range value.

use tmetric_catalog::Model;
use tmetric_engine::describe::Valued;
use tmetric_engine::{Evaluator, Select};

use super::{CountsError, CountsFile, assign};

/// Every metric of `metric`'s tree evaluated over the counts: `(metric index, value and
/// reason)`.
pub fn evaluate_tree(
    model: &'static Model,
    metric: usize,
    file: &CountsFile,
) -> Result<Vec<(usize, Valued)>, CountsError> {
    let assigned = assign(model, file)?;
    let mut evaluator = Evaluator::new(model);
    evaluator.values.clone_from(&assigned.values);
    evaluator.source_counts.clone_from(&assigned.source_counts);
    evaluator.aggr_nrs.clone_from(&assigned.aggr_nrs);
    for (literal, value) in &file.literals {
        evaluator.literals[literal.index()] = *value;
    }
    for slot in 0..model.ids.len() {
        evaluator.probes[slot] = f64::from(u8::from(assigned.present[slot]));
    }
    let order = model.closure(&[metric]);
    let roots: Vec<usize> = order.iter().map(|&m| m as usize).collect();
    let results = evaluator.evaluate(model, &roots);
    Ok(results
        .into_iter()
        .map(|r| {
            let m = model.metric(r.metric);
            let scaled = r.value * m.scale;
            let why = if let Some(fail) = r.failure {
                Some(format!("no value: {fail}"))
            } else if !r.missing.is_empty() {
                let names: Vec<&str> = r.missing.iter().map(|&s| model.str(model.ids[s as usize].text)).collect();
                let what = if r.value.is_nan() { "nan" } else { "computed without" };
                Some(format!("{what}: the counts have no {}", names.join(", ")))
            } else if r.value < 0.0 {
                Some("negative: the counts do not fit together (multiplexed over different time, or from different runs)".into())
            } else if model.str(m.unit) == "%" && m.scale == 100.0 && r.value > 1.0 {
                Some("over 100%: the counts do not fit together (multiplexed over different time, or from different runs)".into())
            } else {
                None
            };
            (r.metric, Valued { value: (!scaled.is_nan()).then_some(scaled), why })
        })
        .collect())
}
