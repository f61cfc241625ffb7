//! What a written video is encoded as: LeRobot's codecs and encoder settings.

/// The codec of a written video.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VideoCodec {
    /// AV1 via libsvtav1, as LeRobot writes by default.
    Av1,
    /// H.264 via libx264.
    H264,
}

impl VideoCodec {
    /// The name LeRobot records in `video.codec`.
    pub fn info_name(self) -> &'static str {
        match self {
            Self::Av1 => "av1",
            Self::H264 => "h264",
        }
    }
}

/// The GOP size LeRobot encodes with: a keyframe every two frames.
pub const GOP: u32 = 2;
/// LeRobot's constant rate factor.
pub const CRF: u32 = 30;
