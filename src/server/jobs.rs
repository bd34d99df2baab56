//! Background jobs: the compaction (BGREWRITEAOF), the snapshot to `dbfilename`
//! (BGSAVE) and a full sync's snapshot for replicas (`server::replicas`).
//!
//! Each job is a state machine of its own (`compaction::Compaction`,
//! `snapshot::SnapshotJob`: capture on the loop a few slots a turn, write on threads,
//! finish on the loop). This file is the one place that decides when a job starts — on
//! request, scheduled behind another, or by Redis's automatic triggers; replicas waiting
//! for a full sync come first — when a failed one may be retried, and that writes the
//! jobs' INFO persistence fields.

use super::Server;
use crate::compaction::{Compaction, Purpose};
use crate::engine::Job;
use crate::log::LogWriter;
use crate::snapshot::{JobOutcome, JobProgress, SnapshotError, SnapshotJob};
use crate::storage::RateLimit;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slots a background snapshot captures per event-loop turn (a table copy each).
const CAPTURE_SLOTS_PER_TURN: usize = 32;
/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed BGSAVE, neither a save point nor a
/// scheduled BGSAVE starts one until this much time has passed.
const BGSAVE_RETRY_DELAY: Duration = Duration::from_secs(5);

/// The jobs running now (at most one: a second is scheduled behind it, as Redis has at
/// most one child).
#[derive(Default)]
pub(super) struct Jobs {
    pub compaction: Option<Compaction>,
    pub background_save: Option<BackgroundSave>,
    pub full_sync: Option<super::replicas::FullSync>,
    /// Since when replicas wait for a diskless sync that `repl-diskless-sync-delay` holds
    /// back (so that more can join its capture).
    pub diskless_wait_since: Option<Instant>,
    /// `aof-rewrite-max-rate`, shared by every job's writers; the cron keeps it in step
    /// with the configuration, so a CONFIG SET applies to a running job.
    pub rate: Arc<RateLimit>,
}

/// A BGSAVE in progress.
pub(super) struct BackgroundSave {
    pub job: SnapshotJob,
    /// `dirty` when it started: what it saved is no longer a change since the last save.
    pub dirty_at_start: u64,
}

impl Jobs {
    pub fn running(&self) -> bool {
        self.compaction.is_some() || self.background_save.is_some() || self.full_sync.is_some()
    }

    /// How a new job's files go to disk: the shared rate, and the directive's writeback.
    pub(super) fn pacing(&self, incremental_fsync: bool) -> crate::snapshot::Pacing {
        crate::snapshot::Pacing {
            incremental_fsync,
            rate: Some(self.rate.clone()),
        }
    }

    fn snapshots(&self) -> impl Iterator<Item = JobProgress> {
        let compaction = self.compaction.as_ref().map(|c| c.job.progress());
        compaction
            .into_iter()
            .chain(self.background_save.as_ref().map(|b| b.job.progress()))
            .chain(self.full_sync.as_ref().map(|s| s.job.progress()))
    }

    /// Some(throttled) while a background snapshot still has slots to capture.
    pub fn capture_pending(&self) -> Option<bool> {
        self.snapshots()
            .filter(|job| job.capturing)
            .map(|job| job.throttled)
            .reduce(|a, b| a && b)
    }

    /// Stops every job and waits for its threads (they remove their unlisted files).
    pub fn cancel_all(&mut self, keyspace: &mut crate::keyspace::Keyspace) {
        // Paused writers would otherwise sleep until the next tick that never comes.
        self.rate.set(crate::storage::Rate::Unlimited);
        if let Some(mut compaction) = self.compaction.take() {
            tracing::info!(
                "there is a background append-only log rewrite in progress: stopping it"
            );
            compaction.job.cancel_and_wait(keyspace);
        }
        if let Some(mut save) = self.background_save.take() {
            tracing::info!("there is a background save in progress: stopping it");
            save.job.cancel_and_wait(keyspace);
        }
        if let Some(mut sync) = self.full_sync.take() {
            tracing::info!("there is a full sync's snapshot in progress: stopping it");
            sync.cancel_and_wait(keyspace);
        }
    }
}

/// The form of a new base of the log (`aof-use-rdb-preamble`).
pub(super) fn base_form(config: &crate::config::Config) -> crate::snapshot::PartForm {
    if config.aof_use_rdb_preamble {
        crate::snapshot::PartForm::Rdb
    } else {
        crate::snapshot::PartForm::Resp
    }
}

/// Whether a BGSAVE may start again after the last one failed (Redis's retry delay).
fn bgsave_retry_allowed(last_failure: Option<Instant>) -> bool {
    last_failure.is_none_or(|t| t.elapsed() > BGSAVE_RETRY_DELAY)
}

/// Whether the automatic rewrite is backing off: after 3 consecutive failures Redis
/// waits 1, 2, 4 … 60 minutes before the next one.
fn rewrite_backing_off(consecutive_failures: u64, last_failure: Option<Instant>) -> bool {
    last_failure.is_some_and(|t| {
        consecutive_failures >= 3
            && t.elapsed()
                < Duration::from_secs(60 * (1u64 << (consecutive_failures - 3).min(6)).min(60))
    })
}

impl Server {
    /// A command asked for a job (its reply is written).
    pub(super) fn start_job(&mut self, job: Job) {
        match job {
            Job::Rewrite => self.start_rewrite(),
            Job::BackgroundSave => self.start_background_save(),
            Job::SaveAfterFlush => self.save_after_flush(),
        }
    }

    /// After a FLUSHALL (`after_flushall`): a running BGSAVE is stopped — its file would
    /// bring the flushed keys back — and where the dataset is kept in `dbfilename` it is
    /// written now, before the reply leaves (Redis's `flushAllDataAndResetRDB`).
    fn save_after_flush(&mut self) {
        use crate::commands::AfterFlushAll;
        let after = std::mem::take(&mut self.engine.state.persistence.after_flushall);
        if after == AfterFlushAll::Nothing {
            return;
        }
        if self.jobs.background_save.is_some() {
            self.stop_background_save();
            self.engine.keyspace.forget_snapshot();
        }
        if after != AfterFlushAll::SaveDump {
            return;
        }
        match self.save_dump_now() {
            Ok(size) => {
                tracing::info!("DB saved on disk ({size} bytes)");
                self.engine.state.record_save();
            }
            Err(error) => tracing::warn!("can't save the DB after FLUSHALL: {error}"),
        }
    }

    /// Writes `dbfilename` now, on the loop (SAVE's way), with the place in the
    /// replication history the dataset is at.
    pub(super) fn save_dump_now(&self) -> Result<u64, crate::snapshot::SnapshotError> {
        let state = &self.engine.state;
        crate::snapshot::save_configured(
            &*self.storage,
            &self.engine.keyspace,
            &state.config,
            &state.scripting,
            state.replication.saved_history(&self.engine.effects),
        )
    }

    /// Stops a running BGSAVE and waits for its thread (its temp file removed). One that
    /// finished meanwhile is recorded; a stopped one is no failure (nor is Redis's
    /// killed child).
    fn stop_background_save(&mut self) {
        let Some(mut save) = self.jobs.background_save.take() else {
            return;
        };
        tracing::info!("a background save is in progress: stopping it");
        save.job.cancel_and_wait(&mut self.engine.keyspace);
        match save.job.take_outcome() {
            Some(Ok(outcome)) => self.record_background_save_end(Ok(outcome), save.dirty_at_start),
            _ => {
                let p = &mut self.engine.state.persistence;
                p.rdb_bgsave_in_progress = false;
                p.rdb_bgsave_started = None;
            }
        }
    }

    /// One turn's share of background capture, and the end of finished jobs.
    pub(super) fn background_snapshot_work(&mut self) {
        let keyspace = &mut self.engine.keyspace;
        if let Some(compaction) = &mut self.jobs.compaction {
            compaction.job.step(keyspace, CAPTURE_SLOTS_PER_TURN);
            if let Some(finished) = compaction.poll() {
                self.jobs.compaction = None;
                self.engine.keyspace.forget_snapshot();
                self.finish_rewrite(finished);
            }
        }
        if let Some(save) = &mut self.jobs.background_save {
            save.job
                .step(&mut self.engine.keyspace, CAPTURE_SLOTS_PER_TURN);
            if let Some(outcome) = save.job.take_outcome() {
                let save = self.jobs.background_save.take().expect("checked");
                self.engine.keyspace.forget_snapshot();
                self.finish_background_save(outcome, save.dirty_at_start);
            }
        }
        if let Some(sync) = &mut self.jobs.full_sync {
            sync.job
                .step(&mut self.engine.keyspace, CAPTURE_SLOTS_PER_TURN);
            let diskless = sync.pipe.is_some();
            if let Some(outcome) = sync.job.take_outcome() {
                let sync = self.jobs.full_sync.take().expect("checked");
                self.engine.keyspace.forget_snapshot();
                self.finish_full_sync(sync, outcome);
                self.start_scheduled_jobs();
            }
            if diskless {
                // The writer's thread woke the loop: the pipe has bytes for the replicas.
                self.flush_diskless_replicas();
            }
        }
        self.engine.state.replication.full_sync_in_progress = self.jobs.full_sync.is_some();
        let held = self.jobs.snapshots().map(|job| job.held_bytes).sum();
        let keys_written = self.jobs.snapshots().next().map(|job| job.keys_written);
        let p = &mut self.engine.state.persistence;
        p.capture_held_bytes = held;
        match keys_written {
            Some(keys) => p.current_save_keys_processed = keys,
            None => (p.current_save_keys_processed, p.current_save_keys_total) = (0, 0),
        }
    }

    /// Stops the jobs in progress at once, their files removed, none counted as failed:
    /// a replica whose master's snapshot just arrived (Redis's replica kills its
    /// children there). What they would write is the dataset about to be replaced; run to
    /// their end instead, they held the event loop for as long as they had left.
    pub(super) fn cancel_jobs_for_new_dataset(&mut self) {
        // Paused writers would sleep until a tick that does not come while the loop waits
        // for them (the next tick sets the configured rate again).
        self.jobs.rate.set(crate::storage::Rate::Unlimited);
        let compaction = self.jobs.compaction.take();
        let full_sync = self.jobs.full_sync.take();
        if let Some(mut compaction) = compaction {
            tracing::info!("a background append-only log rewrite is in progress: stopping it");
            compaction.job.cancel_and_wait(&mut self.engine.keyspace);
            // Its switch to a new incremental file was requested with it: whether that
            // happened decides the manifest in force.
            let finished = compaction.wait_for_end();
            if finished.purpose == Purpose::TurnLogOn {
                // Stopped before its base was committed, or just after: started again
                // on the new dataset (`apply_appendonly`) either way.
                let p = &mut self.engine.state.persistence;
                p.aof_rewrite_in_progress = false;
                p.aof_rewrite_started = None;
                self.abandon_new_log();
            } else if finished.result.is_ok() {
                self.record_rewrite_end(finished);
            } else if finished.purpose == Purpose::BaseOnly {
                let p = &mut self.engine.state.persistence;
                p.aof_rewrite_in_progress = false;
                p.aof_rewrite_started = None;
            } else {
                // Stopped, not failed (Redis's killed child is no error either).
                self.manifest = Some(finished.manifest);
                let p = &mut self.engine.state.persistence;
                p.aof_rewrite_in_progress = false;
                p.aof_rewrite_started = None;
                self.refresh_log_sizes();
            }
        }
        self.stop_background_save();
        if let Some(mut sync) = full_sync {
            tracing::info!("a full sync's snapshot is in progress: stopping it");
            sync.cancel_and_wait(&mut self.engine.keyspace);
        }
        // INFO's job figures follow at this turn's `background_snapshot_work`.
        self.engine.keyspace.forget_snapshot();
    }

    /// Runs the jobs in progress, and any they start on ending, to their end on the loop,
    /// blocking it: DEBUG RELOAD and LOADAOF, which must not change the files under a job
    /// (nor a job's files under the load).
    pub(super) fn finish_jobs_now(&mut self) {
        // Paced writers would wait for cron ticks that do not come while the loop waits;
        // the next tick sets the configured rate again.
        self.jobs.rate.set(crate::storage::Rate::Unlimited);
        while self.jobs.running() {
            self.background_snapshot_work();
            // Capture goes on at once; the writers get a moment to write.
            if self.jobs.running() && self.jobs.capture_pending() != Some(false) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    pub(super) fn waker_notify(&self) -> Box<dyn Fn() + Send> {
        let waker = self.waker.clone();
        Box::new(move || {
            let _ = waker.wake();
        })
    }

    /// Starts a compaction (BGREWRITEAOF, the automatic trigger, a scheduled one).
    fn start_rewrite(&mut self) {
        if self.log_writer.is_none() {
            // The log is off: a rewrite turns it on if the configuration asks for it, or
            // writes a base alone (Redis 7's BGREWRITEAOF with appendonly no).
            if self.loading.is_none() {
                if self.engine.state.config.appendonly {
                    self.start_log();
                } else {
                    self.start_base_only();
                }
            }
            return;
        }
        if !self.jobs.running() {
            // The switch to the new file comes after every record logged so far.
            self.take_effects();
        }
        if self.jobs.running() {
            self.engine.state.persistence.aof_rewrite_scheduled = true;
            return;
        }
        let notify = self.waker_notify();
        let settings = self.compaction_settings();
        let (Some(writer), Some(paths), Some(manifest)) =
            (&mut self.log_writer, &self.log_paths, &self.manifest)
        else {
            return;
        };
        let compaction = Compaction::start(
            &mut self.engine.keyspace,
            writer,
            self.storage.clone(),
            paths,
            manifest,
            settings,
            notify,
        );
        self.rewrite_begun(compaction);
    }

    /// BGREWRITEAOF with the log off: a new base alone in the log directory, as Redis 7
    /// writes one (`Compaction::start_without_log`).
    fn start_base_only(&mut self) {
        if self.jobs.running() {
            self.engine.state.persistence.aof_rewrite_scheduled = true;
            return;
        }
        let (paths, manifest) = match self.log_dir_with_the_log_off() {
            Ok(opened) => opened,
            Err(error) => {
                let error = crate::compaction::CompactionError::Directory(error);
                return self.rewrite_begun(Err(error));
            }
        };
        let settings = self.compaction_settings();
        let notify = self.waker_notify();
        let compaction = Compaction::start_without_log(
            &mut self.engine.keyspace,
            self.storage.clone(),
            &paths,
            &manifest,
            settings,
            notify,
        );
        self.rewrite_begun(compaction);
    }

    /// How a compaction runs, from the configuration.
    pub(super) fn compaction_settings(&self) -> crate::compaction::Settings {
        let config = &self.engine.state.config;
        crate::compaction::Settings {
            parts: config.aof_rewrite_parts(crate::stats::allocated_bytes()),
            key_delay_us: config.rdb_key_save_delay_us,
            compression: config.rdbcompression,
            pacing: self.jobs.pacing(config.aof_rewrite_incremental_fsync),
            functions: self.engine.state.scripting.library_codes(),
            form: base_form(config),
            history: crate::log::startup::History::of(config),
        }
    }

    /// A compaction asked for: started, or failed to start.
    fn rewrite_begun(
        &mut self,
        compaction: Result<Compaction, crate::compaction::CompactionError>,
    ) {
        let p = &mut self.engine.state.persistence;
        p.aof_rewrite_scheduled = false;
        p.aof_rewrites += 1; // counted at the start, as Redis does
        match compaction {
            Ok(compaction) => self.rewrite_started(compaction),
            Err(error) => {
                // Nothing changed (no capture, no log switch): report it as a failure.
                tracing::warn!("background append-only log rewrite failed to start: {error}");
                p.aof_last_bgrewrite_failed = true;
                p.aof_rewrites_consecutive_failures += 1;
                p.aof_last_rewrite_failure = Some(Instant::now());
            }
        }
    }

    /// A compaction has started (a log's switch to a new file, or a new log).
    pub(super) fn rewrite_started(&mut self, compaction: Compaction) {
        let engine = &mut self.engine;
        let p = &mut engine.state.persistence;
        p.current_save_keys_total = engine.keyspace.total_keys() as u64;
        p.aof_rewrite_in_progress = true;
        p.aof_rewrite_started = Some(Instant::now());
        // The new file starts empty: the next record needs its SELECT.
        engine.effects.selected_db = None;
        self.jobs.compaction = Some(compaction);
    }

    fn finish_rewrite(&mut self, finished: crate::compaction::Finished) {
        self.record_rewrite_end(finished);
        self.start_scheduled_jobs();
    }

    /// A compaction's end in INFO's fields and the manifest now in force.
    fn record_rewrite_end(&mut self, finished: crate::compaction::Finished) {
        let purpose = finished.purpose;
        let failure = finished.result.as_ref().err().map(ToString::to_string);
        self.record_compaction_end(finished);
        if purpose == Purpose::TurnLogOn {
            self.new_log_finished(failure.is_none(), failure);
        }
    }

    fn record_compaction_end(&mut self, finished: crate::compaction::Finished) {
        let p = &mut self.engine.state.persistence;
        let seconds = p.aof_rewrite_started.take().map(|t| t.elapsed());
        p.aof_rewrite_in_progress = false;
        p.aof_last_rewrite_seconds = seconds.map(|d| d.as_secs());
        match finished.result {
            Ok(outcome) => {
                let bytes: u64 = outcome.part_bytes.iter().sum();
                tracing::info!(
                    "background append-only log rewrite finished successfully: {} keys in {} part(s), {:.1} MB in {:.3}s",
                    outcome.keys,
                    outcome.part_bytes.len(),
                    bytes as f64 / 1e6,
                    outcome.seconds
                );
                p.aof_last_bgrewrite_failed = false;
                p.aof_rewrites_consecutive_failures = 0;
                p.aof_last_rewrite_failure = None;
                p.aof_last_rewrite_bytes = bytes;
                p.aof_last_rewrite_keys = outcome.keys;
                if finished.purpose != Purpose::BaseOnly
                    && matches!(
                        self.master_base,
                        super::master_link::MasterBase::AwaitingCompaction
                    )
                {
                    // Started after the master's snapshot was adopted (the adoption stops
                    // running jobs), so it persisted that dataset.
                    self.master_base_persisted();
                }
            }
            Err(error) => {
                tracing::warn!("background append-only log rewrite failed: {error}");
                self.engine.keyspace.cancel_capture();
                p.aof_last_bgrewrite_failed = true;
                p.aof_rewrites_consecutive_failures += 1;
                p.aof_last_rewrite_failure = Some(Instant::now());
            }
        }
        if finished.purpose != Purpose::BaseOnly {
            self.manifest = Some(finished.manifest);
        }
        self.refresh_log_sizes();
        let p = &mut self.engine.state.persistence;
        if !p.aof_last_bgrewrite_failed {
            p.aof_rewrite_base_size = p.aof_current_size;
        }
    }

    /// BGSAVE: a forkless snapshot to `dbfilename`, written under a temporary name and
    /// renamed into place when complete.
    fn start_background_save(&mut self) {
        if self.jobs.running() {
            self.engine.state.persistence.rdb_bgsave_scheduled = true;
            return;
        }
        let config = &self.engine.state.config;
        let dir = config.dir.clone();
        let name = config.dbfilename.clone();
        let temp = dir.join(format!("temp-bgsave-{}.rdb", std::process::id()));
        let storage = self.storage.clone();
        let finisher = {
            let temp = temp.clone();
            let storage = storage.clone();
            Box::new(move |_sizes: &[u64]| {
                crate::snapshot::install_file(&*storage, &temp, &dir, &name)
            })
        };
        let spec = crate::snapshot::JobSpec {
            storage,
            part_paths: vec![temp],
            options: crate::rdb::RdbWriterOptions {
                compression: config.rdbcompression,
                functions: self.engine.state.scripting.library_codes(),
                // The place in the replication history at the capture's instant, which
                // is now.
                extra_aux: (self
                    .engine
                    .state
                    .replication
                    .saved_history(&self.engine.effects))
                .map_or_else(Vec::new, |history| history.aux_fields()),
                ..crate::rdb::RdbWriterOptions::default()
            },
            form: crate::snapshot::PartForm::Rdb,
            part_aux: Vec::new(),
            finisher,
            key_delay_us: config.rdb_key_save_delay_us,
            pacing: self.jobs.pacing(config.rdb_save_incremental_fsync),
            notify: self.waker_notify(),
        };
        let job = SnapshotJob::start(&mut self.engine.keyspace, spec);
        let state = &mut self.engine.state;
        let p = &mut state.persistence;
        p.rdb_bgsave_scheduled = false;
        p.rdb_saves += 1; // counted at the start, as Redis does
        let job = match job {
            Ok(job) => job,
            Err(error) => {
                tracing::warn!("background saving failed to start: {error}");
                p.rdb_last_bgsave_failed = true;
                p.rdb_last_bgsave_failure = Some(Instant::now());
                return;
            }
        };
        tracing::info!("background saving started");
        p.current_save_keys_total = self.engine.keyspace.total_keys() as u64;
        p.rdb_bgsave_in_progress = true;
        p.rdb_bgsave_started = Some(Instant::now());
        self.jobs.background_save = Some(BackgroundSave {
            job,
            dirty_at_start: state.dirty,
        });
    }

    fn finish_background_save(
        &mut self,
        outcome: Result<JobOutcome, SnapshotError>,
        dirty_at_start: u64,
    ) {
        self.record_background_save_end(outcome, dirty_at_start);
        self.start_scheduled_jobs();
    }

    /// A BGSAVE's end in INFO's fields.
    fn record_background_save_end(
        &mut self,
        outcome: Result<JobOutcome, SnapshotError>,
        dirty_at_start: u64,
    ) {
        let state = &mut self.engine.state;
        let p = &mut state.persistence;
        let seconds = p.rdb_bgsave_started.take().map(|t| t.elapsed());
        p.rdb_bgsave_in_progress = false;
        p.rdb_last_bgsave_seconds = seconds.map(|d| d.as_secs());
        match outcome {
            Ok(outcome) => {
                tracing::info!(
                    "background saving terminated with success: {} keys, {} bytes",
                    outcome.keys,
                    outcome.part_bytes.iter().sum::<u64>()
                );
                p.rdb_last_bgsave_failed = false;
                p.rdb_last_bgsave_failure = None;
                state.dirty = state.dirty.saturating_sub(dirty_at_start);
                state.last_save_unix_seconds = crate::clock::unix_seconds();
            }
            Err(error) => {
                tracing::warn!("background saving failed: {error}");
                self.engine.keyspace.cancel_capture();
                p.rdb_last_bgsave_failed = true;
                p.rdb_last_bgsave_failure = Some(Instant::now());
            }
        }
    }

    /// Starts a job scheduled while another ran (or inside EXEC), once nothing runs.
    pub(super) fn start_scheduled_jobs(&mut self) {
        // A FLUSHALL's save (one inside EXEC or a script) does not wait for jobs: it
        // stops a BGSAVE that would bring the old keys back.
        self.save_after_flush();
        if self.jobs.running() {
            return;
        }
        let replicas = &self.engine.state.replication.replicas;
        if replicas.any_in(crate::replication::master::ReplicaState::WaitSnapshotStart) {
            self.start_full_sync(None);
            if self.jobs.running() {
                return;
            }
        }
        let p = &self.engine.state.persistence;
        if p.aof_rewrite_scheduled {
            self.start_rewrite();
        } else if p.rdb_bgsave_scheduled && bgsave_retry_allowed(p.rdb_last_bgsave_failure) {
            self.start_background_save();
        }
    }

    /// Recomputes the log sizes of INFO from the manifest in force: the files other than
    /// the one being appended to do not change size, so this runs only when it changes.
    pub(super) fn refresh_log_sizes(&mut self) {
        let (Some(paths), Some(manifest)) = (&self.log_paths, &self.manifest) else {
            return;
        };
        let size = |name: &str| self.storage.len(&paths.file(name)).unwrap_or(0);
        let base: u64 = manifest.base().map(|e| size(&e.name)).sum();
        let last = manifest.last_incremental().map(|e| e.name.as_str());
        let closed: u64 = manifest
            .incremental()
            .filter(|e| Some(e.name.as_str()) != last)
            .map(|e| size(&e.name))
            .sum();
        let p = &mut self.engine.state.persistence;
        p.aof_base_size = base;
        p.aof_base_parts = manifest.base().count();
        self.closed_log_bytes = base + closed;
        let current = self.log_writer.as_ref().map_or(0, LogWriter::file_bytes);
        p.aof_current_size = self.closed_log_bytes + current;
    }

    /// Redis's automatic triggers: the log grew by `auto-aof-rewrite-percentage` since the
    /// last compaction (and is past `auto-aof-rewrite-min-size`), or a `save` point is due.
    pub(super) fn automatic_jobs(&mut self) {
        if self.jobs.running() {
            return;
        }
        let state = &self.engine.state;
        let config = &state.config;
        let p = &state.persistence;
        let now_seconds = crate::clock::unix_seconds();
        let save_due = config.save_points.iter().any(|&(seconds, changes)| {
            state.dirty >= changes && now_seconds - state.last_save_unix_seconds >= seconds as i64
        }) && bgsave_retry_allowed(p.rdb_last_bgsave_failure);
        if save_due {
            tracing::info!("a save point is due: saving in the background");
            self.start_background_save();
            return;
        }
        if self.log_writer.is_none() || config.auto_aof_rewrite_percentage == 0 {
            return;
        }
        let base = p.aof_rewrite_base_size.max(1);
        let growth = (p.aof_current_size * 100 / base).saturating_sub(100);
        let backed_off = rewrite_backing_off(
            p.aof_rewrites_consecutive_failures,
            p.aof_last_rewrite_failure,
        );
        if p.aof_current_size > config.auto_aof_rewrite_min_size
            && growth >= config.auto_aof_rewrite_percentage
            && !backed_off
        {
            tracing::info!("starting an automatic append-only log rewrite: {growth}% growth");
            self.start_rewrite();
        }
    }
}
