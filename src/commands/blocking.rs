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

use bytes::Bytes;
use hashbrown::{HashMap, HashSet};
use std::collections::VecDeque;

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
        let entry = (db, Bytes::copy_from_slice(key));
        if self.waiting.contains_key(&entry) && self.ready_set.insert(entry.clone()) {
            self.ready.push(entry);
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
pub fn timeout_arg(ctx: &mut super::Ctx, arg: &[u8]) -> Option<Option<i64>> {
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
