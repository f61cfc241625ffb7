//! Which backend a run trains on ([`device::run_on`]), where the GPU backends keep their compiled
//! kernels ([`kernel_cache`]), the log that counts their launches ([`launches`]), the count of
//! what the host asks of them ([`traffic`]) and the constants kept on each device
//! ([`constants`]).

pub mod constants;
pub mod device;
pub mod kernel_cache;
pub mod launches;
pub mod traffic;
