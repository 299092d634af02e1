//! The watch: every node's transitions with the time they were received, and each
//! node's maintenance in a rollout read from them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use testkit::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED};
use testkit::nodes::condition;
use tokio::task::JoinHandle;

/// A node as the recorder last saw it.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeNow {
    /// `MaintenanceInProgress`: status, reason, message.
    pub(crate) mip: Option<(String, String, String)>,
    pub(crate) cordoned: bool,
    pub(crate) reboot_required: Option<String>,
    pub(crate) boot: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) enum What {
    /// `MaintenanceInProgress` turned True; the boot ID then.
    Started { boot: Option<String> },
    /// It turned False from True.
    Ended { reason: String, message: String },
    /// Uncordoned (after having been cordoned).
    Uncordoned,
}

#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) at: Timestamp,
    pub(crate) node: String,
    pub(crate) what: What,
}

#[derive(Default)]
pub(crate) struct Recorded {
    pub(crate) now: BTreeMap<String, NodeNow>,
    pub(crate) events: Vec<Seen>,
    pub(crate) relists: usize,
}

/// Watches the scope's nodes; every transition with the time it was received.
pub(crate) struct Recorder {
    pub(crate) state: Arc<Mutex<Recorded>>,
    pub(crate) task: JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Recorder {
    pub(crate) async fn start(client: &kube::Client, selector: &str, n: usize) -> Result<Recorder> {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().labels(selector);
        let state = Arc::new(Mutex::new(Recorded::default()));
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                let mut events = watcher(api, config).default_backoff().boxed();
                let mut listed = false;
                while let Some(event) = events.next().await {
                    let at = Timestamp::now();
                    let node = match event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => n,
                        Ok(watcher::Event::InitDone) => {
                            if listed {
                                state.lock().unwrap().relists += 1;
                            }
                            listed = true;
                            continue;
                        }
                        _ => continue,
                    };
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let now = NodeNow {
                        mip: condition(&node, MAINTENANCE_IN_PROGRESS).map(|c| {
                            (
                                c.status.clone(),
                                c.reason.clone().unwrap_or_default(),
                                c.message.clone().unwrap_or_default(),
                            )
                        }),
                        cordoned: node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true),
                        reboot_required: condition(&node, REBOOT_REQUIRED)
                            .map(|c| c.status.clone()),
                        boot: node
                            .status
                            .as_ref()
                            .and_then(|s| s.node_info.as_ref())
                            .map(|i| i.boot_id.clone()),
                    };
                    // No await while the lock is held.
                    let mut state = state.lock().unwrap();
                    let before = state.now.get(&name).cloned().unwrap_or_default();
                    let status = |n: &NodeNow| n.mip.as_ref().map(|m| m.0 == "True");
                    let mut seen = |what| {
                        state.events.push(Seen {
                            at,
                            node: name.clone(),
                            what,
                        })
                    };
                    match (status(&before), status(&now)) {
                        (Some(true), Some(true)) => {}
                        (_, Some(true)) => seen(What::Started {
                            boot: now.boot.clone(),
                        }),
                        (Some(true), _) => {
                            let (_, reason, message) = now.mip.clone().unwrap_or_default();
                            seen(What::Ended { reason, message })
                        }
                        _ => {}
                    }
                    if before.cordoned && !now.cordoned {
                        seen(What::Uncordoned);
                    }
                    state.now.insert(name, now);
                }
            }
        });
        let recorder = Recorder { state, task };
        let started = Instant::now();
        while recorder.state.lock().unwrap().now.len() < n {
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the recorder's watch did not list the {n} nodes in time");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(recorder)
    }

    pub(crate) fn with<T>(&self, f: impl FnOnce(&Recorded) -> T) -> T {
        f(&self.state.lock().unwrap())
    }

    /// Polls `check` every 500 ms until it is true, at most `timeout`; `what` names it.
    pub(crate) async fn wait(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Recorded) -> Result<(), String>,
    ) -> Result<f64> {
        let started = Instant::now();
        loop {
            let outcome = self.with(&check);
            match outcome {
                Ok(()) => return Ok(started.elapsed().as_secs_f64()),
                Err(e) if started.elapsed() > timeout => {
                    bail!("{what}: not within {timeout:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}

/// A node's maintenance in a rollout, as the recorder saw it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Real {
    pub(crate) start: Option<Timestamp>,
    pub(crate) boot: Option<String>,
    pub(crate) end: Option<Timestamp>,
    pub(crate) end_reason: String,
    pub(crate) end_message: String,
    pub(crate) back: Option<Timestamp>,
}

/// Each node's first maintenance that started at or after `from`.
pub(crate) fn reals(r: &Recorded, from: Timestamp) -> BTreeMap<String, Real> {
    let mut out: BTreeMap<String, Real> =
        r.now.keys().map(|n| (n.clone(), Real::default())).collect();
    for e in r.events.iter().filter(|e| e.at >= from) {
        let Some(real) = out.get_mut(&e.node) else {
            continue;
        };
        match &e.what {
            What::Started { boot } if real.start.is_none() => {
                real.start = Some(e.at);
                real.boot = boot.clone();
            }
            What::Ended { reason, message } if real.start.is_some() && real.end.is_none() => {
                real.end = Some(e.at);
                real.end_reason = reason.clone();
                real.end_message = message.clone();
            }
            What::Uncordoned if real.end.is_some() && real.back.is_none() => {
                real.back = Some(e.at);
            }
            _ => {}
        }
    }
    out
}
