//! perf's aggregation units (`-A`, `--per-core`, `--per-cache`, `--per-cluster`, `--per-die`,
//! `--per-socket`, `--per-node`): which CPUs' counts are summed and evaluated together, under
//! perf's labels (`CPU3`, `S0-D0-C1`, `S0-D0-L3-ID0`, `S0-D0-CLS0`, `S0-D0`, `S0`, `N0`). `stat`, `report` and exporters split a snapshot by these units
//! (`Snapshot::on_cpus`) and evaluate each part.

pub use tmetric_perfstat::Aggregation;

/// Where a CPU sits, as far as the aggregation units need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// Package.
    pub socket: u32,
    /// Die within the package.
    pub die: u32,
    /// Core within the die.
    pub core: u32,
    /// Cluster id.
    pub cluster: u32,
    /// NUMA node (0 without NUMA information).
    pub node: u32,
    /// The cache of `--per-cache`'s level: (level, id).
    pub cache: (u32, u32),
}

/// A CPU's place from sysfs; `cache_level` is `--per-cache`'s level (the last level when
/// `None`).
pub fn place_of(sysfs: &tmetric_runtime::Sysfs, cpu: u32, cache_level: Option<u32>) -> Place {
    let (socket, die, core) = sysfs.cpu_place(cpu);
    let cache = if let Some(found) = sysfs.cpu_cache(cpu, cache_level) {
        found
    } else {
        (cache_level.unwrap_or(0), 0)
    };
    Place {
        socket,
        die,
        core,
        cluster: sysfs.cpu_cluster(cpu),
        node: sysfs.cpu_node(cpu).unwrap_or(0),
        cache,
    }
}

/// The views' split of `cpus` into `aggr`'s units ([`units_for`]): a CPU by number (`-A`),
/// other units by their label; one total for the modes that do not split by CPU (the
/// default, and `--per-thread`, whose threads the caller lists).
pub fn split(
    cpus: &[u32],
    aggr: Aggregation,
    place: impl Fn(u32) -> Place,
) -> crate::view::Partition {
    use crate::view::UnitId;
    if matches!(aggr, Aggregation::Global | Aggregation::Thread) {
        return crate::view::Partition::Global;
    }
    let units = units_for(cpus, aggr, place).into_iter().map(|(label, cpus)| {
        let id = if aggr == Aggregation::Cpu { UnitId::Cpu(cpus[0]) } else { UnitId::Label(label) };
        (id, cpus)
    });
    crate::view::Partition::Cpus(units.collect())
}

/// The units of `cpus` with their labels, in perf's order (by socket, die, ... id, as its
/// sorted aggregation map); `place` gives a CPU's place. The modes that do not split by CPU
/// give one unit without a label.
pub fn units_for(
    cpus: &[u32],
    aggr: Aggregation,
    place: impl Fn(u32) -> Place,
) -> Vec<(String, Vec<i32>)> {
    let mut keyed: Vec<((u32, u32, u32, u32), u32)> = cpus
        .iter()
        .map(|&cpu| {
            let p = place(cpu);
            let key = match aggr {
                Aggregation::Cpu => (cpu, 0, 0, 0),
                Aggregation::Core => (p.socket, p.die, p.core, 0),
                Aggregation::Die => (p.socket, p.die, 0, 0),
                Aggregation::Socket => (p.socket, 0, 0, 0),
                Aggregation::Node => (p.node, 0, 0, 0),
                Aggregation::Cache => (p.socket, p.die, p.cache.0, p.cache.1),
                Aggregation::Cluster => (p.socket, p.die, p.cluster, 0),
                // Not a split by CPU: every CPU is one unit.
                Aggregation::Global | Aggregation::Thread => (0, 0, 0, 0),
            };
            (key, cpu)
        })
        .collect();
    keyed.sort();
    let mut units: Vec<(String, Vec<i32>)> = Vec::new();
    for ((a, b, c, d), cpu) in keyed {
        let label = match aggr {
            Aggregation::Cpu => format!("CPU{cpu}"),
            Aggregation::Core => format!("S{a}-D{b}-C{c}"),
            Aggregation::Die => format!("S{a}-D{b}"),
            Aggregation::Socket => format!("S{a}"),
            Aggregation::Node => format!("N{a}"),
            Aggregation::Cache => format!("S{a}-D{b}-L{c}-ID{d}"),
            Aggregation::Cluster => format!("S{a}-D{b}-CLS{c}"),
            Aggregation::Global | Aggregation::Thread => String::new(),
        };
        match units.iter_mut().find(|u| u.0 == label) {
            Some(u) => u.1.push(cpu as i32),
            None => units.push((label, vec![cpu as i32])),
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two packages of two cores of two threads: CPUs n and n+4 share a core.
    #[test]
    fn units_follow_perfs_labels_in_id_order() {
        let place = |cpu: u32| Place {
            socket: cpu / 2 % 2,
            core: cpu % 2,
            node: cpu / 2 % 2,
            cache: (3, cpu / 2 % 2),
            ..Place::default()
        };
        let cpus: Vec<u32> = (0..8).collect();
        let core = units_for(&cpus, Aggregation::Core, place);
        assert_eq!(core[0], ("S0-D0-C0".to_string(), vec![0, 4]));
        assert_eq!(core.len(), 4);
        let socket = units_for(&cpus, Aggregation::Socket, place);
        assert_eq!(
            socket,
            [("S0".to_string(), vec![0, 1, 4, 5]), ("S1".to_string(), vec![2, 3, 6, 7])]
        );
        assert_eq!(units_for(&[3], Aggregation::Cpu, place), [("CPU3".to_string(), vec![3])]);
        assert_eq!(units_for(&cpus, Aggregation::Die, place).len(), 2);
        let node = units_for(&cpus, Aggregation::Node, place);
        assert_eq!(node[1], ("N1".to_string(), vec![2, 3, 6, 7]));
        let cache = units_for(&cpus, Aggregation::Cache, place);
        assert_eq!(cache[0], ("S0-D0-L3-ID0".to_string(), vec![0, 1, 4, 5]));
        assert_eq!(units_for(&cpus, Aggregation::Cluster, place)[0].0, "S0-D0-CLS0");
        // The views' split: CPUs by number under -A, other units by label.
        use crate::view::{Partition, UnitId};
        assert_eq!(
            split(&[3], Aggregation::Cpu, place),
            Partition::Cpus(vec![(UnitId::Cpu(3), vec![3])])
        );
        let Partition::Cpus(sockets) = split(&cpus, Aggregation::Socket, place) else { panic!() };
        assert_eq!(sockets[1], (UnitId::Label("S1".into()), vec![2, 3, 6, 7]));
    }
}
