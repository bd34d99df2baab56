//! Counters for INFO stats, and Redis's instantaneous-rate sampler.

const SAMPLES: usize = 16;

/// A rate over the last few samples, as Redis's `trackInstantaneousMetric`.
#[derive(Default, Clone, Debug)]
pub struct RateSampler {
    last_ms: i64,
    last_value: u64,
    samples: [u64; SAMPLES],
    index: usize,
}

impl RateSampler {
    pub fn track(&mut self, now_ms: i64, value: u64) {
        let elapsed = now_ms - self.last_ms;
        if self.last_ms != 0 && elapsed > 0 {
            let delta = value.saturating_sub(self.last_value);
            self.samples[self.index] = delta * 1000 / elapsed as u64;
            self.index = (self.index + 1) % SAMPLES;
        }
        self.last_ms = now_ms;
        self.last_value = value;
    }

    pub fn per_second(&self) -> u64 {
        self.samples.iter().sum::<u64>() / SAMPLES as u64
    }
}

#[derive(Default, Clone, Debug)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub total_net_input_bytes: u64,
    pub total_net_output_bytes: u64,
    pub rejected_connections: u64,
    pub expired_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Collections a snapshot's capture shared, serialised into it before a write changed
    /// them in place (serialise before write) ...
    pub capture_serialised_values: u64,
    /// ... or copied whole by the write, because the capture was with its writer already.
    pub capture_copied_values: u64,
    /// Keys evicted under `maxmemory` (`engine::evict`).
    pub evicted_keys: u64,
    /// Errors this replica answered to its master's stream (Redis's
    /// `stat_unexpected_error_replies`: a divergence, or a bug).
    pub unexpected_error_replies: u64,
    /// Reply buffers the cron shrank and grew (`reply_buffer`).
    pub reply_buffer_shrinks: u64,
    pub reply_buffer_expands: u64,
    /// Time spent over `maxmemory` with eviction not done, before the current episode,
    /// and when the current one began (Redis's `stat_*_eviction_exceeded_time`).
    pub eviction_exceeded_total: std::time::Duration,
    pub eviction_exceeded_since: Option<std::time::Instant>,
    /// The most `used_memory` seen, sampled by the cron and by INFO (Redis samples it
    /// after each command); CONFIG RESETSTAT keeps it, as Redis does.
    pub used_memory_peak: u64,
    pub ops_rate: RateSampler,
    pub input_rate: RateSampler,
    pub output_rate: RateSampler,
}

impl Stats {
    /// Resets what CONFIG RESETSTAT resets (the rate samplers keep running).
    pub fn reset(&mut self) {
        let ops_rate = std::mem::take(&mut self.ops_rate);
        let input_rate = std::mem::take(&mut self.input_rate);
        let output_rate = std::mem::take(&mut self.output_rate);
        *self = Stats {
            used_memory_peak: self.used_memory_peak,
            ops_rate,
            input_rate,
            output_rate,
            ..Stats::default()
        };
    }

    pub fn sample(&mut self, now_ms: i64) {
        self.ops_rate.track(now_ms, self.total_commands_processed);
        self.input_rate.track(now_ms, self.total_net_input_bytes);
        self.output_rate.track(now_ms, self.total_net_output_bytes);
        self.used_memory_peak = self.used_memory_peak.max(allocated_bytes());
    }
}

/// jemalloc's allocated bytes (`used_memory`).
pub fn allocated_bytes() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64
}

/// jemalloc's allocated bytes (`used_memory`) and the process RSS.
pub fn memory_usage() -> (u64, u64) {
    let allocated = allocated_bytes();
    // SAFETY: sysconf takes a constant name and touches no memory of ours.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * page);
    (allocated, rss)
}

thread_local! {
    /// jemalloc's counters of the bytes this thread has allocated and freed, ever.
    static THREAD_COUNTERS: Option<(
        tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
        tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
    )> = tikv_jemalloc_ctl::thread::allocatedp::read()
        .ok()
        .zip(tikv_jemalloc_ctl::thread::deallocatedp::read().ok());
}

/// The bytes the calling thread has allocated minus those it has freed (whoever
/// allocated them), as jemalloc counts them: two loads, where `allocated_bytes` costs an
/// epoch refresh of every arena (microseconds). Its changes follow `allocated_bytes` for
/// what this thread does.
pub fn thread_net_allocated_bytes() -> i64 {
    THREAD_COUNTERS.with(|counters| {
        counters.map_or(0, |(allocated, deallocated)| {
            allocated.get() as i64 - deallocated.get() as i64
        })
    })
}
