//! Pops: ZPOPMIN, ZPOPMAX and ZMPOP, and the pieces the blocking forms (BZPOPMIN,
//! BZPOPMAX, BZMPOP in `commands::blocking`) share with them.

use super::{Elements, lower, reply_elements};
use crate::commands::{
    Action, AlreadyReplied, Args, Ctx, EventClass, SYNTAX_ERROR, optional_count,
};
use crate::types::ZSet;

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
    let emptied = ctx.remove_if_empty(key);
    if !popped.is_empty() {
        let event = if max { "zpopmax" } else { "zpopmin" };
        ctx.notify(EventClass::ZSet, event, key);
        if emptied {
            ctx.notify(EventClass::Generic, "del", key);
        }
        let count_text = itoa::Buffer::new().format(popped.len()).to_owned();
        let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
        ctx.propagate(&[name, key, count_text.as_bytes()]);
    }
    popped
}

pub(super) fn zpop(ctx: &mut Ctx, args: &Args) -> Action {
    let max = args[0].eq_ignore_ascii_case(b"zpopmax");
    if args.len() > 3 {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let Ok(count) = optional_count(ctx, args.get(2)) else {
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

pub(super) fn zmpop(ctx: &mut Ctx, args: &Args) -> Action {
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
