//! The state commands see: the server's (configuration, statistics, persistence figures,
//! WATCH and blocked-key tables) and the session's (database, protocol, transaction).
//!
//! The engine owns the server's state; sessions own theirs and lend it to the engine for
//! each command. Background jobs and the event loop write the persistence figures here
//! for INFO (`server::jobs`).

use super::{blocking, transactions};
use crate::config::Config;
use crate::stats::Stats;
use bytes::Bytes;
use std::sync::atomic::AtomicU64;

/// Per-connection state that commands read and change (a client's; during replay, the
/// replay's own).
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    pub id: u64,
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user its commands run as (`default` until AUTH or HELLO AUTH).
    pub user: crate::acl::SessionUser,
    /// Connected from 127.0.0.1 or ::1 (protected configs set to `local`).
    pub local: bool,
    pub name: Option<String>,
    pub lib_name: Option<String>,
    pub lib_version: Option<String>,
    /// Between MULTI and EXEC.
    pub multi: Option<Box<transactions::MultiState>>,
    /// Keys this client WATCHes (database, key).
    pub watched: Vec<(usize, Bytes)>,
    /// The last command the engine ran for it (CLIENT LIST's `cmd=`).
    pub last_command: &'static str,
    /// The most its replies since the last send may reveal (see `ReplyShows`).
    pub reply_shows: ReplyShows,
    /// Its channels, patterns and shard channels (`crate::pubsub`).
    pub subscriptions: crate::pubsub::Subscriptions,
    /// CLIENT REPLY, CLIENT NO-EVICT and MONITOR.
    pub modes: super::ClientModes,
    /// Pub/sub confirmations written while CLIENT REPLY silences the session: Redis sends
    /// them anyway (its `CLIENT_PUSHING`), so the engine sends them after dropping the
    /// command's reply.
    pub silenced_pushes: Vec<u8>,
    /// A replica of this instance (PSYNC or SYNC made it one): its output is the
    /// replication stream (`crate::replication`).
    pub replica: bool,
    /// The link to this instance's master: its requests are the master's stream, run as
    /// the master's (`engine::Mode::Master`), and get no reply.
    pub master_link: bool,
    /// What it told with REPLCONF before PSYNC (listening port, address, capabilities).
    pub replconf: Option<Box<crate::replication::master::Announced>>,
    /// The replication offset just after its last write (Redis's `woff`): what WAIT
    /// waits for replicas to acknowledge.
    pub write_offset: i64,
    /// The effects records counted just after its last write (`Effects::records`):
    /// what WAITAOF waits for the local log to fsync (a position that exists with no
    /// stream, when no replica is connected).
    pub write_record: u64,
}

/// What a command's reply may reveal of state not yet in the log, which decides how long
/// it waits for the log writer. Ordered: replies sent together wait as long as the most
/// revealing one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReplyShows {
    /// Refused before running, or touched no key (PING, INFO, CONFIG).
    #[default]
    Nothing,
    /// Read keys: may show another client's write that is not yet acknowledged.
    Reads,
    /// Wrote keys: the reply is the write's acknowledgement.
    Writes,
}

/// Server-wide state visible to commands.
pub struct ServerState {
    pub config: Config,
    pub stats: Stats,
    /// Changes since the last save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    pub started_at: std::time::Instant,
    pub start_unix_seconds: i64,
    pub last_save_unix_seconds: i64,
    pub connected_clients: usize,
    pub run_id: String,
    pub tcp_port: u16,
    pub executable: String,
    pub config_file: String,
    /// Set while the append-only log cannot be written: the reason, for MISCONF.
    pub log_error: Option<crate::log::writer::LogError>,
    /// Persistence figures for INFO, refreshed by the server loop.
    pub persistence: PersistenceInfo,
    /// Where files live (the real file system, or a simulated one in crash tests).
    pub storage: std::sync::Arc<dyn crate::storage::Storage>,
    /// Keys WATCHed by clients, and which clients saw one change.
    pub watches: transactions::Watches,
    /// The thread that frees big values and flushed databases (`crate::lazyfree`).
    pub lazyfree: crate::lazyfree::LazyFree,
    /// Clients blocked on keys, and the keys that became ready.
    pub blocked: blocking::BlockedKeys,
    /// Who is subscribed to which channels and patterns.
    pub pubsub: crate::pubsub::PubSub,
    /// The Lua interpreter and the script cache.
    pub scripting: crate::scripting::Scripting,
    /// The ACL users and the log of denials.
    pub acl: crate::acl::Acl,
    /// Client-side caching: who tracks, the keys they read, the BCAST prefixes.
    pub tracking: crate::tracking::Tracking,
    /// Eviction under `maxmemory`: its candidates, out-of-memory state and measure.
    pub eviction: crate::engine::evict::Eviction,
    /// CLIENT PAUSE.
    pub pause: crate::pause::Pause,
    /// A shutdown in progress (SHUTDOWN ABORT cancels it, INFO shows its wait).
    pub shutdown: crate::shutdown::Shutdown,
    /// The clients in MONITOR mode.
    pub monitors: crate::monitor::Monitors,
    /// Per-command and per-error counters (INFO commandstats, errorstats, latencystats).
    pub commands: crate::command_stats::CommandStats,
    /// SLOWLOG.
    pub slowlog: crate::slowlog::SlowLog,
    /// LATENCY's event monitor.
    pub latency: crate::latency::LatencyMonitor,
    /// Replication: the stream's backlog and offset, the replicas, WAIT's clients.
    pub replication: crate::replication::Replication,
    /// Whether the cron deletes keys whose time has passed (DEBUG SET-ACTIVE-EXPIRE;
    /// lookups expire keys either way).
    pub active_expire: bool,
    /// Scripts may run commands marked `noscript` (DEBUG SET-DISABLE-DENY-SCRIPTS, a test
    /// aid of Redis's).
    pub scripts_may_run_noscript: bool,
    /// DEBUG PAUSE-CRON: the cron's own work (Redis's `serverCron`) is skipped.
    pub cron_paused: bool,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds the log writer sleeps before each write.
    pub aof_flush_sleep_us: u64,
    /// How the cron sizes clients' reply buffers (DEBUG REPLYBUFFER).
    pub reply_buffer: crate::reply_buffer::Settings,
}

impl ServerState {
    pub fn new(
        config: Config,
        config_file: String,
        storage: std::sync::Arc<dyn crate::storage::Storage>,
    ) -> ServerState {
        let now = crate::clock::unix_seconds();
        ServerState {
            stats: Stats::default(),
            dirty: 0,
            started_at: std::time::Instant::now(),
            start_unix_seconds: now,
            last_save_unix_seconds: now,
            connected_clients: 0,
            run_id: (0..40)
                .map(|_| format!("{:x}", rand::random::<u8>() % 16))
                .collect(),
            tcp_port: config.port,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            config_file,
            log_error: None,
            persistence: PersistenceInfo::default(),
            storage,
            watches: transactions::Watches::default(),
            lazyfree: crate::lazyfree::LazyFree::default(),
            blocked: blocking::BlockedKeys::default(),
            pubsub: crate::pubsub::PubSub::default(),
            scripting: crate::scripting::Scripting::new(),
            acl: crate::acl::Acl::new(),
            tracking: crate::tracking::Tracking::default(),
            eviction: crate::engine::evict::Eviction::new(),
            pause: Default::default(),
            shutdown: Default::default(),
            monitors: Default::default(),
            commands: crate::command_stats::CommandStats::new(),
            slowlog: crate::slowlog::SlowLog::default(),
            latency: crate::latency::LatencyMonitor::default(),
            active_expire: true,
            scripts_may_run_noscript: false,
            cron_paused: false,
            aof_flush_sleep_us: 0,
            reply_buffer: Default::default(),
            replication: crate::replication::Replication::default(),
            config,
        }
    }

    /// A synchronous save of `dbfilename` succeeded (SAVE, RELOAD's, FLUSHALL's): as
    /// Redis's `rdbSave`, it also clears a failed BGSAVE's status.
    pub fn record_save(&mut self) {
        self.dirty = 0;
        self.last_save_unix_seconds = crate::clock::unix_seconds();
        self.persistence.rdb_saves += 1;
        self.persistence.rdb_last_bgsave_failed = false;
    }

    /// Why writes are refused for want of a disk that takes them (Redis's
    /// `writeCommandsDeniedByDiskError`, in its order): the last BGSAVE failed while
    /// `save` points make snapshots the promise (`stop-writes-on-bgsave-error`), or the
    /// log can't be written.
    pub fn disk_error(&self) -> Option<DiskError> {
        let config = &self.config;
        if config.stop_writes_on_bgsave_error
            && !config.save_points.is_empty()
            && self.persistence.rdb_last_bgsave_failed
        {
            Some(DiskError::Snapshot)
        } else {
            self.log_error.clone().map(DiskError::Log)
        }
    }
}

/// What keeps writes out: `ServerState::disk_error`. `Display` is the MISCONF reply a
/// refused write gets.
#[derive(Debug, Clone)]
pub enum DiskError {
    /// The last BGSAVE failed (`stop-writes-on-bgsave-error`).
    Snapshot,
    /// The log writer's error.
    Log(crate::log::writer::LogError),
}

impl DiskError {
    /// The reply to a script that declares writes (Redis's `scriptPrepareForRun`).
    pub fn script_message(&self) -> String {
        match self {
            DiskError::Snapshot => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.".to_string(),
            DiskError::Log(error) => format!(
                "MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {error}"
            ),
        }
    }
}

impl std::fmt::Display for DiskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiskError::Snapshot => f.write_str(
                "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.",
            ),
            DiskError::Log(error) => write!(f, "MISCONF Errors writing to the AOF file: {error}"),
        }
    }
}

/// A start-up load in progress, for INFO's `loading_*` fields.
#[derive(Clone, Debug)]
pub struct LoadingStatus {
    pub start_unix_seconds: i64,
    pub started: std::time::Instant,
    pub progress: std::sync::Arc<LoadProgress>,
}

/// What a FLUSHALL leaves for the event loop to do once the command is over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfterFlushAll {
    #[default]
    Nothing,
    /// Stop a running BGSAVE.
    StopBackgroundSave,
    /// Stop a running BGSAVE and save the empty dataset to `dbfilename` now.
    SaveDump,
}

/// INFO persistence figures kept by the server loop (Redis's names where they exist).
#[derive(Default, Clone, Debug)]
pub struct PersistenceInfo {
    /// Base files plus every incremental file listed in the manifest.
    pub aof_current_size: u64,
    pub aof_base_size: u64,
    /// `aof_current_size` after the last compaction (or at start-up): the auto-rewrite
    /// growth is measured from it.
    pub aof_rewrite_base_size: u64,
    pub aof_pending_bytes: u64,
    /// Log bytes in the writer's memory, queued or kept until durable (`mem_aof_buffer`).
    pub aof_buffered_bytes: u64,
    /// The most log bytes ever waiting for the writer (bounded by the read backpressure).
    pub aof_pending_peak_bytes: u64,
    pub aof_delayed_fsync: u64,
    pub aof_rewrite_in_progress: bool,
    pub aof_rewrite_scheduled: bool,
    pub aof_rewrite_started: Option<std::time::Instant>,
    pub aof_last_rewrite_seconds: Option<u64>,
    pub aof_last_bgrewrite_failed: bool,
    pub aof_rewrites: u64,
    pub aof_rewrites_consecutive_failures: u64,
    /// When the last compaction failed (for the automatic trigger's back-off).
    pub aof_last_rewrite_failure: Option<std::time::Instant>,
    pub aof_base_parts: usize,
    pub aof_last_rewrite_bytes: u64,
    pub aof_last_rewrite_keys: u64,
    /// Memory held by captured slots not yet written by a running snapshot.
    pub capture_held_bytes: u64,
    /// The rate the background jobs' writers may use now (`server::pace`).
    pub background_rate: crate::storage::Rate,
    /// Keys written so far by the running snapshot, and the keys when it started.
    pub current_save_keys_processed: u64,
    pub current_save_keys_total: u64,
    pub rdb_bgsave_in_progress: bool,
    pub rdb_bgsave_scheduled: bool,
    /// What a FLUSHALL left for the loop, as Redis's `flushAllDataAndResetRDB`: a running
    /// BGSAVE is stopped (its snapshot is of keys that are gone), and where the dataset's
    /// persistence is `dbfilename` (the log off, `save` points configured) it is saved
    /// before anything brings the old keys back (a restart). Done after the command (in
    /// EXEC or a script, at the next cron, as BGSAVE's schedule).
    pub after_flushall: AfterFlushAll,
    pub rdb_bgsave_started: Option<std::time::Instant>,
    pub rdb_last_bgsave_seconds: Option<u64>,
    pub rdb_last_bgsave_failed: bool,
    pub rdb_last_bgsave_failure: Option<std::time::Instant>,
    pub rdb_saves: u64,
    pub rdb_last_load_keys_loaded: u64,
    pub rdb_last_load_keys_expired: u64,
    pub loading_seconds: f64,
    pub loaded_keys: u64,
    /// Set while the dataset is loading at start-up, or while a replica's full sync
    /// makes its clients wait (`repl-diskless-load`): -LOADING meanwhile.
    pub loading: Option<LoadingStatus>,
    /// A replica's full sync of the same history with `repl-diskless-load swapdb` (Redis's
    /// async loading): the old dataset is served, but for `no_async_loading` commands.
    pub async_loading: bool,
}

/// How far a start-up load is, shared by the loading thread with the event loop (INFO
/// `loading_*`).
#[derive(Debug, Default)]
pub struct LoadProgress {
    pub total_bytes: AtomicU64,
    pub loaded_bytes: AtomicU64,
}
