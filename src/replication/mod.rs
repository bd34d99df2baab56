//! Replication as Redis 7.0 speaks it, with real `redis-server` replicas: the protocol
//! and its state, not the sockets.
//!
//! **The stream is the effects stream.** What a master sends its replicas is what it
//! logs (`crate::effects`: effects rather than requests, absolute expiry, `SELECT` on a
//! database change, `MULTI … EXEC` around a transaction or a script, expirations and
//! evictions as `DEL`). At the end of each event-loop turn the loop appends the turn's
//! bytes to the backlog and to each replica's output, then hands them to the log writer
//! (`server::replicas`). Records that replicas need and the log does not — a `PING` every
//! `repl-ping-replica-period`, `REPLCONF GETACK *` for WAIT — go to the stream only.
//! `master_repl_offset` counts the stream's bytes; there is a stream (and an offset that
//! moves) only while there is a backlog, created when the first replica comes, as in
//! Redis.
//!
//! The rooms: `backlog` (the ring of the stream's last bytes), `ids` (the history's IDs),
//! `master` (the replicas, their states and acknowledgements, the PSYNC decision,
//! `min-replicas-to-write`), `full_sync` (the snapshot a replica loads and its transfer),
//! `wait` (WAIT and WAITAOF), `fsynced` (how far the log is fsynced, in the positions
//! WAITAOF and a replica's FACK speak), `failover` (FAILOVER). The commands are
//! `commands::replication`; the sockets, the snapshot job and the cron are the event
//! loop's (`server::replicas`).

pub mod backlog;
pub mod failover;
pub mod fsynced;
pub mod full_sync;
pub mod ids;
pub mod master;
pub mod replica;
pub mod sync_pipe;
pub mod wait;

use backlog::Backlog;
use ids::ReplicationIds;
use master::Replicas;

/// The replication state of this instance, a master or a replica (issue 17). A replica's
/// IDs, offset and backlog are its master's history as it came (`follow`, and the
/// master's stream proxied to its own replicas by `server::replicas`).
#[derive(Debug)]
pub struct Replication {
    pub ids: ReplicationIds,
    /// `master_repl_offset`: the stream's bytes so far.
    pub offset: u64,
    /// The stream's last bytes, while there is a stream.
    pub backlog: Option<Backlog>,
    pub replicas: Replicas,
    /// Clients parked by WAIT and WAITAOF.
    pub waiting: wait::Waiting,
    /// How far the log is fsynced (WAITAOF, a replica's FACK); None with the log off
    /// (`appendonly no`), when Redis 7.2's `fsynced_reploff` is -1.
    pub fsynced: Option<fsynced::Fsynced>,
    pub stats: ReplicationStats,
    /// A WAIT asked for acknowledgements: `REPLCONF GETACK *` goes into the stream at
    /// the end of the turn (once, however many asked).
    pub ack_requested: bool,
    /// When the last replica left, Unix seconds: the backlog is freed
    /// `repl-backlog-ttl` seconds later.
    pub no_replicas_since: i64,
    /// Bytes the replicas' own output buffers hold (by capacity; what precedes the
    /// stream), refreshed by the loop (`not_counted_for_eviction`).
    pub replica_output_bytes: u64,
    /// Runs of the once-a-second replication cron (the PING period counts them).
    pub cron_loops: u64,
    /// A full sync's snapshot is being written (a background job: BGSAVE and
    /// BGREWRITEAOF wait for it, as for another's).
    pub full_sync_in_progress: bool,
    /// The master this instance replicates (REPLICAOF): None while it is a master.
    pub master: Option<replica::MasterLink>,
    /// REPLICAOF changed the master: the loop drops the old link and starts the new one
    /// at the end of the turn (also when it ran inside EXEC).
    pub link_changed: bool,
    /// FAILOVER under way (`failover`).
    pub failover: failover::Failover,
    /// REPLICAOF turned a master into a replica or back, at this length of the turn's
    /// effects: the records before it were made in the old role, those after in the new
    /// one, and only a master's own records go to its stream (a replica's stream is its
    /// master's, proxied).
    pub role_changed_at: Option<usize>,
    /// The replicas attached when this replica was promoted (`unset_master`): dropped at
    /// the end of the turn so that they learn the new ID (Redis's
    /// `replicationUnsetMaster` drops them at once). One attached later in the turn — the
    /// old master whose `PSYNC … FAILOVER` promoted it — stays.
    pub replicas_at_promotion: Vec<u64>,
}

/// INFO stats' replication counters (Redis's names).
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplicationStats {
    /// `sync_full`: full syncs served.
    pub sync_full: u64,
    /// `sync_partial_ok`: PSYNCs continued from the backlog.
    pub sync_partial_ok: u64,
    /// `sync_partial_err`: PSYNCs that asked to continue and could not.
    pub sync_partial_err: u64,
    /// `total_net_repl_output_bytes`: stream and snapshot bytes sent to replicas.
    pub output_bytes: u64,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            ids: ReplicationIds::default(),
            offset: 0,
            backlog: None,
            replicas: Replicas::default(),
            waiting: wait::Waiting::default(),
            fsynced: None,
            stats: ReplicationStats::default(),
            ack_requested: false,
            no_replicas_since: crate::clock::unix_seconds(),
            replica_output_bytes: 0,
            cron_loops: 0,
            full_sync_in_progress: false,
            master: None,
            link_changed: false,
            failover: failover::Failover::default(),
            role_changed_at: None,
            replicas_at_promotion: Vec::new(),
        }
    }
}

impl Replication {
    /// Whether this instance is a replica (of a master set by REPLICAOF).
    pub fn is_replica(&self) -> bool {
        self.master.is_some()
    }

    /// Whether this instance is a replica whose link to its master is down.
    pub fn master_link_down(&self) -> bool {
        self.master
            .as_ref()
            .is_some_and(|m| m.state != replica::LinkState::Connected)
    }

    /// The part of `effects` (the records not yet handed on) that goes to the stream: a
    /// master's own records; none of a replica's.
    pub fn own_records(&mut self, effects: usize) -> std::ops::Range<usize> {
        let own = self.own_range(effects);
        self.role_changed_at = None;
        own
    }

    /// `own_records`, the split kept for the rest of the turn.
    fn own_range(&self, effects: usize) -> std::ops::Range<usize> {
        match self.role_changed_at {
            Some(mark) if self.is_replica() => 0..mark.min(effects),
            Some(mark) => mark.min(effects)..effects,
            None if self.is_replica() => 0..0,
            None => 0..effects,
        }
    }

    /// This instance's place in its replication history now, for a snapshot to record
    /// (Redis's `rdbPopulateSaveInfo`). A replica's: the offset processed, consistent
    /// with the dataset at any moment (it moves with each request applied, a
    /// transaction's at its EXEC), and the database its master's stream is in; None
    /// before its first sync. A master's, while there is a stream: the offset once the
    /// turn's `effects` so far are fed (the dataset has them), and the database the
    /// stream's next record applies to. `resume_own_history` restores it.
    pub fn saved_history(
        &self,
        effects: &crate::effects::Effects,
    ) -> Option<crate::snapshot::SavedHistory> {
        if let Some(link) = &self.master {
            let (replid, offset) = link.history.as_ref()?;
            return Some(crate::snapshot::SavedHistory {
                replid: replid.clone(),
                offset: *offset,
                stream_db: link.stream_db,
            });
        }
        if !self.stream_active() {
            return None;
        }
        Some(crate::snapshot::SavedHistory {
            replid: self.ids.replid.clone(),
            offset: self.offset_after(effects.buffer.len()),
            // Unknown means the next record carries its SELECT: any database will do.
            stream_db: effects.selected_db.unwrap_or(0),
        })
    }

    /// A master started from a snapshot that recorded its history (Redis's
    /// `loadDataFromDisk`): that history becomes the second, shared up to the saved
    /// offset, the stream goes on from there under a new ID, and a backlog holds it from
    /// the first byte on, so that replicas which had all of it continue (PSYNC) instead
    /// of loading a snapshot again.
    pub fn resume_own_history(&mut self, history: &crate::snapshot::SavedHistory, size_bytes: u64) {
        assert!(!self.is_replica(), "a replica follows its master's history");
        self.ids.change();
        self.ids.replid2 = history.replid.clone();
        self.ids.second_offset = history.offset + 1;
        self.offset = history.offset.max(0) as u64;
        self.backlog = Some(Backlog::new(size_bytes.max(1) as usize, self.offset + 1));
        self.no_replicas_since = crate::clock::unix_seconds();
        tracing::info!(
            "continuing the replication history {} from offset {} (saved in the snapshot) as {}",
            history.replid,
            history.offset,
            self.ids.replid
        );
    }

    /// The memory of the stream's buffer as Redis 7 reports it: the backlog's up to
    /// `repl-backlog-size`, and what replicas make it hold beyond that is theirs.
    pub fn buffer_memory(&self) -> BufferMemory {
        let shared = self
            .backlog
            .as_ref()
            .map_or(0, |b| b.allocated_bytes() as u64);
        let size = self.backlog.as_ref().map_or(0, |b| b.size_bytes() as u64);
        let beyond = if self.replicas.is_empty() {
            0
        } else {
            shared.saturating_sub(size)
        };
        BufferMemory {
            backlog: shared - beyond,
            replicas: beyond,
        }
    }

    /// What eviction does not count of replication's memory, as Redis does not count its
    /// replicas' buffers: evicting keys cannot shrink them, and a replica far behind
    /// would empty the dataset. Their share of the buffer, and their own outputs.
    pub fn not_counted_for_eviction(&self) -> u64 {
        self.buffer_memory().replicas + self.replica_output_bytes
    }

    /// Whether there is a stream (a backlog): writes are then counted in the offset.
    pub fn stream_active(&self) -> bool {
        self.backlog.is_some()
    }

    /// Appends the next bytes of the stream to the backlog. Returns false (nothing fed)
    /// when there is no stream.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        let Some(backlog) = &mut self.backlog else {
            return false;
        };
        backlog.append(bytes);
        self.offset += bytes.len() as u64;
        true
    }

    /// Creates the backlog for the first replica (Redis's `createReplicationBacklog`,
    /// after `changeReplicationId` and `clearReplicationId2`: with no backlog there is no
    /// history a replica could continue). Returns true if it was created. A replica's
    /// history is its master's: its backlog starts at the offset processed, same IDs.
    pub fn ensure_backlog(&mut self, size_bytes: u64) -> bool {
        if self.backlog.is_some() {
            return false;
        }
        if self.is_replica() {
            self.backlog = Some(Backlog::new(size_bytes.max(1) as usize, self.offset + 1));
            return true;
        }
        self.ids.change();
        self.ids.clear_second();
        self.backlog = Some(Backlog::new(size_bytes.max(1) as usize, self.offset + 1));
        tracing::info!(
            "Replication backlog created, my new replication IDs are '{}' and '{}'",
            self.ids.replid,
            self.ids.replid2
        );
        true
    }

    /// A full sync from the master: this instance's history is now the master's, from
    /// `offset` (the snapshot's point) on, with a backlog of its own that the master's
    /// stream feeds as it comes — a replica keeps one whether it has replicas or not, so
    /// that its replicas, or its siblings once it is promoted, can continue from it.
    pub fn follow(&mut self, replid: String, offset: i64, size_bytes: u64) {
        self.ids.replid = replid;
        self.ids.clear_second();
        self.offset = offset.max(0) as u64;
        self.backlog = Some(Backlog::new(size_bytes.max(1) as usize, self.offset + 1));
    }

    /// `repl-backlog-ttl` seconds without replicas: the backlog goes, and with it the
    /// history (a new ID, so that no replica continues a history with writes missing).
    pub fn free_backlog(&mut self) {
        self.ids.change();
        self.ids.clear_second();
        self.backlog = None;
    }

    /// The stream offset once the turn's `effects` so far are fed (a client's `woff`:
    /// its write's records are in the turn's effects, fed at the end of the turn), less
    /// those that do not go to the stream (a replica's before a promotion in this turn:
    /// `own_records`). The current offset when there is no stream.
    pub fn offset_after(&self, effects: usize) -> i64 {
        if self.stream_active() {
            (self.offset + self.own_range(effects).len() as u64) as i64
        } else {
            self.offset as i64
        }
    }
}

/// The stream's own records: the keepalive `PING` and WAIT's `REPLCONF GETACK *`.
pub fn ping_record() -> Vec<u8> {
    let mut record = Vec::new();
    crate::resp::encode_command(&mut record, &[b"PING" as &[u8]]);
    record
}

pub fn getack_record() -> Vec<u8> {
    let mut record = Vec::new();
    crate::resp::encode_command(&mut record, &[b"REPLCONF" as &[u8], b"GETACK", b"*"]);
    record
}

/// `Replication::buffer_memory`: INFO's `mem_replication_backlog` and
/// `mem_clients_slaves` (their sum is `mem_total_replication_buffers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferMemory {
    pub backlog: u64,
    pub replicas: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_moves_only_while_there_is_a_backlog() {
        let mut replication = Replication::default();
        let first_id = replication.ids.replid.clone();
        assert!(!replication.feed(b"lost"));
        assert_eq!(replication.offset, 0);
        assert_eq!(replication.offset_after(10), 0);
        assert!(replication.ensure_backlog(1024));
        assert_ne!(replication.ids.replid, first_id);
        assert!(!replication.ensure_backlog(1024));
        assert!(replication.feed(b"0123456789"));
        assert_eq!(replication.offset, 10);
        assert_eq!(replication.offset_after(5), 15);
        let backlog = replication.backlog.as_ref().unwrap();
        assert_eq!(backlog.first_offset(), 1);
        assert_eq!(backlog.len(), 10);
        replication.free_backlog();
        assert!(!replication.stream_active());
        assert_eq!(replication.offset, 10);
    }

    #[test]
    fn a_replica_s_history_and_backlog_are_its_master_s() {
        let mut replication = Replication {
            master: Some(replica::MasterLink::new("h".into(), 1, None)),
            ..Replication::default()
        };
        let master_id = "m".repeat(ids::ID_LEN);
        replication.follow(master_id.clone(), 1000, 64);
        assert_eq!(replication.ids.replid, master_id);
        assert_eq!(replication.offset, 1000);
        let backlog = replication.backlog.as_ref().unwrap();
        assert!(backlog.covers(1001) && !backlog.covers(1000));
        // Its replicas' backlog needs no new history.
        assert!(!replication.ensure_backlog(64));
        replication.backlog = None;
        assert!(replication.ensure_backlog(64));
        assert_eq!(replication.ids.replid, master_id);
        assert_eq!(replication.backlog.as_ref().unwrap().first_offset(), 1001);
    }

    #[test]
    fn only_a_master_s_own_records_go_to_its_stream() {
        let mut replication = Replication::default();
        assert_eq!(replication.own_records(10), 0..10);
        replication.master = Some(replica::MasterLink::new("h".into(), 1, None));
        assert_eq!(replication.own_records(10), 0..0);
        // Turned replica after 4 bytes of the turn's records: those were a master's.
        replication.role_changed_at = Some(4);
        assert_eq!(replication.own_records(10), 0..4);
        assert_eq!(replication.own_records(10), 0..0);
        // Promoted after 4 bytes: those were its master's stream's, proxied already.
        replication.master = None;
        replication.role_changed_at = Some(4);
        assert_eq!(replication.own_records(10), 4..10);
        assert_eq!(replication.own_records(10), 0..10);
    }

    #[test]
    fn a_write_after_a_promotion_in_the_turn_waits_for_its_own_bytes_only() {
        let mut replication = Replication::default();
        assert!(replication.ensure_backlog(64));
        let start = replication.offset_after(0);
        assert_eq!(replication.offset_after(10), start + 10);
        // Promoted after 4 bytes of the turn's records (its master's stream's, which do
        // not go out again): a write ending at byte 10 waits for 6 more bytes.
        replication.role_changed_at = Some(4);
        assert_eq!(replication.offset_after(10), start + 6);
    }

    #[test]
    fn the_stream_s_own_records_are_resp_commands() {
        assert_eq!(ping_record(), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            getack_record(),
            b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n"
        );
    }
}
