//! The half-precision copies of the weights an update writes, by parameter.

use std::collections::HashMap;

use burn::module::ParamId;
use burn::tensor::ops::FloatTensor;

/// The half-precision copies of the new weights an update wrote ([`FlatAdam::step`](super::FlatAdam::step)),
/// by parameter; empty when none was asked for. Updated tensor by tensor, each is 1-D; where the
/// weights are views of one buffer ([`FlatAdam::bind`](super::FlatAdam::bind)), so are the copies, in their
/// parameters' shapes and lying as the weights do, and the next update writes them in place.
pub type WeightCopies<B> = HashMap<ParamId, FloatTensor<B>>;
