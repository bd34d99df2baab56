//! Lua scripting end to end against the real server binary: a corpus of scripts whose
//! replies must be byte for byte Redis 7.0's (RESP2 and RESP3), scripts' effects in the
//! log (one MULTI/EXEC block, never the script), scripts inside MULTI and under WATCH,
//! MISCONF and -LOADING, hostile scripts that must not hurt the server, and kill -9 with
//! a compaction in between after scripts that wrote with math.random, TIME and SPOP.

mod common;

use common::encode_command as encode;
#[path = "scripting/corpus.rs"]
mod corpus;

use common::in_process::InProcess;
use common::{SERVER_BIN, start_server, temp_dir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tessera::storage::{Fault, FileOp, SimulatedStorage};

// ---------------------------------------------------------------------------------------
// Raw RESP, so that replies are compared as bytes.

/// The length of the one complete reply at the front of `bytes`, if it is all there.
fn reply_len(bytes: &[u8]) -> Option<usize> {
    let line_end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let header = std::str::from_utf8(&bytes[1..line_end]).ok()?;
    let after = line_end + 2;
    match bytes.first()? {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(after),
        b'$' | b'=' | b'!' => {
            let n: i64 = header.parse().ok()?;
            if n < 0 {
                return Some(after);
            }
            let end = after + n as usize + 2;
            (bytes.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'%' | b'>' | b'|' => {
            let n: i64 = header.parse().ok()?;
            let items = match bytes[0] {
                b'%' | b'|' => n.max(0) * 2,
                _ => n.max(0),
            };
            let mut at = after;
            for _ in 0..items {
                at += reply_len(&bytes[at..])?;
            }
            Some(at)
        }
        _ => None,
    }
}

/// How long a reply may take: generous, since a hostile script (a 1 GB string, a reply
/// nested 100,000 deep) runs for seconds in a debug build on a loaded machine.
const REPLY_WAIT: Duration = Duration::from_secs(90);

/// Sends one command and returns its whole reply's bytes.
fn exchange(stream: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    stream.write_all(&encode(args)).unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + REPLY_WAIT;
    loop {
        if let Some(len) = reply_len(&reply) {
            assert_eq!(len, reply.len(), "one reply expected for {args:?}");
            return reply;
        }
        assert!(Instant::now() < deadline, "no complete reply to {args:?}");
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed during {args:?}");
        reply.extend_from_slice(&buf[..n]);
    }
}

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(REPLY_WAIT)).unwrap();
    stream
}

fn words(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn call(stream: &mut TcpStream, args: &[&str]) -> String {
    let args = words(args);
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    String::from_utf8_lossy(&exchange(stream, &refs)).into_owned()
}

// ---------------------------------------------------------------------------------------
// The corpus, against redis-server.

#[test]
fn script_corpus_matches_redis() {
    let Some(redis_path) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = common::RedisOracle::start(&redis_path);
    let mut differences = Vec::new();
    for resp3 in [false, true] {
        let mut ours = connect(server.port);
        let mut theirs = connect(oracle.port);
        for stream in [&mut ours, &mut theirs] {
            if resp3 {
                call(stream, &["HELLO", "3"]);
            }
            call(stream, &["FLUSHALL"]);
            call(stream, &["SCRIPT", "FLUSH"]);
        }
        for command in corpus::CORPUS {
            let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
            let mine = exchange(&mut ours, &args);
            let redis = exchange(&mut theirs, &args);
            if mine != redis {
                differences.push(format!(
                    "{} {command:?}\n  tessera: {:?}\n  redis:   {:?}",
                    if resp3 { "RESP3" } else { "RESP2" },
                    String::from_utf8_lossy(&mine),
                    String::from_utf8_lossy(&redis)
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} replies differ from Redis:\n{}",
        differences.len(),
        corpus::CORPUS.len() * 2,
        differences.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Scripts and the log.

/// The records of the log's incremental files, in order, as argument lists.
fn log_records(dir: &std::path::Path) -> Vec<Vec<String>> {
    let log_dir = dir.join("appendonlydir");
    let mut files: Vec<_> = std::fs::read_dir(&log_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    files.sort();
    let mut records = Vec::new();
    for file in files {
        let bytes = std::fs::read(file).unwrap();
        let mut at = 0;
        while at < bytes.len() {
            let len = reply_len(&bytes[at..]).expect("a complete record");
            let mut record = Vec::new();
            let frame = &bytes[at..at + len];
            let mut inner = frame.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
            while inner < frame.len() {
                let item = reply_len(&frame[inner..]).unwrap();
                let bulk = &frame[inner..inner + item];
                let start = bulk.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
                record.push(String::from_utf8_lossy(&bulk[start..bulk.len() - 2]).into_owned());
                inner += item;
            }
            records.push(record);
            at += len;
        }
    }
    records
}

/// The log's records (SELECTs left out) from the one before the first that names
/// `first_key` (its MULTI, if any) on.
fn records_from(dir: &std::path::Path, first_key: &str) -> Vec<String> {
    let records: Vec<Vec<String>> = log_records(dir)
        .into_iter()
        .filter(|r| r[0] != "SELECT")
        .collect();
    let start = records
        .iter()
        .position(|r| r.iter().any(|a| a == first_key))
        .unwrap_or_else(|| panic!("no record with {first_key}: {records:?}"));
    records[start.saturating_sub(1)..]
        .iter()
        .map(|r| r.join(" "))
        .collect()
}

#[test]
fn a_script_is_logged_by_its_effects_in_one_block() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = connect(server.port);
    // Two writes, a random choice and the time: the log holds what they did, in a block.
    let reply = call(
        &mut conn,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], math.random(1000000)) \
             redis.call('set', KEYS[2], redis.call('time')[1]) \
             redis.call('sadd', 'pool', 'a', 'b', 'c') \
             return redis.call('spop', 'pool')",
            "2",
            "first",
            "second",
        ],
    );
    assert!(reply.starts_with('$'), "{reply}");
    let popped = reply.lines().nth(1).unwrap().to_string();
    let random = call(&mut conn, &["GET", "first"]);
    let random = random.lines().nth(1).unwrap();
    let time = call(&mut conn, &["GET", "second"]);
    let time = time.lines().nth(1).unwrap();
    let records = records_from(dir.path(), "first");
    assert_eq!(
        records,
        vec![
            "MULTI".to_string(),
            format!("SET first {random}"),
            format!("SET second {time}"),
            "sadd pool a b c".to_string(),
            format!("SREM pool {popped}"),
            "EXEC".to_string(),
        ],
        "the whole log: {:?}",
        log_records(dir.path())
    );
    assert!(
        !log_records(dir.path())
            .iter()
            .flatten()
            .any(|a| a.contains("redis.call")),
        "no script text in the log"
    );

    // One write: no block. A read-only script: nothing logged.
    call(
        &mut conn,
        &["EVAL", "return redis.call('set', 'single', 'v')", "0"],
    );
    call(
        &mut conn,
        &["EVAL", "return redis.call('get', 'single')", "0"],
    );
    let records = records_from(dir.path(), "single");
    assert_eq!(records.last().unwrap(), "SET single v");
    assert_eq!(records.iter().filter(|r| r.contains("single")).count(), 1);

    // Inside MULTI: the script's writes join the transaction's one block (never nested).
    assert_eq!(call(&mut conn, &["MULTI"]), "+OK\r\n");
    call(&mut conn, &["SET", "tx1", "a"]);
    call(
        &mut conn,
        &[
            "EVAL",
            "redis.call('set', 'tx2', 'b') redis.call('set', 'tx3', 'c') return 1",
            "0",
        ],
    );
    let exec = call(&mut conn, &["EXEC"]);
    assert_eq!(exec, "*2\r\n+OK\r\n:1\r\n");
    let records = records_from(dir.path(), "tx1");
    assert_eq!(
        records,
        vec!["MULTI", "SET tx1 a", "SET tx2 b", "SET tx3 c", "EXEC"],
        "{:?}",
        log_records(dir.path())
    );
}

#[test]
fn a_script_that_writes_a_watched_key_aborts_the_transaction() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut watcher = connect(server.port);
    let mut other = connect(server.port);
    assert_eq!(call(&mut watcher, &["WATCH", "w"]), "+OK\r\n");
    call(
        &mut other,
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "w"],
    );
    call(&mut watcher, &["MULTI"]);
    call(&mut watcher, &["SET", "w", "mine"]);
    assert_eq!(call(&mut watcher, &["EXEC"]), "*-1\r\n");
    // A script that only reads the key does not.
    call(&mut watcher, &["WATCH", "w"]);
    call(
        &mut other,
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "w"],
    );
    call(&mut watcher, &["MULTI"]);
    call(&mut watcher, &["SET", "w", "mine"]);
    assert_eq!(call(&mut watcher, &["EXEC"]), "*1\r\n+OK\r\n");
}

#[test]
fn hostile_scripts_get_errors_and_the_server_stays_up() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = connect(server.port);
    let scripts = [
        // Unbounded recursion: Lua's stack overflow.
        "local function f(n) return f(n + 1) + 1 end return f(1)",
        // A string past the interpreter's memory.
        "return #string.rep('x', 1024 * 1024 * 1024 + 1)",
        // A reply nested far deeper than any client reads.
        "local t = {} local c = t for i = 1, 100000 do c[1] = {} c = c[1] end return t",
        // A table that contains itself.
        "local t = {} t[1] = t return t",
        "local t = {} t[1] = t return cjson.encode(t)",
        "local t = {} t[1] = t return cmsgpack.pack(t)",
        "return cjson.decode(string.rep('[', 100000))",
        "return cmsgpack.unpack(string.rep('\\145', 100000))",
        "return struct.unpack(string.rep('b', 100000), string.rep('x', 100000))",
        "error(setmetatable({}, {__index = function() error('again') end}))",
        "error({})",
        "return redis.call(string.rep('x', 100000))",
        "coroutine.wrap(function() redis.call('set', 'co', 1) end)() return redis.call('get', 'co')",
    ];
    for script in scripts {
        let reply = call(&mut conn, &["EVAL", script, "0"]);
        assert!(!reply.is_empty(), "{script}");
        assert_eq!(
            call(&mut conn, &["PING"]),
            "+PONG\r\n",
            "after {script}: {reply}"
        );
    }
    // A compile error and a runtime error are Redis's error replies.
    assert!(call(&mut conn, &["EVAL", "return (", "0"]).starts_with("-ERR Error compiling script"));
    assert!(call(&mut conn, &["EVAL", "return nil + 1", "0"]).starts_with("-ERR user_script:1:"));
    // Wrong key counts.
    assert_eq!(
        call(&mut conn, &["EVAL", "return 1", "99999999999999999999"]),
        "-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn script_commands_are_refused_while_loading() {
    let dir = temp_dir();
    {
        let server = start_server(dir.path(), &[]);
        let mut conn = connect(server.port);
        for i in 0..50 {
            call(&mut conn, &["SET", &format!("key:{i}"), "v"]);
        }
        let mut server = server;
        server.shutdown();
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(SERVER_BIN)
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--key-load-delay",
            "100000",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
            break stream;
        }
        assert!(Instant::now() < deadline, "the server did not listen");
        std::thread::sleep(Duration::from_millis(5));
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let loading = "-LOADING Redis is loading the dataset in memory\r\n";
    assert_eq!(call(&mut stream, &["EVAL", "return 1", "0"]), loading);
    assert_eq!(
        call(&mut stream, &["EVALSHA", &"a".repeat(40), "0"]),
        loading
    );
    assert_eq!(call(&mut stream, &["SCRIPT", "LOAD", "return 1"]), loading);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn scripts_that_write_are_refused_while_the_log_fails() {
    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, "appendfsync always");
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["SET", "k", "before"]), "+OK\r\n");
    storage.fail_file_op(FileOp::Write, ".incr.aof", Fault::Io, u64::MAX);
    // The failure reaches the server's state within the cron's second.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = connect(server.port);
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    loop {
        stream
            .write_all(&encode(&[b"SET", b"probe", b"x"]))
            .unwrap();
        let mut buf = [0u8; 512];
        if let Ok(n) = stream.read(&mut buf)
            && buf[..n].starts_with(b"-MISCONF")
        {
            break;
        }
        assert!(Instant::now() < deadline, "writes were never refused");
        stream = connect(server.port);
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
    }
    // A script without a shebang: its first write is refused, and so the script fails.
    let reply = call(
        &mut conn,
        &["EVAL", "return redis.call('set', 'k', 'during')", "0"],
    );
    assert!(
        reply.starts_with("-MISCONF Errors writing to the AOF file:") && reply.contains("script: "),
        "{reply}"
    );
    let reply = call(
        &mut conn,
        &["EVAL", "return redis.pcall('set', 'k', 'during')", "0"],
    );
    assert!(
        reply.starts_with("-MISCONF Errors writing to the AOF file:"),
        "{reply}"
    );
    // Reads in scripts go on.
    assert_eq!(
        call(&mut conn, &["EVAL", "return redis.call('get', 'k')", "0"]),
        "$6\r\nbefore\r\n"
    );
    // A script that declares it may write is refused before it runs; one that declares
    // no writes runs.
    let reply = call(
        &mut conn,
        &["EVAL", "#!lua\nreturn redis.call('get', 'k')", "0"],
    );
    assert!(
        reply.starts_with("-MISCONF Errors writing to the AOF file:"),
        "{reply}"
    );
    assert_eq!(
        call(
            &mut conn,
            &[
                "EVAL",
                "#!lua flags=no-writes\nreturn redis.call('get', 'k')",
                "0"
            ]
        ),
        "$6\r\nbefore\r\n"
    );
    storage.clear_faults();
    server.halt();
}

// ---------------------------------------------------------------------------------------
// Durability: kill -9, a compaction, restart.

/// Runs `rounds` scripts that write nondeterministic values; returns what they said they
/// wrote, (key, value).
fn write_with_scripts(conn: &mut TcpStream, round: usize) -> Vec<(String, String)> {
    let mut written = Vec::new();
    for i in 0..20 {
        let key = format!("r{round}:k{i}");
        let set = format!("r{round}:set{i}");
        let reply = call(
            conn,
            &[
                "EVAL",
                "local n = math.random(1000000000) \
                 local now = redis.call('time') \
                 redis.call('set', KEYS[1], n .. ':' .. now[1] .. ':' .. now[2]) \
                 redis.call('sadd', KEYS[2], 'a', 'b', 'c', 'd', 'e') \
                 local popped = redis.call('spop', KEYS[2], 2) \
                 redis.call('incrbyfloat', KEYS[1] .. ':f', '0.1') \
                 redis.call('expire', KEYS[1], 100000) \
                 return {redis.call('get', KEYS[1]), popped[1], popped[2]}",
                "2",
                &key,
                &set,
            ],
        );
        let lines: Vec<&str> = reply.split("\r\n").collect();
        assert_eq!(lines[0], "*3", "{reply}");
        written.push((key.clone(), lines[2].to_string()));
        let mut members: Vec<&str> = vec!["a", "b", "c", "d", "e"];
        members.retain(|m| *m != lines[4] && *m != lines[6]);
        written.push((set, members.join(",")));
        written.push((format!("{key}:f"), "0.1".to_string()));
    }
    written
}

fn check_written(conn: &mut TcpStream, written: &[(String, String)], context: &str) {
    for (key, value) in written {
        if key.contains(":set") {
            let reply = call(conn, &["SMEMBERS", key]);
            let mut members: Vec<&str> = reply
                .split("\r\n")
                .skip(1)
                .filter(|l| !l.starts_with('$') && !l.is_empty())
                .collect();
            members.sort();
            assert_eq!(members.join(","), *value, "{context}: {key}");
        } else {
            let reply = call(conn, &["GET", key]);
            let found = reply.split("\r\n").nth(1).unwrap_or("");
            assert_eq!(found, value, "{context}: {key}");
        }
    }
    let ttl = call(conn, &["TTL", &written[0].0]);
    let ttl: i64 = ttl.trim_start_matches(':').trim().parse().unwrap();
    assert!(
        ttl > 99_000,
        "{context}: the TTL a script set survives ({ttl})"
    );
}

#[test]
fn scripts_writes_survive_kill9_and_compaction() {
    let dir = temp_dir();
    let mut written = Vec::new();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = connect(server.port);
    written.extend(write_with_scripts(&mut conn, 0));
    server.kill9();

    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = connect(server.port);
    check_written(&mut conn, &written, "after the first kill -9");
    written.extend(write_with_scripts(&mut conn, 1));
    // A compaction, with more scripts while it runs, then kill -9.
    call(&mut conn, &["BGREWRITEAOF"]);
    written.extend(write_with_scripts(&mut conn, 2));
    let mut redis_conn = server.connection();
    common::wait_for_background_jobs(&mut redis_conn);
    written.extend(write_with_scripts(&mut conn, 3));
    server.kill9();

    let server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = connect(server.port);
    check_written(&mut conn, &written, "after the compaction and kill -9");
}

// ---------------------------------------------------------------------------------------
// A real client library.

/// redis-py's `Lock` (SCRIPT LOAD and EVALSHA) end to end, with workers in separate
/// processes (`tests/python/lock.py`). Fails, never skips, when python3 or redis-py is
/// missing: `scripts/test` installs redis-py from `tests/python/requirements.txt`.
#[test]
fn redis_py_lock_works_end_to_end() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/lock.py");
    let output = std::process::Command::new("python3")
        .arg(script)
        .arg(server.port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("python3 could not run ({e}): install python3 and redis-py"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("lock: ok"),
        "lock.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

// ---------------------------------------------------------------------------------------
// Busy scripts.

/// Sends PING on fresh connections until the answer is -BUSY (the script has passed the
/// threshold); returns that answer.
fn wait_for_busy(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = call(&mut connect(port), &["PING"]);
        if reply.starts_with("-BUSY") {
            return reply;
        }
        assert!(Instant::now() < deadline, "never busy: {reply}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `script` on a connection of its own; its reply when it ends.
fn eval_in_background(port: u16, script: &'static str) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut stream = connect(port);
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        call(&mut stream, &["EVAL", script, "0"])
    })
}

#[test]
fn a_busy_script_answers_busy_and_script_kill_stops_it() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--busy-reply-threshold", "50"]);
    for script in [
        "local i = 0 while true do i = i + 1 end",
        // A script that catches errors cannot catch its way past SCRIPT KILL.
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
        // Nor hide in a coroutine (resume returns the kill, the loop resumes another).
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    ] {
        let running = eval_in_background(server.port, script);
        let busy = wait_for_busy(server.port);
        assert_eq!(
            busy,
            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
        );
        // Pipelined requests are each answered; errors Redis checks first come first.
        let mut other = connect(server.port);
        assert!(call(&mut other, &["GET", "k"]).starts_with("-BUSY"));
        assert!(call(&mut other, &["NOSUCH"]).starts_with("-ERR unknown command"));
        assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), "+OK\r\n");
        let reply = running.join().unwrap();
        assert!(
            reply.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
                && reply.ends_with(", on @user_script:1.\r\n"),
            "{script}: {reply}"
        );
        assert_eq!(call(&mut other, &["PING"]), "+PONG\r\n");
    }
}

/// A client whose last replies showed a write or a read gets -BUSY at once, with the log
/// on and off (with it off, nothing released what those replies showed, and the -BUSY
/// waited for the script's end: a client waiting for it hung).
#[test]
fn a_client_that_wrote_before_gets_busy_at_once_with_the_log_on_or_off() {
    for log in ["yes", "no"] {
        let dir = temp_dir();
        let server = start_server(
            dir.path(),
            &["--appendonly", log, "--busy-reply-threshold", "50"],
        );
        let mut writer = connect(server.port);
        writer
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(call(&mut writer, &["SET", "k", "v"]), "+OK\r\n");
        assert_eq!(call(&mut writer, &["GET", "k"]), "$1\r\nv\r\n");
        let running = eval_in_background(server.port, "while true do end");
        wait_for_busy(server.port);
        assert!(
            call(&mut writer, &["PING"]).starts_with("-BUSY"),
            "appendonly {log}: the writer's PING"
        );
        assert_eq!(call(&mut writer, &["SCRIPT", "KILL"]), "+OK\r\n");
        assert!(running.join().unwrap().starts_with("-ERR Script killed"));
    }
}

/// What clients see of transactions begun, queued, watched and ended while a script is
/// busy (Redis's `allow-busy` MULTI, WATCH, UNWATCH, DISCARD; -BUSY dooms the
/// transaction; EXEC aborts), on one server whose `busy-reply-threshold` is 50 ms.
fn busy_transactions_transcript(port: u16) -> Vec<String> {
    let mut setup = connect(port);
    call(&mut setup, &["FLUSHALL"]);
    call(&mut setup, &["SET", "xx", "1"]);
    let mut t = Vec::new();
    // Begun before the script: its EXEC arrives while the script is busy.
    let mut early = connect(port);
    t.push(call(&mut early, &["MULTI"]));
    t.push(call(&mut early, &["INCR", "xx"]));
    let running = eval_in_background(port, "while true do end");
    wait_for_busy(port);
    t.push(call(&mut early, &["EXEC"]));
    // Begun while busy: the queued INCR is refused, which dooms the transaction.
    let mut doomed = connect(port);
    t.push(call(&mut doomed, &["MULTI"]));
    t.push(call(&mut doomed, &["INCR", "xx"]));
    t.push(call(&mut doomed, &["NOSUCH"]));
    t.push(call(&mut doomed, &["MULTI"]));
    // Watch, unwatch, a queued UNWATCH, DISCARD.
    let mut watcher = connect(port);
    t.push(call(&mut watcher, &["WATCH", "xx"]));
    t.push(call(&mut watcher, &["UNWATCH"]));
    t.push(call(&mut watcher, &["MULTI"]));
    t.push(call(&mut watcher, &["WATCH", "xx"]));
    t.push(call(&mut watcher, &["UNWATCH"]));
    t.push(call(&mut watcher, &["DISCARD"]));
    t.push(call(&mut watcher, &["DISCARD"]));
    // A key watched while busy and changed after: its EXEC fails.
    let mut watching = connect(port);
    t.push(call(&mut watching, &["WATCH", "w"]));
    t.push(call(&mut setup, &["SCRIPT", "KILL"]));
    let killed = running.join().unwrap();
    t.push(killed.split(" script:").next().unwrap().to_string());
    t.push(call(&mut doomed, &["INCR", "xx"]));
    t.push(call(&mut doomed, &["EXEC"]));
    t.push(call(&mut early, &["PING"]));
    t.push(call(&mut setup, &["SET", "w", "changed"]));
    t.push(call(&mut watching, &["MULTI"]));
    t.push(call(&mut watching, &["PING"]));
    t.push(call(&mut watching, &["EXEC"]));
    t.push(call(&mut setup, &["GET", "xx"]));
    t
}

#[test]
fn transactions_while_a_script_is_busy_go_as_on_redis() {
    let Some(redis_binary) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let redis_dir = temp_dir();
    let redis = common::RedisOracle::start_with(
        &redis_binary,
        redis_dir.path(),
        &["--appendonly", "no", "--busy-reply-threshold", "50"],
    );
    let theirs = busy_transactions_transcript(redis.port);
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--busy-reply-threshold", "50"]);
    let ours = busy_transactions_transcript(server.port);
    assert_eq!(ours, theirs);
    // What the transcript holds (so that an empty or all-error one cannot pass).
    let busy =
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
    assert_eq!(
        ours[2],
        format!("-EXECABORT Transaction discarded because of: {busy}\r\n")
    );
    assert_eq!(ours[3], "+OK\r\n");
    assert_eq!(ours[4], format!("-{busy}\r\n"));
    assert_eq!(ours[11], "+QUEUED\r\n");
    assert_eq!(
        ours[18],
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(ours[23], "*-1\r\n");
    assert_eq!(ours[24], "$1\r\n1\r\n");
}

#[test]
fn a_busy_script_that_wrote_is_unkillable_and_shutdown_nosave_drops_its_writes() {
    let dir = temp_dir();
    let args = ["--busy-reply-threshold", "50", "--appendfsync", "always"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["SET", "before", "1"]), "+OK\r\n");
    let running = eval_in_background(
        server.port,
        "redis.call('set', 'half', 'done') while true do end",
    );
    wait_for_busy(server.port);
    let mut other = connect(server.port);
    assert!(call(&mut other, &["SCRIPT", "KILL"]).starts_with("-UNKILLABLE Sorry the script"));
    // The script's write is not in the log yet: it would be a half of the script.
    other.write_all(&encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
    let reply = running.join().unwrap();
    assert!(reply.starts_with("-ERR Script killed"), "{reply}");
    let child = server.child.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not shut down");
        std::thread::sleep(Duration::from_millis(10));
    }
    let server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["GET", "before"]), "$1\r\n1\r\n");
    assert_eq!(call(&mut conn, &["GET", "half"]), "$-1\r\n");
}

// ---------------------------------------------------------------------------------------
// Functions: commands against Redis, and libraries as data.

const LIBRARY: &str = "#!lua name=counters\n\
    redis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)\n\
    redis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}";

fn wait_for_jobs(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = call(&mut connect(port), &["INFO", "persistence"]);
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            return;
        }
        assert!(Instant::now() < deadline, "the rewrite did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn functions_survive_kill9_compaction_and_restart() {
    let dir = temp_dir();
    let args = ["--appendfsync", "always"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(
        call(&mut conn, &["FUNCTION", "LOAD", LIBRARY]),
        "$8\r\ncounters\r\n"
    );
    assert_eq!(call(&mut conn, &["FCALL", "bump", "1", "n", "5"]), ":5\r\n");
    server.kill9();

    // From the log's records.
    let mut server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(
        call(&mut conn, &["FCALL_RO", "peek", "1", "n"]),
        "$1\r\n5\r\n"
    );
    // From the compaction's base (Redis's function opcode), then records after it.
    call(&mut conn, &["BGREWRITEAOF"]);
    wait_for_jobs(server.port);
    call(
        &mut conn,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=other\nredis.register_function('two', function() return 2 end)",
        ],
    );
    server.kill9();
    let mut server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["FCALL", "bump", "1", "n", "1"]), ":6\r\n");
    assert_eq!(call(&mut conn, &["FCALL", "two", "0"]), ":2\r\n");
    // Deleting and flushing are logged too.
    assert_eq!(call(&mut conn, &["FUNCTION", "DELETE", "other"]), "+OK\r\n");
    call(&mut conn, &["BGREWRITEAOF"]);
    wait_for_jobs(server.port);
    server.kill9();
    let mut server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(
        call(&mut conn, &["FCALL", "two", "0"]),
        "-ERR Function not found\r\n"
    );
    assert_eq!(call(&mut conn, &["FCALL", "bump", "1", "n", "1"]), ":7\r\n");
    let dump = exchange(&mut conn, &[b"FUNCTION", b"DUMP"]);
    assert_eq!(call(&mut conn, &["FUNCTION", "FLUSH"]), "+OK\r\n");
    server.kill9();
    let mut server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["FUNCTION", "LIST"]), "*0\r\n");
    assert_eq!(call(&mut conn, &["GET", "n"]), "$1\r\n7\r\n");
    // RESTORE is logged too.
    let payload = bulk_of(&dump);
    let restored = exchange(&mut conn, &[b"FUNCTION", b"RESTORE", &payload]);
    assert_eq!(restored, b"+OK\r\n");
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["FCALL", "bump", "1", "n", "1"]), ":8\r\n");
}

/// The data of a bulk string reply.
fn bulk_of(reply: &[u8]) -> Vec<u8> {
    let start = reply.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    reply[start..reply.len() - 2].to_vec()
}

#[test]
fn redis_and_tessera_load_each_others_functions() {
    let Some(redis_binary) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    // Tessera writes, Redis 7.0 reads (one base part: Redis's own layout).
    let dir = temp_dir();
    {
        let mut server = start_server(dir.path(), &["--aof-rewrite-threads", "1"]);
        let mut conn = connect(server.port);
        call(&mut conn, &["FUNCTION", "LOAD", LIBRARY]);
        call(&mut conn, &["FCALL", "bump", "1", "n", "3"]);
        call(&mut conn, &["BGREWRITEAOF"]);
        wait_for_jobs(server.port);
        server.shutdown();
    }
    {
        let oracle =
            common::RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
        let mut redis = connect(oracle.port);
        assert_eq!(
            call(&mut redis, &["FCALL", "bump", "1", "n", "1"]),
            ":4\r\n"
        );
        // FUNCTION DUMP payloads go both ways too.
        let theirs = bulk_of(&exchange(&mut redis, &[b"FUNCTION", b"DUMP"]));
        let other = temp_dir();
        let server = start_server(other.path(), &[]);
        let mut ours = connect(server.port);
        assert_eq!(
            exchange(&mut ours, &[b"FUNCTION", b"RESTORE", &theirs]),
            b"+OK\r\n"
        );
        assert_eq!(call(&mut ours, &["FCALL", "bump", "1", "m", "2"]), ":2\r\n");
        let mine = bulk_of(&exchange(&mut ours, &[b"FUNCTION", b"DUMP"]));
        assert_eq!(
            exchange(&mut redis, &[b"FUNCTION", b"RESTORE", &mine, b"REPLACE"]),
            b"+OK\r\n"
        );
        // Redis adds one in its own log, and compacts with its own base.
        call(
            &mut redis,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=redis_made\nredis.register_function('three', function() return 3 end)",
            ],
        );
        call(&mut redis, &["BGREWRITEAOF"]);
        wait_for_jobs(oracle.port);
        call(
            &mut redis,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=later\nredis.register_function('four', function() return 4 end)",
            ],
        );
        // The connection closes as Redis exits: no reply to read.
        redis.write_all(&encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
        let mut rest = Vec::new();
        let _ = redis.read_to_end(&mut rest);
    }
    // And Tessera reads what Redis wrote.
    let server = start_server(dir.path(), &[]);
    let mut conn = connect(server.port);
    assert_eq!(call(&mut conn, &["FCALL", "bump", "1", "n", "1"]), ":5\r\n");
    assert_eq!(call(&mut conn, &["FCALL", "three", "0"]), ":3\r\n");
    assert_eq!(call(&mut conn, &["FCALL", "four", "0"]), ":4\r\n");
}

#[test]
fn a_busy_function_answers_busy_and_function_kill_stops_it() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--busy-reply-threshold", "50"]);
    let mut conn = connect(server.port);
    call(
        &mut conn,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=spin\nredis.register_function('spin', function() while true do end end)",
        ],
    );
    let running =
        std::thread::spawn(move || call(&mut conn, &["FCALL", "spin", "1", "key", "arg"]));
    let function_busy = "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
    assert_eq!(wait_for_busy(server.port), function_busy);
    let mut other = connect(server.port);
    // FUNCTION STATS is answered meanwhile (Redis's allow-busy), naming the running
    // function and its caller's command.
    let stats = call(&mut other, &["FUNCTION", "STATS"]);
    let (before, after) = stats
        .split_once("$11\r\nduration_ms\r\n:")
        .unwrap_or_else(|| panic!("{stats}"));
    assert_eq!(
        before,
        "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n\
         $7\r\ncommand\r\n*5\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n1\r\n$3\r\nkey\r\n$3\r\narg\r\n"
    );
    let (duration, engines) = after.split_once("\r\n").unwrap();
    assert!(duration.parse::<u64>().unwrap() >= 50, "{stats}");
    assert_eq!(
        engines,
        "$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n\
         $15\r\nfunctions_count\r\n:1\r\n"
    );
    // SCRIPT KILL is for EVAL: Redis answers so.
    assert_eq!(call(&mut other, &["SCRIPT", "KILL"]), function_busy);
    assert_eq!(call(&mut other, &["FUNCTION", "KILL"]), "+OK\r\n");
    let reply = running.join().unwrap();
    assert_eq!(
        reply,
        "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.\r\n"
    );
    assert_eq!(
        call(&mut other, &["FCALL_RO", "spin", "0"]),
        "-ERR Can not execute a script with write flag using *_ro command.\r\n"
    );
}
