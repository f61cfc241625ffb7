//! Our transforms against torchvision 0.26's outputs on real PushT frames
//! (`tests/fixtures/torchvision/transforms.safetensors`, parameters in its metadata).
//! Point-wise ops must agree within 1e-5; ops that interpolate (resize, affine) or round-trip
//! through HSV (hue) within 2e-3.

use std::collections::HashMap;
use std::path::Path;

use burn::backend::Flex;
use burn::prelude::*;
use serde_json::Value;
use transforms::geometry::{self, AffineParams, Fill, Interpolation};
use transforms::{IMAGENET_MEAN, IMAGENET_STD, color, normalize_channels};

type B = Flex;

struct Fixture {
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
    params: HashMap<String, Value>,
}

fn fixture() -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/torchvision/transforms.safetensors");
    let bytes = std::fs::read(path).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let params = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| serde_json::from_str(&v).ok().map(|v| (k, v)))
        .collect();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tensors = file
        .tensors()
        .into_iter()
        .map(|(k, v)| {
            let values = v.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            (k, (v.shape().to_vec(), values))
        })
        .collect();
    Fixture { tensors, params }
}

fn input(f: &Fixture) -> Tensor<B, 4> {
    let (shape, values) = &f.tensors["input"];
    Tensor::from_data(TensorData::new(values.clone(), [shape[0], shape[1], shape[2], shape[3]]), &Default::default())
}

/// Max |ours − torchvision| for op `name`, and the count of values differing by more than 1e-6.
fn compare(f: &Fixture, name: &str, ours: Tensor<B, 4>, tolerance: f32) -> f32 {
    let (shape, expected) = &f.tensors[name];
    assert_eq!(&ours.dims().to_vec(), shape, "{name}: shape");
    let got: Vec<f32> = ours.into_data().convert::<f32>().to_vec().unwrap();
    let (mut max, mut differing) = (0f32, 0usize);
    for (a, b) in got.iter().zip(expected) {
        let d = (a - b).abs();
        max = max.max(d);
        differing += usize::from(d > 1e-6);
    }
    eprintln!("{name:<28} max |diff| {max:.3e}  ({differing} of {} values differ by more than 1e-6)", got.len());
    assert!(max <= tolerance, "{name}: max |diff| {max} > {tolerance}");
    max
}

fn factor(f: &Fixture, name: &str, key: &str) -> f32 {
    f.params[name][key].as_f64().unwrap() as f32
}

fn per_image(n: usize, v: f32) -> Tensor<B, 4> {
    color::per_image(&vec![v; n], &Default::default())
}

#[test]
fn colour_ops_match_torchvision() {
    let f = fixture();
    let x = input(&f);
    let n = x.dims()[0];
    for name in ["brightness_0.8", "brightness_1.15"] {
        compare(&f, name, color::brightness(x.clone(), per_image(n, factor(&f, name, "brightness"))), 1e-5);
    }
    for name in ["contrast_0.85", "contrast_1.2"] {
        compare(&f, name, color::contrast(x.clone(), per_image(n, factor(&f, name, "contrast"))), 1e-5);
    }
    for name in ["saturation_0.5", "saturation_1.4"] {
        compare(&f, name, color::saturation(x.clone(), per_image(n, factor(&f, name, "saturation"))), 1e-5);
    }
    for name in ["sharpness_0.5", "sharpness_1.3"] {
        compare(&f, name, color::sharpness(x.clone(), per_image(n, factor(&f, name, "sharpness"))), 1e-5);
    }
    for name in ["hue_-0.05", "hue_0.04"] {
        compare(&f, name, color::hue(x.clone(), per_image(n, factor(&f, name, "hue"))), 2e-3);
    }
    compare(&f, "normalize_imagenet", normalize_channels(x, &IMAGENET_MEAN, &IMAGENET_STD), 1e-5);
}

#[test]
fn geometric_ops_match_torchvision() {
    let f = fixture();
    let x = input(&f);
    let size = |name: &str| {
        let s = f.params[name]["size"].as_array().unwrap();
        (s[0].as_u64().unwrap() as usize, s[1].as_u64().unwrap() as usize)
    };
    compare(&f, "center_crop_84", geometry::center_crop(x.clone(), size("center_crop_84")), 0.0);
    let p = &f.params["crop_t5_l7_84"];
    let (top, left) = (p["top"].as_u64().unwrap() as usize, p["left"].as_u64().unwrap() as usize);
    let (h, w) = (p["height"].as_u64().unwrap() as usize, p["width"].as_u64().unwrap() as usize);
    compare(&f, "crop_t5_l7_84", geometry::crop(x.clone(), top, left, (h, w)), 0.0);
    // The per-sample gather gives the same window when all samples share it.
    let n = x.dims()[0];
    compare(&f, "crop_t5_l7_84", geometry::crop_per_sample(x.clone(), &vec![(top, left); n], 1, (h, w)), 0.0);
    compare(
        &f,
        "resize_112x128_noantialias",
        geometry::resize(x.clone(), size("resize_112x128_noantialias"), false),
        2e-3,
    );
    compare(&f, "resize_84x84_antialias", geometry::resize(x.clone(), size("resize_84x84_antialias"), true), 2e-3);
    for (name, interpolation) in
        [("affine_nearest", Interpolation::Nearest), ("affine_bilinear", Interpolation::Bilinear)]
    {
        let p = &f.params[name];
        let t = p["translate"].as_array().unwrap();
        let params = AffineParams {
            angle: p["angle"].as_f64().unwrap(),
            translate: (t[0].as_i64().unwrap(), t[1].as_i64().unwrap()),
        };
        compare(&f, name, geometry::affine(x.clone(), &vec![params; n], 1, interpolation, Fill::Zeros), 2e-3);
    }
}
