//! The simulated disk: in memory, with separate *live* and *durable* images of every
//! file's bytes and of every directory's entries, as redb's test backend and TigerBeetle's
//! simulated disk keep them. `power_loss` throws away whatever was not made durable, or
//! keeps some of it as a crash in the middle of writeback does ([`TornWrites`], `tear.rs`:
//! a prefix, a hole of zeros before a later page, pages in any order), and reports what it
//! did; faults can be injected on the Nth write, sync or rename or aimed at one file by
//! name, the disk can die at a checkpoint ([`CrashPoint`]), and a thread can be held at a
//! checkpoint while the test acts.
//!
//! Test equipment: compiled only with the `fault-injection` feature (and in unit tests).

mod tear;
#[cfg(test)]
mod tests;

pub use tear::{PAGE_BYTES, TornFile, TornWrites};

use super::{CrashPoint, CrashStep, Storage, StorageFile};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tear::{SplitMix64, tear};

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
    checkpoints: Vec<CrashPoint>,
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
    crash_at: Option<CrashStep>,
    /// At this checkpoint the next sync is made to fail (see `fail_sync_after`).
    sync_after: Option<(CrashStep, Fault)>,
    /// Faults by file name (see `fail_file_op`).
    by_name: Vec<NamedFault>,
    /// At this checkpoint the thread that reaches it waits (see `pause_at`).
    pause_at: Option<CrashStep>,
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
    /// of a crash at exactly that step. `step` is a [`CrashPoint`] (its first occurrence)
    /// or a [`CrashStep`] (its Nth).
    pub fn crash_at(&self, step: impl Into<CrashStep>) {
        self.lock().faults.crash_at = Some(step.into());
    }

    /// The thread that reaches checkpoint `step` (a point or its Nth occurrence) waits there
    /// until `resume`, while the other threads go on; a `crash_at` of the same step takes
    /// effect when it resumes. A test can so act at exactly that point of a protocol, e.g. have a
    /// write acknowledged before the crash there.
    pub fn pause_at(&self, step: impl Into<CrashStep>) {
        self.lock().faults.pause_at = Some(step.into());
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

    /// The first sync after checkpoint `step` (a point or its Nth occurrence) fails with
    /// `fault`.
    pub fn fail_sync_after(&self, step: impl Into<CrashStep>, fault: Fault) {
        self.lock().faults.sync_after = Some((step.into(), fault));
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
    pub fn checkpoints(&self) -> Vec<CrashPoint> {
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
        let mut random = SplitMix64::seeded_by(torn);
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

fn is_root(path: &Path) -> bool {
    path.as_os_str().is_empty() || path == Path::new("/")
}

fn is_durable_dir(state: &State, path: &Path) -> bool {
    is_root(path) || state.durable_dirs.contains(path)
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

    fn reach_checkpoint(&self, point: CrashPoint) {
        let mut state = self.lock();
        state.checkpoints.push(point);
        let reached = state.checkpoints.iter().filter(|p| **p == point).count() as u64;
        let here = point.nth(reached);
        if state.faults.pause_at == Some(here) {
            state.faults.pause_at = None;
            state.paused = true;
            while state.paused {
                state = self
                    .resumed
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        }
        if state.faults.crash_at == Some(here) {
            state.faults.operations_max = Some(state.counts.operations);
        }
        if let Some((step, fault)) = state.faults.sync_after
            && step == here
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

    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>> {
        drop(self.begin(Kind::Other)?);
        Ok(Box::new(SimulatedFile {
            state: self.state.clone(),
            path: self.path.clone(),
            inode: self.inode,
            generation: self.generation,
            writable: self.writable,
        }))
    }
}
