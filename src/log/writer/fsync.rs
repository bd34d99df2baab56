//! The log's fsync thread: `fdatasync` of what the writer thread has written, beside it
//! rather than in its path, so that writes (and under `everysec` the replies, which wait
//! only for the write) go on while a sync runs. Under `always` it pipelines group commit:
//! the writer writes the next batches while the current ones are being synced, and the
//! next sync covers everything written meanwhile.
//!
//! It owns nothing but a second handle on the log file and the decision of *when* to sync
//! (every time there is something to sync under `always`, once a second under `everysec` —
//! or sooner, once 64 MB are unsynced, which bounds what the writer keeps in memory —,
//! never under `no`). Under `everysec` it also starts the writeback of every
//! few megabytes written (`sync_file_range`), so that the once-a-second fsync finds little
//! left to write and its latency — and the disk's queue — stay short. Everything else stays with the writer thread: failures
//! and their recovery, rotations, SHUTDOWN's sync. For those the writer *pauses* the fsync
//! thread (waits for a running sync to return and keeps it from starting another), does
//! the work itself with its own handle, and resumes it with the new marks.

use super::{Shared, SyncEvent};
use crate::config::FsyncPolicy;
use crate::storage::{StorageFile, WRITEBACK_CHUNK_BYTES};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Under `everysec`, a sync starts once this much is written and unsynced, without waiting
/// for the second: the writer keeps every unsynced batch in memory (to rewrite it if the
/// fsync fails), and at a saturating load a second of log is hundreds of megabytes.
const EVERYSEC_UNSYNCED_MAX_BYTES: u64 = 64 << 20;
/// The least `unsynced_max_for` sets, so that a small `maxmemory` does not turn
/// `everysec` into a sync per batch.
const EVERYSEC_UNSYNCED_MIN_BYTES: u64 = 128 << 10;
/// Under `maxmemory`, `everysec` leaves at most this share of it unsynced.
const EVERYSEC_UNSYNCED_SHARE: u64 = 128;

/// How much `everysec` may leave written and unsynced (so kept in the writer's memory)
/// under `maxmemory` (0: no limit). Eviction leaves those bytes out of its measure, as
/// Redis leaves out its AOF buffer; Redis's buffer is one event-loop turn of writes, but
/// the writer's is up to a second of them, so under a limit it is kept to 1/128 of it
/// (with `buffered_max_for`, the writer holds under 2 % of `maxmemory`, about Redis's own
/// overshoot; at 32 MB and a saturating write rate that is a sync every 256 KB, about
/// 100 a second, in the fsync thread: clients do not wait for them).
pub(super) fn unsynced_max_for(maxmemory: u64) -> u64 {
    if maxmemory == 0 {
        return EVERYSEC_UNSYNCED_MAX_BYTES;
    }
    (maxmemory / EVERYSEC_UNSYNCED_SHARE)
        .clamp(EVERYSEC_UNSYNCED_MIN_BYTES, EVERYSEC_UNSYNCED_MAX_BYTES)
}

/// What the writer may hold in all (queued, and written but unsynced) under `maxmemory`
/// before the event loop stops reading clients (`LogWriter::is_backlogged`): twice what
/// `everysec` leaves unsynced, so a disk slower than the writes cannot grow it. None
/// without a limit (then only the queue is bounded).
pub(super) fn buffered_max_for(maxmemory: u64) -> Option<u64> {
    (maxmemory != 0).then(|| 2 * unsynced_max_for(maxmemory))
}

/// A point in the log file: its length there and the last batch ending there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Mark {
    pub len: u64,
    pub seq: u64,
}

/// Whether the fsync thread may run.
enum Handle {
    /// Its handle on the current log file: it syncs when the policy says so.
    Running(Box<dyn StorageFile>),
    /// A sync (or a writeback) is under way, since then: the handle is on the thread's stack.
    Syncing { since: Instant },
    /// The writer thread has the file to itself (a failure's recovery, a rotation, a
    /// requested sync): no sync starts until it resumes the thread.
    Paused(Box<dyn StorageFile>),
    /// Only while the lock is held, when the handle moves from one state to another.
    InTransit,
}

struct Slot {
    handle: Handle,
    /// What the writer has written: a sync covers up to here.
    written: Mark,
    /// What the last successful sync covered.
    synced: Mark,
    /// Writeback was started up to this length (`everysec`).
    written_back: u64,
    policy: FsyncPolicy,
    /// `everysec` syncs early once this much is unsynced (`unsynced_max_for`).
    unsynced_max: u64,
    /// When the last sync started (`everysec` counts its second from there, as Redis does
    /// from queueing its background fsync).
    last_start: Instant,
    /// The last sync failed; the writer clears it when it has recovered.
    failed: bool,
    stop: bool,
}

/// The writer thread's side of the fsync thread.
pub(super) struct FsyncThread {
    slot: Arc<(Mutex<Slot>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FsyncThread {
    /// Starts the thread with a second handle on the log file, whose first `start.len`
    /// bytes are durable.
    pub fn start(
        file: Box<dyn StorageFile>,
        start: Mark,
        policy: FsyncPolicy,
        shared: Arc<Shared>,
    ) -> FsyncThread {
        let slot = Arc::new((
            Mutex::new(Slot {
                handle: Handle::Running(file),
                written: start,
                synced: start,
                written_back: start.len,
                policy,
                unsynced_max: EVERYSEC_UNSYNCED_MAX_BYTES,
                last_start: Instant::now(),
                failed: false,
                stop: false,
            }),
            Condvar::new(),
        ));
        let thread_slot = slot.clone();
        let thread = std::thread::Builder::new()
            .name("log-fsync".into())
            .spawn(move || run(&thread_slot, &shared))
            .expect("spawn log fsync thread");
        FsyncThread {
            slot,
            thread: Some(thread),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.0.lock().unwrap()
    }

    /// Hands over what is written so far; the thread syncs it when the policy says so.
    pub fn written(&self, written: Mark, policy: FsyncPolicy, unsynced_max: u64) {
        let mut slot = self.lock();
        // The thread waits without a deadline only when it had nothing to sync.
        let was_idle = slot.written == slot.synced || slot.policy != policy;
        slot.written = written;
        slot.policy = policy;
        slot.unsynced_max = unsynced_max;
        let write_back = write_back_due(&slot) || too_much_unsynced(&slot);
        drop(slot);
        if policy == FsyncPolicy::Always || was_idle || write_back {
            self.slot.1.notify_all();
        }
    }

    /// What the last successful sync covered, and whether the last sync failed.
    pub fn progress(&self) -> (Mark, bool) {
        let slot = self.lock();
        (slot.synced, slot.failed)
    }

    /// How long the running sync has been running, if one is.
    pub fn running_for(&self) -> Option<Duration> {
        match self.lock().handle {
            Handle::Syncing { since } => Some(since.elapsed()),
            _ => None,
        }
    }

    /// The slot once no sync (or writeback) is running.
    fn lock_idle(&self) -> MutexGuard<'_, Slot> {
        let mut slot = self.lock();
        while matches!(slot.handle, Handle::Syncing { .. }) {
            slot = self.slot.1.wait(slot).unwrap();
        }
        slot
    }

    /// Waits until no sync is running; returns what the last one covered.
    pub fn wait_idle(&self) -> (Mark, bool) {
        let slot = self.lock_idle();
        (slot.synced, slot.failed)
    }

    /// Waits for a running sync to return and keeps another from starting; returns what
    /// the last one covered and whether it failed.
    pub fn pause(&self) -> (Mark, bool) {
        let mut slot = self.lock_idle();
        slot.handle = match std::mem::replace(&mut slot.handle, Handle::InTransit) {
            Handle::Running(file) | Handle::Paused(file) => Handle::Paused(file),
            Handle::Syncing { .. } | Handle::InTransit => unreachable!("waited for the sync"),
        };
        (slot.synced, slot.failed)
    }

    /// Lets the thread run again from `durable` (everything written is durable there), on
    /// `file` if the log moved to a new file.
    pub fn resume(&self, durable: Mark, file: Option<Box<dyn StorageFile>>) {
        let mut slot = self.lock();
        let paused = match std::mem::replace(&mut slot.handle, Handle::InTransit) {
            Handle::Paused(file) => file,
            _ => panic!("resume without pause"),
        };
        slot.handle = Handle::Running(file.unwrap_or(paused));
        slot.written = durable;
        slot.synced = durable;
        slot.written_back = durable.len;
        slot.failed = false;
        drop(slot);
        self.slot.1.notify_all();
    }
}

impl Drop for FsyncThread {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.lock().stop = true;
            self.slot.1.notify_all();
            let _ = thread.join();
        }
    }
}

/// What the thread has to do next: a sync now, a writeback now, or a sync after a wait, or
/// nothing until something changes.
enum Due {
    Sync,
    WriteBack,
    In(Duration),
    Never,
}

fn due(slot: &Slot) -> Due {
    let unsynced = slot.written.len > slot.synced.len;
    if !unsynced || slot.failed || !matches!(slot.handle, Handle::Running(_)) {
        return Due::Never;
    }
    match slot.policy {
        FsyncPolicy::Always => Due::Sync,
        FsyncPolicy::EverySec => {
            let since = slot.last_start.elapsed();
            if since >= Duration::from_secs(1) || too_much_unsynced(slot) {
                Due::Sync
            } else if write_back_due(slot) {
                Due::WriteBack
            } else {
                Due::In(Duration::from_secs(1) - since)
            }
        }
        FsyncPolicy::No => Due::Never,
    }
}

/// Under `everysec`, more is written and unsynced than the writer should keep in memory for
/// a rewrite after a failed fsync: sync now rather than at the second.
fn too_much_unsynced(slot: &Slot) -> bool {
    slot.written.len >= slot.synced.len + slot.unsynced_max
}

/// A chunk written under `everysec` whose writeback is not started yet.
fn write_back_due(slot: &Slot) -> bool {
    slot.policy == FsyncPolicy::EverySec
        && slot.written.len >= slot.written_back.max(slot.synced.len) + WRITEBACK_CHUNK_BYTES
}

fn run(slot_and_signal: &(Mutex<Slot>, Condvar), shared: &Shared) {
    let (mutex, signal) = slot_and_signal;
    let mut slot = mutex.lock().unwrap();
    loop {
        if slot.stop {
            return;
        }
        match due(&slot) {
            Due::Never => {
                slot = signal.wait(slot).unwrap();
                continue;
            }
            Due::In(wait) => {
                slot = signal.wait_timeout(slot, wait).unwrap().0;
                continue;
            }
            Due::WriteBack => {
                let from = slot.written_back.max(slot.synced.len);
                let to = slot.written.len;
                slot.written_back = to;
                let Handle::Running(mut file) = std::mem::replace(
                    &mut slot.handle,
                    Handle::Syncing {
                        since: Instant::now(),
                    },
                ) else {
                    unreachable!("due() checked the handle");
                };
                drop(slot);
                // Starting writeback only queues I/O (it may block while the disk's queue
                // is full: hence outside the lock). A failure loses nothing — the fsync
                // reports what matters — so it is only logged.
                if let Err(error) = file.write_back(from, to - from, false) {
                    tracing::debug!("log writeback hint failed: {error}");
                }
                slot = mutex.lock().unwrap();
                slot.handle = Handle::Running(file);
                drop(slot);
                signal.notify_all();
                slot = mutex.lock().unwrap();
                continue;
            }
            Due::Sync => {}
        }
        let target = slot.written;
        let started = Instant::now();
        let Handle::Running(mut file) =
            std::mem::replace(&mut slot.handle, Handle::Syncing { since: started })
        else {
            unreachable!("due() checked the handle");
        };
        slot.last_start = started;
        drop(slot);

        crate::crash_report::inject(crate::crash_report::PanicPoint::Fsync);
        let result = file.sync_data();

        slot = mutex.lock().unwrap();
        slot.handle = Handle::Running(file);
        let event = match result {
            Ok(()) => {
                slot.synced = target;
                SyncEvent::Synced(target.seq)
            }
            Err(error) => {
                slot.failed = true;
                SyncEvent::Failed(error)
            }
        };
        drop(slot);
        // The writer (to drop what is durable, or recover) and the loop (to release the
        // replies held for these batches) learn of it at once.
        shared.sync_event(event);
        signal.notify_all();
        slot = mutex.lock().unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{SimulatedStorage, Storage};

    fn slot(policy: FsyncPolicy, unsynced: u64) -> Slot {
        let storage = SimulatedStorage::new();
        let file = storage.create(std::path::Path::new("log")).unwrap();
        let synced = Mark { len: 100, seq: 1 };
        Slot {
            handle: Handle::Running(file),
            written: Mark {
                len: synced.len + unsynced,
                seq: 2,
            },
            synced,
            written_back: synced.len,
            policy,
            unsynced_max: EVERYSEC_UNSYNCED_MAX_BYTES,
            last_start: Instant::now(),
            failed: false,
            stop: false,
        }
    }

    /// Within the second after a sync started: `everysec` waits for the second, starts
    /// writeback of every 4 MB meanwhile, and syncs at once past 64 MB unsynced.
    #[test]
    fn everysec_syncs_at_the_second_or_at_64_mb() {
        let mb = 1 << 20;
        assert!(matches!(due(&slot(FsyncPolicy::EverySec, mb)), Due::In(_)));
        assert!(matches!(
            due(&slot(FsyncPolicy::EverySec, 5 * mb)),
            Due::WriteBack
        ));
        assert!(matches!(
            due(&slot(FsyncPolicy::EverySec, 64 * mb)),
            Due::Sync
        ));
        let mut late = slot(FsyncPolicy::EverySec, 1);
        late.last_start -= Duration::from_secs(1);
        assert!(matches!(due(&late), Due::Sync));
        assert!(matches!(due(&slot(FsyncPolicy::Always, 1)), Due::Sync));
        assert!(matches!(due(&slot(FsyncPolicy::No, 64 * mb)), Due::Never));
        assert!(matches!(due(&slot(FsyncPolicy::EverySec, 0)), Due::Never));
        let mut failed = slot(FsyncPolicy::Always, 1);
        failed.failed = true;
        assert!(matches!(due(&failed), Due::Never));
    }

    /// Under `maxmemory`, `everysec` keeps 1/128 of it unsynced at most (128 KB to 64 MB).
    #[test]
    fn everysec_syncs_early_under_a_memory_limit() {
        let mb = 1 << 20;
        assert_eq!(unsynced_max_for(0), 64 * mb);
        assert_eq!(unsynced_max_for(100 * mb), 100 * mb / 128);
        assert_eq!(unsynced_max_for(mb), 128 << 10);
        assert_eq!(unsynced_max_for(64 << 30), 64 * mb);
        assert_eq!(buffered_max_for(0), None);
        assert_eq!(buffered_max_for(100 * mb), Some(2 * 100 * mb / 128));
        let mut limited = slot(FsyncPolicy::EverySec, mb);
        assert!(!matches!(due(&limited), Due::Sync));
        limited.unsynced_max = unsynced_max_for(100 * mb);
        assert!(matches!(due(&limited), Due::Sync));
    }
}
