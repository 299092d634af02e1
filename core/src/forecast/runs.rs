//! The forecast's runs as independent units of work, for a caller that plays them where
//! it likes (side by side on several cores, or one after another): the runs at the median
//! and the 90th percentile first, then the drawn runs, then the answer combined from
//! them. The core spawns nothing; whatever plays them, the answer is the same.

use jiff::{SignedDuration, Timestamp};

use super::drawn::{self, Lengths, Pool};
use super::fleet::{Fleet, Role};
use super::model::{Durations, Quantiles, rank};
use super::outcome::{Expected, Forecast, NodeForecast, Plan};
use super::simulation::{Played, Run};
use crate::gates::Hold;
use crate::in_progress::Policy;
use crate::pass::NodeView;
use crate::window::Window;

/// The runs of one forecast, and what they all share.
pub struct Runs<'a> {
    pub(super) fleet: Fleet<'a>,
    durations: &'a Durations,
}

/// Which of the two runs at fixed durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantile {
    Median,
    P90,
}

/// The drawn runs of a forecast: what they draw from, and the decisions left for them.
#[derive(Clone, Copy, Debug)]
pub struct Drawing<'d> {
    maintenance: Pool<'d>,
    recovery: Pool<'d>,
    /// What the runs at fixed durations left of [`drawn::WORK_BUDGET`].
    budget: u64,
    /// What the median run decided: no drawn run is begun with less left.
    typical: u64,
}

impl<'a> Runs<'a> {
    /// The runs forecasting `nodes`, the nodes in scope, from `now` to `now + horizon`,
    /// with the valid `windows` (blackouts included), the brain's `policy` and the gates'
    /// holds on every start (`cluster`; each node's own are in its view).
    pub fn new(
        windows: &[&'a Window],
        policy: &'a Policy,
        nodes: &'a [NodeView<'a>],
        cluster: &'a [Hold],
        durations: &'a Durations,
        now: Timestamp,
        horizon: SignedDuration,
    ) -> Runs<'a> {
        Runs {
            fleet: Fleet::gated(windows, policy, nodes, cluster, now, horizon),
            durations,
        }
    }

    /// Plays the run at the median or at the 90th percentile; the two are independent.
    pub fn play(&self, quantile: Quantile) -> Played {
        let q = |q: &Quantiles| match quantile {
            Quantile::Median => q.median,
            Quantile::P90 => q.p90,
        };
        let d = self.durations;
        let pool = |quantiles: &Quantiles, recorded: &[SignedDuration]| {
            Pool::fixed(q(quantiles).max(SignedDuration::ZERO), !recorded.is_empty())
        };
        let lengths = Lengths::fixed(
            pool(&d.maintenance, &d.recorded.maintenance),
            pool(&d.recovery, &d.recorded.recovery),
        );
        Run::new(&self.fleet, lengths).play()
    }

    /// The drawn runs to play once the two above are played: `None` where nothing
    /// recorded varies (every run would be the median's) or the rollout at the median does
    /// not complete within the horizon.
    pub fn drawing(&self, median: &Played, p90: &Played) -> Option<Drawing<'a>> {
        median.rollout.completion?;
        // The drawn runs get what the two runs above left of the budget.
        let left = drawn::WORK_BUDGET.saturating_sub(median.work + p90.work);
        drawing_within(self.durations, left, median.work)
    }

    /// Plays drawn run `run` (below [`drawn::RUNS`]), given up (`None`) once it decides
    /// more than `budget` node states ([`Drawing::budget`]: more would not count). The
    /// runs are independent.
    pub fn play_drawn(&self, drawing: &Drawing, run: usize, budget: u64) -> Option<Played> {
        play_drawn(&self.fleet, drawing, run, budget)
    }

    /// The forecast from the runs at the median and the 90th percentile, and the
    /// expected completion ([`Drawing::expected`]).
    pub fn combine(&self, median: Played, p90: Played, expected: Option<Expected>) -> Forecast {
        let fleet = &self.fleet;
        let mut out: Vec<NodeForecast> = Vec::with_capacity(fleet.shown.len());
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
                name: fleet.nodes[i].name.to_string(),
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
}

/// The drawn runs over `durations`, `budget` decisions left for them, none begun with
/// less than `typical` left.
pub(super) fn drawing_within(
    durations: &Durations,
    budget: u64,
    typical: u64,
) -> Option<Drawing<'_>> {
    let maintenance = Pool::of(&durations.recorded.maintenance, &durations.maintenance);
    let recovery = Pool::of(&durations.recorded.recovery, &durations.recovery);
    if !drawn::varies(maintenance) && !drawn::varies(recovery) {
        return None;
    }
    Some(Drawing {
        maintenance,
        recovery,
        budget,
        typical,
    })
}

/// [`Runs::play_drawn`] over `fleet`.
pub(super) fn play_drawn(
    fleet: &Fleet,
    drawing: &Drawing,
    run: usize,
    budget: u64,
) -> Option<Played> {
    let lengths = Lengths {
        maintenance: drawing.maintenance,
        recovery: drawing.recovery,
        run: run as u64,
    };
    Run::new(fleet, lengths).play_within(budget)
}

impl Drawing<'_> {
    /// How many drawn runs there are at most: play runs `0..RUNS`.
    pub const RUNS: usize = drawn::RUNS;

    /// The decisions left for all the drawn runs: a run that decides more than this would
    /// not count, so one played on its own may be given up there.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// The same drawn runs with `budget` decisions left for them (a test's budget).
    pub fn with_budget(&self, budget: u64) -> Self {
        Drawing { budget, ..*self }
    }

    /// What the median run decided: a drawn run begun with less left would not count.
    pub fn typical(&self) -> u64 {
        self.typical
    }

    /// The completion over the drawn runs `plays`, in the runs' order (`None`: given up):
    /// each counts while the ones before it leave at least what the median run decided,
    /// and it decides no more than they leave; the first that does not ends the count.
    /// `None` when not one counts.
    pub fn expected(&self, plays: impl IntoIterator<Item = Option<Played>>) -> Option<Expected> {
        let mut tally = Tally::new(self);
        for played in plays {
            if !tally.count(played.as_ref()) {
                break;
            }
        }
        tally.expected()
    }
}

/// The drawn runs counted so far, in order.
pub(super) struct Tally {
    left: u64,
    typical: u64,
    /// Each run's completion; beyond the horizon sorts last.
    ends: Vec<Timestamp>,
}

impl Tally {
    pub(super) fn new(drawing: &Drawing) -> Tally {
        Tally {
            left: drawing.budget,
            typical: drawing.typical,
            ends: Vec::with_capacity(drawn::RUNS),
        }
    }

    /// The decisions left for the next run, `None` when none is begun.
    pub(super) fn left(&self) -> Option<u64> {
        (self.left >= self.typical && self.ends.len() < drawn::RUNS).then_some(self.left)
    }

    /// Counts the next run; whether it counted (later ones may).
    pub(super) fn count(&mut self, played: Option<&Played>) -> bool {
        let Some(left) = self.left() else {
            return false;
        };
        match played.filter(|p| p.work <= left) {
            Some(p) => {
                self.left -= p.work;
                self.ends
                    .push(p.rollout.completion.unwrap_or(Timestamp::MAX));
                true
            }
            None => false,
        }
    }

    pub(super) fn expected(mut self) -> Option<Expected> {
        if self.ends.is_empty() {
            return None;
        }
        self.ends.sort_unstable();
        let within = |t: Timestamp| (t != Timestamp::MAX).then_some(t);
        let n = self.ends.len();
        Some(Expected {
            runs: n,
            completion: within(self.ends[rank(n, 50)]),
            p90: within(self.ends[rank(n, 90)]),
        })
    }
}
