//! One run: the brain played forward from `now` over simulated node states, at one pair
//! of durations or with durations drawn, from one instant where something changes to the
//! next.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use jiff::{SignedDuration, Timestamp};

use super::drawn::{Kind, Lengths};
use super::fleet::{Edge, Fleet, Role, SpanChange, active_spans, address, paces, state_of};
use super::node::*;
use super::outcome::{OccurrenceLoad, Placement, Rollout, WindowOccurrence};
use super::queue::*;
use crate::conditions::{
    Condition, Desired, MAINTENANCE_IN_PROGRESS, Status, UNDER_MAINTENANCE, find, is_true, to_apply,
};
use crate::decision::{ActiveWindows, InWindow};
use crate::gates::Gates;
use crate::in_progress::{self, Availability, NodeState, Scope};
use crate::reasons;
use crate::window::Span;

/// Most decisions at one instant: the controller's passes after its own writes settle
/// within three (ends, then the starts into their slots, then nothing).
const MAX_PASSES: usize = 10;

/// What a run leaves: each node's placement, and the rollout.
#[derive(Debug)]
pub struct Played {
    pub(super) placements: Vec<Option<Placement>>,
    pub(super) rollout: Rollout,
    /// The node states it decided.
    pub(super) work: u64,
}

impl Played {
    /// The node states it decided: what it cost, counted the same on every machine.
    pub fn work(&self) -> u64 {
        self.work
    }
}

/// One simulation, at one pair of durations or with durations drawn.
pub(super) struct Run<'f, 'a> {
    pub(super) fleet: &'f Fleet<'a>,
    pub(super) lengths: Lengths<'f>,
    pub(super) nodes: Vec<SimNode>,
    pub(super) standing: Vec<Standing>,
    /// The fleet's lists of who each window selects, less the nodes gone.
    pub(super) lists: Vec<Vec<Vec<usize>>>,
    pub(super) scope: Scope,
    pub(super) spans: Vec<Option<Span>>,
    pub(super) active: ActiveWindows<'a>,
    /// Which nodes' standing lets them wait for a start, by cell.
    pub(super) queued: Queued,
    pub(super) happens: BinaryHeap<Reverse<Event>>,
    /// Nodes decided at every instant: in progress, working or recovering.
    /// Those of the nodes in progress or recovering whose decision may change at the
    /// next pass (see [`Run::settle`]); the others are left out of the scope.
    pub(super) busy: BTreeSet<usize>,
    /// The other nodes whose start or end paces the next start: decided at every instant
    /// too, since the brain may replace that end (with a reason why the node waits), and
    /// the interval then counts from an earlier one.
    pub(super) recent: BTreeSet<usize>,
    /// Nodes that a window opened or closed on since the last pass.
    pub(super) windows_changed: Vec<usize>,
    pub(super) paced_until: Option<Timestamp>,
    /// Nodes shown and forecast whose first maintenance has not ended yet.
    pub(super) unfinished: usize,
    /// Node states decided so far: what a run costs, counted the same on every machine.
    pub(super) work: u64,
}

impl<'f, 'a> Run<'f, 'a> {
    pub(super) fn new(fleet: &'f Fleet<'a>, lengths: Lengths<'f>) -> Self {
        let now = fleet.now;
        let active = ActiveWindows::from_spans(now, active_spans(&fleet.windows, &fleet.spans));
        let mut run = Run {
            fleet,
            lengths,
            nodes: vec![SimNode::default(); fleet.nodes.len()],
            standing: vec![Standing::default(); fleet.nodes.len()],
            lists: fleet.lists.clone(),
            scope: fleet.scope.clone(),
            spans: fleet.spans.clone(),
            active,
            queued: Queued::new(fleet.members.iter().map(Vec::len)),
            happens: BinaryHeap::new(),
            busy: BTreeSet::new(),
            recent: BTreeSet::new(),
            windows_changed: Vec::new(),
            paced_until: None,
            unfinished: 0,
            work: 0,
        };
        for (w, lists) in fleet.lists.iter().enumerate() {
            if run.spans[w].is_none() {
                continue;
            }
            for &i in lists.iter().flatten() {
                let standing = &mut run.standing[i];
                if fleet.windows[w].blackout {
                    standing.blackouts_on += 1;
                } else {
                    standing.windows_on += 1;
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
            // When it started or ended as the message records it, to the millisecond as
            // the durations learned are; else to the second.
            let since = |c: &Condition| {
                let recorded = if c.is_true() {
                    in_progress::recorded_start(&c.message)
                } else {
                    in_progress::recorded_end(&c.message)
                };
                recorded.or(c.last_transition_time).unwrap_or(now)
            };
            let standing = &mut run.standing[i];
            standing.needs = fleet.roles[i] == Role::Forecast
                && policy.required.iter().all(|t| is_true(view.conditions, t));
            standing.um = find(&conditions, UNDER_MAINTENANCE).map(|c| UnderMaintenanceWritten {
                on: c.is_true(),
                since: c.last_transition_time,
            });
            let sim = &mut run.nodes[i];
            sim.conditions = conditions;
            sim.availability = view.availability;
            sim.boot_id = view.boot_id.map(str::to_string);
            sim.seen = Some(Seen {
                version: 0,
                in_window: InWindow::of(&verdict),
                first_window: fleet.first_window(&verdict),
            });
            match mip {
                Some(c) if c.is_true() => {
                    sim.in_progress_at_now = Some(since(&c));
                    sim.working = true;
                    let elapsed = now.duration_since(since(&c)).max(SignedDuration::ZERO);
                    let length = lengths.of(view.name, Kind::Maintenance, elapsed);
                    let done = since(&c).checked_add(length).unwrap_or(Timestamp::MAX);
                    run.happens.push(Reverse(Event {
                        at: done.max(now),
                        what: Happens::Done,
                        node: i,
                    }));
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
                    run.happens.push(Reverse(Event {
                        at: back.max(now),
                        what: Happens::Back,
                        node: i,
                    }));
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
        for (i, standing) in run.standing.iter().enumerate() {
            mark(&mut run.queued, &fleet.cell, standing, i);
        }
        run
    }

    /// Plays the brain forward to the horizon, or until every maintenance forecast ended.
    pub(super) fn play(self) -> Played {
        self.play_within(u64::MAX).expect("no budget")
    }

    /// [`Run::play`], given up (`None`) once it has decided more than `budget` node
    /// states.
    pub(super) fn play_within(mut self, budget: u64) -> Option<Played> {
        let mut t = self.fleet.now;
        let mut edge = 0;
        let mut changed = true;
        loop {
            if let Some(e) = self.fleet.edges.get(edge).filter(|e| e.at == t) {
                self.apply_edge(e, t);
                edge += 1;
                changed = true;
            }
            while let Some(Reverse(Event { at, what, node: i })) = self.happens.peek().copied() {
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
                        self.wake(i);
                        let standing = &mut self.standing[i];
                        if under_maintenance(standing, t) {
                            // What the brain reads of it changed.
                            standing.alone = None;
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
                self.happens.peek().map(|Reverse(e)| e.at),
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
    pub(super) fn apply_edge(&mut self, edge: &Edge, t: Timestamp) {
        let fleet = self.fleet;
        let (standing, changed) = (&mut self.standing, &mut self.windows_changed);
        let queued = &mut self.queued;
        let mut woken = Vec::new();
        for &SpanChange { window: w, span } in &edge.changes {
            let was = self.spans[w].is_some();
            self.spans[w] = span;
            let blackout = fleet.windows[w].blackout;
            for list in &mut self.lists[w] {
                // The nodes gone leave the list: later edges skip them.
                list.retain(|&i| {
                    let standing = &mut standing[i];
                    if standing.gone() {
                        return false;
                    }
                    standing.version += 1;
                    if standing.settled {
                        woken.push(i);
                    }
                    if was != span.is_some() {
                        let count = if blackout {
                            &mut standing.blackouts_on
                        } else {
                            &mut standing.windows_on
                        };
                        if span.is_some() {
                            *count += 1;
                        } else {
                            *count -= 1;
                        }
                        mark(queued, &fleet.cell, standing, i);
                        changed.push(i);
                    }
                    true
                });
            }
        }
        for i in woken {
            self.wake(i);
        }
        self.active = ActiveWindows::from_spans(t, active_spans(&fleet.windows, &self.spans));
    }

    pub(super) fn happen(&mut self, what: Happens, i: usize, t: Timestamp) {
        // Taken back into the scope as it was left out, before it changes.
        self.wake(i);
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
                self.standing[i].needs &= policy.required.is_empty();
                mark(&mut self.queued, &self.fleet.cell, &self.standing[i], i);
                sim.working = false;
                sim.recovering = true;
                let name = self.fleet.nodes[i].name;
                let length = self.lengths.of(name, Kind::Recovery, SignedDuration::ZERO);
                let back = t.checked_add(length).unwrap_or(Timestamp::MAX);
                self.happens.push(Reverse(Event {
                    at: back,
                    what: Happens::Back,
                    node: i,
                }));
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
    pub(super) fn pass(&mut self, t: Timestamp) -> bool {
        // The pause, if any, is among the holds on every start (the shell puts it first).
        let gates = Gates {
            pause: None,
            cluster: self.fleet.cluster,
            budgets: None,
        };
        let policy = self.fleet.policy;
        let stale: Vec<usize> = (self.recent.iter().copied())
            .filter(|&i| !paces(policy, &self.nodes[i].conditions, t))
            .collect();
        for i in stale {
            self.set_recent(i, false);
        }
        let busy: Vec<usize> = self.busy.union(&self.recent).copied().collect();
        let mut queues: Vec<CellQueue> = (0..self.fleet.cells).map(CellQueue::new).collect();
        let mut wrote = false;
        let mut want = vec![1; queues.len()];
        loop {
            for (queue, &n) in queues.iter_mut().zip(&want) {
                self.fill(queue, n);
            }
            let chosen: Vec<usize> = busy
                .iter()
                .copied()
                .chain(queues.iter().flat_map(|w| w.taken.iter().copied()))
                .collect();
            for &i in &chosen {
                self.refresh(i);
            }
            self.work += chosen.len() as u64;
            let states: Vec<NodeState> = chosen.iter().map(|&i| self.state(i)).collect();
            let decided = in_progress::decide_conditions_among(
                self.fleet.policy,
                &states,
                &self.scope,
                &gates,
                t,
            );
            drop(states);
            // A group is decided as over every waiting node once one of its nodes is held:
            // the nodes after it would be held too.
            let mut more = false;
            let mut from = busy.len();
            for (queue, n) in queues.iter().zip(&mut want) {
                let to = from + queue.taken.len();
                if !queue.done && !decided.conditions[from..to].iter().any(is_held) {
                    *n *= 2;
                    more = true;
                }
                from = to;
            }
            if !more {
                return self.apply(t, &chosen, busy.len(), decided) || wrote;
            }
            // The nodes the brain decided alone (no candidates) are answered whatever else
            // is decided: written now, they leave the next, longer, queue.
            let mut decisions = decided.conditions.into_iter().skip(busy.len());
            for queue in &mut queues {
                for i in std::mem::take(&mut queue.taken) {
                    match decisions.next().flatten() {
                        Some(d) if d.status || is_held_desired(&d) => queue.taken.push(i),
                        d => wrote |= self.decided_alone(i, d.as_ref(), t),
                    }
                }
            }
        }
    }

    /// Takes waiting nodes into `queue` until it holds `want` of them or none is left.
    fn fill(&mut self, queue: &mut CellQueue, want: usize) {
        while queue.taken.len() < want && !queue.done {
            let Some(place) = self.queued.next(queue.cell, queue.next) else {
                queue.done = true;
                break;
            };
            queue.next = place + 1;
            let i = self.fleet.members[queue.cell][place];
            if self.waiting(i) && !self.still_alone(i) {
                queue.taken.push(i);
            }
        }
    }

    /// Leaves node `i`, in progress or recovering and just decided, out of the decisions
    /// until something it shows changes (its work done, its recovery over, a window
    /// opening or closing on it): until then the brain's answer for it stays the same.
    /// What it answers for a node in progress reads only what the node shows (its
    /// requirements, its boot ID, whether its window is active), and a node unavailable is
    /// never a candidate; neither reads the other nodes or, but for `--start-interval`,
    /// the time. So a node whose start or end paces the next start is not left out: the
    /// interval counts from the latest, among the nodes decided.
    fn settle(&mut self, i: usize, t: Timestamp) {
        let sim = &self.nodes[i];
        let in_progress = is_true(&sim.conditions, MAINTENANCE_IN_PROGRESS);
        let settled = (in_progress && sim.working)
            || (!in_progress && sim.recovering && sim.availability.unavailable().is_some());
        if !settled || paces(self.fleet.policy, &sim.conditions, t) {
            return;
        }
        self.busy.remove(&i);
        self.standing[i].settled = true;
        let mut scope = std::mem::take(&mut self.scope);
        let state = NodeState {
            window: None,
            ..self.state(i)
        };
        scope.leave_out(self.fleet.policy, &state);
        self.scope = scope;
    }

    /// Node `i`, left out by [`Run::settle`], is decided again from now on.
    fn wake(&mut self, i: usize) {
        if !self.standing[i].settled {
            return;
        }
        self.standing[i].settled = false;
        self.busy.insert(i);
        let mut scope = std::mem::take(&mut self.scope);
        let state = NodeState {
            window: None,
            ..self.state(i)
        };
        scope.take_back(self.fleet.policy, &state);
        self.scope = scope;
    }

    pub(super) fn set_busy(&mut self, i: usize, on: bool) {
        self.standing[i].busy = on;
        mark(&mut self.queued, &self.fleet.cell, &self.standing[i], i);
        if on {
            self.busy.insert(i);
        } else {
            self.busy.remove(&i);
        }
    }

    pub(super) fn set_recent(&mut self, i: usize, on: bool) {
        self.standing[i].recent = on;
        mark(&mut self.queued, &self.fleet.cell, &self.standing[i], i);
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
        let same = sim.seen.as_ref().map(|s| AloneKey::of(&s.in_window)) == sim.alone_on;
        if same {
            self.standing[i].alone = Some(self.standing[i].version);
        } else {
            sim.alone_on = None;
        }
        same
    }

    /// Whether the brain may make `i` a candidate now, as far as the simulation knows.
    fn waiting(&self, i: usize) -> bool {
        let standing = &self.standing[i];
        standing.queued() && standing.alone != Some(standing.version)
    }

    /// Brings what node `i` shows up to date before it is decided: its verdict, and
    /// `UnderMaintenance` as the last pass wrote it.
    pub(super) fn refresh(&mut self, i: usize) {
        let standing = self.standing[i];
        let sim = &mut self.nodes[i];
        if let Some(UnderMaintenanceWritten { on, since }) = standing.um {
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
        if sim
            .seen
            .as_ref()
            .is_some_and(|s| s.version == standing.version)
        {
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
            standing.windows_on > 0 && standing.blackouts_on == 0,
            "{}",
            self.fleet.nodes[i].name
        );
        let first = self.fleet.first_window(&verdict);
        self.nodes[i].seen = Some(Seen {
            version: standing.version,
            in_window: InWindow::of(&verdict),
            first_window: first,
        });
    }

    pub(super) fn state(&self, i: usize) -> NodeState<'_> {
        let sim = &self.nodes[i];
        let view = &self.fleet.nodes[i];
        let window = sim.seen.as_ref().map(|s| &s.in_window);
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
            holds: view.holds,
            drain: None,
        }
    }

    /// Writes what the brain decided for `chosen` (the first `busy` of them decided at
    /// every instant, the others waiting); whether anything changed.
    pub(super) fn apply(
        &mut self,
        t: Timestamp,
        chosen: &[usize],
        busy: usize,
        decided: in_progress::Decisions,
    ) -> bool {
        let mut changed = false;
        let mut unchanged_busy: Vec<usize> = Vec::new();
        for (j, (&i, d)) in chosen.iter().zip(decided.conditions).enumerate() {
            let sim = &mut self.nodes[i];
            let was = is_true(&sim.conditions, MAINTENANCE_IN_PROGRESS);
            // Written only where it differs, as the pass writes.
            if let Some(d) = d.as_ref().filter(|d| {
                crate::conditions::differs(d, find(&sim.conditions, MAINTENANCE_IN_PROGRESS))
            }) {
                set(&mut sim.conditions, d, t);
                changed = true;
            } else if j < busy && self.standing[i].busy {
                unchanged_busy.push(i);
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
                    self.standing[i].alone = Some(self.standing[i].version);
                    sim.alone_on = sim.seen.as_ref().map(|s| AloneKey::of(&s.in_window));
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
            self.standing[i].alone = None;
            self.nodes[i].alone_on = None;
        }
        for &i in chosen {
            let pacing = paces(self.fleet.policy, &self.nodes[i].conditions, t);
            self.set_recent(i, !self.standing[i].busy && pacing);
        }
        for i in unchanged_busy {
            self.settle(i, t);
        }
        changed
    }

    /// Writes the brain's answer for waiting node `i`, decided without being a candidate
    /// (its answer holds until a window changes); whether it changed.
    pub(super) fn decided_alone(&mut self, i: usize, d: Option<&Desired>, t: Timestamp) -> bool {
        let sim = &mut self.nodes[i];
        sim.why = d.map(|d| d.reason.clone());
        sim.alone_on = sim.seen.as_ref().map(|s| AloneKey::of(&s.in_window));
        self.standing[i].alone = Some(self.standing[i].version);
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

    pub(super) fn started(&mut self, i: usize, t: Timestamp) {
        let fleet = self.fleet;
        let sim = &mut self.nodes[i];
        if sim.start.is_none() && sim.in_progress_at_now.is_none() {
            let window = sim.seen.as_ref().and_then(|s| s.first_window);
            let occurrence = window.and_then(|w| Some((w, fleet.latest_active(w, t)?)));
            sim.start = Some(FirstStart { at: t, occurrence });
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
            self.happens.push(Reverse(Event {
                at: done,
                what: Happens::Done,
                node: i,
            }));
        }
        self.set_busy(i, true);
    }

    /// Each node's placement, and the occurrences' shares.
    pub(super) fn finish(self) -> Played {
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
            let from = sim.start.map(|s| s.at);
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
                (
                    None,
                    Some(FirstStart {
                        at: start,
                        occurrence: Some((w, occurrence)),
                    }),
                ) => {
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

/// Held for a slot or by the interval: every later candidate of its groups is too.
pub(super) fn is_held(d: &Option<Desired>) -> bool {
    d.as_ref().is_some_and(is_held_desired)
}

pub(super) fn is_held_desired(d: &Desired) -> bool {
    !d.status && reasons::waits_for_pace(&d.reason)
}

/// Writes `desired` on `conditions` as kumaco (or a reporter) would at `t`.
pub(super) fn set(conditions: &mut Vec<Condition>, desired: &Desired, t: Timestamp) {
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
pub(super) fn under_maintenance(standing: &mut Standing, t: Timestamp) -> bool {
    let on = standing.windows_on > 0 && standing.blackouts_on == 0;
    let since = Some(Timestamp::from_second(t.as_second()).unwrap_or(t));
    match standing.um {
        Some(written) if written.on == on => false,
        None if !on => false,
        _ => {
            standing.um = Some(UnderMaintenanceWritten { on, since });
            true
        }
    }
}
