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
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

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

impl HttpError {
    /// Worth trying the next URL of the set: it did not answer, or answered that it
    /// cannot serve now.
    fn try_next(&self) -> bool {
        match self {
            HttpError::Request { .. } | HttpError::Decode { .. } => true,
            HttpError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// The client of one endpoint. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    bases: Arc<Vec<Uri>>,
    endpoint: Arc<Endpoint>,
    /// The flags' prefix: `alertmanager` for `--alertmanager-url`.
    flags: &'static str,
    client: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The one that answered last: a hint, lost with no harm.
    preferred: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("urls", &self.endpoint.urls)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Checks the URLs and files now, so that a mistake stops `kumaco run` at its start.
    /// `flags`: the prefix of the endpoint's flags, for errors.
    pub fn new(endpoint: Endpoint, flags: &'static str) -> Result<Self, HttpError> {
        let mut bases = Vec::new();
        for url in &endpoint.urls {
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
        let tls = tls_config(&endpoint, flags)?;
        // Read once here to fail early; read again before each request (rotation).
        auth_header(&endpoint, flags)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Ok(Client {
            bases: Arc::new(bases),
            endpoint: Arc::new(endpoint),
            flags,
            client,
            preferred: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The URLs, as given.
    pub fn urls(&self) -> &[String] {
        &self.endpoint.urls
    }

    /// One request (`path` may carry a query) to the first URL that answers, from the
    /// preferred one on: the URL that answered (without the query, for messages), and its
    /// answer (200 only).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(String, Bytes), HttpError> {
        let auth = auth_header(&self.endpoint, self.flags)?;
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
                    let shown = url.split('?').next().unwrap_or(&url).to_string();
                    return Ok((shown, answer));
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

    async fn once(
        &self,
        url: &str,
        method: Method,
        body: Option<Vec<u8>>,
        auth: Option<HeaderValue>,
    ) -> Result<Bytes, HttpError> {
        // Errors name the URL without its query, which may be long (a PromQL query).
        let shown = url.split('?').next().unwrap_or(url);
        let request_err = |message: String| HttpError::Request {
            url: shown.to_string(),
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
            Ok::<_, HttpError>((status, body))
        };
        let (status, body) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| request_err(format!("no answer within {TIMEOUT:?}")))??;
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
    fn urls_and_files_checked_at_start_without_printing_secrets() {
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
        let e = Client::new(
            Endpoint {
                urls: vec!["http://am:9093".into()],
                basic_auth_file: Some(basic.clone()),
                ..Endpoint::default()
            },
            "alertmanager",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--alertmanager-basic-auth-file ")
                && e.contains("user:password")
                && !e.contains("s3cr3t"),
            "{e}"
        );
        std::fs::write(&basic, "kumaco:s3cr3t\n").unwrap();
        let header = auth_header(
            &Endpoint {
                basic_auth_file: Some(basic),
                ..Endpoint::default()
            },
            "alertmanager",
        )
        .unwrap()
        .unwrap();
        assert!(header.is_sensitive());
        assert_eq!(header, "Basic a3VtYWNvOnMzY3IzdA==");
        assert!(!format!("{header:?}").contains("a3VtYWNv"));
        let missing = Client::new(
            Endpoint {
                urls: vec!["https://prometheus:9090".into()],
                ca_file: Some(dir.join("absent.pem")),
                ..Endpoint::default()
            },
            "prometheus",
        )
        .unwrap_err()
        .to_string();
        assert!(missing.starts_with("--prometheus-ca-file "), "{missing}");
        std::fs::remove_dir_all(dir).unwrap();
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
