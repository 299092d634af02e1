//! One pass: from what the cluster shows (window ConfigMaps, nodes with their conditions
//! and which condition types this instance owns, recently deleted windows), kumaco's own
//! writes the cache has not shown yet, the rules and the clock, to the node writes and
//! the events that should happen now.
//!
//! Pure: no kube, k8s-openapi or tokio. The controller watches, calls [`run`], writes
//! what it returns and records the writes as [`Pending`]. Because everything is derived
//! from the inputs, a freshly started or newly elected kumaco makes exactly the writes
//! and events one that never stopped would (events by name, see `announce`), and a pass
//! over the state the last one left writes nothing and posts nothing new.
//!
//! In parts: [`writes`] (what a write to a node carries and changes, our pending
//! writes), [`contests`] (other instances: contests, giving nodes up), [`counts`] (what
//! the metrics and logs count); the pass itself is here.

mod contests;
mod counts;
mod writes;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use jiff::{SignedDuration, Timestamp};

pub use contests::{Contest, Deferred};
use contests::{contest, give_up, others};
use counts::tally;
pub use counts::{ConditionState, Counts, OTHER_REASON, WindowSummary};
pub use writes::{PENDING_TTL, Pending, Recorded, Write, first_writes, overlay};
use writes::{Planned, plan_write};

use crate::announce::{self, Announcement, Deleted, WindowSource};
use crate::budgets;
use crate::conditions::{
    self, Condition, Desired, MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE, find,
};
use crate::decision::{self, ActiveWindows, InWindow, Progress, Verdict};
use crate::gates::{Gates, Hold};
use crate::in_progress::{self, Availability, BlockingPod, NodeState, Policy};
use crate::peers::{self, LeaseRef, Owner, Peers};
use crate::reasons;
use crate::selector::{Labels, Selector};
use crate::window::{Window, WindowId};

/// The deployer's settings that decide conditions.
#[derive(Clone, Debug)]
pub struct Rules {
    /// The nodes this instance manages (`--node-selector`).
    pub node_selector: Selector,
    /// Names this instance: its field manager. Event names include it.
    pub instance: String,
    /// `--in-progress` and its flags.
    pub in_progress: Option<Policy>,
    /// `--planned-lead-time`.
    pub planned_lead_time: Option<SignedDuration>,
    /// `--resync-interval`: in a contest, how often this instance may rewrite what
    /// another changed ([`peers::rewrite_allowed_at`]).
    pub resync: SignedDuration,
}

impl Rules {
    /// The condition types this instance decides on in-scope nodes.
    fn decides(&self, type_: &str) -> bool {
        type_ == UNDER_MAINTENANCE
            || (type_ == MAINTENANCE_IN_PROGRESS && self.in_progress.is_some())
            || (type_ == MAINTENANCE_PLANNED && self.planned_lead_time.is_some())
    }
}

/// A node as the pass reads it.
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    pub name: &'a str,
    /// Names the node's events (`node_events`): a node re-created under the same name is
    /// another node.
    pub uid: &'a str,
    pub labels: &'a dyn Labels,
    pub resource_version: Option<u64>,
    pub conditions: &'a [Condition],
    /// The condition types this instance's field manager owns on the node's status
    /// (from managedFields).
    pub owned: &'a [String],
    /// When this instance last changed the node's status (its managedFields entry).
    pub owned_since: Option<Timestamp>,
    /// The field managers owning kumaco's condition types on the node (this instance's
    /// own entry, if listed, is skipped).
    pub owners: &'a [Owner],
    /// Its `Ready` status and `spec.unschedulable`.
    pub availability: Availability,
    /// The pods keeping it from starting (`--block-pod-selector`), sorted.
    pub pods: &'a [BlockingPod],
    /// `status.nodeInfo.bootID` (`None`: empty or absent).
    pub boot_id: Option<&'a str>,
    /// The health gates' verdicts on this node alone (an alert naming it).
    pub holds: &'a [Hold],
    /// Its pods, when listed for the PodDisruptionBudget gate ([`Outcome::needs_pods`]).
    pub drain: Option<&'a [budgets::Pod]>,
}

/// What a pass decided.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub writes: Vec<Write>,
    /// Events that should exist (the shell creates those it has not seen exist).
    pub events: Vec<Announcement>,
    /// Pending writes the cache has caught up with: forget them.
    pub settled: Vec<String>,
    /// Nodes two instances claim ([`Contest`]), by node name.
    pub contested: Vec<Contest>,
    /// Writes held back by the contest bound.
    pub deferred: Vec<Deferred>,
    /// The Leases of the kumaco instances owning conditions on the nodes this instance
    /// decides or gives up: the shell reads them into [`Peers`].
    pub leases: BTreeSet<LeaseRef>,
    /// Of those, the ones to read again now: giving a node up waits for a fresh copy.
    pub refresh: BTreeSet<LeaseRef>,
    pub counts: Counts,
    /// Every window ConfigMap, in the order given.
    pub windows: Vec<WindowSummary>,
    /// When the answer changes next by the clock alone.
    pub next_edge: Option<Timestamp>,
    /// Nodes whose pods the PodDisruptionBudget gate needs and was not given (nodes in
    /// progress, nodes about to start): none of them started in this pass. The shell
    /// lists their pods and runs the pass again before it writes; the writes of this
    /// outcome are safe too (they start no node whose pods are unknown).
    pub needs_pods: Vec<String>,
}

/// One node's state and the conditions wanted on it.
struct Plan<'a> {
    node: NodeView<'a>,
    current: Cow<'a, [Condition]>,
    /// The resourceVersion `current` is as of.
    based_on: Option<u64>,
    owned: Vec<&'a str>,
    desired: Vec<Desired>,
    /// Owned types given up to a live co-owner.
    drops: Vec<String>,
    /// `Some` for an in-scope node.
    verdict: Option<Verdict<'a>>,
}

/// The pass. `windows` are the ConfigMaps now watched; `pending` is keyed by node name;
/// `peers` are the other instances' Leases as last read; `gates` the health gates'
/// verdicts beyond each node's own.
#[allow(clippy::too_many_arguments)]
pub fn run<'a>(
    rules: &Rules,
    windows: &[&'a WindowSource],
    deleted: &[Deleted],
    nodes: impl IntoIterator<Item = NodeView<'a>>,
    pending: &'a HashMap<String, Pending>,
    peers: &Peers,
    gates: &Gates,
    now: Timestamp,
) -> Outcome {
    let valid: Vec<&Window> = windows
        .iter()
        .filter_map(|s| s.window.as_ref().ok())
        .collect();
    let active = ActiveWindows::with_lead(valid.iter().copied(), now, rules.planned_lead_time);
    let mut outcome = Outcome {
        next_edge: [
            decision::next_edge(valid.iter().copied(), now, rules.planned_lead_time),
            peers.next_change(now),
        ]
        .into_iter()
        .flatten()
        .min(),
        ..Outcome::default()
    };
    outcome.counts.active_windows = active.iter().count();

    let mut selected: HashMap<&WindowId, usize> = HashMap::new();
    let mut plans: Vec<Plan> = Vec::new();
    for node in nodes {
        let (current, settled) = overlay(pending.get(node.name), &node, now);
        if settled {
            outcome.settled.push(node.name.to_string());
        }
        let based_on = match pending.get(node.name) {
            Some(p) if !settled => p.resource_version,
            _ => node.resource_version,
        };
        // Ours: what managedFields says, and what we wrote that the cache may not show.
        let mut owned: Vec<&str> = node.owned.iter().map(String::as_str).collect();
        if let Some(p) = pending.get(node.name).filter(|_| !settled) {
            owned.extend(p.conditions.iter().map(|c| c.type_.as_str()));
            owned.retain(|t| !p.dropped.iter().any(|d| d == t));
            owned.sort();
            owned.dedup();
        }
        let in_scope = rules.node_selector.matches(node.labels);
        if in_scope || !owned.is_empty() {
            outcome.leases.extend(
                others(&node, rules)
                    .filter(|o| peers::is_kumaco(&o.manager))
                    .filter_map(|o| peers::lease_of(&o.manager)),
            );
        }
        if in_scope {
            outcome.counts.in_scope += 1;
            outcome.counts.unavailable += usize::from(node.availability.unavailable().is_some());
            for (w, _) in active.iter() {
                if w.selector.matches(node.labels) {
                    *selected.entry(&w.id).or_default() += 1;
                }
            }
            let verdict = active.verdict(node.labels);
            if verdict.is_maintenance() {
                outcome.counts.under_maintenance += 1;
            }
            let mut desired: Vec<Desired> =
                decision::under_maintenance(&verdict, find(&current, UNDER_MAINTENANCE))
                    .into_iter()
                    .collect();
            // Types this instance owns but no longer decides: nothing True stays.
            let stale: Vec<&Condition> = current
                .iter()
                .filter(|c| owned.contains(&c.type_.as_str()) && !rules.decides(&c.type_))
                .collect();
            let (given_up, drops) = give_up(
                &stale,
                &node,
                rules,
                (peers, &mut outcome.refresh),
                now,
                reasons::CONDITION_NOT_MANAGED,
                "this kumaco instance no longer decides this condition",
            );
            desired.extend(given_up);
            plans.push(Plan {
                node,
                current,
                based_on,
                owned,
                desired,
                drops,
                verdict: Some(verdict),
            });
        } else if !owned.is_empty() {
            // Out of scope, whenever it left: read from ownership, not remembered.
            let ours: Vec<&Condition> = current
                .iter()
                .filter(|c| owned.contains(&c.type_.as_str()))
                .collect();
            let (desired, drops) = give_up(
                &ours,
                &node,
                rules,
                (peers, &mut outcome.refresh),
                now,
                reasons::NODE_OUT_OF_SCOPE,
                "the node no longer matches this kumaco instance's --node-selector",
            );
            plans.push(Plan {
                node,
                current,
                based_on,
                owned,
                desired,
                drops,
                verdict: None,
            });
        }
    }

    let (progress, decided) = decide_in_progress(rules, &mut plans, gates, now);
    if let Some(mut d) = decided {
        outcome.needs_pods = std::mem::take(&mut d.needs_pods)
            .into_iter()
            .map(|i| plans[i].node.name.to_string())
            .collect();
        outcome.next_edge = [outcome.next_edge, d.next_start]
            .into_iter()
            .flatten()
            .min();
        outcome.counts.usage = Some(d.overall);
        outcome.counts.groups = d.groups;
    }
    for (plan, progress) in plans.iter_mut().zip(progress) {
        if progress == Some(Progress::Started) && rules.in_progress.is_some() {
            outcome.counts.in_progress += 1;
        }
        let (Some(verdict), Some(progress)) = (&plan.verdict, progress) else {
            continue;
        };
        if rules.planned_lead_time.is_none() {
            continue;
        }
        let requirement_met = rules.in_progress.as_ref().is_none_or(|p| {
            p.required
                .iter()
                .all(|t| conditions::is_true(&plan.current, t))
        });
        let next = active
            .next_planned(plan.node.labels)
            .filter(|_| requirement_met);
        let existing = find(&plan.current, MAINTENANCE_PLANNED);
        if let Some(d) = decision::planned(next, verdict, progress, existing) {
            if d.status {
                outcome.counts.planned += 1;
            }
            plan.desired.push(d);
        }
    }

    outcome.counts.slots = rules
        .in_progress
        .as_ref()
        .map(|p| p.slots(outcome.counts.in_scope));
    let required = rules
        .in_progress
        .as_ref()
        .map_or(&[][..], |p| p.required.as_slice());
    for plan in &plans {
        let planned = plan_write(plan, rules, peers, now);
        if plan.verdict.is_some() {
            outcome
                .contested
                .extend(contest(plan, planned.deferred(), rules, peers, now));
        }
        let write = match planned {
            Planned::Write(w) => Some(w),
            Planned::Nothing => None,
            Planned::Deferred(d) => {
                outcome.next_edge = Some(outcome.next_edge.map_or(d.until, |t| t.min(d.until)));
                outcome.deferred.push(d);
                None
            }
        };
        tally(&mut outcome.counts, plan, write.as_ref(), required);
        outcome.writes.extend(write);
    }

    let sources: Vec<(&WindowSource, Option<_>)> = windows
        .iter()
        .map(|&s| {
            let span = s.window.as_ref().ok().and_then(|w| {
                active
                    .iter()
                    .find(|(a, _)| a.id == w.id)
                    .map(|(_, span)| (*span, selected.get(&w.id).copied().unwrap_or(0)))
            });
            (s, span)
        })
        .collect();
    outcome.events = announce::due(&sources, deleted, &rules.instance, now);
    outcome.windows = windows
        .iter()
        .map(|s| WindowSummary {
            id: s.id.clone(),
            valid: s.window.is_ok(),
            blackout: s.window.as_ref().is_ok_and(|w| w.blackout),
            active: active.iter().any(|(w, _)| w.id == s.id),
            selected: selected.get(&s.id).copied().unwrap_or(0),
            next_start: s
                .window
                .as_ref()
                .ok()
                .and_then(|w| w.schedule.next_after(now)),
        })
        .collect();
    outcome
}

/// `MaintenanceInProgress` for the in-scope nodes (with `--in-progress`), added to their
/// plans; returns where each plan's maintenance stands (`None` out of scope), and the
/// decision's slots and pacing (`None` without `--in-progress`).
fn decide_in_progress(
    rules: &Rules,
    plans: &mut [Plan],
    gates: &Gates,
    now: Timestamp,
) -> (Vec<Option<Progress>>, Option<in_progress::Decisions>) {
    let Some(policy) = &rules.in_progress else {
        let progress = plans
            .iter()
            .map(|p| {
                p.verdict.as_ref().map(|v| {
                    if v.is_maintenance() {
                        Progress::Started
                    } else {
                        Progress::Idle
                    }
                })
            })
            .collect();
        return (progress, None);
    };
    let scoped: Vec<usize> = (0..plans.len())
        .filter(|&i| plans[i].verdict.is_some())
        .collect();
    let mut decided = {
        let windows: Vec<InWindow> = scoped
            .iter()
            .map(|&i| InWindow::of(plans[i].verdict.as_ref().expect("in scope")))
            .collect();
        let states: Vec<NodeState> = scoped
            .iter()
            .zip(&windows)
            .map(|(&i, w)| NodeState {
                name: plans[i].node.name,
                window: w.window(),
                window_active: w.window_active(),
                blackout: w.blackout(),
                conditions: &plans[i].current,
                labels: plans[i].node.labels,
                availability: plans[i].node.availability,
                pods: plans[i].node.pods,
                boot_id: plans[i].node.boot_id,
                holds: plans[i].node.holds,
                drain: plans[i].node.drain,
            })
            .collect();
        in_progress::decide(policy, &states, gates, now)
    };
    let mut progress = vec![None; plans.len()];
    let conditions = std::mem::take(&mut decided.conditions);
    // The indices of the decision are those of `scoped`.
    for n in &mut decided.needs_pods {
        *n = scoped[*n];
    }
    for (i, d) in scoped.into_iter().zip(conditions) {
        progress[i] = Some(match &d {
            Some(d) if d.status => Progress::Started,
            Some(d) if reasons::is_waiting(&d.reason) => Progress::Waiting,
            _ => Progress::Idle,
        });
        plans[i].desired.extend(d);
    }
    (progress, Some(decided))
}

#[cfg(test)]
mod tests;
