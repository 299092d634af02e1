//! The forecast: when each node that needs maintenance will start and end, under every
//! rule the brain applies.
//!
//! **What it computes.** From the windows, the in-progress [`Policy`], the nodes in scope
//! (as the pass reads them), how long a maintenance and a node's recovery take (median
//! and 90th percentile: learned from the nodes by [`learn`], or given) and the time, for
//! each node that needs maintenance (every required condition `True`; without required
//! conditions, every node a maintenance window selects), in the brain's order (oldest
//! requirement first, ties by name): the window occurrence it starts in and when it
//! starts and ends, at the median and at the 90th percentile; or, for a node the brain
//! keeps from starting whatever the time (`Blocked`, `NodeUnavailable`), its reason; or
//! that it does not start within the horizon. Then when the rollout completes, and for
//! each occurrence how many of the nodes it selected started in it and how many did not
//! fit (they are carried to a later occurrence, or beyond the horizon). And when the
//! rollout is expected to complete, over runs with each duration drawn from the
//! recorded ones ([`Expected`], [`drawn`]).
//!
//! **How: the brain's own code, simulated.** The forecast does not restate a rule. It
//! plays the brain forward over simulated node states: verdicts from
//! [`ActiveWindows`](crate::decision::ActiveWindows), conditions written as [`to_apply`]
//! writes them, every decision made by [`in_progress::decide_among`], the pass's own
//! decision. Time jumps from one instant where something changes to the next (a window
//! edge, a simulated end or recovery, the end of a `--start-interval`), and at each one it
//! decides again until nothing more is written, as the controller's passes after its own
//! writes do; `UnderMaintenance` is written with the decisions, so the pass after reads
//! it. A property test holds every node's start and end to a simulation of the same model
//! that runs the real pass every ten seconds.
//!
//! **The model of a maintenance.** A node that starts is worked on for the maintenance
//! duration; then its required conditions turn `False`, its boot ID changes (the reboot)
//! and it goes `NotReady`; after the recovery duration it is `Ready` and uncordoned again.
//! The work goes on if its window's end stops the maintenance first (starting again
//! meanwhile adds no work). Nothing else changes: blocking conditions, labels and pods
//! stay, nodes down for another reason stay down, a node whose requirement cleared needs
//! nothing more. Without required conditions the brain starts a node again in a later
//! window, and so does the forecast; it reports each node's first maintenance. A
//! maintenance or a recovery already longer at `now` than the duration assumed ends at
//! `now`. Deterministic, from inputs all read from the cluster: a restarted kumaco
//! forecasts the same.
//!
//! **Cost.** A decision is made only at instants where something changes, and only over
//! the nodes that may change it: those in progress or recovering, those whose start or
//! end paces the next start (the brain may replace an end with a reason to wait, and the
//! interval then counts from an earlier one), and, per group of `--max-in-progress-per`,
//! the waiting nodes in the brain's order up to the first one held for a slot or by the
//! interval: every later one of the group would be held too, as groups only fill up
//! within a pass. The others count through a [`Scope`]. So the work grows with the window
//! edges and the maintenances within the horizon, not with the nodes waiting at each
//! instant (with a start cutoff, each is decided once near each occurrence's end). A window
//! occurring more than [`MAX_OCCURRENCES`] times within the horizon shortens it
//! ([`Forecast::horizon_end`]). 5,000 nodes and 200 windows, 30 days ahead: 114-656 ms
//! (`benches/forecast.rs`, docs/benchmarks.md).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

use jiff::{SignedDuration, Timestamp};

use crate::conditions::{
    Condition, Desired, MAINTENANCE_IN_PROGRESS, Status, UNDER_MAINTENANCE, find, is_true, to_apply,
};
use crate::decision::{self, ActiveWindows, InWindow};
use crate::gates::Gates;
use crate::in_progress::{
    self, Availability, NodeState, Policy, Scope, recorded_duration, recorded_recovery,
};
use crate::pass::NodeView;
use crate::reasons;
use crate::selector::Labels;
use crate::window::{Occurrence, Span, Window, WindowId};

mod drawn;

use drawn::{Kind, Lengths, Pool};
pub use drawn::{RUNS as EXPECTED_RUNS, WORK_BUDGET as EXPECTED_WORK_BUDGET};

/// Most occurrences of one window the forecast follows: a window that occurs more often
/// within the horizon ends the forecast at its next occurrence.
pub const MAX_OCCURRENCES: usize = 10_000;

/// Most decisions at one instant: the controller's passes after its own writes settle
/// within three (ends, then the starts into their slots, then nothing).
const MAX_PASSES: usize = 10;

/// A duration at the median and at the 90th percentile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantiles {
    pub median: SignedDuration,
    pub p90: SignedDuration,
}

impl Quantiles {
    /// One duration for both (given by flag, where the cluster has no history yet).
    pub fn fixed(d: SignedDuration) -> Quantiles {
        Quantiles { median: d, p90: d }
    }

    /// The median and the 90th percentile of `samples`, by nearest rank (each a sample,
    /// the lower one of an even count's middle two); `None` without samples.
    pub fn of(samples: &mut [SignedDuration]) -> Option<Quantiles> {
        let n = samples.len();
        if n == 0 {
            return None;
        }
        samples.sort_unstable();
        Some(Quantiles {
            median: samples[rank(n, 50)],
            p90: samples[rank(n, 90)],
        })
    }
}

/// The index of the `percent`th percentile among `n > 0` sorted values, by nearest rank.
fn rank(n: usize, percent: usize) -> usize {
    (percent * n).div_ceil(100) - 1
}

/// How long a maintenance and a node's recovery take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durations {
    pub maintenance: Quantiles,
    pub recovery: Quantiles,
    /// What each was learned from; nothing for one given by flag. The expected
    /// completion ([`Expected`]) draws from it.
    pub recorded: Recorded,
}

impl Durations {
    /// Quantiles given, nothing recorded.
    pub fn given(maintenance: Quantiles, recovery: Quantiles) -> Durations {
        Durations {
            maintenance,
            recovery,
            recorded: Recorded::default(),
        }
    }
}

/// The durations the nodes record, each list sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub maintenance: Vec<SignedDuration>,
    pub recovery: Vec<SignedDuration>,
}

/// A duration learned from the nodes, and the records it comes from (sorted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sampled {
    pub quantiles: Option<Quantiles>,
    pub recorded: Vec<SignedDuration>,
}

impl Sampled {
    /// How many records.
    pub fn samples(&self) -> usize {
        self.recorded.len()
    }
}

/// What the nodes' records say of the durations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    pub maintenance: Sampled,
    pub recovery: Sampled,
}

/// The durations the nodes' `MaintenanceInProgress` conditions record (each node's
/// conditions; pass the nodes of a group to learn the group's). A maintenance counts when
/// it completed (`MaintenanceCompleted`, `NodeRebooted`): one its window's end stopped
/// says nothing of how long the work takes. A recovery counts after any end.
pub fn learn<'a>(nodes: impl IntoIterator<Item = &'a [Condition]>) -> Learned {
    let mut maintenance = Vec::new();
    let mut recovery = Vec::new();
    for conditions in nodes {
        let Some(c) = find(conditions, MAINTENANCE_IN_PROGRESS).filter(|c| !c.is_true()) else {
            continue;
        };
        if c.reason == reasons::MAINTENANCE_COMPLETED || c.reason == reasons::NODE_REBOOTED {
            maintenance.extend(recorded_duration(&c.message));
        }
        recovery.extend(recorded_recovery(&c.message));
    }
    let sampled = |mut s: Vec<SignedDuration>| Sampled {
        // Sorts them.
        quantiles: Quantiles::of(&mut s),
        recorded: s,
    };
    Learned {
        maintenance: sampled(maintenance),
        recovery: sampled(recovery),
    }
}

/// An occurrence of a window.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WindowOccurrence {
    pub window: WindowId,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// Where a node's maintenance falls, at one of the durations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In progress already (`MaintenanceInProgress=True` since `since`); `end` is `None`
    /// beyond the horizon.
    InProgress {
        since: Timestamp,
        end: Option<Timestamp>,
    },
    /// Starts at `start` in `occurrence` (the first of its windows by name, if several),
    /// after `carried` occurrences that selected it and ended before it could start;
    /// `end` is `None` beyond the horizon.
    Starts {
        occurrence: WindowOccurrence,
        start: Timestamp,
        end: Option<Timestamp>,
        carried: usize,
    },
    /// Does not start within the horizon: `why` is the brain's last reason while a window
    /// selected it; `None` when no occurrence within the horizon did.
    NoStart { why: Option<String>, carried: usize },
}

impl Placement {
    /// When the maintenance starts or started.
    pub fn start(&self) -> Option<Timestamp> {
        match self {
            Placement::InProgress { since, .. } => Some(*since),
            Placement::Starts { start, .. } => Some(*start),
            Placement::NoStart { .. } => None,
        }
    }

    /// When it ends, if within the horizon.
    pub fn end(&self) -> Option<Timestamp> {
        match self {
            Placement::InProgress { end, .. } | Placement::Starts { end, .. } => *end,
            Placement::NoStart { .. } => None,
        }
    }
}

/// A node that needs maintenance, or has it now.
#[derive(Clone, Debug, PartialEq, Eq)]
// Most nodes are forecast: boxing the large variant would save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Plan {
    /// The brain keeps it from starting whatever the time (`Blocked`, `NodeUnavailable`):
    /// its reason and message, as the brain would write them in a window.
    Held { reason: String, message: String },
    /// Its maintenance at the median durations and at the 90th percentile.
    Forecast { median: Placement, p90: Placement },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeForecast {
    pub name: String,
    pub plan: Plan,
}

/// One occurrence's share of the rollout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OccurrenceLoad {
    pub occurrence: WindowOccurrence,
    /// Nodes whose maintenance starts in it.
    pub started: usize,
    /// Nodes it selected that needed maintenance and had not started by its end.
    pub did_not_fit: usize,
}

/// The rollout at one of the durations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    /// When the last maintenance forecast ends; `None` when one does not start or end
    /// within the horizon.
    pub completion: Option<Timestamp>,
    /// Nodes forecast that do not start within the horizon.
    pub no_start: usize,
    /// The occurrences where a node starts or does not fit, by start.
    pub occurrences: Vec<OccurrenceLoad>,
}

/// What [`forecast`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forecast {
    /// Every node in scope that needs maintenance or is in progress, in the brain's
    /// order.
    pub nodes: Vec<NodeForecast>,
    pub median: Rollout,
    pub p90: Rollout,
    /// The rollout's completion with the durations drawn from the recorded ones; `None`
    /// where nothing recorded varies (durations given by flag), or where the rollout at
    /// the median does not complete within the horizon.
    pub expected: Option<Expected>,
    /// How far the forecast looked: `now + horizon`, or the next occurrence of a window
    /// that occurs more than [`MAX_OCCURRENCES`] times before then.
    pub horizon_end: Timestamp,
}

/// When the rollout completes over up to [`EXPECTED_RUNS`] simulations in which each
/// node's maintenance and recovery last a duration drawn from the recorded ones
/// ([`drawn`]): the median and the 90th percentile of their completions (nearest rank),
/// `None` for beyond the horizon. The central estimate of the rollout's end: the median
/// run's last end runs every maintenance at the median, and so comes early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The runs played: fewer than [`EXPECTED_RUNS`] where all the runs, these and the
    /// two above, would decide more than [`EXPECTED_WORK_BUDGET`] node states (very
    /// large rollouts).
    pub runs: usize,
    pub completion: Option<Timestamp>,
    pub p90: Option<Timestamp>,
}

/// Forecasts the maintenance of `nodes`, the nodes in scope, from `now` to `now +
/// horizon`, with the valid `windows` (blackouts included) and the brain's `policy`.
pub fn forecast(
    windows: &[&Window],
    policy: &Policy,
    nodes: &[NodeView],
    durations: &Durations,
    now: Timestamp,
    horizon: SignedDuration,
) -> Forecast {
    let fleet = Fleet::new(windows, policy, nodes, now, horizon);
    let at = |q: fn(&Quantiles) -> SignedDuration| {
        let d = |q2: &Quantiles, recorded: &[SignedDuration]| {
            Pool::fixed(q(q2).max(SignedDuration::ZERO), !recorded.is_empty())
        };
        let lengths = Lengths::fixed(
            d(&durations.maintenance, &durations.recorded.maintenance),
            d(&durations.recovery, &durations.recorded.recovery),
        );
        Run::new(&fleet, lengths).play()
    };
    // The two runs are independent: on two cores, side by side.
    let (median, p90) = std::thread::scope(|s| {
        let p90 = s.spawn(|| at(|q| q.p90));
        (
            at(|q| q.median),
            p90.join().expect("the 90th percentile's run"),
        )
    });
    // The drawn runs get what the two runs above left of the budget.
    let left = drawn::WORK_BUDGET.saturating_sub(median.work + p90.work);
    let expected = median
        .rollout
        .completion
        .and_then(|_| expected(&fleet, durations, left, median.work));
    let mut out: Vec<NodeForecast> = Vec::new();
    for &i in &fleet.shown {
        let plan = match &fleet.roles[i] {
            Role::Held { reason, message } => Plan::Held {
                reason: reason.clone(),
                message: message.clone(),
            },
            _ => Plan::Forecast {
                median: median.placements[i].clone().expect("forecast"),
                p90: p90.placements[i].clone().expect("forecast"),
            },
        };
        out.push(NodeForecast {
            name: nodes[i].name.to_string(),
            plan,
        });
    }
    Forecast {
        nodes: out,
        median: median.rollout,
        p90: p90.rollout,
        expected,
        horizon_end: fleet.horizon_end,
    }
}

/// The completion over up to [`drawn::RUNS`] runs with drawn durations, as many as
/// decide at most `work_budget` node states in all (a run is not begun with less left
/// than `typical`, what the median run decided, nor finished past the budget); `None`
/// when no recorded duration varies (every run would be the median's) or not one run
/// fits in the budget.
fn expected(
    fleet: &Fleet,
    durations: &Durations,
    work_budget: u64,
    typical: u64,
) -> Option<Expected> {
    let maintenance = Pool::of(&durations.recorded.maintenance, &durations.maintenance);
    let recovery = Pool::of(&durations.recorded.recovery, &durations.recovery);
    if !drawn::varies(maintenance) && !drawn::varies(recovery) {
        return None;
    }
    // Beyond the horizon sorts last.
    let mut ends: Vec<Timestamp> = Vec::with_capacity(drawn::RUNS);
    let mut budget = work_budget;
    for run in 0..drawn::RUNS as u64 {
        if budget < typical {
            break;
        }
        let lengths = Lengths {
            maintenance,
            recovery,
            run,
        };
        let Some(played) = Run::new(fleet, lengths).play_within(budget) else {
            break;
        };
        budget -= played.work.min(budget);
        ends.push(played.rollout.completion.unwrap_or(Timestamp::MAX));
    }
    if ends.is_empty() {
        return None;
    }
    ends.sort_unstable();
    let within = |t: Timestamp| (t != Timestamp::MAX).then_some(t);
    Some(Expected {
        runs: ends.len(),
        completion: within(ends[rank(ends.len(), 50)]),
        p90: within(ends[rank(ends.len(), 90)]),
    })
}

/// A node's labels under the keys the forecast and the brain read again and again (the
/// windows' selectors', the groups', the blocking selectors'), looked up once; any other
/// from the node.
#[derive(Debug)]
struct KnownLabels<'a> {
    known: Vec<(&'a str, Option<&'a str>)>,
    all: &'a dyn Labels,
}

impl<'a> KnownLabels<'a> {
    fn new(keys: &[&'a str], all: &'a dyn Labels) -> Self {
        KnownLabels {
            known: keys.iter().map(|k| (*k, all.label(k))).collect(),
            all,
        }
    }
}

impl Labels for KnownLabels<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        match self.known.iter().find(|(k, _)| *k == key) {
            Some((_, value)) => *value,
            None => self.all.label(key),
        }
    }
}

/// What a node is to the forecast.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
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
struct Edge {
    at: Timestamp,
    spans: Vec<(usize, Option<Span>)>,
}

/// What both runs share: the windows followed over the horizon, the nodes' roles, who
/// each window selects.
struct Fleet<'a> {
    policy: &'a Policy,
    windows: Vec<&'a Window>,
    nodes: &'a [NodeView<'a>],
    now: Timestamp,
    horizon_end: Timestamp,
    /// Each window's occurrences ending after `now` and starting before the horizon end.
    occurrences: Vec<Vec<Occurrence>>,
    /// The windows' spans at `now`, then every change within the horizon.
    spans: Vec<Option<Span>>,
    edges: Vec<Edge>,
    roles: Vec<Role>,
    /// The nodes whose state the simulation follows: every other one is left out of the
    /// decisions, its conditions as they are now.
    simulated: Vec<bool>,
    /// The nodes shown, in the brain's order.
    shown: Vec<usize>,
    /// Each simulated node's place in the brain's order.
    rank: Vec<u32>,
    /// How many groups of `--max-in-progress-per` the simulated nodes form (one without).
    cells: usize,
    /// For each window and cell, the simulated nodes the window selects, in the brain's
    /// order.
    lists: Vec<Vec<Vec<usize>>>,
    /// For each node, the maintenance windows selecting it.
    selected_by: Vec<Vec<usize>>,
    /// For each simulated node, every window selecting it (blackouts too), sorted.
    selecting: Vec<Vec<usize>>,
    /// The scope, every node in it, none left out yet.
    scope: Scope,
    /// Each node's labels as decisions read them.
    labels: Vec<KnownLabels<'a>>,
    /// Each window's place in `windows`, by address (a verdict names windows by
    /// reference).
    index: HashMap<usize, usize>,
}

impl<'a> Fleet<'a> {
    fn new(
        windows: &[&'a Window],
        policy: &'a Policy,
        nodes: &'a [NodeView<'a>],
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
                Some(e) if e.at == at => e.spans.push((w, span)),
                _ => edges.push(Edge {
                    at,
                    spans: vec![(w, span)],
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
                held(policy, node, &plain[i], now).unwrap_or(Role::Forecast)
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
        let mut rank = vec![u32::MAX; nodes.len()];
        let mut cells: BTreeMap<Vec<in_progress::Group>, usize> = BTreeMap::new();
        let mut lists: Vec<Vec<Vec<usize>>> = vec![Vec::new(); windows.len()];
        let mut selected_by: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r as u32;
            let count = cells.len();
            let cell = *cells
                .entry(in_progress::groups_of(policy, nodes[i].labels))
                .or_insert(count);
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
            nodes,
            now,
            horizon_end,
            occurrences,
            spans,
            edges,
            roles,
            simulated,
            shown,
            rank,
            cells: cells.len(),
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
    fn latest_active(&self, w: usize, t: Timestamp) -> Option<Occurrence> {
        let list = &self.occurrences[w];
        let latest = list[..list.partition_point(|o| o.start <= t)].last()?;
        let active = (latest.end > t).then_some(*latest);
        debug_assert_eq!(active, self.windows[w].latest_active(t));
        active
    }

    /// The first of the maintenance windows a verdict names (by name): where a start is
    /// said to happen.
    fn first_window(&self, verdict: &decision::Verdict) -> Option<usize> {
        self.index.get(&address(verdict.windows.first()?)).copied()
    }
}

/// A window's address: a verdict names windows by reference.
fn address(w: &Window) -> usize {
    std::ptr::from_ref(w) as usize
}

/// The role of a node that needs maintenance: `Held` when the brain, given a window and a
/// free slot, would still not start it for a reason the simulation never changes (a
/// blocker, the node down for another reason); `None` when it is forecast.
fn held(policy: &Policy, node: &NodeView, plain: &NodeState, now: Timestamp) -> Option<Role> {
    if let Some(why) = node.availability.unavailable() {
        return Some(Role::Held {
            reason: reasons::NODE_UNAVAILABLE.into(),
            message: format!("the node is {why}"),
        });
    }
    let in_window = NodeState {
        window: Some(("", None)),
        window_active: true,
        ..*plain
    };
    let d = in_progress::decide(policy, &[in_window], &Gates::NONE, now)
        .conditions
        .pop()
        .flatten()?;
    (d.reason == reasons::BLOCKED).then_some(Role::Held {
        reason: d.reason,
        message: d.message,
    })
}

/// Whether `conditions` show a start or an end that paces a start after `t`
/// (`--start-interval`).
fn paces(policy: &Policy, conditions: &[Condition], t: Timestamp) -> bool {
    let last = find(conditions, MAINTENANCE_IN_PROGRESS).and_then(in_progress::start_or_end);
    policy
        .start_interval
        .zip(last)
        .is_some_and(|(d, last)| last.checked_add(d).is_ok_and(|until| until > t))
}

/// `node` as the decision reads it, as it is now, in no window.
fn state_of<'n>(node: &NodeView<'n>) -> NodeState<'n> {
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

fn active_spans<'a>(windows: &[&'a Window], spans: &[Option<Span>]) -> Vec<(&'a Window, Span)> {
    windows
        .iter()
        .zip(spans)
        .filter_map(|(w, s)| s.map(|s| (*w, s)))
        .collect()
}

/// What happens to a node in the simulation, apart from the brain's decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Happens {
    /// The maintenance's work is done: requirements clear, a reboot, NotReady.
    Done,
    /// Ready and uncordoned again.
    Back,
}

/// A simulated node.
#[derive(Clone, Debug, Default)]
struct Sim {
    conditions: Vec<Condition>,
    availability: Availability,
    boot_id: Option<String>,
    reboots: u32,
    /// Its verdict, as of a version.
    seen: Option<(u32, InWindow, Option<usize>)>,
    /// What the brain read of its windows when it last decided it alone, if it did.
    alone_on: Option<AloneKey>,
    /// Its maintenance's work or its recovery is still to happen.
    working: bool,
    recovering: bool,
    /// The first maintenance forecast: when and in which (window, occurrence) it starts.
    start: Option<(Timestamp, Option<(usize, Occurrence)>)>,
    end: Option<Timestamp>,
    in_progress_at_now: Option<Timestamp>,
    why: Option<String>,
}

/// What a window edge reads and changes of a simulated node, kept apart from the rest
/// (an edge touches every node its window selects, and most of them for nothing else).
#[derive(Clone, Copy, Debug, Default)]
struct Hot {
    /// Still needs maintenance (its requirements hold).
    needs: bool,
    /// In [`Run::busy`], [`Run::recent`].
    busy: bool,
    recent: bool,
    /// Active maintenance windows and blackouts selecting it.
    windows_on: u16,
    blackouts_on: u16,
    /// Counts the changes of the windows selecting it.
    version: u32,
    /// The version at which the brain last decided it without making it a candidate: its
    /// answer holds until a window changes (its inputs are otherwise fixed, and time only
    /// brings the start cutoff closer).
    alone: Option<u32>,
    /// `UnderMaintenance` as the last pass wrote it, (True, since); written into its
    /// conditions when it is decided. `None` while it has none.
    um: Option<(bool, Option<Timestamp>)>,
}

impl Hot {
    /// Nothing it shows can change a decision any more, its own or another's.
    fn gone(&self) -> bool {
        !self.needs && !self.busy && !self.recent
    }
}

/// What the brain's answer for a node that is no candidate reads of its windows: whether
/// it is under maintenance and until when, whether a window is active, which blackouts.
/// Not the windows' names: only a start's message reads them. While this and everything
/// else the node shows stay the same, so does the answer (time only brings the start
/// cutoff closer), though windows open and close around it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AloneKey {
    until: Option<Option<Timestamp>>,
    window_active: bool,
    blackout: Option<String>,
}

impl AloneKey {
    fn of(w: &InWindow) -> AloneKey {
        AloneKey {
            until: w.window().map(|(_, until)| until),
            window_active: w.window_active(),
            blackout: w.blackout().map(str::to_string),
        }
    }
}

/// What a run leaves: each node's placement, and the rollout.
struct Played {
    placements: Vec<Option<Placement>>,
    rollout: Rollout,
    /// The node states it decided.
    work: u64,
}

/// One simulation, at one pair of durations or with durations drawn.
struct Run<'f, 'a> {
    fleet: &'f Fleet<'a>,
    lengths: Lengths<'f>,
    nodes: Vec<Sim>,
    hot: Vec<Hot>,
    /// The fleet's lists of who each window selects, less the nodes gone.
    lists: Vec<Vec<Vec<usize>>>,
    scope: Scope,
    spans: Vec<Option<Span>>,
    active: ActiveWindows<'a>,
    /// The maintenance windows active now.
    open: Vec<usize>,
    /// For each window and cell, how far the nodes gone for good reach.
    cursors: Vec<Vec<usize>>,
    happens: BinaryHeap<Reverse<(Timestamp, Happens, usize)>>,
    /// Nodes decided at every instant: in progress, working or recovering.
    busy: BTreeSet<usize>,
    /// The other nodes whose start or end paces the next start: decided at every instant
    /// too, since the brain may replace that end (with a reason why the node waits), and
    /// the interval then counts from an earlier one.
    recent: BTreeSet<usize>,
    /// Nodes that a window opened or closed on since the last pass.
    windows_changed: Vec<usize>,
    paced_until: Option<Timestamp>,
    /// Nodes shown and forecast whose first maintenance has not ended yet.
    unfinished: usize,
    /// Node states decided so far: what a run costs, counted the same on every machine.
    work: u64,
}

impl<'f, 'a> Run<'f, 'a> {
    fn new(fleet: &'f Fleet<'a>, lengths: Lengths<'f>) -> Self {
        let now = fleet.now;
        let active = ActiveWindows::from_spans(now, active_spans(&fleet.windows, &fleet.spans));
        let mut run = Run {
            fleet,
            lengths,
            nodes: vec![Sim::default(); fleet.nodes.len()],
            hot: vec![Hot::default(); fleet.nodes.len()],
            lists: fleet.lists.clone(),
            scope: fleet.scope.clone(),
            spans: fleet.spans.clone(),
            active,
            open: Vec::new(),
            cursors: fleet.lists.iter().map(|l| vec![0; l.len()]).collect(),
            happens: BinaryHeap::new(),
            busy: BTreeSet::new(),
            recent: BTreeSet::new(),
            windows_changed: Vec::new(),
            paced_until: None,
            unfinished: 0,
            work: 0,
        };
        run.open = (0..fleet.windows.len())
            .filter(|&w| run.spans[w].is_some() && !fleet.windows[w].blackout)
            .collect();
        for (w, lists) in fleet.lists.iter().enumerate() {
            if run.spans[w].is_none() {
                continue;
            }
            for &i in lists.iter().flatten() {
                let hot = &mut run.hot[i];
                if fleet.windows[w].blackout {
                    hot.blackouts_on += 1;
                } else {
                    hot.windows_on += 1;
                }
            }
        }
        let policy = fleet.policy;
        for (i, view) in fleet.nodes.iter().enumerate() {
            if !fleet.simulated[i] {
                run.scope.leave_out(policy, &state_of(view));
                continue;
            }
            let verdict = run.active.verdict(view.labels);
            let conditions = view.conditions.to_vec();
            // UnderMaintenance as the windows say now is written by the first pass.
            run.windows_changed.push(i);
            let mip = find(&conditions, MAINTENANCE_IN_PROGRESS).cloned();
            let since = |c: &Condition| c.last_transition_time.unwrap_or(now);
            let hot = &mut run.hot[i];
            hot.needs = fleet.roles[i] == Role::Forecast
                && policy.required.iter().all(|t| is_true(view.conditions, t));
            hot.um =
                find(&conditions, UNDER_MAINTENANCE).map(|c| (c.is_true(), c.last_transition_time));
            let sim = &mut run.nodes[i];
            sim.conditions = conditions;
            sim.availability = view.availability;
            sim.boot_id = view.boot_id.map(str::to_string);
            sim.seen = Some((0, InWindow::of(&verdict), fleet.first_window(&verdict)));
            match mip {
                Some(c) if c.is_true() => {
                    sim.in_progress_at_now = Some(since(&c));
                    sim.working = true;
                    let elapsed = now.duration_since(since(&c)).max(SignedDuration::ZERO);
                    let length = lengths.of(view.name, Kind::Maintenance, elapsed);
                    let done = since(&c).checked_add(length).unwrap_or(Timestamp::MAX);
                    run.happens.push(Reverse((done.max(now), Happens::Done, i)));
                    run.set_busy(i, true);
                }
                Some(c)
                    if view.availability.unavailable().is_some()
                        && in_progress::start_or_end(&c).is_some() =>
                {
                    sim.recovering = true;
                    let elapsed = now.duration_since(since(&c)).max(SignedDuration::ZERO);
                    let length = lengths.of(view.name, Kind::Recovery, elapsed);
                    let back = since(&c).checked_add(length).unwrap_or(Timestamp::MAX);
                    run.happens.push(Reverse((back.max(now), Happens::Back, i)));
                    run.set_busy(i, true);
                }
                _ => {
                    run.scope.leave_out(policy, &state_of(view));
                    if paces(policy, &sim.conditions, now) {
                        run.set_recent(i, true);
                    }
                }
            }
            if fleet.roles[i] == Role::Forecast {
                run.unfinished += 1;
            }
        }
        run
    }

    /// Plays the brain forward to the horizon, or until every maintenance forecast ended.
    fn play(self) -> Played {
        self.play_within(u64::MAX).expect("no budget")
    }

    /// [`Run::play`], given up (`None`) once it has decided more than `budget` node
    /// states.
    fn play_within(mut self, budget: u64) -> Option<Played> {
        let mut t = self.fleet.now;
        let mut edge = 0;
        let mut changed = true;
        loop {
            if let Some(e) = self.fleet.edges.get(edge).filter(|e| e.at == t) {
                self.apply_edge(e, t);
                edge += 1;
                changed = true;
            }
            while let Some(Reverse((at, what, i))) = self.happens.peek().copied() {
                if at > t {
                    break;
                }
                self.happens.pop();
                self.happen(what, i, t);
                changed = true;
            }
            if changed || self.paced_until == Some(t) {
                for _ in 0..MAX_PASSES {
                    let mut wrote = self.pass(t);
                    // The pass writes UnderMaintenance with its decisions: the next pass
                    // reads it.
                    for i in std::mem::take(&mut self.windows_changed) {
                        let hot = &mut self.hot[i];
                        if under_maintenance(hot, t) {
                            // What the brain reads of it changed.
                            hot.alone = None;
                            self.nodes[i].alone_on = None;
                            wrote = true;
                        }
                    }
                    if !wrote {
                        break;
                    }
                }
            }
            changed = false;
            if self.unfinished == 0 {
                break;
            }
            if self.work > budget {
                return None;
            }
            let next = [
                self.fleet.edges.get(edge).map(|e| e.at),
                self.happens.peek().map(|Reverse((at, ..))| *at),
                self.paced_until.filter(|p| *p > t),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(n) if n < self.fleet.horizon_end => t = n,
                _ => break,
            }
        }
        Some(self.finish())
    }

    /// Windows open, close or extend at `t`: the nodes they select count them, and
    /// `UnderMaintenance` changes where the pass would change it.
    fn apply_edge(&mut self, edge: &Edge, t: Timestamp) {
        let fleet = self.fleet;
        let (hot, changed) = (&mut self.hot, &mut self.windows_changed);
        for &(w, span) in &edge.spans {
            let was = self.spans[w].is_some();
            self.spans[w] = span;
            let blackout = fleet.windows[w].blackout;
            for list in &mut self.lists[w] {
                // The nodes gone leave the list: later edges skip them.
                list.retain(|&i| {
                    let hot = &mut hot[i];
                    if hot.gone() {
                        return false;
                    }
                    hot.version += 1;
                    if was != span.is_some() {
                        let count = if blackout {
                            &mut hot.blackouts_on
                        } else {
                            &mut hot.windows_on
                        };
                        if span.is_some() {
                            *count += 1;
                        } else {
                            *count -= 1;
                        }
                        changed.push(i);
                    }
                    true
                });
            }
            self.cursors[w].fill(0);
        }
        self.active = ActiveWindows::from_spans(t, active_spans(&fleet.windows, &self.spans));
        self.open = (0..fleet.windows.len())
            .filter(|&w| self.spans[w].is_some() && !fleet.windows[w].blackout)
            .collect();
    }

    fn happen(&mut self, what: Happens, i: usize, t: Timestamp) {
        let policy = self.fleet.policy;
        let sim = &mut self.nodes[i];
        match what {
            Happens::Done => {
                for type_ in &policy.required {
                    let cleared = Desired::new(type_, false, "MaintenanceDone", String::new());
                    set(&mut sim.conditions, &cleared, t);
                }
                if sim.boot_id.is_some() {
                    sim.reboots += 1;
                    sim.boot_id = Some(format!("forecast-boot-{}", sim.reboots));
                }
                sim.availability = Availability {
                    ready: Some(Status::False),
                    unschedulable: true,
                    disrupted_by: None,
                };
                self.hot[i].needs &= policy.required.is_empty();
                sim.working = false;
                sim.recovering = true;
                let name = self.fleet.nodes[i].name;
                let length = self.lengths.of(name, Kind::Recovery, SignedDuration::ZERO);
                let back = t.checked_add(length).unwrap_or(Timestamp::MAX);
                self.happens.push(Reverse((back, Happens::Back, i)));
            }
            Happens::Back => {
                sim.availability = Availability {
                    ready: Some(Status::True),
                    unschedulable: false,
                    disrupted_by: None,
                };
                sim.recovering = false;
            }
        }
    }

    /// One decision at `t`, as one pass makes it; whether it wrote anything (the
    /// controller then passes again).
    fn pass(&mut self, t: Timestamp) -> bool {
        let policy = self.fleet.policy;
        let stale: Vec<usize> = (self.recent.iter().copied())
            .filter(|&i| !paces(policy, &self.nodes[i].conditions, t))
            .collect();
        for i in stale {
            self.set_recent(i, false);
        }
        let busy: Vec<usize> = self.busy.union(&self.recent).copied().collect();
        let mut walks: Vec<Walk> = (0..self.fleet.cells).map(|c| self.walk(c)).collect();
        let mut wrote = false;
        let mut want = vec![1; walks.len()];
        loop {
            for (walk, &n) in walks.iter_mut().zip(&want) {
                walk.fill(self, n);
            }
            let chosen: Vec<usize> = busy
                .iter()
                .copied()
                .chain(walks.iter().flat_map(|w| w.taken.iter().copied()))
                .collect();
            for &i in &chosen {
                self.refresh(i);
            }
            self.work += chosen.len() as u64;
            let states: Vec<NodeState> = chosen.iter().map(|&i| self.state(i)).collect();
            let decided =
                in_progress::decide_among(self.fleet.policy, &states, &self.scope, &Gates::NONE, t);
            drop(states);
            // A group is decided as over every waiting node once one of its nodes is held:
            // the nodes after it would be held too.
            let mut more = false;
            let mut from = busy.len();
            for (walk, n) in walks.iter().zip(&mut want) {
                let to = from + walk.taken.len();
                if !walk.done && !decided.conditions[from..to].iter().any(is_held) {
                    *n *= 2;
                    more = true;
                }
                from = to;
            }
            if !more {
                return self.apply(t, &chosen, busy.len(), decided) || wrote;
            }
            // The nodes the brain decided alone (no candidates) are answered whatever else
            // is decided: written now, they leave the next, longer, walk.
            let mut decisions = decided.conditions.into_iter().skip(busy.len());
            for walk in &mut walks {
                for i in std::mem::take(&mut walk.taken) {
                    match decisions.next().flatten() {
                        Some(d) if d.status || is_held_desired(&d) => walk.taken.push(i),
                        d => wrote |= self.decided_alone(i, d.as_ref(), t),
                    }
                }
            }
        }
    }

    /// The walk through one cell's waiting nodes, past the ones gone for good.
    fn walk(&mut self, cell: usize) -> Walk {
        let mut heads = BinaryHeap::new();
        for &w in &self.open {
            let Some(list) = self.lists[w].get(cell) else {
                continue;
            };
            let cursor = &mut self.cursors[w][cell];
            while list.get(*cursor).is_some_and(|&i| self.hot[i].gone()) {
                *cursor += 1;
            }
            if let Some(&i) = list.get(*cursor) {
                heads.push(Reverse((self.fleet.rank[i], w, *cursor)));
            }
        }
        Walk {
            cell,
            heads,
            last: None,
            taken: Vec::new(),
            done: false,
        }
    }

    fn set_busy(&mut self, i: usize, on: bool) {
        self.hot[i].busy = on;
        if on {
            self.busy.insert(i);
        } else {
            self.busy.remove(&i);
        }
    }

    fn set_recent(&mut self, i: usize, on: bool) {
        self.hot[i].recent = on;
        if on {
            self.recent.insert(i);
        } else {
            self.recent.remove(&i);
        }
    }

    /// Whether the brain's last answer for `i`, given alone, still holds though windows
    /// changed around it (its verdict, brought up to date, reads the same).
    fn still_alone(&mut self, i: usize) -> bool {
        if self.nodes[i].alone_on.is_none() {
            return false;
        }
        self.refresh(i);
        let sim = &mut self.nodes[i];
        let same = sim.seen.as_ref().map(|s| AloneKey::of(&s.1)) == sim.alone_on;
        if same {
            self.hot[i].alone = Some(self.hot[i].version);
        } else {
            sim.alone_on = None;
        }
        same
    }

    /// Whether the brain may make `i` a candidate now, as far as the simulation knows.
    fn waiting(&self, i: usize) -> bool {
        let hot = &self.hot[i];
        hot.needs
            && !hot.busy
            && !hot.recent
            && hot.windows_on > 0
            && hot.blackouts_on == 0
            && hot.alone != Some(hot.version)
    }

    /// Brings what node `i` shows up to date before it is decided: its verdict, and
    /// `UnderMaintenance` as the last pass wrote it.
    fn refresh(&mut self, i: usize) {
        let hot = self.hot[i];
        let sim = &mut self.nodes[i];
        if let Some((on, since)) = hot.um {
            let status = Status::from(on);
            match sim
                .conditions
                .iter_mut()
                .find(|c| c.type_ == UNDER_MAINTENANCE)
            {
                Some(c) if c.is_true() == on && c.last_transition_time == since => {}
                Some(c) => (c.status, c.last_transition_time) = (status, since),
                None => sim.conditions.push(Condition {
                    type_: UNDER_MAINTENANCE.into(),
                    status,
                    reason: reasons::MAINTENANCE_WINDOW.into(),
                    message: String::new(),
                    last_transition_time: since,
                    last_heartbeat_time: None,
                }),
            }
        }
        if sim.seen.as_ref().is_some_and(|s| s.0 == hot.version) {
            return;
        }
        // Who selects it was matched once: no selector is matched again.
        let fleet = self.fleet;
        let verdict = self.active.verdict_where(|w| {
            fleet
                .index
                .get(&address(w))
                .is_some_and(|w| fleet.selecting[i].binary_search(w).is_ok())
        });
        debug_assert_eq!(verdict, self.active.verdict(fleet.nodes[i].labels));
        debug_assert_eq!(
            verdict.is_maintenance(),
            hot.windows_on > 0 && hot.blackouts_on == 0,
            "{}",
            self.fleet.nodes[i].name
        );
        let first = self.fleet.first_window(&verdict);
        self.nodes[i].seen = Some((hot.version, InWindow::of(&verdict), first));
    }

    fn state(&self, i: usize) -> NodeState<'_> {
        let sim = &self.nodes[i];
        let view = &self.fleet.nodes[i];
        let window = sim.seen.as_ref().map(|s| &s.1);
        NodeState {
            name: view.name,
            window: window.and_then(InWindow::window),
            window_active: window.is_some_and(InWindow::window_active),
            blackout: window.and_then(InWindow::blackout),
            conditions: &sim.conditions,
            labels: &self.fleet.labels[i],
            availability: sim.availability,
            pods: view.pods,
            boot_id: sim.boot_id.as_deref(),
            holds: &[],
            drain: None,
        }
    }

    /// Writes what the brain decided for `chosen` (the first `busy` of them decided at
    /// every instant, the others waiting); whether anything changed.
    fn apply(
        &mut self,
        t: Timestamp,
        chosen: &[usize],
        busy: usize,
        decided: in_progress::Decisions,
    ) -> bool {
        let mut changed = false;
        for (j, (&i, d)) in chosen.iter().zip(decided.conditions).enumerate() {
            let sim = &mut self.nodes[i];
            let was = is_true(&sim.conditions, MAINTENANCE_IN_PROGRESS);
            // Written only where it differs, as the pass writes.
            if let Some(d) = d.as_ref().filter(|d| {
                crate::conditions::differs(d, find(&sim.conditions, MAINTENANCE_IN_PROGRESS))
            }) {
                set(&mut sim.conditions, d, t);
                changed = true;
            }
            let is = is_true(&sim.conditions, MAINTENANCE_IN_PROGRESS);
            if is && !was {
                changed = true;
                self.started(i, t);
            } else if was && !is {
                changed = true;
                let sim = &mut self.nodes[i];
                if sim.end.is_none() && (sim.start.is_some() || sim.in_progress_at_now.is_some()) {
                    sim.end = Some(t);
                    if self.fleet.roles[i] == Role::Forecast {
                        self.unfinished -= 1;
                    }
                }
            } else if j >= busy && !is {
                sim.why = d.as_ref().map(|d| d.reason.clone());
                if !d.as_ref().is_some_and(is_held_desired) {
                    self.hot[i].alone = Some(self.hot[i].version);
                    sim.alone_on = sim.seen.as_ref().map(|s| AloneKey::of(&s.1));
                }
            }
        }
        self.paced_until = decided.next_start;
        // Nodes back to waiting or done: what they show now (a start or end that paces,
        // no slot) counts from the scope.
        let idle: Vec<usize> = self
            .busy
            .iter()
            .copied()
            .filter(|&i| {
                let sim = &self.nodes[i];
                !sim.working
                    && !sim.recovering
                    && !is_true(&sim.conditions, MAINTENANCE_IN_PROGRESS)
                    && sim.availability.unavailable().is_none()
            })
            .collect();
        let mut scope = std::mem::take(&mut self.scope);
        for &i in &idle {
            self.set_busy(i, false);
            let state = NodeState {
                window: None,
                ..self.state(i)
            };
            scope.leave_out(self.fleet.policy, &state);
        }
        self.scope = scope;
        for i in idle {
            self.hot[i].alone = None;
            self.nodes[i].alone_on = None;
        }
        for &i in chosen {
            let pacing = paces(self.fleet.policy, &self.nodes[i].conditions, t);
            self.set_recent(i, !self.hot[i].busy && pacing);
        }
        changed
    }

    /// Writes the brain's answer for waiting node `i`, decided without being a candidate
    /// (its answer holds until a window changes); whether it changed.
    fn decided_alone(&mut self, i: usize, d: Option<&Desired>, t: Timestamp) -> bool {
        let sim = &mut self.nodes[i];
        sim.why = d.map(|d| d.reason.clone());
        sim.alone_on = sim.seen.as_ref().map(|s| AloneKey::of(&s.1));
        self.hot[i].alone = Some(self.hot[i].version);
        match d.filter(|d| {
            crate::conditions::differs(d, find(&sim.conditions, MAINTENANCE_IN_PROGRESS))
        }) {
            Some(d) => {
                set(&mut sim.conditions, d, t);
                true
            }
            None => false,
        }
    }

    fn started(&mut self, i: usize, t: Timestamp) {
        let fleet = self.fleet;
        let sim = &mut self.nodes[i];
        if sim.start.is_none() && sim.in_progress_at_now.is_none() {
            let window = sim.seen.as_ref().and_then(|s| s.2);
            let occurrence = window.and_then(|w| Some((w, fleet.latest_active(w, t)?)));
            sim.start = Some((t, occurrence));
        }
        // A node that starts again before its work is done (a window's end stopped it)
        // is still being worked on: one piece of work per node at a time.
        if !sim.working {
            sim.working = true;
            let name = fleet.nodes[i].name;
            let length = self
                .lengths
                .of(name, Kind::Maintenance, SignedDuration::ZERO);
            let done = t.checked_add(length).unwrap_or(Timestamp::MAX);
            self.happens.push(Reverse((done, Happens::Done, i)));
        }
        self.set_busy(i, true);
    }

    /// Each node's placement, and the occurrences' shares.
    fn finish(self) -> Played {
        let fleet = self.fleet;
        let mut started: Vec<Vec<usize>> =
            fleet.occurrences.iter().map(|o| vec![0; o.len()]).collect();
        // Occurrences a node did not fit in: a prefix of each window's, counted with
        // differences.
        let mut missed: Vec<Vec<i64>> = fleet
            .occurrences
            .iter()
            .map(|o| vec![0; o.len() + 1])
            .collect();
        let mut placements: Vec<Option<Placement>> = vec![None; fleet.nodes.len()];
        let mut rollout = Rollout::default();
        let mut completion = Some(fleet.now);
        for &i in &fleet.shown {
            if fleet.roles[i] != Role::Forecast {
                continue;
            }
            let sim = &self.nodes[i];
            let from = sim.start.map(|s| s.0);
            let mut carried = 0;
            if sim.in_progress_at_now.is_none() {
                for &w in &fleet.selected_by[i] {
                    let list = &fleet.occurrences[w];
                    let k = from.map_or(list.len(), |s| list.partition_point(|o| o.end <= s));
                    missed[w][0] += 1;
                    missed[w][k] -= 1;
                    carried += k;
                }
            }
            let placement = match (sim.in_progress_at_now, sim.start) {
                (Some(since), _) => Placement::InProgress {
                    since,
                    end: sim.end,
                },
                (None, Some((start, Some((w, occurrence))))) => {
                    if let Ok(k) = fleet.occurrences[w].binary_search(&occurrence) {
                        started[w][k] += 1;
                    }
                    Placement::Starts {
                        occurrence: WindowOccurrence {
                            window: fleet.windows[w].id.clone(),
                            start: occurrence.start,
                            end: occurrence.end,
                        },
                        start,
                        end: sim.end,
                        carried,
                    }
                }
                _ => {
                    rollout.no_start += 1;
                    Placement::NoStart {
                        why: sim.why.clone(),
                        carried,
                    }
                }
            };
            completion = completion.zip(placement.end()).map(|(a, b)| a.max(b));
            placements[i] = Some(placement);
        }
        rollout.completion = completion;
        for (w, list) in fleet.occurrences.iter().enumerate() {
            let mut missing = 0;
            for (k, o) in list.iter().enumerate() {
                missing += missed[w][k];
                if started[w][k] > 0 || missing > 0 {
                    rollout.occurrences.push(OccurrenceLoad {
                        occurrence: WindowOccurrence {
                            window: fleet.windows[w].id.clone(),
                            start: o.start,
                            end: o.end,
                        },
                        started: started[w][k],
                        did_not_fit: missing as usize,
                    });
                }
            }
        }
        rollout
            .occurrences
            .sort_by(|a, b| a.occurrence.cmp(&b.occurrence));
        Played {
            placements,
            rollout,
            work: self.work,
        }
    }
}

/// A cell's waiting nodes in the brain's order: the lists of the open windows selecting
/// them, merged.
struct Walk {
    cell: usize,
    /// (rank of the node at the head, window, position in its list), smallest rank first.
    heads: BinaryHeap<Reverse<(u32, usize, usize)>>,
    last: Option<u32>,
    taken: Vec<usize>,
    done: bool,
}

impl Walk {
    /// Takes waiting nodes until it holds `want` of them or none is left.
    fn fill(&mut self, run: &mut Run, want: usize) {
        while self.taken.len() < want && !self.done {
            let Some(Reverse((rank, w, pos))) = self.heads.pop() else {
                self.done = true;
                break;
            };
            let list = &run.lists[w][self.cell];
            let i = list[pos];
            if let Some(&next) = list.get(pos + 1) {
                self.heads.push(Reverse((run.fleet.rank[next], w, pos + 1)));
            }
            if self.last == Some(rank) {
                continue;
            }
            self.last = Some(rank);
            if run.waiting(i) && !run.still_alone(i) {
                self.taken.push(i);
            }
        }
    }
}

/// Held for a slot or by the interval: every later candidate of its groups is too.
fn is_held(d: &Option<Desired>) -> bool {
    d.as_ref().is_some_and(is_held_desired)
}

fn is_held_desired(d: &Desired) -> bool {
    !d.status && (d.reason == reasons::WAITING_FOR_SLOT || d.reason == reasons::START_INTERVAL)
}

/// Writes `desired` on `conditions` as kumaco (or a reporter) would at `t`.
fn set(conditions: &mut Vec<Condition>, desired: &Desired, t: Timestamp) {
    let pos = conditions.iter().position(|c| c.type_ == desired.type_);
    let written = to_apply(desired, pos.map(|p| &conditions[p]), t);
    match pos {
        Some(p) => conditions[p] = written,
        None => conditions.push(written),
    }
}

/// `UnderMaintenance` where the pass would change it: True while a maintenance window
/// and no blackout selects the node, False over a True one (never added False); whether
/// it changed. Only its status and transition: the decision reads no more of it.
fn under_maintenance(hot: &mut Hot, t: Timestamp) -> bool {
    let on = hot.windows_on > 0 && hot.blackouts_on == 0;
    let since = Some(Timestamp::from_second(t.as_second()).unwrap_or(t));
    match hot.um {
        Some((was, _)) if was == on => false,
        None if !on => false,
        _ => {
            hot.um = Some((on, since));
            true
        }
    }
}

#[cfg(test)]
mod tests;
