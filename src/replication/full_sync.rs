//! A full sync's snapshot: what it is and how it goes out.
//!
//! A replica that cannot continue from the backlog gets the whole dataset as one RDB file
//! taken by the forkless background snapshot (`snapshot::SnapshotJob`, one part) at a
//! known point of the stream, then the stream from that point, which accumulated in its
//! output meanwhile. The file carries Redis's replication aux fields — `repl-stream-db`,
//! `repl-id`, `repl-offset` — so that a Redis replica knows where the snapshot stands and
//! can later ask to continue with PSYNC. Keys already expired stay in it (as in Redis's):
//! the master sends their DEL in the stream, and a write of the stream may refer to one.
//!
//! Diskless (`repl-diskless-sync yes`, `sync_pipe`): the snapshot goes from the writer's
//! thread through a pipe to each replica's transfer, framed `$EOF:<mark>\r\n`, the bytes,
//! the mark. Disk-based, as Redis with `repl-diskless-sync no`: the snapshot is written to a
//! temporary file in `dir`, then sent to each replica that waited for it as
//! `$<length>\r\n<bytes>` (`Transfer`). Every replica that asks while one is being
//! written shares it (Redis attaches a replica to a BGSAVE in progress). The file is
//! removed as soon as every transfer has it open. A filtered snapshot (`REPLCONF
//! rdb-filter-only`: no keys, the function libraries or nothing — `redis-cli --replica`,
//! `--functions-rdb`) is made in memory at once (`filtered_snapshot`).

use super::sync_pipe::{Read, SyncPipe};
use crate::storage::{Storage, StorageFile};
use bytes::Bytes;
use std::io;
use std::path::Path;

/// Bytes read from the snapshot file per read (Redis's `PROTO_IOBUF_LEN` is 16 KB; a
/// larger chunk costs fewer system calls for the same socket writes).
const CHUNK_BYTES: usize = 64 * 1024;

/// The aux fields of a snapshot for replicas: the stream's database at the snapshot's
/// point, the history and the offset (Redis's `rdbSaveInfoAuxFields` with an `rsi`).
pub fn aux_fields(replid: &str, offset: i64, stream_db: usize) -> Vec<(Bytes, Bytes)> {
    vec![
        (
            Bytes::from_static(b"repl-stream-db"),
            Bytes::from(stream_db.to_string()),
        ),
        (
            Bytes::from_static(b"repl-id"),
            Bytes::from(replid.to_string()),
        ),
        (
            Bytes::from_static(b"repl-offset"),
            Bytes::from(offset.to_string()),
        ),
    ]
}

/// A filtered snapshot: the aux fields, the function libraries when `functions`, no
/// keys (Redis 7.0's `rdb-filter-only`).
pub fn filtered_snapshot(
    aux: Vec<(Bytes, Bytes)>,
    functions: Vec<Bytes>,
) -> Result<Vec<u8>, crate::rdb::RdbError> {
    let options = crate::rdb::RdbWriterOptions {
        extra_aux: aux,
        functions,
        ..crate::rdb::RdbWriterOptions::default()
    };
    let writer = crate::rdb::RdbWriter::new(Vec::new(), &options)?;
    Ok(writer.finish()?.0)
}

/// The temporary file of the `sequence`th full sync of process `pid`, in `dir`.
pub fn file_name(pid: u32, sequence: u64) -> String {
    format!("temp-sync-{pid}-{sequence}.rdb")
}

/// The line a master answers PSYNC with when a full sync starts.
pub fn full_resync_line(replid: &str, offset: i64) -> Vec<u8> {
    format!("+FULLRESYNC {replid} {offset}\r\n").into_bytes()
}

/// The line a master answers PSYNC with when the replica continues from the backlog
/// (with the history's ID for a replica that understands PSYNC2).
pub fn continue_line(replid: &str, psync2: bool) -> Vec<u8> {
    if psync2 {
        format!("+CONTINUE {replid}\r\n").into_bytes()
    } else {
        b"+CONTINUE\r\n".to_vec()
    }
}

/// Where a transfer's snapshot comes from.
enum Source {
    /// A diskless sync's pipe, read at this reader's position; `ended` once it said End.
    Pipe {
        pipe: std::sync::Arc<SyncPipe>,
        reader: usize,
        ended: bool,
        /// The mark that closes the snapshot (what the preamble announced).
        mark: Vec<u8>,
        /// Bytes of the closing mark sent.
        mark_sent: usize,
    },
    /// The snapshot file (each replica has its own handle).
    File(Box<dyn StorageFile>),
    /// A filtered snapshot, made in memory at once: no keys, perhaps the libraries.
    Memory(Vec<u8>),
}

/// One replica's copy of the snapshot going out: the preamble, then the file's bytes.
pub struct Transfer {
    source: Source,
    size: u64,
    preamble: Vec<u8>,
    /// Bytes of preamble and file handed to the socket so far.
    sent: u64,
    chunk: Vec<u8>,
    /// Bytes of `chunk` handed to the socket.
    chunk_sent: usize,
    /// When the socket last took bytes (a diskless replica that takes none for
    /// `repl-timeout` is dropped, as Redis drops one during its full sync).
    pub last_progress: std::time::Instant,
}

impl Transfer {
    /// Opens the snapshot file for one replica (each has its own handle, so the file can
    /// be removed once all are open).
    pub fn open(storage: &dyn Storage, path: &Path) -> io::Result<Transfer> {
        let file = storage.open_read(path)?;
        let size = file.len()?;
        Ok(Transfer::of(Source::File(file), size))
    }

    /// A snapshot made in memory (a filtered one).
    pub fn from_memory(snapshot: Vec<u8>) -> Transfer {
        let size = snapshot.len() as u64;
        Transfer::of(Source::Memory(snapshot), size)
    }

    /// Reader `reader` of a diskless sync's pipe, framed with `$EOF:<mark>` (40 bytes).
    pub fn from_pipe(pipe: std::sync::Arc<SyncPipe>, reader: usize, mark: Vec<u8>) -> Transfer {
        let mut preamble = b"$EOF:".to_vec();
        preamble.extend_from_slice(&mark);
        preamble.extend_from_slice(b"\r\n");
        Transfer {
            source: Source::Pipe {
                pipe,
                reader,
                ended: false,
                mark,
                mark_sent: 0,
            },
            size: 0,
            preamble,
            sent: 0,
            chunk: Vec::new(),
            chunk_sent: 0,
            last_progress: std::time::Instant::now(),
        }
    }

    fn of(source: Source, size: u64) -> Transfer {
        Transfer {
            source,
            size,
            preamble: format!("${size}\r\n").into_bytes(),
            sent: 0,
            chunk: Vec::new(),
            chunk_sent: 0,
            last_progress: std::time::Instant::now(),
        }
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Everything went out.
    pub fn is_done(&self) -> bool {
        match &self.source {
            Source::Pipe {
                ended,
                mark,
                mark_sent,
                ..
            } => *ended && *mark_sent == mark.len(),
            _ => self.sent == self.preamble.len() as u64 + self.size,
        }
    }

    /// Since when the socket has taken nothing of bytes this transfer holds (None when it
    /// holds none: a diskless replica waiting for the pipe is not the one stalled).
    pub fn stalled_since(&self) -> Option<std::time::Instant> {
        (self.chunk_sent < self.chunk.len()).then_some(self.last_progress)
    }

    /// Whether the snapshot goes out with the `$EOF:` framing (a diskless sync).
    pub fn is_diskless(&self) -> bool {
        matches!(self.source, Source::Pipe { .. })
    }

    /// The next bytes to send; empty when done. Reads the file a chunk at a time.
    pub fn pending(&mut self) -> io::Result<&[u8]> {
        let preamble = self.preamble.len() as u64;
        if self.sent < preamble {
            return Ok(&self.preamble[self.sent as usize..]);
        }
        if self.is_done() {
            return Ok(&[]);
        }
        if matches!(self.source, Source::Pipe { .. }) {
            self.fill_from_pipe()?;
            return Ok(match &self.source {
                Source::Pipe {
                    ended: true,
                    mark,
                    mark_sent,
                    ..
                } => &mark[*mark_sent..],
                _ => &self.chunk[self.chunk_sent..],
            });
        }
        if let Source::Memory(snapshot) = &self.source {
            return Ok(&snapshot[(self.sent - preamble) as usize..]);
        }
        if self.chunk_sent == self.chunk.len() {
            let Source::File(file) = &self.source else {
                unreachable!("a memory source returned above");
            };
            let position = self.sent - preamble;
            let want = (self.size - position).min(CHUNK_BYTES as u64) as usize;
            self.chunk.resize(want, 0);
            let mut filled = 0;
            while filled < want {
                let n = file.read_at(position + filled as u64, &mut self.chunk[filled..])?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "premature EOF",
                    ));
                }
                filled += n;
            }
            self.chunk_sent = 0;
        }
        Ok(&self.chunk[self.chunk_sent..])
    }

    /// A pipe's transfer whose piece went out takes the next one, or learns the end.
    fn fill_from_pipe(&mut self) -> io::Result<()> {
        let Source::Pipe {
            pipe,
            reader,
            ended,
            ..
        } = &mut self.source
        else {
            return Ok(());
        };
        if *ended || self.chunk_sent < self.chunk.len() {
            return Ok(());
        }
        // A copy of the piece: the pipe may free it once every reader passed it.
        match pipe.read(*reader)? {
            Read::Bytes(bytes) => {
                self.chunk.clear();
                self.chunk.extend_from_slice(&bytes);
                self.chunk_sent = 0;
                // Its stall, if any, counts from when it had bytes to send.
                self.last_progress = std::time::Instant::now();
            }
            Read::Empty => {}
            Read::End => *ended = true,
        }
        Ok(())
    }

    /// `n` bytes of what `pending` returned went to the socket.
    pub fn advance(&mut self, n: usize) {
        self.last_progress = std::time::Instant::now();
        let preamble = self.preamble.len() as u64;
        if self.sent < preamble {
            debug_assert!(self.sent + n as u64 <= preamble);
        } else if let Source::Pipe {
            pipe,
            reader,
            ended,
            mark_sent,
            ..
        } = &mut self.source
        {
            if *ended {
                *mark_sent += n;
            } else {
                self.chunk_sent += n;
                pipe.advance(*reader, n);
            }
        } else if matches!(self.source, Source::File(_)) {
            self.chunk_sent += n;
            debug_assert!(self.chunk_sent <= self.chunk.len());
        }
        self.sent += n as u64;
    }
}

impl Drop for Transfer {
    fn drop(&mut self) {
        // A replica done or dropped no longer holds the pipe's writer back.
        if let Source::Pipe { pipe, reader, .. } = &self.source {
            pipe.detach(*reader);
        }
    }
}

/// A diskless sync's mark: 40 random bytes that end the snapshot (Redis's
/// `CONFIG_RUN_ID_SIZE` of hexadecimal characters, as Redis sends; the replica reads
/// until it sees them).
pub fn eof_mark() -> Vec<u8> {
    super::ids::random_id().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_sends_the_preamble_then_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name(1, 2));
        let contents: Vec<u8> = (0..200_000u32).map(|n| (n % 253) as u8).collect();
        std::fs::write(&path, &contents).unwrap();
        let storage = crate::storage::RealStorage::new("");
        let mut transfer = Transfer::open(&storage, &path).unwrap();
        let mut sent = Vec::new();
        // A socket that takes odd amounts at a time.
        for take in [3usize, 5, 7001, 1, 65536, 100_000].iter().cycle() {
            let pending = transfer.pending().unwrap();
            if pending.is_empty() {
                break;
            }
            let n = pending.len().min(*take);
            sent.extend_from_slice(&pending[..n]);
            transfer.advance(n);
        }
        assert!(transfer.is_done());
        let mut expected = b"$200000\r\n".to_vec();
        expected.extend_from_slice(&contents);
        assert_eq!(sent, expected);
    }

    #[test]
    fn the_aux_fields_and_lines_are_redis_s() {
        let id = "a".repeat(40);
        let aux = aux_fields(&id, 1234, 0);
        assert_eq!(aux[0], (Bytes::from("repl-stream-db"), Bytes::from("0")));
        assert_eq!(aux[2], (Bytes::from("repl-offset"), Bytes::from("1234")));
        assert_eq!(
            full_resync_line(&id, 7),
            format!("+FULLRESYNC {id} 7\r\n").into_bytes()
        );
        assert_eq!(continue_line(&id, false), b"+CONTINUE\r\n");
    }
}
