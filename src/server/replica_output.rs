//! What goes to a replica's socket, in order: its output (which holds only what precedes
//! the stream: `+FULLRESYNC`, `+CONTINUE`), its snapshot while it is sent, then the
//! stream, read from the replication buffer that the backlog and every replica share
//! (`replication::backlog`) at the replica's own offset. `ReplicaLink` says which of
//! these a replica is at; `replicas` moves it from one to the next.

use super::Server;
use crate::replication::Replication;
use crate::replication::backlog::Backlog;
use crate::replication::full_sync::Transfer;
use crate::replication::master::ReplicaState;
use std::io::{ErrorKind, Write};

/// Where a replica's sync is, which says what goes to its socket after its output. The
/// stream is read from the shared buffer from the snapshot's point, or from the offset
/// it continued from.
pub(super) enum ReplicaLink {
    /// Waiting for a full sync to start: not a reader of the stream yet.
    WaitingForSnapshot,
    /// Its snapshot is being written: the stream since its point is held in the buffer.
    Accumulating,
    /// The snapshot goes out, then the stream.
    Sending { transfer: Box<Transfer> },
    /// A diskless snapshot went out: the stream waits for the replica's first REPLCONF
    /// ACK. A replica reading up to the `$EOF:` mark cannot tell the mark from stream
    /// bytes read with it, so Redis starts the stream on that ACK.
    AwaitingAck,
    /// The stream goes out as it comes.
    Online,
}

/// How far a write to a replica's socket got.
enum Sent {
    /// All there was (the stream: all there is now).
    All(usize),
    /// Part of it: the socket is full.
    Blocked(usize),
    /// The connection broke (or the snapshot could not be read).
    Failed,
}

/// Writes as much of `bytes` as the socket takes: Ok(bytes written), or Err on a broken
/// connection.
fn write_some(stream: &mut crate::net::Stream, bytes: &[u8]) -> Result<usize, ()> {
    let mut written = 0;
    while written < bytes.len() {
        match stream.write(&bytes[written..]) {
            Ok(0) => return Err(()),
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(()),
        }
    }
    Ok(written)
}

/// Sends replica `id` the stream it has not had, block by block, as far as its socket
/// takes it.
fn send_stream(socket: &mut crate::net::Stream, backlog: &mut Backlog, id: u64) -> Sent {
    let mut total = 0;
    loop {
        let pending = backlog.pending(id);
        if pending.is_empty() {
            return Sent::All(total);
        }
        let wanted = pending.len();
        match write_some(socket, pending) {
            Ok(n) => {
                backlog.advance(id, n);
                total += n;
                if n < wanted {
                    return Sent::Blocked(total);
                }
            }
            Err(()) => return Sent::Failed,
        }
    }
}

/// Sends what the snapshot has ready, as far as the socket takes it.
fn send_snapshot(socket: &mut crate::net::Stream, transfer: &mut Transfer) -> Sent {
    let mut total = 0;
    while !transfer.is_done() {
        let pending = match transfer.pending() {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!("Read error sending DB to replica: {error}");
                return Sent::Failed;
            }
        };
        match write_some(socket, pending) {
            Ok(0) => return Sent::Blocked(total),
            Ok(n) => {
                transfer.advance(n);
                total += n;
            }
            Err(()) => return Sent::Failed,
        }
    }
    Sent::All(total)
}

impl Server {
    /// Sends what the diskless sync's pipe holds to the replicas reading it (the writer's
    /// thread wakes the loop when it adds bytes; a socket that is full waits for its
    /// writable event as any other).
    pub(super) fn flush_diskless_replicas(&mut self) {
        let replication = &self.engine.state.replication;
        let tokens: Vec<usize> = replication
            .replicas
            .in_state(ReplicaState::StreamingSnapshot)
            .into_iter()
            .filter_map(|id| self.clients.token_of(id))
            .collect();
        for token in tokens {
            let diskless = self.clients.get(&token).is_some_and(|client| {
                matches!(&client.conn.replica, Some(ReplicaLink::Sending { transfer, .. }) if transfer.is_diskless())
            });
            if diskless {
                self.flush_replica(token);
            }
        }
    }

    /// Sends what a replica's output, snapshot transfer and stream allow (`flush_client`
    /// for a replica); closes it when its connection broke or it was dropped.
    pub(super) fn flush_replica(&mut self, token: usize) {
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        if client.conn.close_after_reply {
            // Dropped (CLIENT KILL, output limits, a failed sync): nothing more goes out.
            self.close_client(token);
            return;
        }
        let id = client.state.id;
        let replication = &mut self.engine.state.replication;
        let stats = &mut self.engine.state.stats;
        let mut failed = false;
        let mut came_online = false;
        let count = |n: usize, replication: &mut Replication| {
            replication.stats.output_bytes += n as u64;
        };
        loop {
            let conn = &mut client.conn;
            let Some(link) = &mut conn.replica else {
                break;
            };
            // What precedes the stream goes first, whatever the sync's step.
            if conn.output_sent < client.output.len() {
                match write_some(&mut conn.stream, &client.output[conn.output_sent..]) {
                    Ok(n) => {
                        conn.output_sent += n;
                        stats.total_net_output_bytes += n as u64;
                        count(n, replication);
                    }
                    Err(()) => failed = true,
                }
                if failed || conn.output_sent < client.output.len() {
                    break;
                }
            }
            match link {
                ReplicaLink::WaitingForSnapshot | ReplicaLink::Accumulating => break,
                ReplicaLink::AwaitingAck => {
                    let acknowledged = replication
                        .replicas
                        .get(id)
                        .is_some_and(|replica| replica.acknowledged_since_sync);
                    if !acknowledged {
                        break;
                    }
                    conn.replica = Some(ReplicaLink::Online);
                    // Round again: the held stream goes out now.
                }
                ReplicaLink::Online => {
                    let Some(backlog) = replication.backlog.as_mut().filter(|b| b.has_reader(id))
                    else {
                        // The buffer was replaced under it (a new history): it resyncs.
                        tracing::warn!("replica id={id} lost its place in the stream: dropped");
                        failed = true;
                        break;
                    };
                    match send_stream(&mut conn.stream, backlog, id) {
                        Sent::All(n) | Sent::Blocked(n) => {
                            stats.total_net_output_bytes += n as u64;
                            count(n, replication);
                        }
                        Sent::Failed => failed = true,
                    }
                    break;
                }
                ReplicaLink::Sending { transfer } => {
                    match send_snapshot(&mut conn.stream, transfer) {
                        Sent::All(n) => count(n, replication),
                        Sent::Blocked(n) => {
                            count(n, replication);
                            break;
                        }
                        Sent::Failed => {
                            failed = true;
                            break;
                        }
                    }
                    came_online = true;
                    if transfer.is_diskless() {
                        conn.replica = Some(ReplicaLink::AwaitingAck);
                        if let Some(replica) = replication.replicas.get_mut(id) {
                            replica.acknowledged_since_sync = false;
                        }
                    } else {
                        conn.replica = Some(ReplicaLink::Online);
                    }
                    // Round again: the held stream goes out now (or on the ACK).
                }
            }
        }
        if came_online && let Some(replica) = replication.replicas.get_mut(id) {
            replica.state = ReplicaState::Online;
            replica.ack_time = crate::clock::unix_seconds();
            if replica.announced.rdb_only {
                tracing::info!(
                    "RDB transfer completed, rdb only replica ({}) should be disconnected asap",
                    replica.name()
                );
                failed = true;
            } else {
                tracing::info!("Synchronization with replica {} succeeded", replica.name());
                if self.engine.state.config.replication.disable_tcp_nodelay {
                    let _ = client.conn.stream.set_nodelay(false);
                }
            }
            let quorum = self.engine.state.config.replication.write_quorum();
            replication
                .replicas
                .refresh_good(quorum, crate::clock::unix_seconds());
        }
        let conn = &mut client.conn;
        if conn.output_sent == client.output.len() {
            client.output.clear();
            conn.output_sent = 0;
            if client.output.capacity() > super::OUTPUT_KEEP_BYTES {
                client.output = Vec::new();
            }
        }
        if failed {
            self.close_client(token);
        }
    }
}
