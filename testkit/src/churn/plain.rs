//! The floor of a foreign node change's cost: a plain client that watches every node
//! with kube's watcher into full `Node` objects and does nothing else, run as a process
//! of its own (`kumaco-bench --plain-watch KUBECONFIG`) so that its CPU can be read from
//! `/proc` over the same window as kumaco's. What kumaco spends per change beyond it is
//! kumaco's own.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;

use crate::apiserver::client_from_kubeconfig;
use crate::process::Owned;

/// What the child prints once its first list is in: the churn may start.
const LISTED: &str = "listed";
/// The longest the first list of the nodes may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// The plain client's loop (the child's side): every node watched, each event decoded
/// into a whole `Node` and dropped. Prints [`LISTED`] once the first list is in; runs
/// until killed.
pub async fn watch(kubeconfig: &Path) -> Result<()> {
    let client = client_from_kubeconfig(kubeconfig).await?;
    // The same page size as kumaco's node watch: the list is the same work.
    let config = watcher::Config::default().page_size(100);
    let mut events = std::pin::pin!(watcher(Api::<Node>::all(client), config));
    while let Some(event) = events.try_next().await.context("watching nodes")? {
        if matches!(event, watcher::Event::InitDone) {
            println!("{LISTED}");
        }
        drop(event);
    }
    bail!("the node watch ended")
}

/// The plain client's process, killed on drop.
pub struct PlainWatch {
    process: Owned,
}

impl PlainWatch {
    /// Starts `bench --plain-watch kubeconfig` and waits for its first list.
    pub fn start(bench: &Path, kubeconfig: &Path) -> Result<PlainWatch> {
        let mut command = Command::new(bench);
        command
            .arg("--plain-watch")
            .arg(kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut process = Owned::spawn("the plain client", command, None)?;
        let stdout = process.take_stdout().context("the plain client's stdout")?;
        let watch = PlainWatch { process };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            let _ = tx.send(first);
            // Keep reading: a closed pipe would end the child at its next print.
            for _ in lines {}
        });
        match rx.recv_timeout(LIST_TIMEOUT) {
            Ok(Some(Ok(line))) if line == LISTED => Ok(watch),
            Ok(other) => bail!("the plain client said {other:?} instead of {LISTED:?}"),
            Err(_) => bail!("the plain client listed no nodes in {LIST_TIMEOUT:?}"),
        }
    }

    /// Its CPU so far (user + system), in seconds.
    pub fn cpu_seconds(&self) -> Result<f64> {
        self.process.cpu_seconds()
    }

    /// Its RSS now and at its peak, in KiB.
    pub fn status_kib(&self, field: &str) -> Result<u64> {
        self.process.status_kib(field)
    }
}
