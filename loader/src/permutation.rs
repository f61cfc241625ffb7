//! LeRobot's per-epoch order, reproduced exactly: its `EpisodeAwareSampler` (0.6) shuffles each
//! epoch with `torch.randperm(n, generator=torch.Generator().manual_seed(s))`, where
//! `s = np.random.SeedSequence([seed, epoch]).generate_state(1, np.uint64)[0]`.
//!
//! Three pieces, each as its library computes it: numpy's `SeedSequence` (Melissa O'Neill's
//! `seed_seq` hash, pool of four 32-bit words), torch's CPU generator (MT19937 seeded with the
//! seed's low 32 bits), and torch's `randperm` for `n < (2³² − 1) / 20`: `r[i] ↔ r[i + random()
//! % (n − i)]` for `i` in `0..n − 1`. From 214,748,364 frames on, torch switches to another
//! algorithm, which this does not follow.

use rand_mt::Mt;

/// The permutation of `0..n` LeRobot's sampler uses for `epoch` of a run seeded with `seed`.
pub(crate) fn lerobot_permutation(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    torch_randperm(n, seed_sequence_u64(&[seed, epoch]))
}

/// The `round`-th permutation of dataset `part`'s `n` anchors in a weighted run: a stream of its
/// own per dataset, seeded `[seed, round, part + 1]` (never `[seed, round]`, which `SeedSequence`
/// would hash as LeRobot's per-epoch order: it pads the entropy with zero words).
pub(crate) fn part_permutation(n: usize, seed: u64, round: u64, part: usize) -> Vec<usize> {
    torch_randperm(n, seed_sequence_u64(&[seed, round, part as u64 + 1]))
}

/// The permutations of the blocks order for `epoch`: of its episodes (`window = None`), and of
/// the samples of each window of episodes (`Some(w)`). Seeded `[seed, epoch, 0, 1]` and
/// `[seed, epoch, w + 1, 2]`: four words, the last never zero, so never the seeds of the two
/// streams above (`SeedSequence` pads shorter entropy with zero words).
pub(crate) fn blocks_permutation(n: usize, seed: u64, epoch: u64, window: Option<usize>) -> Vec<usize> {
    let entropy = match window {
        None => [seed, epoch, 0, 1],
        Some(w) => [seed, epoch, w as u64 + 1, 2],
    };
    torch_randperm(n, seed_sequence_u64(&entropy))
}

/// `torch.randperm(n, generator=torch.Generator().manual_seed(seed))` on the CPU, for
/// `n < (2³² − 1) / 20` (integer division: 214,748,364).
fn torch_randperm(n: usize, seed: u64) -> Vec<usize> {
    // torch's MT19937 takes the seed's low 32 bits.
    let mut mt = Mt::new(seed as u32);
    let mut order: Vec<usize> = (0..n).collect();
    for i in 0..n.saturating_sub(1) {
        let z = mt.next_u32() as usize % (n - i);
        order.swap(i, i + z);
    }
    order
}

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

/// `np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0]`.
fn seed_sequence_u64(entropy: &[u64]) -> u64 {
    // Each integer becomes its 32-bit words, least significant first (0 is one word).
    let words: Vec<u32> = entropy
        .iter()
        .flat_map(|&v| {
            let (low, high) = (v as u32, (v >> 32) as u32);
            if high == 0 { vec![low] } else { vec![low, high] }
        })
        .collect();
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut value = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        value = value.wrapping_mul(hash_const);
        value ^ (value >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    let mut pool = [0u32; POOL_SIZE];
    for (i, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(words.get(i).copied().unwrap_or(0));
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
            }
        }
    }
    for &word in words.iter().skip(POOL_SIZE) {
        for slot in &mut pool {
            *slot = mix(*slot, hashmix(word));
        }
    }
    // generate_state: two 32-bit words (little-endian) cycling over the pool.
    let mut hash_const = INIT_B;
    let mut state = [0u32; 2];
    for (i, word) in state.iter_mut().enumerate() {
        let mut value = pool[i % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        value = value.wrapping_mul(hash_const);
        *word = value ^ (value >> XSHIFT);
    }
    u64::from(state[0]) | (u64::from(state[1]) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by numpy 2.2 and torch 2.11 (LeRobot 0.6.1's environment).
    #[test]
    fn seed_sequence_and_randperm_match_numpy_and_torch() {
        assert_eq!(seed_sequence_u64(&[1000, 0]), 18_002_537_191_484_623_697);
        assert_eq!(seed_sequence_u64(&[1000, 1]), 4_723_298_920_957_447_659);
        assert_eq!(seed_sequence_u64(&[(1 << 40) + 5, 2]), 15_820_210_235_454_030_130);
        assert_eq!(seed_sequence_u64(&[0, 0]), 15_793_235_383_387_715_774);
        assert_eq!(&lerobot_permutation(30, 1000, 0)[..5], [12, 19, 21, 14, 17]);
        assert_eq!(&lerobot_permutation(500, 1000, 1)[..5], [54, 144, 376, 181, 64]);
        assert_eq!(&lerobot_permutation(2000, 0, 0)[..5], [1676, 678, 507, 1954, 736]);
        assert_eq!(lerobot_permutation(1, 7, 3), [0]);
        assert!(lerobot_permutation(0, 7, 3).is_empty());
    }
}
