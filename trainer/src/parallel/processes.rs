//! The processes of a run started by `mpirun` or `srun`, one per machine (or several on one),
//! each training a replica on each of its devices: how this process was launched, and the MPI
//! calls between processes (the second level of the all-reduce, with the `mpi` feature).
//!
//! MPI is initialised by [`launch`], which the `trainer` tool calls first, and stays so while
//! its [`Launch`] lives; `train_on` then takes its processes from [`Processes::current`], as
//! torch.distributed takes its default process group.

use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Where this process stands among the processes of its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processes {
    rank: usize,
    count: usize,
    local_rank: usize,
}

/// The processes [`launch`] found, for [`Processes::current`].
static LAUNCHED: OnceLock<Processes> = OnceLock::new();

impl Processes {
    /// The only process of a run.
    pub fn single() -> Self {
        Self { rank: 0, count: 1, local_rank: 0 }
    }

    /// This process's place, as [`launch`] found it (the only process when it was not called).
    pub fn current() -> Self {
        LAUNCHED.get().copied().unwrap_or_else(Self::single)
    }

    /// This process's rank among the run's processes, from 0.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes of the run.
    pub fn count(&self) -> usize {
        self.count
    }

    /// This process's rank among the processes of its machine (whose devices it offsets by
    /// this many times its own count).
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// Whether this is process 0, whose rank-0 replica logs and writes checkpoints.
    pub fn is_main(&self) -> bool {
        self.rank == 0
    }

    /// Fails, on every process, unless every process has the same `value` as process 0 (a
    /// fingerprint of its arguments); the error says which processes differ.
    pub(crate) fn check_same(&self, value: u64, what: &str) -> Result<()> {
        if self.count == 1 {
            return Ok(());
        }
        let (mine_differs, any_differs) = mpi_calls::compare_with_first(value).map_err(Error::Replicas)?;
        match (mine_differs, any_differs) {
            (true, _) => Err(Error::Replicas(format!(
                "process {} of {} was started with another {what} than process 0: every process of a run must be",
                self.rank, self.count
            ))),
            (false, true) => Err(Error::Replicas(format!(
                "another process was started with another {what} than process 0 (its own error says which)"
            ))),
            (false, false) => Ok(()),
        }
    }

    /// The sum of `values` over the processes (the same bits on every process), in place.
    pub fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        mpi_calls::all_reduce_sum(values).map_err(|e| self.error("the all-reduce between processes", e))
    }

    /// Process 0's `values` on every process, in place.
    pub fn broadcast(&self, values: &mut [f32]) -> Result<()> {
        mpi_calls::broadcast(values).map_err(|e| self.error("the broadcast between processes", e))
    }

    /// Ends every process of the run after `error` ended this one's: the others wait in
    /// collective calls that this process will never make. Prints the error first.
    pub(crate) fn abort_run(&self, error: &Error) -> ! {
        eprintln!(
            "error: process {} of {}: {error}\nstopping every process of the run (MPI_Abort)",
            self.rank, self.count
        );
        mpi_calls::abort(1)
    }

    fn error(&self, what: &str, error: String) -> Error {
        Error::Replicas(format!("process {}: {what} failed: {error}", self.rank))
    }
}

/// How this process was started: alone, or as one of several; holds MPI initialised while it
/// lives (MPI is finalised when it is dropped, after the run).
pub struct Launch {
    processes: Processes,
    #[cfg(feature = "mpi")]
    _universe: Option<mpi::environment::Universe>,
}

impl Launch {
    /// This process's place among the run's processes.
    pub fn processes(&self) -> Processes {
        self.processes
    }
}

/// Reads how this process was started from its environment and, when `mpirun` or `srun`
/// started several, joins them through MPI (the `mpi` feature). Refuses a launch it cannot
/// serve: several processes without the feature, or torchrun's variables without MPI's.
pub fn launch() -> Result<Launch> {
    let launcher = Launcher::detect(|name| std::env::var(name).ok())?;
    let launch = match launcher {
        Launcher::Single => Launch {
            processes: Processes::single(),
            #[cfg(feature = "mpi")]
            _universe: None,
        },
        Launcher::Mpi { size, variable } => mpi_calls::join(size, variable)?,
    };
    LAUNCHED
        .set(launch.processes)
        .map_err(|_| Error::Config("this process was already launched (trainer::parallel::launch twice)".into()))?;
    Ok(launch)
}

/// What the environment says started this process.
#[derive(Debug, PartialEq, Eq)]
enum Launcher {
    Single,
    /// `mpirun`, `mpiexec` or `srun`: `size` processes, as `variable` says.
    Mpi {
        size: usize,
        variable: &'static str,
    },
}

impl Launcher {
    /// Open MPI's, MPICH's (and Slurm's PMI) and Slurm's step's process counts, in that order.
    const MPI_SIZES: [&'static str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];

    fn detect(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let size = |name: &str| -> Result<Option<usize>> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| Error::Config(format!("the environment variable {name}={v} is not a count")))
                })
                .transpose()
        };
        let mut mpi = None;
        for name in Self::MPI_SIZES {
            if let Some(n) = size(name)? {
                mpi = Some((n, name));
                break;
            }
        }
        let torchrun = size("WORLD_SIZE")?;
        match (mpi, torchrun) {
            (Some((n, variable)), Some(w)) if n > 1 && w != n => Err(Error::Config(format!(
                "{variable}={n} but WORLD_SIZE={w}: the launcher's process count and torchrun's disagree"
            ))),
            (Some((n, variable)), _) if n > 1 => Ok(Self::Mpi { size: n, variable }),
            (_, Some(w)) if w > 1 => Err(Error::Config(format!(
                "WORLD_SIZE={w}: a torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR) is not supported, as it \
                 has no engine to join the processes here; start one process per machine with mpirun or srun \
                 (the `mpi` feature), each with --num_devices for its own devices"
            ))),
            _ => Ok(Self::Single),
        }
    }
}

/// MPI's calls, with the `mpi` feature (Open MPI from Debian's packages, through the `mpi` crate).
#[cfg(feature = "mpi")]
mod mpi_calls {
    use std::sync::{Mutex, PoisonError};

    use mpi::Threading;
    use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
    use mpi::topology::{Communicator, SimpleCommunicator};

    use super::{Launch, Processes};
    use crate::error::{Error, Result};

    /// Initialises MPI and finds this process's place; `expected` processes, as `variable` says.
    pub(super) fn join(expected: usize, variable: &str) -> Result<Launch> {
        // Multiple: rank 0's replica thread makes the calls of the steps, and the main thread
        // may abort the run while that thread waits in one.
        let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple)
            .ok_or_else(|| Error::Config("MPI was initialised before trainer::parallel::launch".into()))?;
        if threading < Threading::Serialized {
            return Err(Error::Config(format!(
                "this MPI library gives threads {threading:?} support; training needs at least Serialized"
            )));
        }
        let world = universe.world();
        let count = world.size() as usize;
        if count != expected {
            return Err(Error::Config(format!(
                "{variable}={expected} but MPI's world has {count} process(es): is this build's MPI library the one \
                 the launcher comes from?"
            )));
        }
        let local_rank = world.split_shared(0).rank() as usize;
        let processes = Processes { rank: world.rank() as usize, count, local_rank };
        Ok(Launch { processes, _universe: Some(universe) })
    }

    pub(super) fn compare_with_first(value: u64) -> Result<(bool, bool), String> {
        let world = SimpleCommunicator::world();
        let mut first = value;
        world.process_at_rank(0).broadcast_into(&mut first);
        let mine_differs = u8::from(first != value);
        let mut any_differs = 0u8;
        world.all_reduce_into(&mine_differs, &mut any_differs, SystemOperation::max());
        Ok((mine_differs == 1, any_differs == 1))
    }

    pub(super) fn all_reduce_sum(values: &mut [f32]) -> Result<(), String> {
        // The sums' buffer is kept between calls: a fresh one would cost its page faults at
        // every step (a quarter of the call for PushT classic's 1 GB of gradients). The mpi
        // crate has no MPI_IN_PLACE, whose value differs between MPI libraries.
        static SUMS: Mutex<Vec<f32>> = Mutex::new(Vec::new());
        let mut sums = SUMS.lock().unwrap_or_else(PoisonError::into_inner);
        if sums.len() < values.len() {
            sums.resize(values.len(), 0.0);
        }
        let sums = &mut sums[..values.len()];
        SimpleCommunicator::world().all_reduce_into(&*values, &mut *sums, SystemOperation::sum());
        values.copy_from_slice(sums);
        Ok(())
    }

    pub(super) fn broadcast(values: &mut [f32]) -> Result<(), String> {
        SimpleCommunicator::world().process_at_rank(0).broadcast_into(values);
        Ok(())
    }

    pub(super) fn abort(code: i32) -> ! {
        SimpleCommunicator::world().abort(code)
    }
}

/// Without the `mpi` feature a run has one process ([`launch`] refuses more), so no call is
/// made; they say how to get them all the same.
#[cfg(not(feature = "mpi"))]
mod mpi_calls {
    use super::Launch;
    use crate::error::{Error, Result};

    const NOT_BUILT: &str = "this build has no MPI: rebuild the trainer with `--features mpi` (Open MPI from \
                             Debian's packages: apt-get install libopenmpi-dev openmpi-bin)";

    pub(super) fn join(expected: usize, variable: &str) -> Result<Launch> {
        Err(Error::Config(format!(
            "{variable}={expected}: this process was launched as one of several, but {NOT_BUILT}"
        )))
    }

    pub(super) fn compare_with_first(_: u64) -> Result<(bool, bool), String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn all_reduce_sum(_: &mut [f32]) -> Result<(), String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn broadcast(_: &mut [f32]) -> Result<(), String> {
        Err(NOT_BUILT.into())
    }

    pub(super) fn abort(code: i32) -> ! {
        std::process::exit(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(vars: &[(&str, &str)]) -> Result<Launcher> {
        Launcher::detect(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn a_launcher_is_read_from_its_variables() {
        assert_eq!(detect(&[]).unwrap(), Launcher::Single);
        assert_eq!(detect(&[("OMPI_COMM_WORLD_SIZE", "1"), ("WORLD_SIZE", "1")]).unwrap(), Launcher::Single);
        assert_eq!(
            detect(&[("OMPI_COMM_WORLD_SIZE", "2")]).unwrap(),
            Launcher::Mpi { size: 2, variable: "OMPI_COMM_WORLD_SIZE" }
        );
        assert_eq!(
            detect(&[("SLURM_STEP_NUM_TASKS", "4"), ("WORLD_SIZE", "4")]).unwrap(),
            Launcher::Mpi { size: 4, variable: "SLURM_STEP_NUM_TASKS" }
        );
        // An sbatch script's own allocation is not a launch of several processes.
        assert_eq!(detect(&[("SLURM_NTASKS", "8")]).unwrap(), Launcher::Single);
    }

    #[test]
    fn a_launch_that_cannot_be_served_is_refused_saying_why() {
        let error = detect(&[("WORLD_SIZE", "2"), ("RANK", "0")]).unwrap_err().to_string();
        assert!(error.contains("WORLD_SIZE=2") && error.contains("mpirun or srun"), "{error}");
        let error = detect(&[("PMI_SIZE", "2"), ("WORLD_SIZE", "4")]).unwrap_err().to_string();
        assert!(error.contains("PMI_SIZE=2 but WORLD_SIZE=4"), "{error}");
        let error = detect(&[("OMPI_COMM_WORLD_SIZE", "two")]).unwrap_err().to_string();
        assert!(error.contains("OMPI_COMM_WORLD_SIZE=two"), "{error}");
    }
}
