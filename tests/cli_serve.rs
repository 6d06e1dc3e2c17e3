//! `tmetric serve` and `tmetric rules` end to end: a real Prometheus (the Debian `prometheus`
//! package; `.ci/run` installs it, and these tests say so and skip when it is missing)
//! scrapes tmetric on this machine (software metrics per cgroup, counted for real) and on a
//! simulated sapphirerapids (TopdownL1/L2 per cgroup), answers queries with tmetric's own
//! values, and evaluates `tmetric rules`' recording rules to them; `promtool` accepts
//! `/metrics` and the rules. Cgroups come and go during scrapes, the descriptor budget and a
//! low open-file limit leave cgroups out and say so, and a short load test checks that
//! descriptors and memory stay flat (the full one is `load_full`, ignored by default).
//!
//! This file holds the servers (`Serve`, `Prometheus`) and HTTP helpers; the tests are by what
//! they check: `rules` (flags and `tmetric rules`' translation), `prometheus` (scrapes, recording
//! rules and `--once` through Prometheus and promtool), `cgroups` (churn and descriptor limits),
//! `kubernetes` (pods' names from a fake kubelet log directory, joined in Prometheus),
//! `tls` (`--web.config.file` with curl) and `load`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli_cgroup::Cgroup;

mod cgroups;
mod hostile;
mod kubernetes;
mod load;
mod prometheus;
mod rules;
mod tls;

/// A child killed (and reaped) when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `tmetric serve`.
struct Serve {
    child: Child,
    addr: String,
    log: Arc<Mutex<String>>,
}

impl Serve {
    /// `TMETRIC_BIN` overrides the binary (the load test's figures want a release build).
    fn start(args: &[&str]) -> Serve {
        let bin = std::env::var("TMETRIC_BIN").unwrap_or(env!("CARGO_BIN_EXE_tmetric").into());
        Serve::start_with(Command::new(bin).arg("serve").args(args))
    }

    fn start_with(command: &mut Command) -> Serve {
        let mut child = command
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tmetric serve starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            log.lock().unwrap().push_str(&format!("{line}\n"));
            // `http://` or, with TLS, `https://`.
            if let Some(rest) = line.split("serving on ").nth(1).and_then(|r| r.split("://").nth(1))
            {
                addr = Some(rest.split('/').next().unwrap().to_string());
                break;
            }
        }
        let Some(addr) = addr else {
            let _ = child.wait();
            panic!("tmetric serve did not start: {}", log.lock().unwrap());
        };
        let keep = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                keep.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Serve { child, addr, log }
    }

    fn get(&self, path: &str) -> (u16, String) {
        http_get(&self.addr, path, None)
    }

    /// The JSON view once `intervals` intervals have ended.
    fn json_after(&self, intervals: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, body) = self.get("/json");
            if status == 200 {
                let v: Value = serde_json::from_str(&body).unwrap();
                if v["interval"]["number"].as_u64().unwrap_or(0) >= intervals {
                    return v;
                }
            }
            assert!(Instant::now() < deadline, "no interval {intervals}: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GET over loopback: status and body.
fn http_get(addr: &str, path: &str, accept: Option<&str>) -> (u16, String) {
    http_try_get(addr, path, accept).unwrap_or_else(|e| panic!("{addr}{path}: {e}"))
}

/// A GET over loopback, or the I/O error (a listener being restarted resets the
/// connections its old socket had queued).
fn http_try_get(addr: &str, path: &str, accept: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_string()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Percent-encoding for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Why Prometheus tests cannot run here, if they cannot.
fn prometheus_missing() -> Option<String> {
    for tool in ["prometheus", "promtool"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return Some(format!(
                "`{tool}` is not installed (the Debian package `prometheus`; .ci/run installs it)"
            ));
        }
    }
    None
}

/// A Prometheus on a private port and data directory.
struct Prometheus {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` every `scrape_ms`, evaluating `rules` (a file) as often.
    fn start(target: &str, scrape_ms: u64, rules: Option<&Path>) -> Prometheus {
        let dir = tempfile::Builder::new().prefix("tmetric-prometheus-").tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let rule_files =
            rules.map(|r| format!("rule_files:\n  - {}\n", r.display())).unwrap_or_default();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {scrape_ms}ms\n  scrape_timeout: {scrape_ms}ms\n  evaluation_interval: {scrape_ms}ms\n{rule_files}scrape_configs:\n  - job_name: tmetric\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts");
        let p = Prometheus { child, addr, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect(&p.addr).is_ok() && http_get(&p.addr, "/-/ready", None).0 == 200 {
                return p;
            }
            assert!(Instant::now() < deadline, "prometheus did not become ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// An instant query: `(labels, value)` per series.
    fn query(&self, q: &str) -> Vec<(Value, f64)> {
        let (status, body) =
            http_get(&self.addr, &format!("/api/v1/query?query={}", encode(q)), None);
        assert_eq!(status, 200, "{q}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["metric"].clone(), r["value"][1].as_str().unwrap().parse().unwrap()))
            .collect()
    }

    /// Waits until `q` returns a series.
    fn wait_for(&self, q: &str) -> Vec<(Value, f64)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = self.query(q);
            if !r.is_empty() {
                return r;
            }
            assert!(Instant::now() < deadline, "prometheus never returned {q}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `promtool check metrics` over `text`: its complaints, if any.
fn promtool_metrics(text: &str) -> Result<(), String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("promtool: {e}"))?;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The value of `metric` for `cgroup` (None: the host) in a JSON view.
fn json_value(view: &Value, cgroup: Option<&str>, metric: &str) -> Option<f64> {
    let target = view["targets"].as_array()?.iter().find(|t| t["cgroup"].as_str() == cgroup)?;
    let m = target["units"][0]["metrics"].as_array()?.iter().find(|m| m["metric"] == metric)?;
    m["value"].as_f64()
}

/// The cgroup paths a pattern test makes: `/tmetric-test-serve-<pid>-<tag>-<i>`.
fn make(mount: &Path, tag: &str, n: usize) -> Vec<Cgroup> {
    (0..n).map(|i| Cgroup::new(mount, &format!("{tag}-{i}"))).collect()
}
