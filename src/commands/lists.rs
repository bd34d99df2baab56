//! List commands, with Redis 7.0's replies and errors (the blocking ones live elsewhere
//! and reuse `pop_and_propagate`, `move_and_propagate` and `parse_lmpop`).
//!
//! Logged forms: pushes, LSET, LINSERT, LREM, LTRIM and LMOVE as given, only when they
//! changed something; LPOP/RPOP as `LPOP key count` (or without count); LMPOP as the
//! LPOP/RPOP it did; RPOPLPUSH (and BRPOPLPUSH) as `RPOPLPUSH src dst`, LMOVE (and BLMOVE)
//! as `LMOVE src dst from to`, as Redis propagates them (a replica's command statistics
//! count the one it was sent).
//!
//! Keyspace events, as Redis 7.0 raises them: `lpush` / `rpush` (LPUSHX and RPUSHX too,
//! and the destination of LMOVE), `lpop` / `rpop` (LMPOP and LMOVE's source too), `lset`,
//! `linsert`, `lrem`, `ltrim` (whenever the key exists), `del` when a list is emptied,
//! `new` when one is created.

use super::{
    Action, Args, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR, eq_ignore_case, flags, int_arg,
};
use crate::command;
use crate::types::List;
use crate::types::list::End;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "lpush",
            -3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "list",
            "Prepend one or multiple elements to a list",
            lpush
        ),
        command!(
            "rpush",
            -3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "list",
            "Append one or multiple elements to a list",
            rpush
        ),
        command!(
            "lpushx",
            -3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "list",
            "Prepend an element to a list, only if the list exists",
            lpushx
        ),
        command!(
            "rpushx",
            -3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "list",
            "Append an element to a list, only if the list exists",
            rpushx
        ),
        command!(
            "lpop",
            -2,
            WRITE | FAST,
            (1, 1, 1),
            "list",
            "Remove and get the first elements in a list",
            lpop
        ),
        command!(
            "rpop",
            -2,
            WRITE | FAST,
            (1, 1, 1),
            "list",
            "Remove and get the last elements in a list",
            rpop
        ),
        command!(
            "llen",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "list",
            "Get the length of a list",
            llen
        ),
        command!(
            "lrange",
            4,
            READONLY,
            (1, 1, 1),
            "list",
            "Get a range of elements from a list",
            lrange
        ),
        command!(
            "lindex",
            3,
            READONLY,
            (1, 1, 1),
            "list",
            "Get an element from a list by its index",
            lindex
        ),
        command!(
            "lset",
            4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "list",
            "Set the value of an element in a list by its index",
            lset
        ),
        command!(
            "linsert",
            5,
            WRITE | DENYOOM,
            (1, 1, 1),
            "list",
            "Insert an element before or after another element in a list",
            linsert
        ),
        command!(
            "lrem",
            4,
            WRITE,
            (1, 1, 1),
            "list",
            "Remove elements from a list",
            lrem
        ),
        command!(
            "ltrim",
            4,
            WRITE,
            (1, 1, 1),
            "list",
            "Trim a list to the specified range",
            ltrim
        ),
        command!(
            "lpos",
            -3,
            READONLY,
            (1, 1, 1),
            "list",
            "Return the index of matching elements on a list",
            lpos
        ),
        command!(
            "lmove",
            5,
            WRITE | DENYOOM,
            (1, 2, 1),
            "list",
            "Pop an element from a list, push it to another list and return it",
            lmove
        ),
        command!(
            "rpoplpush",
            3,
            WRITE | DENYOOM,
            (1, 2, 1),
            "list",
            "Remove the last element in a list, prepend it to another list and return it",
            rpoplpush
        ),
        command!(
            "lmpop",
            -4,
            WRITE | MOVABLEKEYS,
            (0, 0, 0),
            "list",
            "Pop elements from a list",
            lmpop
        ),
    ]
}

fn end_name(end: End) -> &'static [u8] {
    match end {
        End::Left => b"LEFT",
        End::Right => b"RIGHT",
    }
}

/// LEFT or RIGHT, or None.
pub(crate) fn parse_end(arg: &[u8]) -> Option<End> {
    if eq_ignore_case(arg, "left") {
        Some(End::Left)
    } else if eq_ignore_case(arg, "right") {
        Some(End::Right)
    } else {
        None
    }
}

fn push_generic(ctx: &mut Ctx, args: &Args, end: End, only_existing: bool) -> Action {
    let list = if only_existing {
        match ctx.write::<List>(args[1]) {
            Ok(Some(list)) => list,
            Ok(None) => {
                ctx.out.integer(0);
                return Action::None;
            }
            Err(_) => return Action::None,
        }
    } else {
        match ctx.write_or_create::<List>(args[1]) {
            Ok(list) => list,
            Err(_) => return Action::None,
        }
    };
    for value in &args[2..] {
        list.push(end, value);
    }
    let len = list.len() as i64;
    ctx.notify(EventClass::List, push_event(end), args[1]);
    ctx.propagate(args);
    ctx.out.integer(len);
    Action::None
}

/// The keyspace event of a push to `end`, and of a pop from it.
fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

fn lpush(ctx: &mut Ctx, args: &Args) -> Action {
    push_generic(ctx, args, End::Left, false)
}
fn rpush(ctx: &mut Ctx, args: &Args) -> Action {
    push_generic(ctx, args, End::Right, false)
}
fn lpushx(ctx: &mut Ctx, args: &Args) -> Action {
    push_generic(ctx, args, End::Left, true)
}
fn rpushx(ctx: &mut Ctx, args: &Args) -> Action {
    push_generic(ctx, args, End::Right, true)
}

/// The count a pop's log record carries, as Redis propagates it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoggedCount {
    /// LPOP / RPOP: the command as sent.
    Asked,
    /// LMPOP / BLMPOP, rewritten as LPOP / RPOP of the elements popped.
    Popped,
}

/// Pops up to `count` elements (one, unwrapped, when `count` is None) from `key`'s `end`,
/// logs `LPOP/RPOP key [count]` and deletes the key if it emptied. Returns the popped
/// elements; the caller checked the type (a non-list key gives an empty result).
pub(crate) fn pop_and_propagate(
    ctx: &mut Ctx,
    key: &[u8],
    end: End,
    count: Option<usize>,
    logged: LoggedCount,
) -> Vec<Vec<u8>> {
    let Ok(Some(list)) = ctx.write::<List>(key) else {
        return Vec::new();
    };
    let wanted = count.unwrap_or(1).min(list.len());
    let mut popped = Vec::with_capacity(wanted);
    for _ in 0..wanted {
        popped.push(list.pop(end).expect("counted"));
    }
    if popped.is_empty() {
        return popped;
    }
    let name: &[u8] = if end == End::Left { b"LPOP" } else { b"RPOP" };
    match count {
        Some(asked) => {
            let n = match logged {
                LoggedCount::Asked => asked,
                LoggedCount::Popped => popped.len(),
            };
            let text = itoa::Buffer::new().format(n).to_owned();
            ctx.propagate(&[name, key, text.as_bytes()]);
        }
        None => ctx.propagate(&[name, key]),
    }
    ctx.notify(EventClass::List, pop_event(end), key);
    if ctx.remove_if_empty(key) {
        ctx.notify(EventClass::Generic, "del", key);
    }
    popped
}

fn pop_generic(ctx: &mut Ctx, args: &Args, end: End) -> Action {
    if args.len() > 3 {
        let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
        super::wrong_arity(ctx, &name);
        return Action::None;
    }
    let Ok(count) = super::optional_count(ctx, args.get(2)) else {
        return Action::None;
    };
    match ctx.read::<List>(args[1]) {
        Err(_) => return Action::None,
        Ok(None) => {
            if count.is_some() {
                ctx.out.null_array();
            } else {
                ctx.out.null();
            }
            return Action::None;
        }
        Ok(Some(_)) => {}
    }
    if count == Some(0) {
        ctx.out.array(0);
        return Action::None;
    }
    let popped = pop_and_propagate(ctx, args[1], end, count, LoggedCount::Asked);
    match count {
        Some(_) => ctx.out.bulk_strings(popped.iter()),
        None => ctx.out.bulk(&popped[0]),
    }
    Action::None
}

fn lpop(ctx: &mut Ctx, args: &Args) -> Action {
    pop_generic(ctx, args, End::Left)
}
fn rpop(ctx: &mut Ctx, args: &Args) -> Action {
    pop_generic(ctx, args, End::Right)
}

fn llen(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(list) = ctx.read::<List>(args[1]) {
        let len = list.map_or(0, |l| l.len()) as i64;
        ctx.out.integer(len);
    }
    Action::None
}

fn lrange(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(start) = int_arg(ctx, args[2]) else {
        return Action::None;
    };
    let Some(stop) = int_arg(ctx, args[3]) else {
        return Action::None;
    };
    let Ok(found) = ctx.read::<List>(args[1]) else {
        return Action::None;
    };
    let Some(list) = found else {
        ctx.out.array(0);
        return Action::None;
    };
    let len = list.len() as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        ctx.out.array(0);
        return Action::None;
    }
    let count = (stop - start + 1) as usize;
    let items: Vec<Vec<u8>> = list
        .iter_from(start as usize)
        .take(count)
        .map(|v| v.to_bytes())
        .collect();
    ctx.out.bulk_strings(items.iter());
    Action::None
}

fn lindex(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = ctx.read::<List>(args[1]) else {
        return Action::None;
    };
    let Some(list) = found else {
        ctx.out.null();
        return Action::None;
    };
    let Some(index) = crate::resp::parse_i64(args[2]) else {
        ctx.out.error(NOT_INTEGER);
        return Action::None;
    };
    let value = Some(list).and_then(|l| l.get(index)).map(|v| v.to_bytes());
    match value {
        Some(v) => ctx.out.bulk(&v),
        None => ctx.out.null(),
    }
    Action::None
}

fn lset(ctx: &mut Ctx, args: &Args) -> Action {
    let list = match ctx.write::<List>(args[1]) {
        Ok(Some(list)) => list,
        Ok(None) => {
            ctx.out.error("ERR no such key");
            return Action::None;
        }
        Err(_) => return Action::None,
    };
    let Some(index) = crate::resp::parse_i64(args[2]) else {
        ctx.out.error(NOT_INTEGER);
        return Action::None;
    };
    if list.set(index, args[3]) {
        ctx.notify(EventClass::List, "lset", args[1]);
        ctx.propagate(args);
        ctx.out.ok();
    } else {
        ctx.out.error("ERR index out of range");
    }
    Action::None
}

fn linsert(ctx: &mut Ctx, args: &Args) -> Action {
    let after = if eq_ignore_case(args[2], "after") {
        true
    } else if eq_ignore_case(args[2], "before") {
        false
    } else {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    };
    let list = match ctx.write::<List>(args[1]) {
        Ok(Some(list)) => list,
        Ok(None) => {
            ctx.out.integer(0);
            return Action::None;
        }
        Err(_) => return Action::None,
    };
    if list.insert(args[3], args[4], after) {
        let len = list.len() as i64;
        ctx.notify(EventClass::List, "linsert", args[1]);
        ctx.propagate(args);
        ctx.out.integer(len);
    } else {
        ctx.out.integer(-1);
    }
    Action::None
}

fn lrem(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(count) = int_arg(ctx, args[2]) else {
        return Action::None;
    };
    let list = match ctx.write::<List>(args[1]) {
        Ok(Some(list)) => list,
        Ok(None) => {
            ctx.out.integer(0);
            return Action::None;
        }
        Err(_) => return Action::None,
    };
    let removed = list.remove(args[3], count);
    if removed > 0 {
        ctx.notify(EventClass::List, "lrem", args[1]);
        ctx.propagate(args);
        if ctx.remove_if_empty(args[1]) {
            ctx.notify(EventClass::Generic, "del", args[1]);
        }
    }
    ctx.out.integer(removed as i64);
    Action::None
}

fn ltrim(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(start) = int_arg(ctx, args[2]) else {
        return Action::None;
    };
    let Some(stop) = int_arg(ctx, args[3]) else {
        return Action::None;
    };
    let list = match ctx.write::<List>(args[1]) {
        Ok(Some(list)) => list,
        Ok(None) => {
            ctx.out.ok();
            return Action::None;
        }
        Err(_) => return Action::None,
    };
    let trimmed = list.trim(start, stop);
    // Redis notifies a trim that removed nothing too.
    ctx.notify(EventClass::List, "ltrim", args[1]);
    if trimmed > 0 {
        ctx.propagate(args);
        if ctx.remove_if_empty(args[1]) {
            ctx.notify(EventClass::Generic, "del", args[1]);
        }
    } else {
        // Nothing to log, but Redis signals the key anyway: a WATCH on it fails.
        ctx.signal_modified(args[1]);
    }
    ctx.out.ok();
    Action::None
}

fn lpos(ctx: &mut Ctx, args: &Args) -> Action {
    let mut rank = 1i64;
    let mut count: Option<i64> = None;
    let mut maxlen = 0i64;
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if eq_ignore_case(args[i], "rank") && has_value {
            let Some(n) = int_arg(ctx, args[i + 1]) else {
                return Action::None;
            };
            if n == 0 {
                ctx.out.error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
                return Action::None;
            }
            rank = n;
        } else if eq_ignore_case(args[i], "count") && has_value {
            // Redis gives the same error for a non-integer (getPositiveLong…OrReply).
            let Some(n) = crate::resp::parse_i64(args[i + 1]).filter(|n| *n >= 0) else {
                ctx.out.error("ERR COUNT can't be negative");
                return Action::None;
            };
            count = Some(n);
        } else if eq_ignore_case(args[i], "maxlen") && has_value {
            // Redis gives the same error for a non-integer (getPositiveLong…OrReply).
            let Some(n) = crate::resp::parse_i64(args[i + 1]).filter(|n| *n >= 0) else {
                ctx.out.error("ERR MAXLEN can't be negative");
                return Action::None;
            };
            maxlen = n;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
        i += 2;
    }
    let Ok(found) = ctx.read::<List>(args[1]) else {
        return Action::None;
    };
    // Redis negates RANK: LONG_MIN stays negative and matches the first hit from the tail.
    let rank = if rank == i64::MIN { -1 } else { rank };
    let positions = found.map_or_else(Vec::new, |list| {
        let wanted = count.map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX));
        list.positions(
            args[2],
            rank,
            wanted,
            usize::try_from(maxlen).unwrap_or(usize::MAX),
        )
    });
    match count {
        Some(_) => {
            ctx.out.array(positions.len());
            for p in positions {
                ctx.out.integer(p as i64);
            }
        }
        None => match positions.first() {
            Some(&p) => ctx.out.integer(p as i64),
            None => ctx.out.null(),
        },
    }
    Action::None
}

/// A move between lists, by the command that asked for it: the ends, and the form it is
/// logged and replicated in.
#[derive(Clone, Copy)]
pub(crate) enum Move {
    /// LMOVE and BLMOVE: `LMOVE src dst from to`.
    Lmove { from: End, to: End },
    /// RPOPLPUSH and BRPOPLPUSH: `RPOPLPUSH src dst` (right to left).
    Rpoplpush,
}

/// Moves one element from `src` to `dst` as `how` says, and logs it in its form; None if
/// `src` is absent or empty, Err after WRONGTYPE (either key; nothing changed then).
pub(crate) fn move_and_propagate(
    ctx: &mut Ctx,
    src: &[u8],
    dst: &[u8],
    how: Move,
) -> Result<Option<Vec<u8>>, super::AlreadyReplied> {
    let (from, to) = match how {
        Move::Lmove { from, to } => (from, to),
        Move::Rpoplpush => (End::Right, End::Left),
    };
    if ctx.read::<List>(src)?.is_none_or(|l| l.is_empty()) {
        return Ok(None);
    }
    ctx.check_type::<List>(dst)?;
    let value = ctx
        .write::<List>(src)?
        .and_then(|l| l.pop(from))
        .expect("checked non-empty");
    ctx.write_or_create::<List>(dst)?.push(to, &value);
    // Redis's order: the push to the destination, then the pop from the source.
    ctx.notify(EventClass::List, push_event(to), dst);
    ctx.notify(EventClass::List, pop_event(from), src);
    match how {
        Move::Lmove { .. } => ctx.propagate(&[b"LMOVE", src, dst, end_name(from), end_name(to)]),
        Move::Rpoplpush => ctx.propagate(&[b"RPOPLPUSH", src, dst]),
    }
    if ctx.remove_if_empty(src) {
        ctx.notify(EventClass::Generic, "del", src);
    }
    Ok(Some(value))
}

fn move_reply(ctx: &mut Ctx, src: &[u8], dst: &[u8], how: Move) {
    match move_and_propagate(ctx, src, dst, how) {
        Ok(Some(value)) => ctx.out.bulk(&value),
        Ok(None) => ctx.out.null(),
        Err(_) => {}
    }
}

fn lmove(ctx: &mut Ctx, args: &Args) -> Action {
    let (Some(from), Some(to)) = (parse_end(args[3]), parse_end(args[4])) else {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    };
    move_reply(ctx, args[1], args[2], Move::Lmove { from, to });
    Action::None
}

fn rpoplpush(ctx: &mut Ctx, args: &Args) -> Action {
    move_reply(ctx, args[1], args[2], Move::Rpoplpush);
    Action::None
}

/// LMPOP's parsed arguments: the keys, the end to pop from, COUNT if given.
pub(crate) type LmpopArgs<'a> = (Vec<&'a [u8]>, End, Option<usize>);

/// LMPOP's arguments after the command name (and BLMPOP's after the timeout):
/// `numkeys key... LEFT|RIGHT [COUNT n]` → (keys, end, count), or Err after replying.
pub(crate) fn parse_lmpop<'a>(
    ctx: &mut Ctx,
    args: &[&'a [u8]],
) -> Result<LmpopArgs<'a>, super::AlreadyReplied> {
    let numkeys = match crate::resp::parse_i64(args[0]) {
        Some(n) if n > 0 => n as usize,
        _ => {
            ctx.out.error("ERR numkeys should be greater than 0");
            return Err(super::AlreadyReplied);
        }
    };
    let Some(end) = args
        .get(numkeys.saturating_add(1))
        .and_then(|a| parse_end(a))
    else {
        ctx.out.error(SYNTAX_ERROR);
        return Err(super::AlreadyReplied);
    };
    let keys = args[1..1 + numkeys].to_vec();
    let mut count = None;
    let mut i = numkeys + 2;
    while i < args.len() {
        if count.is_none() && eq_ignore_case(args[i], "count") && i + 1 < args.len() {
            match crate::resp::parse_i64(args[i + 1]) {
                Some(n) if n > 0 => count = Some(n as usize),
                _ => {
                    ctx.out.error("ERR count should be greater than 0");
                    return Err(super::AlreadyReplied);
                }
            }
            i += 2;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Err(super::AlreadyReplied);
        }
    }
    Ok((keys, end, count))
}

fn lmpop(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok((keys, end, count)) = parse_lmpop(ctx, &args[1..]) else {
        return Action::None;
    };
    for key in keys {
        match ctx.read::<List>(key) {
            Err(_) => return Action::None,
            Ok(Some(list)) if !list.is_empty() => {
                let popped =
                    pop_and_propagate(ctx, key, end, Some(count.unwrap_or(1)), LoggedCount::Popped);
                ctx.out.array(2);
                ctx.out.bulk(key);
                ctx.out.bulk_strings(popped.iter());
                return Action::None;
            }
            Ok(_) => {}
        }
    }
    ctx.out.null_array();
    Action::None
}
