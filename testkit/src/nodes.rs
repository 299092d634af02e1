//! Nodes without kubelets: created through the API, conditions set on `nodes/status`,
//! and watched by the harness's stand-ins ([`watch_nodes`]).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::{SCOPE_LABEL, Scope};

/// Creates node `scope.node_name(short)` carrying the scope label plus `labels`, then
/// sets `conditions` (type, status) on its status as an outside agent would.
pub async fn create_node(
    client: &kube::Client,
    scope: &Scope,
    short: &str,
    labels: &[(&str, &str)],
    conditions: &[(&str, &str)],
) -> Result<Node> {
    let name = scope.node_name(short);
    let mut all: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.insert(SCOPE_LABEL.into(), scope.value().into());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": all },
    }))?;
    let api: Api<Node> = Api::all(client.clone());
    let mut node = api
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("creating node {name}"))?;
    for (type_, status) in conditions {
        node = set_condition(client, &name, type_, status, "test-agent").await?;
    }
    Ok(node)
}

/// Sets one condition on a node's status the way a node agent does (strategic merge
/// patch keyed by condition type), as field manager `manager`. `lastTransitionTime` is
/// now when the status changes, else kept.
pub async fn set_condition(
    client: &kube::Client,
    node: &str,
    type_: &str,
    status: &str,
    manager: &str,
) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let transition = match condition(&api.get_status(node).await?, type_) {
        Some(c) if c.status == status => c.last_transition_time.clone().map(|t| t.0),
        _ => None,
    };
    let transition = transition.unwrap_or_else(Timestamp::now);
    set_condition_at(client, node, type_, status, manager, transition).await
}

/// Sets one condition on a node's status (strategic merge patch keyed by type, as a node
/// agent writes) with `last_transition_time` as given, whatever it was before.
pub async fn set_condition_at(
    client: &kube::Client,
    node: &str,
    type_: &str,
    status: &str,
    manager: &str,
    last_transition_time: Timestamp,
) -> Result<Node> {
    let patch = json!({
        "status": { "conditions": [{
            "type": type_,
            "status": status,
            "reason": "TestAgent",
            "message": "set by the test harness",
            "lastTransitionTime": Time(last_transition_time),
        }]}
    });
    Api::<Node>::all(client.clone())
        .patch_status(
            node,
            &PatchParams {
                field_manager: Some(manager.into()),
                ..Default::default()
            },
            &Patch::Strategic(patch),
        )
        .await
        .with_context(|| format!("setting {type_}={status} on node {node}"))
}

/// Merges `spec` into a node's spec (`{"unschedulable": true}` cordons it, as `kubectl
/// cordon` does).
pub async fn set_spec(client: &kube::Client, node: &str, spec: serde_json::Value) -> Result<Node> {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .with_context(|| format!("patching node {node}'s spec"))
}

/// Changes a node's labels (merge patch; a `None` value removes the label).
pub async fn set_labels(
    client: &kube::Client,
    node: &str,
    labels: &[(&str, Option<&str>)],
) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let map: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    Ok(api
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": map } })),
        )
        .await?)
}

/// The condition of `type_` on `node`, if any.
pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits (watching, not polling) until `check` holds for the condition of `type_` on
/// `node` (None = absent), or fails after `timeout` with the last state seen.
pub async fn wait_for_condition(
    client: &kube::Client,
    node: &str,
    type_: &str,
    timeout: Duration,
    check: impl Fn(Option<&NodeCondition>) -> bool,
) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let type_owned = type_.to_string();
    let cond = move |n: Option<&Node>| n.is_some_and(|n| check(condition(n, &type_owned)));
    match tokio::time::timeout(timeout, await_condition(api.clone(), node, cond)).await {
        Ok(Ok(Some(n))) => Ok(n),
        Ok(Ok(None)) => bail!("node {node} was deleted while waiting for {type_}"),
        Ok(Err(e)) => Err(e).context("watching node"),
        Err(_) => {
            let now = api.get(node).await.ok();
            bail!(
                "timed out after {timeout:?} waiting for condition {type_} on node {node}; it is \
                 now {:?}",
                now.as_ref().and_then(|n| condition(n, type_))
            )
        }
    }
}

/// Waits (as [`wait_for_condition`]) until the condition of `type_` on `node` has
/// `status`, and `reason` if one is given; that condition.
pub async fn wait_for_status(
    client: &kube::Client,
    node: &str,
    type_: &str,
    status: &str,
    reason: Option<&str>,
    timeout: Duration,
) -> Result<NodeCondition> {
    let found = wait_for_condition(client, node, type_, timeout, |c| {
        c.is_some_and(|c| {
            c.status == status && reason.is_none_or(|r| c.reason.as_deref() == Some(r))
        })
    })
    .await
    .with_context(|| format!("waiting for {type_}={status} (reason {reason:?}) on node {node}"))?;
    Ok(condition(&found, type_)
        .cloned()
        .expect("the check saw the condition"))
}

/// `status` is the condition's status ("True"/"False"/...), `None` absent.
pub fn has_status(c: Option<&NodeCondition>, status: Option<&str>) -> bool {
    c.map(|c| c.status.as_str()) == status
}

/// The condition's message contains `text`.
pub fn message_has(c: Option<&NodeCondition>, text: &str) -> bool {
    c.and_then(|c| c.message.as_deref())
        .is_some_and(|m| m.contains(text))
}

/// `lastTransitionTime` (whole seconds) is not before `edge` (a whole second).
pub fn transitioned_at_or_after(c: &NodeCondition, edge: Timestamp) -> bool {
    c.last_transition_time.as_ref().is_some_and(|t| t.0 >= edge)
}

/// The field managers of `node` (every entry of its managedFields).
pub fn managers(node: &Node) -> Vec<&str> {
    node.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect()
}

/// Watches the nodes matching label selector `selector` and hands every version listed
/// or changed to `on_node`, as the harness's stand-ins for a node's agents react to
/// them; returns the watch's task once it has listed the nodes, or an error naming
/// `who` if that takes longer than `timeout`. With kube's backoff: an API server down
/// for seconds (`kumaco-chaos` crashes it) must not make the watch retry in a busy loop;
/// a gap is re-listed, and the re-listed versions handed over again.
pub async fn watch_nodes(
    client: &kube::Client,
    selector: &str,
    timeout: Duration,
    who: &str,
    mut on_node: impl FnMut(&Node) + Send + 'static,
) -> Result<JoinHandle<()>> {
    let api: Api<Node> = Api::all(client.clone());
    let config = watcher::Config::default().labels(selector);
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed_tx = Some(listed_tx);
        let mut events = watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => on_node(&n),
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                }
                _ => {}
            }
        }
    });
    tokio::time::timeout(timeout, listed)
        .await
        .with_context(|| format!("{who}'s watch did not list the nodes in time"))?
        .with_context(|| format!("{who}'s watch stopped"))?;
    Ok(task)
}
