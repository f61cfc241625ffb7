//! The processes of a run, one per machine or one per GPU, each training a replica on each of
//! its devices: how this process was launched (`mpirun` or `srun`; torchrun's variables), the
//! channel the processes agree through, and the MPI calls between them (the second level of the
//! all-reduce where no device group sums it, with the `mpi` feature).
//!
//! MPI is initialised by [`launch`], which the `trainer` tool calls first, and stays so while
//! its [`Launch`] lives; `train_on` then takes its processes from [`Processes::current`], as
//! torch.distributed takes its default process group.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::OnceLock;
use std::time::Duration;

use kernels::GroupId;

use super::disagreement::{another_started_otherwise, started_otherwise};
use super::rendezvous::{Meeting, meet};
use crate::error::{Error, Result};

/// How long the processes of a torchrun-style launch wait for one another at their meeting
/// (each opens its dataset first, which may build a frame cache).
const MEETING_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What the processes of a run reach one another through, besides their devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// One process: nothing.
    Alone,
    /// MPI (`mpirun`, `mpiexec`, `srun`): the agreement, and the sums in host memory where no
    /// device group makes them.
    Mpi,
    /// torchrun's variables: a meeting at process 0's address (`MASTER_ADDR`, port
    /// `MASTER_PORT + 1`) for the agreement; the sums need a device group (NCCL).
    Meeting(SocketAddr),
}

/// Where this process stands among the processes of its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processes {
    rank: usize,
    count: usize,
    local_rank: usize,
    channel: Channel,
}

/// The processes [`launch`] found, for [`Processes::current`].
static LAUNCHED: OnceLock<Processes> = OnceLock::new();

impl Processes {
    /// The only process of a run.
    pub fn single() -> Self {
        Self { rank: 0, count: 1, local_rank: 0, channel: Channel::Alone }
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

    /// What the processes reach one another through.
    pub fn channel(&self) -> Channel {
        self.channel
    }

    /// Whether this is process 0, whose rank-0 replica logs and writes checkpoints.
    pub fn is_main(&self) -> bool {
        self.rank == 0
    }

    /// Process 0's `offer` (the id of a device group it made, if any) on every process, once
    /// every process has shown the same `fingerprint` as process 0 (of its arguments): else an
    /// error on every process, saying which differ. Over MPI, or at the meeting of a
    /// torchrun-style launch; with one process, `offer`.
    pub fn agree(&self, fingerprint: u64, offer: Option<GroupId>) -> Result<Option<GroupId>> {
        match self.channel {
            Channel::Alone => Ok(offer),
            Channel::Mpi => {
                self.check_same(fingerprint)?;
                let mut sent = [0u8; 129];
                if let Some(id) = offer.filter(|_| self.is_main()) {
                    sent[0] = 1;
                    sent[1..].copy_from_slice(&id.0);
                }
                mpi_calls::broadcast_bytes(&mut sent).map_err(|e| self.error("handing out the group's id", e))?;
                Ok((sent[0] == 1).then(|| GroupId(sent[1..].try_into().expect("128 bytes"))))
            }
            Channel::Meeting(address) => {
                let meeting =
                    Meeting { address, rank: self.rank, count: self.count, fingerprint, timeout: MEETING_TIMEOUT };
                meet(&meeting, offer.filter(|_| self.is_main()))
            }
        }
    }

    /// Fails, on every process, unless every process has the same `value` as process 0 (a
    /// fingerprint of its arguments); the error says which processes differ.
    fn check_same(&self, value: u64) -> Result<()> {
        if self.count == 1 {
            return Ok(());
        }
        let (mine_differs, any_differs) = mpi_calls::compare_with_first(value).map_err(Error::Replicas)?;
        match (mine_differs, any_differs) {
            (true, _) => Err(started_otherwise(self.rank, self.count)),
            (false, true) => Err(another_started_otherwise()),
            (false, false) => Ok(()),
        }
    }

    /// The sum of `values` over the processes (the same bits on every process), in place.
    pub fn all_reduce_sum(&self, values: &mut [f32]) -> Result<()> {
        self.through_host()?;
        mpi_calls::all_reduce_sum(values).map_err(|e| self.error("the all-reduce between processes", e))
    }

    /// Process 0's `values` on every process, in place.
    pub fn broadcast(&self, values: &mut [f32]) -> Result<()> {
        self.through_host()?;
        mpi_calls::broadcast(values).map_err(|e| self.error("the broadcast between processes", e))
    }

    /// Fails where the processes have no path through host memory (a torchrun-style launch).
    fn through_host(&self) -> Result<()> {
        match self.channel {
            Channel::Meeting(_) => Err(Error::Replicas(
                "a torchrun-style launch sums between processes through NCCL only (no MPI between them)".into(),
            )),
            Channel::Alone | Channel::Mpi => Ok(()),
        }
    }

    /// Ends every process of the run after `error` ended this one's: the others wait in
    /// collective calls that this process will never make. Prints the error first. Under MPI,
    /// `MPI_Abort`; under torchrun, this process's exit, on which torchrun stops the others (and
    /// their NCCL watchdogs see this one gone).
    pub(crate) fn abort_run(&self, error: &Error) -> ! {
        let how = match self.channel {
            Channel::Mpi => "MPI_Abort",
            Channel::Alone | Channel::Meeting(_) => "this process exits; its launcher stops the others",
        };
        eprintln!("error: process {} of {}: {error}\nstopping every process of the run ({how})", self.rank, self.count);
        match self.channel {
            Channel::Mpi => mpi_calls::abort(1),
            Channel::Alone | Channel::Meeting(_) => std::process::exit(1),
        }
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
/// started several, joins them through MPI (the `mpi` feature); torchrun's variables (`RANK`,
/// `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`) make it one of a torchrun-style
/// launch, whose processes meet when training starts. Refuses a launch it cannot serve: several
/// MPI processes without the feature, or variables that disagree or are missing.
pub fn launch() -> Result<Launch> {
    let launcher = Launcher::detect(|name| std::env::var(name).ok())?;
    let launch = match launcher {
        Launcher::Single => Launch {
            processes: Processes::single(),
            #[cfg(feature = "mpi")]
            _universe: None,
        },
        Launcher::Mpi { size, variable } => mpi_calls::join(size, variable)?,
        Launcher::Torchrun { rank, size, local_rank, meeting } => Launch {
            processes: Processes { rank, count: size, local_rank, channel: Channel::Meeting(meeting) },
            #[cfg(feature = "mpi")]
            _universe: None,
        },
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
    /// torchrun (or anything that sets its variables): process `rank` of `size`, `local_rank`
    /// on its machine, meeting the others at `meeting`.
    Torchrun {
        rank: usize,
        size: usize,
        local_rank: usize,
        meeting: SocketAddr,
    },
}

impl Launcher {
    /// Open MPI's, MPICH's (and Slurm's PMI) and Slurm's step's process counts, in that order.
    const MPI_SIZES: [&'static str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];

    fn detect(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let size = |name: &str| var(name).map(|v| parse_variable(name, &v, "a count")).transpose();
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
            (_, Some(w)) if w > 1 => Self::torchrun(w, &var),
            _ => Ok(Self::Single),
        }
    }

    /// A torchrun-style launch of `size` processes, from its other variables.
    fn torchrun(size: usize, var: &impl Fn(&str) -> Option<String>) -> Result<Self> {
        let required = |name: &str| {
            var(name).ok_or_else(|| {
                Error::Config(format!(
                    "WORLD_SIZE={size} but {name} is not set: a torchrun-style launch sets RANK, LOCAL_RANK, \
                     MASTER_ADDR and MASTER_PORT too"
                ))
            })
        };
        let number = |name: &str| parse_variable(name, &required(name)?, "a number");
        let (rank, local_rank, port) = (number("RANK")?, number("LOCAL_RANK")?, number("MASTER_PORT")?);
        if rank >= size {
            return Err(Error::Config(format!("RANK={rank} but WORLD_SIZE={size}: a rank is below the size")));
        }
        // torchrun's own store listens on MASTER_PORT: the processes meet on the port after it.
        let port = u16::try_from(port + 1).map_err(|_| {
            Error::Config(format!("MASTER_PORT={port}: the port after it, where the processes meet, is none"))
        })?;
        let host = required("MASTER_ADDR")?;
        // An IPv4 address where the name has one (process 0 listens on both where it can).
        let meeting = (host.trim(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|addresses| {
                let addresses: Vec<_> = addresses.collect();
                addresses.iter().find(|a| a.is_ipv4()).or(addresses.first()).copied()
            })
            .ok_or_else(|| Error::Config(format!("MASTER_ADDR={host}: not an address this machine can resolve")))?;
        Ok(Self::Torchrun { rank, size, local_rank, meeting })
    }
}

/// The environment variable `name`'s `value` as a number, or an error saying it is not `what`.
fn parse_variable(name: &str, value: &str, what: &str) -> Result<usize> {
    value.trim().parse().map_err(|_| Error::Config(format!("the environment variable {name}={value} is not {what}")))
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
        let processes = Processes { rank: world.rank() as usize, count, local_rank, channel: super::Channel::Mpi };
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

    pub(super) fn broadcast_bytes(bytes: &mut [u8]) -> Result<(), String> {
        SimpleCommunicator::world().process_at_rank(0).broadcast_into(bytes);
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

    pub(super) fn broadcast_bytes(_: &mut [u8]) -> Result<(), String> {
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
    fn a_torchrun_launch_is_read_from_its_variables() {
        let torchrun = [
            ("WORLD_SIZE", "8"),
            ("RANK", "5"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29500"),
        ];
        let meeting: SocketAddr = "127.0.0.1:29501".parse().unwrap();
        assert_eq!(detect(&torchrun).unwrap(), Launcher::Torchrun { rank: 5, size: 8, local_rank: 1, meeting });
        // MPI's own variables beside torchrun's: MPI's launch.
        let both = [("OMPI_COMM_WORLD_SIZE", "8")].iter().chain(&torchrun).copied().collect::<Vec<_>>();
        assert_eq!(detect(&both).unwrap(), Launcher::Mpi { size: 8, variable: "OMPI_COMM_WORLD_SIZE" });
    }

    #[test]
    fn a_launch_that_cannot_be_served_is_refused_saying_why() {
        let error = detect(&[("WORLD_SIZE", "2"), ("RANK", "0")]).unwrap_err().to_string();
        assert!(error.contains("WORLD_SIZE=2 but LOCAL_RANK is not set"), "{error}");
        let torchrun = |rank: &'static str, port: &'static str, host: &'static str| {
            detect(&[
                ("WORLD_SIZE", "2"),
                ("RANK", rank),
                ("LOCAL_RANK", "0"),
                ("MASTER_ADDR", host),
                ("MASTER_PORT", port),
            ])
            .unwrap_err()
            .to_string()
        };
        let error = torchrun("2", "29500", "127.0.0.1");
        assert!(error.contains("RANK=2 but WORLD_SIZE=2"), "{error}");
        let error = torchrun("one", "29500", "127.0.0.1");
        assert!(error.contains("RANK=one is not a number"), "{error}");
        let error = torchrun("1", "65535", "127.0.0.1");
        assert!(error.contains("MASTER_PORT=65535"), "{error}");
        let error = torchrun("1", "29500", "no such host.invalid");
        assert!(error.contains("MASTER_ADDR=no such host.invalid"), "{error}");
        let error = detect(&[("PMI_SIZE", "2"), ("WORLD_SIZE", "4")]).unwrap_err().to_string();
        assert!(error.contains("PMI_SIZE=2 but WORLD_SIZE=4"), "{error}");
        let error = detect(&[("OMPI_COMM_WORLD_SIZE", "two")]).unwrap_err().to_string();
        assert!(error.contains("OMPI_COMM_WORLD_SIZE=two"), "{error}");
    }
}
