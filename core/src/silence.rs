//! Alertmanager silences for the nodes kumaco lets into maintenance (`--alertmanager-url`):
//! which silences of this instance should exist now, and what to do to the ones listed.
//!
//! A node in maintenance gets one silence per matcher set ([`MatcherSet`]: `node="NAME"`
//! unless left out, and one per `--silence-matchers`), because one silence's matchers must
//! all match an alert: alerts that name the node in different labels need a silence
//! each. A silence is held like a lease. While a node is in maintenance its silences must
//! end at least half a `--silence-lease` from now, and are pushed to a whole lease from
//! now when less remains: a kumaco that stops leaves nothing silenced for longer than one
//! lease. After the maintenance ends, they are kept until the end plus `--silence-tail`,
//! then expired.
//!
//! Everything is derived from the nodes' conditions, the silences Alertmanager lists and
//! the clock, never from what the shell did before: a restarted or newly elected kumaco
//! adopts the silences it finds (by `createdBy` and matchers) and plans exactly what one
//! that never stopped would. Silences of another `createdBy` are never touched, so
//! several instances share one Alertmanager.
//!
//! The matchers, their templates and sets are in [`matchers`]; the holds and the plan
//! are here.

pub mod matchers;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use jiff::{SignedDuration, Timestamp};

use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, Status, UNDER_MAINTENANCE};
use crate::in_progress::{self, Availability};
use crate::reasons;
use crate::selector::Labels;

pub use matchers::{
    DEFAULT_SET, Matcher, MatcherError, MatcherSet, MatcherTemplate, parse_plain_matcher,
    parse_sets,
};

/// The longest comment sent: Alertmanager stores it in every peer's snapshot.
const MAX_COMMENT_BYTES: usize = 512;

/// A silence's state as Alertmanager reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Active,
    Pending,
    Expired,
}

/// A silence as `GET /api/v2/silences` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Silence {
    pub id: String,
    pub matchers: Vec<Matcher>,
    pub created_by: String,
    pub starts_at: Timestamp,
    pub ends_at: Timestamp,
    pub state: State,
}

/// How the silences are held (`kumaco run`'s flags).
#[derive(Clone, Debug)]
pub struct Rules {
    /// `createdBy`: the instance (its field manager). Only silences created by it are
    /// ever changed.
    pub created_by: String,
    /// One silence per set for each node held ([`parse_sets`]).
    pub sets: Vec<MatcherSet>,
    /// `--silence-lease`: how far ahead a held silence ends at most.
    pub lease: SignedDuration,
    /// `--silence-tail`: how long after a maintenance's end its silence is kept.
    pub tail: SignedDuration,
    /// `--silence-while-recovering`, and for how long at most after a maintenance's end
    /// (`--silence-max-recovery`): `None` when off.
    pub while_recovering: Option<SignedDuration>,
    /// `--in-progress`: hold while `MaintenanceInProgress` is True, else while
    /// `UnderMaintenance` is.
    pub in_progress: bool,
    /// `--silence-max-creates-per-minute`.
    pub max_creates_per_minute: u32,
}

/// A node in scope, as the shell's cache shows it (conditions under kumaco's own names).
pub struct NodeState<'a> {
    pub name: &'a str,
    pub labels: &'a dyn Labels,
    pub conditions: &'a [Condition],
    pub availability: Availability,
}

/// Why a node's silence should exist now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// In maintenance (or recovering from one, with `--silence-while-recovering`): the
    /// silence exists and is renewed. `create: false` keeps one that exists and creates
    /// none (recovering without `--in-progress`: an `UnderMaintenance=False` does not
    /// say that a maintenance happened).
    Renewed { create: bool },
    /// After the maintenance's end: an existing silence is kept until then, none created
    /// (a maintenance that left no silence gets none afterwards).
    Until(Timestamp),
}

/// Whether and why `node`'s silence should exist at `now`.
pub fn hold(rules: &Rules, node: &NodeState<'_>, now: Timestamp) -> Option<Hold> {
    let find = |t: &str| node.conditions.iter().find(|c| c.type_ == t);
    let (condition, ends): (_, fn(&str) -> bool) = if rules.in_progress {
        (find(MAINTENANCE_IN_PROGRESS)?, reasons::ends_maintenance)
    } else {
        // `UnderMaintenance` turns False only over a True one: the window's end, or a
        // blackout's suspension.
        (find(UNDER_MAINTENANCE)?, |r| {
            r == reasons::NO_ACTIVE_MAINTENANCE_WINDOW || r == reasons::MAINTENANCE_BLACKOUT
        })
    };
    match condition.status {
        Status::True => Some(Hold::Renewed { create: true }),
        Status::False if ends(&condition.reason) => {
            let end = condition.last_transition_time?;
            if recovering(rules, node, condition, end, now) {
                return Some(Hold::Renewed {
                    create: rules.in_progress,
                });
            }
            let until = end.checked_add(rules.tail).ok()?;
            (now < until).then_some(Hold::Until(until))
        }
        _ => None,
    }
}

/// Whether `node` is still recovering from the maintenance that ended at `end`
/// (`--silence-while-recovering`): unavailable without a break since, and for no longer
/// than `--silence-max-recovery`. A node seen back once is not recovering any more,
/// whatever happens to it later: with `--in-progress` the end's message records the
/// recovery the first time kumaco sees the node available again
/// ([`in_progress::RECOVERED_AFTER`]), and a later outage is not this maintenance's. A
/// silence must not outlive its reason.
fn recovering(
    rules: &Rules,
    node: &NodeState<'_>,
    condition: &Condition,
    end: Timestamp,
    now: Timestamp,
) -> bool {
    let Some(limit) = rules.while_recovering else {
        return false;
    };
    let seen_back =
        rules.in_progress && in_progress::recorded_recovery(&condition.message).is_some();
    node.availability.unavailable().is_some()
        && !seen_back
        && end.checked_add(limit).is_ok_and(|until| now < until)
}

/// What to do to one silence. `node`: the node it is held for (of several whose sets
/// render the same matchers, the one held longest, then the first by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `POST /api/v2/silences` without an id.
    Create {
        node: String,
        matchers: Vec<Matcher>,
        ends_at: Timestamp,
        comment: String,
    },
    /// `POST /api/v2/silences` with the silence's id, its matchers and start: a new end.
    Extend {
        id: String,
        node: String,
        matchers: Vec<Matcher>,
        starts_at: Timestamp,
        ends_at: Timestamp,
        comment: String,
    },
    /// `DELETE /api/v2/silence/{id}`. `node`: the node it is held for, when it is a
    /// duplicate of the one kept.
    Expire { id: String, node: Option<String> },
}

impl Action {
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Extend { .. } => "extend",
            Action::Expire { .. } => "expire",
        }
    }
}

/// What [`plan`] decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Expiries first (they free nothing, but a duplicate must go whatever else fails),
    /// then extensions, then creations in the nodes' order (a node's sets in their order).
    pub actions: Vec<Action>,
    /// Silences of this instance that exist once the actions are done.
    pub held: usize,
    /// Creations held back by `--silence-max-creates-per-minute` (made by a later plan).
    pub capped: usize,
    /// Nodes in maintenance without one set's silence, and that set: a label one of its
    /// matchers names is missing on the node.
    pub unrenderable: Vec<(String, MatcherSet)>,
}

/// One silence the nodes held call for.
struct Wanted {
    /// The node it is held for: of several nodes whose sets render these matchers, the
    /// one with the strongest hold, then the first by name and set, so that every replica
    /// names the same one.
    node: String,
    set: usize,
    hold: Hold,
    comment: String,
}

/// Two reasons to hold one silence: the stronger one (renewed over a fixed end, the
/// later end).
fn merge(a: Hold, b: Hold) -> Hold {
    match (a, b) {
        (Hold::Renewed { create: x }, Hold::Renewed { create: y }) => {
            Hold::Renewed { create: x || y }
        }
        (renewed @ Hold::Renewed { .. }, Hold::Until(_))
        | (Hold::Until(_), renewed @ Hold::Renewed { .. }) => renewed,
        (Hold::Until(x), Hold::Until(y)) => Hold::Until(x.max(y)),
    }
}

/// From the nodes in scope, the silences listed (any `createdBy`: others are ignored
/// here, not trusted to the shell's filter) and the clock, the actions that make this
/// instance's silences what they should be now: one per set for each node held. A
/// listed silence is recognised by its sorted matchers, so two sets (or two nodes) that
/// render the same matchers share one silence. Applying the actions and planning again
/// over the result plans nothing (`tests`: `a_plan_over_its_own_result_is_empty`).
pub fn plan<'a>(
    rules: &Rules,
    nodes: impl IntoIterator<Item = NodeState<'a>>,
    silences: &[Silence],
    now: Timestamp,
) -> Plan {
    let mut out = Plan::default();
    let mut wanted: HashMap<Vec<Matcher>, Wanted> = HashMap::new();
    for node in nodes {
        let Some(hold) = hold(rules, &node, now) else {
            continue;
        };
        for (set, matchers) in rules.sets.iter().enumerate() {
            let Some(key) = matchers.render(node.name, node.labels) else {
                out.unrenderable
                    .push((node.name.to_string(), matchers.clone()));
                continue;
            };
            let this = Wanted {
                node: node.name.to_string(),
                set,
                hold,
                comment: comment(rules, &node),
            };
            match wanted.entry(key) {
                Entry::Vacant(e) => {
                    e.insert(this);
                }
                Entry::Occupied(mut e) => {
                    let w = e.get_mut();
                    let hold = merge(w.hold, this.hold);
                    let first = (this.node.as_str(), this.set) < (w.node.as_str(), w.set);
                    if (this.hold == w.hold && first) || (this.hold != w.hold && this.hold == hold)
                    {
                        *w = this;
                    }
                }
            }
        }
    }
    out.unrenderable.sort_by(|a, b| a.0.cmp(&b.0));

    let mut ours: HashMap<&[Matcher], Vec<&Silence>> = HashMap::new();
    let mut recent_creates = 0u32;
    for s in silences.iter().filter(|s| s.created_by == rules.created_by) {
        // Each creation starts its silence at the instant it is made (Alertmanager moves
        // a start in the past to now), and an expired silence stays listed for its
        // retention: the last minute's creations are read back from the list.
        if s.starts_at > now - SignedDuration::from_mins(1) && s.starts_at <= now {
            recent_creates += 1;
        }
        if s.state == State::Expired {
            continue;
        }
        let mut key = s.matchers.clone();
        key.sort();
        match wanted.get_key_value(&key) {
            Some((key, _)) => ours.entry(key.as_slice()).or_default().push(s),
            None => out.actions.push(Action::Expire {
                id: s.id.clone(),
                node: None,
            }),
        }
    }

    let mut order: Vec<(&Vec<Matcher>, &Wanted)> = wanted.iter().collect();
    order.sort_by(|a, b| (a.1.node.as_str(), a.1.set).cmp(&(b.1.node.as_str(), b.1.set)));
    let mut extends = Vec::new();
    let mut creates = Vec::new();
    let renewed_end = now.checked_add(rules.lease).unwrap_or(now);
    for (matchers, w) in order {
        let mut found = ours.remove(matchers.as_slice()).unwrap_or_default();
        // Keep the one that lasts longest (then the smallest id: every replica keeps
        // the same one); expire the others.
        found.sort_by(|a, b| b.ends_at.cmp(&a.ends_at).then_with(|| a.id.cmp(&b.id)));
        for dup in found.iter().skip(1) {
            out.actions.push(Action::Expire {
                id: dup.id.clone(),
                node: Some(w.node.clone()),
            });
        }
        match (found.first(), w.hold) {
            (None, Hold::Renewed { create: true }) => creates.push(Action::Create {
                node: w.node.clone(),
                matchers: matchers.clone(),
                ends_at: renewed_end,
                comment: w.comment.clone(),
            }),
            (None, _) => {}
            (Some(s), hold) => {
                out.held += 1;
                let ends_at = match hold {
                    Hold::Renewed { .. } if s.ends_at.duration_since(now) < rules.lease / 2 => {
                        Some(renewed_end)
                    }
                    Hold::Until(t) if s.ends_at < t => Some(t),
                    _ => None,
                };
                if let Some(ends_at) = ends_at {
                    extends.push(Action::Extend {
                        id: s.id.clone(),
                        node: w.node.clone(),
                        matchers: s.matchers.clone(),
                        starts_at: s.starts_at,
                        ends_at,
                        comment: w.comment.clone(),
                    });
                }
            }
        }
    }
    let allowed = rules.max_creates_per_minute.saturating_sub(recent_creates) as usize;
    out.capped = creates.len().saturating_sub(allowed);
    creates.truncate(allowed);
    out.held += creates.len();
    out.actions.extend(extends);
    out.actions.extend(creates);
    out
}

/// Names the instance, the node and what its condition says (the windows, until when).
fn comment(rules: &Rules, node: &NodeState<'_>) -> String {
    let window = node
        .conditions
        .iter()
        .find(|c| c.type_ == UNDER_MAINTENANCE && !c.message.is_empty())
        .map(|c| format!(": {}", c.message))
        .unwrap_or_default();
    let mut s = format!(
        "kumaco {}: maintenance of node {}{window}",
        rules.created_by, node.name
    );
    if s.len() > MAX_COMMENT_BYTES {
        let mut cut = MAX_COMMENT_BYTES - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}
