//! Start-up of the real `tessera-server` binary: the data directory must exist (its
//! `appendonlydir` is created inside it), two servers never share one data directory
//! (`tessera.lock`), and a log that is not a terminal carries no colour codes.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the server binary to its exit (killing it after `wait`); returns whether it
/// exited on its own, its status, and stdout + stderr.
fn run_to_exit(args: &[&str], wait: Duration) -> (bool, std::process::ExitStatus, String) {
    let dir = temp_dir();
    let out_path = dir.path().join("out");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(SERVER_BIN)
        .args(args)
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + wait;
    let (exited, status) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (true, status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break (false, child.wait().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    (exited, status, text)
}

#[test]
fn a_missing_data_directory_is_refused_and_not_created() {
    let dir = temp_dir();
    let missing = dir.path().join("missing");
    let missing_text = missing.display().to_string();
    let (exited, status, output) = run_to_exit(
        &["--port", "0", "--dir", &missing_text],
        Duration::from_secs(10),
    );
    assert!(exited && !status.success(), "the server started:\n{output}");
    // Redis 7.0.15's text (it changes into `dir` while reading the configuration).
    for want in [
        "*** FATAL CONFIG FILE ERROR",
        &format!(">>> 'dir \"{missing_text}\"'"),
        "No such file or directory",
    ] {
        assert!(
            output.contains(want),
            "the output lacks {want:?}:\n{output}"
        );
    }
    assert!(!missing.exists(), "the missing directory was created");

    // A file is not a directory either.
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let (exited, status, output) = run_to_exit(
        &["--port", "0", "--dir", &file.display().to_string()],
        Duration::from_secs(10),
    );
    assert!(exited && !status.success(), "the server started:\n{output}");
    assert!(output.contains("Not a directory"), "{output}");

    // An existing, empty directory: the log directory inside it is created.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let server = start_server(&empty, &[]);
    assert!(
        empty
            .join("appendonlydir")
            .join("appendonly.aof.manifest")
            .is_file()
    );
    drop(server);
}

#[test]
fn a_second_server_on_the_same_data_directory_refuses_to_start() {
    let dir = temp_dir();
    let mut first = start_server(dir.path(), &[]);
    let mut conn = first.connection();
    run(&mut conn, &["SET", "k", "v"]);
    let Err(output) = try_start_server(dir.path(), &[]) else {
        panic!("a second server started on the same data directory");
    };
    assert!(
        output.contains("the data directory is in use by another server")
            && output.contains("tessera.lock")
            && output.contains(&format!("by pid {}", first.pid())),
        "{output}"
    );
    // The first one is undisturbed, its lock file too.
    let lock = dir.path().join("tessera.lock");
    let holds = |server: &TestServer, conn: &mut redis::Connection| {
        assert_eq!(
            run(conn, &["GET", "k"]),
            redis::Value::BulkString(b"v".to_vec())
        );
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap().trim(),
            server.pid().to_string()
        );
    };
    holds(&first, &mut conn);
    // Another directory is fine meanwhile.
    let other = temp_dir();
    let elsewhere = start_server(other.path(), &[]);
    drop(elsewhere);

    // However the first one ends (here SIGKILL), the kernel releases the lock.
    first.kill9();
    let second = start_server(dir.path(), &[]);
    // The lock file is not mistaken for one of the log's files by start-up housekeeping.
    holds(&second, &mut second.connection());
    assert!(
        !dir.path()
            .join("appendonlydir")
            .join("tessera.lock")
            .exists()
    );
    drop(second);
}

#[test]
fn the_log_has_no_colour_codes_when_it_is_not_a_terminal() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--loglevel", "verbose"]);
    let mut conn = server.connection();
    run(&mut conn, &["SET", "k", "v"]);
    server.shutdown();
    let log = server.log();
    assert!(log.contains("Ready to accept connections"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in the log: {:?}",
        log.lines().find(|l| l.contains('\u{1b}'))
    );
}

/// CONFIG SET loglevel applies at once, as Redis's: a notice-level line (a BGSAVE's
/// start) is left out under `warning` and written again under `notice`.
#[test]
fn the_log_level_changes_at_run_time() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no", "--save", ""]);
    let mut conn = server.connection();
    let bgsave = |conn: &mut redis::Connection| {
        let _: String = redis::cmd("BGSAVE").query(conn).unwrap();
        wait_for_background_jobs(conn);
    };
    let started = |log: &str| log.matches("background saving started").count();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("loglevel")
        .arg("warning")
        .query(&mut conn)
        .unwrap();
    bgsave(&mut conn);
    assert_eq!(started(&server.log()), 0, "{}", server.log());
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("loglevel")
        .arg("notice")
        .query(&mut conn)
        .unwrap();
    bgsave(&mut conn);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while started(&server.log()) == 0 {
        assert!(std::time::Instant::now() < deadline, "{}", server.log());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
