//! Sorted-set commands, with Redis 7.0's replies and errors.
//!
//! Logged forms: every write is deterministic given the state it replays on (ZADD with
//! INCR included: the same parse of the same text gives the same double), so commands are
//! logged as given, ZMPOP as the ZPOPMIN / ZPOPMAX it amounts to; reads log nothing.

use super::keys::ScanOptions;
use super::{Action, AlreadyReplied, Args, Ctx, NOT_INTEGER, SYNTAX_ERROR, flags};
use crate::command;
use crate::glob::glob_match;
use crate::keyspace::{Entry, Keyspace, NO_EXPIRY, Value};
use crate::types::score;
use crate::types::{Set, ZSet};
use std::sync::Arc;

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

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

fn peek<'a>(keyspace: &'a Keyspace, db: usize, key: &[u8]) -> Option<&'a ZSet> {
    match keyspace.dbs[db].get(key).map(|e| &e.value) {
        Some(Value::ZSet(zset)) => Some(zset),
        _ => None,
    }
}

fn exists(ctx: &mut Ctx, key: &[u8]) -> Result<bool, AlreadyReplied> {
    Ok(ctx.read::<ZSet>(key)?.is_some())
}

fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

// ---------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// Adds or updates one element under `flags`: Ok(Some(new score)) if processed (added,
/// updated or unchanged), Ok(None) if the flags said no; `added`/`changed` count.
fn add_one(
    zset: &mut ZSet,
    member: &[u8],
    value: f64,
    flags: &AddFlags,
    added: &mut i64,
    changed: &mut i64,
) -> Result<Option<f64>, &'static str> {
    match zset.score(member) {
        Some(current) => {
            if flags.nx {
                return Ok(None);
            }
            let new = if flags.incr { current + value } else { value };
            if new.is_nan() {
                return Err(NAN_SCORE);
            }
            if (flags.lt && new >= current) || (flags.gt && new <= current) {
                return Ok(None);
            }
            if new != current || new.is_sign_negative() != current.is_sign_negative() {
                zset.insert(member, new);
                if new != current {
                    *changed += 1;
                }
            }
            Ok(Some(new))
        }
        None => {
            if flags.xx {
                return Ok(None);
            }
            zset.insert(member, value);
            *added += 1;
            Ok(Some(value))
        }
    }
}

fn zadd(ctx: &mut Ctx, args: &Args) -> Action {
    let mut flags = AddFlags::default();
    let mut at = 2;
    while at < args.len() {
        match lower(args[at]).as_str() {
            "nx" => flags.nx = true,
            "xx" => flags.xx = true,
            "gt" => flags.gt = true,
            "lt" => flags.lt = true,
            "ch" => flags.ch = true,
            "incr" => flags.incr = true,
            _ => break,
        }
        at += 1;
    }
    let pairs = &args[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    if flags.nx && flags.xx {
        ctx.out
            .error("ERR XX and NX options at the same time are not compatible");
        return Action::None;
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        ctx.out
            .error("ERR GT, LT, and/or NX options at the same time are not compatible");
        return Action::None;
    }
    if flags.incr && pairs.len() > 2 {
        ctx.out
            .error("ERR INCR option supports a single increment-element pair");
        return Action::None;
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        match score::parse(pair[0]) {
            Some(s) => scores.push(s),
            None => {
                ctx.out.error(NOT_FLOAT);
                return Action::None;
            }
        }
    }
    let key = args[1];
    let Ok(present) = ctx.check_type::<ZSet>(key) else {
        return Action::None;
    };
    if flags.xx && !present {
        // Nothing to update, nothing created.
        if flags.incr {
            ctx.out.null();
        } else {
            ctx.out.integer(0);
        }
        return Action::None;
    }
    let Ok(zset) = ctx.write_or_create::<ZSet>(key) else {
        return Action::None;
    };
    let (mut added, mut changed) = (0, 0);
    let mut last = None;
    for (pair, value) in pairs.chunks(2).zip(scores) {
        match add_one(zset, pair[1], value, &flags, &mut added, &mut changed) {
            Ok(result) => last = result,
            Err(error) => {
                ctx.remove_if_empty(key);
                ctx.out.error(error);
                return Action::None;
            }
        }
    }
    ctx.remove_if_empty(key);
    if added + changed > 0 {
        ctx.propagate(args);
    }
    if flags.incr {
        match last {
            Some(score) => ctx.out.double(score),
            None => ctx.out.null(),
        }
    } else {
        ctx.out
            .integer(if flags.ch { added + changed } else { added });
    }
    Action::None
}

fn zincrby(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(increment) = score::parse(args[2]) else {
        ctx.out.error(NOT_FLOAT);
        return Action::None;
    };
    let Ok(zset) = ctx.write_or_create::<ZSet>(args[1]) else {
        return Action::None;
    };
    let flags = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let (mut added, mut changed) = (0, 0);
    match add_one(zset, args[3], increment, &flags, &mut added, &mut changed) {
        Ok(Some(score)) => {
            ctx.propagate(args);
            ctx.out.double(score);
        }
        Ok(None) => unreachable!("no flag can refuse ZINCRBY"),
        Err(error) => {
            ctx.remove_if_empty(args[1]);
            ctx.out.error(error);
        }
    }
    Action::None
}

fn zrem(ctx: &mut Ctx, args: &Args) -> Action {
    super::picks::remove_members::<ZSet>(ctx, args)
}

// ---------------------------------------------------------------------------------------
// Point reads
// ---------------------------------------------------------------------------------------

fn zcard(ctx: &mut Ctx, args: &Args) -> Action {
    super::picks::cardinality::<ZSet>(ctx, args)
}

fn zscore(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(zset) = ctx.read::<ZSet>(args[1]) {
        match zset.and_then(|z| z.score(args[2])) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Action::None
}

fn zmscore(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let zset = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        match zset.and_then(|z| z.score(member)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Action::None
}

fn zrank(ctx: &mut Ctx, args: &Args) -> Action {
    let reverse = args[0].eq_ignore_ascii_case(b"zrevrank");
    if let Ok(zset) = ctx.read::<ZSet>(args[1]) {
        let rank = zset.and_then(|z| z.rank(args[2]).map(|r| (r, z.len())));
        match rank {
            Some((r, len)) => ctx
                .out
                .integer(if reverse { len - 1 - r } else { r } as i64),
            None => ctx.out.null(),
        }
    }
    Action::None
}

// ---------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct ScoreRange {
    min: f64,
    max: f64,
    min_ex: bool,
    max_ex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let bound = |arg: &[u8]| match arg.first() {
            Some(b'(') => score::parse_bound(&arg[1..]).map(|v| (v, true)),
            _ => score::parse_bound(arg).map(|v| (v, false)),
        };
        let (min, min_ex) = bound(min)?;
        let (max, max_ex) = bound(max)?;
        Some(ScoreRange {
            min,
            max,
            min_ex,
            max_ex,
        })
    }
    fn contains(&self, s: f64) -> bool {
        let above = if self.min_ex {
            s > self.min
        } else {
            s >= self.min
        };
        let below = if self.max_ex {
            s < self.max
        } else {
            s <= self.max
        };
        above && below
    }
}

#[derive(Clone)]
enum LexBound {
    Min,
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

#[derive(Clone)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        let bound = |arg: &[u8]| match arg.first() {
            Some(b'-') if arg.len() == 1 => Some(LexBound::Min),
            Some(b'+') if arg.len() == 1 => Some(LexBound::Max),
            Some(b'[') => Some(LexBound::Inclusive(arg[1..].to_vec())),
            Some(b'(') => Some(LexBound::Exclusive(arg[1..].to_vec())),
            _ => None,
        };
        Some(LexRange {
            min: bound(min)?,
            max: bound(max)?,
        })
    }
    /// Redis's `zzlIsInLexRange`: an empty range, a first element above the end or a
    /// last element below the start means nothing matches (checked before walking).
    fn may_match(&self, zset: &ZSet) -> bool {
        let rank = |b: &LexBound| match b {
            LexBound::Min => (0, None, false),
            LexBound::Inclusive(v) => (1, Some(v.clone()), false),
            LexBound::Exclusive(v) => (1, Some(v.clone()), true),
            LexBound::Max => (2, None, false),
        };
        let (min, max) = (rank(&self.min), rank(&self.max));
        let order = (min.0, &min.1).cmp(&(max.0, &max.1));
        if order.is_gt() || (order.is_eq() && (min.2 || max.2)) {
            return false;
        }
        // The lowest-scored element must not be above the end, the highest not below
        // the start (whatever the direction asked).
        match (zset.iter().next(), zset.iter().next_back()) {
            (Some((first, _)), Some((last, _))) => self.lte_max(&first) && self.gte_min(&last),
            _ => false,
        }
    }

    fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(b) => m >= b.as_slice(),
            LexBound::Exclusive(b) => m > b.as_slice(),
        }
    }
    fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => m <= b.as_slice(),
            LexBound::Exclusive(b) => m < b.as_slice(),
        }
    }
}

enum RangeKind {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Elements of `zset` in `kind`, in the requested direction, after LIMIT.
fn select(zset: &ZSet, kind: &RangeKind, reverse: bool, limit: Option<(i64, i64)>) -> Elements {
    use crate::types::zset::Element;
    // Walks the elements in place and copies only those picked.
    let ordered: Box<dyn Iterator<Item = Element<'_>> + '_> = if reverse {
        Box::new(zset.iter().rev())
    } else {
        zset.iter()
    };
    let picked: Box<dyn Iterator<Item = Element<'_>> + '_> = match kind {
        RangeKind::Rank(start, end) => {
            let len = zset.len() as i64;
            let start = if *start < 0 { start + len } else { *start }.max(0);
            let end = if *end < 0 { end + len } else { *end }.min(len - 1);
            if start > end || start >= len {
                return Vec::new();
            }
            Box::new(
                ordered
                    .skip(start as usize)
                    .take((end - start + 1) as usize),
            )
        }
        RangeKind::Score(range) => Box::new(ordered.filter(|(_, s)| range.contains(*s))),
        // Redis walks the (score-ordered) list: from the first element past the start
        // bound, while elements stay within the end bound. With equal scores, as lex
        // ranges assume, that is the range; otherwise it is what Redis answers.
        RangeKind::Lex(range) if !range.may_match(zset) => return Vec::new(),
        RangeKind::Lex(range) => {
            let starts = move |m: &[u8]| {
                if reverse {
                    range.lte_max(m)
                } else {
                    range.gte_min(m)
                }
            };
            let stays = move |m: &[u8]| {
                if reverse {
                    range.gte_min(m)
                } else {
                    range.lte_max(m)
                }
            };
            Box::new(
                ordered
                    .skip_while(move |(m, _)| !starts(m))
                    .take_while(move |(m, _)| stays(m)),
            )
        }
    };
    let (skip, take) = match limit {
        None => (0, usize::MAX),
        Some((offset, _)) if offset < 0 => return Vec::new(),
        Some((offset, count)) => (
            offset as usize,
            if count < 0 {
                usize::MAX
            } else {
                count as usize
            },
        ),
    };
    picked
        .skip(skip)
        .take(take)
        .map(|(m, s)| (m.into_owned(), s))
        .collect()
}

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

fn parse_kind(ctx: &mut Ctx, kind: &str, min: &[u8], max: &[u8]) -> Option<RangeKind> {
    match kind {
        "rank" => match (crate::resp::parse_i64(min), crate::resp::parse_i64(max)) {
            (Some(a), Some(b)) => Some(RangeKind::Rank(a, b)),
            _ => {
                ctx.out.error(NOT_INTEGER);
                None
            }
        },
        "score" => match ScoreRange::parse(min, max) {
            Some(r) => Some(RangeKind::Score(r)),
            None => {
                ctx.out.error("ERR min or max is not a float");
                None
            }
        },
        _ => match LexRange::parse(min, max) {
            Some(r) => Some(RangeKind::Lex(r)),
            None => {
                ctx.out.error("ERR min or max not valid string range item");
                None
            }
        },
    }
}

/// ZRANGE, ZRANGESTORE and the legacy range commands (Redis's zrangeGenericCommand).
fn zrange(ctx: &mut Ctx, args: &Args) -> Action {
    let name = lower(args[0]);
    let store = name == "zrangestore";
    let (source, first_opt) = if store { (args[2], 5) } else { (args[1], 4) };
    let (mut kind, mut reverse, auto) = match name.as_str() {
        "zrange" | "zrangestore" => ("rank", false, true),
        "zrevrange" => ("rank", true, false),
        "zrangebyscore" => ("score", false, false),
        "zrevrangebyscore" => ("score", true, false),
        "zrangebylex" => ("lex", false, false),
        _ => ("lex", true, false),
    };
    let mut with_scores = false;
    let mut limit: Option<(i64, i64)> = None;
    let mut at = first_opt;
    while at < args.len() {
        let option = lower(args[at]);
        match option.as_str() {
            "withscores" if !store => with_scores = true,
            "limit" if at + 2 < args.len() => {
                let (Some(offset), Some(count)) = (
                    crate::resp::parse_i64(args[at + 1]),
                    crate::resp::parse_i64(args[at + 2]),
                ) else {
                    ctx.out.error(NOT_INTEGER);
                    return Action::None;
                };
                limit = Some((offset, count));
                at += 2;
            }
            "rev" if auto => reverse = true,
            "byscore" if auto => kind = "score",
            "bylex" if auto => kind = "lex",
            _ => {
                ctx.out.error(SYNTAX_ERROR);
                return Action::None;
            }
        }
        at += 1;
    }
    // Redis's check is on the count: LIMIT <offset> -1 is "no limit", even by rank.
    if kind == "rank" && limit.is_some_and(|(_, count)| count != -1) {
        ctx.out.error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return Action::None;
    }
    if kind == "rank" {
        limit = None;
    }
    if with_scores && kind == "lex" {
        ctx.out
            .error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return Action::None;
    }
    let (mut min, mut max) = (args[first_opt - 2], args[first_opt - 1]);
    // The reverse forms take max before min (ZRANGE ... REV too, for scores and lex).
    if reverse && kind != "rank" {
        std::mem::swap(&mut min, &mut max);
    }
    let Some(range) = parse_kind(ctx, kind, min, max) else {
        return Action::None;
    };
    let Ok(found) = exists(ctx, source) else {
        return Action::None;
    };
    let elements = found
        .then(|| peek(ctx.keyspace, ctx.client.db, source))
        .flatten()
        .map(|z| select(z, &range, reverse, limit))
        .unwrap_or_default();
    if store {
        store_result(ctx, args[1], elements, args);
    } else {
        reply_elements(ctx, &elements, with_scores);
    }
    Action::None
}

/// Replaces `destination` with `elements` (deleting it when empty), logs `logged`, and
/// replies the count.
fn store_result(ctx: &mut Ctx, destination: &[u8], elements: Vec<(Vec<u8>, f64)>, logged: &Args) {
    ctx.expire_if_needed(destination);
    let count = elements.len();
    // An empty result deletes the destination; if there was none, nothing changed and
    // nothing is logged (so a WATCH on it is not touched, as in Redis).
    let changed = if count == 0 {
        ctx.db().remove(destination).is_some()
    } else {
        let zset = ZSet::from_elements(elements);
        ctx.db().insert(Entry {
            key: crate::keyspace::Key::from(destination),
            value: Value::ZSet(Arc::new(zset)),
            expire_at_ms: NO_EXPIRY,
        });
        true
    };
    if changed {
        ctx.propagate(logged);
    }
    ctx.out.integer(count as i64);
}

fn zcount(ctx: &mut Ctx, args: &Args) -> Action {
    let kind = if args[0].eq_ignore_ascii_case(b"zcount") {
        "score"
    } else {
        "lex"
    };
    let Some(range) = parse_kind(ctx, kind, args[2], args[3]) else {
        return Action::None;
    };
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let count = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten()
        .map_or(0, |z| select(z, &range, false, None).len());
    ctx.out.integer(count as i64);
    Action::None
}

fn zremrange(ctx: &mut Ctx, args: &Args) -> Action {
    let kind = match lower(args[0]).as_str() {
        "zremrangebyrank" => "rank",
        "zremrangebyscore" => "score",
        _ => "lex",
    };
    let Some(range) = parse_kind(ctx, kind, args[2], args[3]) else {
        return Action::None;
    };
    let Ok(zset) = ctx.write::<ZSet>(args[1]) else {
        return Action::None;
    };
    let Some(zset) = zset else {
        ctx.out.integer(0);
        return Action::None;
    };
    let doomed = select(zset, &range, false, None);
    for (member, _) in &doomed {
        zset.remove(member);
    }
    ctx.remove_if_empty(args[1]);
    if !doomed.is_empty() {
        ctx.propagate(args);
    }
    ctx.out.integer(doomed.len() as i64);
    Action::None
}

// ---------------------------------------------------------------------------------------
// Pops
// ---------------------------------------------------------------------------------------

/// Pops up to `count` elements from `key` (lowest scores first unless `max`), logging
/// the matching ZPOPMIN/ZPOPMAX. The key must hold a sorted set (checked by the caller).
pub(crate) fn pop_elements(ctx: &mut Ctx, key: &[u8], max: bool, count: usize) -> Elements {
    let Ok(Some(zset)) = ctx.write::<ZSet>(key) else {
        return Vec::new();
    };
    let popped: Vec<(Vec<u8>, f64)> = if max {
        zset.iter()
            .rev()
            .take(count)
            .map(|(m, s)| (m.into_owned(), s))
            .collect()
    } else {
        zset.iter()
            .take(count)
            .map(|(m, s)| (m.into_owned(), s))
            .collect()
    };
    for (member, _) in &popped {
        zset.remove(member);
    }
    ctx.remove_if_empty(key);
    if !popped.is_empty() {
        let count_text = itoa::Buffer::new().format(popped.len()).to_owned();
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        ctx.propagate(&[name, key, count_text.as_bytes()]);
    }
    popped
}

fn zpop(ctx: &mut Ctx, args: &Args) -> Action {
    let max = args[0].eq_ignore_ascii_case(b"zpopmax");
    if args.len() > 3 {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let Ok(count) = super::optional_count(ctx, args.get(2)) else {
        return Action::None;
    };
    let Ok(found) = ctx.check_type::<ZSet>(args[1]) else {
        return Action::None;
    };
    let popped = if found {
        pop_elements(ctx, args[1], max, count.unwrap_or(1))
    } else {
        Vec::new()
    };
    // RESP3 pairs only when a count was given (Redis keeps the flat form otherwise).
    let pairs = count.is_some() && ctx.client.resp3;
    if pairs {
        reply_elements(ctx, &popped, true);
    } else {
        ctx.out.array(popped.len() * 2);
        for (member, score) in &popped {
            ctx.out.bulk(member);
            ctx.out.double(*score);
        }
    }
    Action::None
}

/// ZMPOP / BZMPOP arguments after the timeout: numkeys key... MIN|MAX [COUNT n].
pub(crate) struct MpopArgs<'a> {
    pub keys: Vec<&'a [u8]>,
    pub max: bool,
    pub count: usize,
}

pub(crate) fn parse_mpop<'a>(ctx: &mut Ctx, args: &[&'a [u8]]) -> Option<MpopArgs<'a>> {
    let numkeys = match crate::resp::parse_i64(args[0]) {
        Some(n) if n > 0 => n as usize,
        _ => {
            ctx.out.error("ERR numkeys should be greater than 0");
            return None;
        }
    };
    if numkeys + 1 >= args.len() {
        // No MIN|MAX after the keys.
        ctx.out.error(SYNTAX_ERROR);
        return None;
    }
    let keys = args[1..=numkeys].to_vec();
    let rest = &args[numkeys + 1..];
    let max = match rest.first().map(|w| lower(w)) {
        Some(w) if w == "min" => false,
        Some(w) if w == "max" => true,
        _ => {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
    };
    let mut count = 1;
    let mut at = 1;
    let mut seen_count = false;
    while at < rest.len() {
        if rest[at].eq_ignore_ascii_case(b"count") && at + 1 < rest.len() && !seen_count {
            match crate::resp::parse_i64(rest[at + 1]) {
                Some(n) if n > 0 => count = n as usize,
                _ => {
                    ctx.out.error("ERR count should be greater than 0");
                    return None;
                }
            }
            seen_count = true;
            at += 2;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
    }
    Some(MpopArgs { keys, max, count })
}

/// [key, [[member, score], ...]] (the MPOP reply).
pub(crate) fn reply_popped_with_key(ctx: &mut Ctx, key: &[u8], popped: &[(Vec<u8>, f64)]) {
    ctx.out.array(2);
    ctx.out.bulk(key);
    ctx.out.array(popped.len());
    for (member, score) in popped {
        ctx.out.array(2);
        ctx.out.bulk(member);
        ctx.out.double(*score);
    }
}

fn zmpop(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(parsed) = parse_mpop(ctx, &args[1..]) else {
        return Action::None;
    };
    for key in &parsed.keys {
        match ctx.check_type::<ZSet>(key) {
            Err(AlreadyReplied) => return Action::None,
            Ok(false) => continue,
            Ok(true) => {
                let popped = pop_elements(ctx, key, parsed.max, parsed.count);
                reply_popped_with_key(ctx, key, &popped);
                return Action::None;
            }
        }
    }
    ctx.out.null_array();
    Action::None
}

// ---------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN
// ---------------------------------------------------------------------------------------

fn zrandmember(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((count, with_scores)) = super::picks::random_args(ctx, args, "withscores") else {
        return Action::None;
    };
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let zset = found
        .then(|| peek(ctx.keyspace, ctx.client.db, args[1]))
        .flatten();
    let Some(count) = count else {
        match zset {
            Some(z) => {
                let index = rand::random_range(0..z.len());
                let (member, _) = z.get_index(index).expect("in range");
                ctx.out.bulk(&member);
            }
            None => ctx.out.null(),
        }
        return Action::None;
    };
    let Some(zset) = zset.filter(|_| count != 0) else {
        ctx.out.array(0);
        return Action::None;
    };
    let all: Vec<(Vec<u8>, f64)> = zset.iter().map(|(m, s)| (m.into_owned(), s)).collect();
    let picks = super::picks::random_picks(all.len(), count);
    let picked: Vec<(Vec<u8>, f64)> = picks.into_iter().map(|i| all[i].clone()).collect();
    reply_elements(ctx, &picked, with_scores);
    Action::None
}

fn zscan(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((cursor, ScanOptions { count, pattern, .. })) =
        super::picks::scan_prelude::<ZSet>(ctx, args)
    else {
        return Action::None;
    };
    let zset = peek(ctx.keyspace, ctx.client.db, args[1]).expect("checked above");
    // Positions in descending order (like the hash and set scans): elements present
    // throughout are returned even as others come and go.
    let all: Vec<(Vec<u8>, f64)> = zset.iter().map(|(m, s)| (m.into_owned(), s)).collect();
    let (start, end) = if matches!(zset, ZSet::Listpack(_)) {
        (all.len(), 0)
    } else {
        crate::types::scan_window(cursor, all.len(), count)
    };
    let picked: Vec<&(Vec<u8>, f64)> = all[end..start]
        .iter()
        .filter(|(m, _)| pattern.is_none_or(|p| glob_match(p, m, false)))
        .collect();
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(end).as_bytes());
    ctx.out.array(picked.len() * 2);
    for (member, score) in picked {
        ctx.out.bulk(member);
        ctx.out.double(*score);
    }
    Action::None
}

// ---------------------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (and STORE), ZINTERCARD
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The elements of every input (a sorted set, or a set with scores of 1); None after
/// WRONGTYPE.
/// Owned (member, score) pairs, in order.
type Elements = Vec<(Vec<u8>, f64)>;

fn inputs(ctx: &mut Ctx, keys: &[&[u8]]) -> Option<Vec<Option<Elements>>> {
    let mut all = Vec::with_capacity(keys.len());
    for key in keys {
        ctx.expire_if_needed(key);
        let value = ctx.keyspace.dbs[ctx.client.db].get(key).map(|e| &e.value);
        all.push(match value {
            None => None,
            Some(Value::ZSet(z)) => Some(z.iter().map(|(m, s)| (m.into_owned(), s)).collect()),
            Some(Value::Set(s)) => Some(members_of_set(s)),
            Some(_) => {
                ctx.wrong_type();
                return None;
            }
        });
    }
    Some(all)
}

fn members_of_set(set: &Set) -> Elements {
    set.iter().map(|m| (m.into_owned(), 1.0)).collect()
}

fn weighted(score: f64, weight: f64) -> f64 {
    let value = score * weight;
    if value.is_nan() { 0.0 } else { value }
}

fn aggregate(into: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *into += value;
            if into.is_nan() {
                *into = 0.0;
            }
        }
        Aggregate::Min => *into = into.min(value),
        Aggregate::Max => *into = into.max(value),
    }
}

/// Computes ZUNION / ZINTER / ZDIFF over `sources`; the result in (score, member) order.
fn combine(
    sources: Vec<Option<Elements>>,
    op: &str,
    weights: &[f64],
    how: Aggregate,
    limit: usize,
) -> Elements {
    let mut result: indexmap::IndexMap<Vec<u8>, f64> = indexmap::IndexMap::new();
    match op {
        "union" => {
            for (i, source) in sources.iter().enumerate() {
                for (member, score) in source.iter().flatten() {
                    let value = weighted(*score, weights[i]);
                    match result.get_mut(member) {
                        Some(into) => aggregate(into, value, how),
                        None => {
                            result.insert(member.clone(), value);
                        }
                    }
                }
            }
        }
        "inter" => {
            if sources.iter().any(Option::is_none) {
                return Vec::new();
            }
            let sources: Vec<Vec<(Vec<u8>, f64)>> = sources.into_iter().flatten().collect();
            let lookups: Vec<hashbrown::HashMap<&[u8], f64>> = sources
                .iter()
                .map(|s| s.iter().map(|(m, v)| (m.as_slice(), *v)).collect())
                .collect();
            for (member, score) in &sources[0] {
                let mut value = weighted(*score, weights[0]);
                let mut everywhere = true;
                for (j, lookup) in lookups.iter().enumerate().skip(1) {
                    match lookup.get(member.as_slice()) {
                        Some(s) => aggregate(&mut value, weighted(*s, weights[j]), how),
                        None => {
                            everywhere = false;
                            break;
                        }
                    }
                }
                if everywhere {
                    result.insert(member.clone(), value);
                    if limit > 0 && result.len() >= limit {
                        break;
                    }
                }
            }
        }
        _ => {
            let Some(first) = &sources[0] else {
                return Vec::new();
            };
            let others: Vec<hashbrown::HashSet<&[u8]>> = sources[1..]
                .iter()
                .flatten()
                .map(|s| s.iter().map(|(m, _)| m.as_slice()).collect())
                .collect();
            for (member, score) in first {
                if others.iter().all(|o| !o.contains(member.as_slice())) {
                    result.insert(member.clone(), *score);
                }
            }
        }
    }
    let mut elements: Vec<(Vec<u8>, f64)> = result.into_iter().collect();
    elements.sort_by(|a, b| {
        crate::types::zset::Score(a.1)
            .cmp(&crate::types::zset::Score(b.1))
            .then_with(|| a.0.cmp(&b.0))
    });
    elements
}

fn zsetop(ctx: &mut Ctx, args: &Args) -> Action {
    let name = lower(args[0]);
    let store = name.ends_with("store");
    let op = &name[1..if store { name.len() - 5 } else { name.len() }];
    let numkeys_at = if store { 2 } else { 1 };
    let Some(numkeys) = crate::resp::parse_i64(args[numkeys_at]) else {
        ctx.out.error(NOT_INTEGER);
        return Action::None;
    };
    if numkeys < 1 {
        ctx.out.error(&format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
        return Action::None;
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - numkeys_at - 1 {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let keys = &args[numkeys_at + 1..numkeys_at + 1 + numkeys];
    // Redis reads (and type-checks) the inputs before it parses the options.
    let Some(sources) = inputs(ctx, keys) else {
        return Action::None;
    };
    let mut weights = vec![1.0; numkeys];
    let mut how = Aggregate::Sum;
    let mut with_scores = false;
    let mut at = numkeys_at + 1 + numkeys;
    while at < args.len() {
        let option = lower(args[at]);
        let remaining = args.len() - at - 1;
        if option == "weights" && op != "diff" && remaining >= numkeys {
            for (i, weight) in weights.iter_mut().enumerate() {
                match score::parse(args[at + 1 + i]) {
                    Some(w) => *weight = w,
                    None => {
                        ctx.out.error("ERR weight value is not a float");
                        return Action::None;
                    }
                }
            }
            at += numkeys;
        } else if option == "aggregate" && op != "diff" && remaining >= 1 {
            how = match lower(args[at + 1]).as_str() {
                "sum" => Aggregate::Sum,
                "min" => Aggregate::Min,
                "max" => Aggregate::Max,
                _ => {
                    ctx.out.error(SYNTAX_ERROR);
                    return Action::None;
                }
            };
            at += 1;
        } else if option == "withscores" && !store {
            with_scores = true;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
        at += 1;
    }
    let elements = combine(sources, op, &weights, how, 0);
    if store {
        store_result(ctx, args[1], elements, args);
    } else {
        reply_elements(ctx, &elements, with_scores);
    }
    Action::None
}

fn zintercard(ctx: &mut Ctx, args: &Args) -> Action {
    // The ZUNION family's numkeys rules (not SINTERCARD's).
    let numkeys = match crate::resp::parse_i64(args[1]) {
        None => {
            ctx.out.error(NOT_INTEGER);
            return Action::None;
        }
        Some(n) if n < 1 => {
            ctx.out
                .error("ERR at least 1 input key is needed for 'zintercard' command");
            return Action::None;
        }
        Some(n) => n as usize,
    };
    if numkeys > args.len() - 2 {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let keys = &args[2..2 + numkeys];
    let Some(sources) = inputs(ctx, keys) else {
        return Action::None;
    };
    let Some(limit) = super::picks::intercard_limit(ctx, &args[2 + numkeys..]) else {
        return Action::None;
    };
    let weights = vec![1.0; numkeys];
    let count = combine(sources, "inter", &weights, Aggregate::Sum, limit).len();
    ctx.out.integer(count as i64);
    Action::None
}
