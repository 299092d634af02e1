//! The rollout's expected completion: the simulation played again [`RUNS`] times, each
//! node's maintenance and recovery lasting a duration drawn from the recorded ones.
//!
//! **Why not the median run's last end.** A slot of the ceiling works through its nodes
//! one after another, so the time it takes is a sum of durations, and a sum follows the
//! mean, which for reboot times (skewed to the right) lies above the median. The rollout
//! then ends with its slowest slot, the largest of those sums. Neither shows in a
//! simulation where every maintenance lasts the median: at 1,000 nodes and 100 slots it
//! ended 18% early on `kumaco-forecast-bench` (docs/benchmarks.md). Drawing each duration
//! from what the cluster recorded carries both into the completion, without a
//! distribution assumed.
//!
//! **Deterministic.** A draw depends only on the node's name, the run's number and what is
//! drawn (a maintenance or a recovery), hashed; the recorded durations are sorted first.
//! So a restarted kumaco, or `kumaco plan` beside it, draws the same and forecasts the
//! same. A node in progress (or recovering) for `e` already draws among the recorded
//! durations longer than `e`, and ends now when none is.

use jiff::SignedDuration;

/// How many times the simulation is played with drawn durations: enough for a median
/// (the 8th of 15) and a 90th percentile (the 14th) that a single unlucky run does not
/// move, few enough to stay within a second (see [`WORK_BUDGET`]).
pub const RUNS: usize = 15;

/// Most node states the drawn runs decide in all (a run that would pass it is given up,
/// and the runs before it are the answer): what keeps the forecast of a very large
/// rollout within a second. With every duration drawn, ends rarely coincide, so a run
/// decides the nodes in progress at every end: 11 times the states of a run at the
/// median on the cost bench's "10%" rollout over 5,000 nodes (946,000, 0.4 s on the
/// 2-core machine), where one drawn run fits; 14 fit on `kumaco-forecast-bench`'s
/// 1,000-node rollout, all 15 at 500 nodes (docs/benchmarks.md).
pub const WORK_BUDGET: u64 = 1_000_000;

/// What one duration of a run is drawn from.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pool<'d> {
    /// The same for every node.
    Fixed(SignedDuration),
    /// One of these, sorted, picked by a hash.
    Recorded(&'d [SignedDuration]),
}

impl<'d> Pool<'d> {
    /// The recorded durations (sorted), or the median where none are (given by flag).
    pub fn of(sorted: &'d [SignedDuration], given: &super::Quantiles) -> Pool<'d> {
        match sorted {
            [] => Pool::Fixed(given.median.max(SignedDuration::ZERO)),
            sorted => Pool::Recorded(sorted),
        }
    }
}

/// What is drawn: part of the hash, so a node's maintenance and recovery are drawn apart.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    Maintenance = 0,
    Recovery = 1,
}

/// How long each node's maintenance and recovery last in one run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lengths<'d> {
    pub maintenance: Pool<'d>,
    pub recovery: Pool<'d>,
    /// The run's number, drawn with.
    pub run: u64,
}

impl Lengths<'_> {
    /// Every maintenance `maintenance`, every recovery `recovery`.
    pub fn fixed(maintenance: SignedDuration, recovery: SignedDuration) -> Lengths<'static> {
        Lengths {
            maintenance: Pool::Fixed(maintenance),
            recovery: Pool::Fixed(recovery),
            run: 0,
        }
    }

    /// How long `name`'s maintenance or recovery lasts in all, `elapsed` of it past
    /// already (zero when it starts): never less than `elapsed`.
    pub fn of(&self, name: &str, kind: Kind, elapsed: SignedDuration) -> SignedDuration {
        let pool = match kind {
            Kind::Maintenance => self.maintenance,
            Kind::Recovery => self.recovery,
        };
        match pool {
            Pool::Fixed(d) => d.max(elapsed),
            Pool::Recorded(sorted) => {
                let longer = &sorted[sorted.partition_point(|d| *d <= elapsed)..];
                if longer.is_empty() {
                    return elapsed;
                }
                let h = mix(hash(name) ^ mix(self.run.wrapping_mul(2) + kind as u64));
                // The high bits of a 64x64 product: an index below `len` without a modulo's
                // bias towards the low ones.
                let k = ((u128::from(h) * longer.len() as u128) >> 64) as usize;
                longer[k]
            }
        }
    }
}

/// Whether drawing from `pool` can give two different durations.
pub(super) fn varies(pool: Pool) -> bool {
    match pool {
        Pool::Fixed(_) => false,
        Pool::Recorded(sorted) => sorted.first() != sorted.last(),
    }
}

/// FNV-1a over the name's bytes: stable across Rust versions and platforms, which
/// `std`'s hashers do not promise.
fn hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// SplitMix64's finalizer: spreads close inputs (names differing in one digit, runs
/// 0, 1, 2...) over the whole range.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> SignedDuration {
        SignedDuration::from_secs(s)
    }

    fn drawn(sorted: &[SignedDuration], run: u64) -> Lengths<'_> {
        Lengths {
            maintenance: Pool::Recorded(sorted),
            recovery: Pool::Fixed(secs(3)),
            run,
        }
    }

    #[test]
    fn a_fixed_duration_is_never_shorter_than_what_has_passed() {
        let l = Lengths::fixed(secs(10), secs(3));
        assert_eq!(l.of("a", Kind::Maintenance, SignedDuration::ZERO), secs(10));
        assert_eq!(l.of("a", Kind::Maintenance, secs(25)), secs(25));
        assert_eq!(l.of("a", Kind::Recovery, secs(1)), secs(3));
    }

    #[test]
    fn the_same_node_and_run_draw_the_same_and_others_spread_over_the_samples() {
        let sorted: Vec<SignedDuration> = (1..=10).map(secs).collect();
        let l = drawn(&sorted, 4);
        let a = l.of("node-a", Kind::Maintenance, SignedDuration::ZERO);
        assert_eq!(
            a,
            drawn(&sorted, 4).of("node-a", Kind::Maintenance, SignedDuration::ZERO)
        );
        // 1,000 nodes over 10 samples: each drawn about 100 times.
        let mut counts = [0usize; 10];
        for n in 0..1000 {
            let d = l.of(
                &format!("node-{n:04}"),
                Kind::Maintenance,
                SignedDuration::ZERO,
            );
            counts[d.as_secs() as usize - 1] += 1;
        }
        assert!(counts.iter().all(|c| (60..=140).contains(c)), "{counts:?}");
        // One node over 300 runs: each sample about 30 times.
        let mut counts = [0usize; 10];
        for run in 0..300 {
            let d = drawn(&sorted, run).of("node-a", Kind::Maintenance, SignedDuration::ZERO);
            counts[d.as_secs() as usize - 1] += 1;
        }
        assert!(counts.iter().all(|c| (12..=50).contains(c)), "{counts:?}");
    }

    #[test]
    fn a_node_in_progress_draws_among_the_longer_ones_or_ends_now() {
        let sorted: Vec<SignedDuration> = (1..=10).map(secs).collect();
        for run in 0..50 {
            let d = drawn(&sorted, run).of("n", Kind::Maintenance, secs(7));
            assert!(d > secs(7) && d <= secs(10), "{d:?}");
        }
        assert_eq!(
            drawn(&sorted, 0).of("n", Kind::Maintenance, secs(12)),
            secs(12)
        );
    }

    #[test]
    fn only_recorded_durations_that_differ_vary() {
        assert!(!varies(Pool::Fixed(secs(1))));
        assert!(!varies(Pool::Recorded(&[secs(2), secs(2)])));
        assert!(varies(Pool::Recorded(&[secs(2), secs(3)])));
        assert!(!varies(Pool::Recorded(&[])));
    }
}
