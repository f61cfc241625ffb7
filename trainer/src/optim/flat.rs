//! The trainable parameters laid end to end: each one's range in the optimiser's flat buffers,
//! the gradients gathered into one buffer, weights read out of and written back into the model.

use burn::module::{Module, Param, ParamId};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use kernels::{Kernels, OptimiserKernels, PartialSquares};

use super::float;
use super::trainable::{MapTrainable, VisitTrainable, map_trainable, visit_trainable};

/// Where each trainable parameter of a model lives in a flat buffer, in the model's visiting
/// order. BatchNorm's running statistics are not trainable and have no range.
#[derive(Debug, Clone, PartialEq)]
pub struct FlatLayout {
    params: Vec<(ParamId, usize)>,
    len: usize,
}

impl FlatLayout {
    /// The layout of `model`'s trainable parameters.
    pub fn of<B: Backend, M: Module<B>>(model: &M) -> Self {
        struct Collect(FlatLayout);
        impl<B: Backend> VisitTrainable<B> for Collect {
            fn visit<const D: usize>(&mut self, _index: usize, param: &Param<Tensor<B, D>>) {
                self.0.params.push((param.id, self.0.len));
                self.0.len += param.shape().num_elements();
            }
        }
        visit_trainable(model, Collect(Self { params: Vec::new(), len: 0 })).0
    }

    /// Elements in a flat buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the model has no trainable parameter.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The offset of the `index`-th trainable parameter in visiting order, checked against `id`.
    pub(super) fn offset(&self, index: usize, id: ParamId) -> usize {
        let (expected, offset) = self.params[index];
        assert_eq!(expected, id, "the model's parameters changed since its flat layout was taken");
        offset
    }

    /// `model`'s gradients, removed from `grads` and gathered into one flat f32 buffer (zeros
    /// for a parameter the loss did not reach; written over `reuse` where the backend can), in
    /// one pass ([`OptimiserKernels::concat_flat`](kernels::OptimiserKernels::concat_flat): burn
    /// hands convolution weight gradients back as permuted views, which it would otherwise copy
    /// element by element).
    pub fn gather_grads<B: AutodiffBackend<InnerBackend: Kernels>, M: Module<B>>(
        &self,
        model: &M,
        grads: &mut GradientsParams,
        reuse: Option<Tensor<B::InnerBackend, 1>>,
        device: &B::Device,
    ) -> Tensor<B::InnerBackend, 1> {
        let parts = self.grad_parts(model, grads, device);
        let reuse = reuse.map(|t| t.into_primitive().tensor());
        let flat = <B::InnerBackend as OptimiserKernels>::concat_flat(parts, reuse, device);
        float(flat)
    }

    /// [`FlatLayout::gather_grads`] for a step whose gathered gradients are its whole gradient:
    /// with their squares' partial sums, read as they are gathered
    /// ([`OptimiserKernels::concat_flat_with_partial_squares`](kernels::OptimiserKernels::concat_flat_with_partial_squares)), for the clipping
    /// ([`super::clip_grad_norm`]'s, to `max_norm`, of gradients that carry `grad_scale`).
    pub fn gather_grads_with_squares<B: AutodiffBackend<InnerBackend: Kernels>, M: Module<B>>(
        &self,
        model: &M,
        grads: &mut GradientsParams,
        reuse: Option<Tensor<B::InnerBackend, 1>>,
        device: &B::Device,
        max_norm: f64,
        grad_scale: f64,
    ) -> (Tensor<B::InnerBackend, 1>, PartialSquares<B::InnerBackend>) {
        let parts = self.grad_parts(model, grads, device);
        let reuse = reuse.map(|t| t.into_primitive().tensor());
        let [flat, partials] =
            <B::InnerBackend as OptimiserKernels>::concat_flat_with_partial_squares(parts, reuse, device);
        (float(flat), PartialSquares { partials, max_norm, grad_scale })
    }

    /// `model`'s gradients in visiting order, removed from `grads`.
    fn grad_parts<B: AutodiffBackend<InnerBackend: Kernels>, M: Module<B>>(
        &self,
        model: &M,
        grads: &mut GradientsParams,
        device: &B::Device,
    ) -> Vec<FloatTensor<B::InnerBackend>> {
        struct Gather<'a, B: AutodiffBackend> {
            layout: &'a FlatLayout,
            grads: &'a mut GradientsParams,
            parts: Vec<FloatTensor<B::InnerBackend>>,
            device: B::Device,
        }
        impl<B: AutodiffBackend> VisitTrainable<B> for Gather<'_, B> {
            fn visit<const D: usize>(&mut self, index: usize, param: &Param<Tensor<B, D>>) {
                self.layout.offset(index, param.id);
                let part = match self.grads.remove::<B::InnerBackend, D>(param.id) {
                    Some(g) => g,
                    None => {
                        // torch would leave such a weight alone; here it gets a zero gradient
                        // (decay and momentum still move it). No model of ours has one.
                        tracing::warn!("a trainable parameter got no gradient: it is updated with zeros");
                        Tensor::zeros(param.shape(), &self.device)
                    }
                };
                self.parts.push(part.into_primitive().tensor());
            }
        }
        visit_trainable(model, Gather::<B> { layout: self, grads, parts: Vec::new(), device: device.clone() }).parts
    }

    /// `model`'s trainable weights laid end to end (f32).
    pub fn gather_weights<B: Backend, M: Module<B>>(&self, model: &M) -> Tensor<B, 1> {
        struct Gather<'a, B: Backend> {
            layout: &'a FlatLayout,
            parts: Vec<Tensor<B, 1>>,
        }
        impl<B: Backend> VisitTrainable<B> for Gather<'_, B> {
            fn visit<const D: usize>(&mut self, index: usize, param: &Param<Tensor<B, D>>) {
                self.layout.offset(index, param.id);
                let value = param.val();
                let n = value.shape().num_elements();
                self.parts.push(value.cast(burn::tensor::FloatDType::F32).reshape([n]));
            }
        }
        Tensor::cat(visit_trainable(model, Gather { layout: self, parts: Vec::new() }).parts, 0)
    }

    /// `model` with its trainable weights read from `flat` (its running statistics unchanged).
    pub fn scatter_weights<B: Backend, M: Module<B>>(&self, model: M, flat: &Tensor<B, 1>) -> M {
        struct Scatter<'a, B: Backend> {
            layout: &'a FlatLayout,
            flat: &'a Tensor<B, 1>,
        }
        impl<B: Backend> MapTrainable<B> for Scatter<'_, B> {
            fn map<const D: usize>(&mut self, index: usize, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
                let (id, value, mapper) = param.consume();
                let offset = self.layout.offset(index, id);
                let shape = value.shape();
                let n = shape.num_elements();
                let weights = self.flat.clone().slice(offset..offset + n).reshape(shape).cast(value.dtype());
                Param::from_mapped_value(id, weights.set_require_grad(value.is_require_grad()), mapper)
            }
        }
        map_trainable(model, Scatter { layout: self, flat }).0
    }
}
