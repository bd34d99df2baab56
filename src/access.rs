//! A key's access field, Redis's `robj->lru`: what the approximated LRU and LFU eviction
//! policies (`engine::evict`) and OBJECT IDLETIME / FREQ read.
//!
//! 24 bits, read one of two ways depending on `maxmemory-policy`:
//!
//! - **LRU** (every policy but the two LFU ones): the LRU clock when the key was last
//!   accessed — Unix seconds modulo 2^24 (Redis's `LRU_CLOCK`, resolution 1 s, wrapping
//!   every 194 days).
//! - **LFU** (`allkeys-lfu`, `volatile-lfu`): 16 bits of the last decrement time, in
//!   minutes modulo 2^16, above an 8-bit logarithmic access counter. A new value starts
//!   at `LFU_INIT_VAL`; an access decays the counter by one per `lfu-decay-time` minutes
//!   elapsed, then increments it with probability 1 / ((counter − 5) · `lfu-log-factor` + 1)
//!   (Redis's `LFUDecrAndReturn` and `LFULogIncr`).
//!
//! Switching the policy at run time reinterprets the bits, as in Redis ("LRU and LFU data
//! will take some time to adjust").
//!
//! Where the bits live: in the `Value` (each variant carries an `Access`), as Redis keeps
//! them in the value object. A `Value` is a one-byte tag and an 8-byte pointer, so 7
//! bytes of it were padding: rustc lays a variant's `u32` beside the tag, and the value
//! stays 16 bytes and the entry 40 (both asserted in `keyspace`). The key had no room (a
//! 15-byte inline key leaves 3 spare bits) and the expiry none either (any i64 is a valid
//! PEXPIREAT time). A snapshot's capture copies entries, so updating the field never
//! touches what a snapshot thread reads.
//!
//! The policy and the LFU parameters are process-wide, like the encoding thresholds
//! (`types::limits`): values are built on loading threads too. So is the clock, a cached
//! reading of Unix time that the engine refreshes at each command and the cron every tick
//! (Redis's `server.lruclock` and `server.unixtime`), so an access reads no clock.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};

/// Redis's LRU_CLOCK_MAX: the LRU clock wraps at 2^24 seconds.
pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;
/// Redis's LFU_INIT_VAL: a new key's counter, so that it survives a few evictions before
/// it has had a chance to be read.
pub const LFU_INIT_VAL: u8 = 5;
const LFU_MINUTES_MAX: u32 = 65535;

static LFU: AtomicBool = AtomicBool::new(false);
static LFU_LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static LFU_DECAY_TIME: AtomicU32 = AtomicU32::new(1);
/// Cached Unix time in milliseconds; 0 until first set (then the clock is read).
static NOW_MS: AtomicI64 = AtomicI64::new(0);

/// Makes these the rules of every access from now on (start-up, CONFIG SET).
pub fn configure(lfu: bool, lfu_log_factor: u32, lfu_decay_time: u32) {
    LFU.store(lfu, Ordering::Relaxed);
    LFU_LOG_FACTOR.store(lfu_log_factor, Ordering::Relaxed);
    LFU_DECAY_TIME.store(lfu_decay_time, Ordering::Relaxed);
}

/// Whether the fields are LFU counters (an LFU policy is selected).
pub fn is_lfu() -> bool {
    LFU.load(Ordering::Relaxed)
}

/// Refreshes the cached clock (the engine before each command, the cron each tick).
pub fn set_now(unix_ms: i64) {
    NOW_MS.store(unix_ms, Ordering::Relaxed);
}

fn now_ms() -> i64 {
    match NOW_MS.load(Ordering::Relaxed) {
        0 => crate::clock::unix_ms(),
        now => now,
    }
}

/// The cached Unix time in ms (refreshed before each command and each cron tick): for
/// decisions that need a clock per command but not a fresh one (eviction's measure).
pub fn cached_now_ms() -> i64 {
    now_ms()
}

/// Redis's `getLRUClock`: Unix seconds modulo 2^24.
fn lru_clock() -> u32 {
    (now_ms() / 1000) as u32 & LRU_CLOCK_MAX
}

/// Redis's `LFUGetTimeInMinutes`: Unix minutes modulo 2^16.
fn lfu_minutes() -> u32 {
    (now_ms() / 1000 / 60) as u32 & LFU_MINUTES_MAX
}

/// A key's access field (24 bits used). `Default` is the zero field, for values that are
/// stamped before they are stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// A new value's field (Redis's `createObject`): the clock now, or the LFU counter at
    /// its initial value.
    pub fn new() -> Access {
        if is_lfu() {
            Access(lfu_minutes() << 8 | LFU_INIT_VAL as u32)
        } else {
            Access(lru_clock())
        }
    }

    /// Redis's `objectSetLRUOrLFU` for RESTORE's IDLETIME and FREQ: under an LFU policy a
    /// field with counter `frequency`, under any other one last accessed `idle_seconds`
    /// ago; a new value's field when the option the policy reads was not given.
    pub fn restored(idle_seconds: Option<u64>, frequency: Option<u8>) -> Access {
        match (is_lfu(), idle_seconds, frequency) {
            (true, _, Some(counter)) => Access(lfu_minutes() << 8 | counter as u32),
            (false, Some(idle), _) => {
                let now = lru_clock() as i64;
                let mut then = now - idle.min(i64::MAX as u64) as i64;
                if then < 0 {
                    // The clock wraps: half-way round keeps the idle time high for long.
                    then = (now + (LRU_CLOCK_MAX / 2) as i64) % LRU_CLOCK_MAX as i64;
                }
                Access(then as u32)
            }
            _ => Access::new(),
        }
    }

    /// An access by a command's lookup (Redis's `lookupKey` without LOOKUP_NOTOUCH).
    pub fn touch(&mut self) {
        if is_lfu() {
            let counter = log_increment(self.frequency());
            self.0 = lfu_minutes() << 8 | counter as u32;
        } else {
            self.0 = lru_clock();
        }
    }

    /// Redis's `estimateObjectIdleTime`: milliseconds since the last access, at the
    /// clock's resolution (the field read as an LRU clock).
    pub fn idle_ms(self) -> u64 {
        let now = lru_clock();
        let then = self.0 & LRU_CLOCK_MAX;
        let seconds = if now >= then {
            now - then
        } else {
            now + (LRU_CLOCK_MAX - then)
        };
        seconds as u64 * 1000
    }

    /// Redis's `LFUDecrAndReturn`: the counter, decayed by the periods of
    /// `lfu-decay-time` minutes elapsed since its last decrement (the field read as LFU;
    /// it is not changed: only an access stores the decay).
    pub fn frequency(self) -> u8 {
        let last_decrement = (self.0 >> 8) & LFU_MINUTES_MAX;
        let counter = (self.0 & 255) as u8;
        let decay_time = LFU_DECAY_TIME.load(Ordering::Relaxed);
        // lfu-decay-time 0: the counter never decays.
        let periods = lfu_elapsed_minutes(last_decrement)
            .checked_div(decay_time)
            .unwrap_or(0);
        counter.saturating_sub(periods.min(255) as u8)
    }

    /// The bits as stored (DEBUG OBJECT's `lru`, tests).
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// Redis's `LFUTimeElapsed`: minutes since `then`, the clock wrapping at most once.
fn lfu_elapsed_minutes(then: u32) -> u32 {
    let now = lfu_minutes();
    if now >= then {
        now - then
    } else {
        LFU_MINUTES_MAX - then + now
    }
}

/// Redis's `LFULogIncr`: the greater the counter, the less likely an access increments
/// it; 255 saturates.
fn log_increment(counter: u8) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let factor = LFU_LOG_FACTOR.load(Ordering::Relaxed) as f64;
    let probability = 1.0 / (base * factor + 1.0);
    if rand::random::<f64>() < probability {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The process-wide policy is shared by every test of the crate that builds values;
    // these tests keep to the default (LRU) or compute with explicit fields.

    #[test]
    fn lru_idle_time_wraps_like_redis() {
        let now = lru_clock();
        let recent = Access(now);
        assert!(recent.idle_ms() < 2000);
        let older = Access(now.wrapping_sub(100) & LRU_CLOCK_MAX);
        assert!((100_000..102_000).contains(&older.idle_ms()));
    }

    #[test]
    fn lfu_counter_decays_per_period_and_saturates() {
        let minutes = lfu_minutes();
        let fresh = Access(minutes << 8 | 20);
        assert_eq!(fresh.frequency(), 20);
        let ten_minutes_ago = Access((minutes.wrapping_sub(10) & LFU_MINUTES_MAX) << 8 | 20);
        assert_eq!(ten_minutes_ago.frequency(), 10);
        let long_ago = Access((minutes.wrapping_sub(1000) & LFU_MINUTES_MAX) << 8 | 20);
        assert_eq!(long_ago.frequency(), 0);
        assert_eq!(log_increment(255), 255);
        // At or below LFU_INIT_VAL an access always counts.
        assert_eq!(log_increment(3), 4);
        assert_eq!(log_increment(LFU_INIT_VAL), LFU_INIT_VAL + 1);
    }
}
