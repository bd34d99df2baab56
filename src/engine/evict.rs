//! Eviction: keeping the dataset under `maxmemory`, as Redis 7.0's `evict.c` does.
//!
//! Owns the measure eviction goes by, the choice and deletion of keys under the eight
//! `maxmemory-policy`s, the out-of-memory state that refuses `denyoom` commands (the check
//! itself is one line of `Engine::refusal`), and the figures INFO shows of all that.
//!
//! Reached from the engine only, at the places Redis calls `performEvictions`: before each
//! client command (`Engine::execute`, Redis's `processCommand`), and from the cron when a
//! command's share of the work left the memory still over the limit (Redis's eviction
//! time event; Tessera gives it up to `CRON_BUDGET` per tick). A share is bounded by
//! `maxmemory-eviction-tenacity` (Redis's `evictionTimeLimitUs`).
//!
//! **The measure.** Used memory is jemalloc's allocated bytes (INFO `used_memory`), minus
//! what Redis's `freeMemoryGetNotCountedMemory` leaves out for it, which is for Tessera:
//! - this turn's records not yet handed to the log writer, and the replicas' output
//!   buffers: a DEL logged for an eviction must not call for more evictions;
//! - the memory a running snapshot's capture holds alone (`keyspace::CaptureBytes`:
//!   copied slot tables, records serialised before a write, values the live dataset has
//!   let go of since, the part files' write buffers): deleting live keys cannot free
//!   it, so counting it would evict the dataset while a compaction or BGSAVE runs. Redis
//!   does not count a fork's copy-on-write either (it is not even in its `used_memory`);
//!   Tessera knows these bytes and shows them (`mem_not_counted_for_evict`,
//!   `tessera_capture_own_bytes`).
//!
//! Client buffers count, as in Redis (which has `maxmemory-clients` for them; Tessera
//! does not). So do the batches the log writer holds, queued or kept until their fsync,
//! unlike Redis's AOF buffer: Redis's holds one turn of writes, the writer's up to a
//! second of them, so left out they let `used_memory` stand 1 % over the limit where
//! Redis's stands a few tenths over (the eviction benchmark). Counting them cannot feed
//! itself: under `everysec` the writer syncs once 1/128 of `maxmemory` is unsynced, and
//! the event loop stops reading clients while it holds twice that, so they cost the
//! dataset at most that share.
//!
//! jemalloc's total costs an epoch refresh (tens of microseconds: it merges
//! every arena's statistics; read every millisecond, it took 5 % of the server's CPU in
//! the eviction benchmark), so it is read at most every 5 ms of the cached clock (no
//! clock read per command); in between, the event loop's own allocations move the
//! measure (jemalloc's per-thread counters: two loads), and the capture's additions,
//! made on the loop, are left out as they happen. What other threads free (the log
//! writer, the snapshot writers) shows at the next reading, with the matching drop of
//! what is not counted.
//!
//! **The choice.** LRU, LFU and volatile-ttl sample `maxmemory-samples` keys per
//! database (only keys with an expiry for `volatile-*`) into a pool of the 16 best
//! candidates kept across calls (Redis's `evictionPoolPopulate`): the longest idle, the
//! least frequently used, the nearest expiry. The best that still exists goes. The random
//! policies take a random key from the next database in turn. A key is deleted as an
//! expired one is: a DEL in the effects stream (so the log replays to the same keys),
//! WATCH touched, keyspace event `evicted`; blocked clients are not woken.

use super::{Engine, Host};
use crate::config::{Config, EvictionPolicy};
use crate::keyspace::{CaptureBytes, Entry, Key, Keyspace};
use crate::log::writer::BufferGauge;
use crate::notify::EventClass;
use std::time::{Duration, Instant};

/// Redis's EVPOOL_SIZE: candidates kept across calls.
const POOL_SIZE: usize = 16;
/// How often the measure reads jemalloc's total, in ms of the cached clock (see the module
/// doc).
const RESYNC_INTERVAL_MS: i64 = 5;
/// Time the cron may spend evicting per tick when commands left work (the active expiry
/// cycle's budget).
const CRON_BUDGET: Duration = Duration::from_millis(25);
/// Keys evicted between looks at the clock (Redis's 16).
const KEYS_PER_CLOCK_CHECK: u64 = 16;

/// What an eviction pass found (Redis's EVICT_OK / EVICT_RUNNING / EVICT_FAIL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// Under the limit (or no limit).
    Ok,
    /// Over the limit, keys evicted, time up: the cron goes on.
    Running,
    /// Over the limit and nothing (more) may go: `denyoom` commands are refused.
    Fail,
}

/// The used memory as eviction sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// jemalloc's allocated bytes (estimated between readings).
    pub used: u64,
    /// What eviction leaves out (`mem_not_counted_for_evict`).
    pub not_counted: u64,
}

impl Memory {
    pub fn counted(self) -> u64 {
        self.used.saturating_sub(self.not_counted)
    }
}

struct Candidate {
    /// Higher is a better candidate: idle time, 255 − frequency, or nearness of expiry.
    score: u64,
    db: usize,
    key: Key,
}

/// The last reading of jemalloc's total, and what the cheap estimate starts from.
#[derive(Default)]
struct Reading {
    /// When, by the cached clock (`access::cached_now_ms`: no clock read per command).
    at_ms: Option<i64>,
    allocated: u64,
    /// The event loop thread's net allocation then.
    thread_net: i64,
    not_counted: u64,
    capture: Option<(usize, CaptureBytes)>,
}

/// Eviction's state, held in `ServerState` (INFO reads it).
#[derive(Default)]
pub struct Eviction {
    /// Ascending by score: the best candidate last.
    pool: Vec<Candidate>,
    /// The random policies' database, in turn.
    next_db: usize,
    /// The last pass ran out of time over the limit: the cron goes on (Redis's
    /// `isEvictionProcRunning`).
    unfinished: bool,
    /// The last pass before a client command found nothing more to evict (Redis's
    /// `pre_command_oom_state`): `denyoom` commands are refused.
    pub out_of_memory: bool,
    reading: Reading,
    /// The log writer's memory (None while the log is off).
    log_gauge: Option<BufferGauge>,
    /// jemalloc's allocated bytes when the server started (INFO `used_memory_startup`).
    pub startup_bytes: u64,
}

impl Eviction {
    pub fn new() -> Eviction {
        Eviction {
            startup_bytes: crate::stats::allocated_bytes(),
            ..Eviction::default()
        }
    }

    /// The log writer whose buffers are not counted (the server, once the log is open).
    pub fn set_log_gauge(&mut self, gauge: BufferGauge) {
        self.log_gauge = Some(gauge);
    }

    /// The log is off: no writer holds batches.
    pub fn clear_log_gauge(&mut self) {
        self.log_gauge = None;
    }

    /// What is not counted now, exactly: `pending_log_bytes` (this turn's records not yet
    /// handed over, the replicas' outputs) and the capture's own memory.
    fn not_counted_now(&self, pending_log_bytes: u64, capture: Option<CaptureBytes>) -> u64 {
        pending_log_bytes + capture.map_or(0, CaptureBytes::held)
    }

    /// The batches the log writer holds (counted: see the module doc), for INFO and
    /// MEMORY STATS.
    pub fn log_writer_bytes(&self) -> u64 {
        self.log_gauge.as_ref().map_or(0, BufferGauge::bytes)
    }

    /// The memory now, exact.
    pub fn memory_exact(&self, keyspace: &Keyspace, pending_log_bytes: u64) -> Memory {
        Memory {
            used: crate::stats::allocated_bytes(),
            not_counted: self.not_counted(keyspace, pending_log_bytes),
        }
    }

    /// What eviction leaves out now (INFO `mem_not_counted_for_evict`);
    /// `pending_log_bytes`: the effects not yet handed to the log writer.
    pub fn not_counted(&self, keyspace: &Keyspace, pending_log_bytes: u64) -> u64 {
        let capture = keyspace.capture_bytes().map(|(_, bytes)| bytes);
        self.not_counted_now(pending_log_bytes, capture)
    }

    /// Milliseconds spent over the limit with eviction unfinished: in all, and in the
    /// episode going on now (INFO `total_` / `current_eviction_exceeded_time`).
    pub fn exceeded_ms(stats: &crate::stats::Stats) -> (u128, u128) {
        let current = stats
            .eviction_exceeded_since
            .map_or(Duration::ZERO, |since| since.elapsed());
        (
            (stats.eviction_exceeded_total + current).as_millis(),
            current.as_millis(),
        )
    }

    /// The memory now, read from jemalloc at most once per `RESYNC_INTERVAL_MS` and
    /// estimated in between (see the module doc).
    fn memory(&mut self, keyspace: &Keyspace, pending_log_bytes: u64) -> Memory {
        let now = crate::access::cached_now_ms();
        let capture = keyspace.capture_bytes();
        let reading = &self.reading;
        let same_capture = reading.capture.map(|(id, _)| id) == capture.map(|(id, _)| id);
        let recent = reading
            .at_ms
            .is_some_and(|at| (at..at + RESYNC_INTERVAL_MS).contains(&now));
        if recent && same_capture {
            let thread_delta = crate::stats::thread_net_allocated_bytes() - reading.thread_net;
            let capture_added = match (reading.capture, capture) {
                (Some((_, then)), Some((_, now))) => now.added.saturating_sub(then.added),
                _ => 0,
            };
            return Memory {
                used: (reading.allocated as i64 + thread_delta).max(0) as u64,
                not_counted: reading.not_counted + capture_added,
            };
        }
        let not_counted = self.not_counted_now(pending_log_bytes, capture.map(|(_, b)| b));
        self.reading = Reading {
            at_ms: Some(now),
            allocated: crate::stats::allocated_bytes(),
            thread_net: crate::stats::thread_net_allocated_bytes(),
            not_counted,
            capture,
        };
        Memory {
            used: self.reading.allocated,
            not_counted,
        }
    }

    /// Offers a sampled entry to the pool (Redis's insertion: a candidate worse than
    /// every one of a full pool is dropped; otherwise it takes its place by score and the
    /// worst goes).
    fn offer(&mut self, score: u64, db: usize, entry: &Entry) {
        if self.pool.iter().any(|c| c.db == db && c.key == entry.key) {
            return;
        }
        let place = self.pool.partition_point(|c| c.score < score);
        if place == 0 && self.pool.len() == POOL_SIZE {
            return;
        }
        self.pool.insert(
            place,
            Candidate {
                score,
                db,
                key: entry.key.clone(),
            },
        );
        if self.pool.len() > POOL_SIZE {
            self.pool.remove(0);
        }
    }
}

/// Whether a command may grow memory, so is refused over the limit with nothing left to
/// evict: flagged `denyoom`, or a script (EVAL, FCALL and their kin) whose flags say it
/// may write and do not allow OOM (Redis's `getCommandFlags`).
pub fn denies_memory(
    scripting: &crate::scripting::Scripting,
    spec: &crate::commands::CommandSpec,
    argv: &[&[u8]],
) -> bool {
    spec.has(crate::commands::flags::DENYOOM)
        || crate::scripting::declares_denyoom(scripting, spec, argv)
}

/// Whether EXEC must be refused for memory: over the limit with nothing to evict, its
/// queue holds a command that `denies_memory` (Redis's EXEC with `mstate.cmd_flags`).
pub fn exec_denied(server: &crate::commands::ServerState, queued: &[Vec<Vec<u8>>]) -> bool {
    if !server.eviction.out_of_memory || server.config.memory_bytes_max == 0 {
        return false;
    }
    let registry = crate::commands::global_registry();
    queued.iter().any(|command| {
        let argv: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        registry
            .resolve(&argv)
            .is_some_and(|(spec, _)| denies_memory(&server.scripting, spec, &argv))
    })
}

/// Applies the configuration's access rules (start-up, CONFIG SET).
pub fn apply_config(config: &Config) {
    crate::access::configure(
        config.eviction_policy.is_lfu(),
        config.lfu_log_factor,
        config.lfu_decay_time,
    );
}

/// Redis's `evictionTimeLimitUs`: tenacity 0..10 is 0..500 µs, linearly; then 15 % more
/// per step (about 2 minutes at 99); 100 is no limit.
fn time_limit(tenacity: u32) -> Duration {
    match tenacity {
        0..=10 => Duration::from_micros(50 * tenacity as u64),
        11..=99 => Duration::from_micros((500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64),
        _ => Duration::MAX,
    }
}

/// How good a candidate an entry is under `policy` (higher goes first).
fn score(policy: EvictionPolicy, entry: &Entry) -> u64 {
    match policy {
        EvictionPolicy::VolatileTtl => u64::MAX - entry.expire_at_ms.max(0) as u64,
        policy if policy.is_lfu() => 255 - entry.value.access().frequency() as u64,
        _ => entry.value.access().idle_ms(),
    }
}

impl Engine {
    /// Before a client's command: evicts if over `maxmemory`, and notes whether
    /// `denyoom` commands must be refused (Redis's `processCommand`).
    pub(super) fn evict_before_command(&mut self, host: &mut dyn Host) {
        // Timed only when both the limit and the latency monitor are on (the hot path).
        let config = &self.state.config;
        let timed = config.memory_bytes_max != 0 && config.latency_monitor_threshold_ms != 0;
        let started = timed.then(Instant::now);
        let out_of_memory = self.perform_evictions(host) == Evicted::Fail;
        self.state.eviction.out_of_memory = out_of_memory;
        if let Some(started) = started {
            self.latency_event("eviction-cycle", started);
        }
    }

    /// The cron's share (Redis's eviction time event): while a pass left the memory over
    /// the limit, passes go on, up to `CRON_BUDGET`.
    pub fn eviction_cron(&mut self, host: &mut dyn Host) {
        let started = Instant::now();
        while self.state.eviction.unfinished && started.elapsed() < CRON_BUDGET {
            if self.perform_evictions(host) != Evicted::Running {
                self.state.eviction.unfinished = false;
            }
        }
    }

    /// After CONFIG: the access rules, and a new `maxmemory` is enforced from the next
    /// cron tick even if no command comes (Redis starts its eviction time event).
    pub(super) fn eviction_after_config(&mut self, previous_max: u64) {
        apply_config(&self.state.config);
        let max = self.state.config.memory_bytes_max;
        if max != 0 && max != previous_max {
            let memory = self.state.eviction.memory_exact(&self.keyspace, 0);
            if max < memory.counted() {
                tracing::warn!(
                    "WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than the current memory usage ({}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.",
                    memory.counted()
                );
            }
            self.state.eviction.unfinished = true;
        }
    }

    /// Buffers eviction does not count besides the log writer's: this turn's records
    /// and the replicas' buffers (`BufferMemory::replicas`).
    pub(super) fn buffers_not_counted(&self) -> u64 {
        self.effects.buffer.capacity() as u64 + self.state.replication.not_counted_for_eviction()
    }

    /// The memory as eviction sees it, exactly (INFO).
    pub fn eviction_memory(&self) -> Memory {
        self.state
            .eviction
            .memory_exact(&self.keyspace, self.buffers_not_counted())
    }

    /// Redis's `performEvictions`: while the counted memory is over `maxmemory`, evicts
    /// the best candidate under the policy, until enough is freed or the time limit of
    /// `maxmemory-eviction-tenacity` is reached.
    pub(super) fn perform_evictions(&mut self, host: &mut dyn Host) -> Evicted {
        if self.state.persistence.loading.is_some() {
            return Evicted::Ok; // Redis evicts nothing while loading (and counts no time).
        }
        let pause = &mut self.state.pause;
        if pause.maybe_active() && pause.freezes_dataset(crate::clock::unix_ms()) {
            return Evicted::Ok; // CLIENT PAUSE keeps the dataset as it is (Redis too)
        }
        if self.state.replication.is_replica() {
            // `replica-ignore-maxmemory yes`: a replica's dataset is its master's.
            return Evicted::Ok;
        }
        let max = self.state.config.memory_bytes_max;
        let outcome = if max == 0 {
            Evicted::Ok
        } else {
            let pending = self.buffers_not_counted();
            let counted = self
                .state
                .eviction
                .memory(&self.keyspace, pending)
                .counted();
            if counted <= max {
                Evicted::Ok
            } else if self.state.config.eviction_policy == EvictionPolicy::NoEviction {
                Evicted::Fail
            } else {
                self.evict(counted - max, host)
            }
        };
        let stats = &mut self.state.stats;
        match (outcome, stats.eviction_exceeded_since) {
            (Evicted::Ok, Some(since)) => {
                stats.eviction_exceeded_total += since.elapsed();
                stats.eviction_exceeded_since = None;
            }
            (Evicted::Running | Evicted::Fail, None) => {
                stats.eviction_exceeded_since = Some(Instant::now());
            }
            _ => {}
        }
        outcome
    }

    /// Evicts until `to_free` bytes are freed, nothing is left to evict, or time is up.
    fn evict(&mut self, to_free: u64, host: &mut dyn Host) -> Evicted {
        let limit = time_limit(self.state.config.eviction_tenacity);
        let started = Instant::now();
        let mut freed: i64 = 0;
        let mut keys = 0u64;
        while freed < to_free as i64 {
            let Some((db, key)) = self.pick() else {
                return Evicted::Fail;
            };
            freed += self.delete_evicted(db, &key, host);
            keys += 1;
            if keys.is_multiple_of(KEYS_PER_CLOCK_CHECK) && started.elapsed() > limit {
                self.state.eviction.unfinished = true;
                return Evicted::Running;
            }
        }
        Evicted::Ok
    }

    /// The next key to evict under the policy; None if no key may go.
    fn pick(&mut self) -> Option<(usize, Key)> {
        let policy = self.state.config.eviction_policy;
        let volatile = policy.volatile_only();
        if matches!(
            policy,
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom
        ) {
            let eviction = &mut self.state.eviction;
            let count = self.keyspace.dbs.len();
            for _ in 0..count {
                eviction.next_db = (eviction.next_db + 1) % count;
                let db = &self.keyspace.dbs[eviction.next_db];
                let mut picked = None;
                db.sample(1, volatile, rand::random, |entry| {
                    picked = Some(entry.key.clone())
                });
                if let Some(key) = picked {
                    return Some((eviction.next_db, key));
                }
            }
            return None;
        }
        let samples = self.state.config.eviction_samples as usize;
        loop {
            let mut candidates = 0;
            for (index, db) in self.keyspace.dbs.iter().enumerate() {
                let keys = if volatile {
                    db.volatile_len()
                } else {
                    db.len()
                };
                if keys == 0 {
                    continue;
                }
                candidates += keys;
                let eviction = &mut self.state.eviction;
                db.sample(samples, volatile, rand::random, |entry| {
                    eviction.offer(score(policy, entry), index, entry)
                });
            }
            if candidates == 0 {
                return None;
            }
            // From the best down: a candidate deleted (or made persistent) since it was
            // sampled is a ghost, skipped.
            while let Some(candidate) = self.state.eviction.pool.pop() {
                let exists = self.keyspace.dbs[candidate.db]
                    .get(&candidate.key)
                    .is_some_and(|entry| !volatile || entry.has_expiry());
                if exists {
                    return Some((candidate.db, candidate.key));
                }
            }
        }
    }

    /// Deletes an evicted key as an expired one is deleted (`Ctx::expire_if_needed_in`,
    /// `engine::expire`): a DEL logged, WATCH touched, `evicted` raised, tracking clients
    /// told. Returns the
    /// bytes it freed: what the deletion released on this thread, plus what it left to a
    /// snapshot's capture alone (no longer counted). The DEL's own bytes are not part of
    /// it (Redis's rule too: they are log buffers, freed later).
    fn delete_evicted(&mut self, db: usize, key: &[u8], host: &mut dyn Host) -> i64 {
        let capture_added = |keyspace: &Keyspace| {
            keyspace
                .capture_bytes()
                .map_or(0, |(_, bytes)| bytes.added as i64)
        };
        let net_before = crate::stats::thread_net_allocated_bytes();
        let capture_before = capture_added(&self.keyspace);
        drop(self.keyspace.dbs[db].remove(key));
        let freed = net_before - crate::stats::thread_net_allocated_bytes()
            + (capture_added(&self.keyspace) - capture_before);
        self.state.stats.evicted_keys += 1;
        self.state.dirty += 1;
        // Before a client's command its session is out of the table: what is due to it
        // waits with its reply (`Origin`), as for any write.
        let origin = &mut self.origin;
        crate::notify::keyspace_event(
            self.state.config.notify_keyspace_events,
            &self.state.pubsub,
            EventClass::Evicted,
            "evicted",
            key,
            db,
            &mut |id, message| {
                crate::tracking::Origin::route(origin.as_mut(), host, id, message);
            },
        );
        self.effects.record(db, &[b"DEL", key]);
        self.state.watches.touch(db, key, false);
        // A client blocked in XREADGROUP on it is told (Redis's `signalDeletedKeyAsReady`).
        self.state.blocked.signal(db, key);
        if self.state.tracking.watches_changes() {
            self.state
                .tracking
                .key_changed(key, None, None, &mut |id, message| {
                    crate::tracking::Origin::route(origin.as_mut(), host, id, message)
                });
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenacity_is_redis_time_limit() {
        assert_eq!(time_limit(0), Duration::ZERO);
        assert_eq!(time_limit(10), Duration::from_micros(500));
        assert_eq!(time_limit(11), Duration::from_micros(575));
        assert!(time_limit(99) > Duration::from_secs(100));
        assert_eq!(time_limit(100), Duration::MAX);
    }
}
