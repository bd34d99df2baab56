//! LZF, the compression RDB uses for strings (liblzf's format, as Redis writes and reads
//! it).
//!
//! LZF is a byte-oriented LZ77: a control byte below 32 starts a run of (control + 1)
//! literal bytes; otherwise its top three bits are a match length - 2 (7: one more byte
//! adds to it) and its low five bits with the next byte a distance - 1 of up to 8 KB.
//!
//! Written here rather than taken from crates.io (reviewed when RDB became its own
//! module). The candidates:
//! - `lzf`: its last release (1.0, a pure-Rust rewrite of its earlier bindings to
//!   liblzf's C source) is marked deprecated by its author.
//! - `lzf-sys` 0.1.1: bindings to liblzf 3.6's C source, built with `cc` — the code Redis
//!   vendors, so interoperable by construction, and kept up again since 2026. But
//!   liblzf's default build, which the crate gives no way to change, zeroes a 256 KB
//!   hash table on every call: about 7 µs per string however short, against 0.2–1 µs here
//!   for strings of 24–100 bytes (one string per call, release build). Snapshot values
//!   are mostly short; the C code only wins past about 1.5 KB (3× faster at 10 KB).
//! - `lzf-rust` 0.1.0: one release from a single commit, with the same 256 KB zeroing
//!   per call (on the stack).
//!
//! This compressor sizes its table to the input and reuses its allocation. Its weak side
//! is long values: at 10 KB it takes about 3× liblzf's time per byte (liblzf indexes only
//! the last two positions of a match, this one all of them). The format is small and
//! fixed; what proves interoperability are the tests: Redis 7.0.15's own LZF output
//! decoded here (below, and the dump in `test_support`), and `tests/rdb_format.rs`, where
//! Redis loads Tessera's compressed strings and Tessera loads a `dump.rdb` Redis wrote
//! with compressible values.

const MAX_LITERAL: usize = 32;
const MAX_DISTANCE: usize = 1 << 13;
const MIN_MATCH: usize = 3;
const MAX_MATCH: usize = (1 << 8) + (1 << 3);
/// The most output one input byte can yield: a 3-byte token copies at most 264 bytes.
pub(super) const MAX_EXPANSION: u64 = (MAX_MATCH / 3) as u64;
const MAX_HASH_BITS: u32 = 16;

#[derive(Default)]
pub(super) struct LzfCompressor {
    /// Last position + 1 of each 3-byte sequence's hash (0: none).
    table: Vec<u32>,
}

impl LzfCompressor {
    /// Compresses `input` into `output` (replacing its contents). Returns false, leaving
    /// `output` unspecified, when the result would be longer than `limit` bytes.
    pub(super) fn compress(&mut self, input: &[u8], output: &mut Vec<u8>, limit: usize) -> bool {
        output.clear();
        let length = input.len();
        if length <= MIN_MATCH || length >= u32::MAX as usize {
            return false;
        }
        // A table about as large as the input: zeroing it costs what reading the input does.
        let hash_bits = (usize::BITS - (length - 1).leading_zeros()).clamp(8, MAX_HASH_BITS);
        self.table.clear();
        self.table.resize(1 << hash_bits, 0);
        output.reserve(limit.min(length));

        let mut anchor = 0;
        let mut position = 0;
        while position + MIN_MATCH <= length {
            let pending = position - anchor;
            if output.len() + pending + pending / MAX_LITERAL + 1 > limit {
                return false;
            }
            let slot = hash(input, position, hash_bits);
            let previous = self.table[slot] as usize;
            self.table[slot] = (position + 1) as u32;
            if previous != 0 {
                let candidate = previous - 1;
                let distance = position - candidate - 1;
                if distance < MAX_DISTANCE
                    && input[candidate..candidate + MIN_MATCH]
                        == input[position..position + MIN_MATCH]
                {
                    let longest = (length - position).min(MAX_MATCH);
                    let mut matched = MIN_MATCH;
                    while matched < longest
                        && input[candidate + matched] == input[position + matched]
                    {
                        matched += 1;
                    }
                    if !emit_literals(&input[anchor..position], output, limit)
                        || !emit_match(distance, matched, output, limit)
                    {
                        return false;
                    }
                    let end = position + matched;
                    // Index the sequences inside the match, so later data can refer to them.
                    for inside in position + 1..end.min(length - 2) {
                        self.table[hash(input, inside, hash_bits)] = (inside + 1) as u32;
                    }
                    position = end;
                    anchor = end;
                    continue;
                }
            }
            position += 1;
        }
        emit_literals(&input[anchor..], output, limit)
    }
}

fn hash(input: &[u8], position: usize, hash_bits: u32) -> usize {
    let sequence = (u32::from(input[position]) << 16)
        | (u32::from(input[position + 1]) << 8)
        | u32::from(input[position + 2]);
    (sequence.wrapping_mul(0x9E37_79B1) >> (32 - hash_bits)) as usize
}

fn emit_literals(literals: &[u8], output: &mut Vec<u8>, limit: usize) -> bool {
    for run in literals.chunks(MAX_LITERAL) {
        if output.len() + 1 + run.len() > limit {
            return false;
        }
        output.push((run.len() - 1) as u8);
        output.extend_from_slice(run);
    }
    true
}

fn emit_match(distance: usize, matched: usize, output: &mut Vec<u8>, limit: usize) -> bool {
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

/// Why LZF data does not decompress to its declared length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecompressError {
    LiteralPastEnd,
    LongerThanDeclared,
    MatchCutOff,
    MatchBeforeStart,
    ShorterThanDeclared,
}

impl std::fmt::Display for DecompressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecompressError::LiteralPastEnd => "literal run past the end of the data",
            DecompressError::LongerThanDeclared => "longer than its declared length",
            DecompressError::MatchCutOff => "match cut off",
            DecompressError::MatchBeforeStart => "match refers before the start",
            DecompressError::ShorterThanDeclared => "shorter than its declared length",
        })
    }
}

/// Decompresses `input` into exactly `output.len()` bytes.
pub fn decompress(input: &[u8], output: &mut [u8]) -> Result<(), DecompressError> {
    let mut input_position = 0;
    let mut output_position = 0;
    while input_position < input.len() {
        let control = usize::from(input[input_position]);
        input_position += 1;
        if control < MAX_LITERAL {
            let run = control + 1;
            if input_position + run > input.len() {
                return Err(DecompressError::LiteralPastEnd);
            }
            if output_position + run > output.len() {
                return Err(DecompressError::LongerThanDeclared);
            }
            output[output_position..output_position + run]
                .copy_from_slice(&input[input_position..input_position + run]);
            input_position += run;
            output_position += run;
        } else {
            let mut matched = control >> 5;
            if matched == 7 {
                let Some(&extra) = input.get(input_position) else {
                    return Err(DecompressError::MatchCutOff);
                };
                matched += usize::from(extra);
                input_position += 1;
            }
            let Some(&distance_low) = input.get(input_position) else {
                return Err(DecompressError::MatchCutOff);
            };
            input_position += 1;
            let distance = ((control & 0x1F) << 8) | usize::from(distance_low);
            let matched = matched + 2;
            if distance >= output_position {
                return Err(DecompressError::MatchBeforeStart);
            }
            if output_position + matched > output.len() {
                return Err(DecompressError::LongerThanDeclared);
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
        return Err(DecompressError::ShorterThanDeclared);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::test_support::{Random, from_hex};

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
                decompress(&compressed, &mut output).unwrap();
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
        decompress(&from_hex("017878e02500017878"), &mut output).unwrap();
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
            assert!(decompress(&from_hex(hex), &mut output).is_err(), "{hex}");
        }
    }
}
