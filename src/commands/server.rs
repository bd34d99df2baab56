//! Server commands: INFO, CONFIG, COMMAND, TIME, LASTSAVE, SHUTDOWN, BGREWRITEAOF.

use super::{
    Action, Args, CommandSpec, Ctx, Job, SYNTAX_ERROR, ShutdownSave,
    connection::REDIS_COMPAT_VERSION, eq_ignore_case, flags, flags::*, lossy, unknown_subcommand,
    wrong_arity,
};
use crate::command;
use crate::config::{all_directives, find_directive};
use crate::glob::glob_match;
use crate::resp::ReplyWriter;
use serde_json::Value;
use std::fmt::Write;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "info",
            -1,
            LOADING | STALE,
            (0, 0, 0),
            "server",
            "Returns information and statistics about the server.",
            info
        ),
        command!(
            "config",
            -2,
            ADMIN | LOADING | STALE,
            (0, 0, 0),
            "server",
            "A container for server configuration commands.",
            config
        ),
        command!(
            "command",
            -1,
            LOADING | STALE,
            (0, 0, 0),
            "server",
            "Returns detailed information about all commands.",
            command_command
        ),
        command!(
            "time",
            1,
            LOADING | STALE | FAST,
            (0, 0, 0),
            "server",
            "Returns the server time.",
            time
        ),
        command!(
            "lastsave",
            1,
            LOADING | STALE | FAST,
            (0, 0, 0),
            "server",
            "Returns the Unix timestamp of the last successful save to disk.",
            lastsave
        ),
        command!(
            "shutdown",
            -1,
            ADMIN | LOADING | STALE | NO_MULTI | NO_SCRIPT,
            (0, 0, 0),
            "server",
            "Synchronously saves the database(s) to disk and shuts down the Redis server.",
            shutdown
        ),
        command!(
            "save",
            1,
            ADMIN | NO_MULTI | NO_SCRIPT,
            (0, 0, 0),
            "server",
            "Synchronously saves the database(s) to disk.",
            save
        ),
        command!(
            "bgrewriteaof",
            1,
            ADMIN | NO_SCRIPT,
            (0, 0, 0),
            "server",
            "Asynchronously rewrites the append-only file to disk.",
            bgrewriteaof
        ),
        command!(
            "bgsave",
            -1,
            ADMIN | NO_SCRIPT,
            (0, 0, 0),
            "server",
            "Asynchronously saves the database(s) to disk.",
            bgsave
        ),
    ]
}

fn time(ctx: &mut Ctx, _args: &Args) -> Action {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    ctx.out.array(2);
    ctx.out.bulk_i64(now.as_secs() as i64);
    ctx.out.bulk_i64(now.subsec_micros() as i64);
    Action::None
}

fn lastsave(ctx: &mut Ctx, _args: &Args) -> Action {
    ctx.out.integer(ctx.server.last_save_unix_seconds);
    Action::None
}

fn shutdown(ctx: &mut Ctx, args: &Args) -> Action {
    let (mut nosave, mut save, mut other_flag, mut abort) = (false, false, false, false);
    for arg in &args[1..] {
        if eq_ignore_case(arg, "nosave") {
            nosave = true;
        } else if eq_ignore_case(arg, "save") {
            save = true;
        } else if eq_ignore_case(arg, "now") || eq_ignore_case(arg, "force") {
            // Tessera never waits for replicas: NOW and FORCE change nothing.
            other_flag = true;
        } else if eq_ignore_case(arg, "abort") {
            abort = true;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    }
    // Redis's illegal combinations: ABORT with any flag, SAVE with NOSAVE.
    if (abort && (nosave || save || other_flag)) || (nosave && save) {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    if abort {
        // A Tessera shutdown never waits, so there is never one in progress to abort.
        ctx.out.error("ERR No shutdown in progress.");
        return Action::None;
    }
    Action::Shutdown(if nosave {
        ShutdownSave::NoSave
    } else if save {
        ShutdownSave::Save
    } else {
        ShutdownSave::AsConfigured
    })
}

/// SAVE: writes `dbfilename` in `dir` on the event loop, blocking it, as Redis's SAVE does.
fn save(ctx: &mut Ctx, _args: &Args) -> Action {
    if ctx.server.persistence.rdb_bgsave_in_progress {
        ctx.out.error("ERR Background save already in progress");
        return Action::None;
    }
    let config = &ctx.server.config;
    let storage = &*ctx.server.storage;
    let compression = config.rdbcompression;
    match crate::snapshot::save(
        storage,
        ctx.keyspace,
        &config.dir,
        &config.dbfilename,
        compression,
        config.rdb_save_incremental_fsync,
        &ctx.server.scripting.library_codes(),
    ) {
        Ok(size) => {
            tracing::info!("DB saved on disk ({size} bytes)");
            ctx.server.dirty = 0;
            ctx.server.last_save_unix_seconds = crate::clock::unix_seconds();
            ctx.server.persistence.rdb_saves += 1;
            ctx.out.ok();
        }
        Err(e) => {
            tracing::warn!("SAVE failed: {e}");
            ctx.out.error("ERR");
        }
    }
    Action::None
}

/// BGREWRITEAOF, with Redis's replies: one compaction at a time; during a BGSAVE it is
/// scheduled and starts when the BGSAVE ends.
fn bgrewriteaof(ctx: &mut Ctx, _args: &Args) -> Action {
    let in_exec = ctx.in_exec();
    let persistence = &mut ctx.server.persistence;
    if !ctx.server.config.appendonly {
        // Redis would write a new log directory; Tessera compacts only a log it is keeping.
        ctx.out
            .error("ERR Tessera rewrites the append-only log only when appendonly is yes");
        Action::None
    } else if persistence.aof_rewrite_in_progress {
        ctx.out
            .error("ERR Background append only file rewriting already in progress");
        Action::None
    } else if persistence.rdb_bgsave_in_progress || in_exec {
        // Inside EXEC Redis cannot fork either: the job starts from the cron.
        persistence.aof_rewrite_scheduled = true;
        persistence.aof_rewrites_consecutive_failures = 0;
        ctx.out
            .simple("Background append only file rewriting scheduled");
        Action::None
    } else {
        ctx.out
            .simple("Background append only file rewriting started");
        Action::StartJob(Job::Rewrite)
    }
}

/// BGSAVE [SCHEDULE]: a forkless background snapshot to `dbfilename`.
fn bgsave(ctx: &mut Ctx, args: &Args) -> Action {
    let schedule = match args {
        [_] => false,
        [_, flag] if eq_ignore_case(flag, "schedule") => true,
        _ => {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    };
    let in_exec = ctx.in_exec();
    let persistence = &mut ctx.server.persistence;
    if persistence.rdb_bgsave_in_progress {
        ctx.out.error("ERR Background save already in progress");
        Action::None
    } else if persistence.aof_rewrite_in_progress || in_exec {
        if schedule || in_exec {
            persistence.rdb_bgsave_scheduled = true;
            ctx.out.simple("Background saving scheduled");
        } else {
            ctx.out.error(
                "ERR Another child process is active (AOF?): can't BGSAVE right now. \
                 Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
            );
        }
        Action::None
    } else {
        ctx.out.simple("Background saving started");
        Action::StartJob(Job::BackgroundSave)
    }
}

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "HELP",
    "    Print this help.",
];

fn config(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "get" => args.len() >= 3,
        "set" => args.len() >= 4,
        "resetstat" | "help" => args.len() == 2,
        _ => {
            unknown_subcommand(ctx, "config", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("config|{sub}"));
        return Action::None;
    }
    match sub.as_str() {
        "get" => {
            config_get(ctx, &args[2..]);
        }
        "set" => {
            config_set(ctx, &args[2..]);
        }
        "resetstat" => {
            ctx.server.stats.reset();
            ctx.out.ok();
        }
        _ => {
            ctx.out.array(CONFIG_HELP.len());
            for line in CONFIG_HELP {
                ctx.out.simple(line);
            }
        }
    }
    Action::None
}

fn config_get(ctx: &mut Ctx, patterns: &Args) -> Action {
    let matched: Vec<_> = all_directives()
        .filter(|d| {
            patterns
                .iter()
                .any(|p| glob_match(p, d.name.as_bytes(), true))
        })
        .collect();
    ctx.out.map(matched.len());
    for directive in matched {
        ctx.out.bulk(directive.name.as_bytes());
        ctx.out.bulk((directive.get)(&ctx.server.config).as_bytes());
    }
    Action::None
}

/// CONFIG SET name value [name value ...]: all or nothing, as Redis 7.
fn config_set(ctx: &mut Ctx, pairs: &Args) -> Action {
    if !pairs.len().is_multiple_of(2) {
        // Redis: an odd argument count past the first pair is a syntax error.
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let mut updated = ctx.server.config.clone();
    let mut seen: Vec<&str> = Vec::new();
    for pair in pairs.chunks(2) {
        let name = lossy(pair[0]);
        let Some(directive) = find_directive(&name) else {
            ctx.out.error(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            ));
            return Action::None;
        };
        let fail = |reason: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
        };
        if seen.contains(&directive.name) {
            ctx.out.error(&fail("duplicate parameter"));
            return Action::None;
        }
        seen.push(directive.name);
        // Redis's PROTECTED_CONFIG (`dir`, `dbfilename`) needs enable-protected-configs;
        // Tessera keeps them immutable even then.
        let protected = crate::config::PROTECTED.contains(&directive.name);
        let local = ctx.client.local;
        if protected && !ctx.server.config.enable_protected_configs.allows(local) {
            ctx.out.error(&fail("can't set protected config"));
            return Action::None;
        }
        if !directive.mutable {
            ctx.out.error(&fail("can't set immutable config"));
            return Action::None;
        }
        // CONFIG SET save replaces every point (a config file adds one per line).
        updated.save_points_explicit = false;
        if let Err(reason) = (directive.set)(&mut updated, &[lossy(pair[1])]) {
            ctx.out.error(&fail(&reason.to_string()));
            return Action::None;
        }
    }
    if updated.clients_max > ctx.server.config.clients_max
        && let Err(reason) = fit_open_files_limit(updated.clients_max)
    {
        ctx.out.error(&format!(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - {reason}"
        ));
        return Action::None;
    }
    // requirepass is the default user's password (Redis's `updateRequirePass`).
    if updated.requirepass != ctx.server.config.requirepass {
        let password = updated.requirepass.as_deref().map(str::as_bytes);
        ctx.server.acl.set_default_password(password);
    }
    ctx.server.config = updated;
    ctx.out.ok();
    Action::None
}

/// Why CONFIG SET refuses a higher maxclients (Redis's texts, after its reply's prefix).
#[derive(Debug, thiserror::Error)]
enum MaxClientsError {
    #[error(transparent)]
    Limit(#[from] crate::process::LimitError),
    /// The open-files limit could be raised only this far.
    #[error(
        "The operating system is not able to handle the specified number of clients, try with {allowed}"
    )]
    TooMany { allowed: usize },
}

/// A higher maxclients needs a higher open-files limit (Redis's `updateMaxclients`): raise
/// it, or refuse with the number of clients the limit allows.
fn fit_open_files_limit(maxclients: usize) -> Result<(), MaxClientsError> {
    let allowed = crate::process::adjust_open_files_limit(maxclients)?;
    if allowed < maxclients {
        return Err(MaxClientsError::TooMany { allowed });
    }
    Ok(())
}

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all commands.",
    "COUNT",
    "    Return the total number of commands in this server.",
    "LIST",
    "    Return a list of all commands in this server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "HELP",
    "    Print this help.",
];

fn command_command(ctx: &mut Ctx, args: &Args) -> Action {
    // The registry lives in the server; COMMAND reads it through this shared instance.
    let registry = registry();
    if args.len() == 1 {
        ctx.out.array(registry.len());
        for spec in registry.iter() {
            command_info(ctx, spec);
        }
        return Action::None;
    }
    let sub = lossy(args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "count" if args.len() == 2 => ctx.out.integer(registry.len() as i64),
        "info" => {
            if args.len() == 2 {
                ctx.out.array(registry.len());
                for spec in registry.iter() {
                    command_info(ctx, spec);
                }
            } else {
                ctx.out.array(args.len() - 2);
                for name in &args[2..] {
                    match registry.get(name) {
                        Some(spec) => command_info(ctx, spec),
                        // Redis 7 replies a null bulk (`$-1`), not a null array.
                        None => ctx.out.null(),
                    }
                }
            }
        }
        "docs" => command_docs(ctx, registry, &args[2..]),
        "list" if args.len() == 2 => {
            ctx.out.array(registry.len());
            for spec in registry.iter() {
                ctx.out.bulk(spec.name.as_bytes());
            }
        }
        "help" if args.len() == 2 => {
            ctx.out.array(COMMAND_HELP.len());
            for line in COMMAND_HELP {
                ctx.out.simple(line);
            }
        }
        "count" | "list" | "help" => wrong_arity(ctx, &format!("command|{sub}")),
        _ => unknown_subcommand(ctx, "command", args[1]),
    }
    Action::None
}

/// COMMAND DOCS [name ...]: Redis 7.0's own documentation for every command Tessera
/// registers (all of them when no name is given; unknown names are skipped, as Redis
/// does). `container|sub` names a subcommand, as in Redis.
fn command_docs(ctx: &mut Ctx, registry: &'static super::Registry, names: &Args) {
    let docs = docs_data();
    let doc_of = |spec: &'static CommandSpec| match docs.get(spec.name) {
        Some(doc) => Doc::Data(doc),
        None => Doc::Fallback(spec),
    };
    let found: Vec<(String, Doc)> = if names.is_empty() {
        registry
            .iter()
            .map(|spec| (spec.name.to_string(), doc_of(spec)))
            .collect()
    } else {
        names
            .iter()
            .filter_map(|name| {
                if let Some(spec) = registry.get(name) {
                    return Some((spec.name.to_string(), doc_of(spec)));
                }
                let full = lossy(name).to_ascii_lowercase();
                let (container, _) = full.split_once('|')?;
                registry.get(container.as_bytes())?;
                let doc = docs.get(container)?.get("subcommands")?.get(&full)?;
                Some((full, Doc::Data(doc)))
            })
            .collect()
    };
    ctx.out.map(found.len());
    for (name, doc) in found {
        ctx.out.bulk(name.as_bytes());
        match doc {
            Doc::Data(doc) => write_doc_value(&mut ctx.out, doc, None),
            Doc::Fallback(spec) => {
                // Only for a command the data lacks (tests/command_docs.rs keeps it whole).
                ctx.out.map(3);
                ctx.out.bulk(b"summary");
                ctx.out.bulk(spec.summary.as_bytes());
                ctx.out.bulk(b"since");
                ctx.out.bulk(b"1.0.0");
                ctx.out.bulk(b"group");
                ctx.out.bulk(spec.group.as_bytes());
            }
        }
    }
}

enum Doc {
    Data(&'static Value),
    Fallback(&'static CommandSpec),
}

/// The documentation COMMAND DOCS serves: Redis 7.0's reply for Tessera's commands, as
/// JSON (generated by tools/gen_command_docs.py, which documents how to regenerate it).
const COMMAND_DOCS_JSON: &str = include_str!("command_docs.json");

/// Map keys whose value Redis sends as a set (`~`), and of those, the ones whose items are
/// simple strings (`+optional`); every other string is a bulk string. JSON cannot say
/// this, so the rule lives here; tools/gen_command_docs.py checks it against Redis.
const SET_KEYS: &[&str] = &["history", "flags", "doc_flags"];
const STATUS_SET_KEYS: &[&str] = &["flags", "doc_flags"];

fn docs_data() -> &'static serde_json::Map<String, Value> {
    static DOCS: std::sync::OnceLock<serde_json::Map<String, Value>> = std::sync::OnceLock::new();
    DOCS.get_or_init(|| {
        serde_json::from_str(COMMAND_DOCS_JSON).expect("command_docs.json is a JSON object")
    })
}

/// Writes a doc value as Redis does: object → map, array → array (or set, by `key`),
/// string → bulk (or simple inside a flags set), integer → integer.
fn write_doc_value(out: &mut ReplyWriter, value: &Value, key: Option<&str>) {
    match value {
        Value::Object(map) => {
            out.map(map.len());
            for (name, item) in map {
                out.bulk(name.as_bytes());
                write_doc_value(out, item, Some(name));
            }
        }
        Value::Array(items) => {
            let is_set = key.is_some_and(|k| SET_KEYS.contains(&k));
            let status = key.is_some_and(|k| STATUS_SET_KEYS.contains(&k));
            if is_set {
                out.set(items.len());
            } else {
                out.array(items.len());
            }
            for item in items {
                match item {
                    Value::String(text) if status => out.simple(text),
                    _ => write_doc_value(out, item, None),
                }
            }
        }
        Value::String(text) => out.bulk(text.as_bytes()),
        Value::Number(n) => out.integer(n.as_i64().unwrap_or_default()),
        Value::Bool(b) => out.integer(*b as i64),
        Value::Null => out.null(),
    }
}

fn registry() -> &'static super::Registry {
    super::global_registry()
}

fn command_info(ctx: &mut Ctx, spec: &CommandSpec) {
    ctx.out.array(10);
    ctx.out.bulk(spec.name.as_bytes());
    ctx.out.integer(spec.arity as i64);
    let names: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(bit, _)| spec.flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    ctx.out.set(names.len());
    for name in names {
        ctx.out.simple(name);
    }
    ctx.out.integer(spec.first_key as i64);
    ctx.out.integer(spec.last_key as i64);
    ctx.out.integer(spec.key_step as i64);
    let categories = crate::acl::table::table().categories_of(spec.name);
    ctx.out.set(categories.len());
    for category in categories {
        ctx.out.simple(&category);
    }
    ctx.out.set(0); // tips
    ctx.out.array(0); // key specs
    ctx.out.array(0); // subcommands
}

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

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "keyspace",
];

fn info(ctx: &mut Ctx, args: &Args) -> Action {
    let mut sections: Vec<String> = args[1..]
        .iter()
        .map(|a| lossy(a).to_ascii_lowercase())
        .collect();
    if sections.is_empty()
        || sections
            .iter()
            .any(|s| s == "all" || s == "everything" || s == "default")
    {
        sections = DEFAULT_SECTIONS.iter().map(|s| s.to_string()).collect();
    }
    let mut text = String::new();
    for section in DEFAULT_SECTIONS
        .iter()
        .filter(|s| sections.iter().any(|x| x == *s))
    {
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
    kv(out, "async_loading", &0);
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
    kv(
        out,
        "rdb_bgsave_in_progress",
        &(p.rdb_bgsave_in_progress as u8),
    );
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
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            kv(out, "connected_clients", &server.connected_clients);
            kv(out, "cluster_connections", &0);
            kv(out, "maxclients", &config.clients_max);
            kv(out, "blocked_clients", &server.blocked.clients());
            kv(out, "tracking_clients", &server.tracking.client_count());
        }
        "memory" => {
            let (used, rss) = crate::stats::memory_usage();
            let pending_log = ctx.effects.buffer.capacity() as u64;
            let not_counted = server.eviction.not_counted(ctx.keyspace, pending_log);
            // Redis's overhead is the start-up memory, buffers and table overheads; here
            // the start-up memory and what eviction does not count (log buffers, the
            // capture's own memory).
            let startup = server.eviction.startup_bytes;
            let overhead = startup + not_counted;
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
            // Redis prints it as a signed number (`%lld`): past 2^63, negative.
            kv(out, "maxmemory", &(config.memory_bytes_max as i64));
            kv(
                out,
                "maxmemory_human",
                &human_bytes(config.memory_bytes_max),
            );
            kv(out, "maxmemory_policy", &config.eviction_policy.name());
            kv(out, "mem_not_counted_for_evict", &not_counted);
            kv(
                out,
                "mem_aof_buffer",
                &server.persistence.aof_buffered_bytes,
            );
            kv(out, "mem_allocator", &"jemalloc");
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
            kv(out, "tracking_total_keys", &server.tracking.total_keys());
            kv(out, "tracking_total_items", &server.tracking.total_items());
            kv(
                out,
                "tracking_total_prefixes",
                &server.tracking.total_prefixes(),
            );
            kv(out, "total_error_replies", &s.total_error_replies);
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            kv(out, "role", &"master");
            kv(out, "connected_slaves", &0);
        }
        "cpu" => {
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
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
