//! A step fed from buffers kept between steps, and that step captured as one CUDA graph and
//! replayed (issue 59, stage 2 of docs/plans/cuda-graph.md).
//!
//! Fed: each step's values from the host (the batch, the crops' windows, the noise, the
//! update's scalars) are written into the buffers the first fed step made ([`Slots`]), and the
//! step's work reads them there; it launches what an eager step launches, in the same order,
//! and gives the same numbers. Captured: after `warmup` fed steps, the work of one is recorded
//! as a graph, and every step after it writes its values and replays the graph, one launch
//! where the host launched each kernel and library call. Only burn's cuda backend captures;
//! elsewhere a captured mode runs fed, saying why once.

use burn::prelude::*;
use kernels::{ADAM_SCALARS, AdamStep, HostTraffic};
use loader::Batch;

use super::modes::{CapturedStep, FedSteps, GraphStatus, StepMode};
use super::{DrawnStep, StepOutput, StepRunner, TrainingBackend, UploadedStep};
use crate::error::{Error, Result};
use crate::precision::Precision;
use crate::uploads::{Slots, Uploads};

impl<B: TrainingBackend> StepRunner<B> {
    /// A whole step of one micro-batch, `batch`, as optimiser step `step`: eager, fed from kept
    /// buffers or replayed as a CUDA graph, as [`StepRunner::with_step_mode`] asks.
    pub fn step(&mut self, batch: &Batch, step: usize) -> Result<StepOutput<B::InnerBackend>> {
        if let Some(output) = self.fed_step(batch, step)? {
            return Ok(output);
        }
        self.accumulate(batch, step, 0)?;
        self.finish(step)
    }

    /// Runs [`StepRunner::step`] in `mode`: fed from kept buffers, or captured as a CUDA graph
    /// and replayed. A configuration that cannot be fed (f16, gradient accumulation, several
    /// replicas, image augmentation) or a backend that cannot write in place runs eagerly, as
    /// [`StepRunner::graph_status`] then says; every other method (`prepare`, `accumulate`,
    /// `finish`) runs eagerly whatever the mode.
    pub fn with_step_mode(mut self, mode: StepMode) -> Self {
        self.fed = FedSteps::new(mode);
        self
    }

    /// Where the fed and captured steps stand.
    pub fn graph_status(&self) -> &GraphStatus {
        &self.fed.status
    }

    /// Why this runner's steps cannot be fed from kept buffers, if they cannot.
    fn fed_refusal(&self) -> Option<String> {
        if !B::writes_in_place() {
            return Some("this backend does not write tensors in place".into());
        }
        if self.precision == Precision::F16 {
            return Some("f16's loss scaling reads the gradients' norm on the host each step".into());
        }
        if self.grad_accum > 1 {
            return Some("gradient accumulation runs several batches a step".into());
        }
        if self.replica.world_size() > 1 {
            return Some("a data-parallel step calls the collective library between its replicas".into());
        }
        self.pipeline.same_work_each_step::<B>().err()
    }

    /// Why this runner's fed step cannot be captured, if it cannot, beside what the backend says.
    fn capture_refusal(&self) -> Option<String> {
        // BatchNorm's running statistics are new tensors each step: a replay would read the
        // ones the recording read, never the last step's.
        let batch_norm = !self.config.use_group_norm && !self.model().rgb_encoder.is_empty();
        batch_norm.then(|| "the encoders' BatchNorm keeps its running statistics in new tensors each step".to_string())
    }

    /// Step `step` of `batch` fed, or replayed where captured: `None` where it is to run
    /// eagerly (the mode is eager, the runner cannot feed its steps, or the batch is not the size
    /// of the kept buffers').
    pub(super) fn fed_step(&mut self, batch: &Batch, step: usize) -> Result<Option<StepOutput<B::InnerBackend>>> {
        let mode = self.fed.status.mode;
        if mode == StepMode::Eager {
            return Ok(None);
        }
        if let Some(why) = self.fed_refusal() {
            if self.fed.status.refused.is_none() {
                tracing::warn!("the training step runs eagerly, not fed from kept buffers ({}): {why}", StepMode::VAR);
                self.fed.status.refused = Some(why);
            }
            return Ok(None);
        }
        match &self.fed.slots {
            // A smaller batch (an epoch's last) runs eagerly: the graph goes (an eager update may
            // copy state it finds shared, and the graph would write the old buffers) and comes
            // back after the warm-up.
            Some((samples, _)) if *samples > batch.len() => {
                self.fed.drop_graph();
                self.fed.status.odd_batches += 1;
                return Ok(None);
            }
            // A larger one (the first fed batch was an epoch's last): buffers of its size.
            Some((samples, _)) if *samples < batch.len() => {
                self.fed.drop_graph();
                self.fed.slots = None;
            }
            _ => {}
        }
        let drawn = self.draw(batch, step, 0)?;
        let adam = self.next_update(step);
        let (samples, mut slots) = self.fed.slots.take().unwrap_or_else(|| (batch.len(), Slots::new()));
        let device = self.device.clone();
        let mut writer = slots.writer(&device);
        let written = self.upload(&drawn, &mut writer).and_then(|uploaded| {
            let scalars = writer.float::<1>(TensorData::new(adam.scalars().to_vec(), [ADAM_SCALARS]))?;
            Ok((uploaded, scalars.inner()))
        });
        self.fed.status.slots = slots.len();
        let (uploaded, scalars) = match written {
            Ok(written) => written,
            Err(e) => {
                // Buffers made again next step: the graph would read these.
                self.fed.drop_graph();
                return Err(e);
            }
        };
        self.fed.slots = Some((samples, slots));
        let (loss, grad_norm) = match &self.fed.captured {
            Some(captured) => {
                captured.graph.replay().map_err(Error::Graph)?;
                self.fed.status.replays += 1;
                // Copies: the next replay writes the graph's own.
                (captured.loss.clone().mul_scalar(1.0), captured.grad_norm.clone().mul_scalar(1.0))
            }
            None => match mode {
                StepMode::Captured { warmup }
                    if self.fed.since_drop >= warmup && self.fed.status.capture_refused.is_none() =>
                {
                    match self.capture_refusal() {
                        None => self.capture(FedValues { drawn: &drawn, uploaded, adam: &adam, scalars }),
                        Some(why) => {
                            tracing::warn!("the training step is not captured as a CUDA graph, it runs fed: {why}");
                            self.fed.status.capture_refused = Some(why);
                            self.fed_work(FedValues { drawn: &drawn, uploaded, adam: &adam, scalars })
                        }
                    }
                }
                _ => {
                    let before = HostTraffic::now();
                    let output = self.fed_work(FedValues { drawn: &drawn, uploaded, adam: &adam, scalars });
                    self.fed.status.work_traffic = before.zip(HostTraffic::now()).map(|(b, a)| a.since(&b));
                    output
                }
            },
        };
        self.optim.advance();
        self.fed.since_drop += 1;
        self.fed.status.fed_steps += 1;
        Ok(Some(StepOutput { loss, grad_norm, lr: adam.lr, applied: true, loss_scale: None }))
    }

    /// One fed step's work on the device, from `values`: its inputs from the kept buffers, the
    /// loss, the gradients and the update. Launches what [`StepRunner::step`] launches eagerly,
    /// in its order. Returns the loss and the gradients' norm.
    fn fed_work(&mut self, values: FedValues<'_, B>) -> (Tensor<B::InnerBackend, 1>, Tensor<B::InnerBackend, 1>) {
        let FedValues { drawn, uploaded, adam, scalars } = values;
        let prepared = self.transform(drawn, uploaded);
        let loss = self.loss(&prepared);
        let (grads, clipping) = self.flatten_with_clipping(self.gradients(&loss));
        let clipping = clipping.unwrap_or_else(|| self.clip(&grads));
        let factors = self.apply_update(grads, clipping, adam, Some(scalars));
        // As `finish` divides the loss of its one micro-batch.
        (loss.inner().div_scalar(1.0), factors.norm)
    }

    /// Captures the fed step's work as a CUDA graph: the capture's warm-up run is this step
    /// (its loss and norm copied out, so that the recorded run finds their buffers' sizes free
    /// again), the recorded run is what later steps replay. Where the backend cannot capture,
    /// or the recording would not replay, says why once and runs the step fed.
    fn capture(&mut self, values: FedValues<'_, B>) -> (Tensor<B::InnerBackend, 1>, Tensor<B::InnerBackend, 1>) {
        let device = self.device.clone();
        let mut this_step = None;
        let captured = B::capture_graph(&device, || {
            let (loss, grad_norm) = self.fed_work(values.clone());
            if this_step.is_none() {
                this_step = Some((loss.clone().mul_scalar(1.0), grad_norm.clone().mul_scalar(1.0)));
            }
            (loss, grad_norm)
        });
        match captured {
            Ok((graph, (loss, grad_norm))) => {
                tracing::info!("the training step is captured as a CUDA graph: {:?}", graph.nodes());
                self.fed.status.nodes = Some(graph.nodes());
                self.fed.captured = Some(CapturedStep { graph, loss, grad_norm });
            }
            Err(why) => {
                tracing::warn!(
                    "the training step is not captured as a CUDA graph, it runs fed from kept buffers: {why}"
                );
                self.fed.status.capture_refused = Some(why);
            }
        }
        // Where nothing ran (the backend cannot capture), the step runs now.
        this_step.unwrap_or_else(|| self.fed_work(values))
    }
}

/// What a fed step's work reads: the step as drawn, the kept buffers its values were written
/// into, the update's numbers and the buffer of its scalars.
#[derive(Clone)]
struct FedValues<'a, B: TrainingBackend> {
    drawn: &'a DrawnStep<'a>,
    uploaded: UploadedStep<B>,
    adam: &'a AdamStep,
    scalars: Tensor<B::InnerBackend, 1>,
}
