//! The algorithms earlier runs on this GPU model and cuDNN chose ([`super::kept`]): looked up
//! before a search, distrusted where they fail, and kept after one.

#![expect(unsafe_code, reason = "cuDNN is a C library: a kept choice's math is set on its descriptor")]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::cudnn::sys;

use super::algorithm::Algorithm;
use super::counters::EARLIER_RUNS_CHOICES;
use super::graph::GraphUse;
use super::kept::{KEPT_ALGORITHMS_FILE, KeptAlgorithms};
use super::library;
use super::pass::Pass;
use super::plan::{Plan, Settings};

/// The algorithms earlier runs chose, kept beside the compiled kernels; none where those are
/// not kept.
pub(crate) fn kept_algorithms() -> Option<&'static KeptAlgorithms> {
    static KEPT: OnceLock<Option<KeptAlgorithms>> = OnceLock::new();
    KEPT.get_or_init(|| {
        crate::kernel_cache::configure().map(|folder| KeptAlgorithms::load(folder.join(KEPT_ALGORITHMS_FILE)))
    })
    .as_ref()
}

/// What the legacy algorithm of `pass` of `plan` on `device` is kept under: the GPU's model,
/// cuDNN's version, the problem, the search's constraints and the pass. None where the graph
/// API takes part in the search (its plans are not kept) or the GPU cannot be named.
pub(crate) fn kept_key(plan: &Plan, pass: Pass, device: usize) -> Option<String> {
    if plan.settings.graph != GraphUse::Off {
        return None;
    }
    let version = library::status().as_ref().ok()?;
    let gpu = cudarc::driver::result::device::get(device as std::ffi::c_int)
        .and_then(cudarc::driver::result::device::get_name)
        .ok()?;
    let Settings { exact, deterministic, .. } = plan.settings;
    Some(format!(
        "{gpu} | cuDNN {version} | {:?} | exact f32 {exact}, deterministic {deterministic} | {pass:?}",
        plan.problem
    ))
}

/// The algorithm an earlier run chose for `pass` of `plan`, if one is kept and the plan's
/// settings allow its math: set on the pass's convolution descriptor with its math, and taken
/// for the rest of the run.
pub(crate) fn earlier_runs_choice(plan: &Plan, pass: Pass, device: usize) -> Option<Algorithm> {
    if plan.earlier_run_failed[pass as usize].load(Ordering::Relaxed) {
        return None;
    }
    let key = kept_key(plan, pass, device)?;
    let kept = kept_algorithms()?.get(&key)?;
    let Some((algorithm, math)) = Algorithm::from_kept(pass, &kept).filter(|(_, math)| plan.allows(*math)) else {
        tracing::warn!("cuDNN: the kept {kept:?} is not one this build takes for {pass:?}: searching again");
        return None;
    };
    let mut algorithms = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = &algorithms[pass as usize] {
        return Some(found.clone());
    }
    // SAFETY: the descriptor is live; no call reads it while the lock is held.
    unsafe { cudarc::cudnn::result::set_convolution_math_type(plan.convolution[pass as usize], math) }
        .inspect_err(|e| tracing::warn!("cudnnSetConvolutionMathType: {e}: searching again"))
        .ok()?;
    tracing::debug!("cuDNN {pass:?} of {:?}: {algorithm:?}, {math:?}, kept", plan.problem);
    algorithms[pass as usize] = Some(algorithm.clone());
    plan.from_earlier_run[pass as usize].store(true, Ordering::Relaxed);
    EARLIER_RUNS_CHOICES.fetch_add(1, Ordering::Relaxed);
    Some(algorithm)
}

/// After a failed call: where `pass` ran an earlier run's algorithm, it is taken out of the
/// file and the pass's next call searches (its choice then kept instead); this call takes burn's
/// operation.
pub(crate) fn distrust_earlier_run(plan: &Plan, pass: Pass, device: usize) {
    let mut algorithms = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if plan.from_earlier_run[pass as usize].swap(false, Ordering::Relaxed) {
        tracing::warn!("cuDNN: an earlier run's algorithm for {pass:?} of {:?} failed: searching again", plan.problem);
        plan.earlier_run_failed[pass as usize].store(true, Ordering::Relaxed);
        algorithms[pass as usize] = None;
        if let (Some(key), Some(kept_algorithms)) = (kept_key(plan, pass, device), kept_algorithms()) {
            _ = kept_algorithms.forget(&key).inspect_err(|why| tracing::warn!("cuDNN: {why}"));
        }
    }
}

/// Keeps the legacy algorithm the search found for `pass` of `plan`, of `math`, for later runs;
/// a file that cannot be written is said once.
pub(crate) fn keep(plan: &Plan, pass: Pass, device: usize, algorithm: &Algorithm, math: sys::cudnnMathType_t) {
    let (Some(key), Some(kept_algorithms)) = (kept_key(plan, pass, device), kept_algorithms()) else { return };
    let Some(kept) = algorithm.to_kept(math) else { return };
    if let Err(why) = kept_algorithms.keep(key, kept) {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            tracing::warn!("cuDNN's algorithms not kept for later runs: {why}");
        }
    }
}
