//! The decoded frames of the blocks order ([`crate::SampleOrder::Blocks`]): each camera's
//! episode is decoded once, front to back, as far as its samples need, into a buffer that the
//! rest of its window's samples read from. The buffer keeps the episodes used most recently, at
//! most two windows' worth, so that a batch that spans two windows finds both; an episode it had
//! to let go of is decoded again (the frames are the same, only the work repeats).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

/// One camera of one episode: which dataset, which camera (its index among the dataset's video
/// keys) and which episode (its index in that dataset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpisodeKey {
    pub(crate) part: usize,
    pub(crate) camera: usize,
    pub(crate) episode: usize,
}

/// The frames of one camera of one episode decoded so far: frames `0..decoded` of the episode,
/// `frame_len` bytes each, front to back.
#[derive(Debug)]
pub(crate) struct DecodedEpisode {
    frames: Vec<u8>,
    frame_len: usize,
    decoded: usize,
}

impl DecodedEpisode {
    /// Frame `k` of the episode, decoding the frames before it first (with `decode(j, out)`
    /// for each frame `j` not yet decoded, in order); `None` when `k` is past the episode.
    pub(crate) fn frame<E>(
        &mut self,
        k: usize,
        mut decode: impl FnMut(usize, &mut [u8]) -> Result<(), E>,
    ) -> Result<Option<&[u8]>, E> {
        let len = self.frame_len;
        if (k + 1) * len > self.frames.len() {
            return Ok(None);
        }
        while self.decoded <= k {
            let j = self.decoded;
            decode(j, &mut self.frames[j * len..(j + 1) * len])?;
            self.decoded += 1;
        }
        Ok(Some(&self.frames[k * len..(k + 1) * len]))
    }
}

/// One camera-episode the buffer holds.
#[derive(Debug)]
struct Held {
    key: EpisodeKey,
    /// The bytes its frames take once decoded.
    bytes: usize,
    episode: Arc<Mutex<DecodedEpisode>>,
}

/// The episodes decoded for the current windows, the least recently used let go first.
#[derive(Debug)]
pub(crate) struct EpisodeFrames {
    capacity: usize,
    /// Least recently used first.
    held: Mutex<VecDeque<Held>>,
}

impl EpisodeFrames {
    /// A buffer of at most `capacity` camera-episodes.
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), held: Mutex::new(VecDeque::new()) }
    }

    /// The buffer of `key`, made (empty, for `frames` frames of `frame_len` bytes) if it is not
    /// held; the least recently used episode is let go when more than the capacity are held.
    pub(crate) fn episode(&self, key: EpisodeKey, frames: usize, frame_len: usize) -> Arc<Mutex<DecodedEpisode>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = match held.iter().position(|h| h.key == key) {
            Some(at) => held.remove(at).expect("the position is in the queue"),
            None => {
                // Allocated zeroed and untouched: pages are faulted in as frames are decoded.
                let episode = DecodedEpisode { frames: vec![0; frames * frame_len], frame_len, decoded: 0 };
                Held { key, bytes: frames * frame_len, episode: Arc::new(Mutex::new(episode)) }
            }
        };
        let episode = entry.episode.clone();
        held.push_back(entry);
        while held.len() > self.capacity {
            held.pop_front();
        }
        episode
    }

    /// Bytes the held episodes take (allocated; pages not yet decoded into are not resident).
    pub(crate) fn bytes(&self) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|h| h.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(episode: usize) -> EpisodeKey {
        EpisodeKey { part: 0, camera: 0, episode }
    }

    #[test]
    fn frames_are_decoded_once_in_order_and_only_as_far_as_asked() {
        let buffer = EpisodeFrames::new(2);
        let episode = buffer.episode(key(0), 5, 2);
        let mut calls = Vec::new();
        let mut decode = |j: usize, out: &mut [u8]| -> Result<(), ()> {
            calls.push(j);
            out.fill(j as u8 * 10);
            Ok(())
        };
        let mut held = episode.lock().unwrap();
        assert_eq!(held.frame(2, &mut decode).unwrap(), Some(&[20u8, 20][..]));
        assert_eq!(held.frame(0, &mut decode).unwrap(), Some(&[0u8, 0][..]));
        assert_eq!(held.frame(3, &mut decode).unwrap(), Some(&[30u8, 30][..]));
        assert_eq!(held.frame(5, &mut decode).unwrap(), None);
        assert_eq!(calls, vec![0, 1, 2, 3]);
    }

    #[test]
    fn an_error_leaves_the_frame_to_be_decoded_again() {
        let buffer = EpisodeFrames::new(1);
        let episode = buffer.episode(key(0), 3, 1);
        let mut held = episode.lock().unwrap();
        let failing = |j: usize, _: &mut [u8]| if j == 1 { Err("cut") } else { Ok(()) };
        assert_eq!(held.frame(2, failing).unwrap_err(), "cut");
        let mut again = Vec::new();
        held.frame(2, |j, _| -> Result<(), ()> {
            again.push(j);
            Ok(())
        })
        .unwrap();
        assert_eq!(again, vec![1, 2]);
    }

    #[test]
    fn the_least_recently_used_episode_is_let_go() {
        let buffer = EpisodeFrames::new(2);
        let first = buffer.episode(key(0), 1, 4);
        buffer.episode(key(1), 1, 4);
        // Using episode 0 again makes episode 1 the oldest.
        assert!(Arc::ptr_eq(&first, &buffer.episode(key(0), 1, 4)));
        buffer.episode(key(2), 1, 4);
        assert!(Arc::ptr_eq(&first, &buffer.episode(key(0), 1, 4)), "episode 0 was kept");
        assert_eq!(buffer.bytes(), 8);
        let other_camera = EpisodeKey { camera: 1, ..key(0) };
        assert!(!Arc::ptr_eq(&first, &buffer.episode(other_camera, 1, 4)));
    }
}
