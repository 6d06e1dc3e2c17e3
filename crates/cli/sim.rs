//! `--pmu-sim MODEL`: runs `tmetric stat` against the runtime's simulated kernel and a fake
//! sysfs tree written for that machine, so hardware paths can be tried on any machine. Every
//! output says that it is simulated.

use anyhow::Context;
use tmetric_runtime::Sysfs;
use tmetric_sim::{Machine, SimKernel, Workload};

use crate::stat::{self, StatArgs};

/// Removes the simulated tree when the run ends, however it ends.
struct TempTree(std::path::PathBuf);

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `tmetric stat` on the simulated PMU `name`.
pub fn run_simulated(
    args: &StatArgs,
    name: &str,
    record: Option<&std::path::Path>,
) -> anyhow::Result<i32> {
    let machine = Machine::named(name).with_context(|| {
        format!(
            "no simulated PMU `{name}`; the simulated machines are {}",
            Machine::names().join(", ")
        )
    })?;
    let dir = TempTree(
        std::env::temp_dir().join(format!("tmetric-pmu-sim-{}-{name}", std::process::id())),
    );
    let (sys, proc_root) = (dir.0.join("sys"), dir.0.join("proc"));
    machine.write_sysfs(&sys, &proc_root).with_context(|| {
        format!("cannot write the simulated sysfs tree under {}", dir.0.display())
    })?;
    let sysfs = Sysfs::new(&sys);
    let workload = match &args.pmu_sim_workload {
        Some(w) => Workload::load(w).map_err(|e| anyhow::anyhow!("--pmu-sim-workload: {e}"))?,
        None => Workload::default_workload(),
    };
    let kernel = SimKernel::with_workload(machine, workload);
    stat::run_on(args, kernel, &sysfs, &proc_root, Some(name), record)
}
