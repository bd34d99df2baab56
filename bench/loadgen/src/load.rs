//! The open-loop load.
//!
//! The connections are shared out among `threads` workers; each worker is two threads:
//!
//! - a **sender** that sleeps until the next request of any of its connections is due
//!   (`thread::sleep`, nanosecond resolution, with the process's timer slack lowered at
//!   start-up), writes every request that is due, and sleeps again. It never waits for a
//!   reply: a connection whose server is slow gets several requests in flight (pipelining),
//!   and a socket whose buffer is full keeps the rest in user space, retried every
//!   millisecond. How late each request left after its due time is recorded (the
//!   generator's own lateness);
//! - a **receiver** on a mio poll of the same sockets that parses replies as they arrive.
//!   Replies come back in request order, so the k-th reply of a connection answers its k-th
//!   request, whose due time the receiver computes from the connection's schedule: the
//!   latency is the reply's arrival minus the request's **due** time, not its actual send
//!   time, so a stalled server (or a late generator) cannot hide its delay (no coordinated
//!   omission). The two threads share nothing per request but a counter of requests sent.
//!
//! (Why not one thread per worker: mio's poll takes its timeout in whole milliseconds,
//! which would send every request up to a millisecond late.)

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::resp::{self, Kind, Parsed};
use crate::schedule::{OpMix, Schedule, bin, splitmix64};

/// The highest latency or lateness a histogram holds, in microseconds (an hour).
pub const HIGHEST_US: u64 = 3_600_000_000;
/// The histograms' precision: 3 significant digits (0.1 %).
pub const SIGFIGS: u8 = 3;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, SIGFIGS).expect("valid histogram bounds")
}

/// The load's parameters.
pub struct LoadConfig {
    pub addr: SocketAddr,
    pub connections: usize,
    pub threads: usize,
    pub rate: f64,
    pub duration: Duration,
    pub keyspace: u64,
    pub value_size: usize,
    pub set_ratio: f64,
    pub seed: u64,
    /// Width of the report's bins, in nanoseconds.
    pub interval_ns: u64,
    /// A send this much later than its due time counts as late.
    pub late_threshold_ns: u64,
    /// How long to wait for replies still due after the last send.
    pub drain_timeout: Duration,
    /// Set from outside to end the schedule early.
    pub stop: Arc<AtomicBool>,
}

/// One reply: when its request was due (µs from the start of the load), its latency (µs),
/// and what it was.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub due_us: u32,
    pub latency_us: u32,
    pub flags: u8,
}

pub const FLAG_SET: u8 = 1;
pub const FLAG_ERROR: u8 = 2;
pub const FLAG_NIL: u8 = 4;

/// What the senders did with the requests due in one bin of the schedule.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendBin {
    pub sent: u64,
    pub late: u64,
    pub max_late_ns: u64,
}

/// Everything the load measured.
pub struct LoadResult {
    pub start_unix_us: u64,
    /// When the schedule ended (the duration, or earlier when stopped), ns from the start.
    pub end_ns: u64,
    pub samples: Vec<Sample>,
    pub send_bins: Vec<SendBin>,
    /// Lateness of every send, in µs.
    pub lateness: Histogram<u64>,
    pub scheduled: u64,
    pub sent: u64,
    /// Due on a connection that had failed, so never sent.
    pub unsent: u64,
    /// Sent on a live connection, no reply by the end of the drain.
    pub incomplete: u64,
    /// Sent on a connection that failed before its reply came.
    pub lost: u64,
    /// Distinct error replies and how many of each (at most 20 kinds kept).
    pub error_texts: Vec<(String, u64)>,
    pub connection_errors: Vec<String>,
    /// CPU time of this process (all threads) during the load, in seconds.
    pub cpu_seconds: Option<f64>,
    pub wall_seconds: f64,
}

struct Shared {
    stream: TcpStream,
    /// Requests written (or queued to be written) so far.
    sent: AtomicU64,
    dead: AtomicBool,
}

struct SendConn {
    shared: Arc<Shared>,
    schedule: Schedule,
    ops: OpMix,
    rng: SmallRng,
    next: u64,
    out: Vec<u8>,
    written: usize,
}

struct RecvConn {
    index: usize,
    shared: Arc<Shared>,
    schedule: Schedule,
    ops: OpMix,
    got: u64,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    closed: bool,
}

struct SendStats {
    bins: Vec<SendBin>,
    lateness: Histogram<u64>,
    scheduled: u64,
    sent: u64,
    errors: Vec<String>,
}

struct RecvStats {
    samples: Vec<Sample>,
    error_texts: HashMap<String, u64>,
    errors: Vec<String>,
    incomplete: u64,
    lost: u64,
}

fn since(t0: Instant) -> u64 {
    Instant::now().saturating_duration_since(t0).as_nanos() as u64
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    Ok(TcpStream::from_std(stream))
}

/// Runs the load; `started` is told the start time (Unix µs) just before the first send
/// is due.
pub fn run(cfg: &LoadConfig, started: impl FnOnce(u64)) -> io::Result<LoadResult> {
    let threads = cfg.threads.clamp(1, cfg.connections);
    let mut polls = Vec::with_capacity(threads);
    for _ in 0..threads {
        polls.push(Poll::new()?);
    }
    let mut senders: Vec<Vec<SendConn>> = (0..threads).map(|_| Vec::new()).collect();
    let mut receivers: Vec<Vec<RecvConn>> = (0..threads).map(|_| Vec::new()).collect();
    for c in 0..cfg.connections {
        let w = c % threads;
        let mut stream = connect(cfg.addr)
            .map_err(|e| io::Error::new(e.kind(), format!("connecting to {}: {e}", cfg.addr)))?;
        let index_in_worker = receivers[w].len();
        polls[w]
            .registry()
            .register(&mut stream, Token(index_in_worker), Interest::READABLE)?;
        let shared = Arc::new(Shared {
            stream,
            sent: AtomicU64::new(0),
            dead: AtomicBool::new(false),
        });
        let conn_seed = splitmix64(cfg.seed ^ (c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let phase = (splitmix64(conn_seed) >> 11) as f64 / (1u64 << 53) as f64;
        let schedule = Schedule::new(cfg.connections, cfg.rate, phase);
        let ops = OpMix::new(splitmix64(conn_seed ^ 0x6f70), cfg.set_ratio);
        senders[w].push(SendConn {
            shared: shared.clone(),
            schedule,
            ops,
            rng: SmallRng::seed_from_u64(splitmix64(conn_seed ^ 0x6b65)),
            next: 0,
            out: Vec::with_capacity(2 * cfg.value_size + 128),
            written: 0,
        });
        receivers[w].push(RecvConn {
            index: c,
            shared,
            schedule,
            ops,
            got: 0,
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            closed: false,
        });
    }

    // Start a little in the future so that every thread is asleep at its first due time.
    let lead = Duration::from_millis(20);
    let t0 = Instant::now() + lead;
    let start_unix = SystemTime::now() + lead;
    let start_unix_us = start_unix
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let cpu0 = process_cpu_seconds();
    started(start_unix_us);

    let duration_ns = cfg.duration.as_nanos() as u64;
    let nbins = bin(duration_ns, cfg.interval_ns) + 1;
    // Room for the samples up front (12 bytes each), up to 4 M a receiver; more grow it.
    let expected = ((cfg.rate * cfg.duration.as_secs_f64() / threads as f64 * 1.05) as usize
        + 1024)
        .min(4 << 20);
    let (send_stats, recv_stats, end_ns) = thread::scope(|scope| -> io::Result<_> {
        let mut handles = Vec::new();
        for (w, ((conns, rconns), poll)) in
            senders.into_iter().zip(receivers).zip(polls).enumerate()
        {
            let done = Arc::new(AtomicBool::new(false));
            let done2 = done.clone();
            let s = thread::Builder::new()
                .name(format!("sender-{w}"))
                .spawn_scoped(scope, move || sender(conns, cfg, t0, nbins, &done))?;
            let r = thread::Builder::new()
                .name(format!("receiver-{w}"))
                .spawn_scoped(scope, move || {
                    receiver(poll, rconns, cfg, t0, &done2, expected)
                })?;
            handles.push((s, r));
        }
        let mut sends = Vec::new();
        let mut recvs = Vec::new();
        let mut end_ns = 0;
        for (s, r) in handles {
            let (stats, end) = s.join().expect("sender thread");
            end_ns = end_ns.max(end);
            sends.push(stats);
            recvs.push(r.join().expect("receiver thread"));
        }
        Ok((sends, recvs, end_ns))
    })?;
    let wall_seconds = since(t0) as f64 / 1e9;
    let cpu_seconds = match (cpu0, process_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };

    let mut result = LoadResult {
        start_unix_us,
        end_ns,
        samples: Vec::new(),
        send_bins: vec![SendBin::default(); nbins],
        lateness: histogram(),
        scheduled: 0,
        sent: 0,
        unsent: 0,
        incomplete: 0,
        lost: 0,
        error_texts: Vec::new(),
        connection_errors: Vec::new(),
        cpu_seconds,
        wall_seconds,
    };
    for s in send_stats {
        for (into, b) in result.send_bins.iter_mut().zip(&s.bins) {
            into.sent += b.sent;
            into.late += b.late;
            into.max_late_ns = into.max_late_ns.max(b.max_late_ns);
        }
        result.lateness.add(&s.lateness).expect("same bounds");
        result.scheduled += s.scheduled;
        result.sent += s.sent;
        result.connection_errors.extend(s.errors);
    }
    result.unsent = result.scheduled - result.sent;
    // Only the bins the schedule reached (it may have been stopped before its duration).
    result
        .send_bins
        .truncate(bin(end_ns.saturating_sub(1), cfg.interval_ns) + 1);
    let mut texts: HashMap<String, u64> = HashMap::new();
    for r in recv_stats {
        result.samples.extend_from_slice(&r.samples);
        for (text, n) in r.error_texts {
            *texts.entry(text).or_default() += n;
        }
        result.connection_errors.extend(r.errors);
        result.incomplete += r.incomplete;
        result.lost += r.lost;
    }
    result.error_texts = texts.into_iter().collect();
    result
        .error_texts
        .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(result)
}

/// Writes what it can of a connection's pending output.
fn flush(c: &mut SendConn) -> io::Result<()> {
    while c.written < c.out.len() {
        match (&c.shared.stream).write(&c.out[c.written..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the socket took no bytes",
                ));
            }
            Ok(n) => c.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    c.out.clear();
    c.written = 0;
    if c.out.capacity() > 1 << 20 {
        c.out.shrink_to(64 * 1024);
    }
    Ok(())
}

fn fail(c: &SendConn, errors: &mut Vec<String>, e: io::Error) {
    if !c.shared.dead.swap(true, Ordering::AcqRel) {
        errors.push(format!("write failed: {e}"));
        let _ = c.shared.stream.shutdown(Shutdown::Both);
    }
}

/// Flushes every connection with queued output; whether any still has some (its socket
/// full).
fn flush_queued(conns: &mut [SendConn], errors: &mut Vec<String>) -> bool {
    let mut pending = false;
    for c in conns.iter_mut().filter(|c| c.written < c.out.len()) {
        if let Err(e) = flush(c) {
            fail(c, errors, e);
        } else {
            pending |= c.written < c.out.len();
        }
    }
    pending
}

fn sender(
    mut conns: Vec<SendConn>,
    cfg: &LoadConfig,
    t0: Instant,
    nbins: usize,
    done: &AtomicBool,
) -> (SendStats, u64) {
    let mut stats = SendStats {
        bins: vec![SendBin::default(); nbins],
        lateness: histogram(),
        scheduled: 0,
        sent: 0,
        errors: Vec::new(),
    };
    let mut end = cfg.duration.as_nanos() as u64;
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = conns
        .iter()
        .enumerate()
        .map(|(i, c)| Reverse((c.schedule.at(0), i)))
        .collect();
    let wait = t0.saturating_duration_since(Instant::now());
    if !wait.is_zero() {
        thread::sleep(wait);
    }
    loop {
        if cfg.stop.load(Ordering::Relaxed) {
            end = end.min(since(t0));
        }
        while let Some(&Reverse((due, i))) = heap.peek() {
            let now = since(t0);
            if due > now || due >= end {
                break;
            }
            heap.pop();
            let c = &mut conns[i];
            if c.shared.dead.load(Ordering::Acquire) {
                continue; // counted as unsent below
            }
            let late = now - due;
            let b = &mut stats.bins[bin(due, cfg.interval_ns).min(nbins - 1)];
            b.sent += 1;
            if late > cfg.late_threshold_ns {
                b.late += 1;
            }
            b.max_late_ns = b.max_late_ns.max(late);
            stats.lateness.saturating_record(late / 1000);
            let key = c.rng.random_range(0..cfg.keyspace);
            if c.ops.is_set(c.next) {
                resp::push_set(&mut c.out, key, cfg.value_size, &mut c.rng);
            } else {
                resp::push_get(&mut c.out, key);
            }
            // Counted before the bytes leave, so the receiver never sees a reply it
            // cannot match.
            c.shared.sent.fetch_add(1, Ordering::Release);
            c.next += 1;
            stats.sent += 1;
            if let Err(e) = flush(c) {
                fail(c, &mut stats.errors, e);
                continue;
            }
            heap.push(Reverse((c.schedule.at(c.next), i)));
        }
        let pending = flush_queued(&mut conns, &mut stats.errors);
        let next_due = match heap.peek() {
            Some(&Reverse((due, _))) if due < end => due,
            _ => break,
        };
        // Sleep until the next request is due; at most 1 ms while output waits for room
        // in a socket, 50 ms so that a stop is seen.
        let cap = if pending { 1_000_000 } else { 50_000_000 };
        let now = since(t0);
        if next_due > now {
            thread::sleep(Duration::from_nanos((next_due - now).min(cap)));
        }
    }
    // The schedule is over: everything due was sent or queued; flush what is queued.
    let deadline = Instant::now() + cfg.drain_timeout;
    while Instant::now() < deadline {
        let pending = flush_queued(&mut conns, &mut stats.errors);
        if !pending {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    for c in &conns {
        stats.scheduled += c.schedule.count_before(end);
    }
    done.store(true, Ordering::Release);
    (stats, end)
}

fn receiver(
    mut poll: Poll,
    mut conns: Vec<RecvConn>,
    cfg: &LoadConfig,
    t0: Instant,
    done: &AtomicBool,
    expected: usize,
) -> RecvStats {
    let mut stats = RecvStats {
        samples: Vec::with_capacity(expected),
        error_texts: HashMap::new(),
        errors: Vec::new(),
        incomplete: 0,
        lost: 0,
    };
    let mut events = Events::with_capacity(256);
    let mut drain_deadline: Option<Instant> = None;
    loop {
        if let Err(e) = poll.poll(&mut events, Some(Duration::from_millis(10))) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            stats.errors.push(format!("poll failed: {e}"));
            break;
        }
        for event in events.iter() {
            if let Some(c) = conns.get_mut(event.token().0) {
                read_conn(c, t0, &mut stats);
            }
        }
        if done.load(Ordering::Acquire) {
            let deadline =
                *drain_deadline.get_or_insert_with(|| Instant::now() + cfg.drain_timeout);
            let all = conns
                .iter()
                .all(|c| c.closed || c.got >= c.shared.sent.load(Ordering::Acquire));
            if all || Instant::now() >= deadline {
                break;
            }
        }
    }
    for c in &conns {
        let missing = c.shared.sent.load(Ordering::Acquire).saturating_sub(c.got);
        if c.closed || c.shared.dead.load(Ordering::Acquire) {
            stats.lost += missing;
        } else {
            stats.incomplete += missing;
        }
    }
    stats
}

fn close(c: &mut RecvConn, stats: &mut RecvStats, why: String) {
    c.closed = true;
    if !c.shared.dead.swap(true, Ordering::AcqRel) {
        let _ = c.shared.stream.shutdown(Shutdown::Both);
    }
    stats.errors.push(format!("connection {}: {why}", c.index));
}

fn read_conn(c: &mut RecvConn, t0: Instant, stats: &mut RecvStats) {
    while !c.closed {
        if c.end == c.buf.len() {
            if c.start > 0 {
                c.buf.copy_within(c.start..c.end, 0);
                c.end -= c.start;
                c.start = 0;
            } else {
                let grown = c.buf.len() * 2;
                c.buf.resize(grown, 0);
            }
        }
        let room = c.buf.len() - c.end;
        match (&c.shared.stream).read(&mut c.buf[c.end..]) {
            Ok(0) => {
                let why = "closed by the server".to_string();
                close(c, stats, why);
            }
            Ok(n) => {
                c.end += n;
                let now = since(t0);
                take_replies(c, now, stats);
                if n < room {
                    // A short read emptied the socket: data arriving later is a new edge
                    // for the poll, so the read that would only say WouldBlock is saved.
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => close(c, stats, format!("read failed: {e}")),
        }
    }
}

/// Takes every whole reply off the front of the connection's buffer; `now` is when they
/// had all arrived.
fn take_replies(c: &mut RecvConn, now: u64, stats: &mut RecvStats) {
    loop {
        let (kind, len) = match resp::parse_reply(&c.buf[c.start..c.end]) {
            Parsed::Reply { kind, len } => (kind, len),
            Parsed::Incomplete => break,
            Parsed::Invalid(why) => {
                close(c, stats, format!("protocol error: {why}"));
                return;
            }
        };
        let k = c.got;
        if k >= c.shared.sent.load(Ordering::Acquire) {
            close(c, stats, "a reply to no request".to_string());
            return;
        }
        let is_set = c.ops.is_set(k);
        let expected = matches!(
            (is_set, kind),
            (_, Kind::Error) | (true, Kind::Status) | (false, Kind::Bulk | Kind::Nil)
        );
        if !expected {
            let op = if is_set { "SET" } else { "GET" };
            close(c, stats, format!("unexpected {kind:?} reply to {op} #{k}"));
            return;
        }
        let due = c.schedule.at(k);
        let mut flags = if is_set { FLAG_SET } else { 0 };
        match kind {
            Kind::Error => {
                flags |= FLAG_ERROR;
                let text = resp::error_text(&c.buf[c.start..c.start + len]);
                if let Some(n) = stats.error_texts.get_mut(&text) {
                    *n += 1;
                } else if stats.error_texts.len() < 20 {
                    stats.error_texts.insert(text, 1);
                } else {
                    *stats
                        .error_texts
                        .entry("(other errors)".to_string())
                        .or_default() += 1;
                }
            }
            Kind::Nil => flags |= FLAG_NIL,
            _ => {}
        }
        stats.samples.push(Sample {
            due_us: (due / 1000) as u32,
            latency_us: (now.saturating_sub(due) / 1000).min(u64::from(u32::MAX)) as u32,
            flags,
        });
        c.got += 1;
        c.start += len;
    }
    if c.start == c.end {
        c.start = 0;
        c.end = 0;
    }
}

/// CPU time (user + system) of this process, all threads, from /proc/self/stat; in
/// clock ticks of USER_HZ, which Linux fixes at 100 for user space.
pub fn process_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command name: state is field 3 of the file, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}
