//! RDB, Redis's snapshot format: a streaming writer and a streaming loader.
//!
//! Snapshot parts are genuine RDB files of version 10 (what Redis 7.0 writes), so that
//! `redis-check-rdb` checks them and Redis 7.0 loads them; the loader in turn reads the
//! `dump.rdb` that Redis itself writes. The module does no I/O beyond the `Write` or
//! `Read` it is given.
//!
//! ```text
//! "REDIS0010"
//! AUX key value ...                       redis-ver, redis-bits, ctime, used-mem, aof-base
//!                                         (+ a base part's place: tessera-part, -parts, …)
//! SELECTDB db  [RESIZEDB keys expires]    per database
//!   [EXPIRETIME_MS ms] type key value     per key
//! EOF  CRC64 (little-endian, over every byte before it, EOF included)
//! ```
//!
//! Strings are stored as a length and bytes, as an integer (when the text is the canonical
//! decimal form of an `i32`), or LZF-compressed. Lengths use 1, 2, 5 or 9 bytes.
//!
//! Only string values exist in Tessera so far. The loader reports any other value type as
//! [`RdbError::UnsupportedType`]; adding one means a `Value` variant, an arm in
//! `RdbReader::read_value` (and taking the type out of `check_value_type`'s unsupported
//! list) and one in `RdbWriter::write_entry`.

use crate::keyspace::{Entry, NO_EXPIRY, Value};
use bytes::Bytes;
use crc::{CRC_64_REDIS, Crc, Digest, Table};
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;

/// The RDB version written, and the newest one the loader accepts (Redis 7.0's).
pub const RDB_VERSION: u32 = 10;

/// The server version written in the `redis-ver` aux field: Tessera implements 7.0's
/// semantics, and tools reading the file gate on it as clients gate on INFO.
pub const REDIS_VERSION: &str = "7.0.15";

const MAGIC: &[u8; 5] = b"REDIS";

/// Opcodes: bytes that, where a value type is expected, introduce something else.
mod opcode {
    pub const FUNCTION2: u8 = 0xF5;
    /// Redis 7.0's release candidates; Redis 7.0 itself refuses it.
    pub const FUNCTION_PRE_GA: u8 = 0xF6;
    pub const MODULE_AUX: u8 = 0xF7;
    pub const IDLE: u8 = 0xF8;
    pub const FREQ: u8 = 0xF9;
    pub const AUX: u8 = 0xFA;
    pub const RESIZEDB: u8 = 0xFB;
    pub const EXPIRETIME_MS: u8 = 0xFC;
    pub const EXPIRETIME: u8 = 0xFD;
    pub const SELECTDB: u8 = 0xFE;
    pub const EOF: u8 = 0xFF;
}

/// Value types of RDB version 10.
pub mod value_type {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// Length encodings, told apart by the top two bits of the first byte.
const LENGTH_6_BIT: u8 = 0;
const LENGTH_14_BIT: u8 = 1;
const LENGTH_32_BIT: u8 = 0x80;
const LENGTH_64_BIT: u8 = 0x81;
/// Top bits `11`: not a length but a special string encoding in the low six bits.
const LENGTH_ENCODED: u8 = 3;

const ENCODING_INT8: u8 = 0;
const ENCODING_INT16: u8 = 1;
const ENCODING_INT32: u8 = 2;
const ENCODING_LZF: u8 = 3;

/// Redis compresses only strings longer than this, and only if compression saves at
/// least 4 bytes.
const COMPRESSION_MIN_LENGTH: usize = 20;
const COMPRESSION_MIN_SAVING: usize = 4;

/// The Redis CRC64 (Jones polynomial, reflected). Slice-by-16 tables: the checksum runs
/// over every byte of a snapshot, so its speed matters.
static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

/// The CRC64 Redis uses for RDB files, over `bytes`.
pub fn crc64(bytes: &[u8]) -> u64 {
    CRC64.checksum(bytes)
}

/// Why an RDB file could not be written or loaded.
#[derive(Debug)]
pub enum RdbError {
    Io(std::io::Error),
    /// The file does not start with `REDIS` and four digits.
    BadMagic,
    /// A version this loader does not read (newer than 10, or 0).
    UnsupportedVersion(u32),
    /// The bytes at `offset` are not valid RDB (including a file cut short).
    Corrupt {
        offset: u64,
        reason: String,
    },
    /// `expected` is the CRC64 of the file's bytes, `actual` the checksum stored in it at
    /// `offset` (Redis's wording in "Wrong RDB checksum expected: … got: …"). The damage
    /// is somewhere before `offset`: a checksum cannot say where.
    ChecksumMismatch {
        offset: u64,
        expected: u64,
        actual: u64,
    },
    /// A value type that is valid RDB but not loadable by Tessera yet.
    UnsupportedType(u8),
    /// Valid RDB that cannot be loaded here: module data, or an item the visitor refused.
    Unsupported {
        offset: u64,
        reason: String,
    },
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdbError::Io(error) => write!(f, "I/O error: {error}"),
            RdbError::BadMagic => write!(f, "not an RDB file (no REDIS signature)"),
            RdbError::UnsupportedVersion(version) => write!(
                f,
                "RDB format version {version} is not supported (versions 1 to {RDB_VERSION} are)"
            ),
            RdbError::Corrupt { offset, reason } => {
                write!(f, "corrupt RDB file at offset {offset}: {reason}")
            }
            RdbError::ChecksumMismatch {
                offset,
                expected,
                actual,
            } => write!(
                f,
                "wrong RDB checksum at offset {offset}: the data before it hashes to \
                 {expected:016x}, the file says {actual:016x}"
            ),
            RdbError::UnsupportedType(value_type) => {
                write!(f, "unsupported value type {value_type}")
            }
            RdbError::Unsupported { offset, reason } => {
                write!(f, "cannot load the RDB file at offset {offset}: {reason}")
            }
        }
    }
}

impl std::error::Error for RdbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RdbError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<std::io::Error> for RdbError {
    fn from(error: std::io::Error) -> Self {
        RdbError::Io(error)
    }
}

pub(crate) fn corrupt(offset: u64, reason: impl Into<String>) -> RdbError {
    RdbError::Corrupt {
        offset,
        reason: reason.into(),
    }
}

// ---------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------

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
    /// Further aux fields, written after the standard ones.
    pub extra_aux: Vec<(Bytes, Bytes)>,
}

impl Default for RdbWriterOptions {
    fn default() -> Self {
        RdbWriterOptions {
            ctime_seconds: crate::clock::unix_seconds(),
            used_memory: 0,
            aof_base: false,
            compression: true,
            extra_aux: Vec::new(),
        }
    }
}

/// Bytes gathered before one write to the output: entries are small, and one
/// `write_all` and one checksum update per 64 KB beat several per entry.
const STAGING_BYTES: usize = 64 * 1024;

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
}

impl<W: Write> RdbWriter<W> {
    /// Writes the header and the aux fields.
    pub fn new(output: W, options: &RdbWriterOptions) -> Result<Self, RdbError> {
        let mut writer = RdbWriter {
            output,
            staging: Vec::with_capacity(STAGING_BYTES),
            digest: CRC64.digest(),
            bytes_written: 0,
            current_db: None,
            compression: options.compression,
            compressor: LzfCompressor::default(),
            compressed: Vec::new(),
        };
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
        Ok(writer)
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
        match &entry.value {
            Value::String(value) => {
                self.put(&[value_type::STRING])?;
                self.write_string(&entry.key)?;
                self.write_string(value)
            }
            Value::List(list) => {
                self.put(&[list.rdb_type()])?;
                self.write_string(&entry.key)?;
                list.write_rdb(self)
            }
            Value::Hash(hash) => {
                self.put(&[hash.rdb_type()])?;
                self.write_string(&entry.key)?;
                hash.write_rdb(self)
            }
            Value::Set(set) => {
                self.put(&[set.rdb_type()])?;
                self.write_string(&entry.key)?;
                set.write_rdb(self)
            }
            Value::ZSet(zset) => {
                self.put(&[zset.rdb_type()])?;
                self.write_string(&entry.key)?;
                zset.write_rdb(self)
            }
        }
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
    pub(crate) fn write_binary_double(&mut self, value: f64) -> Result<(), RdbError> {
        self.put(&value.to_le_bytes())
    }

    pub(crate) fn write_length(&mut self, length: u64) -> Result<(), RdbError> {
        let mut bytes = [0u8; 9];
        let used = encode_length(length, &mut bytes);
        self.put(&bytes[..used])
    }

    /// A string in the smallest form Redis would choose: integer, LZF or plain.
    pub(crate) fn write_string(&mut self, bytes: &[u8]) -> Result<(), RdbError> {
        let mut integer = [0u8; 5];
        if let Some(used) = encode_integer_string(bytes, &mut integer) {
            return self.put(&integer[..used]);
        }
        if self.compression && bytes.len() > COMPRESSION_MIN_LENGTH {
            let mut compressed = std::mem::take(&mut self.compressed);
            let fits = self.compressor.compress(
                bytes,
                &mut compressed,
                bytes.len() - COMPRESSION_MIN_SAVING,
            );
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

// ---------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------

/// What the loader found, in file order.
#[derive(Debug, Clone)]
pub enum RdbItem {
    Aux {
        key: Bytes,
        value: Bytes,
    },
    /// Size hints for the database being loaded. They come from the file: cap them
    /// before reserving memory on them.
    ResizeDb {
        db: u32,
        key_count: u64,
        expires_count: u64,
    },
    /// A function library (Redis 7 `FUNCTION LOAD`), as its source code.
    Function {
        code: Bytes,
    },
    /// One key. Its expiry may already be past: whether to drop it is the caller's call.
    Entry {
        db: u32,
        entry: Entry,
    },
}

/// The file's bytes pass through this buffer, which counts the offset and feeds the
/// checksum in large chunks (each consumed buffer-full at once).
struct Input<R: Read> {
    inner: R,
    buffer: Box<[u8]>,
    start: usize,
    end: usize,
    /// `buffer[..digested]` is already in the checksum.
    digested: usize,
    /// File offset of `buffer[0]`.
    buffer_offset: u64,
    digest: Digest<'static, u64, Table<16>>,
}

const INPUT_BUFFER_BYTES: usize = 64 * 1024;

/// A string longer than this is read in growing steps, so that a corrupt length makes the
/// loader fail at the end of the file instead of allocating what the length claims.
const TRUSTED_ALLOCATION_BYTES: usize = 1024 * 1024;

impl<R: Read> Input<R> {
    fn new(inner: R) -> Self {
        Input {
            inner,
            buffer: vec![0u8; INPUT_BUFFER_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            digested: 0,
            buffer_offset: 0,
            digest: CRC64.digest(),
        }
    }

    fn offset(&self) -> u64 {
        self.buffer_offset + self.start as u64
    }

    /// Refills an exhausted buffer; false at the end of the input.
    fn fill(&mut self) -> Result<bool, RdbError> {
        debug_assert_eq!(self.start, self.end);
        self.digest.update(&self.buffer[self.digested..self.end]);
        self.buffer_offset += self.end as u64;
        self.start = 0;
        self.end = 0;
        self.digested = 0;
        loop {
            match self.inner.read(&mut self.buffer) {
                Ok(0) => return Ok(false),
                Ok(read) => {
                    self.end = read;
                    return Ok(true);
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => return Err(RdbError::Io(error)),
            }
        }
    }

    fn truncated(&self) -> RdbError {
        corrupt(self.offset(), "unexpected end of file (truncated)")
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), RdbError> {
        let mut filled = 0;
        while filled < out.len() {
            if self.start == self.end && !self.fill()? {
                return Err(self.truncated());
            }
            let take = (out.len() - filled).min(self.end - self.start);
            out[filled..filled + take].copy_from_slice(&self.buffer[self.start..self.start + take]);
            self.start += take;
            filled += take;
        }
        Ok(())
    }

    fn read_u8(&mut self) -> Result<u8, RdbError> {
        if self.start == self.end && !self.fill()? {
            return Err(self.truncated());
        }
        let byte = self.buffer[self.start];
        self.start += 1;
        Ok(byte)
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut bytes = [0u8; N];
        self.read_exact(&mut bytes)?;
        Ok(bytes)
    }

    /// Reads `length` bytes, allocating no more than twice what has actually been read.
    fn read_vec(&mut self, length: u64) -> Result<Vec<u8>, RdbError> {
        let offset = self.offset();
        let length = usize::try_from(length)
            .map_err(|_| corrupt(offset, format!("length {length} does not fit in memory")))?;
        let mut out = Vec::with_capacity(length.min(TRUSTED_ALLOCATION_BYTES));
        while out.len() < length {
            if self.start == self.end && !self.fill()? {
                return Err(self.truncated());
            }
            let take = (length - out.len()).min(self.end - self.start);
            if out.len() + take > out.capacity() {
                // Double, but never past the claimed length: the result is exact-sized.
                let grow = out
                    .len()
                    .max(TRUSTED_ALLOCATION_BYTES)
                    .min(length - out.len());
                out.reserve_exact(grow);
            }
            out.extend_from_slice(&self.buffer[self.start..self.start + take]);
            self.start += take;
        }
        Ok(out)
    }

    /// The checksum of every byte consumed so far.
    fn checksum(&mut self) -> u64 {
        self.digest.update(&self.buffer[self.digested..self.start]);
        self.digested = self.start;
        self.digest.clone().finalize()
    }
}

/// A string's length, or the marker of a special encoding.
enum Length {
    Plain(u64),
    Encoded(u8),
}

/// Streaming RDB parser: `new` checks the header, `next_item` returns the file's contents
/// one item at a time and checks the checksum at the end.
pub struct RdbReader<R: Read> {
    input: Input<R>,
    version: u32,
    db: u32,
    item_offset: u64,
    finished: bool,
}

impl<R: Read> RdbReader<R> {
    /// Reads and checks the magic and version.
    pub fn new(reader: R) -> Result<Self, RdbError> {
        let mut input = Input::new(reader);
        let mut header = [0u8; 9];
        input.read_exact(&mut header).map_err(|error| match error {
            RdbError::Corrupt { .. } => RdbError::BadMagic,
            other => other,
        })?;
        if &header[..5] != MAGIC || !header[5..].iter().all(u8::is_ascii_digit) {
            return Err(RdbError::BadMagic);
        }
        let version = header[5..].iter().fold(0u32, |version, digit| {
            version * 10 + u32::from(digit - b'0')
        });
        if version == 0 || version > RDB_VERSION {
            return Err(RdbError::UnsupportedVersion(version));
        }
        Ok(RdbReader {
            input,
            version,
            db: 0,
            item_offset: 9,
            finished: false,
        })
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.input.offset()
    }

    /// Where the item last returned (or being read when an error occurred) starts.
    pub fn item_offset(&self) -> u64 {
        self.item_offset
    }

    /// The underlying reader and the bytes read from it past the end of the RDB data
    /// (an append-only file with an RDB preamble goes on with RESP commands).
    pub fn into_inner(self) -> (R, Vec<u8>) {
        let input = self.input;
        (input.inner, input.buffer[input.start..input.end].to_vec())
    }

    /// The next item, or `None` after the EOF opcode and a valid checksum.
    pub fn next_item(&mut self) -> Result<Option<RdbItem>, RdbError> {
        if self.finished {
            return Ok(None);
        }
        // Expiry and eviction hints apply to the next key only.
        let mut expire_at_ms = NO_EXPIRY;
        loop {
            self.item_offset = self.input.offset();
            let opcode = self.input.read_u8()?;
            match opcode {
                opcode::EXPIRETIME_MS => {
                    expire_at_ms = i64::from_le_bytes(self.input.read_array()?);
                }
                opcode::EXPIRETIME => {
                    // Seconds, as a signed 32-bit number (RDB before version 3).
                    let seconds = i32::from_le_bytes(self.input.read_array()?);
                    expire_at_ms = i64::from(seconds) * 1000;
                }
                opcode::FREQ => {
                    // LFU counter: Tessera has no eviction yet.
                    self.input.read_u8()?;
                }
                opcode::IDLE => {
                    // LRU idle seconds: likewise unused.
                    self.read_length()?;
                }
                opcode::SELECTDB => {
                    let db = self.read_length()?;
                    self.db = u32::try_from(db).map_err(|_| {
                        corrupt(
                            self.item_offset,
                            format!("database index {db} is out of range"),
                        )
                    })?;
                }
                opcode::RESIZEDB => {
                    let key_count = self.read_length()?;
                    let expires_count = self.read_length()?;
                    return Ok(Some(RdbItem::ResizeDb {
                        db: self.db,
                        key_count,
                        expires_count,
                    }));
                }
                opcode::AUX => {
                    let key = self.read_string()?;
                    let value = self.read_string()?;
                    return Ok(Some(RdbItem::Aux { key, value }));
                }
                opcode::FUNCTION2 => {
                    let code = self.read_string()?;
                    return Ok(Some(RdbItem::Function { code }));
                }
                opcode::FUNCTION_PRE_GA => {
                    return Err(RdbError::Unsupported {
                        offset: self.item_offset,
                        reason: "function library in the pre-release format of Redis 7.0 \
                                 release candidates"
                            .into(),
                    });
                }
                opcode::MODULE_AUX => {
                    return Err(RdbError::Unsupported {
                        offset: self.item_offset,
                        reason: "module auxiliary data: the file was written by a Redis \
                                 with modules loaded"
                            .into(),
                    });
                }
                opcode::EOF => {
                    self.finish()?;
                    return Ok(None);
                }
                type_byte => {
                    check_value_type(type_byte, self.item_offset)?;
                    let key = crate::keyspace::Key::from(&self.read_string()?[..]);
                    let value = self.read_value(type_byte)?;
                    if value.is_empty_collection() {
                        // Redis 7.0 skips empty keys on load (RDB_LOAD_ERR_EMPTY_KEY).
                        expire_at_ms = NO_EXPIRY;
                        continue;
                    }
                    return Ok(Some(RdbItem::Entry {
                        db: self.db,
                        entry: Entry {
                            key,
                            value,
                            expire_at_ms,
                        },
                    }));
                }
            }
        }
    }

    fn finish(&mut self) -> Result<(), RdbError> {
        self.finished = true;
        // Files before version 5 carry no checksum.
        if self.version < 5 {
            return Ok(());
        }
        let expected = self.input.checksum();
        let offset = self.input.offset();
        let actual = u64::from_le_bytes(self.input.read_array()?);
        // Zero means "saved with rdbchecksum no"; Redis loads such files unchecked.
        if actual != 0 && actual != expected {
            return Err(RdbError::ChecksumMismatch {
                offset,
                expected,
                actual,
            });
        }
        Ok(())
    }

    /// The value of a key of type `value_type` (already checked to be supported).
    fn read_value(&mut self, value_type: u8) -> Result<Value, RdbError> {
        use value_type::*;
        match value_type {
            STRING => Ok(Value::String(crate::types::Str::from(
                &self.read_string()?[..],
            ))),
            LIST | LIST_ZIPLIST | LIST_QUICKLIST | LIST_QUICKLIST_2 => Ok(Value::List(Arc::new(
                crate::types::List::read_rdb(self, value_type)?,
            ))),
            HASH | HASH_ZIPMAP | HASH_ZIPLIST | HASH_LISTPACK => Ok(Value::Hash(Arc::new(
                crate::types::Hash::read_rdb(self, value_type)?,
            ))),
            SET | SET_INTSET => Ok(Value::Set(Arc::new(crate::types::Set::read_rdb(
                self, value_type,
            )?))),
            ZSET | ZSET_2 | ZSET_ZIPLIST | ZSET_LISTPACK => Ok(Value::ZSet(Arc::new(
                crate::types::ZSet::read_rdb(self, value_type)?,
            ))),
            other => Err(RdbError::UnsupportedType(other)),
        }
    }

    /// A binary double (`ZSET_2` scores).
    pub(crate) fn read_binary_double(&mut self) -> Result<f64, RdbError> {
        Ok(f64::from_le_bytes(self.input.read_array()?))
    }

    /// A double in the text form of RDB's old `ZSET` type: a length byte (253 NaN,
    /// 254 +inf, 255 -inf) then that many ASCII characters.
    pub(crate) fn read_text_double(&mut self) -> Result<f64, RdbError> {
        let offset = self.input.offset();
        let length = self.input.read_u8()?;
        match length {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            _ => {
                let text = self.input.read_vec(u64::from(length))?;
                std::str::from_utf8(&text)
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .ok_or_else(|| corrupt(offset, "invalid double"))
            }
        }
    }

    fn read_length_or_encoding(&mut self) -> Result<Length, RdbError> {
        let offset = self.input.offset();
        let first = self.input.read_u8()?;
        match first >> 6 {
            LENGTH_6_BIT => Ok(Length::Plain(u64::from(first & 0x3F))),
            LENGTH_14_BIT => {
                let second = self.input.read_u8()?;
                Ok(Length::Plain(
                    (u64::from(first & 0x3F) << 8) | u64::from(second),
                ))
            }
            LENGTH_ENCODED => Ok(Length::Encoded(first & 0x3F)),
            _ => match first {
                LENGTH_32_BIT => Ok(Length::Plain(u64::from(u32::from_be_bytes(
                    self.input.read_array()?,
                )))),
                LENGTH_64_BIT => Ok(Length::Plain(u64::from_be_bytes(self.input.read_array()?))),
                _ => Err(corrupt(
                    offset,
                    format!("unknown length encoding 0x{first:02x}"),
                )),
            },
        }
    }

    pub(crate) fn read_length(&mut self) -> Result<u64, RdbError> {
        let offset = self.input.offset();
        match self.read_length_or_encoding()? {
            Length::Plain(length) => Ok(length),
            Length::Encoded(_) => Err(corrupt(
                offset,
                "string encoding where a length was expected",
            )),
        }
    }

    pub(crate) fn read_string(&mut self) -> Result<Bytes, RdbError> {
        let offset = self.input.offset();
        match self.read_length_or_encoding()? {
            Length::Plain(length) => Ok(Bytes::from(self.input.read_vec(length)?)),
            Length::Encoded(ENCODING_INT8) => {
                let value = i8::from_le_bytes(self.input.read_array()?);
                Ok(integer_text(i64::from(value)))
            }
            Length::Encoded(ENCODING_INT16) => {
                let value = i16::from_le_bytes(self.input.read_array()?);
                Ok(integer_text(i64::from(value)))
            }
            Length::Encoded(ENCODING_INT32) => {
                let value = i32::from_le_bytes(self.input.read_array()?);
                Ok(integer_text(i64::from(value)))
            }
            Length::Encoded(ENCODING_LZF) => self.read_compressed_string(offset),
            Length::Encoded(other) => {
                Err(corrupt(offset, format!("unknown string encoding {other}")))
            }
        }
    }

    fn read_compressed_string(&mut self, offset: u64) -> Result<Bytes, RdbError> {
        let compressed_length = self.read_length()?;
        let length = self.read_length()?;
        if compressed_length == 0 || length == 0 {
            return Err(corrupt(offset, "empty LZF-compressed string"));
        }
        // The compressed bytes are read (incrementally) before the output is allocated,
        // and LZF cannot expand more than its ratio: a lying length cannot make the
        // loader allocate more than a constant times the file's size.
        if length / LZF_MAX_EXPANSION > compressed_length {
            return Err(corrupt(
                offset,
                format!("LZF string claims {length} bytes from {compressed_length} compressed"),
            ));
        }
        let compressed = self.input.read_vec(compressed_length)?;
        let length = usize::try_from(length)
            .map_err(|_| corrupt(offset, format!("length {length} does not fit in memory")))?;
        let mut output = vec![0u8; length];
        lzf_decompress(&compressed, &mut output).map_err(|reason| {
            corrupt(offset, format!("invalid LZF-compressed string: {reason}"))
        })?;
        Ok(Bytes::from(output))
    }
}

fn integer_text(value: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(value).as_bytes())
}

/// Value types that RDB version 10 defines, supported here or not; anything else is
/// damage, not a newer feature (a newer feature comes with a newer version).
fn check_value_type(type_byte: u8, offset: u64) -> Result<(), RdbError> {
    use value_type::*;
    match type_byte {
        STRING | LIST | SET | ZSET | HASH | ZSET_2 | HASH_ZIPMAP | LIST_ZIPLIST | SET_INTSET
        | ZSET_ZIPLIST | HASH_ZIPLIST | LIST_QUICKLIST | HASH_LISTPACK | ZSET_LISTPACK
        | LIST_QUICKLIST_2 => Ok(()),
        MODULE_PRE_GA | MODULE_2 | STREAM_LISTPACKS | STREAM_LISTPACKS_2 => {
            Err(RdbError::UnsupportedType(type_byte))
        }
        _ => Err(corrupt(
            offset,
            format!("unknown opcode or value type {type_byte}"),
        )),
    }
}

/// Receives what `load` finds. Only `entry` is required; an `Err` from any method stops
/// loading with [`RdbError::Unsupported`] at the item's offset.
pub trait RdbVisitor {
    /// One key of database `db`.
    fn entry(&mut self, db: u32, entry: Entry) -> Result<(), String>;

    fn aux(&mut self, _key: &[u8], _value: &[u8]) -> Result<(), String> {
        Ok(())
    }

    /// Size hints from the file (unchecked: cap before reserving).
    fn resize_db(&mut self, _db: u32, _key_count: u64, _expires_count: u64) -> Result<(), String> {
        Ok(())
    }

    /// A function library. Refused by default: dropping it silently would lose data.
    fn function(&mut self, _code: Bytes) -> Result<(), String> {
        Err(
            "the file holds a function library (FUNCTION LOAD), which Tessera does not support"
                .into(),
        )
    }
}

impl<F: FnMut(u32, Entry) -> Result<(), String>> RdbVisitor for F {
    fn entry(&mut self, db: u32, entry: Entry) -> Result<(), String> {
        self(db, entry)
    }
}

/// What a completed load saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSummary {
    pub version: u32,
    pub key_count: u64,
    /// Bytes read, checksum included.
    pub bytes: u64,
}

/// Loads a whole RDB stream, handing each item to `visitor`.
pub fn load<R: Read, V: RdbVisitor + ?Sized>(
    reader: R,
    visitor: &mut V,
) -> Result<LoadSummary, RdbError> {
    let mut reader = RdbReader::new(reader)?;
    let mut key_count = 0u64;
    while let Some(item) = reader.next_item()? {
        let accepted = match item {
            RdbItem::Entry { db, entry } => {
                key_count += 1;
                visitor.entry(db, entry)
            }
            RdbItem::Aux { key, value } => visitor.aux(&key, &value),
            RdbItem::ResizeDb {
                db,
                key_count,
                expires_count,
            } => visitor.resize_db(db, key_count, expires_count),
            RdbItem::Function { code } => visitor.function(code),
        };
        accepted.map_err(|reason| RdbError::Unsupported {
            offset: reader.item_offset(),
            reason,
        })?;
    }
    Ok(LoadSummary {
        version: reader.version(),
        key_count,
        bytes: reader.offset(),
    })
}

// ---------------------------------------------------------------------------------------
// LZF
// ---------------------------------------------------------------------------------------
//
// LZF is a byte-oriented LZ77: a control byte below 32 starts a run of (control + 1)
// literal bytes; otherwise its top three bits are a match length - 2 (7: one more byte
// adds to it) and its low five bits with the next byte a distance - 1 of up to 8 KB.
//
// Written here rather than taken from crates.io: `lzf` 1.0 is marked deprecated and
// `lzf-rust` 0.1 (a new single release) zeroes a 256 KB hash table on every call, about
// 3 µs per string however short; snapshot values are mostly short. This compressor sizes
// its table to the input and reuses its allocation.

const LZF_MAX_LITERAL: usize = 32;
const LZF_MAX_DISTANCE: usize = 1 << 13;
const LZF_MIN_MATCH: usize = 3;
const LZF_MAX_MATCH: usize = (1 << 8) + (1 << 3);
/// The most output one input byte can yield: a 3-byte token copies at most 264 bytes.
const LZF_MAX_EXPANSION: u64 = (LZF_MAX_MATCH / 3) as u64;
const LZF_MAX_HASH_BITS: u32 = 16;

#[derive(Default)]
struct LzfCompressor {
    /// Last position + 1 of each 3-byte sequence's hash (0: none).
    table: Vec<u32>,
}

impl LzfCompressor {
    /// Compresses `input` into `output` (replacing its contents). Returns false, leaving
    /// `output` unspecified, when the result would be longer than `limit` bytes.
    fn compress(&mut self, input: &[u8], output: &mut Vec<u8>, limit: usize) -> bool {
        output.clear();
        let length = input.len();
        if length <= LZF_MIN_MATCH || length >= u32::MAX as usize {
            return false;
        }
        // A table about as large as the input: zeroing it costs what reading the input does.
        let hash_bits = (usize::BITS - (length - 1).leading_zeros()).clamp(8, LZF_MAX_HASH_BITS);
        self.table.clear();
        self.table.resize(1 << hash_bits, 0);
        output.reserve(limit.min(length));

        let mut anchor = 0;
        let mut position = 0;
        while position + LZF_MIN_MATCH <= length {
            let pending = position - anchor;
            if output.len() + pending + pending / LZF_MAX_LITERAL + 1 > limit {
                return false;
            }
            let slot = lzf_hash(input, position, hash_bits);
            let previous = self.table[slot] as usize;
            self.table[slot] = (position + 1) as u32;
            if previous != 0 {
                let candidate = previous - 1;
                let distance = position - candidate - 1;
                if distance < LZF_MAX_DISTANCE
                    && input[candidate..candidate + LZF_MIN_MATCH]
                        == input[position..position + LZF_MIN_MATCH]
                {
                    let longest = (length - position).min(LZF_MAX_MATCH);
                    let mut matched = LZF_MIN_MATCH;
                    while matched < longest
                        && input[candidate + matched] == input[position + matched]
                    {
                        matched += 1;
                    }
                    if !lzf_emit_literals(&input[anchor..position], output, limit)
                        || !lzf_emit_match(distance, matched, output, limit)
                    {
                        return false;
                    }
                    let end = position + matched;
                    // Index the sequences inside the match, so later data can refer to them.
                    for inside in position + 1..end.min(length - 2) {
                        self.table[lzf_hash(input, inside, hash_bits)] = (inside + 1) as u32;
                    }
                    position = end;
                    anchor = end;
                    continue;
                }
            }
            position += 1;
        }
        lzf_emit_literals(&input[anchor..], output, limit)
    }
}

fn lzf_hash(input: &[u8], position: usize, hash_bits: u32) -> usize {
    let sequence = (u32::from(input[position]) << 16)
        | (u32::from(input[position + 1]) << 8)
        | u32::from(input[position + 2]);
    (sequence.wrapping_mul(0x9E37_79B1) >> (32 - hash_bits)) as usize
}

fn lzf_emit_literals(literals: &[u8], output: &mut Vec<u8>, limit: usize) -> bool {
    for run in literals.chunks(LZF_MAX_LITERAL) {
        if output.len() + 1 + run.len() > limit {
            return false;
        }
        output.push((run.len() - 1) as u8);
        output.extend_from_slice(run);
    }
    true
}

fn lzf_emit_match(distance: usize, matched: usize, output: &mut Vec<u8>, limit: usize) -> bool {
    let encoded_length = matched - 2;
    let distance_high = (distance >> 8) as u8;
    let distance_low = distance as u8;
    if encoded_length < 7 {
        if output.len() + 2 > limit {
            return false;
        }
        output.extend_from_slice(&[((encoded_length as u8) << 5) | distance_high, distance_low]);
    } else {
        if output.len() + 3 > limit {
            return false;
        }
        output.extend_from_slice(&[
            (7 << 5) | distance_high,
            (encoded_length - 7) as u8,
            distance_low,
        ]);
    }
    true
}

/// Decompresses `input` into exactly `output.len()` bytes.
fn lzf_decompress(input: &[u8], output: &mut [u8]) -> Result<(), &'static str> {
    let mut input_position = 0;
    let mut output_position = 0;
    while input_position < input.len() {
        let control = usize::from(input[input_position]);
        input_position += 1;
        if control < LZF_MAX_LITERAL {
            let run = control + 1;
            if input_position + run > input.len() {
                return Err("literal run past the end of the data");
            }
            if output_position + run > output.len() {
                return Err("longer than its declared length");
            }
            output[output_position..output_position + run]
                .copy_from_slice(&input[input_position..input_position + run]);
            input_position += run;
            output_position += run;
        } else {
            let mut matched = control >> 5;
            if matched == 7 {
                let Some(&extra) = input.get(input_position) else {
                    return Err("match cut off");
                };
                matched += usize::from(extra);
                input_position += 1;
            }
            let Some(&distance_low) = input.get(input_position) else {
                return Err("match cut off");
            };
            input_position += 1;
            let distance = ((control & 0x1F) << 8) | usize::from(distance_low);
            let matched = matched + 2;
            if distance >= output_position {
                return Err("match refers before the start");
            }
            if output_position + matched > output.len() {
                return Err("longer than its declared length");
            }
            let source = output_position - distance - 1;
            if source + matched <= output_position {
                output.copy_within(source..source + matched, output_position);
            } else {
                // Overlapping: the match repeats bytes it is itself producing.
                for index in 0..matched {
                    output[output_position + index] = output[source + index];
                }
            }
            output_position += matched;
        }
    }
    if output_position != output.len() {
        return Err("shorter than its declared length");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `dump.rdb` written by Redis 7.0.15: in db 0 `big` = "123456789012", `long` =
    /// 50 × "x" (LZF), `ttl` = "v" expiring at 1795315309736, `neg` = "-5", `a` = "1";
    /// in db 3 `k3` = "hello".
    const REDIS_DUMP_HEX: &str = "524544495330303130fa0972656469732d76657206372e302e3135fa0a\
        72656469732d62697473c040fa056374696d65c20956026bfa08757365642d6d656dc2a0b70e00fa08616f\
        662d62617365c000fe00fb050100036269670c31323334353637383930313200046c6f6e67c30932017878\
        e02500017878fca89c2101a2010000000374746c017600036e6567c0fb000161c001fe03fb010000026b33\
        0568656c6c6fffdadfc0a2a6531fff";

    fn from_hex(hex: &str) -> Vec<u8> {
        let digits: Vec<u8> = hex.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    /// Seeded pseudo-random numbers and bytes, so failures reproduce.
    struct Random(rand::rngs::StdRng);

    impl Random {
        fn new(seed: u64) -> Random {
            Random(rand::SeedableRng::seed_from_u64(seed))
        }
        fn next(&mut self) -> u64 {
            rand::Rng::next_u64(&mut self.0)
        }
        fn bytes(&mut self, length: usize) -> Vec<u8> {
            (0..length).map(|_| self.next() as u8).collect()
        }
    }

    type Loaded = Vec<(u32, crate::keyspace::Key, crate::types::Str, i64)>;

    fn entry(key: &[u8], value: &[u8], expire_at_ms: i64) -> Entry {
        Entry {
            key: crate::keyspace::Key::from(key),
            value: Value::String(crate::types::Str::from(value)),
            expire_at_ms,
        }
    }

    fn fixed_options() -> RdbWriterOptions {
        RdbWriterOptions {
            ctime_seconds: 1_795_315_209,
            used_memory: 964_512,
            ..RdbWriterOptions::default()
        }
    }

    fn write_file(entries: &[(u32, Entry)]) -> Vec<u8> {
        let mut writer = RdbWriter::new(Vec::new(), &fixed_options()).unwrap();
        for (db, entry) in entries {
            writer.write_entry(*db, entry).unwrap();
        }
        let (bytes, size) = writer.finish().unwrap();
        assert_eq!(size, bytes.len() as u64);
        bytes
    }

    fn load_all(bytes: &[u8]) -> Result<Loaded, RdbError> {
        let mut loaded = Vec::new();
        load(bytes, &mut |db: u32, entry: Entry| {
            let Value::String(value) = entry.value else {
                panic!("only strings are written here")
            };
            loaded.push((db, entry.key, value, entry.expire_at_ms));
            Ok(())
        })?;
        Ok(loaded)
    }

    fn load_any(bytes: &[u8]) -> Result<usize, RdbError> {
        let mut count = 0;
        load(bytes, &mut |_db: u32, _entry: Entry| {
            count += 1;
            Ok(())
        })?;
        Ok(count)
    }

    fn as_loaded(entries: &[(u32, Entry)]) -> Loaded {
        entries
            .iter()
            .map(|(db, entry)| {
                let Value::String(value) = &entry.value else {
                    panic!("only strings are written here")
                };
                (*db, entry.key.clone(), value.clone(), entry.expire_at_ms)
            })
            .collect()
    }

    /// A file of the given version with `body` between header and EOF, checksummed.
    fn hand_made(version: u32, body: &[u8]) -> Vec<u8> {
        let mut bytes = format!("REDIS{version:04}").into_bytes();
        bytes.extend_from_slice(body);
        bytes.push(opcode::EOF);
        if version >= 5 {
            let checksum = crc64(&bytes);
            bytes.extend_from_slice(&checksum.to_le_bytes());
        }
        bytes
    }

    fn sample_entries() -> Vec<(u32, Entry)> {
        let mut random = Random::new(0x5eed);
        vec![
            (0, entry(b"plain", b"value", NO_EXPIRY)),
            (0, entry(b"", b"", NO_EXPIRY)),
            (0, entry(b"123", b"-2147483648", 1_700_000_000_123)),
            (0, entry(b"bin\x00\xff\r\n", &[0, 1, 2, 255], NO_EXPIRY)),
            (0, entry(b"long", &b"abc".repeat(1000), 4_102_444_800_000)),
            (2, entry(b"random", &random.bytes(5000), NO_EXPIRY)),
            (2, entry(b"big-random", &random.bytes(200_000), 1)),
            (2, entry(b"007", b"+1", NO_EXPIRY)),
            (15, entry(&b"k".repeat(100), b"2147483648", NO_EXPIRY)),
        ]
    }

    #[test]
    fn crc64_is_redis_jones_crc() {
        // The check value of Redis's own crc64 test ("123456789").
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
        let dump = from_hex(REDIS_DUMP_HEX);
        let (data, stored) = dump.split_at(dump.len() - 8);
        assert_eq!(crc64(data), u64::from_le_bytes(stored.try_into().unwrap()));
    }

    #[test]
    fn loads_a_file_redis_wrote() {
        let loaded = load_all(&from_hex(REDIS_DUMP_HEX)).unwrap();
        let expected: Loaded = vec![
            (0, "big".as_bytes().into(), "123456789012".into(), NO_EXPIRY),
            (
                0,
                "long".as_bytes().into(),
                "x".repeat(50).into(),
                NO_EXPIRY,
            ),
            (0, "ttl".as_bytes().into(), "v".into(), 1_795_315_309_736),
            (0, "neg".as_bytes().into(), "-5".into(), NO_EXPIRY),
            (0, "a".as_bytes().into(), "1".into(), NO_EXPIRY),
            (3, "k3".as_bytes().into(), "hello".into(), NO_EXPIRY),
        ];
        assert_eq!(loaded, expected);
    }

    #[test]
    fn reader_reports_aux_fields_and_sizes() {
        let dump = from_hex(REDIS_DUMP_HEX);
        let mut reader = RdbReader::new(&dump[..]).unwrap();
        assert_eq!(reader.version(), 10);
        let mut aux = Vec::new();
        let mut sizes = Vec::new();
        while let Some(item) = reader.next_item().unwrap() {
            match item {
                RdbItem::Aux { key, value } => aux.push((key, value)),
                RdbItem::ResizeDb {
                    db,
                    key_count,
                    expires_count,
                } => sizes.push((db, key_count, expires_count)),
                _ => {}
            }
        }
        assert_eq!(reader.offset(), dump.len() as u64);
        let aux: Vec<(&[u8], &[u8])> = aux.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        assert_eq!(
            aux,
            vec![
                (&b"redis-ver"[..], &b"7.0.15"[..]),
                (b"redis-bits", b"64"),
                (b"ctime", b"1795315209"),
                (b"used-mem", b"964512"),
                (b"aof-base", b"0"),
            ]
        );
        assert_eq!(sizes, vec![(0, 5, 1), (3, 1, 0)]);
    }

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
        fn entry(&mut self, _db: u32, _entry: Entry) -> Result<(), String> {
            Ok(())
        }
        fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
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
    fn lzf_round_trips_and_respects_its_limit() {
        let mut random = Random::new(42);
        let mut compressor = LzfCompressor::default();
        let mut compressed = Vec::new();
        let mut inputs: Vec<Vec<u8>> = vec![
            b"a".repeat(21),
            b"a".repeat(100_000),
            b"abcabcabcabcabcabcabcabcabcabc".to_vec(),
            (0..=255u8).cycle().take(20_000).collect(),
        ];
        for length in [21, 22, 33, 64, 300, 1000, 9000, 70_000] {
            inputs.push(random.bytes(length));
            // Random bytes from a 4-letter alphabet: compressible, but not trivially.
            inputs.push(
                random
                    .bytes(length)
                    .iter()
                    .map(|b| b"acgt"[usize::from(b % 4)])
                    .collect(),
            );
            // Matches far apart, near the maximum distance.
            let block = random.bytes(length.min(8000));
            let mut repeated = block.clone();
            repeated.extend_from_slice(&block);
            inputs.push(repeated);
        }
        for input in &inputs {
            let limit = input.len() - 4;
            if compressor.compress(input, &mut compressed, limit) {
                assert!(compressed.len() <= limit);
                let mut output = vec![0u8; input.len()];
                lzf_decompress(&compressed, &mut output).unwrap();
                assert_eq!(&output, input);
                // One byte less room than the result needs: refused.
                let needed = compressed.len();
                assert!(!compressor.compress(input, &mut compressed, needed - 1));
            }
        }
        assert!(compressor.compress(&inputs[1], &mut compressed, 100_000));
        assert!(compressed.len() < 100_000 / 80, "{}", compressed.len());
        assert!(!compressor.compress(&random.bytes(1000), &mut compressed, 996));
    }

    #[test]
    fn lzf_decodes_redis_output_and_rejects_bad_data() {
        let mut output = vec![0u8; 50];
        lzf_decompress(&from_hex("017878e02500017878"), &mut output).unwrap();
        assert_eq!(output, b"x".repeat(50));
        let bad: [(&str, usize); 6] = [
            ("02787878", 2), // longer than declared
            ("02787878", 4), // shorter than declared
            ("057878", 6),   // literal run past the end
            ("20", 3),       // match cut off
            ("2000", 3),     // match before the start
            ("0078e0", 300), // long match cut off
        ];
        for (hex, length) in bad {
            let mut output = vec![0u8; length];
            assert!(
                lzf_decompress(&from_hex(hex), &mut output).is_err(),
                "{hex}"
            );
        }
    }

    #[test]
    fn truncation_at_every_offset_is_an_error() {
        let entries = vec![
            (0, entry(b"k", b"v", NO_EXPIRY)),
            (0, entry(b"n", b"12345", 1_700_000_000_000)),
            (1, entry(b"long", &b"xyz".repeat(40), NO_EXPIRY)),
            (1, entry(&[0xff; 70], &[0u8; 70], NO_EXPIRY)),
        ];
        let file = write_file(&entries);
        assert!(load_all(&file).is_ok());
        for cut in 0..file.len() {
            let error = load_all(&file[..cut]).unwrap_err();
            match error {
                RdbError::BadMagic => assert!(cut < 9),
                RdbError::Corrupt { offset, .. } => assert_eq!(offset, cut as u64, "cut {cut}"),
                other => panic!("cut at {cut}: {other}"),
            }
        }
    }

    #[test]
    fn every_flipped_byte_is_an_error() {
        let file = write_file(&[
            (0, entry(b"k", b"v", NO_EXPIRY)),
            (0, entry(b"n", b"-300", 1_700_000_000_000)),
            (4, entry(b"long", &b"xyz".repeat(40), NO_EXPIRY)),
        ]);
        for position in 0..file.len() {
            for flip in [0x01u8, 0x40, 0x80, 0xff] {
                let mut damaged = file.clone();
                damaged[position] ^= flip;
                assert!(load_all(&damaged).is_err(), "flip {flip:#x} at {position}");
            }
        }
    }

    #[test]
    fn random_damage_never_panics() {
        let file = write_file(&sample_entries()[..5]);
        let mut random = Random::new(99);
        for _ in 0..3000 {
            let mut damaged = file.clone();
            for _ in 0..1 + random.next() % 8 {
                let position = (random.next() % damaged.len() as u64) as usize;
                damaged[position] = random.next() as u8;
            }
            // Without a checksum to stop it, damage reaches every parsing path.
            let length = damaged.len();
            damaged[length - 8..].fill(0);
            // Damage may turn a value into any type: accept whatever loads.
            let _ = load_any(&damaged);
            let cut = (random.next() % length as u64) as usize;
            let _ = load_any(&damaged[..cut]);
        }
        for _ in 0..2000 {
            let mut garbage = b"REDIS0010".to_vec();
            let length = (random.next() % 64) as usize;
            garbage.extend_from_slice(&random.bytes(length));
            let _ = load_any(&garbage);
        }
    }

    #[test]
    fn lying_lengths_fail_without_allocating_them() {
        // A plain string claiming 2^60 bytes, then the file ends.
        let mut body = vec![value_type::STRING, 0x01, b'k', LENGTH_64_BIT];
        body.extend_from_slice(&(1u64 << 60).to_be_bytes());
        let error = load_all(&hand_made(10, &body)).unwrap_err();
        assert!(matches!(error, RdbError::Corrupt { .. }), "{error}");
        // An LZF string claiming 4 GB from 3 compressed bytes.
        let mut body = vec![value_type::STRING, 0x01, b'k', 0xC3, 0x03, LENGTH_32_BIT];
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        body.extend_from_slice(&[0x00, b'a', 0x00]);
        let error = load_all(&hand_made(10, &body)).unwrap_err();
        assert!(error.to_string().contains("claims"), "{error}");
    }

    #[test]
    fn header_checks() {
        assert!(matches!(load_all(b""), Err(RdbError::BadMagic)));
        assert!(matches!(load_all(b"REDIS001"), Err(RdbError::BadMagic)));
        assert!(load_all(&hand_made(10, b"")).is_ok());
        let mut wrong = hand_made(10, b"");
        wrong[..5].copy_from_slice(b"RUBIS");
        assert!(matches!(load_all(&wrong), Err(RdbError::BadMagic)));
        assert!(matches!(
            load_all(b"REDIS00a9\xff"),
            Err(RdbError::BadMagic)
        ));
        let error = load_all(&hand_made(11, b"")).unwrap_err();
        assert!(matches!(error, RdbError::UnsupportedVersion(11)));
        assert!(error.to_string().contains("version 11"), "{error}");
        assert!(matches!(
            load_all(&hand_made(0, b"")),
            Err(RdbError::UnsupportedVersion(0))
        ));
        // Older versions load; before version 5 there is no checksum.
        let body = [value_type::STRING, 0x01, b'k', 0x01, b'v'];
        for version in [1, 4, 5, 9] {
            let loaded = load_all(&hand_made(version, &body)).unwrap();
            assert_eq!(loaded, vec![(0, b"k"[..].into(), "v".into(), NO_EXPIRY)]);
        }
    }

    #[test]
    fn checksum_zero_means_not_computed() {
        let mut file = write_file(&sample_entries()[..3]);
        let length = file.len();
        let stored = u64::from_le_bytes(file[length - 8..].try_into().unwrap());
        file[length - 8..].fill(0);
        assert!(load_all(&file).is_ok());
        file[length - 8..].copy_from_slice(&(stored ^ 1).to_le_bytes());
        match load_all(&file) {
            Err(RdbError::ChecksumMismatch {
                offset,
                expected,
                actual,
            }) => {
                assert_eq!(offset, length as u64 - 8);
                assert_eq!(expected, stored);
                assert_eq!(actual, stored ^ 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn opcodes_redis_may_write() {
        let mut body = vec![opcode::SELECTDB, 0x05];
        // An expiry in seconds (old files), then LRU and LFU hints before a key.
        body.push(opcode::EXPIRETIME);
        body.extend_from_slice(&1_700_000_000i32.to_le_bytes());
        body.extend_from_slice(&[value_type::STRING, 0x01, b'a', 0x01, b'1']);
        body.extend_from_slice(&[opcode::IDLE, 0x40, 0x10, opcode::FREQ, 0x07]);
        body.extend_from_slice(&[value_type::STRING, 0x01, b'b', 0x01, b'2']);
        let loaded = load_all(&hand_made(10, &body)).unwrap();
        assert_eq!(
            loaded,
            vec![
                (5, b"a"[..].into(), "1".into(), 1_700_000_000_000),
                (5, b"b"[..].into(), "2".into(), NO_EXPIRY),
            ]
        );

        // A function library: surfaced by the reader, refused by default by `load`.
        let mut body = vec![opcode::FUNCTION2, 0x04];
        body.extend_from_slice(b"code");
        let file = hand_made(10, &body);
        let mut reader = RdbReader::new(&file[..]).unwrap();
        let item = reader.next_item().unwrap();
        assert!(
            matches!(&item, Some(RdbItem::Function { code }) if code == "code"),
            "{item:?}"
        );
        match load_all(&file) {
            Err(RdbError::Unsupported { offset: 9, reason }) => {
                assert!(reason.contains("function"), "{reason}")
            }
            other => panic!("{other:?}"),
        }

        for (byte, word) in [
            (opcode::MODULE_AUX, "module"),
            (opcode::FUNCTION_PRE_GA, "pre-release"),
        ] {
            match load_all(&hand_made(10, &[byte, 0x00])) {
                Err(RdbError::Unsupported { offset: 9, reason }) => {
                    assert!(reason.contains(word), "{reason}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn other_value_types_are_typed_errors() {
        for value_type in [9u8, 10, 12, 13, 14, 19] {
            let error = load_all(&hand_made(10, &[value_type, 0x01, b'k', 0x00])).unwrap_err();
            assert!(matches!(error, RdbError::UnsupportedType(t) if t == value_type));
            assert_eq!(
                error.to_string(),
                format!("unsupported value type {value_type}")
            );
        }
        for byte in [8u8, 20, 100, 0xF4] {
            let error = load_all(&hand_made(10, &[byte, 0x01, b'k', 0x00])).unwrap_err();
            assert!(
                matches!(error, RdbError::Corrupt { offset: 9, .. }),
                "{error}"
            );
        }
    }

    #[test]
    fn a_visitor_can_refuse_an_entry() {
        let file = write_file(&[
            (0, entry(b"a", b"1", NO_EXPIRY)),
            (20, entry(b"b", b"2", NO_EXPIRY)),
        ]);
        let error = load(&file[..], &mut |db: u32, _entry: Entry| {
            if db >= 16 {
                Err(format!("database {db} is out of range"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        match error {
            RdbError::Unsupported { offset, reason } => {
                assert_eq!(reason, "database 20 is out of range");
                assert_eq!(file[offset as usize], value_type::STRING);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bytes_after_the_checksum_are_handed_back() {
        let mut file = write_file(&[(0, entry(b"a", b"1", NO_EXPIRY))]);
        let length = file.len();
        file.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let mut reader = RdbReader::new(&file[..]).unwrap();
        while reader.next_item().unwrap().is_some() {}
        assert_eq!(reader.offset(), length as u64);
        let (_, rest) = reader.into_inner();
        assert_eq!(rest, b"*1\r\n$4\r\nPING\r\n");
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
