//! Per-command statistics (INFO commandstats and latencystats, LATENCY HISTOGRAM) and error
//! statistics (INFO errorstats, `total_error_replies`), as Redis 7.0 keeps them.
//!
//! Commands are counted by their id in Redis's command table as ACL sees it
//! (`crate::acl::table`): a subcommand (`client|list`) has an id of its own, and a
//! command's counters are one index away, with no name hashed per call. The engine
//! (`Engine::dispatch`) reads the clock before and after a command and reports here;
//! refusals and error replies are reported where they are written.
//!
//! Which call failed follows Redis's `incrCommandStatsOnError`: a command failed when the
//! error-reply count grew since the last command started or ended, so the errors of the
//! commands an EXEC or a script ran are theirs, not the EXEC's or the script's.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Redis's histogram range (1 ns to 1 s) and precision (2 significant figures).
const HISTOGRAM_LOWEST_NS: u64 = 1;
const HISTOGRAM_HIGHEST_NS: u64 = 1_000_000_000;
const HISTOGRAM_FIGURES: u8 = 2;

/// Distinct error prefixes kept; past it, new prefixes count in `total_error_replies`
/// only. Redis 7.0 keeps them all; a script can reply any prefix it likes, so the table
/// needs a bound (Redis 7.2 has this same one).
pub const ERROR_KINDS_MAX: usize = 128;

/// The first word of an error reply, as Redis's `afterErrorReply` finds it: the text up
/// to the first space among its first 31 bytes (32 with the `-`), else `ERR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorKind {
    bytes: [u8; 31],
    len: u8,
}

impl ErrorKind {
    pub fn of(message: &[u8]) -> ErrorKind {
        let window = &message[..message.len().min(31)];
        let prefix: &[u8] = match window.iter().position(|&b| b == b' ') {
            Some(space) => &window[..space],
            None => b"ERR",
        };
        let mut bytes = [0; 31];
        bytes[..prefix.len()].copy_from_slice(prefix);
        ErrorKind {
            bytes,
            len: prefix.len() as u8,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// One command's counters (Redis's `redisCommand` statistics fields).
#[derive(Default)]
struct Counters {
    calls: u64,
    usec: u64,
    rejected: u64,
    failed: u64,
    /// Nanoseconds per call; made on the command's first timed call (as Redis does).
    histogram: Option<Box<Histogram<u64>>>,
}

/// The counters of every command, the error table and the error total.
pub struct CommandStats {
    counters: Vec<Counters>,
    errors: BTreeMap<Vec<u8>, u64>,
    pub total_error_replies: u64,
    /// `total_error_replies` when the last command started or ended (Redis's
    /// `prev_err_count`).
    errors_seen: u64,
    /// Error replies of the command that are not counted again (a script's errors raised
    /// by commands it ran, already counted there): each is a failure all the same (Redis's
    /// `afterErrorReply` with `ERR_REPLY_FLAG_NO_STATS_UPDATE`).
    uncounted_failures: u64,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats::new()
    }
}

/// What `commandstats` prints for one command.
pub struct CommandLine<'a> {
    pub name: &'a str,
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

impl CommandStats {
    pub fn new() -> CommandStats {
        let count = crate::acl::table::table().commands.len();
        CommandStats {
            counters: (0..count).map(|_| Counters::default()).collect(),
            errors: BTreeMap::new(),
            total_error_replies: 0,
            errors_seen: 0,
            uncounted_failures: 0,
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&mut self) {
        *self = CommandStats::new();
    }

    /// An error reply was sent (Redis's `afterErrorReply`).
    pub fn error_replied(&mut self, kind: ErrorKind) {
        self.total_error_replies += 1;
        if let Some(count) = self.errors.get_mut(kind.as_bytes()) {
            *count += 1;
        } else if self.errors.len() < ERROR_KINDS_MAX {
            self.errors.insert(kind.as_bytes().to_vec(), 1);
        }
    }

    /// The errors a reply writer wrote.
    pub fn count_errors(&mut self, kinds: &[ErrorKind]) {
        for &kind in kinds {
            self.error_replied(kind);
        }
    }

    /// `n` error replies counted earlier (see `uncounted_failures`).
    pub fn failed_without_count(&mut self, n: u64) {
        self.uncounted_failures += n;
    }

    /// A command is about to run.
    pub fn begin(&mut self) {
        self.errors_seen = self.total_error_replies;
        self.uncounted_failures = 0;
    }

    /// A command ran (`id`: its entry, if Redis's table has it). `timed`: its duration
    /// goes to the histogram too (not for a command that blocked: its wait is not its
    /// cost). `counted`: a call (not for a blocked command served again).
    pub fn end(
        &mut self,
        id: Option<usize>,
        duration_ns: u64,
        counted: bool,
        timed: bool,
        tracking: bool,
    ) {
        let failed = u64::from(self.total_error_replies > self.errors_seen)
            + std::mem::take(&mut self.uncounted_failures);
        self.errors_seen = self.total_error_replies;
        let Some(counters) = id.and_then(|id| self.counters.get_mut(id)) else {
            return;
        };
        counters.usec += duration_ns / 1000;
        if counted {
            counters.calls += 1;
        }
        counters.failed += failed;
        if timed && tracking {
            let histogram = counters.histogram.get_or_insert_with(|| {
                Box::new(
                    Histogram::new_with_bounds(
                        HISTOGRAM_LOWEST_NS,
                        HISTOGRAM_HIGHEST_NS,
                        HISTOGRAM_FIGURES,
                    )
                    .expect("valid histogram bounds"),
                )
            });
            histogram
                .saturating_record(duration_ns.clamp(HISTOGRAM_LOWEST_NS, HISTOGRAM_HIGHEST_NS));
        }
    }

    /// A command refused before it ran (its error reply already counted).
    pub fn rejected(&mut self, id: Option<usize>) {
        if let Some(counters) = id.and_then(|id| self.counters.get_mut(id)) {
            counters.rejected += 1;
        }
        self.errors_seen = self.total_error_replies;
    }

    /// Commands with anything to show, in table order.
    pub fn command_lines(&self) -> impl Iterator<Item = CommandLine<'_>> {
        let table = crate::acl::table::table();
        self.counters
            .iter()
            .zip(&table.commands)
            .filter(|(c, _)| c.calls > 0 || c.rejected > 0 || c.failed > 0)
            .map(|(c, command)| CommandLine {
                name: &command.full_name,
                calls: c.calls,
                usec: c.usec,
                rejected: c.rejected,
                failed: c.failed,
            })
    }

    /// Error prefixes and counts, in byte order (Redis's rax order).
    pub fn error_lines(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.errors.iter().map(|(k, &v)| (k.as_slice(), v))
    }

    /// The histograms of the commands that have one, in table order.
    pub fn histograms(&self) -> impl Iterator<Item = (&'static str, &Histogram<u64>)> {
        let table = crate::acl::table::table();
        self.counters
            .iter()
            .zip(&table.commands)
            .filter_map(|(c, command)| {
                c.histogram
                    .as_deref()
                    .map(|h| (command.full_name.as_str(), h))
            })
    }

    /// The histogram of command `id`, if it has one.
    pub fn histogram(&self, id: usize) -> Option<&Histogram<u64>> {
        self.counters.get(id)?.histogram.as_deref()
    }
}

/// The id of the command `argv` runs in Redis's table: for a container, the subcommand
/// `argv[1]` names (None when Redis has no such subcommand: Redis counts it nowhere).
/// `top_id`: the container's or command's own id.
pub fn command_id(top_id: Option<usize>, argv: &[&[u8]]) -> Option<usize> {
    let top_id = top_id?;
    let table = crate::acl::table::table();
    let command = &table.commands[top_id];
    if command.subcommands.is_empty() {
        return Some(top_id);
    }
    let Some(sub) = argv.get(1) else {
        return Some(top_id);
    };
    command.subcommands.iter().copied().find(|&id| {
        let full = &table.commands[id].full_name;
        full.split_once('|')
            .is_some_and(|(_, name)| name.as_bytes().eq_ignore_ascii_case(sub))
    })
}

/// Percentile labels as Redis prints them (`%f`, trailing zeros and point trimmed).
pub fn percentile_label(percentile: f64) -> String {
    let text = format!("{percentile:.6}");
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_string()
}

/// Redis's `fillPercentileDistributionLatencies` values: the value at each percentile, in
/// microseconds with three decimals.
pub fn percentile_usec(histogram: &Histogram<u64>, percentile: f64) -> f64 {
    histogram.value_at_percentile(percentile) as f64 / 1000.0
}

/// LATENCY HISTOGRAM's buckets (Redis's `fillCommandCDF`: a log-2 iteration from 1024 ns):
/// (upper bound in µs, cumulative count), for the buckets where the count grew.
pub fn cumulative_buckets(histogram: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut buckets = Vec::new();
    let mut cumulative = 0;
    let mut previous = 0;
    let mut level: u64 = 1024;
    let total = histogram.len();
    while previous < total {
        // The reporting level's highest equivalent value, as HdrHistogram_c computes it;
        // past the histogram's top, its last value.
        let highest = if level > HISTOGRAM_HIGHEST_NS {
            level - 1
        } else {
            histogram.highest_equivalent(level)
        };
        cumulative = histogram.count_between(0, highest).max(cumulative);
        if cumulative > previous {
            buckets.push((highest / 1000, cumulative));
        }
        previous = cumulative;
        level *= 2;
        if level > 4 * HISTOGRAM_HIGHEST_NS {
            break;
        }
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kind_follows_redis() {
        assert_eq!(
            ErrorKind::of(b"WRONGTYPE Operation").as_bytes(),
            b"WRONGTYPE"
        );
        assert_eq!(ErrorKind::of(b"nospace").as_bytes(), b"ERR");
        assert_eq!(ErrorKind::of(&[b'A'; 40]).as_bytes(), b"ERR");
        assert_eq!(ErrorKind::of(b"").as_bytes(), b"ERR");
    }

    #[test]
    fn percentile_labels() {
        assert_eq!(percentile_label(50.0), "50");
        assert_eq!(percentile_label(99.9), "99.9");
        assert_eq!(percentile_label(99.99), "99.99");
    }

    #[test]
    fn buckets_have_redis_labels() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 2).unwrap();
        histogram.record(4000).unwrap();
        histogram.record(150_000).unwrap();
        histogram.record(1_000_000_000).unwrap();
        let buckets = cumulative_buckets(&histogram);
        assert_eq!(buckets, vec![(4, 1), (264, 2), (1073741, 3)]);
    }

    #[test]
    fn error_table_is_bounded() {
        let mut stats = CommandStats::new();
        for n in 0..200 {
            stats.error_replied(ErrorKind::of(format!("E{n} x").as_bytes()));
        }
        assert_eq!(stats.error_lines().count(), ERROR_KINDS_MAX);
        assert_eq!(stats.total_error_replies, 200);
    }
}
