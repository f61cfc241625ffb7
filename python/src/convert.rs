//! From the workspace's types to Python's: tensors to numpy arrays (the values moved, not
//! copied), JSON to Python objects, errors to [`DatasetError`] with the whole chain of causes
//! (the file and the field included).

use numpy::IntoPyArray;
use numpy::ndarray::{ArrayD, IxDyn};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use datasets::{Tensor, Values};

create_exception!(
    lerobot_rs,
    DatasetError,
    PyException,
    "A dataset that cannot be read: the message names the file and the field."
);

/// A workspace error as a [`DatasetError`], its causes included.
pub fn dataset_error(error: &(dyn std::error::Error + 'static)) -> PyErr {
    DatasetError::new_err(datasets::error_message(error))
}

/// A tensor as a numpy array of its shape and dtype (the values are moved into it).
pub fn tensor_to_numpy<'py>(py: Python<'py>, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let shape = IxDyn(&tensor.shape);
    let array = match tensor.values {
        Values::F32(v) => ArrayD::from_shape_vec(shape, v).map(|a| a.into_pyarray(py).into_any()),
        Values::U8(v) => ArrayD::from_shape_vec(shape, v).map(|a| a.into_pyarray(py).into_any()),
        Values::I64(v) => ArrayD::from_shape_vec(shape, v).map(|a| a.into_pyarray(py).into_any()),
        Values::Bool(v) => ArrayD::from_shape_vec(shape, v).map(|a| a.into_pyarray(py).into_any()),
    };
    array.map_err(|e| DatasetError::new_err(format!("a tensor's shape does not match its values: {e}")))
}

/// float64 values of `shape` as a numpy array (statistics, as LeRobot loads them).
pub fn f64_to_numpy<'py>(py: Python<'py>, shape: &[usize], values: Vec<f64>) -> PyResult<Bound<'py, PyAny>> {
    ArrayD::from_shape_vec(IxDyn(shape), values)
        .map(|a| a.into_pyarray(py).into_any())
        .map_err(|e| DatasetError::new_err(format!("statistics of shape {shape:?}: {e}")))
}

/// A JSON value as the Python object `json.loads` would make.
pub fn json_to_python<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| DatasetError::new_err(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// Turns the numpy arrays of `item` into torch tensors sharing their memory (`torch.from_numpy`),
/// pinned for fast copies to a CUDA device when `pin_memory` is set.
pub fn numpy_to_torch(py: Python<'_>, item: &Bound<'_, PyDict>, pin_memory: bool) -> PyResult<()> {
    let torch = py.import("torch")?;
    let from_numpy = torch.getattr("from_numpy")?;
    for (key, value) in item.iter() {
        if value.is_instance_of::<numpy::PyUntypedArray>() {
            let mut tensor = from_numpy.call1((value,))?;
            if pin_memory {
                tensor = tensor.call_method0("pin_memory")?;
            }
            item.set_item(key, tensor)?;
        }
    }
    Ok(())
}

/// How frames are returned: `"float32"` in [0, 1] (LeRobot's default) or `"uint8"`.
pub fn frame_format(name: &str) -> PyResult<datasets::FrameFormat> {
    match name {
        "float32" => Ok(datasets::FrameFormat::Float),
        "uint8" => Ok(datasets::FrameFormat::Uint8),
        other => {
            Err(pyo3::exceptions::PyValueError::new_err(format!("frames={other:?}: expected \"float32\" or \"uint8\"")))
        }
    }
}
