//! Cgroups that come and go during scrapes, and the descriptor budget and a low open-file limit
//! leaving cgroups out and saying so.

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli_cgroup::{Cgroup, mount};

use super::{Serve, http_get, http_try_get, make, prometheus_missing, promtool_metrics};

#[test]
fn cgroups_come_and_go_during_scrapes_and_the_budget_is_said() {
    // perf 6.12's tables: tmetric's `Software` metrics by their 6.12 names and inputs.
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
        "--perf-version",
        "6.12",
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
    // 64 descriptors in all: half is kept for the server, the rest counts.
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
    assert_eq!(view["descriptors"]["budget"].as_u64(), Some(32), "{view}");
    assert!(open <= 32, "{view}");
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
    // Idle connections take what the reserve left: the listener lives on (a reserve
    // descriptor is let go to take and close what waits), and answers once they leave.
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
        if let Ok((status, text)) = http_try_get(&serve.addr, "/metrics", None)
            && status == 200
        {
            break text;
        }
        assert!(Instant::now() < deadline, "the server did not come back: {}", serve.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(text.contains("tmetric_cgroups{state=\"left_out\"}"));
    drop(cgroups);
}
