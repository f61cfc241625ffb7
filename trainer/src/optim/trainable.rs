//! A model's trainable parameters, walked in visiting order without BatchNorm's running
//! statistics (copied, never trained): the one walk the flat layout, the gathers and the update
//! share, so that they cannot disagree on which parameters count or in which order.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;

/// Reads each trainable parameter, with its index among them.
pub(super) trait VisitTrainable<B: Backend> {
    /// The `index`-th trainable parameter.
    fn visit<const D: usize>(&mut self, index: usize, param: &Param<Tensor<B, D>>);
}

/// Replaces each trainable parameter, with its index among them.
pub(super) trait MapTrainable<B: Backend> {
    /// The `index`-th trainable parameter, mapped.
    fn map<const D: usize>(&mut self, index: usize, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>>;
}

/// Visits `model`'s trainable parameters with `inner`, and gives it back.
pub(super) fn visit_trainable<B: Backend, M: Module<B>, T: VisitTrainable<B>>(model: &M, inner: T) -> T {
    let mut walk = Walk { inner, path: Vec::new(), index: 0 };
    model.visit(&mut walk);
    walk.inner
}

/// Maps `model`'s trainable parameters with `inner` (the rest unchanged), and gives it back.
pub(super) fn map_trainable<B: Backend, M: Module<B>, T: MapTrainable<B>>(model: M, inner: T) -> (M, T) {
    let mut walk = Walk { inner, path: Vec::new(), index: 0 };
    let model = model.map(&mut walk);
    (model, walk.inner)
}

/// Whether the parameter at `path` is one of BatchNorm's running statistics.
fn is_running_statistic(path: &[String]) -> bool {
    matches!(path.last().map(String::as_str), Some("running_mean" | "running_var"))
}

/// The walk: the path to the current module, and the trainable parameters met so far.
struct Walk<T> {
    inner: T,
    path: Vec<String>,
    index: usize,
}

impl<T> Walk<T> {
    /// The next trainable parameter's index, or `None` for a running statistic.
    fn next_trainable(&mut self) -> Option<usize> {
        if is_running_statistic(&self.path) {
            return None;
        }
        self.index += 1;
        Some(self.index - 1)
    }
}

impl<B: Backend, T: VisitTrainable<B>> ModuleVisitor<B> for Walk<T> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(index) = self.next_trainable() {
            self.inner.visit(index, param);
        }
    }
}

impl<B: Backend, T: MapTrainable<B>> ModuleMapper<B> for Walk<T> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        match self.next_trainable() {
            Some(index) => self.inner.map(index, param),
            None => param,
        }
    }
}
