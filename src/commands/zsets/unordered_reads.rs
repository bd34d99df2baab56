//! Reads that hand out members in no score order: ZRANDMEMBER's random picks and
//! ZSCAN's cursor walk.

use super::{exists, peek};
use crate::commands::keys::ScanOptions;
use crate::commands::{Action, Args, Ctx, picks};
use crate::glob::glob_match;
use crate::types::ZSet;

pub(super) fn zrandmember(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((count, with_scores)) = picks::random_args(ctx, args, "withscores") else {
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
    let picks = picks::random_picks(all.len(), count);
    let limit = ctx.reply_limit();
    picks.reply(
        &mut ctx.out,
        ctx.client.resp3,
        with_scores,
        limit,
        |out, index| {
            let (member, score) = &all[index];
            out.bulk(member);
            if with_scores {
                out.double(*score);
            }
        },
    );
    Action::None
}

pub(super) fn zscan(ctx: &mut Ctx, args: &Args) -> Action {
    let Some((cursor, ScanOptions { count, pattern, .. })) = picks::scan_prelude::<ZSet>(ctx, args)
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
        // A bulk string in RESP3 too: Redis's SCAN replies strings whatever the type.
        ctx.out
            .bulk(crate::types::score::reply_text(*score).as_bytes());
    }
    Action::None
}
