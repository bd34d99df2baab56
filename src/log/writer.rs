//! The log writer thread: `write` and `fsync` off the event loop, with group commit.
//!
//! The event loop hands over each turn's records as one batch and gets a sequence number.
//! The writer takes every batch queued since its last pass, writes them with one `write`
//! and, under `appendfsync always`, one `fdatasync` covering all of them, then publishes
//! the highest sequence now durable and wakes the loop, which releases the replies it was
//! holding for those batches. So one fsync commits the writes of many clients.
//!
//! Every batch since the last successful fsync is kept in memory. After a failed fsync the
//! file is cut back to its last durable length, after a failed write to the end of the
//! last batch written whole, and the rest is rewritten and fsynced, retried once a second;
//! until a retry succeeds the loop refuses writes (Redis's MISCONF). Bytes the disk may
//! have lost are always rewritten from memory, never trusted to a second fsync (a failed
//! fsync can drop dirty pages).

use super::LogPaths;
use super::manifest::{CommitError, Manifest};
use crate::config::FsyncPolicy;
use crate::storage::{CrashPoint, Storage, StorageFile};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Why the log can't be written, or why a switch to a new incremental file failed. Cloned
/// to everyone who asks (the loop's MISCONF replies, the compaction waiting on a rotation),
/// so the system's error is shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// A write, fsync or truncate of the log failed and no retry has succeeded since. Shown
    /// as the system's error alone: it is the text of Redis's MISCONF reply.
    #[error("{source}")]
    Failing {
        action: &'static str,
        source: Arc<std::io::Error>,
    },
    /// A rotation was asked while the log was failing.
    #[error("the append-only log can't be written: {0}")]
    Unwritable(Box<LogError>),
    #[error("can't create {}: {source}", path.display())]
    CreateFile {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("can't commit the manifest: {0}")]
    CommitManifest(Arc<std::io::Error>),
}

struct Pending {
    bytes: Vec<u8>,
    last_seq: u64,
    policy: FsyncPolicy,
    /// Fsync at the next pass whatever the policy (SHUTDOWN).
    sync_requested: bool,
    stop: bool,
    /// A switch to a new incremental file after the first `split` bytes of `bytes`.
    rotation: Option<PendingRotation>,
}

/// Where a compaction starts: the log moves to a new incremental file, which a manifest
/// commit makes part of the dataset before any record is written to it.
pub struct Rotation {
    pub paths: LogPaths,
    /// The new file's name in the log directory.
    pub file_name: String,
    /// The manifest to commit: the current one with the new file appended.
    pub manifest: Manifest,
}

struct PendingRotation {
    split: usize,
    /// The last batch that belongs to the old file.
    seq_before: u64,
    rotation: Rotation,
}

struct Shared {
    pending: Mutex<Pending>,
    wake_writer: Condvar,
    /// Highest batch sequence whose bytes are written to the file.
    written_seq: AtomicU64,
    /// Highest batch sequence covered by a successful fsync.
    durable_seq: AtomicU64,
    /// Bytes in the file, durable or not.
    file_bytes: AtomicU64,
    pending_bytes: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<LogError>>,
    /// The writer is waiting on `wake_writer`: only then does a submit need to signal it
    /// (a futex syscall per event-loop turn otherwise).
    writer_waiting: AtomicBool,
    /// The outcome of the last rotation, once the writer has done it.
    rotation_outcome: Mutex<Option<Result<(), LogError>>>,
    rotation_done: Condvar,
}

/// Lets another thread (the compaction) wait for the outcome of a rotation.
#[derive(Clone)]
pub struct RotationWaiter {
    shared: Arc<Shared>,
}

impl RotationWaiter {
    /// Blocks until the writer has switched files (Ok) or given up (Err).
    pub fn wait(&self) -> Result<(), LogError> {
        let mut outcome = self.shared.rotation_outcome.lock().unwrap();
        loop {
            if let Some(result) = outcome.as_ref() {
                return result.clone();
            }
            outcome = self.shared.rotation_done.wait(outcome).unwrap();
        }
    }

    /// The outcome if the writer has done the rotation.
    pub fn peek(&self) -> Option<Result<(), LogError>> {
        self.shared.rotation_outcome.lock().unwrap().clone()
    }
}

/// The event loop's side of the writer.
pub struct LogWriter {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    next_seq: u64,
}

/// A callback the writer runs after publishing progress (wakes the event loop).
pub type Notify = Box<dyn Fn() + Send>;

impl LogWriter {
    pub fn start(
        storage: Arc<dyn Storage>,
        file: Box<dyn StorageFile>,
        file_bytes: u64,
        policy: FsyncPolicy,
        notify: Notify,
    ) -> LogWriter {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                bytes: Vec::new(),
                last_seq: 0,
                policy,
                sync_requested: false,
                stop: false,
                rotation: None,
            }),
            wake_writer: Condvar::new(),
            written_seq: AtomicU64::new(0),
            durable_seq: AtomicU64::new(0),
            file_bytes: AtomicU64::new(file_bytes),
            pending_bytes: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            writer_waiting: AtomicBool::new(false),
            rotation_outcome: Mutex::new(None),
            rotation_done: Condvar::new(),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || {
                WriterThread::new(thread_shared, storage, file, file_bytes, notify).run()
            })
            .expect("spawn log writer thread");
        LogWriter {
            shared,
            thread: Some(thread),
            next_seq: 1,
        }
    }

    /// Queues a batch of records; returns its sequence number. The buffer is drained.
    pub fn submit(&mut self, batch: &mut Vec<u8>) -> u64 {
        assert!(!batch.is_empty(), "empty batches are not submitted");
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut pending = self.shared.pending.lock().unwrap();
        if pending.bytes.is_empty() {
            std::mem::swap(&mut pending.bytes, batch);
        } else {
            pending.bytes.extend_from_slice(batch);
            batch.clear();
        }
        pending.last_seq = seq;
        self.shared
            .pending_bytes
            .store(pending.bytes.len() as u64, Ordering::Relaxed);
        // `writer_waiting` only changes under the lock, so reading it here is exact.
        let waiting = self.shared.writer_waiting.load(Ordering::Relaxed);
        drop(pending);
        if waiting {
            self.shared.wake_writer.notify_one();
        }
        seq
    }

    /// Forgets the last rotation's outcome and returns a waiter for the next one, so that
    /// the threads that will wait on it can be started before it is requested.
    pub fn prepare_rotation(&mut self) -> RotationWaiter {
        *self.shared.rotation_outcome.lock().unwrap() = None;
        RotationWaiter {
            shared: self.shared.clone(),
        }
    }

    /// Switches to a new incremental file after everything submitted so far (the start of
    /// a compaction). Returns at once; the writer makes the old file durable, creates the
    /// new one and commits the manifest off the event loop. Records submitted from now on
    /// go to the new file, or, if the switch fails, stay in the old one.
    pub fn request_rotation(&mut self, rotation: Rotation) {
        let mut pending = self.shared.pending.lock().unwrap();
        assert!(pending.rotation.is_none(), "one rotation at a time");
        pending.rotation = Some(PendingRotation {
            split: pending.bytes.len(),
            seq_before: self.next_seq - 1,
            rotation,
        });
        drop(pending);
        self.shared.wake_writer.notify_one();
    }

    pub fn last_submitted(&self) -> u64 {
        self.next_seq - 1
    }

    pub fn written_seq(&self) -> u64 {
        self.shared.written_seq.load(Ordering::Acquire)
    }

    pub fn durable_seq(&self) -> u64 {
        self.shared.durable_seq.load(Ordering::Acquire)
    }

    pub fn file_bytes(&self) -> u64 {
        self.shared.file_bytes.load(Ordering::Relaxed)
    }

    pub fn pending_bytes(&self) -> u64 {
        self.shared.pending_bytes.load(Ordering::Relaxed)
    }

    /// The current write/fsync failure, if the log is unhealthy.
    pub fn error(&self) -> Option<LogError> {
        if !self.shared.failed.load(Ordering::Acquire) {
            return None;
        }
        self.shared.error.lock().unwrap().clone()
    }

    /// A write or fsync failed and no retry has succeeded since.
    pub fn is_failing(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    pub fn set_policy(&self, policy: FsyncPolicy) {
        self.shared.pending.lock().unwrap().policy = policy;
        self.shared.wake_writer.notify_one();
    }

    /// Waits until everything submitted so far is written and fsynced, whatever the
    /// policy. Fails (leaving the writer running and retrying) if the log is unhealthy.
    pub fn sync(&self) -> Result<(), LogError> {
        let target = self.last_submitted();
        self.shared.pending.lock().unwrap().sync_requested = true;
        self.shared.wake_writer.notify_one();
        loop {
            if let Some(error) = self.error() {
                return Err(error);
            }
            let requested = self.shared.pending.lock().unwrap().sync_requested;
            if !requested && self.durable_seq() >= target {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.shared.pending.lock().unwrap().stop = true;
            self.shared.wake_writer.notify_one();
            let _ = thread.join();
        }
    }
}

struct WriterThread {
    shared: Arc<Shared>,
    storage: Arc<dyn Storage>,
    file: Box<dyn StorageFile>,
    /// File length covered by the last successful fsync.
    durable_len: u64,
    /// Batches written (or to be written) since the last successful fsync, kept so that
    /// they can be rewritten after a failure.
    unsynced: Vec<Vec<u8>>,
    /// How many bytes of `unsynced` are in the file.
    unsynced_written: u64,
    unsynced_seq: u64,
    last_fsync: Instant,
    notify: Notify,
    /// A directory whose entries must be made durable before anything more is: set when
    /// the manifest of a rotation was renamed into place but the directory fsync failed.
    dir_to_sync: Option<PathBuf>,
    /// A file fsync failed since the last successful one: every byte written since
    /// `durable_len` may have been dropped from writeback.
    sync_failed: bool,
}

impl WriterThread {
    fn new(
        shared: Arc<Shared>,
        storage: Arc<dyn Storage>,
        file: Box<dyn StorageFile>,
        file_bytes: u64,
        notify: Notify,
    ) -> WriterThread {
        WriterThread {
            shared,
            storage,
            file,
            durable_len: file_bytes,
            unsynced: Vec::new(),
            unsynced_written: 0,
            unsynced_seq: 0,
            last_fsync: Instant::now(),
            notify,
            dir_to_sync: None,
            sync_failed: false,
        }
    }

    fn run(mut self) {
        loop {
            let (mut batch, seq, policy, sync_requested, stop, rotation) = self.take_pending();
            if let Some(pending_rotation) = rotation {
                let after = batch.split_off(pending_rotation.split);
                if !batch.is_empty() {
                    self.unsynced.push(batch);
                    self.unsynced_seq = pending_rotation.seq_before;
                }
                let outcome = self.rotate(pending_rotation.rotation);
                *self.shared.rotation_outcome.lock().unwrap() = Some(outcome);
                self.shared.rotation_done.notify_all();
                batch = after;
            }
            if !batch.is_empty() {
                self.unsynced.push(batch);
                self.unsynced_seq = seq;
            }
            if self.shared.failed.load(Ordering::Acquire) {
                self.recover();
            } else if self.write_unwritten().is_ok() {
                let due = match policy {
                    FsyncPolicy::Always => true,
                    FsyncPolicy::EverySec => self.last_fsync.elapsed() >= Duration::from_secs(1),
                    FsyncPolicy::No => false,
                };
                if due || sync_requested || stop {
                    let _ = self.fsync();
                } else if policy == FsyncPolicy::No {
                    // Nothing is promised under `no`: the kernel flushes when it likes.
                    self.forget_written();
                }
            }
            if sync_requested {
                self.shared.pending.lock().unwrap().sync_requested = false;
            }
            (self.notify)();
            if stop {
                if self.shared.failed.load(Ordering::Acquire) {
                    self.recover(); // one last attempt before giving up
                }
                return;
            }
        }
    }

    /// Waits for work (or the next everysec/retry tick) and takes all queued bytes.
    #[allow(clippy::type_complexity)]
    fn take_pending(
        &mut self,
    ) -> (
        Vec<u8>,
        u64,
        FsyncPolicy,
        bool,
        bool,
        Option<PendingRotation>,
    ) {
        let mut pending = self.shared.pending.lock().unwrap();
        loop {
            let failed = self.shared.failed.load(Ordering::Acquire);
            let has_unsynced = !self.unsynced.is_empty();
            if !pending.bytes.is_empty()
                || pending.stop
                || pending.sync_requested
                || pending.rotation.is_some()
            {
                break;
            }
            let wait = if failed {
                RETRY_INTERVAL
            } else if pending.policy == FsyncPolicy::EverySec && has_unsynced {
                let since = self.last_fsync.elapsed();
                if since >= Duration::from_secs(1) {
                    break;
                }
                Duration::from_secs(1) - since
            } else {
                Duration::from_secs(3600)
            };
            self.shared.writer_waiting.store(true, Ordering::Relaxed);
            let (guard, timeout) = self.shared.wake_writer.wait_timeout(pending, wait).unwrap();
            pending = guard;
            self.shared.writer_waiting.store(false, Ordering::Relaxed);
            if timeout.timed_out() && (failed || pending.policy == FsyncPolicy::EverySec) {
                break;
            }
        }
        let batch = std::mem::take(&mut pending.bytes);
        self.shared.pending_bytes.store(0, Ordering::Relaxed);
        let sync_requested = pending.sync_requested;
        (
            batch,
            pending.last_seq,
            pending.policy,
            sync_requested,
            pending.stop,
            pending.rotation.take(),
        )
    }

    /// Appends the part of `unsynced` not yet in the file (the file is opened O_APPEND).
    fn write_unwritten(&mut self) -> Result<(), ()> {
        let mut offset = 0u64;
        for batch in &self.unsynced {
            let end = offset + batch.len() as u64;
            if end > self.unsynced_written {
                let start = (self.unsynced_written - offset) as usize;
                if let Err(e) = self.file.append(&batch[start..]) {
                    self.fail("write", e);
                    return Err(());
                }
                self.unsynced_written = end;
                let total = self.durable_len + self.unsynced_written;
                self.shared.file_bytes.store(total, Ordering::Relaxed);
            }
            offset = end;
        }
        self.shared
            .written_seq
            .store(self.unsynced_seq, Ordering::Release);
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), ()> {
        if let Some(dir) = &self.dir_to_sync {
            if let Err(e) = self.storage.sync_dir(dir) {
                self.fail("directory fsync", e);
                return Err(());
            }
            self.dir_to_sync = None;
        }
        if let Err(e) = self.file.sync_data() {
            self.sync_failed = true;
            self.fail("fsync", e);
            return Err(());
        }
        self.sync_failed = false;
        self.last_fsync = Instant::now();
        self.forget_written();
        self.shared
            .durable_seq
            .store(self.unsynced_seq, Ordering::Release);
        Ok(())
    }

    /// The written batches are no longer needed for a retry.
    fn forget_written(&mut self) {
        self.durable_len += self.unsynced_written;
        self.unsynced_written = 0;
        self.unsynced.clear();
        if self.shared.failed.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                "AOF write error looks solved: the append-only log is writable again, accepting writes"
            );
            *self.shared.error.lock().unwrap() = None;
        }
    }

    fn fail(&mut self, what: &'static str, error: std::io::Error) {
        let first = !self.shared.failed.swap(true, Ordering::AcqRel);
        if first {
            tracing::warn!(
                "append-only log {what} failed: {error}; refusing writes until it succeeds again"
            );
        }
        *self.shared.error.lock().unwrap() = Some(LogError::Failing {
            action: what,
            source: Arc::new(error),
        });
    }

    /// Makes the old file durable, then creates the new one and commits the manifest that
    /// lists it. On failure the writer stays on the old file (nothing of the new one is
    /// listed anywhere) and the compaction that asked is abandoned.
    fn rotate(&mut self, rotation: Rotation) -> Result<(), LogError> {
        if self.shared.failed.load(Ordering::Acquire) {
            self.recover();
        } else if self.write_unwritten().is_ok() {
            let _ = self.fsync();
        }
        if let Some(error) = self.shared.error.lock().unwrap().clone()
            && self.shared.failed.load(Ordering::Acquire)
        {
            return Err(LogError::Unwritable(Box::new(error)));
        }
        let storage = self.storage.clone();
        let path: PathBuf = rotation.paths.file(&rotation.file_name);
        // Until the manifest lists it the new file is garbage: removed on failure, so that
        // a failed rotation leaves the directory as it was.
        let abandon = |error: LogError| {
            let _ = storage.remove_file(&path);
            error
        };
        let mut file = storage
            .create(&path)
            .and_then(|mut file| file.sync_all().map(|()| file))
            .map_err(|e| {
                abandon(LogError::CreateFile {
                    path: path.clone(),
                    source: Arc::new(e),
                })
            })?;
        storage.checkpoint(CrashPoint::RewriteIncrCreated);
        match rotation
            .paths
            .commit_manifest(&*storage, &rotation.manifest)
        {
            Ok(()) => {}
            Err(CommitError::NotCommitted(e)) => {
                return Err(abandon(LogError::CommitManifest(Arc::new(e))));
            }
            Err(CommitError::NotDurable(e)) => {
                // The new manifest is in force, but its directory entry may not survive a
                // power loss: nothing written to the new file is acknowledged until a
                // directory fsync succeeds (the failure path retries it).
                self.dir_to_sync = Some(rotation.paths.dir.clone());
                self.fail("directory fsync", e);
            }
        }
        storage.checkpoint(CrashPoint::RewriteIncrCommitted);
        std::mem::swap(&mut self.file, &mut file);
        self.durable_len = 0;
        self.unsynced_written = 0;
        self.shared.file_bytes.store(0, Ordering::Relaxed);
        tracing::info!("append-only log continues in {}", rotation.file_name);
        Ok(())
    }

    /// After a failure: cut the file back to the bytes still trusted, rewrite everything
    /// since from memory and fsync. Only a successful fsync clears the failure.
    fn recover(&mut self) {
        // After a failed fsync nothing since the durable length is trusted. After a failed
        // write only the batch that failed is in doubt (it may be partly written): the
        // batches before it are written like any unsynced bytes, and under `everysec` or
        // `no` their replies have gone out. Cutting them off too would lose acknowledged
        // writes if the process died before a retry succeeds (the disk still full).
        let keep = if self.sync_failed {
            0
        } else {
            self.unsynced_written
        };
        if let Err(e) = self.file.set_len(self.durable_len + keep) {
            self.fail("truncate", e);
            return;
        }
        self.unsynced_written = keep;
        self.shared
            .file_bytes
            .store(self.durable_len + keep, Ordering::Relaxed);
        if self.write_unwritten().is_ok() {
            let _ = self.fsync();
        }
    }
}
