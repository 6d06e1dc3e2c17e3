//! Counter assignment as the kernel does it: the x86 constraint tables and the weight-ordered
//! greedy of `perf_assign_events` (`arch/x86/events/core.c`), shared extra registers
//! (`__intel_shared_reg_get_constraints`), the arm64 PMUv3 `armv8pmu_get_event_idx`, and
//! Intel/AMD uncore boxes. Pure functions over per-event [`HwEvent`] descriptions: the same
//! code answers `validate_group` (an empty "fake" PMU, at open) and scheduling (a CPU's PMU
//! with everything already on it, at run time).

use super::machine::{CoreKind, X86Core};

/// `ARCH_PERFMON_EVENTSEL_EVENT`.
pub const EVENTSEL_EVENT: u64 = 0xff;
/// `INTEL_ARCH_EVENT_MASK`: event and umask.
pub const ARCH_EVENT_MASK: u64 = 0xffff;
/// `ARCH_PERFMON_EVENTSEL_EDGE`.
pub const EVENTSEL_EDGE: u64 = 1 << 18;
/// `ARCH_PERFMON_EVENTSEL_PIN_CONTROL`.
pub const EVENTSEL_PC: u64 = 1 << 19;
/// `ARCH_PERFMON_EVENTSEL_ANY`.
pub const EVENTSEL_ANY: u64 = 1 << 21;
/// `ARCH_PERFMON_EVENTSEL_INV`.
pub const EVENTSEL_INV: u64 = 1 << 23;
/// `ARCH_PERFMON_EVENTSEL_CMASK`.
pub const EVENTSEL_CMASK: u64 = 0xff << 24;
/// `HSW_IN_TX` and `HSW_IN_TX_CHECKPOINTED`.
pub const IN_TX: u64 = 3 << 32;
/// `X86_RAW_EVENT_MASK`: what a raw config keeps on Intel.
pub const RAW_EVENT_MASK: u64 =
    EVENTSEL_EVENT | 0xff00 | EVENTSEL_EDGE | EVENTSEL_INV | EVENTSEL_CMASK;
/// `AMD64_RAW_EVENT_MASK`: the Intel mask plus event bits 32-35.
pub const AMD_RAW_EVENT_MASK: u64 = RAW_EVENT_MASK | 0xf << 32;
/// `X86_ALL_EVENT_FLAGS`.
pub const ALL_EVENT_FLAGS: u64 =
    EVENTSEL_EDGE | EVENTSEL_INV | EVENTSEL_CMASK | EVENTSEL_ANY | EVENTSEL_PC | IN_TX;
/// `FIXED_EVENT_FLAGS`: a flag in these bits disqualifies an event from its fixed counter.
pub const FIXED_EVENT_FLAGS: u64 = RAW_EVENT_MASK | IN_TX;
/// `INTEL_PMC_IDX_FIXED`: fixed counter n is index 32 + n.
pub const IDX_FIXED: u32 = 32;
/// `INTEL_PMC_IDX_METRIC_BASE`: topdown metric n is index 48 + n.
pub const IDX_METRIC: u32 = 48;
/// `INTEL_TD_SLOTS`.
pub const TD_SLOTS: u64 = 0x0400;
/// `INTEL_TD_METRIC_RETIRING`, the first metric event.
pub const TD_METRIC_FIRST: u64 = 0x8000;
/// `INTEL_TD_METRIC_MEM_BOUND` = `INTEL_TD_METRIC_MAX`.
pub const TD_METRIC_MAX: u64 = 0x8700;
/// `INTEL_TD_METRIC_NUM`.
pub const TD_METRIC_NUM: usize = 8;
/// `ARMV8_PMU_CYCLE_IDX`.
pub const ARM_CYCLE_IDX: u32 = 31;
/// `ARMV8_PMUV3_PERFCTR_CPU_CYCLES`.
pub const ARM_CPU_CYCLES: u64 = 0x11;

/// One entry of a kernel constraint table: events with `(config & cmask) - code <= size`
/// may use the counters in `idxmsk` (bits 0-31 general, 32+ fixed, 48+ topdown metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constraint {
    /// The code compared.
    pub code: u64,
    /// The config bits compared.
    pub cmask: u64,
    /// Range size (0 for one code).
    pub size: u64,
    /// Allowed counters.
    pub idxmsk: u64,
    /// How many counters (the scheduler's order key).
    pub weight: u32,
    /// AMD's `PERF_X86_EVENT_PAIR`: the event also takes the odd counter after its own.
    pub pair: bool,
}

impl Constraint {
    const fn new(code: u64, cmask: u64, size: u64, idxmsk: u64) -> Constraint {
        Constraint { code, cmask, size, idxmsk, weight: idxmsk.count_ones(), pair: false }
    }

    /// `constraint_match`.
    pub fn matches(&self, config: u64) -> bool {
        (config & self.cmask).wrapping_sub(self.code) <= self.size
    }
}

/// `FIXED_EVENT_CONSTRAINT(code, n)`.
const fn fixed(code: u64, n: u32) -> Constraint {
    Constraint::new(code, FIXED_EVENT_FLAGS, 0, 1 << (IDX_FIXED + n))
}

/// `METRIC_EVENT_CONSTRAINT(code, n)`.
const fn metric(code: u64, n: u32) -> Constraint {
    Constraint::new(code, ARCH_EVENT_MASK, 0, 1 << (IDX_METRIC + n))
}

/// `INTEL_EVENT_CONSTRAINT(code, mask)`: the event code alone.
const fn event(code: u64, mask: u64) -> Constraint {
    Constraint::new(code, EVENTSEL_EVENT, 0, mask)
}

/// `INTEL_EVENT_CONSTRAINT_RANGE(lo, hi, mask)`.
const fn range(lo: u64, hi: u64, mask: u64) -> Constraint {
    Constraint::new(lo, EVENTSEL_EVENT, hi - lo, mask)
}

/// `INTEL_UEVENT_CONSTRAINT(code, mask)`: event and umask.
const fn uevent(code: u64, mask: u64) -> Constraint {
    Constraint::new(code, ARCH_EVENT_MASK, 0, mask)
}

/// What `intel_pmu_check_event_constraints` does at boot: fixed events with a real event
/// code (0x00c0, 0x003c, 0x013c) may also use every GP counter, pseudo-encodings (event code
/// 0: 0x0100, 0x0300, 0x0400) only their fixed counter; slots and metric constraints are kept
/// as they are when the PMU has PERF_METRICS and emptied when it has not; counters the PMU
/// lacks are removed.
fn finalize(table: &[Constraint], gp: u32, fixed: u32, topdown: bool) -> Vec<Constraint> {
    let gp_mask = (1u64 << gp) - 1;
    let topdown_mask = 0xffu64 << IDX_METRIC | 1 << (IDX_FIXED + 3);
    table
        .iter()
        .map(|&c| {
            let mut c = c;
            if c.idxmsk & topdown_mask != 0 {
                if !topdown {
                    c.idxmsk = 0;
                }
            } else {
                if c.cmask == FIXED_EVENT_FLAGS {
                    c.idxmsk &= ((1u64 << fixed) - 1) << IDX_FIXED;
                    if c.code & 0xff != 0 {
                        c.idxmsk |= gp_mask;
                    }
                }
                c.idxmsk &= !(!0u64 << (IDX_FIXED + fixed));
                // The tables list counters up to 7; a PMU with 4 has only those.
                c.idxmsk &= !((!0u64 << gp) & 0xffff_ffff);
            }
            c.weight = c.idxmsk.count_ones();
            c
        })
        .collect()
}

/// Which shared extra register an event needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExtraRegKind {
    /// MSR_OFFCORE_RSP_0/1 (either, when the value fits the other's mask).
    Rsp,
    /// MSR_PEBS_LD_LAT_THRESHOLD.
    Ldlat,
    /// MSR_PEBS_FRONTEND.
    Frontend,
    /// MSR_SNOOP_RSP_0/1 (Crestmont).
    Snoop,
}

/// `INTEL_UEVENT_EXTRA_REG(event, msr, valid, idx)`: `config1` of events matching `event`
/// (event and umask) goes to a shared register and must stay within `valid` (else EINVAL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraReg {
    /// Event and umask.
    pub event: u64,
    /// The register.
    pub kind: ExtraRegKind,
    /// Valid config1 bits.
    pub valid: u64,
}

const fn er(event: u64, kind: ExtraRegKind, valid: u64) -> ExtraReg {
    ExtraReg { event, kind, valid }
}

const INTEL_GENERIC: [Option<u64>; 10] = [
    Some(0x3c),
    Some(0xc0),
    Some(0x4f2e),
    Some(0x412e),
    Some(0xc4),
    Some(0xc5),
    Some(0x013c),
    None,
    None,
    Some(0x0300),
];

/// The core PMU of `kind` with `gp` general and `fixed` fixed counters: the kind's constraint
/// table, extra registers and generic events, and its usual pipeline width (a machine file
/// gives its own).
pub fn x86_core(kind: CoreKind, gp: u32, fixed_counters: u32) -> X86Core {
    match kind {
        CoreKind::Skylake => skl_core(gp, fixed_counters),
        CoreKind::IceLake => icl_core(gp, fixed_counters),
        CoreKind::GoldenCove => glc_core(gp, fixed_counters),
        CoreKind::Gracemont => grt_core(gp, fixed_counters, 5),
        // NeoverseN2 is refused as an x86 core where machine files are read.
        CoreKind::Zen4 | CoreKind::Zen5 | CoreKind::NeoverseN2 => amd_core(kind, gp),
    }
}

/// `intel_skl_event_constraints`, `intel_skl_extra_regs`; AnyThread kept (perfmon v4).
pub fn skl_core(gp: u32, fixed_counters: u32) -> X86Core {
    let table = [
        fixed(0x00c0, 0),
        fixed(0x003c, 1),
        fixed(0x0300, 2),
        uevent(0x1c0, 0x2),
        event(0xd0, 0xf),
        event(0xd1, 0xf),
        event(0xd2, 0xf),
        event(0xcd, 0xf),
        event(0xc6, 0xf),
    ];
    X86Core {
        kind: CoreKind::Skylake,
        gp,
        fixed: fixed_counters,
        topdown_events: 0,
        constraints: finalize(&table, gp, fixed_counters, false),
        extra_regs: vec![
            er(0x01b7, ExtraRegKind::Rsp, 0x3f_ffff_8fff),
            er(0x01bb, ExtraRegKind::Rsp, 0x3f_ffff_8fff),
            er(0x01cd, ExtraRegKind::Ldlat, 0xffff),
            er(0x01c6, ExtraRegKind::Frontend, 0x7f_ff17),
        ],
        generic: INTEL_GENERIC,
        any_bit: true,
        width: 4,
    }
}

/// `intel_icl_event_constraints`, `intel_icl_extra_regs`, 4 topdown metrics (none without the
/// slots fixed counter, as for Golden Cove).
pub fn icl_core(gp: u32, fixed_counters: u32) -> X86Core {
    let slots_counter = fixed_counters > 3;
    let table = [
        fixed(0x00c0, 0),
        fixed(0x01c0, 0),
        fixed(0x0100, 0),
        fixed(0x003c, 1),
        fixed(0x0300, 2),
        fixed(0x0400, 3),
        metric(0x8000, 0),
        metric(0x8100, 1),
        metric(0x8200, 2),
        metric(0x8300, 3),
        range(0x03, 0x0a, 0xf),
        range(0x1f, 0x28, 0xf),
        event(0x32, 0xf),
        range(0x48, 0x56, 0xf),
        range(0x60, 0x8b, 0xf),
        uevent(0x04a3, 0xff),
        uevent(0x10a3, 0xff),
        uevent(0x14a3, 0xff),
        event(0xa3, 0xf),
        range(0xa8, 0xb0, 0xf),
        range(0xb7, 0xbd, 0xf),
        range(0xd0, 0xe6, 0xf),
        event(0xef, 0xf),
        range(0xf0, 0xf4, 0xf),
    ];
    X86Core {
        kind: CoreKind::IceLake,
        gp,
        fixed: fixed_counters,
        topdown_events: if slots_counter { 4 } else { 0 },
        constraints: finalize(&table, gp, fixed_counters, slots_counter),
        extra_regs: vec![
            er(0x01b7, ExtraRegKind::Rsp, 0x3f_ffff_bfff),
            er(0x01bb, ExtraRegKind::Rsp, 0x3f_ffff_bfff),
            er(0x01cd, ExtraRegKind::Ldlat, 0xffff),
            er(0x01c6, ExtraRegKind::Frontend, 0x7f_ff17),
        ],
        generic: INTEL_GENERIC,
        any_bit: false,
        width: 5,
    }
}

/// `intel_glc_event_constraints`, `intel_glc_extra_regs`, 8 topdown metrics: SPR and the
/// hybrid `cpu_core` PMUs. With fewer than 4 fixed counters (a guest whose hypervisor hides
/// the slots counter) there is no PERF_METRICS and the slots and metric constraints are
/// empty, as `intel_pmu_check_event_constraints` leaves them without
/// `INTEL_PMC_MSK_FIXED_SLOTS` in `intel_ctrl`.
pub fn glc_core(gp: u32, fixed_counters: u32) -> X86Core {
    let slots_counter = fixed_counters > 3;
    let table = [
        fixed(0x00c0, 0),
        fixed(0x0100, 0),
        fixed(0x003c, 1),
        fixed(0x0300, 2),
        fixed(0x013c, 2),
        fixed(0x0400, 3),
        metric(0x8000, 0),
        metric(0x8100, 1),
        metric(0x8200, 2),
        metric(0x8300, 3),
        metric(0x8400, 4),
        metric(0x8500, 5),
        metric(0x8600, 6),
        metric(0x8700, 7),
        event(0x2e, 0xff),
        event(0x3c, 0xff),
        range(0x01, 0x8f, 0xf),
        uevent(0x01a3, 0xf),
        uevent(0x02a3, 0xf),
        uevent(0x08a3, 0xf),
        uevent(0x04a4, 0x1),
        uevent(0x08a4, 0x1),
        uevent(0x02cd, 0x1),
        event(0xce, 0x1),
        range(0xd0, 0xdf, 0xf),
        range(0x90, 0xfe, 0xff),
    ];
    X86Core {
        kind: CoreKind::GoldenCove,
        gp,
        fixed: fixed_counters,
        topdown_events: if slots_counter { 8 } else { 0 },
        constraints: finalize(&table, gp, fixed_counters, slots_counter),
        extra_regs: vec![
            er(0x012a, ExtraRegKind::Rsp, 0x3f_ffff_ffff),
            er(0x012b, ExtraRegKind::Rsp, 0x3f_ffff_ffff),
            er(0x01cd, ExtraRegKind::Ldlat, 0xffff),
            er(0x01c6, ExtraRegKind::Frontend, 0x7f_ff1f),
            er(0x40ad, ExtraRegKind::Frontend, 0x7),
            er(0x04c2, ExtraRegKind::Frontend, 0x8),
        ],
        generic: INTEL_GENERIC,
        any_bit: false,
        width: 6,
    }
}

/// `intel_grt_event_constraints`, `intel_grt_extra_regs`: the hybrid `cpu_atom` PMUs (3
/// fixed counters, no PERF_METRICS; topdown events are ordinary GP events there). `width` is
/// the allocation width the vendor metrics use (5 on Gracemont, 6 on Crestmont).
pub fn grt_core(gp: u32, fixed_counters: u32, width: u64) -> X86Core {
    let table = [fixed(0x00c0, 0), fixed(0x003c, 1), fixed(0x0300, 2), fixed(0x013c, 2)];
    X86Core {
        kind: CoreKind::Gracemont,
        gp,
        fixed: fixed_counters,
        topdown_events: 0,
        constraints: finalize(&table, gp, fixed_counters, false),
        extra_regs: vec![
            er(0x01b7, ExtraRegKind::Rsp, 0x3f_ffff_ffff),
            er(0x02b7, ExtraRegKind::Rsp, 0x3f_ffff_ffff),
            er(0x05d0, ExtraRegKind::Ldlat, 0xffff),
        ],
        generic: INTEL_GENERIC,
        any_bit: false,
        width,
    }
}

/// AMD family 17h and later (Zen 4, Zen 5): `gp` counters (6, or PerfMonV2's count), no fixed
/// ones, the pair rule for event 0x003 (`amd_get_event_constraints_f17h`) and
/// `amd_zen4_perfmon_event_map`, which amd/core.c uses for Zen 4 and every family from 0x1a.
pub fn amd_core(kind: CoreKind, gp: u32) -> X86Core {
    X86Core {
        kind,
        gp,
        fixed: 0,
        topdown_events: 0,
        constraints: Vec::new(),
        extra_regs: Vec::new(),
        generic: [
            Some(0x76),
            Some(0xc0),
            Some(0xff60),
            Some(0x0964),
            Some(0xc2),
            Some(0xc3),
            None,
            Some(0xa9),
            None,
            Some(0x1_0000_0120),
        ],
        any_bit: false,
        width: 6,
    }
}

/// An event as the counter scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HwEvent {
    /// Allowed counters and weight.
    pub constraint: Constraint,
    /// A shared extra register and the config1 value it must hold.
    pub extra: Option<(ExtraRegKind, u64)>,
    /// A topdown metric event (counted by `collect_event` against INTEL_TD_METRIC_NUM).
    pub metric: bool,
}

impl X86Core {
    /// The constraint `x86_get_event_constraints` returns for `config` (already masked to
    /// what the kernel keeps): the first matching table entry, else every GP counter.
    pub fn constraint(&self, config: u64) -> Constraint {
        if self.kind.is_amd() {
            // amd_get_event_constraints_f17h: 0x003 needs an even counter and the odd one
            // after it; its weight is half the counters.
            if config & 0xf_0000_00ff == 0x03 {
                let mut even = 0;
                let mut i = 0;
                while i + 1 < self.gp {
                    even |= 1 << i;
                    i += 2;
                }
                return Constraint {
                    code: 0x03,
                    cmask: 0,
                    size: 0,
                    idxmsk: even,
                    weight: self.gp / 2,
                    pair: true,
                };
            }
        }
        self.constraints.iter().find(|c| c.matches(config)).copied().unwrap_or(self.unconstrained())
    }

    /// The constraint of an event no table lists: every GP counter.
    pub fn unconstrained(&self) -> Constraint {
        Constraint {
            code: 0,
            cmask: 0,
            size: 0,
            idxmsk: (1 << self.gp) - 1,
            weight: self.gp,
            pair: false,
        }
    }

    /// Whether `events` can all be on this PMU at once (`collect_events` limits, shared
    /// registers, then `perf_assign_events`).
    pub fn fits(&self, events: &[HwEvent]) -> bool {
        let metrics = events.iter().filter(|e| e.metric).count();
        if self.topdown_events > 0 && metrics > TD_METRIC_NUM {
            return false;
        }
        let max_count = (self.gp + self.fixed) as usize;
        let extra_metrics = if self.topdown_events > 0 { metrics } else { 0 };
        if events.len() > max_count + extra_metrics {
            return false;
        }
        if !shared_regs_fit(events) {
            return false;
        }
        let n_pair = events.iter().filter(|e| e.constraint.pair).count() as u32;
        let Some(gpmax) = self.gp.checked_sub(n_pair) else { return false };
        assign(events, gpmax)
    }
}

/// The shared registers: two offcore-response registers (an event may use either when its
/// value fits, `intel_alt_er`), one each of the others; events may share a register only
/// with the same value.
fn shared_regs_fit(events: &[HwEvent]) -> bool {
    let mut values: Vec<(ExtraRegKind, u64)> = events.iter().filter_map(|e| e.extra).collect();
    values.sort_unstable();
    values.dedup();
    for kind in
        [ExtraRegKind::Rsp, ExtraRegKind::Ldlat, ExtraRegKind::Frontend, ExtraRegKind::Snoop]
    {
        let distinct = values.iter().filter(|v| v.0 == kind).count();
        let capacity = match kind {
            ExtraRegKind::Rsp | ExtraRegKind::Snoop => 2,
            ExtraRegKind::Ldlat | ExtraRegKind::Frontend => 1,
        };
        if distinct > capacity {
            return false;
        }
    }
    true
}

/// `perf_assign_events` without the overlap backtracking (no constraint of these models is
/// an overlap constraint): by increasing weight, events in list order; fixed (and metric)
/// counters first, then the lowest free GP counter, at most `gpmax` GP counters.
fn assign(events: &[HwEvent], gpmax: u32) -> bool {
    let Some(wmin) = events.iter().map(|e| e.constraint.weight).min() else { return true };
    let wmax = events.iter().map(|e| e.constraint.weight).max().unwrap_or(wmin);
    if wmin == 0 {
        return false;
    }
    let mut used = 0u64;
    let mut nr_gp = 0u32;
    for weight in wmin..=wmax {
        for e in events.iter().filter(|e| e.constraint.weight == weight) {
            let c = e.constraint;
            let high = c.idxmsk & (!0u64 << IDX_FIXED);
            let free_high = high & !used;
            if free_high != 0 {
                used |= 1 << free_high.trailing_zeros();
                continue;
            }
            let mut placed = false;
            for idx in 0..IDX_FIXED {
                if c.idxmsk & (1 << idx) == 0 {
                    continue;
                }
                let mask = if c.pair { 3u64 << idx } else { 1u64 << idx };
                if used & mask != 0 {
                    continue;
                }
                if nr_gp >= gpmax {
                    return false;
                }
                nr_gp += 1;
                used |= mask;
                placed = true;
                break;
            }
            if !placed {
                return false;
            }
        }
    }
    true
}

/// `ARMV8_PMUV3_PERFCTR_CHAIN`: the odd half of a chained pair, never opened by itself.
pub const ARM_CHAIN: u64 = 0x1e;
/// `ATTR_CFG_FLD_long` (config1 bit 0): a 64-bit counter.
pub const ARM_LONG: u64 = 1 << 0;
/// `ATTR_CFG_FLD_rdpmc` (config1 bit 1): read from user space.
pub const ARM_RDPMC: u64 = 1 << 1;
/// `ATTR_CFG_FLD_threshold` (config1 bits 5-16): PMEVTYPER.TH.
pub const ARM_THRESHOLD_SHIFT: u32 = 5;
/// Its width.
pub const ARM_THRESHOLD_MASK: u64 = 0xfff;

/// One PMUv3 event as `armv8pmu_get_event_idx` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmEvent {
    /// The event number (`ARMV8_PMU_EVTYPE_EVENT`, 16 bits).
    pub config: u64,
    /// `long`: a 64-bit event.
    pub long: bool,
    /// `rdpmc` on a task event (`PERF_EVENT_FLAG_USER_READ_CNT`): one counter, never chained.
    pub user: bool,
    /// `threshold`: not 0 keeps CPU_CYCLES off the cycle counter.
    pub threshold: u64,
}

/// `armv8pmu_get_event_idx` (drivers/perf/arm_pmuv3.c), event by event in the order they are
/// added (`validate_group`: leader, siblings, then the new event), on `gp` programmable
/// counters, with PMUv3p5's 64-bit counters when `long_counters`
/// (`armv8pmu_has_long_event`):
/// * CPU_CYCLES without a threshold takes the cycle counter when it is free; when it is not,
///   a 64-bit user-read one fails where counters are 32-bit, others go on.
/// * A 64-bit event on 32-bit counters that is not read from user space is chained
///   (`armv8pmu_event_is_chained`): an odd counter and the even one below it
///   (`armv8pmu_get_chain_idx`).
/// * Anything else takes the lowest free programmable counter (`armv8pmu_get_single_idx`).
///
/// The instruction counter (`ARMV8_PMU_INSTR_IDX`, FEAT_PMUv3_ICNTR, Armv9.4) is not
/// modelled: no machine here has it.
pub fn arm_fits(gp: u32, long_counters: bool, events: &[ArmEvent]) -> bool {
    let mut used = 0u64;
    for ev in events {
        if ev.config & 0xffff == ARM_CPU_CYCLES && ev.threshold == 0 {
            if used & (1 << ARM_CYCLE_IDX) == 0 {
                used |= 1 << ARM_CYCLE_IDX;
                continue;
            }
            if ev.long && ev.user && !long_counters {
                return false;
            }
        }
        let chained = !ev.user && ev.long && !long_counters;
        let free = |i: u32| used & (1 << i) == 0;
        let idx = if chained {
            (1..gp).filter(|i| i & 1 == 1).find(|&i| free(i) && free(i - 1))
        } else {
            (0..gp).find(|&i| free(i))
        };
        match idx {
            Some(i) if chained => used |= 0b11 << (i - 1),
            Some(i) => used |= 1 << i,
            None => return false,
        }
    }
    true
}

/// An uncore box (`uncore_assign_events`, `uncore_validate_group`): config 0xff on the
/// box's fixed counter when it has one, everything else on `counters` general counters.
pub fn uncore_fits(counters: u32, fixed: bool, free_running: bool, configs: &[u64]) -> bool {
    if free_running {
        return true;
    }
    let fixed_wanted = configs.iter().filter(|&&c| fixed && c == 0xff).count();
    let general = configs.len() - fixed_wanted;
    fixed_wanted <= 1 && general <= counters as usize
}
