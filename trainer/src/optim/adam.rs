//! Adam's state as two flat buffers, and the fused update of a whole model.

use burn::prelude::*;
use burn::record::Record;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, FloatDType};
use kernels::{AdamStep, FlatBuffers, Kernels, UpdatedWeights, ViewsUpdate};

use super::copies::WeightCopies;
use super::flat::FlatLayout;
use super::take::{PutWeights, TakeWeights};
use super::trainable::map_trainable;
use super::views::WeightViews;
use super::{ClipFactors, Clipping, float};
use crate::error::{Error, Result};
use crate::policy_config::DiffusionConfig;

/// Adam (torch's, with L2 weight decay; see [`kernels::AdamStep`]) whose moments are flat
/// buffers laid out as [`FlatLayout`] says; on burn's cubecl backends it also holds the buffer
/// whose views are the model's weights ([`FlatAdam::bind`]).
#[derive(Debug)]
pub struct FlatAdam<B: Backend> {
    layout: FlatLayout,
    moment_1: Tensor<B, 1>,
    moment_2: Tensor<B, 1>,
    /// Updates applied so far.
    time: usize,
    /// The last update's gradient buffer, free to be written over by the next gather.
    spare: Option<Tensor<B, 1>>,
    /// Where the backend keeps weights as views of one buffer, the byte alignment of their
    /// places ([`OptimiserKernels::weight_view_alignment`](kernels::OptimiserKernels::weight_view_alignment)).
    view_alignment: Option<usize>,
    /// The model's weights as views, once bound ([`FlatAdam::bind`], or else the first update).
    views: Option<WeightViews<B>>,
    /// Whether a binding lays 2-D convolutions' weights channels-last ([`FlatAdam::with_channels_last_weights`]).
    channels_last_weights: bool,
    beta_1: f64,
    beta_2: f64,
    epsilon: f64,
    weight_decay: f64,
}

/// What a checkpoint keeps of a [`FlatAdam`].
#[derive(Record)]
pub struct FlatAdamRecord<B: Backend> {
    /// The first moments, flat.
    pub moment_1: Tensor<B, 1>,
    /// The second moments, flat.
    pub moment_2: Tensor<B, 1>,
    /// Updates applied.
    pub time: usize,
}

impl<B: Kernels> FlatAdam<B> {
    /// Zero moments for `layout`, with LeRobot's preset's betas, epsilon and weight decay.
    pub fn new(config: &DiffusionConfig, layout: FlatLayout, device: &B::Device) -> Self {
        let zeros = Tensor::zeros([layout.len()], device);
        Self {
            moment_1: zeros.clone(),
            moment_2: zeros,
            layout,
            time: 0,
            spare: None,
            view_alignment: B::weight_view_alignment(device),
            views: None,
            channels_last_weights: B::prefers_channels_last(DType::F32),
            beta_1: config.optimizer_betas.0,
            beta_2: config.optimizer_betas.1,
            epsilon: config.optimizer_eps,
            weight_decay: config.optimizer_weight_decay,
        }
    }

    /// Has a binding of weights as views ([`FlatAdam::bind`]) lay 2-D convolutions' weights
    /// channels-last (`[O, kh, kw, C]`, KRSC, as cuDNN's channels-last kernels read them), or in
    /// their shapes' order. By default, channels-last where the backend's convolutions prefer
    /// channels-last maps ([`kernels::ConvolutionKernels::prefers_channels_last`], which does
    /// not depend on the precision today), read when the optimiser is made: a switch changed
    /// after that costs each pass a copy of its weights, no more. Either way the model's
    /// parameters keep their shapes and values, and the flat buffers their order; a model bound
    /// already keeps its layout until bound again.
    pub fn with_channels_last_weights(mut self, channels_last: bool) -> Self {
        self.channels_last_weights = channels_last;
        self
    }

    /// Where each parameter lives in the flat buffers.
    pub fn layout(&self) -> &FlatLayout {
        &self.layout
    }

    /// Updates applied so far.
    pub fn time(&self) -> usize {
        self.time
    }

    /// One update of `model` from its flat gradients `grads`, clipped by `clipping`, at learning
    /// rate `lr`; with `average = Some((flat, weight))` the moving average of the weights is
    /// blended in the same pass. With `copy`, also each trainable parameter's new weights cast
    /// to it (what a half-precision forward reads), written by the same pass where the backend
    /// can ([`OptimiserKernels::adam_update_all_with_copies`](kernels::OptimiserKernels::adam_update_all_with_copies), or [`OptimiserKernels::adam_update_views`](kernels::OptimiserKernels::adam_update_views) where the
    /// weights are views of one buffer, [`FlatAdam::bind`]); without, no copies. Returns the
    /// model, the copies and the clipping's factors (computed by the update's own launch where
    /// the weights are views and the clipping was left as squares,
    /// [`OptimiserKernels::adam_update_views_clipping`](kernels::OptimiserKernels::adam_update_views_clipping)).
    pub fn step<AB: AutodiffBackend<InnerBackend = B>, M: Module<AB>>(
        &mut self,
        model: M,
        grads: Tensor<B, 1>,
        clipping: Clipping<B>,
        lr: f64,
        average: Option<(&mut Tensor<B, 1>, f32)>,
        copy: Option<FloatDType>,
    ) -> (M, WeightCopies<B>, ClipFactors<B>) {
        let step = self.next_step(lr, average.as_ref().map(|(_, weight)| *weight));
        self.advance();
        self.apply(model, grads, clipping, &step, None, average.map(|(flat, _)| flat), copy)
    }

    /// The numbers of the next update at learning rate `lr` (blending an average by
    /// `ema_weight` where one is kept): the one [`FlatAdam::step`] would make.
    pub fn next_step(&self, lr: f64, ema_weight: Option<f32>) -> AdamStep {
        AdamStep {
            lr,
            beta_1: self.beta_1,
            beta_2: self.beta_2,
            epsilon: self.epsilon,
            weight_decay: self.weight_decay,
            time: i32::try_from(self.time + 1).unwrap_or(i32::MAX),
            ema_weight,
        }
    }

    /// Counts an update made by [`FlatAdam::apply`] (its bias correction's `t`).
    pub fn advance(&mut self) {
        self.time += 1;
    }

    /// [`FlatAdam::step`] with its numbers given, `step` (from [`FlatAdam::next_step`]), and
    /// without counting it ([`FlatAdam::advance`]): what a step captured as a CUDA graph runs,
    /// twice as it is captured and counted once. With `scalars`, the cubecl backends' update
    /// reads `step`'s scalars from that `[8]` buffer ([`kernels::FlatBuffers::scalars`]), which
    /// the caller wrote, rather than uploading them.
    #[expect(clippy::too_many_arguments, reason = "FlatAdam::step's arguments, with the step's numbers given")]
    pub fn apply<AB: AutodiffBackend<InnerBackend = B>, M: Module<AB>>(
        &mut self,
        model: M,
        grads: Tensor<B, 1>,
        clipping: Clipping<B>,
        step: &AdamStep,
        scalars: Option<Tensor<B, 1>>,
        mut average: Option<&mut Tensor<B, 1>>,
        copy: Option<FloatDType>,
    ) -> (M, WeightCopies<B>, ClipFactors<B>) {
        // The buffers move into the kernels' hands (so that the CPU's can write them in place)
        // and come back afterwards.
        let device = self.moment_1.device();
        let take = |tensor: &mut Tensor<B, 1>| {
            std::mem::replace(tensor, Tensor::empty([0], &device)).into_primitive().tensor()
        };
        let mut flat = FlatBuffers::<B> {
            grads: grads.into_primitive().tensor(),
            moment_1: take(&mut self.moment_1),
            moment_2: take(&mut self.moment_2),
            average: average.as_mut().map(|slot| take(slot)),
            scalars: scalars.map(|scalars| scalars.into_primitive().tensor()),
        };
        let (model, copies, factors) = match self.view_alignment {
            Some(alignment) if !self.layout.is_empty() => {
                self.update_views(model, alignment, &mut flat, clipping, step, copy)
            }
            _ => {
                let factors = clipping.factors();
                let scale = factors.scale.clone().into_primitive().tensor();
                let (model, copies) = self.update_each(model, &mut flat, &scale, step, copy);
                (model, copies, factors)
            }
        };
        let FlatBuffers { grads, moment_1, moment_2, average: updated_average, .. } = flat;
        self.moment_1 = float(moment_1);
        self.moment_2 = float(moment_2);
        self.spare = Some(float(grads));
        if let (Some(slot), Some(updated)) = (average, updated_average) {
            *slot = float(updated);
        }
        (model, copies, factors)
    }

    /// The update of weights kept as views of one buffer ([`FlatAdam::bind`], here if not yet),
    /// written in one pass, as their half-precision copies are; the clipping's factors computed
    /// in that pass too when they were left as squares.
    fn update_views<AB: AutodiffBackend<InnerBackend = B>, M: Module<AB>>(
        &mut self,
        model: M,
        alignment: usize,
        flat: &mut FlatBuffers<B>,
        clipping: Clipping<B>,
        step: &AdamStep,
        copy: Option<FloatDType>,
    ) -> (M, WeightCopies<B>, ClipFactors<B>) {
        let (model, mut views) = match self.views.take() {
            Some(views) => (model, views),
            None => WeightViews::bind(model, &self.layout, alignment, self.channels_last_weights),
        };
        views.keep_copies(copy);
        let copies = views.copies.as_mut().map(|copies| copies.buffer.clone());
        let weights = views.weights.clone();
        let (weights, copies, factors) = match clipping {
            Clipping::Factors(factors) => {
                let scale = factors.scale.clone().into_primitive().tensor();
                let (weights, copies) = B::adam_update_views(weights, copies, &views.table, flat, &scale, step);
                (weights, copies, factors)
            }
            Clipping::Squares(squares) => {
                let ViewsUpdate { weights, copies, norm, scale } =
                    B::adam_update_views_clipping(weights, copies, &views.table, flat, &squares, step);
                (weights, copies, ClipFactors { norm: float(norm), scale: float(scale) })
            }
        };
        views.weights = weights;
        let kept = match (views.copies.as_mut(), copies) {
            (Some(kept), Some(buffer)) => {
                kept.buffer = buffer;
                kept.views.clone()
            }
            _ => WeightCopies::<B>::new(),
        };
        self.views = Some(views);
        (model, kept, factors)
    }

    /// The update of weights held tensor by tensor: taken out of the model (so that the update,
    /// on the CPU or in the cubecl kernel, holds their only handles and writes in place),
    /// updated all at once, and put back.
    fn update_each<AB: AutodiffBackend<InnerBackend = B>, M: Module<AB>>(
        &mut self,
        model: M,
        flat: &mut FlatBuffers<B>,
        scale: &FloatTensor<B>,
        step: &AdamStep,
        copy: Option<FloatDType>,
    ) -> (M, WeightCopies<B>) {
        let (model, taken) = map_trainable(model, TakeWeights::<B>::new(&self.layout));
        let UpdatedWeights { weights: updated, copies } =
            kernels::adam_update_all_copying(taken.weights, &taken.offsets, flat, scale, step, copy);
        let copies = taken.ids.into_iter().zip(copies).collect();
        let (model, _) = map_trainable(model, PutWeights::<B> { weights: taken.places.into_iter().zip(updated) });
        (model, copies)
    }

    /// Takes `model`'s weights as they are now: where the backend keeps weights as views of one
    /// buffer ([`OptimiserKernels::weight_view_alignment`](kernels::OptimiserKernels::weight_view_alignment)), moves them into a buffer of this
    /// optimiser's and gives the model back with its parameters views of it, which every
    /// update then writes in place (elsewhere the model comes back as it was). An update binds
    /// a model not yet bound; bind again after replacing the model's weights (a broadcast, a
    /// loaded record), or the update keeps writing the old buffer. A model bound from a clone
    /// of another bound model gets a buffer of its own.
    pub fn bind<AB: AutodiffBackend<InnerBackend = B>, M: Module<AB>>(&mut self, model: M) -> M {
        match self.view_alignment {
            Some(alignment) if !self.layout.is_empty() => {
                let (model, views) = WeightViews::bind(model, &self.layout, alignment, self.channels_last_weights);
                self.views = Some(views);
                model
            }
            _ => model,
        }
    }

    /// The last update's gradient buffer, for the next gather to write over.
    pub fn take_spare(&mut self) -> Option<Tensor<B, 1>> {
        self.spare.take()
    }

    /// The state a checkpoint keeps.
    pub fn to_record(&self) -> FlatAdamRecord<B> {
        FlatAdamRecord { moment_1: self.moment_1.clone(), moment_2: self.moment_2.clone(), time: self.time }
    }

    /// Continues from a checkpoint's state; an error when it was written for another layout.
    pub fn load_record(mut self, record: FlatAdamRecord<B>) -> Result<Self> {
        for (name, moment) in [("moment_1", &record.moment_1), ("moment_2", &record.moment_2)] {
            if moment.dims() != [self.layout.len()] {
                return Err(Error::Config(format!(
                    "the optimiser state's {name} has {} values, the model has {} trainable weights",
                    moment.dims()[0],
                    self.layout.len()
                )));
            }
        }
        self.moment_1 = record.moment_1;
        self.moment_2 = record.moment_2;
        self.time = record.time;
        Ok(self)
    }
}
