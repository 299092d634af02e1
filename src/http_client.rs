//! The HTTP client of the monitoring APIs kumaco talks to beside Kubernetes' (Alertmanager's
//! and Prometheus'): JSON over HTTP/1.1 or HTTPS, to a set of URLs (the peers of an HA
//! set: each request goes to the first that answers, starting with the one that answered
//! last).
//!
//! Authentication as people put it in front of those APIs: a bearer token or basic auth
//! read from files (read again for each request, so a rotated secret is used without a
//! restart), a CA, a client certificate. The secrets never reach a log line or an error:
//! errors name flags, files and URLs only. Each endpoint's flags share a prefix
//! (`--alertmanager-url`, `--alertmanager-ca-file`; `--prometheus-url`, ...), which the
//! errors name.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::de::DeserializeOwned;

use crate::gates::Failure;

/// Each request gets this long per URL before the next one is tried.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read: a list of silences or alerts, a few hundred bytes of JSON
/// each, so tens of thousands fit.
const MAX_BODY: usize = 32 << 20;

/// How to reach and authenticate to one API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub urls: Vec<String>,
    pub bearer_token_file: Option<PathBuf>,
    /// One line `user:password`.
    pub basic_auth_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl Endpoint {
    /// Checks what kumaco can check alone, at start-up: each URL's form, and that a
    /// client certificate comes with its key. The files are read when a request needs
    /// them: a Secret mounted late or rotated is a failure of the source then, not a
    /// reason to stop. `flags`: the prefix of the endpoint's flags, for errors.
    pub fn check(&self, flags: &str) -> Result<Vec<Uri>, HttpError> {
        let mut bases = Vec::new();
        for url in &self.urls {
            let bad = |message: String| HttpError::Url {
                flag: format!("--{flags}-url"),
                url: url.clone(),
                message,
            };
            let uri: Uri = url
                .trim_end_matches('/')
                .parse()
                .map_err(|e: http::uri::InvalidUri| bad(e.to_string()))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(bad(
                    "must be http://HOST[:PORT][/PATH] or https://...".into()
                ));
            }
            if uri.query().is_some() {
                return Err(bad("must not hold a query (?...)".into()));
            }
            bases.push(uri);
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            return Err(HttpError::Tls(format!(
                "--{flags}-cert-file and --{flags}-key-file go together"
            )));
        }
        Ok(bases)
    }

    /// The files the connections are built from, in a fixed order.
    fn tls_files(&self) -> [Option<&Path>; 3] {
        [
            self.ca_file.as_deref(),
            self.cert_file.as_deref(),
            self.key_file.as_deref(),
        ]
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{flag} {url:?}: {message}")]
    Url {
        flag: String,
        url: String,
        message: String,
    },
    #[error("{flag} {}: {message}", path.display())]
    File {
        flag: String,
        path: PathBuf,
        message: String,
    },
    #[error("TLS: {0}")]
    Tls(String),
    /// No answer. `tls`: the TLS handshake failed (a certificate the CA does not sign, a
    /// name it does not hold), which is a misconfiguration, not an outage.
    #[error("{url}: {message}")]
    Request {
        url: String,
        message: String,
        tls: bool,
    },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: undecodable answer: {message}")]
    Decode { url: String, message: String },
}

impl HttpError {
    /// Worth trying the next URL of the set: it did not answer, answered that it cannot
    /// serve now, or answered what does not decode.
    fn try_next(&self) -> bool {
        match self {
            HttpError::Request { .. } | HttpError::Decode { .. } => true,
            HttpError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// What the failure policy makes of it: only no answer is an outage; a refusal, a
    /// wrong path, a TLS failure, an answer that does not decode or a file that cannot
    /// be read say that kumaco is misconfigured.
    pub fn failure(&self) -> Failure {
        match self {
            HttpError::Request { tls: false, .. } => Failure::Unreachable,
            HttpError::Status { status, .. } => Failure::of_status(*status),
            HttpError::Url { .. }
            | HttpError::File { .. }
            | HttpError::Tls(_)
            | HttpError::Request { tls: true, .. }
            | HttpError::Decode { .. } => Failure::Invalid,
        }
    }
}

/// How an answer's body becomes what the caller wants: the reason it cannot, if not.
pub type Decode<T> = fn(&[u8]) -> Result<T, String>;

/// Decodes a JSON answer.
pub fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

/// Accepts any answer, reading nothing of it.
pub fn nothing(_: &[u8]) -> Result<(), String> {
    Ok(())
}

/// Connections over HTTP/1.1, plain or TLS.
pub type Https = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Connections to `endpoint` as its TLS files are now (the system's roots without a CA
/// file). `flags`: the prefix of the endpoint's flags, for errors.
pub fn connections(endpoint: &Endpoint, flags: &str) -> Result<Https, HttpError> {
    let tls = tls_config(endpoint, flags)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(TIMEOUT));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(HyperClient::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(connector))
}

/// The client of one endpoint. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    bases: Arc<Vec<Uri>>,
    endpoint: Arc<Endpoint>,
    /// The flags' prefix: `alertmanager` for `--alertmanager-url`.
    flags: &'static str,
    /// The connections, built from the TLS files on first use and again once one of
    /// them changes (a Secret mounted late, or rotated).
    connections: Arc<Mutex<Option<(Https, Stamps)>>>,
    /// The one that answered last: a hint, lost with no harm.
    preferred: Arc<AtomicUsize>,
}

/// What each TLS file was when the connections were built: its modification time and
/// length, `None` where it could not be read.
type Stamps = Vec<Option<(SystemTime, u64)>>;

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("urls", &self.endpoint.urls)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of `endpoint`, whose URLs are checked now ([`Endpoint::check`]); its
    /// files are read when a request needs them. `flags`: the prefix of the endpoint's
    /// flags, for errors.
    pub fn new(endpoint: Endpoint, flags: &'static str) -> Result<Self, HttpError> {
        let bases = endpoint.check(flags)?;
        Ok(Client {
            bases: Arc::new(bases),
            endpoint: Arc::new(endpoint),
            flags,
            connections: Arc::new(Mutex::new(None)),
            preferred: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The URLs, as given.
    pub fn urls(&self) -> &[String] {
        &self.endpoint.urls
    }

    /// How many URLs (peers of an HA set) there are.
    pub fn peers(&self) -> usize {
        self.bases.len()
    }

    /// One request (`path` may carry a query) to the first URL that answers with what
    /// `decode` accepts, from the preferred one on: the URL that answered (without the
    /// query, for messages), and its answer decoded. A peer that does not answer, or
    /// answers what does not decode, is skipped like one that is down.
    pub async fn send<T>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        decode: Decode<T>,
    ) -> Result<(String, T), HttpError> {
        let n = self.bases.len();
        let first = self.preferred.load(Ordering::Relaxed) % n.max(1);
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            match self
                .send_to(i, method.clone(), path, body.clone(), decode)
                .await
            {
                Ok(answer) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(answer);
                }
                Err(e) if e.try_next() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| HttpError::Url {
            flag: format!("--{}-url", self.flags),
            url: String::new(),
            message: "none given".into(),
        }))
    }

    /// One request to peer `peer` (an index in [`Client::urls`]) only.
    pub async fn send_to<T>(
        &self,
        peer: usize,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        decode: Decode<T>,
    ) -> Result<(String, T), HttpError> {
        let auth = auth_header(&self.endpoint, self.flags)?;
        let https = self.connections()?;
        let base = &self.bases[peer];
        let url = format!("{}{}", base.to_string().trim_end_matches('/'), path);
        let shown = url.split('?').next().unwrap_or(&url).to_string();
        let answer = self.once(&https, &url, method, body, auth).await?;
        let decoded = decode(&answer).map_err(|message| HttpError::Decode {
            url: shown.clone(),
            message,
        })?;
        Ok((shown, decoded))
    }

    /// The connections as the TLS files are now: built again when one changed.
    fn connections(&self) -> Result<Https, HttpError> {
        let stamps: Stamps = self
            .endpoint
            .tls_files()
            .iter()
            .map(|f| {
                let meta = std::fs::metadata((*f)?).ok()?;
                Some((meta.modified().ok()?, meta.len()))
            })
            .collect();
        let mut built = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((https, at)) = built.as_ref()
            && *at == stamps
        {
            return Ok(https.clone());
        }
        let https = connections(&self.endpoint, self.flags)?;
        *built = Some((https.clone(), stamps));
        Ok(https)
    }

    async fn once(
        &self,
        https: &Https,
        url: &str,
        method: Method,
        body: Option<Vec<u8>>,
        auth: Option<HeaderValue>,
    ) -> Result<Bytes, HttpError> {
        // Errors name the URL without its query, which may be long (a PromQL query).
        let shown = url.split('?').next().unwrap_or(url);
        let request_err = |message: String, tls: bool| HttpError::Request {
            url: shown.to_string(),
            message,
            tls,
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
            .map_err(|e| request_err(e.to_string(), false))?;
        let exchange = async {
            let resp = https
                .request(req)
                .await
                .map_err(|e| request_err(error_chain(&e), is_tls(&e)))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| request_err(e.to_string(), false))?
                .to_bytes();
            Ok::<_, HttpError>((status, body))
        };
        let (status, body) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| request_err(format!("no answer within {TIMEOUT:?}"), false))??;
        if status != StatusCode::OK {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)])
                .trim()
                .to_string();
            return Err(HttpError::Status {
                url: shown.to_string(),
                status: status.as_u16(),
                body: text,
            });
        }
        Ok(body)
    }
}

/// Whether an error, or one of its causes, is a TLS failure. rustls' errors reach hyper
/// inside an `io::Error`, whose `source` skips the error it wraps: each link is looked
/// into.
fn is_tls(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if err.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && is_tls(inner)
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// `s` percent-encoded as one value of a URL's query: every byte but the unreserved ones
/// (RFC 3986) escaped.
pub fn query_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The error and its causes on one line (hyper's top error says little: "client error
/// (Connect)").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

fn read_secret(flag: &str, path: &Path) -> Result<String, HttpError> {
    let text = std::fs::read_to_string(path).map_err(|e| HttpError::File {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// The `Authorization` header, marked sensitive (hyper and http never print it).
fn auth_header(endpoint: &Endpoint, flags: &str) -> Result<Option<HeaderValue>, HttpError> {
    use base64::Engine as _;
    let value = match (&endpoint.bearer_token_file, &endpoint.basic_auth_file) {
        (Some(path), _) => {
            let flag = format!("--{flags}-bearer-token-file");
            let token = read_secret(&flag, path)?;
            if token.is_empty() {
                return Err(HttpError::File {
                    flag,
                    path: path.clone(),
                    message: "is empty".into(),
                });
            }
            format!("Bearer {token}")
        }
        (None, Some(path)) => {
            let flag = format!("--{flags}-basic-auth-file");
            let pair = read_secret(&flag, path)?;
            if !pair.contains(':') {
                return Err(HttpError::File {
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
    let mut header = HeaderValue::from_str(&value).map_err(|_| HttpError::File {
        flag: format!("--{flags}-bearer-token-file/--{flags}-basic-auth-file"),
        path: PathBuf::new(),
        message: "the secret holds characters no HTTP header may carry".into(),
    })?;
    header.set_sensitive(true);
    Ok(Some(header))
}

fn tls_config(endpoint: &Endpoint, flags: &str) -> Result<rustls::ClientConfig, HttpError> {
    let file_err = |flag: String, path: &Path, e: &dyn std::fmt::Display| HttpError::File {
        flag,
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &endpoint.ca_file {
        let flag = || format!("--{flags}-ca-file");
        let certs = CertificateDer::pem_file_iter(ca)
            .map_err(|e| file_err(flag(), ca, &e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file_err(flag(), ca, &e))?;
        if certs.is_empty() {
            return Err(file_err(flag(), ca, &"holds no PEM certificate"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| file_err(flag(), ca, &e))?;
        }
    } else {
        // The system's roots, as for the API server: an endpoint behind a public CA
        // needs no flag.
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::Tls(e.to_string()))?
        .with_root_certificates(roots);
    match (&endpoint.cert_file, &endpoint.key_file) {
        (Some(cert), Some(key)) => {
            let flag = || format!("--{flags}-cert-file");
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| file_err(flag(), cert, &e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| file_err(flag(), cert, &e))?;
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| file_err(format!("--{flags}-key-file"), key, &e))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| HttpError::Tls(e.to_string()))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(HttpError::Tls(format!(
            "--{flags}-cert-file and --{flags}-key-file go together"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_checked_at_start_files_when_used_without_printing_secrets() {
        let e = Client::new(
            Endpoint {
                urls: vec!["ftp://am".into()],
                ..Endpoint::default()
            },
            "alertmanager",
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("--alertmanager-url \"ftp://am\""),
            "{e}"
        );
        let e = Client::new(
            Endpoint {
                urls: vec!["http://prometheus:9090/?x=1".into()],
                ..Endpoint::default()
            },
            "prometheus",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--prometheus-url \"http://prometheus:9090/?x=1\": must not hold a query (?...)"
        );
        let dir = std::env::temp_dir().join(format!("kumaco-http-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let basic = dir.join("basic");
        std::fs::write(&basic, "s3cr3t-no-colon\n").unwrap();
        let endpoint = Endpoint {
            urls: vec!["http://am:9093".into()],
            basic_auth_file: Some(basic.clone()),
            ..Endpoint::default()
        };
        // A Secret's file is read when a request needs it: a bad one fails the request,
        // never the start.
        assert!(Client::new(endpoint.clone(), "alertmanager").is_ok());
        let e = auth_header(&endpoint, "alertmanager").unwrap_err();
        assert_eq!(e.failure(), Failure::Invalid);
        let e = e.to_string();
        assert!(
            e.starts_with("--alertmanager-basic-auth-file ")
                && e.contains("user:password")
                && !e.contains("s3cr3t"),
            "{e}"
        );
        std::fs::write(&basic, "kumaco:s3cr3t\n").unwrap();
        let header = auth_header(&endpoint, "alertmanager").unwrap().unwrap();
        assert!(header.is_sensitive());
        assert_eq!(header, "Basic a3VtYWNvOnMzY3IzdA==");
        assert!(!format!("{header:?}").contains("a3VtYWNv"));
        // A CA mounted late: no connections until it is there, then built from it.
        let ca = dir.join("ca.pem");
        let client = Client::new(
            Endpoint {
                urls: vec!["https://prometheus:9090".into()],
                ca_file: Some(ca.clone()),
                ..Endpoint::default()
            },
            "prometheus",
        )
        .unwrap();
        let missing = client.connections().unwrap_err();
        assert_eq!(missing.failure(), Failure::Invalid);
        assert!(
            missing.to_string().starts_with("--prometheus-ca-file "),
            "{missing}"
        );
        std::fs::write(&ca, "not a certificate\n").unwrap();
        let empty = client.connections().unwrap_err().to_string();
        assert!(empty.contains("holds no PEM certificate"), "{empty}");
        let e = Endpoint {
            urls: vec!["https://am".into()],
            cert_file: Some(dir.join("c")),
            ..Endpoint::default()
        }
        .check("alertmanager")
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "TLS: --alertmanager-cert-file and --alertmanager-key-file go together"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn answers_are_failures_of_their_kind() {
        let status = |status| HttpError::Status {
            url: "u".into(),
            status,
            body: String::new(),
        };
        assert_eq!(status(401).failure(), Failure::Forbidden);
        assert_eq!(status(404).failure(), Failure::NotFound);
        assert_eq!(status(400).failure(), Failure::Invalid);
        assert_eq!(status(503).failure(), Failure::Unreachable);
        let request = |tls| HttpError::Request {
            url: "u".into(),
            message: "m".into(),
            tls,
        };
        assert_eq!(request(false).failure(), Failure::Unreachable);
        assert_eq!(request(true).failure(), Failure::Invalid);
        let decode = HttpError::Decode {
            url: "u".into(),
            message: "m".into(),
        };
        assert_eq!(decode.failure(), Failure::Invalid);
        assert!(decode.try_next(), "a peer answering garbage is skipped");
        let tls = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert!(is_tls(&tls));
        assert!(!is_tls(&std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        )));
    }

    #[test]
    fn query_values_are_escaped_whole() {
        assert_eq!(
            query_value(r#"up{job="a b"} == 0"#),
            "up%7Bjob%3D%22a%20b%22%7D%20%3D%3D%200"
        );
        assert_eq!(query_value("a-z_0.9~"), "a-z_0.9~");
        assert_eq!(query_value("é&"), "%C3%A9%26");
    }
}
