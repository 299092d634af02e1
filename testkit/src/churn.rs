//! Foreign changes to nodes: what a real cluster does to its nodes all
//! the time, none of which is kumaco's business. kumaco must not write because of them,
//! and what they cost it is what the scale harnesses measure.
//!
//! Two clients take turns, one change each, at a set total rate ([`start`]):
//!
//! - a stand-in kubelet ([`KUBELET`], field manager of its own): a strategic merge patch
//!   on `nodes/status`, as a kubelet sends, bumping the `lastHeartbeatTime` of the
//!   `Ready` condition and reporting an image list with one image changed
//!   ([`fleet::node_images`]);
//! - a stand-in for the other controllers ([`LABELER`]): a merge patch on the node's
//!   metadata, annotation [`TICK_ANNOTATION`] and label [`GENERATION_LABEL`] set to the
//!   change's number (no kumaco selector reads either).
//!
//! Change `k` (from 0) is due `k / rate` seconds after the start; even changes are the
//! kubelet's, on node `(k / 2) % n`, odd ones the labeler's, on node `(k / 2 + n / 2) %
//! n`, so every node gets both kinds in turn. Every change is a real one (the change
//! number is in it), so the API server writes it and every watch sees it. [`Paced`] runs
//! them, at most [`IN_FLIGHT`] in flight.
//!
//! [`pods`]: pods bound to the nodes and changes to them (and to the nodes' availability)
//! at set rates, for the cost of `--block-pod-selector` (watching pods, whose cost must
//! follow the changes that matter, not the number of pods). [`plain`]: the plain
//! client whose CPU per change is the floor kumaco's is compared with.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;
use tokio::time::Instant;

use crate::fleet;

pub mod plain;
pub mod pods;

/// The stand-in kubelet's field manager.
pub const KUBELET: &str = "churn-kubelet";
/// The field manager of the client changing labels and annotations.
pub const LABELER: &str = "churn-labeler";
/// The annotation the labeler sets on every change it makes.
pub const TICK_ANNOTATION: &str = "churn.example.com/tick";
/// The label the labeler sets on every change it makes.
pub const GENERATION_LABEL: &str = "churn.example.com/generation";
/// Requests in flight at most.
pub const IN_FLIGHT: usize = 16;
/// A change not answered in this time counts as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How much churn, for how long.
#[derive(Clone, Copy, Debug)]
pub struct ChurnSpec {
    /// Changes per second, both clients together.
    pub rate: f64,
    pub duration: Duration,
}

impl ChurnSpec {
    /// The number of changes the schedule holds.
    pub fn planned(&self) -> u64 {
        (self.rate * self.duration.as_secs_f64()).round() as u64
    }
}

/// Counts of a paced run so far (or in all, from [`Paced::finish`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct PacedCounts {
    pub planned: u64,
    pub sent: u64,
    pub accepted: u64,
    /// Accepted changes by kind (`label`, `status`, `delete`, ...).
    pub by_kind: BTreeMap<String, u64>,
    pub failed: u64,
    pub first_error: Option<String>,
    /// The furthest a change was sent behind its due time, in milliseconds.
    pub max_lag_ms: u64,
    /// Seconds from the start to the last answer (or to now, while running).
    pub seconds: f64,
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    failed: AtomicU64,
    max_lag_ms: AtomicU64,
    by_kind: Mutex<BTreeMap<String, u64>>,
    first_error: Mutex<Option<String>>,
}

/// Changes at a set rate in the background: change `k` (from 0) is due `k / rate`
/// seconds after the start, at most `in_flight` in flight (one behind its schedule
/// catches up within that bound, its lag reported), none started after the duration,
/// each given up after [`REQUEST_TIMEOUT`]. What a change is, the caller says: it
/// returns the kind it counts under. It stops by itself after its duration.
pub struct Paced {
    spec: ChurnSpec,
    counters: Arc<Counters>,
    started: Instant,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Paced {
    pub fn start(
        spec: ChurnSpec,
        in_flight: usize,
        change: impl Fn(u64) -> BoxFuture<'static, Result<&'static str, String>> + Send + Sync + 'static,
    ) -> Paced {
        assert!(
            spec.rate.is_finite() && spec.rate > 0.0,
            "a paced run's rate must be positive"
        );
        let counters = Arc::new(Counters::default());
        let started = Instant::now();
        let period = Duration::from_secs_f64(1.0 / spec.rate);
        let deadline = started + spec.duration;
        let task = tokio::spawn({
            let counters = counters.clone();
            async move {
                let counters = &counters;
                let change = &change;
                futures::stream::iter(0..spec.planned())
                    .then(|k| async move {
                        let due = started + period.mul_f64(k as f64);
                        tokio::time::sleep_until(due).await;
                        (k, due)
                    })
                    .take_while(|_| std::future::ready(Instant::now() < deadline))
                    .map(|(k, due)| {
                        let lag = Instant::now().saturating_duration_since(due).as_millis() as u64;
                        counters.max_lag_ms.fetch_max(lag, Ordering::Relaxed);
                        counters.sent.fetch_add(1, Ordering::Relaxed);
                        let request = change(k);
                        async move {
                            match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
                                Ok(Ok(kind)) => {
                                    *counters
                                        .by_kind
                                        .lock()
                                        .unwrap()
                                        .entry(kind.to_string())
                                        .or_default() += 1;
                                }
                                failure => {
                                    counters.failed.fetch_add(1, Ordering::Relaxed);
                                    let error = match failure {
                                        Ok(Err(e)) => e,
                                        _ => format!("no answer in {REQUEST_TIMEOUT:?}"),
                                    };
                                    counters.first_error.lock().unwrap().get_or_insert(error);
                                }
                            }
                        }
                    })
                    .buffer_unordered(in_flight)
                    .collect::<()>()
                    .await;
            }
        });
        Paced {
            spec,
            counters,
            started,
            task: Some(task),
        }
    }

    pub fn progress(&self) -> PacedCounts {
        let c = &self.counters;
        let by_kind = c.by_kind.lock().unwrap().clone();
        PacedCounts {
            planned: self.spec.planned(),
            sent: c.sent.load(Ordering::Relaxed),
            accepted: by_kind.values().sum(),
            by_kind,
            failed: c.failed.load(Ordering::Relaxed),
            first_error: c.first_error.lock().unwrap().clone(),
            max_lag_ms: c.max_lag_ms.load(Ordering::Relaxed),
            seconds: self.started.elapsed().as_secs_f64(),
        }
    }

    /// Waits for the run to end by itself and returns its counts.
    pub async fn finish(mut self) -> PacedCounts {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        self.progress()
    }
}

impl Drop for Paced {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Starts changing `nodes` now (node `i` of the fleet is `nodes[i]`, for its image list):
/// the kubelet's changes through `kubelet`, the labeler's through `labeler`. Counted
/// under `status` and `metadata`.
pub fn start(
    kubelet: kube::Client,
    labeler: kube::Client,
    nodes: Vec<String>,
    spec: ChurnSpec,
) -> Paced {
    assert!(!nodes.is_empty(), "churn on no node");
    let (kubelet, labeler) = (Api::<Node>::all(kubelet), Api::<Node>::all(labeler));
    let nodes = Arc::new(nodes);
    Paced::start(spec, IN_FLIGHT, move |k| {
        let (kubelet, labeler, nodes) = (kubelet.clone(), labeler.clone(), nodes.clone());
        async move {
            let n = nodes.len();
            let half = (k / 2) as usize;
            if k % 2 == 0 {
                let i = half % n;
                let patch = json!({ "status": {
                    "conditions": [{
                        "type": "Ready",
                        "lastHeartbeatTime": Timestamp::now().to_string(),
                    }],
                    "images": fleet::node_images(i, k + 1),
                }});
                let params = PatchParams {
                    field_manager: Some(KUBELET.into()),
                    ..Default::default()
                };
                kubelet
                    .patch_status(&nodes[i], &params, &Patch::Strategic(patch))
                    .await
                    .map(|_| "status")
            } else {
                let i = (half + n / 2) % n;
                let patch = json!({ "metadata": {
                    "labels": { GENERATION_LABEL: k.to_string() },
                    "annotations": { TICK_ANNOTATION: k.to_string() },
                }});
                let params = PatchParams {
                    field_manager: Some(LABELER.into()),
                    ..Default::default()
                };
                labeler
                    .patch(&nodes[i], &params, &Patch::Merge(patch))
                    .await
                    .map(|_| "metadata")
            }
            .map_err(|e| e.to_string())
        }
        .boxed()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planned_is_rate_times_duration() {
        let spec = ChurnSpec {
            rate: 100.0,
            duration: Duration::from_secs(60),
        };
        assert_eq!(spec.planned(), 6000);
        let spec = ChurnSpec {
            rate: 20.0,
            duration: Duration::from_millis(2500),
        };
        assert_eq!(spec.planned(), 50);
    }

    #[test]
    fn every_generation_changes_the_image_list() {
        let lists: Vec<_> = (0..100).map(|g| fleet::node_images(7, g)).collect();
        for pair in lists.windows(2) {
            assert_ne!(pair[0], pair[1]);
        }
        assert!(lists.iter().all(|l| l.len() == 40));
    }
}
