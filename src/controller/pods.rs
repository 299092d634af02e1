//! The blocking pods (`--block-pod-selector`): a watch per selector that receives only
//! the pods it matches and only those scheduled and not finished (the label selector and
//! a field selector, both server-side: kumaco never receives every pod of a cluster),
//! each kept as its name, namespace and node. A pass reads them as, per node, the pods
//! keeping it from starting.
//!
//! A pod that finishes (Succeeded, Failed) leaves the watch's selection and arrives as a
//! deletion; one whose status changes otherwise (a container restart, a condition) is
//! the same slim pod and wakes no pass. A pod that comes, goes or moves wakes a pass
//! only when it does so on a node waiting to start ([`waits_to_start`]): elsewhere it
//! changes no decision, and the pass that may start the node reads the pods as they are
//! then.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Deserializer};
use tokio::sync::Notify;

use super::Connect;
use super::sources::{Hints, Source, Sources};
use super::watch::{LIST_PAGE, ListState, WATCHED, Waiting, Watch, drive};
use super::writer::Backoff;
use crate::gates::Gate;
use crate::in_progress::BlockingPod;
use crate::selector::Selector;

/// Scheduled and not finished: a pending pod not yet bound to a node blocks nothing, a
/// completed one nothing any more.
pub const FIELD_SELECTOR: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// A pod as this module keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlimPod {
    /// Name, namespace and resourceVersion only.
    pub metadata: ObjectMeta,
    pub node_name: Option<String>,
    pub phase: Option<String>,
}

impl SlimPod {
    fn blocks(&self) -> bool {
        self.node_name.as_deref().is_some_and(|n| !n.is_empty())
            && !matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
}

impl<'de> Deserialize<'de> for SlimPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            metadata: Meta,
            #[serde(default)]
            spec: Option<Spec>,
            #[serde(default)]
            status: Option<Status>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Spec {
            node_name: Option<String>,
        }
        #[derive(Deserialize)]
        struct Status {
            phase: Option<String>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(SlimPod {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                namespace: wire.metadata.namespace,
                resource_version: wire.metadata.resource_version,
                ..ObjectMeta::default()
            },
            node_name: wire.spec.and_then(|s| s.node_name),
            phase: wire.status.and_then(|s| s.phase),
        })
    }
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Starts one watch per `--block-pod-selector`, cluster-wide, each a source of its own:
/// pods that cannot be read hold every start, since a blocking pod would not be seen.
/// `waiting`: to wake a pass only for pods on nodes waiting to start; `None` (a dry run,
/// whose would-be writes never show on the nodes) wakes one for every pod that comes or
/// goes.
pub fn spawn(
    client: &Client,
    connect: &Connect,
    selectors: &[Selector],
    watch_timeout_secs: u32,
    wake: Arc<Notify>,
    waiting: Option<Waiting>,
    sources: &Sources,
) -> Vec<(Store<SlimPod>, ListState, Source)> {
    selectors
        .iter()
        .map(|selector| {
            let (store, cache) = reflector::store::<SlimPod>();
            let config = watcher::Config::default()
                .page_size(LIST_PAGE)
                .timeout(watch_timeout_secs)
                .labels(&selector.to_string())
                .fields(FIELD_SELECTOR);
            let stream = move |client: Client| {
                watcher(Api::<SlimPod>::all(client), config.clone()).backoff(Backoff::default())
            };
            let relevant = pod_relevance(waiting.clone());
            let lists = ListState::default();
            let source = sources.add(
                Gate::BlockingPods,
                format!("the pods of --block-pod-selector '{selector}'"),
                Hints {
                    forbidden: Some(
                        "kumaco needs `get list watch` on pods, cluster-wide (the chart \
                         grants it with inProgress.blockPodSelectors; kustomize: the \
                         components/blocking-pods component)"
                            .into(),
                    ),
                    not_found: None,
                },
                WATCHED,
            );
            let watch = Watch {
                what: "pods",
                lists: lists.clone(),
                connect: connect.clone(),
                wake: wake.clone(),
                metrics: None,
                source: Some(source.clone()),
            };
            tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
            (store, lists, source)
        })
        .collect()
}

/// Whether a pod event can change a decision: only a change of what is kept (a pod
/// appearing, leaving, moving; its resourceVersion changes with every status update), on
/// a node waiting to start (any node when `nodes` is `None`). The lists' events always
/// count: a list's end wakes the first pass.
fn pod_relevance(
    waiting: Option<Waiting>,
) -> impl FnMut(&watcher::Event<SlimPod>, &Store<SlimPod>) -> bool {
    let waiting = move |pod: &SlimPod| {
        waiting
            .as_ref()
            .is_none_or(|w| w.on(pod.node_name.as_deref()))
    };
    move |event, cached| match event {
        watcher::Event::Apply(pod) => match cached.get(&reflector::ObjectRef::from_obj(pod)) {
            None => waiting(pod),
            Some(old) if (&old.node_name, old.blocks()) == (&pod.node_name, pod.blocks()) => false,
            Some(old) => waiting(&old) || waiting(pod),
        },
        watcher::Event::Delete(pod) => waiting(pod),
        _ => true,
    }
}

/// The pods keeping each node from starting, by node name, sorted; `stores[i]` holds the
/// pods of selector `i`.
pub fn by_node(stores: &[Store<SlimPod>]) -> HashMap<String, Vec<BlockingPod>> {
    let states: Vec<_> = stores.iter().map(Store::state).collect();
    group(
        states
            .iter()
            .enumerate()
            .flat_map(|(i, pods)| pods.iter().map(move |p| (i, &**p))),
    )
}

/// The pods keeping each node from starting, by node name, sorted, from pods each with
/// the index of the selector that matched it.
pub fn group<'a>(
    pods: impl IntoIterator<Item = (usize, &'a SlimPod)>,
) -> HashMap<String, Vec<BlockingPod>> {
    let mut out: HashMap<String, Vec<BlockingPod>> = HashMap::new();
    for (selector, pod) in pods {
        let Some(node) = pod.node_name.clone().filter(|_| pod.blocks()) else {
            continue;
        };
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        out.entry(node)
            .or_default()
            .push(BlockingPod { name, selector });
    }
    for pods in out.values_mut() {
        pods.sort();
        pods.dedup_by(|a, b| a.name == b.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::SlimNode;
    use serde_json::json;

    fn pod(name: &str, node: &str, phase: &str, version: &str) -> SlimPod {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "db", "resourceVersion": version },
            "spec": { "nodeName": node },
            "status": { "phase": phase },
        }))
        .unwrap()
    }

    #[test]
    fn a_pod_coming_or_going_wakes_a_pass_only_on_a_node_waiting_to_start() {
        let (nodes, mut node_cache) = reflector::store::<SlimNode>();
        for (name, conditions) in [
            (
                "waiting",
                json!([{ "type": "kured.dev/UnderMaintenance", "status": "True" },
                               { "type": "MaintenanceInProgress", "status": "False" }]),
            ),
            (
                "started",
                json!([{ "type": "kured.dev/UnderMaintenance", "status": "True" },
                               { "type": "MaintenanceInProgress", "status": "True" }]),
            ),
            (
                "idle",
                json!([{ "type": "kured.dev/UnderMaintenance", "status": "False" }]),
            ),
        ] {
            let node: SlimNode = serde_json::from_value(json!({
                "metadata": { "name": name }, "status": { "conditions": conditions },
            }))
            .unwrap();
            node_cache.apply_watcher_event(&watcher::Event::Apply(node));
        }
        let (pods, mut pod_cache) = reflector::store::<SlimPod>();
        let mut gated = pod_relevance(Some(Waiting {
            nodes: nodes.clone(),
            required: Vec::new(),
        }));
        let mut ungated = pod_relevance(None);
        // A node whose required condition is not True does not start whatever its pods.
        let mut requiring = pod_relevance(Some(Waiting {
            nodes,
            required: vec!["kured.dev/RebootRequired".into()],
        }));
        let mut sees = |event: watcher::Event<SlimPod>| {
            assert!(!requiring(&event, &pods) || matches!(event, watcher::Event::InitDone));
            let answer = (gated(&event, &pods), ungated(&event, &pods));
            pod_cache.apply_watcher_event(&event);
            answer
        };
        // Created: on a node waiting to start, on one in progress, on one idle, on one
        // kumaco has not seen.
        assert_eq!(
            sees(watcher::Event::Apply(pod("a", "waiting", "Running", "1"))),
            (true, true)
        );
        assert_eq!(
            sees(watcher::Event::Apply(pod("b", "started", "Running", "1"))),
            (false, true)
        );
        assert_eq!(
            sees(watcher::Event::Apply(pod("c", "idle", "Running", "1"))),
            (false, true)
        );
        assert_eq!(
            sees(watcher::Event::Apply(pod("d", "unknown", "Running", "1"))),
            (false, true)
        );
        // A status update keeps what is kept: nothing, wherever it is.
        assert_eq!(
            sees(watcher::Event::Apply(pod("a", "waiting", "Running", "2"))),
            (false, false)
        );
        // Gone (deleted, or finished and so out of the watch's selection).
        assert_eq!(
            sees(watcher::Event::Delete(pod("a", "waiting", "Running", "3"))),
            (true, true)
        );
        assert_eq!(
            sees(watcher::Event::Delete(pod("c", "idle", "Running", "2"))),
            (false, true)
        );
        // Lists always count.
        assert_eq!(sees(watcher::Event::InitDone), (true, true));
    }

    #[test]
    fn a_pod_is_kept_as_its_name_node_and_phase() {
        let pod: SlimPod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "postgres-0", "namespace": "db", "resourceVersion": "7",
                          "labels": { "app": "postgres" }, "annotations": { "a": "b" } },
            "spec": { "nodeName": "node-1", "containers": [{ "name": "c", "image": "i" }] },
            "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": "True" }] }
        }))
        .unwrap();
        assert_eq!(pod.node_name.as_deref(), Some("node-1"));
        assert!(pod.blocks());
        assert!(pod.metadata.labels.is_none(), "nothing else is kept");
        let done = SlimPod {
            phase: Some("Succeeded".into()),
            ..pod.clone()
        };
        assert!(!done.blocks());
        let unscheduled = SlimPod {
            node_name: None,
            ..pod
        };
        assert!(!unscheduled.blocks());
    }
}
