//! The simulated machines: CPUs and topology, the cpuid string perf computes, and each PMU with
//! its sysfs files (`type`, `format/`, `events/`, `caps/`, `cpus`/`cpumask`) and counter model.
//! The machines are data: `crates/sim/machines/*.json`, built in, or a user's file (`--pmu-sim
//! FILE.json`), read and checked by [`file`] ([`Machine::named`], [`Machine::load`],
//! [`Machine::parse`]). [`Machine::write_sysfs`] writes the tree the
//! [`tmetric_runtime::Sysfs`] reader and [`tmetric_runtime::sysfs::host_cpuid`] read.
//!
//! The files' facts are from Linux 6.12 (`arch/x86/events/intel/core.c`,
//! `arch/x86/events/amd/core.c`, `arch/x86/events/amd/uncore.c`, `arch/x86/events/msr.c`,
//! `arch/x86/events/rapl.c`, `arch/x86/events/intel/cstate.c`, `arch/x86/events/intel/uncore*.c`,
//! `drivers/perf/arm_pmuv3.c`); the rules each [`CoreKind`] stands for are in `crate::sched`.

use std::fs;
use std::io;
use std::path::Path;

use super::sched::{Constraint, ExtraReg};

mod file;
pub use file::{BUILTIN as MACHINE_FILES, MAX_CPUS, MachineError};

/// The largest machine file read (the simulator's inputs share one cap).
const MACHINE_FILE_CAP: u64 = tmetric_runtime::input::WORKLOAD;

/// Which constraint table and counter rules a core PMU follows (a machine file's `core`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub enum CoreKind {
    /// Skylake server (`intel_skl_event_constraints`).
    Skylake,
    /// Ice Lake (`intel_icl_event_constraints`, 4 topdown metrics).
    IceLake,
    /// Golden Cove / Redwood Cove: SPR, ADL and MTL `cpu_core` (`intel_glc_event_constraints`,
    /// 8 topdown metrics).
    GoldenCove,
    /// Gracemont / Crestmont: ADL and MTL `cpu_atom` (`intel_grt_event_constraints`).
    Gracemont,
    /// AMD Zen 4 (`amd_get_event_constraints_f17h`: the 0x003 pair rule only).
    Zen4,
    /// AMD Zen 5 (family 1Ah): the kernel's rules are Zen 4's (amd/core.c takes
    /// `amd_get_event_constraints_f17h` from family 17h on and `amd_zen4_perfmon_event_map`
    /// for Zen 4 and every family from 0x1a); kept apart so a machine says what it is.
    Zen5,
    /// Arm Neoverse N2 PMUv3 (`armv8pmu_get_event_idx`).
    NeoverseN2,
}

impl CoreKind {
    /// An AMD core: no fixed counters, the pair rule, IBS rather than PEBS.
    pub fn is_amd(self) -> bool {
        matches!(self, CoreKind::Zen4 | CoreKind::Zen5)
    }

    /// An arm64 core's PMUv3 has 64-bit programmable counters (FEAT_PMUv3p5, which Armv8.5
    /// requires with PMUv3: Neoverse N2 is an Armv9.0 core, so its PMUVer is 6 or more).
    pub fn long_counters(self) -> bool {
        self == CoreKind::NeoverseN2
    }
}

/// `armv8_pmuv3_perf_map` (drivers/perf/arm_pmuv3.c): `PERF_TYPE_HARDWARE` ids to PMUv3
/// event numbers: cycles, instructions, cache references and misses (L1D), branches
/// (BR_RETIRED), branch misses, bus cycles, stalled frontend and backend cycles.
pub const ARMV8_PMUV3_PERF_MAP: [Option<u64>; 10] = [
    Some(0x11),
    Some(0x08),
    Some(0x04),
    Some(0x03),
    Some(0x21),
    Some(0x10),
    Some(0x1d),
    Some(0x23),
    Some(0x24),
    None,
];

/// How a PMU places events on counters.
#[derive(Debug, Clone, PartialEq)]
pub enum PmuClass {
    /// An x86 core PMU (Intel or AMD): general counters, fixed counters, topdown metrics.
    X86Core(X86Core),
    /// An arm64 PMUv3: general counters and the dedicated cycle counter.
    Arm(ArmCore),
    /// An uncore box: `counters` general counters, plus a fixed counter selected by config
    /// `0xff` when `fixed` (Intel's `UNCORE_FIXED_EVENT`); `free_running` boxes never conflict.
    Uncore {
        /// General counters.
        counters: u32,
        /// A fixed counter for config 0xff.
        fixed: bool,
        /// Free-running counters: every event has its own.
        free_running: bool,
        /// Bits of `config` the driver keeps (the rest are dropped, as the kernel does).
        config_mask: u64,
    },
    /// `msr`: a software-context PMU (may join any group); `events` is the bitmask of valid
    /// configs (msr.c refuses others with EINVAL).
    Msr {
        /// Valid configs as bits.
        events: u64,
    },
    /// `power` (RAPL) and other package-scope PMUs with a small config range.
    Power {
        /// Valid configs as bits.
        events: u64,
    },
    /// `cstate_core`/`cstate_pkg` (intel/cstate.c): free-running residency MSRs; CPU events
    /// only, no exclude bits, config one of `events` (bit n = config n). Unlike RAPL the event
    /// stays on its CPU (another CPU of the scope reads the same MSR).
    Cstate {
        /// Valid configs as bits.
        events: u64,
    },
    /// A PMU built into the kernel (`software`, `tracepoint`, `breakpoint`, `cpu_clock`,
    /// `task_clock`, `kprobe`, `uprobe`), handled by its type number.
    Builtin,
}

/// An x86 core PMU's counters and tables.
#[derive(Debug, Clone, PartialEq)]
pub struct X86Core {
    /// The microarchitecture.
    pub kind: CoreKind,
    /// General counters per logical CPU.
    pub gp: u32,
    /// Fixed counters (0 on AMD).
    pub fixed: u32,
    /// PERF_METRICS topdown events (`x86_pmu.num_topdown_events`): 0, 4 (ICL) or 8.
    pub topdown_events: u32,
    /// The constraint table, in the kernel's order (first match wins), after
    /// `intel_pmu_check_event_constraints` widened real fixed events to the GP counters.
    pub constraints: Vec<Constraint>,
    /// Extra registers (offcore response, load latency, frontend) with valid config1 masks.
    pub extra_regs: Vec<ExtraReg>,
    /// `PERF_TYPE_HARDWARE` ids 0..=9 mapped to raw configs (`None`: ENOENT).
    pub generic: [Option<u64>; 10],
    /// The `any` bit (21) is kept (perfmon v3/v4); v5 parts drop it.
    pub any_bit: bool,
    /// Topdown slots per cycle (the pipeline width).
    pub width: u64,
}

/// An arm64 PMUv3.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmCore {
    /// The microarchitecture.
    pub kind: CoreKind,
    /// Programmable counters (PMCR_EL0.N).
    pub gp: u32,
    /// `PERF_TYPE_HARDWARE` ids mapped to event numbers.
    pub generic: [Option<u64>; 10],
    /// `caps/slots` (PMMIR_EL1.SLOTS).
    pub width: u64,
    /// 64-bit programmable counters (FEAT_PMUv3p5, `armv8pmu_has_long_event`): where they
    /// are 32-bit, a `long` event takes two chained counters.
    pub long_counters: bool,
    /// `caps/threshold_max` (PMMIR_EL1.THWIDTH, 0 without FEAT_PMUv3_TH): a larger
    /// `threshold` is refused.
    pub threshold_max: u64,
}

/// One PMU of a simulated machine: as its sysfs tree shows it, and how the simulated kernel
/// counts on it.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPmu {
    /// The directory name.
    pub name: String,
    /// `type`.
    pub type_: u32,
    /// The counter model.
    pub class: PmuClass,
    /// `cpus` (hybrid x86 and arm core PMUs).
    pub cpus: Option<Vec<u32>>,
    /// `cpumask` (uncore, power: one reader CPU per package).
    pub cpumask: Option<Vec<u32>>,
    /// `format/<term>` files: term and content.
    pub formats: Vec<(String, String)>,
    /// `events/<alias>` files (including `.scale`/`.unit` companions).
    pub events: Vec<(String, String)>,
    /// `caps/<name>` files.
    pub caps: Vec<(String, String)>,
    /// Plain files in the PMU directory (`rdpmc`, `freeze_on_smi`).
    pub files: Vec<(String, String)>,
}

impl SimPmu {
    /// Whether this PMU exists on `cpu`: its `cpus` list, or every CPU.
    pub fn covers(&self, cpu: u32) -> bool {
        self.cpus.as_ref().is_none_or(|c| c.contains(&cpu))
    }

    /// The core counter model, for x86 core PMUs.
    pub fn x86(&self) -> Option<&X86Core> {
        match &self.class {
            PmuClass::X86Core(core) => Some(core),
            _ => None,
        }
    }

    /// The term string of `events/<alias>` (`event=0x00,umask=0x80`).
    pub fn alias(&self, name: &str) -> Option<&str> {
        self.events.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str())
    }
}

/// One logical CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// The CPU number.
    pub id: u32,
    /// `topology/core_id`.
    pub core: u32,
    /// `topology/physical_package_id`.
    pub package: u32,
    /// `topology/die_id`.
    pub die: u32,
}

/// How perf identifies the CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuId {
    /// x86: `/proc/cpuinfo` fields; perf's string is `vendor-family-MODEL-STEPPING`.
    X86 {
        /// `vendor_id`.
        vendor: String,
        /// `cpu family` (decimal).
        family: u32,
        /// `model` (decimal in cpuinfo, hex in perf's string).
        model: u32,
        /// `stepping`.
        stepping: u32,
        /// `model name`.
        model_name: String,
    },
    /// arm64: `midr_el1` as the kernel prints it (`0x%016llx`).
    Midr(u64),
}

/// A simulated machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// The name [`Machine::named`] knows it by.
    pub name: String,
    /// One line on what it is.
    pub description: String,
    /// The catalogue model perf's mapfile picks for [`Machine::cpuid`].
    pub catalogue_model: String,
    /// Logical CPUs, all online.
    pub cpus: Vec<Cpu>,
    /// SMT active (`devices/system/cpu/smt/active`).
    pub smt: bool,
    /// The CPU identification.
    pub id: CpuId,
    /// The PMUs, `software`, `tracepoint` and friends included.
    pub pmus: Vec<SimPmu>,
    /// `/proc/sys/kernel/nmi_watchdog`: while on, every CPU has a pinned cycles event on its
    /// core PMU (`kernel/watchdog_perf.c`).
    pub nmi_watchdog: bool,
    /// `/proc/sys/kernel/perf_event_paranoid` (written only; the simulated caller is root).
    pub paranoid: i32,
    /// The kernel's `CONFIG_HZ`: 250 on every built-in machine, as Debian and Ubuntu build
    /// their kernels (Fedora and RHEL use 1000: [`Machine::with_hz`], or a workload's
    /// `kernel.hz`).
    pub hz: u32,
    /// `perf_event_mux_interval_ms` of every PMU: `PERF_CPU_HRTIMER` = 1000 / HZ unless
    /// written (kernel/events/core.c, `__perf_mux_hrtimer_init`).
    pub mux_interval_ms: u64,
    /// IA32_PERF_CAPABILITIES bit 17 (`pebs_timing_info`), which sets PMU_FL_RETIRE_LATENCY
    /// (`intel_pmu_init`): PEBS records carry the retire latency, copied to the weight
    /// struct's `var3_w` (`ds.c`). Meteor Lake has it; Sapphire Rapids and older do not (0).
    pub retire_latency: bool,
}

/// The names [`Machine::named`] accepts.
pub const NAMES: &[&str] = &[
    "sapphirerapids",
    "icelake",
    "skylakex",
    "skylakex-nosmt",
    "alderlake",
    "meteorlake",
    "amdzen4",
    "amdzen5",
    "neoverse-n2",
];

/// Guests whose hypervisor exposes no virtual PMU, which [`Machine::named`] also knows: the
/// host's CPU model in cpuinfo, no core PMU, no uncore, RAPL or cstate PMU (KVM without
/// `enable_pmu`, and most cloud guests and microVMs). Kept apart from [`NAMES`]: nothing on
/// them counts a hardware event, so they are never the machine a metric is counted on.
pub const GUESTS: &[&str] = &["emeraldrapids-guest", "amdzen4-guest"];

impl Machine {
    /// Every machine name, in a fixed order.
    pub fn names() -> &'static [&'static str] {
        NAMES
    }

    /// The machine called `name` (see [`Machine::names`]), with the NMI watchdog on as x86
    /// distributions ship it (off on the arm64 machine, which lacks pseudo-NMIs by default).
    pub fn named(name: &str) -> Option<Machine> {
        let (_, text) = MACHINE_FILES.iter().find(|(n, _)| *n == name)?;
        Some(
            Machine::parse(text, &format!("crates/sim/machines/{name}.json"))
                .unwrap_or_else(|e| panic!("the built-in machine `{name}` is broken: {e}")),
        )
    }

    /// A built-in machine ([`Machine::named`]) or a machine file (JSON, [`Machine::parse`]).
    /// `None` for a name that is neither a built-in machine nor a path (no `/`, not ending
    /// in `.json`), so the caller can list the machines there are.
    pub fn load(name_or_path: &str) -> Option<Result<Machine, MachineError>> {
        if let Some(machine) = Machine::named(name_or_path) {
            return Some(Ok(machine));
        }
        if !name_or_path.contains('/') && !name_or_path.ends_with(".json") {
            return None;
        }
        let text = match tmetric_runtime::input::read_to_string(name_or_path, MACHINE_FILE_CAP) {
            Ok(text) => text,
            Err(e) => {
                return Some(Err(MachineError(format!(
                    "cannot read the machine file `{name_or_path}`: {e} (give a machine JSON file, as in crates/sim/machines/, or one of the built-in machines: {})",
                    NAMES.join(", ")
                ))));
            }
        };
        Some(
            Machine::parse(&text, name_or_path).and_then(|m| m.check_catalogue_model(name_or_path)),
        )
    }

    /// The simulator derives its counts from `catalogue_model`'s formulas and tmetric
    /// evaluates those of the model perf's mapfile picks for the cpuid: a file where the two
    /// differ would print wrong numbers without a word. (The built-in machines are checked by
    /// the tests, under every vintage that has their model.)
    fn check_catalogue_model(self, origin: &str) -> Result<Machine, MachineError> {
        let cpuid = self.cpuid();
        let picked = tmetric_catalog::model_for_cpuid(&cpuid);
        match picked {
            Some(model) if model.name.eq_ignore_ascii_case(&self.catalogue_model) => Ok(self),
            Some(model) => Err(MachineError(format!(
                "{origin}: `catalogue_model` is `{}`, but perf's mapfile picks {} for the cpuid `{cpuid}`; give `\"catalogue_model\": \"{}\"` or the cpuid of a {} machine",
                self.catalogue_model,
                model.path(),
                model.name,
                self.catalogue_model
            ))),
            None => Err(MachineError(format!(
                "{origin}: no model of the catalogue matches the cpuid `{cpuid}` (this perf vintage's mapfile has no row for it); give the `cpuid` of a machine the catalogue has (a vendor, family and model a row of perf's mapfile.csv matches; `tmetric list models` lists the models)"
            ))),
        }
    }

    /// The guests without a virtual PMU [`Machine::named`] knows ([`GUESTS`]).
    pub fn guests() -> &'static [&'static str] {
        GUESTS
    }

    /// The same machine with the NMI watchdog switched on or off.
    pub fn with_nmi_watchdog(mut self, on: bool) -> Machine {
        self.nmi_watchdog = on;
        self
    }

    /// The same machine in a guest whose hypervisor exposes only `n` fixed counters on its
    /// Golden Cove core PMUs (older KVM exposes 3): fixed counters from `n` on are gone
    /// (`intel_ctrl`), and without fixed counter 3 so are PERF_METRICS, the `slots` and
    /// `topdown-*` event files (`td_is_visible`) and every counter of the slots and metric
    /// constraints, so those events fail `validate_event` alone.
    pub fn with_fixed_counters(mut self, n: u32) -> Machine {
        for pmu in &mut self.pmus {
            let PmuClass::X86Core(core) = &pmu.class else { continue };
            if core.kind != CoreKind::GoldenCove {
                continue;
            }
            let core = super::sched::glc_core(core.gp, n.min(4));
            if core.topdown_events == 0 {
                pmu.events.retain(|(name, _)| name != "slots" && !name.starts_with("topdown-"));
            }
            pmu.class = PmuClass::X86Core(core);
        }
        self
    }

    /// The same machine on a kernel built with `CONFIG_HZ` = `hz`: the rotation interval
    /// becomes `PERF_CPU_HRTIMER` = 1000 / HZ ms unless it was written
    /// ([`Machine::with_mux_interval_ms`]).
    pub fn with_hz(mut self, hz: u32) -> Machine {
        if self.mux_interval_ms == crate::realism::mux_interval_ms(self.hz) {
            self.mux_interval_ms = crate::realism::mux_interval_ms(hz);
        }
        self.hz = hz.max(1);
        self
    }

    /// The same machine with another `perf_event_mux_interval_ms`.
    pub fn with_mux_interval_ms(mut self, ms: u64) -> Machine {
        self.mux_interval_ms = ms.max(1);
        self
    }

    /// The PMU called `name`.
    pub fn pmu(&self, name: &str) -> Option<&SimPmu> {
        self.pmus.iter().find(|p| p.name == name)
    }

    /// The PMU with sysfs type `type_`.
    pub fn pmu_by_type(&self, type_: u32) -> Option<(usize, &SimPmu)> {
        self.pmus.iter().enumerate().find(|(_, p)| p.type_ == type_)
    }

    /// The core PMU that counts on `cpu` (`cpu`, `cpu_core`/`cpu_atom`, `armv8_pmuv3_0`).
    pub fn core_pmu_of(&self, cpu: u32) -> Option<(usize, &SimPmu)> {
        self.pmus.iter().enumerate().find(|(_, p)| {
            matches!(p.class, PmuClass::X86Core(_) | PmuClass::Arm(_)) && p.covers(cpu)
        })
    }

    /// The CPU numbers.
    pub fn cpu_ids(&self) -> Vec<u32> {
        self.cpus.iter().map(|c| c.id).collect()
    }

    /// The cpuid string perf computes: `GenuineIntel-6-8F-8`, or the first 18 characters of
    /// `midr_el1` on arm64.
    pub fn cpuid(&self) -> String {
        match &self.id {
            CpuId::X86 { vendor, family, model, stepping, .. } => {
                format!("{vendor}-{family}-{model:X}-{stepping:X}")
            }
            CpuId::Midr(midr) => format!("0x{midr:016x}"),
        }
    }

    /// The package of `cpu`.
    pub fn package_of(&self, cpu: u32) -> Option<u32> {
        self.cpus.iter().find(|c| c.id == cpu).map(|c| c.package)
    }

    /// The SMT siblings of `cpu` (itself included), as a sorted list.
    pub fn siblings(&self, cpu: u32) -> Vec<u32> {
        let Some(me) = self.cpus.iter().find(|c| c.id == cpu) else { return Vec::new() };
        self.cpus
            .iter()
            .filter(|c| c.package == me.package && c.core == me.core)
            .map(|c| c.id)
            .collect()
    }

    /// Writes the machine's sysfs tree under `sys_root` (the directory that plays `/sys`) and
    /// its procfs files under `proc_root` (`cpuinfo`, `sys/kernel/nmi_watchdog`,
    /// `sys/kernel/perf_event_paranoid`).
    pub fn write_sysfs(&self, sys_root: &Path, proc_root: &Path) -> io::Result<()> {
        let put = |path: &Path, text: &str| -> io::Result<()> {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(path, text)
        };
        let devices = sys_root.join("bus/event_source/devices");
        fs::create_dir_all(&devices)?;
        for pmu in &self.pmus {
            let dir = devices.join(&pmu.name);
            put(&dir.join("type"), &format!("{}\n", pmu.type_))?;
            put(&dir.join("perf_event_mux_interval_ms"), &format!("{}\n", self.mux_interval_ms))?;
            for (term, text) in &pmu.formats {
                put(&dir.join("format").join(term), &format!("{text}\n"))?;
            }
            for (alias, text) in &pmu.events {
                put(&dir.join("events").join(alias), &format!("{text}\n"))?;
            }
            for (cap, text) in &pmu.caps {
                put(&dir.join("caps").join(cap), &format!("{text}\n"))?;
            }
            for (file, text) in &pmu.files {
                put(&dir.join(file), &format!("{text}\n"))?;
            }
            if let Some(cpus) = &pmu.cpus {
                put(&dir.join("cpus"), &format!("{}\n", cpu_list(cpus)))?;
            }
            if let Some(mask) = &pmu.cpumask {
                put(&dir.join("cpumask"), &format!("{}\n", cpu_list(mask)))?;
            }
        }
        let cpu_dir = sys_root.join("devices/system/cpu");
        let all = cpu_list(&self.cpu_ids());
        for file in ["online", "possible", "present"] {
            put(&cpu_dir.join(file), &format!("{all}\n"))?;
        }
        put(&cpu_dir.join("smt/active"), if self.smt { "1\n" } else { "0\n" })?;
        let control = if self.smt {
            "on"
        } else if self.cpus.len() == self.cores() {
            "notsupported"
        } else {
            "off"
        };
        put(&cpu_dir.join("smt/control"), &format!("{control}\n"))?;
        for cpu in &self.cpus {
            let top = cpu_dir.join(format!("cpu{}/topology", cpu.id));
            let siblings = cpu_list(&self.siblings(cpu.id));
            put(&top.join("core_id"), &format!("{}\n", cpu.core))?;
            put(&top.join("physical_package_id"), &format!("{}\n", cpu.package))?;
            put(&top.join("die_id"), &format!("{}\n", cpu.die))?;
            put(&top.join("thread_siblings_list"), &format!("{siblings}\n"))?;
            put(&top.join("core_cpus_list"), &format!("{siblings}\n"))?;
            if let CpuId::Midr(midr) = self.id {
                let path = cpu_dir.join(format!("cpu{}/regs/identification/midr_el1", cpu.id));
                put(&path, &format!("0x{midr:016x}\n"))?;
            }
        }
        put(&proc_root.join("cpuinfo"), &self.cpuinfo())?;
        let watchdog = if self.nmi_watchdog { "1\n" } else { "0\n" };
        put(&proc_root.join("sys/kernel/nmi_watchdog"), watchdog)?;
        put(&proc_root.join("sys/kernel/perf_event_paranoid"), &format!("{}\n", self.paranoid))?;
        Ok(())
    }

    fn cores(&self) -> usize {
        let mut cores: Vec<(u32, u32)> = self.cpus.iter().map(|c| (c.package, c.core)).collect();
        cores.sort_unstable();
        cores.dedup();
        cores.len()
    }

    /// x86 cpuinfo flags: a machine without a core PMU is a guest whose hypervisor hides it
    /// (KVM clears CPUID leaf 0xA, so no `arch_perfmon` or `pdcm`, and sets `hypervisor`).
    fn cpu_flags(&self) -> &'static str {
        let core_pmu = self.pmus.iter().any(|p| matches!(p.class, PmuClass::X86Core(_)));
        if core_pmu { "fpu tsc msr apic pdcm arch_perfmon" } else { "fpu tsc msr apic hypervisor" }
    }

    /// `/proc/cpuinfo` text in the kernel's per-architecture layout.
    pub fn cpuinfo(&self) -> String {
        let mut out = String::new();
        for cpu in &self.cpus {
            match &self.id {
                CpuId::X86 { vendor, family, model, stepping, model_name } => {
                    let siblings = self.cpus.iter().filter(|c| c.package == cpu.package).count();
                    out.push_str(&format!(
                        "processor\t: {}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n\
                         model\t\t: {model}\nmodel name\t: {model_name}\nstepping\t: {stepping}\n\
                         physical id\t: {}\nsiblings\t: {siblings}\ncore id\t\t: {}\n\
                         flags\t\t: {}\n\n",
                        cpu.id,
                        cpu.package,
                        cpu.core,
                        self.cpu_flags()
                    ));
                }
                CpuId::Midr(midr) => {
                    out.push_str(&format!(
                        "processor\t: {}\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm\n\
                         CPU implementer\t: 0x{:02x}\nCPU architecture: 8\nCPU variant\t: 0x{:x}\n\
                         CPU part\t: 0x{:03x}\nCPU revision\t: {}\n\n",
                        cpu.id,
                        (midr >> 24) & 0xff,
                        (midr >> 20) & 0xf,
                        (midr >> 4) & 0xfff,
                        midr & 0xf
                    ));
                }
            }
        }
        out
    }
}

/// A sorted CPU list in the kernel's `%*pbl` form (`0-3,8`).
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}
