//! The master's side of replication: its replicas (each one a session that asked for the
//! stream with PSYNC or SYNC), their states, what they announced with REPLCONF, the
//! offsets they acknowledged; the PSYNC decision (`+CONTINUE` from the backlog, or a full
//! resync); and `min-replicas-to-write` / `min-replicas-max-lag`, which refuse writes
//! while too few replicas acknowledge in time.
//!
//! The sockets are the event loop's (`server::replicas`): here a replica is its client id
//! and what Redis's `client` keeps for a replica (`replstate`, `repl_ack_off`,
//! `repl_ack_time`, `slave_listening_port`, `slave_addr`, `slave_capa`).

use super::backlog::Backlog;
use super::ids::ReplicationIds;

/// Where a replica is in its synchronisation (Redis's `SLAVE_STATE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaState {
    /// Needs a full sync that has not started (another background job runs): nothing of
    /// the stream is kept for it yet.
    WaitSnapshotStart,
    /// `+FULLRESYNC` sent; its snapshot is being written, and the stream since the
    /// snapshot's point accumulates in its output, unsent.
    WaitSnapshotEnd,
    /// The snapshot file goes out, then the accumulated stream.
    SendingSnapshot,
    /// A diskless sync: the snapshot goes to its socket as it is written, the stream
    /// since the snapshot's point held behind it. INFO calls it `wait_bgsave`, as Redis
    /// does until its child has written the whole snapshot.
    StreamingSnapshot,
    /// Receives the stream as it is written.
    Online,
}

impl ReplicaState {
    /// INFO's `state=` (Redis's `replstateToString`).
    pub fn info_name(self) -> &'static str {
        match self {
            ReplicaState::WaitSnapshotStart
            | ReplicaState::WaitSnapshotEnd
            | ReplicaState::StreamingSnapshot => "wait_bgsave",
            ReplicaState::SendingSnapshot => "send_bulk",
            ReplicaState::Online => "online",
        }
    }

    /// Whether the stream is appended to its output (Redis's `canFeedReplicaReplBuffer`).
    pub fn takes_stream(self) -> bool {
        self != ReplicaState::WaitSnapshotStart
    }
}

/// What a connection told about itself with REPLCONF before it became a replica (kept
/// with its session: Redis keeps it in the client).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Announced {
    /// `listening-port`: the port its own clients reach it on (0: not said).
    pub listening_port: i64,
    /// `ip-address`: the address to list it under instead of the connection's.
    pub ip_address: Option<String>,
    /// `capa eof`: it can read a snapshot streamed with the `$EOF:` framing.
    pub capa_eof: bool,
    /// `capa psync2`: it understands `+CONTINUE <replid>`.
    pub capa_psync2: bool,
    /// `rdb-only 1`: it wants the snapshot only, not the stream after it.
    pub rdb_only: bool,
    /// `rdb-filter-only`: it wants a filtered snapshot, with no keys, and the function
    /// libraries if `true` (`functions`, the one filter Redis 7.0 knows).
    pub rdb_filter: Option<bool>,
}

/// One replica.
#[derive(Clone, Debug)]
pub struct Replica {
    pub client_id: u64,
    pub state: ReplicaState,
    /// The address INFO and ROLE list it under: its announced `ip-address`, else the
    /// connection's peer address.
    pub ip: String,
    pub announced: Announced,
    /// The stream offset it said it processed (REPLCONF ACK); 0 until it says.
    pub ack_offset: i64,
    /// The stream offset it said its own log has fsynced (`REPLCONF ACK … FACK`, Redis
    /// 7.2's `repl_aof_off`); 0 until it says. Redis 7.0 replicas never do.
    pub fack_offset: i64,
    /// When it last acknowledged (or sent a newline), Unix seconds.
    pub ack_time: i64,
    /// Came with SYNC, not PSYNC: it sends no acknowledgements, so no timeout applies.
    pub pre_psync: bool,
    /// The offset its snapshot was taken at (what `+FULLRESYNC` told it).
    pub sync_offset: i64,
    /// It sent REPLCONF ACK since its diskless snapshot ended: the stream may follow.
    pub acknowledged_since_sync: bool,
}

impl Replica {
    pub fn new(client_id: u64, ip: String, announced: Announced, pre_psync: bool) -> Replica {
        Replica {
            client_id,
            state: ReplicaState::WaitSnapshotStart,
            ip,
            announced,
            ack_offset: 0,
            fack_offset: 0,
            ack_time: crate::clock::unix_seconds(),
            pre_psync,
            sync_offset: 0,
            acknowledged_since_sync: false,
        }
    }

    /// How the log names it (Redis's `replicationGetSlaveName`).
    pub fn name(&self) -> String {
        replica_name(&self.ip, &self.announced, self.client_id)
    }

    /// Seconds since its last acknowledgement (INFO's `lag=`: 0 unless online).
    pub fn lag_seconds(&self, now_seconds: i64) -> i64 {
        if self.state == ReplicaState::Online {
            now_seconds - self.ack_time
        } else {
            0
        }
    }
}

/// How the log names a replica at `ip` (Redis's `replicationGetSlaveName`): its address
/// and listening port.
pub fn replica_name(ip: &str, announced: &Announced, client_id: u64) -> String {
    if ip.is_empty() {
        format!("client id #{client_id}")
    } else if announced.listening_port != 0 {
        if ip.contains(':') {
            format!("[{ip}]:{}", announced.listening_port)
        } else {
            format!("{ip}:{}", announced.listening_port)
        }
    } else {
        format!("{ip}:<unknown-replica-port>")
    }
}

/// The replicas, in the order they became replicas (INFO's `slaveN` order).
#[derive(Debug, Default)]
pub struct Replicas {
    list: Vec<Replica>,
    /// Online replicas whose last acknowledgement is within `min-replicas-max-lag`
    /// (Redis's `repl_good_slaves_count`, refreshed by the cron and by changes).
    good: usize,
}

impl Replicas {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Replica> {
        self.list.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Replica> {
        self.list.iter_mut()
    }

    pub fn get(&self, client_id: u64) -> Option<&Replica> {
        self.list.iter().find(|r| r.client_id == client_id)
    }

    pub fn get_mut(&mut self, client_id: u64) -> Option<&mut Replica> {
        self.list.iter_mut().find(|r| r.client_id == client_id)
    }

    pub fn add(&mut self, replica: Replica) {
        debug_assert!(self.get(replica.client_id).is_none());
        self.list.push(replica);
    }

    /// Forgets a replica whose connection closed; returns it if it was one.
    pub fn remove(&mut self, client_id: u64) -> Option<Replica> {
        let index = self.list.iter().position(|r| r.client_id == client_id)?;
        Some(self.list.remove(index))
    }

    /// Ids of the replicas in `state`.
    pub fn in_state(&self, state: ReplicaState) -> Vec<u64> {
        self.list
            .iter()
            .filter(|r| r.state == state)
            .map(|r| r.client_id)
            .collect()
    }

    pub fn any_in(&self, state: ReplicaState) -> bool {
        self.list.iter().any(|r| r.state == state)
    }

    /// REPLCONF ACK from replica `client_id` (ignored from anyone else, as Redis does).
    pub fn acknowledge(&mut self, client_id: u64, offset: i64, now_seconds: i64) {
        if let Some(replica) = self.get_mut(client_id) {
            replica.ack_offset = replica.ack_offset.max(offset);
            replica.ack_time = now_seconds;
            replica.acknowledged_since_sync = true;
        }
    }

    /// The `FACK <offset>` of a REPLCONF ACK from replica `client_id`: its log has
    /// fsynced the stream up to `offset`.
    pub fn acknowledge_fsynced(&mut self, client_id: u64, offset: i64) {
        if let Some(replica) = self.get_mut(client_id) {
            replica.fack_offset = replica.fack_offset.max(offset);
        }
    }

    /// A newline from replica `client_id` (a replica loading a big snapshot sends them):
    /// alive, though it acknowledges nothing.
    pub fn heard_from(&mut self, client_id: u64, now_seconds: i64) {
        if let Some(replica) = self.get_mut(client_id) {
            replica.ack_time = now_seconds;
        }
    }

    /// Online replicas that acknowledged stream offset `offset` (Redis's
    /// `replicationCountAcksByOffset`).
    pub fn acknowledged(&self, offset: i64) -> usize {
        self.list
            .iter()
            .filter(|r| r.state == ReplicaState::Online && r.ack_offset >= offset)
            .count()
    }

    /// Online replicas whose log fsynced stream offset `offset` (Redis 7.2's
    /// `replicationCountAOFAcksByOffset`).
    pub fn fsync_acknowledged(&self, offset: i64) -> usize {
        self.list
            .iter()
            .filter(|r| r.state == ReplicaState::Online && r.fack_offset >= offset)
            .count()
    }

    /// Redis's `refreshGoodSlavesCount` (nothing counted unless both directives are set).
    pub fn refresh_good(&mut self, limits: WriteQuorum, now_seconds: i64) {
        if !limits.is_set() {
            return;
        }
        self.good = self
            .list
            .iter()
            .filter(|r| {
                r.state == ReplicaState::Online
                    && now_seconds - r.ack_time <= limits.max_lag_seconds as i64
            })
            .count();
    }

    /// INFO's `min_slaves_good_slaves`.
    pub fn good(&self) -> usize {
        self.good
    }

    /// Redis's `checkGoodReplicasStatus`: whether writes may run now.
    pub fn enough_for_writes(&self, limits: WriteQuorum) -> bool {
        !limits.is_set() || self.good >= limits.replicas_min as usize
    }
}

/// `min-replicas-to-write` and `min-replicas-max-lag`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteQuorum {
    pub replicas_min: u64,
    pub max_lag_seconds: u64,
}

impl WriteQuorum {
    /// Both must be non-zero for the rule to apply (Redis's).
    pub fn is_set(self) -> bool {
        self.replicas_min != 0 && self.max_lag_seconds != 0
    }
}

/// What PSYNC or SYNC asks of the event loop, which owns the session's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// `+CONTINUE` and the backlog since the replica's offset are in the reply: the
    /// session is an online replica, fed the stream from the end of this turn.
    Continued,
    /// The replica waits for a full sync (`ReplicaState::WaitSnapshotStart`).
    FullSync,
}

/// Redis's reply to a write refused for want of replicas.
pub const NOT_ENOUGH_REPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Why a PSYNC cannot continue from the backlog (the log line Redis writes for each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FullSyncReason {
    /// PSYNC ? -1: the replica asks for a full sync.
    Requested,
    /// The replica names another history.
    OtherHistory { asked: String },
    /// It names the previous history, but past the point where this one left it.
    PastSecondId { asked_offset: i64 },
    /// The backlog does not hold what it misses (or there is no backlog).
    NoBacklog { asked_offset: i64, ahead: bool },
}

/// Redis's `masterTryPartialResynchronization`: Ok when the backlog can continue the
/// replica's stream from `offset` (the first byte it lacks).
pub fn try_partial(
    ids: &ReplicationIds,
    backlog: Option<&Backlog>,
    master_offset: u64,
    replid: &[u8],
    offset: i64,
) -> Result<(), FullSyncReason> {
    if !ids.continues(replid, offset) {
        return Err(if replid.first() == Some(&b'?') {
            FullSyncReason::Requested
        } else if replid.eq_ignore_ascii_case(ids.replid2.as_bytes()) {
            FullSyncReason::PastSecondId {
                asked_offset: offset,
            }
        } else {
            FullSyncReason::OtherHistory {
                asked: String::from_utf8_lossy(replid).into_owned(),
            }
        });
    }
    match backlog {
        Some(backlog) if offset >= 0 && backlog.covers(offset as u64) => Ok(()),
        _ => Err(FullSyncReason::NoBacklog {
            asked_offset: offset,
            ahead: offset > master_offset as i64,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_continues_only_its_history_within_the_backlog() {
        let ids = ReplicationIds::default();
        // Blocks of 10: 110 bytes of history are kept, from offset 141.
        let mut backlog = Backlog::with_blocks(100, 1, 10);
        for _ in 0..25 {
            backlog.append(&[b'x'; 10]);
        }
        let id = ids.replid.as_bytes();
        assert_eq!(try_partial(&ids, Some(&backlog), 250, id, 141), Ok(()));
        assert_eq!(try_partial(&ids, Some(&backlog), 250, id, 251), Ok(()));
        assert!(matches!(
            try_partial(&ids, Some(&backlog), 250, id, 140),
            Err(FullSyncReason::NoBacklog { ahead: false, .. })
        ));
        assert!(matches!(
            try_partial(&ids, Some(&backlog), 250, id, 252),
            Err(FullSyncReason::NoBacklog { ahead: true, .. })
        ));
        assert_eq!(
            try_partial(&ids, Some(&backlog), 250, b"?", -1),
            Err(FullSyncReason::Requested)
        );
        assert!(matches!(
            try_partial(&ids, None, 250, id, 251),
            Err(FullSyncReason::NoBacklog { .. })
        ));
        assert!(matches!(
            try_partial(&ids, Some(&backlog), 250, b"0123", 200),
            Err(FullSyncReason::OtherHistory { .. })
        ));
    }

    #[test]
    fn good_replicas_are_online_and_recent() {
        let quorum = WriteQuorum {
            replicas_min: 2,
            max_lag_seconds: 10,
        };
        let mut replicas = Replicas::default();
        for id in 1..=3 {
            let mut replica = Replica::new(id, "127.0.0.1".into(), Announced::default(), false);
            replica.state = ReplicaState::Online;
            replica.ack_time = 1000;
            replicas.add(replica);
        }
        replicas.get_mut(3).unwrap().state = ReplicaState::WaitSnapshotEnd;
        replicas.refresh_good(quorum, 1010);
        assert_eq!(replicas.good(), 2);
        assert!(replicas.enough_for_writes(quorum));
        replicas.acknowledge(1, 77, 1011);
        replicas.refresh_good(quorum, 1011);
        assert_eq!(replicas.good(), 1);
        assert!(!replicas.enough_for_writes(quorum));
        assert!(replicas.enough_for_writes(WriteQuorum::default()));
        assert_eq!(replicas.acknowledged(77), 1);
        assert_eq!(replicas.acknowledged(0), 2);
    }
}
