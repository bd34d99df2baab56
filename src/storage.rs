//! The file-system boundary of the log, the manifest, the snapshot writers and recovery.
//!
//! Everything that persists data goes through [`Storage`] (names in a directory tree) and
//! [`StorageFile`] (an open file), so crash safety can be tested by simulating power loss
//! instead of only killing the process. Two implementations:
//!
//! - [`RealStorage`]: `std::fs`, rooted at a directory.
//! - [`SimulatedStorage`]: in memory, with separate *live* and *durable* images of every
//!   file's bytes and of every directory's entries, as redb's test backend and
//!   TigerBeetle's simulated disk keep them. `power_loss` throws away whatever was not made
//!   durable, or keeps some of it as a crash in the middle of writeback does ([`TornWrites`]:
//!   a prefix, a hole of zeros before a later page, pages in any order), and reports what
//!   it did; faults can be injected on the Nth write, sync or rename, a crash at a named
//!   step, and a thread can be held at a step while the test acts.
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

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

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
    /// Marks a named step of a multi-step protocol (a compaction, a manifest commit), where
    /// crash tests stop the world. See `RealStorage` and `SimulatedStorage::crash_at`.
    fn checkpoint(&self, step: &str);
}

/// The environment variable naming the protocol step at which the process kills itself:
/// `step` (its first occurrence) or `step:N` (its Nth).
pub const CRASH_AT_ENV: &str = "TESSERA_CRASH_AT";

fn parse_step(text: &str) -> (String, u64) {
    match text.rsplit_once(':') {
        Some((step, nth)) if nth.parse::<u64>().is_ok_and(|n| n >= 1) => {
            (step.to_string(), nth.parse().unwrap_or(1))
        }
        _ => (text.to_string(), 1),
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
// The real file system.

/// `std::fs`, with every path joined onto `root`.
#[derive(Clone, Debug)]
pub struct RealStorage {
    root: PathBuf,
}

impl RealStorage {
    pub fn new(root: impl Into<PathBuf>) -> RealStorage {
        RealStorage { root: root.into() }
    }

    fn full(&self, path: &Path) -> PathBuf {
        self.root.join(path)
    }
}

struct RealFile {
    file: std::fs::File,
}

impl Storage for RealStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        // Truncate first, then reopen with O_APPEND: `append` and `truncate` cannot be
        // combined in one open, and O_APPEND keeps appends at the end after a `set_len`.
        std::fs::File::create(self.full(path))?;
        self.open_append(path)
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.full(path))?;
        Ok(Box::new(RealFile { file }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = std::fs::File::open(self.full(path))?;
        Ok(Box::new(RealFile { file }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(self.full(path))
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(self.full(path))?.len())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(self.full(from), self.full(to))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(self.full(path))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(self.full(path))
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(self.full(path))?.sync_all()
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(self.full(path))? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    /// A test hook: when `TESSERA_CRASH_AT` names this step, the process dies here by
    /// SIGKILL, as `kill -9` at exactly this point would do (no cleanup; what was written
    /// stays in the page cache). Read once; costs a comparison otherwise.
    fn checkpoint(&self, step: &str) {
        static CRASH_AT: std::sync::OnceLock<Option<(String, u64)>> = std::sync::OnceLock::new();
        static REACHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let target =
            CRASH_AT.get_or_init(|| std::env::var(CRASH_AT_ENV).ok().map(|t| parse_step(&t)));
        let Some((target, nth)) = target else {
            return;
        };
        if target == step && REACHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == *nth
        {
            tracing::warn!("crashing at step '{step}' ({CRASH_AT_ENV} is set)");
            // SAFETY: kill(2) with the process's own id has no memory-safety preconditions.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            // SIGKILL cannot be caught; wait for it to land.
            loop {
                std::thread::park();
            }
        }
    }
}

impl StorageFile for RealFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.file, bytes)
    }

    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.file, buffer, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&mut self, length: u64) -> io::Result<()> {
        self.file.set_len(length)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }
}

// ---------------------------------------------------------------------------------------
// The simulated file system.

/// The error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// ENOSPC: the disk is full.
    NoSpace,
    /// EIO: the device failed.
    Io,
}

impl Fault {
    fn error(self) -> io::Error {
        // Raw Linux error numbers, so messages read as the real ones do.
        match self {
            Fault::NoSpace => io::Error::from_raw_os_error(28),
            Fault::Io => io::Error::from_raw_os_error(5),
        }
    }
}

/// An operation on a file, for faults injected by the file's name
/// (`SimulatedStorage::fail_file_op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOp {
    /// `Storage::create` of a path.
    Create,
    /// An append through an open handle.
    Write,
    /// A sync (`sync_data`, `sync_all`) through an open handle.
    Sync,
    /// `Storage::rename`, matched on the path renamed from.
    Rename,
}

/// What happens to bytes appended since a file's last sync when the power goes. The
/// seeded cases draw each file's fate from the seed, so a failing case replays exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TornWrites {
    /// All of them are lost.
    None,
    /// Each file keeps a prefix of them, of a length drawn from this seed: 0 up to all.
    Seeded(u64),
    /// Each file keeps a prefix of its unsynced pages (see [`PAGE_BYTES`]), loses the
    /// pages after it and keeps a later run of pages again: a torn append whose later
    /// block reached the disk before an earlier one. The lost pages read as zeros (a hole).
    /// A file with a single unsynced page keeps a prefix of it, as with `Seeded`.
    Hole(u64),
    /// Each unsynced page of each file survives or not on its own, as writeback in no
    /// particular order leaves them: lost pages before the last one kept read as zeros.
    Scattered(u64),
}

/// The unit in which [`TornWrites::Hole`] and [`TornWrites::Scattered`] keep or lose
/// unsynced bytes: pages of the file's offsets, the block size of the usual Linux file
/// systems, which lose whole blocks after a crash.
pub const PAGE_BYTES: usize = 4096;

/// What a power loss did to a file whose live bytes were not all durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornFile {
    pub path: PathBuf,
    /// Bytes `0..synced` were durable before the power loss and are intact after it.
    pub synced: u64,
    /// The file's length before the power loss; `synced..written` was not durable.
    pub written: u64,
    /// The ranges of `synced..written` that survived, in order. The rest is lost; where a
    /// kept range follows lost bytes, they read as zeros.
    pub kept: Vec<Range<u64>>,
}

impl TornFile {
    /// Whether lost bytes lie before kept ones (a hole), not only after them.
    pub fn has_hole(&self) -> bool {
        let mut end = self.synced;
        for range in &self.kept {
            if range.start > end {
                return true;
            }
            end = range.end;
        }
        false
    }
}

/// Operation counters since creation or the last power loss. Each is counted when the
/// operation is attempted, so it also numbers the operations for fault injection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Appends.
    pub writes: u64,
    /// File syncs (`sync_data`, `sync_all`) and directory syncs.
    pub syncs: u64,
    pub renames: u64,
    /// Every call of either trait, the above included.
    pub operations: u64,
}

/// In-memory storage with live and durable images. Cloning gives another handle on the
/// same files, so a test keeps one while the code under test uses the other.
#[derive(Clone, Default)]
pub struct SimulatedStorage {
    state: Arc<Mutex<State>>,
    /// Signalled when a thread paused at a checkpoint may go on (see `pause_at`).
    resumed: Arc<Condvar>,
}

type InodeId = u64;

#[derive(Clone, Default)]
struct Inode {
    /// What reads return.
    live: Vec<u8>,
    /// What survives a power loss.
    durable: Vec<u8>,
    /// `live[..clean_len]` needs no writeback: it was synced, or dropped by a failed sync.
    /// Appends and extensions past it are dirty.
    clean_len: usize,
}

#[derive(Clone, Default)]
struct State {
    inodes: BTreeMap<InodeId, Inode>,
    next_inode: InodeId,
    live_names: BTreeMap<PathBuf, InodeId>,
    durable_names: BTreeMap<PathBuf, InodeId>,
    live_dirs: BTreeSet<PathBuf>,
    durable_dirs: BTreeSet<PathBuf>,
    /// Bumped by each power loss; handles opened before it fail, as a process that lost
    /// power holds no open files.
    generation: u64,
    counts: Counts,
    faults: Faults,
    checkpoints: Vec<String>,
    /// What each sync counted in `counts.syncs` was of (a file or a directory), in order.
    synced_paths: Vec<PathBuf>,
    /// A thread waits at a checkpoint (see `pause_at`).
    paused: bool,
    /// How long each file sync takes (a slow disk).
    sync_delay: std::time::Duration,
}

#[derive(Clone, Default)]
struct Faults {
    /// Keyed by the 1-based number of the operation that fails.
    writes: BTreeMap<u64, Fault>,
    syncs: BTreeMap<u64, Fault>,
    renames: BTreeMap<u64, Fault>,
    /// Every operation numbered above this one fails with EIO (a dead device).
    operations_max: Option<u64>,
    /// Once `syncs` passes this value, syncs succeed but stop advancing the durable
    /// image: the run then continues to its end, and `power_loss` gives exactly the state
    /// of a crash just after this sync.
    durable_syncs_max: Option<u64>,
    /// At this checkpoint every later operation starts failing (see `crash_at`).
    crash_at: Option<(String, u64)>,
    /// At this checkpoint the next sync is made to fail (see `fail_sync_after`).
    sync_after: Option<((String, u64), Fault)>,
    /// Faults by file name (see `fail_file_op`).
    by_name: Vec<NamedFault>,
    /// At this checkpoint the thread that reaches it waits (see `pause_at`).
    pause_at: Option<(String, u64)>,
}

/// `times` more operations `op` on a file whose path contains `name` fail with `fault`.
#[derive(Clone)]
struct NamedFault {
    op: FileOp,
    name: String,
    fault: Fault,
    times: u64,
}

struct SimulatedFile {
    state: Arc<Mutex<State>>,
    /// The name the file was opened by, for `synced_paths`.
    path: PathBuf,
    inode: InodeId,
    generation: u64,
    writable: bool,
}

/// Paths are compared by their normal components, so `./a//b` and `a/b` are one name.
fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|component| !matches!(component, Component::CurDir))
        .collect()
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file or directory", path.display()),
    )
}

impl SimulatedStorage {
    pub fn new() -> SimulatedStorage {
        SimulatedStorage::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the state from the test's assertions.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn counts(&self) -> Counts {
        self.lock().counts
    }

    /// The `number`th append (1-based, counted since the last power loss) fails and
    /// appends nothing.
    pub fn fail_write(&self, number: u64, fault: Fault) {
        self.lock().faults.writes.insert(number, fault);
    }

    /// The `number`th sync (of a file or a directory) fails and makes nothing durable;
    /// a failed file sync also drops the file's dirty bytes from writeback.
    pub fn fail_sync(&self, number: u64, fault: Fault) {
        self.lock().faults.syncs.insert(number, fault);
    }

    /// The `number`th rename fails and changes nothing.
    pub fn fail_rename(&self, number: u64, fault: Fault) {
        self.lock().faults.renames.insert(number, fault);
    }

    /// Every operation after the first `count` fails with EIO and changes nothing.
    pub fn fail_operations_after(&self, count: u64) {
        self.lock().faults.operations_max = Some(count);
    }

    /// Syncs after the first `count` succeed without making anything durable (see
    /// `Faults::durable_syncs_max`): the way to crash "at fsync number N".
    pub fn freeze_durability_after_syncs(&self, count: u64) {
        self.lock().faults.durable_syncs_max = Some(count);
    }

    /// The storage dies now: every later operation fails with EIO and changes nothing
    /// (a crash at a moment chosen by the test, e.g. a random one).
    pub fn crash_now(&self) {
        let mut state = self.lock();
        state.faults.operations_max = Some(state.counts.operations);
    }

    /// When the code under test reaches checkpoint `step`, the storage dies: every later
    /// operation fails with EIO and changes nothing. A `power_loss` then gives the state
    /// of a crash at exactly that step. `step` is a name (its first occurrence) or
    /// `name:N` (its Nth).
    pub fn crash_at(&self, step: &str) {
        self.lock().faults.crash_at = Some(parse_step(step));
    }

    /// The thread that reaches checkpoint `step` (`name` or `name:N`) waits there until
    /// `resume`, while the other threads go on; a `crash_at` of the same step takes effect
    /// when it resumes. A test can so act at exactly that point of a protocol, e.g. have a
    /// write acknowledged before the crash there.
    pub fn pause_at(&self, step: &str) {
        self.lock().faults.pause_at = Some(parse_step(step));
    }

    /// Lets a thread paused by `pause_at` go on.
    pub fn resume(&self) {
        self.lock().paused = false;
        self.resumed.notify_all();
    }

    /// Every file sync takes this long from now on (a slow disk).
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.lock().sync_delay = delay;
    }

    /// The first sync after checkpoint `step` (`name` or `name:N`) fails with `fault`.
    pub fn fail_sync_after(&self, step: &str, fault: Fault) {
        self.lock().faults.sync_after = Some((parse_step(step), fault));
    }

    /// The next `times` operations `op` on a file whose path contains `name` fail with
    /// `fault` and change nothing (`u64::MAX`: until `clear_faults`). A failed sync also
    /// drops the file's dirty bytes from writeback, as `fail_sync`. Unlike the numbered
    /// faults, this aims at one file (the log, a manifest, a part) whatever the other
    /// threads do meanwhile. The operation is counted as usual.
    pub fn fail_file_op(&self, op: FileOp, name: &str, fault: Fault, times: u64) {
        self.lock().faults.by_name.push(NamedFault {
            op,
            name: name.to_string(),
            fault,
            times,
        });
    }

    /// The checkpoints reached since creation or the last power loss, in order.
    pub fn checkpoints(&self) -> Vec<String> {
        self.lock().checkpoints.clone()
    }

    /// What each sync since creation or the last power loss was of (a file, by the name
    /// it was opened by, or a directory), in order: entry N-1 is sync number N of
    /// `counts().syncs`, `fail_sync` and `freeze_durability_after_syncs`.
    pub fn synced_paths(&self) -> Vec<PathBuf> {
        self.lock().synced_paths.clone()
    }

    pub fn clear_faults(&self) {
        self.lock().faults = Faults::default();
        self.resume();
    }

    /// A storage of its own holding this one's durable image, as a power loss without torn
    /// writes would leave it; this one goes on unchanged. One prepared directory so serves
    /// many experiments.
    pub fn durable_copy(&self) -> SimulatedStorage {
        let copy = SimulatedStorage {
            state: Arc::new(Mutex::new(self.lock().clone())),
            resumed: Arc::default(),
        };
        let _ = copy.power_loss(TornWrites::None);
        copy
    }

    /// Turns the storage into its durable image, as after a power loss and a reboot:
    /// unsynced bytes and directory entries are gone (or, as `torn` says, some of each
    /// file's unsynced bytes survive), handles opened before fail, and counters and faults
    /// start afresh (a paused thread is let go). Returns what happened to each surviving
    /// file whose live bytes were not all durable.
    pub fn power_loss(&self, torn: TornWrites) -> Vec<TornFile> {
        let mut state = self.lock();
        let state = &mut *state;
        let mut random = SplitMix64(match torn {
            TornWrites::None => 0,
            TornWrites::Seeded(seed) | TornWrites::Hole(seed) | TornWrites::Scattered(seed) => seed,
        });
        // A directory whose own entry was not durable takes its whole subtree with it.
        let durable_dirs: BTreeSet<PathBuf> = state
            .durable_dirs
            .iter()
            .filter(|dir| dir.ancestors().skip(1).all(|a| is_durable_dir(state, a)))
            .cloned()
            .collect();
        let durable_names: BTreeMap<PathBuf, InodeId> = state
            .durable_names
            .iter()
            .filter(|(name, _)| {
                let parent = parent_of(name);
                is_root(&parent) || durable_dirs.contains(&parent)
            })
            .map(|(name, inode)| (name.clone(), *inode))
            .collect();
        let reachable: BTreeMap<InodeId, &PathBuf> =
            durable_names.iter().map(|(name, id)| (*id, name)).collect();
        state.inodes.retain(|id, _| reachable.contains_key(id));
        let mut report = Vec::new();
        for (id, inode) in state.inodes.iter_mut() {
            let synced = inode
                .clean_len
                .min(inode.durable.len())
                .min(inode.live.len());
            let written = inode.live.len();
            let changed = inode.live != inode.durable;
            let kept = tear(inode, torn, &mut random);
            if changed {
                report.push(TornFile {
                    path: reachable[id].clone(),
                    synced: synced as u64,
                    written: written as u64,
                    kept: kept
                        .into_iter()
                        .map(|r| r.start as u64..r.end as u64)
                        .collect(),
                });
            }
            inode.live = inode.durable.clone();
            inode.clean_len = inode.live.len();
        }
        report.sort_by(|a, b| a.path.cmp(&b.path));
        state.live_dirs = durable_dirs.clone();
        state.durable_dirs = durable_dirs;
        state.live_names = durable_names.clone();
        state.durable_names = durable_names;
        state.generation += 1;
        state.counts = Counts::default();
        state.faults = Faults::default();
        state.checkpoints.clear();
        state.synced_paths.clear();
        state.paused = false;
        self.resumed.notify_all();
        report
    }
}

/// Lets the part of the dirty bytes that `torn` draws reach the durable image, as a crash
/// in the middle of writeback does; returns the ranges kept, in order.
fn tear(inode: &mut Inode, torn: TornWrites, random: &mut SplitMix64) -> Vec<Range<usize>> {
    let clean_len = inode.clean_len.min(inode.live.len());
    let end = inode.live.len();
    // The dirty bytes cut at the file's page boundaries.
    let mut pages = Vec::new();
    let mut start = clean_len;
    while start < end {
        let next = ((start / PAGE_BYTES + 1) * PAGE_BYTES).min(end);
        pages.push(start..next);
        start = next;
    }
    let prefix = |random: &mut SplitMix64| {
        let kept = (random.next() % ((end - clean_len) as u64 + 1)) as usize;
        std::iter::once(clean_len..clean_len + kept).collect()
    };
    let kept: Vec<Range<usize>> = match torn {
        TornWrites::None => Vec::new(),
        _ if pages.is_empty() => Vec::new(),
        TornWrites::Seeded(_) => prefix(random),
        TornWrites::Hole(_) if pages.len() < 2 => prefix(random),
        TornWrites::Hole(_) => {
            // Pages [0, lost) kept, [lost, back) lost, [back, until) kept, the rest lost.
            let lost = random.below(pages.len() - 1);
            let back = lost + 1 + random.below(pages.len() - lost - 1);
            let until = back + 1 + random.below(pages.len() - back);
            pages[..lost]
                .iter()
                .chain(&pages[back..until])
                .cloned()
                .collect()
        }
        TornWrites::Scattered(_) => pages
            .iter()
            .filter(|_| random.next() & 1 == 1)
            .cloned()
            .collect(),
    };
    // Adjacent pages make one range.
    let mut merged: Vec<Range<usize>> = Vec::new();
    for range in kept.into_iter().filter(|r| !r.is_empty()) {
        match merged.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => merged.push(range),
        }
    }
    for range in &merged {
        if inode.durable.len() < range.end {
            inode.durable.resize(range.end, 0);
        }
        inode.durable[range.clone()].copy_from_slice(&inode.live[range.clone()]);
    }
    merged
}

fn is_root(path: &Path) -> bool {
    path.as_os_str().is_empty() || path == Path::new("/")
}

fn is_durable_dir(state: &State, path: &Path) -> bool {
    is_root(path) || state.durable_dirs.contains(path)
}

/// A small deterministic generator, so a failing seed replays exactly.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write,
    Sync,
    Rename,
    Other,
}

impl State {
    /// Counts one operation and returns the injected fault for it, if any. Called before
    /// the operation changes anything, so a failed operation changes nothing.
    fn begin(&mut self, kind: Kind) -> io::Result<()> {
        self.counts.operations += 1;
        let fault = match kind {
            Kind::Write => {
                self.counts.writes += 1;
                self.faults.writes.get(&self.counts.writes).copied()
            }
            Kind::Sync => {
                self.counts.syncs += 1;
                self.faults.syncs.get(&self.counts.syncs).copied()
            }
            Kind::Rename => {
                self.counts.renames += 1;
                self.faults.renames.get(&self.counts.renames).copied()
            }
            Kind::Other => None,
        };
        match (self.dead(), fault) {
            (true, _) => Err(Fault::Io.error()),
            (false, Some(fault)) => Err(fault.error()),
            (false, None) => Ok(()),
        }
    }

    /// The fault injected by name for `op` on `path`, if any (and counts it down).
    fn named_fault(&mut self, op: FileOp, path: &Path) -> io::Result<()> {
        let text = path.to_string_lossy();
        let rule = self
            .faults
            .by_name
            .iter_mut()
            .find(|rule| rule.op == op && rule.times > 0 && text.contains(rule.name.as_str()));
        match rule {
            Some(rule) => {
                rule.times -= 1;
                Err(rule.fault.error())
            }
            None => Ok(()),
        }
    }

    /// As `named_fault`, for an open file: matched on the names it has now.
    fn named_fault_of(&mut self, op: FileOp, inode: InodeId) -> io::Result<()> {
        if self.faults.by_name.is_empty() {
            return Ok(());
        }
        let names: Vec<PathBuf> = self
            .live_names
            .iter()
            .filter(|(_, id)| **id == inode)
            .map(|(name, _)| name.clone())
            .collect();
        names.iter().try_for_each(|name| self.named_fault(op, name))
    }

    /// Past `operations_max`: every operation fails (a dead device, a crash).
    fn dead(&self) -> bool {
        self.faults
            .operations_max
            .is_some_and(|max| self.counts.operations > max)
    }

    fn durability_frozen(&self) -> bool {
        self.faults
            .durable_syncs_max
            .is_some_and(|max| self.counts.syncs > max)
    }

    fn dir_exists(&self, path: &Path) -> bool {
        is_root(path) || self.live_dirs.contains(path)
    }

    fn require_parent(&self, path: &Path) -> io::Result<()> {
        let parent = parent_of(path);
        if self.dir_exists(&parent) {
            Ok(())
        } else {
            Err(not_found(&parent))
        }
    }

    fn inode_of(&self, path: &Path) -> io::Result<InodeId> {
        self.live_names
            .get(path)
            .copied()
            .ok_or_else(|| not_found(path))
    }

    fn inode(&mut self, id: InodeId) -> &mut Inode {
        self.inodes
            .get_mut(&id)
            .expect("a live handle's inode is kept")
    }
}

impl SimulatedStorage {
    fn handle(
        &self,
        state: &State,
        path: &Path,
        inode: InodeId,
        writable: bool,
    ) -> Box<dyn StorageFile> {
        Box::new(SimulatedFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            inode,
            generation: state.generation,
            writable,
        })
    }

    fn open(&self, path: &Path, writable: bool) -> io::Result<Box<dyn StorageFile>> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        let inode = state.inode_of(&path)?;
        Ok(self.handle(&state, &path, inode, writable))
    }
}

impl Storage for SimulatedStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        state.named_fault(FileOp::Create, &path)?;
        if state.dir_exists(&path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        state.require_parent(&path)?;
        // O_TRUNC on an existing name truncates that file in place; only a new name gets
        // a new file.
        let inode = match state.live_names.get(&path).copied() {
            Some(id) => {
                let inode = state.inode(id);
                inode.live.clear();
                inode.clean_len = 0;
                id
            }
            None => {
                let id = state.next_inode;
                state.next_inode += 1;
                state.inodes.insert(id, Inode::default());
                state.live_names.insert(path.clone(), id);
                id
            }
        };
        Ok(self.handle(&state, &path, inode, true))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        self.open(path, true)
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        self.open(path, false)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        let id = state.inode_of(&path)?;
        Ok(state.inode(id).live.clone())
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        let id = state.inode_of(&path)?;
        Ok(state.inode(id).live.len() as u64)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut state = self.lock();
        state.begin(Kind::Rename)?;
        state.named_fault(FileOp::Rename, &from)?;
        let id = state.inode_of(&from)?;
        state.require_parent(&to)?;
        if state.dir_exists(&to) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        state.live_names.remove(&from);
        // The replaced file stays in `inodes`: open handles and the durable image may
        // still refer to it; power loss collects what nothing durable names.
        state.live_names.insert(to, id);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        state.inode_of(&path)?;
        state.live_names.remove(&path);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        for ancestor in path.ancestors().filter(|a| !is_root(a)) {
            if state.live_names.contains_key(ancestor) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is a file", ancestor.display()),
                ));
            }
        }
        for ancestor in path.ancestors().filter(|a| !is_root(a)) {
            state.live_dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path = normalize(path);
        let mut state = self.lock();
        state.synced_paths.push(path.clone());
        state.begin(Kind::Sync)?;
        if !state.dir_exists(&path) {
            return Err(not_found(&path));
        }
        if state.durability_frozen() {
            return Ok(());
        }
        let state = &mut *state;
        let in_dir = |name: &&PathBuf| parent_of(name) == path;
        state.durable_names.retain(|name, _| !in_dir(&name));
        for (name, id) in state.live_names.iter().filter(|(name, _)| in_dir(name)) {
            state.durable_names.insert(name.clone(), *id);
        }
        state.durable_dirs.retain(|dir| !in_dir(&dir));
        for dir in state.live_dirs.iter().filter(in_dir) {
            state.durable_dirs.insert(dir.clone());
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let path = normalize(path);
        let mut state = self.lock();
        state.begin(Kind::Other)?;
        if !state.dir_exists(&path) {
            return Err(not_found(&path));
        }
        let names = state.live_names.keys().chain(state.live_dirs.iter());
        let mut names: Vec<String> = names
            .filter(|name| parent_of(name) == path)
            .filter_map(|name| name.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    fn checkpoint(&self, step: &str) {
        let mut state = self.lock();
        state.checkpoints.push(step.to_string());
        let reached = state.checkpoints.iter().filter(|s| *s == step).count() as u64;
        if state
            .faults
            .pause_at
            .as_ref()
            .is_some_and(|(name, nth)| name == step && *nth == reached)
        {
            state.faults.pause_at = None;
            state.paused = true;
            while state.paused {
                state = self
                    .resumed
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
        if state
            .faults
            .crash_at
            .as_ref()
            .is_some_and(|(name, nth)| name == step && *nth == reached)
        {
            state.faults.operations_max = Some(state.counts.operations);
        }
        if let Some(((name, nth), fault)) = state.faults.sync_after.clone()
            && name == step
            && nth == reached
        {
            let next = state.counts.syncs + 1;
            state.faults.syncs.insert(next, fault);
        }
    }
}

impl SimulatedFile {
    /// Locks the state and counts the operation; fails for a handle from before a power
    /// loss.
    fn begin(&self, kind: Kind) -> io::Result<MutexGuard<'_, State>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.generation != self.generation {
            return Err(io::Error::other(
                "simulated storage: file handle opened before a power loss",
            ));
        }
        if kind == Kind::Sync {
            state.synced_paths.push(self.path.clone());
        }
        state.begin(kind)?;
        match kind {
            Kind::Write => state.named_fault_of(FileOp::Write, self.inode)?,
            Kind::Sync => state.named_fault_of(FileOp::Sync, self.inode)?,
            Kind::Rename | Kind::Other => {}
        }
        Ok(state)
    }

    fn sync(&mut self) -> io::Result<()> {
        // A slow disk: the delay passes without holding the lock, as a real fsync blocks
        // only its caller.
        let delay = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sync_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut state = match self.begin(Kind::Sync) {
            Ok(state) => state,
            Err(error) => {
                // Linux marks the dirty pages clean after a writeback error, so the next
                // sync will not write them: the bytes are lost to the durable image. A dead
                // disk (a crash under way) writes nothing back either way: its dirty pages
                // stay as they are, for `power_loss` to tear.
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if state.generation == self.generation && !state.dead() {
                    let inode = state.inode(self.inode);
                    inode.clean_len = inode.live.len();
                }
                return Err(error);
            }
        };
        if state.durability_frozen() {
            return Ok(());
        }
        let inode = state.inode(self.inode);
        let clean_len = inode.clean_len.min(inode.live.len());
        inode.durable.resize(inode.live.len(), 0);
        inode.durable[clean_len..].copy_from_slice(&inode.live[clean_len..]);
        inode.clean_len = inode.live.len();
        Ok(())
    }
}

impl StorageFile for SimulatedFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        if !self.writable {
            // EBADF, as a write to a read-only descriptor gets.
            return Err(io::Error::from_raw_os_error(9));
        }
        let mut state = self.begin(Kind::Write)?;
        state.inode(self.inode).live.extend_from_slice(bytes);
        Ok(())
    }

    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> io::Result<usize> {
        let mut state = self.begin(Kind::Other)?;
        let live = &state.inode(self.inode).live;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(live.len());
        let count = buffer.len().min(live.len() - start);
        buffer[..count].copy_from_slice(&live[start..start + count]);
        Ok(count)
    }

    fn len(&self) -> io::Result<u64> {
        let mut state = self.begin(Kind::Other)?;
        Ok(state.inode(self.inode).live.len() as u64)
    }

    fn set_len(&mut self, length: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::from_raw_os_error(22));
        }
        let mut state = self.begin(Kind::Other)?;
        let inode = state.inode(self.inode);
        let length = usize::try_from(length).map_err(io::Error::other)?;
        inode.live.resize(length, 0);
        // Bytes re-appended after a cut are new dirty bytes, even where clean bytes were.
        inode.clean_len = inode.clean_len.min(length);
        Ok(())
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.sync()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn path(name: &str) -> &Path {
        Path::new(name)
    }

    /// A file created, written and synced, with its name made durable.
    fn durable_file(storage: &SimulatedStorage, name: &str, bytes: &[u8]) {
        let mut file = storage.create(path(name)).unwrap();
        file.append(bytes).unwrap();
        file.sync_data().unwrap();
        storage.sync_dir(&parent_of(path(name))).unwrap();
    }

    #[test]
    fn unsynced_appends_are_lost_and_synced_ones_kept() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"first ");
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(b"second").unwrap();
        assert_eq!(storage.read(path("log")).unwrap(), b"first second");
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("log")).unwrap(), b"first ");
    }

    #[test]
    fn sync_data_after_appends_keeps_them() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"a");
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(b"b").unwrap();
        file.append(b"c").unwrap();
        file.sync_all().unwrap();
        file.append(b"d").unwrap();
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("log")).unwrap(), b"abc");
    }

    #[test]
    fn torn_writes_keep_a_prefix_within_bounds() {
        let mut lengths = BTreeSet::new();
        for seed in 0..200 {
            let storage = SimulatedStorage::new();
            durable_file(&storage, "log", b"synced|");
            let mut file = storage.open_append(path("log")).unwrap();
            file.append(b"0123456789").unwrap();
            storage.power_loss(TornWrites::Seeded(seed));
            let bytes = storage.read(path("log")).unwrap();
            let expected = b"synced|0123456789";
            assert!(
                bytes.len() >= 7 && bytes.len() <= expected.len(),
                "seed {seed}"
            );
            assert_eq!(bytes, expected[..bytes.len()], "seed {seed}");
            lengths.insert(bytes.len());
        }
        // Both extremes and something in between occur.
        assert!(lengths.contains(&7) && lengths.contains(&17) && lengths.len() > 3);
    }

    #[test]
    fn torn_writes_are_deterministic_per_seed() {
        let run = |seed| {
            let storage = SimulatedStorage::new();
            durable_file(&storage, "log", b"");
            let mut file = storage.open_append(path("log")).unwrap();
            file.append(&[7; 1000]).unwrap();
            storage.power_loss(TornWrites::Seeded(seed));
            storage.len(path("log")).unwrap()
        };
        assert_eq!(run(42), run(42));
    }

    /// A durable "synced|", then `pages` pages and a bit of unsynced bytes, none of them
    /// zero; a power loss with `torn`. Returns the bytes before, after and the report.
    fn tear_pages(torn: TornWrites, pages: usize) -> (Vec<u8>, Vec<u8>, TornFile) {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"synced|");
        let mut file = storage.open_append(path("log")).unwrap();
        let dirty: Vec<u8> = (0..pages * PAGE_BYTES + 100)
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        file.append(&dirty).unwrap();
        let before = storage.read(path("log")).unwrap();
        let report = storage.power_loss(torn);
        assert_eq!(report.len(), 1);
        (
            before,
            storage.read(path("log")).unwrap(),
            report[0].clone(),
        )
    }

    /// What every torn file must look like: the synced bytes intact, the kept ranges as
    /// written, zeros between them, nothing after the last.
    fn check_tear(before: &[u8], after: &[u8], report: &TornFile, seed: u64) {
        assert_eq!((report.synced, report.written), (7, before.len() as u64));
        let end = report.kept.last().map_or(7, |r| r.end as usize);
        assert_eq!(after.len(), end, "seed {seed}");
        let mut kept = vec![false; after.len()];
        for range in &report.kept {
            assert!(range.start >= 7 && range.start < range.end, "seed {seed}");
            kept[range.start as usize..range.end as usize].fill(true);
        }
        for (i, byte) in after.iter().enumerate() {
            let expected = if i < 7 || kept[i] { before[i] } else { 0 };
            assert_eq!(*byte, expected, "seed {seed}, offset {i}");
        }
    }

    #[test]
    fn holes_lose_pages_before_a_later_kept_one_and_read_as_zeros() {
        let mut holes = 0;
        for seed in 0..200 {
            let (before, after, report) = tear_pages(TornWrites::Hole(seed), 4);
            check_tear(&before, &after, &report, seed);
            // One hole at most: a kept prefix of pages, then one later run of pages.
            assert!(report.kept.len() <= 2, "seed {seed}: {report:?}");
            if report.has_hole() {
                holes += 1;
                let lost_from = match report.kept.first() {
                    Some(range) if range.start == 7 => range.end,
                    _ => 7,
                };
                assert!(lost_from == 7 || lost_from.is_multiple_of(PAGE_BYTES as u64));
            }
        }
        assert!(holes > 100, "{holes} holes in 200 seeds");
        // A single unsynced page is torn as a prefix.
        for seed in 0..50 {
            let (before, after, report) = tear_pages(TornWrites::Hole(seed), 0);
            check_tear(&before, &after, &report, seed);
            assert!(!report.has_hole());
        }
    }

    #[test]
    fn scattered_pages_survive_in_any_order() {
        let (mut holes, mut runs) = (0, 0);
        for seed in 0..200 {
            let (before, after, report) = tear_pages(TornWrites::Scattered(seed), 5);
            check_tear(&before, &after, &report, seed);
            for range in &report.kept {
                let aligned = |at: u64| at.is_multiple_of(PAGE_BYTES as u64);
                assert!(range.start == 7 || aligned(range.start), "seed {seed}");
                assert!(
                    range.end == report.written || aligned(range.end),
                    "seed {seed}"
                );
            }
            holes += usize::from(report.has_hole());
            runs += usize::from(report.kept.len() > 2);
        }
        assert!(
            holes > 100 && runs > 10,
            "{holes} holes, {runs} with 3+ runs"
        );
        assert_eq!(
            tear_pages(TornWrites::Scattered(9), 5),
            tear_pages(TornWrites::Scattered(9), 5)
        );
    }

    #[test]
    fn power_loss_reports_only_files_with_bytes_not_durable() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "synced", b"all durable");
        durable_file(&storage, "log", b"abc");
        storage
            .open_append(path("log"))
            .unwrap()
            .append(b"def")
            .unwrap();
        let report = storage.power_loss(TornWrites::None);
        assert_eq!(
            report,
            [TornFile {
                path: PathBuf::from("log"),
                synced: 3,
                written: 6,
                kept: Vec::new(),
            }]
        );
    }

    #[test]
    fn a_paused_thread_waits_and_the_crash_at_its_step_follows_the_resume() {
        let storage = SimulatedStorage::new();
        storage.pause_at("step:2");
        storage.crash_at("step:2");
        let worker = {
            let storage = storage.clone();
            std::thread::spawn(move || {
                storage.checkpoint("step");
                storage.checkpoint("step");
                storage.create(path("after")).map(|_| ())
            })
        };
        while storage.checkpoints().len() < 2 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!worker.is_finished(), "the thread waits at step:2");
        // The crash is not in effect yet: others go on.
        storage.create(path("meanwhile")).unwrap();
        storage.resume();
        assert!(
            worker.join().unwrap().is_err(),
            "the crash follows the resume"
        );
    }

    #[test]
    fn synced_paths_name_each_numbered_sync() {
        let storage = SimulatedStorage::new();
        storage.create_dir_all(path("d")).unwrap();
        let mut file = storage.create(path("d/f")).unwrap();
        file.sync_data().unwrap();
        storage.fail_sync(2, Fault::Io);
        assert!(storage.sync_dir(path("d")).is_err());
        file.sync_all().unwrap();
        assert_eq!(storage.counts().syncs, 3);
        let expected: Vec<PathBuf> = ["d/f", "d", "d/f"].iter().map(PathBuf::from).collect();
        assert_eq!(storage.synced_paths(), expected);
        let _ = storage.power_loss(TornWrites::None);
        assert!(storage.synced_paths().is_empty());
    }

    #[test]
    fn a_durable_copy_is_a_storage_of_its_own() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "kept", b"durable");
        storage
            .open_append(path("kept"))
            .unwrap()
            .append(b"+live")
            .unwrap();
        storage.create(path("unnamed")).unwrap();
        let copy = storage.durable_copy();
        assert_eq!(copy.read(path("kept")).unwrap(), b"durable");
        assert_eq!(copy.list_dir(path("")).unwrap(), ["kept"]);
        copy.open_append(path("kept"))
            .unwrap()
            .append(b"!")
            .unwrap();
        assert_eq!(storage.read(path("kept")).unwrap(), b"durable+live");
        assert_eq!(storage.list_dir(path("")).unwrap(), ["kept", "unnamed"]);
    }

    #[test]
    fn new_file_without_directory_sync_vanishes() {
        let storage = SimulatedStorage::new();
        let mut file = storage.create(path("new")).unwrap();
        file.append(b"data").unwrap();
        file.sync_all().unwrap();
        storage.power_loss(TornWrites::None);
        assert_eq!(
            storage.read(path("new")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn rename_is_lost_without_directory_sync() {
        let storage = SimulatedStorage::new();
        storage.create_dir_all(path("dir")).unwrap();
        storage.sync_dir(path("")).unwrap();
        durable_file(&storage, "dir/manifest", b"old");
        durable_file(&storage, "dir/manifest.tmp", b"new");
        storage
            .rename(path("dir/manifest.tmp"), path("dir/manifest"))
            .unwrap();
        assert_eq!(storage.read(path("dir/manifest")).unwrap(), b"new");
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("dir/manifest")).unwrap(), b"old");
        assert_eq!(
            storage.list_dir(path("dir")).unwrap(),
            ["manifest", "manifest.tmp"]
        );
    }

    #[test]
    fn rename_is_kept_with_directory_sync() {
        let storage = SimulatedStorage::new();
        storage.create_dir_all(path("dir")).unwrap();
        storage.sync_dir(path("")).unwrap();
        durable_file(&storage, "dir/manifest", b"old");
        durable_file(&storage, "dir/manifest.tmp", b"new");
        storage
            .rename(path("dir/manifest.tmp"), path("dir/manifest"))
            .unwrap();
        storage.sync_dir(path("dir")).unwrap();
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("dir/manifest")).unwrap(), b"new");
        assert_eq!(storage.list_dir(path("dir")).unwrap(), ["manifest"]);
    }

    #[test]
    fn remove_is_undone_without_directory_sync_and_kept_with_it() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "garbage", b"x");
        storage.remove_file(path("garbage")).unwrap();
        assert!(storage.list_dir(path("")).unwrap().is_empty());
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("garbage")).unwrap(), b"x");

        storage.remove_file(path("garbage")).unwrap();
        storage.sync_dir(path("")).unwrap();
        storage.power_loss(TornWrites::None);
        assert!(storage.list_dir(path("")).unwrap().is_empty());
    }

    #[test]
    fn directory_not_synced_into_its_parent_loses_its_files() {
        let storage = SimulatedStorage::new();
        storage.create_dir_all(path("a/b")).unwrap();
        durable_file(&storage, "a/b/file", b"x");
        storage.sync_dir(path("a")).unwrap();
        // `a` itself was never made durable in the root.
        storage.power_loss(TornWrites::None);
        assert!(storage.list_dir(path("")).unwrap().is_empty());
        assert!(storage.read(path("a/b/file")).is_err());
    }

    #[test]
    fn open_handle_survives_unlink_but_not_power_loss() {
        let storage = SimulatedStorage::new();
        let mut file = storage.create(path("f")).unwrap();
        storage.remove_file(path("f")).unwrap();
        file.append(b"still writable").unwrap();
        assert_eq!(file.len().unwrap(), 14);
        storage.power_loss(TornWrites::None);
        assert!(file.append(b"x").is_err());
        assert!(file.len().is_err());
    }

    #[test]
    fn truncate_then_sync_is_durable_and_unsynced_truncate_is_not() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"0123456789");
        let mut file = storage.open_append(path("log")).unwrap();
        file.set_len(4).unwrap();
        assert_eq!(storage.read(path("log")).unwrap(), b"0123");
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("log")).unwrap(), b"0123456789");

        let mut file = storage.open_append(path("log")).unwrap();
        file.set_len(4).unwrap();
        file.append(b"ab").unwrap();
        file.sync_data().unwrap();
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("log")).unwrap(), b"0123ab");
    }

    #[test]
    fn injected_write_failure_appends_nothing() {
        let storage = SimulatedStorage::new();
        let mut file = storage.create(path("log")).unwrap();
        storage.fail_write(2, Fault::NoSpace);
        file.append(b"one").unwrap();
        let error = file.append(b"two").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
        assert_eq!(error.raw_os_error(), Some(28));
        file.append(b"three").unwrap();
        assert_eq!(storage.read(path("log")).unwrap(), b"onethree");
        assert_eq!(storage.counts().writes, 3);
    }

    #[test]
    fn failed_sync_drops_dirty_bytes_for_good() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"durable|");
        let syncs_before = storage.counts().syncs;
        storage.fail_sync(syncs_before + 1, Fault::Io);
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(b"lost").unwrap();
        assert_eq!(file.sync_data().unwrap_err().raw_os_error(), Some(5));
        // A second sync succeeds but cannot write what the failed one dropped: the
        // length is durable, the bytes are a hole (zeros).
        file.sync_data().unwrap();
        storage.power_loss(TornWrites::None);
        assert_eq!(storage.read(path("log")).unwrap(), b"durable|\0\0\0\0");
    }

    #[test]
    fn a_sync_after_the_crash_leaves_the_dirty_bytes_to_the_power_loss() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"durable|");
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(b"in flight").unwrap();
        storage.crash_now();
        assert!(file.sync_data().is_err());
        let report = storage.power_loss(TornWrites::Seeded(7));
        assert_eq!((report[0].synced, report[0].written), (8, 17));
        let kept = report[0].kept.first().map_or(8, |r| r.end) as usize;
        assert_eq!(
            storage.read(path("log")).unwrap(),
            b"durable|in flight"[..kept]
        );
        assert!(kept > 8, "seed 7 keeps some of the bytes in flight");
    }

    #[test]
    fn rewrite_after_failed_sync_makes_the_bytes_durable() {
        // The log writer's recovery: cut back to the durable length, append again, sync.
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"durable|");
        storage.fail_sync(storage.counts().syncs + 1, Fault::Io);
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(b"batch").unwrap();
        assert!(file.sync_data().is_err());
        file.set_len(8).unwrap();
        file.append(b"batch").unwrap();
        file.sync_data().unwrap();
        storage.power_loss(TornWrites::Seeded(3));
        assert_eq!(storage.read(path("log")).unwrap(), b"durable|batch");
    }

    #[test]
    fn failed_rename_changes_nothing() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "manifest", b"old");
        durable_file(&storage, "temp", b"new");
        storage.fail_rename(1, Fault::Io);
        assert!(storage.rename(path("temp"), path("manifest")).is_err());
        assert_eq!(storage.read(path("manifest")).unwrap(), b"old");
        assert_eq!(storage.read(path("temp")).unwrap(), b"new");
        storage.rename(path("temp"), path("manifest")).unwrap();
        assert_eq!(storage.read(path("manifest")).unwrap(), b"new");
    }

    #[test]
    fn failed_directory_sync_makes_nothing_durable() {
        let storage = SimulatedStorage::new();
        let mut file = storage.create(path("f")).unwrap();
        file.sync_all().unwrap();
        storage.fail_sync(2, Fault::Io);
        assert!(storage.sync_dir(path("")).is_err());
        storage.power_loss(TornWrites::None);
        assert!(storage.list_dir(path("")).unwrap().is_empty());
    }

    #[test]
    fn faults_by_name_hit_only_that_file_and_only_so_many_times() {
        let storage = SimulatedStorage::new();
        storage.fail_file_op(FileOp::Write, "log", Fault::NoSpace, 2);
        storage.fail_file_op(FileOp::Sync, "log", Fault::Io, 1);
        storage.fail_file_op(FileOp::Create, "temp-", Fault::Io, 1);
        storage.fail_file_op(FileOp::Rename, "temp-b", Fault::Io, 1);
        let mut other = storage.create(path("other")).unwrap();
        other.append(b"x").unwrap();
        other.sync_data().unwrap();
        let mut log = storage.create(path("dir-log")).unwrap();
        assert_eq!(log.append(b"a").unwrap_err().raw_os_error(), Some(28));
        assert!(log.append(b"b").is_err());
        log.append(b"c").unwrap();
        assert_eq!(log.sync_data().unwrap_err().raw_os_error(), Some(5));
        log.sync_data().unwrap();
        assert_eq!(storage.read(path("dir-log")).unwrap(), b"c");
        assert!(storage.create(path("temp-a")).is_err());
        assert!(storage.list_dir(path("")).unwrap() == ["dir-log", "other"]);
        storage.create(path("temp-b")).unwrap();
        assert!(storage.rename(path("temp-b"), path("b")).is_err());
        storage.rename(path("temp-b"), path("b")).unwrap();
        assert_eq!(storage.counts().writes, 4);
    }

    #[test]
    fn every_operation_after_the_limit_fails() {
        let storage = SimulatedStorage::new();
        storage.fail_operations_after(2);
        let mut file = storage.create(path("f")).unwrap();
        file.append(b"x").unwrap();
        assert!(file.append(b"y").is_err());
        assert!(storage.read(path("f")).is_err());
        assert!(storage.sync_dir(path("")).is_err());
        storage.clear_faults();
        assert_eq!(storage.read(path("f")).unwrap(), b"x");
    }

    #[test]
    fn frozen_durability_crashes_at_sync_number_n() {
        // The commit protocol, with every crash point taken in turn.
        let commit = |storage: &SimulatedStorage| {
            durable_file(storage, "manifest", b"v1");
            let mut temp = storage.create(path("manifest.tmp")).unwrap();
            temp.append(b"v2").unwrap();
            temp.sync_all().unwrap();
            storage
                .rename(path("manifest.tmp"), path("manifest"))
                .unwrap();
            storage.sync_dir(path("")).unwrap();
        };
        let total = {
            let storage = SimulatedStorage::new();
            commit(&storage);
            storage.counts().syncs
        };
        assert_eq!(total, 4);
        let mut seen = Vec::new();
        for syncs in 0..=total {
            let storage = SimulatedStorage::new();
            storage.freeze_durability_after_syncs(syncs);
            commit(&storage);
            storage.power_loss(TornWrites::None);
            seen.push(storage.read(path("manifest")).ok());
        }
        let v1 = Some(b"v1".to_vec());
        let v2 = Some(b"v2".to_vec());
        assert_eq!(seen, [None, None, v1.clone(), v1, v2]);
    }

    #[test]
    fn list_dir_and_create_dir_all() {
        let storage = SimulatedStorage::new();
        storage.create_dir_all(path("./d/e")).unwrap();
        storage.create(path("d/z")).unwrap();
        storage.create(path("d/a")).unwrap();
        assert_eq!(storage.list_dir(path("d")).unwrap(), ["a", "e", "z"]);
        assert!(storage.create(path("missing/f")).is_err());
        assert!(storage.create_dir_all(path("d/a/x")).is_err());
        assert!(storage.list_dir(path("missing")).is_err());
    }

    #[test]
    fn read_only_handle_refuses_appends() {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "f", b"abc");
        let mut file = storage.open_read(path("f")).unwrap();
        assert!(file.append(b"x").is_err());
        let mut buffer = [0; 8];
        assert_eq!(file.read_at(1, &mut buffer).unwrap(), 2);
        assert_eq!(&buffer[..2], b"bc");
        assert_eq!(file.read_at(10, &mut buffer).unwrap(), 0);
    }

    /// The same script on both implementations must read back the same.
    fn round_trip(storage: &dyn Storage) {
        storage.create_dir_all(path("dir/sub")).unwrap();
        let mut file = storage.create(path("dir/log")).unwrap();
        file.append(b"hello ").unwrap();
        write!(file, "world").unwrap();
        file.sync_data().unwrap();
        assert_eq!(file.len().unwrap(), 11);
        file.set_len(5).unwrap();
        file.append(b"!").unwrap();
        file.sync_all().unwrap();
        drop(file);
        assert_eq!(storage.read(path("dir/log")).unwrap(), b"hello!");
        assert_eq!(storage.len(path("dir/log")).unwrap(), 6);

        let mut file = storage.open_append(path("dir/log")).unwrap();
        file.append(b"?").unwrap();
        let mut reader = StorageReader::new(storage.open_read(path("dir/log")).unwrap());
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "hello!?");
        assert_eq!(reader.offset(), 7);

        storage
            .create(path("dir/temp"))
            .unwrap()
            .append(b"new")
            .unwrap();
        storage.rename(path("dir/temp"), path("dir/log")).unwrap();
        storage.sync_dir(path("dir")).unwrap();
        assert_eq!(storage.read(path("dir/log")).unwrap(), b"new");
        assert_eq!(storage.list_dir(path("dir")).unwrap(), ["log", "sub"]);
        storage.remove_file(path("dir/log")).unwrap();
        assert_eq!(
            storage.read(path("dir/log")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(storage.list_dir(path("dir")).unwrap(), ["sub"]);
        // Creating over an existing file truncates it.
        storage
            .create(path("dir/f"))
            .unwrap()
            .append(b"long")
            .unwrap();
        storage.create(path("dir/f")).unwrap();
        assert_eq!(storage.len(path("dir/f")).unwrap(), 0);
    }

    #[test]
    fn real_storage_round_trips() {
        let root = tempfile::tempdir().unwrap();
        round_trip(&RealStorage::new(root.path()));
    }

    #[test]
    fn simulated_storage_round_trips() {
        round_trip(&SimulatedStorage::new());
    }

    #[test]
    fn storage_is_usable_as_a_shared_trait_object() {
        let storage: Arc<dyn Storage> = Arc::new(SimulatedStorage::new());
        let writer = {
            let storage = Arc::clone(&storage);
            std::thread::spawn(move || {
                let mut file = storage.create(path("log")).unwrap();
                file.append(b"from a thread").unwrap();
                file.sync_data().unwrap();
            })
        };
        writer.join().unwrap();
        assert_eq!(storage.read(path("log")).unwrap(), b"from a thread");
    }
}
