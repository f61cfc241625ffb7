//! Choosing the backend at run time: code is written once against burn's `Backend` (with our
//! [`Kernels`]) and run on the CPU backend (Flex), or on wgpu or CUDA when the crate is built
//! with the `wgpu` or `cuda` feature (or their `-untuned` forms).

use std::fmt;
use std::str::FromStr;

use crate::Kernels;

/// Where tensors live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// burn's Flex CPU backend (always available).
    #[default]
    Cpu,
    /// wgpu (Vulkan/Metal/...), with the `wgpu` feature.
    Wgpu,
    /// CUDA, with the `cuda` feature (GPU 0).
    Cuda,
}

/// Why a device cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// A device name other than `cpu`, `wgpu` or `cuda`.
    #[error("unknown device {0:?} (cpu, wgpu or cuda)")]
    Unknown(String),
    /// The device's backend is not in this build.
    #[error("this build has no {kind} backend: rebuild with `--features {kind}`")]
    NotBuilt {
        /// The device asked for.
        kind: DeviceKind,
    },
}

impl FromStr for DeviceKind {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, DeviceError> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "wgpu" => Ok(Self::Wgpu),
            "cuda" => Ok(Self::Cuda),
            other => Err(DeviceError::Unknown(other.to_string())),
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Wgpu => "wgpu",
            Self::Cuda => "cuda",
        })
    }
}

/// Work to run on whichever backend the user picked.
pub trait DeviceTask {
    /// What the work returns.
    type Output;
    /// Runs the work on backend `B`'s `device` (every backend we run on has our fused
    /// [`Kernels`]).
    fn run<B: Kernels>(self, device: B::Device) -> Self::Output;
}

/// Runs `task` on the backend of `kind`, or says which feature to build with.
pub fn run_on<T: DeviceTask>(kind: DeviceKind, task: T) -> Result<T::Output, DeviceError> {
    match kind {
        DeviceKind::Cpu => Ok(task.run::<burn::backend::Flex>(Default::default())),
        DeviceKind::Wgpu => {
            #[cfg(feature = "wgpu-untuned")]
            {
                super::kernel_cache::configure();
                Ok(task.run::<burn::backend::Wgpu>(burn::backend::wgpu::WgpuDevice::default()))
            }
            #[cfg(not(feature = "wgpu-untuned"))]
            {
                drop(task);
                Err(DeviceError::NotBuilt { kind })
            }
        }
        DeviceKind::Cuda => {
            #[cfg(feature = "cuda-untuned")]
            {
                super::kernel_cache::configure();
                Ok(task.run::<burn::backend::Cuda>(burn::backend::cuda::CudaDevice::new(0)))
            }
            #[cfg(not(feature = "cuda-untuned"))]
            {
                drop(task);
                Err(DeviceError::NotBuilt { kind })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_and_print_as_given() {
        for kind in [DeviceKind::Cpu, DeviceKind::Wgpu, DeviceKind::Cuda] {
            assert_eq!(kind.to_string().parse::<DeviceKind>(), Ok(kind));
        }
        assert_eq!("tpu".parse::<DeviceKind>(), Err(DeviceError::Unknown("tpu".into())));
    }

    #[test]
    fn the_cpu_always_runs_and_a_backend_left_out_says_how_to_build_it() {
        struct Count;
        impl DeviceTask for Count {
            type Output = usize;
            fn run<B: Kernels>(self, device: B::Device) -> usize {
                burn::tensor::Tensor::<B, 1>::ones([3], &device).dims()[0]
            }
        }
        assert_eq!(run_on(DeviceKind::Cpu, Count), Ok(3));
        #[cfg(not(feature = "cuda-untuned"))]
        assert_eq!(
            run_on(DeviceKind::Cuda, Count).unwrap_err().to_string(),
            "this build has no cuda backend: rebuild with `--features cuda`"
        );
    }
}
