//! A diskless full sync's pipe: the snapshot writer's thread puts the RDB in, the event
//! loop takes it out for each replica's socket.
//!
//! Redis 7.0 has its child write the RDB into a pipe, and the parent copies each piece
//! read from the pipe to every replica's socket before it reads the next: a slow replica
//! slows the others, and one whose socket fails is dropped. Here the writer thread stands
//! for the child (`PipeStorage` is the storage the snapshot job writes its one part to),
//! and the pipe is bounded the same way: the writer waits while the slowest attached
//! replica is `PIPE_BYTES_MAX` behind it. A replica that is dropped detaches, so it holds
//! back nobody.
//!
//! Each replica's `Transfer` (`full_sync`) reads the pipe at its own position, framed as
//! `$EOF:<mark>\r\n`, the bytes, then the mark again, so the replica reads until it sees
//! the mark (the RDB's length is not known when it starts).

use crate::storage::{Storage, StorageFile};
use bytes::Bytes;
use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// How far the writer may run ahead of the slowest replica, in bytes. Redis's pipe is the
/// kernel's (64 KB); a little more lets replicas' sockets take larger writes.
pub const PIPE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// The writer hands the pipe pieces of this size (and what is left at the end).
const PIECE_BYTES: usize = 64 * 1024;

/// Where the snapshot stands, as the readers see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ending {
    /// The writer may still add bytes.
    Open,
    /// Every byte is in.
    Finished,
    /// The snapshot failed: the readers stop (their replicas are dropped).
    Failed,
}

struct PipeState {
    /// The pieces not yet read by every attached reader; the first starts at `base`.
    pieces: VecDeque<Bytes>,
    base: u64,
    /// Bytes put in so far.
    written: u64,
    /// Each reader's position; `None` once detached.
    readers: Vec<Option<u64>>,
    ending: Ending,
}

/// The pipe, shared by the writer thread and the event loop.
pub struct SyncPipe {
    state: Mutex<PipeState>,
    /// The writer waits on it for room.
    room: Condvar,
    /// Wakes the event loop: there are new bytes to send.
    notify: Box<dyn Fn() + Send + Sync>,
}

/// What a reader finds at its position.
pub enum Read {
    /// Bytes from its position on.
    Bytes(Bytes),
    /// Nothing yet: the writer has not caught up.
    Empty,
    /// Every byte was read.
    End,
}

impl SyncPipe {
    /// A pipe with `readers` readers (numbered from 0), all at position 0.
    pub fn new(readers: usize, notify: Box<dyn Fn() + Send + Sync>) -> Arc<SyncPipe> {
        Arc::new(SyncPipe {
            state: Mutex::new(PipeState {
                pieces: VecDeque::new(),
                base: 0,
                written: 0,
                readers: vec![Some(0); readers],
                ending: Ending::Open,
            }),
            room: Condvar::new(),
            notify,
        })
    }

    fn lock(&self) -> MutexGuard<'_, PipeState> {
        // A panic elsewhere holding the lock leaves consistent numbers: go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer's side: puts `piece` in, waiting while the slowest reader is too far
    /// behind. With no reader left the bytes are dropped (the capture still runs to its
    /// end, as Redis's child does once its replicas are gone).
    fn put(&self, piece: Bytes) -> io::Result<()> {
        let mut state = self.lock();
        loop {
            if state.ending == Ending::Failed {
                return Err(io::Error::other("the full sync was abandoned"));
            }
            let slowest = state.readers.iter().flatten().min().copied();
            match slowest {
                None => {
                    state.written += piece.len() as u64;
                    state.base = state.written;
                    state.pieces.clear();
                    return Ok(());
                }
                Some(position) if state.written - position < PIPE_BYTES_MAX => break,
                Some(_) => state = self.room.wait(state).unwrap_or_else(|e| e.into_inner()),
            }
        }
        state.written += piece.len() as u64;
        state.pieces.push_back(piece);
        drop(state);
        (self.notify)();
        Ok(())
    }

    /// Every byte is in.
    pub fn finish(&self) {
        self.lock().ending = Ending::Finished;
    }

    /// The snapshot failed, or the sync is abandoned: readers stop, the writer stops.
    pub fn fail(&self) {
        self.lock().ending = Ending::Failed;
        self.room.notify_all();
    }

    /// The bytes at reader `reader`'s position; Err when the snapshot failed.
    pub fn read(&self, reader: usize) -> io::Result<Read> {
        let state = self.lock();
        if state.ending == Ending::Failed {
            return Err(io::Error::other("the snapshot for the full sync failed"));
        }
        let Some(Some(position)) = state.readers.get(reader).copied() else {
            return Err(io::Error::other("a detached reader"));
        };
        if position == state.written {
            return Ok(match state.ending {
                Ending::Finished => Read::End,
                _ => Read::Empty,
            });
        }
        let mut start = state.base;
        for piece in &state.pieces {
            let end = start + piece.len() as u64;
            if position < end {
                return Ok(Read::Bytes(piece.slice((position - start) as usize..)));
            }
            start = end;
        }
        Err(io::Error::other("a reader's position is past the pipe"))
    }

    /// Reader `reader` sent `n` more bytes: pieces every reader is past are freed.
    pub fn advance(&self, reader: usize, n: usize) {
        let mut state = self.lock();
        if let Some(Some(position)) = state.readers.get_mut(reader) {
            *position += n as u64;
        }
        self.trim(&mut state);
    }

    /// Reader `reader` is gone (its replica was dropped or is done).
    pub fn detach(&self, reader: usize) {
        let mut state = self.lock();
        if let Some(slot) = state.readers.get_mut(reader) {
            *slot = None;
        }
        self.trim(&mut state);
    }

    fn trim(&self, state: &mut PipeState) {
        let slowest = state
            .readers
            .iter()
            .flatten()
            .min()
            .copied()
            .unwrap_or(state.written);
        while let Some(first) = state.pieces.front() {
            let end = state.base + first.len() as u64;
            if end > slowest {
                break;
            }
            state.base = end;
            state.pieces.pop_front();
        }
        self.room.notify_all();
    }
}

/// The storage a diskless sync's snapshot job writes to: its one part is the pipe.
pub struct PipeStorage {
    pub pipe: Arc<SyncPipe>,
}

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "a diskless sync writes no files",
    )
}

impl Storage for PipeStorage {
    fn create(&self, _path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(PipeFile {
            pipe: self.pipe.clone(),
            pending: Vec::with_capacity(PIECE_BYTES),
            length: 0,
        }))
    }
    fn open_append(&self, _path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Err(unsupported())
    }
    fn open_read(&self, _path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Err(unsupported())
    }
    fn read(&self, _path: &Path) -> io::Result<Vec<u8>> {
        Err(unsupported())
    }
    fn len(&self, _path: &Path) -> io::Result<u64> {
        Err(unsupported())
    }
    fn rename(&self, _from: &Path, _to: &Path) -> io::Result<()> {
        Err(unsupported())
    }
    fn remove_file(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }
    fn create_dir_all(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }
    fn sync_dir(&self, _path: &Path) -> io::Result<()> {
        Ok(())
    }
    fn list_dir(&self, _path: &Path) -> io::Result<Vec<String>> {
        Ok(Vec::new())
    }
    #[cfg(any(test, feature = "fault-injection"))]
    fn reach_checkpoint(&self, _point: crate::storage::CrashPoint) {}
}

/// The snapshot's one part, written into the pipe a piece at a time.
struct PipeFile {
    pipe: Arc<SyncPipe>,
    pending: Vec<u8>,
    length: u64,
}

impl PipeFile {
    fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let piece = Bytes::from(std::mem::replace(
            &mut self.pending,
            Vec::with_capacity(PIECE_BYTES),
        ));
        self.pipe.put(piece)
    }
}

impl StorageFile for PipeFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.pending.extend_from_slice(bytes);
        self.length += bytes.len() as u64;
        if self.pending.len() >= PIECE_BYTES {
            self.flush()?;
        }
        Ok(())
    }
    fn read_at(&self, _offset: u64, _buffer: &mut [u8]) -> io::Result<usize> {
        Err(unsupported())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.length)
    }
    fn set_len(&mut self, _length: u64) -> io::Result<()> {
        Err(unsupported())
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.flush()
    }
    fn sync_all(&mut self) -> io::Result<()> {
        self.flush()
    }
    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>> {
        Err(unsupported())
    }
}

impl Drop for PipeFile {
    fn drop(&mut self) {
        // The job syncs its part before it ends; this covers a job that does not.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_get_every_byte_and_the_writer_waits_for_the_slowest() {
        let pipe = SyncPipe::new(2, Box::new(|| {}));
        let storage = PipeStorage { pipe: pipe.clone() };
        let contents: Vec<u8> = (0..3_000_000u32).map(|n| (n % 251) as u8).collect();
        let expected = contents.clone();
        let writer = std::thread::spawn(move || {
            let mut file = storage.create(Path::new("x")).unwrap();
            for part in contents.chunks(10_007) {
                file.append(part).unwrap();
            }
            file.sync_all().unwrap();
        });
        let mut got = [Vec::new(), Vec::new()];
        let mut ended = [false, false];
        while !(ended[0] && ended[1]) {
            for reader in 0..2 {
                if ended[reader] {
                    continue;
                }
                match pipe.read(reader).unwrap() {
                    Read::Bytes(bytes) => {
                        let n = bytes.len().min(if reader == 0 { 777 } else { 100_000 });
                        got[reader].extend_from_slice(&bytes[..n]);
                        pipe.advance(reader, n);
                        let state = pipe.lock();
                        assert!(state.written - state.base <= PIPE_BYTES_MAX + PIECE_BYTES as u64);
                    }
                    Read::Empty => {
                        if writer.is_finished() {
                            pipe.finish();
                        }
                        std::thread::yield_now();
                    }
                    Read::End => ended[reader] = true,
                }
            }
        }
        writer.join().unwrap();
        assert_eq!(got[0], expected);
        assert_eq!(got[1], expected);
    }

    #[test]
    fn a_detached_reader_holds_nobody_back_and_failure_stops_readers() {
        let pipe = SyncPipe::new(2, Box::new(|| {}));
        pipe.detach(1);
        pipe.put(Bytes::from(vec![1u8; 10])).unwrap();
        assert!(matches!(pipe.read(0).unwrap(), Read::Bytes(b) if b.len() == 10));
        assert!(pipe.read(1).is_err());
        pipe.fail();
        assert!(pipe.read(0).is_err());
        assert!(pipe.put(Bytes::from_static(b"x")).is_err());
    }
}
