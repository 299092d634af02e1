//! The in-progress decision: which nodes may be disrupted now (`MaintenanceInProgress`).
//!
//! kured v2 drains and reboots a node when this condition is True, so a wrong answer
//! reboots production nodes. The rules (contract §5), as a pure function of the nodes'
//! state, the time and the policy:
//!
//! - **start** when UnderMaintenance, every required condition True, no blocking one True,
//!   enough of the window left (`--start-cutoff`) and a slot free;
//! - **continue** while every required condition stays True, past the window end and
//!   despite blockers (finish what was started); without required conditions, until the
//!   window ends; `--stop-at-window-end` ends it at the window end in any case; a
//!   blackout stops new starts, never maintenance in progress (its window is still
//!   active underneath);
//! - **ceiling**: starts only into free slots, counting every node already True
//!   (including ones ending in this pass: a slot is reused only in a later pass, once the
//!   end is written); never preempts;
//! - **order**: oldest first by the latest `lastTransitionTime` of the required
//!   conditions, ties by node name.

use jiff::{SignedDuration, Timestamp};

use crate::conditions::{Condition, Desired, MAINTENANCE_IN_PROGRESS, find, is_true};
use crate::reasons;

/// The concurrency ceiling: a count, or a percentage of the nodes in scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ceiling {
    Count(u32),
    Percent(u32),
}

/// The deployer's rules (`--require-condition`, `--block-condition`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub required: Vec<String>,
    pub blocking: Vec<String>,
    pub ceiling: Ceiling,
    pub stop_at_window_end: bool,
    pub start_cutoff: SignedDuration,
}

impl Policy {
    /// The number of slots for `in_scope` nodes: a percentage rounds down, but is at
    /// least 1 so that a small pool still makes progress.
    pub fn slots(&self, in_scope: usize) -> usize {
        match self.ceiling {
            Ceiling::Count(n) => n as usize,
            Ceiling::Percent(p) => (in_scope * p as usize / 100).max(1),
        }
    }
}

/// An in-scope node as the decision sees it.
#[derive(Clone, Debug)]
pub struct NodeState<'a> {
    pub name: &'a str,
    /// Set while the node is UnderMaintenance: the windows (for the message) and when
    /// their span ends (for the start cutoff; `None`: no end in sight).
    pub window: Option<(String, Option<Timestamp>)>,
    /// A maintenance window selecting the node is active, even if a blackout suspends it:
    /// maintenance in progress ends with its window, not with a blackout.
    pub window_active: bool,
    /// The blackouts suspending maintenance on the node now, if any (for the "why not").
    pub blackout: Option<String>,
    /// The node's conditions (as kumaco last wrote or saw them).
    pub conditions: &'a [Condition],
}

/// `MaintenanceInProgress` for each node (same order as `nodes`); `None` where the node
/// should not carry the condition.
pub fn decide(policy: &Policy, nodes: &[NodeState], now: Timestamp) -> Vec<Option<Desired>> {
    let slots = policy.slots(nodes.len());
    let in_progress = nodes
        .iter()
        .filter(|n| is_true(n.conditions, MAINTENANCE_IN_PROGRESS))
        .count();
    let mut out: Vec<Option<Desired>> = vec![None; nodes.len()];
    let mut candidates: Vec<(Option<Timestamp>, &str, usize)> = Vec::new();

    for (i, node) in nodes.iter().enumerate() {
        let existing = find(node.conditions, MAINTENANCE_IN_PROGRESS);
        let missing = policy
            .required
            .iter()
            .find(|t| !is_true(node.conditions, t));
        if let Some(current) = existing.filter(|c| c.is_true()) {
            out[i] = Some(if let Some(t) = missing {
                desired(
                    false,
                    reasons::MAINTENANCE_COMPLETED,
                    format!("{t} is no longer True"),
                )
            } else if !node.window_active
                && (policy.stop_at_window_end || policy.required.is_empty())
            {
                desired(
                    false,
                    reasons::MAINTENANCE_WINDOW_ENDED,
                    "the maintenance window ended".into(),
                )
            } else {
                Desired::keep(current)
            });
            continue;
        }
        let Some((_, until)) = &node.window else {
            // Outside any window, or suspended by a blackout: a "why not" answer says so;
            // anything else (completed, ended, absent) stays as it is.
            out[i] = match (existing, &node.blackout) {
                (Some(c), Some(b)) if is_why_not(c) => Some(why_not(
                    existing,
                    reasons::MAINTENANCE_BLACKOUT,
                    format!("new starts suspended by blackout {b}"),
                )),
                (Some(c), None) if is_why_not(c) || c.reason == reasons::MAINTENANCE_BLACKOUT => {
                    Some(desired(
                        false,
                        reasons::NO_ACTIVE_MAINTENANCE_WINDOW,
                        "no active maintenance window selects this node".into(),
                    ))
                }
                (other, _) => other.map(Desired::keep),
            };
            continue;
        };
        let blocker = policy.blocking.iter().find(|t| is_true(node.conditions, t));
        out[i] = if let Some(t) = missing {
            // A completed maintenance is a better answer than "requirement not met" for a
            // node that no longer needs one.
            Some(match existing {
                Some(c) if !c.is_true() && c.reason == reasons::MAINTENANCE_COMPLETED => {
                    Desired::keep(c)
                }
                _ => why_not(
                    existing,
                    reasons::REQUIREMENT_NOT_MET,
                    format!("waiting for {t} to be True"),
                ),
            })
        } else if let Some(t) = blocker {
            Some(why_not(
                existing,
                reasons::BLOCKED,
                format!("blocked by {t}"),
            ))
        } else if until.is_some_and(|u| u.duration_since(now) < policy.start_cutoff) {
            Some(why_not(
                existing,
                reasons::START_CUTOFF,
                format!(
                    "less than {} of the window left",
                    fmt_duration(policy.start_cutoff)
                ),
            ))
        } else {
            let age = policy
                .required
                .iter()
                .filter_map(|t| find(node.conditions, t)?.last_transition_time)
                .max();
            candidates.push((age, node.name, i));
            None
        };
    }

    // Oldest requirement first; None (no required conditions) sorts first, then by name.
    candidates.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let free = slots.saturating_sub(in_progress);
    let used = in_progress + free.min(candidates.len());
    for (rank, (_, _, i)) in candidates.into_iter().enumerate() {
        let node = &nodes[i];
        let existing = find(node.conditions, MAINTENANCE_IN_PROGRESS);
        out[i] = Some(if rank < free {
            let windows = node
                .window
                .as_ref()
                .map(|w| w.0.as_str())
                .unwrap_or_default();
            let because = if policy.required.is_empty() {
                String::new()
            } else {
                format!("; {} True", policy.required.join(", "))
            };
            desired(
                true,
                reasons::MAINTENANCE_WINDOW,
                format!("maintenance started in {windows}{because}"),
            )
        } else {
            why_not(
                existing,
                reasons::WAITING_FOR_SLOT,
                format!("{used}/{slots} slots in use"),
            )
        });
    }
    out
}

fn desired(status: bool, reason: &str, message: String) -> Desired {
    Desired::new(MAINTENANCE_IN_PROGRESS, status, reason, message)
}

/// A False "why not" condition, rewritten only when its reason changes (the message of
/// `WaitingForSlot` changes with every start and end elsewhere).
fn why_not(existing: Option<&Condition>, reason: &str, message: String) -> Desired {
    match existing {
        Some(c) if !c.is_true() && c.reason == reason => Desired::keep(c),
        _ => desired(false, reason, message),
    }
}

fn is_why_not(c: &Condition) -> bool {
    !c.is_true()
        && matches!(
            c.reason.as_str(),
            reasons::WAITING_FOR_SLOT
                | reasons::BLOCKED
                | reasons::REQUIREMENT_NOT_MET
                | reasons::START_CUTOFF
        )
}

fn fmt_duration(d: SignedDuration) -> String {
    crate::duration::GoDuration::from_nanos(
        d.as_nanos().clamp(i64::MIN as i128, i64::MAX as i128) as i64
    )
    .to_string()
}

#[cfg(test)]
mod tests;
