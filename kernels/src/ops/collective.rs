//! The collective family of [`Kernels`](super::Kernels): sums and broadcasts between processes,
//! one device each, made directly between the devices ([`DeviceGroup`]: NCCL under burn's cuda
//! backend, the `nccl` feature), on the device's own stream; elsewhere none, and the caller
//! takes its path through host memory.

use burn::prelude::*;
use burn::tensor::ops::FloatTensor;

pub use super::collective_call::Collective;

/// The id of a [`DeviceGroup`]: made by its rank 0 ([`DeviceGroup::new_id`]) and handed to every
/// other rank (over MPI, or a socket) before they all [`DeviceGroup::join`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GroupId(pub [u8; 128]);

impl std::fmt::Debug for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // An address to connect to: not printed whole.
        write!(f, "GroupId({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

/// Processes, one device each, whose collective calls run between their devices: this
/// process's member, as rank `rank` of `size`.
pub struct DeviceGroup {
    rank: usize,
    size: usize,
    #[cfg(feature = "nccl")]
    pub(crate) communicator: crate::libraries::nccl::Communicator,
}

impl std::fmt::Debug for DeviceGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceGroup").field("rank", &self.rank).field("size", &self.size).finish_non_exhaustive()
    }
}

/// Why this build has no device group.
#[cfg(not(feature = "nccl"))]
const NOT_BUILT: &str = "this build has no NCCL: the cuda build (`--features cuda`) has it";

impl DeviceGroup {
    /// The library the groups are made with (`NCCL 2.x.y (where)`), or why there is none: not
    /// in this build, switched off (`LEROBOT_RS_NCCL=0`), or not found (the error says how to
    /// install it). Looked for once per process.
    pub fn library() -> Result<String, String> {
        #[cfg(feature = "nccl")]
        return crate::libraries::nccl::describe_library();
        #[cfg(not(feature = "nccl"))]
        Err(NOT_BUILT.into())
    }

    /// A new group's id, made by its rank 0.
    pub fn new_id() -> Result<GroupId, String> {
        #[cfg(feature = "nccl")]
        return crate::libraries::nccl::new_id().map(GroupId);
        #[cfg(not(feature = "nccl"))]
        Err(NOT_BUILT.into())
    }

    /// Joins group `id` as `rank` of `size` with the CUDA device numbered `device`; blocks until
    /// every rank has joined.
    pub fn join(id: &GroupId, rank: usize, size: usize, device: usize) -> Result<Self, String> {
        #[cfg(feature = "nccl")]
        return crate::libraries::nccl::Communicator::join(id.0, rank, size, device).map(|communicator| Self {
            rank,
            size,
            communicator,
        });
        #[cfg(not(feature = "nccl"))]
        {
            let _ = (id, rank, size, device);
            Err(NOT_BUILT.into())
        }
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks of the group.
    pub fn size(&self) -> usize {
        self.size
    }

    /// What ended the group (a peer's death, the network, a failed call), once something did:
    /// every later call fails with it.
    pub fn failure(&self) -> Option<String> {
        #[cfg(feature = "nccl")]
        return self.communicator.failure();
        #[cfg(not(feature = "nccl"))]
        None
    }
}

/// The collective calls between devices, for backend `Self`; by default none (`None`: the caller
/// takes its path through host memory).
pub trait CollectiveKernels: Backend {
    /// The number [`DeviceGroup::join`] takes for `device`, where this backend's tensors on it
    /// can join a device group (burn's cuda backend with the `nccl` feature); `None` elsewhere.
    fn group_device(device: &Self::Device) -> Option<usize> {
        let _ = device;
        None
    }

    /// `collective` of `tensor` (1-D, f32, f16 or bf16) over `group`'s ranks, enqueued on the
    /// device's stream (in place where the tensor's buffer is its own); `None` where this backend
    /// has no device groups.
    fn group_collective(
        tensor: FloatTensor<Self>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Option<Result<FloatTensor<Self>, String>> {
        let _ = (tensor, group, collective);
        None
    }
}
