//! DUMP and RESTORE (and RESTORE-ASKING, which a server without cluster support runs as
//! RESTORE): a key's value as Redis's DUMP payload (`rdb::payload`), so values move
//! between Tessera and Redis in both directions.
//!
//! RESTORE is logged in a form that replays to the same key whatever the clock says
//! then, Redis's: the command as sent, a relative TTL rewritten as an absolute one with
//! ABSTTL added. (A RESTORE without REPLACE that ran found no key, so its replay finds
//! none either.)

use super::{Action, Args, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR, eq_ignore_case, flags};
use crate::access::Access;
use crate::command;
use crate::keyspace::{Entry, Key, NO_EXPIRY};
use crate::rdb::payload;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "dump",
            2,
            READONLY,
            (1, 1, 1),
            "generic",
            "Return a serialized version of the value stored at the specified key.",
            dump
        ),
        command!(
            "restore",
            -4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "generic",
            "Create a key using the provided serialized value, previously obtained using DUMP.",
            restore
        ),
        command!(
            "restore-asking",
            -4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "server",
            "An internal command for migrating keys in a cluster",
            restore
        ),
    ]
}

fn dump(ctx: &mut Ctx, args: &Args) -> Action {
    let compression = ctx.server.config.rdbcompression;
    match ctx.lookup_read(args[1]) {
        None => ctx.out.null(),
        Some(entry) => {
            let payload = payload::encode_value(&entry.value, compression);
            ctx.out.bulk(&payload);
        }
    }
    Action::None
}

/// RESTORE's options after the payload.
struct RestoreOptions {
    replace: bool,
    absolute_ttl: bool,
    idle_seconds: Option<u64>,
    frequency: Option<u8>,
}

/// Parses the options as Redis's `restoreCommand` (IDLETIME and FREQ exclude each other:
/// the second is a syntax error); None after replying the error.
fn restore_options(ctx: &mut Ctx, options: &Args) -> Option<RestoreOptions> {
    let mut parsed = RestoreOptions {
        replace: false,
        absolute_ttl: false,
        idle_seconds: None,
        frequency: None,
    };
    let mut i = 0;
    while i < options.len() {
        let has_value = i + 1 < options.len();
        if eq_ignore_case(options[i], "replace") {
            parsed.replace = true;
        } else if eq_ignore_case(options[i], "absttl") {
            parsed.absolute_ttl = true;
        } else if eq_ignore_case(options[i], "idletime") && has_value && parsed.frequency.is_none()
        {
            let idle = super::int_arg(ctx, options[i + 1])?;
            if idle < 0 {
                ctx.out.error("ERR Invalid IDLETIME value, must be >= 0");
                return None;
            }
            parsed.idle_seconds = Some(idle as u64);
            i += 1;
        } else if eq_ignore_case(options[i], "freq") && has_value && parsed.idle_seconds.is_none() {
            let frequency = super::int_arg(ctx, options[i + 1])?;
            let Ok(frequency) = u8::try_from(frequency) else {
                ctx.out
                    .error("ERR Invalid FREQ value, must be >= 0 and <= 255");
                return None;
            };
            parsed.frequency = Some(frequency);
            i += 1;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        i += 1;
    }
    Some(parsed)
}

fn restore(ctx: &mut Ctx, args: &Args) -> Action {
    let key = args[1];
    let Some(options) = restore_options(ctx, &args[4..]) else {
        return Action::None;
    };
    if !options.replace && ctx.lookup(key).is_some() {
        ctx.out.error("BUSYKEY Target key name already exists.");
        return Action::None;
    }
    let ttl = match crate::resp::parse_i64(args[2]) {
        None => return error(ctx, NOT_INTEGER),
        Some(ttl) if ttl < 0 => return error(ctx, "ERR Invalid TTL value, must be >= 0"),
        Some(ttl) => ttl,
    };
    let mut value = match payload::decode_value(args[3]) {
        Ok(value) => value,
        Err(reason) => return error(ctx, &format!("ERR {reason}")),
    };
    let deleted = options.replace && {
        ctx.expire_if_needed(key);
        ctx.db().remove(key).is_some()
    };
    let expire_at_ms = match ttl {
        0 => NO_EXPIRY,
        ttl if options.absolute_ttl => ttl,
        ttl => ttl.saturating_add(ctx.now_ms),
    };
    if expire_at_ms != NO_EXPIRY && expire_at_ms <= ctx.now_ms && !ctx.loading {
        // Already expired: the key is not created (an old one replaced is gone).
        if deleted {
            ctx.notify(EventClass::Generic, "del", key);
            ctx.propagate(&[b"DEL", key]);
        }
        ctx.out.ok();
        return Action::None;
    }
    *value.access_mut() = Access::restored(options.idle_seconds, options.frequency);
    ctx.db().insert(Entry {
        key: Key::from(key),
        value,
        expire_at_ms,
    });
    ctx.notify(EventClass::Generic, "restore", key);
    // Redis's form: the command as sent, a relative TTL made absolute (and ABSTTL added).
    let absolute = expire_at_ms.to_string();
    let mut logged: Vec<&[u8]> = args.to_vec();
    if ttl != 0 && !options.absolute_ttl {
        logged[2] = absolute.as_bytes();
        logged.push(b"ABSTTL");
    }
    ctx.propagate(&logged);
    ctx.out.ok();
    Action::None
}

fn error(ctx: &mut Ctx, message: &str) -> Action {
    ctx.out.error(message);
    Action::None
}
