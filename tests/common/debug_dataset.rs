//! What the DEBUG tests share: both servers started with DEBUG allowed, one dataset of
//! every type and encoding Tessera has, loaded into either, and the digests compared.

use super::raw_client::{Conn, V};
use super::{RedisOracle, TestServer, start_server};
use std::path::Path;

pub const ZERO_DIGEST: &str = "0000000000000000000000000000000000000000";

/// Redis with DEBUG allowed and persistence off, in `dir`.
pub fn redis_with_debug(binary: &Path, dir: &Path) -> RedisOracle {
    RedisOracle::start_with(
        binary,
        dir,
        &["--appendonly", "no", "--enable-debug-command", "yes"],
    )
}

/// Tessera with DEBUG allowed, and `args`.
pub fn tessera_with_debug(dir: &Path, args: &[&str]) -> TestServer {
    let mut all = vec!["--enable-debug-command", "yes"];
    all.extend_from_slice(args);
    start_server(dir, &all)
}

/// The same dataset for both servers: every type, every encoding Tessera has (strings
/// `int` / `embstr` / `raw`, lists, listpack and table hashes, intset and table sets,
/// listpack and skiplist sorted sets with infinite and negative-zero scores), binary
/// keys and values, expiries, and a second database.
pub fn dataset() -> Vec<Vec<Vec<u8>>> {
    let mut commands: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut add = |words: Vec<Vec<u8>>| commands.push(words);
    let w =
        |words: &[&str]| -> Vec<Vec<u8>> { words.iter().map(|w| w.as_bytes().to_vec()).collect() };
    add(w(&["SET", "str", "hello"]));
    add(w(&["SET", "int", "12345"]));
    add(w(&["SET", "negative", "-42"]));
    add(w(&["SET", "small-int", "7"]));
    add(w(&["SET", "raw", &"x".repeat(300)]));
    add(vec![
        b"SET".to_vec(),
        b"bin\x00key\r\n".to_vec(),
        b"\x00\xff\r\nvalue".to_vec(),
    ]);
    add(w(&["SET", "volatile", "v", "EX", "100000"]));
    add(w(&["RPUSH", "list", "a", "b", "1", "2", "-3", "c", "1"]));
    let mut long_list = w(&["RPUSH", "long-list"]);
    for i in 0..2000 {
        long_list.push(format!("element-{i:06}").into_bytes());
        long_list.push(i.to_string().into_bytes());
    }
    add(long_list);
    add(w(&[
        "HSET", "hash", "f1", "v1", "f2", "2", "3", "v3", "", "empty",
    ]));
    let mut big_hash = w(&["HSET", "big-hash"]);
    for i in 0..600 {
        big_hash.push(format!("field-{i}").into_bytes());
        big_hash.push(format!("value-{i}").into_bytes());
    }
    add(big_hash);
    add(w(&["HSET", "long-value-hash", "f", &"v".repeat(100)]));
    add(w(&[
        "SADD",
        "intset",
        "1",
        "2",
        "3",
        "-5",
        "100000",
        "-9223372036854775808",
    ]));
    add(w(&["SADD", "set", "a", "b", "c", "1"]));
    let mut big_intset = w(&["SADD", "big-intset"]);
    big_intset.extend((0..600).map(|i| i.to_string().into_bytes()));
    add(big_intset);
    add(w(&[
        "ZADD",
        "zset",
        "1",
        "a",
        "2.5",
        "b",
        "-inf",
        "c",
        "+inf",
        "d",
        "0",
        "z",
        "3",
        "100",
        "-0",
        "negative-zero",
        "0.1",
        "tenth",
    ]));
    let mut big_zset = w(&["ZADD", "big-zset"]);
    for i in 0..200 {
        big_zset.push(format!("{}", i as f64 * 0.1).into_bytes());
        big_zset.push(format!("member-{i}").into_bytes());
    }
    big_zset.extend(w(&["-0", "negative-zero", "inf", "top", "-inf", "bottom"]));
    add(big_zset);
    add(w(&["HSET", "volatile-hash", "a", "b"]));
    add(w(&["EXPIRE", "volatile-hash", "100000"]));
    add(w(&["SELECT", "3"]));
    add(w(&["SET", "str", "hello"]));
    add(w(&["LPUSH", "db3-list", "x", "y"]));
    add(w(&["SADD", "intset", "1", "2", "3"]));
    add(w(&["SELECT", "0"]));
    commands
}

/// The keys `dataset` makes, by database.
pub fn dataset_keys() -> Vec<(usize, Vec<Vec<u8>>)> {
    let db0 = [
        "str",
        "int",
        "negative",
        "small-int",
        "raw",
        "bin\x00key\r\n",
        "volatile",
        "list",
        "long-list",
        "hash",
        "big-hash",
        "long-value-hash",
        "intset",
        "set",
        "big-intset",
        "zset",
        "big-zset",
        "volatile-hash",
    ];
    let db3 = ["str", "db3-list", "intset"];
    let bytes = |keys: &[&str]| keys.iter().map(|k| k.as_bytes().to_vec()).collect();
    vec![(0, bytes(&db0)), (3, bytes(&db3))]
}

/// Sends `commands` in one pipeline and checks that none failed.
pub fn load(conn: &mut Conn, commands: &[Vec<Vec<u8>>]) {
    for command in commands {
        let args: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        conn.send(&args);
    }
    for command in commands {
        let reply = conn.read();
        assert!(
            !matches!(reply, V::Error(_) | V::Closed),
            "{:?}: {reply:?}",
            String::from_utf8_lossy(&command.join(&b' '))
        );
    }
}

pub fn digest(conn: &mut Conn) -> String {
    match conn.cmd(&["DEBUG", "DIGEST"]) {
        V::Simple(digest) => digest,
        other => panic!("DEBUG DIGEST: {other:?}"),
    }
}

/// DEBUG DIGEST-VALUE of every key of the dataset (and of one that does not exist), and
/// each key's OBJECT ENCODING, database by database.
pub fn value_digests(conn: &mut Conn) -> Vec<(usize, String, V, V)> {
    let mut found = Vec::new();
    for (db, keys) in dataset_keys() {
        conn.cmd(&["SELECT", &db.to_string()]);
        let mut args: Vec<&[u8]> = vec![b"DEBUG", b"DIGEST-VALUE"];
        args.extend(keys.iter().map(Vec::as_slice));
        args.push(b"no-such-key");
        let digests = conn.call(&args).items();
        assert_eq!(digests.len(), keys.len() + 1);
        assert_eq!(digests[keys.len()], V::Simple(ZERO_DIGEST.into()));
        for (key, digest) in keys.iter().zip(digests) {
            let encoding = conn.call(&[b"OBJECT", b"ENCODING", key]);
            found.push((
                db,
                String::from_utf8_lossy(key).into_owned(),
                digest,
                encoding,
            ));
        }
    }
    conn.cmd(&["SELECT", "0"]);
    found
}
