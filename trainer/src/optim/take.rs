//! A model's trainable weights taken out, flattened, and put back: the update of weights held
//! tensor by tensor holds their only handles while it writes them (`adam.rs`), and the binding
//! of weights as views of one buffer puts the views in their places (`views.rs`).

use burn::module::{Param, ParamId};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;

use super::flat::FlatLayout;
use super::in_shape;
use super::trainable::MapTrainable;

/// Where a trainable parameter's weights were taken from ([`TakeWeights`]): their shape and
/// whether they were trainable.
pub(super) type Place = (Shape, bool);

/// Takes each trainable parameter's weights out of the model, flattened, with their offsets in
/// the flat buffers, in the layout's order; an empty tensor holds each one's place until
/// [`PutWeights`].
pub(super) struct TakeWeights<'a, B: Backend> {
    layout: &'a FlatLayout,
    /// The weights, 1-D.
    pub(super) weights: Vec<FloatTensor<B>>,
    /// Their parameters' ids.
    pub(super) ids: Vec<ParamId>,
    /// Where each one's range of the flat buffers starts.
    pub(super) offsets: Vec<usize>,
    /// Where each one was.
    pub(super) places: Vec<Place>,
}

impl<'a, B: Backend> TakeWeights<'a, B> {
    /// Takes the weights of a model laid out as `layout`.
    pub(super) fn new(layout: &'a FlatLayout) -> Self {
        Self { layout, weights: Vec::new(), ids: Vec::new(), offsets: Vec::new(), places: Vec::new() }
    }
}

impl<AB: AutodiffBackend<InnerBackend = B>, B: Backend> MapTrainable<AB> for TakeWeights<'_, B> {
    fn map<const D: usize>(&mut self, index: usize, param: Param<Tensor<AB, D>>) -> Param<Tensor<AB, D>> {
        let (id, tensor, mapper) = param.consume();
        self.offsets.push(self.layout.offset(index, id));
        self.ids.push(id);
        let (device, shape) = (tensor.device(), tensor.shape());
        self.places.push((shape.clone(), tensor.is_require_grad()));
        self.weights.push(tensor.inner().reshape([shape.num_elements()]).into_primitive().tensor());
        Param::from_mapped_value(id, Tensor::empty([0; D], &device), mapper)
    }
}

/// Puts weights (updated, or views) back where [`TakeWeights`] took them, in the same order, with their
/// shapes ([`in_shape`]) and as trainable as they were.
pub(super) struct PutWeights<B: Backend> {
    /// Each place with the weights to put there, 1-D or in the place's shape.
    pub(super) weights: std::iter::Zip<std::vec::IntoIter<Place>, std::vec::IntoIter<FloatTensor<B>>>,
}

impl<AB: AutodiffBackend<InnerBackend = B>, B: Backend> MapTrainable<AB> for PutWeights<B> {
    fn map<const D: usize>(&mut self, _index: usize, param: Param<Tensor<AB, D>>) -> Param<Tensor<AB, D>> {
        let (id, _placeholder, mapper) = param.consume();
        let ((shape, require_grad), weights) = self.weights.next().expect("one tensor to put back per parameter taken");
        let mut tensor = Tensor::<AB, D>::from_inner(in_shape(weights, shape));
        if require_grad {
            tensor = tensor.require_grad();
        }
        Param::from_mapped_value(id, tensor, mapper)
    }
}
