//! Whether a run keeps its frame caches' frames in the training device's memory
//! (`dataset.frames_on_device`, [`crate::DeviceFrames`]): `auto` (the default) does on a GPU
//! when every dataset is read from a frame cache and all the frames fit one of the device's
//! largest buffers (on CUDA a quarter of its memory, leaving the rest to the step); `on` does
//! wherever every dataset has a frame cache; `off` never.

use std::fmt;
use std::str::FromStr;

use datasets::frame_cache::FrameCache;
use kernels::Kernels;

use crate::error::{Error, Result};

/// `dataset.frames_on_device`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FramesOnDevice {
    /// On a GPU, where every dataset has a frame cache whose frames fit.
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
/// nothing to say: `off`, or `auto` on the CPU); an error where `on` cannot be met.
pub fn decide<B: Kernels>(
    choice: FramesOnDevice,
    caches: &[Option<FrameCache>],
    keys: &[String],
    device: &B::Device,
) -> Result<(bool, Option<String>)> {
    let largest = B::largest_allocation(device);
    if choice == FramesOnDevice::Off || (choice == FramesOnDevice::Auto && largest.is_none()) {
        return Ok((false, None));
    }
    let all: Option<Vec<&FrameCache>> = caches.iter().map(Option::as_ref).collect();
    let Some(all) = all.filter(|all| !all.is_empty()) else {
        let why = "frames on the device: off, as not every dataset is read from a frame cache";
        return match choice {
            FramesOnDevice::On => Err(Error::Config(format!(
                "{why} (dataset.frames_on_device on needs one for each: dataset.frame_cache auto, or a folder)"
            ))),
            _ => Ok((false, Some(why.into()))),
        };
    };
    let level = crate::device_frames::bytes_per_level::<B>(device) as u64;
    let cameras: Vec<(&String, u64)> = keys
        .iter()
        .map(|key| {
            let bytes = all
                .iter()
                .filter_map(|cache| cache.camera(key))
                .map(|c| c.header().frames * c.header().frame_len() as u64);
            (key, bytes.sum::<u64>() * level)
        })
        .collect();
    let total: u64 = cameras.iter().map(|(_, bytes)| bytes).sum();
    let gb = |bytes: u64| bytes as f64 / 1e9;
    let widest = cameras.iter().max_by_key(|(_, bytes)| *bytes);
    match (choice, largest, widest) {
        (FramesOnDevice::On, Some(largest), Some((key, bytes))) if *bytes > largest => Err(Error::Config(format!(
            "dataset.frames_on_device on: camera `{key}`'s frames take {:.2} GB, more than the device's largest \
             buffer ({:.2} GB)",
            gb(*bytes),
            gb(largest)
        ))),
        (FramesOnDevice::Auto, Some(largest), _) if total > largest => Ok((
            false,
            Some(format!(
                "frames on the device: off, as the {} cameras' {:.2} GB of frames exceed the {:.2} GB of the device's \
                 largest buffer (a quarter of a GPU's memory; frames_on_device on to keep them there anyway, \
                 a camera to a buffer): the loader copies them, each step uploads them",
                cameras.len(),
                gb(total),
                gb(largest)
            )),
        )),
        _ => Ok((
            true,
            Some(format!(
                "frames on the device: the {} cameras' {:.2} GB of cached frames, uploaded once; each step gathers \
                 its frames there (--frames-on-device off to copy them on the host)",
                cameras.len(),
                gb(total)
            )),
        )),
    }
}
