//! tessera-loadgen: an open-loop, fixed-rate SET/GET load for a Redis-compatible server,
//! whose latencies are measured from each request's intended send time.
//!
//! A closed-loop client (such as redis-benchmark) sends its next request only when a
//! reply comes back, so when the server stalls it stops offering load and the requests it
//! would have sent during the stall are never measured ("coordinated omission"): the tail
//! looks better than what a real client population would see. Here each connection has a
//! fixed schedule (one request every `connections / rate` seconds, from a random phase),
//! requests go out when due whether or not earlier ones were answered (pipelining on a
//! slow server), and latency = reply arrival − due time. If the generator itself falls
//! behind its schedule it says so (late sends, maximum lateness), and that lateness is
//! inside the latencies it reports, never hidden.
//!
//! See `bench/latency.py` for the benchmark that drives it, and `--help` for the options.
//!
//! A second mode, `tessera-loadgen cache`, is a closed-loop cache-aside workload (Zipf key
//! popularity, GET then SET on a miss) run as fast as the server answers; it measures
//! throughput and hit ratio, not latency (`bench/eviction.py`; see `cache`).

mod cache;
mod load;
mod preload;
mod report;
mod resp;
mod schedule;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;

/// Open-loop, fixed-rate SET/GET load; latency measured from each request's intended
/// send time (no coordinated omission).
///
/// Prints `started unix_us=<t>` on stdout when the load's schedule begins (t = 0 of the
/// output files), a summary on stderr at the end. Exit status: 0 when the run completed
/// (error replies are counted, not fatal), 1 when a connection failed or the preload got
/// errors, 2 on bad arguments.
#[derive(Parser, Debug)]
#[command(
    name = "tessera-loadgen",
    version,
    args_conflicts_with_subcommands = true
)]
struct Args {
    /// Another workload instead of the open-loop one.
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Connections; each gets `rate / connections` requests a second.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Requests a second offered, all connections together.
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// Seconds of load (after the preload, if any); 0 = no load.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Keys are `key:<n>` with n uniform in [0, keyspace).
    #[arg(long, default_value_t = 500_000)]
    keyspace: u64,
    /// Bytes of each SET's value: fresh random printable characters every time.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Share of SETs; the rest are GETs.
    #[arg(long, default_value_t = 0.5)]
    set_ratio: f64,
    /// First SET every key of the key space once (distinct random values, pipelined as
    /// fast as the server takes them), then run the load (none with --duration 0).
    #[arg(long)]
    preload: bool,
    /// Connections of the preload.
    #[arg(long, default_value_t = 8)]
    preload_connections: usize,
    /// Requests in flight per connection during the preload.
    #[arg(long, default_value_t = 64)]
    preload_pipeline: usize,
    /// Worker count: each is a sender thread and a receiver thread, owning a share of the
    /// connections.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Per-second CSV: second,sent,completed,errors,p50_us,p99_us,p999_us,max_us,late,
    /// max_late_us,received. Each row is about the requests due in that second
    /// ("received": replies that arrived in it).
    #[arg(long)]
    output: Option<PathBuf>,
    /// JSON document: start time, parameters, totals, whole-run percentiles and histogram,
    /// and one raw histogram per interval (for exact merging of windows).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Width of the JSON's intervals in milliseconds (a divisor of 1000).
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// A send more than this many microseconds after its due time counts as late.
    #[arg(long, default_value_t = 1000)]
    late_threshold_us: u64,
    /// Timer slack of the sender threads in nanoseconds (how late the kernel may wake a
    /// sleeping sender; Linux's default is 50,000). Lower = sends closer to their due time,
    /// at the cost of more wake-ups. Set through /proc/self/timerslack_ns when possible.
    #[arg(long, default_value_t = 1000)]
    timer_slack_ns: u64,
    /// Seconds to wait for the replies still due after the last send.
    #[arg(long, default_value_t = 10.0)]
    drain_timeout: f64,
    /// Also end the load (before --duration) when standard input reaches end of file, so
    /// that a driver can stop it by closing the pipe.
    #[arg(long)]
    until_stdin_eof: bool,
    /// Seed of the schedule phases, keys, operations and values.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(clap::Subcommand, Debug)]
enum Mode {
    Cache(CacheArgs),
}

/// Closed-loop cache workload (bench/eviction.py): each connection draws key ranks from a
/// Zipf distribution (ranks scattered over the names `key:<n>`), GETs the key and, on a
/// miss, SETs it (cache-aside); a share --set-ratio of the operations are SETs without a
/// read. Every value is distinct (key and a counter, padded). Runs --warmup-ops
/// operations (not timed), then --ops timed ones, as fast as the server answers.
///
/// Prints on stdout, one line per phase:
/// `warmup|timed ops=<n> seconds=<s> hits=<n> misses=<n> errors=<n> cpu_seconds=<s>`
/// (cpu_seconds: this process, all threads, during the phase, the warm-up's including
/// the set-up; `-` when unknown), and
/// `warmed` between the phases with --go-on-stdin. Error replies are counted, not fatal.
/// Exit status: 0 when every connection completed, 1 when one failed, 2 on bad arguments.
#[derive(clap::Args, Debug)]
struct CacheArgs {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Connections, each on a thread of its own.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// Operations each connection sends in one batch before reading their replies.
    #[arg(long, default_value_t = 32)]
    pipeline: usize,
    /// Keys are `key:<n>` with n in [0, keys).
    #[arg(long)]
    keys: u64,
    /// Exponent s of the Zipf distribution: rank r drawn with probability ∝ 1/r^s.
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    /// Bytes of each SET's value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Share of the operations that SET without reading first.
    #[arg(long, default_value_t = 0.1)]
    set_ratio: f64,
    /// Give every SET `EX <seconds>` (0: no expiry); a volatile-* policy needs one.
    #[arg(long, default_value_t = 0)]
    expire_seconds: u64,
    /// Operations of the warm-up (not timed), all connections together.
    #[arg(long, default_value_t = 0)]
    warmup_ops: u64,
    /// Operations of the timed phase, all connections together (cache fills count).
    #[arg(long)]
    ops: u64,
    /// After the warm-up, print `warmed` and wait for a line on standard input before
    /// the timed phase, so that a driver can take its readings at its start.
    #[arg(long)]
    go_on_stdin: bool,
    /// Seed of the key and operation draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn check_cache(args: &CacheArgs) -> Result<(), String> {
    if args.connections == 0 || args.connections > 1024 {
        return Err("--connections must be between 1 and 1024".into());
    }
    if args.pipeline == 0 || args.pipeline > 100_000 {
        return Err("--pipeline must be between 1 and 100000".into());
    }
    // The CDF takes 8 bytes a key.
    if args.keys == 0 || args.keys > 1 << 30 {
        return Err("--keys must be between 1 and 2^30".into());
    }
    if !(args.zipf.is_finite() && args.zipf >= 0.0) {
        return Err("--zipf must be a number >= 0".into());
    }
    if args.value_size > 512 << 20 {
        return Err("--value-size must be at most 512 MB".into());
    }
    if !(0.0..=1.0).contains(&args.set_ratio) {
        return Err("--set-ratio must be between 0 and 1".into());
    }
    Ok(())
}

fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address")))
}

/// Lowers this thread's timer slack (threads started after it inherit it). Returns the
/// slack in force.
fn set_timer_slack(ns: u64) -> Option<u64> {
    let path = "/proc/self/timerslack_ns";
    let _ = std::fs::write(path, ns.to_string());
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn check(args: &Args) -> Result<(), String> {
    if args.connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err("--rate must be a positive number".into());
    }
    if !(args.duration.is_finite() && (0.0..=3600.0).contains(&args.duration)) {
        return Err("--duration must be between 0 and 3600 seconds".into());
    }
    if args.keyspace == 0 {
        return Err("--keyspace must be at least 1".into());
    }
    if !(0.0..=1.0).contains(&args.set_ratio) {
        return Err("--set-ratio must be between 0 and 1".into());
    }
    if args.interval_ms == 0 || 1000 % args.interval_ms != 0 {
        return Err("--interval-ms must divide 1000".into());
    }
    if args.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if !(args.drain_timeout.is_finite() && args.drain_timeout >= 0.0) {
        return Err("--drain-timeout must be a number of seconds".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Mode::Cache(cache_args)) = &args.mode {
        if let Err(e) = check_cache(cache_args) {
            eprintln!("tessera-loadgen cache: {e}");
            return ExitCode::from(2);
        }
        return match run_cache(cache_args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("tessera-loadgen cache: {e}");
                ExitCode::from(1)
            }
        };
    }
    if let Err(e) = check(&args) {
        eprintln!("tessera-loadgen: {e}");
        return ExitCode::from(2);
    }
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("tessera-loadgen: {e}");
            ExitCode::from(1)
        }
    }
}

/// Ok(false): a connection failed.
fn run_cache(args: &CacheArgs) -> io::Result<bool> {
    let cfg = cache::CacheConfig {
        addr: resolve(&args.host, args.port)?,
        connections: args.connections,
        pipeline: args.pipeline,
        keys: args.keys,
        zipf: args.zipf,
        value_size: args.value_size,
        set_ratio: args.set_ratio,
        expire_seconds: (args.expire_seconds > 0).then_some(args.expire_seconds),
        warmup_ops: args.warmup_ops,
        ops: args.ops,
        seed: args.seed,
    };
    let cpu0 = load::process_cpu_seconds();
    let mut warm_cpu = None;
    let result = cache::run(&cfg, |_warm_seconds| {
        warm_cpu = cpu0.zip(load::process_cpu_seconds()).map(|(a, b)| b - a);
        if args.go_on_stdin {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "warmed");
            let _ = out.flush();
            let mut line = String::new();
            let _ = io::stdin().read_line(&mut line);
        }
    })?;
    let mut out = io::stdout().lock();
    for (name, phase, cpu) in [
        ("warmup", &result.warmup, warm_cpu),
        ("timed", &result.timed, result.timed_cpu_seconds),
    ] {
        writeln!(
            out,
            "{name} ops={} seconds={:.6} hits={} misses={} errors={} cpu_seconds={}",
            phase.ops,
            phase.seconds,
            phase.hits,
            phase.misses,
            phase.errors,
            cpu.map_or_else(|| "-".into(), |c| format!("{c:.2}"))
        )?;
        for text in &phase.error_texts {
            eprintln!("{name}: error reply: {text}");
        }
    }
    out.flush()?;
    for e in &result.connection_errors {
        eprintln!("connection error: {e}");
    }
    Ok(result.connection_errors.is_empty())
}

/// Ok(false): the run finished but a connection failed or the preload got errors.
fn run(args: &Args) -> io::Result<bool> {
    let addr = resolve(&args.host, args.port)?;
    let mut clean = true;
    if args.preload {
        let p = preload::run(
            addr,
            args.keyspace,
            args.value_size,
            args.preload_connections,
            args.preload_pipeline,
            args.seed,
        )?;
        eprintln!(
            "preload: {} keys of {} bytes in {:.2} s ({:.0} SET/s), {} errors",
            p.keys,
            args.value_size,
            p.seconds,
            p.keys as f64 / p.seconds.max(1e-9),
            p.errors
        );
        for t in &p.error_texts {
            eprintln!("preload error reply: {t}");
        }
        clean &= p.errors == 0;
    }
    if args.duration <= 0.0 {
        return Ok(clean);
    }

    let slack = set_timer_slack(args.timer_slack_ns);
    let stop = Arc::new(AtomicBool::new(false));
    if args.until_stdin_eof {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut stdin = io::stdin().lock();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            stop.store(true, Ordering::Relaxed);
        });
    }
    let cfg = load::LoadConfig {
        addr,
        connections: args.connections,
        threads: args.threads,
        rate: args.rate,
        duration: Duration::from_secs_f64(args.duration),
        keyspace: args.keyspace,
        value_size: args.value_size,
        set_ratio: args.set_ratio,
        seed: args.seed,
        interval_ns: args.interval_ms * 1_000_000,
        late_threshold_ns: args.late_threshold_us * 1000,
        drain_timeout: Duration::from_secs_f64(args.drain_timeout),
        stop,
    };
    let mut result = load::run(&cfg, |start_unix_us| {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "started unix_us={start_unix_us}");
        let _ = out.flush();
    })?;
    let totals = report::totals(&result);
    let params = report::Params {
        host: args.host.clone(),
        port: args.port,
        connections: args.connections,
        threads: args.threads.min(args.connections),
        rate: args.rate,
        duration_s: args.duration,
        keyspace: args.keyspace,
        value_size: args.value_size,
        set_ratio: args.set_ratio,
        seed: args.seed,
        interval_ms: args.interval_ms,
        late_threshold_us: args.late_threshold_us,
        timer_slack_ns: slack,
    };
    print_summary(&result, &totals, args, slack);
    report::write(
        &mut result,
        &totals,
        &params,
        args.output.as_deref(),
        args.json.as_deref(),
    )?;
    Ok(clean && result.connection_errors.is_empty())
}

fn print_summary(r: &load::LoadResult, t: &report::Totals, args: &Args, slack: Option<u64>) {
    let secs = r.end_ns as f64 / 1e9;
    eprintln!(
        "load: {:.0}/s offered over {} connections for {secs:.1} s: {} due, {} sent, {} replies ({} ok, {} errors, {} nil), {} incomplete, {} lost, {} unsent",
        args.rate,
        args.connections,
        r.scheduled,
        r.sent,
        r.samples.len(),
        t.ok,
        t.errors,
        t.nil,
        r.incomplete,
        r.lost,
        r.unsent
    );
    let q = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        if !h.is_empty() {
            h.value_at_quantile(q).to_string()
        } else {
            "-".into()
        }
    };
    eprintln!(
        "latency from the due time, µs: p50 {} p99 {} p99.9 {} max {}",
        q(&t.all, 0.5),
        q(&t.all, 0.99),
        q(&t.all, 0.999),
        if !t.all.is_empty() {
            t.all.max().to_string()
        } else {
            "-".into()
        }
    );
    eprintln!(
        "generator: {} sends later than {} µs, lateness p99 {} µs, max {} µs; timer slack {} ns; CPU {}",
        t.late,
        args.late_threshold_us,
        q(&r.lateness, 0.99),
        if !r.lateness.is_empty() {
            r.lateness.max().to_string()
        } else {
            "-".into()
        },
        slack.map_or_else(|| "unknown".into(), |s| s.to_string()),
        r.cpu_seconds.map_or_else(
            || "unknown".into(),
            |c| format!(
                "{c:.2} s = {:.1} % of one core",
                100.0 * c / r.wall_seconds.max(1e-9)
            )
        )
    );
    for (text, n) in &r.error_texts {
        eprintln!("error reply ({n}×): {text}");
    }
    for e in &r.connection_errors {
        eprintln!("connection error: {e}");
    }
}
