//! Events on the Nodes (`--node-events`): which should exist now, and their names, so that
//! `kubectl describe node` tells the story of a node's maintenance.
//!
//! Derived from the conditions this instance owns as the cluster shows them, never from
//! what this process remembers: each event reports one state of one condition (type,
//! status, reason) that began at its `lastTransitionTime`, and is named by a hash of the
//! instance, the node's uid and that state. A restarted or newly elected kumaco computes
//! the same names and its creations are answered AlreadyExists. Only states that began
//! within [`HORIZON`] are due, so that an event the API server has already expired (its
//! TTL, 1 h by default, is longer) is never posted again.
//!
//! Bound: at most one event per condition type kumaco owns (three) per change of that
//! condition's status or reason, so at most three per node per pass that changes it.
//!
//! A node two instances claim (`pass::Contest`) gets a Warning `NodeContested` per other
//! instance, named by the instance, the node's uid and the other field manager: posted
//! once while the contest lasts, and again only after the API server has expired it (its
//! event TTL, 1 h by default) if the contest still lasts then.

use jiff::Timestamp;

use crate::conditions::{
    self, Condition, MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, Status, UNDER_MAINTENANCE,
};
use crate::decision::HORIZON;
use crate::fingerprint::Fnv;
use std::borrow::Cow;
use std::collections::HashMap;

use crate::pass::{Contest, NodeView, Pending, overlay};
use crate::reasons;

/// The namespace of events about cluster-scoped objects: the API server refuses any other
/// for an event whose `regarding` has no namespace, and kubectl finds them there.
pub const NAMESPACE: &str = "default";

/// Longest event note the API server accepts, in bytes.
const MAX_NOTE_BYTES: usize = 1024;

/// A node as this module reads it.
#[derive(Clone, Copy, Debug)]
pub struct NodeRef<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub conditions: &'a [Condition],
    /// The condition types this instance owns on the node (managedFields).
    pub owned: &'a [String],
}

/// An event that should exist on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEvent {
    /// `<node>.<hash>`: the same in every process for the same state.
    pub name: String,
    pub node: String,
    pub uid: String,
    pub reason: &'static str,
    pub note: String,
    /// The condition whose state the event reports (empty for a contest).
    pub condition: String,
    /// A Warning (a contest), else Normal.
    pub warning: bool,
}

/// The event reason for a condition state, if that state is part of the story. Left out:
/// the start states ("requirement not met", "no window"), which every node shows, and the
/// relinquishing ones.
pub fn reason_for(c: &Condition) -> Option<&'static str> {
    let (ty, status, reason) = (c.type_.as_str(), c.status, c.reason.as_str());
    Some(match (ty, status) {
        (UNDER_MAINTENANCE, Status::True) => "MaintenanceWindowStarted",
        // kumaco writes UnderMaintenance=False only over a True one: this is an end.
        (UNDER_MAINTENANCE, Status::False) if reason == reasons::NO_ACTIVE_MAINTENANCE_WINDOW => {
            "MaintenanceWindowEnded"
        }
        (UNDER_MAINTENANCE, Status::False) if reason == reasons::MAINTENANCE_BLACKOUT => {
            "MaintenanceBlocked"
        }
        (MAINTENANCE_IN_PROGRESS, Status::True) => "MaintenanceStarted",
        (MAINTENANCE_IN_PROGRESS, Status::False) => match reason {
            r if reasons::ends_maintenance(r) => "MaintenanceCompleted",
            r if reasons::waits_for_pace(r) => "WaitingForSlot",
            reasons::BLOCKED
            | reasons::MAINTENANCE_BLACKOUT
            | reasons::START_CUTOFF
            | reasons::NODE_UNAVAILABLE => "MaintenanceBlocked",
            r if reasons::is_gate(r) => "MaintenanceBlocked",
            _ => return None,
        },
        (MAINTENANCE_PLANNED, Status::True) => "MaintenancePlanned",
        _ => return None,
    })
}

/// The node events that should exist now, over the nodes as the cluster shows them.
pub fn due<'a>(
    nodes: impl IntoIterator<Item = NodeRef<'a>>,
    instance: &str,
    now: Timestamp,
) -> Vec<NodeEvent> {
    let since = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
    let mut out = Vec::new();
    for node in nodes {
        if node.uid.is_empty() {
            continue;
        }
        for c in node.conditions {
            if !node.owned.contains(&c.type_) {
                continue;
            }
            let (Some(reason), Some(at)) = (reason_for(c), c.last_transition_time) else {
                continue;
            };
            if at < since {
                continue;
            }
            out.push(NodeEvent {
                name: event_name(instance, node, c, at),
                node: node.name.to_string(),
                uid: node.uid.to_string(),
                reason,
                note: conditions::bounded(
                    format!(
                        "{}={} ({}): {}",
                        c.type_,
                        c.status.as_str(),
                        c.reason,
                        c.message
                    ),
                    MAX_NOTE_BYTES,
                ),
                condition: c.type_.clone(),
                warning: false,
            });
        }
    }
    out
}

/// The Warning events for a node in this instance's scope that the kumaco instances
/// `with` also claim: one per other instance.
pub fn contested(name: &str, uid: &str, with: &[String], instance: &str) -> Vec<NodeEvent> {
    if uid.is_empty() {
        return Vec::new();
    }
    with.iter()
        .map(|other| {
            let mut h = Fnv::default();
            for part in [instance, uid, "NodeContested", other.as_str()] {
                h.write_str(part);
            }
            NodeEvent {
                name: name_for(name, h.finish()),
                node: name.to_string(),
                uid: uid.to_string(),
                reason: "NodeContested",
                note: conditions::bounded(
                    format!(
                        "kumaco instances {instance} and {other} both manage this node's \
                         conditions: each rewrites a condition the other changed at most once \
                         per resync interval; give the node to one of them (docs/instances.md, \
                         Moving nodes between instances)"
                    ),
                    MAX_NOTE_BYTES,
                ),
                condition: String::new(),
                warning: true,
            }
        })
        .collect()
}

/// The node events due now over the nodes as this instance sees them, the contested
/// ones' warnings included. A live instance reads the cluster's record of what it wrote
/// (the cache); a shadow (`pending` given, `--dry-run`) reads its own view instead, the
/// cache overlaid with the writes it would have made.
pub fn due_now<'a>(
    nodes: impl IntoIterator<Item = NodeView<'a>>,
    pending: Option<&HashMap<String, Pending>>,
    contested: &[Contest],
    instance: &str,
    now: Timestamp,
) -> Vec<NodeEvent> {
    let nodes: Vec<NodeView> = nodes.into_iter().collect();
    let seen: Vec<(Cow<[Condition]>, Vec<String>)> = nodes
        .iter()
        .map(|n| {
            let mut owned = n.owned.to_vec();
            let Some(pending) = pending else {
                return (Cow::Borrowed(n.conditions), owned);
            };
            let mine = pending.get(n.name);
            if let Some(p) = mine {
                owned.extend(p.conditions.iter().map(|c| c.type_.clone()));
            }
            (overlay(mine, n, now).0, owned)
        })
        .collect();
    let mut out = due(
        nodes
            .iter()
            .zip(&seen)
            .map(|(n, (conditions, owned))| NodeRef {
                name: n.name,
                uid: n.uid,
                conditions,
                owned,
            }),
        instance,
        now,
    );
    for c in contested {
        let uid = nodes
            .iter()
            .find(|n| n.name == c.node)
            .map_or("", |n| n.uid);
        out.extend(self::contested(&c.node, uid, &c.with, instance));
    }
    out
}

fn event_name(instance: &str, node: NodeRef, c: &Condition, at: Timestamp) -> String {
    let mut h = Fnv::default();
    for part in [instance, node.uid, &c.type_, c.status.as_str(), &c.reason] {
        h.write_str(part);
    }
    h.write_u64(at.as_second() as u64);
    name_for(node.name, h.finish())
}

/// `<node>.<hash>`.
fn name_for(node: &str, hash: u64) -> String {
    crate::fingerprint::object_name(node, hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ts;

    fn cond(ty: &str, status: Status, reason: &str, at: &str) -> Condition {
        Condition {
            type_: ty.into(),
            status,
            reason: reason.into(),
            message: "m".into(),
            last_transition_time: Some(ts(at)),
            last_heartbeat_time: None,
        }
    }

    fn owned() -> Vec<String> {
        [UNDER_MAINTENANCE, MAINTENANCE_IN_PROGRESS]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn one_event_per_recent_state_of_an_owned_condition() {
        let conditions = [
            cond(
                UNDER_MAINTENANCE,
                Status::True,
                reasons::MAINTENANCE_WINDOW,
                "2026-01-01T02:00:00Z",
            ),
            cond(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::WAITING_FOR_SLOT,
                "2026-01-01T02:00:00Z",
            ),
            // Not ours: a node agent's condition of the same family is not reported.
            cond(
                MAINTENANCE_PLANNED,
                Status::True,
                reasons::MAINTENANCE_SCHEDULED,
                "2026-01-01T02:00:00Z",
            ),
        ];
        let owned = owned();
        let node = NodeRef {
            name: "n1",
            uid: "uid-1",
            conditions: &conditions,
            owned: &owned,
        };
        let due = due([node], "kumaco/ops/kumaco", ts("2026-01-01T02:10:00Z"));
        let reasons: Vec<&str> = due.iter().map(|e| e.reason).collect();
        assert_eq!(reasons, ["MaintenanceWindowStarted", "WaitingForSlot"]);
        assert_eq!(
            due[1].note,
            "MaintenanceInProgress=False (WaitingForSlot): m"
        );
        assert!(due[0].name.starts_with("n1."), "{}", due[0].name);
        assert_ne!(due[0].name, due[1].name);
        // The same state later in the horizon: the same names (a restart posts nothing
        // new); past the horizon: nothing.
        let again = super::due([node], "kumaco/ops/kumaco", ts("2026-01-01T02:29:00Z"));
        assert_eq!(again, due);
        assert!(super::due([node], "kumaco/ops/kumaco", ts("2026-01-01T02:31:00Z")).is_empty());
    }

    #[test]
    fn names_change_with_the_state_and_the_node() {
        let owned = owned();
        let name = |uid: &str, c: Condition| {
            let conditions = [c];
            let node = NodeRef {
                name: "n1",
                uid,
                conditions: &conditions,
                owned: &owned,
            };
            due([node], "i", ts("2026-01-01T02:10:00Z"))
                .pop()
                .map(|e| e.name)
        };
        let at = "2026-01-01T02:00:00Z";
        let waiting = name(
            "u",
            cond(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::WAITING_FOR_SLOT,
                at,
            ),
        );
        let blocked = name(
            "u",
            cond(MAINTENANCE_IN_PROGRESS, Status::False, reasons::BLOCKED, at),
        );
        let other_node = name(
            "v",
            cond(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::WAITING_FOR_SLOT,
                at,
            ),
        );
        let later = name(
            "u",
            cond(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::WAITING_FOR_SLOT,
                "2026-01-01T02:05:00Z",
            ),
        );
        assert!(waiting.is_some());
        for other in [&blocked, &other_node, &later] {
            assert_ne!(&waiting, other);
        }
        // The start state of every node is not news.
        let requirement = name(
            "u",
            cond(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::REQUIREMENT_NOT_MET,
                at,
            ),
        );
        assert_eq!(requirement, None);
    }

    #[test]
    fn a_long_node_name_gives_a_valid_event_name() {
        let long = format!("{}-x", "a".repeat(235));
        let owned = owned();
        let conditions = [cond(
            UNDER_MAINTENANCE,
            Status::True,
            reasons::MAINTENANCE_WINDOW,
            "2026-01-01T02:00:00Z",
        )];
        let node = NodeRef {
            name: &long,
            uid: "u",
            conditions: &conditions,
            owned: &owned,
        };
        let e = &due([node], "i", ts("2026-01-01T02:00:00Z"))[0];
        assert!(e.name.len() <= 253, "{}", e.name.len());
        assert!(e.name.starts_with(&"a".repeat(235)) && !e.name.contains("-."));
    }

    #[test]
    fn a_contest_is_one_warning_per_other_instance() {
        let with = ["kumaco/b/b".to_string(), "kumaco/c/c".to_string()];
        let events = contested("n1", "uid-1", &with, "kumaco/a/a");
        assert_eq!(events.len(), 2);
        assert!(
            events
                .iter()
                .all(|e| e.warning && e.reason == "NodeContested")
        );
        assert!(events[0].note.contains("kumaco/b/b"));
        assert_ne!(events[0].name, events[1].name);
        // The same contest, the same name, in every process; another node, another name.
        assert_eq!(events, contested("n1", "uid-1", &with, "kumaco/a/a"));
        assert_ne!(
            events[0].name,
            contested("n1", "uid-2", &with, "kumaco/a/a")[0].name
        );
        assert!(contested("n1", "", &with, "kumaco/a/a").is_empty());
    }
}
