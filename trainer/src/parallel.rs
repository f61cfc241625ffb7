//! Data-parallel training on the devices of one machine: one replica of the model per device,
//! each on a thread of its own, fed by its own shard of the loader, its flat gradient buffer
//! averaged with the others' by burn-collective's all-reduce (one call per optimiser step) before
//! the identical clip, Adam and EMA pass of every replica.
//!
//! burn-collective keeps one session per process and backend, whose calls block until every
//! device has made them. So that a failing replica cannot leave the others waiting forever, a
//! [`Replica`] checks a shared abort flag before every collective call, and the thread that
//! supervises the replicas (in `train_on`) resets the session until every replica has
//! returned once one has failed: a call waiting in the session then returns an error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::backend::{DeviceId, DeviceOps};

use crate::error::{Error, Result};

/// `count` devices of `first`'s kind, numbered from `first`'s on (on the CPU, `count` times
/// the one CPU: replicas there share its cores).
pub fn devices_from<D: DeviceOps>(first: &D, count: usize) -> Vec<D> {
    let id = first.to_id();
    (0..count).map(|i| D::from_id(DeviceId { type_id: id.type_id, index_id: id.index_id + i as u16 })).collect()
}

/// One replica of a data-parallel run: its rank among `world_size`, and the run's abort flag.
#[derive(Debug, Clone)]
pub struct Replica {
    rank: usize,
    world_size: usize,
    aborted: Arc<AtomicBool>,
}

impl Replica {
    /// The replica of a one-device run (no collective calls are made).
    pub fn single() -> Self {
        Self { rank: 0, world_size: 1, aborted: Arc::new(AtomicBool::new(false)) }
    }

    /// This replica's rank, from 0.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of replicas.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Whether this is rank 0, the one that logs and writes checkpoints.
    pub fn is_main(&self) -> bool {
        self.rank == 0
    }

    /// Fails when another replica has failed, before a collective call that would wait for it.
    fn check(&self) -> Result<()> {
        if self.aborted.load(Ordering::SeqCst) {
            return Err(Error::StoppedByAnotherReplica { rank: self.rank });
        }
        Ok(())
    }

    fn collective_error(&self, what: &str, error: String) -> Error {
        if self.aborted.load(Ordering::SeqCst) {
            Error::StoppedByAnotherReplica { rank: self.rank }
        } else {
            Error::Replicas(format!("rank {}: {what} failed: {error}", self.rank))
        }
    }

    /// Joins the session on `device` (waits for every replica).
    pub(crate) fn register<B: Backend>(&self, device: &B::Device) -> Result<()> {
        if self.world_size == 1 {
            return Ok(());
        }
        self.check()?;
        collective::register::<B>(self.rank, self.world_size, device)
            .map_err(|e| self.collective_error("joining the collective session", e))
    }

    /// The mean of `tensor` over the replicas (the same bits on every replica).
    pub fn all_reduce_mean<B: Backend>(&self, tensor: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        if self.world_size == 1 {
            return Ok(tensor);
        }
        self.check()?;
        let reduced = collective::all_reduce_mean::<B>(self.rank, tensor.into_primitive().tensor())
            .map_err(|e| self.collective_error("the all-reduce", e))?;
        Ok(Tensor::from_primitive(TensorPrimitive::Float(reduced)))
    }

    /// Rank 0's `tensor`, on every replica.
    pub fn broadcast<B: Backend>(&self, tensor: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        if self.world_size == 1 {
            return Ok(tensor);
        }
        self.check()?;
        let sent = self.is_main().then(|| tensor.into_primitive().tensor());
        let received =
            collective::broadcast::<B>(self.rank, sent).map_err(|e| self.collective_error("the broadcast", e))?;
        Ok(Tensor::from_primitive(TensorPrimitive::Float(received)))
    }

    /// Leaves the session (after the last collective call).
    pub(crate) fn finish<B: Backend>(&self) -> Result<()> {
        if self.world_size == 1 {
            return Ok(());
        }
        collective::finish::<B>(self.rank).map_err(|e| self.collective_error("leaving the session", e))
    }
}

/// The replicas of one data-parallel run, and the process-wide lock that keeps two runs from
/// sharing burn-collective's one session.
pub(crate) struct Session {
    replicas: Vec<Replica>,
    aborted: Arc<AtomicBool>,
    _exclusive: MutexGuard<'static, ()>,
}

impl Session {
    /// `world_size` replicas; waits for any other data-parallel run of this process to end.
    pub(crate) fn new(world_size: usize) -> Self {
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let exclusive = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let aborted = Arc::new(AtomicBool::new(false));
        let replicas =
            (0..world_size).map(|rank| Replica { rank, world_size, aborted: Arc::clone(&aborted) }).collect();
        Self { replicas, aborted, _exclusive: exclusive }
    }

    /// The replicas, by rank.
    pub(crate) fn replicas(&self) -> &[Replica] {
        &self.replicas
    }

    /// Stops every replica after one has failed: sets the abort flag, then resets
    /// burn-collective's session (which fails the calls waiting in it) until `all_returned`.
    pub(crate) fn abort<B: Backend>(&self, all_returned: impl Fn() -> bool) {
        self.aborted.store(true, Ordering::SeqCst);
        while !all_returned() {
            collective::reset::<B>();
            std::thread::sleep(Duration::from_millis(20));
        }
        collective::reset::<B>();
    }
}

/// burn-collective's calls, with the `multi-device` feature.
#[cfg(feature = "multi-device")]
mod collective {
    use burn::prelude::Backend;
    use burn::tensor::ops::FloatTensor;
    use burn_collective::{AllReduceStrategy, BroadcastStrategy, CollectiveConfig, PeerId, ReduceOperation};

    fn peer(rank: usize) -> PeerId {
        PeerId(rank as u32)
    }

    pub(super) fn register<B: Backend>(rank: usize, world_size: usize, device: &B::Device) -> Result<(), String> {
        // Centralized: the sum is made once, on one device, and copied to the others, so every
        // replica receives the same bits (and on one CPU there is nothing to pipeline).
        let config = CollectiveConfig::default()
            .with_num_devices(world_size)
            .with_local_all_reduce_strategy(AllReduceStrategy::Centralized)
            .with_local_broadcast_strategy(BroadcastStrategy::Centralized);
        burn_collective::register::<B>(peer(rank), device.clone(), config).map_err(|e| format!("{e:?}"))
    }

    pub(super) fn all_reduce_mean<B: Backend>(rank: usize, tensor: FloatTensor<B>) -> Result<FloatTensor<B>, String> {
        burn_collective::all_reduce::<B>(peer(rank), tensor, ReduceOperation::Mean).map_err(|e| format!("{e:?}"))
    }

    pub(super) fn broadcast<B: Backend>(rank: usize, tensor: Option<FloatTensor<B>>) -> Result<FloatTensor<B>, String> {
        burn_collective::broadcast::<B>(peer(rank), tensor).map_err(|e| format!("{e:?}"))
    }

    pub(super) fn finish<B: Backend>(rank: usize) -> Result<(), String> {
        burn_collective::finish_collective::<B>(peer(rank)).map_err(|e| format!("{e:?}"))
    }

    pub(super) fn reset<B: Backend>() {
        burn_collective::reset_collective::<B>();
    }
}

/// Without the `multi-device` feature: every collective call says how to get one.
#[cfg(not(feature = "multi-device"))]
#[allow(clippy::extra_unused_type_parameters, reason = "the signatures of the feature's calls")]
mod collective {
    use burn::prelude::Backend;
    use burn::tensor::ops::FloatTensor;

    const NOT_BUILT: &str =
        "this build has no multi-device training: rebuild the trainer with `--features multi-device`";

    pub(super) fn register<B: Backend>(_: usize, _: usize, _: &B::Device) -> Result<(), String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn all_reduce_mean<B: Backend>(_: usize, _: FloatTensor<B>) -> Result<FloatTensor<B>, String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn broadcast<B: Backend>(_: usize, _: Option<FloatTensor<B>>) -> Result<FloatTensor<B>, String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn finish<B: Backend>(_: usize) -> Result<(), String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn reset<B: Backend>() {}
}
