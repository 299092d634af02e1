//! The PodDisruptionBudget gate's sources: every budget of the cluster, watched and kept
//! as the eviction API reads it; and the pods of a node, listed when a pass asks for them
//! (`Outcome::needs_pods`: the nodes about to start and those in progress).
//!
//! Pods are not watched: a cluster's pods change all day, and only a node about to start
//! needs its own, at that moment. A pass reaches the gate only for a node that would start
//! otherwise (a slot free, nothing else holding it), so a pod change anywhere costs
//! nothing, and a pass that starts nobody lists nothing. The lists are consistent reads
//! (`resourceVersion` unset): a pod scheduled a moment ago is in them. A budget change
//! wakes a pass only while some node waits to start.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Deserializer};
use tokio::sync::Notify;
use tracing::warn;

use super::super::Connect;
use super::super::sources::{Hints, Source, Sources};
use super::super::watch::{LIST_PAGE, ListState, WATCHED, Waiting, Watch, drive};
use super::super::writer::Backoff;
use crate::budgets::{Budget, Budgets, Phase, Pod};
use crate::gates::{Failure, Gate, Hold, SourceError};
use crate::metrics::Metrics;
use crate::reasons;
use crate::selector::Selector;
use crate::selector::object::{Expression, LabelSelectorObject, to_selector};

/// Nodes whose pods are listed at once.
const CONCURRENT_LISTS: usize = 8;

/// The longest one node's pod list may take; a node whose pods could not be listed does
/// not start in this pass.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// A PodDisruptionBudget as the gate keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct SlimBudget {
    /// Name, namespace and resourceVersion only.
    pub metadata: ObjectMeta,
    pub budget: Budget,
}

impl<'de> Deserialize<'de> for SlimBudget {
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
            #[serde(default)]
            generation: i64,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Spec {
            selector: Option<WireSelector>,
            unhealthy_pod_eviction_policy: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct WireSelector {
            match_labels: Option<BTreeMap<String, String>>,
            match_expressions: Option<Vec<WireExpression>>,
        }
        #[derive(Deserialize)]
        struct WireExpression {
            key: Option<String>,
            operator: Option<String>,
            values: Option<Vec<String>>,
        }
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct Status {
            #[serde(default)]
            disruptions_allowed: i32,
            #[serde(default)]
            current_healthy: i32,
            #[serde(default)]
            desired_healthy: i32,
            #[serde(default)]
            observed_generation: i64,
        }
        let wire = Wire::deserialize(deserializer)?;
        let spec = wire.spec;
        let status = wire.status.unwrap_or_default();
        let (selector, policy) = match spec {
            Some(s) => (s.selector, s.unhealthy_pod_eviction_policy),
            None => (None, None),
        };
        // As the eviction API: a nil selector, or one that does not convert, selects
        // no pod.
        let selector: Option<Selector> = selector.and_then(|s| {
            to_selector(&LabelSelectorObject {
                match_labels: s.match_labels.unwrap_or_default(),
                match_expressions: s
                    .match_expressions
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| Expression {
                        key: e.key.unwrap_or_default(),
                        operator: e.operator.unwrap_or_default(),
                        values: e.values.unwrap_or_default(),
                    })
                    .collect(),
            })
            .ok()
        });
        let generation = wire.metadata.generation;
        let budget = Budget {
            namespace: wire.metadata.namespace.clone().unwrap_or_default(),
            name: wire.metadata.name.clone().unwrap_or_default(),
            selector,
            disruptions_allowed: status.disruptions_allowed,
            behind: (status.observed_generation < generation)
                .then_some((status.observed_generation, generation)),
            current_healthy: status.current_healthy,
            desired_healthy: status.desired_healthy,
            always_allow_unhealthy: policy.as_deref() == Some("AlwaysAllow"),
        };
        Ok(SlimBudget {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                namespace: wire.metadata.namespace,
                resource_version: wire.metadata.resource_version,
                ..ObjectMeta::default()
            },
            budget,
        })
    }
}

impl kube::Resource for SlimBudget {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "PodDisruptionBudget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "policy".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "poddisruptionbudgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A pod of a node's list, as a drain meets it.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedPod {
    /// Name and namespace only.
    pub metadata: ObjectMeta,
    pub pod: Pod,
}

impl<'de> Deserialize<'de> for ListedPod {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            metadata: Meta,
            #[serde(default)]
            status: Option<Status>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            #[serde(default)]
            labels: Option<BTreeMap<String, String>>,
            #[serde(default)]
            annotations: Option<BTreeMap<String, serde::de::IgnoredAny>>,
            deletion_timestamp: Option<serde::de::IgnoredAny>,
            #[serde(default)]
            owner_references: Option<Vec<Owner>>,
        }
        #[derive(Deserialize)]
        struct Owner {
            kind: Option<String>,
            controller: Option<bool>,
        }
        #[derive(Deserialize)]
        struct Status {
            phase: Option<String>,
            #[serde(default)]
            conditions: Option<Vec<PodCondition>>,
        }
        #[derive(Deserialize)]
        struct PodCondition {
            #[serde(rename = "type")]
            type_: Option<String>,
            status: Option<String>,
        }
        let wire = Wire::deserialize(deserializer)?;
        let meta = wire.metadata;
        let (phase, conditions) = wire
            .status
            .map(|s| (s.phase, s.conditions.unwrap_or_default()))
            .unwrap_or_default();
        let pod = Pod {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            phase: Phase::parse(phase.as_deref()),
            terminating: meta.deletion_timestamp.is_some(),
            ready: conditions.iter().any(|c| {
                c.type_.as_deref() == Some("Ready") && c.status.as_deref() == Some("True")
            }),
            // kubectl drain leaves the pods a DaemonSet controls, and mirror pods.
            daemon_set: meta
                .owner_references
                .unwrap_or_default()
                .iter()
                .any(|o| o.kind.as_deref() == Some("DaemonSet") && o.controller == Some(true)),
            mirror: meta
                .annotations
                .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror")),
        };
        Ok(ListedPod {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                ..ObjectMeta::default()
            },
            pod,
        })
    }
}

impl kube::Resource for ListedPod {
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

/// The gate's budgets and the way to list a node's pods.
pub struct BudgetGate {
    store: Store<SlimBudget>,
    /// The budgets as last converted, and the store's objects they came from (held, so
    /// that an object the store replaced cannot reappear at the same address), so that
    /// they are converted for a pass only after a change.
    built: Option<(Vec<Arc<SlimBudget>>, Arc<Budgets>)>,
    client: Client,
    source: Source,
    metrics: Arc<Metrics>,
}

/// The rights the gate needs, as a node's message names them when they are missing.
const RIGHTS: &str = "kumaco needs `list watch` on poddisruptionbudgets and `list` on pods, \
                      cluster-wide (the chart grants them with inProgress.podDisruptionBudgets; \
                      kustomize: the components/disruption-budgets component), or \
                      --pod-disruption-budgets=false";

/// A node whose pods could not be listed, or a budget that could not be read again:
/// what the node that needs it shows. `in_progress`: the node in progress whose pods
/// could not be listed, which leaves every budget's headroom unknown and so holds every
/// start.
pub fn unreadable(error: &SourceError, in_progress: Option<&str>) -> Hold {
    let hint = match error.failure {
        Failure::Forbidden => format!("; {RIGHTS}"),
        _ => String::new(),
    };
    let what = match in_progress {
        None => "what a drain of this node meets".to_string(),
        Some(node) => format!("the pods of node {node}, in progress"),
    };
    Hold {
        reason: reasons::GATE_UNAVAILABLE,
        message: crate::conditions::bounded(
            format!(
                "the PodDisruptionBudget gate cannot read {what} ({}), so no maintenance \
                 starts: {}{hint}",
                error.failure.name(),
                error.message
            ),
            MAX_MESSAGE_BYTES,
        ),
    }
}

/// The longest message of a node the gate cannot decide for, in bytes: it quotes the
/// API server's answer.
const MAX_MESSAGE_BYTES: usize = 512;

/// What [`BudgetGate::confirm`] found of the budgets the nodes that start rely on.
#[derive(Debug, Default)]
pub struct Confirmed {
    /// The budgets with the ones that changed, if one did.
    pub fresh: Option<Budgets>,
    /// The budgets that could not be read again, and why: a node whose drain asks one
    /// does not start.
    pub unread: Vec<((String, String), SourceError)>,
}

impl BudgetGate {
    /// Starts the budgets' watch, cluster-wide, recorded in a source of its own: a right
    /// missing or revoked holds every start (`GateUnavailable`), naming the right.
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        client: &Client,
        connect: &Connect,
        watch_timeout_secs: u32,
        wake: Arc<Notify>,
        waiting: Option<Waiting>,
        sources: &Sources,
        metrics: Arc<Metrics>,
    ) -> (BudgetGate, ListState) {
        let (store, cache) = reflector::store::<SlimBudget>();
        let config = watcher::Config::default()
            .page_size(LIST_PAGE)
            .timeout(watch_timeout_secs);
        let stream = move |client: Client| {
            watcher(Api::<SlimBudget>::all(client), config.clone()).backoff(Backoff::default())
        };
        let relevant = relevance(waiting);
        let lists = ListState::default();
        let source = sources.add(
            Gate::PodDisruptionBudgets,
            "the PodDisruptionBudgets",
            Hints {
                forbidden: Some(RIGHTS.into()),
                not_found: None,
            },
            WATCHED,
        );
        let watch = Watch {
            what: "poddisruptionbudgets",
            lists: lists.clone(),
            connect: connect.clone(),
            wake,
            metrics: None,
            source: Some(source.clone()),
        };
        tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
        let gate = BudgetGate {
            store,
            built: None,
            client: client.clone(),
            source,
            metrics,
        };
        (gate, lists)
    }

    /// The gate's source, for the fence.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The writers' client from now on (a new leader lists on new connections).
    pub fn use_client(&mut self, client: Client) {
        self.client = client;
    }

    /// The budgets as the store holds them, converted again only after a change.
    pub fn budgets(&mut self) -> Arc<Budgets> {
        let state = self.store.state();
        if let Some((from, built)) = &self.built
            && from.len() == state.len()
            && from.iter().zip(&state).all(|(a, b)| Arc::ptr_eq(a, b))
        {
            return built.clone();
        }
        let budgets = Arc::new(Budgets::new(state.iter().map(|b| b.budget.clone())));
        self.metrics.gates.budgets.set(budgets.len() as i64);
        self.built = Some((state, budgets.clone()));
        budgets
    }

    /// Lists the pods of `nodes`, a few at a time: each node's pods, or why they could
    /// not be listed (the node does not start in this pass, and says why).
    pub async fn list_pods(
        &self,
        nodes: &[String],
    ) -> HashMap<String, Result<Vec<Pod>, SourceError>> {
        let lists = futures::stream::iter(nodes.iter().cloned())
            .map(|node| async move {
                let listed = tokio::time::timeout(LIST_TIMEOUT, pods_on(&self.client, &node)).await;
                (node, listed)
            })
            .buffer_unordered(CONCURRENT_LISTS)
            .collect::<Vec<_>>()
            .await;
        let mut out = HashMap::new();
        for (node, listed) in lists {
            let result = match listed {
                Ok(Ok(pods)) => Ok(pods),
                Ok(Err(e)) => Err(SourceError {
                    failure: crate::kubeclient::failure(&e),
                    message: format!("listing its pods: {}", crate::kubeclient::describe(&e)),
                }),
                Err(_) => Err(SourceError {
                    failure: Failure::Unreachable,
                    message: format!("listing its pods: no answer within {LIST_TIMEOUT:?}"),
                }),
            };
            self.source
                .count(result.as_ref().map(drop).map_err(|e| e.failure));
            if let Err(error) = &result {
                warn!(%node, error = %error.message,
                      "could not list the node's pods for the PodDisruptionBudget gate: it does not start now");
            }
            out.insert(node, result);
        }
        out
    }

    /// Reads again, fresh, the budgets a drain of the nodes that start would ask
    /// (`starting`: their pods). The pods were listed fresh; the budgets come from a
    /// watch that may be a moment behind them (an eviction on a node in progress
    /// decrements its budget just before its pod goes), and a start must not count a
    /// disruption the eviction already took. A budget that cannot be read again holds
    /// the nodes whose drain asks it.
    pub async fn confirm(&self, budgets: &Budgets, starting: &[&[Pod]]) -> Confirmed {
        let mut asked: Vec<(String, String)> = starting
            .iter()
            .flat_map(|pods| budgets.asked_by(pods))
            .map(|b| (b.namespace.clone(), b.name.clone()))
            .collect();
        asked.sort();
        asked.dedup();
        if asked.is_empty() {
            return Confirmed::default();
        }
        let reads = futures::stream::iter(asked)
            .map(|(ns, name)| async move {
                let api = Api::<SlimBudget>::namespaced(self.client.clone(), &ns);
                let read = tokio::time::timeout(LIST_TIMEOUT, api.get_opt(&name)).await;
                (ns, name, read)
            })
            .buffer_unordered(CONCURRENT_LISTS)
            .collect::<Vec<_>>()
            .await;
        let (mut fresh, mut gone, mut unread) = (Vec::new(), Vec::new(), Vec::new());
        for (ns, name, read) in reads {
            let cached = budgets.get(&ns, &name);
            let error = match read {
                Ok(Ok(Some(b))) => {
                    if Some(&b.budget) != cached {
                        fresh.push(b.budget);
                    }
                    None
                }
                Ok(Ok(None)) => {
                    gone.push((ns.clone(), name.clone()));
                    None
                }
                Ok(Err(e)) => Some(SourceError {
                    failure: crate::kubeclient::failure(&e),
                    message: format!(
                        "reading PodDisruptionBudget {ns}/{name} again before the start: {}",
                        crate::kubeclient::describe(&e)
                    ),
                }),
                Err(_) => Some(SourceError {
                    failure: Failure::Unreachable,
                    message: format!(
                        "reading PodDisruptionBudget {ns}/{name} again before the start: no \
                         answer within {LIST_TIMEOUT:?}"
                    ),
                }),
            };
            self.source
                .count(error.as_ref().map_or(Ok(()), |e| Err(e.failure)));
            if let Some(error) = error {
                warn!(%ns, %name, error = %error.message,
                      "could not read a PodDisruptionBudget again before a start: the nodes it asks do not start now");
                unread.push(((ns, name), error));
            }
        }
        Confirmed {
            fresh: (!fresh.is_empty() || !gone.is_empty())
                .then(|| budgets.with_fresh(fresh, &gone)),
            unread,
        }
    }
}

/// Every pod on `node`, in pages.
async fn pods_on(client: &Client, node: &str) -> Result<Vec<Pod>, kube::Error> {
    let api = Api::<ListedPod>::all(client.clone());
    let mut params = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .limit(500);
    let mut pods = Vec::new();
    loop {
        let page = api.list(&params).await?;
        pods.extend(page.items.into_iter().map(|p| p.pod));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(pods),
        }
    }
}

/// Whether a budget event can change a decision: a change of what the gate reads, while
/// a node waits to start (any time when `waiting` is `None`).
fn relevance(
    waiting: Option<Waiting>,
) -> impl FnMut(&watcher::Event<SlimBudget>, &Store<SlimBudget>) -> bool {
    move |event, cached| {
        let changed = match event {
            watcher::Event::Apply(b) => cached
                .get(&reflector::ObjectRef::from_obj(b))
                .is_none_or(|old| old.budget != b.budget),
            watcher::Event::Delete(_) => true,
            // The lists: their end wakes a pass of its own.
            _ => false,
        };
        changed && waiting.as_ref().is_none_or(Waiting::anyone)
    }
}

#[cfg(test)]
mod tests;
