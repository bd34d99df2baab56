//! The streaming RDB writer: header and aux fields, databases, keys with their expiry,
//! and the string and length encodings every part of the file is made of. Values are
//! written by `values`; the writer stages bytes, feeds the checksum and ends the file.

use super::lzf::LzfCompressor;
use super::values;
use super::{
    CRC64, ENCODING_INT8, ENCODING_INT16, ENCODING_INT32, ENCODING_LZF, LENGTH_6_BIT,
    LENGTH_14_BIT, LENGTH_32_BIT, LENGTH_64_BIT, LENGTH_ENCODED, MAGIC, RDB_VERSION, REDIS_VERSION,
    RdbError, opcode,
};
use crate::keyspace::{Entry, NO_EXPIRY, Value};
use bytes::Bytes;
use crc::{Digest, Table};
use std::io::Write;

/// Redis compresses only strings longer than this, and only if compression saves at
/// least 4 bytes.
const COMPRESSION_MIN_LENGTH: usize = 20;
const COMPRESSION_MIN_SAVING: usize = 4;

/// After this many strings in a row that LZF could not shrink, only one in
/// `COMPRESSION_RETRY_EVERY` is tried until one shrinks again.
const COMPRESSION_GIVE_UP_AFTER: u32 = 64;
const COMPRESSION_RETRY_EVERY: u32 = 16;

/// Incompressible values (already compressed data, random tokens) cost a full LZF pass
/// each for nothing: about half of a compaction's CPU with redis-benchmark's values. So
/// after a run of failures most attempts are skipped, and the first success resumes them.
/// A deliberate difference from Redis, which tries every string: a compressible string
/// that follows such a run may be stored plain (a valid file either way, only larger).
#[derive(Default)]
struct CompressionBackoff {
    failures_in_a_row: u32,
    skipped: u32,
}

impl CompressionBackoff {
    fn should_try(&mut self) -> bool {
        if self.failures_in_a_row < COMPRESSION_GIVE_UP_AFTER {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= COMPRESSION_RETRY_EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    fn record(&mut self, shrank: bool) {
        self.failures_in_a_row = if shrank {
            0
        } else {
            self.failures_in_a_row.saturating_add(1)
        };
    }
}

/// What goes into the header's aux fields, and whether to compress.
#[derive(Clone, Debug)]
pub struct RdbWriterOptions {
    /// `ctime`: when the snapshot was taken, Unix seconds.
    pub ctime_seconds: i64,
    /// `used-mem`: the server's memory use in bytes (informational).
    pub used_memory: u64,
    /// `aof-base`: 1 when the file is the base of an append-only log, as in Redis 7.
    pub aof_base: bool,
    /// LZF for strings longer than 20 bytes (`rdbcompression yes`).
    pub compression: bool,
    /// Keys already expired are written too (a background snapshot leaves them out of a
    /// dump): a replica's snapshot, whose stream will delete them, and may change one
    /// before (a base part keeps them for the same reason: `aof_base`).
    pub keep_expired: bool,
    /// Further aux fields, written after the standard ones.
    pub extra_aux: Vec<(Bytes, Bytes)>,
    /// Function libraries (their code), written after the aux fields as Redis 7.0's
    /// function opcode, as Redis writes them.
    pub functions: Vec<Bytes>,
}

impl Default for RdbWriterOptions {
    fn default() -> Self {
        RdbWriterOptions {
            ctime_seconds: crate::clock::unix_seconds(),
            used_memory: 0,
            aof_base: false,
            compression: true,
            keep_expired: false,
            extra_aux: Vec::new(),
            functions: Vec::new(),
        }
    }
}

/// Bytes gathered before one write to the output: entries are small, and one
/// `write_all` and one checksum update per 64 KB beat several per entry.
pub const STAGING_BYTES: usize = 64 * 1024;

/// One key's record (expiry, type, key, value) as `write_entry` writes it, without LZF:
/// for the event loop, which serialises a captured value before changing it in place
/// (`snapshot`), where compressing would cost the clients' time. A part writer adds it
/// with `write_encoded_entry`.
pub fn encode_entry(entry: &Entry) -> Vec<u8> {
    let mut writer = RdbWriter::headless(Vec::new(), false);
    writer.current_db = Some(0);
    writer
        .write_entry(0, entry)
        .and_then(|()| writer.flush_staging())
        .expect("writing to memory cannot fail");
    writer.output
}

/// The bytes `value` takes in an RDB file (Redis's `rdbSavedObjectLen`, DEBUG OBJECT's
/// `serializedlength`): its encoding alone — no type byte, key or expiry —, strings
/// compressed when `compression` says so.
pub fn value_len(value: &crate::keyspace::Value, compression: bool) -> u64 {
    let mut writer = RdbWriter::headless(std::io::sink(), compression);
    values::write(&mut writer, value).expect("writing to a sink cannot fail");
    writer.bytes_written()
}

/// Writes one RDB file, entry by entry, computing its checksum as it goes.
///
/// ```text
/// let mut writer = RdbWriter::new(file, &RdbWriterOptions::default())?;
/// writer.select_db(0, keys_in_db0, keys_with_expiry_in_db0)?;   // optional: size hints
/// for entry in slot.iter() { writer.write_entry(0, entry)?; }
/// let (file, size) = writer.finish()?;                          // then fsync the file
/// ```
///
/// Entries of one database need not be contiguous (each change of database writes a
/// SELECTDB), but Redis's own files keep them so.
pub struct RdbWriter<W: Write> {
    output: W,
    staging: Vec<u8>,
    digest: Digest<'static, u64, Table<16>>,
    /// Bytes handed to `output` plus bytes staged.
    bytes_written: u64,
    current_db: Option<u32>,
    compression: bool,
    compressor: LzfCompressor,
    compressed: Vec<u8>,
    backoff: CompressionBackoff,
}

impl<W: Write> RdbWriter<W> {
    /// Writes the header and the aux fields.
    pub fn new(output: W, options: &RdbWriterOptions) -> Result<Self, RdbError> {
        let mut writer = Self::headless(output, options.compression);
        writer.put(MAGIC)?;
        writer.put(format!("{RDB_VERSION:04}").as_bytes())?;
        // Redis's order and value forms (numbers as strings, which then get integer
        // encoding), so that tools comparing headers see nothing unusual.
        writer.write_aux(b"redis-ver", REDIS_VERSION.as_bytes())?;
        writer.write_aux(b"redis-bits", b"64")?;
        writer.write_aux(b"ctime", options.ctime_seconds.to_string().as_bytes())?;
        writer.write_aux(b"used-mem", options.used_memory.to_string().as_bytes())?;
        writer.write_aux(b"aof-base", if options.aof_base { b"1" } else { b"0" })?;
        for (key, value) in &options.extra_aux {
            writer.write_aux(key, value)?;
        }
        for code in &options.functions {
            writer.put_function(code)?;
        }
        Ok(writer)
    }

    /// A writer with nothing written yet: `new` adds the header; `encode_entry` and a
    /// DUMP payload's body have none.
    pub(super) fn headless(output: W, compression: bool) -> Self {
        RdbWriter {
            output,
            staging: Vec::with_capacity(STAGING_BYTES),
            digest: CRC64.digest(),
            bytes_written: 0,
            current_db: None,
            compression,
            compressor: LzfCompressor::default(),
            compressed: Vec::new(),
            backoff: CompressionBackoff::default(),
        }
    }

    /// Writes one key's record made by `encode_entry` (in database `db`), as
    /// `write_entry` would have written it.
    pub fn write_encoded_entry(&mut self, db: u32, record: &[u8]) -> Result<(), RdbError> {
        if self.current_db != Some(db) {
            self.select_db(db, 0, 0)?;
        }
        self.put(record)
    }

    /// A function library: the opcode and its code.
    pub(super) fn put_function(&mut self, code: &[u8]) -> Result<(), RdbError> {
        self.put(&[super::opcode::FUNCTION2])?;
        self.write_string(code)
    }

    /// A value with its type byte and no key (a DUMP payload's body).
    pub(super) fn put_value(&mut self, value: &Value) -> Result<(), RdbError> {
        self.put(&[values::type_byte(value)])?;
        values::write(self, value)
    }

    /// The output, with everything staged written to it (no EOF, no checksum).
    pub(super) fn into_output(mut self) -> Result<W, RdbError> {
        self.flush_staging()?;
        Ok(self.output)
    }

    /// One aux field. Redis reads them anywhere in the file; Redis writes them first.
    pub fn write_aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), RdbError> {
        self.put(&[opcode::AUX])?;
        self.write_string(key)?;
        self.write_string(value)
    }

    /// Starts database `db` (SELECTDB), with its number of keys and of keys with an
    /// expiry so that the loader can size its tables (RESIZEDB). A `key_count` of 0 means
    /// "unknown": no RESIZEDB is written, as sizes are only a hint.
    pub fn select_db(
        &mut self,
        db: u32,
        key_count: u64,
        expires_count: u64,
    ) -> Result<(), RdbError> {
        self.put(&[opcode::SELECTDB])?;
        self.write_length(u64::from(db))?;
        if key_count > 0 {
            self.put(&[opcode::RESIZEDB])?;
            self.write_length(key_count)?;
            self.write_length(expires_count)?;
        }
        self.current_db = Some(db);
        Ok(())
    }

    /// Writes one key in database `db`, selecting the database first if needed. The
    /// expiry is written as it is, even if already past: dropping expired keys is the
    /// loader's decision (Redis drops them when it loads as a master).
    pub fn write_entry(&mut self, db: u32, entry: &Entry) -> Result<(), RdbError> {
        if self.current_db != Some(db) {
            self.select_db(db, 0, 0)?;
        }
        if entry.expire_at_ms != NO_EXPIRY {
            let mut bytes = [0u8; 9];
            bytes[0] = opcode::EXPIRETIME_MS;
            bytes[1..].copy_from_slice(&entry.expire_at_ms.to_le_bytes());
            self.put(&bytes)?;
        }
        self.put(&[values::type_byte(&entry.value)])?;
        self.write_string(&entry.key)?;
        values::write(self, &entry.value)
    }

    /// Bytes written so far, staged ones included.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Writes EOF and the checksum and flushes; returns the output and the file's size.
    /// Making the file durable (fsync) is the caller's business.
    pub fn finish(mut self) -> Result<(W, u64), RdbError> {
        self.put(&[opcode::EOF])?;
        self.flush_staging()?;
        let checksum = self.digest.finalize();
        self.output.write_all(&checksum.to_le_bytes())?;
        self.output.flush()?;
        Ok((self.output, self.bytes_written + 8))
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), RdbError> {
        if self.staging.len() + bytes.len() > STAGING_BYTES {
            self.flush_staging()?;
        }
        if bytes.len() >= STAGING_BYTES {
            self.digest.update(bytes);
            self.output.write_all(bytes)?;
        } else {
            self.staging.extend_from_slice(bytes);
        }
        self.bytes_written += bytes.len() as u64;
        Ok(())
    }

    fn flush_staging(&mut self) -> Result<(), RdbError> {
        if !self.staging.is_empty() {
            self.digest.update(&self.staging);
            self.output.write_all(&self.staging)?;
            self.staging.clear();
        }
        Ok(())
    }

    /// A binary double (the scores of `ZSET_2`), little-endian.
    pub(super) fn write_binary_double(&mut self, value: f64) -> Result<(), RdbError> {
        self.put(&value.to_le_bytes())
    }

    /// Bytes as they are, with no length (a stream group's 16-byte IDs and 8-byte times).
    pub(super) fn write_raw(&mut self, bytes: &[u8]) -> Result<(), RdbError> {
        self.put(bytes)
    }

    pub(super) fn write_length(&mut self, length: u64) -> Result<(), RdbError> {
        let mut bytes = [0u8; 9];
        let used = encode_length(length, &mut bytes);
        self.put(&bytes[..used])
    }

    /// A string in the smallest form Redis would choose: integer, LZF or plain.
    pub(super) fn write_string(&mut self, bytes: &[u8]) -> Result<(), RdbError> {
        let mut integer = [0u8; 5];
        if let Some(used) = encode_integer_string(bytes, &mut integer) {
            return self.put(&integer[..used]);
        }
        if self.compression && bytes.len() > COMPRESSION_MIN_LENGTH && self.backoff.should_try() {
            let mut compressed = std::mem::take(&mut self.compressed);
            let fits = self.compressor.compress(
                bytes,
                &mut compressed,
                bytes.len() - COMPRESSION_MIN_SAVING,
            );
            self.backoff.record(fits);
            let result = if fits {
                self.write_compressed(&compressed, bytes.len())
            } else {
                Ok(())
            };
            // Keep the buffer for the next string, unless one huge value inflated it.
            if compressed.capacity() <= 1024 * 1024 {
                self.compressed = compressed;
            }
            if fits {
                return result;
            }
        }
        self.write_length(bytes.len() as u64)?;
        self.put(bytes)
    }

    fn write_compressed(
        &mut self,
        compressed: &[u8],
        original_length: usize,
    ) -> Result<(), RdbError> {
        self.put(&[(LENGTH_ENCODED << 6) | ENCODING_LZF])?;
        self.write_length(compressed.len() as u64)?;
        self.write_length(original_length as u64)?;
        self.put(compressed)
    }
}

/// Writes Redis's length encoding of `length` into `out`; returns the bytes used.
fn encode_length(length: u64, out: &mut [u8; 9]) -> usize {
    if length < 1 << 6 {
        out[0] = (LENGTH_6_BIT << 6) | length as u8;
        1
    } else if length < 1 << 14 {
        out[0] = (LENGTH_14_BIT << 6) | (length >> 8) as u8;
        out[1] = length as u8;
        2
    } else if length <= u64::from(u32::MAX) {
        // 32- and 64-bit lengths are big-endian, unlike everything else in the format.
        out[0] = LENGTH_32_BIT;
        out[1..5].copy_from_slice(&(length as u32).to_be_bytes());
        5
    } else {
        out[0] = LENGTH_64_BIT;
        out[1..9].copy_from_slice(&length.to_be_bytes());
        9
    }
}

/// The integer encoding of `bytes` if they are the canonical decimal text of an `i32`
/// (what Redis's `string2ll` accepts: no sign `+`, no leading zeros, no `-0`, no spaces),
/// so that loading gives back exactly the same bytes.
fn encode_integer_string(bytes: &[u8], out: &mut [u8; 5]) -> Option<usize> {
    let value = parse_canonical_integer(bytes)?;
    if let Ok(small) = i8::try_from(value) {
        out[0] = (LENGTH_ENCODED << 6) | ENCODING_INT8;
        out[1] = small as u8;
        Some(2)
    } else if let Ok(medium) = i16::try_from(value) {
        out[0] = (LENGTH_ENCODED << 6) | ENCODING_INT16;
        out[1..3].copy_from_slice(&medium.to_le_bytes());
        Some(3)
    } else if let Ok(large) = i32::try_from(value) {
        out[0] = (LENGTH_ENCODED << 6) | ENCODING_INT32;
        out[1..5].copy_from_slice(&large.to_le_bytes());
        Some(5)
    } else {
        None
    }
}

fn parse_canonical_integer(bytes: &[u8]) -> Option<i64> {
    // Eleven characters hold every i32 ("-2147483648"); longer texts never encode.
    if bytes.is_empty() || bytes.len() > 11 {
        return None;
    }
    if bytes == b"0" {
        return Some(0);
    }
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        // At most 11 digits: no overflow in i64.
        value = value * 10 + i64::from(digit - b'0');
    }
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Entry;
    use crate::rdb::test_support::*;
    use crate::rdb::{RdbItem, RdbReader, RdbVisitor, Refusal, load};

    #[test]
    fn header_is_byte_identical_to_redis() {
        let writer = RdbWriter::new(Vec::new(), &fixed_options()).unwrap();
        let (header, _) = writer.finish().unwrap();
        let dump = from_hex(REDIS_DUMP_HEX);
        let header_length = header.len() - 9;
        assert_eq!(header[..header_length], dump[..header_length]);
        assert_eq!(dump[header_length], opcode::SELECTDB);
    }

    #[test]
    fn writes_keys_exactly_as_redis_does() {
        // Redis's dump minus the LZF string (LZF output is not unique) is reproduced
        // byte for byte: SELECTDB, RESIZEDB, expiry, integer and plain encodings.
        let mut writer = RdbWriter::new(Vec::new(), &fixed_options()).unwrap();
        writer.select_db(0, 5, 1).unwrap();
        for entry in [
            entry(b"big", b"123456789012", NO_EXPIRY),
            entry(b"ttl", b"v", 1_795_315_309_736),
            entry(b"neg", b"-5", NO_EXPIRY),
            entry(b"a", b"1", NO_EXPIRY),
        ] {
            writer.write_entry(0, &entry).unwrap();
        }
        writer.select_db(3, 1, 0).unwrap();
        writer
            .write_entry(3, &entry(b"k3", b"hello", NO_EXPIRY))
            .unwrap();
        let (ours, _) = writer.finish().unwrap();

        let mut dump = from_hex(REDIS_DUMP_HEX);
        let long_entry = from_hex("00046c6f6e67c30932017878e02500017878");
        let at = dump
            .windows(long_entry.len())
            .position(|window| window == &long_entry[..])
            .unwrap();
        dump.drain(at..at + long_entry.len());
        let body = dump.len() - 8;
        assert_eq!(ours[..body], dump[..body]);
        assert_eq!(load_all(&ours).unwrap().len(), 5);
    }

    #[test]
    fn length_encoding_boundaries() {
        let cases: [(u64, usize); 9] = [
            (0, 1),
            (63, 1),
            (64, 2),
            (16383, 2),
            (16384, 5),
            (u64::from(u32::MAX), 5),
            (u64::from(u32::MAX) + 1, 9),
            (u64::MAX - 1, 9),
            (u64::MAX, 9),
        ];
        for (length, size) in cases {
            let mut bytes = [0u8; 9];
            assert_eq!(encode_length(length, &mut bytes), size, "{length}");
            let mut body = vec![opcode::RESIZEDB];
            body.extend_from_slice(&bytes[..size]);
            body.push(0);
            let file = hand_made(10, &body);
            let mut reader = RdbReader::new(&file[..]).unwrap();
            let item = reader.next_item().unwrap();
            assert!(
                matches!(
                    item,
                    Some(RdbItem::ResizeDb { db: 0, key_count, expires_count: 0 }) if key_count == length
                ),
                "{item:?}"
            );
            assert!(reader.next_item().unwrap().is_none());
        }
        // 14-bit lengths are big-endian within their two bytes.
        let mut bytes = [0u8; 9];
        encode_length(0x1234, &mut bytes);
        assert_eq!(bytes[..2], [0x52, 0x34]);
    }

    #[test]
    fn integer_encoding_only_for_canonical_i32_text() {
        let encoded: [(&[u8], usize); 9] = [
            (b"0", 2),
            (b"-1", 2),
            (b"127", 2),
            (b"-128", 2),
            (b"128", 3),
            (b"-32768", 3),
            (b"32768", 5),
            (b"2147483647", 5),
            (b"-2147483648", 5),
        ];
        for (text, size) in encoded {
            let mut out = [0u8; 5];
            assert_eq!(
                encode_integer_string(text, &mut out),
                Some(size),
                "{text:?}"
            );
        }
        let plain: [&[u8]; 12] = [
            b"",
            b"-",
            b"-0",
            b"00",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1.0",
            b"2147483648",
            b"-2147483649",
            b"99999999999",
        ];
        for text in plain {
            let mut out = [0u8; 5];
            assert_eq!(encode_integer_string(text, &mut out), None, "{text:?}");
        }
        let entries: Vec<(u32, Entry)> = encoded
            .iter()
            .map(|(text, _)| *text)
            .chain(plain)
            .map(|text| (0, entry(text, text, NO_EXPIRY)))
            .enumerate()
            .map(|(index, (db, mut entry))| {
                // Distinct keys: the texts themselves, made unique by an index suffix.
                let mut key = entry.key.to_vec();
                key.extend_from_slice(format!("#{index}").as_bytes());
                entry.key = key.into();
                (db, entry)
            })
            .collect();
        assert_eq!(
            load_all(&write_file(&entries)).unwrap(),
            as_loaded(&entries)
        );
    }

    #[test]
    fn round_trip_of_every_encoding() {
        let entries = sample_entries();
        let file = write_file(&entries);
        assert_eq!(load_all(&file).unwrap(), as_loaded(&entries));
        // The repetitive value was compressed, the random ones were not.
        assert!(file.len() < 210_000, "{}", file.len());
    }

    /// After a run of incompressible strings most attempts are skipped (those strings are
    /// stored plain, as they would have been), one in 16 is still tried, and the first
    /// that shrinks brings compression back for every string.
    #[test]
    fn a_run_of_incompressible_strings_backs_off_and_a_success_resumes() {
        let mut backoff = CompressionBackoff::default();
        for _ in 0..COMPRESSION_GIVE_UP_AFTER {
            assert!(backoff.should_try());
            backoff.record(false);
        }
        let tried = (0..160).filter(|_| backoff.should_try()).count();
        assert_eq!(tried, 10, "one in {COMPRESSION_RETRY_EVERY} is tried");
        backoff.record(true);
        assert!((0..100).all(|_| backoff.should_try()));

        // In a file: random strings, then a repetitive one that comes while backing off
        // is stored plain, and every string reads back the same.
        let mut random = 7u64;
        let mut values: Vec<Vec<u8>> = (0..COMPRESSION_GIVE_UP_AFTER as usize + 2)
            .map(|_| {
                (0..100)
                    .map(|_| {
                        random = random.wrapping_mul(6364136223846793005).wrapping_add(1);
                        (random >> 56) as u8
                    })
                    .collect()
            })
            .collect();
        values.push(vec![b'a'; 100]);
        let mut file = Vec::new();
        let mut writer = RdbWriter::new(&mut file, &RdbWriterOptions::default()).unwrap();
        let mut plain_sizes = Vec::new();
        for value in &values {
            let before = writer.bytes_written;
            writer.write_string(value).unwrap();
            plain_sizes.push(writer.bytes_written - before);
        }
        // 100 bytes plain: a 2-byte length and the bytes (compressed, the last would take a few).
        assert_eq!(
            *plain_sizes.last().unwrap(),
            102,
            "skipped while backing off"
        );
        assert!(plain_sizes.iter().all(|&size| size == 102));
    }

    #[test]
    fn round_trip_without_compression() {
        let entries = sample_entries();
        let options = RdbWriterOptions {
            compression: false,
            aof_base: true,
            extra_aux: vec![("tessera-part".into(), "3".into())],
            ..fixed_options()
        };
        let mut writer = RdbWriter::new(Vec::new(), &options).unwrap();
        writer.select_db(0, 5, 3).unwrap();
        for (db, entry) in &entries {
            writer.write_entry(*db, entry).unwrap();
        }
        let (file, _) = writer.finish().unwrap();
        assert_eq!(load_all(&file).unwrap(), as_loaded(&entries));
        let mut aux = Vec::new();
        let visitor = &mut AuxCollector(&mut aux);
        load(&file[..], visitor).unwrap();
        assert!(aux.contains(&("aof-base".into(), "1".into())));
        assert!(aux.contains(&("tessera-part".into(), "3".into())));
    }

    struct AuxCollector<'a>(&'a mut Vec<(String, String)>);

    impl RdbVisitor for AuxCollector<'_> {
        fn entry(&mut self, _db: u32, _entry: Entry) -> Result<(), Refusal> {
            Ok(())
        }
        fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), Refusal> {
            self.0.push((
                String::from_utf8_lossy(key).into(),
                String::from_utf8_lossy(value).into(),
            ));
            Ok(())
        }
    }

    #[test]
    fn values_larger_than_the_buffers() {
        let mut random = Random::new(7);
        let huge_random = random.bytes(3 * 1024 * 1024 + 17);
        let mut huge_repetitive = Vec::new();
        while huge_repetitive.len() < 2 * 1024 * 1024 {
            huge_repetitive.extend_from_slice(&random.bytes(100));
            huge_repetitive.extend_from_slice(b"some text that repeats itself ");
        }
        let entries = vec![
            (0, entry(b"random", &huge_random, NO_EXPIRY)),
            (0, entry(b"repetitive", &huge_repetitive, NO_EXPIRY)),
            (
                1,
                entry(
                    &random.bytes(70_000),
                    b"key longer than the staging buffer",
                    5,
                ),
            ),
        ];
        assert_eq!(
            load_all(&write_file(&entries)).unwrap(),
            as_loaded(&entries)
        );
    }

    #[test]
    fn write_errors_are_reported() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let writer = RdbWriter::new(Full, &fixed_options()).unwrap();
        let error = writer.finish().err().unwrap();
        assert!(matches!(error, RdbError::Io(_)));
        assert!(error.to_string().contains("disk full"));
    }
}
