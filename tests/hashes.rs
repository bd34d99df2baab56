//! Hash behaviour the differential stream does not reach well: RESP3 reply shapes,
//! encoding conversion at the configured limits, HRANDFIELD's sampling rules, and HSCAN
//! over a large table while it changes.

mod common;

use common::*;
use redis::Value;
use std::collections::HashSet;

fn strings(value: Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .map(|v| redis::from_redis_value(v).unwrap())
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Sends one command over a raw RESP3 connection and returns the raw reply bytes.
fn resp3_exchange(server: &TestServer, args: &[&str]) -> String {
    let mut stream = server.raw();
    let hello = raw_exchange(
        &mut stream,
        b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
        std::time::Duration::from_secs(2),
    );
    assert!(hello.starts_with(b"%"), "{hello:?}");
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    let reply = raw_exchange(
        &mut stream,
        request.as_bytes(),
        std::time::Duration::from_secs(2),
    );
    String::from_utf8_lossy(&reply).into_owned()
}

#[test]
fn resp3_replies_use_maps_and_pairs_as_redis_does() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    run(&mut conn, &["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(
        resp3_exchange(&server, &["HGETALL", "h"]),
        "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(resp3_exchange(&server, &["HGETALL", "missing"]), "%0\r\n");
    // WITHVALUES in RESP3: an array of [field, value] pairs.
    let reply = resp3_exchange(&server, &["HRANDFIELD", "h", "2", "WITHVALUES"]);
    assert!(reply.starts_with("*2\r\n*2\r\n$1\r\n"), "{reply:?}");
    assert_eq!(reply.matches("*2\r\n").count(), 3, "{reply:?}");
    assert_eq!(resp3_exchange(&server, &["HGET", "h", "zz"]), "_\r\n");
}

#[test]
fn the_encoding_follows_the_configured_limits() {
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &[
            "--hash-max-listpack-entries",
            "4",
            "--hash-max-listpack-value",
            "8",
        ],
    );
    let mut conn = server.connection();
    let encoding = |conn: &mut redis::Connection, key: &str| -> String {
        redis::from_redis_value(run(conn, &["OBJECT", "ENCODING", key])).unwrap()
    };
    run(
        &mut conn,
        &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"],
    );
    assert_eq!(encoding(&mut conn, "h"), "listpack");
    run(&mut conn, &["HSET", "h", "e", "5"]);
    assert_eq!(encoding(&mut conn, "h"), "hashtable");
    // Never back, even when small again.
    run(&mut conn, &["HDEL", "h", "a", "b", "c", "d"]);
    assert_eq!(encoding(&mut conn, "h"), "hashtable");
    run(&mut conn, &["HSET", "v", "f", "12345678"]);
    assert_eq!(encoding(&mut conn, "v"), "listpack");
    run(&mut conn, &["HSET", "v", "g", "123456789"]);
    assert_eq!(encoding(&mut conn, "v"), "hashtable");
    // A limit changed at run time applies to hashes built from now on.
    run(
        &mut conn,
        &["CONFIG", "SET", "hash-max-listpack-entries", "128"],
    );
    run(
        &mut conn,
        &[
            "HSET", "w", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5",
        ],
    );
    assert_eq!(encoding(&mut conn, "w"), "listpack");
}

#[test]
fn hrandfield_counts_follow_redis_rules() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    for (key, fields) in [("small", 5), ("big", 700)] {
        let mut args = vec!["HSET".to_string(), key.to_string()];
        for i in 0..fields {
            args.push(format!("f{i}"));
            args.push(format!("v{i}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut conn, &args);
        // Positive: distinct fields, at most the hash's size.
        for count in [1, 3, fields, fields + 10] {
            let picked = strings(run(&mut conn, &["HRANDFIELD", key, &count.to_string()]));
            assert_eq!(picked.len(), count.min(fields), "{key} {count}");
            let distinct: HashSet<&String> = picked.iter().collect();
            assert_eq!(distinct.len(), picked.len(), "{key} {count}: repeats");
        }
        // Negative: exactly |count|, repeats allowed, every one a field.
        let picked = strings(run(&mut conn, &["HRANDFIELD", key, "-50"]));
        assert_eq!(picked.len(), 50);
        assert!(picked.iter().all(|f| f.starts_with('f')));
        let with_values = strings(run(&mut conn, &["HRANDFIELD", key, "-4", "WITHVALUES"]));
        assert_eq!(with_values.len(), 8);
        for pair in with_values.chunks(2) {
            assert_eq!(pair[1], pair[0].replace('f', "v"));
        }
    }
    // Over many draws every field of a small hash shows up.
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let field: String =
            redis::from_redis_value(run(&mut conn, &["HRANDFIELD", "small"])).unwrap();
        seen.insert(field);
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
}

#[test]
fn hscan_of_a_large_table_returns_every_field_that_stays() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    for chunk in 0..20 {
        let mut args = vec!["HSET".to_string(), "big".to_string()];
        for i in 0..100 {
            args.push(format!("f{}", chunk * 100 + i));
            args.push("v".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&mut conn, &args);
    }
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut deleted = 0;
    let mut calls = 0;
    loop {
        let reply = run(&mut conn, &["HSCAN", "big", &cursor, "COUNT", "50"]);
        let Value::Array(parts) = reply else { panic!() };
        cursor = redis::from_redis_value(parts[0].clone()).unwrap();
        for pair in strings(parts[1].clone()).chunks(2) {
            seen.insert(pair[0].clone());
        }
        // Delete fields the scan has already returned, and add new ones.
        for _ in 0..10 {
            let victim = format!("f{deleted}");
            if seen.contains(&victim) {
                run(&mut conn, &["HDEL", "big", &victim]);
            }
            deleted += 1;
        }
        run(&mut conn, &["HSET", "big", &format!("new{calls}"), "v"]);
        calls += 1;
        if cursor == "0" {
            break;
        }
        assert!(calls < 1000, "the scan does not end");
    }
    let remaining = strings(run(&mut conn, &["HKEYS", "big"]));
    for field in remaining.iter().filter(|f| f.starts_with('f')) {
        assert!(
            seen.contains(field),
            "{field} was present throughout but not returned"
        );
    }
}
