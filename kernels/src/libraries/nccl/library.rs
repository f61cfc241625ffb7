//! Finding NCCL 2 at run time, once per process, and the entry points the trainer calls.
//!
//! cudarc's NCCL bindings open the library by names that miss `libnccl.so.2`, the only one pip's
//! `nvidia-nccl-cu13` wheel (what PyTorch installs) ships, and panic where none loads; so the
//! library is found and its symbols resolved here: from `LEROBOT_RS_NCCL_DIR`, by name
//! (`LD_LIBRARY_PATH`, the system's library cache), then in the Python environments' wheels.
//! Results and enumerations cross as C `int`s: a value the bindings do not know (a newer NCCL's)
//! stays a number to report, never an invalid Rust enum.

#![expect(unsafe_code, reason = "opening a shared library runs its initialisers; its symbols are C functions")]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// NCCL's `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct RawUniqueId {
    pub(super) internal: [u8; 128],
}

/// NCCL's `ncclComm_t`.
pub(super) type RawComm = *mut c_void;

/// `ncclSuccess`.
pub(super) const SUCCESS: c_int = 0;
/// `ncclInProgress` (a non-blocking communicator's call still running).
pub(super) const IN_PROGRESS: c_int = 7;
/// `ncclSum`.
pub(super) const SUM: c_int = 0;

/// The oldest NCCL taken: 2.14 (2022) has every call used here (`ncclGetLastError` came in
/// 2.13), and its `ncclCommDestroy` flushes the communicator's own calls first.
const OLDEST: c_int = 21400;

/// NCCL's entry points, resolved from the library this process opened (kept open for its life).
pub(super) struct Nccl {
    /// `NCCL_VERSION_CODE` of the library: `major·10000 + minor·100 + patch`.
    pub(super) version: c_int,
    /// Where the library was opened from (a path, or the name the loader found).
    pub(super) origin: String,
    pub(super) get_unique_id: unsafe extern "C" fn(*mut RawUniqueId) -> c_int,
    pub(super) comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int) -> c_int,
    pub(super) all_reduce:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, *mut c_void) -> c_int,
    pub(super) broadcast:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, *mut c_void) -> c_int,
    pub(super) comm_get_async_error: unsafe extern "C" fn(RawComm, *mut c_int) -> c_int,
    pub(super) comm_abort: unsafe extern "C" fn(RawComm) -> c_int,
    pub(super) comm_destroy: unsafe extern "C" fn(RawComm) -> c_int,
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    get_last_error: unsafe extern "C" fn(RawComm) -> *const c_char,
    _library: libloading::Library,
}

impl Nccl {
    /// NCCL's version as `major.minor.patch`.
    pub(super) fn version_text(&self) -> String {
        let v = self.version;
        format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
    }

    /// What `result` of a call means, with NCCL's last message for `comm` (null: none yet).
    pub(super) fn describe(&self, result: c_int, comm: RawComm) -> String {
        // SAFETY: both return NCCL's own static or per-communicator strings (or null), and
        // accept any result code and a null or live communicator.
        let (name, last) = unsafe { ((self.get_error_string)(result), (self.get_last_error)(comm)) };
        let text = |p: *const c_char| {
            // SAFETY: a non-null pointer from NCCL is a NUL-terminated string it keeps alive.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().trim().to_string())
        };
        match (text(name), text(last).filter(|l| !l.is_empty())) {
            (Some(name), Some(last)) => format!("{name} (NCCL error {result}): {last}"),
            (Some(name), None) => format!("{name} (NCCL error {result})"),
            (None, _) => format!("NCCL error {result}"),
        }
    }
}

/// The NCCL this process reduces with, or why there is none (said once, by the caller).
pub(super) fn status() -> &'static Result<Nccl, String> {
    static STATUS: OnceLock<Result<Nccl, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        if switched_off() {
            return Err("NCCL is off (LEROBOT_RS_NCCL)".into());
        }
        let named = std::env::var_os("LEROBOT_RS_NCCL_DIR").map(PathBuf::from);
        let wheels = crate::libraries::wheels::site_packages().into_iter().map(|p| p.join("nvidia/nccl/lib"));
        open_first(named.as_deref(), wheels)
    })
}

/// Whether `LEROBOT_RS_NCCL` turns NCCL off (`0`, `off` or `false`).
fn switched_off() -> bool {
    std::env::var("LEROBOT_RS_NCCL").is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "0" | "off" | "false"))
}

/// The library's names: pip's wheel and most distributions ship the first, CUDA's own packages
/// also the second.
const NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// Opens NCCL from `named` (a directory the user gave: only there), else by name, else from the
/// first of `wheel_dirs` that holds it; an error says where it looked and how to install it.
pub(super) fn open_first(named: Option<&Path>, wheel_dirs: impl Iterator<Item = PathBuf>) -> Result<Nccl, String> {
    if let Some(dir) = named {
        let path = dir.join(NAMES[0]);
        if !path.is_file() {
            return Err(format!("NCCL not found: LEROBOT_RS_NCCL_DIR={} holds no {}", dir.display(), NAMES[0]));
        }
        return open(path.as_os_str(), &path.display().to_string());
    }
    for name in NAMES {
        if let Ok(nccl) = open(name.as_ref(), name) {
            return Ok(nccl);
        }
    }
    let mut looked = Vec::new();
    for dir in wheel_dirs {
        let path = dir.join(NAMES[0]);
        if path.is_file() {
            return open(path.as_os_str(), &path.display().to_string());
        }
        looked.push(dir.display().to_string());
    }
    Err(format!(
        "NCCL 2 not found ({} by name, nor in {}): install it with `pip install nvidia-nccl-cu13` (PyTorch's CUDA \
         wheels bring it), or put its lib directory in LD_LIBRARY_PATH or LEROBOT_RS_NCCL_DIR",
        NAMES[0],
        if looked.is_empty() { "any Python environment".to_string() } else { looked.join(", ") }
    ))
}

/// Opens the library at `file` (a path or a name) and resolves its entry points.
fn open(file: &std::ffi::OsStr, origin: &str) -> Result<Nccl, String> {
    // SAFETY: opening NCCL runs its initialisers, which are sound to run in any process.
    let library = unsafe { libloading::Library::new(file) }.map_err(|e| format!("could not load {origin}: {e}"))?;
    macro_rules! symbol {
        ($name:literal) => {
            // SAFETY: the symbol is NCCL's C function of that name, whose signature the field
            // it is stored in states (nccl.h, stable since 2.14).
            *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("{origin} is not NCCL 2.14 or later: {} is missing ({e})", $name))?
        };
    }
    let get_version: unsafe extern "C" fn(*mut c_int) -> c_int = symbol!("ncclGetVersion");
    let mut version = 0;
    // SAFETY: `ncclGetVersion` writes one int.
    let result = unsafe { get_version(&mut version) };
    if result != SUCCESS || version < OLDEST {
        return Err(format!("{origin} is NCCL {version} (code {result}): NCCL 2.14 or later needed"));
    }
    Ok(Nccl {
        version,
        origin: origin.to_string(),
        get_unique_id: symbol!("ncclGetUniqueId"),
        comm_init_rank: symbol!("ncclCommInitRank"),
        all_reduce: symbol!("ncclAllReduce"),
        broadcast: symbol!("ncclBroadcast"),
        comm_get_async_error: symbol!("ncclCommGetAsyncError"),
        comm_abort: symbol!("ncclCommAbort"),
        comm_destroy: symbol!("ncclCommDestroy"),
        get_error_string: symbol!("ncclGetErrorString"),
        get_last_error: symbol!("ncclGetLastError"),
        _library: library,
    })
}
