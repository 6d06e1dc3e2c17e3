//! The simulated machines: CPUs and topology, the cpuid string perf computes, and each PMU with
//! its sysfs files (`type`, `format/`, `events/`, `caps/`, `cpus`/`cpumask`) and counter model.
//! [`Machine::write_sysfs`] writes the tree the [`tmetric_runtime::Sysfs`] reader and
//! [`tmetric_runtime::sysfs::host_cpuid`] read.
//!
//! Facts are from Linux 6.12 (`arch/x86/events/intel/core.c`, `arch/x86/events/amd/core.c`,
//! `arch/x86/events/msr.c`, `arch/x86/events/intel/uncore*.c`, `drivers/perf/arm_pmuv3.c`)
//! and the kernel's drivers under arch/x86/events and drivers/perf; see the notes on each model.

use std::fs;
use std::io;
use std::path::Path;

use super::sched::{Constraint, ExtraReg};

mod file;
pub use file::{BUILTIN as MACHINE_FILES, MAX_CPUS, MachineError};

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
        let machine = match name {
            "sapphirerapids" => sapphirerapids(),
            "icelake" => icelake(),
            "skylakex" => skylakex(true),
            "skylakex-nosmt" => skylakex(false),
            "alderlake" => hybrid(false),
            "meteorlake" => hybrid(true),
            "amdzen4" => amdzen4(),
            "neoverse-n2" => neoverse_n2(),
            "emeraldrapids-guest" => guest_without_pmu(emeraldrapids_host(), name),
            "amdzen4-guest" => guest_without_pmu(amdzen4(), name),
            _ => return None,
        };
        Some(machine)
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

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// `packages` x `cores` x `threads`, numbered package-major then core then thread.
fn topology(packages: u32, cores: u32, threads: u32) -> Vec<Cpu> {
    let mut cpus = Vec::new();
    for package in 0..packages {
        for core in 0..cores {
            for thread in 0..threads {
                let id = (package * cores + core) * threads + thread;
                cpus.push(Cpu { id, core, package, die: 0 });
            }
        }
    }
    cpus
}

/// The first CPU of each package.
fn per_package(cpus: &[Cpu]) -> Vec<u32> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for cpu in cpus {
        if !seen.contains(&cpu.package) {
            seen.push(cpu.package);
            out.push(cpu.id);
        }
    }
    out
}

/// The PMUs every Linux machine has (`kernel/events/core.c`, `kernel/trace`, hw_breakpoint):
/// fixed types 1, 2, 5 and the IDR's first dynamic numbers.
fn builtin_pmus() -> Vec<SimPmu> {
    let plain = |name: &str, type_: u32, formats: &[(&str, &str)]| SimPmu {
        name: name.into(),
        type_,
        class: PmuClass::Builtin,
        cpus: None,
        cpumask: None,
        formats: pairs(formats),
        events: Vec::new(),
        caps: Vec::new(),
        files: Vec::new(),
    };
    vec![
        plain("software", 1, &[]),
        plain("tracepoint", 2, &[]),
        plain("breakpoint", 5, &[]),
        plain("cpu_clock", 6, &[]),
        plain("task_clock", 7, &[]),
        plain("kprobe", 8, &[("retprobe", "config:0")]),
        plain("uprobe", 9, &[("retprobe", "config:0"), ("ref_ctr_offset", "config:32-63")]),
    ]
}

/// Types handed out by the IDR after the built-in ones, in registration order.
struct Types(u32);

impl Types {
    fn next(&mut self) -> u32 {
        self.0 += 1;
        self.0 - 1
    }
}

fn intel_generic_events(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut events = pairs(&[
        ("cpu-cycles", "event=0x3c"),
        ("cycles", "event=0x3c"),
        ("instructions", "event=0xc0"),
        ("cache-references", "event=0x2e,umask=0x4f"),
        ("cache-misses", "event=0x2e,umask=0x41"),
        ("branch-instructions", "event=0xc4"),
        ("branches", "event=0xc4"),
        ("branch-misses", "event=0xc5"),
        ("bus-cycles", "event=0x3c,umask=0x01"),
        ("ref-cycles", "event=0x00,umask=0x03"),
    ]);
    events.extend(pairs(extra));
    events
}

const TOPDOWN_L1: &[(&str, &str)] = &[
    ("slots", "event=0x00,umask=0x4"),
    ("topdown-retiring", "event=0x00,umask=0x80"),
    ("topdown-bad-spec", "event=0x00,umask=0x81"),
    ("topdown-fe-bound", "event=0x00,umask=0x82"),
    ("topdown-be-bound", "event=0x00,umask=0x83"),
];

const TOPDOWN_L2: &[(&str, &str)] = &[
    ("topdown-heavy-ops", "event=0x00,umask=0x84"),
    ("topdown-br-mispredict", "event=0x00,umask=0x85"),
    ("topdown-fetch-lat", "event=0x00,umask=0x86"),
    ("topdown-mem-bound", "event=0x00,umask=0x87"),
];

fn intel_formats(any: bool, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut formats = pairs(&[
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("pc", "config:19"),
        ("inv", "config:23"),
        ("cmask", "config:24-31"),
    ]);
    if any {
        formats.push(("any".into(), "config:21".into()));
    }
    formats.extend(pairs(extra));
    formats
}

fn intel_files() -> Vec<(String, String)> {
    pairs(&[("rdpmc", "1"), ("freeze_on_smi", "1")])
}

fn intel_caps(pmu_name: &str) -> Vec<(String, String)> {
    pairs(&[("max_precise", "3"), ("pmu_name", pmu_name), ("branches", "32")])
}

/// `msr` with the events msr.c enables on the model (bit n = config n).
fn msr_pmu(type_: u32, events: &[(&str, u64)]) -> SimPmu {
    let mut mask = 0;
    let mut files = Vec::new();
    for (name, config) in events {
        mask |= 1u64 << config;
        files.push((name.to_string(), format!("event=0x{config:02x}")));
    }
    SimPmu {
        name: "msr".into(),
        type_,
        class: PmuClass::Msr { events: mask },
        cpus: None,
        cpumask: None,
        formats: pairs(&[("event", "config:0-63")]),
        events: files,
        caps: Vec::new(),
        files: Vec::new(),
    }
}

/// `power` (RAPL): every event has the 2^-32 J scale and `Joules` unit.
fn power_pmu(type_: u32, cpumask: Vec<u32>, events: &[(&str, u64)]) -> SimPmu {
    let mut mask = 0;
    let mut files = Vec::new();
    for (name, config) in events {
        mask |= 1u64 << config;
        files.push((name.to_string(), format!("event=0x{config:02x}")));
        files.push((format!("{name}.scale"), "2.3283064365386962890625e-10".into()));
        files.push((format!("{name}.unit"), "Joules".into()));
    }
    SimPmu {
        name: "power".into(),
        type_,
        class: PmuClass::Power { events: mask },
        cpus: None,
        cpumask: Some(cpumask),
        formats: pairs(&[("event", "config:0-7")]),
        events: files,
        caps: Vec::new(),
        files: Vec::new(),
    }
}

/// `cstate_core` (cpumask: the first thread of each core) and `cstate_pkg` (first CPU of each
/// package) with the residency events intel/cstate.c enables on the model.
fn cstate_pmus(
    types: &mut Types,
    cpus: &[Cpu],
    core: &[(&str, u64)],
    pkg: &[(&str, u64)],
) -> Vec<SimPmu> {
    let mut first_threads = Vec::new();
    let mut seen = Vec::new();
    for cpu in cpus {
        if !seen.contains(&(cpu.package, cpu.core)) {
            seen.push((cpu.package, cpu.core));
            first_threads.push(cpu.id);
        }
    }
    let make = |name: &str, type_: u32, cpumask: Vec<u32>, events: &[(&str, u64)]| {
        let mut mask = 0;
        let mut files = Vec::new();
        for (event, config) in events {
            mask |= 1u64 << config;
            files.push((event.to_string(), format!("event=0x{config:02x}")));
        }
        SimPmu {
            name: name.into(),
            type_,
            class: PmuClass::Cstate { events: mask },
            cpus: None,
            cpumask: Some(cpumask),
            formats: pairs(&[("event", "config:0-63")]),
            events: files,
            caps: Vec::new(),
            files: Vec::new(),
        }
    };
    vec![
        make("cstate_core", types.next(), first_threads, core),
        make("cstate_pkg", types.next(), per_package(cpus), pkg),
    ]
}

/// A general-purpose uncore box with `counters` counters and no fixed one.
fn uncore_box(name: String, type_: u32, cpumask: Vec<u32>, formats: &[(&str, &str)]) -> SimPmu {
    uncore_pmu(UncoreSpec {
        name,
        type_,
        counters: 4,
        fixed: false,
        free_running: false,
        config_mask: u64::MAX,
        cpumask,
        formats,
        events: &[],
    })
}

const CLIENT_UNCORE_FORMATS: &[(&str, &str)] = &[
    ("event", "config:0-7"),
    ("umask", "config:8-15"),
    ("edge", "config:18"),
    ("inv", "config:23"),
    ("cmask", "config:24-28"),
];

/// Client uncore: `uncore_arb` (2 counters) and `uncore_clock` (one fixed counter, 0xff).
fn client_uncore(types: &mut Types, extra_arb: &[&str]) -> Vec<SimPmu> {
    let mut pmus = Vec::new();
    for name in std::iter::once("uncore_arb").chain(extra_arb.iter().copied()) {
        pmus.push(uncore_pmu(UncoreSpec {
            name: name.into(),
            type_: types.next(),
            counters: 2,
            fixed: false,
            free_running: false,
            config_mask: 0x1f8c_ffff,
            cpumask: vec![0],
            formats: CLIENT_UNCORE_FORMATS,
            events: &[],
        }));
    }
    pmus.push(uncore_pmu(UncoreSpec {
        name: "uncore_clock".into(),
        type_: types.next(),
        counters: 0,
        fixed: true,
        free_running: false,
        config_mask: 0xff,
        cpumask: vec![0],
        formats: &[("event", "config:0-7")],
        events: &[("clockticks", "event=0xff")],
    }));
    pmus
}

struct UncoreSpec<'a> {
    name: String,
    type_: u32,
    counters: u32,
    fixed: bool,
    free_running: bool,
    config_mask: u64,
    cpumask: Vec<u32>,
    formats: &'a [(&'a str, &'a str)],
    events: &'a [(&'a str, &'a str)],
}

fn uncore_pmu(spec: UncoreSpec<'_>) -> SimPmu {
    SimPmu {
        name: spec.name,
        type_: spec.type_,
        class: PmuClass::Uncore {
            counters: spec.counters,
            fixed: spec.fixed,
            free_running: spec.free_running,
            config_mask: spec.config_mask,
        },
        cpus: None,
        cpumask: Some(spec.cpumask),
        formats: pairs(spec.formats),
        events: pairs(spec.events),
        caps: Vec::new(),
        files: Vec::new(),
    }
}

const MIB_SCALE: &str = "6.103515625e-5";

/// Sapphire Rapids: 2 packages x 2 cores x 2 threads; `cpu` with 8 GP + 4 fixed + 8 topdown
/// metrics (`intel_pmu_init_glc`), `uncore_imc_0..1` per package.
fn sapphirerapids() -> Machine {
    let cpus = topology(2, 2, 2);
    let packages = per_package(&cpus);
    let mut types = Types(10);
    let mut pmus = builtin_pmus();
    let mut events = intel_generic_events(TOPDOWN_L1);
    events.extend(pairs(TOPDOWN_L2));
    events.extend(pairs(&[
        ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
        ("mem-stores", "event=0xcd,umask=0x2"),
        ("mem-loads-aux", "event=0x03,umask=0x82"),
    ]));
    pmus.push(SimPmu {
        name: "cpu".into(),
        type_: 4,
        class: PmuClass::X86Core(super::sched::glc_core(8, 4)),
        cpus: None,
        cpumask: None,
        formats: intel_formats(
            false,
            &[
                ("offcore_rsp", "config1:0-63"),
                ("ldlat", "config1:0-15"),
                ("frontend", "config1:0-23"),
            ],
        ),
        events,
        caps: intel_caps("sapphire_rapids"),
        files: intel_files(),
    });
    pmus.push(msr_pmu(types.next(), &[("tsc", 0), ("aperf", 1), ("mperf", 2), ("smi", 4)]));
    pmus.push(power_pmu(types.next(), packages.clone(), &[("energy-pkg", 2), ("energy-ram", 3)]));
    for box_ in 0..2 {
        pmus.push(uncore_pmu(UncoreSpec {
            name: format!("uncore_imc_{box_}"),
            type_: types.next(),
            counters: 4,
            fixed: true,
            free_running: false,
            config_mask: 0xffff_ffff_ff8c_ffff,
            cpumask: packages.clone(),
            formats: &[
                ("event", "config:0-7"),
                ("umask", "config:8-15,32-55"),
                ("edge", "config:18"),
                ("inv", "config:23"),
                ("thresh", "config:24-31"),
            ],
            events: &[
                ("clockticks", "event=0x01,umask=0x00"),
                ("cas_count_read", "event=0x05,umask=0xcf"),
                ("cas_count_read.scale", MIB_SCALE),
                ("cas_count_read.unit", "MiB"),
                ("cas_count_write", "event=0x05,umask=0xf0"),
                ("cas_count_write.scale", MIB_SCALE),
                ("cas_count_write.unit", "MiB"),
            ],
        }));
    }
    pmus.extend(cstate_pmus(
        &mut types,
        &cpus,
        &[("c1-residency", 0), ("c6-residency", 2)],
        &[("c2-residency", 0), ("c6-residency", 2)],
    ));
    // Discovery-table boxes with the formats of uncore_snbep.c (`spr_uncore_cha_formats_attr`,
    // `snr_uncore_iio_formats_attr`, `spr_uncore_raw_formats_attr`): two of each per package.
    let spr_cha: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15,32-63"),
        ("tid_en", "config:16"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("thresh", "config:24-31"),
        ("filter_tid", "config1:0-9"),
    ];
    let spr_iio: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("thresh", "config:24-35"),
        ("ch_mask", "config:36-47"),
        ("fc_mask", "config:48-50"),
    ];
    let spr_raw: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15,32-55"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("thresh", "config:24-31"),
    ];
    for (kind, formats) in [("cha", spr_cha), ("iio", spr_iio), ("m2m", spr_raw), ("upi", spr_raw)]
    {
        for box_ in 0..2 {
            pmus.push(uncore_box(
                format!("uncore_{kind}_{box_}"),
                types.next(),
                packages.clone(),
                formats,
            ));
        }
    }
    Machine {
        name: "sapphirerapids".into(),
        description: "Sapphire Rapids server, 2 packages x 2 cores x 2 threads".into(),
        catalogue_model: "sapphirerapids".into(),
        cpus,
        smt: true,
        id: CpuId::X86 {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0x8f,
            stepping: 8,
            model_name: "Intel(R) Xeon(R) Platinum 8480+ (simulated) @ 2.00GHz".into(),
        },
        pmus,
        nmi_watchdog: true,
        paranoid: 2,
        hz: 250,
        mux_interval_ms: 4,
        retire_latency: false,
    }
}

/// Ice Lake client (model 0x7E, the catalogue's `icelake`): 4 cores x 2 threads; `cpu` with
/// 8 GP + 4 fixed + 4 topdown metrics; `uncore_arb` and `uncore_clock`.
fn icelake() -> Machine {
    let cpus = topology(1, 4, 2);
    let mut types = Types(10);
    let mut pmus = builtin_pmus();
    let mut events = intel_generic_events(TOPDOWN_L1);
    events.extend(pairs(&[
        ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
        ("mem-stores", "event=0xd0,umask=0x82"),
    ]));
    pmus.push(SimPmu {
        name: "cpu".into(),
        type_: 4,
        class: PmuClass::X86Core(super::sched::icl_core(8, 4)),
        cpus: None,
        cpumask: None,
        formats: intel_formats(
            false,
            &[
                ("offcore_rsp", "config1:0-63"),
                ("ldlat", "config1:0-15"),
                ("frontend", "config1:0-23"),
            ],
        ),
        events,
        caps: intel_caps("icelake"),
        files: intel_files(),
    });
    pmus.push(msr_pmu(
        types.next(),
        &[("tsc", 0), ("aperf", 1), ("mperf", 2), ("pperf", 3), ("smi", 4)],
    ));
    pmus.push(power_pmu(
        types.next(),
        vec![0],
        &[("energy-cores", 1), ("energy-pkg", 2), ("energy-gpu", 4), ("energy-psys", 5)],
    ));
    pmus.extend(client_uncore(&mut types, &[]));
    pmus.extend(cstate_pmus(
        &mut types,
        &cpus,
        &[("c6-residency", 2), ("c7-residency", 3)],
        &[
            ("c2-residency", 0),
            ("c3-residency", 1),
            ("c6-residency", 2),
            ("c7-residency", 3),
            ("c8-residency", 4),
            ("c9-residency", 5),
            ("c10-residency", 6),
        ],
    ));
    Machine {
        name: "icelake".into(),
        description: "Ice Lake client (model 0x7E), 4 cores x 2 threads".into(),
        catalogue_model: "icelake".into(),
        cpus,
        smt: true,
        id: CpuId::X86 {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0x7e,
            stepping: 5,
            model_name: "Intel(R) Core(TM) i7-1065G7 CPU (simulated) @ 2.00GHz".into(),
        },
        pmus,
        nmi_watchdog: true,
        paranoid: 2,
        hz: 250,
        mux_interval_ms: 4,
        retire_latency: false,
    }
}

/// Skylake server: 4 cores, with SMT (4 GP counters per thread, as CPUID.0AH reports when
/// SMT is enabled in firmware) or without (4 CPUs, 8 GP counters). 3 fixed counters.
fn skylakex(smt: bool) -> Machine {
    let threads = if smt { 2 } else { 1 };
    let cpus = topology(1, 4, threads);
    let mut types = Types(10);
    let mut pmus = builtin_pmus();
    // `snb_events_attrs`/`hsw_events_attrs` with the SMT-dependent strings.
    let (slots, slots_scale, recovery, recovery_scale) = if smt {
        ("event=0x3c,umask=0x0,any=1", "2", "event=0xd,umask=0x1,cmask=1,any=1", "2")
    } else {
        ("event=0x3c,umask=0x0", "4", "event=0xd,umask=0x1,cmask=1", "4")
    };
    let events = intel_generic_events(&[
        ("topdown-total-slots", slots),
        ("topdown-total-slots.scale", slots_scale),
        ("topdown-slots-issued", "event=0xe,umask=0x1"),
        ("topdown-slots-retired", "event=0xc2,umask=0x2"),
        ("topdown-fetch-bubbles", "event=0x9c,umask=0x1"),
        ("topdown-recovery-bubbles", recovery),
        ("topdown-recovery-bubbles.scale", recovery_scale),
        ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
        ("mem-stores", "event=0xd0,umask=0x82"),
    ]);
    pmus.push(SimPmu {
        name: "cpu".into(),
        type_: 4,
        class: PmuClass::X86Core(super::sched::skl_core(if smt { 4 } else { 8 }, 3)),
        cpus: None,
        cpumask: None,
        formats: intel_formats(
            true,
            &[
                ("in_tx", "config:32"),
                ("in_tx_cp", "config:33"),
                ("offcore_rsp", "config1:0-63"),
                ("ldlat", "config1:0-15"),
                ("frontend", "config1:0-23"),
            ],
        ),
        events,
        caps: intel_caps("skylake"),
        files: intel_files(),
    });
    pmus.push(msr_pmu(
        types.next(),
        &[("tsc", 0), ("aperf", 1), ("mperf", 2), ("pperf", 3), ("smi", 4)],
    ));
    pmus.push(power_pmu(types.next(), vec![0], &[("energy-pkg", 2), ("energy-ram", 3)]));
    for box_ in 0..2 {
        pmus.push(uncore_pmu(UncoreSpec {
            name: format!("uncore_imc_{box_}"),
            type_: types.next(),
            counters: 4,
            fixed: true,
            free_running: false,
            config_mask: 0xff8c_ffff,
            cpumask: vec![0],
            formats: &[
                ("event", "config:0-7"),
                ("umask", "config:8-15"),
                ("edge", "config:18"),
                ("inv", "config:23"),
                ("thresh", "config:24-31"),
            ],
            events: &[
                ("clockticks", "event=0x00,umask=0x00"),
                ("cas_count_read", "event=0x04,umask=0x03"),
                ("cas_count_read.scale", MIB_SCALE),
                ("cas_count_read.unit", "MiB"),
                ("cas_count_write", "event=0x04,umask=0x0c"),
                ("cas_count_write.scale", MIB_SCALE),
                ("cas_count_write.unit", "MiB"),
            ],
        }));
    }
    pmus.extend(cstate_pmus(
        &mut types,
        &cpus,
        &[("c3-residency", 1), ("c6-residency", 2), ("c7-residency", 3)],
        &[("c2-residency", 0), ("c3-residency", 1), ("c6-residency", 2), ("c7-residency", 3)],
    ));
    let skx_cha: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("tid_en", "config:19"),
        ("inv", "config:23"),
        ("thresh", "config:24-31"),
        ("filter_tid", "config1:0-8"),
        ("filter_state", "config1:17-26"),
        ("filter_rem", "config1:32"),
        ("filter_loc", "config1:33"),
        ("filter_all_op", "config1:35"),
        ("filter_nm", "config1:36"),
        ("filter_not_nm", "config1:37"),
        ("filter_opc0", "config1:41-50"),
        ("filter_opc1", "config1:51-60"),
        ("filter_nc", "config1:62"),
        ("filter_isoc", "config1:63"),
    ];
    let skx_iio: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("thresh", "config:24-35"),
        ("ch_mask", "config:36-43"),
        ("fc_mask", "config:44-46"),
    ];
    let skx_plain: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("thresh", "config:24-31"),
    ];
    let skx_upi: &[(&str, &str)] = &[
        ("event", "config:0-7"),
        ("umask", "config:8-15,32-43,45-55"),
        ("edge", "config:18"),
        ("inv", "config:23"),
        ("thresh", "config:24-31"),
    ];
    for (kind, formats) in
        [("cha", skx_cha), ("iio", skx_iio), ("m2m", skx_plain), ("upi", skx_upi)]
    {
        for box_ in 0..2 {
            pmus.push(uncore_box(format!("uncore_{kind}_{box_}"), types.next(), vec![0], formats));
        }
    }
    Machine {
        name: if smt { "skylakex".into() } else { "skylakex-nosmt".into() },
        description: if smt {
            "Skylake server, 4 cores x 2 threads, SMT on: 4 GP counters per thread".into()
        } else {
            "Skylake server, 4 cores, SMT off in firmware: 8 GP counters per CPU".into()
        },
        catalogue_model: "skylakex".into(),
        cpus,
        smt,
        id: CpuId::X86 {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0x55,
            stepping: 4,
            model_name: "Intel(R) Xeon(R) Gold 6154 CPU (simulated) @ 2.00GHz".into(),
        },
        pmus,
        nmi_watchdog: true,
        paranoid: 2,
        hz: 250,
        mux_interval_ms: 4,
        retire_latency: false,
    }
}

/// Alder Lake (model 0x97) or Meteor Lake (0xAA): `cpu_core` on CPUs 0-3 (2 P-cores x 2
/// threads), `cpu_atom` on CPUs 4-7 (4 E-cores). ADL atom has 6 GP counters, MTL atom 8
/// (CPUID leaf 0x23; the MTL JSON lists counters 0-7).
fn hybrid(meteor: bool) -> Machine {
    let mut cpus = topology(1, 2, 2);
    for i in 0..4 {
        cpus.push(Cpu { id: 4 + i, core: 8 + i, package: 0, die: 0 });
    }
    let mut types = Types(10);
    let mut pmus = builtin_pmus();
    let pmu_name = if meteor { "meteorlake_hybrid" } else { "alderlake_hybrid" };
    let mut core_events = intel_generic_events(TOPDOWN_L1);
    core_events.extend(pairs(TOPDOWN_L2));
    core_events.extend(pairs(&[
        ("mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
        ("mem-stores", "event=0xcd,umask=0x2"),
        ("mem-loads-aux", "event=0x03,umask=0x82"),
    ]));
    pmus.push(SimPmu {
        name: "cpu_core".into(),
        type_: 4,
        class: PmuClass::X86Core(super::sched::glc_core(8, 4)),
        cpus: Some(vec![0, 1, 2, 3]),
        cpumask: None,
        formats: intel_formats(
            false,
            &[
                ("offcore_rsp", "config1:0-63"),
                ("ldlat", "config1:0-15"),
                ("frontend", "config1:0-23"),
            ],
        ),
        events: core_events,
        caps: intel_caps(pmu_name),
        files: intel_files(),
    });
    let atom_events = intel_generic_events(&[
        ("topdown-retiring", "event=0xc2,umask=0x0"),
        ("topdown-bad-spec", "event=0x73,umask=0x0"),
        ("topdown-fe-bound", "event=0x71,umask=0x0"),
        ("topdown-be-bound", "event=0x74,umask=0x0"),
        ("mem-loads", "event=0xd0,umask=0x5,ldlat=3"),
        ("mem-stores", "event=0xd0,umask=0x6"),
    ]);
    let mut atom_formats: Vec<(&str, &str)> =
        vec![("offcore_rsp", "config1:0-63"), ("ldlat", "config1:0-15")];
    if meteor {
        atom_formats.push(("snoop_rsp", "config1:0-63"));
    }
    pmus.push(SimPmu {
        name: "cpu_atom".into(),
        type_: types.next(),
        class: PmuClass::X86Core(super::sched::grt_core(
            if meteor { 8 } else { 6 },
            3,
            if meteor { 6 } else { 5 },
        )),
        cpus: Some(vec![4, 5, 6, 7]),
        cpumask: None,
        formats: intel_formats(false, &atom_formats),
        events: atom_events,
        caps: intel_caps(pmu_name),
        files: intel_files(),
    });
    pmus.push(msr_pmu(
        types.next(),
        &[("tsc", 0), ("aperf", 1), ("mperf", 2), ("pperf", 3), ("smi", 4)],
    ));
    pmus.push(power_pmu(
        types.next(),
        vec![0],
        &[("energy-cores", 1), ("energy-pkg", 2), ("energy-gpu", 4), ("energy-psys", 5)],
    ));
    for box_ in 0..2 {
        pmus.push(uncore_pmu(UncoreSpec {
            name: format!("uncore_imc_free_running_{box_}"),
            type_: types.next(),
            counters: 0,
            fixed: false,
            free_running: true,
            config_mask: 0xffff,
            cpumask: vec![0],
            formats: &[("event", "config:0-7"), ("umask", "config:8-15")],
            events: &[
                ("data_total", "event=0xff,umask=0x10"),
                ("data_total.scale", MIB_SCALE),
                ("data_total.unit", "MiB"),
                ("data_read", "event=0xff,umask=0x20"),
                ("data_read.scale", MIB_SCALE),
                ("data_read.unit", "MiB"),
                ("data_write", "event=0xff,umask=0x30"),
                ("data_write.scale", MIB_SCALE),
                ("data_write.unit", "MiB"),
            ],
        }));
    }
    if !meteor {
        for box_ in 0..2 {
            pmus.push(uncore_pmu(UncoreSpec {
                name: format!("uncore_imc_{box_}"),
                type_: types.next(),
                counters: 5,
                fixed: false,
                free_running: false,
                config_mask: 0x4_0fff,
                cpumask: vec![0],
                formats: &[
                    ("event", "config:0-7"),
                    ("chmask", "config:8-11"),
                    ("edge", "config:18"),
                ],
                events: &[],
            }));
        }
    }
    pmus.extend(client_uncore(&mut types, if meteor { &["uncore_hac_arb"] } else { &[] }));
    pmus.extend(cstate_pmus(
        &mut types,
        &cpus,
        &[("c1-residency", 0), ("c6-residency", 2), ("c7-residency", 3)],
        &[
            ("c2-residency", 0),
            ("c3-residency", 1),
            ("c6-residency", 2),
            ("c8-residency", 4),
            ("c10-residency", 6),
        ],
    ));
    let (name, model, stepping, model_name, description) = if meteor {
        (
            "meteorlake",
            0xaa,
            4,
            "Intel(R) Core(TM) Ultra 7 155H (simulated) @ 2.00GHz",
            "Meteor Lake hybrid: cpu_core on CPUs 0-3, cpu_atom (8 GP) on CPUs 4-7",
        )
    } else {
        (
            "alderlake",
            0x97,
            2,
            "12th Gen Intel(R) Core(TM) i9-12900K (simulated) @ 2.00GHz",
            "Alder Lake hybrid: cpu_core on CPUs 0-3, cpu_atom (6 GP) on CPUs 4-7",
        )
    };
    Machine {
        name: name.into(),
        description: description.into(),
        catalogue_model: name.into(),
        cpus,
        smt: true,
        id: CpuId::X86 {
            vendor: "GenuineIntel".into(),
            family: 6,
            model,
            stepping,
            model_name: model_name.into(),
        },
        pmus,
        nmi_watchdog: true,
        paranoid: 2,
        hz: 250,
        mux_interval_ms: 4,
        retire_latency: meteor,
    }
}

/// AMD Zen 4 (family 0x19 model 0x11): 4 cores x 2 threads in one CCX; `cpu` with 6 GP and
/// no fixed counters; `amd_l3`, `amd_df`, `amd_umc_0`.
fn amdzen4() -> Machine {
    let cpus = topology(1, 4, 2);
    let mut types = Types(10);
    let mut pmus = builtin_pmus();
    pmus.push(SimPmu {
        name: "cpu".into(),
        type_: 4,
        class: PmuClass::X86Core(super::sched::amd_core(CoreKind::Zen4, 6)),
        cpus: None,
        cpumask: None,
        formats: pairs(&[
            ("event", "config:0-7,32-35"),
            ("umask", "config:8-15"),
            ("edge", "config:18"),
            ("inv", "config:23"),
            ("cmask", "config:24-31"),
        ]),
        events: pairs(&[
            ("cpu-cycles", "event=0x76"),
            ("cycles", "event=0x76"),
            ("instructions", "event=0xc0"),
            ("cache-references", "event=0x60,umask=0xff"),
            ("cache-misses", "event=0x64,umask=0x09"),
            ("branch-instructions", "event=0xc2"),
            ("branches", "event=0xc2"),
            ("branch-misses", "event=0xc3"),
            ("stalled-cycles-frontend", "event=0xa9"),
            ("ref-cycles", "event=0x120,umask=0x01"),
        ]),
        caps: pairs(&[("max_precise", "0"), ("branches", "16")]),
        files: pairs(&[("rdpmc", "1")]),
    });
    pmus.push(msr_pmu(types.next(), &[("tsc", 0), ("aperf", 1), ("mperf", 2), ("irperf", 6)]));
    pmus.push(power_pmu(types.next(), vec![0], &[("energy-pkg", 2)]));
    pmus.push(uncore_pmu(UncoreSpec {
        name: "amd_l3".into(),
        type_: types.next(),
        counters: 6,
        fixed: false,
        free_running: false,
        config_mask: 0x0307_fc00_0000_ffff,
        cpumask: vec![0],
        formats: &[
            ("event", "config:0-7"),
            ("umask", "config:8-15"),
            ("coreid", "config:42-44"),
            ("enallslices", "config:46"),
            ("enallcores", "config:47"),
            ("sliceid", "config:48-50"),
            ("threadmask", "config:56-57"),
        ],
        events: &[],
    }));
    pmus.push(uncore_pmu(UncoreSpec {
        name: "amd_df".into(),
        type_: types.next(),
        counters: 4,
        fixed: false,
        free_running: false,
        config_mask: 0x3f_0f00_ffff,
        cpumask: vec![0],
        formats: &[("event", "config:0-7,32-37"), ("umask", "config:8-15,24-27")],
        events: &[],
    }));
    pmus.push(uncore_pmu(UncoreSpec {
        name: "amd_umc_0".into(),
        type_: types.next(),
        counters: 4,
        fixed: false,
        free_running: false,
        config_mask: 0x3ff,
        cpumask: vec![0],
        formats: &[("event", "config:0-7"), ("rdwrmask", "config:8-9")],
        events: &[],
    }));
    Machine {
        name: "amdzen4".into(),
        description: "AMD Zen 4 (family 25 model 0x11), 4 cores x 2 threads, one CCX".into(),
        catalogue_model: "amdzen4".into(),
        cpus,
        smt: true,
        id: CpuId::X86 {
            vendor: "AuthenticAMD".into(),
            family: 25,
            model: 0x11,
            stepping: 1,
            model_name: "AMD EPYC 9654 96-Core Processor (simulated)".into(),
        },
        pmus,
        nmi_watchdog: true,
        paranoid: 2,
        hz: 250,
        mux_interval_ms: 4,
        retire_latency: false,
    }
}

/// Arm Neoverse N2 (MIDR part 0xd49, r0p3): 8 CPUs without SMT; `armv8_pmuv3_0` (ACPI name)
/// with 6 programmable counters and the cycle counter; `caps/slots` 5.
fn neoverse_n2() -> Machine {
    let cpus = topology(1, 8, 1);
    let mut pmus = builtin_pmus();
    let events: &[(&str, u64)] = &[
        ("sw_incr", 0x00),
        ("l1i_cache_refill", 0x01),
        ("l1i_tlb_refill", 0x02),
        ("l1d_cache_refill", 0x03),
        ("l1d_cache", 0x04),
        ("l1d_tlb_refill", 0x05),
        ("inst_retired", 0x08),
        ("exc_taken", 0x09),
        ("br_mis_pred", 0x10),
        ("cpu_cycles", 0x11),
        ("br_pred", 0x12),
        ("mem_access", 0x13),
        ("l1i_cache", 0x14),
        ("l2d_cache", 0x16),
        ("l2d_cache_refill", 0x17),
        ("inst_spec", 0x1b),
        ("bus_cycles", 0x1d),
        ("br_retired", 0x21),
        ("br_mis_pred_retired", 0x22),
        ("stall_frontend", 0x23),
        ("stall_backend", 0x24),
        ("l1d_tlb", 0x25),
        ("l1i_tlb", 0x26),
        ("l2d_tlb_refill", 0x2d),
        ("l2d_tlb", 0x2f),
        ("ll_cache_rd", 0x36),
        ("ll_cache_miss_rd", 0x37),
        ("dtlb_walk", 0x34),
        ("itlb_walk", 0x35),
        ("op_retired", 0x3a),
        ("op_spec", 0x3b),
        ("stall", 0x3c),
        ("stall_slot_backend", 0x3d),
        ("stall_slot_frontend", 0x3e),
        ("stall_slot", 0x3f),
    ];
    let files = events.iter().map(|(n, c)| (n.to_string(), format!("event=0x{c:04x}"))).collect();
    pmus.push(SimPmu {
        name: "armv8_pmuv3_0".into(),
        type_: 10,
        class: PmuClass::Arm(ArmCore {
            kind: CoreKind::NeoverseN2,
            gp: 6,
            // `armv8_pmuv3_perf_map`: cycles, instructions, cache refs/misses (L1D),
            // branches (BR_RETIRED), branch-misses, bus-cycles, stalled-frontend/backend.
            generic: [
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
            ],
            width: 5,
        }),
        cpus: Some((0..8).collect()),
        cpumask: None,
        formats: pairs(&[
            ("event", "config:0-15"),
            ("long", "config1:0"),
            ("rdpmc", "config1:1"),
            ("threshold_count", "config1:2"),
            ("threshold_compare", "config1:3-4"),
            ("threshold", "config1:5-16"),
        ]),
        events: files,
        caps: pairs(&[
            ("slots", "0x00000005"),
            ("bus_slots", "0x00000000"),
            ("bus_width", "0x00000000"),
            ("threshold_max", "0x00000000"),
        ]),
        files: Vec::new(),
    });
    Machine {
        name: "neoverse-n2".into(),
        description: "Arm Neoverse N2 r0p3 (MIDR 0x410fd493), 8 CPUs, armv8_pmuv3_0".into(),
        catalogue_model: "arm/neoverse-n2-v2".into(),
        cpus,
        smt: false,
        // r0p3: the N2 metrics' erratum branch (`STALL_SLOT - CPU_CYCLES`, chosen with
        // strcmp_cpuid_str) then takes the plain counts whichever way it is read.
        id: CpuId::Midr(0x4100_0000 | 0xf << 16 | 0xd49 << 4 | 3),
        pmus,
        // The perf hardlockup detector needs pseudo-NMIs, off by default on arm64 kernels;
        // when switched on here it holds the cycle counter (unsure on real systems).
        nmi_watchdog: false,
        paranoid: 2,
        hz: 250,
        mux_interval_ms: 4,
        retire_latency: false,
    }
}

/// An Emerald Rapids host: Sapphire Rapids' PMUs and topology with Emerald Rapids' cpuid
/// (family 6, model 0xCF), which perf's mapfile maps to x86/emeraldrapids. Only its guest is
/// a named machine.
fn emeraldrapids_host() -> Machine {
    Machine {
        name: "emeraldrapids".into(),
        description: "Emerald Rapids server, 2 packages x 2 cores x 2 threads".into(),
        catalogue_model: "emeraldrapids".into(),
        id: CpuId::X86 {
            vendor: "GenuineIntel".into(),
            family: 6,
            model: 0xcf,
            stepping: 2,
            model_name: "INTEL(R) XEON(R) PLATINUM 8592+ (simulated)".into(),
        },
        ..sapphirerapids()
    }
}

/// `host` seen from a guest whose hypervisor exposes no virtual PMU: the same CPUs and
/// cpuid, only the PMUs the guest kernel registers without PMU hardware (`software`,
/// `tracepoint`, `breakpoint`, the clocks, probes and `msr`, whose TSC is readable in a guest
/// as on this machine), no NMI watchdog (it needs the core PMU), and `hypervisor` in cpuinfo.
fn guest_without_pmu(host: Machine, name: &str) -> Machine {
    let pmus = host
        .pmus
        .into_iter()
        .filter(|p| matches!(p.class, PmuClass::Builtin | PmuClass::Msr { .. }))
        .collect();
    Machine {
        name: name.into(),
        description: format!("{}, in a guest without a virtual PMU", host.description),
        pmus,
        nmi_watchdog: false,
        ..host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each machine file describes the machine the Rust code built, field for field.
    #[test]
    fn every_file_is_the_machine_the_code_built() {
        for (name, text) in MACHINE_FILES {
            let from_file = Machine::parse(text, name).unwrap_or_else(|e| panic!("{e}"));
            let from_code = Machine::named(name).unwrap();
            assert_eq!(from_file.pmus.len(), from_code.pmus.len(), "{name}");
            for (a, b) in from_file.pmus.iter().zip(&from_code.pmus) {
                assert_eq!(a, b, "{name}");
            }
            assert_eq!(from_file, from_code, "{name}");
        }
    }
}
