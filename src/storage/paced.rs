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

/// How fast the background jobs' files may be written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rate {
    #[default]
    Unlimited,
    /// Bytes per second over all the files; never 0.
    BytesPerSecond(u64),
    /// Nothing is written until the rate changes (the foreground has no room to spare).
    Paused,
}

impl Rate {
    /// `aof-rewrite-max-rate`'s meaning of a number: 0 is no limit.
    pub fn from_config(bytes_per_second: u64) -> Rate {
        match bytes_per_second {
            0 => Rate::Unlimited,
            n => Rate::BytesPerSecond(n),
        }
    }

    /// The slower of two rates.
    pub fn min(self, other: Rate) -> Rate {
        match (self, other) {
            (Rate::Paused, _) | (_, Rate::Paused) => Rate::Paused,
            (Rate::Unlimited, r) | (r, Rate::Unlimited) => r,
            (Rate::BytesPerSecond(a), Rate::BytesPerSecond(b)) => Rate::BytesPerSecond(a.min(b)),
        }
    }

    // Kept in one atomic: 0 unlimited, u64::MAX paused, else bytes per second.
    fn encode(self) -> u64 {
        match self {
            Rate::Unlimited => 0,
            Rate::BytesPerSecond(n) => n.clamp(1, u64::MAX - 1),
            Rate::Paused => u64::MAX,
        }
    }

    fn decode(n: u64) -> Rate {
        match n {
            0 => Rate::Unlimited,
            u64::MAX => Rate::Paused,
            n => Rate::BytesPerSecond(n),
        }
    }
}

/// A byte rate shared by the threads of the background jobs: each write takes its bytes'
/// time slot on a common clock and sleeps until the slot comes. Unused time is not saved
/// up beyond a short burst, so a pause is not followed by a flood. The rate can change
/// while a job runs (CONFIG SET, the cron's pacer): it applies from the next write, and
/// a writer waiting (or paused) sees a change within `RATE_RECHECK`.
pub struct RateLimit {
    bytes_per_second: AtomicU64,
    next_free: Mutex<Instant>,
}

/// How far behind real time the shared clock may fall (the burst a pause allows).
const RATE_BURST: Duration = Duration::from_millis(50);

/// How often a waiting writer looks whether the rate has changed.
const RATE_RECHECK: Duration = Duration::from_millis(100);

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit::new(Rate::Unlimited)
    }
}

impl RateLimit {
    pub fn new(rate: Rate) -> RateLimit {
        RateLimit {
            bytes_per_second: AtomicU64::new(rate.encode()),
            next_free: Mutex::new(Instant::now()),
        }
    }

    pub fn set(&self, rate: Rate) {
        self.bytes_per_second
            .store(rate.encode(), Ordering::Relaxed);
    }

    pub fn get(&self) -> Rate {
        Rate::decode(self.bytes_per_second.load(Ordering::Relaxed))
    }

    /// Waits until `bytes` more may be written. A long wait (or a pause) is taken in short
    /// sleeps, so that a rate raised (or lifted) meanwhile takes effect at once.
    pub fn take(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let rate = loop {
            match self.get() {
                Rate::Unlimited => return,
                Rate::Paused => std::thread::sleep(RATE_RECHECK),
                Rate::BytesPerSecond(rate) => break rate,
            }
        };
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let now = Instant::now();
        let until = {
            let mut next_free = self.next_free.lock().unwrap();
            let start = (*next_free).max(now.checked_sub(RATE_BURST).unwrap_or(now));
            *next_free = start + cost;
            *next_free
        };
        while let Some(wait) = until.checked_duration_since(Instant::now() + RATE_BURST) {
            if self.get() != Rate::BytesPerSecond(rate) {
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
        let limit = RateLimit::new(Rate::BytesPerSecond(1_000_000));
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
        RateLimit::new(Rate::Unlimited).take(u64::MAX);
        // A writer waiting on a slow rate, or paused, goes on as soon as the limit is
        // lifted.
        for held in [Rate::BytesPerSecond(1), Rate::Paused] {
            let limit = Arc::new(RateLimit::new(held));
            let lift = {
                let limit = limit.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(200));
                    limit.set(Rate::Unlimited);
                })
            };
            limit.take(1_000_000); // 11 days at 1 byte/s
            lift.join().unwrap();
        }
    }
}
