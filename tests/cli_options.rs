//! perf 6.12's `perf stat` options as perf reads them, run as the binary: options tmetric does
//! not take say so and what to use instead (never clap's usage line), unknown ones name the
//! closest, and the order rules perf applies while reading options one by one (`-G` after
//! `-e`, `--cputype` before it).

use crate::support::check_all;

#[test]
fn options_tmetric_does_not_take_say_so_and_what_to_use() {
    check_all(
        &[
            &["--bpf-counters", "-e", "cs", "true"],
            &["stat", "-b", "7", "true"],
            &["record", "--pfm-events", "x", "true"],
            &["--per-clustr", "true"],
            &["-W", "true"],
            &["list", "--bogus"],
        ],
        "cli_options__not_taken",
    );
}

#[test]
fn order_rules_are_perfs() {
    check_all(
        &[&["-a", "-G", "/", "-e", "cs", "true"], &["-e", "cs", "--cputype", "core", "true"]],
        "cli_options__order",
    );
}
