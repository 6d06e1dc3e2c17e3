//! The HTTP side: `/metrics` (Prometheus text or OpenMetrics, as `Accept` asks), `/json`,
//! `/healthz` and an index, served by `tiny_http` worker threads from the texts the collector
//! published at its last interval's end (a scrape never touches the counters, so any number
//! of scrapers see the same interval).

use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tiny_http::{Header, Method, Request, Response, Server};

use crate::expo::Format;

/// What the collector published at its last interval's end.
#[derive(Debug, Clone, Default)]
pub struct Published {
    /// Prometheus text.
    pub prometheus: Arc<Vec<u8>>,
    /// OpenMetrics text.
    pub openmetrics: Arc<Vec<u8>>,
    /// JSON.
    pub json: Arc<Vec<u8>>,
    /// When it was published.
    pub at: Option<Instant>,
    /// The interval, to judge staleness.
    pub interval: Duration,
    /// Why the collector is unhealthy, if it is.
    pub problem: Option<String>,
}

/// The shared state between the collector and the server.
pub type Shared = Arc<RwLock<Published>>;

/// A running server.
pub struct Running {
    server: Arc<Server>,
    workers: Vec<JoinHandle<()>>,
    /// The address it listens on.
    pub addr: SocketAddr,
}

impl Running {
    /// Stops accepting and waits for the workers.
    pub fn stop(self) {
        for _ in &self.workers {
            self.server.unblock();
        }
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Whether something accepts connections at `addr`: false only when the connection is
/// refused (the listener is gone), true when it is accepted or cannot be told (no descriptor
/// left for the probe itself).
pub fn listening(addr: SocketAddr) -> bool {
    match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::ConnectionRefused,
    }
}

/// Listens on `addr` with `workers` threads serving `shared`.
pub fn start(addr: &str, shared: Shared, workers: usize) -> Result<Running, String> {
    let server = Server::http(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| format!("cannot listen on {addr}: not an IP address"))?;
    let server = Arc::new(server);
    let workers = (0..workers.max(1))
        .map(|_| {
            let server = Arc::clone(&server);
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                while let Ok(request) = server.recv() {
                    respond(request, &shared);
                }
            })
        })
        .collect();
    Ok(Running { server, workers, addr: local })
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("static header text is valid")
}

fn respond(request: Request, shared: &Shared) {
    let path = request.url().split('?').next().unwrap_or("").to_string();
    if !matches!(request.method(), Method::Get | Method::Head) {
        let r = Response::from_string("only GET and HEAD\n")
            .with_status_code(405)
            .with_header(header("Allow", "GET, HEAD"));
        let _ = request.respond(r);
        return;
    }
    let accept = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Accept"))
        .map(|h| h.value.as_str().to_string());
    let published = shared.read().map(|p| p.clone()).unwrap_or_default();
    let (status, body, content_type): (u16, Arc<Vec<u8>>, &str) = match path.as_str() {
        "/metrics" => {
            if published.at.is_none() {
                (
                    503,
                    Arc::new(b"the first interval has not ended yet\n".to_vec()),
                    "text/plain; charset=utf-8",
                )
            } else {
                match Format::from_accept(accept.as_deref()) {
                    Format::OpenMetrics => {
                        (200, published.openmetrics, Format::OpenMetrics.content_type())
                    }
                    Format::Prometheus => (200, published.prometheus, Format::Prometheus.content_type()),
                }
            }
        }
        "/json" | "/metrics.json" => {
            if published.at.is_none() {
                (503, Arc::new(b"{\"error\":\"the first interval has not ended yet\"}\n".to_vec()), "application/json")
            } else {
                (200, published.json, "application/json")
            }
        }
        "/healthz" => {
            let stale = published.at.is_some_and(|at| at.elapsed() > published.interval * 3 + Duration::from_secs(5));
            match (&published.problem, stale, published.at) {
                (Some(problem), _, _) => (503, Arc::new(format!("unhealthy: {problem}\n").into_bytes()), "text/plain; charset=utf-8"),
                (None, true, _) => (503, Arc::new(b"unhealthy: no interval ended for three intervals\n".to_vec()), "text/plain; charset=utf-8"),
                (None, false, None) => (200, Arc::new(b"starting: the first interval has not ended yet\n".to_vec()), "text/plain; charset=utf-8"),
                (None, false, Some(_)) => (200, Arc::new(b"ok\n".to_vec()), "text/plain; charset=utf-8"),
            }
        }
        "/" => (
            200,
            Arc::new(
                b"tmetric serve: /metrics (Prometheus text, or OpenMetrics when asked), /json, /healthz\n"
                    .to_vec(),
            ),
            "text/plain; charset=utf-8",
        ),
        _ => (404, Arc::new(b"not found: try /metrics, /json or /healthz\n".to_vec()), "text/plain; charset=utf-8"),
    };
    let length = body.len();
    // tiny_http sends no body for HEAD itself.
    let data = Cursor::new(ArcBytes(body));
    // The length is known: never chunked (tiny_http chunks bodies past 32 KiB by default).
    let response = Response::new(
        tiny_http::StatusCode(status),
        vec![header("Content-Type", content_type)],
        data,
        Some(length),
        None,
    )
    .with_chunked_threshold(usize::MAX);
    let _ = request.respond(response);
}

/// Shared bytes as a reader's buffer, so a scrape copies nothing.
struct ArcBytes(Arc<Vec<u8>>);

impl AsRef<[u8]> for ArcBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}
