//! Set commands, with Redis 7.0's replies and errors.
//!
//! Logged forms: SADD/SREM/SMOVE and the *STORE commands as given (deterministic given
//! the state they replay on); SPOP as `SREM key <the members popped>` (or `DEL key` when it
//! took them all), since the pick is random; SRANDMEMBER logs nothing.
//!
//! Keyspace events, as Redis 7.0 raises them: `sadd` (when something was added), `srem`,
//! `spop`, SMOVE's `srem` on the source then `sadd` on the destination,
//! `sinterstore` / `sunionstore` / `sdiffstore` (or `del` when an empty result deletes
//! the destination), `del` when a set is emptied, `new` when one is created.

use super::{Action, AlreadyReplied, Args, Ctx, EventClass, SYNTAX_ERROR, flags};
use crate::command;
use crate::glob::glob_match;
use crate::keyspace::{Access, Entry, Keyspace, NO_EXPIRY, Value};
use crate::types::Set;
use std::sync::Arc;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "sadd",
            -3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "set",
            "Add one or more members to a set",
            sadd
        ),
        command!(
            "srem",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "set",
            "Remove one or more members from a set",
            srem
        ),
        command!(
            "scard",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "set",
            "Get the number of members in a set",
            scard
        ),
        command!(
            "sismember",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "set",
            "Determine if a given value is a member of a set",
            sismember
        ),
        command!(
            "smismember",
            -3,
            READONLY | FAST,
            (1, 1, 1),
            "set",
            "Returns the membership associated with the given elements for a set",
            smismember
        ),
        command!(
            "smembers",
            2,
            READONLY,
            (1, 1, 1),
            "set",
            "Get all the members in a set",
            smembers
        ),
        command!(
            "spop",
            -2,
            WRITE | FAST,
            (1, 1, 1),
            "set",
            "Remove and return one or multiple random members from a set",
            spop
        ),
        command!(
            "srandmember",
            -2,
            READONLY,
            (1, 1, 1),
            "set",
            "Get one or multiple random members from a set",
            srandmember
        ),
        command!(
            "smove",
            4,
            WRITE | FAST,
            (1, 2, 1),
            "set",
            "Move a member from one set to another",
            smove
        ),
        command!(
            "sinter",
            -2,
            READONLY,
            (1, -1, 1),
            "set",
            "Intersect multiple sets",
            sinter
        ),
        command!(
            "sintercard",
            -3,
            READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "set",
            "Intersect multiple sets and return the cardinality of the result",
            sintercard
        ),
        command!(
            "sunion",
            -2,
            READONLY,
            (1, -1, 1),
            "set",
            "Add multiple sets",
            sunion
        ),
        command!(
            "sdiff",
            -2,
            READONLY,
            (1, -1, 1),
            "set",
            "Subtract multiple sets",
            sdiff
        ),
        command!(
            "sinterstore",
            -3,
            WRITE | DENYOOM,
            (1, -1, 1),
            "set",
            "Intersect multiple sets and store the resulting set in a key",
            sinterstore
        ),
        command!(
            "sunionstore",
            -3,
            WRITE | DENYOOM,
            (1, -1, 1),
            "set",
            "Add multiple sets and store the resulting set in a key",
            sunionstore
        ),
        command!(
            "sdiffstore",
            -3,
            WRITE | DENYOOM,
            (1, -1, 1),
            "set",
            "Subtract multiple sets and store the resulting set in a key",
            sdiffstore
        ),
        command!(
            "sscan",
            -3,
            READONLY,
            (1, 1, 1),
            "set",
            "Incrementally iterate Set elements",
            sscan
        ),
    ]
}

fn peek<'a>(keyspace: &'a Keyspace, db: usize, key: &[u8]) -> Option<&'a Set> {
    match keyspace.dbs[db].get(key).map(|e| &e.value) {
        Some(Value::Set(set, _)) => Some(set),
        _ => None,
    }
}

fn exists(ctx: &mut Ctx, key: &[u8]) -> Result<bool, AlreadyReplied> {
    Ok(ctx.read::<Set>(key)?.is_some())
}

fn sadd(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(set) = ctx.write_or_create::<Set>(args[1]) else {
        return Action::None;
    };
    let added = args[2..].iter().filter(|m| set.insert(m)).count();
    if added > 0 {
        ctx.notify(EventClass::Set, "sadd", args[1]);
        ctx.propagate(args);
    }
    ctx.out.integer(added as i64);
    Action::None
}

fn srem(ctx: &mut Ctx, args: &Args) -> Action {
    super::picks::remove_members::<Set>(ctx, args)
}

fn scard(ctx: &mut Ctx, args: &Args) -> Action {
    super::picks::cardinality::<Set>(ctx, args)
}

fn sismember(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(set) = ctx.read::<Set>(args[1]) {
        let found = set.is_some_and(|s| s.contains(args[2]));
        ctx.out.integer(found as i64);
    }
    Action::None
}

fn smismember(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let set = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        let found = set.is_some_and(|s| s.contains(member));
        ctx.out.integer(found as i64);
    }
    Action::None
}

fn reply_members<T: AsRef<[u8]>>(ctx: &mut Ctx, members: &[T]) {
    ctx.out.set(members.len());
    for member in members {
        ctx.out.bulk(member.as_ref());
    }
}

fn smembers(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    match found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten()
    {
        Some(set) => {
            ctx.out.set(set.len());
            for member in set.iter() {
                ctx.out.bulk(&member);
            }
        }
        None => ctx.out.set(0),
    }
    Action::None
}

fn spop(ctx: &mut Ctx, args: &Args) -> Action {
    if args.len() > 3 {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let Ok(count) = super::optional_count(ctx, args.get(2)) else {
        return Action::None;
    };
    let Ok(set) = ctx.write::<Set>(args[1]) else {
        return Action::None;
    };
    let Some(set) = set else {
        match count {
            None => ctx.out.null(),
            Some(_) => ctx.out.set(0),
        }
        return Action::None;
    };
    let want = count.unwrap_or(1);
    let popped: Vec<Vec<u8>> = if want >= set.len() {
        set.iter().map(|m| m.into_owned()).collect()
    } else {
        let picks = rand::seq::index::sample(&mut rand::rng(), set.len(), want);
        let chosen: Vec<Vec<u8>> = picks
            .iter()
            .map(|i| set.get_index(i).expect("in range").into_owned())
            .collect();
        chosen
    };
    if popped.len() == set.len() && count.is_some() {
        ctx.db().remove(args[1]);
        ctx.notify(EventClass::Set, "spop", args[1]);
        ctx.notify(EventClass::Generic, "del", args[1]);
        ctx.propagate(&[b"DEL", args[1]]);
    } else {
        for member in &popped {
            set.remove(member);
        }
        let emptied = ctx.remove_if_empty(args[1]);
        if !popped.is_empty() {
            ctx.notify(EventClass::Set, "spop", args[1]);
            if emptied {
                ctx.notify(EventClass::Generic, "del", args[1]);
            }
            let mut logged: Vec<&[u8]> = vec![b"SREM", args[1]];
            logged.extend(popped.iter().map(Vec::as_slice));
            ctx.propagate(&logged);
        }
    }
    match count {
        None => ctx.out.bulk(&popped[0]),
        Some(_) => reply_members(ctx, &popped),
    }
    Action::None
}

fn srandmember(ctx: &mut Ctx, args: &Args) -> Action {
    let count = match args.len() {
        2 => None,
        3 => match super::picks::random_count(ctx, args[2]) {
            None => return Action::None,
            count => count,
        },
        _ => {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    };
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let set = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    let Some(count) = count else {
        match set {
            Some(set) => {
                let index = rand::random_range(0..set.len());
                let member = set.get_index(index).expect("in range");
                ctx.out.bulk(&member);
            }
            None => ctx.out.null(),
        }
        return Action::None;
    };
    let Some(set) = set.filter(|_| count != 0) else {
        ctx.out.array(0);
        return Action::None;
    };
    let picks = super::picks::random_picks(set.len(), count);
    let limit = ctx.reply_limit();
    picks.reply(
        &mut ctx.out,
        ctx.client.resp3,
        false,
        limit,
        |out, index| {
            out.bulk(&set.get_index(index).expect("in range"));
        },
    );
    Action::None
}

fn smove(ctx: &mut Ctx, args: &Args) -> Action {
    let (source, destination, member) = (args[1], args[2], args[3]);
    ctx.expire_if_needed(source);
    ctx.expire_if_needed(destination);
    let db = ctx.client.db;
    let source_kind = ctx.keyspace.dbs[db]
        .get(source)
        .map(|e| matches!(e.value, Value::Set(_, _)));
    let Some(source_is_set) = source_kind else {
        ctx.out.integer(0);
        return Action::None;
    };
    let destination_ok = ctx.keyspace.dbs[db]
        .get(destination)
        .is_none_or(|e| matches!(e.value, Value::Set(_, _)));
    if !source_is_set || !destination_ok {
        ctx.wrong_type();
        return Action::None;
    }
    if source == destination {
        let found = peek(ctx.keyspace, db, source).is_some_and(|s| s.contains(member));
        ctx.out.integer(found as i64);
        return Action::None;
    }
    let Ok(Some(set)) = ctx.write::<Set>(source) else {
        unreachable!("checked above");
    };
    if !set.remove(member) {
        ctx.out.integer(0);
        return Action::None;
    }
    ctx.notify(EventClass::Set, "srem", source);
    if ctx.remove_if_empty(source) {
        ctx.notify(EventClass::Generic, "del", source);
    }
    let added = ctx
        .write_or_create::<Set>(destination)
        .is_ok_and(|target| target.insert(member));
    // As Redis's SMOVE: the destination counts as changed (WATCH, tracking, blocked
    // clients) only when the member was not there already.
    ctx.propagate_unsignalled(args);
    ctx.signal_modified(source);
    if added {
        ctx.signal_modified(destination);
        ctx.notify(EventClass::Set, "sadd", destination);
    }
    ctx.out.integer(1);
    Action::None
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Checks every key (WRONGTYPE stops everything, as in Redis, even after a missing key)
/// and computes the result. None after an error reply.
fn combine(ctx: &mut Ctx, keys: &[&[u8]], op: Op, limit: usize) -> Option<Vec<Vec<u8>>> {
    for key in keys {
        if ctx.read::<Set>(key).is_err() {
            return None;
        }
    }
    let db = ctx.client.db;
    let sets: Vec<Option<&Set>> = keys.iter().map(|k| peek(ctx.keyspace, db, k)).collect();
    let result = match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Some(Vec::new());
            }
            let mut sets: Vec<&Set> = sets.into_iter().flatten().collect();
            sets.sort_by_key(|s| s.len());
            let mut out = Vec::new();
            for member in sets[0].iter() {
                if sets[1..].iter().all(|s| s.contains(&member)) {
                    out.push(member.into_owned());
                    if limit > 0 && out.len() >= limit {
                        break;
                    }
                }
            }
            out
        }
        Op::Union => {
            let mut seen: indexmap::IndexSet<Vec<u8>> = indexmap::IndexSet::new();
            for set in sets.into_iter().flatten() {
                seen.extend(set.iter().map(|m| m.into_owned()));
            }
            seen.into_iter().collect()
        }
        Op::Diff => match sets[0] {
            None => Vec::new(),
            Some(first) => first
                .iter()
                .filter(|m| sets[1..].iter().flatten().all(|s| !s.contains(m)))
                .map(|m| m.into_owned())
                .collect(),
        },
    };
    Some(result)
}

fn read_op(ctx: &mut Ctx, args: &Args, op: Op) -> Action {
    if let Some(members) = combine(ctx, &args[1..], op, 0) {
        reply_members(ctx, &members);
    }
    Action::None
}

fn sinter(ctx: &mut Ctx, args: &Args) -> Action {
    read_op(ctx, args, Op::Inter)
}

fn sunion(ctx: &mut Ctx, args: &Args) -> Action {
    read_op(ctx, args, Op::Union)
}

fn sdiff(ctx: &mut Ctx, args: &Args) -> Action {
    read_op(ctx, args, Op::Diff)
}

/// The *STORE commands: the destination is replaced whatever it held (or deleted when
/// the result is empty), as Redis's setKey does.
fn store_op(ctx: &mut Ctx, args: &Args, op: Op) -> Action {
    let Some(members) = ctx.reading(|ctx| combine(ctx, &args[2..], op, 0)) else {
        return Action::None;
    };
    let destination = args[1];
    ctx.expire_if_needed(destination);
    // An empty result deletes the destination; if there was none, nothing changed and
    // nothing is logged (so a WATCH on it is not touched, as in Redis).
    let changed = if members.is_empty() {
        let deleted = ctx.db().remove(destination).is_some();
        if deleted {
            ctx.notify(EventClass::Generic, "del", destination);
        }
        deleted
    } else {
        let mut set = Set::default();
        for member in &members {
            set.insert(member);
        }
        let previous = ctx.db().insert(Entry {
            key: crate::keyspace::Key::from(destination),
            value: Value::Set(Arc::new(set), Access::new()),
            expire_at_ms: NO_EXPIRY,
        });
        if previous.is_none() {
            ctx.notify(EventClass::New, "new", destination);
        }
        let event = match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        };
        ctx.notify(EventClass::Set, event, destination);
        true
    };
    if changed {
        ctx.propagate(args);
    }
    ctx.out.integer(members.len() as i64);
    Action::None
}

fn sinterstore(ctx: &mut Ctx, args: &Args) -> Action {
    store_op(ctx, args, Op::Inter)
}

fn sunionstore(ctx: &mut Ctx, args: &Args) -> Action {
    store_op(ctx, args, Op::Union)
}

fn sdiffstore(ctx: &mut Ctx, args: &Args) -> Action {
    store_op(ctx, args, Op::Diff)
}

fn sintercard(ctx: &mut Ctx, args: &Args) -> Action {
    let numkeys = match crate::resp::parse_i64(args[1]) {
        Some(n) if n > 0 => n as usize,
        _ => {
            ctx.out.error("ERR numkeys should be greater than 0");
            return Action::None;
        }
    };
    if numkeys > args.len() - 2 {
        ctx.out
            .error("ERR Number of keys can't be greater than number of args");
        return Action::None;
    }
    let keys = &args[2..2 + numkeys];
    let Some(limit) = super::picks::intercard_limit(ctx, &args[2 + numkeys..]) else {
        return Action::None;
    };
    if let Some(members) = combine(ctx, keys, Op::Inter, limit) {
        ctx.out.integer(members.len() as i64);
    }
    Action::None
}

fn sscan(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((cursor, options)) = super::picks::scan_prelude::<Set>(ctx, args) else {
        return Action::None;
    };
    let set = peek(ctx.keyspace, ctx.client.db, args[1]).expect("checked above");
    let mut members: Vec<Vec<u8>> = Vec::new();
    let next = set.scan(cursor, options.count, |member| {
        if options
            .pattern
            .is_none_or(|p| glob_match(p, &member, false))
        {
            members.push(member.into_owned());
        }
    });
    super::picks::reply_scan(ctx, next, &members);
    Action::None
}
