//! Snapshots in RDB form: the synchronous `SAVE` (`save`, `install_file`), and the
//! reading of an RDB file into databases of its own (`read_into_dbs`, `load`). The
//! forkless background snapshot that compaction, `BGSAVE` and a full sync share lives in
//! `job` (its items are re-exported here).
//!
//! Failures are `SnapshotError`s, the background job's too.

mod job;
mod resp_form;

pub use job::{Finisher, JobOutcome, JobProgress, JobSpec, SnapshotJob, part_of_slot, part_slots};

use crate::keyspace::{Db, Entry, Keyspace};
use crate::rdb::{RdbError, RdbWriter, RdbWriterOptions, Refusal};
use crate::storage::{CrashPoint, PacedFile, RateLimit, Storage, StorageFile, StorageReader};
use std::fmt;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a snapshot was doing to a file when the system refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileAction {
    Create,
    Write,
    Fsync,
    Open,
}

impl fmt::Display for FileAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileAction::Create => "create",
            FileAction::Write => "write",
            FileAction::Fsync => "fsync",
            FileAction::Open => "open",
        })
    }
}

/// Why a snapshot could not be written, installed or loaded. The texts are those of the
/// server's log lines (SAVE, BGSAVE, compaction, start-up).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The system refused to create, write, fsync or open a snapshot file.
    #[error("can't {action} {}: {source}", path.display())]
    Io {
        action: FileAction,
        path: PathBuf,
        source: io::Error,
    },
    /// Serialising into a snapshot file failed (its I/O errors included).
    #[error("can't write {}: {source}", path.display())]
    Write { path: PathBuf, source: RdbError },
    /// The rename over the destination, or the directory fsync after it, failed.
    #[error("can't move the snapshot into place: {0}")]
    Install(#[source] io::Error),
    /// A snapshot file being loaded is not a valid RDB file (damaged, cut short, empty).
    #[error("Bad snapshot file {}: {source}", path.display())]
    BadFile { path: PathBuf, source: RdbError },
    #[error("can't start a snapshot thread: {0}")]
    StartJob(#[source] io::Error),
    #[error("can't start a snapshot writer thread: {0}")]
    StartWriter(#[source] io::Error),
    #[error("a snapshot writer thread panicked")]
    WriterPanicked,
    /// The job was stopped (SHUTDOWN), or another part failed.
    #[error("cancelled")]
    Cancelled,
}

/// `save` to `dbfilename` in `dir` with the configuration's options and the server's
/// function libraries: SAVE, SHUTDOWN SAVE, DEBUG RELOAD with the log off.
pub fn save_configured(
    storage: &dyn Storage,
    keyspace: &Keyspace,
    config: &crate::config::Config,
    scripting: &crate::scripting::Scripting,
    history: Option<SavedHistory>,
) -> Result<u64, SnapshotError> {
    save(
        storage,
        keyspace,
        &config.dir,
        &config.dbfilename,
        SaveOptions {
            compression: config.rdbcompression,
            incremental_fsync: config.rdb_save_incremental_fsync,
            functions: scripting.library_codes(),
            history,
        },
    )
}

/// How `save` writes its file.
pub struct SaveOptions {
    /// `rdbcompression`.
    pub compression: bool,
    /// `rdb-save-incremental-fsync`.
    pub incremental_fsync: bool,
    /// The function libraries' code.
    pub functions: Vec<bytes::Bytes>,
    /// A replica's place in its master's history (`Replication::saved_history`).
    pub history: Option<SavedHistory>,
}

/// Writes every database of `keyspace` to `dir/file_name` atomically; returns its size.
/// This is `SAVE`: the event loop does the work itself, as in Redis. The steps are
/// checkpoints (`save-temp-written`, `save-temp-synced`, then `install_file`'s).
pub fn save(
    storage: &dyn Storage,
    keyspace: &Keyspace,
    dir: &Path,
    file_name: &str,
    options: SaveOptions,
) -> Result<u64, SnapshotError> {
    let temp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let pacing = Pacing {
        incremental_fsync: options.incremental_fsync,
        rate: None,
    };
    let result = write_rdb(storage, keyspace, &temp, options, &pacing).and_then(|size| {
        install_file(storage, &temp, dir, file_name)?;
        Ok(size)
    });
    if result.is_err() {
        let _ = storage.remove_file(&temp);
    }
    result
}

/// Renames a complete, synced file over `dir/file_name` and makes the rename durable
/// (`SAVE` and the finisher of `BGSAVE`). Checkpoints `dump-renamed`, `dump-dir-synced`.
pub fn install_file(
    storage: &dyn Storage,
    temp: &Path,
    dir: &Path,
    name: &str,
) -> Result<(), SnapshotError> {
    storage
        .rename(temp, &dir.join(name))
        .map_err(SnapshotError::Install)?;
    storage.checkpoint(CrashPoint::DumpRenamed);
    storage.sync_dir(dir).map_err(SnapshotError::Install)?;
    storage.checkpoint(CrashPoint::DumpDirSynced);
    Ok(())
}

/// The form a part file is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PartForm {
    /// An RDB file: every snapshot, and a log base with `aof-use-rdb-preamble yes`.
    #[default]
    Rdb,
    /// Commands (`aof-use-rdb-preamble no`): a log base only (`resp_form`).
    Resp,
}

/// A part file being written, in its form.
enum PartWriter {
    Rdb(RdbWriter<BufWriter<PacedFile>>),
    Resp(resp_form::RespWriter<BufWriter<PacedFile>>),
}

impl PartWriter {
    /// Starts database `db`; `keys` and `expires` are sizing hints (RDB only).
    fn select_db(&mut self, db: u32, keys: u64, expires: u64) -> Result<(), RdbError> {
        match self {
            PartWriter::Rdb(w) => w.select_db(db, keys, expires),
            PartWriter::Resp(w) => w.select_db(db),
        }
    }

    fn write_entry(&mut self, db: u32, entry: &Entry) -> Result<(), RdbError> {
        match self {
            PartWriter::Rdb(w) => w.write_entry(db, entry),
            PartWriter::Resp(w) => w.write_entry(db, entry),
        }
    }

    /// Writes a record that `encode_entry` made in this writer's form.
    fn write_encoded_entry(&mut self, db: u32, record: &[u8]) -> Result<(), RdbError> {
        match self {
            PartWriter::Rdb(w) => w.write_encoded_entry(db, record),
            PartWriter::Resp(w) => w.write_encoded_entry(db, record),
        }
    }

    fn finish(self) -> Result<(BufWriter<PacedFile>, u64), RdbError> {
        match self {
            PartWriter::Rdb(w) => w.finish(),
            PartWriter::Resp(w) => w.finish(),
        }
    }
}

/// One key's record in `form`, for `PartWriter::write_encoded_entry`.
fn encode_entry(form: PartForm, entry: &Entry) -> Vec<u8> {
    match form {
        PartForm::Rdb => crate::rdb::encode_entry(entry),
        PartForm::Resp => resp_form::encode_entry(entry),
    }
}

/// How a snapshot's files go to disk: writeback started every few megabytes
/// (`rdb-save-incremental-fsync`, `aof-rewrite-incremental-fsync`), and the byte rate all
/// background jobs share (`aof-rewrite-max-rate`; none for SAVE, which blocks anyway).
#[derive(Clone, Default)]
pub struct Pacing {
    pub incremental_fsync: bool,
    pub rate: Option<Arc<RateLimit>>,
}

fn io_error(action: FileAction, path: &Path) -> impl FnOnce(io::Error) -> SnapshotError {
    move |source| SnapshotError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn write_error(path: &Path) -> impl Fn(RdbError) -> SnapshotError + Copy {
    move |source| SnapshotError::Write {
        path: path.to_path_buf(),
        source,
    }
}

fn create_part(
    storage: &dyn Storage,
    path: &Path,
    options: &RdbWriterOptions,
    pacing: &Pacing,
    form: PartForm,
) -> Result<PartWriter, SnapshotError> {
    let file = storage
        .create(path)
        .map_err(io_error(FileAction::Create, path))?;
    let paced = PacedFile::new(file, pacing.incremental_fsync, pacing.rate.clone());
    let output = BufWriter::with_capacity(PART_BUFFER_BYTES, paced);
    match form {
        PartForm::Rdb => RdbWriter::new(output, options).map(PartWriter::Rdb),
        PartForm::Resp => {
            resp_form::RespWriter::new(output, &options.functions).map(PartWriter::Resp)
        }
    }
    .map_err(write_error(path))
}

/// A part file's write buffer.
const PART_BUFFER_BYTES: usize = 1 << 20;
/// Ends the file (EOF, checksum) and flushes it; returns the file and its size.
fn finish_writing(
    writer: PartWriter,
    path: &Path,
) -> Result<(Box<dyn StorageFile>, u64), SnapshotError> {
    let (buffered, size) = writer.finish().map_err(write_error(path))?;
    let file = buffered
        .into_inner()
        .map_err(|e| io_error(FileAction::Write, path)(e.into_error()))?;
    Ok((file.into_inner(), size))
}

fn sync_file(mut file: Box<dyn StorageFile>, path: &Path) -> Result<(), SnapshotError> {
    file.sync_all().map_err(io_error(FileAction::Fsync, path))
}

fn write_rdb(
    storage: &dyn Storage,
    keyspace: &Keyspace,
    path: &Path,
    save: SaveOptions,
    pacing: &Pacing,
) -> Result<u64, SnapshotError> {
    let describe = write_error(path);
    let options = RdbWriterOptions {
        compression: save.compression,
        functions: save.functions,
        extra_aux: save.history.map_or_else(Vec::new, |h| h.aux_fields()),
        ..RdbWriterOptions::default()
    };
    let mut writer = create_part(storage, path, &options, pacing, PartForm::Rdb)?;
    for (index, db) in keyspace.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let index = index as u32;
        writer
            .select_db(index, db.len() as u64, db.volatile_len() as u64)
            .map_err(describe)?;
        for slot in db.slots() {
            for entry in slot.iter() {
                writer.write_entry(index, entry).map_err(describe)?;
            }
        }
    }
    let (file, size) = finish_writing(writer, path)?;
    storage.checkpoint(CrashPoint::SaveTempWritten);
    sync_file(file, path)?;
    storage.checkpoint(CrashPoint::SaveTempSynced);
    Ok(size)
}

/// What loading an RDB file does with keys whose expiry has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiredKeys {
    /// Dropped: `dump.rdb` is a master's whole dataset (Redis drops them at start-up
    /// too). Their names are kept (`ReadFile::expired`): a master that continues its
    /// replication history tells its replicas with a DEL each, as Redis does.
    Drop,
    /// Kept: a base part is followed by the log, whose records may still change them — a
    /// PERSIST or PEXPIRE made before the expiry, logged after the snapshot. Dropping the
    /// key would lose it for good. Redis keeps them when it loads an AOF's RDB base for
    /// the same reason; they expire once loading is over (nothing expires during it).
    /// A replica keeps them too: only its master's DEL removes a key (its clock may run
    /// ahead of the master's).
    Keep,
}

/// What one RDB file held: its databases, keys loaded, bytes read, and function
/// libraries (their code).
pub struct ReadFile {
    pub dbs: Vec<Db>,
    pub keys: u64,
    pub bytes: u64,
    pub functions: Vec<bytes::Bytes>,
    /// The keys dropped because their expiry had passed (`ExpiredKeys::Drop`): database
    /// and name.
    pub expired: Vec<(usize, Vec<u8>)>,
    /// The `repl-stream-db` aux field, when the file is a replication snapshot: the
    /// database its master's stream continues in.
    pub stream_db: Option<usize>,
    /// The replication history the file was saved at (`repl-id`, `repl-offset` and
    /// `repl-stream-db`), when it has one.
    pub history: Option<SavedHistory>,
}

/// A place in a replication history, as a snapshot records it (Redis's `rdbSaveInfo`):
/// a restarted replica continues its master's from there (PSYNC), a restarted master
/// lets its replicas continue its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedHistory {
    pub replid: String,
    pub offset: i64,
    pub stream_db: usize,
}

impl SavedHistory {
    /// The snapshot's aux fields that record it.
    pub fn aux_fields(&self) -> Vec<(bytes::Bytes, bytes::Bytes)> {
        crate::replication::full_sync::aux_fields(&self.replid, self.offset, self.stream_db)
    }
}

/// Collects the keys of an RDB file into databases, and its function libraries.
struct FileVisitor<F> {
    entries: F,
    functions: Vec<bytes::Bytes>,
    stream_db: Option<usize>,
    replid: Option<String>,
    offset: Option<i64>,
}

impl<F: FnMut(u32, Entry) -> Result<(), Refusal>> crate::rdb::RdbVisitor for FileVisitor<F> {
    fn entry(&mut self, db: u32, entry: Entry) -> Result<(), Refusal> {
        (self.entries)(db, entry)
    }

    fn function(&mut self, code: bytes::Bytes) -> Result<(), Refusal> {
        self.functions.push(code);
        Ok(())
    }

    fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), Refusal> {
        let text = std::str::from_utf8(value).ok();
        match key {
            b"repl-stream-db" => self.stream_db = text.and_then(|v| v.parse().ok()),
            // Redis's replication IDs are 40 hexadecimal characters; anything else is
            // no history to continue.
            b"repl-id" => {
                self.replid = text
                    .filter(|v| v.len() == 40 && v.bytes().all(|b| b.is_ascii_hexdigit()))
                    .map(str::to_string)
            }
            b"repl-offset" => self.offset = text.and_then(|v| v.parse().ok()),
            _ => {}
        }
        Ok(())
    }
}

/// Reads the keys of an RDB file into databases of its own (keys already expired are
/// dropped or kept as `expired` says). `key_delay_us` is `key-load-delay` (tests only).
pub fn read_into_dbs(
    storage: &dyn Storage,
    path: &Path,
    databases: usize,
    key_delay_us: u64,
    expired: ExpiredKeys,
) -> Result<ReadFile, SnapshotError> {
    let file = storage
        .open_read(path)
        .map_err(io_error(FileAction::Open, path))?;
    let now_ms = crate::clock::unix_ms();
    let mut dbs: Vec<Db> = (0..databases).map(|_| Db::default()).collect();
    let mut keys = 0u64;
    let mut dropped = Vec::new();
    let entries = |db: u32, entry: Entry| {
        let Some(target) = dbs.get_mut(db as usize) else {
            return Err(Refusal::DatabaseOutOfRange { db, databases });
        };
        if expired == ExpiredKeys::Keep || !entry.is_expired(now_ms) {
            target.insert(entry);
            keys += 1;
        } else {
            dropped.push((db as usize, entry.key.as_ref().to_vec()));
        }
        if key_delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(key_delay_us));
        }
        Ok(())
    };
    let mut visitor = FileVisitor {
        entries,
        functions: Vec::new(),
        stream_db: None,
        replid: None,
        offset: None,
    };
    let reader = std::io::BufReader::with_capacity(1 << 20, StorageReader::new(file));
    let summary =
        crate::rdb::load(reader, &mut visitor).map_err(|source| SnapshotError::BadFile {
            path: path.to_path_buf(),
            source,
        })?;
    let FileVisitor {
        functions,
        stream_db,
        replid,
        offset,
        ..
    } = visitor;
    let history = match (replid, offset, stream_db) {
        (Some(replid), Some(offset), Some(stream_db)) if offset >= 0 => Some(SavedHistory {
            replid,
            offset,
            stream_db,
        }),
        _ => None,
    };
    Ok(ReadFile {
        dbs,
        keys,
        bytes: summary.bytes,
        functions,
        expired: dropped,
        stream_db,
        history,
    })
}

/// Loads an RDB file into `keyspace` (start-up with the log off); returns what else it
/// held (keys loaded, function libraries, replication history, expired keys dropped).
pub fn load(
    storage: &dyn Storage,
    keyspace: &mut Keyspace,
    path: &Path,
    expired: ExpiredKeys,
) -> Result<ReadFile, SnapshotError> {
    let mut read = read_into_dbs(storage, path, keyspace.dbs.len(), 0, expired)?;
    for (target, db) in keyspace.dbs.iter_mut().zip(std::mem::take(&mut read.dbs)) {
        target.absorb(db);
    }
    Ok(read)
}
