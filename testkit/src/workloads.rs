//! Workloads that behave, for the PodDisruptionBudget gate's tests: the real
//! kube-controller-manager's disruption controller computing every budget's status (and
//! its StatefulSet controller recreating evicted pods), and a stand-in for what the test
//! API server lacks: a scheduler and a kubelet for pods ([`PodRunner`]).
//!
//! The stand-in binds each new pod to its home node (a StatefulSet pod's local volume
//! lives there) once that node is Ready and uncordoned, and runs it: `Running` and
//! `Ready` as a kubelet reports once the containers start. A pod evicted from a node in
//! maintenance therefore comes back healthy only when its node does, as a local-volume
//! pod does.
//!
//! The drain's eviction round ([`evict_all`]), shared by kured's stand-in
//! ([`crate::kured`]) and kumaco-chaos's drainer ([`crate::chaos::lifecycle::Drainer`]):
//! every pod of a node but those a drain leaves ([`drain_leaves`]) evicted through the
//! eviction API, the refusals returned with the budgets that select the pod.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::ApiServer;
use crate::nodes::condition;
use crate::process::Owned;

/// The controller-manager's controllers these tests need: budgets' status, and pods
/// recreated as their StatefulSet asks.
pub const CONTROLLERS: &str = "disruption,statefulset";

/// The real kube-controller-manager, with [`CONTROLLERS`] only, on an API server.
pub struct ControllerManager {
    process: Mutex<Owned>,
}

impl ControllerManager {
    /// The controller-manager of the shared API server ([`ApiServer::shared`]), started on
    /// first use: one per test binary, as two would both write each budget's status.
    pub fn shared() -> &'static ControllerManager {
        static SHARED: OnceLock<ControllerManager> = OnceLock::new();
        SHARED.get_or_init(|| {
            ControllerManager::start(ApiServer::shared())
                .unwrap_or_else(|e| panic!("starting kube-controller-manager: {e:#}"))
        })
    }

    /// Starts one on `server`, with the admin's identity (no ServiceAccount per
    /// controller: nothing here creates their tokens).
    pub fn start(server: &ApiServer) -> Result<ControllerManager> {
        Ok(ControllerManager {
            process: Mutex::new(spawn(server)?),
        })
    }

    /// Starts it again if it has exited (it may give up while its API server is down);
    /// true when it did.
    pub fn ensure_running(&self, server: &ApiServer) -> Result<bool> {
        let mut process = self.process.lock().unwrap_or_else(|e| e.into_inner());
        if process.exited().is_none() {
            return Ok(false);
        }
        *process = spawn(server)?;
        Ok(true)
    }

    /// The end of its log, for a failure's message.
    pub fn log_tail(&self, lines: usize) -> String {
        let process = self.process.lock().unwrap_or_else(|e| e.into_inner());
        process.log_tail(lines)
    }
}

fn spawn(server: &ApiServer) -> Result<Owned> {
    let kube = crate::nodebins::kube_node()?;
    let mut command = Command::new(&kube.controller_manager);
    command
        .args([
            format!("--kubeconfig={}", server.kubeconfig().display()),
            format!("--controllers={CONTROLLERS}"),
            "--use-service-account-credentials=false".into(),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--v=1".into(),
        ])
        .stdin(Stdio::null());
    let log = server.dir().join("kube-controller-manager.log");
    Owned::spawn("kube-controller-manager", command, Some(&log))
}

/// How often the stand-in looks at the pods it runs: its pace, not synchronisation.
const PACE: Duration = Duration::from_millis(200);

/// A stand-in scheduler and kubelet for the pods of one namespace. Dropping it stops it.
pub struct PodRunner {
    task: JoinHandle<()>,
}

impl PodRunner {
    /// Runs the pods of `namespace`: a pod without a node is bound to `home(pod name)`
    /// once that node is Ready and uncordoned (a pod without a home stays pending); a
    /// bound pod that is not running yet, nor finished, is made `Running` and `Ready`.
    pub fn start(
        client: &kube::Client,
        namespace: &str,
        home: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> PodRunner {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let nodes: Api<Node> = Api::all(client.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = run_once(&pods, &nodes, &home).await {
                    eprintln!("pod runner: {e:#}");
                }
                tokio::time::sleep(PACE).await;
            }
        });
        PodRunner { task }
    }
}

impl Drop for PodRunner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run_once(
    pods: &Api<Pod>,
    nodes: &Api<Node>,
    home: &impl Fn(&str) -> Option<String>,
) -> Result<()> {
    let mut schedulable: BTreeMap<String, bool> = BTreeMap::new();
    for pod in pods.list(&ListParams::default()).await?.items {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        match node_name {
            None => {
                let Some(node) = home(&name) else { continue };
                let ok = match schedulable.get(&node) {
                    Some(ok) => *ok,
                    None => {
                        let ok = nodes.get_opt(&node).await?.is_some_and(|n| {
                            let ready = condition(&n, "Ready").is_some_and(|c| c.status == "True");
                            let cordoned =
                                n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
                            ready && !cordoned
                        });
                        schedulable.insert(node.clone(), ok);
                        ok
                    }
                };
                if ok {
                    bind(pods, &name, &node).await?;
                }
            }
            Some(_) if matches!(phase.as_deref(), Some("Running" | "Succeeded" | "Failed")) => {}
            Some(_) => run(pods, &name).await?,
        }
    }
    Ok(())
}

/// What a scheduler does: a Binding of the pod to the node.
async fn bind(pods: &Api<Pod>, pod: &str, node: &str) -> Result<()> {
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": { "name": pod },
        "target": { "apiVersion": "v1", "kind": "Node", "name": node },
    });
    match pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            pod,
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(()),
        // Bound meanwhile, or gone: the next look sees it.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("binding {pod} to {node}")),
    }
}

/// What a kubelet reports once the pod's containers run.
pub async fn run(pods: &Api<Pod>, pod: &str) -> Result<()> {
    set_phase(pods, pod, "Running", true).await
}

/// Sets a pod's phase and readiness, as its kubelet would report them.
pub async fn set_phase(pods: &Api<Pod>, pod: &str, phase: &str, ready: bool) -> Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let ready = if ready { "True" } else { "False" };
    let status = json!({ "status": {
        "phase": phase,
        "conditions": [
            { "type": "PodScheduled", "status": "True", "lastTransitionTime": now },
            { "type": "Ready", "status": ready, "lastTransitionTime": now },
        ],
    }});
    match pods
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("reporting {pod} {phase}")),
    }
}

/// An eviction the API server refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// `namespace/name`.
    pub pod: String,
    /// 429 (a budget allows no disruption now) or 500 (the pod is under two budgets).
    pub code: u16,
    pub message: String,
    /// The budgets of the pod's namespace whose `matchLabels` select it, as read just
    /// after the refusal: `namespace/name` and what their status said.
    pub budgets: Vec<String>,
}

/// One round of a drain of `node`: every pod on it that a drain does not leave
/// ([`drain_leaves`]) and that is not terminating already is evicted through the eviction
/// API, with grace period 0 (no kubelet here waits for containers). Returns the
/// evictions the API server refused; the caller retries them as a drain does. `client`
/// must not retry 429s itself ([`ApiServer::client_without_retries`]), or a refusal
/// takes minutes to come back.
pub async fn evict_all(client: &kube::Client, node: &str) -> Result<Vec<Refused>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let mut refused = Vec::new();
    for pod in pods
        .list(&on_node)
        .await
        .with_context(|| format!("listing the pods of {node}"))?
        .items
    {
        if drain_leaves(&pod) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let (Some(ns), Some(name)) = (pod.metadata.namespace, pod.metadata.name) else {
            continue;
        };
        if let Some((code, message)) = evict(client, &ns, &name).await? {
            let budgets = budgets_of(client, &ns, &labels)
                .await
                .unwrap_or_else(|e| vec![format!("(the budgets could not be read: {e:#})")]);
            refused.push(Refused {
                pod: format!("{ns}/{name}"),
                code,
                message,
                budgets,
            });
        }
    }
    Ok(refused)
}

/// Evicts one pod; `Some((code, message))` when the API server refuses (429 or 500),
/// `None` when it goes (or is gone already).
pub async fn evict(client: &kube::Client, ns: &str, name: &str) -> Result<Option<(u16, String)>> {
    // The Eviction by hand: kube's `Api::evict` spells the body's field
    // `delete_options`, which the API server ignores (the pod would then wait for a
    // kubelet for its grace period).
    let eviction = json!({
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": { "name": name, "namespace": ns },
        "deleteOptions": { "gracePeriodSeconds": 0 },
    });
    match Api::<Pod>::namespaced(client.clone(), ns)
        .create_subresource::<_, serde_json::Value>(
            "eviction",
            name,
            &PostParams::default(),
            &eviction,
        )
        .await
    {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(kube::Error::Api(e)) if e.code == 429 || e.code == 500 => Ok(Some((e.code, e.message))),
        Err(e) => Err(e).with_context(|| format!("evicting {ns}/{name}")),
    }
}

/// The budgets of `ns` whose `matchLabels` select `labels` (the workloads here use no
/// expressions), each with its status.
async fn budgets_of(
    client: &kube::Client,
    ns: &str,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<String>> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    for b in api.list(&ListParams::default()).await?.items {
        let wanted = b
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.match_labels.clone());
        let Some(wanted) = wanted else { continue };
        if wanted.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            let status = b.status.clone().unwrap_or_default();
            found.push(format!(
                "{ns}/{} (disruptionsAllowed {}, currentHealthy {}, desiredHealthy {}, \
                 observedGeneration {} of generation {})",
                b.metadata.name.unwrap_or_default(),
                status.disruptions_allowed.unwrap_or_default(),
                status.current_healthy.unwrap_or_default(),
                status.desired_healthy.unwrap_or_default(),
                status.observed_generation.unwrap_or_default(),
                b.metadata.generation.unwrap_or_default(),
            ));
        }
    }
    Ok(found)
}

/// Whether kubectl's drain leaves `pod` on the node: a DaemonSet's (with
/// `--ignore-daemonsets`, as kured drains) or a static pod's mirror.
pub fn drain_leaves(pod: &Pod) -> bool {
    let daemon = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    daemon || mirror
}
