//! The blocking pods (`--block-pod-selector`): a watch per selector that receives only
//! the pods it matches and only those scheduled and not finished (the label selector and
//! a field selector, both server-side: kumaco never receives every pod of a cluster),
//! each kept as its name, namespace and node. A pass reads them as, per node, the pods
//! keeping it from starting.
//!
//! A pod that finishes (Succeeded, Failed) leaves the watch's selection and arrives as a
//! deletion; one whose status changes otherwise (a container restart, a condition) is
//! the same slim pod and wakes no pass.

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

use super::watch::{LIST_PAGE, ListState, Watch, drive};
use super::writer::Backoff;
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

/// Starts one watch per `--block-pod-selector`, cluster-wide.
pub fn spawn(
    client: &Client,
    selectors: &[Selector],
    watch_timeout_secs: u32,
    wake: Arc<Notify>,
) -> Vec<(Store<SlimPod>, ListState)> {
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
            // Only a change of what is kept (a pod appearing, leaving, moving) matters;
            // its resourceVersion changes with every status update.
            let relevant = |event: &watcher::Event<SlimPod>, cached: &Store<SlimPod>| match event {
                watcher::Event::Apply(pod) => cached
                    .get(&reflector::ObjectRef::from_obj(pod))
                    .is_none_or(|old| {
                        (&old.node_name, old.blocks()) != (&pod.node_name, pod.blocks())
                    }),
                _ => true,
            };
            let lists = ListState::default();
            let watch = Watch {
                what: "pods",
                lists: lists.clone(),
                wake: wake.clone(),
                metrics: None,
            };
            tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
            (store, lists)
        })
        .collect()
}

/// The pods keeping each node from starting, by node name, sorted; `stores[i]` holds the
/// pods of selector `i`.
pub fn by_node(stores: &[Store<SlimPod>]) -> HashMap<String, Vec<BlockingPod>> {
    let mut out: HashMap<String, Vec<BlockingPod>> = HashMap::new();
    for (selector, store) in stores.iter().enumerate() {
        for pod in store.state() {
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
