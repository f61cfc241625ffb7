//! Whether a run keeps its frame caches' frames in the training device's memory
//! (`dataset.frames_on_device`, [`DeviceFrames`](super::DeviceFrames)): `auto` (the default) does on a GPU
//! that holds them as bytes (CUDA; wgpu would widen every level to four bytes) when every
//! dataset is read from a frame cache and all the frames fit one of the device's largest
//! buffers (on CUDA a quarter of its memory, leaving the rest to the step); `on` does wherever
//! every dataset has a frame cache and each camera's frames fit a buffer; `off` never.

use std::fmt;
use std::str::FromStr;

use datasets::frame_cache::FrameCache;
use kernels::Kernels;

use crate::error::{Error, Result};

/// `dataset.frames_on_device`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FramesOnDevice {
    /// On a GPU that holds them as bytes, where every dataset has a frame cache whose frames fit.
    #[default]
    Auto,
    /// Wherever every dataset has a frame cache.
    On,
    /// Never: the loader copies the frames and each step uploads them.
    Off,
}

impl FromStr for FramesOnDevice {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            other => Err(format!("{other:?} is not a frames_on_device choice: auto (default), on or off")),
        }
    }
}

impl fmt::Display for FramesOnDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        })
    }
}

/// What `choice` decides for a run reading cameras `keys` from `caches` (one per dataset; `None`
/// where a dataset has none) on `device`, with the log line that says why (none where there is
/// nothing to say); an error where `on` cannot be met.
pub(crate) fn decide<B: Kernels>(
    choice: FramesOnDevice,
    caches: &[Option<FrameCache>],
    keys: &[String],
    device: &B::Device,
) -> Result<(bool, Option<String>)> {
    let level = super::store::bytes_per_level::<B>(device);
    let cached: Option<Vec<&FrameCache>> = caches.iter().map(Option::as_ref).collect();
    let cameras = cached.filter(|all| !all.is_empty()).map(|all| {
        keys.iter()
            .map(|key| {
                let stored = all.iter().filter_map(|cache| cache.camera(key));
                let bytes = stored.map(|camera| camera.header().frames * camera.header().frame_len() as u64);
                bytes.sum::<u64>() * level as u64
            })
            .collect::<Vec<u64>>()
    });
    let device = Device { largest_allocation: B::largest_allocation(device), holds_bytes: level == 1 };
    choose(choice, device, cameras.as_deref(), keys.is_empty())
}

/// What [`decide`] knows of the device.
#[derive(Debug, Clone, Copy)]
struct Device {
    /// [`FrameKernels::largest_allocation`](kernels::FrameKernels::largest_allocation): `None` on the CPU.
    largest_allocation: Option<u64>,
    /// Whether it holds uint8 tensors (else a frame's levels take four bytes each).
    holds_bytes: bool,
}

/// [`decide`]'s choice from the bytes each camera's frames would take on the device (`None`
/// where not every dataset has a frame cache).
fn choose(
    choice: FramesOnDevice,
    device: Device,
    cameras: Option<&[u64]>,
    no_cameras: bool,
) -> Result<(bool, Option<String>)> {
    // `auto` only where a GPU holds the frames as bytes (wgpu widens them fourfold).
    let automatic = device.largest_allocation.is_some() && device.holds_bytes;
    if no_cameras || choice == FramesOnDevice::Off || (choice == FramesOnDevice::Auto && !automatic) {
        return Ok((false, None));
    }
    let Some(cameras) = cameras else {
        let why = "frames on the device: off, as not every dataset is read from a frame cache";
        return match choice {
            FramesOnDevice::On => Err(Error::Config(format!(
                "{why} (dataset.frames_on_device on needs one for each: dataset.frame_cache auto, or a folder)"
            ))),
            _ => Ok((false, Some(why.into()))),
        };
    };
    let gb = |bytes: u64| bytes as f64 / 1e9;
    let total: u64 = cameras.iter().sum();
    let widest = cameras.iter().copied().max().unwrap_or(0);
    let named = match cameras.len() {
        1 => "the camera's".to_string(),
        n => format!("the {n} cameras'"),
    };
    match (choice, device.largest_allocation) {
        (FramesOnDevice::On, Some(largest)) if widest > largest => Err(Error::Config(format!(
            "dataset.frames_on_device on: a camera's frames take {:.2} GB, more than the device's largest buffer \
             ({:.2} GB)",
            gb(widest),
            gb(largest)
        ))),
        (FramesOnDevice::Auto, Some(largest)) if total > largest => Ok((
            false,
            Some(format!(
                "frames on the device: off, as {named} {:.2} GB of frames exceed the device's largest buffer, {:.2} GB \
                 (on CUDA a quarter of its memory; frames_on_device on keeps them there anyway, a camera to a \
                 buffer): the loader copies them, each step uploads them",
                gb(total),
                gb(largest)
            )),
        )),
        _ => Ok((
            true,
            Some(format!(
                "frames on the device: {named} {:.2} GB of cached frames, uploaded once; each step gathers its \
                 frames there (frames_on_device off to copy them on the host)",
                gb(total)
            )),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: Device = Device { largest_allocation: Some(1_000), holds_bytes: true };
    const WGPU: Device = Device { largest_allocation: Some(1_000), holds_bytes: false };
    const CPU: Device = Device { largest_allocation: None, holds_bytes: true };

    fn on(result: Result<(bool, Option<String>)>) -> (bool, String) {
        let (on, line) = result.unwrap();
        (on, line.unwrap_or_default())
    }

    #[test]
    fn auto_keeps_the_frames_on_a_gpu_that_holds_bytes_where_they_fit() {
        use FramesOnDevice::{Auto, Off};
        let (kept, line) = on(choose(Auto, GPU, Some(&[400, 500]), false));
        assert!(kept && line.starts_with("frames on the device: the 2 cameras' 0.00 GB"), "{line}");
        let (kept, line) = on(choose(Auto, GPU, Some(&[600, 500]), false));
        assert!(!kept && line.contains("exceed the device's largest buffer"), "{line}");
        assert_eq!(on(choose(Auto, CPU, Some(&[10]), false)), (false, String::new()), "the CPU says nothing");
        assert_eq!(on(choose(Auto, WGPU, Some(&[10]), false)), (false, String::new()), "wgpu widens the levels");
        let (kept, line) = on(choose(Auto, GPU, None, false));
        assert!(!kept && line.contains("not every dataset is read from a frame cache"), "{line}");
        assert_eq!(on(choose(Off, GPU, Some(&[10]), false)), (false, String::new()));
        assert_eq!(on(choose(Auto, GPU, Some(&[]), true)), (false, String::new()), "no cameras, nothing to say");
    }

    #[test]
    fn on_keeps_them_wherever_every_dataset_has_a_cache_and_each_camera_fits_a_buffer() {
        use FramesOnDevice::On;
        let (kept, line) = on(choose(On, GPU, Some(&[600, 500]), false));
        assert!(kept && line.starts_with("frames on the device: the 2 cameras'"), "{line}");
        assert!(on(choose(On, CPU, Some(&[1 << 40]), false)).0, "no limit on the CPU");
        assert!(on(choose(On, WGPU, Some(&[10]), false)).0);
        let (kept, line) = on(choose(On, GPU, Some(&[10]), false));
        assert!(kept && line.contains("the camera's"), "{line}");
        let too_wide = choose(On, GPU, Some(&[1_001]), false).unwrap_err().to_string();
        assert!(too_wide.contains("more than the device's largest buffer"), "{too_wide}");
        let uncached = choose(On, CPU, None, false).unwrap_err().to_string();
        assert!(uncached.contains("needs one for each"), "{uncached}");
    }
}
