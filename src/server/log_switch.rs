//! Turning the log on and off at run time (`CONFIG SET appendonly`), as Redis's
//! `startAppendOnly` and `stopAppendOnly` do. The configuration says what is wanted; at
//! the end of each turn the loop brings the log in step with it (`apply_appendonly`).
//!
//! - **On** (`start_log`): one compaction whose instant is the log's first record
//!   (`compaction::Compaction::start_log`): from then on every write goes to a new
//!   writer's temporary file, and the base is the dataset at that instant. The log counts
//!   as on once the base and that file are committed as the manifest; until then a crash
//!   leaves the directory as it was (start-up removes `temp-` files). While a BGSAVE or a
//!   full sync runs, the start waits for it, as Redis schedules its rewrite. If it fails,
//!   `appendonly` goes back to `no` and the reason is logged (Redis retries from its
//!   cron; Tessera says so once, and CONFIG GET shows it).
//! - **Off** (`turn_log_off`): a compaction in progress is stopped (a log being turned
//!   on is abandoned), the turn's records are written and everything is fsynced on the
//!   loop (Redis's `stopAppendOnly` fsyncs there too), and the writer is closed. The
//!   directory stays as it is: the manifest in force describes the dataset of this
//!   instant.
//!
//! SHUTDOWN while the log is being turned on is refused, as Redis refuses it ("Writing
//! initial AOF, can't exit."), unless FORCE: the base is not written yet, and with
//! `appendonly yes` no snapshot would be saved either.

use super::Server;
use crate::compaction::{Compaction, Purpose};
use crate::log::manifest::Manifest;
use crate::log::{LogPaths, LogWriter};
use std::sync::Arc;
use std::time::Instant;

impl Server {
    /// Brings the log in step with `appendonly` (after a CONFIG SET). Not while loading:
    /// the loaded dataset opens the log then.
    pub(super) fn apply_appendonly(&mut self) {
        if self.loading.is_some() {
            return;
        }
        let wanted = self.engine.state.config.appendonly;
        match (wanted, self.log_writer.is_some()) {
            (true, false) if !self.engine.state.persistence.aof_rewrite_scheduled => {
                self.start_log();
            }
            (false, true) => self.turn_log_off(),
            _ => {}
        }
    }

    /// `aof-disable-auto-gc` back to `no`: the history files the manifest in force lists
    /// are deleted, as Redis's `updateAofAutoGCEnabled` does. Not while a compaction runs
    /// (its writer commits manifests): its end deletes them.
    pub(super) fn apply_auto_gc(&mut self) {
        let disabled = self.engine.state.config.aof_disable_auto_gc;
        if disabled || !self.auto_gc_disabled || self.jobs.compaction.is_some() {
            self.auto_gc_disabled |= disabled;
            return;
        }
        self.auto_gc_disabled = false;
        let (Some(paths), Some(manifest)) = (&self.log_paths, &self.manifest) else {
            return;
        };
        if manifest.history().next().is_none() {
            return;
        }
        match crate::log::startup::delete_history(&*self.storage, paths, manifest) {
            Ok(left) => self.manifest = Some(left),
            Err(error) => tracing::warn!("can't delete the history files: {error}"),
        }
        self.refresh_log_sizes();
    }

    /// The log directory's paths and manifest while the log is off (a base to write, the
    /// log to turn on): settled as start-up settles it, a new directory created empty,
    /// no incremental file added; its files become history once a new base commits.
    pub(super) fn log_dir_with_the_log_off(
        &self,
    ) -> Result<(LogPaths, Manifest), crate::log::startup::OpenError> {
        use crate::log::startup::{History, Opening, open_log_dir};
        let config = &self.engine.state.config;
        let paths = LogPaths::from_config(config);
        let history = History::of(config);
        let manifest = open_log_dir(&*self.storage, &paths, Opening::AsItIs, history)?;
        Ok((paths, manifest))
    }

    /// Whether the log is being turned on (its base not yet committed).
    pub(super) fn log_turning_on(&self) -> bool {
        self.jobs
            .compaction
            .as_ref()
            .is_some_and(|c| c.purpose() == Purpose::TurnLogOn)
    }

    /// Starts turning the log on, or schedules it behind a running job.
    pub(super) fn start_log(&mut self) {
        if self.jobs.running() {
            self.engine.state.persistence.aof_rewrite_scheduled = true;
            return;
        }
        // The records of this turn so far belong to no log (they go to the replicas).
        self.take_effects();
        let (paths, manifest) = match self.log_dir_with_the_log_off() {
            Ok(opened) => opened,
            Err(error) => return self.log_not_turned_on(&error.to_string()),
        };
        let writer_notify = {
            let waker = self.waker.clone();
            Arc::new(move || {
                let _ = waker.wake();
            })
        };
        let settings = self.compaction_settings();
        let policy = self.engine.state.config.appendfsync;
        let notify = self.waker_notify();
        let started = Compaction::start_log(
            &mut self.engine.keyspace,
            self.storage.clone(),
            &paths,
            &manifest,
            settings,
            policy,
            writer_notify,
            notify,
        );
        let p = &mut self.engine.state.persistence;
        p.aof_rewrite_scheduled = false;
        p.aof_rewrites += 1;
        let (compaction, writer) = match started {
            Ok(started) => started,
            Err(error) => {
                p.aof_last_bgrewrite_failed = true;
                return self.log_not_turned_on(&error.to_string());
            }
        };
        self.writer_policy = policy;
        self.writer_memory_limit = 0; // set by the end of the turn
        self.adopt_log_writer(writer, paths, manifest);
        self.rewrite_started(compaction);
    }

    /// The writer of the log from now on, appending after `manifest`'s files (or to a
    /// new log's temporary file).
    pub(super) fn adopt_log_writer(
        &mut self,
        writer: LogWriter,
        paths: LogPaths,
        manifest: Manifest,
    ) {
        let state = &mut self.engine.state;
        state.eviction.set_log_gauge(writer.buffer_gauge());
        state.replication.fsynced = Some(Default::default());
        self.log_writer = Some(writer);
        self.log_paths = Some(paths);
        self.manifest = Some(manifest);
        self.engine.effects.enabled = true;
        // The new file starts empty: its first record needs its SELECT.
        self.engine.effects.selected_db = None;
    }

    /// A log that was being turned on is given up (its compaction failed or was stopped):
    /// no manifest lists its file, which is removed; the server runs as with the log off.
    pub(super) fn abandon_new_log(&mut self) {
        let paths = self.log_paths.clone();
        self.close_log();
        if let Some(paths) = paths {
            let temp = paths.file(&paths.temp_incremental_name());
            let _ = self.storage.remove_file(&temp);
        }
    }

    /// `CONFIG SET appendonly no`: everything logged so far made durable, then the writer
    /// closed.
    fn turn_log_off(&mut self) {
        if let Some(mut compaction) = self.jobs.compaction.take() {
            tracing::info!("a background append-only log rewrite is in progress: stopping it");
            compaction.job.cancel_and_wait(&mut self.engine.keyspace);
            self.engine.keyspace.forget_snapshot();
            let finished = compaction.wait_for_end();
            let p = &mut self.engine.state.persistence;
            p.aof_rewrite_in_progress = false;
            p.aof_rewrite_started = None;
            if finished.purpose == Purpose::TurnLogOn {
                tracing::info!("the append-only log was being turned on: given up");
                self.abandon_new_log();
                return;
            }
            self.manifest = Some(finished.manifest);
        }
        self.take_effects();
        if let Some(writer) = &self.log_writer
            && let Err(error) = writer.sync()
        {
            tracing::warn!(
                "the append-only log could not be fsynced before it was turned off: {error}"
            );
        }
        self.close_log();
        tracing::info!("append-only log turned off (appendonly no)");
    }

    /// Drops the writer and what belongs to it; replies held for it go out.
    fn close_log(&mut self) {
        self.log_writer = None;
        self.log_paths = None;
        self.manifest = None;
        self.closed_log_bytes = 0;
        let state = &mut self.engine.state;
        state.replication.fsynced = None;
        state.eviction.clear_log_gauge();
        state.log_error = None;
        // Records are still kept for the replicas' stream if it is active.
        self.engine.effects.enabled = state.replication.stream_active();
        for token in std::mem::take(&mut self.held) {
            if let Some(client) = self.clients.get_mut(&token) {
                client.conn.in_held = false;
                self.flush_client(token);
            }
        }
    }

    fn log_not_turned_on(&mut self, reason: &str) {
        tracing::warn!(
            "the append-only log could not be turned on: {reason}; appendonly is no again"
        );
        let p = &mut self.engine.state.persistence;
        p.aof_last_rewrite_failure = Some(Instant::now());
        self.engine.state.config.appendonly = false;
    }

    /// A compaction that turned the log on ended: the log is on, or it is given up.
    pub(super) fn new_log_finished(&mut self, succeeded: bool, reason: Option<String>) {
        if succeeded {
            tracing::info!("the append-only log is on");
            return;
        }
        self.abandon_new_log();
        self.log_not_turned_on(reason.as_deref().unwrap_or("the rewrite was stopped"));
    }
}
