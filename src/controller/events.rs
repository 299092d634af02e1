//! Posting the events the pass says should exist (`announce`, `node_events`), by name,
//! with events.k8s.io/v1, through the one writer's classification and backoff.
//!
//! Each event is created under the name `announce` gives it; AlreadyExists means another
//! replica or an earlier run posted it. What this module keeps, the names it knows to
//! exist, is a cache of the cluster: losing it costs one AlreadyExists per due event.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::{debug, info, warn};

use super::writer::{self, Answer, Retry};
use crate::announce::{Announcement, Severity, WindowSource};
use crate::metrics::{Metrics, WriteResult};
use crate::node::Names;
use crate::node_events::{self, NodeEvent};
use crate::window::{Window, WindowId};

/// Creations in flight at once.
const CONCURRENCY: usize = 8;

/// Creates due events and remembers which exist.
pub struct Poster {
    client: Client,
    metrics: Arc<Metrics>,
    /// `reportingInstance` of the events: the pod's name, else the host name.
    instance: String,
    /// The names the nodes carry kumaco's conditions under: a node event's note says them.
    names: Names,
    /// Names known to exist (created, answered AlreadyExists) or given up on.
    known: HashMap<String, Timestamp>,
    retry: Retry,
}

/// An event to create, and what to say about it in logs.
struct Creation {
    about: String,
    reason: &'static str,
    event: Event,
}

impl Poster {
    pub fn new(client: Client, names: Names, metrics: Arc<Metrics>) -> Self {
        Poster {
            client,
            metrics,
            names,
            instance: reporting_instance(),
            known: HashMap::new(),
            retry: Retry::default(),
        }
    }

    /// Creates from now on with `client`.
    pub fn use_client(&mut self, client: Client) {
        self.client = client;
    }

    /// When failed creations are to be retried, if some failed.
    pub fn retry_at(&self) -> Option<Timestamp> {
        self.retry.at()
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
            self.retry.record(false, now);
            return;
        }
        if !self.retry.due(now) {
            return;
        }
        let results: Vec<(Creation, Answer<Event>)> = futures::stream::iter(missing)
            .map(|c| {
                let ns = c.event.metadata.namespace.clone().unwrap_or_default();
                let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
                async move {
                    let created = tokio::time::timeout(
                        writer::TIMEOUT,
                        api.create(&PostParams::default(), &c.event),
                    )
                    .await;
                    (c, writer::answer(created))
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
                Answer::Done(_) => {
                    self.metrics.write("event", WriteResult::Ok);
                    info!(%about, reason, event = %name, "event posted");
                }
                Answer::AlreadyExists => {
                    debug!(%about, reason, event = %name, "event already posted");
                }
                Answer::Refused(e) => {
                    self.metrics.write("event", WriteResult::Error);
                    warn!(%about, reason, error = %e, "posting event refused; not retrying");
                }
                // A conflict on a creation is no precondition a retry could meet.
                Answer::Conflict => {
                    self.metrics.write("event", WriteResult::Error);
                    warn!(%about, reason, "posting event refused (409 conflict); not retrying");
                }
                Answer::Retry(e) => {
                    self.metrics.write("event", WriteResult::Error);
                    warn!(%about, reason, error = %e, "posting event failed; will retry");
                    retry = true;
                    continue;
                }
            }
            self.known.insert(name, now);
        }
        self.retry.record(retry, now);
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
            note: Some(on_the_wire(&self.names, &e.condition, &e.note)),
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

/// A node event's note names its condition first (`MaintenanceInProgress=True (...)`):
/// under the name the node carries it (`--in-progress-condition`).
fn on_the_wire(names: &Names, condition: &str, note: &str) -> String {
    let wire = names.to_wire(condition);
    match note.strip_prefix(condition) {
        Some(rest) if wire != condition && !condition.is_empty() => format!("{wire}{rest}"),
        _ => note.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::announce::What;

    fn poster() -> Poster {
        // Building events needs no connection: a client that could reach nothing.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Poster::new(
            Client::try_from(config).unwrap(),
            Names::default(),
            Arc::new(Metrics::new()),
        )
    }

    #[tokio::test]
    async fn window_events_regard_their_configmap_and_invalid_ones_warn() {
        let p = poster();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let a = Announcement {
            name: "w.0123456789abcdef".into(),
            window: WindowId {
                namespace: "ops".into(),
                name: "w".into(),
            },
            uid: "uid-w".into(),
            blackout: false,
            what: What::Invalid("duration: bad".into()),
        };
        let e = p.event(&a, None, now);
        assert_eq!(e.metadata.namespace.as_deref(), Some("ops"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.reason.as_deref(), Some("WindowInvalid"));
        let regarding = e.regarding.unwrap();
        assert_eq!(
            (regarding.kind.as_deref(), regarding.uid.as_deref()),
            (Some("ConfigMap"), Some("uid-w"))
        );
        assert_eq!(e.reporting_controller.as_deref(), Some("kumaco"));
    }

    #[tokio::test]
    async fn node_events_are_in_default_and_a_contest_is_a_warning() {
        let p = poster();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let contest =
            &node_events::contested("n1", "uid-1", &["kumaco/b/b".into()], "kumaco/a/a")[0];
        let e = p.node_event(contest, now);
        assert_eq!(
            e.metadata.namespace.as_deref(),
            Some(node_events::NAMESPACE)
        );
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.action.as_deref(), Some("Contest"));
        assert_eq!(e.regarding.unwrap().kind.as_deref(), Some("Node"));
        assert!(reporting_instance().len() <= 128);
    }
}
