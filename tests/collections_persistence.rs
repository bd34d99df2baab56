//! Every value type through every persistence path: the log (kill -9, replay), a
//! compaction (the split RDB base, both compact and table encodings), Redis 7.0 loading
//! Tessera's directory, and Tessera loading a directory Redis 7.0 wrote.
//!
//! Datasets are compared as a canonical text per key (type, TTL presence and contents
//! in an order-independent form), read back with real clients from both servers.

mod common;

use common::*;
use redis::Value;
use std::collections::BTreeMap;

const DATABASES: i64 = 3;

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn items(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().map(text).collect(),
        Value::Map(pairs) => pairs.iter().flat_map(|(k, v)| [text(k), text(v)]).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Every key of the first databases as `type: contents`, contents order-independent
/// where the type is unordered.
fn dataset(conn: &mut redis::Connection) -> BTreeMap<(i64, String), String> {
    let mut all = BTreeMap::new();
    for db in 0..DATABASES {
        run(conn, &["SELECT", &db.to_string()]);
        let keys = items(run(conn, &["KEYS", "*"]));
        for key in keys {
            let kind = text(&run(conn, &["TYPE", &key]));
            let ttl = match run(conn, &["PTTL", &key]) {
                Value::Int(-1) => "no ttl",
                _ => "ttl",
            };
            let contents = match kind.as_str() {
                "string" => text(&run(conn, &["GET", &key])),
                "hash" => {
                    let flat = items(run(conn, &["HGETALL", &key]));
                    let mut pairs: Vec<String> = flat
                        .chunks(2)
                        .map(|p| format!("{}={}", p[0], p[1]))
                        .collect();
                    pairs.sort();
                    pairs.join(",")
                }
                "list" => items(run(conn, &["LRANGE", &key, "0", "-1"])).join(","),
                "set" => {
                    let mut members = items(run(conn, &["SMEMBERS", &key]));
                    members.sort();
                    members.join(",")
                }
                "zset" => items(run(conn, &["ZRANGE", &key, "0", "-1", "WITHSCORES"])).join(","),
                other => panic!("unexpected type {other}"),
            };
            all.insert((db, key), format!("{kind} ({ttl}): {contents}"));
        }
    }
    run(conn, &["SELECT", "0"]);
    all
}

/// Small (compact encoding) and big (table encoding) values of every type Tessera has,
/// with an expiry on some, over a few databases. `round` varies the contents.
fn populate(conn: &mut redis::Connection, round: usize) {
    for db in 0..DATABASES {
        run(conn, &["SELECT", &db.to_string()]);
        for i in 0..20 {
            let key = format!("small-hash:{round}:{i}");
            run(
                conn,
                &["HSET", &key, "a", "1", "b", "-70000", "c", &format!("v{i}")],
            );
        }
        // Past 512 fields: a table.
        let big = format!("big-hash:{round}");
        for chunk in 0..6 {
            let mut args = vec!["HSET".to_string(), big.clone()];
            for f in 0..100 {
                args.push(format!("field:{chunk}:{f}"));
                args.push(format!("{}", chunk * 1000 + f));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(conn, &args);
        }
        // A value past 64 bytes: a table too, with few fields.
        let long = format!("long-hash:{round}");
        run(conn, &["HSET", &long, "x", &"y".repeat(100)]);
        run(conn, &["HINCRBYFLOAT", &long, "f", "2.5"]);
        run(
            conn,
            &["EXPIRE", &format!("small-hash:{round}:3"), "100000"],
        );
        run(conn, &["HDEL", &format!("small-hash:{round}:4"), "a"]);
        run(conn, &["SET", &format!("string:{round}"), "plain"]);
        // Sets: an intset, a table from a string member, a table past 512 integers.
        for i in 0..10 {
            let key = format!("int-set:{round}:{i}");
            run(conn, &["SADD", &key, "1", "-20", "70000", &i.to_string()]);
        }
        run(conn, &["SADD", &format!("str-set:{round}"), "a", "b", "1"]);
        let numbers: Vec<String> = (0..600).map(|n| (n * 7).to_string()).collect();
        let mut args = vec!["SADD".to_string(), format!("big-set:{round}")];
        args.extend(numbers);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(conn, &args);
        run(conn, &["SREM", &format!("int-set:{round}:2"), "1"]);
        run(conn, &["SPOP", &format!("int-set:{round}:5")]);
        run(
            conn,
            &[
                "SINTERSTORE",
                &format!("inter:{round}"),
                &format!("int-set:{round}:1"),
                &format!("int-set:{round}:3"),
            ],
        );
        run(
            conn,
            &[
                "SMOVE",
                &format!("str-set:{round}"),
                &format!("int-set:{round}:7"),
                "a",
            ],
        );
        populate_lists_and_zsets(conn, round);
    }
    run(conn, &["SELECT", "0"]);
}

fn populate_lists_and_zsets(conn: &mut redis::Connection, round: usize) {
    // Lists: small, and long enough to span several quicklist nodes.
    for i in 0..10 {
        let key = format!("list:{round}:{i}");
        run(
            conn,
            &["RPUSH", &key, "a", "1", "-70000", &"z".repeat(i * 10)],
        );
    }
    let big = format!("big-list:{round}");
    for chunk in 0..10 {
        let mut args = vec!["RPUSH".to_string(), big.clone()];
        args.extend((0..100).map(|n| format!("item:{chunk}:{n}:{}", "p".repeat(n % 50))));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(conn, &args);
    }
    run(conn, &["LPOP", &format!("list:{round}:1")]);
    run(conn, &["LREM", &big, "0", "item:3:7:ppppppp"]);
    run(
        conn,
        &["LINSERT", &big, "BEFORE", "item:5:5:ppppp", "inserted"],
    );
    // Sorted sets: listpack, past 128 members, a long member; fractional and infinite
    // scores.
    for i in 0..10 {
        let key = format!("zset:{round}:{i}");
        let d = i.to_string();
        run(
            conn,
            &["ZADD", &key, "1", "a", "2.5", "b", "-inf", "c", &d, "d"],
        );
    }
    let bigz = format!("big-zset:{round}");
    let mut args = vec!["ZADD".to_string(), bigz.clone()];
    for n in 0..200 {
        args.push(format!("{}", n as f64 / 3.0));
        args.push(format!("member:{n}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(conn, &args);
    run(
        conn,
        &[
            "ZADD",
            &format!("long-zset:{round}"),
            "0.1",
            &"m".repeat(100),
        ],
    );
    run(conn, &["ZINCRBY", &bigz, "0.5", "member:3"]);
    run(conn, &["ZPOPMIN", &format!("zset:{round}:2")]);
    let small = format!("zset:{round}:1");
    run(
        conn,
        &[
            "ZUNIONSTORE",
            &format!("zunion:{round}"),
            "2",
            &small,
            &bigz,
        ],
    );
}

#[test]
fn every_type_survives_kill9_and_compaction() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.connection();
    populate(&mut conn, 0);
    run(&mut conn, &["BGREWRITEAOF"]);
    wait_for_background_jobs(&mut conn);
    // After the compaction: more writes, in the incremental log only.
    populate(&mut conn, 1);
    run(&mut conn, &["HDEL", "big-hash:0", "field:0:0", "field:0:1"]);
    let expected = dataset(&mut conn);
    assert!(expected.len() > 100);
    server.kill9();

    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(dataset(&mut conn), expected);
    assert_eq!(
        text(&run(&mut conn, &["OBJECT", "ENCODING", "small-hash:0:1"])),
        "listpack"
    );
    for (key, encoding) in [
        ("big-hash:0", "hashtable"),
        ("int-set:0:1", "intset"),
        ("str-set:0", "hashtable"),
        ("big-set:0", "hashtable"),
        ("int-set:0:7", "hashtable"),
        ("list:0:1", "quicklist"),
        ("big-list:0", "quicklist"),
        ("zset:0:1", "listpack"),
        ("big-zset:0", "skiplist"),
        ("long-zset:0", "skiplist"),
    ] {
        assert_eq!(
            text(&run(&mut conn, &["OBJECT", "ENCODING", key])),
            encoding,
            "{key}"
        );
    }
}

#[test]
fn redis_loads_every_type_from_a_tessera_directory() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    // One base part: Redis 7.0's manifest holds a single base file.
    let mut server = start_server(
        dir.path(),
        &["--appendfsync", "always", "--aof-rewrite-threads", "1"],
    );
    let mut conn = server.connection();
    populate(&mut conn, 0);
    run(&mut conn, &["BGREWRITEAOF"]);
    wait_for_background_jobs(&mut conn);
    populate(&mut conn, 1);
    let expected = dataset(&mut conn);
    server.shutdown();
    // Redis checks the base files with its own checker first.
    for entry in std::fs::read_dir(dir.path().join("appendonlydir")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rdb") {
            assert_redis_check_rdb_passes(&redis_binary, &path);
        }
    }
    let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
    let mut redis = oracle.connection();
    assert_eq!(dataset(&mut redis), expected);
}

#[test]
fn tessera_loads_every_type_from_a_redis_directory() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let expected = {
        let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
        let mut redis = oracle.connection();
        populate(&mut redis, 0);
        run(&mut redis, &["BGREWRITEAOF"]);
        wait_for_background_jobs(&mut redis);
        populate(&mut redis, 1);
        let expected = dataset(&mut redis);
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut redis);
        expected
    };
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(dataset(&mut conn), expected);
}
