//! The HTTP side: `/metrics` (Prometheus text or OpenMetrics, as `Accept` asks; gzip when
//! accepted), `/json`, `/healthz` and an index, built for hostile networks. hyper's HTTP/1.1
//! on a one-thread tokio runtime: a stalled or slow client costs a task and its buffers, never
//! a thread. Limits: header bytes and count (431), a header read timeout (from a request's
//! first byte), an idle timeout (no byte moved either way; also the wait between keep-alive
//! requests), requests per connection, and a bounded connection count. At the
//! bound the connection idle the longest is closed for the new one; when every connection is
//! busy the new one gets 503 at once. The listening socket is bound once and kept for the
//! process's life: when descriptors run out, a reserve descriptor is let go to accept and
//! close the connection, so the listener never dies and no other process can take the port.
//! Pages come from the collector thread (`Link`), which renders each format at most once per
//! read; `/healthz` is answered here from [`Health`], so it answers even while the collector
//! is stuck.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, oneshot};

use crate::expo::Format;
use crate::web::{Auth, WebConfig};

/// Limits of the HTTP server.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections served at once; at the bound the oldest whose client never sent a byte (for
    /// 25 ms) or else the longest idle (for 1 s) is closed, or the new one gets 503.
    pub max_connections: usize,
    /// A request's start line and headers, in bytes (431 past it).
    pub max_header_bytes: usize,
    /// Header lines per request (431 past it).
    pub max_headers: usize,
    /// A request's headers must arrive within this, counted from its first byte (the first
    /// request's from the connection's accept). The wait between requests on a keep-alive
    /// connection is the idle timeout's: a scraper's connection idles a whole scrape interval.
    pub header_timeout: Duration,
    /// A connection on which no byte moved for this long is closed (idle keep-alive, a reader
    /// that stopped reading, a TLS handshake that stalls).
    pub idle_timeout: Duration,
    /// Requests served on one connection before it is closed (`Connection: close`).
    pub max_requests_per_connection: u64,
    /// How long a scrape waits for the collector thread before 503.
    pub render_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            // node_exporter (Go's net/http) closes at 1 MB of headers; a scrape sends well
            // under 1 KB.
            max_header_bytes: 16 * 1024,
            max_headers: 64,
            header_timeout: Duration::from_secs(10),
            // Longer than any scrape interval Prometheus is commonly given (2 minutes), so a
            // scraper's keep-alive connection survives between scrapes.
            idle_timeout: Duration::from_secs(150),
            max_requests_per_connection: 10_000,
            render_timeout: Duration::from_secs(20),
        }
    }
}

/// What a scraper asks the collector thread for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `/metrics` in a format.
    Metrics(Format),
    /// `/json`.
    Json,
}

/// A page to send.
#[derive(Debug, Clone)]
pub struct Page {
    /// Its status.
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its body (gzip-compressed when `gzip`)...
    pub body: Bytes,
    /// ...and what follows it: `/metrics` is the interval's part, rendered once per interval
    /// and shared by every scrape of it, then the read's, sent one after the other rather than
    /// copied into one buffer per scrape.
    pub tail: Bytes,
    /// The body is gzip-compressed.
    pub gzip: bool,
}

impl Page {
    /// A plain-text page.
    pub fn text(status: u16, text: impl Into<String>) -> Page {
        Page {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Bytes::from(text.into()),
            tail: Bytes::new(),
            gzip: false,
        }
    }
}

/// A request to the collector thread and where its page goes.
#[derive(Debug)]
pub struct Order {
    /// What is asked.
    pub ask: Ask,
    /// The scraper accepts gzip.
    pub gzip: bool,
    /// Where the page goes.
    pub reply: oneshot::Sender<Page>,
}

/// The collector's health, as `/healthz` reports it.
#[derive(Debug, Clone)]
pub struct Health {
    /// When serving started.
    pub started: Instant,
    /// When the last interval ended.
    pub last_end: Option<Instant>,
    /// The interval.
    pub interval: Duration,
    /// Why the collector is unhealthy (nothing can be counted, every read failed), if it is.
    pub problem: Option<String>,
}

impl Health {
    /// The page `/healthz` answers with: 200 `ok` (or `starting` in the first interval), 503
    /// with the reason when nothing is counted or no interval ended for three intervals.
    pub fn page(&self) -> Page {
        let late = self.interval * 3 + Duration::from_secs(5);
        if let Some(problem) = &self.problem {
            return Page::text(503, format!("unhealthy: {problem}\n"));
        }
        match self.last_end {
            Some(at) if at.elapsed() > late => {
                Page::text(503, "unhealthy: no interval ended for three intervals\n")
            }
            Some(_) => Page::text(200, "ok\n"),
            None if self.started.elapsed() > late => {
                Page::text(503, "unhealthy: the first interval never ended\n")
            }
            None => Page::text(200, "starting: counting the first interval\n"),
        }
    }
}

/// The HTTP side's end of the link to the collector thread.
#[derive(Clone)]
pub struct Link {
    orders: std::sync::mpsc::Sender<Order>,
    wake: Arc<UnixStream>,
    /// The collector's health.
    pub health: Arc<Mutex<Health>>,
}

/// The collector thread's end: orders to serve, and a descriptor readable when one waits.
pub struct Orders {
    /// The orders.
    pub orders: std::sync::mpsc::Receiver<Order>,
    wake: UnixStream,
}

impl Orders {
    /// The descriptor to wait on (readable when an order may be waiting).
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.wake.as_raw_fd()
    }

    /// Empties the wake-up socket (before taking the orders).
    pub fn drain(&self) {
        use std::io::Read;
        let mut buf = [0u8; 256];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// A link between the HTTP side and the collector thread.
pub fn link(health: Health) -> std::io::Result<(Link, Orders)> {
    let (a, b) = UnixStream::pair()?;
    a.set_nonblocking(true)?;
    b.set_nonblocking(true)?;
    let (tx, rx) = std::sync::mpsc::channel();
    Ok((
        Link { orders: tx, wake: Arc::new(a), health: Arc::new(Mutex::new(health)) },
        Orders { orders: rx, wake: b },
    ))
}

impl Link {
    async fn ask(&self, ask: Ask, gzip: bool, timeout: Duration) -> Page {
        use std::io::Write;
        let (reply, page) = oneshot::channel();
        if self.orders.send(Order { ask, gzip, reply }).is_err() {
            return Page::text(503, "the collector has stopped\n");
        }
        // A full socket already holds a wake-up: nothing lost.
        let _ = (&*self.wake).write(&[1]);
        match tokio::time::timeout(timeout, page).await {
            Ok(Ok(page)) => page,
            Ok(Err(_)) => Page::text(503, "the collector has stopped\n"),
            Err(_) => Page::text(503, "the collector did not answer in time\n"),
        }
    }
}

/// Why the server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address does not parse or resolve.
    #[error("--listen {0}: give host:port, such as 127.0.0.1:10064 or [::1]:10064")]
    Address(String),
    /// Binding failed.
    // The cause is in the message and not a `source`, so error chains do not say it twice.
    #[error("cannot listen on {addr}: {why}")]
    Bind {
        /// The address.
        addr: String,
        /// Why.
        why: std::io::Error,
    },
    /// The runtime could not be made.
    #[error("cannot start the HTTP server: {0}")]
    Runtime(std::io::Error),
}

/// Binds `addr` (`host:port`). The socket is kept for the process's life.
pub fn bind(addr: &str) -> Result<std::net::TcpListener, HttpError> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|_| HttpError::Address(tmetric_text::quote(addr)))?
        .collect();
    let first = addrs.first().ok_or_else(|| HttpError::Address(tmetric_text::quote(addr)))?;
    std::net::TcpListener::bind(first)
        .map_err(|why| HttpError::Bind { addr: addr.to_string(), why })
}

/// Whether an address is reachable only from this machine.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// A running server.
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Counters of what the server refused, for the exporter's own metrics.
    pub stats: Arc<Stats>,
}

/// What the server did that an operator wants counted.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections answered 503 at once because every slot was busy.
    pub shed: AtomicU64,
    /// Idle connections closed to make room for a new one.
    pub evicted: AtomicU64,
    /// Connections closed for the idle timeout.
    pub timed_out: AtomicU64,
    /// Connections closed at once because no descriptor was left.
    pub no_descriptor: AtomicU64,
    /// Requests refused for their credentials (401).
    pub unauthorized: AtomicU64,
    /// Connections open now.
    pub open: AtomicUsize,
}

impl Running {
    /// Stops serving and waits for the server thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Serves on `listener` (bound by [`bind`]) with `limits`, asking `link` for pages; `web`
/// adds TLS and basic authentication.
pub fn start(
    listener: std::net::TcpListener,
    link: Link,
    limits: Limits,
    web: Option<WebConfig>,
) -> Result<Running, HttpError> {
    let addr = listener.local_addr().map_err(HttpError::Runtime)?;
    listener.set_nonblocking(true).map_err(HttpError::Runtime)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        // Password checks (bcrypt) only: two at a time, the rest wait their turn.
        .max_blocking_threads(2)
        .build()
        .map_err(HttpError::Runtime)?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let stats = Arc::new(Stats::default());
    let s = Arc::clone(&stats);
    let thread = std::thread::Builder::new()
        .name("tmetric-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(_) => return,
                };
                tokio::select! {
                    () = accept_loop(listener, link, limits, web, s) => {}
                    _ = stop_rx => {}
                }
            });
        })
        .map_err(HttpError::Runtime)?;
    Ok(Running { addr, stop: Some(stop_tx), thread: Some(thread), stats })
}

/// One open connection, as the accept loop sees it.
struct Slot {
    id: u64,
    /// When it was accepted (milliseconds since the loop's epoch).
    accepted: u64,
    progress: Arc<AtomicU64>,
    /// Whether the client sent a byte yet.
    spoke: Arc<AtomicBool>,
    close: Arc<Notify>,
    /// Told to close to make room: not picked again.
    closing: bool,
}

/// At the bound, a connection whose client sent nothing for this long since it was accepted
/// makes room first, however young: a scraper sends its request (or TLS hello) with its
/// connection, and a client that opens connections faster than they age [`IDLE_BOUND_MS`] and
/// sends nothing would otherwise keep every slot and have every scrape shed. With 64 slots,
/// silent connections past 2,500 a second are shed, while a new one whose request is already
/// there still takes a silent one's place; a scraper is taken for silent only if its bytes
/// wait 25 ms to be read.
const SILENT_MS: u64 = 25;
/// At the bound, else, the connection that moved no byte for the longest makes room if that is
/// at least this long.
const IDLE_BOUND_MS: u64 = 1000;

/// Milliseconds since `epoch`.
fn millis(epoch: Instant) -> u64 {
    epoch.elapsed().as_millis() as u64
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    link: Link,
    limits: Limits,
    web: Option<WebConfig>,
    stats: Arc<Stats>,
) {
    let epoch = Instant::now();
    let slots: Arc<Mutex<Vec<Slot>>> = Arc::new(Mutex::new(Vec::new()));
    // Let go when descriptors run out, to accept (and close) the connection that waits:
    // otherwise it stays queued and the accept loop spins on EMFILE.
    let mut reserve = std::fs::File::open("/dev/null").ok();
    let tls = web.as_ref().and_then(|w| w.tls.clone());
    let auth = web.as_ref().and_then(|w| w.auth.clone()).map(Arc::new);
    let mut next_id = 0u64;
    loop {
        let mut stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                stats.no_descriptor.fetch_add(1, Ordering::Relaxed);
                drop(reserve.take());
                if let Ok((stream, _)) = listener.accept().await {
                    drop(stream);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                reserve = std::fs::File::open("/dev/null").ok();
                continue;
            }
            // ECONNABORTED and the like: that connection only.
            Err(_) => continue,
        };
        stats.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let mut made_room = false;
        // At the bound: close the oldest connection that never spoke (for [`SILENT_MS`]), else
        // the one that moved no byte for the longest (an idle keep-alive, a client that
        // stopped reading, for [`IDLE_BOUND_MS`]), else shed this one.
        {
            let mut list = slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let open = list.iter().filter(|s| !s.closing).count();
            if open >= limits.max_connections {
                let now = millis(epoch);
                let silent = list
                    .iter_mut()
                    .filter(|s| !s.closing && !s.spoke.load(Ordering::Relaxed))
                    .filter(|s| now.saturating_sub(s.accepted) >= SILENT_MS)
                    .min_by_key(|s| s.accepted);
                let mut victim = match silent {
                    Some(slot) => Some(slot),
                    None => list
                        .iter_mut()
                        .filter(|s| !s.closing)
                        .min_by_key(|s| s.progress.load(Ordering::Relaxed))
                        .filter(|s| {
                            now.saturating_sub(s.progress.load(Ordering::Relaxed)) >= IDLE_BOUND_MS
                        }),
                };
                // None old enough, as when a burst of connections waited in the backlog: a
                // new connection whose request is already there takes the place of the
                // oldest that never spoke, however young.
                if victim.is_none() {
                    let talks;
                    (stream, talks) = match has_bytes_waiting(stream) {
                        Some(checked) => checked,
                        None => continue,
                    };
                    if talks {
                        victim = list
                            .iter_mut()
                            .filter(|s| !s.closing && !s.spoke.load(Ordering::Relaxed))
                            .min_by_key(|s| s.accepted);
                    }
                }
                match victim {
                    Some(slot) => {
                        slot.closing = true;
                        slot.close.notify_one();
                        stats.evicted.fetch_add(1, Ordering::Relaxed);
                        made_room = true;
                    }
                    None => {
                        drop(list);
                        stats.shed.fetch_add(1, Ordering::Relaxed);
                        tokio::spawn(shed(stream));
                        continue;
                    }
                }
            }
        }
        if made_room {
            // Under a flood, let the connections read what their clients sent before the next
            // is accepted, so that a scraper has spoken before it is the oldest silent one.
            tokio::task::yield_now().await;
        }
        next_id += 1;
        let id = next_id;
        let accepted = millis(epoch);
        let progress = Arc::new(AtomicU64::new(accepted));
        let spoke = Arc::new(AtomicBool::new(false));
        let close = Arc::new(Notify::new());
        slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Slot {
            id,
            accepted,
            progress: Arc::clone(&progress),
            spoke: Arc::clone(&spoke),
            close: Arc::clone(&close),
            closing: false,
        });
        stats.open.fetch_add(1, Ordering::Relaxed);
        // The first request's clock runs from the accept, as a client that connects sends it.
        let request = Arc::new(AtomicU64::new(accepted + 1));
        let began = Arc::new(Notify::new());
        let io = Timed {
            inner: stream,
            progress: Arc::clone(&progress),
            spoke,
            request: Arc::clone(&request),
            began: Arc::clone(&began),
            epoch,
        };
        let (link, limits, tls, auth, slots, stats) = (
            link.clone(),
            limits.clone(),
            tls.clone(),
            auth.clone(),
            Arc::clone(&slots),
            Arc::clone(&stats),
        );
        tokio::spawn(async move {
            let clocks = Clocks { progress: &progress, request: &request, began: &began };
            let watched = watch(io, &link, &limits, tls, auth, clocks, &close, epoch, &stats);
            watched.await;
            slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|s| s.id != id);
            stats.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Whether the client of a just-accepted connection already sent something (a peek, nothing
/// read); the connection back, or `None` when it cannot be kept.
fn has_bytes_waiting(stream: tokio::net::TcpStream) -> Option<(tokio::net::TcpStream, bool)> {
    // tokio's own peek waits for bytes; std's, on the socket tokio left non-blocking, does not.
    let std = stream.into_std().ok()?;
    let talks = std.peek(&mut [0u8; 1]).is_ok_and(|n| n > 0);
    Some((tokio::net::TcpStream::from_std(std).ok()?, talks))
}

/// Answers 503 without reading the request and closes; a client that does not take even that
/// is dropped after a second.
async fn shed(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 42\r\n\r\nevery connection slot is busy: try again\r\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(BUSY).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// A connection's two clocks (milliseconds since the accept loop's epoch): when a byte last
/// moved, and when the request being read began (plus one; 0 while none is: the connection
/// waits between requests).
#[derive(Clone, Copy)]
struct Clocks<'a> {
    progress: &'a AtomicU64,
    request: &'a AtomicU64,
    /// Told when `request` starts or stops.
    began: &'a Notify,
}

impl Clocks<'_> {
    /// How much longer the connection may live at `now`: `None` when it is past a limit.
    fn left(&self, now: u64, idle_ms: u64, header_ms: u64) -> Option<u64> {
        let idle = idle_ms.checked_sub(now.saturating_sub(self.progress.load(Ordering::Relaxed)));
        let header = match self.request.load(Ordering::Relaxed) {
            0 => Some(u64::MAX),
            began => header_ms.checked_sub(now.saturating_sub(began - 1)),
        };
        Some(idle?.min(header?)).filter(|&left| left > 0)
    }
}

/// Serves one connection until it ends, it is told to close, no byte moved for the idle
/// timeout, or a request's headers took longer than the header timeout.
///
/// hyper's own header timer is not used: since hyper 1.6 it also runs while a keep-alive
/// connection waits for its next request, so a scraper whose interval is longer than the
/// header timeout (Prometheus's default is a minute) would find its connection closed at
/// every scrape, and lose a scrape when the close crosses its request.
#[allow(clippy::too_many_arguments)]
async fn watch(
    io: Timed<tokio::net::TcpStream>,
    link: &Link,
    limits: &Limits,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    auth: Option<Arc<Auth>>,
    clocks: Clocks<'_>,
    close: &Notify,
    epoch: Instant,
    stats: &Stats,
) {
    let served = serve_io(io, link, limits, tls, auth, stats, clocks);
    tokio::pin!(served);
    let idle_ms = limits.idle_timeout.as_millis() as u64;
    let header_ms = limits.header_timeout.as_millis() as u64;
    loop {
        let Some(left) = clocks.left(millis(epoch), idle_ms, header_ms) else {
            stats.timed_out.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Until the nearer deadline: a request that begins meanwhile (its first byte starts
        // its clock) wakes this to sleep until its header deadline instead. Waking on a timer
        // to look for one cost a keep-alive scraper's connection a wake-up of this thread
        // every quarter of the header timeout (4 per 10 s interval), more CPU than its scrape.
        let wait = Duration::from_millis(left.max(10));
        tokio::select! {
            () = &mut served => return,
            () = close.notified() => return,
            () = clocks.began.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

async fn serve_io(
    io: Timed<tokio::net::TcpStream>,
    link: &Link,
    limits: &Limits,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    auth: Option<Arc<Auth>>,
    stats: &Stats,
    clocks: Clocks<'_>,
) {
    match tls {
        Some(config) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            let Ok(stream) = acceptor.accept(io).await else { return };
            http1(stream, link, limits, auth, stats, clocks).await;
        }
        None => {
            // An HTTP/2 client with prior knowledge opens with the connection preface, which
            // hyper's HTTP/1 side drops without a word: answer 505 instead.
            let mut first = [0u8; 14];
            if let Ok(n) = io.inner.peek(&mut first).await
                && first[..n].starts_with(b"PRI * HTTP/2")
            {
                use tokio::io::AsyncWriteExt;
                let mut io = io;
                let _ = io
                    .write_all(b"HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: 35\r\n\r\ntmetric serve speaks HTTP/1.1 only\n")
                    .await;
                let _ = io.shutdown().await;
                return;
            }
            http1(io, link, limits, auth, stats, clocks).await;
        }
    }
}

async fn http1<T>(
    io: T,
    link: &Link,
    limits: &Limits,
    auth: Option<Arc<Auth>>,
    stats: &Stats,
    clocks: Clocks<'_>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let count = AtomicU64::new(0);
    let service = hyper::service::service_fn(|request: Request<Incoming>| {
        // Its headers are in: the next request's clock starts at its first byte.
        clocks.request.store(0, Ordering::Relaxed);
        // [`watch`] then sleeps until the idle deadline, not this request's header deadline.
        clocks.began.notify_one();
        let n = count.fetch_add(1, Ordering::Relaxed) + 1;
        let last = n >= limits.max_requests_per_connection;
        let auth = auth.clone();
        async move {
            let mut response = respond(&request, link, limits, auth.as_deref(), stats).await;
            if last {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The header timeout is [`watch`]'s, which lets a keep-alive connection idle.
        .header_read_timeout(None)
        .max_header_size(limits.max_header_bytes)
        .max_headers(limits.max_headers)
        .max_buf_size(limits.max_header_bytes.max(8192))
        .keep_alive(true)
        .half_close(false);
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}

/// Whether `Accept-Encoding` allows gzip.
fn accepts_gzip(request: &Request<Incoming>) -> bool {
    request.headers().get_all(header::ACCEPT_ENCODING).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',').any(|part| {
                let mut it = part.split(';');
                let coding = it.next().unwrap_or("").trim();
                let refused = it.any(|p| {
                    p.trim().strip_prefix("q=").is_some_and(|q| q.trim().parse::<f64>() == Ok(0.0))
                });
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
            })
        })
    })
}

/// A response's body: a page's two parts.
type Body = Full<bytes::buf::Chain<Bytes, Bytes>>;

fn page_response(page: Page, head: bool) -> Response<Body> {
    use bytes::Buf;
    let length = page.body.len() + page.tail.len();
    let (body, tail) = if head { (Bytes::new(), Bytes::new()) } else { (page.body, page.tail) };
    let mut response = Response::new(Full::new(body.chain(tail)));
    *response.status_mut() =
        StatusCode::from_u16(page.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(page.content_type));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    if page.gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
    response
}

async fn respond(
    request: &Request<Incoming>,
    link: &Link,
    limits: &Limits,
    auth: Option<&Auth>,
    stats: &Stats,
) -> Response<Body> {
    let head = request.method() == Method::HEAD;
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut r = page_response(Page::text(405, "only GET and HEAD\n"), false);
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let allowed = match auth {
        None => true,
        Some(auth) => {
            // bcrypt takes tens of milliseconds: on the blocking pool, never on the thread that
            // serves every connection.
            let (auth, given) =
                (auth.clone(), request.headers().get(header::AUTHORIZATION).cloned());
            tokio::task::spawn_blocking(move || auth.allows(given.as_ref())).await.unwrap_or(false)
        }
    };
    if !allowed {
        stats.unauthorized.fetch_add(1, Ordering::Relaxed);
        let mut r = page_response(Page::text(401, "unauthorized\n"), head);
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"tmetric\", charset=\"UTF-8\""),
        );
        return r;
    }
    let gzip = accepts_gzip(request);
    let page = match request.uri().path() {
        "/metrics" => {
            let accept = request.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
            link.ask(Ask::Metrics(Format::from_accept(accept)), gzip, limits.render_timeout).await
        }
        "/json" | "/metrics.json" => link.ask(Ask::Json, gzip, limits.render_timeout).await,
        "/healthz" => link
            .health
            .lock()
            .map_or_else(|_| Page::text(503, "unhealthy: the collector failed\n"), |h| h.page()),
        "/" => Page::text(
            200,
            "tmetric serve: /metrics (Prometheus text, or OpenMetrics when asked), /json, /healthz\n",
        ),
        _ => Page::text(404, "not found: try /metrics, /json or /healthz\n"),
    };
    page_response(page, head)
}

/// A stream that notes when a byte last moved either way.
struct Timed<T> {
    inner: T,
    progress: Arc<AtomicU64>,
    /// Set at the first byte read from the client.
    spoke: Arc<AtomicBool>,
    /// When the request being read began (see [`Clocks`]); started by the first byte read
    /// while none is.
    request: Arc<AtomicU64>,
    /// Told when `request` starts (and when the request's headers are in), so that [`watch`]
    /// sleeps until the header deadline while a request is read and until the idle deadline
    /// between requests.
    began: Arc<Notify>,
    epoch: Instant,
}

impl<T> Timed<T> {
    fn moved(&self) {
        self.progress.store(millis(self.epoch), Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Timed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
            self.spoke.store(true, Ordering::Relaxed);
            if self.request.load(Ordering::Relaxed) == 0 {
                self.request.store(millis(self.epoch) + 1, Ordering::Relaxed);
                self.began.notify_one();
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Timed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// gzip of `data` (fast level: a scrape's text compresses about tenfold even so).
pub fn gzip(data: &[u8]) -> Bytes {
    gzip_parts(&[data])
}

thread_local! {
    /// This thread's deflate state, kept from page to page: its tables (a few hundred KB)
    /// were allocated and zeroed for every scrape, a third of the gzip's cost.
    static DEFLATE: std::cell::RefCell<Option<flate2::write::DeflateEncoder<Vec<u8>>>> =
        const { std::cell::RefCell::new(None) };
}

/// gzip of `parts` one after the other, as one stream (RFC 1952: the header flate2 writes
/// at the fast level, no name or time; the deflate stream; its CRC-32 and length).
pub fn gzip_parts(parts: &[&[u8]]) -> Bytes {
    use std::io::Write;
    let size: usize = parts.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(size / 8 + 64);
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 255]);
    let mut crc = flate2::Crc::new();
    let out = DEFLATE.with_borrow_mut(|slot| {
        let mut e = match slot.take() {
            Some(mut e) => {
                // Reset when the last page ended, so only the output is swapped in: a second
                // reset here zeroed its tables again and wrote an empty stream away.
                *e.get_mut() = out;
                e
            }
            None => flate2::write::DeflateEncoder::new(out, flate2::Compression::fast()),
        };
        for part in parts {
            crc.update(part);
            let _ = e.write_all(part);
        }
        // Finishes this page's stream into `out` and keeps the state for the next.
        let out = e.reset(Vec::new()).unwrap_or_default();
        *slot = Some(e);
        out
    });
    let mut out = out;
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server answering `/healthz` with the header timeout `header` and idle timeout `idle`.
    fn server(header: Duration, idle: Duration) -> (Running, Orders) {
        let (running, orders, _) = server_and_thread(header, idle);
        (running, orders)
    }

    /// [`server`], with its thread's id.
    fn server_and_thread(header: Duration, idle: Duration) -> (Running, Orders, String) {
        let health = Health {
            started: Instant::now(),
            last_end: Some(Instant::now()),
            interval: Duration::from_secs(3600),
            problem: None,
        };
        let (link, orders) = link(health).unwrap();
        let limits = Limits { header_timeout: header, idle_timeout: idle, ..Limits::default() };
        // One server starts at a time, so the thread that appears is this one's.
        let _one = STARTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = server_threads();
        let running = start(bind("127.0.0.1:0").unwrap(), link, limits, None).unwrap();
        // The thread names itself once it runs, which may be after `start` returns.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mine: Vec<String> =
                server_threads().into_iter().filter(|t| !before.contains(t)).collect();
            if mine.len() == 1 || Instant::now() > deadline {
                assert_eq!(mine.len(), 1, "{mine:?}");
                return (running, orders, mine[0].clone());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    static STARTING: Mutex<()> = Mutex::new(());

    /// The thread ids of this process's HTTP server threads.
    fn server_threads() -> Vec<String> {
        let tasks = std::fs::read_dir("/proc/self/task").unwrap();
        tasks
            .filter_map(Result::ok)
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "tmetric-http")
            })
            .map(|t| t.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The times thread `tid` of this process gave up the CPU to wait (its wake-ups).
    fn waits(tid: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("voluntary_ctxt_switches:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn an_idle_keep_alive_connection_never_wakes_the_server() {
        // A scraper's connection between scrapes: the server thread sleeps until a byte comes
        // or a deadline passes (the idle timeout here), whatever the header timeout.
        let (header, idle) = (Duration::from_millis(200), Duration::from_secs(60));
        let (running, _orders, tid) = server_and_thread(header, idle);
        let mut conn = std::net::TcpStream::connect(running.addr).unwrap();
        assert_eq!(healthz(&mut conn).as_deref(), Some("HTTP/1.1 200 OK"));
        std::thread::sleep(Duration::from_millis(100));
        let before = waits(&tid);
        // Seven header timeouts without a byte: a timer looking for a request every quarter of
        // it would wake the thread about 28 times.
        std::thread::sleep(header * 7);
        let woke = waits(&tid) - before;
        assert!(woke <= 2, "the idle server thread woke {woke} times");
        // And the connection still serves.
        assert_eq!(healthz(&mut conn).as_deref(), Some("HTTP/1.1 200 OK"));
    }

    /// One `/healthz` on `conn`: the status line, or `None` when the server closed it.
    fn healthz(conn: &mut std::net::TcpStream) -> Option<String> {
        use std::io::{Read, Write};
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        // `ok\n` ends the body of a healthy answer.
        while !got.ends_with(b"ok\n") {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return None,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&got).lines().next().map(str::to_string)
    }

    /// Reads until the server closes `conn`: how long that took, or `None` past `limit`.
    fn closed_within(conn: &mut std::net::TcpStream, limit: Duration) -> Option<Duration> {
        use std::io::Read;
        let t = Instant::now();
        conn.set_read_timeout(Some(limit)).unwrap();
        let mut buf = [0u8; 64];
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return Some(t.elapsed()),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Some(t.elapsed());
                }
                Err(_) => return None,
            }
        }
    }

    #[test]
    fn a_keep_alive_connection_outlives_the_header_timeout_between_requests() {
        // A scraper's interval is longer than the header timeout: its connection must wait.
        let (running, _orders) = server(Duration::from_millis(200), Duration::from_secs(30));
        let mut conn = std::net::TcpStream::connect(running.addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(healthz(&mut conn).as_deref(), Some("HTTP/1.1 200 OK"));
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(healthz(&mut conn).as_deref(), Some("HTTP/1.1 200 OK"), "closed while idle");
        assert_eq!(running.stats.accepted.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_request_that_stalls_in_its_headers_or_never_comes_is_closed_at_the_header_timeout() {
        use std::io::Write;
        let (running, _orders) = server(Duration::from_millis(300), Duration::from_secs(30));
        // A slow client: the request started, then nothing, after one served request.
        let mut slow = std::net::TcpStream::connect(running.addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(healthz(&mut slow).as_deref(), Some("HTTP/1.1 200 OK"));
        std::thread::sleep(Duration::from_millis(500));
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHo").unwrap();
        let took = closed_within(&mut slow, Duration::from_secs(5)).expect("never closed");
        assert!(took >= Duration::from_millis(250), "closed before the timeout: {took:?}");
        // A client that connects and never sends its first request.
        let mut silent = std::net::TcpStream::connect(running.addr).unwrap();
        let took = closed_within(&mut silent, Duration::from_secs(5)).expect("never closed");
        assert!(took >= Duration::from_millis(250), "closed before the timeout: {took:?}");
        assert_eq!(running.stats.timed_out.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_page_in_two_parts_is_sent_and_compressed_as_one() {
        use std::io::Read;
        let (head, tail) = ("# HELP a A\na 1\n".repeat(500), "b_total 2\n# EOF\n".repeat(300));
        // Several pages in turn, as scrapes come: the deflate state is kept between them.
        for page in [(&head, &tail), (&tail, &head), (&String::new(), &head)] {
            let mut text = String::new();
            let zipped = gzip_parts(&[page.0.as_bytes(), page.1.as_bytes()]);
            // Byte for byte what a fresh gzip encoder writes: the kept state starts clean.
            let mut fresh = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut fresh, format!("{}{}", page.0, page.1).as_bytes())
                .unwrap();
            assert_eq!(zipped[..], fresh.finish().unwrap()[..]);
            let mut decoder = flate2::read::GzDecoder::new(&zipped[..]);
            decoder.read_to_string(&mut text).unwrap();
            assert_eq!(text, format!("{}{}", page.0, page.1));
            // Nothing after the trailer; the header as flate2 writes it.
            assert_eq!(decoder.header().map(|h| h.operating_system()), Some(255));
        }
        let page = Page {
            status: 200,
            content_type: "text/plain",
            body: Bytes::from(head.clone()),
            tail: Bytes::from(tail.clone()),
            gzip: false,
        };
        let response = page_response(page.clone(), false);
        let length = response.headers()[header::CONTENT_LENGTH].to_str().unwrap().to_string();
        assert_eq!(length, (head.len() + tail.len()).to_string());
        // HEAD: the length of the page, no body.
        let head_only = page_response(page, true);
        assert_eq!(head_only.headers()[header::CONTENT_LENGTH].to_str().unwrap(), length);
        assert_eq!(hyper::body::Body::size_hint(head_only.body()).exact(), Some(0));
        assert_eq!(
            hyper::body::Body::size_hint(response.body()).exact(),
            Some((head.len() + tail.len()) as u64)
        );
    }
}
