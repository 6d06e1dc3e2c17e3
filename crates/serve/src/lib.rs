//! `tmetric serve`'s exporter and `tmetric rules`' generators: compiled metrics per host and
//! per cgroup over HTTP for Prometheus (`collector`: engine sessions read every interval;
//! `expo`: Prometheus text, OpenMetrics and JSON; `http`: the endpoints; `cgroups`:
//! discovery and path labels; `kubernetes`: pods' names from the kubelet's log directories;
//! `names`: Prometheus names and base units), and the recording
//! rules and Grafana dashboard that compute the same metrics from the exported raw counters
//! (`rules`).
#![forbid(unsafe_code)]

pub mod cgroups;
pub mod collector;
pub mod expo;
pub mod http;
pub mod kubernetes;
pub mod names;
pub mod rules;
pub mod web;

use std::time::{Duration, Instant};

use bytes::Bytes;
use tmetric_runtime::Syscalls;

pub use collector::{CollectError, Collector, Detail, MachineInfo, Options};
pub use http::Limits;

use crate::expo::Format;
use crate::http::{Ask, Order, Page};

/// A duration as `serve --interval` takes it: `10s`, `500ms`, `1m`, `2.5s` or plain seconds,
/// more than zero and at most a year.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let value: f64 = number.parse().map_err(|_| DurationError::NotANumber(text.to_string()))?;
    let seconds = match unit {
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            let (text, unit) = (text.to_string(), unit.to_string());
            return Err(DurationError::Unit { text, unit });
        }
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(DurationError::NotPositive(text.to_string()));
    }
    // A year: past it no interval makes sense, and the arithmetic on instants stays in range.
    if seconds > 365.0 * 86400.0 {
        return Err(DurationError::TooLong(text.to_string()));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| DurationError::CannotWait(text.to_string()))
}

/// Why a duration does not parse ([`parse_duration`]), with what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number before the unit.
    #[error("`{0}` is not a duration: give a number and a unit, such as 10s, 500ms or 1m")]
    NotANumber(String),
    /// A unit other than ms, s, m and h.
    #[error("`{text}`: unknown unit `{unit}`; use ms, s, m or h")]
    Unit {
        /// The duration as given.
        text: String,
        /// Its unit.
        unit: String,
    },
    /// Zero, negative or not finite.
    #[error("`{0}` is not a positive duration")]
    NotPositive(String),
    /// Longer than a year.
    #[error("`{0}` is longer than a year: give a shorter duration")]
    TooLong(String),
    /// Not a `Duration`.
    #[error("`{0}` is not a duration tmetric can wait")]
    CannotWait(String),
}

/// How the server runs.
#[derive(Debug)]
pub struct ServeOptions {
    /// The listening socket, bound by [`http::bind`] and kept for the process's life.
    pub listener: std::net::TcpListener,
    /// The HTTP server's limits.
    pub limits: Limits,
    /// TLS and basic authentication (`--web.config.file`).
    pub web: Option<web::WebConfig>,
    /// Stop after this many intervals (tests and benchmarks); `None`: until a signal.
    pub intervals: Option<u64>,
}

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Stop signals cannot be caught.
    #[error("cannot catch signals: {0}")]
    Signals(tmetric_runtime::Errno),
    /// The HTTP server could not start.
    #[error(transparent)]
    Http(#[from] http::HttpError),
    /// The collector and the server cannot be linked.
    #[error("cannot link the collector to the HTTP server: {0}")]
    Link(std::io::Error),
    /// `--once` counted nothing useful.
    #[error("{0}")]
    NothingCounted(String),
}

/// Rendered pages of the current read, made when first asked for.
#[derive(Default)]
struct Pages {
    /// Incremented by every interval end.
    interval: u64,
    /// Incremented by every read.
    read: u64,
    /// Per format: the interval part (gauges) and the interval it is of.
    gauges: [Option<(u64, Bytes)>; 2],
    /// Per format and gzip: the whole page (its two parts) and the read it is of.
    whole: [Option<(u64, Bytes, Bytes)>; 4],
    json: [Option<(u64, Bytes)>; 2],
}

fn slot(format: Format) -> usize {
    match format {
        Format::Prometheus => 0,
        Format::OpenMetrics => 1,
    }
}

/// A scrape's read is taken unless the last read is this recent (an HA pair scraping at once
/// shares one).
const FRESH: Duration = Duration::from_millis(100);

fn answer<S: Syscalls + Clone>(
    collector: &mut Collector<S>,
    pages: &mut Pages,
    order: &Order,
    stats: &http::Stats,
) -> Page {
    if collector.last_read.elapsed() > FRESH {
        collector.read_for_scrape();
        pages.read += 1;
    }
    let cpu0 = collector::thread_cpu_ns();
    let page = match order.ask {
        Ask::Metrics(format) => {
            let i = slot(format) * 2 + usize::from(order.gzip);
            let (body, tail) = match &pages.whole[i] {
                Some((read, body, tail)) if *read == pages.read => (body.clone(), tail.clone()),
                _ => {
                    let gauges = match &pages.gauges[slot(format)] {
                        Some((interval, text)) if *interval == pages.interval => text.clone(),
                        _ => {
                            let mut text = String::new();
                            expo::interval_families(collector, false)
                                .render_into(&mut text, format, false);
                            let text = Bytes::from(text);
                            pages.gauges[slot(format)] = Some((pages.interval, text.clone()));
                            text
                        }
                    };
                    let mut text = String::new();
                    expo::read_families(collector, false, Some(stats))
                        .render_into(&mut text, format, true);
                    let (body, tail) = if order.gzip {
                        (http::gzip_parts(&[&gauges, text.as_bytes()]), Bytes::new())
                    } else {
                        (gauges, Bytes::from(text))
                    };
                    pages.whole[i] = Some((pages.read, body.clone(), tail.clone()));
                    (body, tail)
                }
            };
            Page { status: 200, content_type: format.content_type(), body, tail, gzip: order.gzip }
        }
        Ask::Json => {
            let i = usize::from(order.gzip);
            let body = match &pages.json[i] {
                Some((read, body)) if *read == pages.read => body.clone(),
                _ => {
                    let raw = serde_json::to_vec(&expo::json(collector)).unwrap_or_default();
                    let body = if order.gzip { http::gzip(&raw) } else { Bytes::from(raw) };
                    pages.json[i] = Some((pages.read, body.clone()));
                    body
                }
            };
            let tail = Bytes::new();
            Page { status: 200, content_type: "application/json", body, tail, gzip: order.gzip }
        }
    };
    collector.status.render_cpu_seconds_total +=
        collector::thread_cpu_ns().saturating_sub(cpu0) as f64 / 1e9;
    page
}

/// One interval, without a server: reads the collector's targets
/// [`Collector::reads_per_interval`] times over one interval and returns that interval in
/// Prometheus text (`tmetric serve --once`, for node_exporter's textfile collector, cron jobs
/// and shell pipelines): the counts of this run as gauges, no counter that a later run would
/// seem to reset. A stop signal ends the
/// interval early: what was counted until then is returned, as stat prints on Ctrl-C. When
/// nothing useful could be counted, the error says why (the caller exits non-zero).
pub fn once<S: Syscalls + Clone>(mut collector: Collector<S>) -> Result<String, ServeError> {
    let signals = tmetric_runtime::signal::catch_stop_signals().map_err(ServeError::Signals)?;
    let reads = collector.reads_per_interval();
    let step = collector.options.interval / reads;
    let start = Instant::now();
    'reads: for k in 1..=reads {
        let due = start + step * k;
        loop {
            let now = Instant::now();
            if now >= due {
                break;
            }
            tmetric_runtime::signal::wait_readable(&[signals.fd()], Some(due - now));
            if !signals.drain().is_empty() {
                break 'reads;
            }
        }
        if k < reads {
            collector.read();
        }
    }
    collector.end_interval();
    if let Some(problem) = collector.problem() {
        return Err(ServeError::NothingCounted(problem));
    }
    Ok(expo::render(&collector, Format::Prometheus, true))
}

/// Serves until SIGINT, SIGTERM, SIGHUP or SIGQUIT (or `options.intervals` intervals): reads
/// the collector's targets [`Collector::reads_per_interval`] times per interval, ends each
/// interval, and answers the HTTP server's orders in between, blocked (no polling) until the
/// next read, an order or a signal. `ready` is told the address once the server listens.
pub fn serve<S: Syscalls + Clone>(
    mut collector: Collector<S>,
    options: ServeOptions,
    ready: impl FnOnce(std::net::SocketAddr),
) -> Result<(), ServeError> {
    let signals = tmetric_runtime::signal::catch_stop_signals().map_err(ServeError::Signals)?;
    let interval = collector.options.interval;
    let (link, orders) = http::link(http::Health {
        started: Instant::now(),
        last_end: None,
        interval,
        problem: collector.problem(),
    })
    .map_err(ServeError::Link)?;
    let health = std::sync::Arc::clone(&link.health);
    let server = http::start(options.listener, link, options.limits, options.web)?;
    ready(server.addr);
    let reads = collector.reads_per_interval();
    let step = interval / reads;
    let start = Instant::now();
    let mut tick: u64 = 1;
    let mut pages = Pages::default();
    loop {
        let due = start + step.saturating_mul(u32::try_from(tick).unwrap_or(u32::MAX));
        let now = Instant::now();
        if now < due {
            tmetric_runtime::signal::wait_readable(&[signals.fd(), orders.fd()], Some(due - now));
        }
        if !signals.drain().is_empty() {
            break;
        }
        orders.drain();
        while let Ok(order) = orders.orders.try_recv() {
            let page = answer(&mut collector, &mut pages, &order, &server.stats);
            let _ = order.reply.send(page);
        }
        if Instant::now() < due {
            continue;
        }
        if tick.is_multiple_of(u64::from(reads)) {
            collector.end_interval();
            pages.interval += 1;
            if let Ok(mut h) = health.lock() {
                h.last_end = Some(Instant::now());
                h.problem = collector.problem();
            }
            if options.intervals.is_some_and(|n| collector.status.intervals >= n) {
                break;
            }
        } else {
            collector.read();
        }
        pages.read += 1;
        // After a stall (a suspended VM, a stopped process), go on from now rather than
        // reading in a burst to catch up.
        let behind = Instant::now().saturating_duration_since(due);
        tick += 1 + (behind.as_nanos() / step.as_nanos().max(1)) as u64;
    }
    server.stop();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{DurationError, parse_duration};

    #[test]
    fn durations_read_in_their_units_and_out_of_range_ones_are_refused() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration(" 500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        // A bare number is seconds.
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        // 8760 hours is 365 days, the most; one more hour is too long.
        assert_eq!(parse_duration("8760h"), Ok(Duration::from_secs(8760 * 3600)));
        assert_eq!(parse_duration("8761h"), Err(DurationError::TooLong("8761h".into())));
        assert_eq!(
            parse_duration("5d"),
            Err(DurationError::Unit { text: "5d".into(), unit: "d".into() })
        );
        assert_eq!(parse_duration("0s"), Err(DurationError::NotPositive("0s".into())));
        assert_eq!(parse_duration("s"), Err(DurationError::NotANumber("s".into())));
        assert_eq!(parse_duration("1.2.3s"), Err(DurationError::NotANumber("1.2.3s".into())));
    }
}
