//! What one client may make the server hold: a client that never reads its replies is
//! closed at its output limit (at a few KB before it authenticates, whatever it sends;
//! at `client-output-buffer-limit` after), and a huge argument costs its own size while it
//! is read, not a doubling buffer and a copy.

mod common;

use common::{RedisOracle, TestServer, is_closed, require_redis_or_skip, start_server, temp_dir};

/// How long a connection must stay quiet to count as open.
const QUIET: Duration = Duration::from_millis(500);
use redis::Commands;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Pipelines `request` over and over without reading a byte of the replies, for at most
/// `limit`. Returns whether the server closed the connection meanwhile.
fn flood_without_reading(port: u16, request: &[u8], limit: Duration) -> bool {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nonblocking(true).unwrap();
    let burst: Vec<u8> = request.repeat(64 * 1024 / request.len() + 1);
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match stream.write(&burst) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return true, // reset: closed by the server
        }
    }
    stream.set_nonblocking(false).unwrap();
    is_closed(&mut stream, QUIET)
}

/// Sends `count` copies of `request` at once without reading; returns the connection.
fn pipeline_unread(port: u16, request: &[u8], count: usize) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(&request.repeat(count)).unwrap();
    stream
}

/// The largest `omem` (output bytes held) among the clients whose last command was GET.
fn get_clients_omem(conn: &mut redis::Connection) -> u64 {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    list.lines()
        .filter(|line| line.contains(" cmd=get "))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("omem=")))
        .map(|omem| omem.parse::<u64>().unwrap())
        .max()
        .unwrap_or(0)
}

fn used_memory(conn: &mut redis::Connection) -> u64 {
    common::info_field(conn, "used_memory")
        .unwrap()
        .parse()
        .unwrap()
}

/// A field of /proc/<pid>/status in bytes: `VmRSS` (resident now) or `VmHWM` (the peak).
fn memory_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

const GET: &[u8] = b"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n";

#[test]
fn an_unauthenticated_client_that_never_reads_is_closed_at_a_few_kilobytes() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--requirepass", "secret"]);
    let mut admin = server.connection();
    let _: () = redis::cmd("AUTH").arg("secret").query(&mut admin).unwrap();
    let before = used_memory(&mut admin);
    // Each GET earns a 34-byte -NOAUTH reply; the attacker never reads them.
    assert!(
        flood_without_reading(server.port, GET, Duration::from_secs(10)),
        "the unauthenticated flooder was never closed"
    );
    let after = used_memory(&mut admin);
    assert!(
        after < before + 4 * 1024 * 1024,
        "memory grew from {before} to {after}"
    );
    assert!(
        server
            .log()
            .contains("closed ASAP for overcoming of output buffer limits"),
        "{}",
        server.log()
    );
    // Redis 7.0.15 (with the CVE-2025-21605 fix, as Debian ships it) closes it too.
    if let Some(binary) = require_redis_or_skip("the flood against Redis") {
        let oracle = RedisOracle::start(&binary);
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("secret")
            .query(&mut oracle.connection())
            .unwrap();
        assert!(
            flood_without_reading(oracle.port, GET, Duration::from_secs(10)),
            "Redis did not close the unauthenticated flooder either"
        );
    }
    // An authenticated client that pipelines and reads is untouched by that cap.
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("ECHO").arg(format!("reply number {i}"));
    }
    let replies: Vec<String> = pipe.query(&mut admin).unwrap();
    assert_eq!(replies.len(), 20_000);
}

#[test]
fn client_output_buffer_limit_closes_a_client_over_its_hard_or_soft_limit() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let limits: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("client-output-buffer-limit")
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        limits[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    let _: () = conn.set("x", "v".repeat(100 * 1024)).unwrap();
    // No limit by default for normal clients: 40 MB of replies unread stay queued (more
    // than the 1 MB limit below, once the sockets' buffers are full).
    let mut unread = pipeline_unread(server.port, GET, 400);
    common::wait_until("replies to queue up", Duration::from_secs(30), || {
        get_clients_omem(&mut conn) > 2 * 1024 * 1024
    });
    let mut received = 0;
    unread
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    while received < 400 * 100 * 1024 {
        received += unread.read(&mut sink).unwrap();
    }
    assert!(!is_closed(&mut unread, QUIET), "closed without a limit");

    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 1mb 0 0")
        .query(&mut conn)
        .unwrap();
    let mut unread = pipeline_unread(server.port, GET, 400);
    // Unread, so the replies pile up past the limit (reading would drain them).
    common::wait_until(
        "the hard limit to close it",
        Duration::from_secs(30),
        || server.log().contains("(Hard)"),
    );
    assert!(
        is_closed(&mut unread, QUIET),
        "a client over the hard limit was not closed"
    );

    // Soft: over 256 KB for more than a second.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("normal 0 256kb 1")
        .query(&mut conn)
        .unwrap();
    let mut slow = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    // 10 MB of replies, unread: more than the sockets' buffers absorb.
    slow.write_all(&GET.repeat(100)).unwrap();
    // Over the soft limit from the reply that took it past 256 KB...
    common::wait_until(
        "replies past the soft limit",
        Duration::from_secs(30),
        || get_clients_omem(&mut conn) > 256 * 1024,
    );
    // ... and for longer than its second when the next reply comes.
    std::thread::sleep(Duration::from_millis(1500));
    let _ = slow.write_all(GET);
    let mut closed = false;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !closed && Instant::now() < deadline {
        closed = server.log().contains("(Soft)");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(closed, "{}", server.log());
    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("client-output-buffer-limit")
        .arg("master 1mb 1mb 1")
        .query::<()>(&mut conn)
        .unwrap_err();
    assert!(
        bad.to_string()
            .contains("Invalid client class specified in buffer limit configuration"),
        "{bad}"
    );
}

/// Sends the header of `SET big <len bytes>` and `sent` bytes of its value.
fn start_big_set(server: &TestServer, len: usize, sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${len}\r\n").as_bytes())
        .unwrap();
    let chunk: Vec<u8> = (0..1024 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let mut left = sent;
    while left > 0 {
        let n = left.min(chunk.len());
        stream.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
    stream
}

/// The server's peak RSS once its RSS has stopped growing (it has read what was sent).
fn settled_peak_rss(pid: u32) -> u64 {
    let mut last = memory_field(pid, "VmRSS:");
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = memory_field(pid, "VmRSS:");
        if now.abs_diff(last) < 1024 * 1024 {
            return memory_field(pid, "VmHWM:");
        }
        last = now;
    }
}

#[test]
fn a_512_mb_argument_costs_its_own_size_while_it_is_read_and_once_stored() {
    const LEN: usize = 512 * 1024 * 1024;
    let dir = temp_dir();
    // Without the log: its record of the SET is a second copy by design (as Redis's
    // AOF buffer is); what is measured here is reading and storing.
    let server = start_server(dir.path(), &["--appendonly", "no", "--save", ""]);
    let pid = server.pid();
    let baseline = settled_peak_rss(pid);
    let sent = LEN - 1024 * 1024;
    let mut stream = start_big_set(&server, LEN, sent);
    let reading = settled_peak_rss(pid) - baseline;
    assert!(
        (reading as f64) < 1.1 * sent as f64,
        "reading {sent} bytes of one argument raised the peak RSS by {reading}"
    );
    let chunk: Vec<u8> = (0..1024 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    stream.write_all(&chunk).unwrap();
    stream.write_all(b"\r\n").unwrap();
    let mut reply = [0u8; 5];
    stream.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"+OK\r\n");
    let stored = settled_peak_rss(pid) - baseline;
    assert!(
        (stored as f64) < 1.1 * LEN as f64,
        "storing the {LEN}-byte value raised the peak RSS by {stored} (a copy?)"
    );
    let mut conn = server.connection();
    let len: usize = conn.strlen("big").unwrap();
    assert_eq!(len, LEN);
    let tail: Vec<u8> = conn.getrange("big", -3, -1).unwrap();
    let expected: Vec<u8> = (1024 * 1024 - 3..1024 * 1024)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    assert_eq!(tail, expected);
    let head: Vec<u8> = conn.getrange("big", 0, 3).unwrap();
    assert_eq!(head, [0, 7, 14, 21]);
}
