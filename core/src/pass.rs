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

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::{SignedDuration, Timestamp};

use crate::announce::{self, Announcement, Deleted, WindowSource};
use crate::budgets;
use crate::conditions::{
    self, Condition, Desired, MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, Status,
    UNDER_MAINTENANCE, find,
};
use crate::decision::{self, ActiveWindows, InWindow, Progress, Verdict};
use crate::gates::{Gates, Hold};
use crate::in_progress::{self, Availability, BlockingPod, Group, NodeState, Policy, Usage};
use crate::peers::{self, LeaseRef, Liveness, Owner, Peers};
use crate::reasons;
use crate::selector::{Labels, Selector};
use crate::window::{Window, WindowId};

/// How long a write of ours is trusted over a cache that has not shown it, when the
/// node's resourceVersion cannot be compared (with etcd it always can).
pub const PENDING_TTL: SignedDuration = SignedDuration::from_secs(10);

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

/// A write of this instance that the node cache may not show yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub conditions: Vec<Condition>,
    /// The node's resourceVersion in the answer to the write.
    pub resource_version: Option<u64>,
    pub written_at: Timestamp,
    /// The condition types the write gave up (a live co-owner keeps them): until the
    /// cache shows them no longer ours, they are not ours.
    pub dropped: Vec<String>,
}

/// A node's planned write: every condition this instance owns on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    pub node: String,
    /// The node's resourceVersion the write was derived from (the cache's, or our last
    /// write's while the cache has not caught up with it). The apply carries it as a
    /// precondition: the API server refuses it (409) if the node changed since, so a
    /// write that reaches the API server late (held by the network past its timeout,
    /// after another leader wrote the node) cannot undo what is there now.
    pub based_on: Option<u64>,
    pub conditions: Vec<Condition>,
    /// (type, new status) of the conditions whose status changes.
    pub transitions: Vec<(String, Status)>,
    /// Types this instance owned and gives up, because a live instance owns them too.
    pub dropped: Vec<String>,
    /// Types applied unchanged to become a co-owner next to another kumaco instance.
    pub claimed: Vec<String>,
    /// The durations this write records for the first time on `MaintenanceInProgress`:
    /// what the shell's histograms observe once it is done.
    pub recorded: Recorded,
}

/// The writes of a pass to send now, at most `max`, those ending a maintenance first, the
/// rest in the pass's order; and whether some were left for the next pass, which derives
/// them again. An executor acts the moment it reads a node still in progress (kured's
/// daemons, restarted after a reboot, reboot it again), so an end must not wait behind
/// the burst of a window edge over a thousand nodes; and a bounded burst lets the next
/// pass, woken by a reboot meanwhile, put that end first.
pub fn first_writes(mut writes: Vec<Write>, max: usize) -> (Vec<Write>, bool) {
    // Stable: the pass's order otherwise.
    writes.sort_by_key(|w| !w.ends_maintenance());
    let more = writes.len() > max;
    writes.truncate(max);
    (writes, more)
}

/// Durations a write records (`completed after`, `recovered after`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// How long a maintenance that completed (not one its window stopped) took.
    pub maintenance: Option<SignedDuration>,
    /// How long the node took to be available again after its maintenance ended.
    pub recovery: Option<SignedDuration>,
}

impl Recorded {
    /// What `new` records that `old` (the condition before, if any) did not.
    fn of(old: Option<&Condition>, new: &Condition) -> Recorded {
        if new.type_ != MAINTENANCE_IN_PROGRESS || new.is_true() {
            return Recorded::default();
        }
        let was_ended = old.is_some_and(|o| !o.is_true());
        let old_message = old.filter(|_| was_ended).map_or("", |o| o.message.as_str());
        let completed = reasons::completes_maintenance(&new.reason);
        Recorded {
            maintenance: in_progress::recorded_duration(&new.message)
                .filter(|_| completed && !was_ended),
            recovery: in_progress::recorded_recovery(&new.message)
                .filter(|_| in_progress::recorded_recovery(old_message).is_none()),
        }
    }
}

impl Write {
    /// The conditions of this write whose status, reason or message differ from what
    /// `current` shows: what a shadow (`--dry-run`) reports it would change.
    pub fn changes(&self, current: &[Condition]) -> Vec<&Condition> {
        self.conditions
            .iter()
            .filter(|c| {
                find(current, &c.type_).is_none_or(|e| {
                    (e.status, &e.reason, &e.message) != (c.status, &c.reason, &c.message)
                })
            })
            .collect()
    }

    /// Whether this write starts a maintenance (`MaintenanceInProgress` to `True`).
    pub fn starts_maintenance(&self) -> bool {
        self.transitions
            .iter()
            .any(|(t, s)| t == MAINTENANCE_IN_PROGRESS && *s == Status::True)
    }

    /// Whether this write ends a maintenance (`MaintenanceInProgress` to `False`).
    pub fn ends_maintenance(&self) -> bool {
        self.transitions
            .iter()
            .any(|(t, s)| t == MAINTENANCE_IN_PROGRESS && *s == Status::False)
    }

    /// Identifies the write by its content (the node and the conditions it applies): an
    /// apply the API server refused for good is not sent again, a different one is.
    pub fn fingerprint(&self) -> u64 {
        let mut h = crate::fingerprint::Fnv::default();
        h.write_str(&self.node);
        for c in &self.conditions {
            for part in [c.type_.as_str(), c.status.as_str(), &c.reason, &c.message] {
                h.write_str(part);
            }
        }
        h.finish()
    }
}

/// A node in this instance's scope whose kumaco conditions a live kumaco instance also
/// owns: two instances claim it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contest {
    pub node: String,
    /// The other instances' field managers, sorted.
    pub with: Vec<String>,
}

/// A write held back by the contest bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deferred {
    pub node: String,
    /// When it may be made.
    pub until: Timestamp,
    /// The managers that changed the node since this instance did.
    pub by: Vec<String>,
}

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
                .extend(contest(plan, &planned, rules, peers, now));
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

/// Adds a node's conditions, as they will be once `write` (if any) lands, to the counts.
fn tally(counts: &mut Counts, plan: &Plan, write: Option<&Write>, required: &[String]) {
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

fn min_some(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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

/// The other field managers owning kumaco's conditions on `node`.
fn others<'n>(node: &NodeView<'n>, rules: &Rules) -> impl Iterator<Item = &'n Owner> {
    node.owners
        .iter()
        .filter(move |o| o.manager != rules.instance && !o.types.is_empty())
}

/// Whether the in-scope node of `plan` is contested: a live kumaco instance owns one of
/// kumaco's conditions on it (both instances claim the node), or holds back a write of
/// this one (the bound). In a contest of differing opinions the instance whose value is
/// on the node owns it alone, and the other one reports the contest: the one held back.
fn contest(
    plan: &Plan,
    planned: &Planned,
    rules: &Rules,
    peers: &Peers,
    now: Timestamp,
) -> Option<Contest> {
    let live = |m: &str| peers::is_kumaco(m) && peers.liveness(m, now) == Liveness::Live;
    let mut with: Vec<String> = others(&plan.node, rules)
        .map(|o| o.manager.as_str())
        .chain(match planned {
            Planned::Deferred(d) => d.by.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        })
        .filter(|m| live(m))
        .map(String::from)
        .collect();
    with.sort();
    with.dedup();
    (!with.is_empty()).then(|| Contest {
        node: plan.node.name.to_string(),
        with,
    })
}

/// Conditions this instance owns and should no longer decide on `node` ([`peers`]): each
/// one a live kumaco instance also owns is dropped (returned second: the apply leaves it
/// out, and the co-owner's value stays); the others are relinquished (True goes False
/// with `reason`). Either is final, so a condition with a kumaco co-owner whose Lease
/// was not read in the last [`peers::FRESH`] stays as it is, and that Lease is added to
/// `refresh` (the shell reads it and runs the pass again).
fn give_up(
    owned: &[&Condition],
    node: &NodeView,
    rules: &Rules,
    (peers, refresh): (&Peers, &mut BTreeSet<LeaseRef>),
    now: Timestamp,
    reason: &str,
    message: &str,
) -> (Vec<Desired>, Vec<String>) {
    let mut drops = Vec::new();
    let mut relinquished = Vec::new();
    let mut kept = Vec::new();
    for c in owned {
        let co_owners: Vec<&Owner> = others(node, rules)
            .filter(|o| peers::is_kumaco(&o.manager) && o.owns(&c.type_))
            .collect();
        let unread: Vec<LeaseRef> = co_owners
            .iter()
            .filter(|o| !peers.fresh(&o.manager, now))
            .filter_map(|o| peers::lease_of(&o.manager))
            .collect();
        if !unread.is_empty() {
            refresh.extend(unread);
            kept.push(Desired::keep(c));
        } else if co_owners
            .iter()
            .any(|o| peers.liveness(&o.manager, now) == Liveness::Live)
        {
            drops.push(c.type_.clone());
        } else {
            relinquished.push(*c);
        }
    }
    kept.extend(decision::relinquish(&relinquished, reason, message));
    (kept, drops)
}

/// The conditions of `node` as kumaco should reason about them: the cache, unless a
/// write of ours is newer than what the cache shows yet. The flag says the pending write
/// is settled (the cache shows it or has moved past it) and can be forgotten.
pub fn overlay<'a>(
    pending: Option<&Pending>,
    node: &NodeView<'a>,
    now: Timestamp,
) -> (Cow<'a, [Condition]>, bool) {
    let cached = node.conditions;
    let Some(p) = pending else {
        return (Cow::Borrowed(cached), false);
    };
    // resourceVersions are etcd revisions; the API calls them opaque, but kube-apiserver's
    // own watch cache orders them the same way. A cache at or past our write has seen it,
    // and anything it shows since (another writer undoing ours) is the truth to act on.
    let caught_up = match (p.resource_version, node.resource_version) {
        (Some(ours), Some(cached)) => cached >= ours,
        _ => false,
    };
    // A write that gave types up is shown only once the cache no longer has them ours:
    // the conditions themselves stay as they were.
    let confirmed = p.conditions.iter().all(|w| {
        find(cached, &w.type_)
            .is_some_and(|c| c.status == w.status && c.reason == w.reason && c.message == w.message)
    }) && !p.dropped.iter().any(|d| node.owned.contains(d));
    // Without a comparable resourceVersion, trust our write for a while only. With one,
    // never expire: a cache stuck behind our write (a broken watch) must not make a
    // MaintenanceInProgress slot look free; the watch's relist catches up.
    let expired = p.resource_version.is_none() && now.duration_since(p.written_at) > PENDING_TTL;
    if caught_up || confirmed || expired {
        return (Cow::Borrowed(cached), true);
    }
    let mut merged = cached.to_vec();
    for w in &p.conditions {
        merged.retain(|c| c.type_ != w.type_);
        merged.push(w.clone());
    }
    (Cow::Owned(merged), false)
}

/// What a node needs.
enum Planned {
    Nothing,
    Write(Write),
    /// A write the contest bound holds back.
    Deferred(Deferred),
}

/// The write a node needs, if what it shows differs from what kumaco wants, or this
/// instance's ownership should change (a claim, a drop). The apply carries every
/// condition this instance keeps owning (server-side apply deletes an owned entry left
/// out), the unchanged ones as they are; a dropped one is left out.
fn plan_write(plan: &Plan, rules: &Rules, peers: &Peers, now: Timestamp) -> Planned {
    let current = &plan.current;
    let changed: Vec<&str> = plan
        .desired
        .iter()
        .filter(|d| conditions::differs(d, find(current, &d.type_)))
        .map(|d| d.type_.as_str())
        .collect();
    let others: Vec<&Owner> = others(&plan.node, rules).collect();
    // Agreeing with another kumaco instance's value is owning it too, so that instance
    // can let the node go without setting it False under this one.
    let claimed: Vec<String> = plan
        .desired
        .iter()
        .filter(|d| !plan.owned.contains(&d.type_.as_str()) && !changed.contains(&d.type_.as_str()))
        .filter(|d| {
            others
                .iter()
                .any(|o| peers::is_kumaco(&o.manager) && o.owns(&d.type_))
        })
        .map(|d| d.type_.clone())
        .collect();
    if changed.is_empty() && claimed.is_empty() && plan.drops.is_empty() {
        return Planned::Nothing;
    }
    // A kumaco instance known to be gone changes nothing any more: no rival.
    let rivals: Vec<&Owner> = others
        .iter()
        .copied()
        .filter(|o| changed.iter().any(|t| o.owns(t)))
        .filter(|o| {
            !(peers::is_kumaco(&o.manager) && peers.liveness(&o.manager, now) == Liveness::Stale)
        })
        .collect();
    if let Some(until) = peers::rewrite_allowed_at(
        plan.node.owned_since,
        rivals.iter().copied(),
        rules.resync,
        now,
    ) {
        return Planned::Deferred(Deferred {
            node: plan.node.name.to_string(),
            until,
            by: rivals.iter().map(|o| o.manager.clone()).collect(),
        });
    }
    let mut desired: Vec<Desired> = plan.desired.clone();
    for c in current.iter() {
        if plan.owned.contains(&c.type_.as_str())
            && !plan.drops.contains(&c.type_)
            && !desired.iter().any(|d| d.type_ == c.type_)
        {
            desired.push(Desired::keep(c));
        }
    }
    let mut transitions = Vec::new();
    let mut recorded = Recorded::default();
    let conditions = desired
        .iter()
        .map(|d| {
            let existing = find(current, &d.type_);
            let c = conditions::to_apply(d, existing, now);
            if existing.map(|e| e.status) != Some(c.status) {
                transitions.push((c.type_.clone(), c.status));
            }
            let r = Recorded::of(existing, &c);
            recorded.maintenance = recorded.maintenance.or(r.maintenance);
            recorded.recovery = recorded.recovery.or(r.recovery);
            c
        })
        .collect();
    Planned::Write(Write {
        node: plan.node.name.to_string(),
        based_on: plan.based_on,
        conditions,
        transitions,
        dropped: plan.drops.clone(),
        claimed,
        recorded,
    })
}

#[cfg(test)]
mod tests;
