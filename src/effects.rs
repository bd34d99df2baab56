//! The effects stream: every write, once, in the deterministic form that replays to the
//! same state.
//!
//! A command that changes the dataset records what it did here (through
//! `Ctx::propagate`): absolute expiry times, the effect rather than the request where the
//! two differ (SPOP's removed members, INCRBYFLOAT's result), expirations as DEL. The
//! engine wraps the records of one EXEC in `MULTI … EXEC`. The stream carries its own
//! `SELECT` records, so a consumer applies it from its start with no other context.
//!
//! Consumers take the bytes at the end of each event-loop turn. Today the log writer is
//! the only one (`server::Server::end_of_turn` hands them over as one batch); replicas and
//! MONITOR's feed of effects are the next, taking the same bytes, so that command
//! handlers never know who listens. Replay at start-up runs with the stream disabled.

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
}

impl Effects {
    /// Appends one write's record (after a SELECT when the database changes).
    pub fn record(&mut self, db: usize, args: &[&[u8]]) {
        if !self.enabled {
            return;
        }
        if self.selected_db != Some(db) {
            let db_text = itoa::Buffer::new().format(db).to_owned();
            crate::resp::encode_command(
                &mut self.buffer,
                &[b"SELECT" as &[u8], db_text.as_bytes()],
            );
            self.selected_db = Some(db);
        }
        crate::resp::encode_command(&mut self.buffer, args);
        self.records += 1;
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
        self.records = mark.records;
        // A SELECT may have gone with them.
        self.selected_db = None;
    }

    /// Wraps the records since `mark` in `MULTI … EXEC` when there is more than one, so
    /// that replay applies them all or none (a file torn inside the block is cut at its
    /// MULTI).
    pub fn wrap_since(&mut self, mark: Mark) {
        if self.records - mark.records > 1 {
            let mut multi = Vec::new();
            crate::resp::encode_command(&mut multi, &[b"MULTI" as &[u8]]);
            self.buffer.splice(mark.start..mark.start, multi);
            crate::resp::encode_command(&mut self.buffer, &[b"EXEC" as &[u8]]);
        }
    }
}
