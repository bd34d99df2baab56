//! Integers as text, by Redis's rules (`string2ll`): what counts as an integer argument,
//! an integer-encoded listpack entry or an intset member. Below `resp` and the commands,
//! which use it too (`resp::parse_i64` re-exports it).

/// Parses a decimal i64 as Redis's `string2ll` does (no '+', no spaces, no leading zeros).
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            None
        } else {
            Some((value as i128).wrapping_neg() as i64)
        }
    } else {
        i64::try_from(value).ok()
    }
}
