//! Every value type through every persistence path: the log (kill -9, replay), a
//! compaction (the split RDB base, both compact and table encodings), Redis 7.0 loading
//! Tessera's directory, and Tessera loading a directory Redis 7.0 wrote.
//!
//! Datasets are compared as a canonical text per key (type, TTL presence and contents
//! in an order-independent form), read back with real clients from both servers.

mod common;

use common::dataset::{dataset, populate, text};
use common::*;

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
