//! XREAD, as Redis 7.0's `xreadCommand` reads its arguments and answers, and its
//! blocking form.
//!
//! A read that finds nothing newer than the IDs asked for, with BLOCK, parks the client
//! (`commands::blocking`) with its command rewritten: each `$` replaced by the ID it
//! stood for when the client blocked, so that running it again later asks the same. When
//! a key it waits on changes, the command runs again in `BlockMode::Serving(key)`: only
//! that key is looked at; if its stream's last ID is now above the one asked for, the
//! client gets that stream's new entries (as Redis's `serveClientsBlockedOnStreamKey`,
//! even when they were deleted meanwhile and the list is empty), else it stays parked.
//! Inside MULTI BLOCK does not block (a null reply, as a timeout); a script may not use
//! BLOCK at all (Redis's error).

use super::{reply_entries, strict_id};
use crate::commands::blocking::{BlockMode, Blocked};
use crate::commands::{Action, Args, Ctx, SYNTAX_ERROR, eq_ignore_case, int_arg};
use crate::keyspace::Value;
use crate::types::Stream;
use crate::types::stream::StreamEntry;
use crate::types::stream_id::StreamId;
use bytes::Bytes;

/// XREAD's options.
struct ReadArgs {
    /// BLOCK's milliseconds (0: forever); None without BLOCK.
    block_ms: Option<i64>,
    /// COUNT (0: no limit).
    count: usize,
    /// Where the keys start; as many IDs follow them.
    keys_at: usize,
    streams: usize,
}

fn parse(ctx: &mut Ctx, args: &Args) -> Option<ReadArgs> {
    let mut block_ms = None;
    let mut count = 0usize;
    let mut keys_at = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let option = args[i];
        if eq_ignore_case(option, "block") && more > 0 {
            if super::refuse_block_in_script(ctx, args[0]) {
                return None;
            }
            i += 1;
            let Some(ms) = crate::resp::parse_i64(args[i]) else {
                ctx.out
                    .error("ERR timeout is not an integer or out of range");
                return None;
            };
            if ms < 0 {
                ctx.out.error("ERR timeout is negative");
                return None;
            }
            block_ms = Some(ms);
        } else if eq_ignore_case(option, "count") && more > 0 {
            i += 1;
            let n = int_arg(ctx, args[i])?;
            count = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
        } else if eq_ignore_case(option, "streams") && more > 0 {
            let rest = args.len() - (i + 1);
            if !rest.is_multiple_of(2) {
                ctx.out.error(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                );
                return None;
            }
            keys_at = Some(i + 1);
            break;
        } else if eq_ignore_case(option, "group") && more >= 2 {
            ctx.out.error(
                "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
            );
            return None;
        } else if eq_ignore_case(option, "noack") {
            ctx.out.error(
                "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
            );
            return None;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        i += 1;
    }
    let Some(keys_at) = keys_at else {
        ctx.out.error(SYNTAX_ERROR);
        return None;
    };
    Some(ReadArgs {
        block_ms,
        count,
        keys_at,
        streams: (args.len() - keys_at) / 2,
    })
}

/// The stream at `key` (a read lookup, as each of Redis's): Ok(None) if absent, Err for
/// another type.
fn stream_at<'c>(ctx: &'c mut Ctx, key: &[u8]) -> Result<Option<&'c Stream>, ()> {
    match ctx.lookup_read(key).map(|entry| &entry.value) {
        None => Ok(None),
        Some(Value::Stream(stream, _)) => Ok(Some(stream)),
        Some(_) => Err(()),
    }
}

/// The entries after `after`, at most `count` (0: all).
fn entries_after(stream: &Stream, after: StreamId, count: usize) -> Vec<StreamEntry> {
    let Some(start) = after.next() else {
        return Vec::new();
    };
    let take = if count == 0 { usize::MAX } else { count };
    stream
        .range(start, StreamId::MAX, false)
        .take(take)
        .collect()
}

/// The reply: for each stream served, its key and its entries (a map in RESP3).
fn reply(ctx: &mut Ctx, served: &[(&[u8], Vec<StreamEntry>)]) {
    super::reply_per_stream(ctx, served, |ctx, entries| reply_entries(ctx, entries));
}

pub(super) fn xread(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(parsed) = parse(ctx, args) else {
        return Action::None;
    };
    let keys = &args[parsed.keys_at..parsed.keys_at + parsed.streams];
    let id_args = &args[parsed.keys_at + parsed.streams..];
    if let BlockMode::Serving(ready) = &ctx.block_mode {
        let ready = ready.clone();
        return serve(ctx, args, &parsed, &ready);
    }
    // Each key's type and the ID asked for, in Redis's order: a key's WRONGTYPE comes
    // before its ID's error.
    let mut after = Vec::with_capacity(parsed.streams);
    for (key, id_arg) in keys.iter().zip(id_args) {
        let last_id = match stream_at(ctx, key) {
            Ok(stream) => stream.map(|stream| stream.last_id()),
            Err(()) => {
                ctx.wrong_type();
                return Action::None;
            }
        };
        let id = match *id_arg {
            b"$" => last_id.unwrap_or(StreamId::MIN),
            b">" => {
                ctx.out.error(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                );
                return Action::None;
            }
            _ => match strict_id(ctx, id_arg, 0) {
                Ok(id) => id,
                Err(_) => return Action::None,
            },
        };
        after.push(id);
    }
    let mut served: Vec<(&[u8], Vec<StreamEntry>)> = Vec::new();
    for (key, &id) in keys.iter().zip(&after) {
        let Ok(Some(stream)) = stream_at(ctx, key) else {
            continue;
        };
        // Served at once only if an entry is there to give (the last ID may be above
        // every entry: deleted ones, XSETID).
        if stream.last_entry_id().is_some_and(|last| last > id) {
            served.push((key, entries_after(stream, id, parsed.count)));
        }
    }
    if !served.is_empty() {
        reply(ctx, &served);
        return Action::None;
    }
    let Some(block_ms) = parsed.block_ms else {
        ctx.out.null_array();
        return Action::None;
    };
    if ctx.block_mode == BlockMode::Never {
        ctx.out.null_array();
        return Action::None;
    }
    // Parked with the IDs it stands for now (`$` resolved).
    let mut command: Vec<Vec<u8>> = args.iter().map(|arg| arg.to_vec()).collect();
    let ids_at = parsed.keys_at + parsed.streams;
    for (index, id) in after.iter().enumerate() {
        command[ids_at + index] = super::id_text(*id);
    }
    Action::Block(Blocked {
        db: ctx.client.db,
        keys: keys.iter().map(|key| Bytes::copy_from_slice(key)).collect(),
        deadline_ms: deadline(ctx.now_ms, block_ms),
        command,
        replicas: None,
    })
}

/// BLOCK's deadline: None for 0 (forever) and for one past the end of time.
fn deadline(now_ms: i64, block_ms: i64) -> Option<i64> {
    if block_ms == 0 {
        return None;
    }
    now_ms.checked_add(block_ms)
}

/// A parked XREAD run again because `ready` changed: the command's IDs are explicit now.
fn serve(ctx: &mut Ctx, args: &Args, parsed: &ReadArgs, ready: &[u8]) -> Action {
    let keys = &args[parsed.keys_at..parsed.keys_at + parsed.streams];
    let id_args = &args[parsed.keys_at + parsed.streams..];
    let Some((key, id_arg)) = keys.iter().zip(id_args).find(|(key, _)| **key == ready) else {
        return stay_blocked(ctx, args, keys, parsed);
    };
    let Some(after) = StreamId::parse_exact(id_arg, Some(0)) else {
        return stay_blocked(ctx, args, keys, parsed);
    };
    let entries = match stream_at(ctx, key) {
        Ok(Some(stream)) if stream.last_id() > after => entries_after(stream, after, parsed.count),
        _ => return stay_blocked(ctx, args, keys, parsed),
    };
    reply(ctx, &[(key, entries)]);
    Action::None
}

fn stay_blocked(ctx: &mut Ctx, args: &Args, keys: &Args, parsed: &ReadArgs) -> Action {
    Action::Block(Blocked {
        db: ctx.client.db,
        keys: keys.iter().map(|key| Bytes::copy_from_slice(key)).collect(),
        deadline_ms: deadline(ctx.now_ms, parsed.block_ms.unwrap_or(0)),
        command: args.iter().map(|arg| arg.to_vec()).collect(),
        replicas: None,
    })
}

/// XREAD's and XREADGROUP's keys (Redis's `xreadGetKeys`): those after the first STREAMS
/// that follows the options, half of what is left; none when that does not add up.
pub(crate) fn key_positions(argv: &[&[u8]]) -> Vec<usize> {
    let mut streams_at = None;
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i];
        if eq_ignore_case(arg, "block") || eq_ignore_case(arg, "count") {
            i += 1;
        } else if eq_ignore_case(arg, "group") {
            i += 2;
        } else if eq_ignore_case(arg, "noack") {
        } else if eq_ignore_case(arg, "streams") {
            streams_at = Some(i);
            break;
        } else {
            break;
        }
        i += 1;
    }
    let Some(streams_at) = streams_at else {
        return Vec::new();
    };
    let rest = argv.len() - streams_at - 1;
    if rest == 0 || !rest.is_multiple_of(2) {
        return Vec::new();
    }
    (streams_at + 1..streams_at + 1 + rest / 2).collect()
}
