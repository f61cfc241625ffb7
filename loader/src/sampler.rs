//! Which frames each batch holds: LeRobot 0.6's `EpisodeAwareSampler` (anchors per episode
//! `[from + drop_n_first, to − drop_n_last)`, reshuffled every epoch by LeRobot's own
//! permutation of `(seed, epoch)`), sharded across trainers, cut into batches; and the small
//! state that resumes it exactly. With several datasets, the order runs over their anchors
//! concatenated, as LeRobot's sampler would over a `MultiLeRobotDataset`; or, with sampling
//! weights, each epoch takes from each dataset its share of the epoch (see
//! [`EpisodeSampler::epoch_order`]). The blocks order ([`SampleOrder::Blocks`]) trades some of
//! each batch's diversity for decoding each video frame once per epoch.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::permutation::{blocks_permutation, lerobot_permutation, part_permutation};

/// The order of an epoch's samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleOrder {
    /// LeRobot's: every anchor of the epoch shuffled together (default).
    #[default]
    Lerobot,
    /// Decode-once: the episodes shuffled and cut into windows of
    /// [`SampleOrdering::block_episodes`], each window's samples shuffled among themselves, the
    /// windows one after the other. Every anchor still comes once per epoch; a window's frames
    /// are decoded once into a bounded buffer that its samples read, instead of a GOP's worth of
    /// decoding per sample. A batch then holds samples of a few episodes rather than of many.
    Blocks,
}

impl std::fmt::Display for SampleOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Lerobot => "lerobot",
            Self::Blocks => "blocks",
        })
    }
}

impl std::str::FromStr for SampleOrder {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "lerobot" => Ok(Self::Lerobot),
            "blocks" => Ok(Self::Blocks),
            other => Err(format!("{other:?} is not a sample order: lerobot (default) or blocks")),
        }
    }
}

/// Episodes per window of the blocks order, by default: a batch of 64 then draws from about 16
/// episodes, and PushT's 96x96 frames buffered for two windows take about 110 MB.
pub const DEFAULT_BLOCK_EPISODES: usize = 16;

fn default_block_episodes() -> usize {
    DEFAULT_BLOCK_EPISODES
}

/// The order of an epoch's samples with, for the blocks order, its episodes per window: what a
/// run chooses (the trainer's `--sampler.*`) and what its checkpoints record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SampleOrdering {
    /// `lerobot` (LeRobot's order), or `blocks`: episodes shuffled and taken a window of
    /// [`Self::block_episodes`] at a time, each window's samples shuffled, each video frame
    /// decoded once per epoch ([`SampleOrder::Blocks`]). Default LeRobot's.
    #[serde(default)]
    pub order: SampleOrder,
    /// Episodes per window of the blocks order. Default [`DEFAULT_BLOCK_EPISODES`].
    #[serde(default = "default_block_episodes")]
    pub block_episodes: usize,
}

impl Default for SampleOrdering {
    fn default() -> Self {
        Self { order: SampleOrder::Lerobot, block_episodes: DEFAULT_BLOCK_EPISODES }
    }
}

impl SampleOrdering {
    /// The blocks order with windows of `block_episodes`.
    pub fn blocks(block_episodes: usize) -> Self {
        Self { order: SampleOrder::Blocks, block_episodes }
    }

    /// Whether the blocks order is chosen.
    pub fn is_blocks(&self) -> bool {
        self.order == SampleOrder::Blocks
    }

    /// Whether samples taken in `self` continue an order taken in `other` (the episodes per
    /// window matter only in the blocks order).
    pub fn same_order(&self, other: &Self) -> bool {
        self.order == other.order && (!self.is_blocks() || self.block_episodes == other.block_episodes)
    }
}

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Exactly these frames, in this order, instead of the episodes' frames (LeRobot's
    /// `torch.utils.data.Subset` of a dataset; neither `episodes` nor the dropped frames apply).
    /// Default `None`.
    #[serde(default)]
    pub frames: Option<Vec<usize>>,
    /// With several datasets, the share of each epoch each one gets (normalised; finite and
    /// positive). Default `None`: every frame once per epoch, as concatenated.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// The order of an epoch's samples. Default LeRobot's.
    #[serde(flatten)]
    pub ordering: SampleOrdering,
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
            frames: None,
            weights: None,
            ordering: SampleOrdering::default(),
        }
    }
}

/// The anchors (frames a sample may be centred on) and the per-epoch order over them.
#[derive(Debug, Clone)]
pub struct EpisodeSampler {
    config: SamplerConfig,
    anchors: Vec<usize>,
    /// Where each dataset's anchors end in `anchors` (one per dataset).
    part_ends: Vec<usize>,
    /// Each sampled episode's anchors, as a range of positions in `anchors`.
    episode_spans: Vec<std::ops::Range<usize>>,
    /// Samples each dataset gives per epoch, with weights.
    quotas: Option<Vec<usize>>,
    shard_len: usize,
}

impl EpisodeSampler {
    /// Builds the anchors of `episodes` (each a global index range, by episode index).
    pub fn new(config: SamplerConfig, episodes: &[std::ops::Range<usize>]) -> Result<Self> {
        Self::for_datasets(config, &[episodes.to_vec()])
    }

    /// Builds the anchors of several datasets, each given by its episodes' ranges in the joint
    /// index ([`datasets::DatasetSet::episode_ranges`]).
    pub fn for_datasets(config: SamplerConfig, datasets: &[Vec<std::ops::Range<usize>>]) -> Result<Self> {
        if config.batch_size == 0 {
            return Err(Error::Config("batch_size must be at least 1".into()));
        }
        if config.world_size == 0 || config.rank >= config.world_size {
            return Err(Error::Config(format!("rank {} is not in 0..world_size={}", config.rank, config.world_size)));
        }
        if datasets.len() > 1 && config.episodes.is_some() {
            return Err(Error::Config(
                "choosing episodes is not supported with several datasets (LeRobot's takes a list per dataset)".into(),
            ));
        }
        if config.ordering.is_blocks() {
            if config.ordering.block_episodes == 0 {
                return Err(Error::Config("the blocks order needs at least 1 episode per window".into()));
            }
            if config.weights.is_some() {
                return Err(Error::Config(
                    "the blocks order does not take sampling weights: use LeRobot's order with weights".into(),
                ));
            }
        }
        let mut anchors = Vec::new();
        let mut part_ends = Vec::with_capacity(datasets.len());
        let mut episode_spans = Vec::new();
        match &config.frames {
            Some(frames) => {
                anchors = Self::listed_frames(&config, frames, datasets)?;
                part_ends.push(anchors.len());
            }
            None => {
                for episodes in datasets {
                    Self::anchors_of(&config, episodes, &mut anchors, &mut episode_spans)?;
                    part_ends.push(anchors.len());
                }
            }
        }
        if anchors.is_empty() {
            return Err(Error::Config("no frames to sample: every episode is shorter than the frames dropped".into()));
        }
        let quotas = match &config.weights {
            Some(weights) => Some(quotas(weights, &part_ends, anchors.len())?),
            None => None,
        };
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
        Ok(Self { config, anchors, part_ends, episode_spans, quotas, shard_len })
    }

    /// The anchors `config.frames` lists, checked: one dataset, LeRobot's order (no blocks, no
    /// weights), no episode list beside it, and every frame in some episode.
    fn listed_frames(
        config: &SamplerConfig,
        frames: &[usize],
        datasets: &[Vec<std::ops::Range<usize>>],
    ) -> Result<Vec<usize>> {
        let [episodes] = datasets else {
            return Err(Error::Config("a list of frames samples one dataset: several were given".into()));
        };
        if config.episodes.is_some() || config.weights.is_some() || config.ordering.is_blocks() {
            return Err(Error::Config(
                "a list of frames is sampled as it is: it takes no episode list, weights or blocks order".into(),
            ));
        }
        let total = episodes.last().map_or(0, |e| e.end);
        if let Some(bad) = frames.iter().find(|&&f| f >= total) {
            return Err(Error::Config(format!("frame {bad} is not in the dataset ({total} frames)")));
        }
        Ok(frames.to_vec())
    }

    /// Appends one dataset's anchors to `anchors`, and each episode's span of them to `spans`.
    fn anchors_of(
        config: &SamplerConfig,
        episodes: &[std::ops::Range<usize>],
        anchors: &mut Vec<usize>,
        spans: &mut Vec<std::ops::Range<usize>>,
    ) -> Result<()> {
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
            spans.push(anchors.len()..anchors.len() + (end - start));
            anchors.extend(start..end);
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Every anchor frame, in dataset order (or in the order of the frames listed).
    pub fn anchors(&self) -> &[usize] {
        &self.anchors
    }

    /// With weights, how many samples each dataset gives per epoch (over all trainers).
    pub fn quotas(&self) -> Option<&[usize]> {
        self.quotas.as_deref()
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
    ///
    /// With weights, an epoch is as long as without (every anchor of every dataset), and dataset
    /// `i` fills its quota `cᵢ` of it (`E·wᵢ` rounded by largest remainder, so the quotas sum to
    /// `E`) from an endless stream of its own permutations, seeded `[seed, round, i + 1]`, epoch
    /// `e` taking the stream's elements `e·cᵢ .. (e+1)·cᵢ`: within a dataset no anchor repeats
    /// before all have come. The draws are then shuffled by LeRobot's order for `(seed, e)`. The
    /// order stays a pure function of the epoch, so resuming needs no more state.
    ///
    /// In the blocks order, the epoch's episodes (of every dataset) are permuted, cut into
    /// windows of `block_episodes`, and the anchors of each window permuted among themselves;
    /// with several trainers, each one's shard takes from every window.
    pub fn epoch_order(&self, epoch: u64) -> Vec<usize> {
        let order: Vec<usize> = if self.config.shuffle && self.config.ordering.is_blocks() {
            self.blocks_draw(epoch).into_iter().map(|k| self.anchors[k]).collect()
        } else {
            let drawn: Vec<usize> = match &self.quotas {
                Some(quotas) => self.weighted_draw(quotas, epoch),
                None => (0..self.anchors.len()).collect(),
            };
            if self.config.shuffle {
                lerobot_permutation(drawn.len(), self.config.seed, epoch)
                    .into_iter()
                    .map(|k| self.anchors[drawn[k]])
                    .collect()
            } else {
                drawn.into_iter().map(|k| self.anchors[k]).collect()
            }
        };
        let total = self.shard_len * self.config.world_size;
        let wrapped: Vec<usize> = order.iter().copied().cycle().take(total).collect();
        wrapped.into_iter().skip(self.config.rank).step_by(self.config.world_size).collect()
    }
}

impl EpisodeSampler {
    /// The positions in `anchors` of `epoch` in the blocks order, window after window.
    fn blocks_draw(&self, epoch: u64) -> Vec<usize> {
        let seed = self.config.seed;
        let episodes = blocks_permutation(self.episode_spans.len(), seed, epoch, None);
        let mut drawn = Vec::with_capacity(self.anchors.len());
        let mut window = Vec::new();
        for (w, episodes) in episodes.chunks(self.config.ordering.block_episodes).enumerate() {
            window.clear();
            for &e in episodes {
                window.extend(self.episode_spans[e].clone());
            }
            drawn.extend(blocks_permutation(window.len(), seed, epoch, Some(w)).into_iter().map(|k| window[k]));
        }
        drawn
    }

    /// The positions in `anchors` each dataset gives to `epoch`, dataset by dataset.
    fn weighted_draw(&self, quotas: &[usize], epoch: u64) -> Vec<usize> {
        let mut drawn = Vec::with_capacity(self.anchors.len());
        let mut start = 0;
        for (part, (&end, &quota)) in self.part_ends.iter().zip(quotas).enumerate() {
            let n = (end - start) as u128;
            let first = u128::from(epoch) * quota as u128;
            let mut round = None;
            let mut permutation = Vec::new();
            for position in first..first + quota as u128 {
                let this_round = (position / n) as u64;
                if round != Some(this_round) {
                    round = Some(this_round);
                    permutation = if self.config.shuffle {
                        part_permutation(end - start, self.config.seed, this_round, part)
                    } else {
                        (0..end - start).collect()
                    };
                }
                drawn.push(start + permutation[(position % n) as usize]);
            }
            start = end;
        }
        drawn
    }
}

/// Each dataset's share of an `epoch_len`-sample epoch: `epoch_len · wᵢ / Σw` rounded down, the
/// samples left over going to the largest remainders (ties to the first dataset).
fn quotas(weights: &[f64], part_ends: &[usize], epoch_len: usize) -> Result<Vec<usize>> {
    if part_ends.len() < 2 {
        return Err(Error::Config("sampling weights share an epoch among several datasets; one is given".into()));
    }
    if weights.len() != part_ends.len() {
        return Err(Error::Config(format!("{} sampling weights for {} datasets", weights.len(), part_ends.len())));
    }
    if let Some((i, w)) = weights.iter().enumerate().find(|(_, w)| !(w.is_finite() && **w > 0.0)) {
        return Err(Error::Config(format!("sampling weight {i} is {w}; weights must be finite and positive")));
    }
    let mut start = 0;
    for (i, &end) in part_ends.iter().enumerate() {
        if end == start {
            return Err(Error::Config(format!(
                "dataset {i} has no frames to sample, yet a sampling weight of {}",
                weights[i]
            )));
        }
        start = end;
    }
    // Scaled by the largest first, so that the sum cannot overflow.
    let largest = weights.iter().copied().fold(0.0, f64::max);
    let total: f64 = weights.iter().map(|w| w / largest).sum();
    let exact: Vec<f64> = weights.iter().map(|w| epoch_len as f64 * (w / largest) / total).collect();
    let mut quotas: Vec<usize> = exact.iter().map(|e| (e.floor() as usize).min(epoch_len)).collect();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    by_remainder
        .sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
    let mut left = epoch_len.saturating_sub(quotas.iter().sum());
    for &i in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        quotas[i] += 1;
        left -= 1;
    }
    if let Some(i) = quotas.iter().position(|&q| q == 0) {
        return Err(Error::Config(format!(
            "sampling weight {i} ({}) gives dataset {i} no sample of an epoch of {epoch_len}",
            weights[i]
        )));
    }
    Ok(quotas)
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
    fn listed_frames_are_sampled_as_listed() {
        let frames = vec![20, 3, 4, 29, 11];
        let cfg = SamplerConfig {
            batch_size: 2,
            shuffle: false,
            drop_n_last_frames: 7,
            frames: Some(frames.clone()),
            ..SamplerConfig::default()
        };
        let s = EpisodeSampler::new(cfg.clone(), &episodes()).unwrap();
        assert_eq!((s.anchors(), s.epoch_order(0), s.batches_per_epoch()), (&frames[..], frames.clone(), 3));
        let outside = SamplerConfig { frames: Some(vec![30]), ..cfg.clone() };
        assert!(EpisodeSampler::new(outside, &episodes()).unwrap_err().to_string().contains("frame 30"));
        let with_episodes = SamplerConfig { episodes: Some(vec![0]), ..cfg };
        assert!(EpisodeSampler::new(with_episodes, &episodes()).is_err());
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

    /// Two datasets: 30 frames (the episodes above), then 12 more.
    fn two_datasets() -> Vec<Vec<std::ops::Range<usize>>> {
        vec![episodes(), vec![30..36, 36..42]]
    }

    #[test]
    fn quotas_sum_to_the_epoch_and_round_by_largest_remainder() {
        let ends = [30, 42];
        assert_eq!(quotas(&[0.7, 0.3], &ends, 42).unwrap(), vec![29, 13]);
        assert_eq!(quotas(&[1.0, 1.0], &ends, 41).unwrap(), vec![21, 20]);
        let mut state = 12345u64;
        for _ in 0..200 {
            let weights: Vec<f64> = (0..3)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (state >> 11) as f64 / (1u64 << 53) as f64 + 0.05
                })
                .collect();
            let total: f64 = weights.iter().sum();
            let q = quotas(&weights, &[5, 9, 100], 997).unwrap();
            assert_eq!(q.iter().sum::<usize>(), 997);
            for (c, w) in q.iter().zip(&weights) {
                assert!((*c as f64 - 997.0 * w / total).abs() < 1.0, "{q:?} for {weights:?}");
            }
        }
        assert!(quotas(&[1.0], &ends, 42).unwrap_err().to_string().contains("1 sampling weights for 2 datasets"));
        assert!(quotas(&[1.0, -0.5], &ends, 42).unwrap_err().to_string().contains("weight 1 is -0.5"));
        assert!(quotas(&[1.0, f64::NAN], &ends, 42).is_err());
        assert!(quotas(&[1.0], &[42], 42).unwrap_err().to_string().contains("one is given"));
        assert!(quotas(&[1.0, 1e-6], &ends, 42).unwrap_err().to_string().contains("no sample"));
        assert_eq!(quotas(&[f64::MAX, f64::MAX], &ends, 42).unwrap(), vec![21, 21]);
    }

    #[test]
    fn without_weights_several_datasets_are_one_concatenated_order() {
        let joint = EpisodeSampler::for_datasets(SamplerConfig::default(), &two_datasets()).unwrap();
        let flat: Vec<std::ops::Range<usize>> = two_datasets().concat();
        let single = EpisodeSampler::new(SamplerConfig::default(), &flat).unwrap();
        for epoch in 0..3 {
            assert_eq!(joint.epoch_order(epoch), single.epoch_order(epoch));
        }
    }

    #[test]
    fn weighted_epochs_give_each_dataset_its_quota_without_repeats() {
        let config = SamplerConfig { weights: Some(vec![0.25, 0.75]), ..SamplerConfig::default() };
        let sampler = EpisodeSampler::for_datasets(config, &two_datasets()).unwrap();
        let quotas = sampler.quotas().unwrap().to_vec();
        assert_eq!(quotas, vec![11, 31]);
        let mut counts = vec![0usize; 42];
        for epoch in 0..60 {
            let order = sampler.epoch_order(epoch);
            assert_eq!(order.len(), 42);
            let from_second = order.iter().filter(|&&i| i >= 30).count();
            assert_eq!(from_second, 31, "epoch {epoch}");
            order.iter().for_each(|&i| counts[i] += 1);
        }
        // Each dataset's stream is whole permutations of it: after 60 epochs, 60·11 = 22 rounds
        // of the first dataset's 30 frames, and 60·31 = 155 of the over-weighted second's 12.
        assert_eq!(&counts[..30], &[22; 30][..]);
        assert_eq!(&counts[30..], &[155; 12][..]);
        assert_eq!(sampler.epoch_order(4), sampler.epoch_order(4));
        assert_ne!(sampler.epoch_order(4), sampler.epoch_order(5));
    }

    #[test]
    fn weighted_runs_resume_exactly() {
        let config = SamplerConfig { batch_size: 5, weights: Some(vec![2.0, 1.0]), ..SamplerConfig::default() };
        let sampler = EpisodeSampler::for_datasets(config, &two_datasets()).unwrap();
        let mut straight = Planner::new(sampler.clone(), SamplerState::default(), None);
        let plans: Vec<BatchPlan> = (0..30).map(|_| straight.next_plan().unwrap()).collect();
        for cut in [1, 8, 9, 17, 25] {
            let mut resumed = Planner::new(sampler.clone(), plans[cut - 1].after, None);
            for plan in &plans[cut..] {
                assert_eq!(&resumed.next_plan().unwrap(), plan);
            }
        }
    }

    fn blocks(block_episodes: usize) -> SamplerConfig {
        SamplerConfig { ordering: SampleOrdering::blocks(block_episodes), ..SamplerConfig::default() }
    }

    /// Five episodes of different lengths, 50 frames.
    fn five_episodes() -> Vec<std::ops::Range<usize>> {
        vec![0..10, 10..13, 13..30, 30..38, 38..50]
    }

    #[test]
    fn the_blocks_order_takes_every_anchor_once_a_window_of_episodes_at_a_time() {
        let episodes = five_episodes();
        let episode_of = |i: usize| episodes.iter().position(|r| r.contains(&i)).unwrap();
        let sampler = EpisodeSampler::new(blocks(2), &episodes).unwrap();
        let mut interleaved = false;
        for epoch in 0..4 {
            let order = sampler.epoch_order(epoch);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "epoch {epoch}");
            // Each episode's first and last position in the order, and its length: taken in
            // order of first position, every two episodes fill one contiguous run.
            let mut spans: Vec<(usize, usize, usize)> = (0..episodes.len())
                .map(|e| {
                    let at: Vec<usize> = (0..order.len()).filter(|&p| episode_of(order[p]) == e).collect();
                    (at[0], at[at.len() - 1], at.len())
                })
                .collect();
            spans.sort_unstable();
            let mut next = 0;
            for window in spans.chunks(2) {
                let len: usize = window.iter().map(|s| s.2).sum();
                assert_eq!(window[0].0, next, "epoch {epoch}: a window starts where the last ended");
                assert_eq!(window.iter().map(|s| s.1).max(), Some(next + len - 1), "epoch {epoch}: {spans:?}");
                interleaved |= window.len() == 2 && window[1].0 < window[0].1;
                next += len;
            }
        }
        assert!(interleaved, "a window's samples are shuffled across its episodes");
        assert_eq!(sampler.epoch_order(2), sampler.epoch_order(2));
        assert_ne!(sampler.epoch_order(2), sampler.epoch_order(3));
        assert_ne!(
            sampler.epoch_order(0),
            EpisodeSampler::new(SamplerConfig::default(), &episodes).unwrap().epoch_order(0)
        );
        // Unshuffled, every order is the dataset's.
        let unshuffled = |order| SamplerConfig {
            shuffle: false,
            ordering: SampleOrdering { order, block_episodes: 2 },
            ..SamplerConfig::default()
        };
        let plain = EpisodeSampler::new(unshuffled(SampleOrder::Blocks), &episodes).unwrap();
        assert_eq!(
            plain.epoch_order(1),
            EpisodeSampler::new(unshuffled(SampleOrder::Lerobot), &episodes).unwrap().epoch_order(1)
        );
    }

    #[test]
    fn episodes_per_window_matter_to_a_resume_only_in_the_blocks_order() {
        let lerobot = SampleOrdering::default();
        let blocks = SampleOrdering { order: SampleOrder::Blocks, ..lerobot };
        let wider = |s: SampleOrdering| SampleOrdering { block_episodes: s.block_episodes + 1, ..s };
        assert!(lerobot.same_order(&wider(lerobot)));
        assert!(!blocks.same_order(&wider(blocks)));
        assert!(!blocks.same_order(&lerobot) && blocks.same_order(&blocks));
    }

    #[test]
    fn the_blocks_order_shards_and_resumes_exactly() {
        let mut all = Vec::new();
        for rank in 0..3 {
            let config = SamplerConfig { rank, world_size: 3, drop_last: true, ..blocks(2) };
            all.extend(EpisodeSampler::new(config, &five_episodes()).unwrap().epoch_order(1));
        }
        assert_eq!(all.len(), 48);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 48, "shards overlap");
        let sampler = EpisodeSampler::new(SamplerConfig { batch_size: 7, ..blocks(3) }, &five_episodes()).unwrap();
        let mut straight = Planner::new(sampler.clone(), SamplerState::default(), None);
        let plans: Vec<BatchPlan> = (0..20).map(|_| straight.next_plan().unwrap()).collect();
        for cut in [1, 6, 8, 13] {
            let mut resumed = Planner::new(sampler.clone(), plans[cut - 1].after, None);
            for plan in &plans[cut..] {
                assert_eq!(&resumed.next_plan().unwrap(), plan);
            }
        }
    }

    #[test]
    fn the_blocks_order_refuses_what_it_cannot_do() {
        let err = EpisodeSampler::new(blocks(0), &five_episodes()).unwrap_err();
        assert!(err.to_string().contains("at least 1 episode per window"), "{err}");
        let weighted = SamplerConfig { weights: Some(vec![1.0, 1.0]), ..blocks(2) };
        let err = EpisodeSampler::for_datasets(weighted, &two_datasets()).unwrap_err();
        assert!(err.to_string().contains("does not take sampling weights"), "{err}");
        assert_eq!("blocks".parse::<SampleOrder>(), Ok(SampleOrder::Blocks));
        assert_eq!(SampleOrder::Lerobot.to_string().parse::<SampleOrder>(), Ok(SampleOrder::Lerobot));
        assert!("random".parse::<SampleOrder>().unwrap_err().contains("lerobot (default) or blocks"));
    }

    #[test]
    fn episodes_cannot_be_chosen_across_datasets() {
        let config = SamplerConfig { episodes: Some(vec![0]), ..SamplerConfig::default() };
        let err = EpisodeSampler::for_datasets(config, &two_datasets()).unwrap_err();
        assert!(err.to_string().contains("several datasets"), "{err}");
    }
}
