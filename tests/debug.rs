//! DEBUG against a real redis-server 7.0, side by side: DIGEST and DIGEST-VALUE equal to
//! Redis's over a dataset of every type and encoding Tessera has (several databases,
//! expiries); PROTOCOL and HELP byte for byte in RESP2 and RESP3; the errors; OBJECT's
//! line; the `enable-debug-command` gate; SLEEP blocking the server; SET-ACTIVE-EXPIRE.
//! RELOAD and LOADAOF are in `tests/reload.rs`.

mod common;

use common::debug_dataset::*;
use common::raw_client::{Conn, V};
use common::side_by_side::{raw_connect as connect, raw_reply, split, words};
use common::*;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Each line's reply bytes from both servers, where they differ.
fn byte_differences(ours: &mut TcpStream, theirs: &mut TcpStream, lines: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for line in lines {
        let args = split(line);
        let tessera = raw_reply(ours, &args);
        let redis = raw_reply(theirs, &args);
        if tessera != redis {
            found.push(format!(
                "{line}\n  tessera: {:?}\n  redis:   {:?}",
                String::from_utf8_lossy(&tessera),
                String::from_utf8_lossy(&redis)
            ));
        }
    }
    found
}

#[test]
fn digest_and_digest_value_are_redis_s_for_every_type() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut theirs = Conn::new(redis.port);
    let mut ours = Conn::new(server.port);
    // An empty dataset is 40 zeros.
    assert_eq!(digest(&mut ours), ZERO_DIGEST);
    assert_eq!(digest(&mut theirs), ZERO_DIGEST);

    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    let tessera = value_digests(&mut ours);
    let redis_values = value_digests(&mut theirs);
    assert_eq!(tessera, redis_values, "DIGEST-VALUE and OBJECT ENCODING");
    let encodings: std::collections::BTreeSet<String> = tessera
        .iter()
        .map(|(_, _, _, encoding)| encoding.text())
        .collect();
    for encoding in [
        "int",
        "embstr",
        "raw",
        "quicklist",
        "listpack",
        "hashtable",
        "intset",
        "skiplist",
    ] {
        assert!(
            encodings.contains(encoding),
            "no {encoding} value: {encodings:?}"
        );
    }
    let before = digest(&mut ours);
    assert_ne!(before, ZERO_DIGEST);
    assert_eq!(before, digest(&mut theirs));

    // A change anywhere changes it, and in both alike: a list's order, an expiry (not
    // its time), a key in another database.
    for change in [
        "LSET list 0 changed",
        "PERSIST volatile",
        "EXPIRE volatile 50000",
        "SADD big-intset 600",
        "ZINCRBY zset 1 a",
        "HSET hash f1 other",
        "SELECT 3",
        "SET str other",
        "SELECT 0",
    ] {
        let args = split(change);
        let (a, b) = (ours.call(&args), theirs.call(&args));
        assert_eq!(a, b, "{change}");
        assert_eq!(digest(&mut ours), digest(&mut theirs), "after {change}");
    }
    assert_ne!(digest(&mut ours), before);
    // The expiry's time is not digested: only whether there is one.
    ours.cmd(&["EXPIRE", "volatile", "70000"]);
    theirs.cmd(&["EXPIRE", "volatile", "90000"]);
    assert_eq!(digest(&mut ours), digest(&mut theirs));
}

#[test]
fn protocol_and_help_are_redis_s_byte_for_byte() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut lines: Vec<String> = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "TRUE", "nosuch",
    ]
    .iter()
    .map(|kind| format!("DEBUG PROTOCOL {kind}"))
    .collect();
    lines.push("DEBUG HELP".into());
    lines.push("debug help".into());
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    for resp3 in [false, true] {
        let mut ours = connect(server.port);
        let mut theirs = connect(redis.port);
        if resp3 {
            raw_reply(&mut ours, &split("HELLO 3"));
            raw_reply(&mut theirs, &split("HELLO 3"));
        }
        let found = byte_differences(&mut ours, &mut theirs, &lines);
        assert!(
            found.is_empty(),
            "RESP{}:\n{}",
            if resp3 { 3 } else { 2 },
            found.join("\n")
        );
    }
}

#[test]
fn subcommands_and_their_errors_answer_as_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut ours = connect(server.port);
    let mut theirs = connect(redis.port);
    let long_name = format!("DEBUG {}", "y".repeat(200));
    let lines = [
        "DEBUG",
        "DEBUG nosuch",
        "DEBUG nosuch a b",
        &long_name,
        "DEBUG help extra",
        "DEBUG DIGEST extra",
        "DEBUG DIGEST-VALUE",
        "DEBUG OBJECT",
        "DEBUG OBJECT no-such-key",
        "DEBUG OBJECT a b",
        "DEBUG PROTOCOL",
        "DEBUG SLEEP",
        "DEBUG SLEEP 0",
        "DEBUG SLEEP 0.01",
        "DEBUG SLEEP abc",
        "DEBUG SLEEP -1",
        "DEBUG SLEEP 1e400",
        "DEBUG SET-ACTIVE-EXPIRE",
        "DEBUG SET-ACTIVE-EXPIRE 1",
        "DEBUG set-active-expire yes",
        "DEBUG SET-ACTIVE-EXPIRE 1",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 1kb",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 4294967296",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 5gb",
        "DEBUG QUICKLIST-PACKED-THRESHOLD -1",
        "DEBUG QUICKLIST-PACKED-THRESHOLD abc",
        "DEBUG QUICKLIST-PACKED-THRESHOLD 0",
        "DEBUG CHANGE-REPL-ID",
        "DEBUG CHANGE-REPL-ID x",
        "DEBUG JMAP",
        "DEBUG STRINGMATCH-LEN",
        "DEBUG RELOAD NOSUCH",
        "DEBUG RELOAD MERGE NOSUCH",
        "DEBUG ERROR",
        "DEBUG ERROR FOO",
        "DEBUG ERROR WRONGTYPE-ish",
        "DEBUG LOG",
        "DEBUG LOG hello",
        "DEBUG CLIENT-EVICTION",
        "DEBUG CLUSTERLINK KILL all id",
        "DEBUG CLUSTERLINK KILL all",
        "DEBUG CLUSTERLINK nosuch all id",
        "DEBUG REPLYBUFFER",
    ];
    let found = byte_differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // SET-DISABLE-DENY-SCRIPTS lets scripts run `noscript` commands (CLIENT GETNAME).
    for line in [
        "DEBUG SET-DISABLE-DENY-SCRIPTS 0",
        "EVAL return(redis.call('client','getname')) 0",
        "DEBUG SET-DISABLE-DENY-SCRIPTS 1",
        "EVAL return(redis.call('client','getname')) 0",
        "DEBUG SET-DISABLE-DENY-SCRIPTS 0",
        "EVAL return(redis.call('client','getname')) 0",
    ] {
        let (mine, redis) = (
            raw_reply(&mut ours, &split(line)),
            raw_reply(&mut theirs, &split(line)),
        );
        assert_eq!(
            String::from_utf8_lossy(&mine),
            String::from_utf8_lossy(&redis),
            "{line}"
        );
    }
    // An error DEBUG ERROR makes is written as is: newlines become spaces, and no error
    // statistic counts it, as in Redis.
    let error = raw_reply(&mut ours, &[b"DEBUG", b"ERROR", b"two\r\nlines"]);
    assert_eq!(
        error,
        raw_reply(&mut theirs, &[b"DEBUG", b"ERROR", b"two\r\nlines"])
    );
    assert_eq!(error, b"-two  lines\r\n");
    let errors = |stream: &mut TcpStream| {
        let info = raw_reply(stream, &split("INFO stats"));
        String::from_utf8_lossy(&info)
            .lines()
            .find(|line| line.starts_with("total_error_replies:"))
            .map(str::to_string)
    };
    assert_eq!(errors(&mut ours), errors(&mut theirs));
}

#[test]
fn populate_makes_redis_s_keys_and_refuses_a_count_memory_cannot_hold() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &["--appendfsync", "always"]);
    let mut ours = connect(server.port);
    let mut theirs = connect(redis.port);
    let long_prefix = format!("DEBUG POPULATE 2 {} 3", "p".repeat(200));
    let lines = [
        "SET key:1 kept",
        "DEBUG POPULATE 3",
        "DEBUG POPULATE 2 short 4",
        "DEBUG POPULATE 2 padded 12",
        "DEBUG POPULATE 2 plain 0",
        "DEBUG POPULATE 0",
        // Both names cut at 127 bytes, to one key.
        &long_prefix,
        "DEBUG POPULATE -1",
        "DEBUG POPULATE abc",
        "DEBUG POPULATE 1 x -3",
        "DEBUG POPULATE 1 x abc",
        "DEBUG POPULATE",
        "DEBUG POPULATE 1 x 2 extra",
        "DBSIZE",
        "GET key:0",
        "GET key:1",
        "GET short:1",
        "GET padded:1",
        "GET plain:0",
        "DEBUG DIGEST",
    ];
    let found = byte_differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert_eq!(
        raw_reply(&mut ours, &split("GET padded:1")),
        b"$12\r\nvalue:1\0\0\0\0\0\r\n"
    );
    assert_eq!(raw_reply(&mut ours, &split("DBSIZE")), b":10\r\n");

    // Redis 7.0.15 fills 2^32 keys until the kernel kills it; Tessera refuses a count
    // whose keys could not fit in physical memory, and stays up.
    for line in [
        "DEBUG POPULATE 4294967296",
        "DEBUG POPULATE 1000000 big 100000000",
    ] {
        assert_eq!(
            raw_reply(&mut ours, &split(line)),
            b"-ERR OOM in dictTryExpand\r\n",
            "{line}"
        );
    }
    assert_eq!(raw_reply(&mut ours, &split("DBSIZE")), b":10\r\n");

    // As in Redis, the keys are not logged: only the SET survives a crash.
    server.kill9();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(dbsize(&mut conn), 1);
    assert_eq!(
        run(&mut conn, &["GET", "key:1"]),
        redis::Value::BulkString(b"kept".to_vec())
    );
}

/// DEBUG OBJECT's fields, by name (`Value at` is `at`).
fn object_fields(line: &str) -> std::collections::BTreeMap<String, String> {
    let line = line.strip_prefix("Value at:").expect("Redis's line");
    let mut fields = std::collections::BTreeMap::new();
    let mut words = line.split(' ');
    fields.insert("at".to_string(), words.next().unwrap().to_string());
    for word in words {
        let (name, value) = word.split_once(':').expect("name:value");
        fields.insert(name.to_string(), value.to_string());
    }
    fields
}

#[test]
fn debug_object_is_redis_s_line_with_the_same_encoding() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    for key in &dataset_keys()[0].1 {
        let line = |conn: &mut Conn| match conn.call(&[b"DEBUG", b"OBJECT", key]) {
            V::Simple(line) => object_fields(&line),
            other => panic!("DEBUG OBJECT: {other:?}"),
        };
        let (tessera, redis) = (line(&mut ours), line(&mut theirs));
        let name = String::from_utf8_lossy(key);
        // The same fields in the same order as Redis's.
        let names = |fields: &std::collections::BTreeMap<String, String>| {
            fields.keys().cloned().collect::<Vec<_>>()
        };
        assert_eq!(names(&tessera), names(&redis), "{name}");
        assert!(tessera["at"].starts_with("0x"), "{name}: {tessera:?}");
        for field in ["encoding", "refcount", "ql_listpack_max", "ql_compressed"] {
            assert_eq!(tessera.get(field), redis.get(field), "{name}: {field}");
        }
        let encoding = ours.call(&[b"OBJECT", b"ENCODING", key]).text();
        assert_eq!(tessera["encoding"], encoding, "{name}");
        for field in ["serializedlength", "lru", "lru_seconds_idle"] {
            assert!(
                tessera[field].parse::<u64>().is_ok(),
                "{name}: {field} {tessera:?}"
            );
        }
    }
    // Values too short to compress are serialised alike (LZF's output may differ).
    for key in ["str", "int", "small-int", "negative"] {
        let length = |conn: &mut Conn| {
            object_fields(&conn.cmd(&["DEBUG", "OBJECT", key]).text())["serializedlength"].clone()
        };
        assert_eq!(length(&mut ours), length(&mut theirs), "{key}");
    }
}

#[test]
fn enable_debug_command_refuses_as_redis_does() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    // Both at the default: no.
    let redis = RedisOracle::start_with(&binary, redis_dir.path(), &["--appendonly", "no"]);
    let server = start_server(dir.path(), &[]);
    let mut ours = connect(server.port);
    let mut theirs = connect(redis.port);
    let refused = "-ERR DEBUG command not allowed. If the enable-debug-command option is set \
                   to \"local\", you can run it from a local connection, otherwise you need \
                   to set this option in the configuration file, and then restart the \
                   server.\r\n";
    assert_eq!(
        String::from_utf8_lossy(&raw_reply(&mut ours, &split("DEBUG DIGEST"))),
        refused
    );
    assert_eq!(
        String::from_utf8_lossy(&raw_reply(&mut theirs, &split("DEBUG DIGEST"))),
        refused
    );
    let lines = [
        "CONFIG GET enable-debug-command",
        "DEBUG HELP",
        "DEBUG",
        "DEBUG nosuch",
        "DEBUG SLEEP 10",
        "CONFIG SET enable-debug-command yes",
    ];
    let found = byte_differences(&mut ours, &mut theirs, &lines);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // Inside MULTI the refusal fails the transaction.
    let (mut ours, mut theirs) = (Conn::new(server.port), Conn::new(redis.port));
    for line in [
        "MULTI",
        "DEBUG DIGEST",
        "SET a 1",
        "EXEC",
        "CONFIG SET requirepass secret",
    ] {
        assert_eq!(ours.cmd(&words(line)), theirs.cmd(&words(line)), "{line}");
    }
    // Before authentication the gate answers, not NOAUTH (the arity comes first).
    let (mut ours, mut theirs) = (Conn::new(server.port), Conn::new(redis.port));
    for line in ["DEBUG HELP", "GET a", "DEBUG"] {
        let reply = ours.cmd(&words(line));
        assert_eq!(reply, theirs.cmd(&words(line)), "{line}");
        assert!(matches!(reply, V::Error(_)), "{line}: {reply:?}");
    }
    // Every refusal is a rejected call, as Redis counts them.
    let rejected = |conn: &mut Conn| {
        assert_eq!(conn.cmd(&["AUTH", "secret"]), V::Simple("OK".into()));
        conn.cmd(&["INFO", "commandstats"])
            .text()
            .lines()
            .find(|line| line.starts_with("cmdstat_debug:"))
            .map(|line| {
                line.split(',')
                    .filter(|field| !field.starts_with("usec"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
    };
    let counted = rejected(&mut ours);
    assert_eq!(counted, rejected(&mut theirs));
    assert_eq!(
        counted.as_deref(),
        Some("cmdstat_debug:calls=0,rejected_calls=8,failed_calls=0")
    );

    // `local`: allowed from the loopback interface (and `yes` from anywhere).
    for setting in ["local", "yes"] {
        let (local_redis_dir, local_dir) = (temp_dir(), temp_dir());
        let redis = RedisOracle::start_with(
            &binary,
            local_redis_dir.path(),
            &["--appendonly", "no", "--enable-debug-command", setting],
        );
        let server = start_server(local_dir.path(), &["--enable-debug-command", setting]);
        let (mut ours, mut theirs) = (connect(server.port), connect(redis.port));
        let found = byte_differences(
            &mut ours,
            &mut theirs,
            &[
                "CONFIG GET enable-debug-command",
                "DEBUG DIGEST",
                "DEBUG SLEEP 0",
            ],
        );
        assert!(found.is_empty(), "{setting}: {}", found.join("\n"));
        assert_eq!(raw_reply(&mut ours, &split("DEBUG SLEEP 0")), b"+OK\r\n");
    }
}

#[test]
fn sleep_blocks_every_client() {
    let dir = temp_dir();
    let server = tessera_with_debug(dir.path(), &[]);
    // Fractional seconds, whole microseconds.
    let mut sleeper = Conn::new(server.port);
    let started = Instant::now();
    assert_eq!(
        sleeper.cmd(&["DEBUG", "SLEEP", "0.3"]),
        V::Simple("OK".into())
    );
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Another client's command that arrives during the sleep waits for its end: it sees
    // the sleeper's last command done (CLIENT LIST `cmd=debug`) and comes no sooner. If
    // the sleep had not started when it ran (a loaded machine), try again.
    for attempt in 0.. {
        assert!(attempt < 10, "the sleep never came first");
        let mut sleeper = Conn::new(server.port);
        sleeper.cmd(&["CLIENT", "SETNAME", "sleeper"]);
        let mut other = Conn::new(server.port);
        let started = Instant::now();
        sleeper.send(&[b"DEBUG", b"SLEEP", b"1"]);
        std::thread::sleep(Duration::from_millis(100));
        let list = other.cmd(&["CLIENT", "LIST"]).text();
        let answered = started.elapsed();
        assert_eq!(sleeper.read(), V::Simple("OK".into()));
        let line = list
            .lines()
            .find(|line| line.contains("name=sleeper"))
            .expect("the sleeper is listed")
            .to_string();
        if line.contains(" cmd=debug ") {
            assert!(
                answered >= Duration::from_secs(1),
                "answered after {answered:?}: {line}"
            );
            return;
        }
    }
}

#[test]
fn set_active_expire_0_leaves_expired_keys_to_lookups_as_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let server = tessera_with_debug(dir.path(), &[]);
    for port in [server.port, redis.port] {
        let mut conn = Conn::new(port);
        assert_eq!(
            conn.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
            V::Simple("OK".into())
        );
        conn.cmd(&["SET", "short", "v", "PX", "50"]);
        // Many cron runs: the active cycle would have deleted it.
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(conn.cmd(&["DBSIZE"]), V::Int(1), "port {port}");
        assert_eq!(conn.cmd(&["GET", "short"]), V::Bulk(None));
        assert_eq!(conn.cmd(&["DBSIZE"]), V::Int(0), "port {port}");
        // Back on: expired keys go without being looked up.
        assert_eq!(
            conn.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]),
            V::Simple("OK".into())
        );
        conn.cmd(&["SET", "short", "v", "PX", "50"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while conn.cmd(&["DBSIZE"]) != V::Int(0) {
            assert!(Instant::now() < deadline, "port {port}: never expired");
            std::thread::sleep(Duration::from_millis(20));
        }
        // PAUSE-CRON stops the cron, its active expiry with it, until it is resumed.
        assert_eq!(
            conn.cmd(&["DEBUG", "PAUSE-CRON", "1"]),
            V::Simple("OK".into())
        );
        conn.cmd(&["SET", "short", "v", "PX", "50"]);
        std::thread::sleep(Duration::from_millis(1000));
        assert_eq!(conn.cmd(&["DBSIZE"]), V::Int(1), "port {port}: paused");
        assert_eq!(
            conn.cmd(&["DEBUG", "PAUSE-CRON", "0"]),
            V::Simple("OK".into())
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while conn.cmd(&["DBSIZE"]) != V::Int(0) {
            assert!(
                Instant::now() < deadline,
                "port {port}: never expired after PAUSE-CRON 0"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
