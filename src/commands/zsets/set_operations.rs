//! Set operations across keys: ZUNION, ZINTER and ZDIFF (with WEIGHTS / AGGREGATE /
//! WITHSCORES), their STORE forms, and ZINTERCARD. A plain set is an input too, each
//! member with a score of 1.

use super::{Elements, lower, reply_elements, store_result};
use crate::commands::{Action, Args, Ctx, NOT_INTEGER, SYNTAX_ERROR, picks};
use crate::keyspace::Value;
use crate::types::Set;
use crate::types::score;

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The elements of every input (a sorted set, or a set with scores of 1); None after
/// WRONGTYPE.
fn inputs(ctx: &mut Ctx, keys: &[&[u8]]) -> Option<Vec<Option<Elements>>> {
    let mut all = Vec::with_capacity(keys.len());
    for key in keys {
        let value = ctx.lookup_read(key).map(|e| &e.value);
        all.push(match value {
            None => None,
            Some(Value::ZSet(z, _)) => Some(z.iter().map(|(m, s)| (m.into_owned(), s)).collect()),
            Some(Value::Set(s, _)) => Some(members_of_set(s)),
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
                        // Redis turns a NaN product into 0 for the first input only: the
                        // others reach the aggregate as they are (`inf * 0` then makes a
                        // sum NaN, which becomes 0, and leaves MIN and MAX unchanged).
                        Some(s) => aggregate(&mut value, *s * weights[j], how),
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

pub(super) fn zsetop(ctx: &mut Ctx, args: &Args) -> Action {
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
    // Read lookups, for the STORE forms too (Redis's).
    let Some(sources) = ctx.reading(|ctx| inputs(ctx, keys)) else {
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
        // The command's name is its event: zunionstore, zinterstore, zdiffstore.
        store_result(ctx, args[1], elements, &name, args);
    } else {
        reply_elements(ctx, &elements, with_scores);
    }
    Action::None
}

pub(super) fn zintercard(ctx: &mut Ctx, args: &Args) -> Action {
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
    let Some(limit) = picks::intercard_limit(ctx, &args[2 + numkeys..]) else {
        return Action::None;
    };
    let weights = vec![1.0; numkeys];
    let count = combine(sources, "inter", &weights, Aggregate::Sum, limit).len();
    ctx.out.integer(count as i64);
    Action::None
}
