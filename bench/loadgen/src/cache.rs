//! The closed-loop cache workload (`tessera-loadgen cache`, driven by bench/eviction.py):
//! a cache-aside client population in front of a key space larger than the server's
//! `maxmemory`, as fast as the server answers.
//!
//! Each connection has a thread of its own (blocking sockets: with a handful of
//! connections that is the cheapest way, and the threads sleep in `read` while the server
//! works). A connection repeats: draw a batch of `pipeline` operations, each a key of
//! Zipf-distributed rank and, with probability `set_ratio`, a blind SET, else a GET; send
//! the batch in one write, read its replies; then SET every key whose GET missed (the
//! cache fill), in one more pipelined round trip. Every command counts as an operation,
//! fills included, and a connection stops once it has done its share of the phase's
//! operations (the last batch may take it a few fills past).
//!
//! Key ranks follow Zipf(s): rank r (1-based) with probability proportional to 1/r^s,
//! drawn by a binary search of a uniform number in the precomputed CDF (one CDF shared by
//! every thread). Ranks are scattered over the key names by a multiplicative hash, so the
//! hot keys are spread over the hash table and the slots rather than being `key:0..k`.
//!
//! Every value written is distinct: `key:<n>:<counter>:` padded with `v` to the value size
//! (cut to it if longer), the counter running over the whole run and interleaved between
//! connections. A server that shared or compressed alike values would otherwise look
//! better than it is.
//!
//! There are two phases: a warm-up (not timed: it fills the server to its limit), then
//! the timed phase. Between them every connection waits at a barrier, and with
//! `--go-on-stdin` the process says `warmed` on stdout and waits for a line on standard
//! input, so that a driver can take its own readings (the server's CPU time, its memory
//! peaks) at the exact start of the timed phase.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::resp::{self, Kind, Parsed};
use crate::schedule::splitmix64;

/// The multiplier that scatters ranks over key names (Knuth's multiplicative hash).
const SCATTER: u128 = 2_654_435_761;
/// How long a connection waits for a reply before it reports the server as stuck.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// Error texts kept per connection for the report.
const MAX_ERROR_TEXTS: usize = 5;

/// The workload's parameters.
pub struct CacheConfig {
    pub addr: SocketAddr,
    pub connections: usize,
    pub pipeline: usize,
    /// Keys are `key:<n>`, n in [0, keys).
    pub keys: u64,
    pub zipf: f64,
    pub value_size: usize,
    pub set_ratio: f64,
    /// `EX` of every SET, or none.
    pub expire_seconds: Option<u64>,
    pub warmup_ops: u64,
    pub ops: u64,
    pub seed: u64,
}

/// What one phase did, over all connections.
#[derive(Clone, Debug, Default)]
pub struct PhaseStats {
    /// Commands answered: GETs, blind SETs and fills.
    pub ops: u64,
    /// GETs that found their key.
    pub hits: u64,
    /// GETs that found nothing (each followed by a fill).
    pub misses: u64,
    /// Error replies, to any command.
    pub errors: u64,
    pub error_texts: Vec<String>,
    pub seconds: f64,
}

impl PhaseStats {
    fn add(&mut self, other: &PhaseStats) {
        self.ops += other.ops;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        for t in &other.error_texts {
            if self.error_texts.len() < MAX_ERROR_TEXTS && !self.error_texts.contains(t) {
                self.error_texts.push(t.clone());
            }
        }
    }
}

/// Both phases, and what went wrong on connections that failed.
pub struct CacheResult {
    pub warmup: PhaseStats,
    pub timed: PhaseStats,
    /// CPU time of this process (all threads) during the timed phase, in seconds.
    pub timed_cpu_seconds: Option<f64>,
    pub connection_errors: Vec<String>,
}

/// Buckets of the guide table: a power of two, so that `u * GUIDE` and `b / GUIDE` are
/// exact.
const GUIDE: usize = 1 << 16;

/// The Zipf(s) distribution over ranks 0..n (rank 0 the most frequent) as a CDF, with a
/// guide table: `guide[b]` is the first rank whose cumulative probability reaches
/// b / GUIDE, so a draw searches only between two neighbouring entries. A plain binary
/// search of a CDF of millions of keys misses the cache on most of its steps and cost
/// more than all the rest of the generator; with the guide its steps stay within a few
/// cache lines. The rank found is the same.
pub struct Zipf {
    cdf: Vec<f64>,
    guide: Vec<u32>,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        let weight = |rank: u64| 1.0 / (rank as f64).powf(s);
        let total: f64 = (1..=n).map(weight).sum();
        let mut running = 0.0;
        let cdf = (1..=n)
            .map(|rank| {
                running += weight(rank);
                running / total
            })
            .collect::<Vec<f64>>();
        let last = cdf.len() - 1;
        let guide = (0..=GUIDE)
            .map(|b| {
                let at = b as f64 / GUIDE as f64;
                cdf.partition_point(|&c| c < at).min(last) as u32
            })
            .collect();
        Zipf { cdf, guide }
    }

    /// The rank whose CDF interval holds `u` (uniform in [0, 1)): the first rank whose
    /// cumulative probability reaches it.
    pub fn rank(&self, u: f64) -> u64 {
        // guide[b] <= the rank (its CDF reaches u >= b / GUIDE) <= guide[b + 1] (whose CDF
        // reaches (b + 1) / GUIDE > u, or which is the last rank).
        let b = ((u * GUIDE as f64) as usize).min(GUIDE - 1);
        let (lo, hi) = (self.guide[b] as usize, self.guide[b + 1] as usize);
        (lo + self.cdf[lo..hi].partition_point(|&c| c < u)) as u64
    }
}

/// The key name's number for a rank: ranks scattered over the names.
pub fn key_of(rank: u64, keys: u64) -> u64 {
    (u128::from(rank) * SCATTER % u128::from(keys)) as u64
}

/// Writes the distinct value of one SET into `value` (resized to `size`).
pub fn fill_value(value: &mut Vec<u8>, key: u64, counter: u64, size: usize) {
    value.clear();
    value.extend_from_slice(b"key:");
    resp::push_u64(value, key);
    value.push(b':');
    resp::push_u64(value, counter);
    value.push(b':');
    value.resize(size, b'v');
}

/// Runs the warm-up and the timed phase. `on_warmed` is called with the warm-up's seconds
/// once every connection has finished it; the timed phase starts when it returns.
pub fn run(cfg: &CacheConfig, on_warmed: impl FnOnce(f64)) -> io::Result<CacheResult> {
    let zipf = Zipf::new(cfg.keys, cfg.zipf);
    let mut streams = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections {
        let stream = TcpStream::connect_timeout(&cfg.addr, Duration::from_secs(5))
            .map_err(|e| io::Error::new(e.kind(), format!("connecting to {}: {e}", cfg.addr)))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        streams.push(stream);
    }
    // The main thread takes part in every barrier: it times the phases.
    let ready = Barrier::new(cfg.connections + 1);
    let warmed = Barrier::new(cfg.connections + 1);
    let go = Barrier::new(cfg.connections + 1);
    let zipf = &zipf;
    let (ready, warmed, go) = (&ready, &warmed, &go);
    thread::scope(|scope| {
        let handles: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(i, stream)| {
                scope.spawn(move || {
                    let mut conn = Client::new(stream, cfg, zipf, i);
                    ready.wait();
                    let warm = conn.phase(share(cfg.warmup_ops, cfg.connections, i), cfg, 0);
                    warmed.wait();
                    go.wait();
                    // A connection that failed in the warm-up sits the timed phase out.
                    let timed = match &warm {
                        Ok(_) => conn.phase(share(cfg.ops, cfg.connections, i), cfg, 1),
                        Err(_) => Ok(PhaseStats::default()),
                    };
                    (warm, timed)
                })
            })
            .collect();

        ready.wait();
        let began = Instant::now();
        warmed.wait();
        let warm_seconds = began.elapsed().as_secs_f64();
        on_warmed(warm_seconds);
        let cpu0 = crate::load::process_cpu_seconds();
        go.wait();
        let began = Instant::now();
        let outcomes: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("cache connection thread"))
            .collect();
        let timed_seconds = began.elapsed().as_secs_f64();
        let timed_cpu_seconds = match (cpu0, crate::load::process_cpu_seconds()) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };

        let mut result = CacheResult {
            warmup: PhaseStats {
                seconds: warm_seconds,
                ..PhaseStats::default()
            },
            timed: PhaseStats {
                seconds: timed_seconds,
                ..PhaseStats::default()
            },
            timed_cpu_seconds,
            connection_errors: Vec::new(),
        };
        for (i, (warm, timed)) in outcomes.into_iter().enumerate() {
            for (phase, outcome, into) in [
                ("warm-up", warm, &mut result.warmup),
                ("timed phase", timed, &mut result.timed),
            ] {
                match outcome {
                    Ok(stats) => into.add(&stats),
                    Err(e) => result
                        .connection_errors
                        .push(format!("connection {i}, {phase}: {e}")),
                }
            }
        }
        Ok(result)
    })
}

/// Connection i's share of `total` operations (the first ones take the remainder).
fn share(total: u64, connections: usize, i: usize) -> u64 {
    let n = connections as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// One connection and its generator state.
struct Client<'a> {
    stream: TcpStream,
    zipf: &'a Zipf,
    /// The next value's counter; steps by the number of connections, so no two
    /// connections ever write the same value.
    counter: u64,
    counter_step: u64,
    index: usize,
    out: Vec<u8>,
    value: Vec<u8>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The keys of the batch in flight, and whether each is a blind SET.
    batch: Vec<(u64, bool)>,
    fills: Vec<u64>,
}

impl<'a> Client<'a> {
    fn new(stream: TcpStream, cfg: &CacheConfig, zipf: &'a Zipf, index: usize) -> Client<'a> {
        Client {
            stream,
            zipf,
            counter: index as u64 + 1,
            counter_step: cfg.connections as u64,
            index,
            out: Vec::with_capacity(cfg.pipeline * (cfg.value_size + 64)),
            value: Vec::with_capacity(cfg.value_size.max(32)),
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            batch: Vec::with_capacity(cfg.pipeline),
            fills: Vec::with_capacity(cfg.pipeline),
        }
    }

    /// Runs `ops` operations; `phase` (0 warm-up, 1 timed) picks the random stream.
    fn phase(&mut self, ops: u64, cfg: &CacheConfig, phase: u64) -> io::Result<PhaseStats> {
        let mut rng = SmallRng::seed_from_u64(splitmix64(
            (cfg.seed.wrapping_add(phase))
                .wrapping_mul(1000)
                .wrapping_add(self.index as u64),
        ));
        let mut stats = PhaseStats::default();
        while stats.ops < ops {
            let n = (cfg.pipeline as u64).min(ops - stats.ops) as usize;
            self.batch.clear();
            self.out.clear();
            for _ in 0..n {
                let key = key_of(self.zipf.rank(rng.random::<f64>()), cfg.keys);
                let blind_set = rng.random::<f64>() < cfg.set_ratio;
                self.batch.push((key, blind_set));
                if blind_set {
                    self.push_set(key, cfg);
                } else {
                    resp::push_get(&mut self.out, key);
                }
            }
            self.stream.write_all(&self.out)?;
            self.fills.clear();
            for i in 0..n {
                let (key, blind_set) = self.batch[i];
                let kind = self.reply(&mut stats)?;
                match (blind_set, kind) {
                    (_, Kind::Error) => {}
                    (true, Kind::Status) => {}
                    (false, Kind::Bulk) => stats.hits += 1,
                    (false, Kind::Nil) => {
                        stats.misses += 1;
                        self.fills.push(key);
                    }
                    (set, other) => return Err(unexpected(set, other)),
                }
            }
            stats.ops += n as u64;
            if self.fills.is_empty() {
                continue;
            }
            self.out.clear();
            for i in 0..self.fills.len() {
                self.push_set(self.fills[i], cfg);
            }
            self.stream.write_all(&self.out)?;
            for _ in 0..self.fills.len() {
                match self.reply(&mut stats)? {
                    Kind::Status | Kind::Error => {}
                    other => return Err(unexpected(true, other)),
                }
            }
            stats.ops += self.fills.len() as u64;
        }
        Ok(stats)
    }

    fn push_set(&mut self, key: u64, cfg: &CacheConfig) {
        fill_value(&mut self.value, key, self.counter, cfg.value_size);
        self.counter += self.counter_step;
        resp::push_set_value(&mut self.out, key, &self.value, cfg.expire_seconds);
    }

    /// Reads the next reply; an error reply is counted (and its text kept) here.
    fn reply(&mut self, stats: &mut PhaseStats) -> io::Result<Kind> {
        loop {
            match resp::parse_reply(&self.buf[self.start..self.end]) {
                Parsed::Reply { kind, len } => {
                    if kind == Kind::Error {
                        stats.errors += 1;
                        let text = resp::error_text(&self.buf[self.start..self.start + len]);
                        if stats.error_texts.len() < MAX_ERROR_TEXTS
                            && !stats.error_texts.contains(&text)
                        {
                            stats.error_texts.push(text);
                        }
                    }
                    self.start += len;
                    return Ok(kind);
                }
                Parsed::Incomplete => {
                    if self.start > 0 {
                        self.buf.copy_within(self.start..self.end, 0);
                        self.end -= self.start;
                        self.start = 0;
                    }
                    if self.end == self.buf.len() {
                        self.buf.resize(self.buf.len() * 2, 0);
                    }
                    let n = self.stream.read(&mut self.buf[self.end..])?;
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection",
                        ));
                    }
                    self.end += n;
                }
                Parsed::Invalid(why) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("protocol error: {why}"),
                    ));
                }
            }
        }
    }
}

fn unexpected(set: bool, kind: Kind) -> io::Error {
    let command = if set { "SET" } else { "GET" };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected {kind:?} reply to {command}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_ranks_follow_the_cdf() {
        let z = Zipf::new(1000, 0.99);
        assert_eq!(z.rank(0.0), 0);
        assert_eq!(z.rank(0.999_999_999_999), 999);
        // Rank 0's share is 1/H(1000, 0.99); with s = 0.99 that is about 0.13.
        let first = z.cdf[0];
        assert!((0.12..0.15).contains(&first), "{first}");
        assert_eq!(z.rank(first * 0.5), 0);
        assert_eq!(z.rank(first), 0);
        assert_eq!(z.rank(first + 1e-9), 1);
        assert!(z.cdf.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn the_guide_finds_what_a_plain_search_finds() {
        use rand::rngs::SmallRng;
        let z = Zipf::new(300_000, 0.99);
        let plain = |u: f64| z.cdf.partition_point(|&c| c < u).min(z.cdf.len() - 1) as u64;
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..200_000 {
            let u = rng.random::<f64>();
            assert_eq!(z.rank(u), plain(u), "{u}");
        }
        // The CDF's own values and the bucket edges, where an off-by-one would show.
        for i in (0..z.cdf.len()).step_by(97) {
            assert_eq!(z.rank(z.cdf[i]), plain(z.cdf[i]));
        }
        for b in 0..GUIDE {
            let u = b as f64 / GUIDE as f64;
            assert_eq!(z.rank(u), plain(u), "bucket {b}");
        }
    }

    #[test]
    fn ranks_are_scattered_over_every_key_name() {
        let keys = 10_007;
        let mut seen = vec![false; keys as usize];
        for rank in 0..keys {
            seen[key_of(rank, keys) as usize] = true;
        }
        assert!(
            seen.iter().all(|&s| s),
            "a prime key count: the hash is a bijection"
        );
        assert_ne!(key_of(1, keys), 1);
        assert!(key_of(u64::MAX - 1, u64::MAX) < u64::MAX);
    }

    #[test]
    fn values_are_padded_or_cut_to_the_size() {
        let mut v = Vec::new();
        fill_value(&mut v, 42, 7, 16);
        assert_eq!(v, b"key:42:7:vvvvvvv");
        fill_value(&mut v, 123_456, 987_654, 8);
        assert_eq!(v, b"key:1234");
        assert_eq!(v.len(), 8);
    }

    #[test]
    fn shares_add_up() {
        for (total, n) in [(10, 4), (3, 4), (0, 2), (2_000_000, 4)] {
            let sum: u64 = (0..n).map(|i| share(total, n, i)).sum();
            assert_eq!(sum, total);
        }
    }
}
