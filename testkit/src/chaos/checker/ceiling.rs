//! Starts at the ceiling: kumaco never starts a node while the disrupted nodes (in
//! progress or unavailable, each once) are at the ceiling, overall and in the node's
//! zone, and never starts a node twice for one requirement.
//!
//! Nodes go down on their own (NotReady, Ready Unknown, cordoned) whenever they like, so
//! the disrupted count may exceed the ceiling; what kumaco promises is never to add to
//! it: when it starts node X, fewer than the ceiling were disrupted, overall and in X's
//! group, *in the cluster as kumaco saw it*. The checker cannot see kumaco's cache, and
//! its own view is not kumaco's: a node that went down while kumaco's write was on its
//! way, or before kumaco's watch delivered it, is no breach. So it counts only what
//! kumaco must have seen, by etcd revision, not by time:
//!
//! - kumaco's apply of X carries the resourceVersion it was derived from as a
//!   precondition (`metadata.resourceVersion`), so the version of X just before the
//!   start (in the checker's stream, which is in revision order) is the one kumaco
//!   decided on. kumaco took that version from its node cache, or from its own
//!   pending write, which it derived earlier from its cache, and so on back. Following
//!   X's versions back past kumaco's own writes to the latest one somebody else wrote
//!   (a *foreign* version: something other than kumaco's conditions and the
//!   bookkeeping changed) gives a revision R that kumaco's node cache had reached when
//!   it derived the start: its watch is one stream in revision order (a re-list is a
//!   consistent snapshot, newer), and the cache of one process only moves forward. A
//!   different process (a new leader) has no pending write of its own for X, so it took
//!   the version from its cache.
//! - so every node whose unavailability began at or before R and lasted until the
//!   start, kumaco saw unavailable; every node `MaintenanceInProgress=True` just before
//!   the start, kumaco knew (only kumaco starts maintenances, and a leader writes only
//!   from lists of its own term). Those are counted: fewer than the ceiling, overall
//!   and in X's zone, or it is a violation. A node that went down after R, or came back
//!   in between, is not counted (kumaco may not have seen it); nodes down at the start
//!   that were not counted make the start *raced*, not a breach, and are tallied.
//! - after a re-list of the checker's own watch, a node unavailable in the list counts
//!   from its listed resourceVersion (its unavailability may have begun in the gap), and
//!   X's foreign revision stays the last one seen live (any revision before kumaco's is
//!   a lower bound): both only make fewer nodes count. A start seen only in a re-list is
//!   not checked (no version before it).
//!
//! The same precondition makes "X was available" a check on X's own version: the start
//! changes only kumaco's conditions, so X's Ready and `spec.unschedulable` in it are
//! those kumaco decided on.
//!
//! One maintenance per requirement: a node never starts twice while its
//! `RebootRequired=True` is the same episode (the same `lastTransitionTime`), which with
//! kured's executor would be a second reboot for one requirement.

use std::collections::HashMap;

use super::versions::{Cond, NodeState};
use super::{Ctx, LISTED, State};

impl Ctx {
    pub(super) fn group_key(&self) -> Option<&str> {
        self.cfg.group_ceiling.as_ref().map(|(k, _)| k.as_str())
    }

    /// The disrupted nodes now, overall and in the fullest group, for the figures.
    pub(super) fn count_disrupted(&self, s: &mut State) {
        let mut overall = 0;
        let mut unavailable = 0;
        let mut groups: HashMap<Option<&str>, usize> = HashMap::new();
        for n in s.nodes.values().filter(|n| n.disrupted()) {
            overall += 1;
            unavailable += usize::from(n.down.is_some());
            *groups.entry(n.group.as_deref()).or_default() += 1;
        }
        let in_group = groups.values().copied().max().unwrap_or(0);
        let c = &mut s.counts;
        c.max_unavailable = c.max_unavailable.max(unavailable);
        c.max_disrupted = c.max_disrupted.max(overall);
        c.max_disrupted_in_group = c.max_disrupted_in_group.max(in_group);
        let group_ceiling = self.cfg.group_ceiling.as_ref().map_or(usize::MAX, |g| g.1);
        if overall > self.cfg.ceiling || in_group > group_ceiling {
            c.events_above_ceiling += 1;
        }
    }

    /// A start of `name` seen live, at `revision`: the disrupted nodes kumaco must have
    /// seen (the module docs) are fewer than each ceiling. `s.nodes` holds every other
    /// node as it was just before the start.
    pub(super) fn check_start(
        &self,
        s: &mut State,
        name: &str,
        old: &NodeState,
        new: &NodeState,
        at: &str,
    ) {
        s.counts.starts_checked += 1;
        if let Some(since) = new.rr_since
            && s.episodes.insert(name.to_string(), since) == Some(since)
        {
            self.violate(
                s,
                format!(
                    "a second maintenance started on {at} for one requirement \
                     (RebootRequired=True since {since}): a second reboot"
                ),
            );
        }
        if let Some(why) = new.down {
            self.violate(
                s,
                format!(
                    "maintenance started on {at}, which is unavailable ({why}) in the version the start was derived from"
                ),
            );
        }
        // kumaco's cache had reached this revision when it derived the start.
        let seen = old.foreign;
        let group_key = self.group_key();
        // (in progress, unavailable and seen, unavailable and maybe not seen), overall
        // and in the node's group; with the names, for a message.
        #[derive(Default)]
        struct Count {
            in_progress: usize,
            unavailable: usize,
            unseen: usize,
            names: Vec<String>,
        }
        let (mut overall, mut group) = (Count::default(), Count::default());
        for (other, n) in &s.nodes {
            if other == name || !n.disrupted() {
                continue;
            }
            let same_group = group_key.is_some() && n.group == new.group;
            let counts: &mut [&mut Count] = if same_group {
                &mut [&mut overall, &mut group]
            } else {
                &mut [&mut overall]
            };
            for c in counts.iter_mut() {
                if Cond::is_true(&n.mip) {
                    c.in_progress += 1;
                    c.names.push(format!("{other} in progress"));
                } else if n.down_since.is_some_and(|since| since <= seen) {
                    c.unavailable += 1;
                    c.names.push(format!(
                        "{other} {} since resourceVersion {}",
                        n.down.unwrap_or_default(),
                        n.down_since.unwrap_or_default()
                    ));
                } else {
                    c.unseen += 1;
                }
            }
        }
        let ceilings = [
            ("overall".to_string(), &overall, Some(self.cfg.ceiling)),
            (
                format!(
                    "in group {}={}",
                    group_key.unwrap_or_default(),
                    new.group.as_deref().unwrap_or("<none>")
                ),
                &group,
                self.cfg.group_ceiling.as_ref().map(|g| g.1),
            ),
        ];
        let mut last_slot = false;
        let mut raced = false;
        let mut breach = None;
        for (what, c, ceiling) in &ceilings {
            let Some(ceiling) = *ceiling else { continue };
            let counted = c.in_progress + c.unavailable;
            last_slot |= counted + 1 == ceiling;
            raced |= counted < ceiling && counted + c.unseen >= ceiling;
            if counted >= ceiling && breach.is_none() {
                let mut names = c.names.clone();
                names.sort();
                let more = names.len().saturating_sub(LISTED);
                names.truncate(LISTED);
                breach = Some(format!(
                    "maintenance started on {at} while {counted} nodes were disrupted {what} (ceiling {ceiling}): {} in progress, {} unavailable since at most resourceVersion {seen}, which kumaco's cache had reached when it derived the start: {}{}",
                    c.in_progress,
                    c.unavailable,
                    names.join(", "),
                    if more > 0 {
                        format!(", +{more} more")
                    } else {
                        String::new()
                    }
                ));
            }
        }
        s.counts.starts_at_last_slot += u64::from(last_slot);
        s.counts.starts_raced += u64::from(raced);
        s.counts.starts_with_unavailable_counted += u64::from(overall.unavailable > 0);
        if let Some(breach) = breach {
            self.violate(s, breach);
        }
    }
}
