//! Which frames each batch holds: LeRobot 0.6's `EpisodeAwareSampler` (anchors per episode
//! `[from + drop_n_first, to − drop_n_last)`, reshuffled every epoch by LeRobot's own
//! permutation of `(seed, epoch)`), sharded across trainers, cut into batches; and the small
//! state that resumes it exactly.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::permutation::lerobot_permutation;

/// Where the sampler is: the epoch, and how many of this shard's samples of that epoch have
/// been handed out. Resuming from the state of the last batch consumed continues with exactly
/// the batches an uninterrupted run would have produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SamplerState {
    /// The epoch (from 0).
    pub epoch: u64,
    /// Samples of this epoch already handed out.
    pub position: usize,
}

/// How frames are sampled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerConfig {
    /// Samples per batch. Default 8 (LeRobot's `batch_size`).
    pub batch_size: usize,
    /// Reshuffle every epoch. Default true.
    pub shuffle: bool,
    /// Seed of the shuffles. Default 1000 (LeRobot's default `seed`).
    pub seed: u64,
    /// Frames skipped at the start of each episode. Default 0.
    pub drop_n_first_frames: usize,
    /// Frames skipped at the end of each episode (Diffusion Policy: 7). Default 0.
    pub drop_n_last_frames: usize,
    /// Drop an epoch's last, incomplete batch. Default false (LeRobot's `drop_last=False`).
    pub drop_last: bool,
    /// This trainer's rank among `world_size`. Default 0.
    pub rank: usize,
    /// Number of trainers sharing the data; each sees a disjoint shard of equal length.
    /// Default 1.
    pub world_size: usize,
    /// Episodes to sample from (all when `None`). Default `None`.
    pub episodes: Option<Vec<usize>>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            batch_size: 8,
            shuffle: true,
            seed: 1000,
            drop_n_first_frames: 0,
            drop_n_last_frames: 0,
            drop_last: false,
            rank: 0,
            world_size: 1,
            episodes: None,
        }
    }
}

/// The anchors (frames a sample may be centred on) and the per-epoch order over them.
#[derive(Debug, Clone)]
pub struct EpisodeSampler {
    config: SamplerConfig,
    anchors: Vec<usize>,
    shard_len: usize,
}

impl EpisodeSampler {
    /// Builds the anchors of `episodes` (each a global index range, by episode index).
    pub fn new(config: SamplerConfig, episodes: &[std::ops::Range<usize>]) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(Error::Config("batch_size must be at least 1".into()));
        }
        if config.world_size == 0 || config.rank >= config.world_size {
            return Err(Error::Config(format!("rank {} is not in 0..world_size={}", config.rank, config.world_size)));
        }
        // As LeRobot: the episodes asked for, in dataset order, each once.
        let selected: Vec<usize> = match &config.episodes {
            Some(list) => {
                if let Some(bad) = list.iter().find(|&&e| e >= episodes.len()) {
                    return Err(Error::Config(format!(
                        "episode {bad} is not in the dataset ({} episodes)",
                        episodes.len()
                    )));
                }
                (0..episodes.len()).filter(|e| list.contains(e)).collect()
            }
            None => (0..episodes.len()).collect(),
        };
        let mut anchors = Vec::new();
        for e in selected {
            let range = &episodes[e];
            let start = range.start + config.drop_n_first_frames;
            let end = range.end.saturating_sub(config.drop_n_last_frames);
            if start >= end {
                tracing::warn!(
                    "episode {e} has no frames left after dropping {} first and {} last; skipped",
                    config.drop_n_first_frames,
                    config.drop_n_last_frames
                );
                continue;
            }
            anchors.extend(start..end);
        }
        if anchors.is_empty() {
            return Err(Error::Config("no frames to sample: every episode is shorter than the frames dropped".into()));
        }
        let shard_len = if config.drop_last && config.world_size > 1 {
            anchors.len() / config.world_size
        } else {
            anchors.len().div_ceil(config.world_size)
        };
        if shard_len == 0 {
            return Err(Error::Config(format!(
                "{} frames cannot be shared among {} trainers",
                anchors.len(),
                config.world_size
            )));
        }
        Ok(Self { config, anchors, shard_len })
    }

    /// The configuration.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Every anchor frame, in dataset order.
    pub fn anchors(&self) -> &[usize] {
        &self.anchors
    }

    /// Samples per epoch in this trainer's shard.
    pub fn shard_len(&self) -> usize {
        self.shard_len
    }

    /// Batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        if self.config.drop_last {
            self.shard_len / self.config.batch_size
        } else {
            self.shard_len.div_ceil(self.config.batch_size)
        }
    }

    /// This shard's frames for `epoch`, in order. Every rank computes the same order, LeRobot's
    /// for `(seed, epoch)` (with one rank, exactly the frames LeRobot's sampler yields), pads it
    /// by wrapping around (or truncates it with `drop_last`) to a multiple of `world_size`, and
    /// keeps every `world_size`-th element from its rank, so the shards are disjoint and equally
    /// long.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let order: Vec<usize> = if self.config.shuffle {
            lerobot_permutation(self.anchors.len(), self.config.seed, epoch)
                .into_iter()
                .map(|k| self.anchors[k])
                .collect()
        } else {
            self.anchors.clone()
        };
        let total = self.shard_len * self.config.world_size;
        let wrapped: Vec<usize> = order.iter().copied().cycle().take(total).collect();
        wrapped.into_iter().skip(self.config.rank).step_by(self.config.world_size).collect()
    }
}

/// The indices of one batch and where the sampler stands after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchPlan {
    pub(crate) epoch: u64,
    pub(crate) batch: usize,
    pub(crate) indices: Vec<usize>,
    pub(crate) after: SamplerState,
}

/// Walks epochs and batches from a state, keeping the current epoch's order.
#[derive(Debug)]
pub(crate) struct Planner {
    sampler: EpisodeSampler,
    state: SamplerState,
    order: Option<(u64, Vec<usize>)>,
    max_epochs: Option<u64>,
}

impl Planner {
    pub(crate) fn new(sampler: EpisodeSampler, start: SamplerState, max_epochs: Option<u64>) -> Self {
        Self { sampler, state: start, order: None, max_epochs }
    }

    /// The next batch, or `None` once `max_epochs` are done.
    pub(crate) fn next_plan(&mut self) -> Option<BatchPlan> {
        let batch_size = self.sampler.config.batch_size;
        let per_epoch = if self.sampler.config.drop_last {
            self.sampler.batches_per_epoch() * batch_size
        } else {
            self.sampler.shard_len
        };
        if self.state.position >= per_epoch {
            self.state = SamplerState { epoch: self.state.epoch + 1, position: 0 };
        }
        if self.max_epochs.is_some_and(|m| self.state.epoch >= m) {
            return None;
        }
        let epoch = self.state.epoch;
        if self.order.as_ref().is_none_or(|(e, _)| *e != epoch) {
            self.order = Some((epoch, self.sampler.epoch_order(epoch)));
        }
        let order = &self.order.as_ref().expect("just set").1;
        let start = self.state.position;
        let end = (start + batch_size).min(per_epoch);
        let indices = order[start..end].to_vec();
        self.state.position = end;
        Some(BatchPlan { epoch, batch: start / batch_size, indices, after: self.state })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episodes() -> Vec<std::ops::Range<usize>> {
        vec![0..10, 10..13, 13..30]
    }

    #[test]
    fn anchors_drop_frames_per_episode_and_skip_short_episodes() {
        let cfg = SamplerConfig { drop_n_last_frames: 7, ..SamplerConfig::default() };
        let s = EpisodeSampler::new(cfg, &episodes()).unwrap();
        let expected: Vec<usize> = (0..3).chain(13..23).collect();
        assert_eq!(s.anchors(), &expected[..]);
    }

    #[test]
    fn epochs_reshuffle_deterministically() {
        let s = EpisodeSampler::new(SamplerConfig::default(), &episodes()).unwrap();
        let (a, b) = (s.epoch_order(0), s.epoch_order(1));
        assert_ne!(a, b);
        assert_eq!(a, s.epoch_order(0));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..30).collect::<Vec<_>>());
    }

    #[test]
    fn shards_are_disjoint_and_equal() {
        let mut all = Vec::new();
        for rank in 0..4 {
            let cfg = SamplerConfig { rank, world_size: 4, drop_last: true, ..SamplerConfig::default() };
            let s = EpisodeSampler::new(cfg, &episodes()).unwrap();
            let shard = s.epoch_order(3);
            assert_eq!(shard.len(), 7);
            all.extend(shard);
        }
        let mut dedup = all.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), all.len(), "shards overlap");
        // Without drop_last the shards are padded to equal length by wrapping around.
        let lens: Vec<usize> = (0..4)
            .map(|rank| {
                EpisodeSampler::new(SamplerConfig { rank, world_size: 4, ..SamplerConfig::default() }, &episodes())
                    .unwrap()
                    .epoch_order(0)
                    .len()
            })
            .collect();
        assert_eq!(lens, vec![8; 4]);
    }

    #[test]
    fn resuming_from_a_state_continues_exactly() {
        let cfg = SamplerConfig { batch_size: 7, ..SamplerConfig::default() };
        let sampler = EpisodeSampler::new(cfg, &episodes()).unwrap();
        let mut straight = Planner::new(sampler.clone(), SamplerState::default(), None);
        let plans: Vec<BatchPlan> = (0..12).map(|_| straight.next_plan().unwrap()).collect();
        // 30 frames in batches of 7: 5 batches per epoch, the last of 2.
        assert_eq!(plans[4].indices.len(), 2);
        assert_eq!(plans[5].epoch, 1);
        for cut in [1, 4, 5, 9] {
            let mut resumed = Planner::new(sampler.clone(), plans[cut - 1].after, None);
            for plan in &plans[cut..] {
                assert_eq!(&resumed.next_plan().unwrap(), plan);
            }
        }
        let mut limited = Planner::new(sampler, SamplerState::default(), Some(2));
        assert_eq!(std::iter::from_fn(|| limited.next_plan()).count(), 10);
    }

    #[test]
    fn drop_last_drops_the_incomplete_batch() {
        let cfg = SamplerConfig { batch_size: 7, drop_last: true, ..SamplerConfig::default() };
        let sampler = EpisodeSampler::new(cfg, &episodes()).unwrap();
        assert_eq!(sampler.batches_per_epoch(), 4);
        let mut p = Planner::new(sampler, SamplerState::default(), Some(1));
        let sizes: Vec<usize> = std::iter::from_fn(|| p.next_plan()).map(|b| b.indices.len()).collect();
        assert_eq!(sizes, vec![7; 4]);
    }
}
