//! LeRobot's `DiffusionRgbEncoder`: ResNet-18 trunk → SpatialSoftmax (32 keypoints over a
//! fixed coordinate grid) → Linear(64, 64) → ReLU. Resizing and cropping happen before, in
//! [`crate::InputPipeline`].

use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::activation::{relu, softmax};
use kernels::Kernels;

use super::linear::linear;
use super::resnet::{Layout, ResNet18};

/// Keypoints as the expected image coordinates of a softmax over each channel's map.
#[derive(Module, Debug)]
pub struct SpatialSoftmax<B: Backend> {
    /// 1×1 convolution from the feature channels to the keypoints (`pool.nets`).
    pub nets: Conv2d<B>,
    /// Feature-map height.
    pub height: usize,
    /// Feature-map width.
    pub width: usize,
}

impl<B: Backend> SpatialSoftmax<B> {
    /// `channels` feature maps of `(height, width)` to `keypoints` keypoints.
    pub fn new(channels: usize, (height, width): (usize, usize), keypoints: usize, device: &B::Device) -> Self {
        Self { nets: Conv2dConfig::new([channels, keypoints], [1, 1]).init(device), height, width }
    }

    /// LeRobot's `pos_grid` buffer, `[h·w, 2]`: `np.meshgrid(linspace(-1, 1, w), linspace(-1, 1,
    /// h))` flattened, (x, y) per position, computed in float64 then rounded to float32.
    pub fn pos_grid(height: usize, width: usize) -> Vec<f32> {
        let lin = |n: usize, i: usize| if n == 1 { -1.0 } else { -1.0 + 2.0 * i as f64 / (n - 1) as f64 };
        let mut grid = Vec::with_capacity(height * width * 2);
        for y in 0..height {
            for x in 0..width {
                grid.push(lin(width, x) as f32);
                grid.push(lin(height, y) as f32);
            }
        }
        grid
    }

    /// `[N, C, h, w]` → `[N, 2·K]`, ordered `[kp0.x, kp0.y, kp1.x, ...]`. The softmax and the
    /// expectation run in f32; the result comes back in the input's dtype.
    pub fn forward(&self, features: Tensor<B, 4>) -> Tensor<B, 2> {
        let features = self.nets.forward(features);
        let dtype = features.dtype();
        let [n, k, h, w] = features.dims();
        let attention = softmax(features.reshape([n * k, h * w]).cast(FloatDType::F32), 1);
        let grid =
            kernels::device_constant::<B, 2>(&Self::pos_grid(h, w), [h * w, 2], attention.dtype(), &attention.device());
        attention.matmul(grid).reshape([n, k * 2]).cast(dtype)
    }
}

/// One camera encoder.
#[derive(Module, Debug)]
pub struct RgbEncoder<B: Backend> {
    /// The ResNet-18 trunk (`backbone`).
    pub backbone: ResNet18<B>,
    /// Keypoint pooling (`pool`).
    pub pool: SpatialSoftmax<B>,
    /// `out`: Linear(2·K, 2·K).
    pub out: Linear<B>,
}

impl<B: Kernels> RgbEncoder<B> {
    /// An encoder for `(height, width)` inputs (after any resize and crop).
    pub fn new(input: (usize, usize), keypoints: usize, group_norm: bool, device: &B::Device) -> Self {
        let feature_map = ResNet18::<B>::output_size(input.0, input.1);
        Self {
            backbone: ResNet18::new(group_norm, device),
            pool: SpatialSoftmax::new(512, feature_map, keypoints, device),
            out: LinearConfig::new(2 * keypoints, 2 * keypoints).init(device),
        }
    }

    /// `[N, 3, H, W]` normalised images → `[N, 2·K]` features, in the dtype of the encoder's
    /// weights; the trunk's feature maps held in the layout the backend's convolutions want
    /// ([`Layout::for_backend`]).
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let dtype = self.out.weight.val().dtype();
        self.forward_in(images, Layout::for_backend::<B>(dtype))
    }

    /// [`RgbEncoder::forward`] with the trunk's feature maps held in `layout`.
    pub fn forward_in(&self, images: Tensor<B, 4>, layout: Layout) -> Tensor<B, 2> {
        let images = images.cast(self.out.weight.val().dtype());
        relu(linear(&self.out, self.pool.forward(self.backbone.forward_in(images, layout))))
    }

    /// The feature size (`2 · keypoints`).
    pub fn feature_dim(&self) -> usize {
        self.out.weight.dims()[1]
    }
}
