//! Seeded, structure-aware mutation fuzzing of the parsers of untrusted bytes, in process:
//! the RESP request parser (multibulk, inline, the big-argument path, unauthenticated
//! limits), RESTORE payloads of every type and encoding (the ziplist-era ones of dumps
//! before 7.0 too), FUNCTION RESTORE payloads, the RDB reader (a replica's full sync comes
//! from the network), the manifest parser, the log scanner (small reads must agree with
//! large ones) and the Lua libraries Redis bundles (cjson, cmsgpack, struct, bit).
//!
//! Inputs start from a corpus kept in `tests/fuzz_corpus` (payloads and an RDB file that
//! redis-server 7.0.15 wrote, a manifest) and from generated requests, and are mutated
//! (bits flipped, bytes set to edge values, lengths and integers overwritten with boundary
//! values, slices cut, duplicated or inserted). Payloads get their CRC64 footer recomputed
//! after the mutation, so the decoder is reached rather than refused at the checksum.
//! Every input must be answered without a panic; a panicking input is written to the
//! target directory and named in the failure.
//!
//! `TESSERA_FUZZ_ITERATIONS` sets the inputs per target (default 20,000, 2,000 whole RDB
//! files; the long mode runs millions); `TESSERA_FUZZ_SEED` the seed.

mod common;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::path::Path;
use tessera::fuzz_targets as targets;

fn corpus(prefix: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!inputs.is_empty(), "no corpus files starting with {prefix}");
    inputs
}

const EDGE_INTEGERS: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// One to four mutations of `input`.
fn mutate(input: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = out.len();
        match rng.random_range(0..8) {
            0 if len > 0 => {
                let at = rng.random_range(0..len);
                out[at] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let at = rng.random_range(0..len);
                out[at] = [0u8, 0xff, 0x7f, 0x80, 0xfe, 0xc0, 0x0d, 0x0a][rng.random_range(0..8)];
            }
            2 if len > 0 => {
                let at = rng.random_range(0..len);
                let value = EDGE_INTEGERS[rng.random_range(0..EDGE_INTEGERS.len())];
                let width = [1usize, 2, 4, 8][rng.random_range(0..4)];
                let bytes = if rng.random_bool(0.5) {
                    value.to_le_bytes()
                } else {
                    value.to_be_bytes()
                };
                for (i, b) in bytes.iter().take(width).enumerate() {
                    if at + i < out.len() {
                        out[at + i] = *b;
                    }
                }
            }
            3 if len > 0 => out.truncate(rng.random_range(0..len)),
            4 if len > 1 => {
                let start = rng.random_range(0..len);
                let end = rng.random_range(start..len.min(start + 64) + 1).min(len);
                let piece = out[start..end].to_vec();
                let at = rng.random_range(0..=out.len());
                out.splice(at..at, piece);
            }
            5 if len > 1 => {
                let start = rng.random_range(0..len);
                let end = rng.random_range(start..len.min(start + 64) + 1).min(len);
                out.drain(start..end);
            }
            6 => {
                let at = rng.random_range(0..=len);
                let count = rng.random_range(1..16);
                let bytes: Vec<u8> = (0..count).map(|_| rng.random()).collect();
                out.splice(at..at, bytes);
            }
            _ => {
                // A decimal number where text numbers live (RESP lengths, manifest seqs).
                let text = [
                    "-1",
                    "0",
                    "9223372036854775807",
                    "-9223372036854775808",
                    "18446744073709551616",
                    "4294967296",
                    "99999999999999999999",
                ][rng.random_range(0..7)];
                let at = rng.random_range(0..=len);
                out.splice(at..at, text.bytes());
            }
        }
    }
    out
}

/// Runs `target` over mutated inputs (`default` of them, or `TESSERA_FUZZ_ITERATIONS`);
/// fails naming the first that panics.
fn fuzz(
    name: &str,
    seeds: &[Vec<u8>],
    default: u64,
    prepare: fn(&[u8]) -> Vec<u8>,
    target: fn(&[u8]),
) {
    let iterations: u64 = common::env_number("TESSERA_FUZZ_ITERATIONS", default, 1);
    let first_seed: u64 = common::env_number("TESSERA_FUZZ_SEED", 0, 0);
    let mut rng = StdRng::seed_from_u64(first_seed);
    // Every seed input as it is, first.
    for input in seeds {
        target(input);
    }
    for iteration in 0..iterations {
        let seed = &seeds[rng.random_range(0..seeds.len())];
        let mut input = mutate(seed, &mut rng);
        if rng.random_bool(0.8) {
            input = prepare(&input);
        }
        let outcome = std::panic::catch_unwind(|| target(&input));
        if outcome.is_err() {
            let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("fuzz-{name}-seed{first_seed}-{iteration}.bin"));
            std::fs::write(&path, &input).unwrap();
            panic!(
                "{name}: input {iteration} (seed {first_seed}) panicked; saved to {}",
                path.display()
            );
        }
    }
}

fn resp_seeds() -> Vec<Vec<u8>> {
    let requests: &[&[&[u8]]] = &[
        &[b"SET", b"key", b"value"],
        &[b"MSET", b"a", b"1", b"b", b"2"],
        &[b"PING"],
        &[b"EVAL", b"return 1", b"0"],
        &[b"HSET", b"h", b"f", &[0u8, 1, 2, 255]],
        &[b"", b"x"],
    ];
    let mut seeds: Vec<Vec<u8>> = requests.iter().map(|r| common::encode_command(r)).collect();
    seeds.push(
        requests
            .iter()
            .flat_map(|r| common::encode_command(r))
            .collect(),
    );
    seeds.push(b"SET key \"quoted \\x41 value\" 'single'\r\nPING\r\n".to_vec());
    seeds.push(
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$40\r\n0123456789012345678901234567890123456789\r\n"
            .to_vec(),
    );
    seeds
}

#[test]
fn resp_requests() {
    fuzz(
        "resp",
        &resp_seeds(),
        20_000,
        |input| input.to_vec(),
        targets::resp,
    );
}

/// The corpus is what Redis wrote: every seed decodes (so mutations start from inputs
/// that reach every decoder, not from refusals).
#[test]
fn the_corpus_decodes() {
    for payload in corpus("restore-") {
        tessera::rdb::payload::decode_value(&payload).expect("a payload Redis wrote");
    }
    tessera::rdb::payload::decode_functions(&corpus("functions")[0]).expect("FUNCTION DUMP");
    let file = &corpus("rdb-")[0];
    let mut reader = tessera::rdb::RdbReader::new(&file[..]).expect("an RDB file");
    let mut items = 0;
    while reader.next_item().expect("an item").is_some() {
        items += 1;
    }
    assert!(items > 15, "{items} items");
}

#[test]
fn restore_payloads() {
    let footer = |input: &[u8]| targets::with_checksum(input, 10);
    fuzz(
        "restore",
        &corpus("restore-"),
        20_000,
        footer,
        targets::restore,
    );
}

#[test]
fn function_restore_payloads() {
    let footer = |input: &[u8]| targets::with_checksum(input, 10);
    fuzz(
        "functions",
        &corpus("functions"),
        20_000,
        footer,
        targets::function_restore,
    );
}

#[test]
fn rdb_files() {
    // A whole file per input: fewer of them by default.
    let checksum = |input: &[u8]| targets::with_checksum(input, 17);
    fuzz("rdb", &corpus("rdb-"), 2_000, checksum, targets::rdb);
}

#[test]
fn log_files() {
    fuzz(
        "log_scan",
        &corpus("log-"),
        20_000,
        |input| input.to_vec(),
        targets::log_scan,
    );
}

#[test]
fn lua_libraries() {
    fuzz(
        "lua_libraries",
        &corpus("lua-"),
        20_000,
        |input| input.to_vec(),
        targets::lua_libraries,
    );
}

#[test]
fn manifests() {
    fuzz(
        "manifest",
        &corpus("manifest"),
        20_000,
        |input| input.to_vec(),
        targets::manifest,
    );
}
