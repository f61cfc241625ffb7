//! Which collective call a device group makes: named apart from the group, which holds the
//! library's communicator, so that the library's code can name the call without naming the group.

/// A collective call between the ranks of a [`DeviceGroup`](super::collective::DeviceGroup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    /// The sum of every rank's tensor, the same bits on every rank.
    AllReduceSum,
    /// Rank 0's tensor, on every rank.
    Broadcast,
}

impl Collective {
    /// The call, named for an error message.
    pub fn name(self) -> &'static str {
        match self {
            Self::AllReduceSum => "NCCL's all-reduce",
            Self::Broadcast => "NCCL's broadcast",
        }
    }
}
