//! Active expiry: the cron's sweep that deletes keys whose time has passed, as Redis's
//! `activeExpireCycle` does, each deletion a DEL in the effects stream. (Lazy expiry,
//! on access, is `Ctx::expire_if_needed`.)

use super::Engine;
use crate::keyspace::SLOT_COUNT;
use std::time::{Duration, Instant};

impl Engine {
    /// Deletes expired keys slot by slot, from each database's cursor on, until a whole
    /// round is done or `budget` is spent; the cursors keep the place for the next run.
    pub fn active_expire_cycle(&mut self, cursors: &mut [usize], now_ms: i64, budget: Duration) {
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
                        self.effects.record(db_index, &[b"DEL", &key]);
                        self.state.watches.touch(db_index, &key, false);
                    }
                }
                cursor = (cursor + 1) % SLOT_COUNT;
                if cursor == *start {
                    break;
                }
            }
            *start = cursor;
        }
    }
}
