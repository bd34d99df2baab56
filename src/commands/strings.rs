//! String commands: GET, SET and its family, counters, ranges.
//!
//! Keyspace events, as Redis 7.0 raises them: `new` when a key is created, then `set`
//! (SET, SETNX, SETEX, PSETEX, MSET, MSETNX, GETSET; `expire` after it when SET or SETEX
//! gave a time), `append`, `setrange`, `incrby` (INCR, DECR, INCRBY, DECRBY),
//! `incrbyfloat`; GETDEL raises `del`, GETEX `del`, `expire` or `persist`.

use super::{
    Action, AlreadyReplied, Args, CommandSpec, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR,
    absolute_expiry, eq_ignore_case, flags::*, int_arg, ms_text,
};
use crate::command;
use crate::keyspace::{Entry, NO_EXPIRY, Value};
use crate::long_double;
use crate::types::Str;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "get",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "string",
            "Returns the string value of a key.",
            get
        ),
        command!(
            "set",
            -3,
            WRITE | DENYOOM,
            (1, 1, 1),
            "string",
            "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
            set
        ),
        command!(
            "setnx",
            3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Set the string value of a key only when the key doesn't exist.",
            setnx
        ),
        command!(
            "setex",
            4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "string",
            "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.",
            setex
        ),
        command!(
            "psetex",
            4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "string",
            "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.",
            setex
        ),
        command!(
            "mget",
            -2,
            READONLY | FAST,
            (1, -1, 1),
            "string",
            "Atomically returns the string values of one or more keys.",
            mget
        ),
        command!(
            "mset",
            -3,
            WRITE | DENYOOM,
            (1, -1, 2),
            "string",
            "Atomically creates or modifies the string values of one or more keys.",
            mset
        ),
        command!(
            "msetnx",
            -3,
            WRITE | DENYOOM,
            (1, -1, 2),
            "string",
            "Atomically modifies the string values of one or more keys only when all keys don't exist.",
            mset
        ),
        command!(
            "getset",
            3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Returns the previous string value of a key after setting it to a new value.",
            getset
        ),
        command!(
            "getdel",
            2,
            WRITE | FAST,
            (1, 1, 1),
            "string",
            "Returns the string value of a key after deleting the key.",
            getdel
        ),
        command!(
            "getex",
            -2,
            WRITE | FAST,
            (1, 1, 1),
            "string",
            "Returns the string value of a key after setting its expiration time.",
            getex
        ),
        command!(
            "append",
            3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Appends a string to the value of a key. Creates the key if it doesn't exist.",
            append
        ),
        command!(
            "strlen",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "string",
            "Returns the length of a string value.",
            strlen
        ),
        command!(
            "getrange",
            4,
            READONLY,
            (1, 1, 1),
            "string",
            "Returns a substring of the string stored at a key.",
            getrange
        ),
        command!(
            "substr",
            4,
            READONLY,
            (1, 1, 1),
            "string",
            "Returns a substring from a string value.",
            getrange
        ),
        command!(
            "setrange",
            4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "string",
            "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.",
            setrange
        ),
        command!(
            "incr",
            2,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
            incr_family
        ),
        command!(
            "decr",
            2,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
            incr_family
        ),
        command!(
            "incrby",
            3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
            incr_family
        ),
        command!(
            "decrby",
            3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
            incr_family
        ),
        command!(
            "incrbyfloat",
            3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "string",
            "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
            incrbyfloat
        ),
    ]
}

/// Stores a string, replacing any value; `expire_at_ms` NO_EXPIRY clears the TTL unless
/// `keep_ttl`. A key it creates raises `new`.
fn store(ctx: &mut Ctx, key: &[u8], value: Str, expire_at_ms: i64, keep_ttl: bool) {
    let db = ctx.db();
    let expire_at_ms = if keep_ttl {
        db.get(key).map_or(NO_EXPIRY, |e| e.expire_at_ms)
    } else {
        expire_at_ms
    };
    let previous = db.insert(Entry {
        key: crate::keyspace::Key::from(key),
        value: Value::string(value),
        expire_at_ms,
    });
    if previous.is_none() {
        ctx.notify(EventClass::New, "new", key);
    }
}

fn get(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(value) = ctx.get_string(args[1]) {
        match value {
            Some(v) => ctx.out.bulk(&v),
            None => ctx.out.null(),
        }
    }
    Action::None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expiry<'a> {
    None,
    /// EX, PX, EXAT or PXAT with its argument, which is parsed only once every option
    /// has been read (Redis reports a syntax error before a bad number).
    Time {
        unit_ms: i64,
        absolute: bool,
        arg: &'a [u8],
    },
    Keep,
    Persist,
}

/// Parses the expiry options shared by SET and GETEX. `allow_keep` / `allow_persist`
/// select KEEPTTL (SET) or PERSIST (GETEX). As in Redis, repeating the same option is
/// allowed (the last value wins) but mixing two kinds is a syntax error. Replies and
/// returns None on error.
fn parse_expiry_option<'a>(
    ctx: &mut Ctx,
    args: &Args<'a>,
    i: &mut usize,
    current: &mut Expiry<'a>,
    allow_keep: bool,
    allow_persist: bool,
) -> Option<bool> {
    let word = args[*i];
    let units = [
        ("ex", 1000, false),
        ("px", 1, false),
        ("exat", 1000, true),
        ("pxat", 1, true),
    ];
    for (name, unit_ms, absolute) in units {
        if eq_ignore_case(word, name) {
            let compatible = match *current {
                Expiry::None => true,
                Expiry::Time {
                    unit_ms: u,
                    absolute: a,
                    ..
                } => u == unit_ms && a == absolute,
                _ => false,
            };
            if !compatible || *i + 1 >= args.len() {
                ctx.out.error(SYNTAX_ERROR);
                return None;
            }
            *current = Expiry::Time {
                unit_ms,
                absolute,
                arg: args[*i + 1],
            };
            *i += 1;
            return Some(true);
        }
    }
    if (allow_keep && eq_ignore_case(word, "keepttl"))
        || (allow_persist && eq_ignore_case(word, "persist"))
    {
        let wanted = if allow_keep {
            Expiry::Keep
        } else {
            Expiry::Persist
        };
        if *current != Expiry::None && *current != wanted {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        *current = wanted;
        return Some(true);
    }
    Some(false)
}

/// Resolves a parsed expiry to absolute ms, replying "invalid expire time" if needed.
fn resolve_expiry(ctx: &mut Ctx, expiry: Expiry, command: &str) -> Option<i64> {
    let Expiry::Time {
        unit_ms,
        absolute,
        arg,
    } = expiry
    else {
        return Some(NO_EXPIRY);
    };
    let value = int_arg(ctx, arg)?;
    let resolved = absolute_expiry(value, unit_ms, absolute, ctx.now_ms);
    if resolved.is_none() {
        ctx.out
            .error(&format!("ERR invalid expire time in '{command}' command"));
    }
    resolved
}

fn set(ctx: &mut Ctx, args: &Args) -> Action {
    let (key, value) = (args[1], args[2]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry = Expiry::None;
    let mut i = 3;
    while i < args.len() {
        let word = args[i];
        if eq_ignore_case(word, "nx") && !xx {
            nx = true;
        } else if eq_ignore_case(word, "xx") && !nx {
            xx = true;
        } else if eq_ignore_case(word, "get") {
            get = true;
        } else {
            match parse_expiry_option(ctx, args, &mut i, &mut expiry, true, false) {
                None => return Action::None,
                Some(true) => {}
                Some(false) => {
                    ctx.out.error(SYNTAX_ERROR);
                    return Action::None;
                }
            }
        }
        i += 1;
    }
    let Some(expire_at_ms) = resolve_expiry(ctx, expiry, "set") else {
        return Action::None;
    };
    let old = if get {
        // SET's GET reads the key as GET does.
        match ctx.reading(|ctx| ctx.get_string(key)) {
            Ok(old) => old,
            Err(AlreadyReplied) => return Action::None,
        }
    } else {
        ctx.lookup(key).map(|_| Str::from(""))
    };
    let exists = if get {
        ctx.db().get(key).is_some()
    } else {
        old.is_some()
    };
    if (nx && exists) || (xx && !exists) {
        reply_set_result(ctx, get, old, false);
        return Action::None;
    }
    let stored = ctx.value_arg(2, value);
    store(ctx, key, stored, expire_at_ms, expiry == Expiry::Keep);
    ctx.notify(EventClass::String, "set", key);
    if matches!(expiry, Expiry::Time { .. }) {
        ctx.notify(EventClass::Generic, "expire", key);
    }
    if expire_at_ms != NO_EXPIRY {
        // Relative times would replay differently; log the absolute time.
        let at = ms_text(expire_at_ms);
        ctx.propagate(&[b"SET", key, value, b"PXAT", at.as_bytes()]);
    } else if expiry == Expiry::Keep {
        ctx.propagate(&[b"SET", key, value, b"KEEPTTL"]);
    } else {
        ctx.propagate(&[b"SET", key, value]);
    }
    reply_set_result(ctx, get, old, true);
    Action::None
}

fn reply_set_result(ctx: &mut Ctx, get: bool, old: Option<Str>, done: bool) {
    if get {
        match old {
            Some(v) => ctx.out.bulk(&v),
            None => ctx.out.null(),
        }
    } else if done {
        ctx.out.ok();
    } else {
        ctx.out.null();
    }
}

fn setnx(ctx: &mut Ctx, args: &Args) -> Action {
    if ctx.lookup(args[1]).is_some() {
        ctx.out.integer(0);
        return Action::None;
    }
    let value = ctx.value_arg(2, args[2]);
    store(ctx, args[1], value, NO_EXPIRY, false);
    ctx.notify(EventClass::String, "set", args[1]);
    ctx.propagate(&[b"SET", args[1], args[2]]);
    ctx.out.integer(1);
    Action::None
}

fn setex(ctx: &mut Ctx, args: &Args) -> Action {
    let seconds = eq_ignore_case(args[0], "setex");
    let Some(value) = int_arg(ctx, args[2]) else {
        return Action::None;
    };
    let unit_ms = if seconds { 1000 } else { 1 };
    let Some(at) = absolute_expiry(value, unit_ms, false, ctx.now_ms) else {
        let name = if seconds { "setex" } else { "psetex" };
        ctx.out
            .error(&format!("ERR invalid expire time in '{name}' command"));
        return Action::None;
    };
    let stored = ctx.value_arg(3, args[3]);
    store(ctx, args[1], stored, at, false);
    ctx.notify(EventClass::String, "set", args[1]);
    ctx.notify(EventClass::Generic, "expire", args[1]);
    let at_text = ms_text(at);
    ctx.propagate(&[b"SET", args[1], args[3], b"PXAT", at_text.as_bytes()]);
    ctx.out.ok();
    Action::None
}

fn mget(ctx: &mut Ctx, args: &Args) -> Action {
    ctx.out.array(args.len() - 1);
    for key in &args[1..] {
        match ctx.lookup_read(key).map(|e| &e.value) {
            Some(Value::String(v, _)) => {
                let v = v.clone();
                ctx.out.bulk(&v)
            }
            // MGET answers nil for a key of another type, as Redis does.
            _ => ctx.out.null(),
        }
    }
    Action::None
}

fn mset(ctx: &mut Ctx, args: &Args) -> Action {
    let nx = eq_ignore_case(args[0], "msetnx");
    if args.len().is_multiple_of(2) {
        let name = if nx { "msetnx" } else { "mset" };
        super::wrong_arity(ctx, name);
        return Action::None;
    }
    if nx {
        let pairs = args[1..].chunks(2);
        let mut any_exists = false;
        for pair in pairs {
            any_exists |= ctx.lookup(pair[0]).is_some();
        }
        if any_exists {
            ctx.out.integer(0);
            return Action::None;
        }
    }
    for (index, pair) in args[1..].chunks(2).enumerate() {
        let value = ctx.value_arg(2 + 2 * index, pair[1]);
        store(ctx, pair[0], value, NO_EXPIRY, false);
        ctx.notify(EventClass::String, "set", pair[0]);
    }
    let mut logged: Vec<&[u8]> = Vec::with_capacity(args.len());
    logged.push(b"MSET");
    logged.extend_from_slice(&args[1..]);
    ctx.propagate(&logged);
    if nx {
        ctx.out.integer(1);
    } else {
        ctx.out.ok();
    }
    Action::None
}

fn getset(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(old) = ctx.reading(|ctx| ctx.get_string(args[1])) else {
        return Action::None;
    };
    let value = ctx.value_arg(2, args[2]);
    store(ctx, args[1], value, NO_EXPIRY, false);
    ctx.notify(EventClass::String, "set", args[1]);
    ctx.propagate(&[b"SET", args[1], args[2]]);
    match old {
        Some(v) => ctx.out.bulk(&v),
        None => ctx.out.null(),
    }
    Action::None
}

fn getdel(ctx: &mut Ctx, args: &Args) -> Action {
    match ctx.reading(|ctx| ctx.get_string(args[1])) {
        Err(AlreadyReplied) => {}
        Ok(None) => ctx.out.null(),
        Ok(Some(v)) => {
            ctx.db().remove(args[1]);
            ctx.notify(EventClass::Generic, "del", args[1]);
            ctx.propagate(&[b"DEL", args[1]]);
            ctx.out.bulk(&v);
        }
    }
    Action::None
}

fn getex(ctx: &mut Ctx, args: &Args) -> Action {
    let key = args[1];
    let mut expiry = Expiry::None;
    let mut i = 2;
    while i < args.len() {
        match parse_expiry_option(ctx, args, &mut i, &mut expiry, false, true) {
            None => return Action::None,
            Some(true) => {}
            Some(false) => {
                ctx.out.error(SYNTAX_ERROR);
                return Action::None;
            }
        }
        i += 1;
    }
    let value = match ctx.reading(|ctx| ctx.get_string(key)) {
        Err(AlreadyReplied) => return Action::None,
        Ok(None) => {
            ctx.out.null();
            return Action::None;
        }
        Ok(Some(v)) => v,
    };
    // Redis checks the time only once it has found the key.
    let Some(at) = resolve_expiry(ctx, expiry, "getex") else {
        return Action::None;
    };
    if at != NO_EXPIRY && at <= ctx.now_ms && !ctx.loading {
        // An expiry already in the past deletes the key, logged as a DEL.
        ctx.db().remove(key);
        ctx.notify(EventClass::Generic, "del", key);
        ctx.propagate(&[b"DEL", key]);
    } else if at != NO_EXPIRY {
        ctx.db().set_expiry(key, at);
        ctx.notify(EventClass::Generic, "expire", key);
        let at_text = ms_text(at);
        ctx.propagate(&[b"PEXPIREAT", key, at_text.as_bytes()]);
    } else if expiry == Expiry::Persist && ctx.db().get(key).is_some_and(Entry::has_expiry) {
        ctx.db().set_expiry(key, NO_EXPIRY);
        ctx.notify(EventClass::Generic, "persist", key);
        ctx.propagate(&[b"PERSIST", key]);
    }
    ctx.out.bulk(&value);
    Action::None
}

fn append(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let old = old.unwrap_or_else(|| Str::from(""));
    let total = old.len() + args[2].len();
    if total > ctx.server.config.bulk_bytes_max {
        ctx.out
            .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return Action::None;
    }
    let mut joined = Vec::with_capacity(total);
    joined.extend_from_slice(&old);
    joined.extend_from_slice(args[2]);
    store(ctx, args[1], Str::from(joined), NO_EXPIRY, true);
    ctx.notify(EventClass::String, "append", args[1]);
    ctx.propagate(&[b"APPEND", args[1], args[2]]);
    ctx.out.integer(total as i64);
    Action::None
}

fn strlen(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(v) = ctx.get_string(args[1]) {
        ctx.out.integer(v.map_or(0, |v| v.len() as i64));
    }
    Action::None
}

fn getrange(ctx: &mut Ctx, args: &Args) -> Action {
    let (Some(start), Some(end)) = (
        crate::resp::parse_i64(args[2]),
        crate::resp::parse_i64(args[3]),
    ) else {
        ctx.out.error(NOT_INTEGER);
        return Action::None;
    };
    let Ok(value) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let value = value.unwrap_or_else(|| Str::from(""));
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.out.bulk(b"");
        return Action::None;
    }
    let mut start = if start < 0 { len + start } else { start };
    let mut end = if end < 0 { len + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.out.bulk(b"");
    } else {
        ctx.out.bulk(&value[start as usize..=end as usize]);
    }
    Action::None
}

fn setrange(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(offset) = int_arg(ctx, args[2]) else {
        return Action::None;
    };
    if offset < 0 {
        ctx.out.error("ERR offset is out of range");
        return Action::None;
    }
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let patch = args[3];
    let old_len = old.as_ref().map_or(0, |v| v.len());
    if patch.is_empty() {
        // Nothing to write: reply the current length, create nothing.
        ctx.out.integer(old_len as i64);
        return Action::None;
    }
    let offset = offset as usize;
    if offset.saturating_add(patch.len()) > ctx.server.config.bulk_bytes_max {
        ctx.out
            .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return Action::None;
    }
    let mut bytes = old.map(|v| v.to_vec()).unwrap_or_default();
    if bytes.len() < offset + patch.len() {
        bytes.resize(offset + patch.len(), 0);
    }
    bytes[offset..offset + patch.len()].copy_from_slice(patch);
    let len = bytes.len();
    store(ctx, args[1], Str::from(bytes), NO_EXPIRY, true);
    ctx.notify(EventClass::String, "setrange", args[1]);
    ctx.propagate(&[b"SETRANGE", args[1], args[2], args[3]]);
    ctx.out.integer(len as i64);
    Action::None
}

fn incr_family(ctx: &mut Ctx, args: &Args) -> Action {
    let name = args[0];
    let delta = if eq_ignore_case(name, "incr") {
        1
    } else if eq_ignore_case(name, "decr") {
        -1
    } else {
        let Some(n) = int_arg(ctx, args[2]) else {
            return Action::None;
        };
        if eq_ignore_case(name, "decrby") {
            if n == i64::MIN {
                ctx.out.error("ERR decrement would overflow");
                return Action::None;
            }
            -n
        } else {
            n
        }
    };
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let current = match old {
        None => 0,
        Some(v) => match crate::resp::parse_i64(&v) {
            Some(n) => n,
            None => {
                ctx.out.error(NOT_INTEGER);
                return Action::None;
            }
        },
    };
    let Some(new) = current.checked_add(delta) else {
        ctx.out.error("ERR increment or decrement would overflow");
        return Action::None;
    };
    let text = itoa::Buffer::new().format(new).to_owned();
    store(
        ctx,
        args[1],
        Str::from(text.clone().into_bytes()),
        NO_EXPIRY,
        true,
    );
    ctx.notify(EventClass::String, "incrby", args[1]);
    // INCR-family commands replay deterministically as they are.
    let logged: Vec<&[u8]> = args.to_vec();
    ctx.propagate(&logged);
    ctx.out.integer(new);
    Action::None
}

/// Adds like Redis's INCRBYFLOAT and formats the sum like its `%.17Lf` with trailing
/// zeros removed. Redis does this in x87 `long double` (64-bit mantissa), whose rounding
/// shows in the text (`99999999999999999999 + -1.5` is `100000000000000000000`), so the
/// arithmetic is emulated exactly in `long_double`.
pub fn add_floats(current: &[u8], increment: &[u8]) -> Result<String, &'static str> {
    const NOT_FLOAT: &str = "ERR value is not a valid float";
    const NAN_OR_INF: &str = "ERR increment would produce NaN or Infinity";
    let (Some(a), Some(b)) = (long_double::parse(current), long_double::parse(increment)) else {
        return Err(NOT_FLOAT);
    };
    match (a, b) {
        (Some(a), Some(b)) => long_double::add(a, b)
            .map(long_double::format)
            .ok_or(NAN_OR_INF),
        _ => Err(NAN_OR_INF),
    }
}

fn incrbyfloat(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let old = old.unwrap_or_else(|| Str::from("0"));
    let text = match add_floats(&old, args[2]) {
        Ok(t) => t,
        Err(e) => {
            ctx.out.error(e);
            return Action::None;
        }
    };
    store(
        ctx,
        args[1],
        Str::from(text.clone().into_bytes()),
        NO_EXPIRY,
        true,
    );
    ctx.notify(EventClass::String, "incrbyfloat", args[1]);
    // Float formatting must not be re-done on replay: log the result, keeping the TTL.
    ctx.propagate(&[b"SET", args[1], text.as_bytes(), b"KEEPTTL"]);
    ctx.out.bulk(text.as_bytes());
    Action::None
}

#[cfg(test)]
mod tests {
    use super::add_floats;

    #[test]
    fn float_addition_like_redis() {
        assert_eq!(add_floats(b"0.1", b"0.2").unwrap(), "0.3");
        assert_eq!(add_floats(b"1.5", b"1e2").unwrap(), "101.5");
        assert_eq!(add_floats(b"10", b"-10").unwrap(), "0");
        assert_eq!(add_floats(b"10", b"0.000000000000000001").unwrap(), "10");
        assert_eq!(
            add_floats(b"abc", b"1"),
            Err("ERR value is not a valid float")
        );
        assert_eq!(
            add_floats(b"1", b" 1"),
            Err("ERR value is not a valid float")
        );
        assert_eq!(
            add_floats(b"1", b"inf"),
            Err("ERR increment would produce NaN or Infinity")
        );
        assert_eq!(add_floats(b"3", b"2").unwrap(), "5");
    }

    #[test]
    fn float_addition_rounds_like_long_double() {
        // Replies of redis-server 7.0.15 on x86-64.
        let cases: &[(&[u8], &[u8], &str)] = &[
            (b"99999999999999999999", b"-1.5", "100000000000000000000"),
            (b"9223372036854775807", b"1.5", "9223372036854775808"),
            (b"0x10", b"1", "17"),
            (b"1000000", b"0.1", "1000000.10000000000002274"),
            (b"0", b"0x1p-18", "0.00000381469726562"),
            (b"1e-4940", b"0", "0"),
            (b"-0", b"-0", "0"),
        ];
        for (a, b, sum) in cases {
            assert_eq!(add_floats(a, b).as_deref(), Ok(*sum));
        }
        let not_float = Err("ERR value is not a valid float");
        assert_eq!(add_floats(b"1e5000", b"1"), not_float);
        assert_eq!(add_floats(b"0", b"1e-5000"), not_float);
        assert_eq!(
            add_floats(b"1e4932", b"1e4932"),
            Err("ERR increment would produce NaN or Infinity")
        );
    }
}
