//! perf 6.12's command-line and configuration conventions, as `perf stat` applies them outside
//! any one subcommand's flags, for every front end that takes perf's options (`stat`,
//! `record`, `report`): what perf reads and decides, never how tmetric prints.
//!
//! * [`config`]: perf's config files (`$PERF_CONFIG`, `/etc/perfconfig`, `~/.perfconfig`)
//!   and the `[stat]` keys perf reads.
//! * [`negate`]: perf's `--no-` before any boolean option, applied to a command line before
//!   clap reads it.
//! * [`unknown`]: what an option tmetric does not take is answered with (perf's options left
//!   out, each with what to use instead).
//! * [`run`]: perf's options of how a run is made ([`run::PerfOptions`]: `--log-fd`,
//!   `--pre`/`--post`, `-S`, `-i`, `--no-scale`, `-T`, `--smi-cost`) and `-r 0`'s repeats.
//! * [`rules`]: perf's rules for option values (`-r`, `--per-cache`, `-G`).
//! * [`exits`]: how a run ends as perf's does: its exit codes ([`exits::PerfExit`]), the
//!   workload's fate said as perf says it, the signal that ended a run raised again.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
pub mod exits;
pub mod negate;
pub mod rules;
pub mod run;
pub mod unknown;
