//! DUMP, RESTORE and MIGRATE against a real redis-server 7.0: payloads of every type move
//! both ways, RESTORE's options and errors are Redis's, a restored key survives kill -9,
//! and MIGRATE moves keys from Tessera to Redis and from Redis to Tessera, answering as
//! Redis's MIGRATE does.

mod common;

use common::dataset::{DATABASES, dataset, populate};
use common::raw_client::{Conn, V};
use common::*;

/// Copies every key of `from` into `to` with DUMP / PTTL / RESTORE REPLACE.
fn copy_all(from: &mut redis::Connection, to: &mut redis::Connection) -> usize {
    let mut copied = 0;
    for db in 0..DATABASES {
        for conn in [&mut *from, &mut *to] {
            run(conn, &["SELECT", &db.to_string()]);
        }
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(from).unwrap();
        for key in keys {
            let payload: Vec<u8> = redis::cmd("DUMP").arg(&key).query(from).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(from).unwrap();
            let _: () = redis::cmd("RESTORE")
                .arg(&key)
                .arg(ttl.max(0))
                .arg(payload)
                .arg("REPLACE")
                .query(to)
                .unwrap_or_else(|e| panic!("RESTORE {}: {e}", String::from_utf8_lossy(&key)));
            copied += 1;
        }
    }
    for conn in [from, to] {
        run(conn, &["SELECT", "0"]);
    }
    copied
}

#[test]
fn dump_payloads_of_every_type_move_both_ways() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut theirs = redis.connection();
    let mut ours = server.connection();
    populate(&mut theirs, 0);
    populate(&mut ours, 1);
    assert!(copy_all(&mut theirs, &mut ours) > 100);
    assert!(copy_all(&mut ours, &mut theirs) > 200);
    let (tessera, expected) = (dataset(&mut ours), dataset(&mut theirs));
    assert_eq!(tessera.len(), expected.len());
    for (key, value) in &expected {
        assert_eq!(tessera.get(key), Some(value), "{key:?}");
    }
    // Without compression the payload is Redis's byte for byte for a plain string.
    run(&mut ours, &["SET", "s", "hello"]);
    run(&mut theirs, &["SET", "s", "hello"]);
    let dump = |conn: &mut redis::Connection| -> Vec<u8> {
        redis::cmd("DUMP").arg("s").query(conn).unwrap()
    };
    assert_eq!(dump(&mut ours), dump(&mut theirs));
}

/// A payload whose footer is sound (version `version`, right checksum) around `body`.
fn payload_of(body: &[u8], version: u16) -> Vec<u8> {
    let mut payload = body.to_vec();
    payload.extend_from_slice(&version.to_le_bytes());
    let checksum = tessera::rdb::crc64(&payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

#[test]
fn restore_answers_as_redis() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    theirs.cmd(&["RPUSH", "source", "a", "b", "c"]);
    let V::Bulk(Some(good)) = theirs.cmd(&["DUMP", "source"]) else {
        panic!("DUMP of a list");
    };
    let mut bad_checksum = good.clone();
    *bad_checksum.last_mut().unwrap() ^= 1;
    let unknown_type = payload_of(&[200, 1, b'x'], 10);
    let truncated = payload_of(&good[..good.len() - 14], 10);
    let newer = payload_of(&good[..good.len() - 10], 11);
    let older = payload_of(&good[..good.len() - 10], 9);
    let future = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 3_600_000)
        .to_string();
    let p = |payload: &Vec<u8>| payload.clone();
    let lines: Vec<Vec<Vec<u8>>> = vec![
        cmd(&["RESTORE", "k", "0"], Some(p(&good)), &[]),
        cmd(&["LRANGE", "k", "0", "-1"], None, &[]),
        cmd(&["RESTORE", "k", "0"], Some(p(&good)), &[]),
        cmd(&["RESTORE", "k", "-1"], Some(p(&good)), &["REPLACE"]),
        cmd(&["RESTORE", "k", "x"], Some(p(&good)), &["REPLACE"]),
        cmd(
            &["RESTORE", "k", "0"],
            Some(b"nonsense".to_vec()),
            &["REPLACE"],
        ),
        cmd(&["RESTORE", "k", "0"], Some(bad_checksum), &["REPLACE"]),
        cmd(&["RESTORE", "k", "0"], Some(unknown_type), &["REPLACE"]),
        cmd(&["RESTORE", "k", "0"], Some(truncated), &["REPLACE"]),
        cmd(&["RESTORE", "k", "0"], Some(newer), &["REPLACE"]),
        cmd(&["RESTORE", "old", "0"], Some(older), &[]),
        cmd(&["LRANGE", "old", "0", "-1"], None, &[]),
        cmd(&["RESTORE", "k", "0"], Some(p(&good)), &["FOO"]),
        cmd(
            &["RESTORE", "k", "0"],
            Some(p(&good)),
            &["REPLACE", "IDLETIME"],
        ),
        cmd(
            &["RESTORE", "k", "0"],
            Some(p(&good)),
            &["REPLACE", "IDLETIME", "-1"],
        ),
        cmd(
            &["RESTORE", "k", "0"],
            Some(p(&good)),
            &["REPLACE", "IDLETIME", "x"],
        ),
        cmd(
            &["RESTORE", "k", "0"],
            Some(p(&good)),
            &["REPLACE", "FREQ", "256"],
        ),
        cmd(
            &["RESTORE", "k", "0"],
            Some(p(&good)),
            &["REPLACE", "IDLETIME", "5", "FREQ", "5"],
        ),
        cmd(
            &["RESTORE", "k", "0"],
            Some(p(&good)),
            &["REPLACE", "IDLETIME", "1000"],
        ),
        cmd(&["OBJECT", "IDLETIME", "k"], None, &[]),
        cmd(&["OBJECT", "FREQ", "k"], None, &[]),
        cmd(&["RESTORE", "t", "100000"], Some(p(&good)), &[]),
        cmd(&["TTL", "t"], None, &[]),
        cmd(&["RESTORE", "a", &future], Some(p(&good)), &["ABSTTL"]),
        cmd(&["TTL", "a"], None, &[]),
        // Already expired: nothing is created, and a key replaced is gone.
        cmd(
            &["RESTORE", "k", "1"],
            Some(p(&good)),
            &["REPLACE", "ABSTTL"],
        ),
        cmd(&["EXISTS", "k"], None, &[]),
        cmd(&["RESTORE", "gone", "1"], Some(p(&good)), &["ABSTTL"]),
        cmd(&["EXISTS", "gone"], None, &[]),
        cmd(&["SET", "str", "v"], None, &[]),
        cmd(&["RESTORE", "str", "0"], Some(p(&good)), &["REPLACE"]),
        cmd(&["TYPE", "str"], None, &[]),
        cmd(&["DUMP", "nosuch"], None, &[]),
        cmd(&["DUMP"], None, &[]),
        cmd(&["RESTORE", "k", "0"], None, &[]),
    ];
    let mut wrong = Vec::new();
    for line in &lines {
        let args: Vec<&[u8]> = line.iter().map(Vec::as_slice).collect();
        let (tessera, expected) = (ours.call(&args), theirs.call(&args));
        if tessera != expected {
            let shown: Vec<String> = line
                .iter()
                .map(|a| String::from_utf8_lossy(&a[..a.len().min(20)]).into_owned())
                .collect();
            wrong.push(format!(
                "{shown:?}\n  tessera: {tessera:?}\n  redis:   {expected:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A command's words, with `payload` (if any) after them, then `options`.
fn cmd(words: &[&str], payload: Option<Vec<u8>>, options: &[&str]) -> Vec<Vec<u8>> {
    let mut line: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    line.extend(payload);
    line.extend(options.iter().map(|o| o.as_bytes().to_vec()));
    line
}

#[test]
fn a_restored_key_survives_kill9() {
    let dir = temp_dir();
    let args = ["--appendfsync", "always"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    run(&mut conn, &["HSET", "h", "f", "v", "g", "w"]);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("h").query(&mut conn).unwrap();
    for (key, ttl, options) in [
        ("with-ttl", "1000000", &[][..]),
        ("h", "0", &["REPLACE"][..]),
        ("plain", "0", &[][..]),
    ] {
        let _: () = redis::cmd("RESTORE")
            .arg(key)
            .arg(ttl)
            .arg(&payload)
            .arg(options)
            .query(&mut conn)
            .unwrap();
    }
    run(&mut conn, &["SET", "replaced-by-expired", "x"]);
    let _: () = redis::cmd("RESTORE")
        .arg("replaced-by-expired")
        .arg(1)
        .arg(&payload)
        .arg("REPLACE")
        .arg("ABSTTL")
        .query(&mut conn)
        .unwrap();
    let before = dataset(&mut conn);
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    assert_eq!(dataset(&mut conn), before);
    let ttl: i64 = redis::cmd("TTL").arg("with-ttl").query(&mut conn).unwrap();
    assert!(ttl > 990, "{ttl}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("replaced-by-expired")
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, 0);
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn migrate_answers_as_redis_and_moves_keys_both_ways() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let target = RedisOracle::start(&redis_binary);
    let source = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let args = ["--appendfsync", "always"];
    let mut server = start_server(dir.path(), &args);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(source.port);
    let mut at_target = Conn::new(target.port);
    let port = target.port.to_string();
    let closed = closed_port().to_string();
    let setup = [
        "SET a 1",
        "PEXPIRE a 5000000",
        "RPUSH b x y z",
        "HSET c f v",
        "SADD d 1 2 3",
        "ZADD e 1 m",
        "SET kept v",
        "SET busy mine",
    ];
    for line in setup {
        ours.cmd(&line.split(' ').collect::<Vec<_>>());
        theirs.cmd(&line.split(' ').collect::<Vec<_>>());
    }
    let lines = [
        format!("MIGRATE 127.0.0.1 {port} a 0 5000"),
        format!("MIGRATE 127.0.0.1 {port} nosuch 0 5000"),
        format!("MIGRATE 127.0.0.1 {port} \"\" 1 5000 KEYS b c nosuch"),
        format!("MIGRATE 127.0.0.1 {port} \"\" 2 5000 COPY KEYS d e kept"),
        format!("MIGRATE 127.0.0.1 {port} \"\" 2 5000 COPY REPLACE KEYS d e"),
        format!("MIGRATE 127.0.0.1 {port} busy 0 5000"),
        format!("MIGRATE 127.0.0.1 {port} busy 0 5000 AUTH secret"),
        format!("MIGRATE 127.0.0.1 {port} busy 0 5000 AUTH2 user secret"),
        format!("MIGRATE 127.0.0.1 {port} kept 0 5000 KEYS d"),
        format!("MIGRATE 127.0.0.1 {port} kept 0 5000 FOO"),
        format!("MIGRATE 127.0.0.1 {port} kept 0 5000 AUTH"),
        format!("MIGRATE 127.0.0.1 {port} kept 0 x"),
        format!("MIGRATE 127.0.0.1 {port} kept x 5000"),
        format!("MIGRATE 127.0.0.1 {port} kept 99 5000"),
        format!("MIGRATE 127.0.0.1 {closed} kept 0 1000"),
        "MIGRATE 127.0.0.1 notaport kept 0 1000".to_string(),
        format!("MIGRATE 127.0.0.1 {port} kept 0"),
    ];
    let mut wrong = Vec::new();
    // Each server migrates into the same target in turn; the target is cleared between
    // them so that both see it in the same state.
    for line in &lines {
        let words: Vec<&str> = line
            .split(' ')
            .map(|w| if w == "\"\"" { "" } else { w })
            .collect();
        at_target.cmd(&["FLUSHALL"]);
        at_target.cmd(&["SET", "busy", "theirs"]);
        let expected = theirs.cmd(&words);
        let state_after_redis = target_state(&mut at_target);
        at_target.cmd(&["FLUSHALL"]);
        at_target.cmd(&["SET", "busy", "theirs"]);
        let tessera = ours.cmd(&words);
        let state_after_tessera = target_state(&mut at_target);
        if tessera != expected || state_after_tessera != state_after_redis {
            wrong.push(format!(
                "{line}\n  tessera: {tessera:?} {state_after_tessera:?}\n  redis:   {expected:?} {state_after_redis:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The source keeps what Redis's source keeps.
    let keys = |conn: &mut Conn| {
        let mut keys: Vec<String> = conn
            .cmd(&["KEYS", "*"])
            .items()
            .iter()
            .map(V::text)
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&mut ours), keys(&mut theirs));
    // The TTL travelled.
    at_target.cmd(&["FLUSHALL"]);
    ours.cmd(&["SET", "ttl", "v", "EX", "1000"]);
    ours.cmd(&["MIGRATE", "127.0.0.1", &port, "ttl", "0", "5000"]);
    let V::Int(ttl) = at_target.cmd(&["TTL", "ttl"]) else {
        panic!("TTL")
    };
    assert!((990..=1000).contains(&ttl), "{ttl}");
    // Migrated keys were deleted in Tessera's log too.
    let after = keys(&mut ours);
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut ours = Conn::new(server.port);
    assert_eq!(keys(&mut ours), after);
    // Redis migrates into Tessera.
    theirs.cmd(&["HSET", "from-redis", "f", "v"]);
    let tessera_port = server.port.to_string();
    assert_eq!(
        theirs.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &tessera_port,
            "from-redis",
            "3",
            "5000"
        ]),
        V::Simple("OK".into())
    );
    ours.cmd(&["SELECT", "3"]);
    assert_eq!(
        ours.cmd(&["HGETALL", "from-redis"]).items(),
        vec![V::Bulk(Some(b"f".to_vec())), V::Bulk(Some(b"v".to_vec()))]
    );
}

/// Every key of the target's databases 0 to 2 with its type and contents' length.
fn target_state(conn: &mut Conn) -> Vec<String> {
    let mut state = Vec::new();
    for db in 0..3 {
        conn.cmd(&["SELECT", &db.to_string()]);
        for key in conn.cmd(&["KEYS", "*"]).items() {
            let key = key.text();
            let kind = conn.cmd(&["TYPE", &key]).text();
            let ttl = matches!(conn.cmd(&["TTL", &key]), V::Int(t) if t > 0);
            state.push(format!("{db}:{key}:{kind}:{ttl}"));
        }
    }
    conn.cmd(&["SELECT", "0"]);
    state.sort();
    state
}

/// RESTORE is replicated (and logged) as Redis's: the command as sent, a relative TTL
/// made absolute with ABSTTL added; with no TTL, or ABSTTL given, as it was sent.
#[test]
fn restore_is_replicated_in_redis_s_form() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let cli = binary.with_file_name("redis-cli");
    let stream = |port: u16| -> Vec<String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = client.get_connection().unwrap();
        run(&mut conn, &["SET", "source", "bar"]);
        let payload: Vec<u8> = redis::cmd("DUMP").arg("source").query(&mut conn).unwrap();
        let far = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 100_000)
            .to_string();
        let restore = |words: &[&str]| -> Vec<Vec<u8>> {
            let mut command: Vec<Vec<u8>> = vec![b"RESTORE".to_vec(), words[0].into()];
            command.push(words[1].into());
            command.push(payload.clone());
            command.extend(words[2..].iter().map(|w| w.as_bytes().to_vec()));
            command
        };
        let commands = vec![
            restore(&["a", "0"]),
            restore(&["b", "100000"]),
            restore(&["c", &far, "absttl"]),
            restore(&["a", "0", "REPLACE"]),
            restore(&["d", "100000", "REPLACE", "IDLETIME", "10"]),
        ];
        common::replication::stream_of(&cli, port, &commands)
            .into_iter()
            // The absolute times and the payload's bytes differ from run to run.
            .map(|line| {
                let words: Vec<&str> = line.split("\",\"").collect();
                let mut shape = vec![words[0].to_string(), words[1].to_string()];
                shape.push(if words[2] == "0" { "0" } else { "<ms>" }.to_string());
                shape.extend(words[4..].iter().map(|w| w.to_string()));
                shape.join(" ")
            })
            .collect()
    };
    let redis_dir = temp_dir();
    let redis = RedisOracle::start_with(&binary, redis_dir.path(), &["--appendonly", "no"]);
    let theirs = stream(redis.port);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let ours = stream(server.port);
    assert_eq!(ours, theirs);
    assert_eq!(
        ours,
        [
            "\"restore a 0",
            "\"restore b <ms> absttl\"",
            "\"restore c <ms> absttl\"",
            "\"restore a 0 replace\"",
            "\"restore d <ms> replace idletime 10 absttl\""
        ]
    );
}
