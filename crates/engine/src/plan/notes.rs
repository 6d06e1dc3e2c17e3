//! What a plan says about itself as data: its warnings before counting (`Warning`), the
//! inputs a machine cannot count, and a group the kernel refused (`Plan::split_note`).

use super::{Plan, Source};

/// A warning a plan gives once, before counting: what it is, as data; the wording is its
/// `Display`, for the printer only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The event parser's warning about one `-e` list.
    EventList {
        /// The list as given.
        list: String,
        /// The parser's warning.
        warning: String,
    },
    /// These metrics read `:R` retire latencies that this run does not sample: they read 0,
    /// as perf 6.12 does without `--record-tpebs`.
    RetireLatencyUnsampled {
        /// The metrics.
        metrics: Vec<String>,
    },
    /// `--retire-latency FILE` has no latency for these inputs: they read 0.
    RetireLatencyUnknown {
        /// The `:R` inputs.
        events: Vec<String>,
        /// The file.
        file: String,
    },
    /// The event counts user mode only: `perf_event_paranoid` forbids kernel counting.
    UserOnly {
        /// The event.
        event: String,
    },
    /// A metric replayed from a recording whose inputs were not recorded.
    NotRecorded {
        /// The metric.
        metric: String,
        /// Its inputs the recording lacks.
        inputs: Vec<String>,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::EventList { list, warning } => write!(f, "-e {list}: {warning}"),
            Warning::RetireLatencyUnsampled { metrics } => write!(
                f,
                "retire latencies (`:R` events) are not sampled in this run, so they read as 0, as perf does without --record-tpebs; affected: {}",
                metrics.join(", ")
            ),
            Warning::RetireLatencyUnknown { events, file } => {
                write!(f, "no retire latency for {} in {file}: they read as 0", events.join(", "))
            }
            Warning::UserOnly { event } => write!(
                f,
                "`{event}` counts user mode only (exclude_kernel): perf_event_paranoid forbids kernel counting without privilege"
            ),
            Warning::NotRecorded { metric, inputs } => write!(
                f,
                "{metric}: {} {} not counted in the recording",
                inputs.join(", "),
                if inputs.len() == 1 { "was" } else { "were" }
            ),
        }
    }
}

impl Plan {
    /// Per root, the inputs nothing can count on this machine, each once with the reason (a
    /// machine without a hardware PMU has only these).
    pub fn missing_inputs(&self) -> Vec<Vec<(String, String)>> {
        self.roots
            .iter()
            .map(|root| {
                let mut missing: Vec<(String, String)> = Vec::new();
                for &row in root.slot_rows.iter().flatten() {
                    let row = &self.rows[row];
                    if let Source::Missing(why) = &row.source
                        && !missing.iter().any(|(name, _)| *name == row.name)
                    {
                        missing.push((row.name.clone(), why.clone()));
                    }
                }
                missing
            })
            .collect()
    }

    /// Adds a warning the front end found about this plan (the region API's user-only
    /// events, the retire-latency file's unknown inputs).
    pub fn add_warning(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    /// Keeps only the warnings `keep` accepts: a front end that has given what a warning
    /// says is missing (retire latencies sampled or read from a file) drops it.
    pub fn retain_warnings(&mut self, keep: impl FnMut(&Warning) -> bool) {
        self.warnings.retain(keep);
    }

    /// A group the kernel refused and the runtime split, as data: which events, the errno,
    /// which stayed together behind `slots`, and the metrics that read them (now computed
    /// from counts of different time slices).
    pub fn split_note(&self, split: &tmetric_runtime::Split) -> crate::notes::RefusedGroup {
        use crate::notes::{RefusedGroup, Reopened};
        let name = |s: &usize| self.specs[*s].name.clone();
        let rows: Vec<usize> = (0..self.rows.len())
            .filter(
                |&r| matches!(self.rows[r].source, Source::Counter(s) if split.events.contains(&s)),
            )
            .collect();
        let mut multiplexed: Vec<String> = Vec::new();
        for root in &self.roots {
            if root.slot_rows.iter().flatten().any(|r| rows.contains(r)) {
                let m = root.model.str(root.model.metric(root.metric).name).to_string();
                if !multiplexed.contains(&m) {
                    multiplexed.push(m);
                }
            }
        }
        let alone: Vec<String> =
            split.events.iter().filter(|e| !split.kept.contains(e)).map(name).collect();
        let kept: Vec<String> = split.kept.iter().map(name).collect();
        let reopened = match (kept.is_empty(), alone.is_empty()) {
            (true, _) => Reopened::Alone,
            (false, true) => Reopened::Together(kept),
            (false, false) => Reopened::Split { kept, alone },
        };
        RefusedGroup {
            events: split.events.iter().map(name).collect(),
            errno: split.errno.0,
            reopened,
            multiplexed,
        }
    }
}
