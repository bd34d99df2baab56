//! Bitmaps (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) and LCS
//! beside a real redis-server 7.0 (the random stream is `differential/bitmaps.rs`):
//!
//! - the bytes survive: bitmaps written before, during and after a compaction, then
//!   kill -9 under `appendfsync always`, restart with every key's bytes (and TTL) as
//!   they were, and as Redis holds them after the same commands;
//! - what is logged: SETBIT and BITFIELD as they came and only when they changed
//!   something (a BITFIELD that only grew the string included), BITOP as it came, DEL for
//!   BITOP's empty result;
//! - errors and edge cases, reply for reply with Redis in RESP2 and RESP3, a lowered
//!   `proto-max-bulk-len` included;
//! - LCS over a corpus of string pairs and every combination of options, in RESP2 and
//!   RESP3 (IDX is a map there);
//! - WATCH and keyspace events: a BITOP touches its destination only.

mod common;

use common::raw_client::{Conn, V};
use common::side_by_side::connections;
use common::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;

/// Sends each command to both servers; returns the ones whose replies differ.
fn differences(ours: &mut Conn, theirs: &mut Conn, commands: &[Vec<Vec<u8>>]) -> Vec<String> {
    let mut found = Vec::new();
    for command in commands {
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        let (a, b) = (ours.call(&args), theirs.call(&args));
        if a != b {
            let shown: Vec<String> = command
                .iter()
                .map(|arg| format!("{:?}", String::from_utf8_lossy(arg)))
                .collect();
            found.push(format!(
                "{}\n  tessera: {a:?}\n  redis:   {b:?}",
                shown.join(" ")
            ));
        }
    }
    found
}

/// Space-separated words as a command (`\0` and `\xff` spelled out are those bytes).
fn words(line: &str) -> Vec<Vec<u8>> {
    line.split(' ')
        .map(|word| {
            word.replace("\\0", "\0")
                .into_bytes()
                .into_iter()
                .flat_map(|b| if b == b'~' { vec![0xff] } else { vec![b] })
                .collect()
        })
        .collect()
}

/// Every key of database 0 with its type, bytes (strings) and whether it has a TTL.
fn strings(conn: &mut redis::Connection) -> Strings {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let value: Option<Vec<u8>> = redis::cmd("GET").arg(&key).query(conn).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(conn).unwrap();
            (key, (value, ttl > 0))
        })
        .collect()
}

type Strings = BTreeMap<Vec<u8>, (Option<Vec<u8>>, bool)>;

/// Fails naming the keys that differ (and where), not printing megabytes of bitmaps.
fn assert_same_strings(ours: &Strings, expected: &Strings, context: &str) {
    let mut differences = Vec::new();
    for key in ours.keys().chain(expected.keys()) {
        let (a, b) = (ours.get(key), expected.get(key));
        if a == b || differences.len() >= 10 {
            continue;
        }
        let name = String::from_utf8_lossy(key);
        let describe = match (a, b) {
            (Some((Some(x), ttl_x)), Some((Some(y), ttl_y))) => {
                let first = x.iter().zip(y).position(|(p, q)| p != q);
                format!(
                    "{name}: lengths {} / {}, first differing byte {first:?}, TTL {ttl_x} / {ttl_y}",
                    x.len(),
                    y.len()
                )
            }
            (a, b) => format!("{name}: present {} / {}", a.is_some(), b.is_some()),
        };
        differences.push(describe);
    }
    differences.dedup();
    assert!(
        differences.is_empty(),
        "{context}: {} keys / {} keys; first differences (tessera / expected):\n  {}",
        ours.len(),
        expected.len(),
        differences.join("\n  ")
    );
}

fn send(conn: &mut redis::Connection, args: &[&[u8]]) -> redis::Value {
    let mut command = redis::Cmd::new();
    for arg in args {
        command.arg(*arg);
    }
    command
        .query(conn)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

/// A seeded stream of bitmap writes: SETBIT at near and far offsets, BITFIELD under
/// each overflow policy (some that only grow a string), BITOP with empty and full
/// results, a TTL kept by SETBIT.
fn bitmap_writes(rng: &mut StdRng, count: usize, keys: usize) -> Vec<Vec<Vec<u8>>> {
    let mut commands = Vec::new();
    for _ in 0..count {
        let key = format!("bm{}", rng.random_range(0..keys)).into_bytes();
        let command: Vec<String> = match rng.random_range(0..10) {
            0..5 => {
                let offset = if rng.random_bool(0.9) {
                    rng.random_range(0..40_000u64)
                } else {
                    rng.random_range(0..4_000_000u64)
                };
                let bit = rng.random_range(0..2u8);
                vec![
                    "SETBIT".into(),
                    String::new(),
                    offset.to_string(),
                    bit.to_string(),
                ]
            }
            5..8 => {
                let mut command = vec!["BITFIELD".into(), String::new()];
                for _ in 0..rng.random_range(1..4) {
                    let policy = ["WRAP", "SAT", "FAIL"][rng.random_range(0..3)];
                    let signed = rng.random_bool(0.5);
                    let bits = rng.random_range(1..if signed { 65 } else { 64 });
                    let kind = format!("{}{bits}", if signed { "i" } else { "u" });
                    let offset = if rng.random_bool(0.3) {
                        format!("#{}", rng.random_range(0..100))
                    } else {
                        rng.random_range(0..50_000).to_string()
                    };
                    let operation = if rng.random_bool(0.5) {
                        "SET"
                    } else {
                        "INCRBY"
                    };
                    let value: i64 = rng.random();
                    let value = value >> rng.random_range(0..64);
                    command.extend([
                        "OVERFLOW".into(),
                        policy.into(),
                        operation.into(),
                        kind,
                        offset,
                        value.to_string(),
                    ]);
                }
                command
            }
            8 => {
                let operation = ["AND", "OR", "XOR", "NOT"][rng.random_range(0..4)];
                let sources = if operation == "NOT" {
                    1
                } else {
                    rng.random_range(1..4)
                };
                let mut command = vec!["BITOP".into(), operation.into(), String::new()];
                for _ in 0..sources {
                    // Now and then a key never written: an empty source.
                    command.push(format!("bm{}", rng.random_range(0..keys + 3)));
                }
                command
            }
            _ => {
                let seconds = rng.random_range(10_000..100_000);
                vec!["EXPIRE".into(), String::new(), seconds.to_string()]
            }
        };
        let mut command: Vec<Vec<u8>> = command.into_iter().map(String::into_bytes).collect();
        let key_at = if command[0] == b"BITOP" { 2 } else { 1 };
        command[key_at] = key;
        commands.push(command);
    }
    commands
}

fn run_all(conn: &mut redis::Connection, commands: &[Vec<Vec<u8>>]) {
    let mut pipe = redis::pipe();
    for command in commands {
        let cmd = pipe.cmd(std::str::from_utf8(&command[0]).unwrap());
        for arg in &command[1..] {
            cmd.arg(arg.as_slice());
        }
        cmd.ignore();
    }
    let _: () = pipe.query(conn).unwrap();
}

#[test]
fn bitmaps_survive_kill_9_and_a_compaction_as_redis_holds_them() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let redis = RedisOracle::start(&redis_path);
    let mut ours = server.connection();
    let mut theirs = redis.connection();
    let mut rng = StdRng::seed_from_u64(20260501);

    // Before the compaction: in the base it writes.
    let before = bitmap_writes(&mut rng, 3000, 60);
    // Many bitmaps of 4 KB, so that the compaction runs a while and writes meet
    // strings its capture still holds (the change then copies them).
    let mut wide = Vec::new();
    for i in 0..3000 {
        let key = format!("wide{i}");
        wide.push(words(&format!("SETBIT {key} 32767 1")));
    }
    for conn in [&mut ours, &mut theirs] {
        run_all(conn, &before);
        run_all(conn, &wide);
    }
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut ours).unwrap();
    // During it, and after it: in the new incremental file.
    let during = bitmap_writes(&mut rng, 500, 60);
    let mut touches = Vec::new();
    for i in (0..3000).step_by(7) {
        touches.push(words(&format!("SETBIT wide{i} {} 1", i % 32768)));
        touches.push(words(&format!(
            "BITFIELD wide{i} INCRBY u8 {} 1",
            (i * 8) % 32760
        )));
    }
    for conn in [&mut ours, &mut theirs] {
        run_all(conn, &during);
        run_all(conn, &touches);
    }
    wait_for_background_jobs(&mut ours);
    assert_eq!(
        info_field(&mut ours, "aof_last_bgrewrite_status").as_deref(),
        Some("ok")
    );
    let after = bitmap_writes(&mut rng, 1500, 60);
    for conn in [&mut ours, &mut theirs] {
        run_all(conn, &after);
    }
    // A BITFIELD whose only write fails still creates the string (as Redis); it must
    // come back too.
    for conn in [&mut ours, &mut theirs] {
        send(
            conn,
            &[
                b"BITFIELD",
                b"failed",
                b"OVERFLOW",
                b"FAIL",
                b"INCRBY",
                b"u2",
                b"100",
                b"9",
            ],
        );
    }

    let live = strings(&mut ours);
    assert_same_strings(&live, &strings(&mut theirs), "the same bytes as Redis");
    assert!(live.len() > 3000 && live.contains_key(&b"failed"[..]));
    assert!(
        live.values()
            .any(|(value, _)| value.as_ref().is_some_and(|v| v.len() > 100_000)),
        "far offsets were written"
    );
    assert!(
        live.values().any(|(_, ttl)| *ttl),
        "some TTLs kept by SETBIT"
    );

    server.kill9();
    let server = start_server(dir.path(), &["--appendonly", "yes"]);
    let mut restarted = server.connection();
    assert_same_strings(
        &strings(&mut restarted),
        &live,
        "after kill -9 and a restart",
    );
}

/// The records of the log's incremental file, as lists of words.
fn log_records(server: &TestServer) -> Vec<Vec<String>> {
    let bytes = std::fs::read(server.last_incremental_file()).unwrap();
    let mut records = Vec::new();
    let mut rest = &bytes[..];
    while let Some(star) = rest.iter().position(|&b| b == b'*') {
        rest = &rest[star + 1..];
        let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let count: usize = std::str::from_utf8(&rest[..line_end])
            .unwrap()
            .parse()
            .unwrap();
        rest = &rest[line_end + 2..];
        let mut record = Vec::new();
        for _ in 0..count {
            let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let len: usize = std::str::from_utf8(&rest[1..line_end])
                .unwrap()
                .parse()
                .unwrap();
            let start = line_end + 2;
            record.push(String::from_utf8_lossy(&rest[start..start + len]).into_owned());
            rest = &rest[start + len + 2..];
        }
        records.push(record);
    }
    records
}

#[test]
fn writes_are_logged_only_when_they_change_something() {
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut conn = server.connection();
    let steps: &[(&str, bool)] = &[
        ("SETBIT b 10 1", true),
        ("SETBIT b 10 1", false), // the bit had that value
        ("SETBIT b 3 0", false),  // likewise, inside the string
        ("SETBIT b 100 0", true), // grows the string
        ("GETBIT b 10", false),
        ("BITFIELD b GET u8 0", false),
        ("BITFIELD b SET u8 0 0", false), // the field held 0 already
        ("BITFIELD b SET u8 0 7", true),
        ("BITFIELD b OVERFLOW FAIL INCRBY u2 0 9", false), // fails, nothing grows
        ("BITFIELD grown OVERFLOW FAIL INCRBY u2 0 9", true), // fails, but creates it
        ("BITFIELD_RO b GET i8 0", false),
        ("BITOP OR dest b grown", true),
        ("BITOP AND dest nothing none", true), // empty: the destination is deleted
        ("BITOP AND dest nothing none", false), // nothing left to delete
        ("BITCOUNT b", false),
        ("BITPOS b 1", false),
        ("LCS b grown", false),
    ];
    let mut expected = Vec::new();
    for (line, logged) in steps {
        let args = words(line);
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        send(&mut conn, &args);
        if *logged {
            let record = if line.starts_with("BITOP AND dest nothing") {
                "DEL dest".to_string()
            } else {
                line.to_string()
            };
            expected.push(record);
        }
    }
    let logged: Vec<String> = log_records(&server)
        .into_iter()
        .filter(|record| !record[0].eq_ignore_ascii_case("select"))
        .map(|record| record.join(" "))
        .collect();
    assert_eq!(logged, expected);
}

#[test]
fn errors_and_edge_cases_match_redis_in_resp2_and_resp3() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let redis = RedisOracle::start(&redis_path);
    let setup = [
        "FLUSHALL",
        "SET s foobar",
        "SET ones ~~~~",
        "SET empty ",
        "SETBIT b 0 1",
        "SETBIT b 17 1",
        "LPUSH list a",
        "HSET hash f v",
    ];
    let lines = [
        // SETBIT / GETBIT: offsets and values.
        "SETBIT b -1 1",
        "SETBIT b 4294967296 1",
        "SETBIT b 18446744073709551616 1",
        "SETBIT b 1.0 1",
        "SETBIT b +1 1",
        "SETBIT b 01 1",
        "SETBIT b 1 2",
        "SETBIT b 1 -1",
        "SETBIT b 1 01",
        "SETBIT b 1 ",
        "SETBIT b abc x",
        "SETBIT list 1 1",
        "SETBIT list 1 2",
        "SETBIT list -1 1",
        "SETBIT b",
        "SETBIT b 1 1 1",
        "GETBIT b 4294967296",
        "GETBIT b 4294967295",
        "GETBIT b -1",
        "GETBIT list 1",
        "GETBIT nokey 4294967295",
        "GETBIT nokey x",
        "GETBIT s 1",
        // BITCOUNT: ranges, units, missing keys that answer before any check.
        "BITCOUNT s",
        "BITCOUNT s 1 1",
        "BITCOUNT s -2 -1",
        "BITCOUNT s -1 -2",
        "BITCOUNT s 5 2",
        "BITCOUNT s 0 -1 BIT",
        "BITCOUNT s 5 30 bit",
        "BITCOUNT s -13 -3 BIT",
        "BITCOUNT s 9223372036854775807 -9223372036854775808 BIT",
        "BITCOUNT s -9223372036854775808 9223372036854775807 BIT",
        "BITCOUNT s 0 -1 BYTES",
        "BITCOUNT s 0",
        "BITCOUNT s 0 1 BIT extra",
        "BITCOUNT s a 1",
        "BITCOUNT s 1 a BIT",
        "BITCOUNT s -1 -2 nonsense",
        "BITCOUNT nokey 0",
        "BITCOUNT nokey a b c d e",
        "BITCOUNT list",
        "BITCOUNT list 0",
        "BITCOUNT empty 0 -1",
        "BITCOUNT empty 0 -1 BIT",
        "BITCOUNT s 0 -1 b\\0it",
        // BITPOS: clear bits in all-ones, explicit and implicit ends, units.
        "BITPOS ones 0",
        "BITPOS ones 1",
        "BITPOS ones 0 2",
        "BITPOS ones 0 0 -1",
        "BITPOS ones 0 0 -1 BIT",
        "BITPOS ones 0 3 BIT",
        "BITPOS ones 0 7 9 BIT",
        "BITPOS ones 1 40 BIT",
        "BITPOS s 0 -3 -1 BIT",
        "BITPOS s 1 13 13 BIT",
        "BITPOS s 1 14 14 BIT",
        "BITPOS s 0 1 2 BYTE",
        "BITPOS s 1 5 2",
        "BITPOS s 1 -100 -200",
        "BITPOS s 1 -100",
        "BITPOS empty 0",
        "BITPOS empty 1",
        "BITPOS empty 0 0 -1 BIT",
        "BITPOS nokey 0",
        "BITPOS nokey 1",
        "BITPOS nokey 1 x y z",
        "BITPOS nokey 2",
        "BITPOS s 2",
        "BITPOS s -1",
        "BITPOS s x",
        "BITPOS s 1 x",
        "BITPOS s 1 0 x",
        "BITPOS s 1 0 x nonsense",
        "BITPOS s 1 0 1 nonsense",
        "BITPOS s 1 0 1 BIT extra",
        "BITPOS list 1",
        "BITPOS list 3",
        // BITOP.
        "BITOP NOT d s ones",
        "BITOP NOT d",
        "BITOP nand d s",
        "BITOP and\\0x d s ones",
        "BITOP AND d s list",
        "BITOP AND d list s",
        "BITOP AND d nokey list",
        "BITOP AND d s ones empty",
        "GET d",
        "BITOP OR d s b nokey",
        "GET d",
        "BITOP XOR d s s",
        "GET d",
        "BITOP NOT d ones",
        "GET d",
        "BITOP AND d empty nokey",
        "EXISTS d",
        "BITOP AND list nokey",
        "TYPE list",
        "BITOP OR list s",
        "TYPE list",
        // BITFIELD and BITFIELD_RO.
        "BITFIELD f SET i8 0 -129 GET i8 0",
        "BITFIELD f OVERFLOW SAT SET i8 0 -129 GET i8 0",
        "BITFIELD f OVERFLOW SAT SET i8 0 -9223372036854775808 GET i8 0",
        "BITFIELD f OVERFLOW SAT SET u8 0 -1 GET u8 0",
        "BITFIELD f OVERFLOW FAIL SET u8 0 256 GET u8 0",
        "BITFIELD f OVERFLOW WRAP INCRBY i64 0 9223372036854775807 INCRBY i64 0 9223372036854775807",
        "BITFIELD f OVERFLOW SAT INCRBY i64 0 -9223372036854775808 INCRBY i64 0 -9223372036854775808",
        "BITFIELD f OVERFLOW SAT INCRBY u63 0 9223372036854775807 INCRBY u63 0 1",
        "BITFIELD f SET i16 #1152921504606846976 5 GET i16 0",
        "BITFIELD f SET u8 #1152921504606846976 5",
        "BITFIELD f GET i8 #",
        "BITFIELD f GET i8 #-1",
        "BITFIELD f GET i8 ##1",
        "BITFIELD f GET i8\\0junk 0",
        "BITFIELD f GET u64 0",
        "BITFIELD f GET i65 0",
        "BITFIELD f GET i0 0",
        "BITFIELD f GET I8 0",
        "BITFIELD f GET x8 0",
        "BITFIELD f GET i 0",
        "BITFIELD f GET i8",
        "BITFIELD f GET i8 0 SET",
        "BITFIELD f SET i8 0",
        "BITFIELD f SET i8 0 x",
        "BITFIELD f INCRBY i8 0 1.5",
        "BITFIELD f OVERFLOW",
        "BITFIELD f OVERFLOW SATURATE GET i8 0",
        "BITFIELD f OVERFLOW FAIL",
        "BITFIELD f DEL i8 0",
        "BITFIELD f",
        "BITFIELD f SET i8 4294967288 1",
        "BITFIELD f SET i8 4294967296 1",
        "BITFIELD f GET i8 4294967295",
        "BITFIELD list GET i8 0",
        "BITFIELD list SET i8 0 1",
        "BITFIELD list SET i8 0 x",
        "BITFIELD nokey2 GET u4 0 GET i63 1",
        "EXISTS nokey2",
        "BITFIELD nokey3 OVERFLOW FAIL INCRBY u2 20 100",
        "GET nokey3",
        "BITFIELD_RO f GET i8 0 GET u7 3",
        "BITFIELD_RO f SET i8 0 1",
        "BITFIELD_RO f OVERFLOW WRAP GET i8 0",
        "BITFIELD_RO f GET i8 0 INCRBY i8 0 x",
        "BITFIELD_RO f GET u64 0",
        "BITFIELD_RO list GET i8 0",
        "BITFIELD_RO list SET i8 0 1",
        "BITFIELD_RO nokey GET i8 0",
        "BITFIELD_RO",
        "GET f",
        // LCS errors.
        "LCS s list",
        "LCS list s IDX LEN",
        "LCS s ones IDX LEN",
        "LCS s ones MINMATCHLEN",
        "LCS s ones MINMATCHLEN x",
        "LCS s ones IDX foo",
        "LCS s",
    ];
    for resp3 in [false, true] {
        let (mut ours, mut theirs) = connections(&server, &redis, resp3);
        let setup: Vec<Vec<Vec<u8>>> = setup.iter().map(|line| words(line)).collect();
        assert!(differences(&mut ours, &mut theirs, &setup).is_empty());
        let commands: Vec<Vec<Vec<u8>>> = lines.iter().map(|line| words(line)).collect();
        let found = differences(&mut ours, &mut theirs, &commands);
        assert!(
            found.is_empty(),
            "resp3 {resp3}: differences:\n{}",
            found.join("\n")
        );
    }

    // A lowered proto-max-bulk-len bounds bit offsets and LCS's table, as in Redis.
    let (mut ours, mut theirs) = connections(&server, &redis, false);
    let limited = [
        "CONFIG SET proto-max-bulk-len 1mb",
        "SETBIT big 8388608 1",
        "SETBIT big 8388607 1",
        "STRLEN big",
        "GETBIT big 8388608",
        "BITFIELD big SET u8 8388600 255 GET u8 8388600",
        "BITFIELD big SET u8 8388608 255",
        "BITFIELD big GET i64 #131072",
        "BITFIELD big GET i64 #131071",
        "STRLEN big",
        "CONFIG SET proto-max-bulk-len 512mb",
    ];
    let mut commands: Vec<Vec<Vec<u8>>> = limited.iter().map(|line| words(line)).collect();
    // Two 600-byte strings need a 1.4 MB table: refused under 1 MB; LEN counts on a
    // big enough limit.
    let a: Vec<u8> = (0..600).map(|i| b"abc"[i % 3]).collect();
    let b: Vec<u8> = (0..600).map(|i| b"bca"[i % 3]).collect();
    let lcs_steps = vec![
        vec![b"SET".to_vec(), b"la".to_vec(), a],
        vec![b"SET".to_vec(), b"lb".to_vec(), b],
        words("CONFIG SET proto-max-bulk-len 1mb"),
        words("LCS la lb LEN"),
        words("LCS la nokey LEN"),
        words("CONFIG SET proto-max-bulk-len 2mb"),
        words("LCS la lb LEN"),
        words("CONFIG SET proto-max-bulk-len 512mb"),
    ];
    commands.extend(lcs_steps);
    let found = differences(&mut ours, &mut theirs, &commands);
    assert!(found.is_empty(), "differences:\n{}", found.join("\n"));
}

#[test]
fn lcs_matches_redis_in_resp2_and_resp3() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let redis = RedisOracle::start(&redis_path);
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = [
        ("ohmytext", "mynewtext"),
        ("", ""),
        ("abc", ""),
        ("abc", "abc"),
        ("abc", "xyz"),
        ("aaaa", "aa"),
        ("abcabcabc", "cbacbacba"),
        ("rosettacode", "raisethysword"),
        ("1234", "1224533324"),
        ("thisisatest", "testing123testing"),
        ("a\0b\r\nc", "\0\r\n"),
    ]
    .iter()
    .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
    .collect();
    // Random pairs over small alphabets: many equally long subsequences, so the
    // tie-breaking of the walk back shows.
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..40 {
        let alphabet = rng.random_range(1..5u8);
        let string = |rng: &mut StdRng| -> Vec<u8> {
            let len = rng.random_range(0..120);
            (0..len)
                .map(|_| b'a' + rng.random_range(0..alphabet))
                .collect()
        };
        let first = string(&mut rng);
        let second = string(&mut rng);
        pairs.push((first, second));
    }
    let options: &[&[&str]] = &[
        &[],
        &["LEN"],
        &["IDX"],
        &["IDX", "WITHMATCHLEN"],
        &["IDX", "MINMATCHLEN", "2"],
        &["IDX", "MINMATCHLEN", "3", "WITHMATCHLEN"],
        &["MINMATCHLEN", "-4", "IDX"],
        &["withmatchlen"],
        &["MINMATCHLEN", "2"],
        &["len", "minmatchlen", "5"],
        &["IDX", "IDX", "MINMATCHLEN", "1", "MINMATCHLEN", "9"],
    ];
    for resp3 in [false, true] {
        let (mut ours, mut theirs) = connections(&server, &redis, resp3);
        let mut commands = Vec::new();
        for (first, second) in &pairs {
            commands.push(vec![b"SET".to_vec(), b"a".to_vec(), first.clone()]);
            commands.push(vec![b"SET".to_vec(), b"b".to_vec(), second.clone()]);
            for keys in [["a", "b"], ["b", "a"], ["a", "missing"]] {
                for option in options {
                    let mut command = vec![b"LCS".to_vec()];
                    command.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
                    command.extend(option.iter().map(|o| o.as_bytes().to_vec()));
                    commands.push(command);
                }
            }
        }
        let found = differences(&mut ours, &mut theirs, &commands);
        assert!(
            found.is_empty(),
            "resp3 {resp3}: {} differences, first:\n{}",
            found.len(),
            found[..found.len().min(5)].join("\n")
        );
    }
}

#[test]
fn bitop_touches_its_destination_only_and_events_are_redis_s() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let redis = RedisOracle::start(&redis_path);
    let mut collectors = Vec::new();
    for port in [server.port, redis.port] {
        let mut conn = Conn::new(port);
        conn.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]);
        collectors.push(keyspace_events::Collector::new(port));
    }
    for resp3 in [false, true] {
        let (mut ours, mut watcher_ours) = (Conn::new(server.port), Conn::new(server.port));
        let (mut theirs, mut watcher_theirs) = (Conn::new(redis.port), Conn::new(redis.port));
        if resp3 {
            for conn in [&mut ours, &mut theirs] {
                conn.cmd(&["HELLO", "3"]);
            }
        }
        let script = [
            "SET src1 abc",
            "SET src2 xyz",
            "BITOP AND dest src1 src2",
            "SETBIT dest 100 1",
            "SETBIT dest 100 1",
            "BITFIELD dest SET u8 0 0",
            "BITFIELD dest SET u8 0 0",
            "BITFIELD dest OVERFLOW FAIL INCRBY u2 0 100",
            "BITFIELD fresh OVERFLOW FAIL INCRBY u2 0 100",
            "BITOP NOT dest nokey",
            "BITOP NOT dest nokey",
            "EXPIRE src1 1000",
            "BITOP OR src1 src1 src2",
            "TTL src1",
        ];
        let commands: Vec<Vec<Vec<u8>>> = script.iter().map(|line| words(line)).collect();
        let found = differences(&mut ours, &mut theirs, &commands);
        assert!(found.is_empty(), "differences:\n{}", found.join("\n"));

        // WATCH on a source: BITOP leaves it untouched, so EXEC runs; WATCH on the
        // destination: EXEC is refused.
        for (watched, expected_nil) in [("src2", false), ("dest", true)] {
            let mut replies = Vec::new();
            for (watcher, other) in [
                (&mut watcher_ours, &mut ours),
                (&mut watcher_theirs, &mut theirs),
            ] {
                watcher.cmd(&["WATCH", watched]);
                other.cmd(&["BITOP", "OR", "dest", "src1", "src2"]);
                watcher.cmd(&["MULTI"]);
                watcher.cmd(&["GET", "src2"]);
                replies.push(watcher.cmd(&["EXEC"]));
            }
            assert_eq!(replies[0], replies[1], "WATCH {watched}");
            assert_eq!(
                replies[0] == V::Null || replies[0] == V::Bulk(None),
                expected_nil,
                "WATCH {watched}: {:?}",
                replies[0]
            );
        }
    }
    let theirs = collectors.pop().unwrap().drain();
    let ours = collectors.pop().unwrap().drain();
    assert!(ours.iter().any(|event| event.ends_with(" setbit")));
    assert_eq!(ours, theirs, "keyspace events");
}
