//! XADD, XTRIM, XDEL, XLEN, XRANGE, XREVRANGE and XSETID, with Redis 7.0's argument
//! order, errors and keyspace events (`xadd`, `xtrim`, `xdel`, `xsetid`).

use super::{id_text, interval_id, new_id, reply_entries, reply_id, strict_id};
use crate::commands::{
    Action, AlreadyReplied, Args, Ctx, EventClass, SYNTAX_ERROR, eq_ignore_case, int_arg,
    wrong_arity,
};
use crate::types::Stream;
use crate::types::stream::{AppendError, NODE_BYTES_MAX, NewId, Trim, TrimStrategy};
use crate::types::stream_id::{ParsedId, StreamId};

/// What XADD and XTRIM were asked (Redis's `streamAddTrimArgs`).
#[derive(Default)]
struct AddTrimArgs {
    trim: Option<Trim>,
    /// XADD only.
    no_make_stream: bool,
    /// XADD: where the ID is (or `*`); the fields follow it.
    id_at: usize,
    /// XADD: the ID given, if not `*`.
    id: Option<ParsedId>,
}

/// Parses XADD's (`xadd`) or XTRIM's options as Redis's `streamParseAddOrTrimArgsOrReply`
/// does, in its order of errors.
fn parse_add_or_trim(
    ctx: &mut Ctx,
    args: &Args,
    xadd: bool,
) -> Result<AddTrimArgs, AlreadyReplied> {
    let mut parsed = AddTrimArgs::default();
    let mut strategy: Option<TrimStrategy> = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let option = args[i];
        if xadd && option == b"*" {
            break;
        } else if (eq_ignore_case(option, "maxlen") || eq_ignore_case(option, "minid")) && more > 0
        {
            if strategy.is_some() {
                return Err(error(
                    ctx,
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            let next = args[i + 1];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let value = args[i + 1];
            strategy = Some(if eq_ignore_case(option, "maxlen") {
                let max = int_arg(ctx, value).ok_or(AlreadyReplied)?;
                if max < 0 {
                    return Err(error(ctx, "ERR The MAXLEN argument must be >= 0."));
                }
                TrimStrategy::MaxLen(max as u64)
            } else {
                TrimStrategy::MinId(strict_id(ctx, value, 0)?)
            });
            i += 1;
        } else if eq_ignore_case(option, "limit") && more > 0 {
            let value = int_arg(ctx, args[i + 1]).ok_or(AlreadyReplied)?;
            if value < 0 {
                return Err(error(ctx, "ERR The LIMIT argument must be >= 0."));
            }
            limit = Some(value);
            i += 1;
        } else if xadd && eq_ignore_case(option, "nomkstream") {
            parsed.no_make_stream = true;
        } else if xadd {
            // A syntax error or the ID.
            parsed.id = Some(new_id(ctx, option)?);
            break;
        } else {
            return Err(error(ctx, SYNTAX_ERROR));
        }
        i += 1;
    }
    parsed.id_at = i;
    if limit.is_some_and(|limit| limit != 0) && strategy.is_none() {
        return Err(error(
            ctx,
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && strategy.is_none() {
        return Err(error(
            ctx,
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    let limit = if ctx.loading {
        // The log's trims are exact (and a log from Redis had its own rewritten so).
        0
    } else {
        match limit {
            Some(_) if !approx => {
                return Err(error(
                    ctx,
                    "ERR syntax error, LIMIT cannot be used without the special ~ option",
                ));
            }
            Some(limit) => limit as u64,
            // At most 100 nodes' worth of work, bounded both ways.
            None if approx => {
                let nodes = crate::types::limits::stream_node_max_entries().saturating_mul(100);
                if nodes <= 0 {
                    10_000
                } else {
                    nodes.min(1_000_000) as u64
                }
            }
            None => 0,
        }
    };
    let Some(strategy) = strategy else {
        return Ok(parsed);
    };
    parsed.trim = Some(Trim {
        strategy,
        approx,
        limit,
    });
    Ok(parsed)
}

fn error(ctx: &mut Ctx, message: &str) -> AlreadyReplied {
    ctx.out.error(message);
    AlreadyReplied
}

/// Trims `key`'s stream as asked and returns how many entries went and the trim to log:
/// exact, to the first entry kept (`MINID = <id>`), or `MAXLEN = 0` if none is.
fn trim_and_describe(stream: &mut Stream, trim: &Trim) -> (u64, Vec<Vec<u8>>) {
    let removed = stream.trim(trim);
    let logged = match stream.first_id() {
        Some(first) => vec![b"MINID".to_vec(), b"=".to_vec(), id_text(first)],
        None => vec![b"MAXLEN".to_vec(), b"=".to_vec(), b"0".to_vec()],
    };
    (removed, logged)
}

pub(super) fn xadd(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(parsed) = parse_add_or_trim(ctx, args, true) else {
        return Action::None;
    };
    let fields_at = parsed.id_at + 1;
    let field_args = args.get(fields_at..).unwrap_or(&[]);
    if field_args.len() < 2 || field_args.len() % 2 == 1 {
        wrong_arity(ctx, "xadd");
        return Action::None;
    }
    if parsed.id == Some(ParsedId::Exact(StreamId::MIN)) {
        ctx.out
            .error("ERR The ID specified in XADD must be greater than 0-0");
        return Action::None;
    }
    let fields: Vec<(&[u8], &[u8])> = field_args
        .chunks_exact(2)
        .map(|pair| (pair[0], pair[1]))
        .collect();
    let key = args[1];
    // Checked before the key is made: Redis would leave an empty stream behind (unlogged)
    // when this fails on a new key; no argument of a request Tessera takes is that long.
    let entry_bytes: usize = field_args.iter().map(|arg| arg.len()).sum();
    if entry_bytes > NODE_BYTES_MAX {
        ctx.out.error("ERR Elements are too large to be stored");
        return Action::None;
    }
    let exists = match ctx.write::<Stream>(key) {
        Ok(stream) => stream.is_some(),
        Err(AlreadyReplied) => return Action::None,
    };
    if !exists && parsed.no_make_stream {
        ctx.out.null();
        return Action::None;
    }
    let now_ms = u64::try_from(ctx.now_ms).unwrap_or(0);
    let Ok(stream) = ctx.write_or_create::<Stream>(key) else {
        return Action::None;
    };
    if stream.last_id() == StreamId::MAX {
        ctx.out
            .error("ERR The stream has exhausted the last possible ID, unable to add more items");
        return Action::None;
    }
    let request = match parsed.id {
        None => NewId::Auto,
        Some(ParsedId::AutoSeq(ms)) => NewId::AutoSeq(ms),
        Some(ParsedId::Exact(id)) => NewId::Exact(id),
    };
    let added = stream
        .resolve_id(request, now_ms)
        .and_then(|id| stream.append(id, &fields).map(|()| id));
    let id = match added {
        Ok(id) => id,
        Err(AppendError::IdNotGreater) => {
            ctx.out.error(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            );
            return Action::None;
        }
        Err(AppendError::TooLarge | AppendError::SequenceExhausted) => {
            ctx.out.error("ERR Elements are too large to be stored");
            return Action::None;
        }
    };
    let trimmed = parsed
        .trim
        .as_ref()
        .map(|trim| trim_and_describe(stream, trim));
    reply_id(ctx, id);
    ctx.notify(EventClass::Stream, "xadd", key);
    let mut logged: Vec<Vec<u8>> = Vec::new();
    if let Some((removed, trim_args)) = trimmed
        && removed > 0
    {
        ctx.notify(EventClass::Stream, "xtrim", key);
        logged = trim_args;
    }
    let id_arg = id_text(id);
    let mut record: Vec<&[u8]> = Vec::with_capacity(field_args.len() + 6);
    record.push(b"XADD");
    record.push(key);
    record.extend(logged.iter().map(Vec::as_slice));
    record.push(&id_arg);
    record.extend(field_args.iter().copied());
    ctx.propagate(&record);
    Action::None
}

pub(super) fn xtrim(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(parsed) = parse_add_or_trim(ctx, args, false) else {
        return Action::None;
    };
    let trim = parsed.trim.expect("XTRIM's parse insists on a strategy");
    let key = args[1];
    let stream = match ctx.write::<Stream>(key) {
        Ok(Some(stream)) => stream,
        Ok(None) => {
            ctx.out.integer(0);
            return Action::None;
        }
        Err(AlreadyReplied) => return Action::None,
    };
    let (removed, trim_args) = trim_and_describe(stream, &trim);
    if removed > 0 {
        ctx.notify(EventClass::Stream, "xtrim", key);
        let mut record: Vec<&[u8]> = vec![b"XTRIM", key];
        record.extend(trim_args.iter().map(Vec::as_slice));
        ctx.propagate(&record);
    }
    ctx.out.integer(removed as i64);
    Action::None
}

pub(super) fn xdel(ctx: &mut Ctx, args: &Args) -> Action {
    let key = args[1];
    // The key first: a missing one answers 0 whatever the IDs say (Redis's order).
    match ctx.write::<Stream>(key) {
        Ok(Some(_)) => {}
        Ok(None) => {
            ctx.out.integer(0);
            return Action::None;
        }
        Err(AlreadyReplied) => return Action::None,
    }
    let mut ids = Vec::with_capacity(args.len() - 2);
    for arg in &args[2..] {
        let Ok(id) = strict_id(ctx, arg, 0) else {
            return Action::None;
        };
        ids.push(id);
    }
    let Ok(Some(stream)) = ctx.write::<Stream>(key) else {
        unreachable!("a stream, looked up above");
    };
    let deleted = ids.iter().filter(|&&id| stream.delete(id)).count();
    if deleted > 0 {
        ctx.notify(EventClass::Stream, "xdel", key);
        ctx.propagate(args);
    }
    ctx.out.integer(deleted as i64);
    Action::None
}

pub(super) fn xlen(ctx: &mut Ctx, args: &Args) -> Action {
    match ctx.read::<Stream>(args[1]) {
        Ok(Some(stream)) => {
            let len = stream.len() as i64;
            ctx.out.integer(len);
        }
        Ok(None) => ctx.out.integer(0),
        Err(AlreadyReplied) => {}
    }
    Action::None
}

pub(super) fn xrange(ctx: &mut Ctx, args: &Args) -> Action {
    range(ctx, args, false)
}

pub(super) fn xrevrange(ctx: &mut Ctx, args: &Args) -> Action {
    range(ctx, args, true)
}

/// XRANGE and XREVRANGE (`xrangeGenericCommand`): the interval, then COUNT, then the key.
fn range(ctx: &mut Ctx, args: &Args, reverse: bool) -> Action {
    let (start_arg, end_arg) = if reverse {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let Ok((mut start, start_exclusive)) = interval_id(ctx, start_arg, 0) else {
        return Action::None;
    };
    if start_exclusive {
        let Some(next) = start.next() else {
            ctx.out.error("ERR invalid start ID for the interval");
            return Action::None;
        };
        start = next;
    }
    let Ok((mut end, end_exclusive)) = interval_id(ctx, end_arg, u64::MAX) else {
        return Action::None;
    };
    if end_exclusive {
        let Some(previous) = end.prev() else {
            ctx.out.error("ERR invalid end ID for the interval");
            return Action::None;
        };
        end = previous;
    }
    let mut count: Option<u64> = None;
    let mut i = 4;
    while i < args.len() {
        if eq_ignore_case(args[i], "count") && i + 1 < args.len() {
            let Some(n) = int_arg(ctx, args[i + 1]) else {
                return Action::None;
            };
            count = Some(n.max(0) as u64);
            i += 2;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    }
    let entries = match ctx.read::<Stream>(args[1]) {
        Ok(Some(stream)) => {
            if count == Some(0) {
                None
            } else {
                let take = count.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
                Some(
                    stream
                        .range(start, end, reverse)
                        .take(take)
                        .collect::<Vec<_>>(),
                )
            }
        }
        Ok(None) => Some(Vec::new()),
        Err(AlreadyReplied) => return Action::None,
    };
    match entries {
        // Redis answers COUNT 0 so, on an existing stream.
        None => ctx.out.null_array(),
        Some(entries) => reply_entries(ctx, &entries),
    }
    Action::None
}

pub(super) fn xsetid(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(id) = strict_id(ctx, args[2], 0) else {
        return Action::None;
    };
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ignore_case(args[i], "entriesadded") && more > 0 {
            let Some(n) = int_arg(ctx, args[i + 1]) else {
                return Action::None;
            };
            if n < 0 {
                ctx.out.error("ERR entries_added must be positive");
                return Action::None;
            }
            entries_added = Some(n as u64);
        } else if eq_ignore_case(args[i], "maxdeletedid") && more > 0 {
            let Ok(given) = strict_id(ctx, args[i + 1], 0) else {
                return Action::None;
            };
            if id < given {
                ctx.out.error(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                );
                return Action::None;
            }
            max_deleted = given;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
        i += 2;
    }
    let key = args[1];
    let stream = match ctx.write::<Stream>(key) {
        Ok(Some(stream)) => stream,
        Ok(None) => {
            ctx.out.error("ERR no such key");
            return Action::None;
        }
        Err(AlreadyReplied) => return Action::None,
    };
    if !stream.is_empty() {
        if stream.last_entry_id().is_some_and(|top| id < top) {
            ctx.out
                .error("ERR The ID specified in XSETID is smaller than the target stream top item");
            return Action::None;
        }
        if entries_added.is_some_and(|added| added < stream.len()) {
            ctx.out.error(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
            return Action::None;
        }
    }
    stream.set_last_id(id);
    if let Some(added) = entries_added {
        stream.set_entries_added(added);
    }
    if max_deleted != StreamId::MIN {
        stream.set_max_deleted_id(max_deleted);
    }
    ctx.out.ok();
    ctx.notify(EventClass::Stream, "xsetid", key);
    // Redis's XSETID calls no `signalModifiedKey`: WATCH, tracking and blocked readers
    // are not told.
    ctx.propagate_unsignalled(args);
    Action::None
}
