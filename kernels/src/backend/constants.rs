//! Constant tensors made once per device: values a step uses unchanged every time
//! (normalisation statistics, the timestep embedding's frequencies, the keypoints' grid) kept on
//! the device, where each forward uploaded them again. A step then uploads only what changes
//! (bench/RESULTS.md, "The host's traffic in a step"), and a step captured as a CUDA graph
//! finds them in buffers made before the capture.
//!
//! Found by content: a constant is keyed by its backend, device, dtype, shape and values' bits,
//! so two callers with the same values share one buffer and no caller can get another's. The
//! buffers live as long as the process, never evicted (a process that loads many policies keeps
//! each one's statistics, a few hundred bytes each), so this is for the few small tensors a
//! model reads every step, not for data.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use burn::prelude::*;
use burn::tensor::DType;

/// What tells two constants apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ConstantKey {
    backend: TypeId,
    device: String,
    dtype: DType,
    shape: Vec<usize>,
    bits: Vec<u32>,
}

/// Every constant made so far, each a `Tensor<B, D>` of its key's backend.
static CONSTANTS: LazyLock<Mutex<HashMap<ConstantKey, Box<dyn Any + Send + Sync>>>> = LazyLock::new(Default::default);

/// `values` (row-major) as a `shape` tensor of `dtype` on `device`: uploaded the first time it
/// is asked for on that device, the same tensor after. The caller must not write it in place
/// (burn's operations do not write a tensor held twice, and the cache holds one).
///
/// # Panics
///
/// When `values` does not hold `shape`'s elements.
pub fn device_constant<B: Backend, const D: usize>(
    values: &[f32],
    shape: [usize; D],
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, D> {
    assert_eq!(values.len(), shape.iter().product::<usize>(), "a constant's values fill its shape");
    let key = ConstantKey {
        backend: TypeId::of::<Tensor<B, D>>(),
        device: format!("{device:?}"),
        dtype,
        shape: shape.to_vec(),
        bits: values.iter().map(|v| v.to_bits()).collect(),
    };
    let mut constants = CONSTANTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let tensor = constants.entry(key).or_insert_with(|| {
        Box::new(Tensor::<B, D>::from_data(TensorData::new(values.to_vec(), shape), (device, dtype)))
    });
    tensor.downcast_ref::<Tensor<B, D>>().expect("a constant is kept as its key's tensor type").clone()
}

#[cfg(test)]
mod tests {
    use burn_flex::Flex;

    use super::*;

    #[test]
    fn a_constant_is_made_once_and_holds_its_values() {
        let device = Default::default();
        let a = device_constant::<Flex, 2>(&[1.0, 2.0, 3.0, 4.0], [2, 2], DType::F32, &device);
        let b = device_constant::<Flex, 2>(&[1.0, 2.0, 3.0, 4.0], [2, 2], DType::F32, &device);
        assert_eq!(a.to_data().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(b.to_data().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        // Other values, another shape or another dtype is another constant.
        let c = device_constant::<Flex, 2>(&[1.0, 2.0, 3.0, 5.0], [2, 2], DType::F32, &device);
        assert_eq!(c.into_data().to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 5.0]);
        let d = device_constant::<Flex, 1>(&[1.0, 2.0, 3.0, 4.0], [4], DType::F32, &device);
        assert_eq!(d.dims(), [4]);
        let e = device_constant::<Flex, 2>(&[1.0, 2.0, 3.0, 4.0], [2, 2], DType::F16, &device);
        assert_eq!(e.dtype(), DType::F16);
        let count = |values: &[f32]| {
            let bits: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
            CONSTANTS.lock().unwrap().keys().filter(|k| k.bits == bits).count()
        };
        assert_eq!(count(&[1.0, 2.0, 3.0, 4.0]), 3, "[2, 2] f32 once, [4] f32 and [2, 2] f16");
    }
}
