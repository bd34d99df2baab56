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
//! Values are strings, lists (a quicklist of listpacks), hashes and sorted sets (a
//! listpack while small, else field by field) and sets (an intset while small, else
//! member by member) and streams (their listpack nodes as they are, then the metadata and
//! the consumer groups), in the encodings Redis 7.0 writes; the loader also reads the
//! plain encodings older versions wrote. Ziplist-era encodings and module values load as
//! [`RdbError::UnsupportedType`].
//!
//! - `writer`: [`RdbWriter`], the header, lengths, strings (integer, LZF or plain).
//! - `reader`: [`RdbReader`], [`load`] and its [`RdbVisitor`]; the bounded input buffer.
//! - `values`: each value type's encoding, both ways (the types know nothing of RDB).
//! - `lzf`: the LZF compressor and decompressor.
//!
//! Nothing in `crate::types` depends on this module: the types expose their listpack and
//! intset bytes, constructors from them and iterators, and `values` does the rest.

mod lzf;
pub mod payload;
mod reader;
mod stream_groups;
mod values;
mod writer;
mod ziplist;
mod zipmap;

#[cfg(test)]
mod test_support;

pub use lzf::DecompressError;
pub use reader::{LoadSummary, RdbItem, RdbReader, RdbVisitor, Refusal, load};
pub use values::Collection;
pub use writer::{RdbWriter, RdbWriterOptions, STAGING_BYTES, encode_entry, value_len};

use crate::types::intset::InvalidIntset;
use crate::types::listpack::InvalidListpack;
use crc::{CRC_64_REDIS, Crc, Table};
use std::fmt;

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
        reason: Corruption,
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
        reason: Refusal,
    },
}

/// What is wrong with bytes that are not valid RDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corruption {
    /// The file ends in the middle of an item.
    Truncated,
    /// A length beyond what this machine can address.
    TooLong(u64),
    /// A SELECTDB index beyond `u32`.
    DatabaseIndex(u64),
    UnknownLengthEncoding(u8),
    /// A special string encoding (integer, LZF) where a plain length belongs.
    EncodingForLength,
    UnknownStringEncoding(u8),
    EmptyCompressedString,
    /// More output than LZF can produce from that much input: a lying length.
    CompressionRatio {
        length: u64,
        compressed_length: u64,
    },
    Compressed(DecompressError),
    /// A sorted-set score in the old text form that does not parse.
    InvalidDouble,
    /// Neither an opcode nor a value type of RDB version 10.
    UnknownType(u8),
    /// A listpack blob of a collection that does not validate.
    Listpack(Collection, InvalidListpack),
    /// A listpack of pairs (hash, sorted set) with an odd number of entries.
    OddListpack(Collection),
    /// The same field or member twice.
    Duplicate(Collection),
    Intset(InvalidIntset),
    /// A ziplist (Redis < 7.0) of a collection that does not validate.
    Ziplist(Collection, ziplist::InvalidZiplist),
    /// A zipmap (Redis < 2.6) that does not validate.
    Zipmap(zipmap::InvalidZipmap),
    /// A quicklist node that is neither PLAIN (1) nor PACKED (2).
    QuicklistContainer(u64),
    EmptyQuicklistNode,
    /// A score in a sorted set's listpack that is no number.
    ListpackScore,
    NanScore,
    /// A stream node's key that is not a 16-byte ID (its length).
    StreamNodeKey(usize),
    /// A stream whose nodes or metadata do not hold together (`types::stream`'s reason).
    Stream(&'static str),
    /// A stream's consumer groups that Redis's loader refuses, or that would leave a
    /// pending entry and its consumer disagreeing.
    StreamGroups(crate::types::stream_groups::LoadError),
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::Truncated => write!(f, "unexpected end of file (truncated)"),
            Corruption::TooLong(length) => write!(f, "length {length} does not fit in memory"),
            Corruption::DatabaseIndex(db) => write!(f, "database index {db} is out of range"),
            Corruption::UnknownLengthEncoding(byte) => {
                write!(f, "unknown length encoding 0x{byte:02x}")
            }
            Corruption::EncodingForLength => {
                write!(f, "string encoding where a length was expected")
            }
            Corruption::UnknownStringEncoding(encoding) => {
                write!(f, "unknown string encoding {encoding}")
            }
            Corruption::EmptyCompressedString => write!(f, "empty LZF-compressed string"),
            Corruption::CompressionRatio {
                length,
                compressed_length,
            } => write!(
                f,
                "LZF string claims {length} bytes from {compressed_length} compressed"
            ),
            Corruption::Compressed(error) => write!(f, "invalid LZF-compressed string: {error}"),
            Corruption::InvalidDouble => write!(f, "invalid double"),
            Corruption::UnknownType(byte) => write!(f, "unknown opcode or value type {byte}"),
            Corruption::Listpack(collection, error) => {
                write!(f, "{collection} listpack: {}", error.0)
            }
            Corruption::OddListpack(collection) => {
                write!(f, "{collection} listpack with an odd entry count")
            }
            Corruption::Duplicate(Collection::Hash) => write!(f, "duplicate hash field"),
            Corruption::Duplicate(collection) => write!(f, "duplicate {collection} member"),
            Corruption::Intset(error) => write!(f, "intset: {}", error.0),
            Corruption::Ziplist(collection, error) => write!(f, "{collection} {error}"),
            Corruption::Zipmap(error) => write!(f, "hash {error}"),
            Corruption::QuicklistContainer(container) => {
                write!(f, "quicklist node container {container}")
            }
            Corruption::EmptyQuicklistNode => write!(f, "empty quicklist node"),
            Corruption::ListpackScore => write!(f, "invalid score in a listpack"),
            Corruption::NanScore => write!(f, "NaN score"),
            Corruption::StreamNodeKey(length) => {
                write!(f, "stream node key of {length} bytes (an ID has 16)")
            }
            Corruption::Stream(reason) => write!(f, "stream: {reason}"),
            Corruption::StreamGroups(error) => write!(f, "stream consumer groups: {error}"),
        }
    }
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
                "wrong RDB checksum (RDB CRC error) at offset {offset}: the data before it hashes to \
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

fn corrupt(offset: u64, reason: Corruption) -> RdbError {
    RdbError::Corrupt { offset, reason }
}

#[cfg(test)]
mod tests {
    use super::test_support::{REDIS_DUMP_HEX, from_hex};
    use super::*;

    #[test]
    fn crc64_is_redis_jones_crc() {
        // The check value of Redis's own crc64 test ("123456789").
        assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
        let dump = from_hex(REDIS_DUMP_HEX);
        let (data, stored) = dump.split_at(dump.len() - 8);
        assert_eq!(crc64(data), u64::from_le_bytes(stored.try_into().unwrap()));
    }

    #[test]
    fn error_messages_name_the_damage() {
        let cases = [
            (
                Corruption::Duplicate(Collection::Hash),
                "duplicate hash field",
            ),
            (
                Corruption::Duplicate(Collection::SortedSet),
                "duplicate sorted set member",
            ),
            (
                Corruption::OddListpack(Collection::SortedSet),
                "sorted set listpack with an odd entry count",
            ),
            (
                Corruption::Listpack(Collection::List, InvalidListpack("no terminator")),
                "list listpack: no terminator",
            ),
            (
                Corruption::CompressionRatio {
                    length: 4_000_000_000,
                    compressed_length: 3,
                },
                "LZF string claims 4000000000 bytes from 3 compressed",
            ),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
        }
        let error = corrupt(12, Corruption::Truncated);
        assert_eq!(
            error.to_string(),
            "corrupt RDB file at offset 12: unexpected end of file (truncated)"
        );
    }
}
