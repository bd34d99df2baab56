//! How far the log is fsynced, in the positions WAITAOF and `REPLCONF ACK … FACK` speak
//! (Redis 7.2's `fsynced_reploff`).
//!
//! The log writer counts in batch sequences; a client's write is known by the effects
//! record count after it (`SessionState::write_record`: there may be no stream, hence no
//! stream offset, when no replica is connected), and a replica's progress by the offset
//! of its master's stream it processed. So each time the loop hands effects to the writer
//! it notes a mark: "once batch `seq` is durable, every record up to `records` and the
//! master's stream up to `master_offset` are". When the writer reports a durable
//! sequence, the marks it covers are taken off, and the last one is the fsynced
//! position.
//!
//! The marks are bounded: past `MARKS_MAX` the newest mark is moved forward instead of a
//! new one added, which only reports a position durable later than it became (never
//! sooner). After a full sync a replica's history starts again: its fsynced master offset
//! is 0 until the master's snapshot is the log's committed base (`restart`, `resume`), as
//! Redis 7.2's replica reports 0 until its rewrite after the sync is done.

use std::collections::VecDeque;

/// Marks kept at most (a second of `everysec` at a high rate of small turns could add
/// one per turn).
const MARKS_MAX: usize = 4096;

/// A position in the effects and in the master's stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Effects records counted so far (`Effects::records`).
    pub records: u64,
    /// The offset of the master's stream processed (0 on a master).
    pub master_offset: i64,
}

/// The fsynced position and the marks not yet durable.
#[derive(Debug, Default)]
pub struct Fsynced {
    marks: VecDeque<(u64, Position)>,
    durable: Position,
    /// After a full sync, until the master's snapshot is the committed base: marks are
    /// noted but none is taken.
    paused: bool,
}

impl Fsynced {
    /// Every record up to `position` is in log batches up to `seq`.
    pub fn note(&mut self, seq: u64, position: Position) {
        let full = self.marks.len() >= MARKS_MAX;
        match self.marks.back_mut() {
            Some(last) if last.0 == seq || full => {
                last.0 = last.0.max(seq);
                last.1 = position;
            }
            _ => self.marks.push_back((seq, position)),
        }
    }

    /// The writer reports every batch up to `durable_seq` durable. Returns whether the
    /// fsynced position moved.
    pub fn advance(&mut self, durable_seq: u64) -> bool {
        if self.paused {
            return false;
        }
        let before = self.durable;
        while let Some(&(seq, position)) = self.marks.front() {
            if seq > durable_seq {
                break;
            }
            self.marks.pop_front();
            self.durable = Position {
                records: self.durable.records.max(position.records),
                master_offset: position.master_offset,
            };
        }
        self.durable != before
    }

    /// Effects records fsynced so far (WAITAOF's local acknowledgement).
    pub fn records(&self) -> u64 {
        self.durable.records
    }

    /// The master's stream offset fsynced so far (a replica's FACK).
    pub fn master_offset(&self) -> i64 {
        self.durable.master_offset
    }

    /// A full sync replaces the dataset: the master offsets noted so far belong to the
    /// history left, and the new one is durable only once the snapshot is the log's
    /// committed base.
    pub fn restart(&mut self) {
        for (_, position) in &mut self.marks {
            position.master_offset = 0;
        }
        self.durable.master_offset = 0;
        self.paused = true;
    }

    /// The master's snapshot is the log's committed base (or the switch failed and a
    /// compaction persists it): the marks noted since count again.
    pub fn resume(&mut self) {
        self.paused = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(records: u64, master_offset: i64) -> Position {
        Position {
            records,
            master_offset,
        }
    }

    #[test]
    fn a_position_is_fsynced_once_its_batch_is_durable() {
        let mut fsynced = Fsynced::default();
        fsynced.note(1, at(3, 100));
        fsynced.note(1, at(5, 120));
        fsynced.note(2, at(9, 200));
        // A turn with no batch of its own: durable with the batches before it.
        fsynced.note(2, at(9, 214));
        assert!(!fsynced.advance(0));
        assert_eq!((fsynced.records(), fsynced.master_offset()), (0, 0));
        assert!(fsynced.advance(1));
        assert_eq!((fsynced.records(), fsynced.master_offset()), (5, 120));
        assert!(fsynced.advance(7));
        assert_eq!((fsynced.records(), fsynced.master_offset()), (9, 214));
        assert!(!fsynced.advance(7));
    }

    #[test]
    fn marks_past_the_bound_move_the_newest_forward() {
        let mut fsynced = Fsynced::default();
        for seq in 1..=(MARKS_MAX as u64 + 10) {
            fsynced.note(seq, at(seq, seq as i64));
        }
        assert_eq!(fsynced.marks.len(), MARKS_MAX);
        // The merged mark is reported only once its newest batch is durable.
        fsynced.advance(MARKS_MAX as u64);
        assert_eq!(fsynced.records(), MARKS_MAX as u64 - 1);
        fsynced.advance(MARKS_MAX as u64 + 10);
        assert_eq!(fsynced.records(), MARKS_MAX as u64 + 10);
    }

    #[test]
    fn a_full_sync_reports_nothing_of_the_new_history_until_its_base_is_committed() {
        let mut fsynced = Fsynced::default();
        fsynced.note(1, at(1, 5000));
        fsynced.advance(1);
        assert_eq!(fsynced.master_offset(), 5000);
        fsynced.note(2, at(2, 6000));
        fsynced.restart();
        assert_eq!(fsynced.master_offset(), 0);
        fsynced.note(3, at(3, 100));
        assert!(!fsynced.advance(3));
        assert_eq!(fsynced.master_offset(), 0);
        fsynced.resume();
        assert!(fsynced.advance(3));
        assert_eq!(fsynced.master_offset(), 100);
    }
}
