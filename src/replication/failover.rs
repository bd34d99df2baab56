//! FAILOVER: a master hands its role to one of its replicas, with no write lost (Redis
//! 7.0's coordinated failover, `failoverCommand` and `updateFailoverStatus`).
//!
//! The steps: the master holds clients' writes (`pause::Pause::hold(Hold::Failover)`, as
//! CLIENT PAUSE WRITE), so its stream stops growing; it waits until the target replica —
//! the one named by `TO host port`, or else the first that gets there — acknowledges the
//! master's whole stream (`REPLCONF ACK`, which a replica sends every second); then it
//! becomes a replica of the target and, in its handshake, sends `PSYNC <its replid>
//! <its offset + 1> FAILOVER`. The target, whose master's ID that is, promotes itself and
//! answers the PSYNC as a master: `+CONTINUE` with its new ID (the old one is its second
//! ID, valid up to that offset). Whatever the answer, the hold ends then; an answer that
//! is neither `+CONTINUE` nor `+FULLRESYNC` aborts the failover, and the instance is a
//! master again.
//!
//! Here is the state and its decisions; the command is `commands::failover`, the turns'
//! checks and the switch are the event loop's (`server::failover`).

use super::master::{ReplicaState, Replicas};

/// Where a failover is (INFO's `master_failover_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailoverState {
    #[default]
    None,
    /// Writes are held; waiting for the target to acknowledge the whole stream.
    WaitingForSync,
    /// This instance is now the target's replica: its handshake sends `PSYNC … FAILOVER`.
    InProgress,
}

impl FailoverState {
    /// INFO's `master_failover_state` (Redis's `getFailoverStateString`).
    pub fn info_name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitingForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// The failover under way, if any.
#[derive(Clone, Debug, Default)]
pub struct Failover {
    pub state: FailoverState,
    /// The replica failed over to: named by `TO`, or chosen once one caught up.
    pub target: Option<Target>,
    /// Unix ms at which a waiting failover is aborted (or, with FORCE, goes on anyway).
    pub end_ms: Option<i64>,
    pub force: bool,
}

/// A replica as FAILOVER names it: the address it is listed under and its listening port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    /// As given (Redis reads it as a long): a port no replica announced matches none.
    pub port: i64,
}

/// What FAILOVER's arguments ask for (after `FAILOVER ABORT`, handled on its own).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub target: Option<Target>,
    /// TIMEOUT, in ms (> 0).
    pub timeout_ms: Option<i64>,
    pub force: bool,
}

/// Redis's replies to FAILOVER's arguments and preconditions.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const SYNTAX: &str = "ERR syntax error";
pub const TIMEOUT_NOT_POSITIVE: &str = "ERR FAILOVER timeout must be greater than 0";
pub const NONE_IN_PROGRESS: &str = "ERR No failover in progress.";
pub const ALREADY_IN_PROGRESS: &str = "ERR FAILOVER already in progress.";
pub const IS_REPLICA: &str = "ERR FAILOVER is not valid when server is a replica.";
pub const NO_REPLICAS: &str = "ERR FAILOVER requires connected replicas.";
pub const FORCE_NEEDS_TIMEOUT_AND_TARGET: &str =
    "ERR FAILOVER with force option requires both a timeout and target HOST and IP.";
pub const NOT_A_REPLICA: &str = "ERR FAILOVER target HOST and PORT is not a replica.";
pub const NOT_ONLINE: &str = "ERR FAILOVER target replica is not online.";

/// Reads FAILOVER's arguments in Redis's order: each option once, `TO` with two words
/// after it, `TIMEOUT` with one; the first error wins.
pub fn parse(args: &[&[u8]]) -> Result<Request, &'static str> {
    let mut request = Request::default();
    let mut j = 0;
    while j < args.len() {
        let word = args[j];
        if word.eq_ignore_ascii_case(b"timeout")
            && j + 1 < args.len()
            && request.timeout_ms.is_none()
        {
            let timeout = crate::resp::parse_i64(args[j + 1]).ok_or(NOT_INTEGER)?;
            if timeout <= 0 {
                return Err(TIMEOUT_NOT_POSITIVE);
            }
            request.timeout_ms = Some(timeout);
            j += 2;
        } else if word.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && request.target.is_none()
        {
            let port = crate::resp::parse_i64(args[j + 2]).ok_or(NOT_INTEGER)?;
            request.target = Some(Target {
                host: String::from_utf8_lossy(args[j + 1]).into_owned(),
                port,
            });
            j += 3;
        } else if word.eq_ignore_ascii_case(b"force") && !request.force {
            request.force = true;
            j += 1;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(request)
}

/// The replica listed under `target`'s address and port (Redis's `findReplica`: the
/// address compared without case).
pub fn find<'a>(replicas: &'a Replicas, target: &Target) -> Option<&'a super::master::Replica> {
    replicas.iter().find(|r| {
        r.ip.eq_ignore_ascii_case(&target.host) && r.announced.listening_port == target.port
    })
}

/// Whether FAILOVER may start now, with these replicas (the checks after the arguments,
/// in Redis's order).
pub fn check_start(
    failover: &Failover,
    is_replica: bool,
    replicas: &Replicas,
    request: &Request,
) -> Result<(), &'static str> {
    if failover.state != FailoverState::None {
        return Err(ALREADY_IN_PROGRESS);
    }
    if is_replica {
        return Err(IS_REPLICA);
    }
    if replicas.is_empty() {
        return Err(NO_REPLICAS);
    }
    if request.force && (request.timeout_ms.is_none() || request.target.is_none()) {
        return Err(FORCE_NEEDS_TIMEOUT_AND_TARGET);
    }
    if let Some(target) = &request.target {
        let replica = find(replicas, target).ok_or(NOT_A_REPLICA)?;
        if replica.state != ReplicaState::Online {
            return Err(NOT_ONLINE);
        }
    }
    Ok(())
}

/// What a waiting failover does next (Redis's `updateFailoverStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Keep waiting.
    Wait,
    /// The timeout passed without FORCE.
    Abort(&'static str),
    /// Become the replica of `target` (caught up, or FORCE at the timeout).
    SwitchTo { target: Target, forced: bool },
}

impl Failover {
    /// The next step of a waiting failover at `now_ms`, the master's stream at `offset`.
    /// A target chosen here (the first replica to have acknowledged the whole stream) is
    /// recorded.
    pub fn step(&mut self, now_ms: i64, replicas: &Replicas, offset: i64) -> Step {
        if self.state != FailoverState::WaitingForSync {
            return Step::Wait;
        }
        if let Some(end) = self.end_ms
            && end <= now_ms
        {
            return match (&self.target, self.force) {
                (Some(target), true) => Step::SwitchTo {
                    target: target.clone(),
                    forced: true,
                },
                _ => Step::Abort("Replica never caught up before timeout"),
            };
        }
        let caught_up = match &self.target {
            Some(target) => find(replicas, target).is_some_and(|r| r.ack_offset == offset),
            None => match replicas.iter().find(|r| r.ack_offset == offset) {
                Some(replica) => {
                    self.target = Some(Target {
                        host: replica.ip.clone(),
                        port: replica.announced.listening_port,
                    });
                    true
                }
                None => false,
            },
        };
        match (&self.target, caught_up) {
            (Some(target), true) => Step::SwitchTo {
                target: target.clone(),
                forced: false,
            },
            _ => Step::Wait,
        }
    }

    /// How the log names the target: `host:port`, or `any replica` before one is chosen
    /// (Redis's `abortFailover` lines).
    pub fn target_name(&self) -> String {
        match &self.target {
            Some(target) => format!("{}:{}", target.host, target.port),
            None => "any replica".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::master::{Announced, Replica};

    fn replicas(entries: &[(&str, i64, ReplicaState, i64)]) -> Replicas {
        let mut replicas = Replicas::default();
        for (id, (ip, port, state, ack)) in entries.iter().enumerate() {
            let announced = Announced {
                listening_port: *port,
                ..Announced::default()
            };
            let mut replica = Replica::new(id as u64 + 1, ip.to_string(), announced, false);
            replica.state = *state;
            replica.ack_offset = *ack;
            replicas.add(replica);
        }
        replicas
    }

    fn parsed(words: &str) -> Result<Request, &'static str> {
        let args: Vec<&[u8]> = words.split_whitespace().map(str::as_bytes).collect();
        parse(&args)
    }

    #[test]
    fn arguments_are_read_in_redis_s_order() {
        assert_eq!(parsed(""), Ok(Request::default()));
        let request = parsed("to h 7 force timeout 10").unwrap();
        assert_eq!(request.target.unwrap().port, 7);
        assert!(request.force);
        assert_eq!(request.timeout_ms, Some(10));
        assert_eq!(parsed("timeout 0"), Err(TIMEOUT_NOT_POSITIVE));
        assert_eq!(parsed("timeout x"), Err(NOT_INTEGER));
        assert_eq!(parsed("timeout"), Err(SYNTAX));
        assert_eq!(parsed("timeout 5 timeout 6"), Err(SYNTAX));
        assert_eq!(parsed("to h"), Err(SYNTAX));
        assert_eq!(parsed("to h p"), Err(NOT_INTEGER));
        assert_eq!(parsed("force force"), Err(SYNTAX));
        assert_eq!(parsed("abort timeout 5"), Err(SYNTAX));
    }

    #[test]
    fn the_start_is_refused_as_redis_refuses_it() {
        let none = Replicas::default();
        let request = Request::default();
        let idle = Failover::default();
        assert_eq!(check_start(&idle, false, &none, &request), Err(NO_REPLICAS));
        assert_eq!(check_start(&idle, true, &none, &request), Err(IS_REPLICA));
        let busy = Failover {
            state: FailoverState::WaitingForSync,
            ..Failover::default()
        };
        assert_eq!(
            check_start(&busy, true, &none, &request),
            Err(ALREADY_IN_PROGRESS)
        );
        let some = replicas(&[
            ("127.0.0.1", 7000, ReplicaState::Online, 0),
            ("127.0.0.1", 7001, ReplicaState::WaitSnapshotEnd, 0),
        ]);
        let to = |port| Request {
            target: Some(Target {
                host: "127.0.0.1".into(),
                port,
            }),
            ..Request::default()
        };
        assert_eq!(check_start(&idle, false, &some, &to(7000)), Ok(()));
        assert_eq!(
            check_start(&idle, false, &some, &to(7002)),
            Err(NOT_A_REPLICA)
        );
        assert_eq!(check_start(&idle, false, &some, &to(7001)), Err(NOT_ONLINE));
        let forced = Request {
            force: true,
            ..to(7000)
        };
        assert_eq!(
            check_start(&idle, false, &some, &forced),
            Err(FORCE_NEEDS_TIMEOUT_AND_TARGET)
        );
    }

    #[test]
    fn a_waiting_failover_switches_to_the_first_replica_caught_up_or_times_out() {
        let list = replicas(&[
            ("10.0.0.1", 7000, ReplicaState::Online, 90),
            ("10.0.0.2", 7001, ReplicaState::Online, 100),
        ]);
        let mut failover = Failover {
            state: FailoverState::WaitingForSync,
            end_ms: Some(1_000),
            ..Failover::default()
        };
        assert_eq!(failover.step(10, &list, 101), Step::Wait);
        assert_eq!(failover.target, None);
        let step = failover.step(10, &list, 100);
        assert!(
            matches!(step, Step::SwitchTo { ref target, forced: false } if target.port == 7001)
        );
        let mut named = Failover {
            state: FailoverState::WaitingForSync,
            target: Some(Target {
                host: "10.0.0.1".into(),
                port: 7000,
            }),
            end_ms: Some(1_000),
            force: true,
        };
        assert_eq!(named.step(10, &list, 100), Step::Wait);
        assert!(matches!(
            named.step(1_000, &list, 100),
            Step::SwitchTo { forced: true, .. }
        ));
        named.force = false;
        assert!(matches!(named.step(1_000, &list, 100), Step::Abort(_)));
    }
}
