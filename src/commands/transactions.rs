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
    if ctx.client.multi.is_some() {
        ctx.out.error("ERR MULTI calls can not be nested");
        return Action::None;
    }
    ctx.client.multi = Some(Box::default());
    ctx.out.ok();
    Action::None
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
    // Redis refuses it before it runs (`processCommand`), so before the other checks.
    if crate::engine::evict::exec_denied(ctx.server, &state.queued) {
        end_transaction(ctx);
        ctx.out.error(
            "EXECABORT Transaction discarded because of: OOM command not allowed when used \
             memory > 'maxmemory'.",
        );
        return Action::None;
    }
    if state.failed {
        end_transaction(ctx);
        ctx.out
            .error("EXECABORT Transaction discarded because of previous errors.");
        return Action::None;
    }
    if state.has_write
        && let Some(error) = ctx.server.disk_error()
    {
        let message = format!("EXECABORT Transaction discarded because of: {error}");
        end_transaction(ctx);
        ctx.out.error(&message);
        return Action::None;
    }
    let quorum = ctx.server.config.replication.write_quorum();
    if state.has_write && !ctx.server.replication.replicas.enough_for_writes(quorum) {
        end_transaction(ctx);
        ctx.out.error(&format!(
            "EXECABORT Transaction discarded because of: {}",
            crate::replication::master::NOT_ENOUGH_REPLICAS
        ));
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
    if ctx.client.multi.is_none() {
        ctx.out.error("ERR DISCARD without MULTI");
        return Action::None;
    }
    end_transaction(ctx);
    ctx.out.ok();
    Action::None
}

fn watch(ctx: &mut Ctx, args: &Args) -> Action {
    if ctx.client.multi.is_some() {
        ctx.out.error("ERR WATCH inside MULTI is not allowed");
        return Action::None;
    }
    let db = ctx.client.db;
    for key in &args[1..] {
        let expired = ctx.keyspace.dbs[db]
            .get(key)
            .is_some_and(|e| e.is_expired(ctx.now_ms));
        ctx.server.watches.watch(ctx.client, db, key, expired);
    }
    ctx.out.ok();
    Action::None
}

fn unwatch(ctx: &mut Ctx, _args: &Args) -> Action {
    ctx.server.watches.unwatch_all(ctx.client);
    ctx.out.ok();
    Action::None
}
