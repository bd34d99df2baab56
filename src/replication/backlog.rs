//! The replication backlog: the last `repl-backlog-size` bytes of the replication stream,
//! with the stream offset of the first of them, so that a replica that lost its link can
//! take up the stream where it left it (`+CONTINUE`) instead of loading a whole snapshot.
//!
//! Offsets are Redis's: the stream's bytes are numbered from 1, `master_repl_offset` is
//! the number of bytes written so far, and a replica asks (PSYNC) for the first byte it
//! has not received — one past the offset it has processed. The backlog holds the bytes
//! `first_offset ..= first_offset + len - 1`; a request for `first_offset + len` (nothing
//! missed) is served with nothing.
//!
//! The ring grows as bytes come, up to its size (Redis 7.0 also grows its backlog by
//! blocks), so that a large `repl-backlog-size` costs nothing before the stream fills it.

/// A ring of the stream's most recent bytes.
#[derive(Debug)]
pub struct Backlog {
    /// The bytes; grows up to `size_bytes`, then wraps.
    ring: Vec<u8>,
    size_bytes: usize,
    /// Index in `ring` of the oldest byte.
    head: usize,
    /// Bytes held (Redis's `histlen`).
    len: usize,
    /// The stream offset of the oldest byte held (of the next byte, while empty).
    first_offset: u64,
}

impl Backlog {
    /// An empty backlog of `size_bytes` whose next byte is stream byte `next_offset`.
    pub fn new(size_bytes: usize, next_offset: u64) -> Backlog {
        assert!(size_bytes > 0, "a backlog holds at least one byte");
        Backlog {
            ring: Vec::new(),
            size_bytes,
            head: 0,
            len: 0,
            first_offset: next_offset,
        }
    }

    /// `repl-backlog-size`.
    pub fn size_bytes(&self) -> usize {
        self.size_bytes
    }

    /// Bytes held (INFO `repl_backlog_histlen`).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The stream offset of the oldest byte held (INFO `repl_backlog_first_byte_offset`).
    pub fn first_offset(&self) -> u64 {
        self.first_offset
    }

    /// The bytes the ring has allocated (what it costs in memory).
    pub fn allocated_bytes(&self) -> usize {
        self.ring.capacity()
    }

    /// Appends the stream's next bytes, forgetting the oldest beyond the size.
    pub fn append(&mut self, bytes: &[u8]) {
        if bytes.len() >= self.size_bytes {
            // Only the tail survives: the ring becomes it.
            let dropped = self.len + bytes.len() - self.size_bytes;
            self.ring.clear();
            self.ring
                .extend_from_slice(&bytes[bytes.len() - self.size_bytes..]);
            self.head = 0;
            self.len = self.size_bytes;
            self.first_offset += dropped as u64;
            return;
        }
        let mut rest = bytes;
        if self.ring.len() < self.size_bytes {
            // Still growing: never wrapped, so the bytes are `ring[..len]`.
            debug_assert!(self.head == 0 && self.len == self.ring.len());
            let room = self.size_bytes - self.ring.len();
            let now = rest.len().min(room);
            self.ring.extend_from_slice(&rest[..now]);
            self.len += now;
            rest = &rest[now..];
        }
        if rest.is_empty() {
            return;
        }
        // Full size: write after the newest byte, over the oldest ones.
        let capacity = self.size_bytes;
        let mut at = (self.head + self.len) % capacity;
        let first = rest.len().min(capacity - at);
        self.ring[at..at + first].copy_from_slice(&rest[..first]);
        self.ring[..rest.len() - first].copy_from_slice(&rest[first..]);
        at = (at + rest.len()) % capacity;
        let total = self.len + rest.len();
        if total > capacity {
            let dropped = total - capacity;
            self.first_offset += dropped as u64;
            self.len = capacity;
            self.head = at;
        } else {
            self.len = total;
        }
    }

    /// Whether a replica asking for stream byte `offset` onwards can be served from here.
    pub fn covers(&self, offset: u64) -> bool {
        offset >= self.first_offset && offset <= self.first_offset + self.len as u64
    }

    /// The bytes from stream offset `offset` to the newest, in at most two pieces; None if
    /// the backlog does not cover `offset`.
    pub fn since(&self, offset: u64) -> Option<(&[u8], &[u8])> {
        if !self.covers(offset) {
            return None;
        }
        let skip = (offset - self.first_offset) as usize;
        let wanted = self.len - skip;
        if self.ring.len() < self.size_bytes {
            return Some((&self.ring[skip..skip + wanted], &[]));
        }
        let start = (self.head + skip) % self.size_bytes;
        let first = wanted.min(self.size_bytes - start);
        Some((
            &self.ring[start..start + first],
            &self.ring[..wanted - first],
        ))
    }

    /// CONFIG SET repl-backlog-size: the newest bytes that fit are kept.
    pub fn resize(&mut self, size_bytes: usize) {
        assert!(size_bytes > 0, "a backlog holds at least one byte");
        if size_bytes == self.size_bytes {
            return;
        }
        let keep = self.len.min(size_bytes);
        let start = self.first_offset + (self.len - keep) as u64;
        let mut kept = Vec::with_capacity(keep);
        if let Some((a, b)) = self.since(start) {
            kept.extend_from_slice(a);
            kept.extend_from_slice(b);
        }
        self.ring = kept;
        self.size_bytes = size_bytes;
        self.head = 0;
        self.len = keep;
        // Never wrapped now (`head` 0, `len` the ring's length): it grows from here.
        self.first_offset = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stream as bytes numbered from 1: byte `n` is `n % 251` (a prime, so that an
    /// offset error shows in the contents).
    fn stream(from: u64, len: usize) -> Vec<u8> {
        (from..from + len as u64).map(|n| (n % 251) as u8).collect()
    }

    fn since(backlog: &Backlog, offset: u64) -> Vec<u8> {
        let (a, b) = backlog.since(offset).expect("covered");
        [a, b].concat()
    }

    #[test]
    fn holds_the_last_bytes_with_their_offsets_through_growth_and_wrapping() {
        let size = 1000;
        let mut backlog = Backlog::new(size, 1);
        let mut next = 1u64;
        // Pieces smaller and larger than the ring, crossing the wrap point in every way.
        for piece in [1, 7, 300, 999, 1000, 1001, 3, 2500, 17, 640, 640, 640] {
            backlog.append(&stream(next, piece));
            next += piece as u64;
            let held = (next - 1).min(size as u64) as usize;
            assert_eq!(backlog.len(), held);
            assert_eq!(backlog.first_offset(), next - held as u64);
            for offset in [backlog.first_offset(), next - 1, next] {
                assert_eq!(
                    since(&backlog, offset),
                    stream(offset, (next - offset) as usize)
                );
            }
            assert!(!backlog.covers(backlog.first_offset() - 1) || backlog.first_offset() == 1);
            assert!(!backlog.covers(next + 1));
        }
    }

    #[test]
    fn an_empty_backlog_serves_a_replica_that_missed_nothing() {
        let backlog = Backlog::new(16, 101);
        assert!(backlog.covers(101));
        assert_eq!(since(&backlog, 101), Vec::<u8>::new());
        assert!(!backlog.covers(100));
        assert!(!backlog.covers(102));
    }

    #[test]
    fn resizing_keeps_the_newest_bytes() {
        let mut backlog = Backlog::new(100, 1);
        backlog.append(&stream(1, 250));
        backlog.resize(40);
        assert_eq!(backlog.first_offset(), 211);
        assert_eq!(since(&backlog, 211), stream(211, 40));
        backlog.append(&stream(251, 30));
        assert_eq!(since(&backlog, 241), stream(241, 40));
        backlog.resize(500);
        backlog.append(&stream(281, 100));
        assert_eq!(since(&backlog, 241), stream(241, 140));
    }
}
