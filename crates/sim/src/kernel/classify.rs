//! What an attribute counts on the simulated machine: the PMU (legacy types on the core PMU
//! of the CPU, raw and PMU types by number), the event's kind and counter constraints, and the
//! [`Source`] its counts come from; `precise_ip` and PEBS constraints as x86 checks them.

use super::{HW_MAX, Home, HwKind, Init, SW_MAX, errno};
use crate::machine::{CoreKind, Machine, PmuClass, X86Core};
use crate::profile::Source;
use crate::sched::{
    ALL_EVENT_FLAGS, AMD_RAW_EVENT_MASK, ARCH_EVENT_MASK, EVENTSEL_ANY, EVENTSEL_EVENT, HwEvent,
    IN_TX, RAW_EVENT_MASK, TD_METRIC_FIRST, TD_METRIC_MAX, TD_SLOTS,
};
use tmetric_runtime::sys::{
    Attr, Errno, TYPE_HARDWARE, TYPE_HW_CACHE, TYPE_RAW, TYPE_SOFTWARE, TYPE_TRACEPOINT,
};

/// The core PMU a PERF_TYPE_HARDWARE / HW_CACHE event goes to (`perf_init_event`): the
/// extended type in config's upper half, else type 4 (`cpu`/`cpu_core`), falling back to
/// the PMU of the CPU's core type; on arm64, the first CPU PMU that accepts it.
fn generic_pmu(machine: &Machine, config: u64, cpu: i32) -> Result<usize, Errno> {
    let is_core = |class: &PmuClass| matches!(class, PmuClass::X86Core(_) | PmuClass::Arm(_));
    let ext = (config >> 32) as u32;
    if ext != 0
        && let Some((index, pmu)) = machine.pmu_by_type(ext)
    {
        // Only PMUs with PERF_PMU_CAP_EXTENDED_HW_TYPE take it; type 4 always may.
        return if is_core(&pmu.class) { Ok(index) } else { Err(errno(libc::ENOENT)) };
    }
    let cores: Vec<(usize, &crate::machine::SimPmu)> =
        machine.pmus.iter().enumerate().filter(|(_, p)| is_core(&p.class)).collect();
    let fits_cpu = |p: &crate::machine::SimPmu| cpu < 0 || p.covers(cpu as u32);
    if let Some((i, _)) = cores.iter().find(|(_, p)| p.type_ == TYPE_RAW && fits_cpu(p)) {
        return Ok(*i);
    }
    cores.iter().find(|(_, p)| fits_cpu(p)).map(|(i, _)| *i).ok_or(errno(libc::ENOENT))
}

/// `perf_init_event` plus the PMU's `event_init` checks that do not depend on the group: where
/// the event lives, what the counter scheduler needs of it and what it counts.
pub(crate) fn classify(machine: &Machine, attr: &Attr, pid: i32, cpu: i32) -> Result<Init, Errno> {
    let (pmu_index, config) = match attr.type_ {
        TYPE_SOFTWARE => {
            if attr.config >= SW_MAX {
                return Err(errno(libc::ENOENT));
            }
            return Ok(soft(Source::Software(attr.config)));
        }
        TYPE_TRACEPOINT => {
            return Ok(soft(Source::Tracepoint(attr.config)));
        }
        TYPE_HARDWARE => {
            let index = generic_pmu(machine, attr.config, cpu)?;
            let id = attr.config & 0xffff_ffff;
            if id >= HW_MAX {
                return Err(errno(libc::EINVAL));
            }
            let generic = match &machine.pmus[index].class {
                PmuClass::X86Core(core) => core.generic,
                PmuClass::Arm(arm) => arm.generic,
                _ => return Err(errno(libc::ENOENT)),
            };
            (index, generic[id as usize].ok_or(errno(libc::ENOENT))?)
        }
        TYPE_HW_CACHE => return init_cache(machine, attr, pid, cpu),
        other => match machine.pmu_by_type(other) {
            // arm64 has no PMU of type 4: a raw event goes to the first CPU PMU that
            // takes it.
            None if other == TYPE_RAW => (generic_pmu(machine, 0, cpu)?, attr.config),
            None => return Err(errno(libc::ENOENT)),
            Some((index, pmu)) => {
                if matches!(pmu.class, PmuClass::Builtin) {
                    return match pmu.name.as_str() {
                        "cpu_clock" => Ok(soft(Source::Software(0))),
                        "task_clock" => Ok(soft(Source::Software(1))),
                        // breakpoint, kprobe, uprobe need fields tmetric never sets.
                        _ => Err(errno(libc::EINVAL)),
                    };
                }
                (index, attr.config)
            }
        },
    };
    init_on_pmu(machine, pmu_index, config, attr, pid, cpu)
}

/// A software event of `source`: no counter, no PMU.
fn soft(source: Source) -> Init {
    Init {
        home: Home::Soft,
        hw: HwKind::None,
        source: Some(source),
        cpu: None,
        metric: false,
        kept: 0,
    }
}

/// A generic cache event (`PERF_TYPE_HW_CACHE`): cache, op and result within range, on a
/// core PMU that covers `cpu`.
fn init_cache(machine: &Machine, attr: &Attr, pid: i32, cpu: i32) -> Result<Init, Errno> {
    let index = generic_pmu(machine, attr.config, cpu)?;
    let c = attr.config & 0xffff_ffff;
    let (cache, op, result) = (c & 0xff, (c >> 8) & 0xff, (c >> 16) & 0xff);
    if cache >= 7 || op >= 3 || result >= 2 || c >> 24 != 0 {
        return Err(errno(libc::EINVAL));
    }
    // The per-model cache tables are not modelled: a generic cache event is an
    // unconstrained GP event with its own pseudo rate.
    let pmu = &machine.pmus[index];
    if cpu >= 0 && !pmu.covers(cpu as u32) {
        return Err(errno(libc::ENOENT));
    }
    let hw = match &pmu.class {
        PmuClass::X86Core(core) => {
            x86_precise(pmu, attr)?;
            HwKind::X86(HwEvent { constraint: core.unconstrained(), extra: None, metric: false })
        }
        // Any event number but CPU_CYCLES: a programmable counter.
        PmuClass::Arm(arm) => HwKind::Arm(arm_event(arm, 0xffff, attr, pid)?),
        _ => return Err(errno(libc::ENOENT)),
    };
    Ok(Init {
        home: Home::Hw(index),
        hw,
        source: Some(Source::Cache { pmu: index, config: c }),
        cpu: None,
        metric: false,
        kept: 0,
    })
}

/// The PMU's `event_init` checks for `config` on PMU `pmu_index`.
fn init_on_pmu(
    machine: &Machine,
    pmu_index: usize,
    config: u64,
    attr: &Attr,
    pid: i32,
    cpu: i32,
) -> Result<Init, Errno> {
    let sampling = attr.sample_period != 0;
    let pmu = &machine.pmus[pmu_index];
    match &pmu.class {
        PmuClass::X86Core(core) => {
            // x86_pmu_event_init: a hybrid PMU refuses a CPU outside its `cpus`.
            if cpu >= 0 && !pmu.covers(cpu as u32) {
                return Err(errno(libc::ENOENT));
            }
            init_x86(machine, core, pmu_index, attr, config)
        }
        PmuClass::Arm(arm) => {
            if cpu >= 0 && !pmu.covers(cpu as u32) {
                return Err(errno(libc::ENOENT));
            }
            let config = config & 0xffff;
            Ok(Init {
                home: Home::Hw(pmu_index),
                hw: HwKind::Arm(arm_event(arm, config, attr, pid)?),
                source: Some(Source::Arm { pmu: pmu_index, config }),
                cpu: None,
                metric: false,
                kept: 0,
            })
        }
        PmuClass::Msr { events } => {
            // msr.c: PERF_PMU_CAP_NO_EXCLUDE, config within the detected MSRs, no
            // sampling.
            if any_exclude(attr) || sampling {
                return Err(errno(libc::EINVAL));
            }
            if config >= 64 || events & (1 << config) == 0 {
                return Err(errno(libc::EINVAL));
            }
            Ok(soft(Source::Msr(config)))
        }
        PmuClass::Power { events } => {
            // rapl.c: CPU events only, no exclude bits, no sampling, config 0-7 naming a
            // domain.
            if cpu < 0 || pid != -1 || any_exclude(attr) || sampling {
                return Err(errno(libc::EINVAL));
            }
            if config & !0xff != 0 || events & (1 << config) == 0 {
                return Err(errno(libc::EINVAL));
            }
            let moved = reader_cpu(machine, pmu_index, cpu as u32);
            Ok(Init {
                home: Home::Hw(pmu_index),
                hw: HwKind::Free,
                source: Some(Source::Power(config)),
                cpu: moved,
                metric: false,
                kept: 0,
            })
        }
        PmuClass::Cstate { events } => {
            // cstate.c: no sampling either.
            if cpu < 0 || pid != -1 || any_exclude(attr) || sampling {
                return Err(errno(libc::EINVAL));
            }
            if config >= 64 || events & (1 << config) == 0 {
                return Err(errno(libc::EINVAL));
            }
            Ok(Init {
                home: Home::Hw(pmu_index),
                hw: HwKind::Free,
                source: Some(Source::Cstate { pmu: pmu_index, config }),
                cpu: None,
                metric: false,
                kept: 0,
            })
        }
        PmuClass::Uncore { config_mask, .. } => {
            init_uncore(machine, pmu_index, *config_mask, config, attr, pid, cpu)
        }
        PmuClass::Builtin => Err(errno(libc::EINVAL)),
    }
}

/// uncore_pmu_event_init: CPU events only, no exclude bits, no sampling; the event moves to
/// the box's reader CPU; config bits outside the box's masks (`config_mask`) are dropped.
fn init_uncore(
    machine: &Machine,
    pmu_index: usize,
    config_mask: u64,
    config: u64,
    attr: &Attr,
    pid: i32,
    cpu: i32,
) -> Result<Init, Errno> {
    let pmu = &machine.pmus[pmu_index];
    let sampling = attr.sample_period != 0;
    if cpu < 0 || pid != -1 || any_exclude(attr) {
        return Err(errno(libc::EINVAL));
    }
    if sampling {
        // Intel's uncore_pmu_event_init refuses sampling (EINVAL); AMD's boxes pass
        // event_init and perf_event_open refuses them for
        // PERF_PMU_CAP_NO_INTERRUPT (EOPNOTSUPP).
        let amd = pmu.name.starts_with("amd_");
        return Err(errno(if amd { libc::EOPNOTSUPP } else { libc::EINVAL }));
    }
    let config = config & config_mask;
    let moved = reader_cpu(machine, pmu_index, cpu as u32);
    let kind = box_kind(&pmu.name).to_string();
    // Filter registers (SKX CHA's config1) select what the box counts.
    let config1 =
        if pmu.formats.iter().any(|(_, f)| f.starts_with("config1")) { attr.config1 } else { 0 };
    Ok(Init {
        home: Home::Hw(pmu_index),
        hw: HwKind::Uncore { config },
        source: Some(Source::Uncore { kind, config, config1 }),
        cpu: moved,
        metric: false,
        kept: 0,
    })
}

/// The `cpumask` CPU of `cpu`'s package.
fn reader_cpu(machine: &Machine, pmu: usize, cpu: u32) -> Option<u32> {
    let package = machine.package_of(cpu)?;
    let mask = machine.pmus[pmu].cpumask.as_ref()?;
    mask.iter().copied().find(|&c| machine.package_of(c) == Some(package))
}

/// An uncore box's kind: its PMU name without the box number (`uncore_cha_1` -> `uncore_cha`).
pub(crate) fn box_kind(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((kind, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => kind,
        _ => name,
    }
}

/// `x86_pmu_hw_config` + `intel_pmu_hw_config` (or AMD's): the kept config, the topdown
/// attribute rules, extra registers and the constraint.
fn init_x86(
    machine: &Machine,
    core: &X86Core,
    pmu_index: usize,
    attr: &Attr,
    config: u64,
) -> Result<Init, Errno> {
    let pmu = &machine.pmus[pmu_index];
    x86_precise(pmu, attr)?;
    let amd = core.kind.is_amd();
    let mut kept = if amd { config & AMD_RAW_EVENT_MASK } else { config & RAW_EVENT_MASK };
    if !amd {
        if core.any_bit && config & EVENTSEL_ANY != 0 {
            kept |= EVENTSEL_ANY;
        }
        if pmu.formats.iter().any(|(n, _)| n == "in_tx") {
            kept |= config & IN_TX;
        }
    }
    let code = kept & ARCH_EVENT_MASK;
    let is_metric = core.topdown_events > 0
        && kept & EVENTSEL_EVENT == 0
        && (TD_METRIC_FIRST..=TD_METRIC_MAX).contains(&code);
    let is_slots = core.topdown_events > 0 && code == TD_SLOTS;
    if is_metric || is_slots {
        // intel_pmu_hw_config: topdown events take no config1/config2 and no filters.
        if attr.config1 != 0 || attr.config2 != 0 {
            return Err(errno(libc::EINVAL));
        }
        if config & ALL_EVENT_FLAGS != 0 {
            return Err(errno(libc::EINVAL));
        }
    }
    let available_metric =
        is_metric && code <= TD_METRIC_FIRST + ((u64::from(core.topdown_events) - 1) << 8);
    if available_metric && attr.sample_period != 0 {
        // intel_pmu_hw_config: "The metric events don't support sampling."
        return Err(errno(libc::EINVAL));
    }
    // Extra registers: config1 must fit the register's valid mask (EINVAL); events
    // without one ignore config1.
    let mut extra = None;
    let mut config1 = 0;
    if let Some(er) = core.extra_regs.iter().find(|er| er.event == code) {
        if attr.config1 & !er.valid != 0 {
            return Err(errno(libc::EINVAL));
        }
        extra = Some((er.kind, attr.config1));
        config1 = attr.config1;
    }
    let mut constraint = core.constraint(kept);
    if attr.precise_ip > 0
        && let Some(mask) = pebs_constraint(core.kind, kept)
    {
        constraint.idxmsk = mask;
        constraint.weight = mask.count_ones();
    }
    Ok(Init {
        home: Home::Hw(pmu_index),
        hw: HwKind::X86(HwEvent { constraint, extra, metric: is_metric }),
        source: Some(Source::X86 { pmu: pmu_index, config: kept & !EVENTSEL_ANY, config1 }),
        cpu: None,
        metric: available_metric,
        kept,
    })
}

/// `x86_pmu_hw_config`: `precise_ip` above the PMU's `caps/max_precise` (`x86_pmu_max_precise`)
/// EOPNOTSUPP; `precise_ip` on a counting event EINVAL ("no sense in having PEBS for non
/// sampling events").
fn x86_precise(pmu: &crate::machine::SimPmu, attr: &Attr) -> Result<(), Errno> {
    if attr.precise_ip == 0 {
        return Ok(());
    }
    let max = pmu
        .caps
        .iter()
        .find(|(name, _)| name == "max_precise")
        .and_then(|(_, v)| v.trim().parse::<u8>().ok())
        .unwrap_or(0);
    if attr.precise_ip.min(3) > max {
        return Err(errno(libc::EOPNOTSUPP));
    }
    if attr.sample_period == 0 {
        return Err(errno(libc::EINVAL));
    }
    Ok(())
}

/// The counters a precise event may use where the PEBS table narrows them
/// (`intel_glc_pebs_event_constraints`, arch/x86/events/intel/ds.c, for Golden Cove class
/// cores); `None` keeps the ordinary constraint (PMU_FL_PEBS_ALL). Matched on event code and
/// umask without flag bits, as the table's FLAGS constraints do.
fn pebs_constraint(kind: CoreKind, kept: u64) -> Option<u64> {
    if kind != CoreKind::GoldenCove || kept & ALL_EVENT_FLAGS != 0 {
        return None;
    }
    match (kept & 0xffff, kept & 0xff) {
        (0x0100, _) => Some(1 << 32),
        (0x0400, _) => Some(1 << 35),
        (0x01cd, _) => Some(0xfe),
        (0x02cd, _) => Some(0x1),
        (_, 0xc0) => Some(0xfe),
        (_, 0xd0..=0xd4) => Some(0xf),
        _ => None,
    }
}

fn any_exclude(attr: &Attr) -> bool {
    attr.exclude_user
        || attr.exclude_kernel
        || attr.exclude_hv
        || attr.exclude_guest
        || attr.exclude_host
}

/// `__armv8_pmuv3_map_event` and `armv8pmu_set_event_filter` (drivers/perf/arm_pmuv3.c):
/// the event as `armv8pmu_get_event_idx` will place it, or the refusal.
/// * CHAIN (0x1e), the odd half of a pair, EINVAL: it only counts beside its even counter.
/// * `rdpmc` on an event that follows no task (a CPU or cgroup event) EINVAL; a 64-bit one
///   that is not CPU_CYCLES on 32-bit counters EOPNOTSUPP (it cannot be chained, and only
///   the cycle counter is 64-bit there).
/// * A `threshold` above `caps/threshold_max` EINVAL (every threshold without FEAT_PMUv3_TH).
fn arm_event(
    arm: &crate::machine::ArmCore,
    config: u64,
    attr: &Attr,
    pid: i32,
) -> Result<crate::sched::ArmEvent, Errno> {
    use crate::sched::{
        ARM_CHAIN, ARM_CPU_CYCLES, ARM_LONG, ARM_RDPMC, ARM_THRESHOLD_MASK, ARM_THRESHOLD_SHIFT,
    };
    if config == ARM_CHAIN {
        return Err(errno(libc::EINVAL));
    }
    let long = attr.config1 & ARM_LONG != 0;
    let user = attr.config1 & ARM_RDPMC != 0;
    if user {
        if pid == -1 || attr.pid_is_cgroup {
            return Err(errno(libc::EINVAL));
        }
        if long && config != ARM_CPU_CYCLES && !arm.long_counters {
            return Err(errno(libc::EOPNOTSUPP));
        }
    }
    let threshold = (attr.config1 >> ARM_THRESHOLD_SHIFT) & ARM_THRESHOLD_MASK;
    if threshold > arm.threshold_max {
        return Err(errno(libc::EINVAL));
    }
    Ok(crate::sched::ArmEvent { config, long, user, threshold })
}
