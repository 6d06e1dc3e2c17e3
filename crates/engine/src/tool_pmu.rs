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
    let mut values = host.literals(all_cpus, cpus);
    let online = host.topology().ok().map(|t| t.online.len() as f64).unwrap_or(f64::NAN);
    // perf reads these on its first CPU only (`reads_only_on_cpu_idx0`): a per-task event is
    // "any CPU", so it counts the PMU's CPUs (the online ones: the tool PMU has no cpumask); a
    // system-wide one is left with that single CPU, and counts 1.
    let own = if system_wide { 1.0 } else { online };
    values[Literal::NumCpus.index()] = own;
    values[Literal::NumCpusOnline.index()] = own;
    if host.topology().is_err() {
        values[Literal::CoreWide.index()] = f64::NAN;
    }
    let model_name = values[Literal::SystemTscFreq.index()];
    values[Literal::SystemTscFreq.index()] = tsc_freq(host.cpuinfo(), model_name);
    values
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
    fn every_fact_is_a_literal_and_the_times_are_not() {
        for event in tmetric_names::TOOL_PMU {
            let time = ["duration_time", "user_time", "system_time"].contains(&event.name);
            assert_eq!(literal_of(event).is_none(), time, "{}", event.name);
        }
    }
}
