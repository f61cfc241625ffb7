//! [`CollectiveKernels`] on burn's cubecl backends: the runtime's library's
//! ([`RuntimeLibraries`]: NCCL on CUDA with the `nccl` feature; none on wgpu).

use burn::tensor::ops::FloatTensor;
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};

use crate::{Collective, CollectiveKernels, DeviceGroup, RuntimeLibraries};

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> CollectiveKernels
    for CubeBackend<R, F, I, BT>
{
    fn group_device(device: &Self::Device) -> Option<usize> {
        R::group_device(device)
    }

    fn group_collective(
        tensor: FloatTensor<Self>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Option<Result<FloatTensor<Self>, String>> {
        R::group_collective(tensor, group, collective)
    }
}
