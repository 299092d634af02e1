//! A program that serves HTTP on a loopback port it keeps across restarts (Alertmanager,
//! Prometheus): started with its flags, ready once `GET /-/ready` answers 200, killed and
//! started again on the same port and storage, so that a URL given to kumaco stays valid.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::http;
use crate::process::{Owned, tail};

pub struct Served {
    name: &'static str,
    bin: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    address: SocketAddr,
    /// The `Authorization` header its endpoints want, readiness included.
    authorization: Option<String>,
    ready_within: Duration,
    process: Option<Owned>,
}

impl Served {
    /// Starts `bin` with `args(address)` on a free loopback address, its output in
    /// `dir/log`; returns once it is ready, or fails with its log's end after
    /// `ready_within`.
    pub async fn start(
        name: &'static str,
        bin: PathBuf,
        dir: &Path,
        authorization: Option<String>,
        ready_within: Duration,
        args: impl FnOnce(SocketAddr) -> Vec<String>,
    ) -> Result<Served> {
        let address = SocketAddr::from(([127, 0, 0, 1], http::free_port()?));
        let mut served = Served {
            name,
            bin,
            args: args(address),
            log: dir.join("log"),
            address,
            authorization,
            ready_within,
            process: None,
        };
        served.spawn().await?;
        Ok(served)
    }

    async fn spawn(&mut self) -> Result<()> {
        let mut command = Command::new(&self.bin);
        command.args(&self.args).stdin(Stdio::null());
        self.process = Some(Owned::spawn(self.name, command, Some(&self.log))?);
        let deadline = tokio::time::Instant::now() + self.ready_within;
        loop {
            if let Ok((200, _)) = self.request("GET", "/-/ready", None).await {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!(
                    "{} not ready within {:?}; log:\n{}",
                    self.name,
                    self.ready_within,
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `method path` with its `Authorization`, if any: the status and the body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String)> {
        let authorization = self.authorization.as_deref();
        http::request(self.address, authorization, method, path, body).await
    }

    /// `method path` with no credentials.
    pub async fn request_without_credentials(
        &self,
        method: &str,
        path: &str,
    ) -> Result<(u16, String)> {
        http::request(self.address, None, method, path, None).await
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The end of its log, for a failure's message.
    pub fn log_tail(&self) -> String {
        tail(&self.log, 20)
    }

    /// SIGKILL: nothing is flushed, as in a crash.
    pub fn kill(&mut self) {
        self.process = None;
    }

    /// Starts it again on the same port and storage.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn().await
    }
}
