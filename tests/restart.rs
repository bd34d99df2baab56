//! What a restart brings back, in the cases at the edges:
//!
//! - SHUTDOWN (with and without SAVE) while a compaction or a BGSAVE runs: a clean exit,
//!   the job's files gone or unlisted, every key after the restart;
//! - keys that expire around loading: expired before it, or while a slow load runs
//!   (`key-load-delay`): not served afterwards, never brought back; and a key whose TTL
//!   was removed or extended after a compaction keeps living past its old expiry time,
//!   however slowly the compaction wrote it (compared with Redis 7.0);
//! - MULTI/EXEC with failing commands: the log holds what Redis's holds, and the replay
//!   gives the state before the restart;
//! - a client that disconnects while blocked in BLPOP: a later push keeps its element.

mod common;

use common::dirs::file_names;
use common::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Every key of database 0 as (type, contents), whatever its type.
fn dataset(conn: &mut redis::Connection) -> BTreeMap<String, (String, String)> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis::cmd("TYPE").arg(&key).query(conn).unwrap();
            let value: redis::Value = match kind.as_str() {
                "string" => redis::cmd("GET").arg(&key).query(conn),
                "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query(conn),
                "hash" => redis::cmd("HGETALL").arg(&key).query(conn),
                "set" => redis::cmd("SMEMBERS").arg(&key).query(conn),
                _ => redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(conn),
            }
            .unwrap();
            (key, (kind, format!("{value:?}")))
        })
        .collect()
}

fn populate(conn: &mut redis::Connection, prefix: &str, count: usize) {
    let mut pipe = redis::pipe();
    for i in 0..count {
        pipe.cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg(format!("value {i} {}", "p".repeat(i % 30)))
            .ignore();
    }
    let _: () = pipe.query(conn).unwrap();
}

// ---------------------------------------------------------------------------------------
// SHUTDOWN while a background job runs.

/// Sends SHUTDOWN (or SHUTDOWN SAVE) and waits for the process to exit by itself.
fn shutdown_and_wait(server: &mut TestServer, save: bool) -> std::process::ExitStatus {
    let mut stream = server.raw();
    let request: &[u8] = if save {
        b"*2\r\n$8\r\nSHUTDOWN\r\n$4\r\nSAVE\r\n"
    } else {
        b"*1\r\n$8\r\nSHUTDOWN\r\n"
    };
    stream.write_all(request).unwrap();
    let mut child: Child = server.child.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not exit after SHUTDOWN:\n{}", server.log());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn shutdown_during_a_compaction_or_a_bgsave_exits_cleanly_and_keeps_every_key() {
    for job in ["BGREWRITEAOF", "BGSAVE"] {
        for save in [false, true] {
            let case = format!("SHUTDOWN{} during {job}", if save { " SAVE" } else { "" });
            let dir = temp_dir();
            // 200 ms a key: the job would take a minute, and notices a cancellation late.
            let args = [
                "--aof-rewrite-threads",
                "2",
                "--rdb-key-save-delay",
                "200000",
            ];
            let mut server = start_server(dir.path(), &args);
            let mut conn = server.connection();
            populate(&mut conn, "key:", 300);
            let expected = dataset(&mut conn);
            let before = manifest_files(&server.aof_dir());
            let _: String = redis::cmd(job).query(&mut conn).unwrap();
            let field = if job == "BGSAVE" {
                "rdb_bgsave_in_progress"
            } else {
                "aof_rewrite_in_progress"
            };
            // Once the job has written a few keys (of 300, at 200 ms each), it runs still.
            wait_for_keys_saved(&mut conn, 2);
            assert_eq!(info_field(&mut conn, field).as_deref(), Some("1"), "{case}");
            let started = Instant::now();
            let status = shutdown_and_wait(&mut server, save);
            assert!(status.success(), "{case}: {status}\n{}", server.log());
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{case}: the job was not stopped"
            );
            // No temp file is left in the data directory; dump.rdb only if SAVE asked.
            let root: Vec<String> = file_names(dir.path())
                .into_iter()
                .filter(|n| !n.starts_with("server-") && n != "appendonlydir")
                .collect();
            let mut wanted: Vec<String> = vec!["tessera.lock".into()];
            if save {
                wanted.insert(0, "dump.rdb".into());
            }
            assert_eq!(root, wanted, "{case}");
            // The manifest is the one before the job or the rotation's (one more
            // incremental file), and the job's parts are gone.
            let after = manifest_files(&server.aof_dir());
            assert!(
                after == before || (after.len() == before.len() + 1 && after.starts_with(&before)),
                "{case}: {before:?} then {after:?}"
            );
            let mut listed = after.clone();
            listed.push("appendonly.aof.manifest".into());
            listed.sort();
            assert_eq!(file_names(&server.aof_dir()), listed, "{case}");
            drop(server);
            let server = start_server(dir.path(), &[]);
            assert_eq!(dataset(&mut server.connection()), expected, "{case}");
            drop(server);
            if save {
                // The dump alone (the log off) has every key too.
                let server = start_server(dir.path(), &["--appendonly", "no"]);
                assert_eq!(dataset(&mut server.connection()), expected, "{case}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Expiry around loading, compared with Redis 7.0.

/// Where a scenario runs: Tessera or Redis, each with the log on under `always`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Tessera,
    Redis,
}

/// A server of either kind on `dir`, killed (SIGKILL) when dropped.
enum Running {
    Tessera(TestServer),
    Redis(RedisOracle),
}

impl Running {
    fn start(target: Target, dir: &Path, args: &[&str]) -> Running {
        let mut all = vec!["--appendonly", "yes", "--appendfsync", "always"];
        all.extend_from_slice(args);
        match target {
            Target::Tessera => Running::Tessera(start_server(dir, &all)),
            Target::Redis => {
                // Redis writes its base in one part whatever Tessera is told.
                if let Some(at) = all.iter().position(|a| *a == "--aof-rewrite-threads") {
                    all.drain(at..at + 2);
                }
                let redis = gated_redis();
                Running::Redis(RedisOracle::start_with(&redis, dir, &all))
            }
        }
    }

    fn connection(&self) -> redis::Connection {
        match self {
            Running::Tessera(server) => server.connection(),
            Running::Redis(redis) => redis.connection(),
        }
    }
}

/// Per key: its name, GET, and PTTL reduced to -2 (absent), -1 (no TTL) or 1 (a TTL).
type Observed = Vec<(String, Option<String>, i64)>;

/// What `keys` look like now.
fn observe(conn: &mut redis::Connection, keys: &[&str]) -> Observed {
    keys.iter()
        .map(|key| {
            let value: Option<String> = redis::cmd("GET").arg(*key).query(conn).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(*key).query(conn).unwrap();
            (key.to_string(), value, ttl.clamp(-2, 1))
        })
        .collect()
}

/// When a restart happened, counted from the start of the script before it.
struct Timing {
    restarted: Duration,
    ready: Duration,
}

/// Runs `script` on a fresh server of `target`, kills it, waits `pause`, restarts it
/// with `restart_args` and returns what `keys` look like once it is ready.
fn across_restart(
    target: Target,
    start_args: &[&str],
    script: &(dyn Fn(&mut redis::Connection) -> Instant + Sync),
    pause: Duration,
    restart_args: &[&str],
    keys: &[&str],
) -> (Observed, Timing, tempfile::TempDir) {
    let dir = temp_dir();
    let server = Running::start(target, dir.path(), start_args);
    // The script says when its expiry times start counting.
    let epoch = script(&mut server.connection());
    drop(server);
    std::thread::sleep(pause);
    let restarted = epoch.elapsed();
    let server = Running::start(target, dir.path(), restart_args);
    let ready = epoch.elapsed();
    let seen = observe(&mut server.connection(), keys);
    (seen, Timing { restarted, ready }, dir)
}

/// The same scenario on Tessera and on Redis, at once (loading delays are sleeps).
fn on_both(run: impl Fn(Target) -> Observed + Sync) -> Option<Observed> {
    require_redis_or_skip("expiry across a restart, compared with Redis")?;
    let (tessera, redis) = std::thread::scope(|scope| {
        let tessera = scope.spawn(|| run(Target::Tessera));
        let redis = scope.spawn(|| run(Target::Redis));
        (tessera.join().unwrap(), redis.join().unwrap())
    });
    assert_eq!(
        tessera, redis,
        "Tessera (left) and Redis 7.0 (right) differ"
    );
    Some(tessera)
}

fn set_px(conn: &mut redis::Connection, key: &str, ms: u64) {
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("v")
        .arg("PX")
        .arg(ms)
        .query(conn)
        .unwrap();
}

fn rewrite(conn: &mut redis::Connection) {
    let _: String = redis::cmd("BGREWRITEAOF").query(conn).unwrap();
    wait_until("the rewrite to end", Duration::from_secs(30), || {
        info_field(conn, "aof_rewrite_in_progress").as_deref() == Some("0")
            && info_field(conn, "aof_rewrite_scheduled").as_deref() == Some("0")
    });
}

#[test]
fn keys_expired_before_or_during_a_slow_load_are_not_served_nor_brought_back() {
    const KEYS: &[&str] = &[
        "base_gone",
        "base_passes",
        "base_stays",
        "log_gone",
        "log_passes",
        "log_stays",
        "filler0",
    ];
    // Expire times are counted from the first expiring SET: `*_gone` expire before the
    // restart (1.2 s after the script), `*_passes` at 3 s, while the restart loads for
    // over 3 s (3000 keys, 1 ms each). The fillers are written first, so that only the
    // rewrite runs between the SETs with a TTL and the restart.
    const PASSES_MS: u64 = 3000;
    let script = |conn: &mut redis::Connection| {
        populate(conn, "filler", 3000);
        let epoch = Instant::now();
        set_px(conn, "base_gone", 1000);
        set_px(conn, "base_passes", PASSES_MS);
        set_px(conn, "base_stays", 600_000);
        rewrite(conn);
        let spent = epoch.elapsed().as_millis() as u64;
        assert!(spent < 1500, "the rewrite took {spent} ms");
        set_px(conn, "log_gone", 200);
        set_px(conn, "log_passes", PASSES_MS - spent);
        set_px(conn, "log_stays", 600_000);
        epoch
    };
    let run = |target: Target| {
        let (seen, timing, dir) = across_restart(
            target,
            &["--aof-rewrite-threads", "1"],
            &script,
            Duration::from_millis(1200),
            &["--key-load-delay", "1000"],
            KEYS,
        );
        let passes = Duration::from_millis(PASSES_MS);
        assert!(
            timing.restarted < passes && timing.ready > passes + Duration::from_millis(200),
            "{target:?}: restarted at {:?}, ready at {:?}: the TTL did not pass while loading",
            timing.restarted,
            timing.ready
        );
        // Nothing comes back: not after another restart, nor after a compaction.
        let server = Running::start(target, dir.path(), &[]);
        let mut conn = server.connection();
        assert_eq!(observe(&mut conn, KEYS), seen, "{target:?}: second restart");
        rewrite(&mut conn);
        drop(server);
        let server = Running::start(target, dir.path(), &[]);
        assert_eq!(
            observe(&mut server.connection(), KEYS),
            seen,
            "{target:?}: after a compaction"
        );
        seen
    };
    let Some(seen) = on_both(run) else { return };
    let present: Vec<&str> = seen
        .iter()
        .filter(|(_, value, _)| value.is_some())
        .map(|(key, _, _)| key.as_str())
        .collect();
    assert_eq!(present, ["base_stays", "log_stays", "filler0"]);
}

#[test]
fn a_ttl_removed_after_a_compaction_outlives_the_old_expiry_time() {
    const KEYS: &[&str] = &["persisted", "extended", "untouched"];
    let script = |conn: &mut redis::Connection| {
        let epoch = Instant::now();
        set_px(conn, "persisted", 1000);
        set_px(conn, "extended", 1000);
        set_px(conn, "untouched", 1000);
        rewrite(conn);
        // Before the old expiry: the base holds the keys with it, the log the change.
        let _: i64 = redis::cmd("PERSIST").arg("persisted").query(conn).unwrap();
        let _: i64 = redis::cmd("PEXPIRE")
            .arg("extended")
            .arg(600_000)
            .query(conn)
            .unwrap();
        epoch
    };
    let run = |target: Target| {
        let (seen, _, _) =
            across_restart(target, &[], &script, Duration::from_millis(1200), &[], KEYS);
        seen
    };
    let Some(seen) = on_both(run) else { return };
    assert_eq!(
        seen,
        [
            ("persisted".to_string(), Some("v".to_string()), -1),
            ("extended".to_string(), Some("v".to_string()), 1),
            ("untouched".to_string(), None, -2),
        ]
    );
}

#[test]
fn a_ttl_removed_while_a_slow_compaction_writes_the_key_outlives_the_old_expiry_time() {
    // The compaction captures the key with its TTL and writes it (5 ms a key, behind 300
    // keys in lower slots) after that TTL has passed; PERSIST, in the log after the base,
    // needs it there.
    let key = (0..)
        .map(|i| format!("late{i}"))
        .find(|k| tessera::keyspace::key_slot(k.as_bytes()) > 16000)
        .unwrap();
    let keys = [key.as_str()];
    let script = |conn: &mut redis::Connection| {
        populate(conn, "filler", 300);
        let epoch = Instant::now();
        set_px(conn, &key, 1000);
        let _: String = redis::cmd("BGREWRITEAOF").query(conn).unwrap();
        let _: i64 = redis::cmd("PERSIST").arg(&key).query(conn).unwrap();
        wait_until("the rewrite to end", Duration::from_secs(30), || {
            info_field(conn, "aof_rewrite_in_progress").as_deref() == Some("0")
        });
        assert_eq!(
            info_field(conn, "aof_last_bgrewrite_status").as_deref(),
            Some("ok")
        );
        let value: Option<String> = redis::cmd("GET").arg(&key).query(conn).unwrap();
        assert_eq!(value.as_deref(), Some("v"), "served before the restart");
        epoch
    };
    let run = |target: Target| {
        let (seen, _, _) = across_restart(
            target,
            &["--aof-rewrite-threads", "1", "--rdb-key-save-delay", "5000"],
            &script,
            Duration::ZERO,
            &[],
            &keys,
        );
        seen
    };
    let Some(seen) = on_both(run) else { return };
    assert_eq!(seen, [(key.clone(), Some("v".to_string()), -1)]);
}

// ---------------------------------------------------------------------------------------
// MULTI/EXEC with failing commands.

/// The records of a log file, each as its words.
fn log_records(bytes: &[u8]) -> Vec<Vec<String>> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.split("\r\n");
    let mut records = Vec::new();
    while let Some(head) = lines.next() {
        let Some(count) = head.strip_prefix('*') else {
            assert!(head.is_empty(), "not a record: {head:?}");
            continue;
        };
        let count: usize = count.parse().unwrap();
        let words = (0..count)
            .map(|_| {
                lines.next().unwrap(); // $<length>
                lines.next().unwrap().to_string()
            })
            .collect();
        records.push(words);
    }
    records
}

/// Runs the transactions on a raw connection; returns every reply as sent (the redis
/// crate turns an EXEC reply holding errors into an error).
fn transactions(port: u16) -> Vec<String> {
    let commands: &[&[&str]] = &[
        &["SET", "s", "not a number"],
        &["RPUSH", "l", "a"],
        // Two fail at run time (not an integer, wrong type), three succeed.
        &["MULTI"],
        &["SET", "a", "1"],
        &["INCR", "s"],
        &["LPUSH", "s", "x"],
        &["INCR", "a"],
        &["HSET", "h", "f", "v"],
        &["EXEC"],
        // One fails, one succeeds: one record, no MULTI block.
        &["MULTI"],
        &["INCR", "s"],
        &["RPUSH", "l", "b"],
        &["EXEC"],
        // All fail: nothing is logged.
        &["MULTI"],
        &["INCR", "s"],
        &["LPUSH", "s", "y"],
        &["EXEC"],
        &["SET", "last", "1"],
    ];
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    commands
        .iter()
        .map(|args| {
            let mut request = format!("*{}\r\n", args.len());
            for arg in *args {
                request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
            }
            let reply = raw_exchange(&mut stream, request.as_bytes(), Duration::from_secs(5));
            String::from_utf8_lossy(&reply).into_owned()
        })
        .collect()
}

#[test]
fn multi_exec_with_failing_commands_logs_what_redis_logs_and_replays_to_the_same_state() {
    let Some(redis_path) = require_redis_or_skip("MULTI/EXEC log compared with Redis") else {
        return;
    };
    // Redis: its incremental file after the same commands.
    let redis_dir = temp_dir();
    let redis = RedisOracle::start_with(
        &redis_path,
        redis_dir.path(),
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let redis_replies = transactions(redis.port);
    let redis_state = dataset(&mut redis.connection());
    drop(redis);
    let redis_log = std::fs::read(
        redis_dir
            .path()
            .join("appendonlydir/appendonly.aof.1.incr.aof"),
    )
    .unwrap();

    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.connection();
    let replies = transactions(server.port);
    let before = dataset(&mut conn);
    assert_eq!(replies, redis_replies);
    assert_eq!(before, redis_state);
    let log = std::fs::read(server.last_incremental_file()).unwrap();
    assert_eq!(log_records(&log), log_records(&redis_log));
    // That is: only what succeeded, a MULTI block only around more than one record.
    let words = |list: &[&str]| list.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let expected: Vec<Vec<String>> = [
        &["SELECT", "0"][..],
        &["SET", "s", "not a number"],
        &["RPUSH", "l", "a"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["HSET", "h", "f", "v"],
        &["EXEC"],
        &["RPUSH", "l", "b"],
        &["SET", "last", "1"],
    ]
    .iter()
    .map(|list| words(list))
    .collect();
    assert_eq!(log_records(&log), expected);
    server.kill9();
    let server = start_server(dir.path(), &[]);
    assert_eq!(dataset(&mut server.connection()), before);
}

// ---------------------------------------------------------------------------------------
// A blocked client that goes away.

fn blocked_clients(conn: &mut redis::Connection) -> String {
    info_field(conn, "blocked_clients").unwrap()
}

/// Sends `BLPOP key 0` on a connection of its own; waits until `count` clients are
/// blocked.
fn block_on(server: &TestServer, conn: &mut redis::Connection, count: &str) -> TcpStream {
    let mut stream = server.raw();
    stream
        .write_all(b"*3\r\n$5\r\nBLPOP\r\n$5\r\nqueue\r\n$1\r\n0\r\n")
        .unwrap();
    wait_until("the client to block", Duration::from_secs(5), || {
        blocked_clients(conn) == count
    });
    stream
}

#[test]
fn a_client_gone_while_blocked_leaves_a_later_push_in_the_list() {
    for reset in [false, true] {
        let case = if reset { "reset" } else { "closed" };
        let dir = temp_dir();
        let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
        let mut conn = server.connection();
        // The client that goes away blocks first: it is first in line for the key.
        let dead = block_on(&server, &mut conn, "1");
        let mut live = block_on(&server, &mut conn, "2");
        if reset {
            socket2::SockRef::from(&dead)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        }
        drop(dead);
        // The server learns of it (not asserted: a server that does not must still not
        // hand it the element).
        let deadline = Instant::now() + Duration::from_secs(2);
        while blocked_clients(&mut conn) != "1" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        // The first push goes to the live client, the second stays in the list.
        let _: i64 = redis::cmd("RPUSH")
            .arg("queue")
            .arg("first")
            .query(&mut conn)
            .unwrap();
        let reply = read_for(&mut live, Duration::from_secs(2));
        assert_eq!(
            String::from_utf8_lossy(&reply),
            "*2\r\n$5\r\nqueue\r\n$5\r\nfirst\r\n",
            "{case}"
        );
        let _: i64 = redis::cmd("RPUSH")
            .arg("queue")
            .arg("second")
            .query(&mut conn)
            .unwrap();
        let list: Vec<String> = redis::cmd("LRANGE")
            .arg("queue")
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .unwrap();
        assert_eq!(list, ["second"], "{case}");
        assert_eq!(blocked_clients(&mut conn), "0", "{case}");
        server.kill9();
        let server = start_server(dir.path(), &[]);
        let list: Vec<String> = redis::cmd("LRANGE")
            .arg("queue")
            .arg(0)
            .arg(-1)
            .query(&mut server.connection())
            .unwrap();
        assert_eq!(list, ["second"], "{case}: after a restart");
    }
}
