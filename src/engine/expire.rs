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
                        db.remove(&key);
                        self.state.stats.expired_keys += 1;
                        self.state.dirty += 1;
                        crate::notify::keyspace_event(
                            self.state.config.notify_keyspace_events,
                            &self.state.pubsub,
                            EventClass::Expired,
                            "expired",
                            &key,
                            db_index,
                            &mut |id, message| {
                                host.deliver(id, message);
                            },
                        );
                        self.effects.record(db_index, &[b"DEL", &key]);
                        self.state.watches.touch(db_index, &key, false);
                        // Served by the cron once the cycle is over (`Server::cron`).
                        self.state.blocked.signal(db_index, &key);
                        if self.state.tracking.watches_changes() {
                            self.state.tracking.key_changed(
                                &key,
                                None,
                                None,
                                &mut |id, message| host.deliver(id, message),
                            );
                        }
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
}
