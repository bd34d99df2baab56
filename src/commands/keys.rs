//! Generic key commands: existence, expiry, renaming, iteration, databases.
//!
//! Keyspace events, as Redis 7.0 raises them: `del` (DEL, UNLINK, EXPIRE with a time
//! already past), `expire`, `persist`, `rename_from` / `rename_to`, `move_from` /
//! `move_to`, `copy_to`, each after `new` for the key they create. FLUSHDB, FLUSHALL and
//! SWAPDB raise none.

use super::{
    Action, Args, CommandSpec, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR, eq_ignore_case,
    flags::*, int_arg, lossy, ms_text,
};
use crate::command;
use crate::glob::glob_match;
use crate::keyspace::{Entry, NO_EXPIRY, SLOT_COUNT};

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "del",
            -2,
            WRITE,
            (1, -1, 1),
            "generic",
            "Deletes one or more keys.",
            del
        ),
        command!(
            "unlink",
            -2,
            WRITE | FAST,
            (1, -1, 1),
            "generic",
            "Asynchronously deletes one or more keys.",
            del
        ),
        command!(
            "touch",
            -2,
            READONLY | FAST,
            (1, -1, 1),
            "generic",
            "Alters the last access time of a key(s). Returns the number of existing keys specified.",
            touch
        ),
        command!(
            "exists",
            -2,
            READONLY | FAST,
            (1, -1, 1),
            "generic",
            "Determines whether one or more keys exist.",
            exists
        ),
        command!(
            "type",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "generic",
            "Determines the type of value stored at a key.",
            type_command
        ),
        command!(
            "expire",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "generic",
            "Sets the expiration time of a key in seconds.",
            expire
        ),
        command!(
            "pexpire",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "generic",
            "Sets the expiration time of a key in milliseconds.",
            expire
        ),
        command!(
            "expireat",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "generic",
            "Sets the expiration time of a key to a Unix timestamp.",
            expire
        ),
        command!(
            "pexpireat",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "generic",
            "Sets the expiration time of a key to a Unix milliseconds timestamp.",
            expire
        ),
        command!(
            "ttl",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "generic",
            "Returns the expiration time in seconds of a key.",
            ttl
        ),
        command!(
            "pttl",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "generic",
            "Returns the expiration time in milliseconds of a key.",
            ttl
        ),
        command!(
            "expiretime",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "generic",
            "Returns the expiration time of a key as a Unix timestamp.",
            ttl
        ),
        command!(
            "pexpiretime",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "generic",
            "Returns the expiration time of a key as a Unix milliseconds timestamp.",
            ttl
        ),
        command!(
            "persist",
            2,
            WRITE | FAST,
            (1, 1, 1),
            "generic",
            "Removes the expiration time of a key.",
            persist
        ),
        command!(
            "rename",
            3,
            WRITE,
            (1, 2, 1),
            "generic",
            "Renames a key and overwrites the destination.",
            rename
        ),
        command!(
            "renamenx",
            3,
            WRITE | FAST,
            (1, 2, 1),
            "generic",
            "Renames a key only when the target key name doesn't exist.",
            rename
        ),
        command!(
            "copy",
            -3,
            WRITE | DENYOOM,
            (1, 2, 1),
            "generic",
            "Copies the value of a key to a new key.",
            copy
        ),
        command!(
            "move",
            3,
            WRITE | FAST,
            (1, 1, 1),
            "generic",
            "Moves a key to another database.",
            move_command
        ),
        command!(
            "keys",
            2,
            READONLY,
            (0, 0, 0),
            "generic",
            "Returns all key names that match a pattern.",
            keys
        ),
        command!(
            "scan",
            -2,
            READONLY,
            (0, 0, 0),
            "generic",
            "Iterates over the key names in the database.",
            scan
        ),
        command!(
            "randomkey",
            1,
            READONLY,
            (0, 0, 0),
            "generic",
            "Returns a random key name from the database.",
            randomkey
        ),
        command!(
            "dbsize",
            1,
            READONLY | FAST,
            (0, 0, 0),
            "server",
            "Returns the number of keys in the database.",
            dbsize
        ),
        command!(
            "flushdb",
            -1,
            WRITE,
            (0, 0, 0),
            "server",
            "Removes all keys from the current database.",
            flush
        ),
        command!(
            "flushall",
            -1,
            WRITE,
            (0, 0, 0),
            "server",
            "Removes all keys from all databases.",
            flush
        ),
        command!(
            "swapdb",
            3,
            WRITE | FAST,
            (0, 0, 0),
            "server",
            "Swaps two Redis databases.",
            swapdb
        ),
        command!(
            "select",
            2,
            LOADING | STALE | FAST,
            (0, 0, 0),
            "connection",
            "Changes the selected database.",
            select
        ),
    ]
}

/// DEL and UNLINK: UNLINK (and DEL under `lazyfree-lazy-user-del`) frees big values on
/// the lazy-free thread.
fn del(ctx: &mut Ctx, args: &Args) -> Action {
    let lazy = eq_ignore_case(args[0], "unlink") || ctx.server.config.lazyfree_user_del;
    let mut removed = 0;
    for key in &args[1..] {
        if ctx.lookup(key).is_some() {
            let entry = ctx.db().remove(key).expect("the key was found");
            if lazy {
                ctx.server.lazyfree.free(entry.value);
            }
            ctx.notify(EventClass::Generic, "del", key);
            ctx.propagate(&[b"DEL", key]);
            removed += 1;
        }
    }
    ctx.out.integer(removed);
    Action::None
}

fn exists(ctx: &mut Ctx, args: &Args) -> Action {
    count_present(ctx, &args[1..], |ctx, key| {
        ctx.lookup_read_no_touch(key).is_some()
    })
}

/// TOUCH: each existing key's access field updated, as any read does (Redis's
/// `lookupKeyRead`: hits and misses counted, `keymiss` raised).
fn touch(ctx: &mut Ctx, args: &Args) -> Action {
    count_present(ctx, &args[1..], |ctx, key| ctx.lookup_read(key).is_some())
}

/// Replies how many of `keys` `present` finds (a key named twice counts twice).
fn count_present(ctx: &mut Ctx, keys: &Args, present: fn(&mut Ctx, &[u8]) -> bool) -> Action {
    let count = keys.iter().filter(|key| present(ctx, key)).count();
    ctx.out.integer(count as i64);
    Action::None
}

fn type_command(ctx: &mut Ctx, args: &Args) -> Action {
    let name = ctx
        .lookup_read_no_touch(args[1])
        .map_or("none", |e| e.value.type_name());
    ctx.out.simple(name);
    Action::None
}

fn expire(ctx: &mut Ctx, args: &Args) -> Action {
    let name = lossy(args[0]).to_ascii_lowercase();
    let unit_ms = if name.starts_with('p') { 1 } else { 1000 };
    let absolute = name.ends_with("at");
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in &args[3..] {
        if eq_ignore_case(option, "nx") {
            nx = true;
        } else if eq_ignore_case(option, "xx") {
            xx = true;
        } else if eq_ignore_case(option, "gt") {
            gt = true;
        } else if eq_ignore_case(option, "lt") {
            lt = true;
        } else {
            ctx.out
                .error(&format!("ERR Unsupported option {}", lossy(option)));
            return Action::None;
        }
    }
    if nx && (xx || gt || lt) {
        ctx.out
            .error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return Action::None;
    }
    if gt && lt {
        ctx.out
            .error("ERR GT and LT options at the same time are not compatible");
        return Action::None;
    }
    // Redis parses the options before the time.
    let Some(value) = int_arg(ctx, args[2]) else {
        return Action::None;
    };
    // Redis computes the absolute time before looking at the key, overflow included.
    let when = match value.checked_mul(unit_ms) {
        Some(ms) if absolute => Some(ms),
        Some(ms) => ms.checked_add(ctx.now_ms),
        None => None,
    };
    let Some(when) = when else {
        ctx.out
            .error(&format!("ERR invalid expire time in '{name}' command"));
        return Action::None;
    };
    let key = args[1];
    let Some(current) = ctx.lookup(key).map(|e| e.expire_at_ms) else {
        ctx.out.integer(0);
        return Action::None;
    };
    let persistent = current == NO_EXPIRY;
    let refused = (nx && !persistent)
        || (xx && persistent)
        || (gt && (persistent || when <= current))
        || (lt && !persistent && when >= current);
    if refused {
        ctx.out.integer(0);
        return Action::None;
    }
    if when <= ctx.now_ms && !ctx.loading {
        ctx.db().remove(key);
        ctx.notify(EventClass::Generic, "del", key);
        ctx.propagate(&[b"DEL", key]);
    } else {
        ctx.db().set_expiry(key, when);
        ctx.notify(EventClass::Generic, "expire", key);
        let at = ms_text(when);
        ctx.propagate(&[b"PEXPIREAT", key, at.as_bytes()]);
    }
    ctx.out.integer(1);
    Action::None
}

fn ttl(ctx: &mut Ctx, args: &Args) -> Action {
    let name = lossy(args[0]).to_ascii_lowercase();
    let in_ms = name.starts_with('p');
    let absolute = name.ends_with("time");
    let now = ctx.now_ms;
    let Some(expire_at) = ctx.lookup_read_no_touch(args[1]).map(|e| e.expire_at_ms) else {
        ctx.out.integer(-2);
        return Action::None;
    };
    if expire_at == NO_EXPIRY {
        ctx.out.integer(-1);
        return Action::None;
    }
    let ms = if absolute {
        expire_at
    } else {
        (expire_at - now).max(0)
    };
    // Rounded to seconds without overflowing near i64::MAX, as Redis's reply shows.
    let seconds = ((ms as i128 + 500) / 1000) as i64;
    ctx.out.integer(if in_ms { ms } else { seconds });
    Action::None
}

fn persist(ctx: &mut Ctx, args: &Args) -> Action {
    let has_expiry = ctx.lookup(args[1]).is_some_and(Entry::has_expiry);
    if has_expiry {
        ctx.db().set_expiry(args[1], NO_EXPIRY);
        ctx.notify(EventClass::Generic, "persist", args[1]);
        ctx.propagate(&[b"PERSIST", args[1]]);
    }
    ctx.out.integer(has_expiry as i64);
    Action::None
}

fn rename(ctx: &mut Ctx, args: &Args) -> Action {
    let nx = eq_ignore_case(args[0], "renamenx");
    let (source, target) = (args[1], args[2]);
    if ctx.lookup(source).is_none() {
        ctx.out.error("ERR no such key");
        return Action::None;
    }
    if source == target {
        if nx {
            ctx.out.integer(0);
        } else {
            ctx.out.ok();
        }
        return Action::None;
    }
    // Looked up either way, as Redis does: an expired target is expired first.
    if ctx.lookup(target).is_some() && nx {
        ctx.out.integer(0);
        return Action::None;
    }
    let db = ctx.db();
    let mut entry = db.remove(source).expect("looked up above");
    entry.key = crate::keyspace::Key::from(target);
    db.insert(entry);
    // Redis deletes the old target and adds the key anew: `new` whether it existed or not.
    ctx.notify(EventClass::New, "new", target);
    ctx.notify(EventClass::Generic, "rename_from", source);
    ctx.notify(EventClass::Generic, "rename_to", target);
    let logged: Vec<&[u8]> = args.to_vec();
    ctx.propagate(&logged);
    if nx {
        ctx.out.integer(1);
    } else {
        ctx.out.ok();
    }
    Action::None
}

/// Parses a C `int` argument as Redis's `getIntFromObjectOrReply`: `msg` (if given)
/// replaces both of its errors.
fn c_int_arg(ctx: &mut Ctx, arg: &[u8], msg: Option<&str>) -> Option<i64> {
    let Some(value) = crate::resp::parse_i64(arg) else {
        ctx.out.error(msg.unwrap_or(NOT_INTEGER));
        return None;
    };
    if i32::try_from(value).is_err() {
        ctx.out.error(
            msg.unwrap_or(
                "ERR value is out of range, value must between -2147483648 and 2147483647",
            ),
        );
        return None;
    }
    Some(value)
}

/// Parses a database index argument as SELECT, MOVE and COPY do.
fn db_index(ctx: &mut Ctx, arg: &[u8]) -> Option<usize> {
    let index = c_int_arg(ctx, arg, None)?;
    if index < 0 || index as usize >= ctx.keyspace.dbs.len() {
        ctx.out.error("ERR DB index is out of range");
        return None;
    }
    Some(index as usize)
}

fn copy(ctx: &mut Ctx, args: &Args) -> Action {
    let (source, target) = (args[1], args[2]);
    let mut target_db = ctx.client.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if eq_ignore_case(args[i], "replace") {
            replace = true;
        } else if eq_ignore_case(args[i], "db") && i + 1 < args.len() {
            let Some(index) = db_index(ctx, args[i + 1]) else {
                return Action::None;
            };
            target_db = index;
            i += 1;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
        i += 1;
    }
    if target_db == ctx.client.db && source == target {
        ctx.out
            .error("ERR source and destination objects are the same");
        return Action::None;
    }
    let Some(entry) = ctx.reading(|ctx| ctx.lookup_read(source).cloned()) else {
        ctx.out.integer(0);
        return Action::None;
    };
    ctx.expire_if_needed_in(target_db, target);
    let target_exists = ctx.keyspace.dbs[target_db].get(target).is_some();
    if target_exists && !replace {
        ctx.out.integer(0);
        return Action::None;
    }
    let mut value = entry.value;
    // A copy is a new value (Redis duplicates the object): a new access field.
    *value.access_mut() = crate::keyspace::Access::new();
    ctx.keyspace.dbs[target_db].insert(Entry {
        key: crate::keyspace::Key::from(target),
        value,
        expire_at_ms: entry.expire_at_ms,
    });
    // A replaced target is deleted and the copy added anew: `new` either way.
    ctx.notify_in(target_db, EventClass::New, "new", target);
    ctx.notify_in(target_db, EventClass::Generic, "copy_to", target);
    let logged: Vec<&[u8]> = args.to_vec();
    ctx.propagate(&logged);
    ctx.out.integer(1);
    Action::None
}

fn move_command(ctx: &mut Ctx, args: &Args) -> Action {
    let key = args[1];
    let Some(target_db) = db_index(ctx, args[2]) else {
        return Action::None;
    };
    if target_db == ctx.client.db {
        ctx.out
            .error("ERR source and destination objects are the same");
        return Action::None;
    }
    if ctx.lookup(key).is_none() {
        ctx.out.integer(0);
        return Action::None;
    }
    ctx.expire_if_needed_in(target_db, key);
    if ctx.keyspace.dbs[target_db].get(key).is_some() {
        ctx.out.integer(0);
        return Action::None;
    }
    let entry = ctx.db().remove(key).expect("looked up above");
    ctx.keyspace.dbs[target_db].insert(entry);
    ctx.notify_in(target_db, EventClass::New, "new", key);
    ctx.notify(EventClass::Generic, "move_from", key);
    ctx.notify_in(target_db, EventClass::Generic, "move_to", key);
    let logged: Vec<&[u8]> = args.to_vec();
    ctx.propagate(&logged);
    ctx.out.integer(1);
    Action::None
}

fn keys(ctx: &mut Ctx, args: &Args) -> Action {
    let pattern = args[1];
    let match_all = pattern == b"*";
    let now = ctx.now_ms;
    let loading = ctx.loading;
    let found: Vec<crate::keyspace::Key> = ctx
        .db()
        .slots()
        .iter()
        .flat_map(|slot| slot.iter())
        .filter(|e| loading || !e.is_expired(now))
        .filter(|e| match_all || glob_match(pattern, &e.key, false))
        .map(|e| e.key.clone())
        .collect();
    ctx.out.bulk_strings(found.iter());
    Action::None
}

/// Parses a SCAN cursor as Redis does with `strtoul`: an optional sign and decimal
/// digits up to the first NUL; an empty string is cursor 0 and a negative one wraps.
pub(crate) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let text = arg.split(|&b| b == 0).next().unwrap_or_default();
    if text.is_empty() {
        return Some(0);
    }
    let (negative, digits) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &digit in digits {
        value = value.checked_mul(10)?.checked_add((digit - b'0') as u64)?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// SCAN's cursor is the next slot to visit: every key present for the whole scan lives
/// in one slot, and each call returns whole slots, so it is returned at least once.
/// SCAN's and the collection scans' options.
pub(crate) struct ScanOptions<'a> {
    pub count: usize,
    /// None for "*" (everything matches).
    pub pattern: Option<&'a [u8]>,
    pub type_filter: Option<String>,
}

/// Parses `MATCH p`, `COUNT n` (and `TYPE t` for SCAN) in any order, the last one
/// winning, with Redis's errors; None after replying.
pub(crate) fn scan_options<'a>(
    ctx: &mut Ctx,
    options: &[&'a [u8]],
    allow_type: bool,
) -> Option<ScanOptions<'a>> {
    let mut parsed = ScanOptions {
        count: 10,
        pattern: None,
        type_filter: None,
    };
    let mut i = 0;
    while i < options.len() {
        if i + 1 >= options.len() {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        let value = options[i + 1];
        if eq_ignore_case(options[i], "count") {
            match crate::resp::parse_i64(value) {
                None => {
                    ctx.out.error(NOT_INTEGER);
                    return None;
                }
                Some(n) if n < 1 => {
                    ctx.out.error(SYNTAX_ERROR);
                    return None;
                }
                Some(n) => parsed.count = n as usize,
            }
        } else if eq_ignore_case(options[i], "match") {
            parsed.pattern = Some(value).filter(|p| *p != b"*");
        } else if allow_type && eq_ignore_case(options[i], "type") {
            parsed.type_filter = Some(lossy(value).to_ascii_lowercase());
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        i += 2;
    }
    Some(parsed)
}

fn scan(ctx: &mut Ctx, args: &Args) -> Action {
    let cursor = match parse_cursor(args[1]) {
        Some(c) => c,
        None => {
            ctx.out.error("ERR invalid cursor");
            return Action::None;
        }
    };
    let Some(ScanOptions {
        count,
        pattern,
        type_filter,
    }) = scan_options(ctx, &args[2..], true)
    else {
        return Action::None;
    };
    let now = ctx.now_ms;
    let loading = ctx.loading;
    let db = ctx.db();
    let mut found: Vec<crate::keyspace::Key> = Vec::new();
    let mut visited = 0usize;
    let mut expired: Vec<crate::keyspace::Key> = Vec::new();
    let mut slot = cursor as usize;
    if !db.slots().is_empty() {
        while slot < SLOT_COUNT && visited < count {
            for entry in db.slots()[slot].iter() {
                visited += 1;
                if !pattern.is_none_or(|p| glob_match(p, &entry.key, false)) {
                    continue;
                }
                if !loading && entry.is_expired(now) {
                    // Redis deletes the expired keys that pass the pattern.
                    expired.push(entry.key.clone());
                    continue;
                }
                let keep = type_filter
                    .as_deref()
                    .is_none_or(|t| t == entry.value.type_name());
                if keep {
                    found.push(entry.key.clone());
                }
            }
            slot += 1;
        }
    } else {
        slot = SLOT_COUNT;
    }
    for key in &expired {
        ctx.expire_if_needed(key);
    }
    let next = if slot >= SLOT_COUNT { 0 } else { slot };
    ctx.out.array(2);
    ctx.out.bulk(ms_text(next as i64).as_bytes());
    ctx.out.bulk_strings(found.iter());
    Action::None
}

fn randomkey(ctx: &mut Ctx, _args: &Args) -> Action {
    // Expired keys found on the way are removed, as Redis does; give up after a while.
    for _ in 0..100 {
        let picked = ctx.db().random_entry(rand::random()).map(|e| e.key.clone());
        match picked {
            None => break,
            Some(key) => {
                if !ctx.expire_if_needed(&key) {
                    ctx.out.bulk(&key);
                    return Action::None;
                }
            }
        }
    }
    ctx.out.null();
    Action::None
}

fn dbsize(ctx: &mut Ctx, _args: &Args) -> Action {
    let size = ctx.db().len();
    ctx.out.integer(size as i64);
    Action::None
}

fn flush(ctx: &mut Ctx, args: &Args) -> Action {
    let all = eq_ignore_case(args[0], "flushall");
    let lazy = match args.get(1) {
        None => ctx.server.config.lazyfree_user_flush,
        Some(mode) if args.len() == 2 && eq_ignore_case(mode, "sync") => false,
        Some(mode) if args.len() == 2 && eq_ignore_case(mode, "async") => true,
        Some(_) => {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    };
    // One invalidation of everything for the whole command, as Redis's signalFlushedDb.
    ctx.invalidate_all_tracked();
    let mut action = Action::None;
    if all {
        for db in 0..ctx.keyspace.dbs.len() {
            ctx.touch_db(db, None);
        }
        for db in ctx.keyspace.dbs.iter_mut() {
            let held = db.clear();
            if lazy {
                ctx.server.lazyfree.free_database(held);
            }
        }
        ctx.propagate(&[b"FLUSHALL"]);
        let config = &ctx.server.config;
        // Not while replaying the log or applying the master's stream: the snapshot is
        // not this dataset's persistence then, or the master's history restores it.
        if !ctx.loading {
            ctx.server.persistence.after_flushall =
                if !config.appendonly && !config.save_points.is_empty() {
                    super::state::AfterFlushAll::SaveDump
                } else {
                    super::state::AfterFlushAll::StopBackgroundSave
                };
            if !ctx.in_exec() {
                action = Action::StartJob(super::Job::SaveAfterFlush);
            }
        }
    } else {
        ctx.touch_db(ctx.client.db, None);
        let held = ctx.db().clear();
        if lazy {
            ctx.server.lazyfree.free_database(held);
        }
        ctx.propagate(&[b"FLUSHDB"]);
    }
    ctx.out.ok();
    action
}

fn swapdb(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(first) = c_int_arg(ctx, args[1], Some("ERR invalid first DB index")) else {
        return Action::None;
    };
    let Some(second) = c_int_arg(ctx, args[2], Some("ERR invalid second DB index")) else {
        return Action::None;
    };
    let count = ctx.keyspace.dbs.len() as i64;
    if first < 0 || first >= count || second < 0 || second >= count {
        ctx.out.error("ERR DB index is out of range");
        return Action::None;
    }
    if first != second {
        // Swapping a database with itself changes nothing a WATCH could see.
        ctx.touch_db(first as usize, Some(second as usize));
        ctx.touch_db(second as usize, Some(first as usize));
    }
    ctx.keyspace.dbs.swap(first as usize, second as usize);
    let logged: Vec<&[u8]> = args.to_vec();
    ctx.propagate(&logged);
    ctx.out.ok();
    Action::None
}

fn select(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(index) = db_index(ctx, args[1]) else {
        return Action::None;
    };
    ctx.client.db = index;
    ctx.out.ok();
    Action::None
}
