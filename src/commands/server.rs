//! Server commands: CONFIG, COMMAND, TIME, LASTSAVE, SHUTDOWN, SAVE, BGSAVE, BGREWRITEAOF (INFO is `info`).

use super::{
    Action, Args, CommandSpec, Ctx, Job, SYNTAX_ERROR, ShutdownSave, eq_ignore_case, flags::*,
    lossy, unknown_subcommand, wrong_arity,
};
use crate::command;
use crate::config::{Directive, all_directives, find_directive};
use crate::glob::glob_match;
use crate::resp::ReplyWriter;
use crate::shutdown::{ShutdownCall, ShutdownFlags};
use serde_json::Value;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "info",
            -1,
            LOADING | STALE,
            (0, 0, 0),
            "server",
            "Returns information and statistics about the server.",
            super::info::info
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

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: the event loop blocks the client and
/// runs the shutdown (`crate::shutdown`); ABORT cancels one that waits for replicas.
fn shutdown(ctx: &mut Ctx, args: &Args) -> Action {
    let mut flags = ShutdownFlags::DEFAULT;
    let (mut nosave, mut save, mut abort) = (false, false, false);
    for arg in &args[1..] {
        if eq_ignore_case(arg, "nosave") {
            nosave = true;
        } else if eq_ignore_case(arg, "save") {
            save = true;
        } else if eq_ignore_case(arg, "now") {
            flags.now = true;
        } else if eq_ignore_case(arg, "force") {
            flags.force = true;
        } else if eq_ignore_case(arg, "abort") {
            abort = true;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    }
    // Redis's illegal combinations: ABORT with any flag, SAVE with NOSAVE.
    if (abort && (nosave || save || flags.now || flags.force)) || (nosave && save) {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    if abort {
        if !ctx.server.shutdown.is_waiting() {
            ctx.out.error("ERR No shutdown in progress.");
            return Action::None;
        }
        ctx.out.ok();
        return Action::Shutdown(ShutdownCall::Abort);
    }
    flags.save = if nosave {
        ShutdownSave::NoSave
    } else if save {
        ShutdownSave::Save
    } else {
        ShutdownSave::AsConfigured
    };
    Action::Shutdown(ShutdownCall::Begin(flags))
}

/// SAVE: writes `dbfilename` in `dir` on the event loop, blocking it, as Redis's SAVE does.
fn save(ctx: &mut Ctx, _args: &Args) -> Action {
    if ctx.server.persistence.rdb_bgsave_in_progress {
        ctx.out.error("ERR Background save already in progress");
        return Action::None;
    }
    let server = &*ctx.server;
    match crate::snapshot::save_configured(
        &*server.storage,
        ctx.keyspace,
        &server.config,
        &server.scripting,
        server.replication.saved_history(ctx.effects),
    ) {
        Ok(size) => {
            tracing::info!("DB saved on disk ({size} bytes)");
            ctx.server.record_save();
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
/// scheduled and starts when the BGSAVE ends. With the log off it writes a new base alone
/// in the log directory, as Redis 7 does (`compaction::Purpose::BaseOnly`).
fn bgrewriteaof(ctx: &mut Ctx, _args: &Args) -> Action {
    let in_exec = ctx.in_exec();
    let persistence = &mut ctx.server.persistence;
    if persistence.aof_rewrite_in_progress {
        ctx.out
            .error("ERR Background append only file rewriting already in progress");
        Action::None
    } else if persistence.rdb_bgsave_in_progress
        || ctx.server.replication.full_sync_in_progress
        || in_exec
    {
        // Inside EXEC Redis cannot fork either: the job starts from the cron. A full
        // sync's snapshot is a BGSAVE to Redis.
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
    // A full sync's snapshot is a BGSAVE to Redis: its child is of the same type.
    let full_sync = ctx.server.replication.full_sync_in_progress;
    let persistence = &mut ctx.server.persistence;
    if persistence.rdb_bgsave_in_progress || full_sync {
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
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Print this help.",
];

fn config(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "get" => args.len() >= 3,
        "set" => args.len() >= 4,
        "resetstat" | "rewrite" | "help" => args.len() == 2,
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
        "rewrite" => config_rewrite(ctx),
        "resetstat" => {
            // As Redis: the counters, the command and error tables; not the slow log, nor
            // the latency monitor's events.
            ctx.server.stats.reset();
            ctx.server.commands.reset();
            ctx.server.lazyfree.reset_freed();
            // Redis's resetServerStats resets the sync and persistence counters too.
            ctx.server.replication.stats = Default::default();
            let persistence = &mut ctx.server.persistence;
            persistence.aof_rewrites = 0;
            persistence.aof_rewrites_consecutive_failures = 0;
            persistence.rdb_saves = 0;
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

/// CONFIG GET pattern [pattern ...]: each directive once, under every name (an alias
/// too) a pattern matches. A name without glob characters is looked up directly and
/// answered under the name as given, hidden directives included; patterns skip them.
fn config_get(ctx: &mut Ctx, patterns: &Args) -> Action {
    let mut matched: Vec<(String, &'static Directive)> = Vec::new();
    for pattern in patterns {
        if !pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
            let name = lossy(pattern);
            if let Some(directive) = find_directive(&name)
                && !matched.iter().any(|(seen, _)| *seen == name)
            {
                matched.push((name, directive));
            }
            continue;
        }
        for directive in all_directives().filter(|d| !d.hidden) {
            for name in directive.names() {
                if !matched.iter().any(|(seen, _)| seen == name)
                    && glob_match(pattern, name.as_bytes(), true)
                {
                    matched.push((name.to_string(), directive));
                }
            }
        }
    }
    ctx.out.map(matched.len());
    for (name, directive) in matched {
        ctx.out.bulk(name.as_bytes());
        ctx.out.bulk((directive.get)(&ctx.server.config).as_bytes());
    }
    Action::None
}

/// CONFIG REWRITE: the config file the server started with, rewritten with the
/// configuration in force (`config::rewrite`), with Redis's replies.
fn config_rewrite(ctx: &mut Ctx) {
    if ctx.server.config_file.is_empty() {
        ctx.out
            .error("ERR The server is running without a config file");
        return;
    }
    // The users go into the config file unless they live in an aclfile.
    let users: Option<Vec<Vec<u8>>> = ctx.server.config.aclfile.is_empty().then(|| {
        ctx.server
            .acl
            .file_text()
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    });
    let path = std::path::Path::new(&ctx.server.config_file);
    let storage = ctx.server.storage.clone();
    match crate::config::rewrite::rewrite_file(
        &*storage,
        path,
        &ctx.server.config,
        users.as_deref(),
    ) {
        Ok(()) => {
            tracing::warn!("CONFIG REWRITE executed with success.");
            ctx.out.ok();
        }
        Err(error) => {
            let reason = crate::process::os_error_text(&error);
            tracing::warn!("CONFIG REWRITE failed: {reason}");
            ctx.out
                .error(&format!("ERR Rewriting config file: {reason}"));
        }
    }
}

/// CONFIG SET name value [name value ...]: all or nothing, as Redis 7.
fn config_set(ctx: &mut Ctx, pairs: &Args) -> Action {
    if !pairs.len().is_multiple_of(2) {
        // Redis: an odd argument count past the first pair is a syntax error.
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    // Redis's DENY_LOADING_CONFIG, whose error takes precedence over the others.
    let loading = ctx.server.persistence.loading.is_some() || ctx.server.persistence.async_loading;
    if loading
        && pairs.chunks(2).any(|pair| {
            find_directive(&lossy(pair[0]))
                .is_some_and(|d| crate::config::DENY_WHILE_LOADING.contains(&d.name))
        })
    {
        ctx.out
            .error("LOADING Redis is loading the dataset in memory");
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
        let start_only = crate::config::START_ONLY.contains(&directive.name);
        if !directive.mutable && !start_only {
            ctx.out.error(&fail("can't set immutable config"));
            return Action::None;
        }
        // CONFIG SET save replaces every point (a config file adds one per line).
        updated.save_points_explicit = false;
        if let Err(reason) = (directive.set)(&mut updated, &[lossy(pair[1])]) {
            ctx.out.error(&fail(&reason.to_string()));
            return Action::None;
        }
        if start_only && (directive.get)(&updated) != (directive.get)(&ctx.server.config) {
            ctx.out.error(&fail("can't set immutable config"));
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
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
];

fn command_command(ctx: &mut Ctx, args: &Args) -> Action {
    // The registry lives in the server; COMMAND reads it through this shared instance.
    let registry = registry();
    if args.len() == 1 {
        super::command_info::every_command(ctx);
        return Action::None;
    }
    let sub = lossy(args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "count" if args.len() == 2 => ctx.out.integer(registry.len() as i64),
        "info" if args.len() == 2 => super::command_info::every_command(ctx),
        "info" => super::command_info::command_info(ctx, &args[2..]),
        "docs" => command_docs(ctx, registry, &args[2..]),
        "getkeys" | "getkeysandflags" if args.len() >= 4 => {
            super::getkeys::getkeys(ctx, &args[2..], sub == "getkeysandflags")
        }
        "list" => super::command_list::command_list(ctx, &args[2..]),
        "help" if args.len() == 2 => {
            ctx.out.array(COMMAND_HELP.len());
            for line in COMMAND_HELP {
                ctx.out.simple(line);
            }
        }
        "count" | "help" | "getkeys" | "getkeysandflags" => {
            wrong_arity(ctx, &format!("command|{sub}"))
        }
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
