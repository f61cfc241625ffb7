//! The weights kept as views of one flat buffer, where the backend keeps them
//! ([`kernels::OptimiserKernels::weight_view_alignment`], burn's cubecl backends): the model's trainable
//! parameters read their weights from aligned places of one buffer, and the update writes the
//! buffer in one launch for the whole model ([`kernels::OptimiserKernels::adam_update_views`]), where it
//! would otherwise take a binding per parameter (four launches for PushT's 212 parameters on
//! CUDA). The optimiser's other flat buffers keep [`FlatLayout`]'s ranges, end to end, so the
//! gradients' gather, the checkpoints and the average do not change; a table gives each
//! parameter's place in both.
//!
//! Where the backend's convolutions prefer channels-last feature maps
//! ([`kernels::ConvolutionKernels::prefers_channels_last`]), a 2-D convolution's weights (of 8,
//! 16, ... input channels: not the stem's) lie channels-last in the buffer too (`[O, kh, kw, C]`,
//! KRSC, their parameter a permuted view of them, [`kernels::ViewedWeight`]): cuDNN's
//! channels-last kernels read them as they lie, where each pass would otherwise copy them. The flat buffers keep every parameter in its shape's
//! order, the update finds each element's place.
//!
//! As with torch's optimisers, which hold the parameters they update, the binding holds while the
//! model keeps these views: a parameter replaced by another tensor (a broadcast from another
//! replica, a loaded record) is no longer updated until [`super::FlatAdam::bind`] binds the
//! model again. And as in torch, the update writes the weights in place: a clone of the model
//! shares them, and sees every later update.

use burn::module::{Module, ParamId};
use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use kernels::{Kernels, ViewPlaces, ViewTable, ViewedWeight};

use super::copies::WeightCopies;
use super::flat::FlatLayout;
use super::float;
use super::take::{PutWeights, TakeWeights};
use super::trainable::map_trainable;

/// The buffer of views, where each parameter's weights sit in it, and the copies' buffer in half
/// precision once a step asks for one.
#[derive(Debug)]
pub(super) struct WeightViews<B: Backend> {
    /// Every trainable parameter's weights (f32) at an aligned place, zeros between.
    pub(super) weights: FloatTensor<B>,
    /// The same parameters' ids, in the layout's order.
    ids: Vec<ParamId>,
    /// Where each parameter's weights sit in `weights`, and what the update reads to find them.
    pub(super) table: ViewTable<B>,
    /// The half-precision copies' buffer and its views, laid out as `weights`.
    pub(super) copies: Option<CopyViews<B>>,
}

/// The half-precision copies of the weights as views of one buffer.
#[derive(Debug)]
pub(super) struct CopyViews<B: Backend> {
    /// Their precision.
    pub(super) dtype: FloatDType,
    /// The buffer the update writes.
    pub(super) buffer: FloatTensor<B>,
    /// The views, by parameter, in their parameters' shapes.
    pub(super) views: WeightCopies<B>,
}

impl<B: Kernels> WeightViews<B> {
    /// Moves `model`'s trainable weights into one buffer whose places are aligned to
    /// `alignment` bytes (for f32 and for half-precision copies alike), and gives back the model
    /// with each of them a view of it, trainable as it was; with `channels_last`, a 2-D
    /// convolution's weights lie channels-last there ([`lies_channels_last`]).
    pub(super) fn bind<AB: AutodiffBackend<InnerBackend = B>, M: Module<AB>>(
        model: M,
        layout: &FlatLayout,
        alignment: usize,
        channels_last: bool,
    ) -> (M, Self) {
        let (model, taken) = map_trainable(model, TakeWeights::<B>::new(layout));
        let weights: Vec<Tensor<B, 1>> = taken.weights.into_iter().map(float).collect();
        let device = weights.first().map(Tensor::device).expect("a model with trainable parameters");
        let viewed = taken
            .places
            .iter()
            .map(|(shape, _)| ViewedWeight::new(shape.to_vec(), channels_last && lies_channels_last(shape)));
        let places = ViewPlaces::new(viewed.collect(), alignment);
        let lens = places.lens();
        assert_eq!(places.len(), layout.len(), "every trainable weight of the layout is taken");
        let starts = lens.iter().scan(0, |end, &len| Some(std::mem::replace(end, *end + len)));
        assert!(starts.eq(taken.offsets.iter().copied()), "the layout's ranges are end to end");
        let mut pieces = Vec::with_capacity(2 * weights.len());
        for (k, part) in weights.into_iter().enumerate() {
            pieces.push(lying(part.cast(FloatDType::F32), &places.weights()[k]));
            let next = places.starts().get(k + 1).copied().unwrap_or(places.extent());
            let padding = next - places.starts()[k] - lens[k];
            if padding > 0 {
                pieces.push(Tensor::zeros([padding], &device));
            }
        }
        let weights = Tensor::cat(pieces, 0).into_primitive().tensor();
        let table = ViewTable::new(&places, &device);
        let views = B::weight_views(weights.clone(), &places);
        let put = PutWeights::<B> { weights: taken.places.into_iter().zip(views) };
        let (model, _) = map_trainable(model, put);
        (model, Self { weights, ids: taken.ids, table, copies: None })
    }

    /// Keeps the copies' buffer in `dtype` (made from the weights, so its padding holds zeros; the
    /// update writes every weight's copy), or none.
    pub(super) fn keep_copies(&mut self, dtype: Option<FloatDType>) {
        match dtype {
            Some(dtype) if self.copies.as_ref().is_some_and(|copies| copies.dtype == dtype) => {}
            Some(dtype) => {
                let weights = float::<B>(self.weights.clone());
                let buffer = weights.cast(dtype).into_primitive().tensor();
                let views = B::weight_views(buffer.clone(), self.table.places());
                let views = self.ids.iter().copied().zip(views).collect();
                self.copies = Some(CopyViews { dtype, buffer, views });
            }
            None => self.copies = None,
        }
    }
}

/// Whether a parameter of `shape`, bound for channels-last maps, lies channels-last: a 2-D
/// convolution's weight `[O, C, kh, kw]` whose input channels are a multiple of 8, as cuDNN's
/// NHWC kernels take them. The trunk's stem (3 channels: the images, which reach it
/// channels-first, so cuDNN runs it NCHW) keeps its own order, which its NCHW pass reads as it
/// lies.
fn lies_channels_last(shape: &Shape) -> bool {
    shape.num_dims() == 4 && shape[1].is_multiple_of(8)
}

/// A parameter's weights `part` (1-D, in its shape's order) in the order `weight` lies in:
/// channels-last, `[O, C, k…]` laid out as `[O, k…, C]`, a copy; else as they are.
fn lying<B: Backend>(part: Tensor<B, 1>, weight: &ViewedWeight) -> Tensor<B, 1> {
    if !weight.is_channels_last() {
        return part;
    }
    let (channels, positions) = weight.channels_and_positions();
    let len = weight.len();
    part.reshape([len / (channels * positions), channels, positions]).swap_dims(1, 2).reshape([len])
}
