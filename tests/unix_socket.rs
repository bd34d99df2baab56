//! The Unix socket (`unixsocket`, `unixsocketperm`), against the real `tessera-server`
//! and redis-server 7.0.15 side by side: the socket made with its permissions over a
//! stale file, its clients named as Redis names them, redis-cli's `-s`, the file removed
//! at shutdown; the socket alone (`bind ""`), and nowhere to listen refused.

mod common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// One reply read from a Unix socket client: a status, an error or a bulk string.
fn unix_reply(stream: &mut std::os::unix::net::UnixStream) -> String {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => reply.push(byte[0]),
            _ => return format!("(closed after {})", String::from_utf8_lossy(&reply)),
        }
    }
    if let Some(len) = reply.strip_prefix(b"$") {
        let len: usize = String::from_utf8_lossy(len).trim().parse().unwrap();
        let mut body = vec![0u8; len + 2];
        stream.read_exact(&mut body).unwrap();
        body.truncate(len);
        return String::from_utf8_lossy(&body).into_owned();
    }
    String::from_utf8_lossy(&reply).trim_end().to_string()
}

/// What a server does with its Unix socket at `path`, in words that do not depend on the
/// path, the server or the moment: the socket file's kind and permissions, a client's
/// CLIENT INFO fields that name the connection, the MONITOR line of another client's
/// command, redis-cli's `-s` (Redis's own, beside the oracle), and the file after SHUTDOWN. `wait_exit` waits for the
/// server's process to end.
fn unix_socket_transcript(path: &Path, redis_cli: &Path, wait_exit: impl FnOnce()) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    use std::os::unix::net::UnixStream;
    let text = path.to_str().unwrap();
    let neutral = |line: String| line.replace(text, "<sock>");
    let mut transcript = Vec::new();
    let meta = std::fs::metadata(path).unwrap();
    transcript.push(format!(
        "socket={} mode={:o}",
        meta.file_type().is_socket(),
        meta.permissions().mode() & 0o777
    ));
    let mut first = UnixStream::connect(path).unwrap();
    first.write_all(b"CLIENT INFO\r\n").unwrap();
    let info = unix_reply(&mut first);
    for field in info.split_whitespace() {
        if ["addr=", "laddr=", "flags="]
            .iter()
            .any(|f| field.starts_with(f))
        {
            transcript.push(neutral(field.to_string()));
        }
    }
    first.write_all(b"MONITOR\r\n").unwrap();
    transcript.push(unix_reply(&mut first));
    let mut second = UnixStream::connect(path).unwrap();
    second.write_all(b"SET k v\r\n").unwrap();
    transcript.push(unix_reply(&mut second));
    // "<seconds>.<micros> [0 unix:<path>] "SET" "k" "v"": the time dropped.
    let line = unix_reply(&mut first);
    transcript.push(neutral(
        line.split_once(' ')
            .map_or(line.clone(), |(_, rest)| rest.into()),
    ));
    let output = Command::new(redis_cli)
        .args(["-s", text, "PING"])
        .output()
        .unwrap();
    transcript.push(format!(
        "redis-cli -s: {}",
        String::from_utf8_lossy(&output.stdout).trim()
    ));
    second.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    wait_exit();
    transcript.push(format!("after SHUTDOWN the file exists: {}", path.exists()));
    transcript
}

#[test]
fn clients_of_the_unix_socket_are_served_and_named_as_redis_names_them() {
    let Some(redis) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let socket_of = |name: &str| {
        let path = dir.path().join(name);
        // A file an earlier run left at the path: both servers replace it.
        std::fs::write(&path, b"stale").unwrap();
        path
    };
    let args = |path: &Path| {
        vec![
            "--unixsocket".to_string(),
            path.to_str().unwrap().to_string(),
            "--unixsocketperm".to_string(),
            "700".to_string(),
        ]
    };
    let tessera_socket = socket_of("tessera.sock");
    let tessera_args = args(&tessera_socket);
    let tessera_args: Vec<&str> = tessera_args.iter().map(String::as_str).collect();
    let tessera_dir = dir.path().join("tessera");
    let mut server = start_server(&tessera_dir, &tessera_args);
    let redis_cli = redis.with_file_name("redis-cli");
    let tessera = unix_socket_transcript(&tessera_socket, &redis_cli, || {
        server.child.as_mut().unwrap().wait().unwrap();
    });
    let redis_socket = socket_of("redis.sock");
    let redis_args = args(&redis_socket);
    let redis_args: Vec<&str> = redis_args.iter().map(String::as_str).collect();
    let redis_dir = dir.path().join("redis");
    std::fs::create_dir_all(&redis_dir).unwrap();
    let mut oracle = RedisOracle::start_with(&redis, &redis_dir, &redis_args);
    let redis = unix_socket_transcript(&redis_socket, &redis_cli, || {
        oracle.child.wait().unwrap();
    });
    assert_eq!(tessera, redis);
    for expected in [
        "socket=true mode=700",
        "addr=<sock>:0",
        "laddr=<sock>:0",
        "flags=U",
        "[0 unix:<sock>] \"SET\" \"k\" \"v\"",
        "after SHUTDOWN the file exists: false",
    ] {
        assert!(
            tessera.iter().any(|line| line == expected),
            "{expected}: {tessera:?}"
        );
    }
    assert!(
        server
            .log()
            .contains("The server is now ready to accept connections at")
    );
}

#[test]
fn the_unix_socket_alone_is_enough_and_nowhere_to_listen_stops_start_up() {
    let dir = temp_dir();
    let path = dir.path().join("only.sock");
    let mut child = Command::new(SERVER_BIN)
        .args(["--bind", "", "--port", "0", "--dir"])
        .arg(dir.path())
        .arg("--unixsocket")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut answered = String::new();
    wait_until("PING over the Unix socket", Duration::from_secs(30), || {
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(&path) else {
            return false;
        };
        stream.write_all(b"PING\r\n").unwrap();
        answered = unix_reply(&mut stream);
        answered != "-LOADING Redis is loading the dataset in memory"
    });
    assert_eq!(answered, "+PONG");
    let _ = child.kill();
    let _ = child.wait();
    let output = Command::new(SERVER_BIN)
        .args(["--bind", "", "--port", "0", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("Configured to not listen anywhere, exiting."),
        "{text}"
    );
}
