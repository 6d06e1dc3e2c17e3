//! `tmetric serve` and `tmetric rules` end to end: a real Prometheus (the Debian `prometheus`
//! package; `.ci/run` installs it, and these tests say so and skip when it is missing)
//! scrapes tmetric on this machine (software metrics per cgroup, counted for real) and on a
//! simulated sapphirerapids (TopdownL1/L2 per cgroup), answers queries with tmetric's own
//! values, and evaluates `tmetric rules`' recording rules to them; `promtool` accepts
//! `/metrics` and the rules. Cgroups come and go during scrapes, the descriptor budget and a
//! low open-file limit leave cgroups out and say so, and a short load test checks that
//! descriptors and memory stay flat (the full one is `load_full`, ignored by default).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli_cgroup::{Cgroup, mount};
use crate::support::{stderr, tmetric};

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
            if let Some(rest) = line.split("serving on http://").nth(1) {
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

#[test]
fn serve_and_rules_flags_are_checked() {
    let out = tmetric(&["serve", "--interval", "10x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown unit `x`"), "{}", stderr(&out));
    let out = tmetric(&["serve", "--interval", "50ms"]);
    assert!(stderr(&out).contains("at least 100ms"), "{}", stderr(&out));
    let out = tmetric(&["serve", "--no-host", "-M", "Software"]);
    assert!(stderr(&out).contains("give --cgroup or --for-each-cgroup"), "{}", stderr(&out));
    let out = tmetric(&["serve", "--cgroup", "/a/../b", "-M", "Software"]);
    assert!(stderr(&out).contains("`..` would leave the cgroup tree"), "{}", stderr(&out));
    let out = tmetric(&["serve", "-M", "NoSuchMetricAnywhere"]);
    assert!(stderr(&out).contains("cannot find metric or group `NoSuchMetricAnywhere`"));
    let out = tmetric(&["rules", "-M", "Software", "--window", "1m;drop"]);
    assert!(stderr(&out).contains("give a Prometheus duration"), "{}", stderr(&out));
}

#[test]
fn rules_say_what_they_cannot_translate() {
    let out = tmetric(&["rules", "-M", "TopdownL1,TopdownL2", "--model", "sapphirerapids"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.contains("record: tmetric:event:rate1m"));
    assert!(yaml.contains("record: tmetric:tma_retiring_ratio:rate1m"));
    // tma_core_bound reads the recorded rules of other metrics, after them.
    let core = yaml.find("record: tmetric:tma_core_bound_ratio").unwrap();
    assert!(yaml.find("record: tmetric:tma_backend_bound_ratio").unwrap() < core);
    assert!(yaml[core..].contains("clamp_min((tmetric:tma_backend_bound_ratio:rate1m - tmetric:tma_memory_bound_ratio:rate1m), 0)"));
    // A count is not a ratio: said, with the reason.
    let out = tmetric(&["rules", "-M", "tma_info_thread_slots", "--model", "sapphirerapids"]);
    let yaml = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(yaml.contains("# not translated: x86/sapphirerapids tma_info_thread_slots: its value depends on the interval's length"), "{yaml}");
    assert!(stderr(&out).contains("tma_info_thread_slots is not translated"));
    // The dashboard: TopdownL1 and L2 per host and per cgroup, from the exported gauges.
    let out = tmetric(&[
        "rules",
        "-M",
        "TopdownL1,TopdownL2",
        "--model",
        "sapphirerapids",
        "--dashboard",
    ]);
    let dash: Value = serde_json::from_slice(&out.stdout).unwrap();
    let panels = dash["panels"].as_array().unwrap();
    let rows: Vec<&str> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        rows,
        [
            "TopdownL1 per host",
            "TopdownL2 per host",
            "TopdownL1 per cgroup",
            "TopdownL2 per cgroup"
        ]
    );
    let exprs: Vec<&str> = panels.iter().filter_map(|p| p["targets"][0]["expr"].as_str()).collect();
    assert_eq!(exprs.len(), 24);
    assert!(exprs.contains(&"tmetric_tma_retiring_ratio{instance=~\"$instance\",cgroup=~\"$cgroup\",model=\"x86/sapphirerapids\"}"));
}

#[test]
fn prometheus_scrapes_software_metrics_per_cgroup_with_tmetrics_values() {
    if let Some(why) = prometheus_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let busy = Cgroup::new(&mount, "serve-busy");
    let idle = Cgroup::new(&mount, "serve-idle");
    let (busy_path, idle_path) = (format!("/{}", busy.name), format!("/{}", idle.name));
    // Killed however the test ends, so the cgroup can be removed.
    let spinner = KillOnDrop(busy.spin(40_000));
    let serve = Serve::start(&[
        "-M",
        "Software",
        "--cgroup",
        &busy_path,
        "--cgroup",
        &idle_path,
        "--interval",
        "1s",
        "--reads",
        "2",
    ]);
    let prom = Prometheus::start(&serve.addr, 250, None);
    // promtool accepts /metrics once cgroups are counted.
    let view = serve.json_after(2);
    assert_eq!(view["targets"].as_array().unwrap().len(), 3, "{view}");
    let (status, text) = serve.get("/metrics");
    assert_eq!(status, 200);
    promtool_metrics(&text).unwrap();
    let (_, om) =
        http_get(&serve.addr, "/metrics", Some("application/openmetrics-text;version=1.0.0"));
    assert!(om.ends_with("# EOF\n"));
    assert_eq!(serve.get("/healthz"), (200, "ok\n".to_string()));
    prom.wait_for(&format!("tmetric_cpus_utilized{{cgroup=\"{busy_path}\"}}"));
    // Prometheus answers with the value tmetric computed for the same interval.
    let mut compared = 0;
    let deadline = Instant::now() + Duration::from_secs(40);
    // tmetric's own text, parsed exactly (serde_json's float parsing may be an ulp off).
    let sample = |text: &str, series: &str| -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    };
    while compared < 3 {
        assert!(Instant::now() < deadline, "no interval matched: {}", serve.log());
        let (_, text) = serve.get("/metrics");
        let n = sample(&text, "tmetric_intervals_total").unwrap();
        let seen = prom.query("tmetric_intervals_total");
        if seen.first().map(|s| s.1) != Some(n) {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let busy_v = prom.query(&format!("tmetric_cpus_utilized{{cgroup=\"{busy_path}\"}}"));
        let host_v = prom.query("tmetric_cpus_utilized{cgroup=\"\"}");
        if prom.query("tmetric_intervals_total").first().map(|s| s.1) != Some(n) {
            continue;
        }
        let mine = sample(
            &text,
            &format!("tmetric_cpus_utilized{{cgroup=\"{busy_path}\",model=\"common/common\"}}"),
        )
        .unwrap();
        assert_eq!(busy_v[0].1, mine, "Prometheus and tmetric disagree for interval {n}");
        let host = sample(&text, "tmetric_cpus_utilized{model=\"common/common\"}").unwrap();
        assert_eq!(host_v[0].1, host);
        // The JSON view says the same (to serde_json's parsing).
        let view = serve.json_after(0);
        if view["interval"]["number"].as_f64() == Some(n) {
            let json = json_value(&view, Some(&busy_path), "cpus_utilized").unwrap();
            assert!((json - mine).abs() <= mine.abs() * 1e-15, "{json} {mine}");
        }
        // The spinner keeps its cgroup busy (on a shared machine, not a whole CPU).
        assert!(mine > 0.05 && mine < 1.2, "busy cgroup uses {mine} CPUs");
        compared += 1;
        std::thread::sleep(Duration::from_millis(700));
    }
    // The idle cgroup never ran: no number, the reason instead.
    let missing = prom.query(&format!(
        "tmetric_metric_missing_info{{cgroup=\"{idle_path}\",metric=\"cpus_utilized\"}}"
    ));
    assert_eq!(missing.len(), 1);
    assert!(missing[0].0["reason"].as_str().unwrap().contains("never ran on a counter"));
    assert!(prom.query(&format!("tmetric_cpus_utilized{{cgroup=\"{idle_path}\"}}")).is_empty());
    drop(spinner);
}

#[test]
fn recording_rules_evaluate_to_tmetrics_values_on_a_simulated_pmu() {
    if let Some(why) = prometheus_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let a = Cgroup::new(&mount, "serve-sim-a");
    let b = Cgroup::new(&mount, "serve-sim-b");
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yml");
    let out = tmetric(&[
        "rules",
        "-M",
        "TopdownL1,TopdownL2",
        "--model",
        "sapphirerapids",
        "--window",
        "3s",
        "-o",
        rules.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let check = Command::new("promtool").args(["check", "rules"]).arg(&rules).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    assert!(String::from_utf8_lossy(&check.stdout).contains("SUCCESS: 13 rules found"));
    let serve = Serve::start(&[
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1,TopdownL2",
        "--cgroup",
        &format!("/{}", a.name),
        "--cgroup",
        &format!("/{}", b.name),
        "--interval",
        "1s",
    ]);
    let prom = Prometheus::start(&serve.addr, 250, Some(&rules));
    serve.json_after(1);
    let (_, text) = serve.get("/metrics");
    promtool_metrics(&text).unwrap();
    let metrics = [
        ("tma_retiring", 0.40),
        ("tma_backend_bound", 0.30),
        ("tma_frontend_bound", 0.20),
        ("tma_bad_speculation", 0.10),
        ("tma_memory_bound", 0.18),
        ("tma_core_bound", 0.12),
        ("tma_fetch_latency", 0.12),
        ("tma_fetch_bandwidth", 0.08),
        ("tma_heavy_operations", 0.10),
        ("tma_light_operations", 0.30),
        ("tma_branch_mispredicts", 0.08),
        ("tma_machine_clears", 0.02),
    ];
    prom.wait_for("tmetric:tma_machine_clears_ratio:rate3s");
    // Past the first windows, whose rates reach back to the counters' start.
    let view = serve.json_after(6);
    std::thread::sleep(Duration::from_millis(500));
    for target in [None, Some(format!("/{}", a.name)), Some(format!("/{}", b.name))] {
        let cg = target.clone().unwrap_or_default();
        for (metric, truth) in metrics {
            let mine = json_value(&view, target.as_deref(), metric).unwrap();
            assert!((mine - truth).abs() < 1e-6, "{metric} {cg}: tmetric {mine}, truth {truth}");
            let scraped = prom.query(&format!("tmetric_{metric}_ratio{{cgroup=\"{cg}\"}}"));
            assert!((scraped[0].1 - mine).abs() < 1e-6, "{metric} {cg} scraped {}", scraped[0].1);
            let rule = prom.query(&format!("tmetric:{metric}_ratio:rate3s{{cgroup=\"{cg}\"}}"));
            assert_eq!(rule.len(), 1, "{metric} {cg}: {rule:?}");
            assert!(
                (rule[0].1 - mine).abs() < 1e-6,
                "{metric} {cg}: the rule gives {}, tmetric {mine}",
                rule[0].1
            );
        }
    }
}

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

/// The cgroup paths a pattern test makes: `/tmetric-test-serve-<pid>-<tag>-<i>`.
fn make(mount: &Path, tag: &str, n: usize) -> Vec<Cgroup> {
    (0..n).map(|i| Cgroup::new(mount, &format!("{tag}-{i}"))).collect()
}

#[test]
fn cgroups_come_and_go_during_scrapes_and_the_budget_is_said() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let check = prometheus_missing().is_none();
    let pattern = format!("/tmetric-test-churn-*-{}", std::process::id());
    let _first = make(&mount, "churn-a", 1);
    // Room for the host and two cgroups: -M Software is 6 counters on each CPU.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_target = 6 * cpus;
    let budget = (3 * per_target).to_string();
    let serve = Serve::start(&[
        "-M",
        "Software",
        "--cgroup",
        &pattern,
        "--interval",
        "300ms",
        "--reads",
        "2",
        "--max-descriptors",
        &budget,
    ]);
    let view = serve.json_after(1);
    assert_eq!(view["targets"].as_array().unwrap().len(), 2, "{view}");
    // Three more: one fits the budget, two are left out, and /metrics says why.
    let more = make(&mount, "churn-b", 3);
    let n = view["interval"]["number"].as_u64().unwrap();
    let view = serve.json_after(n + 2);
    assert_eq!(view["targets"].as_array().unwrap().len(), 3, "{view}");
    let left: Vec<&Value> = view["left_out"].as_array().unwrap().iter().collect();
    assert_eq!(left.len(), 2, "{view}");
    assert!(left[0]["reason"].as_str().unwrap().starts_with("descriptor budget"));
    assert!(view["descriptors"]["open"].as_u64().unwrap() <= 3 * per_target as u64);
    let (_, text) = serve.get("/metrics");
    assert!(text.contains("tmetric_cgroup_left_out_info{cgroup=\"/tmetric-test-churn-b-"));
    assert!(text.contains("tmetric_cgroups{state=\"left_out\"} 2"));
    // Remove the counted cgroups while scraping: every scrape stays valid, the removed
    // cgroups' series go, and the budget they freed takes the ones left out.
    let counted: Vec<String> = view["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["cgroup"].as_str().map(str::to_string))
        .collect();
    let scraper = {
        let addr = serve.addr.clone();
        std::thread::spawn(move || {
            let mut texts = Vec::new();
            for _ in 0..40 {
                texts.push(http_get(&addr, "/metrics", None));
                std::thread::sleep(Duration::from_millis(25));
            }
            texts
        })
    };
    drop(_first);
    let mut remaining: Vec<Cgroup> = Vec::new();
    for c in more {
        if counted.contains(&format!("/{}", c.name)) {
            drop(c);
        } else {
            remaining.push(c);
        }
    }
    for (status, text) in scraper.join().unwrap() {
        assert_eq!(status, 200);
        if check {
            promtool_metrics(&text).unwrap();
        }
    }
    let n = serve.json_after(0)["interval"]["number"].as_u64().unwrap();
    let view = serve.json_after(n + 2);
    let now: Vec<&str> =
        view["targets"].as_array().unwrap().iter().filter_map(|t| t["cgroup"].as_str()).collect();
    let want: Vec<String> = remaining.iter().map(|c| format!("/{}", c.name)).collect();
    assert_eq!(now, want, "{view}");
    assert_eq!(view["cgroups_removed"].as_u64(), Some(2), "{view}");
    assert!(view["left_out"].as_array().unwrap().is_empty(), "{view}");
    let (_, text) = serve.get("/metrics");
    for gone in &counted {
        assert!(!text.contains(&format!("cgroup=\"{gone}\"")), "{gone} still served");
    }
}

#[test]
fn short_of_descriptors_cgroups_are_left_out_and_said() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let cgroups = make(&mount, "fdlimit", 8);
    let pattern = format!("/tmetric-test-fdlimit-*-{}", std::process::id());
    // 64 descriptors in all: a quarter is kept for the server, the rest counts.
    let serve = Serve::start_with(Command::new("sh").args([
        "-c",
        &format!(
            "ulimit -n 64 && exec {} serve -M Software --cgroup '{pattern}' --interval 300ms --reads 2 \"$@\"",
            env!("CARGO_BIN_EXE_tmetric")
        ),
        "sh",
    ]));
    let view = serve.json_after(2);
    let open = view["descriptors"]["open"].as_u64().unwrap();
    assert_eq!(view["descriptors"]["budget"].as_u64(), Some(48), "{view}");
    assert!(open <= 48, "{view}");
    let left = view["left_out"].as_array().unwrap();
    assert!(!left.is_empty(), "{view}");
    assert!(left.iter().all(|l| l["reason"].as_str().unwrap().starts_with("descriptor budget")));
    // The server still answers, many times over, with valid text.
    for _ in 0..20 {
        let (status, text) = serve.get("/metrics");
        assert_eq!(status, 200);
        assert!(text.contains("tmetric_cgroups{state=\"left_out\"}"));
        if prometheus_missing().is_none() {
            promtool_metrics(&text).unwrap();
        }
    }
    assert_eq!(serve.get("/healthz").0, 200);
    // Idle connections take what the reserve left: tiny_http's accept thread dies on the
    // descriptor it cannot get, and the listener is started again at the next interval.
    let mut idle = Vec::new();
    for _ in 0..40 {
        match TcpStream::connect(&serve.addr) {
            Ok(c) => idle.push(c),
            Err(_) => break,
        }
    }
    std::thread::sleep(Duration::from_millis(700));
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        // Until the listener is back: a connection the dying listener had queued is reset.
        if let Ok((status, text)) = http_try_get(&serve.addr, "/metrics", None)
            && status == 200
            && !text.contains("tmetric_http_restarts_total 0")
        {
            break text;
        }
        assert!(Instant::now() < deadline, "the server did not come back: {}", serve.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(text.contains("tmetric_cgroups{state=\"left_out\"}"));
    drop(cgroups);
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
/// TMETRIC_BIN=target/release/tmetric cargo test --test tests cli_serve::load_full --
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

/// `serve --once`: one interval on standard output, no server. On the simulated Sapphire
/// Rapids, TopdownL1 is the default workload's truth (retiring 40 %, backend bound 30 %); on
/// this machine, the software metrics count for real.
#[test]
fn once_prints_one_interval_in_prometheus_text() {
    let out = tmetric(&[
        "serve",
        "--once",
        "--pmu-sim",
        "sapphirerapids",
        "-M",
        "TopdownL1",
        "--interval",
        "300ms",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let value = |name: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!((value("tmetric_tma_retiring_ratio") - 0.40).abs() < 1e-6, "{text}");
    assert!((value("tmetric_tma_backend_bound_ratio") - 0.30).abs() < 1e-6, "{text}");
    assert!(text.lines().any(|l| l == "tmetric_intervals_total 1"), "{text}");
    if Command::new("promtool").arg("--version").output().is_ok() {
        promtool_metrics(&text).expect("promtool accepts --once's text");
    }

    let start = Instant::now();
    let out = tmetric(&["serve", "--once", "-M", "Software", "--interval", "200ms"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(5), "one interval, then it ends");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("# TYPE tmetric_cpus_utilized"), "{text}");
    let refused = tmetric(&["serve", "--once", "--intervals", "2", "-M", "Software"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
}
