//! The pass with what it reads beside the nodes: the blocking pods, the gates' holds,
//! and the pods the PodDisruptionBudget gate lists when the pass asks for them, the pass
//! run again until what it asks for is known (or the rounds run out).
//!
//! What the gate cannot read shows on the nodes that need it: a node whose pods cannot
//! be listed, or whose drain asks a budget that cannot be read again before its start,
//! does not start and says why (`GateUnavailable`); a node in progress whose pods cannot
//! be listed leaves the headroom unknown, which holds every start.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;

use super::gates::budgets::{self, BudgetGate};
use super::windows::WindowCache;
use crate::conditions::{MAINTENANCE_IN_PROGRESS, is_true};
use crate::gates::{Hold, Holds};
use crate::in_progress::BlockingPod;
use crate::node::{SlimNode, view};
use crate::pass::{self, NodeView, Pending, Rules};
use crate::peers::Peers;

/// Most rounds of pod lists one pass waits for (the PodDisruptionBudget gate): each
/// round lists the nodes the pass asked for; a node held by its budget frees its slot
/// for the next one, which the next round lists. A pass that still asks after them
/// writes what it decided (none of the nodes it asked about starts) and runs again at
/// once.
const MAX_POD_LIST_ROUNDS: usize = 4;

/// What a pass reads, borrowed from the shell.
pub(super) struct Inputs<'a> {
    pub rules: &'a Rules,
    pub windows: &'a WindowCache,
    pub pending: &'a HashMap<String, Pending>,
    pub peers: &'a Peers,
    pub cached: &'a [Arc<SlimNode>],
    /// This instance's field manager.
    pub manager: &'a str,
    /// The pods keeping each node from starting (`--block-pod-selector`).
    pub blocking: &'a HashMap<String, Vec<BlockingPod>>,
    /// The gates' holds, from their sources.
    pub holds: &'a Holds,
    pub now: Timestamp,
}

/// A pass's outcome, with the pods it listed for the PodDisruptionBudget gate, the holds
/// it decided with (the sources' and what the gate could not read), and whether a list
/// failed.
pub(super) struct Passed {
    pub(super) outcome: pass::Outcome,
    pub(super) drains: HashMap<String, Vec<crate::budgets::Pod>>,
    pub(super) holds: Holds,
    pub(super) list_failed: bool,
}

/// The pass, with what the PodDisruptionBudget gate asks for: the pass asks for the pods
/// of the nodes about to start and of those in progress; they are listed (by a replica
/// that decides: `decides`), and the pass runs again with them, before anything is
/// written. Then the budgets the nodes starting rely on are read again, fresh, and if
/// one changed or could not be read, the pass runs once more with that. A node whose
/// pods are unknown does not start.
pub(super) async fn pass_with_gates(
    inputs: &Inputs<'_>,
    mut gate: Option<&mut BudgetGate>,
    decides: bool,
) -> Passed {
    let sources: Vec<_> = inputs.windows.sources.values().collect();
    let mut budgets = gate.as_deref_mut().map(BudgetGate::budgets);
    let mut drains: HashMap<String, Vec<crate::budgets::Pod>> = HashMap::new();
    // What the gate could not read, as holds beside the sources'.
    let mut unread: Holds = Holds::default();
    let mut rounds = 0;
    let mut list_failed = false;
    let mut confirmed = false;
    loop {
        let holds = with(inputs.holds, &unread);
        let gates = holds.gates(budgets.as_deref());
        let beside = Beside {
            blocking: inputs.blocking,
            holds: &holds.nodes,
            drains: &drains,
        };
        let outcome = pass::run(
            inputs.rules,
            &sources,
            &inputs.windows.deleted,
            views(inputs.cached, inputs.manager, &beside),
            inputs.pending,
            inputs.peers,
            &gates,
            inputs.now,
        );
        let Some(gate) = gate.as_deref().filter(|_| decides) else {
            return Passed::of(outcome, drains, holds.into_owned(), list_failed);
        };
        let missing: Vec<String> = outcome
            .needs_pods
            .iter()
            .filter(|n| !drains.contains_key(*n) && !unread.nodes.contains_key(*n))
            .cloned()
            .collect();
        if !missing.is_empty() && rounds < MAX_POD_LIST_ROUNDS {
            rounds += 1;
            let in_progress = in_progress(inputs.cached);
            let mut progress = false;
            for (node, listed) in gate.list_pods(&missing).await {
                progress = true;
                match listed {
                    Ok(pods) => {
                        drains.insert(node, pods);
                    }
                    Err(error) => {
                        list_failed = true;
                        if in_progress.contains(node.as_str()) {
                            // Its evictions to come are unknown: so is every budget's
                            // headroom.
                            unread
                                .cluster
                                .push(budgets::unreadable(&error, Some(&node)));
                        } else {
                            unread
                                .nodes
                                .entry(node)
                                .or_default()
                                .push(budgets::unreadable(&error, None));
                        }
                    }
                }
            }
            if progress {
                continue;
            }
        }
        if !confirmed && let Some(current) = &budgets {
            confirmed = true;
            let starting: Vec<(&String, &[crate::budgets::Pod])> = outcome
                .writes
                .iter()
                .filter(|w| w.starts_maintenance())
                .filter_map(|w| drains.get(&w.node).map(|p| (&w.node, p.as_slice())))
                .collect();
            let pods: Vec<&[crate::budgets::Pod]> = starting.iter().map(|(_, p)| *p).collect();
            let found = gate.confirm(current, &pods).await;
            let mut again = false;
            for ((ns, name), error) in &found.unread {
                for (node, pods) in &starting {
                    if current
                        .asked_by(pods)
                        .iter()
                        .any(|b| (&b.namespace, &b.name) == (ns, name))
                    {
                        unread
                            .nodes
                            .entry((*node).clone())
                            .or_default()
                            .push(budgets::unreadable(error, None));
                        again = true;
                    }
                }
            }
            if let Some(fresh) = found.fresh {
                budgets = Some(Arc::new(fresh));
                again = true;
            }
            if again {
                continue;
            }
        }
        return Passed::of(outcome, drains, holds.into_owned(), list_failed);
    }
}

impl Passed {
    fn of(
        outcome: pass::Outcome,
        drains: HashMap<String, Vec<crate::budgets::Pod>>,
        holds: Holds,
        list_failed: bool,
    ) -> Passed {
        Passed {
            outcome,
            drains,
            holds,
            list_failed,
        }
    }
}

/// The sources' holds with what the PodDisruptionBudget gate could not read after them
/// (it is the last gate); the sources' own when it read everything.
fn with<'a>(holds: &'a Holds, unread: &Holds) -> Cow<'a, Holds> {
    if unread.cluster.is_empty() && unread.nodes.is_empty() {
        return Cow::Borrowed(holds);
    }
    let mut merged = holds.clone();
    merged.cluster.extend(unread.cluster.iter().cloned());
    for (node, h) in &unread.nodes {
        merged
            .nodes
            .entry(node.clone())
            .or_default()
            .extend(h.iter().cloned());
    }
    Cow::Owned(merged)
}

/// The nodes in progress, by name.
fn in_progress(cached: &[Arc<SlimNode>]) -> HashSet<&str> {
    cached
        .iter()
        .filter(|n| is_true(&n.conditions, MAINTENANCE_IN_PROGRESS))
        .filter_map(|n| n.metadata.name.as_deref())
        .collect()
}

/// What a pass reads beside the nodes, by node name: the pods keeping each from starting
/// (`--block-pod-selector`), the gates' holds on it, and its pods as listed for the
/// PodDisruptionBudget gate.
pub(super) struct Beside<'a> {
    pub(super) blocking: &'a HashMap<String, Vec<BlockingPod>>,
    pub(super) holds: &'a HashMap<String, Vec<Hold>>,
    pub(super) drains: &'a HashMap<String, Vec<crate::budgets::Pod>>,
}

/// The cached nodes as the pass reads them, with what it reads beside each.
pub(super) fn views<'a>(
    cached: &'a [Arc<SlimNode>],
    manager: &'a str,
    beside: &'a Beside<'a>,
) -> impl Iterator<Item = NodeView<'a>> {
    cached.iter().map(move |n| {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let pods = beside.blocking.get(name).map_or(&[][..], Vec::as_slice);
        NodeView {
            holds: beside.holds.get(name).map_or(&[][..], Vec::as_slice),
            drain: beside.drains.get(name).map(Vec::as_slice),
            ..view(n, manager, pods)
        }
    })
}
