//! XCLAIM and XAUTOCLAIM: PEL entries change owner (Redis 7.0's `xclaimCommand`,
//! `xautoclaimCommand`). A claimed ID no longer in the stream leaves the PEL instead
//! (XAUTOCLAIM lists it). Each change is logged as the XCLAIM that redoes it; an XCLAIM
//! whose LASTID moved the group and claimed nothing logs the group's position.

use super::{
    ClaimRecord, INVALID_ID, c_text, id_arg, interval_arg, propagate_claim, propagate_position,
    reply_entry, reply_id,
};
use crate::commands::{Action, Args, Ctx, EventClass, SYNTAX_ERROR, eq_ignore_case};
use crate::keyspace::Value;
use crate::types::Stream;
use crate::types::stream::StreamEntry;
use crate::types::stream_groups::{DeliveryCount, Group};
use crate::types::stream_id::StreamId;

/// XAUTOCLAIM looks at up to COUNT times this many PEL entries.
const ATTEMPTS_FACTOR: u64 = 10;

/// Redis allocates 16 bytes per COUNT up front for the IDs it may drop, and answers an
/// error when that fails: on x86-64 Linux from 2^46 bytes (half the 47-bit address
/// space) on. Tessera allocates by what it finds, and answers the same error there.
const TRANSIENT_COUNT_MAX: u64 = 1 << 42;

/// The NOGROUP error of the claim commands.
fn no_group(ctx: &mut Ctx, key: &[u8], group: &[u8]) {
    ctx.out.error(&format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        c_text(key),
        c_text(group)
    ));
}

/// Whether `key` holds a stream with group `group` (a read lookup, as Redis's); Err after
/// replying WRONGTYPE.
fn has_group(ctx: &mut Ctx, key: &[u8], group: &[u8]) -> Result<bool, ()> {
    ctx.reading(|ctx| {
        ctx.read::<Stream>(key)
            .map(|stream| stream.is_some_and(|s| s.groups.get(group).is_some()))
            .map_err(|_| ())
    })
}

/// An integer option of XCLAIM, with its own error text.
fn integer(ctx: &mut Ctx, arg: &[u8], error: &str) -> Option<i64> {
    let parsed = crate::resp::parse_i64(arg);
    if parsed.is_none() {
        ctx.out.error(error);
    }
    parsed
}

/// What a claim replies for one entry.
enum Claimed {
    Id(StreamId),
    Entry(StreamEntry),
}

/// What an XCLAIM or XAUTOCLAIM claims, as it goes: the consumer is seen (created if
/// new) at the first claim only, as Redis's commands do.
struct Claims<'a> {
    consumer: &'a [u8],
    justid: bool,
    now_ms: i64,
    consumer_seen: bool,
    consumer_created: bool,
    claimed: Vec<Claimed>,
    records: Vec<ClaimRecord>,
}

impl<'a> Claims<'a> {
    fn new(consumer: &'a [u8], justid: bool, now_ms: i64) -> Claims<'a> {
        Claims {
            consumer,
            justid,
            now_ms,
            consumer_seen: false,
            consumer_created: false,
            claimed: Vec::new(),
            records: Vec::new(),
        }
    }

    /// Claims `entry` (at `id`) for the consumer, with its record for the log.
    fn claim(
        &mut self,
        group: &mut Group,
        id: StreamId,
        entry: StreamEntry,
        delivery_time_ms: i64,
        count: DeliveryCount,
    ) {
        if !self.consumer_seen {
            self.consumer_created = group.see_consumer(self.consumer, self.now_ms);
            self.consumer_seen = true;
        }
        group.claim(id, self.consumer, delivery_time_ms, count);
        let after = group.pending_entry(id).expect("just claimed");
        self.records
            .push(ClaimRecord::of(id, after, group.last_id()));
        self.claimed.push(if self.justid {
            Claimed::Id(id)
        } else {
            Claimed::Entry(entry)
        });
    }
}

fn reply_claimed(ctx: &mut Ctx, claimed: &[Claimed]) {
    ctx.out.array(claimed.len());
    for item in claimed {
        match item {
            Claimed::Id(id) => reply_id(ctx, *id),
            Claimed::Entry(entry) => reply_entry(ctx, entry),
        }
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms-unix-time]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID id].
pub(super) fn xclaim(ctx: &mut Ctx, args: &Args) -> Action {
    let (key, name, consumer) = (args[1], args[2], args[3]);
    match has_group(ctx, key, name) {
        Err(()) => return Action::None,
        Ok(false) => {
            no_group(ctx, key, name);
            return Action::None;
        }
        Ok(true) => {}
    }
    let Some(min_idle) = integer(
        ctx,
        args[4],
        "ERR Invalid min-idle-time argument for XCLAIM",
    ) else {
        return Action::None;
    };
    let min_idle = min_idle.max(0);
    // The IDs run up to the first argument that is none; options follow.
    let mut ids = Vec::new();
    let mut at = 5;
    while at < args.len() {
        match id_arg(args[at], 0, true) {
            Some(id) => ids.push(id),
            None => break,
        }
        at += 1;
    }
    let now = ctx.now_ms;
    let mut force = false;
    let mut justid = false;
    let mut delivery_time: Option<i64> = None;
    let mut retry_count: Option<u64> = None;
    let mut last_id = StreamId::MIN;
    while at < args.len() {
        let more = args.len() - 1 - at;
        let option = args[at];
        if eq_ignore_case(option, "force") {
            force = true;
        } else if eq_ignore_case(option, "justid") {
            justid = true;
        } else if eq_ignore_case(option, "idle") && more > 0 {
            at += 1;
            let Some(idle) = integer(ctx, args[at], "ERR Invalid IDLE option argument for XCLAIM")
            else {
                return Action::None;
            };
            delivery_time = Some(now.wrapping_sub(idle));
        } else if eq_ignore_case(option, "time") && more > 0 {
            at += 1;
            let Some(time) = integer(ctx, args[at], "ERR Invalid TIME option argument for XCLAIM")
            else {
                return Action::None;
            };
            delivery_time = Some(time);
        } else if eq_ignore_case(option, "retrycount") && more > 0 {
            at += 1;
            let Some(count) = integer(
                ctx,
                args[at],
                "ERR Invalid RETRYCOUNT option argument for XCLAIM",
            ) else {
                return Action::None;
            };
            // Redis keeps the count as given; a negative one means "not given".
            retry_count = u64::try_from(count).ok();
        } else if eq_ignore_case(option, "lastid") && more > 0 {
            at += 1;
            match id_arg(args[at], 0, true) {
                Some(id) => last_id = id,
                None => {
                    ctx.out.error(INVALID_ID);
                    return Action::None;
                }
            }
        } else {
            ctx.out.error(&format!(
                "ERR Unrecognized XCLAIM option '{}'",
                c_text(option)
            ));
            return Action::None;
        }
        at += 1;
    }
    // A time in the future or before the epoch is taken as now (clients' clocks differ).
    let delivery_time = match delivery_time {
        Some(time) if (0..=now).contains(&time) => time,
        _ => now,
    };
    let count_rule = match retry_count {
        Some(count) => DeliveryCount::Set(count),
        None if justid => DeliveryCount::Keep,
        None => DeliveryCount::Increment,
    };

    let stream = ctx
        .write::<Stream>(key)
        .ok()
        .flatten()
        .expect("checked above");
    // Each ID's entry, if it is in the stream (read before the group changes).
    let looked: Vec<(StreamId, Option<StreamEntry>)> = ids
        .iter()
        .map(|&id| {
            let entry = if justid {
                stream.contains(id).then(|| StreamEntry {
                    id,
                    fields: Vec::new(),
                })
            } else {
                stream.get(id)
            };
            (id, entry)
        })
        .collect();
    let group = stream.groups.get_mut(name).expect("checked above");
    let mut position_moved = group.raise_last_id(last_id);
    let mut claims = Claims::new(consumer, justid, now);
    for (id, entry) in looked {
        let Some(entry) = entry else {
            // Not in the stream: a pending entry for it goes (and is logged as it was).
            if let Some(gone) = group.remove_pending(id) {
                claims
                    .records
                    .push(ClaimRecord::of(id, &gone, group.last_id()));
                position_moved = false;
            }
            continue;
        };
        // Looked at now: an ID given twice finds what the first claim did.
        let pending = group.pending_entry(id).is_some();
        if !pending && !force {
            continue;
        }
        // An entry FORCE adds has no owner yet, so no idle time to compare.
        if pending && min_idle != 0 {
            let delivered = group.pending_entry(id).expect("pending").delivery_time_ms();
            if now.saturating_sub(delivered) < min_idle {
                continue;
            }
        }
        claims.claim(group, id, entry, delivery_time, count_rule);
        position_moved = false;
    }
    let position_now = (group.last_id(), group.entries_read());

    if claims.consumer_created {
        ctx.notify(EventClass::Stream, "xgroup-createconsumer", key);
    }
    reply_claimed(ctx, &claims.claimed);
    for record in &claims.records {
        propagate_claim(ctx, key, name, record);
    }
    if position_moved {
        propagate_position(ctx, key, name, position_now.0, position_now.1);
    }
    Action::None
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]: claims up to
/// COUNT entries idle long enough from `start` on, looking at no more than 10 × COUNT;
/// replies the cursor to go on from, the claimed entries, and the IDs that were pending
/// but gone from the stream (dropped from the PEL, counted in COUNT).
pub(super) fn xautoclaim(ctx: &mut Ctx, args: &Args) -> Action {
    let (key, name, consumer) = (args[1], args[2], args[3]);
    // Redis looks the key up first (a miss is counted and raised whatever follows), and
    // checks its type and group after the arguments.
    let found = ctx.reading(|ctx| {
        ctx.lookup_read(key).map(|entry| match &entry.value {
            Value::Stream(stream, _) => Some(stream.groups.get(name).is_some()),
            _ => None,
        })
    });
    let Some(min_idle) = integer(
        ctx,
        args[4],
        "ERR Invalid min-idle-time argument for XAUTOCLAIM",
    ) else {
        return Action::None;
    };
    let min_idle = min_idle.max(0);
    let Some((mut start, exclusive)) = interval_arg(args[5], 0) else {
        ctx.out.error(INVALID_ID);
        return Action::None;
    };
    if exclusive {
        let Some(next) = start.next() else {
            ctx.out.error("ERR invalid start ID for the interval");
            return Action::None;
        };
        start = next;
    }
    // Redis's limit: what makes COUNT × 16 bytes (and COUNT × 10 attempts) fit a long.
    let count_max = (i64::MAX / 16) as u64;
    let mut count: u64 = 100;
    let mut justid = false;
    let mut at = 6;
    while at < args.len() {
        let more = args.len() - 1 - at;
        if eq_ignore_case(args[at], "count") && more > 0 {
            // One text for a number out of range and for no number at all.
            match crate::resp::parse_i64(args[at + 1]) {
                Some(value) if (1..=count_max as i64).contains(&value) => count = value as u64,
                _ => {
                    ctx.out.error("ERR COUNT must be > 0");
                    return Action::None;
                }
            }
            at += 1;
        } else if eq_ignore_case(args[at], "justid") {
            justid = true;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
        at += 1;
    }
    match found {
        Some(None) => {
            ctx.wrong_type();
            return Action::None;
        }
        None | Some(Some(false)) => {
            no_group(ctx, key, name);
            return Action::None;
        }
        Some(Some(true)) => {}
    }
    if count >= TRANSIENT_COUNT_MAX {
        ctx.out
            .error("ERR Insufficient memory, failed allocating transient memory, COUNT too high.");
        return Action::None;
    }

    let now = ctx.now_ms;
    let stream = ctx
        .write::<Stream>(key)
        .ok()
        .flatten()
        .expect("checked above");
    let group = stream.groups.get(name).expect("checked above");
    // The PEL from `start`, as far as the attempts reach, with what each ID is now; and
    // the ID after them (the cursor), 0-0 at the end of the PEL.
    let attempts = count.saturating_mul(ATTEMPTS_FACTOR);
    let mut examined = Vec::new();
    let mut remaining = count;
    let mut cursor = StreamId::MIN;
    for (&id, entry) in group.pending().range(start..) {
        if examined.len() as u64 >= attempts || remaining == 0 {
            cursor = id;
            break;
        }
        let found = if justid {
            stream.contains(id).then(|| StreamEntry {
                id,
                fields: Vec::new(),
            })
        } else {
            stream.get(id)
        };
        let idle_enough = min_idle == 0 || now.saturating_sub(entry.delivery_time_ms()) >= min_idle;
        if found.is_none() || idle_enough {
            remaining -= 1;
        }
        examined.push((id, found, idle_enough));
    }
    let group = stream.groups.get_mut(name).expect("checked above");
    let count_rule = if justid {
        DeliveryCount::Keep
    } else {
        DeliveryCount::Increment
    };
    let mut claims = Claims::new(consumer, justid, now);
    let mut deleted = Vec::new();
    for (id, found, idle_enough) in examined {
        let Some(entry) = found else {
            let gone = group.remove_pending(id).expect("pending");
            claims
                .records
                .push(ClaimRecord::of(id, &gone, group.last_id()));
            deleted.push(id);
            continue;
        };
        if idle_enough {
            claims.claim(group, id, entry, now, count_rule);
        }
    }

    if claims.consumer_created {
        ctx.notify(EventClass::Stream, "xgroup-createconsumer", key);
    }
    ctx.out.array(3);
    reply_id(ctx, cursor);
    reply_claimed(ctx, &claims.claimed);
    ctx.out.array(deleted.len());
    for id in deleted {
        reply_id(ctx, id);
    }
    for record in &claims.records {
        propagate_claim(ctx, key, name, record);
    }
    Action::None
}
