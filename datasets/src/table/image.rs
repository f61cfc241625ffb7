//! Images stored inside parquet (`dtype: image`): PNG or JPEG bytes → channel-first uint8.
//!
//! LeRobot decodes them with PIL and torchvision's `ToTensor` without converting to RGB, so a
//! grayscale PNG gives one channel and an RGBA PNG four; so does this.

use image::DynamicImage;

use crate::meta::features::FrameShape;

/// Decodes an encoded image into channel-first bytes.
pub fn decode_chw(bytes: &[u8]) -> Result<(FrameShape, Vec<u8>), String> {
    let image = image::load_from_memory(bytes).map_err(|e| e.to_string())?;
    let (width, height) = (image.width() as usize, image.height() as usize);
    let (channels, interleaved): (usize, Vec<u8>) = match image {
        DynamicImage::ImageLuma8(i) => (1, i.into_raw()),
        DynamicImage::ImageLumaA8(i) => (2, i.into_raw()),
        DynamicImage::ImageRgb8(i) => (3, i.into_raw()),
        DynamicImage::ImageRgba8(i) => (4, i.into_raw()),
        other => return Err(format!("{:?} images (16-bit or float, e.g. depth) are not supported", other.color())),
    };
    let plane = width * height;
    let mut chw = vec![0u8; channels * plane];
    for (i, px) in interleaved.chunks_exact(channels).enumerate() {
        for (c, &v) in px.iter().enumerate() {
            chw[c * plane + i] = v;
        }
    }
    Ok((FrameShape { channels, height, width }, chw))
}

/// Encodes channel-first RGB bytes as PNG (the encoding LeRobot's image writer uses).
pub fn encode_png(shape: FrameShape, chw: &[u8]) -> Result<Vec<u8>, String> {
    let plane = shape.height * shape.width;
    let mut interleaved = vec![0u8; chw.len()];
    for i in 0..plane {
        for c in 0..shape.channels {
            interleaved[i * shape.channels + c] = chw[c * plane + i];
        }
    }
    let color = match shape.channels {
        1 => image::ExtendedColorType::L8,
        3 => image::ExtendedColorType::Rgb8,
        4 => image::ExtendedColorType::Rgba8,
        n => return Err(format!("cannot encode {n} channels as PNG")),
    };
    let mut out = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new(&mut out);
    image::ImageEncoder::write_image(encoder, &interleaved, shape.width as u32, shape.height as u32, color)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_round_trips_channel_first() {
        let shape = FrameShape { channels: 3, height: 2, width: 3 };
        let chw: Vec<u8> = (0..18).collect();
        let png = encode_png(shape, &chw).unwrap();
        let (back_shape, back) = decode_chw(&png).unwrap();
        assert_eq!(back_shape, shape);
        assert_eq!(back, chw);
        assert!(decode_chw(b"not an image").is_err());
    }
}
