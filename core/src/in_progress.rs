//! The in-progress decision: which nodes may be disrupted now (`MaintenanceInProgress`).
//!
//! kured v2 drains and reboots a node when this condition is True, so a wrong answer
//! reboots production nodes. The rules (contract §5), as a pure function of the nodes'
//! state, the time and the policy:
//!
//! - **start** when UnderMaintenance, every required condition True, the node available
//!   (Ready, not cordoned), nothing blocking it (a blocking condition, a label matching
//!   `--block-node-selector`, a running pod matching `--block-pod-selector`), enough of
//!   the window left (`--start-cutoff`), a slot free overall and in every group
//!   (`--max-in-progress-per`), and `--start-interval` since the last start or end;
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
//! - **ceiling**: the slots bound the *disrupted* nodes: those in progress (including
//!   ones ending in this pass: a slot is reused only in a later pass, once the end is
//!   written) and, with `--count-unavailable` (the default), those unavailable, each
//!   counted once. A node that completed holds its slot until it is Ready and uncordoned
//!   again. Never preempts: nodes already True stay True whatever the count;
//! - **order**: oldest first by the latest `lastTransitionTime` of the required
//!   conditions, ties by node name; each start takes a slot overall and in each of its
//!   groups.
//!
//! Why a node waits, when several apply: reasons about the node itself
//! (`RequirementNotMet`, `NodeUnavailable`, `Blocked`) come first, then `StartCutoff`,
//! then `WaitingForSlot` (a full slot is the harder constraint), then `StartInterval`.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use crate::conditions::{Condition, Desired, MAINTENANCE_IN_PROGRESS, Status, find, is_true};
use crate::reasons;
use crate::selector::{Labels, Selector};

/// Most node names a `WaitingForSlot` message lists as holding slots while unavailable.
const NAMES_IN_MESSAGE: usize = 3;

/// The concurrency ceiling: a count, or a percentage of the nodes it applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ceiling {
    Count(u32),
    Percent(u32),
}

impl Ceiling {
    /// The number of slots for `nodes` nodes: a percentage rounds down, but is at least
    /// 1 so that a small pool (or group) still makes progress.
    pub fn slots(self, nodes: usize) -> usize {
        match self {
            Ceiling::Count(n) => n as usize,
            Ceiling::Percent(p) => (nodes * p as usize / 100).max(1),
        }
    }
}

impl std::fmt::Display for Ceiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ceiling::Count(n) => write!(f, "{n}"),
            Ceiling::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// A ceiling per value of a node label (`--max-in-progress-per KEY=N|P%`): nodes
/// without the label form one group of their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCeiling {
    pub key: String,
    pub ceiling: Ceiling,
}

/// The deployer's rules (`--require-condition`, `--block-condition`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub required: Vec<String>,
    pub blocking: Vec<String>,
    pub ceiling: Ceiling,
    pub stop_at_window_end: bool,
    pub start_cutoff: SignedDuration,
    /// `--count-unavailable`: unavailable nodes take slots.
    pub count_unavailable: bool,
    /// `--block-node-selector`: a node matching one does not start.
    pub block_node_selectors: Vec<Selector>,
    /// `--block-pod-selector`: a node running a pod matching one does not start (the
    /// shell finds the pods; these name them in messages).
    pub block_pod_selectors: Vec<Selector>,
    /// `--max-in-progress-per`.
    pub group_ceilings: Vec<GroupCeiling>,
    /// `--start-interval`: the least time between a start or an end and the next start.
    pub start_interval: Option<SignedDuration>,
    /// `--complete-on-reboot`: a node in progress whose boot ID changed has completed.
    pub complete_on_reboot: bool,
}

impl Policy {
    /// The policy of `--in-progress` with a ceiling and nothing else: required and
    /// blocking conditions none, unavailable nodes counted, no group, no pacing.
    pub fn with_ceiling(ceiling: Ceiling) -> Self {
        Policy {
            required: Vec::new(),
            blocking: Vec::new(),
            ceiling,
            stop_at_window_end: false,
            start_cutoff: SignedDuration::ZERO,
            count_unavailable: true,
            block_node_selectors: Vec::new(),
            block_pod_selectors: Vec::new(),
            group_ceilings: Vec::new(),
            start_interval: None,
            complete_on_reboot: true,
        }
    }

    /// The number of slots for `in_scope` nodes (`--max-in-progress`).
    pub fn slots(&self, in_scope: usize) -> usize {
        self.ceiling.slots(in_scope)
    }
}

/// What a node shows of its availability: its `Ready` condition's status (`None`: it has
/// none, as a node without a kubelet) and `spec.unschedulable`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Availability {
    pub ready: Option<Status>,
    pub unschedulable: bool,
}

/// Why a node is unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    NotReady,
    /// `Ready` is `Unknown` (the node controller's answer to a silent kubelet).
    Unknown,
    Cordoned,
}

impl Availability {
    /// `None` when the node is available: Ready True (or no Ready condition) and not
    /// cordoned. NotReady and Unknown come before cordoned (a down node is the stronger
    /// news).
    pub fn unavailable(&self) -> Option<Unavailable> {
        match self.ready {
            Some(Status::False) => Some(Unavailable::NotReady),
            Some(Status::Unknown) => Some(Unavailable::Unknown),
            _ if self.unschedulable => Some(Unavailable::Cordoned),
            _ => None,
        }
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unavailable::NotReady => "NotReady",
            Unavailable::Unknown => "Ready Unknown",
            Unavailable::Cordoned => "cordoned",
        })
    }
}

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

/// How one ceiling's slots are used once a pass's starts are written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub slots: usize,
    /// Nodes `MaintenanceInProgress=True` (those starting in this pass included).
    pub in_progress: usize,
    /// Nodes unavailable and not in progress (counted only with `--count-unavailable`).
    pub unavailable: usize,
    /// Some of those, with why (at most [`NAMES_IN_MESSAGE`]).
    pub unavailable_names: Vec<(String, Unavailable)>,
}

impl Usage {
    /// In progress or unavailable, each node once.
    pub fn disrupted(&self) -> usize {
        self.in_progress + self.unavailable
    }

    fn full(&self) -> bool {
        self.disrupted() >= self.slots
    }

    fn count(&mut self, node: &NodeState, count_unavailable: bool) {
        if is_true(node.conditions, MAINTENANCE_IN_PROGRESS) {
            self.in_progress += 1;
        } else if let Some(why) = node
            .availability
            .unavailable()
            .filter(|_| count_unavailable)
        {
            self.unavailable += 1;
            if self.unavailable_names.len() < NAMES_IN_MESSAGE {
                self.unavailable_names.push((node.name.to_string(), why));
            }
        }
    }

    /// `2/2 slots in use`, or with unavailable nodes `3/3 slots in use: 2 in progress, 1
    /// unavailable (node-7 NotReady)`.
    fn message(&self) -> String {
        let mut m = format!("{}/{} slots in use", self.disrupted(), self.slots);
        if self.unavailable > 0 {
            m.push_str(&format!(": {} in progress", self.in_progress));
            let names: Vec<String> = self
                .unavailable_names
                .iter()
                .map(|(n, why)| format!("{n} {why}"))
                .collect();
            let more = self.unavailable - names.len();
            let more = if more > 0 {
                format!(", +{more} more")
            } else {
                String::new()
            };
            m.push_str(&format!(
                ", {} unavailable ({}{more})",
                self.unavailable,
                names.join(", ")
            ));
        }
        m
    }
}

/// A group of `--max-in-progress-per`: the nodes sharing a value of `key` (`None`: the
/// nodes without the label).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Group {
    pub key: String,
    pub value: Option<String>,
}

impl std::fmt::Display for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.value {
            Some(v) => write!(f, "{}={v}", self.key),
            None => write!(f, "no {}", self.key),
        }
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
pub fn decide(policy: &Policy, nodes: &[NodeState], now: Timestamp) -> Decisions {
    let mut overall = Usage {
        slots: policy.slots(nodes.len()),
        ..Usage::default()
    };
    let mut groups: BTreeMap<Group, Usage> = BTreeMap::new();
    let group_of = |node: &NodeState, g: &GroupCeiling| Group {
        key: g.key.clone(),
        value: node.labels.label(&g.key).map(str::to_string),
    };
    let mut sizes: BTreeMap<Group, usize> = BTreeMap::new();
    for node in nodes {
        for g in &policy.group_ceilings {
            *sizes.entry(group_of(node, g)).or_default() += 1;
        }
    }
    for (group, size) in &sizes {
        let ceiling = policy
            .group_ceilings
            .iter()
            .find(|g| g.key == group.key)
            .map_or(policy.ceiling, |g| g.ceiling);
        groups.insert(
            group.clone(),
            Usage {
                slots: ceiling.slots(*size),
                ..Usage::default()
            },
        );
    }
    let mut unavailable = 0;
    for node in nodes {
        unavailable += usize::from(node.availability.unavailable().is_some());
        overall.count(node, policy.count_unavailable);
        for g in &policy.group_ceilings {
            if let Some(usage) = groups.get_mut(&group_of(node, g)) {
                usage.count(node, policy.count_unavailable);
            }
        }
    }

    let mut out: Vec<Option<Desired>> = vec![None; nodes.len()];
    let mut candidates: Vec<(Option<Timestamp>, &str, usize)> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        match decide_alone(policy, node, now) {
            Alone::Decided(d) => out[i] = d,
            Alone::Candidate => {
                let age = policy
                    .required
                    .iter()
                    .filter_map(|t| find(node.conditions, t)?.last_transition_time)
                    .max();
                candidates.push((age, node.name, i));
            }
        }
    }

    // Pacing: from the latest start or end of a maintenance among the nodes in scope (a
    // start's or an end's `lastTransitionTime`, so it holds across restarts).
    let paced_until = policy.start_interval.and_then(|d| {
        let last = nodes
            .iter()
            .filter_map(|n| find(n.conditions, MAINTENANCE_IN_PROGRESS))
            .filter(|c| {
                c.is_true()
                    || c.reason == reasons::MAINTENANCE_COMPLETED
                    || c.reason == reasons::MAINTENANCE_WINDOW_ENDED
                    || c.reason == reasons::NODE_REBOOTED
            })
            .filter_map(|c| c.last_transition_time)
            .max()?;
        last.checked_add(d).ok().filter(|t| *t > now)
    });
    let mut next_start = None;

    // Oldest requirement first; None (no required conditions) sorts first, then by name.
    candidates.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut started = false;
    let mut held: Vec<(usize, String)> = Vec::new();
    for (_, _, i) in candidates {
        let node = &nodes[i];
        let existing = find(node.conditions, MAINTENANCE_IN_PROGRESS);
        let node_groups: Vec<Group> = policy
            .group_ceilings
            .iter()
            .map(|g| group_of(node, g))
            .collect();
        let full = if overall.full() {
            Some(overall.message())
        } else {
            node_groups
                .iter()
                .find(|g| groups[*g].full())
                .map(|g| format!("{g}: {}", groups[g].message()))
        };
        if let Some(why) = full {
            held.push((i, why));
            continue;
        }
        // A start in this pass restarts the interval: at most one start per pass.
        let pace = match (paced_until, policy.start_interval) {
            (Some(t), _) => Some(t),
            (None, Some(d)) if started => now.checked_add(d).ok(),
            _ => None,
        };
        if let Some(t) = pace {
            next_start = Some(next_start.map_or(t, |n: Timestamp| n.min(t)));
            out[i] = Some(why_not(
                existing,
                reasons::START_INTERVAL,
                format!(
                    "next start possible at {} (--start-interval {} after the last start or end)",
                    t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    fmt_duration(policy.start_interval.unwrap_or_default())
                ),
            ));
            continue;
        }
        started = true;
        overall.in_progress += 1;
        for g in &node_groups {
            if let Some(usage) = groups.get_mut(g) {
                usage.in_progress += 1;
            }
        }
        let windows = node.window.map(|w| w.0).unwrap_or_default();
        let because = if policy.required.is_empty() {
            String::new()
        } else {
            format!("; {} True", policy.required.join(", "))
        };
        // The boot ID comes first: a long list of windows may be cut from the message.
        let boot = node
            .boot_id
            .filter(|id| recordable(id))
            .map(|id| format!(" ({BOOT_ID} {id})"))
            .unwrap_or_default();
        out[i] = Some(desired(
            true,
            reasons::MAINTENANCE_WINDOW,
            format!("maintenance started{boot} in {windows}{because}"),
        ));
    }
    for (i, why) in held {
        let existing = find(nodes[i].conditions, MAINTENANCE_IN_PROGRESS);
        out[i] = Some(why_not(existing, reasons::WAITING_FOR_SLOT, why));
    }
    Decisions {
        conditions: out,
        overall,
        groups,
        next_start,
        unavailable,
    }
}

/// What a node's own state decides, before slots and pacing.
enum Alone {
    Decided(Option<Desired>),
    /// It may start if a slot is free.
    Candidate,
}

fn decide_alone(policy: &Policy, node: &NodeState, now: Timestamp) -> Alone {
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
        return Alone::Decided(Some(if let Some(t) = missing {
            desired(
                false,
                reasons::MAINTENANCE_COMPLETED,
                format!("{t} is no longer True"),
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
            desired(
                false,
                reasons::NODE_REBOOTED,
                format!("the node rebooted ({BOOT_ID} {before} -> {now_id}); {next}"),
            )
        } else if !node.window_active && (policy.stop_at_window_end || policy.required.is_empty()) {
            desired(
                false,
                reasons::MAINTENANCE_WINDOW_ENDED,
                "the maintenance window ended".into(),
            )
        } else {
            Desired::keep(current)
        }));
    }
    let Some((_, until)) = node.window else {
        // Outside any window, or suspended by a blackout: a "why not" answer says so;
        // anything else (completed, ended, absent) stays as it is.
        return Alone::Decided(match (existing, node.blackout) {
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
        });
    };
    let why =
        |reason: &str, message: String| Alone::Decided(Some(why_not(existing, reason, message)));
    if let Some(t) = missing {
        // A completed maintenance is a better answer than "requirement not met" for a
        // node that no longer needs one, and it stays while the node recovers.
        return match existing {
            Some(c) if !c.is_true() && is_completion(c) => Alone::Decided(Some(Desired::keep(c))),
            _ => why(
                reasons::REQUIREMENT_NOT_MET,
                format!("waiting for {t} to be True"),
            ),
        };
    }
    if let Some(c) = existing.filter(|c| !c.is_true() && c.reason == reasons::NODE_REBOOTED)
        && !confirmed_since(policy, node.conditions, c.last_transition_time)
    {
        // Its message says what it waits for.
        return Alone::Decided(Some(Desired::keep(c)));
    }
    if let Some(u) = node.availability.unavailable() {
        return why(reasons::NODE_UNAVAILABLE, format!("the node is {u}"));
    }
    if let Some(t) = policy.blocking.iter().find(|t| is_true(node.conditions, t)) {
        return why(reasons::BLOCKED, format!("blocked by {t}"));
    }
    if let Some(s) = policy
        .block_node_selectors
        .iter()
        .find(|s| s.matches(node.labels))
    {
        return why(
            reasons::BLOCKED,
            format!("blocked by --block-node-selector {:?}", s.to_string()),
        );
    }
    if let Some(pod) = node.pods.first() {
        let selector = policy
            .block_pod_selectors
            .get(pod.selector)
            .map(ToString::to_string)
            .unwrap_or_default();
        let others = match node.pods.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return why(
            reasons::BLOCKED,
            format!(
                "blocked by pod {}{others} matching --block-pod-selector {selector:?}",
                pod.name
            ),
        );
    }
    if until.is_some_and(|u| u.duration_since(now) < policy.start_cutoff) {
        return why(
            reasons::START_CUTOFF,
            format!(
                "less than {} of the window left",
                fmt_duration(policy.start_cutoff)
            ),
        );
    }
    Alone::Candidate
}

/// How a start's message records the node's boot ID: `(boot ID <id>)`.
pub const BOOT_ID: &str = "boot ID";

/// Boot IDs are UUIDs; anything else that reads back unambiguously from a message is
/// recorded too. Others (a `)` inside, overlong) are not: no reboot detection there.
fn recordable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The boot ID a start recorded in `message`, if any.
pub fn recorded_boot_id(message: &str) -> Option<&str> {
    // `BOOT_ID` with its opening parenthesis, spelled out: no allocation per node and pass.
    const OPEN: &str = "(boot ID ";
    debug_assert_eq!(OPEN, format!("({BOOT_ID} "));
    let (_, rest) = message.split_once(OPEN)?;
    let (id, _) = rest.split_once(')')?;
    recordable(id).then_some(id)
}

/// `(recorded, current)` when the node in progress (`current` is its True condition)
/// shows another boot ID than the one its start recorded.
fn rebooted<'a>(current: &'a Condition, boot_id: Option<&'a str>) -> Option<(&'a str, &'a str)> {
    let before = recorded_boot_id(&current.message)?;
    let now = boot_id.filter(|id| recordable(id))?;
    (before != now).then_some((before, now))
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
    c.reason == reasons::MAINTENANCE_COMPLETED || c.reason == reasons::NODE_REBOOTED
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
                | reasons::NODE_UNAVAILABLE
                | reasons::START_INTERVAL
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
