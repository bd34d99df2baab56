//! XACK and XPENDING: acknowledging PEL entries, and the PEL's summary or its entries
//! (Redis 7.0's `xackCommand`, `xpendingCommand`).

use super::{INVALID_ID, c_text, id_arg, idle_since, interval_arg, reply_id};
use crate::commands::{Action, Args, Ctx, NOT_INTEGER, SYNTAX_ERROR, eq_ignore_case};
use crate::types::Stream;
use crate::types::stream_id::StreamId;

/// XACK key group id [id ...]: how many of the IDs were pending. No key or group is 0,
/// before the IDs are even looked at; a bad ID fails the whole command.
pub(super) fn xack(ctx: &mut Ctx, args: &Args) -> Action {
    let (key, name) = (args[1], args[2]);
    let Ok(has_group) = ctx.reading(|ctx| {
        ctx.read::<Stream>(key)
            .map(|stream| stream.is_some_and(|s| s.groups.get(name).is_some()))
    }) else {
        return Action::None;
    };
    if !has_group {
        ctx.out.integer(0);
        return Action::None;
    }
    let mut ids = Vec::with_capacity(args.len() - 3);
    for arg in &args[3..] {
        match id_arg(arg, 0, true) {
            Some(id) => ids.push(id),
            None => {
                ctx.out.error(INVALID_ID);
                return Action::None;
            }
        }
    }
    let group = ctx
        .write::<Stream>(key)
        .ok()
        .flatten()
        .and_then(|stream| stream.groups.get_mut(name))
        .expect("checked above");
    let mut acknowledged: Vec<StreamId> = Vec::new();
    for id in ids {
        if group.remove_pending(id).is_some() {
            acknowledged.push(id);
        }
    }
    ctx.out.integer(acknowledged.len() as i64);
    if !acknowledged.is_empty() {
        let ids: Vec<Vec<u8>> = acknowledged.into_iter().map(super::id_text).collect();
        let mut record: Vec<&[u8]> = vec![b"XACK", key, name];
        record.extend(ids.iter().map(Vec::as_slice));
        ctx.propagate_unsignalled(&record);
    }
    Action::None
}

/// What XPENDING's extended form asks for.
struct Extended<'a> {
    min_idle_ms: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a [u8]>,
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]].
pub(super) fn xpending(ctx: &mut Ctx, args: &Args) -> Action {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    // The range's arguments are checked before the key.
    let extended = if argc >= 6 {
        match parse_extended(ctx, args) {
            Some(extended) => Some(extended),
            None => return Action::None,
        }
    } else {
        None
    };
    let (key, name) = (args[1], args[2]);
    let now = ctx.now_ms;
    let stream = match ctx.read::<Stream>(key) {
        Err(_) => return Action::None,
        Ok(stream) => stream,
    };
    let Some(group) = stream.and_then(|stream| stream.groups.get(name)) else {
        ctx.out.error(&format!(
            "NOGROUP No such key '{}' or consumer group '{}'",
            c_text(key),
            c_text(name)
        ));
        return Action::None;
    };
    match extended {
        None => {
            // The summary: count, first and last IDs, and each consumer with entries.
            let pending = group.pending();
            let first_last = pending
                .first_key_value()
                .zip(pending.last_key_value())
                .map(|((first, _), (last, _))| (*first, *last));
            let owners: Vec<(Vec<u8>, usize)> = group
                .consumers()
                .filter(|(_, consumer)| !consumer.pending().is_empty())
                .map(|(name, consumer)| (name.to_vec(), consumer.pending().len()))
                .collect();
            let total = pending.len();
            ctx.out.array(4);
            ctx.out.integer(total as i64);
            match first_last {
                None => {
                    ctx.out.null();
                    ctx.out.null();
                    ctx.out.null_array();
                }
                Some((first, last)) => {
                    reply_id(ctx, first);
                    reply_id(ctx, last);
                    ctx.out.array(owners.len());
                    for (name, count) in owners {
                        ctx.out.array(2);
                        ctx.out.bulk(&name);
                        ctx.out.bulk(count.to_string().as_bytes());
                    }
                }
            }
        }
        Some(extended) => {
            // Entries from the group's PEL, or from the consumer's (none if unknown).
            let ids: Box<dyn Iterator<Item = StreamId>> = match extended.consumer {
                Some(consumer) => match group.consumer(consumer) {
                    Some(consumer) => Box::new(consumer.pending().range(extended.start..).copied()),
                    None => Box::new(std::iter::empty()),
                },
                None => Box::new(group.pending().range(extended.start..).map(|(id, _)| *id)),
            };
            let mut rows = Vec::new();
            for id in ids {
                if rows.len() >= extended.count || id > extended.end {
                    break;
                }
                let entry = group
                    .pending_entry(id)
                    .expect("a consumer's IDs are pending");
                let idle = now.saturating_sub(entry.delivery_time_ms());
                if extended.min_idle_ms != 0 && idle < extended.min_idle_ms {
                    continue;
                }
                rows.push((
                    id,
                    entry.owner().to_vec(),
                    idle_since(now, entry.delivery_time_ms()),
                    entry.delivery_count(),
                ));
            }
            ctx.out.array(rows.len());
            for (id, owner, idle, count) in rows {
                ctx.out.array(4);
                reply_id(ctx, id);
                ctx.out.bulk(&owner);
                ctx.out.integer(idle);
                ctx.out.integer(count as i64);
            }
        }
    }
    Action::None
}

/// The extended form's arguments, in Redis's order: IDLE, count, start, end, consumer.
fn parse_extended<'a>(ctx: &mut Ctx, args: &'a Args<'a>) -> Option<Extended<'a>> {
    let mut at = 3;
    let mut min_idle_ms = 0;
    if eq_ignore_case(args[3], "idle") {
        let Some(idle) = crate::resp::parse_i64(args[4]) else {
            ctx.out.error(NOT_INTEGER);
            return None;
        };
        if args.len() < 8 {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        min_idle_ms = idle;
        at += 2;
    }
    let Some(count) = crate::resp::parse_i64(args[at + 2]) else {
        ctx.out.error(NOT_INTEGER);
        return None;
    };
    let count = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
    let Some((mut start, exclusive)) = interval_arg(args[at], 0) else {
        ctx.out.error(INVALID_ID);
        return None;
    };
    if exclusive {
        let Some(next) = start.next() else {
            ctx.out.error("ERR invalid start ID for the interval");
            return None;
        };
        start = next;
    }
    let Some((mut end, exclusive)) = interval_arg(args[at + 1], u64::MAX) else {
        ctx.out.error(INVALID_ID);
        return None;
    };
    if exclusive {
        let Some(previous) = end.prev() else {
            ctx.out.error("ERR invalid end ID for the interval");
            return None;
        };
        end = previous;
    }
    Some(Extended {
        min_idle_ms,
        start,
        end,
        count,
        consumer: args.get(at + 3).copied(),
    })
}
