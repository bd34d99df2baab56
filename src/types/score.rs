//! Sorted-set scores as Redis 7.0 reads and writes them.
//!
//! Redis parses a score with C's `strtod` and prints one with `"%.17g"` (replies) or its
//! `d2string` (listpack entries: integers in range printed as integers). Tessera calls the
//! C library's own `strtod` and `snprintf` rather than re-implementing them: the exact
//! text of every score, and which inputs are accepted (hex floats, "infinity", overflow
//! rejected), then matches Redis on the same platform by construction.

use std::ffi::CString;

/// Redis's `getDoubleFromObject` / `zslParseRange` number rules: all of the text is a
/// C double, no leading space, no NaN, no overflow, no underflow to zero.
pub fn parse(text: &[u8]) -> Option<f64> {
    if text.is_empty() || text[0].is_ascii_whitespace() || text.len() > 5 * 1024 {
        return None;
    }
    let c_text = CString::new(text).ok()?; // an inner NUL: not all of it is a number
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c_text` is NUL-terminated and outlives the call; errno is thread-local.
    let (value, errno) = unsafe {
        *libc::__errno_location() = 0;
        let value = libc::strtod(c_text.as_ptr(), &mut end);
        (value, *libc::__errno_location())
    };
    let consumed = end as usize - c_text.as_ptr() as usize;
    if consumed != text.len() || value.is_nan() {
        return None;
    }
    if errno == libc::ERANGE && (value.is_infinite() || value == 0.0) {
        return None;
    }
    Some(value)
}

/// Redis's `zslParseRange` number rules, looser than a score's: C `strtod` up to the
/// first NUL, leading spaces and an empty text (0) accepted, overflow to infinity
/// accepted, only NaN and trailing garbage refused.
pub fn parse_bound(text: &[u8]) -> Option<f64> {
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let c_text = CString::new(text).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c_text` is NUL-terminated and outlives the call.
    let value = unsafe { libc::strtod(c_text.as_ptr(), &mut end) };
    let consumed = end as usize - c_text.as_ptr() as usize;
    (consumed == text.len() && !value.is_nan()).then_some(value)
}

/// Redis's SORT weight rules (`sortCompare`'s scores): C `strtod` up to the first NUL,
/// leading spaces and an empty text (0) accepted, hex and "inf" too; refused: trailing
/// garbage, NaN, and anything `strtod` reports as out of range (overflow, and underflow
/// to zero or a subnormal).
pub fn parse_sort_weight(text: &[u8]) -> Option<f64> {
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let c_text = CString::new(text).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c_text` is NUL-terminated and outlives the call; errno is thread-local.
    let (value, errno) = unsafe {
        *libc::__errno_location() = 0;
        let value = libc::strtod(c_text.as_ptr(), &mut end);
        (value, *libc::__errno_location())
    };
    let consumed = end as usize - c_text.as_ptr() as usize;
    (consumed == text.len() && !value.is_nan() && errno != libc::ERANGE).then_some(value)
}

fn snprintf_g17(value: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the buffer is large enough for any "%.17g" output (at most 24 chars) and
    // snprintf never writes past the size given.
    let len = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            c"%.17g".as_ptr(),
            value,
        )
    };
    String::from_utf8_lossy(&buf[..len.max(0) as usize]).into_owned()
}

/// A score as Redis 7.0 replies it (`addReplyDouble`): "inf", "-inf" or "%.17g".
pub fn reply_text(value: f64) -> String {
    if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        snprintf_g17(value)
    }
}

/// A score as Redis 7.0 stores it in a listpack (`d2string`): integers within ±2^52 as
/// integers — zero included, so a listpack turns -0 into 0 (a skiplist keeps -0, and so
/// do both here) — the rest as "%.17g".
pub fn listpack_text(value: f64) -> String {
    if value.is_infinite() {
        return reply_text(value);
    }
    const LIMIT: f64 = 4_503_599_627_370_496.0; // 2^52
    if value > -LIMIT && value < LIMIT && value == (value as i64) as f64 {
        return (value as i64).to_string();
    }
    snprintf_g17(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_strtod_with_redis_rejections() {
        assert_eq!(parse(b"1.5"), Some(1.5));
        assert_eq!(parse(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse(b"0x10"), Some(16.0));
        assert_eq!(parse(b"1e3"), Some(1000.0));
        assert_eq!(parse(b"-0"), Some(-0.0));
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"abc",
            b"1e400",
            b"1e-400",
            b"1\x002",
        ] {
            assert_eq!(parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn sort_weights_are_strtod_up_to_a_nul_without_range_errors() {
        assert_eq!(parse_sort_weight(b""), Some(0.0));
        assert_eq!(parse_sort_weight(b" 3"), Some(3.0));
        assert_eq!(parse_sort_weight(b"0x10"), Some(16.0));
        assert_eq!(parse_sort_weight(b"1\0junk"), Some(1.0));
        assert_eq!(parse_sort_weight(b"-inf"), Some(f64::NEG_INFINITY));
        for bad in [
            &b"  "[..],
            b"3 ",
            b"nan",
            b"abc",
            b"1e400",
            b"1e-400",
            b"1e-310",
        ] {
            assert_eq!(
                parse_sort_weight(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn range_bounds_are_looser_than_scores() {
        assert_eq!(parse_bound(b" 1"), Some(1.0));
        assert_eq!(parse_bound(b""), Some(0.0));
        assert_eq!(parse_bound(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_bound(b"1\0junk"), Some(1.0));
        assert_eq!(parse_bound(b"nan"), None);
        assert_eq!(parse_bound(b"1 "), None);
    }

    #[test]
    fn formats_like_redis() {
        assert_eq!(reply_text(1.5), "1.5");
        assert_eq!(reply_text(0.1), "0.10000000000000001");
        assert_eq!(reply_text(1e20), "1e+20");
        assert_eq!(reply_text(f64::NEG_INFINITY), "-inf");
        assert_eq!(reply_text(-0.0), "-0");
        assert_eq!(listpack_text(3.0), "3");
        assert_eq!(listpack_text(-0.0), "0");
        assert_eq!(listpack_text(1e20), "1e+20");
        assert_eq!(listpack_text(2.5), "2.5");
    }
}
