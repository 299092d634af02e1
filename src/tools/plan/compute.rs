//! The plan, computed: the period cut at every window edge, each interval's state.

use jiff::{SignedDuration, Timestamp};

use super::super::nodes::ListedNode;
use crate::decision::{self, ActiveWindows, Progress};
use crate::window::{Occurrence, Window, WindowId};
/// More intervals than anyone reads: a guard against `@every 1s` over a month.
const MAX_EDGES: usize = 20_000;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(
        "more than {MAX_EDGES} window edges between {from} and {to}; shorten --for or check for a very frequent schedule"
    )]
    TooManyEdges { from: Timestamp, to: Timestamp },
    #[error("invalid window {0} (run kumaco validate for details)")]
    InvalidWindow(String),
}

/// A stretch of time during which nothing changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start: Timestamp,
    pub end: Timestamp,
    /// Active maintenance windows (not blackouts), sorted.
    pub windows: Vec<WindowId>,
    /// Active blackouts, sorted.
    pub blackouts: Vec<WindowId>,
    /// Nodes under maintenance (verdict Maintenance), sorted.
    pub nodes: Vec<String>,
    /// Nodes an active blackout selects, sorted.
    pub blacked_out: Vec<String>,
    /// With a lead time: nodes `MaintenancePlanned` holds (a window starts on them within
    /// the lead time, no blackout covers them at that start, and they are not in
    /// maintenance now), sorted. Always empty without a lead time.
    pub planned: Vec<String>,
}

impl Interval {
    fn same_state(&self, other: &Interval) -> bool {
        (
            &self.windows,
            &self.blackouts,
            &self.nodes,
            &self.blacked_out,
            &self.planned,
        ) == (
            &other.windows,
            &other.blackouts,
            &other.nodes,
            &other.blacked_out,
            &other.planned,
        )
    }
}

/// One window's lane: its occurrences overlapping the period, and the nodes it selects.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub window: Window,
    pub occurrences: Vec<Occurrence>,
    pub nodes: Vec<String>,
}

/// The answer over `[from, to)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub from: Timestamp,
    pub to: Timestamp,
    /// `--planned-lead-time`, when given.
    pub lead: Option<SignedDuration>,
    pub lanes: Vec<Lane>,
    pub nodes: Vec<String>,
    pub intervals: Vec<Interval>,
}

/// Computes the plan over `[from, to)` for `nodes` (already in scope), with the planned
/// nodes when `lead` is given. Adjacent intervals in the same state are merged (an edge
/// that changes nothing, such as an occurrence starting inside an overlapping one, does
/// not split a row).
pub fn compute(
    windows: &[Window],
    nodes: &[ListedNode],
    from: Timestamp,
    to: Timestamp,
    lead: Option<SignedDuration>,
) -> Result<Plan, PlanError> {
    let mut windows: Vec<Window> = windows.to_vec();
    windows.sort_by(|a, b| a.id.cmp(&b.id));
    let mut intervals: Vec<Interval> = Vec::new();
    let mut t = from;
    let mut edges = 0;
    while t < to {
        edges += 1;
        if edges > MAX_EDGES {
            return Err(PlanError::TooManyEdges { from, to });
        }
        let next = decision::next_edge(&windows, t, lead).map_or(to, |e| e.min(to));
        let interval = state_at(&windows, nodes, t, next, lead);
        match intervals.last_mut() {
            Some(last) if last.same_state(&interval) => last.end = next,
            _ => intervals.push(interval),
        }
        t = next;
    }
    let lanes = windows
        .iter()
        .map(|w| lane(w, nodes, from, to))
        .collect::<Result<_, _>>()?;
    Ok(Plan {
        from,
        to,
        lead,
        lanes,
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        intervals,
    })
}

fn state_at(
    windows: &[Window],
    nodes: &[ListedNode],
    start: Timestamp,
    end: Timestamp,
    lead: Option<SignedDuration>,
) -> Interval {
    let active = ActiveWindows::with_lead(windows, start, lead);
    let (mut ws, mut bs): (Vec<WindowId>, Vec<WindowId>) = (Vec::new(), Vec::new());
    for (w, _) in active.iter() {
        if w.blackout {
            bs.push(w.id.clone());
        } else {
            ws.push(w.id.clone());
        }
    }
    let mut interval = Interval {
        start,
        end,
        windows: ws,
        blackouts: bs,
        nodes: Vec::new(),
        blacked_out: Vec::new(),
        planned: Vec::new(),
    };
    for node in nodes {
        let verdict = active.verdict(&node.labels);
        if !verdict.blackouts.is_empty() {
            interval.blacked_out.push(node.name.clone());
        } else if verdict.is_maintenance() {
            interval.nodes.push(node.name.clone());
        }
        // The controller's rule without `--in-progress` (a plan knows no slots): a node
        // in maintenance has started, so Planned runs from `start - lead` to the start.
        let progress = if verdict.is_maintenance() {
            Progress::Started
        } else {
            Progress::Idle
        };
        let next = active.next_planned(&node.labels);
        if lead.is_some()
            && decision::planned(next, &verdict, progress, None).is_some_and(|d| d.status)
        {
            interval.planned.push(node.name.clone());
        }
    }
    interval
}

/// The occurrences of `w` overlapping `[from, to)`: starts in `(from - duration, to)`.
fn lane(
    w: &Window,
    nodes: &[ListedNode],
    from: Timestamp,
    to: Timestamp,
) -> Result<Lane, PlanError> {
    let occurrences: Vec<Occurrence> = w
        .occurrences_between(from, to)
        .take(MAX_EDGES + 1)
        .collect();
    if occurrences.len() > MAX_EDGES {
        return Err(PlanError::TooManyEdges { from, to });
    }
    Ok(Lane {
        window: w.clone(),
        occurrences,
        nodes: nodes
            .iter()
            .filter(|n| w.selector.matches(&n.labels))
            .map(|n| n.name.clone())
            .collect(),
    })
}
