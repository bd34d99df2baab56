//! Real job queues end to end: RQ (`tests/python/job_queue.py`: results kept in a stream,
//! `rq:results:<id>`, with XADD in the worker's transactions, XREVRANGE, XREAD BLOCK),
//! Celery with a Redis broker and result backend (`tests/python/celery_queue.py`) and
//! BullMQ, Node.js's (`tests/node/bullmq_queue.js`: Lua scripts, a stream of job events
//! read with XREAD BLOCK), their workers in separate processes, jobs enqueued, processed
//! and their results read back; then, mid-run, the server killed -9 and restarted on the
//! same directory and port under `appendfsync always`: no acknowledged job is lost, and
//! every one finishes with its correct result.
//!
//! A script asks for the kill with a line on its stdout; this test kills the server,
//! restarts it and answers with a line on the script's stdin. Each runs against Tessera
//! and against redis-server, which shows that the scripts themselves are sound.
//!
//! Fails, never skips, when python3, RQ, Celery, node or BullMQ is missing: `scripts/test`
//! installs them from `tests/python/requirements.txt` and `tests/node/package-lock.json`.

mod common;

use common::{TestServer, WHOLE_TEST, raw_exchange, require_redis_or_skip, start_server, temp_dir};
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RQ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/job_queue.py");
const CELERY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/celery_queue.py");
const BULLMQ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/bullmq_queue.js");
/// What the script waits for on stdin after it asked for the kill (with the line
/// "<name>: kill the server now", where <name> is the script's file stem).
const RESTARTED_LINE: &str = "restarted\n";
/// The whole run; the script's own deadlines are shorter.
const DEADLINE: Duration = Duration::from_secs(150);

/// A server that can be killed -9 and started again on the same directory and port.
trait Restartable {
    fn port(&self) -> u16;
    fn kill9_and_restart(&mut self);
}

/// Tessera with persistence on (the default) and `appendfsync always`.
struct Tessera {
    server: TestServer,
}

impl Tessera {
    fn start(dir: &Path, port: Option<u16>) -> Tessera {
        let port = port.map(|p| p.to_string());
        let mut args = vec!["--appendfsync", "always"];
        if let Some(port) = &port {
            args.extend(["--port", port.as_str()]);
        }
        Tessera {
            server: start_server(dir, &args),
        }
    }
}

impl Restartable for Tessera {
    fn port(&self) -> u16 {
        self.server.port
    }

    fn kill9_and_restart(&mut self) {
        let port = self.server.port;
        self.server.kill9();
        let dir = self.server.dir.clone();
        *self = Tessera::start(&dir, Some(port));
        assert_eq!(self.server.port, port, "restarted on another port");
    }
}

/// redis-server 7.0 with the same persistence: the reference the script is checked on.
struct Redis {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Redis {
    fn start(binary: &Path, dir: &Path) -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = Redis {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            port,
            child: None,
        };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        // Ready when PING answers PONG (it answers -LOADING while loading).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port))
                && raw_exchange(&mut stream, b"PING\r\n", Duration::from_secs(2))
                    .starts_with(b"+PONG")
            {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Restartable for Redis {
    fn port(&self) -> u16 {
        self.port
    }

    fn kill9_and_restart(&mut self) {
        self.kill9();
        self.spawn();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The script's process, killed (with its workers, which die with it) if the test ends
/// before it does.
struct Script(Child);

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `script` against `server`, killing and restarting the server when it asks;
/// panics with everything the script printed unless it ends with "<name>: ok".
fn run_job_queue(script_path: &str, server: &mut dyn Restartable) {
    let name = Path::new(script_path)
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap();
    let kill_line = format!("{name}: kill the server now");
    let started = Instant::now();
    let interpreter = if script_path.ends_with(".js") {
        "node"
    } else {
        "python3"
    };
    let mut script = Script(
        Command::new(interpreter)
            .arg(script_path)
            .arg(server.port().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{interpreter} could not run ({e}): scripts/test installs python3's RQ, Celery and redis-py, and BullMQ"
                )
            }),
    );
    let (received, stderr) = common::read_child_output(&mut script.0);
    let mut stdin = script.0.stdin.take().unwrap();
    let mut output = Vec::new();
    let mut killed_at = None;
    loop {
        let left = DEADLINE.saturating_sub(started.elapsed());
        match received.recv_timeout(left) {
            Ok(line) => {
                if line == kill_line {
                    assert!(killed_at.is_none(), "the script asked twice for a kill");
                    let kill = Instant::now();
                    server.kill9_and_restart();
                    killed_at = Some(started.elapsed());
                    output.push(format!(
                        "[test: killed -9 and restarted in {:.1} s]",
                        kill.elapsed().as_secs_f64()
                    ));
                    stdin.write_all(RESTARTED_LINE.as_bytes()).unwrap();
                    stdin.flush().unwrap();
                }
                output.push(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!(
                    "{name} still running after {DEADLINE:?}:\n{}",
                    output.join("\n")
                )
            }
        }
    }
    drop(stdin);
    let status = script.0.wait().unwrap();
    let stderr = stderr.join().unwrap();
    let output = output.join("\n");
    assert!(
        status.success() && output.ends_with(&format!("{name}: ok")) && killed_at.is_some(),
        "{name} failed ({status}, killed at {killed_at:?}):\n{output}\n{stderr}"
    );
    eprintln!(
        "{name} passed in {:.1} s:\n{output}",
        started.elapsed().as_secs_f64()
    );
}

/// RQ (`tests/python/job_queue.py`, results in a stream), against Tessera.
#[test]
fn rq_job_queue_loses_no_acknowledged_job_across_kill9() {
    let dir = temp_dir();
    let mut server = Tessera::start(dir.path(), None);
    run_job_queue(RQ, &mut server);
}

/// The same run against redis-server: the script and its assertions hold where the
/// server is the reference.
#[test]
fn rq_job_queue_run_holds_on_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = Redis::start(&binary, dir.path());
    run_job_queue(RQ, &mut server);
}

/// Celery (`tests/python/celery_queue.py`) with a Redis broker and a Redis result backend,
/// against Tessera.
#[test]
fn celery_job_queue_loses_no_acknowledged_task_across_kill9() {
    let dir = temp_dir();
    let mut server = Tessera::start(dir.path(), None);
    run_job_queue(CELERY, &mut server);
}

/// The same Celery run against redis-server.
#[test]
fn celery_job_queue_run_holds_on_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = Redis::start(&binary, dir.path());
    run_job_queue(CELERY, &mut server);
}

/// BullMQ (`tests/node/bullmq_queue.js`), against Tessera.
#[test]
fn bullmq_job_queue_loses_no_acknowledged_job_across_kill9() {
    let dir = temp_dir();
    let mut server = Tessera::start(dir.path(), None);
    run_job_queue(BULLMQ, &mut server);
}

/// The same BullMQ run against redis-server.
#[test]
fn bullmq_job_queue_run_holds_on_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = Redis::start(&binary, dir.path());
    run_job_queue(BULLMQ, &mut server);
}
