//! A real Alertmanager on loopback (built by [`crate::gobuild::alertmanager`]): a temp
//! config and storage, clustering off, killed and started again on the same port and
//! storage ([`crate::served`]), and its API v2 read and written.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::served::Served;

/// One receiver that drops everything: the tests read alerts and silences through the
/// API, nothing is sent anywhere.
const CONFIG: &str = "route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n";

pub struct Alertmanager {
    served: Served,
    dir: PathBuf,
}

impl Alertmanager {
    /// Builds (once per machine) and starts one; returns when it is ready.
    pub async fn start() -> Result<Self> {
        Self::start_with(None).await
    }

    /// [`Alertmanager::start`] with `inhibit_rules` (YAML, the list under that key) in its
    /// configuration besides the one receiver.
    pub async fn start_with_inhibit_rules(inhibit_rules: &str) -> Result<Self> {
        let am = Self::start_with(None).await?;
        let config = format!("{CONFIG}inhibit_rules:\n{inhibit_rules}");
        std::fs::write(am.dir.join("alertmanager.yml"), config)?;
        let (code, text) = am.served.request("POST", "/-/reload", None).await?;
        if code != 200 {
            bail!("reloading the configuration: {code} {text}");
        }
        Ok(am)
    }

    /// [`Alertmanager::start`] with `config` (YAML, the whole configuration) instead of
    /// the one receiver that drops everything.
    pub async fn start_with_config(config: &str) -> Result<Self> {
        let am = Self::start_with(None).await?;
        std::fs::write(am.dir.join("alertmanager.yml"), config)?;
        let (code, text) = am.served.request("POST", "/-/reload", None).await?;
        if code != 200 {
            bail!("reloading the configuration: {code} {text}");
        }
        Ok(am)
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
        let mut flags = Vec::new();
        let authorization = match basic_auth {
            Some((user, password)) => {
                // The lowest cost bcrypt allows: the hash is checked on every request.
                let hash = bcrypt::hash(password, 4).context("hashing the password")?;
                std::fs::write(
                    dir.join("web.yml"),
                    format!("basic_auth_users:\n  {user}: {hash:?}\n"),
                )?;
                flags.push(format!(
                    "--web.config.file={}",
                    dir.join("web.yml").display()
                ));
                use base64::Engine as _;
                let token =
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                Some(format!("Basic {token}"))
            }
            None => None,
        };
        let within = Duration::from_secs(30);
        let served = Served::start("alertmanager", bin, &dir, authorization, within, |at| {
            flags.extend([
                format!("--config.file={}", dir.join("alertmanager.yml").display()),
                format!("--storage.path={}", dir.join("data").display()),
                format!("--web.listen-address={at}"),
                // Empty: no gossip, no cluster port to collide with another test's.
                "--cluster.listen-address=".into(),
            ]);
            flags
        })
        .await?;
        Ok(Alertmanager { served, dir })
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> String {
        self.served.url()
    }

    pub fn log_tail(&self) -> String {
        self.served.log_tail()
    }

    /// SIGKILL: no snapshot of the silences is written (what a crash loses).
    pub fn kill(&mut self) {
        self.served.kill();
    }

    /// Starts it again on the same port and storage.
    pub async fn restart(&mut self) -> Result<()> {
        self.served.restart().await
    }

    /// The status of `GET /api/v2/silences` without credentials: 401 with basic auth.
    pub async fn status_without_credentials(&self) -> Result<u16> {
        let (status, _) = self
            .served
            .request_without_credentials("GET", "/api/v2/silences")
            .await?;
        Ok(status)
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
        self.post_alerts(serde_json::json!([{ "labels": labels_map(labels) }]))
            .await
    }

    /// `POST /api/v2/alerts`: the alert with these labels ends now (resolved, it is no
    /// longer listed).
    pub async fn resolve_alert(&self, labels: &[(&str, &str)]) -> Result<()> {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        self.post_alerts(serde_json::json!([{ "labels": labels_map(labels), "endsAt": now }]))
            .await
    }

    async fn post_alerts(&self, alerts: Value) -> Result<()> {
        let (code, text) = self
            .served
            .request("POST", "/api/v2/alerts", Some(alerts.to_string()))
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
            .served
            .request("POST", "/api/v2/silences", Some(silence.to_string()))
            .await?;
        if code != 200 {
            bail!("POST /api/v2/silences: {code} {text}");
        }
        let v: Value = serde_json::from_str(&text)?;
        Ok(v["silenceID"].as_str().unwrap_or_default().to_string())
    }

    async fn get_json(&self, path: &str) -> Result<Vec<Value>> {
        let (code, text) = self.served.request("GET", path, None).await?;
        if code != 200 {
            bail!("GET {path}: {code} {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("GET {path}: {text}"))
    }
}

fn labels_map(labels: &[(&str, &str)]) -> serde_json::Map<String, Value> {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect()
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        self.served.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
