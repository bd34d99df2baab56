//! Listening, against the real `tessera-server` binary with real sockets: Redis 7's
//! `bind` syntax and `tcp-backlog`.

mod common;

use common::*;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Reads what arrives until `want` bytes, EOF, or `wait`. Returns the bytes and whether
/// the peer closed.
fn read_until(stream: &mut TcpStream, want: usize, wait: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while out.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (out, false);
        }
        stream
            .set_read_timeout(Some(left.min(Duration::from_millis(100))))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {}
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

/// Connects to `address` and sends PING; returns what came back within `wait`.
fn ping_at(address: &str, wait: Duration) -> Vec<u8> {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return b"(connect failed)".to_vec();
    };
    if stream.write_all(b"PING\r\n").is_err() {
        return b"(write failed)".to_vec();
    }
    read_until(&mut stream, 7, wait).0
}

/// PING on fresh connections until one answers PONG, for up to `wait`.
fn pong_within(port: u16, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if ping_at(&format!("127.0.0.1:{port}"), Duration::from_millis(300)) == b"+PONG\r\n" {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

/// Sends `request` on a raw connection and checks that exactly `expected` comes back.
fn expect_reply(stream: &mut TcpStream, request: &str, expected: &str) {
    stream.write_all(request.as_bytes()).unwrap();
    let (reply, _) = read_until(stream, expected.len(), Duration::from_secs(5));
    assert_eq!(
        show(&reply),
        show(expected.as_bytes()),
        "reply to {request:?}"
    );
}

fn skip(test: &str, why: &str) {
    eprintln!("\n\n*** SKIPPING {test}: {why} ***\n\n");
}

fn ipv6_loopback_available() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

// ---------------------------------------------------------------------------------------
// bind and tcp-backlog
// ---------------------------------------------------------------------------------------

#[test]
fn bind_star_and_optional_any_ipv6_listen_on_one_port() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--bind", "*", "-::*"]);
    let port = server.port;
    let log = server.log();
    assert!(
        log.contains(&format!("listening on 0.0.0.0:{port}")),
        "{log}"
    );
    assert_eq!(
        ping_at(&format!("127.0.0.1:{port}"), Duration::from_secs(5)),
        b"+PONG\r\n"
    );
    if ipv6_loopback_available() {
        // `::*` is every IPv6 address, on the same port as `*` (IPv6-only sockets).
        assert!(log.contains(&format!("listening on [::]:{port}")), "{log}");
        assert_eq!(
            ping_at(&format!("[::1]:{port}"), Duration::from_secs(5)),
            b"+PONG\r\n"
        );
    }
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET bind\r\n",
        "*2\r\n$4\r\nbind\r\n$6\r\n* -::*\r\n",
    );
}

#[test]
fn a_required_address_that_cannot_be_bound_stops_start_up_with_redis_text() {
    let dir = temp_dir();
    // 192.0.2.0/24 is reserved for documentation: no interface has it.
    let Err(output) = try_start_server(dir.path(), &["--bind", "127.0.0.1", "192.0.2.1"]) else {
        panic!("the server started without its required address");
    };
    assert!(
        output.contains("Warning: Could not create server TCP listening socket 192.0.2.1:")
            && output.contains("bind: Cannot assign requested address"),
        "{output}"
    );
    assert!(output.contains("(TCP), aborting."), "{output}");
    // Optional, it is skipped.
    let server = start_server(dir.path(), &["--bind", "127.0.0.1", "-192.0.2.1"]);
    assert!(pong_within(server.port, Duration::from_secs(5)));
}

/// The listen backlog of the sockets listening on `port`, as `ss` reports it (Send-Q of
/// a listening socket), or None without `ss`.
fn listen_backlogs(port: u16) -> Option<Vec<u64>> {
    let output = Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    Some(
        text.lines()
            .filter_map(|line| line.split_whitespace().nth(2)?.parse().ok())
            .collect(),
    )
}

#[test]
fn tcp_backlog_is_what_listen_gets_and_a_capped_one_is_warned_about() {
    let test = "tcp_backlog_is_what_listen_gets_and_a_capped_one_is_warned_about";
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--tcp-backlog", "7"]);
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET tcp-backlog\r\n",
        "*2\r\n$11\r\ntcp-backlog\r\n$1\r\n7\r\n",
    );
    expect_reply(
        &mut stream,
        "CONFIG SET tcp-backlog 8\r\n",
        "-ERR CONFIG SET failed (possibly related to argument 'tcp-backlog') - can't set immutable config\r\n",
    );
    match listen_backlogs(server.port) {
        Some(backlogs) => {
            assert!(!backlogs.is_empty());
            assert!(backlogs.iter().all(|&b| b == 7), "backlogs {backlogs:?}");
        }
        None => skip(
            test,
            "`ss` (iproute2) is not installed: the backlog is not checked",
        ),
    }
    assert!(!server.log().contains("TCP backlog"), "{}", server.log());

    let dir = temp_dir();
    let defaults = start_server(dir.path(), &[]);
    let mut stream = TcpStream::connect(("127.0.0.1", defaults.port)).unwrap();
    expect_reply(
        &mut stream,
        "CONFIG GET tcp-backlog\r\n",
        "*2\r\n$11\r\ntcp-backlog\r\n$3\r\n511\r\n",
    );

    // Above the kernel's cap: Redis's warning, word for word.
    let somaxconn: i64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if somaxconn < i32::MAX as i64 {
        let asked = somaxconn + 1;
        let dir = temp_dir();
        let capped = start_server(dir.path(), &["--tcp-backlog", &asked.to_string()]);
        let log = capped.log();
        let warning = format!(
            "WARNING: The TCP backlog setting of {asked} cannot be enforced because /proc/sys/net/core/somaxconn is set to the lower value of {somaxconn}."
        );
        assert!(log.contains(&warning), "{log}");
        assert!(pong_within(capped.port, Duration::from_secs(5)));
    }
}
