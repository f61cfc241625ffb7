//! What the machine can do and what the process uses: memcpy bandwidth, resident memory, and a
//! one-line description of the machine for reports.

use std::time::Instant;

/// Resident set size of this process now, in bytes (Linux `/proc/self/status` `VmRSS`).
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// The fastest of `repeats` (at least one) timed runs of `run`, in seconds, after one untimed
/// run that warms up (faults the pages in, fills the caches); best-of, so that whatever else
/// the machine runs for a moment counts least.
pub fn best_seconds_after_warm_up(repeats: usize, mut run: impl FnMut()) -> f64 {
    run();
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let started = Instant::now();
        run();
        best = best.min(started.elapsed().as_secs_f64());
    }
    best
}

/// Single-thread memcpy bandwidth in bytes/s: the best of `repeats` copies of a 64 MiB buffer
/// (larger than any cache), after one warm-up copy that also faults the pages in.
pub fn memcpy_bandwidth(repeats: usize) -> f64 {
    const LEN: usize = 64 << 20;
    let src = vec![1u8; LEN];
    let mut dst = vec![0u8; LEN];
    let best = best_seconds_after_warm_up(repeats, || {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    });
    LEN as f64 / best
}

/// Bandwidth, in bytes/s, of `threads` threads at once each copying a 128 MiB buffer in pieces of
/// about a camera frame's size (512 KiB): by `copy_from_slice` (`past_caches` false) or past the
/// caches ([`bulk_copy::copy_past_caches`], as the loader copies a large batch's frames); the
/// best of `repeats` passes after a warm-up.
pub fn frame_copy_bandwidth(repeats: usize, past_caches: bool, threads: usize) -> f64 {
    const LEN: usize = 128 << 20;
    let mut buffers: Vec<(Vec<u8>, Vec<u8>)> = (0..threads.max(1)).map(|_| (vec![1; LEN], vec![0; LEN])).collect();
    let best = best_seconds_after_warm_up(repeats, || {
        std::thread::scope(|scope| {
            for (src, dst) in &mut buffers {
                scope.spawn(move || copy_in_pieces(dst, src, past_caches));
            }
        });
    });
    (buffers.len() * LEN) as f64 / best
}

/// `src` copied into `dst` 512 KiB at a time, as [`frame_copy_bandwidth`] says.
fn copy_in_pieces(dst: &mut [u8], src: &[u8], past_caches: bool) {
    const PIECE: usize = 512 << 10;
    for (to, from) in dst.chunks_mut(PIECE).zip(std::hint::black_box(src).chunks(PIECE)) {
        if past_caches {
            bulk_copy::copy_past_caches(to, from);
        } else {
            to.copy_from_slice(from);
        }
    }
    std::hint::black_box(dst);
}

/// The CPU's model name (`/proc/cpuinfo`), e.g. `AMD EPYC`.
pub fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_string()
}

/// CPU model, core count and memory, e.g. `2 x Intel Xeon ..., 23 GiB`.
pub fn machine() -> String {
    let model = cpu_model();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0);
    format!("{cores} x {model}, {} GiB", mem_kib / (1 << 20))
}

/// The current git revision, when run inside a checkout.
pub fn git_revision() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The `q`-quantile (0..=1) of `values` (sorted copy, nearest rank).
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1);
    sorted[rank]
}
