//! A simulated kernel and fake sysfs trees for PMUs this VM does not have: Sapphire Rapids,
//! Ice Lake (client), Skylake server with and without SMT, the Alder Lake and Meteor Lake
//! hybrids, AMD Zen 4 and Zen 5 and Arm Neoverse N2, or any machine a file describes.
//!
//! * [`Machine`]: a machine description, data beside the workloads: the built-in ones are
//!   `machines/*.json` ([`Machine::named`], [`Machine::names`], [`MACHINE_FILES`]), a user's
//!   is a file in the same format ([`Machine::load`], [`Machine::parse`], errors naming the
//!   file, line and what was expected): CPUs and topology, the cpuid, each PMU's counter
//!   counts, sysfs files and CPU masks, the NMI watchdog. What the kernel does with them (each
//!   core kind's constraint table, the configs msr, RAPL and cstate take, type numbers) stays
//!   in Rust. [`Machine::write_sysfs`] writes the tree [`tmetric_runtime::Sysfs`] and
//!   [`tmetric_runtime::sysfs::host_cpuid`] read.
//! * [`SimKernel`]: [`tmetric_runtime::Syscalls`] over a machine, refusing what Linux 6.12 refuses
//!   (group validation on an empty PMU, counter masks from the kernel's constraint tables,
//!   the topdown rules, hybrid CPU lists, mixed PMUs) and scheduling groups the kernel's way
//!   (pinned then flexible, the watchdog's pinned cycles event, round-robin rotation every
//!   mux interval of simulated time), so `time_enabled`/`time_running` are computed.
//!   Sampling events get ring buffers from [`tmetric_runtime::Syscalls::mmap`] (heap memory shared
//!   with the reader, [`tmetric_runtime::ring::Mapping::with_refresh`]) and `PERF_RECORD_SAMPLE`
//!   records as simulated time passes, `PERF_RECORD_LOST` when the reader lags.
//! * [`SimWorkload`] ([`workload`]): what the machine runs, as data a user can write: the TMA
//!   tree's true fractions, other metrics' true values and the clock, in phases that change
//!   over time. [`mod@derive`] turns it into every event count the machine's catalogue model
//!   reads, through the vendor formulas (read with this crate's own [`formula`] parser), so
//!   each metric evaluates to its truth ([`Derivation::report`]); [`Profile`] gives the kernel
//!   the rates per phase ([`SimKernel::true_count`] over the phases as they fall), and the
//!   retire latencies of PEBS samples ([`RETIRE_LATENCIES`]).
//! * [`private`]: `--pmu-sim`'s machine on disk: the tree written into a private directory
//!   (0700, a fresh name, removed however the run ends) and the kernel over it
//!   ([`private::simulated`]).
//!
//! A sysfs tree and kernel for a model name:
//! ```
//! use tmetric_sim::{Machine, SimKernel};
//! let machine = Machine::named("sapphirerapids").unwrap();
//! let temp = tempfile::tempdir().unwrap();
//! let dir = temp.path();
//! machine.write_sysfs(&dir.join("sys"), &dir.join("proc")).unwrap();
//! let sysfs = tmetric_runtime::Sysfs::new(dir.join("sys"));
//! assert_eq!(sysfs.core_pmu().as_deref(), Some("cpu"));
//!
//! // SimKernel::new(machine) runs on the real clock; a manual clock is deterministic.
//! use tmetric_runtime::{Attr, Syscalls, sys::READ_FORMAT};
//! let mut kernel = SimKernel::manual(machine);
//! let cycles = Attr { type_: 4, config: 0x3c, read_format: READ_FORMAT, ..Attr::default() };
//! let fd = kernel.perf_event_open(&cycles, -1, 0, -1).unwrap();
//! kernel.advance(1_000_000);
//! let mut buf = [0u8; 40];
//! assert_eq!(kernel.read(fd, &mut buf), Ok(40));
//! let value = u64::from_ne_bytes(buf[24..32].try_into().unwrap());
//! assert_eq!(kernel.true_count(&cycles, 0, 1_000_000), Ok(value));
//! assert_eq!(value, 2_500_000);
//! ```
//!
//! # Kernel rules and where they come from (Linux 6.12)
//! * PMU lookup (`perf_init_event`, kernel/events/core.c): unknown type ENOENT; generic
//!   hardware/cache events go to type 4 or the extended type in config's upper half, falling
//!   back to the PMU of the CPU's core type on hybrids; unmapped generic ids ENOENT.
//! * `x86_pmu_event_init` (arch/x86/events/core.c): hybrid PMU on a CPU outside its `cpus`
//!   ENOENT; `validate_event`/`validate_group` schedule leader, non-OFF siblings and the new
//!   event on an empty PMU (EINVAL when they do not fit); the watchdog is not seen there.
//! * `x86_schedule_events`/`perf_assign_events`: events by increasing constraint weight,
//!   fixed (and metric) counters first, then the lowest free GP counter; `collect_event`
//!   limits (GP + fixed + metrics, at most 8 metrics); AMD pair events (PMU_FL_PAIR).
//!
//! The four rules below are each tested in `tests/kernel.rs` (the test named after the rule)
//! to refuse what 6.12 refuses (paths under /usr/src/linux-source-6.12/, lines of 6.12):
//! * AMD Zen 4 and Zen 5 paired events (`pair_events_take_two_counters_on_zen4`): event code 0x003 (retired
//!   SSE/AVX FLOPs) is a pair event on family 17h and later (arch/x86/events/amd/core.c:351
//!   `amd_is_pair_event_code`, :379 `PERF_X86_EVENT_PAIR`); its `pair_constraint` allows
//!   only even counters and has half the counters' weight (:1475), and scheduling takes the
//!   odd counter above as well (arch/x86/events/core.c:899 in `__perf_sched_find_counter`),
//!   while each pair shrinks the GP budget by one (core.c:1081, `n_pair` counted in
//!   `collect_event`, core.c:1153): three 0x003 events fill Zen 4's 6 counters.
//! * A lone event whose constraint leaves no counter
//!   (`a_lone_event_whose_constraint_leaves_no_counter_is_refused`): `validate_event`
//!   (arch/x86/events/core.c:2360, `!c || !c->weight` at :2372) refuses it with EINVAL even
//!   on an empty PMU. Constraints lose their counters in `intel_pmu_check_event_constraints`
//!   (arch/x86/events/intel/core.c:6318): fixed counters not in `intel_ctrl` are dropped,
//!   pseudo-encodings (event code 0) are not widened to GP counters, and slots and metric
//!   constraints are emptied without the slots fixed counter
//!   ([`Machine::with_fixed_counters`] models such a guest).
//! * Topdown `slots` and metric events with config1/config2, filter bits or sampling
//!   (`topdown_events_need_a_slots_leader`, and `tests/sampling.rs`): `intel_pmu_hw_config`
//!   (arch/x86/events/intel/core.c:4195-4230): config1/config2 EINVAL (:4196), any
//!   `X86_ALL_EVENT_FLAGS` bit EINVAL, a sampling metric event EINVAL (:4209), a metric event
//!   under a leader that is not slots or that samples EINVAL; slots alone may sample.
//! * A hybrid legacy event (`hybrid_pmus_refuse_foreign_cpus_and_mixed_groups`):
//!   `perf_init_event` (kernel/events/core.c:12104) sends PERF_TYPE_HARDWARE/HW_CACHE
//!   without an extended type to PERF_TYPE_RAW (`cpu_core`, :12134); `x86_pmu_event_init`
//!   (arch/x86/events/core.c:2446) answers ENOENT for a CPU outside the hybrid PMU's
//!   `supported_cpus` (:2458); the retry (:12151) then tries every PMU, so the event lands on
//!   the PMU of the CPU it opens on (`cpu_atom` on an E core) and counts that core's events.
//!   With an extended type in config's upper half there is no retry (ENOENT).
//! * Constraint tables (arch/x86/events/intel/core.c): `intel_skl_event_constraints`,
//!   `intel_icl_event_constraints`, `intel_glc_event_constraints`,
//!   `intel_grt_event_constraints`, widened as `intel_pmu_check_event_constraints` does
//!   (0x00c0, 0x003c, 0x013c also on GP counters; 0x0100, 0x0300, 0x0400 fixed only).
//! * Extra registers (`intel_*_extra_regs`, `x86_pmu_extra_regs`): config1 outside the
//!   valid mask EINVAL; shared registers (two offcore response, one ldlat, one frontend)
//!   hold one value each (`__intel_shared_reg_get_constraints`, `intel_alt_er`).
//! * Topdown (`intel_pmu_hw_config`): slots/metric events with config1/config2 or flag bits
//!   EINVAL; a metric event whose group leader is not `slots` EINVAL; only 4 metrics on ICL
//!   (`num_topdown_events`); metric siblings go to ERROR when the leader closes
//!   (PERF_EV_CAP_SIBLING).
//! * Core checks in `perf_event_open`: `pid == -1 && cpu == -1`, a sibling as group leader,
//!   another CPU or context, `pinned` on a sibling, two hardware PMUs in one group: EINVAL;
//!   software and msr events join any group; a software group with a hardware sibling moves
//!   to that PMU.
//! * arm64 (drivers/perf/arm_pmu.c, arm_pmuv3.c): `validate_group` skips OFF events without
//!   `enable_on_exec` (so a disabled leader is not counted at open); CPU_CYCLES without a
//!   threshold prefers the cycle counter, a second one in a group takes a programmable
//!   counter; other events take the lowest free of the 6 counters, a 64-bit (`long`) one
//!   two chained counters where the counters are 32-bit (before FEAT_PMUv3p5; N2's are
//!   64-bit); CHAIN, a threshold past `caps/threshold_max` and `rdpmc` on a CPU event are
//!   EINVAL (`arm_places_cycles_chains_and_thresholds_as_armv8pmu_get_event_idx`).
//! * Uncore (intel/uncore.c, uncore_snbep.c, amd/uncore.c), RAPL and cstate: CPU events
//!   only, no exclude bits; uncore and RAPL events move to the package's `cpumask` CPU (so a
//!   sibling opened on the original CPU is on another CPU: EINVAL), cstate events stay; group
//!   fit checked per box (4 counters, the fixed counter for config 0xff); config bits outside
//!   a box's formats are dropped. msr: config within the detected MSRs, no exclude bits.
//! * Scheduling (`ctx_sched_in`, `merge_sched_in`, `group_can_go_on`): per CPU and PMU,
//!   CPU-context pinned, task pinned, CPU flexible, task flexible; once a group does not fit
//!   no later hardware group of that pass is tried; pinned misfits go to ERROR (read gives
//!   0 bytes); flexible misfits start the mux timer. `perf_rotate_context` moves the first
//!   active flexible group to the end every `perf_event_mux_interval_ms` (default
//!   `PERF_CPU_HRTIMER` = 1000 / HZ ms: 4 at the machines' HZ 250, 1 at HZ 1000).
//! * Realism ([`realism`], off unless a workload's `kernel` object asks): rotation hrtimers on
//!   the grid since boot with interrupt lateness (`perf_mux_hrtimer_restart`,
//!   `perf_mux_hrtimer_handler`, `hrtimer_forward_now`), each CPU and SMT sibling at its own
//!   point of the phases, one count per interrupt and a small random overcount on core
//!   events (Weaver et al., ISPASS 2013), PERF_METRICS as 8-bit fractions drained at every
//!   stop and read (`intel_update_topdown_event`, `icl_get_metrics_event_value`).
//! * Sampling (kernel/events/core.c `perf_copy_attr`, `perf_event_open`, `perf_mmap`,
//!   ring_buffer.c `perf_output_begin`; arch/x86/events/core.c `x86_pmu_hw_config`;
//!   intel/core.c `intel_pmu_hw_config`; intel/ds.c): `sample_type` bits beyond
//!   PERF_SAMPLE_MAX, WEIGHT with WEIGHT_STRUCT, `sample_freq` above 100000 or a period with
//!   bit 63 EINVAL; x86 `precise_ip` above `caps/max_precise` EOPNOTSUPP, on a counting event
//!   EINVAL; sampling topdown metric events, or metric events under a sampling `slots`
//!   leader, EINVAL (`slots` alone may sample); msr, power, cstate and Intel uncore refuse
//!   sampling (EINVAL), AMD uncore has no interrupt (EOPNOTSUPP); precise events on Golden
//!   Cove class cores take the counters of `intel_glc_pebs_event_constraints`. A ring is one
//!   control page plus 0 or a power of two of data pages (EINVAL otherwise, the length
//!   rounded up to pages as mmap(2) does), never for an inherited event with `cpu == -1`; a
//!   second mapping shares the first's ring and must match its size. A sample that does not
//!   fit between `data_head` and `data_tail` is lost, counted for PERF_FORMAT_LOST, and the
//!   next sample that fits is preceded by PERF_RECORD_LOST. Samples come at `sample_freq` per
//!   second of running time, or one per `sample_period` events, and only while the event is
//!   on a counter. The weight struct's `var3_w` is the profile's retire latency only for
//!   precise (PEBS) samples on a machine with PMU_FL_RETIRE_LATENCY (`pebs_timing_info`:
//!   Meteor Lake here, not Sapphire Rapids), 0 otherwise, as `ds.c` leaves it.
//! * NMI watchdog (kernel/watchdog_perf.c): one pinned cycles event per CPU on its core PMU;
//!   on Intel it takes fixed counter 1 (cycles prefer the fixed counter), so a group that
//!   also needs cycles must put them on a GP counter; on AMD it takes a GP counter; on arm64
//!   the cycle counter.
//!
//! # The machines
//! | name | CPUs | core PMUs | other PMUs |
//! |---|---|---|---|
//! | `sapphirerapids` | 2 packages x 2 cores x 2 threads | `cpu`: 8 GP, 4 fixed, 8 metrics | `msr`, `power`, `cstate_*`, `uncore_{imc,cha,iio,m2m,upi}_{0,1}` (cpumask `0,4`) |
//! | `icelake` (client, 0x7E) | 4 cores x 2 threads | `cpu`: 8 GP, 4 fixed, 4 metrics | `msr`, `power`, `cstate_*`, `uncore_arb`, `uncore_clock` |
//! | `skylakex` / `skylakex-nosmt` | 4 cores x 2 threads / 4 cores | `cpu`: 4 / 8 GP, 3 fixed, `any` | `msr`, `power`, `cstate_*`, `uncore_{imc,cha,iio,m2m,upi}_{0,1}` |
//! | `alderlake` / `meteorlake` | P 0-3 (2 x 2), E 4-7 | `cpu_core` (type 4): 8 GP, 4 fixed, 8 metrics; `cpu_atom` (type 10): 6 / 8 GP, 3 fixed | `msr`, `power`, `cstate_*`, `uncore_imc_free_running_{0,1}`, `uncore_arb`, `uncore_clock` (+ `uncore_imc_{0,1}` ADL, `uncore_hac_arb` MTL) |
//! | `amdzen4` | 4 cores x 2 threads | `cpu`: 6 GP | `msr`, `power`, `amd_l3`, `amd_df`, `amd_umc_0` |
//! | `amdzen5` (family 1Ah, 0x44) | 4 cores x 2 threads | `cpu`: 6 GP (Zen 4's rules, amd/core.c) | `msr`, `power`, `amd_l3`, `amd_df`, `amd_umc_0` |
//! | `neoverse-n2` (r0p3) | 8 | `armv8_pmuv3_0`: 6 + cycle counter, `caps/slots` 5 | none |
//!
//! The NMI watchdog is on by default on the x86 machines and off on the arm64 one
//! ([`Machine::with_nmi_watchdog`]). Every catalogue event of a PMU a machine has opens alone
//! on it, and every PMU a metric of the machine's catalogue model reads exists
//! (`tests/kernel.rs`).
//!
//! # Not modelled
//! `exclusive`; variable-length sample fields (READ, CALLCHAIN, RAW, BRANCH_STACK, REGS,
//! STACK_USER, AUX, CGROUP, page sizes: opening such a sampling event gives EOPNOTSUPP);
//! the frequency mode's period adjustment (exactly `sample_freq` samples per second of
//! running time), throttling, large PEBS, and the PEBS tables of cores other than Golden
//! Cove (any event may be precise there); AMD's forwarding of precise events to IBS
//! (refused by `max_precise` 0 instead); samples are written a whole period of the profile's
//! retire latencies at a time (100 samples for the [`RETIRE_LATENCIES`] events), so a
//! partial period is never seen, not even at disable, where the kernel would drain the PEBS
//! buffer; `perf_event_mlock_kb` (the caller is root); wake-ups (a heap ring has no
//! descriptor to poll: the reader finds records at its next bounded wait); ESRCH for unknown pids
//! (any pid is a task that runs continuously), `inherit` children, exec (`enable_on_exec`
//! events count from the open), paranoid levels (the caller is root), HT counter sharing
//! and shared registers between SMT siblings, per-model hardware cache tables (every valid
//! cache event is an unconstrained GP event), offcore register value swaps (only the count
//! of distinct values), in the exact model (without [`realism`]) the 8-bit PERF_METRICS
//! fields and the kernel's per-read truncation of topdown metric counts (a metric count is
//! `slots * fraction` over its whole running time) and SMT siblings' separate phases (every
//! CPU runs the same phase), uncore boxes' own
//! constraint tables (every box event may use any of its counters), free-running counters'
//! wrap, `allow_tsx_force_abort`, CPU hotplug (every CPU is online), and the many uncore
//! PMUs no metric reads (IRP, M3UPI, PCU, UBOX, CXL, HBM on SPR).
//! A task event counts as if the task ran all the time on the first CPU of its hardware PMU
//! (CPU 0 for software events); on a hybrid machine each core type therefore sees it the
//! whole time, where real hardware splits the time between types.
//!
//! # What is tested how
//! `tests/kernel.rs` checks [`SimKernel`] against the kernel's rules, its written trees against
//! [`tmetric_runtime::Sysfs`] and the catalogue, and runs [`tmetric_runtime::CounterSet`] over it;
//! `tests/sampling.rs` its sampling refusals, rings and records, and the runtime's
//! [`tmetric_runtime::Sampler`] over it with the profile's retire latencies.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod derive;
pub mod formula;
mod kernel;
mod machine;
pub mod private;
mod profile;
pub mod realism;
mod sched;
pub mod workload;

pub use derive::{Amount, Derivation, MetricTruth};
pub use kernel::{SimEventKind, SimKernel, SimState};
pub use machine::{
    ArmCore, CoreKind, Cpu, CpuId, MACHINE_FILES, MAX_CPUS, Machine, MachineError, NAMES, PmuClass,
    SimPmu, X86Core, cpu_list,
};
pub use profile::{LatencyPeriod, Profile, RETIRE_LATENCIES, Rate, Source, retire_latency_mean};
pub use realism::{KernelSpec, Realism};
pub use sched::{Constraint, ExtraReg, ExtraRegKind, HwEvent};
pub use workload::{Phase, PhaseSpec, Schedule, SimWorkload, SimWorkloadError, Timeline};
