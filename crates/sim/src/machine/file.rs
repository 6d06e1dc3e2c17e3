//! Simulated machines as data: the JSON format of `crates/sim/machines/*.json` (built in with
//! `include_str!`) and of a user's `--pmu-sim FILE.json`, read into a [`Machine`] with every
//! value checked against what Linux 6.12 accepts.
//!
//! ```json
//! {
//!   "name": "amdzen4",
//!   "description": "one line on what it is",
//!   "catalogue_model": "amdzen4",
//!   "cpuid": { "x86": { "vendor": "AuthenticAMD", "family": 25, "model": "0x11",
//!                       "stepping": 1, "model_name": "AMD EPYC 9654 (simulated)" } },
//!   "topology": [ { "packages": 1, "cores": 4, "threads": 2 } ],
//!   "nmi_watchdog": true,
//!   "pmus": [
//!     { "x86_core": { "name": "cpu", "core": "Zen4", "gp": 6, "width": 6,
//!                     "formats": { "event": "config:0-7,32-35" },
//!                     "events": { "cycles": "event=0x76" }, "caps": {}, "files": {} } },
//!     { "msr": [ "tsc", "aperf", "mperf", "irperf" ] },
//!     { "power": { "cpumask": "package", "events": [ "energy-pkg" ] } },
//!     { "uncore": { "name": "amd_l3", "counters": 6, "cpumask": "0", "formats": {} } }
//!   ]
//! }
//! ```
//!
//! What a machine *is* lives here: its CPUs, cpuid, and each PMU's counter counts, sysfs
//! formats, event aliases, caps and CPU masks. What the *kernel* does with them stays in Rust:
//! the constraint table, extra registers and generic-event map of each [`CoreKind`]
//! (`crate::sched`), the configs `msr`, `power` (RAPL) and `cstate_*` accept by name (msr.c,
//! rapl.c, intel/cstate.c), the built-in PMUs every Linux has, type numbers (the first x86
//! core PMU is `PERF_TYPE_RAW` = 4, every other PMU takes the IDR's next number from 10 in the
//! order listed) and the rules of opening, grouping and scheduling.
//!
//! * `topology`: blocks of CPUs numbered on from the previous block, package-major then core
//!   then thread; `first_core` numbers a block's cores from there (a hybrid's E-cores).
//!   SMT is on when a block has more than one thread.
//! * `cpuid`: `{"x86": {...}}` (cpuinfo's fields; perf's string is `vendor-family-MODEL-STEPPING`)
//!   or `{"midr": "0x410fd493"}` (arm64's `midr_el1`). Numbers may be JSON numbers or strings
//!   (`"0x8f"`, hex with `0x`).
//! * `hz` (default 250) is the kernel's `CONFIG_HZ`; `retire_latency` (default false) says
//!   PEBS records carry the retire latency.
//! * PMUs, in registration order: `x86_core` (`core` names the [`CoreKind`], `gp` and `fixed`
//!   counters, `width` slots per cycle, `cpus` for a hybrid's core types), `arm_pmuv3` (`events`
//!   map names to event numbers; `long_counters` says whether the counters are 64-bit,
//!   FEAT_PMUv3p5, the core's own when not given; `caps/threshold_max` bounds `threshold`), `msr`, `power`, `cstate_core`, `cstate_pkg` (event names),
//!   and `uncore` boxes: `name` may hold `{n}` with `count` boxes made for n in 0..count;
//!   `counters` general counters, `fixed` (a fixed counter for config 0xff), `free_running`,
//!   `config_mask` (the config bits the driver keeps; every bit when not given).
//!   `cpumask` and `cpus` are a CPU list (`0`, `0-3,8`), `package` (the first CPU of each
//!   package) or `core` (the first thread of each core).
//! * `formats` and `events` are objects whose order is kept: `format/<term>` files
//!   (`config:0-7,32-35`; no two terms share a bit of `config`) and `events/<alias>` files
//!   (terms that name formats of the PMU; `<alias>.scale`/`.unit` companions as they are).
//!
//! [`Machine::parse`] reports a syntax error, an unknown field or kind, or a value the kernel
//! would not take with the file, line and column and what was expected.

use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::{ArmCore, CoreKind, Cpu, CpuId, Machine, PmuClass, SimPmu};

/// The built-in machines: name and text.
pub const BUILTIN: &[(&str, &str)] = &[
    ("sapphirerapids", include_str!("../../machines/sapphirerapids.json")),
    ("icelake", include_str!("../../machines/icelake.json")),
    ("skylakex", include_str!("../../machines/skylakex.json")),
    ("skylakex-nosmt", include_str!("../../machines/skylakex-nosmt.json")),
    ("alderlake", include_str!("../../machines/alderlake.json")),
    ("meteorlake", include_str!("../../machines/meteorlake.json")),
    ("amdzen4", include_str!("../../machines/amdzen4.json")),
    ("amdzen5", include_str!("../../machines/amdzen5.json")),
    ("neoverse-n2", include_str!("../../machines/neoverse-n2.json")),
    ("emeraldrapids-guest", include_str!("../../machines/emeraldrapids-guest.json")),
    ("amdzen4-guest", include_str!("../../machines/amdzen4-guest.json")),
];

/// The most CPUs a machine may have: the simulator keeps state per CPU and writes a topology
/// directory for each.
pub const MAX_CPUS: u32 = 1024;

/// The most PMUs a machine may have, `{n}` boxes counted one by one.
pub const MAX_PMUS: usize = 4096;

/// A machine file that cannot be used; the text names the file, the place and what was
/// expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineError(pub String);

impl fmt::Display for MachineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MachineError {}

/// A number given as a JSON number or a string (`"0x8f"` in hex, else decimal).
#[derive(Debug, Clone, Copy)]
struct Num(u64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number >= 0, or a string holding one (\"0x8f\" in hex)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                tmetric_runtime::sysfs::parse_number(v).map(Num).ok_or_else(|| {
                    E::invalid_value(de::Unexpected::Str(v), &"a number such as 17 or \"0x11\"")
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON object read in the file's order, each key once.
#[derive(Debug, Clone)]
struct Ordered<T>(Vec<(String, T)>);

impl<T> Default for Ordered<T> {
    fn default() -> Self {
        Ordered(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ordered<T>, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of file names and their contents")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<T>, A::Error> {
                let mut out: Vec<(String, T)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, T>()? {
                    if out.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("`{key}` is given twice")));
                    }
                    if !file_name(&key) {
                        return Err(de::Error::custom(format!(
                            "`{key}` is not a sysfs file name (letters, digits, `_`, `-` and `.`)"
                        )));
                    }
                    out.push((key, value));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A name a sysfs file or PMU directory may have here: nothing that climbs or nests.
fn file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

/// A file's text: one line, as the kernel's attributes print (the writer adds the line end).
fn one_line(what: &str, text: &str) -> Result<(), String> {
    if text.contains(['\n', '\0']) {
        return Err(format!("{what}: `{}` holds a line end; give one line", text.escape_debug()));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    description: String,
    catalogue_model: String,
    cpuid: CpuIdSpec,
    topology: Vec<Block>,
    nmi_watchdog: bool,
    #[serde(default)]
    retire_latency: bool,
    hz: Option<u32>,
    pmus: Vec<PmuSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum CpuIdSpec {
    X86 { vendor: String, family: Num, model: Num, stepping: Num, model_name: String },
    Midr(Num),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Block {
    #[serde(default = "one")]
    packages: u32,
    cores: u32,
    threads: u32,
    #[serde(default)]
    first_core: u32,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum PmuSpec {
    X86Core(CoreSpec),
    ArmPmuv3(ArmSpec),
    Msr(Vec<String>),
    Power(PowerSpec),
    CstateCore(Vec<String>),
    CstatePkg(Vec<String>),
    Uncore(UncoreSpec),
}

/// `format/` files: term and bits, checked as the kernel writes them.
#[derive(Debug, Clone, Default)]
struct Formats(Vec<(String, String)>);

impl<'de> Deserialize<'de> for Formats {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Formats, D::Error> {
        let Ordered(terms) = Ordered::<String>::deserialize(d)?;
        // Bits of `config` are the event encoding's fields, each one term's; config1 and
        // config2 hold the extra registers' values, which the kernel's own Intel formats
        // share (offcore_rsp, ldlat and frontend are all config1).
        let mut owner: [Option<&str>; 64] = [None; 64];
        for (term, text) in &terms {
            let bits = format_bits(text).map_err(|what| {
                de::Error::custom(format!("format `{term}`: `{}`: {what}", text.escape_debug()))
            })?;
            for (word, bit) in bits {
                if word != "config" {
                    continue;
                }
                if let Some(other) = owner[bit as usize] {
                    return Err(de::Error::custom(format!(
                        "format `{term}`: bit {bit} of config is already `{other}`'s; each bit \
                         of config belongs to one term (config1 and config2 terms may share)"
                    )));
                }
                owner[bit as usize] = Some(term);
            }
        }
        Ok(Formats(terms))
    }
}

/// The bits of a format file's text (`config:0-7,32-35`, `config1:0`).
fn format_bits(text: &str) -> Result<Vec<(&str, u32)>, String> {
    let Some((word, ranges)) = text.split_once(':') else {
        return Err("expected `config`, `config1` or `config2`, a colon and bits".into());
    };
    if !["config", "config1", "config2"].contains(&word) {
        return Err(format!("`{word}` is not config, config1 or config2"));
    }
    let mut bits = Vec::new();
    for part in ranges.split(',') {
        let bit = |s: &str| -> Result<u32, String> {
            match s.parse::<u32>() {
                Ok(b) if b < 64 => Ok(b),
                _ => Err(format!("`{s}` is not a bit number 0 to 63")),
            }
        };
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (bit(lo)?, bit(hi)?),
            None => (bit(part)?, bit(part)?),
        };
        if lo > hi {
            return Err(format!("`{part}`: the range runs backwards"));
        }
        bits.extend((lo..=hi).map(|b| (word, b)));
    }
    Ok(bits)
}

/// Checks `events/` aliases: one line each, and an alias's terms (not its `.scale`, `.unit`
/// companions) name formats of the PMU.
fn check_events(pmu: &str, formats: &Formats, events: &[(String, String)]) -> Result<(), String> {
    for (alias, text) in events {
        one_line(&format!("{pmu} event `{alias}`"), text)?;
        if [".scale", ".unit", ".per-pkg", ".snapshot"].iter().any(|s| alias.ends_with(s)) {
            continue;
        }
        for term in text.split(',') {
            let name = term.split_once('=').map_or(term, |(n, _)| n).trim();
            if !formats.0.iter().any(|(f, _)| f == name) {
                return Err(format!(
                    "{pmu} event `{alias}`: `{name}` is not a format of the PMU (its formats: {})",
                    formats.0.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawCore")]
struct CoreSpec {
    name: String,
    core: CoreKind,
    gp: u32,
    fixed: u32,
    width: u64,
    cpus: Option<String>,
    formats: Formats,
    events: Vec<(String, String)>,
    caps: Vec<(String, String)>,
    files: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCore {
    name: String,
    core: CoreKind,
    gp: u32,
    #[serde(default)]
    fixed: u32,
    width: u64,
    cpus: Option<String>,
    formats: Formats,
    #[serde(default)]
    events: Ordered<String>,
    #[serde(default)]
    caps: Ordered<String>,
    #[serde(default)]
    files: Ordered<String>,
}

/// The pipeline widths a core may have: no core issues more than this many slots a cycle.
const MAX_WIDTH: u64 = 16;

impl TryFrom<RawCore> for CoreSpec {
    type Error = String;
    fn try_from(raw: RawCore) -> Result<CoreSpec, String> {
        let name = &raw.name;
        // arch/x86/include/asm/perf_event.h: INTEL_PMC_MAX_GENERIC and INTEL_PMC_MAX_FIXED,
        // beyond which intel_pmu_check_counters_mask clips with a warning; AMD's count is
        // CPUID 0x80000022 EBX's 4-bit `num_core_pmc` and it has no fixed counters.
        let (gp_max, fixed_max, source) = match raw.core {
            CoreKind::Zen4 | CoreKind::Zen5 => (15, 0, "CPUID 0x80000022 EBX num_core_pmc"),
            CoreKind::NeoverseN2 => {
                return Err(format!(
                    "x86 core PMU `{name}`: `NeoverseN2` is an arm64 core; give it as `arm_pmuv3`"
                ));
            }
            _ => (32, 16, "INTEL_PMC_MAX_GENERIC and INTEL_PMC_MAX_FIXED"),
        };
        if raw.gp == 0 || raw.gp > gp_max {
            return Err(format!(
                "x86 core PMU `{name}`: gp {}: a {:?} core has 1 to {gp_max} general counters ({source})",
                raw.gp, raw.core
            ));
        }
        if raw.fixed > fixed_max {
            return Err(format!(
                "x86 core PMU `{name}`: fixed {}: a {:?} core has at most {fixed_max} fixed counters ({source})",
                raw.fixed, raw.core
            ));
        }
        if raw.width == 0 || raw.width > MAX_WIDTH {
            return Err(format!(
                "x86 core PMU `{name}`: width {}: give the slots per cycle, 1 to {MAX_WIDTH}",
                raw.width
            ));
        }
        check_events(name, &raw.formats, &raw.events.0)?;
        for (what, list) in [("cap", &raw.caps.0), ("file", &raw.files.0)] {
            for (file, text) in list {
                one_line(&format!("{name} {what} `{file}`"), text)?;
            }
        }
        Ok(CoreSpec {
            name: raw.name,
            core: raw.core,
            gp: raw.gp,
            fixed: raw.fixed,
            width: raw.width,
            cpus: raw.cpus,
            formats: raw.formats,
            events: raw.events.0,
            caps: raw.caps.0,
            files: raw.files.0,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawArm")]
struct ArmSpec {
    name: String,
    core: CoreKind,
    gp: u32,
    width: u64,
    cpus: String,
    formats: Formats,
    events: Vec<(String, u64)>,
    caps: Vec<(String, String)>,
    long_counters: bool,
    threshold_max: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArm {
    name: String,
    core: CoreKind,
    gp: u32,
    width: u64,
    cpus: String,
    formats: Formats,
    /// FEAT_PMUv3p5's 64-bit counters; the core's own when not given.
    #[serde(default)]
    long_counters: Option<bool>,
    #[serde(default)]
    events: Ordered<Num>,
    #[serde(default)]
    caps: Ordered<String>,
}

impl TryFrom<RawArm> for ArmSpec {
    type Error = String;
    fn try_from(raw: RawArm) -> Result<ArmSpec, String> {
        let name = &raw.name;
        if raw.core != CoreKind::NeoverseN2 {
            return Err(format!(
                "arm64 PMU `{name}`: `{:?}` is an x86 core; give it as `x86_core`",
                raw.core
            ));
        }
        // include/linux/perf/arm_pmuv3.h: ARMV8_PMU_MAX_GENERAL_COUNTERS (PMCR_EL0.N).
        if raw.gp == 0 || raw.gp > 31 {
            return Err(format!(
                "arm64 PMU `{name}`: gp {}: PMUv3 has 1 to 31 programmable counters (ARMV8_PMU_MAX_GENERAL_COUNTERS)",
                raw.gp
            ));
        }
        if raw.width == 0 || raw.width > MAX_WIDTH {
            return Err(format!(
                "arm64 PMU `{name}`: width {}: give the slots per cycle, 1 to {MAX_WIDTH}",
                raw.width
            ));
        }
        // The event number is `config:0-15` (PMUv3's 16-bit event space).
        if let Some((alias, Num(n))) = raw.events.0.iter().find(|(_, Num(n))| *n > 0xffff) {
            return Err(format!(
                "arm64 PMU `{name}` event `{alias}`: {n:#x} is past PMUv3's 16-bit event numbers"
            ));
        }
        for (file, text) in &raw.caps.0 {
            one_line(&format!("{name} cap `{file}`"), text)?;
        }
        // arm_pmuv3.c threshold_max_show: `0x%08x` of PMMIR_EL1.THWIDTH's largest threshold.
        let threshold_max = match raw.caps.0.iter().find(|(f, _)| f == "threshold_max") {
            None => 0,
            Some((_, text)) => tmetric_runtime::sysfs::parse_number(text.trim())
                .filter(|&t| t <= crate::sched::ARM_THRESHOLD_MASK)
                .ok_or_else(|| {
                    format!(
                        "arm64 PMU `{name}` cap `threshold_max`: {text:?}: give a number up to 0xfff (the `threshold` field's 12 bits), as \"0x00000000\" without FEAT_PMUv3_TH"
                    )
                })?,
        };
        Ok(ArmSpec {
            long_counters: raw.long_counters.unwrap_or(raw.core.long_counters()),
            threshold_max,
            name: raw.name,
            core: raw.core,
            gp: raw.gp,
            width: raw.width,
            cpus: raw.cpus,
            formats: raw.formats,
            events: raw.events.0.into_iter().map(|(n, Num(v))| (n, v)).collect(),
            caps: raw.caps.0,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PowerSpec {
    cpumask: String,
    events: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, try_from = "RawUncore")]
struct UncoreSpec {
    name: String,
    count: Option<u32>,
    counters: u32,
    fixed: bool,
    free_running: bool,
    config_mask: u64,
    cpumask: String,
    formats: Formats,
    events: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUncore {
    name: String,
    count: Option<u32>,
    counters: u32,
    #[serde(default)]
    fixed: bool,
    #[serde(default)]
    free_running: bool,
    config_mask: Option<Num>,
    cpumask: String,
    formats: Formats,
    #[serde(default)]
    events: Ordered<String>,
}

/// The most boxes one `{n}` entry makes.
const MAX_BOXES: u32 = 256;

impl TryFrom<RawUncore> for UncoreSpec {
    type Error = String;
    fn try_from(raw: RawUncore) -> Result<UncoreSpec, String> {
        let name = &raw.name;
        match (name.contains("{n}"), raw.count) {
            (true, Some(n)) if (1..=MAX_BOXES).contains(&n) => {}
            (true, Some(n)) => {
                return Err(format!("uncore `{name}`: count {n}: give 1 to {MAX_BOXES} boxes"));
            }
            (true, None) => {
                return Err(format!(
                    "uncore `{name}`: `{{n}}` needs a `count`: the boxes are made for n in 0..count"
                ));
            }
            (false, Some(_)) => {
                return Err(format!(
                    "uncore `{name}`: `count` needs `{{n}}` in the name (`uncore_cha_{{n}}`)"
                ));
            }
            (false, None) => {}
        }
        // intel/uncore.h UNCORE_PMC_IDX_MAX_GENERIC; AMD's counts come from 6-bit CPUID
        // fields (amd/uncore.c, `num_df_pmc`, `num_umc_pmc`).
        let (most, source) = if name.starts_with("amd_") {
            (63, "amd/uncore.c's 6-bit CPUID counts")
        } else {
            (8, "intel/uncore.h UNCORE_PMC_IDX_MAX_GENERIC")
        };
        if raw.counters > most {
            return Err(format!(
                "uncore `{name}`: counters {}: a box has at most {most} general counters ({source})",
                raw.counters
            ));
        }
        if raw.counters == 0 && !raw.fixed && !raw.free_running {
            return Err(format!(
                "uncore `{name}`: a box without general, fixed or free-running counters counts nothing"
            ));
        }
        check_events(name, &raw.formats, &raw.events.0)?;
        Ok(UncoreSpec {
            name: raw.name,
            count: raw.count,
            counters: raw.counters,
            fixed: raw.fixed,
            free_running: raw.free_running,
            config_mask: raw.config_mask.map_or(u64::MAX, |Num(m)| m),
            cpumask: raw.cpumask,
            formats: raw.formats,
            events: raw.events.0,
        })
    }
}

/// `msr`'s events by name (arch/x86/events/msr.c, `PERF_MSR_*`).
const MSR_EVENTS: &[(&str, u64)] = &[
    ("tsc", 0),
    ("aperf", 1),
    ("mperf", 2),
    ("pperf", 3),
    ("smi", 4),
    ("ptsc", 5),
    ("irperf", 6),
    ("cpu_thermal_margin", 7),
];

/// RAPL's events by name (arch/x86/events/rapl.c, `RAPL_EVENT_ATTR_STR`).
const RAPL_EVENTS: &[(&str, u64)] = &[
    ("energy-cores", 1),
    ("energy-pkg", 2),
    ("energy-ram", 3),
    ("energy-gpu", 4),
    ("energy-psys", 5),
];

/// `cstate_core`'s residency events (arch/x86/events/intel/cstate.c, `attr_cstate_core_*`).
const CSTATE_CORE_EVENTS: &[(&str, u64)] =
    &[("c1-residency", 0), ("c3-residency", 1), ("c6-residency", 2), ("c7-residency", 3)];

/// `cstate_pkg`'s residency events (`attr_cstate_pkg_*`).
const CSTATE_PKG_EVENTS: &[(&str, u64)] = &[
    ("c2-residency", 0),
    ("c3-residency", 1),
    ("c6-residency", 2),
    ("c7-residency", 3),
    ("c8-residency", 4),
    ("c9-residency", 5),
    ("c10-residency", 6),
];

/// The `(name, config)` of each named event of a driver's table, or what it has.
fn driver_events(
    pmu: &str,
    table: &[(&'static str, u64)],
    names: &[String],
) -> Result<Vec<(&'static str, u64)>, String> {
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for name in names {
        let Some(&(known, config)) = table.iter().find(|(n, _)| n == name) else {
            return Err(format!(
                "`{name}` is not an event of `{pmu}`; the kernel's are {}",
                table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ));
        };
        if out.iter().any(|(n, _)| *n == known) {
            return Err(format!("`{pmu}` lists `{name}` twice"));
        }
        out.push((known, config));
    }
    Ok(out)
}

/// The 1-based line of the first `"key"` in `text`, for messages about a value.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    text.find(&quoted).map(|at| text[..at].matches('\n').count() + 1)
}

impl Machine {
    /// Parses machine JSON; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Machine, MachineError> {
        let file: File = serde_json::from_str(text).map_err(|e| {
            let what = e.to_string();
            let what = what.split(" at line ").next().unwrap_or(&what).to_string();
            // A value the checks refuse is placed where its object ends, and its message
            // names the PMU and the field; a file that is not such an object gets the hint.
            let hint = if e.is_data() {
                ""
            } else {
                "; a simulated machine is a JSON object (the built-in ones are in crates/sim/machines/, the format in crates/sim/src/machine/file.rs)"
            };
            MachineError(format!("{origin}:{}:{}: {what}{hint}", e.line(), e.column()))
        })?;
        let bad = |key: &str, what: String| {
            let at = line_of(text, key).map_or_else(String::new, |l| format!(":{l}"));
            MachineError(format!("{origin}{at}: {what}"))
        };
        build(file).map_err(|(key, what)| bad(&key, what))
    }
}

/// CPUs in the order the kernel numbers them.
fn cpus_of(blocks: &[Block]) -> Result<Vec<Cpu>, String> {
    if blocks.is_empty() {
        return Err("`topology` needs at least one block of CPUs".into());
    }
    let mut cpus = Vec::new();
    let mut cores = BTreeSet::new();
    for b in blocks {
        let n = u64::from(b.packages) * u64::from(b.cores) * u64::from(b.threads);
        if n == 0 || cpus.len() as u64 + n > u64::from(MAX_CPUS) {
            return Err(format!(
                "`topology`: {} packages x {} cores x {} threads: give 1 or more of each, at most {MAX_CPUS} CPUs in all",
                b.packages, b.cores, b.threads
            ));
        }
        let base = cpus.len() as u32;
        for package in 0..b.packages {
            for core in 0..b.cores {
                let core_id = b.first_core.checked_add(core).ok_or("`first_core` is too large")?;
                if !cores.insert((package, core_id)) {
                    return Err(format!(
                        "`topology`: core {core_id} of package {package} is in two blocks; number the second block's cores on with `first_core`"
                    ));
                }
                for thread in 0..b.threads {
                    let id = base + (package * b.cores + core) * b.threads + thread;
                    cpus.push(Cpu { id, core: core_id, package, die: 0 });
                }
            }
        }
    }
    Ok(cpus)
}

/// A CPU list (`0-3,8`), `package` or `core`, as CPUs of `cpus`.
fn cpu_set(cpus: &[Cpu], text: &str) -> Result<Vec<u32>, String> {
    let firsts = |key: &dyn Fn(&Cpu) -> (u32, u32)| {
        let mut seen = BTreeSet::new();
        cpus.iter().filter(|c| seen.insert(key(c))).map(|c| c.id).collect::<Vec<_>>()
    };
    match text {
        "package" => return Ok(firsts(&|c| (c.package, 0))),
        "core" => return Ok(firsts(&|c| (c.package, c.core))),
        _ => {}
    }
    let n = cpus.len() as u32;
    let mut out = BTreeSet::new();
    for part in text.split(',') {
        let cpu = |s: &str| match s.trim().parse::<u32>() {
            Ok(c) if c < n => Ok(c),
            _ => Err(format!(
                "`{text}`: `{s}` is not a CPU of the machine (0 to {}); give a CPU list such as `0-3,8`, `package` or `core`",
                n - 1
            )),
        };
        match part.split_once('-') {
            Some((lo, hi)) => out.extend(cpu(lo)?..=cpu(hi)?),
            None => {
                out.insert(cpu(part)?);
            }
        }
    }
    if out.is_empty() {
        return Err(format!("`{text}` names no CPU"));
    }
    Ok(out.into_iter().collect())
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
        formats: formats.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
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

/// A PMU of `config`-numbered events (msr, RAPL, cstate): `event=0xNN` files and the mask of
/// valid configs.
fn numbered(events: &[(&str, u64)]) -> (u64, Vec<(String, String)>) {
    let mut mask = 0;
    let mut files = Vec::new();
    for (name, config) in events {
        mask |= 1u64 << config;
        files.push((name.to_string(), format!("event=0x{config:02x}")));
    }
    (mask, files)
}

fn plain_pmu(name: &str, class: PmuClass, cpumask: Option<Vec<u32>>, format: &str) -> SimPmu {
    SimPmu {
        name: name.into(),
        type_: 0,
        class,
        cpus: None,
        cpumask,
        formats: vec![("event".into(), format.into())],
        events: Vec::new(),
        caps: Vec::new(),
        files: Vec::new(),
    }
}

/// The machine a checked file describes; an error is the key to find its line by and what
/// is wrong.
fn build(file: File) -> Result<Machine, (String, String)> {
    let at = |key: &str| {
        let key = key.to_string();
        move |what: String| (key.clone(), what)
    };
    if !file_name(&file.name) {
        return Err(at("name")(format!(
            "`name`: `{}` is not a machine name (letters, digits, `_`, `-` and `.`)",
            file.name.escape_debug()
        )));
    }
    one_line("`description`", &file.description).map_err(at("description"))?;
    let cpus = cpus_of(&file.topology).map_err(at("topology"))?;
    let id = match file.cpuid {
        CpuIdSpec::X86 {
            vendor,
            family: Num(family),
            model: Num(model),
            stepping: Num(stepping),
            model_name,
        } => {
            // cpuinfo's family is the base plus the extended family (arch/x86/kernel/cpu/
            // common.c `x86_family`); model and stepping are 8 and 4 bits.
            if vendor.len() != 12 || !vendor.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(at("vendor")(format!(
                    "`vendor`: `{}` is not a 12-letter CPUID vendor such as GenuineIntel or AuthenticAMD",
                    vendor.escape_debug()
                )));
            }
            if family > 0xf + 0xff || model > 0xff || stepping > 0xf {
                return Err(at("family")(format!(
                    "`cpuid`: family {family}, model {model:#x}, stepping {stepping}: x86 has families to {}, models to 0xff and steppings to 15",
                    0xf + 0xff
                )));
            }
            one_line("`model_name`", &model_name).map_err(at("model_name"))?;
            CpuId::X86 {
                vendor,
                family: family as u32,
                model: model as u32,
                stepping: stepping as u32,
                model_name,
            }
        }
        CpuIdSpec::Midr(Num(midr)) => {
            if midr > u64::from(u32::MAX) {
                return Err(at("midr")(format!("`midr`: {midr:#x} is past MIDR_EL1's 32 bits")));
            }
            CpuId::Midr(midr)
        }
    };
    let hz = file.hz.unwrap_or(250);
    // kernel/Kconfig.hz: the HZ values a kernel can be built with.
    if ![100, 250, 300, 1000].contains(&hz) {
        return Err(at("hz")(format!(
            "`hz`: {hz} is not a CONFIG_HZ the kernel offers (100, 250, 300 or 1000)"
        )));
    }
    let mut pmus = builtin_pmus();
    let mut next_type = 10;
    let mut raw_taken = false;
    let mut take_type = |raw: bool| {
        if raw && !raw_taken {
            raw_taken = true;
            return 4;
        }
        next_type += 1;
        next_type - 1
    };
    let x86 = matches!(id, CpuId::X86 { .. });
    for spec in file.pmus {
        let mut made = Vec::new();
        let cstate_core = matches!(spec, PmuSpec::CstateCore(_));
        match spec {
            PmuSpec::X86Core(c) => {
                if !x86 {
                    return Err(at(&c.name)(format!(
                        "`{}`: an x86 core PMU on a machine with an arm64 `midr`",
                        c.name
                    )));
                }
                let cpus_of_pmu = match &c.cpus {
                    Some(list) => Some(cpu_set(&cpus, list).map_err(at(&c.name))?),
                    None => None,
                };
                let mut core = crate::sched::x86_core(c.core, c.gp, c.fixed);
                core.width = c.width;
                made.push(SimPmu {
                    name: c.name,
                    type_: take_type(true),
                    class: PmuClass::X86Core(core),
                    cpus: cpus_of_pmu,
                    cpumask: None,
                    formats: c.formats.0,
                    events: c.events,
                    caps: c.caps,
                    files: c.files,
                });
            }
            PmuSpec::ArmPmuv3(a) => {
                if x86 {
                    return Err(at(&a.name)(format!(
                        "`{}`: an arm64 PMU on a machine with an x86 `cpuid`; give `midr`",
                        a.name
                    )));
                }
                let list = cpu_set(&cpus, &a.cpus).map_err(at(&a.name))?;
                made.push(SimPmu {
                    name: a.name,
                    type_: take_type(false),
                    class: PmuClass::Arm(ArmCore {
                        kind: a.core,
                        gp: a.gp,
                        generic: super::ARMV8_PMUV3_PERF_MAP,
                        width: a.width,
                        long_counters: a.long_counters,
                        threshold_max: a.threshold_max,
                    }),
                    cpus: Some(list),
                    cpumask: None,
                    formats: a.formats.0,
                    events: a
                        .events
                        .iter()
                        .map(|(n, c)| (n.clone(), format!("event=0x{c:04x}")))
                        .collect(),
                    caps: a.caps,
                    files: Vec::new(),
                });
            }
            PmuSpec::Msr(names) => {
                let events = driver_events("msr", MSR_EVENTS, &names).map_err(at("msr"))?;
                let (mask, files) = numbered(&events);
                let mut pmu = plain_pmu("msr", PmuClass::Msr { events: mask }, None, "config:0-63");
                pmu.type_ = take_type(false);
                pmu.events = files;
                made.push(pmu);
            }
            PmuSpec::Power(p) => {
                let events = driver_events("power", RAPL_EVENTS, &p.events).map_err(at("power"))?;
                let (mask, numbered_files) = numbered(&events);
                // Every RAPL event has the 2^-32 J scale and the Joules unit (rapl.c).
                let mut files = Vec::new();
                for (name, text) in numbered_files {
                    let (scale, unit) = (format!("{name}.scale"), format!("{name}.unit"));
                    files.push((name, text));
                    files.push((scale, "2.3283064365386962890625e-10".into()));
                    files.push((unit, "Joules".into()));
                }
                let cpumask = cpu_set(&cpus, &p.cpumask).map_err(at("power"))?;
                let mut pmu = plain_pmu(
                    "power",
                    PmuClass::Power { events: mask },
                    Some(cpumask),
                    "config:0-7",
                );
                pmu.type_ = take_type(false);
                pmu.events = files;
                made.push(pmu);
            }
            PmuSpec::CstateCore(names) | PmuSpec::CstatePkg(names) if names.is_empty() => {
                return Err(at("cstate")("a cstate PMU without events is not registered".into()));
            }
            PmuSpec::CstateCore(names) | PmuSpec::CstatePkg(names) => {
                // The two drivers differ in name, configs and the CPUs one MSR is read for.
                let (name, table, scope) = if cstate_core {
                    ("cstate_core", CSTATE_CORE_EVENTS, "core")
                } else {
                    ("cstate_pkg", CSTATE_PKG_EVENTS, "package")
                };
                let events = driver_events(name, table, &names).map_err(at(name))?;
                let (mask, files) = numbered(&events);
                let mask_cpus = cpu_set(&cpus, scope).map_err(at(name))?;
                let class = PmuClass::Cstate { events: mask };
                let mut pmu = plain_pmu(name, class, Some(mask_cpus), "config:0-63");
                pmu.type_ = take_type(false);
                pmu.events = files;
                made.push(pmu);
            }
            PmuSpec::Uncore(u) => {
                let cpumask = cpu_set(&cpus, &u.cpumask).map_err(at(&u.name))?;
                for n in 0..u.count.unwrap_or(1) {
                    made.push(SimPmu {
                        name: u.name.replace("{n}", &n.to_string()),
                        type_: take_type(false),
                        class: PmuClass::Uncore {
                            counters: u.counters,
                            fixed: u.fixed,
                            free_running: u.free_running,
                            config_mask: u.config_mask,
                        },
                        cpus: None,
                        cpumask: Some(cpumask.clone()),
                        formats: u.formats.0.clone(),
                        events: u.events.clone(),
                        caps: Vec::new(),
                        files: Vec::new(),
                    });
                }
            }
        }
        for pmu in made {
            if !file_name(&pmu.name) {
                return Err(at(&pmu.name)(format!(
                    "PMU `{}`: not a sysfs directory name (letters, digits, `_`, `-` and `.`)",
                    pmu.name.escape_debug()
                )));
            }
            if pmus.iter().any(|p: &SimPmu| p.name == pmu.name) {
                return Err(at(&pmu.name)(format!(
                    "PMU `{}` is given twice (or is one of the kernel's own: software, tracepoint, breakpoint, cpu_clock, task_clock, kprobe, uprobe)",
                    pmu.name
                )));
            }
            if pmus.len() >= MAX_PMUS {
                return Err(at("pmus")(format!("more than {MAX_PMUS} PMUs")));
            }
            pmus.push(pmu);
        }
    }
    // Each CPU has at most one core PMU: the kernel's hybrid PMUs split the CPUs between them.
    let cores: Vec<&SimPmu> = pmus
        .iter()
        .filter(|p| matches!(p.class, PmuClass::X86Core(_) | PmuClass::Arm(_)))
        .collect();
    for (i, a) in cores.iter().enumerate() {
        for b in &cores[i + 1..] {
            if let Some(cpu) = cpus.iter().map(|c| c.id).find(|&c| a.covers(c) && b.covers(c)) {
                return Err(at(&b.name)(format!(
                    "core PMUs `{}` and `{}` both cover CPU {cpu}; give each of a hybrid's core PMUs its own `cpus`",
                    a.name, b.name
                )));
            }
        }
    }
    let smt = file.topology.iter().any(|b| b.threads > 1);
    Ok(Machine {
        name: file.name,
        description: file.description,
        catalogue_model: file.catalogue_model,
        cpus,
        smt,
        id,
        pmus,
        nmi_watchdog: file.nmi_watchdog,
        paranoid: 2,
        hz,
        mux_interval_ms: crate::realism::mux_interval_ms(hz),
        retire_latency: file.retire_latency,
    })
}
