//! Choosing the backend at run time: code is written once against burn's `Backend` and run on
//! the CPU backend (Flex), or on wgpu or CUDA when the crate is built with the `wgpu` or `cuda`
//! feature.

use std::fmt;
use std::str::FromStr;

use kernels::Kernels;

use crate::error::{Error, Result};

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

impl FromStr for DeviceKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cpu" => Ok(Self::Cpu),
            "wgpu" => Ok(Self::Wgpu),
            "cuda" => Ok(Self::Cuda),
            other => Err(Error::Config(format!("unknown device {other:?} (cpu, wgpu or cuda)"))),
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
pub fn run_on<T: DeviceTask>(kind: DeviceKind, task: T) -> Result<T::Output> {
    match kind {
        DeviceKind::Cpu => Ok(task.run::<burn::backend::Flex>(Default::default())),
        DeviceKind::Wgpu => {
            #[cfg(feature = "wgpu-untuned")]
            {
                crate::kernel_cache::configure();
                Ok(task.run::<burn::backend::Wgpu>(burn::backend::wgpu::WgpuDevice::default()))
            }
            #[cfg(not(feature = "wgpu-untuned"))]
            {
                drop(task);
                Err(Error::Config("this build has no wgpu backend: rebuild with `--features wgpu`".into()))
            }
        }
        DeviceKind::Cuda => {
            #[cfg(feature = "cuda-untuned")]
            {
                crate::kernel_cache::configure();
                Ok(task.run::<burn::backend::Cuda>(burn::backend::cuda::CudaDevice::new(0)))
            }
            #[cfg(not(feature = "cuda-untuned"))]
            {
                drop(task);
                Err(Error::Config("this build has no CUDA backend: rebuild with `--features cuda`".into()))
            }
        }
    }
}
