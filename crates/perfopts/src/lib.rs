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
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod config;
pub mod negate;
pub mod unknown;
