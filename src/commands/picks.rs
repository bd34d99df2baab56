//! What the hash, set and sorted-set commands share: removal by element (HDEL, SREM,
//! ZREM), cardinality (HLEN, SCARD, ZCARD), the HSCAN / SSCAN / ZSCAN preamble, and the
//! count rules of HRANDFIELD / SRANDMEMBER / ZRANDMEMBER.

use super::keys::{ScanOptions, parse_cursor, scan_options};
use super::{Action, Args, Collection, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR};
use crate::resp::ReplyWriter;
use crate::types::{Hash, Set, ZSet};

/// A collection addressed by element (a hash's field, a set's or sorted set's member).
pub(crate) trait Members: Collection {
    /// The keyspace event of a removal (Redis's for HDEL, SREM, ZREM), and its class.
    const REMOVED: (EventClass, &'static str);
    fn count(&self) -> usize;
    fn remove_member(&mut self, member: &[u8]) -> bool;
}

impl Members for Hash {
    const REMOVED: (EventClass, &'static str) = (EventClass::Hash, "hdel");
    fn count(&self) -> usize {
        self.len()
    }
    fn remove_member(&mut self, member: &[u8]) -> bool {
        self.remove(member)
    }
}

impl Members for Set {
    const REMOVED: (EventClass, &'static str) = (EventClass::Set, "srem");
    fn count(&self) -> usize {
        self.len()
    }
    fn remove_member(&mut self, member: &[u8]) -> bool {
        self.remove(member)
    }
}

impl Members for ZSet {
    const REMOVED: (EventClass, &'static str) = (EventClass::ZSet, "zrem");
    fn count(&self) -> usize {
        self.len()
    }
    fn remove_member(&mut self, member: &[u8]) -> bool {
        self.remove(member)
    }
}

/// HDEL / SREM / ZREM key element...: the number removed; the key goes when emptied, and
/// the command is logged and notified (then `del` if emptied) only if it removed
/// something.
pub(crate) fn remove_members<T: Members>(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(collection) = ctx.write::<T>(args[1]) else {
        return Action::None;
    };
    let Some(collection) = collection else {
        ctx.out.integer(0);
        return Action::None;
    };
    let mut removed = 0;
    for member in &args[2..] {
        removed += collection.remove_member(member) as i64;
        if collection.count() == 0 {
            break;
        }
    }
    let emptied = ctx.remove_if_empty(args[1]);
    if removed > 0 {
        let (class, event) = T::REMOVED;
        ctx.notify(class, event, args[1]);
        if emptied {
            ctx.notify(EventClass::Generic, "del", args[1]);
        }
        ctx.propagate(args);
    }
    ctx.out.integer(removed);
    Action::None
}

/// HLEN / SCARD / ZCARD.
pub(crate) fn cardinality<T: Members>(ctx: &mut Ctx, args: &Args) -> Action {
    if let Ok(collection) = ctx.read::<T>(args[1]) {
        let len = collection.map_or(0, T::count);
        ctx.out.integer(len as i64);
    }
    Action::None
}

/// `KEY cursor [MATCH p] [COUNT n]` in Redis's order: the cursor, then the key (missing:
/// the empty scan is replied; WRONGTYPE), then the options. Some((cursor, options)) when
/// the scan should run.
pub(crate) fn scan_prelude<'a, T: Collection>(
    ctx: &mut Ctx,
    args: &[&'a [u8]],
) -> Option<(u64, ScanOptions<'a>)> {
    let Some(cursor) = parse_cursor(args[2]) else {
        ctx.out.error("ERR invalid cursor");
        return None;
    };
    match ctx.read::<T>(args[1]) {
        Err(_) => return None,
        Ok(None) => {
            ctx.out.array(2);
            ctx.out.bulk(b"0");
            ctx.out.array(0);
            return None;
        }
        Ok(Some(_)) => {}
    }
    let options = scan_options(ctx, &args[3..], false)?;
    Some((cursor, options))
}

/// Writes a scan reply: the next cursor and the items.
pub(crate) fn reply_scan<T: AsRef<[u8]>>(ctx: &mut Ctx, next: u64, items: &[T]) {
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(items.len());
    for item in items {
        ctx.out.bulk(item.as_ref());
    }
}

/// HRANDFIELD's / ZRANDMEMBER's arguments after the key: the count, if given, and whether
/// `with_word` (WITHVALUES / WITHSCORES) follows. None after Redis's error, in Redis's
/// order: the count first (its whole range but `i64::MIN`, whose negation overflows), then
/// the syntax, then a count that doubled for the pairs would not fit.
pub(crate) fn random_args(
    ctx: &mut Ctx,
    args: &Args,
    with_word: &str,
) -> Option<(Option<i64>, bool)> {
    if args.len() < 3 {
        return Some((None, false));
    }
    let count = random_count(ctx, args[2])?;
    if args.len() > 4 || (args.len() == 4 && !args[3].eq_ignore_ascii_case(with_word.as_bytes())) {
        ctx.out.error(SYNTAX_ERROR);
        return None;
    }
    let with = args.len() == 4;
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        ctx.out.error("ERR value is out of range");
        return None;
    }
    Some((Some(count), with))
}

/// The count of HRANDFIELD / SRANDMEMBER / ZRANDMEMBER: any integer whose negation fits
/// (Redis's `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)`). None after the error.
pub(crate) fn random_count(ctx: &mut Ctx, arg: &[u8]) -> Option<i64> {
    match crate::resp::parse_i64(arg) {
        None => {
            ctx.out.error(NOT_INTEGER);
            None
        }
        Some(i64::MIN) => {
            ctx.out.error(
                "ERR value is out of range, value must between -9223372036854775807 and \
                 9223372036854775807",
            );
            None
        }
        Some(n) => Some(n),
    }
}

/// The positions a random-members reply shows for `count` out of `len` (len > 0,
/// count != 0): distinct ones when positive (all of them when count >= len), |count| with
/// repeats when negative. Drawn as the reply is written: a negative count is the client's
/// number, not the collection's size, so nothing is allocated from it.
pub(crate) fn random_picks(len: usize, count: i64) -> Picks {
    if count < 0 {
        Picks::Repeating {
            left: count.unsigned_abs(),
            len,
        }
    } else if count as u64 >= len as u64 {
        Picks::Distinct((0..len).collect::<Vec<_>>().into_iter())
    } else {
        Picks::Distinct(
            rand::seq::index::sample(&mut rand::rng(), len, count as usize)
                .into_vec()
                .into_iter(),
        )
    }
}

/// The positions of `random_picks`, in the order they are replied.
pub(crate) enum Picks {
    /// `left` more positions drawn independently from `0..len`.
    Repeating { left: u64, len: usize },
    /// Distinct positions, at most the collection's size.
    Distinct(std::vec::IntoIter<usize>),
}

impl Picks {
    /// How many positions the reply announces.
    pub(crate) fn announced(&self) -> u64 {
        match self {
            Picks::Repeating { left, .. } => *left,
            Picks::Distinct(positions) => positions.len() as u64,
        }
    }
}

impl Picks {
    /// Writes the reply: the array's length as announced (doubled for RESP2 pairs), then
    /// each position through `write` (a pair in RESP3 is an array of two), stopping once
    /// the reply passes `limit` (`Ctx::reply_limit`).
    pub(crate) fn reply(
        self,
        out: &mut ReplyWriter,
        resp3: bool,
        pairs: bool,
        limit: Option<usize>,
        mut write: impl FnMut(&mut ReplyWriter, usize),
    ) {
        let announced = self.announced() as usize;
        out.array(if pairs && !resp3 {
            announced * 2
        } else {
            announced
        });
        for index in self {
            if pairs && resp3 {
                out.array(2);
            }
            write(out, index);
            if limit.is_some_and(|limit| out.buf.len() > limit) {
                break;
            }
        }
    }
}

impl Iterator for Picks {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        match self {
            Picks::Repeating { left, len } => {
                if *left == 0 {
                    return None;
                }
                *left -= 1;
                Some(rand::random_range(0..*len))
            }
            Picks::Distinct(positions) => positions.next(),
        }
    }
}

/// SINTERCARD's and ZINTERCARD's options after the keys: `[LIMIT n]` (repeatable, the last
/// wins; 0 is no limit). None after Redis's error.
pub(crate) fn intercard_limit(ctx: &mut Ctx, mut rest: &[&[u8]]) -> Option<usize> {
    let mut limit = 0usize;
    while !rest.is_empty() {
        if rest.len() >= 2 && rest[0].eq_ignore_ascii_case(b"limit") {
            match crate::resp::parse_i64(rest[1]) {
                Some(n) if n >= 0 => limit = n as usize,
                _ => {
                    ctx.out.error("ERR LIMIT can't be negative");
                    return None;
                }
            }
            rest = &rest[2..];
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
    }
    Some(limit)
}
