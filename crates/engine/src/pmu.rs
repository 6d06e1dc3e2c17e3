//! PMU models: how many counters each PMU of a machine has, which counters an event may use,
//! and the kernel's placement rules (fixed-only events, topdown metric events, the NMI watchdog,
//! SMT halving, hybrid CPU lists, Arm's cycle counter), from sysfs and the catalogue.
//!
//! The scheduler reads only this module's types, so the same plan comes out whether the
//! machine is live, simulated or named with `--model`.

use std::fmt;

use tmetric_catalog::Model;
use tmetric_runtime::Sysfs;

/// The vendor rules a PMU follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// Intel core PMUs: fixed counters, PERF_METRICS on Ice Lake and later.
    Intel,
    /// AMD core PMUs: general counters only.
    Amd,
    /// Arm PMUv3: general counters plus the cycle counter.
    Arm,
    /// Anything else (uncore boxes, POWER, s390, RISC-V): general counters only.
    Other,
}

/// Where a PMU's counter numbers came from; printed by `tmetric plan` so the user can judge them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CountSource {
    /// The vendor's `counter.json` for this model.
    CounterJson,
    /// The PMU's sysfs `caps/` files.
    SysfsCaps,
    /// A documented per-vendor default (the text says which).
    VendorDefault(String),
}

impl fmt::Display for CountSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CountSource::CounterJson => f.write_str("counter.json"),
            CountSource::SysfsCaps => f.write_str("sysfs caps/"),
            CountSource::VendorDefault(why) => write!(f, "vendor default ({why})"),
        }
    }
}

/// One PMU as the scheduler sees it: the counters it has to share and the rules that place
/// events on them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PmuCounters {
    /// The sysfs name (`cpu`, `cpu_core`, `armv8_pmuv3_0`, `uncore_imc_0`), or the catalogue's
    /// name for it when there is no sysfs tree (`default_core`).
    pub name: String,
    /// Whether this is a core PMU (the one `cycles` and the model's JSON events belong to).
    pub core: bool,
    /// Vendor rules.
    pub vendor: Vendor,
    /// General-purpose counters available to tmetric (the watchdog's already taken off).
    pub general: u8,
    /// Fixed counters that exist (Intel: 0 instructions, 1 cycles, 2 ref-tsc, 3 slots).
    pub fixed: u8,
    /// Fixed counters the NMI watchdog holds, as a bit mask.
    pub fixed_reserved: u8,
    /// PERF_METRICS fields readable through topdown metric events (0, 4 or 8).
    pub metric_events: u8,
    /// Arm's dedicated cycle counter exists (and is not held by the watchdog).
    pub cycle_counter: bool,
    /// The CPUs this PMU counts on (hybrid `cpus`, uncore `cpumask`); `None` means all.
    pub cpus: Option<Vec<u32>>,
    /// Where the counter numbers came from.
    pub source: CountSource,
    /// Why the numbers differ from the raw ones (SMT halving, watchdog).
    pub adjustments: Vec<Adjustment>,
}

impl PmuCounters {
    /// Counters usable at once, fixed ones included.
    pub fn capacity(&self) -> usize {
        self.general as usize
            + (0..self.fixed).filter(|f| self.fixed_reserved & (1 << f) == 0).count()
            + usize::from(self.cycle_counter)
    }
}

/// What the machine's PMUs are and the facts that change their capacity.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PmuModel {
    /// Core PMUs first, then the rest.
    pub pmus: Vec<PmuCounters>,
    /// `/proc/sys/kernel/nmi_watchdog` is 1.
    pub nmi_watchdog: bool,
    /// SMT is on.
    pub smt_on: bool,
}

/// Facts about the machine that are not in the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineFacts {
    /// The NMI watchdog holds a counter.
    pub nmi_watchdog: bool,
    /// SMT is on.
    pub smt_on: bool,
}

impl Default for MachineFacts {
    /// What a server usually runs with: the watchdog off is the tuned setting, but Debian and
    /// most distributions ship it on, and SMT is on.
    fn default() -> MachineFacts {
        MachineFacts { nmi_watchdog: true, smt_on: true }
    }
}

/// Skylake-family server and client models whose general counters halve with SMT on (4 of 8):
/// CPUID.0AH reports 4 per thread when Hyper-Threading is enabled in firmware.
const SMT_HALVING: &[&str] = &[
    "sandybridge",
    "ivybridge",
    "haswell",
    "broadwell",
    "skylake",
    "skylakex",
    "cascadelakex",
    "jaketown",
    "ivytown",
    "haswellx",
    "broadwellx",
    "broadwellde",
];

/// Models whose PERF_METRICS has the 8 level-1 and level-2 fields.
const METRICS_8: &[&str] = &[
    "sapphirerapids",
    "emeraldrapids",
    "graniterapids",
    "alderlake",
    "meteorlake",
    "lunarlake",
    "arrowlake",
];
/// Models whose PERF_METRICS has the 4 level-1 fields.
const METRICS_4: &[&str] = &["icelake", "icelakex", "tigerlake", "rocketlake"];
/// Hybrid models: `cpu_core` plus `cpu_atom`.
const HYBRID: &[&str] = &["alderlake", "alderlaken", "meteorlake", "lunarlake", "arrowlake"];

fn vendor_of(model: &Model) -> Vendor {
    match model.arch {
        "x86" if model.name.starts_with("amd") => Vendor::Amd,
        "x86" => Vendor::Intel,
        "arm64" => Vendor::Arm,
        _ => Vendor::Other,
    }
}

/// The core PMU's raw numbers for `model` when it has no `counter.json` row: documented
/// per-vendor defaults (each named with its source in arch/x86/events and drivers/perf).
fn default_core_counts(model: &Model, pmu: &str) -> (u8, u8, String) {
    match (vendor_of(model), pmu) {
        (Vendor::Amd, _) => (6, 0, "AMD Zen: 6 general counters, no fixed".into()),
        (Vendor::Arm, _) => {
            (6, 0, "Arm PMUv3: PMCR_EL0.N is typically 6, plus the cycle counter".into())
        }
        (Vendor::Intel, "cpu_atom") if model.name == "alderlake" || model.name == "alderlaken" => {
            (6, 3, "Gracemont cpu_atom: 6 general, 3 fixed".into())
        }
        (Vendor::Intel, "cpu_atom") => {
            (8, 3, "Crestmont and later cpu_atom: 8 general, 3 fixed".into())
        }
        (Vendor::Intel, _) if model.name == "lunarlake" || model.name == "arrowlake" => {
            (10, 4, "Lion Cove cpu_core: 10 general, 4 fixed".into())
        }
        (Vendor::Intel, _)
            if METRICS_4.contains(&model.name) || METRICS_8.contains(&model.name) =>
        {
            (8, 4, "Ice Lake and later: 8 general, 4 fixed".into())
        }
        (Vendor::Intel, _) => (4, 3, "Intel before Ice Lake: 4 general with SMT, 3 fixed".into()),
        (Vendor::Other, _) => (6, 0, "no vendor data: assuming 6 general counters".into()),
    }
}

/// The model's `counter.json` numbers for a unit (`core`, or an uncore unit such as `imc`),
/// if it has them. The catalogue names units by PMU (`default_core`, `uncore_imc`).
pub(crate) fn counter_json(model: &Model, unit: &str) -> Option<(u8, u8)> {
    model
        .counters
        .iter()
        .find(|c| {
            let pmu = model.str(c.pmu);
            if unit == "core" {
                is_core_name(pmu)
            } else {
                pmu.strip_prefix("uncore_").unwrap_or(pmu).eq_ignore_ascii_case(unit)
            }
        })
        .map(|c| (c.generic, c.fixed))
}

/// The core PMU names a model's events use (`default_core`, or `cpu_core` and `cpu_atom`).
pub fn model_core_pmus(model: &Model) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for e in model.events.iter() {
        let pmu = model.str(e.pmu);
        if is_core_name(pmu) && !names.iter().any(|n| n == pmu) {
            names.push(pmu.to_string());
        }
    }
    if names.is_empty() {
        names.push(if HYBRID.contains(&model.name) { "cpu_core" } else { "default_core" }.into());
    }
    names.sort_by_key(|n| (n != "cpu_core" && n != "default_core", n.clone()));
    names
}

/// Whether a PMU name (catalogue or sysfs) is a CPU's core PMU.
pub fn is_core_name(pmu: &str) -> bool {
    matches!(pmu, "cpu" | "default_core" | "cpu_core" | "cpu_atom")
        || pmu.starts_with("armv8")
        || pmu.starts_with("armv9")
}

impl PmuModel {
    /// The core PMUs a catalogue model describes, for planning without the machine
    /// (`tmetric plan --model M`): counters from `counter.json` or the vendor defaults.
    pub fn for_model(model: &Model, facts: MachineFacts) -> PmuModel {
        let vendor = vendor_of(model);
        let mut pmus = Vec::new();
        for name in model_core_pmus(model) {
            let (general, fixed, source) = match counter_json(model, "core") {
                Some((g, f)) if name != "cpu_atom" => (g, f, CountSource::CounterJson),
                _ => {
                    let (g, f, why) = default_core_counts(model, &name);
                    (g, f, CountSource::VendorDefault(why))
                }
            };
            let metric_events = if name == "cpu_atom" {
                0
            } else if METRICS_8.contains(&model.name) {
                8
            } else if METRICS_4.contains(&model.name) {
                4
            } else {
                0
            };
            let pmu = PmuCounters {
                name,
                core: true,
                vendor,
                general,
                fixed,
                fixed_reserved: 0,
                metric_events,
                cycle_counter: vendor == Vendor::Arm,
                cpus: None,
                source,
                adjustments: Vec::new(),
            };
            pmus.push(adjust(pmu, model.name, facts));
        }
        PmuModel { pmus, nmi_watchdog: facts.nmi_watchdog, smt_on: facts.smt_on }
    }

    /// The live (or simulated) machine: PMUs from sysfs, counter numbers from `counter.json`,
    /// sysfs `caps/`, or vendor defaults, with the watchdog and SMT state `facts` (probed by
    /// [`crate::Host::probe`]).
    pub fn from_sysfs(sysfs: &Sysfs, facts: MachineFacts, model: Option<&Model>) -> PmuModel {
        let mut pmus = Vec::new();
        for name in sysfs.pmu_names() {
            let dir = sysfs.pmu_devices().join(&name);
            let read = |file: &str| tmetric_runtime::input::read_sysfs(dir.join(file)).ok();
            let core = is_core_name(&name);
            let cpus = sysfs.pmu_cpus(&name);
            if core {
                let vendor = match model {
                    Some(m) => vendor_of(m),
                    None if name.starts_with("arm") => Vendor::Arm,
                    None => Vendor::Intel,
                };
                let from_caps = read("caps/num_counters")
                    .and_then(|t| tmetric_runtime::sysfs::parse_number(t.trim()))
                    .map(|g| {
                        (
                            g as u8,
                            read("caps/num_fixed")
                                .and_then(|t| tmetric_runtime::sysfs::parse_number(t.trim()))
                                .unwrap_or(0) as u8,
                        )
                    });
                let (general, fixed, source) = match (from_caps, model) {
                    (Some((g, f)), _) => (g, f, CountSource::SysfsCaps),
                    (None, Some(m)) => match counter_json(m, "core") {
                        Some((g, f)) if name != "cpu_atom" => (g, f, CountSource::CounterJson),
                        _ => {
                            let (g, f, why) = default_core_counts(m, &name);
                            (g, f, CountSource::VendorDefault(why))
                        }
                    },
                    (None, None) => (
                        4,
                        if vendor == Vendor::Intel { 3 } else { 0 },
                        CountSource::VendorDefault(
                            "unknown model: assuming 4 general counters".into(),
                        ),
                    ),
                };
                let events = dir.join("events");
                let metric_events = if name == "cpu_atom" || !events.join("slots").exists() {
                    0
                } else if events.join("topdown-heavy-ops").exists() {
                    8
                } else if events.join("topdown-retiring").exists() {
                    4
                } else {
                    0
                };
                let pmu = PmuCounters {
                    name: name.clone(),
                    core: true,
                    vendor,
                    general,
                    fixed: if metric_events > 0 { fixed.max(4) } else { fixed },
                    fixed_reserved: 0,
                    metric_events,
                    cycle_counter: vendor == Vendor::Arm,
                    cpus: if name == "cpu" { None } else { cpus },
                    source,
                    adjustments: Vec::new(),
                };
                let model_name = model.map_or("", |m| m.name);
                pmus.push(adjust(pmu, model_name, facts));
            } else if name.starts_with("uncore_") || name.starts_with("amd_") {
                let unit = uncore_unit(&name);
                let (general, fixed, source) = match model.and_then(|m| counter_json(m, &unit)) {
                    Some((g, f)) => (g, f, CountSource::CounterJson),
                    None => (
                        4,
                        0,
                        CountSource::VendorDefault(
                            "uncore box: assuming 4 general counters".into(),
                        ),
                    ),
                };
                pmus.push(PmuCounters {
                    name,
                    core: false,
                    vendor: Vendor::Other,
                    general,
                    fixed,
                    fixed_reserved: 0,
                    metric_events: 0,
                    cycle_counter: false,
                    cpus,
                    source,
                    adjustments: Vec::new(),
                });
            }
        }
        pmus.sort_by_key(|p| (!p.core, p.name != "cpu_core", p.name.clone()));
        PmuModel { pmus, nmi_watchdog: facts.nmi_watchdog, smt_on: facts.smt_on }
    }

    /// The PMU named `name`, or for a catalogue core name (`default_core`), the machine's core
    /// PMU.
    pub fn find(&self, name: &str) -> Option<usize> {
        if let Some(i) = self.pmus.iter().position(|p| p.name == name) {
            return Some(i);
        }
        if is_core_name(name) {
            return self.pmus.iter().position(|p| p.core && p.name != "cpu_atom");
        }
        if let Some(unit) = name.strip_prefix("uncore_") {
            return self.pmus.iter().position(|p| uncore_unit(&p.name).eq_ignore_ascii_case(unit));
        }
        None
    }
}

/// The `counter.json` unit of an uncore PMU name: `uncore_imc_0` -> `imc`.
fn uncore_unit(name: &str) -> String {
    let base = name.strip_prefix("uncore_").or_else(|| name.strip_prefix("amd_")).unwrap_or(name);
    let trimmed = base.trim_end_matches(|c: char| c.is_ascii_digit());
    trimmed.trim_end_matches('_').to_string()
}

/// Applies SMT halving and the NMI watchdog to a core PMU's raw numbers.
fn adjust(mut pmu: PmuCounters, model_name: &str, facts: MachineFacts) -> PmuCounters {
    if pmu.vendor == Vendor::Intel && SMT_HALVING.contains(&model_name) && !facts.smt_on {
        // counter.json and CPUID give the SMT-on number; without SMT each thread gets all 8.
        if pmu.general == 4 {
            pmu.general = 8;
            pmu.adjustments.push(Adjustment::SmtOffAllCounters);
        }
    } else if pmu.vendor == Vendor::Intel && SMT_HALVING.contains(&model_name) {
        pmu.adjustments.push(Adjustment::SmtOnHalved);
    }
    if facts.nmi_watchdog {
        match pmu.vendor {
            Vendor::Intel if pmu.fixed > 1 => {
                pmu.fixed_reserved |= 1 << 1;
                pmu.adjustments.push(Adjustment::WatchdogFixedCycles);
            }
            Vendor::Arm if pmu.cycle_counter => {
                pmu.cycle_counter = false;
                pmu.adjustments.push(Adjustment::WatchdogCycleCounter);
            }
            Vendor::Intel | Vendor::Amd | Vendor::Arm => {
                pmu.general = pmu.general.saturating_sub(1);
                pmu.adjustments.push(Adjustment::WatchdogGeneral);
            }
            Vendor::Other => {}
        }
    }
    pmu
}

/// Why a PMU's counters differ from its raw numbers: the decisions the scheduler reads, as
/// values (their text is for `plan` and `-v` only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adjustment {
    /// SMT is off: the thread has all 8 general counters.
    SmtOffAllCounters,
    /// SMT is on: the core's 8 general counters are split between its threads.
    SmtOnHalved,
    /// The NMI watchdog holds fixed counter 1 (cycles): cycles go to a general counter.
    WatchdogFixedCycles,
    /// The NMI watchdog holds Arm's cycle counter.
    WatchdogCycleCounter,
    /// The NMI watchdog holds one general counter.
    WatchdogGeneral,
}

/// Serialized as its wording, as `plan --json` has always printed it.
impl serde::Serialize for Adjustment {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for Adjustment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Adjustment::SmtOffAllCounters => {
                "8 general counters: SMT is off, so the thread has all of them"
            }
            Adjustment::SmtOnHalved => {
                "4 general counters: SMT is on and the core's 8 are split between its threads"
            }
            Adjustment::WatchdogFixedCycles => {
                "the NMI watchdog holds fixed counter 1 (cycles), so cycles go to a general counter"
            }
            Adjustment::WatchdogCycleCounter => "the NMI watchdog holds the cycle counter",
            Adjustment::WatchdogGeneral => "the NMI watchdog holds one general counter",
        })
    }
}

/// Which counters one event may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Demand {
    /// Bit `n`: general counter `n`.
    pub general: u32,
    /// Bit `n`: fixed counter `n`.
    pub fixed: u8,
    /// Arm's cycle counter.
    pub cycle_counter: bool,
    /// A topdown metric event: takes no counter, needs `slots` leading its group.
    pub topdown_metric: bool,
    /// The `slots` event (fixed counter 3): must lead a group with topdown metric events.
    pub slots: bool,
    /// A shared extra register the event programs, and the value it needs there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<(ExtraReg, u64)>,
}

/// Intel's shared extra registers (`__intel_shared_reg_get_constraints`): events may share one
/// only with the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtraReg {
    /// `offcore_rsp`: two registers (an event may use either).
    OffcoreRsp,
    /// `ldlat`: one.
    Ldlat,
    /// `frontend`: one.
    Frontend,
    /// `snoop_rsp` (Crestmont and later `cpu_atom`): two.
    SnoopRsp,
}

impl ExtraReg {
    /// Registers of this kind per CPU.
    pub fn capacity(self) -> usize {
        match self {
            ExtraReg::OffcoreRsp | ExtraReg::SnoopRsp => 2,
            ExtraReg::Ldlat | ExtraReg::Frontend => 1,
        }
    }

    /// The register an event term programs (`offcore_rsp=...`).
    pub fn from_term(term: &str) -> Option<ExtraReg> {
        match term {
            "offcore_rsp" => Some(ExtraReg::OffcoreRsp),
            "ldlat" => Some(ExtraReg::Ldlat),
            "frontend" => Some(ExtraReg::Frontend),
            "snoop_rsp" => Some(ExtraReg::SnoopRsp),
            _ => None,
        }
    }
}

/// The extra register and value a perf term string needs (`frontend=0x8` ...).
pub fn extra_of(terms: &str) -> Option<(ExtraReg, u64)> {
    terms.split(',').find_map(|term| {
        let (key, value) = term.split_once('=')?;
        let reg = ExtraReg::from_term(key.trim())?;
        let value = value.trim();
        let number = value
            .strip_prefix("0x")
            .map_or_else(|| value.parse().ok(), |hex| u64::from_str_radix(hex, 16).ok())?;
        Some((reg, number))
    })
}

impl Demand {
    /// Any general counter.
    pub const GENERAL: Demand = Demand {
        general: u32::MAX,
        fixed: 0,
        cycle_counter: false,
        topdown_metric: false,
        slots: false,
        extra: None,
    };

    /// How many counters of `pmu` the event could use (fewer first when placing).
    pub fn weight(&self, pmu: &PmuCounters) -> u32 {
        let general = (self.general & mask(pmu.general)).count_ones();
        let fixed = (self.fixed & !pmu.fixed_reserved & mask8(pmu.fixed)).count_ones();
        general + fixed + u32::from(self.cycle_counter && pmu.cycle_counter)
    }
}

fn mask(n: u8) -> u32 {
    if n >= 32 { u32::MAX } else { (1u32 << n) - 1 }
}

fn mask8(n: u8) -> u8 {
    if n >= 8 { u8::MAX } else { (1u8 << n) - 1 }
}

/// `event` and `umask` of a perf term string (`event=0x3c,umask=0x0,period=...`).
pub fn event_umask(terms: &str) -> (Option<u64>, u64) {
    let mut event = None;
    let mut umask = 0;
    for term in terms.split(',') {
        let Some((key, value)) = term.split_once('=') else { continue };
        let value = value.trim();
        let number = value
            .strip_prefix("0x")
            .map_or_else(|| value.parse().ok(), |hex| u64::from_str_radix(hex, 16).ok());
        match key.trim() {
            "event" => event = number,
            "umask" => umask = number.unwrap_or(0),
            _ => {}
        }
    }
    (event, umask)
}

/// The kernel's placement of an Intel core event with this `event`/`umask` and the vendor
/// JSON's counter list (`json`): fixed-only pseudo-encodings, events that may use a fixed or
/// a general counter, topdown metric events (arch/x86/events/intel/core.c).
pub fn intel_demand(event: u64, umask: u64, json: tmetric_catalog::CounterMask) -> Demand {
    let general = if json.generic == 0 { u32::MAX } else { json.generic };
    match (event, umask) {
        (0x00, 0x80..=0x87) => Demand {
            general: 0,
            fixed: 0,
            cycle_counter: false,
            topdown_metric: true,
            slots: false,
            extra: None,
        },
        (0x00, 0x04) => Demand {
            general: 0,
            fixed: 1 << 3,
            cycle_counter: false,
            topdown_metric: false,
            slots: true,
            extra: None,
        },
        (0x00, 0x03) => Demand { general: 0, fixed: 1 << 2, ..Demand::GENERAL },
        (0x00, 0x01) => Demand { general: 0, fixed: 1 << 0, ..Demand::GENERAL },
        (0xc0, 0x00) => Demand { general: u32::MAX, fixed: 1 << 0, ..Demand::GENERAL },
        (0x3c, 0x00) => Demand { general: u32::MAX, fixed: 1 << 1, ..Demand::GENERAL },
        _ => Demand { general, fixed: 0, ..Demand::GENERAL },
    }
}

/// Which counters a vendor JSON event may use on `pmu`: its perf term string `encoding`, the
/// terms a metric adds to it (`terms`, as in `cpu@UOPS_EXECUTED.THREAD\\,cmask\\=1@`) and
/// the JSON `Counter` list (`counters`). Intel core events follow the kernel's constraint
/// tables ([`intel_demand`]); Arm's CPU_CYCLES may take the cycle counter; other events the
/// JSON counter list. The shared extra register the event programs comes with it.
pub fn event_demand(
    pmu: &PmuCounters,
    encoding: &str,
    terms: &str,
    counters: tmetric_catalog::CounterMask,
) -> Demand {
    let (event, umask) = event_umask(encoding);
    let (_, extra_umask) = event_umask(terms);
    let extra = extra_of(encoding).or_else(|| extra_of(terms));
    let demand = match (pmu.vendor, pmu.core, event) {
        (Vendor::Intel, true, Some(ev)) => {
            let mut demand = intel_demand(ev, umask | extra_umask, counters);
            // CPU_CLK_UNHALTED.REF_TSC_P may use fixed counter 2 on Golden Cove and later
            // cores and on the hybrid atoms (FIXED_EVENT_CONSTRAINT(0x013c, 2) in
            // intel_glc/lnc/grt/skt_event_constraints); before them 0x013c is REF_XCLK.
            // Those cores are the ones with 8 PERF_METRICS fields, and `cpu_atom`.
            if (ev, umask | extra_umask) == (0x3c, 0x01)
                && pmu.fixed > 2
                && (pmu.metric_events >= 8 || pmu.name == "cpu_atom")
            {
                demand.fixed |= 1 << 2;
            }
            if demand.general != 0 && (filters_fixed(encoding) || filters_fixed(terms)) {
                Demand { fixed: 0, ..demand }
            } else {
                demand
            }
        }
        (Vendor::Arm, true, Some(0x11)) => Demand { cycle_counter: true, ..Demand::GENERAL },
        (_, _, _) if counters.generic != u32::MAX && counters.generic != 0 => {
            Demand { general: counters.generic, ..Demand::GENERAL }
        }
        _ => Demand::GENERAL,
    };
    Demand { extra, ..demand }
}

/// Whether perf terms set a filter that keeps an Intel event off the fixed counters: a
/// non-zero `inv`, `edge` or `cmask` (`edge` alone means 1). The kernel's fixed-counter
/// constraints compare those bits too (FIXED_EVENT_FLAGS in arch/x86/events/perf_event.h),
/// so `event=0x3c,cmask=1,edge=1` matches no fixed counter and takes a general one.
fn filters_fixed(terms: &str) -> bool {
    terms.split(',').any(|term| {
        let (key, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = value.trim();
        let number = value
            .strip_prefix("0x")
            .map_or_else(|| value.parse::<u64>().ok(), |hex| u64::from_str_radix(hex, 16).ok());
        matches!(key.trim(), "inv" | "edge" | "cmask") && number != Some(0)
    })
}

/// The placement of a kernel-named event (`cycles`, `instructions`, `slots`, `topdown-*`,
/// `ref-cycles`, `cpu_cycles`) on a core PMU of `vendor`.
pub fn named_demand(name: &str, vendor: Vendor, metric_events: u8) -> Option<Demand> {
    let name = name.to_ascii_lowercase();
    let base = name.split([':', '/']).next().unwrap_or(&name);
    match vendor {
        Vendor::Intel => {
            let any = tmetric_catalog::CounterMask::ANY;
            let (event, umask) = match base {
                "cycles" | "cpu-cycles" => (0x3c, 0),
                "instructions" => (0xc0, 0),
                "ref-cycles" => (0x00, 0x03),
                "slots" if metric_events > 0 => (0x00, 0x04),
                "topdown-retiring" if metric_events > 0 => (0x00, 0x80),
                "topdown-bad-spec" if metric_events > 0 => (0x00, 0x81),
                "topdown-fe-bound" if metric_events > 0 => (0x00, 0x82),
                "topdown-be-bound" if metric_events > 0 => (0x00, 0x83),
                "topdown-heavy-ops" if metric_events >= 8 => (0x00, 0x84),
                "topdown-br-mispredict" if metric_events >= 8 => (0x00, 0x85),
                "topdown-fetch-lat" if metric_events >= 8 => (0x00, 0x86),
                "topdown-mem-bound" if metric_events >= 8 => (0x00, 0x87),
                _ => return Some(Demand::GENERAL),
            };
            Some(intel_demand(event, umask, any))
        }
        Vendor::Arm if base == "cpu_cycles" || base == "cycles" || base == "cpu-cycles" => {
            Some(Demand { cycle_counter: true, ..Demand::GENERAL })
        }
        _ => Some(Demand::GENERAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intel_fixed_rules() {
        let any = tmetric_catalog::CounterMask::ANY;
        let slots = intel_demand(0, 4, any);
        assert!(slots.slots && slots.general == 0 && slots.fixed == 8);
        let cycles = intel_demand(0x3c, 0, any);
        assert_eq!((cycles.general, cycles.fixed), (u32::MAX, 2));
        let metric = intel_demand(0, 0x83, any);
        assert!(metric.topdown_metric && metric.general == 0);
        let restricted =
            intel_demand(0xd0, 0x81, tmetric_catalog::CounterMask { generic: 0xf, fixed: 0 });
        assert_eq!(restricted.general, 0xf);
    }

    #[test]
    fn filters_keep_events_off_fixed_counters() {
        assert!(filters_fixed("event=0x3c,cmask=1,edge=1,period=2000003"));
        assert!(filters_fixed("cmask=1,edge"));
        assert!(filters_fixed("inv=0x1"));
        assert!(!filters_fixed("event=0x3c,period=2000003,umask=0x0"));
        assert!(!filters_fixed("event=0x3c,any=1,cmask=0"));
    }

    #[test]
    fn terms_parse() {
        assert_eq!(event_umask("event=0x3c,period=2000003,umask=0x0"), (Some(0x3c), 0));
        assert_eq!(event_umask("event=0xd0,umask=0x81"), (Some(0xd0), 0x81));
        assert_eq!(event_umask("period=1"), (None, 0));
    }

    #[test]
    fn models_offline() {
        let spr = tmetric_catalog::model("sapphirerapids").unwrap();
        let pm = PmuModel::for_model(spr, MachineFacts { nmi_watchdog: false, smt_on: true });
        assert_eq!(pm.pmus.len(), 1);
        assert_eq!((pm.pmus[0].general, pm.pmus[0].fixed, pm.pmus[0].metric_events), (8, 4, 8));
        assert_eq!(pm.pmus[0].source, CountSource::CounterJson);
        let pm = PmuModel::for_model(spr, MachineFacts { nmi_watchdog: true, smt_on: true });
        assert_eq!(pm.pmus[0].fixed_reserved, 2);
        assert_eq!(pm.pmus[0].capacity(), 8 + 3);

        let skx = tmetric_catalog::model("skylakex").unwrap();
        let on = PmuModel::for_model(skx, MachineFacts { nmi_watchdog: false, smt_on: true });
        let off = PmuModel::for_model(skx, MachineFacts { nmi_watchdog: false, smt_on: false });
        assert_eq!((on.pmus[0].general, off.pmus[0].general), (4, 8));

        let adl = tmetric_catalog::model("alderlake").unwrap();
        let pm = PmuModel::for_model(adl, MachineFacts { nmi_watchdog: false, smt_on: true });
        let names: Vec<&str> = pm.pmus.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cpu_core", "cpu_atom"]);
        assert_eq!((pm.pmus[1].general, pm.pmus[1].fixed), (6, 3));
        assert!(matches!(pm.pmus[0].source, CountSource::VendorDefault(_)));

        let zen4 = tmetric_catalog::model("amdzen4").unwrap();
        let pm = PmuModel::for_model(zen4, MachineFacts { nmi_watchdog: true, smt_on: true });
        assert_eq!((pm.pmus[0].general, pm.pmus[0].fixed), (5, 0));
    }
}
