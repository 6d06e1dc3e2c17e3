//! perf's aggregation units (`-A`, `--per-core`, `--per-die`, `--per-socket`): which CPUs'
//! counts are summed and evaluated together, under perf's labels (`CPU3`, `S0-D0-C1`, `S0-D0`,
//! `S0`). `stat`, `report` and exporters split a snapshot by these units
//! (`Snapshot::on_cpus`) and evaluate each part.

/// How counts are split over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggr {
    /// `-A`: every CPU apart.
    Cpu,
    /// `--per-core`.
    Core,
    /// `--per-die`.
    Die,
    /// `--per-socket`.
    Socket,
}

/// The units of `cpus` with their labels, in order of first CPU; `place` gives a CPU's
/// (socket, die, core).
pub fn units_for(
    cpus: &[u32],
    aggr: Aggr,
    place: impl Fn(u32) -> (u32, u32, u32),
) -> Vec<(String, Vec<i32>)> {
    let mut units: Vec<(String, Vec<i32>)> = Vec::new();
    for &cpu in cpus {
        let (s, d, c) = place(cpu);
        let label = match aggr {
            Aggr::Cpu => format!("CPU{cpu}"),
            Aggr::Core => format!("S{s}-D{d}-C{c}"),
            Aggr::Die => format!("S{s}-D{d}"),
            Aggr::Socket => format!("S{s}"),
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
    fn units_follow_perfs_labels_in_cpu_order() {
        let place = |cpu: u32| (cpu / 2 % 2, 0, cpu % 2);
        let cpus: Vec<u32> = (0..8).collect();
        let core = units_for(&cpus, Aggr::Core, place);
        assert_eq!(core[0], ("S0-D0-C0".to_string(), vec![0, 4]));
        assert_eq!(core.len(), 4);
        let socket = units_for(&cpus, Aggr::Socket, place);
        assert_eq!(
            socket,
            [("S0".to_string(), vec![0, 1, 4, 5]), ("S1".to_string(), vec![2, 3, 6, 7])]
        );
        assert_eq!(units_for(&[3], Aggr::Cpu, place), [("CPU3".to_string(), vec![3])]);
        assert_eq!(units_for(&cpus, Aggr::Die, place).len(), 2);
    }
}
