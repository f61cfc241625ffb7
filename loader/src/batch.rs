//! Batches: reusable buffers (one per field, sized for a full batch) that return to the loader
//! when the batch is dropped, so steady-state loading allocates no buffers.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossbeam_channel::Sender;
use datasets::{Tensor, Values};

use crate::layout::{BatchLayout, ValueType};
use crate::sampler::SamplerState;

/// The values of one field for a whole batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Buffer {
    /// Camera frames, `[B, ...item_shape]`.
    U8(Vec<u8>),
    /// Float features.
    F32(Vec<f32>),
    /// Integer features.
    I64(Vec<i64>),
    /// Boolean features.
    Bool(Vec<bool>),
}

/// The storage of one batch, recycled between batches.
#[derive(Debug)]
pub(crate) struct Buffers {
    pub(crate) len: usize,
    pub(crate) epoch: u64,
    pub(crate) batch: usize,
    pub(crate) state: SamplerState,
    pub(crate) indices: Vec<usize>,
    /// The dataset of each sample (position in the loader's datasets).
    pub(crate) dataset_index: Vec<i64>,
    /// One per layout field.
    pub(crate) values: Vec<Buffer>,
    /// One per layout field (empty for fields without a window): `[B, T]`.
    pub(crate) pads: Vec<Vec<bool>>,
}

impl Buffers {
    /// Buffers for a full batch of `layout`.
    pub(crate) fn new(layout: &BatchLayout) -> Self {
        let b = layout.batch_size;
        let values = layout
            .fields
            .iter()
            .map(|f| {
                let n = b * f.per_sample();
                match f.value_type {
                    ValueType::U8 => Buffer::U8(vec![0; n]),
                    ValueType::F32 => Buffer::F32(vec![0.0; n]),
                    ValueType::I64 | ValueType::FrameRow => Buffer::I64(vec![0; n]),
                    ValueType::Bool => Buffer::Bool(vec![false; n]),
                }
            })
            .collect();
        let pads = layout.fields.iter().map(|f| vec![false; f.offsets.as_ref().map_or(0, |o| b * o.len())]).collect();
        Self {
            len: 0,
            epoch: 0,
            batch: 0,
            state: SamplerState::default(),
            indices: Vec::with_capacity(b),
            dataset_index: Vec::with_capacity(b),
            values,
            pads,
        }
    }
}

/// One batch of samples. Slices are views of the loader's reusable buffers; dropping the batch
/// hands them back.
#[derive(Debug)]
pub struct Batch {
    buffers: Option<Box<Buffers>>,
    layout: Arc<BatchLayout>,
    recycle: Option<Sender<Box<Buffers>>>,
}

impl Batch {
    pub(crate) fn new(buffers: Box<Buffers>, layout: Arc<BatchLayout>, recycle: Option<Sender<Box<Buffers>>>) -> Self {
        Self { buffers: Some(buffers), layout, recycle }
    }

    fn buffers(&self) -> &Buffers {
        self.buffers.as_ref().expect("present until dropped")
    }

    /// The number of samples (a full batch, or fewer at the end of an epoch).
    pub fn len(&self) -> usize {
        self.buffers().len
    }

    /// Whether the batch holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The epoch this batch belongs to.
    pub fn epoch(&self) -> u64 {
        self.buffers().epoch
    }

    /// The batch's position in its epoch.
    pub fn index_in_epoch(&self) -> usize {
        self.buffers().batch
    }

    /// The sampler state after this batch: save it with a checkpoint and resume from it.
    pub fn state(&self) -> SamplerState {
        self.buffers().state
    }

    /// The frame index of each sample (the window anchors); with several datasets, in their
    /// joint index (a dataset's start plus the row there, as LeRobot's `MultiLeRobotDataset`).
    pub fn indices(&self) -> &[usize] {
        &self.buffers().indices
    }

    /// The dataset each sample came from: its position among the loader's datasets (LeRobot's
    /// `dataset_index`).
    pub fn dataset_index(&self) -> &[i64] {
        &self.buffers().dataset_index
    }

    /// The layout (fields and their shapes).
    pub fn layout(&self) -> &BatchLayout {
        &self.layout
    }

    fn field_index(&self, key: &str) -> Option<usize> {
        self.layout.fields.iter().position(|f| f.key == key)
    }

    /// The shape of field `key` for this batch: `[len, ...item_shape]`.
    pub fn shape(&self, key: &str) -> Option<Vec<usize>> {
        let f = &self.layout.fields[self.field_index(key)?];
        Some([vec![self.len()], f.item_shape.clone()].concat())
    }

    /// The buffer of `key` and how many of its values this batch uses.
    fn values(&self, key: &str) -> Option<(&Buffer, usize)> {
        let i = self.field_index(key)?;
        Some((&self.buffers().values[i], self.len() * self.layout.fields[i].per_sample()))
    }

    /// The frames of camera `key`, uint8 `[B, (T,) C, H, W]`.
    pub fn u8(&self, key: &str) -> Option<&[u8]> {
        match self.values(key)? {
            (Buffer::U8(v), n) => Some(&v[..n]),
            _ => None,
        }
    }

    /// The values of float feature `key`.
    pub fn f32(&self, key: &str) -> Option<&[f32]> {
        match self.values(key)? {
            (Buffer::F32(v), n) => Some(&v[..n]),
            _ => None,
        }
    }

    /// The values of integer feature `key`.
    pub fn i64(&self, key: &str) -> Option<&[i64]> {
        match self.values(key)? {
            (Buffer::I64(v), n) => Some(&v[..n]),
            _ => None,
        }
    }

    /// The frames of camera `key` as their rows in the frame caches (the loader's
    /// [`crate::LoaderBuilder::frame_rows`]), `[B(, T)]`: the datasets' cached frames laid end to
    /// end, in the datasets' order.
    pub fn frame_rows(&self, key: &str) -> Option<&[i64]> {
        let field = self.layout.field(key)?;
        if field.value_type != ValueType::FrameRow {
            return None;
        }
        self.i64(key)
    }

    /// The values of boolean feature `key`.
    pub fn bools(&self, key: &str) -> Option<&[bool]> {
        match self.values(key)? {
            (Buffer::Bool(v), n) => Some(&v[..n]),
            _ => None,
        }
    }

    /// `{key}_is_pad` of a windowed field: `[B, T]`, true where the window left the episode.
    pub fn pad(&self, key: &str) -> Option<&[bool]> {
        let i = self.field_index(key)?;
        let steps = self.layout.fields[i].offsets.as_ref()?.len();
        Some(&self.buffers().pads[i][..self.len() * steps])
    }

    /// The batch as LeRobot's collated dict (frames uint8), for comparison with
    /// `datasets sample`: every field, `{key}_is_pad` for windowed ones, and with several
    /// datasets `dataset_index` (`[B]`, int64), as LeRobot's `MultiLeRobotDataset` adds it.
    pub fn to_tensors(&self) -> BTreeMap<String, Tensor> {
        let mut out = BTreeMap::new();
        for (i, f) in self.layout.fields.iter().enumerate() {
            let shape = [vec![self.len()], f.item_shape.clone()].concat();
            let n = self.len() * f.per_sample();
            let values = match &self.buffers().values[i] {
                Buffer::U8(v) => Values::U8(v[..n].to_vec()),
                Buffer::F32(v) => Values::F32(v[..n].to_vec()),
                Buffer::I64(v) => Values::I64(v[..n].to_vec()),
                Buffer::Bool(v) => Values::Bool(v[..n].to_vec()),
            };
            out.insert(f.key.clone(), Tensor::new(shape, values));
            if let Some(pads) = self.pad(&f.key) {
                out.insert(
                    format!("{}_is_pad", f.key),
                    Tensor::new(vec![self.len(), f.steps()], Values::Bool(pads.to_vec())),
                );
            }
        }
        if self.layout.num_datasets > 1 {
            let index = Values::I64(self.dataset_index().to_vec());
            out.insert(datasets::DATASET_INDEX.to_string(), Tensor::new(vec![self.len()], index));
        }
        out
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let (Some(buffers), Some(recycle)) = (self.buffers.take(), self.recycle.take()) {
            // The loader may be gone already; then the buffers are simply freed.
            let _ = recycle.send(buffers);
        }
    }
}
