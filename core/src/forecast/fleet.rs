//! What every run of one forecast shares, computed once: the windows' occurrences and
//! edges over the horizon, each node's role, who each window selects, in the brain's order
//! and by group of `--max-in-progress-per`.

use std::collections::{BTreeMap, HashMap};

use jiff::{SignedDuration, Timestamp};

use super::MAX_OCCURRENCES;
use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, find, is_true};
use crate::decision;
use crate::gates::{Gates, Hold};
use crate::in_progress::{self, NodeState, Policy, Scope};
use crate::pass::NodeView;
use crate::reasons;
use crate::selector::Labels;
use crate::window::{Occurrence, Span, Window};

/// A node's labels under the keys the forecast and the brain read again and again (the
/// windows' selectors', the groups', the blocking selectors'), looked up once; any other
/// from the node.
#[derive(Debug)]
pub(super) struct KnownLabels<'a> {
    pub(super) known: Vec<(&'a str, Option<&'a str>)>,
    pub(super) all: &'a dyn Labels,
}

impl<'a> KnownLabels<'a> {
    pub(super) fn new(keys: &[&'a str], all: &'a dyn Labels) -> Self {
        KnownLabels {
            known: keys.iter().map(|k| (*k, all.label(k))).collect(),
            all,
        }
    }
}

impl Labels for KnownLabels<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        // The keys asked are mostly the very strings the known ones were taken from (the
        // policy's, the selectors'): found by address before any is compared.
        let same = |k: &&str| std::ptr::eq(*k, key);
        match (self.known.iter().find(|(k, _)| same(k)))
            .or_else(|| self.known.iter().find(|(k, _)| *k == key))
        {
            Some((_, value)) => *value,
            None => self.all.label(key),
        }
    }
}

/// What a node is to the forecast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// Changes nothing and is changed by nothing: left out of every decision.
    Idle,
    /// Needs maintenance, but the brain keeps it from starting whatever the time.
    Held { reason: String, message: String },
    /// Needs maintenance or is in progress: forecast.
    Forecast,
    /// Needing no maintenance, but recovering from one, or pacing the next start: simulated,
    /// not shown.
    Background,
}

/// An instant where windows change: each with its new span (`None`: no longer active).
pub(super) struct Edge {
    pub(super) at: Timestamp,
    pub(super) changes: Vec<SpanChange>,
}

/// A window's new span at an edge.
pub(super) struct SpanChange {
    pub(super) window: usize,
    /// `None`: no longer active.
    pub(super) span: Option<Span>,
}

/// What every run shares: the windows followed over the horizon, the nodes' roles, who
/// each window selects.
pub(super) struct Fleet<'a> {
    pub(super) policy: &'a Policy,
    /// The gates' holds on every start: every node that would start is held.
    pub(super) cluster: &'a [Hold],
    pub(super) windows: Vec<&'a Window>,
    pub(super) nodes: &'a [NodeView<'a>],
    pub(super) now: Timestamp,
    pub(super) horizon_end: Timestamp,
    /// Each window's occurrences ending after `now` and starting before the horizon end.
    pub(super) occurrences: Vec<Vec<Occurrence>>,
    /// The windows' spans at `now`, then every change within the horizon.
    pub(super) spans: Vec<Option<Span>>,
    pub(super) edges: Vec<Edge>,
    pub(super) roles: Vec<Role>,
    /// The nodes whose state the simulation follows: every other one is left out of the
    /// decisions, its conditions as they are now.
    pub(super) simulated: Vec<bool>,
    /// The nodes shown, in the brain's order.
    pub(super) shown: Vec<usize>,
    /// How many groups of `--max-in-progress-per` the simulated nodes form (one without).
    pub(super) cells: usize,
    /// Each cell's simulated nodes, in the brain's order.
    pub(super) members: Vec<Vec<usize>>,
    /// Each node's cell and place in its `members` (`u32::MAX` for one not simulated).
    pub(super) cell: Vec<(u32, u32)>,
    /// For each window and cell, the simulated nodes the window selects, in the brain's
    /// order.
    pub(super) lists: Vec<Vec<Vec<usize>>>,
    /// For each node, the maintenance windows selecting it.
    pub(super) selected_by: Vec<Vec<usize>>,
    /// For each simulated node, every window selecting it (blackouts too), sorted.
    pub(super) selecting: Vec<Vec<usize>>,
    /// The scope, every node in it, none left out yet.
    pub(super) scope: Scope,
    /// Each node's labels as decisions read them.
    pub(super) labels: Vec<KnownLabels<'a>>,
    /// Each window's place in `windows`, by address (a verdict names windows by
    /// reference).
    pub(super) index: HashMap<usize, usize>,
}

impl<'a> Fleet<'a> {
    /// [`Fleet::gated`] without a hold on every start.
    #[cfg(test)]
    pub(super) fn new(
        windows: &[&'a Window],
        policy: &'a Policy,
        nodes: &'a [NodeView<'a>],
        now: Timestamp,
        horizon: SignedDuration,
    ) -> Fleet<'a> {
        Fleet::gated(windows, policy, nodes, &[], now, horizon)
    }

    /// What the runs over `nodes` share, `cluster` the gates' holds on every start.
    pub(super) fn gated(
        windows: &[&'a Window],
        policy: &'a Policy,
        nodes: &'a [NodeView<'a>],
        cluster: &'a [Hold],
        now: Timestamp,
        horizon: SignedDuration,
    ) -> Fleet<'a> {
        let windows: Vec<&Window> = windows.to_vec();
        let mut horizon_end = now.checked_add(horizon).unwrap_or(Timestamp::MAX);
        let mut occurrences: Vec<Vec<Occurrence>> = Vec::with_capacity(windows.len());
        for w in &windows {
            let length = w.duration.to_signed();
            let mut list = Vec::new();
            let mut next = now
                .checked_sub(length)
                .ok()
                .and_then(|t| w.schedule.next_after(t));
            while let Some(start) = next.filter(|s| *s < horizon_end) {
                if list.len() == MAX_OCCURRENCES {
                    horizon_end = start;
                    break;
                }
                let end = start.checked_add(length).unwrap_or(Timestamp::MAX);
                list.push(Occurrence { start, end });
                next = w.schedule.next_after(start);
            }
            occurrences.push(list);
        }
        for list in &mut occurrences {
            list.retain(|o| o.start < horizon_end);
        }
        let look_back = |t: Timestamp| t.checked_sub(decision::HORIZON).unwrap_or(Timestamp::MIN);
        let spans: Vec<Option<Span>> = windows
            .iter()
            .map(|w| w.span_at(now, look_back(now)))
            .collect();
        // The edges: every start and end within the horizon, where a span may change. An
        // occurrence that touches no other is a span of its own (what `span_at` answers
        // there, without its search); spans of several are asked for.
        let mut instants: Vec<(Timestamp, usize, Option<Option<Span>>)> = Vec::new();
        for (w, list) in occurrences.iter().enumerate() {
            for (k, o) in list.iter().enumerate() {
                // Before the first, an occurrence that ended by `now`; after the last, none
                // before the horizon's end.
                let alone = (k == 0 || list[k - 1].end < o.start)
                    && list.get(k + 1).map_or(horizon_end, |n| n.start) > o.end;
                let span = Span {
                    start: Some(o.start),
                    end: Some(o.end),
                };
                instants.push((o.start, w, alone.then_some(Some(span))));
                instants.push((o.end, w, alone.then_some(None)));
            }
        }
        instants.retain(|(t, ..)| *t > now && *t < horizon_end);
        instants.sort_by_key(|(t, w, _)| (*t, *w));
        instants.dedup_by_key(|(t, w, _)| (*t, *w));
        let mut current = spans.clone();
        let mut edges: Vec<Edge> = Vec::new();
        for (at, w, known) in instants {
            let span = known.unwrap_or_else(|| windows[w].span_at(at, look_back(at)));
            debug_assert_eq!(span, windows[w].span_at(at, look_back(at)));
            if span == current[w] {
                continue;
            }
            current[w] = span;
            match edges.last_mut() {
                Some(e) if e.at == at => e.changes.push(SpanChange { window: w, span }),
                _ => edges.push(Edge {
                    at,
                    changes: vec![SpanChange { window: w, span }],
                }),
            }
        }

        // Who each maintenance window could select, by distinct selector.
        let mut selectors: Vec<(&crate::selector::Selector, Vec<usize>)> = Vec::new();
        for (i, w) in windows.iter().enumerate() {
            match selectors.iter_mut().find(|(s, _)| **s == w.selector) {
                Some((_, ws)) => ws.push(i),
                None => selectors.push((&w.selector, vec![i])),
            }
        }
        let mut keys: Vec<&str> = (windows.iter().map(|w| &w.selector))
            .chain(&policy.block_node_selectors)
            .flat_map(|s| s.requirements().iter().map(|r| r.key()))
            .chain(policy.group_ceilings.iter().map(|g| g.key.as_str()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        // The groups' keys as the policy holds them: each decision looks them up.
        for key in &mut keys {
            if let Some(g) = policy.group_ceilings.iter().find(|g| g.key == *key) {
                *key = g.key.as_str();
            }
        }
        let labels: Vec<KnownLabels> = nodes
            .iter()
            .map(|n| KnownLabels::new(&keys, n.labels))
            .collect();
        let plain: Vec<NodeState> = nodes.iter().map(|n| state_of(n)).collect();
        let scope = Scope::of(policy, &plain);
        let mut roles = Vec::with_capacity(nodes.len());
        let mut simulated = vec![false; nodes.len()];
        let mut selecting: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            let mip = find(node.conditions, MAINTENANCE_IN_PROGRESS);
            let in_progress = mip.is_some_and(Condition::is_true);
            let recovering = !in_progress
                && node.availability.unavailable().is_some()
                && mip.and_then(in_progress::start_or_end).is_some();
            let pacing = paces(policy, node.conditions, now);
            let required = policy.required.iter().all(|t| is_true(node.conditions, t));
            let maybe = in_progress || recovering || pacing || required;
            if maybe {
                for (s, ws) in &selectors {
                    if s.matches(&labels[i]) {
                        selecting[i].extend(ws.iter().copied());
                    }
                }
                selecting[i].sort_unstable();
            }
            let selected = selecting[i].iter().any(|&w| !windows[w].blackout);
            let needs = required && (!policy.required.is_empty() || selected);
            let role = if in_progress || (needs && recovering) {
                Role::Forecast
            } else if needs {
                held(policy, node, &plain[i], cluster, now).unwrap_or(Role::Forecast)
            } else if recovering || pacing {
                Role::Background
            } else {
                Role::Idle
            };
            simulated[i] = matches!(role, Role::Forecast | Role::Background) || pacing;
            roles.push(role);
        }
        let mut order: Vec<usize> = (0..nodes.len()).filter(|&i| simulated[i]).collect();
        let mut shown: Vec<usize> = (0..nodes.len())
            .filter(|&i| matches!(roles[i], Role::Forecast | Role::Held { .. }))
            .collect();
        let key = |&i: &usize| (in_progress::queue_key(policy, &plain[i]), i);
        order.sort_by_key(key);
        shown.sort_by_key(key);
        let mut cells: BTreeMap<Vec<in_progress::Group>, usize> = BTreeMap::new();
        let mut lists: Vec<Vec<Vec<usize>>> = vec![Vec::new(); windows.len()];
        let mut selected_by: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut cell_of = vec![(u32::MAX, u32::MAX); nodes.len()];
        for &i in &order {
            let count = cells.len();
            let cell = *cells
                .entry(in_progress::groups_of(policy, nodes[i].labels))
                .or_insert(count);
            if cell == members.len() {
                members.push(Vec::new());
            }
            cell_of[i] = (cell as u32, members[cell].len() as u32);
            members[cell].push(i);
            for &w in &selecting[i] {
                let list = &mut lists[w];
                if list.len() <= cell {
                    list.resize(cell + 1, Vec::new());
                }
                list[cell].push(i);
                if !windows[w].blackout {
                    selected_by[i].push(w);
                }
            }
        }
        Fleet {
            policy,
            cluster,
            nodes,
            now,
            horizon_end,
            occurrences,
            spans,
            edges,
            roles,
            simulated,
            shown,
            cells: cells.len(),
            members,
            cell: cell_of,
            lists,
            selected_by,
            selecting,
            scope,
            labels,
            index: windows
                .iter()
                .enumerate()
                .map(|(i, w)| (address(w), i))
                .collect(),
            windows,
        }
    }
}

impl Fleet<'_> {
    /// `Window::latest_active`, read from the occurrences followed: the latest-starting
    /// occurrence of window `w` active at `t`, a time within the horizon.
    pub(super) fn latest_active(&self, w: usize, t: Timestamp) -> Option<Occurrence> {
        let list = &self.occurrences[w];
        let latest = list[..list.partition_point(|o| o.start <= t)].last()?;
        let active = (latest.end > t).then_some(*latest);
        debug_assert_eq!(active, self.windows[w].latest_active(t));
        active
    }

    /// The first of the maintenance windows a verdict names (by name): where a start is
    /// said to happen.
    pub(super) fn first_window(&self, verdict: &decision::Verdict) -> Option<usize> {
        self.index.get(&address(verdict.windows.first()?)).copied()
    }
}

/// A window's address: a verdict names windows by reference.
pub(super) fn address(w: &Window) -> usize {
    std::ptr::from_ref(w) as usize
}

/// The role of a node that needs maintenance: `Held` when the brain, given a window and a
/// free slot, would still not start it for a reason the simulation never changes (a
/// blocker, the node down for another reason, a health gate's hold on it or on every
/// start: the forecast reads the gates' verdicts as they are now); `None` when it is
/// forecast.
pub(super) fn held(
    policy: &Policy,
    node: &NodeView,
    plain: &NodeState,
    cluster: &[Hold],
    now: Timestamp,
) -> Option<Role> {
    if let Some(why) = node.availability.unavailable() {
        return Some(Role::Held {
            reason: reasons::NODE_UNAVAILABLE.into(),
            message: format!("the node is {why}"),
        });
    }
    let in_window = NodeState {
        window: Some(("", None)),
        window_active: true,
        holds: node.holds,
        ..*plain
    };
    let d = in_progress::decide(policy, &[in_window], &Gates::NONE, now)
        .conditions
        .pop()
        .flatten()?;
    if d.reason == reasons::BLOCKED || reasons::is_gate(&d.reason) {
        return Some(Role::Held {
            reason: d.reason,
            message: d.message,
        });
    }
    // It would start, or wait for a slot or the interval: a hold on every start comes
    // before its start.
    let would_start = d.status || reasons::waits_for_pace(&d.reason);
    let hold = cluster.first().filter(|_| would_start)?;
    Some(Role::Held {
        reason: hold.reason.to_string(),
        message: hold.message.clone(),
    })
}

/// Whether `conditions` show a start or an end that paces a start after `t`
/// (`--start-interval`).
pub(super) fn paces(policy: &Policy, conditions: &[Condition], t: Timestamp) -> bool {
    let last = find(conditions, MAINTENANCE_IN_PROGRESS).and_then(in_progress::start_or_end);
    policy
        .start_interval
        .zip(last)
        .is_some_and(|(d, last)| last.checked_add(d).is_ok_and(|until| until > t))
}

/// `node` as the decision reads it, as it is now, in no window.
pub(super) fn state_of<'n>(node: &NodeView<'n>) -> NodeState<'n> {
    NodeState {
        name: node.name,
        window: None,
        window_active: false,
        blackout: None,
        conditions: node.conditions,
        labels: node.labels,
        availability: node.availability,
        pods: node.pods,
        boot_id: node.boot_id,
        holds: &[],
        drain: None,
    }
}

pub(super) fn active_spans<'a>(
    windows: &[&'a Window],
    spans: &[Option<Span>],
) -> Vec<(&'a Window, Span)> {
    windows
        .iter()
        .zip(spans)
        .filter_map(|(w, s)| s.map(|s| (*w, s)))
        .collect()
}
