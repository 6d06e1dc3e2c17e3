//! How unkind the simulated kernel and hardware are ([`Realism`]): rotation timers on the
//! kernel's hrtimer grid with interrupt lateness, each CPU at its own point of the workload's
//! phases, counting overcount, and PERF_METRICS' 8-bit fractions read as the kernel reads
//! them. The kernel's HZ (and so the rotation interval) is the machine's ([`crate::Machine`]`::hz`).
//!
//! [`Realism::exact`] is the simulator's older, kinder model (one phase timeline for every
//! CPU, rotation timers started one interval after a group is left out, so every CPU rotates
//! in lockstep, exact counts, unrounded topdown fractions): many tests assert exact values
//! on it, so it stays the default of `--pmu-sim`. A workload turns realism on with its
//! `kernel` object (`{"realistic": true, "hz": 1000, "seed": 7}`, [`KernelSpec`]); the
//! accuracy bench runs every class with it on.
//!
//! Every rule is deterministic given the seed: the random draws are SplitMix64 hashes of the
//! seed and what is drawn for (CPU, PMU, timer expiry, event, time), never a shared stream, so
//! the order in which the simulator asks does not change the answers.

use serde::Deserialize;

/// What the simulated kernel and hardware do that an exact model would not.
#[derive(Debug, Clone, PartialEq)]
pub struct Realism {
    /// Seed of every random choice below.
    pub seed: u64,
    /// Rotation hrtimers run on the kernel's grid since boot, with boot at a random point of
    /// it (else: one interval after the group was left out, every CPU alike). The grid is
    /// kernel/events/core.c's: `__perf_mux_hrtimer_init` makes a CLOCK_MONOTONIC hrtimer
    /// whose expiry starts at 0, and both `perf_mux_hrtimer_restart` and
    /// `perf_mux_hrtimer_handler` move it with `hrtimer_forward_now`, which adds whole
    /// intervals to the old expiry: expiries stay on multiples of the interval since boot,
    /// so where a run starts on that grid is random, the same on every CPU.
    pub boot_grid: bool,
    /// The largest lateness of one hrtimer expiry, in ns: the handler runs when the CPU takes
    /// the interrupt (`HRTIMER_MODE_ABS_PINNED_HARD`: no slack, but interrupt latency, tens of
    /// microseconds on a non-realtime kernel under load), a random amount up to this for each
    /// CPU and expiry. `hrtimer_forward_now` forwards from the nominal expiry, so lateness
    /// does not accumulate.
    pub timer_lateness_ns: u64,
    /// Each CPU, SMT siblings included, runs the workload from its own random point of its
    /// phases (threads of one program are rarely in step); a workload's `cpu_offsets_ms` is
    /// used whether or not this is on.
    pub phase_offsets: bool,
    /// Every interrupt the CPU takes while a core event counts adds one to it (the timer
    /// tick at HZ and the rotation hrtimer): Weaver, Terpstra and Moore (ISPASS 2013) found
    /// that interrupts increment most x86_64 counters, retired instructions included.
    pub interrupt_overcount: bool,
    /// Run-to-run non-determinism, as a small overcount (ibid.): what a core event counts is
    /// multiplied by `1 + noise * u`, `u` uniform in [0, 1) per run and event, the same on
    /// every CPU and in every group (an overcount is the event's way of counting; drawing
    /// `u` anew for every span would let it average away over a run, kinder than hardware).
    pub noise: f64,
    /// PERF_METRICS gives topdown fractions as 8-bit fractions of 0xff of the slots since
    /// the last reset, and the kernel turns them into counts as `intel_update_topdown_event`
    /// does (see [`topdown_value`]).
    pub quantised_metrics: bool,
}

/// Interrupt latency bound of [`Realism::hardware`], in ns.
pub const DEFAULT_LATENESS_NS: u64 = 30_000;
/// Non-determinism bound of [`Realism::hardware`]: 0.1 % of a span's count (a mean
/// overcount of 0.05 %). Weaver et al. report overcount and run-to-run variation without one
/// figure for every event; this bound is our assumption, at the small end of what they show.
pub const DEFAULT_NOISE: f64 = 0.001;

impl Realism {
    /// The exact, lockstep model (the default).
    pub fn exact() -> Realism {
        Realism {
            seed: 0,
            boot_grid: false,
            timer_lateness_ns: 0,
            phase_offsets: false,
            interrupt_overcount: false,
            noise: 0.0,
            quantised_metrics: false,
        }
    }

    /// Everything on, from `seed`.
    pub fn hardware(seed: u64) -> Realism {
        Realism {
            seed,
            boot_grid: true,
            timer_lateness_ns: DEFAULT_LATENESS_NS,
            phase_offsets: true,
            interrupt_overcount: true,
            noise: DEFAULT_NOISE,
            quantised_metrics: true,
        }
    }

    /// Whether any rule is on.
    pub fn any(&self) -> bool {
        *self != Realism { seed: self.seed, ..Realism::exact() }
    }

    /// A uniform draw in [0, 1) for `what` (a hash of the seed and the parts).
    pub(crate) fn uniform(&self, parts: &[u64]) -> f64 {
        let mut h = splitmix(self.seed ^ 0x5eed_0f7e_57ab);
        for &p in parts {
            h = splitmix(h ^ p);
        }
        (h >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// SplitMix64.
pub(crate) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The count the kernel derives from PERF_METRICS for one topdown metric event, given the
/// true slots and the metric's true slots since the last reset, and what FIXED_CTR3 read
/// (arch/x86/events/intel/core.c, `icl_get_metrics_event_value`): the hardware keeps the
/// metric as an 8-bit fraction of 0xff of the slots (rounded to nearest here; how the
/// hardware rounds is not documented), and the kernel computes
/// `mul_u64_u32_div(slots, byte, 0xff)` from the counter it read, which truncates.
///
/// The four level-1 fields sum to 0xff (the kernel's comment on that function): here each is
/// the difference of the rounded running sums of the fields before it (`before`, the true
/// slots of the level-1 fields that precede it in the register) and of those and itself, so
/// each field is within one step of its fraction and the four add up to 0xff.
pub fn topdown_value(slots: f64, metric: f64, read: f64, before: Option<f64>) -> u64 {
    if slots < 1.0 || read < 1.0 {
        return 0;
    }
    let step = |x: f64| (255.0 * x / slots).round().clamp(0.0, 255.0) as u64;
    let byte = match before {
        Some(b) => step(b + metric).saturating_sub(step(b)),
        None => step(metric),
    };
    let slots = read as u64;
    ((u128::from(slots) * u128::from(byte)) / 255) as u64
}

/// A workload's `kernel` object: the simulated kernel's HZ and how unkind it is.
///
/// ```json
/// "kernel": { "hz": 1000, "realistic": true, "seed": 7 }
/// ```
///
/// `realistic` turns every rule of [`Realism::hardware`] on; the other fields override one
/// rule each: `timer_lateness_us`, `phase_offsets`, `interrupt_overcount`, `noise_percent`,
/// `quantised_metrics`, `boot_grid`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    /// `CONFIG_HZ` (100, 250, 300 or 1000): the rotation interval is `PERF_CPU_HRTIMER` =
    /// 1000 / HZ ms (kernel/events/core.c).
    pub hz: Option<u32>,
    /// Every rule of [`Realism::hardware`].
    #[serde(default)]
    pub realistic: bool,
    /// The seed of the random draws.
    #[serde(default)]
    pub seed: u64,
    /// [`Realism::timer_lateness_ns`], in microseconds.
    pub timer_lateness_us: Option<f64>,
    /// [`Realism::phase_offsets`].
    pub phase_offsets: Option<bool>,
    /// [`Realism::interrupt_overcount`].
    pub interrupt_overcount: Option<bool>,
    /// [`Realism::noise`], in percent.
    pub noise_percent: Option<f64>,
    /// [`Realism::quantised_metrics`].
    pub quantised_metrics: Option<bool>,
    /// [`Realism::boot_grid`].
    pub boot_grid: Option<bool>,
}

/// The `CONFIG_HZ` choices of kernel/Kconfig.hz.
pub const HZ_CHOICES: [u32; 4] = [100, 250, 300, 1000];

impl KernelSpec {
    /// The rules this asks for.
    pub fn realism(&self) -> Realism {
        let mut r = if self.realistic { Realism::hardware(self.seed) } else { Realism::exact() };
        r.seed = self.seed;
        if let Some(us) = self.timer_lateness_us {
            r.timer_lateness_ns = (us * 1e3) as u64;
        }
        if let Some(on) = self.phase_offsets {
            r.phase_offsets = on;
        }
        if let Some(on) = self.interrupt_overcount {
            r.interrupt_overcount = on;
        }
        if let Some(p) = self.noise_percent {
            r.noise = p / 100.0;
        }
        if let Some(on) = self.quantised_metrics {
            r.quantised_metrics = on;
        }
        if let Some(on) = self.boot_grid {
            r.boot_grid = on;
        }
        r
    }

    /// What is wrong with it, as `(field, problem)`.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if let Some(hz) = self.hz
            && !HZ_CHOICES.contains(&hz)
        {
            return Some(("hz", format!("{hz} is not a CONFIG_HZ choice (100, 250, 300, 1000)")));
        }
        if let Some(us) = self.timer_lateness_us
            && !(us.is_finite() && (0.0..=500.0).contains(&us))
        {
            return Some(("timer_lateness_us", format!("{us} is not in 0..=500")));
        }
        if let Some(p) = self.noise_percent
            && !(p.is_finite() && (0.0..=10.0).contains(&p))
        {
            return Some(("noise_percent", format!("{p} is not in 0..=10")));
        }
        None
    }
}

/// The rotation interval `PERF_CPU_HRTIMER` = 1000 / HZ ms, in integer division as the
/// kernel's macro (3 ms at HZ 300).
pub fn mux_interval_ms(hz: u32) -> u64 {
    u64::from((1000 / hz.max(1)).max(1))
}
