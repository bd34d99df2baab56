//! The forkless background snapshot that compaction (`BGREWRITEAOF`), `BGSAVE` and a
//! replica's full sync share: the capture sink, one queue and one writer thread per part,
//! and the job's thread that joins them and runs the finisher.
//!
//! A background snapshot is point-in-time without fork. When it starts, every database
//! marks its non-empty slots as pending (`keyspace::Db::begin_capture`). A pending slot is
//! captured — its table copied, the payload shared by refcount — just before its first
//! change, or by the event loop's background capture, a bounded batch per turn. Captures
//! go to the queue of the part that owns the slot (slot ranges, one part per writer
//! thread); each writer thread serialises its captures into its own RDB file. The event
//! loop never compresses or writes, and a capture costs it a table copy (the payload is
//! shared). It serialises only before a write: a hash table, set table or skip list that
//! a queued capture still shares is serialised into that capture (without LZF) before it
//! is changed in place, rather than copied whole by the change (`serialise_queued`).
//!
//! When the writers are done, a finisher runs on the job's own thread (the manifest
//! commit of a compaction, the rename of a `BGSAVE`), then the event loop is woken.
//!
//! Failures are `SnapshotError`s; a job's outcome carries its finisher's error type, into
//! which a `SnapshotError` converts (the compaction's error wraps it, BGSAVE's is it).

use super::{
    PART_BUFFER_BYTES, Pacing, PartForm, PartWriter, SnapshotError, create_part, encode_entry,
    finish_writing, sync_file, write_error,
};
use crate::keyspace::{CaptureBytes, CaptureSink, Entry, Keyspace, SLOT_COUNT, Slot};
use crate::rdb::RdbWriterOptions;
use crate::storage::{CrashPoint, Storage};
use std::collections::VecDeque;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// The part (0-based) that owns `slot` when there are `parts` parts: contiguous ranges,
/// so parts hold disjoint slots and recovery can load them independently.
pub fn part_of_slot(slot: usize, parts: usize) -> usize {
    slot * parts / SLOT_COUNT
}

/// The slots part `part` (0-based) of `parts` owns: those `part_of_slot` gives it.
pub fn part_slots(part: usize, parts: usize) -> std::ops::RangeInclusive<usize> {
    let first = |part: usize| (part * SLOT_COUNT).div_ceil(parts);
    first(part)..=first(part + 1) - 1
}

/// Background capture stops queueing once captures not yet written hold this much
/// (capture before write never waits: it may go past it).
const QUEUED_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// One captured slot on its way to a writer thread.
struct Captured {
    db: u32,
    slot_index: usize,
    slot: Slot,
    /// Entries taken out of `slot` and serialised by the event loop before it changed
    /// their value in place (`CaptureSink::serialise_queued`).
    serialised: Vec<SerialisedEntry>,
    /// What `held_bytes` counts for it.
    bytes: u64,
    /// What it holds alone, beyond the live dataset (`own_added`): its copy of the table,
    /// or all of a table moved out by a flush; records serialised into it.
    own_bytes: u64,
}

/// One key's record in the job's form (`super::encode_entry`), and its expiry for the
/// writer's filter.
struct SerialisedEntry {
    expire_at_ms: i64,
    record: Vec<u8>,
}

impl SerialisedEntry {
    fn is_expired(&self, now_ms: i64) -> bool {
        self.expire_at_ms != crate::keyspace::NO_EXPIRY && self.expire_at_ms <= now_ms
    }
}

#[derive(Default)]
struct Inbox {
    items: VecDeque<Captured>,
    /// No more captures will come: the writer finishes its file once the queue is empty.
    closed: bool,
}

#[derive(Default)]
struct PartQueue {
    inbox: Mutex<Inbox>,
    ready: Condvar,
}

/// What a finished job reports to the event loop.
#[derive(Clone, Debug, Default)]
pub struct JobOutcome {
    /// Sizes of the part files, in part order.
    pub part_bytes: Vec<u64>,
    pub keys: u64,
    pub seconds: f64,
}

/// State shared by the event loop, the writer threads and the job's thread.
struct JobShared {
    queues: Vec<PartQueue>,
    /// Memory held by captures not yet written: the copied tables plus the payload they
    /// reference (an upper bound: most of it is shared with the live dataset).
    held_bytes: AtomicU64,
    /// The memory held for the capture alone (`keyspace::CaptureBytes`): added by the
    /// event loop, released by the writers once a slot is written.
    own_added: AtomicU64,
    own_released: AtomicU64,
    /// Values of captured slots that the live dataset let go while the capture held them.
    diverged: Mutex<Diverged>,
    keys_written: AtomicU64,
    cancelled: AtomicBool,
    /// The form of the part files (and so of serialised records).
    form: PartForm,
}

/// Per captured slot not yet written, the bytes of the values only its capture holds;
/// and the slots written, which hold nothing any more.
#[derive(Default)]
struct Diverged {
    bytes: HashMap<(u32, usize), u64>,
    written: HashSet<(u32, usize)>,
}

/// Where the job's thread leaves the outcome for the event loop, which takes it.
type OutcomeSlot<E> = Mutex<Option<Result<JobOutcome, E>>>;

impl JobShared {
    /// No more captures will come. After a cancellation, what is queued is dropped too.
    fn close_all(&self) {
        let cancelled = self.cancelled.load(Ordering::Acquire);
        for queue in &self.queues {
            let mut inbox = queue.inbox.lock().unwrap();
            inbox.closed = true;
            if cancelled {
                inbox.items.clear();
            }
            queue.ready.notify_all();
        }
    }

    /// The job failed: the writers stop, queued captures are dropped, no more are taken.
    fn cancel_all(&self) {
        self.cancelled.store(true, Ordering::Release);
        self.close_all();
    }

    /// The next capture for a writer; None when the queue is closed and empty, or the job
    /// was cancelled.
    fn next(&self, part: usize) -> Option<Captured> {
        let queue = &self.queues[part];
        let mut inbox = queue.inbox.lock().unwrap();
        loop {
            if self.cancelled.load(Ordering::Acquire) {
                return None;
            }
            if let Some(item) = inbox.items.pop_front() {
                return Some(item);
            }
            if inbox.closed {
                return None;
            }
            inbox = queue.ready.wait(inbox).unwrap();
        }
    }
}

/// The memory a copy of `slot`'s table takes: its buckets, a boxed entry each (40 bytes
/// in jemalloc's 48-byte class) and the keys too long to sit inline. The values are
/// shared with the live table.
fn table_copy_bytes(slot: &Slot) -> u64 {
    let long_keys: usize = slot
        .iter()
        .map(|e| e.key.len())
        .filter(|&len| len > 15)
        .sum();
    (slot.table.capacity() * (std::mem::size_of::<Box<Entry>>() + 1) + slot.len() * 48 + long_keys)
        as u64
}

fn captured_bytes(slot: &Slot) -> u64 {
    let table = slot.table.capacity() * (std::mem::size_of::<Box<Entry>>() + 1)
        + slot.len() * std::mem::size_of::<Entry>();
    let payload: usize = slot
        .iter()
        .map(|e| e.key.len() + e.value.approx_bytes())
        .sum();
    (table + payload) as u64
}

impl CaptureSink for JobShared {
    fn accept(&self, db: u32, slot: usize, captured: Slot, moved: bool) {
        if self.cancelled.load(Ordering::Acquire) {
            return;
        }
        let bytes = captured_bytes(&captured);
        self.held_bytes.fetch_add(bytes, Ordering::Relaxed);
        let own_bytes = if moved {
            bytes
        } else {
            table_copy_bytes(&captured)
        };
        self.own_added.fetch_add(own_bytes, Ordering::Relaxed);
        let queue = &self.queues[part_of_slot(slot, self.queues.len())];
        queue.inbox.lock().unwrap().items.push_back(Captured {
            db,
            slot_index: slot,
            slot: captured,
            serialised: Vec::new(),
            bytes,
            own_bytes,
        });
        queue.ready.notify_one();
    }

    fn serialise_queued(&self, db: u32, slot: usize, key: &[u8]) -> bool {
        if self.cancelled.load(Ordering::Acquire) {
            return false;
        }
        let queue = &self.queues[part_of_slot(slot, self.queues.len())];
        // Under the queue's lock throughout: once its writer has taken the slot, the entry
        // must be written from the slot, so the entry and its record may never be apart.
        // The writer waits meanwhile; the loop, which serialises, never does.
        let mut inbox = queue.inbox.lock().unwrap();
        // Just captured by this write, most likely: search from the back.
        let Some(item) = inbox
            .items
            .iter_mut()
            .rev()
            .find(|c| c.db == db && c.slot_index == slot)
        else {
            return false;
        };
        let Some(entry) = item.slot.take(key) else {
            return false;
        };
        let shared_bytes = (entry.key.len() + entry.value.approx_bytes()) as u64;
        let record = encode_entry(self.form, &entry);
        let record_bytes = record.len() as u64;
        item.serialised.push(SerialisedEntry {
            expire_at_ms: entry.expire_at_ms,
            record,
        });
        // The item's count included the entry (its value is unchanged since the capture:
        // it is still shared), and the total includes the item's: neither goes below 0.
        item.bytes = item.bytes - shared_bytes + record_bytes;
        item.own_bytes += record_bytes;
        drop(inbox);
        self.held_bytes.fetch_add(record_bytes, Ordering::Relaxed);
        self.held_bytes.fetch_sub(shared_bytes, Ordering::Relaxed);
        self.own_added.fetch_add(record_bytes, Ordering::Relaxed);
        true
    }

    fn diverged(&self, db: u32, slot: usize, bytes: u64) {
        // Under the lock that `finish_slot` takes: a slot either has its writer's release
        // still to come (which will take these bytes along) or is written already (and
        // the value was shared with something else: nothing is held for the capture).
        let mut diverged = self.diverged.lock().unwrap();
        if diverged.written.contains(&(db, slot)) {
            return;
        }
        *diverged.bytes.entry((db, slot)).or_default() += bytes;
        self.own_added.fetch_add(bytes, Ordering::Relaxed);
    }

    fn own_bytes(&self) -> CaptureBytes {
        CaptureBytes {
            added: self.own_added.load(Ordering::Relaxed),
            released: self.own_released.load(Ordering::Relaxed),
        }
    }
}

impl JobShared {
    /// A writer is done with `captured`: what it held alone is released (it is dropped
    /// right after). Values the live dataset lets go of from now on are no longer
    /// counted for it.
    fn finish_slot(&self, captured: &Captured) {
        let key = (captured.db, captured.slot_index);
        let diverged = {
            let mut diverged = self.diverged.lock().unwrap();
            diverged.written.insert(key);
            diverged.bytes.remove(&key).unwrap_or(0)
        };
        self.own_released
            .fetch_add(captured.own_bytes + diverged, Ordering::Relaxed);
    }
}

/// What the job's thread does once every part file is written and synced: install them
/// (a manifest commit, a rename). Gets the part sizes; its error fails the job.
pub type Finisher<E> = Box<dyn FnOnce(&[u64]) -> Result<(), E> + Send>;

/// A description of the files of a background snapshot; `E` is the finisher's error, the
/// job's outcome's too.
pub struct JobSpec<E> {
    pub storage: Arc<dyn Storage>,
    /// One path per part, in part order.
    pub part_paths: Vec<PathBuf>,
    pub options: RdbWriterOptions,
    /// RDB, or commands (a log base with `aof-use-rdb-preamble no`: aux fields and
    /// `options`' other than the functions are not written then).
    pub form: PartForm,
    /// Aux fields of each part's own (its place in the set), after `options.extra_aux`;
    /// empty: none.
    pub part_aux: Vec<Vec<(bytes::Bytes, bytes::Bytes)>>,
    pub finisher: Finisher<E>,
    /// `rdb-key-save-delay`: microseconds to sleep after each key (tests only).
    pub key_delay_us: u64,
    pub pacing: Pacing,
    /// Wakes the event loop when the job is over.
    pub notify: Box<dyn Fn() + Send>,
}

/// The event loop's handle on a background snapshot whose finisher fails with `E`.
pub struct SnapshotJob<E = SnapshotError> {
    shared: Arc<JobShared>,
    outcome: Arc<OutcomeSlot<E>>,
    capture_closed: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where a background snapshot is, whatever its finisher: for throttling and INFO.
#[derive(Clone, Copy, Debug)]
pub struct JobProgress {
    /// Slots remain to be captured.
    pub capturing: bool,
    /// Background capture waits for the writers to drain their queues.
    pub throttled: bool,
    pub held_bytes: u64,
    pub keys_written: u64,
}

impl<E: From<SnapshotError> + Send + 'static> SnapshotJob<E> {
    /// Starts the writer threads and begins the capture: the snapshot is the dataset as
    /// it is now. Fails (capturing nothing) if the job's thread cannot be started.
    pub fn start(keyspace: &mut Keyspace, spec: JobSpec<E>) -> Result<Self, SnapshotError> {
        let parts = spec.part_paths.len();
        assert!((1..=SLOT_COUNT).contains(&parts));
        let shared = Arc::new(JobShared {
            queues: (0..parts).map(|_| PartQueue::default()).collect(),
            held_bytes: AtomicU64::new(0),
            own_added: AtomicU64::new(0),
            own_released: AtomicU64::new(0),
            diverged: Mutex::new(Diverged::default()),
            keys_written: AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
            form: spec.form,
        });
        let outcome = Arc::new(Mutex::new(None));
        let hints = size_hints(keyspace, parts);
        let (thread_shared, thread_outcome) = (shared.clone(), outcome.clone());
        let thread = std::thread::Builder::new()
            .name("snapshot".into())
            .spawn(move || run_job(thread_shared, thread_outcome, spec, hints))
            .map_err(SnapshotError::StartJob)?;
        // Same instant as far as clients can tell: no command runs between the caller's
        // start (the log switch) and this.
        keyspace.begin_capture(shared.clone());
        let mut job = SnapshotJob {
            shared,
            outcome,
            capture_closed: false,
            thread: Some(thread),
        };
        job.close_if_captured(keyspace);
        Ok(job)
    }
}

impl<E> SnapshotJob<E> {
    /// Background capture for one event-loop turn: a bounded batch of slots, while the
    /// writers keep up (`capturing` says whether work is left for later turns).
    pub fn step(&mut self, keyspace: &mut Keyspace, max_slots: usize) {
        if self.capture_closed {
            return;
        }
        if !self.throttled() {
            keyspace.capture_some(max_slots);
        }
        self.close_if_captured(keyspace);
    }

    /// Whether slots remain to be captured.
    pub fn capturing(&self) -> bool {
        !self.capture_closed
    }

    /// Whether background capture is waiting for the writers to drain their queues.
    pub fn throttled(&self) -> bool {
        self.shared.held_bytes.load(Ordering::Relaxed) >= QUEUED_BYTES_MAX
    }

    fn close_if_captured(&mut self, keyspace: &Keyspace) {
        if !self.capture_closed && keyspace.capture_remaining() == 0 {
            self.capture_closed = true;
            self.shared.close_all();
        }
    }

    /// The outcome once the job is over (the finisher included), handed over once: later
    /// calls get None.
    pub fn take_outcome(&self) -> Option<Result<JobOutcome, E>> {
        self.outcome.lock().unwrap().take()
    }

    /// Stops the job: the writers give up, the finisher does not run, the capture ends.
    pub fn cancel(&mut self, keyspace: &mut Keyspace) {
        keyspace.cancel_capture();
        self.shared.cancel_all();
    }

    /// Cancels the job and waits until its threads are gone (they touch no file after).
    pub fn cancel_and_wait(&mut self, keyspace: &mut Keyspace) {
        self.cancel(keyspace);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    pub fn held_bytes(&self) -> u64 {
        self.shared.held_bytes.load(Ordering::Relaxed)
    }

    pub fn keys_written(&self) -> u64 {
        self.shared.keys_written.load(Ordering::Relaxed)
    }

    pub fn progress(&self) -> JobProgress {
        JobProgress {
            capturing: self.capturing(),
            throttled: self.throttled(),
            held_bytes: self.held_bytes(),
            keys_written: self.keys_written(),
        }
    }
}

/// Per part, per database: (keys, keys with an expiry) at the start, for RESIZEDB.
fn size_hints(keyspace: &Keyspace, parts: usize) -> Vec<Vec<(u64, u64)>> {
    let mut hints = vec![vec![(0u64, 0u64); keyspace.dbs.len()]; parts];
    for (db_index, db) in keyspace.dbs.iter().enumerate() {
        for (slot_index, slot) in db.slots().iter().enumerate() {
            if !slot.is_empty() {
                let hint = &mut hints[part_of_slot(slot_index, parts)][db_index];
                hint.0 += slot.len() as u64;
                hint.1 += slot.volatile_count as u64;
            }
        }
    }
    hints
}

/// The job's thread: runs one writer thread per part, then the finisher.
fn run_job<E: From<SnapshotError>>(
    shared: Arc<JobShared>,
    slot: Arc<OutcomeSlot<E>>,
    spec: JobSpec<E>,
    hints: Vec<Vec<(u64, u64)>>,
) {
    let started = Instant::now();
    let storage = &*spec.storage;
    let results: Vec<Result<u64, SnapshotError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = spec
            .part_paths
            .iter()
            .zip(hints)
            .enumerate()
            .map(|(part, (path, hints))| {
                let shared = &shared;
                let mut options = spec.options.clone();
                if part > 0 {
                    // The libraries go into the first part only (Redis loads them once).
                    options.functions.clear();
                }
                if let Some(aux) = spec.part_aux.get(part) {
                    options.extra_aux.extend(aux.iter().cloned());
                }
                let delay = spec.key_delay_us;
                let pacing = &spec.pacing;
                let spawned = std::thread::Builder::new()
                    .name(format!("snapshot-part-{}", part + 1))
                    .spawn_scoped(scope, move || {
                        crate::crash_report::contain_panics();
                        let _cancel = CancelOnPanic(shared);
                        let target = PartTarget {
                            storage,
                            path,
                            options: &options,
                            pacing,
                            form: spec.form,
                        };
                        let result = write_part(shared, part, &target, &hints, delay);
                        if result.is_err() {
                            // One part failed: the snapshot is lost, stop the others.
                            shared.cancel_all();
                        }
                        result
                    });
                if spawned.is_err() {
                    shared.cancel_all();
                }
                spawned
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| match handle {
                Ok(handle) => handle.join().unwrap_or(Err(SnapshotError::WriterPanicked)),
                Err(e) => Err(SnapshotError::StartWriter(e)),
            })
            .collect()
    });
    let written = if shared.cancelled.load(Ordering::Acquire) {
        // Prefer the failure that caused the cancellation to the "cancelled" of the rest.
        let error = results
            .into_iter()
            .filter_map(Result::err)
            .find(|e| !matches!(e, SnapshotError::Cancelled))
            .unwrap_or(SnapshotError::Cancelled);
        Err(error)
    } else {
        results.into_iter().collect::<Result<Vec<u64>, _>>()
    };
    let mut outcome = written.map_err(E::from);
    if let Ok(part_bytes) = &outcome {
        storage.checkpoint(CrashPoint::SnapshotPartsWritten);
        if let Err(e) = (spec.finisher)(part_bytes) {
            outcome = Err(e);
        }
    }
    if outcome.is_err() {
        for path in &spec.part_paths {
            let _ = storage.remove_file(path);
        }
    }
    let outcome = outcome.map(|part_bytes| JobOutcome {
        part_bytes,
        keys: shared.keys_written.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    });
    *slot.lock().unwrap() = Some(outcome);
    (spec.notify)();
}

/// Snapshot writer threads run at this nice value, below the event loop: on a machine
/// with few cores the loop, which serves clients, wins the CPU. Single runs on 2 cores
/// under a saturating SET load (not kept as a benchmark) suggested throughput during a
/// compaction of 0.54 of the steady rate at nice 0 and 0.71 at 10; 19 gave no more and
/// held more memory longer. Worth a proper side-by-side sweep (issue 13).
const SNAPSHOT_THREAD_NICE: i32 = 10;

fn lower_thread_priority() {
    // SAFETY: setpriority on the calling thread's own id (Linux: per-thread nice). A
    // failure (e.g. a seccomp filter) leaves the thread at the normal priority.
    unsafe {
        libc::setpriority(
            libc::PRIO_PROCESS,
            libc::gettid() as libc::id_t,
            SNAPSHOT_THREAD_NICE,
        );
    }
}

/// Cancels the job when a part's writer unwinds from a panic (a contained thread, see
/// `crash_report`): otherwise its queue would fill with captures nobody takes, the
/// capture would wait on them, and the other parts would never see their queues close.
struct CancelOnPanic<'a>(&'a JobShared);

impl Drop for CancelOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.cancel_all();
        }
    }
}

/// While a writer thread writes its part, its buffers (the file's and the RDB writer's
/// staging) count as the capture's own memory: eviction leaves them out of its measure,
/// as it leaves out the captured slots (deleting keys cannot free them; counted, they had
/// a compaction evict a few megabytes of keys as it started).
struct PartBuffers<'a>(&'a JobShared);

impl PartBuffers<'_> {
    const BYTES: u64 = (PART_BUFFER_BYTES + crate::rdb::STAGING_BYTES) as u64;

    fn hold(shared: &JobShared) -> PartBuffers<'_> {
        shared.own_added.fetch_add(Self::BYTES, Ordering::Relaxed);
        PartBuffers(shared)
    }
}

impl Drop for PartBuffers<'_> {
    fn drop(&mut self) {
        self.0
            .own_released
            .fetch_add(Self::BYTES, Ordering::Relaxed);
    }
}

/// Ends the file (EOF, checksum), flushes and fsyncs it; returns its size.
fn finish_part(writer: PartWriter, path: &Path) -> Result<u64, SnapshotError> {
    let (file, size) = finish_writing(writer, path)?;
    sync_file(file, path)?;
    Ok(size)
}

/// Where and how one part is written.
struct PartTarget<'a> {
    storage: &'a dyn Storage,
    path: &'a Path,
    options: &'a RdbWriterOptions,
    pacing: &'a Pacing,
    form: PartForm,
}

impl JobShared {
    /// `rdb-key-save-delay`'s pause, cut short by a cancellation (Redis kills its child
    /// at once, whatever the delay: a SHUTDOWN or FLUSHALL must not wait for it). Returns
    /// false if the job was cancelled.
    fn sleep_unless_cancelled(&self, micros: u64) -> bool {
        const SLICE_US: u64 = 10_000;
        let mut left = micros;
        while left > 0 {
            if self.cancelled.load(Ordering::Acquire) {
                return false;
            }
            let slice = left.min(SLICE_US);
            std::thread::sleep(std::time::Duration::from_micros(slice));
            left -= slice;
        }
        !self.cancelled.load(Ordering::Acquire)
    }
}

/// One writer thread: serialises the captures of its part into its file.
fn write_part(
    shared: &JobShared,
    part: usize,
    target: &PartTarget<'_>,
    hints: &[(u64, u64)],
    key_delay_us: u64,
) -> Result<u64, SnapshotError> {
    lower_thread_priority();
    let PartTarget {
        storage,
        path,
        options,
        pacing,
        form,
    } = *target;
    let describe = write_error(path);
    // Declared first, dropped last: after the writer and its buffers.
    let _buffers = PartBuffers::hold(shared);
    let mut writer = create_part(storage, path, options, pacing, form)?;
    let mut announced = vec![false; hints.len()];
    let mut first = true;
    while let Some(captured) = shared.next(part) {
        crate::crash_report::inject(crate::crash_report::PanicPoint::SnapshotPart);
        if first {
            storage.checkpoint(CrashPoint::SnapshotFirstCaptureTaken);
            first = false;
        }
        let db = captured.db;
        if !announced[db as usize] {
            announced[db as usize] = true;
            let (keys, expires) = hints[db as usize];
            writer.select_db(db, keys, expires).map_err(describe)?;
        }
        // Keys already expired are left out of a dump: they are gone for every reader.
        // A base part keeps them: the slot was captured before they expired, and the log
        // after the base may still change them (a PERSIST made before the expiry, while
        // this slot waited in the queue); start-up loads them (`ExpiredKeys::Keep`). So
        // does a replica's snapshot, for the stream after it.
        let keep_expired = options.aof_base || options.keep_expired;
        let now_ms = crate::clock::unix_ms();
        let mut keys = 0;
        for entry in captured.slot.iter() {
            if keep_expired || !entry.is_expired(now_ms) {
                writer.write_entry(db, entry).map_err(describe)?;
                keys += 1;
                if key_delay_us > 0 && !shared.sleep_unless_cancelled(key_delay_us) {
                    break;
                }
            }
        }
        for entry in &captured.serialised {
            if keep_expired || !entry.is_expired(now_ms) {
                writer
                    .write_encoded_entry(db, &entry.record)
                    .map_err(describe)?;
                keys += 1;
            }
        }
        shared.keys_written.fetch_add(keys, Ordering::Relaxed);
        shared
            .held_bytes
            .fetch_sub(captured.bytes, Ordering::Relaxed);
        shared.finish_slot(&captured);
    }
    if shared.cancelled.load(Ordering::Acquire) {
        return Err(SnapshotError::Cancelled);
    }
    let size = finish_part(writer, path)?;
    storage.checkpoint(CrashPoint::SnapshotPartSynced);
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_slots_are_the_slots_part_of_slot_assigns() {
        for parts in [1, 2, 3, 7, 1000, SLOT_COUNT] {
            let mut next = 0;
            for part in 0..parts {
                let slots = part_slots(part, parts);
                assert_eq!(*slots.start(), next, "{part} of {parts}");
                assert!(slots.clone().all(|slot| part_of_slot(slot, parts) == part));
                next = slots.end() + 1;
            }
            assert_eq!(next, SLOT_COUNT);
        }
    }
}
