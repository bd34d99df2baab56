//! Sorted-set commands, with Redis 7.0's replies and errors.
//!
//! Logged forms: every write is deterministic given the state it replays on (ZADD with
//! INCR included: the same parse of the same text gives the same double), so commands are
//! logged as given, ZMPOP as the ZPOPMIN / ZPOPMAX it amounts to; reads log nothing.
//!
//! This module holds the command table and what several groups share (the typed lookup,
//! the element reply, the STORE write); the handlers live by job:
//! - `members`: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK;
//! - `ranges`: rank / score / lex ranges and ZRANGE in all its forms, ZRANGESTORE,
//!   ZCOUNT, ZLEXCOUNT, ZREMRANGEBY*;
//! - `pops`: ZPOPMIN, ZPOPMAX, ZMPOP (and what BZPOP* / BZMPOP share with them);
//! - `unordered_reads`: ZRANDMEMBER, ZSCAN;
//! - `set_operations`: ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD.
//!
//! Keyspace events, as Redis 7.0 raises them: `zadd` / `zincr` (ZADD when something was
//! added or changed, ZINCRBY), `zrem`, `zremrangebyrank` / `zremrangebyscore` /
//! `zremrangebylex`, `zpopmin` / `zpopmax` (ZMPOP too), `zunionstore` / `zinterstore` /
//! `zdiffstore` / `zrangestore` (or `del` when an empty result deletes the destination),
//! `del` when a sorted set is emptied, `new` when one is created.

mod members;
mod pops;
mod ranges;
mod set_operations;
mod unordered_reads;

pub(crate) use members::zadd;
pub(crate) use pops::{parse_mpop, pop_elements, reply_popped_with_key};

use super::{AlreadyReplied, Args, Ctx, EventClass, flags};
use crate::command;
use crate::keyspace::{Access, Entry, Keyspace, NO_EXPIRY, Value};
use crate::types::ZSet;
use members::{zcard, zincrby, zmscore, zrank, zrem, zscore};
use pops::{zmpop, zpop};
use ranges::{zcount, zrange, zremrange};
use set_operations::{zintercard, zsetop};
use std::sync::Arc;
use unordered_reads::{zrandmember, zscan};

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "zadd",
            -4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "sorted_set",
            "Add one or more members to a sorted set, or update its score if it already exists",
            zadd
        ),
        command!(
            "zincrby",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "sorted_set",
            "Increment the score of a member in a sorted set",
            zincrby
        ),
        command!(
            "zrem",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            "sorted_set",
            "Remove one or more members from a sorted set",
            zrem
        ),
        command!(
            "zcard",
            2,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Get the number of members in a sorted set",
            zcard
        ),
        command!(
            "zscore",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Get the score associated with the given member in a sorted set",
            zscore
        ),
        command!(
            "zmscore",
            -3,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Get the score associated with the given members in a sorted set",
            zmscore
        ),
        command!(
            "zrank",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Determine the index of a member in a sorted set",
            zrank
        ),
        command!(
            "zrevrank",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Determine the index of a member in a sorted set, with scores ordered from high to low",
            zrank
        ),
        command!(
            "zcount",
            4,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Count the members in a sorted set with scores within the given values",
            zcount
        ),
        command!(
            "zlexcount",
            4,
            READONLY | FAST,
            (1, 1, 1),
            "sorted_set",
            "Count the number of members in a sorted set between a given lexicographical range",
            zcount
        ),
        command!(
            "zrange",
            -4,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Return a range of members in a sorted set",
            zrange
        ),
        command!(
            "zrangestore",
            -5,
            WRITE | DENYOOM,
            (1, 2, 1),
            "sorted_set",
            "Store a range of members from sorted set into another key",
            zrange
        ),
        command!(
            "zrevrange",
            -4,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Return a range of members in a sorted set, by index, with scores ordered from high to low",
            zrange
        ),
        command!(
            "zrangebyscore",
            -4,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Return a range of members in a sorted set, by score",
            zrange
        ),
        command!(
            "zrevrangebyscore",
            -4,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Return a range of members in a sorted set, by score, with scores ordered from high to low",
            zrange
        ),
        command!(
            "zrangebylex",
            -4,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Return a range of members in a sorted set, by lexicographical range",
            zrange
        ),
        command!(
            "zrevrangebylex",
            -4,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.",
            zrange
        ),
        command!(
            "zremrangebyrank",
            4,
            WRITE,
            (1, 1, 1),
            "sorted_set",
            "Remove all members in a sorted set within the given indexes",
            zremrange
        ),
        command!(
            "zremrangebyscore",
            4,
            WRITE,
            (1, 1, 1),
            "sorted_set",
            "Remove all members in a sorted set within the given scores",
            zremrange
        ),
        command!(
            "zremrangebylex",
            4,
            WRITE,
            (1, 1, 1),
            "sorted_set",
            "Remove all members in a sorted set between the given lexicographical range",
            zremrange
        ),
        command!(
            "zpopmin",
            -2,
            WRITE | FAST,
            (1, 1, 1),
            "sorted_set",
            "Remove and return members with the lowest scores in a sorted set",
            zpop
        ),
        command!(
            "zpopmax",
            -2,
            WRITE | FAST,
            (1, 1, 1),
            "sorted_set",
            "Remove and return members with the highest scores in a sorted set",
            zpop
        ),
        command!(
            "zmpop",
            -4,
            WRITE | MOVABLEKEYS,
            (0, 0, 0),
            "sorted_set",
            "Remove and return members with scores in a sorted set",
            zmpop
        ),
        command!(
            "zrandmember",
            -2,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Get one or multiple random elements from a sorted set",
            zrandmember
        ),
        command!(
            "zunion",
            -3,
            READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "sorted_set",
            "Add multiple sorted sets",
            zsetop
        ),
        command!(
            "zinter",
            -3,
            READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "sorted_set",
            "Intersect multiple sorted sets",
            zsetop
        ),
        command!(
            "zdiff",
            -3,
            READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "sorted_set",
            "Subtract multiple sorted sets",
            zsetop
        ),
        command!(
            "zunionstore",
            -4,
            WRITE | DENYOOM | MOVABLEKEYS,
            (1, 1, 1),
            "sorted_set",
            "Add multiple sorted sets and store the resulting sorted set in a new key",
            zsetop
        ),
        command!(
            "zinterstore",
            -4,
            WRITE | DENYOOM | MOVABLEKEYS,
            (1, 1, 1),
            "sorted_set",
            "Intersect multiple sorted sets and store the resulting sorted set in a new key",
            zsetop
        ),
        command!(
            "zdiffstore",
            -4,
            WRITE | DENYOOM | MOVABLEKEYS,
            (1, 1, 1),
            "sorted_set",
            "Subtract multiple sorted sets and store the resulting sorted set in a new key",
            zsetop
        ),
        command!(
            "zintercard",
            -3,
            READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "sorted_set",
            "Intersect multiple sorted sets and return the cardinality of the result",
            zintercard
        ),
        command!(
            "zscan",
            -3,
            READONLY,
            (1, 1, 1),
            "sorted_set",
            "Incrementally iterate sorted sets elements and associated scores",
            zscan
        ),
    ]
}

pub(crate) fn peek<'a>(keyspace: &'a Keyspace, db: usize, key: &[u8]) -> Option<&'a ZSet> {
    match keyspace.dbs[db].get(key).map(|e| &e.value) {
        Some(Value::ZSet(zset, _)) => Some(zset),
        _ => None,
    }
}

pub(crate) fn exists(ctx: &mut Ctx, key: &[u8]) -> Result<bool, AlreadyReplied> {
    Ok(ctx.read::<ZSet>(key)?.is_some())
}

fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

/// Owned (member, score) pairs, in order.
type Elements = Vec<(Vec<u8>, f64)>;

fn reply_elements(ctx: &mut Ctx, elements: &[(Vec<u8>, f64)], with_scores: bool) {
    let resp3 = ctx.client.resp3;
    if with_scores && !resp3 {
        ctx.out.array(elements.len() * 2);
    } else {
        ctx.out.array(elements.len());
    }
    for (member, score) in elements {
        if with_scores && resp3 {
            ctx.out.array(2);
        }
        ctx.out.bulk(member);
        if with_scores {
            ctx.out.double(*score);
        }
    }
}

/// Replaces `destination` with `elements` (deleting it when empty), raises `event`
/// (or `del`), logs `logged`, and replies the count.
pub(crate) fn store_result(
    ctx: &mut Ctx,
    destination: &[u8],
    elements: Vec<(Vec<u8>, f64)>,
    event: &str,
    logged: &Args,
) {
    ctx.expire_if_needed(destination);
    let count = elements.len();
    // An empty result deletes the destination; if there was none, nothing changed and
    // nothing is logged (so a WATCH on it is not touched, as in Redis).
    let changed = if count == 0 {
        let deleted = ctx.db().remove(destination).is_some();
        if deleted {
            ctx.notify(EventClass::Generic, "del", destination);
        }
        deleted
    } else {
        let zset = ZSet::from_elements(elements);
        let previous = ctx.db().insert(Entry {
            key: crate::keyspace::Key::from(destination),
            value: Value::ZSet(Arc::new(zset), Access::new()),
            expire_at_ms: NO_EXPIRY,
        });
        if previous.is_none() {
            ctx.notify(EventClass::New, "new", destination);
        }
        ctx.notify(EventClass::ZSet, event, destination);
        true
    };
    if changed {
        ctx.propagate(logged);
    }
    ctx.out.integer(count as i64);
}
