//! Start-up: rebuilding the keyspace from the log.
//!
//! The manifest lists the files; incremental logs are replayed in order through the same
//! command table the clients use, with expiry suspended (as Redis does while loading) so
//! that replay is deterministic. A record cut short at the very end of the last file is a
//! crash in the middle of a write: it is cut off with a warning (`aof-load-truncated yes`).
//! Anything else that does not parse is damage: start-up stops and names file and offset.
//! Which files make up the dataset is `log::startup`'s decision, made before loading.
//! A refusal or a failure is a `LoadError`, whose text is the server's fatal log line.

use crate::commands::{LoadProgress, SessionState};
use crate::config::Config;
use crate::engine::{Engine, Mode, NoSessions, Outcome, Refusal, Request};
use crate::keyspace::Keyspace;
use crate::log::LogPaths;
use crate::log::manifest::{Manifest, ManifestEntry};
use crate::log::scan::{Corruption, LogDamage, ScanError, scan_records};
use crate::log::startup::OpenError;
use crate::log::startup::Opening;
use crate::snapshot::SnapshotError;
use crate::storage::Storage;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Why start-up could not load the dataset; nothing on disk was changed but a torn tail
/// cut. The texts name the file and the offset (tests read them from "Bad file format
/// reading the append only file <path> at offset <n>").
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The log directory is refused as it is (`log::startup`).
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A function library of a snapshot could not be loaded.
    #[error("a function library of the snapshot could not be loaded: {reason}")]
    Function { reason: String },
    /// `dbfilename` or a base part can't be read, or is damaged.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// A base in RESP form (`aof-use-rdb-preamble no`) beside another base file: Redis
    /// writes it alone.
    #[error(
        "{}: a base file in RESP form must be the only base file of the manifest",
        path.display()
    )]
    RespBase { path: PathBuf },
    #[error("a loading thread panicked")]
    BasePartPanicked,
    /// The last file ends inside a record and `aof-load-truncated` is off.
    #[error(
        "Unexpected end of file reading the append only file {}: it ends in the middle of a \
         record at offset {offset} (file size {size}); start with aof-load-truncated yes or \
         repair it with tessera-check-aof --fix",
        path.display()
    )]
    TruncatedTail {
        path: PathBuf,
        offset: u64,
        size: u64,
    },
    /// A file other than the last ends inside a record.
    #[error(
        "Bad file format reading the append only file {}: it ends inside a record at offset \
         {offset}, but it is not the last file; repair it with tessera-check-aof --fix",
        path.display()
    )]
    TruncatedBeforeLast { path: PathBuf, offset: u64 },
    #[error(
        "Bad file format reading the append only file {} at offset {offset}: {reason}. \
         Make a backup of the directory, then check it with tessera-check-aof",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        offset: u64,
        #[source]
        reason: Corruption,
    },
    /// The replay's engine refused the record at `offset`.
    #[error("{}", refused_text(path, *offset, refusal))]
    Refused {
        path: PathBuf,
        offset: u64,
        #[source]
        refusal: Refusal,
    },
    #[error(
        "Bad file format reading the append only file {} at offset 0: the parsing thread \
         panicked. Make a backup of the directory, then check it with tessera-check-aof",
        path.display()
    )]
    ParserPanicked { path: PathBuf },
    /// Cutting a torn tail off the last file failed.
    #[error("can't open {} to cut it: {source}", path.display())]
    OpenToCut {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("can't cut {} at {length}: {source}", path.display())]
    Cut {
        path: PathBuf,
        length: u64,
        source: std::io::Error,
    },
}

/// The dataset loaded at start-up, and the manifest in force (when the log is on).
pub struct Loaded {
    pub keyspace: Keyspace,
    /// The function libraries (their code): the server's engine loads them.
    pub functions: Vec<bytes::Bytes>,
    pub manifest: Option<Manifest>,
    /// With the log off: the replication history `dbfilename` was saved at, if any.
    pub history: Option<crate::snapshot::SavedHistory>,
    /// With the log off, on a master: the keys `dbfilename` held whose expiry had passed
    /// (dropped; a master continuing its history sends its replicas their DELs).
    pub expired: Vec<(usize, Vec<u8>)>,
    pub keys: u64,
    pub seconds: f64,
}

/// Start-up: loads the log directory (or `dbfilename` with the log off) into a new
/// keyspace. Runs on its own thread while the event loop answers `-LOADING`.
pub fn load_dataset(
    config: &Config,
    storage: Arc<dyn Storage>,
    progress: &LoadProgress,
) -> Result<Loaded, LoadError> {
    let started = Instant::now();
    let mut keyspace = Keyspace::new(config.databases);
    if !config.appendonly {
        // With the log off, the dataset is the last snapshot, as in Redis.
        let path = config.dir.join(&config.dbfilename);
        let mut keys = 0;
        let mut functions = Vec::new();
        let mut history = None;
        let mut expired = Vec::new();
        // A replica keeps the keys whose expiry has passed, as Redis's does: its master
        // deletes them, with a DEL in its stream (its clock decides, not ours).
        let expired_keys = if config.replicaof().is_some() {
            crate::snapshot::ExpiredKeys::Keep
        } else {
            crate::snapshot::ExpiredKeys::Drop
        };
        if let Ok(size) = storage.len(&path) {
            progress.total_bytes.store(size, Ordering::Relaxed);
            let read = crate::snapshot::load(&*storage, &mut keyspace, &path, expired_keys)?;
            (keys, functions, history, expired) =
                (read.keys, read.functions, read.history, read.expired);
            progress.loaded_bytes.store(size, Ordering::Relaxed);
            let seconds = started.elapsed().as_secs_f64();
            tracing::info!(
                "DB loaded from disk: {}: {}",
                path.display(),
                rates(keys, "keys", size, seconds)
            );
        }
        return Ok(Loaded {
            keyspace,
            functions,
            manifest: None,
            history,
            expired,
            keys,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    load_log(config, storage, progress, Opening::ToAppend)
}

/// Loads the log directory (its manifest settled first, as start-up settles it) into a
/// new keyspace: start-up with the log on, and DEBUG LOADAOF (`Opening::AsItIs` with the
/// log off).
pub fn load_log(
    config: &Config,
    storage: Arc<dyn Storage>,
    progress: &LoadProgress,
    opening: Opening,
) -> Result<Loaded, LoadError> {
    let started = Instant::now();
    let keyspace = Keyspace::new(config.databases);
    let paths = LogPaths::from_config(config);
    // Refuses (changing nothing) unless the manifest proves what the dataset is; removes
    // only what it proves garbage. A new directory gets an empty log.
    let history = crate::log::startup::History::of(config);
    let manifest = crate::log::startup::open_log_dir(&*storage, &paths, opening, history)?;
    tracing::info!("loading the append-only log from {}", paths.dir.display());
    let total: u64 = manifest
        .entries
        .iter()
        .map(|e| storage.len(&paths.file(&e.name)).unwrap_or(0))
        .sum();
    progress.total_bytes.store(total, Ordering::Relaxed);
    // The replay's own engine: its keyspace becomes the server's, the rest is dropped.
    let mut engine = Engine::new(config.clone(), String::new(), storage.clone());
    engine.keyspace = keyspace;
    let report = replay_log(&*storage, &paths, &manifest, &mut engine, progress)?;
    let functions = engine.state.scripting.library_codes();
    let keyspace = engine.keyspace;
    let keys = keyspace.total_keys();
    tracing::info!(
        "DB loaded from append only file: {} from {} files, {} records",
        rates(keys as u64, "keys", report.bytes, report.seconds),
        report.files,
        report.records
    );
    Ok(Loaded {
        keys: keyspace.total_keys() as u64,
        keyspace,
        functions,
        manifest: Some(manifest),
        // The log keeps no replication history (Redis 7.0 with AOF on neither).
        history: None,
        // Kept for the log's records, expired once loading is over.
        expired: Vec::new(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A record the engine refused, in Redis's words where Redis has them ("Unknown command
/// 'x' reading the append only file", which operators and Redis's own tests look for).
fn refused_text(path: &Path, offset: u64, refusal: &Refusal) -> String {
    let advice = "Make a backup of the directory, then check it with tessera-check-aof";
    match refusal {
        Refusal::UnknownCommand(text) => {
            let name = text.split('\'').nth(1).unwrap_or(text);
            format!(
                "Unknown command '{name}' reading the append only file {} at offset {offset}. {advice}",
                path.display()
            )
        }
        other => format!(
            "Bad file format reading the append only file {} at offset {offset}: {other} (in the \
             log). {advice}",
            path.display()
        ),
    }
}

/// "N keys, X MB in Ys (R keys/s, M MB/s)": what a load log line reports.
fn rates(count: u64, unit: &str, bytes: u64, seconds: f64) -> String {
    let megabytes = bytes as f64 / 1e6;
    let per_second = |x: f64| x / seconds.max(1e-9);
    format!(
        "{count} {unit}, {megabytes:.1} MB in {seconds:.3}s ({:.0} {unit}/s, {:.1} MB/s)",
        per_second(count as f64),
        per_second(megabytes)
    )
}

/// What loading found, for the log lines and INFO.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    pub files: usize,
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub truncated_bytes: u64,
}

/// Replays every incremental file of `manifest` into `keyspace`.
pub fn replay_log(
    storage: &dyn Storage,
    paths: &LogPaths,
    manifest: &Manifest,
    engine: &mut Engine,
    progress: &LoadProgress,
) -> Result<LoadReport, LoadError> {
    let started = Instant::now();
    let mut report = LoadReport::default();
    let (bases, resp_base) = split_bases(storage, paths, manifest)?;
    if !bases.is_empty() {
        let delay = engine.state.config.key_load_delay_us;
        let (keys, bytes, functions) =
            load_base_parts(storage, paths, &bases, &mut engine.keyspace, delay)?;
        // The base's libraries first: the records after it may replace or delete them.
        for code in functions {
            engine
                .state
                .scripting
                .load_library(&code, true, false)
                .map_err(|error| LoadError::Function {
                    reason: error.to_string(),
                })?;
        }
        report.files += bases.len();
        report.bytes += bytes;
        report.records += keys;
        progress.loaded_bytes.store(bytes, Ordering::Relaxed);
    }
    // A base in RESP form is replayed like the incremental files, before them.
    let incremental: Vec<_> = resp_base
        .into_iter()
        .chain(manifest.incremental())
        .collect();
    // The session the records run in: its database follows the log's SELECTs.
    let mut session = SessionState {
        authenticated: true,
        ..SessionState::default()
    };
    let mut scratch = Vec::new();
    assert!(
        !engine.effects.enabled,
        "a replay must not log what it replays"
    );
    for (index, entry) in incremental.iter().enumerate() {
        let is_last = index + 1 == incremental.len();
        let path = paths.file(&entry.name);
        let file_started = Instant::now();
        let mut records = 0u64;
        let done_before = report.bytes;
        // The records of a MULTI block, applied when its EXEC arrives (the scan reports a
        // block left open at the end of the file as a truncation at its MULTI).
        let mut block: Option<Vec<Replayed>> = None;
        let result = replay_file(storage, &path, |item| {
            records += 1;
            if engine.state.config.key_load_delay_us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(
                    engine.state.config.key_load_delay_us,
                ));
            }
            progress
                .loaded_bytes
                .store(done_before + item.offset(), Ordering::Relaxed);
            let mut apply = |item: Replayed| match item {
                Replayed::Set {
                    key,
                    value,
                    expire_at_ms,
                    ..
                } => {
                    engine.keyspace.dbs[session.db].insert(crate::keyspace::Entry {
                        key,
                        value: crate::keyspace::Value::string(value),
                        expire_at_ms,
                    });
                    Ok(())
                }
                Replayed::Other { args, .. } => {
                    let args: Vec<&[u8]> = args.iter().map(|a| a.as_ref()).collect();
                    replay_one(&args, engine, &mut session, &mut scratch)
                }
            };
            match (&item, &mut block) {
                (Replayed::Other { args, .. }, None) if args[0].eq_ignore_ascii_case(b"multi") => {
                    block = Some(Vec::new());
                    Ok(())
                }
                (Replayed::Other { args, .. }, Some(_))
                    if args[0].eq_ignore_ascii_case(b"exec") =>
                {
                    block.take().into_iter().flatten().try_for_each(apply)
                }
                (_, Some(queued)) => {
                    queued.push(item);
                    Ok(())
                }
                (_, None) => apply(item),
            }
        });
        let loaded_bytes = match result {
            Ok(bytes) => bytes,
            Err(ReplayError::Damaged(LogDamage::Truncated { offset })) if is_last => {
                let size = storage.len(&path).unwrap_or(offset);
                if !engine.state.config.aof_load_truncated {
                    return Err(LoadError::TruncatedTail { path, offset, size });
                }
                tracing::warn!(
                    "{} ends in the middle of a record at offset {offset}: cutting off the last {} bytes \
                     (a crash during a write; aof-load-truncated is enabled)",
                    path.display(),
                    size - offset
                );
                truncate_file(storage, &path, offset)?;
                report.truncated_bytes += size - offset;
                offset
            }
            Err(ReplayError::Damaged(LogDamage::Truncated { offset })) => {
                return Err(LoadError::TruncatedBeforeLast { path, offset });
            }
            Err(ReplayError::Damaged(LogDamage::Corrupt { offset, reason })) => {
                return Err(LoadError::Corrupt {
                    path,
                    offset,
                    reason,
                });
            }
            Err(ReplayError::Refused { offset, refusal }) => {
                return Err(LoadError::Refused {
                    path,
                    offset,
                    refusal,
                });
            }
            Err(ReplayError::ParserPanicked) => return Err(LoadError::ParserPanicked { path }),
        };
        let seconds = file_started.elapsed().as_secs_f64();
        tracing::info!(
            "loaded {}: {}",
            entry.name,
            rates(records, "records", loaded_bytes, seconds)
        );
        report.files += 1;
        report.records += records;
        report.bytes += loaded_bytes;
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// One record of an incremental file, parsed off the applying thread. The records that
/// make up nearly every log — `SET k v` and `SET k v PXAT t`, the forms Tessera logs — come
/// with their key and value already copied; anything else (`SELECT` included) goes through
/// the command table, in order, on the applying thread.
enum Replayed {
    Set {
        key: crate::keyspace::Key,
        value: crate::types::Str,
        expire_at_ms: i64,
        offset: u64,
    },
    Other {
        args: Vec<bytes::Bytes>,
        offset: u64,
    },
}

impl Replayed {
    fn offset(&self) -> u64 {
        match self {
            Replayed::Set { offset, .. } | Replayed::Other { offset, .. } => *offset,
        }
    }
}

/// Records handed from the parsing thread to the applying one at a time.
const REPLAY_BATCH: usize = 512;

/// Why the replay of one file stopped.
#[derive(Debug)]
enum ReplayError {
    Damaged(LogDamage),
    /// The engine refused the record at `offset` (an unknown command, a wrong arity…).
    Refused {
        offset: u64,
        refusal: Refusal,
    },
    ParserPanicked,
}

/// The parsing thread's `apply` error: the applying side has stopped (on a failure, which
/// it reports), so nothing more is sent.
#[derive(Debug)]
struct ApplyingStopped;

/// Turns a record into a `Replayed`. The fast forms are exactly those whose effect during
/// loading is a plain insert into the selected database: a `SET` without options, or with
/// a valid `PXAT` (nothing expires while loading, as in Redis).
fn classify(args: &[&[u8]], offset: u64) -> Replayed {
    use crate::commands::eq_ignore_case;
    let copy = bytes::Bytes::copy_from_slice;
    if (args.len() == 3 || args.len() == 5) && eq_ignore_case(args[0], "set") {
        let expire_at_ms = if args.len() == 3 {
            Some(crate::keyspace::NO_EXPIRY)
        } else if eq_ignore_case(args[3], "pxat") {
            crate::resp::parse_i64(args[4])
                .and_then(|at| crate::commands::absolute_expiry(at, 1, true, 0))
        } else {
            None
        };
        if let Some(expire_at_ms) = expire_at_ms {
            return Replayed::Set {
                key: crate::keyspace::Key::from(args[1]),
                value: crate::types::Str::from(args[2]),
                expire_at_ms,
                offset,
            };
        }
    }
    Replayed::Other {
        args: args.iter().map(|a| copy(a)).collect(),
        offset,
    }
}

/// Replays one incremental file with two threads: this one applies, a second one reads,
/// parses and copies (so parsing overlaps applying). Records reach `apply` in file order;
/// its refusal stops the replay and is reported at the record's offset.
fn replay_file(
    storage: &dyn Storage,
    path: &Path,
    mut apply: impl FnMut(Replayed) -> Result<(), Refusal>,
) -> Result<u64, ReplayError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<Replayed>>(16);
    std::thread::scope(|scope| {
        let parser = scope.spawn(move || {
            crate::crash_report::contain_panics();
            let mut batch = Vec::with_capacity(REPLAY_BATCH);
            let result = scan_records(
                storage,
                path,
                |args, offset| -> Result<(), ApplyingStopped> {
                    crate::crash_report::inject(crate::crash_report::PanicPoint::LogReplay);
                    batch.push(classify(args, offset));
                    if batch.len() == REPLAY_BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(REPLAY_BATCH));
                        // The applying side stopped on an error: it reports it.
                        sender.send(full).map_err(|_| ApplyingStopped)?;
                    }
                    Ok(())
                },
            );
            if !batch.is_empty() {
                let _ = sender.send(batch);
            }
            result
        });
        let mut failure = None;
        'batches: for batch in receiver.iter() {
            for item in batch {
                let offset = item.offset();
                if let Err(refusal) = apply(item) {
                    failure = Some(ReplayError::Refused { offset, refusal });
                    break 'batches;
                }
            }
        }
        drop(receiver); // unblocks a parser waiting to send
        let parsed = parser.join();
        match (failure, parsed) {
            (Some(failure), _) => Err(failure),
            (None, Ok(Ok(bytes))) => Ok(bytes),
            (None, Ok(Err(ScanError::Damaged(damage)))) => Err(ReplayError::Damaged(damage)),
            (None, Ok(Err(ScanError::Refused { .. }))) => {
                unreachable!("the parser stops sending only after the applying side failed")
            }
            (None, Err(_)) => Err(ReplayError::ParserPanicked),
        }
    })
}

/// What one base file held: its live keys (with their database), bytes read, seconds taken.
struct LoadedPart {
    dbs: Vec<crate::keyspace::Db>,
    keys: u64,
    bytes: u64,
    functions: Vec<bytes::Bytes>,
    seconds: f64,
}

/// Loads the base snapshot files (RDB) in parallel, one thread per file, each building
/// tables of its own; then adopts them, a table move per slot (parts hold disjoint
/// slots). Keys already expired are kept for the replay (`ExpiredKeys::Keep`) and expire
/// after loading. Returns (keys loaded, bytes read).
fn load_base_parts(
    storage: &dyn Storage,
    paths: &LogPaths,
    bases: &[&crate::log::manifest::ManifestEntry],
    keyspace: &mut Keyspace,
    key_delay_us: u64,
) -> Result<(u64, u64, Vec<bytes::Bytes>), LoadError> {
    let databases = keyspace.dbs.len();
    let parts: Vec<Result<LoadedPart, LoadError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bases
            .iter()
            .map(|base| {
                let path = paths.file(&base.name);
                scope.spawn(move || {
                    crate::crash_report::contain_panics();
                    crate::crash_report::inject(crate::crash_report::PanicPoint::BaseLoad);
                    load_base_part(storage, &path, databases, key_delay_us)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(LoadError::BasePartPanicked)))
            .collect()
    });
    let (mut keys, mut bytes) = (0u64, 0u64);
    let mut functions = Vec::new();
    for (base, part) in bases.iter().zip(parts) {
        let LoadedPart {
            dbs,
            keys: part_keys,
            bytes: part_bytes,
            functions: part_functions,
            seconds,
        } = part?;
        functions.extend(part_functions);
        tracing::info!(
            "loaded {}: {}",
            base.name,
            rates(part_keys, "keys", part_bytes, seconds)
        );
        keys += part_keys;
        bytes += part_bytes;
        for (target, db) in keyspace.dbs.iter_mut().zip(dbs) {
            target.absorb(db);
        }
    }
    Ok((keys, bytes, functions))
}

/// The manifest's base files in RDB form, and its base in RESP form if it has one (then
/// its only base, as Redis writes it with `aof-use-rdb-preamble no`). A `.rdb` name is
/// RDB (its loader says what is wrong with it); the form of a `.aof` base is read from
/// the file, as Redis does: an RDB file starts with `REDIS`.
fn split_bases<'m>(
    storage: &dyn Storage,
    paths: &LogPaths,
    manifest: &'m Manifest,
) -> Result<(Vec<&'m ManifestEntry>, Option<&'m ManifestEntry>), LoadError> {
    let mut rdb = Vec::new();
    let mut resp = None;
    for base in manifest.base() {
        let path = paths.file(&base.name);
        if base.name.ends_with(".rdb") || starts_as_rdb(storage, &path)? {
            rdb.push(base);
        } else if resp.replace(base).is_some() {
            return Err(LoadError::RespBase { path });
        }
    }
    if let (Some(base), false) = (resp, rdb.is_empty()) {
        return Err(LoadError::RespBase {
            path: paths.file(&base.name),
        });
    }
    Ok((rdb, resp))
}

/// Whether the file begins with RDB's magic (an empty or shorter file does not).
fn starts_as_rdb(storage: &dyn Storage, path: &Path) -> Result<bool, LoadError> {
    let read = || -> std::io::Result<bool> {
        let file = storage.open_read(path)?;
        let mut magic = [0u8; 5];
        let mut filled = 0;
        while filled < magic.len() {
            match file.read_at(filled as u64, &mut magic[filled..])? {
                0 => return Ok(false),
                n => filled += n,
            }
        }
        Ok(&magic == b"REDIS")
    };
    read().map_err(|source| {
        LoadError::Snapshot(SnapshotError::Io {
            action: crate::snapshot::FileAction::Open,
            path: path.to_path_buf(),
            source,
        })
    })
}

fn load_base_part(
    storage: &dyn Storage,
    path: &Path,
    databases: usize,
    key_delay_us: u64,
) -> Result<LoadedPart, LoadError> {
    let started = Instant::now();
    let expired = crate::snapshot::ExpiredKeys::Keep;
    let read = crate::snapshot::read_into_dbs(storage, path, databases, key_delay_us, expired)?;
    Ok(LoadedPart {
        dbs: read.dbs,
        keys: read.keys,
        bytes: read.bytes,
        functions: read.functions,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn truncate_file(storage: &dyn Storage, path: &Path, length: u64) -> Result<(), LoadError> {
    let mut file = storage
        .open_append(path)
        .map_err(|source| LoadError::OpenToCut {
            path: path.to_path_buf(),
            source,
        })?;
    file.set_len(length)
        .and_then(|()| file.sync_all())
        .map_err(|source| LoadError::Cut {
            path: path.to_path_buf(),
            length,
            source,
        })
}

fn replay_one(
    args: &[&[u8]],
    engine: &mut Engine,
    session: &mut SessionState,
    scratch: &mut Vec<u8>,
) -> Result<(), Refusal> {
    scratch.clear();
    match engine.execute(
        session,
        scratch,
        Request::plain(args),
        Mode::Replay,
        &mut NoSessions,
    ) {
        Outcome::Refused(refusal) => Err(refusal),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(args: &[&str]) -> &'static str {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        match classify(&args, 7) {
            Replayed::Set { expire_at_ms, .. } if expire_at_ms == crate::keyspace::NO_EXPIRY => {
                "set"
            }
            Replayed::Set { .. } => "set-pxat",
            Replayed::Other { .. } => "other",
        }
    }

    #[test]
    fn only_plain_inserts_take_the_fast_path() {
        assert_eq!(kind(&["SET", "k", "v"]), "set");
        assert_eq!(
            kind(&["set", "k", "v", "pxat", "1700000000000"]),
            "set-pxat"
        );
        // Anything whose effect is not a plain insert goes through the command table.
        assert_eq!(kind(&["SET", "k", "v", "PXAT", "0"]), "other"); // invalid expire time
        assert_eq!(kind(&["SET", "k", "v", "PXAT", "12x"]), "other");
        assert_eq!(kind(&["SET", "k", "v", "KEEPTTL"]), "other");
        assert_eq!(kind(&["SET", "k", "v", "EX", "10"]), "other");
        assert_eq!(kind(&["SET", "k", "v", "NX", "GET"]), "other");
        assert_eq!(kind(&["SELECT", "1"]), "other");
        assert_eq!(kind(&["DEL", "k"]), "other");
    }
}
