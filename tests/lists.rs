//! Lists against a real Tessera process: replies and errors compared with redis-server
//! 7.0 for a script of edge cases, and lists spanning many quicklist nodes kept through
//! the log, through a rewrite (RDB type 18) and across Redis ↔ Tessera files.

mod common;

use common::{
    RedisOracle, WHOLE_TEST, require_redis_or_skip, start_server, temp_dir,
    wait_for_background_jobs,
};

fn run(conn: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    match cmd.query::<redis::Value>(conn) {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!(
            "error: {} {}",
            e.code().unwrap_or(""),
            e.detail().unwrap_or("")
        ),
    }
}

fn list(conn: &mut redis::Connection, key: &str) -> Vec<Vec<u8>> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(conn)
        .unwrap()
}

/// Many lists, some spanning many nodes (8 KB each by default), after mixed edits.
fn populate(conn: &mut redis::Connection) {
    for i in 0..3000 {
        let value = format!("element-{i}-{}", "x".repeat(i % 50));
        let _: i64 = redis::cmd(if i % 3 == 0 { "LPUSH" } else { "RPUSH" })
            .arg("big")
            .arg(value)
            .query(conn)
            .unwrap();
        let _: i64 = redis::cmd("RPUSH")
            .arg("ints")
            .arg(i as i64 * 7 - 5000)
            .query(conn)
            .unwrap();
    }
    let _: () = redis::cmd("LSET")
        .arg("big")
        .arg(1500)
        .arg("y".repeat(3000))
        .query(conn)
        .unwrap();
    let _: i64 = redis::cmd("LINSERT")
        .arg("big")
        .arg("BEFORE")
        .arg("element-2999-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
        .arg("pivot")
        .query(conn)
        .unwrap();
    let _: i64 = redis::cmd("LREM")
        .arg("ints")
        .arg(0)
        .arg(9)
        .query(conn)
        .unwrap();
    let _: () = redis::cmd("LTRIM")
        .arg("ints")
        .arg(10)
        .arg(-10)
        .query(conn)
        .unwrap();
    let _: Vec<String> = redis::cmd("LPOP").arg("big").arg(5).query(conn).unwrap();
    let _: String = redis::cmd("LMOVE")
        .arg("big")
        .arg("small")
        .arg("RIGHT")
        .arg("LEFT")
        .query(conn)
        .unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg("small")
        .arg("")
        .arg("0")
        .arg("-1")
        .query(conn)
        .unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg("gone")
        .arg("a")
        .query(conn)
        .unwrap();
    let _: Option<String> = redis::cmd("RPOP").arg("gone").query(conn).unwrap();
}

const KEYS: &[&str] = &["big", "ints", "small", "gone"];

fn snapshot(conn: &mut redis::Connection) -> Vec<Vec<Vec<u8>>> {
    KEYS.iter().map(|k| list(conn, k)).collect()
}

#[test]
fn replies_and_errors_match_redis() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_binary);
    let mut ours = server.connection();
    let mut theirs = oracle.connection();
    let long = "z".repeat(10_000);
    let script: Vec<Vec<&str>> = vec![
        vec!["SET", "str", "v"],
        vec!["HSET", "h", "f", "v"],
        vec!["LPUSH", "l", "a", "b", "c", "a", "1", "-1", ""],
        vec!["RPUSH", "l", "a", &long, "9223372036854775807"],
        vec!["LPUSHX", "none", "a"],
        vec!["RPUSHX", "l", "x"],
        vec!["LPUSH", "str", "a"],
        vec!["LPUSHX", "str", "a"],
        vec!["LLEN", "l"],
        vec!["LLEN", "none"],
        vec!["LLEN", "str"],
        vec!["LRANGE", "l", "0", "-1"],
        vec!["LRANGE", "l", "-100", "100"],
        vec!["LRANGE", "l", "5", "2"],
        vec!["LRANGE", "l", "x", "2"],
        vec!["LRANGE", "none", "0", "x"],
        vec!["LRANGE", "h", "0", "1"],
        vec!["LINDEX", "l", "-1"],
        vec!["LINDEX", "l", "100"],
        vec!["LINDEX", "l", "x"],
        vec!["LINDEX", "none", "x"],
        vec!["LINDEX", "str", "0"],
        vec!["LSET", "none", "0", "v"],
        vec!["LSET", "none", "x", "v"],
        vec!["LSET", "l", "x", "v"],
        vec!["LSET", "l", "100", "v"],
        vec!["LSET", "l", "-2", "set"],
        vec!["LSET", "str", "0", "v"],
        vec!["LINSERT", "l", "MIDDLE", "a", "v"],
        vec!["LINSERT", "none", "before", "a", "v"],
        vec!["LINSERT", "l", "before", "nope", "v"],
        vec!["LINSERT", "l", "after", "a", "v"],
        vec!["LINSERT", "l", "BEFORE", "1", "v"],
        vec!["LINSERT", "str", "BEFORE", "1", "v"],
        vec!["LREM", "l", "x", "a"],
        vec!["LREM", "l", "-1", "a"],
        vec!["LREM", "l", "1", "v"],
        vec!["LREM", "none", "0", "v"],
        vec!["LREM", "str", "0", "v"],
        vec!["LPOS", "l", "a"],
        vec!["LPOS", "l", "a", "RANK", "-1"],
        vec!["LPOS", "l", "a", "RANK", "0"],
        vec!["LPOS", "l", "a", "RANK", "-9223372036854775808"],
        vec!["LPOS", "l", "a", "COUNT", "0"],
        vec!["LPOS", "l", "a", "COUNT", "x"],
        vec!["LPOS", "l", "a", "MAXLEN", "-1"],
        vec!["LPOS", "l", "a", "MAXLEN", "2", "COUNT", "0"],
        vec!["LPOS", "l", "a", "RANK", "x"],
        vec!["LPOS", "l", "a", "RANK"],
        vec!["LPOS", "none", "a", "COUNT", "1"],
        vec!["LPOS", "none", "a"],
        vec!["LPOS", "str", "a"],
        vec!["LPOP", "l"],
        vec!["RPOP", "l", "2"],
        vec!["LPOP", "l", "0"],
        vec!["LPOP", "none", "0"],
        vec!["LPOP", "none"],
        vec!["LPOP", "l", "-1"],
        vec!["LPOP", "l", "x"],
        vec!["LPOP", "l", "1", "2"],
        vec!["LPOP", "str"],
        vec!["LMOVE", "l", "m", "LEFT", "RIGHT"],
        vec!["LMOVE", "l", "m", "UP", "RIGHT"],
        vec!["LMOVE", "none", "m", "LEFT", "RIGHT"],
        vec!["LMOVE", "l", "str", "LEFT", "RIGHT"],
        vec!["LMOVE", "str", "m", "LEFT", "RIGHT"],
        vec!["LMOVE", "m", "m", "LEFT", "RIGHT"],
        vec!["RPOPLPUSH", "l", "m"],
        vec!["RPOPLPUSH", "m", "str"],
        vec!["LRANGE", "m", "0", "-1"],
        vec!["LMPOP", "0", "l", "LEFT"],
        vec!["LMPOP", "x", "l", "LEFT"],
        vec!["LMPOP", "2", "l", "LEFT"],
        vec!["LMPOP", "1", "l", "MIDDLE"],
        vec!["LMPOP", "1", "l", "LEFT", "COUNT", "0"],
        vec!["LMPOP", "1", "l", "LEFT", "COUNT", "1", "COUNT", "1"],
        vec!["LMPOP", "1", "l", "LEFT", "FOO"],
        vec!["LMPOP", "2", "none", "l", "RIGHT", "COUNT", "3"],
        vec!["LMPOP", "2", "none", "str", "RIGHT"],
        vec!["LMPOP", "1", "none", "RIGHT"],
        vec!["LTRIM", "l", "x", "1"],
        vec!["LTRIM", "l", "1", "-2"],
        vec!["LTRIM", "none", "1", "-2"],
        vec!["LTRIM", "str", "1", "-2"],
        vec!["LRANGE", "l", "0", "-1"],
        vec!["LTRIM", "l", "5", "1"],
        vec!["EXISTS", "l"],
        vec!["RPUSH", "m", "1", "2", "3"],
        vec!["LPOP", "m", "100"],
        vec!["EXISTS", "m"],
        vec!["RPUSH", "e", "x"],
        vec!["OBJECT", "ENCODING", "e"],
        vec!["TYPE", "e"],
    ];
    // Again with two-entry nodes (splits on LINSERT/LSET, merges after LREM/LTRIM).
    for size in ["-2", "2"] {
        for conn in [&mut ours, &mut theirs] {
            run(conn, &["FLUSHALL"]);
            run(conn, &["CONFIG", "SET", "list-max-listpack-size", size]);
        }
        for args in &script {
            let a = run(&mut ours, args);
            let b = run(&mut theirs, args);
            assert_eq!(a, b, "{args:?} with list-max-listpack-size {size}");
        }
    }
}

#[test]
fn lists_spanning_many_nodes_survive_log_and_rewrite() {
    let dir = temp_dir();
    let expected;
    {
        let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
        let mut conn = server.connection();
        populate(&mut conn);
        expected = snapshot(&mut conn);
        assert!(expected[0].len() > 2900 && expected[1].len() > 2900);
        assert!(expected[3].is_empty());
        server.shutdown();
    }
    {
        let mut server = start_server(dir.path(), &[]);
        let mut conn = server.connection();
        assert_eq!(snapshot(&mut conn), expected, "after replaying the log");
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        server.shutdown();
    }
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(snapshot(&mut conn), expected, "after loading the rewrite");
    assert_eq!(common::dbsize(&mut conn), 3);
}

#[test]
fn redis_loads_tessera_lists_and_tessera_loads_redis_lists() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    // Tessera → Redis: the rewrite's base RDB holds the lists as type 18.
    let dir = temp_dir();
    let expected;
    {
        // One base file: Redis reads no multi-part base.
        let mut server = start_server(dir.path(), &["--aof-rewrite-threads", "1"]);
        let mut conn = server.connection();
        populate(&mut conn);
        expected = snapshot(&mut conn);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        server.shutdown();
    }
    {
        let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
        let mut redis = oracle.connection();
        assert_eq!(
            snapshot(&mut redis),
            expected,
            "Redis reading Tessera's files"
        );
    }
    // Redis → Tessera, with small nodes (5 entries) so that Redis writes many.
    let dir = temp_dir();
    let expected;
    {
        let oracle = RedisOracle::start_with(
            &redis_binary,
            dir.path(),
            &["--appendonly", "yes", "--list-max-listpack-size", "5"],
        );
        let mut redis = oracle.connection();
        populate(&mut redis);
        expected = snapshot(&mut redis);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut redis).unwrap();
        wait_for_background_jobs(&mut redis);
        let _: () = redis::cmd("SHUTDOWN")
            .arg("NOSAVE")
            .query(&mut redis)
            .unwrap_or(());
    }
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(
        snapshot(&mut conn),
        expected,
        "Tessera reading Redis's files"
    );
    // Still editable after loading nodes of Redis's shape.
    let _: i64 = redis::cmd("LINSERT")
        .arg("ints")
        .arg("AFTER")
        .arg("-4930")
        .arg("new")
        .query(&mut conn)
        .unwrap();
    let _: Option<i64> = redis::cmd("LPOS")
        .arg("ints")
        .arg("new")
        .query(&mut conn)
        .unwrap();
}

/// An RDB string with a 6-bit length (short test strings only).
fn rdb_string(out: &mut Vec<u8>, bytes: &[u8]) {
    assert!(bytes.len() < 64);
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

/// A version-10 RDB file holding `body` (type bytes, keys, values), CRC left 0 (unchecked).
fn rdb_file(body: &[u8]) -> Vec<u8> {
    let mut file = b"REDIS0010".to_vec();
    file.extend_from_slice(&[0xFE, 0]);
    file.extend_from_slice(body);
    file.push(0xFF);
    file.extend_from_slice(&[0; 8]);
    file
}

/// The other list encodings and the empty cases Redis 7.0 skips: a plain LIST (type 1),
/// a quicklist with no nodes, one whose only listpack is empty, and a PLAIN node.
#[test]
fn loads_plain_lists_and_skips_empty_quicklists() {
    let empty_listpack = [7u8, 0, 0, 0, 0, 0, 0xFF];
    let mut body = Vec::new();
    body.push(1);
    rdb_string(&mut body, b"plain");
    body.push(3);
    for element in [&b"a"[..], b"12", b""] {
        rdb_string(&mut body, element);
    }
    body.push(18);
    rdb_string(&mut body, b"no-nodes");
    body.push(0);
    body.push(18);
    rdb_string(&mut body, b"empty-node");
    body.extend_from_slice(&[1, 2]);
    rdb_string(&mut body, &empty_listpack);
    body.push(18);
    rdb_string(&mut body, b"mixed");
    body.extend_from_slice(&[2, 2]);
    rdb_string(&mut body, &empty_listpack);
    body.push(1); // PLAIN
    rdb_string(&mut body, b"big element");
    body.push(1);
    rdb_string(&mut body, b"plain-empty");
    body.push(0);
    let dir = temp_dir();
    std::fs::write(dir.path().join("dump.rdb"), rdb_file(&body)).unwrap();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut conn = server.connection();
    assert_eq!(list(&mut conn, "plain"), [&b"a"[..], b"12", b""]);
    assert_eq!(list(&mut conn, "mixed"), [&b"big element"[..]]);
    assert_eq!(common::dbsize(&mut conn), 2, "empty lists are not loaded");
    drop(conn);
    drop(server);

    // A node container other than PLAIN (1) or PACKED (2) is refused.
    let mut body = vec![18];
    rdb_string(&mut body, b"bad");
    body.extend_from_slice(&[1, 3]);
    rdb_string(&mut body, &empty_listpack);
    let dir = temp_dir();
    std::fs::write(dir.path().join("dump.rdb"), rdb_file(&body)).unwrap();
    assert!(common::try_start_server(dir.path(), &["--appendonly", "no"]).is_err());
}

/// LMPOP and BLMPOP are logged and replicated as LPOP / RPOP of the elements they popped;
/// LPOP with a count as it was sent (Redis's propagation).
#[test]
fn multi_pops_are_replicated_as_the_pops_they_made() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let cli = binary.with_file_name("redis-cli");
    let words: &[&[&str]] = &[
        &["RPUSH", "a", "1", "2", "3"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "1"],
        &["LMPOP", "2", "none", "a", "RIGHT", "COUNT", "10"],
        &["RPUSH", "b", "1", "2", "3"],
        &["BLMPOP", "0", "1", "b", "LEFT", "COUNT", "2"],
        &["LPOP", "b", "5"],
    ];
    let commands: Vec<Vec<Vec<u8>>> = words
        .iter()
        .map(|c| c.iter().map(|w| w.as_bytes().to_vec()).collect())
        .collect();
    let redis_dir = temp_dir();
    let redis = RedisOracle::start_with(&binary, redis_dir.path(), &["--appendonly", "no"]);
    let theirs = common::replication::stream_of(&cli, redis.port, &commands);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let ours = common::replication::stream_of(&cli, server.port, &commands);
    assert_eq!(ours, theirs);
    assert!(
        ours.contains(&r#""rpop","a","2""#.to_string())
            && ours.contains(&r#""lpop","b","5""#.to_string()),
        "{ours:?}"
    );
}
