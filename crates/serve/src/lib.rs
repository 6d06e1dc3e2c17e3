//! `tmetric serve`'s exporter and `tmetric rules`' generators: compiled metrics per host and
//! per cgroup over HTTP for Prometheus (`collector`: engine sessions read every interval;
//! `expo`: Prometheus text, OpenMetrics and JSON; `http`: the endpoints; `cgroups`:
//! discovery and path labels; `names`: Prometheus names and base units), and the recording
//! rules and Grafana dashboard that compute the same metrics from the exported raw counters
//! (`rules`).
#![forbid(unsafe_code)]

pub mod cgroups;
pub mod collector;
pub mod expo;
pub mod http;
pub mod names;
pub mod rules;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tmetric_runtime::Syscalls;

pub use collector::{CollectError, Collector, MachineInfo, Options};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `host:port` to listen on.
    pub listen: String,
    /// HTTP worker threads.
    pub workers: usize,
    /// Stop after this many intervals (tests and benchmarks); `None`: until a signal.
    pub intervals: Option<u64>,
}

/// Publishes the collector's state for the server.
/// Returns the CPU seconds rendering took.
pub fn publish<S: Syscalls + Clone>(collector: &Collector<S>, shared: &http::Shared) -> f64 {
    let cpu0 = collector::thread_cpu_ns();
    let families = expo::families(collector);
    let prometheus = families.render(expo::Format::Prometheus).into_bytes();
    let openmetrics = families.render(expo::Format::OpenMetrics).into_bytes();
    let json = serde_json::to_vec(&expo::json(collector)).unwrap_or_default();
    if let Ok(mut p) = shared.write() {
        p.prometheus = Arc::new(prometheus);
        p.openmetrics = Arc::new(openmetrics);
        p.json = Arc::new(json);
        p.at = Some(Instant::now());
        p.interval = collector.options.interval;
        p.problem = None;
    }
    collector::thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9
}

/// One interval, without a server: reads the collector's targets `reads` times over one
/// interval and returns that interval in Prometheus text (`tmetric serve --once`, for
/// node_exporter's textfile collector, cron jobs and shell pipelines). A stop signal ends
/// the interval early: what was counted until then is returned, as stat prints on Ctrl-C.
pub fn once<S: Syscalls + Clone>(mut collector: Collector<S>) -> Result<String, String> {
    let signals = tmetric_runtime::signal::catch_stop_signals()
        .map_err(|e| format!("cannot catch signals: {e}"))?;
    let reads = collector.options.reads.max(2);
    let step = collector.options.interval / reads;
    let start = Instant::now();
    'reads: for k in 1..=reads {
        let due = start + step * k;
        loop {
            if !signals.drain().is_empty() {
                break 'reads;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        }
        if k < reads {
            collector.read();
        }
    }
    collector.end_interval();
    Ok(expo::families(&collector).render(expo::Format::Prometheus))
}

/// Serves until SIGINT, SIGTERM, SIGHUP or SIGQUIT (or `options.intervals` intervals):
/// reads the collector's targets `reads` times per interval, ends each interval and publishes
/// it. `ready` is told the address once the server listens.
pub fn serve<S: Syscalls + Clone>(
    mut collector: Collector<S>,
    options: &ServeOptions,
    ready: impl FnOnce(std::net::SocketAddr),
) -> Result<(), String> {
    let signals = tmetric_runtime::signal::catch_stop_signals()
        .map_err(|e| format!("cannot catch signals: {e}"))?;
    let shared: http::Shared = Arc::new(RwLock::new(http::Published {
        interval: collector.options.interval,
        ..http::Published::default()
    }));
    let first = http::start(&options.listen, Arc::clone(&shared), options.workers)?;
    let addr = first.addr;
    let mut server = Some(first);
    ready(addr);
    let interval = collector.options.interval;
    let reads = collector.options.reads.max(2);
    let step = interval / reads;
    let start = Instant::now();
    let mut tick: u64 = 0;
    let mut stop = false;
    while !stop {
        tick += 1;
        let due = start + step * tick as u32;
        // Sleep in short steps so a signal ends the wait at once.
        loop {
            if !signals.drain().is_empty() {
                stop = true;
                break;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        }
        if stop {
            break;
        }
        if tick.is_multiple_of(u64::from(reads)) {
            collector.end_interval();
            // tiny_http's accept thread dies when a connection comes while descriptors have
            // run out (it unwraps a `try_clone`): then the port refuses connections, and the
            // server is started again on it.
            if server.is_none() || !http::listening(addr) {
                if let Some(dead) = server.take() {
                    dead.stop();
                }
                // Tried again every interval until descriptors allow it.
                if let Ok(s) = http::start(&addr.to_string(), Arc::clone(&shared), options.workers)
                {
                    server = Some(s);
                    collector.status.http_restarts += 1;
                }
            }
            collector.status.render_cpu_seconds_total += publish(&collector, &shared);
            if options.intervals.is_some_and(|n| collector.status.intervals >= n) {
                break;
            }
        } else {
            collector.read();
        }
    }
    if let Some(server) = server {
        server.stop();
    }
    Ok(())
}
