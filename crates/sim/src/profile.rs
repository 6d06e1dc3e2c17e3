//! The rates behind the simulated counters: a [`SimWorkload`] and what [`crate::derive`] made of
//! it for the machine, per phase.
//!
//! * Every event some metric of the machine's catalogue model reads counts what the
//!   derivation gives (per cycle of its CPU for core events, per second per instance for the
//!   others), so each metric evaluates to the workload's truth.
//! * cycles run at the phase's `cycles_ghz` on CPU 0 and `cpu_step_percent` % faster per CPU
//!   number after it (so per-CPU sums are checked); instructions, reference cycles, the TSC,
//!   slots and the topdown fields follow the workload's clock and tree even when no metric
//!   reads them.
//! * An event with the AnyThread bit counts both SMT threads (twice the thread's count with
//!   SMT on); `exclude_user` keeps the workload's kernel share of a count, `exclude_kernel`
//!   the rest.
//! * Every other event counts at a pseudo rate from a hash of its PMU name and encoding: 0.1 %
//!   to 50 % of the cycles rate for core events, stable across runs and platforms.

use std::sync::Arc;

use crate::derive::{Amount, Derivation};
use crate::machine::{CoreKind, Machine, X86Core};
use crate::sched::{TD_METRIC_FIRST, TD_METRIC_MAX, TD_SLOTS};
use crate::workload::{SimWorkload, Timeline};

/// What is being counted, as the rates need to know it: the kernel's view of an opened event
/// (the PMU and the config it kept).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A software event (`PERF_COUNT_SW_*`).
    Software(u64),
    /// A tracepoint id.
    Tracepoint(u64),
    /// An x86 core event: machine PMU index, the kept config without the AnyThread bit, and
    /// config1 when an extra register uses it (else 0).
    X86 {
        /// Index into [`Machine::pmus`].
        pmu: usize,
        /// The kept config.
        config: u64,
        /// config1 when the event has an extra register, else 0.
        config1: u64,
    },
    /// An arm64 PMUv3 event number.
    Arm {
        /// Index into [`Machine::pmus`].
        pmu: usize,
        /// The event number.
        config: u64,
    },
    /// An `msr` event.
    Msr(u64),
    /// A `power` event (per package).
    Power(u64),
    /// A generic hardware cache event (`PERF_TYPE_HW_CACHE` config).
    Cache {
        /// Index into [`Machine::pmus`].
        pmu: usize,
        /// The cache/op/result config.
        config: u64,
    },
    /// A `cstate_*` residency counter.
    Cstate {
        /// Index into [`Machine::pmus`].
        pmu: usize,
        /// The config.
        config: u64,
    },
    /// An uncore event: the box kind (`uncore_cha` for `uncore_cha_0`, ...) and kept config;
    /// every box of a kind counts alike.
    Uncore {
        /// The PMU name without its box number.
        kind: String,
        /// The kept config.
        config: u64,
        /// config1 of boxes with filter registers, else 0.
        config1: u64,
    },
}

/// How fast an event counts on one CPU: counts per second in each phase of the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate(pub Vec<f64>);

impl Rate {
    /// One rate in every phase.
    pub fn constant(per_sec: f64, phases: usize) -> Rate {
        Rate(vec![per_sec; phases.max(1)])
    }

    /// The count over `[from, to)` nanoseconds of `timeline`.
    pub fn integral(&self, timeline: &mut Timeline, from: u64, to: u64) -> f64 {
        timeline
            .split(from, to)
            .into_iter()
            .map(|(phase, ns)| self.0.get(phase).copied().unwrap_or(0.0) * ns as f64 / 1e9)
            .sum()
    }

    /// Counts per second in phase `phase`.
    pub fn per_sec(&self, phase: usize) -> f64 {
        self.0.get(phase).copied().unwrap_or(0.0)
    }
}

/// One period of retire latencies: `(cycles, samples)` in write order.
pub type LatencyPeriod = &'static [(u16, u32)];

/// Retire latencies of the Meteor Lake `cpu_core` events its TMA metrics read with `:R`
/// (raw config `umask << 8 | event`, name), as one period of 100 PEBS samples: `(cycles,
/// samples)` in the order the samples are written. Each period has its 3 largest latencies
/// first, so over whole periods the 97% tail mean drops exactly those, and the last sample
/// has the last latency listed. For `MEM_INST_RETIRED.STLB_HIT_STORES`: mean 4.85, min 3,
/// max 40, last 5, 97% mean 365/97.
pub const RETIRE_LATENCIES: &[(u64, &str, LatencyPeriod)] = &[
    (0x0ad0, "MEM_INST_RETIRED.STLB_HIT_STORES", &[(40, 3), (3, 60), (5, 37)]),
    (0x09d0, "MEM_INST_RETIRED.STLB_HIT_LOADS", &[(50, 3), (4, 57), (6, 40)]),
    (0x21d0, "MEM_INST_RETIRED.LOCK_LOADS", &[(90, 3), (20, 47), (25, 50)]),
    (0x41d0, "MEM_INST_RETIRED.SPLIT_LOADS", &[(60, 3), (8, 67), (12, 30)]),
    (0x42d0, "MEM_INST_RETIRED.SPLIT_STORES", &[(30, 3), (1, 90), (2, 7)]),
    (0x04d1, "MEM_LOAD_RETIRED.L3_HIT", &[(120, 3), (30, 77), (40, 20)]),
    (0x01d2, "MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS", &[(200, 3), (60, 67), (80, 30)]),
    (0x02d2, "MEM_LOAD_L3_HIT_RETIRED.XSNP_NO_FWD", &[(180, 3), (50, 67), (70, 30)]),
    (0x04d2, "MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD", &[(220, 3), (70, 67), (90, 30)]),
];

/// The mean retire latency PEBS samples of x86 core event `config` carry on `machine`: the
/// [`RETIRE_LATENCIES`] period's mean where the machine reports retire latencies, else 0
/// (what `tmetric stat --record-tpebs` measures in the default `mean` mode).
pub fn retire_latency_mean(machine: &Machine, config: u64) -> f64 {
    if !machine.retire_latency {
        return 0.0;
    }
    RETIRE_LATENCIES.iter().find(|(c, _, _)| *c == config & 0xffff).map_or(0.0, |(_, _, p)| {
        let (sum, n) = p.iter().fold((0u64, 0u64), |(s, n), &(c, k)| {
            (s + u64::from(c) * u64::from(k), n + u64::from(k))
        });
        sum as f64 / n as f64
    })
}

/// FNV-1a, so pseudo rates do not depend on the standard library's hasher.
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &byte in *part {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A workload on a machine: the workload, its derivation and the phase timeline.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The workload.
    pub workload: SimWorkload,
    derivation: Arc<Derivation>,
}

impl Profile {
    /// `workload` on `machine` (derived once per machine and workload in a process).
    pub fn new(machine: &Machine, workload: SimWorkload) -> Profile {
        let derivation = Derivation::of(machine, &workload);
        Profile { workload, derivation }
    }

    /// The derivation.
    pub fn derivation(&self) -> &Derivation {
        &self.derivation
    }

    /// A fresh timeline of the workload's phases.
    pub fn timeline(&self) -> Timeline {
        Timeline::new(&self.workload)
    }

    /// Cycles per second on `cpu` in the first phase.
    pub fn cycles_on(&self, cpu: u32) -> u64 {
        self.workload.cycles_on(0, cpu) as u64
    }

    /// Instructions per second on `cpu` in the first phase.
    pub fn instructions_on(&self, cpu: u32) -> u64 {
        (self.workload.cycles_on(0, cpu) * self.workload.phases[0].ipc) as u64
    }

    /// One period of retire latencies `(cycles, samples)` for PEBS samples of the x86 core
    /// event `config` (the kept config) on `pmu`: [`RETIRE_LATENCIES`] for Golden Cove class
    /// cores, else one pseudo latency of 1 to 64 cycles from a hash, the same every sample.
    pub fn retire_latencies(&self, core: &X86Core, pmu: &str, config: u64) -> Vec<(u16, u32)> {
        if core.kind == CoreKind::GoldenCove
            && config & !0xffff == 0
            && let Some((_, _, period)) = RETIRE_LATENCIES.iter().find(|(c, _, _)| *c == config)
        {
            return period.to_vec();
        }
        let cycles = fnv(&[pmu.as_bytes(), b"retire", &config.to_le_bytes()]) % 64 + 1;
        vec![(cycles as u16, 1)]
    }

    /// The rate of `source` on `cpu`, times `factor(phase)` (AnyThread, kernel share).
    pub fn rate(
        &self,
        machine: &Machine,
        source: &Source,
        cpu: u32,
        factor: impl Fn(usize) -> f64,
    ) -> Rate {
        let w = &self.workload;
        let rates = (0..w.phases.len())
            .map(|phase| factor(phase) * self.per_sec(machine, source, phase, cpu))
            .collect();
        Rate(rates)
    }

    fn per_sec(&self, machine: &Machine, source: &Source, phase: usize, cpu: u32) -> f64 {
        let w = &self.workload;
        let spec = &w.phases[phase];
        let cycles = w.cycles_on(phase, cpu);
        if let Some(amount) = self.derivation.tables.get(phase).and_then(|t| t.get(source)) {
            return match *amount {
                Amount::PerCycle(r) => r * cycles,
                Amount::PerSecond(r) => r,
            };
        }
        let pseudo = |parts: &[&[u8]]| cycles * ((fnv(parts) % 500 + 1) as f64) / 1000.0;
        let node = |n: u64| -> f64 {
            const NODES: [&str; 8] = [
                "tma_retiring",
                "tma_bad_speculation",
                "tma_frontend_bound",
                "tma_backend_bound",
                "tma_heavy_operations",
                "tma_branch_mispredicts",
                "tma_fetch_latency",
                "tma_memory_bound",
            ];
            NODES.get(n as usize).and_then(|k| spec.topdown.get(*k)).copied().unwrap_or(0.0)
        };
        match source {
            Source::Software(config) => match config {
                0 | 1 => 1e9,
                2 | 5 => 2_000.0,
                3 => 500.0,
                4 => 10.0,
                11 => 100.0,
                _ => 0.0,
            },
            Source::Tracepoint(id) => (fnv(&[b"tracepoint", &id.to_le_bytes()]) % 1000) as f64,
            Source::X86 { pmu, config, config1 } => {
                let p = &machine.pmus[*pmu];
                let (kind, width) = p.x86().map_or((CoreKind::Skylake, 4), |c| (c.kind, c.width));
                let width = width as f64;
                let code = config & 0xffff;
                let plain = config & !0xffff == 0;
                match (code, kind) {
                    _ if !plain => {
                        pseudo(&[p.name.as_bytes(), &config.to_le_bytes(), &config1.to_le_bytes()])
                    }
                    (0x003c, _) | (0x0076, CoreKind::Zen4 | CoreKind::Zen5) => cycles,
                    (0x00c0 | 0x0100 | 0x01c0, _) => cycles * spec.ipc,
                    (0x0300 | 0x013c, _) => spec.ref_hz,
                    (TD_SLOTS, _) => cycles * width,
                    (TD_METRIC_FIRST..=TD_METRIC_MAX, _) if code & 0xff == 0 => {
                        cycles * width * node((code - TD_METRIC_FIRST) >> 8)
                    }
                    _ => {
                        pseudo(&[p.name.as_bytes(), &config.to_le_bytes(), &config1.to_le_bytes()])
                    }
                }
            }
            Source::Arm { pmu, config } => {
                let p = &machine.pmus[*pmu];
                match config & 0xffff {
                    0x11 => cycles,
                    0x08 => cycles * spec.ipc,
                    other => pseudo(&[p.name.as_bytes(), &other.to_le_bytes()]),
                }
            }
            Source::Msr(config) => match config {
                0 => w.tsc_hz,
                1 => cycles,
                2 => spec.ref_hz,
                3 => cycles * 0.9,
                6 => cycles * spec.ipc,
                _ => 0.0,
            },
            Source::Power(config) => {
                let pkg = w.package_watts * 4_294_967_296.0;
                if *config == 2 { pkg } else { pkg / 4.0 }
            }
            Source::Cache { pmu, config } => {
                pseudo(&[machine.pmus[*pmu].name.as_bytes(), b"cache", &config.to_le_bytes()])
            }
            Source::Cstate { pmu, config } => {
                // Residency ticks at the TSC rate for 1 % to 30 % of the time.
                let name = machine.pmus[*pmu].name.as_bytes();
                w.tsc_hz * ((fnv(&[name, &config.to_le_bytes()]) % 30 + 1) as f64) / 100.0
            }
            Source::Uncore { kind, config, config1 } => {
                let h = fnv(&[kind.as_bytes(), &config.to_le_bytes(), &config1.to_le_bytes()]);
                ((h % 1000 + 1) * 1_000_000) as f64
            }
        }
    }
}
