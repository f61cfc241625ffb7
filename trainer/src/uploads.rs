//! How a step's values from the host reach the device: uploaded into new buffers each step
//! ([`Fresh`]), or written into buffers kept from step to step ([`Slots`]), which a step
//! captured as a CUDA graph reads at every replay (docs/plans/cuda-graph.md).

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use kernels::Kernels;
use transforms::frames_to_int;

use crate::error::{Error, Result};

/// Where a step's host values go on the device, in the order the step asks for them.
pub(crate) trait Uploads<B: Kernels> {
    /// Floats.
    fn float<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D>>;
    /// Integers (converted to the device's integers).
    fn int<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D, Int>>;
    /// Booleans.
    fn bool<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D, Bool>>;
    /// uint8 frames of `shape` as the device holds their levels ([`frames_to_int`]).
    fn frames(&mut self, bytes: &[u8], shape: [usize; 4]) -> Result<Tensor<B, 4, Int>>;
}

/// Each value uploaded into a new buffer: what an eager step does.
pub(crate) struct Fresh<'a, B: Backend> {
    device: &'a B::Device,
}

impl<'a, B: Backend> Fresh<'a, B> {
    /// Uploads to `device`.
    pub(crate) fn new(device: &'a B::Device) -> Self {
        Self { device }
    }
}

impl<B: Kernels> Uploads<B> for Fresh<'_, B> {
    fn float<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D>> {
        Ok(Tensor::from_data(data, self.device))
    }

    fn int<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D, Int>> {
        Ok(Tensor::from_data(data, self.device))
    }

    fn bool<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D, Bool>> {
        Ok(Tensor::from_data(data, self.device))
    }

    fn frames(&mut self, bytes: &[u8], shape: [usize; 4]) -> Result<Tensor<B, 4, Int>> {
        Ok(frames_to_int::<B>(bytes, shape, self.device))
    }
}

/// One buffer of [`Slots`].
enum Slot<B: Backend> {
    Float(FloatTensor<B>),
    Int(IntTensor<B>),
    Bool(BoolTensor<B>),
}

/// Buffers kept from step to step, one per value a step uploads, in the order it asks for them:
/// made by the first step ([`Fresh`]'s uploads, kept), written in place by every step after
/// ([`kernels::GraphKernels::write_in_place`]), so that the step's work reads the same memory
/// each time. Only where the backend writes in place (burn's cubecl backends).
pub(crate) struct Slots<B: Backend> {
    slots: Vec<Slot<B>>,
}

impl<B: Kernels> Slots<B> {
    /// No buffers yet: the first step's values make them.
    pub(crate) fn new() -> Self {
        Self { slots: Vec::new() }
    }

    /// Starts a step: its values go to the slots from the first.
    pub(crate) fn writer<'a>(&'a mut self, device: &'a B::Device) -> SlotWriter<'a, B> {
        SlotWriter { slots: &mut self.slots, next: 0, device }
    }

    /// How many buffers the slots hold.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

/// One step's values going into [`Slots`] ([`Slots::writer`]).
pub(crate) struct SlotWriter<'a, B: Backend> {
    slots: &'a mut Vec<Slot<B>>,
    /// The slot the next value goes to.
    next: usize,
    device: &'a B::Device,
}

impl<B: Kernels> SlotWriter<'_, B> {
    /// The slot this value goes to, if the slots already hold it; the next after.
    fn existing(&mut self) -> Option<&Slot<B>> {
        self.next += 1;
        self.slots.get(self.next - 1)
    }

    /// Where a value does not fit its slot: the step asked for other values than the step
    /// that made the slots.
    fn mismatch(&self, kind: &str, why: String) -> Error {
        Error::Config(format!(
            "a step's {kind} value {} does not fit the buffer the first step made for it: {why}",
            self.next - 1
        ))
    }
}

impl<B: Kernels> Uploads<B> for SlotWriter<'_, B> {
    fn float<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D>> {
        let tensor = match self.existing() {
            None => {
                let tensor = Fresh::new(self.device).float::<D>(data)?;
                self.slots.push(Slot::Float(tensor.clone().into_primitive().tensor()));
                return Ok(tensor);
            }
            Some(Slot::Float(tensor)) => tensor.clone(),
            Some(_) => return Err(self.mismatch("float", "the buffer holds another kind".into())),
        };
        let dtype = burn::tensor::TensorMetadata::dtype(&tensor);
        B::write_in_place(&tensor, &data.convert_dtype(dtype)).map_err(|why| self.mismatch("float", why))?;
        Ok(Tensor::from_primitive(TensorPrimitive::Float(tensor)))
    }

    fn int<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D, Int>> {
        let tensor = match self.existing() {
            None => {
                let tensor = Fresh::new(self.device).int::<D>(data)?;
                self.slots.push(Slot::Int(tensor.clone().into_primitive()));
                return Ok(tensor);
            }
            Some(Slot::Int(tensor)) => tensor.clone(),
            Some(_) => return Err(self.mismatch("integer", "the buffer holds another kind".into())),
        };
        let dtype = burn::tensor::TensorMetadata::dtype(&tensor);
        B::write_int_in_place(&tensor, &data.convert_dtype(dtype)).map_err(|why| self.mismatch("integer", why))?;
        Ok(Tensor::from_primitive(tensor))
    }

    fn bool<const D: usize>(&mut self, data: TensorData) -> Result<Tensor<B, D, Bool>> {
        let tensor = match self.existing() {
            None => {
                let tensor = Fresh::new(self.device).bool::<D>(data)?;
                self.slots.push(Slot::Bool(tensor.clone().into_primitive()));
                return Ok(tensor);
            }
            Some(Slot::Bool(tensor)) => tensor.clone(),
            Some(_) => return Err(self.mismatch("boolean", "the buffer holds another kind".into())),
        };
        B::write_bool_in_place(&tensor, &data).map_err(|why| self.mismatch("boolean", why))?;
        Ok(Tensor::from_primitive(tensor))
    }

    fn frames(&mut self, bytes: &[u8], shape: [usize; 4]) -> Result<Tensor<B, 4, Int>> {
        if self.next < self.slots.len() {
            // Written as the integers they are, converted to the dtype of the first step's
            // upload (uint8, or the device's integers).
            return self.int(TensorData::new(bytes.to_vec(), shape));
        }
        let tensor = Fresh::new(self.device).frames(bytes, shape)?;
        self.next += 1;
        self.slots.push(Slot::Int(tensor.clone().into_primitive()));
        Ok(tensor)
    }
}
