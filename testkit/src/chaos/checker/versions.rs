//! Each node version the checker's watch delivers, compared with the one before: the
//! promises that hold at every version, whatever the faults:
//!
//! - the count of nodes with `MaintenanceInProgress=True` is at most the ceiling;
//! - a maintenance starts only on a node that is `UnderMaintenance=True`,
//!   `RebootRequired=True` and available (Ready neither False nor Unknown, not cordoned)
//!   in the same version;
//! - `lastTransitionTime` changes only with the status, and `UnderMaintenance=False` is
//!   never added to a node without the condition;
//! - in quiet time, `UnderMaintenance` changes only within the edge bound after a window
//!   edge or edit (else an edge landed late, or a flap).
//!
//! It keeps each node as the checks compare it ([`NodeState`]), and which of its
//! versions somebody else than kumaco wrote (the revision [`super::ceiling`] counts from).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use super::{Ctx, State, UNDER_MAINTENANCE, Write, revision};
use crate::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED};
use crate::nodes::condition;

/// The condition types kumaco writes: a node version in which nothing else changed may
/// be kumaco's own write.
const KUMACO_TYPES: [&str; 3] = [
    UNDER_MAINTENANCE,
    MAINTENANCE_IN_PROGRESS,
    "MaintenancePlanned",
];
/// The kubelet's condition; False or Unknown makes a node unavailable.
pub(super) const READY: &str = "Ready";

/// A condition as compared between versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Cond {
    pub(super) status: String,
    pub(super) reason: String,
    pub(super) message: String,
    pub(super) transition: Option<Timestamp>,
}

impl Cond {
    pub(super) fn of(c: Option<&NodeCondition>) -> Option<Cond> {
        c.map(|c| Cond {
            status: c.status.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            transition: c.last_transition_time.as_ref().map(|t| t.0),
        })
    }

    pub(super) fn is_true(c: &Option<Cond>) -> bool {
        c.as_ref().is_some_and(|c| c.status == "True")
    }
}

#[derive(Clone, Debug)]
pub(super) struct NodeState {
    pub(super) um: Option<Cond>,
    pub(super) mip: Option<Cond>,
    pub(super) rr: bool,
    /// While `RebootRequired=True`: since when (its `lastTransitionTime`), which names the
    /// requirement's episode.
    pub(super) rr_since: Option<Timestamp>,
    /// The value of the group ceiling's label key (None: no such label, or no groups).
    pub(super) group: Option<String>,
    /// Why the node is unavailable, as kumaco decodes it; None: available.
    pub(super) down: Option<&'static str>,
    /// While unavailable: a revision at or after which the unavailability began and from
    /// which it has lasted (the exact one when seen live, the listed version's after a
    /// re-list).
    pub(super) down_since: Option<u64>,
    /// The revision of the latest version of the node not written by kumaco as far as
    /// the checker can tell (0: unknown), a lower bound on where kumaco's cache was when
    /// it derived its next write to the node ([`super::ceiling`]).
    pub(super) foreign: u64,
    /// A hash of the node without kumaco's conditions, managedFields and
    /// resourceVersion: it changes with every write of somebody else's.
    pub(super) fingerprint: u64,
    pub(super) revision: u64,
}

impl NodeState {
    pub(super) fn of(node: &Node, group_key: Option<&str>) -> NodeState {
        NodeState {
            um: Cond::of(condition(node, UNDER_MAINTENANCE)),
            mip: Cond::of(condition(node, MAINTENANCE_IN_PROGRESS)),
            rr: condition(node, REBOOT_REQUIRED).is_some_and(|c| c.status == "True"),
            rr_since: condition(node, REBOOT_REQUIRED)
                .filter(|c| c.status == "True")
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            group: group_key.and_then(|k| node.metadata.labels.as_ref()?.get(k).cloned()),
            down: unavailable(node),
            down_since: None,
            foreign: 0,
            fingerprint: fingerprint(node),
            revision: revision(&node.metadata),
        }
    }

    /// In progress, or unavailable: taking a slot (kumaco's `--count-unavailable`).
    pub(super) fn disrupted(&self) -> bool {
        Cond::is_true(&self.mip) || self.down.is_some()
    }
}

/// Why `node` is unavailable to kumaco, if it is: its `Ready` condition False or
/// Unknown, or `spec.unschedulable` (a node without a Ready condition is available).
fn unavailable(node: &Node) -> Option<&'static str> {
    match condition(node, READY).map(|c| c.status.as_str()) {
        Some("False") => Some("NotReady"),
        Some("Unknown") => Some("Ready Unknown"),
        _ if node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false) =>
        {
            Some("cordoned")
        }
        _ => None,
    }
}

/// What a write of somebody else's changes: the node but for kumaco's conditions,
/// managedFields and resourceVersion (a kumaco apply changes only those).
fn fingerprint(node: &Node) -> u64 {
    let mut n = node.clone();
    n.metadata.managed_fields = None;
    n.metadata.resource_version = None;
    if let Some(conditions) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        conditions.retain(|c| !KUMACO_TYPES.contains(&c.type_.as_str()));
        // An apply may move the others in the list; their order means nothing.
        conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    }
    let mut hasher = std::hash::DefaultHasher::new();
    serde_json::to_vec(&n).unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}

impl Ctx {
    /// Returns true when a (re-)list has finished.
    pub(super) fn node_event(&self, event: Result<watcher::Event<Node>, watcher::Error>) -> bool {
        let now = Timestamp::now();
        let mut s = self.state.lock().unwrap();
        match event {
            Ok(watcher::Event::Init) => {
                s.listing = Some(HashMap::new());
                false
            }
            Ok(watcher::Event::InitApply(n)) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                let mut new = NodeState::of(&n, self.group_key());
                // Down since at most its listed version; and a gap may hide when.
                new.down_since = new.down.map(|_| new.revision);
                let old = s.nodes.get(&name);
                new.foreign = match old {
                    // The first list comes before kumaco runs: every version is foreign.
                    None if s.last_relist.is_none() => new.revision,
                    None => 0,
                    // What changed in the gap, and when, is unknown: the last foreign
                    // revision seen live is still a lower bound.
                    Some(old) => old.foreign,
                };
                if let Some(old) = old
                    && !Cond::is_true(&old.mip)
                    && Cond::is_true(&new.mip)
                {
                    s.counts.starts_in_relists += 1;
                }
                s.listing.get_or_insert_with(HashMap::new).insert(name, new);
                false
            }
            Ok(watcher::Event::InitDone) => {
                let first = s.last_relist.is_none() && s.counts.node_events == 0;
                s.nodes = s.listing.take().unwrap_or_default();
                self.count_disrupted(&mut s);
                s.last_relist = Some(now);
                if !first {
                    s.counts.node_relists += 1;
                }
                self.count_in_progress(&mut s, "a re-list");
                true
            }
            Ok(watcher::Event::Apply(n)) => {
                self.node_changed(&mut s, &n, now);
                false
            }
            Ok(watcher::Event::Delete(_)) => false,
            Err(_) => {
                // Not quiet until the list that follows is complete.
                s.listing = Some(HashMap::new());
                false
            }
        }
    }

    pub(super) fn count_in_progress(&self, s: &mut State, at: &str) {
        let count = s.nodes.values().filter(|n| Cond::is_true(&n.mip)).count();
        s.counts.in_progress = count;
        s.counts.max_in_progress = s.counts.max_in_progress.max(count);
        if count > self.cfg.ceiling {
            let ceiling = self.cfg.ceiling;
            self.violate(
                s,
                format!("{count} nodes MaintenanceInProgress=True at {at}, above the ceiling of {ceiling}"),
            );
        }
    }

    pub(super) fn node_changed(&self, s: &mut State, node: &Node, now: Timestamp) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut new = NodeState::of(node, self.group_key());
        s.counts.node_events += 1;
        s.last_node_change = Some(now);
        let Some(old) = s.nodes.get(&name).cloned() else {
            // A node created: its first version is its creator's.
            new.foreign = new.revision;
            new.down_since = new.down.map(|_| new.revision);
            s.nodes.insert(name, new);
            self.count_disrupted(s);
            return;
        };
        new.foreign = if new.fingerprint != old.fingerprint {
            new.revision
        } else {
            old.foreign
        };
        new.down_since = match (new.down, old.down_since) {
            (Some(_), Some(since)) => Some(since),
            (Some(why), None) => {
                *s.counts
                    .went_unavailable
                    .entry(why.to_string())
                    .or_default() += 1;
                Some(new.revision)
            }
            (None, _) => None,
        };
        let at = format!("node {name} (resourceVersion {})", new.revision);
        let started = !Cond::is_true(&old.mip) && Cond::is_true(&new.mip);
        if started {
            // Before the start is in the view: the others as they were just before it.
            self.check_start(s, &name, &old, &new, &at);
        }
        s.nodes.insert(name.clone(), new.clone());
        if old.disrupted() != new.disrupted() {
            self.count_disrupted(s);
        }
        let kumaco_changed = old.um != new.um || old.mip != new.mip;
        if !kumaco_changed {
            return;
        }
        s.counts.kumaco_changes += 1;
        s.last_kumaco_change = Some(now);
        s.pending.push_back(Write {
            revision: revision(&node.metadata),
            node: name.clone(),
            observed: now,
        });
        for (type_, before, after) in [
            (UNDER_MAINTENANCE, &old.um, &new.um),
            (MAINTENANCE_IN_PROGRESS, &old.mip, &new.mip),
        ] {
            if let (Some(b), Some(a)) = (before, after)
                && b.status == a.status
                && b.transition != a.transition
            {
                self.violate(
                    s,
                    format!(
                        "{type_} lastTransitionTime changed from {:?} to {:?} without a status change on {at}",
                        b.transition, a.transition
                    ),
                );
            }
        }
        if old.um.is_none() && new.um.as_ref().is_some_and(|c| c.status == "False") {
            self.violate(
                s,
                format!("UnderMaintenance=False added on {at}, which had no such condition"),
            );
        }
        if started {
            s.counts.starts += 1;
            if !Cond::is_true(&new.um) || !new.rr {
                self.violate(
                    s,
                    format!(
                        "maintenance started on {at} with UnderMaintenance={:?} and RebootRequired={}",
                        new.um.as_ref().map(|c| &c.status),
                        new.rr
                    ),
                );
            }
        }
        if started || (Cond::is_true(&old.mip) && !Cond::is_true(&new.mip)) {
            self.count_in_progress(s, &at);
        }
        if old.um.as_ref().map(|c| &c.status) != new.um.as_ref().map(|c| &c.status) {
            s.counts.transitions_true += u64::from(Cond::is_true(&new.um));
            if self.quiet(s, now) {
                if self.past_edge_bound(s, now) {
                    let edge = self.last_edge(s, now);
                    self.violate(
                        s,
                        format!(
                            "UnderMaintenance became {:?} on {at} with no window edge in the last {:?} (last edge {edge:?}): late or spurious",
                            new.um.as_ref().map(|c| &c.status),
                            self.cfg.edge_bound + self.cfg.slack
                        ),
                    );
                } else if let Some(edge) = self.last_edge(s, now) {
                    let delay = now.duration_since(edge).as_millis() as i64;
                    let max = s.counts.max_edge_delay_ms.get_or_insert(delay);
                    *max = (*max).max(delay);
                }
            }
        }
    }
}
