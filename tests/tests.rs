//! The root package's one integration-test binary: the `tmetric` CLI end to end.

mod catalogue;
mod cli_cgroup;
mod cli_eval;
mod cli_events;
mod cli_flags;
mod cli_from_perf;
mod cli_harden;
mod cli_list;
mod cli_logs;
mod cli_per_thread;
mod cli_perf_contract;
mod cli_record;
mod cli_record_perf;
mod cli_secure;
mod cli_serve;
mod cli_sim;
mod cli_stat;
mod cli_top;
mod cli_unit;
mod cli_views;
mod latency;
mod plans;
mod readme;
mod support;
mod trees;
