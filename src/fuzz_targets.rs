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

/// A log file's records, scanned with small reads (1 to 64 bytes, from the first byte)
/// and with one read of the whole file (as the 4 MB reads see a small file): the reads'
/// sizes must not change a record, an offset or the verdict, and the records lie inside
/// the file.
pub fn log_scan(input: &[u8]) {
    use crate::log::scan::scan_records_in_chunks;
    use crate::storage::{SimulatedStorage, Storage};
    let Some((&first, file)) = input.split_first() else {
        return;
    };
    let storage = SimulatedStorage::new();
    let path = std::path::Path::new("appendonly.aof.1.incr.aof");
    storage.create(path).unwrap().append(file).unwrap();
    let scan = |chunk: usize| {
        let mut records = Vec::new();
        let verdict = scan_records_in_chunks(&storage, path, chunk, |args, offset| {
            let bytes: usize = args.iter().map(|a| a.len()).sum();
            assert!(
                offset as usize + bytes <= file.len(),
                "a record past the file"
            );
            records.push((offset, args.len(), bytes));
            Ok::<(), std::convert::Infallible>(())
        })
        .map_err(|e| e.into_damage().to_string());
        (records, verdict)
    };
    let small = scan(1 + usize::from(first % 64));
    let large = scan(file.len() + 1);
    assert_eq!(small, large, "the read size changed the scan");
    if let Ok(consumed) = large.1 {
        assert!(consumed as usize <= file.len());
    }
}

/// The Lua libraries Redis bundles (cjson, cmsgpack, struct, bit), called as scripts call
/// them with arguments made of the input; the first byte picks the call. A Lua error is
/// an answer; a panic, a crash or unbounded memory (the interpreter's limit) is not.
pub fn lua_libraries(input: &[u8]) {
    use mlua::{MultiValue, Table, Value};
    thread_local! {
        static LIBRARIES: (crate::scripting::sandbox::Sandbox, Table) = {
            let sandbox = crate::scripting::sandbox::Sandbox::new().expect("a sandbox");
            let libraries = sandbox.internals.table.get("libraries").expect("the libraries");
            (sandbox, libraries)
        };
    }
    let Some((&selector, data)) = input.split_first() else {
        return;
    };
    LIBRARIES.with(|(sandbox, libraries)| {
        let lua = &sandbox.lua;
        let string = |bytes: &[u8]| Value::String(lua.create_string(bytes).unwrap());
        // `library.name(args…)`: its results, or None on a Lua error.
        let call = |library: &str, name: &str, args: Vec<Value>| -> Option<MultiValue> {
            let table: Table = libraries.get(library).unwrap();
            let function: mlua::Function = table.get(name).unwrap();
            let mut results = function
                .call::<MultiValue>(MultiValue::from_vec(args))
                .ok()?;
            match results.pop_front() {
                Some(Value::Boolean(true)) => Some(results),
                _ => None,
            }
        };
        // Numbers from the data, 8 bytes each: as doubles, and as the 32-bit integers
        // `bit` works on (both signs, the edges included).
        let numbers: Vec<Value> = data
            .chunks(8)
            .map(|c| {
                let mut bytes = [0u8; 8];
                bytes[..c.len()].copy_from_slice(c);
                if c[0] & 1 == 0 {
                    Value::Number(f64::from_le_bytes(bytes))
                } else {
                    Value::Number(f64::from(i32::from_le_bytes([
                        bytes[1], bytes[2], bytes[3], bytes[4],
                    ])))
                }
            })
            .collect();
        // A format and its data, split where the first data byte says.
        let split = data
            .first()
            .map_or(0, |&b| usize::from(b) % (data.len().max(1)));
        let (format, rest) = data.split_at(split);
        match selector % 10 {
            0 => {
                call("cjson", "decode", vec![string(data)]);
            }
            1 => {
                call("cmsgpack", "unpack", vec![string(data)]);
            }
            2 => {
                let position = numbers.last().cloned().unwrap_or(Value::Nil);
                call("struct", "unpack", vec![string(format), string(rest)]);
                call(
                    "struct",
                    "unpack",
                    vec![string(format), string(rest), position],
                );
            }
            3 => {
                let mut args = vec![string(format)];
                args.extend(
                    rest.chunks(8)
                        .zip(&numbers)
                        .map(|(c, n)| if c[0] & 2 == 0 { n.clone() } else { string(c) }),
                );
                call("struct", "pack", args);
            }
            4 => {
                call("struct", "size", vec![string(data)]);
            }
            5 => {
                // What cmsgpack decodes, cjson encodes (nested tables, cycles excluded).
                if let Some(values) = call("cmsgpack", "unpack", vec![string(data)]) {
                    for value in values {
                        call("cjson", "encode", vec![value.clone()]);
                        call("cmsgpack", "pack", vec![value]);
                    }
                }
            }
            6 => {
                if let Some(values) = call("cjson", "decode", vec![string(data)]) {
                    let packed = call("cmsgpack", "pack", values.into_vec());
                    if let Some(Value::String(packed)) = packed.and_then(|mut p| p.pop_front()) {
                        call("cmsgpack", "unpack", vec![Value::String(packed)]);
                    }
                }
            }
            7 => {
                let limit = numbers.first().cloned().unwrap_or(Value::Nil);
                let offset = numbers.get(1).cloned().unwrap_or(Value::Nil);
                call("cmsgpack", "unpack_one", vec![string(rest), offset.clone()]);
                call(
                    "cmsgpack",
                    "unpack_limit",
                    vec![string(rest), limit, offset],
                );
            }
            8 => {
                for name in [
                    "tobit", "bnot", "band", "bor", "bxor", "lshift", "rshift", "arshift", "rol",
                    "ror", "bswap", "tohex",
                ] {
                    call("bit", name, numbers.iter().take(3).cloned().collect());
                }
            }
            _ => {
                // cjson.encode of a table built from the data: keys and values, nested.
                let table = lua.create_table().unwrap();
                let mut current = table.clone();
                for (i, chunk) in data.chunks(3).enumerate() {
                    match chunk[0] % 4 {
                        0 => {
                            let inner = lua.create_table().unwrap();
                            current.set(i + 1, inner.clone()).unwrap();
                            current = inner;
                        }
                        1 => current.set(string(chunk), i).unwrap(),
                        2 => current.set(i + 1, string(chunk)).unwrap(),
                        _ => current
                            .set(f64::from(chunk[0]) - 128.5, numbers.get(i).cloned())
                            .unwrap(),
                    }
                }
                call("cjson", "encode", vec![Value::Table(table.clone())]);
                call("cmsgpack", "pack", vec![Value::Table(table)]);
            }
        }
    });
}
