//! The stream commands over `types::stream`: the entry commands (`entries`: XADD, XTRIM,
//! XDEL, XLEN, XRANGE, XREVRANGE, XSETID) and XREAD (`read`, blocking through
//! `commands::blocking`).
//!
//! What they share lives here: the table rows, reading ID arguments the way each Redis
//! command does (strict or not, the sequence a bare `<ms>` takes), the trim options XADD
//! and XTRIM share, and the reply forms of entries.
//!
//! Logging is by effect (`Ctx::propagate`): XADD with the ID it assigned, and a trim,
//! whether XADD's or XTRIM's, as an exact `MINID = <first entry kept>` (or `MAXLEN = 0`
//! when nothing is kept), never as `~` or LIMIT, whose effect depends on node boundaries.

mod entries;
mod read;

use super::{AlreadyReplied, Ctx, flags};
use crate::command;
use crate::types::stream::StreamEntry;
use crate::types::stream_id::{ParsedId, StreamId};

pub(crate) use read::key_positions as xread_key_positions;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "xadd",
            -5,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "stream",
            "Appends a new entry to a stream",
            entries::xadd
        ),
        command!(
            "xtrim",
            -4,
            WRITE,
            (1, 1, 1),
            "stream",
            "Trims the stream to (approximately if '~' is passed) a certain size",
            entries::xtrim
        ),
        command!(
            "xdel",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "stream",
            "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.",
            entries::xdel
        ),
        command!(
            "xlen",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "stream",
            "Return the number of entries in a stream",
            entries::xlen
        ),
        command!(
            "xrange",
            -4,
            READONLY,
            (1, 1, 1),
            "stream",
            "Return a range of elements in a stream, with IDs matching the specified IDs interval",
            entries::xrange
        ),
        command!(
            "xrevrange",
            -4,
            READONLY,
            (1, 1, 1),
            "stream",
            "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE",
            entries::xrevrange
        ),
        command!(
            "xsetid",
            -3,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "stream",
            "An internal command for replicating stream values",
            entries::xsetid
        ),
        command!(
            "xread",
            -4,
            READONLY | BLOCKING | MOVABLEKEYS,
            (0, 0, 0),
            "stream",
            "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.",
            read::xread
        ),
    ]
}

pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// An ID argument as Redis's `streamParseStrictIDOrReply` reads it (`-` and `+` refused;
/// a bare `<ms>` takes sequence `missing_seq`), replying its error when invalid.
pub(crate) fn strict_id(
    ctx: &mut Ctx,
    arg: &[u8],
    missing_seq: u64,
) -> Result<StreamId, AlreadyReplied> {
    let parsed = match arg {
        b"-" | b"+" => None,
        _ => StreamId::parse_exact(arg, Some(missing_seq)),
    };
    parsed.ok_or_else(|| {
        ctx.out.error(INVALID_ID);
        AlreadyReplied
    })
}

/// XADD's ID argument: strict, `<ms>` alone is `<ms>-0`, `<ms>-*` leaves the sequence
/// to the stream.
pub(crate) fn new_id(ctx: &mut Ctx, arg: &[u8]) -> Result<ParsedId, AlreadyReplied> {
    let parsed = match arg {
        b"-" | b"+" => None,
        _ => StreamId::parse(arg, Some(0), true),
    };
    parsed.ok_or_else(|| {
        ctx.out.error(INVALID_ID);
        AlreadyReplied
    })
}

/// An end of an XRANGE interval (`streamParseIntervalIDOrReply`): `(` before an ID makes
/// it exclusive (the rest read strictly); otherwise `-` and `+` are the extremes.
/// Returns the ID and whether it is exclusive.
pub(crate) fn interval_id(
    ctx: &mut Ctx,
    arg: &[u8],
    missing_seq: u64,
) -> Result<(StreamId, bool), AlreadyReplied> {
    if arg.len() > 1 && arg[0] == b'(' {
        return Ok((strict_id(ctx, &arg[1..], missing_seq)?, true));
    }
    match StreamId::parse_exact(arg, Some(missing_seq)) {
        Some(id) => Ok((id, false)),
        None => {
            ctx.out.error(INVALID_ID);
            Err(AlreadyReplied)
        }
    }
}

/// An ID as its reply: a bulk `<ms>-<seq>`.
pub(crate) fn reply_id(ctx: &mut Ctx, id: StreamId) {
    let mut text = itoa::Buffer::new().format(id.ms).to_owned();
    text.push('-');
    text.push_str(itoa::Buffer::new().format(id.seq));
    ctx.out.bulk(text.as_bytes());
}

/// One entry as Redis replies it: its ID and a flat array of fields and values.
pub(crate) fn reply_entry(ctx: &mut Ctx, entry: &StreamEntry) {
    ctx.out.array(2);
    reply_id(ctx, entry.id);
    ctx.out.array(entry.fields.len() * 2);
    for (field, value) in &entry.fields {
        ctx.out.bulk(field);
        ctx.out.bulk(value);
    }
}

pub(crate) fn reply_entries(ctx: &mut Ctx, entries: &[StreamEntry]) {
    ctx.out.array(entries.len());
    for entry in entries {
        reply_entry(ctx, entry);
    }
}

/// The reply of a read (XREAD, XREADGROUP): per stream served, its key and then what
/// `entries` writes of it; an array of pairs in RESP2, a map in RESP3.
pub(crate) fn reply_per_stream<T>(
    ctx: &mut Ctx,
    served: &[(&[u8], T)],
    mut entries: impl FnMut(&mut Ctx, &T),
) {
    let resp3 = ctx.out.resp3;
    if resp3 {
        ctx.out.map(served.len());
    } else {
        ctx.out.array(served.len());
    }
    for (key, served_entries) in served {
        if !resp3 {
            ctx.out.array(2);
        }
        ctx.out.bulk(key);
        entries(ctx, served_entries);
    }
}

/// XREAD's and XREADGROUP's BLOCK inside a script: Redis's error, replied (true) or
/// nothing to say (false).
pub(crate) fn refuse_block_in_script(ctx: &mut Ctx, command: &[u8]) -> bool {
    if ctx.in_script {
        ctx.out.error(&format!(
            "ERR {} command is not allowed with BLOCK option from scripts",
            super::lossy(command)
        ));
    }
    ctx.in_script
}

/// An ID as an argument for the log.
pub(crate) fn id_text(id: StreamId) -> Vec<u8> {
    id.to_string().into_bytes()
}
