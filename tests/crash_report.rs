//! A crash says what happened and costs no acknowledged write: a fatal signal or a panic
//! leaves Redis's START/END report in the log, naming the thread and the running command
//! and nothing of the command's arguments; the process still ends (by the signal, or by
//! SIGABRT after a panic), and a restart has every write it acknowledged and the manifest
//! that was in force.
//!
//! The panic policy (`crash_report`'s module header) is shown with panics injected
//! (`TESSERA_PANIC_AT`) in a handler, inside EXEC, inside a script, in the log writer and
//! the fsync thread (the server ends), in a snapshot writer (the job fails, the server goes
//! on) and in the loading threads (the start fails, nothing on disk changes).

mod common;

use common::{TestServer, info_field, start_server, temp_dir, try_start_server_with};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};
use tessera::crash_report::PANIC_AT_ENV;

const SECRET: &str = "do-not-log-this-value-3141";

/// Waits for the server's process to end; its exit status.
fn wait_for_exit(server: &mut TestServer) -> std::process::ExitStatus {
    let mut child = server.child.take().expect("running");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            server.wait_for_log();
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
        relays_ended: None,
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
    // The crashing thread's frames, under Redis's heading (the suite's logging unit and
    // operators' alerts look for it): the server's binary and an offset each.
    let trace = report
        .split("------ STACK TRACE ------")
        .nth(1)
        .unwrap_or_else(|| panic!("no stack trace:\n{report}"));
    let frames = trace
        .lines()
        .filter(|line| line.contains("tessera-server(+0x"))
        .count();
    assert!(
        frames >= 3,
        "{frames} frames of the server's binary:\n{report}"
    );
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

/// Starts a server whose `TESSERA_PANIC_AT` is `point`.
fn start_with_panic_at(dir: &std::path::Path, args: &[&str], point: &str) -> TestServer {
    try_start_server_with(dir, args, |command| {
        command.env(PANIC_AT_ENV, point);
    })
    .unwrap_or_else(|log| panic!("server failed to start:\n{log}"))
}

/// Writes `key:N` keys in pipelines of 100 until the server closes the connection; how
/// many were acknowledged (the first ones: replies come in order).
fn write_until_closed(server: &TestServer) -> usize {
    let mut stream = server.raw();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut acknowledged = 0;
    let mut pending = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let mut request = Vec::new();
        for i in acknowledged..acknowledged + 100 {
            let key = format!("key:{i}");
            request.extend(common::encode_command(&[
                b"SET",
                key.as_bytes(),
                SECRET.as_bytes(),
            ]));
        }
        if stream.write_all(&request).is_err() {
            return acknowledged;
        }
        let target = acknowledged + 100;
        while acknowledged < target {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => return acknowledged,
                Ok(n) => pending.extend_from_slice(&buffer[..n]),
            }
            while pending.starts_with(b"+OK\r\n") {
                pending.drain(..5);
                acknowledged += 1;
            }
            assert!(
                pending.len() < 5 || pending.starts_with(b"+OK"),
                "unexpected reply: {:?}",
                String::from_utf8_lossy(&pending)
            );
        }
    }
}

/// How many of `key:0` .. `key:{count-1}` exist.
fn existing_keys(server: &TestServer, count: usize) -> usize {
    let mut conn = server.connection();
    let keys: Vec<String> = (0..count).map(|i| format!("key:{i}")).collect();
    keys.chunks(1000)
        .map(|chunk| {
            redis::cmd("EXISTS")
                .arg(chunk)
                .query::<usize>(&mut conn)
                .unwrap()
        })
        .sum()
}

/// The manifest in force: the log directory's manifest file's bytes.
fn manifest(dir: &std::path::Path) -> Vec<u8> {
    let log_dir = dir.join("appendonlydir");
    let name = std::fs::read_dir(&log_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.ends_with(".manifest"))
        .expect("a manifest");
    std::fs::read(log_dir.join(name)).unwrap()
}

/// The log directory holds the manifest and the files it names, nothing else.
fn assert_only_manifest_files(dir: &std::path::Path) {
    let manifest = String::from_utf8(manifest(dir)).unwrap();
    let mut named: Vec<String> = manifest
        .lines()
        .map(|line| line.split(' ').nth(1).expect("a file name").to_string())
        .collect();
    named.push("appendonly.aof.manifest".into());
    named.sort();
    assert_eq!(
        log_files(dir),
        named,
        "files beside the manifest:\n{manifest}"
    );
}

fn log_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The server ended by the panic policy's abort, after a report of `point`'s panic that
/// names the thread and says the server stops; no value reached its log.
fn assert_ended_by_panic(server: &mut TestServer, point: &str, thread: &str) {
    let status = wait_for_exit(server);
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    let log = std::fs::read_to_string(&server.log_path).unwrap();
    let report = report_of(&log);
    assert!(
        report.contains(&format!("(Guru Meditation: {point} #")),
        "{report}"
    );
    assert!(report.contains(&format!("Thread: {thread}")), "{report}");
    assert!(report.contains("The server stops"), "{report}");
    assert!(!log.contains(SECRET), "a value reached the log:\n{log}");
}

#[test]
fn a_panic_in_the_log_writer_or_the_fsync_thread_ends_the_server_and_loses_nothing_acknowledged() {
    // The log writer's appends run on its thread and, under `always`, inline on the
    // loop's; the fsync thread's syncs under either policy.
    for (point, policy, thread) in [
        ("log-write:300", "always", ""),
        ("log-write:300", "everysec", ""),
        ("fsync:200", "always", "log-fsync"),
        ("fsync:3", "everysec", "log-fsync"),
    ] {
        let dir = temp_dir();
        let mut server = start_with_panic_at(dir.path(), &["--appendfsync", policy], point);
        let before = manifest(dir.path());
        let acknowledged = write_until_closed(&server);
        assert_ended_by_panic(&mut server, point.split(':').next().unwrap(), thread);
        assert_eq!(manifest(dir.path()), before, "{point} {policy}");
        let server = start_server(dir.path(), &[]);
        assert!(
            acknowledged > 0,
            "{point} {policy}: nothing was acknowledged"
        );
        assert_eq!(
            existing_keys(&server, acknowledged),
            acknowledged,
            "{point} under {policy}: acknowledged writes lost"
        );
    }
}

#[test]
fn a_panic_inside_exec_or_a_script_ends_the_server_and_applies_none_of_it() {
    // EXEC: the handler of its second command panics (DEBUG PANIC is allowed in MULTI).
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--enable-debug-command", "yes"]);
    write_keys(&server, 5000);
    let mut conn = server.connection();
    let queued: Vec<String> = redis::pipe()
        .cmd("MULTI")
        .cmd("SET")
        .arg("inside:1")
        .arg(SECRET)
        .cmd("DEBUG")
        .arg("PANIC")
        .cmd("SET")
        .arg("inside:2")
        .arg(SECRET)
        .query::<Vec<String>>(&mut conn)
        .unwrap();
    assert_eq!(queued, ["OK", "QUEUED", "QUEUED", "QUEUED"]);
    assert!(redis::cmd("EXEC").query::<redis::Value>(&mut conn).is_err());
    assert_ended_by_panic(&mut server, "DEBUG PANIC", "");
    let server = start_server(dir.path(), &[]);
    assert_eq!(existing_keys(&server, 5000), 5000);
    let mut conn = server.connection();
    let inside: usize = redis::cmd("EXISTS")
        .arg(&["inside:1", "inside:2"])
        .query(&mut conn)
        .unwrap();
    assert_eq!(inside, 0, "part of the transaction survived");
    drop(server);

    // A script: its second `redis.call` panics, after the first one wrote.
    let dir = temp_dir();
    let mut server = start_with_panic_at(dir.path(), &[], "script-call:2");
    write_keys(&server, 5000);
    let mut conn = server.connection();
    let ran = redis::cmd("EVAL")
        .arg("redis.call('SET', 'inside:1', ARGV[1]) redis.call('SET', 'inside:2', ARGV[1])")
        .arg(0)
        .arg(SECRET)
        .query::<redis::Value>(&mut conn);
    assert!(ran.is_err(), "{ran:?}");
    assert_ended_by_panic(&mut server, "script-call", "");
    let log = std::fs::read_to_string(&server.log_path).unwrap();
    assert!(
        report_of(&log).contains("Crashed running the command: eval"),
        "{log}"
    );
    let server = start_server(dir.path(), &[]);
    assert_eq!(existing_keys(&server, 5000), 5000);
    let mut conn = server.connection();
    let inside: usize = redis::cmd("EXISTS")
        .arg(&["inside:1", "inside:2"])
        .query(&mut conn)
        .unwrap();
    assert_eq!(inside, 0, "part of the script's writes survived");
}

/// Runs BGREWRITEAOF to its end; its `aof_last_bgrewrite_status`.
fn rewrite(conn: &mut redis::Connection) -> Option<String> {
    let _: String = redis::cmd("BGREWRITEAOF").query(conn).unwrap();
    common::wait_for_background_jobs(conn);
    info_field(conn, "aof_last_bgrewrite_status")
}

#[test]
fn a_panic_in_a_snapshot_writer_fails_its_job_and_the_server_goes_on() {
    let dir = temp_dir();
    // The first captured slot of the first job's writers panics: a compaction's part.
    let args = ["--enable-debug-command", "yes"];
    let mut server = start_with_panic_at(dir.path(), &args, "snapshot-part");
    write_keys(&server, 20_000);
    let mut conn = server.connection();
    // 200 MB, so that the captures queued for the failed part alone pass the bound the
    // capture waits at (64 MB): the job must be cancelled, not wait for that part forever.
    let _: String = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(2000)
        .arg("big")
        .arg(100_000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(rewrite(&mut conn).as_deref(), Some("err"));
    // As after a failed rewrite in Redis 7.0: the switch to a new incremental file stands,
    // no base was installed, and the failed parts are gone.
    let manifest_before = manifest(dir.path());
    assert!(
        !String::from_utf8_lossy(&manifest_before).contains(" type b"),
        "a base from the failed job"
    );
    assert_only_manifest_files(dir.path());
    let log = std::fs::read_to_string(&server.log_path).unwrap();
    let report = report_of(&log);
    assert!(
        report.contains("(Guru Meditation: snapshot-part #"),
        "{report}"
    );
    assert!(report.contains("Thread: snapshot-part-"), "{report}");
    assert!(report.contains("The thread's job fails"), "{report}");

    // The server serves, acknowledges, and compacts again.
    let _: String = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    assert_eq!(rewrite(&mut conn).as_deref(), Some("ok"));
    let manifest_in_force = manifest(dir.path());
    assert!(String::from_utf8_lossy(&manifest_in_force).contains(" type b"));
    server.kill9();
    let server = start_server(dir.path(), &[]);
    assert_eq!(existing_keys(&server, 20_000), 20_000);
    assert_eq!(dbsize(&server), 22_001);
    assert_eq!(manifest(dir.path()), manifest_in_force);
}

#[test]
fn a_panic_while_loading_fails_the_start_and_changes_nothing_on_disk() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    write_keys(&server, 10_000);
    let mut conn = server.connection();
    rewrite(&mut conn);
    let _: String = redis::cmd("SET")
        .arg("in-the-log")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    server.kill9();
    let manifest_before = manifest(dir.path());
    let files_before = log_files(dir.path());
    for point in ["base-load", "log-replay:1"] {
        let failed = try_start_server_with(dir.path(), &[], |command| {
            command.env(PANIC_AT_ENV, point);
        });
        let output = match failed {
            Ok(_) => panic!("{point}: the server started"),
            Err(output) => output,
        };
        let report = report_of(&output);
        let name = point.split(':').next().unwrap();
        assert!(
            report.contains(&format!("(Guru Meditation: {name} #")),
            "{report}"
        );
        assert!(report.contains("The thread's job fails"), "{report}");
        assert_eq!(manifest(dir.path()), manifest_before, "{point}");
        assert_eq!(log_files(dir.path()), files_before, "{point}");
    }
    let server = start_server(dir.path(), &[]);
    assert_eq!(existing_keys(&server, 10_000), 10_000);
    assert_eq!(dbsize(&server), 10_001);
}
