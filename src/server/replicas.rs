//! The replicas and the jobs that serve them (the protocol and its state are
//! `crate::replication`; the commands that make a session a replica are
//! `commands::replication`; what goes to a replica's socket is `replica_output`).
//!
//! - **The stream.** `take_effects` hands the effects recorded so far to their consumers:
//!   first the replication stream — the buffer that the backlog and every replica share —
//!   then the log writer. It runs at the end of each turn, and wherever a job must start after every
//!   record so far (a compaction's log switch, a full sync's capture point, a reload).
//!   WAIT's `REPLCONF GETACK *` and the cron's `PING` go into the stream only. A
//!   replica's output waits for the log as a read's reply does (`ReplyShows::Reads`): a
//!   replica never has a write the master's log has not (Redis writes its log first).
//!   On a replica the stream is its master's instead, proxied as it came
//!   (`proxy_master_stream`, chains): its own effects and records go to its log only.
//! - **Attaching.** PSYNC that continues from the backlog leaves `+CONTINUE` in the reply
//!   and makes the replica a reader of the buffer from its offset: it is online at once.
//!   A full sync waits for a snapshot: started now (its point is the stream's offset
//!   now), or shared with one being written, or after another background job. From
//!   `+FULLRESYNC` on, the replica reads the buffer from the snapshot's point, held
//!   behind the snapshot; the buffer keeps that history for it.
//! - **Diskless.** With `repl-diskless-sync` and replicas that read `$EOF:`, the sync
//!   waits `repl-diskless-sync-delay` (or for `-max-replicas`) for more replicas, then
//!   each gets the snapshot from the writer's pipe as it is written (the writer's wake
//!   flushes them), the stream after it on its first ACK. A replica whose socket takes
//!   nothing for `repl-timeout` is dropped.
//! - **The transfer.** When the snapshot is written, each waiting replica gets the file
//!   (`$<len>\r\n` and its bytes) as its socket takes them, then the held stream; then it
//!   is online. The file is removed once every transfer has it open.
//! - **The cron** (once a second, Redis's `replicationCron`): a newline to replicas still
//!   waiting for their snapshot, `PING` every `repl-ping-replica-period`, replicas silent
//!   for `repl-timeout` dropped, the backlog freed `repl-backlog-ttl` after the last
//!   replica left, the good replicas of `min-replicas-to-write` counted.
//!
//! A replica's output is bounded by `client-output-buffer-limit replica` (its hard limit
//! never below the backlog's size, as Redis): one that does not read is dropped, and
//! resyncs when it comes back, so the master's memory stays bounded.

use super::Server;
use super::replica_output::ReplicaLink;
use super::session::{Client, Sessions};
use crate::commands::ReplyShows;
use crate::replication::backlog::Backlog;
use crate::replication::failover::FailoverState;
use crate::replication::full_sync::{self, Transfer};
use crate::replication::master::{Attach, ReplicaState};
use crate::replication::sync_pipe::{PipeStorage, SyncPipe};
use crate::replication::{self, Replication};
use crate::snapshot::{JobOutcome, SnapshotError, SnapshotJob};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// A full sync's snapshot being written (one at a time). The replicas it serves are
/// those in `ReplicaState::WaitSnapshotEnd`.
pub(super) struct FullSync {
    pub job: SnapshotJob,
    pub path: PathBuf,
    /// A diskless sync's pipe (its replicas read it as it is written); None for a
    /// disk-based one.
    pub pipe: Option<Arc<SyncPipe>>,
    /// The stream offset at the snapshot's point (what `+FULLRESYNC` said).
    pub offset: i64,
}

impl FullSync {
    /// Stops the snapshot and waits for its threads (a writer waiting for room in the
    /// pipe is released first).
    pub fn cancel_and_wait(&mut self, keyspace: &mut crate::keyspace::Keyspace) {
        if let Some(pipe) = &self.pipe {
            pipe.fail();
        }
        self.job.cancel_and_wait(keyspace);
    }
}

/// Full syncs started by this process, naming their files.
static FULL_SYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Appends `bytes` to the stream: the shared buffer, which every replica that takes the
/// stream reads; those are listed for a flush. Nothing when there is no stream.
fn feed_stream(
    replication: &mut Replication,
    clients: &mut Sessions,
    touched: &mut Vec<usize>,
    bytes: &[u8],
) {
    if bytes.is_empty() || !replication.feed(bytes) {
        return;
    }
    for replica in replication.replicas.iter() {
        if !replica.state.takes_stream() {
            continue;
        }
        let client = clients
            .token_of(replica.client_id)
            .and_then(|token| clients.get_mut(&token).map(|client| (token, client)));
        match client {
            Some((token, client)) => {
                if client.conn.close_after_reply {
                    continue; // dropped at the end of the turn
                }
                // As Redis writes its log before it writes to replicas: the stream goes
                // out once the log has it (written, or fsynced under `always`), as a
                // read's reply does — and, like one, not held while the log is failing,
                // when writes are refused anyway and PINGs must go on.
                client.state.reply_shows = client.state.reply_shows.max(ReplyShows::Reads);
                touched.push(token);
            }
            // Only a session running a command is out of the table, and no replica runs
            // one while the stream is fed.
            None => tracing::warn!(
                "replica id={} was not in the session table when the stream was fed",
                replica.client_id
            ),
        }
    }
}

impl Server {
    /// A replica applied `bytes` of its master's stream: they go on, as they came, to its
    /// backlog and its own replicas (Redis's `replicationFeedStreamFromMasterStream`),
    /// so that every node of a chain has the same history at the same offsets.
    pub(super) fn proxy_master_stream(&mut self, bytes: &[u8]) {
        feed_stream(
            &mut self.engine.state.replication,
            &mut self.clients,
            &mut self.touched,
            bytes,
        );
    }

    /// Closes every replica's connection (Redis's `disconnectSlaves`): the history they
    /// follow changed its ID or was replaced, and they learn it when they reconnect —
    /// continuing with `+CONTINUE <new id>` if they can, else with a full sync.
    pub(super) fn disconnect_replicas(&mut self) {
        let replicas: Vec<u64> = self
            .engine
            .state
            .replication
            .replicas
            .iter()
            .map(|r| r.client_id)
            .collect();
        self.close_replicas(replicas);
    }

    /// Closes the replicas among `ids` still connected.
    pub(super) fn close_replicas(&mut self, ids: Vec<u64>) {
        for id in ids {
            if let Some(token) = self.clients.token_of(id) {
                self.close_client(token);
            }
        }
    }

    /// The database the stream continues in after a snapshot taken now: a master's
    /// stream starts with a `SELECT` after one; a replica's is its master's, which goes
    /// on in the database its master's session is in.
    fn stream_db_after_snapshot(&self) -> usize {
        if !self.engine.state.replication.is_replica() {
            return 0;
        }
        self.clients
            .iter()
            .find(|(_, c)| c.state.master_link)
            .map_or(0, |(_, c)| c.state.db)
    }

    /// Hands the effects recorded so far to the replication stream, then to the log
    /// writer (or drops them, with no log).
    pub(super) fn take_effects(&mut self) {
        let buffer = &mut self.engine.effects.buffer;
        if buffer.is_empty() {
            // A role change with no records before it splits nothing.
            self.engine.state.replication.role_changed_at = None;
            // A replica's stream may have moved with nothing to log (PINGs, GETACKs, a
            // PUBLISH): its FACK may cover it once the batches before are durable.
            self.note_log_position();
            return;
        }
        // A replica's stream is its master's, proxied as it came (`proxy_master_stream`):
        // its own effects go to its log only (Redis's `replicationFeedSlaves` returns at
        // once on a replica).
        let own = self.engine.state.replication.own_records(buffer.len());
        feed_stream(
            &mut self.engine.state.replication,
            &mut self.clients,
            &mut self.touched,
            &buffer[own],
        );
        let effects = &mut self.engine.effects;
        match &mut self.log_writer {
            Some(writer) => {
                match effects.take_for_log() {
                    Some(mut log) => {
                        if !log.is_empty() {
                            writer.submit(&mut log);
                        }
                    }
                    None => {
                        writer.submit(&mut effects.buffer);
                    }
                }
                self.note_log_position();
            }
            None => {
                effects.buffer.clear();
                effects.replica_only.clear();
            }
        }
    }

    /// The end of a turn's replication work, after `take_effects`: a new backlog size,
    /// WAIT's request for acknowledgements, and the replicas' buffers for the eviction
    /// measure.
    pub(super) fn replication_end_of_turn(&mut self) {
        let replication = &mut self.engine.state.replication;
        let backlog_bytes = self.engine.state.config.replication.backlog_bytes;
        if let Some(backlog) = &mut replication.backlog
            && backlog.size_bytes() as u64 != backlog_bytes
        {
            // CONFIG SET repl-backlog-size, at once as Redis resizes it: a replica that
            // reconnects next must not continue from history the new size gave up.
            backlog.resize(backlog_bytes as usize);
        }
        if std::mem::take(&mut replication.ack_requested)
            && !replication.replicas.is_empty()
            && !replication.is_replica()
        {
            feed_stream(
                replication,
                &mut self.clients,
                &mut self.touched,
                &replication::getack_record(),
            );
        }
        let clients = &self.clients;
        replication.replica_output_bytes = replication
            .replicas
            .iter()
            .filter_map(|r| clients.token_of(r.client_id))
            .filter_map(|token| clients.get(&token))
            .map(|client| client.output.capacity() as u64)
            .sum();
    }

    /// Every record so far, and the master's stream processed so far, is in the batches
    /// submitted to the log writer: durable with the last of them (`fsynced` marks).
    fn note_log_position(&mut self) {
        let Some(writer) = &self.log_writer else {
            return;
        };
        let replication = &mut self.engine.state.replication;
        let position = crate::replication::fsynced::Position {
            records: self.engine.effects.records,
            master_offset: replication
                .master
                .as_ref()
                .map_or(0, |link| link.processed_offset()),
        };
        if let Some(fsynced) = &mut replication.fsynced {
            fsynced.note(writer.last_submitted(), position);
        }
    }

    /// Takes the log writer's fsync progress (Redis 7.2 updates `fsynced_reploff` before
    /// it sleeps): clients parked by WAITAOF may be released, and a replica whose master
    /// asked for an acknowledgement that its log had not fsynced yet tells the master
    /// the new FACK at once rather than at the next second's ACK.
    pub(super) fn note_fsynced(&mut self) {
        let Some(writer) = &self.log_writer else {
            return;
        };
        let durable = writer.durable_seq();
        let replication = &mut self.engine.state.replication;
        let Some(fsynced) = &mut replication.fsynced else {
            return;
        };
        if !fsynced.advance(durable) {
            return;
        }
        let fack = fsynced.master_offset();
        self.release_waiting_clients();
        let owed = self
            .engine
            .state
            .replication
            .master
            .as_mut()
            .is_some_and(|link| link.fack_owed(fack));
        if owed {
            self.send_ack_to_master();
        }
    }

    /// Answers the clients parked by WAIT and WAITAOF whose wait is over.
    pub(super) fn release_waiting_clients(&mut self) {
        let replication = &mut self.engine.state.replication;
        if replication.waiting.is_empty() {
            return;
        }
        for (id, reply) in replication.waiting.satisfied(replication) {
            let Some(token) = self.clients.token_of(id) else {
                self.engine.state.replication.waiting.remove(id);
                continue;
            };
            let Some(mut client) = self.clients.take(token) else {
                continue;
            };
            if client.conn.blocked.is_some() {
                reply.write(&mut crate::resp::ReplyWriter::new(
                    &mut client.output,
                    client.state.resp3,
                ));
                self.unblock(token, &mut client);
            }
            self.engine.state.replication.waiting.remove(id);
            self.clients.put_back(token, client);
        }
    }

    /// PSYNC or SYNC made `client` a replica: attach its socket to the stream.
    pub(super) fn attach_replica(&mut self, token: usize, client: &mut Client, attach: Attach) {
        // The stream is on from the first replica on (the backlog exists now).
        self.engine.effects.enabled = true;
        match attach {
            Attach::Continued => {
                client.conn.replica = Some(ReplicaLink::Online);
                if self.engine.state.config.replication.disable_tcp_nodelay {
                    let _ = client.conn.stream.set_nodelay(false);
                }
            }
            Attach::FullSync => {
                client.conn.replica = Some(ReplicaLink::WaitingForSnapshot);
                let id = client.state.id;
                let replicas = &self.engine.state.replication.replicas;
                match replicas.get(id).and_then(|r| r.announced.rdb_filter) {
                    Some(functions) => self.send_filtered_snapshot(client, functions),
                    None => self.start_full_sync(Some((token, client))),
                }
            }
        }
    }

    /// A filtered full sync (`REPLCONF rdb-filter-only`): no keys, so no capture — the
    /// snapshot is made now, in memory, at the stream's current point, and goes out at
    /// once, the stream after it.
    fn send_filtered_snapshot(&mut self, client: &mut Client, functions: bool) {
        self.take_effects();
        self.engine.effects.selected_db = None;
        let stream_db = self.stream_db_after_snapshot();
        let replication = &mut self.engine.state.replication;
        let offset = replication.offset as i64;
        let replid = replication.ids.replid.clone();
        let libraries = if functions {
            self.engine.state.scripting.library_codes()
        } else {
            Vec::new()
        };
        let aux = full_sync::aux_fields(&replid, offset, stream_db);
        let Some(replica) = replication.replicas.get_mut(client.state.id) else {
            return;
        };
        match full_sync::filtered_snapshot(aux, libraries) {
            Ok(snapshot) => {
                begin_accumulating(
                    client,
                    replica,
                    replication.backlog.as_mut(),
                    &replid,
                    offset,
                );
                client.conn.replica = Some(ReplicaLink::Sending {
                    transfer: Box::new(Transfer::from_memory(snapshot)),
                });
                replica.state = ReplicaState::SendingSnapshot;
            }
            Err(error) => {
                tracing::warn!("a filtered snapshot for a replica failed: {error}");
                client.conn.close_after_reply = true;
            }
        }
    }

    /// Serves the replicas waiting for a full sync (`current`: one that is out of the
    /// session table, running its PSYNC): with the snapshot being written, if one is,
    /// else with a new one, unless another background job runs (then the end of that job
    /// starts it, as Redis's cron does).
    pub(super) fn start_full_sync(&mut self, mut current: Option<(usize, &mut Client)>) {
        let waiting = self
            .engine
            .state
            .replication
            .replicas
            .in_state(ReplicaState::WaitSnapshotStart);
        if waiting.is_empty() {
            self.jobs.diskless_wait_since = None;
            return;
        }
        if let Some(sync) = &self.jobs.full_sync {
            // A diskless sync's bytes went to its replicas' sockets only: a replica that
            // comes later waits for the next one (Redis waits for the next BGSAVE).
            if sync.pipe.is_none() {
                let offset = sync.offset;
                self.share_snapshot(&waiting, offset, &mut current);
            }
            return;
        }
        if self.jobs.running() {
            tracing::info!(
                "No BGSAVE in progress, but another BG operation is active. BGSAVE for replication delayed"
            );
            return;
        }
        // Diskless when configured and every waiting replica reads the `$EOF:` framing;
        // else disk-based for all of them, as Redis.
        let config = &self.engine.state.config.replication;
        let replicas = &self.engine.state.replication.replicas;
        let diskless = config.diskless_sync
            && waiting
                .iter()
                .all(|&id| replicas.get(id).is_some_and(|r| r.announced.capa_eof));
        if diskless {
            let since = *self
                .jobs
                .diskless_wait_since
                .get_or_insert_with(Instant::now);
            let enough = config.diskless_sync_max_replicas > 0
                && waiting.len() as u64 >= config.diskless_sync_max_replicas;
            let waited = since.elapsed().as_secs() >= config.diskless_sync_delay_seconds;
            if !enough && !waited {
                // The cron starts it once the delay has passed.
                return;
            }
        }
        self.jobs.diskless_wait_since = None;
        // The snapshot's point: every record so far is in the stream before it, and the
        // stream after it starts with a SELECT.
        self.take_effects();
        self.engine.effects.selected_db = None;
        let stream_db = self.stream_db_after_snapshot();
        let replication = &self.engine.state.replication;
        let offset = replication.offset as i64;
        let replid = replication.ids.replid.clone();
        let config = &self.engine.state.config;
        let path = config.dir.join(full_sync::file_name(
            std::process::id(),
            FULL_SYNCS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        ));
        let pipe = diskless.then(|| {
            let waker = self.waker.clone();
            SyncPipe::new(
                waiting.len(),
                Box::new(move || {
                    let _ = waker.wake();
                }),
            )
        });
        let storage: Arc<dyn crate::storage::Storage> = match &pipe {
            Some(pipe) => Arc::new(PipeStorage { pipe: pipe.clone() }),
            None => self.storage.clone(),
        };
        let spec = crate::snapshot::JobSpec {
            storage,
            part_paths: vec![path.clone()],
            options: crate::rdb::RdbWriterOptions {
                compression: config.rdbcompression,
                keep_expired: true,
                extra_aux: full_sync::aux_fields(&replid, offset, stream_db),
                functions: self.engine.state.scripting.library_codes(),
                ..crate::rdb::RdbWriterOptions::default()
            },
            form: crate::snapshot::PartForm::Rdb,
            part_aux: Vec::new(),
            finisher: Box::new(|_sizes: &[u64]| Ok(())),
            key_delay_us: config.rdb_key_save_delay_us,
            pacing: self.jobs.pacing(config.rdb_save_incremental_fsync),
            notify: self.waker_notify(),
        };
        tracing::info!(
            "Starting BGSAVE for SYNC with target: {}",
            if diskless { "replicas sockets" } else { "disk" }
        );
        match SnapshotJob::start(&mut self.engine.keyspace, spec) {
            Ok(job) => {
                self.jobs.full_sync = Some(FullSync {
                    job,
                    path,
                    pipe: pipe.clone(),
                    offset,
                });
                self.engine.state.replication.full_sync_in_progress = true;
                let mark = full_sync::eof_mark();
                for (reader, id) in waiting.into_iter().enumerate() {
                    self.with_replica(id, &mut current, |client, replica, backlog| {
                        begin_accumulating(client, replica, backlog, &replid, offset);
                        if let Some(pipe) = &pipe {
                            // Its socket takes the snapshot as the pipe fills, the stream
                            // since the snapshot's point held behind it.
                            client.conn.replica = Some(ReplicaLink::Sending {
                                transfer: Box::new(Transfer::from_pipe(
                                    pipe.clone(),
                                    reader,
                                    mark.clone(),
                                )),
                            });
                            replica.state = ReplicaState::StreamingSnapshot;
                        }
                    });
                }
            }
            Err(error) => {
                if let Some(pipe) = &pipe {
                    pipe.fail();
                }
                tracing::warn!("BGSAVE for replication failed: {error}");
                for id in waiting {
                    self.with_replica(id, &mut current, |client, _, _| {
                        crate::resp::ReplyWriter::new(&mut client.output, client.state.resp3)
                            .error("ERR BGSAVE failed, replication can't continue");
                        client.conn.replica = Some(ReplicaLink::Online);
                        client.conn.close_after_reply = true;
                    });
                }
            }
        }
    }

    /// Attaches the replicas in `waiting` to the snapshot being written, as Redis attaches
    /// a replica to a BGSAVE in progress: they read the stream from its point, which a
    /// replica waiting for it already keeps in the shared buffer.
    fn share_snapshot(
        &mut self,
        waiting: &[u64],
        offset: i64,
        current: &mut Option<(usize, &mut Client)>,
    ) {
        let replication = &self.engine.state.replication;
        let kept = replication.replicas.any_in(ReplicaState::WaitSnapshotEnd)
            && replication
                .backlog
                .as_ref()
                .is_some_and(|b| b.covers(offset as u64 + 1));
        if !kept {
            tracing::info!(
                "Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC"
            );
            return;
        }
        let replid = replication.ids.replid.clone();
        for &id in waiting {
            self.with_replica(id, current, |client, replica, backlog| {
                begin_accumulating(client, replica, backlog, &replid, offset);
            });
        }
        tracing::info!("Waiting for end of BGSAVE for SYNC");
    }

    /// Runs `f` on replica `id`'s session and record (`current` if it is that one, else
    /// from the table), and lists it among this turn's outputs.
    fn with_replica(
        &mut self,
        id: u64,
        current: &mut Option<(usize, &mut Client)>,
        f: impl FnOnce(&mut Client, &mut crate::replication::master::Replica, Option<&mut Backlog>),
    ) {
        let replication = &mut self.engine.state.replication;
        let Some(replica) = replication.replicas.get_mut(id) else {
            return;
        };
        let backlog = replication.backlog.as_mut();
        match current {
            Some((token, client)) if client.state.id == id => {
                f(client, replica, backlog);
                self.touched.push(*token);
            }
            _ => {
                let Some(token) = self.clients.token_of(id) else {
                    return;
                };
                let Some(mut client) = self.clients.take(token) else {
                    return;
                };
                f(&mut client, replica, backlog);
                self.clients.put_back(token, client);
                self.touched.push(token);
            }
        }
    }

    /// The full sync's snapshot is written (or failed): its replicas get the file.
    pub(super) fn finish_full_sync(
        &mut self,
        sync: FullSync,
        outcome: Result<JobOutcome, SnapshotError>,
    ) {
        if let Some(pipe) = &sync.pipe {
            // The replicas read the pipe: they get its end (or fail on their next read).
            match &outcome {
                Ok(outcome) => {
                    tracing::info!(
                        "Diskless rdb transfer, done reading from pipe, {} replicas still up ({} keys, {} bytes)",
                        self.engine
                            .state
                            .replication
                            .replicas
                            .in_state(ReplicaState::StreamingSnapshot)
                            .len(),
                        outcome.keys,
                        outcome.part_bytes.iter().sum::<u64>()
                    );
                    pipe.finish();
                }
                Err(error) => {
                    tracing::warn!("Diskless SYNC failed: {error}");
                    pipe.fail();
                }
            }
            return;
        }
        let replicas = &self.engine.state.replication.replicas;
        let waiting = replicas.in_state(ReplicaState::WaitSnapshotEnd);
        match outcome {
            Ok(outcome) => {
                tracing::info!(
                    "Background RDB transfer terminated with success: {} keys, {} bytes",
                    outcome.keys,
                    outcome.part_bytes.iter().sum::<u64>()
                );
                let storage = self.storage.clone();
                let mut none = None;
                for id in waiting {
                    self.with_replica(id, &mut none, |client, replica, _| {
                        if !matches!(client.conn.replica, Some(ReplicaLink::Accumulating)) {
                            return;
                        }
                        match Transfer::open(&*storage, &sync.path) {
                            Ok(transfer) => {
                                client.conn.replica = Some(ReplicaLink::Sending {
                                    transfer: Box::new(transfer),
                                });
                                replica.state = ReplicaState::SendingSnapshot;
                            }
                            Err(error) => {
                                tracing::warn!(
                                    "SYNC failed. Can't open/stat DB after BGSAVE: {error}"
                                );
                                client.conn.close_after_reply = true;
                            }
                        }
                    });
                }
                // Each transfer has its own handle: the name is no longer needed.
                if let Err(error) = self.storage.remove_file(&sync.path) {
                    tracing::warn!(
                        "can't remove {} after a full sync: {error}",
                        sync.path.display()
                    );
                }
            }
            Err(error) => {
                tracing::warn!("SYNC failed. BGSAVE child returned an error: {error}");
                let mut none = None;
                for id in waiting {
                    self.with_replica(id, &mut none, |client, _, _| {
                        client.conn.close_after_reply = true;
                    });
                }
            }
        }
    }

    /// A replica's connection closed (Redis's `freeClient` for a replica).
    pub(super) fn replica_gone(&mut self, id: u64) {
        let replication = &mut self.engine.state.replication;
        let Some(replica) = replication.replicas.remove(id) else {
            return;
        };
        if let Some(backlog) = &mut replication.backlog {
            backlog.remove_reader(id); // the history it held may be freed
        }
        tracing::warn!("Connection with replica {} lost.", replica.name());
        let now = crate::clock::unix_seconds();
        if replication.replicas.is_empty() {
            replication.no_replicas_since = now;
        }
        let quorum = self.engine.state.config.replication.write_quorum();
        replication.replicas.refresh_good(quorum, now);
        // A snapshot nobody waits for any more is dropped (Redis kills its child then,
        // when no save points are set; here the snapshot was for replicas only).
        let still_waited = replication.replicas.any_in(ReplicaState::WaitSnapshotEnd)
            || replication.replicas.any_in(ReplicaState::StreamingSnapshot);
        if !still_waited && let Some(mut sync) = self.jobs.full_sync.take() {
            tracing::info!("no replica waits for the full sync's snapshot any more: stopping it");
            // A diskless sync's writer may be waiting for room in the pipe: release it.
            if let Some(pipe) = &sync.pipe {
                pipe.fail();
            }
            sync.job.cancel_and_wait(&mut self.engine.keyspace);
            self.engine.keyspace.forget_snapshot();
            // INFO's `rdb_bgsave_in_progress` says so at once, as when Redis kills its child.
            self.engine.state.replication.full_sync_in_progress = false;
            self.start_scheduled_jobs();
        }
    }

    /// Once a second (Redis's `replicationCron`).
    pub(super) fn replication_cron(&mut self) {
        self.master_link_cron();
        self.take_effects();
        let now = crate::clock::unix_seconds();
        let config = self.engine.state.config.replication;
        let replication = &mut self.engine.state.replication;
        let loops = replication.cron_loops;
        replication.cron_loops += 1;
        // As Redis: no PING while a FAILOVER with a timeout waits for its target, so the
        // offset it must acknowledge stays put. A replica's replicas get its master's
        // PINGs, in the stream as it came.
        let failover_waits = replication.failover.state == FailoverState::WaitingForSync
            && replication.failover.end_ms.is_some();
        if loops.is_multiple_of(config.ping_period_seconds.max(1))
            && !replication.replicas.is_empty()
            && !failover_waits
            && !replication.is_replica()
        {
            feed_stream(
                replication,
                &mut self.clients,
                &mut self.touched,
                &replication::ping_record(),
            );
        }
        // A newline to replicas waiting for their snapshot keeps their link alive (a
        // replica reading a reply skips it).
        let mut timed_out = Vec::new();
        for replica in replication.replicas.iter() {
            let Some(token) = self.clients.token_of(replica.client_id) else {
                continue;
            };
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            match replica.state {
                ReplicaState::WaitSnapshotStart | ReplicaState::WaitSnapshotEnd => {
                    let conn = &mut client.conn;
                    if conn.output_sent == client.output.len() {
                        let _ = conn.stream.write(b"\n");
                    }
                }
                ReplicaState::StreamingSnapshot => {
                    // The writer waits for the slowest replica: one whose socket takes
                    // nothing for `repl-timeout` holds the others back no longer.
                    let stalled = matches!(
                        &client.conn.replica,
                        Some(ReplicaLink::Sending { transfer, .. })
                            if transfer.stalled_since().is_some_and(|since| since.elapsed().as_secs() > config.timeout_seconds)
                    );
                    if stalled {
                        tracing::warn!(
                            "Disconnecting timedout replica (full sync): {}",
                            replica.name()
                        );
                        timed_out.push(token);
                    }
                }
                ReplicaState::Online
                    if !replica.pre_psync
                        && now - replica.ack_time > config.timeout_seconds as i64 =>
                {
                    tracing::warn!(
                        "Disconnecting timedout replica (streaming sync): {}",
                        replica.name()
                    );
                    timed_out.push(token);
                }
                _ => {}
            }
        }
        for token in timed_out {
            self.close_client(token);
        }
        let replication = &mut self.engine.state.replication;
        // A replica keeps its backlog: it is its master's history, which its siblings
        // continue from should it be promoted.
        if replication.replicas.is_empty()
            && !replication.is_replica()
            && config.backlog_ttl_seconds != 0
            && replication.stream_active()
            && now - replication.no_replicas_since > config.backlog_ttl_seconds as i64
        {
            replication.free_backlog();
            tracing::info!(
                "Replication backlog freed after {} seconds without connected replicas.",
                config.backlog_ttl_seconds
            );
            self.engine.effects.enabled = self.log_writer.is_some();
        }
        let replication = &mut self.engine.state.replication;
        replication
            .replicas
            .refresh_good(config.write_quorum(), now);
        // A diskless sync held back by `repl-diskless-sync-delay` starts once it passed.
        if !self.jobs.running() && replication.replicas.any_in(ReplicaState::WaitSnapshotStart) {
            self.start_full_sync(None);
        }
    }
}

/// A replica waiting for a snapshot that exists now: `+FULLRESYNC` (unless it came with
/// SYNC, which expects none), and a reader of the stream from the snapshot's point on,
/// held behind the snapshot.
fn begin_accumulating(
    client: &mut Client,
    replica: &mut crate::replication::master::Replica,
    backlog: Option<&mut Backlog>,
    replid: &str,
    offset: i64,
) {
    let reading = backlog.is_some_and(|b| b.add_reader(client.state.id, offset as u64 + 1));
    if !reading {
        // The stream since the snapshot's point is not kept: the replica would miss it.
        tracing::warn!(
            "replica {} can't read the stream from offset {}: dropped, it will sync again",
            replica.name(),
            offset + 1
        );
        client.conn.replica = Some(ReplicaLink::WaitingForSnapshot);
        client.conn.close_after_reply = true;
        return;
    }
    if !replica.pre_psync {
        client
            .output
            .extend_from_slice(&full_sync::full_resync_line(replid, offset));
    }
    client.conn.replica = Some(ReplicaLink::Accumulating);
    replica.state = ReplicaState::WaitSnapshotEnd;
    replica.sync_offset = offset;
}
