//! The meeting of a torchrun-style launch's processes, which have no MPI between them: each
//! process connects to process 0 at one address and says its rank and a fingerprint of what it
//! trains; once every process has, process 0 answers each with its own fingerprint, whether all
//! agreed, and the device group's id (as torch.distributed's TCP store hands NCCL's id to every
//! rank). Plain TCP, one message each way.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use kernels::GroupId;

use super::disagreement::{another_started_otherwise, others_started_otherwise, started_otherwise};
use crate::error::{Error, Result};

/// The first bytes of each message: a stray connection is refused, not misread.
const MAGIC: &[u8; 8] = b"lerobrs1";
/// A rank's message: magic, rank (u32) and fingerprint (u64), little-endian.
const HELLO_LEN: usize = 8 + 4 + 8;
/// Process 0's answer: magic, fingerprint, whether every process agreed (u8), whether an id
/// follows (u8), the id.
const ANSWER_LEN: usize = 8 + 8 + 1 + 1 + 128;
/// How long process 0 waits for a connection's hello (a stray connection holds it no longer).
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// What a process brings to the meeting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meeting {
    /// Process 0's address (its port is where it listens, on every interface).
    pub(crate) address: SocketAddr,
    /// This process's rank and the number of processes.
    pub(crate) rank: usize,
    pub(crate) count: usize,
    /// A fingerprint of the arguments every process must share.
    pub(crate) fingerprint: u64,
    /// How long to wait for the others (process 0) or for process 0 (the others).
    pub(crate) timeout: Duration,
}

/// Process 0's `offer` (its device group's id, if it made one), on every process; fails on
/// every process when any was started with another fingerprint than process 0 (the error names
/// which), or when the meeting does not complete within the timeout.
pub(crate) fn meet(meeting: &Meeting, offer: Option<GroupId>) -> Result<Option<GroupId>> {
    if meeting.rank == 0 { host(meeting, offer).map(|()| offer) } else { join(meeting) }
}

fn host(meeting: &Meeting, offer: Option<GroupId>) -> Result<()> {
    let port = meeting.address.port();
    let error = |what: String| Error::Replicas(format!("process 0, meeting the others on port {port}: {what}"));
    // Every interface, IPv6 and IPv4 where the machine has IPv6 (MASTER_ADDR may resolve to
    // either), IPv4 alone where it has not.
    let listener = TcpListener::bind((Ipv6Addr::UNSPECIFIED, port))
        .or_else(|_| TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)))
        .map_err(|e| error(format!("listening: {e}")))?;
    listener.set_nonblocking(true).map_err(|e| error(e.to_string()))?;
    let deadline = Instant::now() + meeting.timeout;
    let mut met: Vec<Option<(TcpStream, u64)>> = (0..meeting.count).map(|_| None).collect();
    while met.iter().skip(1).any(Option::is_none) {
        let (mut stream, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> =
                        (1..meeting.count).filter(|&r| met[r].is_none()).map(|r| r.to_string()).collect();
                    return Err(error(format!(
                        "process(es) {} did not arrive within {:?}",
                        missing.join(", "),
                        meeting.timeout
                    )));
                }
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return Err(error(format!("accepting: {e}"))),
        };
        let Ok((rank, fingerprint)) = read_hello(&mut stream) else {
            tracing::warn!("a connection from {peer} on the processes' meeting port is not one of them: ignored");
            continue;
        };
        if rank == 0 || rank >= meeting.count || met[rank].is_some() {
            return Err(error(format!("{peer} says it is process {rank}, which is not expected")));
        }
        met[rank] = Some((stream, fingerprint));
    }
    let differing: Vec<usize> = met
        .iter()
        .enumerate()
        .filter(|(_, m)| m.as_ref().is_some_and(|(_, f)| *f != meeting.fingerprint))
        .map(|(rank, _)| rank)
        .collect();
    let mut answer = Vec::with_capacity(ANSWER_LEN);
    answer.extend_from_slice(MAGIC);
    answer.extend_from_slice(&meeting.fingerprint.to_le_bytes());
    answer.push(u8::from(differing.is_empty()));
    answer.push(u8::from(offer.is_some()));
    answer.extend_from_slice(&offer.map_or([0; 128], |id| id.0));
    for (rank, (stream, _)) in met.iter_mut().enumerate().filter_map(|(r, m)| Some((r, m.as_mut()?))) {
        stream.write_all(&answer).map_err(|e| error(format!("answering process {rank}: {e}")))?;
    }
    if !differing.is_empty() {
        return Err(others_started_otherwise(&differing, meeting.count));
    }
    Ok(())
}

fn read_hello(stream: &mut TcpStream) -> std::io::Result<(usize, u64)> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
    let mut hello = [0; HELLO_LEN];
    stream.read_exact(&mut hello)?;
    if &hello[..8] != MAGIC {
        return Err(std::io::ErrorKind::InvalidData.into());
    }
    let rank = u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes")) as usize;
    Ok((rank, u64::from_le_bytes(hello[12..20].try_into().expect("8 bytes"))))
}

fn join(meeting: &Meeting) -> Result<Option<GroupId>> {
    let (rank, address) = (meeting.rank, meeting.address);
    let error = |what: String| Error::Replicas(format!("process {rank}, meeting process 0 at {address}: {what}"));
    let deadline = Instant::now() + meeting.timeout;
    // Process 0 may not listen yet: retried until the deadline.
    let mut stream = loop {
        match TcpStream::connect_timeout(&address, Duration::from_secs(5)) {
            Ok(stream) => break stream,
            Err(e) if Instant::now() >= deadline => {
                return Err(error(format!("no answer within {:?} ({e})", meeting.timeout)));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut hello = Vec::with_capacity(HELLO_LEN);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&u32::try_from(rank).map_err(|_| error("rank too large".into()))?.to_le_bytes());
    hello.extend_from_slice(&meeting.fingerprint.to_le_bytes());
    stream.write_all(&hello).map_err(|e| error(format!("saying hello: {e}")))?;
    stream
        .set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1))))
        .map_err(|e| error(e.to_string()))?;
    let mut answer = [0; ANSWER_LEN];
    stream.read_exact(&mut answer).map_err(|e| error(format!("reading its answer: {e}")))?;
    if &answer[..8] != MAGIC {
        return Err(error("its answer is not process 0's (another program on that port?)".into()));
    }
    if u64::from_le_bytes(answer[8..16].try_into().expect("8 bytes")) != meeting.fingerprint {
        return Err(started_otherwise(rank, meeting.count));
    }
    if answer[16] != 1 {
        return Err(another_started_otherwise());
    }
    Ok((answer[17] == 1).then(|| GroupId(answer[18..].try_into().expect("128 bytes"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_address() -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        listener.local_addr().unwrap()
    }

    fn meet_all(fingerprints: &[u64], offer: Option<GroupId>) -> Vec<Result<Option<GroupId>>> {
        let address = free_address();
        std::thread::scope(|scope| {
            let handles: Vec<_> = fingerprints
                .iter()
                .enumerate()
                .map(|(rank, &fingerprint)| {
                    let meeting = Meeting {
                        address,
                        rank,
                        count: fingerprints.len(),
                        fingerprint,
                        timeout: Duration::from_secs(20),
                    };
                    scope.spawn(move || meet(&meeting, if rank == 0 { offer } else { None }))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn every_process_receives_process_0s_id() {
        let id = GroupId(std::array::from_fn(|i| i as u8));
        for outcome in meet_all(&[7, 7, 7], Some(id)) {
            assert_eq!(outcome.unwrap(), Some(id));
        }
        for outcome in meet_all(&[7, 7], None) {
            assert_eq!(outcome.unwrap(), None);
        }
    }

    #[test]
    fn a_process_started_otherwise_fails_the_meeting_on_every_process() {
        let outcomes = meet_all(&[7, 8, 7], None);
        let host = outcomes[0].as_ref().unwrap_err().to_string();
        assert!(host.contains("process(es) 1 of 3 were started with another configuration"), "{host}");
        let differing = outcomes[1].as_ref().unwrap_err().to_string();
        assert!(differing.contains("process 1 of 3 was started with another configuration"), "{differing}");
        // The process that agreed fails too: none goes on to join a group the others will not.
        let agreed = outcomes[2].as_ref().unwrap_err().to_string();
        assert!(agreed.contains("another process was started with another configuration"), "{agreed}");
    }

    #[test]
    fn a_missing_process_0_ends_in_an_error_naming_the_address() {
        let address = free_address();
        let meeting = Meeting { address, rank: 1, count: 2, fingerprint: 7, timeout: Duration::from_millis(300) };
        let error = meet(&meeting, None).unwrap_err().to_string();
        assert!(
            error.contains(&format!("process 1, meeting process 0 at {address}: no answer within 300ms")),
            "{error}"
        );
        let meeting = Meeting { rank: 0, ..meeting };
        let error = meet(&meeting, None).unwrap_err().to_string();
        assert!(error.contains("process(es) 1 did not arrive"), "{error}");
    }
}
