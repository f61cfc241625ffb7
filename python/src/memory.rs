//! A batch handed to Python without copying it: its numpy arrays view the loader's own buffers,
//! which a [`BatchMemory`] keeps alive as their base object and hands back to the loader for
//! reuse when the last array viewing them is freed.

use numpy::PyArray;
use numpy::ndarray::{ArrayViewD, IxDyn};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use datasets::FrameFormat;
use loader::{Batch, ValueType};

use crate::convert::DatasetError;

/// Owns a batch while numpy arrays view it.
#[pyclass(module = "lerobot_rs", frozen)]
pub struct BatchMemory {
    batch: Batch,
}

/// `slice` as a numpy array of `shape` viewing it, kept alive by `memory`.
#[allow(unsafe_code, reason = "numpy arrays viewing the batch's buffers: the zero-copy hand-over")]
fn view<'py, T: numpy::Element>(
    memory: &Bound<'py, BatchMemory>,
    slice: &[T],
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let array = ArrayViewD::from_shape(IxDyn(shape), slice)
        .map_err(|e| DatasetError::new_err(format!("a batch field's shape does not match its values: {e}")))?;
    // SAFETY: `slice` lies in the heap buffers of the batch that `memory` owns; they are neither
    // freed nor reused (and so never reallocated) while `memory` lives, and `memory` is the new
    // array's base object, which numpy keeps alive as long as the array (and any view of it).
    Ok(unsafe { PyArray::borrow_from_array(&array, memory.clone().into_any()) }.into_any())
}

/// `batch` as LeRobot's collated dict, its arrays viewing the batch's buffers (camera frames
/// converted to float32 in [0, 1] when `frames` asks for it: that one is a new array).
pub fn batch_to_dict<'py>(py: Python<'py>, batch: Batch, frames: FrameFormat) -> PyResult<Bound<'py, PyDict>> {
    let memory = Bound::new(py, BatchMemory { batch })?;
    let batch = &memory.get().batch;
    let collated = PyDict::new(py);
    for field in &batch.layout().fields {
        let key = field.key.as_str();
        let shape = batch.shape(key).expect("a layout field");
        let array = match field.value_type {
            ValueType::U8 => {
                let pixels = batch.u8(key).expect("a u8 field");
                match frames {
                    FrameFormat::Uint8 => view(&memory, pixels, &shape)?,
                    FrameFormat::Float => {
                        let floats = datasets::Values::F32(datasets::pixels_to_unit_floats(pixels));
                        crate::convert::tensor_to_numpy(py, datasets::Tensor::new(shape, floats))?
                    }
                }
            }
            ValueType::F32 => view(&memory, batch.f32(key).expect("an f32 field"), &shape)?,
            // The Python loader hands frames over, never their rows.
            ValueType::I64 | ValueType::FrameRow => view(&memory, batch.i64(key).expect("an i64 field"), &shape)?,
            ValueType::Bool => view(&memory, batch.bools(key).expect("a bool field"), &shape)?,
        };
        collated.set_item(key, array)?;
        if let Some(pads) = batch.pad(key) {
            collated.set_item(format!("{key}_is_pad"), view(&memory, pads, &[batch.len(), field.steps()])?)?;
        }
    }
    Ok(collated)
}
