//! Configuration: Redis's directive names, defaults and value syntax.
//!
//! The same table serves the config file, `--directive value` flags and
//! `CONFIG GET/SET`, so a directive is described once. Directives that name files
//! (`dir`, `appendfilename`, `appenddirname`) are immutable at run time.

#[macro_use]
mod directives;
mod encoding;
mod error;
mod inert;
pub mod rewrite;

use directives::*;
pub use directives::{DIRECTIVES, Directive, memtoull, parse_memory};
pub use encoding::{EncodingLimits, LIMIT_DIRECTIVES};
pub use error::{ConfigError, ConfigLine, ValueError};
pub use inert::InertValues;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    Always,
    EverySec,
    No,
}

impl FsyncPolicy {
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }
}

/// `maxmemory-policy`: what goes when memory is over `maxmemory` (`engine::evict`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    NoEviction,
}

impl EvictionPolicy {
    /// In Redis's order (its error lists them so).
    pub const ALL: [EvictionPolicy; 8] = [
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::NoEviction,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::NoEviction => "noeviction",
        }
    }

    /// The key access fields are LFU counters (Redis's MAXMEMORY_FLAG_LFU).
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLfu | EvictionPolicy::AllKeysLfu
        )
    }

    /// Only keys with an expiry may go (the `volatile-*` policies).
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }

    fn parse(args: &[String]) -> Result<EvictionPolicy, ValueError> {
        let word = one(args)?;
        EvictionPolicy::ALL
            .into_iter()
            .find(|policy| policy.name().eq_ignore_ascii_case(word))
            .ok_or(ValueError::NotOneOf {
                choices: "volatile-lru, volatile-lfu, volatile-random, volatile-ttl, \
                          allkeys-lru, allkeys-lfu, allkeys-random, noeviction",
            })
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    /// The backlog given to listen(2) (Linux caps it at `net.core.somaxconn`).
    pub tcp_backlog: i32,
    /// The Unix socket to listen on as well (`unixsocket`; none by default).
    pub unixsocket: Option<String>,
    /// The socket's permissions (`unixsocketperm`, octal; 0 leaves them to the umask).
    pub unixsocketperm: u32,
    pub protected_mode: bool,
    pub dir: PathBuf,
    pub appendonly: bool,
    pub appendfilename: String,
    /// `aof-disable-auto-gc`: keep the history files a compaction leaves (listed).
    pub aof_disable_auto_gc: bool,
    pub appenddirname: String,
    pub dbfilename: String,
    pub appendfsync: FsyncPolicy,
    pub aof_load_truncated: bool,
    pub requirepass: Option<String>,
    pub clients_max: usize,
    pub databases: usize,
    pub bulk_bytes_max: usize,
    pub query_buffer_bytes_max: usize,
    /// `client-output-buffer-limit`, per class of client.
    pub output_buffer_limits: OutputBufferLimits,
    pub timeout_seconds: u64,
    /// `lazyfree-lazy-user-del`: DEL frees as UNLINK does (`crate::lazyfree`).
    pub lazyfree_user_del: bool,
    /// `lazyfree-lazy-user-flush`: FLUSHALL / FLUSHDB without a mode flush
    /// asynchronously.
    pub lazyfree_user_flush: bool,
    pub loglevel: String,
    pub logfile: String,
    pub hz: u32,
    pub daemonize: bool,
    pub pidfile: String,
    /// `shutdown-timeout`: seconds a shutdown waits for lagging replicas (0: no wait).
    pub shutdown_timeout_seconds: u64,
    /// Writer threads (and snapshot parts) of a compaction; 0: one per CPU.
    pub aof_rewrite_threads_setting: usize,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    /// Redis's `aof-rewrite-incremental-fsync` / `rdb-save-incremental-fsync`: a
    /// compaction's parts / a BGSAVE's file start writeback every 4 MB instead of leaving
    /// it all to the final fsync.
    pub aof_rewrite_incremental_fsync: bool,
    pub rdb_save_incremental_fsync: bool,
    /// Tessera's `aof-rewrite-max-rate`: bytes per second a compaction (or BGSAVE) may
    /// write over all its parts; 0, no limit. Applies to a running job from the next
    /// cron tick.
    pub aof_rewrite_max_rate: u64,
    /// Tessera's `aof-rewrite-adaptive-rate`: the writers of a compaction or BGSAVE go as
    /// fast as the event loop's load and the job's memory and log budgets allow
    /// (`server::pace`); no (the default until it is measured on a quiet machine: see
    /// BENCHMARKS.md): full speed (or `aof-rewrite-max-rate`).
    pub aof_rewrite_adaptive_rate: bool,
    /// Compact-encoding thresholds (`hash-max-listpack-entries` and the rest), pushed to
    /// `types::limits` at start-up and after CONFIG SET.
    pub encoding_limits: EncodingLimits,
    /// `save <seconds> <changes>` points: a BGSAVE when both are reached.
    pub save_points: Vec<(u64, u64)>,
    /// A `save` line has been read from the current source: later lines add points
    /// (redis.conf lists one point per line), the first replaces the defaults.
    pub save_points_explicit: bool,
    /// Redis's `rdb-key-save-delay`: microseconds a snapshot writer sleeps after each key
    /// (a testing aid that makes background snapshots slow on purpose; 0 in production).
    pub rdb_key_save_delay_us: u64,
    /// Redis's `key-load-delay`: microseconds start-up loading sleeps after each key or
    /// record (a testing aid that makes loading slow on purpose; 0 in production).
    pub key_load_delay_us: u64,
    /// `rdbcompression`: LZF for long strings in snapshots.
    pub rdbcompression: bool,
    /// `aof-use-rdb-preamble`: the log's base in RDB parts (yes) or as one file of
    /// commands (no), as Redis's.
    pub aof_use_rdb_preamble: bool,
    /// `stop-writes-on-bgsave-error`: writes are refused (MISCONF) while the last BGSAVE
    /// has failed and `save` points are configured.
    pub stop_writes_on_bgsave_error: bool,
    /// `notify-keyspace-events`: which keyspace notifications are published.
    pub notify_keyspace_events: crate::notify::KeyspaceEvents,
    /// `busy-reply-threshold` (alias `lua-time-limit`): milliseconds a script runs before
    /// other clients are answered -BUSY and SCRIPT KILL can stop it; 0: never.
    pub busy_reply_threshold_ms: u64,
    /// `aclfile`: where ACL LOAD and ACL SAVE read and write the users (relative to `dir`
    /// unless absolute); empty: none.
    pub aclfile: String,
    /// The config file's `user <name> <rules...>` lines (`crate::acl::file`), checked as
    /// they are read and applied at start-up.
    pub acl_users: Vec<Vec<String>>,
    /// `acl-pubsub-default`: new users may use every channel (`allchannels`) or none
    /// (`resetchannels`, Redis 7.0's default).
    pub acl_pubsub_default_all: bool,
    /// `acllog-max-len`: entries ACL LOG keeps.
    pub acllog_max_len: u64,
    /// `enable-protected-configs`: CONFIG SET of `dir` and `dbfilename`.
    pub enable_protected_configs: ProtectedAction,
    /// `enable-debug-command`: who may run DEBUG (the engine refuses the others).
    pub enable_debug_command: ProtectedAction,
    /// `enable-module-command`: MODULE LOAD, LOADEX and UNLOAD (refused anyway: Tessera
    /// loads no Redis module).
    pub enable_module_command: ProtectedAction,
    /// `tracking-table-max-keys`: keys client-side caching remembers for its readers; past
    /// it, keys are forgotten at random (their readers told to drop them). 0: no limit.
    pub tracking_table_max_keys: u64,
    /// `maxmemory`: the memory, in bytes, past which keys are evicted or writes refused
    /// (`engine::evict`); 0, no limit.
    pub memory_bytes_max: u64,
    /// `maxmemory-policy`.
    pub eviction_policy: EvictionPolicy,
    /// `maxmemory-samples`: keys sampled per database for each eviction.
    pub eviction_samples: u32,
    /// `maxmemory-eviction-tenacity` (0..100): how long one command's eviction may run.
    pub eviction_tenacity: u32,
    /// `lfu-log-factor` and `lfu-decay-time` (minutes): the LFU counter's rules.
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
    /// `slowlog-log-slower-than` (µs; 0 logs every command, -1 none) and
    /// `slowlog-max-len`: the slow log (`crate::slowlog`).
    pub slowlog_slower_than_us: i64,
    pub slowlog_max_len: u64,
    /// `latency-monitor-threshold` (ms; 0: off): the latency monitor (`crate::latency`).
    pub latency_monitor_threshold_ms: u64,
    /// `latency-tracking` and `latency-tracking-info-percentiles`: per-command latency
    /// histograms and the percentiles INFO latencystats prints.
    pub latency_tracking: bool,
    pub latency_tracking_percentiles: Vec<f64>,
    /// The replication directives a master acts on (`crate::replication`).
    pub replication: ReplicationConfig,
    /// The directives Tessera accepts without acting on them (`inert`).
    pub inert: InertValues,
}

/// Who may do a protected action (Redis's `enable-protected-configs` and its kin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtectedAction {
    No,
    Yes,
    /// Only clients connected from 127.0.0.1 or ::1.
    Local,
}

impl ProtectedAction {
    fn name(self) -> &'static str {
        match self {
            ProtectedAction::No => "no",
            ProtectedAction::Yes => "yes",
            ProtectedAction::Local => "local",
        }
    }

    fn parse(args: &[String]) -> Result<ProtectedAction, ValueError> {
        match one(args)?.to_ascii_lowercase().as_str() {
            "no" => Ok(ProtectedAction::No),
            "yes" => Ok(ProtectedAction::Yes),
            "local" => Ok(ProtectedAction::Local),
            _ => Err(ValueError::NotOneOf {
                choices: "no, yes, local",
            }),
        }
    }

    /// Whether a client (local: connected from 127.0.0.1 or ::1) may do it.
    pub fn allows(self, local: bool) -> bool {
        self == ProtectedAction::Yes || (self == ProtectedAction::Local && local)
    }
}

/// Directives whose CONFIG SET needs `enable-protected-configs` (Redis 7.0's
/// PROTECTED_CONFIG: they name files the server writes).
pub const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Directives Redis changes at run time but Tessera only at start (its listeners, files
/// and log are set up once): CONFIG SET takes the value they have, as a no-op (what
/// Redis's does then too), and refuses any other as immutable.
pub const START_ONLY: &[&str] = &["port", "bind", "dir", "dbfilename"];

/// Directives CONFIG SET refuses with -LOADING while the dataset loads, a replica's
/// async loading included (Redis 7.0's DENY_LOADING_CONFIG).
pub const DENY_WHILE_LOADING: &[&str] = &["appendonly", "repl-diskless-load", "dir"];

/// With `aof-rewrite-threads 0`, the dataset bytes each part of a base is given at least:
/// a small dataset gets one part (Redis's own file name, one file to write, sync and
/// load), a large one a part per CPU. Below this size a second thread saves less time
/// than its file's creation, fsync and directory entry cost.
pub const BYTES_PER_PART_MIN: u64 = 64 << 20;

impl Config {
    /// The most writer threads a compaction uses: `aof-rewrite-threads`, or one per CPU.
    pub fn aof_rewrite_threads(&self) -> usize {
        match self.aof_rewrite_threads_setting {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// The parts (and writer threads) of a compaction of `dataset_bytes`: as many as
    /// `aof-rewrite-threads` says, or with 0 one per `BYTES_PER_PART_MIN`, one per CPU
    /// at most.
    pub fn aof_rewrite_parts(&self, dataset_bytes: u64) -> usize {
        match self.aof_rewrite_threads_setting {
            0 => (dataset_bytes.div_ceil(BYTES_PER_PART_MIN) as usize)
                .clamp(1, self.aof_rewrite_threads()),
            n => n,
        }
    }
}

/// The replication directives of a master, with Redis 7.0's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `repl-backlog-size`: bytes of the stream kept for partial resyncs (16 KB at least).
    pub backlog_bytes: u64,
    /// `repl-backlog-ttl`: seconds without replicas after which the backlog is freed; 0,
    /// never.
    pub backlog_ttl_seconds: u64,
    /// `repl-ping-replica-period`: seconds between the PINGs sent into the stream.
    pub ping_period_seconds: u64,
    /// `repl-timeout`: seconds without an acknowledgement after which a replica is
    /// dropped.
    pub timeout_seconds: u64,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (seconds): writes are refused
    /// while fewer replicas acknowledged within the lag (both non-zero to apply).
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag_seconds: u64,
    /// `repl-disable-tcp-nodelay`: replicas' sockets send without TCP_NODELAY after their
    /// sync (fewer, larger packets; more delay).
    pub disable_tcp_nodelay: bool,
    /// `repl-diskless-sync`: a full sync's snapshot goes straight to the replicas'
    /// sockets (`$EOF:` framing) rather than through a file.
    pub diskless_sync: bool,
    /// `repl-diskless-sync-delay`: seconds a diskless sync waits for more replicas to
    /// join its capture.
    pub diskless_sync_delay_seconds: u64,
    /// `repl-diskless-sync-max-replicas`: a diskless sync starts before its delay once
    /// this many replicas wait (0: no such limit).
    pub diskless_sync_max_replicas: u64,
    /// `repl-diskless-load`: how a replica's clients see its full sync (`DisklessLoad`).
    pub diskless_load: DisklessLoad,
    /// `replica-read-only`: a replica refuses its clients' writes.
    pub replica_read_only: bool,
    /// `replica-serve-stale-data`: a replica whose master link is down still answers.
    pub replica_serve_stale_data: bool,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            backlog_bytes: 1024 * 1024,
            backlog_ttl_seconds: 3600,
            ping_period_seconds: 10,
            timeout_seconds: 60,
            min_replicas_to_write: 0,
            min_replicas_max_lag_seconds: 10,
            disable_tcp_nodelay: false,
            diskless_sync: true,
            diskless_sync_delay_seconds: 5,
            diskless_sync_max_replicas: 0,
            diskless_load: DisklessLoad::Disabled,
            replica_read_only: true,
            replica_serve_stale_data: true,
        }
    }
}

/// `repl-diskless-load`. A Tessera replica always receives its master's snapshot into a
/// file and loads it into a dataset of its own, keeping the old one until the new one is
/// whole; what the setting chooses is what clients see meanwhile, as Redis's modes show it:
/// with `disabled` they get -LOADING while the file loads; with `on-empty-db` (and no keys)
/// and `swapdb`, from the start of the transfer; and with `swapdb` and a sync of the same
/// history (Redis's async loading), they are served the old dataset throughout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisklessLoad {
    Disabled,
    OnEmptyDb,
    Swapdb,
}

impl DisklessLoad {
    pub fn name(self) -> &'static str {
        match self {
            DisklessLoad::Disabled => "disabled",
            DisklessLoad::OnEmptyDb => "on-empty-db",
            DisklessLoad::Swapdb => "swapdb",
        }
    }
}

impl ReplicationConfig {
    pub fn write_quorum(&self) -> crate::replication::master::WriteQuorum {
        crate::replication::master::WriteQuorum {
            replicas_min: self.min_replicas_to_write,
            max_lag_seconds: self.min_replicas_max_lag_seconds,
        }
    }
}

/// One class's `client-output-buffer-limit`: a client whose unsent replies exceed
/// `hard_bytes`, or stay above `soft_bytes` for `soft_seconds`, is closed. 0 disables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputBufferLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_seconds: u64,
}

/// The classes of `client-output-buffer-limit`, with Redis's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputBufferLimits {
    pub normal: OutputBufferLimit,
    pub replica: OutputBufferLimit,
    pub pubsub: OutputBufferLimit,
}

impl Default for OutputBufferLimits {
    fn default() -> Self {
        const MB: u64 = 1024 * 1024;
        OutputBufferLimits {
            normal: OutputBufferLimit::default(),
            replica: OutputBufferLimit {
                hard_bytes: 256 * MB,
                soft_bytes: 64 * MB,
                soft_seconds: 60,
            },
            pubsub: OutputBufferLimit {
                hard_bytes: 32 * MB,
                soft_bytes: 8 * MB,
                soft_seconds: 60,
            },
        }
    }
}

impl OutputBufferLimits {
    /// CONFIG GET's form: `normal 0 0 0 slave 268435456 67108864 60 pubsub ...`.
    fn text(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(name, l)| {
            format!(
                "{name} {} {} {}",
                l.hard_bytes, l.soft_bytes, l.soft_seconds
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
    }

    /// Sets the classes named in `<class> <hard> <soft> <seconds>` groups, all or none,
    /// with Redis's error texts.
    fn set(&mut self, args: &[String]) -> Result<(), ValueError> {
        let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
        // As in Redis, no words at all (CONFIG SET's empty string) change nothing.
        if !words.len().is_multiple_of(4) {
            return Err(ValueError::BufferLimitWordCount);
        }
        let mut updated = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut updated.normal,
                "slave" | "replica" => &mut updated.replica,
                "pubsub" => &mut updated.pubsub,
                _ => return Err(ValueError::BufferLimitClass),
            };
            let bad = || ValueError::BufferLimitValue;
            *class = OutputBufferLimit {
                hard_bytes: parse_memory(group[1]).ok_or_else(bad)?,
                soft_bytes: parse_memory(group[2]).ok_or_else(bad)?,
                soft_seconds: group[3].parse().map_err(|_| bad())?,
            };
        }
        *self = updated;
        Ok(())
    }
}

fn save_points_text(points: &[(u64, u64)]) -> String {
    points
        .iter()
        .map(|(seconds, changes)| format!("{seconds} {changes}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn set_save_points(config: &mut Config, args: &[String]) -> Result<(), ValueError> {
    let words: Vec<&str> = args.iter().flat_map(|a| a.split_whitespace()).collect();
    if !config.save_points_explicit {
        config.save_points.clear();
        config.save_points_explicit = true;
    }
    if words.is_empty() {
        config.save_points.clear();
        return Ok(());
    }
    if !words.len().is_multiple_of(2) {
        return Err(ValueError::SaveParameters);
    }
    let mut points = Vec::new();
    for pair in words.chunks(2) {
        let seconds = pair[0]
            .parse::<u64>()
            .map_err(|_| ValueError::SaveParameters)?;
        let changes = pair[1]
            .parse::<u64>()
            .map_err(|_| ValueError::SaveParameters)?;
        if seconds < 1 {
            return Err(ValueError::SaveParameters);
        }
        points.push((seconds, changes));
    }
    config.save_points.extend(points);
    Ok(())
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into(), "-::1".into()],
            tcp_backlog: 511,
            unixsocket: None,
            unixsocketperm: 0,
            protected_mode: true,
            dir: PathBuf::from("."),
            appendonly: true,
            appendfilename: "appendonly.aof".into(),
            aof_disable_auto_gc: false,
            appenddirname: "appendonlydir".into(),
            dbfilename: "dump.rdb".into(),
            appendfsync: FsyncPolicy::EverySec,
            aof_load_truncated: true,
            requirepass: None,
            clients_max: 10000,
            databases: 16,
            bulk_bytes_max: 512 * 1024 * 1024,
            query_buffer_bytes_max: 1024 * 1024 * 1024,
            output_buffer_limits: OutputBufferLimits::default(),
            timeout_seconds: 0,
            lazyfree_user_del: false,
            lazyfree_user_flush: false,
            loglevel: "notice".into(),
            logfile: String::new(),
            hz: 10,
            daemonize: false,
            pidfile: String::new(),
            shutdown_timeout_seconds: 10,
            aof_rewrite_threads_setting: 0,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 * 1024 * 1024,
            aof_rewrite_incremental_fsync: true,
            rdb_save_incremental_fsync: true,
            aof_rewrite_max_rate: 0,
            aof_rewrite_adaptive_rate: false,
            encoding_limits: EncodingLimits::default(),
            // Redis 7's built-in default.
            save_points: vec![(3600, 1), (300, 100), (60, 10000)],
            save_points_explicit: false,
            rdb_key_save_delay_us: 0,
            key_load_delay_us: 0,
            busy_reply_threshold_ms: 5000,
            tracking_table_max_keys: 1_000_000,
            rdbcompression: true,
            aof_use_rdb_preamble: true,
            stop_writes_on_bgsave_error: true,
            notify_keyspace_events: crate::notify::KeyspaceEvents::default(),
            aclfile: String::new(),
            acl_users: Vec::new(),
            acl_pubsub_default_all: false,
            acllog_max_len: 128,
            enable_protected_configs: ProtectedAction::No,
            enable_debug_command: ProtectedAction::No,
            enable_module_command: ProtectedAction::No,
            memory_bytes_max: 0,
            eviction_policy: EvictionPolicy::NoEviction,
            eviction_samples: 5,
            eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            slowlog_slower_than_us: 10_000,
            slowlog_max_len: 128,
            latency_monitor_threshold_ms: 0,
            latency_tracking: true,
            latency_tracking_percentiles: vec![50.0, 99.0, 99.9],
            replication: ReplicationConfig::default(),
            inert: InertValues::default(),
        }
    }
}

/// Every directive: the server's own, the encoding thresholds, and those Tessera accepts
/// without acting on them.
pub fn all_directives() -> impl Iterator<Item = &'static Directive> {
    DIRECTIVES
        .iter()
        .chain(LIMIT_DIRECTIVES)
        .chain(inert::INERT_DIRECTIVES)
}

impl Config {
    /// `replicaof`: the master this instance is configured to replicate (the config file,
    /// or REPLICAOF since), None for a master.
    pub fn replicaof(&self) -> Option<(String, u16)> {
        let directive = find_directive("replicaof").expect("a directive of the table");
        let value = (directive.get)(self);
        let (host, port) = value.split_once(' ')?;
        Some((host.to_string(), port.parse().ok()?))
    }

    /// Records REPLICAOF in `replicaof` (CONFIG GET and CONFIG REWRITE show it, as
    /// Redis's `rewriteConfigReplicaOfOption` writes it).
    pub fn set_replicaof(&mut self, master: Option<(&str, u16)>) {
        let directive = find_directive("replicaof").expect("a directive of the table");
        let words = match master {
            Some((host, port)) => vec![host.to_string(), port.to_string()],
            None => vec!["no".to_string(), "one".to_string()],
        };
        if let Err(error) = (directive.set)(self, &words) {
            tracing::warn!("can't record replicaof: {error}");
        }
    }

    /// The value of directive `name` as CONFIG GET prints it (for the few a replica reads
    /// only now and then: `masterauth`, `replica-priority`, ...).
    pub fn directive_value(&self, name: &str) -> String {
        find_directive(name).map_or_else(String::new, |directive| (directive.get)(self))
    }
}

/// The directive `name` (any case) names, by its name or its alias.
pub fn find_directive(name: &str) -> Option<&'static Directive> {
    all_directives().find(|d| d.is_named(name))
}

impl Config {
    /// Applies config text (a file, then the command-line flags) line by line.
    pub fn apply_text(&mut self, text: &str, from_file: bool) -> Result<(), ConfigError> {
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = || ConfigLine {
                number: from_file.then_some(index + 1),
                text: line.to_string(),
            };
            let words = crate::resp::split_args(line.as_bytes())
                .ok_or_else(|| ConfigError::UnbalancedQuotes { at: at() })?;
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            let (name, args) = words.split_first().expect("non-empty line has a word");
            // `user` lines may repeat and are no CONFIG GET/SET directive (as in Redis).
            if name.eq_ignore_ascii_case("user") && !args.is_empty() {
                let pubsub_all = self.acl_pubsub_default_all;
                crate::acl::file::check_config_user(args, &self.acl_users, pubsub_all).map_err(
                    |(word, reason)| ConfigError::UserDeclaration {
                        at: at(),
                        word,
                        reason,
                    },
                )?;
                self.acl_users.push(args.to_vec());
                continue;
            }
            // Directives Redis 7.0 no longer has but still reads silently, one value each.
            const DEPRECATED: &[&str] = &[
                "list-max-ziplist-entries",
                "list-max-ziplist-value",
                "lua-replicate-commands",
            ];
            if args.len() == 1 && DEPRECATED.iter().any(|d| d.eq_ignore_ascii_case(name)) {
                continue;
            }
            let directive =
                find_directive(name).ok_or_else(|| ConfigError::UnknownDirective { at: at() })?;
            (directive.set)(self, args).map_err(|reason| ConfigError::BadValue {
                at: at(),
                directive: directive.name,
                reason,
            })?;
        }
        Ok(())
    }

    /// Parses `tessera-server [config-file] [--directive value ...]`, as redis-server does.
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first()
            && !first.starts_with("--")
        {
            let text =
                std::fs::read_to_string(first).map_err(|error| ConfigError::UnreadableFile {
                    path: first.clone(),
                    error,
                })?;
            config.apply_text(&text, true)?;
            rest = &rest[1..];
        }
        // Each `--name` starts a line; the words until the next `--name` are its arguments.
        let mut lines = String::new();
        for arg in rest {
            if let Some(name) = arg.strip_prefix("--") {
                lines.push('\n');
                lines.push_str(name);
            } else {
                if lines.is_empty() {
                    return Err(ConfigError::ArgumentWithoutDirective {
                        argument: arg.clone(),
                    });
                }
                lines.push(' ');
                lines.push_str(&quote_arg(arg));
            }
        }
        config.apply_text(&lines, false)?;
        Ok(config)
    }
}

/// Quotes a command-line value so that `split_args` yields it back unchanged.
fn quote_arg(arg: &str) -> String {
    let mut out = String::from("\"");
    for c in arg.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reason a directive gave for refusing its value.
    fn refusal(error: ConfigError) -> String {
        match error {
            ConfigError::BadValue { reason, .. } => reason.to_string(),
            other => panic!("not a refused value: {other}"),
        }
    }

    #[test]
    fn a_small_dataset_gets_one_part_and_a_set_thread_count_is_kept() {
        let mut config = Config::default();
        let cpus = config.aof_rewrite_threads();
        assert_eq!(config.aof_rewrite_parts(0), 1);
        assert_eq!(config.aof_rewrite_parts(BYTES_PER_PART_MIN), 1);
        assert_eq!(
            config.aof_rewrite_parts(BYTES_PER_PART_MIN + 1),
            2.min(cpus)
        );
        assert_eq!(config.aof_rewrite_parts(u64::MAX), cpus);
        config.aof_rewrite_threads_setting = 3;
        assert_eq!(config.aof_rewrite_parts(0), 3);
        assert_eq!(config.aof_rewrite_threads(), 3);
    }

    #[test]
    fn file_and_flags() {
        let mut config = Config::default();
        config
            .apply_text(
                "# comment\nport 7000\nappendfsync always\nclient-query-buffer-limit 2mb\n",
                true,
            )
            .unwrap();
        assert_eq!(config.port, 7000);
        assert_eq!(config.appendfsync, FsyncPolicy::Always);
        assert_eq!(config.query_buffer_bytes_max, 2 * 1024 * 1024);
        let err = config.apply_text("port 1\nnosuch 1\n", true).unwrap_err();
        assert!(
            matches!(
                &err,
                ConfigError::UnknownDirective {
                    at: ConfigLine {
                        number: Some(2),
                        ..
                    }
                }
            ),
            "{err}"
        );
        let args: Vec<String> = ["--port", "7001", "--dir", "/", "--bind", "1.2.3.4", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let config = Config::from_args(&args).unwrap();
        assert_eq!(config.port, 7001);
        assert_eq!(config.dir, PathBuf::from("/"));
        assert_eq!(config.bind, vec!["1.2.3.4".to_string(), "::1".to_string()]);
        assert!(Config::from_args(&["--appendonly".into(), "maybe".into()]).is_err());
    }

    #[test]
    fn output_buffer_limits_as_redis_reads_and_prints_them() {
        let mut config = Config::default();
        assert_eq!(
            config.output_buffer_limits.text(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        config
            .apply_text(
                "client-output-buffer-limit normal 1mb 512kb 10 replica 1gb 1gb 0\n",
                true,
            )
            .unwrap();
        let limits = config.output_buffer_limits;
        assert_eq!(
            limits.normal,
            OutputBufferLimit {
                hard_bytes: 1024 * 1024,
                soft_bytes: 512 * 1024,
                soft_seconds: 10
            }
        );
        assert_eq!(limits.replica.hard_bytes, 1024 * 1024 * 1024);
        for (bad, reason) in [
            ("normal 1mb", "Wrong number"),
            ("master 1mb 1mb 1", "Invalid client class"),
            ("normal 1mbs 1mb 1", "Error in hard"),
            ("normal 1mb 1mb x pubsub 1 1 1", "Error in hard"),
        ] {
            let error = config
                .apply_text(&format!("client-output-buffer-limit {bad}\n"), true)
                .unwrap_err();
            let refused = refusal(error);
            assert!(refused.contains(reason), "{bad}: {refused}");
        }
        assert_eq!(
            config.output_buffer_limits, limits,
            "a failed set changes nothing"
        );
    }

    #[test]
    fn dir_must_exist_and_be_a_directory() {
        let mut config = Config::default();
        let err = config
            .apply_text("dir /nonexistent/tessera-dir\n", true)
            .unwrap_err();
        assert_eq!(refusal(err), "No such file or directory");
        let err = config.apply_text("dir /dev/null\n", true).unwrap_err();
        assert_eq!(refusal(err), "Not a directory");
        config.apply_text("dir /\n", true).unwrap();
    }

    #[test]
    fn bind_and_backlog() {
        let mut config = Config::default();
        assert_eq!(config.tcp_backlog, 511);
        config
            .apply_text("bind * -::*\ntcp-backlog 64\n", true)
            .unwrap();
        assert_eq!(config.bind, vec!["*".to_string(), "-::*".to_string()]);
        assert_eq!(config.tcp_backlog, 64);
        config.apply_text("bind \"\"\n", true).unwrap();
        assert!(config.bind.is_empty());
        let many = format!("bind {}\n", vec!["127.0.0.1"; 17].join(" "));
        let err = config.apply_text(&many, true).unwrap_err();
        assert_eq!(refusal(err), "Too many bind addresses specified.");
        assert!(config.apply_text("tcp-backlog -1\n", true).is_err());
    }

    #[test]
    fn the_lock_file_name_is_taken() {
        let mut config = Config::default();
        for directive in ["dbfilename", "appenddirname"] {
            let err = config
                .apply_text(&format!("{directive} tessera.lock\n"), true)
                .unwrap_err();
            let refused = refusal(err);
            assert!(refused.contains("lock file"), "{refused}");
        }
        config
            .apply_text("appendfilename tessera.lock\n", true)
            .unwrap();
    }

    #[test]
    fn maxmemory_reads_as_redis_memtoull() {
        let read = |text: &str| parse_maxmemory(&[text.to_string()]);
        assert_eq!(read("100mb").unwrap(), 100 << 20);
        assert_eq!(read("5K").unwrap(), 5000);
        assert_eq!(read("").unwrap(), 0);
        assert_eq!(read("99999999999999999999999").unwrap(), u64::MAX);
        assert_eq!(
            read("99999999999999999999kb").unwrap(),
            u64::MAX.wrapping_mul(1024)
        );
        for bad in ["-1", "+5", " 5", "1.5mb", "0x10", "10x"] {
            assert!(matches!(read(bad), Err(ValueError::NotMemory)), "{bad}");
        }
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("5k"), Some(5000));
        assert_eq!(parse_memory("12"), Some(12));
        assert_eq!(parse_memory("12xb"), None);
    }
}
