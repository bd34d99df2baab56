//! Streams' entry commands against a real redis-server 7.0: replies and errors side by
//! side (RESP2 and RESP3), blocking XREAD with several clients, RDB files both ways
//! (big streams of many nodes, deleted entries, trimmed), kill -9 under `appendfsync
//! always` and a compaction keeping every acknowledged XADD and XTRIM with the stream's
//! metadata, and damaged DUMP payloads refused without harm.

mod common;

use common::raw_client::{Conn, V};
use common::side_by_side::{both, connections, differences};
use common::stream_dump;
use common::*;
use std::time::{Duration, Instant};

/// Lines whose replies must be Redis's, in order, on fresh servers.
const LINES: &[&str] = &[
    "XADD s 1-1 a 1 b 2",
    "XADD s 1-2 a 3 b 4",
    "XADD s 1-3 c 5",
    "XADD s 1 c 5",
    "XADD s 1-* c 6",
    "XADD s 2-* c 7",
    "XADD s 0-0 c 7",
    "XADD s 0-1 c 7",
    "XADD s - c 7",
    "XADD s + c 7",
    "XADD s abc c 7",
    "XADD s 3-0 c",
    "XADD s 3-0",
    "XADD s NOMKSTREAM 3-0 c d",
    "XADD nostream NOMKSTREAM 3-0 c d",
    "EXISTS nostream",
    "XADD s MAXLEN 2 MINID 0 4-0 c d",
    "XADD s MAXLEN -1 4-0 c d",
    "XADD s MAXLEN abc 4-0 c d",
    "XADD s LIMIT 5 4-0 c d",
    "XADD s MAXLEN 10 LIMIT 5 4-0 c d",
    "XADD s MAXLEN ~ 10 LIMIT -1 4-0 c d",
    "XADD s MAXLEN = 10 LIMIT 0 4-0 c d",
    "XADD s MAXLEN ~ 2 LIMIT 0 4-0 c d",
    "XRANGE s - +",
    "XREVRANGE s + -",
    "XRANGE s (1-2 +",
    "XRANGE s - (4-0",
    "XRANGE s (1-2 (1-2",
    "XRANGE s 1 1",
    "XRANGE s ( +",
    "XRANGE s (- +",
    "XRANGE s - (0-0",
    "XRANGE s (18446744073709551615-18446744073709551615 +",
    "XRANGE s - + COUNT 1",
    "XRANGE s - + COUNT 0",
    "XRANGE s - + COUNT -3",
    "XRANGE s - + COUNT",
    "XRANGE s - + LIMIT 1",
    "XRANGE missing - + COUNT 0",
    "XREVRANGE s 2 1 COUNT 2",
    "XLEN s",
    "XLEN missing",
    "XDEL s 1-2 9-9 1-2",
    "XDEL s -",
    "XDEL s abc 1-3",
    "XDEL missing abc",
    "XTRIM s",
    "XTRIM s MAXLEN",
    "XTRIM s MAXLEN 1 LIMIT 1",
    "XTRIM s MINID ~ 2 LIMIT 1",
    "XTRIM s MAXLEN = 1 foo",
    "XTRIM missing MAXLEN 0",
    "XTRIM s MINID 2",
    "XRANGE s - +",
    "XSETID s 1",
    "XSETID s 5-5 ENTRIESADDED 1",
    "XSETID s 5-5 ENTRIESADDED -1",
    "XSETID s 5-5 MAXDELETEDID 6",
    "XSETID s 5-5 MAXDELETEDID 4 ENTRIESADDED 100",
    "XSETID s 5-5 FOO 1",
    "XSETID missing 5-5",
    "XADD s 5-5 a b",
    "XADD s 5-* a b",
    "XSETID s 18446744073709551615-18446744073709551615",
    "XADD s 5-* a b",
    "XADD s * a b",
    "SET str x",
    "XADD str 1-1 a b",
    "XRANGE str - +",
    "XLEN str",
    "XREAD STREAMS str 0",
    "TYPE s",
    "OBJECT ENCODING s",
    "XREAD STREAMS s",
    "XREAD STREAMS s 0",
    "XREAD COUNT 1 STREAMS s s 0 1-2",
    "XREAD COUNT -1 STREAMS s 0",
    "XREAD COUNT abc STREAMS s 0",
    "XREAD BLOCK abc STREAMS s 0",
    "XREAD BLOCK -1 STREAMS s 0",
    "XREAD STREAMS s >",
    "XREAD STREAMS s +",
    "XREAD STREAMS s $",
    "XREAD GROUP g c STREAMS s 0",
    "XREAD NOACK STREAMS s 0",
    "XREAD FOO STREAMS s 0",
    "XREAD COUNT 1",
    "XREAD STREAMS missing 0",
    "XREAD BLOCK 10 STREAMS missing 0",
    "MULTI",
    "XREAD BLOCK 0 STREAMS missing $",
    "XADD s2 1-1 f v",
    "EXEC",
    "EVAL \"return redis.call('xread','block','0','streams','s','$')\" 0",
    "EVAL \"return redis.call('xread','streams','s2','0')\" 0",
    "EVAL \"return redis.call('xadd','s2','2-1','f','v')\" 0",
];

#[test]
fn replies_and_errors_are_redis_s() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    for resp3 in [false, true] {
        let (mut ours, mut theirs) = connections(&server, &redis, resp3);
        ours.cmd(&["FLUSHALL"]);
        theirs.cmd(&["FLUSHALL"]);
        // The script lines' quoted words are split by hand.
        let (plain, scripts): (Vec<&str>, Vec<&str>) =
            LINES.iter().partition(|line| !line.starts_with("EVAL"));
        let found = differences(&mut ours, &mut theirs, &plain);
        assert!(found.is_empty(), "resp3 {resp3}:\n{}", found.join("\n"));
        for line in scripts {
            let script = line.split('"').nth(1).unwrap();
            let args = ["EVAL", script, "0"];
            assert_eq!(ours.cmd(&args), theirs.cmd(&args), "{line}");
        }
    }
}

/// Small node limits: XADD closes nodes where Redis does, so approximate trims remove
/// the same entries and a stream's DUMP (every node's bytes) is Redis's.
#[test]
fn node_limits_and_approximate_trims_are_redis_s() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let (mut ours, mut theirs) = connections(&server, &redis, false);
    let mut lines: Vec<String> = vec![
        "CONFIG SET rdbcompression no".into(),
        "CONFIG SET stream-node-max-entries 7".into(),
        "CONFIG GET stream-node-max-entries".into(),
        "CONFIG GET stream-node-max-bytes".into(),
    ];
    for i in 1..=120 {
        let fields = if i % 5 == 0 { "other 1" } else { "f x g y" };
        lines.push(format!("XADD s {i}-1 {fields}"));
        if i == 60 {
            lines.push("CONFIG SET stream-node-max-bytes 90".into());
        }
        if i % 17 == 0 {
            lines.push(format!("XDEL s {}-1", i - 3));
        }
    }
    lines.extend(
        [
            "DUMP s",
            "XTRIM s MAXLEN ~ 100",
            "XTRIM s MAXLEN ~ 60 LIMIT 10",
            "XTRIM s MINID ~ 70",
            "XADD s MAXLEN ~ 30 200-0 f x g y",
            "XADD s MINID ~ 100 201-0 f x g y",
            "XRANGE s - + COUNT 3",
            "XLEN s",
            "DUMP s",
            "XTRIM s MAXLEN 25",
            "XTRIM s MINID 110",
            "DUMP s",
            "CONFIG SET stream-node-max-entries 0",
            "CONFIG SET stream-node-max-bytes 0",
            "XADD s 300-0 a b",
            "XADD s 301-0 a b",
            "DUMP s",
            "CONFIG SET stream-node-max-entries 100",
            "CONFIG SET stream-node-max-bytes 4096",
        ]
        .map(String::from),
    );
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let found = differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

fn blocked_clients(port: u16) -> i64 {
    let info = Conn::new(port).cmd(&["INFO", "clients"]).text();
    info.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .map(|n| n.trim().parse().unwrap())
        .unwrap()
}

fn wait_blocked(port: u16, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(port) != n {
        assert!(Instant::now() < deadline, "clients never blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a command without waiting for its reply (a client about to block).
fn send(conn: &mut Conn, words: &[&str]) {
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    conn.send(&args);
}

/// Blocked XREADs and what serves them, run on one server; every reply in order.
fn blocking_scenario(port: u16) -> Vec<V> {
    let mut replies = Vec::new();
    let mut reader = Conn::new(port);
    let mut other = Conn::new(port);
    let mut writer = Conn::new(port);
    writer.cmd(&["FLUSHALL"]);

    // `$` of missing keys; the second key's XADD serves it.
    send(
        &mut reader,
        &["XREAD", "BLOCK", "0", "STREAMS", "s1", "s2", "$", "$"],
    );
    wait_blocked(port, 1);
    replies.push(writer.cmd(&["XADD", "s2", "1-1", "a", "1"]));
    replies.push(reader.read());

    // `$` stands for the last ID when the client blocked: two entries come in one EXEC,
    // COUNT takes one.
    replies.push(writer.cmd(&["XADD", "s1", "5-0", "x", "y"]));
    send(
        &mut reader,
        &["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s1", "$"],
    );
    wait_blocked(port, 1);
    for line in [
        &["MULTI"][..],
        &["XADD", "s1", "6-0", "x", "y"],
        &["XADD", "s1", "7-0", "x", "z"],
        &["EXEC"],
    ] {
        replies.push(writer.cmd(line));
    }
    replies.push(reader.read());

    // Two clients on one key, an explicit ID above what comes first.
    send(
        &mut reader,
        &["XREAD", "BLOCK", "0", "STREAMS", "s1", "100-0"],
    );
    send(&mut other, &["XREAD", "BLOCK", "0", "STREAMS", "s1", "7-0"]);
    wait_blocked(port, 2);
    replies.push(writer.cmd(&["XADD", "s1", "50-0", "f", "v"]));
    replies.push(other.read());
    wait_blocked(port, 1);
    replies.push(writer.cmd(&["XADD", "s1", "150-0", "f", "w"]));
    replies.push(reader.read());

    // An entry added and deleted in one EXEC: the last ID moved, so the client is served,
    // with no entry.
    send(&mut reader, &["XREAD", "BLOCK", "0", "STREAMS", "s1", "$"]);
    wait_blocked(port, 1);
    for line in [
        &["MULTI"][..],
        &["XADD", "s1", "151-0", "f", "v"],
        &["XDEL", "s1", "151-0"],
        &["EXEC"],
    ] {
        replies.push(writer.cmd(line));
    }
    replies.push(reader.read());

    // A list at the key does not serve it; a stream made there later does.
    send(&mut reader, &["XREAD", "BLOCK", "0", "STREAMS", "s3", "$"]);
    wait_blocked(port, 1);
    replies.push(writer.cmd(&["RPUSH", "s3", "x"]));
    std::thread::sleep(Duration::from_millis(50));
    replies.push(V::Int(blocked_clients(port)));
    replies.push(writer.cmd(&["DEL", "s3"]));
    replies.push(writer.cmd(&["XADD", "s3", "1-0", "a", "b"]));
    replies.push(reader.read());

    // A timeout answers a null array; inside MULTI nothing blocks.
    replies.push(reader.cmd(&["XREAD", "BLOCK", "30", "STREAMS", "s3", "$"]));
    replies.push(reader.cmd(&["MULTI"]));
    replies.push(reader.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s3", "$"]));
    replies.push(reader.cmd(&["EXEC"]));
    // A wrong type at the time of the call is an error.
    replies.push(writer.cmd(&["SET", "str", "v"]));
    replies.push(reader.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s1", "str", "$", "$"]));
    replies.push(V::Int(blocked_clients(port)));
    replies
}

#[test]
fn blocking_xread_is_served_as_redis_serves_it() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendfsync", "always"]);
    let theirs = blocking_scenario(redis.port);
    let ours = blocking_scenario(server.port);
    assert!(!theirs.contains(&V::Closed), "{theirs:?}");
    assert_eq!(ours, theirs);
    // Serving logged nothing of its own: the restart has the writes' streams.
    let before = stream_dump::state(&mut server.connection(), "s1");
    let mut server = server;
    server.kill9();
    let server = start_server(dir.path(), &[]);
    assert_eq!(stream_dump::state(&mut server.connection(), "s1"), before);
}

/// Streams of every shape on one connection: big ones of many nodes with auto IDs,
/// approximate trims (node boundaries decide them), LIMIT, deletions; with two rounds or
/// more, a stream whose metadata XSETID set.
fn stream_load(conn: &mut redis::Connection, keys: &[&str], rounds: usize) {
    for round in 0..rounds {
        for (k, key) in keys.iter().enumerate() {
            let mut pipe = redis::pipe();
            for i in 0..200 {
                let value = format!("{round}:{i}:{}", "p".repeat((i * 7 + k) % 50));
                let add = pipe.cmd("XADD").arg(*key);
                match (i + k) % 11 {
                    0 => add.arg("MAXLEN").arg("~").arg(300 + k * 50),
                    1 => add.arg("MAXLEN").arg("~").arg(250).arg("LIMIT").arg(100),
                    _ => add,
                };
                if i % 3 == 0 {
                    add.arg("*").arg("f").arg(&value).arg("g").arg(i).ignore();
                } else {
                    add.arg("*").arg("other").arg(&value).ignore();
                }
            }
            let _: () = pipe.query(conn).unwrap();
            let first: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                .arg(*key)
                .arg("-")
                .arg("+")
                .arg("COUNT")
                .arg(20)
                .query(conn)
                .unwrap();
            for (id, _) in first.iter().step_by(4) {
                run(conn, &["XDEL", key, id]);
            }
            if let Some((id, _)) = first.last() {
                run(conn, &["XTRIM", key, "MINID", "~", id]);
            }
            run(conn, &["XTRIM", key, "MAXLEN", "~", "280", "LIMIT", "120"]);
        }
    }
    if rounds < 2 {
        return; // a second call: XSETID's stream is made
    }
    run(conn, &["XADD", "set-id", "1-1", "f", "v"]);
    run(
        conn,
        &[
            "XSETID",
            "set-id",
            "99-0",
            "ENTRIESADDED",
            "7",
            "MAXDELETEDID",
            "50-0",
        ],
    );
}

fn states(conn: &mut redis::Connection, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .map(|key| stream_dump::state(conn, key))
        .collect()
}

#[test]
fn acknowledged_xadds_and_trims_survive_kill9_and_a_compaction() {
    let keys = ["x0", "x1", "x2", "set-id"];
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &["--appendfsync", "always", "--stream-node-max-entries", "13"],
    );
    let mut conn = server.connection();
    stream_load(&mut conn, &keys[..3], 2);
    let first = states(&mut conn, &keys);
    server.kill9();

    // Replayed: identical entries and metadata; then a compaction and more writes.
    let mut server = start_server(
        dir.path(),
        &["--appendfsync", "always", "--stream-node-max-entries", "5"],
    );
    let mut conn = server.connection();
    assert_eq!(states(&mut conn, &keys), first);
    run(&mut conn, &["BGREWRITEAOF"]);
    wait_for_background_jobs(&mut conn);
    stream_load(&mut conn, &keys[..3], 1);
    let second = states(&mut conn, &keys);
    server.kill9();

    let server = start_server(dir.path(), &[]);
    assert_eq!(states(&mut server.connection(), &keys), second);
}

/// A `dump.rdb` Redis writes (streams of many nodes, deleted and trimmed entries) loads in
/// Tessera with every entry and number, and the streams go on as Redis's do: appends
/// after the load lay out nodes as Redis does. The other way, Redis loads Tessera's.
#[test]
fn rdb_files_move_both_ways() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let keys = ["x0", "x1", "x2", "set-id"];
    let redis_dir = temp_dir();
    let oracle = RedisOracle::start_with(
        &redis_binary,
        redis_dir.path(),
        &["--appendonly", "no", "--stream-node-max-entries", "9"],
    );
    let mut redis = oracle.connection();
    stream_load(&mut redis, &keys[..3], 3);
    let expected = states(&mut redis, &keys);
    run(&mut redis, &["SAVE"]);

    let dir = temp_dir();
    std::fs::copy(
        redis_dir.path().join("dump.rdb"),
        dir.path().join("dump.rdb"),
    )
    .unwrap();
    let mut server = start_server(
        dir.path(),
        &["--appendonly", "no", "--stream-node-max-entries", "9"],
    );
    let mut conn = server.connection();
    assert_eq!(states(&mut conn, &keys), expected);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(oracle.port);
    let mut lines: Vec<String> = vec!["CONFIG SET rdbcompression no".into()];
    for i in 0..40 {
        lines.push(format!("XADD x1 {}-0 f v{i}", 1u64 << 60 | i));
    }
    lines.extend(["XTRIM x1 MAXLEN ~ 20", "DUMP x1", "DUMP x2", "XLEN x2"].map(String::from));
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let found = differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));

    // Back: Tessera's dump.rdb passes redis-check-rdb and loads in Redis.
    let expected = states(&mut conn, &keys);
    run(&mut conn, &["SAVE"]);
    server.shutdown();
    assert_redis_check_rdb_passes(&redis_binary, &dir.path().join("dump.rdb"));
    let back_dir = temp_dir();
    std::fs::copy(
        dir.path().join("dump.rdb"),
        back_dir.path().join("dump.rdb"),
    )
    .unwrap();
    let oracle = RedisOracle::start_with(&redis_binary, back_dir.path(), &["--appendonly", "no"]);
    assert_eq!(states(&mut oracle.connection(), &keys), expected);
}

/// A payload with a sound footer (version 10, its checksum) around `body`.
fn payload_of(body: &[u8]) -> Vec<u8> {
    let mut payload = body.to_vec();
    payload.extend_from_slice(&10u16.to_le_bytes());
    let checksum = tessera::rdb::crc64(&payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

/// Damaged stream payloads with right checksums: every one is refused or, if it still
/// holds together, is a stream every command can read and change; the server never
/// falls over (RESTOREs are logged, so the restart replays them too).
#[test]
fn damaged_stream_payloads_are_refused_without_harm() {
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &["--appendfsync", "always", "--enable-debug-command", "yes"],
    );
    let mut conn = Conn::new(server.port);
    conn.cmd(&["CONFIG", "SET", "rdbcompression", "no"]);
    conn.cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
    for i in 1..=14 {
        let fields = if i % 3 == 0 { "other 77" } else { "f -1 g x" };
        let words: Vec<String> = format!("XADD s {i}-{} {fields}", i % 2)
            .split(' ')
            .map(String::from)
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        conn.cmd(&words);
    }
    conn.cmd(&["XDEL", "s", "2-0", "5-1", "9-1"]);
    conn.cmd(&["XTRIM", "s", "MINID", "3"]);
    let V::Bulk(Some(payload)) = conn.cmd(&["DUMP", "s"]) else {
        panic!("no payload")
    };
    let body = &payload[..payload.len() - 10];
    let mut accepted = 0;
    let mut refused = 0;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for attempt in 0..1500 {
        let mut damaged = body.to_vec();
        // Past the type byte and node count: keys, listpacks and the metadata.
        for _ in 0..1 + attempt % 3 {
            let at = 2 + (random() as usize) % (damaged.len() - 2);
            damaged[at] = match random() % 4 {
                0 => damaged[at] ^ 1,
                1 => damaged[at].wrapping_add(1),
                2 => 0xff,
                _ => random() as u8,
            };
        }
        let key = format!("d{attempt}");
        let reply = conn.call(&[b"RESTORE", key.as_bytes(), b"0", &payload_of(&damaged)]);
        match reply {
            V::Simple(ok) if ok == "OK" => {
                accepted += 1;
                for words in [
                    &["XRANGE", &key, "-", "+"][..],
                    &["XREVRANGE", &key, "+", "-", "COUNT", "3"],
                    &["XLEN", &key],
                    &["XREAD", "STREAMS", &key, "0"],
                    &["XDEL", &key, "7-1", "8-0"],
                    &["XADD", &key, "*", "f", "v"],
                    &["XTRIM", &key, "MAXLEN", "~", "2"],
                    &["XTRIM", &key, "MINID", "12"],
                    &["XADD", &key, "MAXLEN", "1", "*", "f", "w"],
                    &["DEBUG", "DIGEST-VALUE", &key],
                    &["MEMORY", "USAGE", &key],
                ] {
                    let reply = conn.cmd(words);
                    assert!(reply != V::Closed, "{words:?} on attempt {attempt}");
                }
            }
            V::Error(error) => {
                assert!(error.starts_with("ERR Bad data format"), "{error}");
                refused += 1;
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    assert!(refused > 1000, "{refused} refused, {accepted} accepted");
    assert_eq!(conn.cmd(&["PING"]), V::Simple("PONG".into()));
    let keys = conn.cmd(&["DBSIZE"]);
    server.kill9();
    let server = start_server(dir.path(), &[]);
    assert_eq!(Conn::new(server.port).cmd(&["DBSIZE"]), keys);
}
