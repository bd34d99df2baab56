//! Tessera and a real redis-server 7.0 side by side: start both, connect to both (RESP3
//! when asked), send the same lines to both and collect the replies that differ, and
//! read a reply's exact bytes off a raw socket.

use super::raw_client::Conn;
use super::{
    RedisOracle, TestServer, WHOLE_TEST, encode_command, require_redis_or_skip, start_server,
    temp_dir,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A fresh Tessera (in the returned directory) and a fresh redis-server; None when the
/// oracle gate skipped the test (`require_redis_or_skip`): the caller returns.
pub fn both() -> Option<(TestServer, RedisOracle, tempfile::TempDir)> {
    let redis = RedisOracle::start(&require_redis_or_skip(WHOLE_TEST)?);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    Some((server, redis, dir))
}

/// A connection to each server, both in RESP3 when `resp3`.
pub fn connections(server: &TestServer, redis: &RedisOracle, resp3: bool) -> (Conn, Conn) {
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    if resp3 {
        ours.cmd(&["HELLO", "3"]);
        theirs.cmd(&["HELLO", "3"]);
    }
    (ours, theirs)
}

/// A line's space-separated words.
pub fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// Sends each line (space-separated words) to both servers and collects the differences.
pub fn differences(tessera: &mut Conn, redis: &mut Conn, lines: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for line in lines {
        let ours = tessera.cmd(&words(line));
        let theirs = redis.cmd(&words(line));
        if ours != theirs {
            found.push(format!(
                "{line}\n  tessera: {ours:?}\n  redis:   {theirs:?}"
            ));
        }
    }
    found
}

/// A raw connection, without Nagle's delay.
pub fn raw_connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Sends `args` and returns the reply's bytes exactly as they came (a PING after it marks
/// where it ends).
pub fn raw_reply(stream: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    raw_reply_or_closed(stream, args).expect("the server closed the connection")
}

/// `raw_reply`, or what came before the server closed the connection (Err).
pub fn raw_reply_or_closed(stream: &mut TcpStream, args: &[&[u8]]) -> Result<Vec<u8>, Vec<u8>> {
    let mut request = encode_command(args);
    request.extend_from_slice(b"PING\r\n");
    if stream.write_all(&request).is_err() {
        return Err(Vec::new());
    }
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut out = Vec::new();
    let mut buffer = [0u8; 65536];
    while !out.ends_with(b"+PONG\r\n") {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return Err(out),
            Ok(n) => out.extend_from_slice(&buffer[..n]),
        }
    }
    out.truncate(out.len() - b"+PONG\r\n".len());
    Ok(out)
}

/// A line's space-separated words as bytes.
pub fn split(line: &str) -> Vec<&[u8]> {
    line.split(' ').map(str::as_bytes).collect()
}
