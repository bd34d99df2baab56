//! Keyspace notifications end to end, against the real `tessera-server` binary: every
//! command's events (names, keys, databases, order) compared with a real redis-server
//! 7.0 running the same commands, expirations found on access and by the active cycle,
//! events raised by a blocked client served, and `notify-keyspace-events` from CONFIG
//! SET and the config file with Redis's errors. (The differential test compares the
//! events of its random command stream with Redis's too.)

mod common;

use common::keyspace_events::Collector;
use common::*;
use redis::Value;
use std::time::{Duration, Instant};

fn reply(conn: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command
        .query::<Value>(conn)
        .map_err(|e| format!("{:?} {:?}", e.code(), e.detail()))
}

/// Runs `commands` with notifications set to `classes` and returns, per command, its
/// reply and the events it raised.
fn events_of(port: u16, classes: &str, commands: &[&[&str]]) -> Vec<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_connection().unwrap();
    reply(&mut conn, &["FLUSHALL"]).unwrap();
    reply(
        &mut conn,
        &["CONFIG", "SET", "notify-keyspace-events", classes],
    )
    .unwrap();
    let mut collector = Collector::new(port);
    let mut out = Vec::new();
    for command in commands {
        let mut result = reply(&mut conn, command);
        // Which members SPOP takes is random; its events are not.
        if command[0] == "SPOP" && result.is_ok() {
            result = Ok(Value::SimpleString("<random members>".into()));
        }
        let events = collector.drain();
        out.push(format!(
            "{command:?} -> {result:?}\n    {}",
            events.join("\n    ")
        ));
    }
    reply(&mut conn, &["CONFIG", "SET", "notify-keyspace-events", ""]).unwrap();
    out
}

/// Fails naming the commands whose replies or events differ.
fn assert_same(ours: &[String], theirs: &[String]) {
    assert_eq!(ours.len(), theirs.len());
    let differences: Vec<String> = ours
        .iter()
        .zip(theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("tessera: {a}\nredis:   {b}"))
        .collect();
    assert!(differences.is_empty(), "\n{}", differences.join("\n\n"));
}

/// Every write Tessera has, with the cases where Redis raises nothing (or something
/// else: `del` instead of a store, `new` before a command's event).
const WRITES: &[&[&str]] = &[
    // strings
    &["SET", "s", "1"],
    &["SET", "s", "2", "EX", "1000"],
    &["SET", "s", "3", "KEEPTTL"],
    &["SET", "s", "4", "NX"],
    &["SET", "absent", "4", "XX"],
    &["SET", "s", "5", "GET", "PX", "100000"],
    &["SETNX", "s", "x"],
    &["SETNX", "s2", "x"],
    &["SETEX", "s3", "100", "v"],
    &["PSETEX", "s3", "100000", "v"],
    &["MSET", "m1", "a", "m2", "b", "m1", "c"],
    &["MSETNX", "m1", "a", "m3", "b"],
    &["MSETNX", "m4", "a", "m5", "b"],
    &["GETSET", "m4", "z"],
    &["GETSET", "m6", "z"],
    &["GETDEL", "m6"],
    &["GETDEL", "m6"],
    &["GETEX", "m5", "EX", "100"],
    &["GETEX", "m5", "PERSIST"],
    &["GETEX", "m5", "PERSIST"],
    &["GETEX", "m5", "PXAT", "1"],
    &["GETEX", "m4"],
    &["APPEND", "a", "x"],
    &["APPEND", "a", "y"],
    &["SETRANGE", "r", "2", "ab"],
    &["SETRANGE", "r", "0", ""],
    &["SETRANGE", "r2", "0", ""],
    &["INCR", "n"],
    &["DECR", "n"],
    &["INCRBY", "n", "5"],
    &["DECRBY", "n", "2"],
    &["INCRBY", "a", "1"],
    &["INCRBYFLOAT", "f", "1.5"],
    &["INCRBYFLOAT", "f", "abc"],
    // keys
    &["DEL", "s", "missing", "s2"],
    &["UNLINK", "s3"],
    &["EXPIRE", "a", "1000"],
    &["PEXPIRE", "a", "1000000", "NX"],
    &["EXPIREAT", "a", "99999999999"],
    &["PEXPIREAT", "a", "99999999999999", "LT"],
    &["EXPIRE", "missing", "10"],
    &["PERSIST", "a"],
    &["PERSIST", "a"],
    &["EXPIRE", "a", "-1"],
    &["SET", "old", "v"],
    &["RENAME", "old", "new"],
    &["SET", "other", "v"],
    &["RENAME", "new", "other"],
    &["RENAME", "other", "other"],
    &["RENAMENX", "other", "n"],
    &["RENAMENX", "other", "fresh"],
    &["COPY", "fresh", "copy"],
    &["COPY", "fresh", "copy"],
    &["COPY", "fresh", "copy", "REPLACE"],
    &["COPY", "fresh", "copy", "DB", "3"],
    &["MOVE", "copy", "2"],
    &["MOVE", "fresh", "3"],
    &["SWAPDB", "2", "3"],
    &["SELECT", "3"],
    &["SET", "in3", "v"],
    &["FLUSHDB"],
    &["SELECT", "0"],
    // hashes
    &["HSET", "h", "a", "1", "b", "2"],
    &["HSET", "h", "a", "1"],
    &["HMSET", "h", "c", "3"],
    &["HSETNX", "h", "a", "x"],
    &["HSETNX", "h", "d", "4"],
    &["HSETNX", "h2", "d", "4"],
    &["HINCRBY", "h", "a", "5"],
    &["HINCRBY", "h", "z", "5"],
    &["HINCRBYFLOAT", "h", "a", "0.5"],
    &["HINCRBY", "h", "a", "1"],
    &["HDEL", "h", "nope"],
    &["HDEL", "h", "a", "b"],
    &["HDEL", "h2", "d"],
    // lists
    &["LPUSH", "l", "a", "b"],
    &["RPUSH", "l", "c"],
    &["LPUSHX", "l", "z"],
    &["RPUSHX", "nolist", "z"],
    &["LSET", "l", "0", "y"],
    &["LSET", "l", "99", "y"],
    &["LINSERT", "l", "BEFORE", "c", "q"],
    &["LINSERT", "l", "AFTER", "nope", "q"],
    &["LREM", "l", "0", "nope"],
    &["LREM", "l", "1", "q"],
    &["LTRIM", "l", "0", "-1"],
    &["LTRIM", "l", "0", "1"],
    &["LPOP", "l"],
    &["RPOP", "l", "5"],
    &["RPOP", "l"],
    &["RPUSH", "l", "1", "2", "3"],
    &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
    &["RPOPLPUSH", "l", "l"],
    &["LMPOP", "2", "none", "l", "RIGHT", "COUNT", "5"],
    &["LMPOP", "1", "l2", "LEFT"],
    &["RPUSH", "t", "a", "b"],
    &["LTRIM", "t", "5", "10"],
    &["RPUSH", "t", "a", "b", "a"],
    &["LREM", "t", "0", "a"],
    &["LREM", "t", "0", "b"],
    &["BLPOP", "none", "l", "0.01"],
    // sets
    &["SADD", "x", "1", "2", "3"],
    &["SADD", "x", "1"],
    &["SREM", "x", "9"],
    &["SREM", "x", "1"],
    &["SMOVE", "x", "y", "2"],
    &["SMOVE", "x", "y", "9"],
    &["SADD", "y", "3"],
    &["SMOVE", "x", "y", "3"],
    &["SMOVE", "y", "y", "3"],
    &["SADD", "p", "a", "b", "c", "d"],
    &["SPOP", "p"],
    &["SPOP", "p", "0"],
    &["SPOP", "p", "1"],
    &["SPOP", "p", "10"],
    &["SADD", "p", "a"],
    &["SPOP", "p"],
    &["SADD", "u", "1", "2"],
    &["SADD", "v", "2", "3"],
    &["SINTERSTORE", "i", "u", "v"],
    &["SUNIONSTORE", "i", "u", "v"],
    &["SDIFFSTORE", "d", "u", "v"],
    &["SINTERSTORE", "i", "u", "none"],
    &["SINTERSTORE", "i", "u", "none"],
    &["SDIFFSTORE", "d", "u", "u"],
    // sorted sets
    &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
    &["ZADD", "z", "1", "a"],
    &["ZADD", "z", "XX", "5", "nope"],
    &["ZADD", "nz", "XX", "5", "nope"],
    &["ZADD", "z", "CH", "9", "a"],
    &["ZADD", "z", "INCR", "1", "a"],
    &["ZADD", "z", "NX", "INCR", "1", "a"],
    &["ZINCRBY", "z", "2", "b"],
    &["ZINCRBY", "z2", "2", "b"],
    &["ZINCRBY", "z2", "0", "b"],
    &["ZREM", "z", "nope"],
    &["ZREM", "z", "a"],
    &["ZREM", "z2", "b"],
    &["ZADD", "z", "1", "a", "4", "d", "5", "e", "6", "f"],
    &["ZREMRANGEBYRANK", "z", "0", "0"],
    &["ZREMRANGEBYSCORE", "z", "100", "200"],
    &["ZREMRANGEBYSCORE", "z", "4", "4"],
    &["ZREMRANGEBYLEX", "z", "[a", "[b"],
    &["ZPOPMIN", "z"],
    &["ZPOPMAX", "z", "2"],
    &["ZPOPMIN", "z", "0"],
    &["ZADD", "z", "1", "a", "2", "b"],
    &["ZMPOP", "2", "nz", "z", "MIN", "COUNT", "5"],
    &["ZADD", "za", "1", "a", "2", "b"],
    &["ZADD", "zb", "2", "b", "3", "c"],
    &["ZUNIONSTORE", "zu", "2", "za", "zb"],
    &["ZINTERSTORE", "zu", "2", "za", "zb"],
    &["ZDIFFSTORE", "zd", "2", "za", "zb"],
    &["ZDIFFSTORE", "zd", "1", "none"],
    &["ZRANGESTORE", "zr", "za", "0", "-1"],
    &["ZRANGESTORE", "zr", "za", "5", "6"],
    &["BZPOPMIN", "za", "0.01"],
    &["BZMPOP", "0.01", "1", "za", "MAX"],
    // transactions: the events of the queued commands, in order
    &["MULTI"],
    &["SET", "tx", "1"],
    &["INCR", "tx"],
    &["DEL", "tx"],
    &["EXEC"],
    &["FLUSHALL"],
];

#[test]
fn every_write_raises_the_events_redis_raises() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_path);
    let ours = events_of(server.port, "KEA", WRITES);
    let theirs = events_of(oracle.port, "KEA", WRITES);
    assert_same(&ours, &theirs);
    // `new` is not part of A: asked for alone, on the keyevent channel only.
    let ours = events_of(server.port, "En", WRITES);
    let theirs = events_of(oracle.port, "En", WRITES);
    assert_same(&ours, &theirs);
}

/// Reads that find nothing raise `keymiss` (class `m`), as Redis's read lookups do;
/// writes never do, even those that read first.
const READS: &[&[&str]] = &[
    &["GET", "nope"],
    &["SET", "s", "v"],
    &["GET", "s"],
    &["MGET", "s", "nope", "nope2"],
    &["STRLEN", "nope"],
    &["GETRANGE", "nope", "0", "1"],
    &["EXISTS", "nope", "s"],
    &["TYPE", "nope"],
    &["TTL", "nope"],
    &["PTTL", "nope"],
    &["EXPIRETIME", "nope"],
    &["OBJECT", "ENCODING", "nope"],
    &["HGET", "nope", "f"],
    &["HGETALL", "nope"],
    &["HLEN", "nope"],
    &["LRANGE", "nope", "0", "1"],
    &["LLEN", "nope"],
    &["LINDEX", "nope", "0"],
    &["LPOS", "nope", "a"],
    &["SMEMBERS", "nope"],
    &["SISMEMBER", "nope", "a"],
    &["SCARD", "nope"],
    &["SINTER", "nope", "s2"],
    &["SUNION", "nope"],
    &["SRANDMEMBER", "nope"],
    &["ZRANGE", "nope", "0", "-1"],
    &["ZSCORE", "nope", "a"],
    &["ZCARD", "nope"],
    &["ZUNION", "2", "nope", "nope2"],
    &["ZRANDMEMBER", "nope"],
    &["HRANDFIELD", "nope"],
    &["HSCAN", "nope", "0"],
    // Writes: write lookups raise nothing, except where Redis reads (GETSET, GETDEL,
    // GETEX, SET GET, COPY's source, the *STORE commands' sources).
    &["APPEND", "w1", "x"],
    &["INCR", "w2"],
    &["LPUSH", "w3", "x"],
    &["LPOP", "nope"],
    &["SADD", "w4", "x"],
    &["SPOP", "nope"],
    &["ZADD", "w5", "1", "x"],
    &["ZPOPMIN", "nope"],
    &["HSET", "w6", "f", "v"],
    &["DEL", "nope"],
    &["EXPIRE", "nope", "10"],
    &["RENAME", "nope", "x"],
    &["GETSET", "g1", "v"],
    &["GETDEL", "nope"],
    &["GETEX", "nope"],
    &["SET", "g2", "v", "GET"],
    &["COPY", "nope", "x"],
    &["SINTERSTORE", "dst", "nope", "nope2"],
    &["SUNIONSTORE", "dst", "nope"],
    &["ZUNIONSTORE", "dst", "2", "nope", "nope2"],
    &["ZRANGESTORE", "dst", "nope", "0", "-1"],
    &["LMOVE", "nope", "x", "LEFT", "LEFT"],
    &["SMOVE", "nope", "x", "a"],
];

#[test]
fn reads_that_find_nothing_raise_keymiss_as_in_redis() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_path);
    let ours = events_of(server.port, "KEm", READS);
    let theirs = events_of(oracle.port, "KEm", READS);
    assert_same(&ours, &theirs);
}

/// Waits until `collector` has received `want` lines (other lines are kept too).
fn wait_for(collector: &mut Collector, want: &[&str]) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        seen.extend(collector.drain());
        if want.iter().all(|w| seen.iter().any(|s| s == w)) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "waited for {want:?}, got {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn expirations_raise_expired_on_access_and_from_the_active_cycle() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--notify-keyspace-events", "Egx"]);
    let mut conn = server.connection();
    let mut collector = Collector::new(server.port);
    // Found on access: inside one EXEC nothing runs between the SET, whose time has
    // already passed, and the GET that finds the key expired (not even the active cycle).
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("touched")
        .arg("v")
        .arg("PXAT")
        .arg(1)
        .cmd("GET")
        .arg("touched")
        .query(&mut conn)
        .unwrap();
    assert_eq!(replies, [Value::Okay, Value::Nil]);
    assert_eq!(
        collector.drain(),
        [
            "__keyevent@0__:expire touched",
            "__keyevent@0__:expired touched"
        ]
    );
    // Never touched: the active cycle finds it.
    run(&mut conn, &["SELECT", "4"]);
    run(&mut conn, &["SET", "forgotten", "v", "PXAT", "1"]);
    run(&mut conn, &["SELECT", "0"]);
    let seen = wait_for(&mut collector, &["__keyevent@4__:expired forgotten"]);
    assert_eq!(
        seen,
        [
            "__keyevent@4__:expire forgotten",
            "__keyevent@4__:expired forgotten"
        ]
    );
}

#[test]
fn a_served_blocked_client_raises_the_pop_events() {
    let dir = temp_dir();
    // Under `always` the events wait for the fsync of the writes they tell of, then go.
    let server = start_server(
        dir.path(),
        &["--notify-keyspace-events", "El", "--appendfsync", "always"],
    );
    let mut conn = server.connection();
    let mut collector = Collector::new(server.port);
    let mut waiter = server.connection();
    let blocked = std::thread::spawn(move || {
        run(&mut waiter, &["BLMOVE", "q", "done", "LEFT", "RIGHT", "0"])
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut conn, "blocked_clients").as_deref() != Some("1") {
        assert!(Instant::now() < deadline, "the client never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    run(&mut conn, &["RPUSH", "q", "job"]);
    assert_eq!(blocked.join().unwrap(), Value::BulkString(b"job".to_vec()));
    assert_eq!(
        collector.drain(),
        [
            "__keyevent@0__:rpush q",
            "__keyevent@0__:rpush done",
            "__keyevent@0__:lpop q",
        ]
    );
}

#[test]
fn a_resp3_client_receives_the_events_of_its_own_writes_before_the_reply() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--notify-keyspace-events", "KA"]);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let output = raw_exchange(
        &mut stream,
        b"HELLO 3\r\nSUBSCRIBE __keyspace@0__:k\r\nSET k v\r\n",
        Duration::from_secs(2),
    );
    let text = String::from_utf8_lossy(&output).replace("\r\n", " ");
    assert!(
        text.ends_with(
            ">3 $9 subscribe $16 __keyspace@0__:k :1 >3 $7 message $16 __keyspace@0__:k $3 set +OK "
        ),
        "{text}"
    );
}

#[test]
fn the_setting_reads_and_refuses_as_redis() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--notify-keyspace-events", "KEAnm"]);
    let mut conn = server.connection();
    let get = |conn: &mut redis::Connection| -> Vec<String> {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("notify-keyspace-events")
            .query(conn)
            .unwrap()
    };
    // Redis prints A alone when every class of A is on, so the n is not shown.
    assert_eq!(get(&mut conn), ["notify-keyspace-events", "AKEm"]);
    let error = reply(
        &mut conn,
        &["CONFIG", "SET", "notify-keyspace-events", "KEQ"],
    )
    .unwrap_err();
    assert!(
        error.contains(
            "CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
             Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
        ),
        "{error}"
    );
    assert_eq!(get(&mut conn), ["notify-keyspace-events", "AKEm"]);
    run(
        &mut conn,
        &["CONFIG", "SET", "notify-keyspace-events", "Eglshzxetd$"],
    );
    assert_eq!(get(&mut conn), ["notify-keyspace-events", "AE"]);
    run(&mut conn, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    assert_eq!(get(&mut conn), ["notify-keyspace-events", ""]);
    // From a config file: a bad letter stops start-up with Redis's message; a good line
    // is read as CONFIG SET reads it.
    let config = dir.path().join("bad.conf");
    std::fs::write(&config, "notify-keyspace-events KEX\n").unwrap();
    let output = std::process::Command::new(SERVER_BIN)
        .arg(&config)
        .args(["--port", "0", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for wanted in [
        ">>> 'notify-keyspace-events KEX'",
        "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.",
    ] {
        assert!(text.contains(wanted), "{wanted:?} missing:\n{text}");
    }
}
