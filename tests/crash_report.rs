//! A crash says what happened and costs no acknowledged write: a fatal signal or a panic
//! leaves Redis's START/END report in the log, naming the thread and the running command
//! and nothing of the command's arguments; the process still ends (by the signal, or with
//! the panic's exit code), and a restart has every write it acknowledged.

mod common;

use common::{TestServer, start_server, temp_dir};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

const SECRET: &str = "do-not-log-this-value-3141";

/// Waits for the server's process to end; its exit status.
fn wait_for_exit(server: &mut TestServer) -> std::process::ExitStatus {
    let mut child = server.child.take().expect("running");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends a request that ends the server; the connection closes without a reply.
fn send_fatal(server: &TestServer, args: &[&str]) {
    let mut stream = server.raw();
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    stream.write_all(&common::encode_command(&args)).unwrap();
    let mut buffer = [0u8; 64];
    assert!(
        matches!(stream.read(&mut buffer), Ok(0) | Err(_)),
        "the server replied instead of ending"
    );
}

/// Writes `count` keys in one pipeline and waits for every acknowledgement.
fn write_keys(server: &TestServer, count: usize) {
    let mut stream = server.raw();
    let mut request = Vec::new();
    for i in 0..count {
        let key = format!("key:{i}");
        request.extend(common::encode_command(&[
            b"SET",
            key.as_bytes(),
            SECRET.as_bytes(),
        ]));
    }
    stream.write_all(&request).unwrap();
    let mut replies = Vec::new();
    let mut buffer = [0u8; 65536];
    while replies.windows(5).filter(|w| w == b"+OK\r\n").count() < count {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "closed before every write was acknowledged");
        replies.extend_from_slice(&buffer[..n]);
    }
}

/// Starts a server whose log goes to `logfile` (the harness reads the port from standard
/// output, so this one gets a free port chosen here and is polled until it accepts).
fn start_logging_to_file(
    dir: &std::path::Path,
    args: &[&str],
    logfile: &std::path::Path,
) -> TestServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(common::SERVER_BIN)
        .arg("--port")
        .arg(port.to_string())
        .arg("--dir")
        .arg(dir)
        .args(args)
        .spawn()
        .expect("spawn tessera-server");
    let deadline = Instant::now() + Duration::from_secs(60);
    // Accepting is not yet serving (a loading server answers -LOADING): wait for PONG.
    let pong = || -> Option<bool> {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.write_all(b"PING\r\n").ok()?;
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).ok()?;
        Some(&reply == b"+PONG\r\n")
    };
    while pong() != Some(true) {
        assert!(Instant::now() < deadline, "the server never answered PING");
        std::thread::sleep(Duration::from_millis(20));
    }
    TestServer {
        child: Some(child),
        port,
        dir: dir.to_path_buf(),
        log_path: logfile.to_path_buf(),
    }
}

fn dbsize(server: &TestServer) -> i64 {
    let mut conn = server.connection();
    redis::cmd("DBSIZE").query(&mut conn).unwrap()
}

fn report_of(log: &str) -> &str {
    let start = log
        .find("=== TESSERA BUG REPORT START: Cut & paste starting from here ===")
        .unwrap_or_else(|| panic!("no crash report in the log:\n{log}"));
    let end = log[start..]
        .find("=== TESSERA BUG REPORT END. Make sure to include from START to END. ===")
        .expect("the report's END line");
    &log[start..start + end]
}

#[test]
fn a_segfault_is_reported_in_the_log_file_and_acknowledged_writes_survive() {
    let dir = temp_dir();
    let logfile = dir.path().join("tessera.log");
    let logfile_arg = logfile.display().to_string();
    let args = [
        "--enable-debug-command",
        "yes",
        "--appendfsync",
        "always",
        "--logfile",
        &logfile_arg,
    ];
    let mut server = start_logging_to_file(dir.path(), &args, &logfile);
    write_keys(&server, 1000);
    send_fatal(&server, &["DEBUG", "SEGFAULT", SECRET]);
    let status = wait_for_exit(&mut server);
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}");
    let log = std::fs::read_to_string(&logfile).unwrap();
    let report = report_of(&log);
    assert!(
        report.contains("crashed by signal: 11 (SIGSEGV)"),
        "{report}"
    );
    assert!(
        report.contains("Crashed running the command: debug"),
        "{report}"
    );
    assert!(report.contains("Thread: "), "{report}");
    assert!(!log.contains(SECRET), "an argument reached the log:\n{log}");
    let server = start_server(dir.path(), &[]);
    assert_eq!(dbsize(&server), 1000);
}

#[test]
fn a_fatal_signal_from_outside_is_reported_with_no_command() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    write_keys(&server, 100);
    // SAFETY: a signal to the server's own process.
    unsafe {
        libc::kill(server.pid() as i32, libc::SIGBUS);
    }
    let status = wait_for_exit(&mut server);
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
    let log = std::fs::read_to_string(&server.log_path).unwrap();
    let report = report_of(&log);
    assert!(report.contains("crashed by signal: 7 (SIGBUS)"), "{report}");
    assert!(
        report.contains("Crashed running the command: (none)"),
        "{report}"
    );
    assert!(!log.contains(SECRET), "a value reached the log:\n{log}");
}

#[test]
fn a_panic_in_a_handler_is_reported_and_acknowledged_writes_survive() {
    let dir = temp_dir();
    let args = ["--enable-debug-command", "yes", "--appendfsync", "everysec"];
    let mut server = start_server(dir.path(), &args);
    write_keys(&server, 20_000);
    send_fatal(&server, &["DEBUG", "PANIC", SECRET]);
    let status = wait_for_exit(&mut server);
    assert!(!status.success(), "{status:?}");
    let log = std::fs::read_to_string(&server.log_path).unwrap();
    let report = report_of(&log);
    assert!(
        report.contains("panicked (Guru Meditation: DEBUG PANIC #"),
        "{report}"
    );
    assert!(
        report.contains("Crashed running the command: debug"),
        "{report}"
    );
    assert!(!log.contains(SECRET), "an argument reached the log:\n{log}");
    let server = start_server(dir.path(), &[]);
    assert_eq!(dbsize(&server), 20_000);
}
