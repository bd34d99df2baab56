//! Tessera's files are Redis's formats: Debian's redis-server 7.0 started on a copy of
//! Tessera's data directory loads the same dataset.

mod common;

use common::{RedisOracle, require_redis_or_skip, start_server, temp_dir};
use redis::Commands;

#[test]
fn redis_loads_a_tessera_log_directory() {
    let Some(redis_binary) = require_redis_or_skip("redis_loads_a_tessera_log_directory") else {
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
