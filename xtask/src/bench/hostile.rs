//! `--only hostile`: the HTTP attacks of the security round (`tests/cli_serve/hostile.rs`,
//! docs/serve.md's findings) against `tmetric serve` and node_exporter, the same attacks one
//! after another, on loopback only: a 64 MB header line, 300,000 header lines, 40 clients that
//! pipeline 2,000 scrapes each and never read, 3,000 idle connections, descriptors run out
//! (the exporter started again under `ulimit -n 64`, 200 connections held), malformed request
//! lines. While each lasts, the exporter's resident memory, threads and descriptors are sampled
//! every 20 ms from /proc, and `/metrics` and the health endpoint (tmetric's `/healthz`;
//! node_exporter has none) are asked every 250 ms, each answer counting only when it is a 200
//! within 1 s.
//!
//! node_exporter is `TMETRIC_BENCH_NODE_EXPORTER`, else `prometheus-node-exporter` or
//! `node_exporter` in `PATH` (Debian's `prometheus-node-exporter`; never its service: the
//! binary is started here on a free loopback port); without one its column is skipped, and
//! said. The attacks take any exporter's address and process id ([`attack_all`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::serve::{Killed, serving_address};
use crate::table::{Status, Table};

/// A scrape counts when it is a 200 within this.
const WITHIN: Duration = Duration::from_secs(1);
/// How long each attack is held while the probes run.
const HOLD: Duration = Duration::from_secs(3);
/// The descriptor limit of the exhaustion attack, and the connections held against it.
const NOFILE: u32 = 64;
const HELD: usize = 200;

/// An exporter under attack.
pub(super) struct Exporter {
    name: &'static str,
    process: Killed,
    addr: SocketAddr,
    /// Its health endpoint, when it has one.
    health: Option<&'static str>,
}

impl Exporter {
    fn pid(&self) -> u32 {
        self.process.0.id()
    }
}

/// How an exporter is started: its name, binary and arguments, and how its address is known.
#[derive(Clone)]
struct Recipe {
    name: &'static str,
    bin: PathBuf,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Tmetric,
    NodeExporter,
}

/// `command` with the exporter's descriptor limit set to `nofile` (soft and hard) when given.
fn limited(bin: &Path, nofile: Option<u32>) -> Command {
    match nofile {
        Some(n) => {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")]).arg(bin);
            c
        }
        None => Command::new(bin),
    }
}

impl Recipe {
    fn start(&self, nofile: Option<u32>) -> Result<Exporter> {
        match self.kind {
            Kind::Tmetric => {
                let mut child = limited(&self.bin, nofile)
                    .args(["serve", "-M", "Software", "--interval", "2s"])
                    .args(["--listen", "127.0.0.1:0"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("tmetric serve")?;
                let mut err = child.stderr.take().context("stderr")?;
                let process = Killed(child);
                let addr = serving_address(&mut err)?;
                std::thread::spawn(move || {
                    let mut sink = Vec::new();
                    let _ = err.read_to_end(&mut sink);
                });
                let addr = addr.parse().context("the address serve printed")?;
                wait_until_it_answers(addr, "/healthz")?;
                Ok(Exporter { name: self.name, process, addr, health: Some("/healthz") })
            }
            Kind::NodeExporter => {
                // A free loopback port: bound, read and let go.
                let addr = TcpListener::bind("127.0.0.1:0")?.local_addr()?;
                let child = limited(&self.bin, nofile)
                    .arg(format!("--web.listen-address={addr}"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .with_context(|| format!("{}", self.bin.display()))?;
                let process = Killed(child);
                wait_until_it_answers(addr, "/metrics")?;
                Ok(Exporter { name: self.name, process, addr, health: None })
            }
        }
    }
}

fn wait_until_it_answers(addr: SocketAddr, path: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if get(addr, path, Duration::from_secs(5)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("{addr}{path} did not answer 200 within 30 s")
}

/// A GET of `path` that is a 200 within `limit`: how long it took; else what came instead
/// (`503`, `slow`: nothing whole within the limit, `refused`, `reset`, ...).
fn get(addr: SocketAddr, path: &str, limit: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let kind = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "slow".to_string(),
        std::io::ErrorKind::ConnectionRefused => "refused".to_string(),
        std::io::ErrorKind::ConnectionReset => "reset".to_string(),
        other => format!("{other}"),
    };
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(kind)?;
    let left = limit.checked_sub(start.elapsed()).ok_or("slow")?;
    s.set_read_timeout(Some(left)).map_err(kind)?;
    s.set_write_timeout(Some(left)).map_err(kind)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").map_err(kind)?;
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        if start.elapsed() > limit {
            return Err("slow".to_string());
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Err(kind(e)),
        }
    }
    let took = start.elapsed();
    if !out.starts_with(b"HTTP/1.1 200") {
        let status = out.get(9..12).map(|s| String::from_utf8_lossy(s).into_owned());
        return Err(status.unwrap_or_else(|| "closed".to_string()));
    }
    if took > limit {
        return Err("slow".to_string());
    }
    Ok(took)
}

/// The first line the server answered `request` with, or what happened instead.
fn answer_to(addr: SocketAddr, request: &[u8]) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return "no connection".to_string();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(request);
    status_line(&mut s)
}

fn status_line(s: &mut TcpStream) -> String {
    let mut buf = [0u8; 200];
    match s.read(&mut buf) {
        Ok(0) => "closed, no status".to_string(),
        Ok(n) => {
            let text = String::from_utf8_lossy(&buf[..n]);
            let line = text.lines().next().unwrap_or("");
            line.strip_prefix("HTTP/1.1 ").unwrap_or(line).to_string()
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => "no answer in 5 s".to_string(),
        Err(e) => format!("closed ({})", e.kind()),
    }
}

/// What /proc says of a process at one moment.
#[derive(Clone, Copy, Default)]
struct Usage {
    rss_kb: u64,
    threads: u64,
    fds: u64,
}

impl Usage {
    fn of(pid: u32) -> Usage {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
        Usage { rss_kb: field("VmRSS:"), threads: field("Threads:"), fds }
    }

    fn max(self, other: Usage) -> Usage {
        Usage {
            rss_kb: self.rss_kb.max(other.rss_kb),
            threads: self.threads.max(other.threads),
            fds: self.fds.max(other.fds),
        }
    }
}

/// Scrapes asked while an attack lasts: how long each 200 took, or what came instead.
#[derive(Default)]
struct Probes {
    metrics: Vec<Result<Duration, String>>,
    health: Vec<Result<Duration, String>>,
}

/// The sampler and the prober, from start to [`Watch::stop`].
struct Watch {
    stop: Arc<AtomicBool>,
    usage: JoinHandle<Usage>,
    probes: JoinHandle<Probes>,
}

impl Watch {
    fn start(exporter: &Exporter) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let (pid, addr, health) = (exporter.pid(), exporter.addr, exporter.health);
        let flag = Arc::clone(&stop);
        let usage = std::thread::spawn(move || {
            let mut peak = Usage::of(pid);
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(Usage::of(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak.max(Usage::of(pid))
        });
        let flag = Arc::clone(&stop);
        let probes = std::thread::spawn(move || {
            let mut probes = Probes::default();
            while !flag.load(Ordering::Relaxed) {
                let tick = Instant::now();
                probes.metrics.push(get(addr, "/metrics", WITHIN));
                if let Some(path) = health {
                    probes.health.push(get(addr, path, WITHIN));
                }
                std::thread::sleep(Duration::from_millis(250).saturating_sub(tick.elapsed()));
            }
            probes
        });
        Watch { stop, usage, probes }
    }

    fn stop(self) -> (Usage, Probes) {
        self.stop.store(true, Ordering::Relaxed);
        (self.usage.join().unwrap_or_default(), self.probes.join().unwrap_or_default())
    }
}

/// One attack's figures on one exporter.
struct Row {
    attack: &'static str,
    exporter: &'static str,
    answer: String,
    peak: Usage,
    probes: Probes,
}

/// `k/n, p50 .., max ..`: the scrapes that were a 200 within 1 s, and what the others got.
fn within(probes: &[Result<Duration, String>], asked: bool) -> String {
    if !asked {
        return "(no endpoint)".to_string();
    }
    if probes.is_empty() {
        return "none asked".to_string();
    }
    let mut ok: Vec<Duration> = probes.iter().filter_map(|p| p.as_ref().ok()).copied().collect();
    ok.sort();
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let mut text = match (ok.get(ok.len() / 2), ok.last()) {
        (Some(&p50), Some(&max)) => {
            format!("{}/{}, p50 {}, max {}", ok.len(), probes.len(), ms(p50), ms(max))
        }
        _ => format!("0/{}", probes.len()),
    };
    let mut failures: Vec<&str> =
        probes.iter().filter_map(|p| p.as_ref().err()).map(String::as_str).collect();
    failures.sort();
    failures.dedup();
    for failure in failures {
        let n =
            probes.iter().filter(|p| p.as_ref().err().map(String::as_str) == Some(failure)).count();
        text.push_str(&format!("; {n} {failure}"));
    }
    text
}

/// The attacks on a running exporter (all but the descriptor limit, which needs one started
/// under it: [`descriptors`]), each with the exporter's usage and the probes while it lasts.
fn attack_all(exporter: &Exporter, rows: &mut Vec<Row>) {
    let addr = exporter.addr;
    let mut record = |attack: &'static str, run: &mut dyn FnMut() -> String| {
        let watch = Watch::start(exporter);
        let answer = run();
        let (peak, probes) = watch.stop();
        rows.push(Row { attack, exporter: exporter.name, answer, peak, probes });
        // Let idle timeouts and the allocator settle before the next one.
        std::thread::sleep(Duration::from_secs(2));
    };

    record("at rest", &mut || {
        std::thread::sleep(HOLD);
        String::new()
    });

    record("64 MB header lines, one after another for 3 s", &mut || {
        repeated(|| {
            let Ok(mut s) = TcpStream::connect(addr) else { return "no connection".into() };
            let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
            let chunk = vec![b'a'; 64 * 1024];
            let mut sent = 0usize;
            let started = Instant::now();
            while sent < 64 << 20 && started.elapsed() < Duration::from_secs(30) {
                if s.write_all(&chunk).is_err() {
                    break;
                }
                sent += chunk.len();
            }
            let mb = if sent < 1 << 20 { "< 1".to_string() } else { (sent >> 20).to_string() };
            format!("{} after {mb} MB", status_line(&mut s))
        })
    });

    record("300,000 header lines, one request after another for 3 s", &mut || {
        let mut many = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 0..300_000 {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        repeated(|| answer_to(addr, &many))
    });

    record("40 clients pipelining 2,000 scrapes, never reading", &mut || {
        let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
        let mut stalled = Vec::new();
        for _ in 0..40 {
            if let Ok(mut s) = TcpStream::connect(addr) {
                let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                let _ = s.write_all(&request);
                stalled.push(s);
            }
        }
        std::thread::sleep(HOLD);
        format!("{} connected", stalled.len())
    });

    record("3,000 idle connections, opened as fast as they connect", &mut || {
        let mut idle = Vec::new();
        let mut failed = 0;
        let started = Instant::now();
        while idle.len() + failed < 3000 && started.elapsed() < Duration::from_secs(20) {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => idle.push(s),
                Err(_) => failed += 1,
            }
        }
        std::thread::sleep(HOLD);
        // How many the server still holds open: a read that ends (0) means it closed.
        let open = idle
            .iter()
            .filter(|s| {
                let _ = s.set_nonblocking(true);
                let mut stream: &TcpStream = s;
                matches!(stream.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            })
            .count();
        format!(
            "{} connected ({failed} did not in 1 s), {open} still open {} s later",
            idle.len(),
            HOLD.as_secs()
        )
    });

    record("malformed request lines, repeated for 3 s", &mut || {
        repeated(|| {
            [
                &b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n"[..],
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-\xff: y\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: \xff\xfe\r\nConnection: close\r\n\r\n",
                b"GET /metrics HTTP/1.1\nHost: x\nConnection: close\n\n",
            ]
            .iter()
            .map(|r| answer_to(addr, r))
            .map(|a| a.split(' ').next().unwrap_or("").to_string())
            .collect::<Vec<_>>()
            .join(" / ")
        })
    });
}

/// `attack` again and again for [`HOLD`] (at least once): what it got each time, with how
/// many times when that varied.
fn repeated(mut attack: impl FnMut() -> String) -> String {
    let started = Instant::now();
    let mut answers: Vec<(String, usize)> = Vec::new();
    loop {
        let answer = attack();
        match answers.iter_mut().find(|(a, _)| *a == answer) {
            Some((_, n)) => *n += 1,
            None => answers.push((answer, 1)),
        }
        if started.elapsed() >= HOLD {
            break;
        }
    }
    answers.iter().map(|(a, n)| format!("{n} x {a}")).collect::<Vec<_>>().join(", ")
}

/// Descriptors run out: the exporter started under `ulimit -n 64` and 200 connections held;
/// whether another process could bind its port meanwhile, and how long after they are let go
/// `/metrics` is a 200 again.
fn descriptors(recipe: &Recipe, rows: &mut Vec<Row>) -> Result<()> {
    let exporter = recipe.start(Some(NOFILE))?;
    let addr = exporter.addr;
    let watch = Watch::start(&exporter);
    let mut held = Vec::new();
    for _ in 0..HELD {
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            held.push(s);
        }
    }
    std::thread::sleep(HOLD);
    let port = if TcpListener::bind(addr).is_ok() { "port free" } else { "port kept" };
    let (peak, probes) = watch.stop();
    let connected = held.len();
    drop(held);
    let let_go = Instant::now();
    let again = loop {
        if get(addr, "/metrics", WITHIN).is_ok() {
            break format!("200 again {:.2} s after", let_go.elapsed().as_secs_f64());
        }
        if let_go.elapsed() > Duration::from_secs(30) {
            break "no 200 in 30 s after".to_string();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let answer = format!("{connected} connected, {port}, {again}");
    rows.push(Row {
        attack: "descriptors run out (ulimit -n 64, 200 connections held)",
        exporter: exporter.name,
        answer,
        peak,
        probes,
    });
    Ok(())
}

/// The node_exporter binary: `TMETRIC_BENCH_NODE_EXPORTER`, else one in `PATH`.
fn node_exporter() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TMETRIC_BENCH_NODE_EXPORTER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find_map(|dir| {
        ["prometheus-node-exporter", "node_exporter"]
            .iter()
            .map(|name| dir.join(name))
            .find(|p| p.is_file())
    })
}

fn version(bin: &Path, arg: &str) -> String {
    Command::new(bin)
        .arg(arg)
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            text.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// The section.
pub fn bench(root: &Path, table: &mut Table) -> Result<()> {
    let mut recipes = vec![Recipe {
        name: "tmetric",
        bin: crate::builds::release_tmetric(root)?,
        kind: Kind::Tmetric,
    }];
    println!("  tmetric: {}", version(&recipes[0].bin, "--version"));
    match node_exporter() {
        Some(bin) if bin.is_file() => {
            println!("  node_exporter: {} ({})", version(&bin, "--version"), bin.display());
            recipes.push(Recipe { name: "node_exporter", bin, kind: Kind::NodeExporter });
        }
        Some(bin) => println!(
            "  node_exporter skipped: TMETRIC_BENCH_NODE_EXPORTER names {}, which is not a file",
            bin.display()
        ),
        None => println!(
            "  node_exporter skipped: set TMETRIC_BENCH_NODE_EXPORTER or put prometheus-node-exporter in PATH"
        ),
    }
    let mut rows = Vec::new();
    for recipe in &recipes {
        let exporter = recipe.start(None)?;
        println!("  {} at {}, pid {}", exporter.name, exporter.addr, exporter.pid());
        attack_all(&exporter, &mut rows);
        drop(exporter);
        descriptors(recipe, &mut rows)?;
    }
    println!(
        "\n| attack | exporter | answer | peak RSS | threads | descriptors | /metrics 200 within 1 s | /healthz 200 within 1 s |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.1} MB | {} | {} | {} | {} |",
            row.attack,
            row.exporter,
            row.answer,
            row.peak.rss_kb as f64 / 1024.0,
            row.peak.threads,
            row.peak.fds,
            within(&row.probes.metrics, true),
            within(&row.probes.health, !row.probes.health.is_empty()),
        );
    }
    // The summary: scrapes answered within 1 s during the attacks other than running out of
    // descriptors (where no exporter can accept), and the highest memory.
    for recipe in &recipes {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.exporter == recipe.name).collect();
        let attacked =
            mine.iter().filter(|r| r.attack != "at rest" && !r.attack.starts_with("descriptors"));
        let (mut ok, mut asked) = (0, 0);
        for r in attacked {
            ok += r.probes.metrics.iter().filter(|p| p.is_ok()).count();
            asked += r.probes.metrics.len();
        }
        let peak = mine.iter().map(|r| r.peak.rss_kb).max().unwrap_or(0);
        table.row(
            &format!("hostile: {} /metrics within 1 s under attack", recipe.name),
            &format!("{ok}/{asked}"),
            &format!("peak RSS {:.1} MB", peak as f64 / 1024.0),
            "",
            "every one",
            if ok == asked { Status::Met } else { Status::Missed },
        );
    }
    Ok(())
}
