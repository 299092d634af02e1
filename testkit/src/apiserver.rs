//! A real kube-apiserver with etcd, started on loopback from the `testenv` Go program.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Deserialize;

use crate::gobuild::{Program, binary};
use crate::process::{Owned, tail};

/// How long a (re)start may take before the harness gives up. A cold start on 2 cores
/// is a few seconds; the margin is for a loaded CI machine.
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a clean stop may take before the API server is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// What testenv prints, with its address and kubeconfig, once the API server is ready.
const READY_LINE: &str = "TESTENV_READY ";

#[derive(Debug, Deserialize)]
struct Ready {
    url: String,
    kubeconfig: PathBuf,
}

/// A running API server. Dropping it stops it (SIGTERM, then waits).
pub struct ApiServer {
    dir: PathBuf,
    url: String,
    kubeconfig: PathBuf,
    process: Option<Owned>,
    // More `testenv serve` flags (see [`ApiServer::start_fresh_with`]).
    serve_args: Vec<String>,
}

impl ApiServer {
    /// The API server shared by all tests of this test binary, started on first use.
    /// Nodes are cluster-scoped: tests sharing it must keep apart with [`crate::Scope`].
    pub fn shared() -> &'static ApiServer {
        static SHARED: OnceLock<ApiServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            ApiServer::start_fresh()
                .unwrap_or_else(|e| panic!("starting the test API server: {e:#}"))
        })
    }

    /// A private API server in a new directory, for tests that kill or restart it.
    pub fn start_fresh() -> Result<ApiServer> {
        Self::start_fresh_with(&[])
    }

    /// [`Self::start_fresh`] with more `testenv serve` flags (`--cluster`,
    /// `--apiserver-args=...`), kept for restarts.
    pub fn start_fresh_with(serve_args: &[String]) -> Result<ApiServer> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join("kumaco-testenv");
        remove_stale(&root);
        let dir = root.join(format!(
            "{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        // Left by an earlier process with this id (ids are reused), which
        // `remove_stale` cannot tell from ours: etcd would start on its data.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut server = ApiServer {
            dir,
            url: String::new(),
            kubeconfig: PathBuf::new(),
            process: None,
            serve_args: serve_args.to_vec(),
        };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> Result<()> {
        let bin = binary(Program::ApiServer)?;
        let log = self.dir.join("apiserver.log");
        // The log is appended to across restarts: this start's lines begin here.
        let from = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
        let started = Instant::now();
        let mut command = Command::new(&bin);
        command
            .arg("serve")
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.serve_args)
            .stdin(Stdio::null());
        let mut process = Owned::spawn("the test API server", command, Some(&log))?;
        let ready = loop {
            let text = std::fs::read(&log).unwrap_or_default();
            let ours = String::from_utf8_lossy(text.get(from..).unwrap_or_default());
            if let Some(json) = ours.lines().find_map(|l| l.strip_prefix(READY_LINE)) {
                break serde_json::from_str::<Ready>(json)?;
            }
            let gave_up = if let Some(status) = process.exited() {
                format!("exited with {status}")
            } else if started.elapsed() > START_TIMEOUT {
                format!("did not become ready within {START_TIMEOUT:?}")
            } else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            bail!(
                "the test API server {gave_up}; its log is {}:\n{}",
                log.display(),
                tail(&log, 40)
            );
        };
        eprintln!(
            "testkit: API server ready at {} in {:.1}s (dir {})",
            ready.url,
            started.elapsed().as_secs_f64(),
            self.dir.display()
        );
        self.url = ready.url;
        self.kubeconfig = ready.kubeconfig;
        self.process = Some(process);
        Ok(())
    }

    /// The process id of the running API server (and etcd: one process), for reading
    /// its CPU from /proc.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Owned::id)
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// An admin (system:masters) kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The directory holding PKI, etcd data and the API server's log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// An admin client. Make one per test: a client is tied to the tokio runtime that
    /// created it, and each `#[tokio::test]` has its own.
    pub async fn client(&self) -> Result<kube::Client> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// A client that returns every answer as the API server gave it: kube's default
    /// retry of 429, 503 and 504 (up to 15 times, backing off to minutes) off. A drain
    /// needs it: an eviction a PodDisruptionBudget refuses is a 429, which the default
    /// client would retry for minutes before saying so.
    pub async fn client_without_retries(&self) -> Result<kube::Client> {
        let mut config = config_from_kubeconfig(&self.kubeconfig).await?;
        config.default_retry = false;
        Ok(kube::Client::try_from(config)?)
    }

    /// Writes a kubeconfig for `user` in `groups` (client certificate auth) and returns
    /// its path, for tests of what a given identity may do under RBAC.
    pub fn kubeconfig_for(&self, user: &str, groups: &[&str]) -> Result<PathBuf> {
        let out = self.dir.join(format!("{user}.kubeconfig"));
        let mut cmd = Command::new(binary(Program::ApiServer)?);
        cmd.arg("kubeconfig")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--user")
            .arg(user)
            .arg("--out")
            .arg(&out);
        for g in groups {
            cmd.arg("--group").arg(g);
        }
        let status = cmd.status()?;
        if !status.success() {
            bail!("testenv kubeconfig for {user} failed: {status}");
        }
        Ok(out)
    }

    /// SIGKILL: the API server and etcd die at once, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }

    /// Starts the API server again on the same data and address (after [`Self::kill`]).
    pub fn restart(&mut self) -> Result<()> {
        self.kill();
        self.spawn()
    }

    /// Stops cleanly with SIGTERM and waits.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop(STOP_TIMEOUT);
        }
    }

    /// The last lines of the API server's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.dir.join("apiserver.log"), lines)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A kube client for a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client> {
    Ok(kube::Client::try_from(config_from_kubeconfig(path).await?)?)
}

async fn config_from_kubeconfig(path: &Path) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path)?;
    let options = kube::config::KubeConfigOptions::default();
    Ok(kube::Config::from_custom_kubeconfig(kc, &options).await?)
}

/// Removes directories left by test processes that no longer exist (crashed runs).
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
