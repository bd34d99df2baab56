//! XREADGROUP (Redis 7.0's `xreadCommand` in its group form, and the serving of its
//! blocked clients, `serveClientsBlockedOnStreamKey`).
//!
//! `>` reads entries past the group's position, moves it, and (without NOACK) puts each
//! entry in the PEL as the consumer's; any other ID reads the consumer's own PEL from
//! there (its history), delivering each entry again. A `>` read that finds nothing new
//! blocks with BLOCK; the blocked client runs again when its stream is written to and
//! is served if the stream's last ID is past the group's position then.

use super::{ClaimRecord, INVALID_ID, c_text, id_arg, position, reply_entry, reply_id};
use crate::commands::blocking::{BlockMode, Blocked};
use crate::commands::{Action, Args, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR, eq_ignore_case};
use crate::keyspace::Value;
use crate::types::Stream;
use crate::types::stream::StreamEntry;
use crate::types::stream_id::StreamId;
use bytes::Bytes;

/// A blocked read served with no COUNT takes at most this many entries (Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`): a low ID must not make one reply huge.
const BLOCKED_COUNT_DEFAULT: usize = 1000;

/// `>`: Redis marks it with the greatest ID, which an explicit ID of that value means too.
const NEW_ENTRIES: StreamId = StreamId::MAX;

struct Request<'a> {
    /// BLOCK: None without it; Some(None) to wait forever; else the deadline (Unix ms).
    block: Option<Option<i64>>,
    /// COUNT: 0 for no limit.
    count: usize,
    noack: bool,
    group: &'a [u8],
    consumer: &'a [u8],
    keys: &'a [&'a [u8]],
    ids: &'a [&'a [u8]],
}

/// The options, in Redis's order of checks; None after replying an error.
fn parse<'a>(ctx: &mut Ctx, args: &'a Args<'a>) -> Option<Request<'a>> {
    let mut block = None;
    let mut count = 0;
    let mut noack = false;
    let mut group = None;
    let mut streams_at = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let option = args[i];
        if eq_ignore_case(option, "block") && more > 0 {
            if crate::commands::streams::refuse_block_in_script(ctx, args[0]) {
                return None;
            }
            i += 1;
            block = Some(timeout_ms(ctx, args[i])?);
        } else if eq_ignore_case(option, "count") && more > 0 {
            i += 1;
            let Some(value) = crate::resp::parse_i64(args[i]) else {
                ctx.out.error(NOT_INTEGER);
                return None;
            };
            count = usize::try_from(value.max(0)).unwrap_or(usize::MAX);
        } else if eq_ignore_case(option, "streams") && more > 0 {
            if !(args.len() - (i + 1)).is_multiple_of(2) {
                ctx.out.error(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' \
                     must be specified.",
                );
                return None;
            }
            streams_at = Some(i + 1);
            break;
        } else if eq_ignore_case(option, "group") && more >= 2 {
            group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if eq_ignore_case(option, "noack") {
            noack = true;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        i += 1;
    }
    let Some(streams_at) = streams_at else {
        ctx.out.error(SYNTAX_ERROR);
        return None;
    };
    let Some((group, consumer)) = group else {
        ctx.out.error("ERR Missing GROUP option for XREADGROUP");
        return None;
    };
    let streams = &args[streams_at..];
    let (keys, ids) = streams.split_at(streams.len() / 2);
    Some(Request {
        block,
        count,
        noack,
        group,
        consumer,
        keys,
        ids,
    })
}

/// BLOCK's milliseconds (`getTimeoutFromObjectOrReply` in milliseconds): Some(None) for
/// 0, forever; None after replying an error.
fn timeout_ms(ctx: &mut Ctx, arg: &[u8]) -> Option<Option<i64>> {
    let Some(ms) = crate::resp::parse_i64(arg) else {
        ctx.out
            .error("ERR timeout is not an integer or out of range");
        return None;
    };
    if ms < 0 {
        ctx.out.error("ERR timeout is negative");
        return None;
    }
    if ms == 0 {
        return Some(None);
    }
    // A deadline past the end of time waits forever.
    Some(ctx.now_ms.checked_add(ms))
}

pub(super) fn xreadgroup(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(request) = parse(ctx, args) else {
        return Action::None;
    };
    if let BlockMode::Serving(ready) = &ctx.block_mode {
        let ready = ready.clone();
        return serve_blocked(ctx, args, &request, &ready);
    }

    // Each stream's key, group and ID, in order; the IDs resolved (`>` as NEW_ENTRIES).
    let mut targets = Vec::with_capacity(request.keys.len());
    for (key, id) in request.keys.iter().zip(request.ids) {
        let Ok(has_group) = ctx.reading(|ctx| {
            ctx.read::<Stream>(key)
                .map(|stream| stream.is_some_and(|s| s.groups.get(request.group).is_some()))
        }) else {
            return Action::None;
        };
        if !has_group {
            ctx.out.error(&format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                c_text(key),
                c_text(request.group)
            ));
            return Action::None;
        }
        let target = match *id {
            b"$" => {
                ctx.out.error(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to \
                     read the history of this consumer by specifying a proper ID, or use the \
                     > ID to get new messages. The $ ID would just return an empty result \
                     set.",
                );
                return Action::None;
            }
            b">" => NEW_ENTRIES,
            _ => match id_arg(id, 0, true) {
                Some(id) => id,
                None => {
                    ctx.out.error(INVALID_ID);
                    return Action::None;
                }
            },
        };
        targets.push(target);
    }

    let mut served: Vec<(&[u8], Vec<Delivered>)> = Vec::new();
    for (key, target) in request.keys.iter().zip(targets) {
        // Redis looks each stream up again to serve it.
        let start = ctx.reading(|ctx| match ctx.read::<Stream>(key) {
            Ok(Some(stream)) => start_of(stream, request.group, target),
            _ => None,
        });
        let Some(start) = start else { continue };
        let delivered = if target == NEW_ENTRIES {
            read_new(ctx, key, &request, start, request.count)
        } else {
            read_history(ctx, key, &request, start)
        };
        served.push((key, delivered));
    }

    if served.is_empty() {
        return match request.block {
            Some(deadline_ms) if ctx.block_mode == BlockMode::Normal => Action::Block(Blocked {
                db: ctx.client.db,
                keys: request
                    .keys
                    .iter()
                    .map(|k| Bytes::copy_from_slice(k))
                    .collect(),
                deadline_ms,
                command: args.iter().map(|a| a.to_vec()).collect(),
                replicas: None,
            }),
            // No BLOCK, or inside EXEC (where a blocking read answers as a timeout).
            _ => {
                ctx.out.null_array();
                Action::None
            }
        };
    }
    reply_streams(ctx, &served);
    Action::None
}

/// Where a read of `target` starts, or None if there is nothing to serve now: a history
/// read is always served (from the ID after `target`), a `>` read only if a live entry
/// lies past the group's position.
fn start_of(stream: &Stream, group: &[u8], target: StreamId) -> Option<StreamId> {
    let group = stream.groups.get(group)?;
    if target != NEW_ENTRIES {
        // Only the greatest ID has no successor, and that is NEW_ENTRIES.
        return target.next();
    }
    let last_live = stream.range(StreamId::MIN, StreamId::MAX, true).next()?;
    (last_live.id > group.last_id()).then(|| group.last_id().next())?
}

/// A client blocked on `>` reads, as the key it waits on was written to.
fn serve_blocked(ctx: &mut Ctx, args: &Args, request: &Request, ready: &[u8]) -> Action {
    let Some(key) = request.keys.iter().copied().find(|key| *key == ready) else {
        return stay_blocked(ctx, args, request);
    };
    // No keyspace statistics: Redis looks it up with LOOKUP_NOSTATS.
    let state = match ctx.lookup(key).map(|entry| &entry.value) {
        Some(Value::Stream(stream, _)) => stream
            .groups
            .get(request.group)
            .map(|group| (stream.last_id() > group.last_id()).then(|| group.last_id().next())),
        _ => {
            ctx.out.error("UNBLOCKED the stream key no longer exists");
            return Action::None;
        }
    };
    let Some(start) = state else {
        ctx.out
            .error("NOGROUP the consumer group this client was blocked on no longer exists");
        return Action::None;
    };
    let Some(Some(start)) = start else {
        return stay_blocked(ctx, args, request);
    };
    let count = match request.count {
        0 => BLOCKED_COUNT_DEFAULT,
        count => count,
    };
    let delivered = read_new(ctx, key, request, start, count);
    reply_streams(ctx, &[(key, delivered)]);
    Action::None
}

fn stay_blocked(ctx: &mut Ctx, args: &Args, request: &Request) -> Action {
    // The server keeps the client's first deadline; this one is not looked at.
    Action::Block(Blocked {
        db: ctx.client.db,
        keys: request
            .keys
            .iter()
            .map(|k| Bytes::copy_from_slice(k))
            .collect(),
        deadline_ms: None,
        command: args.iter().map(|a| a.to_vec()).collect(),
        replicas: None,
    })
}

/// What a read replies for one entry.
enum Delivered {
    Entry(StreamEntry),
    /// A history entry whose ID is pending but no longer in the stream.
    Gone(StreamId),
}

/// Reads entries from `start` on past the group's position for `request`'s consumer: the
/// group moves, the consumer is seen (created if new), each entry (without NOACK) enters
/// the PEL as the consumer's. Logs it all (see the module's header).
fn read_new(
    ctx: &mut Ctx,
    key: &[u8],
    request: &Request,
    start: StreamId,
    count: usize,
) -> Vec<Delivered> {
    let now = ctx.now_ms;
    let stream = write_stream(ctx, key);
    let limit = if count == 0 { usize::MAX } else { count };
    let entries: Vec<StreamEntry> = stream
        .range(start, StreamId::MAX, false)
        .take(limit)
        .collect();
    let counters = position(stream);
    let group = stream
        .groups
        .get_mut(request.group)
        .expect("the group was checked");
    let created = group.see_consumer(request.consumer, now);
    let mut moved = false;
    let mut records = Vec::new();
    for entry in &entries {
        moved |= group.advance(entry.id, &counters);
        if !request.noack {
            group.deliver(entry.id, request.consumer, now);
            records.push(ClaimRecord {
                consumer: request.consumer.to_vec(),
                id: entry.id,
                delivery_time_ms: now,
                delivery_count: 1,
                last_id: group.last_id(),
            });
        }
    }
    let position_now = (group.last_id(), group.entries_read());

    if created {
        // An XCLAIM creates its consumer where it is replayed: Redis logs the creation
        // only when none follows (NOACK), and so does Tessera — and also when the read
        // delivered nothing, so that the log replays to the consumer the dataset holds.
        if records.is_empty() {
            super::propagate_consumer(ctx, key, request.group, request.consumer);
        }
        ctx.notify(EventClass::Stream, "xgroup-createconsumer", key);
    }
    for record in &records {
        super::propagate_claim(ctx, key, request.group, record);
    }
    if moved {
        let (last_id, entries_read) = position_now;
        super::propagate_position(ctx, key, request.group, last_id, entries_read);
    }
    entries.into_iter().map(Delivered::Entry).collect()
}

/// Reads the consumer's own PEL from `start` on: each entry still in the stream is
/// delivered again (one more delivery, now), one no longer there comes back as its ID
/// with no fields.
fn read_history(ctx: &mut Ctx, key: &[u8], request: &Request, start: StreamId) -> Vec<Delivered> {
    let now = ctx.now_ms;
    let stream = write_stream(ctx, key);
    let limit = if request.count == 0 {
        usize::MAX
    } else {
        request.count
    };
    let group = stream
        .groups
        .get(request.group)
        .expect("the group was checked");
    let ids: Vec<StreamId> = group
        .consumer(request.consumer)
        .map(|consumer| {
            consumer
                .pending()
                .range(start..)
                .take(limit)
                .copied()
                .collect()
        })
        .unwrap_or_default();
    let found: Vec<(StreamId, Option<StreamEntry>)> =
        ids.into_iter().map(|id| (id, stream.get(id))).collect();
    let group = stream
        .groups
        .get_mut(request.group)
        .expect("the group was checked");
    let created = group.see_consumer(request.consumer, now);
    let mut records = Vec::new();
    let mut delivered = Vec::with_capacity(found.len());
    for (id, entry) in found {
        match entry {
            Some(entry) => {
                group.redeliver(id, now);
                let pending = group.pending_entry(id).expect("the consumer's own");
                records.push(ClaimRecord::of(id, pending, group.last_id()));
                delivered.push(Delivered::Entry(entry));
            }
            None => delivered.push(Delivered::Gone(id)),
        }
    }
    if created {
        super::propagate_consumer(ctx, key, request.group, request.consumer);
        ctx.notify(EventClass::Stream, "xgroup-createconsumer", key);
    }
    for record in &records {
        super::propagate_claim(ctx, key, request.group, record);
    }
    delivered
}

/// The reply of a read that served these streams: per stream its key and its entries (a
/// map in RESP3).
fn reply_streams(ctx: &mut Ctx, served: &[(&[u8], Vec<Delivered>)]) {
    crate::commands::streams::reply_per_stream(ctx, served, |ctx, delivered| {
        ctx.out.array(delivered.len());
        for item in delivered {
            match item {
                Delivered::Entry(entry) => reply_entry(ctx, entry),
                Delivered::Gone(id) => {
                    ctx.out.array(2);
                    reply_id(ctx, *id);
                    ctx.out.null_array();
                }
            }
        }
    });
}

/// The stream at `key`, known to be there, for changing.
fn write_stream<'c>(ctx: &'c mut Ctx, key: &[u8]) -> &'c mut Stream {
    ctx.write::<Stream>(key)
        .ok()
        .flatten()
        .expect("checked to be a stream")
}
