//! A pass enqueued with its algorithm, and the search that chooses it: cuDNN's timing of every
//! legacy algorithm on the real buffers, in two rounds, beside the graph API's plans.

#![expect(unsafe_code, reason = "cuDNN is a C library: raw handles, descriptors and device pointers")]

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use cudarc::cudnn::result::CudnnError;
use cudarc::cudnn::sys;

use super::algorithm::{Algorithm, SEARCH_WORKSPACE};
use super::context::ptr;
use super::counters::{GRAPH_CALLS, SECOND_ROUND_CHANGES};
use super::graph::{self, GraphUse};
use super::pass::Pass;
use super::plan::Plan;

/// Enqueues one pass with its algorithm: `[x, w]` to y, `[w, dy]` to dx, `[x, dy]` to dw.
///
/// # Safety
/// The pointers must be live device buffers as large as the plan's descriptors say.
pub(crate) unsafe fn enqueue(
    plan: &Plan,
    handle: sys::cudnnHandle_t,
    algorithm: &Algorithm,
    [a, b]: [u64; 2],
    out: u64,
    (workspace, workspace_size): (u64, usize),
) -> Result<(), String> {
    let (one, zero) = (1f32, 0f32);
    let (one, zero) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    // SAFETY: as the function says.
    unsafe {
        match *algorithm {
            Algorithm::Graph(ref graph_plan, ref legacy) => {
                return match legacy {
                    Some(legacy) if !graph_plan.takes([a, b, out]) => {
                        enqueue(plan, handle, legacy, [a, b], out, (workspace, workspace_size))
                    }
                    _ => graph_plan
                        .execute(handle, [a, b], out, workspace)
                        .inspect(|()| _ = GRAPH_CALLS.fetch_add(1, Ordering::Relaxed)),
                };
            }
            Algorithm::Output(algo, _) => sys::cudnnConvolutionForward(
                handle,
                one,
                plan.input,
                ptr(a),
                plan.weight,
                ptr(b),
                plan.convolution[Pass::Output as usize],
                algo,
                ptr(workspace),
                workspace_size,
                zero,
                plan.output,
                ptr(out),
            ),
            Algorithm::InputGrad(algo, _) => sys::cudnnConvolutionBackwardData(
                handle,
                one,
                plan.weight,
                ptr(a),
                plan.output,
                ptr(b),
                plan.convolution[Pass::InputGrad as usize],
                algo,
                ptr(workspace),
                workspace_size,
                zero,
                plan.input,
                ptr(out),
            ),
            Algorithm::WeightGrad(algo, _) => sys::cudnnConvolutionBackwardFilter(
                handle,
                one,
                plan.input,
                ptr(a),
                plan.output,
                ptr(b),
                plan.convolution[Pass::WeightGrad as usize],
                algo,
                ptr(workspace),
                workspace_size,
                zero,
                plan.weight,
                ptr(out),
            ),
        }
        .result()
        .map_err(|e| e.to_string())
    }
}

/// Times every algorithm of `pass` on the real buffers (cuDNN's search, which waits for the
/// device; twice, the second round's times choosing) and keeps the fastest that ran, with exact
/// f32 only the FMA ones, when asked only deterministic ones; sets the pass's convolution descriptor to its math. Where the graph API
/// is on ([`graph::use_graph`]), its heuristics' plans are timed too, and the fastest of all kept.
pub(crate) fn search(
    plan: &Plan,
    pass: Pass,
    (handle, stream): (sys::cudnnHandle_t, cudarc::driver::sys::CUstream),
    [a, b]: [u64; 2],
    out: u64,
    workspace: u64,
) -> Result<Searched, String> {
    let mut algorithms = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(algorithm) = &algorithms[pass as usize] {
        return Ok(Searched { algorithm: algorithm.clone(), legacy_math: None });
    }
    // cuDNN times each algorithm once, and the first launch of a kernel in a process loads its
    // module (CUDA's lazy loading) inside the timed interval: a first round runs every
    // candidate, and the second's times choose.
    let buffers = [a, b, out, workspace];
    let warm = legacy_search(plan, pass, handle, buffers);
    let found = legacy_search(plan, pass, handle, buffers);
    if let (Ok(Some((first, first_math, first_ms))), Ok(Some((second, second_math, second_ms)))) = (&warm, &found)
        && (format!("{first:?}"), first_math) != (format!("{second:?}"), second_math)
    {
        SECOND_ROUND_CHANGES.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            "cuDNN {pass:?} of {:?}: the second round chose {second:?}, {second_math:?} ({second_ms:.3} ms), the first \
             {first:?}, {first_math:?} ({first_ms:.3} ms)",
            plan.problem
        );
    }
    let legacy = match found {
        Ok(legacy) => legacy,
        Err(e) if plan.settings.graph == GraphUse::Off => return Err(format!("{pass:?} algorithm search: {e}")),
        Err(e) => {
            tracing::debug!("cuDNN's legacy search on {:?} failed ({e}): its graph API alone", plan.problem);
            None
        }
    };
    let graph = if plan.settings.graph != GraphUse::Off {
        let buffers = [a, b, out];
        let settings = [plan.settings.exact, plan.settings.deterministic];
        let workspace = (workspace, SEARCH_WORKSPACE);
        graph::fastest_plan(handle, stream, &plan.problem, pass, settings, buffers, workspace)
            .inspect_err(|why| tracing::warn!("cuDNN's graph API on {:?}: {why}", plan.problem))
            .ok()
            .flatten()
    } else {
        None
    };
    // The legacy algorithm's math on the pass's descriptor, for it or as the graph plan's
    // fallback.
    if let Some((_, math, _)) = &legacy {
        // SAFETY: the descriptor is live; no call reads it while the lock is held.
        unsafe { cudarc::cudnn::result::set_convolution_math_type(plan.convolution[pass as usize], *math) }
            .map_err(|e| format!("cudnnSetConvolutionMathType: {e}"))?;
    }
    let (algorithm, legacy_math) = match (legacy, graph) {
        (legacy, Some((graph_plan, graph_ms)))
            if plan.settings.graph == GraphUse::Only
                || legacy.as_ref().is_none_or(|(_, _, legacy_ms)| graph_ms < *legacy_ms) =>
        {
            let legacy_ms = legacy.as_ref().map(|(_, _, ms)| *ms);
            tracing::debug!(
                "cuDNN {pass:?} of {:?}: {graph_plan:?}, {graph_ms:.3} ms (legacy's best {legacy_ms:?} ms)",
                plan.problem
            );
            (Algorithm::Graph(Arc::new(graph_plan), legacy.map(|(algorithm, _, _)| Box::new(algorithm))), None)
        }
        (Some((algorithm, math, legacy_ms)), graph) => {
            let graph_ms = graph.map(|(_, ms)| ms);
            tracing::debug!(
                "cuDNN {pass:?} of {:?}: {algorithm:?}, {math:?}, {legacy_ms:.3} ms (the graph's best {graph_ms:?} ms)",
                plan.problem
            );
            (algorithm, Some(math))
        }
        (None, None) => return Err(format!("{pass:?}: no algorithm ran for {:?}", plan.problem)),
        (None, Some(_)) => unreachable!("a graph plan without a legacy algorithm is taken above"),
    };
    algorithms[pass as usize] = Some(algorithm.clone());
    Ok(Searched { algorithm, legacy_math })
}

/// The legacy API's fastest algorithm for `pass` of `plan` that the plan's settings allow, by
/// cuDNN's timing of each on the search's buffers (`[a, b, out, workspace]` as [`search`] takes
/// them), with its math and milliseconds; `None` where none ran.
pub(crate) fn legacy_search(
    plan: &Plan,
    pass: Pass,
    handle: sys::cudnnHandle_t,
    [a, b, out, workspace]: [u64; 4],
) -> Result<Option<(Algorithm, sys::cudnnMathType_t, f32)>, CudnnError> {
    let convolution = plan.convolution[pass as usize];
    let allowed = |math: sys::cudnnMathType_t, determinism: sys::cudnnDeterminism_t| {
        plan.allows(math)
            && (!plan.settings.deterministic || determinism == sys::cudnnDeterminism_t::CUDNN_DETERMINISTIC)
    };
    let ok = sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS;
    let mut count = 0;
    // One pass's search: its results' type, its cuDNN call, the algorithm's variant, and its
    // descriptors `[a, b, out]` in the call's order. Each search returns its results fastest
    // first.
    macro_rules! fastest {
        ($perf:ty, $find:path, $variant:path, [$a_desc:expr, $b_desc:expr, $out_desc:expr]) => {{
            let mut results = [std::mem::zeroed::<$perf>(); 16];
            $find(
                handle,
                $a_desc,
                ptr(a),
                $b_desc,
                ptr(b),
                convolution,
                $out_desc,
                ptr(out),
                results.len() as i32,
                &mut count,
                results.as_mut_ptr(),
                ptr(workspace),
                SEARCH_WORKSPACE,
            )
            .result()
            .map(|()| {
                results[..count as usize]
                    .iter()
                    .find(|r| r.status == ok && allowed(r.mathType, r.determinism))
                    .map(|r| ($variant(r.algo, r.memory), r.mathType, r.time))
            })
        }};
    }
    // SAFETY: the buffers are live and as large as the descriptors say; the workspace holds
    // SEARCH_WORKSPACE bytes; each results array is as long as the count asked for.
    unsafe {
        match pass {
            Pass::Output => fastest!(
                sys::cudnnConvolutionFwdAlgoPerf_t,
                sys::cudnnFindConvolutionForwardAlgorithmEx,
                Algorithm::Output,
                [plan.input, plan.weight, plan.output]
            ),
            Pass::InputGrad => fastest!(
                sys::cudnnConvolutionBwdDataAlgoPerf_t,
                sys::cudnnFindConvolutionBackwardDataAlgorithmEx,
                Algorithm::InputGrad,
                [plan.weight, plan.output, plan.input]
            ),
            Pass::WeightGrad => fastest!(
                sys::cudnnConvolutionBwdFilterAlgoPerf_t,
                sys::cudnnFindConvolutionBackwardFilterAlgorithmEx,
                Algorithm::WeightGrad,
                [plan.input, plan.output, plan.weight]
            ),
        }
    }
}

/// What a search found: the algorithm, and where it is the legacy API's, its math.
pub(crate) struct Searched {
    pub(crate) algorithm: Algorithm,
    pub(crate) legacy_math: Option<sys::cudnnMathType_t>,
}
