//! The buffer of fetched bytes: fixed-size blocks of remote files, the least recently used
//! dropped once their total passes the bound.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;

/// A block: a file's id and the block's index in it.
pub(crate) type BlockKey = (u32, u64);

struct Held {
    bytes: Bytes,
    last_used: u64,
}

#[derive(Default)]
struct Inner {
    blocks: HashMap<BlockKey, Held>,
    /// The blocks by when they were last used, the least recently used first.
    by_use: BTreeMap<u64, BlockKey>,
    held_bytes: usize,
    clock: u64,
    peak_bytes: usize,
}

/// Blocks of remote files held in memory, at most `budget` bytes of them (the one block just
/// added is kept even if it alone is larger).
pub(crate) struct BlockBuffer {
    inner: Mutex<Inner>,
    budget: usize,
}

impl BlockBuffer {
    /// An empty buffer bounded by `budget` bytes.
    pub(crate) fn new(budget: usize) -> Self {
        Self { inner: Mutex::new(Inner::default()), budget }
    }

    /// The block, if held.
    pub(crate) fn get(&self, key: BlockKey) -> Option<Bytes> {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let Inner { blocks, by_use, .. } = &mut *inner;
        blocks.get_mut(&key).map(|held| {
            by_use.remove(&held.last_used);
            by_use.insert(clock, key);
            held.last_used = clock;
            held.bytes.clone()
        })
    }

    /// Whether the block is held, without counting it as used.
    pub(crate) fn contains(&self, key: BlockKey) -> bool {
        self.lock().blocks.contains_key(&key)
    }

    /// Holds `bytes` as block `key`, dropping the least recently used others beyond the budget.
    pub(crate) fn insert(&self, key: BlockKey, bytes: Bytes) {
        let mut inner = self.lock();
        inner.clock += 1;
        let last_used = inner.clock;
        inner.held_bytes += bytes.len();
        if let Some(old) = inner.blocks.insert(key, Held { bytes, last_used }) {
            inner.held_bytes -= old.bytes.len();
            inner.by_use.remove(&old.last_used);
        }
        inner.by_use.insert(last_used, key);
        // The block just added is the most recently used: it is the last to go.
        while inner.held_bytes > self.budget && inner.blocks.len() > 1 {
            let (_, oldest) = inner.by_use.pop_first().expect("every held block is in the use order");
            let dropped = inner.blocks.remove(&oldest).expect("the use order names held blocks");
            inner.held_bytes -= dropped.bytes.len();
        }
        inner.peak_bytes = inner.peak_bytes.max(inner.held_bytes);
    }

    /// Bytes held now and at most so far.
    pub(crate) fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.held_bytes, inner.peak_bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_the_least_recently_used_beyond_the_budget() {
        let buffer = BlockBuffer::new(10);
        buffer.insert((0, 0), Bytes::from(vec![0; 4]));
        buffer.insert((0, 1), Bytes::from(vec![1; 4]));
        assert!(buffer.get((0, 0)).is_some());
        buffer.insert((1, 0), Bytes::from(vec![2; 4]));
        assert!(buffer.contains((0, 0)) && !buffer.contains((0, 1)) && buffer.contains((1, 0)));
        assert_eq!(buffer.held(), (8, 8));
        buffer.insert((2, 0), Bytes::from(vec![3; 30]));
        assert!(buffer.contains((2, 0)) && buffer.held().0 == 30, "a block larger than the budget is still kept");
    }
}
