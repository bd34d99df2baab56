//! SAVE and dump.rdb: a synchronous snapshot that redis-check-rdb accepts and Redis 7.0
//! loads, and that Tessera loads at start-up when the append-only log is off.

mod common;

use common::{RedisOracle, WHOLE_TEST, require_redis_or_skip, start_server, temp_dir};
use redis::Commands;

fn populate(conn: &mut redis::Connection) {
    for i in 0..500 {
        let _: () = conn.set(format!("key:{i}"), format!("value:{i}")).unwrap();
    }
    let _: () = conn.set("int", 12345).unwrap();
    let _: () = conn.set("long", "abc".repeat(2000)).unwrap();
    let _: () = redis::cmd("SET")
        .arg("ttl")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .query(conn)
        .unwrap();
    let _: () = redis::cmd("SELECT").arg(9).query(conn).unwrap();
    let _: () = conn.set("in-db-9", "yes").unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
}

fn check(conn: &mut redis::Connection) {
    assert_eq!(common::dbsize(conn), 503);
    assert_eq!(conn.get::<_, String>("key:499").unwrap(), "value:499");
    assert_eq!(conn.get::<_, i64>("int").unwrap(), 12345);
    assert_eq!(conn.get::<_, String>("long").unwrap(), "abc".repeat(2000));
    let ttl: i64 = conn.ttl("ttl").unwrap();
    assert!(ttl > 900 && ttl <= 1000, "{ttl}");
    let _: () = redis::cmd("SELECT").arg(9).query(conn).unwrap();
    assert_eq!(conn.get::<_, String>("in-db-9").unwrap(), "yes");
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
}

#[test]
fn save_writes_a_dump_that_tessera_loads_with_the_log_off() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut conn = server.connection();
    populate(&mut conn);
    let before: i64 = redis::cmd("LASTSAVE").query(&mut conn).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
    let after: i64 = redis::cmd("LASTSAVE").query(&mut conn).unwrap();
    assert!(after > before, "LASTSAVE moves: {before} -> {after}");
    let info: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut conn)
        .unwrap();
    assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    server.kill9();
    assert!(dir.path().join("dump.rdb").exists());
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let server = start_server(dir.path(), &["--appendonly", "no"]);
    check(&mut server.connection());
}

#[test]
fn shutdown_save_writes_the_dump() {
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &["--appendonly", "no", "--dbfilename", "snap.rdb"],
    );
    populate(&mut server.connection());
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
        .arg("SAVE")
        .query(&mut server.connection());
    server.shutdown();
    assert!(dir.path().join("snap.rdb").exists());
    let server = start_server(
        dir.path(),
        &["--appendonly", "no", "--dbfilename", "snap.rdb"],
    );
    check(&mut server.connection());
}

#[test]
fn redis_checks_and_loads_a_tessera_dump() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut conn = server.connection();
    populate(&mut conn);
    let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
    server.shutdown();
    common::assert_redis_check_rdb_passes(&redis_binary, &dir.path().join("dump.rdb"));

    // Only the dump: Redis must not see Tessera's (empty) log directory or test logs.
    let redis_dir = temp_dir();
    std::fs::copy(
        dir.path().join("dump.rdb"),
        redis_dir.path().join("dump.rdb"),
    )
    .unwrap();
    let oracle = RedisOracle::start_with(&redis_binary, redis_dir.path(), &["--appendonly", "no"]);
    check(&mut oracle.connection());
}

#[test]
fn rdbcompression_no_writes_strings_as_they_are_and_the_preamble_directive_is_accepted() {
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &["--appendonly", "no", "--aof-use-rdb-preamble", "yes"],
    );
    let mut conn = server.connection();
    populate(&mut conn);
    let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
    let compressed = std::fs::metadata(dir.path().join("dump.rdb"))
        .unwrap()
        .len();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdbcompression")
        .arg("no")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
    let plain = std::fs::metadata(dir.path().join("dump.rdb"))
        .unwrap()
        .len();
    // The 6000-byte "abcabc..." value alone compresses to a few dozen bytes.
    assert!(plain > compressed + 5000, "{compressed} -> {plain}");
    // `no` is accepted too, as Redis's (the log's base then is commands: redis_interop.rs).
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-use-rdb-preamble")
        .arg("no")
        .query(&mut conn)
        .unwrap();
    server.shutdown();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    check(&mut server.connection());
}

/// FLUSHALL with the log off and `save` points configured writes `dbfilename` at once,
/// as Redis's does: a crash right after it does not bring the flushed keys back, not
/// from the last SAVE nor from a BGSAVE that was running (it is stopped, its temp file
/// removed). Inside MULTI the save follows within a cron tick.
#[test]
fn flushall_saves_the_empty_dataset_when_the_snapshot_is_the_persistence() {
    for case in ["after SAVE", "during BGSAVE", "in MULTI"] {
        let dir = temp_dir();
        let args = [
            "--appendonly",
            "no",
            "--save",
            "3600 1",
            "--rdb-key-save-delay",
            "0",
        ];
        let mut server = start_server(dir.path(), &args);
        let mut conn = server.connection();
        populate(&mut conn);
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        match case {
            "during BGSAVE" => {
                let _: () = redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("rdb-key-save-delay")
                    .arg("2000")
                    .query(&mut conn)
                    .unwrap();
                let _: String = redis::cmd("BGSAVE").query(&mut conn).unwrap();
                let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
                // Left running, the job would put the keys back about a second later.
                common::wait_for_background_jobs(&mut conn);
                // Stopped: nothing runs any more, no temp file is left.
                let info: String = redis::cmd("INFO")
                    .arg("persistence")
                    .query(&mut conn)
                    .unwrap();
                assert!(info.contains("rdb_bgsave_in_progress:0"), "{info}");
                let temp: Vec<String> = common::dirs::file_names(dir.path())
                    .into_iter()
                    .filter(|name| name.starts_with("temp-"))
                    .collect();
                assert!(temp.is_empty(), "{temp:?}");
            }
            "in MULTI" => {
                let _: Vec<String> = redis::pipe()
                    .atomic()
                    .cmd("FLUSHALL")
                    .query(&mut conn)
                    .unwrap();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    let info: String = redis::cmd("INFO")
                        .arg("persistence")
                        .query(&mut conn)
                        .unwrap();
                    if info.contains("rdb_changes_since_last_save:0") {
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "{info}");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            _ => {
                let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
            }
        }
        server.kill9();
        let restarted = start_server(dir.path(), &args);
        assert_eq!(common::dbsize(&mut restarted.connection()), 0, "{case}");
    }
}

/// `stop-writes-on-bgsave-error` (default yes), side by side with Redis: once a BGSAVE
/// failed (`dbfilename` is a directory, so its rename fails) with `save` points
/// configured, writes, EXEC with writes, scripts that write and FUNCTION LOAD get
/// Redis's MISCONF replies while reads are answered; `no` lets writes in; a BGSAVE that
/// succeeds ends it. Every reply is compared with Redis's.
#[test]
fn a_failed_bgsave_stops_writes_as_redis_does() {
    use common::raw_client::{Conn, V};
    use std::time::{Duration, Instant};
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let args = ["--appendonly", "no", "--save", "3600 1"];
    let tessera_dir = temp_dir();
    let redis_dir = temp_dir();
    let tessera = start_server(tessera_dir.path(), &args);
    let redis = RedisOracle::start_with(&binary, redis_dir.path(), &args);
    for dir in [&tessera_dir, &redis_dir] {
        std::fs::create_dir(dir.path().join("dump.rdb")).unwrap();
    }
    let mut conns = [Conn::new(tessera.port), Conn::new(redis.port)];
    let both = |conns: &mut [Conn; 2], words: &[&str]| -> V {
        let ours = conns[0].cmd(words);
        let theirs = conns[1].cmd(words);
        assert_eq!(ours, theirs, "{words:?}");
        ours
    };
    let wait_bgsave_done = |conns: &mut [Conn; 2]| {
        for conn in conns.iter_mut() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while conn
                .cmd(&["INFO", "persistence"])
                .text()
                .contains("rdb_bgsave_in_progress:1")
            {
                assert!(Instant::now() < deadline, "BGSAVE did not end");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    both(&mut conns, &["SET", "before", "1"]);
    both(&mut conns, &["BGSAVE"]);
    wait_bgsave_done(&mut conns);
    for conn in conns.iter_mut() {
        let info = conn.cmd(&["INFO", "persistence"]).text();
        assert!(info.contains("rdb_last_bgsave_status:err"), "{info}");
    }
    let refused = both(&mut conns, &["SET", "after", "1"]);
    assert!(
        matches!(&refused, V::Error(e) if e.starts_with("MISCONF")),
        "{refused:?}"
    );
    both(&mut conns, &["GET", "before"]);
    both(&mut conns, &["MULTI"]);
    both(&mut conns, &["SET", "after", "1"]);
    both(&mut conns, &["EXEC"]);
    for script in [
        "#!lua\nreturn redis.call('SET', 'after', '1')",
        "return redis.call('SET', 'after', '1')",
        "return redis.pcall('SET', 'after', '1')",
    ] {
        both(&mut conns, &["EVAL", script, "0"]);
    }
    both(
        &mut conns,
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('GET', 'before')",
            "0",
        ],
    );
    both(
        &mut conns,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        ],
    );
    both(
        &mut conns,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"],
    );
    both(
        &mut conns,
        &["CONFIG", "GET", "stop-writes-on-bgsave-error"],
    );
    both(&mut conns, &["SET", "after", "1"]);
    both(
        &mut conns,
        &["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"],
    );
    both(&mut conns, &["SET", "after", "2"]);
    // The disk takes the snapshot again: a BGSAVE that succeeds lets writes in.
    for dir in [&tessera_dir, &redis_dir] {
        std::fs::remove_dir(dir.path().join("dump.rdb")).unwrap();
    }
    both(&mut conns, &["BGSAVE"]);
    wait_bgsave_done(&mut conns);
    both(&mut conns, &["SET", "after", "3"]);
    both(&mut conns, &["GET", "after"]);
}
