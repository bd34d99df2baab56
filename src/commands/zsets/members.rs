//! Commands on single members: ZADD, ZINCRBY and ZREM write them one by one; ZCARD,
//! ZSCORE, ZMSCORE, ZRANK and ZREVRANK read them.

use super::{exists, lower, peek};
use crate::commands::{Action, Args, Ctx, EventClass, SYNTAX_ERROR, picks};
use crate::types::ZSet;
use crate::types::score;

const NOT_FLOAT: &str = "ERR value is not a valid float";

const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

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
            // Redis's `score != curscore`: -0 and 0 are equal, so a member keeps the sign
            // it has (a skip list keeps -0; a listpack stores it as 0 anyway).
            if new != current {
                zset.insert(member, new);
                *changed += 1;
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

pub(crate) fn zadd(ctx: &mut Ctx, args: &Args) -> Action {
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
        let event = if flags.incr { "zincr" } else { "zadd" };
        ctx.notify(EventClass::ZSet, event, key);
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

pub(super) fn zincrby(ctx: &mut Ctx, args: &Args) -> Action {
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
            // An increment that leaves the score as it was is no change to Redis.
            if added + changed > 0 {
                ctx.notify(EventClass::ZSet, "zincr", args[1]);
            }
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

pub(super) fn zrem(ctx: &mut Ctx, args: &Args) -> Action {
    picks::remove_members::<ZSet>(ctx, args)
}

pub(super) fn zcard(ctx: &mut Ctx, args: &Args) -> Action {
    picks::cardinality::<ZSet>(ctx, args)
}

pub(super) fn zscore(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(zset) = ctx.read::<ZSet>(args[1]) {
        match zset.and_then(|z| z.score(args[2])) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Action::None
}

pub(super) fn zmscore(ctx: &mut Ctx, args: &Args) -> Action {
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

pub(super) fn zrank(ctx: &mut Ctx, args: &Args) -> Action {
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
