//! Load: scrape latencies, descriptors and memory flat under cgroup churn (`load_short`), and the
//! issue's full load test beside `perf stat --for-each-cgroup` (`load_full`, ignored by default).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli_cgroup::mount;

use super::{Serve, http_get, make};

/// A load run: sorted latencies, descriptors and memory along the way, and after.
type LoadRun = (Vec<Duration>, Vec<(usize, u64)>, (usize, u64));

/// Pids' descriptor count and resident memory (kB).
fn fds_and_rss(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (fds, rss)
}

/// Scrapes `addr` at `rate` per second for `seconds`: per-scrape latencies, sorted, and the
/// descriptors and memory of `pid` every `seconds / 6`.
fn scrape_load(
    addr: &str,
    rate: u32,
    seconds: f64,
    pid: u32,
) -> (Vec<Duration>, Vec<(usize, u64)>) {
    let step = Duration::from_secs_f64(1.0 / f64::from(rate));
    let start = Instant::now();
    let mut times = Vec::new();
    let mut samples = Vec::new();
    let mut k = 0u32;
    while start.elapsed().as_secs_f64() < seconds {
        if k.is_multiple_of((rate * seconds as u32 / 6).max(1)) {
            samples.push(fds_and_rss(pid));
        }
        let due = start + step * k;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = Instant::now();
        let (status, body) = http_get(addr, "/metrics", None);
        assert_eq!(status, 200);
        assert!(body.contains("# TYPE tmetric_intervals_total counter"));
        times.push(t.elapsed());
        k += 1;
    }
    times.sort();
    samples.push(fds_and_rss(pid));
    (times, samples)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Scrapes at 50/s while `churn` cgroups are made and removed, for `seconds`; returns the
/// latencies and the server's descriptors and memory along the way, and once the last
/// cgroups are gone.
fn load(mount: &Path, churn: usize, seconds: f64) -> LoadRun {
    let tag = format!("load{churn}");
    let pattern = format!("/tmetric-test-{tag}-*-{}", std::process::id());
    let serve = Serve::start(&[
        "-M",
        "Software",
        "--cgroup",
        &pattern,
        "--interval",
        "500ms",
        "--reads",
        "2",
    ]);
    serve.json_after(2);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churner = {
        let (mount, stop, tag) = (mount.to_path_buf(), Arc::clone(&stop), tag.clone());
        std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let made = make(&mount, &format!("{tag}-r{round}"), churn);
                std::thread::sleep(Duration::from_millis(700));
                drop(made);
                round += 1;
            }
        })
    };
    let (times, along) = scrape_load(&serve.addr, 50, seconds, serve.pid());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churner.join().unwrap();
    // Let the last removals be seen.
    let n = serve.json_after(0)["interval"]["number"].as_u64().unwrap();
    let view = serve.json_after(n + 2);
    assert_eq!(view["targets"].as_array().unwrap().len(), 1, "{view}");
    // A scrape's connection still closing holds a descriptor for a moment, and a busy
    // machine may have two: wait up to 5 s for them. A leaked cgroup holds its own for good.
    let limit = along[0].0 + 1;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut after = fds_and_rss(serve.pid());
    while after.0 > limit && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = fds_and_rss(serve.pid());
    }
    (times, along, after)
}

#[test]
fn load_short() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let (times, along, after) = load(&mount, 10, 3.0);
    let before = along[0];
    eprintln!(
        "load_short: {} scrapes, p50 {:?}, p99 {:?}; descriptors and RSS (kB) along the way {along:?}, after {after:?}",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
    );
    assert!(times.len() >= 100);
    // Every cgroup made was closed again (a scrape's connection may still be open).
    assert!(after.0 <= before.0 + 1, "descriptors grew from {} to {}", before.0, after.0);
    assert!(after.1 < before.1 + 16 * 1024, "memory grew from {} to {} kB", before.1, after.1);
}

/// CPU seconds of `pid` so far (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// The load test: 50 scrapes/s for 60 s while 100 cgroups are made and removed;
/// then CPU per interval for 1, 10 and 100 cgroups next to `perf stat -I
/// --for-each-cgroup` on the same cgroups in the same run. `cargo build --release && \
/// TMETRIC_BIN=target/release/tmetric cargo test --test tests cli_serve::load::load_full --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn load_full() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let (times, along, after) = load(&mount, 100, 60.0);
    let before = along[0];
    eprintln!(
        "load_full: {} scrapes in 60 s, p50 {:?}, p99 {:?}, max {:?}; descriptors and RSS (kB) every 10 s {along:?}, after {after:?}",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().unwrap(),
    );
    assert!(after.0 <= before.0 + 1, "descriptors grew from {} to {}", before.0, after.0);
    // Memory follows the cgroups open and what the allocator keeps, but does not climb: the
    // second half never passes the first half's peak by more than 2 MB.
    let half = along.len() / 2;
    let peak = |part: &[(usize, u64)]| part.iter().map(|s| s.1).max().unwrap_or(0);
    assert!(
        peak(&along[half..]).max(after.1) < peak(&along[..half]) + 2048,
        "memory climbs: {along:?}, after {after:?}"
    );
    for n in [1usize, 10, 100] {
        let cgroups = make(&mount, &format!("cost{n}"), n);
        let names: Vec<String> = cgroups.iter().map(|c| c.name.clone()).collect();
        let pattern = format!("/tmetric-test-cost{n}-*-{}", std::process::id());
        let seconds = 20.0;
        let serve = Serve::start(&[
            "-M",
            "Software",
            "--no-host",
            "--cgroup",
            &pattern,
            "--interval",
            "1s",
            "--reads",
            "2",
        ]);
        let v0 = serve.json_after(1);
        let c0 = cpu_seconds(serve.pid());
        let own = |serve: &Serve| {
            let (_, text) = serve.get("/metrics");
            let get = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok()))
                    .unwrap_or(f64::NAN)
            };
            (get("tmetric_collector_cpu_seconds_total "), get("tmetric_render_cpu_seconds_total "))
        };
        let own0 = own(&serve);
        let i0 = v0["interval"]["number"].as_u64().unwrap();
        // The same events per cgroup, perf's way, at the same time.
        let events = "task-clock,context-switches,cpu-migrations,page-faults,major-faults,msr/tsc/";
        let mut perf = Command::new("perf")
            .args([
                "stat",
                "-a",
                "-I",
                "1000",
                "-x,",
                "-e",
                events,
                "--for-each-cgroup",
                &names.join(","),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("perf runs");
        std::thread::sleep(Duration::from_secs_f64(seconds));
        let perf_cpu = cpu_seconds(perf.id());
        let _ = Command::new("kill").args(["-INT", &perf.id().to_string()]).status();
        let _ = perf.wait();
        let v1 = serve.json_after(0);
        let c1 = cpu_seconds(serve.pid());
        let own1 = own(&serve);
        let intervals = v1["interval"]["number"].as_u64().unwrap() - i0;
        let scrape = Instant::now();
        for _ in 0..20 {
            http_get(&serve.addr, "/metrics", None);
        }
        let per_scrape = scrape.elapsed() / 20;
        eprintln!(
            "cost {n} cgroups: tmetric serve {:.2} ms CPU per 1 s interval ({:.3} ms per cgroup; of which reading and evaluating {:.2} ms, rendering {:.2} ms, by its own counters), scrape {:?}; perf stat -I 1000 --for-each-cgroup {:.2} ms CPU per interval",
            (c1 - c0) * 1e3 / intervals as f64,
            (c1 - c0) * 1e3 / intervals as f64 / n as f64,
            (own1.0 - own0.0) * 1e3 / intervals as f64,
            (own1.1 - own0.1) * 1e3 / intervals as f64,
            per_scrape,
            perf_cpu * 1e3 / seconds,
        );
        drop(serve);
        drop(cgroups);
    }
}
