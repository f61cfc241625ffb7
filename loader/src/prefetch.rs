//! The prefetch pipeline: one long-lived producer thread plans batches in order and has the
//! worker pool fill them, handing finished batches over a bounded channel; it lives across
//! epochs until the loader is dropped, which stops and joins it.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded, select, unbounded};

use crate::assemble::{AskedEpisodes, Assembler, Scratch};
use crate::batch::Buffers;
use crate::error::{Error, Result};
use crate::layout::BatchLayout;
use crate::sampler::{BatchPlan, Planner};

/// Fills one planned batch, turning a worker's error or panic into an error with context.
pub(crate) fn produce(
    assembler: &Assembler,
    plan: &BatchPlan,
    buffers: &mut Buffers,
    scratch: &mut Scratch,
) -> Result<()> {
    guarded(plan, || assembler.fill(plan, buffers, scratch))
}

/// Runs `fill`, giving its error the batch's context and catching a panic as an error.
fn guarded(plan: &BatchPlan, fill: impl FnOnce() -> Result<()>) -> Result<()> {
    let context = |source: Error| Error::Batch { epoch: plan.epoch, batch: plan.batch, source: Box::new(source) };
    match catch_unwind(AssertUnwindSafe(fill)) {
        Ok(result) => result.map_err(context),
        Err(panic) => {
            let message = datasets::panic_message(panic.as_ref()).unwrap_or_else(|| "(no message)".into());
            Err(Error::WorkerPanicked { epoch: plan.epoch, batch: plan.batch, message })
        }
    }
}

/// With a streamed dataset, how many batches ahead the producer plans, so that their episodes'
/// videos are fetched before their batches are filled.
const STREAM_LOOKAHEAD_BATCHES: usize = 16;

/// The running pipeline.
pub(crate) struct Pipeline {
    batches: Receiver<Result<Box<Buffers>>>,
    /// Dropping this wakes the producer wherever it waits, and it exits.
    stop: Option<Sender<()>>,
    producer: Option<JoinHandle<()>>,
}

impl Pipeline {
    /// Starts the producer: it fills batches on `pool` and keeps up to `depth` finished batches
    /// waiting. Buffers come back through `recycle`; new ones are made only when none is free.
    pub(crate) fn start(
        assembler: Arc<Assembler>,
        pool: Arc<rayon::ThreadPool>,
        mut planner: Planner,
        layout: Arc<BatchLayout>,
        depth: usize,
        recycle: Receiver<Box<Buffers>>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = bounded::<Result<Box<Buffers>>>(depth.max(1));
        let (stop_tx, stop_rx) = unbounded::<()>();
        let lookahead = if assembler.streams() { STREAM_LOOKAHEAD_BATCHES } else { 0 };
        let producer = std::thread::Builder::new().name("loader-prefetch".into()).spawn(move || {
            let mut scratch = Scratch::default();
            let mut ahead: VecDeque<BatchPlan> = VecDeque::with_capacity(lookahead + 1);
            let mut asked = AskedEpisodes::default();
            loop {
                while ahead.len() <= lookahead {
                    let Some(plan) = planner.next_plan() else { break };
                    if lookahead > 0 {
                        assembler.prefetch(&plan, &mut asked);
                    }
                    ahead.push_back(plan);
                }
                let Some(plan) = ahead.pop_front() else { break };
                if matches!(stop_rx.try_recv(), Err(TryRecvError::Disconnected)) {
                    return;
                }
                let mut buffers = recycle.try_recv().unwrap_or_else(|_| Box::new(Buffers::new(&layout)));
                let result = pool.install(|| produce(&assembler, &plan, &mut buffers, &mut scratch));
                let failed = result.is_err();
                select! {
                    send(tx, result.map(|()| buffers)) -> sent => if sent.is_err() { return },
                    recv(stop_rx) -> _ => return,
                }
                if failed {
                    // The error is delivered; the pipeline stops here.
                    return;
                }
            }
        })?;
        Ok(Self { batches: rx, stop: Some(stop_tx), producer: Some(producer) })
    }

    /// The next finished batch, waiting at most `timeout` (without end when `None`): `Ok(None)`
    /// when the producer has finished (all epochs done, or after an error was delivered),
    /// `Err(())` when no batch came in time.
    pub(crate) fn next(&self, timeout: Option<Duration>) -> std::result::Result<Option<Result<Box<Buffers>>>, ()> {
        let received = match timeout {
            None => self.batches.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(timeout) => self.batches.recv_timeout(timeout),
        };
        match received {
            Ok(batch) => Ok(Some(batch)),
            Err(RecvTimeoutError::Timeout) => Err(()),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        drop(self.stop.take());
        // Unblock a producer waiting to send: drain what it already made.
        while self.batches.try_recv().is_ok() {}
        if let Some(producer) = self.producer.take() {
            let _ = producer.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::SamplerState;

    fn plan() -> BatchPlan {
        BatchPlan { epoch: 3, batch: 7, indices: vec![1, 2], after: SamplerState { epoch: 3, position: 16 } }
    }

    #[test]
    fn a_panicking_worker_becomes_an_error_with_its_message() {
        let err = guarded(&plan(), || panic!("decoder exploded on frame {}", 12)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("batch 7 of epoch 3") && text.contains("decoder exploded on frame 12"), "{text}");
        assert!(matches!(err, Error::WorkerPanicked { .. }));
    }

    #[test]
    fn an_error_gets_the_batch_as_context() {
        let err = guarded(&plan(), || Err(Error::Config("bad".into()))).unwrap_err();
        assert_eq!(err.to_string(), "batch 7 of epoch 3: invalid loader configuration: bad");
    }
}
