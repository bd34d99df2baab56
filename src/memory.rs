//! What the operator reads about memory (MEMORY USAGE, STATS, DOCTOR, MALLOC-STATS,
//! PURGE): a key's footprint estimated from Tessera's own structures, the breakdown of
//! the process's memory under Redis's field names (Redis's `getMemoryOverheadData`), the
//! doctor's checks on it, and jemalloc's statistics text and purge.
//!
//! The numbers are Tessera's: its entries, slot tables and encodings, counted in
//! jemalloc's size classes (`types::memory`). Redis reports other numbers for the same
//! data; the field names, their order and their meaning are Redis's. The handlers
//! (argument parsing, replies) are `commands::memory`.

use crate::keyspace::{Db, Entry, Value};
use crate::types::memory::{allocation, arc};
use crate::types::{Hash, List, Set, Stream, ZSet};
use std::ffi::{CStr, c_char, c_void};

/// The bytes `entry` takes (MEMORY USAGE): its place in its slot's table (a bucket and
/// its control byte), its boxed entry (key handle, value handle, expiry: Redis's
/// `dictEntry` and `robj`), the key's bytes if they do not fit inline, and the value,
/// a collection measured on `samples` of its elements (or nodes) and scaled to all.
pub fn key_usage(entry: &Entry, samples: usize) -> usize {
    let in_table = size_of::<Box<Entry>>() + 1;
    let boxed = allocation(size_of::<Entry>());
    let key = allocation(entry.key.heap_len());
    let value = match &entry.value {
        Value::String(s, _) => allocation(s.heap_bytes()),
        Value::List(l, _) => arc::<List>() + l.memory_usage(samples),
        Value::Hash(h, _) => arc::<Hash>() + h.memory_usage(samples),
        Value::Set(s, _) => arc::<Set>() + s.memory_usage(samples),
        Value::ZSet(z, _) => arc::<ZSet>() + z.memory_usage(samples),
        Value::Stream(s, _) => {
            // The groups are counted whole, as Redis's `objectComputeSize` does.
            arc::<Stream>() + s.memory_usage(samples) + s.groups.memory_usage()
        }
    };
    in_table + boxed + key + value
}

/// A database's table overhead (MEMORY STATS `overhead.hashtable.main`): its array of
/// slots, each slot's table (buckets and control bytes) and the boxed entries. Expiry
/// times live in the entries: Tessera has no expires table (`overhead.hashtable.expires`
/// is 0).
pub fn database_overhead(db: &Db) -> u64 {
    let slots = db.slots();
    if slots.is_empty() {
        return 0;
    }
    let array = allocation(size_of_val(slots));
    let tables: usize = slots
        .iter()
        .map(|slot| allocation(slot.table.allocation_size()))
        .sum();
    let entries = db.len() * allocation(size_of::<Entry>());
    (array + tables + entries) as u64
}

/// jemalloc's own view (Redis's `allocator.*`): bytes allocated, in active pages, and
/// resident; read after an epoch refresh.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allocator {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
}

impl Allocator {
    pub fn read() -> Allocator {
        use tikv_jemalloc_ctl::{epoch, stats};
        let _ = epoch::advance();
        Allocator {
            allocated: stats::allocated::read().unwrap_or(0) as u64,
            active: stats::active::read().unwrap_or(0) as u64,
            resident: stats::resident::read().unwrap_or(0) as u64,
        }
    }
}

/// What MEMORY STATS reports and MEMORY DOCTOR judges, gathered at one moment (Redis's
/// `redisMemOverhead`).
#[derive(Clone, Debug, Default)]
pub struct Overview {
    pub peak_allocated: u64,
    /// jemalloc's allocated bytes (INFO `used_memory`).
    pub total_allocated: u64,
    /// What was allocated when the server started (INFO `used_memory_startup`).
    pub startup_allocated: u64,
    /// The clients' input and output buffers (CLIENT LIST's `tot-mem`, summed).
    pub clients_normal: u64,
    pub clients: usize,
    /// The log's buffers: this turn's records and the batches the writer holds.
    pub aof_buffer: u64,
    pub lua_caches: u64,
    pub scripts: usize,
    pub functions_caches: u64,
    /// What a running compaction or BGSAVE holds alone (INFO `tessera_capture_own_bytes`):
    /// overhead with no field of its own.
    pub capture_own: u64,
    /// (database index, table overhead) of each database holding keys.
    pub databases: Vec<(usize, u64)>,
    pub keys: u64,
    pub allocator: Allocator,
    pub process_rss: u64,
}

/// Redis's MEMORY DOCTOR speaks only past this much allocated memory.
const DOCTOR_MIN_BYTES: u64 = 5 * 1024 * 1024;
/// The doctor's thresholds (Redis's): a ratio is a problem past it and past 10 MB.
const PROBLEM_BYTES: i64 = 10 * 1024 * 1024;
const CLIENT_BUFFERS_BYTES_MAX: u64 = 200 * 1024;
const CACHED_SCRIPTS_MAX: usize = 1000;

impl Overview {
    pub fn overhead_total(&self) -> u64 {
        self.startup_allocated
            + self.clients_normal
            + self.aof_buffer
            + self.lua_caches
            + self.functions_caches
            + self.capture_own
            + self.databases.iter().map(|(_, bytes)| bytes).sum::<u64>()
    }

    /// What the server allocated beyond its start (1 at least, as Redis divides by it).
    fn net_usage(&self) -> u64 {
        self.total_allocated
            .saturating_sub(self.startup_allocated)
            .max(1)
    }

    pub fn dataset(&self) -> u64 {
        self.total_allocated.saturating_sub(self.overhead_total())
    }

    pub fn dataset_percentage(&self) -> f64 {
        self.dataset() as f64 * 100.0 / self.net_usage() as f64
    }

    pub fn peak_percentage(&self) -> f64 {
        self.total_allocated as f64 * 100.0 / self.peak_allocated.max(1) as f64
    }

    pub fn bytes_per_key(&self) -> u64 {
        self.net_usage().checked_div(self.keys).unwrap_or(0)
    }

    /// Bytes in jemalloc's active pages per byte allocated, and the difference.
    pub fn allocator_fragmentation(&self) -> (f64, i64) {
        ratio(self.allocator.active, self.allocator.allocated)
    }

    /// Resident bytes per byte in active pages, and the difference.
    pub fn allocator_rss(&self) -> (f64, i64) {
        ratio(self.allocator.resident, self.allocator.active)
    }

    /// The process's RSS per byte jemalloc holds resident, and the difference.
    pub fn rss_overhead(&self) -> (f64, i64) {
        ratio(self.process_rss, self.allocator.resident)
    }

    /// The process's RSS per byte allocated, and the difference.
    pub fn fragmentation(&self) -> (f64, i64) {
        ratio(self.process_rss, self.total_allocated)
    }
}

/// `a / b` (0 when `b` is) and `a - b`.
fn ratio(a: u64, b: u64) -> (f64, i64) {
    let quotient = if b == 0 { 0.0 } else { a as f64 / b as f64 };
    (quotient, a as i64 - b as i64)
}

/// What MEMORY DOCTOR can find (Redis's checks, less the one of the replicas' buffers,
/// whose output limit bounds them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    BigPeak,
    HighFragmentation,
    HighAllocatorFragmentation,
    HighAllocatorRss,
    HighProcessRss,
    BigClientBuffers,
    ManyScripts,
}

/// The doctor's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diagnosis {
    /// Too little memory in use to judge anything.
    Empty,
    Healthy,
    Issues(Vec<Issue>),
}

pub fn diagnose(overview: &Overview) -> Diagnosis {
    if overview.total_allocated < DOCTOR_MIN_BYTES {
        return Diagnosis::Empty;
    }
    let past = |(ratio, bytes): (f64, i64), limit: f64| ratio > limit && bytes > PROBLEM_BYTES;
    let average_client = overview.clients_normal / overview.clients.max(1) as u64;
    let issues: Vec<Issue> = [
        (
            Issue::BigPeak,
            overview.peak_allocated as f64 / overview.total_allocated as f64 > 1.5,
        ),
        (
            Issue::HighFragmentation,
            past(overview.fragmentation(), 1.4),
        ),
        (
            Issue::HighAllocatorFragmentation,
            past(overview.allocator_fragmentation(), 1.1),
        ),
        (Issue::HighAllocatorRss, past(overview.allocator_rss(), 1.1)),
        (Issue::HighProcessRss, past(overview.rss_overhead(), 1.1)),
        (
            Issue::BigClientBuffers,
            average_client > CLIENT_BUFFERS_BYTES_MAX,
        ),
        (Issue::ManyScripts, overview.scripts > CACHED_SCRIPTS_MAX),
    ]
    .into_iter()
    .filter_map(|(issue, found)| found.then_some(issue))
    .collect();
    if issues.is_empty() {
        Diagnosis::Healthy
    } else {
        Diagnosis::Issues(issues)
    }
}

/// MEMORY DOCTOR's text. The empty and healthy verdicts are Redis's own sentences (a
/// script may look for them); each issue is explained in Tessera's terms.
pub fn doctor_report(diagnosis: &Diagnosis) -> String {
    match diagnosis {
        Diagnosis::Empty => "Hi Sam, this instance is empty or is using very little memory, my \
            issues detector can't be used in these conditions. Please, leave for your mission \
            on Earth and fill it with some data. The new Sam and I will be back to our \
            programming as soon as I finished rebooting.\n"
            .to_string(),
        Diagnosis::Healthy => "Hi Sam, I can't find any memory issue in your instance. I can \
            only account for what occurs on this base.\n"
            .to_string(),
        Diagnosis::Issues(issues) => {
            let mut report =
                String::from("Sam, I detected a few issues in this Tessera instance's memory:\n\n");
            for issue in issues {
                report.push_str(" * ");
                report.push_str(explanation(*issue));
                report.push_str("\n\n");
            }
            report.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
            report
        }
    }
}

fn explanation(issue: Issue) -> &'static str {
    match issue {
        Issue::BigPeak => {
            "Peak memory: this instance once used more than 150% of the memory it uses \
             now. jemalloc keeps part of what a peak left behind, so the fragmentation \
             ratios read high; that is harmless, and the memory is used again as the \
             dataset grows. MEMORY PURGE gives unused pages back to the system now."
        }
        Issue::HighFragmentation => {
            "High total RSS: the process's resident memory is more than 1.4 times what \
             Tessera has allocated, and more than 10 MB above it. The other lines of this \
             report say where the difference lies; MEMORY STATS has the figures."
        }
        Issue::HighAllocatorFragmentation => {
            "High allocator fragmentation: jemalloc's active pages hold more than 1.1 times \
             the bytes allocated in them, more than 10 MB of holes left by values freed \
             since they were filled. New writes fill the holes; a restart, which reloads \
             the dataset from the log, removes them."
        }
        Issue::HighAllocatorRss => {
            "High allocator RSS overhead: jemalloc keeps resident pages it does not use \
             (more than 1.1 times its active pages, and more than 10 MB above them), most \
             likely freed after a peak. MEMORY PURGE returns them to the system."
        }
        Issue::HighProcessRss => {
            "High process RSS overhead: the process's RSS is more than 1.1 times what \
             jemalloc holds resident, and more than 10 MB above it: memory outside \
             jemalloc, such as thread stacks and the program itself."
        }
        Issue::BigClientBuffers => {
            "Big client buffers: clients use more than 200 KB each on average for their \
             requests and replies. CLIENT LIST shows each client's `qbuf`, `omem` and \
             `tot-mem`; `client-output-buffer-limit` bounds what a slow reader holds."
        }
        Issue::ManyScripts => {
            "Many scripts: more than 1000 scripts are cached, and EVAL keeps every script \
             it is sent. Pass changing values as arguments (KEYS, ARGV) rather than in \
             the script's text, or SCRIPT FLUSH the cache from time to time."
        }
    }
}

/// jemalloc's statistics report (`malloc_stats_print`), as MEMORY MALLOC-STATS shows it.
pub fn allocator_report() -> Vec<u8> {
    /// Appends one piece of the report to the `Vec<u8>` behind `opaque`.
    unsafe extern "C" fn append(opaque: *mut c_void, text: *const c_char) {
        // SAFETY: `opaque` is the `&mut Vec<u8>` `allocator_report` passed, alive and not
        // otherwise borrowed for the whole call; `text` is a NUL-terminated string
        // jemalloc owns for the length of this callback.
        unsafe {
            let out = &mut *(opaque as *mut Vec<u8>);
            out.extend_from_slice(CStr::from_ptr(text).to_bytes());
        }
    }
    let mut report: Vec<u8> = Vec::new();
    // SAFETY: the callback and its argument are valid for the call (which does not keep
    // them); a null options string asks for the whole report.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(append),
            &mut report as *mut Vec<u8> as *mut c_void,
            std::ptr::null(),
        );
    }
    report
}

/// jemalloc's index that names every arena at once (`MALLCTL_ARENAS_ALL`).
const ARENAS_ALL: u32 = 4096;

/// jemalloc refused to purge (its error number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("jemalloc refused the purge (error {0})")]
pub struct PurgeError(pub i32);

/// MEMORY PURGE: the calling thread's cache goes back to its arena, then every arena
/// gives its unused dirty pages back to the system.
pub fn purge() -> Result<(), PurgeError> {
    let flush = c"thread.tcache.flush";
    let purge = format!("arena.{ARENAS_ALL}.purge\0");
    // SAFETY: both names are NUL-terminated; these controls read and write nothing
    // (null old and new pointers, zero lengths), as jemalloc requires of them.
    let result = unsafe {
        // A thread without a cache refuses the flush: nothing to flush, not a failure.
        tikv_jemalloc_sys::mallctl(
            flush.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
        tikv_jemalloc_sys::mallctl(
            purge.as_ptr() as *const c_char,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(PurgeError(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overview(total: u64) -> Overview {
        Overview {
            peak_allocated: total,
            total_allocated: total,
            startup_allocated: 1 << 20,
            clients: 1,
            allocator: Allocator {
                allocated: total,
                active: total,
                resident: total,
            },
            process_rss: total,
            ..Overview::default()
        }
    }

    #[test]
    fn the_doctor_judges_nothing_below_five_megabytes() {
        assert_eq!(diagnose(&overview(4 << 20)), Diagnosis::Empty);
        assert_eq!(diagnose(&overview(64 << 20)), Diagnosis::Healthy);
    }

    #[test]
    fn the_doctor_names_each_issue_past_its_ratio_and_ten_megabytes() {
        let mut sick = overview(64 << 20);
        sick.peak_allocated = 200 << 20;
        sick.process_rss = 128 << 20;
        sick.scripts = 1001;
        let Diagnosis::Issues(issues) = diagnose(&sick) else {
            panic!("issues expected");
        };
        assert_eq!(
            issues,
            [
                Issue::BigPeak,
                Issue::HighFragmentation,
                Issue::HighProcessRss,
                Issue::ManyScripts
            ]
        );
        // A ratio past its limit by less than 10 MB is no issue.
        let mut small = overview(6 << 20);
        small.process_rss = 12 << 20;
        assert_eq!(diagnose(&small), Diagnosis::Healthy);
        let report = doctor_report(&Diagnosis::Issues(issues));
        assert!(report.starts_with("Sam, I detected a few issues"));
        assert_eq!(report.matches(" * ").count(), 4);
    }

    #[test]
    fn percentages_and_per_key_figures_follow_redis_s_definitions() {
        let mut o = overview(11 << 20);
        o.keys = 10;
        o.databases = vec![(0, 1 << 20)];
        // Overhead: the start-up MB and the table's MB; net usage 10 MB.
        assert_eq!(o.overhead_total(), 2 << 20);
        assert_eq!(o.dataset(), 9 << 20);
        assert_eq!(o.dataset_percentage(), 90.0);
        assert_eq!(o.bytes_per_key(), 1 << 20);
        o.keys = 0;
        assert_eq!(o.bytes_per_key(), 0);
    }

    #[test]
    fn purging_and_the_report_work_on_this_jemalloc() {
        assert_eq!(purge(), Ok(()));
        let report = String::from_utf8(allocator_report()).unwrap();
        assert!(report.starts_with("___ Begin jemalloc statistics ___"));
        assert!(
            report
                .trim_end()
                .ends_with("--- End jemalloc statistics ---")
        );
    }
}
