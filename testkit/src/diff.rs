//! Settings shared by the differential tests (kumaco's parsers against the Go oracle).

use std::time::{SystemTime, UNIX_EPOCH};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// How many mismatches a failing differential test shows.
const SHOWN: usize = 20;

/// How many cases a differential test runs and from which seed.
///
/// `KUMACO_DIFF_CASES` sets the count (the long documented run uses 1,000,000);
/// `KUMACO_DIFF_SEED` replays a run: every run prints the seed it used.
#[derive(Clone, Copy, Debug)]
pub struct DiffRun {
    pub cases: usize,
    pub seed: u64,
}

impl DiffRun {
    /// Reads the environment and prints the replay line for `test`.
    pub fn from_env(test: &str, default_cases: usize) -> Self {
        let cases = env_number("KUMACO_DIFF_CASES").map_or(default_cases, |n| n as usize);
        let seed = env_number("KUMACO_DIFF_SEED").unwrap_or_else(clock_seed);
        eprintln!("{test}: {cases} cases, seed {seed} (replay: KUMACO_DIFF_SEED={seed})");
        DiffRun { cases, seed }
    }

    /// A proptest runner whose generated values depend only on the seed.
    pub fn runner(&self) -> TestRunner {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&self.seed.to_le_bytes());
        TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
        )
    }

    /// Fails if there are `mismatches` (of `compared` `what`: inputs, cases), showing the
    /// first 20 and the seed that replays the run.
    pub fn assert_agree(&self, what: &str, compared: usize, mismatches: &[String]) {
        if mismatches.is_empty() {
            return;
        }
        let shown: Vec<_> = mismatches.iter().take(SHOWN).cloned().collect();
        panic!(
            "{} of {compared} {what} disagree with Go (seed {}); first {}:\n{}",
            mismatches.len(),
            self.seed,
            shown.len(),
            shown.join("\n")
        );
    }
}

/// The next `count` values of `strategy`, drawn with `runner` (a [`DiffRun::runner`]).
pub fn draw<S: Strategy>(runner: &mut TestRunner, strategy: &S, count: usize) -> Vec<S::Value> {
    (0..count)
        .map(|_| {
            strategy
                .new_tree(runner)
                .expect("generating an input")
                .current()
        })
        .collect()
}

fn env_number(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .replace('_', "")
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value:?} is not a number: {e}")),
    )
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos() as u64)
}
