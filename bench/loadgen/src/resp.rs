//! RESP, as much as the loads need: the requests they send (`SET key:<n> <value>`, with
//! `EX <seconds>` in the cache workload, and `GET key:<n>`) and a parser for the replies they get (`+OK`, `-ERR ...`, `:n`,
//! `$len` + bytes, `$-1`). Anything else is a protocol error.

use rand::Rng;

/// The characters a value is made of: 64 printable ones, so a value is 6 random bits a
/// byte and `redis-cli` shows it as it is.
pub const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The longest bulk reply accepted (a longer length is a protocol error, not a wait).
const MAX_BULK: usize = 512 << 20;

/// Appends `n` in decimal.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

fn decimal_len(mut n: u64) -> u64 {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

fn push_key(out: &mut Vec<u8>, key: u64) {
    out.push(b'$');
    push_u64(out, 4 + decimal_len(key));
    out.extend_from_slice(b"\r\nkey:");
    push_u64(out, key);
    out.extend_from_slice(b"\r\n");
}

/// Appends `GET key:<key>`.
pub fn push_get(out: &mut Vec<u8>, key: u64) {
    out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    push_key(out, key);
}

/// Appends a SET's array header, its key and its value's length line (`with_expiry`: an
/// `EX <seconds>` pair follows the value).
fn push_set_head(out: &mut Vec<u8>, key: u64, value_len: usize, with_expiry: bool) {
    out.extend_from_slice(if with_expiry {
        b"*5\r\n$3\r\nSET\r\n"
    } else {
        b"*3\r\n$3\r\nSET\r\n"
    });
    push_key(out, key);
    out.push(b'$');
    push_u64(out, value_len as u64);
    out.extend_from_slice(b"\r\n");
}

/// Appends `SET key:<key> <value>`, the value `value_size` fresh random printable bytes.
pub fn push_set(out: &mut Vec<u8>, key: u64, value_size: usize, rng: &mut impl Rng) {
    push_set_head(out, key, value_size, false);
    let start = out.len();
    out.resize(start + value_size, 0);
    fill_value(&mut out[start..], rng);
    out.extend_from_slice(b"\r\n");
}

/// Appends `SET key:<key> <value>`, and `EX <seconds>` when given.
pub fn push_set_value(out: &mut Vec<u8>, key: u64, value: &[u8], expire_seconds: Option<u64>) {
    push_set_head(out, key, value.len(), expire_seconds.is_some());
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    if let Some(seconds) = expire_seconds {
        out.extend_from_slice(b"$2\r\nEX\r\n$");
        push_u64(out, decimal_len(seconds));
        out.extend_from_slice(b"\r\n");
        push_u64(out, seconds);
        out.extend_from_slice(b"\r\n");
    }
}

/// Fills `dst` with random characters of [`ALPHABET`]: 8 of them per 64-bit draw of the
/// generator (a cheap one: xoshiro256++), so a 1 KB value costs 128 draws.
pub fn fill_value(dst: &mut [u8], rng: &mut impl Rng) {
    for chunk in dst.chunks_mut(8) {
        let mut bits = rng.next_u64();
        for b in chunk {
            *b = ALPHABET[(bits & 63) as usize];
            bits >>= 8;
        }
    }
}

/// What a reply was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `+...` (SET's `+OK`).
    Status,
    /// `-...`: the server refused the command.
    Error,
    /// `:n`.
    Integer,
    /// `$len` and that many bytes (a GET that found its key).
    Bulk,
    /// `$-1` (a GET that found nothing).
    Nil,
}

/// The outcome of parsing the front of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole reply of `len` bytes.
    Reply { kind: Kind, len: usize },
    /// Not all of it has arrived yet.
    Incomplete,
    /// Not a reply to SET or GET: the connection cannot be trusted further.
    Invalid(&'static str),
}

fn parse_len(line: &[u8]) -> Option<i64> {
    let (negative, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    Some(if negative { -n } else { n })
}

/// Parses the reply at the front of `buf`.
pub fn parse_reply(buf: &[u8]) -> Parsed {
    let Some(&first) = buf.first() else {
        return Parsed::Incomplete;
    };
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return Parsed::Incomplete;
    };
    if nl == 0 || buf[nl - 1] != b'\r' {
        return Parsed::Invalid("a reply line not ended by CRLF");
    }
    let line = &buf[1..nl - 1];
    let header = nl + 1;
    match first {
        b'+' => Parsed::Reply {
            kind: Kind::Status,
            len: header,
        },
        b'-' => Parsed::Reply {
            kind: Kind::Error,
            len: header,
        },
        b':' => match parse_len(line) {
            Some(_) => Parsed::Reply {
                kind: Kind::Integer,
                len: header,
            },
            None => Parsed::Invalid("a malformed integer reply"),
        },
        b'$' => match parse_len(line) {
            Some(-1) => Parsed::Reply {
                kind: Kind::Nil,
                len: header,
            },
            Some(n) if n >= 0 && n as usize <= MAX_BULK => {
                let end = header + n as usize + 2;
                if buf.len() < end {
                    Parsed::Incomplete
                } else if &buf[end - 2..end] != b"\r\n" {
                    Parsed::Invalid("a bulk reply not ended by CRLF")
                } else {
                    Parsed::Reply {
                        kind: Kind::Bulk,
                        len: end,
                    }
                }
            }
            _ => Parsed::Invalid("a malformed bulk length"),
        },
        _ => Parsed::Invalid("an unexpected reply type"),
    }
}

/// The text of an error reply (without `-` and CRLF), for the report.
pub fn error_text(reply: &[u8]) -> String {
    let body = reply.strip_prefix(b"-").unwrap_or(reply);
    let body = body.strip_suffix(b"\r\n").unwrap_or(body);
    let text = String::from_utf8_lossy(body);
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn requests_are_well_formed_resp() {
        let mut out = Vec::new();
        push_get(&mut out, 0);
        push_get(&mut out, 499_999);
        assert_eq!(
            out,
            b"*2\r\n$3\r\nGET\r\n$5\r\nkey:0\r\n*2\r\n$3\r\nGET\r\n$10\r\nkey:499999\r\n"
        );

        let mut rng = SmallRng::seed_from_u64(7);
        let mut out = Vec::new();
        push_set(&mut out, 42, 13, &mut rng);
        let head = b"*3\r\n$3\r\nSET\r\n$6\r\nkey:42\r\n$13\r\n";
        assert_eq!(&out[..head.len()], head);
        let value = &out[head.len()..out.len() - 2];
        assert_eq!(value.len(), 13);
        assert!(value.iter().all(|b| ALPHABET.contains(b)));
        assert!(out.ends_with(b"\r\n"));
    }

    #[test]
    fn set_with_a_given_value_and_expiry() {
        let mut out = Vec::new();
        push_set_value(&mut out, 7, b"abc", None);
        push_set_value(&mut out, 12, b"", Some(100_000));
        assert_eq!(
            out,
            &b"*3\r\n$3\r\nSET\r\n$5\r\nkey:7\r\n$3\r\nabc\r\n\
               *5\r\n$3\r\nSET\r\n$6\r\nkey:12\r\n$0\r\n\r\n$2\r\nEX\r\n$6\r\n100000\r\n"[..]
        );
    }

    #[test]
    fn values_are_fresh_and_printable() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut a = vec![0u8; 1024];
        let mut b = vec![0u8; 1024];
        fill_value(&mut a, &mut rng);
        fill_value(&mut b, &mut rng);
        assert_ne!(a, b);
        assert!(a.iter().chain(&b).all(|c| c.is_ascii_graphic()));
        // Every character of the alphabet shows up in 2 KB of them.
        for c in ALPHABET {
            assert!(a.iter().chain(&b).any(|x| x == c), "{}", *c as char);
        }
    }

    #[test]
    fn push_u64_formats_decimal() {
        for n in [0, 7, 10, 99, 100, 123_456_789, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
            assert_eq!(decimal_len(n) as usize, out.len());
        }
    }

    #[test]
    fn parses_every_reply_of_set_and_get() {
        let cases: [(&[u8], Kind); 6] = [
            (b"+OK\r\n", Kind::Status),
            (b"-ERR wrong number of arguments\r\n", Kind::Error),
            (b":12\r\n", Kind::Integer),
            (b"$5\r\nhello\r\n", Kind::Bulk),
            (b"$0\r\n\r\n", Kind::Bulk),
            (b"$-1\r\n", Kind::Nil),
        ];
        for (bytes, kind) in cases {
            let mut buf = bytes.to_vec();
            buf.extend_from_slice(b"+OK\r\n"); // the next reply is not consumed
            assert_eq!(
                parse_reply(&buf),
                Parsed::Reply {
                    kind,
                    len: bytes.len()
                }
            );
            // Every strict prefix is incomplete, never a wrong reply.
            for cut in 0..bytes.len() {
                assert_eq!(
                    parse_reply(&bytes[..cut]),
                    Parsed::Incomplete,
                    "{bytes:?} cut at {cut}"
                );
            }
        }
        // A bulk value may contain CR and LF.
        assert_eq!(
            parse_reply(b"$4\r\n\r\n\r\n\r\n"),
            Parsed::Reply {
                kind: Kind::Bulk,
                len: 10
            }
        );
    }

    #[test]
    fn rejects_what_is_not_a_reply() {
        for bad in [
            &b"OK\r\n"[..],
            b"+OK\n",
            b"\n",
            b"$abc\r\n",
            b"$-2\r\n",
            b"$\r\n",
            b"$3\r\nabcde",
            b":x\r\n",
            b"*1\r\n$2\r\nOK\r\n",
            b"$99999999999999999999\r\n",
        ] {
            assert!(matches!(parse_reply(bad), Parsed::Invalid(_)), "{bad:?}");
        }
    }

    #[test]
    fn error_text_strips_the_framing() {
        assert_eq!(error_text(b"-ERR no\r\n"), "ERR no");
        assert_eq!(
            error_text(b"-OOM command not allowed\r\n"),
            "OOM command not allowed"
        );
    }
}
