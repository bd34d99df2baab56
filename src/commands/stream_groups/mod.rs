//! Stream consumer groups: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, with
//! Redis 7.0's replies, errors and order of checks (the groups themselves are
//! `types::stream_groups`; XINFO is `commands::stream_info`).
//!
//! Every change is logged by its effect, so that a replay rebuilds the groups exactly:
//!
//! - a delivery (XREADGROUP, a claim) as the XCLAIM Redis propagates for it, `XCLAIM key
//!   group consumer 0 id TIME <ms> RETRYCOUNT <n> FORCE JUSTID LASTID <group's last ID>`,
//!   which sets the entry's owner, time and count whatever the PEL held; a claimed entry
//!   no longer in the stream the same way (the replayed XCLAIM finds it gone and drops
//!   it);
//! - a read that moved the group's position, after its XCLAIMs, as `XGROUP SETID key
//!   group <id> ENTRIESREAD <n>` (Redis logs it for NOACK reads only; logging it always
//!   keeps the entries-read counter exact too);
//! - a consumer a read creates as `XGROUP CREATECONSUMER` (Redis: for NOACK reads only);
//! - a history read's new delivery count and time as XCLAIMs too (Redis logs nothing for
//!   them, so its replicas and restarts lose them);
//! - XGROUP CREATE and SETID with `$` resolved to the ID it meant; the rest as given.
//!
//! None of these changes touches WATCH, tells tracking clients or wakes blocked ones
//! (`Ctx::propagate_unsignalled`): Redis signals none of them, but for XGROUP DESTROY,
//! which wakes the group's blocked readers, and XGROUP CREATE MKSTREAM's new key.
//!
//! A blocked XREADGROUP is run again when its stream is written to (`commands::blocking`
//! parks it): `>` is the group's position at that moment; a group destroyed or a stream
//! deleted or replaced meanwhile answers Redis's errors.

mod claim;
mod pending;
mod read;
mod xgroup;

use super::{Ctx, flags};
use crate::command;
use crate::types::Stream;
use crate::types::stream::StreamEntry;
use crate::types::stream_groups::StreamPosition;
use crate::types::stream_id::StreamId;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "xgroup",
            -2,
            0,
            // The subcommands' key (COMMAND INFO shows Redis's own entries): a logged
            // XGROUP touches it for WATCH and blocked readers.
            (2, 2, 1),
            "stream",
            "A container for consumer groups commands",
            xgroup::xgroup
        ),
        command!(
            "xreadgroup",
            -7,
            WRITE | BLOCKING | MOVABLEKEYS,
            (0, 0, 0),
            "stream",
            "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.",
            read::xreadgroup
        ),
        command!(
            "xack",
            -4,
            WRITE | FAST,
            (1, 1, 1),
            "stream",
            "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.",
            pending::xack
        ),
        command!(
            "xpending",
            -3,
            READONLY,
            (1, 1, 1),
            "stream",
            "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.",
            pending::xpending
        ),
        command!(
            "xclaim",
            -6,
            WRITE | FAST,
            (1, 1, 1),
            "stream",
            "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.",
            claim::xclaim
        ),
        command!(
            "xautoclaim",
            -6,
            WRITE | FAST,
            (1, 1, 1),
            "stream",
            "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.",
            claim::xautoclaim
        ),
    ]
}

pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// An ID argument as Redis's `streamGenericParseIDOrReply` reads it: `<ms>` alone takes
/// `missing_seq`; `strict` refuses `-` and `+`.
pub(crate) fn id_arg(arg: &[u8], missing_seq: u64, strict: bool) -> Option<StreamId> {
    if strict && (arg == b"-" || arg == b"+") {
        return None;
    }
    StreamId::parse_exact(arg, Some(missing_seq))
}

/// A range bound (`streamParseIntervalIDOrReply`): `(` makes it exclusive and the rest
/// strict. The bound and whether it is exclusive.
pub(crate) fn interval_arg(arg: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
    match arg {
        [b'(', rest @ ..] if !rest.is_empty() => Some((id_arg(rest, missing_seq, true)?, true)),
        _ => Some((id_arg(arg, missing_seq, false)?, false)),
    }
}

/// An argument quoted in an error the way C's `%s` quotes it: up to its first NUL.
pub(crate) fn c_text(arg: &[u8]) -> String {
    let end = arg.iter().position(|&b| b == 0).unwrap_or(arg.len());
    String::from_utf8_lossy(&arg[..end]).into_owned()
}

pub(crate) fn id_text(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}

pub(crate) fn reply_id(ctx: &mut Ctx, id: StreamId) {
    ctx.out.bulk(id.to_string().as_bytes());
}

/// One entry as the range commands reply it: its ID, then its fields and values.
pub(crate) fn reply_entry(ctx: &mut Ctx, entry: &StreamEntry) {
    ctx.out.array(2);
    reply_id(ctx, entry.id);
    ctx.out.array(entry.fields.len() * 2);
    for (field, value) in &entry.fields {
        ctx.out.bulk(field);
        ctx.out.bulk(value);
    }
}

/// The stream's counters the groups' arithmetic reads.
pub(crate) fn position(stream: &Stream) -> StreamPosition {
    StreamPosition::of(stream)
}

/// A group's entries-read counter as XINFO and the log give it (Redis's -1: unknown).
pub(crate) fn entries_read_number(entries_read: Option<u64>) -> i64 {
    entries_read.map_or(-1, |read| read as i64)
}

/// What a claimed or delivered PEL entry looks like in the log: the XCLAIM that gives it
/// this owner, time and count on replay, with the group's last ID.
pub(crate) struct ClaimRecord {
    pub consumer: Vec<u8>,
    pub id: StreamId,
    pub delivery_time_ms: i64,
    pub delivery_count: u64,
    pub last_id: StreamId,
}

impl ClaimRecord {
    /// The record that redoes `id`'s pending entry as it stands: its owner, delivery time
    /// and count, with the group's last ID.
    pub(crate) fn of(
        id: StreamId,
        pending: &crate::types::stream_groups::Pending,
        last_id: StreamId,
    ) -> ClaimRecord {
        ClaimRecord {
            consumer: pending.owner().to_vec(),
            id,
            delivery_time_ms: pending.delivery_time_ms(),
            delivery_count: pending.delivery_count(),
            last_id,
        }
    }
}

/// Logs `record` for `key`'s group `group`.
pub(crate) fn propagate_claim(ctx: &mut Ctx, key: &[u8], group: &[u8], record: &ClaimRecord) {
    let id = id_text(record.id);
    let time = record.delivery_time_ms.to_string();
    // As Redis prints it (a long long): a count past 2^63 (only a file can hold one)
    // reads back as no RETRYCOUNT, never as a failing record.
    let count = (record.delivery_count as i64).to_string();
    let last_id = id_text(record.last_id);
    ctx.propagate_unsignalled(&[
        b"XCLAIM",
        key,
        group,
        &record.consumer,
        b"0",
        &id,
        b"TIME",
        time.as_bytes(),
        b"RETRYCOUNT",
        count.as_bytes(),
        b"FORCE",
        b"JUSTID",
        b"LASTID",
        &last_id,
    ]);
}

/// Logs a group's position and counter.
pub(crate) fn propagate_position(
    ctx: &mut Ctx,
    key: &[u8],
    group: &[u8],
    last_id: StreamId,
    entries_read: Option<u64>,
) {
    let id = id_text(last_id);
    let read = entries_read_number(entries_read).to_string();
    ctx.propagate_unsignalled(&[
        b"XGROUP",
        b"SETID",
        key,
        group,
        &id,
        b"ENTRIESREAD",
        read.as_bytes(),
    ]);
}

/// Logs a consumer a read or claim created.
pub(crate) fn propagate_consumer(ctx: &mut Ctx, key: &[u8], group: &[u8], consumer: &[u8]) {
    ctx.propagate_unsignalled(&[b"XGROUP", b"CREATECONSUMER", key, group, consumer]);
}

/// Milliseconds since `time_ms`, never negative (a clock that went back).
pub(crate) fn idle_since(now_ms: i64, time_ms: i64) -> i64 {
    now_ms.saturating_sub(time_ms).max(0)
}

pub(crate) use super::subcommand_syntax_error;
