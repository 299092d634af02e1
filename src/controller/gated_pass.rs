//! The pass with what it reads beside the nodes: the blocking pods, the gates' holds,
//! and the pods the PodDisruptionBudget gate lists when the pass asks for them, the pass
//! run again until what it asks for is known (or the rounds run out).

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;

use super::gates;
use super::gates::budgets::BudgetGate;
use super::reconcile::Shell;
use crate::budgets;
use crate::gates::{Gates, Hold};
use crate::in_progress::BlockingPod;
use crate::node::{SlimNode, view};
use crate::pass::{self, NodeView};

/// Most rounds of pod lists one pass waits for (the PodDisruptionBudget gate): each
/// round lists the nodes the pass asked for; a node held by its budget frees its slot
/// for the next one, which the next round lists. A pass that still asks after them
/// writes what it decided (none of the nodes it asked about starts) and runs again at
/// once.
const MAX_POD_LIST_ROUNDS: usize = 4;

impl Shell {
    /// The pass, with what the PodDisruptionBudget gate asks for: the pass asks for the
    /// pods of the nodes about to start and of those in progress; they are listed (by a
    /// replica that decides: `decides`), and the pass runs again with them, before
    /// anything is written. Then the budgets the nodes starting rely on are read again,
    /// fresh, and if one changed, the pass runs once more with them. A node whose pods
    /// are unknown does not start.
    pub(super) async fn pass_with_gates(
        &mut self,
        cached: &[Arc<SlimNode>],
        manager: &str,
        pods: &HashMap<String, Vec<BlockingPod>>,
        holds: &gates::Holds,
        decides: bool,
        now: Timestamp,
    ) -> Passed {
        let sources: Vec<_> = self.windows.sources.values().collect();
        let peers = self.peers.snapshot();
        let mut budgets = self.budgets.as_mut().map(BudgetGate::budgets);
        let mut drains: HashMap<String, Vec<budgets::Pod>> = HashMap::new();
        let mut rounds = 0;
        let mut list_failed = false;
        let mut confirmed = false;
        loop {
            let gates = Gates {
                cluster: &holds.cluster,
                budgets: budgets.as_deref(),
            };
            let beside = Beside {
                blocking: pods,
                holds: &holds.nodes,
                drains: &drains,
            };
            let outcome = pass::run(
                &self.rules,
                &sources,
                &self.windows.deleted,
                views(cached, manager, &beside),
                &self.writer.pending,
                &peers,
                &gates,
                now,
            );
            let Some(gate) = self.budgets.as_ref().filter(|_| decides) else {
                return Passed::of(outcome, drains, list_failed);
            };
            let missing: Vec<String> = outcome
                .needs_pods
                .iter()
                .filter(|n| !drains.contains_key(*n))
                .cloned()
                .collect();
            if !missing.is_empty() && rounds < MAX_POD_LIST_ROUNDS {
                rounds += 1;
                let listed = gate.list_pods(&missing).await;
                list_failed = listed.len() < missing.len();
                if !listed.is_empty() {
                    drains.extend(listed);
                    continue;
                }
            }
            if !confirmed && let Some(current) = &budgets {
                confirmed = true;
                let starting: Vec<&[budgets::Pod]> = outcome
                    .writes
                    .iter()
                    .filter(|w| w.starts_maintenance())
                    .filter_map(|w| drains.get(&w.node).map(Vec::as_slice))
                    .collect();
                if let Some(fresh) = gate.confirm(current, &starting).await {
                    budgets = Some(Arc::new(fresh));
                    continue;
                }
            }
            return Passed::of(outcome, drains, list_failed);
        }
    }
}

/// A pass's outcome, with the pods it listed for the PodDisruptionBudget gate, and
/// whether a list failed.
pub(super) struct Passed {
    pub(super) outcome: pass::Outcome,
    pub(super) drains: HashMap<String, Vec<budgets::Pod>>,
    pub(super) list_failed: bool,
}

impl Passed {
    fn of(
        outcome: pass::Outcome,
        drains: HashMap<String, Vec<budgets::Pod>>,
        list_failed: bool,
    ) -> Passed {
        Passed {
            outcome,
            drains,
            list_failed,
        }
    }
}

/// What a pass reads beside the nodes, by node name: the pods keeping each from starting
/// (`--block-pod-selector`), the gates' holds on it, and its pods as listed for the
/// PodDisruptionBudget gate.
pub(super) struct Beside<'a> {
    pub(super) blocking: &'a HashMap<String, Vec<BlockingPod>>,
    pub(super) holds: &'a HashMap<String, Vec<Hold>>,
    pub(super) drains: &'a HashMap<String, Vec<budgets::Pod>>,
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
