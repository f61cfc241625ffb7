//! LeRobot 0.6.1's model fixtures (`tests/fixtures/lerobot_model`): their descriptions, the
//! weight formula both sides compute to the bit, and state dicts written as real files.

use std::path::{Path, PathBuf};

use serde_json::Value;
use trainer::lerobot::StateDict;

/// A file of `tests/fixtures/lerobot_model` (written by its `make_fixture.py` with LeRobot 0.6.1).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/lerobot_model").join(name)
}

/// A JSON file of the fixture.
pub fn read_json(name: &str) -> Value {
    let path = fixture(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The fixture's weight formula (see `make_fixture.py`): FNV-1a of the name, splitmix64 of
/// `hash + i`, 24 random bits scaled into `offset ± scale`, in f32.
pub fn formula(name: &str, len: usize, offset: f32, scale: f32) -> Vec<f32> {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for b in name.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
    }
    (0..len as u64)
        .map(|i| {
            let mut z = hash.wrapping_add(i).wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 40) as f32 / 16_777_216.0;
            offset + scale * (2.0 * u - 1.0)
        })
        .collect()
}

/// The state dict a fixture's `weights` list describes, each tensor checked against LeRobot's
/// checksum of it.
pub fn formula_state_dict(specs: &Value) -> StateDict {
    let mut dict = StateDict::new();
    for spec in specs.as_array().unwrap() {
        let name = spec["name"].as_str().unwrap();
        let shape: Vec<usize> = serde_json::from_value(spec["shape"].clone()).unwrap();
        let values = formula(
            name,
            shape.iter().product(),
            spec["offset"].as_f64().unwrap() as f32,
            spec["scale"].as_f64().unwrap() as f32,
        );
        let sum: f64 = values.iter().map(|&v| f64::from(v)).sum();
        let theirs = spec["sum"].as_f64().unwrap();
        assert!(
            (sum - theirs).abs() <= 1e-9 * (1.0 + theirs.abs()),
            "{name}: the weight formula differs from LeRobot's"
        );
        dict.insert(name.to_string(), (shape, values));
    }
    dict
}

/// Writes `dict` as a safetensors file at `path` (f32 tensors under their names).
pub fn write_safetensors(dict: &StateDict, path: &Path) {
    let bytes: Vec<(&String, &Vec<usize>, Vec<u8>)> = dict
        .iter()
        .map(|(name, (shape, values))| (name, shape, values.iter().flat_map(|v| v.to_le_bytes()).collect()))
        .collect();
    let views = bytes.iter().map(|(name, shape, data)| {
        (name.to_string(), safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.to_vec(), data).unwrap())
    });
    safetensors::serialize_to_file(views, None, path).unwrap();
}
