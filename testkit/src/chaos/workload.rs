//! The workload of kumaco-chaos's `--budgets` mode: pods on a fraction of the chaos
//! nodes and PodDisruptionBudgets over them, kept true by the real kube-controller-manager
//! (its disruption and StatefulSet controllers, [`crate::workloads::ControllerManager`],
//! on the run's private API server) and the stand-in scheduler and kubelet
//! ([`crate::workloads::PodRunner`]). Where everything lives is [`Layout`], from the
//! fleet's size only:
//!
//! - StatefulSets `spread-K` of 3 pods on 3 nodes of 3 zones (nodes `20K`, `20K+5`,
//!   `20K+10`), one per 20 nodes, each under a budget of `minAvailable: 2`: one
//!   disruption shared by three nodes;
//! - StatefulSet `frozen` of 2 pods (nodes 15 and 16) under a budget of `minAvailable: 2`
//!   that allows nothing until [`Workload::relax`] makes it 1 (its nodes wait, then
//!   complete);
//! - in namespace [`PINNED`], a DaemonSet's pod (owner reference kind DaemonSet) on every
//!   node `10J+2` and a finished pod (`Succeeded`) on every node `10J+7`, under a budget
//!   that never allows a disruption: a drain leaves the first and the eviction API lets
//!   the second go, so neither may hold a node.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::ApiServer;
use crate::fleet::create_namespace;
use crate::workloads::{ControllerManager, PodRunner, set_phase};

/// The StatefulSets' namespace (the stand-in runs its pods).
pub const APPS: &str = "chaos-apps";
/// The DaemonSet's and the finished pods' namespace (their phase is set here, once).
pub const PINNED: &str = "chaos-pinned";
/// The budget that allows nothing until relaxed.
pub const FROZEN: &str = "frozen";

/// A StatefulSet: its name (also its pods' `app` label and its budget's name) and each
/// ordinal's home node, by index in the fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub name: String,
    pub homes: Vec<usize>,
    /// The budget's `minAvailable`.
    pub min_available: i32,
}

/// Where every pod lives ([module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub sets: Vec<Set>,
    /// Nodes of the DaemonSet's pods and of the finished pods, by index.
    pub daemon_pods: Vec<usize>,
    pub finished_pods: Vec<usize>,
}

impl Layout {
    /// The layout for `nodes` nodes (at least 50; node `i` is in zone `i % 4`).
    pub fn new(nodes: usize) -> Layout {
        let mut sets: Vec<Set> = (0..(nodes / 20).max(1))
            .map(|k| Set {
                name: format!("spread-{k}"),
                homes: vec![20 * k, 20 * k + 5, 20 * k + 10],
                min_available: 2,
            })
            .collect();
        sets.push(Set {
            name: FROZEN.into(),
            homes: vec![15, 16],
            min_available: 2,
        });
        Layout {
            sets,
            daemon_pods: (0..nodes / 10).map(|j| 10 * j + 2).collect(),
            finished_pods: (0..nodes / 10).map(|j| 10 * j + 7).collect(),
        }
    }

    /// The nodes whose pods are under a budget that may refuse (kumaco may hold them).
    pub fn budgeted(&self) -> BTreeSet<usize> {
        self.sets.iter().flat_map(|s| s.homes.clone()).collect()
    }
}

/// The workload running. Dropping it stops the controller-manager and the stand-in.
pub struct Workload {
    client: kube::Client,
    kcm: ControllerManager,
    _runner: PodRunner,
    /// Times the controller-manager was found exited and started again.
    pub kcm_restarts: u64,
}

impl Workload {
    /// Creates the namespaces, pods and budgets of `layout` on `nodes` (the fleet's names,
    /// by index), starts the controller-manager and the stand-in, and waits until every
    /// budget's status is current and every StatefulSet pod runs.
    pub async fn start(
        server: &ApiServer,
        client: &kube::Client,
        layout: &Layout,
        nodes: &[String],
    ) -> Result<Workload> {
        create_namespace(client, APPS).await?;
        create_namespace(client, PINNED).await?;
        let kcm = ControllerManager::start(server)?;
        let homes: BTreeMap<String, String> = layout
            .sets
            .iter()
            .flat_map(|s| {
                s.homes
                    .iter()
                    .enumerate()
                    .map(move |(ordinal, &i)| (format!("{}-{ordinal}", s.name), nodes[i].clone()))
            })
            .collect();
        let runner = PodRunner::start(client, APPS, move |pod| homes.get(pod).cloned());
        let sets: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            APPS,
            &ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&()),
        );
        for s in &layout.sets {
            let set = json!({
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": { "name": s.name, "namespace": APPS },
                "spec": {
                    "replicas": s.homes.len(),
                    "podManagementPolicy": "Parallel",
                    "serviceName": s.name,
                    "selector": { "matchLabels": { "app": s.name } },
                    "template": {
                        "metadata": { "labels": { "app": s.name } },
                        "spec": { "containers": [{ "name": "c", "image": "registry.invalid/app" }] },
                    },
                },
            });
            sets.create(&PostParams::default(), &serde_json::from_value(set)?)
                .await
                .with_context(|| format!("creating StatefulSet {}", s.name))?;
            budget(client, APPS, &s.name, s.min_available).await?;
        }
        let pinned: Api<Pod> = Api::namespaced(client.clone(), PINNED);
        for (j, &i) in layout.daemon_pods.iter().enumerate() {
            let pod = bare_pod(&format!("agent-{j}"), &nodes[i], true)?;
            pinned.create(&PostParams::default(), &pod).await?;
            set_phase(&pinned, &format!("agent-{j}"), "Running", true).await?;
        }
        for (j, &i) in layout.finished_pods.iter().enumerate() {
            let pod = bare_pod(&format!("done-{j}"), &nodes[i], false)?;
            pinned.create(&PostParams::default(), &pod).await?;
            set_phase(&pinned, &format!("done-{j}"), "Succeeded", false).await?;
        }
        let pinned_count = layout.daemon_pods.len() + layout.finished_pods.len();
        budget(client, PINNED, "pinned", pinned_count as i32).await?;
        let workload = Workload {
            client: client.clone(),
            kcm,
            _runner: runner,
            kcm_restarts: 0,
        };
        workload.settled(layout, Duration::from_secs(120)).await?;
        Ok(workload)
    }

    /// Waits until every budget is current and allows what the layout says with every
    /// pod running: 1 for each spread set, 0 for the frozen set and the pinned pods.
    async fn settled(&self, layout: &Layout, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut wanted: Vec<(&str, &str, i32)> = layout
            .sets
            .iter()
            .map(|s| {
                (
                    APPS,
                    s.name.as_str(),
                    s.homes.len() as i32 - s.min_available,
                )
            })
            .collect();
        wanted.push((PINNED, "pinned", 0));
        loop {
            let mut behind = Vec::new();
            for (ns, name, allowed) in &wanted {
                let b = Api::<PodDisruptionBudget>::namespaced(self.client.clone(), ns)
                    .get(name)
                    .await?;
                let status = b.status.clone().unwrap_or_default();
                let current = status.observed_generation >= b.metadata.generation;
                if !current || status.disruptions_allowed.unwrap_or_default() != *allowed {
                    behind.push(format!("{ns}/{name}: {:?}", b.status));
                }
            }
            if behind.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "the budgets did not settle within {timeout:?}: {behind:?}; \
                     controller-manager log:\n{}",
                    self.kcm.log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The frozen budget allows one from now on (`minAvailable: 1`). Retried while the
    /// API server is down.
    pub async fn relax(&self) -> Result<()> {
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), APPS);
        let patch = Patch::Merge(json!({ "spec": { "minAvailable": 1 } }));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            match api.patch(FROZEN, &PatchParams::default(), &patch).await {
                Ok(_) => return Ok(()),
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(e).context("relaxing the frozen budget");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Starts the controller-manager again if it exited (after an API server crash);
    /// true when it did.
    pub fn ensure_running(&mut self, server: &ApiServer) -> Result<bool> {
        let restarted = self.kcm.ensure_running(server)?;
        self.kcm_restarts += u64::from(restarted);
        Ok(restarted)
    }
}

/// A budget of `minAvailable` over the pods labelled `app=NAME` in `ns`.
async fn budget(client: &kube::Client, ns: &str, name: &str, min_available: i32) -> Result<()> {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": ns },
        "spec": { "minAvailable": min_available,
                  "selector": { "matchLabels": { "app": name } } },
    }))?;
    Api::<PodDisruptionBudget>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pdb)
        .await
        .with_context(|| format!("creating budget {ns}/{name}"))?;
    Ok(())
}

/// A pod of the pinned budget bound to `node`: a DaemonSet's (`daemon`) or a finished
/// job's.
fn bare_pod(name: &str, node: &str, daemon: bool) -> Result<Pod> {
    let mut meta = json!({ "name": name, "namespace": PINNED, "labels": { "app": "pinned" } });
    if daemon {
        meta["ownerReferences"] = json!([{ "apiVersion": "apps/v1", "kind": "DaemonSet",
            "name": "agent", "uid": "00000000-0000-0000-0000-000000000001",
            "controller": true }]);
    }
    Ok(serde_json::from_value(json!({
        "metadata": meta,
        "spec": { "nodeName": node,
                  "containers": [{ "name": "c", "image": "registry.invalid/agent" }] },
    }))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_spreads_each_set_over_zones_and_keeps_the_pinned_pods_apart() {
        for n in [50, 60, 300] {
            let l = Layout::new(n);
            for s in &l.sets {
                assert!(s.homes.iter().all(|&i| i < n), "{n}: {s:?}");
                let zones: BTreeSet<usize> = s.homes.iter().map(|i| i % 4).collect();
                assert_eq!(
                    zones.len(),
                    s.homes.len(),
                    "{n}: {s:?} not in distinct zones"
                );
            }
            let budgeted = l.budgeted();
            let pinned: BTreeSet<usize> = l
                .daemon_pods
                .iter()
                .chain(&l.finished_pods)
                .copied()
                .collect();
            assert!(pinned.iter().all(|i| *i < n && !budgeted.contains(i)));
            assert_eq!(l.sets.iter().filter(|s| s.name == FROZEN).count(), 1);
        }
        assert_eq!(Layout::new(300).sets.len(), 16);
    }
}
