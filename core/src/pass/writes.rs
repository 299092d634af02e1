//! What a pass writes to a node, and the writes of ours it has not seen yet: the write a
//! node needs (every condition this instance keeps owning, a claim, a drop, or one held
//! back by the contest bound), what it changes and records, the order of a burst, and
//! the overlay of pending writes on the cache.

use std::borrow::Cow;

use jiff::{SignedDuration, Timestamp};

use super::contests::{Deferred, others};
use super::{NodeView, Plan, Rules};
use crate::conditions::{self, Condition, Desired, MAINTENANCE_IN_PROGRESS, Status, find};
use crate::in_progress;
use crate::peers::{self, Liveness, Owner, Peers};
use crate::reasons;

/// How long a write of ours is trusted over a cache that has not shown it, when the
/// node's resourceVersion cannot be compared (with etcd it always can).
pub const PENDING_TTL: SignedDuration = SignedDuration::from_secs(10);

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
    pub(super) fn of(old: Option<&Condition>, new: &Condition) -> Recorded {
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
    /// apply the API server refused for good is not sent again, a different one is. What
    /// `MaintenanceInProgress` measures (its start's instant, the durations of an end) is
    /// left out: a pass that derives the same start or end again measures it anew, and it
    /// is still the same write.
    pub fn fingerprint(&self) -> u64 {
        let mut h = crate::fingerprint::Fnv::default();
        h.write_str(&self.node);
        for c in &self.conditions {
            for part in [c.type_.as_str(), c.status.as_str(), &c.reason] {
                h.write_str(part);
            }
            if c.type_ == MAINTENANCE_IN_PROGRESS {
                in_progress::unmeasured(&c.message, |piece| h.write(piece.as_bytes()));
                h.write(&[0]);
            } else {
                h.write_str(&c.message);
            }
        }
        h.finish()
    }
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
pub(super) enum Planned {
    Nothing,
    Write(Write),
    /// A write the contest bound holds back.
    Deferred(Deferred),
}

impl Planned {
    /// The write the contest bound holds back, if it is one.
    pub(super) fn deferred(&self) -> Option<&Deferred> {
        match self {
            Planned::Deferred(d) => Some(d),
            _ => None,
        }
    }
}

/// The write a node needs, if what it shows differs from what kumaco wants, or this
/// instance's ownership should change (a claim, a drop). The apply carries every
/// condition this instance keeps owning (server-side apply deletes an owned entry left
/// out), the unchanged ones as they are; a dropped one is left out.
pub(super) fn plan_write(plan: &Plan, rules: &Rules, peers: &Peers, now: Timestamp) -> Planned {
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
