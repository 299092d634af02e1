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
//! writes them, every decision made by [`in_progress::decide_among`] (less its counts
//! per group), the pass's own decision. Time jumps from one instant where something changes to the next (a window
//! edge, a simulated end or recovery, the end of a `--start-interval`), and at each one it
//! decides again until nothing more is written, as the controller's passes after its own
//! writes do; `UnderMaintenance` is written with the decisions, so the pass after reads
//! it. A property test holds every node's start and end to a simulation of the same model
//! that runs the real pass at every step of a fixed length.
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
//! ([`Forecast::horizon_end`]). What it costs at up to 5,000 nodes and 200 windows:
//! `benches/forecast.rs`, docs/benchmarks.md, "Forecast".

use jiff::{SignedDuration, Timestamp};

use crate::in_progress::Policy;
use crate::pass::NodeView;
use crate::window::Window;

mod drawn;
mod fleet;
mod model;
mod node;
mod outcome;
mod queue;
mod runs;
mod simulation;

#[cfg(test)]
use drawn::{Lengths, Pool};
pub use drawn::{RUNS as EXPECTED_RUNS, WORK_BUDGET as EXPECTED_WORK_BUDGET};
use fleet::Fleet;
pub use model::{Durations, Learned, Quantiles, Recorded, Sampled, learn};
pub use outcome::{
    Expected, Forecast, NodeForecast, OccurrenceLoad, Placement, Plan, Rollout, WindowOccurrence,
};
use runs::Tally;
pub use runs::{Drawing, Quantile, Runs};
pub use simulation::Played;
#[cfg(test)]
use simulation::Run;

/// Most occurrences of one window the forecast follows: a window that occurs more often
/// within the horizon ends the forecast at its next occurrence.
pub const MAX_OCCURRENCES: usize = 10_000;

/// Forecasts the maintenance of `nodes`, the nodes in scope, from `now` to `now +
/// horizon`, with the valid `windows` (blackouts included) and the brain's `policy`: every
/// run one after another ([`Runs`] to play them elsewhere).
pub fn forecast(
    windows: &[&Window],
    policy: &Policy,
    nodes: &[NodeView],
    durations: &Durations,
    now: Timestamp,
    horizon: SignedDuration,
) -> Forecast {
    let runs = Runs::new(windows, policy, nodes, &[], durations, now, horizon);
    let median = runs.play(Quantile::Median);
    let p90 = runs.play(Quantile::P90);
    let expected = runs
        .drawing(&median, &p90)
        .and_then(|drawing| played_in_turn(&runs.fleet, &drawing));
    runs.combine(median, p90, expected)
}

/// The expected completion, the drawn runs played one after another, each within what
/// the ones before it left.
fn played_in_turn(fleet: &Fleet, drawing: &Drawing) -> Option<Expected> {
    let mut tally = Tally::new(drawing);
    for run in 0..drawn::RUNS {
        let Some(left) = tally.left() else { break };
        if !tally.count(runs::play_drawn(fleet, drawing, run, left).as_ref()) {
            break;
        }
    }
    tally.expected()
}

/// The completion over up to [`drawn::RUNS`] runs with drawn durations, as many as
/// decide at most `work_budget` node states in all (a run is not begun with less left
/// than `typical`, what the median run decided, nor counted past the budget); `None`
/// when no recorded duration varies (every run would be the median's) or not one run
/// fits in the budget.
#[cfg(test)]
fn expected(
    fleet: &Fleet,
    durations: &Durations,
    work_budget: u64,
    typical: u64,
) -> Option<Expected> {
    played_in_turn(
        fleet,
        &runs::drawing_within(durations, work_budget, typical)?,
    )
}

#[cfg(test)]
mod tests;
