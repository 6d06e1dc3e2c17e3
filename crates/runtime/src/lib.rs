//! tmetric's runtime: counting events with `perf_event_open`. The only crate with `unsafe`
//! and system calls.
//!
//! * [`alloc`]: the global allocator's wrapper that ends tmetric with one line, not an abort,
//!   when memory runs out.
//! * [`sys`]: the [`Syscalls`] trait (open, read, enable/disable/reset, id, close), the kernel
//!   implementation [`Kernel`] and the plain [`Attr`]; `fake` (the `fake` feature, for tests) is
//!   a programmable stand-in.
//! * [`sysfs`]: PMU directories (`type`, `format/*`, `events/*`, `cpumask`), CPU lists,
//!   topology, the cpuid string and tracefs's tracepoints (globs expanded as perf's, with
//!   [`glob`]), under a configurable root.
//! * [`event`]: `-e` lists and event names to attributes (software, generic hardware,
//!   `pmu/terms/`, tracepoints) or tool events, and errno explanations.
//! * [`counter`]: groups opened per task or per CPU, group reads, multiplex scaling.
//! * [`locale`]: the user's numeric locale (perf prints counts with it).
//! * [`workload`]: the forked command, held until the counters are open; [`inherit`]: the
//!   signal dispositions, mask, descriptor limit and standard descriptors tmetric was started
//!   with, captured before Rust's runtime changes them and given to the workload.
//! * [`run`]: the loop of `tmetric stat` (intervals, signals, totals); [`target`]: `-C` CPU
//!   lists against the online CPUs, the `-p`/`-t` tasks whose exit ends a run.
//! * [`ring`]: the perf mmap ring buffer (sample, lost and throttle records, wrap-around) and
//!   its mapping; [`tpebs`]: retire-latency (`:R`) sampling with a bounded-wait reader thread
//!   and per-event statistics (mean, min, max, last, 97% tail mean).
//!
//! The simulated machines and kernel (hardware paths this VM cannot exercise) are the crate
//! `tmetric-sim`, a [`Syscalls`] implementation over this crate.
//!
//! # What is tested how
//! `tests/real.rs` counts with the running kernel: software events per task (fork, held
//! child, `enable_on_exec`, `inherit`) and per CPU (`-a`), group reads, intervals, exit
//! statuses, `msr/tsc/` where the msr PMU exists, and a hardware event on a machine without a
//! PMU. Multiplexing, never-running counters, weak-group fallback and per-CPU open failures
//! cannot be provoked with software events, so `tests/fake.rs` drives them through
//! [`FakeSyscalls`], as it does the kernel's `perf_event_paranoid` refusals (and the
//! `exclude_kernel` fallback) and `EMFILE` under a descriptor limit; the CLI tests
//! (`tests/cli_harden.rs`) repeat those for real as `nobody` and under `ulimit -n`.
//! `tests/sysfs.rs` resolves events over the fake tree `tests/data/sysfs`.
#![warn(missing_docs)]
// The one crate with `unsafe`: every block states why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod alloc;
pub mod control;
pub mod counter;
pub mod event;
#[cfg(feature = "fake")]
pub mod fake;
pub mod glob;
pub mod inherit;
pub mod input;
pub mod locale;
pub mod mmap;
pub mod output;
pub mod ring;
pub mod run;
pub mod signal;
pub mod sys;
pub mod sysfs;
pub mod target;
pub mod tpebs;
pub mod workload;

pub use control::{Control, ControlError, ControlFds};
pub use counter::{
    Aggregate, CounterSet, CounterSpec, CpuCount, OpenFailure, RawCount, Snapshot, Split, Target,
};
pub use event::{CounterEvent, Environment, EventError, EventKind, ResolvedEvent, ToolEvent};
#[cfg(feature = "fake")]
pub use fake::{FakeSyscalls, Reading};
pub use run::{Rotation, RunError, RunOptions, RunReport, Tick, Turns, Watched, run};
pub use sys::{Attr, Errno, Kernel, Syscalls};
pub use sysfs::{Sysfs, SysfsError, Topology, TracefsProblem};
pub use tpebs::{
    EventReport, LatencyStats, SampleSpec, Sampler, SamplerError, SamplerOptions, Summary,
    TpebsMode,
};
pub use workload::{Exit, Workload, WorkloadError};
