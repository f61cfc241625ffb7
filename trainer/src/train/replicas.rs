//! A data-parallel run, supervised from the calling thread: the processes' agreement on what
//! they train (and their device group, where they have one), then this process's replicas, one per device on a thread of its own, each
//! running the loop ([`super::steps`]) on its shard; when one fails, the others are stopped
//! rather than left waiting in a collective call. The replicas' collective calls are
//! [`crate::parallel`]'s.

use std::path::Path;
use std::time::Duration;

use super::data::TrainData;
use super::outcome::{Progress, TrainOutcome};
use super::steps::train_replica;
use crate::error::{Error, Result};
use crate::parallel::{Processes, Session, join_group};
use crate::step::TrainingBackend;
use crate::train_config::{DatasetConfig, TrainConfig};

/// Trains `run` with one replica on each of `devices` in each of `processes` (where the run has
/// more than one replica in all). Rank 0 logs through `on_progress`, on this thread.
pub(super) fn train_data_parallel<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    processes: Processes,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    let local = devices.len();
    let world = local * processes.count();
    let group = if processes.count() > 1 {
        // The datasets' folders may differ between machines; their frames may not.
        let compared = TrainConfig {
            dataset: DatasetConfig { root: Default::default(), ..config.dataset.clone() },
            ..config.clone()
        };
        let frames = run.datasets.len();
        let arguments =
            serde_json::to_vec(&(compared, local, resume, frames)).map_err(|e| Error::Config(e.to_string()))?;
        let fingerprint = twox_hash::XxHash64::oneshot(0, &arguments);
        let mut say = |line: &str| on_progress(Progress::Line(line));
        join_group::<B::InnerBackend>(&processes, &devices, fingerprint, &mut say)?
    } else {
        None
    };
    if processes.is_main() {
        let machines = match processes.count() {
            1 => String::new(),
            n => format!(" ({n} processes x {local} devices)"),
        };
        on_progress(Progress::Line(&format!(
            "data-parallel: {world} replicas{machines}; effective batch size {} = {} per device x {world} devices x {} \
             accumulated",
            config.batch_size * world * config.grad_accum,
            config.batch_size,
            config.grad_accum
        )));
    }
    let session = Session::new(local, group);
    if local == 1 {
        let device = devices.into_iter().next().expect("one device");
        return train_replica::<B>(config, run, resume, device, &session.replicas()[0], on_progress);
    }
    supervise::<B>(config, run, resume, devices, &session, on_progress)
}

/// This process's replicas, one per device on a thread of its own, supervised from this thread:
/// it forwards their progress and, when one fails, stops the others.
fn supervise<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    session: &Session,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    let local = devices.len();
    std::thread::scope(|scope| {
        let (events, reports) = std::sync::mpsc::channel::<ReplicaEvent>();
        let threads: Vec<_> = devices
            .into_iter()
            .zip(session.replicas())
            .map(|(device, replica)| {
                let events = events.clone();
                std::thread::Builder::new()
                    .name(format!("replica-{}", replica.rank()))
                    .spawn_scoped(scope, move || {
                        let mut report = |progress: Progress<'_>| {
                            // A closed channel means the supervisor is gone: nothing to tell.
                            let _ = events.send(ReplicaEvent::from(progress));
                        };
                        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            train_replica::<B>(config, run, resume, device, replica, &mut report)
                        }))
                        .unwrap_or_else(|panic| {
                            let message = datasets::panic_message(&*panic).unwrap_or_else(|| "(no message)".into());
                            Err(Error::Replicas(format!("rank {} panicked: {message}", replica.rank())))
                        });
                        let _ = events.send(ReplicaEvent::Done(replica.local_rank(), Box::new(outcome)));
                    })
                    .map_err(|e| Error::Replicas(format!("starting replica {}: {e}", replica.rank())))
            })
            .collect::<Result<_>>()?;
        drop(events);
        let mut outcomes: Vec<Option<Result<TrainOutcome>>> = (0..local).map(|_| None).collect();
        loop {
            let event = match reports.try_recv() {
                Ok(event) => event,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    // The replicas hand their operations to rayon's pool; help it meanwhile.
                    crate::worker::sleep_helping(Duration::from_millis(5));
                    continue;
                }
            };
            match event {
                ReplicaEvent::Line(line) => on_progress(Progress::Line(&line)),
                ReplicaEvent::Step(step) => on_progress(Progress::Step(step)),
                ReplicaEvent::Done(local_rank, outcome) => {
                    let failed = outcome.is_err();
                    outcomes[local_rank] = Some(*outcome);
                    if failed {
                        // Wake the replicas waiting for this one, then collect what they say.
                        session.abort::<B::InnerBackend>(|| {
                            threads.iter().all(std::thread::ScopedJoinHandle::is_finished)
                        });
                    }
                }
            }
        }
        // The first error that is not "another rank failed" is the cause; otherwise the first
        // replica's run.
        let mut outcomes: Vec<Result<TrainOutcome>> = outcomes
            .into_iter()
            .zip(session.replicas())
            .map(|(o, replica)| {
                o.unwrap_or_else(|| Err(Error::Replicas(format!("rank {} ended without a word", replica.rank()))))
            })
            .collect();
        if let Some(cause) = outcomes.iter().position(|o| o.as_ref().is_err_and(|e| !is_abort(e))) {
            return outcomes.swap_remove(cause);
        }
        outcomes.swap_remove(0)
    })
}

/// What a replica's thread tells the supervising one.
enum ReplicaEvent {
    Line(String),
    Step(usize),
    Done(usize, Box<Result<TrainOutcome>>),
}

impl From<Progress<'_>> for ReplicaEvent {
    fn from(progress: Progress<'_>) -> Self {
        match progress {
            Progress::Line(line) => Self::Line(line.to_string()),
            Progress::Step(step) => Self::Step(step),
            Progress::FrameCache { done, total } => Self::Line(format!("frame cache {done}/{total}")),
        }
    }
}

/// Whether `error` is a replica stopping because another failed.
fn is_abort(error: &Error) -> bool {
    matches!(error, Error::StoppedByAnotherReplica { .. })
}
