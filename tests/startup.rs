//! Start-up of the real `tessera-server` binary: the data directory must exist (its
//! `appendonlydir` is created inside it).

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
