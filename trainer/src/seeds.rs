//! Where every random draw of training comes from: the run's seed, the optimiser step and
//! the draw's purpose. A resumed run therefore draws what an uninterrupted one would.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a seed is for; each purpose gets its own stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Diffusion noise and timesteps.
    Noise = 1,
    /// Random crops and image augmentation.
    Augment = 2,
    /// Diffusion noise and timesteps of the held-out loss.
    EvalNoise = 3,
}

/// The seed of `purpose`'s draws at optimiser step `step` of a run seeded with `seed`.
pub fn step_seed(seed: u64, step: usize, purpose: Purpose) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (purpose as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    rng.set_stream(step as u64);
    rng.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_by_step_purpose_and_run() {
        let a = step_seed(7, 3, Purpose::Noise);
        assert_eq!(a, step_seed(7, 3, Purpose::Noise));
        assert_ne!(a, step_seed(7, 4, Purpose::Noise));
        assert_ne!(a, step_seed(7, 3, Purpose::Augment));
        assert_ne!(a, step_seed(8, 3, Purpose::Noise));
    }
}
