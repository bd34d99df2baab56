//! Reading a log file's records: RESP commands one after another, parsed in place from
//! large reads. Start-up replay (`recovery`), the manifest rebuild (`log::rebuild`) and
//! `tessera-check-aof` all read logs through `scan_records`, so that they agree on what is
//! a record, what is a torn tail (a crash mid-write: only the end of the last file may be
//! cut) and what is damage. A caller's `apply` may refuse a record (the replay's engine
//! does): `ScanError` tells that from damage.

use crate::resp::{Parse, ParseLimits, Progress, parse_request};
use crate::storage::{Storage, StorageReader};
use std::convert::Infallible;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

/// Why a log file could not be loaded. Displayed as `tessera-check-aof --rebuild-manifest`
/// describes it.
#[derive(Debug, thiserror::Error)]
pub enum LogDamage {
    /// The file ends inside a record that starts at `offset`.
    #[error("it ends inside a record at offset {offset}")]
    Truncated { offset: u64 },
    /// Bytes at `offset` are not a valid record.
    #[error("bad format at offset {offset}: {reason}")]
    Corrupt { offset: u64, reason: Corruption },
}

impl LogDamage {
    /// Where the file stops being valid: the bytes before it are complete records.
    pub fn offset(&self) -> u64 {
        match self {
            LogDamage::Truncated { offset } | LogDamage::Corrupt { offset, .. } => *offset,
        }
    }
}

/// What is wrong at a damaged offset. The texts appear in start-up's refusal and in
/// `tessera-check-aof`'s report.
#[derive(Debug, thiserror::Error)]
pub enum Corruption {
    /// A bulk's length is not followed by its CRLF (a hole of zeros, a bad length).
    #[error("a bulk argument is not followed by CRLF")]
    UnterminatedBulk,
    #[error("MULTI inside a MULTI block")]
    NestedMulti,
    #[error("EXEC without MULTI")]
    ExecWithoutMulti,
    /// An inline command, or an empty multibulk.
    #[error("not a command record (expected '*' followed by a positive count)")]
    NotACommand,
    /// A `#` annotation line longer than Redis reads one (`AOF_ANNOTATION_LINE_MAX_LEN`).
    #[error("an annotation line ('#…') longer than {ANNOTATION_MAX_BYTES} bytes")]
    AnnotationTooLong,
    /// The request parser's protocol error (Redis's text).
    #[error("{0}")]
    Protocol(&'static str),
    /// The file ends inside a record whose length runs past complete records.
    #[error("a record's length runs past later valid records")]
    LengthRunsPast,
    /// The file could not be opened (reported at offset 0) or read.
    #[error("{0}")]
    Unreadable(#[source] std::io::Error),
}

/// The longest `#` annotation line, its newline included (Redis 7.0 reads annotations
/// with a buffer of this size: `AOF_ANNOTATION_LINE_MAX_LEN`).
pub const ANNOTATION_MAX_BYTES: usize = 1024;

/// Where a `#` annotation at the start of `bytes` ends.
enum Annotation {
    /// After this many bytes (its newline included).
    EndsAfter(usize),
    /// Its newline is not in `bytes` yet.
    Unfinished,
    TooLong,
}

fn annotation(bytes: &[u8]) -> Annotation {
    let window = &bytes[..bytes.len().min(ANNOTATION_MAX_BYTES)];
    match window.iter().position(|&b| b == b'\n') {
        Some(newline) => Annotation::EndsAfter(newline + 1),
        None if window.len() == ANNOTATION_MAX_BYTES => Annotation::TooLong,
        None => Annotation::Unfinished,
    }
}

/// Why `scan_records` stopped before the end of the file.
#[derive(Debug)]
pub enum ScanError<E> {
    /// The file is damaged (or unreadable) there.
    Damaged(LogDamage),
    /// `apply` refused the record at `offset`.
    Refused { offset: u64, error: E },
}

impl ScanError<Infallible> {
    /// The damage: an `apply` that can't fail refuses nothing.
    pub fn into_damage(self) -> LogDamage {
        match self {
            ScanError::Damaged(damage) => damage,
            ScanError::Refused { error, .. } => match error {},
        }
    }
}

const READ_CHUNK_BYTES: usize = 4 * 1024 * 1024;

fn log_limits() -> ParseLimits {
    ParseLimits {
        bulk_bytes_max: usize::MAX / 2,
        inline_bytes_max: 64 * 1024,
        unauthenticated: false,
        // A log file is read in large chunks already; its records are parsed in place.
        big_argument_bytes_min: usize::MAX,
    }
}

/// Checks a log file's records without looking at them: the bytes of complete records,
/// or the first damage.
pub fn check_records(storage: &dyn Storage, path: &Path) -> Result<u64, LogDamage> {
    scan_records(storage, path, |_, _| Ok::<(), Infallible>(())).map_err(ScanError::into_damage)
}

/// Reads RESP records from a log file, calling `apply` with each record's arguments and
/// its starting offset. Stops at the first damage or refusal. Returns the bytes consumed.
pub fn scan_records<E>(
    storage: &dyn Storage,
    path: &Path,
    apply: impl FnMut(&[&[u8]], u64) -> Result<(), E>,
) -> Result<u64, ScanError<E>> {
    scan(storage, path, READ_CHUNK_BYTES, apply)
}

/// `scan_records` reading `chunk_bytes` at a time (test equipment: the fuzz target checks
/// that the read size changes nothing).
#[cfg(feature = "fault-injection")]
pub fn scan_records_in_chunks<E>(
    storage: &dyn Storage,
    path: &Path,
    chunk_bytes: usize,
    apply: impl FnMut(&[&[u8]], u64) -> Result<(), E>,
) -> Result<u64, ScanError<E>> {
    scan(storage, path, chunk_bytes, apply)
}

fn scan<E>(
    storage: &dyn Storage,
    path: &Path,
    chunk_bytes: usize,
    mut apply: impl FnMut(&[&[u8]], u64) -> Result<(), E>,
) -> Result<u64, ScanError<E>> {
    assert!(chunk_bytes > 0);
    let damaged = |offset, reason| ScanError::Damaged(LogDamage::Corrupt { offset, reason });
    let mut file = storage
        .open_read(path)
        .map(StorageReader::new)
        .map_err(|e| damaged(0, Corruption::Unreadable(e)))?;
    let limits = log_limits();
    let mut buf: Vec<u8> = Vec::with_capacity(chunk_bytes);
    let mut start = 0usize; // parse position in buf
    let mut base_offset = 0u64; // file offset of buf[0]
    let mut ranges: Vec<Range<usize>> = Vec::new();
    // Positions in `progress` are relative to the record's start, which stays at `start`
    // (the buffer is only drained up to a record boundary).
    let mut progress = Progress::default();
    let mut eof = false;
    // Where an open `MULTI` block starts: a file that ends inside one ends in the middle of
    // a transaction, which is cut off as a whole (Redis does the same).
    let mut open_multi: Option<u64> = None;
    loop {
        // A line starting with `#` between records is an annotation (Redis 7.0 writes
        // `#TS:<unix seconds>` ones and its loader skips every such line): no record.
        let parsed = if buf.get(start) == Some(&b'#') {
            match annotation(&buf[start..]) {
                Annotation::EndsAfter(length) => {
                    start += length;
                    continue;
                }
                Annotation::TooLong => {
                    let offset = base_offset + start as u64;
                    return Err(damaged(offset, Corruption::AnnotationTooLong));
                }
                Annotation::Unfinished => Parse::Incomplete,
            }
        } else {
            parse_request(&buf[start..], &limits, &mut ranges, &mut progress)
        };
        match parsed {
            Parse::Complete(used) if !ranges.is_empty() => {
                let record_offset = base_offset + start as u64;
                let slice = &buf[start..start + used];
                let args: Vec<&[u8]> = ranges.iter().map(|r| &slice[r.clone()]).collect();
                // The parser, as Redis's, does not check the CRLF after a bulk. A log is
                // written whole: without it the bulk did not end where its length says — a
                // crash left a hole of zeros in an unsynced write, say — and what it holds
                // is no value anyone wrote. Damage, not data (redis-check-aof agrees).
                let unterminated = ranges
                    .iter()
                    .any(|r| slice.get(r.end..r.end + 2) != Some(&b"\r\n"[..]));
                let malformed = if unterminated {
                    Some(Corruption::UnterminatedBulk)
                } else if args[0].eq_ignore_ascii_case(b"multi") {
                    let nested = open_multi.replace(record_offset).is_some();
                    nested.then_some(Corruption::NestedMulti)
                } else if args[0].eq_ignore_ascii_case(b"exec") {
                    open_multi
                        .take()
                        .is_none()
                        .then_some(Corruption::ExecWithoutMulti)
                } else {
                    None
                };
                if let Some(reason) = malformed {
                    return Err(damaged(record_offset, reason));
                }
                if let Err(error) = apply(&args, record_offset) {
                    return Err(ScanError::Refused {
                        offset: record_offset,
                        error,
                    });
                }
                start += used;
            }
            Parse::Complete(_)
            | Parse::Inline(..)
            | Parse::Invalid(_)
            | Parse::BigArgument { .. } => {
                let offset = base_offset + start as u64;
                let reason = match parsed {
                    Parse::Invalid(why) => Corruption::Protocol(why),
                    Parse::BigArgument { .. } => unreachable!("disabled by log_limits"),
                    _ => Corruption::NotACommand,
                };
                return Err(damaged(offset, reason));
            }
            Parse::Incomplete => {
                if eof {
                    let offset = base_offset + start as u64;
                    let damage = if start == buf.len() {
                        None
                    } else {
                        Some(classify_incomplete_tail(&buf[start..], offset))
                    };
                    return match (damage, open_multi) {
                        (None, None) => Ok(offset),
                        (None | Some(LogDamage::Truncated { .. }), Some(multi)) => {
                            Err(ScanError::Damaged(LogDamage::Truncated { offset: multi }))
                        }
                        (Some(damage), _) => Err(ScanError::Damaged(damage)),
                    };
                }
                // Keep the unparsed tail, read more.
                buf.drain(..start);
                base_offset += start as u64;
                start = 0;
                let old_len = buf.len();
                buf.resize(old_len + chunk_bytes, 0);
                let read = loop {
                    match file.read(&mut buf[old_len..]) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            let offset = base_offset + old_len as u64;
                            return Err(damaged(offset, Corruption::Unreadable(e)));
                        }
                    }
                };
                buf.truncate(old_len + read);
                eof = read == 0;
            }
        }
    }
}

/// A file that ends inside a record was either cut by a crash mid-write (then nothing
/// valid follows the record's start) or damaged in a length field so that the parser ran
/// past the end. If a complete record can be parsed from any later position, it is damage.
fn classify_incomplete_tail(tail: &[u8], offset: u64) -> LogDamage {
    let limits = log_limits();
    let mut ranges = Vec::new();
    for position in 1..tail.len() {
        if tail[position] == b'*'
            && tail[position - 1] == b'\n'
            && let Parse::Complete(_) = parse_request(
                &tail[position..],
                &limits,
                &mut ranges,
                &mut Progress::default(),
            )
            && !ranges.is_empty()
        {
            return LogDamage::Corrupt {
                offset,
                reason: Corruption::LengthRunsPast,
            };
        }
    }
    LogDamage::Truncated { offset }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bulk_not_followed_by_crlf_is_damage_at_its_record() {
        let storage = crate::storage::SimulatedStorage::new();
        let path = Path::new("log");
        let mut file = storage.create(path).unwrap();
        let first = b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n";
        // The end of the second record's value and its CRLF read as zeros (a hole), and a
        // complete record follows.
        let second = b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$4\r\nva\0\0\0\0";
        let third = b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n3\r\n";
        for bytes in [&first[..], second, third] {
            file.append(bytes).unwrap();
        }
        let mut keys = Vec::new();
        let result = scan_records(&storage, path, |args, _| {
            keys.push(args[1].to_vec());
            Ok::<(), Infallible>(())
        });
        match result.map_err(ScanError::into_damage) {
            Err(LogDamage::Corrupt {
                offset,
                reason: Corruption::UnterminatedBulk,
            }) => assert_eq!(offset, first.len() as u64),
            other => panic!("{other:?}"),
        }
        assert_eq!(keys, [b"a".to_vec()]);
    }

    /// The keys `scan_records` finds in `bytes` read `chunk` bytes at a time, and how it
    /// ended.
    fn keys_in(bytes: &[u8], chunk: usize) -> (Vec<Vec<u8>>, Result<u64, LogDamage>) {
        let storage = crate::storage::SimulatedStorage::new();
        let path = Path::new("log");
        storage.create(path).unwrap().append(bytes).unwrap();
        let mut keys = Vec::new();
        let result = scan(&storage, path, chunk, |args, _| {
            keys.push(args[1].to_vec());
            Ok::<(), Infallible>(())
        });
        (keys, result.map_err(ScanError::into_damage))
    }

    #[test]
    fn annotations_between_records_are_skipped_as_redis_skips_them() {
        let set = |key: &str| format!("*3\r\n$3\r\nSET\r\n$1\r\n{key}\r\n$1\r\n1\r\n");
        let log = format!(
            "#TS:1628217470\r\n{}#TS:1628217471\r\n{}#\n",
            set("a"),
            set("b")
        );
        for chunk in [1, 3, 7, 1024] {
            let (keys, result) = keys_in(log.as_bytes(), chunk);
            assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()], "chunk {chunk}");
            assert_eq!(result.unwrap(), log.len() as u64, "chunk {chunk}");
        }
        // Cut inside an annotation: a torn tail, as inside a record.
        let torn = format!("{}#TS:16282", set("a"));
        let (keys, result) = keys_in(torn.as_bytes(), 4);
        assert_eq!(keys, [b"a".to_vec()]);
        assert!(
            matches!(result, Err(LogDamage::Truncated { offset }) if offset == set("a").len() as u64),
            "{result:?}"
        );
        // Longer than Redis reads one: damage, not a line without end.
        let long = format!("#{}\n{}", "x".repeat(ANNOTATION_MAX_BYTES), set("a"));
        let (keys, result) = keys_in(long.as_bytes(), 64);
        assert!(keys.is_empty());
        assert!(
            matches!(
                result,
                Err(LogDamage::Corrupt {
                    offset: 0,
                    reason: Corruption::AnnotationTooLong
                })
            ),
            "{result:?}"
        );
    }
}
