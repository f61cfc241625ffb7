//! Data-parallel training: one replica of the model per device, each on a thread of its own,
//! fed by its own shard of the loader, its flat gradient buffer summed with the others' once
//! per optimiser step before the identical clip, Adam and EMA pass of every replica (which
//! divides by the number of replicas in its clipping factor, as it undoes an f16 loss scale:
//! one pass over the buffer fewer than a mean).
//!
//! With one process per GPU (as PyTorch's DDP runs them: `mpirun`, `srun` or torchrun), the sum
//! is NCCL's, between the GPUs, in place on burn's stream (a `DeviceGroup`, module
//! `device_group`). Otherwise it has two levels. Between the devices of one process,
//! burn-collective's all-reduce (module `collective`); between processes (one per machine,
//! started by `mpirun` or `srun`), MPI's, made by each process's first replica on the host copy
//! of its devices' sum, which that replica then hands to its process's others (module
//! `processes`). The processes of a torchrun-style launch agree on what they train at a meeting
//! (module `rendezvous`), and have no path through host memory.
//!
//! burn-collective keeps one session per process and backend, whose calls block until every
//! device has made them. So that a failing replica cannot leave the others waiting forever, a
//! [`Replica`] checks a shared abort flag before every collective call, and the thread that
//! supervises the replicas (in `train_on`) resets the session until every replica has
//! returned once one has failed: a call waiting in the session then returns an error. Between
//! processes, a process whose run failed ends them all (`MPI_Abort`), as MPI programs do.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::backend::{DeviceId, DeviceOps};
use kernels::{Collective, DeviceGroup, Kernels};

use crate::error::{Error, Result};

mod collective;
mod device_group;
mod disagreement;
mod processes;
mod rendezvous;

pub(crate) use device_group::join_group;
pub use processes::{Channel, Launch, Processes, launch};

/// `count` devices of `first`'s kind, numbered from `first`'s on (on the CPU, `count` times
/// the one CPU: replicas there share its cores).
pub fn devices_from<D: DeviceOps>(first: &D, count: usize) -> Vec<D> {
    let id = first.to_id();
    (0..count).map(|i| D::from_id(DeviceId { type_id: id.type_id, index_id: id.index_id + i as u16 })).collect()
}

/// One replica of a data-parallel run: its rank among all the run's replicas and among its
/// process's, the processes, its process's abort flag, and the device group its sums go
/// through, where it has one.
#[derive(Debug, Clone)]
pub struct Replica {
    rank: usize,
    world_size: usize,
    local_rank: usize,
    local_size: usize,
    processes: Processes,
    aborted: Arc<AtomicBool>,
    group: Option<Arc<DeviceGroup>>,
}

impl Replica {
    /// The replica of a one-device run (no collective calls are made).
    pub fn single() -> Self {
        Self::new(0, 1, Processes::single(), Arc::new(AtomicBool::new(false)), None)
    }

    /// Replica `local_rank` of the `local_size` of `processes`'s this process.
    fn new(
        local_rank: usize,
        local_size: usize,
        processes: Processes,
        aborted: Arc<AtomicBool>,
        group: Option<Arc<DeviceGroup>>,
    ) -> Self {
        Self {
            rank: processes.rank() * local_size + local_rank,
            world_size: processes.count() * local_size,
            local_rank,
            local_size,
            processes,
            aborted,
            group,
        }
    }

    /// This replica's rank among all the run's replicas, from 0 (those of process `p` are
    /// `p·L .. (p+1)·L`, for `L` devices per process).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// This replica's rank among its process's.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// The number of replicas of the run, over all its processes.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The processes of the run.
    pub fn processes(&self) -> Processes {
        self.processes
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
        if let Some(failure) = self.group.as_ref().and_then(|g| g.failure()) {
            return Err(Error::Replicas(failure));
        }
        Ok(())
    }

    /// `collective` of `tensor` made on `group`.
    fn through_group<B: Kernels>(
        &self,
        tensor: Tensor<B, 1>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Result<Tensor<B, 1>> {
        let done = B::group_collective(tensor.into_primitive().tensor(), group, collective)
            .unwrap_or_else(|| Err("this backend has no device group (NCCL needs burn's cuda backend)".into()));
        match done {
            Ok(tensor) => Ok(Tensor::from_primitive(TensorPrimitive::Float(tensor))),
            Err(e) => Err(self.collective_error(collective.name(), e)),
        }
    }

    fn collective_error(&self, what: &str, error: String) -> Error {
        if self.aborted.load(Ordering::SeqCst) {
            Error::StoppedByAnotherReplica { rank: self.rank }
        } else {
            Error::Replicas(format!("rank {}: {what} failed: {error}", self.rank))
        }
    }

    /// Joins the session of this process's replicas on `device` (waits for all of them).
    pub(crate) fn register<B: Backend>(&self, device: &B::Device) -> Result<()> {
        if self.local_size == 1 {
            return Ok(());
        }
        self.check()?;
        collective::register::<B>(self.local_rank, self.local_size, device)
            .map_err(|e| self.collective_error("joining the collective session", e))
    }

    /// The sum of `tensor` over the replicas (the same bits on every replica).
    pub fn all_reduce_sum<B: Kernels>(&self, tensor: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        if self.world_size == 1 {
            return Ok(tensor);
        }
        self.check()?;
        if let Some(group) = &self.group {
            return self.through_group(tensor, group, Collective::AllReduceSum);
        }
        let mut tensor = tensor;
        if self.local_size > 1 {
            let reduced = collective::all_reduce_sum::<B>(self.local_rank, tensor.into_primitive().tensor())
                .map_err(|e| self.collective_error("the all-reduce", e))?;
            tensor = Tensor::from_primitive(TensorPrimitive::Float(reduced));
        }
        if self.processes.count() == 1 {
            return Ok(tensor);
        }
        // The sum of the processes' sums, made by the first replica of each process and handed
        // to the others.
        let sum = match self.local_rank {
            0 => Some(on_host(tensor, |values| self.processes.all_reduce_sum(values))?),
            _ => None,
        };
        self.local_broadcast(sum)
    }

    /// The mean of `tensor` over the replicas (the same bits on every replica).
    pub fn all_reduce_mean<B: Kernels>(&self, tensor: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        if self.world_size == 1 {
            return Ok(tensor);
        }
        Ok(self.all_reduce_sum(tensor)?.div_scalar(self.world_size as f64))
    }

    /// Rank 0's `tensor`, on every replica.
    pub fn broadcast<B: Kernels>(&self, tensor: Tensor<B, 1>) -> Result<Tensor<B, 1>> {
        if self.world_size == 1 {
            return Ok(tensor);
        }
        self.check()?;
        if let Some(group) = &self.group {
            return self.through_group(tensor, group, Collective::Broadcast);
        }
        let sent = match (self.local_rank, self.processes.count()) {
            (0, 1) => Some(tensor),
            (0, _) => Some(on_host(tensor, |values| self.processes.broadcast(values))?),
            _ => None,
        };
        self.local_broadcast(sent)
    }

    /// The first replica of this process's `tensor` (which it passes; the others pass `None`),
    /// on every replica of the process.
    fn local_broadcast<B: Backend>(&self, tensor: Option<Tensor<B, 1>>) -> Result<Tensor<B, 1>> {
        if self.local_size == 1 {
            return tensor.ok_or_else(|| Error::Replicas("a broadcast from no replica".into()));
        }
        let sent = tensor.map(|t| t.into_primitive().tensor());
        let received =
            collective::broadcast::<B>(self.local_rank, sent).map_err(|e| self.collective_error("the broadcast", e))?;
        Ok(Tensor::from_primitive(TensorPrimitive::Float(received)))
    }

    /// Leaves the session (after the last collective call).
    pub(crate) fn finish<B: Backend>(&self) -> Result<()> {
        if self.local_size == 1 {
            return Ok(());
        }
        collective::finish::<B>(self.local_rank).map_err(|e| self.collective_error("leaving the session", e))
    }
}

/// `tensor` after `call` changed its values in host memory (as f32), back on its device in its
/// dtype: what MPI, which knows nothing of devices, is given.
fn on_host<B: Backend>(tensor: Tensor<B, 1>, call: impl FnOnce(&mut [f32]) -> Result<()>) -> Result<Tensor<B, 1>> {
    let (device, dtype, len) = (tensor.device(), tensor.dtype(), tensor.dims()[0]);
    let mut values = tensor
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .map_err(|e| Error::Replicas(format!("reading a tensor to the host: {e:?}")))?;
    call(&mut values)?;
    Ok(Tensor::from_data(TensorData::new(values, [len]).convert_dtype(dtype), &device))
}

/// This process's replicas of one data-parallel run, and the process-wide lock that keeps two
/// runs from sharing burn-collective's one session.
pub(crate) struct Session {
    replicas: Vec<Replica>,
    aborted: Arc<AtomicBool>,
    _exclusive: MutexGuard<'static, ()>,
}

impl Session {
    /// This process's `local_size` replicas, among [`Processes::current`]'s, summing through
    /// `group` where there is one; waits for any other data-parallel run of this process to end.
    pub(crate) fn new(local_size: usize, group: Option<DeviceGroup>) -> Self {
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let exclusive = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let aborted = Arc::new(AtomicBool::new(false));
        let processes = Processes::current();
        let group = group.map(Arc::new);
        let replicas = (0..local_size)
            .map(|local_rank| Replica::new(local_rank, local_size, processes, Arc::clone(&aborted), group.clone()))
            .collect();
        Self { replicas, aborted, _exclusive: exclusive }
    }

    /// This process's replicas, by rank.
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
