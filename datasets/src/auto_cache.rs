//! The frame cache a run makes for itself: where a dataset's decoded frames go when nobody named
//! a folder, and whether they fit.
//!
//! A run with `--frame-cache auto` (the trainer's default) looks for a cache of its dataset in
//! [`default_root`]`/{fingerprint}` (the fingerprint of [`crate::frame_cache::cache_fingerprint`]:
//! a changed or rewritten dataset gets a new folder, never stale frames), reuses it when it
//! opens, and otherwise builds it there when the decoded frames fit the folder's budget, which
//! all its caches share: by default half of what the folder's filesystem has free (counting what
//! the caches there take as free), and on a memory-backed one (`/dev/shm`) also half of the
//! memory available (likewise). The least recently used caches that no process reads are removed
//! to make room, and what processes that ended left is removed first ([`store`]). When the
//! frames do not fit, the run reads the dataset's own files, as without a cache.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::frame_cache::store::{self, Removal};
use crate::frame_cache::{CacheFormat, FrameCache, cache_fingerprint, decoded_bytes};
use crate::meta::features::FrameEncoding;

/// The variable that names the folder automatic frame caches go in.
pub const FRAME_CACHE_VAR: &str = "LEROBOT_RS_FRAME_CACHE";

/// Which frames a run reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FrameCacheChoice {
    /// A cache of its own, made on first use when it fits ([`plan`]).
    #[default]
    Auto,
    /// The dataset's videos and images, decoded as they are read.
    Off,
    /// The cache in this folder (`datasets cache` makes one).
    Dir(PathBuf),
}

impl FromStr for FrameCacheChoice {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s {
            "auto" => Self::Auto,
            "off" | "none" => Self::Off,
            dir => Self::Dir(PathBuf::from(dir)),
        })
    }
}

impl fmt::Display for FrameCacheChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Off => f.write_str("off"),
            Self::Dir(dir) => write!(f, "{}", dir.display()),
        }
    }
}

impl serde::Serialize for FrameCacheChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FrameCacheChoice {
    /// `"auto"`, `"off"` or a folder; `null` (what configurations written before `auto` hold)
    /// is `auto`.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(deserializer)?;
        Ok(text.map_or(Self::Auto, |t| t.parse().expect("infallible")))
    }
}

/// Where automatic caches go, from the environment `var` gives: [`FRAME_CACHE_VAR`], else
/// `/dev/shm/lerobot-rs-frames` where `/dev/shm` exists, else `$XDG_CACHE_HOME/lerobot-rs/frames`
/// or `$HOME/.cache/lerobot-rs/frames`, else `lerobot-rs-frames` in the working folder.
pub fn default_root(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name: &str| var(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    set(FRAME_CACHE_VAR)
        .or_else(|| Path::new("/dev/shm").is_dir().then(|| PathBuf::from("/dev/shm/lerobot-rs-frames")))
        .or_else(|| crate::cache_home::user_cache_dir(&var, "frames"))
        .unwrap_or_else(|| PathBuf::from("lerobot-rs-frames"))
}

/// What an automatic cache does for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutoCache {
    /// A cache of this dataset is in `dir`: read it.
    Ready {
        /// Its folder.
        dir: PathBuf,
    },
    /// Decode the frames into `dir` first (`bytes` of them), then read them there.
    Build {
        /// Its folder.
        dir: PathBuf,
        /// What it will take.
        bytes: u64,
        /// How it stores the frames.
        format: CacheFormat,
        /// What the preferred format would have taken, when it did not fit and this one does.
        instead_of: Option<u64>,
    },
    /// The frames would not fit: read the dataset's own files.
    TooBig {
        /// What the cache would take.
        bytes: u64,
        /// What the budget leaves once every cache no process reads is removed.
        budget: u64,
        /// The budget that would fit it beside the caches in use there.
        fitting_budget: u64,
        /// What the cache would take as YUV 4:2:0 planes, when it was asked for RGB and the
        /// planes would fit the budget (video cameras of even height).
        fitting_as_yuv420: Option<u64>,
        /// Where it would have gone.
        root: PathBuf,
    },
    /// The dataset has no cameras: nothing to cache.
    NoCameras,
    /// The dataset was opened with some episodes only: a cache holds every episode's frames.
    SomeEpisodes,
}

impl fmt::Display for AutoCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gb = |b: u64| b as f64 / 1e9;
        match self {
            Self::Ready { dir } => write!(f, "frame cache: reading the decoded frames in {}", dir.display()),
            Self::Build { dir, bytes, format, instead_of } => {
                f.write_str("frame cache: ")?;
                if let Some(preferred) = instead_of {
                    write!(f, "the frames as read ({:.2} GB) are over the budget; ", gb(*preferred))?;
                }
                f.write_str("decoding every frame once")?;
                if let Some((height, width)) = format.resize {
                    write!(
                        f,
                        ", resized to the policy's resize_shape {height}x{width} (within one level of its resize on \
                         the device),"
                    )?;
                }
                if format.encoding != FrameEncoding::Rgb {
                    write!(f, " as {}", format.encoding)?;
                }
                write!(f, " into {} ({:.2} GB), then reading them from there", dir.display(), gb(*bytes))
            }
            Self::TooBig { bytes, budget, fitting_budget, fitting_as_yuv420, root } => {
                write!(
                    f,
                    "frame cache: off, the decoded frames ({:.2} GB) are over the budget (what it leaves: {:.2} GB) in \
                     {}; decoding as the samples are read. ",
                    gb(*bytes),
                    gb(*budget),
                    root.display(),
                )?;
                if let Some(planes) = fitting_as_yuv420 {
                    write!(
                        f,
                        "As YUV 4:2:0 planes (the trainer's --frame-encoding yuv420, converted on the device) they \
                         would take {:.2} GB, which fits; or a",
                        gb(*planes)
                    )?;
                } else {
                    f.write_str("A")?;
                }
                write!(
                    f,
                    " budget of {:.2} GB would fit them (--frame-cache-budget, frame_cache_budget_gb in Python) with \
                     {:.2} GB free there, or {} on a disk with room, or --frame-cache DIR (`datasets cache`)",
                    (gb(*fitting_budget) * 100.0).ceil() / 100.0,
                    gb(*bytes),
                    FRAME_CACHE_VAR
                )
            }
            Self::NoCameras => write!(f, "frame cache: off, the dataset has no cameras"),
            Self::SomeEpisodes => write!(
                f,
                "frame cache: off, the dataset was opened with some episodes only (a cache holds every \
                 episode); decoding as the samples are read"
            ),
        }
    }
}

/// What `--frame-cache auto` does for one dataset, and what was removed to get there.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Read, build or go without.
    pub cache: AutoCache,
    /// What processes that ended left, and the least recently used caches removed for room.
    pub removed: Vec<Removal>,
}

/// Decides what `--frame-cache auto` does for `dataset` with caches in `root`, given the cache
/// `formats` a run can read in its order of preference (the frames as read first): the first
/// that is cached there is read, or the first that fits `budget` (which `root`'s caches share,
/// by default [`default_budget`]) is built, or the run goes without. Removes first what ended processes left in
/// `root`, then, to make room, the least recently used caches that no process reads and that
/// are not in `keep` (the caches this run already chose).
pub fn plan(
    dataset: &Dataset,
    formats: &[CacheFormat],
    root: &Path,
    budget: Option<u64>,
    keep: &[PathBuf],
) -> Result<Plan> {
    let mut removed = store::reclaim(root)?;
    let preferred = formats.first().copied().unwrap_or_default();
    let bytes = decoded_bytes(dataset, &preferred);
    if bytes == 0 {
        return Ok(Plan { cache: AutoCache::NoCameras, removed });
    }
    if dataset.read_episodes().is_some() {
        return Ok(Plan { cache: AutoCache::SomeEpisodes, removed });
    }
    let fingerprint = cache_fingerprint(dataset)?;
    let entries = store::entries(root)?;
    let budget = match budget {
        Some(budget) => budget,
        None => default_budget(root, store::held_bytes(&entries))?,
    };
    // The first format already cached or that fits: an exact cache is never passed over for a
    // resized one made earlier.
    for format in formats {
        let dir = root.join(cache_folder_name(fingerprint, format));
        if FrameCache::open(&dir, dataset).is_ok_and(|cache| cache.holds(format)) {
            return Ok(Plan { cache: AutoCache::Ready { dir }, removed });
        }
        let needed = decoded_bytes(dataset, format);
        let mut kept = keep.to_vec();
        kept.push(dir.clone());
        // Removes nothing unless that makes room.
        let (made_room, held) = store::make_room(entries.clone(), needed, budget, &kept)?;
        removed.extend(made_room);
        if held + needed <= budget {
            let instead_of = (format != &preferred).then_some(bytes);
            return Ok(Plan { cache: AutoCache::Build { dir, bytes: needed, format: *format, instead_of }, removed });
        }
    }
    let held = store::held_bytes(&entries);
    let planes = CacheFormat::encoded(FrameEncoding::Yuv420);
    let fitting_as_yuv420 = (preferred == CacheFormat::default() && planes.check(dataset).is_ok())
        .then(|| decoded_bytes(dataset, &planes))
        .filter(|planes| held + planes <= budget);
    let cache = AutoCache::TooBig {
        bytes,
        budget: budget.saturating_sub(held),
        fitting_budget: held + bytes,
        fitting_as_yuv420,
        root: root.to_path_buf(),
    };
    Ok(Plan { cache, removed })
}

/// The folder of the automatic cache of a dataset whose [`cache_fingerprint`] is `fingerprint`,
/// stored as `format` says: the fingerprint, suffixed by any encoding but RGB and by any size
/// other than the cameras' own.
fn cache_folder_name(fingerprint: u64, format: &CacheFormat) -> String {
    let mut name = format!("{fingerprint:016x}");
    if format.encoding != FrameEncoding::Rgb {
        name += &format!("-{}", format.encoding);
    }
    if let Some((height, width)) = format.resize {
        name += &format!("-{height}x{width}");
    }
    name
}

/// Half of what `root`'s filesystem (that of its nearest existing ancestor) has free plus the
/// `held` bytes its caches take, and on a memory-backed filesystem no more than half of the
/// memory available plus `held` (`/proc/meminfo`).
pub fn default_budget(root: &Path, held: u64) -> Result<u64> {
    let existing = root.ancestors().find(|p| p.exists()).unwrap_or(Path::new("."));
    let stats = rustix::fs::statvfs(existing).map_err(|e| Error::io(existing, e.into()))?;
    let free = stats.f_bavail.saturating_mul(stats.f_frsize);
    let memory_backed = rustix::fs::statfs(existing).is_ok_and(|s| s.f_type == TMPFS_MAGIC);
    let memory = if memory_backed { memory_available().unwrap_or(u64::MAX) } else { u64::MAX };
    Ok(free.min(memory).saturating_add(held) / 2)
}

/// The line a run prints when building its automatic cache failed with `error` (a full
/// `/dev/shm`, say): it goes on decoding as it reads.
pub fn build_failed_line(error: &Error) -> String {
    let message = crate::error_message(error);
    format!("frame cache: off, building it failed ({message}); decoding as the samples are read")
}

/// `statfs`'s type of tmpfs (`/dev/shm`), from linux/magic.h.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// `MemAvailable` of `/proc/meminfo`, in bytes (`None` where it cannot be read).
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_too_big_says_which_budget_would_fit_it() {
        let cache = AutoCache::TooBig {
            bytes: 74_000_000_000,
            budget: 6_000_000_000,
            fitting_budget: 76_001_000_000,
            fitting_as_yuv420: None,
            root: "/dev/shm/lerobot-rs-frames".into(),
        };
        let line = cache.to_string();
        for part in ["(74.00 GB)", "what it leaves: 6.00 GB", "A budget of 76.01 GB", "--frame-cache-budget"] {
            assert!(line.contains(part), "{part:?} is not in {line:?}");
        }
        assert!(line.contains(FRAME_CACHE_VAR) && !line.contains('\n'), "{line}");
        let AutoCache::TooBig { budget, fitting_budget, root, .. } = cache else { unreachable!() };
        let planes = AutoCache::TooBig {
            bytes: 7_400_000_000,
            budget,
            fitting_budget,
            fitting_as_yuv420: Some(3_700_000_000),
            root,
        };
        let line = planes.to_string();
        for part in
            ["planes (the trainer's --frame-encoding yuv420", "would take 3.70 GB", "fits; or a budget of 76.01 GB"]
        {
            assert!(line.contains(part), "{part:?} is not in {line:?}");
        }
    }

    #[test]
    fn choices_read_and_print_as_written() {
        for (text, choice) in [
            ("auto", FrameCacheChoice::Auto),
            ("off", FrameCacheChoice::Off),
            ("/dev/shm/x", FrameCacheChoice::Dir("/dev/shm/x".into())),
        ] {
            assert_eq!(text.parse::<FrameCacheChoice>().unwrap(), choice);
            assert_eq!(choice.to_string(), text);
            let json = serde_json::to_string(&choice).unwrap();
            assert_eq!(serde_json::from_str::<FrameCacheChoice>(&json).unwrap(), choice);
        }
        assert_eq!(serde_json::from_str::<FrameCacheChoice>("null").unwrap(), FrameCacheChoice::Auto);
    }

    #[test]
    fn the_variable_names_the_root() {
        let var = |name: &str| (name == FRAME_CACHE_VAR).then(|| OsString::from("/k"));
        assert_eq!(default_root(var), PathBuf::from("/k"));
        let fallback = if Path::new("/dev/shm").is_dir() { "/dev/shm/lerobot-rs-frames" } else { "lerobot-rs-frames" };
        assert_eq!(default_root(|_| None), PathBuf::from(fallback));
    }

    #[test]
    fn the_default_budget_is_under_what_the_filesystem_has_free() {
        let dir = std::env::temp_dir();
        let stats = rustix::fs::statvfs(&dir).unwrap();
        let budget = default_budget(&dir.join("not/yet/made"), 0).unwrap();
        // Others may write or free space between the two readings: 64 MiB of slack.
        assert!(budget > 0 && budget <= stats.f_bavail * stats.f_frsize / 2 + (64 << 20));
    }
}
