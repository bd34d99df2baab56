//! The fuzz targets: each parser of untrusted bytes, driven over one input, with the
//! properties every input must keep (no panic, progress, results inside the input). Test
//! equipment (the `fault-injection` feature): `tests/parser_fuzz.rs` runs them over seeded
//! mutations in every test run, and `fuzz/` under libFuzzer (`scripts/fuzz`).

use crate::resp::{Parse, ParseLimits, Progress, parse_request};

/// Parses requests from the front of `input` until one is incomplete or refused.
fn parse_all(input: &[u8], limits: &ParseLimits) {
    let mut start = 0;
    let mut args = Vec::new();
    let mut progress = Progress::default();
    // Each request consumes at least a byte: at most one step per byte, plus one.
    for _ in 0..=input.len() {
        match parse_request(&input[start..], limits, &mut args, &mut progress) {
            Parse::Complete(used) | Parse::Inline(_, used) => {
                assert!(used > 0 && start + used <= input.len(), "consumed {used}");
                assert!(
                    args.iter().all(|range| range.end <= used),
                    "an argument past its request"
                );
                start += used;
            }
            Parse::BigArgument { start: at, len } => {
                assert!(start + at <= input.len() && len >= limits.big_argument_bytes_min);
                return;
            }
            Parse::Incomplete | Parse::Invalid(_) => return,
        }
    }
    panic!("the parser made no progress");
}

/// The RESP request parser under the default limits, an unauthenticated client's, and
/// small ones (big arguments from 16 bytes, 1 MB bulks, 64-byte inline lines).
pub fn resp(input: &[u8]) {
    let mut limits = ParseLimits::default();
    parse_all(input, &limits);
    limits.unauthenticated = true;
    parse_all(input, &limits);
    limits.unauthenticated = false;
    limits.big_argument_bytes_min = 16;
    limits.bulk_bytes_max = 1 << 20;
    limits.inline_bytes_max = 64;
    parse_all(input, &limits);
}

/// `input` with its last 8 bytes made the CRC64 of the rest (a payload's footer, an RDB
/// file's checksum), when it is at least `min_len` long: a mutated input then reaches the
/// decoder instead of being refused at the checksum.
pub fn with_checksum(input: &[u8], min_len: usize) -> Vec<u8> {
    let mut bytes = input.to_vec();
    if bytes.len() >= min_len {
        let body = bytes.len() - 8;
        let crc = crate::rdb::crc64(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }
    bytes
}

/// A RESTORE payload (its footer as given).
pub fn restore(payload: &[u8]) {
    let _ = crate::rdb::payload::decode_value(payload);
}

/// A FUNCTION RESTORE payload (its footer as given).
pub fn function_restore(payload: &[u8]) {
    let _ = crate::rdb::payload::decode_functions(payload);
}

/// A whole RDB file: read item by item to its end or its first error, always progressing.
pub fn rdb(file: &[u8]) {
    let Ok(mut reader) = crate::rdb::RdbReader::new(file) else {
        return;
    };
    // Each item takes at least a byte of the file.
    for _ in 0..=file.len() {
        match reader.next_item() {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
    panic!("the reader made no progress");
}

/// The log's manifest.
pub fn manifest(text: &[u8]) {
    let _ = crate::log::manifest::Manifest::parse(text);
}
