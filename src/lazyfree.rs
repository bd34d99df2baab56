//! Freeing big values off the event loop (Redis's lazy free, `lazyfree.c`).
//!
//! Dropping a set of a million members takes the loop milliseconds. UNLINK, FLUSHALL /
//! FLUSHDB ASYNC (and DEL and the flushes under `lazyfree-lazy-user-del` /
//! `lazyfree-lazy-user-flush`) take the value out of the keyspace at once and hand it to
//! one freeing thread, which drops it. A value is handed over only when dropping it is
//! work: more than `FREE_EFFORT_MIN` allocations by Redis's own measure
//! (`lazyfreeGetFreeEffort`), and no snapshot still shares it (its drop would free
//! nothing). A flushed database always goes.
//!
//! INFO's `lazyfree_pending_objects` counts what was handed over and not yet dropped,
//! `lazyfreed_objects` what the thread dropped (CONFIG RESETSTAT zeroes it), each a key
//! (a database counts its keys), as Redis counts them.

use crate::keyspace::{Db, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// Redis's `LAZYFREE_THRESHOLD`: values that take at most this many allocations to free
/// are freed on the spot.
pub const FREE_EFFORT_MIN: usize = 64;

/// What the freeing thread drops.
#[allow(dead_code, reason = "held only to be dropped on the freeing thread")]
enum Garbage {
    Value(Value),
    /// A flushed database, and how many keys it held.
    Database(Db, u64),
}

#[derive(Default)]
struct Counters {
    pending: AtomicU64,
    freed: AtomicU64,
}

/// The freeing thread, started with the first value it is given.
#[derive(Default)]
pub struct LazyFree {
    sender: Option<mpsc::Sender<Garbage>>,
    counters: Arc<Counters>,
}

impl LazyFree {
    /// Frees `value`: on the freeing thread when that is worth it, here otherwise.
    pub fn free(&mut self, value: Value) {
        if value.is_shared() || free_effort(&value) <= FREE_EFFORT_MIN {
            return;
        }
        self.send(Garbage::Value(value), 1);
    }

    /// Frees a flushed database's keys on the freeing thread.
    pub fn free_database(&mut self, db: Db) {
        let keys = db.len() as u64;
        if keys > 0 {
            self.send(Garbage::Database(db, keys), keys);
        }
    }

    /// INFO's `lazyfree_pending_objects`.
    pub fn pending(&self) -> u64 {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// INFO's `lazyfreed_objects`.
    pub fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT (Redis's `lazyfreeResetStats`).
    pub fn reset_freed(&self) {
        self.counters.freed.store(0, Ordering::Relaxed);
    }

    fn send(&mut self, garbage: Garbage, objects: u64) {
        if self.sender.is_none() {
            self.sender = spawn(self.counters.clone());
        }
        let Some(sender) = &self.sender else {
            // No thread could be started (the system's limit): freed here, as before.
            return;
        };
        self.counters.pending.fetch_add(objects, Ordering::Relaxed);
        if let Err(mpsc::SendError(garbage)) = sender.send(garbage) {
            // The thread is gone: freed here; the next one starts a thread again.
            self.sender = None;
            drop(garbage);
            self.counters.pending.fetch_sub(objects, Ordering::Relaxed);
        }
    }
}

/// Starts the freeing thread; None if the system refuses a thread.
fn spawn(counters: Arc<Counters>) -> Option<mpsc::Sender<Garbage>> {
    let (sender, receiver) = mpsc::channel::<Garbage>();
    let started = std::thread::Builder::new()
        .name("lazy-free".into())
        .spawn(move || {
            // Ends when the server drops its sender.
            for garbage in receiver {
                let objects = match &garbage {
                    Garbage::Value(_) => 1,
                    Garbage::Database(_, keys) => *keys,
                };
                drop(garbage);
                counters.pending.fetch_sub(objects, Ordering::Relaxed);
                counters.freed.fetch_add(objects, Ordering::Relaxed);
            }
        });
    match started {
        Ok(_) => Some(sender),
        Err(e) => {
            tracing::warn!("can't start the lazy-free thread ({e}): freeing on the event loop");
            None
        }
    }
}

/// Redis's `lazyfreeGetFreeEffort`: about how many allocations freeing `value` takes. A
/// compact encoding is one; a list its nodes; a set, hash or sorted set in a hash table
/// or skip list its elements; a stream its nodes, plus its groups times one more than the
/// first group's pending entries (Redis's estimate).
pub fn free_effort(value: &Value) -> usize {
    match value {
        Value::String(..) => 1,
        Value::List(list, _) => list.nodes().len(),
        Value::Set(set, _) if set.encoding() == "hashtable" => set.len(),
        Value::Hash(hash, _) if hash.encoding() == "hashtable" => hash.len(),
        Value::ZSet(zset, _) if zset.encoding() == "skiplist" => zset.len(),
        Value::Set(..) | Value::Hash(..) | Value::ZSet(..) => 1,
        Value::Stream(stream, _) => {
            let groups = stream.groups.len();
            let first_pending = stream
                .groups
                .iter()
                .next()
                .map_or(0, |(_, group)| group.pending().len());
            stream.node_count() + groups * (1 + first_pending)
        }
    }
}
