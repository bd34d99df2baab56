//! The effects stream: every write, once, in the deterministic form that replays to the
//! same state.
//!
//! A command that changes the dataset records what it did here (through
//! `Ctx::propagate`): absolute expiry times, the effect rather than the request where the
//! two differ (SPOP's removed members, INCRBYFLOAT's result), expirations as DEL. The
//! engine wraps the records of one EXEC in `MULTI … EXEC`. The stream carries its own
//! `SELECT` records, so a consumer applies it from its start with no other context.
//!
//! Consumers take the bytes at the end of each event-loop turn
//! (`server::Server::take_effects`): the replication stream (the backlog and the
//! replicas' outputs) first, then the log writer as one batch; command handlers never
//! know who listens. A few records are for replicas only (PUBLISH, which Redis sends its
//! replicas so that their subscribers hear it, and never logs): their places are kept
//! (`replica_only`) and the log gets the bytes without them (`take_for_log`). Replay at
//! start-up runs with the stream disabled.

/// Where a unit's records (an EXEC's queue, a script) start in the stream, to wrap them.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    start: usize,
    records: u64,
}

/// The effects of the writes run so far, in log form, not yet taken by their consumers.
#[derive(Default)]
pub struct Effects {
    /// RESP records not yet handed to the log writer.
    pub buffer: Vec<u8>,
    /// Records written so far, SELECTs left out (EXEC wraps more than one in MULTI).
    pub records: u64,
    /// The database the last record in the log applies to (None: unknown, emit SELECT).
    pub selected_db: Option<usize>,
    pub enabled: bool,
    /// The byte ranges of `buffer` that only replicas take, in order.
    pub replica_only: Vec<std::ops::Range<usize>>,
}

impl Effects {
    /// Appends one write's record (after a SELECT when the database changes).
    pub fn record(&mut self, db: usize, args: &[&[u8]]) {
        if !self.enabled {
            return;
        }
        self.select(db);
        crate::resp::encode_command(&mut self.buffer, args);
        self.records += 1;
    }

    /// Appends a record only replicas take (PUBLISH). Its SELECT, if one is needed, is
    /// the log's too: the records after it depend on it.
    pub fn record_for_replicas(&mut self, db: usize, args: &[&[u8]]) {
        if !self.enabled {
            return;
        }
        self.select(db);
        let start = self.buffer.len();
        crate::resp::encode_command(&mut self.buffer, args);
        self.replica_only.push(start..self.buffer.len());
        self.records += 1;
    }

    /// The bytes for the log: the buffer less the replica-only records. Empties the
    /// buffer, or leaves it to the caller (`None`: the whole buffer is the log's).
    pub fn take_for_log(&mut self) -> Option<Vec<u8>> {
        if self.replica_only.is_empty() {
            return None;
        }
        let mut log = Vec::with_capacity(self.buffer.len());
        let mut from = 0;
        for range in self.replica_only.drain(..) {
            log.extend_from_slice(&self.buffer[from..range.start]);
            from = range.end;
        }
        log.extend_from_slice(&self.buffer[from..]);
        self.buffer.clear();
        Some(log)
    }

    fn select(&mut self, db: usize) {
        if self.selected_db != Some(db) {
            let db_text = itoa::Buffer::new().format(db).to_owned();
            crate::resp::encode_command(
                &mut self.buffer,
                &[b"SELECT" as &[u8], db_text.as_bytes()],
            );
            self.selected_db = Some(db);
        }
    }

    /// Marks the start of a unit whose records must replay all or none (EXEC, a script).
    pub fn mark(&self) -> Mark {
        Mark {
            start: self.buffer.len(),
            records: self.records,
        }
    }

    /// Drops the records since `mark` (a script stopped by SHUTDOWN NOSAVE: none of its
    /// effects may reach the log).
    pub fn discard_since(&mut self, mark: Mark) {
        self.buffer.truncate(mark.start);
        self.replica_only.retain(|range| range.end <= mark.start);
        self.records = mark.records;
        // A SELECT may have gone with them.
        self.selected_db = None;
    }

    /// Wraps the records since `mark` in `MULTI … EXEC` when there is more than one, so
    /// that replay applies them all or none (a file torn inside the block is cut at its
    /// MULTI). The SELECT of the first record stays before the MULTI, where Redis puts it
    /// (its MULTI is propagated in the first command's database).
    pub fn wrap_since(&mut self, mark: Mark) {
        if self.records - mark.records > 1 {
            let at = mark.start + leading_select_len(&self.buffer[mark.start..]).unwrap_or(0);
            let mut multi = Vec::new();
            crate::resp::encode_command(&mut multi, &[b"MULTI" as &[u8]]);
            let shift = multi.len();
            self.buffer.splice(at..at, multi);
            for range in &mut self.replica_only {
                if range.start >= at {
                    *range = range.start + shift..range.end + shift;
                }
            }
            crate::resp::encode_command(&mut self.buffer, &[b"EXEC" as &[u8]]);
        }
    }
}

/// The length of the SELECT record `Effects::select` wrote at the start of `bytes`, if
/// one is there.
fn leading_select_len(bytes: &[u8]) -> Option<usize> {
    const HEAD: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$";
    let rest = bytes.strip_prefix(HEAD)?;
    let digits = rest.iter().position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    Some(HEAD.len() + digits + "\r\n".len() + len + "\r\n".len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> Effects {
        Effects {
            enabled: true,
            ..Effects::default()
        }
    }

    #[test]
    fn the_log_gets_everything_but_the_replica_only_records() {
        let mut effects = enabled();
        effects.record(0, &[b"SET", b"a", b"1"]);
        let mark = effects.mark();
        effects.record_for_replicas(1, &[b"PUBLISH", b"ch", b"hello"]);
        effects.record(1, &[b"SET", b"b", b"2"]);
        effects.wrap_since(mark);
        let stream = effects.buffer.clone();
        let log = effects.take_for_log().expect("a PUBLISH was recorded");
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).replace("\r\n", " ");
        assert_eq!(
            text(&stream),
            "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 *2 $6 SELECT $1 1 *1 $5 MULTI \
             *3 $7 PUBLISH $2 ch $5 hello *3 $3 SET $1 b $1 2 *1 $4 EXEC "
        );
        assert_eq!(
            text(&log),
            "*2 $6 SELECT $1 0 *3 $3 SET $1 a $1 1 *2 $6 SELECT $1 1 *1 $5 MULTI \
             *3 $3 SET $1 b $1 2 *1 $4 EXEC "
        );
        assert!(effects.buffer.is_empty() && effects.replica_only.is_empty());
        effects.record(1, &[b"DEL", b"b"]);
        assert_eq!(effects.take_for_log(), None);
    }

    #[test]
    fn discarded_replica_only_records_are_forgotten() {
        let mut effects = enabled();
        let mark = effects.mark();
        effects.record_for_replicas(0, &[b"PUBLISH", b"ch", b"x"]);
        effects.discard_since(mark);
        assert!(effects.replica_only.is_empty());
        assert_eq!(effects.take_for_log(), None);
    }
}
