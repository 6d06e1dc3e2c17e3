//! `--pmu-sim MODEL`: runs `tmetric stat` against the runtime's simulated kernel and a fake
//! sysfs tree written for that model, so hardware paths can be tried on any machine.

use crate::stat::StatArgs;

/// Runs `tmetric stat` on the simulated PMU `name`.
pub(crate) fn run_simulated(_args: &StatArgs, name: &str) -> anyhow::Result<i32> {
    anyhow::bail!("no simulated PMU `{name}` yet")
}
