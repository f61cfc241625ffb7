//! The parquet side of a dataset: files mapped into memory, decoded under a guard that turns the
//! decoder's panics into errors, flattened into contiguous typed columns (the [`FrameTable`]),
//! and the images some datasets store inside them.

pub(crate) mod columns;
pub(crate) mod frame_table;
pub(crate) mod image;
pub(crate) mod mmap;
pub(crate) mod parquet_file;

pub use frame_table::{Column, ColumnValues, EncodedImages, FrameTable};
