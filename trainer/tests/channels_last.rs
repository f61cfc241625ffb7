//! The encoder's trunk held channels-last (the GPU's layout for cuDNN's tensor cores,
//! `LEROBOT_RS_CHANNELS_LAST=1`) gives the features and gradients of it held channels-first, on
//! burn's wgpu backend over Mesa's lavapipe: our GroupNorm kernels reading and writing
//! channels-last, burn's convolutions and pooling given channels-last views, the convolutions'
//! weights bound as the optimiser binds them (lying channels-last, KRSC), without fusion and
//! (in a build with `kernels/gpu-fusion`, as `scripts/test.sh`'s) with it. Alone: `cargo test
//! --release -p trainer --no-default-features --features wgpu-untuned,kernels/gpu-fusion --test
//! channels_last`.

use burn::backend::Autodiff;
use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};

#[path = "support/encoder_layouts.rs"]
mod encoder_layouts;

/// GPU sums taken in another order in each layout: within 1e-4 of each value's largest.
const TOLERANCE: f32 = 1e-4;

#[test]
fn the_trunk_held_channels_last_on_wgpu_gives_the_channels_first_features_and_gradients() {
    // One backend after the other: both draw the encoders' weights from the one generator of
    // the process, which fusion draws from when its queue runs, not when seeded.
    type Direct = CubeBackend<WgpuRuntime, f32, i32, u32>;
    encoder_layouts::assert_layouts_agree::<Autodiff<Direct>>(&WgpuDevice::default(), &[true], TOLERANCE);
    // burn's wgpu backend: fusion over cubecl's where the build has `kernels/gpu-fusion`.
    encoder_layouts::assert_layouts_agree::<Autodiff<burn::backend::Wgpu>>(&WgpuDevice::default(), &[true], TOLERANCE);
}
