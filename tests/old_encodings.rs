//! Dumps of Redis before 7.0: their ziplist-era encodings (zipmap hashes, type 9; ziplist
//! lists, 10; intsets, 11; ziplist sorted sets, 12, and hashes, 13; quicklists of
//! ziplists, 14) load in Tessera as they load in Redis 7.0.15, which converts them on
//! load: the same values and the same encodings, key by key, and the same DEBUG DIGEST.
//!
//! The files are built here, byte by byte, as Redis 6.2 lays them out (RDB version 9),
//! with every entry encoding a ziplist has (strings of 6-, 14- and 32-bit lengths, the
//! 5-byte previous-length form, integers of every width, the 0-12 immediates). Damaged
//! copies of each value are refused, never a panic.

mod common;

use common::{RedisOracle, WHOLE_TEST, require_redis_or_skip, start_server, temp_dir};
use tessera::keyspace::Entry;
use tessera::rdb::load;

const ZIPMAP: u8 = 9;
const LIST_ZIPLIST: u8 = 10;
const SET_INTSET: u8 = 11;
const ZSET_ZIPLIST: u8 = 12;
const HASH_ZIPLIST: u8 = 13;
const LIST_QUICKLIST: u8 = 14;

/// A ziplist entry, as it is encoded (its previous-length prefix is added by `ziplist`).
enum Zl {
    Text(Vec<u8>),
    Int(i64),
}

fn text(s: &str) -> Zl {
    Zl::Text(s.as_bytes().to_vec())
}

/// The encoding and payload of one entry, in the smallest form Redis 6.2 would choose
/// (Redis stores a string that is a canonical integer as an integer).
fn encode(entry: &Zl) -> Vec<u8> {
    match entry {
        Zl::Text(s) if s.len() < 64 => [&[s.len() as u8][..], s].concat(),
        Zl::Text(s) if s.len() < 16384 => {
            [&[0x40 | (s.len() >> 8) as u8, s.len() as u8][..], s].concat()
        }
        Zl::Text(s) => [&[0x80][..], &(s.len() as u32).to_be_bytes(), s].concat(),
        Zl::Int(n @ 0..=12) => vec![0xF1 + *n as u8],
        Zl::Int(n) if i8::try_from(*n).is_ok() => vec![0xFE, *n as i8 as u8],
        Zl::Int(n) if i16::try_from(*n).is_ok() => {
            [&[0xC0][..], &(*n as i16).to_le_bytes()].concat()
        }
        Zl::Int(n) if (-(1 << 23)..(1 << 23)).contains(n) => {
            [&[0xF0][..], &(*n as i32).to_le_bytes()[..3]].concat()
        }
        Zl::Int(n) if i32::try_from(*n).is_ok() => {
            [&[0xD0][..], &(*n as i32).to_le_bytes()].concat()
        }
        Zl::Int(n) => [&[0xE0][..], &n.to_le_bytes()].concat(),
    }
}

fn ziplist(entries: &[Zl]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut previous = 0usize;
    let mut tail = 10;
    for entry in entries {
        tail = 10 + body.len();
        let mut bytes = if previous < 254 {
            vec![previous as u8]
        } else {
            [&[0xFE][..], &(previous as u32).to_le_bytes()].concat()
        };
        bytes.extend(encode(entry));
        previous = bytes.len();
        body.extend(bytes);
    }
    let total = 10 + body.len() + 1;
    [
        &(total as u32).to_le_bytes()[..],
        &(tail as u32).to_le_bytes(),
        &(entries.len().min(65535) as u16).to_le_bytes(),
        &body,
        &[0xFF],
    ]
    .concat()
}

/// A zipmap of (field, value, free bytes after the value).
fn zipmap(pairs: &[(&[u8], &[u8], u8)]) -> Vec<u8> {
    let len = |n: usize| {
        if n < 254 {
            vec![n as u8]
        } else {
            [&[254u8][..], &(n as u32).to_le_bytes()].concat()
        }
    };
    let mut out = vec![pairs.len().min(254) as u8];
    for (field, value, free) in pairs {
        out.extend(len(field.len()));
        out.extend_from_slice(field);
        out.extend(len(value.len()));
        out.push(*free);
        out.extend_from_slice(value);
        out.extend(std::iter::repeat_n(0xAA, *free as usize));
    }
    out.push(0xFF);
    out
}

fn intset(values: &[i64]) -> Vec<u8> {
    let mut sorted = values.to_vec();
    sorted.sort();
    let mut out = [
        &8u32.to_le_bytes()[..],
        &(sorted.len() as u32).to_le_bytes(),
    ]
    .concat();
    for v in sorted {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// An RDB string: a length (6-, 14- or 32-bit form) and the bytes.
fn rdb_string(bytes: &[u8]) -> Vec<u8> {
    let n = bytes.len();
    let mut out = if n < 64 {
        vec![n as u8]
    } else if n < 16384 {
        vec![0x40 | (n >> 8) as u8, n as u8]
    } else {
        [&[0x80u8][..], &(n as u32).to_be_bytes()].concat()
    };
    out.extend_from_slice(bytes);
    out
}

/// One key: its type byte, its name and its body (blobs already as RDB strings).
struct Key {
    value_type: u8,
    name: &'static str,
    body: Vec<u8>,
}

fn blob_key(value_type: u8, name: &'static str, blob: &[u8]) -> Key {
    Key {
        value_type,
        name,
        body: rdb_string(blob),
    }
}

/// Version 9 (Redis 6.2), database 0, no checksum (zero: loaded unchecked, by Redis too).
fn rdb_file(keys: &[Key]) -> Vec<u8> {
    let mut out = b"REDIS0009".to_vec();
    out.extend([0xFE, 0x00]);
    for key in keys {
        out.push(key.value_type);
        out.extend(rdb_string(key.name.as_bytes()));
        out.extend_from_slice(&key.body);
    }
    out.push(0xFF);
    out.extend([0u8; 8]);
    out
}

fn dataset() -> Vec<Key> {
    let long = "L".repeat(300); // the next entry's previous length takes 5 bytes
    let huge = "H".repeat(17_000); // a 32-bit string length
    let mut list = vec![
        text(""),
        text("a"),
        text(&"b".repeat(63)),
        text(&"c".repeat(64)),
        Zl::Text(long.clone().into_bytes()),
        text("after the long one"),
        Zl::Text(huge.into_bytes()),
    ];
    for n in [
        0, 7, 12, 13, -1, 127, -128, 128, 32767, -32768, 32768, 8388607, -8388608,
    ] {
        list.push(Zl::Int(n));
    }
    for n in [
        8388608,
        i32::MAX as i64,
        i32::MIN as i64,
        1 << 40,
        i64::MAX,
        i64::MIN,
    ] {
        list.push(Zl::Int(n));
    }
    let node = |from: i64| ziplist(&(from..from + 20).map(Zl::Int).collect::<Vec<_>>());
    let mut quicklist = vec![3u8]; // three nodes, the middle one empty
    quicklist.extend(rdb_string(&node(0)));
    quicklist.extend(rdb_string(&ziplist(&[])));
    quicklist.extend(rdb_string(&ziplist(&[text("x"), Zl::Int(-5), text(&long)])));

    let small_hash = ziplist(&[
        text("name"),
        text("tessera"),
        text("count"),
        Zl::Int(42),
        text("negative"),
        Zl::Int(-70000),
        text("long"),
        Zl::Text(long.clone().into_bytes()),
        Zl::Int(7),
        text("an integer field"),
    ]);
    let big_hash: Vec<Zl> = (0..200)
        .flat_map(|i| [Zl::Text(format!("field:{i}").into_bytes()), Zl::Int(i * 3)])
        .collect();
    // In score order, as Redis wrote them (neither server checks the order on load).
    let small_zset = ziplist(&[
        text("minus"),
        Zl::Int(-3),
        Zl::Int(99),
        text("0.25"),
        text("one"),
        Zl::Int(1),
        text("half"),
        text("1.5"),
        text("big"),
        text("1e10"),
        text("top"),
        text("inf"),
    ]);
    let mut by_score: Vec<(i64, String)> = (0..200).map(|i| (i % 17, format!("m{i:03}"))).collect();
    by_score.sort();
    let big_zset: Vec<Zl> = by_score
        .into_iter()
        .flat_map(|(score, member)| [Zl::Text(member.into_bytes()), Zl::Int(score)])
        .collect();
    let long_value = vec![b'v'; 400];
    vec![
        blob_key(LIST_ZIPLIST, "list:ziplist", &ziplist(&list)),
        Key {
            value_type: LIST_QUICKLIST,
            name: "list:quicklist",
            body: quicklist,
        },
        blob_key(HASH_ZIPLIST, "hash:ziplist", &small_hash),
        blob_key(HASH_ZIPLIST, "hash:ziplist:big", &ziplist(&big_hash)),
        blob_key(
            ZIPMAP,
            "hash:zipmap",
            &zipmap(&[
                (b"f1", b"v1", 0),
                (b"f2", b"12345", 4),
                (b"", b"empty field", 1),
                (b"f4", &long_value, 0),
            ]),
        ),
        blob_key(ZSET_ZIPLIST, "zset:ziplist", &small_zset),
        blob_key(ZSET_ZIPLIST, "zset:ziplist:big", &ziplist(&big_zset)),
        blob_key(SET_INTSET, "set:intset", &intset(&[5, -7, 1 << 40, 0])),
    ]
}

/// Everything a client sees of a key: its type, encoding and contents (sorted where the
/// type has no order).
fn describe(conn: &mut redis::Connection, key: &str) -> String {
    let kind: String = redis::cmd("TYPE").arg(key).query(conn).unwrap();
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(conn)
        .unwrap();
    let contents: Vec<Vec<u8>> = match kind.as_str() {
        "list" => redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(conn),
        "hash" => redis::cmd("HGETALL").arg(key).query(conn),
        "zset" => redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(conn),
        "set" => redis::cmd("SMEMBERS").arg(key).query(conn),
        other => panic!("{key}: unexpected type {other}"),
    }
    .unwrap();
    let mut items: Vec<String> = contents
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    if kind == "hash" {
        let mut pairs: Vec<String> = items.chunks(2).map(|p| p.join("=")).collect();
        pairs.sort();
        items = pairs;
    } else if kind == "set" {
        items.sort();
    }
    let joined = items.join(",");
    format!("{kind} {encoding} {} items: {joined}", items.len())
}

#[test]
fn old_encodings_load_as_redis_7_loads_them() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let keys = dataset();
    let file = rdb_file(&keys);
    let args = [
        "--appendonly",
        "no",
        "--dbfilename",
        "old.rdb",
        "--enable-debug-command",
        "yes",
    ];
    let redis_dir = temp_dir();
    std::fs::write(redis_dir.path().join("old.rdb"), &file).unwrap();
    let redis = RedisOracle::start_with(&redis_server, redis_dir.path(), &args);
    let dir = temp_dir();
    std::fs::write(dir.path().join("old.rdb"), &file).unwrap();
    let server = start_server(dir.path(), &args);
    let mut ours = server.connection();
    let mut theirs = redis.connection();
    assert_eq!(common::dbsize(&mut theirs), keys.len());
    assert_eq!(common::dbsize(&mut ours), keys.len());
    for key in &keys {
        let expected = describe(&mut theirs, key.name);
        assert_eq!(describe(&mut ours, key.name), expected, "{}", key.name);
    }
    let digest = |conn: &mut redis::Connection| -> String {
        redis::cmd("DEBUG").arg("DIGEST").query(conn).unwrap()
    };
    assert_eq!(digest(&mut ours), digest(&mut theirs));
}

/// Each old value cut short or with a byte changed: the load either succeeds (the change
/// kept it valid) or fails with an error; it never panics. Truncations always fail.
#[test]
fn damaged_old_values_are_refused_not_trusted() {
    for key in dataset() {
        let body = key.body.clone();
        let mut variants = Vec::new();
        for cut in 0..body.len().min(300) {
            variants.push((true, body[..cut].to_vec()));
        }
        for at in 0..body.len().min(200) {
            for value in [0x00u8, 0x3F, 0x40, 0xC0, 0xFE, 0xFF] {
                let mut damaged = body.clone();
                damaged[at] = value;
                variants.push((false, damaged));
            }
        }
        for (truncated, damaged) in variants {
            let file = rdb_file(&[Key {
                value_type: key.value_type,
                name: key.name,
                body: damaged,
            }]);
            let outcome = load(&file[..], &mut |_db: u32, _entry: Entry| Ok(()));
            if truncated {
                assert!(outcome.is_err(), "{}: a truncated value loaded", key.name);
            }
        }
    }
}

/// Every value of the dataset loads on its own through the library too (what the
/// damage test varies is sound to begin with).
#[test]
fn each_old_value_loads() {
    for key in dataset() {
        let file = rdb_file(&[key]);
        let mut count = 0;
        load(&file[..], &mut |_db: u32, _entry: Entry| {
            count += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(count, 1);
    }
}

/// A listpack hash whose values are longer than `hash-max-listpack-value` here (written
/// by a server with a larger limit) stays a listpack when restored, in both servers:
/// Redis 7.0 converts a loaded listpack or ziplist by its count only.
#[test]
fn a_loaded_listpack_is_converted_by_its_count_only() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let source_dir = temp_dir();
    let source = RedisOracle::start_with(
        &redis_server,
        source_dir.path(),
        &["--hash-max-listpack-value", "1024"],
    );
    let mut source = source.connection();
    let long = "x".repeat(500);
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg(&long)
        .query(&mut source)
        .unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("h").query(&mut source).unwrap();
    let redis_dir = temp_dir();
    let redis = RedisOracle::start_with(&redis_server, redis_dir.path(), &[]);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    for mut conn in [redis.connection(), server.connection()] {
        let _: () = redis::cmd("RESTORE")
            .arg("h")
            .arg(0)
            .arg(&payload)
            .query(&mut conn)
            .unwrap();
        assert_eq!(
            describe(&mut conn, "h"),
            format!("hash listpack 1 items: f={long}")
        );
    }
}
