//! The runtime's integration tests: `real` counts with the running kernel (software events,
//! which work in any VM), `fake` drives the counting logic through the programmable backend,
//! `sysfs` resolves events over the fake tree in `tests/data/sysfs`, `tpebs` samples retire
//! latencies (real kernel and fake rings), `target` checks `-C` lists. One binary: each would otherwise be compiled and
//! linked on its own. The simulated kernel's tests are in `tmetric-sim`.
//!
//! Workloads that must do something precise re-run this test binary: the `helper` test below
//! does nothing in a normal run, and burns CPU or sleeps when `TMETRIC_RUNTIME_HELPER` says so.

mod fake;
mod real;
mod sysfs;
mod target;
mod tpebs;

use std::time::{Duration, Instant};

/// Burns `burn:<ms>` of CPU time, or sleeps `sleep:<n>:<ms>` n times, for the `real` tests.
#[test]
fn helper() {
    let Ok(mode) = std::env::var("TMETRIC_RUNTIME_HELPER") else { return };
    let parts: Vec<&str> = mode.split(':').collect();
    match parts.as_slice() {
        ["burn", ms] => {
            let want = Duration::from_millis(ms.parse().expect("burn:<ms>"));
            let start = cpu_time();
            let mut x = 0u64;
            while cpu_time() - start < want {
                for i in 0..10_000u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
                }
                std::hint::black_box(x);
            }
        }
        ["sleep", n, ms] => {
            let (n, ms): (u32, u64) = (n.parse().expect("sleep:<n>:<ms>"), ms.parse().expect("ms"));
            for _ in 0..n {
                std::thread::sleep(Duration::from_millis(ms));
            }
        }
        ["wall", ms] => {
            // Burns CPU for a wall-clock span, for interval tests.
            let end = Instant::now() + Duration::from_millis(ms.parse().expect("wall:<ms>"));
            let mut x = 0u64;
            while Instant::now() < end {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        _ => panic!("unknown helper mode `{mode}`"),
    }
}

/// This process's user + system CPU time.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the plain struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let t = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    t(usage.ru_utime) + t(usage.ru_stime)
}

/// The argv that runs this binary's `helper` in `mode`. `sh` and `env` exec in the same
/// process (so counting covers the helper); `sh` only sends libtest's chatter to /dev/null.
fn helper_argv(mode: &str) -> Vec<std::ffi::OsString> {
    let exe = std::env::current_exe().expect("test binary path");
    vec![
        "sh".into(),
        "-c".into(),
        "exec \"$0\" \"$@\" >/dev/null".into(),
        "env".into(),
        format!("TMETRIC_RUNTIME_HELPER={mode}").into(),
        exe.into_os_string(),
        "helper".into(),
        "--exact".into(),
        "--test-threads=1".into(),
        "-q".into(),
    ]
}
