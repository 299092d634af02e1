//! What a forecast answers: each node's placement at the median and the 90th percentile,
//! the rollout at each, and the expected completion over the drawn runs.

use jiff::Timestamp;

use crate::window::WindowId;

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

/// What [`forecast`](super::forecast) returns.
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
    /// that occurs more than [`MAX_OCCURRENCES`](super::MAX_OCCURRENCES) times before then.
    pub horizon_end: Timestamp,
}

/// When the rollout completes over up to [`EXPECTED_RUNS`](super::EXPECTED_RUNS) simulations in which each
/// node's maintenance and recovery last a duration drawn from the recorded ones
/// (`drawn`): the median and the 90th percentile of their completions (nearest rank),
/// `None` for beyond the horizon. The central estimate of the rollout's end: the median
/// run's last end runs every maintenance at the median, and so comes early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The runs played: fewer than [`EXPECTED_RUNS`](super::EXPECTED_RUNS) where all the runs, these and the
    /// two above, would decide more than [`EXPECTED_WORK_BUDGET`](super::EXPECTED_WORK_BUDGET) node states (very
    /// large rollouts).
    pub runs: usize,
    pub completion: Option<Timestamp>,
    pub p90: Option<Timestamp>,
}
