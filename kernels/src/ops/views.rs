//! Weights kept as views of one buffer: how each parameter's weights lie ([`ViewedWeight`]),
//! where each sits ([`ViewPlaces`]) and the tables the update reads to find it ([`ViewTable`]).

use burn::prelude::*;
use burn::tensor::DType;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
use burn::tensor::TensorMetadata;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
use burn::tensor::ops::FloatTensor;
use burn::tensor::ops::IntTensor;

#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
use super::adam::FlatBuffers;

/// One parameter's weights as a buffer of views holds them: its shape, and the order its
/// elements lie in. Channels-last is a convolution weight `[O, C, k…]` lying `[O, k…, C]` (KRSC
/// for a 2-D convolution's), the order channels-last convolutions read (cuDNN's tensor-core
/// kernels, `kernels::channels_last_on`): kept so, the weights reach them with no copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewedWeight {
    shape: Vec<usize>,
    channels_last: bool,
}

impl ViewedWeight {
    /// A parameter of `shape`, lying channels-last where asked and where that is another order
    /// than its own: three dimensions or more, more than one channel and more than one
    /// position (a 1×1 kernel's weights lie the same either way).
    pub fn new(shape: Vec<usize>, channels_last: bool) -> Self {
        let positions: usize = shape.iter().skip(2).product();
        let channels_last = channels_last && shape.len() >= 3 && shape[1] > 1 && positions > 1;
        Self { shape, channels_last }
    }

    /// The parameter's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Its element count.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether its elements lie channels-last (`[O, k…, C]`) rather than in its shape's order.
    pub fn is_channels_last(&self) -> bool {
        self.channels_last
    }

    /// Its channels `C` and kernel positions `k…` where it lies channels-last, else `(1, 1)`
    /// (with which the update's index map, [`ViewedWeight::lying_index`], is the identity).
    pub fn channels_and_positions(&self) -> (usize, usize) {
        if self.channels_last { (self.shape[1], self.shape.iter().skip(2).product()) } else { (1, 1) }
    }

    /// Where the element at `index` of the shape's row-major order lies in the weights' memory.
    pub fn lying_index(&self, index: usize) -> usize {
        let (channels, positions) = self.channels_and_positions();
        let (outer, within) = (index / (channels * positions), index % (channels * positions));
        let (channel, position) = (within / positions, within % positions);
        outer * channels * positions + position * channels + channel
    }

    /// Its shape in memory order: `[O, k…, C]` where it lies channels-last, else its shape.
    pub fn lying_shape(&self) -> Vec<usize> {
        let mut shape = self.shape.clone();
        if self.channels_last {
            shape[1..].rotate_left(1);
        }
        shape
    }
}

/// Where each parameter's weights sit in a buffer of views ([`OptimiserKernels::weight_views`](crate::OptimiserKernels::weight_views)): the
/// parameters in order, each at a place aligned for f32 weights and for half-precision copies
/// laid out alike, padding between, each lying as its [`ViewedWeight`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewPlaces {
    starts: Vec<usize>,
    lens: Vec<usize>,
    weights: Vec<ViewedWeight>,
    extent: usize,
}

impl ViewPlaces {
    /// The places of `weights` (at least one parameter) in a buffer aligned to `alignment` bytes
    /// (a power of two): each a multiple of `alignment / 2` elements (at least two) after the
    /// previous one's end, so that each view's binding can be rounded up to an even count.
    /// Panics where the buffer would hold more than the update's int32 tables can reach
    /// ([`ViewTable`]).
    pub fn new(weights: Vec<ViewedWeight>, alignment: usize) -> Self {
        assert!(!weights.is_empty(), "places for no parameters");
        assert!(alignment.is_power_of_two(), "an alignment of {alignment} bytes is not a power of two");
        let step = (alignment / 2).max(2);
        let too_many = || panic!("weights of {} parameters are more than int32 tables reach", weights.len());
        let lens: Vec<usize> = weights.iter().map(ViewedWeight::len).collect();
        let mut starts = Vec::with_capacity(lens.len());
        let mut place: usize = 0;
        for &len in &lens {
            starts.push(place);
            let end = place.checked_add(len).unwrap_or_else(too_many);
            place = end.checked_next_multiple_of(step).unwrap_or_else(too_many);
        }
        if place >= i32::MAX as usize {
            too_many();
        }
        Self { starts, lens, weights, extent: place }
    }

    /// Where each parameter's weights start in the views' buffer.
    pub fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// Each parameter's element count.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Each parameter's shape and order.
    pub fn weights(&self) -> &[ViewedWeight] {
        &self.weights
    }

    /// Parameters.
    pub fn parts(&self) -> usize {
        self.lens.len()
    }

    /// Elements of the optimiser's flat buffers: every parameter's, end to end.
    pub fn len(&self) -> usize {
        self.lens.iter().sum()
    }

    /// Whether no parameter has an element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements of the views' buffer.
    pub fn extent(&self) -> usize {
        self.extent
    }
}

/// Values a parameter in [`ViewTable::placement`].
pub(crate) const PLACEMENT_VALUES: usize = 3;

/// What [`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views) reads to find each weight of [`ViewPlaces`]: parameter
/// `k`'s range of the optimiser's flat buffers (laid end to end, in order, each in its shape's
/// order) ends before `ends[k]`; `placement[3k]` is how much further its weights start in the
/// views' buffer than that range starts in the flat buffers, and `placement[3k + 1]` and
/// `placement[3k + 2]` its channels and kernel positions where it lies channels-last, else 1
/// and 1 ([`ViewedWeight::channels_and_positions`]). Both 1-D int tensors on the weights' device.
#[derive(Debug, Clone)]
pub struct ViewTable<B: Backend> {
    ends: IntTensor<B>,
    placement: IntTensor<B>,
    places: ViewPlaces,
}

impl<B: Backend> ViewTable<B> {
    /// The table of `places` on `device`, in int32 whatever the backend's default int type
    /// ([`ViewPlaces::new`] keeps every value below `i32::MAX`).
    pub fn new(places: &ViewPlaces, device: &B::Device) -> Self {
        let ends = places.lens().iter().scan(0, |end, &len| {
            *end += len;
            Some(*end as i32)
        });
        let ends: Vec<i32> = ends.collect();
        let mut placement = Vec::with_capacity(PLACEMENT_VALUES * places.parts());
        for (k, weight) in places.weights().iter().enumerate() {
            let (channels, positions) = weight.channels_and_positions();
            let shift = places.starts()[k] as i32 - (ends[k] - places.lens()[k] as i32);
            placement.extend([shift, channels as i32, positions as i32]);
        }
        let int = |values: Vec<i32>| {
            let n = values.len();
            Tensor::<B, 1, Int>::from_data(TensorData::new(values, [n]), (device, DType::I32)).into_primitive()
        };
        Self { ends: int(ends), placement: int(placement), places: places.clone() }
    }

    /// The places it finds.
    pub fn places(&self) -> &ViewPlaces {
        &self.places
    }

    /// Where each parameter's range of the flat buffers ends.
    pub fn ends(&self) -> &IntTensor<B> {
        &self.ends
    }

    /// Each parameter's shift and order, three values a parameter ([`ViewTable`]).
    pub fn placement(&self) -> &IntTensor<B> {
        &self.placement
    }

    /// Checks the buffers an update of these places reads and writes without bounds checks
    /// ([`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views); the table's values are sound by construction:
    /// [`ViewPlaces::new`] lays the places out, [`ViewTable::new`] derives the ends and the placement
    /// from them): f32 gradients, moments (and average) of the places' length, this table's int32
    /// tensors of one and three values a parameter, the scale's one value (or the partial
    /// squares', one or more, [`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping)), and the views' buffer (and the
    /// copies', f16 or bf16, of its length) of the places' extent. A caller's mistake, so it
    /// panics with what does not fit.
    #[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
    pub(crate) fn check_update(
        &self,
        weights: &FloatTensor<B>,
        copies: Option<&FloatTensor<B>>,
        flat: &FlatBuffers<B>,
        scale: &FloatTensor<B>,
    ) {
        let places = &self.places;
        let elements = |t: &FloatTensor<B>| t.shape().num_elements();
        let f32_of = |t: &FloatTensor<B>, len: usize| t.dtype() == DType::F32 && elements(t) >= len;
        let buffers = [&flat.grads, &flat.moment_1, &flat.moment_2].into_iter().chain(flat.average.as_ref());
        assert!(
            buffers.into_iter().all(|t| f32_of(t, places.len())),
            "the flat buffers hold {} f32 values",
            places.len()
        );
        assert!(f32_of(scale, 1), "the scale (or the partial squares) holds f32 values");
        let parts = places.parts();
        let int32_of = |t: &IntTensor<B>, n: usize| t.shape().num_elements() == n && t.dtype() == DType::I32;
        assert!(
            int32_of(&self.ends, parts) && int32_of(&self.placement, PLACEMENT_VALUES * parts),
            "the tables are {parts} and {} int32 values",
            PLACEMENT_VALUES * parts
        );
        assert!(f32_of(weights, places.extent()), "the views' buffer holds {} f32 weights", places.extent());
        if let Some(copies) = copies {
            assert!(matches!(copies.dtype(), DType::F16 | DType::BF16), "the copies are f16 or bf16");
            assert_eq!(elements(copies), elements(weights), "the copies' buffer is the weights' length");
        }
    }

    /// The table of `places` whose tensors are `ends` and `placement` (made by
    /// [`ViewTable::new`] of the same places: fusion's custom operation gets them back from its
    /// handles).
    #[cfg(feature = "gpu-fusion")]
    pub(crate) fn from_parts(ends: IntTensor<B>, placement: IntTensor<B>, places: ViewPlaces) -> Self {
        Self { ends, placement, places }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A weight `[O, C, kh, kw]` lying channels-last: each element at `[o, i, j, c]` of the
    /// `[O, kh, kw, C]` memory, as a loop over the four indices places it.
    #[test]
    fn a_channels_last_weight_lies_krsc() {
        let (o, c, kh, kw) = (2, 3, 2, 4);
        let weight = ViewedWeight::new(vec![o, c, kh, kw], true);
        assert!(weight.is_channels_last());
        assert_eq!(weight.lying_shape(), [o, kh, kw, c]);
        assert_eq!(weight.channels_and_positions(), (c, kh * kw));
        let mut index = 0;
        for a in 0..o {
            for b in 0..c {
                for i in 0..kh {
                    for j in 0..kw {
                        let expected = ((a * kh + i) * kw + j) * c + b;
                        assert_eq!(weight.lying_index(index), expected, "[{a}, {b}, {i}, {j}]");
                        index += 1;
                    }
                }
            }
        }
    }

    /// Where channels-last would be the shape's own order (one channel, a 1×1 kernel) or has no
    /// meaning (fewer than three dimensions), or was not asked for, a weight lies as given.
    #[test]
    fn a_weight_lies_as_given_where_channels_last_is_the_same_order() {
        for (shape, asked) in
            [(vec![4, 1, 3, 3], true), (vec![4, 8, 1, 1], true), (vec![4, 8], true), (vec![4, 8, 3, 3], false)]
        {
            let weight = ViewedWeight::new(shape.clone(), asked);
            assert!(!weight.is_channels_last(), "{shape:?}");
            assert_eq!(weight.lying_shape(), shape);
            assert!((0..weight.len()).all(|i| weight.lying_index(i) == i), "{shape:?}: the identity");
        }
    }
}
