//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN and the rest), as Redis 7.0 does it.
//!
//! A blocking command that finds nothing to take returns `Action::Block`; the server
//! parks the client (its later input waits) and lists it here under each of its keys, in
//! arrival order. A logged change to a key someone waits on (`Ctx::propagate`) marks the
//! key ready; after the command that did it (after a whole EXEC), the server runs each
//! waiting client's command again in `BlockMode::Serving(key)`, oldest first: it takes
//! from that key only, and logs what it did (LPOP, LMOVE, ZPOPMIN…), never the blocking
//! command. A client that still finds nothing (another took it, the key changed type)
//! stays blocked. Timeouts answer a null array, as Redis 7.0 does for every such command.

use super::lists::Move;
use super::{Action, Args, Ctx, flags};
use crate::command;
use crate::keyspace::Value;
use crate::types::list::End;
use bytes::Bytes;
use hashbrown::{HashMap, HashSet};
use std::collections::VecDeque;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "blpop",
            -3,
            WRITE | BLOCKING | NO_SCRIPT,
            (1, -2, 1),
            "list",
            "Remove and get the first element in a list, or block until one is available",
            blpop
        ),
        command!(
            "brpop",
            -3,
            WRITE | BLOCKING | NO_SCRIPT,
            (1, -2, 1),
            "list",
            "Remove and get the last element in a list, or block until one is available",
            brpop
        ),
        command!(
            "blmove",
            6,
            WRITE | DENYOOM | BLOCKING | NO_SCRIPT,
            (1, 2, 1),
            "list",
            "Pop an element from a list, push it to another list and return it; or block until one is available",
            blmove
        ),
        command!(
            "brpoplpush",
            4,
            WRITE | DENYOOM | BLOCKING | NO_SCRIPT,
            (1, 2, 1),
            "list",
            "Pop an element from a list, push it to another list and return it; or block until one is available",
            brpoplpush
        ),
        command!(
            "blmpop",
            -5,
            WRITE | BLOCKING | MOVABLEKEYS,
            (0, 0, 0),
            "list",
            "Pop elements from a list, or block until one is available",
            blmpop
        ),
        command!(
            "bzpopmin",
            -3,
            WRITE | FAST | BLOCKING | NO_SCRIPT,
            (1, -2, 1),
            "sorted_set",
            "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available",
            bzpop
        ),
        command!(
            "bzpopmax",
            -3,
            WRITE | FAST | BLOCKING | NO_SCRIPT,
            (1, -2, 1),
            "sorted_set",
            "Remove and return the member with the highest score from one or more sorted sets, or block until one is available",
            bzpop
        ),
        command!(
            "bzmpop",
            -5,
            WRITE | BLOCKING | MOVABLEKEYS,
            (0, 0, 0),
            "sorted_set",
            "Remove and return members with scores in a sorted set or block until one is available",
            bzmpop
        ),
    ]
}

/// How a blocking command may behave in this run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BlockMode {
    /// Block if nothing is there.
    #[default]
    Normal,
    /// Inside EXEC (or a replay): never block; answer as if timed out.
    Never,
    /// Re-run for a blocked client because this key became ready: take from it only;
    /// nothing there, or the wrong type, means stay blocked (no reply written).
    Serving(Bytes),
}

/// A client parked by a blocking command (kept by the server with the session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Bytes>,
    /// Unix milliseconds, or None for "forever" (timeout 0).
    pub deadline_ms: Option<i64>,
    /// The command to run again when a key is ready.
    pub command: Vec<Vec<u8>>,
    /// WAIT: no key, but replicas' acknowledgements (answered with their count).
    pub replicas: Option<crate::replication::wait::WaitFor>,
}

/// Which clients wait on which keys, and the keys that became ready.
#[derive(Default)]
pub struct BlockedKeys {
    /// Per key: (session token, client id), oldest first.
    waiting: HashMap<(usize, Bytes), VecDeque<(usize, u64)>>,
    ready: Vec<(usize, Bytes)>,
    ready_set: HashSet<(usize, Bytes)>,
    /// Clients blocked now (INFO `blocked_clients`).
    clients: usize,
}

impl BlockedKeys {
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub fn clients(&self) -> usize {
        self.clients
    }

    pub fn block(&mut self, token: usize, client: u64, blocked: &Blocked) {
        self.clients += 1;
        for key in &blocked.keys {
            let queue = self.waiting.entry((blocked.db, key.clone())).or_default();
            if !queue.iter().any(|(_, id)| *id == client) {
                queue.push_back((token, client));
            }
        }
    }

    pub fn unblock(&mut self, client: u64, blocked: &Blocked) {
        self.clients -= 1;
        for key in &blocked.keys {
            let entry = (blocked.db, key.clone());
            if let Some(queue) = self.waiting.get_mut(&entry) {
                queue.retain(|(_, id)| *id != client);
                if queue.is_empty() {
                    self.waiting.remove(&entry);
                }
            }
        }
    }

    /// A logged change touched `key`: if someone waits on it, it is served after the
    /// current command.
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        let lookup = super::DbKey(db, key);
        if self.waiting.contains_key(&lookup) && !self.ready_set.contains(&lookup) {
            let entry = (db, Bytes::copy_from_slice(key));
            self.ready_set.insert(entry.clone());
            self.ready.push(entry);
        }
    }

    /// Database `db` is flushed or swapped: every key waited on in it may have changed
    /// (Redis's `scanDatabaseForReadyKeys` and `scanDatabaseForDeletedStreams`).
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<Bytes> = self
            .waiting
            .keys()
            .filter(|(waited_db, _)| *waited_db == db)
            .map(|(_, key)| key.clone())
            .collect();
        for key in keys {
            self.signal(db, &key);
        }
    }

    /// The ready keys, in the order they became ready (and forgets them).
    pub fn take_ready(&mut self) -> Vec<(usize, Bytes)> {
        self.ready_set.clear();
        std::mem::take(&mut self.ready)
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Who waits on `key`, oldest first.
    pub fn waiters(&self, db: usize, key: &Bytes) -> Vec<(usize, u64)> {
        self.waiting
            .get(&(db, key.clone()))
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// Parses a blocking command's timeout (seconds, fractions allowed) into an absolute
/// deadline; `Some(None)` is "forever". Redis's errors, replied; None after replying.
pub fn timeout_arg(ctx: &mut Ctx, arg: &[u8]) -> Option<Option<i64>> {
    let seconds = match crate::long_double::parse(arg) {
        None => {
            ctx.out.error("ERR timeout is not a float or out of range");
            return None;
        }
        Some(None) => f64::INFINITY, // either infinity: "negative" below, as in Redis
        Some(Some(value)) => value.to_f64(),
    };
    // Redis takes ceil(seconds * 1000) as a long long: an overflow comes out negative.
    let ms = (seconds * 1000.0).ceil();
    if seconds < 0.0 || ms.is_nan() || ms >= 9.223_372_036_854_776e18 {
        ctx.out.error("ERR timeout is negative");
        return None;
    }
    let ms = if seconds > 0.0 { (ms as i64).max(1) } else { 0 };
    if ms == 0 {
        return Some(None);
    }
    // A deadline past the end of time waits forever.
    Some(ctx.now_ms.checked_add(ms))
}

/// What a blocking command finds at a key, without replying anything.
#[derive(PartialEq, Eq)]
enum Found {
    Missing,
    List,
    ZSet,
    Other,
}

fn found(ctx: &mut Ctx, key: &[u8]) -> Found {
    ctx.expire_if_needed(key);
    match ctx.keyspace.dbs[ctx.client.db].get(key).map(|e| &e.value) {
        None => Found::Missing,
        Some(Value::List(l, _)) if !l.is_empty() => Found::List,
        Some(Value::ZSet(z, _)) if !z.is_empty() => Found::ZSet,
        Some(_) => Found::Other,
    }
}

/// The keys to try now: all of them, or only the ready one when serving.
fn candidates<'a>(ctx: &Ctx, keys: &[&'a [u8]]) -> Vec<&'a [u8]> {
    match &ctx.block_mode {
        BlockMode::Serving(ready) => keys
            .iter()
            .copied()
            .filter(|k| *k == ready.as_ref())
            .take(1)
            .collect(),
        _ => keys.to_vec(),
    }
}

/// Nothing to take: block (or stay blocked), or, inside EXEC, answer as a timeout would.
fn nothing_yet(ctx: &mut Ctx, keys: &[&[u8]], deadline_ms: Option<i64>, args: &Args) -> Action {
    if ctx.block_mode == BlockMode::Never {
        ctx.out.null_array();
        return Action::None;
    }
    Action::Block(Blocked {
        db: ctx.client.db,
        keys: keys.iter().map(|k| Bytes::copy_from_slice(k)).collect(),
        deadline_ms,
        command: args.iter().map(|a| a.to_vec()).collect(),
        replicas: None,
    })
}

/// BLPOP / BRPOP / BZPOPMIN / BZPOPMAX: the first key (in order) holding an element of
/// the wanted type; a key of another type is WRONGTYPE, except while serving, where it
/// only means "not ready".
fn pop_first(ctx: &mut Ctx, args: &Args, want: Found, take: &dyn Fn(&mut Ctx, &[u8])) -> Action {
    let Some(deadline) = timeout_arg(ctx, args[args.len() - 1]) else {
        return Action::None;
    };
    let keys = &args[1..args.len() - 1];
    let serving = matches!(ctx.block_mode, BlockMode::Serving(_));
    for key in candidates(ctx, keys) {
        match found(ctx, key) {
            Found::Missing => {}
            f if f == want => {
                take(ctx, key);
                return Action::None;
            }
            _ if serving => {}
            _ => {
                ctx.wrong_type();
                return Action::None;
            }
        }
    }
    nothing_yet(ctx, keys, deadline, args)
}

fn list_pop(end: End) -> impl Fn(&mut Ctx, &[u8]) {
    move |ctx: &mut Ctx, key: &[u8]| {
        let popped =
            super::lists::pop_and_propagate(ctx, key, end, None, super::lists::LoggedCount::Asked);
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.bulk(&popped[0]);
    }
}

fn blpop(ctx: &mut Ctx, args: &Args) -> Action {
    pop_first(ctx, args, Found::List, &list_pop(End::Left))
}

fn brpop(ctx: &mut Ctx, args: &Args) -> Action {
    pop_first(ctx, args, Found::List, &list_pop(End::Right))
}

fn bzpop(ctx: &mut Ctx, args: &Args) -> Action {
    let max = args[0].eq_ignore_ascii_case(b"bzpopmax");
    let take = move |ctx: &mut Ctx, key: &[u8]| {
        let popped = super::zsets::pop_elements(ctx, key, max, 1);
        ctx.out.array(3);
        ctx.out.bulk(key);
        ctx.out.bulk(&popped[0].0);
        ctx.out.double(popped[0].1);
    };
    pop_first(ctx, args, Found::ZSet, &take)
}

/// BLMOVE and BRPOPLPUSH.
fn move_blocking(ctx: &mut Ctx, args: &Args, how: Move, timeout: &[u8]) -> Action {
    let Some(deadline) = timeout_arg(ctx, timeout) else {
        return Action::None;
    };
    let (source, destination) = (args[1], args[2]);
    let serving = matches!(ctx.block_mode, BlockMode::Serving(_));
    match found(ctx, source) {
        Found::List => {
            match super::lists::move_and_propagate(ctx, source, destination, how) {
                Ok(Some(value)) => ctx.out.bulk(&value),
                Ok(None) => unreachable!("the source holds a list"),
                Err(_) => {} // WRONGTYPE for the destination, replied
            }
            Action::None
        }
        Found::Missing => {
            if ctx.block_mode == BlockMode::Never {
                // Redis answers a null bulk here (not the null array of a timeout).
                ctx.out.null();
                return Action::None;
            }
            nothing_yet(ctx, &[source], deadline, args)
        }
        _ if serving => nothing_yet(ctx, &[source], deadline, args),
        _ => {
            ctx.wrong_type();
            Action::None
        }
    }
}

fn blmove(ctx: &mut Ctx, args: &Args) -> Action {
    let (Some(from), Some(to)) = (
        super::lists::parse_end(args[3]),
        super::lists::parse_end(args[4]),
    ) else {
        ctx.out.error(super::SYNTAX_ERROR);
        return Action::None;
    };
    move_blocking(ctx, args, Move::Lmove { from, to }, args[5])
}

fn brpoplpush(ctx: &mut Ctx, args: &Args) -> Action {
    move_blocking(ctx, args, Move::Rpoplpush, args[3])
}

fn blmpop(ctx: &mut Ctx, args: &Args) -> Action {
    // Redis parses the MPOP arguments before the timeout.
    let Ok((keys, end, count)) = super::lists::parse_lmpop(ctx, &args[2..]) else {
        return Action::None;
    };
    let Some(deadline) = timeout_arg(ctx, args[1]) else {
        return Action::None;
    };
    let serving = matches!(ctx.block_mode, BlockMode::Serving(_));
    for key in candidates(ctx, &keys) {
        match found(ctx, key) {
            Found::Missing => {}
            Found::List => {
                let popped = super::lists::pop_and_propagate(
                    ctx,
                    key,
                    end,
                    Some(count.unwrap_or(1)),
                    super::lists::LoggedCount::Popped,
                );
                ctx.out.array(2);
                ctx.out.bulk(key);
                ctx.out.bulk_strings(popped.iter());
                return Action::None;
            }
            _ if serving => {}
            _ => {
                ctx.wrong_type();
                return Action::None;
            }
        }
    }
    nothing_yet(ctx, &keys, deadline, args)
}

fn bzmpop(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(parsed) = super::zsets::parse_mpop(ctx, &args[2..]) else {
        return Action::None;
    };
    let Some(deadline) = timeout_arg(ctx, args[1]) else {
        return Action::None;
    };
    let serving = matches!(ctx.block_mode, BlockMode::Serving(_));
    for key in candidates(ctx, &parsed.keys) {
        match found(ctx, key) {
            Found::Missing => {}
            Found::ZSet => {
                let popped = super::zsets::pop_elements(ctx, key, parsed.max, parsed.count);
                super::zsets::reply_popped_with_key(ctx, key, &popped);
                return Action::None;
            }
            _ if serving => {}
            _ => {
                ctx.wrong_type();
                return Action::None;
            }
        }
    }
    nothing_yet(ctx, &parsed.keys, deadline, args)
}
