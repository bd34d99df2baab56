//! Start-up housekeeping of the log directory: which manifest is in force, and which files
//! the committed manifest proves to be garbage.
//!
//! A file is removed only when the manifest proves it garbage:
//!
//! - `temp-*`: a write that never reached its rename (a manifest commit);
//! - a base part whose sequence number is above every base the manifest lists: a
//!   compaction that crashed before its commit;
//! - an EMPTY incremental file above every incremental file the manifest lists: a rotation
//!   that crashed before its manifest commit (the writer writes nothing to the new file
//!   until that commit is done, see `writer::WriterThread::rotate`);
//! - a history file (`type h`) the manifest lists: a compaction committed, then crashed
//!   before deleting what it made obsolete. They are deleted after a directory fsync (so
//!   the manifest that lists them is durable), then the manifest is committed without them.
//!
//! Anything else is kept. An unlisted file at or below the manifest's sequence numbers is
//! logged and left alone; a NON-EMPTY incremental file above them means the manifest is
//! older than the directory (restored from a backup, say): start-up refuses, as it does
//! when the manifest is missing, empty or unreadable while log files exist, or lists files
//! that are not there. Refusing changes nothing on disk; the message says how to repair.

use super::manifest::{FileKind, Manifest, ManifestEntry, ManifestError};
use super::{LogFileName, LogPaths};
use crate::storage::Storage;
use std::fmt;
use std::io::ErrorKind;
use std::path::PathBuf;

/// Why the manifest can't say what the dataset is.
#[derive(Debug)]
pub enum ManifestProblem {
    Missing,
    Unreadable(std::io::Error),
    Damaged(ManifestError),
}

impl fmt::Display for ManifestProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestProblem::Missing => write!(f, "is missing"),
            ManifestProblem::Unreadable(e) => write!(f, "can't be read ({e})"),
            ManifestProblem::Damaged(ManifestError::Empty) => {
                write!(f, "is empty ({})", ManifestError::Empty)
            }
            ManifestProblem::Damaged(e) => write!(f, "is not valid: {e}"),
        }
    }
}

/// Why start-up refused the log directory. Nothing on disk was changed.
#[derive(Debug)]
pub enum OpenError {
    /// No usable manifest, while the directory holds log files (name, bytes) — or a
    /// manifest that exists but can't be read or parsed.
    NoManifest {
        dir: PathBuf,
        manifest: PathBuf,
        problem: ManifestProblem,
        files: Vec<(String, u64)>,
    },
    /// Files the manifest lists as part of the dataset are not there.
    MissingFiles {
        dir: PathBuf,
        manifest: PathBuf,
        names: Vec<String>,
    },
    /// Incremental files with records, newer than every one the manifest lists.
    StaleManifest {
        dir: PathBuf,
        manifest: PathBuf,
        files: Vec<(String, u64)>,
    },
    /// The system refused a step: what was being done, to which file or directory.
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
}

fn list_with_sizes(files: &[(String, u64)]) -> String {
    let described: Vec<String> = files
        .iter()
        .map(|(name, bytes)| format!("{name} ({bytes} bytes)"))
        .collect();
    described.join(", ")
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rebuild = |dir: &PathBuf| {
            format!(
                "make a backup of the directory, then rebuild the manifest from the files \
                 present with `tessera-check-aof --rebuild-manifest {}` (it explains each \
                 choice and asks before writing)",
                dir.display()
            )
        };
        match self {
            OpenError::NoManifest {
                manifest,
                problem,
                files,
                ..
            } if files.is_empty() => write!(
                f,
                "Refusing to start: the append-only log manifest {} {problem}. Nothing was \
                 changed. The directory holds no log file: fix the manifest or remove it.",
                manifest.display()
            ),
            OpenError::NoManifest {
                dir,
                manifest,
                problem,
                files,
            } => write!(
                f,
                "Refusing to start: the append-only log manifest {} {problem}, but {} holds \
                 log files: {}. Without a manifest it is not known which of them make up the \
                 dataset, and starting with an empty one would hide them; nothing was \
                 changed. To repair: {}, or put back the manifest from a backup.",
                manifest.display(),
                dir.display(),
                list_with_sizes(files),
                rebuild(dir)
            ),
            OpenError::MissingFiles {
                dir,
                manifest,
                names,
            } => write!(
                f,
                "Refusing to start: the manifest {} lists files that do not exist: {}. \
                 Nothing was changed. Restore them from a backup, or {}.",
                manifest.display(),
                names
                    .iter()
                    .map(|name| format!("{name} (No such file or directory)"))
                    .collect::<Vec<_>>()
                    .join(", "),
                rebuild(dir)
            ),
            OpenError::StaleManifest {
                dir,
                manifest,
                files,
            } => write!(
                f,
                "Refusing to start: {} holds incremental files newer than every one the \
                 manifest {} lists, and they hold records: {}. A crash only ever leaves such \
                 a file empty, so the manifest is older than the directory (restored from a \
                 backup?) and loading it would lose those records. Nothing was changed. \
                 Put back the matching manifest, or {}.",
                dir.display(),
                manifest.display(),
                list_with_sizes(files),
                rebuild(dir)
            ),
            OpenError::Io {
                action,
                path,
                error,
            } => write!(f, "can't {action} {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// `map_err` for an I/O step: "can't <what> <path>: <error>".
fn io_error<E: Into<std::io::Error>>(
    action: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(E) -> OpenError {
    let path = path.to_path_buf();
    move |error| OpenError::Io {
        action,
        path,
        error: error.into(),
    }
}

/// What to do with a file of the directory that the manifest does not list.
#[derive(Debug, PartialEq, Eq)]
enum Unlisted {
    /// An unfinished write (`temp-*`).
    Temp,
    /// Parts of a compaction that never committed.
    UncommittedBase,
    /// The new file of a rotation that never committed (empty).
    UncommittedIncremental,
    /// Records the manifest does not know of: refuse.
    NewerWithRecords,
    /// At or below the manifest's sequence numbers: superseded, most likely, but nothing
    /// proves it (a directory written before history entries existed): keep.
    Older,
    /// Not a name of the log: not ours to judge.
    Foreign,
}

/// The highest sequence numbers the manifest lists for each kind of file, history files
/// counted by their names.
struct Highest {
    base: u64,
    incremental: u64,
}

impl Highest {
    fn of(manifest: &Manifest, paths: &LogPaths) -> Highest {
        let mut highest = Highest {
            base: 0,
            incremental: 0,
        };
        for entry in &manifest.entries {
            let named = paths.parse_file_name(&entry.name);
            let is_base = match (entry.kind, named) {
                (FileKind::Base, _) | (FileKind::History, Some(LogFileName::Base { .. })) => true,
                (FileKind::Incremental, _)
                | (FileKind::History, Some(LogFileName::Incremental { .. })) => false,
                (FileKind::History, None) => continue,
            };
            let seq = named.map_or(entry.seq, |n| n.seq().max(entry.seq));
            let slot = if is_base {
                &mut highest.base
            } else {
                &mut highest.incremental
            };
            *slot = (*slot).max(seq);
        }
        highest
    }

    fn judge(&self, paths: &LogPaths, name: &str, size: u64) -> Unlisted {
        if name.starts_with("temp-") {
            return Unlisted::Temp;
        }
        match paths.parse_file_name(name) {
            Some(LogFileName::Base { seq, .. }) if seq > self.base => Unlisted::UncommittedBase,
            Some(LogFileName::Incremental { seq }) if seq > self.incremental => {
                if size == 0 {
                    Unlisted::UncommittedIncremental
                } else {
                    Unlisted::NewerWithRecords
                }
            }
            Some(_) => Unlisted::Older,
            None => Unlisted::Foreign,
        }
    }
}

/// The files of the directory with their sizes; an empty list if it does not exist.
fn list_files(storage: &dyn Storage, paths: &LogPaths) -> Result<Vec<(String, u64)>, OpenError> {
    let names = match storage.list_dir(&paths.dir) {
        Ok(names) => names,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error("list", &paths.dir)(error)),
    };
    // A size that can't be read is an error, not a zero: emptiness decides removals.
    names
        .into_iter()
        .map(|name| {
            let path = paths.file(&name);
            let size = storage
                .len(&path)
                .map_err(io_error("read the size of", &path))?;
            Ok((name, size))
        })
        .collect()
}

/// What a log directory is opened for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// A writer will append to it: the manifest must list an incremental file (a fresh
    /// directory gets an empty one).
    ToAppend,
    /// With the log off (a base written with it off, turning it on, DEBUG LOADAOF): the
    /// files as the manifest lists them, none added; a fresh directory is created empty,
    /// as Redis's, so that the first base and incremental file both take number 1.
    AsItIs,
}

/// What becomes of the history files a manifest lists (`aof-disable-auto-gc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// Deleted, and the manifest committed without them (Redis's default).
    Delete,
    /// Kept, and listed (`aof-disable-auto-gc yes`).
    Keep,
}

impl History {
    pub fn of(config: &crate::config::Config) -> History {
        if config.aof_disable_auto_gc {
            History::Keep
        } else {
            History::Delete
        }
    }
}

/// Reads the manifest in force, or decides that there is none (a fresh directory), or
/// refuses; then removes what the manifest proves garbage, deletes its history files as
/// `history` says and, `Opening::ToAppend`, makes sure it lists an incremental file to
/// append to. Returns the manifest in force.
pub fn open_log_dir(
    storage: &dyn Storage,
    paths: &LogPaths,
    opening: Opening,
    history: History,
) -> Result<Manifest, OpenError> {
    let files = list_files(storage, paths)?;
    let manifest = match storage.read(&paths.manifest_path()) {
        Ok(bytes) => Manifest::parse(&bytes).map_err(ManifestProblem::Damaged),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(ManifestProblem::Missing),
        Err(e) => Err(ManifestProblem::Unreadable(e)),
    };
    let manifest = match manifest {
        Ok(manifest) => manifest,
        Err(problem) => {
            let log_files: Vec<(String, u64)> = files
                .iter()
                .filter(|(name, _)| paths.parse_file_name(name).is_some())
                .cloned()
                .collect();
            // Only a missing or empty manifest over files that hold nothing (a fresh start
            // that crashed before its first commit) is a fresh directory.
            let fresh = matches!(
                problem,
                ManifestProblem::Missing | ManifestProblem::Damaged(ManifestError::Empty)
            ) && log_files.iter().all(|(_, size)| *size == 0);
            if !fresh {
                return Err(OpenError::NoManifest {
                    dir: paths.dir.clone(),
                    manifest: paths.manifest_path(),
                    problem,
                    files: log_files,
                });
            }
            if opening == Opening::AsItIs {
                crate::log::create_dir(storage, paths).map_err(io_error("create", &paths.dir))?;
                return tidy(
                    storage,
                    paths,
                    Manifest::default(),
                    &files,
                    opening,
                    history,
                );
            }
            tracing::info!("creating a new append-only log in {}", paths.dir.display());
            let manifest =
                crate::log::create_fresh(storage, paths).map_err(io_error("create", &paths.dir))?;
            return tidy(
                storage,
                paths,
                manifest,
                &list_files(storage, paths)?,
                opening,
                history,
            );
        }
    };
    tidy(storage, paths, manifest, &files, opening, history)
}

/// Checks `manifest` against the files, then removes the garbage it proves, deletes its
/// history files and, to append, adds an incremental file if it lists none.
fn tidy(
    storage: &dyn Storage,
    paths: &LogPaths,
    manifest: Manifest,
    files: &[(String, u64)],
    opening: Opening,
    history: History,
) -> Result<Manifest, OpenError> {
    let present = |name: &str| files.iter().any(|(n, _)| n == name);
    let missing: Vec<String> = manifest
        .entries
        .iter()
        .filter(|e| e.kind != FileKind::History && !present(&e.name))
        .map(|e| e.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(OpenError::MissingFiles {
            dir: paths.dir.clone(),
            manifest: paths.manifest_path(),
            names: missing,
        });
    }
    let highest = Highest::of(&manifest, paths);
    let listed = |name: &str| {
        name == paths.manifest_name() || manifest.entries.iter().any(|e| e.name == name)
    };
    let judged: Vec<(&str, u64, Unlisted)> = files
        .iter()
        .filter(|(name, _)| !listed(name))
        .map(|(name, size)| (name.as_str(), *size, highest.judge(paths, name, *size)))
        .collect();
    let newer: Vec<(String, u64)> = judged
        .iter()
        .filter(|(_, _, judged)| *judged == Unlisted::NewerWithRecords)
        .map(|(name, size, _)| (name.to_string(), *size))
        .collect();
    if !newer.is_empty() {
        return Err(OpenError::StaleManifest {
            dir: paths.dir.clone(),
            manifest: paths.manifest_path(),
            files: newer,
        });
    }
    let mut kept = Vec::new();
    for (name, _, judged) in &judged {
        let why = match judged {
            Unlisted::Temp => "an unfinished write",
            Unlisted::UncommittedBase => "a part of a compaction that did not commit",
            Unlisted::UncommittedIncremental => "the empty new file of an unfinished rotation",
            Unlisted::Older => {
                kept.push(*name);
                continue;
            }
            Unlisted::Foreign | Unlisted::NewerWithRecords => continue,
        };
        tracing::info!("removing {name}: {why}");
        if let Err(e) = storage.remove_file(&paths.file(name)) {
            tracing::warn!("can't remove {name}: {e}");
        }
    }
    if !kept.is_empty() {
        tracing::warn!(
            "keeping files the manifest does not list: {}. They are older than the files it \
             lists (most likely left by a compaction that was interrupted before it could \
             delete them) and are not loaded; remove them once you are sure they are not needed",
            kept.join(", ")
        );
    }
    let mut in_force = match history {
        History::Delete => drop_history(storage, paths, &manifest)?,
        History::Keep => manifest.clone(),
    };
    if opening == Opening::ToAppend && in_force.last_incremental().is_none() {
        let seq = highest.incremental + 1;
        let name = paths.incremental_name(seq);
        tracing::info!("the manifest lists no incremental file: adding {name}");
        storage
            .create(&paths.file(&name))
            .and_then(|mut file| file.sync_all())
            .map_err(io_error("create", &paths.file(&name)))?;
        in_force.entries.push(ManifestEntry {
            name,
            seq,
            kind: FileKind::Incremental,
        });
    }
    if in_force != manifest {
        paths
            .commit_manifest(storage, &in_force)
            .map_err(io_error("commit", &paths.manifest_path()))?;
    }
    Ok(in_force)
}

/// `aof-disable-auto-gc` turned back to `no`: the history files `manifest` lists deleted,
/// and the manifest without them committed. Returns the manifest in force.
pub fn delete_history(
    storage: &dyn Storage,
    paths: &LogPaths,
    manifest: &Manifest,
) -> Result<Manifest, OpenError> {
    let left = drop_history(storage, paths, manifest)?;
    if left != *manifest {
        paths
            .commit_manifest(storage, &left)
            .map_err(io_error("commit", &paths.manifest_path()))?;
    }
    Ok(left)
}

/// Deletes the history files `manifest` lists, once a directory fsync has made sure that
/// the manifest listing them is the one a power loss would leave. Returns the manifest
/// without them (for the caller to commit); one that could not be deleted stays listed.
fn drop_history(
    storage: &dyn Storage,
    paths: &LogPaths,
    manifest: &Manifest,
) -> Result<Manifest, OpenError> {
    if manifest.history().next().is_none() {
        return Ok(manifest.clone());
    }
    storage
        .sync_dir(&paths.dir)
        .map_err(io_error("fsync", &paths.dir))?;
    let mut left = manifest.clone();
    left.entries.retain(|entry| {
        if entry.kind != FileKind::History {
            return true;
        }
        match storage.remove_file(&paths.file(&entry.name)) {
            Ok(()) => {
                tracing::info!(
                    "removing {}: a history file (made obsolete by a compaction)",
                    entry.name
                );
                false
            }
            Err(e) if e.kind() == ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!("can't remove {}: {e}", entry.name);
                true
            }
        }
    });
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Fault, SimulatedStorage};

    #[test]
    fn history_files_are_deleted_only_after_a_directory_fsync() {
        let storage = SimulatedStorage::new();
        let paths = LogPaths {
            dir: PathBuf::from("appendonlydir"),
            base_name: "appendonly.aof".into(),
        };
        storage.create_dir_all(&paths.dir).unwrap();
        for (seq, bytes) in [(1, &b"*1\r\n$4\r\nPING\r\n"[..]), (2, b"")] {
            let mut file = storage
                .create(&paths.file(&paths.incremental_name(seq)))
                .unwrap();
            file.append(bytes).unwrap();
            file.sync_all().unwrap();
        }
        let manifest = Manifest::parse(
            b"file appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type i\n",
        )
        .unwrap();
        paths.commit_manifest(&storage, &manifest).unwrap();
        // The fsync that must come first fails: nothing is deleted.
        storage.fail_sync(storage.counts().syncs + 1, Fault::Io);
        let error = open_log_dir(&storage, &paths, Opening::ToAppend, History::Delete).unwrap_err();
        assert!(matches!(error, OpenError::Io { .. }), "{error}");
        assert!(
            storage
                .len(&paths.file("appendonly.aof.1.incr.aof"))
                .is_ok()
        );
        // Then it succeeds: the file goes, and so does its entry.
        let in_force = open_log_dir(&storage, &paths, Opening::ToAppend, History::Delete).unwrap();
        assert_eq!(in_force, manifest.without_history());
        assert!(
            storage
                .len(&paths.file("appendonly.aof.1.incr.aof"))
                .is_err()
        );
        let committed = Manifest::parse(&storage.read(&paths.manifest_path()).unwrap()).unwrap();
        assert_eq!(committed, in_force);
    }
}
