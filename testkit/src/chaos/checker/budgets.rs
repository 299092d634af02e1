//! The `--budgets` mode's promise: **no start whose drain a PodDisruptionBudget
//! refuses**. The drainer drains only the nodes kumaco started (`MaintenanceInProgress=True`
//! with `RebootRequired=True`) and reports every eviction the API server refuses (429: a
//! budget allows no disruption now; 500: the pod is under two budgets); each is a
//! violation, named with the node, the pod and the budgets that select it, as the
//! drainer read them just after the refusal.
//!
//! Nothing is excused as a race: the API server's eviction check reads the budget's
//! stored status (`disruptionsAllowed`, and `observedGeneration` against `generation`),
//! the same object kumaco's gate re-reads fresh before a start, and in the harness
//! nothing but the drains of nodes kumaco started uses a budget up (the workload's pods
//! turn unhealthy only by eviction; the one budget change only allows more).

use super::{Ctx, State};
use crate::workloads::Refused;

impl Ctx {
    pub(super) fn eviction_refused(&self, node: &str, refused: &Refused) {
        let mut s = self.state.lock().unwrap();
        s.counts.evictions_refused += 1;
        let seen = in_progress(&s, node);
        let budgets = if refused.budgets.is_empty() {
            "none selects it by matchLabels".to_string()
        } else {
            refused.budgets.join("; ")
        };
        self.violate(
            &mut s,
            format!(
                "a start whose drain a PodDisruptionBudget refuses: kumaco started node {node} \
                 ({seen}) and the eviction of pod {} was refused ({} {:?}); budgets: {budgets}",
                refused.pod, refused.code, refused.message
            ),
        );
    }
}

/// The node's `MaintenanceInProgress` in the checker's view.
fn in_progress(s: &State, node: &str) -> String {
    match s.nodes.get(node).and_then(|n| n.mip.as_ref()) {
        Some(c) if c.status == "True" => {
            let since = c.transition.map(|t| t.to_string()).unwrap_or_default();
            format!("MaintenanceInProgress=True since {since}")
        }
        other => format!(
            "MaintenanceInProgress {:?} in the checker's view, which may lag the drainer's",
            other.map(|c| c.status.clone())
        ),
    }
}
