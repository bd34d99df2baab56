//! DEBUG RELOAD and DEBUG LOADAOF on the event loop, which owns the files they touch: the
//! dataset is persisted where start-up would load it from, then loaded again through
//! start-up's own path (`recovery::load_dataset`) into a keyspace of its own, which the
//! engine puts in place (`Engine::adopt_dataset`). The loop is blocked meanwhile, as
//! Redis's DEBUG RELOAD blocks its server.
//!
//! Redis's RELOAD saves `dump.rdb` and loads it back. Tessera's equivalent is what a
//! restart would load:
//!
//! - with the log on (`appendonly yes`, the default), a compaction run to its end on the
//!   loop (a new base snapshot of the dataset and an empty incremental file, committed by
//!   the manifest, exactly as BGREWRITEAOF does), then the log directory loaded as at
//!   start-up (base parts, then the incremental files). The log so describes the dataset
//!   before, during and after, and a restart loads the same. NOSAVE skips the compaction
//!   and loads the log as it stands (synced first): the log is always the dataset, so it
//!   loads what is there; NOFLUSH adds it to the dataset, which without MERGE means
//!   conflicts on every key (refused).
//! - with the log off, SAVE to `dbfilename` (unless NOSAVE), then that file loaded, as
//!   Redis does.
//!
//! LOADAOF syncs the log, then loads the log directory in place of the dataset, as Redis's
//! does (which also deletes the history files the manifest lists, as start-up does). With
//! the log off it loads the directory as the last BGREWRITEAOF left it (a base alone).
//!
//! Differences from Redis: a running BGSAVE or compaction is first run to its end (Redis
//! saves beside its child); the dataset is loaded beside the current one and put in place
//! only if all of it loaded, so a failure leaves the dataset — and the log — as they were
//! (Redis has emptied it by then, or stops the server on a duplicated key); LOADAOF with the
//! log off and no manifest is refused (Redis exits). The call's statistics (INFO
//! commandstats) do not include the reload's time.

use super::Server;
use super::session::{Client, SessionsView};
use crate::commands::{Reload, ReloadCommand};
use crate::engine::{Adopt, AdoptError};
use crate::recovery::{LoadError, Loaded};
use crate::resp::ReplyWriter;
use std::time::Instant;

/// Why a reload did nothing (the dataset is as it was).
#[derive(Debug, thiserror::Error)]
enum ReloadError {
    #[error("the dataset is still loading")]
    Loading,
    #[error("the append-only log is off and {0} does not exist")]
    NoLog(String),
    #[error("can't save the dataset: {0}")]
    Save(String),
    #[error("can't sync the append-only log: {0}")]
    Sync(crate::log::writer::LogError),
    #[error("{0} does not exist")]
    NoSnapshot(String),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(
        "the log's manifest changed under the writer (it appends to {writing}, the manifest ends with {listed})"
    )]
    ManifestMoved { writing: String, listed: String },
    #[error(transparent)]
    Adopt(#[from] AdoptError),
}

impl ReloadError {
    /// The error reply (Redis's texts where Redis has one).
    fn reply(&self, command: ReloadCommand) -> &'static str {
        match (self, command) {
            (ReloadError::Loading, _) => "LOADING Redis is loading the dataset in memory",
            // Redis's `shared.err`, its reply when RELOAD's save fails.
            (ReloadError::Save(_), _) => "ERR",
            (_, ReloadCommand::Reload) => "ERR Error trying to load the RDB dump",
            (_, ReloadCommand::LoadAof) => "ERR Error trying to load the append only file",
        }
    }
}

impl Server {
    /// Does what DEBUG RELOAD or LOADAOF asked for `client` and writes its reply.
    pub(super) fn reload(&mut self, client: &mut Client, reload: Reload) {
        let started = Instant::now();
        let result = self.persist_and_load(reload).and_then(|loaded| {
            let how = if reload.flush {
                Adopt::Replace
            } else {
                Adopt::Add {
                    merge: reload.merge,
                }
            };
            self.adopt(client, loaded, how)
        });
        let messages = match result {
            Ok(messages) => {
                // Redis's log lines.
                let what = match reload.command {
                    ReloadCommand::Reload => "DB reloaded by DEBUG RELOAD",
                    ReloadCommand::LoadAof => "Append Only File loaded by DEBUG LOADAOF",
                };
                tracing::warn!("{what} in {:.3}s", started.elapsed().as_secs_f64());
                if reload.command == ReloadCommand::LoadAof {
                    self.engine.state.dirty = 0;
                }
                if reload.reply {
                    ReplyWriter::new(&mut client.output, client.state.resp3).ok();
                }
                messages
            }
            Err(error) => {
                tracing::warn!(
                    "DEBUG {} failed, the dataset is unchanged: {error}",
                    reload.command.name()
                );
                let text = error.reply(reload.command);
                let kind = crate::command_stats::ErrorKind::of(text.as_bytes());
                self.engine.state.commands.error_replied(kind);
                if reload.reply {
                    ReplyWriter::new(&mut client.output, client.state.resp3).error(text);
                }
                Vec::new()
            }
        };
        // The caller lists the client among this turn's outputs.
        client.output.extend_from_slice(&messages);
    }

    /// Persists the dataset as `reload` asks and loads it from disk into a keyspace of its
    /// own, as start-up does.
    fn persist_and_load(&mut self, reload: Reload) -> Result<Loaded, ReloadError> {
        if self.loading.is_some() {
            return Err(ReloadError::Loading);
        }
        // The files must not change under a job, nor a job's under the load (a log being
        // turned on is on once its job is over).
        self.finish_jobs_now();
        let log_on = self.log_writer.is_some();
        if reload.command == ReloadCommand::LoadAof && !log_on {
            let manifest =
                crate::log::LogPaths::from_config(&self.engine.state.config).manifest_path();
            if self.storage.len(&manifest).is_err() {
                // Redis exits there; a log that is not there is not made here either.
                return Err(ReloadError::NoLog(manifest.display().to_string()));
            }
        }
        if reload.save {
            if log_on {
                self.compact_now()?;
            } else {
                self.save_now()?;
            }
        }
        // Every record so far (this turn's too) in the stream and the file, and durable.
        self.take_effects();
        let config = &self.engine.state.config;
        if let Some(writer) = &mut self.log_writer {
            writer.sync().map_err(ReloadError::Sync)?;
        } else if reload.command == ReloadCommand::Reload {
            let path = config.dir.join(&config.dbfilename);
            if self.storage.len(&path).is_err() {
                return Err(ReloadError::NoSnapshot(path.display().to_string()));
            }
        }
        let progress = crate::commands::LoadProgress::default();
        let storage = self.storage.clone();
        let loaded = match reload.command {
            // With the log off too: what the last BGREWRITEAOF wrote, as Redis's.
            ReloadCommand::LoadAof => {
                let opening = if log_on {
                    crate::log::startup::Opening::ToAppend
                } else {
                    crate::log::startup::Opening::AsItIs
                };
                crate::recovery::load_log(config, storage, &progress, opening)?
            }
            ReloadCommand::Reload => crate::recovery::load_dataset(config, storage, &progress)?,
        };
        // The writer goes on appending to the file it has open: the manifest loaded must
        // still end with it (nothing but this loop changes it while no job runs).
        if let (Some(now), Some(before)) = (&loaded.manifest, &self.manifest) {
            let name = |m: &crate::log::manifest::Manifest| {
                m.last_incremental()
                    .map(|e| e.name.clone())
                    .unwrap_or_default()
            };
            if name(now) != name(before) {
                return Err(ReloadError::ManifestMoved {
                    writing: name(before),
                    listed: name(now),
                });
            }
        }
        Ok(loaded)
    }

    /// Puts `loaded` in place (the engine's part), then the manifest it was loaded from.
    fn adopt(
        &mut self,
        client: &mut Client,
        loaded: Loaded,
        how: Adopt,
    ) -> Result<Vec<u8>, ReloadError> {
        let limits = self.engine.state.config.output_buffer_limits;
        let mut host = SessionsView::new(&mut self.clients, None, &mut self.touched, limits);
        let messages = self.engine.adopt_dataset(
            &client.state,
            loaded.keyspace,
            &loaded.functions,
            how,
            &mut host,
        )?;
        let p = &mut self.engine.state.persistence;
        p.loaded_keys = loaded.keys;
        if let Some(manifest) = loaded.manifest {
            // start-up settled the directory again (history files deleted); with the log
            // off (LOADAOF) no writer keeps a manifest.
            if self.log_writer.is_some() {
                self.manifest = Some(manifest);
                self.refresh_log_sizes();
            }
        } else {
            p.rdb_last_load_keys_loaded = loaded.keys;
            p.rdb_last_load_keys_expired = loaded.expired.len() as u64;
            // The keys dropped as expired leave the replicas too (Redis's RELOAD drops
            // them silently, and its replicas keep them until a promotion).
            if self.engine.state.replication.stream_active() {
                for (db, key) in &loaded.expired {
                    self.engine.effects.record(*db, &[b"DEL" as &[u8], key]);
                }
            }
        }
        Ok(messages)
    }

    /// A compaction run to its end on the loop: RELOAD's save with the log on.
    fn compact_now(&mut self) -> Result<(), ReloadError> {
        self.start_job(crate::engine::Job::Rewrite);
        if self.jobs.compaction.is_none() {
            return Err(ReloadError::Save("the compaction did not start".into()));
        }
        self.finish_jobs_now();
        if self.engine.state.persistence.aof_last_bgrewrite_failed {
            return Err(ReloadError::Save("the compaction failed".into()));
        }
        Ok(())
    }

    /// SAVE: RELOAD's save with the log off.
    fn save_now(&mut self) -> Result<(), ReloadError> {
        let size = self
            .save_dump_now()
            .map_err(|error| ReloadError::Save(error.to_string()))?;
        tracing::info!("DB saved on disk ({size} bytes)");
        self.engine.state.record_save();
        Ok(())
    }
}
