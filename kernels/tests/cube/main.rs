//! The GPU backends' kernels (`kernels/src/cube/`: the gradients' gather with their squares, the
//! clipping factors, the optimiser pass, GroupNorm with its activation, FiLM, the matrix product
//! under autodiff, YUV to RGB, the crop) against the
//! CPU's, on burn's wgpu backend without fusion and, with `--features gpu-fusion`, with it too
//! (then through fusion's custom operations, `kernels/src/fusion/`): each check is a test on
//! each backend; tensors written in place, and captures refused on wgpu (`graph`); and what our
//! vendored cubecl-runtime adds (`runtime`). Run where a wgpu
//! adapter exists (a GPU, or Mesa's lavapipe on the CPU, Debian's `mesa-vulkan-drivers`):
//! `cargo test --release -p kernels --features wgpu-untuned,gpu-fusion --test cube`, as
//! `scripts/test.sh` does on lavapipe.

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use kernels::Kernels;

mod convolution;
mod frames;
mod graph;
mod norm;
mod optimiser;
mod runtime;
mod support;

/// A wgpu backend our kernels serve: each check below runs on cubecl's own (`direct::*`) and,
/// with `gpu-fusion`, on burn's fusion over it (`fused::*`).
trait WgpuKernels: Kernels<Device = WgpuDevice> {}

impl<B: Kernels<Device = WgpuDevice>> WgpuKernels for B {}

/// burn's wgpu backend as cubecl gives it: our kernels launched directly (`kernels/src/cube/`).
type Direct = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// burn's fusion over it: our kernels as fusion's custom operations (`kernels/src/fusion/`).
#[cfg(feature = "gpu-fusion")]
type Fused = burn_fusion::Fusion<Direct>;

/// Each check as a test on each backend.
macro_rules! tests_on_each_backend {
    ($($family:ident :: $check:ident),* $(,)?) => {
        mod direct {
            $(#[test]
            fn $check() {
                super::$family::$check::<super::Direct>();
            })*
        }

        #[cfg(feature = "gpu-fusion")]
        mod fused {
            $(#[test]
            fn $check() {
                super::$family::$check::<super::Fused>();
            })*
        }
    };
}

tests_on_each_backend!(
    optimiser::the_kernel_equals_the_cpu_update_over_twenty_steps,
    optimiser::the_gather_equals_the_cpus_for_every_layout,
    optimiser::the_clip_factors_equal_the_cpus,
    optimiser::the_update_writes_the_half_copies_burns_cast_would,
    optimiser::the_update_of_weights_kept_as_views_equals_the_update_of_each,
    optimiser::the_gather_casts_half_precision_gradients_up,
    norm::the_group_norm_kernels_equal_the_cpus,
    norm::group_norm_in_half_precision_equals_casting_around_it,
    norm::film_in_half_precision_equals_the_f32_kernels,
    norm::the_film_kernels_equal_burns_operations_and_their_gradients,
    convolution::the_channel_bias_gradient_equals_burns_broadcast,
    convolution::the_transposed_convolution_equals_the_cpus,
    convolution::the_channel_bias_gradient_in_half_precision_is_the_f32_sum_rounded_once,
    convolution::the_matrix_product_and_its_gradients_equal_burns_matmul,
    frames::the_yuv_kernel_gives_the_decoders_bytes_for_every_value,
    frames::the_crop_kernel_cuts_each_images_window,
    frames::the_crop_kernel_under_autodiff_leaves_images_on_a_gradients_path,
    graph::a_tensor_written_in_place_is_read_so_by_the_work_after,
    graph::a_capture_on_wgpu_is_refused_with_its_reason,
);
