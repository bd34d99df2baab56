//! DEBUG against a real redis-server 7.0, side by side: DIGEST and DIGEST-VALUE equal to
//! Redis's over a dataset of every type and encoding Tessera has (several databases,
//! expiries); PROTOCOL and HELP byte for byte in RESP2 and RESP3; the errors; OBJECT's
//! line; the `enable-debug-command` gate; RELOAD and LOADAOF keeping the dataset (digest
//! before = after, and after a restart) with the log on and off; SLEEP blocking the
//! server; SET-ACTIVE-EXPIRE.

mod common;

use common::raw_client::{Conn, V};
use common::side_by_side::{raw_connect as connect, raw_reply, split};
use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

const ZERO_DIGEST: &str = "0000000000000000000000000000000000000000";

/// Redis with DEBUG allowed and persistence off, in `dir`.
fn redis_with_debug(binary: &Path, dir: &Path) -> RedisOracle {
    RedisOracle::start_with(
        binary,
        dir,
        &["--appendonly", "no", "--enable-debug-command", "yes"],
    )
}

/// Tessera with DEBUG allowed, and `args`.
fn tessera_with_debug(dir: &Path, args: &[&str]) -> TestServer {
    let mut all = vec!["--enable-debug-command", "yes"];
    all.extend_from_slice(args);
    start_server(dir, &all)
}

/// The same dataset for both servers: every type, every encoding Tessera has (strings
/// `int` / `embstr` / `raw`, lists, listpack and table hashes, intset and table sets,
/// listpack and skiplist sorted sets with infinite and negative-zero scores), binary
/// keys and values, expiries, and a second database.
fn dataset() -> Vec<Vec<Vec<u8>>> {
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
fn dataset_keys() -> Vec<(usize, Vec<Vec<u8>>)> {
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
fn load(conn: &mut Conn, commands: &[Vec<Vec<u8>>]) {
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

fn digest(conn: &mut Conn) -> String {
    match conn.cmd(&["DEBUG", "DIGEST"]) {
        V::Simple(digest) => digest,
        other => panic!("DEBUG DIGEST: {other:?}"),
    }
}

/// DEBUG DIGEST-VALUE of every key of the dataset (and of one that does not exist), and
/// each key's OBJECT ENCODING, database by database.
fn value_digests(conn: &mut Conn) -> Vec<(usize, String, V, V)> {
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

fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// Each line's reply bytes from both servers, where they differ.
fn byte_differences(ours: &mut TcpStream, theirs: &mut TcpStream, lines: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for line in lines {
        let args = split(line);
        let tessera = raw_reply(ours, &args);
        let redis = raw_reply(theirs, &args);
        if tessera != redis {
            found.push(format!(
                "{line}\n  tessera: {:?}\n  redis:   {:?}",
                String::from_utf8_lossy(&tessera),
                String::from_utf8_lossy(&redis)
            ));
        }
    }
    found
}

#[test]
fn digest_and_digest_value_are_redis_s_for_every_type() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut theirs = Conn::new(redis.port);
    let mut ours = Conn::new(server.port);
    // An empty dataset is 40 zeros.
    assert_eq!(digest(&mut ours), ZERO_DIGEST);
    assert_eq!(digest(&mut theirs), ZERO_DIGEST);

    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    let tessera = value_digests(&mut ours);
    let redis_values = value_digests(&mut theirs);
    assert_eq!(tessera, redis_values, "DIGEST-VALUE and OBJECT ENCODING");
    let encodings: std::collections::BTreeSet<String> = tessera
        .iter()
        .map(|(_, _, _, encoding)| encoding.text())
        .collect();
    for encoding in [
        "int",
        "embstr",
        "raw",
        "quicklist",
        "listpack",
        "hashtable",
        "intset",
        "skiplist",
    ] {
        assert!(
            encodings.contains(encoding),
            "no {encoding} value: {encodings:?}"
        );
    }
    let before = digest(&mut ours);
    assert_ne!(before, ZERO_DIGEST);
    assert_eq!(before, digest(&mut theirs));

    // A change anywhere changes it, and in both alike: a list's order, an expiry (not
    // its time), a key in another database.
    for change in [
        "LSET list 0 changed",
        "PERSIST volatile",
        "EXPIRE volatile 50000",
        "SADD big-intset 600",
        "ZINCRBY zset 1 a",
        "HSET hash f1 other",
        "SELECT 3",
        "SET str other",
        "SELECT 0",
    ] {
        let args = split(change);
        let (a, b) = (ours.call(&args), theirs.call(&args));
        assert_eq!(a, b, "{change}");
        assert_eq!(digest(&mut ours), digest(&mut theirs), "after {change}");
    }
    assert_ne!(digest(&mut ours), before);
    // The expiry's time is not digested: only whether there is one.
    ours.cmd(&["EXPIRE", "volatile", "70000"]);
    theirs.cmd(&["EXPIRE", "volatile", "90000"]);
    assert_eq!(digest(&mut ours), digest(&mut theirs));
}

#[test]
fn protocol_and_help_are_redis_s_byte_for_byte() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut lines: Vec<String> = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "TRUE", "nosuch",
    ]
    .iter()
    .map(|kind| format!("DEBUG PROTOCOL {kind}"))
    .collect();
    lines.push("DEBUG HELP".into());
    lines.push("debug help".into());
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    for resp3 in [false, true] {
        let mut ours = connect(server.port);
        let mut theirs = connect(redis.port);
        if resp3 {
            raw_reply(&mut ours, &split("HELLO 3"));
            raw_reply(&mut theirs, &split("HELLO 3"));
        }
        let found = byte_differences(&mut ours, &mut theirs, &lines);
        assert!(
            found.is_empty(),
            "RESP{}:\n{}",
            if resp3 { 3 } else { 2 },
            found.join("\n")
        );
    }
}

#[test]
fn subcommands_and_their_errors_answer_as_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut ours = connect(server.port);
    let mut theirs = connect(redis.port);
    let long_name = format!("DEBUG {}", "y".repeat(200));
    let lines = [
        "DEBUG",
        "DEBUG nosuch",
        "DEBUG nosuch a b",
        &long_name,
        "DEBUG help extra",
        "DEBUG DIGEST extra",
        "DEBUG DIGEST-VALUE",
        "DEBUG OBJECT",
        "DEBUG OBJECT no-such-key",
        "DEBUG OBJECT a b",
        "DEBUG PROTOCOL",
        "DEBUG SLEEP",
        "DEBUG SLEEP 0",
        "DEBUG SLEEP 0.01",
        "DEBUG SLEEP abc",
        "DEBUG SLEEP -1",
        "DEBUG SLEEP 1e400",
        "DEBUG SET-ACTIVE-EXPIRE",
        "DEBUG SET-ACTIVE-EXPIRE 1",
        "DEBUG set-active-expire yes",
        "DEBUG SET-ACTIVE-EXPIRE 1",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 1kb",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 4294967296",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 5gb",
        "DEBUG QUICKLIST-PACKED-THRESHOLD -1",
        "DEBUG QUICKLIST-PACKED-THRESHOLD abc",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
        "DEBUG CHANGE-REPL-ID",
        "DEBUG CHANGE-REPL-ID x",
        "DEBUG JMAP",
        "DEBUG STRINGMATCH-LEN",
        "DEBUG RELOAD NOSUCH",
        "DEBUG RELOAD MERGE NOSUCH",
        "DEBUG ERROR",
        "DEBUG ERROR FOO",
        "DEBUG ERROR WRONGTYPE-ish",
        "DEBUG LOG",
        "DEBUG LOG hello",
        "DEBUG CLIENT-EVICTION",
        "DEBUG CLUSTERLINK KILL all id",
        "DEBUG CLUSTERLINK KILL all",
        "DEBUG CLUSTERLINK nosuch all id",
        "DEBUG REPLYBUFFER",
    ];
    let found = byte_differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // SET-DISABLE-DENY-SCRIPTS lets scripts run `noscript` commands (CLIENT GETNAME).
    for line in [
        "DEBUG SET-DISABLE-DENY-SCRIPTS 0",
        "EVAL return(redis.call('client','getname')) 0",
        "DEBUG SET-DISABLE-DENY-SCRIPTS 1",
        "EVAL return(redis.call('client','getname')) 0",
        "DEBUG SET-DISABLE-DENY-SCRIPTS 0",
        "EVAL return(redis.call('client','getname')) 0",
    ] {
        let (mine, redis) = (
            raw_reply(&mut ours, &split(line)),
            raw_reply(&mut theirs, &split(line)),
        );
        assert_eq!(
            String::from_utf8_lossy(&mine),
            String::from_utf8_lossy(&redis),
            "{line}"
        );
    }
    // An error DEBUG ERROR makes is written as is: newlines become spaces, and no error
    // statistic counts it, as in Redis.
    let error = raw_reply(&mut ours, &[b"DEBUG", b"ERROR", b"two\r\nlines"]);
    assert_eq!(
        error,
        raw_reply(&mut theirs, &[b"DEBUG", b"ERROR", b"two\r\nlines"])
    );
    assert_eq!(error, b"-two  lines\r\n");
    let errors = |stream: &mut TcpStream| {
        let info = raw_reply(stream, &split("INFO stats"));
        String::from_utf8_lossy(&info)
            .lines()
            .find(|line| line.starts_with("total_error_replies:"))
            .map(str::to_string)
    };
    assert_eq!(errors(&mut ours), errors(&mut theirs));
}

#[test]
fn populate_makes_redis_s_keys_and_refuses_a_count_memory_cannot_hold() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &["--appendfsync", "always"]);
    let mut ours = connect(server.port);
    let mut theirs = connect(redis.port);
    let long_prefix = format!("DEBUG POPULATE 2 {} 3", "p".repeat(200));
    let lines = [
        "SET key:1 kept",
        "DEBUG POPULATE 3",
        "DEBUG POPULATE 2 short 4",
        "DEBUG POPULATE 2 padded 12",
        "DEBUG POPULATE 2 plain 0",
        "DEBUG POPULATE 0",
        // Both names cut at 127 bytes, to one key.
        &long_prefix,
        "DEBUG POPULATE -1",
        "DEBUG POPULATE abc",
        "DEBUG POPULATE 1 x -3",
        "DEBUG POPULATE 1 x abc",
        "DEBUG POPULATE",
        "DEBUG POPULATE 1 x 2 extra",
        "DBSIZE",
        "GET key:0",
        "GET key:1",
        "GET short:1",
        "GET padded:1",
        "GET plain:0",
        "DEBUG DIGEST",
    ];
    let found = byte_differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert_eq!(
        raw_reply(&mut ours, &split("GET padded:1")),
        b"$12\r\nvalue:1\0\0\0\0\0\r\n"
    );
    assert_eq!(raw_reply(&mut ours, &split("DBSIZE")), b":10\r\n");

    // Redis 7.0.15 fills 2^32 keys until the kernel kills it; Tessera refuses a count
    // whose keys could not fit in physical memory, and stays up.
    for line in [
        "DEBUG POPULATE 4294967296",
        "DEBUG POPULATE 1000000 big 100000000",
    ] {
        assert_eq!(
            raw_reply(&mut ours, &split(line)),
            b"-ERR OOM in dictTryExpand\r\n",
            "{line}"
        );
    }
    assert_eq!(raw_reply(&mut ours, &split("DBSIZE")), b":10\r\n");

    // As in Redis, the keys are not logged: only the SET survives a crash.
    server.kill9();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(dbsize(&mut conn), 1);
    assert_eq!(
        run(&mut conn, &["GET", "key:1"]),
        redis::Value::BulkString(b"kept".to_vec())
    );
}

/// DEBUG OBJECT's fields, by name (`Value at` is `at`).
fn object_fields(line: &str) -> std::collections::BTreeMap<String, String> {
    let line = line.strip_prefix("Value at:").expect("Redis's line");
    let mut fields = std::collections::BTreeMap::new();
    let mut words = line.split(' ');
    fields.insert("at".to_string(), words.next().unwrap().to_string());
    for word in words {
        let (name, value) = word.split_once(':').expect("name:value");
        fields.insert(name.to_string(), value.to_string());
    }
    fields
}

#[test]
fn debug_object_is_redis_s_line_with_the_same_encoding() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    for key in &dataset_keys()[0].1 {
        let line = |conn: &mut Conn| match conn.call(&[b"DEBUG", b"OBJECT", key]) {
            V::Simple(line) => object_fields(&line),
            other => panic!("DEBUG OBJECT: {other:?}"),
        };
        let (tessera, redis) = (line(&mut ours), line(&mut theirs));
        let name = String::from_utf8_lossy(key);
        // The same fields in the same order as Redis's.
        let names = |fields: &std::collections::BTreeMap<String, String>| {
            fields.keys().cloned().collect::<Vec<_>>()
        };
        assert_eq!(names(&tessera), names(&redis), "{name}");
        assert!(tessera["at"].starts_with("0x"), "{name}: {tessera:?}");
        for field in ["encoding", "refcount", "ql_listpack_max", "ql_compressed"] {
            assert_eq!(tessera.get(field), redis.get(field), "{name}: {field}");
        }
        let encoding = ours.call(&[b"OBJECT", b"ENCODING", key]).text();
        assert_eq!(tessera["encoding"], encoding, "{name}");
        for field in ["serializedlength", "lru", "lru_seconds_idle"] {
            assert!(
                tessera[field].parse::<u64>().is_ok(),
                "{name}: {field} {tessera:?}"
            );
        }
    }
    // Values too short to compress are serialised alike (LZF's output may differ).
    for key in ["str", "int", "small-int", "negative"] {
        let length = |conn: &mut Conn| {
            object_fields(&conn.cmd(&["DEBUG", "OBJECT", key]).text())["serializedlength"].clone()
        };
        assert_eq!(length(&mut ours), length(&mut theirs), "{key}");
    }
}

#[test]
fn enable_debug_command_refuses_as_redis_does() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    // Both at the default: no.
    let redis = RedisOracle::start_with(&binary, redis_dir.path(), &["--appendonly", "no"]);
    let server = start_server(dir.path(), &[]);
    let mut ours = connect(server.port);
    let mut theirs = connect(redis.port);
    let refused = "-ERR DEBUG command not allowed. If the enable-debug-command option is set \
                   to \"local\", you can run it from a local connection, otherwise you need \
                   to set this option in the configuration file, and then restart the \
                   server.\r\n";
    assert_eq!(
        String::from_utf8_lossy(&raw_reply(&mut ours, &split("DEBUG DIGEST"))),
        refused
    );
    assert_eq!(
        String::from_utf8_lossy(&raw_reply(&mut theirs, &split("DEBUG DIGEST"))),
        refused
    );
    let lines = [
        "CONFIG GET enable-debug-command",
        "DEBUG HELP",
        "DEBUG",
        "DEBUG nosuch",
        "DEBUG SLEEP 10",
        "CONFIG SET enable-debug-command yes",
    ];
    let found = byte_differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // Inside MULTI the refusal fails the transaction.
    let (mut ours, mut theirs) = (Conn::new(server.port), Conn::new(redis.port));
    for line in [
        "MULTI",
        "DEBUG DIGEST",
        "SET a 1",
        "EXEC",
        "CONFIG SET requirepass secret",
    ] {
        assert_eq!(ours.cmd(&words(line)), theirs.cmd(&words(line)), "{line}");
    }
    // Before authentication the gate answers, not NOAUTH (the arity comes first).
    let (mut ours, mut theirs) = (Conn::new(server.port), Conn::new(redis.port));
    for line in ["DEBUG HELP", "GET a", "DEBUG"] {
        let reply = ours.cmd(&words(line));
        assert_eq!(reply, theirs.cmd(&words(line)), "{line}");
        assert!(matches!(reply, V::Error(_)), "{line}: {reply:?}");
    }
    // Every refusal is a rejected call, as Redis counts them.
    let rejected = |conn: &mut Conn| {
        assert_eq!(conn.cmd(&["AUTH", "secret"]), V::Simple("OK".into()));
        conn.cmd(&["INFO", "commandstats"])
            .text()
            .lines()
            .find(|line| line.starts_with("cmdstat_debug:"))
            .map(|line| {
                line.split(',')
                    .filter(|field| !field.starts_with("usec"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
    };
    let counted = rejected(&mut ours);
    assert_eq!(counted, rejected(&mut theirs));
    assert_eq!(
        counted.as_deref(),
        Some("cmdstat_debug:calls=0,rejected_calls=8,failed_calls=0")
    );

    // `local`: allowed from the loopback interface (and `yes` from anywhere).
    for setting in ["local", "yes"] {
        let (local_redis_dir, local_dir) = (temp_dir(), temp_dir());
        let redis = RedisOracle::start_with(
            &binary,
            local_redis_dir.path(),
            &["--appendonly", "no", "--enable-debug-command", setting],
        );
        let server = start_server(local_dir.path(), &["--enable-debug-command", setting]);
        let (mut ours, mut theirs) = (connect(server.port), connect(redis.port));
        let found = byte_differences(
            &mut ours,
            &mut theirs,
            &[
                "CONFIG GET enable-debug-command",
                "DEBUG DIGEST",
                "DEBUG SLEEP 0",
            ],
        );
        assert!(found.is_empty(), "{setting}: {}", found.join("\n"));
        assert_eq!(raw_reply(&mut ours, &split("DEBUG SLEEP 0")), b"+OK\r\n");
    }
}

/// The manifest's base files.
fn base_files(server: &TestServer) -> Vec<String> {
    manifest_files(&server.aof_dir())
        .into_iter()
        .filter(|name| name.contains(".base"))
        .collect()
}

#[test]
fn reload_and_loadaof_keep_the_dataset_with_the_log_on() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    let before = digest(&mut ours);
    assert_eq!(before, digest(&mut theirs));
    let encodings = value_digests(&mut ours);
    assert!(base_files(&server).is_empty(), "a new log has no base yet");

    // RELOAD: a new base in the log (a compaction), then the log loaded again.
    assert_eq!(ours.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    let bases = base_files(&server);
    assert!(!bases.is_empty(), "RELOAD wrote no base");
    assert_eq!(digest(&mut ours), before);
    // Values and their encodings came back through RDB as Redis's own RELOAD brings them.
    assert_eq!(theirs.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    assert_eq!(value_digests(&mut ours), encodings);
    assert_eq!(value_digests(&mut theirs), encodings);

    // NOSAVE loads the log as it stands; NOFLUSH without MERGE finds every key twice.
    assert_eq!(
        ours.cmd(&["DEBUG", "RELOAD", "NOSAVE"]),
        V::Simple("OK".into())
    );
    assert_eq!(base_files(&server), bases);
    assert_eq!(digest(&mut ours), before);
    assert_eq!(
        ours.cmd(&["DEBUG", "RELOAD", "NOFLUSH"]),
        V::Error("ERR Error trying to load the RDB dump".into())
    );
    assert_eq!(digest(&mut ours), before);
    assert_eq!(
        ours.cmd(&["debug", "reload", "noflush", "merge"]),
        V::Simple("OK".into())
    );
    assert_eq!(digest(&mut ours), before);

    // LOADAOF replays what was logged up to it, this very pipeline's write included.
    ours.send(&[b"SET", b"written-before", b"1"]);
    ours.send(&[b"DEBUG", b"LOADAOF"]);
    ours.send(&[b"GET", b"written-before"]);
    assert_eq!(ours.read(), V::Simple("OK".into()));
    assert_eq!(ours.read(), V::Simple("OK".into()));
    assert_eq!(ours.read(), V::Bulk(Some(b"1".to_vec())));
    theirs.cmd(&["SET", "written-before", "1"]);
    let after = digest(&mut ours);
    assert_eq!(after, digest(&mut theirs));
    assert_ne!(after, before);

    // The log holds exactly that dataset: a crash now loses nothing of it.
    server.kill9();
    let server = tessera_with_debug(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    assert_eq!(digest(&mut ours), after);
    assert_eq!(ours.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    assert_eq!(digest(&mut ours), after);
    assert_eq!(ours.cmd(&["DEBUG", "LOADAOF"]), V::Simple("OK".into()));
    assert_eq!(digest(&mut ours), after);
}

#[test]
fn reload_with_the_log_off_saves_and_loads_dbfilename_as_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &["--appendonly", "no"]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    both(&mut ours, &mut theirs, "SET a 1");
    // No dump.rdb yet: both fail. (Redis has emptied its dataset by then; Tessera keeps
    // it, a deliberate difference.)
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOSAVE"),
        V::Error("ERR Error trying to load the RDB dump".into())
    );
    assert_eq!(ours.cmd(&["GET", "a"]), V::Bulk(Some(b"1".to_vec())));
    theirs.cmd(&["SET", "a", "1"]);

    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD"),
        V::Simple("OK".into())
    );
    assert!(dir.path().join("dump.rdb").exists());
    let saved = digest(&mut ours);
    assert_eq!(saved, digest(&mut theirs));
    assert_eq!(value_digests(&mut ours), value_digests(&mut theirs));

    // NOSAVE: the file as it was saved, without what came since.
    both(&mut ours, &mut theirs, "SET b 2");
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOSAVE"),
        V::Simple("OK".into())
    );
    assert_eq!(both(&mut ours, &mut theirs, "EXISTS b"), V::Int(0));
    assert_eq!(digest(&mut ours), saved);
    // NOSAVE NOFLUSH MERGE: the file added to what is there.
    both(&mut ours, &mut theirs, "SET c 3");
    both(&mut ours, &mut theirs, "DEL str");
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOSAVE NOFLUSH MERGE"),
        V::Simple("OK".into())
    );
    assert_eq!(both(&mut ours, &mut theirs, "EXISTS c str"), V::Int(2));
    assert_eq!(digest(&mut ours), digest(&mut theirs));

    // Function libraries are part of the file: NOFLUSH without MERGE fails on them (and
    // on the keys), MERGE replaces them.
    let library = "#!lua name=lib\nredis.register_function('f', function() return 'hello' end)";
    for conn in [&mut ours, &mut theirs] {
        assert_eq!(
            conn.cmd(&["FUNCTION", "LOAD", library]),
            V::Bulk(Some(b"lib".to_vec()))
        );
    }
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD"),
        V::Simple("OK".into())
    );
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOFLUSH"),
        V::Error("ERR Error trying to load the RDB dump".into())
    );
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOFLUSH MERGE"),
        V::Simple("OK".into())
    );
    assert_eq!(
        both(&mut ours, &mut theirs, "FCALL f 0"),
        V::Bulk(Some(b"hello".to_vec()))
    );
    let saved = digest(&mut ours);
    assert_eq!(saved, digest(&mut theirs));

    // LOADAOF with the log off and no log directory (Redis exits): refused, nothing made.
    assert_eq!(
        ours.cmd(&["DEBUG", "LOADAOF"]),
        V::Error("ERR Error trying to load the append only file".into())
    );
    assert_eq!(digest(&mut ours), saved);
    assert!(!dir.path().join("appendonlydir").exists());

    // A restart loads the same file.
    server.kill9();
    let server = tessera_with_debug(dir.path(), &["--appendonly", "no"]);
    let mut ours = Conn::new(server.port);
    assert_eq!(digest(&mut ours), saved);
    assert_eq!(
        ours.cmd(&["FCALL", "f", "0"]),
        V::Bulk(Some(b"hello".to_vec()))
    );
}

/// `line` sent to both servers: the replies must be equal; returns Tessera's.
fn both(ours: &mut Conn, theirs: &mut Conn, line: &str) -> V {
    let (a, b) = (ours.cmd(&words(line)), theirs.cmd(&words(line)));
    assert_eq!(a, b, "{line}");
    a
}

/// INFO persistence's `aof_rewrite_in_progress` is 0 (polled for up to 30 s).
fn wait_for_rewrite(conn: &mut Conn) {
    wait_until("the rewrite's end", Duration::from_secs(30), || match conn
        .cmd(&["INFO", "persistence"])
    {
        V::Bulk(Some(info)) => String::from_utf8_lossy(&info).contains("aof_rewrite_in_progress:0"),
        _ => false,
    });
}

/// The kinds of the files a log directory's manifest lists (`b`, `i`, `h`), in order.
fn manifest_kinds(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest"))
        .expect("a manifest");
    text.lines()
        .filter_map(|line| line.split_whitespace().last().map(str::to_string))
        .collect()
}

#[test]
fn bgrewriteaof_with_the_log_off_writes_a_base_that_loadaof_loads_as_on_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &["--appendonly", "no"]);
    let mut theirs = Conn::new(redis.port);
    let mut ours = Conn::new(server.port);
    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    let saved = digest(&mut ours);
    assert_eq!(saved, digest(&mut theirs));
    assert_eq!(
        both(&mut ours, &mut theirs, "BGREWRITEAOF"),
        V::Simple("Background append only file rewriting started".into())
    );
    wait_for_rewrite(&mut ours);
    wait_for_rewrite(&mut theirs);
    // A base alone: no incremental file, the log still off.
    for dir in [dir.path(), redis_dir.path()] {
        let kinds = manifest_kinds(dir);
        assert!(
            !kinds.is_empty() && kinds.iter().all(|k| k == "b"),
            "{kinds:?}"
        );
    }
    assert_eq!(
        both(&mut ours, &mut theirs, "CONFIG GET appendonly"),
        V::Array(vec![
            V::Bulk(Some(b"appendonly".to_vec())),
            V::Bulk(Some(b"no".to_vec()))
        ])
    );
    // LOADAOF loads what the rewrite wrote, without what came since.
    both(&mut ours, &mut theirs, "SET after 1");
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG LOADAOF"),
        V::Simple("OK".into())
    );
    assert_eq!(both(&mut ours, &mut theirs, "EXISTS after"), V::Int(0));
    assert_eq!(digest(&mut ours), saved);
    assert_eq!(digest(&mut theirs), saved);
    // The base is a log: a server started on it with the log on loads it.
    server.kill9();
    let server = tessera_with_debug(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(digest(&mut Conn::new(server.port)), saved);
}

#[test]
fn reload_waits_for_a_running_background_save() {
    let dir = temp_dir();
    // About a second of BGSAVE: 500 keys at 2 ms each.
    let server = tessera_with_debug(dir.path(), &["--rdb-key-save-delay", "2000"]);
    let mut conn = Conn::new(server.port);
    let mut keys: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for i in 0..500 {
        keys.push(format!("key:{i}").into_bytes());
        keys.push(format!("value:{i}").into_bytes());
    }
    load(&mut conn, &[keys]);
    let before = digest(&mut conn);
    assert_eq!(
        conn.cmd(&["BGSAVE"]),
        V::Simple("Background saving started".into())
    );
    assert_eq!(conn.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    let mut info = server.connection();
    let fields = info_fields(
        &mut info,
        &[
            "rdb_bgsave_in_progress",
            "rdb_last_bgsave_status",
            "aof_rewrite_in_progress",
        ],
    );
    assert_eq!(
        fields,
        [Some("0".into()), Some("ok".into()), Some("0".into())]
    );
    assert!(dir.path().join("dump.rdb").exists());
    assert_eq!(digest(&mut conn), before);
}

#[test]
fn reload_is_refused_inside_multi_and_its_reply_follows_client_reply() {
    let dir = temp_dir();
    let server = tessera_with_debug(dir.path(), &[]);
    let mut conn = Conn::new(server.port);
    conn.cmd(&["SET", "a", "1"]);
    // A deliberate difference: Redis runs RELOAD inside EXEC; Tessera's loop does it
    // between commands only.
    assert_eq!(conn.cmd(&["MULTI"]), V::Simple("OK".into()));
    assert_eq!(conn.cmd(&["DEBUG", "RELOAD"]), V::Simple("QUEUED".into()));
    assert_eq!(
        conn.cmd(&["DEBUG", "DIGEST-VALUE", "a"]),
        V::Simple("QUEUED".into())
    );
    match conn.cmd(&["EXEC"]) {
        V::Array(replies) => {
            assert_eq!(
                replies[0],
                V::Error("ERR DEBUG RELOAD inside MULTI is not supported by Tessera".into())
            );
            assert!(matches!(replies[1], V::Array(_)));
        }
        other => panic!("EXEC: {other:?}"),
    }
    // CLIENT REPLY SKIP drops the reply the loop writes after the reload, as any other.
    let mut stream = connect(server.port);
    stream
        .write_all(
            &[
                encode_command(&[b"CLIENT", b"REPLY", b"SKIP"]),
                encode_command(&[b"DEBUG", b"RELOAD"]),
                encode_command(&[b"GET", b"a"]),
            ]
            .concat(),
        )
        .unwrap();
    let (reply, closed) = read_bytes(&mut stream, 7, Duration::from_secs(30));
    assert!(!closed);
    assert_eq!(reply, b"$1\r\n1\r\n");
}

#[test]
fn sleep_blocks_every_client() {
    let dir = temp_dir();
    let server = tessera_with_debug(dir.path(), &[]);
    // Fractional seconds, whole microseconds.
    let mut sleeper = Conn::new(server.port);
    let started = Instant::now();
    assert_eq!(
        sleeper.cmd(&["DEBUG", "SLEEP", "0.3"]),
        V::Simple("OK".into())
    );
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Another client's command that arrives during the sleep waits for its end: it sees
    // the sleeper's last command done (CLIENT LIST `cmd=debug`) and comes no sooner. If
    // the sleep had not started when it ran (a loaded machine), try again.
    for attempt in 0.. {
        assert!(attempt < 10, "the sleep never came first");
        let mut sleeper = Conn::new(server.port);
        sleeper.cmd(&["CLIENT", "SETNAME", "sleeper"]);
        let mut other = Conn::new(server.port);
        let started = Instant::now();
        sleeper.send(&[b"DEBUG", b"SLEEP", b"1"]);
        std::thread::sleep(Duration::from_millis(100));
        let list = other.cmd(&["CLIENT", "LIST"]).text();
        let answered = started.elapsed();
        assert_eq!(sleeper.read(), V::Simple("OK".into()));
        let line = list
            .lines()
            .find(|line| line.contains("name=sleeper"))
            .expect("the sleeper is listed")
            .to_string();
        if line.contains(" cmd=debug ") {
            assert!(
                answered >= Duration::from_secs(1),
                "answered after {answered:?}: {line}"
            );
            return;
        }
    }
}

#[test]
fn set_active_expire_0_leaves_expired_keys_to_lookups_as_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    for port in [server.port, redis.port] {
        let mut conn = Conn::new(port);
        assert_eq!(
            conn.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
            V::Simple("OK".into())
        );
        conn.cmd(&["SET", "short", "v", "PX", "50"]);
        // Many cron runs: the active cycle would have deleted it.
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(conn.cmd(&["DBSIZE"]), V::Int(1), "port {port}");
        assert_eq!(conn.cmd(&["GET", "short"]), V::Bulk(None));
        assert_eq!(conn.cmd(&["DBSIZE"]), V::Int(0), "port {port}");
        // Back on: expired keys go without being looked up.
        assert_eq!(
            conn.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]),
            V::Simple("OK".into())
        );
        conn.cmd(&["SET", "short", "v", "PX", "50"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while conn.cmd(&["DBSIZE"]) != V::Int(0) {
            assert!(Instant::now() < deadline, "port {port}: never expired");
            std::thread::sleep(Duration::from_millis(20));
        }
        // PAUSE-CRON stops the cron, its active expiry with it, until it is resumed.
        assert_eq!(
            conn.cmd(&["DEBUG", "PAUSE-CRON", "1"]),
            V::Simple("OK".into())
        );
        conn.cmd(&["SET", "short", "v", "PX", "50"]);
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(conn.cmd(&["DBSIZE"]), V::Int(1), "port {port}: paused");
        assert_eq!(
            conn.cmd(&["DEBUG", "PAUSE-CRON", "0"]),
            V::Simple("OK".into())
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while conn.cmd(&["DBSIZE"]) != V::Int(0) {
            assert!(
                Instant::now() < deadline,
                "port {port}: never expired after PAUSE-CRON 0"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
