//! Each node's durations in a run: given by flag, a quantile of the records, or drawn
//! from them, and a record to the whole second spread over its second ([`spread`]). The
//! drawn runs, up to [`RUNS`] of them, give the rollout's expected completion.
//!
//! **Why not the median run's last end.** A slot of the ceiling works through its nodes
//! one after another, so the time it takes is a sum of durations, and a sum follows the
//! mean, which for reboot times (skewed to the right) lies above the median. The rollout
//! then ends with its slowest slot, the largest of those sums. Neither shows in a
//! simulation where every maintenance lasts the median: with many slots it ends early
//! (docs/benchmarks.md, "The forecast's accuracy"). Drawing each duration from what the
//! cluster recorded carries both into the completion, without a distribution assumed.
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

/// Most node states a forecast's runs decide in all, the runs at the median and the 90th
/// percentile first: the drawn runs get what those leave, and a drawn run that would
/// pass it is given up (the runs before it are the answer). What keeps the forecast of a
/// very large rollout within a second: with durations spread over their second, ends
/// rarely coincide, and a run decides at each end only what that end can change (the
/// freed slot's group, the paced starts, the nodes whose answer the clock changes), so a
/// run costs about its starts and ends, not its ends times the nodes in progress. The
/// budget is sized so that the cost bench's largest rollouts still get every drawn run
/// (docs/benchmarks.md, "Forecast": the states each run decides and the runs that fit).
pub const WORK_BUDGET: u64 = 1_500_000;

/// What one duration of a run is drawn from.
#[derive(Clone, Copy, Debug)]
pub(super) enum Pool<'d> {
    /// The same for every node: given by flag.
    Given(SignedDuration),
    /// A quantile of the records: the same for every node, spread over its second if it
    /// is a whole-second one ([`spread`]).
    Learned(SignedDuration),
    /// One of these records, sorted, picked by a hash, and spread over its second if it is
    /// a whole-second one.
    Recorded(&'d [SignedDuration]),
}

impl<'d> Pool<'d> {
    /// The recorded durations (sorted), or the median where none are (given by flag).
    pub fn of(sorted: &'d [SignedDuration], given: &super::Quantiles) -> Pool<'d> {
        match sorted {
            [] => Pool::Given(given.median.max(SignedDuration::ZERO)),
            sorted => Pool::Recorded(sorted),
        }
    }

    /// `d` for every node: a quantile of the records when `learned`, else given.
    pub fn fixed(d: SignedDuration, learned: bool) -> Pool<'static> {
        if learned {
            Pool::Learned(d)
        } else {
            Pool::Given(d)
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
    /// Every maintenance and every recovery from these pools, in the runs at the median
    /// and the 90th percentile.
    pub fn fixed(maintenance: Pool<'static>, recovery: Pool<'static>) -> Lengths<'static> {
        Lengths {
            maintenance,
            recovery,
            run: 0,
        }
    }

    /// How long `name`'s maintenance or recovery lasts in all, `elapsed` of it past
    /// already (zero when it starts): never less than `elapsed`.
    pub fn of(&self, name: &str, kind: Kind, elapsed: SignedDuration) -> SignedDuration {
        match self.pick(name, kind, elapsed) {
            Pick::Exact(d) => d.max(elapsed),
            Pick::Record(d) if whole_seconds(d) => {
                spread(d, self.bits(name, kind, 1), self.bits(name, kind, 2)).max(elapsed)
            }
            Pick::Record(d) => d.max(elapsed),
            Pick::None => elapsed,
        }
    }

    /// The duration or record `of` starts from.
    fn pick(&self, name: &str, kind: Kind, elapsed: SignedDuration) -> Pick {
        let pool = match kind {
            Kind::Maintenance => self.maintenance,
            Kind::Recovery => self.recovery,
        };
        match pool {
            Pool::Given(d) => Pick::Exact(d),
            Pool::Learned(d) => Pick::Record(d),
            Pool::Recorded(sorted) => {
                let longer = &sorted[sorted.partition_point(|d| *d <= elapsed)..];
                // The high bits of a 64x64 product: an index below `len` without a modulo's
                // bias towards the low ones.
                let k = (u128::from(self.bits(name, kind, 0)) * longer.len() as u128) >> 64;
                longer
                    .get(k as usize)
                    .map_or(Pick::None, |d| Pick::Record(*d))
            }
        }
    }

    /// 64 bits hashed from the node's name, the run, the kind and what they are for.
    fn bits(&self, name: &str, kind: Kind, what: u64) -> u64 {
        mix(hash(name) ^ mix(self.run.wrapping_mul(8) + what * 2 + kind as u64))
    }
}

/// What a duration starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    /// Given: taken as it is.
    Exact(SignedDuration),
    /// A record, or a quantile of them: spread over its second if it is a whole-second
    /// one, else taken as it is.
    Record(SignedDuration),
    /// No record is longer than what has passed: it ends now.
    None,
}

/// A recorded duration `d` to the whole second as a true one. Records written before
/// kumaco recorded a maintenance's start to the millisecond (`in_progress::STARTED_AT`)
/// are differences of two whole-second times (the API's), so a true duration lies within
/// a second either side of `d`, most likely near it: `d` plus the difference of two
/// uniform fractions of a second, drawn from `a` and `b`. Why it matters:
/// `--start-interval` counts from a whole-second time, so a real end that falls
/// mid-second lets the next start come half a second sooner on average, where a
/// simulation on whole seconds makes each end cost a full second, and with equal
/// durations the slots' ends coincide. Both made the forecast of a rollout paced by a
/// short `--start-interval` late (docs/benchmarks.md, "The forecast's accuracy").
///
/// Only a record to the whole second is spread ([`whole_seconds`]).
fn spread(d: SignedDuration, a: u64, b: u64) -> SignedDuration {
    let fraction = |h: u64| (h >> 11) as f64 / (1u64 << 53) as f64;
    let nanos = ((fraction(a) - fraction(b)) * 1e9) as i64;
    (d + SignedDuration::from_nanos(nanos)).max(SignedDuration::ZERO)
}

/// Whether record `d` is one to the whole second, which [`spread`] spreads over its
/// second. A record with a fraction of a second was measured to the millisecond and is
/// taken as it is: spread, a record of a few seconds would be off by as much as the
/// precision it was recorded with. One of those that falls on a whole second (one in a
/// thousand) is spread as an old one: the record alone cannot tell them apart, and the
/// error is a rare record's, within its second. Zero is taken as it is: it is what a node
/// that was never unavailable records as its recovery, in either precision, and what most
/// recoveries are where maintenance does not take nodes down.
fn whole_seconds(d: SignedDuration) -> bool {
    d.subsec_nanos() == 0 && !d.is_zero()
}

/// Whether drawing from `pool` can give durations whose records differ.
pub(super) fn varies(pool: Pool) -> bool {
    match pool {
        Pool::Given(_) | Pool::Learned(_) => false,
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
            recovery: Pool::Given(secs(3)),
            run,
        }
    }

    /// The record a node's maintenance was drawn from, in seconds.
    fn record(l: &Lengths, name: &str) -> usize {
        match l.pick(name, Kind::Maintenance, SignedDuration::ZERO) {
            Pick::Record(d) => d.as_secs() as usize,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_given_duration_is_exact_and_never_shorter_than_what_has_passed() {
        let l = Lengths::fixed(Pool::Given(secs(10)), Pool::Given(secs(3)));
        assert_eq!(l.of("a", Kind::Maintenance, SignedDuration::ZERO), secs(10));
        assert_eq!(l.of("a", Kind::Maintenance, secs(25)), secs(25));
        assert_eq!(l.of("a", Kind::Recovery, secs(1)), secs(3));
    }

    #[test]
    fn a_learned_duration_spreads_over_its_second_by_node() {
        let l = Lengths::fixed(Pool::Learned(secs(10)), Pool::Given(secs(3)));
        let of = |n: usize| {
            l.of(
                &format!("node-{n}"),
                Kind::Maintenance,
                SignedDuration::ZERO,
            )
        };
        let ds: Vec<f64> = (0..1000).map(|n| of(n).as_secs_f64()).collect();
        assert!(ds.iter().all(|d| *d > 9.0 && *d < 11.0), "{ds:?}");
        let mean = ds.iter().sum::<f64>() / 1000.0;
        assert!((mean - 10.0).abs() < 0.05, "{mean}");
        // The difference of two uniform fractions: within half a second three times in four.
        let near = ds.iter().filter(|d| (**d - 10.0).abs() < 0.5).count();
        assert!((700..=800).contains(&near), "{near}");
        assert_eq!(
            of(7).as_secs_f64(),
            ds[7],
            "the same node, the same duration"
        );
    }

    #[test]
    fn a_record_to_the_millisecond_is_taken_as_it_is_and_a_whole_second_one_spread() {
        let precise = SignedDuration::from_millis(4_512);
        let l = Lengths::fixed(Pool::Learned(precise), Pool::Learned(secs(4)));
        let names: Vec<String> = (0..100).map(|n| format!("node-{n}")).collect();
        for name in &names {
            assert_eq!(l.of(name, Kind::Maintenance, SignedDuration::ZERO), precise);
            assert_eq!(l.of(name, Kind::Maintenance, secs(5)), secs(5), "{name}");
        }
        let spread: Vec<SignedDuration> = (names.iter())
            .map(|name| l.of(name, Kind::Recovery, SignedDuration::ZERO))
            .collect();
        assert!(spread.iter().all(|d| (*d - secs(4)).abs() < secs(1)));
        assert!(spread.iter().filter(|d| **d != secs(4)).count() > 90);
        // Drawn: the records to the millisecond exactly, the whole-second one spread.
        let sorted = [
            SignedDuration::from_millis(4_380),
            SignedDuration::from_millis(4_620),
            secs(5),
        ];
        let mut whole = 0;
        for run in 0..60 {
            let l = drawn(&sorted, run);
            let d = l.of("node-a", Kind::Maintenance, SignedDuration::ZERO);
            match l.pick("node-a", Kind::Maintenance, SignedDuration::ZERO) {
                Pick::Record(r) if r == secs(5) => {
                    whole += 1;
                    assert!(d != r && (d - r).abs() < secs(1), "{d:?}");
                }
                Pick::Record(r) => assert_eq!(d, r),
                other => panic!("{other:?}"),
            }
        }
        assert!(whole > 0 && whole < 60, "{whole}");
        // A node never unavailable recovered at once, in either precision.
        let l = Lengths::fixed(Pool::Learned(secs(4)), Pool::Learned(SignedDuration::ZERO));
        for name in &names {
            let d = l.of(name, Kind::Recovery, SignedDuration::ZERO);
            assert_eq!(d, SignedDuration::ZERO);
        }
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
        assert!((a - secs(record(&l, "node-a") as i64)).abs() < secs(1));
        // 1,000 nodes over 10 samples: each drawn about 100 times.
        let mut counts = [0usize; 10];
        for n in 0..1000 {
            counts[record(&l, &format!("node-{n:04}")) - 1] += 1;
        }
        assert!(counts.iter().all(|c| (60..=140).contains(c)), "{counts:?}");
        // One node over 300 runs: each sample about 30 times.
        let mut counts = [0usize; 10];
        for run in 0..300 {
            counts[record(&drawn(&sorted, run), "node-a") - 1] += 1;
        }
        assert!(counts.iter().all(|c| (12..=50).contains(c)), "{counts:?}");
    }

    #[test]
    fn a_node_in_progress_draws_among_the_longer_ones_or_ends_now() {
        let sorted: Vec<SignedDuration> = (1..=10).map(secs).collect();
        for run in 0..50 {
            let l = drawn(&sorted, run);
            let d = l.of("n", Kind::Maintenance, secs(7));
            let r = match l.pick("n", Kind::Maintenance, secs(7)) {
                Pick::Record(r) => r,
                other => panic!("{other:?}"),
            };
            assert!(r > secs(7) && r <= secs(10) && d >= secs(7), "{r:?} {d:?}");
        }
        assert_eq!(
            drawn(&sorted, 0).of("n", Kind::Maintenance, secs(12)),
            secs(12)
        );
    }

    #[test]
    fn only_recorded_durations_that_differ_vary() {
        assert!(!varies(Pool::Given(secs(1))));
        assert!(!varies(Pool::Learned(secs(1))));
        assert!(!varies(Pool::Recorded(&[secs(2), secs(2)])));
        assert!(varies(Pool::Recorded(&[secs(2), secs(3)])));
        assert!(!varies(Pool::Recorded(&[])));
    }
}
