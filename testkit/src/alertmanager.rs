//! A real Alertmanager on loopback (built by [`crate::gobuild::alertmanager`]): a temp
//! config and storage, clustering off, killed and started again on the same port and
//! storage, and its API v2 read and written with a plain HTTP/1.1 client
//! ([`crate::http`]).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::process::{Owned, tail};
use anyhow::{Context, Result, bail};
use serde_json::Value;

/// One receiver that drops everything: the tests read alerts and silences through the
/// API, nothing is sent anywhere.
const CONFIG: &str = "route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n";

pub struct Alertmanager {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    process: Option<Owned>,
    /// With basic auth in front (`--web.config.file`): the `Authorization` header this
    /// client sends.
    authorization: Option<String>,
}

impl Alertmanager {
    /// Builds (once per machine) and starts one; returns when it is ready.
    pub async fn start() -> Result<Self> {
        Self::start_with(None).await
    }

    /// [`Alertmanager::start`] with basic auth in front of every endpoint, as its web
    /// config (exporter-toolkit's `basic_auth_users`, a bcrypt hash) sets it: a request
    /// without `user` and `password` is answered 401.
    pub async fn start_with_basic_auth(user: &str, password: &str) -> Result<Self> {
        Self::start_with(Some((user, password))).await
    }

    async fn start_with(basic_auth: Option<(&str, &str)>) -> Result<Self> {
        let bin = crate::gobuild::alertmanager()?;
        let dir = crate::process::scratch_path("alertmanager", "")?;
        std::fs::create_dir_all(dir.join("data"))?;
        std::fs::write(dir.join("alertmanager.yml"), CONFIG)?;
        let authorization = match basic_auth {
            Some((user, password)) => {
                // The lowest cost bcrypt allows: the hash is checked on every request.
                let hash = bcrypt::hash(password, 4).context("hashing the password")?;
                std::fs::write(
                    dir.join("web.yml"),
                    format!("basic_auth_users:\n  {user}: {hash:?}\n"),
                )?;
                use base64::Engine as _;
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                Some(format!("Basic {token}"))
            }
            None => None,
        };
        // A free port now; kept for restarts, so that kumaco's URL stays valid.
        let port = crate::http::free_port()?;
        let mut am = Alertmanager {
            bin,
            dir,
            port,
            process: None,
            authorization,
        };
        am.spawn().await?;
        Ok(am)
    }

    async fn spawn(&mut self) -> Result<()> {
        let mut command = Command::new(&self.bin);
        if self.authorization.is_some() {
            command.arg(format!(
                "--web.config.file={}",
                self.dir.join("web.yml").display()
            ));
        }
        command
            .arg(format!(
                "--config.file={}",
                self.dir.join("alertmanager.yml").display()
            ))
            .arg(format!(
                "--storage.path={}",
                self.dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            // Empty: no gossip, no cluster port to collide with another test's.
            .arg("--cluster.listen-address=")
            .stdin(Stdio::null());
        self.process = Some(Owned::spawn(
            "alertmanager",
            command,
            Some(&self.dir.join("log")),
        )?);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, _)) = self.request("GET", "/-/ready", None).await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "alertmanager not ready within 30s; log:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> String {
        format!("http://{}", self.address())
    }

    fn address(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.port).into()
    }

    pub fn log_tail(&self) -> String {
        tail(&self.dir.join("log"), 20)
    }

    /// SIGKILL: no snapshot of the silences is written (what a crash loses).
    pub async fn kill(&mut self) -> Result<()> {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
        Ok(())
    }

    /// Starts it again on the same port and storage.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill().await?;
        self.spawn().await
    }

    /// The status of `GET /api/v2/silences` without credentials: 401 with basic auth.
    pub async fn status_without_credentials(&self) -> Result<u16> {
        Ok(self
            .request_as(None, "GET", "/api/v2/silences", None)
            .await?
            .0)
    }

    /// `GET /api/v2/silences`.
    pub async fn silences(&self) -> Result<Vec<Value>> {
        self.get_json("/api/v2/silences").await
    }

    /// The silences of `created_by` that are not expired.
    pub async fn live_silences(&self, created_by: &str) -> Result<Vec<Value>> {
        Ok(self
            .silences()
            .await?
            .into_iter()
            .filter(|s| s["createdBy"] == created_by && s["status"]["state"] != "expired")
            .collect())
    }

    /// `POST /api/v2/alerts`: one firing alert with these labels (Alertmanager starts it
    /// now and resolves it after its resolve timeout, 5m).
    pub async fn post_alert(&self, labels: &[(&str, &str)]) -> Result<()> {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        let body = serde_json::json!([{ "labels": labels }]);
        let (code, text) = self
            .request("POST", "/api/v2/alerts", Some(body.to_string()))
            .await?;
        if code != 200 {
            bail!("POST /api/v2/alerts: {code} {text}");
        }
        Ok(())
    }

    /// `POST /api/v2/alerts`: the alert with these labels ends now (resolved, it is no
    /// longer listed).
    pub async fn resolve_alert(&self, labels: &[(&str, &str)]) -> Result<()> {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        let now = k8s_openapi::jiff::Timestamp::now();
        let body = serde_json::json!([{ "labels": labels, "endsAt": now.to_string() }]);
        let (code, text) = self
            .request("POST", "/api/v2/alerts", Some(body.to_string()))
            .await?;
        if code != 200 {
            bail!("POST /api/v2/alerts: {code} {text}");
        }
        Ok(())
    }

    /// `GET /api/v2/alerts` (silenced ones included).
    pub async fn alerts(&self) -> Result<Vec<Value>> {
        self.get_json("/api/v2/alerts?silenced=true&inhibited=true&active=true")
            .await
    }

    /// `POST /api/v2/silences` as someone else would: the id.
    pub async fn post_silence(&self, silence: &Value) -> Result<String> {
        let (code, text) = self
            .request("POST", "/api/v2/silences", Some(silence.to_string()))
            .await?;
        if code != 200 {
            bail!("POST /api/v2/silences: {code} {text}");
        }
        let v: Value = serde_json::from_str(&text)?;
        Ok(v["silenceID"].as_str().unwrap_or_default().to_string())
    }

    async fn get_json(&self, path: &str) -> Result<Vec<Value>> {
        let (code, text) = self.request("GET", path, None).await?;
        if code != 200 {
            bail!("GET {path}: {code} {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("GET {path}: {text}"))
    }

    /// HTTP/1.1 with `Connection: close` and this client's credentials, if any; the body
    /// de-chunked.
    async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String)> {
        self.request_as(self.authorization.as_deref(), method, path, body)
            .await
    }

    async fn request_as(
        &self,
        authorization: Option<&str>,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String)> {
        crate::http::request(self.address(), authorization, method, path, body).await
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        self.process = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
