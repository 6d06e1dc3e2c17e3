//! `--only serve`: `tmetric serve`'s CPU per interval against `perf stat -a -I <interval> -x,
//! --for-each-cgroup` on the same cgroups and events, run side by side, at 1, 20 and 100
//! cgroups. The cost target is 1.5x perf's. Root only (it makes cgroups under the cgroup2
//! mount); the release binary is built in ./target first. Two serves count side by side with
//! perf: one scraped, one never. A scraper reads the first's `/metrics` once per interval, as a
//! Prometheus whose scrape interval is serve's would, and as Prometheus does: over one
//! kept-alive connection, asking for OpenMetrics and gzip. That is the most a useful scraper
//! costs: Prometheus's own default scrape interval is a minute (15-30 s are common), against
//! serve's 10 s, and a scraper faster than the interval gets the same gauges again. That scrape (HTTP, rendering, gzip,
//! the loopback TCP both ways, charged to the sender) is a cost perf does not have, since perf
//! writes its lines to a file, and an operator does; the second serve is the collection alone
//! (reads, evaluation, the cgroup walk), what perf's own work compares with. CPU is the
//! processes' scheduler run time (`/proc/PID/task/*/schedstat`, nanoseconds), taken after a
//! first interval and a first scrape (start-up excluded: both exporters' steady state is what an
//! operator pays for every interval) and again `TMETRIC_BENCH_SERVE_INTERVALS` (3) intervals later;
//! `TMETRIC_BENCH_SERVE_INTERVAL` (10s) is the interval. `TMETRIC_BENCH_SERVE_BIN` measures
//! that binary instead of building one (an earlier commit's, for a before and after).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::table::{Status, Table};

/// What `-M Software` counts, as perf names it.
const EVENTS: &str = "task-clock,context-switches,cpu-migrations,page-faults,major-faults,msr/tsc/";

/// A child ended (SIGINT, then SIGKILL after 5 s) and reaped when dropped.
pub(super) struct Killed(pub(super) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Scheduler run time of every thread of `pid`, in ns.
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "cgroup2").then(|| PathBuf::from(f[1]))
    })
}

struct Cgroups(Vec<PathBuf>);

impl Drop for Cgroups {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir(p);
        }
    }
}

/// What Prometheus 2.x sends with every scrape: it asks for OpenMetrics first and accepts gzip.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A scraper as Prometheus is one: one HTTP/1.1 connection kept alive from scrape to scrape
/// (Go's client reuses it), Prometheus's `Accept` and `Accept-Encoding: gzip`. A new
/// connection per scrape would charge the exporter a TCP handshake and teardown an interval
/// that no real scraper makes it pay.
struct Scraper {
    addr: String,
    conn: Option<std::io::BufReader<std::net::TcpStream>>,
}

impl Scraper {
    fn new(addr: &str) -> Self {
        Scraper { addr: addr.to_string(), conn: None }
    }

    /// One scrape of `/metrics`: the body's length as sent (compressed).
    fn scrape(&mut self) -> Result<usize> {
        use std::io::BufRead;
        if self.conn.is_none() {
            let s = std::net::TcpStream::connect(&self.addr)?;
            s.set_read_timeout(Some(Duration::from_secs(10)))?;
            self.conn = Some(std::io::BufReader::new(s));
        }
        let conn = self.conn.as_mut().context("connection")?;
        write!(
            conn.get_mut(),
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nUser-Agent: Prometheus/2.42.0\r\nAccept: {PROMETHEUS_ACCEPT}\r\nAccept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n",
            self.addr
        )?;
        let mut length = None;
        let mut status = String::new();
        conn.read_line(&mut status)?;
        if !status.starts_with("HTTP/1.1 200") {
            self.conn = None;
            bail!("scrape answered `{}`", status.trim_end());
        }
        loop {
            let mut line = String::new();
            if conn.read_line(&mut line)? == 0 {
                bail!("connection closed in the headers");
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let length = length.context("no content-length in the answer")?;
        let mut body = vec![0; length];
        conn.read_exact(&mut body)?;
        Ok(length)
    }
}

/// The address `tmetric serve` prints on standard error when it starts (`serving on
/// http://ADDR/metrics`), read from `err` for at most 30 s.
pub(super) fn serving_address(err: &mut impl Read) -> Result<String> {
    let mut text = String::new();
    let mut buf = [0u8; 512];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let k = err.read(&mut buf)?;
        text.push_str(&String::from_utf8_lossy(&buf[..k]));
        if let Some(rest) = text.split("serving on http://").nth(1)
            && let Some(a) = rest.split('/').next()
        {
            return Ok(a.to_string());
        }
        if k == 0 || Instant::now() > deadline {
            bail!("tmetric serve did not start: {text}");
        }
    }
}

/// One run at `n` cgroups, in ns per interval: the scraped serve's, the serve never scraped's,
/// perf's; and the scrape's bytes.
fn run(
    bin: &Path,
    mount: &Path,
    n: usize,
    interval: Duration,
    intervals: u32,
) -> Result<(f64, f64, f64, usize)> {
    let pid = std::process::id();
    let names: Vec<String> = (0..n).map(|i| format!("tmetric-bench-serve-{pid}-{i}")).collect();
    let made = Cgroups(names.iter().map(|c| mount.join(c)).collect());
    for p in &made.0 {
        std::fs::create_dir(p).with_context(|| format!("cannot make {}", p.display()))?;
    }
    let list = names.join(",");
    let ms = format!("{}ms", interval.as_millis());
    let start = || {
        Command::new(bin)
            .args(["serve", "-M", "Software", "--no-host", "--for-each-cgroup", &list])
            .args(["--interval", &ms, "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("tmetric serve")
    };
    let mut serve = start()?;
    let mut err = serve.stderr.take().context("stderr")?;
    let serve = Killed(serve);
    let mut quiet = start()?;
    let mut quiet_err = quiet.stderr.take().context("stderr")?;
    let quiet = Killed(quiet);
    let perf = Killed(
        Command::new("perf")
            .args(["stat", "-a", "-I", &interval.as_millis().to_string(), "-x,", "-e", EVENTS])
            .args(["--for-each-cgroup", &list, "-o", "/dev/null"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("perf stat")?,
    );
    let addr = serving_address(&mut err)?;
    serving_address(&mut quiet_err)?;
    for mut e in [err, quiet_err] {
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = e.read_to_end(&mut sink);
        });
    }
    std::thread::sleep(interval + interval / 2);
    // The first scrape's one-time costs (the server's first connection, buffers grown to the
    // page's size) are start-up, as the first interval is.
    let mut scraper = Scraper::new(&addr);
    scraper.scrape()?;
    let (s0, q0, p0) = (cpu_ns(serve.0.id()), cpu_ns(quiet.0.id()), cpu_ns(perf.0.id()));
    let mut bytes = 0;
    for _ in 0..intervals {
        std::thread::sleep(interval);
        bytes = scraper.scrape()?;
    }
    let (s1, q1, p1) = (cpu_ns(serve.0.id()), cpu_ns(quiet.0.id()), cpu_ns(perf.0.id()));
    drop(serve);
    drop(quiet);
    drop(perf);
    let k = f64::from(intervals);
    Ok(((s1 - s0) as f64 / k, (q1 - q0) as f64 / k, (p1 - p0) as f64 / k, bytes))
}

/// The section.
pub fn bench(root: &Path, table: &mut Table) -> Result<()> {
    let Some(mount) = cgroup2_mount() else { bail!("no cgroup2 mount") };
    let bin = match std::env::var_os("TMETRIC_BENCH_SERVE_BIN") {
        Some(path) => PathBuf::from(path),
        None => crate::builds::release_tmetric(root)?,
    };
    println!("  binary {}", bin.display());
    let interval = std::env::var("TMETRIC_BENCH_SERVE_INTERVAL")
        .ok()
        .and_then(|s| s.trim_end_matches('s').parse::<f64>().ok())
        .map_or(Duration::from_secs(10), Duration::from_secs_f64);
    let intervals: u32 = std::env::var("TMETRIC_BENCH_SERVE_INTERVALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    println!(
        "  -M Software (6 events) per cgroup, --interval {:?}, {intervals} intervals each; CPU per interval of serve scraped once an interval, of serve never scraped (the collection alone) and of perf",
        interval
    );
    for n in [1usize, 20, 100] {
        let (mine, quiet, perf, bytes) = run(&bin, &mount, n, interval, intervals)?;
        let (ratio, quiet_ratio) = (mine / perf.max(1.0), quiet / perf.max(1.0));
        println!(
            "  {n:>3} cgroups: tmetric {:.2} ms scraped ({ratio:.2}x), {:.2} ms not scraped ({quiet_ratio:.2}x), perf {:.2} ms, scrape {bytes} bytes gzipped",
            mine / 1e6,
            quiet / 1e6,
            perf / 1e6
        );
        for (what, ms, r) in
            [("scraped", mine, ratio), ("collection alone, not scraped", quiet, quiet_ratio)]
        {
            table.row(
                &format!("serve CPU per interval, {n} cgroups, {what}"),
                &format!("{:.2} ms", ms / 1e6),
                &format!("perf {:.2} ms", perf / 1e6),
                &format!("{r:.2}x"),
                "<= 1.5x perf",
                if r <= 1.5 { Status::Met } else { Status::Missed },
            );
        }
    }
    Ok(())
}
