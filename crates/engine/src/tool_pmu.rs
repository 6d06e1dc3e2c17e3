//! perf 7.x's tool PMU events written with `-e` (`tool/num_cpus/`, `smt_on`): the value perf
//! reads for each when it opens it (`tool_pmu__read_event` in `tools/perf/util/tool_pmu.c`),
//! for the run's target on a probed [`Host`]. These are not the `#literals` metrics read:
//! perf gives an event the CPUs it opens on, a metric the machine's.

use tmetric_model::Literal;
use tmetric_names::ToolPmuEvent;

use crate::Host;

/// The literal a tool PMU fact names (`num_cpus` is `#num_cpus`), as the two share names.
pub fn literal_of(event: &ToolPmuEvent) -> Option<Literal> {
    Literal::ALL.into_iter().find(|l| l.name() == event.name)
}

/// Per [`Literal`], the value perf 7.x prints for the tool PMU's event of that name on `host`,
/// for a run with `-a` (`all_cpus`) or not and `cpus` the CPUs `-C` names; NaN where the
/// machine cannot tell (its topology unreadable).
pub fn values(host: &Host, all_cpus: bool, cpus: Option<&[u32]>) -> [f64; Literal::COUNT] {
    // perf's `target_cpu`: `-a` or `-C`; its `system_wide` (for `core_wide`) is `-a` alone.
    let system_wide = all_cpus || cpus.is_some();
    let mut values = host.literals(system_wide);
    let online = host.topology().ok().map(|t| t.online.len() as f64).unwrap_or(f64::NAN);
    // perf reads these on its first CPU only (`reads_only_on_cpu_idx0`): a per-task event is
    // "any CPU", so it counts the PMU's CPUs (the online ones: the tool PMU has no cpumask); a
    // system-wide one is left with that single CPU, and counts 1.
    let own = if system_wide { 1.0 } else { online };
    values[Literal::NumCpus.index()] = own;
    values[Literal::NumCpusOnline.index()] = own;
    values[Literal::CoreWide.index()] = match host.topology() {
        Ok(t) => f64::from(u8::from(core_wide(all_cpus, t.smt_on, cpus, host.smt_siblings()))),
        Err(_) => f64::NAN,
    };
    let model_name = values[Literal::SystemTscFreq.index()];
    values[Literal::SystemTscFreq.index()] = tsc_freq(host.cpuinfo(), model_name);
    values
}

/// perf's `core_wide()` (`util/smt.c`): only a count with `-a` can cover whole cores (perf
/// stat's `system_wide`, which `-C` alone does not set); it does without SMT, or when every
/// CPU `-C` names has its SMT sibling named too.
fn core_wide(
    system_wide: bool,
    smt_on: bool,
    cpus: Option<&[u32]>,
    siblings: &[(u32, u32)],
) -> bool {
    if !system_wide {
        return false;
    }
    if !smt_on {
        return true;
    }
    match cpus {
        None => true,
        Some(cpus) => siblings
            .iter()
            .filter(|(cpu, _)| cpus.contains(cpu))
            .all(|(_, sibling)| cpus.contains(sibling)),
    }
}

/// perf's `arch_get_tsc_freq()` on x86: 0 but on Intel, where CPUID leaf 0x15 tells it when
/// the CPU enumerates it, else the model name's `@ 2.10GHz` (`model_name`, NaN when absent:
/// perf then says 0).
fn tsc_freq(cpuinfo: &str, model_name: f64) -> f64 {
    let vendor = cpuinfo.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == "vendor_id").then(|| value.trim())
    });
    if !vendor.is_some_and(|v| v.contains("Intel")) {
        return 0.0;
    }
    // The CPU executing this is the one cpuinfo describes only when it is an Intel one too (a
    // simulated Intel machine on another CPU has only its cpuinfo).
    if let Some(hz) = cpuid_tsc_hz() {
        return hz;
    }
    if model_name.is_nan() { 0.0 } else { model_name.trunc() }
}

/// The TSC's frequency from CPUID leaf 0x15 on an Intel CPU that enumerates it.
#[cfg(target_arch = "x86_64")]
fn cpuid_tsc_hz() -> Option<f64> {
    use std::arch::x86_64::__cpuid;
    let leaf0 = __cpuid(0);
    let vendor = [leaf0.ebx, leaf0.edx, leaf0.ecx];
    if vendor != [0x756e_6547, 0x4965_6e69, 0x6c65_746e] || leaf0.eax < 0x15 {
        return None;
    }
    let leaf = __cpuid(0x15);
    if leaf.eax == 0 || leaf.ebx == 0 || leaf.ecx == 0 {
        return None;
    }
    Some((u64::from(leaf.ecx) * u64::from(leaf.ebx) / u64::from(leaf.eax)) as f64)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_tsc_hz() -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_system_wide_count_covers_whole_cores() {
        let siblings = [(0, 2), (2, 0), (1, 3), (3, 1)];
        assert!(!core_wide(false, false, None, &siblings), "per task: never, even without SMT");
        assert!(core_wide(true, false, Some(&[0]), &siblings), "without SMT: always");
        assert!(core_wide(true, true, None, &siblings), "-a: every CPU");
        assert!(core_wide(true, true, Some(&[0, 2]), &siblings));
        assert!(!core_wide(true, true, Some(&[0, 1]), &siblings), "CPU 0 without its sibling 2");
    }

    #[test]
    fn the_tsc_is_perfs_0_but_on_intel() {
        let amd = "vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 @ 2.45GHz\n";
        assert_eq!(tsc_freq(amd, 2.45e9), 0.0);
        let intel = "vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) @ 2.10GHz\n";
        let hz = tsc_freq(intel, 2.1e9);
        assert!(hz == cpuid_tsc_hz().unwrap_or(2.1e9), "{hz}");
        let unnamed = "vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n";
        assert_eq!(tsc_freq(unnamed, f64::NAN), cpuid_tsc_hz().unwrap_or(0.0));
    }

    #[test]
    fn every_fact_is_a_literal_and_the_times_are_not() {
        for event in tmetric_names::TOOL_PMU {
            let time = ["duration_time", "user_time", "system_time"].contains(&event.name);
            assert_eq!(literal_of(event).is_none(), time, "{}", event.name);
        }
    }
}
