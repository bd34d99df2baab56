//! INFO: the sections Redis 7.0 prints, in its order, with its field names; Tessera's own
//! figures follow Redis's in the sections they belong to, prefixed `tessera_`.

use super::{Action, Args, Ctx, connection::REDIS_COMPAT_VERSION, lossy};
use std::fmt::Write;

/// Redis's `bytesToHuman`: K, M, G, T, P with two decimals, plain bytes below 1 KB and
/// from 1024 P up.
fn human_bytes(n: u64) -> String {
    if !(1024..1 << 60).contains(&n) {
        return format!("{n}B");
    }
    let units = [
        ("P", 1u64 << 50),
        ("T", 1 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ];
    let (suffix, size) = units
        .into_iter()
        .find(|&(_, size)| n >= size)
        .expect("n is 1 KB or more");
    format!("{:.2}{suffix}", n as f64 / size as f64)
}

/// Every section, in Redis 7.0's order.
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// What `all` has and the default leaves out (Redis's `genInfoSectionDict`).
const NOT_DEFAULT: &[&str] = &["commandstats", "latencystats"];

pub(super) fn info(ctx: &mut Ctx, args: &Args) -> Action {
    let asked: Vec<String> = args[1..]
        .iter()
        .map(|a| lossy(a).to_ascii_lowercase())
        .collect();
    let default = asked.is_empty() || asked.iter().any(|s| s == "default");
    let all = asked.iter().any(|s| s == "all" || s == "everything");
    let wanted = |section: &str| {
        all || (default && !NOT_DEFAULT.contains(&section)) || asked.iter().any(|s| s == section)
    };
    let mut text = String::new();
    for section in ALL_SECTIONS.iter().filter(|section| wanted(section)) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        info_section(ctx, section, &mut text);
    }
    ctx.out.verbatim(text.as_bytes());
    Action::None
}

fn kv(out: &mut String, name: &str, value: &dyn std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

/// Seconds since `started`, or -1 when nothing is running (Redis's convention).
fn seconds_or_minus_one(started: Option<std::time::Instant>) -> i64 {
    started.map_or(-1, |t| t.elapsed().as_secs() as i64)
}

fn ok_or_err(failed: bool) -> &'static str {
    if failed { "err" } else { "ok" }
}

/// INFO persistence: Redis 7.0's fields in its order (fork and copy-on-write figures are
/// 0: there is no fork), then Tessera's own.
fn info_persistence(
    server: &crate::commands::ServerState,
    capture_own_bytes: u64,
    out: &mut String,
) {
    let p = &server.persistence;
    let config = &server.config;
    out.push_str("# Persistence\r\n");
    kv(out, "loading", &(p.loading.is_some() as u8));
    kv(out, "async_loading", &u8::from(p.async_loading));
    kv(out, "current_cow_peak", &0);
    kv(out, "current_cow_size", &0);
    kv(out, "current_cow_size_age", &0);
    kv(out, "current_fork_perc", &"0.00");
    kv(
        out,
        "current_save_keys_processed",
        &p.current_save_keys_processed,
    );
    kv(out, "current_save_keys_total", &p.current_save_keys_total);
    kv(out, "rdb_changes_since_last_save", &server.dirty);
    // A full sync's snapshot is a BGSAVE to Redis (its child is of the same type).
    let saving = p.rdb_bgsave_in_progress || server.replication.full_sync_in_progress;
    kv(out, "rdb_bgsave_in_progress", &u8::from(saving));
    kv(out, "rdb_last_save_time", &server.last_save_unix_seconds);
    kv(
        out,
        "rdb_last_bgsave_status",
        &ok_or_err(p.rdb_last_bgsave_failed),
    );
    kv(
        out,
        "rdb_last_bgsave_time_sec",
        &p.rdb_last_bgsave_seconds.map_or(-1, |s| s as i64),
    );
    kv(
        out,
        "rdb_current_bgsave_time_sec",
        &seconds_or_minus_one(p.rdb_bgsave_started),
    );
    kv(out, "rdb_saves", &p.rdb_saves);
    kv(out, "rdb_last_cow_size", &0);
    kv(
        out,
        "rdb_last_load_keys_expired",
        &p.rdb_last_load_keys_expired,
    );
    kv(
        out,
        "rdb_last_load_keys_loaded",
        &p.rdb_last_load_keys_loaded,
    );
    // As in Redis, the log counts as enabled once it is loaded and being appended to.
    kv(
        out,
        "aof_enabled",
        &((config.appendonly && p.loading.is_none()) as u8),
    );
    kv(
        out,
        "aof_rewrite_in_progress",
        &(p.aof_rewrite_in_progress as u8),
    );
    kv(
        out,
        "aof_rewrite_scheduled",
        &(p.aof_rewrite_scheduled as u8),
    );
    kv(
        out,
        "aof_last_rewrite_time_sec",
        &p.aof_last_rewrite_seconds.map_or(-1, |s| s as i64),
    );
    kv(
        out,
        "aof_current_rewrite_time_sec",
        &seconds_or_minus_one(p.aof_rewrite_started),
    );
    kv(
        out,
        "aof_last_bgrewrite_status",
        &ok_or_err(p.aof_last_bgrewrite_failed),
    );
    kv(out, "aof_rewrites", &p.aof_rewrites);
    kv(
        out,
        "aof_rewrites_consecutive_failures",
        &p.aof_rewrites_consecutive_failures,
    );
    kv(
        out,
        "aof_last_write_status",
        &ok_or_err(server.log_error.is_some()),
    );
    kv(out, "aof_last_cow_size", &0);
    kv(out, "module_fork_in_progress", &0);
    kv(out, "module_fork_last_cow_size", &0);
    if config.appendonly {
        kv(out, "aof_current_size", &p.aof_current_size);
        kv(out, "aof_base_size", &p.aof_base_size);
        kv(out, "aof_pending_rewrite", &(p.aof_rewrite_scheduled as u8));
        kv(out, "aof_buffer_length", &p.aof_pending_bytes);
        kv(out, "aof_pending_bio_fsync", &0);
        kv(out, "aof_delayed_fsync", &p.aof_delayed_fsync);
    }
    if let Some(loading) = &p.loading {
        use std::sync::atomic::Ordering;
        let total = loading.progress.total_bytes.load(Ordering::Relaxed);
        let loaded = loading
            .progress
            .loaded_bytes
            .load(Ordering::Relaxed)
            .min(total);
        let elapsed = loading.started.elapsed().as_secs_f64();
        let fraction = if total == 0 {
            0.0
        } else {
            loaded as f64 / total as f64
        };
        let eta = if loaded == 0 {
            1
        } else {
            ((total - loaded) as f64 * elapsed / loaded as f64) as u64
        };
        kv(out, "loading_start_time", &loading.start_unix_seconds);
        kv(out, "loading_total_bytes", &total);
        kv(out, "loading_rdb_used_mem", &0);
        kv(out, "loading_loaded_bytes", &loaded);
        kv(
            out,
            "loading_loaded_perc",
            &format!("{:.2}", fraction * 100.0),
        );
        kv(out, "loading_eta_seconds", &eta);
    }
    kv(out, "tessera_aof_buffer_peak", &p.aof_pending_peak_bytes);
    kv(out, "tessera_aof_base_parts", &p.aof_base_parts);
    kv(
        out,
        "tessera_aof_rewrite_threads",
        &config.aof_rewrite_threads(),
    );
    kv(out, "tessera_last_rewrite_bytes", &p.aof_last_rewrite_bytes);
    kv(out, "tessera_last_rewrite_keys", &p.aof_last_rewrite_keys);
    kv(out, "tessera_capture_held_bytes", &p.capture_held_bytes);
    kv(out, "tessera_capture_own_bytes", &capture_own_bytes);
    let rate = match p.background_rate {
        crate::storage::Rate::Unlimited => "unlimited".to_string(),
        crate::storage::Rate::Paused => "paused".to_string(),
        crate::storage::Rate::BytesPerSecond(n) => n.to_string(),
    };
    kv(out, "tessera_background_write_rate", &rate);
    let stats = &server.stats;
    kv(
        out,
        "tessera_capture_serialised_values",
        &stats.capture_serialised_values,
    );
    kv(
        out,
        "tessera_capture_copied_values",
        &stats.capture_copied_values,
    );
    kv(
        out,
        "tessera_last_load_seconds",
        &format!("{:.3}", p.loading_seconds),
    );
    kv(out, "tessera_last_load_keys", &p.loaded_keys);
}

fn info_section(ctx: &mut Ctx, section: &str, out: &mut String) {
    let server = &*ctx.server;
    let config = &server.config;
    match section {
        "server" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let uptime = server.started_at.elapsed().as_secs();
            out.push_str("# Server\r\n");
            kv(out, "redis_version", &REDIS_COMPAT_VERSION);
            kv(out, "tessera_version", &env!("CARGO_PKG_VERSION"));
            kv(out, "redis_git_sha1", &"00000000");
            kv(out, "redis_git_dirty", &0);
            kv(out, "redis_mode", &"standalone");
            kv(out, "os", &std::env::consts::OS);
            kv(out, "arch_bits", &64);
            kv(out, "multiplexing_api", &"epoll");
            kv(out, "process_id", &std::process::id());
            kv(out, "run_id", &server.run_id);
            kv(out, "tcp_port", &server.tcp_port);
            kv(out, "server_time_usec", &now.as_micros());
            kv(out, "uptime_in_seconds", &uptime);
            kv(out, "uptime_in_days", &(uptime / 86400));
            kv(out, "hz", &config.hz);
            kv(out, "configured_hz", &config.hz);
            kv(out, "executable", &server.executable);
            kv(out, "config_file", &server.config_file);
            // Only while a shutdown waits for its replicas, as Redis.
            if let Some(left) = server.shutdown.remaining_ms(crate::clock::unix_ms()) {
                kv(out, "shutdown_in_milliseconds", &left);
            }
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            // As Redis: replicas are not counted among the clients.
            let replicas = server.replication.replicas.len();
            kv(
                out,
                "connected_clients",
                &server.connected_clients.saturating_sub(replicas),
            );
            kv(out, "cluster_connections", &0);
            kv(out, "maxclients", &config.clients_max);
            kv(
                out,
                "blocked_clients",
                &(server.blocked.clients() + server.pause.held_clients),
            );
            kv(out, "tracking_clients", &server.tracking.client_count());
        }
        "memory" => {
            let (used, rss) = crate::stats::memory_usage();
            let pending_log = ctx.effects.buffer.capacity() as u64
                + server.replication.not_counted_for_eviction();
            let not_counted = server.eviction.not_counted(ctx.keyspace, pending_log);
            // Redis's overhead is the start-up memory, buffers and table overheads; here
            // the start-up memory, what eviction does not count (this turn's records,
            // replicas' outputs, the capture's own memory) and the log writer's batches.
            let startup = server.eviction.startup_bytes;
            let overhead = startup + not_counted + server.eviction.log_writer_bytes();
            let dataset = used.saturating_sub(overhead);
            let net = used.saturating_sub(startup).max(1);
            out.push_str("# Memory\r\n");
            kv(out, "used_memory", &used);
            kv(out, "used_memory_human", &human_bytes(used));
            kv(out, "used_memory_rss", &rss);
            kv(out, "used_memory_rss_human", &human_bytes(rss));
            kv(out, "used_memory_overhead", &overhead);
            kv(out, "used_memory_startup", &startup);
            kv(out, "used_memory_dataset", &dataset);
            kv(
                out,
                "used_memory_dataset_perc",
                &format!("{:.2}%", dataset as f64 * 100.0 / net as f64),
            );
            // The scripts' cache and the functions' libraries, counted as Redis counts them.
            let scripting = &server.scripting;
            kv(out, "number_of_cached_scripts", &scripting.len());
            let (libraries, functions) = scripting.function_counts();
            kv(out, "number_of_functions", &functions);
            kv(out, "number_of_libraries", &libraries);
            // Redis prints it as a signed number (`%lld`): past 2^63, negative.
            kv(out, "maxmemory", &(config.memory_bytes_max as i64));
            kv(
                out,
                "maxmemory_human",
                &human_bytes(config.memory_bytes_max),
            );
            kv(out, "maxmemory_policy", &config.eviction_policy.name());
            kv(out, "mem_not_counted_for_evict", &not_counted);
            // As Redis 7: one buffer the backlog and the replicas share.
            let buffers = server.replication.buffer_memory();
            kv(out, "mem_replication_backlog", &buffers.backlog);
            kv(
                out,
                "mem_total_replication_buffers",
                &(buffers.backlog + buffers.replicas),
            );
            kv(out, "mem_clients_slaves", &buffers.replicas);
            kv(
                out,
                "mem_aof_buffer",
                &server.persistence.aof_buffered_bytes,
            );
            kv(out, "mem_allocator", &"jemalloc");
            // No defragmentation.
            kv(out, "active_defrag_running", &0);
            kv(out, "lazyfree_pending_objects", &server.lazyfree.pending());
            kv(out, "lazyfreed_objects", &server.lazyfree.freed());
        }
        "persistence" => {
            let own = ctx
                .keyspace
                .capture_bytes()
                .map_or(0, |(_, bytes)| bytes.held());
            info_persistence(server, own, out)
        }
        "stats" => {
            let s = &server.stats;
            out.push_str("# Stats\r\n");
            kv(
                out,
                "total_connections_received",
                &s.total_connections_received,
            );
            kv(out, "total_commands_processed", &s.total_commands_processed);
            kv(out, "instantaneous_ops_per_sec", &s.ops_rate.per_second());
            kv(out, "total_net_input_bytes", &s.total_net_input_bytes);
            kv(out, "total_net_output_bytes", &s.total_net_output_bytes);
            kv(
                out,
                "instantaneous_input_kbps",
                &format!("{:.2}", s.input_rate.per_second() as f64 / 1024.0),
            );
            kv(
                out,
                "instantaneous_output_kbps",
                &format!("{:.2}", s.output_rate.per_second() as f64 / 1024.0),
            );
            kv(out, "rejected_connections", &s.rejected_connections);
            let r = &server.replication.stats;
            kv(out, "sync_full", &r.sync_full);
            kv(out, "sync_partial_ok", &r.sync_partial_ok);
            kv(out, "sync_partial_err", &r.sync_partial_err);
            kv(out, "expired_keys", &s.expired_keys);
            kv(out, "evicted_keys", &s.evicted_keys);
            kv(out, "evicted_clients", &0);
            let (total, current) = crate::engine::evict::Eviction::exceeded_ms(s);
            kv(out, "total_eviction_exceeded_time", &total);
            kv(out, "current_eviction_exceeded_time", &current);
            kv(out, "keyspace_hits", &s.keyspace_hits);
            kv(out, "keyspace_misses", &s.keyspace_misses);
            kv(out, "pubsub_channels", &server.pubsub.channel_count(false));
            kv(out, "pubsub_patterns", &server.pubsub.pattern_count());
            kv(
                out,
                "pubsubshard_channels",
                &server.pubsub.channel_count(true),
            );
            // What Tessera never does, with Redis's names, as 0: it never forks, keeps no
            // MIGRATE connection and has no active defragmentation (monitoring tools and
            // Redis's own tests read these fields).
            kv(out, "latest_fork_usec", &0);
            kv(out, "total_forks", &0);
            kv(out, "migrate_cached_sockets", &0);
            for field in [
                "active_defrag_hits",
                "active_defrag_misses",
                "active_defrag_key_hits",
                "active_defrag_key_misses",
                "total_active_defrag_time",
                "current_active_defrag_time",
            ] {
                kv(out, field, &0);
            }
            kv(out, "tracking_total_keys", &server.tracking.total_keys());
            kv(out, "tracking_total_items", &server.tracking.total_items());
            kv(
                out,
                "tracking_total_prefixes",
                &server.tracking.total_prefixes(),
            );
            kv(
                out,
                "unexpected_error_replies",
                &server.stats.unexpected_error_replies,
            );
            kv(
                out,
                "total_error_replies",
                &server.commands.total_error_replies,
            );
            // No I/O threads (`io-threads 1`, as Redis's default).
            kv(out, "io_threaded_reads_processed", &0);
            kv(out, "io_threaded_writes_processed", &0);
            kv(
                out,
                "reply_buffer_shrinks",
                &server.stats.reply_buffer_shrinks,
            );
            kv(
                out,
                "reply_buffer_expands",
                &server.stats.reply_buffer_expands,
            );
        }
        "replication" => info_replication(server, out),
        "cpu" => {
            // SAFETY: `rusage` is plain integers, for which all zeroes is a valid value.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `usage` is a valid, exclusively borrowed `rusage` for the call.
            unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
            let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            out.push_str("# CPU\r\n");
            kv(
                out,
                "used_cpu_sys",
                &format!("{:.6}", seconds(usage.ru_stime)),
            );
            kv(
                out,
                "used_cpu_user",
                &format!("{:.6}", seconds(usage.ru_utime)),
            );
        }
        "modules" => out.push_str("# Modules\r\n"),
        "cluster" => {
            out.push_str("# Cluster\r\n");
            kv(out, "cluster_enabled", &0);
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for line in server.commands.command_lines() {
                let per_call = if line.calls == 0 {
                    0.0
                } else {
                    line.usec as f64 / line.calls as f64
                };
                let _ = write!(
                    out,
                    "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                    line.name, line.calls, line.usec, line.rejected, line.failed
                );
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            for (prefix, count) in server.commands.error_lines() {
                let _ = write!(
                    out,
                    "errorstat_{}:count={count}\r\n",
                    String::from_utf8_lossy(prefix)
                );
            }
        }
        "latencystats" => {
            out.push_str("# Latencystats\r\n");
            let percentiles = &config.latency_tracking_percentiles;
            for (name, histogram) in server.commands.histograms() {
                let values: Vec<String> = percentiles
                    .iter()
                    .map(|&p| {
                        let label = crate::command_stats::percentile_label(p);
                        let value = crate::command_stats::percentile_usec(histogram, p);
                        format!("p{label}={value:.3}")
                    })
                    .collect();
                let _ = write!(
                    out,
                    "latency_percentiles_usec_{name}:{}\r\n",
                    values.join(",")
                );
            }
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            for (index, db) in ctx.keyspace.dbs.iter().enumerate() {
                if !db.is_empty() {
                    let _ = write!(
                        out,
                        "db{index}:keys={},expires={},avg_ttl=0\r\n",
                        db.len(),
                        db.volatile_len()
                    );
                }
            }
        }
        _ => {}
    }
}

/// INFO replication, a master's fields (Redis 7.0's `genRedisInfoString`).
fn info_replication(server: &super::ServerState, out: &mut String) {
    let replication = &server.replication;
    out.push_str("# Replication\r\n");
    let now = crate::clock::unix_seconds();
    match &replication.master {
        None => kv(out, "role", &"master"),
        Some(link) => {
            use crate::replication::replica::LinkState;
            kv(out, "role", &"slave");
            kv(out, "master_host", &link.host);
            kv(out, "master_port", &link.port);
            let up = link.state == LinkState::Connected;
            kv(out, "master_link_status", &if up { "up" } else { "down" });
            // Redis's -1 until the sync is done (no master client yet).
            let last_io = if link.state != LinkState::Connected {
                -1
            } else {
                now - link.last_io
            };
            kv(out, "master_last_io_seconds_ago", &last_io);
            let transfer = link.state == LinkState::Transfer;
            kv(out, "master_sync_in_progress", &u8::from(transfer));
            // Redis's 1 before the first sync.
            let offset = link.history.as_ref().map_or(1, |(_, offset)| *offset);
            kv(out, "slave_read_repl_offset", &offset);
            kv(out, "slave_repl_offset", &offset);
            if transfer {
                let size = link.transfer_size.unwrap_or(0);
                let read = link.transfer_read;
                kv(out, "master_sync_total_bytes", &size);
                kv(out, "master_sync_read_bytes", &read);
                kv(out, "master_sync_left_bytes", &(size as i64 - read as i64));
                let percent = if size == 0 {
                    0.0
                } else {
                    read as f64 * 100.0 / size as f64
                };
                kv(out, "master_sync_perc", &format!("{percent:.2}"));
                kv(
                    out,
                    "master_sync_last_io_seconds_ago",
                    &(now - link.last_io),
                );
            }
            if !up {
                let down = link.down_since.map_or(-1, |since| now - since);
                kv(out, "master_link_down_since_seconds", &down);
            }
            let config = &server.config;
            kv(
                out,
                "slave_priority",
                &config.directive_value("replica-priority"),
            );
            kv(
                out,
                "slave_read_only",
                &u8::from(config.replication.replica_read_only),
            );
            let announced = config.directive_value("replica-announced") == "yes";
            kv(out, "replica_announced", &u8::from(announced));
        }
    }
    kv(out, "connected_slaves", &replication.replicas.len());
    if server.config.replication.write_quorum().is_set() {
        kv(out, "min_slaves_good_slaves", &replication.replicas.good());
    }
    for (index, replica) in replication.replicas.iter().enumerate() {
        kv(
            out,
            &format!("slave{index}"),
            &format!(
                "ip={},port={},state={},offset={},lag={}",
                replica.ip,
                replica.announced.listening_port,
                replica.state.info_name(),
                replica.ack_offset,
                replica.lag_seconds(now)
            ),
        );
    }
    let backlog = replication.backlog.as_ref();
    kv(
        out,
        "master_failover_state",
        &replication.failover.state.info_name(),
    );
    kv(out, "master_replid", &replication.ids.replid);
    kv(out, "master_replid2", &replication.ids.replid2);
    // A replica's offset is its master's stream's, as processed.
    let offset = replication
        .master
        .as_ref()
        .map_or(replication.offset as i64, |link| link.processed_offset());
    kv(out, "master_repl_offset", &offset);
    kv(out, "second_repl_offset", &replication.ids.second_offset);
    kv(out, "repl_backlog_active", &u8::from(backlog.is_some()));
    kv(
        out,
        "repl_backlog_size",
        &server.config.replication.backlog_bytes,
    );
    kv(
        out,
        "repl_backlog_first_byte_offset",
        &backlog.map_or(0, |b| b.first_offset()),
    );
    kv(out, "repl_backlog_histlen", &backlog.map_or(0, |b| b.len()));
}
