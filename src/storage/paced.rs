//! Background files written at the rate the machine can spare: a snapshot part goes to disk
//! a few megabytes at a time instead of as one pile of dirty pages at its final fsync
//! (Redis's `rdb-save-incremental-fsync` / `aof-rewrite-incremental-fsync`), and at most
//! at `aof-rewrite-max-rate` bytes per second over all of a job's files.
//!
//! Why: on one disk, the log's fsync queues behind every dirty page of the file system's
//! journal; a gigabyte of part pages flushed at once stalls it (and the replies under
//! `always`) for seconds. With writeback started every chunk and waited for one chunk
//! later, a part never holds more than about two chunks of dirty pages.

use super::StorageFile;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Writeback is started every this many bytes (Redis's `REDIS_AUTOSYNC_BYTES`).
pub const WRITEBACK_CHUNK_BYTES: u64 = 4 << 20;

/// A byte rate shared by the threads of the background jobs: each write takes its bytes'
/// time slot on a common clock and sleeps until the slot comes. Unused time is not saved
/// up beyond a short burst, so a pause is not followed by a flood. The rate can change
/// while a job runs (CONFIG SET): it applies from the next write.
pub struct RateLimit {
    bytes_per_second: AtomicU64,
    next_free: Mutex<Instant>,
}

/// How far behind real time the shared clock may fall (the burst a pause allows).
const RATE_BURST: Duration = Duration::from_millis(50);

/// How often a waiting writer looks whether the rate has changed.
const RATE_RECHECK: Duration = Duration::from_millis(100);

impl Default for RateLimit {
    /// No limit.
    fn default() -> Self {
        RateLimit::new(0)
    }
}

impl RateLimit {
    /// `0` means no limit.
    pub fn new(bytes_per_second: u64) -> RateLimit {
        RateLimit {
            bytes_per_second: AtomicU64::new(bytes_per_second),
            next_free: Mutex::new(Instant::now()),
        }
    }

    pub fn set(&self, bytes_per_second: u64) {
        self.bytes_per_second
            .store(bytes_per_second, Ordering::Relaxed);
    }

    /// Waits until `bytes` more may be written. A long wait is taken in short sleeps, so
    /// that a rate raised (or lifted) meanwhile takes effect at once.
    pub fn take(&self, bytes: u64) {
        let rate = self.bytes_per_second.load(Ordering::Relaxed);
        if rate == 0 || bytes == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let now = Instant::now();
        let until = {
            let mut next_free = self.next_free.lock().unwrap();
            let start = (*next_free).max(now.checked_sub(RATE_BURST).unwrap_or(now));
            *next_free = start + cost;
            *next_free
        };
        while let Some(wait) = until.checked_duration_since(Instant::now() + RATE_BURST) {
            if self.bytes_per_second.load(Ordering::Relaxed) != rate {
                // The rate changed: the clock restarts from now at the new rate.
                *self.next_free.lock().unwrap() = Instant::now();
                return;
            }
            std::thread::sleep(wait.min(RATE_RECHECK));
        }
    }
}

/// A file written with incremental writeback and an optional shared rate limit.
pub struct PacedFile {
    file: Box<dyn StorageFile>,
    incremental: bool,
    limit: Option<Arc<RateLimit>>,
    written: u64,
    /// Writeback was started up to here.
    started: u64,
    /// Writeback was waited for up to here.
    waited: u64,
}

impl PacedFile {
    pub fn new(
        file: Box<dyn StorageFile>,
        incremental: bool,
        limit: Option<Arc<RateLimit>>,
    ) -> PacedFile {
        PacedFile {
            file,
            incremental,
            limit,
            written: 0,
            started: 0,
            waited: 0,
        }
    }

    pub fn into_inner(self) -> Box<dyn StorageFile> {
        self.file
    }

    /// Starts writeback of the chunk just completed and waits for the one before it.
    fn write_back(&mut self) -> io::Result<()> {
        if self.written - self.started < WRITEBACK_CHUNK_BYTES {
            return Ok(());
        }
        if self.started > self.waited {
            self.file
                .write_back(self.waited, self.started - self.waited, true)?;
            self.waited = self.started;
        }
        self.file
            .write_back(self.started, self.written - self.started, false)?;
        self.started = self.written;
        Ok(())
    }
}

impl io::Write for PacedFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if let Some(limit) = &self.limit {
            limit.take(bytes.len() as u64);
        }
        self.file.append(bytes)?;
        self.written += bytes.len() as u64;
        if self.incremental {
            self.write_back()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_holds_writes_to_their_rate_on_a_shared_clock() {
        // 1 MB/s: ten writes of 100 KB take their slots one after the other, the last
        // ending a second after the clock started, and the writer sleeps for all but the
        // burst of it. (A lower bound: a slow machine only makes it longer.)
        let before = Instant::now();
        let limit = RateLimit::new(1_000_000);
        for _ in 0..10 {
            limit.take(100_000);
        }
        let elapsed = before.elapsed();
        let clock = limit.next_free.lock().unwrap().duration_since(before);
        assert!(
            elapsed >= Duration::from_secs(1) - RATE_BURST * 2,
            "{elapsed:?}"
        );
        assert!(clock >= Duration::from_secs(1), "{clock:?}");
        assert!(clock < Duration::from_secs(1) + RATE_BURST, "{clock:?}");
        // No limit: no wait, whatever the size.
        RateLimit::new(0).take(u64::MAX);
        // A writer waiting on a slow rate goes on as soon as the limit is lifted.
        let limit = Arc::new(RateLimit::new(1));
        let lift = {
            let limit = limit.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                limit.set(0);
            })
        };
        limit.take(1_000_000); // 11 days at 1 byte/s
        lift.join().unwrap();
    }
}
