//! PodDisruptionBudgets as a drain meets them: whether every pod a drain of a node would
//! evict can be evicted now.
//!
//! An executor drains a node the moment it shows `MaintenanceInProgress=True`. A pod whose
//! budget allows no eviction refuses the drain (HTTP 429, retried for ever by kured's
//! daemon), and the node holds its slot, cordoned, until someone changes the budget. So
//! the brain starts a node only if the eviction API would let every such pod go now, by
//! the API server's own rules (its eviction subresource) and kubectl drain's:
//!
//! - a drain skips DaemonSet pods and mirror pods; the eviction API lets finished
//!   (`Succeeded`, `Failed`), `Pending` and terminating pods go without asking a budget;
//! - a pod selected by more than one budget is refused;
//! - a budget whose status is older than its spec (`observedGeneration` behind
//!   `generation`) refuses;
//! - a pod that is not Ready goes without using the budget when its budget says
//!   `unhealthyPodEvictionPolicy: AlwaysAllow`, or when the budget's application is
//!   healthy enough (`currentHealthy >= desiredHealthy > 0`);
//! - every other pod needs its budget to allow one more disruption.
//!
//! **Headroom is shared** ([`Headroom`]): a budget's `disruptionsAllowed` is what the
//! disruption controller last computed, so the pods still on nodes in progress (their
//! drain has not evicted them yet, or they are terminating and the controller may not
//! have counted them) and the pods of nodes started earlier in the same pass use it up.
//! Two nodes whose pods share a budget allowing one: one starts, the other waits. A node
//! with several pods under one budget needs one disruption to start; its drain evicts the
//! rest as the budget allows again.

use std::collections::BTreeMap;

use crate::selector::Selector;

/// A `PodDisruptionBudget`, as the eviction API reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub namespace: String,
    pub name: String,
    /// `spec.selector` as `LabelSelectorAsSelector` makes it; `None` when it is nil or
    /// invalid: it selects no pod, as in the eviction API.
    pub selector: Option<Selector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `(status.observedGeneration, metadata.generation)` when the status is older than
    /// the spec: the eviction API refuses until the disruption controller catches up.
    pub behind: Option<(i64, i64)>,
    /// `status.currentHealthy` and `status.desiredHealthy`.
    pub current_healthy: i32,
    pub desired_healthy: i32,
    /// `spec.unhealthyPodEvictionPolicy: AlwaysAllow`.
    pub always_allow_unhealthy: bool,
}

impl Budget {
    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The budgets of the cluster, by namespace.
#[derive(Clone, Debug, Default)]
pub struct Budgets {
    /// Each namespace's budgets, sorted by name.
    by_namespace: BTreeMap<String, Vec<Budget>>,
}

impl Budgets {
    pub fn new(budgets: impl IntoIterator<Item = Budget>) -> Budgets {
        let mut by_namespace: BTreeMap<String, Vec<Budget>> = BTreeMap::new();
        for b in budgets {
            by_namespace.entry(b.namespace.clone()).or_default().push(b);
        }
        for list in by_namespace.values_mut() {
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Budgets { by_namespace }
    }

    pub fn len(&self) -> usize {
        self.by_namespace.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// The budgets the evictions of a drain of a node with `pods` would ask, each once.
    pub fn asked_by<'b>(&'b self, pods: &'b [Pod]) -> Vec<&'b Budget> {
        let mut asked: Vec<&Budget> = pods
            .iter()
            .filter(|p| p.asks_budget())
            .flat_map(|p| self.selecting(p))
            .collect();
        asked.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        asked.dedup_by(|a, b| (&a.namespace, &a.name) == (&b.namespace, &b.name));
        asked
    }

    /// These budgets with `fresh` ones in place of those of the same namespace and name,
    /// and without the `gone` ones `(namespace, name)`.
    pub fn with_fresh(&self, fresh: Vec<Budget>, gone: &[(String, String)]) -> Budgets {
        let replaced = |b: &Budget| {
            fresh
                .iter()
                .any(|f| (&f.namespace, &f.name) == (&b.namespace, &b.name))
                || gone
                    .iter()
                    .any(|(ns, name)| (ns, name) == (&b.namespace, &b.name))
        };
        let kept: Vec<Budget> = self
            .by_namespace
            .values()
            .flatten()
            .filter(|b| !replaced(b))
            .cloned()
            .collect();
        Budgets::new(kept.into_iter().chain(fresh))
    }

    /// The budget `name` of namespace `ns`, if known.
    pub fn get(&self, ns: &str, name: &str) -> Option<&Budget> {
        self.by_namespace.get(ns)?.iter().find(|b| b.name == name)
    }

    /// The budgets selecting `pod`, in name order.
    fn selecting<'b>(&'b self, pod: &'b Pod) -> impl Iterator<Item = &'b Budget> + 'b {
        self.by_namespace
            .get(&pod.namespace)
            .into_iter()
            .flatten()
            .filter(|b| b.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)))
    }
}

/// A pod's phase, as far as a drain cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    /// `Unknown`, or anything else: the eviction API asks the budget.
    Other,
}

impl Phase {
    pub fn parse(phase: Option<&str>) -> Phase {
        match phase {
            Some("Pending") => Phase::Pending,
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            _ => Phase::Other,
        }
    }
}

/// A pod on a node, as a drain meets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub phase: Phase,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// Its `Ready` condition is True (the eviction API's "healthy").
    pub ready: bool,
    /// Owned by a DaemonSet: a drain leaves it.
    pub daemon_set: bool,
    /// A static pod's mirror (annotation `kubernetes.io/config.mirror`): a drain leaves it.
    pub mirror: bool,
}

impl Pod {
    /// Whether a drain's eviction of this pod asks its budget: not for pods a drain
    /// leaves, nor for those the eviction API lets go at once.
    pub fn asks_budget(&self) -> bool {
        !self.daemon_set
            && !self.mirror
            && !self.terminating
            && !matches!(
                self.phase,
                Phase::Pending | Phase::Succeeded | Phase::Failed
            )
    }

    /// Whether the pod, on a node in progress, may still use its budget's headroom: a
    /// drain will evict it, or evicted it and the disruption controller may not have
    /// counted that yet (it is terminating).
    fn on_its_way(&self) -> bool {
        !self.daemon_set
            && !self.mirror
            && !matches!(
                self.phase,
                Phase::Pending | Phase::Succeeded | Phase::Failed
            )
    }

    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Why a node may not start: the first pod, in namespace and name order, whose eviction
/// would be refused, and how many more would be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub pod: String,
    pub why: Why,
    pub more: usize,
}

/// Why the eviction API would refuse a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// Its budget allows no disruption (`taken_by`: the node whose pods use it up, if
    /// that is why).
    NoDisruption {
        budget: String,
        allowed: i32,
        taken_by: Option<String>,
    },
    /// It is not Ready, and its budget's application is not healthy enough to lose it.
    Unhealthy {
        budget: String,
        current: i32,
        desired: i32,
    },
    /// Several budgets select it.
    Several(Vec<String>),
    /// Its budget's status has not caught up with its spec.
    Behind {
        budget: String,
        observed: i64,
        generation: i64,
    },
}

impl std::fmt::Display for Refusal {
    /// As a condition message: the budget first (what an operator changes), then the pod.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.why {
            Why::NoDisruption {
                budget,
                allowed,
                taken_by: None,
            } => write!(
                f,
                "PodDisruptionBudget {budget} allows {allowed} disruptions (pod {})",
                self.pod
            )?,
            Why::NoDisruption {
                budget,
                allowed,
                taken_by: Some(node),
            } => write!(
                f,
                "PodDisruptionBudget {budget} allows {allowed} disruptions, used by node {node} \
                 (pod {})",
                self.pod
            )?,
            Why::Unhealthy {
                budget,
                current,
                desired,
            } => write!(
                f,
                "PodDisruptionBudget {budget} needs {desired} healthy pods and has {current} \
                 (pod {} is not Ready)",
                self.pod
            )?,
            Why::Several(budgets) => write!(
                f,
                "pod {} is selected by {} PodDisruptionBudgets ({}), which the eviction API \
                 refuses",
                self.pod,
                budgets.len(),
                budgets.join(", ")
            )?,
            Why::Behind {
                budget,
                observed,
                generation,
            } => write!(
                f,
                "PodDisruptionBudget {budget} has a status older than its spec \
                 (observedGeneration {observed} < generation {generation}) (pod {})",
                self.pod
            )?,
        }
        if self.more > 0 {
            write!(f, " (and {} more pods)", self.more)?;
        }
        Ok(())
    }
}

/// What the budgets allow in one pass: each budget's `disruptionsAllowed`, less what the
/// nodes in progress and the nodes started so far in the pass use.
#[derive(Clone, Debug, Default)]
pub struct Headroom {
    /// Per budget (`namespace/name`): the disruptions used, and the first node using one.
    used: BTreeMap<(String, String), (i32, String)>,
}

impl Headroom {
    /// Counts the pods of `node` against their budgets: a node in progress (`started`
    /// false: its pods not yet gone, terminating ones included), or one just started
    /// (every pod whose eviction asks a budget). A pod uses a disruption unless it goes
    /// without one (not Ready, and its budget lets such pods go).
    pub fn take(&mut self, budgets: &Budgets, node: &str, pods: &[Pod], started: bool) {
        for pod in pods {
            let counts = if started {
                pod.asks_budget()
            } else {
                pod.on_its_way()
            };
            if !counts {
                continue;
            }
            let mut selecting = budgets.selecting(pod);
            if let (Some(b), None) = (selecting.next(), selecting.next())
                && !goes_without(b, pod)
            {
                let used = self
                    .used
                    .entry((b.namespace.clone(), b.name.clone()))
                    .or_insert_with(|| (0, node.to_string()));
                used.0 += 1;
            }
        }
    }

    /// Whether every pod of a node a drain would evict could be evicted now (`Ok`), or the
    /// first refusal.
    pub fn check(&self, budgets: &Budgets, pods: &[Pod]) -> Result<(), Refusal> {
        let mut refusals: Vec<(String, Why)> = Vec::new();
        for pod in pods.iter().filter(|p| p.asks_budget()) {
            let selecting: Vec<&Budget> = budgets.selecting(pod).collect();
            let why = match selecting.as_slice() {
                [] => None,
                [b] => self.refuses(b, pod),
                several => Some(Why::Several(several.iter().map(|b| b.id()).collect())),
            };
            refusals.extend(why.map(|w| (pod.id(), w)));
        }
        refusals.sort_by(|a, b| a.0.cmp(&b.0));
        let more = refusals.len().saturating_sub(1);
        match refusals.into_iter().next() {
            None => Ok(()),
            Some((pod, why)) => Err(Refusal { pod, why, more }),
        }
    }

    fn refuses(&self, b: &Budget, pod: &Pod) -> Option<Why> {
        if let Some((observed, generation)) = b.behind {
            return Some(Why::Behind {
                budget: b.id(),
                observed,
                generation,
            });
        }
        if goes_without(b, pod) {
            return None;
        }
        let (used, by) = self
            .used
            .get(&(b.namespace.clone(), b.name.clone()))
            .map_or((0, None), |(n, by)| (*n, Some(by.clone())));
        let allowed = b.disruptions_allowed.max(0);
        if allowed - used > 0 {
            return None;
        }
        Some(if !pod.ready && allowed == 0 {
            Why::Unhealthy {
                budget: b.id(),
                current: b.current_healthy,
                desired: b.desired_healthy,
            }
        } else {
            Why::NoDisruption {
                budget: b.id(),
                allowed,
                taken_by: by.filter(|_| used > 0),
            }
        })
    }
}

/// Whether the eviction API lets `pod` go without using a disruption of `b`: it is not
/// Ready, and `b` lets unhealthy pods go, or its application is healthy enough.
fn goes_without(b: &Budget, pod: &Pod) -> bool {
    !pod.ready
        && (b.always_allow_unhealthy
            || (b.current_healthy >= b.desired_healthy && b.desired_healthy > 0))
}

#[cfg(test)]
mod tests;
