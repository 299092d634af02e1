//! Pods for the brain's cost: a fleet of pods bound to the nodes, a few of
//! them matching kumaco's `--block-pod-selector`, and changes to pods and nodes at set
//! rates, for `kumaco-bench --pods`.
//!
//! - [`create_pods`]: pod `i` on node `i % nodes` (`spec.nodeName` set at creation: the
//!   test API server has no scheduler), then `status.phase=Running` (the API server
//!   ignores the status of a create). The matching ones (label [`APP_LABEL`] =
//!   [`BLOCKING_APP`]; the others have the same key with other values, so only the
//!   selector tells them apart) are on distinct nodes, spread over the fleet.
//! - [`create_budgets`]: PodDisruptionBudgets over them, as the disruption controller
//!   would show them (none runs here).
//! - changes to pods and nodes for [`super::Paced`] ([`non_matching_change`],
//!   [`matching_change`], [`heartbeat`], [`availability_change`]), at most
//!   [`IN_FLIGHT`] in flight.

use std::sync::Arc;

use anyhow::{Context, Result};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The label kumaco's `--block-pod-selector` reads.
pub const APP_LABEL: &str = "bench.kumaco.dev/app";
/// Its value on the matching pods.
pub const BLOCKING_APP: &str = "stateful-db";
/// The field manager of the pod churn.
pub const POD_MANAGER: &str = "churn-pods";
/// Requests in flight at most, in creation and in a churn.
pub const IN_FLIGHT: usize = 48;

/// `--block-pod-selector` for the matching pods.
pub fn blocking_selector() -> String {
    format!("{APP_LABEL}={BLOCKING_APP}")
}

/// The pods: `total` of them over `nodes` nodes, `matching` of them matching.
#[derive(Clone, Debug)]
pub struct PodFleet {
    pub namespace: String,
    pub nodes: Vec<String>,
    pub total: usize,
    pub matching: usize,
}

impl PodFleet {
    pub fn name(&self, i: usize) -> String {
        format!("p-{i:05}")
    }

    /// The node of pod `i`.
    pub fn node(&self, i: usize) -> &str {
        &self.nodes[i % self.nodes.len()]
    }

    /// Spacing of the matching pods: pod `k * stride` for `k < matching`, on distinct
    /// nodes while `matching <= nodes`.
    fn stride(&self) -> usize {
        (self.nodes.len() / self.matching.max(1)).max(1)
    }

    pub fn is_matching(&self, i: usize) -> bool {
        let stride = self.stride();
        i.is_multiple_of(stride) && i / stride < self.matching
    }

    /// Pod indices of the matching pods.
    pub fn matching_pods(&self) -> Vec<usize> {
        (0..self.matching.min(self.total))
            .map(|k| k * self.stride())
            .filter(|i| *i < self.total)
            .collect()
    }

    /// Pod indices of the others.
    pub fn other_pods(&self) -> Vec<usize> {
        (0..self.total).filter(|i| !self.is_matching(*i)).collect()
    }

    /// Pod `i` as created: bound to its node, one container.
    pub fn pod(&self, i: usize) -> Value {
        let app = if self.is_matching(i) {
            BLOCKING_APP.to_string()
        } else {
            format!("web-{:02}", i % 40)
        };
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name(i),
                "namespace": self.namespace,
                "labels": {
                    APP_LABEL: app,
                    "app.kubernetes.io/part-of": format!("team-{}", i % 7),
                    "pod-template-hash": format!("{:010x}", (i as u64).wrapping_mul(0x9e37_79b9)),
                },
            },
            "spec": {
                "nodeName": self.node(i),
                "containers": [{
                    "name": "app",
                    "image": format!("registry.example.com/apps/{app}:v1.{}", i % 5),
                    "resources": { "requests": { "cpu": "100m", "memory": "128Mi" } },
                }],
                "terminationGracePeriodSeconds": 30,
            },
        })
    }
}

/// The status a kubelet reports for a running pod; `tick` changes it.
fn running_status(tick: u64) -> Value {
    let now = Timestamp::now().to_string();
    json!({ "status": {
        "phase": "Running",
        "conditions": [
            { "type": "Ready", "status": "True", "lastTransitionTime": now },
            { "type": "bench.kumaco.dev/Probe", "status": "True",
              "lastTransitionTime": now, "reason": "Tick", "message": format!("tick {tick}") },
        ],
    }})
}

/// PodDisruptionBudgets over the fleet's pods, for the gate's memory and watch cost:
/// budget `k` selects the pods of app `web-(k % 40)` in team `k % 7` (so the 280 distinct
/// selectors cover every pod that does not match; budgets beyond 280 repeat them, as many
/// teams' budgets do), with the status the disruption controller would write: one
/// disruption allowed.
pub async fn create_budgets(client: &kube::Client, fleet: &PodFleet, count: usize) -> Result<f64> {
    let started = std::time::Instant::now();
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &fleet.namespace);
    futures::stream::iter(0..count)
        .map(|k| {
            let api = api.clone();
            async move {
                let name = format!("pdb-{k:04}");
                let budget: PodDisruptionBudget = serde_json::from_value(json!({
                    "metadata": { "name": name },
                    "spec": {
                        "minAvailable": "90%",
                        "selector": { "matchLabels": {
                            APP_LABEL: format!("web-{:02}", k % 40),
                            "app.kubernetes.io/part-of": format!("team-{}", k % 7),
                        } },
                    },
                }))?;
                api.create(&PostParams::default(), &budget)
                    .await
                    .with_context(|| format!("creating {name}"))?;
                let status = json!({ "status": {
                    "observedGeneration": 1, "disruptionsAllowed": 1,
                    "currentHealthy": 179, "desiredHealthy": 161, "expectedPods": 179,
                    "conditions": [{ "type": "DisruptionAllowed", "status": "True",
                        "reason": "SufficientPods", "message": "",
                        "observedGeneration": 1, "lastTransitionTime": Timestamp::now().to_string() }],
                }});
                let params = PatchParams {
                    field_manager: Some(POD_MANAGER.into()),
                    ..Default::default()
                };
                api.patch_status(&name, &params, &Patch::Merge(status))
                    .await
                    .with_context(|| format!("setting the status of {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed().as_secs_f64())
}

/// Creates the fleet's pods, [`IN_FLIGHT`] at a time, each a POST then a status patch
/// to `Running`. Returns the seconds it took.
pub async fn create_pods(client: &kube::Client, fleet: &PodFleet) -> Result<f64> {
    let started = std::time::Instant::now();
    let api: Api<Pod> = Api::namespaced(client.clone(), &fleet.namespace);
    futures::stream::iter(0..fleet.total)
        .map(|i| {
            let api = api.clone();
            async move { create_one(&api, fleet, i, 0).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed().as_secs_f64())
}

async fn create_one(api: &Api<Pod>, fleet: &PodFleet, i: usize, tick: u64) -> Result<()> {
    let name = fleet.name(i);
    let pod: Pod = serde_json::from_value(fleet.pod(i))?;
    api.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    set_running(api, &name, tick).await
}

async fn set_running(api: &Api<Pod>, name: &str, tick: u64) -> Result<()> {
    let params = PatchParams {
        field_manager: Some(POD_MANAGER.into()),
        ..Default::default()
    };
    api.patch_status(name, &params, &Patch::Strategic(running_status(tick)))
        .await
        .with_context(|| format!("setting the status of pod {name}"))?;
    Ok(())
}

/// Change `k` of the churn on the pods that do not match: in turn a label, an annotation
/// and a status update (a probe's condition), on pod `others[k % len]`.
pub fn non_matching_change(
    api: &Api<Pod>,
    fleet: &PodFleet,
    others: &[usize],
    k: u64,
) -> BoxFuture<'static, Result<&'static str, String>> {
    let name = fleet.name(others[k as usize % others.len()]);
    let api = api.clone();
    let params = PatchParams {
        field_manager: Some(POD_MANAGER.into()),
        ..Default::default()
    };
    async move {
        let (kind, result) = match k % 3 {
            0 => {
                let patch = json!({ "metadata": { "labels": { "bench.kumaco.dev/generation": k.to_string() } } });
                ("label", api.patch(&name, &params, &Patch::Merge(patch)).await)
            }
            1 => {
                let patch = json!({ "metadata": { "annotations": { "churn.example.com/tick": k.to_string() } } });
                ("annotation", api.patch(&name, &params, &Patch::Merge(patch)).await)
            }
            _ => (
                "status",
                api.patch_status(&name, &params, &Patch::Strategic(running_status(k)))
                    .await,
            ),
        };
        result.map(|_| kind).map_err(|e| e.to_string())
    }
    .boxed()
}

/// Change `k` of the churn on the matching pods, pod `matching[k % len]` on its
/// `k / len`-th visit: with `recreate_every = Some(r)`, one visit in `r` deletes it and
/// the next creates it again (on the same node, Pending until its next status update);
/// every other visit is a status update. Deletions and creations are what changes the
/// pods kumaco keeps; status updates are not.
pub fn matching_change(
    api: &Api<Pod>,
    fleet: &Arc<PodFleet>,
    matching: &[usize],
    recreate_every: Option<u64>,
    k: u64,
) -> BoxFuture<'static, Result<&'static str, String>> {
    let len = matching.len() as u64;
    let j = k % len;
    let i = matching[j as usize];
    let visit = k / len;
    let (api, fleet) = (api.clone(), fleet.clone());
    async move {
        let name = fleet.name(i);
        // A pod is created again only on the visit after the one that deleted it.
        let phase = recreate_every
            .map(|r| (visit + j) % r)
            .filter(|p| *p != 1 || visit > 0);
        match phase {
            Some(0) => api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
                .map(|_| "delete")
                .map_err(|e| e.to_string()),
            Some(1) => {
                let pod: Pod = serde_json::from_value(fleet.pod(i)).map_err(|e| e.to_string())?;
                api.create(&PostParams::default(), &pod)
                    .await
                    .map(|_| "create")
                    .map_err(|e| e.to_string())
            }
            _ => set_running(&api, &name, k)
                .await
                .map(|_| "status")
                .map_err(|e| format!("{e:#}")),
        }
    }
    .boxed()
}

/// Change `k` of a kubelet's heartbeats: the `lastHeartbeatTime` of node
/// `nodes[k % len]`'s Ready condition, nothing else.
pub fn heartbeat(
    api: &Api<Node>,
    nodes: &Arc<Vec<String>>,
    k: u64,
) -> BoxFuture<'static, Result<&'static str, String>> {
    let name = nodes[k as usize % nodes.len()].clone();
    let api = api.clone();
    async move {
        let patch = json!({ "status": { "conditions": [{
            "type": "Ready", "lastHeartbeatTime": Timestamp::now().to_string(),
        }]}});
        let params = PatchParams {
            field_manager: Some("churn-kubelet".into()),
            ..Default::default()
        };
        api.patch_status(&name, &params, &Patch::Strategic(patch))
            .await
            .map(|_| "heartbeat")
            .map_err(|e| e.to_string())
    }
    .boxed()
}

/// Change `k` of the availability churn, on node `nodes[(k / 2) % len]`: even changes
/// take it down (NotReady, or cordoned one time in two), odd ones bring it back.
pub fn availability_change(
    api: &Api<Node>,
    nodes: &Arc<Vec<String>>,
    k: u64,
) -> BoxFuture<'static, Result<&'static str, String>> {
    let name = nodes[(k / 2) as usize % nodes.len()].clone();
    let api = api.clone();
    let params = PatchParams {
        field_manager: Some("churn-availability".into()),
        ..Default::default()
    };
    let down = k.is_multiple_of(2);
    let cordon = (k / 2) % 2 == 1;
    async move {
        let now = Timestamp::now().to_string();
        let (kind, result) = if cordon {
            let value = if down { json!(true) } else { json!(null) };
            let patch = json!({ "spec": { "unschedulable": value } });
            (
                if down { "cordon" } else { "uncordon" },
                api.patch(&name, &params, &Patch::Merge(patch)).await,
            )
        } else {
            let status = if down { "False" } else { "True" };
            let patch = json!({ "status": { "conditions": [{
                "type": "Ready", "status": status, "reason": "Churn",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}});
            (
                if down { "not ready" } else { "ready" },
                api.patch_status(&name, &params, &Patch::Strategic(patch))
                    .await,
            )
        };
        result.map(|_| kind).map_err(|e| e.to_string())
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(nodes: usize, total: usize, matching: usize) -> PodFleet {
        PodFleet {
            namespace: "ns".into(),
            nodes: (0..nodes).map(|i| format!("n{i}")).collect(),
            total,
            matching,
        }
    }

    #[test]
    fn the_matching_pods_are_as_many_as_asked_on_distinct_nodes() {
        let f = fleet(5000, 50_000, 200);
        let matching = f.matching_pods();
        assert_eq!(matching.len(), 200);
        assert_eq!((0..f.total).filter(|i| f.is_matching(*i)).count(), 200);
        let nodes: std::collections::BTreeSet<&str> = matching.iter().map(|i| f.node(*i)).collect();
        assert_eq!(nodes.len(), 200);
        assert_eq!(f.other_pods().len(), 49_800);
        assert_eq!(
            f.pod(matching[7])["metadata"]["labels"][APP_LABEL],
            BLOCKING_APP
        );
        assert_ne!(f.pod(1)["metadata"]["labels"][APP_LABEL], BLOCKING_APP);
        let small = fleet(200, 1000, 20);
        assert_eq!(small.matching_pods().len(), 20);
    }
}
