//! NCCL under burn's cuda backend (the `nccl` feature): the sums and broadcasts of a
//! data-parallel run between processes, one GPU each, directly between the GPUs on burn's own
//! stream, as PyTorch's DDP makes them.
//!
//! NCCL 2 is opened at run time ([`describe_library`]); where it is missing the trainer keeps its
//! path through host memory, and says so. A [`Communicator`] is joined from an id that the group's
//! rank 0 makes and the launcher's channel hands to the others; a watchdog thread turns a peer's
//! failure into an error on every rank.

mod communicator;
mod library;
mod tensors;

pub(crate) use communicator::{Communicator, describe_library, new_id};
pub(crate) use tensors::run;
