//! The kernels one training step launches on burn's wgpu backend without fusion, counted from
//! cubecl's own launch log, against budgets: a change that launches more fails here
//! (bench/RESULTS.md, "Kernel launches per step"). `bench train-step --count-launches` gives the
//! same counts by kernel.

use burn::backend::Autodiff;
use burn::prelude::*;

use super::{Direct, counted_device, tiny_run};

/// The whole step of the tiny policy: 1,838 launches when the budget was set (the second step;
/// the first, counted until then, launched 1,844 with the parameters' initialisation); 2,260 before the
/// condition's Mish was computed once for every residual block and FiLM became a kernel forward
/// and one backward, 4,700 before GroupNorm and its activation became a kernel forward and two
/// backward.
const STEP_BUDGET: usize = 1_880;
/// The gradients' gather with their squares left as partial sums (10 launches on lavapipe: its ~30
/// bindings a kernel allow about twenty parameters a launch), which the update totals: 10, from
/// 11 when one more launch summed the squares with the clipping factors, 12 when the factors had
/// a launch of their own, 24 when the squares were summed and the factors composed by burn's
/// operations, and 245 when each parameter had launches of its own.
const CLIP_BUDGET: usize = 10;
/// The optimiser's update, with the squares' total and the clipping factors: one launch since the
/// weights are views of one buffer (bound when the runner is made), from 10 on lavapipe when
/// they were written in place a binding each, 20 when the new weights had bindings of their own
/// and 212 when each parameter had its own launches.
const OPTIM_BUDGET: usize = 1;

/// The launches of one step's phases, in order.
const PHASES: [&str; 5] = ["prepare", "forward", "backward", "clip", "optim"];

#[test]
fn a_tiny_step_on_wgpu_launches_no_more_kernels_than_its_budget() {
    // Fusion's counts come from `bench train-step --count-launches` in a build with
    // `kernels/gpu-fusion`.
    let (_alone, log, device) = counted_device();
    let (mut runner, batch) = tiny_run::tiny_runner::<Autodiff<Direct>>(&device);

    // Two steps, the second counted: the first also initialises burn's lazy parameters (their
    // random numbers) and allocates what the run keeps, once a run. The count after each phase
    // is read once the device has finished it.
    let mut counts = Vec::new();
    let mut loss = None;
    for step in 0..2 {
        counts = vec![log.settled_count()];
        let mut phase_ended = || {
            <Direct as Backend>::sync(&device).expect("the device synchronises");
            counts.push(log.settled_count());
        };
        let prepared = runner.prepare(&batch, step, 0).expect("the batch is prepared");
        phase_ended();
        let step_loss = runner.loss(&prepared);
        phase_ended();
        let grads = runner.gradients(&step_loss);
        phase_ended();
        let (grads, clipping) = runner.flatten_and_clip(grads);
        phase_ended();
        runner.update(grads, clipping, step);
        phase_ended();
        loss = Some(step_loss);
    }
    let loss = loss.expect("two steps ran");
    let launches: Vec<(&str, usize)> = PHASES.into_iter().zip(counts.windows(2).map(|w| w[1] - w[0])).collect();
    let step = counts[PHASES.len()] - counts[0];
    let count = |name: &str| launches.iter().find(|(phase, _)| *phase == name).map(|&(_, n)| n).expect(name);
    let mut by_kernel: Vec<(String, usize)> = log.by_kernel(counts[0]).into_iter().collect();
    by_kernel.sort_by_key(|(name, n)| (std::cmp::Reverse(*n), name.clone()));
    let seen = format!("{step} launches a step, of {} kernels: {launches:?}", by_kernel.len());
    eprintln!("{seen}");
    for (name, n) in &by_kernel {
        eprintln!("{n:>6}  {name}");
    }
    // Counted, not estimated: every phase of a real step launches kernels.
    for phase in ["forward", "backward", "clip", "optim"] {
        assert!(count(phase) > 0, "no launches counted for {phase}: {seen}");
    }
    assert!(loss.into_scalar().elem::<f32>().is_finite(), "the step's loss is a number");
    assert!(step <= STEP_BUDGET, "over the budget of {STEP_BUDGET}: {seen}");
    assert!(count("clip") <= CLIP_BUDGET, "clipping over its budget of {CLIP_BUDGET}: {seen}");
    assert!(count("optim") <= OPTIM_BUDGET, "the update over its budget of {OPTIM_BUDGET}: {seen}");
}
