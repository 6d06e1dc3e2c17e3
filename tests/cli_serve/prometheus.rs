//! A real Prometheus scraping `tmetric serve` (software metrics per cgroup for real, TopdownL1/L2
//! simulated) answers with tmetric's values, recording rules evaluate to them, and `serve --once`'s
//! text passes promtool.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::cli_cgroup::{Cgroup, mount};
use crate::support::{stderr, tmetric};

use super::{
    KillOnDrop, Prometheus, Serve, http_get, json_value, prometheus_missing, promtool_metrics,
};

#[test]
fn prometheus_scrapes_software_metrics_per_cgroup_with_tmetrics_values() {
    // perf 6.12's tables: tmetric's `Software` metrics by their 6.12 names and inputs.
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
        "--perf-version",
        "6.12",
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
    // perf 6.12's tables: the simulator's Sapphire Rapids rules as 6.12's formulas give them.
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
        "--perf-version",
        "6.12",
        "rules",
        "-M",
        "TopdownL1,TopdownL2",
        "--model",
        "sapphirerapids",
        "--window",
        "3s",
        "--events",
        "-o",
        rules.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let check = Command::new("promtool").args(["check", "rules"]).arg(&rules).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    assert!(String::from_utf8_lossy(&check.stdout).contains("SUCCESS: 13 rules found"));
    let serve = Serve::start(&[
        "--perf-version",
        "6.12",
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
    // A run's counts are gauges: no counter a later run would seem to reset.
    assert!(!text.contains("_total"), "{text}");
    assert!(text.contains("# TYPE tmetric_event_raw gauge"), "{text}");
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
    assert_eq!(refused.status.code(), Some(129), "{}", stderr(&refused));
}

/// One kept-alive connection, as Prometheus scrapes: `/metrics` asked with `Accept` and,
/// with `gzip`, `Accept-Encoding: gzip`; the body decoded.
fn scrape(conn: &mut std::io::BufReader<std::net::TcpStream>, accept: &str, gzip: bool) -> String {
    use std::io::{BufRead, Read, Write};
    let coding = if gzip { "Accept-Encoding: gzip\r\n" } else { "" };
    write!(conn.get_mut(), "GET /metrics HTTP/1.1\r\nHost: t\r\nAccept: {accept}\r\n{coding}\r\n")
        .unwrap();
    let (mut length, mut zipped) = (None, false);
    loop {
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        let line = line.trim_end().to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        zipped |= line == "content-encoding: gzip";
    }
    let mut body = vec![0; length.expect("a content-length")];
    conn.read_exact(&mut body).unwrap();
    assert_eq!(zipped, gzip, "gzip asked: {gzip}");
    if !gzip {
        return String::from_utf8(body).unwrap();
    }
    // One gzip member, its CRC-32 and length checked, and nothing after it.
    let mut decoder = flate2::read::GzDecoder::new(&body[..]);
    let mut text = String::new();
    decoder.read_to_string(&mut text).unwrap();
    let mut rest = Vec::new();
    decoder.into_inner().read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{} bytes after the gzip member", rest.len());
    text
}

/// A scrape that accepts gzip, as Prometheus's does, gets one gzip member (its CRC-32 and
/// length checked) that decodes to the page a scrape without gzip gets from the same read
/// (asked within the 100 ms a read is shared), in both formats; scrapes of one interval share
/// its part. No other test asked for gzip over HTTP.
#[test]
fn gzip_scrapes_of_one_interval_decode_to_the_plain_page() {
    let serve = Serve::start(&["-M", "Software", "--interval", "30s"]);
    let conn = std::net::TcpStream::connect(&serve.addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut conn = std::io::BufReader::new(conn);
    let om = "application/openmetrics-text;version=1.0.0";
    for accept in [om, "text/plain;version=0.0.4"] {
        let first = scrape(&mut conn, accept, true);
        // Each pair is another read (150 ms on); a loaded machine may take the plain scrape
        // past the shared read's 100 ms, so one pair of five must be equal, which a gzip
        // member that decoded wrong never is.
        let (mut second, mut plain) = (String::new(), String::new());
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(150));
            second = scrape(&mut conn, accept, true);
            plain = scrape(&mut conn, accept, false);
            if second == plain {
                break;
            }
        }
        assert_eq!(second, plain);
        // A scrape of the same interval before it, with an older read, has the same interval
        // part (the read's begins with the raw counts: `tmetric_event`, `_total` in 0.0.4).
        let at = |page: &str| page.find("# HELP tmetric_event").unwrap();
        assert_eq!(first[..at(&first)], plain[..at(&plain)]);
        assert!(plain.contains("# HELP tmetric_intervals"), "{plain}");
        assert_eq!(plain.ends_with("# EOF\n"), accept == om, "{plain}");
    }
}
