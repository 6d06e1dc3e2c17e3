//! The engine's errors: every way a front end's request can fail, as typed values worded once
//! by their `Display` (the CLI, the region API and the exporter print them as is).

use crate::defaults::TopdownError;
use crate::literals::Conflict;
use crate::models::{HostModelError, ModelError};
use crate::replay::ReplayError;
use crate::select::Miss;
use crate::threads::ThreadsError;
use crate::tpebs::TpebsError;

/// Any error the engine returns. Each module's own error converts into it, so a front end
/// that drives several steps holds one type and can still match on the kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `-M` item selects nothing.
    #[error(transparent)]
    Select(#[from] Miss),
    /// `--cputype` names no core PMU of this machine.
    #[error(transparent)]
    CpuType(#[from] CpuTypeError),
    /// `-G` cannot be applied to the plan.
    #[error(transparent)]
    Cgroups(#[from] CgroupError),
    /// A recorded plan cannot be rebuilt.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// A literal was given two values.
    #[error(transparent)]
    Literal(#[from] Conflict),
    /// Retire latencies cannot be sampled or read.
    #[error(transparent)]
    Tpebs(#[from] TpebsError),
    /// The threads to count cannot be listed.
    #[error(transparent)]
    Threads(#[from] ThreadsError),
    /// `--model` names no model.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The model `-M` items are looked up in is not known.
    #[error(transparent)]
    HostModel(#[from] HostModelError),
    /// `--topdown` cannot measure as asked.
    #[error(transparent)]
    Topdown(#[from] TopdownError),
    /// A measurement's flags do not make a plan.
    #[error(transparent)]
    Setup(#[from] crate::setup::SetupError),
}

/// `--cputype TEXT` names no core PMU here. perf 6.12 fails with "--cputype TEXT is not
/// supported!"; this says which PMUs there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--cputype {text} is not supported: {}", choices(.core_pmus))]
pub struct CpuTypeError {
    /// What was given.
    pub text: String,
    /// The machine's core PMUs (`cpu`, or `cpu_core` and `cpu_atom`); empty without one.
    pub core_pmus: Vec<String>,
}

fn choices(core: &[String]) -> String {
    if core.is_empty() {
        return "this machine has no core PMU".to_string();
    }
    let names: Vec<String> = core
        .iter()
        .flat_map(|c| match c.strip_prefix("cpu_") {
            Some(short) => vec![format!("`{short}`"), format!("`{c}`")],
            None => vec![format!("`{c}`")],
        })
        .collect();
    format!(
        "this machine's core PMUs are {} (expected one of {})",
        core.join(", "),
        names.join(", ")
    )
}

/// Why `--filter` cannot be applied to a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// `--filter` before any `-e`: perf's own message.
    #[error("--filter option should follow a -e tracepoint or HW tracer option")]
    NoEvent,
    /// The `-e` list before `--filter` has an event that is not a tracepoint.
    #[error(
        "--filter `{filter}`: `{event}` is not a tracepoint; tmetric sets filters on tracepoints only (perf's address and BPF filters are for tracing and sampling): give --filter right after a -e of tracepoints"
    )]
    NotTracepoint {
        /// The event.
        event: String,
        /// The filter.
        filter: String,
    },
}

/// Why perf's `-G` cannot be applied to a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CgroupError {
    /// `-G` came before (or without) any counted event: perf's own message.
    #[error("must define events before cgroups: give -e EVENTS with -G")]
    NoEvents,
    /// The cgroups given would put one group's events in several cgroups, and the kernel
    /// counts a group in one.
    #[error(
        "the group {{{}}} would count in several cgroups; the kernel counts a group in one: give its events one cgroup",
        .events.join(",")
    )]
    GroupSplit {
        /// The group's events.
        events: Vec<String>,
    },
}
