//! What the RDB tests share: a file Redis wrote, seeded random data, and small writers
//! and loaders of string-only files.

use super::{RdbError, RdbWriter, RdbWriterOptions, crc64, load, opcode};
use crate::keyspace::{Entry, NO_EXPIRY, Value};

/// A `dump.rdb` written by Redis 7.0.15: in db 0 `big` = "123456789012", `long` =
/// 50 × "x" (LZF), `ttl` = "v" expiring at 1795315309736, `neg` = "-5", `a` = "1";
/// in db 3 `k3` = "hello".
pub(super) const REDIS_DUMP_HEX: &str = "524544495330303130fa0972656469732d76657206372e302e3135fa0a\
    72656469732d62697473c040fa056374696d65c20956026bfa08757365642d6d656dc2a0b70e00fa08616f\
    662d62617365c000fe00fb050100036269670c31323334353637383930313200046c6f6e67c30932017878\
    e02500017878fca89c2101a2010000000374746c017600036e6567c0fb000161c001fe03fb010000026b33\
    0568656c6c6fffdadfc0a2a6531fff";

pub(super) fn from_hex(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// Seeded pseudo-random numbers and bytes, so failures reproduce.
pub(super) struct Random(rand::rngs::StdRng);

impl Random {
    pub(super) fn new(seed: u64) -> Random {
        Random(rand::SeedableRng::seed_from_u64(seed))
    }
    pub(super) fn next(&mut self) -> u64 {
        rand::Rng::next_u64(&mut self.0)
    }
    pub(super) fn bytes(&mut self, length: usize) -> Vec<u8> {
        (0..length).map(|_| self.next() as u8).collect()
    }
}

pub(super) type Loaded = Vec<(u32, crate::keyspace::Key, crate::types::Str, i64)>;

pub(super) fn entry(key: &[u8], value: &[u8], expire_at_ms: i64) -> Entry {
    Entry {
        key: crate::keyspace::Key::from(key),
        value: Value::string(crate::types::Str::from(value)),
        expire_at_ms,
    }
}

pub(super) fn fixed_options() -> RdbWriterOptions {
    RdbWriterOptions {
        ctime_seconds: 1_795_315_209,
        used_memory: 964_512,
        ..RdbWriterOptions::default()
    }
}

pub(super) fn write_file(entries: &[(u32, Entry)]) -> Vec<u8> {
    let mut writer = RdbWriter::new(Vec::new(), &fixed_options()).unwrap();
    for (db, entry) in entries {
        writer.write_entry(*db, entry).unwrap();
    }
    let (bytes, size) = writer.finish().unwrap();
    assert_eq!(size, bytes.len() as u64);
    bytes
}

pub(super) fn load_all(bytes: &[u8]) -> Result<Loaded, RdbError> {
    let mut loaded = Vec::new();
    load(bytes, &mut |db: u32, entry: Entry| {
        let Value::String(value, _) = entry.value else {
            panic!("only strings are written here")
        };
        loaded.push((db, entry.key, value, entry.expire_at_ms));
        Ok(())
    })?;
    Ok(loaded)
}

pub(super) fn load_any(bytes: &[u8]) -> Result<usize, RdbError> {
    let mut count = 0;
    load(bytes, &mut |_db: u32, _entry: Entry| {
        count += 1;
        Ok(())
    })?;
    Ok(count)
}

pub(super) fn as_loaded(entries: &[(u32, Entry)]) -> Loaded {
    entries
        .iter()
        .map(|(db, entry)| {
            let Value::String(value, _) = &entry.value else {
                panic!("only strings are written here")
            };
            (*db, entry.key.clone(), value.clone(), entry.expire_at_ms)
        })
        .collect()
}

/// A file of the given version with `body` between header and EOF, checksummed.
pub(super) fn hand_made(version: u32, body: &[u8]) -> Vec<u8> {
    let mut bytes = format!("REDIS{version:04}").into_bytes();
    bytes.extend_from_slice(body);
    bytes.push(opcode::EOF);
    if version >= 5 {
        let checksum = crc64(&bytes);
        bytes.extend_from_slice(&checksum.to_le_bytes());
    }
    bytes
}

pub(super) fn sample_entries() -> Vec<(u32, Entry)> {
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
