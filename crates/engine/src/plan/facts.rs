//! What a machine tells metric expressions: its literals (`#num_cpus`, `#smt_on`,
//! `#system_tsc_freq`, ...), its cpuid, and the probe values of `has_event()` and
//! `strcmp_cpuid_str()`, computed in one place for a machine, no machine and a recording.

use std::path::Path;

use tmetric_catalog::Model;
use tmetric_model::Literal;
use tmetric_runtime::event::ResolvedEvent;
use tmetric_runtime::{Sysfs, Topology};

use super::Plan;
use crate::Host;

/// Machine literals for metric expressions from sysfs, its topology and `cpuinfo`'s text, for
/// a run that does not count system-wide ([`Host::literals`] sets the rest).
pub(crate) fn literals_of(
    sysfs: &Sysfs,
    topology: Option<&Topology>,
    cpuinfo: &str,
) -> [f64; Literal::COUNT] {
    let mut values = [f64::NAN; Literal::COUNT];
    values[Literal::TargetCpu.index()] = 0.0;
    if let Some(t) = topology {
        values[Literal::NumCpus.index()] = t.num_cpus as f64;
        values[Literal::NumCpusOnline.index()] = t.online.len() as f64;
        values[Literal::NumCores.index()] = t.cores as f64;
        values[Literal::NumDies.index()] = t.dies as f64;
        values[Literal::NumPackages.index()] = t.packages as f64;
        values[Literal::SmtOn.index()] = f64::from(u8::from(t.smt_on));
        values[Literal::CoreWide.index()] = f64::from(u8::from(!t.smt_on));
    }
    if let Some(core) = sysfs.core_pmu()
        && let Ok(text) =
            tmetric_runtime::input::read_sysfs(sysfs.pmu_devices().join(core).join("caps/slots"))
        && let Some(slots) = tmetric_runtime::sysfs::parse_number(text.trim())
    {
        values[Literal::Slots.index()] = slots as f64;
    }
    values[Literal::HasPmem.index()] =
        f64::from(u8::from(sysfs.root().join("firmware/acpi/tables/NFIT").exists()));
    values[Literal::SystemTscFreq.index()] = tsc_from_model_name(cpuinfo);
    values
}

/// perf's fallback for `#system_tsc_freq` on x86: the `@ 2.10GHz` of the model name.
pub fn tsc_from_model_name(cpuinfo: &str) -> f64 {
    let Some(line) = cpuinfo.lines().find(|l| l.starts_with("model name")) else { return f64::NAN };
    let Some((_, after)) = line.split_once('@') else { return f64::NAN };
    let text = after.trim();
    let Some(number) = text.strip_suffix("GHz") else { return f64::NAN };
    number.trim().parse::<f64>().map_or(f64::NAN, |ghz| ghz * 1e9)
}

/// This machine's cpuid as perf reads it: `PERF_CPUID` when set (perf's own override), else
/// `/proc/cpuinfo` or arm64's `midr_el1`.
pub fn cpuid_of(sysfs: &Sysfs, proc_root: &Path) -> Option<String> {
    cpuid_with(|| tmetric_runtime::sysfs::host_cpuid(sysfs, proc_root))
}

/// `PERF_CPUID` when set, else what `read` finds on the machine.
pub(crate) fn cpuid_with(read: impl FnOnce() -> Option<String>) -> Option<String> {
    std::env::var("PERF_CPUID").ok().or_else(read)
}

/// Per input slot of `model`, the constant perf gives `has_event()` and `strcmp_cpuid_str()`
/// when it parses a metric on `machine` (metricgroup.c's `metricgroup__has_event` and `strcmp_cpuid_str` in util/expr.c): `has_event(X)` is 1 when X parses as an
/// event here, `strcmp_cpuid_str(ID)` is 1 when the machine's cpuid matches ID and NaN when the
/// cpuid is unknown. Other slots read 0.
pub fn machine_probes(model: &Model, machine: &Host) -> Vec<f64> {
    // perf parses the argument as an event of this machine: its sysfs and its vendor events.
    let tables = machine.tables(None);
    let resolver = crate::events::resolver(machine.sysfs(), &tables, crate::contract::current());
    probes_with(
        model,
        |text| matches!(resolver.single(&text.replace('@', "/")), Ok(ResolvedEvent::Counter(_))),
        machine.cpuid(),
    )
}

/// Probe values without a machine (`tmetric plan --model`): every `has_event()` argument is
/// assumed to exist, as perf's own metric tests assume, and `strcmp_cpuid_str()` is unknown.
pub fn offline_probes(model: &Model) -> Vec<f64> {
    probes_with(model, |_| true, None)
}

/// Per input slot of `model`: `has_event(X)` is 1 when `exists(X)` (X as the catalogue spells
/// it, `pmu@terms@`), `strcmp_cpuid_str(ID)` is 1 when `cpuid` matches ID and NaN without a
/// cpuid; other slots 0. The one probe computation: on a machine, without one, and over a
/// recording ([`crate::replay`]).
pub(crate) fn probes_with(
    model: &Model,
    exists: impl Fn(&str) -> bool,
    cpuid: Option<&str>,
) -> Vec<f64> {
    use tmetric_catalog::catalog::id_calls;
    let mut probes = vec![0.0; model.ids.len()];
    // Only a probe's text is read: the strings are inflated a block at a time on first read.
    for (slot, id) in model.ids.iter().enumerate() {
        if id.calls & id_calls::STRCMP_CPUID_STR != 0 {
            let text = model.str(id.text);
            probes[slot] = cpuid.map_or(f64::NAN, |cpuid| {
                f64::from(u8::from(tmetric_model::cpuid::cpuid_matches(model.arch, text, cpuid)))
            });
        } else if id.calls & id_calls::HAS_EVENT != 0 {
            probes[slot] = f64::from(u8::from(exists(model.str(id.text))));
        }
    }
    probes
}

impl Plan {
    /// `model`'s probe values (empty when no root of the plan is from `model`).
    pub fn probes_of(&self, model: &Model) -> &[f64] {
        self.probes.iter().find(|(m, _)| std::ptr::eq(*m, model)).map_or(&[], |(_, p)| p)
    }
}
