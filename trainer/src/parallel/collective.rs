//! burn-collective's calls between the devices of this process: its one session per process
//! and backend, whose calls block until every device has made them (centralized strategies).

#[cfg(feature = "multi-device")]
pub(super) use built::*;
#[cfg(not(feature = "multi-device"))]
pub(super) use not_built::*;

/// burn-collective's calls, with the `multi-device` feature.
#[cfg(feature = "multi-device")]
mod built {
    use burn::prelude::Backend;
    use burn::tensor::ops::FloatTensor;
    use burn_collective::{AllReduceStrategy, BroadcastStrategy, CollectiveConfig, PeerId, ReduceOperation};

    fn peer(rank: usize) -> PeerId {
        PeerId(rank as u32)
    }

    pub(crate) fn register<B: Backend>(rank: usize, world_size: usize, device: &B::Device) -> Result<(), String> {
        // Centralized: the sum is made once, on one device, and copied to the others, so every
        // replica receives the same bits (and on one CPU there is nothing to pipeline).
        let config = CollectiveConfig::default()
            .with_num_devices(world_size)
            .with_local_all_reduce_strategy(AllReduceStrategy::Centralized)
            .with_local_broadcast_strategy(BroadcastStrategy::Centralized);
        burn_collective::register::<B>(peer(rank), device.clone(), config).map_err(|e| format!("{e:?}"))
    }

    pub(crate) fn all_reduce_sum<B: Backend>(rank: usize, tensor: FloatTensor<B>) -> Result<FloatTensor<B>, String> {
        burn_collective::all_reduce::<B>(peer(rank), tensor, ReduceOperation::Sum).map_err(|e| format!("{e:?}"))
    }

    pub(crate) fn broadcast<B: Backend>(rank: usize, tensor: Option<FloatTensor<B>>) -> Result<FloatTensor<B>, String> {
        burn_collective::broadcast::<B>(peer(rank), tensor).map_err(|e| format!("{e:?}"))
    }

    pub(crate) fn finish<B: Backend>(rank: usize) -> Result<(), String> {
        burn_collective::finish_collective::<B>(peer(rank)).map_err(|e| format!("{e:?}"))
    }

    pub(crate) fn reset<B: Backend>() {
        burn_collective::reset_collective::<B>();
    }
}

/// Without the `multi-device` feature: every collective call says how to get one.
#[cfg(not(feature = "multi-device"))]
#[allow(clippy::extra_unused_type_parameters, reason = "the signatures of the feature's calls")]
mod not_built {
    use burn::prelude::Backend;
    use burn::tensor::ops::FloatTensor;

    const NOT_BUILT: &str =
        "this build has no multi-device training: rebuild the trainer with `--features multi-device`";

    pub(crate) fn register<B: Backend>(_: usize, _: usize, _: &B::Device) -> Result<(), String> {
        Err(NOT_BUILT.into())
    }

    pub(crate) fn all_reduce_sum<B: Backend>(_: usize, _: FloatTensor<B>) -> Result<FloatTensor<B>, String> {
        Err(NOT_BUILT.into())
    }

    pub(crate) fn broadcast<B: Backend>(_: usize, _: Option<FloatTensor<B>>) -> Result<FloatTensor<B>, String> {
        Err(NOT_BUILT.into())
    }

    pub(crate) fn finish<B: Backend>(_: usize) -> Result<(), String> {
        Err(NOT_BUILT.into())
    }

    pub(crate) fn reset<B: Backend>() {}
}
