//! DEBUG: Redis 7.0's window on the internals for operators and test suites, behind
//! `enable-debug-command` (the engine refuses it before anything else but the arity, as
//! Redis's `processCommand` does: `Refusal::ProtectedCommand`).
//!
//! Built: HELP (Redis's text), DIGEST and DIGEST-VALUE (Redis's algorithm, `crate::digest`:
//! the same dataset gives the same 40 hex digits in both servers), OBJECT (Redis's line;
//! the address, `serializedlength`, the LRU field and the `ql_*` node figures describe
//! Tessera's own value), PROTOCOL, SLEEP (blocks the event loop, as Redis's does),
//! SET-ACTIVE-EXPIRE, SET-DISABLE-DENY-SCRIPTS (scripts may then run `noscript` commands,
//! a test aid), PAUSE-CRON (the cron's expiry, eviction, tracking and replication work
//! stops; see `server::cron`), QUICKLIST-PACKED-THRESHOLD (checked and accepted: Tessera's lists
//! have no plain nodes, so there is nothing for it to change), STRINGMATCH-TEST (a fuzz run
//! of `crate::glob`), CHANGE-REPL-ID (a new replication ID, no second one), LOG, ERROR,
//! CLIENT-EVICTION and CLUSTERLINK (what a Redis without `maxmemory-clients` and without
//! cluster support answers), POPULATE (Redis's keys and values, a count memory cannot
//! hold refused up front; like Redis's, neither logged nor sent to replicas), and RELOAD
//! and LOADAOF, which the handler only checks: the event loop owns the files and does
//! them (`Action::Reload`, `server::reload`).
//!
//! Redis matches a subcommand together with its number of arguments: a known name with
//! the wrong count gets the same "unknown subcommand or wrong number of arguments" error
//! as an unknown name. The other subcommands Redis 7.0 lists (crashes, restarts, the
//! allocator's and the structures' internals) are refused by name.

use super::flags::*;
use super::{Action, Args, CommandSpec, Ctx, lossy};
use crate::command;
use crate::keyspace::Value;

pub fn commands() -> Vec<CommandSpec> {
    vec![command!(
        "debug",
        -2,
        ADMIN | NO_SCRIPT | LOADING | STALE,
        (0, 0, 0),
        "server",
        "A container for debugging commands",
        debug
    )]
}

/// What DEBUG RELOAD or DEBUG LOADAOF asks the event loop to do (it owns the log, the
/// snapshot file and the background jobs); the reply is written once it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reload {
    pub command: ReloadCommand,
    /// Persist the dataset first (RELOAD without NOSAVE).
    pub save: bool,
    /// The loaded dataset replaces the current one (not NOFLUSH); otherwise it is added.
    pub flush: bool,
    /// Added keys (and function libraries) replace those of the same name (MERGE); without
    /// it such a conflict fails the command and changes nothing.
    pub merge: bool,
    /// Whether the reply is sent: the engine clears it when CLIENT REPLY OFF or SKIP drops
    /// the command's reply.
    pub reply: bool,
}

/// Which DEBUG subcommand asked for a reload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadCommand {
    /// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE].
    Reload,
    /// DEBUG LOADAOF: the log, synced, replaces the dataset.
    LoadAof,
}

impl ReloadCommand {
    /// The subcommand's name, as errors and log lines give it.
    pub fn name(self) -> &'static str {
        match self {
            ReloadCommand::Reload => "RELOAD",
            ReloadCommand::LoadAof => "LOADAOF",
        }
    }
}

/// How many words (DEBUG and the subcommand included) Redis matches a subcommand with.
#[derive(Clone, Copy)]
enum Words {
    Any,
    Exactly(usize),
    AtLeast(usize),
    Between(usize, usize),
}

impl Words {
    fn fits(self, count: usize) -> bool {
        match self {
            Words::Any => true,
            Words::Exactly(n) => count == n,
            Words::AtLeast(n) => count >= n,
            Words::Between(low, high) => (low..=high).contains(&count),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sub {
    Help,
    Reload,
    LoadAof,
    Object,
    Digest,
    DigestValue,
    Protocol,
    Sleep,
    SetActiveExpire,
    SetDisableDenyScripts,
    PauseCron,
    AofFlushSleep,
    /// REPLYBUFFER PEAK-RESET-TIME and RESIZING: how the cron sizes reply buffers.
    ReplyBuffer,
    /// Sends a command to the replicas without running it (Redis's way to make data
    /// diverge on purpose, for tests).
    Replicate,
    QuicklistPackedThreshold,
    ChangeReplId,
    StringmatchTest,
    Log,
    Error,
    ClientEviction,
    ClusterLink,
    /// DEBUG SEGFAULT: the process dies of SIGSEGV (its crash report in the log).
    Segfault,
    /// DEBUG PANIC: the event loop panics (its crash report in the log).
    Panic,
    Populate,
    /// A subcommand of Redis 7.0 that Tessera does not have.
    NotSupported,
}

/// Redis 7.0's subcommands, with the word counts its `debugCommand` matches them with.
const SUBCOMMANDS: &[(&str, Words, Sub)] = &[
    ("help", Words::Exactly(2), Sub::Help),
    ("reload", Words::Any, Sub::Reload),
    ("loadaof", Words::Any, Sub::LoadAof),
    ("object", Words::Exactly(3), Sub::Object),
    ("digest", Words::Exactly(2), Sub::Digest),
    ("digest-value", Words::AtLeast(2), Sub::DigestValue),
    ("protocol", Words::Exactly(3), Sub::Protocol),
    ("sleep", Words::Exactly(3), Sub::Sleep),
    ("set-active-expire", Words::Exactly(3), Sub::SetActiveExpire),
    (
        "quicklist-packed-threshold",
        Words::Exactly(3),
        Sub::QuicklistPackedThreshold,
    ),
    ("change-repl-id", Words::Exactly(2), Sub::ChangeReplId),
    ("stringmatch-test", Words::Exactly(2), Sub::StringmatchTest),
    ("log", Words::Exactly(3), Sub::Log),
    ("error", Words::Exactly(3), Sub::Error),
    ("client-eviction", Words::Exactly(2), Sub::ClientEviction),
    ("clusterlink", Words::Exactly(5), Sub::ClusterLink),
    ("segfault", Words::Any, Sub::Segfault),
    ("panic", Words::Any, Sub::Panic),
    ("restart", Words::Any, Sub::NotSupported),
    ("crash-and-recover", Words::Any, Sub::NotSupported),
    ("oom", Words::Any, Sub::NotSupported),
    ("assert", Words::Any, Sub::NotSupported),
    ("leak", Words::Exactly(3), Sub::NotSupported),
    (
        "drop-cluster-packet-filter",
        Words::Exactly(3),
        Sub::NotSupported,
    ),
    ("sdslen", Words::Exactly(3), Sub::NotSupported),
    ("listpack", Words::Exactly(3), Sub::NotSupported),
    ("quicklist", Words::Between(3, 4), Sub::NotSupported),
    ("populate", Words::Between(3, 5), Sub::Populate),
    (
        "set-skip-checksum-validation",
        Words::Exactly(3),
        Sub::NotSupported,
    ),
    ("aof-flush-sleep", Words::Exactly(3), Sub::AofFlushSleep),
    ("replicate", Words::AtLeast(3), Sub::Replicate),
    ("structsize", Words::Exactly(2), Sub::NotSupported),
    ("htstats", Words::Exactly(3), Sub::NotSupported),
    ("htstats-key", Words::Exactly(3), Sub::NotSupported),
    (
        "set-disable-deny-scripts",
        Words::Exactly(3),
        Sub::SetDisableDenyScripts,
    ),
    (
        "config-rewrite-force-all",
        Words::Exactly(2),
        Sub::NotSupported,
    ),
    ("mallctl", Words::AtLeast(3), Sub::NotSupported),
    ("mallctl-str", Words::AtLeast(3), Sub::NotSupported),
    ("pause-cron", Words::Exactly(3), Sub::PauseCron),
    ("replybuffer", Words::Exactly(4), Sub::ReplyBuffer),
];

/// Redis 7.0.15's DEBUG HELP, line for line (the first line and the last two are
/// `addReplyHelp`'s).
const HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "ASSERT",
    "    Crash by assertion failed.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "CRASH-AND-RECOVER [<milliseconds>]",
    "    Hard crash and restart after a <milliseconds> delay (default 0).",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LEAK <string>",
    "    Create a memory leak of the input string.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "MALLCTL <key> [<val>]",
    "    Get or set a malloc tuning integer.",
    "MALLCTL-STR <key> [<val>]",
    "    Get or set a malloc tuning string.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "OOM",
    "    Crash the server simulating an out-of-memory error.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "RESTART [<milliseconds>]",
    "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
    "SDSLEN <key>",
    "    Show low level SDS string info representing `key` and value.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "STRUCTSIZE",
    "    Return the size of different Redis core C structures.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "CLIENT-EVICTION",
    "    Show low level client eviction pools info (maxmemory-clients).",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
    "HELP",
    "    Prints this help.",
];

/// DEBUG PROTOCOL's type names, in Redis's error text.
const PROTOCOL_TYPES_ERROR: &str = "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false";

/// Redis's DEBUG QUICKLIST-PACKED-THRESHOLD ceiling: just below 4 GB.
const PACKED_THRESHOLD_BYTES_MAX: u64 = (1 << 32) - (1 << 20);

/// Random patterns and strings STRINGMATCH-TEST matches, as Redis's fuzz test.
const STRINGMATCH_CYCLES: usize = 10_000_000;

fn debug(ctx: &mut Ctx, args: &Args) -> Action {
    let found = SUBCOMMANDS.iter().find(|(name, words, _)| {
        args[1].eq_ignore_ascii_case(name.as_bytes()) && words.fits(args.len())
    });
    // CLUSTERLINK also needs KILL as its first argument (Redis checks it before the count).
    let sub = match found {
        Some((_, _, Sub::ClusterLink)) if !args[2].eq_ignore_ascii_case(b"kill") => None,
        Some((_, _, sub)) => Some(*sub),
        None => None,
    };
    let Some(sub) = sub else {
        super::subcommand_syntax_error(ctx, args);
        return Action::None;
    };
    match sub {
        Sub::Help => {
            ctx.out.array(HELP.len());
            for line in HELP {
                ctx.out.simple(line);
            }
        }
        Sub::Reload => return reload(ctx, args),
        Sub::LoadAof => return load_aof(ctx),
        Sub::Object => object(ctx, args[2]),
        Sub::Digest => {
            let digest = crate::digest::dataset_digest(ctx.keyspace);
            ctx.out.simple(&crate::digest::hex(&digest));
        }
        Sub::DigestValue => {
            ctx.out.array(args.len() - 2);
            for key in &args[2..] {
                // As Redis: the table as it is, a key past its time included.
                let digest = ctx.keyspace.dbs[ctx.client.db]
                    .get(key)
                    .map_or(crate::digest::EMPTY, crate::digest::value_digest);
                ctx.out.simple(&crate::digest::hex(&digest));
            }
        }
        Sub::Protocol => protocol(ctx, args[2]),
        Sub::Sleep => {
            if let Some(duration) = sleep_duration(args[2]) {
                // The whole event loop stops, as Redis's nanosleep stops its server.
                std::thread::sleep(duration);
            }
            ctx.out.ok();
        }
        Sub::SetActiveExpire => {
            ctx.server.active_expire = c_atoi(args[2]) != 0;
            ctx.out.ok();
        }
        Sub::PauseCron => {
            ctx.server.cron_paused = c_atoi(args[2]) != 0;
            ctx.out.ok();
        }
        Sub::AofFlushSleep => {
            // The log writer sleeps before each write (the event loop hands it over).
            ctx.server.aof_flush_sleep_us = c_atoi(args[2]).max(0) as u64;
            ctx.out.ok();
        }
        Sub::Replicate => {
            ctx.propagate_to_replicas(&args[2..]);
            ctx.out.ok();
        }
        Sub::SetDisableDenyScripts => {
            ctx.server.scripts_may_run_noscript = c_atoi(args[2]) != 0;
            ctx.out.ok();
        }
        Sub::QuicklistPackedThreshold => {
            let size = std::str::from_utf8(args[2])
                .ok()
                .and_then(crate::config::memtoull);
            match size {
                Some(size) if size <= PACKED_THRESHOLD_BYTES_MAX => ctx.out.ok(),
                _ => ctx.out.error(
                    "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                ),
            }
        }
        Sub::ChangeReplId => {
            tracing::warn!("Changing replication IDs after receiving DEBUG change-repl-id");
            let ids = &mut ctx.server.replication.ids;
            ids.change();
            ids.clear_second();
            ctx.out.ok();
        }
        Sub::StringmatchTest => {
            stringmatch_test();
            ctx.out
                .simple("Apparently Redis did not crash: test passed");
        }
        Sub::Log => {
            tracing::warn!("DEBUG LOG: {}", lossy(args[2]));
            ctx.out.ok();
        }
        Sub::Error => {
            // Written as is, as Redis's addReplySds: no error statistics count it.
            let out = &mut ctx.out.buf;
            out.push(b'-');
            out.extend(
                args[2]
                    .iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            out.extend_from_slice(b"\r\n");
        }
        Sub::ClientEviction => ctx.out.error("ERR maxmemory-clients is disabled."),
        Sub::ClusterLink => ctx
            .out
            .error("ERR Debug option only available for cluster mode enabled setup!"),
        Sub::Segfault => {
            // SAFETY: raise sends the signal to this thread; its handler writes the crash
            // report and the process ends by the signal, as Redis's DEBUG SEGFAULT.
            unsafe {
                libc::raise(libc::SIGSEGV);
            }
        }
        Sub::Panic => panic!("DEBUG PANIC"),
        Sub::Populate => populate(ctx, args),
        Sub::ReplyBuffer => reply_buffer(ctx, args),
        Sub::NotSupported => {
            let name = lossy(args[1]).to_ascii_uppercase();
            ctx.out
                .error(&format!("ERR DEBUG {name} is not supported by Tessera"));
        }
    }
    Action::None
}

/// Redis's `dictTryExpand` fails only when the allocator refuses the table, and then
/// fills keys until the kernel kills it (Redis 7.0.15 on a 24 GB machine, asked for 2^32
/// keys). Tessera refuses up front a count whose keys alone could not fit in physical
/// memory: this many bytes per key at least (entry, key, value and table slot).
const POPULATE_BYTES_PER_KEY_MIN: u64 = 64;

/// Physical memory in bytes, or `u64::MAX` where the system does not say.
fn physical_memory_bytes() -> u64 {
    // SAFETY: sysconf reads a system constant; it has no preconditions.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page_size)) {
        (Ok(pages), Ok(size)) if pages > 0 && size > 0 => pages.saturating_mul(size),
        _ => u64::MAX,
    }
}

/// DEBUG POPULATE count [prefix] [size]: string keys `prefix:N` (`key:N`), each valued
/// `value:N` cut or padded with zero bytes to `size`; existing keys are left alone. As in
/// Redis the keys are neither logged nor sent to replicas (a test aid), and a name is cut
/// at 127 bytes (Redis formats it into a 128-byte buffer).
fn populate(ctx: &mut Ctx, args: &Args) {
    const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
    let Some(count) = crate::resp::parse_i64(args[2]).and_then(|n| u64::try_from(n).ok()) else {
        ctx.out.error(NOT_POSITIVE);
        return;
    };
    let size = match args.get(4) {
        None => None,
        Some(arg) => match crate::resp::parse_i64(arg).and_then(|n| usize::try_from(n).ok()) {
            Some(0) => None,
            Some(size) => Some(size),
            None => {
                ctx.out.error(NOT_POSITIVE);
                return;
            }
        },
    };
    let per_key = POPULATE_BYTES_PER_KEY_MIN.saturating_add(size.unwrap_or(0) as u64);
    if count.saturating_mul(per_key) > physical_memory_bytes() {
        ctx.out.error("ERR OOM in dictTryExpand");
        return;
    }
    let prefix = args.get(3).copied().unwrap_or(b"key");
    let mut key = Vec::new();
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(itoa::Buffer::new().format(j).as_bytes());
        key.truncate(127);
        if ctx.lookup(&key).is_some() {
            continue;
        }
        let mut value = format!("value:{j}").into_bytes();
        if let Some(size) = size {
            value.resize(size, 0);
        }
        ctx.db().insert(crate::keyspace::Entry {
            key: crate::keyspace::Key::from(&key[..]),
            value: Value::string(crate::types::string::Str::from(&value[..])),
            expire_at_ms: crate::keyspace::NO_EXPIRY,
        });
        ctx.signal_modified(&key);
    }
    ctx.out.ok();
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: the options checked here, the work done by
/// the event loop.
fn reload(ctx: &mut Ctx, args: &Args) -> Action {
    let (mut save, mut flush, mut merge) = (true, true, false);
    for option in &args[2..] {
        if option.eq_ignore_ascii_case(b"merge") {
            merge = true;
        } else if option.eq_ignore_ascii_case(b"noflush") {
            flush = false;
        } else if option.eq_ignore_ascii_case(b"nosave") {
            save = false;
        } else {
            ctx.out
                .error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
            return Action::None;
        }
    }
    loop_work(
        ctx,
        Reload {
            command: ReloadCommand::Reload,
            save,
            flush,
            merge,
            reply: true,
        },
    )
}

/// DEBUG LOADAOF (any further arguments are ignored, as in Redis).
fn load_aof(ctx: &mut Ctx) -> Action {
    loop_work(
        ctx,
        Reload {
            command: ReloadCommand::LoadAof,
            save: false,
            flush: true,
            merge: false,
            reply: true,
        },
    )
}

/// Hands a reload to the event loop, which can do it only between commands: not from
/// inside an EXEC (whose queue runs in one go in the engine) nor during the replay.
fn loop_work(ctx: &mut Ctx, reload: Reload) -> Action {
    if ctx.in_exec() || ctx.loading {
        ctx.out.error(&format!(
            "ERR DEBUG {} inside MULTI is not supported by Tessera",
            reload.command.name()
        ));
        return Action::None;
    }
    Action::Reload(reload)
}

/// DEBUG OBJECT: Redis's line for the value at `key` (not expired first, as Redis's
/// `dictFind`). `Value at` is the address of Tessera's value; `serializedlength` is its
/// RDB encoding's length as Tessera writes it; `lru` is its access field.
fn object(ctx: &mut Ctx, key: &[u8]) {
    let Some(entry) = ctx.keyspace.dbs[ctx.client.db].get(key) else {
        ctx.out.error("ERR no such key");
        return;
    };
    let value = &entry.value;
    let address = match value {
        Value::String(s, _) => s.as_ptr(),
        Value::List(l, _) => std::sync::Arc::as_ptr(l) as *const u8,
        Value::Hash(h, _) => std::sync::Arc::as_ptr(h) as *const u8,
        Value::Set(s, _) => std::sync::Arc::as_ptr(s) as *const u8,
        Value::ZSet(z, _) => std::sync::Arc::as_ptr(z) as *const u8,
        Value::Stream(s, _) => std::sync::Arc::as_ptr(s) as *const u8,
    };
    let config = &ctx.server.config;
    let refcount = super::object::refcount(config, value);
    let serialized = crate::rdb::value_len(value, config.rdbcompression);
    let access = value.access();
    let mut line = format!(
        "Value at:{address:p} refcount:{refcount} encoding:{} serializedlength:{serialized} lru:{} lru_seconds_idle:{}",
        value.encoding(),
        access.bits() & crate::access::LRU_CLOCK_MAX,
        access.idle_ms() / 1000,
    );
    if let Value::List(list, _) = value {
        let nodes = list.nodes();
        let node_count = nodes.len();
        let bytes: usize = list.nodes().map(|node| node.byte_len()).sum();
        let average = list.len() as f64 / node_count.max(1) as f64;
        line.push_str(&format!(
            " ql_nodes:{node_count} ql_avg_node:{average:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{bytes}",
            crate::types::limits::list_max_listpack_size(),
            (crate::types::limits::list_compress_depth() != 0) as u8,
        ));
    }
    ctx.out.simple(&line);
}

/// DEBUG PROTOCOL <type>: Redis's test value of each reply type, in the client's protocol.
fn protocol(ctx: &mut Ctx, name: &[u8]) {
    let is = |word: &str| name.eq_ignore_ascii_case(word.as_bytes());
    let out = &mut ctx.out;
    if is("string") {
        out.bulk(b"Hello World");
    } else if is("integer") {
        out.integer(12345);
    } else if is("double") {
        // Redis's test value, not an approximation of π.
        #[allow(clippy::approx_constant)]
        out.double(3.141);
    } else if is("bignum") {
        out.big_number("1234567999999999999999999999999999999");
    } else if is("null") {
        out.null();
    } else if is("array") || is("set") {
        if is("array") {
            out.array(3);
        } else {
            out.set(3);
        }
        for n in 0..3 {
            out.integer(n);
        }
    } else if is("map") {
        out.map(3);
        for n in 0..3 {
            out.integer(n);
            out.boolean(n == 1);
        }
    } else if is("attrib") {
        if out.resp3 {
            out.attribute(1);
            out.bulk(b"key-popularity");
            out.array(2);
            out.bulk(b"key:123");
            out.integer(90);
        }
        // An attribute describes the reply after it, which every client gets.
        out.bulk(b"Some real reply following the attribute");
    } else if is("push") {
        if !out.resp3 {
            out.error("ERR RESP2 is not supported by this command");
            return;
        }
        out.push(2);
        out.bulk(b"server-cpu-usage");
        out.integer(42);
        // A push is no reply: a real one follows, for clients that wait for one.
        out.bulk(b"Some real reply following the push reply");
    } else if is("verbatim") {
        out.verbatim(b"This is a verbatim\nstring");
    } else if is("true") {
        out.boolean(true);
    } else if is("false") {
        out.boolean(false);
    } else {
        out.error(PROTOCOL_TYPES_ERROR);
    }
}

/// DEBUG SLEEP's argument as Redis reads it (`strtod`, whatever follows the number
/// ignored, then whole microseconds); None when Redis's `nanosleep` would return at once:
/// zero, negative, or beyond what its conversion to a 64-bit integer can hold.
fn sleep_duration(arg: &[u8]) -> Option<std::time::Duration> {
    let micros = c_strtod(arg) * 1e6;
    // Out of range (or NaN), x86's conversion gives i64::MIN: a negative time.
    const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;
    let micros = if micros > -TWO_TO_63 && micros < TWO_TO_63 {
        micros as i64
    } else {
        i64::MIN
    };
    (micros > 0).then(|| std::time::Duration::from_micros(micros as u64))
}

/// C's `strtod` on an argument: the longest prefix that is a number, 0 if none. The
/// argument is a C string to Redis: it ends at its first NUL.
fn c_strtod(arg: &[u8]) -> f64 {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    let text = std::ffi::CString::new(&arg[..end]).expect("no NUL before `end`");
    // SAFETY: `text` is NUL-terminated and outlives the call; a null end pointer is
    // allowed (strtod then does not report where it stopped).
    unsafe { libc::strtod(text.as_ptr(), std::ptr::null_mut()) }
}

/// C's `atoi` as glibc has it (`(int) strtol(s, NULL, 10)`): leading white space, a sign,
/// digits; anything else ends it; out of range saturates as a long, then is cut to an int.
/// DEBUG REPLYBUFFER PEAK-RESET-TIME <NEVER|RESET|ms> and RESIZING <0|1>.
fn reply_buffer(ctx: &mut Ctx, args: &Args) {
    use crate::reply_buffer::PeakReset;
    if args[2].eq_ignore_ascii_case(b"peak-reset-time") {
        let peak_reset = if args[3].eq_ignore_ascii_case(b"never") {
            PeakReset::Never
        } else if args[3].eq_ignore_ascii_case(b"reset") {
            PeakReset::default()
        } else {
            let Some(ms) = super::int_arg(ctx, args[3]) else {
                return;
            };
            PeakReset::from_millis(ms)
        };
        ctx.server.reply_buffer.peak_reset = peak_reset;
    } else if args[2].eq_ignore_ascii_case(b"resizing") {
        ctx.server.reply_buffer.resizing = c_atoi(args[3]) != 0;
    } else {
        super::subcommand_syntax_error(ctx, args);
        return;
    }
    ctx.out.ok();
}

fn c_atoi(arg: &[u8]) -> i32 {
    let mut bytes = arg
        .iter()
        .copied()
        .skip_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
        .peekable();
    let negative = match bytes.peek() {
        Some(b'-') => {
            bytes.next();
            true
        }
        Some(b'+') => {
            bytes.next();
            false
        }
        _ => false,
    };
    let mut magnitude: i128 = 0;
    for digit in bytes.take_while(u8::is_ascii_digit) {
        magnitude = (magnitude * 10 + (digit - b'0') as i128).min(i64::MAX as i128 + 1);
    }
    let long = if negative { -magnitude } else { magnitude };
    long.clamp(i64::MIN as i128, i64::MAX as i128) as i64 as i32
}

/// Redis's `stringmatchlen_fuzz_test`: random patterns against random strings, to find
/// a pattern that crashes the matcher (here: panics or never ends). Bytes come from a
/// xorshift generator, as cheap as Redis's `rand()`: ten million rounds of 32-byte
/// strings are the test.
fn stringmatch_test() {
    let mut state: u64 = rand::random::<u64>() | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut text, mut pattern) = ([0u8; 32], [0u8; 32]);
    let mut matches = 0u64;
    for _ in 0..STRINGMATCH_CYCLES {
        let lengths = next();
        let text_len = (lengths % 32) as usize;
        let pattern_len = ((lengths >> 8) % 32) as usize;
        for chunk in text.chunks_mut(8).chain(pattern.chunks_mut(8)) {
            let bytes = (next() & 0x7f7f_7f7f_7f7f_7f7f).to_le_bytes();
            chunk.copy_from_slice(&bytes);
        }
        matches +=
            crate::glob::glob_match(&pattern[..pattern_len], &text[..text_len], false) as u64;
    }
    tracing::info!("DEBUG STRINGMATCH-TEST: {matches} matches");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_as_glibc_does() {
        assert_eq!(c_atoi(b"1"), 1);
        assert_eq!(c_atoi(b"  -7x"), -7);
        assert_eq!(c_atoi(b"x1"), 0);
        assert_eq!(c_atoi(b"+0"), 0);
        // strtol saturates, then the cast to int keeps the low 32 bits.
        assert_eq!(c_atoi(b"4294967297"), 1);
        assert_eq!(c_atoi(b"99999999999999999999"), -1);
    }

    #[test]
    fn sleep_reads_as_strtod_does() {
        use std::time::Duration;
        assert_eq!(sleep_duration(b"0.25"), Some(Duration::from_millis(250)));
        assert_eq!(sleep_duration(b"1e-3xyz"), Some(Duration::from_millis(1)));
        assert_eq!(sleep_duration(b"abc"), None);
        assert_eq!(sleep_duration(b"-1"), None);
        assert_eq!(sleep_duration(b"0"), None);
        assert_eq!(sleep_duration(b"1e300"), None);
        assert_eq!(sleep_duration(b"nan"), None);
    }
}
