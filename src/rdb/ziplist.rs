//! Ziplists, the compact encoding of Redis before 7.0 (RDB types 10, 12, 13 and the nodes
//! of type 14), read and validated so that dumps of older servers load; Redis 7.0
//! converts them to listpacks on load, and so does Tessera. Never written.
//!
//! Layout (little-endian): `zlbytes` u32 (the blob's length), `zltail` u32 (offset of the
//! last entry), `zllen` u16 (entry count, or 65535: count them), the entries, and 0xFF.
//! An entry is the previous entry's length (1 byte below 254, else 0xFE and a u32), an
//! encoding — a string of 6-, 14- or 32-bit length (the 14- and 32-bit lengths
//! big-endian), an integer of 8, 16, 24, 32 or 64 bits, or 0-12 held in the encoding
//! byte itself — and the bytes. Validated as Redis's `ziplistValidateIntegrity` does in
//! depth: every entry inside the blob, every previous-length equal to the previous
//! entry's size, the tail offset and the count right.

use crate::types::listpack::{Listpack, LpValue};

/// Why a ziplist blob was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid ziplist: {0}")]
pub struct InvalidZiplist(pub &'static str);

const HEADER: usize = 10;
const END: u8 = 0xFF;
/// A previous-length byte saying that a u32 follows.
const BIG_PREVLEN: u8 = 0xFE;
const COUNT_UNKNOWN: u16 = u16::MAX;

/// Every entry of a ziplist, in order, after validating the whole blob.
pub fn entries(bytes: &[u8]) -> Result<Vec<LpValue<'_>>, InvalidZiplist> {
    if bytes.len() < HEADER + 1 {
        return Err(InvalidZiplist("shorter than a header"));
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    if u32_at(0) as usize != bytes.len() {
        return Err(InvalidZiplist("its length field is not its length"));
    }
    if bytes[bytes.len() - 1] != END {
        return Err(InvalidZiplist("no end marker"));
    }
    let tail = u32_at(4) as usize;
    let count = u16::from_le_bytes([bytes[8], bytes[9]]);
    let mut values = Vec::new();
    let mut at = HEADER;
    let mut previous_size = 0usize;
    let mut last_start = HEADER;
    while bytes[at] != END {
        let (value, size, prevlen) = entry(bytes, at)?;
        if prevlen != previous_size {
            return Err(InvalidZiplist("a previous-entry length is wrong"));
        }
        values.push(value);
        last_start = at;
        previous_size = size;
        at += size;
    }
    if at != bytes.len() - 1 {
        return Err(InvalidZiplist("bytes after the end marker"));
    }
    if tail != last_start {
        return Err(InvalidZiplist("the tail offset is not the last entry's"));
    }
    if count != COUNT_UNKNOWN && count as usize != values.len() {
        return Err(InvalidZiplist("the entry count is wrong"));
    }
    Ok(values)
}

/// The ziplist's entries as a listpack (Redis 7.0's conversion on load).
pub fn to_listpack(bytes: &[u8]) -> Result<Listpack, InvalidZiplist> {
    let mut listpack = Listpack::new();
    let mut text = Vec::new();
    for value in entries(bytes)? {
        text.clear();
        value.write_to(&mut text);
        listpack.push_back(&text);
    }
    Ok(listpack)
}

/// The entry at `at` (before the end marker): its value, its whole size and the
/// previous-entry length it records. Every byte read is checked to lie before the end
/// marker, whatever the lengths claim.
fn entry(bytes: &[u8], at: usize) -> Result<(LpValue<'_>, usize, usize), InvalidZiplist> {
    let end = bytes.len() - 1;
    let take = |from: usize, len: usize| -> Result<&[u8], InvalidZiplist> {
        from.checked_add(len)
            .filter(|&to| to <= end)
            .map(|to| &bytes[from..to])
            .ok_or(InvalidZiplist("an entry runs past the end"))
    };
    let (prevlen, mut p) = if bytes[at] < BIG_PREVLEN {
        (bytes[at] as usize, at + 1)
    } else if bytes[at] == BIG_PREVLEN {
        let raw = take(at + 1, 4)?;
        (
            u32::from_le_bytes(raw.try_into().expect("4 bytes")) as usize,
            at + 5,
        )
    } else {
        return Err(InvalidZiplist("an entry starts with the end marker"));
    };
    let encoding = take(p, 1)?[0];
    p += 1;
    let value = match encoding >> 6 {
        0b00 => LpValue::Bytes(take(p, (encoding & 0x3f) as usize)?),
        0b01 => {
            let low = take(p, 1)?[0];
            p += 1;
            LpValue::Bytes(take(p, (((encoding & 0x3f) as usize) << 8) | low as usize)?)
        }
        0b10 => {
            let len = u32::from_be_bytes(take(p, 4)?.try_into().expect("4 bytes"));
            p += 4;
            LpValue::Bytes(take(p, len as usize)?)
        }
        _ => {
            let (width, value) = match encoding {
                0xC0 => (
                    2,
                    i16::from_le_bytes(take(p, 2)?.try_into().expect("2")) as i64,
                ),
                0xD0 => (
                    4,
                    i32::from_le_bytes(take(p, 4)?.try_into().expect("4")) as i64,
                ),
                0xE0 => (8, i64::from_le_bytes(take(p, 8)?.try_into().expect("8"))),
                0xF0 => {
                    let raw = take(p, 3)?;
                    // Sign-extended from 24 bits.
                    (
                        3,
                        (i32::from_le_bytes([0, raw[0], raw[1], raw[2]]) >> 8) as i64,
                    )
                }
                0xFE => (1, take(p, 1)?[0] as i8 as i64),
                0xF1..=0xFD => (0, (encoding & 0x0f) as i64 - 1),
                _ => return Err(InvalidZiplist("an unknown entry encoding")),
            };
            return Ok((LpValue::Int(value), p + width - at, prevlen));
        }
    };
    let LpValue::Bytes(text) = value else {
        unreachable!("strings above")
    };
    let size = p + text.len() - at;
    Ok((value, size, prevlen))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist of `entries`, each given as its encoding and payload bytes.
    fn ziplist(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut previous = 0usize;
        let mut tail = HEADER;
        for e in entries {
            tail = HEADER + body.len();
            let mut entry = Vec::new();
            if previous < 254 {
                entry.push(previous as u8);
            } else {
                entry.push(BIG_PREVLEN);
                entry.extend_from_slice(&(previous as u32).to_le_bytes());
            }
            entry.extend_from_slice(e);
            previous = entry.len();
            body.extend_from_slice(&entry);
        }
        let total = HEADER + body.len() + 1;
        let mut out = Vec::new();
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&(tail as u32).to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(END);
        out
    }

    fn text(s: &[u8]) -> Vec<u8> {
        let mut e = if s.len() < 64 {
            vec![s.len() as u8]
        } else {
            vec![0x40 | (s.len() >> 8) as u8, s.len() as u8]
        };
        e.extend_from_slice(s);
        e
    }

    #[test]
    fn every_encoding_reads() {
        let long = vec![b'x'; 300];
        let blob = ziplist(&[
            text(b"abc"),
            text(&long),
            vec![0xC0, 0x34, 0x12],
            vec![0xD0, 0xff, 0xff, 0xff, 0xff],
            vec![0xE0, 0, 0, 0, 0, 0, 0, 0, 0x80],
            vec![0xF0, 0xff, 0xff, 0x7f],
            vec![0xF0, 0x00, 0x00, 0x80],
            vec![0xFE, 0x80],
            vec![0xF1],
            vec![0xFD],
            text(b"after a long one"),
        ]);
        let values = entries(&blob).unwrap();
        assert_eq!(
            values,
            vec![
                LpValue::Bytes(b"abc"),
                LpValue::Bytes(&long),
                LpValue::Int(0x1234),
                LpValue::Int(-1),
                LpValue::Int(i64::MIN),
                LpValue::Int(0x7fffff),
                LpValue::Int(-0x800000),
                LpValue::Int(-128),
                LpValue::Int(0),
                LpValue::Int(12),
                LpValue::Bytes(b"after a long one"),
            ]
        );
        assert_eq!(to_listpack(&blob).unwrap().len(), 11);
    }

    #[test]
    fn damage_is_refused_at_every_cut_and_flip() {
        let blob = ziplist(&[text(b"one"), vec![0xC0, 1, 2], text(&[b'y'; 70])]);
        assert!(entries(&blob).is_ok());
        for cut in 0..blob.len() {
            assert!(entries(&blob[..cut]).is_err(), "cut at {cut}");
        }
        // Any single byte changed either is refused or still reads within bounds.
        for at in 0..blob.len() {
            for value in [0u8, 1, 0x3f, 0x40, 0x7f, 0x80, 0xC0, 0xF5, 0xFE, 0xFF] {
                let mut damaged = blob.clone();
                damaged[at] = value;
                let _ = entries(&damaged);
            }
        }
        let mut wrong_count = blob.clone();
        wrong_count[8] = 2;
        assert!(entries(&wrong_count).is_err());
        let mut wrong_tail = blob.clone();
        wrong_tail[4] = 11;
        assert!(entries(&wrong_tail).is_err());
        let mut unknown = ziplist(&[vec![0xC1, 0]]);
        assert!(entries(&unknown).is_err());
        unknown = ziplist(&[]);
        assert_eq!(entries(&unknown).unwrap(), vec![]);
    }
}
