//! The in-progress decision: which nodes may be disrupted now (`MaintenanceInProgress`).
//!
//! kured v2 drains and reboots a node when this condition is True, so a wrong answer
//! reboots production nodes. The rules, as a pure function of the nodes' state, the
//! health gates' verdicts, the time and the policy:
//!
//! - **start** when UnderMaintenance, every required condition True, the node available
//!   (Ready, not cordoned), nothing blocking it (a blocking condition, a label matching
//!   `--block-node-selector`, a running pod matching `--block-pod-selector`), enough of
//!   the window left (`--start-cutoff`), a slot free overall and in every group
//!   (`--max-in-progress-per`), `--start-interval` since the last start or end, and
//!   every health gate letting it ([`crate::gates`]: no alert naming it or the cluster,
//!   no object check failing, every pod a drain would evict evictable now);
//! - **continue** while every required condition stays True, past the window end and
//!   despite blockers (finish what was started); without required conditions, until the
//!   window ends; `--stop-at-window-end` ends it at the window end in any case; a
//!   blackout stops new starts, never maintenance in progress (its window is still
//!   active underneath). With `--complete-on-reboot` (the default) a node whose boot ID
//!   changed since its maintenance started has rebooted: its maintenance ends
//!   (`NodeRebooted`), whatever its reporter still shows. No rule but those ends
//!   maintenance in progress: every other one only keeps a node from starting;
//! - **after a reboot** a node starts again only once every required condition has been
//!   confirmed by its reporter after the end (its `lastTransitionTime` or
//!   `lastHeartbeatTime` later): reporters lag behind a reboot, and a stale
//!   `RebootRequired=True` must not reboot the node a second time. Without required
//!   conditions, not before its `UnderMaintenance` turned True again: a later window;
//! - **records**: a start's message says when it started, to the millisecond (`started
//!   at 2026-12-07T14:25:03.512Z`), an end's message carries that on with how long the
//!   maintenance was in progress (`completed after 4.5s`), and the first pass that sees
//!   the node available again adds, once, how long that took (`recovered after 1.2s`):
//!   read from the node and written once whoever runs the pass, they are what the
//!   forecast learns durations from;
//! - **ceiling**: the slots bound the *disrupted* nodes: those in progress (including
//!   ones ending in this pass: a slot is reused only in a later pass, once the end is
//!   written) and, with `--count-unavailable` (the default), those unavailable, each
//!   counted once. A node that completed holds its slot until it is Ready and uncordoned
//!   again. Never preempts: nodes already True stay True whatever the count;
//! - **order**: oldest first by the latest `lastTransitionTime` of the required
//!   conditions, ties by node name; each start takes a slot overall and in each of its
//!   groups.
//!
//! Why a node waits, when several apply: a person's pause (`Paused`) first, over every
//! other reason, so that an operator in an incident sees it on every waiting node; then
//! reasons about the node itself (`RequirementNotMet` before the pause: a node that needs
//! no maintenance is not waiting; `NodeUnavailable`, `Blocked`, an alert naming it:
//! `AlertFiring`), then `StartCutoff`, then `WaitingForSlot` (a full slot is the harder
//! constraint), then `StartInterval`, then the gates on every start in gate order
//! ([`crate::gates::Gate`]: `HealthCheckFailed`, `AlertFiring`, or a source that cannot be
//! read: `GateUnavailable`), then `PodDisruptionBudget`. So the gates are asked only for
//! a node that would start otherwise: an alert that comes and goes rewrites no node
//! while every slot is taken, and the pods of a node are listed only when it is about to
//! start. `tests/gates.rs` pins the order.
//!
//! In parts: [`policy`] (the flags), [`availability`] (what a node shows of it),
//! [`slots`] (how the nodes use each ceiling's slots), [`records`] (what the messages
//! record: start, boot ID, durations); the decision itself is here.

mod availability;
mod policy;
mod records;
mod slots;

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

pub use availability::{Availability, Lifecycle, Unavailable};
pub use policy::{Ceiling, GroupCeiling, Policy};
pub use records::{
    BOOT_ID, COMPLETED_AFTER, HAD_WAITED, RECOVERED_AFTER, STARTED_AT, STOPPED_AFTER,
    recorded_boot_id, recorded_duration, recorded_end, recorded_recovery, recorded_start,
    unmeasured, waited,
};
use records::{end_record, fmt_duration, keep_end, rebooted, with_recovery};
use slots::Ledger;
pub use slots::{Group, Scope, Usage, groups_of};

use crate::budgets::{self, Budgets, Headroom};
use crate::conditions::{Condition, Desired, MAINTENANCE_IN_PROGRESS, find, is_true};
use crate::gates::{Gates, Hold};
use crate::reasons;
use crate::selector::Labels;

/// A pod that keeps its node from starting: scheduled there, not finished, matching
/// `--block-pod-selector` number `selector`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockingPod {
    /// `namespace/name`.
    pub name: String,
    pub selector: usize,
}

/// An in-scope node as the decision sees it.
#[derive(Clone, Copy)]
pub struct NodeState<'a> {
    pub name: &'a str,
    /// Set while the node is UnderMaintenance: the windows (for the message) and when
    /// their span ends (for the start cutoff; `None`: no end in sight).
    pub window: Option<(&'a str, Option<Timestamp>)>,
    /// A maintenance window selecting the node is active, even if a blackout suspends it:
    /// maintenance in progress ends with its window, not with a blackout.
    pub window_active: bool,
    /// The blackouts suspending maintenance on the node now, if any (for the "why not").
    pub blackout: Option<&'a str>,
    /// The node's conditions (as kumaco last wrote or saw them).
    pub conditions: &'a [Condition],
    pub labels: &'a dyn Labels,
    pub availability: Availability,
    /// The pods keeping it from starting, sorted.
    pub pods: &'a [BlockingPod],
    /// `status.nodeInfo.bootID`: recorded in the message of a start, compared while in
    /// progress (`None`: no reboot detection for this node).
    pub boot_id: Option<&'a str>,
    /// The health gates' verdicts on this node alone (an alert naming it).
    pub holds: &'a [Hold],
    /// Every pod on the node, as a drain meets it, when they were listed for the
    /// PodDisruptionBudget gate; `None` when they were not ([`Decisions::needs_pods`]).
    pub drain: Option<&'a [budgets::Pod]>,
}

impl std::fmt::Debug for NodeState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeState")
            .field("name", &self.name)
            .field("window", &self.window)
            .field("availability", &self.availability)
            .field("pods", &self.pods)
            .field("boot_id", &self.boot_id)
            .finish_non_exhaustive()
    }
}

/// What [`decide`] returns.
#[derive(Clone, Debug, Default)]
pub struct Decisions {
    /// `MaintenanceInProgress` for each node (same order as the nodes given); `None`
    /// where the node should not carry the condition.
    pub conditions: Vec<Option<Desired>>,
    /// The slots overall, once this pass's starts are written.
    pub overall: Usage,
    /// The same per group, sorted.
    pub groups: BTreeMap<Group, Usage>,
    /// When `--start-interval` lets the next start happen, if a node waits for it.
    pub next_start: Option<Timestamp>,
    /// Nodes unavailable (whether they count or not).
    pub unavailable: usize,
    /// The nodes (indices in the nodes given) whose pods the PodDisruptionBudget gate
    /// needs and was not given: nodes in progress, and nodes that would start. None of
    /// them starts in this decision; the caller lists their pods and decides again.
    pub needs_pods: Vec<usize>,
}

/// Where a node stands in the queue for free slots: the latest `lastTransitionTime` of
/// its required conditions (`None`, first, without required conditions), then its name.
pub fn queue_key<'a>(policy: &Policy, node: &NodeState<'a>) -> (Option<Timestamp>, &'a str) {
    let age = policy
        .required
        .iter()
        .filter_map(|t| find(node.conditions, t)?.last_transition_time)
        .max();
    (age, node.name)
}

/// When the maintenance `MaintenanceInProgress` shows started (`True`) or ended (`False`
/// by completion, the window's end or a reboot), as `--start-interval` counts from it.
pub fn start_or_end(c: &Condition) -> Option<Timestamp> {
    let counts = c.is_true() || reasons::ends_maintenance(&c.reason);
    counts.then_some(c.last_transition_time).flatten()
}

/// Whether a blocking pod can change this node's decision now: only a node under
/// maintenance and not yet in progress may start (no blocker ends maintenance in
/// progress), and on one whose `required` conditions are not all `True`,
/// `RequirementNotMet` takes precedence over `Blocked`. The shell wakes a pass for a
/// blocking pod's coming or going only on such a node. A node becomes one by a change of
/// these conditions, which wakes a pass of its own that reads the pods as they are then.
pub fn waits_to_start(conditions: &[Condition], required: &[String]) -> bool {
    is_true(conditions, crate::conditions::UNDER_MAINTENANCE)
        && !is_true(conditions, MAINTENANCE_IN_PROGRESS)
        && required.iter().all(|t| is_true(conditions, t))
}

/// Decides `MaintenanceInProgress` for the in-scope `nodes`.
pub fn decide(policy: &Policy, nodes: &[NodeState], gates: &Gates, now: Timestamp) -> Decisions {
    decide_among(policy, nodes, &Scope::of(policy, nodes), gates, now)
}

/// Decides `MaintenanceInProgress` for `nodes`, some of the nodes of `scope`, as
/// [`decide`] would over the whole scope. That holds when each node of the scope not
/// given paces no start (`--start-interval`: it shows no start or end within the
/// interval), and is either left out ([`Scope::leave_out`]) as it is now, or uses no slot
/// and would not start: it is no candidate, or a candidate after one given that is held
/// (`WaitingForSlot`, `StartInterval`) and shares its groups (every group fills up, and
/// the interval holds, for the rest of a pass).
pub fn decide_among(
    policy: &Policy,
    nodes: &[NodeState],
    scope: &Scope,
    gates: &Gates,
    now: Timestamp,
) -> Decisions {
    let (decisions, groups) = decide_in(policy, nodes, scope, gates, now);
    Decisions {
        groups: groups.into_iter().map(|(g, u)| (g.clone(), u)).collect(),
        ..decisions
    }
}

/// [`decide_among`] without the count per group: [`Decisions::groups`] is empty. For a
/// caller that decides again and again and reads only the conditions and the next start
/// (the forecast's simulation), to which building the counts' map cost more than the
/// decision of the few nodes it gives.
pub fn decide_conditions_among(
    policy: &Policy,
    nodes: &[NodeState],
    scope: &Scope,
    gates: &Gates,
    now: Timestamp,
) -> Decisions {
    decide_in(policy, nodes, scope, gates, now).0
}

/// The decision, with the counts per group apart (`Decisions::groups` left empty). In
/// steps: each node alone ([`decide_alone`]); then the candidates, oldest first, each
/// through the slots ([`Ledger`]), the pacing ([`Pace`]), the gates on every start and
/// the PodDisruptionBudgets, until it starts or says why not.
fn decide_in<'s>(
    policy: &Policy,
    nodes: &[NodeState],
    scope: &'s Scope,
    gates: &Gates,
    now: Timestamp,
) -> (Decisions, Vec<(&'s Group, Usage)>) {
    let mut ledger = Ledger::new(policy, nodes, scope);
    let mut out: Vec<Option<Desired>> = vec![None; nodes.len()];
    let mut candidates: Vec<(Option<Timestamp>, &str, usize)> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        match decide_alone(policy, node, gates.pause, now) {
            Alone::Decided(d) => out[i] = d,
            Alone::Candidate => {
                let (age, name) = queue_key(policy, node);
                candidates.push((age, name, i));
            }
        }
    }
    let mut pace = Pace::new(policy, nodes, &out);
    let mut budgets = gates.budgets.map(|b| BudgetCheck::new(b, nodes));

    // Oldest requirement first; None (no required conditions) sorts first, then by name.
    candidates.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (_, _, i) in candidates {
        let node = &nodes[i];
        let existing = find(node.conditions, MAINTENANCE_IN_PROGRESS);
        if let Some(full) = ledger.full(i) {
            out[i] = Some(why_not(existing, reasons::WAITING_FOR_SLOT, || {
                ledger.message(full)
            }));
            continue;
        }
        if let Some(t) = pace.holds_until(now) {
            out[i] = Some(why_not(existing, reasons::START_INTERVAL, || {
                format!(
                    "next start possible at {} (--start-interval {} after the last start or end)",
                    t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    fmt_duration(policy.start_interval.unwrap_or_default())
                )
            }));
            continue;
        }
        if let Some(hold) = gates.cluster.first() {
            out[i] = Some(why_not(existing, hold.reason, || hold.message.clone()));
            continue;
        }
        if let Some(check) = &mut budgets {
            match check.check(i, node) {
                Drain::Evictable => {}
                Drain::Refused(refusal) => {
                    out[i] = Some(why_not(existing, reasons::POD_DISRUPTION_BUDGET, || {
                        refusal
                    }));
                    continue;
                }
                Drain::Unknown => {
                    // Decided again once the pods are listed; until then it holds its
                    // slot in this decision, so the nodes after it are not listed for
                    // nothing, and it paces the rest as a start would.
                    out[i] = existing.map(Desired::keep);
                    ledger.hold(i);
                    pace.restart();
                    continue;
                }
            }
        }
        pace.restart();
        ledger.start(i);
        let windows = node.window.map(|w| w.0).unwrap_or_default();
        let because = if policy.required.is_empty() {
            String::new()
        } else {
            format!("; {} True", policy.required.join(", "))
        };
        // The instant and the boot ID come first: a long list of windows may be cut from
        // the message.
        let start = records::start_record(records::millis(now));
        let boot = records::boot_id_record(node.boot_id);
        out[i] = Some(desired(
            true,
            reasons::MAINTENANCE_WINDOW,
            format!("maintenance {start}{boot} in {windows}{because}"),
        ));
    }
    let mut needs_pods = budgets
        .map(BudgetCheck::into_needs_pods)
        .unwrap_or_default();
    needs_pods.sort_unstable();
    needs_pods.dedup();
    let decisions = Decisions {
        conditions: out,
        overall: ledger.overall,
        groups: BTreeMap::new(),
        next_start: pace.next_start,
        unavailable: ledger.unavailable,
        needs_pods,
    };
    (decisions, ledger.groups)
}

/// `--start-interval`: the pacing of starts, from the latest start or end the nodes in
/// scope show (a start's or an end's `lastTransitionTime`, so it holds across restarts)
/// and the starts and ends of this pass.
struct Pace {
    interval: Option<SignedDuration>,
    /// Until when the starts and ends the nodes show hold the next start.
    shown_until: Option<Timestamp>,
    /// A start or an end happens in this pass: at most one start per pass, and none in
    /// the pass that ends a maintenance (its end's `lastTransitionTime` is now, though
    /// the node still shows the start's).
    this_pass: bool,
    /// The earliest instant a held start becomes possible.
    next_start: Option<Timestamp>,
}

impl Pace {
    fn new(policy: &Policy, nodes: &[NodeState], decided: &[Option<Desired>]) -> Pace {
        let shown_until = policy.start_interval.and_then(|d| {
            let last = nodes
                .iter()
                .filter_map(|n| find(n.conditions, MAINTENANCE_IN_PROGRESS))
                .filter_map(start_or_end)
                .max()?;
            last.checked_add(d).ok()
        });
        let ends_now = nodes.iter().zip(decided).any(|(node, d)| {
            d.as_ref()
                .is_some_and(|d| d.type_ == MAINTENANCE_IN_PROGRESS && !d.status)
                && find(node.conditions, MAINTENANCE_IN_PROGRESS).is_some_and(Condition::is_true)
        });
        Pace {
            interval: policy.start_interval,
            shown_until,
            this_pass: ends_now,
            next_start: None,
        }
    }

    /// Until when a start at `now` is held, if it is; recorded as the next start.
    fn holds_until(&mut self, now: Timestamp) -> Option<Timestamp> {
        let until = match (self.shown_until.filter(|t| *t > now), self.interval) {
            (Some(t), _) => Some(t),
            (None, Some(d)) if self.this_pass => now.checked_add(d).ok(),
            _ => None,
        }?;
        self.next_start = Some(self.next_start.map_or(until, |n| n.min(until)));
        Some(until)
    }

    /// A start (or a slot held for one) in this pass.
    fn restart(&mut self) {
        self.this_pass = true;
    }
}

/// What the PodDisruptionBudget gate says of a candidate's drain.
enum Drain {
    Evictable,
    Refused(String),
    /// Its pods, or those of a node in progress, were not given.
    Unknown,
}

/// The PodDisruptionBudget gate over one decision: the headroom the nodes in progress
/// leave (built when a candidate first reaches the gate), shared by the nodes it starts,
/// and the nodes whose pods it needs and was not given.
struct BudgetCheck<'a, 'n> {
    budgets: &'a Budgets,
    nodes: &'a [NodeState<'n>],
    headroom: Option<Headroom>,
    needs_pods: Vec<usize>,
}

impl<'a, 'n> BudgetCheck<'a, 'n> {
    fn new(budgets: &'a Budgets, nodes: &'a [NodeState<'n>]) -> BudgetCheck<'a, 'n> {
        BudgetCheck {
            budgets,
            nodes,
            headroom: None,
            needs_pods: Vec::new(),
        }
    }

    /// Whether node `i`'s drain can go ahead now; if so, its evictions are taken from
    /// the headroom.
    fn check(&mut self, i: usize, node: &NodeState) -> Drain {
        let (budgets, nodes, needs_pods) = (self.budgets, self.nodes, &mut self.needs_pods);
        let headroom = self.headroom.get_or_insert_with(|| {
            let mut h = Headroom::default();
            for (j, other) in nodes.iter().enumerate() {
                if !is_true(other.conditions, MAINTENANCE_IN_PROGRESS) {
                    continue;
                }
                match other.drain {
                    Some(pods) => h.take(budgets, other.name, pods, false),
                    None => needs_pods.push(j),
                }
            }
            h
        });
        let known = needs_pods.is_empty().then_some(node.drain).flatten();
        let Some(pods) = known else {
            if node.drain.is_none() {
                needs_pods.push(i);
            }
            return Drain::Unknown;
        };
        if let Err(refusal) = headroom.check(budgets, pods) {
            return Drain::Refused(refusal.to_string());
        }
        headroom.take(budgets, node.name, pods, true);
        Drain::Evictable
    }

    fn into_needs_pods(self) -> Vec<usize> {
        self.needs_pods
    }
}

/// What a node's own state decides, before slots and pacing.
enum Alone {
    Decided(Option<Desired>),
    /// It may start if a slot is free.
    Candidate,
}

fn decide_alone(policy: &Policy, node: &NodeState, pause: Option<&Hold>, now: Timestamp) -> Alone {
    let existing = find(node.conditions, MAINTENANCE_IN_PROGRESS);
    let missing = policy
        .required
        .iter()
        .find(|t| !is_true(node.conditions, t));
    if let Some(current) = existing.filter(|c| c.is_true()) {
        let rebooted = policy
            .complete_on_reboot
            .then(|| rebooted(current, node.boot_id))
            .flatten();
        // The end records when the maintenance started and how long it lasted, and, if
        // the node is already available, that it recovered at once: what the forecast
        // learns from.
        let record = |verb: &str| end_record(current, now, verb);
        let end = |reason: &str, message: String| {
            let message = match node.availability.unavailable() {
                None => with_recovery(&message, SignedDuration::ZERO),
                Some(_) => message,
            };
            desired(false, reason, message)
        };
        return Alone::Decided(Some(if let Some(t) = missing {
            end(
                reasons::MAINTENANCE_COMPLETED,
                format!("{t} is no longer True{}", record(COMPLETED_AFTER)),
            )
        } else if let Some((before, now_id)) = rebooted {
            let next = if policy.required.is_empty() {
                "it starts again in a later window".to_string()
            } else {
                format!(
                    "a new maintenance waits for {} to be confirmed after the reboot",
                    policy.required.join(", ")
                )
            };
            end(
                reasons::NODE_REBOOTED,
                format!(
                    "the node rebooted ({BOOT_ID} {before} -> {now_id}){}; {next}",
                    record(COMPLETED_AFTER)
                ),
            )
        } else if !node.window_active && (policy.stop_at_window_end || policy.required.is_empty()) {
            end(
                reasons::MAINTENANCE_WINDOW_ENDED,
                format!("the maintenance window ended{}", record(STOPPED_AFTER)),
            )
        } else {
            Desired::keep(current)
        }));
    }
    let Some((_, until)) = node.window else {
        // Outside any window, or suspended by a blackout: a "why not" answer says so;
        // anything else (completed, ended, absent) stays as it is.
        return Alone::Decided(match (existing, node.blackout) {
            (Some(c), Some(b)) if is_why_not(c) => {
                Some(why_not(existing, reasons::MAINTENANCE_BLACKOUT, || {
                    format!("new starts suspended by blackout {b}")
                }))
            }
            (Some(c), None) if is_why_not(c) || c.reason == reasons::MAINTENANCE_BLACKOUT => {
                Some(desired(
                    false,
                    reasons::NO_ACTIVE_MAINTENANCE_WINDOW,
                    records::had_waited(c),
                ))
            }
            (other, _) => other.map(|c| keep_end(c, node, now)),
        });
    };
    // The message is built only if the condition is rewritten: a node that keeps waiting
    // for the same reason keeps its message, at every pass.
    let why = |reason: &str, message: &dyn Fn() -> String| {
        Alone::Decided(Some(why_not(existing, reason, message)))
    };
    if let Some(t) = missing {
        // A completed maintenance is a better answer than "requirement not met" for a
        // node that no longer needs one, and it stays while the node recovers.
        return match existing {
            Some(c) if !c.is_true() && is_completion(c) => {
                Alone::Decided(Some(keep_end(c, node, now)))
            }
            _ => why(reasons::REQUIREMENT_NOT_MET, &|| {
                format!("waiting for {t} to be True")
            }),
        };
    }
    if let Some(c) = existing.filter(|c| !c.is_true() && c.reason == reasons::NODE_REBOOTED)
        && !confirmed_since(policy, node.conditions, c.last_transition_time)
    {
        // Its message says what it waits for.
        return Alone::Decided(Some(keep_end(c, node, now)));
    }
    // A person's word: every node that would wait or start says so, whatever else.
    if let Some(hold) = pause {
        return why(hold.reason, &|| hold.message.clone());
    }
    if let Some(u) = node.availability.unavailable() {
        return why(reasons::NODE_UNAVAILABLE, &|| format!("the node is {u}"));
    }
    if let Some(t) = policy.blocking.iter().find(|t| is_true(node.conditions, t)) {
        return why(reasons::BLOCKED, &|| format!("blocked by {t}"));
    }
    if let Some(s) = policy
        .block_node_selectors
        .iter()
        .find(|s| s.matches(node.labels))
    {
        return why(reasons::BLOCKED, &|| {
            format!("blocked by --block-node-selector {:?}", s.to_string())
        });
    }
    if let Some(pod) = node.pods.first() {
        return why(reasons::BLOCKED, &|| {
            let selector = policy
                .block_pod_selectors
                .get(pod.selector)
                .map(ToString::to_string)
                .unwrap_or_default();
            let others = match node.pods.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            format!(
                "blocked by pod {}{others} matching --block-pod-selector {selector:?}",
                pod.name
            )
        });
    }
    if let Some(hold) = node.holds.first() {
        return why(hold.reason, &|| hold.message.clone());
    }
    if until.is_some_and(|u| u.duration_since(now) < policy.start_cutoff) {
        return why(reasons::START_CUTOFF, &|| {
            format!(
                "less than {} of the window left",
                fmt_duration(policy.start_cutoff)
            )
        });
    }
    Alone::Candidate
}

/// Whether the node may start a new maintenance after one that a reboot ended at `ended`:
/// every required condition set or confirmed since; without any, `UnderMaintenance`
/// turned True since (a later window).
fn confirmed_since(policy: &Policy, conditions: &[Condition], ended: Option<Timestamp>) -> bool {
    let Some(ended) = ended else { return true };
    let confirmed = |t: &str| find(conditions, t).is_some_and(|c| c.confirmed_after(ended));
    if policy.required.is_empty() {
        confirmed(crate::conditions::UNDER_MAINTENANCE)
    } else {
        policy.required.iter().all(|t| confirmed(t))
    }
}

/// A maintenance that ended as it should: kept while the node no longer needs another.
fn is_completion(c: &Condition) -> bool {
    reasons::completes_maintenance(&c.reason)
}

pub(super) fn desired(status: bool, reason: &str, message: String) -> Desired {
    Desired::new(MAINTENANCE_IN_PROGRESS, status, reason, message)
}

/// A False "why not" condition, rewritten only when its reason changes (the message of
/// `WaitingForSlot` changes with every start and end elsewhere); a health gate's also
/// when its message does, since what to act on is there (which alert fires, which budget
/// refuses, which check fails). A gate is asked only of a node that would start
/// otherwise, so that costs at most one write per such node and change of cause.
fn why_not(
    existing: Option<&Condition>,
    reason: &str,
    message: impl FnOnce() -> String,
) -> Desired {
    match existing {
        Some(c) if !c.is_true() && c.reason == reason => {
            if !reasons::is_gate(reason) {
                return Desired::keep(c);
            }
            let d = desired(false, reason, message());
            if d.message == c.message {
                Desired::keep(c)
            } else {
                d
            }
        }
        _ => desired(false, reason, message()),
    }
}

fn is_why_not(c: &Condition) -> bool {
    !c.is_true() && reasons::is_why_not(&c.reason)
}

#[cfg(test)]
mod tests;
