//! Weights kept as views of one buffer: where each parameter sits ([`ViewPlaces`]) and the
//! tables the update reads to find it ([`ViewTable`]).

use burn::prelude::*;
use burn::tensor::DType;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
use burn::tensor::TensorMetadata;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
use burn::tensor::ops::FloatTensor;
use burn::tensor::ops::IntTensor;

#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
use super::adam::FlatBuffers;

/// Where each parameter's weights sit in a buffer of views ([`OptimiserKernels::weight_views`](crate::OptimiserKernels::weight_views)): the
/// parameters in order, each at a place aligned for f32 weights and for half-precision copies
/// laid out alike, padding between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewPlaces {
    starts: Vec<usize>,
    lens: Vec<usize>,
    extent: usize,
}

impl ViewPlaces {
    /// The places of parameters of `lens` elements (at least one parameter) in a buffer aligned
    /// to `alignment` bytes (a power of two): each a multiple of `alignment / 2` elements (at
    /// least two) after the previous one's end, so that each view's binding can be rounded up to
    /// an even count. Panics where the buffer would hold more than the update's int32 tables can
    /// reach ([`ViewTable`]).
    pub fn new(lens: &[usize], alignment: usize) -> Self {
        assert!(!lens.is_empty(), "places for no parameters");
        assert!(alignment.is_power_of_two(), "an alignment of {alignment} bytes is not a power of two");
        let step = (alignment / 2).max(2);
        let too_many = || panic!("weights of {} parameters are more than int32 tables reach", lens.len());
        let mut starts = Vec::with_capacity(lens.len());
        let mut place: usize = 0;
        for &len in lens {
            starts.push(place);
            let end = place.checked_add(len).unwrap_or_else(too_many);
            place = end.checked_next_multiple_of(step).unwrap_or_else(too_many);
        }
        if place >= i32::MAX as usize {
            too_many();
        }
        Self { starts, lens: lens.to_vec(), extent: place }
    }

    /// Where each parameter's weights start in the views' buffer.
    pub fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// Each parameter's element count.
    pub fn lens(&self) -> &[usize] {
        &self.lens
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

/// What [`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views) reads to find each weight of [`ViewPlaces`]: parameter
/// `k`'s range of the optimiser's flat buffers (laid end to end, in order) ends before `ends[k]`,
/// and its weights start `shifts[k]` elements further into the views' buffer than that range
/// starts in the flat buffers. Both 1-D int tensors on the weights' device.
#[derive(Debug, Clone)]
pub struct ViewTable<B: Backend> {
    ends: IntTensor<B>,
    shifts: IntTensor<B>,
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
        let shifts = places.starts().iter().zip(&ends).zip(places.lens());
        let shifts = shifts.map(|((&start, &end), &len)| start as i32 - (end - len as i32)).collect();
        let int = |values: Vec<i32>| {
            let n = values.len();
            Tensor::<B, 1, Int>::from_data(TensorData::new(values, [n]), (device, DType::I32)).into_primitive()
        };
        Self { ends: int(ends), shifts: int(shifts), places: places.clone() }
    }

    /// The places it finds.
    pub fn places(&self) -> &ViewPlaces {
        &self.places
    }

    /// Where each parameter's range of the flat buffers ends.
    pub fn ends(&self) -> &IntTensor<B> {
        &self.ends
    }

    /// How much further each parameter's weights start in the views' buffer than its range.
    pub fn shifts(&self) -> &IntTensor<B> {
        &self.shifts
    }

    /// Checks the buffers an update of these places reads and writes without bounds checks
    /// ([`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views); the table's values are sound by construction:
    /// [`ViewPlaces::new`] lays the places out, [`ViewTable::new`] derives the ends and shifts
    /// from them): f32 gradients, moments (and average) of the places' length, this table's int32
    /// tensors of one value a parameter, the scale's one value (or the partial squares', one or
    /// more, [`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping)), and the views' buffer (and the
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
        assert!(
            [&self.ends, &self.shifts].iter().all(|t| t.shape().num_elements() == parts && t.dtype() == DType::I32),
            "the tables are {parts} int32 values"
        );
        assert!(f32_of(weights, places.extent()), "the views' buffer holds {} f32 weights", places.extent());
        if let Some(copies) = copies {
            assert!(matches!(copies.dtype(), DType::F16 | DType::BF16), "the copies are f16 or bf16");
            assert_eq!(elements(copies), elements(weights), "the copies' buffer is the weights' length");
        }
    }

    /// The table of `places` whose tensors are `ends` and `shifts` (made by [`ViewTable::new`] of
    /// the same places: fusion's custom operation gets them back from its handles).
    #[cfg(feature = "gpu-fusion")]
    pub(crate) fn from_parts(ends: IntTensor<B>, shifts: IntTensor<B>, places: ViewPlaces) -> Self {
        Self { ends, shifts, places }
    }
}
