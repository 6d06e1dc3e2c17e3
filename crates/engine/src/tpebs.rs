//! Retire latencies for a plan's `:R` inputs: the TPEBS sampler a session runs beside its
//! counters (`--record-tpebs`), the latencies it gives per interval and at the end, and a
//! latency file (`--retire-latency FILE`, perf's `{"EVENT": cycles}`).

use std::path::{Path, PathBuf};

use tmetric_runtime::{
    EventReport, SampleSpec, Sampler, SamplerError, SamplerOptions, Syscalls, Sysfs, Target,
    TpebsMode,
};

use crate::plan::{Plan, Warning};

/// Why retire latencies cannot be sampled or read. Worded with the flags perf users give
/// (`--record-tpebs`, `--retire-latency`), as every front end that samples takes them.
#[derive(Debug, thiserror::Error)]
pub enum TpebsError {
    /// An `:R` input has no event that can be sampled on this machine.
    #[error("--record-tpebs: cannot sample `{event}` (for {}): {why}", metrics.join(", "))]
    Unsampleable {
        /// The `:R` input.
        event: String,
        /// The metrics that read it.
        metrics: Vec<String>,
        /// Why it has no event.
        why: String,
    },
    /// Sampling was asked for and nothing selected reads a retire latency.
    #[error("--record-tpebs: no selected metric has a retire-latency (`:R`) input")]
    NoInputs,
    /// The sampler could not start (the kernel refused an event, a ring, the reader thread).
    #[error(
        "--record-tpebs: the sampler cannot start: {0}; without it, --retire-latency FILE gives the values"
    )]
    Start(SamplerError),
    /// The sampler failed while stopping (its last read).
    #[error("--record-tpebs")]
    Stop(#[source] SamplerError),
    /// The latency file cannot be read.
    #[error("--retire-latency {}: cannot read it", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error reading it.
        #[source]
        source: std::io::Error,
    },
    /// The latency file is not a JSON object.
    #[error("--retire-latency {}: expected a JSON object {{\"EVENT\": cycles, ...}}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error (with line and column).
        #[source]
        source: serde_json::Error,
    },
    /// A key of the latency file is given twice.
    #[error("--retire-latency {}: {key} is given twice: keep the one value you mean", path.display())]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// The key, quoted.
        key: String,
    },
    /// A value of the latency file is not a number of cycles.
    #[error("--retire-latency {}: `{key}` must be a number of cycles, not {value}", path.display())]
    NotCycles {
        /// The file.
        path: PathBuf,
        /// The key.
        key: String,
        /// The value, as JSON.
        value: String,
    },
}

/// A JSON object's members in file order, repeated keys kept (a map would keep only the last).
struct Pairs(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Pairs {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Pairs, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Pairs;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(Pairs(pairs))
            }
        }
        de.deserialize_map(Visit)
    }
}

/// Where a run's retire latencies come from.
#[derive(Debug, Clone, Copy, Default)]
pub struct LatencySources<'a> {
    /// A latency file (`--retire-latency FILE`).
    pub file: Option<&'a Path>,
    /// Sampled during the run (`--record-tpebs`).
    pub sampled: bool,
}

/// Gives `plan` its retire latencies from `sources`: the file's values now (sampled ones
/// come from the session's run), and the generic "read as 0" warning replaced by one naming
/// what is still unknown. Returns the file's keys that no selected metric reads.
pub fn apply_latency_sources(
    plan: &mut Plan,
    sources: LatencySources<'_>,
) -> Result<Vec<String>, TpebsError> {
    let unused = match sources.file {
        Some(path) => apply_latency_file(plan, path)?,
        None => Vec::new(),
    };
    if !(sources.sampled || sources.file.is_some()) {
        return Ok(unused);
    }
    plan.retain_warnings(|w| !matches!(w, Warning::RetireLatencyUnsampled { .. }));
    let unknown: Vec<String> = plan
        .retire_events
        .iter()
        .filter(|r| !sources.sampled && !plan.retire_latency.iter().any(|(n, _)| *n == r.name))
        .map(|r| r.name.clone())
        .collect();
    if !unknown.is_empty() {
        plan.add_warning(Warning::RetireLatencyUnknown {
            events: unknown,
            file: sources.file.map_or(String::new(), |p| p.display().to_string()),
        });
    }
    Ok(unused)
}

/// `{"EVENT": cycles}` from `path` into `plan`. A key names a `:R` input as printed
/// (`cpu_core/MEM_INST_RETIRED.STLB_HIT_LOADS/R`) or just its event
/// (`MEM_INST_RETIRED.STLB_HIT_LOADS`), in any case. Returns the keys that name no input.
pub fn apply_latency_file(plan: &mut Plan, path: &Path) -> Result<Vec<String>, TpebsError> {
    let text = tmetric_runtime::input::read_to_string(path, tmetric_runtime::input::RETIRE_LATENCY)
        .map_err(|source| TpebsError::Read { path: path.to_path_buf(), source })?;
    let Pairs(map) = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|source| TpebsError::Json { path: path.to_path_buf(), source })?;
    // A key given twice: which value was meant cannot be told (a map keeps the last).
    let mut seen = std::collections::HashSet::new();
    for (key, _) in &map {
        if !seen.insert(key.to_ascii_lowercase()) {
            return Err(TpebsError::Duplicate {
                path: path.to_path_buf(),
                key: tmetric_text::quote(key),
            });
        }
    }
    let bare = |name: &str| -> String {
        let name = name.trim_end_matches('/').trim_end_matches(":R").trim_end_matches("/R");
        let name = name.rsplit('/').next().unwrap_or(name);
        name.to_ascii_lowercase()
    };
    let mut unused = Vec::new();
    for (key, value) in &map {
        let Some(cycles) = value.as_f64().filter(|v| v.is_finite() && *v >= 0.0) else {
            return Err(TpebsError::NotCycles {
                path: path.to_path_buf(),
                key: key.clone(),
                value: value.to_string(),
            });
        };
        let matched: Vec<String> = plan
            .retire_events
            .iter()
            .filter(|r| r.name.eq_ignore_ascii_case(key) || bare(&r.name) == bare(key))
            .map(|r| r.name.clone())
            .collect();
        if matched.is_empty() {
            unused.push(key.clone());
        }
        for name in matched {
            plan.set_retire_latency_of(name, cycles);
        }
    }
    Ok(unused)
}

/// Starts one precise sampling event per `:R` input of `plan`, on the CPUs or task of
/// `target` (the online CPUs of `sysfs` for a task).
pub fn start_sampler<S: Syscalls>(
    plan: &Plan,
    sys: S,
    target: &Target,
    sysfs: &Sysfs,
) -> Result<Sampler<S>, TpebsError> {
    let mut specs = Vec::new();
    for r in &plan.retire_events {
        let event = r.event.as_ref().map_err(|why| TpebsError::Unsampleable {
            event: r.name.clone(),
            metrics: r.metrics.clone(),
            why: why.clone(),
        })?;
        let mut attr = event.attr.clone();
        // Timed PEBS: a precise event; the retire latency is the weight struct's var3_w.
        attr.precise_ip = 1;
        specs.push(SampleSpec { name: r.name.clone(), attr, cpus: event.cpus.clone() });
    }
    if specs.is_empty() {
        return Err(TpebsError::NoInputs);
    }
    // The sampler follows a task with `inherit`: the process of -p, the first thread of -t.
    let target = match target {
        Target::Threads(tids) => {
            Target::Task { pid: tids.first().copied().unwrap_or(0), on_exec: false }
        }
        other => other.clone(),
    };
    let options = SamplerOptions {
        task_cpus: match target {
            Target::Task { .. } | Target::Threads(_) => sysfs.online_cpus().unwrap_or_default(),
            Target::Cpus(_) => Vec::new(),
        },
        ..SamplerOptions::default()
    };
    Sampler::start(sys, &specs, &target, &options).map_err(TpebsError::Start)
}

/// The retire latency each `:R` input gets from its samples (0 with none, as perf does):
/// since the last read when `interval`, else since the start.
pub fn latencies(reports: &[EventReport], mode: TpebsMode, interval: bool) -> Vec<(String, f64)> {
    reports
        .iter()
        .map(|r| {
            let summary = if interval { &r.interval } else { &r.total };
            let value = summary.value(mode).unwrap_or(0.0);
            (r.name.clone(), value)
        })
        .collect()
}

/// A sampler running beside a session's counters, and the statistic its latencies use.
pub(crate) struct Sampling<S: Syscalls> {
    pub(crate) sampler: Sampler<S>,
    pub(crate) mode: TpebsMode,
}
