//! The trainable parameters laid end to end: each one's range in the optimiser's flat buffers,
//! the gradients gathered into one buffer, weights read out of and written back into the model.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use kernels::Kernels;

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
        struct Collect {
            path: Vec<String>,
            layout: FlatLayout,
        }
        impl<B: Backend> ModuleVisitor<B> for Collect {
            fn enter_module(&mut self, name: &str, _container_type: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _name: &str, _container_type: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                if !is_running_statistic(&self.path) {
                    self.layout.params.push((param.id, self.layout.len));
                    self.layout.len += param.shape().num_elements();
                }
            }
        }
        let mut collect = Collect { path: Vec::new(), layout: Self { params: Vec::new(), len: 0 } };
        model.visit(&mut collect);
        collect.layout
    }

    /// Elements in a flat buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the model has no trainable parameter.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The offset of the next trainable parameter met in visiting order, checked against `id`.
    pub(super) fn offset(&self, index: usize, id: ParamId) -> usize {
        let (expected, offset) = self.params[index];
        assert_eq!(expected, id, "the model's parameters changed since its flat layout was taken");
        offset
    }

    /// `model`'s gradients, removed from `grads` and gathered into one flat f32 buffer (zeros
    /// for a parameter the loss did not reach; written over `reuse` where the backend can), in
    /// one pass ([`Kernels::concat_flat`]: burn
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
        let flat = B::InnerBackend::concat_flat(parts, reuse, device);
        Tensor::from_primitive(TensorPrimitive::Float(flat))
    }

    /// [`FlatLayout::gather_grads`], with the gathered gradients' `Σ g²` (`[1]`, the input of
    /// [`super::clip_from_squares`]) read as they are gathered
    /// ([`Kernels::concat_flat_with_squares`]).
    pub fn gather_grads_with_squares<B: AutodiffBackend<InnerBackend: Kernels>, M: Module<B>>(
        &self,
        model: &M,
        grads: &mut GradientsParams,
        reuse: Option<Tensor<B::InnerBackend, 1>>,
        device: &B::Device,
    ) -> [Tensor<B::InnerBackend, 1>; 2] {
        let parts = self.grad_parts(model, grads, device);
        let reuse = reuse.map(|t| t.into_primitive().tensor());
        B::InnerBackend::concat_flat_with_squares(parts, reuse, device)
            .map(|t| Tensor::from_primitive(TensorPrimitive::Float(t)))
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
            path: Vec<String>,
            parts: Vec<FloatTensor<B::InnerBackend>>,
            device: B::Device,
        }
        impl<B: AutodiffBackend> ModuleVisitor<B> for Gather<'_, B> {
            fn enter_module(&mut self, name: &str, _container_type: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _name: &str, _container_type: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                if is_running_statistic(&self.path) {
                    return;
                }
                self.layout.offset(self.parts.len(), param.id);
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
        let mut gather =
            Gather::<B> { layout: self, grads, path: Vec::new(), parts: Vec::new(), device: device.clone() };
        model.visit(&mut gather);
        gather.parts
    }

    /// `model`'s trainable weights laid end to end (f32).
    pub fn gather_weights<B: Backend, M: Module<B>>(&self, model: &M) -> Tensor<B, 1> {
        struct Gather<'a, B: Backend> {
            layout: &'a FlatLayout,
            path: Vec<String>,
            parts: Vec<Tensor<B, 1>>,
        }
        impl<B: Backend> ModuleVisitor<B> for Gather<'_, B> {
            fn enter_module(&mut self, name: &str, _container_type: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _name: &str, _container_type: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                if !is_running_statistic(&self.path) {
                    self.layout.offset(self.parts.len(), param.id);
                    let value = param.val();
                    let n = value.shape().num_elements();
                    self.parts.push(value.cast(burn::tensor::FloatDType::F32).reshape([n]));
                }
            }
        }
        let mut gather = Gather { layout: self, path: Vec::new(), parts: Vec::new() };
        model.visit(&mut gather);
        Tensor::cat(gather.parts, 0)
    }

    /// `model` with its trainable weights read from `flat` (its running statistics unchanged).
    pub fn scatter_weights<B: Backend, M: Module<B>>(&self, model: M, flat: &Tensor<B, 1>) -> M {
        struct Scatter<'a, B: Backend> {
            layout: &'a FlatLayout,
            flat: &'a Tensor<B, 1>,
            path: Vec<String>,
            index: usize,
        }
        impl<B: Backend> ModuleMapper<B> for Scatter<'_, B> {
            fn enter_module(&mut self, name: &str, _container_type: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _name: &str, _container_type: &str) {
                self.path.pop();
            }
            fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
                if is_running_statistic(&self.path) {
                    return param;
                }
                let (id, value, mapper) = param.consume();
                let offset = self.layout.offset(self.index, id);
                self.index += 1;
                let shape = value.shape();
                let n = shape.num_elements();
                let weights = self.flat.clone().slice(offset..offset + n).reshape(shape).cast(value.dtype());
                Param::from_mapped_value(id, weights.set_require_grad(value.is_require_grad()), mapper)
            }
        }
        model.map(&mut Scatter { layout: self, flat, path: Vec::new(), index: 0 })
    }
}

/// Whether the parameter at `path` is one of BatchNorm's running statistics (copied, never
/// trained).
pub(crate) fn is_running_statistic(path: &[String]) -> bool {
    matches!(path.last().map(String::as_str), Some("running_mean" | "running_var"))
}
