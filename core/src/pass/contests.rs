//! Other kumaco instances on the pass's nodes: which nodes two live instances claim
//! (a contest), and how this instance gives up what it should no longer decide (dropped
//! next to a live co-owner, else relinquished).

use std::collections::BTreeSet;

use jiff::Timestamp;

use super::{NodeView, Plan, Rules};
use crate::conditions::{Condition, Desired};
use crate::decision;
use crate::peers::{self, LeaseRef, Liveness, Owner, Peers};

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

/// The other field managers owning kumaco's conditions on `node`.
pub(super) fn others<'n>(node: &NodeView<'n>, rules: &Rules) -> impl Iterator<Item = &'n Owner> {
    node.owners
        .iter()
        .filter(move |o| o.manager != rules.instance && !o.types.is_empty())
}

/// Whether the in-scope node of `plan` is contested: a live kumaco instance owns one of
/// kumaco's conditions on it (both instances claim the node), or holds back a write of
/// this one (the bound: `held_back`, the node's write it defers, names them). In a
/// contest of differing opinions the instance whose value is on the node owns it alone,
/// and the other one reports the contest: the one held back.
pub(super) fn contest(
    plan: &Plan,
    held_back: Option<&Deferred>,
    rules: &Rules,
    peers: &Peers,
    now: Timestamp,
) -> Option<Contest> {
    let live = |m: &str| peers::is_kumaco(m) && peers.liveness(m, now) == Liveness::Live;
    let mut with: Vec<String> = others(&plan.node, rules)
        .map(|o| o.manager.as_str())
        .chain(
            held_back
                .into_iter()
                .flat_map(|d| d.by.iter().map(String::as_str)),
        )
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
pub(super) fn give_up(
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
