//! Reading the machine from sysfs and procfs: PMU directories (`type`, `format/*`, `events/*`,
//! `cpumask`), CPU lists, topology and the cpuid string. The root is a parameter so tests run
//! over fake trees (`tests/data/sysfs`).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Errors reading sysfs or procfs files.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file's content is not what the kernel writes there.
    #[error("{}: expected {expected}, found `{found}`", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the kernel's format is.
        expected: &'static str,
        /// The offending text.
        found: String,
    },
}

/// A file of the tree, through the bounded reader: a FIFO or device planted in a `--sysfs`
/// tree is an error, never a wait or an endless read.
fn read_file(path: impl AsRef<Path>) -> io::Result<String> {
    crate::input::read_to_string(path, crate::input::SYSFS_FILE)
}

fn read_trimmed(path: &Path) -> Result<String, SysfsError> {
    read_file(path)
        .map(|text| text.trim_end().to_string())
        .map_err(|source| SysfsError::Io { path: path.to_path_buf(), source })
}

/// A map of what was read. The lock is held only to look up or insert one whole entry, so a
/// map poisoned by a panic elsewhere is still right.
fn lock<T>(map: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A number as sysfs writes it: decimal, or hex with `0x`.
pub fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// A CPU list such as `0-3,8,10-11` (empty text is an empty list).
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
                if lo > hi || hi - lo > 1 << 20 {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => {
                cpus.insert(part.trim().parse().ok()?);
            }
        }
    }
    Some(cpus.into_iter().collect())
}

/// A sorted CPU list as the kernel prints it (`0-3,8`; empty for none): the inverse of
/// [`parse_cpu_list`], for notes and perf.data's headers.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    out.join(",")
}

/// One `format/<term>` file: which `config` word and which bits a term's value goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    /// The term name (the file name).
    pub name: String,
    /// 0 for `config`, 1 for `config1`, 2 for `config2`, 3 for `config3`.
    pub word: usize,
    /// Bit positions, ascending: a value's bits go there LSB first.
    pub bits: Vec<u8>,
}

impl Format {
    /// Parses `config:0-7,32-35`, `config1:0-63` or `config:21`.
    pub fn parse(name: &str, text: &str) -> Option<Format> {
        let (field, ranges) = text.trim().split_once(':')?;
        let word = match field {
            "config" => 0,
            "config1" => 1,
            "config2" => 2,
            "config3" => 3,
            _ => return None,
        };
        let mut bits = BTreeSet::new();
        for range in ranges.split(',') {
            let (lo, hi) = match range.split_once('-') {
                Some((lo, hi)) => (lo.trim().parse::<u8>().ok()?, hi.trim().parse::<u8>().ok()?),
                None => {
                    let bit = range.trim().parse::<u8>().ok()?;
                    (bit, bit)
                }
            };
            if lo > hi || hi > 63 {
                return None;
            }
            bits.extend(lo..=hi);
        }
        Some(Format { name: name.to_string(), word, bits: bits.into_iter().collect() })
    }

    /// Puts `value` into `config` the way perf's `pmu_format_value` does; `None` when the
    /// value has more significant bits than the format has positions.
    pub fn place(&self, value: u64, config: &mut [u64; 4]) -> Option<()> {
        let width = self.bits.len();
        if width < 64 && value >> width != 0 {
            return None;
        }
        for (i, &bit) in self.bits.iter().enumerate() {
            let mask = 1u64 << bit;
            if (value >> i) & 1 == 1 {
                config[self.word] |= mask;
            } else {
                config[self.word] &= !mask;
            }
        }
        Some(())
    }
}

/// One `term[=value]` of an event string; a bare term means 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The term name.
    pub name: String,
    /// The value text, `None` for a bare term.
    pub value: Option<String>,
}

/// Splits `event=0x3c,umask=1,edge` into terms. Whitespace around terms is ignored.
pub fn parse_terms(text: &str) -> Vec<Term> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| match t.split_once('=') {
            Some((name, value)) => {
                Term { name: name.trim().to_string(), value: Some(value.trim().to_string()) }
            }
            None => Term { name: t.to_string(), value: None },
        })
        .collect()
}

/// A sysfs event alias (`events/<name>` and its `.scale`/`.unit` companions).
#[derive(Debug, Clone, PartialEq)]
pub struct Alias {
    /// The term list, e.g. `event=0x00`.
    pub terms: String,
    /// `<name>.scale`, when present.
    pub scale: Option<f64>,
    /// `<name>.unit`, when present.
    pub unit: Option<String>,
}

/// One PMU directory under sysfs `bus/event_source/devices`: its type, formats and CPUs.
#[derive(Debug, Clone)]
pub struct SysfsPmu {
    /// The directory name.
    pub name: String,
    /// `type`.
    pub type_: u32,
    /// `format/*`, sorted by name.
    pub formats: Vec<Format>,
    /// `cpumask`, for PMUs that count per die or package and want one CPU of each; or, without
    /// one, `cpus`, the CPUs of a hybrid or Arm core PMU's core type (elsewhere ENOENT).
    pub cpumask: Option<Vec<u32>>,
    dir: PathBuf,
    /// `events/`'s entries in directory order, listed once, and the aliases read, by the
    /// name asked for: shared by the clones [`Sysfs::pmu`] hands out.
    events: Arc<OnceLock<Vec<String>>>,
    aliases: Arc<Mutex<BTreeMap<String, Option<Alias>>>>,
}

impl SysfsPmu {
    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The format of term `name`.
    pub fn format(&self, name: &str) -> Option<&Format> {
        self.formats.iter().find(|f| f.name == name)
    }

    /// `events/<name>`, matched ignoring case as perf does; `None` when there is no such
    /// alias.
    pub fn alias(&self, name: &str) -> Result<Option<Alias>, SysfsError> {
        if let Some(alias) = lock(&self.aliases).get(name) {
            return Ok(alias.clone());
        }
        let alias = self.read_alias(name)?;
        lock(&self.aliases).insert(name.to_string(), alias.clone());
        Ok(alias)
    }

    fn read_alias(&self, name: &str) -> Result<Option<Alias>, SysfsError> {
        let events = self.dir.join("events");
        let Some(file) = self.event_entries().iter().find(|e| e.eq_ignore_ascii_case(name)) else {
            return Ok(None);
        };
        let terms = read_trimmed(&events.join(file))?;
        let scale_path = events.join(format!("{file}.scale"));
        let scale = match read_file(&scale_path) {
            Ok(text) => Some(text.trim().parse::<f64>().map_err(|_| SysfsError::Parse {
                path: scale_path.clone(),
                expected: "a decimal scale factor",
                found: text.trim().to_string(),
            })?),
            Err(_) => None,
        };
        let unit = read_file(events.join(format!("{file}.unit")))
            .ok()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty());
        Ok(Some(Alias { terms, scale, unit }))
    }

    /// Names of `events/*` aliases (without the `.scale`/`.unit` companions), sorted.
    pub fn alias_names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.event_entries().iter().filter(|n| !n.contains('.')).cloned().collect();
        names.sort();
        names
    }

    /// `events/`'s entries; none when it cannot be listed.
    fn event_entries(&self) -> &[String] {
        self.events.get_or_init(|| {
            fs::read_dir(self.dir.join("events"))
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        })
    }
}

/// Counts of the machine's CPUs, cores, dies and packages, for metric literals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Highest present CPU number + 1 (`#num_cpus`).
    pub num_cpus: usize,
    /// Online CPUs.
    pub online: Vec<u32>,
    /// Distinct SMT sibling sets among online CPUs.
    pub cores: usize,
    /// Distinct dies.
    pub dies: usize,
    /// Distinct packages.
    pub packages: usize,
    /// SMT active: from `smt/active`, else whether any core has two online threads.
    pub smt_on: bool,
    /// Each online CPU with an SMT sibling, and that sibling (the first other CPU of its
    /// `thread_siblings_list`).
    pub siblings: Vec<(u32, u32)>,
}

/// A sysfs tree: `/sys` on a real machine.
///
/// The PMU directory and each PMU's `type`, formats, CPUs and event names are read once per
/// value: a run asks for them from the resolver, the scheduler's model and the plan once per
/// event, and PMU drivers do not come and go while it counts. A fresh value reads them again.
#[derive(Debug)]
pub struct Sysfs {
    root: PathBuf,
    pmu_names: OnceLock<Vec<String>>,
    pmus: Mutex<BTreeMap<String, SysfsPmu>>,
    /// `(PMU, cpus or cpumask)`: the text, `None` when unreadable.
    pmu_lists: Mutex<BTreeMap<(String, &'static str), Option<String>>>,
}

impl Clone for Sysfs {
    fn clone(&self) -> Sysfs {
        Sysfs {
            root: self.root.clone(),
            pmu_names: self.pmu_names.clone(),
            pmus: Mutex::new(lock(&self.pmus).clone()),
            pmu_lists: Mutex::new(lock(&self.pmu_lists).clone()),
        }
    }
}

impl Sysfs {
    /// A tree rooted at `root` (the directory that plays `/sys`).
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs {
            root: root.into(),
            pmu_names: OnceLock::new(),
            pmus: Mutex::default(),
            pmu_lists: Mutex::default(),
        }
    }

    /// The running machine's `/sys`.
    pub fn system() -> Sysfs {
        Sysfs::new("/sys")
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/bus/event_source/devices`.
    pub fn pmu_devices(&self) -> PathBuf {
        self.root.join("bus/event_source/devices")
    }

    /// Whether a PMU of this name exists.
    pub fn has_pmu(&self, name: &str) -> bool {
        !name.is_empty()
            && !name.contains('/')
            && self.pmu_devices().join(name).join("type").exists()
    }

    /// Every PMU's name, sorted.
    pub fn pmu_names(&self) -> Vec<String> {
        self.pmu_names
            .get_or_init(|| {
                let mut names: Vec<String> = fs::read_dir(self.pmu_devices())
                    .map(|entries| {
                        entries
                            .flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                names.sort();
                names
            })
            .clone()
    }

    /// The PMU whose `type` is `type_` (the core PMU of a legacy event's extended type, the
    /// PMU of a `type:config` event).
    pub fn pmu_by_type(&self, type_: u32) -> Option<String> {
        self.pmu_names().into_iter().find(|n| {
            read_file(self.pmu_devices().join(n).join("type"))
                .is_ok_and(|t| t.trim().parse::<u32>() == Ok(type_))
        })
    }

    /// The core PMU: `cpu`, else `cpu_core` (hybrid x86), else the first `armv*` PMU.
    pub fn core_pmu(&self) -> Option<String> {
        ["cpu", "cpu_core"].into_iter().map(String::from).find(|n| self.has_pmu(n)).or_else(|| {
            self.pmu_names().into_iter().find(|n| n.starts_with("armv") && self.has_pmu(n))
        })
    }

    /// Reads PMU `name`: `type`, every `format/*` and `cpumask` (once; an error is not kept).
    pub fn pmu(&self, name: &str) -> Result<SysfsPmu, SysfsError> {
        if let Some(pmu) = lock(&self.pmus).get(name) {
            return Ok(pmu.clone());
        }
        let pmu = self.read_pmu(name)?;
        lock(&self.pmus).insert(name.to_string(), pmu.clone());
        Ok(pmu)
    }

    /// The CPUs PMU `name` counts on: `cpus` (a hybrid or Arm core PMU's core type), else
    /// `cpumask` (one CPU per die or package of an uncore PMU); `None` when neither is a
    /// readable CPU list.
    pub fn pmu_cpus(&self, name: &str) -> Option<Vec<u32>> {
        self.pmu_list_text(name, "cpus")
            .or_else(|| self.pmu_list_text(name, "cpumask"))
            .and_then(|t| parse_cpu_list(t.trim()))
    }

    /// PMU `name`'s `cpus` or `cpumask` text, read once (the PMU model and the resolver both
    /// need it).
    fn pmu_list_text(&self, name: &str, file: &'static str) -> Option<String> {
        let key = (name.to_string(), file);
        if let Some(text) = lock(&self.pmu_lists).get(&key) {
            return text.clone();
        }
        let text = read_file(self.pmu_devices().join(name).join(file)).ok();
        lock(&self.pmu_lists).insert(key, text.clone());
        text
    }

    fn read_pmu(&self, name: &str) -> Result<SysfsPmu, SysfsError> {
        let dir = self.pmu_devices().join(name);
        let type_path = dir.join("type");
        let type_text = read_trimmed(&type_path)?;
        let type_ = type_text.parse::<u32>().map_err(|_| SysfsError::Parse {
            path: type_path,
            expected: "a decimal PMU type",
            found: type_text.clone(),
        })?;
        let mut formats = Vec::new();
        if let Ok(entries) = fs::read_dir(dir.join("format")) {
            for entry in entries.flatten() {
                let term = entry.file_name().to_string_lossy().into_owned();
                let text = read_trimmed(&entry.path())?;
                let format = Format::parse(&term, &text).ok_or_else(|| SysfsError::Parse {
                    path: entry.path(),
                    expected: "`config[N]:<bit>[-<bit>][,...]` with bits 0 to 63",
                    found: text.clone(),
                })?;
                formats.push(format);
            }
        }
        formats.sort_by(|a, b| a.name.cmp(&b.name));
        // Uncore PMUs name the CPUs to open on in `cpumask`; hybrid core PMUs name the CPUs
        // of their core type in `cpus`, and an event opened elsewhere gets ENOENT.
        let file = if dir.join("cpumask").exists() { "cpumask" } else { "cpus" };
        let cpumask_path = dir.join(file);
        let cpumask = match self.pmu_list_text(name, file) {
            Some(text) => Some(parse_cpu_list(&text).ok_or_else(|| SysfsError::Parse {
                path: cpumask_path,
                expected: "a CPU list such as `0` or `0-3,8`",
                found: text.trim().to_string(),
            })?),
            None => None,
        };
        Ok(SysfsPmu {
            name: name.to_string(),
            type_,
            formats,
            cpumask,
            dir,
            events: Arc::default(),
            aliases: Arc::default(),
        })
    }

    fn cpu_list(&self, file: &str) -> Result<Vec<u32>, SysfsError> {
        let path = self.root.join("devices/system/cpu").join(file);
        let text = read_trimmed(&path)?;
        parse_cpu_list(&text).ok_or(SysfsError::Parse {
            path,
            expected: "a CPU list such as `0-3,8`",
            found: text,
        })
    }

    /// PMU `pmu`'s `perf_event_mux_interval_ms`, if it has a readable one.
    pub fn mux_interval_ms(&self, pmu: &str) -> Option<u64> {
        let text = read_trimmed(&self.pmu_devices().join(pmu).join("perf_event_mux_interval_ms"));
        parse_number(&text.ok()?)
    }

    /// `devices/system/cpu/online`.
    pub fn online_cpus(&self) -> Result<Vec<u32>, SysfsError> {
        self.cpu_list("online")
    }

    /// A CPU's (package, die, core) from its sysfs topology, 0 where a file is missing: perf's
    /// `S0-D0-C1` labels.
    pub fn cpu_place(&self, cpu: u32) -> (u32, u32, u32) {
        let read = |file: &str| -> u32 {
            read_file(self.root.join(format!("devices/system/cpu/cpu{cpu}/topology/{file}")))
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0)
        };
        (read("physical_package_id"), read("die_id"), read("core_id"))
    }

    /// A CPU's NUMA node: the `nodeN` directory under `devices/system/node` whose `cpulist`
    /// holds it (perf's `cpu__get_node`); `None` when the kernel has no NUMA directory.
    pub fn cpu_node(&self, cpu: u32) -> Option<u32> {
        let dir = self.root.join("devices/system/node");
        let mut nodes: Vec<u32> = fs::read_dir(&dir)
            .ok()?
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse().ok())
            .collect();
        nodes.sort_unstable();
        nodes.into_iter().find(|n| {
            read_file(dir.join(format!("node{n}/cpulist")))
                .ok()
                .and_then(|t| parse_cpu_list(t.trim()))
                .is_some_and(|cpus| cpus.contains(&cpu))
        })
    }

    /// A CPU's cluster id (`topology/cluster_id`), 0 where the file is missing.
    pub fn cpu_cluster(&self, cpu: u32) -> u32 {
        read_file(self.root.join(format!("devices/system/cpu/cpu{cpu}/topology/cluster_id")))
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .map_or(0, |v| v.max(0) as u32)
    }

    /// The cache of `level` (the last level when `None`) that `cpu` uses, as perf's
    /// `--per-cache` finds it: (level, id), the id from `cacheN/id` or else the first CPU of
    /// `shared_cpu_list`. `None` when sysfs describes no cache of that level.
    pub fn cpu_cache(&self, cpu: u32, level: Option<u32>) -> Option<(u32, u32)> {
        let caches = self.cpu_caches(cpu);
        match level {
            Some(want) => caches.into_iter().find(|&(l, _)| l == want),
            // The first of the highest level.
            None => caches.into_iter().fold(None, |best, (l, id)| match best {
                Some((b, _)) if b >= l => best,
                _ => Some((l, id)),
            }),
        }
    }

    /// Every cache `cpu` uses, as (level, id) in the directory's order ([`Sysfs::cpu_cache`]'s
    /// ids); empty when sysfs describes none.
    pub fn cpu_caches(&self, cpu: u32) -> Vec<(u32, u32)> {
        let dir = self.root.join(format!("devices/system/cpu/cpu{cpu}/cache"));
        let mut caches = Vec::new();
        let Ok(entries) = fs::read_dir(&dir) else { return caches };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| n.starts_with("index")) else { continue };
            let read = |file: &str| read_file(dir.join(name).join(file)).ok();
            let Some(lvl) = read("level").and_then(|t| t.trim().parse::<u32>().ok()) else {
                continue;
            };
            let id = read("id").and_then(|t| t.trim().parse::<u32>().ok()).or_else(|| {
                read("shared_cpu_list")
                    .and_then(|t| parse_cpu_list(t.trim()))
                    .and_then(|cpus| cpus.first().copied())
            });
            let Some(id) = id else { continue };
            caches.push((lvl, id));
        }
        caches
    }

    /// CPU counts for metric literals. Missing per-CPU topology files count each CPU as its
    /// own core, die and package; a kernel without them has no better answer.
    pub fn topology(&self) -> Result<Topology, SysfsError> {
        let online = self.online_cpus()?;
        let present = self.cpu_list("present").unwrap_or_else(|_| online.clone());
        let num_cpus = present.iter().chain(&online).max().map_or(0, |&m| m as usize + 1);
        let cpu_dir = self.root.join("devices/system/cpu");
        let read = |cpu: u32, file: &str| {
            read_file(cpu_dir.join(format!("cpu{cpu}/topology/{file}")))
                .map(|t| t.trim().to_string())
                .ok()
        };
        let mut cores = BTreeSet::new();
        let mut dies = BTreeSet::new();
        let mut packages = BTreeSet::new();
        let mut multi_thread = false;
        let mut sibling_of = Vec::new();
        for &cpu in &online {
            let text = read(cpu, "thread_siblings_list");
            let list = text.as_deref().and_then(parse_cpu_list);
            if let Some(other) = list.iter().flatten().find(|&&c| c != cpu) {
                sibling_of.push((cpu, *other));
            }
            multi_thread |= list.is_some_and(|s| s.len() > 1);
            cores.insert(text.unwrap_or_else(|| cpu.to_string()));
            let package = read(cpu, "physical_package_id").unwrap_or_else(|| cpu.to_string());
            let die = read(cpu, "die_id").unwrap_or_else(|| "0".into());
            dies.insert((package.clone(), die));
            packages.insert(package);
        }
        let smt_on = match read_file(cpu_dir.join("smt/active")) {
            Ok(text) => text.trim() == "1",
            Err(_) => multi_thread,
        };
        Ok(Topology {
            num_cpus,
            online,
            cores: cores.len(),
            dies: dies.len(),
            packages: packages.len(),
            smt_on,
            siblings: sibling_of,
        })
    }

    /// A tracepoint's id from tracefs (`kernel/tracing`, or the older debugfs path).
    pub fn tracepoint_id(&self, system: &str, name: &str) -> Option<u64> {
        self.tracepoint(system, name).ok()
    }

    /// A tracepoint's id, or why there is none. tracefs is looked for in both places the
    /// kernel offers it (`kernel/tracing`, and `kernel/debug/tracing` under debugfs). When it
    /// is mounted in neither and this is the real `/sys` and tmetric runs as root, it is
    /// mounted at `/sys/kernel/tracing`, as perf's `tracefs__mount` does.
    pub fn tracepoint(&self, system: &str, name: &str) -> Result<u64, TracefsProblem> {
        let dir = self.tracefs_dir()?.join("events").join(system);
        read_id(&dir.join(name).join("id"), &dir)
    }

    /// The tracepoints `system:name` names, as perf 6.12's `parse-events.c` expands them:
    /// either part may be a glob (`*` or `?`, matched as [`crate::glob`] does), expanded over
    /// tracefs's `events` directory in the directory's own order (perf reads it with
    /// `readdir` and does not sort); without a glob, the one tracepoint. Each is `(system,
    /// name, id)`. A glob over systems keeps the systems that have a matching tracepoint
    /// (perf stops at the first that has none, so `*:sched_switch` fails there); a glob that
    /// matches nothing is [`TracefsProblem::NoMatch`].
    pub fn tracepoints(
        &self,
        system: &str,
        name: &str,
    ) -> Result<Vec<(String, String, u64)>, TracefsProblem> {
        use crate::glob;
        if !glob::is_glob(system) && !glob::is_glob(name) {
            return Ok(vec![(
                system.to_string(),
                name.to_string(),
                self.tracepoint(system, name)?,
            )]);
        }
        let events = self.tracefs_dir()?.join("events");
        let systems: Vec<String> = if glob::is_glob(system) {
            dir_entries(&events)?
                .into_iter()
                .filter(|s| !matches!(s.as_str(), "enable" | "header_event" | "header_page"))
                .filter(|s| glob::matches(system, s))
                .collect()
        } else {
            vec![system.to_string()]
        };
        let mut found = Vec::new();
        for sys in systems {
            let dir = events.join(&sys);
            let names = if glob::is_glob(name) {
                match dir_entries(&dir) {
                    Ok(names) => names
                        .into_iter()
                        .filter(|n| !matches!(n.as_str(), "enable" | "filter"))
                        .filter(|n| glob::matches(name, n))
                        .collect(),
                    Err(err) if !glob::is_glob(system) => return Err(err),
                    Err(_) => continue,
                }
            } else {
                vec![name.to_string()]
            };
            for n in names {
                match read_id(&dir.join(&n).join("id"), &dir) {
                    Ok(id) => found.push((sys.clone(), n, id)),
                    // A system the glob matched without this tracepoint.
                    Err(TracefsProblem::NoTracepoint { .. }) if glob::is_glob(system) => {}
                    Err(err) => return Err(err),
                }
            }
        }
        if found.is_empty() {
            let dir = if glob::is_glob(system) { events } else { events.join(system) };
            return Err(TracefsProblem::NoMatch { pattern: format!("{system}:{name}"), dir });
        }
        Ok(found)
    }

    /// The tracefs directory: found, or (as root, on the real `/sys`) mounted, as perf's
    /// `tracefs__mount` does.
    fn tracefs_dir(&self) -> Result<PathBuf, TracefsProblem> {
        let found = self.find_tracefs();
        if matches!(found, Err(TracefsProblem::NotMounted { .. }))
            && self.root == Path::new("/sys")
            && crate::sys::is_root()
        {
            return match crate::sys::mount_tracefs(Path::new("/sys/kernel/tracing")) {
                Ok(()) => self.find_tracefs(),
                Err(errno) => Err(TracefsProblem::NotMounted { mount_failed: Some(errno) }),
            };
        }
        found
    }

    /// The first tracefs directory whose `events` directory exists, else why none does.
    fn find_tracefs(&self) -> Result<PathBuf, TracefsProblem> {
        let mut unreadable = None;
        for base in TRACEFS_DIRS {
            let dir = self.root.join(base);
            match fs::metadata(dir.join("events")) {
                Ok(meta) if meta.is_dir() => return Ok(dir),
                Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
                    unreadable.get_or_insert((dir, err.raw_os_error()));
                }
                _ => {}
            }
        }
        match unreadable {
            Some((path, errno)) => Err(TracefsProblem::Unreadable { path, errno }),
            None => Err(TracefsProblem::NotMounted { mount_failed: None }),
        }
    }
}

/// A tracepoint's id from its `id` file; `system_dir` is named when there is none.
fn read_id(path: &Path, system_dir: &Path) -> Result<u64, TracefsProblem> {
    let none = || TracefsProblem::NoTracepoint { dir: system_dir.to_path_buf() };
    match read_file(path) {
        Ok(text) => text.trim().parse().map_err(|_| none()),
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            Err(TracefsProblem::Unreadable { path: path.to_path_buf(), errno: err.raw_os_error() })
        }
        Err(_) => Err(none()),
    }
}

/// The names in a tracefs directory, in its own order.
fn dir_entries(dir: &Path) -> Result<Vec<String>, TracefsProblem> {
    let read = fs::read_dir(dir).map_err(|err| match err.kind() {
        io::ErrorKind::PermissionDenied => {
            TracefsProblem::Unreadable { path: dir.to_path_buf(), errno: err.raw_os_error() }
        }
        _ => TracefsProblem::NoTracepoint { dir: dir.to_path_buf() },
    })?;
    Ok(read.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
}

/// Where tracefs may be mounted, below the sysfs root.
const TRACEFS_DIRS: [&str; 2] = ["kernel/tracing", "kernel/debug/tracing"];

/// Why a `subsystem:tracepoint` has no id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TracefsProblem {
    /// tracefs is mounted in neither place.
    NotMounted {
        /// Mounting it (as root) failed with this errno.
        mount_failed: Option<crate::sys::Errno>,
    },
    /// tracefs is there but this user may not read it (it is mode 0700 by default).
    Unreadable {
        /// What could not be read.
        path: PathBuf,
        /// The errno, if known.
        errno: Option<i32>,
    },
    /// tracefs is readable and has no such tracepoint.
    NoTracepoint {
        /// The subsystem's directory that was looked in.
        dir: PathBuf,
    },
    /// A glob (`sched:sched_wak*`, `*:sched_switch`) that matches no tracepoint.
    NoMatch {
        /// The glob as written, `system:name`.
        pattern: String,
        /// The directory that was looked in (the system's, or `events` for a system glob).
        dir: PathBuf,
    },
}

impl std::fmt::Display for TracefsProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TracefsProblem::NotMounted { mount_failed } => {
                write!(
                    f,
                    "tracefs is not mounted (looked in /sys/kernel/tracing and /sys/kernel/debug/tracing)"
                )?;
                match mount_failed {
                    Some(errno) => write!(f, " and mounting it failed: {errno}"),
                    None => write!(
                        f,
                        "; as root, mount it with `mount -t tracefs nodev /sys/kernel/tracing`"
                    ),
                }
            }
            TracefsProblem::Unreadable { path, errno } => {
                let why = errno.map(|e| format!(" ({})", crate::sys::Errno(e))).unwrap_or_default();
                write!(
                    f,
                    "{} is not readable by this user{why}; run as root, or remount tracefs with a wider `mode=` (or a `gid=` of this user)",
                    path.display()
                )
            }
            TracefsProblem::NoMatch { pattern, dir } => write!(
                f,
                "no tracepoint matches `{pattern}` in {} (list them with `ls {}`)",
                dir.display(),
                dir.display()
            ),
            TracefsProblem::NoTracepoint { dir } => {
                write!(
                    f,
                    "there is no such tracepoint in {} (list them with `ls {}`)",
                    dir.display(),
                    dir.display()
                )
            }
        }
    }
}

/// perf's x86 cpuid string (`AuthenticAMD-25-11-1`) from `/proc/cpuinfo` text: family in
/// decimal, model and stepping in upper-case hex (tools/perf/arch/x86/util/header.c `get_cpuid_str`).
pub fn x86_cpuid(cpuinfo: &str) -> Option<String> {
    let field = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let vendor = field("vendor_id")?;
    let family: u32 = field("cpu family")?.parse().ok()?;
    let model: u32 = field("model")?.parse().ok()?;
    let stepping: u32 = field("stepping")?.parse().ok()?;
    Some(format!("{vendor}-{family}-{model:X}-{stepping:X}"))
}

/// Whether `/proc/cpuinfo` says the kernel runs under a hypervisor (the x86 `hypervisor`
/// flag).
pub fn cpuinfo_says_virtual(cpuinfo: &str) -> bool {
    cpuinfo.lines().any(|line| {
        line.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "flags" && v.split_whitespace().any(|f| f == "hypervisor")
        })
    })
}

/// The running machine's cpuid string as perf computes it: x86 from `/proc/cpuinfo`, arm64
/// from the first CPU's `midr_el1` (its first 18 characters).
pub fn host_cpuid(sysfs: &Sysfs, proc_root: &Path) -> Option<String> {
    cpuid_from(&read_file(proc_root.join("cpuinfo")).unwrap_or_default(), sysfs)
}

/// [`host_cpuid`] from `/proc/cpuinfo`'s text, already read.
pub fn cpuid_from(cpuinfo: &str, sysfs: &Sysfs) -> Option<String> {
    if let Some(id) = x86_cpuid(cpuinfo) {
        return Some(id);
    }
    let online = sysfs.online_cpus().ok()?;
    let first = online.first()?;
    let midr =
        sysfs.root().join(format!("devices/system/cpu/cpu{first}/regs/identification/midr_el1"));
    let text = read_file(midr).ok()?;
    Some(text.trim().chars().take(18).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_lists_format_as_the_kernel_prints_them_and_parse_back() {
        for (cpus, text) in [
            (vec![], ""),
            (vec![3], "3"),
            (vec![0, 1, 2, 3, 8], "0-3,8"),
            (vec![0, 2, 4, 5], "0,2,4-5"),
            (vec![7, 8, 9, 10, 11], "7-11"),
        ] {
            assert_eq!(format_cpu_list(&cpus), text);
            assert_eq!(parse_cpu_list(text), Some(cpus));
        }
    }

    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn formats_place_bits_lsb_first() {
        // Documentation/ABI/testing/sysfs-bus-event_source-devices-format: AMD `event=0x120` with `config:0-7,32-35`.
        let amd = Format::parse("event", "config:0-7,32-35").unwrap();
        let mut config = [0; 4];
        amd.place(0x120, &mut config).unwrap();
        assert_eq!(config[0], 0x20 | (0x1 << 32));
        let single = Format::parse("edge", "config:18\n").unwrap();
        single.place(1, &mut config).unwrap();
        assert_eq!(config[0] >> 18 & 1, 1);
        let wide = Format::parse("offcore_rsp", "config1:0-63").unwrap();
        wide.place(u64::MAX, &mut config).unwrap();
        assert_eq!(config[1], u64::MAX);
        // 0x1000 needs 13 bits; the format has 12.
        assert!(amd.place(0x1000, &mut [0; 4]).is_none());
        assert!(Format::parse("x", "config4:0").is_none());
        assert!(Format::parse("x", "config:0-64").is_none());
    }

    #[test]
    fn terms_and_numbers() {
        let terms = parse_terms("event=0x3c, umask=1,edge");
        assert_eq!(terms.len(), 3);
        assert_eq!(terms[0], Term { name: "event".into(), value: Some("0x3c".into()) });
        assert_eq!(terms[2].value, None);
        assert_eq!(parse_number("0x3c"), Some(0x3c));
        assert_eq!(parse_number("12"), Some(12));
        assert_eq!(parse_number("x"), None);
    }

    #[test]
    fn cpuid_strings() {
        let amd = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: fpu hypervisor lm\n";
        assert_eq!(x86_cpuid(amd).as_deref(), Some("AuthenticAMD-25-11-1"));
        assert!(cpuinfo_says_virtual(amd));
        let intel =
            "vendor_id : GenuineIntel\ncpu family : 6\nmodel : 154\nstepping : 10\nflags : fpu\n";
        assert_eq!(x86_cpuid(intel).as_deref(), Some("GenuineIntel-6-9A-A"));
        assert!(!cpuinfo_says_virtual(intel));
    }
}
