//! The workload profile behind the simulated counters: constant per-CPU rates that are
//! consistent with each other, so every metric has a known true value.
//!
//! * cycles run at [`Profile::cycles_hz`] on CPU 0 and `cpu_step_percent` % faster per CPU
//!   number after it (so per-CPU sums are checked); every core event scales with them.
//! * instructions = cycles x IPC; ref-cycles and `msr/tsc/` at fixed rates.
//! * slots = cycles x the PMU's pipeline width ([`super::machine::X86Core::width`], the arm
//!   `caps/slots`); the topdown fractions are bytes out of 255 as PERF_METRICS holds them
//!   ([`TOPDOWN`]): level 1 sums to exactly 255, each level-2 part is at most its parent.
//!   `topdown-*` reads give `slots * byte / 255` like `icl_get_topdown_value`.
//! * the events that correct the level-1 formulas of the vendor metrics
//!   (`INT_MISC.UOP_DROPPING`, `INT_MISC.CLEARS_COUNT`, `INT_MISC.RECOVERY_CYCLES`, arm64
//!   `br_mis_pred`) count 0,
//!   and the events the pre-PERF_METRICS formulas use (SKX `IDQ_UOPS_NOT_DELIVERED.CORE`,
//!   `UOPS_RETIRED.RETIRE_SLOTS`, `UOPS_ISSUED.ANY`; the atom `TOPDOWN_*.ALL`; Zen 4's
//!   PipelineL1 dispatch-slot events; the SBSA `stall_slot*`, `op_retired`, `op_spec`) follow
//!   the same fractions, so the level-1 metrics evaluate to the [`TOPDOWN`] fractions on
//!   every machine (`tests/kernel.rs` checks it through the catalogue).
//! * every other event counts at a pseudo rate from a hash of its PMU name and encoding:
//!   0.1 % to 50 % of the cycles rate for core events, stable across runs and platforms.

use super::machine::{ArmCore, CoreKind, X86Core};
use super::sched::{ALL_EVENT_FLAGS, EVENTSEL_ANY, TD_METRIC_FIRST, TD_METRIC_MAX, TD_SLOTS};

/// The topdown fractions, in 255ths as the PERF_METRICS bytes hold them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topdown {
    /// Byte 0: retiring.
    pub retiring: u8,
    /// Byte 1: bad speculation.
    pub bad_spec: u8,
    /// Byte 2: frontend bound.
    pub fe_bound: u8,
    /// Byte 3: backend bound.
    pub be_bound: u8,
    /// Byte 4: heavy operations (part of retiring).
    pub heavy_ops: u8,
    /// Byte 5: branch mispredicts (part of bad speculation).
    pub br_mispredict: u8,
    /// Byte 6: fetch latency (part of frontend bound).
    pub fetch_lat: u8,
    /// Byte 7: memory bound (part of backend bound).
    pub mem_bound: u8,
}

impl Topdown {
    /// The byte for metric index `n` (umask 0x80 + n).
    pub fn byte(&self, n: u64) -> Option<u8> {
        Some(match n {
            0 => self.retiring,
            1 => self.bad_spec,
            2 => self.fe_bound,
            3 => self.be_bound,
            4 => self.heavy_ops,
            5 => self.br_mispredict,
            6 => self.fetch_lat,
            7 => self.mem_bound,
            _ => return None,
        })
    }

    /// The fraction of slots for metric index `n`.
    pub fn fraction(&self, n: u64) -> f64 {
        self.byte(n).map_or(f64::NAN, |b| f64::from(b) / 255.0)
    }
}

/// The default fractions: retiring 40 %, bad speculation 26/255 (10.2 %), frontend bound 20 %,
/// backend bound 76/255 (29.8 %); heavy ops 26/255, branch mispredicts 20/255, fetch
/// latency 31/255, memory bound 46/255.
pub const TOPDOWN: Topdown = Topdown {
    retiring: 102,
    bad_spec: 26,
    fe_bound: 51,
    be_bound: 76,
    heavy_ops: 26,
    br_mispredict: 20,
    fetch_lat: 31,
    mem_bound: 46,
};

/// Cycles per second on CPU 0 by default.
pub const CYCLES_HZ: u64 = 2_500_000_000;
/// Instructions per 1000 cycles by default (IPC 1.6).
pub const INSTRUCTIONS_PER_KCYCLE: u64 = 1_600;
/// ref-cycles and TSC ticks per second by default.
pub const REF_HZ: u64 = 2_000_000_000;
/// How much faster each CPU runs than the one before it, in percent of CPU 0.
pub const CPU_STEP_PERCENT: u64 = 5;
/// Package power, in watts, for `power/energy-pkg/` (other domains: a quarter).
pub const PACKAGE_WATTS: u64 = 50;

/// A workload profile. [`Profile::default`] uses the constants of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Cycles per second on CPU 0.
    pub cycles_hz: u64,
    /// Instructions per 1000 cycles.
    pub instructions_per_kcycle: u64,
    /// ref-cycles per second (unscaled per CPU).
    pub ref_hz: u64,
    /// TSC ticks per second.
    pub tsc_hz: u64,
    /// Per-CPU speed step, in percent of CPU 0.
    pub cpu_step_percent: u64,
    /// Topdown fractions.
    pub topdown: Topdown,
}

impl Default for Profile {
    fn default() -> Profile {
        Profile {
            cycles_hz: CYCLES_HZ,
            instructions_per_kcycle: INSTRUCTIONS_PER_KCYCLE,
            ref_hz: REF_HZ,
            tsc_hz: REF_HZ,
            cpu_step_percent: CPU_STEP_PERCENT,
            topdown: TOPDOWN,
        }
    }
}

/// How fast an event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// Counts per second of running time.
    PerSec(u64),
    /// A topdown metric: `slots * byte / 255` over the same running time.
    Metric {
        /// The slots rate.
        slots_per_sec: u64,
        /// The PERF_METRICS byte.
        byte: u8,
    },
}

impl Rate {
    /// The count after `ns` nanoseconds of counting.
    pub fn count(self, ns: u64) -> u64 {
        let per_sec = |rate: u64| (u128::from(rate) * u128::from(ns) / 1_000_000_000) as u64;
        match self {
            Rate::PerSec(rate) => per_sec(rate),
            Rate::Metric { slots_per_sec, byte } => {
                (u128::from(per_sec(slots_per_sec)) * u128::from(byte) / 255) as u64
            }
        }
    }
}

/// What is being counted, as the profile needs to know it.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A software event (`PERF_COUNT_SW_*`).
    Software(u64),
    /// A tracepoint id.
    Tracepoint(u64),
    /// An x86 core event: the config the kernel keeps and config1 when an extra register
    /// uses it.
    X86 {
        /// The PMU's counter model.
        core: &'a X86Core,
        /// The PMU name (hash input).
        pmu: &'a str,
        /// The kept config.
        config: u64,
        /// config1 when the event has an extra register, else 0.
        config1: u64,
        /// SMT active (AnyThread counts both threads).
        smt: bool,
    },
    /// An arm64 PMUv3 event number.
    Arm {
        /// The PMU's counter model.
        core: &'a ArmCore,
        /// The PMU name.
        pmu: &'a str,
        /// The event number.
        config: u64,
    },
    /// `msr` event.
    Msr(u64),
    /// `power` event (per package).
    Power(u64),
    /// A generic hardware cache event (`PERF_TYPE_HW_CACHE` config).
    Cache {
        /// The PMU name.
        pmu: &'a str,
        /// The cache/op/result config.
        config: u64,
    },
    /// A `cstate_*` residency counter.
    Cstate {
        /// The PMU name.
        pmu: &'a str,
        /// The config.
        config: u64,
    },
    /// An uncore event.
    Uncore {
        /// The PMU name.
        pmu: &'a str,
        /// The kept config.
        config: u64,
    },
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

impl Profile {
    /// Cycles per second on `cpu`.
    pub fn cycles_on(&self, cpu: u32) -> u64 {
        self.cycles_hz * (100 + self.cpu_step_percent * u64::from(cpu)) / 100
    }

    /// Instructions per second on `cpu`.
    pub fn instructions_on(&self, cpu: u32) -> u64 {
        self.cycles_on(cpu) * self.instructions_per_kcycle / 1000
    }

    /// Slots per second on `cpu` for a pipeline `width` wide.
    pub fn slots_on(&self, cpu: u32, width: u64) -> u64 {
        self.cycles_on(cpu) * width
    }

    /// `slots * byte / 255` per second, for the events that mirror a topdown fraction.
    fn share(&self, slots: u64, byte: u8) -> u64 {
        slots * u64::from(byte) / 255
    }

    fn pseudo(&self, cycles: u64, parts: &[&[u8]]) -> u64 {
        let permille = fnv(parts) % 500 + 1;
        cycles * permille / 1000
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

    /// The rate of `source` on `cpu`.
    pub fn rate(&self, source: Source<'_>, cpu: u32) -> Rate {
        let cycles = self.cycles_on(cpu);
        let td = self.topdown;
        let per_sec = match source {
            Source::Software(config) => match config {
                0 | 1 => 1_000_000_000,
                2 | 5 => 2_000,
                3 => 500,
                4 => 10,
                11 => 100,
                _ => 0,
            },
            Source::Tracepoint(id) => fnv(&[b"tracepoint", &id.to_le_bytes()]) % 1000,
            Source::X86 { core, pmu, config, config1, smt } => {
                let slots = self.slots_on(cpu, core.width);
                let flags = config & ALL_EVENT_FLAGS & !EVENTSEL_ANY;
                let any_factor = if config & EVENTSEL_ANY != 0 && smt { 2 } else { 1 };
                let code = config & 0xffff;
                let amd = core.kind == CoreKind::Zen4;
                let known = if amd {
                    match config {
                        0x76 => Some(cycles),
                        0xc0 => Some(self.instructions_on(cpu)),
                        0x1_0000_0120 => Some(self.ref_hz),
                        // PipelineL1 over 6 dispatch slots per cycle: ex_ret_ops,
                        // de_src_op_disp.all, de_no_dispatch_per_slot.{no_ops_from_frontend,
                        // backend_stalls, smt_contention}.
                        0xc1 => Some(self.share(slots, td.retiring)),
                        0x07aa => Some(self.share(slots, td.retiring + td.bad_spec)),
                        0x1_0000_01a0 => Some(self.share(slots, td.fe_bound)),
                        0x1_0000_1ea0 => Some(self.share(slots, td.be_bound)),
                        0x1_0000_60a0 => Some(0),
                        _ => None,
                    }
                } else if flags == 0 {
                    match (code, core.kind) {
                        (0x003c, _) => Some(cycles * any_factor),
                        (0x00c0 | 0x0100 | 0x01c0, _) => Some(self.instructions_on(cpu)),
                        (0x0300 | 0x013c, _) => Some(self.ref_hz),
                        (TD_SLOTS, _) if core.topdown_events > 0 => Some(slots),
                        (TD_METRIC_FIRST..=TD_METRIC_MAX, _)
                            if code & 0xff == 0 && core.topdown_events > 0 =>
                        {
                            let n = (code - TD_METRIC_FIRST) >> 8;
                            let byte = td.byte(n).unwrap_or(0);
                            return Rate::Metric { slots_per_sec: slots, byte };
                        }
                        (0x019c, CoreKind::Skylake | CoreKind::IceLake | CoreKind::GoldenCove) => {
                            Some(self.share(slots, td.fe_bound))
                        }
                        (0x02c2, CoreKind::Skylake) => Some(self.share(slots, td.retiring)),
                        (0x010e, CoreKind::Skylake) => {
                            Some(self.share(slots, td.retiring + td.bad_spec))
                        }
                        (0x010d, CoreKind::Skylake | CoreKind::IceLake) => Some(0),
                        (0x100d, CoreKind::IceLake) | (0x10ad | 0x01ad, CoreKind::GoldenCove) => {
                            Some(0)
                        }
                        (0x0071, CoreKind::Gracemont) => Some(self.share(slots, td.fe_bound)),
                        (0x0074, CoreKind::Gracemont) => Some(self.share(slots, td.be_bound)),
                        (0x00c2 | 0x0072, CoreKind::Gracemont) => {
                            Some(self.share(slots, td.retiring))
                        }
                        (0x0073, CoreKind::Gracemont) => Some(self.share(slots, td.bad_spec)),
                        _ => None,
                    }
                } else if matches!(code, 0x010d | 0x01ad) {
                    // INT_MISC.CLEARS_COUNT and RECOVERY_CYCLES variants (edge, cmask, any).
                    Some(0)
                } else {
                    None
                };
                known.unwrap_or_else(|| {
                    self.pseudo(
                        cycles,
                        &[pmu.as_bytes(), &config.to_le_bytes(), &config1.to_le_bytes()],
                    )
                })
            }
            Source::Arm { core, pmu, config } => match config & 0xffff {
                0x11 => cycles,
                0x08 => self.instructions_on(cpu),
                // The SBSA TopdownL1 inputs: stall_slot{,_frontend,_backend}, op_retired and
                // op_spec, over `caps/slots` per cycle.
                0x3f => self.share(self.slots_on(cpu, core.width), td.fe_bound + td.be_bound),
                0x3e => self.share(self.slots_on(cpu, core.width), td.fe_bound),
                0x3d => self.share(self.slots_on(cpu, core.width), td.be_bound),
                0x3a => self.share(self.slots_on(cpu, core.width), td.retiring),
                0x3b => self.share(self.slots_on(cpu, core.width), td.retiring + td.bad_spec),
                // br_mis_pred corrects the N2 level-1 formulas; 0 keeps them at the fractions.
                0x10 => 0,
                other => self.pseudo(cycles, &[pmu.as_bytes(), &other.to_le_bytes()]),
            },
            Source::Msr(config) => match config {
                0 => self.tsc_hz,
                1 => cycles,
                2 => self.ref_hz,
                3 => cycles * 9 / 10,
                6 => self.instructions_on(cpu),
                _ => 0,
            },
            Source::Power(config) => {
                let pkg = PACKAGE_WATTS << 32;
                if config == 2 { pkg } else { pkg / 4 }
            }
            Source::Cache { pmu, config } => {
                self.pseudo(cycles, &[pmu.as_bytes(), b"cache", &config.to_le_bytes()])
            }
            Source::Cstate { pmu, config } => {
                // Residency ticks at the TSC rate for 1 % to 30 % of the time.
                self.tsc_hz * (fnv(&[pmu.as_bytes(), &config.to_le_bytes()]) % 30 + 1) / 100
            }
            Source::Uncore { pmu, config } => {
                let base = fnv(&[pmu.as_bytes(), &config.to_le_bytes()]) % 1000 + 1;
                base * 1_000_000
            }
        };
        Rate::PerSec(per_sec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_one_sums_to_all_slots_and_level_two_fits() {
        let t = TOPDOWN;
        let l1 = [t.retiring, t.bad_spec, t.fe_bound, t.be_bound];
        assert_eq!(l1.iter().map(|&b| u32::from(b)).sum::<u32>(), 255);
        assert!(t.heavy_ops <= t.retiring && t.br_mispredict <= t.bad_spec);
        assert!(t.fetch_lat <= t.fe_bound && t.mem_bound <= t.be_bound);
    }

    #[test]
    fn rates_count_exactly() {
        assert_eq!(Rate::PerSec(2_500_000_000).count(1_000_000), 2_500_000);
        assert_eq!(
            Rate::Metric { slots_per_sec: 255_000_000_000, byte: 102 }.count(1_000),
            102_000
        );
        let p = Profile::default();
        assert_eq!(p.cycles_on(0), 2_500_000_000);
        assert_eq!(p.cycles_on(2), 2_750_000_000);
        assert_eq!(p.instructions_on(0), 4_000_000_000);
    }
}
