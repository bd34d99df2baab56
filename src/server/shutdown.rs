//! The event loop's side of a shutdown (its course and rules are `crate::shutdown`): the
//! SHUTDOWN client blocked until the outcome, the writes held and the replicas asked for
//! an acknowledgement while it waits, the termination signals, and the final steps —
//! jobs stopped, the final snapshot, the log's last sync — once the loop finds it ready
//! at the end of a turn.

use super::session::Client;
use super::{Server, ServerError};
use crate::commands::blocking::Blocked;
use crate::engine::ShutdownSave;
use crate::resp::ReplyWriter;
use crate::shutdown::{Begun, ShutdownCall, ShutdownFlags, Signal, replicas_caught_up};
use std::sync::atomic::Ordering;

/// What a blocked SHUTDOWN client gets when the shutdown is aborted or fails (Redis's).
const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// The command a SHUTDOWN client is blocked in: no key, no deadline, never run again.
const SHUTDOWN_WAIT: &[u8] = b"shutdown";

fn is_shutdown_wait(blocked: &Blocked) -> bool {
    blocked.keys.is_empty() && blocked.command.first().is_some_and(|c| c == SHUTDOWN_WAIT)
}

impl Server {
    /// SHUTDOWN from a client: it stays blocked until the process exits or the shutdown
    /// is aborted or fails (as Redis's, even when there is nothing to wait for). SHUTDOWN
    /// ABORT (its reply written) cancels the wait.
    pub(super) fn shutdown_command(
        &mut self,
        token: usize,
        client: &mut Client,
        call: ShutdownCall,
    ) {
        match call {
            ShutdownCall::Abort => {
                tracing::info!("Shutdown manually aborted.");
                self.cancel_shutdown();
            }
            ShutdownCall::Begin(flags) => {
                let blocked = Blocked {
                    db: client.state.db,
                    keys: Vec::new(),
                    deadline_ms: None,
                    command: vec![SHUTDOWN_WAIT.to_vec()],
                    replicas: None,
                };
                self.block(token, client, blocked);
                self.engine.state.shutdown.clients.push(client.state.id);
                self.begin_shutdown(flags);
            }
        }
    }

    /// Starts a shutdown (Redis's `prepareForShutdown`); one in progress goes on as it is.
    fn begin_shutdown(&mut self, mut flags: ShutdownFlags) {
        if self.loading.is_some() {
            // A half-loaded dataset must not become `dump.rdb`.
            flags.save = ShutdownSave::NoSave;
        }
        let now_ms = crate::clock::unix_ms();
        let state = &mut self.engine.state;
        let timeout_seconds = state.config.shutdown_timeout_seconds;
        let caught_up = replicas_caught_up(&state.replication);
        let begun = state
            .shutdown
            .begin(flags, timeout_seconds, caught_up, now_ms);
        if begun != Begun::InProgress {
            tracing::warn!("User requested shutdown...");
        }
        if begun == Begun::Waiting {
            // As Redis: no acknowledgement is asked while clients are paused already (the
            // request would move the offset); the replicas' own each second still come.
            if state.pause.kind(now_ms) == crate::pause::PauseKind::Off {
                state.replication.ack_requested = true;
            }
            state.pause.hold(crate::pause::Hold::Shutdown);
            tracing::info!("Waiting for replicas before shutting down.");
        }
    }

    /// Back to serving (SHUTDOWN ABORT, or a shutdown that failed: Redis's
    /// `cancelShutdown`): the held writes run again and each blocked SHUTDOWN client gets
    /// Redis's error.
    fn cancel_shutdown(&mut self) {
        let clients = self.engine.state.shutdown.cancel();
        self.engine
            .state
            .pause
            .release(crate::pause::Hold::Shutdown);
        for id in clients {
            let Some(token) = self.clients.token_of(id) else {
                continue; // gone meanwhile
            };
            let Some(mut client) = self.clients.take(token) else {
                continue;
            };
            // Still in its SHUTDOWN (REPLICAOF may have unblocked it, and it may block
            // on something else since).
            if client.conn.blocked.as_ref().is_some_and(is_shutdown_wait) {
                ReplyWriter::new(&mut client.output, client.state.resp3).error(SHUTDOWN_FAILED);
                self.unblock(token, &mut client);
            }
            self.clients.put_back(token, client);
        }
    }

    /// The termination signals that came since the last turn. SIGTERM and SIGINT start a
    /// shutdown with the options of `shutdown-on-sigterm` / `shutdown-on-sigint` (one in
    /// progress goes on); a SIGINT while a signal's shutdown is not over exits at once
    /// (Redis: "You insist...").
    pub(super) fn take_signals(&mut self) -> Result<(), ServerError> {
        for signal in [Signal::Term, Signal::Int] {
            let flag = match signal {
                Signal::Term => &self.sigterm_flag,
                Signal::Int => &self.sigint_flag,
            };
            if !flag.swap(false, Ordering::Relaxed) {
                continue;
            }
            if signal == Signal::Int && self.engine.state.shutdown.signalled {
                tracing::warn!("You insist... exiting now.");
                // As Redis removes its saving child's temp file before exiting.
                self.jobs.cancel_all(&mut self.engine.keyspace);
                return Err(ServerError::Insisted);
            }
            let flags = if self.loading.is_some() {
                tracing::warn!("Received shutdown signal during loading, scheduling shutdown.");
                ShutdownFlags {
                    save: ShutdownSave::NoSave,
                    ..ShutdownFlags::DEFAULT
                }
            } else {
                tracing::warn!("Received {} scheduling shutdown...", signal.name());
                let config = &self.engine.state.config;
                ShutdownFlags::from_words(&config.directive_value(signal.directive()))
            };
            self.engine.state.shutdown.signalled = true;
            self.begin_shutdown(flags);
        }
        Ok(())
    }

    /// Asked at the end of each turn: finishes the shutdown if it may (Redis's cron
    /// check). Returns true when the process is to exit; a shutdown that failed is
    /// cancelled and the server runs on.
    pub(super) fn shutdown_if_ready(&mut self) -> bool {
        let state = &self.engine.state;
        let now_ms = crate::clock::unix_ms();
        let Some(flags) = state
            .shutdown
            .ready(now_ms, || replicas_caught_up(&state.replication))
        else {
            return false;
        };
        match self.finish_shutdown(flags) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!("{error}");
                tracing::warn!(
                    "Errors trying to shut down the server. Check the logs for more information."
                );
                self.cancel_shutdown();
                false
            }
        }
    }

    /// The last steps (Redis's `finishShutdown`). SHUTDOWN SAVE writes `dbfilename`, and
    /// so does a plain SHUTDOWN (or a signal's) when `save` points are configured and
    /// the log is off, where the snapshot is the dataset. (Redis saves then with its log
    /// on too; Tessera does not, its log is the dataset.) With FORCE, a final snapshot or
    /// log sync that fails is logged and the process exits anyway.
    fn finish_shutdown(&mut self, flags: ShutdownFlags) -> Result<(), ServerError> {
        self.end_of_turn();
        self.log_lagging_replicas();
        if self.log_turning_on() {
            if !flags.force {
                return Err(ServerError::InitialLog);
            }
            tracing::warn!("Writing initial AOF. Exit anyway.");
        }
        // As Redis kills its rewrite or save child and removes its temp file: the job is
        // stopped and waited for, so that its thread removes its files (unlisted parts, a
        // BGSAVE's temp file in `dir`, which no start-up would remove) before the process
        // exits. A writer notices the cancellation after the key or slot in hand.
        self.jobs.cancel_all(&mut self.engine.keyspace);
        self.abandon_master_sync();
        let config = &self.engine.state.config;
        let save = match flags.save {
            ShutdownSave::Save => true,
            ShutdownSave::NoSave => false,
            ShutdownSave::AsConfigured => !config.appendonly && !config.save_points.is_empty(),
        };
        if save {
            tracing::info!("saving the final RDB snapshot before exiting");
            match self.save_dump_now() {
                Err(error) if flags.force => {
                    tracing::warn!("{error}");
                    tracing::warn!("Error trying to save the DB. Exit anyway.");
                }
                Err(error) => {
                    tracing::warn!("Error trying to save the DB, can't exit.");
                    return Err(ServerError::FinalSnapshot(error));
                }
                Ok(_) => {}
            }
        }
        if let Some(writer) = &self.log_writer {
            tracing::info!("flushing and syncing the append-only log");
            // On failure the writer stays in place and keeps retrying; the server runs on.
            match writer.sync() {
                Err(error) if flags.force => {
                    tracing::warn!("can't sync the append-only log: {error}. Exit anyway.");
                }
                Err(error) => return Err(ServerError::LogSync(error)),
                Ok(()) => {}
            }
        }
        // Best effort: what the log now has goes to the replicas before the exit.
        self.end_of_turn();
        self.listeners.remove_unix_socket();
        if !self.engine.state.config.pidfile.is_empty() {
            let _ = std::fs::remove_file(&self.engine.state.config.pidfile);
        }
        if let Some(paths) = &self.log_paths {
            tracing::info!("append-only log in {} is up to date", paths.dir.display());
        }
        tracing::info!("Tessera is now ready to exit, bye bye...");
        Ok(())
    }

    /// Each replica that has not acknowledged the master's offset, and how many are in
    /// sync, in Redis's words.
    fn log_lagging_replicas(&self) {
        let replication = &self.engine.state.replication;
        let offset = replication.offset as i64;
        let now = crate::clock::unix_seconds();
        let mut lagging = 0;
        for replica in replication.replicas.iter() {
            if replica.ack_offset != offset {
                lagging += 1;
                tracing::warn!(
                    "Lagging replica {} reported offset {} behind master, lag={}, state={}.",
                    replica.name(),
                    offset - replica.ack_offset,
                    replica.lag_seconds(now),
                    replica.state.info_name()
                );
            }
        }
        let total = replication.replicas.len();
        if total > 0 {
            tracing::info!(
                "{} of {} replicas are in sync when shutting down.",
                total - lagging,
                total
            );
        }
    }
}
