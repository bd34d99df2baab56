//! Pub/sub end to end, against the real `tessera-server` binary: subscriptions and
//! messages through the `redis` crate, raw RESP2 and RESP3 sessions compared byte for byte
//! with a real redis-server 7.0 (confirmations, messages, push frames, the subscribed
//! context's errors, PING, RESET, PUBSUB introspection), CLIENT LIST and INFO, what the
//! log holds (nothing), and the `pubsub` class of `client-output-buffer-limit`: a
//! subscriber that stops reading is disconnected and the server's memory stays bounded.
//! And redis-py's `PubSub`, driven by `tests/python/pubsub_client.py`.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The last command of every raw script: its reply (`$N marker` or, for a RESP2
/// subscriber, `*2 pong marker`) ends with the marker, so everything before it is the
/// script's replies and the messages delivered meanwhile.
const MARKER: &str = "end-of-script-marker";

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Sends `script` (inline commands, one a line) and returns what comes back before the
/// marker's reply.
fn run_script(stream: &mut TcpStream, script: &str) -> String {
    let mut bytes = script.replace('\n', "\r\n").into_bytes();
    bytes.extend_from_slice(format!("PING {MARKER}\r\n").as_bytes());
    stream.write_all(&bytes).unwrap();
    let end = format!("{MARKER}\r\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut reply = Vec::new();
    while !reply.ends_with(end.as_bytes()) {
        assert!(
            Instant::now() < deadline,
            "no marker after {script:?}: {}",
            String::from_utf8_lossy(&reply)
        );
        let (more, closed) = read_bytes(stream, 1, Duration::from_secs(1));
        reply.extend(more);
        assert!(!closed, "closed: {}", String::from_utf8_lossy(&reply));
    }
    let text = String::from_utf8(reply).unwrap();
    // The marker's own reply, in either shape, is cut off.
    let cut = text
        .rfind("*2\r\n$4\r\npong\r\n")
        .filter(|&at| text[at..].matches("\r\n").count() == 5)
        .unwrap_or_else(|| text.rfind(&format!("${}\r\n", MARKER.len())).unwrap());
    normalize(&text[..cut])
}

/// HELLO's reply carries the connection's id, which differs between servers.
fn normalize(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("$2\r\nid\r\n:") {
        let start = at + "$2\r\nid\r\n:".len();
        out.push_str(&rest[..start]);
        out.push_str("<id>");
        let digits = rest[start..]
            .find("\r\n")
            .expect("an integer ends with CRLF");
        rest = &rest[start + digits..];
    }
    out.push_str(rest);
    out.replace("\r\n", " ")
}

/// Steps of a conversation between several connections: (connection index, script).
type Conversation = &'static [(usize, &'static str)];

/// Runs a conversation on a server and returns every step's output, labelled.
fn converse(port: u16, connections: usize, steps: Conversation) -> Vec<String> {
    let mut streams: Vec<TcpStream> = (0..connections).map(|_| connect(port)).collect();
    steps
        .iter()
        .map(|(index, script)| {
            let output = run_script(&mut streams[*index], script);
            format!("[{index}] {script:?} -> {output}")
        })
        .collect()
}

/// Sessions whose every byte must match Redis 7.0. (Redis keeps channels and patterns
/// in hash tables whose order it does not fix: UNSUBSCRIBE without arguments confirms,
/// PUBSUB CHANNELS lists, and a message matching two patterns of one client arrives, in
/// that order. These sessions never depend on it.)
const CONVERSATIONS: &[(&str, usize, Conversation)] = &[
    (
        "RESP2 subscribed context",
        1,
        &[(
            0,
            "SUBSCRIBE a\nSUBSCRIBE a\nPING\nPING hi\nGET x\nCONFIG GET maxclients\nMULTI\n\
             PSUBSCRIBE p*\nSSUBSCRIBE s\nPUNSUBSCRIBE\nPUNSUBSCRIBE nope\nSUNSUBSCRIBE s\n\
             UNSUBSCRIBE\nUNSUBSCRIBE\nGET x\nPING\n",
        )],
    ),
    (
        "RESP3 has no subscribed context",
        1,
        &[(
            0,
            "HELLO 3\nSUBSCRIBE a\nGET x\nPING\nPUBLISH a self\nPSUBSCRIBE *\nPUBLISH a twice\n\
             PUBSUB NUMSUB a b\nPUBSUB CHANNELS\nPUBSUB NUMPAT\nPUBSUB SHARDNUMSUB a\n\
             UNSUBSCRIBE a\nPUNSUBSCRIBE\nUNSUBSCRIBE\nHELLO 2\nPING\n",
        )],
    ),
    (
        "a RESP3 subscriber switched to RESP2 enters the subscribed context",
        1,
        &[(0, "HELLO 3\nSUBSCRIBE a\nHELLO 2\nGET x\nRESET\nGET x\n")],
    ),
    (
        "RESET leaves every subscription and MULTI",
        2,
        &[
            (
                0,
                "SUBSCRIBE a\nPSUBSCRIBE a*\nSSUBSCRIBE a\nRESET\nGET x\n",
            ),
            (
                1,
                "PUBLISH a m\nSPUBLISH a m\nPUBSUB NUMSUB a\nPUBSUB NUMPAT\n",
            ),
            (1, "MULTI\nSET k v\nRESET\nEXEC\nGET k\n"),
        ],
    ),
    (
        "subscriptions inside MULTI",
        2,
        &[
            (0, "MULTI\nSUBSCRIBE a\nPUBLISH a inside\nEXEC\nPING\n"),
            (1, "PUBLISH a outside\n"),
            (0, ""),
        ],
    ),
    (
        "messages to RESP2 and RESP3 subscribers",
        3,
        &[
            (
                0,
                "SUBSCRIBE news\nPSUBSCRIBE n*\nPSUBSCRIBE x*\nPSUBSCRIBE x*\n",
            ),
            (
                1,
                "HELLO 3\nSUBSCRIBE news\nSSUBSCRIBE news\nPSUBSCRIBE n*\n",
            ),
            (
                2,
                "PUBLISH news hello\nSPUBLISH news shard\nPUBLISH nothing here\n\
                 PUBLISH xyz \"\"\nPUBLISH other nobody\nSPUBLISH other nobody\n",
            ),
            (0, ""),
            (1, ""),
            (
                2,
                "PUBSUB NUMSUB news nothing\nPUBSUB SHARDNUMSUB news other\nPUBSUB NUMPAT\n\
                 PUBSUB CHANNELS x*\nPUBSUB SHARDCHANNELS\nPUBSUB CHANNELS nothing\n\
                 PUBSUB NUMSUB\nPUBSUB SHARDNUMSUB\n",
            ),
            (0, "PUNSUBSCRIBE x* nope\nUNSUBSCRIBE news\nPUNSUBSCRIBE\n"),
            (2, "PUBLISH news after\nPUBSUB NUMPAT\nPUBSUB NUMSUB news\n"),
            (1, ""),
        ],
    ),
    (
        "CLIENT REPLY OFF and SKIP silence replies but not pub/sub's, in RESP3 and RESP2",
        3,
        &[
            (
                0,
                "HELLO 3\nCLIENT REPLY OFF\nSUBSCRIBE news other\nPSUBSCRIBE n*\nSUBSCRIBE\nPING\n\
                 CLIENT REPLY ON\n",
            ),
            (
                1,
                "CLIENT REPLY SKIP\nSUBSCRIBE news\nCLIENT REPLY OFF\nPSUBSCRIBE n*\nPING\n\
                 CLIENT REPLY ON\n",
            ),
            (2, "PUBLISH news hello\n"),
            (0, ""),
            (1, ""),
            (
                0,
                "UNSUBSCRIBE news\nCLIENT REPLY SKIP\nPUNSUBSCRIBE\nUNSUBSCRIBE\n",
            ),
            (1, "UNSUBSCRIBE\nPUNSUBSCRIBE\n"),
        ],
    ),
    (
        "PUBSUB's errors and help",
        1,
        &[(
            0,
            "PUBSUB\nPUBSUB FOO\nPUBSUB NUMPAT x\nPUBSUB CHANNELS a b\nPUBSUB HELP\n\
             PUBSUB HELP x\nPUBSUB SHARDCHANNELS a b\nSUBSCRIBE\nPSUBSCRIBE\nSSUBSCRIBE\n\
             PUBLISH a\nSPUBLISH a b c\nRESET x\n",
        )],
    ),
    (
        "a script publishes, to others and to its RESP3 caller, and its writes raise events",
        3,
        &[
            (0, "SUBSCRIBE news\nPSUBSCRIBE __keyevent@0__:*\n"),
            (1, "HELLO 3\nSUBSCRIBE own\n"),
            (
                2,
                "CONFIG SET notify-keyspace-events E$\n\
                 EVAL \"redis.call('publish','news','one') redis.call('set',KEYS[1],'v') \
                 return redis.call('publish','own','two')\" 1 sk\n\
                 CONFIG SET notify-keyspace-events \"\"\n",
            ),
            (0, ""),
            (1, ""),
            (
                1,
                "EVAL \"redis.call('publish','news','three') return redis.call('publish','own','self')\" 0\n",
            ),
            (0, ""),
        ],
    ),
];

#[test]
fn pubsub_sessions_match_redis_byte_for_byte() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_path);
    let mut differences = Vec::new();
    for (name, connections, steps) in CONVERSATIONS {
        let ours = converse(server.port, *connections, steps);
        let theirs = converse(oracle.port, *connections, steps);
        if ours != theirs {
            differences.push(format!(
                "{name}:\n  tessera: {ours:#?}\n  redis:   {theirs:#?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn a_resp3_client_receives_its_own_message_before_the_reply() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut stream = connect(server.port);
    let output = run_script(&mut stream, "HELLO 3\nSUBSCRIBE me\nPUBLISH me hi\nGET x\n");
    let after_hello = output.split("modules *0 ").nth(1).unwrap();
    assert_eq!(
        after_hello,
        ">3 $9 subscribe $2 me :1 >3 $7 message $2 me $2 hi :1 _ "
    );
}

#[test]
fn messages_reach_channel_and_pattern_subscribers_through_a_client_library() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut publisher = server.connection();
    let mut subscriber_connection = server.connection();
    let mut subscriber = subscriber_connection.as_pubsub();
    subscriber.subscribe("orders").unwrap();
    subscriber.psubscribe("events.*").unwrap();
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("orders")
        .arg("one")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(receivers, 1);
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("events.login")
        .arg(b"\x00binary\xff".as_slice())
        .query(&mut publisher)
        .unwrap();
    assert_eq!(receivers, 1);
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("unheard")
        .arg("x")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(receivers, 0);
    subscriber
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let first = subscriber.get_message().unwrap();
    assert_eq!(first.get_channel_name(), "orders");
    assert_eq!(first.get_payload_bytes(), b"one");
    assert!(first.get_pattern::<Option<String>>().unwrap().is_none());
    let second = subscriber.get_message().unwrap();
    assert_eq!(second.get_channel_name(), "events.login");
    assert_eq!(second.get_payload_bytes(), b"\x00binary\xff");
    assert_eq!(second.get_pattern::<String>().unwrap(), "events.*");
    // Nothing else was sent to it.
    subscriber
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(subscriber.get_message().is_err(), "an unexpected message");
    // Leaving pub/sub mode (the library unsubscribes from everything) gives back a
    // connection that runs commands.
    drop(subscriber);
    subscriber_connection
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        run(&mut subscriber_connection, &["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
    let numsub: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("orders")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(numsub[1], redis::Value::Int(0));
}

#[test]
fn introspection_client_list_and_info_count_subscriptions() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut subscriber = connect(server.port);
    run_script(
        &mut subscriber,
        "CLIENT SETNAME listener\nSUBSCRIBE a b\nPSUBSCRIBE p*\nSSUBSCRIBE s\n",
    );
    let mut admin = server.connection();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
    let line = list
        .lines()
        .find(|l| l.contains("name=listener"))
        .unwrap_or_else(|| panic!("no subscriber in {list}"));
    for field in ["flags=P ", "sub=2 ", "psub=1 ", "ssub=1 ", "cmd=ping "] {
        assert!(line.contains(field), "{field} missing from {line}");
    }
    let pubsub_clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap();
    assert_eq!(pubsub_clients.lines().count(), 1);
    assert!(pubsub_clients.contains("name=listener"));
    let normal_clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    assert!(!normal_clients.contains("name=listener"));
    assert_eq!(
        info_field(&mut admin, "pubsub_channels").as_deref(),
        Some("2")
    );
    assert_eq!(
        info_field(&mut admin, "pubsub_patterns").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut admin, "pubsubshard_channels").as_deref(),
        Some("1")
    );
    // A closed subscriber's subscriptions are gone.
    drop(subscriber);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut admin, "pubsub_channels").as_deref() != Some("0") {
        assert!(
            Instant::now() < deadline,
            "the subscriptions outlived the client"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        info_field(&mut admin, "pubsub_patterns").as_deref(),
        Some("0")
    );
    assert_eq!(
        info_field(&mut admin, "pubsubshard_channels").as_deref(),
        Some("0")
    );
}

#[test]
fn quit_in_the_subscribed_context_closes_and_ends_the_subscriptions() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut subscriber = connect(server.port);
    run_script(&mut subscriber, "SUBSCRIBE a b\nPSUBSCRIBE c*\n");
    let (reply, closed) = {
        subscriber.write_all(b"QUIT\r\nPING\r\n").unwrap();
        read_bytes(&mut subscriber, usize::MAX, Duration::from_secs(10))
    };
    assert_eq!(reply, b"+OK\r\n", "QUIT's reply, and nothing after it");
    assert!(closed);
    let mut admin = server.connection();
    let deadline = Instant::now() + Duration::from_secs(10);
    while numsub(&mut admin, "a") != 0
        || info_field(&mut admin, "pubsub_patterns").as_deref() != Some("0")
    {
        assert!(Instant::now() < deadline, "the subscriptions outlived QUIT");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn publish_changes_nothing_so_nothing_is_logged() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut subscriber = connect(server.port);
    run_script(&mut subscriber, "SUBSCRIBE c\n");
    let mut conn = server.connection();
    run(&mut conn, &["SET", "before", "1"]);
    let receivers = run(&mut conn, &["PUBLISH", "c", "not-in-the-log"]);
    assert_eq!(receivers, redis::Value::Int(1));
    run(&mut conn, &["MULTI"]);
    run(&mut conn, &["PUBLISH", "c", "nor-this"]);
    run(&mut conn, &["SPUBLISH", "c", "nor-that"]);
    run(&mut conn, &["EXEC"]);
    run(&mut conn, &["SET", "after", "1"]);
    let log = std::fs::read(server.last_incremental_file()).unwrap();
    let log = String::from_utf8_lossy(&log);
    assert!(log.contains("before") && log.contains("after"), "{log}");
    assert!(!log.to_ascii_lowercase().contains("publish"), "{log}");
    let messages = run_script(&mut subscriber, "");
    assert_eq!(
        messages,
        "*3 $7 message $1 c $14 not-in-the-log *3 $7 message $1 c $8 nor-this "
    );
}

/// Publishes `total_bytes` in messages of `message_bytes` on `channel`, pipelined. With
/// `paced_by`, waits whenever more than 2 MB are ahead of what that counter says a
/// reading subscriber took.
fn flood(
    conn: &mut redis::Connection,
    channel: &str,
    message_bytes: usize,
    total_bytes: usize,
    paced_by: Option<&AtomicUsize>,
) {
    let payload = vec![b'x'; message_bytes];
    let mut sent = 0;
    while sent < total_bytes {
        if let Some(taken) = paced_by {
            let deadline = Instant::now() + Duration::from_secs(30);
            while sent > taken.load(Ordering::Relaxed) + 2 * 1024 * 1024 {
                assert!(Instant::now() < deadline, "the reading subscriber stalled");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let mut pipe = redis::pipe();
        for _ in 0..16 {
            pipe.cmd("PUBLISH").arg(channel).arg(payload.as_slice());
            sent += message_bytes;
        }
        let _: Vec<i64> = pipe.query(conn).unwrap();
    }
}

/// A field of /proc/<pid>/status in bytes (`VmRSS:` now, `VmHWM:` the peak).
fn memory_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

fn numsub(conn: &mut redis::Connection, channel: &str) -> i64 {
    let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(conn)
        .unwrap();
    match reply[1] {
        redis::Value::Int(n) => n,
        ref other => panic!("NUMSUB gave {other:?}"),
    }
}

#[test]
fn a_subscriber_that_stops_reading_is_disconnected_at_the_hard_limit() {
    const MB: usize = 1024 * 1024;
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &["--client-output-buffer-limit", "pubsub", "8mb", "0", "0"],
    );
    let mut slow = connect(server.port);
    run_script(&mut slow, "SUBSCRIBE firehose\n");
    // A subscriber that reads everything (the publisher keeps within 2 MB of it), to
    // show that only the one that stopped reading is cut off.
    let taken = Arc::new(AtomicUsize::new(0));
    let progress = taken.clone();
    let mut reader_connection = server.connection();
    let reader = std::thread::spawn(move || {
        let mut reader = reader_connection.as_pubsub();
        reader.subscribe("firehose").unwrap();
        reader
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut bytes = 0;
        loop {
            let message = reader.get_message().unwrap();
            if message.get_payload_bytes() == b"done" {
                return bytes;
            }
            bytes += message.get_payload_bytes().len();
            progress.store(bytes, Ordering::Relaxed);
        }
    });
    let mut publisher = server.connection();
    while numsub(&mut publisher, "firehose") < 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let rss_before = memory_field(server.pid(), "VmRSS:");
    // Far more than the limit, the socket buffers and any slack together.
    let total = 256 * MB;
    flood(&mut publisher, "firehose", 64 * 1024, total, Some(&taken));
    run(&mut publisher, &["PUBLISH", "firehose", "done"]);
    assert_eq!(
        reader.join().unwrap(),
        total,
        "the reading subscriber lost messages"
    );
    assert_eq!(
        numsub(&mut publisher, "firehose"),
        0,
        "the slow subscriber is still subscribed"
    );
    let peak = memory_field(server.pid(), "VmHWM:");
    assert!(
        peak < rss_before + 64 * MB as u64,
        "the server grew from {rss_before} to a peak of {peak} bytes"
    );
    assert!(
        server
            .log()
            .contains("scheduled to be closed ASAP for overcoming of output buffer limits (Hard)"),
        "{}",
        server.log()
    );
    // What it receives ends: the server closed it.
    let (_, closed) = read_bytes(&mut slow, usize::MAX, Duration::from_secs(20));
    assert!(closed, "the slow subscriber was never disconnected");
}

#[test]
fn a_subscriber_over_the_soft_limit_for_its_seconds_is_disconnected() {
    const MB: usize = 1024 * 1024;
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &["--client-output-buffer-limit", "pubsub", "0", "1mb", "1"],
    );
    let mut slow = connect(server.port);
    run_script(&mut slow, "SUBSCRIBE c\n");
    let mut publisher = server.connection();
    // Well past what the socket buffers take, so that the server holds over 1 MB.
    flood(&mut publisher, "c", 64 * 1024, 48 * MB, None);
    std::thread::sleep(Duration::from_millis(1500));
    // The limit is checked as output is added: one more message finds it over for
    // more than a second.
    run(&mut publisher, &["PUBLISH", "c", "last"]);
    assert_eq!(numsub(&mut publisher, "c"), 0, "still subscribed");
    assert!(
        server
            .log()
            .contains("scheduled to be closed ASAP for overcoming of output buffer limits (Soft)"),
        "{}",
        server.log()
    );
    let (_, closed) = read_bytes(&mut slow, usize::MAX, Duration::from_secs(20));
    assert!(closed, "the slow subscriber was never disconnected");
}

#[test]
fn redis_py_pubsub_works_against_tessera() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/pubsub_client.py");
    // No skip: without python3 and redis-py (scripts/test installs them from
    // tests/python/requirements.txt) this test fails.
    let output = std::process::Command::new("python3")
        .arg(&script)
        .arg(server.port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim_end() == "ok",
        "redis-py's PubSub failed against Tessera ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
