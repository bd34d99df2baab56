//! The streaming RDB reader: [`RdbReader`] checks the header, returns the file's items one
//! at a time and checks the checksum at the end; [`load`] drives it through a visitor.
//!
//! Every length in a file is a claim until the bytes are there: strings are read in
//! growing steps and LZF output is allocated only after its input has been read, so a
//! damaged or hostile file makes the loader fail at its end rather than allocate what it
//! claims.

use super::lzf;
use super::values;
use super::{
    CRC64, Corruption, ENCODING_INT8, ENCODING_INT16, ENCODING_INT32, ENCODING_LZF, LENGTH_6_BIT,
    LENGTH_14_BIT, LENGTH_32_BIT, LENGTH_64_BIT, LENGTH_ENCODED, MAGIC, RDB_VERSION, RdbError,
    corrupt, opcode,
};
use crate::keyspace::{Entry, NO_EXPIRY, Value};
use bytes::Bytes;
use crc::{Digest, Table};
use std::io::{ErrorKind, Read};

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
        corrupt(self.offset(), Corruption::Truncated)
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
        let length =
            usize::try_from(length).map_err(|_| corrupt(offset, Corruption::TooLong(length)))?;
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

    /// A reader of bytes with no header (a DUMP payload's body), written by RDB
    /// `version`.
    pub(super) fn bare(reader: R, version: u32) -> Self {
        RdbReader {
            input: Input::new(reader),
            version,
            db: 0,
            item_offset: 0,
            finished: false,
        }
    }

    pub(super) fn read_opcode(&mut self) -> Result<u8, RdbError> {
        self.input.read_u8()
    }

    /// A value of type `type_byte` (a DUMP payload's, after its type byte).
    pub(super) fn read_value(&mut self, type_byte: u8) -> Result<Value, RdbError> {
        values::check_type(type_byte, self.offset())?;
        values::read(self, type_byte)
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
                    self.db = u32::try_from(db)
                        .map_err(|_| corrupt(self.item_offset, Corruption::DatabaseIndex(db)))?;
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
                        reason: Refusal::PreReleaseFunction,
                    });
                }
                opcode::MODULE_AUX => {
                    return Err(RdbError::Unsupported {
                        offset: self.item_offset,
                        reason: Refusal::ModuleAux,
                    });
                }
                opcode::EOF => {
                    self.finish()?;
                    return Ok(None);
                }
                type_byte => {
                    values::check_type(type_byte, self.item_offset)?;
                    let key = crate::keyspace::Key::from(&self.read_string()?[..]);
                    let value = values::read(self, type_byte)?;
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

    /// A binary double (`ZSET_2` scores).
    pub(super) fn read_binary_double(&mut self) -> Result<f64, RdbError> {
        Ok(f64::from_le_bytes(self.input.read_array()?))
    }

    /// A double in the text form of RDB's old `ZSET` type: a length byte (253 NaN,
    /// 254 +inf, 255 -inf) then that many ASCII characters.
    pub(super) fn read_text_double(&mut self) -> Result<f64, RdbError> {
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
                    .ok_or_else(|| corrupt(offset, Corruption::InvalidDouble))
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
                _ => Err(corrupt(offset, Corruption::UnknownLengthEncoding(first))),
            },
        }
    }

    pub(super) fn read_length(&mut self) -> Result<u64, RdbError> {
        let offset = self.input.offset();
        match self.read_length_or_encoding()? {
            Length::Plain(length) => Ok(length),
            Length::Encoded(_) => Err(corrupt(offset, Corruption::EncodingForLength)),
        }
    }

    pub(super) fn read_string(&mut self) -> Result<Bytes, RdbError> {
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
                Err(corrupt(offset, Corruption::UnknownStringEncoding(other)))
            }
        }
    }

    fn read_compressed_string(&mut self, offset: u64) -> Result<Bytes, RdbError> {
        let compressed_length = self.read_length()?;
        let length = self.read_length()?;
        if compressed_length == 0 || length == 0 {
            return Err(corrupt(offset, Corruption::EmptyCompressedString));
        }
        // The compressed bytes are read (incrementally) before the output is allocated,
        // and LZF cannot expand more than its ratio: a lying length cannot make the
        // loader allocate more than a constant times the file's size.
        if length / lzf::MAX_EXPANSION > compressed_length {
            return Err(corrupt(
                offset,
                Corruption::CompressionRatio {
                    length,
                    compressed_length,
                },
            ));
        }
        let compressed = self.input.read_vec(compressed_length)?;
        let length =
            usize::try_from(length).map_err(|_| corrupt(offset, Corruption::TooLong(length)))?;
        let mut output = vec![0u8; length];
        lzf::decompress(&compressed, &mut output)
            .map_err(|error| corrupt(offset, Corruption::Compressed(error)))?;
        Ok(Bytes::from(output))
    }
}

fn integer_text(value: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(value).as_bytes())
}

/// Why valid RDB is not loaded: content Tessera cannot hold, found by the reader, or an
/// item a visitor refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Function libraries in the format of Redis 7.0's release candidates, which Redis
    /// 7.0 itself refuses.
    PreReleaseFunction,
    /// Module auxiliary data: Tessera has no modules to hand it to.
    ModuleAux,
    /// A function library (the visitor's default): dropping it silently would lose data.
    Function,
    /// A key in a database the loading server does not have.
    DatabaseOutOfRange { db: u32, databases: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::PreReleaseFunction => write!(
                f,
                "function library in the pre-release format of Redis 7.0 release candidates"
            ),
            Refusal::ModuleAux => write!(
                f,
                "module auxiliary data: the file was written by a Redis with modules loaded"
            ),
            Refusal::Function => write!(
                f,
                "the file holds a function library (FUNCTION LOAD), which Tessera does not \
                 support"
            ),
            Refusal::DatabaseOutOfRange { db, databases } => {
                write!(f, "database {db} is out of range (databases {databases})")
            }
        }
    }
}

/// Receives what `load` finds. Only `entry` is required; an `Err` from any method stops
/// loading with [`RdbError::Unsupported`] at the item's offset.
pub trait RdbVisitor {
    /// One key of database `db`.
    fn entry(&mut self, db: u32, entry: Entry) -> Result<(), Refusal>;

    fn aux(&mut self, _key: &[u8], _value: &[u8]) -> Result<(), Refusal> {
        Ok(())
    }

    /// Size hints from the file (unchecked: cap before reserving).
    fn resize_db(&mut self, _db: u32, _key_count: u64, _expires_count: u64) -> Result<(), Refusal> {
        Ok(())
    }

    /// A function library. Refused by default: dropping it silently would lose data.
    fn function(&mut self, _code: Bytes) -> Result<(), Refusal> {
        Err(Refusal::Function)
    }
}

impl<F: FnMut(u32, Entry) -> Result<(), Refusal>> RdbVisitor for F {
    fn entry(&mut self, db: u32, entry: Entry) -> Result<(), Refusal> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::test_support::*;
    use crate::rdb::value_type;

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
                assert_eq!(reason, Refusal::Function);
                assert!(reason.to_string().contains("function"), "{reason}");
            }
            other => panic!("{other:?}"),
        }

        for (byte, refusal, word) in [
            (opcode::MODULE_AUX, Refusal::ModuleAux, "module"),
            (
                opcode::FUNCTION_PRE_GA,
                Refusal::PreReleaseFunction,
                "pre-release",
            ),
        ] {
            match load_all(&hand_made(10, &[byte, 0x00])) {
                Err(RdbError::Unsupported { offset: 9, reason }) => {
                    assert_eq!(reason, refusal);
                    assert!(reason.to_string().contains(word), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn other_value_types_are_typed_errors() {
        for value_type in [9u8, 10, 12, 13, 14] {
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
                Err(Refusal::DatabaseOutOfRange { db, databases: 16 })
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        match error {
            RdbError::Unsupported { offset, reason } => {
                assert_eq!(
                    reason.to_string(),
                    "database 20 is out of range (databases 16)"
                );
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
}
