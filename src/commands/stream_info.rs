//! XINFO: STREAM [FULL [COUNT n]], GROUPS, CONSUMERS, HELP — Redis 7.0's `xinfoCommand`.
//!
//! `radix-tree-keys` and `radix-tree-nodes` describe Redis's radix tree of stream nodes:
//! Tessera keeps the nodes in an ordered map with the same keys (the nodes' master IDs),
//! and counts the nodes the radix tree would have for those keys (`rax_nodes`). Lag and
//! entries read are `types::stream_groups`'s arithmetic. Times are Unix milliseconds as
//! the groups keep them; CONSUMERS' `idle` is the time since the consumer was last seen.

use super::stream_groups::{
    c_text, entries_read_number, idle_since, position, reply_entry, reply_id,
};
use super::{Action, Args, Ctx, NOT_INTEGER, eq_ignore_case, lossy, unknown_subcommand};
use crate::command;
use crate::keyspace::Value;
use crate::types::Stream;
use crate::types::stream_groups::Group;
use crate::types::stream_id::StreamId;
use std::sync::Arc;

pub fn commands() -> Vec<super::CommandSpec> {
    vec![command!(
        "xinfo",
        -2,
        0,
        // The subcommands' key (COMMAND INFO shows Redis's own entries): what client-side
        // caching remembers of a read.
        (2, 2, 1),
        "stream",
        "A container for stream introspection commands",
        xinfo
    )]
}

const HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

/// XINFO STREAM FULL's default COUNT (Redis's: so that the server is not blocked).
const FULL_COUNT_DEFAULT: i64 = 10;

fn xinfo(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    if !matches!(sub.as_str(), "help" | "stream" | "groups" | "consumers") {
        unknown_subcommand(ctx, "xinfo", args[1]);
        return Action::None;
    }
    if sub == "help" {
        if args.len() != 2 {
            super::stream_groups::subcommand_syntax_error(ctx, args);
            return Action::None;
        }
        ctx.out.array(HELP.len());
        for line in HELP {
            ctx.out.simple(line);
        }
        return Action::None;
    }
    if args.len() < 3 {
        super::stream_groups::subcommand_syntax_error(ctx, args);
        return Action::None;
    }
    let key = args[2];
    // A read lookup (hits, misses, `keymiss`); no key is an error.
    // The value's handle (no copy) is held while the reply is written.
    let stream: Arc<Stream> = match ctx.lookup_read(key).map(|entry| &entry.value) {
        None => {
            ctx.out.error("ERR no such key");
            return Action::None;
        }
        Some(Value::Stream(stream, _)) => stream.clone(),
        Some(_) => {
            ctx.wrong_type();
            return Action::None;
        }
    };
    match sub.as_str() {
        "consumers" if args.len() == 4 => consumers(ctx, &stream, key, args[3]),
        "groups" if args.len() == 3 => groups(ctx, &stream),
        "stream" => stream_info(ctx, &stream, args),
        _ => super::stream_groups::subcommand_syntax_error(ctx, args),
    }
    Action::None
}

/// XINFO CONSUMERS: each consumer's name, pending count and idle time.
fn consumers(ctx: &mut Ctx, stream: &Stream, key: &[u8], name: &[u8]) {
    let Some(group) = stream.groups.get(name) else {
        ctx.out.error(&format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            c_text(name),
            c_text(key)
        ));
        return;
    };
    let now = ctx.now_ms;
    ctx.out.array(group.consumer_count());
    for (name, consumer) in group.consumers() {
        ctx.out.map(3);
        ctx.out.bulk(b"name");
        ctx.out.bulk(name);
        ctx.out.bulk(b"pending");
        ctx.out.integer(consumer.pending().len() as i64);
        ctx.out.bulk(b"idle");
        ctx.out.integer(idle_since(now, consumer.seen_time_ms()));
    }
}

/// XINFO GROUPS: each group's name, consumers, pending count, position, counter and lag.
fn groups(ctx: &mut Ctx, stream: &Stream) {
    let counters = position(stream);
    ctx.out.array(stream.groups.len());
    for (name, group) in stream.groups.iter() {
        ctx.out.map(6);
        ctx.out.bulk(b"name");
        ctx.out.bulk(name);
        ctx.out.bulk(b"consumers");
        ctx.out.integer(group.consumer_count() as i64);
        ctx.out.bulk(b"pending");
        ctx.out.integer(group.pending().len() as i64);
        ctx.out.bulk(b"last-delivered-id");
        reply_id(ctx, group.last_id());
        reply_counter_and_lag(ctx, group, &counters);
    }
}

/// `entries-read` (null when unknown) and `lag` (null when it cannot be told).
fn reply_counter_and_lag(
    ctx: &mut Ctx,
    group: &Group,
    counters: &crate::types::stream_groups::StreamPosition,
) {
    ctx.out.bulk(b"entries-read");
    match group.entries_read() {
        Some(read) => ctx.out.integer(entries_read_number(Some(read))),
        None => ctx.out.null(),
    }
    ctx.out.bulk(b"lag");
    match group.lag(counters) {
        Some(lag) => ctx.out.integer(lag),
        None => ctx.out.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT count]].
fn stream_info(ctx: &mut Ctx, stream: &Stream, args: &Args) {
    let options = &args[3..];
    let full = !options.is_empty();
    let mut count = FULL_COUNT_DEFAULT;
    if full {
        if (options.len() != 1 && options.len() != 3) || !eq_ignore_case(options[0], "full") {
            super::stream_groups::subcommand_syntax_error(ctx, args);
            return;
        }
        if options.len() == 3 {
            if !eq_ignore_case(options[1], "count") {
                super::stream_groups::subcommand_syntax_error(ctx, args);
                return;
            }
            let Some(value) = crate::resp::parse_i64(options[2]) else {
                ctx.out.error(NOT_INTEGER);
                return;
            };
            count = if value < 0 { FULL_COUNT_DEFAULT } else { value };
        }
    }
    // 0: everything.
    let limit = match count {
        0 => usize::MAX,
        n => usize::try_from(n).unwrap_or(usize::MAX),
    };

    ctx.out.map(if full { 9 } else { 10 });
    ctx.out.bulk(b"length");
    ctx.out.integer(stream.len() as i64);
    ctx.out.bulk(b"radix-tree-keys");
    ctx.out.integer(stream.node_count() as i64);
    ctx.out.bulk(b"radix-tree-nodes");
    let master_ids: Vec<StreamId> = stream.nodes().map(|(id, _)| id).collect();
    ctx.out.integer(rax_nodes(&master_ids) as i64);
    ctx.out.bulk(b"last-generated-id");
    reply_id(ctx, stream.last_id());
    ctx.out.bulk(b"max-deleted-entry-id");
    reply_id(ctx, stream.max_deleted_id());
    ctx.out.bulk(b"entries-added");
    ctx.out.integer(stream.entries_added() as i64);
    ctx.out.bulk(b"recorded-first-entry-id");
    reply_id(ctx, stream.recorded_first_id());

    if !full {
        ctx.out.bulk(b"groups");
        ctx.out.integer(stream.groups.len() as i64);
        ctx.out.bulk(b"first-entry");
        match stream.range(StreamId::MIN, StreamId::MAX, false).next() {
            Some(entry) => reply_entry(ctx, &entry),
            None => ctx.out.null(),
        }
        ctx.out.bulk(b"last-entry");
        match stream.range(StreamId::MIN, StreamId::MAX, true).next() {
            Some(entry) => reply_entry(ctx, &entry),
            None => ctx.out.null(),
        }
        return;
    }

    ctx.out.bulk(b"entries");
    let entries: Vec<_> = stream
        .range(StreamId::MIN, StreamId::MAX, false)
        .take(limit)
        .collect();
    ctx.out.array(entries.len());
    for entry in &entries {
        reply_entry(ctx, entry);
    }
    ctx.out.bulk(b"groups");
    let counters = position(stream);
    ctx.out.array(stream.groups.len());
    for (name, group) in stream.groups.iter() {
        ctx.out.map(7);
        ctx.out.bulk(b"name");
        ctx.out.bulk(name);
        ctx.out.bulk(b"last-delivered-id");
        reply_id(ctx, group.last_id());
        reply_counter_and_lag(ctx, group, &counters);
        ctx.out.bulk(b"pel-count");
        ctx.out.integer(group.pending().len() as i64);
        ctx.out.bulk(b"pending");
        let shown = group.pending().len().min(limit);
        ctx.out.array(shown);
        for (id, entry) in group.pending().iter().take(shown) {
            ctx.out.array(4);
            reply_id(ctx, *id);
            ctx.out.bulk(entry.owner());
            ctx.out.integer(entry.delivery_time_ms());
            ctx.out.integer(entry.delivery_count() as i64);
        }
        ctx.out.bulk(b"consumers");
        ctx.out.array(group.consumer_count());
        for (name, consumer) in group.consumers() {
            ctx.out.map(4);
            ctx.out.bulk(b"name");
            ctx.out.bulk(name);
            ctx.out.bulk(b"seen-time");
            ctx.out.integer(consumer.seen_time_ms());
            ctx.out.bulk(b"pel-count");
            ctx.out.integer(consumer.pending().len() as i64);
            ctx.out.bulk(b"pending");
            let shown = consumer.pending().len().min(limit);
            ctx.out.array(shown);
            for id in consumer.pending().iter().take(shown) {
                let entry = group
                    .pending_entry(*id)
                    .expect("a consumer's IDs are pending");
                ctx.out.array(3);
                reply_id(ctx, *id);
                ctx.out.integer(entry.delivery_time_ms());
                ctx.out.integer(entry.delivery_count() as i64);
            }
        }
    }
}

/// How many nodes Redis's radix tree has for these keys (ascending 16-byte big-endian
/// IDs): the head; then, where all keys below a node share more bytes, one compressed
/// node for them; where they part, a node whose children are one node per next byte;
/// a node after each key's last byte. Redis compresses on insertion and recompresses on
/// removal, so the shape depends on the keys only.
pub fn rax_nodes(keys: &[StreamId]) -> usize {
    if keys.is_empty() {
        return 1;
    }
    let keys: Vec<[u8; 16]> = keys.iter().map(|id| id.to_be_bytes()).collect();
    subtree_nodes(&keys, 0)
}

/// The nodes of the subtree whose root sits `depth` bytes into `keys` (sorted, sharing
/// their first `depth` bytes).
fn subtree_nodes(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        return 1;
    }
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    let shared = (depth..16).take_while(|&i| first[i] == last[i]).count();
    if shared > 0 {
        // A compressed node over the shared bytes, then whatever follows them.
        return 1 + subtree_nodes(keys, depth + shared);
    }
    let mut nodes = 1;
    let mut from = 0;
    while from < keys.len() {
        let byte = keys[from][depth];
        let to = from + keys[from..].partition_point(|key| key[depth] == byte);
        nodes += subtree_nodes(&keys[from..to], depth + 1);
        from = to;
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn radix_tree_shapes() {
        // The head alone; a key: the head compressed over its 16 bytes, and its end.
        assert_eq!(rax_nodes(&[]), 1);
        assert_eq!(rax_nodes(&[id(1, 1)]), 2);
        // Two keys parting at the last byte: compressed head, the parting node, two ends.
        assert_eq!(rax_nodes(&[id(1, 1), id(1, 2)]), 4);
        // Parting at the first byte: the head parts, each side compressed then its end.
        assert_eq!(rax_nodes(&[id(1, 1), id(u64::MAX, 1)]), 5);
        // Three keys, two of which part later than the third.
        // head (compressed) + parting node + [compressed + parting node + 2 ends] + [compressed
        // + end].
        assert_eq!(rax_nodes(&[id(1, 0), id(1, 1), id(2, 0)]), 1 + 1 + 4 + 2);
    }
}
