//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, and the registry of watched keys.
//!
//! Queuing happens in the server (`Server::execute`): while a client is in MULTI, every
//! command but these is checked as Redis's `processCommand` would (unknown, arity,
//! NOAUTH, MISCONF, NO_MULTI) and queued, or rejected and the transaction flagged. EXEC
//! here only decides whether the queue may run; the server runs it in one turn and wraps
//! its log records in `MULTI … EXEC` when there is more than one, so that replay applies
//! all of it or none of it.
//!
//! A watched key is "touched" whenever a change to it is logged (`Ctx::propagate` derives
//! the keys from the record), when it expires, and by FLUSHDB / FLUSHALL / SWAPDB if it
//! exists in a flushed or swapped database (Redis's `touchAllWatchedKeysInDb`).

use super::{Action, Args, Ctx, SessionState, flags};
use crate::command;
use crate::keyspace::Keyspace;
use bytes::Bytes;
use hashbrown::{HashMap, HashSet};

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "multi",
            1,
            FAST | LOADING | STALE | NO_SCRIPT,
            (0, 0, 0),
            "transactions",
            "Start a transaction block",
            multi
        ),
        command!(
            "exec",
            1,
            LOADING | STALE | NO_SCRIPT,
            (0, 0, 0),
            "transactions",
            "Execute all commands issued after MULTI",
            exec
        ),
        command!(
            "discard",
            1,
            FAST | LOADING | STALE | NO_SCRIPT,
            (0, 0, 0),
            "transactions",
            "Discard all commands issued after MULTI",
            discard
        ),
        command!(
            "watch",
            -2,
            FAST | LOADING | STALE | NO_SCRIPT,
            (1, -1, 1),
            "transactions",
            "Watch the given keys to determine execution of the MULTI/EXEC block",
            watch
        ),
        command!(
            "unwatch",
            1,
            FAST | LOADING | STALE | NO_SCRIPT,
            (0, 0, 0),
            "transactions",
            "Forget about all watched keys",
            unwatch
        ),
    ]
}

/// A client between MULTI and EXEC.
#[derive(Clone, Debug, Default)]
pub struct MultiState {
    pub queued: Vec<Vec<Vec<u8>>>,
    /// A command was rejected while queuing: EXEC answers EXECABORT.
    pub failed: bool,
    /// Bytes held by `queued` (bounded by `client-query-buffer-limit`).
    pub bytes: usize,
    /// Some queued command writes (EXEC then gets MISCONF like a write).
    pub has_write: bool,
    /// Some queued command may not run on a stale replica (EXEC then gets MASTERDOWN
    /// when the link is down, even if it was up while queuing).
    pub denies_stale: bool,
}

/// Bytes a queued argument is counted for beyond its own (its share of the queue's
/// bookkeeping), against `client-query-buffer-limit`.
const QUEUED_ARGUMENT_OVERHEAD_BYTES: usize = 16;

/// The error of a transaction whose queue passed `client-query-buffer-limit` (Tessera's
/// own bound).
pub const TRANSACTION_TOO_LARGE: &str =
    "ERR Transaction discarded: the queued commands exceed client-query-buffer-limit";

/// The queue passed its bound: it was dropped and the transaction fails.
#[derive(Debug)]
pub struct QueueTooLarge;

impl MultiState {
    /// Queues a command. The queue is bounded by `limit_bytes` (a client's:
    /// `client-query-buffer-limit`): past that it is dropped at once and the transaction
    /// fails.
    pub fn queue(
        &mut self,
        spec: &super::CommandSpec,
        argv: &[&[u8]],
        limit_bytes: usize,
    ) -> Result<(), QueueTooLarge> {
        let bytes: usize = argv
            .iter()
            .map(|a| a.len() + QUEUED_ARGUMENT_OVERHEAD_BYTES)
            .sum();
        if self.bytes.saturating_add(bytes) > limit_bytes {
            self.queued = Vec::new();
            self.failed = true;
            return Err(QueueTooLarge);
        }
        self.bytes += bytes;
        self.has_write |= spec.has(flags::WRITE);
        self.denies_stale |= !spec.has(flags::STALE);
        self.queued.push(argv.iter().map(|a| a.to_vec()).collect());
        Ok(())
    }
}

struct Watcher {
    client: u64,
    /// The key was logically expired when WATCH ran: its deletion is no change.
    expired: bool,
}

/// Every watched key, and the clients whose watched keys changed.
#[derive(Default)]
pub struct Watches {
    by_key: HashMap<(usize, Bytes), Vec<Watcher>>,
    dirty: HashSet<u64>,
}

impl Watches {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn watch(&mut self, client: &mut SessionState, db: usize, key: &[u8], expired: bool) {
        if client
            .watched
            .iter()
            .any(|(d, k)| *d == db && k.as_ref() == key)
        {
            return;
        }
        let key = Bytes::copy_from_slice(key);
        client.watched.push((db, key.clone()));
        self.by_key.entry((db, key)).or_default().push(Watcher {
            client: client.id,
            expired,
        });
    }

    /// Forgets every key `client` watches, and that any of them changed.
    pub fn unwatch_all(&mut self, client: &mut SessionState) {
        for (db, key) in client.watched.drain(..) {
            let entry = (db, key);
            if let Some(watchers) = self.by_key.get_mut(&entry) {
                watchers.retain(|w| w.client != client.id);
                if watchers.is_empty() {
                    self.by_key.remove(&entry);
                }
            }
        }
        self.dirty.remove(&client.id);
    }

    /// `key` in `db` changed; `exists` says whether it is there now.
    pub fn touch(&mut self, db: usize, key: &[u8], exists: bool) {
        let Some(watchers) = self.by_key.get_mut(&super::DbKey(db, key)) else {
            return;
        };
        for watcher in watchers {
            if watcher.expired && !exists {
                // Redis: an already expired key being deleted is logically no change.
                watcher.expired = false;
            } else {
                self.dirty.insert(watcher.client);
            }
        }
    }

    /// Touches the watched keys of `db` that exist in it or in `other` (FLUSHDB before
    /// the flush, SWAPDB for both databases), as Redis's `touchAllWatchedKeysInDb`: a key
    /// that was expired when watched and is gone, or stays expired, is no change; a key
    /// absent now replaced by an expired one becomes one watched as expired.
    pub fn touch_db(&mut self, keyspace: &Keyspace, db: usize, other: Option<usize>, now_ms: i64) {
        if self.by_key.is_empty() {
            return;
        }
        let keys: Vec<Bytes> = self
            .by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        for key in keys {
            let in_db = keyspace.dbs[db].get(&key).is_some();
            let replacement = other.and_then(|o| keyspace.dbs[o].get(&key));
            if !in_db && replacement.is_none() {
                continue;
            }
            let replacement_expired = replacement.is_some_and(|e| e.is_expired(now_ms));
            let Some(watchers) = self.by_key.get_mut(&super::DbKey(db, &key)) else {
                continue;
            };
            for watcher in watchers {
                if watcher.expired {
                    if replacement.is_none() {
                        watcher.expired = false;
                        continue;
                    }
                    if replacement_expired {
                        continue;
                    }
                } else if !in_db && replacement_expired {
                    watcher.expired = true;
                    continue;
                }
                self.dirty.insert(watcher.client);
            }
        }
    }

    pub fn is_dirty(&self, client: u64) -> bool {
        self.dirty.contains(&client)
    }

    /// A key `client` watches that was live at WATCH and is logically expired now.
    fn expired_since_watch(&self, client: &SessionState, keyspace: &Keyspace, now_ms: i64) -> bool {
        client.watched.iter().any(|(db, key)| {
            let was_expired = self
                .by_key
                .get(&(*db, key.clone()))
                .is_some_and(|ws| ws.iter().any(|w| w.client == client.id && w.expired));
            !was_expired
                && keyspace.dbs[*db]
                    .get(key)
                    .is_some_and(|e| e.is_expired(now_ms))
        })
    }
}

fn multi(ctx: &mut Ctx, _args: &Args) -> Action {
    begin(ctx.client, &mut ctx.out);
    Action::None
}

/// MULTI: starts the transaction (shared with the clients served while a script is busy).
pub fn begin(client: &mut SessionState, out: &mut crate::resp::ReplyWriter) {
    if client.multi.is_some() {
        out.error("ERR MULTI calls can not be nested");
        return;
    }
    client.multi = Some(Box::default());
    out.ok();
}

/// Ends the transaction and the watches (EXEC, DISCARD, EXECABORT).
pub fn end_transaction(ctx: &mut Ctx) {
    ctx.client.multi = None;
    ctx.server.watches.unwatch_all(ctx.client);
}

fn exec(ctx: &mut Ctx, _args: &Args) -> Action {
    let Some(state) = &ctx.client.multi else {
        ctx.out.error("ERR EXEC without MULTI");
        return Action::None;
    };
    // Redis refuses these before EXEC runs (`processCommand`), so before the rest.
    let refused = if crate::engine::evict::exec_denied(ctx.server, &state.queued) {
        Some("OOM command not allowed when used memory > 'maxmemory'.".to_string())
    } else if state.has_write
        && let Some(error) = ctx.server.disk_error()
    {
        Some(error.to_string())
    } else if state.has_write
        && !ctx
            .server
            .replication
            .replicas
            .enough_for_writes(ctx.server.config.replication.write_quorum())
    {
        Some(crate::replication::master::NOT_ENOUGH_REPLICAS.to_string())
    } else {
        None
    };
    if let Some(reason) = refused {
        let (mut desk, client, out) = desk_of(ctx);
        desk.abort_exec(client, &reason, out);
        return Action::None;
    }
    if state.failed {
        end_transaction(ctx);
        ctx.out
            .error("EXECABORT Transaction discarded because of previous errors.");
        return Action::None;
    }
    let aborted = ctx.server.watches.is_dirty(ctx.client.id)
        || ctx
            .server
            .watches
            .expired_since_watch(ctx.client, ctx.keyspace, ctx.now_ms);
    let queued = ctx
        .client
        .multi
        .take()
        .map(|m| m.queued)
        .unwrap_or_default();
    ctx.server.watches.unwatch_all(ctx.client);
    if aborted {
        ctx.out.null_array();
        return Action::None;
    }
    Action::Exec(queued)
}

fn discard(ctx: &mut Ctx, _args: &Args) -> Action {
    let (mut desk, client, out) = desk_of(ctx);
    desk.discard(client, out);
    Action::None
}

fn watch(ctx: &mut Ctx, args: &Args) -> Action {
    let (mut desk, client, out) = desk_of(ctx);
    desk.watch(client, &args[1..], out);
    Action::None
}

/// The command's watch desk, client and reply, borrowed apart.
fn desk_of<'c, 'a>(
    ctx: &'c mut Ctx<'a>,
) -> (
    WatchDesk<'c>,
    &'c mut SessionState,
    &'c mut crate::resp::ReplyWriter<'a>,
) {
    (
        WatchDesk {
            watches: &mut ctx.server.watches,
            keyspace: ctx.keyspace,
            now_ms: ctx.now_ms,
        },
        ctx.client,
        &mut ctx.out,
    )
}

fn unwatch(ctx: &mut Ctx, _args: &Args) -> Action {
    ctx.server.watches.unwatch_all(ctx.client);
    ctx.out.ok();
    Action::None
}

/// What DISCARD, WATCH and UNWATCH change: the watch registry, and the keyspace a WATCH
/// reads (whether the key is logically expired). Commands reach it through `Ctx`; the
/// clients served while a script is busy through the script's run (these commands are
/// Redis's `allow-busy`, so a transaction may begin and end meanwhile).
pub struct WatchDesk<'a> {
    pub watches: &'a mut Watches,
    pub keyspace: &'a Keyspace,
    pub now_ms: i64,
}

impl WatchDesk<'_> {
    pub fn discard(&mut self, client: &mut SessionState, out: &mut crate::resp::ReplyWriter) {
        if client.multi.is_none() {
            out.error("ERR DISCARD without MULTI");
            return;
        }
        client.multi = None;
        self.watches.unwatch_all(client);
        out.ok();
    }

    pub fn watch(
        &mut self,
        client: &mut SessionState,
        keys: &[&[u8]],
        out: &mut crate::resp::ReplyWriter,
    ) {
        if client.multi.is_some() {
            out.error("ERR WATCH inside MULTI is not allowed");
            return;
        }
        let db = client.db;
        for key in keys {
            let expired = self.keyspace.dbs[db]
                .get(key)
                .is_some_and(|e| e.is_expired(self.now_ms));
            self.watches.watch(client, db, key, expired);
        }
        out.ok();
    }

    /// An EXEC refused before it runs (Redis's `execCommandAbort`): the transaction and
    /// the watches end, and the reply says why.
    pub fn abort_exec(
        &mut self,
        client: &mut SessionState,
        reason: &str,
        out: &mut crate::resp::ReplyWriter,
    ) {
        client.multi = None;
        self.watches.unwatch_all(client);
        out.error(&format!(
            "EXECABORT Transaction discarded because of: {reason}"
        ));
    }
}
