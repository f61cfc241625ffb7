//! Which backend a run trains on ([`device::run_on`]), where the GPU backends keep their compiled
//! kernels ([`kernel_cache`]), and the log that counts their launches ([`launches`]).

pub mod device;
pub mod kernel_cache;
pub mod launches;
