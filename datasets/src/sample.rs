//! Samples as LeRobot's `__getitem__` returns them (a map of named tensors plus the task
//! string), their collation into a batch, and the safetensors file `datasets sample` writes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::error::{Error, Result};

/// The element values of a tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// float32 (vectors, scalars, camera frames in [0, 1]).
    F32(Vec<f32>),
    /// uint8 (raw camera frames).
    U8(Vec<u8>),
    /// int64 (indices).
    I64(Vec<i64>),
    /// bool (pad masks, boolean features).
    Bool(Vec<bool>),
}

impl Values {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::U8(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dtype's name, as torch prints it.
    pub fn dtype_name(&self) -> &'static str {
        match self {
            Values::F32(_) => "float32",
            Values::U8(_) => "uint8",
            Values::I64(_) => "int64",
            Values::Bool(_) => "bool",
        }
    }

    fn extend(&mut self, other: &Values) -> bool {
        match (self, other) {
            (Values::F32(a), Values::F32(b)) => a.extend_from_slice(b),
            (Values::U8(a), Values::U8(b)) => a.extend_from_slice(b),
            (Values::I64(a), Values::I64(b)) => a.extend_from_slice(b),
            (Values::Bool(a), Values::Bool(b)) => a.extend_from_slice(b),
            _ => return false,
        }
        true
    }
}

/// A dense, row-major tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Its shape (`[]` for a 0-dimensional scalar).
    pub shape: Vec<usize>,
    /// Its values.
    pub values: Values,
}

impl Tensor {
    /// A tensor; the number of values must match the shape.
    pub fn new(shape: Vec<usize>, values: Values) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len(), "shape {shape:?}");
        Self { shape, values }
    }
}

/// One sample: LeRobot's keys (every parquet column, every video key, `{key}_is_pad` for each
/// windowed key) and the task string.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The tensors by key.
    pub tensors: BTreeMap<String, Tensor>,
    /// `task`: the string of the frame's `task_index`.
    pub task: String,
}

/// Samples stacked along a new leading batch dimension, as torch's `default_collate` does.
#[derive(Debug, Clone, PartialEq)]
pub struct CollatedBatch {
    /// The stacked tensors by key.
    pub tensors: BTreeMap<String, Tensor>,
    /// The task of each sample.
    pub tasks: Vec<String>,
}

impl CollatedBatch {
    /// Stacks `samples`, which must have the same keys, shapes and dtypes.
    pub fn collate(samples: &[Sample]) -> Result<Self> {
        let first = samples.first().ok_or_else(|| Error::request("cannot collate zero samples"))?;
        let mut tensors = BTreeMap::new();
        for (key, t0) in &first.tensors {
            let mut shape = vec![samples.len()];
            shape.extend_from_slice(&t0.shape);
            let mut values = match &t0.values {
                Values::F32(_) => Values::F32(Vec::new()),
                Values::U8(_) => Values::U8(Vec::new()),
                Values::I64(_) => Values::I64(Vec::new()),
                Values::Bool(_) => Values::Bool(Vec::new()),
            };
            for (i, sample) in samples.iter().enumerate() {
                let t = sample.tensors.get(key).ok_or_else(|| Error::request(format!("sample {i} lacks `{key}`")))?;
                if t.shape != t0.shape || !values.extend(&t.values) {
                    return Err(Error::request(format!("sample {i}: `{key}` differs in shape or dtype from sample 0")));
                }
            }
            tensors.insert(key.clone(), Tensor { shape, values });
        }
        Ok(Self { tensors, tasks: samples.iter().map(|s| s.task.clone()).collect() })
    }

    /// Writes the batch as safetensors, with `task` (a JSON list of the task strings) and any
    /// `extra` entries in the file's metadata. Written to a temporary file, then renamed.
    pub fn write_safetensors(&self, path: &Path, extra: &BTreeMap<String, String>) -> Result<()> {
        let mut metadata: HashMap<String, String> = extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        metadata.insert("task".into(), serde_json::to_string(&self.tasks).expect("strings serialise"));
        let views: Vec<(&str, TensorView<'_>)> =
            self.tensors.iter().map(|(k, t)| (k.as_str(), TensorView(t))).collect();
        let tmp = path.with_extension("safetensors.tmp");
        safetensors::serialize_to_file(views, Some(metadata), &tmp)
            .map_err(|e| Error::io(&tmp, std::io::Error::other(e.to_string())))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    }
}

/// A [`Tensor`] seen through safetensors' `View`.
struct TensorView<'a>(&'a Tensor);

impl safetensors::View for TensorView<'_> {
    fn dtype(&self) -> safetensors::Dtype {
        match self.0.values {
            Values::F32(_) => safetensors::Dtype::F32,
            Values::U8(_) => safetensors::Dtype::U8,
            Values::I64(_) => safetensors::Dtype::I64,
            Values::Bool(_) => safetensors::Dtype::BOOL,
        }
    }

    fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        match &self.0.values {
            Values::F32(v) => Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Values::U8(v) => Cow::Borrowed(v),
            Values::I64(v) => Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            Values::Bool(v) => Cow::Owned(v.iter().map(|&b| u8::from(b)).collect()),
        }
    }

    fn data_len(&self) -> usize {
        let n = self.0.values.len();
        match self.0.values {
            Values::F32(_) => 4 * n,
            Values::U8(_) | Values::Bool(_) => n,
            Values::I64(_) => 8 * n,
        }
    }
}
