//! Blocking commands with several real clients: wake-up order, timeouts, a key that
//! becomes ready inside a transaction, wrong types while waiting, disconnection, and what
//! the log records when a blocked client is served (the pop, never the blocking command),
//! checked by a restart.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

fn send(stream: &mut TcpStream, args: &[&str]) {
    stream.write_all(&encode(args)).unwrap();
}

/// Everything the server sent within `wait` (empty if nothing: still blocked).
fn received(stream: &mut TcpStream, wait: Duration) -> String {
    String::from_utf8_lossy(&read_for(stream, wait)).into_owned()
}

fn exchange(stream: &mut TcpStream, args: &[&str]) -> String {
    send(stream, args);
    received(stream, Duration::from_secs(2))
}

fn blocked_clients(server: &TestServer) -> String {
    info_field(&mut server.connection(), "blocked_clients").unwrap()
}

fn wait_blocked(server: &TestServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(server) != n.to_string() {
        assert!(Instant::now() < deadline, "clients never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn clients_are_served_in_the_order_they_blocked() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut first = server.raw();
    let mut second = server.raw();
    let mut third = server.raw();
    let mut pusher = server.raw();
    send(&mut first, &["BLPOP", "a", "q", "0"]);
    wait_blocked(&server, 1);
    send(&mut second, &["BRPOP", "q", "0"]);
    wait_blocked(&server, 2);
    send(&mut third, &["BLPOP", "q", "0"]);
    wait_blocked(&server, 3);
    assert_eq!(exchange(&mut pusher, &["RPUSH", "q", "x", "y"]), ":2\r\n");
    assert_eq!(
        received(&mut first, Duration::from_secs(2)),
        "*2\r\n$1\r\nq\r\n$1\r\nx\r\n"
    );
    assert_eq!(
        received(&mut second, Duration::from_secs(2)),
        "*2\r\n$1\r\nq\r\n$1\r\ny\r\n"
    );
    // The third found nothing left: still waiting.
    assert_eq!(received(&mut third, Duration::from_millis(200)), "");
    assert_eq!(blocked_clients(&server), "1");
    // A command sent while blocked waits its turn.
    send(&mut third, &["PING"]);
    assert_eq!(received(&mut third, Duration::from_millis(200)), "");
    exchange(&mut pusher, &["LPUSH", "q", "z"]);
    assert_eq!(
        received(&mut third, Duration::from_secs(2)),
        "*2\r\n$1\r\nq\r\n$1\r\nz\r\n+PONG\r\n"
    );
}

#[test]
fn a_timeout_answers_a_null_array_and_zero_waits_forever() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut client = server.raw();
    let started = Instant::now();
    assert_eq!(exchange(&mut client, &["BLPOP", "none", "0.3"]), "*-1\r\n");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert_eq!(
        exchange(&mut client, &["BLMOVE", "none", "x", "LEFT", "LEFT", "0.1"]),
        "*-1\r\n"
    );
    assert_eq!(
        exchange(&mut client, &["BZPOPMAX", "none", "0.1"]),
        "*-1\r\n"
    );
    send(&mut client, &["BLPOP", "none", "0"]);
    assert_eq!(received(&mut client, Duration::from_millis(700)), "");
    assert_eq!(blocked_clients(&server), "1");
    // A client that leaves while blocked is forgotten.
    drop(client);
    wait_blocked(&server, 0);
}

#[test]
fn a_wrong_type_keeps_the_client_waiting_and_a_transaction_wakes_it_once() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut waiter = server.raw();
    let mut writer = server.raw();
    send(&mut waiter, &["BLPOP", "k", "0"]);
    wait_blocked(&server, 1);
    exchange(&mut writer, &["SET", "k", "string"]);
    assert_eq!(received(&mut waiter, Duration::from_millis(200)), "");
    exchange(&mut writer, &["DEL", "k"]);
    exchange(&mut writer, &["MULTI"]);
    exchange(&mut writer, &["RPUSH", "k", "1", "2"]);
    exchange(&mut writer, &["LPOP", "k"]);
    assert_eq!(exchange(&mut writer, &["EXEC"]), "*2\r\n:2\r\n$1\r\n1\r\n");
    // Served after the whole transaction: it sees the state EXEC left.
    assert_eq!(
        received(&mut waiter, Duration::from_secs(2)),
        "*2\r\n$1\r\nk\r\n$1\r\n2\r\n"
    );
    // Inside a transaction a blocking command never blocks.
    exchange(&mut waiter, &["MULTI"]);
    exchange(&mut waiter, &["BLPOP", "empty", "0"]);
    exchange(&mut waiter, &["BRPOPLPUSH", "empty", "x", "0"]);
    assert_eq!(exchange(&mut waiter, &["EXEC"]), "*2\r\n*-1\r\n$-1\r\n");
}

#[test]
fn the_log_records_what_a_served_client_took() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut waiter = server.raw();
    let mut mover = server.raw();
    let mut writer = server.raw();
    send(&mut waiter, &["BZPOPMIN", "z", "0"]);
    wait_blocked(&server, 1);
    send(&mut mover, &["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0"]);
    wait_blocked(&server, 2);
    exchange(&mut writer, &["ZADD", "z", "1", "a", "2", "b"]);
    exchange(&mut writer, &["RPUSH", "src", "1", "2", "3"]);
    assert_eq!(
        received(&mut waiter, Duration::from_secs(2)),
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(received(&mut mover, Duration::from_secs(2)), "$1\r\n3\r\n");
    server.kill9();
    let log = String::from_utf8_lossy(
        &std::fs::read(dir.path().join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap(),
    )
    .to_ascii_uppercase();
    assert!(
        !log.contains("BZPOPMIN") && !log.contains("BLMOVE"),
        "{log}"
    );
    assert!(log.contains("ZPOPMIN") && log.contains("LMOVE"), "{log}");

    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let remaining: Vec<String> = redis::cmd("ZRANGE")
        .arg("z")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(remaining, ["b"]);
    let src: Vec<String> = redis::cmd("LRANGE")
        .arg("src")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    let dst: Vec<String> = redis::cmd("LRANGE")
        .arg("dst")
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        (src, dst),
        (
            vec!["1".to_string(), "2".to_string()],
            vec!["3".to_string()]
        )
    );
}
