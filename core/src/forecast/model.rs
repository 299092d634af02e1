//! How long a maintenance and a node's recovery take: the quantiles the runs at the
//! median and the 90th percentile use, the records the drawn runs draw from, and how
//! both are learned from the nodes' `MaintenanceInProgress` conditions.

use jiff::SignedDuration;

use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, find};
use crate::in_progress::{recorded_duration, recorded_recovery};
use crate::reasons;

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
pub(super) fn rank(n: usize, percent: usize) -> usize {
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
/// it completed ([`reasons::completes_maintenance`]): one its window's end stopped says
/// nothing of how long the work takes. A recovery counts after any end.
pub fn learn<'a>(nodes: impl IntoIterator<Item = &'a [Condition]>) -> Learned {
    let mut maintenance = Vec::new();
    let mut recovery = Vec::new();
    for conditions in nodes {
        let Some(c) = find(conditions, MAINTENANCE_IN_PROGRESS).filter(|c| !c.is_true()) else {
            continue;
        };
        if reasons::completes_maintenance(&c.reason) {
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
