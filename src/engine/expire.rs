//! Active expiry: the cron's sweep that deletes keys whose time has passed, as Redis's
//! `activeExpireCycle` does, each deletion a DEL in the effects stream and an `expired`
//! keyspace event and an invalidation for tracking clients. (Lazy expiry, on access, is
//! `Ctx::expire_if_needed`.)

use super::{Engine, Host};
use crate::keyspace::SLOT_COUNT;
use crate::notify::EventClass;
use std::time::{Duration, Instant};

impl Engine {
    /// Deletes expired keys slot by slot, from each database's cursor on, until a whole
    /// round is done or `budget` is spent; the cursors keep the place for the next run.
    /// `host`: where the `expired` events and the invalidations go (no session runs a
    /// command meanwhile).
    pub fn active_expire_cycle(
        &mut self,
        cursors: &mut [usize],
        now_ms: i64,
        budget: Duration,
        host: &mut dyn Host,
    ) {
        if self.state.pause.freezes_dataset(now_ms) {
            return; // CLIENT PAUSE keeps the dataset as it is (Redis's activeExpireCycle)
        }
        if !self.state.active_expire {
            return; // DEBUG SET-ACTIVE-EXPIRE 0
        }
        if self.state.replication.is_replica() {
            return; // a replica's keys expire when its master says (DEL in the stream)
        }
        let started = Instant::now();
        for (db_index, start) in cursors.iter_mut().enumerate() {
            if self.keyspace.dbs[db_index].volatile_len() == 0 {
                continue;
            }
            let mut cursor = *start;
            for _ in 0..SLOT_COUNT {
                if started.elapsed() > budget {
                    break;
                }
                let db = &mut self.keyspace.dbs[db_index];
                if db.slot_volatile_count(cursor) > 0 {
                    for key in db.expired_in_slot(cursor, now_ms) {
                        self.delete_expired(db_index, &key, host);
                    }
                }
                cursor = (cursor + 1) % SLOT_COUNT;
                if cursor == *start {
                    break;
                }
            }
            *start = cursor;
        }
        self.latency_event("expire-cycle", started);
    }

    /// Deletes a key found expired, as Redis's `deleteExpiredKeyAndPropagate`: a DEL in
    /// the effects stream, the `expired` event, WATCH touched, its blocked readers and
    /// tracking clients told.
    fn delete_expired(&mut self, db_index: usize, key: &[u8], host: &mut dyn Host) {
        self.keyspace.dbs[db_index].remove(key);
        self.state.stats.expired_keys += 1;
        self.state.dirty += 1;
        crate::notify::keyspace_event(
            self.state.config.notify_keyspace_events,
            &self.state.pubsub,
            EventClass::Expired,
            "expired",
            key,
            db_index,
            &mut |id, message| {
                host.deliver(id, message);
            },
        );
        self.effects.record(db_index, &[b"DEL", key]);
        self.state.watches.touch(db_index, key, false);
        // Served by the cron once the cycle is over (`Server::cron`).
        self.state.blocked.signal(db_index, key);
        if self.state.tracking.watches_changes() {
            self.state
                .tracking
                .key_changed(key, None, None, &mut |id, message| {
                    host.deliver(id, message)
                });
        }
    }

    /// Remembers the keys a client's write left with an expiry on a replica (a writable
    /// one: `replica-read-only no`): the master knows nothing of them, so this replica
    /// expires them itself (Redis's `rememberSlaveKeyWithExpire`).
    pub(super) fn remember_replica_keys_with_expire(&mut self, db: usize, keys: &[&[u8]]) {
        let Some(bit) = 1u64.checked_shl(db as u32) else {
            return; // Redis keeps the databases below 64 only, too
        };
        for key in keys {
            if self.keyspace.dbs[db]
                .get(key)
                .is_some_and(|e| e.has_expiry())
            {
                *self
                    .replica_keys_with_expire
                    .keys
                    .entry(bytes::Bytes::copy_from_slice(key))
                    .or_default() |= bit;
            }
        }
    }

    /// The replica's expiry cycle (Redis's `expireSlaveKeys`): the keys its own clients
    /// gave an expiry are deleted once due; one gone, or without an expiry now, is
    /// forgotten. The master's keys wait for the master's DEL. Each run goes on from
    /// where the last one stopped, for at most `budget`.
    pub fn expire_replica_keys(&mut self, now_ms: i64, budget: Duration, host: &mut dyn Host) {
        if self.replica_keys_with_expire.keys.is_empty()
            || !self.state.active_expire
            || !self.state.replication.is_replica()
        {
            return;
        }
        let started = Instant::now();
        let mut looked = 0;
        let mut at = self.replica_keys_with_expire.cursor;
        while looked < self.replica_keys_with_expire.keys.len() {
            if at >= self.replica_keys_with_expire.keys.len() {
                at = 0;
            }
            let (key, dbs) = self
                .replica_keys_with_expire
                .keys
                .get_index(at)
                .expect("in range");
            let (key, dbs) = (key.clone(), *dbs);
            let mut still = 0u64;
            for db in (0..64usize).filter(|db| dbs & (1 << db) != 0) {
                let Some(entry) = self.keyspace.dbs.get(db).and_then(|d| d.get(&key)) else {
                    continue;
                };
                if entry.is_expired(now_ms) {
                    self.delete_expired(db, &key, host);
                } else if entry.has_expiry() {
                    still |= 1 << db;
                }
            }
            looked += 1;
            if still == 0 {
                // The last key moves here: it is looked at next.
                self.replica_keys_with_expire.keys.swap_remove_index(at);
            } else {
                self.replica_keys_with_expire.keys[at] = still;
                at += 1;
            }
            if looked % 64 == 0 && started.elapsed() > budget {
                break;
            }
        }
        self.replica_keys_with_expire.cursor = at;
    }
}

/// The keys a writable replica's clients gave an expiry, with a bit per database (Redis's
/// `slaveKeysWithExpire`), and where the replica's expiry cycle goes on from.
#[derive(Default)]
pub struct ReplicaKeysWithExpire {
    keys: indexmap::IndexMap<bytes::Bytes, u64, foldhash::fast::RandomState>,
    cursor: usize,
}
