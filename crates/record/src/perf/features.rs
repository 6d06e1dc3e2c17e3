//! perf.data's header features, from the machine: the host's name, kernel and memory, and
//! the counted machine's CPUs, topology, NUMA nodes, caches and PMUs from its sysfs tree.

use std::path::{Path, PathBuf};

use tmetric_perfdata::write::{self as pw, Features};

use crate::format::Header;
use crate::header::HeaderFacts;

/// A file's first line, trimmed, or `None`.
fn read_line(path: &Path) -> Option<String> {
    let text = tmetric_runtime::input::read_sysfs(path).ok()?;
    Some(text.lines().next()?.trim().to_string()).filter(|s| !s.is_empty())
}

/// The header features, from the machine: the host's name, kernel and memory, and the
/// counted machine's CPUs, topology, caches and PMUs from its sysfs tree (the simulated one
/// with `--pmu-sim`).
pub(super) fn machine(
    facts: &HeaderFacts<'_>,
    header: &Header,
    groups: Vec<pw::Group>,
) -> Features {
    let sys = facts.host.sysfs().root();
    let cpu_dir = sys.join("devices/system/cpu");
    let online = &header.topology.cpus;
    let present = read_line(&cpu_dir.join("present"))
        .and_then(|t| tmetric_runtime::sysfs::parse_cpu_list(&t))
        .unwrap_or_else(|| online.clone());
    let avail = present.iter().chain(online).max().map_or(0, |&m| m + 1);
    let cpuid = header.cpuid.as_deref().map(super::header_cpuid);
    let arch = match &header.cpuid {
        Some(id) if id.starts_with("GenuineIntel") || id.starts_with("AuthenticAMD") => {
            "x86_64".to_string()
        }
        Some(id) if id.starts_with("0x") => "aarch64".to_string(),
        _ => std::env::consts::ARCH.to_string(),
    };
    let cpu_desc = facts.host.cpuinfo().lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    });
    let total_mem_kb = tmetric_runtime::input::read_sysfs("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    });
    let mut cmdline: Vec<String> = std::env::args().collect();
    if let (Some(first), Ok(exe)) = (cmdline.first_mut(), std::env::current_exe()) {
        *first = exe.display().to_string();
    }
    let pmus = Pmus::of(facts.host.sysfs());
    Features {
        hostname: read_line(Path::new("/proc/sys/kernel/hostname")),
        os_release: read_line(Path::new("/proc/sys/kernel/osrelease")),
        version: Some(format!("tmetric {}", env!("CARGO_PKG_VERSION"))),
        arch: Some(arch),
        nr_cpus: Some((avail, online.len() as u32)),
        cpu_desc,
        cpuid,
        total_mem_kb,
        cmdline: Some(cmdline),
        topology: Some(topology(&header.topology.places, avail)),
        numa: numa_nodes(sys),
        pmu_mappings: Some(pmus.mappings),
        groups,
        caches: caches(&cpu_dir, online),
        cpu_pmu_caps: pmus.cpu_caps,
        hybrid: pmus.hybrid,
        pmu_caps: Some(pmus.caps),
    }
}

/// `CPU_TOPOLOGY` from the places the header recorded (every online CPU); `avail` CPUs get
/// ids, -1 for those not online.
fn topology(places: &[[u32; 4]], avail: u32) -> pw::CpuTopology {
    let group_by = |key: &dyn Fn(&[u32; 4]) -> Vec<u32>| -> Vec<String> {
        let mut keys: Vec<(Vec<u32>, Vec<u32>)> = Vec::new();
        for p in places {
            let k = key(p);
            match keys.iter_mut().find(|(x, _)| *x == k) {
                Some((_, cpus)) => cpus.push(p[0]),
                None => keys.push((k, vec![p[0]])),
            }
        }
        keys.into_iter()
            .map(|(_, mut cpus)| {
                cpus.sort_unstable();
                tmetric_runtime::sysfs::format_cpu_list(&cpus)
            })
            .collect()
    };
    pw::CpuTopology {
        package_cpus: group_by(&|p| vec![p[1]]),
        core_cpus: group_by(&|p| vec![p[1], p[2], p[3]]),
        die_cpus: group_by(&|p| vec![p[1], p[2]]),
        ids: (0..avail)
            .map(|cpu| match places.iter().find(|p| p[0] == cpu) {
                Some(p) => (p[3] as i32, p[1] as i32, p[2] as i32),
                None => (-1, -1, -1),
            })
            .collect(),
    }
}

/// The PMU features: each PMU's type, its `caps/`, and the hybrid core PMUs' CPUs.
struct Pmus {
    mappings: Vec<(u32, String)>,
    cpu_caps: Option<Vec<(String, String)>>,
    hybrid: Option<Vec<(String, String)>>,
    caps: Vec<(String, Vec<(String, String)>)>,
}

impl Pmus {
    fn of(sysfs: &tmetric_runtime::Sysfs) -> Pmus {
        let pmus = sysfs.pmu_names();
        let pmu_dir = sysfs.pmu_devices();
        let mappings: Vec<(u32, String)> = pmus
            .iter()
            .filter_map(|p| {
                Some((read_line(&pmu_dir.join(p).join("type"))?.parse().ok()?, p.clone()))
            })
            .collect();
        let caps = |pmu: &str| -> Option<Vec<(String, String)>> {
            let mut caps: Vec<(String, String)> = std::fs::read_dir(pmu_dir.join(pmu).join("caps"))
                .ok()?
                .flatten()
                .filter_map(|e| {
                    let value = read_line(&e.path()).unwrap_or_default();
                    Some((e.file_name().into_string().ok()?, value))
                })
                .collect();
            caps.sort();
            (!caps.is_empty()).then_some(caps)
        };
        let hybrid: Vec<(String, String)> = ["cpu_core", "cpu_atom"]
            .iter()
            .filter_map(|p| Some((p.to_string(), read_line(&pmu_dir.join(p).join("cpus"))?)))
            .collect();
        Pmus {
            mappings,
            cpu_caps: caps("cpu"),
            hybrid: (!hybrid.is_empty()).then_some(hybrid),
            caps: pmus
                .iter()
                .filter(|p| *p != "cpu")
                .filter_map(|p| Some((p.clone(), caps(p)?)))
                .collect(),
        }
    }
}

/// `devices/system/node/node*`: each node's CPUs and memory.
fn numa_nodes(sys: &Path) -> Option<Vec<pw::NumaNode>> {
    let dir = sys.join("devices/system/node");
    let mut nodes = Vec::new();
    for entry in std::fs::read_dir(&dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(node) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let meminfo =
            tmetric_runtime::input::read_sysfs(entry.path().join("meminfo")).unwrap_or_default();
        let field = |key: &str| -> u64 {
            meminfo
                .lines()
                .find_map(|l| {
                    let rest = l.split_once(key)?.1.trim_start_matches(':');
                    rest.split_whitespace().next()?.parse().ok()
                })
                .unwrap_or(0)
        };
        nodes.push(pw::NumaNode {
            node,
            mem_total_kb: field("MemTotal"),
            mem_free_kb: field("MemFree"),
            cpus: read_line(&entry.path().join("cpulist")).unwrap_or_default(),
        });
    }
    nodes.sort_by_key(|n| n.node);
    (!nodes.is_empty()).then_some(nodes)
}

/// Every distinct cache of the online CPUs (`cache/index*`), by level and type.
fn caches(cpu_dir: &Path, online: &[u32]) -> Option<Vec<pw::Cache>> {
    let mut out: Vec<pw::Cache> = Vec::new();
    for cpu in online {
        let Ok(entries) = std::fs::read_dir(cpu_dir.join(format!("cpu{cpu}/cache"))) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("index")))
            .collect();
        dirs.sort();
        for d in dirs {
            let num = |f: &str| read_line(&d.join(f)).and_then(|t| t.parse::<u32>().ok());
            let (Some(level), Some(type_), Some(cpus)) =
                (num("level"), read_line(&d.join("type")), read_line(&d.join("shared_cpu_list")))
            else {
                continue;
            };
            let cache = pw::Cache {
                level,
                line_size: num("coherency_line_size").unwrap_or(0),
                sets: num("number_of_sets").unwrap_or(0),
                ways: num("ways_of_associativity").unwrap_or(0),
                type_,
                size: read_line(&d.join("size")).unwrap_or_default(),
                cpus,
            };
            if !out
                .iter()
                .any(|c| c.level == cache.level && c.type_ == cache.type_ && c.cpus == cache.cpus)
            {
                out.push(cache);
            }
        }
    }
    out.sort_by(|a, b| (a.level, &a.type_).cmp(&(b.level, &b.type_)));
    (!out.is_empty()).then_some(out)
}
