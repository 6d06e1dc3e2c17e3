//! Ground-truth workloads: what the simulated machine is running, as data a user can write.
//!
//! A workload is a JSON file (`crates/sim/workloads/*.json` are the built-in ones):
//!
//! ```json
//! {
//!   "description": "what it models",
//!   "cycles_ghz": 2.5, "ref_ghz": 2.0, "tsc_ghz": 2.0, "cpu_step_percent": 5,
//!   "ipc": 1.6, "kernel_percent": 10, "package_watts": 50,
//!   "topdown": { "tma_frontend_bound": 20, "tma_fetch_latency": 12.2, "...": 0 },
//!   "metrics": { "tma_info_memory_l1mpki": 12, "memory_bandwidth_read": 9000 },
//!   "phases": { "switch_every_ms": 10, "list": [ { "name": "compute", "ipc": 2.4,
//!               "topdown": { "tma_retiring": 60 } } ] }
//! }
//! ```
//!
//! * `topdown`: the TMA tree as true fractions, in percent of all slots (as perf prints
//!   them), by the vendor's node names (`tma_*` for Intel cores and atoms, `frontend_bound`
//!   etc. for AMD's PipelineL1/L2 and Arm's TopdownL1). A model's node the workload does not
//!   name takes an equal share of what its named siblings leave of the parent; named children
//!   that do not add up to their parent are scaled to it, so children always sum to their
//!   parent (the vendor tree's `tma_<parent>_group` says who the children are). A node with a
//!   single child in a model's tree is a share of it, not a sum: that child defaults to a
//!   tenth of the parent.
//! * `metrics`: any other metric's true value, in the unit perf prints (after `ScaleUnit`):
//!   MPKI, bandwidths in MB/s, latencies, ratios. Names a model does not define are ignored.
//! * The clock: `cycles_ghz` on CPU 0, each further CPU `cpu_step_percent` % faster (so
//!   per-CPU sums are checked), `ref_ghz` for reference cycles, `tsc_ghz` for the TSC;
//!   `ipc` instructions per cycle; `kernel_percent` of every count is in kernel mode (what an
//!   event with `:k` counts; `:u` counts the rest); `package_watts` for RAPL.
//! * `phases`: the workload changes over time. Each entry overrides the fields above (a
//!   `topdown` or `metrics` entry overrides those names only) and phases follow each other
//!   every `switch_every_ms`, or after a random time uniform in `switch_random_ms: [lo, hi]`
//!   to a random other phase, or in list order each for a random length in its own range of
//!   `lengths_ms: [[lo, hi], ...]` (`seed` makes it repeatable). Counts under multiplexing then
//!   differ from the truth as on real machines.
//! * `cpu_offsets_ms`: where each CPU (by number) starts in the phases, so CPUs and SMT
//!   siblings run different phases at one time.
//! * `kernel`: the simulated kernel's HZ (the rotation interval is 1000 / HZ ms) and how
//!   unkind it is: `{"realistic": true, "hz": 1000, "seed": 7}` turns on rotation timers on
//!   the hrtimer grid with interrupt lateness, per-CPU phases, counting overcount and 8-bit
//!   PERF_METRICS ([`crate::realism`]). Without it the kernel is exact and rotates every CPU
//!   in lockstep, at the machine's HZ.
//!
//! [`SimWorkload::parse`] reports a syntax error with the file, line and column; a value out of
//! range names the field and its line.

use std::collections::BTreeMap;
use std::fmt;

pub use crate::realism::KernelSpec;

use serde::Deserialize;

/// The built-in workloads: name, file name and text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", include_str!("../workloads/default.json")),
    ("phased", include_str!("../workloads/phased.json")),
    ("memory-bound", include_str!("../workloads/memory-bound.json")),
];

/// The most phases a workload may list.
pub const MAX_PHASES: usize = 64;

/// What one phase runs: the clock, the TMA tree and other metrics' true values.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// A name for messages.
    #[serde(default)]
    pub name: String,
    /// Core cycles per second on CPU 0, in GHz.
    pub cycles_ghz: Option<f64>,
    /// Reference cycles per second, in GHz.
    pub ref_ghz: Option<f64>,
    /// Instructions per cycle.
    pub ipc: Option<f64>,
    /// Percent of every count that is in kernel mode.
    pub kernel_percent: Option<f64>,
    /// TMA nodes in percent of slots.
    #[serde(default)]
    pub topdown: BTreeMap<String, f64>,
    /// Other metrics in the unit perf prints.
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
}

/// How phases follow each other.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// Switch to the next phase every this many milliseconds.
    pub switch_every_ms: Option<f64>,
    /// Switch after a random time in this range (milliseconds) to a random other phase.
    pub switch_random_ms: Option<[f64; 2]>,
    /// One `[shortest, longest]` length in milliseconds per phase of `list`: the phases
    /// follow each other in list order, each for a random length in its own range (a
    /// periodic workload with jitter, rare bursts, frames).
    pub lengths_ms: Option<Vec<[f64; 2]>>,
    /// Seed of the random schedule.
    #[serde(default)]
    pub seed: u64,
    /// The phases.
    pub list: Vec<Phase>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    description: String,
    tsc_ghz: Option<f64>,
    cpu_step_percent: Option<f64>,
    package_watts: Option<f64>,
    cycles_ghz: Option<f64>,
    ref_ghz: Option<f64>,
    ipc: Option<f64>,
    kernel_percent: Option<f64>,
    #[serde(default)]
    topdown: BTreeMap<String, f64>,
    #[serde(default)]
    metrics: BTreeMap<String, f64>,
    phases: Option<Phases>,
    #[serde(default)]
    kernel: KernelSpec,
    cpu_offsets_ms: Option<Vec<f64>>,
}

/// One phase with every field decided.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSpec {
    /// The phase's name (`base` without phases).
    pub name: String,
    /// Core cycles per second on CPU 0.
    pub cycles_hz: f64,
    /// Reference cycles per second.
    pub ref_hz: f64,
    /// Instructions per cycle.
    pub ipc: f64,
    /// Fraction of counts in kernel mode.
    pub kernel_share: f64,
    /// TMA nodes as fractions of slots.
    pub topdown: BTreeMap<String, f64>,
    /// Other metrics, in printed units.
    pub metrics: BTreeMap<String, f64>,
}

/// The phase schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// One phase all the time.
    Constant,
    /// Phase `k mod n` during `[k * every, (k + 1) * every)` nanoseconds.
    Every(u64),
    /// Random lengths in `[lo, hi]` nanoseconds, random next phase, from `seed`.
    Random {
        /// Shortest phase.
        lo: u64,
        /// Longest phase.
        hi: u64,
        /// Seed.
        seed: u64,
    },
    /// Phases in order, phase `i` for a random length in `ranges[i]` nanoseconds, from `seed`.
    Lengths {
        /// `(shortest, longest)` per phase.
        ranges: Vec<(u64, u64)>,
        /// Seed.
        seed: u64,
    },
}

/// A ground-truth workload the simulated machine runs (its clocks, TMA fractions and phases),
/// parsed from a workload file; not the process `tmetric stat` forks (`tmetric_runtime::Workload`).
#[derive(Debug, Clone, PartialEq)]
pub struct SimWorkload {
    /// Where it came from (a file name or `builtin:NAME`), for messages.
    pub origin: String,
    /// What it models.
    pub description: String,
    /// TSC ticks per second.
    pub tsc_hz: f64,
    /// Per-CPU speed step, in percent of CPU 0.
    pub cpu_step_percent: f64,
    /// Package power in watts.
    pub package_watts: f64,
    /// The phases (one when the workload has none).
    pub phases: Vec<PhaseSpec>,
    /// How they follow each other.
    pub schedule: Schedule,
    /// The simulated kernel's HZ and how unkind it is (`kernel`; exact and lockstep when
    /// not given).
    pub kernel: KernelSpec,
    /// Where each CPU starts in the phases (`cpu_offsets_ms`, by CPU number; CPUs past the
    /// list start at 0 or, with [`crate::Realism::phase_offsets`], at a random point).
    pub cpu_offsets_ns: Vec<u64>,
}

/// A workload that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimWorkloadError(pub String);

impl fmt::Display for SimWorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimWorkloadError {}

/// The 1-based line of the first `"key"` in `text`, for messages about a field.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    text.find(&quoted).map(|at| text[..at].matches('\n').count() + 1)
}

impl SimWorkload {
    /// A built-in workload by name ([`BUILTIN`]).
    pub fn builtin(name: &str) -> Option<SimWorkload> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        Some(
            SimWorkload::parse(text, &format!("builtin:{name}"))
                .unwrap_or_else(|e| panic!("the built-in workload `{name}` is broken: {e}")),
        )
    }

    /// The default workload (`builtin:default`).
    pub fn default_workload() -> SimWorkload {
        SimWorkload::builtin("default").expect("the default workload is built in")
    }

    /// A built-in name or a file path.
    pub fn load(name_or_path: &str) -> Result<SimWorkload, SimWorkloadError> {
        if let Some(w) = SimWorkload::builtin(name_or_path) {
            return Ok(w);
        }
        let text = tmetric_runtime::input::read_to_string(
            name_or_path,
            tmetric_runtime::input::WORKLOAD,
        )
        .map_err(|e| {
            SimWorkloadError(format!(
                "cannot read the workload `{name_or_path}`: {e} (give a JSON file or one of the \
                 built-in workloads: {})",
                BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
        })?;
        SimWorkload::parse(&text, name_or_path)
    }

    /// Parses workload JSON; `origin` names it in messages. Values past what any machine
    /// runs (clocks over 100 GHz, IPC over 64, more than [`MAX_PHASES`] phases) are refused.
    pub fn parse(text: &str, origin: &str) -> Result<SimWorkload, SimWorkloadError> {
        let file: File = serde_json::from_str(text).map_err(|e| {
            let what = e.to_string();
            let what = what.split(" at line ").next().unwrap_or(&what).to_string();
            SimWorkloadError(format!(
                "{origin}:{}:{}: {what}; a workload is a JSON object (see `tmetric_sim::workload`)",
                e.line(),
                e.column()
            ))
        })?;
        let bad = |key: &str, what: String| {
            let at = line_of(text, key).map_or_else(String::new, |l| format!(":{l}"));
            SimWorkloadError(format!("{origin}{at}: `{key}`: {what}"))
        };
        // Beyond these no machine runs, and counts derived from them pass 2^64 within an
        // interval (`cycles_ghz 1e12` printed 18446744073709551616 without a word).
        let most = |key: &str| match key {
            "cycles_ghz" | "ref_ghz" | "tsc_ghz" => 100.0,
            "ipc" => 64.0,
            _ => 100_000.0,
        };
        let positive = |key: &str, v: Option<f64>, default: f64| -> Result<f64, SimWorkloadError> {
            match v {
                None => Ok(default),
                Some(v) if v.is_finite() && v > 0.0 && v <= most(key) => Ok(v),
                Some(v) if v.is_finite() && v > 0.0 => Err(bad(
                    key,
                    format!("{v} is more than {} a simulated machine takes", most(key)),
                )),
                Some(v) => Err(bad(key, format!("{v} is not a positive number"))),
            }
        };
        let tsc_hz = positive("tsc_ghz", file.tsc_ghz, 2.0)? * 1e9;
        let cpu_step_percent = match file.cpu_step_percent {
            None => 5.0,
            Some(v) if v.is_finite() && (0.0..=100.0).contains(&v) => v,
            Some(v) => return Err(bad("cpu_step_percent", format!("{v} is not in 0..=100"))),
        };
        let package_watts = positive("package_watts", file.package_watts, 50.0)?;
        let check_phase = |p: &PhaseSpec| -> Result<(), SimWorkloadError> {
            for (name, v) in &p.topdown {
                if !v.is_finite() || !(0.0..=1.0).contains(v) {
                    return Err(bad(name, format!("{} % is not in 0..=100", v * 100.0)));
                }
            }
            for (name, v) in &p.metrics {
                if !v.is_finite() || *v < 0.0 {
                    return Err(bad(name, format!("{v} is not a finite number >= 0")));
                }
            }
            if !(0.0..=1.0).contains(&p.kernel_share) {
                return Err(bad("kernel_percent", "is not in 0..=100".into()));
            }
            Ok(())
        };
        fn percent(m: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
            m.iter().map(|(k, v)| (k.clone(), v / 100.0)).collect()
        }
        let base = PhaseSpec {
            name: "base".into(),
            cycles_hz: positive("cycles_ghz", file.cycles_ghz, 2.5)? * 1e9,
            ref_hz: positive("ref_ghz", file.ref_ghz, 2.0)? * 1e9,
            ipc: positive("ipc", file.ipc, 1.6)?,
            kernel_share: file.kernel_percent.unwrap_or(10.0) / 100.0,
            topdown: percent(&file.topdown).into_iter().collect(),
            metrics: file.metrics.clone(),
        };
        check_phase(&base)?;
        let (phases, schedule) = match &file.phases {
            None => (vec![base], Schedule::Constant),
            Some(ph) => {
                if ph.list.is_empty() {
                    return Err(bad("list", "a phase list needs at least one phase".into()));
                }
                // Each phase is set up before counting starts: 1,000 took 49 s, 100,000 never
                // started.
                if ph.list.len() > MAX_PHASES {
                    return Err(bad(
                        "list",
                        format!("{} phases: at most {MAX_PHASES} are simulated", ph.list.len()),
                    ));
                }
                let ms = |v: f64, key: &str| -> Result<u64, SimWorkloadError> {
                    if v.is_finite() && v >= 0.1 {
                        Ok((v * 1e6) as u64)
                    } else {
                        Err(bad(key, format!("{v} ms is not a length of at least 0.1 ms")))
                    }
                };
                let schedule = match (ph.switch_every_ms, ph.switch_random_ms, &ph.lengths_ms) {
                    (Some(every), None, None) => Schedule::Every(ms(every, "switch_every_ms")?),
                    (None, None, Some(lengths)) => {
                        if lengths.len() != ph.list.len() {
                            return Err(bad(
                                "lengths_ms",
                                format!(
                                    "has {} ranges for {} phases: give one [shortest, longest] per phase",
                                    lengths.len(),
                                    ph.list.len()
                                ),
                            ));
                        }
                        let mut ranges = Vec::new();
                        for &[lo, hi] in lengths {
                            let (lo, hi) = (ms(lo, "lengths_ms")?, ms(hi, "lengths_ms")?);
                            if lo > hi {
                                return Err(bad("lengths_ms", "needs [shortest, longest]".into()));
                            }
                            ranges.push((lo, hi));
                        }
                        Schedule::Lengths { ranges, seed: ph.seed }
                    }
                    (None, Some([lo, hi]), None) => {
                        let (lo, hi) = (ms(lo, "switch_random_ms")?, ms(hi, "switch_random_ms")?);
                        if lo > hi {
                            return Err(bad(
                                "switch_random_ms",
                                "needs [shortest, longest]".into(),
                            ));
                        }
                        Schedule::Random { lo, hi, seed: ph.seed }
                    }
                    _ => {
                        return Err(bad(
                            "phases",
                            "give exactly one of `switch_every_ms`, `switch_random_ms` and `lengths_ms`"
                                .into(),
                        ));
                    }
                };
                let mut out = Vec::new();
                for (i, p) in ph.list.iter().enumerate() {
                    let mut spec = base.clone();
                    spec.name =
                        if p.name.is_empty() { format!("phase {i}") } else { p.name.clone() };
                    spec.cycles_hz =
                        positive("cycles_ghz", p.cycles_ghz, base.cycles_hz / 1e9)? * 1e9;
                    spec.ref_hz = positive("ref_ghz", p.ref_ghz, base.ref_hz / 1e9)? * 1e9;
                    spec.ipc = positive("ipc", p.ipc, base.ipc)?;
                    if let Some(k) = p.kernel_percent {
                        spec.kernel_share = k / 100.0;
                    }
                    spec.topdown.extend(percent(&p.topdown));
                    spec.metrics.extend(p.metrics.iter().map(|(k, v)| (k.clone(), *v)));
                    check_phase(&spec)?;
                    out.push(spec);
                }
                (out, schedule)
            }
        };
        if let Some((key, what)) = file.kernel.problem() {
            return Err(bad(key, what));
        }
        let mut cpu_offsets_ns = Vec::new();
        for &ms in file.cpu_offsets_ms.iter().flatten() {
            if !(ms.is_finite() && (0.0..=3.6e6).contains(&ms)) {
                return Err(bad(
                    "cpu_offsets_ms",
                    format!("{ms} is not a number of milliseconds in 0..=3600000"),
                ));
            }
            cpu_offsets_ns.push((ms * 1e6) as u64);
        }
        Ok(SimWorkload {
            origin: origin.to_string(),
            description: file.description,
            tsc_hz,
            cpu_step_percent,
            package_watts,
            phases,
            schedule,
            kernel: file.kernel,
            cpu_offsets_ns,
        })
    }

    /// A copy of one phase as a constant workload (for the truth of that phase alone).
    pub fn only_phase(&self, index: usize) -> SimWorkload {
        SimWorkload {
            phases: vec![self.phases[index].clone()],
            schedule: Schedule::Constant,
            ..self.clone()
        }
    }

    /// Cycles per second on `cpu` in phase `phase`.
    pub fn cycles_on(&self, phase: usize, cpu: u32) -> f64 {
        self.phases[phase].cycles_hz * (1.0 + self.cpu_step_percent / 100.0 * f64::from(cpu))
    }
}

/// SplitMix64, for a repeatable random phase schedule.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The phase boundaries of a schedule, generated as far as they are asked for.
#[derive(Debug, Clone)]
pub struct Timeline {
    schedule: Schedule,
    phases: usize,
    /// `(start ns, phase)` of each segment so far, in order; the first starts at 0.
    segments: Vec<(u64, usize)>,
    /// Where the last known segment ends.
    end: u64,
}

impl Timeline {
    /// The timeline of `workload`.
    pub fn new(workload: &SimWorkload) -> Timeline {
        let mut t = Timeline {
            schedule: workload.schedule.clone(),
            phases: workload.phases.len(),
            segments: vec![(0, 0)],
            end: 0,
        };
        t.end = t.length(0);
        t
    }

    fn length(&self, k: usize) -> u64 {
        match self.schedule {
            Schedule::Constant => u64::MAX,
            Schedule::Every(every) => every.max(1),
            Schedule::Random { lo, hi, seed } => {
                let r = splitmix(seed ^ (k as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
                lo + if hi > lo { r % (hi - lo + 1) } else { 0 }
            }
            Schedule::Lengths { ref ranges, seed } => {
                let (lo, hi) = ranges[k % ranges.len()];
                let r = splitmix(seed ^ (k as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
                lo + if hi > lo { r % (hi - lo + 1) } else { 0 }
            }
        }
        .max(1)
    }

    fn next_phase(&self, k: usize, current: usize) -> usize {
        match self.schedule {
            Schedule::Constant => 0,
            Schedule::Every(_) | Schedule::Lengths { .. } => (current + 1) % self.phases,
            Schedule::Random { seed, .. } => {
                if self.phases < 2 {
                    return 0;
                }
                let r = splitmix(seed.rotate_left(17) ^ (k as u64).wrapping_mul(0x9e37_79b9));
                let other = (r % (self.phases as u64 - 1)) as usize;
                if other >= current { other + 1 } else { other }
            }
        }
    }

    fn extend_to(&mut self, t: u64) {
        while self.end <= t && self.end != u64::MAX {
            let k = self.segments.len();
            let current = self.segments[k - 1].1;
            let next = self.next_phase(k, current);
            self.segments.push((self.end, next));
            self.end = self.end.saturating_add(self.length(k));
        }
    }

    /// The phase at time `t`.
    pub fn phase_at(&mut self, t: u64) -> usize {
        self.extend_to(t);
        let i = self.segments.partition_point(|&(start, _)| start <= t);
        self.segments[i.saturating_sub(1)].1
    }

    /// Nanoseconds spent in each phase during `[from, to)`.
    pub fn split(&mut self, from: u64, to: u64) -> Vec<(usize, u64)> {
        if to <= from {
            return Vec::new();
        }
        if self.phases == 1 {
            return vec![(0, to - from)];
        }
        self.extend_to(to);
        let mut out: Vec<(usize, u64)> = Vec::new();
        let first = self.segments.partition_point(|&(start, _)| start <= from).saturating_sub(1);
        for (i, &(start, phase)) in self.segments.iter().enumerate().skip(first) {
            let end = self.segments.get(i + 1).map_or(self.end, |s| s.0);
            let (a, b) = (start.max(from), end.min(to));
            if a < b {
                match out.iter_mut().find(|(p, _)| *p == phase) {
                    Some(entry) => entry.1 += b - a,
                    None => out.push((phase, b - a)),
                }
            }
            if end >= to {
                break;
            }
        }
        out
    }
}
