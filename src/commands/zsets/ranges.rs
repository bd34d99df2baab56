//! Range queries: the three kinds of range (by rank, by score, by lexicographical
//! order), their parsing, the walk that selects a range's elements, and the commands
//! built on them: ZRANGE with BYSCORE / BYLEX / REV / LIMIT, ZRANGESTORE, the legacy
//! ZREVRANGE and Z[REV]RANGEBY{SCORE,LEX}, ZCOUNT, ZLEXCOUNT and ZREMRANGEBY*.

use super::{Elements, exists, lower, peek, reply_elements, store_result};
use crate::commands::{Action, Args, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR};
use crate::types::ZSet;
use crate::types::score;

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
pub(super) fn zrange(ctx: &mut Ctx, args: &Args) -> Action {
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
    // A read lookup, for ZRANGESTORE too (Redis's).
    let Ok(found) = ctx.reading(|ctx| exists(ctx, source)) else {
        return Action::None;
    };
    let elements = found
        .then(|| peek(ctx.keyspace, ctx.client.db, source))
        .flatten()
        .map(|z| select(z, &range, reverse, limit))
        .unwrap_or_default();
    if store {
        store_result(ctx, args[1], elements, "zrangestore", args);
    } else {
        reply_elements(ctx, &elements, with_scores);
    }
    Action::None
}

pub(super) fn zcount(ctx: &mut Ctx, args: &Args) -> Action {
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

pub(super) fn zremrange(ctx: &mut Ctx, args: &Args) -> Action {
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
    let emptied = ctx.remove_if_empty(args[1]);
    if !doomed.is_empty() {
        let event = format!("zremrangeby{kind}");
        ctx.notify(EventClass::ZSet, &event, args[1]);
        if emptied {
            ctx.notify(EventClass::Generic, "del", args[1]);
        }
        ctx.propagate(args);
    }
    ctx.out.integer(doomed.len() as i64);
    Action::None
}
