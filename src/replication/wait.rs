//! WAIT numreplicas timeout: a client waits until that many replicas acknowledged the
//! stream up to its own last write (Redis's `woff`), or the timeout passes; the reply is
//! the number that did.
//!
//! WAIT asks every replica for an acknowledgement (`REPLCONF GETACK *` in the stream,
//! sent once per loop turn however many clients wait, as Redis groups them before it
//! sleeps); each `REPLCONF ACK` that comes back may release waiting clients. The parking
//! itself (the session, its deadline) is the event loop's, as for blocking commands.

use super::master::Replicas;

/// What a client parked by WAIT waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitFor {
    /// The stream offset of its last write.
    pub offset: i64,
    /// How many replicas must have acknowledged it.
    pub replicas: i64,
}

/// The clients parked by WAIT, newest first (Redis adds them at the head of its list).
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

    /// The clients whose wait is over, with the count each is answered (Redis's
    /// `processClientsWaitingReplicas`, whose shortcut is kept: a client asking no more
    /// than one just released is answered that one's count). They stay listed until
    /// removed.
    pub fn satisfied(&self, replicas: &Replicas) -> Vec<(u64, usize)> {
        let mut released = Vec::new();
        let mut last: Option<(i64, usize)> = None;
        for &(id, wait) in &self.clients {
            match last {
                Some((offset, count)) if offset >= wait.offset && count as i64 >= wait.replicas => {
                    released.push((id, count));
                }
                _ => {
                    let count = replicas.acknowledged(wait.offset);
                    if count as i64 >= wait.replicas {
                        last = Some((wait.offset, count));
                        released.push((id, count));
                    }
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::master::{Announced, Replica, ReplicaState};

    #[test]
    fn clients_are_released_by_the_acknowledgements_they_wait_for() {
        let mut replicas = Replicas::default();
        for id in [10, 11] {
            let mut replica = Replica::new(id, "127.0.0.1".into(), Announced::default(), false);
            replica.state = ReplicaState::Online;
            replicas.add(replica);
        }
        let mut waiting = Waiting::default();
        waiting.add(
            1,
            WaitFor {
                offset: 100,
                replicas: 2,
            },
        );
        waiting.add(
            2,
            WaitFor {
                offset: 50,
                replicas: 1,
            },
        );
        assert!(waiting.satisfied(&replicas).is_empty());
        replicas.acknowledge(10, 120, 0);
        assert_eq!(waiting.satisfied(&replicas), vec![(2, 1)]);
        replicas.acknowledge(11, 100, 0);
        // Client 2 comes first (newest) and is answered with its own count, 2.
        assert_eq!(waiting.satisfied(&replicas), vec![(2, 2), (1, 2)]);
        waiting.remove(2);
        assert_eq!(waiting.satisfied(&replicas), vec![(1, 2)]);
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
