//! The directive table: each of Redis's directive names Tessera knows, with how its value
//! is parsed (the config file, `--flags`, CONFIG SET) and printed (CONFIG GET).

use super::rewrite::{self, Rewrite};
use super::*;
pub(super) type Getter = fn(&Config) -> String;
pub(super) type Setter = fn(&mut Config, &[String]) -> Result<(), ValueError>;

/// One directive: its names, how to read and write it, whether CONFIG SET may change it,
/// and how CONFIG REWRITE writes it.
pub struct Directive {
    pub name: &'static str,
    /// Redis's other name for it (`lua-time-limit` for `busy-reply-threshold`): read,
    /// set and listed by CONFIG GET as the name is; CONFIG REWRITE writes the name.
    pub alias: Option<&'static str>,
    pub get: Getter,
    pub set: Setter,
    pub mutable: bool,
    /// Listed by CONFIG GET only when named exactly, never through a pattern (Redis's
    /// HIDDEN_CONFIG: its testing aids).
    pub hidden: bool,
    pub rewrite: Rewrite,
}

impl Directive {
    /// The directive, also known as `alias`.
    pub const fn alias(mut self, alias: &'static str) -> Directive {
        self.alias = Some(alias);
        self
    }

    /// The directive, hidden from CONFIG GET's patterns.
    pub const fn hidden(mut self) -> Directive {
        self.hidden = true;
        self
    }

    /// The directive, written by CONFIG REWRITE as `rewrite` says (the default: `Plain`).
    pub const fn written_as(mut self, rewrite: Rewrite) -> Directive {
        self.rewrite = rewrite;
        self
    }

    /// Its names: the name, then the alias if it has one.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.alias)
    }

    /// Whether `name` (any case) is one of its names.
    pub fn is_named(&self, name: &str) -> bool {
        self.names().any(|n| n.eq_ignore_ascii_case(name))
    }
}

pub(super) fn one(args: &[String]) -> Result<&str, ValueError> {
    match args {
        [value] => Ok(value),
        _ => Err(ValueError::WrongArgumentCount),
    }
}

pub(super) fn parse_bool(args: &[String]) -> Result<bool, ValueError> {
    match one(args)?.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(ValueError::NotYesOrNo),
    }
}

pub(super) fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// Redis's `memtoll`: "1gb", "100mb", "5k" (k = 1000, kb = 1024, and so on).
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits_end);
    let multiplier: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// An integer as Redis reads its integer directives (`string2ll`: no sign but `-`, no
/// leading zero, no space), within `min..=max`.
pub(super) fn parse_int_in(args: &[String], min: i64, max: i64) -> Result<i64, ValueError> {
    let value = crate::resp::parse_i64(one(args)?.as_bytes()).ok_or(ValueError::NotInteger)?;
    if value < min || value > max {
        return Err(ValueError::OutOfRange {
            min: min.into(),
            max: max.into(),
        });
    }
    Ok(value)
}

/// `maxmemory` as Redis 7.0 reads it (`memtoull`).
pub(super) fn parse_maxmemory(args: &[String]) -> Result<u64, ValueError> {
    memtoull(one(args)?).ok_or(ValueError::NotMemory)
}

/// Redis 7.0's `memtoull` (`maxmemory`, DEBUG QUICKLIST-PACKED-THRESHOLD): digits and a
/// unit (`b`, `k`, `kb`, `m`, `mb`, `g`, `gb`, any case); no sign. Its quirks are kept: no
/// digits is 0, a number past 2^64 saturates, and the unit's product wraps.
pub fn memtoull(text: &str) -> Option<u64> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // Redis copies the digits into a 128-byte buffer first.
    if digits.len() >= 128 {
        return None;
    }
    let value = if digits.is_empty() {
        0
    } else {
        digits.parse::<u64>().unwrap_or(u64::MAX)
    };
    Some(value.wrapping_mul(multiplier))
}

/// A memory value as Redis reads its memory directives (`memtoull`), within
/// `min..=max`.
pub(super) fn parse_memory_in(args: &[String], min: u64, max: u64) -> Result<u64, ValueError> {
    let bytes = parse_maxmemory(args)?;
    if bytes < min || bytes > max {
        return Err(ValueError::OutOfRange {
            min: min.into(),
            max: max.into(),
        });
    }
    Ok(bytes)
}

/// A memory value of at least `min` bytes, as Redis reads its memory directives.
pub(super) fn parse_memory_arg(args: &[String], min: u64) -> Result<u64, ValueError> {
    parse_memory_in(args, min, i64::MAX as u64)
}

/// Redis's CONFIG_BINDADDR_MAX.
const BIND_ADDRESSES_MAX: usize = 16;

/// `dir` must name a directory that exists: Redis 7.0 changes into it while reading the
/// configuration, and a failure is a configuration error with the OS's reason. Tessera
/// does not change directory (paths are joined to `dir`) and does not create it.
pub(super) fn existing_dir(text: &str) -> Result<PathBuf, ValueError> {
    match std::fs::metadata(text) {
        Ok(meta) if meta.is_dir() => Ok(PathBuf::from(text)),
        Ok(_) => Err(ValueError::Directory(std::io::Error::from_raw_os_error(
            libc::ENOTDIR,
        ))),
        Err(e) => Err(ValueError::Directory(e)),
    }
}

/// A name in the data directory: a plain name, and not the directory's lock file.
pub(super) fn data_dir_entry(args: &[String]) -> Result<String, ValueError> {
    let name = file_name(args)?;
    if name == crate::process::LOCK_FILE {
        return Err(ValueError::LockFileName);
    }
    Ok(name)
}

pub(super) fn file_name(args: &[String]) -> Result<String, ValueError> {
    let name = one(args)?;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(ValueError::NotPlainFileName);
    }
    Ok(name.to_string())
}

macro_rules! directive {
    ($name:literal, $mutable:expr, |$c:ident| $get:expr, |$cs:ident, $a:ident| $set:expr) => {
        Directive {
            name: $name,
            alias: None,
            mutable: $mutable,
            hidden: false,
            rewrite: $crate::config::rewrite::Rewrite::Plain,
            get: |$c: &Config| $get,
            set: |$cs: &mut Config, $a: &[String]| {
                $set;
                Ok(())
            },
        }
    };
}

pub static DIRECTIVES: &[Directive] = &[
    directive!("port", false, |c| c.port.to_string(), |c, a| c.port =
        parse_int_in(a, 0, 65535)? as u16),
    directive!("bind", false, |c| c.bind.join(" "), |c, a| {
        if a.is_empty() {
            return Err(ValueError::WrongArgumentCount);
        }
        if a.len() > BIND_ADDRESSES_MAX {
            return Err(ValueError::TooManyBindAddresses);
        }
        // As in Redis, one empty word is no address at all.
        c.bind = if a.len() == 1 && a[0].is_empty() {
            Vec::new()
        } else {
            a.to_vec()
        }
    })
    .written_as(Rewrite::Special(rewrite::bind)),
    directive!(
        "tcp-backlog",
        false,
        |c| c.tcp_backlog.to_string(),
        |c, a| c.tcp_backlog = parse_int_in(a, 0, i32::MAX as i64)? as i32
    ),
    directive!(
        "unixsocket",
        false,
        |c| c.unixsocket.clone().unwrap_or_default(),
        |c, a| c.unixsocket = Some(one(a)?.to_string()).filter(|path| !path.is_empty())
    )
    .written_as(Rewrite::QuotedUnlessEmpty),
    directive!(
        "unixsocketperm",
        false,
        |c| format!("{:o}", c.unixsocketperm),
        |c, a| c.unixsocketperm = super::inert::octal(one(a)?, 0o777)? as u32
    ),
    directive!(
        "protected-mode",
        true,
        |c| yes_no(c.protected_mode),
        |c, a| c.protected_mode = parse_bool(a)?
    ),
    directive!("dir", false, |c| c.dir.display().to_string(), |c, a| c
        .dir =
        existing_dir(one(a)?)?)
    .written_as(Rewrite::Special(rewrite::dir)),
    // Applied by the event loop at the end of the turn (`server::log_switch`).
    directive!("appendonly", true, |c| yes_no(c.appendonly), |c, a| c
        .appendonly =
        parse_bool(a)?),
    directive!(
        "appendfilename",
        false,
        |c| c.appendfilename.clone(),
        |c, a| c.appendfilename = file_name(a)?
    )
    .written_as(Rewrite::Quoted),
    directive!(
        "appenddirname",
        false,
        |c| c.appenddirname.clone(),
        |c, a| c.appenddirname = data_dir_entry(a)?
    )
    .written_as(Rewrite::Quoted),
    directive!("dbfilename", false, |c| c.dbfilename.clone(), |c, a| c
        .dbfilename =
        data_dir_entry(a)?)
    .written_as(Rewrite::Quoted),
    directive!(
        "appendfsync",
        true,
        |c| c.appendfsync.name().into(),
        |c, a| {
            c.appendfsync = match one(a)?.to_ascii_lowercase().as_str() {
                "always" => FsyncPolicy::Always,
                "everysec" => FsyncPolicy::EverySec,
                "no" => FsyncPolicy::No,
                _ => {
                    return Err(ValueError::NotOneOf {
                        choices: "everysec, always, no",
                    });
                }
            }
        }
    ),
    directive!(
        "aof-load-truncated",
        true,
        |c| yes_no(c.aof_load_truncated),
        |c, a| c.aof_load_truncated = parse_bool(a)?
    ),
    directive!(
        "requirepass",
        true,
        |c| c.requirepass.clone().unwrap_or_default(),
        |c, a| {
            let pass = one(a)?;
            c.requirepass = (!pass.is_empty()).then(|| pass.to_string())
        }
    )
    .written_as(Rewrite::QuotedUnlessEmpty),
    directive!("maxclients", true, |c| c.clients_max.to_string(), |c, a| {
        c.clients_max = parse_int_in(a, 1, i32::MAX as i64)? as usize
    }),
    directive!("databases", false, |c| c.databases.to_string(), |c, a| c
        .databases =
        parse_int_in(a, 1, i32::MAX as i64)? as usize),
    directive!(
        "proto-max-bulk-len",
        true,
        |c| c.bulk_bytes_max.to_string(),
        // At most 4 GB - 1 (Redis: LLONG_MAX): a Tessera string is at most that long, so a
        // larger limit would let a bulk, an APPEND or a SETRANGE grow one past it.
        |c, a| c.bulk_bytes_max =
            parse_memory_in(a, 1024 * 1024, crate::types::string::MAX_LEN as u64)? as usize
    )
    .written_as(Rewrite::Memory),
    directive!(
        "client-query-buffer-limit",
        true,
        |c| c.query_buffer_bytes_max.to_string(),
        |c, a| c.query_buffer_bytes_max = parse_memory_arg(a, 1024 * 1024)? as usize
    )
    .written_as(Rewrite::Memory),
    directive!(
        "client-output-buffer-limit",
        true,
        |c| c.output_buffer_limits.text(),
        |c, a| c.output_buffer_limits.set(a)?
    )
    .written_as(Rewrite::Special(rewrite::client_output_buffer_limit)),
    directive!(
        "timeout",
        true,
        |c| c.timeout_seconds.to_string(),
        |c, a| c.timeout_seconds = parse_int_in(a, 0, i32::MAX as i64)? as u64
    ),
    directive!("loglevel", true, |c| c.loglevel.clone(), |c, a| {
        let level = one(a)?.to_ascii_lowercase();
        if !["debug", "verbose", "notice", "warning", "nothing"].contains(&level.as_str()) {
            return Err(ValueError::NotOneOf {
                choices: "debug, verbose, notice, warning, nothing",
            });
        }
        c.loglevel = level
    }),
    directive!(
        "rdbcompression",
        true,
        |c| yes_no(c.rdbcompression),
        |c, a| c.rdbcompression = parse_bool(a)?
    ),
    directive!(
        "stop-writes-on-bgsave-error",
        true,
        |c| yes_no(c.stop_writes_on_bgsave_error),
        |c, a| c.stop_writes_on_bgsave_error = parse_bool(a)?
    ),
    directive!(
        "aof-use-rdb-preamble",
        true,
        |c| yes_no(c.aof_use_rdb_preamble),
        |c, a| c.aof_use_rdb_preamble = parse_bool(a)?
    ),
    directive!(
        "busy-reply-threshold",
        true,
        |c| c.busy_reply_threshold_ms.to_string(),
        |c, a| c.busy_reply_threshold_ms = parse_int_in(a, 0, i64::MAX)? as u64
    )
    .alias("lua-time-limit"),
    directive!(
        "tracking-table-max-keys",
        true,
        |c| c.tracking_table_max_keys.to_string(),
        |c, a| c.tracking_table_max_keys = parse_int_in(a, 0, i64::MAX)? as u64
    ),
    directive!(
        "key-load-delay",
        true,
        |c| c.key_load_delay_us.to_string(),
        |c, a| c.key_load_delay_us = parse_int_in(a, 0, i32::MAX as i64)? as u64
    )
    .hidden(),
    directive!(
        "rdb-key-save-delay",
        true,
        |c| c.rdb_key_save_delay_us.to_string(),
        |c, a| c.rdb_key_save_delay_us = parse_int_in(a, 0, i32::MAX as i64)? as u64
    )
    .hidden(),
    directive!("logfile", false, |c| c.logfile.clone(), |c, a| c.logfile =
        one(a)?.to_string())
    .written_as(Rewrite::Quoted),
    // As in Redis, any value is taken and brought within 1..=500.
    directive!("hz", true, |c| c.hz.to_string(), |c, a| c.hz =
        parse_int_in(a, 0, i32::MAX as i64)?.clamp(1, 500) as u32),
    directive!("daemonize", false, |c| yes_no(c.daemonize), |c, a| {
        if parse_bool(a)? {
            return Err(ValueError::DaemonizeUnsupported);
        }
        c.daemonize = false
    }),
    directive!("pidfile", false, |c| c.pidfile.clone(), |c, a| c.pidfile =
        one(a)?.to_string())
    .written_as(Rewrite::QuotedUnlessEmpty),
    directive!(
        "shutdown-timeout",
        true,
        |c| c.shutdown_timeout_seconds.to_string(),
        |c, a| c.shutdown_timeout_seconds = parse_int_in(a, 0, i32::MAX as i64)? as u64
    ),
    // Turned back to `no`, the history files are deleted at the end of the turn
    // (`server::log_switch`).
    directive!(
        "aof-disable-auto-gc",
        true,
        |c| yes_no(c.aof_disable_auto_gc),
        |c, a| c.aof_disable_auto_gc = parse_bool(a)?
    ),
    directive!(
        "aof-rewrite-threads",
        true,
        |c| c.aof_rewrite_threads_setting.to_string(),
        |c, a| c.aof_rewrite_threads_setting = parse_int_in(a, 0, 1024)? as usize
    ),
    directive!(
        "auto-aof-rewrite-percentage",
        true,
        |c| c.auto_aof_rewrite_percentage.to_string(),
        |c, a| c.auto_aof_rewrite_percentage = parse_int_in(a, 0, i32::MAX as i64)? as u64
    ),
    directive!(
        "auto-aof-rewrite-min-size",
        true,
        |c| c.auto_aof_rewrite_min_size.to_string(),
        |c, a| c.auto_aof_rewrite_min_size = parse_memory_arg(a, 0)?
    )
    .written_as(Rewrite::Memory),
    directive!(
        "aof-rewrite-incremental-fsync",
        true,
        |c| yes_no(c.aof_rewrite_incremental_fsync),
        |c, a| c.aof_rewrite_incremental_fsync = parse_bool(a)?
    ),
    directive!(
        "rdb-save-incremental-fsync",
        true,
        |c| yes_no(c.rdb_save_incremental_fsync),
        |c, a| c.rdb_save_incremental_fsync = parse_bool(a)?
    ),
    directive!(
        "aof-rewrite-max-rate",
        true,
        |c| c.aof_rewrite_max_rate.to_string(),
        |c, a| c.aof_rewrite_max_rate = parse_memory_arg(a, 0)?
    )
    .written_as(Rewrite::Memory),
    directive!(
        "aof-rewrite-adaptive-rate",
        true,
        |c| yes_no(c.aof_rewrite_adaptive_rate),
        |c, a| c.aof_rewrite_adaptive_rate = parse_bool(a)?
    ),
    directive!(
        "notify-keyspace-events",
        true,
        |c| c.notify_keyspace_events.to_string(),
        |c, a| c.notify_keyspace_events =
            crate::notify::KeyspaceEvents::parse(one(a)?).map_err(ValueError::KeyspaceEvents)?
    )
    .written_as(Rewrite::Special(rewrite::notify_keyspace_events)),
    directive!("aclfile", false, |c| c.aclfile.clone(), |c, a| c.aclfile =
        one(a)?.to_string())
    .written_as(Rewrite::Quoted),
    directive!(
        "acl-pubsub-default",
        true,
        |c| if c.acl_pubsub_default_all {
            "allchannels".into()
        } else {
            "resetchannels".into()
        },
        |c, a| {
            c.acl_pubsub_default_all = match one(a)?.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(ValueError::NotOneOf {
                        choices: "allchannels, resetchannels",
                    });
                }
            }
        }
    ),
    directive!(
        "acllog-max-len",
        true,
        |c| c.acllog_max_len.to_string(),
        |c, a| c.acllog_max_len = parse_int_in(a, 0, i64::MAX)? as u64
    ),
    directive!(
        "enable-protected-configs",
        false,
        |c| c.enable_protected_configs.name().into(),
        |c, a| c.enable_protected_configs = ProtectedAction::parse(a)?
    ),
    directive!(
        "enable-debug-command",
        false,
        |c| c.enable_debug_command.name().into(),
        |c, a| c.enable_debug_command = ProtectedAction::parse(a)?
    ),
    directive!(
        "enable-module-command",
        false,
        |c| c.enable_module_command.name().into(),
        |c, a| c.enable_module_command = ProtectedAction::parse(a)?
    ),
    directive!(
        "maxmemory",
        true,
        |c| c.memory_bytes_max.to_string(),
        |c, a| c.memory_bytes_max = parse_maxmemory(a)?
    )
    .written_as(Rewrite::Memory),
    directive!(
        "maxmemory-policy",
        true,
        |c| c.eviction_policy.name().into(),
        |c, a| c.eviction_policy = EvictionPolicy::parse(a)?
    ),
    directive!(
        "maxmemory-samples",
        true,
        |c| c.eviction_samples.to_string(),
        |c, a| c.eviction_samples = parse_int_in(a, 1, i32::MAX as i64)? as u32
    ),
    directive!(
        "maxmemory-eviction-tenacity",
        true,
        |c| c.eviction_tenacity.to_string(),
        |c, a| c.eviction_tenacity = parse_int_in(a, 0, 100)? as u32
    ),
    directive!(
        "lfu-log-factor",
        true,
        |c| c.lfu_log_factor.to_string(),
        |c, a| c.lfu_log_factor = parse_int_in(a, 0, i32::MAX as i64)? as u32
    ),
    directive!(
        "lfu-decay-time",
        true,
        |c| c.lfu_decay_time.to_string(),
        |c, a| c.lfu_decay_time = parse_int_in(a, 0, i32::MAX as i64)? as u32
    ),
    directive!(
        "save",
        true,
        |c| save_points_text(&c.save_points),
        |c, a| { set_save_points(c, a)? }
    )
    .written_as(Rewrite::Special(rewrite::save)),
    // The operator's statistics: the slow log, the latency monitor, per-command latency
    // histograms (`crate::slowlog`, `crate::latency`, `crate::command_stats`).
    directive!(
        "slowlog-log-slower-than",
        true,
        |c| c.slowlog_slower_than_us.to_string(),
        |c, a| c.slowlog_slower_than_us = parse_int_in(a, -1, i64::MAX)?
    ),
    directive!(
        "slowlog-max-len",
        true,
        |c| c.slowlog_max_len.to_string(),
        |c, a| c.slowlog_max_len = parse_int_in(a, 0, i64::MAX)? as u64
    ),
    directive!(
        "latency-monitor-threshold",
        true,
        |c| c.latency_monitor_threshold_ms.to_string(),
        |c, a| c.latency_monitor_threshold_ms = parse_int_in(a, 0, i64::MAX)? as u64
    ),
    directive!(
        "latency-tracking",
        true,
        |c| yes_no(c.latency_tracking),
        |c, a| c.latency_tracking = parse_bool(a)?
    ),
    directive!(
        "latency-tracking-info-percentiles",
        true,
        |c| c
            .latency_tracking_percentiles
            .iter()
            .map(|&p| crate::command_stats::percentile_label(p))
            .collect::<Vec<_>>()
            .join(" "),
        |c, a| c.latency_tracking_percentiles = parse_percentiles(a)?
    )
    .written_as(Rewrite::Special(rewrite::latency_percentiles)),
    // Replication (a master's side).
    directive!(
        "repl-backlog-size",
        true,
        |c| c.replication.backlog_bytes.to_string(),
        // Redis raises a smaller backlog to its minimum, 16 KB.
        |c, a| c.replication.backlog_bytes = parse_memory_in(a, 1, i64::MAX as u64)?.max(16 * 1024)
    )
    .written_as(Rewrite::Memory),
    directive!(
        "repl-backlog-ttl",
        true,
        |c| c.replication.backlog_ttl_seconds.to_string(),
        |c, a| c.replication.backlog_ttl_seconds = parse_int_in(a, 0, i64::MAX)? as u64
    ),
    directive!(
        "repl-ping-replica-period",
        true,
        |c| c.replication.ping_period_seconds.to_string(),
        |c, a| c.replication.ping_period_seconds = parse_int_in(a, 1, i32::MAX as i64)? as u64
    )
    .alias("repl-ping-slave-period"),
    directive!(
        "repl-timeout",
        true,
        |c| c.replication.timeout_seconds.to_string(),
        |c, a| c.replication.timeout_seconds = parse_int_in(a, 1, i32::MAX as i64)? as u64
    ),
    directive!(
        "min-replicas-to-write",
        true,
        |c| c.replication.min_replicas_to_write.to_string(),
        |c, a| c.replication.min_replicas_to_write = parse_int_in(a, 0, i32::MAX as i64)? as u64
    )
    .alias("min-slaves-to-write"),
    directive!(
        "min-replicas-max-lag",
        true,
        |c| c.replication.min_replicas_max_lag_seconds.to_string(),
        |c, a| c.replication.min_replicas_max_lag_seconds =
            parse_int_in(a, 0, i32::MAX as i64)? as u64
    )
    .alias("min-slaves-max-lag"),
    directive!(
        "repl-disable-tcp-nodelay",
        true,
        |c| yes_no(c.replication.disable_tcp_nodelay),
        |c, a| c.replication.disable_tcp_nodelay = parse_bool(a)?
    ),
    directive!(
        "repl-diskless-sync",
        true,
        |c| yes_no(c.replication.diskless_sync),
        |c, a| c.replication.diskless_sync = parse_bool(a)?
    ),
    directive!(
        "repl-diskless-load",
        true,
        |c| c.replication.diskless_load.name().into(),
        |c, a| {
            c.replication.diskless_load = match one(a)?.to_ascii_lowercase().as_str() {
                "disabled" => DisklessLoad::Disabled,
                "on-empty-db" => DisklessLoad::OnEmptyDb,
                "swapdb" => DisklessLoad::Swapdb,
                _ => {
                    return Err(ValueError::NotOneOf {
                        choices: "disabled, on-empty-db, swapdb",
                    });
                }
            }
        }
    ),
    directive!(
        "repl-diskless-sync-delay",
        true,
        |c| c.replication.diskless_sync_delay_seconds.to_string(),
        |c, a| c.replication.diskless_sync_delay_seconds =
            parse_int_in(a, 0, i32::MAX as i64)? as u64
    ),
    directive!(
        "repl-diskless-sync-max-replicas",
        true,
        |c| c.replication.diskless_sync_max_replicas.to_string(),
        |c, a| c.replication.diskless_sync_max_replicas =
            parse_int_in(a, 0, i32::MAX as i64)? as u64
    ),
    // Lazy free (`crate::lazyfree`): UNLINK and the ASYNC flushes always free off the loop.
    directive!(
        "lazyfree-lazy-user-del",
        true,
        |c| yes_no(c.lazyfree_user_del),
        |c, a| c.lazyfree_user_del = parse_bool(a)?
    ),
    directive!(
        "lazyfree-lazy-user-flush",
        true,
        |c| yes_no(c.lazyfree_user_flush),
        |c, a| c.lazyfree_user_flush = parse_bool(a)?
    ),
    // Replication (a replica's side).
    directive!(
        "replica-read-only",
        true,
        |c| yes_no(c.replication.replica_read_only),
        |c, a| c.replication.replica_read_only = parse_bool(a)?
    )
    .alias("slave-read-only"),
    directive!(
        "replica-serve-stale-data",
        true,
        |c| yes_no(c.replication.replica_serve_stale_data),
        |c, a| c.replication.replica_serve_stale_data = parse_bool(a)?
    )
    .alias("slave-serve-stale-data"),
];

/// Redis's `latency-tracking-info-percentiles`: numbers in 0..100, given as words or as
/// one string of words (CONFIG SET); one empty string is none.
fn parse_percentiles(args: &[String]) -> Result<Vec<f64>, ValueError> {
    args.iter()
        .flat_map(|a| a.split_whitespace())
        .map(|word| {
            let value = crate::types::score::parse(word.as_bytes()).ok_or(
                ValueError::Percentiles("Invalid latency-tracking-info-percentiles parameters"),
            )?;
            if !(0.0..=100.0).contains(&value) {
                return Err(ValueError::Percentiles(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
                ));
            }
            Ok(value)
        })
        .collect()
}
