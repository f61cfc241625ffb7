//! Matrix products in cuBLAS, on burn's cuda tensors and the stream cubecl orders their work on,
//! for the 1-D convolutions as products over their unfolded input ([`crate::unfold`]) where
//! `LEROBOT_RS_CONV1D=cublas` asks for it. cuBLAS is the library cuDNN itself opens (found with
//! it, [`super::library`]); f32 takes TF32 tensor cores unless exact f32 is asked for, as the
//! convolutions do; half precision accumulates in f32.

#![expect(unsafe_code, reason = "cuBLAS is a C library: raw handles and device pointers")]

use std::ffi::c_void;
use std::sync::OnceLock;

use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use cubecl::cuda::CudaRuntime;
use cudarc::cublas::sys;

use super::context::{CudaTensor, buffers, primary_context_current, thread_handle};
use crate::cube::tensors::empty_like;
use crate::cube::unfold::Product;

/// Whether cuBLAS loaded (where it did not, once said, the convolutions stay in cuDNN).
pub(super) fn loaded() -> bool {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let status = status();
    if let Err(why) = status
        && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        tracing::warn!("{why}: no cuBLAS products (the 1-D convolutions stay in cuDNN, the Linear layers in burn)");
    }
    status.is_ok()
}

/// Whether cuBLAS loaded, or why not.
fn status() -> &'static Result<(), String> {
    static STATUS: OnceLock<Result<(), String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        // cuDNN's loading first: it puts the Python environment's cuBLAS in reach too.
        super::library::status().as_ref().map_err(Clone::clone)?;
        // SAFETY: opening a library runs its initialisers; cuBLAS's are sound to run.
        if unsafe { sys::is_culib_present() } { Ok(()) } else { Err("cuBLAS (libcublas) not found".into()) }
    })
}

/// cuBLAS's products, through the calling thread's handle for the tensors' device.
pub(super) struct Cublas {
    /// TF32 tensor cores for f32.
    pub(super) tf32: bool,
}

impl Product<CudaRuntime> for Cublas {
    fn product(
        &self,
        a: &CudaTensor,
        a_transposed: bool,
        b: &CudaTensor,
        b_transposed: bool,
    ) -> Result<CudaTensor, String> {
        status().as_ref().map_err(Clone::clone)?;
        let (element, compute) = match (a.dtype, b.dtype) {
            (DType::F32 | DType::Flex32, DType::F32 | DType::Flex32) if self.tf32 => {
                (sys::cudaDataType::CUDA_R_32F, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32)
            }
            (DType::F32 | DType::Flex32, DType::F32 | DType::Flex32) => {
                (sys::cudaDataType::CUDA_R_32F, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F)
            }
            (DType::BF16, DType::BF16) => {
                (sys::cudaDataType::CUDA_R_16BF, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F)
            }
            (DType::F16, DType::F16) => (sys::cudaDataType::CUDA_R_16F, sys::cublasComputeType_t::CUBLAS_COMPUTE_32F),
            types => return Err(format!("cuBLAS multiplies f32, bf16 or f16 matrices of one type, not {types:?}")),
        };
        let [a, b] = [a, b].map(|t| into_contiguous(t.clone()));
        let stored = |t: &CudaTensor| match t.meta.shape().as_slice() {
            &[rows, columns] => Ok([rows, columns]),
            other => Err(format!("cuBLAS multiplies matrices, not tensors of shape {other:?}")),
        };
        let gemm = ColumnMajorGemm::of_row_major(stored(&a)?, a_transposed, stored(&b)?, b_transposed)?;
        let c = empty_like(&a, Shape::new(gemm.product_shape()), a.dtype);
        let workspace = kept_workspace(&a);
        let held = buffers(&[&a, &b, &c], Some(&workspace))?;
        let [a_ptr, b_ptr, c_ptr, workspace_ptr] = held.pointers[..] else { unreachable!("four buffers") };
        let op = |transposed: bool| {
            if transposed { sys::cublasOperation_t::CUBLAS_OP_T } else { sys::cublasOperation_t::CUBLAS_OP_N }
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        with_handle(a.device.index, held.stream, (workspace_ptr, CUBLAS_WORKSPACE), |handle| {
            let sync = super::settings::synchronising();
            if sync {
                cudarc::driver::result::ctx::synchronize().map_err(|e| format!("synchronise: {e:?}"))?;
            }
            // SAFETY: the pointers are live buffers of the shapes above (contiguous, held until
            // the call is enqueued); `c` is new, `m × n` elements of the operands' type; alpha and
            // beta are f32, as the f32 compute types take them.
            let status = unsafe {
                sys::cublasGemmEx(
                    handle,
                    op(gemm.first_transposed),
                    op(gemm.second_transposed),
                    gemm.m,
                    gemm.n,
                    gemm.k,
                    (&alpha as *const f32).cast(),
                    b_ptr as usize as *const c_void,
                    element,
                    gemm.first_ld,
                    a_ptr as usize as *const c_void,
                    element,
                    gemm.second_ld,
                    (&beta as *const f32).cast(),
                    c_ptr as usize as *mut c_void,
                    element,
                    gemm.product_ld,
                    compute,
                    sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                )
            };
            if status != sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                return Err(format!("cublasGemmEx: {status:?}"));
            }
            // A fault inside the product shows here, named, rather than in a later read.
            if sync {
                cudarc::driver::result::ctx::synchronize()
                    .map_err(|e| format!("synchronise after cublasGemmEx: {e:?}"))?;
            }
            Ok(())
        })?;
        drop(held);
        Ok(c)
    }
}

/// The arguments of a column-major BLAS product (`cublasGemmEx`'s `transa`, `transb`, `m`, `n`,
/// `k`, `lda`, `ldb`, `ldc`) that compute the row-major product `C = op(A)·op(B)` of contiguous
/// row-major matrices. Read as column-major, a row-major matrix is its transpose, so the call
/// asks for `Cᵀ = op(B)ᵀ·op(A)ᵀ`: `B` as stored is the first operand, `A` the second, and each
/// leading dimension is a stored row's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnMajorGemm {
    /// Whether the first operand (`B` as stored) is transposed (`transa`).
    pub first_transposed: bool,
    /// Whether the second operand (`A` as stored) is transposed (`transb`).
    pub second_transposed: bool,
    /// The column-major product's rows: `C`'s columns.
    pub m: i32,
    /// The column-major product's columns: `C`'s rows.
    pub n: i32,
    /// The inner dimension.
    pub k: i32,
    /// The first operand's leading dimension (`lda`): `B`'s stored row length.
    pub first_ld: i32,
    /// The second operand's (`ldb`): `A`'s stored row length.
    pub second_ld: i32,
    /// The product's (`ldc`): `C`'s row length.
    pub product_ld: i32,
}

impl ColumnMajorGemm {
    /// The call for `a` stored as `[rows, columns]` (used transposed where `a_transposed`) by `b`
    /// likewise; an error where the inner dimensions differ or a size passes 32 bits.
    pub fn of_row_major(a: [usize; 2], a_transposed: bool, b: [usize; 2], b_transposed: bool) -> Result<Self, String> {
        let [rows, inner] = if a_transposed { [a[1], a[0]] } else { a };
        let [inner_b, columns] = if b_transposed { [b[1], b[0]] } else { b };
        if inner != inner_b {
            return Err(format!("cuBLAS: [{rows}, {inner}] by [{inner_b}, {columns}]"));
        }
        let int = |size: usize| i32::try_from(size).map_err(|_| format!("cuBLAS: a size of {size} beyond 32 bits"));
        Ok(Self {
            first_transposed: b_transposed,
            second_transposed: a_transposed,
            m: int(columns)?,
            n: int(rows)?,
            k: int(inner)?,
            first_ld: int(b[1])?,
            second_ld: int(a[1])?,
            product_ld: int(columns)?,
        })
    }

    /// The row-major product's shape, `[rows, columns]`.
    pub fn product_shape(&self) -> [usize; 2] {
        [self.n, self.m].map(|size| usize::try_from(size).unwrap_or(0))
    }
}

/// The workspace each thread's cuBLAS handle is given, per device: 32 MiB, what NVIDIA
/// recommends on Hopper (cuBLAS's own pool is 4 MiB elsewhere).
const CUBLAS_WORKSPACE: usize = 32 << 20;

/// This thread's cuBLAS workspace on `like`'s device, [`CUBLAS_WORKSPACE`] bytes of cubecl's
/// pool made at its first product and kept for the thread's life (as its handle is). Given
/// rather than left to cuBLAS, which since 12.2 takes its workspace with `cudaMallocAsync` on
/// the stream it is set to: a memory node in a captured CUDA graph, which may not hold one
/// (docs/plans/cuda-graph.md).
fn kept_workspace(like: &CudaTensor) -> cubecl::server::Handle {
    thread_local! {
        static KEPT: std::cell::RefCell<std::collections::HashMap<usize, cubecl::server::Handle>> =
            std::cell::RefCell::default();
    }
    KEPT.with(|kept| {
        kept.borrow_mut().entry(like.device.index).or_insert_with(|| like.client.empty(CUBLAS_WORKSPACE)).clone()
    })
}

/// Runs `f` with this thread's cuBLAS handle for `device`, on `stream`, with `workspace` (its
/// device pointer and bytes: [`kept_workspace`]), the device's primary context (cubecl's)
/// current. The handle is never destroyed, as cuDNN's are not: a thread that ends leaves it
/// behind (the trainer's threads, a replica's among them, last as long as its run).
fn with_handle<T>(
    device: usize,
    stream: cudarc::driver::sys::CUstream,
    workspace: (u64, usize),
    f: impl FnOnce(sys::cublasHandle_t) -> Result<T, String>,
) -> Result<T, String> {
    primary_context_current(device)?;
    let create = || {
        let mut handle = std::ptr::null_mut();
        // SAFETY: `handle` is written by the call.
        match unsafe { sys::cublasCreate_v2(&mut handle) } {
            sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => Ok(handle.cast()),
            failed => Err(format!("cublasCreate: {failed:?}")),
        }
    };
    let handle: sys::cublasHandle_t = thread_handle("cublas", device, create)?.cast();
    // SAFETY: the handle is live; the stream is cubecl's, live while its tensors are.
    match unsafe { sys::cublasSetStream_v2(handle, stream as sys::cudaStream_t) } {
        sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => {}
        failed => return Err(format!("cublasSetStream: {failed:?}")),
    }
    // After the stream: setting one puts the handle back on cuBLAS's own workspace. SAFETY: the
    // workspace is a buffer of that many bytes on `device`, kept for the thread's life, and
    // used only in the order of the stream the handle is on, cubecl's.
    match unsafe { sys::cublasSetWorkspace_v2(handle, super::context::ptr(workspace.0), workspace.1) } {
        sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS => f(handle),
        failed => Err(format!("cublasSetWorkspace: {failed:?}")),
    }
}
