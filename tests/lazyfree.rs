//! Lazy free (`src/lazyfree.rs`): which deletions free their values on the freeing thread,
//! counted in INFO as Redis counts them, side by side with redis-server 7.0.

mod common;

use common::*;
use std::time::Duration;

/// `lazyfreed_objects` once nothing is pending.
fn freed(conn: &mut redis::Connection) -> u64 {
    wait_until("the lazy frees", Duration::from_secs(20), || {
        info_field(conn, "lazyfree_pending_objects").as_deref() == Some("0")
    });
    info_field(conn, "lazyfreed_objects")
        .expect("INFO memory has lazyfreed_objects")
        .parse()
        .unwrap()
}

/// A set of `n` members (a hash table past 128 or any non-integer member).
fn big_set(conn: &mut redis::Connection, key: &str, n: usize) {
    let mut command = redis::cmd("SADD");
    command.arg(key);
    for i in 0..n {
        command.arg(format!("m{i}"));
    }
    let _: i64 = command.query(conn).unwrap();
}

/// The `lazyfreed_objects` count after each step, on one server.
fn counts(port: u16) -> Vec<u64> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut seen = Vec::new();
    run(&mut conn, &["CONFIG", "RESETSTAT"]);
    // A big set: UNLINK frees it off the loop; a small one, and DEL, on the spot.
    big_set(&mut conn, "big", 1000);
    run(&mut conn, &["UNLINK", "big"]);
    seen.push(freed(&mut conn));
    big_set(&mut conn, "small", 10);
    run(&mut conn, &["UNLINK", "small"]);
    seen.push(freed(&mut conn));
    big_set(&mut conn, "big", 1000);
    run(&mut conn, &["DEL", "big"]);
    seen.push(freed(&mut conn));
    // DEL as UNLINK under lazyfree-lazy-user-del.
    run(
        &mut conn,
        &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"],
    );
    big_set(&mut conn, "big", 1000);
    run(&mut conn, &["DEL", "big"]);
    seen.push(freed(&mut conn));
    run(
        &mut conn,
        &["CONFIG", "SET", "lazyfree-lazy-user-del", "no"],
    );
    // A list of many nodes, a stream of many nodes with a group.
    run(&mut conn, &["CONFIG", "SET", "list-max-listpack-size", "4"]);
    for i in 0..400 {
        run(&mut conn, &["RPUSH", "list", &i.to_string()]);
    }
    run(
        &mut conn,
        &["CONFIG", "SET", "stream-node-max-entries", "5"],
    );
    for i in 0..400 {
        run(&mut conn, &["XADD", "stream", "*", "f", &i.to_string()]);
    }
    run(&mut conn, &["XGROUP", "CREATE", "stream", "g", "0"]);
    run(&mut conn, &["UNLINK", "list", "stream"]);
    seen.push(freed(&mut conn));
    // Flushes: ASYNC counts the keys; SYNC, and no mode, free on the spot unless
    // lazyfree-lazy-user-flush.
    for i in 0..10 {
        run(&mut conn, &["SET", &format!("k{i}"), "v"]);
    }
    run(&mut conn, &["FLUSHALL", "ASYNC"]);
    seen.push(freed(&mut conn));
    for i in 0..10 {
        run(&mut conn, &["SET", &format!("k{i}"), "v"]);
    }
    run(&mut conn, &["FLUSHDB"]);
    seen.push(freed(&mut conn));
    run(
        &mut conn,
        &["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"],
    );
    for i in 0..7 {
        run(&mut conn, &["SET", &format!("k{i}"), "v"]);
    }
    run(&mut conn, &["FLUSHDB"]);
    seen.push(freed(&mut conn));
    run(&mut conn, &["SET", "k", "v"]);
    run(&mut conn, &["FLUSHALL", "SYNC"]);
    seen.push(freed(&mut conn));
    // CONFIG RESETSTAT zeroes the count.
    run(&mut conn, &["CONFIG", "RESETSTAT"]);
    seen.push(freed(&mut conn));
    seen
}

#[test]
fn lazy_frees_are_the_ones_redis_makes() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis_dir = temp_dir();
    let redis = RedisOracle::start_with(&redis_binary, redis_dir.path(), &["--appendonly", "no"]);
    let theirs = counts(redis.port);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let ours = counts(server.port);
    assert_eq!(ours, theirs);
    assert_eq!(ours, [1, 1, 1, 2, 4, 14, 14, 21, 21, 0]);
}
