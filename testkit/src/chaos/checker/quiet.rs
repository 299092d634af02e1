//! The promises checked in quiet time, against the plan and the slots.
//!
//! In quiet time — no fault active, and `settle` passed since the last one ended — and
//! once `edge_bound + slack` has passed since the last window edge or edit (kumaco's
//! 1 s, plus the checker's own watch delay on a loaded machine):
//! - the nodes `UnderMaintenance=True` are exactly those `kumaco plan` puts in
//!   maintenance at that instant, and no `UnderMaintenance` changes (an edge landed
//!   late, or a flap);
//! - no node waits for maintenance (in a window, `RebootRequired=True`, available, not in
//!   progress) while a slot is free overall and in its zone (disrupted nodes below both
//!   ceilings), and none stays in progress once `RebootRequired` is False, for longer
//!   than `edge_bound + slack`.

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;

use super::versions::Cond;
use super::{Ctx, State, signed};

impl Ctx {
    /// Whether the time-based checks apply at `now`.
    pub(super) fn quiet(&self, s: &State, now: Timestamp) -> bool {
        let settled = s
            .last_fault_end
            .is_none_or(|end| now.duration_since(end) >= signed(self.cfg.settle));
        let relisted = s
            .last_relist
            .is_none_or(|t| now.duration_since(t) >= signed(self.cfg.slack));
        s.faults.is_empty() && settled && relisted && s.listing.is_none()
    }

    /// The instant the last edge (or edit) took effect, if the plan covers `now`.
    pub(super) fn last_edge(&self, s: &State, now: Timestamp) -> Option<Timestamp> {
        let seg = s.plan.at(now)?;
        Some(match s.plan_from {
            Some(from) if from > seg.start => from,
            _ => seg.start,
        })
    }

    pub(super) fn past_edge_bound(&self, s: &State, now: Timestamp) -> bool {
        let allowed = signed(self.cfg.edge_bound + self.cfg.slack);
        self.last_edge(s, now)
            .is_some_and(|edge| now.duration_since(edge) >= allowed)
    }

    pub(super) fn tick(&self) {
        let now = Timestamp::now();
        let mut s = self.state.lock().unwrap();
        self.check_writes(&mut s, now);
        if !self.quiet(&s, now) || !self.past_edge_bound(&s, now) {
            s.starved.clear();
            s.overdue_since = None;
            return;
        }
        let Some(seg) = s.plan.at(now) else {
            return;
        };
        let expected = &seg.nodes;
        let mut missing = Vec::new();
        let mut extra = Vec::new();
        for (name, n) in &s.nodes {
            match (expected.contains(name), Cond::is_true(&n.um)) {
                (true, false) => missing.push(name.clone()),
                (false, true) => extra.push(name.clone()),
                _ => {}
            }
        }
        if !missing.is_empty() || !extra.is_empty() {
            missing.sort();
            extra.sort();
            let (start, end) = (seg.start, seg.end);
            self.violate(
                &mut s,
                format!(
                    "the nodes differ from kumaco plan for [{start}, {end}): {} should be UnderMaintenance=True and are not (first: {:?}), {} are and should not be (first: {:?})",
                    missing.len(),
                    missing.first(),
                    extra.len(),
                    extra.first()
                ),
            );
            return;
        }
        s.counts.plan_checks += 1;
        // Disrupted nodes overall and per group, as the checker sees them now.
        let mut disrupted = 0;
        let mut in_groups: HashMap<Option<&str>, usize> = HashMap::new();
        for n in s.nodes.values().filter(|n| n.disrupted()) {
            disrupted += 1;
            *in_groups.entry(n.group.as_deref()).or_default() += 1;
        }
        let group_ceiling = self.cfg.group_ceiling.as_ref().map(|g| g.1);
        let starved: Vec<(String, usize)> = s
            .nodes
            .iter()
            .filter(|(_, n)| {
                Cond::is_true(&n.um) && n.rr && !Cond::is_true(&n.mip) && n.down.is_none()
            })
            .filter(|(name, _)| !self.cfg.budget_nodes.contains(*name))
            .filter_map(|(name, n)| {
                let in_group = in_groups.get(&n.group.as_deref()).copied().unwrap_or(0);
                let free = disrupted < self.cfg.ceiling
                    && group_ceiling.is_none_or(|ceiling| in_group < ceiling);
                free.then(|| (name.clone(), in_group))
            })
            .collect();
        let overdue = s
            .nodes
            .iter()
            .find(|(_, n)| Cond::is_true(&n.mip) && !n.rr)
            .map(|(name, _)| name.clone());
        let allowed = signed(self.cfg.edge_bound + self.cfg.slack);
        s.starved
            .retain(|name, _| starved.iter().any(|(n, _)| n == name));
        let mut late = None;
        for (node, in_group) in starved {
            let since = *s.starved.entry(node.clone()).or_insert(now);
            if now.duration_since(since) >= allowed && late.is_none() {
                late = Some((node, in_group, since));
            }
        }
        if let Some((node, in_group, since)) = late {
            let group = match &self.cfg.group_ceiling {
                Some((key, ceiling)) => format!(", {in_group} of {ceiling} in its {key}"),
                None => String::new(),
            };
            self.violate(
                &mut s,
                format!(
                    "node {node} waits for maintenance in its window with RebootRequired=True, available, while {disrupted} of {} slots are in use (in progress or unavailable){group}, since {since}",
                    self.cfg.ceiling
                ),
            );
        }
        match overdue {
            Some(node) => {
                let since = *s.overdue_since.get_or_insert(now);
                if now.duration_since(since) >= allowed {
                    self.violate(
                        &mut s,
                        format!(
                            "node {node} is still MaintenanceInProgress=True with RebootRequired no longer True, since {since}"
                        ),
                    );
                }
            }
            None => s.overdue_since = None,
        }
    }
}
