//! The Linear layers' matrix products in cuBLAS where `LEROBOT_RS_LINEAR=cublas` asks for them
//! ([`crate::ConvolutionKernels::matrix_product`]): the seventh contact's profile had burn's own
//! products (`matmul_entry`, 44 launches) at 1.9 ms of the PushT step at batch 64, for shapes
//! cuBLAS's tensor-core kernels take in a few microseconds each.

use std::sync::atomic::Ordering;

use burn::tensor::DType;

use super::blas::{ColumnMajorGemm, Cublas, loaded};
use super::choice::Choice;
use super::context::CudaTensor;
use super::counters::PRODUCT_CALLS;
use super::problem::ConvDataType;

/// Where the Linear layers' matrix products run on cuda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinearPath {
    /// burn's own `linear` (cubecl's matrix product; the default until a GPU has timed cuBLAS).
    Burn,
    /// One cuBLAS product a pass (burn's where cuBLAS fails).
    Cublas,
}

/// [`LinearPath`] as `LEROBOT_RS_LINEAR` names it (`burn` or `cublas`; burn's where unset or
/// unknown) until [`use_linear`] says otherwise.
static LINEAR: Choice<LinearPath> =
    Choice::new(&[LinearPath::Burn, LinearPath::Cublas], || match std::env::var("LEROBOT_RS_LINEAR").as_deref() {
        Ok("cublas") => LinearPath::Cublas,
        Ok("burn") | Err(_) => LinearPath::Burn,
        Ok(other) => {
            tracing::warn!("LEROBOT_RS_LINEAR={other:?} is neither burn nor cublas: burn's");
            LinearPath::Burn
        }
    });

/// Sends the Linear layers' products down `path`.
pub fn use_linear(path: LinearPath) {
    LINEAR.set(path);
}

/// The path the Linear layers' products take now ([`use_linear`], else `LEROBOT_RS_LINEAR`).
pub fn linear_path() -> LinearPath {
    LINEAR.get()
}

/// Whether the Linear layers' products of `dtype` come here: asked for, cuBLAS loaded, and a
/// type it multiplies (f32, TF32 unless exact f32 is asked for, as the convolutions take it;
/// bf16 and f16 accumulating in f32).
pub fn takes_products(dtype: DType) -> bool {
    linear_path() == LinearPath::Cublas && ConvDataType::of(dtype).is_some() && loaded()
}

/// `op(a)·op(b)` in cuBLAS, on the stream of burn's work; `None` where it is not asked for, the
/// operands are not two matrices that multiply, or cuBLAS fails (said once: burn's products
/// from then on).
pub fn product(a: &CudaTensor, a_transposed: bool, b: &CudaTensor, b_transposed: bool) -> Option<CudaTensor> {
    let data_type = ConvDataType::of(a.dtype)?;
    if !takes_products(a.dtype) || a.dtype != b.dtype {
        return None;
    }
    // Operands that are not two matrices cuBLAS's call can multiply are the caller's to refuse
    // (burn's product says what is wrong); only a failure of cuBLAS itself turns the path off.
    let stored = |t: &CudaTensor| <[usize; 2]>::try_from(t.meta.shape().as_slice()).ok();
    ColumnMajorGemm::of_row_major(stored(a)?, a_transposed, stored(b)?, b_transposed).ok()?;
    let products = Cublas { tf32: !super::conv::exact_f32(data_type) };
    match crate::cube::unfold::Product::product(&products, a, a_transposed, b, b_transposed) {
        Ok(c) => {
            PRODUCT_CALLS.fetch_add(1, Ordering::Relaxed);
            Some(c)
        }
        Err(why) => {
            tracing::warn!("cuBLAS failed on a Linear layer's product ({why}): burn's products from now on");
            use_linear(LinearPath::Burn);
            None
        }
    }
}
