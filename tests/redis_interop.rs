//! Tessera's files are Redis's formats: Debian's redis-server 7.0 started on a copy of
//! Tessera's data directory loads the same dataset.

mod common;

use common::{RedisOracle, WHOLE_TEST, require_redis_or_skip, start_server, temp_dir};
use redis::Commands;

#[test]
fn redis_loads_a_tessera_log_directory() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.connection();
    for i in 0..200 {
        let _: () = conn.set(format!("key:{i}"), format!("value:{i}")).unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg("ttl")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .query(&mut conn)
        .unwrap();
    let _: String = redis::cmd("INCRBYFLOAT")
        .arg("float")
        .arg("0.1")
        .query(&mut conn)
        .unwrap();
    let _: String = redis::cmd("INCRBYFLOAT")
        .arg("float")
        .arg("0.2")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(5).query(&mut conn).unwrap();
    let _: i64 = conn.incr("counter", 41).unwrap();
    let _: i64 = conn.incr("counter", 1).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(&mut conn).unwrap();
    let _: i64 = conn.del("key:7").unwrap();
    server.shutdown();

    let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
    let mut redis = oracle.connection();
    assert_eq!(common::dbsize(&mut redis), 201);
    assert_eq!(redis.get::<_, Option<String>>("key:7").unwrap(), None);
    assert_eq!(redis.get::<_, String>("key:199").unwrap(), "value:199");
    assert_eq!(redis.get::<_, String>("float").unwrap(), "0.3");
    let ttl: i64 = redis.ttl("ttl").unwrap();
    assert!(ttl > 900 && ttl <= 1000, "{ttl}");
    let _: () = redis::cmd("SELECT").arg(5).query(&mut redis).unwrap();
    assert_eq!(redis.get::<_, i64>("counter").unwrap(), 42);
}

/// The other direction: Tessera starts on a directory Redis 7.0 wrote — a base snapshot
/// (RDB, Redis's default preamble) from a rewrite, plus incremental RESP logs.
#[test]
fn tessera_loads_a_redis_log_directory_with_an_rdb_base() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    {
        let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
        let mut redis = oracle.connection();
        for i in 0..300 {
            let _: () = redis
                .set(format!("before:{i}"), format!("value:{i}"))
                .unwrap();
        }
        let _: () = redis::cmd("SET")
            .arg("long")
            .arg("x".repeat(5000))
            .query(&mut redis)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("ttl")
            .arg("v")
            .arg("EX")
            .arg(1000)
            .query(&mut redis)
            .unwrap();
        let _: () = redis::cmd("SELECT").arg(3).query(&mut redis).unwrap();
        let _: i64 = redis.incr("counter", 7).unwrap();
        let _: () = redis::cmd("SELECT").arg(0).query(&mut redis).unwrap();
        // Rewrite: everything so far moves into a new base RDB; later writes go to a new
        // incremental file.
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut redis).unwrap();
        loop {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query(&mut redis)
                .unwrap();
            if info.contains("aof_rewrite_in_progress:0")
                && info.contains("aof_rewrite_scheduled:0")
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _: i64 = redis.del("before:5").unwrap();
        let _: () = redis.set("after", "rewrite").unwrap();
        let _: () = redis::cmd("SHUTDOWN")
            .arg("NOSAVE")
            .query(&mut redis)
            .unwrap_or(());
    }
    let manifest =
        std::fs::read_to_string(dir.path().join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert!(
        manifest.contains("type b") && manifest.contains(".base.rdb"),
        "{manifest}"
    );

    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(common::dbsize(&mut conn), 300 - 1 + 3);
    assert_eq!(conn.get::<_, Option<String>>("before:5").unwrap(), None);
    assert_eq!(conn.get::<_, String>("before:299").unwrap(), "value:299");
    assert_eq!(conn.get::<_, String>("long").unwrap(), "x".repeat(5000));
    assert_eq!(conn.get::<_, String>("after").unwrap(), "rewrite");
    let ttl: i64 = conn.ttl("ttl").unwrap();
    assert!(ttl > 900 && ttl <= 1000, "{ttl}");
    let _: () = redis::cmd("SELECT").arg(3).query(&mut conn).unwrap();
    assert_eq!(conn.get::<_, i64>("counter").unwrap(), 7);
    assert!(
        server.log().contains("appendonly.aof.1.base.rdb") || server.log().contains(".base.rdb"),
        "{}",
        server.log()
    );
}
