//! String commands: GET, SET and its family, counters, ranges.

use super::{
    Action, Args, CommandSpec, Ctx, NOT_INTEGER, SYNTAX_ERROR, absolute_expiry, eq_ignore_case,
    flags::*, int_arg, ms_text,
};
use crate::command;
use crate::keyspace::{Entry, NO_EXPIRY, Value};
use bytes::Bytes;

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
/// `keep_ttl`.
fn store(ctx: &mut Ctx, key: &[u8], value: Bytes, expire_at_ms: i64, keep_ttl: bool) {
    let db = ctx.db();
    let expire_at_ms = if keep_ttl {
        db.get(key).map_or(NO_EXPIRY, |e| e.expire_at_ms)
    } else {
        expire_at_ms
    };
    db.insert(Entry {
        key: Bytes::copy_from_slice(key),
        value: Value::String(value),
        expire_at_ms,
    });
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
        match ctx.get_string(key) {
            Ok(old) => old,
            Err(()) => return Action::None,
        }
    } else {
        ctx.lookup(key).map(|_| Bytes::new())
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
    store(
        ctx,
        key,
        Bytes::copy_from_slice(value),
        expire_at_ms,
        expiry == Expiry::Keep,
    );
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

fn reply_set_result(ctx: &mut Ctx, get: bool, old: Option<Bytes>, done: bool) {
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
    store(
        ctx,
        args[1],
        Bytes::copy_from_slice(args[2]),
        NO_EXPIRY,
        false,
    );
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
    store(ctx, args[1], Bytes::copy_from_slice(args[3]), at, false);
    let at_text = ms_text(at);
    ctx.propagate(&[b"SET", args[1], args[3], b"PXAT", at_text.as_bytes()]);
    ctx.out.ok();
    Action::None
}

fn mget(ctx: &mut Ctx, args: &Args) -> Action {
    ctx.out.array(args.len() - 1);
    for key in &args[1..] {
        match ctx.lookup_read(key).map(|e| &e.value) {
            Some(Value::String(v)) => {
                let v = v.clone();
                ctx.out.bulk(&v)
            }
            None => ctx.out.null(),
        }
    }
    Action::None
}

fn mset(ctx: &mut Ctx, args: &Args) -> Action {
    let nx = eq_ignore_case(args[0], "msetnx");
    if args.len() % 2 == 0 {
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
    for pair in args[1..].chunks(2) {
        store(
            ctx,
            pair[0],
            Bytes::copy_from_slice(pair[1]),
            NO_EXPIRY,
            false,
        );
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
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    store(
        ctx,
        args[1],
        Bytes::copy_from_slice(args[2]),
        NO_EXPIRY,
        false,
    );
    ctx.propagate(&[b"SET", args[1], args[2]]);
    match old {
        Some(v) => ctx.out.bulk(&v),
        None => ctx.out.null(),
    }
    Action::None
}

fn getdel(ctx: &mut Ctx, args: &Args) -> Action {
    match ctx.get_string(args[1]) {
        Err(()) => {}
        Ok(None) => ctx.out.null(),
        Ok(Some(v)) => {
            ctx.db().remove(args[1]);
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
    let value = match ctx.get_string(key) {
        Err(()) => return Action::None,
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
        ctx.propagate(&[b"DEL", key]);
    } else if at != NO_EXPIRY {
        ctx.db().set_expiry(key, at);
        let at_text = ms_text(at);
        ctx.propagate(&[b"PEXPIREAT", key, at_text.as_bytes()]);
    } else if expiry == Expiry::Persist && ctx.db().get(key).is_some_and(Entry::has_expiry) {
        ctx.db().set_expiry(key, NO_EXPIRY);
        ctx.propagate(&[b"PERSIST", key]);
    }
    ctx.out.bulk(&value);
    Action::None
}

fn append(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let old = old.unwrap_or_default();
    let total = old.len() + args[2].len();
    if total > ctx.server.config.bulk_bytes_max {
        ctx.out
            .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return Action::None;
    }
    let mut joined = Vec::with_capacity(total);
    joined.extend_from_slice(&old);
    joined.extend_from_slice(args[2]);
    store(ctx, args[1], Bytes::from(joined), NO_EXPIRY, true);
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
    let value = value.unwrap_or_default();
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
    store(ctx, args[1], Bytes::from(bytes), NO_EXPIRY, true);
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
        Bytes::from(text.clone().into_bytes()),
        NO_EXPIRY,
        true,
    );
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

/// An exact software model of x87 80-bit `long double` for INCRBYFLOAT: glibc `strtold`
/// as Redis's `string2ld` uses it, correctly rounded addition (ties to even, subnormals
/// included) and glibc's correctly rounded `%.17Lf`.
mod long_double {
    use std::cmp::Ordering;

    /// `mantissa * 2^exponent`; the mantissa has at most 64 significant bits.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Ld {
        negative: bool,
        mantissa: u64,
        exponent: i64,
    }

    /// Weight of the lowest mantissa bit of the smallest subnormal (2^-16445).
    const MIN_EXPONENT: i64 = -16445;
    /// Finite values are below 2^16384.
    const MAX_BITS: i64 = 16384;
    /// Redis's MAX_LONG_DOUBLE_CHARS: longer input is not a float.
    const MAX_CHARS: usize = 5 * 1024;

    /// An unsigned big integer: little-endian 32-bit limbs, no leading zero limbs.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    struct Big(Vec<u32>);

    impl Big {
        fn from_u128(mut value: u128) -> Big {
            let mut limbs = Vec::new();
            while value != 0 {
                limbs.push(value as u32);
                value >>= 32;
            }
            Big(limbs)
        }

        fn is_zero(&self) -> bool {
            self.0.is_empty()
        }

        fn trim(mut self) -> Big {
            while self.0.last() == Some(&0) {
                self.0.pop();
            }
            self
        }

        fn bits(&self) -> i64 {
            match self.0.last() {
                None => 0,
                Some(top) => (self.0.len() as i64 - 1) * 32 + 32 - top.leading_zeros() as i64,
            }
        }

        fn bit(&self, index: i64) -> bool {
            let limb = (index / 32) as usize;
            index >= 0 && limb < self.0.len() && (self.0[limb] >> (index % 32)) & 1 == 1
        }

        /// Whether any bit below `index` is set.
        fn any_below(&self, index: i64) -> bool {
            if index <= 0 {
                return false;
            }
            let full = ((index / 32) as usize).min(self.0.len());
            if self.0[..full].iter().any(|&limb| limb != 0) {
                return true;
            }
            let rest = index % 32;
            full < self.0.len() && rest != 0 && self.0[full] & ((1u32 << rest) - 1) != 0
        }

        fn mul_add_small(&mut self, multiplier: u32, addend: u32) {
            let mut carry = addend as u64;
            for limb in self.0.iter_mut() {
                let value = *limb as u64 * multiplier as u64 + carry;
                *limb = value as u32;
                carry = value >> 32;
            }
            if carry != 0 {
                self.0.push(carry as u32);
            }
        }

        fn pow10(n: i64) -> Big {
            let mut value = Big::from_u128(1);
            for _ in 0..n / 9 {
                value.mul_add_small(1_000_000_000, 0);
            }
            for _ in 0..n % 9 {
                value.mul_add_small(10, 0);
            }
            value
        }

        fn shl(&self, n: i64) -> Big {
            if self.is_zero() {
                return Big::default();
            }
            let (limbs, bits) = ((n / 32) as usize, n % 32);
            let mut out = vec![0u32; limbs];
            if bits == 0 {
                out.extend_from_slice(&self.0);
            } else {
                let mut carry = 0u32;
                for &limb in &self.0 {
                    out.push((limb << bits) | carry);
                    carry = limb >> (32 - bits);
                }
                out.push(carry);
            }
            Big(out).trim()
        }

        fn shr(&self, n: i64) -> Big {
            let (limbs, bits) = ((n / 32) as usize, n % 32);
            if limbs >= self.0.len() {
                return Big::default();
            }
            let source = &self.0[limbs..];
            let out = (0..source.len())
                .map(|i| {
                    let high = match source.get(i + 1) {
                        Some(&next) if bits != 0 => next << (32 - bits),
                        _ => 0,
                    };
                    (source[i] >> bits) | high
                })
                .collect();
            Big(out).trim()
        }

        /// The low 128 bits.
        fn low_u128(&self) -> u128 {
            self.0
                .iter()
                .take(4)
                .rev()
                .fold(0, |acc, &limb| (acc << 32) | limb as u128)
        }

        fn compare(&self, other: &Big) -> Ordering {
            self.0
                .len()
                .cmp(&other.0.len())
                .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
        }

        fn add(&self, other: &Big) -> Big {
            let mut out = Vec::with_capacity(self.0.len().max(other.0.len()) + 1);
            let mut carry = 0u64;
            for i in 0..self.0.len().max(other.0.len()) {
                let sum = *self.0.get(i).unwrap_or(&0) as u64
                    + *other.0.get(i).unwrap_or(&0) as u64
                    + carry;
                out.push(sum as u32);
                carry = sum >> 32;
            }
            out.push(carry as u32);
            Big(out).trim()
        }

        /// `self - other`, for `self >= other`.
        fn sub(&self, other: &Big) -> Big {
            let mut out = Vec::with_capacity(self.0.len());
            let mut borrow = 0i64;
            for i in 0..self.0.len() {
                let mut diff = self.0[i] as i64 - *other.0.get(i).unwrap_or(&0) as i64 - borrow;
                borrow = (diff < 0) as i64;
                if diff < 0 {
                    diff += 1 << 32;
                }
                out.push(diff as u32);
            }
            Big(out).trim()
        }

        fn to_decimal(&self) -> String {
            let mut chunks = Vec::new();
            let mut value = self.clone();
            while !value.is_zero() {
                let mut remainder = 0u64;
                for limb in value.0.iter_mut().rev() {
                    let current = (remainder << 32) | *limb as u64;
                    *limb = (current / 1_000_000_000) as u32;
                    remainder = current % 1_000_000_000;
                }
                value = value.trim();
                chunks.push(remainder);
            }
            let mut text = chunks.pop().unwrap_or(0).to_string();
            for chunk in chunks.iter().rev() {
                text.push_str(&format!("{chunk:09}"));
            }
            text
        }
    }

    /// Rounds `(n + something below its last bit if sticky) * 2^exponent` to a long
    /// double, ties to even. None when it overflows to infinity.
    fn round(negative: bool, n: &Big, exponent: i64, sticky: bool) -> Option<Ld> {
        let shift = (n.bits() - 64).max(MIN_EXPONENT - exponent);
        let (mut mantissa, mut exponent) = if shift <= 0 {
            (n.low_u128(), exponent)
        } else {
            let mut mantissa = n.shr(shift).low_u128();
            let half = n.bit(shift - 1);
            let rest = sticky || n.any_below(shift - 1);
            if half && (rest || mantissa & 1 == 1) {
                mantissa += 1;
            }
            (mantissa, exponent + shift)
        };
        if mantissa >> 64 != 0 {
            mantissa >>= 1;
            exponent += 1;
        }
        if mantissa == 0 {
            exponent = 0;
        } else if 128 - mantissa.leading_zeros() as i64 + exponent > MAX_BITS {
            return None;
        }
        Some(Ld {
            negative,
            mantissa: mantissa as u64,
            exponent,
        })
    }

    fn is_c_space(b: u8) -> bool {
        matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
    }

    /// Parses an exponent's digits, saturating far beyond any meaningful value.
    fn exponent_digits(text: &[u8]) -> Option<(i64, usize)> {
        let (negative, start) = match text.first() {
            Some(b'-') => (true, 1),
            Some(b'+') => (false, 1),
            _ => (false, 0),
        };
        let digits = text[start..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        let value = text[start..start + digits]
            .iter()
            .fold(0i64, |acc, &d| (acc * 10 + (d - b'0') as i64).min(1 << 40));
        Some((if negative { -value } else { value }, start + digits))
    }

    /// Parses as Redis's `string2ld` (glibc `strtold` over the whole string, no leading
    /// space, no NaN, no overflow or underflow to zero). `Some(None)` is an infinity.
    pub fn parse(text: &[u8]) -> Option<Option<Ld>> {
        if text.is_empty() || text.len() >= MAX_CHARS || is_c_space(text[0]) {
            return None;
        }
        let (negative, body) = match text[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(None);
        }
        let hex = body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x';
        let (radix, marker, digits_text) = if hex {
            (16u32, b'p', &body[2..])
        } else {
            (10u32, b'e', body)
        };
        // Mantissa digits, counting those after the point and the significant ones.
        let mut n = Big::default();
        let (mut any, mut after_point, mut significant) = (false, 0i64, 0i64);
        let mut i = 0;
        let mut seen_point = false;
        while i < digits_text.len() {
            let c = digits_text[i];
            if c == b'.' && !seen_point {
                seen_point = true;
            } else if let Some(d) = (c as char).to_digit(radix) {
                any = true;
                n.mul_add_small(radix, d);
                after_point += seen_point as i64;
                significant += (!n.is_zero()) as i64;
            } else {
                break;
            }
            i += 1;
        }
        if !any {
            return None;
        }
        let mut exponent = 0;
        if i < digits_text.len() && (digits_text[i] | 0x20) == marker {
            let (value, used) = exponent_digits(&digits_text[i + 1..])?;
            exponent = value;
            i += 1 + used;
        }
        if i != digits_text.len() {
            return None;
        }
        if n.is_zero() {
            return Some(Some(Ld {
                negative,
                mantissa: 0,
                exponent: 0,
            }));
        }
        let rounded = if hex {
            let exponent = (exponent - 4 * after_point).clamp(-(1 << 41), 1 << 41);
            round(negative, &n, exponent, false)?
        } else {
            let exponent = exponent - after_point;
            // Far out of range either way: strtold reports ERANGE.
            if significant + exponent > 4934 || significant + exponent < -4952 {
                return None;
            }
            if exponent >= 0 {
                let mut scaled = n;
                for _ in 0..exponent {
                    scaled.mul_add_small(10, 0);
                }
                round(negative, &scaled, 0, false)?
            } else {
                // n / 10^-exponent with a quotient of 66-67 bits, remainder as sticky.
                let divisor = Big::pow10(-exponent);
                let shift = 66 + divisor.bits() - n.bits();
                let (mut dividend, divisor) = if shift >= 0 {
                    (n.shl(shift), divisor)
                } else {
                    (n, divisor.shl(-shift))
                };
                let mut quotient = 0u128;
                for bit in (0..=68).rev() {
                    let part = divisor.shl(bit);
                    if dividend.compare(&part) != Ordering::Less {
                        dividend = dividend.sub(&part);
                        quotient |= 1 << bit;
                    }
                }
                round(
                    negative,
                    &Big::from_u128(quotient),
                    -shift,
                    !dividend.is_zero(),
                )?
            }
        };
        // Underflow to zero is an error in string2ld.
        (rounded.mantissa != 0).then_some(Some(rounded))
    }

    /// `a + b` rounded to long double; None if it overflows.
    pub fn add(a: Ld, b: Ld) -> Option<Ld> {
        if a.mantissa == 0 && b.mantissa == 0 {
            return Some(Ld {
                negative: a.negative && b.negative,
                ..a
            });
        }
        if a.mantissa == 0 {
            return Some(b);
        }
        if b.mantissa == 0 {
            return Some(a);
        }
        let exponent = a.exponent.min(b.exponent);
        let x = Big::from_u128(a.mantissa as u128).shl(a.exponent - exponent);
        let y = Big::from_u128(b.mantissa as u128).shl(b.exponent - exponent);
        if a.negative == b.negative {
            return round(a.negative, &x.add(&y), exponent, false);
        }
        match x.compare(&y) {
            Ordering::Equal => Some(Ld {
                negative: false,
                mantissa: 0,
                exponent: 0,
            }),
            Ordering::Greater => round(a.negative, &x.sub(&y), exponent, false),
            Ordering::Less => round(b.negative, &y.sub(&x), exponent, false),
        }
    }

    /// glibc's `%.17Lf` (correctly rounded, ties to even) with trailing zeros and a
    /// trailing point removed, and "-0" turned into "0", as Redis's `ld2string`.
    pub fn format(value: Ld) -> String {
        const DECIMALS: usize = 17;
        let n = Big::from_u128(value.mantissa as u128);
        let scaled = if value.exponent >= 0 {
            let mut scaled = n.shl(value.exponent);
            for _ in 0..DECIMALS {
                scaled.mul_add_small(10, 0);
            }
            scaled
        } else {
            let mut product = n;
            for _ in 0..DECIMALS {
                product.mul_add_small(10, 0);
            }
            let shift = -value.exponent;
            let mut quotient = product.shr(shift);
            let half = product.bit(shift - 1);
            let odd = quotient.bit(0);
            if half && (odd || product.any_below(shift - 1)) {
                quotient = quotient.add(&Big::from_u128(1));
            }
            quotient
        };
        let digits = format!("{:0>width$}", scaled.to_decimal(), width = DECIMALS + 1);
        let (whole, fraction) = digits.split_at(digits.len() - DECIMALS);
        let fraction = fraction.trim_end_matches('0');
        let mut text = String::new();
        if value.negative {
            text.push('-');
        }
        text.push_str(whole);
        if !fraction.is_empty() {
            text.push('.');
            text.push_str(fraction);
        }
        if text == "-0" { "0".to_string() } else { text }
    }
}

fn incrbyfloat(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(old) = ctx.get_string(args[1]) else {
        return Action::None;
    };
    let old = old.unwrap_or_else(|| Bytes::from_static(b"0"));
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
        Bytes::from(text.clone().into_bytes()),
        NO_EXPIRY,
        true,
    );
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
