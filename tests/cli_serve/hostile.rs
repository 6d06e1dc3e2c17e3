//! `tmetric serve` against hostile and unlucky clients: huge and numerous headers, clients that
//! pipeline requests and never read, idle connections past every limit, descriptors run out,
//! malformed request lines; and a cgroup removed and made again under the same path. Each test
//! reproduced its finding before the server was rebuilt on hyper.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cli_cgroup::{Cgroup, mount};

use super::{Serve, http_get, http_try_get};

/// Resident memory of `pid`, kB.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// Sends `request` raw and returns the status line the server answered with (empty when it
/// closed without one).
fn raw(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).lines().next().unwrap_or("").to_string()
}

/// A scrape answered within `limit`: its status.
fn scrape_within(addr: &str, path: &str, limit: Duration) -> u16 {
    let t = Instant::now();
    let (status, _) = http_get(addr, path, None);
    assert!(t.elapsed() < limit, "{path} took {:?}", t.elapsed());
    status
}

#[test]
fn huge_and_numerous_headers_are_refused_and_memory_stays_flat() {
    let serve = Serve::start(&["-M", "Software", "--interval", "300ms", "--reads", "2"]);
    serve.json_after(1);
    let before = rss(serve.pid());
    // One 8 MB header line (the finding: 400 MB took the exporter to 688 MB and kept it).
    let mut s = TcpStream::connect(&serve.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ").unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0usize;
    while sent < 8 << 20 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 431"), "{:?}", &text[..text.len().min(200)]);
    // 100,000 header lines (the finding: 3 M took 343 MB).
    let mut many = b"GET /metrics HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..100_000 {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert!(raw(&serve.addr, &many).starts_with("HTTP/1.1 431"));
    assert_eq!(http_get(&serve.addr, "/healthz", None).0, 200);
    let after = rss(serve.pid());
    assert!(after < before + 8 * 1024, "memory grew from {before} to {after} kB");
}

#[test]
fn clients_that_pipeline_and_never_read_block_no_one() {
    let serve = Serve::start(&["-M", "Software", "--interval", "300ms", "--reads", "2"]);
    serve.json_after(1);
    // Forty clients each pipeline 2,000 scrapes and never read an answer (the finding: four
    // such clients blocked every worker thread).
    let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2000);
    let mut stalled = Vec::new();
    for _ in 0..40 {
        let mut s = TcpStream::connect(&serve.addr).unwrap();
        s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
        let _ = s.write_all(&request);
        stalled.push(s);
    }
    for _ in 0..10 {
        assert_eq!(scrape_within(&serve.addr, "/metrics", Duration::from_secs(2)), 200);
        assert_eq!(scrape_within(&serve.addr, "/healthz", Duration::from_secs(2)), 200);
    }
    drop(stalled);
}

#[test]
fn idle_connections_past_the_bound_cost_nothing_and_the_port_stays_ours() {
    let serve = Serve::start(&[
        "-M",
        "Software",
        "--interval",
        "300ms",
        "--reads",
        "2",
        "--web.max-connections",
        "16",
    ]);
    serve.json_after(1);
    let base = fds(serve.pid());
    // 300 idle connections (the finding: 3,000 cost 3,007 threads and 6,020 descriptors).
    let mut idle = Vec::new();
    for _ in 0..300 {
        if let Ok(c) = TcpStream::connect(&serve.addr) {
            idle.push(c);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // Every scrape is still answered: the longest idle connection makes room.
    for _ in 0..5 {
        assert_eq!(scrape_within(&serve.addr, "/metrics", Duration::from_secs(3)), 200);
        std::thread::sleep(Duration::from_millis(1100));
    }
    let open = fds(serve.pid());
    assert!(open <= base + 16 + 4, "{open} descriptors open (base {base})");
    let threads = std::fs::read_dir(format!("/proc/{}/task", serve.pid())).unwrap().count();
    assert!(threads <= 8, "{threads} threads");
    drop(idle);
}

/// A client that opens connections as fast as they connect and sends nothing kept every slot
/// younger than the idle bound, so scrapes arriving meanwhile were shed with 503 (`cargo
/// xtask bench --only hostile`: 10 of 73 answered during 3,000 such connections; 0 of 20
/// here). Now the oldest connection whose client sent nothing makes room for one that did,
/// and scrapes are answered all along (two may miss on a machine so loaded that the scraper
/// is descheduled between its connect and its request, which then looks like silence).
#[test]
fn a_flood_of_silent_connections_does_not_shed_scrapes() {
    // The default 64 slots.
    let serve = Serve::start(&["-M", "Software", "--interval", "300ms", "--reads", "2"]);
    serve.json_after(1);
    let addr = serve.addr.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&stop);
    let flood = std::thread::spawn(move || {
        let mut held = Vec::new();
        let started = Instant::now();
        while !flag.load(std::sync::atomic::Ordering::Relaxed)
            && held.len() < 3000
            && started.elapsed() < Duration::from_secs(30)
        {
            if let Ok(c) = TcpStream::connect(&addr) {
                held.push(c);
            }
        }
        held.len()
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut answers = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let status = http_try_get(&serve.addr, "/metrics", None).map_or(0, |(s, _)| s);
        answers.push((status, t.elapsed()));
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = flood.join().unwrap();
    let answered = answers.iter().filter(|(s, t)| *s == 200 && *t < Duration::from_secs(1)).count();
    assert!(opened > 100, "the flood opened only {opened} connections");
    assert!(answered >= 18, "{answered} of 20 scrapes answered during the flood: {answers:?}");
}

#[test]
fn out_of_descriptors_the_listener_lives_and_no_one_else_can_bind_the_port() {
    let serve = Serve::start_with(Command::new("sh").args([
        "-c",
        &format!(
            "ulimit -n 48 && exec {} serve -M Software --interval 300ms --reads 2 --web.max-connections 1000 \"$@\"",
            env!("CARGO_BIN_EXE_tmetric")
        ),
        "sh",
    ]));
    serve.json_after(1);
    // More connections than descriptors (the finding: the listener died, the port was free
    // and another user served forged metrics on it).
    let mut held = Vec::new();
    for _ in 0..120 {
        if let Ok(c) = TcpStream::connect(&serve.addr) {
            held.push(c);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(std::net::TcpListener::bind(&serve.addr).is_err(), "the port was free");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, text)) = http_try_get(&serve.addr, "/metrics", None) {
            assert!(
                text.contains("tmetric_http_connections_closed_total{reason=\"no_descriptor\"}")
            );
            break;
        }
        assert!(Instant::now() < deadline, "the server did not answer again: {}", serve.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn malformed_requests_get_a_status() {
    let serve = Serve::start(&["-M", "Software", "--interval", "300ms", "--reads", "2"]);
    serve.json_after(1);
    // HTTP/2.0 request lines, the HTTP/2 preface, non-ASCII header bytes and bare-LF line
    // ends (the finding: a hang or a dropped connection without a status).
    let h2 = raw(&serve.addr, b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n");
    assert!(h2.starts_with("HTTP/1.1 505") || h2.starts_with("HTTP/1.1 400"), "{h2}");
    let preface = raw(&serve.addr, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert!(
        preface.starts_with("HTTP/1.1 505") || preface.starts_with("HTTP/1.1 400"),
        "{preface}"
    );
    let name = raw(&serve.addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-\xff\xfe: y\r\n\r\n");
    assert!(name.starts_with("HTTP/1.1 400"), "{name}");
    let value = raw(
        &serve.addr,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: \xff\xfe\r\nConnection: close\r\n\r\n",
    );
    assert!(value.starts_with("HTTP/1.1 200"), "{value}");
    let lf = raw(&serve.addr, b"GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n");
    assert!(lf.starts_with("HTTP/1.1 200"), "{lf}");
    let post = raw(
        &serve.addr,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
}

#[test]
fn a_cgroup_made_again_under_its_path_is_counted_again() {
    // perf 6.12's tables: tmetric's `Software` metrics by their 6.12 names and inputs.
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let cg = Cgroup::new(&mount, "remade");
    let path = format!("/{}", cg.name);
    let serve = Serve::start(&[
        "--perf-version",
        "6.12",
        "-M",
        "Software",
        "--no-host",
        "--cgroup",
        &path,
        "--interval",
        "400ms",
        "--reads",
        "2",
    ]);
    serve.json_after(1);
    // What systemd does on a restart: the cgroup's tasks killed, the cgroup removed and made
    // again under the same path (the finding: counted as zero forever).
    drop(cg);
    let again = Cgroup::new(&mount, "remade");
    let n = serve.json_after(0)["interval"]["number"].as_u64().unwrap();
    serve.json_after(n + 2);
    let mut spin = again.spin(1500);
    let n = serve.json_after(0)["interval"]["number"].as_u64().unwrap();
    let view = serve.json_after(n + 2);
    let _ = spin.wait();
    let target = view["targets"].as_array().unwrap().iter().find(|t| t["cgroup"] == path.as_str());
    let target = target.unwrap_or_else(|| panic!("{path} not counted: {view}"));
    let utilized = target["units"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "cpus_utilized")
        .and_then(|m| m["value"].as_f64());
    // The spinning shell's share of a busy machine: well above nothing.
    assert!(utilized.is_some_and(|u| u > 0.1), "{target}");
    assert_eq!(view["cgroups_removed"].as_u64(), Some(1), "{view}");
    assert_eq!(view["cgroups_added"].as_u64(), Some(1), "{view}");
}

/// As a user the kernel refuses every cgroup event (EACCES at perf_event_paranoid 2), `/healthz`
/// answered ok and `serve --once` exited 0 with nothing counted; now `/healthz` is 503 with
/// the reason from the first moment, and `--once` exits 2 saying why.
#[test]
fn nothing_counted_is_unhealthy_and_once_fails() {
    let Some(mount) = mount() else {
        eprintln!("skipped: cgroups can only be made as root under a cgroup2 mount");
        return;
    };
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    if paranoid.trim().parse::<i32>().unwrap_or(2) < 1 {
        eprintln!("skipped: perf_event_paranoid lets every user count cgroups");
        return;
    }
    let cg = Cgroup::new(&mount, "refused");
    let path = format!("/{}", cg.name);
    let bin = env!("CARGO_BIN_EXE_tmetric");
    let nobody = ["--reuid", "nobody", "--regid", "nogroup", "--clear-groups", bin, "serve"];
    let args = ["-M", "Software", "--no-host", "--cgroup", &path, "--interval", "300ms"];
    let once = Command::new("setpriv").args(nobody).arg("--once").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&once.stderr);
    assert_eq!(once.status.code(), Some(2), "{text}");
    assert!(text.contains("nothing is counted") && text.contains("EACCES"), "{text}");
    assert!(once.stdout.is_empty());
    let serve = Serve::start_with(Command::new("setpriv").args(nobody).args(args));
    let (status, body) = serve.get("/healthz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("nothing is counted") && body.contains(&path), "{body}");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(serve.get("/healthz").0, 503);
}

/// Listening where other machines reach it without TLS and authentication is warned about,
/// naming what `/metrics` and `/json` show; on loopback it is not.
#[test]
fn a_reachable_address_without_tls_is_warned_about() {
    use std::io::BufRead;
    let bin = env!("CARGO_BIN_EXE_tmetric");
    let start = |addr: &str| -> String {
        let mut child = Command::new(bin)
            .args(["serve", "-M", "Software", "--listen", addr])
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut text = String::new();
        for line in std::io::BufReader::new(child.stderr.take().unwrap()).lines() {
            let line = line.unwrap();
            text.push_str(&line);
            text.push('\n');
            if line.contains("serving on") {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        text
    };
    let open = start("0.0.0.0:0");
    assert!(
        open.contains("which other machines can reach") && open.contains("--web.config.file"),
        "{open}"
    );
    assert!(open.contains("serving on"), "{open}");
    let local = start("127.0.0.1:0");
    assert!(!local.contains("other machines"), "{local}");
}
