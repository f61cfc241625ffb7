//! What a batch holds, decided once per loader: one field per dataset feature (LeRobot's keys;
//! with several datasets, the features they all have), where its values come from in each
//! dataset, and its per-sample shape exactly as LeRobot returns it.

use datasets::frame_cache::FrameCache;
use datasets::{DatasetSet, Dtype, FrameEncoding, FrameShape, WindowSpec};

use crate::error::{Error, Result};

/// Where a field's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Decoded from the `camera`-th video feature's MP4s.
    Video {
        /// Position among the dataset's video keys.
        camera: usize,
    },
    /// Decoded from PNG/JPEG bytes in the parquet column.
    Image,
    /// Copied from the decoded-frame cache.
    FrameCache,
    /// Gathered from a numeric parquet column.
    Column,
}

/// The element type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// Camera frames.
    U8,
    /// A camera's frames as their rows in the frame caches, not their bytes (i64, one per window
    /// step; [`crate::LoaderBuilder::frame_rows`]): each frame's index among every dataset's
    /// cached frames laid end to end, in the datasets' order, for a consumer that holds the
    /// caches' frames itself (the trainer's, on the device).
    FrameRow,
    /// Float features (returned as f32 like LeRobot).
    F32,
    /// Integer features.
    I64,
    /// Boolean features.
    Bool,
}

/// One field of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The feature key (LeRobot's output key).
    pub key: String,
    /// Where its values come from, per dataset.
    pub sources: Vec<Source>,
    /// Its element type.
    pub value_type: ValueType,
    /// Window offsets in frames, when read as a window (then `{key}_is_pad` exists).
    pub offsets: Option<Vec<i64>>,
    /// The stored frame shape, for cameras.
    pub frame: Option<FrameShape>,
    /// How a camera's frames are laid out (RGB, or YUV planes from video).
    pub encoding: FrameEncoding,
    /// Values per window step (one frame, or the feature's width).
    pub step_len: usize,
    /// The shape of one sample's value, as LeRobot returns it (a video window of one step is
    /// squeezed to `C, H, W`; scalars are 0-dimensional).
    pub item_shape: Vec<usize>,
}

impl Field {
    /// Window steps per sample (1 without a window).
    pub fn steps(&self) -> usize {
        self.offsets.as_ref().map_or(1, Vec::len)
    }

    /// Values per sample.
    pub fn per_sample(&self) -> usize {
        self.steps() * self.step_len
    }
}

/// The fields of every batch of a loader.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchLayout {
    /// Samples per full batch.
    pub batch_size: usize,
    /// The fields, in `info.json` order (string features are left out: they are not tensors).
    pub fields: Vec<Field>,
    /// How many datasets are read; with more than one, each batch says which each sample came
    /// from (`dataset_index`).
    pub num_datasets: usize,
}

impl BatchLayout {
    /// The layout for `datasets` read with `windows`, each dataset's cameras from its frame cache
    /// when it has one (`caches`, one per dataset), frames in `encoding` (a cache must hold
    /// them in it; images in parquet hold RGB only, and refuse another encoding); with
    /// `frame_rows`, the cameras' frames as their rows in the caches ([`ValueType::FrameRow`]),
    /// which every dataset must then have.
    pub fn new(
        datasets: &DatasetSet,
        windows: &WindowSpec,
        caches: &[Option<&FrameCache>],
        batch_size: usize,
        encoding: FrameEncoding,
        frame_rows: bool,
    ) -> Result<Self> {
        let mut fields = Vec::new();
        for feature in &datasets.info().features {
            let key = feature.key.as_str();
            let offsets = windows.offsets(key).map(<[i64]>::to_vec);
            let windowed = offsets.is_some();
            let steps = offsets.as_ref().map_or(1, Vec::len);
            let column = |value_type| (vec![Source::Column; datasets.parts().len()], value_type, None, feature.width());
            let (sources, value_type, frame, step_len) = match &feature.dtype {
                Dtype::Video | Dtype::Image => {
                    let declared = feature.frame_shape().expect("cameras have a frame shape");
                    // The first dataset's frames (its cache may hold them resized), which every
                    // other dataset's must match.
                    let mut first: Option<FrameShape> = None;
                    let mut sources = Vec::with_capacity(datasets.parts().len());
                    for (part, dataset) in datasets.parts().iter().enumerate() {
                        let (source, frame) = match caches.get(part).copied().flatten() {
                            Some(cache) => {
                                let camera = cache.camera(key).ok_or_else(|| {
                                    Error::Config(format!(
                                        "the frame cache in {} has no camera `{key}`",
                                        cache.dir().display()
                                    ))
                                })?;
                                let stored = camera.header().encoding;
                                if stored != encoding {
                                    return Err(Error::Config(format!(
                                        "camera `{key}` of {} is read from the frame cache in {}, which holds {stored} \
                                         frames, not the {encoding} asked for: cache it with `datasets cache \
                                         --frame-encoding {encoding}`, or read the videos",
                                        datasets.name(part),
                                        cache.dir().display()
                                    )));
                                }
                                (Source::FrameCache, camera.header().shape)
                            }
                            None if feature.is_video() => {
                                let videos = dataset.info().video_keys();
                                let camera = videos.iter().position(|k| k.as_str() == key).expect("a video key");
                                (Source::Video { camera }, declared)
                            }
                            None => (Source::Image, declared),
                        };
                        if encoding != FrameEncoding::Rgb && source == Source::Image {
                            return Err(Error::Config(format!(
                                "camera `{key}` of {} is read from images in parquet, which hold RGB frames: the \
                                 {encoding} encoding is decoded from video (read the videos, or use rgb)",
                                datasets.name(part)
                            )));
                        }
                        let expected = *first.get_or_insert(frame);
                        if frame != expected {
                            return Err(Error::Config(format!(
                                "camera `{key}` gives {frame} frames in {} but {expected} in {}",
                                datasets.name(part),
                                datasets.name(0)
                            )));
                        }
                        sources.push(source);
                    }
                    let frame = first.expect("a set has a dataset");
                    if encoding == FrameEncoding::Yuv420 && frame.height % 2 == 1 {
                        return Err(Error::Config(format!(
                            "camera `{key}` is {frame}: the yuv420 encoding needs an even height (FFmpeg converts \
                             odd heights to RGB by another path, which the device does not reproduce)"
                        )));
                    }
                    if frame_rows {
                        if let Some(part) = sources.iter().position(|&source| source != Source::FrameCache) {
                            return Err(Error::Config(format!(
                                "camera `{key}` of {} is not read from a frame cache: the frames can be handed \
                                 over as cache rows only where every dataset has a frame cache",
                                datasets.name(part)
                            )));
                        }
                        (sources, ValueType::FrameRow, Some(frame), 1)
                    } else {
                        (sources, ValueType::U8, Some(frame), frame.encoded_len(encoding))
                    }
                }
                Dtype::Float32 | Dtype::Float64 => column(ValueType::F32),
                Dtype::Int(_) => column(ValueType::I64),
                Dtype::Bool => column(ValueType::Bool),
                Dtype::String => continue,
                Dtype::Other(d) => {
                    return Err(Error::Config(format!(
                        "feature `{key}` has dtype {d:?}, which the loader cannot read"
                    )));
                }
            };
            let item_shape = match frame {
                Some(f) => {
                    // One frame's shape, or none for its row.
                    let chw = match (value_type, encoding) {
                        (ValueType::FrameRow, _) => Vec::new(),
                        (_, FrameEncoding::Rgb) => vec![f.channels, f.height, f.width],
                        (_, FrameEncoding::Yuv420) => vec![f.encoded_len(encoding)],
                    };
                    let squeeze = feature.is_video() && steps == 1;
                    if windowed && !squeeze { [vec![steps], chw].concat() } else { chw }
                }
                None => {
                    let item = if feature.is_scalar() { Vec::new() } else { feature.shape.clone() };
                    if windowed { [vec![steps], item].concat() } else { item }
                }
            };
            let encoding = if frame.is_some() { encoding } else { FrameEncoding::Rgb };
            fields.push(Field {
                key: key.to_string(),
                sources,
                value_type,
                offsets,
                frame,
                encoding,
                step_len,
                item_shape,
            });
        }
        Ok(Self { batch_size, fields, num_datasets: datasets.parts().len() })
    }

    /// The field `key`.
    pub fn field(&self, key: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.key == key)
    }

    /// Bytes one sample moves (frames, values and pads), the unit of the memcpy bound.
    pub fn bytes_per_sample(&self) -> usize {
        self.fields
            .iter()
            .map(|f| {
                let element = match f.value_type {
                    ValueType::U8 | ValueType::Bool => 1,
                    ValueType::F32 => 4,
                    ValueType::I64 | ValueType::FrameRow => 8,
                };
                f.per_sample() * element + f.offsets.as_ref().map_or(0, Vec::len)
            })
            .sum()
    }
}
