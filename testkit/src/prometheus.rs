//! A real Prometheus on loopback (built by [`crate::gobuild::prometheus`]) scraping, every
//! second, a `/metrics` endpoint the test serves and changes ([`Target`]); killed and
//! started again on the same port and storage ([`crate::served`]); its instant queries
//! read through its HTTP API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::http::header::CONTENT_TYPE;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use crate::served::Served;

/// A `/metrics` endpoint on 127.0.0.1 in the Prometheus text format, answering with
/// the text last [`Target::set`].
pub struct Target {
    address: SocketAddr,
    text: Arc<Mutex<String>>,
    server: tokio::task::JoinHandle<()>,
}

impl Target {
    pub async fn start(text: &str) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let text = Arc::new(Mutex::new(text.to_string()));
        let served = text.clone();
        let metrics = axum::routing::get(move || {
            let body = served.lock().unwrap().clone();
            async move {
                (
                    [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                    body,
                )
            }
        });
        let app = axum::Router::new().route("/metrics", metrics);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Target {
            address,
            text,
            server,
        })
    }

    /// What the next scrapes get.
    pub fn set(&self, text: &str) {
        *self.text.lock().unwrap() = text.to_string();
    }

    /// `127.0.0.1:PORT`, as a scrape target.
    pub fn address(&self) -> String {
        self.address.to_string()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.server.abort();
    }
}

pub struct Prometheus {
    served: Served,
    dir: PathBuf,
}

impl Prometheus {
    /// Builds (once per machine) and starts one scraping `targets` every second (job
    /// `gate`); returns when it is ready.
    pub async fn start(targets: &[&Target]) -> Result<Self> {
        Self::start_with_rules(targets, None).await
    }

    /// [`Prometheus::start`] evaluating `rules` (a rule file's YAML) every second too.
    pub async fn start_with_rules(targets: &[&Target], rules: Option<&str>) -> Result<Self> {
        let bin = crate::gobuild::prometheus()?;
        let dir = crate::process::scratch_path("prometheus", "")?;
        std::fs::create_dir_all(dir.join("data"))?;
        let targets: Vec<String> = targets
            .iter()
            .map(|t| format!("'{}'", t.address()))
            .collect();
        let rule_files = match rules {
            Some(rules) => {
                std::fs::write(dir.join("rules.yml"), rules)?;
                format!("rule_files: ['{}']\n", dir.join("rules.yml").display())
            }
            None => String::new(),
        };
        std::fs::write(
            dir.join("prometheus.yml"),
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{rule_files}\
                 scrape_configs:\n  - job_name: gate\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )?;
        let within = Duration::from_secs(60);
        let served = Served::start("prometheus", bin, &dir, None, within, |at| {
            vec![
                format!("--config.file={}", dir.join("prometheus.yml").display()),
                format!("--storage.tsdb.path={}", dir.join("data").display()),
                format!("--web.listen-address={at}"),
            ]
        })
        .await?;
        Ok(Prometheus { served, dir })
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> String {
        self.served.url()
    }

    pub fn log_tail(&self) -> String {
        self.served.log_tail()
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        self.served.kill();
    }

    /// Starts it again on the same port and storage.
    pub async fn restart(&mut self) -> Result<()> {
        self.served.restart().await
    }

    /// The series an instant query returns now (`data.result`).
    pub async fn query(&self, query: &str) -> Result<Vec<Value>> {
        let encoded = utf8_percent_encode(query, NON_ALPHANUMERIC);
        let path = format!("/api/v1/query?query={encoded}");
        let (code, text) = self.served.request("GET", &path, None).await?;
        if code != 200 {
            bail!("GET {path}: {code} {text}");
        }
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("GET {path}: {text}"))?;
        v["data"]["result"]
            .as_array()
            .cloned()
            .with_context(|| format!("GET {path}: no result: {text}"))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.served.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
