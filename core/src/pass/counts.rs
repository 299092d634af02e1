//! What a pass counts for the metrics and logs: nodes by state, each owned condition by
//! status and reason (a bounded set), the oldest maintenance, wait and recovery, the
//! windows.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::Plan;
use super::writes::Write;
use crate::conditions::{
    Condition, MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, Status, UNDER_MAINTENANCE, find,
};
use crate::in_progress::{Group, Usage};
use crate::reasons;
use crate::window::WindowId;

/// Counts for metrics and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub in_scope: usize,
    pub under_maintenance: usize,
    pub in_progress: usize,
    pub planned: usize,
    pub active_windows: usize,
    /// Nodes by the state of each condition this instance owns once this pass's writes
    /// land (in scope, and out of scope with conditions still being relinquished).
    pub conditions: BTreeMap<ConditionState, usize>,
    /// `MaintenanceInProgress` slots (`--max-in-progress` for the nodes in scope); `None`
    /// without `--in-progress`.
    pub slots: Option<usize>,
    /// When the longest-running maintenance started (`MaintenanceInProgress=True` since).
    pub oldest_in_progress: Option<Timestamp>,
    /// When the longest-waiting node began waiting for a slot (`WaitingForSlot`): since
    /// it entered its window or its last required condition turned True, whichever is
    /// later. The condition's own lastTransitionTime cannot say: it stays at the last
    /// status change, and waiting is a reason, not a status.
    pub oldest_waiting: Option<Timestamp>,
    /// In-scope nodes unavailable (NotReady, Ready Unknown, cordoned).
    pub unavailable: usize,
    /// The slots overall once this pass's starts are written; `None` without
    /// `--in-progress`.
    pub usage: Option<Usage>,
    /// The same per group of `--max-in-progress-per`.
    pub groups: BTreeMap<Group, Usage>,
    /// When the maintenance of the longest-unrecovered node completed: among the nodes
    /// still unavailable after `MaintenanceCompleted` or `NodeRebooted`, the earliest
    /// completion.
    pub oldest_unrecovered: Option<Timestamp>,
}

/// A condition as counted in [`Counts::conditions`]. `reason` is one of kumaco's own
/// reasons ([`reasons::ALL`]) or `Other` (a reason written by someone else), so the set of states, and the
/// metric series built from it, is bounded whatever the nodes carry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConditionState {
    pub type_: &'static str,
    pub status: Status,
    pub reason: &'static str,
}

/// How a reason kumaco does not write is counted ([`reasons::ALL`] are its own).
pub const OTHER_REASON: &str = "Other";

/// One window ConfigMap as the pass saw it, for per-window metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowSummary {
    pub id: WindowId,
    pub valid: bool,
    pub blackout: bool,
    /// An occurrence is active now.
    pub active: bool,
    /// In-scope nodes the window selects while active (0 while inactive: selectors are
    /// matched against the nodes only for active windows, to keep a pass linear in them).
    pub selected: usize,
    /// The next occurrence's start, strictly after now.
    pub next_start: Option<Timestamp>,
}

/// Adds a node's conditions, as they will be once `write` (if any) lands, to the counts.
pub(super) fn tally(counts: &mut Counts, plan: &Plan, write: Option<&Write>, required: &[String]) {
    let conditions: Vec<&Condition> = match write {
        Some(w) => w.conditions.iter().collect(),
        // No write: the node already shows what kumaco wants.
        None => plan
            .current
            .iter()
            .filter(|c| {
                plan.owned.contains(&c.type_.as_str())
                    || plan.desired.iter().any(|d| d.type_ == c.type_)
            })
            .collect(),
    };
    for c in &conditions {
        let Some(type_) = [
            UNDER_MAINTENANCE,
            MAINTENANCE_IN_PROGRESS,
            MAINTENANCE_PLANNED,
        ]
        .into_iter()
        .find(|t| *t == c.type_) else {
            continue;
        };
        let reason = reasons::ALL
            .into_iter()
            .find(|r| *r == c.reason)
            .unwrap_or(OTHER_REASON);
        *counts
            .conditions
            .entry(ConditionState {
                type_,
                status: c.status,
                reason,
            })
            .or_default() += 1;
    }
    if plan.verdict.is_none() {
        return;
    }
    let since = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_)
            .and_then(|c| c.last_transition_time)
    };
    let Some(progress) = conditions
        .iter()
        .find(|c| c.type_ == MAINTENANCE_IN_PROGRESS)
    else {
        return;
    };
    if progress.is_true() {
        counts.oldest_in_progress =
            min_some(counts.oldest_in_progress, since(MAINTENANCE_IN_PROGRESS));
    } else if reasons::completes_maintenance(&progress.reason)
        && plan.node.availability.unavailable().is_some()
    {
        counts.oldest_unrecovered =
            min_some(counts.oldest_unrecovered, since(MAINTENANCE_IN_PROGRESS));
    } else if progress.reason == reasons::WAITING_FOR_SLOT {
        // Waiting implies UnderMaintenance=True and every required condition True.
        let required = required
            .iter()
            .filter_map(|t| find(&plan.current, t)?.last_transition_time);
        let waiting = since(UNDER_MAINTENANCE).into_iter().chain(required).max();
        counts.oldest_waiting = min_some(counts.oldest_waiting, waiting);
    }
}

pub(super) fn min_some(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
