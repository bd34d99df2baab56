//! The pace of the background jobs' writer threads: what the foreground can spare.
//!
//! A compaction (or BGSAVE) is background work: it should take what the clients leave,
//! not what it needs. Every cron tick the pacer looks at how busy the event loop was
//! since the last tick, and at what the running job costs, and sets the rate the writer
//! threads share (`storage::RateLimit`):
//!
//! 1. **Over a budget: full speed.** A slower job holds its captured values longer (the
//!    memory grown since it started: `MEMORY_BUDGET_*`) and lets the new log file grow
//!    (the bytes logged since it started: `LOG_BUDGET_*`). Past either, the job must end.
//! 2. **The loop busy: back off.** Busy for `BUSY_HIGH` of the tick or more, the rate
//!    drops by `BACK_OFF` each tick, down to a pause.
//! 3. **The loop with room: speed up.** Busy for less than `BUSY_LOW`, the rate grows by
//!    `BACK_OFF` each tick, up to full speed.
//!
//! So a job under a saturating read load waits (it costs nothing while it waits: reads
//! neither grow the log nor diverge from the capture) and finishes once the load stops;
//! under a saturating write load it goes as slowly as its budgets allow. The configured
//! `aof-rewrite-max-rate` caps whatever the pacer decides; `aof-rewrite-adaptive-rate no`
//! (the default until it is measured side by side on a quiet machine) turns the pacer off:
//! the writers then only yield the CPU by their nice value.
//!
//! The level is kept between jobs, so a job started while the loop is saturated starts
//! paused rather than at full speed for its first tick.

use crate::storage::Rate;
use std::time::{Duration, Instant};

/// The loop busy for this share of a tick or more: the writers back off.
const BUSY_HIGH: f64 = 0.85;
/// The loop busy for less than this share of a tick: the writers speed up.
const BUSY_LOW: f64 = 0.6;
/// The first limited rate below full speed, and the fastest before full speed again.
const RATE_START: u64 = 16 << 20;
/// Below this the writers pause.
const RATE_FLOOR: u64 = 256 << 10;
/// The factor of each step down or up.
const BACK_OFF: u64 = 4;
/// Memory grown since the job started that sends it to full speed: this share of the
/// memory in use when it started, at least `MEMORY_BUDGET_MIN`.
const MEMORY_BUDGET_SHARE: f64 = 0.04;
const MEMORY_BUDGET_MIN: u64 = 16 << 20;
/// Bytes logged since the job started that send it to full speed: as much as the memory
/// in use when it started (Redis's default automatic trigger, a log grown by 100 %, would
/// be due again), at least `LOG_BUDGET_MIN`.
const LOG_BUDGET_MIN: u64 = 64 << 20;

/// Where the pacer is between full speed and a pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Full,
    Limited(u64),
    Paused,
}

impl Level {
    fn slower(self) -> Level {
        match self {
            Level::Full => Level::Limited(RATE_START),
            Level::Limited(rate) if rate / BACK_OFF >= RATE_FLOOR => {
                Level::Limited(rate / BACK_OFF)
            }
            Level::Limited(_) | Level::Paused => Level::Paused,
        }
    }

    fn faster(self) -> Level {
        match self {
            Level::Paused => Level::Limited(RATE_FLOOR),
            Level::Limited(rate) if rate * BACK_OFF <= RATE_START => {
                Level::Limited(rate * BACK_OFF)
            }
            Level::Limited(_) | Level::Full => Level::Full,
        }
    }

    fn rate(self) -> Rate {
        match self {
            Level::Full => Rate::Unlimited,
            Level::Limited(rate) => Rate::BytesPerSecond(rate),
            Level::Paused => Rate::Paused,
        }
    }
}

/// What a tick measured.
pub(super) struct Signals<'a> {
    /// Time the loop spent waiting for events, in all (it only grows).
    pub loop_idle: Duration,
    /// Whether a background job is running.
    pub job_running: bool,
    /// Allocated bytes (`used_memory`); read only while a job runs.
    pub used_memory: &'a dyn Fn() -> u64,
    /// The log's size (`aof_current_size`).
    pub log_bytes: u64,
}

/// What the job cost when it started, for its budgets.
struct Baseline {
    used_memory: u64,
    log_bytes: u64,
}

pub(super) struct Pacer {
    level: Level,
    last_tick: Instant,
    idle_at_last_tick: Duration,
    baseline: Option<Baseline>,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer {
            level: Level::Full,
            last_tick: Instant::now(),
            idle_at_last_tick: Duration::ZERO,
            baseline: None,
        }
    }
}

impl Pacer {
    #[cfg(test)]
    fn level(&self) -> Level {
        self.level
    }

    /// One cron tick: the rate the writers may use until the next.
    pub fn tick(&mut self, signals: &Signals<'_>) -> Rate {
        let now = Instant::now();
        let wall = now.duration_since(self.last_tick);
        let idle = signals.loop_idle.saturating_sub(self.idle_at_last_tick);
        (self.last_tick, self.idle_at_last_tick) = (now, signals.loop_idle);
        let busy = if wall.is_zero() {
            0.0
        } else {
            1.0 - (idle.as_secs_f64() / wall.as_secs_f64()).min(1.0)
        };
        if !signals.job_running {
            self.baseline = None;
        } else if self.over_budget(signals) {
            self.level = Level::Full;
            return self.level.rate();
        }
        if busy >= BUSY_HIGH {
            self.level = self.level.slower();
        } else if busy < BUSY_LOW {
            self.level = self.level.faster();
        }
        self.level.rate()
    }

    fn over_budget(&mut self, signals: &Signals<'_>) -> bool {
        let used_memory = (signals.used_memory)();
        let baseline = self.baseline.get_or_insert(Baseline {
            used_memory,
            log_bytes: signals.log_bytes,
        });
        let memory_budget =
            ((baseline.used_memory as f64 * MEMORY_BUDGET_SHARE) as u64).max(MEMORY_BUDGET_MIN);
        let log_budget = baseline.used_memory.max(LOG_BUDGET_MIN);
        used_memory.saturating_sub(baseline.used_memory) > memory_budget
            || signals.log_bytes.saturating_sub(baseline.log_bytes) > log_budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks with the loop busy (no idle time) or idle (idle all the time since the
    /// last), 1 GB in use.
    fn tick(pacer: &mut Pacer, busy: bool, job_running: bool, log_bytes: u64) -> Rate {
        tick_with_memory(pacer, busy, job_running, log_bytes, 1 << 30)
    }

    fn tick_with_memory(
        pacer: &mut Pacer,
        busy: bool,
        job_running: bool,
        log_bytes: u64,
        used_memory: u64,
    ) -> Rate {
        let idle = if busy {
            pacer.idle_at_last_tick
        } else {
            pacer.idle_at_last_tick + Duration::from_secs(3600)
        };
        pacer.tick(&Signals {
            loop_idle: idle,
            job_running,
            used_memory: &|| used_memory,
            log_bytes,
        })
    }

    #[test]
    fn a_busy_loop_pauses_the_writers_and_room_lets_them_go_again() {
        let mut pacer = Pacer::default();
        let mut rates = Vec::new();
        for _ in 0..5 {
            rates.push(tick(&mut pacer, true, true, 0));
        }
        assert_eq!(
            rates,
            [
                Rate::BytesPerSecond(16 << 20),
                Rate::BytesPerSecond(4 << 20),
                Rate::BytesPerSecond(1 << 20),
                Rate::BytesPerSecond(256 << 10),
                Rate::Paused,
            ]
        );
        let mut rates = Vec::new();
        for _ in 0..5 {
            rates.push(tick(&mut pacer, false, true, 0));
        }
        assert_eq!(
            rates,
            [
                Rate::BytesPerSecond(256 << 10),
                Rate::BytesPerSecond(1 << 20),
                Rate::BytesPerSecond(4 << 20),
                Rate::BytesPerSecond(16 << 20),
                Rate::Unlimited,
            ]
        );
    }

    #[test]
    fn a_job_over_its_log_budget_goes_at_full_speed_however_busy_the_loop() {
        let mut pacer = Pacer::default();
        for _ in 0..5 {
            tick(&mut pacer, true, true, 0);
        }
        assert_eq!(pacer.level(), Level::Paused);
        // 1 GB in use at the start: up to 1 GB logged since is within the budget.
        assert_eq!(tick(&mut pacer, true, true, 1 << 30), Rate::Paused);
        assert_eq!(tick(&mut pacer, true, true, (1 << 30) + 1), Rate::Unlimited);
        // The next job has budgets of its own, from its own start.
        assert_eq!(
            tick(&mut pacer, true, false, 2 << 30),
            Rate::BytesPerSecond(16 << 20)
        );
        assert_eq!(
            tick(&mut pacer, true, true, 2 << 30),
            Rate::BytesPerSecond(4 << 20)
        );
    }

    #[test]
    fn a_job_over_its_memory_budget_goes_at_full_speed_until_back_under_it() {
        let mut pacer = Pacer::default();
        let gb = 1u64 << 30;
        for _ in 0..5 {
            tick_with_memory(&mut pacer, true, true, 0, gb);
        }
        assert_eq!(pacer.level(), Level::Paused);
        // 4 % of 1 GB may be held; a byte more and the job must end.
        let budget = gb / 25;
        let over = |pacer: &mut Pacer, extra| tick_with_memory(pacer, true, true, 0, gb + extra);
        assert_eq!(over(&mut pacer, budget - (1 << 20)), Rate::Paused);
        assert_eq!(over(&mut pacer, budget + (1 << 20)), Rate::Unlimited);
        assert_eq!(over(&mut pacer, budget / 2), Rate::BytesPerSecond(16 << 20));
    }
}
