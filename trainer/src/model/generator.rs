//! Where a model's random numbers come from. burn draws a parameter's initial value lazily, on
//! its first use, from the backend's one generator per process; another thread's draw between
//! a seeding and the last parameter drawn after it changes the weights a run starts from. So
//! every draw of this crate goes through [`with_seeded_generator`], and a model built only to
//! load weights into ([`DiffusionModel::skeleton`](super::DiffusionModel::skeleton)) draws
//! nothing: burn 0.21 initialises an optional parameter (a bias) as it loads a record into it
//! (`Option::load_record` counts its parameters first), which drew from the generator.

use std::sync::{Mutex, PoisonError};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;

/// Held from a seeding to the last draw that depends on it.
static GENERATOR: Mutex<()> = Mutex::new(());

/// Seeds burn's generator for `B` with `seed` and runs `draw`, holding the generator so that no
/// other draw made through this function falls in between. Draws made elsewhere in the process
/// (`Tensor::random` outside it) are not held off: make them here too.
pub fn with_seeded_generator<B: Backend, R>(device: &B::Device, seed: u64, draw: impl FnOnce() -> R) -> R {
    let _held = GENERATOR.lock().unwrap_or_else(PoisonError::into_inner);
    B::seed(device, seed);
    draw()
}

/// Initialises every lazily initialised parameter of `module` now, in a fixed order. burn draws
/// a parameter's initial value on its first use; a copy made before that (a mixed-precision
/// cast, an EMA) would otherwise draw its own values and lose the link to the original.
pub fn materialize<B: Backend, M: Module<B>>(module: &M) {
    struct Touch;
    impl<B: Backend> ModuleVisitor<B> for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let _ = param.val();
        }
    }
    module.visit(&mut Touch);
}

/// `module` with every parameter not yet drawn made to initialise as zeros instead: the shape
/// of a model, to load weights into without drawing from the generator.
pub fn undrawn<B: Backend, M: Module<B>>(module: M) -> M {
    struct Zeros;
    impl<B: Backend> ModuleMapper<B> for Zeros {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            if param.is_initialized() {
                return param;
            }
            let (shape, device) = (param.lazy_shape(), param.lazy_device());
            let zeros = {
                let shape = shape.clone();
                move |device: &B::Device, require_grad: bool| {
                    Tensor::zeros(shape.clone(), device).set_require_grad(require_grad)
                }
            };
            // Parameters drawn by burn's initialisers require gradients.
            Param::uninitialized(param.id, zeros, device, true, shape)
        }
    }
    module.map(&mut Zeros)
}
