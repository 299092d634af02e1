//! Measuring: kumaco's node writes as the API server counts them, settling, and an
//! independent watch of when each node turned `UnderMaintenance=True` and how long after
//! the edge.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{QUIET, SETTLE_TIMEOUT, TRANSITION_TIMEOUT, UNDER_MAINTENANCE};
use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use testkit::Scope;
use testkit::fleet::percentile;
use testkit::kumaco::{apiserver_metrics, metric};
use testkit::nodes::condition;

/// kumaco's node writes as the API server counts them: server-side applies to nodes
/// (`nodes/status` and any other), which only kumaco sends once setup is done (nodes are
/// created with a POST and a merge patch; the churn's changes are patches too).
pub(crate) async fn kumaco_writes(client: &kube::Client) -> Result<u64> {
    kumaco_writes_in(&apiserver_metrics(client).await?)
}

pub(crate) fn kumaco_writes_in(apiserver_metrics: &str) -> Result<u64> {
    let writes = metric(
        apiserver_metrics,
        "apiserver_request_total",
        &[("verb", "APPLY"), ("resource", "nodes")],
    )?;
    Ok(writes as u64)
}

/// Waits until kumaco's node writes reach `target` (bounded by `TRANSITION_TIMEOUT`).
pub(crate) async fn wait_for_writes(client: &kube::Client, target: u64) -> Result<()> {
    let started = Instant::now();
    while kumaco_writes(client).await? < target {
        if started.elapsed() > TRANSITION_TIMEOUT {
            bail!("kumaco's node writes did not reach {target} in {TRANSITION_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Waits until the status write counter stops moving for `QUIET` (bounded by
/// `SETTLE_TIMEOUT`).
pub(crate) async fn settle(client: &kube::Client) -> Result<()> {
    let started = Instant::now();
    let mut last = kumaco_writes(client).await?;
    let mut since = Instant::now();
    while started.elapsed() < SETTLE_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = kumaco_writes(client).await?;
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= QUIET {
            break;
        }
    }
    Ok(())
}

pub(crate) async fn sleep_until(t: Timestamp) {
    let wait = t.duration_since(Timestamp::now());
    if wait.is_positive() {
        tokio::time::sleep(wait.unsigned_abs()).await;
    }
}

/// An independent watch on the bench nodes: when each one was first seen with
/// `UnderMaintenance=True` after the watch started (nodes already True are left out).
pub(crate) struct EdgeWatch {
    seen: Arc<Mutex<HashMap<String, Timestamp>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EdgeWatch {
    /// Starts the watch and returns once its initial list is complete.
    pub(crate) async fn start(client: &kube::Client, scope: &Scope) -> Result<Self> {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().labels(&scope.selector());
        let seen: Arc<Mutex<HashMap<String, Timestamp>>> = Arc::default();
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut synced_tx = Some(synced_tx);
                // Nodes True before the watch started are not transitions of this edge.
                let mut was_true = HashSet::new();
                let mut stream = watcher(api, config).boxed();
                while let Some(event) = stream.next().await {
                    // Stamp before anything else: the time of receipt is the measurement.
                    let at = Timestamp::now();
                    let Ok(event) = event else { continue };
                    let true_now = |n: &Node| {
                        condition(n, UNDER_MAINTENANCE).is_some_and(|c| c.status == "True")
                    };
                    match event {
                        // (Not True in the initial list: the arm below, which skips it.)
                        watcher::Event::InitApply(n) if synced_tx.is_some() && true_now(&n) => {
                            was_true.insert(n.metadata.name.clone().unwrap_or_default());
                        }
                        watcher::Event::InitDone => {
                            if let Some(tx) = synced_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        watcher::Event::Apply(n) | watcher::Event::InitApply(n) => {
                            let name = n.metadata.name.clone().unwrap_or_default();
                            if true_now(&n) && !was_true.contains(&name) {
                                seen.lock().unwrap().entry(name).or_insert(at);
                            }
                        }
                        _ => {}
                    }
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(60), synced_rx)
            .await
            .context("the edge watch did not complete its initial list in 60 s")?
            .context("the edge watch ended")?;
        Ok(EdgeWatch { seen, task })
    }

    /// Waits until `count` nodes have turned True (or `timeout`); their times.
    pub(crate) async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Timestamp> {
        let started = Instant::now();
        while self.transitions() < count && started.elapsed() < timeout {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.seen.lock().unwrap().values().copied().collect()
    }

    pub(crate) fn transitions(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The nodes seen turning True.
    pub(crate) fn nodes(&self) -> Vec<String> {
        self.seen.lock().unwrap().keys().cloned().collect()
    }
}

impl Drop for EdgeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// p50, p99, max and min of the times `seen` after `edge`, in milliseconds.
pub(crate) fn latency_summary(seen: &[Timestamp], edge: Timestamp) -> Value {
    let mut ms: Vec<f64> = seen
        .iter()
        .map(|t| t.duration_since(edge).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    json!({
        "p50": percentile(&ms, 0.50),
        "p99": percentile(&ms, 0.99),
        "max": ms.last().copied(),
        "min": ms.first().copied(),
    })
}

/// The edge window's selector, the number of nodes it selects, and how many of them the
/// first edge turned True.
pub(crate) struct EdgeSpec<'a> {
    pub(crate) selector: &'a str,
    pub(crate) count: usize,
    pub(crate) true_now: usize,
}
