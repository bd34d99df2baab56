//! Hash commands, with Redis 7.0's replies and errors.
//!
//! Logged forms: HSET/HMSET/HSETNX/HDEL/HINCRBY as given (deterministic); HINCRBYFLOAT
//! as `HSET key field <result>`, as Redis propagates it, so replay gives the same bytes.
//! Keyspace events: `hset` (HSET, HMSET, HSETNX when it sets), `hincrby`,
//! `hincrbyfloat`, `hdel` then `del` when the hash is emptied; `new` for a hash created.

use super::{Action, AlreadyReplied, Args, Ctx, EventClass, flags, int_arg};
use crate::command;
use crate::glob::glob_match;
use crate::keyspace::{Keyspace, Value};
use crate::resp::ReplyWriter;
use crate::types::Hash;
use crate::types::listpack::LpValue;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "hset",
            -4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "hash",
            "Set the string value of a hash field",
            hset
        ),
        command!(
            "hmset",
            -4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "hash",
            "Set multiple hash fields to multiple values",
            hset
        ),
        command!(
            "hsetnx",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "hash",
            "Set the value of a hash field, only if the field does not exist",
            hsetnx
        ),
        command!(
            "hget",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "hash",
            "Get the value of a hash field",
            hget
        ),
        command!(
            "hmget",
            -3,
            READONLY | FAST,
            (1, 1, 1),
            "hash",
            "Get the values of all the given hash fields",
            hmget
        ),
        command!(
            "hdel",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "hash",
            "Delete one or more hash fields",
            hdel
        ),
        command!(
            "hlen",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "hash",
            "Get the number of fields in a hash",
            hlen
        ),
        command!(
            "hexists",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "hash",
            "Determine if a hash field exists",
            hexists
        ),
        command!(
            "hstrlen",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "hash",
            "Get the length of the value of a hash field",
            hstrlen
        ),
        command!(
            "hkeys",
            2,
            READONLY,
            (1, 1, 1),
            "hash",
            "Get all the fields in a hash",
            hkeys
        ),
        command!(
            "hvals",
            2,
            READONLY,
            (1, 1, 1),
            "hash",
            "Get all the values in a hash",
            hvals
        ),
        command!(
            "hgetall",
            2,
            READONLY,
            (1, 1, 1),
            "hash",
            "Get all the fields and values in a hash",
            hgetall
        ),
        command!(
            "hincrby",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "hash",
            "Increment the integer value of a hash field by the given number",
            hincrby
        ),
        command!(
            "hincrbyfloat",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "hash",
            "Increment the float value of a hash field by the given amount",
            hincrbyfloat
        ),
        command!(
            "hrandfield",
            -2,
            READONLY,
            (1, 1, 1),
            "hash",
            "Get one or multiple random fields from a hash",
            hrandfield
        ),
        command!(
            "hscan",
            -3,
            READONLY,
            (1, 1, 1),
            "hash",
            "Incrementally iterate hash fields and associated values",
            hscan
        ),
    ]
}

/// The hash at `key` without touching statistics (after `Ctx::read` checked it).
fn peek<'a>(keyspace: &'a Keyspace, db: usize, key: &[u8]) -> Option<&'a Hash> {
    match keyspace.dbs[db].get(key).map(|e| &e.value) {
        Some(Value::Hash(hash, _)) => Some(hash),
        _ => None,
    }
}

/// Reads `key` as a hash for a read command: Ok(false) if absent (the caller replies),
/// Err after WRONGTYPE.
fn exists(ctx: &mut Ctx, key: &[u8]) -> Result<bool, AlreadyReplied> {
    Ok(ctx.read::<Hash>(key)?.is_some())
}

pub(crate) fn bulk_value(out: &mut ReplyWriter, value: LpValue) {
    match value {
        LpValue::Int(n) => out.bulk_i64(n),
        LpValue::Bytes(b) => out.bulk(b),
    }
}

fn hset(ctx: &mut Ctx, args: &Args) -> Action {
    if !args.len().is_multiple_of(2) {
        let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
        super::wrong_arity(ctx, &name);
        return Action::None;
    }
    let Ok(hash) = ctx.write_or_create::<Hash>(args[1]) else {
        return Action::None;
    };
    let mut added = 0;
    for pair in args[2..].chunks(2) {
        added += hash.set(pair[0], pair[1]) as i64;
    }
    ctx.notify(EventClass::Hash, "hset", args[1]);
    ctx.propagate(args);
    if args[0].eq_ignore_ascii_case(b"hmset") {
        ctx.out.ok();
    } else {
        ctx.out.integer(added);
    }
    Action::None
}

fn hsetnx(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(present) = ctx
        .read::<Hash>(args[1])
        .map(|h| h.is_some_and(|h| h.contains(args[2])))
    else {
        return Action::None;
    };
    if present {
        ctx.out.integer(0);
        return Action::None;
    }
    if let Ok(hash) = ctx.write_or_create::<Hash>(args[1]) {
        hash.set(args[2], args[3]);
        ctx.notify(EventClass::Hash, "hset", args[1]);
        ctx.propagate(args);
        ctx.out.integer(1);
    }
    Action::None
}

fn hget(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let hash = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    match hash.and_then(|h| h.get(args[2])) {
        Some(value) => bulk_value(&mut ctx.out, value),
        None => ctx.out.null(),
    }
    Action::None
}

fn hmget(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let hash = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    ctx.out.array(args.len() - 2);
    for field in &args[2..] {
        match hash.and_then(|h| h.get(field)) {
            Some(value) => bulk_value(&mut ctx.out, value),
            None => ctx.out.null(),
        }
    }
    Action::None
}

fn hdel(ctx: &mut Ctx, args: &Args) -> Action {
    super::picks::remove_members::<Hash>(ctx, args)
}

fn hlen(ctx: &mut Ctx, args: &Args) -> Action {
    super::picks::cardinality::<Hash>(ctx, args)
}

fn hexists(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(hash) = ctx.read::<Hash>(args[1]) {
        let found = hash.is_some_and(|h| h.contains(args[2]));
        ctx.out.integer(found as i64);
    }
    Action::None
}

fn hstrlen(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(hash) = ctx.read::<Hash>(args[1]) {
        let len = hash
            .and_then(|h| h.get(args[2]))
            .map_or(0, |v| v.to_bytes().len());
        ctx.out.integer(len as i64);
    }
    Action::None
}

/// HKEYS, HVALS, HGETALL.
fn all(ctx: &mut Ctx, key: &[u8], fields: bool, values: bool) {
    let Ok(found) = exists(ctx, key) else {
        return;
    };
    let Some(hash) = found
        .then(|| peek(ctx.keyspace, ctx.client.db, key))
        .flatten()
    else {
        if fields && values {
            ctx.out.map(0);
        } else {
            ctx.out.array(0);
        }
        return;
    };
    if fields && values {
        ctx.out.map(hash.len());
    } else {
        ctx.out.array(hash.len());
    }
    for (field, value) in hash.iter() {
        if fields {
            bulk_value(&mut ctx.out, field);
        }
        if values {
            bulk_value(&mut ctx.out, value);
        }
    }
}

fn hkeys(ctx: &mut Ctx, args: &Args) -> Action {
    all(ctx, args[1], true, false);
    Action::None
}

fn hvals(ctx: &mut Ctx, args: &Args) -> Action {
    all(ctx, args[1], false, true);
    Action::None
}

fn hgetall(ctx: &mut Ctx, args: &Args) -> Action {
    all(ctx, args[1], true, true);
    Action::None
}

fn hincrby(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(increment) = int_arg(ctx, args[3]) else {
        return Action::None;
    };
    let Ok(hash) = ctx.write_or_create::<Hash>(args[1]) else {
        return Action::None;
    };
    let current = match hash.get(args[2]) {
        None => 0,
        Some(value) => match value.as_i64() {
            Some(n) => n,
            None => {
                ctx.remove_if_empty(args[1]);
                ctx.out.error("ERR hash value is not an integer");
                return Action::None;
            }
        },
    };
    let Some(result) = current.checked_add(increment) else {
        ctx.remove_if_empty(args[1]);
        ctx.out.error("ERR increment or decrement would overflow");
        return Action::None;
    };
    hash.set(args[2], itoa::Buffer::new().format(result).as_bytes());
    ctx.notify(EventClass::Hash, "hincrby", args[1]);
    ctx.propagate(args);
    ctx.out.integer(result);
    Action::None
}

fn hincrbyfloat(ctx: &mut Ctx, args: &Args) -> Action {
    match crate::long_double::parse(args[3]) {
        None => {
            ctx.out.error("ERR value is not a valid float");
            return Action::None;
        }
        Some(None) => {
            ctx.out.error("ERR value is NaN or Infinity");
            return Action::None;
        }
        Some(Some(_)) => {}
    }
    let Ok(hash) = ctx.write_or_create::<Hash>(args[1]) else {
        return Action::None;
    };
    let current = hash
        .get(args[2])
        .map_or_else(|| b"0".to_vec(), |v| v.to_bytes());
    if crate::long_double::parse(&current).is_none() {
        ctx.remove_if_empty(args[1]);
        ctx.out.error("ERR hash value is not a float");
        return Action::None;
    }
    let text = match super::strings::add_floats(&current, args[3]) {
        Ok(text) => text,
        Err(error) => {
            ctx.remove_if_empty(args[1]);
            ctx.out.error(error);
            return Action::None;
        }
    };
    hash.set(args[2], text.as_bytes());
    ctx.notify(EventClass::Hash, "hincrbyfloat", args[1]);
    ctx.propagate(&[b"HSET", args[1], args[2], text.as_bytes()]);
    ctx.out.bulk(text.as_bytes());
    Action::None
}

/// HRANDFIELD key [count [WITHVALUES]]. Random picks are not logged: nothing changes.
fn hrandfield(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((count, with_values)) = super::picks::random_args(ctx, args, "withvalues") else {
        return Action::None;
    };
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let hash = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    let Some(count) = count else {
        match hash {
            Some(h) => {
                let index = rand::random_range(0..h.len());
                let (field, _) = h.get_index(index).expect("in range");
                bulk_value(&mut ctx.out, field);
            }
            None => ctx.out.null(),
        }
        return Action::None;
    };
    let Some(hash) = hash.filter(|_| count != 0) else {
        ctx.out.array(0);
        return Action::None;
    };
    let picks = super::picks::random_picks(hash.len(), count);
    // A listpack is reached by position in linear time: its pairs are listed once (it is
    // small by definition) rather than walked again for each of the client's picks.
    let listed: Option<Vec<_>> = matches!(hash, Hash::Listpack(_)).then(|| hash.iter().collect());
    let limit = ctx.reply_limit();
    picks.reply(
        &mut ctx.out,
        ctx.client.resp3,
        with_values,
        limit,
        |out, index| {
            let (field, value) = match &listed {
                Some(pairs) => pairs[index],
                None => hash.get_index(index).expect("in range"),
            };
            bulk_value(out, field);
            if with_values {
                bulk_value(out, value);
            }
        },
    );
    Action::None
}

fn hscan(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((cursor, options)) = super::picks::scan_prelude::<Hash>(ctx, args) else {
        return Action::None;
    };
    let hash = peek(ctx.keyspace, ctx.client.db, args[1]).expect("checked above");
    let mut items: Vec<Vec<u8>> = Vec::new();
    let next = hash.scan(cursor, options.count, |field, value| {
        let field = field.to_bytes();
        if options.pattern.is_none_or(|p| glob_match(p, &field, false)) {
            items.push(field);
            items.push(value.to_bytes());
        }
    });
    super::picks::reply_scan(ctx, next, &items);
    Action::None
}
