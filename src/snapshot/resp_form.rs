//! The log's base in RESP form (`aof-use-rdb-preamble no`): every key written as the
//! commands that rebuild it, in the forms Redis 7.0's rewrite writes
//! (`rewriteAppendOnlyFileRio`): `FUNCTION LOAD` for each library first, `SELECT` before
//! each database, then per key `SET`, `RPUSH`, `SADD`, `ZADD` or `HMSET` (at most 64
//! elements per command, as Redis's `AOF_REWRITE_ITEMS_PER_CMD`), a stream as `XADD`s,
//! `XSETID` and its groups (`XGROUP CREATE`, `XCLAIM … FORCE` per pending entry,
//! `XGROUP CREATECONSUMER` for a consumer with none), and `PEXPIREAT` for a key with a
//! TTL. Redis 7.0 loads such a base, and Tessera loads Redis's (`recovery`).
//!
//! The same encoding serves the parts' writer threads (`RespWriter`) and the event loop's
//! serialise-before-write (`encode_entry`), whose record the writer copies as it is.

use crate::keyspace::{Entry, NO_EXPIRY, Value};
use crate::rdb::RdbError;
use crate::types::listpack::LpValue;
use crate::types::stream::Stream;
use crate::types::stream_id::StreamId;
use bytes::Bytes;
use std::borrow::Cow;
use std::io::Write;

/// Elements (or pairs) per command, as Redis's `AOF_REWRITE_ITEMS_PER_CMD`.
const ITEMS_PER_COMMAND: usize = 64;

/// The buffer is handed to the output once it holds this much.
const FLUSH_BYTES: usize = 64 * 1024;

/// Writes a base in RESP form to `output`, the counterpart of `rdb::RdbWriter` for a part.
pub struct RespWriter<W: Write> {
    output: W,
    buffer: Vec<u8>,
    bytes_written: u64,
    current_db: Option<u32>,
}

impl<W: Write> RespWriter<W> {
    /// Starts the file with the function libraries, as Redis's rewrite does.
    pub fn new(output: W, functions: &[Bytes]) -> Result<Self, RdbError> {
        let mut writer = RespWriter {
            output,
            buffer: Vec::with_capacity(FLUSH_BYTES * 2),
            bytes_written: 0,
            current_db: None,
        };
        for code in functions {
            crate::resp::encode_command(&mut writer.buffer, &[b"FUNCTION" as &[u8], b"LOAD", code]);
            writer.flush_if_full()?;
        }
        Ok(writer)
    }

    /// Starts database `db`.
    pub fn select_db(&mut self, db: u32) -> Result<(), RdbError> {
        let number = db.to_string();
        crate::resp::encode_command(&mut self.buffer, &[b"SELECT" as &[u8], number.as_bytes()]);
        self.current_db = Some(db);
        self.flush_if_full()
    }

    /// Writes one key of database `db`, selecting it first if needed. A past expiry is
    /// written as it is: nothing expires while a base loads.
    pub fn write_entry(&mut self, db: u32, entry: &Entry) -> Result<(), RdbError> {
        if self.current_db != Some(db) {
            self.select_db(db)?;
        }
        let mut failure = None;
        entry_commands(entry, &mut |args: &[&[u8]]| {
            if failure.is_some() {
                return;
            }
            crate::resp::encode_command(&mut self.buffer, args);
            if let Err(error) = self.flush_if_full() {
                failure = Some(error);
            }
        });
        failure.map_or(Ok(()), Err)
    }

    /// Writes one key's commands made by `encode_entry` (in database `db`).
    pub fn write_encoded_entry(&mut self, db: u32, record: &[u8]) -> Result<(), RdbError> {
        if self.current_db != Some(db) {
            self.select_db(db)?;
        }
        self.buffer.extend_from_slice(record);
        self.flush_if_full()
    }

    /// Flushes everything; returns the output and the file's size.
    pub fn finish(mut self) -> Result<(W, u64), RdbError> {
        self.flush()?;
        self.output.flush()?;
        Ok((self.output, self.bytes_written))
    }

    fn flush_if_full(&mut self) -> Result<(), RdbError> {
        if self.buffer.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RdbError> {
        self.output.write_all(&self.buffer)?;
        self.bytes_written += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

/// One key's commands, as one record (the event loop's serialise-before-write).
pub fn encode_entry(entry: &Entry) -> Vec<u8> {
    let mut out = Vec::new();
    entry_commands(entry, &mut |args: &[&[u8]]| {
        crate::resp::encode_command(&mut out, args)
    });
    out
}

/// Calls `emit` with each command that rebuilds `entry`, in order.
fn entry_commands(entry: &Entry, emit: &mut dyn FnMut(&[&[u8]])) {
    let key: &[u8] = &entry.key;
    match &entry.value {
        Value::String(string, _) => emit(&[b"SET", key, string.as_slice()]),
        Value::List(list, _) => {
            let mut batch = Batch::new(b"RPUSH", key, list.len());
            for item in list.iter() {
                batch.push([lp_bytes(item)], emit);
            }
            batch.finish(emit);
        }
        Value::Set(set, _) => {
            let mut batch = Batch::new(b"SADD", key, set.len());
            for member in set.iter() {
                batch.push([member], emit);
            }
            batch.finish(emit);
        }
        Value::ZSet(zset, _) => {
            let mut batch = Batch::new(b"ZADD", key, zset.len());
            for (member, score) in zset.iter() {
                let score = Cow::Owned(score_text(score).into_bytes());
                batch.push([score, member], emit);
            }
            batch.finish(emit);
        }
        Value::Hash(hash, _) => {
            let mut batch = Batch::new(b"HMSET", key, hash.len());
            for (field, value) in hash.iter() {
                batch.push([lp_bytes(field), lp_bytes(value)], emit);
            }
            batch.finish(emit);
        }
        Value::Stream(stream, _) => stream_commands(key, stream, emit),
    }
    if entry.expire_at_ms != NO_EXPIRY {
        let at = entry.expire_at_ms.to_string();
        emit(&[b"PEXPIREAT", key, at.as_bytes()]);
    }
}

/// A score that ZADD reads back to the same double (`inf`, `-inf` included).
fn score_text(score: f64) -> String {
    if score.is_infinite() {
        if score > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{score}")
    }
}

fn lp_bytes(value: LpValue<'_>) -> Cow<'_, [u8]> {
    match value {
        LpValue::Bytes(bytes) => Cow::Borrowed(bytes),
        other => Cow::Owned(other.to_bytes()),
    }
}

/// A command that adds groups of `N` arguments to a key, cut every `ITEMS_PER_COMMAND`
/// groups.
struct Batch<'k, 'a, const N: usize> {
    command: &'static [u8],
    key: &'k [u8],
    groups: Vec<[Cow<'a, [u8]>; N]>,
}

impl<'k, 'a, const N: usize> Batch<'k, 'a, N> {
    fn new(command: &'static [u8], key: &'k [u8], total: usize) -> Self {
        Batch {
            command,
            key,
            groups: Vec::with_capacity(total.min(ITEMS_PER_COMMAND)),
        }
    }

    fn push(&mut self, group: [Cow<'a, [u8]>; N], emit: &mut dyn FnMut(&[&[u8]])) {
        self.groups.push(group);
        if self.groups.len() == ITEMS_PER_COMMAND {
            self.emit(emit);
        }
    }

    /// Emits what is left.
    fn finish(mut self, emit: &mut dyn FnMut(&[&[u8]])) {
        self.emit(emit);
    }

    fn emit(&mut self, emit: &mut dyn FnMut(&[&[u8]])) {
        if self.groups.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + self.groups.len() * N);
        args.push(self.command);
        args.push(self.key);
        args.extend(self.groups.iter().flatten().map(|arg| &**arg));
        emit(&args);
        self.groups.clear();
    }
}

/// A stream: its entries, its metadata (`XSETID`), its groups with their consumers and
/// pending entries.
fn stream_commands(key: &[u8], stream: &Stream, emit: &mut dyn FnMut(&[&[u8]])) {
    if stream.is_empty() {
        // Redis's trick for an empty stream: an entry added and trimmed at once.
        emit(&[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    } else {
        for entry in stream.range(StreamId::MIN, StreamId::MAX, false) {
            let id = entry.id.to_string();
            let mut args: Vec<&[u8]> = vec![b"XADD", key, id.as_bytes()];
            for (field, value) in &entry.fields {
                args.push(field);
                args.push(value);
            }
            emit(&args);
        }
    }
    let last_id = stream.last_id().to_string();
    let added = stream.entries_added().to_string();
    let max_deleted = stream.max_deleted_id().to_string();
    emit(&[
        b"XSETID",
        key,
        last_id.as_bytes(),
        b"ENTRIESADDED",
        added.as_bytes(),
        b"MAXDELETEDID",
        max_deleted.as_bytes(),
    ]);
    for (name, group) in stream.groups.iter() {
        let last_id = group.last_id().to_string();
        // Unknown (Redis's -1) is written as Redis writes it.
        let read = group
            .entries_read()
            .map_or_else(|| "-1".to_string(), |n| n.to_string());
        emit(&[
            b"XGROUP",
            b"CREATE",
            key,
            name,
            last_id.as_bytes(),
            b"ENTRIESREAD",
            read.as_bytes(),
        ]);
        for (consumer_name, consumer) in group.consumers() {
            if consumer.pending().is_empty() {
                emit(&[b"XGROUP", b"CREATECONSUMER", key, name, consumer_name]);
                continue;
            }
            for id in consumer.pending() {
                let pending = group
                    .pending_entry(*id)
                    .expect("a consumer's pending ID is in its group's PEL");
                let id = id.to_string();
                let time = pending.delivery_time_ms().to_string();
                let count = pending.delivery_count().to_string();
                emit(&[
                    b"XCLAIM",
                    key,
                    name,
                    consumer_name,
                    b"0",
                    id.as_bytes(),
                    b"TIME",
                    time.as_bytes(),
                    b"RETRYCOUNT",
                    count.as_bytes(),
                    b"JUSTID",
                    b"FORCE",
                ]);
            }
        }
    }
}
