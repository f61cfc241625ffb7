//! The device group of a run of one process per GPU: made by process 0 where its backend and
//! build have one (NCCL under burn's cuda backend), its id handed out as the processes agree on
//! what they train, joined by every process; the path through host memory (MPI) otherwise, said
//! once.

use kernels::{DeviceGroup, Kernels};

use super::processes::{Channel, Processes};
use crate::error::{Error, Result};

/// This process's member of its run's device group, or `None`: one process; several devices in
/// each (burn-collective sums them, MPI the processes' sums); a backend without device groups;
/// NCCL missing on process 0 (`say` tells why, on process 0). Every process first shows
/// `fingerprint` (of what it trains) to process 0, which fails the run where one differs.
pub(crate) fn join_group<B: Kernels>(
    processes: &Processes,
    devices: &[B::Device],
    fingerprint: u64,
    say: &mut impl FnMut(&str),
) -> Result<Option<DeviceGroup>> {
    let (rank, count) = (processes.rank(), processes.count());
    if count == 1 {
        return Ok(None);
    }
    let group_device = match devices {
        [device] => B::group_device(device),
        _ => None,
    };
    if let (Channel::Meeting(_), [_, _, ..]) = (processes.channel(), devices) {
        return Err(Error::Config(format!(
            "process {rank}: a torchrun-style launch runs one process per GPU, but this one was given {} devices \
             (--num_devices 1)",
            devices.len()
        )));
    }
    let mut why_none = None;
    let offer = match (processes.is_main(), group_device) {
        (false, _) => None,
        (true, None) => {
            why_none = Some(format!(
                "process 0 trains on {} device(s) of a backend without device groups (NCCL needs burn's cuda backend, \
                 one GPU a process)",
                devices.len()
            ));
            None
        }
        (true, Some(_)) => DeviceGroup::library()
            .and_then(|_| DeviceGroup::new_id())
            .inspect_err(|why| why_none = Some(why.clone()))
            .ok(),
    };
    let id = processes.agree(fingerprint, offer)?;
    match (id, group_device) {
        (Some(id), Some(device)) => {
            let group = DeviceGroup::join(&id, rank, count, device)
                .map_err(|e| Error::Replicas(format!("process {rank} joining NCCL's group: {e}")))?;
            if processes.is_main() {
                let library = DeviceGroup::library().unwrap_or_default();
                say(&format!("gradients summed between the {count} GPUs by {library}, on each GPU's stream"));
            }
            Ok(Some(group))
        }
        (Some(_), None) => Err(Error::Replicas(format!(
            "process {rank} cannot join process 0's NCCL group: it trains on {} device(s) of a backend without \
             one, where NCCL takes one CUDA device a process",
            devices.len()
        ))),
        (None, _) => match processes.channel() {
            Channel::Meeting(_) => Err(Error::Config(format!(
                "a torchrun-style launch sums gradients through NCCL only, and process 0 has no NCCL group: {}; \
                 or start the processes with mpirun (the `mpi` feature), whose path goes through host memory",
                why_none.as_deref().unwrap_or("process 0's error says why")
            ))),
            Channel::Alone | Channel::Mpi => {
                if let Some(why) = why_none.filter(|_| group_device.is_some()) {
                    say(&format!("{why}: gradients summed through MPI in host memory instead (far slower on GPUs)"));
                }
                Ok(None)
            }
        },
    }
}
