//! MULTI / EXEC / DISCARD / WATCH against the real server binary, and what the log keeps
//! of a transaction: replay applies a whole `MULTI … EXEC` block or none of it.

mod common;

use common::*;
use redis::Value;

fn run(conn: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command
        .query::<Value>(conn)
        .map_err(|e| match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => e.to_string(),
        })
}

fn ok(conn: &mut redis::Connection, args: &[&str]) -> Value {
    run(conn, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

fn queued() -> Value {
    Value::SimpleString("QUEUED".into())
}

#[test]
fn exec_runs_the_queue_in_order_with_per_command_errors() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    // Raw RESP: a client library turns an error inside EXEC's array into a failed call.
    let mut stream = server.raw();
    let mut request = Vec::new();
    for command in [
        &["MULTI"][..],
        &["SET", "a", "x"],
        &["INCR", "a"], // fails only when run: the transaction goes on
        &["APPEND", "a", "y"],
        &["GET", "a"],
        &["EXEC"],
        &["MULTI"],
        &["EXEC"],
    ] {
        request.extend_from_slice(format!("*{}\r\n", command.len()).as_bytes());
        for arg in command {
            request.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
    }
    let expected = "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n\
                    *4\r\n+OK\r\n-ERR value is not an integer or out of range\r\n:2\r\n$2\r\nxy\r\n\
                    +OK\r\n*0\r\n";
    let mut reply = raw_exchange(&mut stream, &request, std::time::Duration::from_secs(5));
    while reply.len() < expected.len() {
        let more = read_for(&mut stream, std::time::Duration::from_secs(1));
        if more.is_empty() {
            break;
        }
        reply.extend_from_slice(&more);
    }
    assert_eq!(String::from_utf8_lossy(&reply), expected);
}

#[test]
fn queuing_errors_abort_the_transaction_as_redis_does() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(
        run(&mut conn, &["EXEC"]),
        Err("ERR EXEC without MULTI".into())
    );
    assert_eq!(
        run(&mut conn, &["DISCARD"]),
        Err("ERR DISCARD without MULTI".into())
    );
    ok(&mut conn, &["MULTI"]);
    // These are the transaction's own errors: they do not doom it.
    assert_eq!(
        run(&mut conn, &["MULTI"]),
        Err("ERR MULTI calls can not be nested".into())
    );
    assert_eq!(
        run(&mut conn, &["WATCH", "k"]),
        Err("ERR WATCH inside MULTI is not allowed".into())
    );
    assert_eq!(ok(&mut conn, &["SET", "k", "1"]), queued());
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Array(vec![Value::Okay]));
    for bad in [
        &["NOSUCHCOMMAND", "x"][..],
        &["GET"][..],
        &["SAVE"][..],
        &["SHUTDOWN"][..],
    ] {
        ok(&mut conn, &["MULTI"]);
        ok(&mut conn, &["SET", "k", "2"]);
        let error = run(&mut conn, bad).expect_err("rejected while queuing");
        assert!(error.starts_with("ERR"), "{bad:?}: {error}");
        assert_eq!(
            run(&mut conn, &["EXEC"]),
            Err("EXECABORT Transaction discarded because of previous errors.".into()),
            "{bad:?}"
        );
        // Nothing of it ran, and the client is out of MULTI.
        assert_eq!(ok(&mut conn, &["GET", "k"]), bulk("1"));
    }
}

#[test]
fn discard_drops_the_queue_and_the_watches() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let mut other = server.connection();
    ok(&mut conn, &["WATCH", "w"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "d", "1"]);
    assert_eq!(ok(&mut conn, &["DISCARD"]), Value::Okay);
    assert_eq!(ok(&mut conn, &["EXISTS", "d"]), Value::Int(0));
    // The watch went with DISCARD: a change to `w` no longer aborts.
    ok(&mut other, &["SET", "w", "changed"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "d", "2"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Array(vec![Value::Okay]));
}

#[test]
fn a_watched_key_changed_by_anyone_aborts_exec() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let mut other = server.connection();
    ok(&mut conn, &["SET", "balance", "10"]);

    // Changed by another client.
    ok(&mut conn, &["WATCH", "balance"]);
    ok(&mut other, &["INCRBY", "balance", "5"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "balance", "0"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Nil);
    assert_eq!(ok(&mut conn, &["GET", "balance"]), bulk("15"));

    // Untouched: runs. A read by another client is not a change.
    ok(&mut conn, &["WATCH", "balance", "missing"]);
    ok(&mut other, &["GET", "balance"]);
    ok(&mut other, &["DEL", "missing"]); // deletes nothing: no change
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "balance", "0"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Array(vec![Value::Okay]));

    // An LTRIM that removes nothing is a change for WATCH all the same (Redis signals the
    // key whatever the trim did), though nothing is logged.
    ok(&mut other, &["RPUSH", "list", "a", "b"]);
    ok(&mut conn, &["WATCH", "list"]);
    ok(&mut other, &["LTRIM", "list", "0", "-1"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["LLEN", "list"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Nil);

    // Changed by this very client before MULTI; and in another database only: no abort.
    ok(&mut conn, &["WATCH", "balance"]);
    ok(&mut conn, &["SET", "balance", "1"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["GET", "balance"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Nil);
    ok(&mut conn, &["WATCH", "balance"]);
    ok(&mut other, &["SELECT", "3"]);
    ok(&mut other, &["SET", "balance", "other db"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["GET", "balance"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Array(vec![bulk("1")]));

    // SMOVE changes its destination only when the member was not there already (Redis
    // signals the destination only then); its source always.
    ok(&mut other, &["SELECT", "0"]);
    ok(&mut other, &["SADD", "source", "a", "b"]);
    ok(&mut other, &["SADD", "destination", "a"]);
    for (member, destination_changed) in [("a", false), ("b", true)] {
        ok(&mut conn, &["WATCH", "destination"]);
        ok(&mut conn, &["MULTI"]);
        ok(&mut conn, &["SCARD", "destination"]);
        ok(&mut other, &["SMOVE", "source", "destination", member]);
        let exec = ok(&mut conn, &["EXEC"]);
        assert_eq!(
            exec == Value::Nil,
            destination_changed,
            "SMOVE {member}: {exec:?}"
        );
    }
    // The source changes even when the member was in the destination already.
    ok(&mut other, &["SADD", "source", "a", "c"]);
    ok(&mut conn, &["WATCH", "source"]);
    ok(&mut other, &["SMOVE", "source", "destination", "a"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SCARD", "source"]);
    assert_eq!(
        ok(&mut conn, &["EXEC"]),
        Value::Nil,
        "SMOVE changes its source"
    );

    // UNWATCH forgets.
    ok(&mut conn, &["WATCH", "balance"]);
    ok(&mut conn, &["UNWATCH"]);
    ok(&mut other, &["SELECT", "0"]);
    ok(&mut other, &["SET", "balance", "2"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["GET", "balance"]);
    assert_eq!(ok(&mut conn, &["EXEC"]), Value::Array(vec![bulk("2")]));
}

#[test]
fn flushes_swaps_moves_and_expiry_touch_watched_keys_as_in_redis() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let mut other = server.connection();
    let attempt = |conn: &mut redis::Connection| {
        ok(conn, &["MULTI"]);
        ok(conn, &["PING"]);
        ok(conn, &["EXEC"])
    };
    let aborted = Value::Nil;
    let ran = Value::Array(vec![Value::SimpleString("PONG".into())]);

    // FLUSHALL touches a watched key only if it existed.
    ok(&mut conn, &["WATCH", "absent"]);
    ok(&mut other, &["FLUSHALL"]);
    assert_eq!(attempt(&mut conn), ran);
    ok(&mut conn, &["SET", "present", "1"]);
    ok(&mut conn, &["WATCH", "present"]);
    ok(&mut other, &["FLUSHDB"]);
    assert_eq!(attempt(&mut conn), aborted);

    // SWAPDB touches keys that exist in either database.
    ok(&mut other, &["SELECT", "5"]);
    ok(&mut other, &["SET", "swapped", "in 5"]);
    ok(&mut conn, &["WATCH", "swapped"]);
    ok(&mut other, &["SWAPDB", "0", "5"]);
    assert_eq!(attempt(&mut conn), aborted);

    // MOVE changes the key in its database.
    ok(&mut conn, &["SET", "mover", "1"]);
    ok(&mut conn, &["WATCH", "mover"]);
    ok(&mut other, &["SELECT", "0"]);
    ok(&mut other, &["MOVE", "mover", "7"]);
    assert_eq!(attempt(&mut conn), aborted);

    // A key that expires between WATCH and EXEC aborts it.
    ok(&mut conn, &["SET", "brief", "1", "PX", "100"]);
    ok(&mut conn, &["WATCH", "brief"]);
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(attempt(&mut conn), aborted);

    // A key already expired at WATCH and deleted since is no change (whether the
    // background expiry or the EXISTS below deletes it).
    ok(&mut conn, &["SET", "gone", "1", "PX", "50"]);
    std::thread::sleep(std::time::Duration::from_millis(150));
    ok(&mut conn, &["WATCH", "gone"]);
    assert_eq!(ok(&mut other, &["EXISTS", "gone"]), Value::Int(0)); // lazily deleted
    assert_eq!(attempt(&mut conn), ran);
}

#[test]
fn a_disconnected_client_leaves_no_watch_behind() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut other = server.connection();
    for _ in 0..50 {
        let mut conn = server.connection();
        ok(&mut conn, &["WATCH", "k1", "k2"]);
        ok(&mut conn, &["MULTI"]);
        ok(&mut conn, &["SET", "k1", "v"]);
    }
    // Nothing to assert but that the server keeps serving and touches nobody's state.
    ok(&mut other, &["SET", "k1", "x"]);
    assert_eq!(ok(&mut other, &["GET", "k1"]), bulk("x"));
}

fn incremental_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("appendonlydir").join("appendonly.aof.1.incr.aof")
}

#[test]
fn a_transaction_is_logged_as_one_block_and_replayed_whole() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.connection();
    ok(&mut conn, &["SET", "before", "1"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "t1", "a"]);
    ok(&mut conn, &["SELECT", "2"]);
    ok(&mut conn, &["SET", "t2", "b"]);
    ok(&mut conn, &["DEL", "nothing"]); // changes nothing: logs nothing
    ok(&mut conn, &["EXEC"]);
    // A transaction with a single write is logged as that write alone.
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "single", "c"]);
    ok(&mut conn, &["GET", "single"]);
    ok(&mut conn, &["EXEC"]);
    server.kill9();
    let text = String::from_utf8_lossy(&std::fs::read(incremental_file(dir.path())).unwrap())
        .replace("\r\n", " ");
    assert_eq!(text.matches("MULTI").count(), 1, "{text}");
    assert_eq!(text.matches("EXEC").count(), 1, "{text}");
    let block = &text[text.find("MULTI").unwrap()..text.find("EXEC").unwrap()];
    assert!(block.contains("t1") && block.contains("t2"), "{text}");
    assert!(!block.contains("single"), "{text}");

    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(ok(&mut conn, &["GET", "t1"]), bulk("a"));
    ok(&mut conn, &["SELECT", "2"]);
    assert_eq!(ok(&mut conn, &["GET", "t2"]), bulk("b"));
    // The SELECT inside the block holds for what follows it.
    assert_eq!(ok(&mut conn, &["GET", "single"]), bulk("c"));
}

/// A logged block larger than `client-query-buffer-limit` (a script's effects are not
/// bounded by it) replays whole: the bound is for clients' transactions, not the log's.
#[test]
fn a_block_larger_than_the_query_buffer_limit_replays_whole() {
    let dir = temp_dir();
    let limit = [
        "--client-query-buffer-limit",
        "1mb",
        "--appendfsync",
        "always",
    ];
    let mut server = start_server(dir.path(), &limit);
    let mut conn = server.connection();
    // 300 keys of 8 KB in one script: 2.4 MB of effects in one MULTI … EXEC block.
    let script = "for i = 1, 300 do redis.call('SET', 'k' .. i, string.rep('x', 8192)) end";
    ok(&mut conn, &["EVAL", script, "0"]);
    server.kill9();
    let server = start_server(dir.path(), &limit);
    let mut conn = server.connection();
    assert_eq!(dbsize(&mut conn), 300);
    assert_eq!(ok(&mut conn, &["STRLEN", "k300"]), Value::Int(8192));
}

#[test]
fn a_block_cut_by_a_crash_is_dropped_whole_and_cut_off() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.connection();
    ok(&mut conn, &["SET", "before", "1"]);
    ok(&mut conn, &["MULTI"]);
    for i in 0..5 {
        ok(&mut conn, &["SET", &format!("in-block-{i}"), "x"]);
    }
    ok(&mut conn, &["EXEC"]);
    server.kill9();
    let file = incremental_file(dir.path());
    let bytes = std::fs::read(&file).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let multi_at = text.find("*1\r\n$5\r\nMULTI").unwrap();
    let exec_at = text.find("*1\r\n$4\r\nEXEC").unwrap();
    // Cut at every record boundary inside the block, and in the middle of the EXEC.
    let cuts: Vec<usize> = text[multi_at..exec_at]
        .match_indices("*3\r\n")
        .map(|(i, _)| multi_at + i)
        .chain([exec_at, exec_at + 5])
        .collect();
    for cut in cuts {
        std::fs::write(&file, &bytes[..cut]).unwrap();
        let mut server = start_server(dir.path(), &[]);
        let mut conn = server.connection();
        assert_eq!(ok(&mut conn, &["GET", "before"]), bulk("1"), "cut at {cut}");
        for i in 0..5 {
            assert_eq!(
                ok(&mut conn, &["EXISTS", &format!("in-block-{i}")]),
                Value::Int(0),
                "cut at {cut}: part of a torn transaction was applied"
            );
        }
        assert!(
            server.log().contains("ends in the middle of a record"),
            "cut at {cut}: {}",
            server.log()
        );
        server.shutdown();
        assert_eq!(
            std::fs::metadata(&file).unwrap().len() as usize,
            multi_at,
            "the torn block is cut off at its MULTI"
        );
        std::fs::write(&file, &bytes).unwrap();
    }
    // The whole block replays.
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    for i in 0..5 {
        assert_eq!(ok(&mut conn, &["GET", &format!("in-block-{i}")]), bulk("x"));
    }
}

#[test]
fn a_malformed_block_in_the_log_stops_start_up() {
    for records in [
        "*1\r\n$5\r\nMULTI\r\n*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nEXEC\r\n",
        "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n*1\r\n$4\r\nEXEC\r\n",
    ] {
        let dir = temp_dir();
        let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
        ok(&mut server.connection(), &["SET", "k", "v"]);
        server.shutdown();
        let file = incremental_file(dir.path());
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.extend_from_slice(records.as_bytes());
        std::fs::write(&file, &bytes).unwrap();
        let log = try_start_server(dir.path(), &[])
            .err()
            .expect("a malformed block must stop start-up");
        assert!(log.contains("Bad file format"), "{log}");
    }
}

#[test]
fn the_check_tool_cuts_a_torn_block_at_its_multi() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.connection();
    ok(&mut conn, &["SET", "before", "1"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["SET", "a", "1"]);
    ok(&mut conn, &["SET", "b", "2"]);
    ok(&mut conn, &["EXEC"]);
    server.kill9();
    let file = incremental_file(dir.path());
    let bytes = std::fs::read(&file).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    let multi_at = text.find("*1\r\n$5\r\nMULTI").unwrap();
    let exec_at = text.find("*1\r\n$4\r\nEXEC").unwrap();
    // Complete records, but no EXEC: a crash between the block's writes.
    std::fs::write(&file, &bytes[..exec_at]).unwrap();
    let tool = env!("CARGO_BIN_EXE_tessera-check-aof");
    let output = std::process::Command::new(tool)
        .arg(&file)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{report}");
    assert!(report.contains(&format!("ok_up_to={multi_at}")), "{report}");
    let output = std::process::Command::new(tool)
        .args(["--fix", "--yes"])
        .arg(&file)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    assert_eq!(std::fs::metadata(&file).unwrap().len() as usize, multi_at);
}

#[test]
fn background_jobs_queued_in_a_transaction_are_scheduled_then_run() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    ok(&mut conn, &["SET", "k", "v"]);
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["BGREWRITEAOF"]);
    assert_eq!(
        ok(&mut conn, &["EXEC"]),
        Value::Array(vec![Value::SimpleString(
            "Background append only file rewriting scheduled".into()
        )])
    );
    wait_for_background_jobs(&mut conn);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while info_field(&mut conn, "aof_rewrites").as_deref() != Some("1") {
        assert!(
            std::time::Instant::now() < deadline,
            "the scheduled rewrite never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    ok(&mut conn, &["MULTI"]);
    ok(&mut conn, &["BGSAVE"]);
    assert_eq!(
        ok(&mut conn, &["EXEC"]),
        Value::Array(vec![Value::SimpleString(
            "Background saving scheduled".into()
        )])
    );
}

/// A key already expired when WATCH ran is no change when FLUSHDB or SWAPDB takes it away
/// or swaps in another expired key; a live key swapped in, or an absent one replaced by an
/// expired one and then by a live one, is (Redis's `touchAllWatchedKeysInDb`).
#[test]
fn stale_watched_keys_under_flushdb_and_swapdb_as_in_redis() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--enable-debug-command", "yes"]);
    let mut conn = server.connection();
    let exec_after = |conn: &mut redis::Connection, setup: &[&[&str]]| -> Value {
        ok(conn, &["FLUSHALL"]);
        ok(conn, &["SELECT", "0"]);
        for step in setup {
            ok(conn, step);
        }
        ok(conn, &["MULTI"]);
        ok(conn, &["PING"]);
        ok(conn, &["EXEC"])
    };
    ok(&mut conn, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let stale = |key: &'static str| -> [&'static str; 5] { ["SET", key, "v", "PX", "1"] };
    let ran = Value::Array(vec![Value::SimpleString("PONG".into())]);
    // Expired at WATCH, flushed: no change.
    let flushed = exec_after(
        &mut conn,
        &[
            &stale("x"),
            &["DEBUG", "SLEEP", "0.01"],
            &["WATCH", "x"],
            &["FLUSHDB"],
        ],
    );
    assert_eq!(flushed, ran, "FLUSHDB of a stale watched key");
    // Expired at WATCH, swapped with another expired key: no change.
    let swapped_stale = exec_after(
        &mut conn,
        &[
            &stale("x"),
            &["SELECT", "1"],
            &stale("x"),
            &["SELECT", "0"],
            &["DEBUG", "SLEEP", "0.01"],
            &["WATCH", "x"],
            &["SWAPDB", "0", "1"],
        ],
    );
    assert_eq!(swapped_stale, ran, "SWAPDB of a stale key with a stale key");
    // Expired at WATCH, swapped with a live key: a change.
    let swapped_live = exec_after(
        &mut conn,
        &[
            &stale("x"),
            &["SELECT", "1"],
            &["SET", "x", "live"],
            &["SELECT", "0"],
            &["DEBUG", "SLEEP", "0.01"],
            &["WATCH", "x"],
            &["SWAPDB", "0", "1"],
        ],
    );
    assert_eq!(
        swapped_live,
        Value::Nil,
        "SWAPDB of a stale key with a live key"
    );
    // Absent at WATCH, replaced by an expired key: no change.
    let absent_to_stale = exec_after(
        &mut conn,
        &[
            &["SELECT", "1"],
            &stale("x"),
            &["SELECT", "0"],
            &["DEBUG", "SLEEP", "0.01"],
            &["WATCH", "x"],
            &["SWAPDB", "0", "1"],
        ],
    );
    assert_eq!(
        absent_to_stale, ran,
        "SWAPDB of an absent key with a stale key"
    );
    ok(&mut conn, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

/// The log's block for a transaction is Redis's, byte for byte: the first command's SELECT
/// before the MULTI (Redis propagates MULTI in the first command's database), the other
/// SELECTs inside, nothing for the reads.
#[test]
fn a_transaction_s_log_block_is_redis_s() {
    let Some(redis_binary) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let commands: &[&[&str]] = &[
        &["SET", "before", "1"],
        &["MULTI"],
        &["SELECT", "1"],
        &["SET", "t1", "a"],
        &["GET", "t1"],
        &["SELECT", "2"],
        &["SET", "t2", "b"],
        &["EXEC"],
        &["MULTI"],
        &["SET", "u", "1"],
        &["SET", "v", "2"],
        &["EXEC"],
    ];
    let log_of = |port: u16, dir: &std::path::Path| -> String {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = client.get_connection().unwrap();
        for command in commands {
            ok(&mut conn, command);
        }
        String::from_utf8_lossy(&std::fs::read(incremental_file(dir)).unwrap()).replace("\r\n", " ")
    };
    let redis_dir = temp_dir();
    let redis = common::RedisOracle::start_with(
        &redis_binary,
        redis_dir.path(),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let theirs = log_of(redis.port, redis_dir.path());
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendfsync", "always"]);
    let ours = log_of(server.port, dir.path());
    assert_eq!(ours, theirs);
    assert!(
        ours.contains("*2 $6 SELECT $1 1 *1 $5 MULTI *3 $3 SET $2 t1 $1 a *2 $6 SELECT $1 2"),
        "{ours}"
    );
}

/// EXEC on a replica whose link is down, under `replica-serve-stale-data no`: refused when
/// its queue holds a command a stale replica refuses, even though the link was up when it
/// was queued (Redis's EXEC takes its queue's flags).
#[test]
fn exec_of_reads_on_a_replica_gone_stale_is_refused_as_on_redis() {
    let Some(redis_binary) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let transcript = |port: u16| -> Vec<String> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = client.get_connection().unwrap();
        let mut admin = client.get_connection().unwrap();
        let mut t = Vec::new();
        let mut step = |conn: &mut redis::Connection, args: &[&str]| {
            t.push(format!("{:?}", run(conn, args)));
        };
        step(
            &mut admin,
            &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        );
        step(&mut conn, &["SET", "xx", "1"]);
        for queued in [&["GET", "xx"][..], &["PING"][..]] {
            step(&mut conn, &["MULTI"]);
            step(&mut conn, queued);
            step(&mut admin, &["REPLICAOF", "localhost", "0"]);
            step(&mut conn, &["EXEC"]);
            step(&mut admin, &["REPLICAOF", "NO", "ONE"]);
        }
        // MULTI itself may begin on a stale replica; the EXEC of a GET once it is not.
        step(&mut admin, &["REPLICAOF", "localhost", "0"]);
        step(&mut conn, &["MULTI"]);
        step(&mut admin, &["REPLICAOF", "NO", "ONE"]);
        step(&mut conn, &["GET", "xx"]);
        step(&mut conn, &["EXEC"]);
        t
    };
    let redis_dir = temp_dir();
    let redis =
        common::RedisOracle::start_with(&redis_binary, redis_dir.path(), &["--appendonly", "no"]);
    let theirs = transcript(redis.port);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let ours = transcript(server.port);
    assert_eq!(ours, theirs);
    assert!(
        ours[5].contains("EXECABORT") && ours[5].contains("MASTERDOWN"),
        "{ours:?}"
    );
    assert!(
        ours[10].contains("EXECABORT") && ours[10].contains("MASTERDOWN"),
        "{ours:?}"
    );
}
