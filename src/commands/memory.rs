//! MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE and HELP, with Redis 7.0's reply
//! shapes, field names (in its order) and errors. The figures are Tessera's own, from its
//! structures and from jemalloc (`crate::memory` gathers and judges them); Redis reports
//! other numbers for the same data.

use super::{
    Action, Args, CommandSpec, Ctx, NOT_INTEGER, ReplyShows, SYNTAX_ERROR, eq_ignore_case, lossy,
    unknown_subcommand, wrong_arity,
};
use crate::command;
use crate::memory::{self, Overview};

pub fn commands() -> Vec<CommandSpec> {
    vec![command!(
        "memory",
        -2,
        0,
        (0, 0, 0),
        "server",
        "A container for memory diagnostics commands",
        memory
    )]
}

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// MEMORY USAGE's default number of elements (or list nodes) measured (Redis's
/// `OBJ_COMPUTE_SIZE_DEF_SAMPLES`).
const DEFAULT_SAMPLES: usize = 5;

fn memory(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    // Each subcommand's arity (Redis's table: the engine checks it too before a client's
    // command; a script's reaches the handler).
    let arity_ok = match sub.as_str() {
        "usage" => args.len() >= 3,
        "stats" | "doctor" | "malloc-stats" | "purge" | "help" => args.len() == 2,
        _ => {
            unknown_subcommand(ctx, "memory", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("memory|{sub}"));
        return Action::None;
    }
    match sub.as_str() {
        "usage" => usage(ctx, args[2], &args[3..]),
        "stats" => stats(ctx),
        "doctor" => {
            let overview = overview(ctx);
            let report = memory::doctor_report(&memory::diagnose(&overview));
            ctx.out.verbatim(report.as_bytes());
        }
        "malloc-stats" => ctx.out.verbatim(&memory::allocator_report()),
        "purge" => match memory::purge() {
            Ok(()) => ctx.out.ok(),
            Err(_) => ctx.out.error("ERR Error purging dirty pages"),
        },
        _ => {
            ctx.out.array(MEMORY_HELP.len());
            for line in MEMORY_HELP {
                ctx.out.simple(line);
            }
        }
    }
    Action::None
}

/// MEMORY USAGE key [SAMPLES count]: the options are checked before the key is looked
/// up (a bad count is an error for a missing key too), as Redis does.
fn usage(ctx: &mut Ctx, key: &[u8], options: &Args) {
    let mut samples = DEFAULT_SAMPLES;
    let mut rest = options.iter();
    while let Some(option) = rest.next() {
        let count = match rest.next() {
            Some(count) if eq_ignore_case(option, "samples") => count,
            _ => return ctx.out.error(SYNTAX_ERROR),
        };
        samples = match crate::resp::parse_i64(count) {
            None => return ctx.out.error(NOT_INTEGER),
            Some(n) if n < 0 => return ctx.out.error(SYNTAX_ERROR),
            Some(0) => usize::MAX,
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
    }
    // The reply tells whether the key exists: under `appendfsync always` it waits for the
    // log as a read's does (the container carries no READONLY flag, as in Redis).
    ctx.client.reply_shows = ctx.client.reply_shows.max(ReplyShows::Reads);
    // As Redis's `dictFind`: no expiry on the way, no hit or miss, no access.
    match ctx.keyspace.dbs[ctx.client.db].get(key) {
        Some(entry) => {
            let bytes = memory::key_usage(entry, samples);
            ctx.out.integer(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        None => ctx.out.null(),
    }
}

/// The figures MEMORY STATS and DOCTOR read, now.
fn overview(ctx: &mut Ctx) -> Overview {
    let allocator = memory::Allocator::read();
    let (_, process_rss) = crate::stats::memory_usage();
    let server = &mut *ctx.server;
    // Redis samples its peak after every command; Tessera's cron and INFO do, and so
    // does this reading.
    server.stats.used_memory_peak = server.stats.used_memory_peak.max(allocator.allocated);
    let pending_log =
        ctx.effects.buffer.capacity() as u64 + server.replication.not_counted_for_eviction();
    let not_counted = server.eviction.not_counted(ctx.keyspace, pending_log);
    let capture_own = ctx
        .keyspace
        .capture_bytes()
        .map_or(0, |(_, bytes)| bytes.held());
    let databases = ctx
        .keyspace
        .dbs
        .iter()
        .enumerate()
        .filter(|(_, db)| !db.is_empty())
        .map(|(index, db)| (index, memory::database_overhead(db)))
        .collect();
    Overview {
        peak_allocated: server.stats.used_memory_peak,
        total_allocated: allocator.allocated,
        startup_allocated: server.eviction.startup_bytes,
        // The calling session's output is the reply being written.
        clients_normal: ctx.host.clients_memory() + ctx.out.buf.capacity() as u64,
        clients: server.connected_clients,
        // The log's buffers: what eviction leaves out but the capture's own memory, and
        // what the log writer holds.
        aof_buffer: not_counted.saturating_sub(capture_own) + server.eviction.log_writer_bytes(),
        lua_caches: server.scripting.cache_bytes() as u64,
        scripts: server.scripting.len(),
        functions_caches: server.scripting.functions_bytes() as u64,
        capture_own,
        databases,
        keys: ctx.keyspace.dbs.iter().map(|db| db.len() as u64).sum(),
        allocator,
        process_rss,
    }
}

/// Reply values are integers but for Redis's ratios and percentages (doubles).
fn integer(ctx: &mut Ctx, name: &str, value: impl TryInto<i64>) {
    ctx.out.bulk(name.as_bytes());
    ctx.out.integer(value.try_into().unwrap_or(i64::MAX));
}

fn double(ctx: &mut Ctx, name: &str, value: f64) {
    ctx.out.bulk(name.as_bytes());
    ctx.out.double(value);
}

/// MEMORY STATS: a map in RESP3, a flat array in RESP2, with Redis 7.0's fields in its
/// order. Tessera has no cluster links or expires tables: those are 0.
fn stats(ctx: &mut Ctx) {
    const FIXED_FIELDS: usize = 27;
    let o = overview(ctx);
    let crate::replication::BufferMemory { backlog, replicas } =
        ctx.server.replication.buffer_memory();
    // The replicas' own outputs (what precedes the stream) are clients' buffers, counted
    // in neither figure of the shared buffer.
    let replica_outputs = ctx.server.replication.replica_output_bytes;
    ctx.out.map(FIXED_FIELDS + o.databases.len());
    integer(ctx, "peak.allocated", o.peak_allocated);
    integer(ctx, "total.allocated", o.total_allocated);
    integer(ctx, "startup.allocated", o.startup_allocated);
    integer(ctx, "replication.backlog", backlog);
    integer(ctx, "clients.slaves", replicas);
    integer(
        ctx,
        "clients.normal",
        o.clients_normal.saturating_sub(replica_outputs),
    );
    integer(ctx, "cluster.links", 0);
    integer(ctx, "aof.buffer", o.aof_buffer);
    integer(ctx, "lua.caches", o.lua_caches);
    integer(ctx, "functions.caches", o.functions_caches);
    for &(index, overhead) in &o.databases {
        ctx.out.bulk(format!("db.{index}").as_bytes());
        ctx.out.map(3);
        integer(ctx, "overhead.hashtable.main", overhead);
        integer(ctx, "overhead.hashtable.expires", 0);
        integer(ctx, "overhead.hashtable.slot-to-keys", 0);
    }
    integer(ctx, "overhead.total", o.overhead_total());
    integer(ctx, "keys.count", o.keys);
    integer(ctx, "keys.bytes-per-key", o.bytes_per_key());
    integer(ctx, "dataset.bytes", o.dataset());
    double(ctx, "dataset.percentage", o.dataset_percentage());
    double(ctx, "peak.percentage", o.peak_percentage());
    integer(ctx, "allocator.allocated", o.allocator.allocated);
    integer(ctx, "allocator.active", o.allocator.active);
    integer(ctx, "allocator.resident", o.allocator.resident);
    let (ratio, bytes) = o.allocator_fragmentation();
    double(ctx, "allocator-fragmentation.ratio", ratio);
    integer(ctx, "allocator-fragmentation.bytes", bytes);
    let (ratio, bytes) = o.allocator_rss();
    double(ctx, "allocator-rss.ratio", ratio);
    integer(ctx, "allocator-rss.bytes", bytes);
    let (ratio, bytes) = o.rss_overhead();
    double(ctx, "rss-overhead.ratio", ratio);
    integer(ctx, "rss-overhead.bytes", bytes);
    let (ratio, bytes) = o.fragmentation();
    double(ctx, "fragmentation", ratio);
    integer(ctx, "fragmentation.bytes", bytes);
}
