//! The file-system boundary of the log, the manifest, the snapshot writers and recovery.
//!
//! Everything that persists data goes through [`Storage`] (names in a directory tree) and
//! [`StorageFile`] (an open file), so crash safety can be tested by simulating power loss
//! instead of only killing the process. Two implementations:
//!
//! - [`RealStorage`] (`real.rs`): `std::fs`, rooted at a directory.
//! - `SimulatedStorage` (`simulated.rs`): in memory, with separate *live* and *durable*
//!   images of every file's bytes and of every directory's entries, power loss, torn
//!   writes and injected faults. Test equipment only: compiled with the `fault-injection`
//!   feature, which the test targets turn on (Cargo.toml) and the production build leaves
//!   off.
//!
//! The code marks each step of its multi-step protocols with a checkpoint,
//! `storage.checkpoint(CrashPoint::RewriteCommitted)`, where crash tests stop the world:
//! the simulated disk dies or holds the thread there, and the real one SIGKILLs the
//! process when `TESSERA_CRASH_AT` names the point (tests that run the server binary).
//! Both need `fault-injection`; without it a checkpoint is an empty inline function.
//! [`CrashPoint`] names every checkpoint, so the code and the tests share one list.
//!
//! The traits are object-safe: the log writer thread, the manifest, the snapshot writers
//! and recovery can share one `Arc<dyn Storage>` chosen at start-up, without a type
//! parameter spreading through `Server`, `LogWriter` and every function between them. A
//! virtual call costs nothing beside the system call behind it.
//!
//! Durability model (Linux, ext4 without relying on its ordering quirks):
//! - `sync_data` / `sync_all` of a file make its current bytes and length durable. They do
//!   not make its *name* durable.
//! - Creating, renaming and removing a name change only the live directory; a `sync_dir`
//!   of the parent makes that directory's entries durable. So a new file, or a rename over
//!   an old one, can be undone by a power loss until the directory is synced.
//! - A failed sync marks the dirty bytes clean without writing them, as Linux does after a
//!   writeback error: a later successful sync does not write them either. Only a rewrite
//!   of those bytes makes them durable (the log writer's retry does exactly that).
//! - Bytes written since a file's last sync may survive a power loss in part, in any
//!   order of its pages; a file may come back longer than what survived of it, the lost
//!   pages reading as zeros. Bytes a sync made durable are never touched.

mod paced;
mod real;
#[cfg(any(test, feature = "fault-injection"))]
mod simulated;

pub use paced::{PacedFile, Rate, RateLimit, WRITEBACK_CHUNK_BYTES};
#[cfg(any(test, feature = "fault-injection"))]
pub use real::CRASH_AT_ENV;
pub use real::RealStorage;
#[cfg(any(test, feature = "fault-injection"))]
pub use simulated::{Counts, Fault, FileOp, PAGE_BYTES, SimulatedStorage, TornFile, TornWrites};

use std::fmt;
use std::io;
use std::path::Path;
use std::str::FromStr;

/// Names in a directory tree. Paths are relative to the storage's root (an absolute path
/// is used as it is by [`RealStorage`]).
pub trait Storage: Send + Sync {
    /// Creates `path`, or truncates it to zero bytes if it exists, and opens it for
    /// appending and reading. The new name is durable only after `sync_dir` of its parent.
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens an existing file for appending and reading.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens an existing file for reading only; appends through it fail.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The length of a file in bytes.
    fn len(&self, path: &Path) -> io::Result<u64>;
    /// Moves the file `from` to `to`, atomically replacing `to` if it exists. (Renaming
    /// directories is not needed, and the simulation does not model it.)
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file name; open handles keep working on the unlinked file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and any missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of a directory (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// The names in a directory (files and directories), sorted.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// What `checkpoint(point)` does in a build with fault injection: kill the process
    /// there (`RealStorage`, when `TESSERA_CRASH_AT` names the point), or record the point
    /// and act on it as a test asked (`SimulatedStorage::crash_at`, `pause_at`, ...).
    #[cfg(any(test, feature = "fault-injection"))]
    fn reach_checkpoint(&self, point: CrashPoint);
}

impl dyn Storage + '_ {
    /// Marks a named step of a multi-step protocol (a compaction, a manifest commit, a
    /// dump's installation), where crash tests stop the world. Without the
    /// `fault-injection` feature (the production build) it compiles to nothing: no call,
    /// no environment variable read.
    #[inline]
    pub fn checkpoint(&self, point: CrashPoint) {
        #[cfg(any(test, feature = "fault-injection"))]
        self.reach_checkpoint(point);
        #[cfg(not(any(test, feature = "fault-injection")))]
        let _ = point;
    }
}

/// An open file. Writes only append: that is all the log and the snapshot writers need,
/// and it keeps the simulated model of dirty bytes simple.
#[allow(clippy::len_without_is_empty)] // a file length, not a collection
pub trait StorageFile: Send {
    /// Appends all of `bytes` at the end of the file (`write_all` semantics).
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Reads at `offset` into `buffer`; returns the bytes read, 0 at the end of the file.
    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> io::Result<usize>;
    /// The current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends (with zeros) the file to `length` bytes.
    fn set_len(&mut self, length: u64) -> io::Result<()>;
    /// `fdatasync`: makes the bytes and the length durable.
    fn sync_data(&mut self) -> io::Result<()>;
    /// `fsync`: as `sync_data`, plus the remaining metadata.
    fn sync_all(&mut self) -> io::Result<()>;
    /// A second handle on the same open file (`dup`), so that one thread can sync it while
    /// another appends.
    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>>;
    /// Starts writing back the dirty pages of `length` bytes at `offset` (Linux's
    /// `sync_file_range`), and with `wait` first waits for any writeback of them already
    /// under way. Makes nothing durable (no metadata, no disk cache flush): it only keeps
    /// dirty pages from piling up, so that a later fsync — the log's, or the file's own —
    /// has little left to write. The simulated disk has no page cache to drain: a no-op.
    fn write_back(&mut self, offset: u64, length: u64, wait: bool) -> io::Result<()> {
        let _ = (offset, length, wait);
        Ok(())
    }
}

/// Lets an open file stand where `std::io::Write` is expected (the RDB writer, `BufWriter`).
impl io::Write for dyn StorageFile + '_ {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.append(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sequential reading of an open file through `read_at`, for streaming readers (the RDB
/// loader, the log scanner) that take `std::io::Read`.
pub struct StorageReader {
    file: Box<dyn StorageFile>,
    offset: u64,
}

impl StorageReader {
    pub fn new(file: Box<dyn StorageFile>) -> StorageReader {
        StorageReader { file, offset: 0 }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl io::Read for StorageReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let count = self.file.read_at(self.offset, buffer)?;
        self.offset += count as u64;
        Ok(count)
    }
}

// ---------------------------------------------------------------------------------------
// Crash points.

/// Declares [`CrashPoint`] from one list, so that a variant, its name and its place in
/// `CrashPoint::ALL` cannot drift apart.
macro_rules! crash_points {
    ($($(#[$meta:meta])* $variant:ident => $name:literal,)+) => {
        /// A checkpoint: a named step of a multi-step protocol, where crash tests stop the
        /// world (see `checkpoint` on `dyn Storage`). The names appear in log lines and in
        /// `TESSERA_CRASH_AT` values.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum CrashPoint {
            $($(#[$meta])* $variant,)+
        }

        impl CrashPoint {
            /// Every checkpoint: a compaction's in the order one reaches them, then SAVE's
            /// and those of a dump's installation.
            pub const ALL: &'static [CrashPoint] = &[$(CrashPoint::$variant,)+];

            /// The name, as `TESSERA_CRASH_AT` and the log lines spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(CrashPoint::$variant => $name,)+
                }
            }
        }
    };
}

crash_points! {
    // A compaction (`compaction.rs`): the switch to a new incremental file (`log::writer`),
    // the parts (`snapshot`), the installation, the deletion of the history.
    /// The log writer created and synced the new incremental file of a compaction's switch;
    /// no manifest lists it yet.
    RewriteIncrCreated => "rewrite-incr-created",
    /// A manifest commit (`log::manifest`, every commit) wrote and synced its temp file,
    /// before the rename.
    ManifestTempWritten => "manifest-temp-written",
    /// A manifest commit renamed its temp file into place, before the directory fsync.
    ManifestRenamed => "manifest-renamed",
    /// The manifest listing the new incremental file is committed: the writer switches.
    RewriteIncrCommitted => "rewrite-incr-committed",
    /// A snapshot writer thread (a compaction's part, BGSAVE's file) took its first
    /// captured slot.
    SnapshotFirstCaptureTaken => "snapshot-first-capture-taken",
    /// A snapshot writer thread wrote and synced its file.
    SnapshotPartSynced => "snapshot-part-synced",
    /// Every file of a snapshot job is written and synced, before the job's finisher (a
    /// compaction's installation, BGSAVE's `install_file`).
    SnapshotPartsWritten => "snapshot-parts-written",
    /// A compaction synced the log directory: the names of its parts are durable.
    RewritePartsDurable => "rewrite-parts-durable",
    /// The manifest that makes the new parts the base is committed.
    RewriteCommitted => "rewrite-committed",
    /// A compaction deleted one of the files its commit made history.
    RewriteDeletedOne => "rewrite-deleted-one",
    /// A compaction deleted all of them, before it commits the manifest without them.
    RewriteDeletedAll => "rewrite-deleted-all",
    // SAVE (`snapshot::save`), and the installation of a dump by SAVE or BGSAVE.
    /// SAVE appended every byte of its temp file, before the fsync.
    SaveTempWritten => "save-temp-written",
    /// SAVE synced its temp file.
    SaveTempSynced => "save-temp-synced",
    /// A complete dump was renamed over `dump.rdb`, before the directory fsync.
    DumpRenamed => "dump-renamed",
    /// The directory fsync after that rename: the new dump is durable.
    DumpDirSynced => "dump-dir-synced",
}

impl CrashPoint {
    /// The `nth` occurrence of this checkpoint (from 1).
    pub const fn nth(self, nth: u64) -> CrashStep {
        assert!(nth >= 1, "occurrences are counted from 1");
        CrashStep { point: self, nth }
    }
}

impl fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CrashPoint {
    type Err = CrashPointError;

    fn from_str(text: &str) -> Result<CrashPoint, CrashPointError> {
        CrashPoint::ALL
            .iter()
            .find(|point| point.as_str() == text)
            .copied()
            .ok_or_else(|| CrashPointError::UnknownName(text.to_string()))
    }
}

/// One occurrence of a checkpoint: the `nth` time it is reached (from 1), counted since the
/// process started (`TESSERA_CRASH_AT`) or since the simulated disk's creation or last
/// power loss. Written `name:N`; a bare `name` is the first occurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CrashStep {
    pub point: CrashPoint,
    pub nth: u64,
}

impl From<CrashPoint> for CrashStep {
    fn from(point: CrashPoint) -> CrashStep {
        point.nth(1)
    }
}

impl fmt::Display for CrashStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.point, self.nth)
    }
}

impl FromStr for CrashStep {
    type Err = CrashPointError;

    fn from_str(text: &str) -> Result<CrashStep, CrashPointError> {
        let Some((name, nth)) = text.rsplit_once(':') else {
            return Ok(text.parse::<CrashPoint>()?.into());
        };
        let point: CrashPoint = name.parse()?;
        match nth.parse::<u64>() {
            Ok(nth) if nth >= 1 => Ok(point.nth(nth)),
            _ => Err(CrashPointError::InvalidOccurrence(text.to_string())),
        }
    }
}

/// Text that names no checkpoint or no occurrence of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrashPointError {
    /// Not the name of a checkpoint.
    UnknownName(String),
    /// `name:N` where `N` is not a number from 1 up.
    InvalidOccurrence(String),
}

impl fmt::Display for CrashPointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CrashPointError::UnknownName(name) => write!(f, "no checkpoint is named '{name}'"),
            CrashPointError::InvalidOccurrence(text) => {
                write!(
                    f,
                    "'{text}': the occurrence after ':' must be a number from 1 up"
                )
            }
        }
    }
}

impl std::error::Error for CrashPointError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crash_point_has_a_distinct_name_that_parses_back() {
        let mut names: Vec<&str> = CrashPoint::ALL.iter().map(|p| p.as_str()).collect();
        for point in CrashPoint::ALL {
            assert_eq!(point.as_str().parse::<CrashPoint>(), Ok(*point));
            assert_eq!(point.to_string(), point.as_str());
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CrashPoint::ALL.len());
    }

    #[test]
    fn crash_steps_parse_with_or_without_an_occurrence() {
        let step = |text: &str| text.parse::<CrashStep>();
        assert_eq!(
            step("rewrite-committed"),
            Ok(CrashPoint::RewriteCommitted.nth(1))
        );
        assert_eq!(
            step("manifest-renamed:3"),
            Ok(CrashPoint::ManifestRenamed.nth(3))
        );
        let third = CrashPoint::ManifestRenamed.nth(3);
        assert_eq!(step(&third.to_string()), Ok(third));
        assert_eq!(
            step("rewrite-comitted"),
            Err(CrashPointError::UnknownName("rewrite-comitted".into()))
        );
        for bad in [
            "manifest-renamed:0",
            "manifest-renamed:x",
            "manifest-renamed:",
        ] {
            assert_eq!(
                step(bad),
                Err(CrashPointError::InvalidOccurrence(bad.into()))
            );
        }
        assert!(step("nothing:2").is_err());
    }
}
