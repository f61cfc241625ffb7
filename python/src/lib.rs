//! `lerobot_rs`: this workspace's reader and loader from Python. A [`Dataset`] returns LeRobot's
//! samples (`LeRobotDataset.__getitem__`: same keys, shapes, dtypes and values, frames to the
//! bit) as numpy arrays; a [`Loader`] returns LeRobot's collated batches from our native worker
//! pool, with the GIL released while a batch is waited for, and resumes exactly from its
//! `state_dict()`.

mod convert;
mod dataset;
mod loader;
mod memory;

use pyo3::prelude::*;

pub use convert::DatasetError;
pub use dataset::Dataset;
pub use loader::Loader;

/// The native module, re-exported by the `lerobot_rs` package.
#[pymodule]
#[pyo3(name = "_native")]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Dataset>()?;
    module.add_class::<Loader>()?;
    module.add_class::<memory::BatchMemory>()?;
    module.add("DatasetError", module.py().get_type::<DatasetError>())?;
    Ok(())
}
