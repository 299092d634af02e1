//! The pieces of `kumaco-chaos`: a seeded random source for the fault
//! schedule, a wall clock that one kumaco replica sees shifted ([`clock`]), kumaco's own
//! offline planner as the reference for `UnderMaintenance` ([`plan`]), nodes going down
//! and coming back ([`lifecycle`]: the harness's outages, kured's drain around a reboot),
//! the independent checker ([`checker`]), and the `--budgets` mode's pods and
//! PodDisruptionBudgets ([`workload`]).

pub mod checker;
pub mod clock;
pub mod lifecycle;
pub mod plan;
pub mod workload;

/// A small seeded generator (SplitMix64): the whole fault schedule is drawn from it, so
/// a seed replays the same faults in the same order. Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn fraction(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform below `n` (> 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.fraction() < p
    }

    /// Uniform in `[low, high)`.
    pub fn duration(
        &mut self,
        low: std::time::Duration,
        high: std::time::Duration,
    ) -> std::time::Duration {
        low + high.saturating_sub(low).mul_f64(self.fraction())
    }

    /// Index drawn with the given weights (not all zero).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = (self.next_u64() % u64::from(total)) as u32;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn a_seed_replays_the_same_draws() {
        let draws = |seed| {
            let mut rng = Rng::new(seed);
            (0..5).map(|_| rng.below(1000)).collect::<Vec<_>>()
        };
        assert_eq!(draws(42), draws(42));
        assert_ne!(draws(42), draws(43));
    }

    #[test]
    fn weights_of_zero_are_never_drawn() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            assert_ne!(rng.weighted(&[3, 0, 1]), 1);
        }
    }
}
