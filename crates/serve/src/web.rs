//! `--web.config.file`: TLS and basic authentication in the format of Prometheus's exporter
//! toolkit (node_exporter and every exporter built on it read the same file):
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # relative paths are from the file's directory
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # or NoClientCert, VerifyClientCertIfGiven
//!   client_ca_file: ca.crt
//!   min_version: TLS12             # or TLS13
//!   max_version: TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! TLS is rustls (TLS 1.2 and 1.3 with its own cipher suites: `cipher_suites`,
//! `curve_preferences` and `prefer_server_cipher_suites` are accepted and said to be
//! ignored). A key the toolkit does not know is an error naming it, as the toolkit's strict
//! reading makes it. Passwords are checked with bcrypt on a blocking thread (a check costs tens
//! of milliseconds); a user and password that passed are remembered by their SHA-256, so a
//! scraper pays once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyper::header::HeaderValue;
use tokio_rustls::rustls;
use yaml_rust2::{Yaml, YamlLoader};

/// A web config file, read.
#[derive(Clone)]
pub struct WebConfig {
    /// TLS, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic authentication, when users are configured.
    pub auth: Option<Auth>,
    /// Keys accepted but ignored, with why.
    pub ignored: Vec<String>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("users", &self.auth.as_ref().map(|a| a.users.len()))
            .finish()
    }
}

/// Why a web config file is refused.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// A file could not be read.
    // The cause is in the message and not a `source`, so error chains do not say it twice.
    #[error("{}: {why}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        why: std::io::Error,
    },
    /// Not YAML.
    #[error("{path}: not YAML: {why}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message (line and column).
        why: String,
    },
    /// A value is wrong.
    #[error("{path}: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do.
        why: String,
    },
}

/// Basic authentication's users and their bcrypt hashes.
#[derive(Clone)]
pub struct Auth {
    users: Arc<HashMap<String, String>>,
    /// SHA-256 of `user:password` pairs that passed.
    passed: Arc<Mutex<Vec<[u8; 32]>>>,
}

/// How many passed pairs are remembered (a few scrapers, a few operators).
const REMEMBERED: usize = 64;

impl Auth {
    fn new(users: HashMap<String, String>) -> Auth {
        Auth { users: Arc::new(users), passed: Arc::new(Mutex::new(Vec::new())) }
    }

    /// Whether an `Authorization` header's credentials are a configured user's. bcrypt runs
    /// only for a pair not seen to pass before.
    pub fn allows(&self, header: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = header.and_then(basic_credentials) else { return false };
        let digest = sha256(&format!("{user}:{password}"));
        let passed = self.passed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if passed.contains(&digest) {
            return true;
        }
        drop(passed);
        // An unknown user costs the same check as a known one, so timing tells nothing.
        const DUMMY: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
        let (hash, known) = match self.users.get(&user) {
            Some(h) => (h.as_str(), true),
            None => (DUMMY, false),
        };
        let ok = bcrypt::verify(&password, hash).unwrap_or(false) && known;
        if ok {
            let mut passed = self.passed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if passed.len() >= REMEMBERED {
                passed.remove(0);
            }
            passed.push(digest);
        }
        ok
    }
}

fn sha256(text: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// `Basic <base64 user:password>`.
fn basic_credentials(value: &HeaderValue) -> Option<(String, String)> {
    use base64::Engine;
    let text = value.to_str().ok()?;
    let (scheme, rest) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

fn invalid(path: &Path, why: impl Into<String>) -> WebError {
    WebError::Invalid { path: path.to_path_buf(), why: why.into() }
}

fn string<'a>(path: &Path, key: &str, v: &'a Yaml) -> Result<&'a str, WebError> {
    v.as_str().ok_or_else(|| invalid(path, format!("`{key}` must be a string")))
}

fn read(path: &Path) -> Result<Vec<u8>, WebError> {
    // Certificates, keys and this file are small: a cap keeps a mistaken path (a device, a
    // log) from being read whole.
    use std::io::Read;
    const CAP: u64 = 1 << 20;
    let file =
        std::fs::File::open(path).map_err(|why| WebError::Read { path: path.into(), why })?;
    let meta = file.metadata().map_err(|why| WebError::Read { path: path.into(), why })?;
    if !meta.is_file() {
        return Err(invalid(path, "not a regular file"));
    }
    let mut data = Vec::new();
    file.take(CAP + 1)
        .read_to_end(&mut data)
        .map_err(|why| WebError::Read { path: path.into(), why })?;
    if data.len() as u64 > CAP {
        return Err(invalid(path, "larger than 1 MiB: not a certificate, key or web config"));
    }
    Ok(data)
}

/// Reads and checks the web config file at `path` (certificates and keys loaded now).
pub fn load(path: &Path) -> Result<WebConfig, WebError> {
    let text = String::from_utf8(read(path)?).map_err(|_| invalid(path, "not UTF-8 text"))?;
    let docs = YamlLoader::load_from_str(&text)
        .map_err(|e| WebError::Yaml { path: path.into(), why: e.to_string() })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut config = WebConfig { tls: None, auth: None, ignored: Vec::new() };
    let Some(doc) = docs.first() else { return Ok(config) };
    if doc.is_null() {
        return Ok(config);
    }
    let top = doc.as_hash().ok_or_else(|| invalid(path, "expected a mapping at the top"))?;
    for (k, v) in top {
        let key = k.as_str().unwrap_or("");
        match key {
            "tls_server_config" if !v.is_null() => {
                config.tls = Some(Arc::new(tls(path, dir, v, &mut config.ignored)?))
            }
            "basic_auth_users" if !v.is_null() => {
                let users = v.as_hash().ok_or_else(|| {
                    invalid(path, "`basic_auth_users` must map user names to bcrypt hashes")
                })?;
                let mut map = HashMap::new();
                for (u, h) in users {
                    let user = string(path, "basic_auth_users", u)?;
                    let hash = string(path, &format!("basic_auth_users.{user}"), h)?;
                    if bcrypt::verify("", hash).is_err() {
                        return Err(invalid(
                            path,
                            format!(
                                "basic_auth_users.{user}: not a bcrypt hash (make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)"
                            ),
                        ));
                    }
                    map.insert(user.to_string(), hash.to_string());
                }
                if !map.is_empty() {
                    config.auth = Some(Auth::new(map));
                }
            }
            "http_server_config" if !v.is_null() => {
                let h = v
                    .as_hash()
                    .ok_or_else(|| invalid(path, "`http_server_config` must be a mapping"))?;
                for (k, _) in h {
                    match k.as_str().unwrap_or("") {
                        "http2" => config
                            .ignored
                            .push("http_server_config.http2: tmetric serves HTTP/1.1 only".into()),
                        "headers" => config.ignored.push(
                            "http_server_config.headers: tmetric sets its own headers".into(),
                        ),
                        other => {
                            return Err(invalid(
                                path,
                                format!(
                                    "unknown key `http_server_config.{other}` (known: http2, headers)"
                                ),
                            ));
                        }
                    }
                }
            }
            "tls_server_config" | "basic_auth_users" | "http_server_config" => {}
            other => {
                return Err(invalid(
                    path,
                    format!(
                        "unknown key `{other}` (known: tls_server_config, http_server_config, basic_auth_users)"
                    ),
                ));
            }
        }
    }
    Ok(config)
}

fn tls(
    path: &Path,
    dir: &Path,
    v: &Yaml,
    ignored: &mut Vec<String>,
) -> Result<rustls::ServerConfig, WebError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let h = v.as_hash().ok_or_else(|| invalid(path, "`tls_server_config` must be a mapping"))?;
    let mut cert_file = None;
    let mut key_file = None;
    let mut client_auth = "NoClientCert".to_string();
    let mut client_ca = None;
    let mut min = "TLS12".to_string();
    let mut max = "TLS13".to_string();
    for (k, val) in h {
        let key = k.as_str().unwrap_or("");
        let s =
            |val: &Yaml| string(path, &format!("tls_server_config.{key}"), val).map(str::to_string);
        match key {
            "cert_file" => cert_file = Some(dir.join(s(val)?)),
            "key_file" => key_file = Some(dir.join(s(val)?)),
            "client_auth_type" => client_auth = s(val)?,
            "client_ca_file" => client_ca = Some(dir.join(s(val)?)),
            "min_version" => min = s(val)?,
            "max_version" => max = s(val)?,
            "cipher_suites" | "curve_preferences" | "prefer_server_cipher_suites" => {
                ignored.push(format!(
                    "tls_server_config.{key}: rustls chooses among its own safe suites and groups"
                ))
            }
            "cert" | "key" | "client_allowed_sans" => {
                return Err(invalid(
                    path,
                    format!(
                        "tls_server_config.{key} is not supported by tmetric: give cert_file and key_file"
                    ),
                ));
            }
            other => return Err(invalid(path, format!("unknown key `tls_server_config.{other}`"))),
        }
    }
    let cert_file = cert_file.ok_or_else(|| invalid(path, "tls_server_config needs cert_file"))?;
    let key_file = key_file.ok_or_else(|| invalid(path, "tls_server_config needs key_file"))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(&cert_file)?)
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(&cert_file, format!("not a PEM certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(&cert_file, "no certificate in it"));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(&key_file)?)
        .map_err(|e| invalid(&key_file, format!("no PEM private key: {e}")))?;
    let version = |v: &str| match v {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS10" | "TLS11" => Err(invalid(
            path,
            format!("{v} is not offered (rustls speaks TLS 1.2 and 1.3): give TLS12 or TLS13"),
        )),
        other => Err(invalid(path, format!("unknown TLS version `{other}`: give TLS12 or TLS13"))),
    };
    let (lo, hi) = (version(&min)?, version(&max)?);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [&rustls::version::TLS12, &rustls::version::TLS13]
            .into_iter()
            .filter(|v| {
                let rank = |x: &rustls::SupportedProtocolVersion| u16::from(x.version);
                rank(v) >= rank(lo) && rank(v) <= rank(hi)
            })
            .collect();
    if versions.is_empty() {
        return Err(invalid(path, format!("min_version {min} is above max_version {max}")));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| invalid(path, e.to_string()))?;
    let client_roots = || -> Result<Arc<rustls::RootCertStore>, WebError> {
        let ca = client_ca.clone().ok_or_else(|| {
            invalid(path, format!("client_auth_type {client_auth} needs client_ca_file"))
        })?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&read(&ca)?) {
            let c = c.map_err(|e| invalid(&ca, format!("not a PEM certificate: {e}")))?;
            roots.add(c).map_err(|e| invalid(&ca, e.to_string()))?;
        }
        Ok(Arc::new(roots))
    };
    let builder = match client_auth.as_str() {
        "NoClientCert" | "" => builder.with_no_client_auth(),
        "RequireAndVerifyClientCert" | "VerifyClientCertIfGiven" => {
            let mut v = rustls::server::WebPkiClientVerifier::builder_with_provider(
                client_roots()?,
                Arc::clone(&provider),
            );
            if client_auth == "VerifyClientCertIfGiven" {
                v = v.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(v.build().map_err(|e| invalid(path, e.to_string()))?)
        }
        other => {
            return Err(invalid(
                path,
                format!(
                    "client_auth_type {other} is not supported (it accepts certificates it does not verify): give NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
                ),
            ));
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        invalid(&key_file, format!("the key does not go with the certificate: {e}"))
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn unknown_keys_and_bad_hashes_are_refused_with_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a.yml", "basic_auth_user:\n  a: b\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("unknown key `basic_auth_user`"), "{e}");
        let p = write(dir.path(), "b.yml", "basic_auth_users:\n  prometheus: secret\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("basic_auth_users.prometheus: not a bcrypt hash"), "{e}");
        let p = write(dir.path(), "c.yml", "tls_server_config:\n  cert_file: x.crt\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("needs key_file"), "{e}");
        let p = write(dir.path(), "d.yml", "tls_server_config: [\n");
        assert!(matches!(load(&p), Err(WebError::Yaml { .. })));
        let p = write(dir.path(), "e.yml", "");
        assert!(load(&p).unwrap().tls.is_none());
    }

    #[test]
    fn basic_auth_checks_bcrypt_and_remembers_what_passed() {
        use base64::Engine;
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "w.yml", &format!("basic_auth_users:\n  prom: '{hash}'\n"));
        let auth = load(&p).unwrap().auth.unwrap();
        let header = |u: &str, pw: &str| {
            let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{pw}"));
            HeaderValue::from_str(&format!("Basic {b}")).unwrap()
        };
        assert!(auth.allows(Some(&header("prom", "s3cret"))));
        assert!(auth.allows(Some(&header("prom", "s3cret"))));
        assert_eq!(auth.passed.lock().unwrap().len(), 1);
        assert!(!auth.allows(Some(&header("prom", "wrong"))));
        assert!(!auth.allows(Some(&header("other", "s3cret"))));
        assert!(!auth.allows(None));
        assert!(!auth.allows(Some(&HeaderValue::from_static("Bearer x"))));
    }
}
