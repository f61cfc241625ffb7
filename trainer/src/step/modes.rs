//! How a runner runs its steps on the device ([`StepMode`]), and what it keeps for the fed and
//! captured ones ([`FedSteps`]): the buffers, the graph, where they stand ([`GraphStatus`]).
//! The steps themselves are `graph.rs`'s.

use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use kernels::{CapturedGraph, GraphNodes, HostTraffic};

use crate::error::{Error, Result};
use crate::uploads::Slots;

/// How `StepRunner::step` runs a step on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepMode {
    /// Each operation launched as the step asks for it, its values uploaded into new buffers.
    #[default]
    Eager,
    /// The step's values from the host written into buffers kept between steps, which its
    /// work reads: what a captured step replays, run without capturing it (to check it against
    /// the eager step).
    DeviceFed,
    /// Fed, and after `warmup` fed steps one step's work captured as a CUDA graph that every
    /// step after replays (burn's cuda backend; elsewhere fed, saying why).
    Captured {
        /// Fed steps before the capture: they compile the kernels, search cuDNN's algorithms
        /// and settle fusion's plans, which a recording may not do.
        warmup: usize,
    },
}

impl StepMode {
    /// The environment variable that chooses the mode of a run: `1` captures the step as a CUDA
    /// graph, `fed` feeds it without capturing, `0` or unset runs it eagerly.
    pub const VAR: &'static str = "LEROBOT_RS_CUDA_GRAPH";

    /// Fed steps before the capture where [`StepMode::VAR`] asks for one.
    pub const DEFAULT_WARMUP: usize = 3;

    /// The mode [`StepMode::VAR`] asks for; an error naming the variable for any other value.
    pub fn from_env() -> Result<Self> {
        Self::parse(std::env::var(Self::VAR).ok().as_deref())
    }

    /// The mode a value of [`StepMode::VAR`] asks for (`None`: unset).
    fn parse(value: Option<&str>) -> Result<Self> {
        match value {
            None | Some("" | "0") => Ok(Self::Eager),
            Some("1") => Ok(Self::Captured { warmup: Self::DEFAULT_WARMUP }),
            Some("fed") => Ok(Self::DeviceFed),
            Some(other) => Err(Error::Config(format!(
                "{}={other}: expected 1 (the step captured as a CUDA graph), fed (the step fed from kept buffers, \
                 not captured) or 0 (eager)",
                Self::VAR
            ))),
        }
    }
}

/// Where a runner's fed and captured steps stand (`StepRunner::graph_status`).
#[derive(Debug, Clone, Default)]
pub struct GraphStatus {
    /// The mode asked for.
    pub mode: StepMode,
    /// Why steps run eagerly although the mode asks otherwise (the configuration or the
    /// backend cannot feed them).
    pub refused: Option<String>,
    /// Why the step was not captured, where a capture was asked for: it runs fed.
    pub capture_refused: Option<String>,
    /// The captured graph's nodes, while one is replayed.
    pub nodes: Option<GraphNodes>,
    /// Steps fed from the kept buffers, captured or not.
    pub fed_steps: usize,
    /// Steps run by replaying the graph.
    pub replays: usize,
    /// Steps run eagerly because their batch was not the size of the kept buffers' (the last
    /// of an epoch): each drops the graph, captured again after the warm-up.
    pub odd_batches: usize,
    /// The buffers kept: one per value a step writes.
    pub slots: usize,
    /// What the last uncaptured fed step's work asked of the device from the host once its
    /// values were written: nothing, for work that can be captured (counted where the build has
    /// a cubecl backend).
    pub work_traffic: Option<HostTraffic>,
}

/// The captured step: the graph and the buffers its replays write the loss and the norm into.
pub(super) struct CapturedStep<B: Backend> {
    pub(super) graph: CapturedGraph,
    pub(super) loss: Tensor<B, 1>,
    pub(super) grad_norm: Tensor<B, 1>,
}

/// A runner's fed steps: the kept buffers, the captured graph, what they did.
pub(super) struct FedSteps<B: AutodiffBackend<InnerBackend: kernels::Kernels> + kernels::Kernels> {
    pub(super) status: GraphStatus,
    /// The kept buffers, and the batch size they hold.
    pub(super) slots: Option<(usize, Slots<B>)>,
    pub(super) captured: Option<CapturedStep<B::InnerBackend>>,
    /// Fed steps since the graph was last dropped (or the buffers made).
    pub(super) since_drop: usize,
}

impl<B: AutodiffBackend<InnerBackend: kernels::Kernels> + kernels::Kernels> FedSteps<B> {
    /// Steps in `mode`, nothing kept yet.
    pub(super) fn new(mode: StepMode) -> Self {
        Self { status: GraphStatus { mode, ..GraphStatus::default() }, slots: None, captured: None, since_drop: 0 }
    }

    /// The graph released, before an eager step writes the state: that write copies a buffer it
    /// finds shared, and the graph would go on writing the old one.
    pub(super) fn drop_graph(&mut self) {
        if self.captured.is_none() {
            return;
        }
        self.captured = None;
        self.status.nodes = None;
        self.since_drop = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_chooses_the_mode_and_names_itself_when_wrong() {
        assert_eq!(StepMode::parse(None).unwrap(), StepMode::Eager);
        assert_eq!(StepMode::parse(Some("0")).unwrap(), StepMode::Eager);
        assert_eq!(StepMode::parse(Some("fed")).unwrap(), StepMode::DeviceFed);
        assert_eq!(StepMode::parse(Some("1")).unwrap(), StepMode::Captured { warmup: StepMode::DEFAULT_WARMUP });
        let error = StepMode::parse(Some("yes")).unwrap_err().to_string();
        assert!(error.contains("LEROBOT_RS_CUDA_GRAPH=yes"), "{error}");
    }
}
