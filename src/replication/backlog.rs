//! The replication buffer: the stream's recent bytes, in blocks, shared by the backlog and
//! every replica (Redis 7's design, `replication.c`'s "replication buffer").
//!
//! Offsets are Redis's: the stream's bytes are numbered from 1, `master_repl_offset` is
//! the number of bytes written so far, and a replica asks (PSYNC) for the first byte it
//! has not received — one past the offset it has processed. The buffer holds the bytes
//! `first_offset ..= first_offset + len - 1`; a request for `first_offset + len` (nothing
//! missed) is served with nothing.
//!
//! - **One copy.** The stream is appended once. Each replica that takes it is a *reader*:
//!   the offset of the next byte its socket must get. A replica waiting for its snapshot
//!   reads from the snapshot's point, so two replicas syncing at once hold the stream
//!   since then once, not twice, and a replica's output holds only what precedes the
//!   stream (`+FULLRESYNC`, `+CONTINUE`).
//! - **The backlog is the buffer's history.** Blocks at the front are freed once the
//!   bytes after them are at least `repl-backlog-size` and no reader still needs them.
//!   A slow reader therefore makes the backlog outgrow its size (INFO
//!   `repl_backlog_histlen`), and a replica that reconnects can continue from anywhere in
//!   it; when that reader goes, the excess is freed.
//! - **Blocks** of 16 KiB (Redis's), so that a large `repl-backlog-size` costs nothing
//!   before the stream fills it, and history is freed in steps that small. (Redis sizes a
//!   block to a bigger command; Tessera feeds a turn's records at once, so it cuts them.)
//!   The buffer never frees its last block.

use std::collections::VecDeque;

/// The size of a block (Redis's `PROTO_REPLY_CHUNK_BYTES`).
const BLOCK_BYTES: usize = 16 * 1024;

/// A run of the stream's bytes starting at stream offset `start`.
#[derive(Debug)]
struct Block {
    start: u64,
    bytes: Vec<u8>,
}

impl Block {
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// The stream's recent bytes and where each replica reading them is.
#[derive(Debug)]
pub struct Backlog {
    blocks: VecDeque<Block>,
    /// `repl-backlog-size`: the history kept when no reader needs more.
    size_bytes: usize,
    block_bytes: usize,
    /// Bytes held (Redis's `histlen`).
    len: usize,
    /// The stream offset of the oldest byte held (of the next byte, while empty).
    first_offset: u64,
    /// Bytes the blocks have allocated.
    allocated: usize,
    /// Replica client id → the stream offset of the next byte it gets. Never below
    /// `first_offset`: the blocks it needs are not freed.
    readers: hashbrown::HashMap<u64, u64>,
}

impl Backlog {
    /// An empty buffer of history `size_bytes` whose next byte is stream byte
    /// `next_offset`.
    pub fn new(size_bytes: usize, next_offset: u64) -> Backlog {
        Self::with_blocks(size_bytes, next_offset, BLOCK_BYTES)
    }

    /// `new` with blocks of `block_bytes` (tests use small ones).
    pub(super) fn with_blocks(size_bytes: usize, next_offset: u64, block_bytes: usize) -> Backlog {
        assert!(size_bytes > 0, "a backlog holds at least one byte");
        Backlog {
            blocks: VecDeque::new(),
            size_bytes,
            block_bytes,
            len: 0,
            first_offset: next_offset,
            allocated: 0,
            readers: hashbrown::HashMap::new(),
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

    /// The stream offset of the next byte appended.
    pub fn next_offset(&self) -> u64 {
        self.first_offset + self.len as u64
    }

    /// The bytes the blocks have allocated (what the buffer costs in memory: Redis's
    /// `repl_buffer_mem`).
    pub fn allocated_bytes(&self) -> usize {
        self.allocated
    }

    /// Appends the stream's next bytes, then frees the history no one needs.
    pub fn append(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        if let Some(tail) = self.blocks.back_mut() {
            let room = tail.bytes.capacity() - tail.bytes.len();
            let now = rest.len().min(room);
            tail.bytes.extend_from_slice(&rest[..now]);
            rest = &rest[now..];
        }
        let mut start = self.next_offset() + (bytes.len() - rest.len()) as u64;
        while !rest.is_empty() {
            let now = rest.len().min(self.block_bytes);
            let mut block = Vec::with_capacity(self.block_bytes);
            block.extend_from_slice(&rest[..now]);
            self.allocated += block.capacity();
            self.blocks.push_back(Block {
                start,
                bytes: block,
            });
            start += now as u64;
            rest = &rest[now..];
        }
        self.len += bytes.len();
        self.trim();
    }

    /// Frees blocks at the front while the history after them is more than the size and
    /// no reader needs them (Redis's `incrementalTrimReplicationBacklog`, done at once:
    /// freeing is by whole blocks and cheap).
    fn trim(&mut self) {
        let needed = self.readers.values().min().copied().unwrap_or(u64::MAX);
        while self.blocks.len() > 1 {
            let front = &self.blocks[0];
            let after = self.len - front.bytes.len();
            if after <= self.size_bytes || front.end() > needed {
                break;
            }
            let front = self.blocks.pop_front().expect("more than one block");
            self.len = after;
            self.allocated -= front.bytes.capacity();
            self.first_offset = front.end();
        }
        debug_assert_eq!(
            self.blocks.front().map_or(self.first_offset, |b| b.start),
            self.first_offset
        );
    }

    /// Whether a replica asking for stream byte `offset` onwards can be served from here.
    pub fn covers(&self, offset: u64) -> bool {
        offset >= self.first_offset && offset <= self.next_offset()
    }

    /// Makes replica `id` a reader from stream byte `offset` on (a PSYNC continued from
    /// here, or the point of the snapshot it waits for). Returns false, and adds nothing,
    /// when the buffer does not cover `offset`.
    #[must_use]
    pub fn add_reader(&mut self, id: u64, offset: u64) -> bool {
        if !self.covers(offset) {
            return false;
        }
        self.readers.insert(id, offset);
        true
    }

    pub fn has_reader(&self, id: u64) -> bool {
        self.readers.contains_key(&id)
    }

    /// Replica `id` takes the stream no more (gone, or resyncing).
    pub fn remove_reader(&mut self, id: u64) {
        if self.readers.remove(&id).is_some() {
            self.trim();
        }
    }

    /// The bytes replica `id` has not been sent, as far as they are contiguous here (the
    /// rest of one block): empty when it has everything, or is not a reader.
    pub fn pending(&self, id: u64) -> &[u8] {
        let Some(&offset) = self.readers.get(&id) else {
            return &[];
        };
        let index = self.blocks.partition_point(|b| b.end() <= offset);
        match self.blocks.get(index) {
            Some(block) => &block.bytes[(offset - block.start) as usize..],
            None => &[],
        }
    }

    /// Replica `id` was sent `n` more bytes.
    pub fn advance(&mut self, id: u64, n: usize) {
        let next = self.next_offset();
        let Some(offset) = self.readers.get_mut(&id) else {
            return;
        };
        *offset += n as u64;
        assert!(*offset <= next, "a reader is never past the stream's end");
        self.trim();
    }

    /// The bytes replica `id` has not been sent (its share of the buffer, for its
    /// output limit and CLIENT LIST).
    pub fn pending_bytes(&self, id: u64) -> u64 {
        self.readers
            .get(&id)
            .map_or(0, |&offset| self.next_offset() - offset)
    }

    /// The bytes from stream offset `offset` to the newest, copied; None if the buffer
    /// does not cover `offset`.
    #[cfg(test)]
    pub fn since(&self, offset: u64) -> Option<Vec<u8>> {
        if !self.covers(offset) {
            return None;
        }
        let mut bytes = Vec::with_capacity((self.next_offset() - offset) as usize);
        for block in &self.blocks {
            if block.end() > offset {
                let from = offset.saturating_sub(block.start) as usize;
                bytes.extend_from_slice(&block.bytes[from..]);
            }
        }
        Some(bytes)
    }

    /// CONFIG SET repl-backlog-size: the history beyond the new size that no reader
    /// needs is freed.
    pub fn resize(&mut self, size_bytes: usize) {
        assert!(size_bytes > 0, "a backlog holds at least one byte");
        self.size_bytes = size_bytes;
        self.trim();
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

    /// What reader `id` gets, block by block, until it has everything.
    fn read_all(backlog: &mut Backlog, id: u64) -> Vec<u8> {
        let mut got = Vec::new();
        loop {
            let pending = backlog.pending(id).to_vec();
            if pending.is_empty() {
                return got;
            }
            got.extend_from_slice(&pending);
            backlog.advance(id, pending.len());
        }
    }

    #[test]
    fn holds_at_least_its_size_of_history_in_whole_blocks_with_their_offsets() {
        let (size, block) = (1000, 64);
        let mut backlog = Backlog::with_blocks(size, 1, block);
        let mut next = 1u64;
        for piece in [1, 7, 300, 999, 1000, 1001, 3, 2500, 17, 640, 640, 640] {
            backlog.append(&stream(next, piece));
            next += piece as u64;
            assert_eq!(backlog.next_offset(), next);
            let held = backlog.len();
            // Freed by whole blocks: at least the size (or all there is), and no more
            // than the size plus the front block.
            assert!(held >= size.min((next - 1) as usize), "{held}");
            assert_eq!(backlog.first_offset(), next - held as u64);
            for offset in [backlog.first_offset(), next - 1, next] {
                assert_eq!(
                    backlog.since(offset).unwrap(),
                    stream(offset, (next - offset) as usize)
                );
            }
            assert!(!backlog.covers(backlog.first_offset() - 1) || backlog.first_offset() == 1);
            assert!(!backlog.covers(next + 1));
        }
        assert!(backlog.len() < 2500 + size);
        assert!(backlog.allocated_bytes() >= backlog.len());
    }

    #[test]
    fn an_empty_backlog_serves_a_replica_that_missed_nothing() {
        let mut backlog = Backlog::new(16, 101);
        assert!(backlog.covers(101));
        assert_eq!(backlog.since(101).unwrap(), Vec::<u8>::new());
        assert!(!backlog.covers(100));
        assert!(!backlog.covers(102));
        assert!(backlog.add_reader(7, 101));
        assert_eq!(backlog.pending(7), b"");
        assert!(!backlog.add_reader(8, 102));
        assert_eq!(backlog.pending_bytes(8), 0);
    }

    #[test]
    fn a_slow_reader_keeps_the_history_it_needs_and_its_going_frees_it() {
        let mut backlog = Backlog::with_blocks(100, 1, 32);
        backlog.append(&stream(1, 50));
        assert!(backlog.add_reader(1, 11)); // slow: reads nothing yet
        assert!(backlog.add_reader(2, 51)); // keeps up
        let mut fast = Vec::new();
        for at in (51..10_051).step_by(500) {
            backlog.append(&stream(at, 500));
            fast.extend(read_all(&mut backlog, 2));
        }
        assert_eq!(fast, stream(51, 10_000));
        // Everything since the slow reader's offset is still here, once.
        assert_eq!(backlog.first_offset(), 1);
        assert_eq!(backlog.pending_bytes(1), 10_040);
        assert!(backlog.allocated_bytes() < 2 * 10_050);
        // A replica that reconnects can continue from anywhere in it.
        assert!(backlog.covers(2));
        let before = backlog.allocated_bytes();
        let partial = read_all(&mut backlog, 1);
        assert_eq!(partial, stream(11, 10_040));
        assert!(backlog.len() <= 100 + 32, "{}", backlog.len());
        assert!(backlog.allocated_bytes() < before / 10);
        // A reader that goes frees what it held.
        assert!(backlog.add_reader(3, backlog.first_offset()));
        backlog.append(&stream(10_051, 5_000));
        assert!(backlog.len() > 5_000);
        backlog.remove_reader(3);
        // Down to the block the remaining reader is in.
        assert!(
            backlog.first_offset() > 10_051 - 32,
            "{}",
            backlog.first_offset()
        );
        assert!(backlog.len() < 5_000 + 32, "{}", backlog.len());
        assert_eq!(read_all(&mut backlog, 1), stream(10_051, 5_000));
    }

    #[test]
    fn resizing_frees_history_beyond_the_new_size() {
        let mut backlog = Backlog::with_blocks(1000, 1, 10);
        for at in (1..251).step_by(10) {
            backlog.append(&stream(at, 10));
        }
        assert_eq!(backlog.first_offset(), 1);
        backlog.resize(40);
        assert!((40..=50).contains(&backlog.len()), "{}", backlog.len());
        let first = backlog.first_offset();
        assert_eq!(
            backlog.since(first).unwrap(),
            stream(first, 251 - first as usize)
        );
        backlog.resize(500);
        backlog.append(&stream(251, 100));
        assert_eq!(
            backlog.since(first).unwrap(),
            stream(first, 351 - first as usize)
        );
    }

    #[test]
    fn a_big_append_is_cut_into_blocks_and_the_last_block_is_never_freed() {
        let mut backlog = Backlog::with_blocks(100, 1, 1000);
        backlog.append(&stream(1, 3_000_000));
        assert_eq!(backlog.len(), 1000);
        assert_eq!(backlog.allocated_bytes(), 1000);
        assert_eq!(backlog.first_offset(), 2_999_001);
        let first = backlog.first_offset();
        assert_eq!(
            backlog.since(first).unwrap(),
            stream(first, 3_000_001 - first as usize)
        );
    }
}
