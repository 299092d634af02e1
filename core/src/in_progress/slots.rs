//! How the nodes use the slots of each ceiling: the count overall and per group of
//! `--max-in-progress-per`, and the scope a decision counts them over.

use std::collections::BTreeMap;

use super::{Availability, NodeState, Policy, Unavailable};
use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, is_true};
use crate::selector::Labels;

/// Most node names a `WaitingForSlot` message lists as holding slots while unavailable.
const NAMES_IN_MESSAGE: usize = 3;

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

    /// Counts a node as the decision does: in progress (`MaintenanceInProgress=True` in
    /// `conditions`), else unavailable when `count_unavailable` (`--count-unavailable`);
    /// each node once. `kumaco status` counts the nodes it lists with this too.
    pub fn count_node(
        &mut self,
        name: &str,
        conditions: &[Condition],
        availability: Availability,
        count_unavailable: bool,
    ) {
        if is_true(conditions, MAINTENANCE_IN_PROGRESS) {
            self.in_progress += 1;
        } else if let Some(why) = availability.unavailable().filter(|_| count_unavailable) {
            self.unavailable += 1;
            if self.unavailable_names.len() < NAMES_IN_MESSAGE {
                self.unavailable_names.push((name.to_string(), why));
            }
        }
    }

    /// Undoes [`Usage::count_node`] for a node shown as it was then.
    fn uncount(&mut self, node: &NodeState, count_unavailable: bool) {
        if is_true(node.conditions, MAINTENANCE_IN_PROGRESS) {
            self.in_progress = self.in_progress.saturating_sub(1);
        } else if node.availability.unavailable().is_some() && count_unavailable {
            self.unavailable = self.unavailable.saturating_sub(1);
            self.unavailable_names.retain(|(n, _)| n != node.name);
        }
    }

    pub(super) fn count(&mut self, node: &NodeState, count_unavailable: bool) {
        self.count_node(
            node.name,
            node.conditions,
            node.availability,
            count_unavailable,
        );
    }

    /// The unavailable nodes counted, named with why, the first few only: `n0 cordoned,
    /// n1 NotReady, +2 more` (empty when there are none).
    pub fn unavailable_listed(&self) -> String {
        let mut names: Vec<String> = self
            .unavailable_names
            .iter()
            .map(|(n, why)| format!("{n} {why}"))
            .collect();
        let more = self.unavailable - self.unavailable_names.len();
        if more > 0 {
            names.push(format!("+{more} more"));
        }
        names.join(", ")
    }

    /// `2/2 slots in use`, or with unavailable nodes `3/3 slots in use: 2 in progress, 1
    /// unavailable (node-7 NotReady)`.
    pub(super) fn message(&self) -> String {
        let mut m = format!("{}/{} slots in use", self.disrupted(), self.slots);
        if self.unavailable > 0 {
            m.push_str(&format!(
                ": {} in progress, {} unavailable ({})",
                self.in_progress,
                self.unavailable,
                self.unavailable_listed()
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

/// What a decision over some of the nodes in scope must know of all of them: how many
/// there are, overall and per group (a `P%` ceiling's slots), and how the nodes left out
/// of the decision use the slots.
///
/// [`decide`] builds one from the nodes it is given and leaves none out. A caller that
/// decides again and again over a large scope where few nodes change (the forecast's
/// simulation) builds it once and gives [`decide_among`] only the nodes that may change.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub(super) nodes: usize,
    pub(super) sizes: BTreeMap<Group, usize>,
    pub(super) left_out: Usage,
    pub(super) left_out_groups: BTreeMap<Group, Usage>,
    pub(super) left_out_unavailable: usize,
}

impl Scope {
    /// The scope of `nodes`, none of them left out yet.
    pub fn of(policy: &Policy, nodes: &[NodeState]) -> Scope {
        let mut sizes: BTreeMap<Group, usize> = BTreeMap::new();
        for node in nodes {
            for group in groups_of(policy, node.labels) {
                *sizes.entry(group).or_default() += 1;
            }
        }
        Scope {
            nodes: nodes.len(),
            sizes,
            ..Scope::default()
        }
    }

    /// `node`, one of the scope's, is left out of the decisions from now on, its use of
    /// the slots counted as it is now. A node left out while it uses a slot must never be
    /// decided again (it would count twice); one that uses none may be.
    pub fn leave_out(&mut self, policy: &Policy, node: &NodeState) {
        self.left_out_unavailable += usize::from(node.availability.unavailable().is_some());
        // A node that uses no slot counts nowhere: its groups are not even built (the
        // forecast leaves out every node waiting, at every run's start).
        if !uses_slot(node, policy.count_unavailable) {
            return;
        }
        self.left_out.count(node, policy.count_unavailable);
        for group in groups_of(policy, node.labels) {
            self.left_out_groups
                .entry(group)
                .or_default()
                .count(node, policy.count_unavailable);
        }
    }

    /// Undoes [`Scope::leave_out`] for `node`, shown as it was when left out: it is to be
    /// decided again. For a caller that leaves a node out only while nothing it shows
    /// changes (the forecast's nodes between their start and their end).
    pub fn take_back(&mut self, policy: &Policy, node: &NodeState) {
        let unavailable = usize::from(node.availability.unavailable().is_some());
        self.left_out_unavailable = self.left_out_unavailable.saturating_sub(unavailable);
        if !uses_slot(node, policy.count_unavailable) {
            return;
        }
        self.left_out.uncount(node, policy.count_unavailable);
        for group in groups_of(policy, node.labels) {
            if let Some(usage) = self.left_out_groups.get_mut(&group) {
                usage.uncount(node, policy.count_unavailable);
            }
        }
    }

    /// How many nodes are in scope.
    pub fn len(&self) -> usize {
        self.nodes
    }

    pub fn is_empty(&self) -> bool {
        self.nodes == 0
    }
}

/// Whether [`Usage::count_node`] counts `node`: in progress, or unavailable where the
/// unavailable count.
fn uses_slot(node: &NodeState, count_unavailable: bool) -> bool {
    is_true(node.conditions, MAINTENANCE_IN_PROGRESS)
        || (count_unavailable && node.availability.unavailable().is_some())
}

/// The groups of `--max-in-progress-per` a node with `labels` belongs to, one per key in
/// the policy's order.
pub fn groups_of(policy: &Policy, labels: &dyn Labels) -> Vec<Group> {
    policy
        .group_ceilings
        .iter()
        .map(|g| Group {
            key: g.key.clone(),
            value: labels.label(&g.key).map(str::to_string),
        })
        .collect()
}

/// The slots as one decision takes them: the count overall and per group, each node's
/// groups found once, and the slots held for nodes whose start waits on their pods.
pub(super) struct Ledger<'s> {
    pub(super) overall: Usage,
    /// The scope's groups, sorted, with their use.
    pub(super) groups: Vec<(&'s Group, Usage)>,
    /// Each node's groups (indices in `groups`), `per_node` a node, in the nodes' order.
    of_node: Vec<Option<usize>>,
    per_node: usize,
    /// Slots held overall and per group for nodes that would start once their pods are
    /// listed: no later candidate takes them in this decision.
    held: usize,
    held_in: Vec<usize>,
    /// Nodes unavailable, whether they count or not.
    pub(super) unavailable: usize,
}

/// The ceiling a node finds full.
#[derive(Clone, Copy)]
pub(super) enum Full {
    Overall,
    Group(usize),
}

impl<'s> Ledger<'s> {
    /// Counts how `nodes`, and the nodes `scope` leaves out, use the slots.
    pub(super) fn new(policy: &Policy, nodes: &[NodeState], scope: &'s Scope) -> Ledger<'s> {
        let overall = Usage {
            slots: policy.slots(scope.nodes),
            ..scope.left_out.clone()
        };
        // In the scope's order (sorted), so that a node's groups are found without
        // building them: this runs for every node at every pass. The nodes left out count
        // in groups of the scope, in the same order: walked alongside.
        let mut left_out = scope.left_out_groups.iter().peekable();
        let groups: Vec<(&Group, Usage)> = scope
            .sizes
            .iter()
            .map(|(group, size)| {
                let ceiling = policy
                    .group_ceilings
                    .iter()
                    .find(|g| g.key == group.key)
                    .map_or(policy.ceiling, |g| g.ceiling);
                while left_out.next_if(|(g, _)| *g < group).is_some() {}
                let usage = Usage {
                    slots: ceiling.slots(*size),
                    ..left_out
                        .next_if(|(g, _)| *g == group)
                        .map(|(_, u)| u.clone())
                        .unwrap_or_default()
                };
                (group, usage)
            })
            .collect();
        let of_node: Vec<Option<usize>> = nodes
            .iter()
            .flat_map(|node| {
                policy.group_ceilings.iter().map(|g| {
                    let value = node.labels.label(&g.key);
                    let found = groups
                        .binary_search_by(|(group, _)| {
                            (group.key.as_str(), group.value.as_deref())
                                .cmp(&(g.key.as_str(), value))
                        })
                        .ok();
                    debug_assert!(found.is_some(), "{} is not in the scope", node.name);
                    found
                })
            })
            .collect();
        let mut ledger = Ledger {
            overall,
            held_in: vec![0; groups.len()],
            groups,
            of_node,
            per_node: policy.group_ceilings.len(),
            held: 0,
            unavailable: scope.left_out_unavailable,
        };
        for (i, node) in nodes.iter().enumerate() {
            ledger.unavailable += usize::from(node.availability.unavailable().is_some());
            ledger.overall.count(node, policy.count_unavailable);
            for k in ledger.groups_at(i) {
                if let Some(g) = ledger.of_node[k] {
                    ledger.groups[g].1.count(node, policy.count_unavailable);
                }
            }
        }
        ledger
    }

    /// Node `i`'s groups (indices in `groups`), as positions in `of_node`.
    fn groups_at(&self, i: usize) -> std::ops::Range<usize> {
        i * self.per_node..(i + 1) * self.per_node
    }

    /// The ceiling node `i` finds full, the overall one first.
    pub(super) fn full(&self, i: usize) -> Option<Full> {
        if self.overall.disrupted() + self.held >= self.overall.slots {
            return Some(Full::Overall);
        }
        self.of_node[self.groups_at(i)]
            .iter()
            .flatten()
            .find(|&&g| self.groups[g].1.disrupted() + self.held_in[g] >= self.groups[g].1.slots)
            .map(|&g| Full::Group(g))
    }

    /// The `WaitingForSlot` message of a full ceiling: its count now.
    pub(super) fn message(&self, full: Full) -> String {
        match full {
            Full::Overall => self.overall.message(),
            Full::Group(g) => format!("{}: {}", self.groups[g].0, self.groups[g].1.message()),
        }
    }

    /// Holds a slot overall and in each of node `i`'s groups for the rest of the
    /// decision.
    pub(super) fn hold(&mut self, i: usize) {
        self.held += 1;
        for k in self.groups_at(i) {
            if let Some(g) = self.of_node[k] {
                self.held_in[g] += 1;
            }
        }
    }

    /// Node `i` starts: it takes a slot overall and in each of its groups.
    pub(super) fn start(&mut self, i: usize) {
        self.overall.in_progress += 1;
        for k in self.groups_at(i) {
            if let Some(g) = self.of_node[k] {
                self.groups[g].1.in_progress += 1;
            }
        }
    }
}
