//! Feature declarations (`info.json` → `features`): keys, dtypes, shapes and camera geometry.

use std::borrow::Borrow;
use std::fmt;

use serde_json::{Map, Value};

use crate::error::Result;
use crate::meta::json::{Obj, describe};

/// The name of a feature, e.g. `observation.images.top`. Never contains `/`, `\` or NUL and is
/// never `.` or `..`, so it is safe to substitute into a path template.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FeatureKey(String);

impl FeatureKey {
    /// Checks and wraps a feature key.
    pub fn new(key: &str) -> std::result::Result<Self, String> {
        if key.is_empty() {
            return Err("a feature key must not be empty".into());
        }
        if key == "." || key == ".." || key.contains(['/', '\\', '\0']) {
            return Err(format!("feature key {key:?} must not contain '/', '\\' or NUL, nor be '.' or '..'"));
        }
        Ok(Self(key.to_string()))
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FeatureKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl Borrow<str> for FeatureKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// A feature's declared `dtype`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dtype {
    /// `float32` (and `float16`, read as float32).
    Float32,
    /// `float64`; LeRobot returns it as float32, and so do we.
    Float64,
    /// Any signed or unsigned integer type; returned as int64 like LeRobot.
    Int(String),
    /// `bool`.
    Bool,
    /// `string` or `language`.
    String,
    /// An image stored inside parquet as `struct{bytes, path}`.
    Image,
    /// A camera stream stored as MP4 files.
    Video,
    /// A dtype this crate does not know; the feature is kept but cannot be read.
    Other(String),
}

impl Dtype {
    /// Parses a dtype string.
    pub fn parse(text: &str) -> Self {
        match text {
            "float32" | "float16" => Self::Float32,
            "float64" => Self::Float64,
            "int8" | "int16" | "int32" | "int64" | "uint8" | "uint16" | "uint32" | "uint64" => {
                Self::Int(text.to_string())
            }
            "bool" => Self::Bool,
            "string" | "language" => Self::String,
            "image" => Self::Image,
            "video" => Self::Video,
            other => Self::Other(other.to_string()),
        }
    }

    /// The dtype string as written in `info.json`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Float32 => "float32",
            Self::Float64 => "float64",
            Self::Int(s) | Self::Other(s) => s,
            Self::Bool => "bool",
            Self::String => "string",
            Self::Image => "image",
            Self::Video => "video",
        }
    }

    /// Whether the values are floats (returned as f32).
    pub fn is_float(&self) -> bool {
        matches!(self, Self::Float32 | Self::Float64)
    }
}

/// Channel count, height and width of a camera frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct FrameShape {
    /// Channels (3 for RGB).
    pub channels: usize,
    /// Height in pixels.
    pub height: usize,
    /// Width in pixels.
    pub width: usize,
}

impl FrameShape {
    /// Bytes of one uint8 CHW frame.
    pub fn len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// Whether the frame holds no pixels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl FrameShape {
    /// Bytes of one frame in `encoding`.
    pub fn encoded_len(&self, encoding: FrameEncoding) -> usize {
        match encoding {
            FrameEncoding::Rgb => self.len(),
            FrameEncoding::Yuv420 => self.yuv420_planes().iter().map(|(rows, cols)| rows * cols).sum(),
        }
    }

    /// The rows and columns of each plane of a YUV 4:2:0 frame of this size, in the order
    /// [`FrameEncoding::Yuv420`] lays them out: Y, then U and V (`⌈H/2⌉ × ⌈W/2⌉`).
    pub fn yuv420_planes(&self) -> [(usize, usize); 3] {
        let chroma = (self.height.div_ceil(2), self.width.div_ceil(2));
        [(self.height, self.width), chroma, chroma]
    }
}

/// How a camera frame's bytes are laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameEncoding {
    /// Channel-first RGB, `3·H·W` bytes: LeRobot's frames (default).
    #[default]
    Rgb,
    /// The decoder's own YUV 4:2:0 planes: `H·W` bytes of luma, then the two `⌈H/2⌉·⌈W/2⌉`
    /// chroma planes, U then V. Half the bytes of RGB and no colour conversion on the CPU; the
    /// training device converts them (video only).
    Yuv420,
}

impl fmt::Display for FrameEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rgb => "rgb",
            Self::Yuv420 => "yuv420",
        })
    }
}

impl std::str::FromStr for FrameEncoding {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "rgb" => Ok(Self::Rgb),
            "yuv420" => Ok(Self::Yuv420),
            other => Err(format!("{other:?} is not a frame encoding: rgb (default) or yuv420")),
        }
    }
}

impl fmt::Display for FrameShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{} (CxHxW)", self.channels, self.height, self.width)
    }
}

/// The largest number of values one feature may declare per frame (2^26, a 4K RGB frame is
/// 2^24.6): a guard against hostile `shape`s that would make us allocate without bound.
pub const MAX_FEATURE_VALUES: usize = 1 << 26;

/// One entry of `info.json` → `features`.
#[derive(Debug, Clone)]
pub struct Feature {
    /// The feature's key.
    pub key: FeatureKey,
    /// Its declared dtype.
    pub dtype: Dtype,
    /// Its declared shape (`[1]` for scalars; `[H, W, C]` or `[C, H, W]` for cameras).
    pub shape: Vec<usize>,
    /// Its `names`, kept as written (null, a list, a nested list or a dict).
    pub names: Value,
    /// The whole entry as written, unknown keys included.
    pub raw: Map<String, Value>,
}

impl Feature {
    /// Parses `features.<key>`.
    pub(crate) fn parse(obj: &Obj<'_>, key: &str) -> Result<Self> {
        let entry = obj.req_obj(key)?;
        let key = FeatureKey::new(key).map_err(|m| obj.error(key, m))?;
        let dtype = Dtype::parse(entry.req_str("dtype")?);
        let shape_values = entry.req_array("shape")?;
        let mut shape = Vec::with_capacity(shape_values.len());
        for dim in shape_values {
            match dim.as_u64().and_then(|d| usize::try_from(d).ok()) {
                Some(d) if d > 0 => shape.push(d),
                _ => {
                    return Err(entry.error("shape", format!("expected positive integers, found {}", describe(dim))));
                }
            }
        }
        if shape.is_empty() {
            return Err(entry.error("shape", "must have at least one dimension"));
        }
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if count.is_none_or(|n| n > MAX_FEATURE_VALUES) {
            return Err(
                entry.error("shape", format!("{shape:?} declares more than {MAX_FEATURE_VALUES} values per frame"))
            );
        }
        let names = entry.get("names").cloned().unwrap_or(Value::Null);
        let feature = Feature { key, dtype, shape, names, raw: entry.map().clone() };
        if feature.is_camera() {
            feature.frame_shape_checked(&entry)?;
        }
        Ok(feature)
    }

    /// Whether this feature is a camera (video or image).
    pub fn is_camera(&self) -> bool {
        matches!(self.dtype, Dtype::Video | Dtype::Image)
    }

    /// Whether this feature is stored as MP4 video.
    pub fn is_video(&self) -> bool {
        self.dtype == Dtype::Video
    }

    /// Whether the feature is a scalar per frame (`shape == [1]`), returned 0-dimensional.
    pub fn is_scalar(&self) -> bool {
        self.shape == [1]
    }

    /// The number of values per frame (product of the shape).
    pub fn width(&self) -> usize {
        self.shape.iter().product()
    }

    /// The per-frame shape of the returned value: `[]` for scalars, the declared shape otherwise
    /// (cameras: CHW).
    pub fn item_shape(&self) -> Vec<usize> {
        if let Some(f) = self.frame_shape() {
            return vec![f.channels, f.height, f.width];
        }
        if self.is_scalar() { Vec::new() } else { self.shape.clone() }
    }

    /// The `video.*` metadata of a video feature (`info`, or `video_info` in old datasets).
    pub fn video_info(&self) -> Option<&Map<String, Value>> {
        self.raw.get("info").or_else(|| self.raw.get("video_info")).and_then(Value::as_object)
    }

    /// Whether the feature is a depth map (not RGB; excluded from ImageNet stats).
    pub fn is_depth_map(&self) -> bool {
        let flag = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
        self.video_info().is_some_and(|i| flag(i, "is_depth_map") || flag(i, "video.is_depth_map"))
    }

    /// Camera geometry (CHW), for video and image features.
    ///
    /// The `video.height`/`video.width`/`video.channels` entries win when present; otherwise the
    /// shape is read as HWC when `names[2]` is `channel(s)` (LeRobot's recorder), as CHW when
    /// `names[0]` is, and as HWC when the last dimension looks like a channel count.
    pub fn frame_shape(&self) -> Option<FrameShape> {
        if !self.is_camera() {
            return None;
        }
        if let Some(info) = self.video_info() {
            let get = |k: &str| info.get(k).and_then(Value::as_u64).and_then(|v| usize::try_from(v).ok());
            if let (Some(height), Some(width)) = (get("video.height"), get("video.width")) {
                let channels = get("video.channels").unwrap_or(3);
                return Some(FrameShape { channels, height, width });
            }
        }
        let [a, b, c] = self.shape[..] else { return None };
        let names: Vec<&str> =
            self.names.as_array().map(|n| n.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let is_channel = |n: Option<&&str>| matches!(n, Some(&"channel" | &"channels"));
        if is_channel(names.get(2)) {
            Some(FrameShape { channels: c, height: a, width: b })
        } else if is_channel(names.first()) {
            Some(FrameShape { channels: a, height: b, width: c })
        } else if matches!(c, 1 | 3 | 4) {
            Some(FrameShape { channels: c, height: a, width: b })
        } else {
            Some(FrameShape { channels: a, height: b, width: c })
        }
    }

    fn frame_shape_checked(&self, entry: &Obj<'_>) -> Result<FrameShape> {
        let shape = self.frame_shape().ok_or_else(|| {
            entry.error("shape", format!("a camera needs 3 dimensions (H, W, C), found {:?}", self.shape))
        })?;
        if shape.is_empty() || shape.len() > MAX_FEATURE_VALUES {
            return Err(entry.error("shape", format!("camera frame {shape} is empty or too large")));
        }
        Ok(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn parse(entry: Value) -> Result<Feature> {
        let v = json!({ "cam": entry });
        let obj = Obj::new(Path::new("meta/info.json"), "features", &v)?;
        Feature::parse(&obj, "cam")
    }

    #[test]
    fn camera_geometry_follows_names() {
        let hwc =
            parse(json!({"dtype": "video", "shape": [480, 640, 3], "names": ["height", "width", "channels"]})).unwrap();
        assert_eq!(hwc.frame_shape(), Some(FrameShape { channels: 3, height: 480, width: 640 }));
        let chw =
            parse(json!({"dtype": "image", "shape": [3, 480, 640], "names": ["channel", "height", "width"]})).unwrap();
        assert_eq!(chw.frame_shape(), Some(FrameShape { channels: 3, height: 480, width: 640 }));
        assert_eq!(chw.item_shape(), vec![3, 480, 640]);
    }

    #[test]
    fn video_info_wins_over_shape() {
        let f = parse(json!({"dtype": "video", "shape": [3, 1, 1], "names": null,
            "info": {"video.height": 96, "video.width": 80, "video.channels": 3}}))
        .unwrap();
        assert_eq!(f.frame_shape(), Some(FrameShape { channels: 3, height: 96, width: 80 }));
    }

    #[test]
    fn scalars_are_zero_dimensional() {
        let f = parse(json!({"dtype": "float32", "shape": [1], "names": null})).unwrap();
        assert!(f.is_scalar());
        assert!(f.item_shape().is_empty());
    }

    #[test]
    fn hostile_shapes_and_keys_are_refused() {
        let err = parse(json!({"dtype": "float32", "shape": [100000, 100000, 100000]})).unwrap_err().to_string();
        assert!(err.contains("features.cam.shape"), "{err}");
        let err = parse(json!({"dtype": "float32", "shape": [0]})).unwrap_err().to_string();
        assert!(err.contains("positive"), "{err}");
        assert!(FeatureKey::new("../x").is_err());
        assert!(FeatureKey::new("..").is_err());
        assert!(FeatureKey::new("observation.images.top").is_ok());
    }
}
