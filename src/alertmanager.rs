//! A small client of Alertmanager's API v2: the silences (list, create or extend, expire)
//! of an HA set of Alertmanagers (`--alertmanager-url`, repeatable). Silences gossip
//! between peers, so each request goes to the first that answers, starting with the one
//! that answered last.
//!
//! Authentication as people put it in front of Alertmanager: a bearer token or basic
//! auth read from files (read again for each round of requests, so a rotated secret is
//! used without a restart), a CA, a client certificate. The secrets never reach a log
//! line or an error: errors name files and URLs only.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jiff::Timestamp;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

use crate::silence::{Action, Matcher, Silence, State};

/// Each request gets this long per Alertmanager before the next one is tried.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read: a list of silences (an Alertmanager holding 10,000 silences
/// answers about 5 MiB).
const MAX_BODY: usize = 32 << 20;

/// How to reach and authenticate to the Alertmanagers.
#[derive(Clone, Debug, Default)]
pub struct Endpoint {
    pub urls: Vec<String>,
    pub bearer_token_file: Option<PathBuf>,
    /// One line `user:password`.
    pub basic_auth_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum AlertmanagerError {
    #[error("--alertmanager-url {0:?}: {1}")]
    Url(String, String),
    #[error("{flag} {}: {message}", path.display())]
    File {
        flag: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("TLS: {0}")]
    Tls(String),
    #[error("{url}: {message}")]
    Request { url: String, message: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: undecodable answer: {message}")]
    Decode { url: String, message: String },
}

impl AlertmanagerError {
    /// Worth trying the next Alertmanager of the set: it did not answer, or answered
    /// that it cannot serve now.
    fn try_next(&self) -> bool {
        match self {
            AlertmanagerError::Request { .. } | AlertmanagerError::Decode { .. } => true,
            AlertmanagerError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// The client. Cheap to clone.
#[derive(Clone)]
pub struct Alertmanager {
    bases: Arc<Vec<Uri>>,
    endpoint: Arc<Endpoint>,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The one that answered last: a hint, lost with no harm.
    preferred: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Alertmanager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alertmanager")
            .field("urls", &self.endpoint.urls)
            .finish_non_exhaustive()
    }
}

impl Alertmanager {
    /// Checks the URLs and files now, so that a mistake stops `kumaco run` at its start.
    pub fn new(endpoint: Endpoint) -> Result<Self, AlertmanagerError> {
        let mut bases = Vec::new();
        for url in &endpoint.urls {
            let uri: Uri =
                url.trim_end_matches('/')
                    .parse()
                    .map_err(|e: http::uri::InvalidUri| {
                        AlertmanagerError::Url(url.clone(), e.to_string())
                    })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(AlertmanagerError::Url(
                    url.clone(),
                    "must be http://HOST[:PORT][/PATH] or https://...".into(),
                ));
            }
            bases.push(uri);
        }
        let tls = tls_config(&endpoint)?;
        // Read once here to fail early; read again before each round (rotation).
        auth_header(&endpoint)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Ok(Alertmanager {
            bases: Arc::new(bases),
            endpoint: Arc::new(endpoint),
            client,
            preferred: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Every silence (Alertmanager's `filter` matches the silences' matchers, not their
    /// `createdBy`, so the list is filtered by the caller).
    pub async fn silences(&self) -> Result<Vec<Silence>, AlertmanagerError> {
        let (url, body) = self.send(Method::GET, "/api/v2/silences", None).await?;
        let wire: Vec<WireSilence> =
            serde_json::from_slice(&body).map_err(|e| AlertmanagerError::Decode {
                url: url.clone(),
                message: e.to_string(),
            })?;
        Ok(wire
            .into_iter()
            .filter_map(WireSilence::into_silence)
            .collect())
    }

    /// Does one action; `created_by` for creations and extensions. Returns the id of
    /// the silence created or extended (Alertmanager may replace one it cannot extend
    /// in place).
    pub async fn act(
        &self,
        action: &Action,
        created_by: &str,
        now: Timestamp,
    ) -> Result<Option<String>, AlertmanagerError> {
        let post = |id: Option<&str>, matchers: &[Matcher], starts: Timestamp, ends, comment| {
            serde_json::to_vec(&PostSilence {
                id,
                matchers: matchers.iter().map(WireMatcher::from).collect(),
                starts_at: starts,
                ends_at: ends,
                created_by,
                comment,
            })
            .expect("a silence serialises")
        };
        let body = match action {
            Action::Create {
                matchers,
                ends_at,
                comment,
                ..
            } => post(None, matchers, now, *ends_at, comment),
            Action::Extend {
                id,
                matchers,
                starts_at,
                ends_at,
                comment,
                ..
            } => post(Some(id), matchers, *starts_at, *ends_at, comment),
            Action::Expire { id, .. } => {
                let path = format!("/api/v2/silence/{}", path_segment(id));
                return match self.send(Method::DELETE, &path, None).await {
                    Ok(_) => Ok(None),
                    // Gone already (expired and then garbage-collected): what was wanted.
                    Err(AlertmanagerError::Status { status: 404, .. }) => Ok(None),
                    Err(e) => Err(e),
                };
            }
        };
        let (url, answer) = self
            .send(Method::POST, "/api/v2/silences", Some(body))
            .await?;
        #[derive(Deserialize)]
        struct Posted {
            #[serde(rename = "silenceID")]
            silence_id: String,
        }
        let posted: Posted =
            serde_json::from_slice(&answer).map_err(|e| AlertmanagerError::Decode {
                url,
                message: e.to_string(),
            })?;
        Ok(Some(posted.silence_id))
    }

    /// One request to the first Alertmanager that answers, from the preferred one on.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(String, Bytes), AlertmanagerError> {
        let auth = auth_header(&self.endpoint)?;
        let n = self.bases.len();
        let first = self.preferred.load(Ordering::Relaxed) % n.max(1);
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            let base = &self.bases[i];
            let url = format!("{}{}", base.to_string().trim_end_matches('/'), path);
            match self
                .once(&url, method.clone(), body.clone(), auth.clone())
                .await
            {
                Ok(answer) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok((url, answer));
                }
                Err(e) if e.try_next() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| AlertmanagerError::Url(String::new(), "none given".into())))
    }

    async fn once(
        &self,
        url: &str,
        method: Method,
        body: Option<Vec<u8>>,
        auth: Option<HeaderValue>,
    ) -> Result<Bytes, AlertmanagerError> {
        let request_err = |message: String| AlertmanagerError::Request {
            url: url.to_string(),
            message,
        };
        let mut req = Request::builder()
            .method(method)
            .uri(url)
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(auth) = auth {
            req = req.header(header::AUTHORIZATION, auth);
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| request_err(e.to_string()))?;
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| request_err(error_chain(&e)))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| request_err(e.to_string()))?
                .to_bytes();
            Ok::<_, AlertmanagerError>((status, body))
        };
        let (status, body) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| request_err(format!("no answer within {TIMEOUT:?}")))??;
        if status != StatusCode::OK {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)])
                .trim()
                .to_string();
            return Err(AlertmanagerError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                body: text,
            });
        }
        Ok(body)
    }
}

/// The error and its causes on one line (hyper's top error says little: "client error
/// (Connect)").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// A silence id is a UUID; anything else is percent-encoded rather than trusted into a
/// path.
fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn read_secret(flag: &'static str, path: &Path) -> Result<String, AlertmanagerError> {
    let text = std::fs::read_to_string(path).map_err(|e| AlertmanagerError::File {
        flag,
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// The `Authorization` header, marked sensitive (hyper and http never print it).
fn auth_header(endpoint: &Endpoint) -> Result<Option<HeaderValue>, AlertmanagerError> {
    use base64::Engine as _;
    let value = match (&endpoint.bearer_token_file, &endpoint.basic_auth_file) {
        (Some(path), _) => {
            let flag = "--alertmanager-bearer-token-file";
            let token = read_secret(flag, path)?;
            if token.is_empty() {
                return Err(AlertmanagerError::File {
                    flag,
                    path: path.clone(),
                    message: "is empty".into(),
                });
            }
            format!("Bearer {token}")
        }
        (None, Some(path)) => {
            let flag = "--alertmanager-basic-auth-file";
            let pair = read_secret(flag, path)?;
            if !pair.contains(':') {
                return Err(AlertmanagerError::File {
                    flag,
                    path: path.clone(),
                    message: "must hold one line user:password".into(),
                });
            }
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            format!("Basic {encoded}")
        }
        (None, None) => return Ok(None),
    };
    let mut header = HeaderValue::from_str(&value).map_err(|_| AlertmanagerError::File {
        flag: "--alertmanager-bearer-token-file/--alertmanager-basic-auth-file",
        path: PathBuf::new(),
        message: "the secret holds characters no HTTP header may carry".into(),
    })?;
    header.set_sensitive(true);
    Ok(Some(header))
}

fn tls_config(endpoint: &Endpoint) -> Result<rustls::ClientConfig, AlertmanagerError> {
    let file_err =
        |flag: &'static str, path: &Path, e: &dyn std::fmt::Display| AlertmanagerError::File {
            flag,
            path: path.to_path_buf(),
            message: e.to_string(),
        };
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &endpoint.ca_file {
        let flag = "--alertmanager-ca-file";
        let certs = CertificateDer::pem_file_iter(ca)
            .map_err(|e| file_err(flag, ca, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_err(flag, ca, &e))?;
        if certs.is_empty() {
            return Err(file_err(flag, ca, &"holds no PEM certificate"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| file_err(flag, ca, &e))?;
        }
    } else {
        // The system's roots, as for the API server: an Alertmanager behind a public CA
        // needs no flag.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| AlertmanagerError::Tls(e.to_string()))?
        .with_root_certificates(roots);
    match (&endpoint.cert_file, &endpoint.key_file) {
        (Some(cert), Some(key)) => {
            let flag = "--alertmanager-cert-file";
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| file_err(flag, cert, &e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| file_err(flag, cert, &e))?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| file_err("--alertmanager-key-file", key, &e))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| AlertmanagerError::Tls(e.to_string()))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(AlertmanagerError::Tls(
            "--alertmanager-cert-file and --alertmanager-key-file go together".into(),
        )),
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMatcher {
    name: String,
    value: String,
    is_regex: bool,
    #[serde(default = "yes")]
    is_equal: bool,
}

fn yes() -> bool {
    true
}

impl From<&Matcher> for WireMatcher {
    fn from(m: &Matcher) -> Self {
        WireMatcher {
            name: m.name.clone(),
            value: m.value.clone(),
            is_regex: m.is_regex,
            is_equal: m.is_equal,
        }
    }
}

#[derive(Deserialize)]
struct WireStatus {
    state: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSilence {
    id: String,
    status: WireStatus,
    matchers: Vec<WireMatcher>,
    starts_at: Timestamp,
    ends_at: Timestamp,
    #[serde(default)]
    created_by: String,
}

impl WireSilence {
    fn into_silence(self) -> Option<Silence> {
        let state = match self.status.state.as_str() {
            "active" => State::Active,
            "pending" => State::Pending,
            "expired" => State::Expired,
            _ => return None,
        };
        Some(Silence {
            id: self.id,
            matchers: self
                .matchers
                .into_iter()
                .map(|m| Matcher {
                    name: m.name,
                    value: m.value,
                    is_regex: m.is_regex,
                    is_equal: m.is_equal,
                })
                .collect(),
            created_by: self.created_by,
            starts_at: self.starts_at,
            ends_at: self.ends_at,
            state,
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PostSilence<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    matchers: Vec<WireMatcher>,
    starts_at: Timestamp,
    ends_at: Timestamp,
    created_by: &'a str,
    comment: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_files_checked_at_start_without_printing_secrets() {
        let e = Alertmanager::new(Endpoint {
            urls: vec!["ftp://am".into()],
            ..Endpoint::default()
        })
        .unwrap_err();
        assert!(
            e.to_string().starts_with("--alertmanager-url \"ftp://am\""),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("kumaco-am-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let basic = dir.join("basic");
        std::fs::write(&basic, "s3cr3t-no-colon\n").unwrap();
        let e = Alertmanager::new(Endpoint {
            urls: vec!["http://am:9093".into()],
            basic_auth_file: Some(basic.clone()),
            ..Endpoint::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("user:password") && !e.contains("s3cr3t"), "{e}");
        std::fs::write(&basic, "kumaco:s3cr3t\n").unwrap();
        let header = auth_header(&Endpoint {
            basic_auth_file: Some(basic),
            ..Endpoint::default()
        })
        .unwrap()
        .unwrap();
        assert!(header.is_sensitive());
        assert_eq!(header, "Basic a3VtYWNvOnMzY3IzdA==");
        assert!(!format!("{header:?}").contains("a3VtYWNv"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn silences_decode_as_alertmanager_lists_them() {
        let json = r#"[{"id":"3b1d","status":{"state":"active"},"updatedAt":"2026-01-01T00:00:00.000Z",
            "comment":"c","createdBy":"kumaco/a/b","startsAt":"2026-01-01T00:00:00.000Z",
            "endsAt":"2026-01-01T00:30:00.000Z",
            "matchers":[{"name":"node","value":"n1","isRegex":false,"isEqual":true}]}]"#;
        let wire: Vec<WireSilence> = serde_json::from_str(json).unwrap();
        let s = wire.into_iter().next().unwrap().into_silence().unwrap();
        assert_eq!(s.state, State::Active);
        assert_eq!(s.created_by, "kumaco/a/b");
        assert_eq!(s.matchers[0].to_string(), r#"node="n1""#);
        assert_eq!(path_segment("3b1d-x/.."), "3b1d-x%2F%2E%2E");
    }
}
