//! A dataset with every value type Tessera has, in compact and table encodings (streams
//! of one node and of many, with deleted entries, trimmed, emptied), over a
//! few databases (`populate`), and its canonical text per key (`dataset`): type, TTL
//! presence and contents in an order-independent form, read back with a real client
//! from either server.

use super::run;
use redis::Value;
use std::collections::BTreeMap;

pub const DATABASES: i64 = 3;

pub fn text(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

pub fn items(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().map(text).collect(),
        Value::Map(pairs) => pairs.iter().flat_map(|(k, v)| [text(k), text(v)]).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Every key of the first databases as `type: contents`, contents order-independent
/// where the type is unordered.
pub fn dataset(conn: &mut redis::Connection) -> BTreeMap<(i64, String), String> {
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
                "stream" => super::stream_dump::state(conn, &key),
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
pub fn populate(conn: &mut redis::Connection, round: usize) {
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
        populate_streams(conn, round);
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

/// Streams: a small one, one of many nodes (900 entries, fields shared or not) with
/// entries deleted and trimmed both ways, one whose last ID, entries added and max
/// deleted ID XSETID set, and one emptied by XDEL (a stream may be empty). IDs are
/// explicit, so both servers hold the same.
fn populate_streams(conn: &mut redis::Connection, round: usize) {
    let small = format!("stream:{round}");
    run(conn, &["XADD", &small, "1-1", "a", "1", "b", "-70000"]);
    run(conn, &["XADD", &small, "1-2", "a", "x", "b", ""]);
    run(conn, &["XADD", &small, "5-*", "other", &"z".repeat(100)]);
    let big = format!("big-stream:{round}");
    let mut pipe = redis::pipe();
    for i in 0..900u64 {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        let value = format!("{i}:{}", "v".repeat((i % 40) as usize));
        if i % 7 == 0 {
            pipe.cmd("XADD")
                .arg(&big)
                .arg(&id)
                .arg("odd")
                .arg(&value)
                .ignore();
        } else {
            pipe.cmd("XADD")
                .arg(&big)
                .arg(&id)
                .arg("field")
                .arg(&value)
                .arg("n")
                .arg(i)
                .ignore();
        }
    }
    let _: () = pipe.query(conn).unwrap();
    run(
        conn,
        &["XDEL", &big, "1000-0", "1010-1", "1100-2", "1250-0"],
    );
    run(conn, &["XTRIM", &big, "MAXLEN", "~", "850"]);
    run(conn, &["XTRIM", &big, "MINID", "1030-1"]);
    run(
        conn,
        &["XADD", &big, "MAXLEN", "880", "2000-0", "late", "1"],
    );
    let set = format!("set-id-stream:{round}");
    run(conn, &["XADD", &set, "3-0", "f", "v"]);
    run(conn, &["XADD", &set, "4-0", "f", "w"]);
    run(conn, &["XDEL", &set, "4-0"]);
    run(
        conn,
        &[
            "XSETID",
            &set,
            "9-9",
            "ENTRIESADDED",
            "40",
            "MAXDELETEDID",
            "8-0",
        ],
    );
    let emptied = format!("empty-stream:{round}");
    run(conn, &["XADD", &emptied, "7-7", "f", "v"]);
    run(conn, &["XDEL", &emptied, "7-7"]);
}
