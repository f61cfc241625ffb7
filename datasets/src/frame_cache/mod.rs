//! The decoded-frame cache: every camera frame of a dataset decoded once into one memory-mapped
//! uint8 file per camera, so that training reads frames with a copy instead of a decode.
//!
//! A cache file is `{dir}/{camera key}.frames`: a 4 KiB header, then one frame per dataset row,
//! in global `index` order, laid out as the header's [`FrameEncoding`](crate::FrameEncoding) says: CHW RGB, or the
//! decoder's YUV 4:2:0 planes (half the bytes, for a loader asked for that encoding). The header
//! carries a format version and a fingerprint of the dataset it was made from (its `info.json`,
//! episode table and timestamps); opening refuses a cache of another version or another dataset,
//! or one whose size does not add up (truncated). The folder's record ([`RECORD`],
//! [`CacheRecord`]), written last, marks the cache complete and says whose frames it holds; its
//! modification time is when the cache was last opened.
//!
//! Writing ([`write`]), reading ([`FrameCache`]) and removing (the [`store`] of automatic caches)
//! take the folder's [`locks`], so that what a killed process left is found and removed by the
//! next run.

pub mod format;
pub mod locks;
mod reader;
mod resize;
pub mod store;
mod write;

pub use format::{
    CacheFormat, CacheHeader, CacheRecord, FORMAT_VERSION, RECORD, cache_file, cache_fingerprint, decoded_bytes,
    fingerprint,
};
pub use reader::{CachedCamera, FrameCache};
pub use write::write_frame_cache;
