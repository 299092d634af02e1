//! A real Prometheus on loopback (built by [`crate::gobuild::prometheus`]) scraping, every
//! second, a `/metrics` endpoint the test serves and changes ([`Target`]); killed and
//! started again on the same port and storage ([`crate::served`]); its instant queries
//! read through its HTTP API.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::served::Served;

/// A `/metrics` endpoint on 127.0.0.1 in the Prometheus text format, answering with
/// the text last [`Target::set`].
pub struct Target {
    port: u16,
    text: Arc<Mutex<String>>,
    server: tokio::task::JoinHandle<()>,
}

impl Target {
    pub async fn start(text: &str) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let text = Arc::new(Mutex::new(text.to_string()));
        let served = text.clone();
        let server = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let body = served.lock().unwrap().clone();
                tokio::spawn(async move {
                    // The request's head only: a scrape is a GET.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        Ok(Target { port, text, server })
    }

    /// What the next scrapes get.
    pub fn set(&self, text: &str) {
        *self.text.lock().unwrap() = text.to_string();
    }

    /// `127.0.0.1:PORT`, as a scrape target.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
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
        let encoded: String = query
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
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
