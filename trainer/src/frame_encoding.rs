//! How a run's video frames travel to the training device (`dataset.frame_encoding`): as RGB,
//! converted on the CPU by the decoder, or as the decoder's YUV 4:2:0 planes, converted on the
//! device to the same RGB values. `auto` (the default) sends planes to a GPU, where the
//! conversion costs the CPU nothing and the bytes moved halve, and RGB to the CPU, whose decoder
//! converts them faster than tensor operations would.

use std::fmt;
use std::str::FromStr;

use datasets::{DatasetSet, FrameEncoding};
use kernels::DeviceKind;

/// `dataset.frame_encoding`: a fixed encoding, or `auto`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FrameEncodingChoice {
    /// YUV 4:2:0 planes on a GPU when every camera can give them, else RGB.
    #[default]
    Auto,
    /// RGB: LeRobot's frames, converted on the CPU.
    Rgb,
    /// The decoder's YUV 4:2:0 planes, converted to RGB on the device.
    Yuv420,
}

impl FrameEncodingChoice {
    /// The encoding chosen, unless `auto`.
    pub fn fixed(self) -> Option<FrameEncoding> {
        match self {
            Self::Auto => None,
            Self::Rgb => Some(FrameEncoding::Rgb),
            Self::Yuv420 => Some(FrameEncoding::Yuv420),
        }
    }
}

impl FromStr for FrameEncodingChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            other => match other.parse::<FrameEncoding>() {
                Ok(FrameEncoding::Rgb) => Ok(Self::Rgb),
                Ok(FrameEncoding::Yuv420) => Ok(Self::Yuv420),
                Err(_) => Err(format!("{other:?} is not a frame encoding: auto (default), rgb or yuv420")),
            },
        }
    }
}

impl fmt::Display for FrameEncodingChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fixed() {
            Some(encoding) => encoding.fmt(f),
            None => f.write_str("auto"),
        }
    }
}

/// What `auto` prefers for a run on `device` reading `datasets`, and why, as a log line: YUV
/// 4:2:0 planes on a GPU when every camera of every dataset is a `yuv420p` video of even height,
/// else RGB.
pub fn preferred(device: DeviceKind, datasets: &DatasetSet) -> (FrameEncoding, String) {
    if device == DeviceKind::Cpu {
        let line = "frame encoding: rgb (training on the CPU, where the decoder's converter is faster than tensor \
                    operations on YUV planes)";
        return (FrameEncoding::Rgb, line.into());
    }
    for dataset in datasets.parts() {
        if let Err(e) = dataset.check_frame_encoding(FrameEncoding::Yuv420) {
            let why = datasets::error_message(&e);
            return (FrameEncoding::Rgb, format!("frame encoding: rgb, converted on the CPU ({why})"));
        }
    }
    let line = format!(
        "frame encoding: yuv420, the decoder's YUV 4:2:0 planes (half the bytes of RGB, no conversion on the CPU), \
         converted to LeRobot's RGB values on the {device} device (--frame-encoding rgb to convert on the CPU)"
    );
    (FrameEncoding::Yuv420, line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_read_and_print_as_written() {
        for (text, choice) in [
            ("auto", FrameEncodingChoice::Auto),
            ("rgb", FrameEncodingChoice::Rgb),
            ("yuv420", FrameEncodingChoice::Yuv420),
        ] {
            assert_eq!(text.parse::<FrameEncodingChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), text);
            let json = serde_json::to_string(&choice).unwrap();
            assert_eq!(json, format!("\"{text}\""), "as configurations before `auto` wrote them");
            assert_eq!(serde_json::from_str::<FrameEncodingChoice>(&json).unwrap(), choice);
        }
        let refused = "yuv444".parse::<FrameEncodingChoice>().unwrap_err();
        assert!(refused.contains("auto (default), rgb or yuv420"), "{refused}");
    }
}
