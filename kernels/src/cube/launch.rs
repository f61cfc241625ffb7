//! How a launch is shaped: how many parameters it takes, its grid over them, and the cubes
//! that stride over a range.

use burn_cubecl::CubeRuntime;
use cubecl::CubeDim;
use cubecl::prelude::*;

/// The most parameters one launch of the gather (or of the update of weights held tensor by
/// tensor) takes, unless [`PARTS_PER_LAUNCH_VAR`] says otherwise: the kernel is unrolled over
/// them, and each is a binding or two. 71 gathers PushT's 212 gradients in three launches, so
/// that its clipping and update take four. Not many more: unrolled over all of PushT's
/// parameters at once, the gather and the update did not finish compiling in 100 s on an H200
/// (bench/RESULTS.md, "Seventh contact"); 64 compiled in every contact, and 71, 11% more code, is
/// yet to be timed on a GPU.
pub const MAX_PARTS_PER_LAUNCH: usize = 71;

/// The variable that sets how many parameters a launch takes at most, 1 to
/// [`PARTS_PER_LAUNCH_LIMIT`], in place of [`MAX_PARTS_PER_LAUNCH`]: so that a GPU machine, which
/// has no compiler for a new build, can time the compilation of other widths (PushT's 212
/// gradients gather in four launches at 64, in two at 106), and a user whose first step compiles
/// too long can narrow it.
pub const PARTS_PER_LAUNCH_VAR: &str = "LEROBOT_RS_PARTS_PER_LAUNCH";

/// The widest [`PARTS_PER_LAUNCH_VAR`] taken. On CUDA each part adds about 36 bytes to a
/// kernel's parameters (its pointer, lengths, shape and strides, its place), whose limit is
/// 32,764 bytes: about 900 parts. 512 keeps well under it, though a gather that wide is known to
/// compile too slowly (it had not finished after 100 s on an H200, bench/RESULTS.md, "Seventh
/// contact").
pub const PARTS_PER_LAUNCH_LIMIT: usize = 512;

/// The parameters a launch takes at most: [`PARTS_PER_LAUNCH_VAR`] where it is set to a number
/// from 1 to [`PARTS_PER_LAUNCH_LIMIT`] (read once), else [`MAX_PARTS_PER_LAUNCH`].
pub(crate) fn parts_per_launch() -> usize {
    static PARTS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PARTS.get_or_init(|| {
        let Ok(text) = std::env::var(PARTS_PER_LAUNCH_VAR) else { return MAX_PARTS_PER_LAUNCH };
        match text.parse::<usize>() {
            Ok(parts @ 1..=PARTS_PER_LAUNCH_LIMIT) => parts,
            _ => {
                tracing::warn!(
                    "{PARTS_PER_LAUNCH_VAR}={text:?} is not from 1 to {PARTS_PER_LAUNCH_LIMIT}: {MAX_PARTS_PER_LAUNCH}"
                );
                MAX_PARTS_PER_LAUNCH
            }
        }
    })
}

/// Cubes for a launch whose units stride over `n` items: one unit each, up to the grid's
/// 65,535 cubes along one axis.
pub(crate) fn striding_cubes(n: usize) -> CubeCount {
    CubeCount::new_1d(n.div_ceil(UNITS_PER_CUBE as usize).clamp(1, u16::MAX as usize) as u32)
}

/// The most parameters a launch takes: [`parts_per_launch`], fewer where the device binds fewer
/// buffers to a kernel (`bindings_per_part` each, beside the flat buffers, the scale, the step's
/// scalars and cubecl's metadata).
pub(crate) fn launch_width<R: CubeRuntime>(client: &ComputeClient<R>, bindings_per_part: usize) -> usize {
    let bindings = client.properties().hardware.max_bindings as usize;
    (bindings.saturating_sub(8) / bindings_per_part).clamp(1, parts_per_launch())
}

/// The most cubes a part's row has; beyond them, each unit strides over several elements.
pub(crate) const MAX_CUBES_PER_PART: usize = 1024;

/// The most partial squares every cube of the views' update totals itself
/// ([`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping)): 64 loads a unit at most. A gather of PushT leaves a
/// few thousand (three launches of up to 1,024 cubes); narrowed to a few parameters a launch, it
/// can leave far more, and the factors are then computed apart first.
pub(crate) const MAX_PARTIALS_IN_UPDATE: usize = 16_384;

/// Units in a cube, all along x.
pub(crate) const UNITS_PER_CUBE: u32 = 256;

/// A launch's grid over parts of `lens` elements: one row of cubes per part, as many as the
/// longest needs at one element per unit, at most [`MAX_CUBES_PER_PART`].
pub(crate) fn grid(lens: &[usize]) -> (CubeCount, CubeDim) {
    // One row of units (the kernels stride along x alone).
    let cube_dim = CubeDim::new_1d(UNITS_PER_CUBE);
    (CubeCount::new_2d(cubes_per_row(lens) as u32, lens.len() as u32), cube_dim)
}

/// The cubes of each row of [`grid`]`(lens)`.
pub(crate) fn cubes_per_row(lens: &[usize]) -> usize {
    let longest = lens.iter().copied().max().unwrap_or(1).max(1);
    longest.div_ceil(UNITS_PER_CUBE as usize).clamp(1, MAX_CUBES_PER_PART)
}
