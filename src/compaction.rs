//! Log compaction (`BGREWRITEAOF`): the split, forkless rewrite of the PAOF/LEAST papers.
//!
//! The protocol, each step a named checkpoint that the crash tests stop at:
//!
//! 1. Start (event loop, at one instant): the log writer is told to switch to a new
//!    incremental file after everything logged so far, and every database begins a
//!    capture (`snapshot::SnapshotJob`). Nothing is written twice: records after this
//!    point go only to the new file, and there is no rewrite buffer.
//! 2. The writer makes the old file durable, creates the new one and commits manifest
//!    M1 = old base + old incremental files + the new one (`rewrite-incr-created`,
//!    `rewrite-incr-committed`).
//! 3. K writer threads write the parts `<name>.<seq>.base.<i>.rdb` and fsync them
//!    (`snapshot-first-capture-taken`, `snapshot-part-synced`, `snapshot-parts-written`);
//!    the directory is fsynced so their names are durable (`rewrite-parts-durable`).
//! 4. One manifest commit makes M2 = the new parts + the new incremental file the dataset,
//!    listing every file it makes obsolete as history (`type h`, as Redis 7 does)
//!    (`manifest-temp-written`, `manifest-renamed`, `rewrite-committed`).
//! 5. The history files are deleted (`rewrite-deleted-one`, `rewrite-deleted-all`), then
//!    M3 = M2 without them is committed; with `aof-disable-auto-gc yes` they are kept,
//!    listed, until it is turned off again.
//!
//! A crash before step 4's rename leaves M1 (or the manifest before it), whose files are
//! all still there, and parts with a base sequence number above any it lists: start-up
//! removes those. After it, M2, whose files are all durable, and whose history files
//! start-up deletes (`log::startup`). So every file removed after a crash is one the
//! committed manifest proves garbage. A failure at any step leaves the last committed
//! manifest in force and is reported in INFO and the log.
//!
//! Turning the log on (`Compaction::start_log`, CONFIG SET appendonly yes) is the same
//! protocol without steps 1–2: a new writer appends to `temp-<name>.incr` from the
//! compaction's instant, no manifest lists it, and step 4 first renames it to the new
//! incremental file, whose name the directory fsync then makes durable with the parts'.
//! A crash before the rename leaves the directory as it was (start-up removes `temp-`
//! files); between the rename and the commit, an unlisted non-empty incremental file
//! that start-up refuses to guess about (the rebuild finds the parts and it).
//!
//! With the log off, BGREWRITEAOF writes a new base alone, as Redis 7 does
//! (`Compaction::start_without_log`): steps 3 to 5 with no incremental file, so the
//! manifest lists the parts and nothing else (what was there becomes history). DEBUG
//! LOADAOF, or turning the log on later, reads it.
//!
//! Each part records its place in aux fields (`log::AUX_*`): part number, part count, slot
//! range, and the incremental file that follows the base. Redis ignores them; they let
//! `tessera-check-aof --rebuild-manifest` rebuild a lost manifest exactly.
//!
//! A failure is a `CompactionError`: the snapshot's, the rotation's (the log writer's
//! `LogError`), or the installation's.

use crate::log::manifest::{CommitError, FileKind, Manifest, ManifestEntry};
use crate::log::startup::History;
use crate::log::writer::{LogError, Rotation, RotationWaiter};
use crate::log::{AUX_FIRST_INCR, AUX_PART, AUX_PARTS, AUX_SLOTS, LogPaths, LogWriter};
use crate::rdb::RdbWriterOptions;
use crate::snapshot::{JobOutcome, JobSpec, PartForm, SnapshotError, SnapshotJob};
use crate::storage::{CrashPoint, Storage};
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Why a compaction failed (or could not start); the last committed manifest stays in
/// force. The texts are those of the server's log line.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// The snapshot job could not start, or a part could not be written.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The log writer could not switch to the new incremental file: the parts describe
    /// the dataset at a switch that did not happen.
    #[error("can't switch to a new incremental file: {0}")]
    Rotation(#[source] LogError),
    /// The fsync of the log directory that makes the parts' names durable.
    #[error("can't fsync {}: {source}", dir.display())]
    SyncDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// The log being turned on: its temporary file could not be created.
    #[error("can't create {}: {source}", path.display())]
    CreateLog {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The log being turned on: its file could not be renamed to its final name.
    #[error("can't rename the new log to {}: {source}", path.display())]
    PlaceLog {
        path: PathBuf,
        source: std::io::Error,
    },
    /// With the log off: the log directory could not be opened or settled.
    #[error("can't open the append-only log directory: {0}")]
    Directory(#[source] crate::log::startup::OpenError),
    /// Manifest M2 was not committed (the previous one is still in force).
    #[error("can't commit the manifest: {0}")]
    CommitManifest(#[source] std::io::Error),
}

/// The aux fields of part `part` (from 0) of `parts`, for a base followed by `first_incr`.
fn part_aux(part: usize, parts: usize, first_incr: u64) -> Vec<(Bytes, Bytes)> {
    let slots = crate::snapshot::part_slots(part, parts);
    [
        (AUX_PART, (part + 1).to_string()),
        (AUX_PARTS, parts.to_string()),
        (AUX_SLOTS, format!("{}-{}", slots.start(), slots.end())),
        (AUX_FIRST_INCR, first_incr.to_string()),
    ]
    .into_iter()
    .map(|(key, value)| (Bytes::from_static(key.as_bytes()), Bytes::from(value)))
    .collect()
}

/// How a compaction runs.
pub struct Settings {
    /// Writer threads, one snapshot part each (`aof-rewrite-threads`).
    pub parts: usize,
    /// `rdb-key-save-delay` (tests only).
    pub key_delay_us: u64,
    /// `rdbcompression`.
    pub compression: bool,
    pub pacing: crate::snapshot::Pacing,
    /// The function libraries' code, as they are when the compaction starts.
    pub functions: Vec<Bytes>,
    /// RDB parts, or one file of commands (`aof-use-rdb-preamble no`, as Redis writes it:
    /// `parts` is then 1).
    pub form: PartForm,
    /// Whether the files the new base makes history are deleted (`aof-disable-auto-gc`).
    pub history: History,
}

/// What a compaction is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// BGREWRITEAOF of the log being kept: its writer switches to a new incremental file.
    Compact,
    /// CONFIG SET appendonly yes: the new log's base (`Compaction::start_log`).
    TurnLogOn,
    /// BGREWRITEAOF with the log off: a new base and no incremental file
    /// (`Compaction::start_without_log`).
    BaseOnly,
}

/// The files of one compaction and the manifests around it.
struct Plan {
    purpose: Purpose,
    /// The incremental file that follows the new base (none for `Purpose::BaseOnly`).
    incr: Option<ManifestEntry>,
    /// Its sequence number, or the one it would have: what the parts record as the file
    /// that follows them.
    incr_seq: u64,
    base_seq: u64,
    part_names: Vec<String>,
    /// M1: the manifest in force once the writer has switched files.
    after_rotation: Manifest,
    /// M2: the parts, everything before them as history, the new incremental file.
    after_commit: Manifest,
}

impl Plan {
    fn new(paths: &LogPaths, manifest: &Manifest, settings: &Settings, purpose: Purpose) -> Plan {
        let parts = match settings.form {
            PartForm::Rdb => settings.parts.clamp(1, crate::keyspace::SLOT_COUNT),
            PartForm::Resp => 1,
        };
        let incr_seq = manifest.last_incremental().map_or(1, |e| e.seq + 1);
        let base_seq = manifest.base().map(|e| e.seq).max().unwrap_or(0) + 1;
        let incr = (purpose != Purpose::BaseOnly).then(|| ManifestEntry {
            name: paths.incremental_name(incr_seq),
            seq: incr_seq,
            kind: FileKind::Incremental,
        });
        let mut after_rotation = manifest.clone();
        after_rotation.entries.extend(incr.clone());
        let part_names: Vec<String> = match settings.form {
            PartForm::Rdb => (1..=parts)
                .map(|part| paths.base_part_name(base_seq, part, parts))
                .collect(),
            PartForm::Resp => vec![paths.base_resp_name(base_seq)],
        };
        // M2, in Redis's order: base, history, incremental. Everything M1 lists but the new
        // incremental file is made obsolete by the parts. Redis puts each file it makes
        // history at the head of its history list, the base first, then the incremental
        // files in order: they are listed newest first, then the history already there.
        let was = |kind: FileKind| {
            manifest
                .entries
                .iter()
                .filter(move |e| e.kind == kind)
                .map(|e| ManifestEntry {
                    kind: FileKind::History,
                    ..e.clone()
                })
        };
        let history: Vec<ManifestEntry> = was(FileKind::Incremental)
            .rev()
            .chain(was(FileKind::Base))
            .chain(was(FileKind::History))
            .collect();
        let mut after_commit = Manifest {
            entries: part_names
                .iter()
                .map(|name| ManifestEntry {
                    name: name.clone(),
                    seq: base_seq,
                    kind: FileKind::Base,
                })
                .collect(),
        };
        after_commit.entries.extend(history);
        after_commit.entries.extend(incr.clone());
        Plan {
            purpose,
            incr,
            incr_seq,
            base_seq,
            part_names,
            after_rotation,
            after_commit,
        }
    }
}

/// A compaction in progress, as the event loop sees it.
pub struct Compaction {
    pub job: SnapshotJob<CompactionError>,
    /// The log writer's switch to the new incremental file (none without a log).
    rotation: Option<RotationWaiter>,
    /// The manifest in force when it started.
    before: Manifest,
    /// The manifest in force if the rotation succeeded and the compaction did not.
    after_rotation: Manifest,
    /// The manifest in force once the compaction succeeds: M2, or M3 once the history
    /// files are deleted and it is committed (the job's thread updates it).
    installed: Arc<Mutex<Manifest>>,
    purpose: Purpose,
}

/// How a compaction ended: the manifest now in force, and the job's figures or error.
pub struct Finished {
    pub manifest: Manifest,
    pub result: Result<JobOutcome, CompactionError>,
    pub purpose: Purpose,
}

/// A new log's file while the log is being turned on: the writer appends to `temp` from
/// the compaction's instant; the install renames it to `incremental` just before the
/// manifest that lists it is committed.
#[derive(Clone)]
struct NewLogFile {
    temp: PathBuf,
    incremental: PathBuf,
}

impl Compaction {
    /// Starts a compaction of `keyspace` with `parts` writer threads. Everything logged
    /// before this call must already be submitted to `writer`. `manifest` is the one in
    /// force; `notify` wakes the event loop when the compaction ends.
    pub fn start(
        keyspace: &mut crate::keyspace::Keyspace,
        writer: &mut LogWriter,
        storage: Arc<dyn Storage>,
        paths: &LogPaths,
        manifest: &Manifest,
        settings: Settings,
        notify: Box<dyn Fn() + Send>,
    ) -> Result<Compaction, CompactionError> {
        let plan = Plan::new(paths, manifest, &settings, Purpose::Compact);
        let incr = plan
            .incr
            .clone()
            .expect("a compaction of a log has a new file");
        let rotation = writer.prepare_rotation();
        let compaction = Self::begin(
            keyspace,
            storage,
            paths,
            manifest,
            &plan,
            Some(rotation),
            None,
            settings,
            notify,
        )?;
        // Requested once the job exists: if it could not start, nothing has changed.
        writer.request_rotation(Rotation {
            paths: paths.clone(),
            file_name: incr.name.clone(),
            manifest: plan.after_rotation.clone(),
        });
        tracing::info!(
            "background append-only log rewrite started: {} part(s) of base {}, new records go to {}",
            plan.part_names.len(),
            plan.base_seq,
            incr.name
        );
        Ok(compaction)
    }

    /// BGREWRITEAOF with the log off, as Redis 7's: a new base of the dataset in the log
    /// directory, committed as a manifest that lists it alone (the directory's files
    /// become history). `manifest` is the directory's.
    pub fn start_without_log(
        keyspace: &mut crate::keyspace::Keyspace,
        storage: Arc<dyn Storage>,
        paths: &LogPaths,
        manifest: &Manifest,
        settings: Settings,
        notify: Box<dyn Fn() + Send>,
    ) -> Result<Compaction, CompactionError> {
        let plan = Plan::new(paths, manifest, &settings, Purpose::BaseOnly);
        let compaction = Self::begin(
            keyspace, storage, paths, manifest, &plan, None, None, settings, notify,
        )?;
        tracing::info!(
            "background append-only log rewrite started with the log off: base {} in {} part(s)",
            plan.base_seq,
            plan.part_names.len()
        );
        Ok(compaction)
    }

    /// Turns the log on (CONFIG SET appendonly yes while it is off, as Redis's
    /// `startAppendOnly`): a compaction whose instant is the new log's first record. The
    /// returned writer appends to a temporary file (`LogPaths::temp_incremental_name`)
    /// that no manifest lists — start-up removes it — until the install renames it to the
    /// new incremental file and commits the base and it as the manifest. `manifest` is
    /// the directory's (its files become history); `writer_notify` is the writer's.
    #[allow(clippy::too_many_arguments)]
    pub fn start_log(
        keyspace: &mut crate::keyspace::Keyspace,
        storage: Arc<dyn Storage>,
        paths: &LogPaths,
        manifest: &Manifest,
        settings: Settings,
        policy: crate::config::FsyncPolicy,
        writer_notify: crate::log::writer::Notify,
        notify: Box<dyn Fn() + Send>,
    ) -> Result<(Compaction, LogWriter), CompactionError> {
        let plan = Plan::new(paths, manifest, &settings, Purpose::TurnLogOn);
        let incr = plan.incr.clone().expect("a new log has a file");
        let new_log = NewLogFile {
            temp: paths.file(&paths.temp_incremental_name()),
            incremental: paths.file(&incr.name),
        };
        let file = storage
            .create(&new_log.temp)
            .map_err(|source| CompactionError::CreateLog {
                path: new_log.temp.clone(),
                source,
            })?;
        let mut writer = LogWriter::start(storage.clone(), file, 0, policy, writer_notify);
        // The split is the writer's first byte: there is nothing to switch from.
        let rotation = writer.prepare_rotation();
        writer.rotation_not_needed();
        let started = Self::begin(
            keyspace,
            storage.clone(),
            paths,
            manifest,
            &plan,
            Some(rotation),
            Some(new_log.clone()),
            settings,
            notify,
        );
        match started {
            Ok(compaction) => {
                tracing::info!(
                    "turning the append-only log on: base {} in {} part(s), new records go to {} once it is written",
                    plan.base_seq,
                    plan.part_names.len(),
                    incr.name
                );
                Ok((compaction, writer))
            }
            Err(error) => {
                drop(writer);
                let _ = storage.remove_file(&new_log.temp);
                Err(error)
            }
        }
    }

    /// Starts the job of `plan`, made from `before` (the manifest in force).
    #[allow(clippy::too_many_arguments)]
    fn begin(
        keyspace: &mut crate::keyspace::Keyspace,
        storage: Arc<dyn Storage>,
        paths: &LogPaths,
        before: &Manifest,
        plan: &Plan,
        rotation: Option<RotationWaiter>,
        new_log: Option<NewLogFile>,
        settings: Settings,
        notify: Box<dyn Fn() + Send>,
    ) -> Result<Compaction, CompactionError> {
        let Settings {
            key_delay_us,
            compression,
            pacing,
            functions,
            form,
            history,
            ..
        } = settings;
        let parts = plan.part_names.len();
        let installed = Arc::new(Mutex::new(plan.after_commit.clone()));
        let purpose = plan.purpose;
        assert_eq!(
            new_log.is_some(),
            purpose == Purpose::TurnLogOn,
            "only a new log has a file of its own"
        );
        let finisher = {
            let storage = storage.clone();
            let paths = paths.clone();
            let rotation = rotation.clone();
            let installed = installed.clone();
            let after_commit = plan.after_commit.clone();
            Box::new(move |_sizes: &[u64]| {
                install(
                    &*storage,
                    &paths,
                    rotation.as_ref(),
                    new_log.as_ref(),
                    &after_commit,
                    history,
                    &installed,
                )
            })
        };
        let job = SnapshotJob::start(
            keyspace,
            JobSpec {
                storage,
                part_paths: plan.part_names.iter().map(|n| paths.file(n)).collect(),
                options: RdbWriterOptions {
                    aof_base: true,
                    compression,
                    functions,
                    ..RdbWriterOptions::default()
                },
                form,
                part_aux: (0..parts)
                    .map(|part| part_aux(part, parts, plan.incr_seq))
                    .collect(),
                finisher,
                key_delay_us,
                pacing,
                notify,
            },
        )?;
        Ok(Compaction {
            job,
            rotation,
            before: before.clone(),
            after_rotation: plan.after_rotation.clone(),
            installed,
            purpose,
        })
    }

    pub fn purpose(&self) -> Purpose {
        self.purpose
    }

    /// The outcome once both the snapshot job and the log rotation are over (handed over
    /// once: the job's outcome is taken).
    pub fn poll(&self) -> Option<Finished> {
        // The rotation first: the job's outcome is taken only when both are known.
        let rotated = match &self.rotation {
            Some(rotation) => rotation.peek()?,
            None => Ok(()),
        };
        let result = self.job.take_outcome()?;
        let manifest = match (&result, rotated) {
            (Ok(_), _) => self.installed.lock().unwrap().clone(),
            (Err(_), Ok(())) => self.after_rotation.clone(),
            (Err(_), Err(_)) => self.before.clone(),
        };
        Some(Finished {
            manifest,
            result,
            purpose: self.purpose,
        })
    }

    /// The outcome of a cancelled compaction whose job's threads are gone (cancelled
    /// late, it may have succeeded): waits for the log writer's switch, requested with
    /// it, to be done or given up.
    pub fn wait_for_end(&self) -> Finished {
        // Its result is read by `poll`; a failure was the writer's to report.
        if let Some(rotation) = &self.rotation {
            let _ = rotation.wait();
        }
        self.poll()
            .expect("a cancelled job's outcome is set once its threads are gone")
    }
}

/// Steps 3 (end) to 5, on the snapshot job's thread once every part is written and synced.
/// `installed` gets the manifest in force once M2 is committed.
fn install(
    storage: &dyn Storage,
    paths: &LogPaths,
    rotation: Option<&RotationWaiter>,
    new_log: Option<&NewLogFile>,
    after_commit: &Manifest,
    history: History,
    installed: &Mutex<Manifest>,
) -> Result<(), CompactionError> {
    // The parts describe the dataset at the switch: useless if the switch failed.
    if let Some(rotation) = rotation {
        rotation.wait().map_err(CompactionError::Rotation)?;
    }
    if let Some(new_log) = new_log {
        // Under its final name from here on; a crash before the commit leaves a file
        // above the manifest's numbers, which start-up refuses to guess about (the
        // rebuild finds the parts and it, which record each other).
        storage
            .rename(&new_log.temp, &new_log.incremental)
            .map_err(|source| CompactionError::PlaceLog {
                path: new_log.incremental.clone(),
                source,
            })?;
    }
    // Not committed: a new log's file goes back to being nobody's.
    let unlisted = |error: CompactionError| {
        if let Some(new_log) = new_log {
            let _ = storage.remove_file(&new_log.incremental);
        }
        error
    };
    storage
        .sync_dir(&paths.dir)
        .map_err(|source| CompactionError::SyncDir {
            dir: paths.dir.clone(),
            source,
        })
        .map_err(unlisted)?;
    storage.checkpoint(CrashPoint::RewritePartsDurable);
    match paths.commit_manifest(storage, after_commit) {
        Ok(()) => {}
        Err(CommitError::NotCommitted(e)) => {
            return Err(unlisted(CompactionError::CommitManifest(e)));
        }
        Err(CommitError::NotDurable(e)) => {
            // The new manifest is in force, but a power loss may bring back the previous
            // one: keep its files (listed as history, start-up deletes them).
            tracing::warn!(
                "the new manifest is in place but the directory fsync failed ({e}); \
                 keeping the previous files until the next start-up"
            );
            return Ok(());
        }
    }
    storage.checkpoint(CrashPoint::RewriteCommitted);
    if history == History::Keep {
        // `aof-disable-auto-gc yes`: M2 stays, its history listed.
        return Ok(());
    }
    let mut undeleted = Vec::new();
    for entry in after_commit.history() {
        // Listed as history: a file left behind by a crash here is deleted at start-up.
        match storage.remove_file(&paths.file(&entry.name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!("can't remove {}: {e}", entry.name);
                undeleted.push(entry.clone());
            }
        }
        storage.checkpoint(CrashPoint::RewriteDeletedOne);
    }
    storage.checkpoint(CrashPoint::RewriteDeletedAll);
    // M3: the history that is gone is dropped from the manifest, as Redis does after
    // deleting it. If this commit fails, M2 stays in force, which is just as true.
    let mut cleaned = after_commit.without_history();
    let at = cleaned.base().count();
    cleaned.entries.splice(at..at, undeleted);
    if cleaned != *after_commit {
        match paths.commit_manifest(storage, &cleaned) {
            Ok(()) | Err(CommitError::NotDurable(_)) => *installed.lock().unwrap() = cleaned,
            Err(CommitError::NotCommitted(e)) => {
                tracing::warn!("can't commit the manifest without its history files: {e}")
            }
        }
    }
    Ok(())
}
