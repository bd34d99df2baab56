//! Stream entry IDs: `<ms>-<seq>`, two unsigned 64-bit halves ordered as a pair, and how
//! Redis 7.0 reads them from arguments (`streamGenericParseIDOrReply`, `string2ull`).
//!
//! Shared by the stream type (`types::stream`), its consumer groups and the RDB format,
//! which stores an ID as 16 bytes, both halves big-endian (so byte order is ID order).
//! What an argument may say depends on the command: `-` and `+` are the ends of a range,
//! `<ms>` alone fills the sequence with 0 or the maximum, `<ms>-*` (XADD only) leaves the
//! sequence to the server. The commands turn `None` into Redis's error text.

use std::fmt;

/// One entry's ID. Ordered by `ms`, then `seq` (the derived order, fields in that order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// What an ID argument leaves to the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedId {
    /// A complete ID (`-`, `+`, `ms-seq`, or `ms` with the sequence filled in).
    Exact(StreamId),
    /// `ms-*`: the sequence is the server's to choose (XADD).
    AutoSeq(u64),
}

/// Longest ID argument Redis reads (its parse buffer holds 127 characters).
const MAX_ARG_LEN: usize = 127;

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID up (`streamIncrID`); `None` past the maximum.
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| StreamId { ms, seq: 0 }),
        }
    }

    /// The next ID down (`streamDecrID`); `None` below the minimum.
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => self
                .ms
                .checked_sub(1)
                .map(|ms| StreamId { ms, seq: u64::MAX }),
        }
    }

    /// The RDB and node-key form: both halves big-endian.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&self.ms.to_be_bytes());
        bytes[8..].copy_from_slice(&self.seq.to_be_bytes());
        bytes
    }

    pub fn from_be_bytes(bytes: [u8; 16]) -> StreamId {
        let (ms, seq) = bytes.split_at(8);
        StreamId {
            ms: u64::from_be_bytes(ms.try_into().expect("8 bytes")),
            seq: u64::from_be_bytes(seq.try_into().expect("8 bytes")),
        }
    }

    /// An ID argument as Redis reads it: `-` and `+` are the extremes; `<ms>` alone takes
    /// `missing_seq` as its sequence (`None`: a sequence is required, as for XADD's and
    /// XSETID's IDs); `<ms>-*` is accepted only with `auto_seq` (XADD). `None`: invalid.
    pub fn parse(arg: &[u8], missing_seq: Option<u64>, auto_seq: bool) -> Option<ParsedId> {
        if arg.len() > MAX_ARG_LEN {
            return None;
        }
        match arg {
            b"-" => return Some(ParsedId::Exact(StreamId::MIN)),
            b"+" => return Some(ParsedId::Exact(StreamId::MAX)),
            _ => {}
        }
        // Redis cuts at the first '-': "-5" is an empty ms, "1-2-3" a sequence "2-3".
        match arg.iter().position(|&b| b == b'-') {
            None => {
                let ms = parse_u64(arg)?;
                missing_seq.map(|seq| ParsedId::Exact(StreamId { ms, seq }))
            }
            Some(dash) => {
                let ms = parse_u64(&arg[..dash])?;
                let seq = &arg[dash + 1..];
                if auto_seq && seq == b"*" {
                    return Some(ParsedId::AutoSeq(ms));
                }
                Some(ParsedId::Exact(StreamId {
                    ms,
                    seq: parse_u64(seq)?,
                }))
            }
        }
    }

    /// [`StreamId::parse`] for the arguments that cannot be `ms-*`.
    pub fn parse_exact(arg: &[u8], missing_seq: Option<u64>) -> Option<StreamId> {
        match StreamId::parse(arg, missing_seq, false)? {
            ParsedId::Exact(id) => Some(id),
            ParsedId::AutoSeq(_) => None,
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An unsigned 64-bit number as Redis's `string2ull` reads one: a canonical integer
/// (`string2ll`) that is not negative, or else whatever C's `strtoull` takes whole —
/// leading white space, a sign (a `-` negates modulo 2^64) and leading zeros included,
/// nothing past the maximum.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if let Some(value) = crate::types::number::parse_i64(s) {
        return u64::try_from(value).ok();
    }
    let mut rest = s;
    while let [b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r', tail @ ..] = rest {
        rest = tail;
    }
    let negative = match rest {
        [b'-', tail @ ..] => {
            rest = tail;
            true
        }
        [b'+', tail @ ..] => {
            rest = tail;
            false
        }
        _ => false,
    };
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &b in rest {
        value = value.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(arg: &str, missing: Option<u64>) -> Option<StreamId> {
        StreamId::parse_exact(arg.as_bytes(), missing)
    }

    #[test]
    fn ids_parse_as_redis_reads_them() {
        assert_eq!(exact("-", None), Some(StreamId::MIN));
        assert_eq!(exact("+", None), Some(StreamId::MAX));
        assert_eq!(exact("5-3", None), Some(StreamId::new(5, 3)));
        assert_eq!(exact("5", Some(0)), Some(StreamId::new(5, 0)));
        assert_eq!(exact("5", Some(u64::MAX)), Some(StreamId::new(5, u64::MAX)));
        assert_eq!(exact("5", None), None);
        assert_eq!(exact("-5", Some(0)), None);
        assert_eq!(exact("1-2-3", None), None);
        assert_eq!(exact("1-", None), None);
        assert_eq!(exact("", Some(0)), None);
        assert_eq!(exact("1-*", None), None);
        assert_eq!(
            StreamId::parse(b"7-*", None, true),
            Some(ParsedId::AutoSeq(7))
        );
        assert_eq!(
            exact("18446744073709551615-18446744073709551615", None),
            Some(StreamId::MAX)
        );
        assert_eq!(exact("18446744073709551616-0", None), None);
        assert_eq!(exact(&"1".repeat(128), Some(0)), None);
    }

    #[test]
    fn numbers_parse_as_string2ull() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"007"), Some(7));
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b" 7"), Some(7));
        assert_eq!(parse_u64(b"7 "), None);
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_u64(b"0x10"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn neighbours_cross_the_millisecond() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::MIN.prev(), None);
        let id = StreamId::new(0x0102, 0x0304);
        assert_eq!(StreamId::from_be_bytes(id.to_be_bytes()), id);
        assert!(StreamId::new(1, 9).to_be_bytes() < StreamId::new(2, 0).to_be_bytes());
    }
}
