//! Shared helpers for integration tests: start the real `tessera-server` binary on a free
//! port (never assuming 6379) and talk to it with the `redis` crate or raw sockets.
#![allow(dead_code)]

pub mod crash_points;
pub mod dataset;
pub mod debug_dataset;
pub mod dirs;
pub mod in_process;
pub mod keyspace_events;
pub mod knobs;
pub mod model;
pub mod raw_client;
pub mod replication;
pub mod side_by_side;
pub mod skip;
pub mod stream_dump;

// Not every test binary uses every helper.
#[allow(unused_imports)]
pub use knobs::{env_flag, env_number, env_numbers};
#[allow(unused_imports)]
pub use skip::{
    Capability, WHOLE_TEST, gated_redis, redis_server_path, require_redis_or_skip, skip,
};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SERVER_BIN: &str = env!("CARGO_BIN_EXE_tessera-server");
pub const CHECK_AOF_BIN: &str = env!("CARGO_BIN_EXE_tessera-check-aof");

pub struct TestServer {
    pub child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    pub log_path: PathBuf,
    /// Told once by each of the two threads that copy the server's output into
    /// `log_path` when its pipe has ended (None when the server writes its own log file).
    pub relays_ended: Option<std::sync::mpsc::Receiver<()>>,
}

/// Starts a server with `--dir dir --port 0` plus `args`; waits until it accepts.
pub fn start_server(dir: &Path, args: &[&str]) -> TestServer {
    try_start_server(dir, args).unwrap_or_else(|log| panic!("server failed to start:\n{log}"))
}

/// Like `start_server`, but returns the server's output if it exits before it is ready.
pub fn try_start_server(dir: &Path, args: &[&str]) -> Result<TestServer, String> {
    try_start_server_with(dir, args, |_| {})
}

pub fn try_start_server_with(
    dir: &Path,
    args: &[&str],
    customize: impl FnOnce(&mut Command),
) -> Result<TestServer, String> {
    let mut command = Command::new(SERVER_BIN);
    command
        .arg("--port")
        .arg("0")
        .arg("--dir")
        .arg(dir)
        .args(args);
    customize(&mut command);
    spawn_server(command, dir)
}

/// Starts `tessera-server <config_file>`: the file says the port (0 lets the server pick
/// one) and the directory; the server's output goes to a log in `log_dir`.
pub fn try_start_server_from_file(
    config_file: &Path,
    log_dir: &Path,
) -> Result<TestServer, String> {
    let mut command = Command::new(SERVER_BIN);
    command.arg(config_file);
    spawn_server(command, log_dir)
}

/// Runs `command` (a tessera-server) with its output logged in `dir`; waits until it
/// announces its port, or returns its output if it exits first.
fn spawn_server(mut command: Command, dir: &Path) -> Result<TestServer, String> {
    std::fs::create_dir_all(dir).unwrap();
    let log_path = dir.join(format!("server-{}.log", unique()));
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn tessera-server");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel::<Option<u16>>();
    let log_file = std::sync::Arc::new(std::sync::Mutex::new(
        std::fs::File::create(&log_path).unwrap(),
    ));
    let err_log = log_file.clone();
    // Each relay says when its pipe has ended: all it copied is in the log file then.
    let (relay_ended, relays_ended) = std::sync::mpsc::channel::<()>();
    let err_relay_ended = relay_ended.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(err_log.lock().unwrap(), "{line}");
        }
        let _ = err_relay_ended.send(());
    });
    std::thread::spawn(move || {
        let mut announced = false;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = writeln!(log_file.lock().unwrap(), "{line}");
            if !announced
                && let Some(rest) = line.split("Ready to accept connections on port ").nth(1)
            {
                let port = rest.trim().parse().ok();
                let _ = sender.send(port);
                announced = true;
            }
        }
        let _ = sender.send(None);
        let _ = relay_ended.send(());
    });
    match receiver.recv_timeout(Duration::from_secs(60)) {
        Ok(Some(port)) => Ok(TestServer {
            child: Some(child),
            port,
            dir: dir.to_path_buf(),
            log_path,
            relays_ended: Some(relays_ended),
        }),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            // The process is gone: both relays reach the end of their pipes.
            for _ in 0..2 {
                let _ = relays_ended.recv_timeout(Duration::from_secs(10));
            }
            Err(std::fs::read_to_string(&log_path).unwrap_or_default())
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

impl TestServer {
    /// Once the process has ended: waits until everything it wrote to its output is in
    /// `log_path` (a crash report is written just before the end).
    pub fn wait_for_log(&mut self) {
        if let Some(relays) = self.relays_ended.take() {
            for _ in 0..2 {
                let _ = relays.recv_timeout(Duration::from_secs(10));
            }
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    pub fn connection(&self) -> redis::Connection {
        self.client().get_connection().expect("connect to tessera")
    }

    pub fn raw(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGKILL: the process dies without flushing anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SHUTDOWN and waits for the process to exit.
    pub fn shutdown(&mut self) {
        if let Ok(mut conn) = self.client().get_connection() {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut conn);
        }
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            panic!("server did not exit after SHUTDOWN");
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn aof_dir(&self) -> PathBuf {
        self.dir.join("appendonlydir")
    }

    /// The incremental log file named last in the manifest.
    pub fn last_incremental_file(&self) -> PathBuf {
        let manifest =
            std::fs::read_to_string(self.aof_dir().join("appendonly.aof.manifest")).unwrap();
        let line = manifest.lines().rfind(|l| l.contains("type i")).unwrap();
        let name = line.split_whitespace().nth(1).unwrap();
        self.aof_dir().join(name)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Sends raw bytes and reads whatever comes back within `wait`.
/// One command as a RESP multibulk.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub fn raw_exchange(stream: &mut TcpStream, request: &[u8], wait: Duration) -> Vec<u8> {
    stream.write_all(request).unwrap();
    read_for(stream, wait)
}

pub fn read_for(stream: &mut TcpStream, wait: Duration) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if !out.is_empty() && out.ends_with(b"\r\n") {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    out
}

/// Reads until `want` bytes have arrived, the peer closes (EOF or reset), or `wait`
/// passes. Returns the bytes (more than `want` if they came in the same read, fewer after
/// a close or the deadline) and whether the peer closed. `usize::MAX` reads until one of
/// the other two.
pub fn read_bytes(stream: &mut TcpStream, want: usize, wait: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while out.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

/// Whether the peer closed the connection (reads EOF or reset within `wait`).
pub fn is_closed(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
}

pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("tessera-test-")
        .tempdir()
        .unwrap()
}

/// A real redis-server 7.0 for differential tests, on a free port, persistence off.
pub struct RedisOracle {
    pub child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl RedisOracle {
    pub fn start(binary: &Path) -> RedisOracle {
        let dir = temp_dir();
        let path = dir.path().to_path_buf();
        Self::start_in(binary, dir, &path, &["--appendonly", "no"])
    }

    /// Starts `redis-server <config_file>` and nothing else on its command line (so that
    /// CONFIG REWRITE sees only the file): the file must say `port` (this `port`).
    pub fn start_from_file(binary: &Path, config_file: &Path, port: u16) -> RedisOracle {
        let child = Command::new(binary)
            .arg(config_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        assert!(Self::answers(port), "redis-server did not start");
        RedisOracle {
            child,
            port,
            _dir: temp_dir(),
        }
    }

    /// Whether redis-server answers on `port` within 10 seconds.
    fn answers(port: u16) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // Ready when PING answers PONG (it answers -LOADING while loading), or
            // NOAUTH when a password is set.
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port))
                && let reply = raw_exchange(&mut stream, b"PING\r\n", Duration::from_secs(2))
                && (reply.starts_with(b"+PONG") || reply.starts_with(b"-NOAUTH"))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Starts redis-server on an existing data directory (which it may load).
    pub fn start_with(binary: &Path, data_dir: &Path, args: &[&str]) -> RedisOracle {
        Self::start_in(binary, temp_dir(), data_dir, args)
    }

    fn start_in(
        binary: &Path,
        dir: tempfile::TempDir,
        data_dir: &Path,
        args: &[&str],
    ) -> RedisOracle {
        for _ in 0..20 {
            let port = {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                listener.local_addr().unwrap().port()
            };
            let child = Command::new(binary)
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                ])
                .args(args)
                .arg("--dir")
                .arg(data_dir)
                // Redis collates SORT ... ALPHA with strcoll in its locale; Tessera
                // compares as the C locale does, whatever the machine's locale is.
                .env("LC_ALL", "C")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            if Self::answers(port) {
                return RedisOracle {
                    child,
                    port,
                    _dir: dir,
                };
            }
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start redis-server");
    }

    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for RedisOracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command given as words; panics (naming it) on an error reply.
pub fn run(conn: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command
        .query(conn)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

pub fn dbsize(conn: &mut redis::Connection) -> usize {
    redis::cmd("DBSIZE").query(conn).unwrap()
}

/// One field of INFO (all sections), as text; None if absent.
pub fn info_field(conn: &mut redis::Connection, name: &str) -> Option<String> {
    info_fields(conn, &[name]).pop().unwrap()
}

/// Several INFO fields read from one reply (so they describe the same moment).
pub fn info_fields(conn: &mut redis::Connection, names: &[&str]) -> Vec<Option<String>> {
    let info: String = redis::cmd("INFO").arg("everything").query(conn).unwrap();
    names
        .iter()
        .map(|name| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        })
        .collect()
}

/// Waits until `condition` holds, or fails naming `what` once `timeout` has passed. For
/// an event the test can observe; give it a deadline far beyond what it should take.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until the background job running (a compaction, a BGSAVE) has written `keys`
/// keys at least (`current_save_keys_processed`); fails if it ends before that.
pub fn wait_for_keys_saved(conn: &mut redis::Connection, keys: u64) {
    let names = [
        "current_save_keys_processed",
        "aof_rewrite_in_progress",
        "rdb_bgsave_in_progress",
    ];
    wait_until(
        &format!("the background job to write {keys} keys"),
        Duration::from_secs(60),
        || {
            let fields = info_fields(conn, &names);
            let written: u64 = fields[0].as_deref().unwrap().parse().unwrap();
            let running = fields[1..].iter().any(|f| f.as_deref() == Some("1"));
            assert!(
                written >= keys || running,
                "the background job ended before it wrote {keys} keys"
            );
            written >= keys
        },
    );
}

/// Waits until no compaction or background save is running or scheduled.
pub fn wait_for_background_jobs(conn: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let busy = [
            "aof_rewrite_in_progress",
            "aof_rewrite_scheduled",
            "rdb_bgsave_in_progress",
        ]
        .iter()
        .any(|field| info_field(conn, field).as_deref() == Some("1"));
        if !busy {
            return;
        }
        assert!(Instant::now() < deadline, "background jobs did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The file names listed in the manifest of `aof_dir`.
pub fn manifest_files(aof_dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(aof_dir.join("appendonly.aof.manifest")).unwrap();
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

/// Runs Debian's `redis-check-rdb` (next to `redis_server`) on `file`; it must pass.
pub fn assert_redis_check_rdb_passes(redis_server: &Path, file: &Path) {
    let check_rdb = redis_server.with_file_name("redis-check-rdb");
    let output = Command::new(&check_rdb)
        .arg(file)
        .output()
        .expect("run redis-check-rdb");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && text.contains("RDB looks OK!"),
        "{}: {text}",
        file.display()
    );
}

/// Runs `tessera-check-aof` with `args`, `stdin` as its input (the answers to its
/// questions); returns whether it succeeded and what it printed.
pub fn check_aof(args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new(CHECK_AOF_BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// A child's output, read on threads so that neither pipe fills: its stdout line by line
/// as it comes, its stderr whole once it ends.
pub fn read_child_output(
    child: &mut std::process::Child,
) -> (
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<String>,
) {
    use std::io::BufRead;
    let (lines, received) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("stdout piped");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let stderr = child.stderr.take().expect("stderr piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    (received, stderr)
}
