//! WAIT numreplicas timeout: a client waits until that many replicas acknowledged the
//! stream up to its own last write (Redis's `woff`), or the timeout passes; the reply is
//! the number that did. WAITAOF numlocal numreplicas timeout (Redis 7.2): the same, but a
//! replica counts once its own log has fsynced that offset (its `REPLCONF ACK … FACK`),
//! and with numlocal 1 this instance's log must have fsynced the client's last write
//! (`super::fsynced`); the reply is the two counts.
//!
//! Both ask every replica for an acknowledgement (`REPLCONF GETACK *` in the stream,
//! sent once per loop turn however many clients wait, as Redis groups them before it
//! sleeps); each `REPLCONF ACK` that comes back, and each fsync the log writer reports,
//! may release waiting clients. The parking itself (the session, its deadline) is the
//! event loop's, as for blocking commands.

use super::Replication;
use super::master::Replicas;

/// What a client parked by WAIT or WAITAOF waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitFor {
    /// The stream offset of its last write.
    pub offset: i64,
    /// How many replicas must have acknowledged it.
    pub replicas: i64,
    /// WAITAOF: replicas count by what their log fsynced, and this is the local part.
    pub aof: Option<LocalFsync>,
}

/// WAITAOF's local part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalFsync {
    /// numlocal: whether this instance's log must have fsynced the write.
    pub required: bool,
    /// The effects records up to the client's last write (`SessionState::write_record`).
    pub records: u64,
}

/// What a waiting client is answered: WAIT's count, or WAITAOF's two counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitReply {
    Replicas(i64),
    Fsynced { local: i64, replicas: i64 },
}

impl WaitReply {
    pub fn write(self, out: &mut crate::resp::ReplyWriter) {
        match self {
            WaitReply::Replicas(count) => out.integer(count),
            WaitReply::Fsynced { local, replicas } => {
                out.array(2);
                out.integer(local);
                out.integer(replicas);
            }
        }
    }
}

impl WaitFor {
    /// The replicas that count for it now.
    fn replicas_now(&self, replicas: &Replicas) -> usize {
        match self.aof {
            None => replicas.acknowledged(self.offset),
            Some(_) => replicas.fsync_acknowledged(self.offset),
        }
    }

    /// Whether this instance's log fsynced the client's last write (1 or 0): Redis
    /// 7.2's `fsynced_reploff >= woff`, never with the log off.
    fn local_now(&self, replication: &Replication) -> i64 {
        let records = self.aof.map_or(0, |aof| aof.records);
        replication
            .fsynced
            .as_ref()
            .is_some_and(|fsynced| fsynced.records() >= records) as i64
    }

    /// The answer as things stand (at once, at the timeout, at CLIENT UNBLOCK).
    pub fn reply_now(&self, replication: &Replication) -> WaitReply {
        let replicas = self.replicas_now(&replication.replicas) as i64;
        match self.aof {
            None => WaitReply::Replicas(replicas),
            Some(_) => WaitReply::Fsynced {
                local: self.local_now(replication),
                replicas,
            },
        }
    }

    /// Whether `reply` (its answer now) ends the wait.
    pub fn is_done(&self, reply: WaitReply) -> bool {
        match (reply, self.aof) {
            (WaitReply::Replicas(count), _) => count >= self.replicas,
            (WaitReply::Fsynced { local, replicas }, Some(aof)) => {
                replicas >= self.replicas && local >= aof.required as i64
            }
            (WaitReply::Fsynced { .. }, None) => false,
        }
    }
}

/// The clients parked by WAIT and WAITAOF, newest first (Redis adds them at the head of
/// its list).
#[derive(Debug, Default)]
pub struct Waiting {
    clients: Vec<(u64, WaitFor)>,
}

impl Waiting {
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn add(&mut self, client_id: u64, wait: WaitFor) {
        self.clients.insert(0, (client_id, wait));
    }

    /// What client `client_id` waits for, if it waits.
    pub fn get(&self, client_id: u64) -> Option<WaitFor> {
        self.clients
            .iter()
            .find(|(id, _)| *id == client_id)
            .map(|(_, wait)| *wait)
    }

    /// The client no longer waits (answered, timed out, unblocked or gone).
    pub fn remove(&mut self, client_id: u64) {
        self.clients.retain(|(id, _)| *id != client_id);
    }

    /// The clients whose wait is over, with their answers (Redis's
    /// `processClientsWaitingReplicas`, whose shortcut is kept: a client asking no more
    /// than one just released, of the same kind, is answered that one's count). They
    /// stay listed until removed.
    pub fn satisfied(&self, replication: &Replication) -> Vec<(u64, WaitReply)> {
        let mut released = Vec::new();
        // The last release of each kind (WAIT, WAITAOF): its offset and count.
        let mut last: [Option<(i64, i64)>; 2] = [None, None];
        for &(id, wait) in &self.clients {
            let kind = wait.aof.is_some() as usize;
            let replicas = match last[kind] {
                Some((offset, count)) if offset >= wait.offset && count >= wait.replicas => count,
                _ => {
                    let count = wait.replicas_now(&replication.replicas) as i64;
                    if count < wait.replicas {
                        continue;
                    }
                    last[kind] = Some((wait.offset, count));
                    count
                }
            };
            let reply = match wait.aof {
                None => WaitReply::Replicas(replicas),
                Some(aof) => {
                    let local = wait.local_now(replication);
                    if local < aof.required as i64 {
                        continue;
                    }
                    WaitReply::Fsynced { local, replicas }
                }
            };
            released.push((id, reply));
        }
        released
    }
}

/// WAIT's arguments as Redis reads them: (numreplicas, timeout in ms, 0 for none), or
/// the error text.
pub fn parse_arguments(replicas: &[u8], timeout: &[u8]) -> Result<(i64, i64), &'static str> {
    let replicas =
        crate::resp::parse_i64(replicas).ok_or("ERR value is not an integer or out of range")?;
    let timeout =
        crate::resp::parse_i64(timeout).ok_or("ERR timeout is not an integer or out of range")?;
    if timeout < 0 {
        return Err("ERR timeout is negative");
    }
    Ok((replicas, timeout))
}

/// WAITAOF's arguments as Redis 7.2 reads them, in its order: (numlocal, numreplicas,
/// timeout in ms, 0 for none), or the error text.
pub fn parse_aof_arguments(
    local: &[u8],
    replicas: &[u8],
    timeout: &[u8],
) -> Result<(bool, i64, i64), &'static str> {
    const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
    let local = crate::resp::parse_i64(local).ok_or(NOT_AN_INTEGER)?;
    if !(0..=1).contains(&local) {
        return Err("ERR value is out of range, value must between 0 and 1");
    }
    let replicas = crate::resp::parse_i64(replicas).ok_or(NOT_AN_INTEGER)?;
    if replicas < 0 {
        return Err("ERR value is out of range, must be positive");
    }
    let (_, timeout) = parse_arguments(b"0", timeout)?;
    Ok((local == 1, replicas, timeout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::master::{Announced, Replica, ReplicaState};

    fn replication_with_two_online_replicas() -> Replication {
        let mut replication = Replication::default();
        for id in [10, 11] {
            let mut replica = Replica::new(id, "127.0.0.1".into(), Announced::default(), false);
            replica.state = ReplicaState::Online;
            replication.replicas.add(replica);
        }
        replication
    }

    fn wait(offset: i64, replicas: i64) -> WaitFor {
        WaitFor {
            offset,
            replicas,
            aof: None,
        }
    }

    #[test]
    fn clients_are_released_by_the_acknowledgements_they_wait_for() {
        let mut replication = replication_with_two_online_replicas();
        let mut waiting = Waiting::default();
        waiting.add(1, wait(100, 2));
        waiting.add(2, wait(50, 1));
        assert!(waiting.satisfied(&replication).is_empty());
        replication.replicas.acknowledge(10, 120, 0);
        assert_eq!(
            waiting.satisfied(&replication),
            vec![(2, WaitReply::Replicas(1))]
        );
        replication.replicas.acknowledge(11, 100, 0);
        // Client 2 comes first (newest) and is answered with its own count, 2.
        assert_eq!(
            waiting.satisfied(&replication),
            vec![(2, WaitReply::Replicas(2)), (1, WaitReply::Replicas(2))]
        );
        waiting.remove(2);
        assert_eq!(
            waiting.satisfied(&replication),
            vec![(1, WaitReply::Replicas(2))]
        );
    }

    #[test]
    fn waitaof_counts_fsynced_acknowledgements_and_the_local_log() {
        let mut replication = replication_with_two_online_replicas();
        replication.fsynced = Some(super::super::fsynced::Fsynced::default());
        let mut waiting = Waiting::default();
        let aof = |required| {
            Some(LocalFsync {
                required,
                records: 7,
            })
        };
        waiting.add(
            1,
            WaitFor {
                offset: 100,
                replicas: 1,
                aof: aof(true),
            },
        );
        waiting.add(
            2,
            WaitFor {
                offset: 100,
                replicas: 1,
                aof: aof(false),
            },
        );
        waiting.add(3, wait(100, 1));
        // Processed is not fsynced: only WAIT is released.
        replication.replicas.acknowledge(10, 100, 0);
        assert_eq!(
            waiting.satisfied(&replication),
            vec![(3, WaitReply::Replicas(1))]
        );
        waiting.remove(3);
        replication.replicas.acknowledge_fsynced(10, 100);
        let fsynced = WaitReply::Fsynced {
            local: 0,
            replicas: 1,
        };
        assert_eq!(waiting.satisfied(&replication), vec![(2, fsynced)]);
        waiting.remove(2);
        let local = replication.fsynced.as_mut().unwrap();
        local.note(
            4,
            super::super::fsynced::Position {
                records: 7,
                master_offset: 0,
            },
        );
        local.advance(4);
        let both = WaitReply::Fsynced {
            local: 1,
            replicas: 1,
        };
        assert_eq!(waiting.satisfied(&replication), vec![(1, both)]);
        assert_eq!(waiting.get(1).unwrap().reply_now(&replication), both);
    }

    #[test]
    fn waitaof_arguments_are_read_as_redis_7_2_reads_them() {
        assert_eq!(parse_aof_arguments(b"1", b"2", b"0"), Ok((true, 2, 0)));
        assert_eq!(parse_aof_arguments(b"0", b"0", b"10"), Ok((false, 0, 10)));
        assert_eq!(
            parse_aof_arguments(b"2", b"0", b"0"),
            Err("ERR value is out of range, value must between 0 and 1")
        );
        assert_eq!(
            parse_aof_arguments(b"x", b"0", b"0"),
            Err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            parse_aof_arguments(b"0", b"-1", b"0"),
            Err("ERR value is out of range, must be positive")
        );
        assert_eq!(
            parse_aof_arguments(b"0", b"1", b"-1"),
            Err("ERR timeout is negative")
        );
    }

    #[test]
    fn arguments_are_read_as_redis_reads_them() {
        assert_eq!(parse_arguments(b"1", b"0"), Ok((1, 0)));
        assert_eq!(parse_arguments(b"-3", b"250"), Ok((-3, 250)));
        assert_eq!(
            parse_arguments(b"x", b"0"),
            Err("ERR value is not an integer or out of range")
        );
        assert_eq!(
            parse_arguments(b"1", b"1.5"),
            Err("ERR timeout is not an integer or out of range")
        );
        assert_eq!(parse_arguments(b"1", b"-1"), Err("ERR timeout is negative"));
    }
}
