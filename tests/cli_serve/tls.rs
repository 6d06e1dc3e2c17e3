//! `--web.config.file` end to end with the real `curl`: TLS with a self-signed certificate that
//! `openssl` makes, and basic authentication against a bcrypt hash made by another bcrypt
//! (libxcrypt's, as `htpasswd -B` writes it). Skipped, and said, where `openssl` or `curl` is
//! missing.

use std::path::Path;
use std::process::{Command, Output};

use super::Serve;

/// `scrape-s3cret` hashed with cost 10 in the `$2y$` form `htpasswd -nBC 10` writes.
const HASH: &str = "$2y$10$sEcNnDroDAq5f38Qsj.3yeYPb.sI6smObxBHn2o.sUtxZje9qHAJa";
const PASSWORD: &str = "scrape-s3cret";

/// Whether `program` runs (`program version`), else why the test is skipped.
fn have(program: &str, arg: &str) -> bool {
    let there = Command::new(program).arg(arg).output().is_ok_and(|o| o.status.success());
    if !there {
        eprintln!("skipped: `{program}` is not installed");
    }
    there
}

/// `curl` with `args` against `url`: its exit code, the status it got (0 when none) and the
/// body.
fn curl(dir: &Path, args: &[&str], url: &str) -> (i32, u16, String) {
    let out: Output = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-o", "body", "-w", "%{http_code}"])
        .args(args)
        .arg(url)
        .current_dir(dir)
        .output()
        .expect("curl runs");
    let status = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    let body = std::fs::read_to_string(dir.join("body")).unwrap_or_default();
    let _ = std::fs::remove_file(dir.join("body"));
    (out.status.code().unwrap_or(-1), status, body)
}

/// HTTPS with the right user and password gets 200 and the metrics; a wrong password, an
/// unknown user and no credentials get 401 with a `Basic` challenge; plain HTTP to the TLS
/// port and a client that does not trust the certificate get nothing; the refusals are
/// counted in `tmetric_http_unauthorized_requests`.
#[test]
fn tls_and_basic_auth_answer_curl_as_the_exporter_toolkit_does() {
    if !have("openssl", "version") || !have("curl", "--version") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-keyout", "server.key", "-out", "server.crt", "-days", "2"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "openssl: {}", String::from_utf8_lossy(&made.stderr));
    // Relative paths are from the config file's directory, not the working directory.
    let config = dir.path().join("web.yml");
    std::fs::write(
        &config,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  prometheus: '{HASH}'\n"
        ),
    )
    .unwrap();
    let serve = Serve::start(&[
        "-M",
        "Software",
        "--interval",
        "300ms",
        "--reads",
        "2",
        "--web.config.file",
        config.to_str().unwrap(),
    ]);
    assert!(serve.log().contains("serving on https://"), "{}", serve.log());
    let port = serve.addr.rsplit(':').next().unwrap().to_string();
    let url = |path: &str| format!("https://localhost:{port}{path}");
    let d = dir.path();
    let trust = ["--cacert", "server.crt"];
    let right = format!("prometheus:{PASSWORD}");

    let (code, status, body) = curl(d, &[&trust[..], &["-u", &right]].concat(), &url("/metrics"));
    assert_eq!((code, status), (0, 200), "{body}");
    assert!(body.contains("tmetric_http_unauthorized_requests_total 0\n"), "{body}");
    let (code, status, body) = curl(d, &[&trust[..], &["-u", &right]].concat(), &url("/healthz"));
    assert_eq!((code, status), (0, 200), "{body}");

    let refusals = [
        vec!["-u", "prometheus:wrong"],
        vec!["-u", "someone:scrape-s3cret"],
        vec!["-u", "prometheus:"],
        vec![],
    ];
    for creds in &refusals {
        let (code, status, body) =
            curl(d, &[&trust[..], &creds[..], &["-D", "head"]].concat(), &url("/metrics"));
        assert_eq!((code, status), (0, 401), "{creds:?}: {body}");
        assert_eq!(body, "unauthorized\n", "{creds:?}");
        let head = std::fs::read_to_string(d.join("head")).unwrap().to_ascii_lowercase();
        assert!(head.contains("www-authenticate: basic realm=\"tmetric\""), "{creds:?}: {head}");
        assert!(!body.contains("tmetric_"), "{creds:?}");
    }

    // Plain HTTP to the TLS port: no status and no metrics.
    let (code, status, body) =
        curl(d, &["-u", &right], &format!("http://127.0.0.1:{port}/metrics"));
    assert_ne!(code, 0, "plain HTTP answered {status}: {body}");
    assert_eq!(status, 0, "{body}");
    assert!(!body.contains("tmetric_"), "{body}");
    // A client that does not trust the certificate (curl's 60: the peer's certificate cannot
    // be verified) sends nothing.
    let (code, status, _) = curl(d, &["-u", &right], &url("/metrics"));
    assert_eq!((code, status), (60, 0));

    // The refusals were counted, and the server still answers.
    let (code, status, body) = curl(d, &[&trust[..], &["-u", &right]].concat(), &url("/metrics"));
    assert_eq!((code, status), (0, 200), "{body}");
    let refused =
        body.lines().find_map(|l| l.strip_prefix("tmetric_http_unauthorized_requests_total "));
    assert_eq!(refused, Some(refusals.len().to_string().as_str()), "{body}");
}
