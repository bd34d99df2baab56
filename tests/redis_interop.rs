//! Tessera's files are Redis's formats: Debian's redis-server 7.0 started on a copy of
//! Tessera's data directory loads the same dataset.

mod common;

use common::replication::digest;
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

/// Every type (streams with groups, pending entries, deleted entries and an empty one),
/// TTLs, several databases and a function library: the dataset `populate` and
/// `populate_more` build.
fn populate_every_type(conn: &mut redis::Connection) {
    common::dataset::populate(conn, 0);
    common::replication::populate_more(conn);
}

fn function_libraries(conn: &mut redis::Connection) -> Vec<String> {
    let listed = common::dataset::items(common::run(conn, &["FUNCTION", "LIST"]));
    listed
        .into_iter()
        .filter(|s| s.contains("replib"))
        .collect()
}

/// `aof-use-rdb-preamble no`: the base is one file of commands, as Redis writes it. Redis
/// 7.0 loads Tessera's and Tessera loads Redis's, each with the incremental file after it.
#[test]
fn resp_form_bases_load_both_ways() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let preamble_no = [
        "--aof-use-rdb-preamble",
        "no",
        "--enable-debug-command",
        "yes",
    ];
    // Tessera writes, Redis and Tessera load.
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &preamble_no);
    let mut conn = server.connection();
    populate_every_type(&mut conn);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    common::wait_for_background_jobs(&mut conn);
    common::run(&mut conn, &["SET", "after", "the rewrite"]);
    common::run(&mut conn, &["XADD", "stream-after", "*", "f", "v"]);
    let written = digest(&mut conn);
    let dataset = common::dataset::dataset(&mut conn);
    server.shutdown();
    let files = common::manifest_files(&dir.path().join("appendonlydir"));
    let base: Vec<&String> = files.iter().filter(|f| f.contains(".base.")).collect();
    assert_eq!(base.len(), 1, "{files:?}");
    assert!(base[0].ends_with(".base.aof"), "{files:?}");
    let text = std::fs::read(dir.path().join("appendonlydir").join(base[0])).unwrap();
    assert!(
        text.starts_with(b"*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n"),
        "{:?}",
        &text[..40]
    );
    {
        let copy = temp_dir();
        copy_dir(
            &dir.path().join("appendonlydir"),
            &copy.path().join("appendonlydir"),
        );
        let oracle = RedisOracle::start_with(
            &redis_binary,
            copy.path(),
            &["--appendonly", "yes", "--enable-debug-command", "yes"],
        );
        let mut redis = oracle.connection();
        assert_eq!(
            digest(&mut redis),
            written,
            "Redis loading Tessera's RESP base"
        );
        assert_eq!(common::dataset::dataset(&mut redis), dataset);
        assert_eq!(function_libraries(&mut redis).len(), 1);
    }
    let server = start_server(dir.path(), &preamble_no);
    let mut conn = server.connection();
    assert_eq!(digest(&mut conn), written, "Tessera loading its RESP base");
    assert_eq!(function_libraries(&mut conn).len(), 1);
    drop(server);

    // Redis writes, Tessera loads.
    let dir = temp_dir();
    let written = {
        let oracle = RedisOracle::start_with(
            &redis_binary,
            dir.path(),
            &[
                "--appendonly",
                "yes",
                "--enable-debug-command",
                "yes",
                "--aof-use-rdb-preamble",
                "no",
            ],
        );
        let mut redis = oracle.connection();
        populate_every_type(&mut redis);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut redis).unwrap();
        common::wait_for_background_jobs(&mut redis);
        common::run(&mut redis, &["SET", "after", "the rewrite"]);
        let written = digest(&mut redis);
        let _: () = redis::cmd("SHUTDOWN")
            .arg("NOSAVE")
            .query(&mut redis)
            .unwrap_or(());
        written
    };
    let files = common::manifest_files(&dir.path().join("appendonlydir"));
    assert!(files.iter().any(|f| f.ends_with(".base.aof")), "{files:?}");
    let server = start_server(dir.path(), &["--enable-debug-command", "yes"]);
    let mut conn = server.connection();
    assert_eq!(
        digest(&mut conn),
        written,
        "Tessera loading Redis's RESP base"
    );
    assert_eq!(function_libraries(&mut conn).len(), 1);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
