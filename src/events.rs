//! Posting the window events the pass says should exist (`announce`), by name, with
//! events.k8s.io/v1.
//!
//! Each event is created under the name `announce` gives it; AlreadyExists means another
//! replica or an earlier run posted it. What this module keeps, the names it knows to
//! exist, is a cache of the cluster: losing it costs one AlreadyExists per due event.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::{debug, info, warn};

use crate::announce::{Announcement, Severity, WindowSource};
use crate::metrics::{Metrics, WriteResult};
use crate::node_events::{self, NodeEvent};
use crate::window::{Window, WindowId};

/// Each creation gets this long before it counts as failed and is retried.
const CREATE_TIMEOUT: Duration = Duration::from_secs(10);
/// Creations in flight at once.
const CONCURRENCY: usize = 8;
/// Longest wait before retrying failed creations.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(4);

/// Creates due events and remembers which exist.
pub struct Poster {
    client: Client,
    metrics: Arc<Metrics>,
    /// `reportingInstance` of the events: the pod's name, else the host name.
    instance: String,
    /// Names known to exist (created, answered AlreadyExists) or given up on.
    known: HashMap<String, Timestamp>,
    retry_at: Option<Timestamp>,
    failures: u32,
}

/// An event to create, and what to say about it in logs.
struct Creation {
    about: String,
    reason: &'static str,
    event: Event,
}

/// How a creation ended.
enum Outcome {
    Posted,
    AlreadyThere,
    /// An answer that will not change (400, 404, 409 other than AlreadyExists, 422, ...).
    Refused(String),
    /// 401/403 (RBAC can be fixed), 429, 5xx, timeouts: retried with backoff.
    Failed(String),
}

impl Poster {
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        Poster {
            client,
            metrics,
            instance: reporting_instance(),
            known: HashMap::new(),
            retry_at: None,
            failures: 0,
        }
    }

    /// Creates from now on with `client`.
    pub fn use_client(&mut self, client: Client) {
        self.client = client;
    }

    /// When failed creations are to be retried, if some failed.
    pub fn retry_at(&self) -> Option<Timestamp> {
        self.retry_at
    }

    /// Creates the `due` events not known to exist; `sources` give the notes their
    /// window details.
    pub async fn post(
        &mut self,
        due: &[Announcement],
        sources: &BTreeMap<WindowId, WindowSource>,
        now: Timestamp,
    ) {
        self.known
            .retain(|name, _| due.iter().any(|a| &a.name == name));
        let missing: Vec<Creation> = due
            .iter()
            .filter(|a| !self.known.contains_key(&a.name))
            .map(|a| {
                let window = sources.get(&a.window).and_then(|s| s.window.as_ref().ok());
                Creation {
                    about: format!("window {}", a.window),
                    reason: a.reason(),
                    event: self.event(a, window, now),
                }
            })
            .collect();
        self.create_all(missing, now).await;
    }

    /// Creates the node events `due` not known to exist (`--node-events`).
    pub async fn post_node_events(&mut self, due: &[NodeEvent], now: Timestamp) {
        self.known
            .retain(|name, _| due.iter().any(|e| &e.name == name));
        let missing: Vec<Creation> = due
            .iter()
            .filter(|e| !self.known.contains_key(&e.name))
            .map(|e| Creation {
                about: format!("node {}", e.node),
                reason: e.reason,
                event: self.node_event(e, now),
            })
            .collect();
        self.create_all(missing, now).await;
    }

    async fn create_all(&mut self, missing: Vec<Creation>, now: Timestamp) {
        if missing.is_empty() {
            (self.failures, self.retry_at) = (0, None);
            return;
        }
        if self.retry_at.is_some_and(|t| t > now) {
            return;
        }
        let results: Vec<(Creation, Outcome)> = futures::stream::iter(missing)
            .map(|c| {
                let ns = c.event.metadata.namespace.clone().unwrap_or_default();
                let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
                async move {
                    let outcome = create(&api, &c.event).await;
                    (c, outcome)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let mut retry = false;
        for (c, outcome) in results {
            let (about, reason) = (&c.about, c.reason);
            let name = c.event.metadata.name.clone().unwrap_or_default();
            match outcome {
                Outcome::Posted => {
                    self.metrics.write("event", WriteResult::Ok);
                    info!(%about, reason, event = %name, "event posted");
                }
                Outcome::AlreadyThere => {
                    debug!(%about, reason, event = %name, "event already posted");
                }
                Outcome::Refused(e) => {
                    self.metrics.write("event", WriteResult::Error);
                    warn!(%about, reason, error = %e, "posting event refused; not retrying");
                }
                Outcome::Failed(e) => {
                    self.metrics.write("event", WriteResult::Error);
                    warn!(%about, reason, error = %e, "posting event failed; will retry");
                    retry = true;
                    continue;
                }
            }
            self.known.insert(name, now);
        }
        if retry {
            self.failures = (self.failures + 1).min(7);
            let delay = Duration::from_millis(500 << (self.failures - 1)).min(MAX_RETRY_DELAY);
            self.retry_at = now.checked_add(delay).ok();
        } else {
            (self.failures, self.retry_at) = (0, None);
        }
    }

    fn node_event(&self, e: &NodeEvent, now: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(e.name.clone()),
                namespace: Some(node_events::NAMESPACE.into()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            reporting_controller: Some("kumaco".into()),
            reporting_instance: Some(self.instance.clone()),
            action: Some(if e.warning { "Contest" } else { "SetCondition" }.into()),
            reason: Some(e.reason.into()),
            note: Some(e.note.clone()),
            type_: Some(if e.warning { "Warning" } else { "Normal" }.into()),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(e.node.clone()),
                uid: Some(e.uid.clone()),
                ..ObjectReference::default()
            }),
            ..Event::default()
        }
    }

    fn event(&self, a: &Announcement, window: Option<&Window>, now: Timestamp) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(a.name.clone()),
                namespace: Some(a.window.namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            reporting_controller: Some("kumaco".into()),
            reporting_instance: Some(self.instance.clone()),
            action: Some(a.action().into()),
            reason: Some(a.reason().into()),
            note: Some(a.note(window, now)),
            type_: Some(
                match a.severity() {
                    Severity::Normal => "Normal",
                    Severity::Warning => "Warning",
                }
                .into(),
            ),
            regarding: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("ConfigMap".into()),
                namespace: Some(a.window.namespace.clone()),
                name: Some(a.window.name.clone()),
                uid: Some(a.uid.clone()),
                ..ObjectReference::default()
            }),
            ..Event::default()
        }
    }
}

async fn create(api: &Api<Event>, event: &Event) -> Outcome {
    match tokio::time::timeout(CREATE_TIMEOUT, api.create(&PostParams::default(), event)).await {
        Ok(Ok(_)) => Outcome::Posted,
        Ok(Err(kube::Error::Api(e))) if e.code == 409 && e.reason == "AlreadyExists" => {
            Outcome::AlreadyThere
        }
        Ok(Err(kube::Error::Api(e))) if matches!(e.code, 401 | 403 | 429) || e.code >= 500 => {
            Outcome::Failed(format!("{} ({})", e.message, e.code))
        }
        Ok(Err(kube::Error::Api(e))) => Outcome::Refused(format!("{} ({})", e.message, e.code)),
        Ok(Err(e)) => Outcome::Failed(e.to_string()),
        Err(_) => Outcome::Failed(format!("no answer within {CREATE_TIMEOUT:?}")),
    }
}

/// The pod's name (events.k8s.io wants a reporting instance), else the host name.
fn reporting_instance() -> String {
    let name = std::env::var("POD_NAME").ok().or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string())
    });
    let mut name = name
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "kumaco".into());
    name.truncate(128);
    name
}
