//! The log writer thread: `write` off the event loop, with group commit, and beside it the
//! fsync thread (`fsync.rs`).
//!
//! The event loop hands over each turn's records as one batch and gets a sequence number.
//! The writer takes every batch queued since its last pass and writes them with one
//! `write`, publishes the highest sequence written and hands it to the fsync thread, which
//! syncs under `appendfsync always` as soon as it is free (one `fdatasync` covering every
//! batch written since the last one: group commit, with the next batches written while a
//! sync runs) and under `everysec` once a second. Each side publishes its progress and wakes
//! the loop, which releases the replies it holds: under `always` once fsynced, otherwise
//! once written. So an `everysec` fsync never delays a reply, as Redis's background fsync
//! doesn't, unless it has been running for more than 2 s: then the writer holds further
//! writes until it returns (`aof_delayed_fsync` counts it), so that no more than about
//! 3 s of acknowledged writes can be lost to a power failure.
//!
//! Under `everysec` and `no` the loop writes a batch itself when the writer thread is
//! idle, nothing is queued before it and the log is healthy (`LogWriter::write_inline`):
//! the writer's state (`WriterThread`, the file and the kept batches) sits behind a lock
//! the thread takes only for its passes, so a reply waits for one `write`, as in Redis,
//! rather than for two thread hand-overs. Anything unusual (a queue, a rotation, a
//! requested sync, a failure, a stalled fsync, `always`) goes through the thread.
//!
//! Every batch since the last successful fsync is kept in memory. After a failed fsync the
//! file is cut back to its last durable length, after a failed write to the end of the
//! last batch written whole, and the rest is rewritten and fsynced, retried once a second;
//! until a retry succeeds the loop refuses writes (Redis's MISCONF). Bytes the disk may
//! have lost are always rewritten from memory, never trusted to a second fsync (a failed
//! fsync can drop dirty pages). The writer does that work, and rotations and requested
//! syncs, itself with the fsync thread paused.

mod fsync;

use super::LogPaths;
use super::manifest::{CommitError, Manifest};
use crate::config::FsyncPolicy;
use crate::storage::{CrashPoint, Storage, StorageFile};
use fsync::{FsyncThread, Mark};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Log bytes waiting for the writer beyond which the event loop stops reading from
/// clients until the writer catches up (`LogWriter::is_backlogged`).
const BACKLOG_BYTES: u64 = 64 * 1024 * 1024;

/// How long an `everysec` fsync may run while writes go on (Redis's 2 s): past it, writes
/// wait for the fsync, which bounds what a power loss can take.
const FSYNC_STALL_LIMIT: Duration = Duration::from_secs(2);

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
    /// The fsync thread finished a sync since the writer's last pass.
    sync_event: bool,
    /// The memory of the batch the writer has taken and not yet queued (counted in
    /// `pending_memory` until it is counted in `retained_bytes`).
    in_transit: u64,
}

impl Pending {
    fn publish_memory(&self, shared: &Shared) {
        let memory = self.bytes.capacity() as u64 + self.in_transit;
        shared.pending_memory.store(memory, Ordering::Relaxed);
    }
}

/// What the fsync thread tells the writer and the loop.
enum SyncEvent {
    /// Every batch up to this sequence is durable.
    Synced(u64),
    Failed(std::io::Error),
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

/// Reads the log bytes a writer holds in memory (`LogWriter::buffered_bytes`).
#[derive(Clone)]
pub struct BufferGauge(Arc<Shared>);

impl BufferGauge {
    pub fn bytes(&self) -> u64 {
        self.0.buffered_memory()
    }
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
    /// The memory the queued bytes take (their buffer's capacity), and the batch in
    /// transit to `retained_bytes`: eviction's measure must not see a batch's memory as
    /// the dataset's, not even while the writer takes it (a false `-OOM`, an eviction).
    pending_memory: AtomicU64,
    /// Bytes of the batches the writer keeps for a rewrite after a failure (written, not
    /// yet durable).
    retained_bytes: AtomicU64,
    /// Times writes were held because an `everysec` fsync ran longer than 2 s.
    delayed_fsyncs: AtomicU64,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds to sleep before each write (tests only: it
    /// shows that no reply goes out before its record is written).
    flush_sleep_us: AtomicU64,
    /// `everysec` syncs early once this much is unsynced (`fsync::unsynced_max_for`).
    unsynced_max: AtomicU64,
    /// What the writer may hold under `maxmemory` (`fsync::buffered_max_for`; u64::MAX:
    /// no limit).
    buffered_max: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<LogError>>,
    /// The writer is waiting on `wake_writer`: only then does a submit need to signal it
    /// (a futex syscall per event-loop turn otherwise).
    writer_waiting: AtomicBool,
    /// The outcome of the last rotation, once the writer has done it.
    rotation_outcome: Mutex<Option<Result<(), LogError>>>,
    rotation_done: Condvar,
    notify: Notify,
}

impl Shared {
    fn fail(&self, action: &'static str, error: std::io::Error) {
        let first = !self.failed.swap(true, Ordering::AcqRel);
        if first {
            tracing::warn!(
                "append-only log {action} failed: {error}; refusing writes until it succeeds again"
            );
        }
        *self.error.lock().unwrap() = Some(LogError::Failing {
            action,
            source: Arc::new(error),
        });
    }

    /// A successful fsync after a failure: writes are accepted again.
    fn healed(&self) {
        if self.failed.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                "AOF write error looks solved: the append-only log is writable again, accepting writes"
            );
            *self.error.lock().unwrap() = None;
        }
    }

    /// The fsync thread's news: published, then the writer and the loop are woken.
    /// The memory of the log bytes the writer holds (`LogWriter::buffered_bytes`).
    fn buffered_memory(&self) -> u64 {
        self.pending_memory.load(Ordering::Relaxed) + self.retained_bytes.load(Ordering::Relaxed)
    }

    fn sync_event(&self, event: SyncEvent) {
        match event {
            SyncEvent::Synced(seq) => {
                self.durable_seq.fetch_max(seq, Ordering::AcqRel);
            }
            SyncEvent::Failed(error) => self.fail("fsync", error),
        }
        let mut pending = self.pending.lock().unwrap();
        pending.sync_event = true;
        let waiting = self.writer_waiting.load(Ordering::Relaxed);
        drop(pending);
        if waiting {
            self.wake_writer.notify_one();
        }
        (self.notify)();
    }
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
    /// The writer's state, worked by its thread, or by the loop itself when the thread is
    /// idle (`write_inline`).
    core: Arc<Mutex<WriterThread>>,
    thread: Option<std::thread::JoinHandle<()>>,
    next_seq: u64,
}

/// A callback the writer and the fsync thread run after publishing progress (wakes the
/// event loop).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

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
                sync_event: false,
                in_transit: 0,
            }),
            wake_writer: Condvar::new(),
            written_seq: AtomicU64::new(0),
            durable_seq: AtomicU64::new(0),
            file_bytes: AtomicU64::new(file_bytes),
            pending_bytes: AtomicU64::new(0),
            pending_memory: AtomicU64::new(0),
            retained_bytes: AtomicU64::new(0),
            delayed_fsyncs: AtomicU64::new(0),
            flush_sleep_us: AtomicU64::new(0),
            buffered_max: AtomicU64::new(u64::MAX),
            unsynced_max: AtomicU64::new(fsync::unsynced_max_for(0)),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            writer_waiting: AtomicBool::new(false),
            rotation_outcome: Mutex::new(None),
            rotation_done: Condvar::new(),
            notify,
        });
        let core = Arc::new(Mutex::new(WriterThread::new(
            shared.clone(),
            storage,
            file,
            file_bytes,
            policy,
        )));
        let (thread_shared, thread_core) = (shared.clone(), core.clone());
        let thread = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || run(&thread_shared, &thread_core))
            .expect("spawn log writer thread");
        LogWriter {
            shared,
            core,
            thread: Some(thread),
            next_seq: 1,
        }
    }

    /// Queues a batch of records; returns its sequence number. The buffer is drained.
    pub fn submit(&mut self, batch: &mut Vec<u8>) -> u64 {
        assert!(!batch.is_empty(), "empty batches are not submitted");
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.write_inline(batch, seq) {
            return seq;
        }
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
        pending.publish_memory(&self.shared);
        // `writer_waiting` only changes under the lock, so reading it here is exact.
        let waiting = self.shared.writer_waiting.load(Ordering::Relaxed);
        drop(pending);
        if waiting {
            self.shared.wake_writer.notify_one();
        }
        seq
    }

    /// Under `everysec` and `no`, with the writer thread idle, nothing queued before this
    /// batch and the log healthy, the loop writes the batch itself, as Redis writes its log
    /// before it replies: a reply then waits for one `write`, not for a hand-over to the
    /// writer thread and a wake-up back (two context switches a turn, which left the loop
    /// idle a third of the time under pipelined writes). `always` keeps the hand-over: its
    /// replies wait for the fsync thread anyway. False: the batch is still the caller's.
    fn write_inline(&mut self, batch: &mut Vec<u8>, seq: u64) -> bool {
        // The writer takes queued batches only while it holds the core: with the core held
        // here and nothing queued, every earlier batch is written or in `batches`.
        let Ok(mut core) = self.core.try_lock() else {
            return false;
        };
        let mut pending = self.shared.pending.lock().unwrap();
        let policy = pending.policy;
        let idle = pending.bytes.is_empty()
            && pending.rotation.is_none()
            && !pending.sync_requested
            && !pending.stop
            && policy != FsyncPolicy::Always;
        if !idle || self.shared.failed.load(Ordering::Acquire) || core.fsync_stalls() {
            return false;
        }
        pending.last_seq = seq;
        drop(pending);
        core.write_batch(std::mem::take(batch), seq, policy);
        true
    }

    /// Forgets the last rotation's outcome and returns a waiter for the next one, so that
    /// the threads that will wait on it can be started before it is requested.
    pub fn prepare_rotation(&mut self) -> RotationWaiter {
        *self.shared.rotation_outcome.lock().unwrap() = None;
        RotationWaiter {
            shared: self.shared.clone(),
        }
    }

    /// Marks the rotation `prepare_rotation` announced as done without one: a new log,
    /// whose first byte is the split (`compaction::Compaction::start_log`).
    pub fn rotation_not_needed(&mut self) {
        *self.shared.rotation_outcome.lock().unwrap() = Some(Ok(()));
        self.shared.rotation_done.notify_all();
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

    /// Log bytes in the writer's memory: queued for it, or written and kept until durable
    /// (INFO's `mem_aof_buffer`).
    pub fn buffered_bytes(&self) -> u64 {
        self.buffer_gauge().bytes()
    }

    /// A handle that reads `buffered_bytes` from elsewhere (eviction leaves these bytes
    /// out of its measure, as Redis leaves out its AOF buffer).
    pub fn buffer_gauge(&self) -> BufferGauge {
        BufferGauge(self.shared.clone())
    }

    /// Times writes waited for an `everysec` fsync that ran longer than 2 s (INFO's
    /// `aof_delayed_fsync`).
    pub fn delayed_fsyncs(&self) -> u64 {
        self.shared.delayed_fsyncs.load(Ordering::Relaxed)
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

    /// Bounds what `everysec` keeps unsynced, and so in memory, by `maxmemory` (0: none).
    pub fn set_memory_limit(&self, maxmemory: u64) {
        self.shared
            .unsynced_max
            .store(fsync::unsynced_max_for(maxmemory), Ordering::Relaxed);
        let buffered_max = fsync::buffered_max_for(maxmemory).unwrap_or(u64::MAX);
        self.shared
            .buffered_max
            .store(buffered_max, Ordering::Relaxed);
    }

    /// Whether the event loop should stop reading from clients (TCP then slows the
    /// senders down) until the writer catches up: more than `BACKLOG_BYTES` wait to be
    /// written, or, under `maxmemory`, the writer holds more than its share
    /// (`fsync::buffered_max_for`) — eviction does not count those bytes, so a disk
    /// slower than the writes would otherwise take the server past its limit. `extra`:
    /// this turn's records, not handed over yet. A failing log is held to the queue bound
    /// only: its batches stay until it recovers (writes are refused meanwhile), and reads
    /// must go on.
    pub fn is_backlogged(&self, extra: u64) -> bool {
        let shared = &self.shared;
        if shared.pending_bytes.load(Ordering::Relaxed) + extra > BACKLOG_BYTES {
            return true;
        }
        let buffered = shared.buffered_memory() + extra;
        buffered > shared.buffered_max.load(Ordering::Relaxed) && !self.is_failing()
    }

    /// DEBUG AOF-FLUSH-SLEEP: sleep this long before each write (0: not at all).
    pub fn set_flush_sleep(&self, micros: u64) {
        self.shared.flush_sleep_us.store(micros, Ordering::Relaxed);
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

/// The writer thread: waits for work, then does a pass with the core locked. The wait is
/// outside the lock, so that the loop may write inline meanwhile.
fn run(shared: &Shared, core: &Mutex<WriterThread>) {
    loop {
        wait_for_work(shared);
        if core.lock().unwrap().pass() {
            return;
        }
    }
}

/// Waits for work: a batch, a request, the fsync thread's news, or the retry tick while
/// the log is failing.
fn wait_for_work(shared: &Shared) {
    let mut pending = shared.pending.lock().unwrap();
    loop {
        if !pending.bytes.is_empty()
            || pending.stop
            || pending.sync_requested
            || pending.rotation.is_some()
            || pending.sync_event
        {
            return;
        }
        let failed = shared.failed.load(Ordering::Acquire);
        let wait = if failed {
            RETRY_INTERVAL
        } else {
            Duration::from_secs(3600)
        };
        shared.writer_waiting.store(true, Ordering::Relaxed);
        let (guard, timeout) = shared.wake_writer.wait_timeout(pending, wait).unwrap();
        pending = guard;
        shared.writer_waiting.store(false, Ordering::Relaxed);
        if timeout.timed_out() && failed {
            return;
        }
    }
}

/// The writer's state: the file, the batches kept until durable, the fsync thread.
struct WriterThread {
    shared: Arc<Shared>,
    storage: Arc<dyn Storage>,
    file: Box<dyn StorageFile>,
    fsync: FsyncThread,
    /// File length up to which nothing will be rewritten: fsynced, or (under `no`) given
    /// to the kernel with nothing promised. `batches` start there.
    trusted_len: u64,
    /// Batches since `trusted_len`, kept so that they can be rewritten after a failure.
    batches: VecDeque<Batch>,
    /// Their bytes.
    retained: u64,
    /// The memory they take (their capacity: a batch grows by doubling), which is what
    /// `retained_bytes` publishes (INFO `mem_aof_buffer`; eviction leaves it out).
    retained_memory: u64,
    /// File length up to which `batches` are written.
    written_len: u64,
    /// The last batch written whole (or, with none written since, the last one trusted).
    written_seq: u64,
    /// A directory whose entries must be made durable before anything more is: set when
    /// the manifest of a rotation was renamed into place but the directory fsync failed.
    dir_to_sync: Option<PathBuf>,
    /// A file fsync failed since the last successful one: every byte written since
    /// `trusted_len` may have been dropped from writeback.
    sync_failed: bool,
    /// Writes are being held for an fsync past the stall limit (counted once per stall).
    stalled: bool,
}

struct Batch {
    bytes: Vec<u8>,
    seq: u64,
}

impl WriterThread {
    fn unsynced_max(&self) -> u64 {
        self.shared.unsynced_max.load(Ordering::Relaxed)
    }

    fn new(
        shared: Arc<Shared>,
        storage: Arc<dyn Storage>,
        file: Box<dyn StorageFile>,
        file_bytes: u64,
        policy: FsyncPolicy,
    ) -> WriterThread {
        let start = Mark {
            len: file_bytes,
            seq: 0,
        };
        let handle = file.try_clone().expect("a second handle on the log file");
        let fsync = FsyncThread::start(handle, start, policy, shared.clone());
        WriterThread {
            shared,
            storage,
            file,
            fsync,
            trusted_len: file_bytes,
            batches: VecDeque::new(),
            retained: 0,
            retained_memory: 0,
            written_len: file_bytes,
            written_seq: 0,
            dir_to_sync: None,
            sync_failed: false,
            stalled: false,
        }
    }

    /// One pass over the work queued (under the core's lock); true once told to stop.
    fn pass(&mut self) -> bool {
        let mut work = self.take_pending();
        let held_over_budget =
            self.retained_memory > self.shared.buffered_max.load(Ordering::Relaxed);
        self.collect_syncs();
        // A pass that only takes in the fsync thread's news has nothing to tell the
        // loop (that thread woke it), unless the loop stopped reading for the memory
        // this pass let go of (`LogWriter::is_backlogged`); a retry after a failure does.
        let only_sync_news = work.only_sync_news()
            && !self.shared.failed.load(Ordering::Acquire)
            && !held_over_budget;
        let mut batch = std::mem::take(&mut work.batch);
        if let Some(pending_rotation) = work.rotation.take() {
            let after = batch.split_off(pending_rotation.split);
            self.queue(batch, pending_rotation.seq_before);
            let outcome =
                self.with_fsync_paused(|writer| writer.rotate(pending_rotation.rotation).map(Some));
            *self.shared.rotation_outcome.lock().unwrap() = Some(outcome.map(|_| ()));
            self.shared.rotation_done.notify_all();
            batch = after;
        }
        self.queue(batch, work.seq);
        let mut pending = self.shared.pending.lock().unwrap();
        if pending.in_transit != 0 {
            pending.in_transit = 0;
            pending.publish_memory(&self.shared);
        }
        drop(pending);
        if self.shared.failed.load(Ordering::Acquire) {
            let _ = self.with_fsync_paused(|writer| {
                writer.recover();
                Ok(None)
            });
        } else {
            if work.policy == FsyncPolicy::EverySec {
                self.hold_while_fsync_stalls();
            }
            if self.write_unwritten().is_ok() {
                if work.sync_requested || work.stop {
                    let _ = self.with_fsync_paused(|writer| {
                        let _ = writer.fsync();
                        Ok(None)
                    });
                } else {
                    self.written_under(work.policy);
                }
            }
        }
        if work.sync_requested {
            self.shared.pending.lock().unwrap().sync_requested = false;
        }
        if !only_sync_news {
            (self.shared.notify)();
        }
        if work.stop {
            if self.shared.failed.load(Ordering::Acquire) {
                // One last attempt before giving up.
                let _ = self.with_fsync_paused(|writer| {
                    writer.recover();
                    Ok(None)
                });
            }
            return true;
        }
        false
    }

    /// After a write: under `no` nothing is promised (the kernel flushes when it likes),
    /// otherwise the fsync thread takes the bytes on.
    fn written_under(&mut self, policy: FsyncPolicy) {
        if policy == FsyncPolicy::No {
            self.trust_written();
        } else {
            let written = Mark {
                len: self.written_len,
                seq: self.written_seq,
            };
            self.fsync.written(written, policy, self.unsynced_max());
        }
    }

    /// The loop's inline write (`LogWriter::write_inline`): the batch is queued and written
    /// as a pass would. A failed write is published (writes are refused) and the writer
    /// thread is woken to recover.
    fn write_batch(&mut self, bytes: Vec<u8>, seq: u64, policy: FsyncPolicy) {
        self.collect_syncs();
        self.queue(bytes, seq);
        if self.write_unwritten().is_ok() {
            self.written_under(policy);
        } else {
            let pending = self.shared.pending.lock().unwrap();
            let waiting = self.shared.writer_waiting.load(Ordering::Relaxed);
            drop(pending);
            if waiting {
                self.shared.wake_writer.notify_one();
            }
        }
    }

    /// An `everysec` fsync has run past the stall limit: writes wait for it (the writer
    /// thread holds them, `hold_while_fsync_stalls`).
    fn fsync_stalls(&self) -> bool {
        self.fsync
            .running_for()
            .is_some_and(|running| running >= FSYNC_STALL_LIMIT)
    }

    fn queue(&mut self, bytes: Vec<u8>, seq: u64) {
        if !bytes.is_empty() {
            self.retained += bytes.len() as u64;
            self.retained_memory += bytes.capacity() as u64;
            self.batches.push_back(Batch { bytes, seq });
            self.publish_retained();
        }
    }

    fn publish_retained(&self) {
        self.shared
            .retained_bytes
            .store(self.retained_memory, Ordering::Relaxed);
    }

    /// Takes all queued bytes and requests (`wait_for_work` waited for them).
    fn take_pending(&mut self) -> Work {
        let mut pending = self.shared.pending.lock().unwrap();
        pending.sync_event = false;
        let batch = std::mem::take(&mut pending.bytes);
        self.shared.pending_bytes.store(0, Ordering::Relaxed);
        pending.in_transit = batch.capacity() as u64;
        pending.publish_memory(&self.shared);
        Work {
            batch,
            seq: pending.last_seq,
            policy: pending.policy,
            sync_requested: pending.sync_requested,
            stop: pending.stop,
            rotation: pending.rotation.take(),
        }
    }

    /// Takes in what the fsync thread made durable: those batches are no longer needed.
    fn collect_syncs(&mut self) {
        let (synced, failed) = self.fsync.progress();
        self.trust_up_to(synced, failed);
    }

    fn trust_up_to(&mut self, synced: Mark, failed: bool) {
        if failed {
            self.sync_failed = true;
        }
        while let Some(batch) = self.batches.front() {
            let end = self.trusted_len + batch.bytes.len() as u64;
            if end > synced.len {
                break;
            }
            self.trusted_len = end;
            self.retained -= batch.bytes.len() as u64;
            self.retained_memory -= batch.bytes.capacity() as u64;
            self.batches.pop_front();
        }
        self.publish_retained();
        // A sync covers what was written when it started: whole batches.
        assert!(
            synced.len <= self.trusted_len || self.batches.is_empty() || failed,
            "a sync ended inside a batch"
        );
    }

    /// Under `everysec`: an fsync running for more than 2 s holds further writes (and so
    /// the replies waiting for them) until it returns, as Redis delays its writes.
    fn hold_while_fsync_stalls(&mut self) {
        match self.fsync.running_for() {
            Some(running) if running >= FSYNC_STALL_LIMIT => {
                if !self.stalled {
                    self.stalled = true;
                    self.shared.delayed_fsyncs.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        "Asynchronous AOF fsync is taking too long (disk is busy?). Holding \
                         writes until it completes, so that no more than a few seconds of \
                         writes can be lost"
                    );
                }
                let (synced, failed) = self.fsync.wait_idle();
                self.trust_up_to(synced, failed);
            }
            _ => self.stalled = false,
        }
    }

    /// Pauses the fsync thread around work on the file (a recovery, a rotation, a requested
    /// sync), then lets it go on from what is durable, on the new file if `work` returns one.
    fn with_fsync_paused(
        &mut self,
        work: impl FnOnce(&mut WriterThread) -> Result<Option<Box<dyn StorageFile>>, LogError>,
    ) -> Result<(), LogError> {
        let (synced, failed) = self.fsync.pause();
        // A failure of its last sync was published already: the recovery takes it on.
        self.trust_up_to(synced, failed);
        let (new_file, result) = match work(self) {
            Ok(file) => (file, Ok(())),
            Err(error) => (None, Err(error)),
        };
        let durable = Mark {
            len: self.trusted_len,
            seq: self.shared.durable_seq.load(Ordering::Acquire),
        };
        self.fsync.resume(durable, new_file);
        // Written but not yet durable (a rotation that failed after its writes, say): the
        // fsync thread takes those bytes on, unless the recovery owns them.
        if self.written_len > self.trusted_len && !self.shared.failed.load(Ordering::Acquire) {
            let written = Mark {
                len: self.written_len,
                seq: self.written_seq,
            };
            let policy = self.shared.pending.lock().unwrap().policy;
            self.fsync.written(written, policy, self.unsynced_max());
        }
        result
    }

    /// Appends the part of `batches` not yet in the file (the file is opened O_APPEND).
    fn write_unwritten(&mut self) -> Result<(), ()> {
        let sleep_us = self.shared.flush_sleep_us.load(Ordering::Relaxed);
        if sleep_us > 0 && self.batches.iter().any(|b| !b.bytes.is_empty()) {
            std::thread::sleep(Duration::from_micros(sleep_us));
        }
        let mut offset = self.trusted_len;
        for batch in &self.batches {
            let end = offset + batch.bytes.len() as u64;
            if end > self.written_len {
                let start = (self.written_len - offset) as usize;
                crate::crash_report::inject(crate::crash_report::PanicPoint::LogWrite);
                if let Err(e) = self.file.append(&batch.bytes[start..]) {
                    self.shared.fail("write", e);
                    return Err(());
                }
                self.written_len = end;
                self.written_seq = batch.seq;
                self.shared.file_bytes.store(end, Ordering::Relaxed);
            }
            offset = end;
        }
        self.shared
            .written_seq
            .store(self.written_seq, Ordering::Release);
        Ok(())
    }

    /// An fsync on the writer's own handle, the fsync thread paused.
    fn fsync(&mut self) -> Result<(), ()> {
        if let Some(dir) = &self.dir_to_sync {
            if let Err(e) = self.storage.sync_dir(dir) {
                self.shared.fail("directory fsync", e);
                return Err(());
            }
            self.dir_to_sync = None;
        }
        if let Err(e) = self.file.sync_data() {
            self.sync_failed = true;
            self.shared.fail("fsync", e);
            return Err(());
        }
        self.sync_failed = false;
        self.trust_written();
        self.shared
            .durable_seq
            .fetch_max(self.written_seq, Ordering::AcqRel);
        Ok(())
    }

    /// Everything written is trusted: durable, or (under `no`) left to the kernel.
    fn trust_written(&mut self) {
        assert_eq!(
            self.retained,
            self.written_len - self.trusted_len,
            "every queued batch is written"
        );
        self.trusted_len = self.written_len;
        self.batches.clear();
        self.retained = 0;
        self.retained_memory = 0;
        self.publish_retained();
        self.shared.healed();
    }

    /// Makes the old file durable, then creates the new one and commits the manifest that
    /// lists it; returns a second handle on the new file for the fsync thread. On failure
    /// the writer stays on the old file (nothing of the new one is listed anywhere) and the
    /// compaction that asked is abandoned.
    fn rotate(&mut self, rotation: Rotation) -> Result<Box<dyn StorageFile>, LogError> {
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
        let io_abandon = |e: std::io::Error| {
            abandon(LogError::CreateFile {
                path: path.clone(),
                source: Arc::new(e),
            })
        };
        let mut file = storage
            .create(&path)
            .and_then(|mut file| file.sync_all().map(|()| file))
            .map_err(io_abandon)?;
        let handle = file.try_clone().map_err(io_abandon)?;
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
                self.shared.fail("directory fsync", e);
            }
        }
        storage.checkpoint(CrashPoint::RewriteIncrCommitted);
        std::mem::swap(&mut self.file, &mut file);
        assert!(self.batches.is_empty(), "the old file was made durable");
        self.trusted_len = 0;
        self.written_len = 0;
        self.shared.file_bytes.store(0, Ordering::Relaxed);
        tracing::info!("append-only log continues in {}", rotation.file_name);
        Ok(handle)
    }

    /// After a failure: cut the file back to the bytes still trusted, rewrite everything
    /// since from memory and fsync. Only a successful fsync clears the failure. Runs with
    /// the fsync thread paused.
    fn recover(&mut self) {
        // After a failed fsync nothing since the trusted length is trusted. After a failed
        // write only the batch that failed is in doubt (it may be partly written): the
        // batches before it are written like any unsynced bytes, and under `everysec` or
        // `no` their replies have gone out. Cutting them off too would lose acknowledged
        // writes if the process died before a retry succeeds (the disk still full).
        let keep_to = if self.sync_failed {
            self.trusted_len
        } else {
            self.written_len
        };
        if let Err(e) = self.file.set_len(keep_to) {
            self.shared.fail("truncate", e);
            return;
        }
        self.written_len = keep_to;
        self.shared.file_bytes.store(keep_to, Ordering::Relaxed);
        if self.write_unwritten().is_ok() {
            let _ = self.fsync();
        }
    }
}

/// What one pass of the writer has to do.
struct Work {
    batch: Vec<u8>,
    seq: u64,
    policy: FsyncPolicy,
    sync_requested: bool,
    stop: bool,
    rotation: Option<PendingRotation>,
}

impl Work {
    /// The pass only takes in what the fsync thread did (which woke the loop itself).
    fn only_sync_news(&self) -> bool {
        self.batch.is_empty() && !self.sync_requested && !self.stop && self.rotation.is_none()
    }
}

#[cfg(test)]
mod tests;
