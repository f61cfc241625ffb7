//! The encoder's trunk held channels-last against channels-first, on any backend: the same
//! features and the same gradients. Its weights are bound as the optimiser binds them for each
//! layout (views of one buffer on the GPU backends; for channels-last, a 2-D convolution's
//! lying channels-last, KRSC).

use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use kernels::Kernels;
use trainer::DiffusionConfig;
use trainer::model::encoder::RgbEncoder;
use trainer::model::resnet::{Layout, Norm2d};
use trainer::optim::{FlatAdam, FlatLayout};

/// The encoder's features for `images` and the gradients of a few of its parameters (the stem,
/// a strided block's convolutions and shortcut, the last block, a GroupNorm's scale), with the
/// trunk's feature maps held in `layout`, its weights bound as the optimiser binds them for it.
fn encoder_pass<B: AutodiffBackend<InnerBackend: Kernels> + Kernels>(
    device: &B::Device,
    group_norm: bool,
    images: &TensorData,
    layout: Layout,
) -> (Vec<f32>, Vec<(String, Vec<f32>)>) {
    let encoder = trainer::model::with_seeded_generator::<B, _>(device, 7, || {
        RgbEncoder::<B>::new((images.shape[2], images.shape[3]), 32, group_norm, device)
    });
    // Bound in either layout: a binding draws the weights (burn initialises a parameter when it
    // is first read) in its own order, which both passes then share.
    let encoder = FlatAdam::<B::InnerBackend>::new(&DiffusionConfig::new(), FlatLayout::of(&encoder), device)
        .with_channels_last_weights(layout == Layout::ChannelsLast)
        .bind(encoder);
    let features = encoder.forward_in(Tensor::<B, 4>::from_data(images.clone(), device), layout);
    // A loss that weighs every feature differently, so that each gradient is its own.
    let width = features.dims()[1];
    let weights = Tensor::<B, 1, Int>::arange(1..width as i64 + 1, device).float().unsqueeze::<2>();
    let grads = (features.clone() * weights).sum().backward();
    let backbone = &encoder.backbone;
    let block = &backbone.layers[1][0];
    let read = |t: Tensor<B::InnerBackend, 4>| t.into_data().convert::<f32>().to_vec::<f32>().unwrap();
    let mut gradients = vec![
        ("conv1", backbone.conv1.weight.grad(&grads)),
        ("layer2.0.conv1", block.conv1.weight.grad(&grads)),
        ("layer2.0.downsample", block.downsample.as_ref().expect("a strided block").conv.weight.grad(&grads)),
        ("layer4.1.conv2", backbone.layers[3][1].conv2.weight.grad(&grads)),
    ]
    .into_iter()
    .map(|(name, grad)| (name.to_string(), read(grad.expect("a gradient"))))
    .collect::<Vec<_>>();
    if let Norm2d::Group(norm) = &block.bn1 {
        let gamma = norm.gamma.as_ref().expect("an affine GroupNorm").grad(&grads).expect("a gradient");
        gradients.push(("layer2.0.bn1.weight".into(), gamma.into_data().convert::<f32>().to_vec().unwrap()));
    }
    (features.into_data().convert::<f32>().to_vec().unwrap(), gradients)
}

/// The largest difference of `a` and `b`, relative to the largest magnitude of `a`.
fn apart(a: &[f32], b: &[f32]) -> f32 {
    let largest = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / largest
}

/// Asserts that, for each of `group_norms` (GroupNorm's trunk, or BatchNorm's), the encoder of
/// random 64×48 images held channels-last gives the features and gradients of it held
/// channels-first, within `tolerance` of each one's largest value.
pub fn assert_layouts_agree<B: AutodiffBackend<InnerBackend: Kernels> + Kernels>(
    device: &B::Device,
    group_norms: &[bool],
    tolerance: f32,
) {
    // Images from a formula, not the device's generator: tests running at once on one device
    // would draw from it between another's seeding and its initialisation.
    let shape = [2, 3, 64, 48];
    let pixels = (0..shape.iter().product::<usize>()).map(|i| ((i as f32 * 0.7548).sin() * 43758.547).fract().abs());
    let images = TensorData::new(pixels.collect::<Vec<f32>>(), shape);
    for &group_norm in group_norms {
        let (first, first_grads) = encoder_pass::<B>(device, group_norm, &images, Layout::ChannelsFirst);
        let (last, last_grads) = encoder_pass::<B>(device, group_norm, &images, Layout::ChannelsLast);
        assert!(first.iter().any(|&v| v != 0.0), "features all zero: the check would mean nothing");
        let features = apart(&first, &last);
        assert!(features < tolerance, "group norm {group_norm}: features {features:e} apart");
        for ((name, a), (_, b)) in first_grads.iter().zip(&last_grads) {
            assert!(a.iter().any(|&v| v != 0.0), "{name}: a zero gradient");
            let gradient = apart(a, b);
            assert!(gradient < tolerance, "group norm {group_norm}: {name}'s gradient {gradient:e} apart");
        }
    }
}
